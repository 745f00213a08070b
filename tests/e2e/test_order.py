"""Issue 38: the quota tree does not depend on the order in which pods and quotas arrive,
and a restart shows what the daemon before it showed.

Three orders a real cluster produces, each checked against numbers worked out by hand and
against a freshly started kubequota over the same objects (the quota tree's used, request
and runtime of every group):

  1. a pod created before the ElasticQuota it names (`kubectl apply -f dir/` creating the
     pods a moment before the quota): once the quota exists the pod is filed in it and
     binds, and the quota's max holds;
  2. a pod bound in the default group before the quota of its namespace appears: the quota's
     used shows it at once, without a restart;
  3. a restart whose pod list is answered before the quota list (the simulator delays the
     ElasticQuota requests): the pods are not filed under the default group.

Koordinator moves default-group pods into their quota when it appears
(koordinator-sh/koordinator pkg/scheduler/plugins/elasticquota/plugin.go,
migrateDefaultQuotaGroupsPod; its test TestPlugin_migrateDefaultQuotaGroupsPod). Waits are
condition-based (wait_until); nothing sleeps and asserts."""

import urllib.parse

from kqtest import (KQTestCase, SCHED, pod_manifest, queues_config, wait_until)

GATE = "kubequota.io/admission"

KOORD = "scheduling.sigs.k8s.io"
UPSTREAM = "scheduling.x-k8s.io"
QUOTA_LABEL = "quota.scheduling.koordinator.sh/name"

CONFIG = queues_config({"name": "default"})
FAST = ("--elastic-tick", "100", "--status-interval", "200")


def eq_path(api_group, ns=None, name=None):
    p = "/apis/%s/v1alpha1" % api_group
    if ns:
        p += "/namespaces/%s" % urllib.parse.quote(ns)
    p += "/elasticquotas"
    if name:
        p += "/" + name
    return p


def groups_view(tree):
    """{group: (used cpu, request cpu, runtime cpu)} of the quota tree view."""
    out = {}
    for g in tree["groups"]:
        out[g["name"]] = (g.get("allocatedResource", {}).get("cpu", 0),
                          g.get("requestResource", {}).get("cpu", 0),
                          g.get("runtimeResource", {}).get("cpu", 0))
    return out


class OrderBase(KQTestCase):
    CONFIG = CONFIG
    NODES = ()
    EXTRA_ARGS = FAST
    START = False

    def setUp(self):
        super().setUp()
        self.sim.world.add_node("node-1", cpu="8", memory="64Gi")
        with self.sim.world.cond:
            self.sim.world.crds = {KOORD, UPSTREAM}
        self.kq.start()
        self.wait_total(8000)

    def tree(self):
        return self.kq.queues()["quotaTree"]

    def view(self):
        return groups_view(self.tree())

    def wait_total(self, cpu):
        wait_until(lambda: self.tree()["clusterTotal"].get("cpu") == cpu, 15, 0.05,
                   "cluster total cpu %d" % cpu)

    def pod(self, name, cpu, ns="default", labels=None):
        p = pod_manifest(name, ns=ns, user="alice", cpu=cpu, memory="64Mi", labels=labels)
        return self.sim.create_pod(p)

    def create_eq(self, api_group, ns, name, min_, max_):
        body = {"apiVersion": api_group + "/v1alpha1", "kind": "ElasticQuota",
                "metadata": {"name": name, "namespace": ns},
                "spec": {"min": min_, "max": max_}}
        r = self.sim.http.post(eq_path(api_group, ns), body)
        self.assertEqual(r.status, 201, r.text)

    def wait_group(self, name):
        wait_until(lambda: name in self.view(), 15, 0.05, "group %s in the tree" % name)

    def wait_view(self, want, groups, what):
        def ok():
            v = self.view()
            return all(v.get(g) == want[g] for g in groups)
        try:
            wait_until(ok, 15, 0.05, what)
        except AssertionError:
            v = self.view()
            self.assertEqual({g: v.get(g) for g in groups}, {g: want[g] for g in groups}, what)

    def assert_same_after_restart(self, groups):
        """A freshly started kubequota over the same objects shows the same tree."""
        before = self.view()
        self.kq.restart()
        self.wait_total(8000)
        for g in groups:
            if g != "default":
                self.wait_group(g)
        self.wait_view(before, groups, "a fresh kubequota to show the tree the running one showed: %r"
                       % {g: before.get(g) for g in groups})


