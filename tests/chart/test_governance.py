"""Issue 37, routes 4 and 6, in the rendered chart: which namespaces kubequota governs
(webhooks.filtering rendered into kubequota's flags, the kubequota.io/enabled label in the
webhooks' namespaceSelectors) and who may bind a pod there (the ValidatingAdmissionPolicy
on pods/binding, its CEL evaluated here with a real CEL evaluator, npm @bufbuild/cel, as the
API server evaluates it: variables first, then the validation, with `request` and
`namespaceObject`).

The expectations are the issue's: every namespace but kube-system, kube-public,
kube-node-lease, the release namespace and webhooks.excludeNamespaces is governed by
default; YuniKorn's processNamespaces/bypassNamespaces narrow it (same names, same
unanchored regular expressions); kubequota.io/enabled=true governs a namespace the
expressions bypass, =false opts one out; in a governed namespace only kubequota's
ServiceAccount (kube-scheduler and kubequota run under it) and bindingPolicy.allowedBinders
may bind.
"""

import unittest

import yaml

import chartlib as cl

SA = "system:serviceaccount:%s:%s" % (cl.NAMESPACE, cl.fullname())


def rendered(*sets):
    r = cl.render_with(*sets)
    if r.returncode != 0:
        raise AssertionError(r.stderr)
    return cl.Rendered("adhoc", sets, r.stdout)


def policy(r):
    vap = [d for d in r.docs if d["kind"] == "ValidatingAdmissionPolicy"]
    return vap[0] if vap else None


def binding_request(ns, user):
    return {"uid": "u", "operation": "CREATE", "namespace": ns, "name": "p", "subResource": "binding",
            "userInfo": {"username": user, "groups": ["system:authenticated"]},
            "kind": {"group": "", "version": "v1", "kind": "Binding"},
            "resource": {"group": "", "version": "v1", "resource": "pods"}}


def namespace(name, enabled=None):
    labels = {"kubernetes.io/metadata.name": name}
    if enabled is not None:
        labels["kubequota.io/enabled"] = enabled
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


class FilteringArgsTest(unittest.TestCase):
    def test_default_is_yunikorns(self):
        r = cl.render("default")
        self.assertEqual(r.arg("--bypass-namespaces"), "^kube-system$")
        self.assertIsNone(r.arg("--process-namespaces"))

    def test_values_reach_the_flags_verbatim(self):
        r = rendered("--set-string", r"webhooks.filtering.processNamespaces=^team-[a-z]+$\,^batch$",
                     "--set-string", "webhooks.filtering.bypassNamespaces=-sandbox$")
        self.assertEqual(r.arg("--process-namespaces"), "^team-[a-z]+$,^batch$")
        self.assertEqual(r.arg("--bypass-namespaces"), "-sandbox$")
        # "" bypasses nothing (the namespaceSelector still excludes the system namespaces)
        r = rendered("--set-string", "webhooks.filtering.bypassNamespaces=")
        self.assertEqual(r.arg("--bypass-namespaces"), "")

    def test_system_namespaces_always_excluded(self):
        r = rendered("--set-json", "webhooks.excludeNamespaces=[]")
        for cfg in r.all("MutatingWebhookConfiguration") + r.all("ValidatingWebhookConfiguration"):
            for w in cfg["webhooks"]:
                e = {x["key"]: x for x in w["namespaceSelector"]["matchExpressions"]}["kubernetes.io/metadata.name"]
                if e["operator"] == "NotIn":
                    self.assertLessEqual({"kube-system", "kube-public", "kube-node-lease", cl.NAMESPACE},
                                         set(e["values"]), w["name"])

    def test_status_subresource_in_identity_rules(self):
        w = [w for w in cl.render("default").one("MutatingWebhookConfiguration")["webhooks"]
             if w["name"] == "identity.kubequota.io"][0]
        self.assertIn("pods/status", [res for rule in w["rules"] if "UPDATE" in rule["operations"]
                                      for res in rule["resources"]])


class BindingPolicyTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.default = cl.render("default")

    def evaluate(self, vap, ns_obj, user):
        """The policy's verdict for a Binding in ns_obj by user: True (allowed) or False;
        None when the namespaceSelector does not even match (allowed, never evaluated)."""
        labels = ns_obj["metadata"]["labels"]
        sel = vap["spec"]["matchConstraints"]["namespaceSelector"]["matchExpressions"]
        for e in sel:
            if e["operator"] == "NotIn" and labels.get(e["key"]) in e["values"]:
                return None
        req = binding_request(ns_obj["metadata"]["name"], user)
        binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p"},
                   "target": {"apiVersion": "v1", "kind": "Node", "name": "n1"}}
        var_cases = [{"expression": v["expression"], "object": binding, "oldObject": None, "request": req,
                      "namespaceObject": ns_obj} for v in vap["spec"]["variables"]]
        vals = cl.cel_eval(var_cases)
        variables = {}
        for v, val in zip(vap["spec"]["variables"], vals):
            self.assertIsInstance(val, bool, "%s: %s" % (v["name"], val))
            variables[v["name"]] = val
        checks = cl.cel_eval([{"expression": c["expression"], "object": binding, "oldObject": None,
                               "request": req, "namespaceObject": ns_obj, "variables": variables}
                              for c in vap["spec"]["validations"]])
        for c, res in zip(vap["spec"]["validations"], checks):
            self.assertIsInstance(res, bool, "%s: %s" % (c["expression"], res))
        # the message must evaluate to a string (the evaluator returns only booleans)
        msgs = cl.cel_eval([{"expression": "(%s).size() > 0" % c["messageExpression"], "object": binding,
                             "oldObject": None,
                             "request": req, "namespaceObject": ns_obj, "variables": variables}
                            for c in vap["spec"]["validations"] if "messageExpression" in c])
        for m in msgs:
            self.assertIs(m, True, m)
        return all(checks)

    def test_rendered_and_bound(self):
        vap = policy(self.default)
        self.assertIsNotNone(vap, "no ValidatingAdmissionPolicy on pods/binding")
        self.assertEqual(vap["apiVersion"], "admissionregistration.k8s.io/v1")
        self.assertEqual(vap["spec"]["failurePolicy"], "Fail")
        rules = vap["spec"]["matchConstraints"]["resourceRules"]
        self.assertEqual([(r["operations"], r["resources"]) for r in rules],
                         [(["CREATE"], ["pods/binding", "bindings"])])
        b = self.default.one("ValidatingAdmissionPolicyBinding")
        self.assertEqual(b["spec"]["policyName"], vap["metadata"]["name"])
        self.assertEqual(b["spec"]["validationActions"], ["Deny"])
        # no call to kubequota: nothing in the policy names its Service
        self.assertNotIn("clientConfig", yaml.safe_dump(vap))

    def test_off(self):
        # off, or nothing governed (no scheduler webhook): no policy, nothing refused
        for sets in (("--set", "bindingPolicy.enabled=false"), ("--set", "webhooks.enabled=false"),
                     ("--set", "webhooks.setSchedulerName.enabled=false")):
            r = rendered(*sets)
            self.assertIsNone(policy(r), sets)
            self.assertEqual(r.all("ValidatingAdmissionPolicyBinding"), [], sets)

    def test_who_may_bind_by_default(self):
        vap = policy(self.default)
        self.assertFalse(self.evaluate(vap, namespace("team-a"), "alice"), "a tenant binds in a governed namespace")
        self.assertTrue(self.evaluate(vap, namespace("team-a"), SA), "kubequota's scheduler is refused")
        self.assertFalse(self.evaluate(vap, namespace("team-a", "true"), "alice"))
        self.assertFalse(self.evaluate(vap, namespace("team-a", "yes"), "alice"), "another value: unlabelled")
        # opted out, system and release namespaces: never even evaluated
        for ns in (namespace("team-a", "false"), namespace("kube-system"), namespace("kube-public"),
                   namespace("kube-node-lease"), namespace(cl.NAMESPACE)):
            self.assertIsNone(self.evaluate(vap, ns, "alice"), ns["metadata"]["name"])

    def test_filters_and_allowed_binders(self):
        r = rendered("--set-string", r"webhooks.filtering.processNamespaces=^team-\,^it's$",
                     "--set-string", "webhooks.filtering.bypassNamespaces=-sandbox$",
                     "--set-json", 'bindingPolicy.allowedBinders=["volcano","o\'brien"]')
        vap = policy(r)
        self.assertFalse(self.evaluate(vap, namespace("team-a"), "alice"))
        self.assertFalse(self.evaluate(vap, namespace("it's"), "alice"), "a quote in an expression")
        self.assertTrue(self.evaluate(vap, namespace("web"), "alice"), "not processed: not governed")
        self.assertTrue(self.evaluate(vap, namespace("team-a-sandbox"), "alice"), "bypassed: not governed")
        self.assertFalse(self.evaluate(vap, namespace("team-a-sandbox", "true"), "alice"),
                         "kubequota.io/enabled=true governs what the expressions bypass")
        self.assertTrue(self.evaluate(vap, namespace("team-a"), "volcano"))
        self.assertTrue(self.evaluate(vap, namespace("team-a"), "o'brien"))
        self.assertTrue(self.evaluate(vap, namespace("team-a"), SA))


if __name__ == "__main__":
    unittest.main()
