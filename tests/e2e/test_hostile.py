"""Tenant isolation and hostile clients (issue 20): callers that reach kubequota's port but
are not the scheduler, forged scheduler requests, and names no API server would accept.
Hostile clients run on this host only, bounded in count and time."""

import base64
import copy
import http.client
import json
import os
import select
import socket
import ssl
import subprocess
import threading
import time

from kqtest import (HttpClient, KQTestCase, Kubequota, SchedulerDriver, certs, ci_get, free_port,
                    pod_manifest, queues_config, user_usage, wait_until)
import test_elastic
from test_elastic import group
from test_tls import non_loopback_address

FILTER_OTHER = {"Pod": {"metadata": {"name": "p", "namespace": "default", "uid": "u1"},
                        "spec": {"schedulerName": "other"}}, "Nodes": None, "NodeNames": ["n1"]}


def listen_everywhere(kq):
    args = kq.argv

    def argv():
        a = args()
        a[a.index("--listen") + 1] = "0.0.0.0:%d" % kq.port
        return a
    kq.argv = argv


class ExtenderClosedByDefaultTest(KQTestCase):
    """Without any flag the scheduler verbs answer only this host and callers with a
    verified client certificate; --extender-open is the explicit way to open them."""
    CONFIG = queues_config({"name": "default"})
    START = False

    def remote(self, addr, cert=False):
        c = certs()
        r = HttpClient("https://%s:%d" % (addr, self.kq.port), ca=c["ca"],
                       cert=c["client"] if cert else None, key=c["client_key"] if cert else None)
        r.ctx.check_hostname = False
        return r

    def start_with(self, *extra):
        self.kq = Kubequota(self.sim, self.CONFIG, extra_args=extra)
        if "--client-ca" in extra:  # every connection then needs a certificate
            c = certs()
            self.kq.http = HttpClient(self.kq.url, ca=c["ca"], cert=c["client"], key=c["client_key"],
                                      token=self.kq.rest_token)
        listen_everywhere(self.kq)
        self.kq.start()

    def test_remote_caller_refused_by_default(self):
        addr = non_loopback_address()
        if addr is None:
            self.skipTest("this host has no non-loopback address to call from")
        self.start_with()
        self.assertEqual(self.kq.http.post("/scheduler/filter", FILTER_OTHER).status, 200)
        remote = self.remote(addr)
        for verb in ("filter", "bind", "preempt"):
            r = remote.post("/scheduler/" + verb, FILTER_OTHER)
            self.assertEqual(r.status, 403, "%s: %s" % (verb, r.text))
            self.assertIn("client certificate", r.json()["error"])
        # the webhooks' and probes' port stays reachable
        self.assertEqual(remote.get("/healthz").status, 200)

    def test_explicitly_opened(self):
        addr = non_loopback_address()
        if addr is None:
            self.skipTest("this host has no non-loopback address to call from")
        self.start_with("--extender-open")
        r = self.remote(addr).post("/scheduler/filter", FILTER_OTHER)
        self.assertEqual(r.status, 200, r.text)

    def test_client_certificate_admits_remote_scheduler(self):
        addr = non_loopback_address()
        if addr is None:
            self.skipTest("this host has no non-loopback address to call from")
        self.start_with("--client-ca", certs()["ca"])
        r = self.remote(addr, cert=True).post("/scheduler/filter", FILTER_OTHER)
        self.assertEqual(r.status, 200, r.text)

    def test_open_and_local_only_contradict(self):
        self.kq = Kubequota(self.sim, self.CONFIG,
                            extra_args=("--extender-open", "--extender-local-only"))
        self.kq.start(wait=False)
        self.assertEqual(self.kq.proc.wait(10), 2)
        self.assertIn("contradict", self.kq.logs())


class ForgedFilterTest(test_elastic.ElasticBase):
    """A filter request naming a pod the API server does not have leaves nothing behind:
    no event in the namespace it names, no pending entry, no raised group request."""

    def metric(self, name, labels):
        for line in self.kq.get("/metrics").text.splitlines():
            if line.startswith(name + "{") and all('%s="%s"' % kv in line for kv in labels.items()):
                return float(line.rsplit(" ", 1)[1])
        return None

    def test_forged_pods_leave_no_state(self):
        wait_until(lambda: self.kq.queues()["quotaTree"]["clusterTotal"].get("cpu") == 8000,
                   15, 0.05, "cluster total")
        # forged pods of team-b asking for far more than its min: denied, and forgotten
        for i in range(20):
            fake = pod_manifest("ghost-%d" % i, ns="victims", user="mallory", cpu="6",
                                queue="root.team-b")
            fake["metadata"]["uid"] = "forged-uid-%d" % i
            res = self.sched.filter(fake, ["node-1"])
            self.assertIsNotNone(res)
        # a real pod: known to the API server, so it does enter its group's request
        self.create("real", user="alice", cpu="1", queue="root.team-a")
        self.assert_bound("real")
        wait_until(lambda: (group(self.kq.queues()["quotaTree"], "root.team-a") or {})
                   .get("allocatedResource", {}).get("cpu") == 1000, 10, 0.05, "real pod counted")
        tree = self.kq.queues()["quotaTree"]
        self.assertFalse((group(tree, "root.team-b") or {}).get("requestResource", {}).get("cpu"),
                         "forged filters raised team-b's request: %s" % group(tree, "root.team-b"))
        self.assertEqual(self.metric("kubequota_pods_tracked", {"state": "pending"}) or 0, 0)
        self.assertFalse([e for e in self.sim.events() if
                          (e.get("involvedObject") or {}).get("name", "").startswith("ghost-")])
        self.assertFalse([e for e in self.sim.events("victims")])


