"""Fair admission behind a scheduling gate (issue 18, docs/gating.md): pods created with the
gate kubequota.io/admission wait until kubequota's admission controller removes it; a fake
kube-scheduler filters and binds only ungated pods (kube-scheduler never schedules a gated
one: kubernetes pkg/scheduler/framework/plugins/schedulinggates). Every count below is
read from the API simulator's state, never from kubequota's own numbers."""

import threading
import time

from kqtest import (KQTestCase, SCHED, Kubequota, SchedulerDriver, gate_release_order, pod_manifest, queues_config,
                    wait_until)

GATE = "kubequota.io/admission"


def alive(p):
    return p["status"].get("phase") not in ("Succeeded", "Failed") and \
        not p["metadata"].get("deletionTimestamp")


def gated(p):
    return any(g.get("name") == GATE for g in p["spec"].get("schedulingGates") or [])


def ours(p):
    return p["spec"].get("schedulerName") == SCHED


def cpu_of(p):
    q = p["spec"]["containers"][0]["resources"]["requests"]["cpu"]
    return int(q[:-1]) if q.endswith("m") else int(float(q) * 1000)


class FakeScheduler:
    """kube-scheduler's loop over the extender: every ungated, unbound pod of kubequota's
    scheduler goes through filter and, if a node is left, bind."""

    def __init__(self, test):
        self.test, self.stop_ev, self.errors = test, threading.Event(), []
        self.t = threading.Thread(target=self.run, daemon=True)

    def start(self):
        self.t.start()
        return self

    def run(self):
        while not self.stop_ev.is_set():
            try:
                for p in self.test.sim.state()["pods"]:
                    if ours(p) and alive(p) and not gated(p) and not p["spec"].get("nodeName"):
                        self.test.sched.schedule(p["metadata"]["namespace"], p["metadata"]["name"])
            except Exception as e:  # kubequota restarting: try again
                self.errors.append(repr(e))
            self.stop_ev.wait(0.05)

    def stop(self):
        self.stop_ev.set()
        self.t.join(10)


class Monitor:
    """Polls the simulator every 50 ms: the cpu of live pods of `user` that are bound or
    ungated (reserved) must never exceed the limit; `bound_only` checks bound pods only."""

    def __init__(self, test, user, limit_m, bound_only=False):
        self.test, self.user, self.limit, self.bound_only = test, user, limit_m, bound_only
        self.stop_ev, self.worst, self.polls = threading.Event(), 0, 0
        self.t = threading.Thread(target=self.run, daemon=True)

    def start(self):
        self.t.start()
        return self

    def run(self):
        while not self.stop_ev.is_set():
            total = 0
            for p in self.test.sim.state()["pods"]:
                if not (ours(p) and alive(p)) or self.user not in p["metadata"]["annotations"].get(
                        "kubequota.io/user-info", ""):
                    continue
                if p["spec"].get("nodeName") or (not self.bound_only and not gated(p)):
                    total += cpu_of(p)
            self.worst = max(self.worst, total)
            self.polls += 1
            self.stop_ev.wait(0.05)

    def stop(self):
        self.stop_ev.set()
        self.t.join(10)
        self.test.assertLessEqual(self.worst, self.limit,
                                  "over-admission: %dm bound+reserved, limit %dm" % (self.worst, self.limit))
        self.test.assertGreater(self.polls, 0)


ALICE_4CPU = [{"limit": "alice", "users": ["alice"], "maxresources": {"cpu": "4"}}]


