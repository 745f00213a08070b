"""Identity and the webhooks' scope, evaluated by the real API server.

- The identity webhook stamps the user and groups the API server authenticated (token users
  of tests/cluster/cluster.py USERS) and replaces a spoofed annotation, as YuniKorn's admission
  controller does (apache/yunikorn-k8shim pkg/admission/admission_controller.go,
  "user.info" annotation from the AdmissionRequest's userInfo; its test
  admission_controller_test.go TestMutate...UserInfo).
- The chart's webhook scope (charts/kubequota/README.md, "Webhooks and what they can block"):
  with kubequota stopped and its webhooks registered with failurePolicy Fail, pods of another
  scheduler and Deployments in namespaces kubequota does not govern (since issue 37 every
  namespace is governed by default: these are the opted-out ones, labelled
  kubequota.io/enabled=false, and kube-system) are still created; a pod of kubequota's
  scheduler is not, and neither is another scheduler's pod in a governed namespace (the
  webhooks are really there). Namespaces webhooks.filtering bypasses:
  tests/cluster/test_kube_governance.py.
"""

import json

from kubetest import KubeTestCase, queues_config, wait_until

ANN = "kubequota.io/user-info"


def deployment(name, scheduler, ns):
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"schedulerName": scheduler,
                                           "containers": [{"name": "c", "image": "registry.invalid/x:1"}]}}}}


class Identity(KubeTestCase):
    CHART_VALUES = {"kubequota": {"admissionGate": {"enabled": False}}}
    CONFIG = queues_config({"name": "default"})

    def test_authenticated_user_is_stamped_and_spoofing_replaced(self):
        ns = self.ns()
        # the spoofed name is nobody's: no other test's pods can be counted to it
        spoof = json.dumps({"user": "mallory", "groups": ["system:masters", "admins"]})
        p = self.pod(ns, "mine", user="alice", annotations={ANN: spoof})
        info = json.loads(p["metadata"]["annotations"][ANN])
        self.assertEqual(info["user"], "alice")
        self.assertIn("dev", info["groups"])
        self.assertIn("ml", info["groups"])
        self.assertNotIn("admins", info["groups"])
        self.assertNotIn("system:masters", info["groups"])
        # YuniKorn's annotation is stamped too, so the key YuniKorn reads says the same
        self.wait_bound(ns, "mine")
        # counted to alice, not to the name she wrote
        doc = wait_until(lambda: self.kq_json("/ws/v1/partition/default/usage/user/alice"), 10, 0.2)
        self.assertEqual(doc["userName"], "alice")
        st = self.c.kubequota_client().get("/ws/v1/partition/default/usage/user/mallory").status
        self.assertEqual(st, 404)

    def test_identity_cannot_be_changed_after_creation(self):
        ns = self.ns()
        self.pod(ns, "fixed", user="bob")
        self.wait_bound(ns, "fixed")
        spoof = json.dumps({"user": "carol", "groups": ["ml"]})
        # bob rewrites his own pod's identity: the webhook puts it back (or refuses)
        st, body = self.c.api("bob").status(
            "PATCH", "/api/v1/namespaces/%s/pods/fixed" % ns,
            {"metadata": {"annotations": {ANN: spoof}}}, ctype="application/merge-patch+json")
        info = json.loads(self.get(ns, "fixed")["metadata"]["annotations"][ANN])
        self.assertEqual(info["user"], "bob", (st, body))
        # and a placement label is fixed once the pod exists
        st, body = self.c.api("bob").status(
            "PATCH", "/api/v1/namespaces/%s/pods/fixed" % ns,
            {"metadata": {"labels": {"kubequota.io/queue": "root.other"}}},
            ctype="application/merge-patch+json")
        self.assertNotIn(st, (200, 201), body)
        self.assertNotIn("kubequota.io/queue", self.get(ns, "fixed")["metadata"].get("labels", {}))


class UsageViewAccess(KubeTestCase):
    """--rest-auth=kubernetes (the chart's default): a caller's token is reviewed by the real
    API server (TokenReview) and its access asked of the real RBAC (SubjectAccessReview for
    get on usage.kubequota.io), granted by binding the chart's usage-viewer ClusterRole."""

    CONFIG = queues_config({"name": "default"})

    def test_usage_viewer_role_grants_the_usage_view(self):
        from kqtest import HttpClient
        from cluster import USERS
        port = self.c.kq["kq"][1]
        dave = HttpClient("https://127.0.0.1:%d" % port, ca=self.c.certs["ca"], token=USERS["dave"][0])
        self.assertEqual(dave.get("/ws/v1/partition/default/usage/users").status, 403)
        crb = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
               "metadata": {"name": "dave-usage"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                           "name": "kubequota-usage-viewer"},
               "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "dave"}]}
        self.c.apply([crb])
        try:
            wait_until(lambda: dave.get("/ws/v1/partition/default/usage/users").status == 200, 20, 0.5,
                       "dave reads the usage view once bound to the usage-viewer role")
        finally:
            self.c.kubectl("delete", "clusterrolebinding", "dave-usage")
        # a token the API server does not know is refused
        nobody = HttpClient("https://127.0.0.1:%d" % port, ca=self.c.certs["ca"], token="not-a-token")
        self.assertEqual(nobody.get("/ws/v1/partition/default/usage/users").status, 401)


class WebhookScopeWithKubequotaDown(KubeTestCase):
    """kubequota stopped, the chart's webhooks still registered (failurePolicy Fail)."""

    CONFIG = queues_config({"name": "default"})

    def test_unmanaged_work_is_never_blocked(self):
        self.c.stop_kubequota("kq")
        ns = self.ns(labels={"kubequota.io/enabled": "false"})
        # another scheduler's pod in a namespace that opted out
        self.c.create_pod(ns, "plain", user="alice", scheduler="default-scheduler")
        # a kube-system pod, even one that names kubequota's scheduler
        self.c.api("admin").post("/api/v1/namespaces/kube-system/pods",
                                 self.c.pod_body("sys-%s" % ns, scheduler="kubequota-scheduler"))
        self.c.delete_pod("kube-system", "sys-%s" % ns)
        # a Deployment whose pods another scheduler places
        self.c.api("alice").post("/apis/apps/v1/namespaces/%s/deployments" % ns,
                                 deployment("web", "default-scheduler", ns))
        # a pod of kubequota's scheduler is judged by kubequota: with it down, refused
        st, body = self.c.api("alice").status("POST", "/api/v1/namespaces/%s/pods" % ns,
                                              self.c.pod_body("managed"))
        self.assertEqual(st, 500, body)
        self.assertIn("identity.kubequota.io", body["message"])
        # so is a Deployment whose template names kubequota's scheduler
        st, body = self.c.api("alice").status("POST", "/apis/apps/v1/namespaces/%s/deployments" % ns,
                                              deployment("managed", "kubequota-scheduler", ns))
        self.assertEqual(st, 500, body)
        self.assertIn("workloads.kubequota.io", body["message"])
        # in a governed namespace (no label: the default) another scheduler's pod is
        # kubequota's too, so it waits for kubequota rather than escape quota
        gov = self.ns()
        st, body = self.c.api("alice").status("POST", "/api/v1/namespaces/%s/pods" % gov,
                                              self.c.pod_body("plain", scheduler="default-scheduler"))
        self.assertEqual(st, 500, body)
        self.assertIn("scheduler.kubequota.io", body["message"])
