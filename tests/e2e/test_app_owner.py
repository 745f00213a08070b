"""Issue 29, the escapes: an application belongs to the identity that started it, and the
keys that place a pod are fixed once it exists.

  - A tenant who labels her pods with the application id of another user's running
    application (every key kubequota reads one from) is refused: at admission (403 naming
    the application and her user), and at filter and bind for pods that skipped the
    webhook (the extender's answer names the conflict) - in the owner's namespace and in
    another, with the admission gate off and on, and after a restart, which rebuilds the
    same owner from the bound pods (the user of the earliest-created one) whatever order
    the API server lists them in. Nothing of hers is ever charged to the owner.
  - Explain (what-if) of such a pod answers with the conflict, never with the owner's or
    his group's usage.
  - YuniKorn's queue label cannot be changed on a running pod (it moved pods out of a full
    queue across a restart).
  - A what-if list of pods without an application id is one job.

Every usage number is compared with the simulator's truth (kqtest.expected_usage charges
each bound pod to its own user)."""

import copy
import json

from kqtest import (HttpClient, actual_usage, KQTestCase, PARTITION, certs, pod_manifest, queues_config, user_usage,
                    wait_until)
from test_gating import GATE, FakeScheduler, gated
from test_hostile import mutate

APP = "spark-1"
# (labels|annotations, key): every key the pod parser reads an application id from
APP_KEYS = [("labels", "kubequota.io/app-id"), ("labels", "yunikorn.apache.org/app-id"),
            ("annotations", "yunikorn.apache.org/app-id"), ("labels", "applicationId"),
            ("labels", "spark-app-selector")]
LIMITS = [{"limit": "per user", "users": ["*"], "maxresources": {"cpu": "1"}},
          {"limit": "group ga", "groups": ["ga"], "maxresources": {"cpu": "1"}},
          {"limit": "group gb", "groups": ["gb"], "maxresources": {"cpu": "1"}}]
CONFIG = queues_config({"name": "default"}, {"name": "team-a", "limits": LIMITS},
                       {"name": "team-b", "limits": LIMITS})
EXPLAIN = "/ws/v1/partition/%s/explain" % PARTITION
CONFLICT = "belongs to another user"


def with_app(pod, where, key, app=APP):
    pod["metadata"].setdefault(where, {})[key] = app
    return pod


def alice(name, cpu="500m", app=APP, **kw):
    return pod_manifest(name, ns="team-a", user="alice", groups=["ga"], cpu=cpu, memory="64Mi", app=app, **kw)


def bob(name, ns, where, key, cpu="500m", **kw):
    return with_app(pod_manifest(name, ns=ns, user="bob", groups=["gb"], cpu=cpu, memory="64Mi", **kw), where, key)


