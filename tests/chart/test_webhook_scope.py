"""What the chart's webhooks can block, and whether every rendered object is a valid
Kubernetes object, for the default values and every value set in tests/chart/values/.

The API server's webhook dispatch is replayed here for a list of admission requests: rules
(operation, group, resource, no subresource), namespaceSelector and objectSelector (label
selectors over the namespace's and the object's labels), then matchConditions, which are
evaluated by a real CEL evaluator (npm @bufbuild/cel) with the API server's variables
`object`, `oldObject` and `request`. The rules and order follow Kubernetes (kubernetes/kubernetes):
staging/src/k8s.io/apiserver/pkg/admission/plugin/webhook/generic/webhook.go (ShouldCallHook:
rules, then namespace and object selectors), .../webhook/matchconditions/matcher.go (all
conditions true: call; any false: skip, even beside an error; otherwise an error applies the
webhook's failurePolicy) and .../webhook/predicates/rules/rules.go (a subresource must be
named to match).

Expectations are written per request from the issue's rules, not from the chart. Since
issue 37 kubequota governs every namespace but kube-system, kube-public, kube-node-lease,
the release namespace and webhooks.excludeNamespaces (which reach no webhook whatever they
carry), narrowed by webhooks.filtering (YuniKorn's processNamespaces/bypassNamespaces) and
by the kubequota.io/enabled label (true: governed whatever the filters say; false: not).
A pod or workload kubequota does not manage (another scheduler, in a namespace it does
not govern) reaches no webhook at all, so nothing there waits while kubequota is down; in
a governed namespace every new pod and workload goes to kubequota; ElasticQuota DELETE
reaches only Ignore webhooks.
"""

import copy
import os
import re
import unittest

import chartlib as cl
from test_render import values_of

TEAM = "team-a"          # no label: governed unless webhooks.filtering bypasses it
OPTED = "opted-in"       # labelled kubequota.io/enabled=true
OPTED_OUT = "opted-out"  # labelled kubequota.io/enabled=false
# unlabelled namespaces some value set's webhooks.filtering may not process or may bypass
OTHERS = ["team-a-sandbox", "web", "batch"]
USER = {"username": "alice", "groups": ["dev", "system:authenticated"]}


def ns_labels(name):
    labels = {"kubernetes.io/metadata.name": name}
    if name == OPTED:
        labels["kubequota.io/enabled"] = "true"
    if name == OPTED_OUT:
        labels["kubequota.io/enabled"] = "false"
    return labels


def filtered_in(filtering, ns):
    """YuniKorn's shouldProcessNamespace over the values (Python's re for the expressions:
    the values here are ones POSIX, RE2 and Python read alike)."""
    def res(v):
        return [x.strip() for x in (v or "").split(",") if x.strip()]
    proc, byp = res(filtering.get("processNamespaces")), res(filtering.get("bypassNamespaces"))
    return (not proc or any(re.search(p, ns) for p in proc)) and not any(re.search(b, ns) for b in byp)


