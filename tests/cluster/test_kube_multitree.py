"""Koordinator's multi-tree quotas on a real API server with the real kube-scheduler: the
chart's ElasticQuotaProfile CRD (verbatim from koordinator-sh/koordinator
config/crd/bases/quota.koordinator.sh_elasticquotaprofiles.yaml, so its schema is enforced),
a profile selecting one node pool, and a Koordinator quota in that tree.

Follows koordinator-sh/koordinator pkg/quota-controller/profile/profile_controller_test.go
(TestQuotaProfileReconciler_Reconciler_CreateQuota, "cn-hangzhou-a profile": the tree's total
is the selected nodes' allocatable) and pkg/webhook/pod/mutating/multi_quota_tree_affinity_test.go
(TestAddNodeAffinityForMultiQuotaTree, "add node affinity": a pod of the tree's quota may only
run on the profile's nodes).

Nodes: pool-a-0 and pool-a-1 (zone a, 4 cpu each), plain-0 (no zone, 4 cpu): 12 cpu in all.
The profile selects zone a: its tree's total is 4 + 4 = 8 cpu. The quota team (parent: the
tree's root, whose min and max name cpu and memory, the default resource keys; max 100 cpu) may use 8 cpu, and only on pool-a-*: three 3-cpu pods need 9 > 8, so
the third waits although plain-0 is idle.
"""

from kubetest import KubeTestCase, queues_config, wait_until

PROFILES = "/apis/quota.koordinator.sh/v1alpha1/namespaces/%s/elasticquotaprofiles"
KOORD = "/apis/scheduling.sigs.k8s.io/v1alpha1/namespaces/%s/elasticquotas"
L = "quota.scheduling.koordinator.sh/"
ZONE = "topology.kubernetes.io/zone"


class MultiTreeOnRealApi(KubeTestCase):
    CONFIG = queues_config({"name": "default"})
    CHART_VALUES = {"kubequota": {"admissionGate": {"enabled": False}}}
    NODES = {"pool-a-0": {"cpu": "4", "memory": "16Gi", "labels": {ZONE: "zone-a"}},
             "pool-a-1": {"cpu": "4", "memory": "16Gi", "labels": {ZONE: "zone-a"}},
             "plain-0": {"cpu": "4", "memory": "16Gi"}}

    def test_a_tree_quota_shares_its_pool_only(self):
        ns = self.ns()
        admin = self.c.api("admin")
        # the CRD's schema: spec.quotaName and spec.nodeSelector are required
        st, body = admin.status("POST", PROFILES % ns, {
            "apiVersion": "quota.koordinator.sh/v1alpha1", "kind": "ElasticQuotaProfile",
            "metadata": {"name": "bad"}, "spec": {"quotaName": "x"}})
        self.assertEqual(st, 422, body)
        self.assertIn("nodeSelector", body["message"])
        admin.post(PROFILES % ns, {
            "apiVersion": "quota.koordinator.sh/v1alpha1", "kind": "ElasticQuotaProfile",
            "metadata": {"name": "pool-a", "labels": {L + "tree-id": "tree-a"}},
            "spec": {"quotaName": "pool-a-root", "nodeSelector": {"matchLabels": {ZONE: "zone-a"}},
                     "quotaLabels": {L + "is-parent": "true"}}})

        def tree():
            return self.kq_json("/ws/v1/partition/default/queues").get("quotaTree") or {}

        def root_max():
            g = [g for g in tree().get("groups", []) if g["name"] == "pool-a-root"]
            return g and g[0].get("maxResource", {}).get("cpu")
        wait_until(lambda: root_max() == 8000, 30, 0.2, "the tree's root with 8 cpu")
        trees = tree()["trees"]
        self.assertEqual([(t["tree"], sorted(t["nodes"])) for t in trees], [("tree-a", ["pool-a-0", "pool-a-1"])])
        admin.post(KOORD % ns, {
            "apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "ElasticQuota",
            "metadata": {"name": ns, "labels": {L + "parent": "pool-a-root", L + "tree-id": "tree-a"}},
            "spec": {"min": {"cpu": "0"}, "max": {"cpu": "100", "memory": "100Gi"}}})
        wait_until(lambda: any(g["name"] == ns and g.get("tree") == "tree-a" for g in tree().get("groups", [])),
                   30, 0.2, "the quota in tree-a")
        for i in range(2):
            self.pod(ns, "p%d" % i, cpu="3")
        for i in range(2):
            self.wait_bound(ns, "p%d" % i)
            self.assertIn(self.node_of(ns, "p%d" % i), ("pool-a-0", "pool-a-1"))
        self.pod(ns, "p2", cpu="3")
        self.wait_unschedulable(ns, "p2")
        self.assertIsNone(self.node_of(ns, "p2"))
