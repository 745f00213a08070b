"""The rest of YuniKorn's REST API (issue 27): the single application, single node and
applications-by-state endpoints, nodes with allocated/available, YuniKorn's error bodies and
Content-Type, invalid user and group names, and every call the YuniKorn web UI makes.

Expected values come from apache/yunikorn-core pkg/webservice/handlers.go and its tests
(pkg/webservice/handlers_test.go, function named at each check) and from the pods this test
creates (their requests, with the shim's pods: 1 per pod), never from kubequota's answers."""

import os
import shutil
import subprocess
import urllib.parse

from kqtest import KQTestCase, HttpClient, certs, queues_config, wait_until
from test_yunikorn_rest import (APPLICATION, CONFIG, ERROR, NODE, WS, Contract)

GI = 1 << 30
MI = 1 << 20
# apisim's nodes (kqtest.Sim): cpu 64, memory 256Gi, pods 110, in the DAO's names
NODE_CAPACITY = {"vcore": 64000, "memory": 256 * GI, "pods": 110}
# yunikorn-core handlers.go init(): allowedAppActiveStatuses (printed in map order)
ACTIVE_STATUSES = {"new", "accepted", "running", "completing", "failing", "resuming"}
# yunikorn-core pkg/common/errors.go ErrorInvalidQueueName
INVALID_QUEUE = ("invalid queue name, max 64 characters consisting of alphanumeric characters and "
                 "'-', '_', '#', '@', '/', ':' allowed")


