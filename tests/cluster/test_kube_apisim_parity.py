"""The simulator answers like the real API server (issue 25).

Every check below is written once, as a function of a small client (Target: method, path,
body, content type -> status, JSON), and runs twice: class ApisimParityRealApi against the
real kube-apiserver of this run (cluster.Cluster) and class ApisimParitySimulator against
tests/e2e/apisim.py (kqtest.Sim, in this process over HTTPS; it needs no cluster and runs
alone with `cd tests/cluster && python3 -m unittest test_kube_apisim_parity.ApisimParitySimulator`).
The real server is right: where the two differ, apisim.py is fixed, unless the simulator
deliberately models something else (listed in apisim.py's header; the check then says so
and compares only what both must share). check_gone comes last: it restarts the real API
server.

Both targets are prepared alike: the token users of cluster.USERS are known to TokenReview,
node kwok-node-0 exists, and each check works in a namespace of its own. Pods use a
scheduler name nobody serves, so nothing but the check binds them. The few set-ups that
cannot be the same request on both are methods of Target: a namespace (the simulator has
no namespace objects), "expire the history" (real: compact etcd and restart kube-apiserver,
whose new watch cache starts at etcd's current revision; simulator: /_sim/compact) and a
PodDisruptionBudget that refuses evictions (the simulator has no PDB objects; it refuses the
named pod's evictions with the same answer).
"""

import http.client
import json
import os
import ssl
import sys
import time
import unittest
import urllib.parse
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.append(os.path.join(os.path.dirname(HERE), "e2e"))

import cluster as clus  # noqa: E402
import kubetest  # noqa: E402

NODE = "kwok-node-0"
NOBODY = "parity-nobody"  # a scheduler name nobody serves
LEASES = "/apis/coordination.k8s.io/v1/namespaces/%s/leases"
TOKENREVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"


# ---------------------------------------------------------------------------------------
# the client abstraction
# ---------------------------------------------------------------------------------------

class Target:
    """One API server: host, port, CA and the admin's bearer token."""

    name = "?"

    def __init__(self, port, ca, token):
        self.port, self.token = port, token
        self.ctx = ssl.create_default_context(cafile=ca)
        self._ns = 0

    def conn(self, timeout=30):
        return http.client.HTTPSConnection("127.0.0.1", self.port, context=self.ctx, timeout=timeout)

    def req(self, method, path, body=None, ctype="application/json", token=None):
        """(status, decoded JSON body) of one request as the admin (or with another token)."""
        c = self.conn()
        try:
            hdr = {"Authorization": "Bearer " + (token or self.token), "Accept": "application/json"}
            data = None
            if body is not None:
                data = body if isinstance(body, (bytes, str)) else json.dumps(body)
                hdr["Content-Type"] = ctype
            c.request(method, path, body=data, headers=hdr)
            r = c.getresponse()
            raw = r.read()
            return r.status, (json.loads(raw) if raw else None)
        finally:
            c.close()

    def watch(self, path, seconds):
        """The events of a watch that the server ends after `seconds` (timeoutSeconds)."""
        sep = "&" if "?" in path else "?"
        c = self.conn(seconds + 20)
        try:
            c.request("GET", "%s%swatch=true&timeoutSeconds=%d" % (path, sep, seconds),
                      headers={"Authorization": "Bearer " + self.token, "Accept": "application/json"})
            r = c.getresponse()
            if r.status != 200:
                return r.status, json.loads(r.read() or b"null")
            out = []
            while True:
                line = r.readline()
                if not line:
                    break
                if line.strip():
                    out.append(json.loads(line))
            return 200, out
        finally:
            c.close()

    # set-ups that differ by target
    def namespace(self):
        raise NotImplementedError

    def expire_history(self):
        raise NotImplementedError

    def refuse_evictions(self, ns, pod, pdb):
        raise NotImplementedError

    def close(self):
        pass


class RealTarget(Target):
    name = "real"

    def __init__(self, c):
        super().__init__(c.port, c.certs["ca"], clus.USERS["admin"][0])
        self.c = c
        self.namespaces = []

    def namespace(self):
        self._ns += 1
        ns = "parity-%d-%d" % (os.getpid() % 1000, self._ns)
        self.c.namespace(ns)
        self.namespaces.append(ns)
        return ns

    def expire_history(self):
        # compact etcd at its current revision, then restart kube-apiserver: its new watch
        # cache starts there, so an older resourceVersion or continue token is gone
        rv = int(self.req("GET", "/api/v1/namespaces/default/pods?limit=1")[1]["metadata"]["resourceVersion"])
        data = json.dumps({"revision": str(rv), "physical": True}).encode()
        urllib.request.urlopen(urllib.request.Request(
            "http://127.0.0.1:%d/v3/kv/compaction" % self.c.etcd_port, data=data,
            headers={"Content-Type": "application/json"}), timeout=10).read()
        self.c.restart_apiserver()

    def refuse_evictions(self, ns, pod, pdb):
        st, body = self.req("POST", "/apis/policy/v1/namespaces/%s/poddisruptionbudgets" % ns,
                            {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                             "metadata": {"name": pdb},
                             "spec": {"minAvailable": 1, "selector": {"matchLabels": {"pdb": pdb}}}})
        assert st == 201, body
        st, body = self.req("PATCH", "/api/v1/namespaces/%s/pods/%s" % (ns, pod),
                            {"metadata": {"labels": {"pdb": pdb}}}, "application/merge-patch+json")
        assert st == 200, body

        # the disruption controller must have counted the pod healthy (kwok runs it)
        def counted():
            s = self.req("GET", "/apis/policy/v1/namespaces/%s/poddisruptionbudgets/%s" % (ns, pdb))[1]
            return s.get("status", {}).get("currentHealthy") == 1 and \
                s["status"].get("observedGeneration") == s["metadata"].get("generation")
        clus.wait_until(counted, 60, 0.2, "PDB %s counts %s healthy" % (pdb, pod))

    def close(self):
        for ns in self.namespaces:
            self.req("DELETE", "/api/v1/namespaces/" + ns)


class SimTarget(Target):
    name = "sim"

    def __init__(self):
        import kqtest
        # bookmarks about every minute, as kube-apiserver sends them
        self.s = kqtest.Sim(token=clus.USERS["admin"][0], nodes=(NODE,), bookmark_interval=60)
        self.s.sim.review_tokens = {tok: {"username": user, "groups": list(groups)}
                                    for tok, user, groups in clus.USERS.values()}
        super().__init__(self.s.sim.port, kqtest.certs()["ca"], clus.USERS["admin"][0])

    def namespace(self):
        self._ns += 1
        return "parity-%d" % self._ns

    def expire_history(self):
        self.s.compact()

    def refuse_evictions(self, ns, pod, pdb):
        with self.s.world.cond:
            self.s.world.eviction_refused.add("%s/%s" % (ns, pod))
            self.s.world.eviction_pdb = pdb

    def close(self):
        self.s.stop()


# ---------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------

def pod_body(name, labels=None, gates=None, node=None, scheduler=NOBODY, resources=None,
             init_resources=None):
    c = {"name": "c", "image": "registry.invalid/pause:1"}
    if resources is not None:
        c["resources"] = resources
    spec = {"schedulerName": scheduler, "terminationGracePeriodSeconds": 0,
            "automountServiceAccountToken": False, "restartPolicy": "Never", "containers": [c]}
    if init_resources is not None:
        spec["initContainers"] = [{"name": "i", "image": "registry.invalid/pause:1",
                                   "resources": init_resources}]
    if gates:
        spec["schedulingGates"] = [{"name": g} for g in gates]
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels or {}},
            "spec": spec}


