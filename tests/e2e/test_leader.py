"""High availability: two replicas of kubequota elect one leader through a
coordination.k8s.io/v1 Lease in the simulator.

  - exactly one replica leads: the lease names it and its /metrics gauge kubequota_leader is
    1 while the other's is 0;
  - the leader killed with SIGKILL: the other takes over once the lease has expired
    (lease duration plus a margin), with leaseTransitions + 1; a restarted replica stands by;
  - the leader stopped with SIGTERM releases the lease (holderIdentity ""), so the other
    takes over at once, long before the (here 30 s) lease could have expired.

Each replica's identity is read from its log (event=leader_election_started identity=...).
Skipped, with a message, while bin/kubequota does not know --leader-elect.
"""

import re
import subprocess
import time
import unittest

import apisim
from kqtest import (SANITIZER_MARKERS, Kubequota, SchedulerDriver, Sim, binary, have_binary,
                    queues_config, wait_until)

CONFIG = queues_config({"name": "default"})
LEASE_NS = "kube-system"
LEASE_NAME = "kubequota-e2e"  # not the default: the flag is part of what is tested

_support = None


def leader_election_missing():
    """'' when the binary has --leader-elect, else why the tests are skipped."""
    global _support
    if _support is None:
        if not have_binary():
            _support = "%s not built" % binary()
        else:
            try:
                r = subprocess.run([binary(), "serve", "--help"], capture_output=True, text=True,
                                   timeout=30)
                text = r.stdout + r.stderr
            except (OSError, subprocess.TimeoutExpired) as e:
                text = str(e)
            _support = "" if "--leader-elect" in text else \
                "%s serve has no --leader-elect yet (leader election not wired in main.c)" % binary()
    return _support


METRIC_RE = re.compile(r"^kubequota_leader(?:\{[^}]*\})?\s+(\S+)\s*$", re.M)
IDENTITY_RE = re.compile(r"event=leader_election_started lease=(\S+) identity=(\S+)")


