"""Koordinator's multi-tree quotas end to end against the API simulator: ElasticQuotaProfile
objects (quota.koordinator.sh/v1alpha1) select node pools, each pool's allocatable (times the
profile's resourceRatio) is its tree's total, and quotas of different trees never borrow from
each other nor from the default tree (the nodes no profile selects).

Upstream (koordinator-sh/koordinator):
- pkg/quota-controller/profile/profile_controller.go, Reconcile: the root quota of a tree gets
  min = the selected nodes' allocatable times resourceRatio (DecorateResourceByResourceRatio,
  MultiplyQuantity truncates), the tree-id label (the profile's, else hash() = fnv-64a of
  "namespace/name" in decimal) and is-root "true";
  profile_controller_test.go, TestQuotaProfileReconciler_Reconciler_CreateQuota, cases
  "cn-hangzhou-a profile" (two zone-a nodes of 10 cpu: total 20), "has ratio" (0.9: 18) and
  "with tree id" (the label wins over the hash).
- pkg/scheduler/plugins/elasticquota/quota_handler.go, handlerQuotaWhenRoot: a tree's
  GroupQuotaManager total is its root quota's total, taken off the default tree's total;
  GetOrCreateGroupQuotaManagerForTree: one manager per tree id, so a quota's runtime is
  shared out of its own tree's total only.
- core/quota_summary.go, QuotaInfoSummary.Tree: the summaries name each quota's tree ("tree").
Every expected number below is worked out by hand from those rules in the comments."""

from kqtest import KQTestCase, pod_manifest, queues_config, wait_until
from test_elastic import eq_path, group

KOORD = "scheduling.sigs.k8s.io"
PROFILE = "quota.koordinator.sh"
ZONE = "topology.kubernetes.io/zone"
L = "quota.scheduling.koordinator.sh/"
FAST = ("--reclaim-grace", "600000", "--elastic-tick", "100", "--status-interval", "200")
GI = 1024 ** 3


def fnv64a(s):
    """Go's hash/fnv New64a over s, as profile_controller.go's hash() (decimal)."""
    h = 0xcbf29ce484222325
    for b in s.encode():
        h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return str(h)


def profile_path(ns, name=None):
    p = "/apis/%s/v1alpha1/namespaces/%s/elasticquotaprofiles" % (PROFILE, ns)
    return p + ("/" + name if name else "")


class MultiTreeBase(KQTestCase):
    CONFIG = queues_config({"name": "default"})
    NODES = ()
    EXTRA_ARGS = FAST
    START = False

    def setUp(self):
        super().setUp()
        w = self.sim.world
        # two zone-a nodes, one zone-b node, one node no profile selects (the default tree)
        w.add_node("node-a1", cpu="10", memory="10Gi", labels={ZONE: "cn-hangzhou-a"})
        w.add_node("node-a2", cpu="10", memory="10Gi", labels={ZONE: "cn-hangzhou-a"})
        w.add_node("node-b1", cpu="10", memory="10Gi", labels={ZONE: "cn-hangzhou-b"})
        w.add_node("node-d1", cpu="6", memory="10Gi")
        with w.cond:
            w.crds = {KOORD, PROFILE}
        self.kq.start()
        wait_until(lambda: self.tree()["clusterTotal"].get("cpu") == 36000, 15, 0.05,
                   "cluster total cpu 36")

    def tree(self):
        return self.kq.queues()["quotaTree"]

    def g(self, name):
        return group(self.tree(), name) or {}

    def create(self, path, body):
        r = self.sim.http.post(path, body)
        self.assertEqual(r.status, 201, r.text)

    def profile(self, name, quota, selector, ratio=None, labels=None, annotations=None, quota_labels=None):
        spec = {"quotaName": quota, "nodeSelector": selector,
                "quotaLabels": dict({L + "is-parent": "true"}, **(quota_labels or {}))}
        if ratio is not None:
            spec["resourceRatio"] = ratio
        self.create(profile_path("koordinator-system"),
                    {"apiVersion": PROFILE + "/v1alpha1", "kind": "ElasticQuotaProfile",
                     "metadata": {"name": name, "namespace": "koordinator-system",
                                  "labels": labels or {}, "annotations": annotations or {}},
                     "spec": spec})

    def eq(self, ns, name, min_, max_, labels=None):
        self.create(eq_path(KOORD, ns),
                    {"apiVersion": KOORD + "/v1alpha1", "kind": "ElasticQuota",
                     "metadata": {"name": name, "namespace": ns, "labels": labels or {}},
                     "spec": {"min": min_, "max": max_}})

    def two_trees(self):
        # zone a with ratio 0.9: (10 + 10) * 0.9 = 18 cpu, 20Gi * 0.9 = 19327352832 bytes
        self.profile("profile1", "profile1-root", {"matchLabels": {ZONE: "cn-hangzhou-a"}}, "0.9")
        # zone b by an expression, with its own tree id: 10 cpu, 10Gi
        self.profile("profile2", "profile2-root",
                     {"matchExpressions": [{"key": ZONE, "operator": "In",
                                            "values": ["cn-hangzhou-b"]}]},
                     labels={L + "tree-id": "tree2"})
        wait_until(lambda: self.g("profile1-root").get("maxResource", {}).get("cpu") == 18000
                   and self.g("profile2-root").get("maxResource", {}).get("cpu") == 10000,
                   15, 0.05, "both trees' roots with their totals")

    def pod(self, name, ns, cpu):
        p = pod_manifest(name, ns=ns, user="alice", cpu=str(cpu), memory="64Mi")
        return self.sim.create_pod(p)