class UnseenPodFilterTest(test_elastic.ElasticBase):
    """kube-scheduler's watch can show a pod before kubequota's does. With a quota tree the
    filter of such a pod asks the API server whether it exists (issue 20: a forged filter
    must leave nothing) only when the pod's own missing request is what denies it: that GET
    is a round trip inside kube-scheduler's serial cycle (issue 26: tens of ms on a busy
    control plane, for nearly every pod when pods are created at a steady rate). A pod its
    group already has room for is allowed without it; a pod of an empty group is confirmed
    with one GET, enters its group's request and is allowed. Koordinator counts a pod in
    its group's request from its scheduler's own informer, before the pod is scheduled
    (koordinator-sh/koordinator pkg/scheduler/plugins/elasticquota/pod_handler.go, OnPodAdd)."""

    def hits(self, fid):
        with self.sim.world.cond:
            return next(f.hits for f in self.sim.world.faults if f.id == fid)

    def request(self, name):
        return (group(self.kq.queues()["quotaTree"], name) or {}).get("requestResource", {}).get("cpu")

    def test_get_only_when_the_pods_own_request_decides(self):
        self.wait_total(8000)
        # team-a has a pod waiting (seen, not bound): 4 cpu in its group's request
        self.create("waiting", user="alice", cpu="4", queue="root.team-a")
        wait_until(lambda: self.request("root.team-a") == 4000, 10, 0.05, "team-a's request")
        # from here on kubequota's pod watch shows nothing new
        self.assertGreaterEqual(self.sim.stall_watches("pods"), 1)
        fid = self.sim.fault(method="GET", path=r"/api/v1/namespaces/default/pods/(fits|first)(\?|$)",
                             count=-1)["id"]
        # unseen, and team-a already requests room for it: allowed, no GET
        self.create("fits", user="alice", cpu="1", queue="root.team-a")
        res = self.sched.filter(self.sim.get_pod("default", "fits"), ["node-1"])
        self.assertEqual(ci_get(res, "NodeNames"), ["node-1"], res)
        self.assertEqual(self.hits(fid), 0)
        self.assertEqual(self.request("root.team-a"), 4000)
        # unseen, in team-b whose request is empty: its own request decides, so one GET
        # confirms it, it enters team-b's request and is allowed
        self.create("first", user="bob", cpu="1", queue="root.team-b")
        res = self.sched.filter(self.sim.get_pod("default", "first"), ["node-1"])
        self.assertEqual(ci_get(res, "NodeNames"), ["node-1"], res)
        self.assertEqual(self.hits(fid), 1)
        self.assertEqual(self.request("root.team-b"), 1000)


class PodNamesTest(KQTestCase):
    """Names the API server would refuse are refused before they reach a URL or a log line
    (kubernetes/apimachinery pkg/util/validation/validation.go: IsDNS1123Subdomain)."""
    CONFIG = queues_config({"name": "default"})

    def test_huge_pod_name_in_bind(self):
        before = os.path.getsize(self.kq.log_path)
        name = "a" * (10 << 20)
        r = self.kq.post("/scheduler/bind", {"PodName": name, "PodNamespace": "default",
                                             "PodUID": "u-1", "Node": "node-1"})
        self.assertEqual(r.status, 200, r.text[:200])
        err = r.json()["Error"]
        self.assertIn("PodName", err)
        self.assertLess(len(err), 1000)
        grown = os.path.getsize(self.kq.log_path) - before
        self.assertLess(grown, 64 << 10, "the log grew by %d bytes" % grown)
        self.assertEqual(self.sim.world.counters["bindings"], 0)

    def test_invalid_names_refused(self):
        cases = [("PodName", "UPPER"), ("PodName", "a/../../x"), ("PodNamespace", "a.b"),
                 ("PodNamespace", "n" * 64), ("Node", "node_1"), ("PodUID", "u" * 200)]
        for field, value in cases:
            body = {"PodName": "p", "PodNamespace": "default", "PodUID": "u-1", "Node": "node-1"}
            body[field] = value
            res = self.kq.post("/scheduler/bind", body).json()
            self.assertIn(field, res.get("Error", ""), "%s=%r: %s" % (field, value[:20], res))
        fake = pod_manifest("p" * 300)
        fake["metadata"]["uid"] = "u-2"
        res = self.sched.filter(fake, ["node-1"])
        self.assertIn("name", res.get("Error") or "", res)


