"""Workers and credentials under load from many client addresses (issue 29).

The hostile clients are other loopback addresses than the tests' 127.0.0.1 (127.0.0.2 to
127.0.0.6: the whole 127/8 is loopback), bounded in count and in time, and closed by the
test at its end. No assertion is on time: the webhook must answer at all, within the
client's own timeout (the chart's webhook timeout, 10 s), while the main port's workers are
all held."""

import http.client
import json
import os
import re
import socket
import ssl
import subprocess
import threading

from kqtest import HttpClient, KQTestCase, Kubequota, certs, free_port, queues_config, wait_until
from test_hostile import admission_review

SOURCES = ["127.0.0.%d" % i for i in range(2, 7)]  # five other client addresses
WEBHOOK_TIMEOUT_S = 10  # the chart's timeoutSeconds for every webhook


def connect(port, src, timeout=30):
    return socket.create_connection(("127.0.0.1", port), timeout=timeout, source_address=(src, 0))


def tls_ctx():
    c = ssl.create_default_context(cafile=certs()["ca"])
    c.check_hostname = False
    return c


def pod(name):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "uid": "uid-" + name},
            "spec": {"schedulerName": "kubequota-scheduler",
                     "containers": [{"name": "c", "image": "busybox",
                                     "resources": {"requests": {"cpu": "100m"}}}]}}