class TreeTotalsTest(MultiTreeBase):
    """TestQuotaProfileReconciler_Reconciler_CreateQuota, "has ratio" and "with tree id"."""

    def test_each_tree_total_comes_from_its_own_nodes(self):
        self.two_trees()
        tree = self.tree()
        trees = {t["profile"]: t for t in tree["trees"]}
        t1, t2 = trees["koordinator-system/profile1"], trees["koordinator-system/profile2"]
        self.assertEqual(t1["tree"], fnv64a("koordinator-system/profile1"))
        self.assertEqual(t2["tree"], "tree2")
        self.assertEqual(t1["rootQuota"], "profile1-root")
        self.assertEqual(sorted(t1["nodes"]), ["node-a1", "node-a2"])
        self.assertEqual(t2["nodes"], ["node-b1"])
        self.assertEqual(t1["totalResource"]["cpu"], 18000)
        self.assertEqual(t1["totalResource"]["memory"], 19327352832)
        self.assertEqual(t2["totalResource"]["cpu"], 10000)
        self.assertEqual(t2["totalResource"]["memory"], 10 * GI)
        root1 = self.g("profile1-root")
        # the root quota's min (and here max) name the resource keys, cpu and memory by default
        self.assertEqual(root1["minResource"], {"cpu": 18000, "memory": 19327352832})
        self.assertEqual(sorted(root1["maxResource"]), ["cpu", "memory"])
        self.assertIs(root1["allowLent"], False)
        self.assertEqual(root1["tree"], t1["tree"])
        self.assertEqual(self.g("profile2-root")["tree"], "tree2")
        self.assertEqual(self.g("default")["tree"], "")
        # a node joining zone b grows tree2 (and only tree2)
        self.sim.world.add_node("node-b2", cpu="4", memory="2Gi", labels={ZONE: "cn-hangzhou-b"})
        wait_until(lambda: self.g("profile2-root").get("maxResource", {}).get("cpu") == 14000,
                   15, 0.05, "tree2's total 10 + 4 cpu")
        self.assertEqual(self.g("profile1-root")["maxResource"]["cpu"], 18000)


class ResourceKeysTest(MultiTreeBase):
    """TestQuotaProfileReconciler_Reconciler_CreateQuota, "with resource key": the
    quota.scheduling.koordinator.sh/resource-keys annotation ["cpu"] gives the root a cpu min
    only (18 of 20 cpu with ratio 0.9); the tree's total keeps every resource."""

    def test_resource_keys_annotation(self):
        self.profile("profile1", "profile1-root", {"matchLabels": {ZONE: "cn-hangzhou-a"}}, "0.9",
                     labels={L + "tree-id": "tree1"}, annotations={L + "resource-keys": '["cpu"]'})
        wait_until(lambda: self.g("profile1-root").get("minResource") == {"cpu": 18000}, 15, 0.05,
                   "the root's min: cpu 18 only")
        t = self.tree()["trees"][0]
        self.assertEqual(t["tree"], "tree1")
        self.assertEqual(t["totalResource"]["memory"], 19327352832)
        self.assertNotIn("event=profile_key_ignored", self.kq.logs())

    def test_ignore_default_tree_is_warned_about(self):
        # quota_handler.go handlerQuotaWhenRoot reads quota.scheduling.koordinator.sh/ignore-default-tree
        # on the root quota (the profile's quotaLabels); kubequota does not honour it and says so
        self.profile("profile2", "profile2-root", {"matchLabels": {ZONE: "cn-hangzhou-b"}},
                     quota_labels={L + "ignore-default-tree": "true"})
        wait_until(lambda: "event=profile_key_ignored profile=koordinator-system/profile2 key=" + L
                   + "ignore-default-tree" in self.kq.logs(), 10, 0.05, "the warning")
        # and the tree's total is still taken off the default tree: its root keeps 10 cpu
        wait_until(lambda: self.g("profile2-root").get("minResource", {}).get("cpu") == 10000, 10, 0.05,
                   "the root's min 10 cpu")