class PodBeforeQuotaTest(OrderBase):
    def test_pod_created_before_its_quota_is_filed_in_it(self):
        # two 3-cpu pods naming quota "late", created before it exists
        for n in ("p1", "p2"):
            self.pod(n, "3", ns="team", labels={QUOTA_LABEL: "late"})
        wait_until(lambda: self.view()["default"][1] == 6000, 10, 0.05, "default's request 6 cpu")
        # the quota appears: min 4, max 4
        self.create_eq(KOORD, "team", "late", {"cpu": "4"}, {"cpu": "4"})
        self.wait_group("late")
        # both pending pods move: late asks 6, its runtime is its min 4 (= max); default is empty
        self.wait_view({"late": (0, 6000, 4000), "default": (0, 0, 0)}, ("late", "default"),
                       "the pending pods filed in late")
        # the first fits (3 <= 4), the second does not (3 + 3 > 4): the max holds
        self.assert_bound("p1", "team")
        self.assert_denied("p2", "team", "quota group late")
        self.wait_view({"late": (3000, 6000, 4000)}, ("late",), "late used 3 cpu")
        self.assert_same_after_restart(("late", "default"))
        # and the fresh one decides the second pod the same way
        self.assert_denied("p2", "team", "quota group late")


class BoundInDefaultThenQuotaTest(OrderBase):
    def test_bound_pod_moves_into_the_quota_of_its_namespace(self):
        # a 500m pod of namespace web binds while web has no quota: the default group's
        self.pod("w1", "500m", ns="web")
        self.assert_bound("w1", "web")
        wait_until(lambda: self.view()["default"][0] == 500, 10, 0.05, "default used 500m")
        # web's quota appears (scheduler-plugins: the namespace's group web/web-quota)
        self.create_eq(UPSTREAM, "web", "web-quota", {"cpu": "1", "memory": "1Gi"},
                       {"cpu": "2", "memory": "1Gi"})
        self.wait_group("web/web-quota")
        # used and request move at once: web/web-quota used 500m, request 500m, runtime 500m
        self.wait_view({"web/web-quota": (500, 500, 500), "default": (0, 0, 0)}, ("web/web-quota", "default"),
                       "w1 counted in web/web-quota without a restart")
        self.assert_same_after_restart(("web/web-quota", "default"))
        # deleting the quota moves it back to the default group
        r = self.sim.http.request("DELETE", eq_path(UPSTREAM, "web", "web-quota"))
        self.assertEqual(r.status, 200, r.text)
        wait_until(lambda: "web/web-quota" not in self.view(), 15, 0.05, "web/web-quota removed")
        # (the default group's runtime shows its max: unlimited here, so no cpu key: 0)
        self.wait_view({"default": (500, 500, 0)}, ("default",), "w1 back in the default group")


class RestartPodListFirstTest(OrderBase):
    def test_restart_with_the_pod_list_answered_first(self):
        # quota q of namespace q (Koordinator: named like its namespace), min 2, max 2;
        # one 1-cpu pod bound, one 2-cpu pod pending (1 + 2 > 2: denied)
        self.create_eq(KOORD, "q", "q", {"cpu": "2"}, {"cpu": "2"})
        self.wait_group("q")
        self.pod("q1", "1", ns="q")
        self.assert_bound("q1", "q")
        self.pod("q2", "2", ns="q")
        self.assert_denied("q2", "q", "quota group q")
        # by hand: q used 1, request 3, runtime min(3, min 2) = 2; default empty
        want = {"q": (1000, 3000, 2000), "default": (0, 0, 0)}
        self.wait_view(want, ("q", "default"), "q's numbers before the restart")
        # restart with every ElasticQuota request delayed: the pod list is answered first
        self.sim.fault(method="GET", path=r"/elasticquotas\?", delay=1.5, count=None)
        self.kq.restart()
        self.wait_group("q")
        self.sim.clear_faults()
        self.wait_view(want, ("q", "default"), "the restarted kubequota to show q's numbers")
        # the pending pod is decided by q's numbers, not the default group's: still denied
        # for q's runtime, and it binds once q1 is gone
        self.assert_denied("q2", "q", "quota group q")
        self.sim.delete_pod("q", "q1")
        wait_until(lambda: self.view()["q"][0] == 0, 10, 0.05, "q1 released from q")
        self.assert_bound("q2", "q")
        self.wait_view({"q": (2000, 2000, 2000), "default": (0, 0, 0)}, ("q", "default"), "q2 counted in q")


