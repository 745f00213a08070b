"""Issue 27, YuniKorn pod defaults: a pod is read as YuniKorn's k8shim reads it.

  - identity: a yunikorn.apache.org/user.info annotation that is not JSON counts as user
    nobody without groups, one with an empty user as nobody with the groups given
    (apache/yunikorn-k8shim pkg/common/utils/utils.go GetUserFromPod;
    utils_test.go TestGetUserFromPodAnnotation, cases "Invalid JSON" and "Empty username").
    The pod is counted and scheduled, never refused, within the `*` user limit nobody
    falls under (no escape from limits), and a Warning Event UserInfoInvalid says why.
  - application: a pod without an application id joins YuniKorn's generated id
    "yunikorn-<namespace>-autogen" (utils.go GetApplicationIDFromPod / GenerateApplicationID,
    constants.AutoGenAppPrefix/AutoGenAppSuffix; utils_test.go TestGetApplicationIDFromPod),
    so maxapplications counts as YuniKorn counts; --app-id-fallback owner keeps grouping by
    controller UID.
"""

import json

from kqtest import KQTestCase, pod_manifest, queues_config, user_usage, wait_until, actual_usage

YK_USER_INFO = "yunikorn.apache.org/user.info"


def yk_pod(name, info, cpu, ns="default"):
    p = pod_manifest(name, ns=ns, cpu=cpu, memory="64Mi")
    p["metadata"]["annotations"][YK_USER_INFO] = info
    return p


class UserInfoDefaultsTest(KQTestCase):
    # nobody is limited by the `*` user limit (1 cpu); group devops is named, so an
    # application of a devops member is tracked against it (README "limits")
    CONFIG = queues_config({"name": "default", "limits": [
        {"limit": "everybody", "users": ["*"], "maxresources": {"cpu": "1"}},
        {"limit": "devops", "groups": ["devops"], "maxresources": {"cpu": "10"}}]})

    def events(self, name):
        return [e for e in self.sim.events("default") if e["involvedObject"]["name"] == name]

    def test_malformed_and_empty_user_info_count_as_nobody(self):
        # TestGetUserFromPodAnnotation "Invalid JSON": {userInfoKey: "xyzxyz"} -> "nobody", nil
        self.sim.create_pod(yk_pod("garbage", "xyzxyz", "500m"))
        self.assert_bound("garbage")
        wait_until(lambda: user_usage(self.kq, "nobody").get("cpu") == 500, 10, 0.1, "nobody's 500m")

        # "Empty username": {"user":"","groups":["devops","test"]} -> "nobody", [devops test]
        self.sim.create_pod(yk_pod("nouser", json.dumps({"user": "", "groups": ["devops", "test"]}), "400m"))
        self.assert_bound("nouser")
        wait_until(lambda: user_usage(self.kq, "nobody").get("cpu") == 900, 10, 0.1, "nobody's 900m")
        # no escape from limits: nobody is held to the `*` user limit (900m + 200m > 1)
        self.sim.create_pod(yk_pod("over", "{not json", "200m"))
        why = self.assert_denied("over", "default", "nobody", "(user *)")
        self.assertIn("needs 100m more cpu", why)

        # a Warning Event on each says why; Events are written in order, so once the denial
        # of the last pod is there, so is everything queued for the first two: the notice is
        # no denial, and the pods' admission adds no QuotaAdmitted
        wait_until(lambda: {e["reason"] for e in self.events("over")} >= {"UserInfoInvalid", "QuotaExceeded"}, 10,
                   0.1, "the Events of the denied pod")
        for name in ("garbage", "nouser"):
            ev = self.events(name)
            self.assertEqual([(e["type"], e["reason"]) for e in ev], [("Warning", "UserInfoInvalid")], name)
            self.assertIn(YK_USER_INFO, ev[0]["message"])
            self.assertIn("nobody", ev[0]["message"])

    def test_groups_of_an_empty_user_are_used(self):
        # "Empty username" alone: the groups count, so the application is tracked against devops
        self.sim.create_pod(yk_pod("nouser", json.dumps({"user": "", "groups": ["devops", "test"]}), "400m"))
        self.assert_bound("nouser")
        groups = wait_until(lambda: actual_usage(self.kq)["groups"] or None, 10, 0.1, "group usage")
        self.assertEqual(groups, {"devops": {"root": {"cpu": 400, "memory": 64 * 2**20},
                                             "root.default": {"cpu": 400, "memory": 64 * 2**20}}})
        self.assertEqual(user_usage(self.kq, "nobody").get("cpu"), 400)


def owned(name, ns, owner_uid, user="alice"):
    """A pod of a controller (ReplicaSet owner_uid) without an application id."""
    p = pod_manifest(name, ns=ns, user=user, cpu="100m", memory="64Mi")
    p["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs-" + owner_uid[:8],
                                         "uid": owner_uid, "controller": True}]
    return p


RS_A, RS_B = "0b3f6e2a-0000-4000-8000-00000000000a", "0b3f6e2a-0000-4000-8000-00000000000b"
# one application per user in the queue: the count YuniKorn's generated ids give
APPS_CONFIG = queues_config({"name": "default", "limits": [
    {"limit": "one app", "users": ["*"], "maxapplications": 1}]})


class AppIdDefaultTest(KQTestCase):
    CONFIG = APPS_CONFIG

    def test_pods_without_an_id_join_the_namespace_application(self):
        # utils_test.go TestGetApplicationIDFromPod "No AppID defined but not generateUnique":
        # namespace testns -> "yunikorn-testns-autogen", whichever controller made the pod
        self.sim.create_pod(owned("a", "testns", RS_A))
        self.assert_bound("a", "testns")
        self.sim.create_pod(owned("b", "testns", RS_B))
        self.assert_bound("b", "testns")  # the same application: maxapplications 1 holds
        apps = wait_until(lambda: actual_usage(self.kq)["apps"].get("alice") or None, 10, 0.1, "alice's apps")
        self.assertEqual(apps, {"yunikorn-testns-autogen"})
        # another namespace is another application (TestGenerateApplicationID "short":
        # "yunikorn-short-autogen"): over the limit of one
        self.sim.create_pod(owned("c", "short", RS_A))
        self.assert_denied("c", "short", "alice", "applications", "one app")
        self.assertNotIn("event=yunikorn_difference", self.kq.logs())


class AppIdOwnerOptionTest(KQTestCase):
    CONFIG = APPS_CONFIG
    EXTRA_ARGS = ("--app-id-fallback", "owner")

    def test_owner_groups_by_controller_and_is_warned(self):
        self.sim.create_pod(owned("a", "testns", RS_A))
        self.assert_bound("a", "testns")
        self.sim.create_pod(owned("a2", "testns", RS_A))
        self.assert_bound("a2", "testns")  # the same controller: the same application
        self.sim.create_pod(owned("b", "testns", RS_B))
        self.assert_denied("b", "testns", "alice", "applications", "one app")
        self.assertEqual(actual_usage(self.kq)["apps"].get("alice"), {RS_A})
        self.assertIn("event=yunikorn_difference key=app-id-fallback", self.kq.logs())


if __name__ == "__main__":
    import unittest
    unittest.main()
