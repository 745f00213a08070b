"""Issue 37 routes 2 and 3 on a real API server: what a tenant's pod may name.

Route 2, the Koordinator quota label. A pod's label quota.scheduling.koordinator.sh/name may
name only a quota that governs its namespace: the quota of its own namespace, or one whose
quota.scheduling.koordinator.sh/namespaces annotation lists it. Koordinator's own pod webhook
(koordinator-sh/koordinator pkg/webhook/pod/validating/evaluate_quota.go, its test
evaluate_quota_test.go TestEvaluateQuota) refuses a name that matches no quota ("elastic
quota quota2 not found") but lets a pod of ns1 name quota1 of kube-system ("normal case 1");
here isolation wins (README, "Coming from YuniKorn / Koordinator"). A pod that skipped the
webhook is denied by the extender (QuotaOfAnotherNamespace, QuotaNotFound) and never counted
in the other quota, nor in the default group.

Route 3, submitacl. YuniKorn checks a queue's ACL once, when an application is added
(apache/yunikorn-core pkg/scheduler/partition.go addApplication, queue.go CheckSubmitAccess),
because there an application lives in one queue; here each pod names its queue, so every pod
is checked: a later pod of an application running in an allowed queue is refused in a queue
whose submitacl leaves its user out.

Tenants act with their own tokens; every verdict is read from the API server (bound or not,
ElasticQuota status.used) and set against kubequota's own views.
"""

import time

from kubetest import KubeTestCase, queues_config, wait_until

KOORD = "/apis/scheduling.sigs.k8s.io/v1alpha1/namespaces/%s/elasticquotas"
LABEL = "quota.scheduling.koordinator.sh/name"
NAMESPACES = "quota.scheduling.koordinator.sh/namespaces"


def koord_quota(name, max_cpu, namespaces=None):
    md = {"name": name}
    if namespaces is not None:
        md["annotations"] = {NAMESPACES: '["%s"]' % '","'.join(namespaces)}
    return {"apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "ElasticQuota", "metadata": md,
            "spec": {"min": {"cpu": "0"}, "max": {"cpu": max_cpu, "memory": "64Gi"}}}


class NamesBase(KubeTestCase):
    CONFIG = queues_config({"name": "default"})
    CHART_VALUES = {"kubequota": {"admissionGate": {"enabled": False}}}
    KQ_ARGS = ("--status-interval=1s",)

    def quota(self, ns, name, max_cpu, namespaces=None):
        self.c.api("admin").post(KOORD % ns, koord_quota(name, max_cpu, namespaces))
        wait_until(lambda: "event=quota_group_applied group=%s " % name in self.c.kubequota_log(),
                   15, 0.2, "kubequota applied group %s" % name)

    def status_used(self, ns, name):
        """status.used cpu of the ElasticQuota, as the API server holds it ("0" when unset)."""
        o = self.c.api("admin").get((KOORD % ns) + "/" + name)
        return ((o.get("status") or {}).get("used") or {}).get("cpu", "0")

    def group_used(self, name):
        """kubequota's view of the quota group's used cpu (millicores; 0 when none)."""
        tree = self.kq_json("/ws/v1/partition/default/queues").get("quotaTree") or {}
        for g in tree.get("groups", []):
            if g["name"] == name:
                return int((g.get("allocatedResource") or {}).get("cpu", 0))
        raise AssertionError("no quota group %s in kubequota's view" % name)

    def create(self, ns, name, quota, user="alice"):
        """(HTTP status, body) of the tenant's own pod CREATE with the quota label."""
        return self.c.api(user).status("POST", "/api/v1/namespaces/%s/pods" % ns,
                                       self.c.pod_body(name, memory=None, labels={LABEL: quota}))


class QuotaNamesAtAdmission(NamesBase):
    """With kubequota's webhooks: refused at creation, with the name in the message."""

    def test_another_namespaces_quota_is_refused_at_admission(self):
        mine, theirs = self.ns(), self.ns()
        self.quota(mine, mine, "2")
        self.quota(theirs, theirs, "8")
        for i in range(3):
            st, body = self.create(mine, "p%d" % i, theirs)
            self.assertEqual(st, 403, body)
            self.assertIn("names quota %s of namespace %s, which does not govern namespace %s"
                          % (theirs, theirs, mine), body["message"])
        self.assertEqual(self.c.pods(mine), [], "the API server stored none of them")
        time.sleep(1.5)  # a status interval: nothing to write
        self.assertEqual(self.status_used(theirs, theirs), "0")
        self.assertEqual(self.group_used(theirs), 0)

    def test_a_quota_that_does_not_exist_is_refused_at_admission(self):
        ns = self.ns()
        self.quota(ns, ns, "2")
        st, body = self.create(ns, "p0", "no-such-quota-" + ns)
        self.assertEqual(st, 403, body)
        self.assertIn("elastic quota no-such-quota-%s not found" % ns, body["message"])
        self.assertEqual(self.c.pods(ns), [])

    def test_a_quota_whose_namespaces_annotation_lists_it_is_admitted_and_counted(self):
        home, listed, other = self.ns(), self.ns(), self.ns()
        shared = home + "-shared"
        self.quota(home, shared, "4", namespaces=[listed])
        # no over-refusal: the listed namespace's pod is admitted, bound and counted there
        st, body = self.create(listed, "p0", shared)
        self.assertEqual(st, 201, body)
        self.wait_bound(listed, "p0")
        wait_until(lambda: self.status_used(home, shared) == "1", 30, 0.2, "status.used cpu 1 on %s" % shared)
        self.assertEqual(self.group_used(shared), 1000)
        # a namespace the annotation does not list may not name it
        st, body = self.create(other, "p1", shared)
        self.assertEqual(st, 403, body)
        self.assertIn("names quota %s of namespace %s, which does not govern namespace %s"
                      % (shared, home, other), body["message"])
        self.assertEqual(self.status_used(home, shared), "1")


