"""Issue 37, routes 4, 6 and 7, on the real API server (1.37.2), as the issue found them.

(a) Governance: with the default chart values, a tenant's pod asking for
    `schedulerName: default-scheduler` in a namespace with no label is made kubequota's and
    is held to its queue's max, while a kube-system pod is untouched; a namespace
    `webhooks.filtering.bypassNamespaces` matches is left alone, even while kubequota is down.
    YuniKorn's admission controller does the same (apache/yunikorn-k8shim
    pkg/admission/admission_controller.go processPod: shouldProcessNamespace, then
    updateSchedulerName; bypassNamespaces default "^kube-system$").
(b) Bindings: with the admission gate off, a tenant granted pods/binding posts a Binding for
    her own pending pod: the API server's ValidatingAdmissionPolicy refuses it and the pod
    stays unbound, while kube-scheduler (through kubequota's bind) still binds.
(c) Status: a tenant granted pods/status rewrites the identity annotation and the queue
    label through /status: the stored pod keeps both, and kubequota counts it where it did
    after a restart.

Everything asserted is what the API server holds (or kubequota's usage view for (c)).
"""

import json
import time

from kubetest import KubeTestCase, SCHED, queues_config, wait_until

ANN = "kubequota.io/user-info"
QUEUE = "kubequota.io/queue"


