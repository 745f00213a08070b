"""YuniKorn drop-in, the limits and the REST view (issue 16): YuniKorn's quota semantics end to
end, and a contract test of the /ws/v1 JSON against YuniKorn's DAO types.

The contract is transcribed by hand from apache/yunikorn-core pkg/webservice/dao (ugm_info.go,
queue_info.go, application_info.go, partition_info.go, cluster_info.go, node_info.go,
error_info.go, scheduler_health.go): every field's JSON name, its Go type and whether it has
omitempty. For each answer: a field without omitempty is present, every field has its DAO
type, a field with omitempty is never sent with its zero value (Go's encoder drops those), and
a field the DAO does not declare is one of kubequota's documented additions."""

import copy
import json

from kqtest import KQTestCase, PARTITION, HttpClient, certs, queues_config, wait_until

WS = "/ws/v1/partition/%s" % PARTITION

# JSON types of Go types: "str", "bool", "int", "map_int" (map[string]int64), "map_str",
# "list_str", "obj", "list_obj", "map_any" (map[string]int).
RESOURCE_USAGE = {  # dao.ResourceUsageDAOInfo
    "queuePath": ("str", False),
    "resourceUsage": ("map_int", True),
    "runningApplications": ("list_str", True),
    "maxResources": ("map_int", True),
    "maxApplications": ("int", True),
    "children": ("list_obj", True),
}
USER = {"userName": ("str", False), "groups": ("map_str", True), "queues": ("obj", True)}
GROUP = {"groupName": ("str", False), "applications": ("list_str", True), "queues": ("obj", True)}
QUEUE = {  # dao.PartitionQueueDAOInfo (the fields kubequota fills)
    "queuename": ("str", False), "status": ("str", True), "partition": ("str", False),
    "pendingResource": ("map_int", True), "maxResource": ("map_int", True),
    "guaranteedResource": ("map_int", True), "allocatedResource": ("map_int", True),
    "preemptingResource": ("map_int", True), "headroom": ("map_int", True),
    "isLeaf": ("bool", False), "isManaged": ("bool", False), "properties": ("map_str", True),
    "parent": ("str", True), "template": ("obj", True), "children": ("list_obj", True),
    "childNames": ("list_str", True), "absUsedCapacity": ("map_int", True),
    "maxRunningApps": ("int", True), "runningApps": ("int", True),
    "currentPriority": ("int", False), "allocatingAcceptedApps": ("list_str", True),
    "sortingPolicy": ("str", True), "prioritySorting": ("bool", False),
    "preemptionEnabled": ("bool", False), "isPreemptionFence": ("bool", False),
    "preemptionDelay": ("str", True), "quotaPreemptionDelay": ("str", True),
    "isPriorityFence": ("bool", False), "priorityOffset": ("int", True),
}
APPLICATION = {  # dao.ApplicationDAOInfo (scalar fields)
    "applicationID": ("str", False), "usedResource": ("map_int", True),
    "maxUsedResource": ("map_int", True), "pendingResource": ("map_int", True),
    "partition": ("str", False), "queueName": ("str", False), "submissionTime": ("int", True),
    "applicationState": ("str", True), "user": ("str", True), "groups": ("list_str", True),
    "rejectedMessage": ("str", True), "hasReserved": ("bool", True),
    "maxRequestPriority": ("int", True), "startTime": ("int", True),
}
PARTITION_INFO = {  # dao.PartitionInfo
    "clusterId": ("str", False), "name": ("str", False), "capacity": ("obj", False),
    "nodeSortingPolicy": ("obj", False), "preemptionEnabled": ("bool", False),
    "quotaPreemptionEnabled": ("bool", False), "totalNodes": ("int", True),
    "applications": ("map_any", True), "totalContainers": ("int", True), "state": ("str", True),
    "lastStateTransitionTime": ("int", True),
}
CAPACITY = {"capacity": ("map_int", True), "usedCapacity": ("map_int", True),
            "utilization": ("map_int", True)}
CLUSTER = {"startTime": ("int", True), "rmBuildInformation": ("list_obj", True),
           "partition": ("str", False), "clusterName": ("str", False)}