DEV_LIMITS = [{"limit": "everyone in dev", "users": ["*"], "maxresources": {"cpu": "1"}}]


def tracked(kq, state):
    for line in kq.get("/metrics").text.splitlines():
        if line.startswith('kubequota_pods_tracked{state="%s"}' % state):
            return int(float(line.rsplit(" ", 1)[1]))
    return None


class AmbiguousBindTest(KQTestCase):
    """A binding POST whose answer is lost (it committed; the client saw a dropped
    connection, as after a client-side timeout) and a retried bind answered 409 "already
    assigned" must not release the pod: kubequota asks the API server first. The pod watch
    is stalled so that only the bind path can count the pod."""
    CONFIG = queues_config({"name": "default"}, {"name": "dev", "limits": DEV_LIMITS})

    def bob_cpu(self):
        return user_usage(self.kq, "bob", "root.dev").get("cpu", 0)

    def test_lost_answer_and_conflict_keep_the_count(self):
        self.create("p1", user="bob", queue="root.dev", cpu="1")
        wait_until(lambda: tracked(self.kq, "pending") == 1, 10, 0.05, "p1 seen by the watch")
        self.assertEqual(self.sim.stall_watches("pods"), 1)
        self.sim.fault(method="POST", path="/pods/p1/binding", lose_answer=True)
        pod = self.sim.get_pod("default", "p1")
        res = self.sched.filter(pod, ["node-1"])
        self.assertEqual(res["NodeNames"], ["node-1"])
        ok, why = self.sched.bind(pod, "node-1")
        self.assertEqual(self.sim.get_pod("default", "p1")["spec"].get("nodeName"), "node-1")
        self.assertTrue(ok, "the pod is bound; the bind should say so: %s" % why)
        self.assertEqual(self.bob_cpu(), 1000, "p1 was released although it is bound")
        # kube-scheduler retries (it did not see the answer): 409 already assigned
        ok, why = self.sched.bind(pod, "node-1")
        self.assertGreaterEqual(self.sim.world.counters["binding_conflicts"], 1)
        self.assertEqual(self.bob_cpu(), 1000, "a 409 released p1: %s" % why)
        # so a second 1-cpu pod does not fit bob's 1-cpu limit
        self.create("p2", user="bob", queue="root.dev", cpu="1")
        self.assert_denied("p2", "default", "bob")


class StalledWatchTest(KQTestCase):
    """A pod watch that goes silent (no events, no bookmarks, connection open) is noticed
    after the progress deadline and the informer relists, so a deletion it missed is
    released. The simulator sends a bookmark every second; the deadline here is 2 s."""
    CONFIG = queues_config({"name": "default"}, {"name": "dev", "limits": DEV_LIMITS})
    EXTRA_ARGS = ("--watch-progress-deadline", "2s")

    def test_stalled_watch_relists(self):
        self.create("p1", user="bob", queue="root.dev", cpu="1")
        self.assert_bound("p1")
        self.wait_usage()
        self.assertEqual(user_usage(self.kq, "bob", "root.dev").get("cpu"), 1000)
        self.assertEqual(self.sim.stall_watches("pods"), 1)
        self.sim.delete_pod("default", "p1")
        self.wait_usage(timeout=20)
        self.assertEqual(user_usage(self.kq, "bob", "root.dev").get("cpu", 0), 0)
        self.assertIn("watch stalled", self.kq.logs())
        # and the fresh watch works: a new pod is seen and counted
        self.create("p2", user="bob", queue="root.dev", cpu="1")
        self.assert_bound("p2")
        self.wait_usage()


def admission_review(obj, username, groups, operation="CREATE", old=None, kind="Pod", group="",
                     resource="pods", sub=None):
    req = {"uid": "7a1c-0001", "kind": {"group": group, "version": "v1", "kind": kind},
           "resource": {"group": group, "version": "v1", "resource": resource},
           "namespace": obj["metadata"].get("namespace", "default"), "operation": operation,
           "userInfo": {"username": username, "groups": list(groups)},
           "object": obj, "oldObject": old, "dryRun": False}
    if sub:
        req["subResource"] = sub
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": req}


def mutate(kq, obj, username, groups=("system:authenticated",), dry_run=False, **kw):
    """(allowed, patched object, response) as the API server would see them."""
    from test_identity import apply_patch
    review = admission_review(obj, username, groups, **kw)
    review["request"]["dryRun"] = dry_run
    r = kq.post("/admission/mutate", review)
    if r.status != 200:
        raise AssertionError("mutate: HTTP %d %s" % (r.status, r.text[:300]))
    resp = r.json()["response"]
    if not resp["allowed"]:
        return False, obj, resp
    if "patch" in resp:
        obj = apply_patch(obj, json.loads(base64.b64decode(resp["patch"])))
    return True, obj, resp