def grant(test, ns, name, resources, verbs, user="alice"):
    """A Role in ns giving user `verbs` on `resources` (core group), bound to her."""
    test.c.apply([
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
         "metadata": {"name": name, "namespace": ns},
         "rules": [{"apiGroups": [""], "resources": resources, "verbs": verbs}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
         "metadata": {"name": name, "namespace": ns},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
         "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}]}])


def binding(name, node):
    return {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node}}


class GovernedByDefault(KubeTestCase):
    """The chart's default values: every namespace but the system ones is governed."""

    CONFIG = queues_config({"name": "default"}, {"name": "capped", "resources": {"max": {"vcore": "2"}}})

    def test_unlabelled_namespace_is_governed(self):
        ns = self.ns()  # no kubequota.io/enabled label
        p1 = self.c.create_pod(ns, "p1", user="alice", cpu="2", scheduler="default-scheduler",
                               labels={QUEUE: "root.capped"})
        # the stored pod is kubequota's, with alice's identity
        self.assertEqual(p1["spec"]["schedulerName"], SCHED, "a default-scheduler pod escaped kubequota")
        self.assertEqual(json.loads(p1["metadata"]["annotations"][ANN])["user"], "alice")
        self.wait_bound(ns, "p1")
        # and limited: the queue's max is 2 cpu, so one more cpu waits
        p2 = self.c.create_pod(ns, "p2", user="alice", cpu="1", scheduler="default-scheduler",
                               labels={QUEUE: "root.capped"})
        self.assertEqual(p2["spec"]["schedulerName"], SCHED)
        self.assert_stays_pending(ns, "p2", 3)
        usage = self.queue_usage("root.capped")
        self.assertEqual(usage.get("vcore"), 2000, usage)
        # once p1 goes, p2 fits
        self.delete(ns, "p1")
        self.wait_bound(ns, "p2")

    def test_kube_system_is_untouched(self):
        name = "sys-%d" % int(time.time() * 1000 % 1e9)
        sys_pod = self.c.api("admin").post("/api/v1/namespaces/kube-system/pods",
                                           self.c.pod_body(name, scheduler="default-scheduler"))
        try:
            self.assertEqual(sys_pod["spec"]["schedulerName"], "default-scheduler")
            self.assertNotIn(ANN, sys_pod["metadata"].get("annotations") or {})
            self.assertFalse(sys_pod["spec"].get("schedulingGates"))
        finally:
            self.c.delete_pod("kube-system", name)

    def test_opted_out_namespace_is_left_alone(self):
        ns = self.ns(labels={"kubequota.io/enabled": "false"})
        p = self.c.create_pod(ns, "plain", user="alice", scheduler="default-scheduler")
        self.assertEqual(p["spec"]["schedulerName"], "default-scheduler")
        self.assertNotIn(ANN, p["metadata"].get("annotations") or {})


class BypassedByFilter(KubeTestCase):
    """webhooks.filtering.bypassNamespaces (YuniKorn's bypassNamespaces): a matching
    namespace never reaches kubequota, so it is left alone even while kubequota is down."""

    # the namespaces of test_bypassed_namespace_is_left_alone are t<N>-bypassed-namespace-...
    CHART_VALUES = {"webhooks": {"filtering": {"bypassNamespaces": "^kube-system$,^t[0-9]+-bypassed-"}}}
    CONFIG = queues_config({"name": "default"})

    def test_bypassed_namespace_is_left_alone(self):
        ns = self.ns()
        self.assertIn("-bypassed-", ns)
        p = self.c.create_pod(ns, "plain", user="alice", scheduler="default-scheduler")
        self.assertEqual(p["spec"]["schedulerName"], "default-scheduler")
        self.assertNotIn(ANN, p["metadata"].get("annotations") or {})
        # never blocked: kubequota down (failurePolicy Fail), the pod is still created
        self.c.stop_kubequota("kq")
        p = self.c.create_pod(ns, "while-down", user="alice", scheduler="default-scheduler")
        self.assertEqual(p["spec"]["schedulerName"], "default-scheduler")

    def test_other_namespaces_still_governed(self):
        if "kq" not in self.c.kq:
            self.c.start_kubequota(open(self.c.path("kq-queues.yaml")).read(), extra=self.KQ_ARGS)
        ns = self.ns()
        p = self.c.create_pod(ns, "governed", user="alice", scheduler="default-scheduler")
        self.assertEqual(p["spec"]["schedulerName"], SCHED)


class BindingAndStatusGuards(KubeTestCase):
    """The gate off (issue 37 found both there): only the scheduler binds, and the fixed
    keys hold on pods/status."""

    CHART_VALUES = {"kubequota": {"admissionGate": {"enabled": False}}}
    CONFIG = queues_config({"name": "default"}, {"name": "capped", "resources": {"max": {"vcore": "2"}}},
                           {"name": "mine"}, {"name": "other"})

    def policy_in_force(self, ns, timeout=15):
        """Waits until the API server enforces the binding policy (its informers see a new
        policy a moment after it is created): a probe pod bound by alice until the policy
        answers 403 (201: not yet in force; 409: the scheduler was first). False if never."""
        node = self.c.api().get("/api/v1/nodes")["items"][0]["metadata"]["name"]
        end = time.monotonic() + timeout
        i = 0
        while time.monotonic() < end:
            i += 1
            name = "probe-%d" % i
            self.c.create_pod(ns, name, user="alice", cpu="1m", memory="1Mi", scheduler="default-scheduler")
            st, _ = self.c.api("alice").status("POST", "/api/v1/namespaces/%s/pods/%s/binding" % (ns, name),
                                               binding(name, node))
            self.c.delete_pod(ns, name)
            if st == 403:
                return True
            time.sleep(0.5)
        return False

    def test_tenant_binding_refused(self):
        ns = self.ns()
        grant(self, ns, "binder", ["pods/binding"], ["create"])
        in_force = self.policy_in_force(ns)
        # 3 cpu in a 2-cpu queue: kubequota keeps it pending
        self.pod(ns, "big", user="alice", cpu="3", queue="root.capped")
        self.wait_unschedulable(ns, "big")
        node = self.c.api().get("/api/v1/nodes")["items"][0]["metadata"]["name"]
        st, body = self.c.api("alice").status("POST", "/api/v1/namespaces/%s/pods/big/binding" % ns,
                                              binding("big", node))
        self.assertNotIn(st, (200, 201), "alice bound her own 3-cpu pod past the 2-cpu queue "
                                         "(policy in force: %s): %s" % (in_force, body))
        self.assertEqual(st, 403, body)
        self.assertIn("may not bind", body.get("message", ""))
        self.assert_stays_pending(ns, "big", 2)
        self.assertFalse(self.node_of(ns, "big"))
        # kube-scheduler, through kubequota's bind, still binds what fits
        self.pod(ns, "fits", user="alice", cpu="1", queue="root.capped")
        self.wait_bound(ns, "fits")

    def test_status_cannot_rewrite_identity_or_queue(self):
        ns = self.ns()
        grant(self, ns, "status-writer", ["pods/status"], ["get", "patch", "update"])
        self.pod(ns, "mine", user="alice", cpu="1", queue="root.mine")
        self.wait_bound(ns, "mine")
        wait_until(lambda: self.queue_usage("root.mine").get("vcore") == 1000, 20, 0.2,
                   "root.mine counts mine")
        path = "/api/v1/namespaces/%s/pods/mine/status" % ns
        # the spoofed name is nobody's: no other test's pods can be counted to it
        spoof = json.dumps({"user": "mallory", "groups": ["dev"]})
        st1, b1 = self.c.api("alice").status("PATCH", path, {"metadata": {"annotations": {ANN: spoof}}},
                                             ctype="application/merge-patch+json")
        st2, b2 = self.c.api("alice").status("PATCH", path, {"metadata": {"labels": {QUEUE: "root.other"}}},
                                             ctype="application/merge-patch+json")
        stored = self.get(ns, "mine")
        self.assertEqual(json.loads(stored["metadata"]["annotations"][ANN])["user"], "alice",
                         "identity rewritten through /status (PATCH answered %s)" % st1)
        self.assertEqual(stored["metadata"]["labels"].get(QUEUE), "root.mine",
                         "queue label rewritten through /status (PATCH answered %s: %s)" % (st2, b2))
        self.assertEqual(st2, 403, b2)
        # the kubelet's kind of write (status only) still goes through
        st3, b3 = self.c.api("alice").status("PATCH", path, {"status": {"message": "hello"}},
                                             ctype="application/merge-patch+json")
        self.assertEqual(st3, 200, b3)
        # kubequota's view, before and after a restart that recounts from the API server
        before = self.kq_json("/ws/v1/partition/default/usage/user/alice")
        self.c.stop_kubequota("kq")
        self.c.start_kubequota(open(self.c.path("kq-queues.yaml")).read(), extra=self.KQ_ARGS)
        wait_until(lambda: self.queue_usage("root.mine").get("vcore") == 1000, 30, 0.2,
                   "after the restart root.mine still counts mine")
        self.assertFalse(self.queue_usage("root.other").get("vcore"), "mine moved to root.other")
        after = self.kq_json("/ws/v1/partition/default/usage/user/alice")
        self.assertEqual(after["queues"]["resourceUsage"], before["queues"]["resourceUsage"])
        self.assertEqual(self.c.kubequota_client().get("/ws/v1/partition/default/usage/user/mallory").status,
                         404, "mallory is charged for alice's pod")
