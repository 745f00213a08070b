"""Self-service (issue 19): with --rest-auth=kubernetes, a caller whose token TokenReview
authenticates but who lacks `get usage.kubequota.io` may still read their own user's usage
(/usage/user/{self}) and explain pods of their own identity (the TokenReview username equals
the pod's kubequota user; for a posted what-if pod, whose identity the caller wrote, its
groups must also be the caller's). Everything else still needs the permission: other users,
the lists, queues, and other users' pods answer 403. Tested with two users' tokens served by
the simulator's TokenReview, directly and through the kubectl plugin and the service proxy."""

import json
import os
import subprocess

from kqtest import (ANN_USER, LABEL_QUEUE, PARTITION, HttpClient, KQTestCase, binary, certs, pod_manifest,
                    queues_config, wait_until, write_kubeconfig)

CONFIG = queues_config(
    {"name": "default", "submitacl": "*"},
    {"name": "dev", "submitacl": "*", "limits": [
        {"limit": "alice", "users": ["alice"], "maxresources": {"cpu": "2"}},
        {"limit": "qa", "groups": ["qa"], "maxresources": {"cpu": "1"}}]},
)
P = "/ws/v1/partition/%s" % PARTITION


class SelfServiceTest(KQTestCase):
    CONFIG = CONFIG
    EXTRA_ARGS = ("--rest-auth", "kubernetes", "--history-interval", "100ms")

    def setUp(self):
        super().setUp()
        self.sim.sim.review_tokens = {
            "tok-alice": {"username": "alice", "groups": ["devs", "system:authenticated"]},
            "tok-bob": {"username": "bob", "groups": ["qa", "system:authenticated"]},
            "tok-ops": {"username": "ops"}}
        self.sim.sim.review_allowed = {"ops"}  # only ops has get usage.kubequota.io
        self.create("a1", user="alice", groups=["devs"], queue="root.dev", cpu="1500m")
        self.assert_bound("a1")
        self.create("b1", user="bob", groups=["qa"], queue="root.dev", cpu="500m")
        self.assert_bound("b1")
        self.create("a2", user="alice", groups=["devs"], queue="root.dev", cpu="1")
        self.assert_denied("a2")
        self.wait_usage()
        self.alice, self.bob, self.ops = (HttpClient(self.kq.url, ca=certs()["ca"], token=t)
                                          for t in ("tok-alice", "tok-bob", "tok-ops"))

    def what_if(self, user, groups, cpu="300m"):
        p = pod_manifest("w", user=user, groups=groups, queue="root.dev", cpu=cpu)
        return p

    def test_own_usage_and_pods_only(self):
        # alice reads her own usage: the same answer the permitted ops gets
        r = self.alice.get(P + "/usage/user/alice")
        self.assertEqual(r.status, 200, r.text)
        self.assertEqual(r.json(), self.ops.get(P + "/usage/user/alice").json())
        self.assertEqual(r.json()["queues"]["resourceUsage"]["vcore"], 1500)
        # ... and nobody else's, nor the lists and queues
        for path in ("/usage/user/bob", "/usage/users", "/usage/groups", "/usage/group/devs", "/queues",
                     "/applications"):
            r = self.alice.get(P + path)
            self.assertEqual(r.status, 403, (path, r.text))
            self.assertNotIn("500", r.text)  # none of bob's numbers
        # her pending pod: the filter's reason, as the permitted view gives it
        r = self.alice.get(P + "/explain/default/a2")
        self.assertEqual(r.status, 200, r.text)
        self.assertEqual(r.json(), self.ops.get(P + "/explain/default/a2").json())
        self.assertFalse(r.json()["fits"])
        # bob's pod: refused, without its numbers
        r = self.alice.get(P + "/explain/default/b1")
        self.assertEqual(r.status, 403, r.text)
        self.assertIn("own identity", r.json()["description"])
        self.assertNotIn("500m", r.text)
        # bob: the mirror image
        self.assertEqual(self.bob.get(P + "/usage/user/bob").status, 200)
        self.assertEqual(self.bob.get(P + "/usage/user/alice").status, 403)
        self.assertEqual(self.bob.get(P + "/explain/default/b1").status, 200)
        self.assertEqual(self.bob.get(P + "/explain/default/a1").status, 403)
        # ops (the permission) sees everything; an unknown token nothing
        self.assertEqual(self.ops.get(P + "/usage/users").status, 200)
        self.assertEqual(self.ops.get(P + "/explain/default/b1").status, 200)
        stranger = HttpClient(self.kq.url, ca=certs()["ca"], token="tok-nobody")
        self.assertEqual(stranger.get(P + "/usage/user/nobody").status, 401)

    def test_own_usage_history_only(self):
        """Usage over time follows the views it comes from: alice reads her own user's
        series (as usage/user/alice), not bob's, not the queues' and not the list of names."""
        wait_until(lambda: self.ops.get(P + "/history/user/alice").status == 200, 15, 0.1, "alice's history")
        r = self.alice.get(P + "/history/user/alice")
        self.assertEqual(r.status, 200, r.text)
        self.assertEqual(r.json()["name"], "alice")
        self.assertEqual(r.json()["points"][-1]["vcore"], 1500)
        for path in ("/history/user/bob", "/history", "/history/queue/root.dev"):
            r = self.alice.get(P + path)
            self.assertEqual(r.status, 403, (path, r.text))
            self.assertNotIn("500", r.text)  # none of bob's numbers
        self.assertEqual(self.bob.get(P + "/history/user/bob").status, 200)
        for path in ("/history", "/history/queue/root.dev", "/history/user/bob"):
            self.assertEqual(self.ops.get(P + path).status, 200, path)

    def test_what_if_only_for_own_identity_and_groups(self):
        # a what-if pod as alice with her own group: answered (1500m used + 300m <= 2)
        r = self.alice.post(P + "/explain", self.what_if("alice", ["devs"]))
        self.assertEqual(r.status, 200, r.text)
        self.assertTrue(r.json()["fits"])
        # claiming bob's identity, or a group she is not in (qa's usage is bob's): refused
        for user, groups in (("bob", ["qa"]), ("alice", ["qa"]), ("bob", [])):
            r = self.alice.post(P + "/explain", self.what_if(user, groups))
            self.assertEqual(r.status, 403, (user, groups, r.text))
        # a list mixing in another identity is refused whole
        r = self.alice.post(P + "/explain", [self.what_if("alice", ["devs"]), self.what_if("bob", [])])
        self.assertIn(r.status, (400, 403), r.text)
        # nothing was written to the API server by any of it (reviews are questions, not writes)
        self.assertEqual([w for w in self.sim.state()["counters"]["write_log"]
                          if "/events" not in w and "binding" not in w and not w.endswith("reviews")], [])

    def test_through_the_kubectl_plugin(self):
        self.sim.sim.proxy_services = {"kubequota-system/kubequota:443": "127.0.0.1:%d" % self.kq.port}
        kc = write_kubeconfig(os.path.join(self.kq.workdir, "alice-kubeconfig"), self.sim.url, certs()["ca"],
                              "tok-alice")

        def plugin(*args):
            return subprocess.run([binary(), "kubectl"] + list(args) + ["--kubeconfig", kc], capture_output=True,
                                  text=True, timeout=30)

        r = plugin("usage", "--user", "alice", "-o", "json")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(r.stdout)["userName"], "alice")
        r = plugin("why", "a2")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("waits for quota", r.stdout)
        r = plugin("usage")  # everyone's: needs the permission
        self.assertEqual(r.returncode, 1)
        self.assertIn("403", r.stderr)
        r = plugin("why", "b1")
        self.assertEqual(r.returncode, 1)
        self.assertIn("403", r.stderr)
        job = os.path.join(self.kq.workdir, "job.json")
        with open(job, "w") as f:
            p = self.what_if("alice", ["devs"], cpu="1")
            p["metadata"]["annotations"][ANN_USER] = json.dumps({"user": "alice", "groups": ["devs"]})
            p["metadata"]["labels"][LABEL_QUEUE] = "root.dev"
            json.dump(p, f)
        r = plugin("what-if", "-f", job)
        self.assertEqual(r.returncode, 3, r.stderr)  # would wait (docs/cli.md: what-if's exit codes)
        self.assertIn("0 of 1 pod would fit now", r.stdout)  # 1500m + 1 > 2