RC_CONTROLLER = "system:serviceaccount:kube-system:replication-controller"


class TenantEscapeTest(KQTestCase):
    """Ways around a limit through the webhooks, called as the API server calls them."""
    CONFIG = queues_config({"name": "default"}, {"name": "dev", "limits": DEV_LIMITS},
                           {"name": "other"})

    def test_replication_controller_pods_charge_their_creator(self):
        # alice writes bob's identity into a ReplicationController's template
        tmpl = pod_manifest("ignored", user="bob", cpu="1", queue="root.other")
        rc = {"apiVersion": "v1", "kind": "ReplicationController",
              "metadata": {"name": "rc1", "namespace": "default"},
              "spec": {"replicas": 1, "selector": {"app": "rc1"},
                       "template": {"metadata": dict(tmpl["metadata"], labels={"app": "rc1"}),
                                    "spec": tmpl["spec"]}}}
        del rc["spec"]["template"]["metadata"]["name"]
        ok, rc, _ = mutate(self.kq, rc, "alice", kind="ReplicationController",
                           resource="replicationcontrollers")
        self.assertTrue(ok)
        ident = json.loads(rc["spec"]["template"]["metadata"]["annotations"]["kubequota.io/user-info"])
        self.assertEqual(ident["user"], "alice", "the RC template kept bob's identity")
        # the (trusted) controller makes a pod from the template; kubequota keeps its identity
        pod = {"apiVersion": "v1", "kind": "Pod",
               "metadata": dict(copy.deepcopy(rc["spec"]["template"]["metadata"]), name="rc1-x",
                                namespace="default"),
               "spec": copy.deepcopy(rc["spec"]["template"]["spec"])}
        ok, pod, _ = mutate(self.kq, pod, RC_CONTROLLER, ("system:serviceaccounts:kube-system",))
        self.assertTrue(ok)
        self.sim.create_pod(pod)
        self.assert_bound("rc1-x")
        self.wait_usage()
        self.assertEqual(user_usage(self.kq, "alice", "root").get("cpu"), 1000)
        self.assertEqual(user_usage(self.kq, "bob", "root"), {})

    def test_placement_labels_are_immutable_and_restart_agrees(self):
        p = self.create("p1", user="bob", queue="root.dev", cpu="1")
        self.assert_bound("p1")
        self.wait_usage()
        for key, value in (("kubequota.io/queue", "root.other"), ("kubequota.io/app-id", "x"),
                           ("quota.scheduling.koordinator.sh/name", "team-b")):
            cur = self.sim.get_pod("default", "p1")
            new = copy.deepcopy(cur)
            new["metadata"]["labels"][key] = value
            ok, _, resp = mutate(self.kq, new, "bob", operation="UPDATE", old=cur)
            if ok:  # the API server would store it
                self.sim.world.update("pods", "default", "p1", new)
            self.assertFalse(ok, "relabelling %s was allowed" % key)
            self.assertEqual(resp["status"]["code"], 403)
            self.assertIn(key, resp["status"]["message"])
        # a label that places nothing may change
        cur = self.sim.get_pod("default", "p1")
        new = copy.deepcopy(cur)
        new["metadata"]["labels"]["team"] = "blue"
        self.assertTrue(mutate(self.kq, new, "bob", operation="UPDATE", old=cur)[0])
        # the live process and a restarted one count p1 in the same queue
        self.assertEqual(user_usage(self.kq, "bob", "root.dev").get("cpu"), 1000)
        self.kq.restart()
        self.wait_usage()
        self.assertEqual(user_usage(self.kq, "bob", "root.dev").get("cpu"), 1000)
        self.assertEqual(user_usage(self.kq, "bob", "root.other"), {})
        self.assertTrue(p)


