"""Quantities as the API server and users write them, end to end: values that are not
whole canonical units are rounded up as Kubernetes rounds them (Value() for bytes and
counts, MilliValue() for cpu; kubernetes/apimachinery pkg/api/resource/quantity.go), in
pod requests, node allocatable and ElasticQuota min/max. Expected numbers are worked out
by hand in the comments."""

import json

from kqtest import KQTestCase, pod_manifest, queues_config, wait_until
from test_elastic import FAST, eq_path, group

CONFIG = queues_config({"name": "default"})


class QuantityRoundingTest(KQTestCase):
    CONFIG = CONFIG
    NODES = ()
    EXTRA_ARGS = FAST
    START = False

    def setUp(self):
        super().setUp()
        # 64Gi written in millibytes (68719476736000m = 68719476736 bytes) and 8 cpu in
        # micro-cores, as a kubelet or an admission plugin might leave them
        self.sim.world.add_node("node-1", cpu="8000000u", memory="68719476736000m")
        with self.sim.world.cond:
            self.sim.world.crds = {"scheduling.x-k8s.io", "scheduling.sigs.k8s.io"}
        self.kq.start()

    def tree(self):
        return self.kq.queues()["quotaTree"]

    def create_eq(self, ns, name, min_, max_, api_group="scheduling.x-k8s.io", annotations=None):
        body = {"apiVersion": api_group + "/v1alpha1", "kind": "ElasticQuota",
                "metadata": {"name": name, "namespace": ns, "annotations": annotations or {}},
                "spec": {"min": min_, "max": max_}}
        r = self.sim.http.post(eq_path(api_group, ns), body)
        self.assertEqual(r.status, 201, r.text)

    def test_fractional_quantities_round_up(self):
        wait_until(lambda: self.tree()["clusterTotal"].get("cpu") == 8000, 15, 0.05,
                   "cluster total of 8 cpu")
        self.assertEqual(self.tree()["clusterTotal"]["memory"], 68719476736)

        # the pod: memory 1.1Gi as the API server stores it (1181116006400m =
        # 1181116006.4 bytes -> 1181116007) and cpu 100500u (100.5m -> 101m)
        p = pod_manifest("odd", user="alice", cpu="100500u", memory="1181116006400m")
        self.sim.create_pod(p)
        self.assert_bound("odd")
        wait_until(lambda: group(self.tree(), "root")["allocatedResource"].get("cpu") == 101,
                   10, 0.05, "101m counted for the pod")
        self.assertEqual(group(self.tree(), "root")["allocatedResource"]["memory"], 1181116007)
        self.wait_usage()

        # a scheduler-plugins ElasticQuota with min cpu 1.0005 (1000.5m -> 1001m) and memory
        # 19660.8Mi (20615843020.8 bytes -> 20615843021), max cpu 2.0000001 (2000.0001m ->
        # 2001m): accepted whole, not ignored
        self.create_eq("ml", "ml-quota", {"cpu": "1.0005", "memory": "19660.8Mi"},
                       {"cpu": "2.0000001", "memory": "19660.8Mi"})
        wait_until(lambda: group(self.tree(), "ml/ml-quota") is not None, 15, 0.05, "group ml/ml-quota")
        g = group(self.tree(), "ml/ml-quota")
        self.assertEqual(g["minResource"]["cpu"], 1001)
        self.assertEqual(g["minResource"]["memory"], 20615843021)
        self.assertEqual(g["maxResource"]["cpu"], 2001)
        self.assertEqual(g["maxResource"]["memory"], 20615843021)
        # scheduler-plugins lets its quotas use at most the sum of their mins, 1001m here:
        # 1 cpu fits; 1500u more does not (1000 + 2 > 1001), 500u more does (1000 + 1)
        self.sim.create_pod(pod_manifest("m1", ns="ml", user="alice", cpu="1", memory="1Mi"))
        self.assert_bound("m1", "ml")
        self.sim.create_pod(pod_manifest("m2", ns="ml", user="alice", cpu="1500u", memory="1Mi"))
        self.assert_denied("m2", "ml", "ml-quota")
        self.sim.create_pod(pod_manifest("m3", ns="ml", user="alice", cpu="500u", memory="1Mi"))
        self.assert_bound("m3", "ml")

        # status is written in Kubernetes' canonical form: 1001m, 2Mi
        def status():
            o = self.sim.http.get(eq_path("scheduling.x-k8s.io", "ml", "ml-quota")).json()
            return (o.get("status") or {}).get("used")
        wait_until(lambda: status() == {"cpu": "1001m", "memory": "2Mi"}, 15, 0.1,
                   "status.used of ml-quota in canonical form, got %s" % json.dumps(status()))

    def test_koordinator_quota_and_shared_weight_round_up(self):
        # a Koordinator quota: min 0.5 GPU-like count (0.5 -> 1), max memory 1.5Ki (1536),
        # cpu 2.5m (-> 3m); shared-weight annotation cpu 1.0005 (1000.5m -> 1001m) and
        # memory 1181116006400m (-> 1181116007)
        self.create_eq("team", "team", {"example.com/dev": "0.5"},
                       {"example.com/dev": "2", "memory": "1.5Ki", "cpu": "2.5m"},
                       api_group="scheduling.sigs.k8s.io",
                       annotations={"quota.scheduling.koordinator.sh/shared-weight":
                                    '{"cpu":"1.0005","memory":"1181116006400m"}'})
        wait_until(lambda: group(self.tree(), "team") is not None, 15, 0.05, "group team")
        g = group(self.tree(), "team")
        self.assertEqual(g["minResource"]["example.com/dev"], 1)
        self.assertEqual(g["maxResource"], {"example.com/dev": 2, "memory": 1536, "cpu": 3})
        self.assertEqual(g["sharedWeight"]["cpu"], 1001)
        self.assertEqual(g["sharedWeight"]["memory"], 1181116007)