class NoBorrowingAcrossTreesTest(MultiTreeBase):
    """handlerQuotaWhenRoot / GetOrCreateGroupQuotaManagerForTree: a quota shares its own
    tree's total; the default tree has what the profiles leave: 36 - 18 - 10 = 8 cpu."""

    def test_trees_do_not_borrow(self):
        self.two_trees()
        tid1 = fnv64a("koordinator-system/profile1")
        self.eq("a-team", "a-team", {"cpu": "4"}, {"cpu": "100", "memory": "100Gi"},
                labels={L + "parent": "profile1-root", L + "tree-id": tid1})
        self.eq("b-team", "b-team", {"cpu": "0"}, {"cpu": "100", "memory": "100Gi"},
                labels={L + "parent": "profile2-root", L + "tree-id": "tree2"})
        self.eq("d-team", "d-team", {"cpu": "0"}, {"cpu": "100", "memory": "100Gi"})
        for n in ("a-team", "b-team", "d-team"):
            wait_until(lambda n=n: group(self.tree(), n) is not None, 15, 0.05, "group " + n)
        self.assertEqual(self.g("a-team")["tree"], tid1)
        self.assertEqual(self.g("b-team")["tree"], "tree2")
        self.assertEqual(self.g("d-team")["tree"], "")
        # tree2 has 10 cpu: two 4-cpu pods (8), not a third (12), though tree 1 (18) and the
        # default tree (8) are idle
        self.pod("b1", "b-team", 4)
        self.assert_bound("b1", "b-team")
        self.pod("b2", "b-team", 4)
        self.assert_bound("b2", "b-team")
        self.pod("b3", "b-team", 4)
        self.assert_denied("b3", "b-team", "b-team")
        # the default tree has 36 - 28 = 8 cpu: 3 + 3 = 6 fits, 9 does not
        self.pod("d1", "d-team", 3)
        self.assert_bound("d1", "d-team")
        self.pod("d2", "d-team", 3)
        self.assert_bound("d2", "d-team")
        self.pod("d3", "d-team", 3)
        self.assert_denied("d3", "d-team", "d-team")
        # tree 1 keeps its 18 cpu: four 4-cpu pods (16) fit, a fifth (20) does not
        for i in range(1, 5):
            self.pod("a%d" % i, "a-team", 4)
            self.assert_bound("a%d" % i, "a-team")
        self.pod("a5", "a-team", 4)
        self.assert_denied("a5", "a-team", "a-team")
        wait_until(lambda: self.g("b-team").get("runtimeResource", {}).get("cpu") == 10000,
                   10, 0.05, "b-team's runtime capped by its tree's 10 cpu")
        self.assertEqual(self.g("d-team")["runtimeResource"]["cpu"], 8000)
        self.assertEqual(self.g("a-team")["runtimeResource"]["cpu"], 18000)