class AdmissionLimitsTest(KQTestCase):
    """A managed pod that skips the scheduler (spec.nodeName at creation) and an in-place
    resize are checked against limits at admission, as ResourceQuota checks at creation
    (kubernetes plugin/pkg/admission/resourcequota). Limit: 1 cpu per user in root.dev."""
    CONFIG = queues_config({"name": "default"}, {"name": "dev", "limits": DEV_LIMITS})

    def test_pod_created_on_a_node_is_checked(self):
        pods = []
        for i in range(3):
            p = pod_manifest("direct-%d" % i, queue="root.dev", cpu="500m", node="node-1")
            ok, p, resp = mutate(self.kq, p, "carol")
            if not ok:
                self.assertEqual(resp["status"]["code"], 403)
                self.assertIn("carol", resp["status"]["message"])
                break
            self.sim.create_pod(p)
            pods.append(p)
            self.wait_usage()
        self.assertEqual(len(pods), 2, "carol ran %d x 500m against a 1-cpu limit" % len(pods))
        self.assertEqual(user_usage(self.kq, "carol", "root.dev").get("cpu"), 1000)
        # a trusted controller (the DaemonSet controller) is not stopped
        p = pod_manifest("ds-pod", queue="root.dev", cpu="500m", node="node-2")
        ok, _, _ = mutate(self.kq, p, "system:serviceaccount:kube-system:daemon-set-controller",
                          ("system:serviceaccounts:kube-system",))
        self.assertTrue(ok)

    def test_resize_is_checked(self):
        self.create("r1", user="dave", queue="root.dev", cpu="500m")
        self.assert_bound("r1")
        self.wait_usage()

        def resize(cpu):
            cur = self.sim.get_pod("default", "r1")
            new = copy.deepcopy(cur)
            res = new["spec"]["containers"][0]["resources"]
            res["requests"]["cpu"] = res["limits"]["cpu"] = cpu
            ok, new, resp = mutate(self.kq, new, "dave", operation="UPDATE", old=cur, sub="resize")
            if ok:  # the API server stores the resize
                self.sim.world.update("pods", "default", "r1", new)
            return ok, resp
        ok, resp = resize("16")
        self.assertFalse(ok, "a 500m pod resized to 16 cpu against a 1-cpu limit was allowed")
        self.assertEqual(resp["status"]["code"], 403)
        self.assertIn("resiz", resp["status"]["message"])
        ok, _ = resize("1")  # within the limit
        self.assertTrue(ok)
        self.wait_usage()
        self.assertEqual(user_usage(self.kq, "dave", "root.dev").get("cpu"), 1000)


    def test_dry_run_resize_holds_nothing(self):
        """kubectl --dry-run=server on pods/resize: checked, nothing stored, so nothing held
        (the chart's identity webhook says sideEffects: NoneOnDryRun). A real resize the
        API server then fails to store holds its growth (the resize reservation)."""
        self.create("d1", user="erin", queue="root.dev", cpu="500m")
        self.assert_bound("d1")
        self.wait_usage()
        cur = self.sim.get_pod("default", "d1")

        def resized(cpu):
            new = copy.deepcopy(cur)
            res = new["spec"]["containers"][0]["resources"]
            res["requests"]["cpu"] = res["limits"]["cpu"] = cpu
            return new
        ok, _, resp = mutate(self.kq, resized("16"), "erin", operation="UPDATE", old=cur, sub="resize",
                             dry_run=True)
        self.assertFalse(ok, "a dry run of a resize over the limit was allowed")
        self.assertEqual(resp["status"]["code"], 403)
        ok, _, _ = mutate(self.kq, resized("1"), "erin", operation="UPDATE", old=cur, sub="resize", dry_run=True)
        self.assertTrue(ok, "a dry run of a resize within the limit was refused")
        # the dry run stored nothing and held nothing: erin's other 500m fits beside d1
        self.create("d2", user="erin", queue="root.dev", cpu="500m")
        self.assert_bound("d2")
        self.wait_usage()
        self.assertEqual(user_usage(self.kq, "erin", "root.dev").get("cpu"), 1000)
        self.sim.delete_pod("default", "d2")
        self.wait_usage()
        # a real resize, never stored (another webhook refused it): its growth is held
        ok, _, _ = mutate(self.kq, resized("1"), "erin", operation="UPDATE", old=cur, sub="resize")
        self.assertTrue(ok)
        self.create("d3", user="erin", queue="root.dev", cpu="500m")
        self.assert_denied("d3")
        self.assertIn("dry_run=true", self.kq.logs())


class MetricsAndTokensTest(KQTestCase):
    """/metrics stays open for its counters, but who uses what only for callers the usage
    view lets in; deleting the token file revokes its token."""
    CONFIG = queues_config({"name": "default"}, {"name": "dev", "limits": DEV_LIMITS})

    def test_metrics_hide_identities_without_auth(self):
        self.create("m1", user="zelda", groups=["secret-team"], queue="root.dev", cpu="1")
        self.assert_bound("m1")
        self.wait_usage()
        anon = HttpClient(self.kq.url, ca=certs()["ca"])
        text = anon.get("/metrics").text
        self.assertIn("kubequota_decisions_total", text)
        self.assertIn("kubequota_queue_resource_used", text)
        self.assertNotIn("zelda", text)
        self.assertNotIn("secret-team", text)
        self.assertNotIn("kubequota_user_resource_used{", text)
        text = self.kq.get("/metrics").text  # with the usage view's token
        self.assertIn('kubequota_user_resource_used{user="zelda"', text)

    def test_deleting_the_token_file_revokes(self):
        self.assertEqual(self.kq.get("/ws/v1/partition/default/usage/users").status, 200)
        os.unlink(self.kq.rest_token_path)
        r = self.kq.get("/ws/v1/partition/default/usage/users")
        self.assertEqual(r.status, 401, r.text)
        self.assertIn("rest_token_revoked", self.kq.logs())
        # a new file is read again
        with open(self.kq.rest_token_path, "w") as f:
            f.write(self.kq.rest_token + "\n")
        wait_until(lambda: self.kq.get("/ws/v1/partition/default/usage/users").status == 200, 5, 0.1,
                   "the recreated token file to be accepted")


