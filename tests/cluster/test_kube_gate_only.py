"""Gate-only mode (issue 40 item 3; the chart's `scheduler.extender.mode: gate-only`) on a real
API server with the real kube-scheduler: its profile has no extender and no DefaultPreemption,
so kube-scheduler's scheduling cycle calls nothing outside itself, and the admission gate's
release is the only quota decision (charts/kubequota/README.md, "Gate-only mode").

What must still hold, each asserted on what the API server stores:
- limits: a pod over its queue's max stays gated (never reaches kube-scheduler) and is
  released when room frees, by kubequota alone;
- fair order across users, as with the extender (docs/gating.md);
- binding by anyone but the scheduler is refused (the chart's ValidatingAdmissionPolicy,
  evaluated in the API server), while kube-scheduler, under the chart's ServiceAccount, binds;
- no preemption across quota groups: kube-scheduler does not preempt at all in this mode
  (a high-priority pod of one group waits; the other group's pods stay bound);
- Koordinator multi-tree placement: a pod of a tree's quota is never released (nothing would
  keep it on its tree's nodes), with an Event that names the mode;
- kube-scheduler never calls kubequota (no connection on its scheduler port).
"""

from kubetest import KubeTestCase, queues_config, wait_until

GATE = "kubequota.io/admission"
GATE_ONLY = {"scheduler": {"extender": {"mode": "gate-only"}}}
PROFILES = "/apis/quota.koordinator.sh/v1alpha1/namespaces/%s/elasticquotaprofiles"
KOORD = "/apis/scheduling.sigs.k8s.io/v1alpha1/namespaces/%s/elasticquotas"
L = "quota.scheduling.koordinator.sh/"
ZONE = "topology.kubernetes.io/zone"


def gates(pod):
    return [g["name"] for g in pod["spec"].get("schedulingGates") or []]


def binding(name, node):
    return {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node}}


def counter(text, name, listener):
    key = '%s{listener="%s"} ' % (name, listener)
    for ln in text.splitlines():
        if ln.startswith(key):
            return float(ln[len(key):])
    return 0.0


class GateOnly(KubeTestCase):
    CHART_VALUES = GATE_ONLY
    CONFIG = queues_config({"name": "default"}, {"name": "shared", "resources": {"max": {"vcore": "2"}}})

    def metrics(self):
        r = self.c.kubequota_client().get("/metrics")
        self.assertEqual(r.status, 200)
        return r.body if isinstance(r.body, str) else r.body.decode()

    def test_the_profile_calls_nothing(self):
        cfg = self.c.scheduler_config()
        self.assertNotIn("extenders", cfg)
        (prof,) = cfg["profiles"]
        self.assertEqual(prof["plugins"]["postFilter"]["disabled"], [{"name": "DefaultPreemption"}])
        self.assertIn("--admission-gate-only", self.c.chart_container_args("kubequota"))
        before = counter(self.metrics(), "kubequota_connections_total", "scheduler")
        ns = self.ns()
        created = self.pod(ns, "p1", user="alice", queue="root.shared")
        self.assertIn(GATE, gates(created), "the webhook gates the pod at creation")
        self.wait_bound(ns, "p1")
        self.assertEqual(gates(self.get(ns, "p1")), [])
        after = counter(self.metrics(), "kubequota_connections_total", "scheduler")
        self.assertEqual(after, before, "kube-scheduler called kubequota's scheduler port")
        wait_until(lambda: self.queue_usage("root.shared").get("vcore") == 1000, 20, 0.2,
                   "the released pod counted once in root.shared")

    def test_limits_hold(self):
        ns = self.ns()
        for n in ("a1", "a2", "a3"):
            self.pod(ns, n, user="alice", queue="root.shared")
        for n in ("a1", "a2"):
            self.wait_bound(ns, n)
        # the third would break the queue's 2 cpu: it is never released, so kube-scheduler
        # (which checks no quota in this mode) never sees it
        self.assert_stays_pending(ns, "a3", 2)
        self.assertIn(GATE, gates(self.get(ns, "a3")))
        self.assertEqual(self.queue_usage("root.shared").get("vcore"), 2000)
        self.delete(ns, "a1")
        self.wait_bound(ns, "a3")
        wait_until(lambda: self.queue_usage("root.shared").get("vcore") == 2000, 20, 0.2,
                   "root.shared at its max, never over")

    def test_fair_order_across_users(self):
        ns = self.ns()
        for n in ("c1", "c2"):
            self.pod(ns, n, user="carol", queue="root.shared")
        for n in ("c1", "c2"):
            self.wait_bound(ns, n)
        waiting = []
        for u, p in (("alice", "a"), ("bob", "b")):
            for i in (1, 2):
                self.pod(ns, "%s%d" % (p, i), user=u, queue="root.shared")
                waiting.append("%s%d" % (p, i))
        self.assert_stays_pending(ns, "a1", 1.5)
        released, running = [], ["c1", "c2"]
        for _ in range(4):
            self.delete(ns, running.pop(0))

            def one_more():
                now = [n for n in waiting if n not in released and GATE not in gates(self.get(ns, n))]
                return now if len(now) == 1 else None
            new = wait_until(one_more, 30, 0.1, "one more release")[0]
            released.append(new)
            self.wait_bound(ns, new)
            running.append(new)
        users = [n[0] for n in released]
        for x, y in zip(users, users[1:]):
            self.assertNotEqual(x, y, "release order %s is not round-robin" % released)
        self.assertEqual([n for n in released if n[0] == "a"], ["a1", "a2"])

    def test_binding_by_anyone_else_refused(self):
        ns = self.ns()
        self.c.apply([
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
             "metadata": {"name": "binder", "namespace": ns},
             "rules": [{"apiGroups": [""], "resources": ["pods/binding"], "verbs": ["create"]}]},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
             "metadata": {"name": "binder", "namespace": ns},
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "binder"},
             "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice"}]}])
        self.assertTrue(any(d["kind"] == "ValidatingAdmissionPolicy" for d in self.c.rendered),
                        "gate-only renders the binding policy")
        node = self.c.api().get("/api/v1/nodes")["items"][0]["metadata"]["name"]
        # a pod over the queue's max stays gated; alice binds it herself
        self.pod(ns, "big", user="alice", cpu="3", queue="root.shared")

        def refused():
            st, body = self.c.api("alice").status("POST", "/api/v1/namespaces/%s/pods/big/binding" % ns,
                                                  binding("big", node))
            self.assertNotIn(st, (200, 201), "alice bound her own 3-cpu pod past the 2-cpu queue: %s" % body)
            # 403 from the policy once the API server has loaded it (a 409 for the gate before)
            return (st, body) if st == 403 else None
        st, body = wait_until(refused, 15, 0.5, "the binding policy refuses alice")
        self.assertIn("may not bind", body.get("message", ""))
        self.assertFalse(self.node_of(ns, "big"))
        # kube-scheduler binds (the chart's ServiceAccount, which the policy allows)
        self.pod(ns, "fits", user="alice", cpu="1", queue="root.shared")
        self.wait_bound(ns, "fits")


