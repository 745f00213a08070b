"""Explain / what-if (issue 19): POST /ws/v1/partition/{p}/explain and
GET .../explain/{namespace}/{pod} answer what filter/bind would decide, and change nothing.

The reference is kubequota's own filter + bind, driven as kube-scheduler drives them
(SchedulerDriver): for every pod of a seeded random table the explain verdict and its first
blocker's message must be what the filter then decides and says. "No API write" is the
simulator's write log (every non-GET request it served)."""

import json
import random
import urllib.parse

from kqtest import KQTestCase, LABEL_QUEUE, PARTITION, pod_manifest, wait_until

EXPLAIN = "/ws/v1/partition/%s/explain" % PARTITION

USERS = ["alice", "bob", "carol", "dave", "erin"]
CONFIG = {"partitions": [{"name": PARTITION, "queues": [{"name": "root", "queues": [
    {"name": "default", "submitacl": "*"},
    {"name": "dev", "submitacl": "*", "limits": [
        {"limit": "alice in dev", "users": ["alice"], "maxresources": {"cpu": "2", "memory": "4Gi"}},
        {"limit": "everyone else in dev", "users": ["*"], "maxresources": {"cpu": "1"}},
        {"limit": "qa group", "groups": ["qa"], "maxresources": {"cpu": "1500m"}},
    ]},
    {"name": "prod", "submitacl": "*", "resources": {"max": {"cpu": "3", "memory": "6Gi"}},
     "maxapplications": 4},
    {"name": "locked", "submitacl": "alice"},
]}]}]}


