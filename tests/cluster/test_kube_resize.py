"""In-place resize (pods/resize) on a real API server, with the admission gate on (the
chart's default): issue 37 routes 5 and 9. What a pod counts with must always be its request
at the moment it is counted (gate release, filter, bind); a resize is refused only when a
limit is really exceeded, and two resizes cannot together pass one.

The tenants resize their own pods with their own tokens (the tier's tenant ClusterRole grants
pods/resize, as platforms commonly do). Every expected number is worked out below from the
queues' maxima and the pods' sizes, and "what the API server holds" is computed here from the
pods the API server returns, by Kubernetes' rule for a pod being resized: per container the
larger of spec.resources.requests and status.containerStatuses[].resources.requests (and
allocatedResources), docs/gating.md "Resize of a waiting pod".
"""

import json
import threading
import time

from kubetest import KubeTestCase, queues_config, wait_until

GATE = "kubequota.io/admission"


def gates(pod):
    return [g["name"] for g in pod["spec"].get("schedulingGates") or []]


def millicores(q):
    """A cpu quantity as an integer of millicores ("1", "1500m", "0.5")."""
    q = str(q)
    if q.endswith("m"):
        return int(q[:-1])
    return int(round(float(q) * 1000))


def cpu_m(pod):
    """The pod's cpu request as the API server holds it now, in millicores: per container
    the larger of spec and status (actuated, allocated), summed."""
    status = {c["name"]: c for c in (pod.get("status") or {}).get("containerStatuses") or []}
    total = 0
    for c in pod["spec"]["containers"]:
        want = millicores(((c.get("resources") or {}).get("requests") or {}).get("cpu", "0"))
        st = status.get(c["name"]) or {}
        for src in (((st.get("resources") or {}).get("requests") or {}), st.get("allocatedResources") or {}):
            if "cpu" in src:
                want = max(want, millicores(src["cpu"]))
        total += want
    return total


def resize_body(cpu):
    return {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}}


def mk_queue(name):
    return {"name": name, "resources": {"max": {"vcore": "4"}}}