class RootObjectTest(MultiTreeBase):
    """Reconcile writes the root quota with max MaxInt64/2000 (profile_controller.go): that
    object, when Koordinator's controller made it, is the profile's root; its max does not
    open the tree to the whole cluster."""

    def test_root_object_spec_is_the_profiles(self):
        self.two_trees()
        self.eq("koordinator-system", "profile2-root", {"cpu": "10"},
                {"cpu": str((2 ** 63 - 1) // 2000)},
                labels={L + "tree-id": "tree2", L + "is-root": "true", L + "profile": "profile2",
                        L + "is-parent": "true"})
        wait_until(lambda: "object=%s/koordinator-system/profile2-root" % KOORD in self.kq.logs(),
                   10, 0.05, "the root object seen")
        self.assertEqual(self.g("profile2-root")["maxResource"]["cpu"], 10000)
        self.assertNotIn("event=elasticquota_conflict", self.kq.logs())


class BadProfileTest(MultiTreeBase):
    """metav1.LabelSelectorAsSelector refuses an unknown operator: the profile is refused with
    the reason, and nothing changes."""

    def test_bad_selector_is_refused(self):
        self.profile("bad", "bad-root",
                     {"matchExpressions": [{"key": ZONE, "operator": "Near", "values": ["x"]}]})
        wait_until(lambda: "event=bad_elasticquotaprofile" in self.kq.logs(), 10, 0.05,
                   "the profile refused")
        logs = self.kq.logs()
        self.assertIn('matchExpressions[0].operator: \\"Near\\" is not a valid label selector operator', logs)
        self.assertIn("ElasticQuotaProfile koordinator-system/bad", logs)
        self.assertIsNone(group(self.tree(), "bad-root"))
        self.assertEqual(self.tree()["trees"], [])


class TreeNodesTest(MultiTreeBase):
    """pkg/webhook/pod/mutating/multi_quota_tree_affinity.go, addNodeAffinityForMultiQuotaTree,
    and its test TestAddNodeAffinityForMultiQuotaTree, cases "add node affinity" (a pod of a
    tree's quota gets a required node affinity for the profile's nodeSelector) and "default
    quota" (a pod of a quota outside every tree gets none): a tree pod may use its tree's
    nodes only, a default-tree pod any node."""

    def test_a_tree_pod_uses_its_trees_nodes(self):
        self.two_trees()
        self.eq("b-team", "b-team", {"cpu": "0"}, {"cpu": "100", "memory": "100Gi"},
                labels={L + "parent": "profile2-root", L + "tree-id": "tree2"})
        self.eq("d-team", "d-team", {"cpu": "0"}, {"cpu": "100", "memory": "100Gi"})
        for n in ("b-team", "d-team"):
            wait_until(lambda n=n: group(self.tree(), n) is not None, 15, 0.05, "group " + n)
        all_nodes = ["node-a1", "node-a2", "node-b1", "node-d1"]
        b = self.pod("b1", "b-team", 1)
        res = self.sched.filter(b, all_nodes)
        self.assertEqual(res.get("NodeNames"), ["node-b1"])
        failed = res.get("FailedNodes") or {}
        self.assertEqual(sorted(failed), ["node-a1", "node-a2", "node-d1"])
        self.assertIn("quota tree tree2", failed["node-a1"])
        self.assert_bound("b1", "b-team")
        self.assertEqual(self.sim.get_pod("b-team", "b1")["spec"]["nodeName"], "node-b1")
        d = self.pod("d1", "d-team", 1)
        res = self.sched.filter(d, all_nodes)
        self.assertEqual(res.get("NodeNames"), all_nodes)
        # a node labelled into zone b joins tree2's nodes
        self.sim.world.add_node("node-b2", cpu="4", memory="2Gi", labels={ZONE: "cn-hangzhou-b"})
        wait_until(lambda: self.sched.filter(b, all_nodes + ["node-b2"]).get("NodeNames")
                   == ["node-b1", "node-b2"], 15, 0.05, "node-b2 in tree2")


class TreeDashboardTest(MultiTreeBase):
    """The dashboard's quota tree shows each tree (issue 27: "the REST view and dashboard show
    each tree"), read in headless Chromium as tests/e2e/test_ui.py reads the page: one line per
    profile's tree with its nodes and total (zone a: 2 nodes, 20 cpu * 0.9 = 18; tree2: 1 node,
    10 cpu), and each group row carries its tree (koordinator's QuotaInfoSummary.Tree)."""

    def test_dashboard_shows_each_tree(self):
        import json
        import cdp
        from test_ui import chromium
        path = chromium()
        self.two_trees()
        self.eq("b-team", "b-team", {"cpu": "0"}, {"cpu": "100", "memory": "100Gi"},
                labels={L + "parent": "profile2-root", L + "tree-id": "tree2"})
        wait_until(lambda: group(self.tree(), "b-team") is not None, 15, 0.05, "group b-team")
        b = cdp.Browser(path, width=1366, height=768)
        self.addCleanup(b.close)
        b.navigate(self.kq.url + "/ui/")
        b.wait_for("document.body.dataset.state === 'auth'", what="the page to ask for a token")
        b.eval("document.getElementById('token').value = %s;"
               "document.getElementById('auth-form').requestSubmit(); true" % json.dumps(self.kq.rest_token))
        b.wait_for("document.body.dataset.state === 'ready'", what="the dashboard to load")
        page = json.loads(b.eval("""JSON.stringify({
          lines: Object.fromEntries(Array.from(document.querySelectorAll("#tree div[data-tree]"))
                   .map(d => [d.dataset.tree, d.textContent])),
          rows: Object.fromEntries(Array.from(document.querySelectorAll("#tree tbody tr"))
                   .map(tr => [tr.dataset.group, tr.dataset.tree || ""]))})"""))
        tid1 = fnv64a("koordinator-system/profile1")
        self.assertEqual(sorted(page["lines"]), sorted([tid1, "tree2"]))
        self.assertIn("profile koordinator-system/profile1, root profile1-root): 2 nodes, cpu 18,",
                      page["lines"][tid1])
        self.assertIn("root profile2-root): 1 node, cpu 10,", page["lines"]["tree2"])
        self.assertEqual(page["rows"]["b-team"], "tree2")
        self.assertEqual(page["rows"]["profile1-root"], tid1)
        self.assertEqual(page["rows"]["default"], "")
