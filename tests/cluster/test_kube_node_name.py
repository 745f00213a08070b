"""Pods created with spec.nodeName, on a real control plane (issue 37, routes 1 and 9).

Such a pod is bound from its creation: no kube-scheduler, filter, bind or admission gate
sees it, so kubequota checks it at admission, whoever creates it, and counts it there. This
follows Kubernetes' own ResourceQuota admission, a validating plugin that charges every
create to the quota whatever the requester (a controller's ServiceAccount included),
evaluates concurrent creates against one running total and skips the charge on a dry run
(k8s.io/apiserver pkg/admission/plugin/resourcequota, admission.go QuotaAdmission.Validate,
controller.go checkQuotas/checkRequest; its tests k8s.io/kubernetes
plugin/pkg/admission/resourcequota/admission_test.go TestAdmitBelowQuotaLimit,
TestAdmitExceedQuotaLimit, TestAdmitDryRun).

- a tenant's Deployment whose template names a node: the pods are created by
  kube-controller-manager's replicaset-controller ServiceAccount (trusted by kubequota's
  webhooks: it is not stamped), yet the API server never holds more bound pods than the
  queue's max allows, and kubequota's usage view equals what the API server holds;
- a single pod with nodeName into an idle queue with a max is admitted (it was refused:
  the queue's quota group had no request, so its runtime was 0);
- concurrent creates with nodeName, by the tenant's own token, into a queue with room for
  two: exactly two are admitted.

Expected numbers come from the queue max (2 cpu) and the pod size (1 cpu): 2 pods, 2000
millicores; nothing is taken from kubequota's answers. What the API server holds is read
from the API server (pods with spec.nodeName that are not terminal, summed requests).
"""

import json
import threading
import time

from kubetest import SCHED, KubeTestCase, queues_config, wait_until

MAX_CPU = "2"       # each queue below: max 2 cpu
ROOM = 2            # 1-cpu pods that fit it
POD_CPU = "1"


def millicores(q):
    q = str(q)
    return int(q[:-1]) if q.endswith("m") else int(float(q) * 1000)


