"""The admission gate's usage policy (issue 18, docs/gating.md "Usage policy"): a queue with
kubequota.io/gating.policy: usage releases waiting pods to the user with the smallest
dominant share of max(decayed average, current) usage; the history lives in a ConfigMap and
survives a restart. The peer is Kueue's Admission Fair Sharing (kubernetes-sigs/kueue
keps/4136-admission-fair-sharing/README.md: usage decayed with a half-life, kept in the API
so a restart does not zero it); kubequota ranks users instead of LocalQueues.

Every order is read from the simulator's record of gate removals; expected orders come from
a model written here (and worked out by hand in the comments), never from kubequota."""

import json
import re
import time

from kqtest import KQTestCase, gate_release_order, pod_manifest, queues_config, wait_until

GATE = "kubequota.io/admission"
CM_NS, CM_NAME = "kube-system", "kubequota-gating-usage"
GI = 2 ** 30


def rfc3339(t):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def drf_order(users, caps, capacity):
    """Reference model of policy "usage" with half-life 0: users = [(name, [request...])]
    in arrival order, each request {"cpu": millicores, "memory": bytes}. Repeatedly the user
    with the smallest dominant share (ties: earlier arrival) releases its next pod; the
    first pod that does not fit the queue's capacity ends the pass. Returns the names."""
    used = {u: {"cpu": 0, "memory": 0} for u, _ in users}
    total = {"cpu": 0, "memory": 0}
    nxt = {u: 0 for u, _ in users}
    pods = dict(users)
    out = []
    while True:
        cand = [(max(used[u][r] / caps[r] for r in caps), i, u) for i, (u, _) in enumerate(users)
                if nxt[u] < len(pods[u])]
        if not cand:
            return out
        _, _, u = min(cand)
        req = pods[u][nxt[u]]
        if any(total[r] + req[r] > capacity[r] for r in capacity):
            return out
        for r in req:
            used[u][r] += req[r]
            total[r] += req[r]
        out.append("%s-%d" % (u, nxt[u]))
        nxt[u] += 1


def releases(test):
    """The released pods' names in the order kubequota decided (its log), not the order its
    PATCHes reached the simulator: one pass sends them in parallel."""
    return [key.split("/", 1)[1] for key in gate_release_order(test.kq, test.sim, GATE)]


class DominantShareTest(KQTestCase):
    """Half-life 0: dominant-resource fairness on what runs now. All pods wait before
    kubequota starts, so its first pass orders all of them."""
    CONFIG = queues_config({"name": "default"}, {
        "name": "drf", "resources": {"max": {"vcore": "10", "memory": "16Gi"}},
        "properties": {"kubequota.io/gating.policy": "usage", "kubequota.io/gating.halflife": "0"}})
    EXTRA_ARGS = ("--admission-gate",)
    START = False

    def test_memory_heavy_user_yields_by_dominant_share(self):
        a = [{"cpu": 1000, "memory": 256 * 2 ** 20}] * 8   # 1/10 of the queue each (cpu)
        b = [{"cpu": 1000, "memory": 3 * GI}] * 4          # 3/16 each (memory)
        for i in range(8):
            self.sim.create_pod(pod_manifest("a-%d" % i, user="a", cpu="1", memory="256Mi", queue="root.drf",
                                             gates=(GATE,)))
        for i in range(4):
            self.sim.create_pod(pod_manifest("b-%d" % i, user="b", cpu="1", memory="3Gi", queue="root.drf",
                                             gates=(GATE,)))
        want = drf_order([("a", a), ("b", b)], {"cpu": 10000, "memory": 16 * GI},
                         {"cpu": 10000, "memory": 16 * GI})
        # by hand: a .1, b .1875, a .2, b .375, a .3, a .4, b .5625, a .5, a .6, b .75; full
        self.assertEqual(want, ["a-0", "b-0", "a-1", "b-1", "a-2", "a-3", "b-2", "a-4", "a-5", "b-3"])
        self.kq.start()
        wait_until(lambda: len(releases(self)) >= 10, timeout=20, msg="10 released")
        time.sleep(1.5)  # at least one more pass: nothing else fits
        self.assertEqual(releases(self), want)
        # the view says why a waits: the policy and a's share (6 cpu of 10)
        q = [x for x in self.kq.get_json("/ws/v1/partition/default/gating/waiting") if x["queue"] == "root.drf"][0]
        self.assertEqual(q["policy"], "usage")
        self.assertEqual(q["halfLifeSeconds"], 0)
        ua = [u for u in q["users"] if u["user"] == "a"][0]
        self.assertAlmostEqual(ua["share"], 0.6, places=6)
        self.assertEqual(ua["current"], {"cpu": "6", "memory": "1536Mi"})