class Resize(KubeTestCase):
    # one 4-cpu queue per test: a namespace being deleted by the test before never counts in
    # the next one's queue
    CONFIG = queues_config({"name": "default"}, mk_queue("rsza"), mk_queue("rszb"), mk_queue("rszc"),
                           mk_queue("rszd"),
                           # no queue max: group dev (alice, bob) may use 4 cpu here
                           {"name": "rszg", "limits": [{"limit": "dev in rszg", "groups": ["dev"],
                                                        "maxresources": {"cpu": "4"}}]})

    def run_pod(self, ns, name, user, queue, cpu):
        """A pod that keeps running (restartPolicy Always), created by its tenant."""
        body = self.c.pod_body(name, cpu=cpu, labels={"kubequota.io/queue": queue})
        body["spec"]["restartPolicy"] = "Always"
        return self.c.api(user).post("/api/v1/namespaces/%s/pods" % ns, body)

    def advertise_resize(self, ns, name):
        """As a kubelet that supports in-place resize does: once the pod runs, its container
        statuses carry the resources actuated. The API server refuses a resize of a running
        pod without them ("Pod running on node without support for resize"), and kwok's
        pod-ready stage does not write them, so the test writes them as the kubelet would."""
        path = "/api/v1/namespaces/%s/pods/%s" % (ns, name)

        def running():
            p = self.c.api().get(path)
            cs = (p.get("status") or {}).get("containerStatuses") or []
            return p if cs and all("running" in (c.get("state") or {}) for c in cs) else None

        def put():
            p = wait_until(running, 30, 0.1, "%s/%s running" % (ns, name))
            spec = {c["name"]: c.get("resources") or {} for c in p["spec"]["containers"]}
            for c in p["status"]["containerStatuses"]:
                c["resources"] = {k: v for k, v in spec[c["name"]].items() if k in ("requests", "limits")}
            st, _ = self.c.api().status("PUT", path + "/status", json.dumps(p))
            return st == 200
        wait_until(put, 30, 0.2, "%s/%s's container statuses to carry resources" % (ns, name))

    def resize(self, ns, name, user, cpu):
        """(HTTP status, body) of the tenant's own pods/resize."""
        return self.c.api(user).status("PATCH", "/api/v1/namespaces/%s/pods/%s/resize" % (ns, name),
                                       json.dumps(resize_body(cpu)),
                                       ctype="application/strategic-merge-patch+json")

    def bound_cpu(self, ns):
        """{pod: millicores} of the pods the API server holds bound (and not ending) in ns."""
        out = {}
        for p in self.c.pods(ns):
            if p["spec"].get("nodeName") and not p["metadata"].get("deletionTimestamp") and \
                    p.get("status", {}).get("phase") not in ("Succeeded", "Failed"):
                out[p["metadata"]["name"]] = cpu_m(p)
        return out

    def counted_cpu(self, ns):
        """What kubequota must count in the namespace's queue: bound pods and released (ungated,
        unbound) pods of ours, at the request the API server holds for each."""
        total = 0
        for p in self.c.pods(ns):
            if p["metadata"].get("deletionTimestamp"):
                continue
            if p["spec"].get("nodeName") or GATE not in gates(p):
                total += cpu_m(p)
        return total

    def assert_view_matches(self, ns, queue, expect_m):
        """kubequota's usage view of the queue equals the API server's pods (expect_m, worked
        out by hand in the test, must agree with them too)."""
        wait_until(lambda: self.counted_cpu(ns) == expect_m, 20, 0.2,
                   "the API server's pods of %s to request %dm" % (ns, expect_m))
        try:
            wait_until(lambda: (self.queue_usage(queue).get("vcore") or 0) == expect_m, 20, 0.2,
                       "kubequota's view of %s to show %dm" % (queue, expect_m))
        except AssertionError:
            raise AssertionError("kubequota shows %s vcore=%s, the API server's pods request %dm: %s" % (
                queue, self.queue_usage(queue).get("vcore"), expect_m, self.bound_cpu(ns))) from None

    def watch_max(self, ns, max_m, seconds):
        """For `seconds`, the bound pods of ns never request more than max_m together."""
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            b = self.bound_cpu(ns)
            self.assertLessEqual(sum(b.values()), max_m,
                                 "the API server holds bound pods requesting %dm in a %dm queue: %s"
                                 % (sum(b.values()), max_m, b))
            time.sleep(0.2)

    # ---- (a) a gated pod resized past the queue's room ---------------------------------

    def test_gated_pod_resized_past_the_room(self):
        ns = self.ns()
        # root.rsza: max 4 cpu. alice and bob run 2 cpu each: full.
        self.run_pod(ns, "r1", "alice", "root.rsza", "2")
        self.run_pod(ns, "r2", "bob", "root.rsza", "2")
        self.wait_bound(ns, "r1")
        self.wait_bound(ns, "r2")
        # carol's 1-cpu pod waits at the gate; she resizes it to 3 cpu (under the max: admitted)
        self.run_pod(ns, "w", "carol", "root.rsza", "1")
        wait_until(lambda: GATE in gates(self.get(ns, "w")), 10, 0.1, "w gated")
        self.assert_stays_pending(ns, "w", 1.5)
        st, body = self.resize(ns, "w", "carol", "3")
        self.assertEqual(st, 200, body)
        self.assertEqual(cpu_m(self.get(ns, "w")), 3000)
        # r1 ends: 2 cpu of room, w asks 3 now: it must keep waiting (2 + 3 > 4)
        self.delete(ns, "r1")
        self.watch_max(ns, 4000, 6)
        self.assertFalse(self.node_of(ns, "w"), "w (3 cpu) was bound beside r2 (2 cpu) in a 4-cpu queue")
        self.assert_view_matches(ns, "root.rsza", 2000)                      # r2
        # r2 ends: w fits, and is counted at 3 cpu
        self.delete(ns, "r2")
        self.wait_bound(ns, "w", timeout=60)
        self.watch_max(ns, 4000, 2)
        self.assert_view_matches(ns, "root.rsza", 3000)                      # w

    # ---- (b) a gated pod resized over the max ------------------------------------------

    def test_gated_pod_resized_over_the_max(self):
        ns = self.ns()
        self.run_pod(ns, "f", "alice", "root.rszb", "4")                   # the whole queue
        self.wait_bound(ns, "f")
        self.run_pod(ns, "w", "bob", "root.rszb", "1")
        wait_until(lambda: GATE in gates(self.get(ns, "w")), 10, 0.1, "w gated")
        # 5 cpu alone is over root.rszb's 4: it could never be released
        st, body = self.resize(ns, "w", "bob", "5")
        self.assertEqual(st, 403, "a resize of a gated pod to 5 cpu in a 4-cpu queue was admitted: %s" % body)
        self.assertIn("never fit", body["message"])
        self.assertIn("root.rszb", body["message"])
        self.assertEqual(cpu_m(self.get(ns, "w")), 1000)
        # 3 cpu does not fit now but may later: admitted, and w keeps waiting
        st, body = self.resize(ns, "w", "bob", "3")
        self.assertEqual(st, 200, body)
        self.assert_stays_pending(ns, "w", 1.5)
        self.assertIn(GATE, gates(self.get(ns, "w")))
        self.assert_view_matches(ns, "root.rszb", 4000)                      # f

    # ---- (c) a running pod grows within the max ----------------------------------------

    def test_running_pod_grows_within_the_max(self):
        ns = self.ns()
        self.run_pod(ns, "p", "alice", "root.rszc", "2")
        self.wait_bound(ns, "p")
        self.advertise_resize(ns, "p")
        self.assert_view_matches(ns, "root.rszc", 2000)
        # 2 -> 3500m in a 4-cpu queue where nothing else runs: within every limit
        st, body = self.resize(ns, "p", "alice", "3500m")
        self.assertEqual(st, 200, "a resize within the queue's max was refused: %s" % body)
        # counted at the request the API server holds for it now: spec 3500m, status (what the
        # kubelet actuated; kwok never actuates a resize) 2 cpu; the larger counts, as
        # kube-scheduler counts it
        self.assertEqual(cpu_m(self.get(ns, "p")), 3500)
        self.assert_view_matches(ns, "root.rszc", 3500)
        # one more cpu would pass the max: refused, and nothing changes
        st, body = self.resize(ns, "p", "alice", "4500m")
        self.assertEqual(st, 403, body)
        self.assert_view_matches(ns, "root.rszc", 3500)

    # ---- (d) two resizes at once ---------------------------------------------------------

    def concurrent_resizes(self, queue, limit_text, n, base_m, grow_m, fit):
        """n running pods of base_m each (users of group dev in turn) all grow to grow_m at
        once; only `fit` of the growths fit under the 4-cpu limit. Exactly `fit` resizes are
        admitted, the others refused by that limit, and the API server never holds more
        than 4 cpu."""
        ns = self.ns()
        users = ["alice", "bob", "dave", "eve"]
        names = ["p%d" % i for i in range(n)]
        for i, name in enumerate(names):
            self.run_pod(ns, name, users[i % len(users)], queue, "%dm" % base_m)
        for name in names:
            self.wait_bound(ns, name)
            self.advertise_resize(ns, name)
        self.assert_view_matches(ns, queue, n * base_m)
        results = {}
        go = threading.Barrier(n)

        def grow(i, name):
            go.wait()
            results[name] = self.resize(ns, name, users[i % len(users)], "%dm" % grow_m)
        ts = [threading.Thread(target=grow, args=(i, name)) for i, name in enumerate(names)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        admitted = sorted(name for name, (st, _) in results.items() if st == 200)
        self.assertLessEqual(len(admitted), fit, "%d resizes were admitted, %d fit: %s" % (len(admitted), fit, results))
        self.assertEqual(len(admitted), fit, "%d resizes were admitted, though %d fit: %s" % (len(admitted), fit, results))
        for name, (st, body) in results.items():
            if name not in admitted:
                self.assertEqual(st, 403, body)
                self.assertIn(limit_text, body["message"])
        self.watch_max(ns, 4000, 2)
        self.assert_view_matches(ns, queue, n * base_m + fit * (grow_m - base_m))

    def test_concurrent_resizes_cannot_pass_the_max_together(self):
        # root.rszd's max 4 cpu (also its quota group's max): two 1-cpu pods grow to 2500m
        # at once; either alone fits (2500 + 1000 <= 4000), both do not (5000)
        self.concurrent_resizes("root.rszd", "root.rszd", 2, 1000, 2500, 1)

    def test_concurrent_resizes_cannot_pass_a_group_limit_together(self):
        # group dev's 4 cpu in root.rszg, a queue without a max: six 500m pods (3 cpu) grow
        # to 1 cpu at once; 1 cpu of room takes two growths of 500m, not six
        self.concurrent_resizes("root.rszg", "dev in rszg", 6, 500, 1000, 2)