class AppOwnerChecks:
    """The same scenario with bob in alice's namespace and in his own."""
    CONFIG = CONFIG
    BOB_NS = None

    def assert_alice_alone(self):
        self.wait_usage()
        self.assertEqual(user_usage(self.kq, "bob"), {}, "bob's pods were counted")

    def test_filter_and_bind_refuse_another_users_application(self):
        self.sim.create_pod(alice("a1"))
        self.assert_bound("a1", "team-a")
        self.wait_usage()
        for i, (where, key) in enumerate(APP_KEYS):
            name = "b%d" % i
            self.sim.create_pod(bob(name, self.BOB_NS, where, key))
            why = self.assert_denied(name, self.BOB_NS, CONFLICT, APP, "bob")
            self.assertNotIn("alice", why, "the denial names the owner")
            # bind alone (a scheduler that skips filter) is refused too
            ok, err = self.sched.bind(self.sim.get_pod(self.BOB_NS, name), "node-1")
            self.assertFalse(ok, "bind of bob's pod of alice's application")
            self.assertIn(CONFLICT, err)
        self.assert_alice_alone()
        # alice's application still has her whole limit; bob has his under his own id
        self.sim.create_pod(alice("a2"))
        self.assert_bound("a2", "team-a")
        self.sim.create_pod(with_app(pod_manifest("own", ns=self.BOB_NS, user="bob", groups=["gb"], cpu="1",
                                                  memory="64Mi"), "labels", "kubequota.io/app-id", "bob-job"))
        self.assert_bound("own", self.BOB_NS)
        self.wait_usage()
        # and the refusal is an Event with its own reason (Events are written asynchronously)
        wait_until(lambda: "ApplicationOfAnotherUser" in {
            e.get("reason") for e in self.sim.events(self.BOB_NS) if e["involvedObject"]["name"].startswith("b")},
            10, 0.1, "an ApplicationOfAnotherUser Event")

    def test_admission_refuses_another_users_application(self):
        self.sim.create_pod(alice("a1"))
        self.assert_bound("a1", "team-a")
        self.wait_usage()
        for i, (where, key) in enumerate(APP_KEYS):
            p = bob("b%d" % i, self.BOB_NS, where, key)
            # bob even writes alice's identity: the webhook stamps his own, then refuses
            p["metadata"]["annotations"]["kubequota.io/user-info"] = json.dumps({"user": "alice", "groups": ["ga"]})
            ok, _, resp = mutate(self.kq, p, "bob", ("gb", "system:authenticated"))
            self.assertFalse(ok, "%s %s: bob's pod of alice's application admitted" % (where, key))
            self.assertEqual(resp["status"]["code"], 403)
            for word in (CONFLICT, APP, "bob"):
                self.assertIn(word, resp["status"]["message"])
        # alice's own next pod, and a pod of bob's own application, are admitted
        self.assertTrue(mutate(self.kq, alice("a2"), "alice", ("ga",))[0])
        own = with_app(pod_manifest("own", ns=self.BOB_NS, cpu="500m"), "labels", "kubequota.io/app-id", "bob-job")
        self.assertTrue(mutate(self.kq, own, "bob", ("gb",))[0])
        # a pod without an id of its own is not checked against anyone's
        self.assertTrue(mutate(self.kq, pod_manifest("plain", ns=self.BOB_NS, cpu="500m"), "bob", ("gb",))[0])

    def test_restart_rebuilds_the_same_owner(self):
        """Bound pods of both users carrying the same id (bound before this rule, or by
        someone else) are each charged to their own user; the owner is the user of the
        earliest-created one - alice here, though the API server lists bob's first - on
        every restart."""
        self.kq.stop()
        a0 = self.sim.create_pod(alice("z-alice", node="node-1"))
        b0 = self.sim.create_pod(bob("a-bob", self.BOB_NS, "labels", "kubequota.io/app-id", node="node-2"))
        # alice's pod is the older one (an hour before bob's); set in the store, as the API
        # server never lets a client change it
        w = self.sim.world
        with w.cond:
            for p, ts in ((a0, "2026-01-01T10:00:00Z"), (b0, "2026-01-01T11:00:00Z")):
                w.objs["pods"][w.key(p["metadata"]["namespace"], p["metadata"]["name"])]["metadata"][
                    "creationTimestamp"] = ts
        for round_ in range(2):
            self.kq.start()
            self.wait_usage()  # each pod charged to its own user
            self.assertEqual(user_usage(self.kq, "bob").get("cpu"), 500)
            self.assertEqual(user_usage(self.kq, "alice").get("cpu"), 500)
            name = "b-new-%d" % round_
            self.sim.create_pod(bob(name, self.BOB_NS, "labels", "kubequota.io/app-id"))
            self.assert_denied(name, self.BOB_NS, CONFLICT)
            ok, _, resp = mutate(self.kq, bob("b-adm", self.BOB_NS, "labels", "kubequota.io/app-id"), "bob",
                                 ("gb",))
            self.assertFalse(ok, "round %d: bob admitted into alice's application" % round_)
            self.sim.create_pod(alice("a-new-%d" % round_))
            self.assert_bound("a-new-%d" % round_, "team-a")
            self.wait_usage()
            self.sim.delete_pod("team-a", "a-new-%d" % round_)
            self.sim.delete_pod(self.BOB_NS, name)
            self.wait_usage()
            self.kq.stop()
        self.kq.start()

    def test_escape_survives_no_restart(self):
        """The issue's scenario: bob binds alice's application's pods, kubequota restarts,
        alice's next pod must still fit; bob stays within his own limit throughout."""
        self.sim.create_pod(alice("a1"))
        self.assert_bound("a1", "team-a")
        bound = 0
        for i in range(4):
            self.sim.create_pod(bob("b%d" % i, self.BOB_NS, "labels", "spark-app-selector"))
            bound += self.schedule("b%d" % i, self.BOB_NS)[0]
        self.kq.restart()
        self.wait_usage()
        for i in range(4, 6):
            self.sim.create_pod(bob("b%d" % i, self.BOB_NS, "labels", "spark-app-selector"))
            bound += self.schedule("b%d" % i, self.BOB_NS)[0]
        self.assertEqual(bound, 0, "bob bound %d pods into alice's application" % bound)
        self.sim.create_pod(alice("a2"))
        self.assert_bound("a2", "team-a")
        self.wait_usage()
        self.assertEqual(user_usage(self.kq, "alice").get("cpu"), 1000)