class UsageHistoryTest(KQTestCase):
    """Half-life 1h, history from the ConfigMap: user a ran 3500m on average until now."""
    CONFIG = queues_config({"name": "default"}, {
        "name": "shared", "resources": {"max": {"vcore": "4"}},
        "properties": {"kubequota.io/gating.policy": "usage", "kubequota.io/gating.halflife": "1h"}})
    EXTRA_ARGS = ("--admission-gate", "--admission-gate-usage-checkpoint", "1s")
    START = False

    def gated(self, name, user):
        self.sim.create_pod(pod_manifest(name, user=user, cpu="1", memory="64Mi", queue="root.shared",
                                         gates=(GATE,)))

    def stored(self):
        for cm in self.sim.state()["configmaps"]:
            if cm["metadata"]["namespace"] == CM_NS and cm["metadata"]["name"] == CM_NAME:
                return json.loads(cm["data"]["usage.json"])
        return None

    def stored_avg_m(self, user):
        doc = self.stored() or {"queues": []}
        for q in doc["queues"]:
            for u in q["users"] if q["queue"] == "root.shared" else []:
                if u["user"] == user:
                    c = u["average"]["cpu"]
                    return int(c[:-1]) if c.endswith("m") else int(float(c) * 1000)
        return None

    def waiting_user(self, user):
        q = [x for x in self.kq.get_json("/ws/v1/partition/default/gating/waiting") if x["queue"] == "root.shared"]
        found = [u for u in q[0]["users"] if u["user"] == user] if q else []
        return found[0] if found else None

    def free_one_and_see_who(self, pod):
        n = len(releases(self))
        self.sim.delete_pod("default", pod)
        wait_until(lambda: len(releases(self)) == n + 1, timeout=15, msg="one release after deleting " + pod)
        return releases(self)[-1].split("-")[0]

    def test_history_outranks_a_newcomer_and_survives_a_restart(self):
        t0 = time.time()
        self.sim.world.create_simple("configmaps", CM_NS, {"metadata": {"name": CM_NAME}, "data": {
            "usage.json": json.dumps({"kind": "GatingUsage", "apiVersion": "kubequota.io/v1", "updated": rfc3339(t0),
                                      "queues": [{"queue": "root.shared", "users": [
                                          {"user": "a", "average": {"cpu": "3500m"}}]}]})}})
        self.kq.start()
        for i in range(4):
            self.gated("a-%d" % i, "a")
        wait_until(lambda: len(releases(self)) == 4, timeout=15, msg="a alone: its 4 pods released")
        for i in range(4, 8):
            self.gated("a-%d" % i, "a")
        for i in range(4):
            self.gated("b-%d" % i, "b")
        wait_until(lambda: (self.waiting_user("b") or {}).get("waiting") == 4, timeout=15, msg="b's 4 pods wait")
        # a ranks at max(~3500m average, current)/4 cpu >= 0.86; b at (released b pods)/4,
        # at most 0.75 before its 4th: every pod of a that ends goes to b.
        got = [self.free_one_and_see_who("a-%d" % i) for i in range(4)]
        self.assertEqual(got, ["b", "b", "b", "b"])
        # the leader wrote the history: a's average is what the document said, decayed for
        # the seconds since (2^(-60/3600) > 0.98) and pulled toward what a ran meanwhile
        wait_until(lambda: self.stored_avg_m("b") is not None, timeout=15, msg="b's history checkpointed")
        a_avg = self.stored_avg_m("a")
        self.assertTrue(3400 <= a_avg <= 3600, a_avg)
        # ... and says so on /metrics: checkpoints written, none failed, the last one just now
        text = self.kq.get("/metrics").text
        ok = re.search(r'^kubequota_gating_usage_checkpoints_total\{result="ok"\} (\d+)$', text, re.M)
        self.assertTrue(ok and int(ok.group(1)) >= 1, text)
        self.assertIn('kubequota_gating_usage_checkpoints_total{result="error"} 0\n', text)
        last = float(re.search(r"^kubequota_gating_usage_last_checkpoint_timestamp_seconds (\S+)$", text,
                               re.M).group(1))
        self.assertTrue(t0 <= last <= time.time() + 1, (t0, last))
        # SIGKILL and start again: the history comes back from the ConfigMap (without it a,
        # who runs nothing now, would rank at 0)
        self.kq.kill()
        self.kq.start()
        wait_until(lambda: (self.waiting_user("a") or {}).get("waiting") == 4, timeout=15, msg="a waits again")
        ua = self.waiting_user("a")
        self.assertEqual(ua["current"], {})
        self.assertTrue(0.84 <= ua["share"] <= 0.9, ua)
        # ... and it still decides: b waits again with 4 running (share 1.0); when one of b's
        # ends, b is at 0.75 < a's ~0.87, so b's new pod goes before a's
        self.gated("b-4", "b")
        wait_until(lambda: (self.waiting_user("b") or {}).get("waiting") == 1, timeout=15, msg="b-4 waits")
        self.assertEqual(self.free_one_and_see_who("b-0"), "b")
        self.assertEqual(releases(self)[-1], "b-4")


class UsageHistoryBadDocumentTest(KQTestCase):
    """A ConfigMap somebody broke: kubequota says so, ranks without it, and overwrites it."""
    CONFIG = UsageHistoryTest.CONFIG
    EXTRA_ARGS = UsageHistoryTest.EXTRA_ARGS
    START = False

    def test_invalid_history_is_reported_and_replaced(self):
        self.sim.world.create_simple("configmaps", CM_NS, {"metadata": {"name": CM_NAME}, "data": {
            "usage.json": '{"kind":"GatingUsage","updated":"2026-01-01T00:00:00Z","queues":[{"queue":"root.shared",'
                          '"users":[{"user":"a","average":{"cpu":"lots"}}]}]}'}})
        self.kq.start()
        wait_until(lambda: "event=gating_usage_invalid" in self.kq.logs(), timeout=15, msg="the bad document named")
        line = [ln for ln in self.kq.logs().splitlines() if "event=gating_usage_invalid" in ln][0]
        self.assertIn("queues[0].users[0].average.cpu", line)
        self.sim.create_pod(pod_manifest("a-0", user="a", cpu="1", memory="64Mi", queue="root.shared",
                                         gates=(GATE,)))
        wait_until(lambda: releases(self) == ["a-0"], timeout=15, msg="a-0 released")

        def rewritten():
            cm = [c for c in self.sim.state()["configmaps"] if c["metadata"]["name"] == CM_NAME][0]
            doc = json.loads(cm["data"]["usage.json"])
            return [u["user"] for q in doc["queues"] for u in q["users"]] == ["a"] and \
                "lots" not in cm["data"]["usage.json"]
        wait_until(rewritten, timeout=15, msg="the checkpoint replaced the bad document")