class GatingTest(KQTestCase):
    CONFIG = queues_config({"name": "default"}, {"name": "dev", "limits": ALICE_4CPU})
    EXTRA_ARGS = ("--admission-gate",)

    def gated_pod(self, name, user="alice", cpu="1", queue="root.dev", **kw):
        return self.sim.create_pod(pod_manifest(name, user=user, cpu=cpu, memory="64Mi", queue=queue,
                                                gates=(GATE,), **kw))

    def pods(self):
        return {p["metadata"]["name"]: p for p in self.sim.state()["pods"] if alive(p)}

    def ungated(self):
        return sorted(n for n, p in self.pods().items() if ours(p) and not gated(p))

    def bound(self):
        return sorted(n for n, p in self.pods().items() if p["spec"].get("nodeName"))

    def test_releases_exactly_what_fits(self):
        mon = Monitor(self, "alice", 4000).start()
        for i in range(10):
            self.gated_pod("p%d" % i)
        wait_until(lambda: len(self.ungated()) == 4, timeout=15, msg="4 pods ungated")
        first = self.ungated()
        time.sleep(5)  # nothing more is released while the 4 are reserved
        self.assertEqual(self.ungated(), first)
        # the gate is the only gate removed, and only on these pods
        for n, p in self.pods().items():
            self.assertEqual(gated(p), n not in first, n)
        sched = FakeScheduler(self).start()
        try:
            wait_until(lambda: self.bound() == first, timeout=15, msg="the 4 released pods bound")
            time.sleep(1)
            self.assertEqual(self.bound(), first)
            self.assertEqual(len(self.ungated()), 4)
            for n in first[:2]:
                self.sim.delete_pod("default", n)
            wait_until(lambda: len(self.ungated()) == 4 and len(self.bound()) == 4, timeout=15,
                       msg="2 more released and bound after 2 deletions")
            time.sleep(2)
            now = self.ungated()
            self.assertEqual(len(now), 4)
            self.assertEqual(len(set(now) - set(first)), 2, "exactly 2 more ungated")
        finally:
            sched.stop()
            mon.stop()
        # the wait is visible: the REST view lists the 4 still gated, in order, with a reason
        r = self.kq.get_json("/ws/v1/partition/default/gating/waiting")
        q = [x for x in r if x["queue"] == "root.dev"][0]
        self.assertEqual(q["waiting"], 4)
        self.assertEqual([p["position"] for p in q["pods"]], [1, 2, 3, 4])
        self.assertEqual(sorted(p["name"] for p in q["pods"]),
                         sorted(n for n, p in self.pods().items() if gated(p)))
        self.assertIn("alice", q["pods"][0]["reason"])
        # ... and each waiting pod got one Event saying why, in the filter's words
        events = [e for e in self.sim.state()["events"] if e.get("reason") == "WaitingForQuota"]
        waiting = {p["name"] for p in q["pods"]}
        named = [e["involvedObject"]["name"] for e in events]
        self.assertTrue(waiting <= set(named), (waiting, named))
        # metrics: 4 + 2 releases of alice, 4 waiting, none reserved once all bound
        text = self.kq.get("/metrics").text
        self.assertIn('kubequota_gating_releases_total{user="alice"} 6\n', text)
        self.assertIn("kubequota_gating_waiting_pods 4\n", text)
        self.assertIn("kubequota_gating_reserved_pods 0\n", text)
        self.assertIn('kubequota_gating_wait_seconds_count 6\n', text)
        for e in events:
            self.assertIn("cpu", e["message"])
            self.assertEqual(e.get("count", 1), 1, "one Event per change of reason, not per pass")

    def test_sigkill_between_ungate_and_bind(self):
        # Released pods are reserved in the API's truth (ungated, no node): a restart must
        # rebuild that, or it would release 4 more.
        mon = Monitor(self, "alice", 4000).start()
        for i in range(8):
            self.gated_pod("k%d" % i)
        wait_until(lambda: len(self.ungated()) == 4, timeout=15, msg="4 pods ungated")
        first = self.ungated()
        self.kq.kill()
        self.kq.start()
        time.sleep(3)
        self.assertEqual(self.ungated(), first, "a restart released more than fits")
        sched = FakeScheduler(self).start()
        try:
            wait_until(lambda: self.bound() == first, timeout=15, msg="the reserved pods bind")
            self.sim.delete_pod("default", first[0])
            wait_until(lambda: len(self.bound()) == 4 and len(self.ungated()) == 4, timeout=15)
            time.sleep(1)
            self.assertEqual(len(self.ungated()), 4)
        finally:
            sched.stop()
            mon.stop()

    def test_other_controllers_gates_untouched(self):
        p = self.sim.create_pod(pod_manifest("two", user="alice", cpu="1", queue="root.dev",
                                             gates=("example.com/other", GATE)))
        wait_until(lambda: [g["name"] for g in self.pods()["two"]["spec"].get("schedulingGates", [])]
                   == ["example.com/other"], timeout=15, msg="only our gate removed")
        self.assertEqual(p["metadata"]["uid"], self.pods()["two"]["metadata"]["uid"])
        # another scheduler's gated pod is none of our business
        self.sim.create_pod(pod_manifest("theirs", user="alice", cpu="1", scheduler="default-scheduler",
                                         gates=(GATE,)))
        time.sleep(2)
        self.assertTrue(gated(self.pods()["theirs"]))


