"""ElasticQuota on a real API server: the chart's CRDs of both API groups with the real
schema validation, kubequota's validation webhook, runtime, and preemption through the real
kube-scheduler's preemption path (DefaultPreemption's dry run, then kubequota's preempt verb).

Follows scheduler-plugins' CapacityScheduling e2e/integration test
(kubernetes-sigs/scheduler-plugins test/integration/capacity_scheduling_test.go: quotas of two
namespaces with min and max, a full cluster, a higher-priority pod preempting) and
Koordinator's runtime arithmetic (koordinator-sh/koordinator
pkg/scheduler/plugins/elasticquota/core/runtime_quota_calculator.go: each group first gets
min(request, min), the rest goes to groups wanting more, by shared weight, up to max).

The cluster is shrunk to two 4-cpu nodes for this class, so total = 8 cpu:
  quota A (namespace a): min 4, max 8      quota B (namespace b): min 4, max 8
B asks 2 cpu, so it lends 2 of its min: A's runtime = 4 + (8 - 4 - 2) = 6 cpu.
"""

from kubetest import KubeTestCase, queues_config, wait_until

EQ = "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/%s/elasticquotas"
KOORD = "/apis/scheduling.sigs.k8s.io/v1alpha1/namespaces/%s/elasticquotas"


TWO_SMALL_NODES = {"small-0": {"cpu": "4", "memory": "16Gi"}, "small-1": {"cpu": "4", "memory": "16Gi"}}
PRIORITIES = {"kq-low": 100, "kq-high": 1000}


def eq(name, mn, mx, api="scheduling.x-k8s.io/v1alpha1", labels=None):
    return {"apiVersion": api, "kind": "ElasticQuota",
            "metadata": {"name": name, "labels": labels or {}},
            "spec": {"min": mn, "max": mx}}


class ElasticQuotaOnRealApi(KubeTestCase):
    CONFIG = queues_config({"name": "default"})
    CHART_VALUES = {"kubequota": {"admissionGate": {"enabled": False}}}
    KQ_ARGS = ("--reclaim-grace=2s", "--reclaim-sources=queues,scheduler-plugins")  # CapacityScheduling has no reclaim: on here

    NODES = TWO_SMALL_NODES
    PRIORITY_CLASSES = PRIORITIES

    def test_crd_schemas_of_both_groups_are_enforced_by_the_api_server(self):
        ns = self.ns()
        admin = self.c.api("admin")
        # scheduler-plugins' group: spec.min must be a map of quantities
        st, body = admin.status("POST", EQ % ns, {"apiVersion": "scheduling.x-k8s.io/v1alpha1",
                                                  "kind": "ElasticQuota", "metadata": {"name": "bad"},
                                                  "spec": {"min": "lots"}})
        self.assertEqual(st, 422, body)
        self.assertIn("spec.min", body["message"])
        # Koordinator's group, from the chart too
        st, body = admin.status("POST", KOORD % ns, {"apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
                                                     "kind": "ElasticQuota", "metadata": {"name": "bad"},
                                                     "spec": {"max": ["x"]}})
        self.assertEqual(st, 422, body)
        # a valid object of each group is stored
        admin.post(EQ % ns, eq("ok", {"cpu": "1"}, {"cpu": "2"}))
        admin.post(KOORD % ns, eq(ns + "-koord", {"cpu": "1"}, {"cpu": "2"}, api="scheduling.sigs.k8s.io/v1alpha1"))

    def test_validation_webhook_refuses_min_above_max(self):
        ns = self.ns()
        st, body = self.c.api("admin").status("POST", EQ % ns, eq("inverted", {"cpu": "4"}, {"cpu": "2"}))
        self.assertEqual(st, 403, body)
        self.assertIn('admission webhook "elasticquotas.kubequota.io" denied the request', body["message"])
        self.assertIn("min", body["message"])

    def test_runtime_preemption_and_reclaim_through_the_real_scheduler(self):
        a, b = self.ns(), self.ns()
        admin = self.c.api("admin")
        # the pods ask cpu only: a max without memory is a max of 0 memory (CapacityScheduling)
        admin.post(EQ % a, eq("quota-a", {"cpu": "4"}, {"cpu": "8"}))
        admin.post(EQ % b, eq("quota-b", {"cpu": "4"}, {"cpu": "8"}))
        for g in ("%s/quota-a" % a, "%s/quota-b" % b):
            wait_until(lambda: "event=quota_group_applied group=%s " % g in self.c.kubequota_log(),
                       10, 0.2, "kubequota applied group %s" % g)
        # B first (older pods), then A fills the cluster: 2 + 6 = 8 cpu on two 4-cpu nodes.
        for i in range(2):
            self.pod(b, "b%d" % i, user="bob", priority_class="kq-low", memory=None)
        for i in range(2):
            self.wait_bound(b, "b%d" % i)
        for i in range(6):
            self.pod(a, "a%d" % i, user="alice", priority_class="kq-low", memory=None)
        for i in range(6):
            self.wait_bound(a, "a%d" % i)
        # A's runtime is 6: a seventh cpu for A is a quota denial (FailedNodes, so the
        # scheduler may preempt), and the nodes are full. The real DefaultPreemption proposes
        # the youngest low-priority pod per node; kubequota's preempt keeps A's own only.
        self.pod(a, "a-high", user="alice", priority_class="kq-high", memory=None)
        self.wait_bound(a, "a-high", timeout=60)
        self.assertRegex(self.c.kubequota_log(), r"event=preempt pod=%s/a-high .*nodes_kept=[1-9]" % a)
        gone = [n for n in ("a%d" % i for i in range(6))
                if self.c.api().request("GET", "/api/v1/namespaces/%s/pods/%s" % (a, n), ok=None).get("code") == 404
                or self.get(a, n)["metadata"].get("deletionTimestamp")]
        self.assertEqual(len(gone), 1, gone)
        for i in range(2):
            self.assertTrue(self.node_of(b, "b%d" % i), "B's pods are never victims of A's preemption")
        # B asks for its min back: B wants 3 (within its min 4), so A's runtime falls to 5
        # while A uses 6; after --reclaim-grace kubequota evicts one of A's pods (the Eviction
        # API, lowest priority first) and B's pod schedules.
        self.pod(b, "b2", user="bob", priority_class="kq-low", memory=None)
        self.wait_bound(b, "b2", timeout=60)
        reclaimed = wait_until(lambda: [e for e in self.c.events(a) if e.get("reason") == "Reclaimed"],
                               30, 0.2, "a Reclaimed event in %s" % a)
        self.assertIn("quota-a", reclaimed[0]["message"])
        self.assertTrue(self.node_of(a, "a-high"), "the high-priority pod is never reclaimed first")


