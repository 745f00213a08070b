"""Issue 38 on a real API server and kube-scheduler: the quota tree does not depend on the
order in which pods and ElasticQuotas arrive, and a restart shows the same tree.

The same scenarios as tests/e2e/test_order.py (the simulator tier), here with the chart's
CRDs and webhooks and the real kube-scheduler calling kubequota:

  - a pod created before its quota (as `kubectl apply -f dir/` does): it fits once the quota
    exists, and the quota's max holds (the API server never holds more bound pods of it than
    its max);
  - a pod bound in the default group, then its namespace's quota appears: the quota's used
    shows it at once, without a restart;
  - a restart gives the same tree (used, request, runtime of every group of the test);
  - a failover gives the same tree: two replicas on the chart's Lease, the leader killed
    (SIGKILL), the new leader's tree equals the old leader's and the numbers worked out by
    hand, and so does the killed replica's once it is back;
  - issue 38 item 4: a config reload raising a queue's max releases the pod the admission
    gate holds at once (five times in a row: the race the issue saw left it gated 30 s in two
    runs of six).

Koordinator moves default-group pods into their quota when it appears
(koordinator-sh/koordinator pkg/scheduler/plugins/elasticquota/plugin.go,
migrateDefaultQuotaGroupsPod; TestPlugin_migrateDefaultQuotaGroupsPod).
"""

import re
import time

from kubetest import KubeTestCase, NAMESPACE, config_yaml, queues_config, wait_until

EQ = "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/%s/elasticquotas"
TWO_SMALL_NODES = {"small-0": {"cpu": "4", "memory": "16Gi"}, "small-1": {"cpu": "4", "memory": "16Gi"}}


def eq(name, mn, mx):
    return {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "ElasticQuota",
            "metadata": {"name": name}, "spec": {"min": mn, "max": mx}}


class OrderBase(KubeTestCase):
    CONFIG = queues_config({"name": "default"})
    CHART_VALUES = {"kubequota": {"admissionGate": {"enabled": False}}}
    NODES = TWO_SMALL_NODES

    def tree(self, name="kq"):
        out = {}
        for g in self.kq_json("/ws/v1/partition/default/queues", name)["quotaTree"]["groups"]:
            out[g["name"]] = (g.get("allocatedResource", {}).get("cpu", 0),
                              g.get("requestResource", {}).get("cpu", 0),
                              g.get("runtimeResource", {}).get("cpu", 0))
        return out

    def wait_group(self, name):
        wait_until(lambda: name in self.tree(), 20, 0.2, "group %s in kubequota's tree" % name)

    def wait_tree(self, want, what, timeout=30):
        last = {}

        def ok():
            t = self.tree()
            last.update({g: t.get(g) for g in want})
            return all(t.get(g) == v for g, v in want.items())
        try:
            wait_until(ok, timeout, 0.2, what)
        except AssertionError:
            self.assertEqual(last, want, what)

    def bound(self, ns):
        return sorted(p["metadata"]["name"] for p in self.c.pods(ns) if p["spec"].get("nodeName")
                      and not p["metadata"].get("deletionTimestamp"))

    def restart(self):
        self.c.stop_kubequota("kq")
        self.c.start_kubequota(open(self.c.path("kq-queues.yaml")).read(), extra=self.KQ_ARGS)


