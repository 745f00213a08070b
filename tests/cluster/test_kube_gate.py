"""The admission gate on a real API server (docs/gating.md), with the chart's default values
(gate on): the real mutating webhook gates pods at creation, kubequota releases them in fair
order across users, the real API server refuses a gate added after creation, and a tenant's
own removal of the gate is refused by the webhook.

The fair order follows docs/gating.md ("Fair order inside a queue": equal weights give
round-robin across users; within one user, older first). The scheduling-gate rules are the
API server's own (KEP-3521, k8s.io/kubernetes pkg/apis/core/validation ValidatePodUpdate:
"only deletion is allowed" for spec.schedulingGates), exercised here for real.
"""

import json

from kubetest import KubeTestCase, queues_config, wait_until

GATE = "kubequota.io/admission"


def gates(pod):
    return [g["name"] for g in pod["spec"].get("schedulingGates") or []]


class AdmissionGate(KubeTestCase):
    CONFIG = queues_config(
        {"name": "default"},
        {"name": "shared", "resources": {"max": {"vcore": "2"}}},
        {"name": "hist", "resources": {"max": {"vcore": "4"}},
         "properties": {"kubequota.io/gating.policy": "usage"}})
    CHART_VALUES = {"kubequota": {"admissionGate": {"usageCheckpoint": "1s"}}}

    def test_gated_at_creation_by_the_real_webhook(self):
        ns = self.ns()
        created = self.pod(ns, "g1", user="alice", queue="root.shared")
        # the object the API server stored at creation, after the mutating webhook
        self.assertIn(GATE, gates(created))
        self.wait_bound(ns, "g1")
        self.assertNotIn(GATE, gates(self.get(ns, "g1")))
        # a pod of another scheduler is never gated (the chart's matchConditions) where
        # kubequota does not govern (issue 37: governed namespaces make every pod kubequota's)
        out = self.ns(labels={"kubequota.io/enabled": "false"})
        other = self.c.create_pod(out, "other", user="alice", scheduler="default-scheduler")
        self.assertNotIn(GATE, gates(other))

    def test_fair_order_across_users(self):
        ns = self.ns()
        # carol fills the queue (2 x 1 cpu); then alice and bob wait with 3 pods each.
        for n in ("c1", "c2"):
            self.pod(ns, n, user="carol", queue="root.shared")
        for n in ("c1", "c2"):
            self.wait_bound(ns, n)
        waiting = []
        for u, p in (("alice", "a"), ("bob", "b")):
            for i in (1, 2, 3):
                self.pod(ns, "%s%d" % (p, i), user=u, queue="root.shared")
                waiting.append("%s%d" % (p, i))
        for n in waiting:
            wait_until(lambda: GATE in gates(self.get(ns, n)), 10, 0.1, "%s gated" % n)
        self.assert_stays_pending(ns, "a1", 1.5)
        # free one slot at a time; each frees exactly one release
        released = []
        running = ["c1", "c2"]
        for _ in range(4):
            victim = running.pop(0)
            self.delete(ns, victim)

            def one_more():
                now = [n for n in waiting if n not in released and GATE not in gates(self.get(ns, n))]
                return now if len(now) == 1 else None
            new = wait_until(one_more, 30, 0.1, "one more release after deleting %s" % victim)[0]
            released.append(new)
            self.wait_bound(ns, new)
            running.append(new)
        users = [n[0] for n in released]
        # round-robin across users: never the same user twice in a row, 2 each
        for x, y in zip(users, users[1:]):
            self.assertNotEqual(x, y, "release order %s is not round-robin" % released)
        self.assertEqual(sorted(users), ["a", "a", "b", "b"], released)
        # within one user: older first
        self.assertEqual([n for n in released if n[0] == "a"], ["a1", "a2"])
        self.assertEqual([n for n in released if n[0] == "b"], ["b1", "b2"])

    def test_usage_history_is_kept_in_the_charts_configmap(self):
        # docs/gating.md "Usage policy": the leader writes the history to the ConfigMap the
        # chart names and lets it create and update (Role <fullname>-gating)
        ns = self.ns()
        self.pod(ns, "h1", user="alice", queue="root.hist", cpu="1")
        self.wait_bound(ns, "h1")
        path = "/api/v1/namespaces/kubequota-system/configmaps/kubequota-gating-usage"

        def stored():
            cm = self.c.api().request("GET", path, ok=(200, 404))
            return "alice" in (cm.get("data") or {}).get("usage.json", "")
        wait_until(stored, 30, 0.5, "alice's usage history in the ConfigMap")
        rv = self.c.api().get(path)["metadata"]["resourceVersion"]
        self.pod(ns, "h2", user="bob", queue="root.hist", cpu="1")
        self.wait_bound(ns, "h2")
        wait_until(lambda: self.c.api().get(path)["metadata"]["resourceVersion"] != rv and
                   "bob" in self.c.api().get(path)["data"]["usage.json"], 30, 0.5, "the history updated")

    def test_real_api_server_refuses_a_gate_added_after_creation(self):
        ns = self.ns()
        self.pod(ns, "late", user="alice", queue="root.shared", cpu="100m")
        self.wait_bound(ns, "late")
        st, body = self.c.api("admin").status(
            "PATCH", "/api/v1/namespaces/%s/pods/late" % ns,
            {"spec": {"schedulingGates": [{"name": "example.com/late"}]}},
            ctype="application/strategic-merge-patch+json")
        self.assertEqual(st, 422, body)
        self.assertIn("schedulingGates", body["message"])

    def test_tenant_cannot_remove_the_gate(self):
        ns = self.ns()
        # 3 cpu in a 2-cpu queue never fits: the pod keeps its gate
        self.pod(ns, "stuck", user="alice", queue="root.shared", cpu="3")
        wait_until(lambda: GATE in gates(self.get(ns, "stuck")), 10, 0.1, "stuck gated")
        pod = self.get(ns, "stuck")
        idx = gates(pod).index(GATE)
        patch = [{"op": "test", "path": "/spec/schedulingGates/%d/name" % idx, "value": GATE},
                 {"op": "remove", "path": "/spec/schedulingGates/%d" % idx}]
        st, body = self.c.api("alice").status(
            "PATCH", "/api/v1/namespaces/%s/pods/stuck" % ns, json.dumps(patch),
            ctype="application/json-patch+json")
        self.assertEqual(st, 403, body)
        self.assertIn(GATE, body["message"])
        self.assertIn(GATE, gates(self.get(ns, "stuck")))
        # even the cluster admin is not a remover: only kubequota's ServiceAccount is
        st, body = self.c.api("admin").status(
            "PATCH", "/api/v1/namespaces/%s/pods/stuck" % ns, json.dumps(patch),
            ctype="application/json-patch+json")
        self.assertEqual(st, 403, body)