class GatingTimeoutTest(KQTestCase):
    CONFIG = queues_config({"name": "default"}, {"name": "dev", "limits": [
        {"limit": "alice", "users": ["alice"], "maxresources": {"cpu": "2"}}]})
    EXTRA_ARGS = ("--admission-gate", "--admission-gate-reserve-timeout", "2s")

    def test_unbound_reservation_expires_and_filter_decides(self):
        for i in range(3):
            self.sim.create_pod(pod_manifest("t%d" % i, user="alice", cpu="1", queue="root.dev",
                                             gates=(GATE,)))

        def ungated():
            return sorted(p["metadata"]["name"] for p in self.sim.state()["pods"] if not gated(p))
        wait_until(lambda: len(ungated()) == 2, timeout=15)
        # nobody binds them: after the timeout their reservations go, and the third is released
        wait_until(lambda: len(ungated()) == 3, timeout=20, msg="third pod released after the timeout")
        # now filter/bind are the final check: only 2 of the 3 ungated pods can bind
        mon = Monitor(self, "alice", 2000, bound_only=True).start()
        results = [self.sched.schedule("default", n) for n in ungated()]
        mon.stop()
        self.assertEqual(sum(1 for ok, _ in results if ok), 2, results)
        denied = [why for ok, why in results if not ok]
        self.assertIn("alice", denied[0])


class GateOnlyReservationTest(KQTestCase):
    """--admission-gate-only (the chart's scheduler.extender.mode gate-only): no filter or bind
    checks a released pod again, so its reservation never expires; the timeout that lets
    GatingTimeoutTest's third pod through must not apply."""
    CONFIG = GatingTimeoutTest.CONFIG
    EXTRA_ARGS = ("--admission-gate", "--admission-gate-only", "--admission-gate-reserve-timeout", "2s")

    def test_unbound_reservation_is_kept(self):
        for i in range(3):
            self.sim.create_pod(pod_manifest("t%d" % i, user="alice", cpu="1", queue="root.dev",
                                             gates=(GATE,)))

        def ungated():
            return sorted(p["metadata"]["name"] for p in self.sim.state()["pods"] if not gated(p))
        wait_until(lambda: len(ungated()) == 2, timeout=15)
        # nobody binds them for three times the timeout: the third stays gated, since with no
        # extender nothing would stop it from binding past alice's 2 cpu
        time.sleep(6)
        self.assertEqual(len(ungated()), 2, ungated())
        # a released pod that goes away frees its reservation at once
        self.sim.delete_pod("default", ungated()[0])
        wait_until(lambda: len(ungated()) == 2 and "t2" in ungated(), timeout=15, msg="t2 released")

    def test_needs_the_gate(self):
        import subprocess
        kq = Kubequota(self.sim, self.CONFIG, extra_args=("--admission-gate-only",))
        r = subprocess.run(kq.argv(), capture_output=True, text=True, timeout=20)
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertIn("--admission-gate-only needs --admission-gate", r.stdout + r.stderr)