class PodBeforeItsQuota(OrderBase):
    """The default group holds 2 cpu (--default-quota-max). Five 1-cpu pods are created
    before their namespace's quota (min 4, max 4), as `kubectl apply -f dir/` may create
    them: two run in the default group at once, three wait. Then the quota appears: the two
    running pods count in it (used 2), the three waiting ones ask it (request 5), and only
    two more bind, so the namespace never runs more than the quota's max of 4 cpu. (On
    4ff2313 the two stayed in the default group, the quota counted from 0, and a fifth cpu
    ran: the issue's "5 cpu in a quota whose max is 4".)"""
    KQ_ARGS = ("--default-quota-max=cpu=2",)

    def test_pod_created_before_its_quota_fits_and_the_max_holds(self):
        ns = self.ns()
        # pods of earlier tests' namespaces still being deleted would fill the default group
        wait_until(lambda: self.tree().get("default", (0, 0, 0))[:2] == (0, 0), 90, 0.5,
                   "the default group empty of earlier tests' pods")
        for i in range(5):
            self.pod(ns, "p%d" % i, user="alice", cpu="1", memory=None)
        # the default group takes two of them; the other three wait (over its max)
        wait_until(lambda: len(self.bound(ns)) == 2, 30, 0.2, "two pods bound in the default group")
        self.wait_tree({"default": (2000, 5000, 2000)}, "two running, three waiting in the default group")
        self.c.api("admin").post(EQ % ns, eq("q", {"cpu": "4"}, {"cpu": "4"}))
        self.wait_group("%s/q" % ns)
        # by hand: ns/q used 2 -> 4, request 5, runtime min(5, min 4) = 4; two more bind
        seen_max = [0]

        def four_bound():
            n = len(self.bound(ns))
            seen_max[0] = max(seen_max[0], n)
            return n >= 4
        wait_until(four_bound, 60, 0.2, "four of the five pods bound")
        end = time.monotonic() + 8  # kube-scheduler retries the fifth after its backoff
        while time.monotonic() < end:
            seen_max[0] = max(seen_max[0], len(self.bound(ns)))
            time.sleep(0.25)
        self.assertEqual(seen_max[0], 4, "bound 1-cpu pods of a namespace whose quota's max is 4 cpu")
        want = {"%s/q" % ns: (4000, 5000, 4000), "default": (0, 0, 2000)}
        self.wait_tree(want, "ns/q used 4, request 5, runtime 4; nothing left in the default group")
        # a fresh kubequota shows the same tree
        self.restart()
        self.wait_group("%s/q" % ns)
        self.wait_tree(want, "the tree after a restart")


class BoundInDefaultThenQuota(OrderBase):
    def test_bound_pod_counts_in_its_new_quota_without_restart(self):
        ns = self.ns()
        self.pod(ns, "w1", user="alice", cpu="500m", memory=None)
        self.wait_bound(ns, "w1")
        wait_until(lambda: self.tree().get("default", (0, 0, 0))[0] >= 500, 20, 0.2, "w1 in the default group")
        self.c.api("admin").post(EQ % ns, eq("q", {"cpu": "1"}, {"cpu": "2"}))
        self.wait_group("%s/q" % ns)
        # by hand: ns/q used 500m, request 500m, runtime 500m
        self.wait_tree({"%s/q" % ns: (500, 500, 500)}, "w1 counted in %s/q without a restart" % ns)
        # the quota's max now holds for the namespace: 500m + 2 cpu > 2
        self.pod(ns, "w2", user="alice", cpu="2", memory=None)
        wait_until(lambda: self.tree()["%s/q" % ns][1] == 2500, 20, 0.2, "w2 pending in %s/q" % ns)
        self.assert_stays_pending(ns, "w2", 5)

    def test_restart_gives_the_same_tree(self):
        ns = self.ns()
        self.c.api("admin").post(EQ % ns, eq("r", {"cpu": "2"}, {"cpu": "2"}))
        self.wait_group("%s/r" % ns)
        self.pod(ns, "r1", user="alice", cpu="1", memory=None)
        self.wait_bound(ns, "r1")
        self.pod(ns, "r2", user="alice", cpu="2", memory=None)  # 1 + 2 > 2: waits
        # by hand: ns/r used 1, request 3, runtime min(3, min 2) = 2
        want = {"%s/r" % ns: (1000, 3000, 2000)}
        self.wait_tree(want, "ns/r before the restart")
        self.restart()
        self.wait_group("%s/r" % ns)
        self.wait_tree(want, "ns/r after the restart")
        self.assertIsNone(self.node_of(ns, "r2"))
        # the pending pod is decided by ns/r: it binds once r1 is gone
        self.delete(ns, "r1")
        self.wait_bound(ns, "r2", timeout=60)
        self.wait_tree({"%s/r" % ns: (2000, 2000, 2000)}, "r2 counted in ns/r")


