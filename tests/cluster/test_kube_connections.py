"""Connections from the real control plane to kubequota's listeners, counted by kubequota's
`kubequota_tls_connections_total{listener}` and `kubequota_connections_total{listener}`
(docs/metrics.md; the chart's scheduler port is plain HTTP on loopback).

The API server calls admission webhooks through a cached client-go transport that keeps
connections alive (k8s.io/apiserver pkg/util/webhook/client.go builds a rest client per
webhook and caches it; client-go's transport sets MaxIdleConnsPerHost 25,
k8s.io/apimachinery pkg/util/net/http.go SetTransportDefaults). A webhook server that closed
each connection after answering would cost the API server a TLS handshake per pod create and
per webhook: what this test asserts is that kubequota keeps the API server's connections
open, so many webhook calls share few handshakes. kube-scheduler's extender client
(k8s.io/kubernetes pkg/scheduler/extender.go, an http.Transport with Go's default of 2 idle
connections per host) likewise keeps its connections to the scheduler listener while binds
do not overlap much. The expected bounds come from the pod count, not from anything kubequota
reports about itself; that each create went through the webhook is read from the pods
(the identity webhook's annotation, tests/cluster/test_kube_identity.py).
"""

import concurrent.futures
import json

import re

from kubetest import KubeTestCase, queues_config, wait_until

PODS = 24
BURST, BURST_PARALLEL = 200, 64


def counter(text, name, labels):
    """Value of one counter series in a Prometheus text exposition (0 when absent)."""
    want = ",".join('%s="%s"' % kv for kv in sorted(labels.items()))
    total = 0.0
    for line in text.splitlines():
        m = re.match(r"^%s\{([^}]*)\} (\S+)$" % re.escape(name), line)
        if m and ",".join(sorted(m.group(1).split(","))) == want:
            total += float(m.group(2))
    return total


class ConnectionsFromTheControlPlane(KubeTestCase):
    CHART_VALUES = {"kubequota": {"admissionGate": {"enabled": False}}}
    CONFIG = queues_config({"name": "default"})

    def metrics(self):
        r = self.c.kubequota_client().get("/metrics")
        self.assertEqual(r.status, 200)
        return r.body if isinstance(r.body, str) else r.body.decode()

    def test_api_server_reuses_its_webhook_connections(self):
        ns = self.ns()
        before = self.metrics()
        conns0 = counter(before, "kubequota_tls_connections_total", {"listener": "webhook"})
        # the chart's scheduler port is plain HTTP on loopback: connections, no handshakes
        sched0 = counter(before, "kubequota_connections_total", {"listener": "scheduler"})
        for i in range(PODS):
            p = self.pod(ns, "w%d" % i, user="alice", cpu="10m", memory="16Mi")
            # the mutating webhook answered this create: it stamped the authenticated user
            info = json.loads(p["metadata"].get("annotations", {}).get("kubequota.io/user-info", "{}"))
            self.assertEqual(info.get("user"), "alice", p["metadata"])
        for i in range(PODS):
            self.wait_bound(ns, "w%d" % i)
        after = self.metrics()
        conns = counter(after, "kubequota_tls_connections_total", {"listener": "webhook"}) - conns0
        sched = counter(after, "kubequota_connections_total", {"listener": "scheduler"}) - sched0
        self.assertEqual(counter(after, "kubequota_tls_connections_total", {"listener": "scheduler"}), 0,
                         "the chart's scheduler port speaks plain HTTP: no TLS handshake at all")
        # PODS webhook calls over a handful of connections: one handshake per call would be >= PODS
        self.assertLess(conns, PODS / 4, "%d webhook TLS connections for %d pods" % (conns, PODS))
        # PODS filter and PODS bind calls: one connection per call would be >= 2 * PODS
        self.assertLess(sched, PODS / 2, "%d scheduler-listener connections for %d pods" % (sched, PODS))
        self.assertGreater(sched, 0, "kube-scheduler reached kubequota over no connection at all")
        self.assertGreater(counter(after, "kubequota_tls_connections_total", {"listener": "webhook"}), 0,
                           "the webhook listener counted no connection at all")

    def test_a_burst_of_creates_all_pass_the_webhooks(self):
        # kube-controller-manager creates a ReplicaSet's or Job's pods in slow-start batches of
        # up to 500 at once (k8s.io/kubernetes pkg/controller/replicaset/replica_set.go,
        # slowStartBatch): the API server then calls the webhooks over as many connections at
        # once, all from its one address. Every create must pass; a webhook that refuses or
        # drops a connection fails the create (failurePolicy Fail: "failed calling webhook").
        ns = self.ns()
        n, par = BURST, BURST_PARALLEL
        failures = []

        def create(i):
            st, body = self.c.api("alice").status(
                "POST", "/api/v1/namespaces/%s/pods" % ns,
                # held by a gate of nobody's: the webhooks see every create, kube-scheduler none
                self.c.pod_body("b%d" % i, cpu="1m", memory="1Mi", gates=["example.com/hold"]))
            if st != 201:
                failures.append((i, st, str(body)[:300]))
        with concurrent.futures.ThreadPoolExecutor(par) as ex:
            list(ex.map(create, range(n)))
        self.assertEqual(failures, [], "%d of %d creates failed" % (len(failures), n))
        self.assertEqual(len(self.c.pods(ns)), n)
