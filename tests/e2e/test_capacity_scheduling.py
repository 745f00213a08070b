"""scheduler-plugins' CapacityScheduling, case by case from its own unit tests
(kubernetes-sigs/scheduler-plugins pkg/capacityscheduling/capacity_scheduling_test.go and
elasticquota_test.go): the same quotas, pods and expected verdicts, against kubequota's
filter (PreFilter) and preempt verb (PostFilter's dry run, SelectVictimsOnNode).

Upstream's tests set each quota's Used directly; here the same Used comes from bound
pods of those sizes. Memory is in bytes, as in upstream's makePod (resource.NewQuantity).
Upstream's pods request cpu 0; here they name no cpu, which CapacityScheduling compares
the same way (a missing field is 0). Expected verdicts are upstream's, worked out in the
comments from elasticquota.go's cmp2, never read from kubequota."""

from kqtest import KQTestCase, ci_get, pod_manifest, queues_config, wait_until
from test_elastic import eq_path, group

UPSTREAM = "scheduling.x-k8s.io"
HIGH, MID = 1000, 100   # upstream's highPriority / midPriority (only their order matters)


class CapacityBase(KQTestCase):
    CONFIG = queues_config({"name": "default"})
    NODES = ()
    START = False
    EXTRA_ARGS = ("--reclaim-grace", "600000", "--elastic-tick", "100")
    NODE = ("node-a", "8", "64Gi")

    def setUp(self):
        super().setUp()
        name, cpu, mem = self.NODE
        self.sim.world.add_node(name, cpu=cpu, memory=mem)
        with self.sim.world.cond:
            self.sim.world.crds = {UPSTREAM}
        self.kq.start()
        wait_until(lambda: self.kq.queues()["quotaTree"]["clusterTotal"].get("cpu") == int(cpu) * 1000,
                   15, 0.05, "cluster total")

    def eq(self, ns, min_, max_):
        spec = {}
        if min_ is not None:
            spec["min"] = min_
        if max_ is not None:
            spec["max"] = max_
        body = {"apiVersion": UPSTREAM + "/v1alpha1", "kind": "ElasticQuota",
                "metadata": {"name": ns, "namespace": ns}, "spec": spec}
        r = self.sim.http.post(eq_path(UPSTREAM, ns), body)
        self.assertEqual(r.status, 201, r.text)
        wait_until(lambda: group(self.kq.queues()["quotaTree"], "%s/%s" % (ns, ns)) is not None, 20, 0.05,
                   "group %s" % ns)

    def pod(self, name, ns, mem=None, cpu=None, priority=0, extra=None):
        p = pod_manifest(name, ns=ns, user="alice", cpu=cpu, memory=None if mem is None else str(mem),
                         extra_requests=extra)
        p["spec"]["priority"] = priority
        return self.sim.create_pod(p)

    def prefilter(self, pod):
        """(allowed, reason) of the filter verb, nothing bound: upstream's PreFilter call."""
        res = self.sched.filter(pod, [self.NODE[0]])
        return bool(ci_get(res, "NodeNames")), self.sched.filter_reason(res)

    def run_on_node(self, name, ns):
        ok, why = self.sched.schedule(ns, name, nodes=[self.NODE[0]])
        self.assertTrue(ok, "%s/%s should bind: %s" % (ns, name, why))

    def uid(self, ns, name):
        return self.sim.get_pod(ns, name)["metadata"]["uid"]

    def preempt(self, pre, proposed):
        """kube-scheduler's preempt call (nodeCacheCapable: meta victims) with the victims its
        DefaultPreemption proposed on node-a; the victims kubequota answers, by name."""
        args = {"Pod": self.sched.cached(pre), "NodeNameToVictims": None, "NodeNameToMetaVictims": {
            self.NODE[0]: {"Pods": [{"UID": self.uid(ns, n)} for ns, n in proposed], "NumPDBViolations": 0}}}
        r = self.kq.post("/scheduler/preempt", args)
        self.assertEqual(r.status, 200, r.text)
        got = r.json()["NodeNameToMetaVictims"] or {}
        names = {p["metadata"]["uid"]: p["metadata"]["name"] for p in self.sim.state()["pods"]}
        return {node: [names.get(v["UID"], v["UID"]) for v in (vs.get("Pods") or [])] for node, vs in got.items()}