LEASE = "/apis/coordination.k8s.io/v1/namespaces/%s/leases/kubequota" % NAMESPACE
FAST_LEASE = ("--leader-elect-lease-duration=4s", "--leader-elect-renew-deadline=3s",
              "--leader-elect-retry-period=500ms")


def identity(log):
    """The identity of the last process that wrote this log (log files are appended to)."""
    m = re.findall(r"event=leader_election_started .*identity=(\S+)", log)
    return m[-1] if m else None


class FailoverGivesTheSameTree(OrderBase):
    """Two replicas on the chart's Lease (as test_kube_leader.py arranges them): "kq-b" leads,
    "kq" stands by and answers kube-scheduler. A pod binds in the default group, then its
    namespace's quota (min 2, max 2) appears, then a 2-cpu pod waits for it. By hand: ns/q
    used 500m, request 2.5 cpu, runtime min(request, min 2) = 2 cpu. The leader is killed
    (SIGKILL, no release): "kq" takes the Lease, and its tree is the tree the old leader
    showed and the hand-computed one; the killed replica, back (a fresh process), shows it
    too; then the waiting pod binds once the first is gone, decided by ns/q. (4ff2313 fails it:
    the first pod stays in the default group, so the 2-cpu pod fits ns/q and binds, and the
    namespace runs 2.5 cpu under a max of 2; the leader's tree shows ns/q (2000, 2000, 2000).)"""
    KQ_ARGS = FAST_LEASE

    def holder(self):
        return self.c.api().get(LEASE)["spec"].get("holderIdentity")

    def groups(self, name, keep):
        """The tree's groups of `keep` as a replica shows them: every field."""
        doc = self.kq_json("/ws/v1/partition/default/queues", name)["quotaTree"]["groups"]
        return {g["name"]: g for g in doc if g["name"] in keep}

    def test_failover_gives_the_same_tree(self):
        c = self.c
        queues = open(c.path("kq-queues.yaml")).read()
        # kq-b leads, kq stands by (kube-scheduler calls kq)
        c.stop_kubequota("kq")
        wait_until(lambda: not self.holder(), 15, 0.1, "the lease released by kq's SIGTERM")
        c.start_kubequota(queues, name="kq-b", extra=FAST_LEASE)
        self.addCleanup(c.stop_kubequota, "kq-b")
        b_id = wait_until(lambda: identity(c.kubequota_log("kq-b")), 10, 0.1, "kq-b's identity")
        wait_until(lambda: self.holder() == b_id, 15, 0.1, "kq-b holds the lease")
        before = identity(c.kubequota_log("kq"))
        c.start_kubequota(queues, extra=FAST_LEASE)
        a_id = wait_until(lambda: identity(c.kubequota_log("kq")) != before and identity(c.kubequota_log("kq")),
                          10, 0.1, "kq's identity")
        self.assertEqual(self.holder(), b_id)

        ns = self.ns()
        g = "%s/q" % ns
        self.pod(ns, "w1", user="alice", cpu="500m", memory=None)
        self.wait_bound(ns, "w1")
        self.c.api("admin").post(EQ % ns, eq("q", {"cpu": "2"}, {"cpu": "2"}))
        self.pod(ns, "w2", user="alice", cpu="2", memory=None)
        want = {g: (500, 2500, 2000)}
        for name in ("kq-b", "kq"):
            wait_until(lambda: g in self.tree(name), 20, 0.2, "%s in %s's tree" % (g, name))
            self.wait_tree_of(name, want, "%s: w1 counted in %s, w2 waiting for it" % (name, g))
        self.assertIsNone(self.node_of(ns, "w2"))
        old = self.groups("kq-b", (g,))

        c.stop_kubequota("kq-b", kill=True)
        wait_until(lambda: self.holder() == a_id, 30, 0.2, "kq took the lease")
        self.wait_tree_of("kq", want, "the new leader's tree")
        self.assertEqual(self.groups("kq", (g,)), old, "the new leader shows %s as the old leader did" % g)
        # the killed replica comes back: a fresh process, the same tree
        c.start_kubequota(queues, name="kq-b", extra=FAST_LEASE)
        wait_until(lambda: g in self.tree("kq-b"), 20, 0.2, "%s in the restarted kq-b's tree" % g)
        self.wait_tree_of("kq-b", want, "the restarted replica's tree")
        self.assertEqual(self.groups("kq-b", (g,)), old)
        # the waiting pod is decided by ns/q: it binds once w1 is gone
        self.delete(ns, "w1")
        self.wait_bound(ns, "w2", timeout=60)
        self.wait_tree_of("kq", {g: (2000, 2000, 2000)}, "w2 counted in %s" % g)

    def wait_tree_of(self, name, want, what, timeout=30):
        last = {}

        def ok():
            t = self.tree(name)
            last.update({k: t.get(k) for k in want})
            return all(t.get(k) == v for k, v in want.items())
        try:
            wait_until(ok, timeout, 0.2, what)
        except AssertionError:
            self.assertEqual(last, want, what)