NODE = {"nodeID": ("str", False), "hostName": ("str", True), "rackName": ("str", True),
        "attributes": ("map_str", True), "capacity": ("map_int", True),
        "allocated": ("map_int", True), "occupied": ("map_int", True),
        "available": ("map_int", True), "utilized": ("map_int", True),
        "allocations": ("list_obj", True), "schedulable": ("bool", False),
        "isReserved": ("bool", False), "reservations": ("list_str", True)}
ERROR = {"status_code": ("int", False), "message": ("str", True), "description": ("str", True)}
HEALTH = {"Healthy": ("bool", False), "HealthChecks": ("list_obj", True)}
HEALTH_CHECK = {"Name": ("str", True), "Succeeded": ("bool", False), "Description": ("str", True),
                "DiagnosisMessage": ("str", True)}

# kubequota's additions (README, "Coming from YuniKorn / Koordinator"): a group's users, and
# the elastic quota fields of the queues view.
EXTRA = {
    "group": {"users"},
    "queue": {"minResource", "scaledMinResource", "requestResource", "quotaAllocatedResource",
              "runtimeResource", "sharedWeight", "allowLent", "quotaTree"},
}


def is_type(v, t):
    if t == "str":
        return isinstance(v, str)
    if t == "bool":
        return isinstance(v, bool)
    if t == "int":
        return isinstance(v, int) and not isinstance(v, bool)
    if t in ("map_int", "map_any"):
        return isinstance(v, dict) and all(is_type(x, "int") for x in v.values())
    if t == "map_str":
        return isinstance(v, dict) and all(isinstance(x, str) for x in v.values())
    if t == "list_str":
        return isinstance(v, list) and all(isinstance(x, str) for x in v)
    if t == "obj":
        return isinstance(v, dict)
    if t == "list_obj":
        return isinstance(v, list) and all(isinstance(x, dict) for x in v)
    raise ValueError(t)


def zero(v):
    """Go's omitempty drops false, 0, "" and empty maps and slices."""
    if isinstance(v, bool):
        return not v
    return v == "" or v == 0 or v == {} or v == []


class Contract:
    def __init__(self, case):
        self.case = case

    def check(self, obj, dao, where, extra=()):
        tc = self.case
        tc.assertIsInstance(obj, dict, where)
        for name, (typ, omitempty) in dao.items():
            if name not in obj:
                tc.assertTrue(omitempty, "%s: %s has no omitempty in the DAO but is missing" % (where, name))
                continue
            v = obj[name]
            tc.assertTrue(is_type(v, typ), "%s: %s is %r, the DAO says %s" % (where, name, v, typ))
            if omitempty:
                tc.assertFalse(zero(v),
                               "%s: %s is %r, which Go's omitempty never sends" % (where, name, v))
        for name in obj:
            tc.assertTrue(name in dao or name in extra,
                          "%s: %s is not a field of the DAO nor a documented addition" % (where, name))

    def usage_tree(self, node, where):
        self.check(node, RESOURCE_USAGE, where)
        for c in node.get("children") or []:
            self.usage_tree(c, where + " > " + c.get("queuePath", "?"))

    def queue_tree(self, q, where):
        self.check(q, QUEUE, where, EXTRA["queue"])
        for c in q.get("children") or []:
            self.queue_tree(c, where + " > " + c.get("queuename", "?"))


CONFIG = queues_config(
    {"name": "default"},
    {"name": "dev", "resources": {"max": {"vcore": "8", "memory": "16Gi", "pods": 20}},
     "submitacl": "alice,bob,carol dev,qa",
     "limits": [
         {"limit": "bob", "users": ["bob"], "maxresources": {"vcore": "2"}, "maxapplications": 3},
         {"limit": "two pods each", "users": ["*"], "maxresources": {"pods": 2}},
         {"limit": "dev group", "groups": ["dev"], "maxresources": {"vcore": "6"}},
         {"limit": "everybody else", "groups": ["*"], "maxresources": {"vcore": "1"}},
     ]},
    {"name": "locked", "submitacl": "admin"},
)


