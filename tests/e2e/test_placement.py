"""YuniKorn placement rules and pod metadata, end to end: filter + bind through kubequota
against the API simulator. Expected queues come from YuniKorn's documentation
(apache/yunikorn-site docs/user_guide/placement_rules.md, resource_quota_mgmt.md,
queue_config.md) and the shim's metadata rules (apache/yunikorn-k8shim
pkg/common/utils/utils.go GetQueueNameFromPod, GetApplicationIDFromPod,
GenerateApplicationID), not from kubequota's code."""

import json
import os

from kqtest import KQTestCase, PARTITION, pod_manifest, wait_until

EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "yunikorn")


def example(name):
    """A real configuration from YuniKorn's code or documentation (each file cites its source)."""
    with open(os.path.join(EXAMPLES, name)) as f:
        return f.read()


# YuniKorn's default configuration (apache/yunikorn-core pkg/common/configs/config.go
# DefaultSchedulerConfig)
YK_DEFAULT = example("default.yaml")


def queue_view(kq):
    return kq.get_json("/ws/v1/partition/%s/queues" % PARTITION)


def find_queue(node, path):
    name = node.get("queuePath") or node.get("queuename") or node.get("queueName")
    if name == path:
        return node
    for c in node.get("children") or []:
        got = find_queue(c, path)
        if got is not None:
            return got
    return None


def user_queues(kq, user):
    """{queue path: cpu} of a user's usage tree."""
    u = kq.get_json("/ws/v1/partition/%s/usage/user/%s" % (PARTITION, user))
    out = {}

    def walk(n):
        name = n.get("queuePath") or n.get("queuename")
        out[name] = (n.get("resourceUsage") or {}).get("cpu") or (n.get("resourceUsage") or {}).get("vcore")
        for c in n.get("children") or []:
            walk(c)
    walk(u["queues"])
    return out


class DefaultConfigTest(KQTestCase):
    CONFIG = YK_DEFAULT

    def test_fresh_namespace_gets_its_queue(self):
        # a pod from a namespace nobody configured runs in root.<namespace>
        self.create("p1", ns="team-fresh", user="alice", cpu="1")
        self.assert_bound("p1", "team-fresh")
        wait_until(lambda: user_queues(self.kq, "alice").get("root.team-fresh") == 1000,
                   msg="alice's usage in root.team-fresh")
        q = find_queue(queue_view(self.kq), "root.team-fresh")
        self.assertIsNotNone(q, "the dynamic queue is in the queue view")
        self.assertFalse(q.get("isManaged"), "a queue created by a rule is not managed")
        # when its last pod goes, the dynamic queue goes too
        self.sim.delete_pod("team-fresh", "p1")
        wait_until(lambda: find_queue(queue_view(self.kq), "root.team-fresh") is None,
                   msg="the empty dynamic queue to be removed")


TEMPLATE_CONFIG = """
partitions:
  - name: default
    placementrules:
      - name: provided
        create: true
      - name: user
        create: true
        filter:
          type: deny
          users: [admin]
        parent:
          name: fixed
          value: users
      - name: fixed
        value: root.default
    queues:
      - name: root
        submitacl: '*'
        queues:
          - name: default
          - name: users
            parent: true
            childtemplate:
              maxapplications: 2
              resources:
                max:
                  vcore: 1500m
                  memory: 4G
"""