class Workload:
    """Drives a shared queue from the simulator's side: ungated pods are bound by the fake
    kube-scheduler; a bound pod 'runs' for `run_s` (seen by this poller) and then succeeds.
    Records when each pod was bound and ended, from the simulator's state."""

    def __init__(self, test, run_s=0.3):
        self.test, self.run_s = test, run_s
        self.bound_at, self.ended_at = {}, {}

    def step(self):
        now = time.monotonic()
        for p in self.test.sim.state()["pods"]:
            n = p["metadata"]["name"]
            if not ours(p) or not p["spec"].get("nodeName") or n in self.ended_at:
                continue
            self.bound_at.setdefault(n, now)
            if now - self.bound_at[n] >= self.run_s:
                self.test.sim.set_phase("default", n, "Succeeded")
                self.ended_at[n] = now

    def releases(self):
        """The released pods' names in the order kubequota decided (its log), not the order
        its PATCHes reached the simulator: one pass sends them in parallel."""
        return [key.split("/", 1)[1] for key in gate_release_order(self.test.kq, self.test.sim, GATE)]


def user_of(name):
    return name.split("-", 1)[0]


class FairOrderTest(KQTestCase):
    """A queue shared by two users (max 4 cpu, no user limits): releases follow the fair
    order of docs/gating.md. Expected orders are worked out by hand from that policy."""
    CONFIG = queues_config({"name": "default"}, {"name": "shared", "resources": {"max": {"vcore": "4"}}})
    EXTRA_ARGS = ("--admission-gate",)

    def gated(self, name, user):
        return self.sim.create_pod(pod_manifest(name, user=user, cpu="1", memory="64Mi", queue="root.shared",
                                                gates=(GATE,)))

    def run_until(self, w, pred, timeout=60):
        deadline = time.monotonic() + timeout
        while not pred():
            self.assertLess(time.monotonic(), deadline, "workload did not progress:\n%s" % self.kq.log_tail(30))
            w.step()
            time.sleep(0.05)

    def test_round_robin_newcomer_gets_every_second_release(self):
        w = Workload(self)
        for i in range(12):
            self.gated("a-%02d" % i, "a")
        wait_until(lambda: len(w.releases()) == 4, timeout=15, msg="a's first 4 released")
        for i in range(4):
            self.gated("b-%02d" % i, "b")

        def told():  # each waiting pod is told why, in the filter's words (the queue is full)
            ev = [e for e in self.sim.state()["events"] if e.get("reason") == "WaitingForQuota"]
            return {e["involvedObject"]["name"] for e in ev if "root.shared" in e["message"]}
        # Events are posted after the pass, in no order across pods: wait for each set.
        wait_until(lambda: {"b-00", "b-01", "b-02", "b-03"} <= told(), timeout=15, msg="b's pods told why they wait")
        wait_until(lambda: {"a-%02d" % i for i in range(4, 12)} <= told(), timeout=15,
                   msg="a's waiting pods told why they wait")
        sched = FakeScheduler(self).start()
        try:
            self.run_until(w, lambda: len(w.releases()) >= 12)
        finally:
            sched.stop()
        order = [user_of(n) for n in w.releases()]
        print("release order:", "".join(order))
        self.assertEqual(order[:4], ["a"] * 4)
        # while b has pods waiting, b gets at least every second release
        tail = order[4:]
        last_b = max(i for i, u in enumerate(tail) if u == "b")
        self.assertEqual(tail.count("b"), 4, order)
        window = tail[:last_b + 1]
        for i in range(1, len(window)):
            self.assertFalse(window[i - 1] == "a" and window[i] == "a", "two a releases in a row while b "
                                                                        "waited: %s" % order)
        # within a user: oldest first
        self.assertEqual([n for n in w.releases() if n.startswith("b-")], ["b-00", "b-01", "b-02", "b-03"])

    def test_weights_split_cpu_seconds(self):
        cfg = queues_config({"name": "default"}, {
            "name": "shared", "resources": {"max": {"vcore": "4"}},
            "properties": {"kubequota.io/gating.weight.user.a": "3", "kubequota.io/gating.weight.user.b": "1"}})
        self.kq.write_config(cfg)
        wait_until(lambda: "gating.weight.user.a" in self.kq.get("/ws/v1/partition/default/queues").text,
                   timeout=15, msg="weights loaded")
        w = Workload(self)
        for i in range(70):
            self.gated("a-%02d" % i, "a")
            if i < 35:
                self.gated("b-%02d" % i, "b")
        sched = FakeScheduler(self).start()
        try:  # 84 releases while both users wait (b has 35 pods, it needs 21)
            self.run_until(w, lambda: len(w.releases()) >= 84 and
                           all(n in w.ended_at for n in w.releases()[:84]))
        finally:
            sched.stop()
        released = w.releases()[:84]
        # cpu-seconds each user ran, from the simulator's side (1 cpu per pod, bound to done)
        secs = {"a": 0.0, "b": 0.0}
        for n in released:
            secs[user_of(n)] += w.ended_at[n] - w.bound_at[n]
        counts = {u: sum(1 for n in released if user_of(n) == u) for u in secs}
        self.assertGreater(secs["b"], 0, counts)
        ratio = secs["a"] / secs["b"]
        print("weights 3:1: releases %s, cpu-seconds %s, ratio %.3f" % (counts, secs, ratio))
        self.assertTrue(2.7 <= ratio <= 3.3, "cpu-seconds a:b = %.2f (releases %s, seconds %s)"
                        % (ratio, counts, secs))


