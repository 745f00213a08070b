"""Usage is derived from pods: a restart of kubequota, and a relist after the real API
server's 410 Gone, rebuild exactly the usage the API server's pods say.

The expected usage is computed here from the API server's pods (bound, not Succeeded or
Failed, not deleted; requests summed per user from the identity annotation), never from
kubequota. Follows the informer contract of client-go (k8s.io/client-go/tools/cache
reflector.go: a watch answered "too old resource version" relists) and YuniKorn's recovery
test (apache/yunikorn-k8shim test/e2e/recovery_and_restart/recovery_and_restart_test.go:
usage after a scheduler restart equals usage before).
"""

import json
import re
import signal
from fractions import Fraction

from kubetest import KubeTestCase, queues_config, wait_until


def cpu_millis(q):
    q = str(q)
    if q.endswith("m"):
        return int(q[:-1])
    return int(Fraction(q) * 1000)


def expected_by_user(pods):
    out = {}
    for p in pods:
        if not p["spec"].get("nodeName") or p.get("metadata", {}).get("deletionTimestamp"):
            continue
        if p.get("status", {}).get("phase") in ("Succeeded", "Failed"):
            continue
        if p["spec"].get("schedulerName") != "kubequota-scheduler":
            continue
        user = json.loads(p["metadata"]["annotations"]["kubequota.io/user-info"])["user"]
        cpu = sum(cpu_millis(c["resources"]["requests"].get("cpu", "0")) for c in p["spec"]["containers"])
        u = out.setdefault(user, {"vcore": 0, "pods": 0})
        u["vcore"] += cpu
        u["pods"] += 1
    return out


class RestartAndRelist(KubeTestCase):
    CHART_VALUES = {"kubequota": {"admissionGate": {"enabled": False}}}
    CONFIG = queues_config({"name": "default"}, {"name": "work"})
    USERS = ("alice", "bob", "carol")

    def all_pods(self):
        return self.c.api().get("/api/v1/pods")["items"]

    def actual_by_user(self, users):
        out = {}
        for u in users:
            r = self.c.kubequota_client().get("/ws/v1/partition/default/usage/user/%s" % u)
            if r.status == 404:
                continue
            ru = json.loads(r.body)["queues"]["resourceUsage"] or {}
            if ru.get("vcore", 0) or ru.get("pods", 0):
                out[u] = {"vcore": ru.get("vcore", 0), "pods": ru.get("pods", 0)}
        return out

    def want(self):
        return {u: v for u, v in expected_by_user(self.all_pods()).items() if u in self.USERS}

    def assert_usage_matches(self, msg):
        # both sides move until every deleted pod is gone: a deleted pod counts in kubequota
        # while it is terminating (it still runs) and leaves when kwok completes its deletion,
        # which after an API server restart waits for kwok's own watches to come back; the
        # API server's side is read again at every poll
        last = {}

        def agree():
            last["want"], last["have"] = self.want(), self.actual_by_user(self.USERS)
            return last["want"] == last["have"]
        try:
            wait_until(agree, 60, 0.25, "%s: kubequota's usage == the API server's" % msg)
        except AssertionError as e:
            raise AssertionError("%s (last: kubequota %s, API server %s)" % (e, last.get("have"), last.get("want")))
        return last["want"]

    def start_workload(self, ns):
        sizes = {"alice": ("500m", "250m", "1"), "bob": ("1", "2"), "carol": ("100m",)}
        names = []
        for u, cpus in sizes.items():
            for i, cpu in enumerate(cpus):
                n = "%s-%d" % (u, i)
                self.pod(ns, n, user=u, queue="root.work", cpu=cpu)
                names.append(n)
        for n in names:
            self.wait_bound(ns, n)
        return names

    def test_restart_rebuilds_the_same_usage(self):
        ns = self.ns()
        self.start_workload(ns)
        self.assert_usage_matches("before restart")
        self.assertEqual(expected_by_user(self.c.pods(ns))["alice"], {"vcore": 1750, "pods": 3})
        self.c.stop_kubequota("kq")
        self.c.start_kubequota(open(self.c.path("kq-queues.yaml")).read(), extra=self.KQ_ARGS)
        # the restarted process agrees with the API server (the whole cluster's pods of these
        # users, which other classes' terminating namespaces may still be changing), and this
        # test's own pods are all still counted
        self.assert_usage_matches("after restart")
        self.assertEqual(expected_by_user(self.c.pods(ns)), {"alice": {"vcore": 1750, "pods": 3},
                                                             "bob": {"vcore": 3000, "pods": 2},
                                                             "carol": {"vcore": 100, "pods": 1}})

    def test_relist_after_410_gone_keeps_usage_exact(self):
        ns = self.ns()
        self.start_workload(ns)
        self.assert_usage_matches("before")
        # kubequota frozen while pods go away and the API server restarts with a fresh watch
        # cache: its resumed watch is 410 Gone and it must relist.
        # kubequota frozen; the API server restarts (its watches end with it), then pods go
        # away through the new server, whose watch cache begins after kubequota's last
        # resourceVersion: only a relist can tell kubequota about them.
        self.c.signal_kubequota(signal.SIGSTOP)
        try:
            self.c.restart_apiserver()
            self.delete(ns, "alice-0")
            self.delete(ns, "bob-1")
        finally:
            self.c.signal_kubequota(signal.SIGCONT)
        self.assert_usage_matches("after the relist")
        mine = expected_by_user(self.c.pods(ns))
        self.assertEqual(mine["alice"], {"vcore": 1250, "pods": 2})
        self.assertEqual(mine["bob"], {"vcore": 1000, "pods": 1})
        # the real server answers the resumed watch in-band: an ERROR event, code 410, reason
        # Expired ("too old resource version"), and kubequota relists
        wait_until(lambda: re.search(r'watch error event" path=/api/v1/pods code=410 reason=Expired .*action=relist',
                                     self.c.kubequota_log()), 30, 0.2, "kubequota's pod watch answered 410")
        # and it goes on counting: a new pod is charged once
        self.pod(ns, "carol-9", user="carol", queue="root.work", cpu="300m")
        self.wait_bound(ns, "carol-9")
        self.assert_usage_matches("after a new pod")