def pods(ns, name=""):
    return "/api/v1/namespaces/%s/pods%s" % (ns, "/" + name if name else "")


def create_pod(t, a, ns, name, **kw):
    st, body = a.req("POST", pods(ns), pod_body(name, **kw))
    t.assertEqual(st, 201, body)
    return body


def binding(name, node=NODE):
    return {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node}}


def failure(code, reason, message, details=None):
    s = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
         "message": message, "reason": reason}
    if details is not None:
        s["details"] = details
    s["code"] = code
    return s


def names(lst):
    return sorted(i["metadata"]["name"] for i in lst["items"])


def rv(obj):
    return int(obj["metadata"]["resourceVersion"])


# ---------------------------------------------------------------------------------------
# the checks: each a function of (TestCase for the assertions, Target)
# ---------------------------------------------------------------------------------------

def check_unauthorized(t, a):
    """A token the server does not know. (Without a token the real server goes on as
    system:anonymous and RBAC answers 403; the simulator has no RBAC and answers 401.)"""
    st, got = a.req("GET", "/api/v1/namespaces/default/pods", token="no-such-token")
    t.assertEqual((st, got), (401, failure(401, "Unauthorized", "Unauthorized")))


def check_not_found(t, a):
    ns = a.namespace()
    want = failure(404, "NotFound", 'pods "nope" not found', {"name": "nope", "kind": "pods"})
    for method, path, body, ctype in (
            ("GET", pods(ns, "nope"), None, None),
            ("DELETE", pods(ns, "nope"), None, None),
            ("PATCH", pods(ns, "nope"), {"metadata": {"labels": {"a": "b"}}}, "application/merge-patch+json"),
            ("POST", pods(ns, "nope") + "/binding", binding("nope"), "application/json"),
            ("POST", pods(ns, "nope") + "/eviction", {"apiVersion": "policy/v1", "kind": "Eviction",
                                                      "metadata": {"name": "nope", "namespace": ns}},
             "application/json")):
        st, got = a.req(method, path, body, ctype or "application/json")
        t.assertEqual((st, got), (404, want), "%s %s" % (method, path))
    # a resource of an API group names the group
    st, got = a.req("GET", LEASES % ns + "/nope")
    t.assertEqual((st, got), (404, failure(404, "NotFound", 'leases.coordination.k8s.io "nope" not found',
                                           {"name": "nope", "group": "coordination.k8s.io",
                                            "kind": "leases"})))


def check_already_exists(t, a):
    ns = a.namespace()
    create_pod(t, a, ns, "dup")
    st, got = a.req("POST", pods(ns), pod_body("dup"))
    t.assertEqual((st, got), (409, failure(409, "AlreadyExists", 'pods "dup" already exists',
                                           {"name": "dup", "kind": "pods"})))


def check_conflict(t, a):
    ns = a.namespace()
    p = create_pod(t, a, ns, "c1")
    st, upd = a.req("PATCH", pods(ns, "c1"), {"metadata": {"labels": {"x": "1"}}}, "application/merge-patch+json")
    t.assertEqual(st, 200, upd)
    t.assertGreater(rv(upd), rv(p))
    want = failure(409, "Conflict", 'Operation cannot be fulfilled on pods "c1": the object has been '
                   'modified; please apply your changes to the latest version and try again',
                   {"name": "c1", "kind": "pods"})
    stale = dict(p, metadata=dict(p["metadata"], labels={"y": "1"}))
    t.assertEqual(a.req("PUT", pods(ns, "c1"), stale), (409, want))
    t.assertEqual(a.req("PATCH", pods(ns, "c1"),
                        {"metadata": {"resourceVersion": p["metadata"]["resourceVersion"], "labels": {"y": "1"}}},
                        "application/merge-patch+json"), (409, want))
    # the name in the body must be the one in the URL
    st, got = a.req("PUT", pods(ns, "c1"), dict(upd, metadata=dict(upd["metadata"], name="other")))
    t.assertEqual((st, got), (400, failure(400, "BadRequest",
                                           "the name of the object (other) does not match the name on the URL (c1)")))


def check_lease_updates(t, a):
    ns = a.namespace()
    spec = {"holderIdentity": "a", "leaseDurationSeconds": 15, "leaseTransitions": 0,
            "acquireTime": "2026-01-01T00:00:00.000000Z", "renewTime": "2026-01-01T00:00:00.000000Z"}
    st, l1 = a.req("POST", LEASES % ns, {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                                         "metadata": {"name": "l1"}, "spec": spec})
    t.assertEqual(st, 201, l1)
    t.assertEqual(l1["spec"], spec)
    st, l2 = a.req("PUT", LEASES % ns + "/l1", dict(l1, spec=dict(spec, holderIdentity="b")))
    t.assertEqual(st, 200, l2)
    t.assertEqual(l2["spec"]["holderIdentity"], "b")
    t.assertGreater(rv(l2), rv(l1))
    # an update from the old resourceVersion loses (optimistic concurrency)
    st, got = a.req("PUT", LEASES % ns + "/l1", dict(l1, spec=dict(spec, holderIdentity="c")))
    t.assertEqual((st, got), (409, failure(
        409, "Conflict", 'Operation cannot be fulfilled on leases.coordination.k8s.io "l1": the object '
        'has been modified; please apply your changes to the latest version and try again',
        {"name": "l1", "group": "coordination.k8s.io", "kind": "leases"})))
    # a Lease update must name a resourceVersion (no unconditional update)
    bare = json.loads(json.dumps(l2))
    del bare["metadata"]["resourceVersion"]
    st, got = a.req("PUT", LEASES % ns + "/l1", bare)
    t.assertEqual(st, 422, got)
    t.assertEqual(got["reason"], "Invalid")
    t.assertEqual(got["message"], 'leases.coordination.k8s.io "l1" is invalid: metadata.resourceVersion: '
                  'Invalid value: 0: must be specified for an update')
    # PUT of a missing Lease creates it
    st, got = a.req("PUT", LEASES % ns + "/l2", {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                                                 "metadata": {"name": "l2"}, "spec": spec})
    t.assertEqual(st, 201, got)
    t.assertEqual((got["metadata"]["name"], got["spec"]), ("l2", spec))
    # its deletion answers a Status naming it
    st, got = a.req("DELETE", LEASES % ns + "/l2")
    t.assertEqual(st, 200, got)
    t.assertEqual(got, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                        "details": {"name": "l2", "group": "coordination.k8s.io", "kind": "leases",
                                    "uid": got["details"]["uid"]}})
    t.assertTrue(got["details"]["uid"])