class WebhookListenerTest(KQTestCase):
    """--webhook-listen: the webhooks' own listener, with its own workers, answers a webhook
    call while every worker of the main port is held by keep-alive and slow-request
    connections from five addresses; the main port no longer serves the webhooks, and the
    webhook port serves nothing else than the webhooks and the probes."""
    CONFIG = queues_config({"name": "default"})
    START = False

    def start_with(self, *extra):
        wport = free_port()
        while wport == self.kq.port:
            wport = free_port()
        self.kq = Kubequota(self.sim, self.CONFIG, extra_args=("--webhook-listen", "127.0.0.1:%d" % wport) + extra)
        self.kq.start()  # ready on the main port; the webhook listener starts right after it
        hook = HttpClient("https://localhost:%d" % wport, ca=certs()["ca"], timeout=WEBHOOK_TIMEOUT_S)

        def up():
            try:
                return hook.get("/healthz").status == 200
            except OSError:
                return False
        wait_until(up, 20, 0.05, "the webhook listener")
        return wport

    def hold_main_port(self, held, raw):
        """All four main-port workers held, from four addresses: two idle keep-alive TLS
        connections (one request answered, then nothing) and two requests whose headers
        never end; then from all five addresses a TCP connection that never starts TLS,
        queued behind them."""
        ctx = tls_ctx()
        for i, src in enumerate(SOURCES[:4]):
            s = ctx.wrap_socket(connect(self.kq.port, src), server_hostname="localhost")
            held.append(s)
            if i < 2:
                s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
                self.assertTrue(s.recv(4096).startswith(b"HTTP/1.1 200"))
            else:
                s.sendall(b"POST /ws/v1/validate-conf HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n")
        for src in SOURCES:
            raw.append(connect(self.kq.port, src))

    def test_webhook_answers_while_main_port_is_saturated(self):
        # 4 main workers, 2 per address: the 10 connections below hold all of them
        wport = self.start_with("--threads", "4", "--max-client-connections", "2")
        hook = HttpClient("https://localhost:%d" % wport, ca=certs()["ca"], timeout=WEBHOOK_TIMEOUT_S)
        self.assertEqual(hook.get("/healthz").status, 200)
        self.assertEqual(hook.get("/ws/v1/partition/default/usage/users").status, 404)
        self.assertEqual(hook.post("/scheduler/filter", {}).status, 404)
        review = admission_review(pod("p1"), "alice", ["system:authenticated"])
        held, raw = [], []
        try:
            self.hold_main_port(held, raw)
            r = hook.post("/admission/mutate", review)
            self.assertEqual(r.status, 200, r.text)
            resp = r.json()["response"]
            self.assertEqual(resp["uid"], review["request"]["uid"])
            self.assertTrue(resp["allowed"], resp)
        finally:
            for s in held + raw:
                s.close()
        # the webhooks are not served on the main port any more
        main = HttpClient(self.kq.url, ca=certs()["ca"], timeout=30)
        wait_until(lambda: main.get("/healthz").status == 200, 30, 0.2, "the main port to answer again")
        r = main.post("/admission/mutate", review)
        self.assertEqual(r.status, 404, r.text)
        self.assertIn("--webhook-listen", r.text)

    def test_webhook_answers_while_its_own_port_is_flooded(self):
        """An in-cluster client can reach the webhook port too: five addresses each holding
        two keep-alive connections ask for 10 workers of 4. While workers are scarce, answers
        say Connection: close, so the connections beyond the reserve free their workers and
        the webhook call gets one within the client's timeout (kept alive, they would hold
        them for 30 s). No answered connection is shut down: that would race with the API
        server's next call on it."""
        wport = self.start_with("--webhook-threads", "4")
        stop = threading.Event()
        socks, lock = [], threading.Lock()

        def keep_alive(src):
            try:
                s = tls_ctx().wrap_socket(connect(wport, src, timeout=60), server_hostname="localhost")
                with lock:
                    socks.append(s)
                s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
                s.recv(4096)
                while not stop.is_set() and s.recv(4096):
                    pass
            except OSError:
                pass

        threads = [threading.Thread(target=keep_alive, args=(src,), daemon=True) for src in SOURCES for _ in range(2)]
        for t in threads:
            t.start()
        try:
            wait_until(lambda: len(socks) >= 4, 30, 0.05, "the flood to hold the webhook port's workers")
            hook = HttpClient("https://localhost:%d" % wport, ca=certs()["ca"], timeout=WEBHOOK_TIMEOUT_S)
            review = admission_review(pod("p3"), "alice", ["system:authenticated"])
            r = hook.post("/admission/mutate", review)
            self.assertEqual(r.status, 200, r.text)
            self.assertEqual(r.json()["response"]["uid"], review["request"]["uid"])
            self.assertIn("event=keep_alive_declined port=webhooks", self.kq.logs())
        finally:
            stop.set()
            with lock:
                for s in socks:
                    try:
                        s.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass
            for t in threads:
                t.join(30)

    def test_one_address_may_call_over_more_connections_than_workers(self):
        """The API server calls the webhooks from one address over as many connections as it
        has creates in flight (a ReplicaSet's slow-start batch is up to 500). None may be
        refused: a connection shut down fails its create with failurePolicy Fail (on the real
        API server, a per-address cap of half the workers failed 13 of 200 creates made 64
        at a time: tests/cluster/test_kube_connections.py). Eight connections from one
        address to 4 workers, each sending a review at once: all eight are answered."""
        wport = self.start_with("--webhook-threads", "4")
        reviews = [admission_review(pod("m%d" % i), "alice", ["system:authenticated"]) for i in range(8)]
        answers = [None] * 8

        def call(i):
            # as the API server does: a connection opened when a call has to go out, no retry
            c = http.client.HTTPSConnection("localhost", wport, timeout=WEBHOOK_TIMEOUT_S, context=tls_ctx(),
                                            source_address=(SOURCES[0], 0))
            try:
                c.request("POST", "/admission/mutate", body=json.dumps(reviews[i]),
                          headers={"Content-Type": "application/json"})
                r = c.getresponse()
                answers[i] = (r.status, r.read())
            except (OSError, http.client.HTTPException) as e:
                answers[i] = (None, repr(e).encode())
            finally:
                c.close()

        threads = [threading.Thread(target=call, args=(i,), daemon=True) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(WEBHOOK_TIMEOUT_S * 2)
        for i, a in enumerate(answers):
            self.assertIsNotNone(a, "call %d unanswered" % i)
            self.assertEqual(a[0], 200, "call %d: %r" % (i, a[1][:200]))
            self.assertIn(reviews[i]["request"]["uid"].encode(), a[1])
        self.assertNotIn("event=client_connection_limit", self.kq.logs())

    def test_bad_webhook_listen_refused(self):
        for extra, want in ((("--webhook-listen", "nowhere"), "HOST:PORT"),
                            (("--webhook-listen", "127.0.0.1:%d" % free_port(), "--webhook-threads", "0"),
                             "webhook-threads")):
            kq = Kubequota(self.sim, self.CONFIG, extra_args=extra)
            r = subprocess.run(kq.argv(), capture_output=True, text=True, timeout=20)
            self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
            self.assertIn(want, r.stdout + r.stderr)


class SourceConnection:
    """Keep-alive HTTPS from a chosen source address, reconnecting when the server closes."""

    def __init__(self, port, src):
        self.port, self.src, self.c = port, src, None

    def get(self, path, token):
        for attempt in range(2):
            if self.c is None:
                self.c = http.client.HTTPSConnection("localhost", self.port, timeout=30, context=tls_ctx(),
                                                     source_address=(self.src, 0))
            try:
                self.c.request("GET", path, headers={"Authorization": "Bearer " + token})
                r = self.c.getresponse()
                r.read()
                return r.status
            except (OSError, http.client.HTTPException):
                self.c.close()
                self.c = None
                if attempt:
                    raise

    def close(self):
        if self.c is not None:
            self.c.close()


class TokenFloodBySourceTest(KQTestCase):
    """--rest-auth=kubernetes: rejected tokens are rate-limited by source and by failure. A
    flood of random tokens from one address is answered 429 once its budget is spent, but a
    valid token nobody has seen before, from another address, succeeds on its first request
    while the flood goes on."""
    CONFIG = queues_config({"name": "default"})
    EXTRA_ARGS = ("--rest-auth", "kubernetes")
    PATH = "/ws/v1/partition/default/usage/users"

    def test_valid_token_first_request_during_a_flood(self):
        fresh = ["fresh-%d-%s" % (i, os.urandom(4).hex()) for i in range(8)]
        self.sim.sim.review_tokens = {t: {"username": "viewer-%d" % i} for i, t in enumerate(fresh)}
        self.sim.sim.review_allowed = {"viewer-%d" % i for i in range(len(fresh))}
        stop = threading.Event()
        seen = []
        lock = threading.Lock()

        def flood():
            c = SourceConnection(self.kq.port, SOURCES[0])
            try:
                while not stop.is_set():
                    st = c.get(self.PATH, "random-" + os.urandom(8).hex())
                    with lock:
                        seen.append(st)
            finally:
                c.close()

        t = threading.Thread(target=flood, daemon=True)
        t.start()
        try:
            wait_until(lambda: 429 in seen, 30, 0.05, "the flooding address to be answered 429")
            good = SourceConnection(self.kq.port, "127.0.0.1")
            try:
                statuses = [good.get(self.PATH, tok) for tok in fresh]
            finally:
                good.close()
            self.assertEqual(statuses, [200] * len(fresh), "each valid token's first request, during the flood")
        finally:
            stop.set()
            t.join(30)
        self.assertTrue(set(seen) <= {401, 429}, set(seen))


if __name__ == "__main__":
    import unittest
    unittest.main()


def thread_nices(pid):
    """The nice value of every thread of pid (field 19 of /proc/PID/task/TID/stat)."""
    out = []
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/stat" % (pid, tid)) as f:
                stat = f.read()
        except FileNotFoundError:
            continue
        out.append(int(stat.rsplit(")", 1)[1].split()[16]))
    return out


def thread_slices(pid):
    """The EEVDF time slice in ns of every thread of pid (se.slice in /proc/PID/task/TID/sched),
    or None where the kernel does not show it."""
    out = []
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/sched" % (pid, tid)) as f:
                text = f.read()
        except (FileNotFoundError, PermissionError):
            continue
        m = re.search(r"^se\.slice\s*:\s*(\d+)", text, re.M)
        out.append(int(m.group(1)) if m else None)
    return out


def kernel_custom_slices():
    """Linux 6.12+ takes a SCHED_OTHER thread's slice from sched_setattr's sched_runtime."""
    major, minor = (int(x) for x in re.match(r"(\d+)\.(\d+)", os.uname().release).groups())
    return (major, minor) >= (6, 12) and thread_slices(os.getpid())[0] is not None


class MainPortPriorityTest(KQTestCase):
    """With the scheduler verbs and the webhooks on listeners of their own (the chart's
    layout), the main port's workers (what any client in the cluster reaches) run at nice
    10, so their TLS handshakes and views yield the CPU to filter, bind and webhook calls;
    every other thread keeps nice 0. With the verbs or webhooks still on the main port,
    nothing is lowered."""
    CONFIG = queues_config({"name": "default"})
    START = False

    def start_with(self, *extra):
        self.kq = Kubequota(self.sim, self.CONFIG, extra_args=("--threads", "7", "--scheduler-threads", "5",
                                                               "--webhook-threads", "3") + extra)
        self.kq.start()
        return self.kq.proc.pid

    def test_main_port_workers_yield_in_the_chart_layout(self):
        pid = self.start_with("--webhook-listen", "127.0.0.1:%d" % free_port(),
                              "--scheduler-listen", "127.0.0.1:%d" % free_port())
        wait_until(lambda: thread_nices(pid).count(10) == 7, timeout=10, msg="7 main-port workers at nice 10")
        nices = thread_nices(pid)
        self.assertEqual(sorted(set(nices)), [0, 10], nices)
        self.assertGreaterEqual(nices.count(0), 5 + 3, nices)  # the scheduler's and the webhooks' workers

    def test_scheduler_and_webhook_workers_ask_for_a_short_slice(self):
        # src/serve/server.c, LATENCY_SLICE_NS: 0.1 ms for the workers whose calls something
        # waits on (kube-scheduler's serial cycle, the API server's pod creation); every
        # other thread keeps the kernel's default, which is longer
        if not kernel_custom_slices():
            self.skipTest("kernel %s has no per-thread slice (6.12+)" % os.uname().release)
        pid = self.start_with("--webhook-listen", "127.0.0.1:%d" % free_port(),
                              "--scheduler-listen", "127.0.0.1:%d" % free_port())
        wait_until(lambda: thread_slices(pid).count(100000) == 5 + 3, timeout=10,
                   msg="5 scheduler and 3 webhook workers with a 0.1 ms slice")
        slices = thread_slices(pid)
        others = [x for x in slices if x != 100000]
        self.assertTrue(others and all(x > 100000 for x in others), slices)

    def test_nothing_lowered_while_the_main_port_serves_the_webhooks(self):
        pid = self.start_with("--scheduler-listen", "127.0.0.1:%d" % free_port())
        self.assertEqual(set(thread_nices(pid)), {0})


class TlsConnectionCounterTest(KQTestCase):
    """kubequota_tls_connections_total{listener} counts each TLS connection once, on the
    listener that accepted it: the end-to-end benchmark reads it to show how often
    kube-scheduler's extender client reconnects (it keeps 2 idle connections per host)."""
    CONFIG = queues_config({"name": "default"})
    START = False

    def counts(self):
        out = {}
        for ln in self.kq.get("/metrics").text.splitlines():
            if ln.startswith("kubequota_tls_connections_total{"):
                out[ln.split('listener="', 1)[1].split('"', 1)[0]] = int(ln.rsplit(" ", 1)[1])
        return out

    def probe(self, port, requests=1):
        c = http.client.HTTPSConnection("127.0.0.1", port, timeout=10, context=tls_ctx())
        try:
            for _ in range(requests):
                c.request("GET", "/healthz")
                r = c.getresponse()
                r.read()
                self.assertEqual(r.status, 200)
        finally:
            c.close()

    def test_each_connection_counts_once_on_its_listener(self):
        sport, wport = free_port(), free_port()
        while wport == sport:
            wport = free_port()
        self.kq = Kubequota(self.sim, self.CONFIG, extra_args=(
            "--scheduler-listen", "127.0.0.1:%d" % sport, "--webhook-listen", "127.0.0.1:%d" % wport))
        self.kq.start()
        before = self.counts()
        self.assertEqual(sorted(before), ["main", "scheduler", "webhook"])
        for _ in range(5):
            self.probe(sport)
        self.probe(sport, requests=4)  # one keep-alive connection, four requests: one handshake
        for _ in range(3):
            self.probe(wport)
        after = self.counts()
        self.assertEqual(after["scheduler"] - before["scheduler"], 6)
        self.assertEqual(after["webhook"] - before["webhook"], 3)
        self.assertEqual(after["main"] - before["main"], 1)  # the second /metrics read's own connection
