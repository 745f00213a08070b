"""Objects naming more resources than a set holds inline (issue 15: "a GPU node with more
than 16 resource names is dropped from the cluster total; a pod or quota with more names
fails"). GPU nodes with hugepages, MIG profiles and RDMA devices commonly report two dozen
names. Expected numbers are computed here from the manifests, never read back from
kubequota first."""

from kqtest import KQTestCase, pod_manifest, queues_config, wait_until
from test_elastic import FAST, eq_path, group

CONFIG = queues_config({"name": "default"})

# 24 extended/hugepage names on the GPU node (with cpu, memory and pods: 27 names)
NODE_EXTRA = {"example.com/dev-%02d" % i: str(10 + i) for i in range(20)}
NODE_EXTRA.update({"hugepages-2Mi": "1Gi", "hugepages-1Gi": "8Gi", "nvidia.com/mig-1g.5gb": "7",
                   "rdma/hca_shared_devices_a": "100"})
assert len(NODE_EXTRA) == 24

# 18 extended names on the pod (with cpu and memory: 20 names)
POD_EXTRA = {"example.com/dev-%02d" % i: "1" for i in range(18)}

GI = 2 ** 30


def node_value(name, q):
    return int(q[:-2]) * GI if q.endswith("Gi") else int(q)


class ManyResourceNamesTest(KQTestCase):
    CONFIG = CONFIG
    NODES = ()
    EXTRA_ARGS = FAST
    START = False

    def setUp(self):
        super().setUp()
        self.sim.world.add_node("node-1", cpu="8", memory="32Gi")
        self.sim.world.add_node("gpu-1", cpu="64", memory="256Gi",
                                extra={"status": {"allocatable": dict(NODE_EXTRA),
                                                  "capacity": dict(NODE_EXTRA)}})
        with self.sim.world.cond:
            self.sim.world.crds = {"scheduling.x-k8s.io", "scheduling.sigs.k8s.io"}
        self.kq.start()

    def tree(self):
        return self.kq.queues()["quotaTree"]

    def expected_total(self):
        # node-1: cpu 8, memory 32Gi, pods 110; gpu-1: cpu 64, memory 256Gi, pods 110 + extras
        want = {"cpu": (8 + 64) * 1000, "memory": (32 + 256) * GI, "pods": 220}
        for k, q in NODE_EXTRA.items():
            want[k] = node_value(k, q)
        return want

    def test_wide_node_counts_in_cluster_total(self):
        want = self.expected_total()
        self.assertEqual(len(want), 27)
        wait_until(lambda: self.tree()["clusterTotal"] == want, 15, 0.1,
                   "the GPU node's 27 names in the quota tree's cluster total")
        # the YuniKorn partition view: capacity per name (cpu shown as vcore)
        part = self.kq.get_json("/ws/v1/partitions")[0]
        cap = part["capacity"]["capacity"]
        self.assertEqual(part.get("totalNodes"), 2)
        for k, v in want.items():
            self.assertEqual(cap["vcore" if k == "cpu" else k], v, k)
        # and the node view lists every name of the GPU node
        nodes = {n["nodeID"]: n for n in self.kq.get_json("/ws/v1/partition/default/nodes")}
        self.assertEqual(len(nodes["gpu-1"]["capacity"]), 27)

    def test_pod_with_twenty_names_is_placed_and_counted(self):
        wait_until(lambda: self.tree()["clusterTotal"].get("example.com/dev-19") == 29, 15, 0.1,
                   "GPU node counted")
        p = pod_manifest("wide", user="alice", cpu="2", memory="4Gi", extra_requests=POD_EXTRA)
        self.assertEqual(len(p["spec"]["containers"][0]["resources"]["requests"]), 20)
        self.sim.create_pod(p)
        self.assert_bound("wide")
        # alice's usage at root: every requested name, and pods 1 (YuniKorn's shim counts pods)
        want = {"cpu": 2000, "memory": 4 * GI, "pods": 1}
        want.update({k: int(v) for k, v in POD_EXTRA.items()})

        def alice_root():
            for u in self.kq.users():
                if u.get("userName") == "alice":
                    return u["queues"]["resourceUsage"]
            return None
        wait_until(lambda: alice_root() == {("vcore" if k == "cpu" else k): v for k, v in want.items()},
                   15, 0.1, "alice's usage with 21 names, got %s" % alice_root())
        # the quota tree's root counts its 20 requests (the tree counts no "pods")
        tree_want = {k: v for k, v in want.items() if k != "pods"}
        wait_until(lambda: group(self.tree(), "root")["allocatedResource"] == tree_want, 15, 0.1,
                   "root's allocated with the pod's 20 names, got %s"
                   % group(self.tree(), "root")["allocatedResource"])
        self.wait_usage()
        # a second pod with the same 20 names fits as well, and deleting both empties the usage
        self.sim.create_pod(pod_manifest("wide-2", user="alice", cpu="2", memory="4Gi",
                                         extra_requests=POD_EXTRA))
        self.assert_bound("wide-2")
        self.wait_usage()
        self.sim.delete_pod("default", "wide")
        self.sim.delete_pod("default", "wide-2")
        wait_until(lambda: not any(group(self.tree(), "root")["allocatedResource"].values()), 15, 0.1,
                   "root's allocated back to zero, got %s" % group(self.tree(), "root")["allocatedResource"])
        self.wait_usage()

    def test_elastic_quota_with_twenty_names_in_max(self):
        # a Koordinator quota (group "team", bound to namespace "team" by its name) whose min
        # and max name 20 resources; example.com/dev-19 sorts after 16 other names
        limits = {"cpu": "4", "memory": "8Gi"}
        limits.update({"example.com/dev-%02d" % i: "2" for i in range(16)})
        limits["example.com/dev-18"] = "2"
        limits["example.com/dev-19"] = "1"
        self.assertEqual(len(limits), 20)
        body = {"apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "ElasticQuota",
                "metadata": {"name": "team", "namespace": "team"},
                "spec": {"min": dict(limits), "max": dict(limits)}}
        r = self.sim.http.post(eq_path("scheduling.sigs.k8s.io", "team"), body)
        self.assertEqual(r.status, 201, r.text)
        wait_until(lambda: group(self.tree(), "team") is not None, 15, 0.05, "group team")
        want = {k: (int(v[:-2]) * GI if v.endswith("Gi") else int(v) * (1000 if k == "cpu" else 1))
                for k, v in limits.items()}
        g = group(self.tree(), "team")
        self.assertEqual(g["maxResource"], want)
        self.assertEqual(g["minResource"], want)

        # a pod within every one of the 20 names is placed
        req = {k: "1" for k in limits if k.startswith("example.com/")}
        self.sim.create_pod(pod_manifest("t1", ns="team", user="alice", cpu="1", memory="1Gi",
                                         extra_requests=req))
        self.assert_bound("t1", "team")
        wait_until(lambda: group(self.tree(), "team")["allocatedResource"].get("example.com/dev-19") == 1,
                   15, 0.05, "t1 counted in team")
        # the max of the 20th name binds: another dev-19 is over it (1 used + 1 > 1)
        self.sim.create_pod(pod_manifest("t2", ns="team", user="alice", cpu="1", memory="1Gi",
                                         extra_requests={"example.com/dev-19": "1"}))
        self.assert_denied("t2", "team", "example.com/dev-19")
        # while a name the max allows 2 of still fits (1 used + 1 <= 2)
        self.sim.create_pod(pod_manifest("t3", ns="team", user="alice", cpu="1", memory="1Gi",
                                         extra_requests={"example.com/dev-18": "1"}))
        self.assert_bound("t3", "team")
        self.wait_usage()