class CrossNamespacePreemptionOnRealApi(KubeTestCase):
    """CapacityScheduling's cross-namespace preemption (kubernetes-sigs/scheduler-plugins
    pkg/capacityscheduling/capacity_scheduling.go SelectVictimsOnNode; its unit case
    TestDryRunPreemption "cross-namespace preemption") through the real kube-scheduler:
    DefaultPreemption's dry run proposes lower-priority pods per node, kubequota's preempt
    answers the borrower's, kube-scheduler deletes them. Reclaim is held off (a long
    --reclaim-grace), so only preemption can take anything back.

    Two 4-cpu nodes, 8 cpu. Quota A (min 2, max 8) borrows: 6 pods of 1 cpu; quota B
    (min 6, max 8) runs 2. Every min is in use or lent: 8 used = the sum of mins 8. B asks
    1 more cpu at a higher priority: 2 + 1 <= 6 is within its min (usedOverMinWith false),
    so the victims come from A (6 > its min 2), one pod: 7 + 1 <= 8. B's own pods, of lower
    priority too, are not taken."""
    CONFIG = queues_config({"name": "default"})
    CHART_VALUES = {"kubequota": {"admissionGate": {"enabled": False}}}
    KQ_ARGS = ("--reclaim-grace=10m",)

    NODES = TWO_SMALL_NODES
    PRIORITY_CLASSES = PRIORITIES

    def alive(self, ns, names):
        return [n for n in names
                if self.c.api().request("GET", "/api/v1/namespaces/%s/pods/%s" % (ns, n), ok=None).get("code") != 404
                and not self.get(ns, n)["metadata"].get("deletionTimestamp")]

    def test_a_quota_within_its_min_takes_back_from_a_borrower(self):
        a, b = self.ns(), self.ns()
        admin = self.c.api("admin")
        admin.post(EQ % a, eq("quota-a", {"cpu": "2"}, {"cpu": "8"}))
        admin.post(EQ % b, eq("quota-b", {"cpu": "6"}, {"cpu": "8"}))
        for g in ("%s/quota-a" % a, "%s/quota-b" % b):
            wait_until(lambda: "event=quota_group_applied group=%s " % g in self.c.kubequota_log(),
                       10, 0.2, "kubequota applied group %s" % g)
        bs = ["b0", "b1"]
        as_ = ["a%d" % i for i in range(6)]
        for n in bs:
            self.pod(b, n, user="bob", priority_class="kq-low", memory=None)
        for n in bs:
            self.wait_bound(b, n)
        for n in as_:
            self.pod(a, n, user="alice", priority_class="kq-low", memory=None)
        for n in as_:
            self.wait_bound(a, n)
        self.pod(b, "b-high", user="bob", priority_class="kq-high", memory=None)
        self.wait_bound(b, "b-high", timeout=60)
        self.assertRegex(self.c.kubequota_log(), r"event=preempt pod=%s/b-high .*nodes_kept=[1-9]" % b)
        self.assertEqual(len(self.alive(a, as_)), 5, "exactly one of A's borrowed pods is preempted")
        self.assertEqual(self.alive(b, bs), bs, "B's own pods are not victims: B is within its min")
        self.assertFalse([e for e in self.c.events(a) if e.get("reason") == "Reclaimed"],
                         "taken back by preemption, not by reclaim")