class PreFilterTest(CapacityBase):
    """TestPreFilter (capacity_scheduling_test.go), its three cases literally and in turn,
    then the edge cases of elasticquota.go's cmp2 that its PreFilter inherits (a max or a
    min that does not name a resource; a quota without min or max)."""

    def test_pre_filter(self):
        # case "pod subjects to ElasticQuota": ns1 min memory 1000, max 2000, used 300
        self.eq("ns1", {"memory": "1000"}, {"memory": "2000"})
        self.pod("used", "ns1", mem=300)
        self.run_on_node("used", "ns1")
        # ns1-p1 (500): 300 + 500 <= 2000 and the sum 800 <= 1000: Success
        ok, why = self.prefilter(self.pod("ns1-p1", "ns1", mem=500))
        self.assertTrue(ok, why)
        # ns1-p2 (1800): 300 + 1800 > 2000: Unschedulable (its max)
        ok, why = self.prefilter(self.pod("ns1-p2", "ns1", mem=1800))
        self.assertFalse(ok)
        self.assertIn("max", why)

        # case "the sum of used is bigger than the sum of min": ns1 used 1800 (min 1000),
        # ns2 used 200 (min 1000); ns2-p1 (500): 2000 + 500 > 2000: Unschedulable
        self.eq("ns2", {"memory": "1000"}, {"memory": "2000"})
        self.pod("more", "ns1", mem=1500)
        self.run_on_node("more", "ns1")
        self.pod("u2", "ns2", mem=200)
        self.run_on_node("u2", "ns2")
        ok, why = self.prefilter(self.pod("ns2-p1", "ns2", mem=500))
        self.assertFalse(ok)
        self.assertIn("sum of their mins", why)

        # case "without elasticQuotaInfo": a namespace with no quota: Success
        ok, why = self.prefilter(self.pod("ns3-p1", "ns3", mem=500))
        self.assertTrue(ok, why)

        # From here the sum of memory mins is 3000 with 2000 used: memory fits below.
        # A max that lacks a field the pod requests: cmp2 reads the missing MilliCPU of
        # the max as 0 (TestUsedOverMaxWith compares fields unconditionally), so 100m of
        # cpu is over a max of memory only: Unschedulable.
        self.eq("mem-only", {"memory": "1000"}, {"memory": "2000"})
        ok, why = self.prefilter(self.pod("p", "mem-only", mem=100, cpu="100m"))
        self.assertFalse(ok, "a max without cpu admits no cpu")
        self.assertIn("cpu", why)
        self.assertIn("max", why)
        # ...but a scalar the max lacks is unlimited ("OverMaxWith Used And Max Don't Have
        # GPU Value": false). Another quota's min names the GPUs, so the sum rule passes:
        # 0 + 5 <= 10.
        self.eq("gpus", {"nvidia.com/gpu": "10"}, {"nvidia.com/gpu": "10"})
        ok, why = self.prefilter(self.pod("g", "mem-only", mem=10, extra={"nvidia.com/gpu": "5"}))
        self.assertTrue(ok, why)
        # A resource no min names: the sum of mins of it is 0 (cmp2's bound
        # LowerBoundOfMin), so any request of it is over: Unschedulable.
        ok, why = self.prefilter(self.pod("f", "mem-only", mem=10, extra={"example.com/fpga": "1"}))
        self.assertFalse(ok, "a resource named in no min cannot be requested")
        self.assertIn("example.com/fpga", why)
        self.assertIn("sum of their mins", why)

        # A quota with no min adds 0 to the sum of mins (newElasticQuotaInfo: a nil min is
        # LowerBoundOfMin everywhere). No quota names cpu in its min: 0 + 1 cpu > 0.
        self.eq("nomin", None, {"cpu": "4", "memory": "1Gi"})
        ok, why = self.prefilter(self.pod("c1", "nomin", mem=1024, cpu="1"))
        self.assertFalse(ok, "no cpu min anywhere: no cpu fits the sum of mins")
        self.assertIn("sum of their mins", why)
        # a quota with no max is unlimited (TestUsedOverMaxWith "Doesn't Have Max"); its
        # min of 2 cpu lets 1 cpu of nomin fit the sum (0 + 1 <= 2)
        self.eq("nomax", {"cpu": "2", "memory": "1Gi"}, None)
        ok, why = self.prefilter(self.pod("c2", "nomin", mem=1024, cpu="1"))
        self.assertTrue(ok, why)

    def test_the_remaining_difference_is_warned_at_load(self):
        # without --preempt-default-group, a preemptor of a namespace without quota takes
        # nothing (TestPostFilter "without elasticQuotas" expects a victim): said at load
        wait_until(lambda: "event=peer_difference api_group=scheduling.x-k8s.io option=--preempt-default-group"
                   in self.kq.logs(), 10, 0.05, "the load-time warning")


