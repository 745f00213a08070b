"""Self-test of the API simulator (no kubequota needed): the behaviours kubequota's client
relies on must hold, or the end-to-end scenarios would prove nothing."""

import http.client
import json
import socket
import threading
import unittest
import urllib.parse

import kqtest
from kqtest import Sim, pod_manifest, wait_until


class WatchStream:
    """A raw watch over TLS: reads the chunked body itself and splits events on newlines."""

    def __init__(self, sim, query, timeout=10):
        self.conn = sim.http.connection(timeout)
        self.conn.request("GET", "/api/v1/pods?" + urllib.parse.urlencode(query),
                          headers={"Authorization": "Bearer " + sim.token})
        self.resp = self.conn.getresponse()
        self.buf = b""

    def headers(self):
        return {k.lower(): v for k, v in self.resp.getheaders()}

    def next_event(self):
        """The next complete event, or None at a clean end of stream."""
        while b"\n" not in self.buf:
            data = self.resp.read1(65536)
            if not data:
                if self.buf:
                    raise EOFError("stream ended inside an event: %r" % self.buf[:80])
                return None
            self.buf += data
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def events_until(self, pred, limit=50):
        out = []
        for _ in range(limit):
            ev = self.next_event()
            if ev is None:
                break
            out.append(ev)
            if pred(ev):
                break
        return out

    def close(self):
        self.conn.close()