class GatingLeaderTest(KQTestCase):
    """Two replicas with leader election: only the leader removes gates, and a new leader
    (the old one killed with SIGKILL) starts from the reserved set the API shows."""
    CONFIG = GatingTest.CONFIG
    START = False

    def replica(self, name):
        kq = Kubequota(self.sim, self.CONFIG, name=name, extra_args=(
            "--admission-gate", "--leader-elect", "--lease-namespace", "kube-system", "--lease-name", "kq-gating",
            "--lease-duration", "3s", "--renew-deadline", "2s", "--retry-period", "500ms"))
        self.addCleanup(kq.kill)
        return kq.start()

    def leader_of(self, kqs):
        for kq in kqs:
            if kq.alive() and "kubequota_leader 1\n" in kq.get("/metrics").text:
                return kq
        return None

    def test_only_the_leader_releases_and_a_new_leader_does_not_over_admit(self):
        a, b = self.replica("kq-a"), self.replica("kq-b")
        mon = Monitor(self, "alice", 4000).start()
        for i in range(8):
            self.sim.create_pod(pod_manifest("l%d" % i, user="alice", cpu="1", memory="64Mi", queue="root.dev",
                                             gates=(GATE,)))

        def ungated():
            return sorted(p["metadata"]["name"] for p in self.sim.state()["pods"] if alive(p) and not gated(p))
        wait_until(lambda: len(ungated()) == 4, timeout=20, msg="4 released")
        leader = wait_until(lambda: self.leader_of([a, b]), timeout=20, msg="a leader")
        other = b if leader is a else a
        self.assertIn("event=gate_released", leader.logs())
        self.assertNotIn("event=gate_released", other.logs())
        first = ungated()
        leader.kill()
        wait_until(lambda: self.leader_of([other]), timeout=30, msg="the standby takes over")
        time.sleep(2)
        self.assertEqual(ungated(), first, "the new leader released more than fits")
        self.kq = other  # for SchedulerDriver and the failure log
        self.sched = SchedulerDriver(other, self.sim)
        sched = FakeScheduler(self).start()
        try:
            wait_until(lambda: sorted(p["metadata"]["name"] for p in self.sim.state()["pods"]
                                      if p["spec"].get("nodeName")) == first, timeout=20)
            self.sim.delete_pod("default", first[0])
            wait_until(lambda: len(ungated()) == 4 and len(set(ungated()) - set(first)) == 1, timeout=20,
                       msg="the new leader releases one more after a deletion")
        finally:
            sched.stop()
            mon.stop()


