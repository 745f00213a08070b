"""Limits as kube-scheduler sees them: filter + bind through kubequota against the API
simulator, with the usage view checked against the simulator's truth after each step."""

import threading
import urllib.parse

from kqtest import (KQTestCase, PARTITION, pod_manifest, queues_config, wait_until)

DEV_LIMITS = [
    {"limit": "alice in dev", "users": ["alice"],
     "maxresources": {"cpu": "2", "memory": "4Gi"}},
    {"limit": "everyone else in dev", "users": ["*"], "maxresources": {"cpu": "1"}},
]


class UserLimitTest(KQTestCase):
    CONFIG = queues_config({"name": "default"}, {"name": "dev", "limits": DEV_LIMITS})

    def test_user_limit_allows_then_denies(self):
        for i in (1, 2):
            self.create("a%d" % i, user="alice", groups=["dev"], queue="root.dev", cpu="1",
                        memory="1Gi")
            self.assert_bound("a%d" % i)
        self.wait_usage()
        self.create("a3", user="alice", groups=["dev"], queue="root.dev", cpu="1", memory="1Gi")
        why = self.assert_denied("a3", "default", "alice", "root.dev", "alice in dev")
        self.assertIn("cpu", why)
        # the denial changed nothing
        self.wait_usage()
        u = self.kq.get_json("/ws/v1/partition/%s/usage/user/alice" % PARTITION)
        self.assertEqual(u["userName"], "alice")
        root = u["queues"]
        self.assertEqual(root["resourceUsage"]["vcore"], 2000)
        self.assertEqual(root["resourceUsage"]["memory"], 2 * 2**30)
        # memory is the binding resource for a small-cpu, large-memory pod
        self.create("a4", user="alice", groups=["dev"], queue="root.dev", cpu=None,
                    memory="3Gi")
        self.assert_denied("a4", "default", "alice", "memory")
        r = self.kq.get("/ws/v1/partition/%s/usage/user/nobody-here" % PARTITION)
        self.assertEqual(r.status, 404)
        r = self.kq.get("/ws/v1/partition/no-such-partition/usage/users")
        self.assertEqual(r.status, 404)

    def test_wildcard_user_limit_is_per_user(self):
        self.create("b1", user="bob", queue="root.dev", cpu="600m")
        self.assert_bound("b1")
        self.create("b2", user="bob", queue="root.dev", cpu="600m")
        self.assert_denied("b2", "default", "bob", "root.dev", "everyone else in dev")
        # another user gets a limit of her own from the same "*" entry
        self.create("c1", user="carol", queue="root.dev", cpu="600m")
        self.assert_bound("c1")
        # alice is named, so "*" does not apply to her
        self.create("a1", user="alice", queue="root.dev", cpu="1500m")
        self.assert_bound("a1")
        # outside root.dev nothing limits bob
        self.create("b3", user="bob", queue="root.default", cpu="3")
        self.assert_bound("b3")
        self.wait_usage()

    def test_queue_from_namespace_and_default(self):
        # no queue label: namespace "dev" -> root.dev exists; namespace "web" -> root.default
        self.create("n1", ns="dev", user="bob", cpu="1")
        self.assert_bound("n1", "dev")
        self.create("n2", ns="dev", user="bob", cpu="100m")
        self.assert_denied("n2", "dev", "bob", "root.dev")
        self.create("n3", ns="web", user="bob", cpu="2")
        self.assert_bound("n3", "web")
        self.wait_usage()
        exp = self.kq.get_json("/ws/v1/partition/%s/usage/user/bob" % PARTITION)
        self.assertEqual(exp["queues"]["resourceUsage"]["vcore"], 3000)


