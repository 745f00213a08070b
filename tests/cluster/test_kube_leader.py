"""Two kubequota processes on a real coordination.k8s.io/v1 Lease (the chart renders
--leader-elect for replicaCount 2, its default).

kube-scheduler talks to one replica ("kq"); the other ("kq-b") leads, so the admission gate
is released by the leader while filter and bind are answered by the standby: the kube-scheduler
leader and the kubequota leader in different replicas, as happens in the chart's Deployment.
Then the leader is killed (SIGKILL, no release): the standby takes the Lease once it expires
and goes on releasing, with never more bound than the queue allows and usage counted once.

Follows client-go's leader election contract (k8s.io/client-go/tools/leaderelection:
a holder that stops renewing loses the lease after leaseDurationSeconds) as kube-scheduler's
own HA test does (k8s.io/kubernetes test/integration/scheduler leader election).
"""

import re
import signal
import time

from kubetest import KubeTestCase, NAMESPACE, queues_config, wait_until

LEASE = "/apis/coordination.k8s.io/v1/namespaces/%s/leases/kubequota" % NAMESPACE
GATE = "kubequota.io/admission"
FAST = ("--leader-elect-lease-duration=4s", "--leader-elect-renew-deadline=3s",
        "--leader-elect-retry-period=500ms")


def identity(log):
    """The identity of the last process that wrote this log (log files are appended to)."""
    m = re.findall(r"event=leader_election_started .*identity=(\S+)", log)
    return m[-1] if m else None


class TwoReplicasOnARealLease(KubeTestCase):
    CONFIG = queues_config({"name": "default"}, {"name": "shared", "resources": {"max": {"vcore": "2"}}})
    KQ_ARGS = FAST

    def holder(self):
        return self.c.api().get(LEASE)["spec"].get("holderIdentity")

    def bound(self, ns, names):
        return [n for n in names if self.node_of(ns, n)]

    def test_standby_decides_leader_releases_then_failover(self):
        c = self.c
        # kq-b leads: kq stops, kq-b starts and takes the Lease, kq comes back as standby
        c.stop_kubequota("kq")
        wait_until(lambda: not self.holder(), 10, 0.1, "the lease released by kq's SIGTERM")
        c.start_kubequota(open(c.path("kq-queues.yaml")).read(), name="kq-b", extra=FAST)
        b_id = wait_until(lambda: identity(c.kubequota_log("kq-b")), 10, 0.1, "kq-b's identity")
        wait_until(lambda: self.holder() == b_id, 15, 0.1, "kq-b holds the lease")
        before = identity(c.kubequota_log("kq"))
        c.start_kubequota(open(c.path("kq-queues.yaml")).read(), extra=FAST)
        a_id = wait_until(lambda: identity(c.kubequota_log("kq")) != before and identity(c.kubequota_log("kq")),
                          10, 0.1, "kq's identity")
        self.assertNotEqual(a_id, b_id)
        self.assertEqual(self.holder(), b_id)

        ns = self.ns()
        names = ["p%d" % i for i in range(3)]
        for n in names:
            self.pod(ns, n, user="alice", queue="root.shared")
        # the leader (kq-b) releases two; kube-scheduler's extender (kq, standby) binds them
        wait_until(lambda: len(self.bound(ns, names)) == 2, 30, 0.2, "two pods bound")
        waiting = [n for n in names if not self.node_of(ns, n)]
        self.assertEqual(len(waiting), 1)
        self.assertIn(GATE, [g["name"] for g in self.get(ns, waiting[0])["spec"].get("schedulingGates") or []])
        self.assertRegex(c.kubequota_log("kq"), r'"bind" event=bind result=bound pod=%s/' % ns)
        self.assertNotRegex(c.kubequota_log("kq"), r"event=gate_released pod=%s/" % ns)

        # the leader dies without releasing the lease; a bound pod ends meanwhile
        c.stop_kubequota("kq-b", kill=True)
        first = [n for n in names if n not in waiting][0]
        self.delete(ns, first)
        # kq takes over once the lease expires, and releases the waiting pod
        wait_until(lambda: self.holder() == a_id, 30, 0.2, "kq took the lease")
        end = time.monotonic() + 30
        while time.monotonic() < end and not self.node_of(ns, waiting[0]):
            self.assertLessEqual(len(self.bound(ns, names)), 2, "more bound than root.shared allows")
            time.sleep(0.2)
        self.assertTrue(self.node_of(ns, waiting[0]), "the new leader released the waiting pod")
        self.assertEqual(len(self.bound(ns, names)), 2)
        # counted once: the new leader's root.shared holds exactly the two bound pods
        wait_until(lambda: self.queue_pods() == 2, 10, 0.2, "root.shared counts 2 pods")

    def queue_pods(self):
        doc = self.kq_json("/ws/v1/partition/default/queue/root.shared")
        return (doc.get("allocatedResource") or {}).get("pods")