class TokenReviewFloodTest(KQTestCase):
    """--rest-auth=kubernetes: random bearer tokens do not become one TokenReview each
    without bound (20 at once, then 10 per second), a refused token is cached, and
    callers with a known-good token keep working."""
    CONFIG = queues_config({"name": "default"})
    EXTRA_ARGS = ("--rest-auth", "kubernetes")

    def test_random_tokens_are_rate_limited(self):
        self.sim.sim.review_tokens = {"good-token": {"username": "viewer"}}
        self.sim.sim.review_allowed = {"viewer"}
        good = HttpClient(self.kq.url, ca=certs()["ca"], token="good-token")
        self.assertEqual(good.get("/ws/v1/partition/default/usage/users").status, 200)
        counters = self.sim.world.counters
        before = counters.get("tokenreviews", 0)
        start = time.monotonic()
        statuses = []
        for i in range(60):
            c = HttpClient(self.kq.url, ca=certs()["ca"], token="random-%d-%s" % (i, os.urandom(4).hex()))
            statuses.append(c.get("/ws/v1/partition/default/usage/users").status)
        elapsed = time.monotonic() - start
        reviews = counters.get("tokenreviews", 0) - before
        self.assertLessEqual(reviews, 20 + 10 * elapsed + 1,
                             "%d reviews for 60 random tokens in %.1fs" % (reviews, elapsed))
        self.assertTrue(set(statuses) <= {401, 429}, statuses)
        # the cached good token still works during the flood
        self.assertEqual(good.get("/ws/v1/partition/default/usage/users").status, 200)
        # one refused token asked five times is reviewed once (negative cache)
        wait_until(lambda: HttpClient(self.kq.url, ca=certs()["ca"], token="bad-once")
                   .get("/ws/v1/partition/default/usage/users").status == 401, 5, 0.2, "a review slot")
        n = counters.get("tokenreviews", 0)
        bad = HttpClient(self.kq.url, ca=certs()["ca"], token="bad-once")
        for _ in range(5):
            self.assertEqual(bad.get("/ws/v1/partition/default/usage/users").status, 401)
        self.assertEqual(counters.get("tokenreviews", 0), n)


def still_open(sock):
    """True when the server has not closed sock (nothing to read yet, no EOF)."""
    sock.setblocking(False)
    try:
        return sock.recv(1, socket.MSG_PEEK) != b""
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        sock.setblocking(True)