class GroupLimitTest(KQTestCase):
    CONFIG = queues_config(
        {"name": "default"},
        {"name": "dev", "limits": [
            {"limit": "dev group", "groups": ["dev"], "maxresources": {"vcore": "2"}},
            {"limit": "qa group", "groups": ["qa"], "maxresources": {"vcore": "1"}},
        ]})

    def test_group_limit_shared_by_members(self):
        self.create("d1", user="dave", groups=["dev"], queue="root.dev", cpu="1")
        self.assert_bound("d1")
        self.create("e1", user="erin", groups=["dev"], queue="root.dev", cpu="1")
        self.assert_bound("e1")
        self.create("f1", user="frank", groups=["dev"], queue="root.dev", cpu="500m")
        self.assert_denied("f1", "default", "group", "dev", "root.dev", "dev group")
        # a user outside the group is not held by it
        self.create("g1", user="gina", groups=["ops"], queue="root.dev", cpu="3")
        self.assert_bound("g1")
        self.wait_usage()
        g = self.kq.get_json("/ws/v1/partition/%s/usage/group/dev" % PARTITION)
        self.assertEqual(g["groupName"], "dev")
        self.assertEqual(g["queues"]["resourceUsage"]["vcore"], 2000)
        self.assertEqual(sorted(g.get("users") or []), ["dave", "erin"])

    def test_group_selection_uses_a_configured_group(self):
        # hank's first group has no limit; he is tracked (and limited) as qa
        self.create("h1", user="hank", groups=["misc", "qa"], queue="root.dev", cpu="1")
        self.assert_bound("h1")
        self.create("h2", user="hank", groups=["misc", "qa"], queue="root.dev", cpu="100m")
        self.assert_denied("h2", "default", "qa", "qa group")
        # ivy is in both dev and qa: the first group limit in file order (dev) is hers
        self.create("i1", user="ivy", groups=["qa", "dev"], queue="root.dev", cpu="1500m")
        self.assert_bound("i1")
        self.wait_usage()
        groups = {g["groupName"]: g for g in self.kq.groups()}
        self.assertEqual(groups["qa"]["queues"]["resourceUsage"]["vcore"], 1000)
        self.assertEqual(groups["dev"]["queues"]["resourceUsage"]["vcore"], 1500)
        self.assertNotIn("misc", groups)


class MaxApplicationsTest(KQTestCase):
    CONFIG = queues_config(
        {"name": "default"},
        {"name": "dev", "limits": [
            {"limit": "alice apps", "users": ["alice"], "maxapplications": 2},
        ]})

    def test_max_applications(self):
        self.create("p1", user="alice", queue="root.dev", app="app-1")
        self.assert_bound("p1")
        self.create("p2", user="alice", queue="root.dev", app="app-2")
        self.assert_bound("p2")
        self.create("p3", user="alice", queue="root.dev", app="app-3")
        self.assert_denied("p3", "default", "alice", "applications", "alice apps")
        # more pods of a running application are not new applications
        self.create("p4", user="alice", queue="root.dev", app="app-1")
        self.assert_bound("p4")
        self.wait_usage(check_apps=True)
        u = self.kq.get_json("/ws/v1/partition/%s/usage/user/alice" % PARTITION)

        def find(node, name):
            if node.get("queuename") in (name, name.split(".")[-1]) or \
                    node.get("queuePath") == name:
                return node
            for c in node.get("children") or []:
                hit = find(c, name)
                if hit:
                    return hit
        dev = find(u["queues"], "root.dev")
        self.assertIsNotNone(dev, u)
        self.assertEqual(sorted(dev["runningApplications"]), ["app-1", "app-2"])
        self.assertEqual(dev["maxApplications"], 2)
        # app-2 finishes: its last pod released, a new application may start
        self.sim.delete_pod("default", "p2")
        self.wait_usage(check_apps=True)
        wait_until(lambda: self._try("p3"), 10, 0.2, "p3 admitted after app-2 ended")
        self.wait_usage(check_apps=True)

    def _try(self, name):
        ok, why = self.schedule(name)
        return (ok, why) if ok else None