def check_scheduling_gates(t, a):
    ns = a.namespace()
    create_pod(t, a, ns, "plain")
    for ctype in ("application/merge-patch+json", "application/strategic-merge-patch+json"):
        st, got = a.req("PATCH", pods(ns, "plain"), {"spec": {"schedulingGates": [{"name": "example.com/late"}]}},
                        ctype)
        msg = "Forbidden: only deletion is allowed, but found new scheduling gate 'example.com/late'"
        t.assertEqual((st, got), (422, failure(
            422, "Invalid", 'Pod "plain" is invalid: spec.schedulingGates[0].name: ' + msg,
            {"name": "plain", "kind": "Pod", "causes": [{"reason": "FieldValueForbidden", "message": msg,
                                                         "field": "spec.schedulingGates[0].name"}]})), ctype)
    g = create_pod(t, a, ns, "gated", gates=["example.com/a", "example.com/b"])
    t.assertEqual([x["name"] for x in g["spec"]["schedulingGates"]], ["example.com/a", "example.com/b"])
    st, got = a.req("POST", pods(ns, "gated") + "/binding", binding("gated"))
    t.assertEqual((st, got), (409, failure(
        409, "Conflict", 'Operation cannot be fulfilled on pods/binding "gated": pod gated has non-empty '
        '.spec.schedulingGates', {"name": "gated", "kind": "pods/binding"})))
    # removing one gate is allowed; adding one back is not
    st, got = a.req("PATCH", pods(ns, "gated"), [{"op": "remove", "path": "/spec/schedulingGates/0"}],
                    "application/json-patch+json")
    t.assertEqual(st, 200, got)
    t.assertEqual([x["name"] for x in got["spec"]["schedulingGates"]], ["example.com/b"])
    st, got = a.req("PATCH", pods(ns, "gated"), [{"op": "add", "path": "/spec/schedulingGates/-",
                                                  "value": {"name": "example.com/a"}}],
                    "application/json-patch+json")
    t.assertEqual(st, 422, got)
    t.assertIn("only deletion is allowed, but found new scheduling gate 'example.com/a'", got["message"])
    # kubequota's own ungate patch (src/control/gating.c ungate): uid and gate tested first;
    # a failed test changes nothing and is a 422
    uid = a.req("GET", pods(ns, "gated"))[1]["metadata"]["uid"]
    for wrong_uid, idx, gate in (("not-the-uid", 0, "example.com/b"), (uid, 0, "example.com/x"),
                                 (uid, 3, "example.com/b")):
        ops = [{"op": "test", "path": "/metadata/uid", "value": wrong_uid},
               {"op": "test", "path": "/spec/schedulingGates/%d/name" % idx, "value": gate},
               {"op": "remove", "path": "/spec/schedulingGates/%d" % idx}]
        st, got = a.req("PATCH", pods(ns, "gated"), ops, "application/json-patch+json")
        t.assertEqual((st, got), (422, failure(422, "Invalid", "the server rejected our request due to an error "
                                               "in our request", {})))
    t.assertEqual([x["name"] for x in a.req("GET", pods(ns, "gated"))[1]["spec"]["schedulingGates"]],
                  ["example.com/b"])
    # the last one removed: the field is gone and the pod binds
    st, got = a.req("PATCH", pods(ns, "gated"), [{"op": "test", "path": "/metadata/uid", "value": uid},
                                                 {"op": "test", "path": "/spec/schedulingGates/0/name",
                                                  "value": "example.com/b"},
                                                 {"op": "remove", "path": "/spec/schedulingGates/0"}],
                    "application/json-patch+json")
    t.assertEqual(st, 200, got)
    t.assertNotIn("schedulingGates", got["spec"])
    t.assertEqual(a.req("POST", pods(ns, "gated") + "/binding", binding("gated"))[0], 201)
    # a gated pod cannot be created bound
    st, got = a.req("POST", pods(ns), pod_body("gn", gates=["example.com/a"], node=NODE))
    t.assertEqual(st, 422, got)
    t.assertEqual(got["reason"], "Invalid")
    t.assertIn("spec.nodeName: Forbidden: cannot be set until all schedulingGates have been cleared",
               got["message"])


