"""Accelerators through Dynamic Resource Allocation on the real control plane (issue 39).

No DRA driver runs here: cluster.Cluster.publish_devices publishes by hand the ResourceSlices
a driver would (one pool per kwok node), kube-controller-manager's resource-claim controller
creates the claims of templates, the real kube-scheduler's DynamicResources plugin allocates
them (status.allocation) and binds through kubequota's extender. Kubernetes 1.37.2 needs no
feature gate for any of it (cluster.py, "DRA").

Resource names: a device class's devices are `<class>.deviceclass.resource.k8s.io/devices`,
Kubernetes' own ResourceQuota key (pkg/quota/v1/evaluator/core/resource_claims.go,
V1ResourceByDeviceClass); a partitionable device's shared counters are
`<class>.deviceclass.resource.k8s.io/<counter>` (docs/dra.md). Every expected number below is
worked out by hand from the pods and claims each test creates, and checked against what the
API server holds (bound pods, claim allocations) as well as kubequota's usage views.

The devices: kwok-node-0 and kwok-node-1 have 4 devices each of driver gpu.example.com (class
"gpu"); kwok-node-2 has none, so a pod bound there would prove the extender ignored the claim.
Partitions (class "mig", driver mig.example.com) live on kwok-node-2: 2 GPUs, each a counter
set of 80Gi memory and three devices: gpu-K-full (80Gi), gpu-K-half0 and gpu-K-half1 (40Gi
each). The extended-resource path (class "xgpu", driver x.example.com, extendedResourceName
example.com/gpu) has 2 devices on kwok-node-1.

Proven to fail on main before DRA (/tmp/kq-a66ebea): see the note on each test; the tier
test alone passes there, as it must (it proves the tier, not kubequota's charging).
"""

import json
import signal

from kubetest import KubeTestCase, queues_config, wait_until

GPU = "gpu.deviceclass.resource.k8s.io/devices"
MIG = "mig.deviceclass.resource.k8s.io/devices"
MIG_MEM = "mig.deviceclass.resource.k8s.io/memory"
XGPU = "xgpu.deviceclass.resource.k8s.io/devices"
GiB = 1 << 30

LIMITS = [
    {"limit": "alice devices", "users": ["alice"], "maxresources": {GPU: "2", MIG_MEM: "80Gi"}},
    {"limit": "group test gpus", "groups": ["test"], "maxresources": {GPU: "3"}},
]


def user_of(pod):
    return json.loads(pod["metadata"]["annotations"]["kubequota.io/user-info"])["user"]