class LeaderElectionTest(unittest.TestCase):

    def setUp(self):
        why = leader_election_missing()
        if why:
            self.skipTest(why)
        self.sim = Sim()
        self.addCleanup(self.sim.stop)
        self.kq = None  # run.py prints self.kq's log on a failure: the replica in focus

    # ---- replicas ----
    def replica(self, name, duration, deadline, retry):
        kq = Kubequota(self.sim, CONFIG, name=name, extra_args=[
            "--leader-elect", "--lease-namespace", LEASE_NS, "--lease-name", LEASE_NAME,
            "--lease-duration", duration, "--renew-deadline", deadline, "--retry-period", retry])
        kq.killed = False
        self.addCleanup(self.stop_clean, kq)
        return kq

    def stop_clean(self, kq):
        rc = None
        try:
            if kq.alive():
                rc = kq.stop()
        finally:
            kq.kill()
        if rc not in (None, 0):
            raise AssertionError("%s exited with %s after SIGTERM:\n%s"
                                 % (kq.workdir, rc, kq.log_tail(30)))
        log = kq.logs()
        for marker in SANITIZER_MARKERS:
            if marker in log:
                raise AssertionError("sanitizer report (%s) in %s:\n%s"
                                     % (marker, kq.log_path, kq.log_tail(80)))

    def sigkill(self, kq):
        kq.proc.kill()
        kq.proc.wait()
        kq.killed = True

    def identity(self, kq):
        """The identity of kq's current run (the last election start in its log)."""
        run = kq.logs().rsplit("---- start #", 1)[-1]
        found = IDENTITY_RE.findall(run)
        if not found:
            raise AssertionError("no event=leader_election_started in %s" % kq.log_path)
        lease, ident = found[-1]
        self.assertEqual(lease, "%s/%s" % (LEASE_NS, LEASE_NAME))
        return ident

    # ---- observations ----
    def lease(self):
        try:
            return self.sim.world.get("leases", LEASE_NS, LEASE_NAME)
        except apisim.ApiError:
            return None

    def spec(self):
        return (self.lease() or {}).get("spec") or {}

    def gauge(self, kq):
        r = kq.get("/metrics")
        if r.status != 200:
            raise AssertionError("GET /metrics -> %d" % r.status)
        m = METRIC_RE.findall(r.text)
        if len(m) != 1:
            raise AssertionError("expected one kubequota_leader sample in /metrics, found %d" % len(m))
        return float(m[0])

    def sole_leader(self, replicas):
        """The replica that leads, when exactly one does (by gauge) and the lease names it;
        otherwise raises AssertionError describing what was seen."""
        gauges = {kq.workdir: self.gauge(kq) for kq in replicas}
        leaders = [kq for kq in replicas if gauges[kq.workdir] == 1]
        others = [kq for kq in replicas if gauges[kq.workdir] == 0]
        holder = self.spec().get("holderIdentity")
        if len(leaders) != 1 or len(others) != len(replicas) - 1:
            raise AssertionError("gauges %s, lease holder %r" % (gauges, holder))
        if holder != self.identity(leaders[0]):
            raise AssertionError("the gauge says %s leads but the lease names %r"
                                 % (self.identity(leaders[0]), holder))
        return leaders[0]

    def assert_stays_leader(self, kq, replicas, checks=6):
        """Over several renew periods the same replica leads (a stable election)."""
        for _ in range(checks):
            now = wait_until(lambda: self.sole_leader(replicas), 5, 0.05, "a sole leader")
            self.assertIs(now, kq, "leadership moved without a failure")
            time.sleep(0.2)

    # ---- scenarios ----
    def test_sigkill_of_the_leader_fails_over_after_the_lease_expires(self):
        a = self.replica("kq-a", "2s", "1500ms", "250ms").start()
        b = self.replica("kq-b", "2s", "1500ms", "250ms").start()
        self.assertNotEqual(self.identity(a), self.identity(b))
        leader = wait_until(lambda: self.sole_leader([a, b]), 15, 0.1, "exactly one leader")
        standby = b if leader is a else a
        self.kq = standby
        self.assert_stays_leader(leader, [a, b])
        spec = self.spec()
        self.assertEqual(spec.get("leaseDurationSeconds"), 2)
        for t in ("acquireTime", "renewTime"):
            self.assertRegex(spec.get(t) or "", r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")
        transitions = spec.get("leaseTransitions") or 0
        old = self.identity(leader)

        self.sigkill(leader)
        t0 = time.monotonic()
        # lease duration 2 s + retry period with jitter + margin for a loaded machine
        wait_until(lambda: self.sole_leader([standby]) is standby, 2 + 8, 0.05,
                   "the standby to take over the expired lease")
        took = time.monotonic() - t0
        spec = self.spec()
        self.assertEqual(spec.get("holderIdentity"), self.identity(standby))
        self.assertEqual(spec.get("leaseTransitions"), transitions + 1)
        self.assertTrue("event=leader_acquired" in standby.logs(),
                        "no event=leader_acquired in the new leader's log")
        print("  (takeover %.2fs after SIGKILL of %s)" % (took, old), flush=True)

        # the killed replica comes back with a new identity and stands by
        self.kq = leader
        leader.start()
        self.assertNotEqual(self.identity(leader), old)
        wait_until(lambda: self.gauge(leader) == 0 and "event=leader_observed" in
                   leader.logs().rsplit("---- start #", 1)[-1], 10, 0.05,
                   "the restarted replica to see the leader")
        self.assert_stays_leader(standby, [a, b])
        self.assertEqual(self.spec().get("leaseTransitions"), transitions + 1)

    def test_sigterm_releases_the_lease_for_an_immediate_takeover(self):
        # a 30 s lease: a takeover within 10 s can only come from the release
        a = self.replica("kq-a", "30s", "20s", "250ms").start()
        b = self.replica("kq-b", "30s", "20s", "250ms").start()
        leader = wait_until(lambda: self.sole_leader([a, b]), 15, 0.1, "exactly one leader")
        standby = b if leader is a else a
        self.kq = leader
        transitions = self.spec().get("leaseTransitions") or 0
        old = self.identity(leader)

        rc = leader.stop()
        self.assertEqual(rc, 0, "kubequota should exit 0 on SIGTERM:\n%s" % leader.log_tail(20))
        spec = self.spec()
        # released, or already taken by the standby (its next attempt may have come first)
        self.assertIn(spec.get("holderIdentity"), ("", self.identity(standby)),
                      "after SIGTERM the lease still names %r" % spec.get("holderIdentity"))
        if spec.get("holderIdentity") == "":
            self.assertEqual(spec.get("leaseDurationSeconds"), 1)
        self.assertNotEqual(spec.get("holderIdentity"), old)
        self.assertTrue("event=leader_released" in leader.logs(),
                        "no event=leader_released in the log:\n%s" % leader.log_tail(10))

        self.kq = standby
        wait_until(lambda: self.sole_leader([standby]) is standby, 10, 0.05,
                   "the standby to take over the released lease")
        spec = self.spec()
        self.assertEqual(spec.get("holderIdentity"), self.identity(standby))
        self.assertEqual(spec.get("leaseTransitions"), transitions + 1)
        self.assertEqual(spec.get("leaseDurationSeconds"), 30)


if __name__ == "__main__":
    unittest.main()


ELASTIC_CONFIG = queues_config(
    {"name": "default"},
    {"name": "team-a", "resources": {"guaranteed": {"vcore": "4"}, "max": {"vcore": "8"}}},
    {"name": "team-b", "resources": {"guaranteed": {"vcore": "4"}, "max": {"vcore": "8"}}},
)
EVICTED_RE = re.compile(r'^kubequota_reclaim_evictions_total\{result="evicted"\}\s+(\S+)\s*$', re.M)
STATUS_WRITES_RE = re.compile(
    r'^kubequota_elasticquota_status_writes_total\{result="(success|failure)"\}\s+(\S+)\s*$', re.M)
EQ_GROUP = "scheduling.x-k8s.io"  # scheduler-plugins' API group: status is a subresource


class FailoverActsOnceTest(LeaderElectionTest):
    """Two replicas serve from the same state, but only the leader acts: reclaim evicts
    exactly the pods it must (the standby evicts none), only the leader writes ElasticQuota
    status (the standby's write counters stay at zero; after the failover the new leader
    writes), and the charge for a pod that ran across a failover is its lifetime, neither
    lost nor doubled (shared metering state). These are the flags the chart renders for
    replicaCount > 1 (--leader-elect, --lease-namespace, --lease-name)."""

    # the election scenarios themselves run once, in LeaderElectionTest
    test_sigkill_of_the_leader_fails_over_after_the_lease_expires = None
    test_sigterm_releases_the_lease_for_an_immediate_takeover = None

    def replica(self, name, duration, deadline, retry, state_dir=None):
        kq = Kubequota(self.sim, ELASTIC_CONFIG, name=name, extra_args=[
            "--leader-elect", "--lease-namespace", LEASE_NS, "--lease-name", LEASE_NAME,
            "--lease-duration", duration, "--renew-deadline", deadline, "--retry-period", retry,
            "--reclaim-grace", "1500", "--elastic-tick", "100", "--status-interval", "200",
            "--metering", "interval=0.2", "--metering", "min-runtime=1",
            "--metering", "increment=0",  # a flat price: the charge is the lifetime alone
            "--metering", "state-dir=%s" % state_dir])
        kq.killed = False
        self.addCleanup(self.stop_clean, kq)
        return kq

    def schedule(self, kq, name):
        return SchedulerDriver(kq, self.sim).schedule("default", name)

    def pod(self, name, user, cpu, priority=0, queue=None):
        from kqtest import pod_manifest
        p = pod_manifest(name, user=user, cpu=str(cpu), memory="64Mi", queue=queue)
        p["spec"]["priority"] = priority
        return self.sim.create_pod(p)

    def alive(self, name):
        return any(p["metadata"]["name"] == name for p in self.sim.state()["pods"])

    def evicted(self, kq):
        m = EVICTED_RE.findall(kq.get("/metrics").text)
        return int(float(m[0])) if m else 0

    def status_writes(self, kq):
        """Status writes a replica attempted (success + failure)."""
        return sum(int(float(v)) for _, v in STATUS_WRITES_RE.findall(kq.get("/metrics").text))

    def eq_used_cpu(self, ns, name):
        r = self.sim.http.get("/apis/%s/v1alpha1/namespaces/%s/elasticquotas/%s" % (EQ_GROUP, ns, name))
        self.assertEqual(r.status, 200, r.text)
        return ((r.json().get("status") or {}).get("used") or {}).get("cpu")

    def charged(self, kq, user):
        r = kq.get("/ws/v1/partition/default/charges?user=%s" % user)
        self.assertEqual(r.status, 200, r.text)
        users = r.json()["users"]
        return users[0]["totalCredits"] if users else 0.0

    def test_only_the_leader_evicts_and_charges(self):
        import os
        import tempfile
        from kqtest import tmp_root
        state = tempfile.mkdtemp(prefix="shared-state-", dir=tmp_root())
        os.rmdir(state)  # metering creates it (0700)
        self.sim.world.add_node("node-9", cpu="8", memory="64Gi")  # the only node
        for n in ("node-1", "node-2", "node-3"):
            self.sim.world.delete_node(n)
        a = self.replica("kq-a", "2s", "1500ms", "250ms", state).start()
        b = self.replica("kq-b", "2s", "1500ms", "250ms", state).start()
        leader = wait_until(lambda: self.sole_leader([a, b]), 15, 0.1, "exactly one leader")
        standby = b if leader is a else a
        self.kq = leader

        # a metered pod that will run across the failover (root.default, no elastic min)
        self.pod("mia-1", "mia", "500m")
        ok, why = self.schedule(leader, "mia-1")
        self.assertTrue(ok, why)
        began = time.time()

        # team-a borrows team-b's idle min on the only node (8 cpu): a1..a3 at 2 cpu each
        for name, prio in (("a1", 1), ("a2", 5), ("a3", 10)):
            self.pod(name, "alice", 2, prio, queue="root.team-a")
            ok, why = self.schedule(leader, name)
            self.assertTrue(ok, "%s: %s" % (name, why))
        # team-b's pod arrives and asks for its min back (filtered by both replicas, as a
        # scheduler may reach either): team-a must give back exactly one pod, the lowest one
        self.pod("b1", "bob", 2, 0, queue="root.team-b")
        for kq in (leader, standby):
            self.schedule(kq, "b1")
        wait_until(lambda: not self.alive("a1"), 20, 0.1, "a1 to be evicted")
        time.sleep(2.0)  # a few more reclaim ticks (grace 1.5 s): nothing more may go
        self.assertTrue(self.alive("a2") and self.alive("a3"), "only a1 had to go")
        self.assertEqual(self.sim.state()["counters"]["evictions"], 1)
        self.assertEqual(self.evicted(leader), 1)
        self.assertEqual(self.evicted(standby), 0, "the standby must not evict")

        # ElasticQuota status: an object with a pod in its namespace gets status.used, written
        # by the leader alone (both replicas watch the object and see the pod)
        body = {"apiVersion": EQ_GROUP + "/v1alpha1", "kind": "ElasticQuota",
                "metadata": {"name": "web-quota", "namespace": "web"},
                "spec": {"min": {"cpu": "1"}, "max": {"cpu": "2"}}}
        r = self.sim.http.post("/apis/%s/v1alpha1/namespaces/web/elasticquotas" % EQ_GROUP, body)
        self.assertEqual(r.status, 201, r.text)
        from kqtest import pod_manifest
        # cpu only: the quota names no memory (CapacityScheduling reads a max without memory
        # as 0 memory)
        w = pod_manifest("w1", ns="web", user="wendy", cpu="1", memory=None)
        self.sim.create_pod(w)
        ok, why = SchedulerDriver(leader, self.sim).schedule("web", "w1")
        self.assertTrue(ok, why)
        wait_until(lambda: self.eq_used_cpu("web", "web-quota") == "1", 15, 0.1,
                   "status.used of web-quota")
        time.sleep(1.0)  # several status intervals (200 ms) on both replicas
        self.assertGreater(self.status_writes(leader), 0)
        self.assertEqual(self.status_writes(standby), 0, "the standby must not write ElasticQuota status")

        # failover: the leader dies; the standby takes over and continues mia's charge from
        # the shared checkpoint
        self.sigkill(leader)
        self.kq = standby
        wait_until(lambda: self.sole_leader([standby]) is standby, 10, 0.05,
                   "the standby to take over")
        time.sleep(0.5)
        before = time.time()
        self.sim.delete_pod("default", "mia-1")
        wait_until(lambda: standby.get("/ws/v1/partition/default/prices").json()["runningPods"] ==
                   len([p for p in self.sim.state()["pods"] if p["spec"].get("nodeName")]),
                   10, 0.05, "mia's pod to end in metering")
        after = time.time()
        # the new leader keeps status current: w1 goes, web-quota's used drops to 0
        self.sim.delete_pod("web", "w1")
        wait_until(lambda: self.eq_used_cpu("web", "web-quota") in ("0", None), 15, 0.1,
                   "the new leader to write web-quota's status")
        self.assertGreater(self.status_writes(standby), 0)
        total = self.charged(standby, "mia")
        # 0.5 cpu per second at multiplier 1; the lifetime lies within [before, after] of the
        # bind (+/- slack): charged once, not lost during the takeover, not twice
        lo, hi = 0.5 * (before - began - 1.0), 0.5 * (after - began + 1.0)
        self.assertTrue(lo <= total <= hi, "mia was charged %.3f; expected between %.3f and %.3f"
                        % (total, lo, hi))