def check_pod_status_at_creation(t, a):
    """What the API server itself writes into a new pod's status: phase, QoS class, and for a
    gated pod the PodScheduled=False condition with reason SchedulingGated."""
    ns = a.namespace()

    def status(name, **kw):
        st = create_pod(t, a, ns, name, **kw)["status"]
        for c in st.get("conditions", []):
            t.assertRegex(c.pop("lastTransitionTime"), r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
        return st
    t.assertEqual(status("be"), {"phase": "Pending", "qosClass": "BestEffort"})
    t.assertEqual(status("bu", resources={"requests": {"cpu": "100m"}}), {"phase": "Pending", "qosClass": "Burstable"})
    t.assertEqual(status("gu", resources={"limits": {"cpu": "1", "memory": "1Gi"}}),
                  {"phase": "Pending", "qosClass": "Guaranteed"})
    # requests default to the limits
    t.assertEqual(a.req("GET", pods(ns, "gu"))[1]["spec"]["containers"][0]["resources"],
                  {"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "1", "memory": "1Gi"}})
    p = create_pod(t, a, ns, "lim", resources={"requests": {"cpu": "500m"}, "limits": {"cpu": "2", "example.com/gpu": "1"}},
                   init_resources={"limits": {"memory": "64Mi"}})
    t.assertEqual((p["spec"]["containers"][0]["resources"], p["spec"]["initContainers"][0]["resources"]),
                  ({"requests": {"cpu": "500m", "example.com/gpu": "1"}, "limits": {"cpu": "2", "example.com/gpu": "1"}},
                   {"requests": {"memory": "64Mi"}, "limits": {"memory": "64Mi"}}))
    t.assertEqual(p["status"]["qosClass"], "Burstable")
    t.assertEqual(status("gu2", resources={"requests": {"cpu": "1", "memory": "1Gi"},
                                           "limits": {"cpu": "1000m", "memory": "1024Mi"}}),
                  {"phase": "Pending", "qosClass": "Guaranteed"})
    t.assertEqual(status("bu2", resources={"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "2"}}),
                  {"phase": "Pending", "qosClass": "Burstable"})
    t.assertEqual(status("gated", gates=["example.com/a"]), {
        "phase": "Pending", "qosClass": "BestEffort",
        "conditions": [{"type": "PodScheduled", "status": "False", "lastProbeTime": None,
                        "reason": "SchedulingGated",
                        "message": "Scheduling is blocked due to non-empty scheduling gates"}]})
    # binding replaces it with PodScheduled=True
    st, got = a.req("PATCH", pods(ns, "gated"), [{"op": "remove", "path": "/spec/schedulingGates"}],
                    "application/json-patch+json")
    t.assertEqual(st, 200, got)
    t.assertEqual(a.req("POST", pods(ns, "gated") + "/binding", binding("gated"))[0], 201)
    conds = [c for c in a.req("GET", pods(ns, "gated"))[1]["status"]["conditions"] if c["type"] == "PodScheduled"]
    t.assertEqual(len(conds), 1, conds)
    t.assertEqual((conds[0]["status"], conds[0]["lastProbeTime"], conds[0].get("reason")), ("True", None, None))


def check_patch_types(t, a):
    """PATCH needs a patch media type; custom resources take no strategic merge patch."""
    ns = a.namespace()
    create_pod(t, a, ns, "p")
    st, got = a.req("PATCH", pods(ns, "p"), {"metadata": {"labels": {"a": "b"}}}, "application/json")
    t.assertEqual((st, got), (415, failure(415, "UnsupportedMediaType", "415: Unsupported Media Type", {})))
    base = "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/%s/elasticquotas" % ns
    st, eq = a.req("POST", base, {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "ElasticQuota",
                                  "metadata": {"name": "q"}, "spec": {"max": {"cpu": "1"}}})
    t.assertEqual(st, 201, eq)
    st, got = a.req("PATCH", base + "/q", {"metadata": {"labels": {"a": "b"}}}, "application/strategic-merge-patch+json")
    t.assertEqual((st, got), (415, failure(
        415, "UnsupportedMediaType", "the body of the request was in an unknown format - accepted media types "
        "include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml")))
    st, got = a.req("PATCH", base + "/q", {"metadata": {"labels": {"a": "b"}}}, "application/merge-patch+json")
    t.assertEqual((st, got["metadata"]["labels"]), (200, {"a": "b"}))


def check_binding(t, a):
    ns = a.namespace()
    create_pod(t, a, ns, "b1")
    st, got = a.req("POST", pods(ns, "b1") + "/binding", binding("b1"))
    t.assertEqual((st, got), (201, {"kind": "Status", "apiVersion": "v1", "metadata": {},
                                    "status": "Success", "code": 201}))
    st, p = a.req("GET", pods(ns, "b1"))
    t.assertEqual(p["spec"]["nodeName"], NODE)
    t.assertIn({"type": "PodScheduled", "status": "True"},
               [{"type": c["type"], "status": c["status"]} for c in p["status"].get("conditions", [])])
    st, got = a.req("POST", pods(ns, "b1") + "/binding", binding("b1", "kwok-node-9"))
    t.assertEqual((st, got), (409, failure(
        409, "Conflict", 'Operation cannot be fulfilled on pods/binding "b1": pod b1 is already assigned '
        'to node "%s"' % NODE, {"name": "b1", "kind": "pods/binding"})))
    # kubequota's Binding names the pod's uid (src/kube/kube.c kq_kube_bind): a pod
    # recreated under the same name is not bound
    b3 = create_pod(t, a, ns, "b3")
    body = dict(binding("b3"), metadata={"name": "b3", "namespace": ns, "uid": "not-the-uid"})
    st, got = a.req("POST", pods(ns, "b3") + "/binding", body)
    t.assertEqual((st, got), (409, failure(
        409, "Conflict", 'Operation cannot be fulfilled on pods "b3": StorageError: invalid object, Code: 4, '
        'Key: /registry/pods/%s/b3, ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: UID in '
        'precondition: not-the-uid, UID in object meta: %s' % (ns, b3["metadata"]["uid"]),
        {"name": "b3", "kind": "pods"})))
    body["metadata"]["uid"] = b3["metadata"]["uid"]
    t.assertEqual(a.req("POST", pods(ns, "b3") + "/binding", body)[0], 201)
    create_pod(t, a, ns, "b2")
    st, got = a.req("POST", pods(ns, "b2") + "/binding", dict(binding("b2"), metadata={"name": "other"}))
    t.assertEqual((st, got), (400, failure(400, "BadRequest", "name in URL does not match name in Binding object")))


def check_binding_ended_pods(t, a):
    """A pod that has ended (Succeeded) is bound like any other: the API server does not look
    at the phase, and nothing makes it run again."""
    ns = a.namespace()
    create_pod(t, a, ns, "done")
    st, p = a.req("GET", pods(ns, "done"))
    st, got = a.req("PUT", pods(ns, "done") + "/status", dict(p, status={"phase": "Succeeded"}))
    t.assertEqual(st, 200, got)
    st, got = a.req("POST", pods(ns, "done") + "/binding", binding("done"))
    t.assertEqual((st, got), (201, {"kind": "Status", "apiVersion": "v1", "metadata": {},
                                    "status": "Success", "code": 201}))
    st, p = a.req("GET", pods(ns, "done"))
    t.assertEqual((p["spec"]["nodeName"], p["status"]["phase"]), (NODE, "Succeeded"))


def check_watch_selection_changes(t, a):
    """A watch with a selector sees an object leave its selection as DELETED and enter it
    as ADDED (what an informer of unbound pods relies on)."""
    ns = a.namespace()
    create_pod(t, a, ns, "s0")
    create_pod(t, a, ns, "s1", labels={"team": "x"})
    st, lst = a.req("GET", pods(ns))
    start = lst["metadata"]["resourceVersion"]
    t.assertEqual(a.req("POST", pods(ns, "s0") + "/binding", binding("s0"))[0], 201)
    st, got = a.req("PATCH", pods(ns, "s1"), {"metadata": {"labels": {"team": "y"}}}, "application/merge-patch+json")
    t.assertEqual(st, 200, got)
    st, got = a.req("PATCH", pods(ns, "s1"), {"metadata": {"labels": {"team": "x"}}}, "application/merge-patch+json")
    t.assertEqual(st, 200, got)
    st, evs = a.watch(pods(ns) + "?fieldSelector=spec.nodeName%%3D&resourceVersion=%s" % start, 1)
    t.assertEqual(st, 200, evs)
    t.assertEqual([(e["type"], e["object"]["metadata"]["name"]) for e in evs],
                  [("DELETED", "s0"), ("MODIFIED", "s1"), ("MODIFIED", "s1")])
    # the DELETED object is the pod as it was (unbound), with the binding's resourceVersion
    t.assertNotIn("nodeName", evs[0]["object"]["spec"])
    bound = a.req("GET", pods(ns, "s0"))[1]
    t.assertEqual(bound["spec"]["nodeName"], NODE)
    t.assertLessEqual(rv(evs[0]["object"]), rv(bound))
    t.assertGreater(rv(evs[0]["object"]), int(start))
    st, evs = a.watch(pods(ns) + "?labelSelector=team%%3Dx&resourceVersion=%s" % start, 1)
    t.assertEqual([(e["type"], e["object"]["metadata"]["name"]) for e in evs],
                  [("DELETED", "s1"), ("ADDED", "s1")])
    t.assertEqual([e["object"]["metadata"]["labels"]["team"] for e in evs], ["x", "x"])
    t.assertLess(rv(evs[0]["object"]), rv(evs[1]["object"]))


def check_quantities(t, a):
    ns = a.namespace()
    res = {"requests": {"cpu": "1000m", "memory": "1024Mi", "ephemeral-storage": "1000000"},
           "limits": {"cpu": "1.5", "memory": "2048Mi", "ephemeral-storage": "1.5Gi"}}
    init = {"requests": {"cpu": "0.5", "memory": "1536Ki", "example.com/gpu": "2000"},
            "limits": {"cpu": "2500m", "memory": "0.5Gi", "example.com/gpu": "2000"}}
    body = pod_body("q", resources=res, init_resources=init)
    body["spec"]["containers"].append({"name": "odd", "image": "registry.invalid/pause:1", "resources": {
        "requests": {"cpu": "0.1m", "memory": "1.5Ki", "ephemeral-storage": "1e3"},
        "limits": {"cpu": "12e-1", "memory": "2e3", "ephemeral-storage": "0.001Mi"}}})
    st, created = a.req("POST", pods(ns), body)
    t.assertEqual(st, 201, created)
    want_odd = {"requests": {"cpu": "1m", "memory": "1536", "ephemeral-storage": "1e3"},
                "limits": {"cpu": "1200e-3", "memory": "2e3", "ephemeral-storage": "1048576m"}}
    want_c = {"requests": {"cpu": "1", "memory": "1Gi", "ephemeral-storage": "1M"},
              "limits": {"cpu": "1500m", "memory": "2Gi", "ephemeral-storage": "1536Mi"}}
    want_i = {"requests": {"cpu": "500m", "memory": "1536Ki", "example.com/gpu": "2k"},
              "limits": {"cpu": "2500m", "memory": "512Mi", "example.com/gpu": "2k"}}
    for p in (created, a.req("GET", pods(ns, "q"))[1]):
        t.assertEqual(p["spec"]["containers"][0]["resources"], want_c)
        t.assertEqual(p["spec"]["initContainers"][0]["resources"], want_i)
        t.assertEqual(p["spec"]["containers"][1]["resources"], want_odd)
    # a Node's capacity and allocatable too (created and deleted at once: kubequota in later
    # classes of the real run counts every node)
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "parity-node-" + ns,
                                                             "labels": {"parity": "yes"}},
            "status": {"capacity": {"cpu": "4000m", "memory": "8192Mi", "pods": "110"},
                       "allocatable": {"cpu": "3.5", "memory": "7.5Gi", "pods": "110"}}}
    st, got = a.req("POST", "/api/v1/nodes", node)
    try:
        t.assertEqual(st, 201, got)
        t.assertEqual((got["status"]["capacity"], got["status"]["allocatable"]),
                      ({"cpu": "4", "memory": "8Gi", "pods": "110"}, {"cpu": "3500m", "memory": "7680Mi", "pods": "110"}))
    finally:
        a.req("DELETE", "/api/v1/nodes/parity-node-" + ns)
    st, got = a.req("POST", pods(ns), pod_body("bad", resources={"requests": {"cpu": "1x"}}))
    t.assertEqual((st, got), (400, failure(
        400, "BadRequest", 'Pod in version "v1" cannot be handled as a Pod: quantities must match the '
        "regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")))


def check_field_selectors(t, a):
    ns = a.namespace()
    create_pod(t, a, ns, "pending")
    create_pod(t, a, ns, "other-sched", scheduler="parity-other")
    create_pod(t, a, ns, "bound")
    t.assertEqual(a.req("POST", pods(ns, "bound") + "/binding", binding("bound"))[0], 201)
    create_pod(t, a, ns, "done")
    t.assertEqual(a.req("PUT", pods(ns, "done") + "/status",
                        dict(a.req("GET", pods(ns, "done"))[1], status={"phase": "Succeeded"}))[0], 200)

    def sel(s):
        st, lst = a.req("GET", pods(ns) + "?fieldSelector=" + urllib.parse.quote(s))
        t.assertEqual(st, 200, lst)
        return names(lst)
    t.assertEqual(sel("spec.nodeName=" + NODE), ["bound"])
    t.assertEqual(sel("spec.nodeName="), ["done", "other-sched", "pending"])
    t.assertEqual(sel("spec.nodeName!="), ["bound"])
    t.assertEqual(sel("spec.schedulerName=parity-other"), ["other-sched"])
    t.assertEqual(sel("spec.schedulerName==" + NOBODY + ",spec.nodeName="), ["done", "pending"])
    t.assertEqual(sel("status.phase!=Succeeded,status.phase!=Failed"), ["bound", "other-sched", "pending"])
    t.assertEqual(sel("status.phase=Succeeded"), ["done"])
    t.assertEqual(sel("metadata.name=pending"), ["pending"])
    t.assertEqual(sel("metadata.namespace=" + ns + ",metadata.name!=pending"), ["bound", "done", "other-sched"])
    # across namespaces, as kubequota's informer lists and watches its scheduler's pods
    # (src/control/sync.c), in pages
    sched = "parity-" + ns
    create_pod(t, a, ns, "x1", scheduler=sched)
    other = a.namespace()
    create_pod(t, a, other, "x0", scheduler=sched)
    create_pod(t, a, other, "x2", scheduler=sched)
    q = "/api/v1/pods?fieldSelector=" + urllib.parse.quote("spec.schedulerName=" + sched)
    st, lst = a.req("GET", q)
    t.assertEqual([(i["metadata"]["namespace"], i["metadata"]["name"]) for i in lst["items"]],
                  sorted([(ns, "x1"), (other, "x0"), (other, "x2")]))
    st, page = a.req("GET", q + "&limit=2")
    # with a selector, how many are left is not said
    t.assertEqual((len(page["items"]), page["metadata"].get("remainingItemCount")), (2, None))
    st, rest = a.req("GET", q + "&limit=2&continue=" + urllib.parse.quote(page["metadata"]["continue"]))
    t.assertEqual([i["metadata"]["name"] for i in page["items"] + rest["items"]],
                  [i["metadata"]["name"] for i in lst["items"]])
    st, evs = a.watch(q + "&allowWatchBookmarks=true", 1)
    t.assertEqual([(e["type"], e["object"]["metadata"].get("name")) for e in evs],
                  [("ADDED", i["metadata"]["name"]) for i in lst["items"]] + [("BOOKMARK", None)])
    st, got = a.req("GET", pods(ns) + "?fieldSelector=spec.bogus%3D1")
    t.assertEqual((st, got), (400, failure(400, "BadRequest", "field label not supported: spec.bogus")))


def check_label_selectors(t, a):
    ns = a.namespace()
    for name, labels in (("p0", {"app": "a", "tier": "web"}), ("p1", {"app": "b", "tier": "web"}),
                         ("p2", {"app": "c"}), ("p3", {})):
        create_pod(t, a, ns, name, labels=labels)

    def sel(s):
        st, lst = a.req("GET", pods(ns) + "?labelSelector=" + urllib.parse.quote(s))
        t.assertEqual(st, 200, lst)
        return names(lst)
    t.assertEqual(sel("app=a"), ["p0"])
    t.assertEqual(sel("app==b"), ["p1"])
    t.assertEqual(sel("app!=a"), ["p1", "p2", "p3"])
    t.assertEqual(sel("app in (a,c)"), ["p0", "p2"])
    t.assertEqual(sel("app notin (a,c)"), ["p1", "p3"])
    t.assertEqual(sel("tier"), ["p0", "p1"])
    t.assertEqual(sel("!tier"), ["p2", "p3"])
    t.assertEqual(sel("app in (a,b),tier=web,!missing"), ["p0", "p1"])
    t.assertEqual(sel("app in (a, b)"), ["p0", "p1"])
    st, got = a.req("GET", pods(ns) + "?labelSelector=" + urllib.parse.quote("a b"))
    t.assertEqual(st, 400, got)
    t.assertEqual(got["reason"], "BadRequest")
    t.assertTrue(got["message"].startswith("unable to parse requirement: "), got["message"])


def check_event_patch(t, a):
    ns = a.namespace()
    ev = {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e1"},
          "involvedObject": {"kind": "Pod", "namespace": ns, "name": "p", "uid": "u-1"},
          "reason": "QuotaExceeded", "message": "m", "type": "Warning", "count": 1,
          "firstTimestamp": "2026-01-01T00:00:00Z", "lastTimestamp": "2026-01-01T00:00:00Z",
          "source": {"component": "kubequota"}}
    st, e1 = a.req("POST", "/api/v1/namespaces/%s/events" % ns, ev)
    t.assertEqual(st, 201, e1)
    st, e2 = a.req("PATCH", "/api/v1/namespaces/%s/events/e1" % ns,
                   {"count": 2, "lastTimestamp": "2026-01-01T00:01:00Z", "message": "m2",
                    "series": {"count": 2, "lastObservedTime": "2026-01-01T00:01:00.000000Z"}},
                   "application/merge-patch+json")
    t.assertEqual(st, 200, e2)
    t.assertEqual((e2["count"], e2["lastTimestamp"], e2["message"], e2["firstTimestamp"], e2["series"]),
                  (2, "2026-01-01T00:01:00Z", "m2", "2026-01-01T00:00:00Z",
                   {"count": 2, "lastObservedTime": "2026-01-01T00:01:00.000000Z"}))
    t.assertGreater(rv(e2), rv(e1))
    st, e3 = a.req("PATCH", "/api/v1/namespaces/%s/events/e1" % ns, {"count": 3, "series": None},
                   "application/strategic-merge-patch+json")
    t.assertEqual(st, 200, e3)
    t.assertEqual(e3["count"], 3)
    t.assertNotIn("series", e3)
    st, got = a.req("PATCH", "/api/v1/namespaces/%s/events/nope" % ns, {"count": 2}, "application/merge-patch+json")
    t.assertEqual((st, got), (404, failure(404, "NotFound", 'events "nope" not found',
                                           {"name": "nope", "kind": "events"})))
    for s in ("involvedObject.name=p,reason=QuotaExceeded", "involvedObject.kind=Pod,type=Warning",
              "source=kubequota", "involvedObject.uid=u-1"):
        st, lst = a.req("GET", "/api/v1/namespaces/%s/events?fieldSelector=%s" % (ns, urllib.parse.quote(s)))
        t.assertEqual((st, names(lst)), (200, ["e1"]), s)
    st, lst = a.req("GET", "/api/v1/namespaces/%s/events?fieldSelector=reason%%3DOther" % ns)
    t.assertEqual(names(lst), [])


def check_token_review(t, a):
    tok, user, groups = clus.USERS["alice"]
    st, got = a.req("POST", TOKENREVIEWS, {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                                           "spec": {"token": tok}})
    t.assertEqual(st, 201, got)
    t.assertEqual((got["kind"], got["apiVersion"]), ("TokenReview", "authentication.k8s.io/v1"))
    t.assertEqual(got["spec"], {"token": tok})
    s = got["status"]
    t.assertIs(s.get("authenticated"), True)
    t.assertEqual((s["user"]["username"], s["user"]["uid"]), (user, "uid-" + user))
    t.assertEqual(s["user"]["groups"], list(groups) + ["system:authenticated"])
    t.assertEqual(s["audiences"], ["https://kubernetes.default.svc.cluster.local"])  # cluster.py's issuer
    t.assertEqual(s.keys(), {"authenticated", "user", "audiences"})
    st, got = a.req("POST", TOKENREVIEWS, {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                                           "spec": {"token": "no-such-token"}})
    t.assertEqual(st, 201, got)
    # not authenticated: "authenticated" is left out (false), the user is empty, an error says why
    t.assertEqual((got["spec"], got["status"]), ({"token": "no-such-token"},
                                                 {"user": {}, "error": "invalid bearer token"}))
    st, got = a.req("POST", TOKENREVIEWS, {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                                           "spec": {}})
    t.assertEqual((st, got), (400, failure(400, "BadRequest", "token is required for TokenReview in authentication")))


def check_pagination(t, a):
    ns = a.namespace()
    for i in range(5):
        create_pod(t, a, ns, "p%d" % i)
    st, first = a.req("GET", pods(ns) + "?limit=2")
    t.assertEqual(st, 200, first)
    t.assertEqual(names(first), ["p0", "p1"])
    md = first["metadata"]
    t.assertEqual(md.get("remainingItemCount"), 3)
    t.assertTrue(md.get("continue"))
    seen = names(first)
    cont = md["continue"]
    while cont:
        st, page = a.req("GET", pods(ns) + "?limit=2&continue=" + urllib.parse.quote(cont))
        t.assertEqual(st, 200, page)
        # every page is the same snapshot
        t.assertEqual(page["metadata"]["resourceVersion"], md["resourceVersion"])
        seen += names(page)
        cont = page["metadata"].get("continue")
        if cont:
            t.assertEqual(page["metadata"]["remainingItemCount"], 5 - len(seen))
        else:
            t.assertNotIn("remainingItemCount", page["metadata"])
    t.assertEqual(seen, ["p0", "p1", "p2", "p3", "p4"])
    # a continue token can be used again (it names a position, not a one-time cursor)
    st, again = a.req("GET", pods(ns) + "?limit=2&continue=" + urllib.parse.quote(md["continue"]))
    t.assertEqual((st, names(again)), (200, ["p2", "p3"]))
    st, got = a.req("GET", pods(ns) + "?limit=2&continue=garbage")
    t.assertEqual(st, 400, got)
    t.assertEqual(got["reason"], "BadRequest")
    t.assertTrue(got["message"].startswith("invalid continue token: "), got["message"])
    # no limit: no continue
    st, lst = a.req("GET", pods(ns))
    t.assertEqual(lst["metadata"].keys(), {"resourceVersion"})


def check_eviction(t, a):
    ns = a.namespace()
    create_pod(t, a, ns, "v1")
    ev = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "v1", "namespace": ns}}
    st, got = a.req("POST", pods(ns, "v1") + "/eviction", ev)
    t.assertEqual((st, got), (201, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                                    "code": 201}))
    # a pending pod with grace 0 is gone at once
    t.assertEqual(a.req("GET", pods(ns, "v1"))[0], 404)
    create_pod(t, a, ns, "v2", node=NODE)
    a.refuse_evictions(ns, "v2", "parity-pdb")
    ev["metadata"]["name"] = "v2"
    st, got = a.req("POST", pods(ns, "v2") + "/eviction", ev)
    t.assertEqual((st, got), (429, failure(
        429, "TooManyRequests", "Cannot evict pod as it would violate the pod's disruption budget.",
        {"causes": [{"reason": "DisruptionBudget",
                     "message": "The disruption budget parity-pdb needs 1 healthy pods and has 1 currently"}]})))
    t.assertEqual(a.req("GET", pods(ns, "v2"))[0], 200)
    # an eviction whose uid precondition does not hold
    p = create_pod(t, a, ns, "v3")
    st, got = a.req("POST", pods(ns, "v3") + "/eviction",
                    {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "v3", "namespace": ns},
                     "deleteOptions": {"preconditions": {"uid": "not-the-uid"}}})
    t.assertEqual((st, got), (409, failure(
        409, "Conflict", 'Operation cannot be fulfilled on Pod "v3": the UID in the precondition '
        '(not-the-uid) does not match the UID in record (%s). The object might have been deleted and '
        'then recreated' % p["metadata"]["uid"], {"name": "v3", "kind": "Pod"})))