class NodeNameAdmission(KubeTestCase):
    # the gate is off, as in test_kube_limits: nothing but admission could stop these pods
    CHART_VALUES = {"kubequota": {"admissionGate": {"enabled": False}}}
    CONFIG = queues_config(
        {"name": "default"},
        {"name": "nn-deploy", "resources": {"max": {"vcore": MAX_CPU}}},
        {"name": "nn-single", "resources": {"max": {"vcore": MAX_CPU}}},
        {"name": "nn-race", "resources": {"max": {"vcore": MAX_CPU}}})

    def node(self):
        nodes = self.c.api().get("/api/v1/nodes")["items"]
        names = sorted(n["metadata"]["name"] for n in nodes
                       if (n["metadata"].get("annotations") or {}).get("kwok.x-k8s.io/node") == "fake")
        self.assertTrue(names, "no kwok node")
        return names[0]

    def held(self, ns):
        """What the API server holds in ns: (pods with a node that are not terminal, their cpu
        requests summed in millicores)."""
        pods = [p for p in self.c.pods(ns)
                if p["spec"].get("nodeName") and p.get("status", {}).get("phase") not in ("Succeeded", "Failed")]
        cpu = sum(millicores(c.get("resources", {}).get("requests", {}).get("cpu", "0"))
                  for p in pods for c in p["spec"]["containers"])
        return len(pods), cpu

    def view_cpu(self, queue):
        return self.queue_usage(queue).get("vcore", 0)

    def assert_view_matches(self, ns, queue, timeout=20):
        """kubequota's queue usage equals what the API server holds (the pods of this test are
        the only ones in the queue): counted once each, no reservation left beside them."""
        def same():
            n, cpu = self.held(ns)
            v = self.view_cpu(queue)
            return (v == cpu) and (n, cpu, v)
        try:
            return wait_until(same, timeout, 0.25, "usage view of %s equal to the API server" % queue)
        except AssertionError:
            n, cpu = self.held(ns)
            self.fail("%s: kubequota's view says %s millicores, the API server holds %d pods with %d "
                      "millicores" % (queue, self.view_cpu(queue), n, cpu))

    def node_pod(self, name, queue, node):
        body = self.c.pod_body(name, cpu=POD_CPU, labels={"kubequota.io/queue": queue})
        body["spec"]["nodeName"] = node
        return body

    def test_deployment_with_node_name_stays_within_the_queue_max(self):
        """Route 1: the ReplicaSet controller (a trusted ServiceAccount) creates the pods."""
        ns, node, queue = self.ns(), self.node(), "root.nn-deploy"
        tmpl = self.node_pod("x", queue, node)
        tmpl["metadata"] = {"labels": {"app": "web", "kubequota.io/queue": queue}}
        tmpl["spec"]["restartPolicy"] = "Always"  # a Deployment's only choice
        dep = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": ns},
               "spec": {"replicas": 6, "selector": {"matchLabels": {"app": "web"}}, "template": tmpl}}
        self.c.api("alice").post("/apis/apps/v1/namespaces/%s/deployments" % ns, dep)
        # the controller creates until refused, then retries with backoff: watch the API
        # server for 10 s and never see more than the max
        first = wait_until(lambda: self.held(ns)[0] >= 1 and self.held(ns), 30, 0.25,
                           "the ReplicaSet's first pod on %s" % node)
        worst = first
        end = time.monotonic() + 10
        while time.monotonic() < end:
            n, cpu = self.held(ns)
            worst = max(worst, (n, cpu))
            self.assertLessEqual(cpu, millicores(MAX_CPU),
                                 "the API server holds %d bound pods with %d millicores in a queue with max %s "
                                 "cpu" % (n, cpu, MAX_CPU))
            time.sleep(0.25)
        # and the limit is used, not refused outright: exactly the room
        self.assertEqual(self.held(ns), (ROOM, ROOM * millicores(POD_CPU)), "worst seen %s" % (worst,))
        # the pods are alice's (the identity the workloads webhook stamped on the template)
        for p in self.c.pods(ns):
            info = json.loads(p["metadata"]["annotations"]["kubequota.io/user-info"])
            self.assertEqual(info["user"], "alice")
        # the controller was told why
        ev = wait_until(lambda: [e for e in self.c.events(ns) if e.get("reason") == "FailedCreate"], 20, 0.25,
                        "a FailedCreate event of the ReplicaSet")
        self.assertIn(queue, ev[0]["message"])
        self.assert_view_matches(ns, queue)

    def test_single_pod_with_node_name_into_an_idle_queue_is_admitted(self):
        """Route 9: nothing used, room for 2: one 1-cpu pod is admitted."""
        ns, node, queue = self.ns(), self.node(), "root.nn-single"
        st, body = self.c.api("alice").status("POST", "/api/v1/namespaces/%s/pods" % ns,
                                              self.node_pod("one", queue, node))
        self.assertEqual(st, 201, body)
        self.assertEqual(self.held(ns), (1, millicores(POD_CPU)))
        self.assert_view_matches(ns, queue)
        # the second fits too, the third does not (2 cpu)
        self.assertEqual(self.c.api("alice").status("POST", "/api/v1/namespaces/%s/pods" % ns,
                                                    self.node_pod("two", queue, node))[0], 201)
        st, body = self.c.api("alice").status("POST", "/api/v1/namespaces/%s/pods" % ns,
                                              self.node_pod("three", queue, node))
        self.assertEqual(st, 403, body)
        self.assertIn(queue, json.dumps(body))
        self.assertEqual(self.held(ns), (2, 2 * millicores(POD_CPU)))
        self.assert_view_matches(ns, queue)

    def test_concurrent_creates_with_node_name_cannot_pass_the_max(self):
        """Route 9: 12 concurrent creates (generateName: no name, no uid at mutating
        admission), room for 2: exactly 2 admitted."""
        ns, node, queue = self.ns(), self.node(), "root.nn-race"
        n_threads = 12
        results = [None] * n_threads
        go = threading.Event()

        def create(i):
            body = self.node_pod("x", queue, node)
            del body["metadata"]["name"]
            body["metadata"]["generateName"] = "race-"
            go.wait()
            results[i] = self.c.api("alice").status("POST", "/api/v1/namespaces/%s/pods" % ns, body)

        threads = [threading.Thread(target=create, args=(i,)) for i in range(n_threads)]
        for t in threads:
            t.start()
        go.set()
        for t in threads:
            t.join(60)
        codes = sorted(r[0] for r in results)
        admitted = codes.count(201)
        self.assertEqual(codes.count(201) + codes.count(403), n_threads, "unexpected answers: %s" % results)
        self.assertEqual(admitted, ROOM, "%d of %d concurrent creates admitted into a queue with room for %d: %s"
                         % (admitted, n_threads, ROOM, codes))
        self.assertEqual(self.held(ns), (ROOM, ROOM * millicores(POD_CPU)))
        self.assert_view_matches(ns, queue)
        # and the refusals say which limit
        refused = [json.dumps(b) for st, b in results if st == 403]
        self.assertTrue(all(queue in r for r in refused), refused[:1])