class SchedulerListenerTest(KQTestCase):
    """--scheduler-listen: the scheduler's own listener with its own workers (TLS with the
    main port's certificate) keeps answering while every worker of the main port is held
    by idle connections that never start TLS (bounded: 6 connections, held for at most a
    few seconds); the main port no longer serves the scheduler verbs."""
    CONFIG = queues_config({"name": "default"})
    START = False

    def start_with(self, *extra):
        sport = free_port()
        self.kq = Kubequota(self.sim, self.CONFIG, extra_args=("--scheduler-listen", "127.0.0.1:%d" % sport) + extra)
        if "--client-ca" in extra:  # every connection then needs a certificate
            c = certs()
            self.kq.http = HttpClient(self.kq.url, ca=c["ca"], cert=c["client"], key=c["client_key"],
                                      token=self.kq.rest_token)
        self.kq.start()
        return sport

    def filter_body(self, name):
        self.create(name, cpu="100m")
        pod = self.sim.get_pod("default", name)
        return {"Pod": SchedulerDriver.cached(pod), "Nodes": None, "NodeNames": ["node-1"]}

    def test_filter_answers_while_main_port_is_saturated(self):
        sport = self.start_with("--threads", "2", "--max-client-connections", "8")
        sched = HttpClient("https://localhost:%d" % sport, ca=certs()["ca"], timeout=30)
        self.assertEqual(sched.get("/healthz").status, 200)
        self.assertEqual(sched.get("/ws/v1/partition/default/usage/users").status, 404)
        self.assertEqual(sched.post("/admission/mutate", {}).status, 404)
        # plain HTTP is not spoken on the TLS scheduler port
        with self.assertRaises((OSError, http.client.HTTPException)):
            HttpClient("http://127.0.0.1:%d" % sport, timeout=10).get("/healthz")
        body = self.filter_body("p1")
        idle = [socket.create_connection(("127.0.0.1", self.kq.port)) for _ in range(6)]
        try:
            r = sched.post("/scheduler/filter", body)
            self.assertEqual(r.status, 200, r.text)
            self.assertEqual(r.json()["NodeNames"], ["node-1"])
            # the answer came while the main port's workers were still held
            self.assertTrue(all(still_open(s) for s in idle[:2]),
                            "the idle connections were closed before the filter was answered")
        finally:
            for s in idle:
                s.close()
        # the verbs are not served on the main port any more, even to loopback callers
        main = HttpClient(self.kq.url, ca=certs()["ca"], timeout=30)
        r = main.post("/scheduler/filter", body)
        self.assertEqual(r.status, 404, r.text)
        self.assertIn("--scheduler-listen", r.text)
        self.assertEqual(main.get("/healthz").status, 200)

    def test_client_certificate_rule_applies_to_the_scheduler_listener(self):
        sport = self.start_with("--client-ca", certs()["ca"])
        c = certs()
        with_cert = HttpClient("https://localhost:%d" % sport, ca=c["ca"], cert=c["client"], key=c["client_key"],
                               timeout=30)
        r = with_cert.post("/scheduler/filter", self.filter_body("p2"))
        self.assertEqual(r.status, 200, r.text)
        bare = HttpClient("https://localhost:%d" % sport, ca=c["ca"], timeout=30)
        with self.assertRaises((ssl.SSLError, OSError, http.client.HTTPException)):
            bare.get("/healthz")

    def test_plain_http_scheduler_listen_must_be_loopback(self):
        self.kq = Kubequota(self.sim, self.CONFIG, extra_args=(
            "--insecure-plain-http", "--scheduler-listen", "0.0.0.0:%d" % free_port()))
        argv = self.kq.argv()
        for flag in ("--tls-cert", "--tls-key"):
            i = argv.index(flag)
            del argv[i:i + 2]
        r = subprocess.run(argv, capture_output=True, text=True, timeout=20)
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertIn("loopback", r.stdout + r.stderr)

    def test_scheduler_plain_http_alone(self):
        """--scheduler-plain-http (the chart's default): the scheduler's loopback port speaks
        plain HTTP, every other port keeps TLS, and each connection is counted (no handshake)."""
        sport = self.start_with("--scheduler-plain-http")
        sched = HttpClient("http://127.0.0.1:%d" % sport, timeout=30)
        self.assertEqual(sched.get("/healthz").status, 200)
        body = self.filter_body("p3")
        for _ in range(3):  # one keep-alive connection
            r = sched.post("/scheduler/filter", body)
            self.assertEqual(r.status, 200, r.text)
            self.assertEqual(r.json()["NodeNames"], ["node-1"])
        self.assertEqual(sched.get("/ws/v1/partition/default/usage/users").status, 404)
        # the main port is still TLS only
        with self.assertRaises((OSError, http.client.HTTPException)):
            HttpClient("http://127.0.0.1:%d" % self.kq.port, timeout=10).get("/healthz")
        main = HttpClient(self.kq.url, ca=certs()["ca"], token=self.kq.rest_token, timeout=30)
        text = main.get("/metrics").text
        self.assertIn('kubequota_tls_connections_total{listener="scheduler"} 0', text)
        n = int(text.split('kubequota_connections_total{listener="scheduler"} ', 1)[1].split()[0])
        self.assertGreaterEqual(n, 4)  # the probe's and the filters' (the test client may reconnect)

    def test_scheduler_plain_http_must_be_loopback(self):
        for extra in (("--scheduler-plain-http", "--scheduler-listen", "0.0.0.0:%d" % free_port()),
                      ("--scheduler-plain-http",)):
            self.kq = Kubequota(self.sim, self.CONFIG, extra_args=extra)
            r = subprocess.run(self.kq.argv(), capture_output=True, text=True, timeout=20)
            self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
            self.assertIn("loopback", r.stdout + r.stderr)


def tls_still_open(s):
    """still_open for a TLS socket: looks at the raw bytes (a session ticket counts as open)."""
    raw = socket.socket(fileno=os.dup(s.fileno()))
    try:
        return still_open(raw)
    finally:
        raw.close()


HOSTILE_SRC = "127.0.0.2"  # another client than the tests' 127.0.0.1 (the whole 127/8 is loopback)


def hostile_connect(port):
    return socket.create_connection(("127.0.0.1", port), timeout=30, source_address=(HOSTILE_SRC, 0))