def check_delete(t, a):
    ns = a.namespace()
    p = create_pod(t, a, ns, "d1")
    st, got = a.req("DELETE", pods(ns, "d1"))
    t.assertEqual(st, 200, got)
    t.assertEqual((got["kind"], got["metadata"]["name"], got["metadata"]["uid"]),
                  ("Pod", "d1", p["metadata"]["uid"]))
    t.assertEqual((got["metadata"].get("deletionGracePeriodSeconds"), "deletionTimestamp" in got["metadata"]),
                  (0, True), got["metadata"])
    t.assertGreater(rv(got), rv(p))
    t.assertEqual(a.req("GET", pods(ns, "d1"))[0], 404)
    st, got = a.req("DELETE", pods(ns, "d1"))
    t.assertEqual((st, got), (404, failure(404, "NotFound", 'pods "d1" not found', {"name": "d1", "kind": "pods"})))
    # a uid precondition that does not hold
    p = create_pod(t, a, ns, "d2")
    st, got = a.req("DELETE", pods(ns, "d2"), {"apiVersion": "v1", "kind": "DeleteOptions",
                                                "preconditions": {"uid": "not-the-uid"}})
    t.assertEqual((st, got), (409, failure(
        409, "Conflict", 'Operation cannot be fulfilled on Pod "d2": the UID in the precondition '
        '(not-the-uid) does not match the UID in record (%s). The object might have been deleted and '
        'then recreated' % p["metadata"]["uid"],
        {"name": "d2", "kind": "Pod"})))