class AppOwnerSameNamespaceTest(AppOwnerChecks, KQTestCase):
    BOB_NS = "team-a"


class AppOwnerOtherNamespaceTest(AppOwnerChecks, KQTestCase):
    BOB_NS = "team-b"


class AppOwnerGatedTest(KQTestCase):
    """With the admission gate on: a gated pod of bob's that skipped the webhook is never
    released into alice's application (the gate's reason names the conflict); alice's are;
    the webhook refuses bob's outright. Both namespaces, and across a restart."""
    CONFIG = CONFIG
    EXTRA_ARGS = ("--admission-gate",)

    def test_gate_never_releases_into_another_users_application(self):
        sched = FakeScheduler(self).start()
        try:
            self.sim.create_pod(alice("a1", gates=(GATE,)))
            wait_until(lambda: self.sim.get_pod("team-a", "a1")["spec"].get("nodeName"), timeout=15,
                       msg="alice's first pod released and bound")
            for ns in ("team-a", "team-b"):
                for i, (where, key) in enumerate(APP_KEYS):
                    p = bob("b-%s-%d" % (ns, i), ns, where, key, gates=(GATE,))
                    ok, _, resp = mutate(self.kq, copy.deepcopy(p), "bob", ("gb",))
                    self.assertFalse(ok, "webhook admitted bob's pod of alice's application")
                    self.assertIn(CONFLICT, resp["status"]["message"])
                    self.sim.create_pod(p)  # as if it had skipped the webhook
            for restart in (False, True):
                if restart:
                    self.kq.restart()
                self.sim.create_pod(alice("a2-%d" % restart, cpu="250m", gates=(GATE,)))
                wait_until(lambda: self.sim.get_pod("team-a", "a2-%d" % restart)["spec"].get("nodeName"),
                           timeout=15, msg="alice's next pod released and bound")
                for p in self.sim.state()["pods"]:
                    if p["metadata"]["name"].startswith("b-"):
                        self.assertTrue(gated(p), "bob's %s was released" % p["metadata"]["name"])
                        self.assertFalse(p["spec"].get("nodeName"))
            self.wait_usage()
            self.assertEqual(user_usage(self.kq, "bob"), {})
            # the wait says why, in the filter's words
            r = self.kq.get_json("/ws/v1/partition/%s/gating/waiting" % PARTITION)
            reasons = [p["reason"] for q in r for p in q["pods"] if p["name"].startswith("b-")]
            self.assertTrue(reasons and all(CONFLICT in x for x in reasons), reasons)
        finally:
            sched.stop()


