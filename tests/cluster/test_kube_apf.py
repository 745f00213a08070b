"""API Priority and Fairness for the chart's ServiceAccount (issue 40), on the real API server.

The chart's pod runs kube-scheduler and kubequota under one ServiceAccount. Without a
FlowSchema of its own, the API server classifies that account's requests by the built-in
`service-accounts` FlowSchema (matchingPrecedence 9000) into the `workload-low` priority
level (k8s.io/apiserver pkg/apis/flowcontrol/bootstrap/default.go,
SuggestedFlowSchemaServiceAccounts), while the stock kube-scheduler, user
system:kube-scheduler, is classified by the built-in `kube-scheduler` FlowSchema (precedence
800) into `workload-high` (SuggestedFlowSchemaKubeScheduler). On the bench's control plane
the difference was kube-scheduler's own Bind waiting 9.7 s per pod on average and thousands of
429 (queue-full) answers (BENCHMARKS.md, issue 40). The chart now ships two FlowSchemas, as
Karpenter's getting-started does for its controller (karpenter-leader-election, precedence
200 -> leader-election; karpenter-workload, 1000 -> workload-high).

What the API server decided is read from its own answer: every response carries the UIDs of
the FlowSchema and the priority level that classified the request
(X-Kubernetes-PF-FlowSchema-UID, X-Kubernetes-PF-PriorityLevel-UID; k8s.io/apiserver
pkg/server/filters/priority-and-fairness.go). The UIDs are looked up by name, not taken from
anything kubequota reports. On the chart before this change the first test fails: the
account's requests were classified by `service-accounts` into `workload-low`.
"""

import http.client
import ssl

import cluster as clus
from kubetest import KubeTestCase, NAMESPACE, queues_config

FS = "/apis/flowcontrol.apiserver.k8s.io/v1/flowschemas/"
PL = "/apis/flowcontrol.apiserver.k8s.io/v1/prioritylevelconfigurations/"


class ChartAccountPriority(KubeTestCase):
    CONFIG = queues_config({"name": "root", "submitacl": "*", "queues": [{"name": "default"}]})
    SCHEDULER = False

    def classified(self, token, path):
        """(FlowSchema UID, PriorityLevel UID) the API server gave one GET of path."""
        ctx = ssl.create_default_context(cafile=self.c.certs["ca"])
        h = http.client.HTTPSConnection("127.0.0.1", self.c.port, context=ctx, timeout=30)
        try:
            h.request("GET", path, headers={"Authorization": "Bearer " + token})
            r = h.getresponse()
            r.read()
            # classified before authorization: a 403 carries the headers as well
            self.assertIn(r.status, (200, 403, 404), "GET %s" % path)
            return r.getheader("X-Kubernetes-PF-FlowSchema-UID"), r.getheader("X-Kubernetes-PF-PriorityLevel-UID")
        finally:
            h.close()

    def uid(self, prefix, name):
        return self.c.api().get(prefix + name)["metadata"]["uid"]

    def test_the_charts_account_is_classified_as_the_stock_scheduler(self):
        fs, pl = self.classified(self.c.sa_token(), "/api/v1/namespaces/%s/pods?limit=1" % NAMESPACE)
        self.assertNotEqual(fs, self.uid(FS, "service-accounts"), "still the built-in service-accounts schema")
        self.assertEqual(fs, self.uid(FS, clus.RELEASE), "the chart's FlowSchema")
        self.assertEqual(pl, self.uid(PL, "workload-high"), "the stock kube-scheduler's priority level")
        # cluster-scoped requests (kube-scheduler lists nodes) are classified the same way
        fs, _ = self.classified(self.c.sa_token(), "/api/v1/nodes?limit=1")
        self.assertEqual(fs, self.uid(FS, clus.RELEASE))

    def test_its_leases_go_to_leader_election(self):
        fs, pl = self.classified(self.c.sa_token(),
                                 "/apis/coordination.k8s.io/v1/namespaces/%s/leases/no-such-lease" % NAMESPACE)
        self.assertEqual(fs, self.uid(FS, clus.RELEASE + "-leader-election"))
        self.assertEqual(pl, self.uid(PL, "leader-election"))

    def test_a_tenant_does_not_ride_it(self):
        # alice's requests keep the built-in classification (global-default for a user)
        fs, pl = self.classified(clus.USERS["alice"][0], "/api/v1/namespaces/team-a/pods?limit=1")
        self.assertNotIn(fs, (self.uid(FS, clus.RELEASE), self.uid(FS, clus.RELEASE + "-leader-election")))
        self.assertNotEqual(pl, self.uid(PL, "workload-high"))
        # nor does a ServiceAccount of the same name in a tenant's namespace (the subject names
        # the release namespace): created here by the admin, as a tenant with edit could
        api = self.c.api()
        api.request("POST", "/api/v1/namespaces/team-a/serviceaccounts",
                    {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": clus.SA}}, ok=(201, 409))
        tok = api.post("/api/v1/namespaces/team-a/serviceaccounts/%s/token" % clus.SA,
                       {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                        "spec": {"expirationSeconds": 600}})["status"]["token"]
        fs, pl = self.classified(tok, "/api/v1/namespaces/team-a/pods?limit=1")
        self.assertEqual(fs, self.uid(FS, "service-accounts"))
        self.assertEqual(pl, self.uid(PL, "workload-low"))