class RuleChainTest(KQTestCase):
    CONFIG = TEMPLATE_CONFIG

    def test_provided_user_fixed_chain(self):
        # provided: the YuniKorn label names the queue; create: true makes it
        self.create("a1", ns="ns1", user="alice", cpu="500m",
                    labels={"yunikorn.apache.org/queue": "root.adhoc"})
        self.assert_bound("a1", "ns1")
        # no queue named: the user rule below root.users (parent rule fixed, not qualified)
        self.create("b1", ns="ns1", user="bob", cpu="500m")
        self.assert_bound("b1", "ns1")
        # the filter denies admin the user rule: the last rule, root.default
        self.create("c1", ns="ns1", user="admin", cpu="500m")
        self.assert_bound("c1", "ns1")
        wait_until(lambda: user_queues(self.kq, "alice").get("root.adhoc") == 500, msg="alice in root.adhoc")
        wait_until(lambda: user_queues(self.kq, "bob").get("root.users.bob") == 500, msg="bob in root.users.bob")
        wait_until(lambda: user_queues(self.kq, "admin").get("root.default") == 500, msg="admin in root.default")

    def test_child_template_limits_dynamic_queue(self):
        # root.users' template: max 1500m cpu, 2 applications per dynamic queue
        self.create("b1", ns="ns1", user="bob", cpu="1", app="app-1")
        self.assert_bound("b1", "ns1")
        self.create("b2", ns="ns1", user="bob", cpu="1", app="app-1")
        self.assert_denied("b2", "ns1", "root.users.bob", "child template", "cpu")
        self.create("b3", ns="ns1", user="bob", cpu="100m", app="app-2")
        self.assert_bound("b3", "ns1")
        self.create("b4", ns="ns1", user="bob", cpu="100m", app="app-3")
        self.assert_denied("b4", "ns1", "root.users.bob", "maxapplications")
        # another user's dynamic queue has its own copy of the template
        self.create("d1", ns="ns1", user="dave", cpu="1", app="app-4")
        self.assert_bound("d1", "ns1")
        # the queue view shows the limits a dynamic leaf is held to
        q = find_queue(queue_view(self.kq), "root.users.bob")
        self.assertIsNotNone(q)
        mr = q.get("maxResource") or {}
        self.assertEqual(mr.get("vcore", mr.get("cpu")), 1500)
        self.assertEqual(q.get("maxRunningApps"), 2)


class NoMatchTest(KQTestCase):
    CONFIG = """
partitions:
  - name: default
    placementrules:
      - name: provided
        create: false
    queues:
      - name: root
        queues:
          - name: a
"""

    def test_rejected_with_reason(self):
        # root.nope does not exist and create is false; no root.default: rejected
        self.create("x1", ns="ns1", user="alice", cpu="100m", labels={"queue": "nope"})
        why = self.assert_denied("x1", "ns1", "no placement rule matched", "root.nope")
        self.assertIn("create is false", why)
        self.create("x2", ns="ns1", user="alice", cpu="100m", labels={"queue": "a"})
        self.assert_bound("x2", "ns1")


class PodMetadataTest(KQTestCase):
    CONFIG = """
partitions:
  - name: default
    placementrules:
      - name: provided
    queues:
      - name: root
        submitacl: '*'
        queues:
          - name: default
            maxapplications: 2
          - name: q1
          - name: q2
          - name: q3
"""
    EXTRA_ARGS = ("--app-id-fallback", "yunikorn")

    def test_queue_keys_in_yunikorn_order(self):
        # canonical label beats the annotation, which beats the legacy "queue" label
        # (each pod its own application: pods of one application are charged to the user
        # of its first pod, as YuniKorn does)
        p = pod_manifest("m1", ns="ns1", user="u", cpu="100m", app="m1",
                         labels={"yunikorn.apache.org/queue": "root.q1", "queue": "root.q3"})
        p["metadata"]["annotations"]["yunikorn.apache.org/queue"] = "root.q2"
        self.sim.create_pod(p)
        self.assert_bound("m1", "ns1")
        p = pod_manifest("m2", ns="ns1", user="v", cpu="100m", app="m2", labels={"queue": "root.q3"})
        p["metadata"]["annotations"]["yunikorn.apache.org/queue"] = "root.q2"
        self.sim.create_pod(p)
        self.assert_bound("m2", "ns1")
        self.create("m3", ns="ns1", user="w", cpu="100m", app="m3", labels={"queue": "root.q3"})
        self.assert_bound("m3", "ns1")
        wait_until(lambda: user_queues(self.kq, "u").get("root.q1") == 100, msg="u in root.q1")
        wait_until(lambda: user_queues(self.kq, "v").get("root.q2") == 100, msg="v in root.q2")
        wait_until(lambda: user_queues(self.kq, "w").get("root.q3") == 100, msg="w in root.q3")

    def test_autogen_app_id_groups_a_namespace(self):
        # pods without an app id are one application per namespace
        # (yunikorn-<namespace>-autogen), so root.default's maxapplications 2 counts namespaces
        for i, ns in enumerate(("ns1", "ns1", "ns2")):
            self.create("g%d" % i, ns=ns, user="u", cpu="100m")
            self.assert_bound("g%d" % i, ns)
        self.create("g9", ns="ns3", user="u", cpu="100m")
        self.assert_denied("g9", "ns3", "maxapplications")
        # an explicit app id in any of YuniKorn's keys is its own application
        self.create("s1", ns="ns1", user="u", cpu="100m", labels={"spark-app-selector": "spark-1"})
        self.assert_denied("s1", "ns1", "maxapplications")
        # ... and the same id as the namespace's autogen application joins it
        self.create("s2", ns="ns3", user="u", cpu="100m",
                    labels={"yunikorn.apache.org/app-id": "yunikorn-ns1-autogen"})
        self.assert_bound("s2", "ns3")
        u = self.kq.get_json("/ws/v1/partition/%s/usage/user/u" % PARTITION)
        apps = set()

        def walk(n):
            apps.update(n.get("runningApplications") or [])
            for c in n.get("children") or []:
                walk(c)
        walk(u["queues"])
        self.assertEqual(apps, {"yunikorn-ns1-autogen", "yunikorn-ns2-autogen"})