def check_resource_version_monotonic(t, a):
    ns = a.namespace()
    seen = []
    st, lst = a.req("GET", pods(ns))
    seen.append(rv(lst))
    for i in range(3):
        seen.append(rv(create_pod(t, a, ns, "m%d" % i)))
    st, got = a.req("PATCH", pods(ns, "m0"), {"metadata": {"labels": {"a": "b"}}}, "application/merge-patch+json")
    seen.append(rv(got))
    st, got = a.req("POST", pods(ns, "m1") + "/binding", binding("m1"))
    st, got = a.req("GET", pods(ns, "m1"))
    seen.append(rv(got))
    st, got = a.req("DELETE", pods(ns, "m2"))
    seen.append(rv(got))
    t.assertEqual(seen, sorted(set(seen)), "resourceVersions not strictly increasing: %s" % seen)
    st, lst = a.req("GET", pods(ns))
    t.assertGreaterEqual(rv(lst), max(rv(i) for i in lst["items"]))
    t.assertGreaterEqual(rv(lst), seen[-1])
    # a watch from the first list's version replays every change in order
    st, evs = a.watch(pods(ns) + "?resourceVersion=%d" % seen[0], 1)
    t.assertEqual(st, 200, evs)
    rvs = [rv(e["object"]) for e in evs]
    t.assertEqual(rvs, sorted(set(rvs)))
    t.assertEqual([(e["type"], e["object"]["metadata"]["name"]) for e in evs][:3],
                  [("ADDED", "m0"), ("ADDED", "m1"), ("ADDED", "m2")])
    # (on the real cluster kwok may still be updating the bound m1 after the delete)
    t.assertEqual([(e["object"]["metadata"]["name"], rv(e["object"])) for e in evs if e["type"] == "DELETED"],
                  [("m2", seen[-1])])