def selector_matches(sel, labels):
    if sel is None:
        return True
    for k, v in (sel.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for e in sel.get("matchExpressions") or []:
        k, op, vals = e["key"], e["operator"], e.get("values") or []
        if op == "In" and labels.get(k) not in vals:
            return False
        if op == "NotIn" and k in labels and labels[k] in vals:
            return False
        if op == "Exists" and k not in labels:
            return False
        if op == "DoesNotExist" and k in labels:
            return False
    return True


def rule_matches(rule, req):
    res = req["resource"]
    # a subresource matches only a rule naming it ("pods/resize"), as in the API server
    name = res["resource"] + ("/" + req["subResource"] if req.get("subResource") else "")
    return ((req["operation"] in rule["operations"] or "*" in rule["operations"]) and
            (res["group"] in rule["apiGroups"] or "*" in rule["apiGroups"]) and
            (name in rule["resources"] or "*" in rule["resources"]))


def pod(scheduler="default-scheduler", annotations=None, labels=None):
    meta = {"name": "p", "labels": labels or {"app": "x"}}
    if annotations is not None:
        meta["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": {"schedulerName": scheduler, "containers": [{"name": "c", "image": "busybox"}]}}


def template(scheduler):
    return {"metadata": {"labels": {"app": "x"}},
            "spec": {"schedulerName": scheduler, "containers": [{"name": "c", "image": "busybox"}]}}


def workload(kind, scheduler, replicas=1):
    group, version = {"Deployment": ("apps", "v1"), "StatefulSet": ("apps", "v1"),
                      "DaemonSet": ("apps", "v1"), "ReplicaSet": ("apps", "v1"),
                      "Job": ("batch", "v1"), "CronJob": ("batch", "v1"),
                      "ReplicationController": ("", "v1")}[kind]
    obj = {"apiVersion": (group + "/" if group else "") + version, "kind": kind,
           "metadata": {"name": "w"}, "spec": {}}
    if kind == "CronJob":
        obj["spec"] = {"schedule": "* * * * *", "jobTemplate": {"spec": {"template": template(scheduler)}}}
    else:
        obj["spec"] = {"replicas": replicas, "template": template(scheduler)}
    return obj


RESOURCE = {"Pod": ("", "pods"), "Deployment": ("apps", "deployments"), "StatefulSet": ("apps", "statefulsets"),
            "DaemonSet": ("apps", "daemonsets"), "ReplicaSet": ("apps", "replicasets"),
            "Job": ("batch", "jobs"), "CronJob": ("batch", "cronjobs"),
            "ReplicationController": ("", "replicationcontrollers"),
            "ConfigMap": ("", "configmaps"), "ElasticQuota": ("scheduling.x-k8s.io", "elasticquotas")}


def request(op, ns, obj, old=None, sub=""):
    group, resource = RESOURCE[(obj or old)["kind"]]
    # As the real API server builds it: subResource is omitempty, so CEL sees no such key
    # unless there is one (found on the real-cluster tier: `request.subResource == ...` on a
    # plain UPDATE is an evaluation error there, and failurePolicy Fail refuses the update).
    r = {"uid": "u", "operation": op, "namespace": ns, "userInfo": USER,
         "kind": {"group": group, "version": "v1", "kind": (obj or old)["kind"]},
         "resource": {"group": group, "version": "v1", "resource": resource},
         "name": (obj or old)["metadata"]["name"]}
    if sub:
        r["subResource"] = sub
    return r, obj, old


class Dispatch:
    """Which webhooks of a rendering the API server would call for a request."""

    def __init__(self, rendered):
        self.hooks = []
        for cfg in rendered.docs:
            if cfg["kind"] in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
                self.hooks.extend(cfg.get("webhooks") or [])

    def called(self, cases):
        """cases: list of (req, obj, old). Returns per case {webhook name: True | 'error'}."""
        pending, out = [], []
        for req, obj, old in cases:
            hit = {}
            labels = ns_labels(req["namespace"])
            olabels = ((obj or old).get("metadata") or {}).get("labels") or {}
            for w in self.hooks:
                if not any(rule_matches(r, req) for r in w["rules"]):
                    continue
                if not selector_matches(w.get("namespaceSelector"), labels):
                    continue
                if not selector_matches(w.get("objectSelector"), olabels):
                    continue
                conds = w.get("matchConditions") or []
                if not conds:
                    hit[w["name"]] = True
                    continue
                for c in conds:
                    pending.append((len(out), w["name"], {"expression": c["expression"], "object": obj,
                                                          "oldObject": old, "request": req}))
                hit[w["name"]] = True  # until a condition says false
            out.append(hit)
        if pending:
            results = cl.cel_eval([p[2] for p in pending])
            errors = {}
            for (i, name, _), res in zip(pending, results):
                if isinstance(res, dict):
                    errors.setdefault((i, name), res["error"])
                elif res is False and name in out[i]:
                    out[i][name] = False
            for (i, name), err in errors.items():
                if out[i].get(name) is not False:  # false wins over an error, as in the API server
                    out[i][name] = "error: " + err
        return [{n: v for n, v in hit.items() if v is not False} for hit in out]

    def policy(self, name):
        return [w for w in self.hooks if w["name"] == name][0]["failurePolicy"]


class ScopeChecks:
    set_name = None

    @classmethod
    def setUpClass(cls):
        cls.r = cl.render(cls.set_name)
        cls.v = values_of(cls.r)
        cls.full = cls.v["full"]
        cls.sched = cls.full["schedulerName"]
        cls.d = Dispatch(cls.r)
        cls.excluded = ["kube-system", "kube-public", "kube-node-lease", cl.NAMESPACE] + \
            list(cls.full["webhooks"]["excludeNamespaces"])
        filt = cls.full["webhooks"]["filtering"]
        cls.governed = [OPTED] + [ns for ns in [TEAM] + OTHERS if filtered_in(filt, ns)]
        cls.ungoverned = [OPTED_OUT] + [ns for ns in [TEAM] + OTHERS if not filtered_in(filt, ns)]

    # -- every object is a valid Kubernetes object ------------------------------------

    def test_objects_validate_against_kubernetes_schemas(self):
        msgs = cl.validate_objects(self.r.docs)
        self.assertEqual(len(msgs), len(self.r.docs))
        bad = [m for m in msgs if m]
        self.assertEqual(bad, [], "%s: objects kubernetes-models rejects" % self.set_name)

    # -- what can be blocked ------------------------------------------------------------

    def unmanaged_cases(self, ns):
        cases = [request("CREATE", ns, pod()),
                 request("UPDATE", ns, pod(annotations={"kubequota.io/user-info": "{}"}), pod()),
                 request("DELETE", ns, None, pod())]
        for kind in ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job", "CronJob",
                     "ReplicationController"):
            cases.append(request("CREATE", ns, workload(kind, "default-scheduler")))
            cases.append(request("UPDATE", ns, workload(kind, "default-scheduler", 3),
                                 workload(kind, "default-scheduler", 1)))
        return cases

    def test_unmanaged_work_reaches_no_webhook(self):
        """Pods and workloads of another scheduler, in namespaces kubequota does not govern:
        opted out, excluded, or left alone by webhooks.filtering (issue 37: these are what
        is never blocked)."""
        for ns in self.ungoverned + self.excluded:
            for (req, _, _), hit in zip(self.unmanaged_cases(ns), self.d.called(self.unmanaged_cases(ns))):
                self.assertEqual(hit, {}, "%s %s %s in %s reaches %s" % (
                    self.set_name, req["operation"], req["kind"]["kind"], ns, hit))

    def test_excluded_namespaces_reach_no_webhook_even_when_managed(self):
        for ns in self.excluded:
            cases = [request("CREATE", ns, pod(self.sched)),
                     request("CREATE", ns, workload("Deployment", self.sched)),
                     request("CREATE", ns, {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "ElasticQuota",
                                            "metadata": {"name": "q"}, "spec": {}})]
            for (req, _, _), hit in zip(cases, self.d.called(cases)):
                self.assertEqual(hit, {}, "%s: %s in %s reaches %s" % (self.set_name, req["kind"]["kind"], ns, hit))

    def test_managed_pods_and_workloads_get_an_identity(self):
        wh = self.full["webhooks"]
        if not (wh["enabled"] and wh["identity"]["enabled"]):
            self.skipTest("identity webhook off")
        cases = [request("CREATE", TEAM, pod(self.sched))]
        kinds = ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job", "CronJob", "ReplicationController")
        cases += [request("CREATE", TEAM, workload(k, self.sched)) for k in kinds]
        for (req, _, _), hit in zip(cases, self.d.called(cases)):
            paths = {self.path(n) for n, v in hit.items() if v is True}
            self.assertIn("/admission/mutate", paths, "%s: managed %s CREATE is not stamped" % (
                self.set_name, req["kind"]["kind"]))
            for n in hit:
                self.assertNotIn("error", str(hit[n]), hit)

    def test_update_only_where_identity_could_change(self):
        wh = self.full["webhooks"]
        if not (wh["enabled"] and wh["identity"]["enabled"]):
            self.skipTest("identity webhook off")
        ann = {"kubequota.io/user-info": '{"user":"alice"}', "yunikorn.apache.org/user.info": '{"user":"alice"}'}
        forged = dict(ann, **{"kubequota.io/user-info": '{"user":"root"}'})
        old_pod = pod(self.sched, annotations=ann)
        relabelled = copy.deepcopy(old_pod)
        relabelled["metadata"]["labels"]["extra"] = "1"
        changed_tmpl = workload("CronJob", self.sched)
        changed_tmpl["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["image"] = "busybox:2"
        requeued = copy.deepcopy(old_pod)
        requeued["metadata"]["labels"]["kubequota.io/queue"] = "root.other"  # refused: issue 20
        regrouped = copy.deepcopy(old_pod)
        regrouped["metadata"]["labels"]["quota.scheduling.koordinator.sh/name"] = "team-b"
        cases = [
            (request("UPDATE", TEAM, relabelled, old_pod), False),
            (request("UPDATE", TEAM, requeued, old_pod), True),
            (request("UPDATE", TEAM, regrouped, old_pod), True),
            (request("UPDATE", TEAM, pod(self.sched, annotations=forged), old_pod), True),
            (request("UPDATE", TEAM, pod(self.sched), old_pod), True),       # identity removed
            (request("UPDATE", TEAM, workload("Deployment", self.sched, 5), workload("Deployment", self.sched, 1)), False),
            (request("UPDATE", TEAM, workload("Deployment", "default-scheduler"), workload("Deployment", self.sched)), False),
            (request("UPDATE", TEAM, workload("Deployment", self.sched), workload("Deployment", "default-scheduler")), True),
            (request("UPDATE", TEAM, changed_tmpl, workload("CronJob", self.sched)), True),
            (request("UPDATE", TEAM, workload("CronJob", self.sched), workload("CronJob", self.sched)), False),
            (request("CREATE", TEAM, pod(self.sched), None, sub="binding"), False),
            # in-place resizes of managed pods are checked against limits (issue 20)
            (request("UPDATE", TEAM, pod(self.sched, annotations=ann), old_pod, sub="resize"), True),
            (request("UPDATE", TEAM, pod(annotations=ann), pod(annotations=ann), sub="resize"), False),
            (request("UPDATE", TEAM, pod(self.sched, annotations=ann), old_pod, sub="status"), False),
            # issue 37 route 7: a status write that rewrites a fixed key is seen (and the
            # kubelet's, which change none, are not: the case above)
            (request("UPDATE", TEAM, pod(self.sched, annotations=forged), old_pod, sub="status"), True),
            (request("UPDATE", TEAM, requeued, old_pod, sub="status"), True),
            (request("UPDATE", TEAM, relabelled, old_pod, sub="status"), False),
        ]
        # The admission gate (docs/gating.md): only kubequota may remove it, so with gating on
        # the webhook must see an update that removes it; never one that keeps it, or that
        # removes only another controller's gate.
        gated = copy.deepcopy(old_pod)
        gated["spec"]["schedulingGates"] = [{"name": "example.com/a"}, {"name": "kubequota.io/admission"}]
        ungated = copy.deepcopy(old_pod)
        ungated["spec"]["schedulingGates"] = [{"name": "example.com/a"}]
        other_removed = copy.deepcopy(old_pod)
        other_removed["spec"]["schedulingGates"] = [{"name": "kubequota.io/admission"}]
        none_left = copy.deepcopy(old_pod)
        relabelled_gated = copy.deepcopy(gated)
        relabelled_gated["metadata"]["labels"]["extra"] = "1"
        gate_on = self.full["kubequota"]["admissionGate"]["enabled"]
        cases += [
            (request("UPDATE", TEAM, ungated, gated), gate_on),
            (request("UPDATE", TEAM, none_left, gated), gate_on),
            (request("UPDATE", TEAM, other_removed, gated), False),
            (request("UPDATE", TEAM, relabelled_gated, gated), False),
        ]
        for ((req, _, _), want), hit in zip(cases, self.d.called([c for c, _ in cases])):
            # an evaluation error is no "skip": the API server applies the failurePolicy
            # (Fail refuses the update), so no condition may error on an ordinary update
            errs = {n: v for n, v in hit.items() if v is not True}
            self.assertEqual(errs, {}, "%s: %s %s: matchConditions error" % (self.set_name, req["operation"], req["kind"]["kind"]))
            got = any(self.path(n) == "/admission/mutate" and v is True for n, v in hit.items())
            self.assertEqual(got, want, "%s: %s %s -> %s" % (self.set_name, req["operation"], req["kind"]["kind"], hit))

    def test_opted_in_namespace(self):
        wh = self.full["webhooks"]
        if not (wh["enabled"] and wh["setSchedulerName"]["enabled"]):
            self.skipTest("scheduler webhook off")
        cases = [request("CREATE", OPTED, pod()), request("CREATE", OPTED, workload("Deployment", "default-scheduler")),
                 request("CREATE", OPTED, workload("CronJob", "default-scheduler"))]
        hits = self.d.called(cases)
        # no namespace filter on this path: the label governs whatever the filters say
        self.assertEqual({self.path(n) for n in hits[0]}, {"/admission/mutate-scheduler-opt-in"})
        if wh["identity"]["enabled"]:
            for h in hits[1:]:
                self.assertIn("/admission/mutate", {self.path(n) for n in h}, h)
        for h in hits:
            self.assertEqual(len(h), 1, "one webhook per object, not several: %s" % h)

    def test_governed_namespace(self):
        """Issue 37 route 4: an unlabelled namespace the filters process is governed by
        default: another scheduler's new pods and workloads go to kubequota (which renames
        the pods), once each; its other updates and deletes reach nothing."""
        wh = self.full["webhooks"]
        if not (wh["enabled"] and wh["setSchedulerName"]["enabled"]):
            self.skipTest("scheduler webhook off")
        unlabelled = [ns for ns in self.governed if ns != OPTED]
        if self.set_name == "default":
            self.assertEqual(unlabelled, [TEAM] + OTHERS, "the default governs every unlabelled namespace")
        for ns in unlabelled:
            cases = [request("CREATE", ns, pod())]
            if wh["identity"]["enabled"]:
                cases += [request("CREATE", ns, workload(k, "default-scheduler")) for k in ("Deployment", "CronJob")]
            for (req, _, _), hit in zip(cases, self.d.called(cases)):
                self.assertEqual({self.path(n) for n in hit}, {"/admission/mutate-scheduler"},
                                 "%s: %s in %s -> %s" % (self.set_name, req["kind"]["kind"], ns, hit))
                self.assertTrue(all(v is True for v in hit.values()), hit)
            quiet = [request("UPDATE", ns, pod(annotations={"kubequota.io/user-info": "{}"}), pod()),
                     request("DELETE", ns, None, pod()),
                     request("UPDATE", ns, workload("Deployment", "default-scheduler", 3),
                             workload("Deployment", "default-scheduler", 1))]
            for (req, _, _), hit in zip(quiet, self.d.called(quiet)):
                self.assertEqual(hit, {}, "%s: %s %s in %s -> %s" % (self.set_name, req["operation"],
                                                                     req["kind"]["kind"], ns, hit))

    def test_elasticquota_delete_never_blocked(self):
        if not (self.full["webhooks"]["enabled"] and self.full["webhooks"]["validate"]["enabled"]):
            self.skipTest("validating webhooks off")
        eq = {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "ElasticQuota", "metadata": {"name": "q"},
              "spec": {"max": {"cpu": "1"}}}
        hit_del, hit_create = self.d.called([request("DELETE", TEAM, None, eq), request("CREATE", TEAM, eq)])
        self.assertTrue(hit_del, "DELETE is still judged while kubequota answers")
        for n in hit_del:
            self.assertEqual(self.d.policy(n), "Ignore", "%s can block an ElasticQuota DELETE" % n)
        self.assertTrue(hit_create)

    def test_config_guard_sees_only_the_queues_configmap(self):
        if not (self.full["webhooks"]["enabled"] and self.full["webhooks"]["validate"]["enabled"]):
            self.skipTest("validating webhooks off")
        queues = self.r.one("ConfigMap", cl.fullname() + "-queues")
        other = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "labels": {"app": "y"}}}
        hits = self.d.called([request("UPDATE", cl.NAMESPACE, queues, queues),
                              request("UPDATE", cl.NAMESPACE, other, other), request("UPDATE", TEAM, queues, queues)])
        self.assertEqual([{self.path(n) for n in h} for h in hits], [{"/admission/validate"}, set(), set()])
        self.assertEqual(self.d.policy(list(hits[0])[0]), self.full["webhooks"]["validate"]["configFailurePolicy"])

    def path(self, name):
        return [w for w in self.d.hooks if w["name"] == name][0]["clientConfig"]["service"]["path"]


