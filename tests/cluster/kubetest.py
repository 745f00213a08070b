"""The real-cluster tier's test base: one control plane (cluster.Cluster) for the whole run,
a fresh kubequota per test class with that class's queues.yaml, and helpers that ask the real
API server (never kubequota) what happened.

Each test works in namespaces of its own (ns()), so pods of one test never count in another's
queues; kubequota is restarted between classes and sees every pod of the run, which is what
a real cluster looks like.
"""

import json
import os
import re
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.append(os.path.join(os.path.dirname(HERE), "e2e"))

import cluster as clus  # noqa: E402
from cluster import NAMESPACE, SCHED, wait_until  # noqa: E402,F401
from kqtest import queues_config, to_yaml  # noqa: E402,F401

CLUSTER = None          # set by run.py
_ns_counter = [0]


def config_yaml(cfg):
    return to_yaml(cfg) + "\n"


RBAC_DENIAL = re.compile(r'forbidden: User \\?"[^"\\]*\\?" cannot|cannot (get|list|watch|create|update|patch|delete) resource')


def rbac_denials(log):
    out = []
    for line in log.splitlines():
        if "event=admission_denied" in line or "event=rest_refused" in line or "being terminated" in line:
            continue
        if RBAC_DENIAL.search(line) or re.search(r"\b(status|code|http)=403\b", line):
            out.append(line)
    return out