class KoordinatorQuotaOnRealApi(KubeTestCase):
    """Koordinator's quotas through the real API server, kube-scheduler and the chart's
    flags (issue 27): reclaim of Koordinator quotas is off as the chart renders it, as
    Koordinator's revoke controller is without monitorAllQuotas (koordinator-sh/koordinator
    pkg/scheduler/apis/config/v1/defaults.go); a pod labelled with an existing quota runs in it
    although queues.yaml has no queue for it; and the validating webhook refuses to turn a
    quota with a bound pod into a parent with Koordinator's message
    (pkg/webhook/elasticquota/quota_topology_check.go checkIsParentChange)."""
    CONFIG = queues_config({"name": "teams", "resources": {"max": {"vcore": "2"}}})  # no root.default
    CHART_VALUES = ElasticQuotaOnRealApi.CHART_VALUES

    def quota(self, ns, name, labels=None):
        self.c.api("admin").post(KOORD % ns, eq(name, {"cpu": "1"}, {"cpu": "2"},
                                                api="scheduling.sigs.k8s.io/v1alpha1", labels=labels))
        wait_until(lambda: "event=quota_group_applied group=%s " % name in self.c.kubequota_log(),
                   10, 0.2, "kubequota applied group %s" % name)

    def test_chart_renders_koordinator_reclaim_off(self):
        self.assertIn("event=reclaim_config sources=queues grace_ms=60000 "
                      "koordinator_delay_ms=120000", self.c.kubequota_log())

    def test_labelled_pod_without_a_queue_runs_in_its_quota(self):
        ns = self.ns()
        q = ns + "-q"
        self.quota(ns, q)
        self.pod(ns, "p1", labels={"quota.scheduling.koordinator.sh/name": q})
        self.wait_bound(ns, "p1")

        def used():
            o = self.c.api("admin").get((KOORD % ns) + "/" + q)
            return ((o.get("status") or {}).get("used") or {}).get("cpu")
        wait_until(lambda: used() == "1", 30, 0.2, "status.used cpu 1 on quota %s" % q)

    def test_a_quota_with_a_bound_pod_cannot_become_a_parent(self):
        ns = self.ns()
        q = ns + "-q"
        self.quota(ns, q)
        self.pod(ns, "p1", labels={"quota.scheduling.koordinator.sh/name": q})
        self.wait_bound(ns, "p1")
        path = (KOORD % ns) + "/" + q
        st, body = self.c.api("admin").status("PATCH", path, {"metadata": {"labels": {
            "quota.scheduling.koordinator.sh/is-parent": "true"}}}, ctype="application/merge-patch+json")
        self.assertEqual(st, 403, body)
        self.assertIn("quota has bound pods, isParent is forbidden to modify as true, quotaName: %s" % q,
                      body["message"])
        self.c.delete_pod(ns, "p1")
        self.c.wait_pod_gone(ns, "p1")
        wait_until(lambda: self.c.api("admin").status("PATCH", path, {"metadata": {"labels": {
            "quota.scheduling.koordinator.sh/is-parent": "true"}}}, ctype="application/merge-patch+json")[0] == 200,
            20, 0.2, "the change allowed once p1 is gone")