class ConcurrentBindTest(KQTestCase):
    CONFIG = queues_config({"name": "default"}, {"name": "dev", "limits": [
        {"limit": "one core each", "users": ["*"], "maxresources": {"cpu": "1"}}]})

    def test_two_binds_room_for_one(self):
        for round_ in range(5):
            user = "u%d" % round_
            pods = []
            for side in ("x", "y"):
                name = "%s-%s" % (user, side)
                pods.append(self.create(name, user=user, queue="root.dev", cpu="1"))
            nodes = self.sched.node_names()
            # both pass filter: filter checks, it does not reserve
            for p in pods:
                res = self.sched.filter(p, nodes)
                self.assertEqual(res.get("NodeNames"), nodes, res)
            results = [None, None]
            barrier = threading.Barrier(2)

            def bind(i):
                barrier.wait()
                results[i] = self.sched.bind(self.sim.get_pod("default", pods[i]["metadata"]["name"]),
                                             nodes[i])
            ts = [threading.Thread(target=bind, args=(i,)) for i in (0, 1)]
            for t in ts:
                t.start()
            for t in ts:
                t.join(30)
            wins = [r for r in results if r and r[0]]
            losses = [r for r in results if r and not r[0]]
            self.assertEqual((len(wins), len(losses)), (1, 1), "round %d: %s" % (round_, results))
            self.assertIn(user, losses[0][1])
            bound = [p["metadata"]["name"] for p in self.sim.state()["pods"]
                     if p["spec"].get("nodeName") and p["metadata"]["name"].startswith(user + "-")]
            self.assertEqual(len(bound), 1, bound)
        self.wait_usage()


class ForeignBindTest(KQTestCase):
    CONFIG = queues_config({"name": "default"}, {"name": "dev", "limits": DEV_LIMITS})

    def test_pod_bound_by_someone_else_is_counted(self):
        p = self.create("other", user="alice", queue="root.dev", cpu="1500m", memory="1Gi")
        r = self.sim.bind("default", "other", "node-2", uid=p["metadata"]["uid"])
        self.assertEqual(r.status, 201, r.text)
        self.wait_usage()
        # counted, so alice has only 500m left
        self.create("mine", user="alice", queue="root.dev", cpu="1")
        self.assert_denied("mine", "default", "alice", "root.dev")
        self.create("small", user="alice", queue="root.dev", cpu="500m")
        self.assert_bound("small")
        self.wait_usage()
        # a pod created already bound (nodeName in the spec) is counted too
        self.sim.create_pod(pod_manifest("static", user="bob", queue="root.dev", cpu="2",
                                         node="node-3"))
        self.wait_usage()


class DenialEventTest(KQTestCase):
    CONFIG = queues_config({"name": "default"}, {"name": "dev", "limits": DEV_LIMITS})

    def test_denied_pod_gets_warning_event(self):
        self.create("ok", user="bob", queue="root.dev", cpu="1")
        self.assert_bound("ok")
        p = self.create("too-much", user="bob", queue="root.dev", cpu="1")
        why = self.assert_denied("too-much", "default", "bob")

        def event():
            for e in self.sim.events("default"):
                io = e.get("involvedObject") or {}
                if e.get("reason") == "QuotaExceeded" and io.get("name") == "too-much":
                    return e
        ev = wait_until(event, 10, 0.1, "a QuotaExceeded event for default/too-much")
        self.assertEqual(ev["type"], "Warning")
        self.assertEqual(ev["involvedObject"].get("kind"), "Pod")
        self.assertEqual(ev["involvedObject"].get("uid"), p["metadata"]["uid"])
        self.assertIn("bob", ev.get("message", ""))
        self.assertTrue(why)
        # no event for the admitted pod
        self.assertFalse([e for e in self.sim.events()
                          if (e.get("involvedObject") or {}).get("name") == "ok"
                          and e.get("type") == "Warning"])
        r = self.sim.http.get("/api/v1/namespaces/default/events?fieldSelector=" +
                              urllib.parse.quote("reason=QuotaExceeded"))
        self.assertGreaterEqual(len(r.json()["items"]), 1)