# The same without root's submitacl "*": the queues' own ACLs decide (an unset ACL allows
# nobody, as in YuniKorn).
CONFIG_ACL = copy.deepcopy(CONFIG)
del CONFIG_ACL["partitions"][0]["queues"][0]["submitacl"]


def usage(kq, kind, name):
    r = kq.http.get("%s/usage/%s/%s" % (WS, kind, name))
    return r.status, r.json()


def at(node, path):
    if node.get("queuePath") == path:
        return node
    for c in node.get("children") or []:
        hit = at(c, path)
        if hit is not None:
            return hit
    return None


class YuniKornRestTest(KQTestCase):
    CONFIG = CONFIG

    def test_contract(self):
        c = Contract(self)
        # users and groups named in limits are there before any use (YuniKorn creates their
        # trackers at configuration load: yunikorn-core pkg/scheduler/ugm/manager.go)
        st, bob = usage(self.kq, "user", "bob")
        self.assertEqual(st, 200, bob)
        c.check(bob, USER, "user bob")
        self.assertEqual(at(bob["queues"], "root.dev")["maxResources"], {"vcore": 2000})
        self.assertEqual(at(bob["queues"], "root.dev")["maxApplications"], 3)
        st, star = usage(self.kq, "group", "%2A")
        self.assertEqual(st, 200, star)
        self.assertEqual(at(star["queues"], "root.dev")["maxResources"], {"vcore": 1000})

        self.create("a1", user="alice", groups=["dev"], queue="root.dev", cpu="500m", memory="1Gi",
                    app="spark-1")
        self.assert_bound("a1")
        self.create("a2", user="carol", groups=["ops"], queue="root.dev", cpu="250m", app="carol-1")
        self.assert_bound("a2")
        wait_until(lambda: len(self.kq.get_json(WS + "/applications")) == 2, msg="two applications")

        users = self.kq.users()
        for u in users:
            c.check(u, USER, "user " + u["userName"])
            c.usage_tree(u["queues"], "user " + u["userName"])
        alice = [u for u in users if u["userName"] == "alice"][0]
        dev = at(alice["queues"], "root.dev")
        # vcore in millicores, memory in bytes, pods counted (the shim's names)
        self.assertEqual(dev["resourceUsage"], {"vcore": 500, "memory": 1 << 30, "pods": 1})
        self.assertEqual(dev["runningApplications"], ["spark-1"])
        self.assertEqual(alice["groups"], {"spark-1": "dev"})
        for g in self.kq.groups():
            c.check(g, GROUP, "group " + g["groupName"], EXTRA["group"])
            c.usage_tree(g["queues"], "group " + g["groupName"])

        q = self.kq.queues()
        c.queue_tree(q, "queues")
        one = self.kq.get_json(WS + "/queue/root.dev")
        c.check(one, QUEUE, "queue root.dev", EXTRA["queue"])
        self.assertNotIn("children", one)
        self.assertEqual(one["allocatedResource"]["vcore"], 750)
        self.assertEqual(one["maxResource"], {"vcore": 8000, "memory": 16 << 30, "pods": 20})

        for path in (WS + "/applications", WS + "/queue/root.dev/applications"):
            apps = self.kq.get_json(path)
            self.assertEqual(sorted(a["applicationID"] for a in apps), ["carol-1", "spark-1"])
            for a in apps:
                c.check(a, APPLICATION, path)
        parts = self.kq.get_json("/ws/v1/partitions")
        self.assertEqual(len(parts), 1)
        c.check(parts[0], PARTITION_INFO, "partition")
        c.check(parts[0]["capacity"], CAPACITY, "partition capacity")
        self.assertEqual(parts[0]["capacity"]["usedCapacity"]["vcore"], 750)
        for cl in self.kq.get_json("/ws/v1/clusters"):
            c.check(cl, CLUSTER, "cluster")
        nodes = self.kq.get_json(WS + "/nodes")
        for n in nodes:
            c.check(n, NODE, "node")
        h = self.kq.get_json("/ws/v1/scheduler/healthcheck")
        c.check(h, HEALTH, "healthcheck")
        for hc in h.get("HealthChecks") or []:
            c.check(hc, HEALTH_CHECK, "health check")
        self.assertTrue(h["Healthy"])

        # errors: dao.YAPIError with YuniKorn's messages and status codes (handlers.go)
        for path, status, message in (
                ("/ws/v1/partition/nope/queues", 404, "Partition not found"),
                (WS + "/usage/user/nobody-at-all", 404, "User not found"),
                (WS + "/usage/group/nogroup", 404, "Group not found"),
                (WS + "/queue/root.nope", 404, "Queue not found"),
                (WS + "/applications/sleeping", 400,
                 "Only following application states are allowed: active, rejected, completed")):
            r = self.kq.http.get(path)
            self.assertEqual(r.status, status, path)
            c.check(r.json(), ERROR, path)
            self.assertEqual(r.json()["status_code"], status)
            self.assertEqual(r.json()["message"], message)

    def test_cors_like_yunikorn(self):
        # apache/yunikorn-core pkg/webservice/handlers.go writeHeaders
        r = self.kq.http.get(WS + "/queues", headers={"Origin": "https://ui.example"})
        self.assertEqual(r.status, 200)
        h = {k.lower(): v for k, v in r.headers.items()}
        self.assertEqual(h.get("access-control-allow-origin"), "*")
        self.assertEqual(h.get("access-control-allow-methods"), "GET, OPTIONS")
        self.assertIn("Content-Type", h.get("access-control-allow-headers", ""))
        # a browser's preflight is answered without a token and without data
        anon = HttpClient(self.kq.url, ca=certs()["ca"])
        p = anon.request("OPTIONS", WS + "/usage/users", headers={"Origin": "https://ui.example"})
        self.assertEqual(p.status, 200)
        self.assertEqual(p.text, "")
        self.assertEqual({k.lower(): v for k, v in p.headers.items()}.get("access-control-allow-origin"), "*")
        # ... while the data itself still needs authentication (secure by default)
        self.assertEqual(anon.get(WS + "/usage/users").status, 401)
        # the scheduler's endpoints have no CORS headers
        s = self.kq.http.post("/scheduler/filter", {})
        self.assertNotIn("access-control-allow-origin", {k.lower() for k in s.headers})

    def test_config_view_is_a_valid_queues_yaml(self):
        text = self.kq.http.get("/ws/v1/config").text
        r = self.kq.http.request("POST", "/ws/v1/validate-conf", raw=text)
        self.assertEqual(r.json(), {"allowed": True, "reason": ""}, text)
        self.assertEqual(json.loads(text)["partitions"][0]["name"], PARTITION)


