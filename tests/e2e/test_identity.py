"""Trusted identity: the admission webhook stamps the authenticated requester on pods, and
the usage view only answers callers it can authenticate."""

import base64
import copy
import json
import os

import kqtest
from kqtest import KQTestCase, PARTITION, HttpClient, certs, pod_manifest, queues_config, wait_until

ANN = "kubequota.io/user-info"
USERS = "/ws/v1/partition/%s/usage/users" % PARTITION


def review(pod, username, groups, operation="CREATE", uid="3f6a1c2e-0001"):
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": uid, "kind": {"group": "", "version": "v1", "kind": "Pod"},
                        "resource": {"group": "", "version": "v1", "resource": "pods"},
                        "namespace": pod["metadata"]["namespace"], "operation": operation,
                        "userInfo": {"username": username, "groups": list(groups)},
                        "object": pod, "oldObject": None, "dryRun": False}}


def unescape(token):
    return token.replace("~1", "/").replace("~0", "~")


def apply_patch(doc, ops):
    """JSON Patch add/replace/remove on objects, as the API server applies it."""
    doc = copy.deepcopy(doc)
    for op in ops:
        parts = [unescape(p) for p in op["path"].split("/")[1:]]
        parent = doc
        for p in parts[:-1]:
            parent = parent[p]
        if op["op"] in ("add", "replace"):
            if op["op"] == "replace" and parts[-1] not in parent:
                raise AssertionError("replace of a missing member %s" % op["path"])
            parent[parts[-1]] = op["value"]
        elif op["op"] == "remove":
            del parent[parts[-1]]
        else:
            raise AssertionError("unexpected patch op %r" % op)
    return doc


class IdentityTest(KQTestCase):
    CONFIG = queues_config({"name": "default"})

    def mutate(self, pod, username, groups):
        r = self.kq.post("/admission/mutate", review(pod, username, groups))
        self.assertEqual(r.status, 200, r.text)
        resp = r.json()["response"]
        self.assertEqual(resp["uid"], "3f6a1c2e-0001")
        self.assertTrue(resp["allowed"])
        if "patch" not in resp:
            return pod
        self.assertEqual(resp["patchType"], "JSONPatch")
        return apply_patch(pod, json.loads(base64.b64decode(resp["patch"])))

    def test_spoofed_identity_is_accounted_to_the_requester(self):
        # mallory writes bob's name into the annotation; the API server says she is mallory
        spoofed = pod_manifest("p1", user="bob", groups=["admins"], cpu="1", memory="1Gi")
        pod = self.mutate(spoofed, "mallory", ["dev", "system:authenticated"])
        self.assertEqual(json.loads(pod["metadata"]["annotations"][ANN]),
                         {"user": "mallory", "groups": ["dev", "system:authenticated"]})
        self.create_raw(pod)
        self.assert_bound("p1")
        users = wait_until(lambda: {u["userName"]: u for u in self.kq.get_json(USERS)}
                           if any(u["userName"] == "mallory" for u in self.kq.get_json(USERS)) else None,
                           msg="mallory's usage to appear")
        self.assertNotIn("bob", users)
        self.assertEqual(users["mallory"]["queues"]["resourceUsage"]["vcore"], 1000)

    def test_pod_without_identity_gets_the_requester(self):
        bare = pod_manifest("p2", cpu="500m")
        del bare["metadata"]["annotations"]
        pod = self.mutate(bare, "alice", ["dev"])
        self.assertEqual(json.loads(pod["metadata"]["annotations"][ANN])["user"], "alice")
        self.create_raw(pod)
        self.assert_bound("p2")
        wait_until(lambda: any(u["userName"] == "alice" for u in self.kq.get_json(USERS)),
                   msg="alice's usage to appear")

    def test_not_a_review_is_rejected(self):
        r = self.kq.post("/admission/mutate", raw="{not json")
        self.assertEqual(r.status, 400)
        r = self.kq.post("/admission/mutate", {"kind": "AdmissionReview"})
        self.assertIn(r.status, (200, 400))
        if r.status == 200:
            self.assertFalse(r.json()["response"]["allowed"])

    def create_raw(self, pod):
        return self.sim.create_pod(pod)


class RestTokenTest(KQTestCase):
    CONFIG = queues_config({"name": "default"})

    def test_unauthenticated_callers_are_refused(self):
        anon = HttpClient(self.kq.url, ca=certs()["ca"])
        r = anon.get(USERS)
        self.assertEqual(r.status, 401, r.text)
        self.assertEqual(r.json()["status_code"], 401)  # YuniKorn's error body (dao.YAPIError)
        wrong = HttpClient(self.kq.url, ca=certs()["ca"], token="not-the-token")
        self.assertEqual(wrong.get(USERS).status, 401)
        self.assertEqual(wrong.post("/ws/v1/validate-conf", raw="partitions: []").status, 401)
        # health stays open, and /metrics is open unless --metrics-auth
        self.assertEqual(anon.get("/healthz").status, 200)
        self.assertEqual(anon.get("/readyz").status, 200)
        self.assertEqual(anon.get("/metrics").status, 200)
        self.assertEqual(self.kq.get(USERS).status, 200)

    def test_rotated_token_file(self):
        new = os.urandom(16).hex()
        tmp = self.kq.rest_token_path + ".new"
        with open(tmp, "w") as f:
            f.write(new)
        os.replace(tmp, self.kq.rest_token_path)
        fresh = HttpClient(self.kq.url, ca=certs()["ca"], token=new)
        self.assertEqual(fresh.get(USERS).status, 200)
        self.assertEqual(self.kq.get(USERS).status, 401, "the old token must stop working")


class KubernetesAuthTest(KQTestCase):
    CONFIG = queues_config({"name": "default"})
    EXTRA_ARGS = ("--rest-auth", "kubernetes", "--metrics-auth")

    def setUp(self):
        super().setUp()
        self.sim.sim.review_tokens = {"tok-alice": {"username": "alice", "groups": ["viewers"]},
                                      "tok-eve": {"username": "eve"}}
        self.sim.sim.review_allowed = {"alice"}

    def client(self, token):
        return HttpClient(self.kq.url, ca=certs()["ca"], token=token)

    def test_token_review_and_access_review(self):
        self.assertEqual(self.client("tok-alice").get(USERS).status, 200)
        r = self.client("tok-eve").get(USERS)
        self.assertEqual(r.status, 403, r.text)
        self.assertIn("eve", r.json()["description"])
        self.assertEqual(self.client("tok-unknown").get(USERS).status, 401)
        self.assertEqual(self.client(None).get(USERS).status, 401)
        # --metrics-auth: /metrics follows the same rules
        self.assertEqual(self.client(None).get("/metrics").status, 401)
        self.assertEqual(self.client("tok-alice").get("/metrics").status, 200)
        # answers are cached: a second request with the same token asks the API server nothing
        before = self.sim.state()["counters"].get("tokenreviews", 0)
        self.assertEqual(self.client("tok-alice").get(USERS).status, 200)
        self.assertEqual(self.sim.state()["counters"].get("tokenreviews", 0), before)


if __name__ == "__main__":
    import unittest
    unittest.main()
