"""A pod that can never fit is never left waiting as if it could (issue 28): behind the
admission gate, a pod whose request alone is over a max is set aside, not put at the head of
its user's line. Its Event (a Warning), GET .../gating/waiting and the kubectl plugin say
"never fits", name the limit that forbids it and what its owner can do, while the same user's
and other users' pods that fit are released. A reload that raises the limit releases it.
Every release is read from the simulator's pods, not from kubequota's numbers."""

import os
import subprocess
import time

from kqtest import KQTestCase, PARTITION, binary, certs, pod_manifest, queues_config, wait_until, write_kubeconfig

GATE = "kubequota.io/admission"
WAITING = "/ws/v1/partition/%s/gating/waiting" % PARTITION
SMALL_8 = {"name": "small", "resources": {"max": {"cpu": "8"}}}


class NeverFitsTest(KQTestCase):
    CONFIG = queues_config({"name": "default"}, SMALL_8)
    EXTRA_ARGS = ("--admission-gate",)

    def gated(self, name, user, cpu):
        return self.sim.create_pod(pod_manifest(name, user=user, cpu=cpu, memory="64Mi", queue="root.small",
                                                gates=(GATE,)))

    def is_gated(self, name):
        p = self.sim.get_pod("default", name)
        return any(g.get("name") == GATE for g in p["spec"].get("schedulingGates") or [])

    def never_events(self, name):
        return [e for e in self.sim.events("default") if e.get("involvedObject", {}).get("name") == name
                and e.get("reason") == "WaitingForQuota"]

    def test_never_fitting_pod_is_set_aside_and_says_why(self):
        self.gated("big", "alice", "12")   # 12 cpu in an 8-cpu queue: never
        time.sleep(0.5)                     # big is alice's oldest: first in her line
        self.gated("alice-1", "alice", "1")
        self.gated("bob-1", "bob", "1")
        # the pods that fit go, alice's too: big does not hold her line
        wait_until(lambda: not self.is_gated("alice-1") and not self.is_gated("bob-1"), timeout=15,
                   msg="alice-1 and bob-1 released past the never-fitting pod")
        self.assertTrue(self.is_gated("big"))

        # the Event: a Warning naming the queue's max, and what to do
        evs = wait_until(lambda: self.never_events("big"), timeout=10, msg="an Event on big")
        self.assertEqual(len(evs), 1, evs)
        ev = evs[0]
        self.assertEqual(ev["type"], "Warning", ev)
        msg = ev["message"]
        self.assertTrue(msg.startswith("never fits: queue root.small: resources.max exceeded: "), msg)
        self.assertIn("12 requested > 8 max", msg)
        self.assertIn("12 requested alone is over the max", msg)
        self.assertIn("create it with a request that fits, or ask for that limit to be raised", msg)
        self.assertNotIn("more cpu", msg)  # never "needs N more cpu", as if waiting could help

        # the REST view: listed apart, without a place in the order
        q = [x for x in self.kq.get_json(WAITING) if x["queue"] == "root.small"]
        self.assertEqual(len(q), 1, q)
        pods = {p["name"]: p for p in q[0]["pods"]}
        self.assertEqual(set(pods), {"big"})
        self.assertIs(pods["big"]["neverFits"], True)
        self.assertIsNone(pods["big"]["position"])
        self.assertTrue(pods["big"]["reason"].startswith("never fits: queue root.small: resources.max exceeded: "))
        self.assertTrue(pods["big"]["reason"].endswith(msg[msg.index("; 12 requested alone"):]))
        self.assertEqual(pods["big"]["user"], "alice")
        self.assertEqual(q[0]["waiting"], 1)

        # explain agrees; the view follows the usage it names (the Event said cpu 0 or 1 used)
        ex = self.kq.get_json("/ws/v1/partition/%s/explain/default/big" % PARTITION)
        self.assertTrue(ex["neverFits"])
        self.assertIn("cpu 2 used + 12 requested > 8 max", ex["blockers"][0]["message"])
        wait_until(lambda: any(ex["blockers"][0]["message"] in p["reason"]
                               for x in self.kq.get_json(WAITING) for p in x["pods"]), timeout=10,
                   msg="the view's reason is explain's message")

        # timed passes re-check it and, the usage aside, have nothing new to say: no new Event
        time.sleep(3)
        self.assertEqual(len(self.never_events("big")), 1)
        self.assertTrue(self.is_gated("big"))

        # a pod queued behind it waits in order with an ordinary reason
        self.gated("alice-big-2", "alice", "8")  # fits the queue's max, not beside alice-1 and bob-1
        wait_until(lambda: any(p["name"] == "alice-big-2" and p["position"] == 1
                               for x in self.kq.get_json(WAITING) for p in x["pods"]), timeout=10,
                   msg="alice-big-2 waiting at position 1")
        w = {p["name"]: p for x in self.kq.get_json(WAITING) for p in x["pods"]}
        self.assertIs(w["alice-big-2"]["neverFits"], False)
        self.assertIn("needs", w["alice-big-2"]["reason"])

        # raising the max releases it (checked again at the reload)
        self.sim.delete_pod("default", "alice-big-2")
        self.kq.write_config(queues_config({"name": "default"}, {"name": "small",
                                                                 "resources": {"max": {"cpu": "16"}}}))
        wait_until(lambda: not self.is_gated("big"), timeout=20, msg="big released after the max was raised")
        wait_until(lambda: not [p for x in self.kq.get_json(WAITING) for p in x["pods"]], timeout=10,
                   msg="nothing waits")

    def test_deleting_a_set_aside_pod_forgets_it(self):
        self.gated("big", "carol", "9")
        wait_until(lambda: self.never_events("big"), timeout=10, msg="an Event on big")
        self.sim.delete_pod("default", "big")
        wait_until(lambda: not self.kq.get_json(WAITING), timeout=10, msg="the queue is gone from the view")
        m = self.kq.get("/metrics").text
        self.assertIn("kubequota_gating_waiting_pods 0", m)


class NeverFitsPluginTest(KQTestCase):
    """`kubectl kubequota why` on a gated pod that can never fit says so, and what helps."""
    CONFIG = queues_config({"name": "default"}, SMALL_8)
    EXTRA_ARGS = ("--admission-gate",)

    def test_plugin_why_says_never_and_what_to_do(self):
        self.sim.sim.proxy_services = {"kubequota-system/kubequota:443": "127.0.0.1:%d" % self.kq.port}
        self.sim.sim.review_tokens = {self.kq.rest_token: {"username": "ops"}}
        kubeconfig = write_kubeconfig(os.path.join(self.kq.workdir, "user-kubeconfig"), self.sim.url, certs()["ca"],
                                      self.kq.rest_token)
        self.sim.create_pod(pod_manifest("big", user="alice", cpu="12", memory="64Mi", queue="root.small",
                                         gates=(GATE,)))
        wait_until(lambda: [p for x in self.kq.get_json(WAITING) for p in x["pods"] if p.get("neverFits")],
                   timeout=10, msg="big set aside")
        r = subprocess.run([binary(), "kubectl", "--kubequota-namespace", "kubequota-system", "why", "big"],
                           capture_output=True, text=True, timeout=30, env=dict(os.environ, KUBECONFIG=kubeconfig))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("pod default/big (user alice, queue root.small): can never fit as it is", r.stdout)
        self.assertIn("queue root.small: resources.max exceeded: cpu 0 used + 12 requested > 8 max", r.stdout)
        self.assertIn("what you can do: waiting will not help; recreate the pod requesting at most 8 cpu, "
                      "or ask for queue root.small's limit to be raised", r.stdout)