for _name in cl.VALUE_SETS:
    _cls = type("Scope" + "".join(p.capitalize() for p in _name.split("-")), (ScopeChecks, unittest.TestCase),
                {"set_name": _name})
    globals()[_cls.__name__] = _cls
del _name, _cls


class ValueFilesTest(unittest.TestCase):
    # values files that must fail (a test of their own says how), not rendered as a value set
    REFUSED = {"bad-queues.yaml"}

    def test_every_values_file_is_a_value_set(self):
        files = {f for f in os.listdir(cl.VALUES_DIR) if f.endswith(".yaml")} - self.REFUSED
        used = {os.path.basename(a[1]) for a in cl.VALUE_SETS.values() if a}
        self.assertEqual(files - used, set(), "tests/chart/values files no render test runs")
        self.assertIn("default", cl.VALUE_SETS)

    def test_validator_rejects_what_the_api_server_rejects(self):
        """kubernetes-models really checks: a failurePolicy the API server refuses fails."""
        r = cl.render("default")
        bad = copy.deepcopy(r.one("MutatingWebhookConfiguration"))
        bad["webhooks"][0]["failurePolicy"] = "fail"
        dep = copy.deepcopy(r.deployment())
        dep["spec"]["replicas"] = "3"
        msgs = cl.validate_objects([bad, dep, {"apiVersion": "example.com/v1", "kind": "Nothing",
                                               "metadata": {"name": "n"}}])
        self.assertIn("failurePolicy", msgs[0] or "")
        self.assertIn("replicas", msgs[1] or "")
        self.assertIn("no schema", msgs[2] or "")


if __name__ == "__main__":
    unittest.main()