class ApiSimTest(unittest.TestCase):
    def setUp(self):
        self.sim = Sim(nodes=("n1", "n2"), bookmark_interval=0.3)
        self.addCleanup(self.sim.stop)
        self.http = self.sim.http

    def create(self, name, ns="default", **kw):
        r = self.http.post("/api/v1/namespaces/%s/pods" % ns, pod_manifest(name, ns=ns, **kw))
        self.assertEqual(r.status, 201, r.text)
        return r.json()

    def test_create_get_defaults(self):
        p = self.create("p1", scheduler=None)
        self.assertEqual(p["kind"], "Pod")
        self.assertEqual(p["status"]["phase"], "Pending")
        self.assertEqual(p["spec"]["schedulerName"], "default-scheduler")
        self.assertTrue(p["metadata"]["uid"])
        self.assertTrue(p["metadata"]["creationTimestamp"].endswith("Z"))
        g = self.http.get("/api/v1/namespaces/default/pods/p1").json()
        self.assertEqual(g["metadata"]["uid"], p["metadata"]["uid"])
        r = self.http.post("/api/v1/namespaces/default/pods", pod_manifest("p1"))
        self.assertEqual((r.status, r.json()["reason"]), (409, "AlreadyExists"))
        r = self.http.get("/api/v1/namespaces/default/pods/nope")
        self.assertEqual(r.status, 404)
        self.assertEqual(r.json()["kind"], "Status")
        self.assertEqual(r.json()["reason"], "NotFound")
        self.assertEqual(r.json()["details"], {"name": "nope", "kind": "pods"})

    def test_token_required(self):
        c = kqtest.HttpClient(self.sim.url, ca=kqtest.certs()["ca"], token="wrong")
        r = c.get("/api/v1/pods")
        self.assertEqual(r.status, 401)
        self.assertEqual(r.json()["reason"], "Unauthorized")

    def test_tls_verified_with_ca(self):
        import ssl
        c = kqtest.HttpClient(self.sim.url, ca=kqtest.certs()["server"])  # wrong trust anchor
        with self.assertRaises(ssl.SSLError):
            c.get("/api/v1/pods")

    def test_list_pagination_consistent_snapshot(self):
        for i in range(7):
            self.create("p%d" % i)
        r = self.http.get("/api/v1/pods?limit=3").json()
        self.assertEqual(r["kind"], "PodList")
        self.assertEqual(len(r["items"]), 3)
        self.assertNotIn("kind", r["items"][0])
        rv = r["metadata"]["resourceVersion"]
        self.assertEqual(r["metadata"]["remainingItemCount"], 4)
        self.create("late")  # not part of the snapshot
        names = [p["metadata"]["name"] for p in r["items"]]
        cont = r["metadata"]["continue"]
        while cont:
            r = self.http.get("/api/v1/pods?limit=3&continue=" + urllib.parse.quote(cont)).json()
            self.assertEqual(r["metadata"]["resourceVersion"], rv)
            names += [p["metadata"]["name"] for p in r["items"]]
            cont = r["metadata"].get("continue")
        self.assertEqual(names, ["p%d" % i for i in range(7)])

    def test_continue_expires_after_compaction(self):
        for i in range(4):
            self.create("p%d" % i)
        r = self.http.get("/api/v1/pods?limit=2").json()
        self.create("later")
        self.sim.compact()
        r2 = self.http.get("/api/v1/pods?limit=2&continue=" + r["metadata"]["continue"])
        self.assertEqual(r2.status, 410)
        self.assertEqual(r2.json()["reason"], "Expired")

    def test_field_selectors(self):
        self.create("a", scheduler="kq")
        self.create("b", scheduler="other")
        self.create("c", ns="ns2", scheduler="kq")
        self.sim.bind("default", "a", "n1")

        def names(q):
            r = self.http.get("/api/v1/pods?fieldSelector=" + urllib.parse.quote(q))
            self.assertEqual(r.status, 200, r.text)
            return sorted(p["metadata"]["name"] for p in r.json()["items"])
        self.assertEqual(names("spec.schedulerName=kq"), ["a", "c"])
        self.assertEqual(names("spec.schedulerName==kq,spec.nodeName="), ["c"])
        self.assertEqual(names("spec.nodeName!="), ["a"])
        self.assertEqual(names("status.phase=Running"), ["a"])
        self.assertEqual(names("metadata.namespace!=default"), ["c"])
        r = self.http.get("/api/v1/pods?fieldSelector=spec.bogus%3Dx")
        self.assertEqual(r.status, 400)
        ns2 = self.http.get("/api/v1/namespaces/ns2/pods").json()["items"]
        self.assertEqual([p["metadata"]["name"] for p in ns2], ["c"])

    def test_watch_chunked_events_bookmarks_and_timeout(self):
        self.create("before")
        rv = self.http.get("/api/v1/pods").json()["metadata"]["resourceVersion"]
        w = WatchStream(self.sim, {"watch": "1", "resourceVersion": rv,
                                   "allowWatchBookmarks": "true", "timeoutSeconds": "3"})
        self.addCleanup(w.close)
        self.assertEqual(w.resp.status, 200)
        h = w.headers()
        self.assertEqual(h.get("transfer-encoding"), "chunked")
        self.assertEqual(h.get("content-type"), "application/json")
        p = self.create("after")
        self.sim.bind("default", "after", "n1")
        self.sim.set_phase("default", "after", "Succeeded")
        self.sim.delete_pod("default", "after")
        evs = w.events_until(lambda e: e["type"] == "DELETED")
        kinds = [e["type"] for e in evs if e["type"] != "BOOKMARK"]
        # create, bind, kubelet Running, Succeeded, delete
        self.assertEqual(kinds, ["ADDED", "MODIFIED", "MODIFIED", "MODIFIED", "DELETED"])
        objs = [e["object"] for e in evs if e["type"] != "BOOKMARK"]
        self.assertTrue(all(o["kind"] == "Pod" and o["metadata"]["uid"] == p["metadata"]["uid"]
                            for o in objs))
        self.assertEqual(objs[1]["spec"]["nodeName"], "n1")
        self.assertEqual(objs[2]["status"]["phase"], "Running")
        self.assertEqual(objs[3]["status"]["phase"], "Succeeded")
        rvs = [int(o["metadata"]["resourceVersion"]) for o in objs]
        self.assertEqual(rvs, sorted(rvs))
        self.assertGreater(rvs[0], int(rv))
        # then bookmarks, then a clean end after timeoutSeconds
        rest = []
        while True:
            ev = w.next_event()
            if ev is None:
                break
            rest.append(ev)
        self.assertTrue(rest, "expected at least one bookmark")
        self.assertTrue(all(e["type"] == "BOOKMARK" for e in rest))
        bm = rest[-1]["object"]
        self.assertEqual(bm["spec"], {"containers": None})
        self.assertGreaterEqual(int(bm["metadata"]["resourceVersion"]), rvs[-1])

    def test_watch_resumes_from_resource_version(self):
        self.create("x")
        rv0 = self.http.get("/api/v1/pods").json()["metadata"]["resourceVersion"]
        self.create("y")
        self.create("z")
        w = WatchStream(self.sim, {"watch": "true", "resourceVersion": rv0,
                                   "timeoutSeconds": "1"})
        self.addCleanup(w.close)
        evs = []
        while True:
            ev = w.next_event()
            if ev is None:
                break
            evs.append(ev)
        self.assertEqual([(e["type"], e["object"]["metadata"]["name"]) for e in evs],
                         [("ADDED", "y"), ("ADDED", "z")])

    def test_watch_field_selector_transitions(self):
        self.create("a", scheduler="kq")
        rv = self.http.get("/api/v1/pods").json()["metadata"]["resourceVersion"]
        w = WatchStream(self.sim, {"watch": "1", "resourceVersion": rv, "timeoutSeconds": "5",
                                   "fieldSelector": "spec.nodeName="})
        self.addCleanup(w.close)
        self.sim.bind("default", "a", "n1")  # leaves the selection -> DELETED
        ev = w.next_event()
        # as kube-apiserver sends it: the pod as it was (still matching the selector), with
        # the resourceVersion of the change that made it leave
        self.assertEqual(ev["type"], "DELETED")
        self.assertNotIn("nodeName", ev["object"]["spec"])
        binding_rv = next(o["metadata"]["resourceVersion"] for _, r, _, o, _ in self.sim.world.history
                          if r == "pods" and o["spec"].get("nodeName") == "n1")
        self.assertEqual(ev["object"]["metadata"]["resourceVersion"], binding_rv)

    def test_watch_too_old_gives_in_band_410(self):
        self.create("a")
        rv = self.http.get("/api/v1/pods").json()["metadata"]["resourceVersion"]
        self.create("b")
        floor = self.sim.compact()
        w = WatchStream(self.sim, {"watch": "1", "resourceVersion": rv})
        self.addCleanup(w.close)
        self.assertEqual(w.resp.status, 200)
        ev = w.next_event()
        self.assertEqual(ev["type"], "ERROR")
        o = ev["object"]
        self.assertEqual((o["kind"], o["code"], o["reason"], o["status"]),
                         ("Status", 410, "Expired", "Failure"))
        self.assertEqual(o["message"], "too old resource version: %s (%d)" % (rv, floor + 1))
        self.assertIsNone(w.next_event())
        # a watch from the list's RV after compaction works
        rv2 = self.http.get("/api/v1/pods").json()["metadata"]["resourceVersion"]
        w2 = WatchStream(self.sim, {"watch": "1", "resourceVersion": rv2, "timeoutSeconds": "2"})
        self.addCleanup(w2.close)
        self.create("c")
        self.assertEqual(w2.next_event()["object"]["metadata"]["name"], "c")

    def test_drop_watches_partial_line(self):
        rv = self.http.get("/api/v1/pods").json()["metadata"]["resourceVersion"]
        w = WatchStream(self.sim, {"watch": "1", "resourceVersion": rv})
        self.addCleanup(w.close)
        wait_until(lambda: self.sim.state()["watches"] == ["pods"], 5, msg="watch registered")
        self.assertEqual(self.sim.drop_watches("partial"), 1)
        with self.assertRaises((EOFError, http.client.IncompleteRead, ConnectionError,
                                socket.timeout, OSError)):
            while w.next_event() is not None:
                pass
        wait_until(lambda: self.sim.state()["watches"] == [], 5, msg="watch gone")

    def test_binding(self):
        p = self.create("p", scheduler="kq")
        body = {"kind": "Binding", "apiVersion": "v1",
                "metadata": {"name": "p", "namespace": "default", "uid": "wrong-uid"},
                "target": {"kind": "Node", "name": "n1"}}
        r = self.http.post("/api/v1/namespaces/default/pods/p/binding", body)
        self.assertEqual((r.status, r.json()["reason"]), (409, "Conflict"))
        self.assertFalse(self.sim.get_pod("default", "p")["spec"].get("nodeName"))
        body["metadata"]["uid"] = p["metadata"]["uid"]
        r = self.http.post("/api/v1/namespaces/default/pods/p/binding", body)
        self.assertEqual(r.status, 201, r.text)
        self.assertEqual(r.json(), {"kind": "Status", "apiVersion": "v1", "metadata": {},
                                    "status": "Success", "code": 201})
        got = self.sim.get_pod("default", "p")
        self.assertEqual(got["spec"]["nodeName"], "n1")
        self.assertEqual(got["status"]["phase"], "Running")
        self.assertIn("PodScheduled", [c["type"] for c in got["status"]["conditions"]])
        body["target"]["name"] = "n2"
        r = self.http.post("/api/v1/namespaces/default/pods/p/binding", body)
        self.assertEqual(r.status, 409)
        self.assertIn('already assigned to node "n1"', r.json()["message"])
        body["metadata"] = {"name": "missing"}
        r = self.http.post("/api/v1/namespaces/default/pods/missing/binding", body)
        self.assertEqual(r.status, 404)

    def test_scheduling_gates(self):
        # Gates are set at creation and may only be removed afterwards; a gated pod cannot
        # be bound. Wording and codes follow kube-apiserver: kubernetes/kubernetes
        # pkg/apis/core/validation/validation.go (validateOnlyDeletedSchedulingGates) and
        # pkg/registry/core/pod/storage/storage.go (BindingREST: "pod %v has non-empty
        # .spec.schedulingGates", a 409 Conflict; storage_test.go TestEtcdCreateWithSchedulingGates).
        p = self.create("g", gates=("example.com/a", "kubequota.io/admission"))
        self.assertEqual([g["name"] for g in p["spec"]["schedulingGates"]],
                         ["example.com/a", "kubequota.io/admission"])
        r = self.sim.bind("default", "g", "n1", uid=p["metadata"]["uid"])
        self.assertEqual((r.status, r.json()["reason"]), (409, "Conflict"))
        self.assertIn("pod g has non-empty .spec.schedulingGates", r.json()["message"])
        self.assertFalse(self.sim.get_pod("default", "g")["spec"].get("nodeName"))
        path = "/api/v1/namespaces/default/pods/g"
        merge = {"Content-Type": "application/merge-patch+json"}
        jp = {"Content-Type": "application/json-patch+json"}
        # adding a gate (merge patch replaces the list) is refused and changes nothing
        r = self.http.request("PATCH", path, headers=merge, body={"spec": {"schedulingGates": [
            {"name": "example.com/a"}, {"name": "kubequota.io/admission"}, {"name": "x"}]}})
        self.assertEqual((r.status, r.json()["reason"]), (422, "Invalid"), r.text)
        self.assertIn("spec.schedulingGates[2].name: Forbidden: only deletion is allowed, but "
                      "found new scheduling gate 'x'", r.json()["message"])
        # ... and through a JSON patch too
        r = self.http.request("PATCH", path, headers=jp, body=[
            {"op": "add", "path": "/spec/schedulingGates/-", "value": {"name": "y"}}])
        self.assertEqual(r.status, 422, r.text)
        self.assertIn("found new scheduling gate 'y'", r.json()["message"])
        self.assertEqual(len(self.sim.get_pod("default", "g")["spec"]["schedulingGates"]), 2)
        # a JSON patch whose test fails (someone else's gate at that index) changes nothing
        r = self.http.request("PATCH", path, headers=jp, body=[
            {"op": "test", "path": "/spec/schedulingGates/0/name", "value": "kubequota.io/admission"},
            {"op": "remove", "path": "/spec/schedulingGates/0"}])
        self.assertEqual(r.status, 422, r.text)
        self.assertEqual(len(self.sim.get_pod("default", "g")["spec"]["schedulingGates"]), 2)
        # removing one gate under a test precondition works; the other gate still blocks binding
        r = self.http.request("PATCH", path, headers=jp, body=[
            {"op": "test", "path": "/spec/schedulingGates/1/name", "value": "kubequota.io/admission"},
            {"op": "remove", "path": "/spec/schedulingGates/1"}])
        self.assertEqual(r.status, 200, r.text)
        self.assertEqual(r.json()["spec"]["schedulingGates"], [{"name": "example.com/a"}])
        self.assertEqual(self.sim.bind("default", "g", "n1").status, 409)
        # the last gate removed: bindable
        r = self.http.request("PATCH", path, headers=merge, body={"spec": {"schedulingGates": None}})
        self.assertEqual(r.status, 200, r.text)
        self.assertNotIn("schedulingGates", r.json()["spec"])
        self.assertEqual(self.sim.bind("default", "g", "n1").status, 201)
        # a gated pod cannot be created with a node
        r = self.http.post("/api/v1/namespaces/default/pods",
                           pod_manifest("h", node="n1", gates=("a",)))
        self.assertEqual(r.status, 422, r.text)
        self.assertIn("spec.nodeName: Forbidden", r.json()["message"])
        r = self.http.post("/api/v1/namespaces/default/pods", pod_manifest("d", gates=("a", "a")))
        self.assertEqual(r.status, 422, r.text)

    def test_concurrent_bindings_one_wins(self):
        self.create("p")
        results = []
        barrier = threading.Barrier(8)

        def go(i):
            barrier.wait()
            results.append(self.sim.bind("default", "p", "n%d" % (i % 2 + 1)).status)
        ts = [threading.Thread(target=go, args=(i,)) for i in range(8)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        self.assertEqual(sorted(results), [201] + [409] * 7)

    def test_eviction_and_pdb(self):
        self.create("p")
        self.sim.world.eviction_status = 429
        r = self.http.post("/api/v1/namespaces/default/pods/p/eviction",
                           {"apiVersion": "policy/v1", "kind": "Eviction",
                            "metadata": {"name": "p", "namespace": "default"}})
        self.assertEqual((r.status, r.json()["reason"]), (429, "TooManyRequests"))
        self.sim.world.eviction_status = None
        r = self.http.post("/api/v1/namespaces/default/pods/p/eviction", {})
        self.assertEqual(r.status, 201)
        self.assertEqual(self.http.get("/api/v1/namespaces/default/pods/p").status, 404)

    def test_status_patch_and_put(self):
        self.create("p")
        r = self.http.request("PATCH", "/api/v1/namespaces/default/pods/p/status",
                              body={"status": {"phase": "Failed"}},
                              headers={"Content-Type": "application/merge-patch+json"})
        self.assertEqual(r.status, 200, r.text)
        self.assertEqual(self.sim.get_pod("default", "p")["status"]["phase"], "Failed")
        cur = self.http.get("/api/v1/namespaces/default/pods/p").json()
        stale = dict(cur, metadata=dict(cur["metadata"], resourceVersion="1"))
        r = self.http.request("PUT", "/api/v1/namespaces/default/pods/p/status", body=stale)
        self.assertEqual(r.status, 409)

    def test_events_and_validation(self):
        ev = {"metadata": {"generateName": "p."},
              "involvedObject": {"kind": "Pod", "namespace": "default", "name": "p", "uid": "u"},
              "reason": "QuotaExceeded", "message": "m", "type": "Warning",
              "source": {"component": "kubequota"}}
        r = self.http.post("/api/v1/namespaces/default/events", ev)
        self.assertEqual(r.status, 201, r.text)
        self.assertTrue(r.json()["metadata"]["name"].startswith("p."))
        bad = dict(ev, involvedObject=dict(ev["involvedObject"], namespace="other"))
        self.assertEqual(self.http.post("/api/v1/namespaces/default/events", bad).status, 422)
        self.assertEqual(self.http.post("/api/v1/namespaces/default/events",
                                        dict(ev, metadata={})).status, 422)
        lst = self.http.get("/api/v1/namespaces/default/events").json()
        self.assertEqual([e["reason"] for e in lst["items"]], ["QuotaExceeded"])
        r = self.http.get("/api/v1/events?fieldSelector=reason%3DQuotaExceeded")
        self.assertEqual(len(r.json()["items"]), 1)

    def test_nodes_list_and_watch(self):
        r = self.http.get("/api/v1/nodes").json()
        self.assertEqual(r["kind"], "NodeList")
        self.assertEqual([n["metadata"]["name"] for n in r["items"]], ["n1", "n2"])
        self.assertEqual(r["items"][0]["status"]["allocatable"]["cpu"], "64")
        conn = self.sim.http.connection(5)
        self.addCleanup(conn.close)
        conn.request("GET", "/api/v1/nodes?watch=1&timeoutSeconds=2&resourceVersion=" +
                     r["metadata"]["resourceVersion"],
                     headers={"Authorization": "Bearer " + self.sim.token})
        resp = conn.getresponse()
        self.sim.world.add_node("n3")
        line = resp.readline()
        ev = json.loads(line)
        self.assertEqual((ev["type"], ev["object"]["kind"], ev["object"]["metadata"]["name"]),
                         ("ADDED", "Node", "n3"))

    def test_leases_optimistic_concurrency(self):
        base = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases"
        r = self.http.post(base, {"metadata": {"name": "kq"}, "spec": {"holderIdentity": "a"}})
        self.assertEqual(r.status, 201, r.text)
        lease = r.json()
        lease["spec"]["holderIdentity"] = "b"
        self.assertEqual(self.http.request("PUT", base + "/kq", body=lease).status, 200)
        self.assertEqual(self.http.request("PUT", base + "/kq", body=lease).status, 409)

    def test_fault_injection(self):
        self.sim.fault(method="POST", path=r"/binding$", status=500, count=2)
        self.create("p")
        codes = [self.sim.bind("default", "p", "n1").status for _ in range(3)]
        self.assertEqual(codes, [500, 500, 201])
        self.sim.fault(method="GET", path=r"^/api/v1/pods", hold=True, count=None)
        done = []
        t = threading.Thread(target=lambda: done.append(self.http.get("/api/v1/pods").status))
        t.start()
        wait_until(lambda: self.sim.state()["held"] == 1, 5, msg="request held")
        self.assertEqual(done, [])
        self.sim.clear_faults()
        t.join(5)
        self.assertEqual(done, [200])

    def test_bad_requests(self):
        r = self.http.request("POST", "/api/v1/namespaces/default/pods", raw=b"{nope")
        self.assertEqual(r.status, 400)
        r = self.http.request("POST", "/api/v1/namespaces/default/pods",
                              raw=b"x" * (3 * 1024 * 1024 + 1))
        self.assertEqual(r.status, 413)
        self.assertEqual(self.http.request("PUT", "/api/v1/pods").status, 405)
        self.assertEqual(self.http.get("/api/v1/widgets").status, 404)
        self.assertEqual(self.sim.state()["pods"], [])


if __name__ == "__main__":
    unittest.main()


class ControlApiTest(unittest.TestCase):
    """The /_sim/ control API over HTTP, and the standalone command line."""

    def test_standalone_control_api(self):
        import os
        import subprocess
        import sys
        import tempfile
        c = kqtest.certs()
        d = tempfile.mkdtemp(dir=kqtest.tmp_root())
        port_file = os.path.join(d, "port")
        p = subprocess.Popen([sys.executable, os.path.join(kqtest.HERE, "apisim.py"), "--port", "0",
                              "--cert", c["apiserver"], "--key", c["apiserver_key"],
                              "--token", "t0k", "--nodes", "2", "--port-file", port_file],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self.addCleanup(p.wait, 10)
        self.addCleanup(p.terminate)
        port = wait_until(lambda: os.path.exists(port_file) and open(port_file).read().strip(),
                          10, 0.05, "the port file")
        base = "https://127.0.0.1:%s" % port
        api = kqtest.HttpClient(base, ca=c["ca"], token="t0k")
        ctl = kqtest.HttpClient(base, ca=c["ca"])
        nodes = api.get("/api/v1/nodes").json()["items"]
        self.assertEqual([n["metadata"]["name"] for n in nodes], ["node-1", "node-2"])
        self.assertEqual(ctl.post("/_sim/nodes", {"name": "big", "cpu": "96"}).status, 201)
        r = api.post("/api/v1/namespaces/ns/pods", pod_manifest("p", ns="ns"))
        self.assertEqual(r.status, 201)
        r = ctl.post("/_sim/pods/ns/p/phase", {"phase": "Succeeded"})
        self.assertEqual((r.status, r.json()["status"]["phase"]), (200, "Succeeded"))
        self.assertEqual(ctl.post("/_sim/faults", {"method": "GET", "path": "^/api/v1/nodes",
                                                   "status": 503, "count": 1}).status, 201)
        self.assertEqual(api.get("/api/v1/nodes").status, 503)
        self.assertEqual(api.get("/api/v1/nodes").status, 200)
        floor = ctl.post("/_sim/compact").json()["floor"]
        st = ctl.get("/_sim/state").json()
        self.assertEqual(st["floor"], floor)
        self.assertEqual(len(st["nodes"]), 3)
        self.assertEqual(st["pods"][0]["status"]["phase"], "Succeeded")
        self.assertEqual(ctl.post("/_sim/drop-watches").json(), {"dropped": 0})
        self.assertEqual(ctl.request("DELETE", "/_sim/faults").status, 200)
        self.assertEqual(ctl.post("/_sim/config", {"eviction_status": 429}).status, 200)
        self.assertEqual(api.post("/api/v1/namespaces/ns/pods/p/eviction", {}).status, 429)
        self.assertEqual(ctl.post("/_sim/reset").status, 200)
        st = ctl.get("/_sim/state").json()
        self.assertEqual((st["pods"], st["nodes"]), ([], []))
        self.assertEqual(ctl.get("/_sim/nope").status, 404)
        p.terminate()
        self.assertEqual(p.wait(10), 0)
        self.assertIn(b"listening on " + base.encode(), p.stdout.read())