def check_watch_bookmarks(t, a):
    ns = a.namespace()
    create_pod(t, a, ns, "w0")
    create_pod(t, a, ns, "w1")
    st, lst = a.req("GET", pods(ns))
    # no resourceVersion: the current state as ADDED, then a bookmark marking its end
    for q in ("?allowWatchBookmarks=true", "?allowWatchBookmarks=true&resourceVersion=0",
              "?allowWatchBookmarks=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&resourceVersion="
              + lst["metadata"]["resourceVersion"]):
        st, evs = a.watch(pods(ns) + q, 1)
        t.assertEqual(st, 200, evs)
        t.assertEqual([(e["type"], e["object"]["metadata"].get("name")) for e in evs],
                      [("ADDED", "w0"), ("ADDED", "w1"), ("BOOKMARK", None)], q)
        bm = evs[-1]["object"]
        t.assertEqual(bm, {"kind": "Pod", "apiVersion": "v1",
                           "metadata": {"resourceVersion": bm["metadata"]["resourceVersion"],
                                        "annotations": {"k8s.io/initial-events-end": "true"}},
                           "spec": {"containers": None}, "status": {}}, q)
        t.assertGreaterEqual(rv(bm), rv(lst))
    # without bookmarks: the same state, no bookmark
    st, evs = a.watch(pods(ns), 1)
    t.assertEqual([e["type"] for e in evs], ["ADDED", "ADDED"])
    # from a resourceVersion: only what changed since, no initial-events-end bookmark
    st, evs = a.watch(pods(ns) + "?allowWatchBookmarks=true&resourceVersion=" + lst["metadata"]["resourceVersion"], 1)
    t.assertEqual([e for e in evs if e["type"] != "BOOKMARK"], [])
    for e in evs:
        t.assertNotIn("annotations", e["object"]["metadata"])
    # a bookmark comes 2 s before the watch's timeout (and about every minute). The real
    # watch cache dispatches bookmarks on a 1 s timer and not exactly then (in about ten
    # runs: once none, once two), so only their form is compared, not their number
    t0 = time.monotonic()
    st, evs = a.watch(pods(ns) + "?allowWatchBookmarks=true&resourceVersion=" + lst["metadata"]["resourceVersion"], 4)
    t.assertGreater(time.monotonic() - t0, 3.5)
    t.assertEqual({e["type"] for e in evs} - {"BOOKMARK"}, set())
    for e in evs:
        t.assertEqual(e["object"]["metadata"].keys(), {"resourceVersion"})
        t.assertGreaterEqual(rv(e["object"]), rv(lst))
    # an empty selection still ends its (empty) initial state with the bookmark
    st, evs = a.watch(pods(ns) + "?allowWatchBookmarks=true&labelSelector=app%3Dnone", 1)
    t.assertEqual([e["type"] for e in evs], ["BOOKMARK"])
    t.assertEqual(evs[0]["object"]["metadata"]["annotations"], {"k8s.io/initial-events-end": "true"})


def check_elasticquota(t, a):
    """The ElasticQuota CRD the chart installs (scheduling.x-k8s.io, status subresource): what
    kubequota's status writes rely on."""
    ns = a.namespace()
    base = "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/%s/elasticquotas" % ns
    st, eq = a.req("POST", base, {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "ElasticQuota",
                                  "metadata": {"name": "q"},
                                  "spec": {"min": {"cpu": "1000m", "memory": "1024Mi"}, "max": {"cpu": 4}},
                                  "status": {"used": {"cpu": "9"}}})
    t.assertEqual(st, 201, eq)
    # a custom resource keeps its quantities as written; status is not set at creation
    t.assertEqual(eq["spec"], {"min": {"cpu": "1000m", "memory": "1024Mi"}, "max": {"cpu": 4}})
    t.assertNotIn("status", eq)
    t.assertEqual((eq["kind"], eq["apiVersion"]), ("ElasticQuota", "scheduling.x-k8s.io/v1alpha1"))
    st, got = a.req("PATCH", base + "/q/status", {"status": {"used": {"cpu": "500m"}}}, "application/merge-patch+json")
    t.assertEqual(st, 200, got)
    t.assertEqual(got["status"], {"used": {"cpu": "500m"}})
    t.assertGreater(rv(got), rv(eq))
    # status through the object itself is ignored; the annotation is written
    st, got = a.req("PATCH", base + "/q", {"metadata": {"annotations": {"a": "1"}}, "status": {"used": {"cpu": "7"}}},
                    "application/merge-patch+json")
    t.assertEqual(st, 200, got)
    t.assertEqual((got["metadata"]["annotations"], got["status"]), ({"a": "1"}, {"used": {"cpu": "500m"}}))
    # spec through the status subresource is ignored
    st, got = a.req("PATCH", base + "/q/status", {"spec": {"max": {"cpu": "1"}}, "status": {"used": {"cpu": "1"}}},
                    "application/merge-patch+json")
    t.assertEqual(st, 200, got)
    t.assertEqual((got["spec"]["max"], got["status"]["used"]), ({"cpu": 4}, {"cpu": "1"}))
    for path in (base + "/nope", base + "/nope/status"):
        st, got = a.req("PATCH", path, {"status": {"used": {}}}, "application/merge-patch+json")
        t.assertEqual((st, got), (404, failure(404, "NotFound", 'elasticquotas.scheduling.x-k8s.io "nope" not found',
                                               {"name": "nope", "group": "scheduling.x-k8s.io",
                                                "kind": "elasticquotas"})), path)
    stale = dict(eq, spec={"max": {"cpu": "2"}})
    st, got = a.req("PUT", base + "/q", stale)
    t.assertEqual((st, got), (409, failure(
        409, "Conflict", 'Operation cannot be fulfilled on elasticquotas.scheduling.x-k8s.io "q": the object has '
        'been modified; please apply your changes to the latest version and try again',
        {"name": "q", "group": "scheduling.x-k8s.io", "kind": "elasticquotas"})))
    del stale["metadata"]["resourceVersion"]
    st, got = a.req("PUT", base + "/q", stale)
    t.assertEqual(st, 422, got)
    t.assertEqual(got["message"], 'elasticquotas.scheduling.x-k8s.io "q" is invalid: metadata.resourceVersion: '
                  'Invalid value: 0: must be specified for an update')
    # a watch of them: the state, then the bookmark ending it (a custom resource's bookmark
    # is just kind, apiVersion and metadata)
    st, evs = a.watch(base + "?allowWatchBookmarks=true", 1)
    t.assertEqual([(e["type"], e["object"]["metadata"].get("name")) for e in evs], [("ADDED", "q"), ("BOOKMARK", None)])
    bm = evs[1]["object"]
    t.assertEqual(bm, {"kind": "ElasticQuota", "apiVersion": "scheduling.x-k8s.io/v1alpha1",
                       "metadata": {"resourceVersion": bm["metadata"]["resourceVersion"],
                                    "annotations": {"k8s.io/initial-events-end": "true"}}})
    st, got = a.req("DELETE", base + "/q")
    t.assertEqual(st, 200, got)
    t.assertEqual((got["kind"], got["status"], got["details"]["name"], got["details"]["group"], got["details"]["kind"]),
                  ("Status", "Success", "q", "scheduling.x-k8s.io", "elasticquotas"))


