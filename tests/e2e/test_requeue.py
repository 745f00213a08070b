"""Requeue pokes (docs/events.md "Requeue"): a pod the filter denied shortly before kubequota
applied a release of usage gets the kubequota.io/requeue annotation, so that kube-scheduler
looks at it again; a pod whose denial no release could have caused does not.

The race is made here as on a real cluster: kubequota's pod watch lags (stalled), another
pod is deleted, the scheduler retries the waiting pod at once and kubequota, which still
counts the deleted pod, denies it; then the watch catches up and applies the release."""

import time

from kqtest import KQTestCase, queues_config, wait_until

ANN = "kubequota.io/requeue"

CONFIG = queues_config(
    {"name": "default"},
    {"name": "dev", "limits": [
        {"limit": "alice in dev", "users": ["alice"], "maxresources": {"cpu": "2"}},
    ]})


def annotation(sim, name, ns="default"):
    return (sim.get_pod(ns, name)["metadata"].get("annotations") or {}).get(ANN)


class RequeueTest(KQTestCase):
    CONFIG = CONFIG
    EXTRA_ARGS = ("--requeue-window", "3s")

    def fill(self):
        for i in (1, 2):
            self.create("a%d" % i, user="alice", groups=["dev"], queue="root.dev", cpu="1")
            self.assert_bound("a%d" % i)
        self.create("next", user="alice", groups=["dev"], queue="root.dev", cpu="1")
        self.wait_usage()

    def stale_denial(self):
        """a1 is deleted while kubequota's watch lags; `next` is denied on the stale count."""
        self.assertGreaterEqual(self.sim.stall_watches("pods"), 1)
        self.sim.delete_pod("default", "a1")
        self.assert_denied("next", "default", "alice")

    def catch_up(self):
        self.assertGreaterEqual(self.sim.drop_watches("close", "pods"), 1)
        self.wait_usage()

    def test_denied_before_release_is_poked(self):
        self.fill()
        self.stale_denial()
        self.assertIsNone(annotation(self.sim, "next"), "no poke before the release is applied")
        self.catch_up()
        wait_until(lambda: annotation(self.sim, "next"), 10, 0.1,
                   "the denied pod to get %s after the release" % ANN)
        first = annotation(self.sim, "next")
        self.assertRegex(first, r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
        self.assertIn("kubequota_requeue_pokes_total 1\n", self.kq.get("/metrics").text)
        # the poke is what kube-scheduler needs: now it fits
        self.assert_bound("next")
        # one poke per denial: nothing more without a new denial and a new release
        time.sleep(1.0)
        self.assertEqual(annotation(self.sim, "next"), first)
        # the bound pod (other identity fields) untouched by the patch
        self.assertEqual(self.sim.get_pod("default", "next")["metadata"]["labels"]["kubequota.io/queue"],
                         "root.dev")

    def test_no_release_no_poke(self):
        self.fill()
        self.assert_denied("next", "default", "alice")
        time.sleep(1.5)
        self.assertIsNone(annotation(self.sim, "next"))

    def test_denial_older_than_window_not_poked(self):
        self.fill()
        self.assert_denied("next", "default", "alice")
        time.sleep(4.0)  # > --requeue-window 3s
        self.sim.delete_pod("default", "a1")
        self.wait_usage()
        time.sleep(1.5)
        self.assertIsNone(annotation(self.sim, "next"),
                          "kube-scheduler retries such a pod on the deletion itself")

    def test_denial_a_release_cannot_lift_not_poked(self):
        self.fill()
        self.create("huge", user="alice", groups=["dev"], queue="root.dev", cpu="3")
        self.stale_denial()
        self.assert_denied("huge", "default", "can never fit")
        self.catch_up()
        wait_until(lambda: annotation(self.sim, "next"), 10, 0.1, "the poke of next")
        time.sleep(0.5)
        self.assertIsNone(annotation(self.sim, "huge"), "a pod that can never fit is not poked")


class RequeueOffTest(RequeueTest):
    """--requeue-window 0: no annotation, ever."""
    EXTRA_ARGS = ("--requeue-window", "0")

    def test_denied_before_release_is_poked(self):
        self.fill()
        self.stale_denial()
        self.catch_up()
        time.sleep(1.5)
        self.assertIsNone(annotation(self.sim, "next"))

    test_no_release_no_poke = None
    test_denial_older_than_window_not_poked = None
    test_denial_a_release_cannot_lift_not_poked = None