def shared(max_cpu):
    return queues_config({"name": "default"}, {"name": "shared", "resources": {"max": {"vcore": str(max_cpu)}}})


class ReloadRaisingAMaxReleasesAtOnce(KubeTestCase):
    """Issue 38 item 4 with the chart's defaults (admission gate on, --reload-interval 2s):
    root.shared's max is 1 cpu, then raised by one cpu at a time by rewriting kubequota's
    queues.yaml (what the chart's ConfigMap volume does), five times. Each time a 1-cpu pod
    waits behind the gate, and must be bound within 8 s of the write (the reload interval,
    a gate pass and kube-scheduler's cycle), never more pods bound than the max in force.
    The race the issue found (the gate woken by the new snapshot before the queue's quota
    group had the new max) left the pod gated for 30 s in two runs of six; here 4ff2313
    passed (ten tries in two runs, each pod bound 1.9-2.1 s after the write): the subclass
    below widens the window."""
    CONFIG = shared(1)
    TRIES = 5
    WITHIN = 8.0

    def bound(self, ns):
        return sorted(p["metadata"]["name"] for p in self.c.pods(ns) if p["spec"].get("nodeName")
                      and not p["metadata"].get("deletionTimestamp"))

    def test_reload_raising_a_max_releases_the_waiting_pod_at_once(self):
        ns = self.ns()
        self.pod(ns, "s0", user="alice", queue="root.shared")
        self.wait_bound(ns, "s0")
        took = []
        for i in range(1, self.TRIES + 1):
            name = "s%d" % i
            self.pod(ns, name, user="alice", queue="root.shared")
            self.assert_stays_pending(ns, name, 2.0)   # max i cpu, i bound
            t0 = time.monotonic()
            with open(self.c.path("kq-queues.yaml"), "w") as f:
                f.write(config_yaml(shared(i + 1)))
            while not self.node_of(ns, name):
                self.assertLessEqual(len(self.bound(ns)), i + 1)
                if time.monotonic() - t0 > self.WITHIN:
                    self.fail("try %d: %s still not bound %.0f s after the reload raised root.shared's max to %d "
                              "(released in earlier tries after %s s)" % (i, name, self.WITHIN, i + 1,
                                                                          ["%.1f" % t for t in took]))
                time.sleep(0.1)
            took.append(time.monotonic() - t0)
        print("  (bound %s s after each reload)" % ", ".join("%.1f" % t for t in took), flush=True)


class ReloadRaisingAMaxReleasesAtOnceSlowTick(ReloadRaisingAMaxReleasesAtOnce):
    """The same with --elastic-tick 10m, which widens the race to its whole window (as
    tests/e2e/test_order.py ReloadRaisesMaxTest does): the elastic module's timer never
    applies the reload itself here, so only applying the queue groups before the snapshot
    swap releases the pod. (4ff2313 passes the chart-default test above, ten tries in two
    runs, each bound 1.9-2.1 s after the write; it fails this one: the pod stays gated.)"""
    KQ_ARGS = ("--elastic-tick=10m",)
    TRIES = 3
