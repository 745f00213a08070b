"""DRA ResourceClaims (issue 39): pods are charged the devices of their claims per device
class, under <class>.deviceclass.resource.k8s.io/devices, against user and queue limits; a
shared claim is charged once; a restart rebuilds the same usage. The simulator plays
kube-apiserver (resource.k8s.io/v1 resourceclaims); the tests play kube-controller-manager
(a template's claim, the pod's status.resourceClaimStatuses) and kube-scheduler's DRA
plugin (status.allocation). Scenario names match tests/cluster's DRA tier."""

import json
import re
import time

from kqtest import KQTestCase, PARTITION, gate_release_order, pod_manifest, queues_config, wait_until

DEV = "gpu.example.com.deviceclass.resource.k8s.io/devices"
GATE = "kubequota.io/admission"

CONFIG = queues_config(
    {"name": "default"},
    {"name": "gpu", "resources": {"max": {DEV: "3"}},
     "limits": [{"limit": "alice's devices", "users": ["alice"], "maxresources": {DEV: "1"}}]})


def claim(name, count=1, ns="default", mode=None):
    exactly = {"deviceClassName": "gpu.example.com", "count": count}
    if mode:
        exactly = {"deviceClassName": "gpu.example.com", "allocationMode": mode}
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}}


class DraTest(KQTestCase):
    CONFIG = CONFIG

    # ---- helpers ----
    def create_claim(self, name, count=1, mode=None):
        return self.sim.world.create_simple("resourceclaims", "default", claim(name, count, mode=mode))

    def allocate(self, name, devices):
        results = [{"request": "gpu", "driver": "gpu.example.com", "pool": "node-1", "device": "gpu-%d" % i}
                   for i in range(devices)]
        self.sim.world.update("resourceclaims", "default", name,
                              {"status": {"allocation": {"devices": {"results": results}}}},
                              subresource="status", patch=True)

    def reserve(self, claim_name, pod_name):
        """kube-scheduler's DRA plugin reserves the claim for the pod it binds (PreBind)."""
        pod = self.sim.get_pod("default", pod_name)
        cur = self.sim.world.get("resourceclaims", "default", claim_name)
        rf = list((cur.get("status") or {}).get("reservedFor") or [])
        rf.append({"resource": "pods", "name": pod_name, "uid": pod["metadata"]["uid"]})
        self.sim.world.update("resourceclaims", "default", claim_name, {"status": {"reservedFor": rf}},
                              subresource="status", patch=True)

    def join(self, name, claim_name):
        """Binds a pod that shares a claim (kubequota may see the claim's reservation a moment
        after it is written) and reserves the claim for it."""
        wait_until(lambda: self.schedule(name)[0], 10, 0.1, "%s bound" % name)
        self.reserve(claim_name, name)

    def pod(self, name, user, claim_name=None, template=None):
        p = pod_manifest(name, user=user, queue="root.gpu", cpu="100m", memory=None)
        rc = {"name": "gpu"}
        if template:
            rc["resourceClaimTemplateName"] = template
        else:
            rc["resourceClaimName"] = claim_name
        p["spec"]["resourceClaims"] = [rc]
        p["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
        return self.sim.create_pod(p)

    def devices(self, user):
        users = self.kq.users() or []
        for u in users if isinstance(users, list) else [users]:
            if u.get("userName") == user:
                return int((u.get("queues") or {}).get("resourceUsage", {}).get(DEV, 0))
        return 0

    def queue_devices(self):
        def find(q):
            if isinstance(q, list):
                return next((r for r in map(find, q) if r is not None), None)
            if not isinstance(q, dict):
                return None
            if q.get("queuename") in ("root.gpu", "gpu") or q.get("queuePath") == "root.gpu":
                return int((q.get("allocatedResource") or {}).get(DEV, 0))
            return find(q.get("children") or [])
        return find(self.kq.queues()) or 0

    def settle(self, name):
        """Schedules until kubequota has seen the pod's claims (a claim's watch event may lag
        its creation): returns (ok, why) of the first answer that is not 'waiting'."""
        last = [None]

        def done():
            last[0] = self.schedule(name)
            return last[0][0] or "waiting for its ResourceClaim" not in last[0][1]
        wait_until(done, 10, 0.1, "kubequota to see the claims of %s" % name)
        return last[0]

    # ---- scenarios ----
    def test_dra_limits_user_and_queue(self):
        for n in ("a1", "a2", "b1", "c1"):
            self.create_claim("claim-" + n)
        self.create_claim("claim-big", count=4)
        self.pod("a1", "alice", "claim-a1")
        ok, why = self.settle("a1")
        self.assertTrue(ok, why)
        wait_until(lambda: self.devices("alice") == 1, 10, 0.1, "alice charged 1 device")
        self.pod("a2", "alice", "claim-a2")
        ok, why = self.settle("a2")
        self.assertFalse(ok)
        self.assertIn("alice's devices", why)
        self.assertIn(DEV, why)
        self.pod("b1", "bob", "claim-b1")
        self.assertTrue(self.settle("b1")[0])
        self.pod("big", "bob", "claim-big")
        ok, why = self.settle("big")
        self.assertFalse(ok, "4 devices against a queue max of 3")
        self.pod("c1", "carol", "claim-c1")
        self.assertTrue(self.settle("c1")[0])
        wait_until(lambda: self.queue_devices() == 3, 10, 0.1, "the queue to hold 3 devices")
        # the resource name passes through the metrics and explain as written
        metrics = self.kq.get("/metrics").text
        self.assertIn('resource="%s"' % DEV, metrics)
        # ... as a label value only: no metric name is made from a resource name (dots and a
        # slash are not allowed in one), so every sample naming it has a valid name
        named = [ln for ln in metrics.splitlines() if DEV in ln and not ln.startswith("#")]
        self.assertTrue(named)
        for ln in named:
            self.assertRegex(ln, r'^[a-zA-Z_:][a-zA-Z0-9_:]*\{[^{}]*resource="%s"[^{}]*\} \S+$' % re.escape(DEV))
        r = self.kq.post("/ws/v1/partition/%s/explain" % PARTITION, self.sim.get_pod("default", "a2"))
        self.assertEqual(r.status, 200, r.text)
        self.assertFalse(r.json()["fits"])
        self.assertIn(DEV, r.text)
        # the allocation replaces what the claim may take; deleting the pod releases it
        self.allocate("claim-b1", 1)
        self.sim.delete_pod("default", "b1")
        wait_until(lambda: self.devices("bob") == 0 and self.queue_devices() == 2, 10, 0.1, "bob released")

    def test_dra_explain_list_sums_devices(self):
        """A what-if list is checked pod by pod with the earlier pods admitted: their devices
        count too. Two pods of 2 devices each into the queue's max of 3 (bob has no limit of
        his own): each fits alone (2 <= 3), the second not after the first (2 + 2 > 3).
        Before, the running sum held the earlier pods' containers only (100m cpu) and both
        fitted."""
        self.create_claim("claim-w1", count=2)
        self.create_claim("claim-w2", count=2)

        def whatif(name, claim_name):
            p = pod_manifest(name, user="bob", queue="root.gpu", cpu="100m", memory=None)
            p["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": claim_name}]
            p["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
            return p
        body = [whatif("w1", "claim-w1"), whatif("w2", "claim-w2")]
        last = [None]

        def known():
            last[0] = self.kq.post("/ws/v1/partition/%s/explain" % PARTITION, body)
            return last[0].status == 200 and "waiting for its ResourceClaim" not in last[0].text
        wait_until(known, 10, 0.1, "kubequota to see both claims")
        r = last[0].json()
        self.assertEqual([p["fits"] for p in r["pods"]], [True, False], last[0].text)
        self.assertEqual(r["fitCount"], 1)
        why = json.dumps(r["pods"][1]["blockers"])
        self.assertIn(DEV, why)
        self.assertIn("with the earlier pods of the list admitted", why)
        # each alone fits: the refusal is the sum's
        for one in body:
            r1 = self.kq.post("/ws/v1/partition/%s/explain" % PARTITION, one)
            self.assertEqual(r1.status, 200, r1.text)
            self.assertTrue(r1.json()["fits"], r1.text)

    def test_dra_waiting_for_claim(self):
        self.pod("w1", "bob", "later")
        ok, why = self.schedule("w1")
        self.assertFalse(ok)
        self.assertIn("waiting for its ResourceClaim default/later", why)
        self.create_claim("later", count=2)
        wait_until(lambda: self.schedule("w1")[0], 10, 0.1, "w1 bound once its claim exists")
        wait_until(lambda: self.devices("bob") == 2, 10, 0.1, "bob charged 2 devices")
        self.allocate("later", 2)

    def test_dra_template_claim(self):
        self.pod("t1", "bob", template="gpu-template")
        ok, why = self.schedule("t1")
        self.assertFalse(ok)
        self.assertIn("waiting for its ResourceClaim", why)
        # kube-controller-manager: the claim, then the pod's status naming it
        self.create_claim("t1-gpu-abcde", count=2)
        self.sim.world.update("pods", "default", "t1",
                              {"status": {"resourceClaimStatuses": [{"name": "gpu",
                                                                     "resourceClaimName": "t1-gpu-abcde"}]}},
                              subresource="status", patch=True)
        wait_until(lambda: self.schedule("t1")[0], 10, 0.1, "t1 bound once its claim is made")
        wait_until(lambda: self.devices("bob") == 2, 10, 0.1, "bob charged the template's 2 devices")

    def test_dra_shared_claim_once(self):
        self.create_claim("shared", count=2)
        self.pod("s1", "bob", "shared")
        self.assertTrue(self.settle("s1")[0])
        self.allocate("shared", 2)
        self.reserve("shared", "s1")
        self.pod("s2", "carol", "shared")
        self.pod("s3", "dave", "shared")
        # the queue's max is 3: the claim's 2 devices fit once, never twice
        self.join("s2", "shared")
        self.join("s3", "shared")
        wait_until(lambda: self.queue_devices() == 2, 10, 0.1, "the shared claim charged once")
        self.assertEqual(self.devices("bob"), 2, "the pod it was reserved for first holds it")
        self.assertEqual(self.devices("carol") + self.devices("dave"), 0)
        # its holder ends (the claim controller drops it from reservedFor): the claim moves
        # to the next pod it is reserved for, still once
        self.sim.delete_pod("default", "s1")
        cur = self.sim.world.get("resourceclaims", "default", "shared")
        rf = [r for r in cur["status"]["reservedFor"] if r["name"] != "s1"]
        self.sim.world.update("resourceclaims", "default", "shared", {"status": {"reservedFor": rf}},
                              subresource="status", patch=True)
        wait_until(lambda: self.queue_devices() == 2 and self.devices("carol") == 2, 10, 0.1,
                   "the claim moved to carol's pod, reserved second")
        self.sim.delete_pod("default", "s2")
        self.sim.delete_pod("default", "s3")
        wait_until(lambda: self.queue_devices() == 0, 10, 0.1, "released with the last pod")

    def test_dra_restart_same_usage(self):
        self.create_claim("shared", count=2)
        self.create_claim("own", count=1)
        self.pod("r1", "bob", "shared")
        self.pod("r2", "carol", "shared")
        self.pod("r3", "alice", "own")
        self.assertTrue(self.settle("r1")[0])
        self.reserve("shared", "r1")
        self.join("r2", "shared")
        self.assertTrue(self.settle("r3")[0])
        self.allocate("shared", 2)
        wait_until(lambda: self.queue_devices() == 3, 10, 0.1, "3 devices charged")
        before = {u: self.devices(u) for u in ("alice", "bob", "carol")}
        self.kq.restart()
        wait_until(lambda: {u: self.devices(u) for u in ("alice", "bob", "carol")} == before, 15, 0.2,
                   "the same usage after a restart: %s" % before)
        self.assertEqual(self.queue_devices(), 3)


class DraGateTest(KQTestCase):
    """The admission gate costs a release by what the pod is charged, its claims' devices
    included (docs/gating.md "Fair order inside a queue"; the unit tests in
    tests/unit/test_gating.c derive the same orders). root.gpus caps 16 cpu and 8 devices:
    a device stands for 2 cpu of the queue. alice's pods ask 100m and a claim of 4 devices
    (cost max(100, 4 * 16000 / 8) = 8000), bob's 1 cpu (cost 1000)."""
    CONFIG = queues_config({"name": "default"}, {"name": "gpus", "resources": {"max": {"vcore": "16", DEV: "8"}}})
    EXTRA_ARGS = ("--admission-gate",)

    def gated(self, name, user, cpu, claim_name=None):
        p = pod_manifest(name, user=user, queue="root.gpus", cpu=cpu, memory=None, gates=(GATE,))
        if claim_name:
            p["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": claim_name}]
            p["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
        return self.sim.create_pod(p)

    def released(self):
        return [k.split("/", 1)[1] for k in gate_release_order(self.kq, self.sim, GATE)]

    def waiting(self):
        view = self.kq.get_json("/ws/v1/partition/%s/gating/waiting" % PARTITION)
        return next((q for q in view if q.get("queue") == "root.gpus"), {"pods": []})["pods"]

    def waiting_names(self):
        return [p["name"] for p in self.waiting()]

    def test_dra_gate_fair_order_counts_devices(self):
        for i in range(3):
            self.sim.world.create_simple("resourceclaims", "default", claim("a%d-gpu" % i, count=4))
        # zed's 16-cpu pod fills the queue, so that every pod below waits and the order is
        # decided in one pass when it goes, not as the pods arrive
        self.gated("z", "zed", "16")
        wait_until(lambda: self.released() == ["z"], 15, 0.1, "zed's pod released")
        for i in range(3):
            self.gated("a%d" % i, "alice", "100m", "a%d-gpu" % i)
        for i in range(10):
            self.gated("b%d" % i, "bob", "1")
        # both users join at the queue's pass (0), alice first (arrived first):
        #   a0 (alice 8000); b0 .. b7 (bob 1000 .. 8000); 8000 = 8000, alice first: a1
        #   (alice 16000, 8 of 8 devices); b8, b9 (bob 10000); a2: 12 devices > 8, waits.
        # Costed by the containers' request alone (100 for alice's) it was a0 b0 a1, then
        # alice's a2 held the full queue's turn.
        want = ["a0"] + ["b%d" % i for i in range(8)] + ["a1", "b8", "b9"]
        # the waiting view simulates the same order (every pod is known once it lists 13, and
        # every claim once no pod waits for one: the queue's cpu is what holds them all)
        wait_until(lambda: (lambda w: len(w) == 13 and all("ResourceClaim" not in p["reason"] for p in w))(
            self.waiting()), 15, 0.1, "13 pods waiting for the queue, their claims known")
        self.assertEqual(self.waiting_names(), want + ["a2"])
        self.sim.delete_pod("default", "z")
        wait_until(lambda: len(self.released()) == 13, 15, 0.1, "12 more released")
        time.sleep(0.5)  # a pass that would release more has run
        self.assertEqual(self.released(), ["z"] + want)
        self.assertEqual(self.waiting_names(), ["a2"])