class QuotaNamesWithoutWebhooks(NamesBase):
    """The chart's webhooks not registered: the pods reach kube-scheduler, and kubequota's
    filter and bind are the only check left."""
    WEBHOOKS = False

    def test_another_namespaces_quota_is_never_bound_nor_counted(self):
        mine, theirs = self.ns(), self.ns()
        self.quota(mine, mine, "2")
        self.quota(theirs, theirs, "8")
        names = ["p%d" % i for i in range(5)]
        for n in names:
            st, body = self.create(mine, n, theirs)
            self.assertEqual(st, 201, body)
        # the numbers: 5 of 5 bound, though the tenant's own quota allows 2
        for n in names:
            self.assert_stays_pending(mine, n, 1)
        for n in names:
            self.wait_event(mine, n, "QuotaOfAnotherNamespace", theirs)
        self.assertEqual([p["spec"].get("nodeName") for p in self.c.pods(mine)], [None] * 5)
        time.sleep(1.5)
        self.assertEqual(self.status_used(theirs, theirs), "0")
        self.assertEqual(self.group_used(theirs), 0)
        self.assertEqual(self.group_used(mine), 0)

    def test_a_quota_that_does_not_exist_yet_waits_and_is_not_counted_in_default(self):
        ns = self.ns()
        default_before = self.group_used("default")
        later = ns + "-later"
        st, body = self.create(ns, "p0", later)
        self.assertEqual(st, 201, body)
        self.assert_stays_pending(ns, "p0", 2)
        self.wait_event(ns, "p0", "QuotaNotFound", later)
        self.assertEqual(self.group_used("default"), default_before)


class SubmitAclEveryPod(KubeTestCase):
    """root.open lets alice submit, root.closed only bob; root's own ACL names only the admin."""
    CONFIG = {"partitions": [{"name": "default", "queues": [{
        "name": "root", "submitacl": "kq-admin",
        "queues": [{"name": "default", "submitacl": "*"},
                   {"name": "open", "submitacl": "alice,bob"},
                   {"name": "closed", "submitacl": "bob"}]}]}]}
    CHART_VALUES = {"kubequota": {"admissionGate": {"enabled": False}}}

    def check_application(self, ns, labels):
        # her first pod in the closed queue is refused (as before)
        self.pod(ns, "first-closed", user="alice", queue="root.closed", labels=labels)
        self.wait_event(ns, "first-closed", "QueueACLDenied", "root.closed")
        # a pod of the application runs in the open queue ...
        self.pod(ns, "open-0", user="alice", queue="root.open", labels=labels)
        self.wait_bound(ns, "open-0")
        # ... and a later pod of the same application names the closed queue: refused too
        for n in ("closed-0", "closed-1"):
            self.pod(ns, n, user="alice", queue="root.closed", labels=labels)
        for n in ("closed-0", "closed-1", "first-closed"):
            self.assert_stays_pending(ns, n, 1.5)
        for n in ("closed-0", "closed-1"):
            self.wait_event(ns, n, "QueueACLDenied", "root.closed")
        # the API server binds nothing in root.closed; kubequota counts nothing there
        bound = {p["metadata"]["name"] for p in self.c.pods(ns) if p["spec"].get("nodeName")}
        self.assertEqual(bound, {"open-0"})
        self.assertFalse(any(self.queue_usage("root.closed").values()), self.queue_usage("root.closed"))

    def test_a_later_pod_of_an_autogen_application_is_checked(self):
        # no application id: YuniKorn's generated yunikorn-<namespace>-autogen, one per namespace
        self.check_application(self.ns(), None)

    def test_a_later_pod_of_a_named_application_is_checked(self):
        ns = self.ns()
        self.check_application(ns, {"applicationId": "app-" + ns})