class GangTest(KQTestCase):
    """A Kueue pod group (kubernetes-sigs/kueue pkg/controller/jobs/pod: label
    kueue.x-k8s.io/pod-group-name, annotation kueue.x-k8s.io/pod-group-total-count) is released
    all or nothing: never part of it."""
    CONFIG = FairOrderTest.CONFIG
    EXTRA_ARGS = ("--admission-gate",)

    def test_gang_released_all_together(self):
        for i in range(3):
            self.sim.create_pod(pod_manifest("a-%d" % i, user="a", cpu="1", memory="64Mi", queue="root.shared",
                                             gates=(GATE,)))
        wait_until(lambda: len([p for p in self.sim.state()["pods"] if not gated(p)]) == 3, timeout=15)
        for i in range(3):
            m = pod_manifest("g-%d" % i, user="b", cpu="1", memory="64Mi", queue="root.shared", gates=(GATE,),
                             labels={"kueue.x-k8s.io/pod-group-name": "job"})
            m["metadata"]["annotations"]["kueue.x-k8s.io/pod-group-total-count"] = "3"
            self.sim.create_pod(m)
        mon_stop, seen = threading.Event(), []

        def watch():  # the gang's released count, every 50 ms: only 0 or 3
            while not mon_stop.is_set():
                seen.append(sum(1 for p in self.sim.state()["pods"]
                                if p["metadata"]["name"].startswith("g-") and not gated(p)))
                mon_stop.wait(0.05)
        t = threading.Thread(target=watch, daemon=True)
        t.start()
        try:
            time.sleep(2)  # 1 cpu free: none of the gang (not 1 of 3)
            before = list(seen)
            self.sim.delete_pod("default", "a-0")
            time.sleep(2)  # 2 cpu free: still none
            before += seen[len(before):]
            self.sim.delete_pod("default", "a-1")
            wait_until(lambda: seen and seen[-1] == 3, timeout=15, msg="the gang released")
        finally:
            mon_stop.set()
            t.join(5)
        self.assertTrue(before and set(before) == {0}, "part of a gang was released early: %s" % sorted(set(before)))
        # the three patches of one release are separate requests, so a poll may see them
        # land one by one; the log shows the three released in the same pass
        rel = [ln for ln in self.kq.logs().splitlines() if "event=gate_released" in ln and "gang=kueue:" in ln]
        self.assertEqual(len(rel), 3, rel)


PATCH_DELAY = 0.3  # seconds the simulator holds each gate removal (a slow API server)


class ReleasePassCase(KQTestCase):
    """Pods of alice (8 cpu) that all wait before kubequota starts, so its first pass
    releases all that fit at once; the simulator holds each gate removal 300 ms."""
    CONFIG = queues_config({"name": "default"}, {"name": "dev", "limits": [
        {"limit": "alice", "users": ["alice"], "maxresources": {"cpu": "8"}}]})
    EXTRA_ARGS = ("--admission-gate",)
    START = False

    def gated_pods(self, n):
        for i in range(n):
            self.sim.create_pod(pod_manifest("p%d" % i, user="alice", cpu="1", memory="64Mi", queue="root.dev",
                                             gates=(GATE,)))

    def removal_times(self):
        return {key.split("/", 1)[1]: t for t, key, gate in self.sim.state()["gate_removals"] if gate == GATE}

    def released(self):
        return [key.split("/", 1)[1] for key in gate_release_order(self.kq, self.sim, GATE)]