class WarningsTest(KQTestCase):
    CONFIG = """
partitions:
  - name: default
    nodesortpolicy:
      type: binpacking
    queues:
      - name: root
        properties:
          application.sort.policy: fifo
"""

    def test_unsupported_keys_logged(self):
        log = self.kq.logs()
        self.assertIn("nodesortpolicy is not used by kubequota", log)
        self.assertIn("properties.application.sort.policy is not used by kubequota", log)



NS_CONFIG = """
partitions:
  - name: default
    placementrules:
      - name: tag
        value: namespace
        create: true
        parent:
          name: tag
          value: namespace.parentqueue
      - name: tag
        value: namespace
        create: true
    queues:
      - name: root
        submitacl: '*'
        queues:
          - name: production
            parent: true
          - name: development
            parent: true
"""


class NamespaceAnnotationTest(KQTestCase):
    """resource_quota_mgmt.md "Namespace quota" and "Parent queue mapping for namespaces"."""
    CONFIG = NS_CONFIG
    START = False

    def namespace(self, name, annotations):
        self.sim.world.create_simple("namespaces", None,
                                     {"metadata": {"name": name, "annotations": annotations}})

    def test_parent_queue_quota_and_max_apps(self):
        self.namespace("finance", {"yunikorn.apache.org/parentqueue": "root.production",
                                   "yunikorn.apache.org/namespace.quota":
                                       json.dumps({"cpu": "1", "memory": "2Gi"})})
        self.namespace("dev", {"yunikorn.apache.org/parentqueue": "development",
                               "yunikorn.apache.org/namespace.maxApps": "1"})
        self.namespace("legacy", {"yunikorn.apache.org/namespace.max.cpu": "500m"})
        self.namespace("plain", {})
        self.kq.start()
        # finance: root.production.finance, at most 1 cpu
        self.create("f1", ns="finance", user="u", cpu="600m", memory="1Gi")
        self.assert_bound("f1", "finance")
        self.create("f2", ns="finance", user="u", cpu="600m", memory="1Gi")
        self.assert_denied("f2", "finance", "root.production.finance", "namespace annotation", "cpu")
        # dev: "development" is qualified to root.development; one application
        self.create("d1", ns="dev", user="u", cpu="100m", app="one")
        self.assert_bound("d1", "dev")
        self.create("d2", ns="dev", user="u", cpu="100m", app="two")
        self.assert_denied("d2", "dev", "root.development.dev", "maxapplications")
        # the deprecated max.cpu annotation; no parent annotation: the second rule
        self.create("l1", ns="legacy", user="u", cpu="600m")
        self.assert_denied("l1", "legacy", "root.legacy", "cpu")
        self.create("p1", ns="plain", user="u", cpu="3")
        self.assert_bound("p1", "plain")
        wait_until(lambda: user_queues(self.kq, "u").get("root.production.finance") == 600,
                   msg="u in root.production.finance")
        wait_until(lambda: user_queues(self.kq, "u").get("root.plain") == 3000, msg="u in root.plain")