class ClientConnectionLimitTest(KQTestCase):
    """--max-client-connections: one client address holds at most N connections of the main
    TLS port, counted from the start of the TLS handshake; more are closed at once, and the
    ones it holds are closed at the handshake deadline (civetweb's request_timeout_ms, 10 s,
    which its SSL_accept loop also uses). Hostile clients: 8 connections from 127.0.0.2,
    closed by the test at its end; the legitimate client is 127.0.0.1."""
    CONFIG = queues_config({"name": "default"})
    EXTRA_ARGS = ("--threads", "4", "--max-client-connections", "2")
    HANDSHAKE_DEADLINE_S = 10.0  # src/serve/server.c request_timeout_ms

    def test_idle_connections_that_never_start_tls(self):
        hostile = []
        try:
            for _ in range(8):
                hostile.append(hostile_connect(self.kq.port))
                time.sleep(0.05)  # in this order through the accept queue
            # a legitimate client is answered while the two connections the hostile client
            # may hold still hold their workers (without the limit, all four workers are held
            # until the handshake deadline and the request waits behind the other four)
            r = HttpClient(self.kq.url, ca=certs()["ca"], timeout=60).get("/healthz")
            self.assertEqual(r.status, 200, r.text)
            opened = [still_open(s) for s in hostile]
            self.assertEqual(opened, [True, True] + [False] * 6,
                             "only the first two hostile connections may be held, the others closed at once")
            self.assertIn("event=client_connection_limit remote=127.0.0.2", self.kq.logs())
            # the two it holds are closed by the server at the handshake deadline
            started = time.monotonic()
            wait_until(lambda: not any(still_open(s) for s in hostile[:2]), self.HANDSHAKE_DEADLINE_S + 10, 0.2,
                       "the server to close the idle connections at the handshake deadline")
            self.assertGreater(time.monotonic() - started, 1.0, "closed by the deadline, not refused")
        finally:
            for s in hostile:
                s.close()

    def test_idle_tls_connections(self):
        ctx = ssl.create_default_context(cafile=certs()["ca"])
        held, refused = [], 0
        try:
            for _ in range(4):
                raw = hostile_connect(self.kq.port)
                try:
                    held.append(ctx.wrap_socket(raw, server_hostname="localhost"))
                except (ssl.SSLError, OSError):
                    refused += 1
                    raw.close()
            self.assertEqual((len(held), refused), (2, 2), "two idle TLS connections per client, no more")
            r = HttpClient(self.kq.url, ca=certs()["ca"], timeout=60).get("/healthz")
            self.assertEqual(r.status, 200, r.text)
            self.assertTrue(all(tls_still_open(s) for s in held), "answered while the idle TLS connections are held")
            # once one closes, the client may connect again
            held.pop().close()
            wait_until(lambda: self._tls_ok(ctx), 10, 0.1, "a new connection from the same client after one closed")
        finally:
            for s in held:
                s.close()

    def _tls_ok(self, ctx):
        raw = hostile_connect(self.kq.port)
        try:
            s = ctx.wrap_socket(raw, server_hostname="localhost")
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            ok = s.recv(64).startswith(b"HTTP/1.1 200")
            s.close()
            return ok
        except (ssl.SSLError, OSError):
            raw.close()
            return False


class BodyLimitsTest(KQTestCase):
    """A webhook body above the admission cap is refused by its Content-Length before a
    byte is read; a body trickled in (one byte every 2 s, each read within civetweb's
    per-read timeout) is cut off by the overall body deadline."""
    CONFIG = queues_config({"name": "default"})

    def tls(self):
        ctx = ssl.create_default_context(cafile=certs()["ca"])
        raw = socket.create_connection(("127.0.0.1", self.kq.port), timeout=30)
        return ctx.wrap_socket(raw, server_hostname="localhost")

    @staticmethod
    def answer(s):
        data = b""
        try:
            while b"\r\n\r\n" not in data:
                chunk = s.recv(4096)
                if not chunk:
                    break
                data += chunk
        except (ssl.SSLError, OSError):
            pass
        return data

    def test_admission_body_refused_by_length(self):
        s = self.tls()
        s.sendall(b"POST /admission/mutate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                  b"Content-Length: %d\r\n\r\n" % (20 << 20))
        data = self.answer(s)
        s.close()
        self.assertTrue(data.startswith(b"HTTP/1.1 413"), data[:200])

    def test_trickled_body_hits_the_deadline(self):
        s = self.tls()
        s.sendall(b"POST /admission/mutate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                  b"Content-Length: 1000\r\n\r\n{")
        # one thread: an SSL socket must not be read and written from two threads at once
        data = b""
        for _ in range(14):  # at most 28 s of trickling, far more than the deadline
            ready, _, _ = select.select([s], [], [], 2)
            if ready:
                data = self.answer(s)
                break
            try:
                s.sendall(b" ")
            except (ssl.SSLError, OSError):
                data = self.answer(s)
                break
        s.close()
        result = {"data": data}
        self.assertTrue(result.get("data", b"").startswith(b"HTTP/1.1 408"), result.get("data", b"")[:200])


class ConfigFloodTest(KQTestCase):
    """A queues.yaml with 40,000 unknown keys sent to the validator: one answer listing the
    first 200 errors and how many more there are (before: every error, found by a search
    per key that made validation quadratic)."""
    CONFIG = queues_config({"name": "default"})

    def test_many_unknown_keys(self):
        lines = ["partitions:", "  - name: default", "    queues:", "      - name: root",
                 '        submitacl: "*"'] + ["        unknown%d: x" % i for i in range(40000)]
        r = self.kq.http.request("POST", "/ws/v1/validate-conf", raw=("\n".join(lines) + "\n").encode(),
                                 timeout=60)
        self.assertEqual(r.status, 200, r.text[:300])
        res = r.json()
        self.assertFalse(res["allowed"])
        self.assertIn("unknown0'", res["reason"])
        self.assertIn("39800 more errors not shown", res["reason"])
        self.assertLess(len(r.body), 200 << 10)
        self.assertTrue(self.kq.alive())