class ParallelReleaseTest(ReleasePassCase):
    """The removals of one pass overlap (--admission-gate-release-parallel, default 16): 8
    pods released by one pass are all ungated far sooner than 8 x 300 ms; the fair order is
    still the pass's, read from the log."""

    def test_one_pass_removals_overlap(self):
        # the simulator holds every removal until told: all 8 of the pass are in flight at
        # once (one after the other, the first would hold the rest back)
        self.gated_pods(8)
        self.sim.fault(method="PATCH", path=r"/namespaces/default/pods/p\d$", hold=True, count=None)
        self.kq.start()
        wait_until(lambda: self.sim.state()["held"] == 8, timeout=20, msg="the pass's 8 removals held at once")
        self.assertEqual(self.removal_times(), {})
        self.sim.clear_faults()
        wait_until(lambda: len(self.removal_times()) == 8, timeout=20, msg="the 8 pods ungated")
        # one user, one priority: oldest first, whatever order the PATCHes landed in
        self.assertEqual(self.released(), ["p%d" % i for i in range(8)])
        rel = [ln for ln in self.kq.logs().splitlines() if "event=gate_released" in ln]
        self.assertEqual(len(rel), 8, rel)
        self.assertRegex(self.kq.logs(), r"event=gating_started .*release_parallel=16\b")

    def test_failed_removals_in_parallel_pass(self):
        # 10 pods, room for 8. In the first pass p3's removal is refused (422, as when another
        # controller moved the gate: the pod goes back in line) and p5's finds no pod (404:
        # deleted meanwhile, so it is not put back); both release their reservations, which
        # a second pass must see: p3 again, then p8 in p5's room; p9 never fits.
        self.gated_pods(10)
        self.sim.fault(method="PATCH", path=r"/namespaces/default/pods/p3$", delay=PATCH_DELAY, status=422,
                       reason="Invalid", message="the request is invalid", count=1)
        self.sim.fault(method="PATCH", path=r"/namespaces/default/pods/p5$", delay=PATCH_DELAY, status=404,
                       reason="NotFound", message='pods "p5" not found', count=1)
        self.sim.fault(method="PATCH", path=r"/namespaces/default/pods/p\d$", delay=PATCH_DELAY, count=None)
        mon = Monitor(self, "alice", 8000).start()
        try:
            self.kq.start()
            wait_until(lambda: len(self.removal_times()) == 8, timeout=20, msg="8 pods ungated")
            time.sleep(1.5)  # at least one more pass: nothing else fits
        finally:
            mon.stop()
        self.assertEqual(sorted(self.removal_times()), ["p0", "p1", "p2", "p3", "p4", "p6", "p7", "p8"])
        log = self.kq.logs().splitlines()
        failed = sorted(ln.split("event=ungate_failed ", 1)[1].split(" ", 1)[0]
                        for ln in log if "event=ungate_failed" in ln and "reservation released; the pod waits" in ln)
        self.assertEqual(failed, ["pod=default/p3", "pod=default/p5"], log)
        self.assertEqual(len([ln for ln in log if "event=gate_released pod=default/p3 " in ln]), 2)
        self.assertEqual(len([ln for ln in log if "event=gate_released pod=default/p5 " in ln]), 1)
        # p3 went back to the head of alice's line, before p8, in the second pass
        self.assertEqual(self.released(), ["p0", "p1", "p2", "p4", "p6", "p7", "p3", "p8"])
        text = self.kq.get("/metrics").text
        self.assertIn("kubequota_gating_patch_errors_total 2\n", text)
        self.assertIn("kubequota_gating_reserved_pods 8\n", text)


class SerialReleaseTest(ReleasePassCase):
    """--admission-gate-release-parallel 1: the removals of a pass go one after the other."""
    EXTRA_ARGS = ("--admission-gate", "--admission-gate-release-parallel", "1")

    def test_one_pass_removals_one_after_the_other(self):
        # the simulator holds every removal until told: only the first is ever in flight
        self.gated_pods(8)
        self.sim.fault(method="PATCH", path=r"/namespaces/default/pods/p\d$", hold=True, count=None)
        self.kq.start()
        wait_until(lambda: self.sim.state()["held"] == 1, timeout=20, msg="the first removal held")
        time.sleep(1)
        self.assertEqual(self.sim.state()["held"], 1)
        self.sim.clear_faults()
        wait_until(lambda: len(self.removal_times()) == 8, timeout=20, msg="the 8 pods ungated")
        # sent one after the other: they land in the pass's order
        t = self.removal_times()
        self.assertEqual(sorted(t, key=t.get), ["p%d" % i for i in range(8)])
        self.assertEqual(self.released(), ["p%d" % i for i in range(8)])
        self.assertRegex(self.kq.logs(), r"event=gating_started .*release_parallel=1\b")