class YuniKornRestMoreTest(KQTestCase):
    CONFIG = CONFIG

    def setUp(self):
        super().setUp()
        self.c = Contract(self)
        # two applications in root.dev: spark-1 (alice, 500m + 1Gi) and carol-1 (carol, 250m
        # + the manifest's default 256Mi)
        self.create("a1", user="alice", groups=["dev"], queue="root.dev", cpu="500m", memory="1Gi",
                    app="spark-1")
        self.assert_bound("a1")
        self.create("a2", user="carol", groups=["ops"], queue="root.dev", cpu="250m", memory="256Mi",
                    app="carol-1")
        self.assert_bound("a2")
        wait_until(lambda: len(self.kq.get_json(WS + "/applications")) == 2, msg="two applications")

    def error(self, path, status, message):
        """dao.YAPIError as buildJSONErrorResponse writes it: NewYAPIError(nil, code, detail)
        sets description = message (yunikorn-core pkg/webservice/dao/error_info.go)."""
        r = self.kq.http.get(path)
        self.assertEqual(r.status, status, "%s: %s" % (path, r.text))
        body = r.json()
        self.c.check(body, ERROR, path)
        self.assertEqual(body, {"status_code": status, "message": message, "description": message}, path)
        return body

    def ids(self, path):
        r = self.kq.http.get(path)
        self.assertEqual(r.status, 200, "%s: %s" % (path, r.text))
        for a in r.json():
            self.c.check(a, APPLICATION, path)
        return sorted(a["applicationID"] for a in r.json())

    def test_applications_by_state_and_status(self):
        # handlers_test.go TestGetPartitionApplicationsByStateHandler: /applications/Active
        # lists the active apps, ?status=Running those running; rejected/completed lists
        both = ["carol-1", "spark-1"]
        self.assertEqual(self.ids(WS + "/applications/Active"), both)
        self.assertEqual(self.ids(WS + "/applications/active?status=Running"), both)
        self.assertEqual(self.ids(WS + "/applications/active?status=running"), both)
        # every kubequota application is Running (a running pod): no app in another state
        for st in ("New", "Accepted", "Completing", "Failing", "Resuming"):
            self.assertEqual(self.ids(WS + "/applications/active?status=" + st), [], st)
        self.assertEqual(self.ids(WS + "/applications/completed"), [])
        r = self.kq.http.get(WS + "/applications/active?status=Invalid")
        self.assertEqual(r.status, 400, r.text)
        self.assert_status_message(r.json())

        # TestGetQueueApplicationsByStateHandler: the queue's apps by state and status; any
        # state but Active is 400 with its own message
        q = WS + "/queue/root.dev/applications/"
        self.assertEqual(self.ids(q + "Active"), both)
        self.assertEqual(self.ids(q + "Active?status=Running"), both)
        self.assertEqual(self.ids(q + "Active?status=New"), [])
        self.assertEqual(self.ids(WS + "/queue/root.default/applications/Active"), [])
        for st in ("Rejected", "Completed"):
            self.error(q + st, 400, "Only following application states are allowed: active")
        r = self.kq.http.get(q + "Active?status=Invalid")
        self.assertEqual(r.status, 400, r.text)
        self.assert_status_message(r.json())
        # getQueueApplicationsByState: partition (404), then queue name (400), queue (404)
        self.error("/ws/v1/partition/nope/queue/root.dev/applications/Active", 404, "Partition not found")
        self.error(WS + "/queue/root.a%20b/applications/Active", 400, INVALID_QUEUE)
        self.error(WS + "/queue/root.nope/applications/Active", 404, "Queue not found")

    def assert_status_message(self, body):
        # allowedActiveStatusMsg: "Only following active statuses are allowed: " and the six
        # statuses joined with "," (Go map order, so compared as a set)
        prefix = "Only following active statuses are allowed: "
        self.assertEqual(body["status_code"], 400)
        self.assertTrue(body["message"].startswith(prefix), body)
        self.assertEqual(set(body["message"][len(prefix):].split(",")), ACTIVE_STATUSES)
        self.assertEqual(body["description"], body["message"])

    def test_single_application(self):
        # handlers_test.go TestGetApplicationHandler: by partition, and by queue
        for path in (WS + "/application/spark-1", WS + "/queue/root.dev/application/spark-1"):
            r = self.kq.http.get(path)
            self.assertEqual(r.status, 200, r.text)
            a = r.json()
            self.c.check(a, APPLICATION, path)
            self.assertEqual(a["applicationID"], "spark-1")
            self.assertEqual(a["queueName"], "root.dev")
            self.assertEqual(a["user"], "alice")
            self.assertEqual(a["usedResource"], {"vcore": 500, "memory": GI, "pods": 1})
        self.error(WS + "/application/no-such-app", 404, "Application not found")
        self.error(WS + "/queue/root.default/application/spark-1", 404, "Application not found")
        self.error(WS + "/queue/root.nope/application/spark-1", 404, "Queue not found")
        self.error(WS + "/queue/root.a%20b/application/spark-1", 400, INVALID_QUEUE)
        self.error("/ws/v1/partition/nope/application/spark-1", 404, "Partition not found")

    def test_nodes_allocated_and_available(self):
        # handlers_test.go TestGetPartitionNode / TestGetPartitionNodes: allocated is what the
        # scheduler's allocations on the node use, available capacity - allocated (node.go
        # refreshAvailableResource, zero values pruned)
        where = {}
        for name in ("a1", "a2"):
            node = self.sim.get_pod("default", name)["spec"]["nodeName"]
            where.setdefault(node, []).append(name)
        per_pod = {"a1": {"vcore": 500, "memory": GI, "pods": 1},
                   "a2": {"vcore": 250, "memory": 256 * MI, "pods": 1}}
        nodes = {n["nodeID"]: n for n in self.kq.get_json(WS + "/nodes")}
        self.assertEqual(sorted(nodes), ["node-1", "node-2", "node-3"])
        for node_id, n in nodes.items():
            self.c.check(n, NODE, "node " + node_id)
            alloc = {}
            for p in where.get(node_id, []):
                for k, v in per_pod[p].items():
                    alloc[k] = alloc.get(k, 0) + v
            avail = {k: v - alloc.get(k, 0) for k, v in NODE_CAPACITY.items()}
            self.assertEqual(n["capacity"], NODE_CAPACITY, node_id)
            self.assertEqual(n.get("allocated", {}), alloc, node_id)
            self.assertEqual(n["available"], avail, node_id)
            self.assertTrue(n["schedulable"])
            one = self.kq.http.get(WS + "/node/" + node_id)
            self.assertEqual(one.status, 200, one.text)
            single = one.json()
            allocs = single.pop("allocations", [])
            self.assertEqual(single, n)
            # TestGetPartitionNode: the node's allocations (dao.AllocationDAOInfo), each with
            # the shim's key (pod UID) and tags (yunikorn-k8shim pkg/common/si_helper.go
            # CreateTagsForTask), which the web UI shows as namespace/podName
            want = []
            for p in sorted(where.get(node_id, [])):
                pod = self.sim.get_pod("default", p)
                want.append({"allocationKey": pod["metadata"]["uid"],
                             "allocationTags": {"kubernetes.io/meta/namespace": "default",
                                                "kubernetes.io/meta/podName": p},
                             "resource": per_pod[p], "priority": "0", "nodeId": node_id,
                             "applicationId": {"a1": "spark-1", "a2": "carol-1"}[p]})
            self.assertEqual(allocs, want, node_id)
        self.error(WS + "/node/no-such-node", 404, "Node not found")
        self.error("/ws/v1/partition/nope/node/node-1", 404, "Partition not found")

    def test_errors_and_names_as_yunikorn(self):
        # every message with description == message (dao.NewYAPIError(nil, ...))
        self.error("/ws/v1/partition/nope/queues", 404, "Partition not found")
        self.error(WS + "/queue/root.nope", 404, "Queue not found")
        self.error(WS + "/queue/root.a%20b", 400, INVALID_QUEUE)
        self.error(WS + "/queue/root." + "x" * 65, 400, INVALID_QUEUE)  # QueueNameRegExp {1,64}
        # TestSpecificUserResourceUsage: "1InvalidUser" fails configs.UserRegExp
        self.error(WS + "/usage/user/1InvalidUser", 400, "Invalid user name")
        # TestSpecificGroupResourceUsage: an escaped "test_a-b_c@#d@do:mai/n.com" fails GroupRegExp
        self.error(WS + "/usage/group/" + urllib.parse.quote("test_a-b_c@#d@do:mai/n.com", safe=""), 400,
                   "Invalid group name")
        # ... while the same as a user name is valid (UserRegExp allows # / @): not found
        self.error(WS + "/usage/user/" + urllib.parse.quote("test_a-b_c@#d@do:mai/n.com", safe=""), 404,
                   "User not found")
        # Kubernetes service accounts pass YuniKorn's regexps (':' is allowed in both)
        self.error(WS + "/usage/user/system:serviceaccount:ns:sa", 404, "User not found")
        self.error(WS + "/usage/group/system:serviceaccounts:ns", 404, "Group not found")
        self.error(WS + "/usage/group/nogroup", 404, "Group not found")

    def test_content_type_is_yunikorns(self):
        # handlers.go writeHeaders: Content-Type "application/json; charset=UTF-8" on every
        # answer, errors included
        for path in ("/ws/v1/clusters", "/ws/v1/partitions", WS + "/queues", WS + "/nodes",
                     WS + "/applications", WS + "/usage/users", WS + "/application/spark-1",
                     WS + "/queue/root.nope", "/ws/v1/scheduler/healthcheck"):
            r = self.kq.http.get(path)
            h = {k.lower(): v for k, v in r.headers.items()}
            self.assertEqual(h.get("content-type"), "application/json; charset=UTF-8", path)

    def test_web_ui_calls(self):
        # apache/yunikorn-web src/app/services/scheduler/scheduler.service.ts (commit 63b7660):
        # every /ws/v1 call the web UI makes, with what it reads from each answer
        ok = {
            "/ws/v1/clusters": list,                                      # fetchClusterList
            "/ws/v1/partitions": list,                                    # fetchPartitionList
            WS + "/queues": dict,                                         # fetchSchedulerQueues
            WS + "/queue/root.dev/applications": list,                    # fetchAppList
            WS + "/nodes": list,                                          # fetchNodeList
            "/ws/v1/scheduler/node-utilizations": list,                   # fetchNodeUtilizationsInfo
            "/ws/v1/scheduler/healthcheck": dict,                         # fecthHealthchecks
        }
        for path, typ in ok.items():
            r = self.kq.http.get(path)
            self.assertEqual(r.status, 200, "%s: %s" % (path, r.text))
            self.assertIsInstance(r.json(), typ, path)
        # fetchAppHistory / fetchContainerHistory: what YuniKorn answers with its internal
        # metrics off (handlers.go getApplicationHistory, TestApplicationHistory)
        for path in ("/ws/v1/history/apps", "/ws/v1/history/containers"):
            self.error(path, 500, "Internal metrics collection is not enabled.")
        # fetchNodeList reads capacity, allocated, available of every node
        for n in self.kq.get_json(WS + "/nodes"):
            self.assertIn("capacity", n)
            self.assertIn("available", n)

    def test_node_utilizations(self):
        # handlers.go getPartitionNodesUtilJSON (handlers_test.go TestGetNodeUtilisations,
        # TestGetPartitionNodesUtilJSON): per resource ten buckets "0-10%" .. "90-100%" of node
        # names by CalculateAbsUsedCapacity (a whole percentage), bucket Dim(Ceil(pct/10), 1);
        # numOfNodes and nodeNames omitted when empty. The two pods use under 10% of any node.
        r = self.kq.http.get("/ws/v1/scheduler/node-utilizations")
        self.assertEqual(r.status, 200, r.text)
        body = r.json()
        self.assertEqual(len(body), 1)
        self.assertEqual(body[0]["partition"], "default")
        self.assertIsInstance(body[0]["clusterId"], str)
        util = {u["type"]: u["utilization"] for u in body[0]["utilizations"]}
        self.assertEqual(sorted(util), ["memory", "pods", "vcore"])
        names = ["%d-%d%%" % (k * 10, (k + 1) * 10) for k in range(10)]
        for typ, buckets in util.items():
            self.assertEqual([b["bucketName"] for b in buckets], names, typ)
            self.assertEqual(buckets[0], {"bucketName": "0-10%", "numOfNodes": 3,
                                          "nodeNames": ["node-1", "node-2", "node-3"]}, typ)
            for b in buckets[1:]:
                self.assertEqual(b, {"bucketName": b["bucketName"]}, typ)

    def test_queue_abs_used_capacity(self):
        # yunikorn-core pkg/scheduler/objects/queue.go GetPartitionQueueDAOInfo:
        # AbsUsedCapacity = resources.CalculateAbsUsedCapacity(maxResource, allocatedResource),
        # whole percentages, truncated (the web UI's queue usage bars read it). root.dev: max
        # vcore 8, memory 16Gi, pods 20; used 750m, 1Gi + 256Mi, 2 pods
        want = {"vcore": 750 * 100 // 8000, "memory": (GI + 256 * MI) * 100 // (16 * GI), "pods": 2 * 100 // 20}
        self.assertEqual(want, {"vcore": 9, "memory": 7, "pods": 10})
        self.assertEqual(self.kq.get_json(WS + "/queue/root.dev")["absUsedCapacity"], want)
        # a queue without max or without usage has none (the DAO's omitempty)
        self.assertNotIn("absUsedCapacity", self.kq.get_json(WS + "/queue/root.default"))

    def test_new_endpoints_need_the_usage_permission(self):
        # the same access rules as the other /ws/v1 views (serve/auth.c): no token, no data
        anon = HttpClient(self.kq.url, ca=certs()["ca"])
        for path in (WS + "/application/spark-1", WS + "/queue/root.dev/application/spark-1",
                     WS + "/node/node-1", WS + "/queue/root.dev/applications/Active",
                     WS + "/applications/active?status=Running", "/ws/v1/scheduler/node-utilizations",
                     "/ws/v1/history/apps"):
            self.assertEqual(anon.get(path).status, 401, path)


def parse_prom(text):
    """{(name, frozenset(labels.items())): value} of a text exposition (no escapes needed here)."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        head, value = line.rsplit(" ", 1)
        name, labels = head, {}
        if "{" in head:
            name, rest = head.split("{", 1)
            for part in rest.rstrip("}").split('",'):
                if part:
                    k, v = part.split('="', 1)
                    labels[k] = v.rstrip('"')
        out[(name, frozenset(labels.items()))] = float(value)
    return out


def sample(samples, name, **labels):
    return samples.get((name, frozenset(labels.items())))


# apache/yunikorn-k8shim deployments/grafana-dashboard/yunikorn-metrics.json (commit ac4f1416,
# YUNIKORN-2753): the metric names its panels query, the queue ones with the dashboard's
# $Queue variable (regex /yunikorn_root_(.*)_queue/) set to "dev"
DASHBOARD_SERVED = [
    "yunikorn_scheduler_application_total",
    "yunikorn_scheduler_vcore_node_usage_total",
    "yunikorn_scheduler_memory_node_usage_total",
    "yunikorn_scheduler_pods_node_usage_total",
    "yunikorn_scheduler_ephemeral_storage_node_usage_total",
    "yunikorn_root_dev_queue_app",
    "yunikorn_root_dev_queue_resource",
]
# ... and those kubequota does not serve (it runs no scheduling loop and keeps no submission
# or allocation-attempt history): named in docs/metrics.md
DASHBOARD_NOT_SERVED = [
    "yunikorn_scheduler_application_submission_total",
    "yunikorn_scheduler_container_allocation_attempt_total",
    "yunikorn_scheduler_scheduling_latency_milliseconds",
    "yunikorn_scheduler_trynode_latency_milliseconds",
    "yunikorn_scheduler_trypreemption_latency_milliseconds",
]
# YuniKorn's gauges named *_total (pkg/metrics/scheduler.go): promtool's one lint, kept for
# the dashboards
GAUGES_NAMED_TOTAL = {"yunikorn_scheduler_application_total"} | {
    n for n in DASHBOARD_SERVED if n.endswith("_node_usage_total")}


class YuniKornMetricsTest(KQTestCase):
    CONFIG = CONFIG

    def setUp(self):
        super().setUp()
        # a node with ephemeral storage (the dashboard has a panel for it)
        self.sim.world.add_node("node-eph", cpu="4", memory="8Gi", extra={
            "status": {"capacity": {"ephemeral-storage": "100Gi"},
                       "allocatable": {"ephemeral-storage": "100Gi"}}})
        wait_until(lambda: len(self.kq.get_json(WS + "/nodes")) == 4, msg="four nodes")
        self.create("a1", user="alice", groups=["dev"], queue="root.dev", cpu="500m", memory="1Gi",
                    app="spark-1")
        self.assert_bound("a1")
        self.create("a2", user="carol", groups=["ops"], queue="root.dev", cpu="250m", memory="256Mi",
                    app="carol-1")
        self.assert_bound("a2")
        self.create("big", user="alice", groups=["dev"], queue="root.default", cpu="20", memory="256Mi",
                    app="big-1")
        self.assert_bound("big")
        wait_until(lambda: len(self.kq.get_json(WS + "/applications")) == 3, msg="three applications")

    def scrape(self):
        r = self.kq.http.get("/ws/v1/metrics")
        self.assertEqual(r.status, 200, r.text)
        self.assertTrue(r.headers.get("Content-Type", "").startswith("text/plain; version=0.0.4"))
        return r.text

    def test_queue_and_scheduler_families(self):
        s = parse_prom(self.scrape())
        # yunikorn-core pkg/metrics/queue.go (queue_test.go TestApplicationsRunning,
        # TestQueueAllocatedResourceMetrics, TestQueueMaxResourceMetrics): the labelled families
        self.assertEqual(sample(s, "yunikorn_queue_app", queue="root.dev", state="running"), 2)
        self.assertEqual(sample(s, "yunikorn_queue_app", queue="root.default", state="running"), 1)
        self.assertEqual(sample(s, "yunikorn_queue_resource", queue="root.dev", state="allocated",
                                resource="vcore"), 750)
        self.assertEqual(sample(s, "yunikorn_queue_resource", queue="root.dev", state="allocated",
                                resource="memory"), GI + 256 * MI)
        self.assertEqual(sample(s, "yunikorn_queue_resource", queue="root.dev", state="allocated",
                                resource="pods"), 2)
        self.assertEqual(sample(s, "yunikorn_queue_resource", queue="root.dev", state="max",
                                resource="memory"), 16 * GI)
        self.assertEqual(sample(s, "yunikorn_queue_resource", queue="root", state="allocated",
                                resource="vcore"), 20750)
        # the pre-1.7 per-queue names (formatMetricName("root.dev") = "root_dev"), which the
        # dashboard queries: removed from yunikorn-core by YUNIKORN-3087 (1a07ad75)
        self.assertEqual(sample(s, "yunikorn_root_dev_queue_app", state="running"), 2)
        self.assertEqual(sample(s, "yunikorn_root_dev_queue_resource", state="allocated", resource="vcore"), 750)
        self.assertEqual(sample(s, "yunikorn_root_queue_resource", state="allocated", resource="pods"), 3)
        # scheduler.go: application_total{state} and node{state}
        self.assertEqual(sample(s, "yunikorn_scheduler_application_total", state="running"), 3)
        self.assertEqual(sample(s, "yunikorn_scheduler_node", state="active"), 4)

    def test_node_usage_buckets(self):
        # yunikorn-core pkg/scheduler/partition.go calculateNodesResourceUsage: per resource a
        # node's allocated/capacity (at most 1), bucket ceil(10v)-1 (0 for an idle node), the
        # ranges of pkg/metrics/scheduler.go resourceUsageRangeBuckets
        ranges = ["[0,10%]", "(10%,20%]", "(20%,30%]", "(30%,40%]", "(40%,50%]", "(50%,60%]",
                  "(60%,70%]", "(70%,80%]", "(80%,90%]", "(90%,100%]"]
        cap = {n: {"vcore": 64000, "memory": 256 * GI, "pods": 110} for n in ("node-1", "node-2", "node-3")}
        cap["node-eph"] = {"vcore": 4000, "memory": 8 * GI, "pods": 110, "ephemeral_storage": 100 * GI}
        req = {"a1": {"vcore": 500, "memory": GI, "pods": 1}, "a2": {"vcore": 250, "memory": 256 * MI, "pods": 1},
               "big": {"vcore": 20000, "memory": 256 * MI, "pods": 1}}
        used = {n: {} for n in cap}
        for pod, r in req.items():
            node = self.sim.get_pod("default", pod)["spec"]["nodeName"]
            for k, v in r.items():
                used[node][k] = used[node].get(k, 0) + v
        want = {}
        for node, c in cap.items():
            for res, total in c.items():
                v = min(used[node].get(res, 0) / total, 1)
                idx = max(-(-int(v * 1000) // 100) - 1, 0)  # ceil(10v)-1 on exact thousandths
                want.setdefault(res, [0] * 10)[idx] += 1
        self.assertEqual(want["vcore"][3], 1)  # the node with "big": 20.75 of 64 cores, (30%,40%]
        s = parse_prom(self.scrape())
        for res, counts in want.items():
            name = "yunikorn_scheduler_%s_node_usage_total" % res
            got = [sample(s, name, range=r) for r in ranges]
            self.assertEqual(got, counts, name)

    def test_grafana_dashboard_names(self):
        text = self.scrape()
        families = {k[0] for k in parse_prom(text)}
        for name in DASHBOARD_SERVED:
            self.assertIn(name, families, name)
        with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs",
                               "metrics.md")) as f:
            doc = f.read()
        for name in DASHBOARD_NOT_SERVED:
            self.assertFalse(any(f.startswith(name) for f in families), name)
            self.assertIn(name, doc, "docs/metrics.md does not name %s as not served" % name)

    def test_promtool_accepts_it(self):
        promtool = os.environ.get("KQ_PROMTOOL") or shutil.which("promtool")
        if promtool is None:
            self.skipTest("no promtool (scripts/promtool.sh; or set KQ_PROMTOOL)")
        r = subprocess.run([promtool, "check", "metrics"], input=self.scrape(), capture_output=True, text=True,
                           timeout=60)
        problems = [l.strip() for l in (r.stdout + r.stderr).splitlines() if l.strip()]
        for p in problems:  # YuniKorn's own names: gauges ending in _total, nothing else
            name = p.split()[0]
            self.assertIn(name, GAUGES_NAMED_TOTAL, p)
            self.assertIn('non-counter metrics should not have "_total" suffix', p)

    def test_follows_the_metrics_rules(self):
        # /ws/v1/metrics is guarded like /metrics (open unless --metrics-auth), and holds no
        # user or group names
        anon = HttpClient(self.kq.url, ca=certs()["ca"])
        self.assertEqual(anon.get("/metrics").status, anon.get("/ws/v1/metrics").status)
        text = self.scrape()
        self.assertNotIn("alice", text)
        self.assertNotIn("carol", text)


# yunikorn-core pkg/webservice/handlers_test.go configTwoLevelQueues (partition "default"):
# root's childtemplate, a parent "a" without one, and a leaf "a1"
TEMPLATE_CONFIG = queues_config(
    {"name": "a", "resources": {"guaranteed": {"memory": "500000", "vcore": "50000"},
                                "max": {"memory": "800000", "vcore": "80000"}},
     "queues": [{"name": "a1", "properties": {"application.sort.policy": "fifo"},
                 "resources": {"guaranteed": {"memory": "500000", "vcore": "50000"},
                               "max": {"memory": "800000", "vcore": "80000"}}}]},
)
TEMPLATE_CONFIG["partitions"][0]["queues"][0].update({
    "properties": {"application.sort.policy": "fifo"},
    "childtemplate": {"maxapplications": 10, "properties": {"application.sort.policy": "fifo"},
                      "resources": {"guaranteed": {"memory": "400000"}, "max": {"memory": "600000"}}}})


class YuniKornTemplateTest(KQTestCase):
    CONFIG = TEMPLATE_CONFIG

    def test_parent_queue_template(self):
        # handlers_test.go TestGetPartitionQueuesHandler: root and root.a (which inherits
        # root's template: queue.go addChildQueue) carry dao.TemplateInfo, the leaf none
        want = {"maxApplications": 10, "maxResource": {"memory": 600000},
                "guaranteedResource": {"memory": 400000},
                "properties": {"application.sort.policy": "fifo"}}
        root = self.kq.queues()
        self.assertEqual(root["template"], want)
        a = [c for c in root["children"] if c["queuename"] == "root.a"][0]
        self.assertEqual(a["template"], want)
        a1 = [c for c in a["children"] if c["queuename"] == "root.a.a1"][0]
        self.assertNotIn("template", a1)
        self.assertEqual(self.kq.get_json(WS + "/queue/root.a")["template"], want)

    def test_partition_utilization_without_usage(self):
        # CalculateAbsUsedCapacity leaves out a resource the partition does not use (it only
        # logs it as missing): with nothing running there is no utilization at all (omitempty)
        cap = self.kq.get_json("/ws/v1/partitions")[0]["capacity"]
        self.assertNotIn("utilization", cap)
        self.assertNotIn("usedCapacity", cap)


class YuniKornMetricsNameClashTest(KQTestCase):
    # "root.a-b" and "root.a_b" both format to yunikorn_root_a_b_queue_* (pkg/metrics/init.go
    # formatMetricName); YuniKorn's registry refuses the second registration
    # (prometheus.Register's AlreadyRegisteredError, logged in InitQueueMetrics), so one family
    CONFIG = queues_config({"name": "a-b", "resources": {"max": {"vcore": "2"}}},
                           {"name": "a_b", "resources": {"max": {"vcore": "3"}}})

    def test_one_family_per_formatted_name(self):
        text = self.kq.http.get("/ws/v1/metrics").text
        types = [l for l in text.splitlines() if l.startswith("# TYPE yunikorn_root_a_b_queue_resource ")]
        self.assertEqual(len(types), 1, text)
        s = parse_prom(text)
        self.assertEqual(sample(s, "yunikorn_root_a_b_queue_resource", state="max", resource="vcore"), 2000)
        self.assertEqual(sample(s, "yunikorn_queue_resource", queue="root.a_b", state="max", resource="vcore"), 3000)
        promtool = os.environ.get("KQ_PROMTOOL") or shutil.which("promtool")
        if promtool is not None:
            r = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True,
                               timeout=60)
            self.assertNotIn("second TYPE", r.stdout + r.stderr)
            self.assertNotIn("error", (r.stdout + r.stderr).lower())