def check_configmap(t, a):
    """ConfigMaps, where kubequota keeps the gating usage history (src/control/gating.c):
    create, update with and without resourceVersion, the size limit."""
    ns = a.namespace()
    base = "/api/v1/namespaces/%s/configmaps" % ns
    st, cm = a.req("POST", base, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "u"},
                                  "data": {"k": "v1"}})
    t.assertEqual(st, 201, cm)
    st, cm2 = a.req("PUT", base + "/u", dict(cm, data={"k": "v2"}))
    t.assertEqual((st, cm2["data"]), (200, {"k": "v2"}))
    st, got = a.req("PUT", base + "/u", dict(cm, data={"k": "v3"}))
    t.assertEqual((st, got), (409, failure(
        409, "Conflict", 'Operation cannot be fulfilled on configmaps "u": the object has been modified; please '
        'apply your changes to the latest version and try again', {"name": "u", "kind": "configmaps"})))
    bare = json.loads(json.dumps(cm2))
    del bare["metadata"]["resourceVersion"]
    st, got = a.req("PUT", base + "/u", dict(bare, data={"k": "v4"}))  # unconditional update
    t.assertEqual((st, got["data"]), (200, {"k": "v4"}))
    st, got = a.req("PUT", base + "/nope", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "nope"}})
    t.assertEqual((st, got), (404, failure(404, "NotFound", 'configmaps "nope" not found',
                                           {"name": "nope", "kind": "configmaps"})))
    big = "x" * (1024 * 1024 + 1)
    st, got = a.req("POST", base, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "big"},
                                   "data": {"k": big}})
    msg = "Too long: may not be more than 1048576 bytes"
    t.assertEqual((st, got), (422, failure(
        422, "Invalid", 'ConfigMap "big" is invalid: []: ' + msg,
        {"name": "big", "kind": "ConfigMap", "causes": [{"reason": "FieldValueTooLong", "message": msg,
                                                         "field": "[]"}]})))
    st, got = a.req("POST", base, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "num"},
                                   "data": {"k": 1}})
    t.assertEqual((st, got), (400, failure(
        400, "BadRequest", 'ConfigMap in version "v1" cannot be handled as a ConfigMap: json: cannot unmarshal '
        "number into Go struct field ConfigMap.data of type string")))


def check_gone(t, a):
    """410 Gone: a watch from a compacted resourceVersion (in-band ERROR event) and a LIST with
    an expired continue token. Last in the list: it restarts the real API server."""
    ns = a.namespace()
    for i in range(3):
        create_pod(t, a, ns, "g%d" % i)
    st, first = a.req("GET", pods(ns) + "?limit=1")
    old = int(first["metadata"]["resourceVersion"])
    cont = first["metadata"]["continue"]
    st, got = a.req("DELETE", pods(ns, "g2"))
    t.assertEqual(st, 200, got)
    a.expire_history()
    st, evs = a.watch(pods(ns) + "?resourceVersion=%d" % old, 5)
    t.assertEqual(st, 200, evs)
    t.assertEqual(len(evs), 1, evs)
    t.assertEqual(evs[0]["type"], "ERROR")
    err = evs[0]["object"]
    msg = err.get("message", "")
    t.assertRegex(msg, r"^too old resource version: %d \((\d+)\)$" % old)
    t.assertGreater(int(msg.rsplit("(", 1)[1].rstrip(")")), old)
    t.assertEqual(err, failure(410, "Expired", msg))
    st, got = a.req("GET", pods(ns) + "?limit=1&continue=" + urllib.parse.quote(cont))
    t.assertEqual(st, 410, got)
    t.assertEqual(got, dict(failure(
        410, "Expired", "The provided continue parameter is too old to display a consistent list result. You "
        "can start a new list without the continue parameter, or use the continue token in this response to "
        "retrieve the remainder of the results. Continuing with the provided token results in an inconsistent "
        "list - objects that were created, modified, or deleted between the time the first chunk was returned "
        "and now may show up in the list."), metadata={"continue": got["metadata"].get("continue")}))
    # the token in the answer goes on after the last item returned, in the current state
    st, rest = a.req("GET", pods(ns) + "?continue=" + urllib.parse.quote(got["metadata"]["continue"]))
    t.assertEqual((st, names(rest)), (200, ["g1"]))
    # a new list works and names a newer version
    st, lst = a.req("GET", pods(ns))
    t.assertEqual((st, names(lst)), (200, ["g0", "g1"]))
    t.assertGreater(rv(lst), old)


def check_version(t, a):
    """The simulator names the minor it was last held to (tests/cluster/versions.env): when the
    pinned control plane moves on, this fails until the checks have been run against it."""
    with open(os.path.join(HERE, "versions.env")) as f:
        pinned = next(l.split("=", 1)[1].strip() for l in f if l.startswith("K8S_VERSION="))
    major, minor = pinned.lstrip("v").split(".")[:2]
    st, v = a.req("GET", "/version")
    t.assertEqual(st, 200, v)
    t.assertEqual((v["major"], v["minor"]), (major, minor))
    t.assertTrue(v["gitVersion"].startswith("v%s.%s." % (major, minor)), v)


CHECKS = [check_version, check_unauthorized, check_not_found, check_already_exists, check_conflict, check_lease_updates,
          check_scheduling_gates, check_pod_status_at_creation, check_patch_types, check_binding, check_binding_ended_pods, check_quantities, check_field_selectors,
          check_label_selectors, check_event_patch, check_token_review, check_pagination,
          check_eviction, check_delete, check_resource_version_monotonic, check_watch_bookmarks,
          check_watch_selection_changes, check_elasticquota, check_configmap, check_gone]


# ---------------------------------------------------------------------------------------
# one test class per target, generated from CHECKS
# ---------------------------------------------------------------------------------------

class _Parity(unittest.TestCase):
    target = None
    maxDiff = None

    @classmethod
    def make_target(cls):
        raise NotImplementedError

    @classmethod
    def setUpClass(cls):
        cls.target = cls.make_target()

    @classmethod
    def tearDownClass(cls):
        if cls.target is not None:
            cls.target.close()


def _test(check):
    def test(self):
        check(self, self.target)
    test.__doc__ = check.__doc__
    test.__name__ = "test_" + check.__name__[len("check_"):]
    return test


class ApisimParityRealApi(_Parity):
    @classmethod
    def make_target(cls):
        c = kubetest.CLUSTER
        if c is None:
            raise unittest.SkipTest("no cluster (run through tests/cluster/run.py)")
        # no kubequota runs during these checks: its webhooks must not be asked
        c.delete_webhooks()
        return RealTarget(c)


class ApisimParitySimulator(_Parity):
    @classmethod
    def make_target(cls):
        return SimTarget()


for _check in CHECKS:
    for _cls in (ApisimParityRealApi, ApisimParitySimulator):
        setattr(_cls, "test_%02d_%s" % (CHECKS.index(_check), _check.__name__[len("check_"):]), _test(_check))
del _check, _cls

if __name__ == "__main__":
    unittest.main()