class YuniKornSemanticsTest(KQTestCase):
    """One scenario per semantic point, each from YuniKorn's design or code (cited)."""
    CONFIG = CONFIG

    def test_wildcard_group_is_cumulative(self):
        # "Specifying a wildcard for the group limit sets a cumulative limit for all users in
        # that queue" (apache/yunikorn-site docs/design/user_group_resource_usage_enforcement.md)
        self.create("w1", user="alice", groups=["x"], queue="root.dev", cpu="500m", app="w1")
        self.assert_bound("w1")
        self.create("w2", user="carol", groups=["y"], queue="root.dev", cpu="500m", app="w2")
        self.assert_bound("w2")
        self.create("w3", user="bob", groups=["z"], queue="root.dev", cpu="100m", app="w3")
        self.assert_denied("w3", "default", "group *", "everybody else")
        st, star = usage(self.kq, "group", "%2A")
        self.assertEqual(at(star["queues"], "root.dev")["resourceUsage"]["vcore"], 1000)

    def test_application_charged_to_its_first_user(self):
        # yunikorn-core pkg/scheduler/objects/application.go: IncreaseTrackedResource(..., sa.user):
        # the application's pods are charged to its user. kubequota differs deliberately (issue 29,
        # README "Coming from YuniKorn"): another user's pod never joins it, so none is charged
        # to the owner; it is refused instead
        self.create("f1", user="bob", groups=["dev"], queue="root.dev", cpu="1500m", app="shared")
        self.assert_bound("f1")
        self.create("f2", user="alice", groups=["dev"], queue="root.dev", cpu="500m", app="shared")
        self.assert_denied("f2", "default", "application \"shared\" belongs to another user", "alice")
        self.create("f3", user="bob", groups=["dev"], queue="root.dev", cpu="1", app="shared")
        self.assert_denied("f3", "default", "user bob", "limit \"bob\"")
        self.create("f4", user="bob", groups=["dev"], queue="root.dev", cpu="500m", app="shared")
        self.assert_bound("f4")
        st, bob = usage(self.kq, "user", "bob")
        self.assertEqual(at(bob["queues"], "root.dev")["resourceUsage"]["vcore"], 2000)
        self.assertEqual(usage(self.kq, "user", "alice")[0], 404)

    def test_pods_are_counted(self):
        # the shim's pods: 1 per pod (apache/yunikorn-k8shim pkg/common/resource.go)
        for i in range(2):
            self.create("p%d" % i, user="carol", groups=["dev"], queue="root.dev", cpu="100m",
                        app="pods-%d" % i)
            self.assert_bound("p%d" % i)
        self.create("p2", user="carol", groups=["dev"], queue="root.dev", cpu="100m", app="pods-2")
        self.assert_denied("p2", "default", "pods 2 used + 1 requested > 2 max", "two pods each")

    def test_zero_usage_is_pruned(self):
        # yunikorn-core v1.8.0 pkg/scheduler/ugm/queue_tracker.go prunes a tracker's usage
        # after every increase and decrease (qt.resourceUsage.Prune()): the usage views'
        # resourceUsage (dao.ResourceUsageDAOInfo) never shows a 0. A pod asking no memory
        # (memory: 0) shows no memory key; a memory pod that ends leaves none behind (issue
        # 38, item 6)
        self.create("z1", user="carol", groups=["dev"], queue="root.dev", cpu="100m", memory="0",
                    app="z-1")
        self.assert_bound("z1")
        st, carol = usage(self.kq, "user", "carol")
        self.assertEqual(st, 200, carol)
        self.assertEqual(at(carol["queues"], "root.dev")["resourceUsage"], {"vcore": 100, "pods": 1})
        self.create("z2", user="carol", groups=["dev"], queue="root.dev", cpu="100m", memory="1Gi",
                    app="z-2")
        self.assert_bound("z2")
        wait_until(lambda: at(usage(self.kq, "user", "carol")[1]["queues"], "root.dev")["resourceUsage"]
                   == {"vcore": 200, "memory": 1 << 30, "pods": 2}, msg="carol's usage with z2")
        self.sim.delete_pod("default", "z2")
        wait_until(lambda: at(usage(self.kq, "user", "carol")[1]["queues"], "root.dev")["resourceUsage"]
                   == {"vcore": 100, "pods": 1}, msg="z2's memory pruned from carol's usage")
        for path in ("root", "root.dev"):
            self.assertEqual(at(usage(self.kq, "user", "carol")[1]["queues"], path)["resourceUsage"],
                             {"vcore": 100, "pods": 1}, path)
        st, dev = usage(self.kq, "group", "dev")
        self.assertEqual(at(dev["queues"], "root.dev")["resourceUsage"], {"vcore": 100, "pods": 1})



class SubmitAclTest(KQTestCase):
    CONFIG = CONFIG_ACL

    def test_submit_acl(self):
        # yunikorn-core pkg/scheduler/objects/queue.go CheckSubmitAccess, with the cases of
        # pkg/common/security/acl_test.go TestACLAccess
        self.create("s1", user="mallory", groups=["eng"], queue="root.dev", cpu="100m", app="s1")
        self.assert_denied("s1", "default", "user mallory (groups: eng)", "may not submit to queue root.dev")
        self.create("s2", user="mallory", groups=["qa"], queue="root.dev", cpu="100m", app="s2")
        self.assert_bound("s2")  # the group is listed
        self.create("s3", user="alice", groups=["dev"], queue="root.locked", cpu="100m", app="s3")
        self.assert_denied("s3", "default", "may not submit to queue root.locked")
        self.create("s4", user="admin", queue="root.locked", cpu="100m", app="s4")
        self.assert_bound("s4")
