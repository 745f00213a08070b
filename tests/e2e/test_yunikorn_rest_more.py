"""The rest of YuniKorn's REST API (issue 27): the single application, single node and
applications-by-state endpoints, nodes with allocated/available, YuniKorn's error bodies and
Content-Type, invalid user and group names, and every call the YuniKorn web UI makes.

Expected values come from apache/yunikorn-core pkg/webservice/handlers.go and its tests
(pkg/webservice/handlers_test.go, function named at each check) and from the pods this test
creates (their requests, with the shim's pods: 1 per pod), never from kubequota's answers."""

import urllib.parse

from kqtest import KQTestCase, HttpClient, certs, wait_until
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
            self.assertEqual(one.json(), n)
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

    def test_new_endpoints_need_the_usage_permission(self):
        # the same access rules as the other /ws/v1 views (serve/auth.c): no token, no data
        anon = HttpClient(self.kq.url, ca=certs()["ca"])
        for path in (WS + "/application/spark-1", WS + "/queue/root.dev/application/spark-1",
                     WS + "/node/node-1", WS + "/queue/root.dev/applications/Active",
                     WS + "/applications/active?status=Running"):
            self.assertEqual(anon.get(path).status, 401, path)