class GateOnlyPlacement(KubeTestCase):
    """Small nodes: one pool of Koordinator's multi-tree profile, and one plain node, both
    full at 4 pods (node capacity `pods`: quota, which counts cpu and memory, has room)."""
    CHART_VALUES = GATE_ONLY
    CONFIG = queues_config({"name": "default"}, {"name": "ga"}, {"name": "gb"})
    NODES = {"pool-a-0": {"cpu": "8", "memory": "16Gi", "pods": "4", "labels": {ZONE: "zone-a"}},
             "plain-0": {"cpu": "8", "memory": "16Gi", "pods": "4"}}
    PRIORITY_CLASSES = {"kq-gate-only-high": 100000}

    def test_no_preemption_across_groups(self):
        ns = self.ns()
        # group B (queue root.gb) fills both nodes with low-priority pods
        for i in range(8):
            self.pod(ns, "b%d" % i, user="bob", cpu="100m", queue="root.gb")
        for i in range(8):
            self.wait_bound(ns, "b%d" % i)
        # group A's high-priority pod has quota (released) but no room: kube-scheduler's
        # DefaultPreemption would evict B's pods; in gate-only mode it is off
        self.pod(ns, "a-high", user="alice", cpu="100m", queue="root.ga", priority_class="kq-gate-only-high")
        try:
            wait_until(lambda: GATE not in gates(self.get(ns, "a-high")), 20, 0.2, "a-high released")
        except AssertionError as e:
            raise AssertionError("%s\n%s" % (e, self.pod_story(ns, "a-high"))) from None
        self.wait_unschedulable(ns, "a-high")
        self.assert_stays_pending(ns, "a-high", 3)
        for i in range(8):
            p = self.get(ns, "b%d" % i)
            self.assertTrue(p["spec"].get("nodeName"), "b%d lost its node" % i)
            self.assertFalse(p["metadata"].get("deletionTimestamp"), "b%d was preempted" % i)
            self.assertFalse(p.get("status", {}).get("nominatedNodeName"))
        self.assertFalse(self.get(ns, "a-high").get("status", {}).get("nominatedNodeName"),
                         "kube-scheduler nominated a node: it preempted")

    def test_multitree_pod_is_held(self):
        ns = self.ns()
        admin = self.c.api("admin")
        admin.post(PROFILES % ns, {
            "apiVersion": "quota.koordinator.sh/v1alpha1", "kind": "ElasticQuotaProfile",
            "metadata": {"name": "pool-a", "labels": {L + "tree-id": "tree-a"}},
            "spec": {"quotaName": "pool-a-root", "nodeSelector": {"matchLabels": {ZONE: "zone-a"}},
                     "quotaLabels": {L + "is-parent": "true"}}})
        admin.post(KOORD % ns, {
            "apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "ElasticQuota",
            "metadata": {"name": ns, "labels": {L + "parent": "pool-a-root", L + "tree-id": "tree-a"}},
            "spec": {"min": {"cpu": "0"}, "max": {"cpu": "100", "memory": "100Gi"}}})

        def in_tree():
            tree = self.kq_json("/ws/v1/partition/default/queues").get("quotaTree") or {}
            return any(g["name"] == ns and g.get("tree") == "tree-a" for g in tree.get("groups", []))
        wait_until(in_tree, 30, 0.2, "the quota in tree-a")
        self.pod(ns, "t1", user="alice", cpu="1")
        # never released: nothing in a profile without an extender keeps it on pool-a
        self.assert_stays_pending(ns, "t1", 3)
        self.assertIn(GATE, gates(self.get(ns, "t1")))
        self.wait_event(ns, "t1", "WaitingForQuota", "gate-only")
        try:
            admin.request("DELETE", (PROFILES % ns) + "/pool-a", ok=(200, 404))
        finally:
            self.delete(ns, "t1")