class NamespaceWatchTest(KQTestCase):
    """A namespace annotated while kubequota runs: its pods are placed once the informer has
    seen it (before, the only rule has no parent and rejects them)."""
    CONFIG = NS_CONFIG.replace("""      - name: tag
        value: namespace
        create: true
    queues:""", """    queues:""")

    def attempt(self, prefix):
        """Creates a new pod and schedules it: a pod is placed when the pod informer first
        sees it (as YuniKorn places an application once), and the namespace informer runs on
        its own thread, so each try is a new pod."""
        self.tries = getattr(self, "tries", 0) + 1
        name = "%s%d" % (prefix, self.tries)
        self.create(name, ns="sales", user="u", cpu="100m")
        ok, why = self.schedule(name, "sales")
        return ok, why or ""

    def test_live_namespace(self):
        ok, why = self.attempt("a")
        self.assertFalse(ok)
        self.assertIn("no placement rule matched", why)
        self.sim.world.create_simple("namespaces", None, {"metadata": {
            "name": "sales", "annotations": {"yunikorn.apache.org/parentqueue": "root.production"}}})
        wait_until(lambda: self.attempt("b")[0], msg="a pod of the annotated namespace to be placed")
        wait_until(lambda: user_queues(self.kq, "u").get("root.production.sales") == 100,
                   msg="u in root.production.sales")
        # the annotation removed: new pods of the namespace are rejected again
        self.sim.world.update("namespaces", None, "sales", {"metadata": {"annotations": {
            "yunikorn.apache.org/parentqueue": None}}}, patch=True)
        wait_until(lambda: "no placement rule matched" in self.attempt("c")[1],
                   msg="a new pod to be rejected once the annotation is gone")


class ExampleNamespaceParentTest(KQTestCase):
    """examples/yunikorn/namespace-parent.yaml (resource_quota_mgmt.md): "Applications in the
    finance namespace will run in the root.production.finance queue"."""
    CONFIG = example("namespace-parent.yaml")
    START = False

    def test_workload(self):
        for name, parent in (("finance", "root.production"), ("sales", "root.production"),
                             ("dev", "root.development"), ("test", "development")):
            self.sim.world.create_simple("namespaces", None, {"metadata": {
                "name": name, "annotations": {"yunikorn.apache.org/parentqueue": parent}}})
        self.sim.world.create_simple("namespaces", None, {"metadata": {"name": "other"}})
        self.kq.start()
        for ns in ("finance", "sales", "dev", "test"):
            self.create("w-" + ns, ns=ns, user="u-" + ns, cpu="200m")
            self.assert_bound("w-" + ns, ns)
        # no parent annotation: the only rule's parent does not match; no root.default
        self.create("w-other", ns="other", user="u-other", cpu="200m")
        self.assert_denied("w-other", "other", "no placement rule matched")
        for ns, q in (("finance", "root.production.finance"), ("sales", "root.production.sales"),
                      ("dev", "root.development.dev"), ("test", "root.development.test")):
            wait_until(lambda: user_queues(self.kq, "u-" + ns).get(q) == 200, msg="u-%s in %s" % (ns, q))


class ExampleChildTemplateTest(KQTestCase):
    """examples/yunikorn/child-template.yaml (queue_config.md "Child Template")."""
    CONFIG = example("child-template.yaml")

    def test_workload(self):
        # root.parent.sales: root.parent's template, max 21 vcore
        self.create("p1", ns="ns1", user="u", cpu="20", labels={"yunikorn.apache.org/queue": "root.parent.sales"})
        self.assert_bound("p1", "ns1")
        self.create("p2", ns="ns1", user="u", cpu="1", labels={"yunikorn.apache.org/queue": "root.parent.sales"})
        self.assert_bound("p2", "ns1")
        self.create("p3", ns="ns1", user="u", cpu="100m", labels={"yunikorn.apache.org/queue": "root.parent.sales"})
        self.assert_denied("p3", "ns1", "root.parent.sales", "child template", "cpu")
        # root.notemplate.sales: root's template, inherited, max 20 vcore
        self.create("n1", ns="ns1", user="u", cpu="20", labels={"yunikorn.apache.org/queue": "root.notemplate.sales"})
        self.assert_bound("n1", "ns1")
        self.create("n2", ns="ns1", user="u", cpu="100m", labels={"yunikorn.apache.org/queue": "root.notemplate.sales"})
        self.assert_denied("n2", "ns1", "root.notemplate.sales", "child template", "cpu")
        # root.sales (directly below root): root's template, 10 applications
        for i in range(10):
            self.create("a%d" % i, ns="ns1", user="u", cpu="10m", app="app-%d" % i,
                        labels={"yunikorn.apache.org/queue": "sales"})
            self.assert_bound("a%d" % i, "ns1")
        self.create("a10", ns="ns1", user="u", cpu="10m", app="app-10", labels={"yunikorn.apache.org/queue": "sales"})
        self.assert_denied("a10", "ns1", "root.sales", "maxapplications")
        # the template's guaranteed resources and sort policy are reported at load
        self.assertIn("childtemplate.resources.guaranteed is not used by kubequota", self.kq.logs())


