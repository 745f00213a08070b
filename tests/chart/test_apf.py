"""The chart's FlowSchemas (issue 40): the chart's ServiceAccount, under which kube-scheduler
and kubequota run, is classified as the stock kube-scheduler is (the built-in
`kube-scheduler` FlowSchema, precedence 800 -> workload-high; k8s.io/apiserver
pkg/apis/flowcontrol/bootstrap/default.go), not by the built-in `service-accounts` schema
(9000 -> workload-low), and its Lease calls as leader election (Karpenter's getting-started
FlowSchemas: 200 -> leader-election, 1000 -> workload-high). The real API server's
classification is tested in tests/cluster/test_kube_apf.py.
"""

import unittest

import chartlib as cl

SERVICE_ACCOUNTS_PRECEDENCE = 9000  # the built-in schema this must come before
SUBJECT = {"kind": "ServiceAccount", "serviceAccount": {"name": cl.fullname(), "namespace": cl.NAMESPACE}}


def rendered(*sets):
    r = cl.render_with(*sets)
    if r.returncode != 0:
        raise AssertionError(r.stderr)
    return cl.Rendered("adhoc", sets, r.stdout)


class FlowSchemas(unittest.TestCase):
    def test_default_classifies_the_charts_account_as_the_stock_scheduler(self):
        r = rendered()
        fs = r.one("FlowSchema", cl.fullname())["spec"]
        self.assertEqual(fs["priorityLevelConfiguration"], {"name": "workload-high"})
        self.assertLess(fs["matchingPrecedence"], SERVICE_ACCOUNTS_PRECEDENCE)
        self.assertEqual(fs["distinguisherMethod"], {"type": "ByUser"})
        (rule,) = fs["rules"]
        self.assertEqual(rule["subjects"], [SUBJECT], "the chart's account and no other")
        (res,) = rule["resourceRules"]
        self.assertEqual((res["apiGroups"], res["resources"], res["verbs"], res["namespaces"], res["clusterScope"]),
                         (["*"], ["*"], ["*"], ["*"], True))
        self.assertEqual(rule["nonResourceRules"], [{"nonResourceURLs": ["*"], "verbs": ["*"]}])

    def test_leases_in_the_release_namespace_are_leader_election(self):
        r = rendered()
        main = r.one("FlowSchema", cl.fullname())["spec"]
        le = r.one("FlowSchema", cl.fullname() + "-leader-election")["spec"]
        self.assertEqual(le["priorityLevelConfiguration"], {"name": "leader-election"})
        self.assertLess(le["matchingPrecedence"], main["matchingPrecedence"], "matched before the catch-all one")
        (rule,) = le["rules"]
        self.assertEqual(rule["subjects"], [SUBJECT])
        self.assertEqual(rule["resourceRules"], [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                                                  "namespaces": [cl.NAMESPACE], "verbs": ["get", "create", "update"]}])

    def test_values(self):
        r = rendered("--set", "apiPriority.priorityLevel=system", "--set", "apiPriority.matchingPrecedence=850")
        fs = r.one("FlowSchema", cl.fullname())["spec"]
        self.assertEqual((fs["priorityLevelConfiguration"]["name"], fs["matchingPrecedence"]), ("system", 850))
        self.assertEqual(rendered("--set", "apiPriority.enabled=false").all("FlowSchema"), [])
        bad = cl.render_with("--set", "apiPriority.matchingPrecedence=0")
        self.assertNotEqual(bad.returncode, 0)
        self.assertIn("matchingPrecedence", bad.stderr)

    def test_valid_objects(self):
        # kubernetes-models' schema of flowcontrol.apiserver.k8s.io/v1 FlowSchema
        docs = rendered().all("FlowSchema")
        self.assertEqual(len(docs), 2)
        self.assertEqual(cl.validate_objects(docs), [None, None])


if __name__ == "__main__":
    unittest.main()