class KubeTestCase(unittest.TestCase):
    """Subclasses set CONFIG (queues.yaml as Python data, kqtest.queues_config) and may set
    CHART_VALUES (chart values for this class: kubequota's arguments, RBAC, webhooks and the
    scheduler's configuration are rendered from them), KQ_ARGS (more flags), WEBHOOKS (False: the chart's webhooks are not registered),
    SCHEDULER (False: no kube-scheduler), NODES (the kwok nodes of this class, {name: {cpu,
    memory, labels}}; the default nodes come back after it) and PRIORITY_CLASSES ({name:
    value}, created once)."""

    CONFIG = None
    CHART_VALUES = {}
    KQ_ARGS = ()
    WEBHOOKS = True
    SCHEDULER = True
    NODES = None
    PRIORITY_CLASSES = {}

    @classmethod
    def setUpClass(cls):
        c = cls.c = CLUSTER
        if cls.CONFIG is None:
            raise unittest.SkipTest("no CONFIG")
        if cls.NODES is not None:
            c.set_nodes(cls.NODES)
        for name, value in cls.PRIORITY_CLASSES.items():
            c.api().request("POST", "/apis/scheduling.k8s.io/v1/priorityclasses",
                            {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                             "metadata": {"name": name}, "value": value}, ok=(201, 409))
        if getattr(c, "current_values", {}) != cls.CHART_VALUES:
            c.use_chart(cls.CHART_VALUES)
            c.current_values = cls.CHART_VALUES
            if "kube-scheduler" in c.procs:
                c.procs.pop("kube-scheduler").stop()
        c.start_kubequota(config_yaml(cls.CONFIG), extra=cls.KQ_ARGS)
        if cls.WEBHOOKS:
            c.apply_webhooks()
        else:
            c.delete_webhooks()
        if cls.SCHEDULER and "kube-scheduler" not in c.procs:
            c.start_scheduler()
        if not cls.SCHEDULER and "kube-scheduler" in c.procs:
            c.procs.pop("kube-scheduler").stop()

    @classmethod
    def tearDownClass(cls):
        c = cls.c
        try:
            cls._stop_kubequota(c)
        finally:
            if cls.NODES is not None:
                c.set_nodes(c.default_nodes())

    @classmethod
    def _stop_kubequota(cls, c):
        log = c.kubequota_log("kq") if "kq" in c.kq else ""
        c.stop_kubequota("kq")
        # Any 403 in kubequota's log: the chart's RBAC lacks a rule kubequota uses. (Not a
        # 403 kubequota answers as a webhook or usage view, nor the API server refusing new objects in a
        # namespace being deleted, which is no permission.)
        forbidden = [l for l in rbac_denials(log)]
        if forbidden:
            raise AssertionError("kubequota met 403 Forbidden (chart RBAC):\n" + "\n".join(forbidden[:10]))

    # ---- namespaces and pods -----------------------------------------------------------

    def setUp(self):
        self._namespaces = []

    def tearDown(self):
        # the controller-manager's namespace controller deletes the pods, kwok completes it
        for ns in self._namespaces:
            self.c.api().request("DELETE", "/api/v1/namespaces/" + ns, ok=(200, 202, 404))

    def ns(self, labels=None):
        """A namespace of this test, where every test user may manage pods."""
        _ns_counter[0] += 1
        name = "t%d-%s" % (_ns_counter[0], self._testMethodName.replace("_", "-")[5:30].strip("-"))
        self.c.namespace(name, labels)
        self._namespaces.append(name)
        self.c.apply([{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                       "metadata": {"name": "kq-test-tenants", "namespace": name},
                       "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                   "name": "kq-test-tenant"},
                       "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": u[1]}
                                    for k, u in clus.USERS.items() if k not in ("admin", "kwok")]}])
        # The API server's RBAC authorizer learns of a new RoleBinding through its own informer:
        # a request made at once can still be refused (403). Wait until it allows the tenants.
        def allowed(user):
            r = self.c.api(user).request(
                "POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
                {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                 "spec": {"resourceAttributes": {"namespace": name, "verb": "create", "resource": "pods"}}},
                ok=(201,))
            return bool((r.get("status") or {}).get("allowed"))
        wait_until(lambda: allowed("alice") and allowed("eve"), 10, 0.05,
                   "the tenants' RoleBinding in %s in force" % name)
        return name

    def pod(self, ns, name, user="alice", queue=None, cpu="1", memory="128Mi", labels=None, **kw):
        lab = dict(labels or {})
        if queue:
            lab["kubequota.io/queue"] = queue
        return self.c.create_pod(ns, name, user=user, cpu=cpu, memory=memory, labels=lab, **kw)

    def get(self, ns, name):
        return self.c.get_pod(ns, name)

    def node_of(self, ns, name):
        """The pod's node; None while unbound or once it is gone."""
        p = self.c.api().request("GET", "/api/v1/namespaces/%s/pods/%s" % (ns, name), ok=(200, 404))
        return (p.get("spec") or {}).get("nodeName")

    def wait_bound(self, ns, name, timeout=30):
        try:
            return self.c.wait_bound(ns, name, timeout)
        except AssertionError as e:
            raise AssertionError("%s\n%s" % (e, self.pod_story(ns, name))) from None

    def pod_story(self, ns, name):
        """What kube-scheduler and kubequota logged about one pod (for a failure message)."""
        key = "%s/%s" % (ns, name)
        out = []
        for proc in ("kube-scheduler", "kq"):
            p = self.c.procs.get(proc)
            if p is None:
                continue
            try:
                with open(p.log_path, "rb") as f:
                    lines = [l.decode("utf-8", "replace") for l in f if key.encode() in l]
            except OSError:
                continue
            out.append("---- %s about %s (last 12 of %d lines) ----" % (proc, key, len(lines)))
            out.extend(l.rstrip()[:400] for l in lines[-12:])
        return "\n".join(out)

    def wait_unschedulable(self, ns, name, timeout=30):
        """The pod's PodScheduled condition as the real scheduler wrote it: False, Unschedulable."""
        def cond():
            p = self.get(ns, name)
            for c in p.get("status", {}).get("conditions", []):
                if c["type"] == "PodScheduled" and c["status"] == "False" and c.get("reason") == "Unschedulable":
                    return c
            return None
        return wait_until(cond, timeout, 0.2, "pod %s/%s Unschedulable" % (ns, name))

    def scheduling_events(self, ns, name):
        return [e for e in self.c.events(ns, name)]

    def wait_event(self, ns, name, reason, text=None, timeout=30):
        def ev():
            for e in self.c.events(ns, name):
                if e.get("reason") == reason and (text is None or text in e.get("message", "")):
                    return e
            return None
        return wait_until(ev, timeout, 0.2, "event %s on %s/%s%s" % (reason, ns, name,
                                                                        " containing %r" % text if text else ""))

    def delete(self, ns, name, wait=True):
        self.c.delete_pod(ns, name)
        if wait:
            self.c.wait_pod_gone(ns, name)

    def assert_stays_pending(self, ns, name, seconds=3.0):
        """Still unbound after the scheduler had `seconds` to retry it."""
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.assertFalse(self.node_of(ns, name), "%s/%s was bound" % (ns, name))
            time.sleep(0.25)

    # ---- kubequota's view (for the usage checks) ---------------------------------------

    def kq_json(self, path, name="kq"):
        r = self.c.kubequota_client(name).get(path)
        self.assertEqual(r.status, 200, "%s: %s" % (path, r.body[:300]))
        return json.loads(r.body)

    def queue_usage(self, queue, name="kq"):
        """{resource: value} of one queue from the YuniKorn-style usage view."""
        parts = queue.split(".")
        doc = self.kq_json("/ws/v1/partition/default/queue/%s" % queue, name)
        return {k: v for k, v in (doc.get("allocatedResource") or {}).items()}