class ExamplePlacementUseCaseTest(KQTestCase):
    """examples/yunikorn/placement-use-case.yaml (use_case.md "Placement of different
    users", its Testing table)."""
    CONFIG = example("placement-use-case.yaml")

    def test_workload(self):
        self.create("admin-1", ns="default", user="admin", groups=["admin"], cpu="100m",
                    labels={"yunikorn.apache.org/queue": "root.system.high-priority"})
        self.assert_bound("admin-1")
        self.create("admin-2", ns="default", user="admin", groups=["admin"], cpu="100m",
                    labels={"yunikorn.apache.org/queue": "root.system.low-priority"})
        self.assert_bound("admin-2")
        self.create("sue-1", ns="default", user="sue", groups=["group-a"], cpu="100m")
        self.assert_bound("sue-1")
        self.create("kim-1", ns="dev", user="kim", groups=["group-b"], cpu="100m")
        self.assert_bound("kim-1", "dev")
        self.create("kim-2", ns="test", user="kim", groups=["group-b"], cpu="200m")
        self.assert_bound("kim-2", "test")
        wait_until(lambda: user_queues(self.kq, "admin").get("root.system.high-priority") == 100,
                   msg="admin in root.system.high-priority")
        wait_until(lambda: user_queues(self.kq, "admin").get("root.system.low-priority") == 100,
                   msg="admin in root.system.low-priority")
        wait_until(lambda: user_queues(self.kq, "sue").get("root.tenants.group-a.sue") == 100,
                   msg="sue in root.tenants.group-a.sue")
        wait_until(lambda: user_queues(self.kq, "kim").get("root.tenants.group-b.dev") == 100,
                   msg="kim in root.tenants.group-b.dev")
        wait_until(lambda: user_queues(self.kq, "kim").get("root.tenants.group-b.test") == 200,
                   msg="kim in root.tenants.group-b.test")
        # the adminacl of root.system admits only group admin: for sue the provided rule does
        # not match (placement_rules.md "Access Control List"), her user rule does
        self.create("sue-2", ns="default", user="sue", groups=["group-a"], cpu="300m",
                    labels={"yunikorn.apache.org/queue": "root.system.high-priority"})
        self.assert_bound("sue-2")
        wait_until(lambda: user_queues(self.kq, "sue").get("root.tenants.group-a.sue") == 400,
                   msg="sue-2 in root.tenants.group-a.sue")
        # kim names a group-a queue: its adminacl admits group-a only; the tag rule places her
        self.create("kim-3", ns="dev", user="kim", groups=["group-b"], cpu="50m",
                    labels={"yunikorn.apache.org/queue": "root.tenants.group-a.x"})
        self.assert_bound("kim-3", "dev")
        wait_until(lambda: user_queues(self.kq, "kim").get("root.tenants.group-b.dev") == 150,
                   msg="kim-3 in root.tenants.group-b.dev")
        # the rules as YuniKorn's REST API shows them (dao.RuleDAO; recovery last)
        rules = self.kq.get_json("/ws/v1/partition/%s/placementrules" % PARTITION)
        self.assertEqual([r["name"] for r in rules], ["provided", "user", "tag", "recovery"])
        self.assertEqual(rules[0]["parentRule"], {
            "name": "fixed", "parameters": {"queue": "root.system", "create": "false", "qualified": "true"},
            "filter": {"type": "allow", "userList": ["admin"], "groupList": ["admin"]}})
        self.assertEqual(rules[2]["parameters"], {"tagName": "namespace", "create": "true"})
        self.assertEqual(rules[3], {"name": "recovery", "parameters": {"queue": "root.@recovery@"}})
        # anyone else names no queue and matches no filter: rejected (no root.default)
        self.create("anon-1", ns="default", user="anonymous", groups=["anonymous"], cpu="100m")
        self.assert_denied("anon-1", "default", "no placement rule matched")