class ExplainTest(KQTestCase):
    CONFIG = CONFIG
    # The writes counted here must be explain's: kubequota's requeue pokes (docs/events.md
    # "Requeue") are asynchronous writes of filter and the watch, like Events, so they are off.
    EXTRA_ARGS = ("--requeue-window", "0")

    def writes(self):
        c = self.sim.state()["counters"]
        return c["writes"], list(c["write_log"])

    def counted_matches(self):
        """kubequota's total cpu use equals the bound pods' (the watch has caught up)."""
        want = sum({"100m": 100, "250m": 250, "400m": 400, "700m": 700, "900m": 900, "1200m": 1200,
                    "5": 5000}[p["spec"]["containers"][0]["resources"]["requests"]["cpu"]]
                   for p in self.sim.state()["pods"] if p["spec"].get("nodeName"))
        users = self.kq.get_json("/ws/v1/partition/%s/usage/users" % PARTITION)
        got = sum((u["queues"].get("resourceUsage") or {}).get("vcore", 0) for u in users)
        return got == want

    def writes_but_events(self):
        return self.sim.state()["counters"]["writes_but_events"]

    def explain_pod(self, ns, name):
        r = self.kq.get("%s/%s/%s" % (EXPLAIN, urllib.parse.quote(ns), urllib.parse.quote(name)))
        self.assertEqual(r.status, 200, r.text)
        return r.json()

    def explain(self, body, status=200):
        r = self.kq.post(EXPLAIN, body)
        self.assertEqual(r.status, status, r.text)
        return r.json()

    def test_explain_agrees_with_filter_and_bind_on_random_table(self):
        rnd = random.Random(19)
        agreed = denied = 0
        denied_pods = set()
        for i in range(220):
            user = rnd.choice(USERS)
            groups = rnd.choice([[], ["qa"], ["dev"]])
            queue = rnd.choice(["root.dev", "root.dev", "root.prod", "root.prod", "root.locked", "root.nope",
                                "root.default"])
            cpu = rnd.choice(["100m", "250m", "400m", "700m", "900m", "1200m", "5"])
            mem = rnd.choice(["128Mi", "512Mi", "1Gi", "2Gi"])
            app = "app-%d" % rnd.randrange(8)
            name = "p%03d" % i
            pod = self.sim.create_pod(pod_manifest(name, user=user, groups=groups, queue=queue, cpu=cpu,
                                                   memory=mem, app=app))
            # let usage drop now and then, so that verdicts flip both ways
            if i % 25 == 24:
                for p in self.sim.state()["pods"]:
                    if p["spec"].get("nodeName") and rnd.random() < 0.5:
                        self.sim.delete_pod(p["metadata"]["namespace"], p["metadata"]["name"])
                wait_until(self.counted_matches, 15, 0.05, "the deletions to reach kubequota")
            # events of earlier filter denials are posted asynchronously: compared below
            before = self.writes_but_events()
            got = self.explain_pod("default", name)
            posted = self.explain(self.sim.get_pod("default", name))
            # a not-yet-created copy of the same pod (no uid) gets the same answer
            fresh = json.loads(json.dumps(pod))
            fresh["metadata"].pop("uid", None)
            what_if = self.explain(fresh)
            self.assertEqual(before, self.writes_but_events(), "explain wrote to the API server")
            for other in (posted, what_if):
                self.assertEqual((got["fits"], got["blockers"]), (other["fits"], other["blockers"]))
            ok, why = self.schedule(name)
            self.assertEqual(got["fits"], ok, "pod %s (%s %s %s cpu %s): explain %s, scheduler %s"
                             % (name, user, groups, queue, cpu, got, why))
            if not ok:
                denied += 1
                self.assertTrue(got["blockers"], got)
                self.assertEqual(got["blockers"][0]["message"], why, name)
                if got["neverFits"]:
                    self.assertIn(got["blockers"][0]["reason"],
                                  ("QuotaNeverFits", "QueueNotFound", "QueueNotLeaf"), got)
                denied_pods.add(name)
            agreed += 1
        self.assertEqual(agreed, 220)
        # every Event is a filter denial's, once per pod: explain (three times per pod,
        # before the filter) posted none
        wait_until(lambda: {e["involvedObject"]["name"] for e in self.sim.events()} >= denied_pods, 30, 0.1,
                   "the filter's events")
        evs = self.sim.events()
        self.assertEqual({e["involvedObject"]["name"] for e in evs}, denied_pods)
        self.assertTrue(all(e.get("count", 1) == 1 for e in evs), evs)
        # the table exercised both verdicts
        self.assertGreater(denied, 20)
        self.assertLess(denied, 200)

    def test_blocker_fields_and_never_fits(self):
        self.create("a1", user="alice", queue="root.dev", cpu="1500m", memory="1Gi")
        self.assert_bound("a1")
        self.wait_usage()
        # 1500m used + 800m > 2: the user limit, numbers as the events word them
        got = self.explain(pod_manifest("x", user="alice", queue="root.dev", cpu="800m", memory="1Gi"))
        self.assertFalse(got["fits"])
        self.assertFalse(got["neverFits"])
        b = got["blockers"][0]
        self.assertEqual((b["kind"], b["name"], b["resource"], b["used"], b["request"], b["max"]),
                         ("user", "alice", "cpu", "1500m", "800m", "2"), b)
        self.assertEqual(b["reason"], "QuotaExceeded")
        # 5 cpu alone is over alice's 2: never
        got = self.explain(pod_manifest("y", user="alice", queue="root.dev", cpu="5", memory="1Gi"))
        self.assertTrue(got["neverFits"], got)
        self.assertEqual(got["blockers"][0]["reason"], "QuotaNeverFits")
        # ACL and missing queue kinds
        got = self.explain(pod_manifest("z", user="mallory", queue="root.locked", cpu="100m"))
        self.assertEqual(got["blockers"][0]["kind"], "acl", got)
        got = self.explain(pod_manifest("w", user="bob", queue="root.nope", cpu="100m"))
        self.assertEqual(got["blockers"][0]["kind"], "queue-missing", got)
        self.assertTrue(got["neverFits"])
        # a pod of another scheduler: not ours, so filter passes it
        got = self.explain(pod_manifest("v", user="bob", queue="root.dev", cpu="50", scheduler=None))
        self.assertTrue(got["fits"])
        self.assertFalse(got["managed"])

    def test_list_is_cumulative_and_commits_nothing(self):
        # alice may use 2 cpu in dev: of five 800m pods, two fit (1600m), the third would
        # make 2400m; pods 3-5 are each checked with pods 1-2 assumed
        pods = [pod_manifest("j%d" % i, user="alice", queue="root.dev", cpu="800m", memory="256Mi",
                             app="job1") for i in range(5)]
        before = self.writes()
        for body in ({"kind": "List", "apiVersion": "v1", "items": pods}, pods):
            got = self.explain(body)
            self.assertEqual((got["fits"], got["fitCount"], got["podCount"]), (False, 2, 5), got)
            self.assertEqual([p["fits"] for p in got["pods"]], [True, True, False, False, False])
            self.assertEqual(got["blockers"][0]["used"], "0")
            self.assertEqual(got["blockers"][0]["request"], "2400m")
        self.assertEqual(before, self.writes())
        # nothing was assumed: the usage view is still empty and the real pods schedule
        r = self.kq.get("/ws/v1/partition/%s/usage/user/alice" % PARTITION)
        self.assertTrue(r.status == 404 or not r.json()["queues"].get("resourceUsage", {}).get("vcore"), r.text)
        bound = 0
        for p in pods:
            self.sim.create_pod(p)
            ok, _ = self.schedule(p["metadata"]["name"])
            bound += ok
        self.assertEqual(bound, 2)
        # a list mixing users is refused with a reason
        mixed = [pods[0], pod_manifest("k", user="bob", queue="root.dev", cpu="1")]
        r = self.kq.post(EXPLAIN, mixed)
        self.assertEqual(r.status, 400)
        self.assertIn("same job", r.text)

    def test_yaml_body_as_kubectl_users_write_it(self):
        """POST explain takes a Pod manifest in YAML (issue 28): the same answer as its JSON;
        bad YAML is a 400 naming the line and column."""
        self.create("a1", user="alice", queue="root.dev", cpu="1500m", memory="1Gi")
        self.assert_bound("a1")
        self.wait_usage()
        before = self.writes()
        yaml_pod = """# as written for kubectl apply -f
apiVersion: v1
kind: Pod
metadata:
  name: trainer
  namespace: default
  labels:
    %s: root.dev
  annotations:
    kubequota.io/user-info: '{"user": "alice", "groups": []}'
spec:
  schedulerName: kubequota-scheduler
  containers:
    - name: main
      image: busybox:1.36
      resources:
        requests:
          cpu: 1
          memory: 1Gi
""" % LABEL_QUEUE
        as_json = json.loads(json.dumps(pod_manifest("trainer", user="alice", queue="root.dev", cpu="1",
                                                     memory="1Gi")))
        want = self.explain(as_json)
        self.assertFalse(want["fits"])  # 1500m + 1 > alice's 2
        for ctype in ("application/yaml", "application/json", None):
            r = self.kq.post(EXPLAIN, raw=yaml_pod.encode(), headers={"Content-Type": ctype} if ctype else None)
            self.assertEqual(r.status, 200, r.text)
            got = r.json()
            self.assertEqual((got["fits"], got["neverFits"], got["user"], got["queue"], got["blockers"]),
                             (want["fits"], want["neverFits"], want["user"], want["queue"], want["blockers"]))
        # two documents are a job: 250m fits beside a1, the second 250m too (2 cpu exactly)
        small = yaml_pod.replace("cpu: 1\n", "cpu: 250m\n")
        r = self.kq.post(EXPLAIN, raw=(small + "---\n" + small.replace("name: trainer", "name: trainer-2")).encode(),
                         headers={"Content-Type": "application/yaml"})
        self.assertEqual(r.status, 200, r.text)
        self.assertEqual((r.json()["fitCount"], r.json()["podCount"]), (2, 2))
        # malformed YAML: where, and why
        bad = "apiVersion: v1\nkind: Pod\nmetadata: {name: x\nspec: {}\n"
        r = self.kq.post(EXPLAIN, raw=bad.encode(), headers={"Content-Type": "application/yaml"})
        self.assertEqual(r.status, 400, r.text)
        self.assertIn("the body is neither JSON nor YAML: line 4, column", r.json()["message"])
        r = self.kq.post(EXPLAIN, raw=b"---\n---\n", headers={"Content-Type": "application/yaml"})
        self.assertEqual(r.status, 400, r.text)
        self.assertIn("no document", r.json()["message"])
        self.assertEqual(before, self.writes())

    def test_bad_requests(self):
        before = self.writes()
        for body, status in ((b"not json", 400), (b"[]", 400), (b"42", 400), (b'{"items":[1]}', 400)):
            r = self.kq.post(EXPLAIN, raw=body)
            self.assertEqual(r.status, status, (body, r.text))
        r = self.kq.post("/ws/v1/partition/other/explain", pod_manifest("x"))
        self.assertEqual(r.status, 404)
        r = self.kq.get(EXPLAIN + "/default/no-such-pod")
        self.assertEqual(r.status, 404)
        r = self.kq.get(EXPLAIN + "/Bad_NS/x")
        self.assertEqual(r.status, 400)
        self.assertEqual(before, self.writes())

    def test_needs_the_usage_views_access(self):
        # secure by default: the same rule as the usage view (a token here), for both forms
        import kqtest
        anonymous = kqtest.HttpClient(self.kq.url, ca=kqtest.certs()["ca"])
        wrong = kqtest.HttpClient(self.kq.url, ca=kqtest.certs()["ca"], token="not-the-token")
        self.create("p", user="alice", queue="root.dev", cpu="100m")
        for client in (anonymous, wrong):
            self.assertIn(client.post(EXPLAIN, pod_manifest("x")).status, (401, 403))
            self.assertIn(client.get(EXPLAIN + "/default/p").status, (401, 403))
        self.assertEqual(self.kq.get(EXPLAIN + "/default/p").status, 200)