class QueueLabelFixedTest(KQTestCase):
    """YuniKorn's queue label places a pod, so it cannot change once the pod exists: 4 x 1
    cpu fill a 4-cpu queue; relabelling them (and restarting) moves nothing out of it."""
    CONFIG = queues_config({"name": "default"}, {"name": "small", "resources": {"max": {"cpu": "4"}}},
                           {"name": "big"})

    def small(self, name):
        return self.sim.create_pod(pod_manifest(name, cpu="1", memory="64Mi",
                                                labels={"yunikorn.apache.org/queue": "root.small"}))

    def test_yunikorn_queue_label_cannot_move_running_pods(self):
        for i in range(4):
            self.small("s%d" % i)
            self.assert_bound("s%d" % i)
        self.small("s4")
        self.assert_denied("s4", "default", "root.small")
        for i in range(4):
            for key, value in (("yunikorn.apache.org/queue", "root.big"), ("yunikorn.apache.org/app-id", "x"),
                               ("spark-app-selector", "x")):
                cur = self.sim.get_pod("default", "s%d" % i)
                new = copy.deepcopy(cur)
                new["metadata"]["labels"][key] = value
                ok, _, resp = mutate(self.kq, new, "alice", operation="UPDATE", old=cur)
                if ok:  # the API server would store it
                    self.sim.world.update("pods", "default", "s%d" % i, new)
                self.assertFalse(ok, "relabelling %s of a running pod was allowed" % key)
                self.assertEqual(resp["status"]["code"], 403)
                self.assertIn(key, resp["status"]["message"])
        self.kq.restart()
        # (kqtest's expected usage does not read YuniKorn's label: the queue view is the truth)
        wait_until(lambda: actual_usage(self.kq)["queues"].get("root.small", {}).get("cpu") == 4000, timeout=15,
                   msg="the 4 pods counted in root.small after the restart")
        self.assert_denied("s4", "default", "root.small")
        extra = 0
        for i in range(5, 9):
            self.small("s%d" % i)
            extra += self.schedule("s%d" % i)[0]
        self.assertEqual(extra, 0, "the full queue took %d more pods" % extra)


class ExplainTest(KQTestCase):
    """Explain of another user's application answers the conflict, never the owner's usage
    (self-service: bob may explain pods of his own identity only); a list of pods without an
    application id is one job."""
    CONFIG = queues_config({"name": "default", "submitacl": "*"}, {"name": "dev", "submitacl": "*", "limits": [
        {"limit": "alice", "users": ["alice"], "maxresources": {"cpu": "2"}},
        {"limit": "devs", "groups": ["devs"], "maxresources": {"cpu": "2"}},
        {"limit": "everyone", "users": ["*"], "maxresources": {"cpu": "1"}}]})
    EXTRA_ARGS = ("--rest-auth", "kubernetes")

    def setUp(self):
        super().setUp()
        self.sim.sim.review_tokens = {"tok-bob": {"username": "bob", "groups": ["qa", "system:authenticated"]},
                                      "tok-ops": {"username": "ops"}}
        self.sim.sim.review_allowed = {"ops"}
        self.bob = HttpClient(self.kq.url, ca=certs()["ca"], token="tok-bob")
        self.ops = HttpClient(self.kq.url, ca=certs()["ca"], token="tok-ops")

    def test_what_if_into_another_users_application_shows_no_usage(self):
        self.create("a1", user="alice", groups=["devs"], queue="root.dev", cpu="1500m", app=APP)
        self.assert_bound("a1")
        self.wait_usage()
        for where, key in APP_KEYS:
            p = with_app(pod_manifest("w", user="bob", groups=["qa"], queue="root.dev", cpu="800m"), where, key)
            r = self.bob.post(EXPLAIN, p)
            self.assertEqual(r.status, 200, r.text)
            got = r.json()
            self.assertFalse(got["fits"], got)
            b = got["blockers"][0]
            self.assertEqual((b["kind"], b["name"], b["reason"]), ("application", APP, "ApplicationOfAnotherUser"), b)
            for secret in ("alice", "devs", "1500m", "1.5"):
                self.assertNotIn(secret, r.text, "%s: explain shows alice's usage" % key)
        # the filter agrees
        self.create("b1", user="bob", groups=["qa"], queue="root.dev", cpu="800m", app=APP)
        self.assert_denied("b1", "default", CONFLICT)

    def test_list_without_application_ids_is_one_job(self):
        pods = [pod_manifest("j%d" % i, user="carol", queue="root.dev", cpu="400m", memory="64Mi") for i in range(3)]
        for p in pods:
            p["metadata"].pop("uid", None)
        for body in (pods, {"kind": "List", "apiVersion": "v1", "items": pods}):
            r = self.ops.post(EXPLAIN, body)
            self.assertEqual(r.status, 200, r.text)
            got = r.json()
            # carol may use 1 cpu: 400m + 400m fit, the third makes 1200m
            self.assertEqual((got["fits"], got["fitCount"], got["podCount"]), (False, 2, 3), got)
        # pods that differ still say what differs
        mixed = pods[:1] + [pod_manifest("k", user="carol", queue="root.default", cpu="100m")]
        r = self.ops.post(EXPLAIN, mixed)
        self.assertEqual(r.status, 400)
        self.assertIn("queue differs", r.text)