class DraBase(KubeTestCase):
    """Device classes and slices, once per class (idempotent; earlier classes may have made them)."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        c = cls.c
        c.device_class("gpu")
        c.device_class("mig", driver="mig.example.com")
        c.device_class("xgpu", driver="x.example.com", extended_resource_name="example.com/gpu")
        for node in ("kwok-node-0", "kwok-node-1"):
            c.publish_devices(node, 4)
        c.publish_devices("kwok-node-1", 2, driver="x.example.com")
        c.publish_devices("kwok-node-2", driver="mig.example.com",
                          partitions={"gpus": 2, "parts": {"full": "80Gi", "half0": "40Gi", "half1": "40Gi"}})

    def setUp(self):
        super().setUp()
        # An earlier test's namespace is deleted as that test ends (tearDown); its pods count
        # until the namespace controller and kwok have removed them. Every expected number
        # below starts from nobody holding a device, so wait for that.
        for user in ("alice", "bob", "carol"):
            for res in (GPU, MIG, MIG_MEM, XGPU, "example.com/gpu"):
                wait_until(lambda u=user, r=res: self.kq_user(u, r) == 0, 90, 0.25,
                           "%s's %s from earlier tests released" % (user, res))

    # ---- what the API server holds -------------------------------------------------------

    def template(self, ns, name="one-gpu", count=1, cls="gpu", user="alice", **kw):
        self.c.create_claim_template(ns, name, cls, count, user=user, **kw)
        return name

    def gpu_pod(self, ns, name, user="alice", queue="root.dra", template="one-gpu", claim=None, **kw):
        claims = {"gpu": ("claim", claim) if claim else ("template", template)}
        return self.pod(ns, name, user=user, queue=queue, cpu="100m", claims=claims, **kw)

    def api_devices(self, namespaces, cls):
        """{user: devices of class `cls` allocated to claims used by that user's bound, live
        pods} as the API server holds it: each claim once, charged to the user of the first
        pod (by creation) that uses it, which is the rule docs/dra.md states."""
        seen, out = set(), {}
        pods = []
        for ns in namespaces:
            pods += [p for p in self.c.pods(ns) if p["spec"].get("nodeName")
                     and not p["metadata"].get("deletionTimestamp")
                     and p.get("status", {}).get("phase") not in ("Succeeded", "Failed")]
        pods.sort(key=lambda p: p["metadata"]["creationTimestamp"])
        for p in pods:
            ns = p["metadata"]["namespace"]
            for claim in self.c.pod_claims(ns, p["metadata"]["name"]).values():
                uid = claim["metadata"]["uid"]
                if uid in seen:
                    continue
                seen.add(uid)
                reqs = {r["name"]: r["exactly"]["deviceClassName"] for r in claim["spec"]["devices"]["requests"]}
                for r in claim["status"]["allocation"]["devices"]["results"]:
                    if reqs.get(r["request"]) == cls:
                        u = user_of(p)
                        out[u] = out.get(u, 0) + 1
        return out

    def kq_user(self, user, res=GPU):
        r = self.c.kubequota_client().get("/ws/v1/partition/default/usage/user/%s" % user)
        if r.status == 404:
            return 0
        # a user with nothing counted has no resourceUsage at all
        return ((json.loads(r.body).get("queues") or {}).get("resourceUsage") or {}).get(res, 0)

    def wait_kq_user(self, user, value, res=GPU, timeout=20):
        return wait_until(lambda: self.kq_user(user, res) == value, timeout, 0.2,
                          "kubequota's usage of %s for %s to be %s (is %s)" % (res, user, value, self.kq_user(user, res)))

    def wait_denied(self, ns, name, text, timeout=30):
        """PodScheduled=False/Unschedulable with kubequota's reason `text`. The first denial
        of a template-claim pod may be "waiting for its ResourceClaim" (kubequota has not
        seen kube-controller-manager's claim yet: ledger.h); kube-scheduler retries."""
        def cond():
            for c in self.get(ns, name).get("status", {}).get("conditions", []):
                if c["type"] == "PodScheduled" and c["status"] == "False" and text in c.get("message", ""):
                    return c
            return None
        return wait_until(cond, timeout, 0.2, "pod %s/%s Unschedulable for %r" % (ns, name, text))

    def assert_node_has(self, ns, pod, driver="gpu.example.com"):
        """The pod is bound, each claim of it is allocated, and on the pod's node."""
        node = self.wait_bound(ns, pod)
        claims = self.c.pod_claims(ns, pod)
        self.assertTrue(claims, "%s/%s has no claim" % (ns, pod))
        for claim in claims.values():
            devs = self.c.allocated_devices(claim)
            self.assertTrue(devs, "claim %s not allocated" % claim["metadata"]["name"])
            for d, pool, _ in devs:
                self.assertEqual((d, pool), (driver, node))
        return node


class DraQuota(DraBase):
    """The gate is off: the extender's filter and bind decide, as in test_kube_limits."""

    CHART_VALUES = {"kubequota": {"admissionGate": {"enabled": False}}}
    KQ_ARGS = ("--event-update-interval=1s",)
    CONFIG = queues_config(
        {"name": "default"},
        {"name": "dra", "limits": LIMITS},
        {"name": "gpuq", "resources": {"max": {GPU: "2"}}})

    def test_tier_template_claim_allocated_and_bound(self):
        """The tier itself, with no limit on devices (bob): kube-controller-manager creates
        the pod's claim from its template, kube-scheduler allocates it and binds through the
        extender on a node that has the device. Passes on /tmp/kq-a66ebea too (by design)."""
        ns = self.ns()
        self.template(ns, user="bob")
        self.gpu_pod(ns, "t1", user="bob")
        node = self.assert_node_has(ns, "t1")
        self.assertIn(node, ("kwok-node-0", "kwok-node-1"))
        claim = list(self.c.pod_claims(ns, "t1").values())[0]
        # the claim is the pod's: created from the template, owned by the pod, reserved for it
        owner = claim["metadata"]["ownerReferences"][0]
        self.assertEqual((owner["kind"], owner["name"]), ("Pod", "t1"))
        self.assertEqual([r["name"] for r in claim["status"]["reservedFor"]], ["t1"])
        self.c.wait_running(ns, "t1")
        # the scheduler bound it through kubequota (the extender's bind logged it)
        wait_until(lambda: "%s/t1" % ns in self.c.kubequota_log(), 10, 0.2, "kubequota saw t1")

    def test_user_limit_template_claim_per_pod(self):
        """alice may hold 2 gpu devices in root.dra: pods of one template claim each, the
        third waits; deleting one lets it in. Fails on a66ebea: a3 is bound (3 devices)."""
        ns = self.ns()
        self.template(ns)
        for n in ("a1", "a2"):
            self.gpu_pod(ns, n)
        for n in ("a1", "a2"):
            self.assert_node_has(ns, n)
        self.wait_kq_user("alice", 2)
        self.assertEqual(self.api_devices([ns], "gpu"), {"alice": 2})
        self.gpu_pod(ns, "a3")
        self.wait_denied(ns, "a3", "alice devices")
        self.wait_event(ns, "a3", "QuotaExceeded", "alice")
        self.assert_stays_pending(ns, "a3", 2)
        # the queue view holds the same 2 devices (alice alone in root.dra here)
        self.assertEqual(self.queue_usage("root.dra").get(GPU), 2)
        self.delete(ns, "a1")
        self.assert_node_has(ns, "a3")
        self.wait_kq_user("alice", 2)
        self.assertEqual(self.api_devices([ns], "gpu"), {"alice": 2})

    def test_group_limit(self):
        """group test (carol) may hold 3 gpu devices: a 2-device claim and a 1-device claim
        fit, a further 1-device claim does not. Fails on a66ebea: c3 is bound."""
        ns = self.ns()
        self.template(ns, "two", count=2, user="carol")
        self.template(ns, "one", count=1, user="carol")
        self.gpu_pod(ns, "c1", user="carol", template="two")
        self.gpu_pod(ns, "c2", user="carol", template="one")
        self.assert_node_has(ns, "c1")
        self.assert_node_has(ns, "c2")
        self.wait_kq_user("carol", 3)
        self.gpu_pod(ns, "c3", user="carol", template="one")
        self.wait_denied(ns, "c3", "group test gpus")
        self.assertEqual(self.api_devices([ns], "gpu"), {"carol": 3})

    def test_queue_max(self):
        """root.gpuq holds at most 2 gpu devices, whoever asks. Fails on a66ebea: q3 bound."""
        ns = self.ns()
        self.template(ns, user="bob")
        self.gpu_pod(ns, "q1", user="bob", queue="root.gpuq")
        self.gpu_pod(ns, "q2", user="dave", queue="root.gpuq")
        self.assert_node_has(ns, "q1")
        self.assert_node_has(ns, "q2")
        wait_until(lambda: self.queue_usage("root.gpuq").get(GPU) == 2, 20, 0.2, "root.gpuq at 2 devices")
        self.gpu_pod(ns, "q3", user="eve", queue="root.gpuq")
        self.wait_denied(ns, "q3", "root.gpuq")
        self.delete(ns, "q2")
        self.assert_node_has(ns, "q3")

    def test_shared_claim_charged_once(self):
        """alice's one-device claim used by three of her pods is one device, not three; her
        limit of 2 then still lets a 1-device template pod in. Fails on a66ebea: 0 devices."""
        ns = self.ns()
        self.c.create_claim(ns, "shared", "gpu", 1, user="alice")
        self.template(ns)
        for n in ("s1", "s2", "s3"):
            self.gpu_pod(ns, n, claim="shared")
        nodes = {self.assert_node_has(ns, n) for n in ("s1", "s2", "s3")}
        self.assertEqual(len(nodes), 1)  # a claim's device is on one node: every user is there
        self.wait_kq_user("alice", 1)
        self.assertEqual(self.api_devices([ns], "gpu"), {"alice": 1})
        self.gpu_pod(ns, "t1")
        self.assert_node_has(ns, "t1")
        self.wait_kq_user("alice", 2)
        # the shared claim stays charged until its last pod ends
        self.delete(ns, "s1")
        self.delete(ns, "s2")
        self.wait_kq_user("alice", 2)
        self.delete(ns, "s3")
        self.wait_kq_user("alice", 1)

    def test_claim_over_limit_never_fits(self):
        """A 3-device claim against alice's limit of 2 never fits: QuotaNeverFits, and explain
        says so by the device resource. Fails on a66ebea: the pod is bound with 3 devices."""
        ns = self.ns()
        self.template(ns, "three", count=3)
        self.gpu_pod(ns, "big", template="three")
        self.wait_denied(ns, "big", "alice devices")
        self.wait_event(ns, "big", "QuotaNeverFits")
        doc = self.kq_json("/ws/v1/partition/default/explain/%s/big" % ns)
        self.assertIn(GPU, json.dumps(doc))
        self.assert_stays_pending(ns, "big", 2)
        self.assertEqual(self.kq_user("alice"), 0)

    def test_tenant_pod_using_another_users_claim(self):
        """bob's pod using alice's allocated claim: the claim is alice's (the first pod's user),
        so bob is charged no device and alice stays charged one; alice at her limit of 2 with
        that claim and a template pod can still not take a third by sharing with bob. Fails on
        a66ebea: alice is charged 0."""
        ns = self.ns()
        self.c.create_claim(ns, "mine", "gpu", 1, user="alice")
        self.template(ns)
        self.gpu_pod(ns, "a1", claim="mine")
        self.assert_node_has(ns, "a1")
        self.gpu_pod(ns, "b1", user="bob", claim="mine")
        self.assert_node_has(ns, "b1")
        self.gpu_pod(ns, "a2")
        self.assert_node_has(ns, "a2")
        self.wait_kq_user("alice", 2)
        self.assertEqual(self.kq_user("bob"), 0)
        self.assertEqual(self.api_devices([ns], "gpu"), {"alice": 2})
        self.gpu_pod(ns, "a3")
        self.wait_denied(ns, "a3", "alice devices")
        # alice's pods end; bob still uses the claim: it is charged until its last pod ends,
        # to the user it was charged to (never moved to bob mid-life)
        self.delete(ns, "a1")
        self.delete(ns, "a2")
        self.assert_node_has(ns, "a3")

    def test_tenant_claim_created_by_another_user_before_the_pod(self):
        """A claim carol created (before any pod) and alice's pod uses: the device is alice's,
        who first used it, not carol's, so it counts against alice's limit. Fails on a66ebea:
        a2 is bound (3 devices for alice)."""
        ns = self.ns()
        self.c.create_claim(ns, "carols", "gpu", 2, user="carol")
        self.template(ns)
        self.gpu_pod(ns, "a1", claim="carols")
        self.assert_node_has(ns, "a1")
        self.wait_kq_user("alice", 2)
        self.assertEqual(self.kq_user("carol"), 0)
        self.gpu_pod(ns, "a2")
        self.wait_denied(ns, "a2", "alice devices")

    def test_tenant_claim_edited_after_allocation(self):
        """A claim's spec is immutable once created (the API server refuses the edit), and a
        claim re-referenced by a new pod of alice after its first pod ended is charged again
        from its allocation. Fails on a66ebea: 0 devices charged."""
        ns = self.ns()
        self.c.create_claim(ns, "one", "gpu", 1, user="alice")
        self.gpu_pod(ns, "a1", claim="one")
        self.assert_node_has(ns, "a1")
        self.wait_kq_user("alice", 1)
        st, body = self.c.api("alice").status(
            "PATCH", "%s/namespaces/%s/resourceclaims/one" % (self.c.RES, ns),
            {"spec": self.c.claim_spec("gpu", 4)}, ctype="application/merge-patch+json")
        self.assertEqual(st, 422, body)
        self.assertIn("immutable", json.dumps(body))
        self.delete(ns, "a1")
        self.wait_kq_user("alice", 0)
        self.gpu_pod(ns, "a2", claim="one")
        self.assert_node_has(ns, "a2")
        self.wait_kq_user("alice", 1)

    def test_restart_rebuilds_the_same_usage(self):
        """kubequota restarted (SIGKILL) reports the same device usage, from claims and pods it
        relists in whatever order. Fails on a66ebea: 0 devices before and after."""
        ns = self.ns()
        self.template(ns, user="bob")
        self.c.create_claim(ns, "shared", "gpu", 2, user="bob")
        self.gpu_pod(ns, "b1", user="bob")
        self.gpu_pod(ns, "b2", user="bob", claim="shared")
        self.gpu_pod(ns, "b3", user="bob", claim="shared")
        for n in ("b1", "b2", "b3"):
            self.assert_node_has(ns, n)
        # bob: 1 (b1's template claim) + 2 (the shared claim, once) = 3
        self.wait_kq_user("bob", 3)
        self.assertEqual(self.api_devices([ns], "gpu"), {"bob": 3})
        before = self.kq_json("/ws/v1/partition/default/usage/user/bob")["queues"]["resourceUsage"]
        self.c.stop_kubequota("kq", kill=True)
        self.c.start_kubequota(open(self.c.path("kq-queues.yaml")).read(), extra=self.KQ_ARGS)
        self.wait_kq_user("bob", 3)
        after = self.kq_json("/ws/v1/partition/default/usage/user/bob")["queues"]["resourceUsage"]
        self.assertEqual(before, after)

    def test_partitions_by_counters(self):
        """alice may use 80Gi of mig memory: two halves (40Gi each) fit, a third half does
        not although it is one device, and bob's full GPU (one device) is charged 80Gi, as
        much as alice's two halves. Fails on a66ebea: no mig usage, h3 bound."""
        ns = self.ns()
        attrs = 'device.attributes["mig.example.com"]'
        self.template(ns, "half-of-0", cls="mig", selector='%s.gpu == 0 && %s.part.startsWith("half")' % (attrs, attrs))
        self.template(ns, "half", cls="mig", selector='%s.part.startsWith("half")' % attrs)
        self.template(ns, "full", cls="mig", selector='%s.part == "full"' % attrs, user="bob")
        # both halves of GPU 0: its 80Gi are used, GPU 1 is free
        self.gpu_pod(ns, "h1", template="half-of-0")
        self.gpu_pod(ns, "h2", template="half-of-0")
        for n in ("h1", "h2"):
            self.assert_node_has(ns, n, driver="mig.example.com")
        self.assertEqual(sorted(d for c in (self.c.pod_claims(ns, "h1"), self.c.pod_claims(ns, "h2"))
                                for cl in c.values() for _, _, d in self.c.allocated_devices(cl)),
                         ["gpu-0-half0", "gpu-0-half1"])
        self.wait_kq_user("alice", 80 * GiB, res=MIG_MEM)
        self.assertEqual(self.kq_user("alice", MIG), 2)
        # a third half (GPU 1 has two free): over alice's 80Gi although it is one device
        self.gpu_pod(ns, "h3", template="half")
        self.wait_denied(ns, "h3", "alice devices")
        # bob: the full GPU 1 (GPU 0's counters are used up by alice's halves)
        self.gpu_pod(ns, "f1", user="bob", template="full")
        self.assert_node_has(ns, "f1", driver="mig.example.com")
        self.wait_kq_user("bob", 80 * GiB, res=MIG_MEM)
        self.assertEqual(self.kq_user("bob", MIG), 1)

    def test_extended_resource_path_charged_once(self):
        """A pod asking example.com/gpu: 1, which kube-scheduler satisfies through DRA (class
        xgpu's extendedResourceName; no node offers example.com/gpu as a device-plugin
        resource), gets a special claim from the scheduler; kubequota charges it one xgpu
        device and one example.com/gpu, not two of either. Fails on a66ebea: 0 xgpu devices."""
        ns = self.ns()
        self.pod(ns, "x1", user="bob", queue="root.dra", cpu="100m", extra_requests={"example.com/gpu": "1"})
        node = self.wait_bound(ns, "x1")
        self.assertEqual(node, "kwok-node-1")
        claims = self.c.pod_claims(ns, "x1")
        self.assertEqual(list(claims), [""])  # the special claim only
        special = claims[""]
        self.assertEqual(special["metadata"]["annotations"].get("resource.kubernetes.io/extended-resource-claim"), "true")
        self.assertEqual(len(self.c.allocated_devices(special)), 1)
        self.wait_kq_user("bob", 1, res=XGPU)
        self.assertEqual(self.kq_user("bob", "example.com/gpu"), 1)
        wait_until(lambda: self.queue_usage("root.dra").get(XGPU) == 1, 10, 0.2, "root.dra at 1 xgpu")

    def test_elastic_quota_max_on_a_device_class(self):
        """An ElasticQuota (scheduler-plugins' API) whose max holds 1 gpu device: the
        namespace's second one-device pod waits although no user or queue limit applies (bob).
        Fails on a66ebea: g2 is bound."""
        ns = self.ns()
        self.c.api("admin").post("/apis/scheduling.x-k8s.io/v1alpha1/namespaces/%s/elasticquotas" % ns, {
            "apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "ElasticQuota", "metadata": {"name": "gpus"},
            "spec": {"min": {"cpu": "1", "memory": "1Gi", GPU: "1"},
                     "max": {"cpu": "8", "memory": "8Gi", GPU: "1"}}})
        wait_until(lambda: "event=quota_group_applied group=%s/gpus " % ns in self.c.kubequota_log(),
                   10, 0.2, "kubequota applied the quota")
        self.template(ns, user="bob")
        self.gpu_pod(ns, "g1", user="bob", queue=None)
        self.assert_node_has(ns, "g1")
        self.gpu_pod(ns, "g2", user="bob", queue=None)
        self.wait_denied(ns, "g2", "gpus")
        self.assert_stays_pending(ns, "g2", 2)
        self.delete(ns, "g1")
        self.assert_node_has(ns, "g2")


class DraGate(DraBase):
    """The chart's default: the admission gate. A pod over a device limit stays gated, is in
    the waiting view with the reason, and is released when a device is freed. Fails on
    a66ebea: w3 is released and bound (no device is counted)."""

    KQ_ARGS = ("--event-update-interval=1s",)
    CONFIG = queues_config({"name": "default"}, {"name": "dra", "limits": LIMITS})

    def test_waiting_behind_the_gate_and_released_on_delete(self):
        ns = self.ns()
        self.template(ns)
        for n in ("w1", "w2"):
            self.gpu_pod(ns, n)
        for n in ("w1", "w2"):
            self.assert_node_has(ns, n)
        self.gpu_pod(ns, "w3")

        def waiting():
            # one entry per queue, each with its waiting pods
            # (first "waiting for its ResourceClaim" until kube-controller-manager names it)
            return [p for q in self.kq_json("/ws/v1/partition/default/gating/waiting")
                    for p in q.get("pods") or [] if (p["namespace"], p["name"]) == (ns, "w3")
                    and "alice devices" in p["reason"]]
        w = wait_until(waiting, 30, 0.2, "w3 in the waiting view, over alice's limit")
        self.assertIn(GPU, w[0]["reason"])
        self.wait_event(ns, "w3", "WaitingForQuota", "alice")
        self.assertIn("kubequota.io/admission", [g["name"] for g in self.get(ns, "w3")["spec"].get("schedulingGates") or []])
        self.assert_stays_pending(ns, "w3", 2)
        self.delete(ns, "w1")
        self.assert_node_has(ns, "w3")
        self.wait_kq_user("alice", 2)