class PodBeforeQuotaPokedTest(OrderBase):
    """With a default group that is full (--default-quota-max cpu=1, and a 1-cpu pod in it),
    a pod created before its quota is denied at once ("over max"), and kube-scheduler keeps
    it in its unschedulable pool; when the quota appears and the pod moves into it,
    kubequota pokes it (the kubequota.io/requeue annotation, docs/events.md) so that
    kube-scheduler retries it at once instead of at its 5-minute flush. (A pod the default
    group can never hold, over a max of 0, is a "never fits" denial and is not poked: see
    the report of issue 38.)"""
    EXTRA_ARGS = FAST + ("--default-quota-max", "cpu=1")

    def test_denied_pod_is_poked_when_its_quota_appears(self):
        self.pod("f0", "1", ns="other")
        self.assert_bound("f0", "other")
        self.pod("e1", "1", ns="early")
        self.assert_denied("e1", "early", "quota group default", "max")
        self.assertNotIn("kubequota.io/requeue",
                         self.sim.get_pod("early", "e1")["metadata"].get("annotations") or {})
        self.create_eq(UPSTREAM, "early", "q", {"cpu": "2", "memory": "1Gi"}, {"cpu": "2", "memory": "1Gi"})
        wait_until(lambda: "kubequota.io/requeue" in (self.sim.get_pod("early", "e1")["metadata"].get(
            "annotations") or {}), 10, 0.05, "e1 poked once it moved into early/q")
        self.assert_bound("e1", "early")
        self.wait_view({"early/q": (1000, 1000, 1000), "default": (1000, 1000, 1000)}, ("early/q", "default"),
                       "e1 counted in early/q, f0 in default (whose runtime shows its max, 1 cpu)")


def shared_config(max_vcore):
    return queues_config({"name": "default"}, {"name": "shared", "resources": {"max": {"vcore": max_vcore}}})


class ReloadRaisesMaxTest(KQTestCase):
    """Issue 38, item 4: a reload that raises a queue's max releases a pod the gate holds at
    once. The reloader swapped the config snapshot, which wakes the gate, before the
    elastic module had applied the new max to the quota tree's queue group (its timer does,
    up to a tick later): a gate pass in between checked the pod against the old max and set
    it aside until a later timed pass (a probe of six reloads on the simulator: the pod went
    0.5 s after the reload in two, 1.5 s in four; the issue saw 30 s on the real cluster,
    not reproduced here). The tree's groups are now applied before the swap (all six at
    0.5 s). --elastic-tick 10m keeps the timer from applying the reload itself here, so
    only that ordering can release the pod."""
    CONFIG = shared_config("1")
    EXTRA_ARGS = ("--admission-gate", "--reload-interval", "200ms", "--elastic-tick", "10m")

    def ungated(self):
        return sorted(p["metadata"]["name"] for p in self.sim.state()["pods"]
                      if p["spec"].get("schedulerName") == SCHED and not p["metadata"].get("deletionTimestamp")
                      and not any(g.get("name") == GATE for g in p["spec"].get("schedulingGates") or []))

    def test_reload_raising_a_max_releases_the_waiting_pod(self):
        for n in ("g1", "g2"):
            self.sim.create_pod(pod_manifest(n, user="u", cpu="1", memory="64Mi", queue="root.shared",
                                             gates=(GATE,)))
        wait_until(lambda: len(self.ungated()) == 1, 15, 0.05, "one pod released (max 1 cpu)")
        self.assert_bound(self.ungated()[0])
        self.kq.write_config(shared_config("2"))
        wait_until(lambda: len(self.ungated()) == 2, 10, 0.05, "the second pod released after the reload")
        q = [c for c in self.kq.queues()["children"] if c["queuename"] == "root.shared"][0]
        self.assertEqual(q["maxResource"]["vcore"], 2000)