class DryRunPreemptionTest(CapacityBase):
    """TestDryRunPreemption and TestPostFilter (capacity_scheduling_test.go): node-a has 150
    bytes of memory; every pod asks 50. kube-scheduler's DefaultPreemption proposes some
    lower-priority pod of the node; kubequota answers CapacityScheduling's victims."""
    NODE = ("node-a", "8", "150")
    # pods of a namespace without quota are in kubequota's default group: victims only
    # with this flag (README, "Coming from YuniKorn / Koordinator")
    EXTRA_ARGS = CapacityBase.EXTRA_ARGS + ("--preempt-default-group",)

    def fill(self, pods):
        for name, ns, prio in pods:
            self.pod(name, ns, mem=50, priority=prio)
            self.run_on_node(name, ns)

    def test_in_namespace_preemption(self):
        # ns1: min 50, max 200, used 50; ns2: min 200, max 200, used 100. The preemptor
        # (ns1, 50) makes ns1 use 100 > its min 50 (usedOverMinWith): only ns1's own pods of
        # lower priority may go: t1-p1.
        self.eq("ns1", {"memory": "50"}, {"memory": "200"})
        self.eq("ns2", {"memory": "200"}, {"memory": "200"})
        self.fill([("t1-p1", "ns1", MID), ("t1-p2", "ns2", MID), ("t1-p3", "ns2", MID)])
        pre = self.pod("t1-p", "ns1", mem=50, priority=HIGH)
        # kube-scheduler proposes the youngest mid pod, t1-p3 (ns2): not a victim here
        self.assertEqual(self.preempt(pre, [("ns2", "t1-p3")]), {"node-a": ["t1-p1"]})

    def test_cross_namespace_preemption(self):
        # ns1: min 150, max 200, used 50; ns2: min 50, max 200, used 100 (over its min).
        # The preemptor (ns1, 50) keeps ns1 within its min (100 <= 150): ns2's pods are the
        # potential victims, whatever their priority (t1-p2 has the preemptor's). Reprieved
        # most important first: t1-p2 back (50 + 50 + 50 = 150 fits the node; the sum
        # 150 + 50 <= 200); t1-p3 back would need 200 > 150: the victim is t1-p3.
        self.eq("ns1", {"memory": "150"}, {"memory": "200"})
        self.eq("ns2", {"memory": "50"}, {"memory": "200"})
        self.fill([("t1-p1", "ns1", MID), ("t1-p2", "ns2", HIGH), ("t1-p3", "ns2", MID)])
        pre = self.pod("t1-p", "ns1", mem=50, priority=HIGH)
        # before: the cluster (150) is full, so kubequota's filter denies (resolvably)
        ok, why = self.prefilter(pre)
        self.assertFalse(ok)
        # kube-scheduler proposes t1-p1 (lower priority, ns1): not a victim here
        self.assertEqual(self.preempt(pre, [("ns1", "t1-p1")]), {"node-a": ["t1-p3"]})
        # while t1-p3 terminates, the preemptor's filter on node-a counts without it (the
        # ledger's in-flight preemption, as CapacityScheduling's PodEligibleToPreemptOthers
        # waits for a terminating borrower rather than preempting again)
        ok, why = self.prefilter(pre)
        self.assertTrue(ok, why)

    def test_post_filter_cases(self):
        # TestPostFilter "without elasticQuotas": no quota anywhere; the preemptor takes a
        # lower-priority pod that has no quota either (the one kube-scheduler proposed)
        self.fill([("t1-p2", "ns1", MID), ("t1-p3", "ns2", MID), ("t1-p4", "ns2", MID)])
        pre = self.pod("t1-p1", "ns1", mem=50, priority=HIGH)
        self.assertEqual(self.preempt(pre, [("ns2", "t1-p4")]), {"node-a": ["t1-p4"]})
        for ns, name in (("ns1", "t1-p1"), ("ns1", "t1-p2"), ("ns2", "t1-p3"), ("ns2", "t1-p4")):
            self.sim.delete_pod(ns, name)
        wait_until(lambda: group(self.kq.queues()["quotaTree"], "default").get("pods") == 0,
                   20, 0.05, "the pods gone")

        # TestPostFilter "cross-namespace preemption": ns1 min 150 used 50, ns2 min 50 used
        # 100, pods t1-p2 (ns1), t1-p3 and t1-p4 (ns2), all mid; the preemptor t1-p1 (ns1,
        # high) is nominated to node-a: one of ns2's pods goes (both mid and equally old:
        # either), and never t1-p2 of its own quota.
        self.eq("ns1", {"memory": "150"}, {"memory": "200"})
        self.eq("ns2", {"memory": "50"}, {"memory": "200"})
        self.fill([("t1-p2", "ns1", MID), ("t1-p3", "ns2", MID), ("t1-p4", "ns2", MID)])
        pre = self.pod("t1-p1", "ns1", mem=50, priority=HIGH)
        got = self.preempt(pre, [("ns1", "t1-p2")])
        self.assertEqual(list(got), ["node-a"])
        self.assertEqual(len(got["node-a"]), 1)
        self.assertIn(got["node-a"][0], ("t1-p3", "t1-p4"))
        # and a preemptor that does not fit even with every borrower gone gets no node:
        # 150 bytes asked of a 150-byte node holding t1-p2 (not a victim)
        big = self.pod("big", "ns1", mem=150, priority=HIGH)
        self.assertEqual(self.preempt(big, [("ns1", "t1-p2")]), {})
