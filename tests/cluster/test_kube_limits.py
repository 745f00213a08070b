"""Per-user, per-group and per-queue limits decided through the real kube-scheduler.

Follows YuniKorn's user/group limit e2e (apache/yunikorn-k8shim,
test/e2e/user_group_limit/user_group_limit_test.go: "Verify_maxresources_with_a_specific_user_limit",
"..._specific_group_limit", "Verify_maxresources_with_a_wildcard_...") on a real control plane:
the over-limit pod stays Pending, and schedules by itself once usage is freed. The expected
numbers are the limits below divided by the pod sizes, not anything kubequota reports.

The admission gate is off in this class (chart value), so the denial is the extender's:
PodScheduled=False/Unschedulable written by kube-scheduler, its FailedScheduling Event
carrying kubequota's reason, and kubequota's own QuotaExceeded Event.
"""

from kubetest import KubeTestCase, queues_config, wait_until

LIMITS = [
    {"limit": "alice in dev", "users": ["alice"], "maxresources": {"cpu": "2"}},
    {"limit": "group ml", "groups": ["ml"], "maxresources": {"cpu": "3"}},
]


class LimitsThroughKubeScheduler(KubeTestCase):
    CHART_VALUES = {"kubequota": {"admissionGate": {"enabled": False}}}
    # Event aggregation (docs/events.md) at most once a second here, not once a minute
    KQ_ARGS = ("--event-update-interval=1s",)
    CONFIG = queues_config(
        {"name": "default"},
        {"name": "dev", "limits": LIMITS},
        {"name": "small", "resources": {"max": {"vcore": "2"}}})

    def test_user_limit(self):
        ns = self.ns()
        # alice is in group ml too: the pods of the tests before (their namespaces are being
        # deleted) may still hold group ml's 3 cpu in root.dev and deny a1 by the group limit.
        # Start from an idle root.dev, whatever ran before.
        wait_until(lambda: not any(self.queue_usage("root.dev").values()), 60, 0.25,
                   "the earlier tests' pods in root.dev to be gone")
        # alice may use 2 cpu in root.dev: two 1-cpu pods fit, the third does not.
        for i in (1, 2):
            self.pod(ns, "a%d" % i, user="alice", queue="root.dev")
        for i in (1, 2):
            self.wait_bound(ns, "a%d" % i)
        self.pod(ns, "a3", user="alice", queue="root.dev")
        cond = self.wait_unschedulable(ns, "a3")
        self.assertIn("alice in dev", cond["message"])
        ev = self.wait_event(ns, "a3", "FailedScheduling", "alice in dev")
        self.assertEqual(ev["type"], "Warning")
        self.wait_event(ns, "a3", "QuotaExceeded", "alice")
        # kubectl describe (the built kubectl) shows why it waits
        out = self.c.kubectl("describe", "pod", "-n", ns, "a3").stdout
        self.assertIn("FailedScheduling", out)
        self.assertIn("QuotaExceeded", out)
        self.assertIn("alice in dev", out)
        self.assert_stays_pending(ns, "a3", 2)
        # bob is not limited by alice's limit in the same queue
        self.pod(ns, "b1", user="bob", queue="root.dev", cpu="2")
        self.wait_bound(ns, "b1")
        # b1's binding made kube-scheduler retry a3, which was denied again: one Event whose
        # count rose (a merge PATCH on the real API server), not a second Event
        ev = wait_until(lambda: [e for e in self.c.events(ns, "a3") if e["reason"] == "QuotaExceeded"
                                 and e.get("count", 1) >= 2], 20, 0.25, "QuotaExceeded count >= 2")
        self.assertEqual(len([e for e in self.c.events(ns, "a3") if e["reason"] == "QuotaExceeded"]), 1)
        self.assertGreater(ev[0]["lastTimestamp"], ev[0]["firstTimestamp"])
        # a deletion that kwok completes frees 1 cpu: a3 schedules by itself. kube-scheduler
        # and kubequota watch the deletion separately; whichever sees it first, a3 is retried
        # once kubequota has released a1: by the deletion event when kubequota was first, or,
        # when kube-scheduler's retry came first and was denied on the stale count, by the
        # kubequota.io/requeue annotation kubequota writes on pods it denied just before a
        # release (docs/events.md "Requeue"). Either way the wait is kube-scheduler's backoff
        # (at most 10s), never its 5-minute flush of unschedulable pods.
        self.delete(ns, "a1")
        self.wait_bound(ns, "a3", timeout=60)
        poke = (self.get(ns, "a3")["metadata"].get("annotations") or {}).get("kubequota.io/requeue")
        if poke is not None:  # the race happened: the poke is a timestamp, nothing else changed
            self.assertRegex(poke, r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")

    def test_group_limit(self):
        ns = self.ns()
        # group ml may use 3 cpu in root.dev, shared by carol (ml) and alice (dev, ml):
        # alice's first group limit leaf to root that names one of her groups is "group ml".
        self.pod(ns, "c1", user="carol", queue="root.dev", cpu="2")
        self.wait_bound(ns, "c1")
        self.pod(ns, "x1", user="dave", queue="root.dev", cpu="3")   # ops: not limited
        self.wait_bound(ns, "x1")
        self.pod(ns, "c2", user="carol", queue="root.dev", cpu="2")
        cond = self.wait_unschedulable(ns, "c2")
        self.assertIn("group ml", cond["message"])
        self.wait_event(ns, "c2", "QuotaExceeded", "ml")
        self.pod(ns, "c3", user="carol", queue="root.dev", cpu="1")
        self.wait_bound(ns, "c3")
        self.delete(ns, "c1")
        self.wait_bound(ns, "c2", timeout=60)

    def test_queue_max(self):
        ns = self.ns()
        # root.small has max 2 cpu for everyone together.
        self.pod(ns, "s1", user="alice", queue="root.small")
        self.pod(ns, "s2", user="bob", queue="root.small")
        self.wait_bound(ns, "s1")
        self.wait_bound(ns, "s2")
        self.pod(ns, "s3", user="carol", queue="root.small")
        cond = self.wait_unschedulable(ns, "s3")
        self.assertIn("root.small", cond["message"])
        self.wait_event(ns, "s3", "QuotaExceeded", "root.small")
        # a pod of another scheduler is not kubequota's: kube-scheduler alone never runs here,
        # so it stays unbound and unseen by kubequota (no event from kubequota on it).
        self.delete(ns, "s2")
        self.wait_bound(ns, "s3", timeout=60)
        # never fits: 3 cpu in a 2-cpu queue
        self.pod(ns, "big", user="alice", queue="root.small", cpu="3")
        self.wait_unschedulable(ns, "big")
        self.wait_event(ns, "big", "QuotaNeverFits")

    def test_usage_view_matches_the_api_server(self):
        ns = self.ns()
        self.pod(ns, "u1", user="eve", queue="root.dev", cpu="500m")
        self.pod(ns, "u2", user="eve", queue="root.dev", cpu="250m")
        self.wait_bound(ns, "u1")
        self.wait_bound(ns, "u2")
        # eve's usage in root.dev as kubequota's YuniKorn-style view reports it: 750 millicores,
        # 2 pods (the sum of the two requests above).
        def eve():
            doc = self.kq_json("/ws/v1/partition/default/usage/user/eve")
            return doc["queues"]["resourceUsage"]
        u = wait_until(lambda: eve().get("vcore") == 750 and eve(), 20, 0.2, "eve's usage 750m")
        self.assertEqual(u.get("pods"), 2)
