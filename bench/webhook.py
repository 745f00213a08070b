#!/usr/bin/python3
"""Webhook latency under keep-alive and slow-body load from many addresses (issue 29), a
bench row (never a test): bin/kubequota against the API simulator, everything on loopback.

  python3 bench/webhook.py [--binary bin/kubequota] [--requests 200] [--seconds 20]
                           [--rounds 1] [--layouts shared,own,own-attacked]

It measures POST /admission/mutate (a pod CREATE AdmissionReview, as the API server sends
it; client timeout 10 s, the chart's webhook timeout). --client reuse (the default) sends the
calls over one kept-alive connection, reconnecting only when it is closed, as the API server
does (its cached client-go transport: 1 TLS connection for 24 creates on the real control
plane, tests/cluster/test_kube_connections.py); --client new opens a TLS connection per call,
as after a keep-alive timeout (the rounds before 2026-11-28 measured that way) unloaded and then while five client addresses, 127.0.0.2 to
127.0.0.6 (loopback only), each hold --per-source keep-alive TLS connections (one request
answered, then idle) and as many slow bodies (a POST whose body comes one byte every 2 s),
reconnecting whatever the server closes, for --seconds. The load runs in its own process: in
a cluster the attacking pods run on other nodes, so their CPU is not the webhook's (in one
Python process their 160 threads would also hold the GIL against the measuring client, which
then times its own waiting). --load-policy nice (the default) runs it at nice --load-nice
(default 10; 0 shares the CPU equally). --load-policy idle runs that process under
SCHED_IDLE, the nearest a shared two-core host comes to "another machine": it gets only CPU
nobody else wants, and a waking kubequota or client thread preempts it at once, where a nice
10 thread keeps its slice (up to a few ms with EEVDF) before the webhook's thread gets the
core. kubequota's own work for the load (accepts, TLS handshakes, reaping, on the main
port's workers) is unchanged: it stays on the host. Layouts:

  shared        the webhooks on the main port (64 workers; before --webhook-listen)
  own           the webhooks on --webhook-listen (the chart's layout); the load on the main port
  own-attacked  the same, with the load aimed at the webhook port itself (an in-cluster
                client that reaches the webhook Service port)
  own-elsewhere the same, with the load aimed at a second kubequota process's main port: what
                the load costs the measured webhook through the host alone (CPU, kernel),
                none of it through the measured process
  own-host      own-elsewhere's load and own's load, phase after phase in the same rounds: the
                p99 with the load on a bystander is the limit this host sets, and the ratio of
                own's p99 to it is what the load costs through kubequota itself

--rounds R alternates the two phases R times on the same kubequota (unloaded, loaded,
unloaded, ...) and pools each condition's calls: on a shared host the other work drifts over
minutes, and one unloaded phase followed by one loaded phase charges that drift to the load.
Prints one row per layout and load: calls, timeouts, p50, p99, max and the p99 ratio loaded /
unloaded. A call that times out counts as 10,000 ms.
"""

import argparse
import http.client
import json
import multiprocessing
import os
import socket
import ssl
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests", "e2e"))

from kqtest import Kubequota, Sim, certs, free_port, queues_config  # noqa: E402

SOURCES = ["127.0.0.%d" % i for i in range(2, 7)]
TIMEOUT_S = 10.0


def ctx():
    c = ssl.create_default_context(cafile=certs()["ca"])
    c.check_hostname = False
    return c


def review(i):
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "p%d" % i, "namespace": "default", "uid": "uid-%d" % i},
           "spec": {"schedulerName": "kubequota-scheduler",
                    "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "100m"}}}]}}
    req = {"uid": "rev-%d" % i, "kind": {"group": "", "version": "v1", "kind": "Pod"},
           "resource": {"group": "", "version": "v1", "resource": "pods"}, "namespace": "default",
           "operation": "CREATE", "userInfo": {"username": "alice", "groups": ["system:authenticated"]},
           "object": pod, "oldObject": None, "dryRun": False}
    return json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": req}).encode()


class Load:
    """Keep-alive and slow-body connections from SOURCES to port, each slot reconnecting
    when the server closes it, until end() or the deadline."""

    def __init__(self, port, per_source, seconds):
        self.port, self.per_source = port, per_source
        self.deadline = time.monotonic() + seconds
        self.stop = threading.Event()
        self.threads = []
        self.lock = threading.Lock()
        self.socks = set()

    def connect(self, src):
        raw = socket.create_connection(("127.0.0.1", self.port), timeout=30, source_address=(src, 0))
        s = ctx().wrap_socket(raw)
        with self.lock:
            self.socks.add(s)
        return s

    def drop(self, s):
        with self.lock:
            self.socks.discard(s)
        try:
            s.close()
        except OSError:
            pass

    def running(self):
        return not self.stop.is_set() and time.monotonic() < self.deadline

    def keep_alive(self, src):
        while self.running():
            s = None
            try:
                s = self.connect(src)
                s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
                s.recv(4096)
                while self.running() and s.recv(4096):  # idle until the server closes it
                    pass
            except OSError:
                self.stop.wait(0.05)
            finally:
                if s is not None:
                    self.drop(s)

    def slow_body(self, src):
        while self.running():
            s = None
            try:
                s = self.connect(src)
                s.sendall(b"POST /admission/mutate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                          b"Content-Length: 60000\r\n\r\n{")
                while self.running():
                    self.stop.wait(2)
                    s.sendall(b" ")
            except OSError:
                self.stop.wait(0.05)
            finally:
                if s is not None:
                    self.drop(s)

    def start(self):
        for src in SOURCES:
            for fn in (self.keep_alive, self.slow_body):
                for _ in range(self.per_source):
                    t = threading.Thread(target=fn, args=(src,), daemon=True)
                    t.start()
                    self.threads.append(t)
        time.sleep(3.0)  # let the connections reach the server before measuring

    def end(self):
        self.stop.set()
        with self.lock:
            socks = list(self.socks)
        for s in socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        for t in self.threads:
            t.join(5)


def load_main(port, per_source, seconds, policy, nice, ready):
    """The load's own process (spawned): starts it, says so, holds it until the deadline or
    until the parent terminates it. Its threads inherit the policy set here."""
    if policy == "idle":
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    elif nice:
        os.nice(nice)
    load = Load(port, per_source, seconds)
    load.start()
    ready.set()
    try:
        while load.running():
            time.sleep(0.2)
    finally:
        load.end()


class Client:
    """The measuring client: one connection kept across calls (reuse) or one per call (new)."""

    def __init__(self, port, reuse):
        self.port, self.reuse, self.conn = port, reuse, None

    def close(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def call(self, body):
        if self.conn is None:
            self.conn = http.client.HTTPSConnection("localhost", self.port, timeout=TIMEOUT_S, context=ctx())
        try:
            self.conn.request("POST", "/admission/mutate", body=body, headers={"Content-Type": "application/json"})
            r = self.conn.getresponse()
            data = r.read()
            if r.status != 200 or b'"allowed"' not in data:
                raise SystemExit("webhook answered %d %s" % (r.status, data[:200]))
            if not self.reuse or r.will_close:
                self.close()
        except BaseException:
            self.close()
            raise


def short_slice():
    """This thread asks the kernel for a 0.1 ms slice (sched_setattr, as kubequota's webhook
    workers do): with --client-slice short the measuring client wakes as promptly as a client
    on another machine would, so what is left of the loaded p99 is kubequota's."""
    import ctypes
    import struct
    attr = struct.pack("IIQiIQQQ", 48, 0, 0, os.getpriority(os.PRIO_PROCESS, 0), 0, 100000, 0, 0)
    buf = ctypes.create_string_buffer(attr)
    libc = ctypes.CDLL(None, use_errno=True)
    nr = 314 if os.uname().machine == "x86_64" else 274  # sched_setattr on x86_64 / arm64
    if libc.syscall(nr, 0, buf, 0) != 0:
        print("# sched_setattr failed: errno %d (the client keeps the default slice)" % ctypes.get_errno(),
              file=sys.stderr)


def measure(port, n, seconds, reuse):
    """Latencies in seconds of up to n calls within seconds, and how many timed out."""
    lat, timeouts = [], 0
    deadline = time.monotonic() + seconds
    cl = Client(port, reuse)
    for i in range(n):
        if time.monotonic() > deadline:
            break
        t0 = time.monotonic()
        try:
            cl.call(review(i))
            lat.append(time.monotonic() - t0)
        except (OSError, http.client.HTTPException):
            timeouts += 1
            lat.append(TIMEOUT_S)
    cl.close()
    return lat, timeouts


def summary(lat, timeouts):
    lat = sorted(lat)
    q = lambda p: lat[min(len(lat) - 1, int(p * len(lat)))] * 1e3  # noqa: E731
    return {"n": len(lat), "timeouts": timeouts, "p50": q(0.50), "p99": q(0.99), "max": lat[-1] * 1e3}


# where each layout's load goes, phase after phase: "main" the measured kubequota's main port,
# "webhook" its webhook port, "bystander" the main port of a second kubequota process
PHASES = {"shared": ("main",), "own": ("main",), "own-attacked": ("webhook",),
          "own-elsewhere": ("bystander",), "own-host": ("bystander", "main")}


def run_layout(args, layout):
    """--rounds rounds of phases on one kubequota: unloaded, then the layout's loads one after
    the other. The host's other work drifts over minutes, so alternating lets every condition
    see the same drift; each condition's calls are pooled over the rounds. Returns
    {condition: summary} and the per-round p99s."""
    sim = Sim(nodes=["node-1", "node-2", "node-3"])
    kq = Kubequota(sim, queues_config({"name": "default"}), extra_args=["--log-level", "warn"], name="bench")
    wport = kq.port
    if layout != "shared":
        wport = free_port()
        while wport == kq.port:
            wport = free_port()
        sport = free_port()
        while sport in (kq.port, wport):
            sport = free_port()
        # the chart's layout: the scheduler verbs on their own listener too, so the main
        # port serves only views and probes (and its workers run at nice 10)
        kq.extra_args += ["--webhook-listen", "127.0.0.1:%d" % wport, "--scheduler-listen", "127.0.0.1:%d" % sport]
    kq.start()
    other = None
    try:
        if "bystander" in PHASES[layout]:
            # configured as the measured one (its own webhook and scheduler listeners, so its
            # main port's workers run at nice 10 too): the same work for the load, elsewhere
            other = Kubequota(sim, queues_config({"name": "default"}), extra_args=["--log-level", "warn"],
                              name="bench-bystander")
            used = {kq.port, wport, sport, other.port}
            ports = []
            while len(ports) < 2:
                p = free_port()
                if p not in used:
                    used.add(p)
                    ports.append(p)
            other.extra_args += ["--webhook-listen", "127.0.0.1:%d" % ports[0],
                                 "--scheduler-listen", "127.0.0.1:%d" % ports[1]]
            other.start()
        target = {"main": kq.port, "webhook": wport, "bystander": other.port if other else None}
        reuse = args.client == "reuse"
        measure(wport, 30, 30, reuse)  # warm-up
        conds = ("none",) + PHASES[layout]
        pooled = {k: ([], 0) for k in conds}
        rounds = []
        mp = multiprocessing.get_context("spawn")
        for _ in range(args.rounds):
            this = {}
            for cond in conds:
                if cond == "none":
                    this[cond] = measure(wport, args.requests, args.seconds, reuse)
                    continue
                ready = mp.Event()
                proc = mp.Process(target=load_main, daemon=True,
                                  args=(target[cond], args.per_source, args.seconds + 10, args.load_policy,
                                        args.load_nice, ready))
                proc.start()
                try:
                    if not ready.wait(120):
                        raise SystemExit("the load process did not start")
                    this[cond] = measure(wport, args.requests, args.seconds, reuse)
                finally:
                    proc.terminate()
                    proc.join(15)
            for k, (lat, to) in this.items():
                pooled[k] = (pooled[k][0] + lat, pooled[k][1] + to)
            rounds.append({k: summary(*v)["p99"] for k, v in this.items()})
        return {k: summary(*v) for k, v in pooled.items()}, rounds
    finally:
        if other:
            other.stop(30)
        kq.stop(30)
        sim.stop()


NAMES = {"shared": "webhooks on the main port (64 workers)",
         "own": "--webhook-listen (32 workers), load on the main port",
         "own-attacked": "--webhook-listen (32 workers), load on the webhook port",
         "own-elsewhere": "--webhook-listen (32 workers), load on another kubequota process",
         "own-host": "--webhook-listen (32 workers)"}
LOADS = {"none": "none", "main": "5 addresses on its main port", "webhook": "5 addresses on its webhook port",
         "bystander": "5 addresses on a bystander process"}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--binary", default=os.path.join(os.path.dirname(HERE), "bin", "kubequota"))
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--rounds", type=int, default=1,
                    help="alternate unloaded and loaded phases this many times, pooling each condition's calls")
    ap.add_argument("--per-source", type=int, default=16,
                    help="keep-alive connections and slow bodies per address (each)")
    ap.add_argument("--layouts", default="shared,own,own-attacked")
    ap.add_argument("--load-policy", choices=("idle", "nice"), default="nice",
                    help="the load process's CPU policy: SCHED_IDLE (another machine's CPU) or --load-nice")
    ap.add_argument("--load-nice", type=int, default=10,
                    help="with --load-policy nice: niceness of the load's process (0: the same priority as kubequota)")
    ap.add_argument("--client", choices=("reuse", "new"), default="reuse",
                    help="the measuring client keeps its connection as the API server does (reuse) or opens one per call")
    ap.add_argument("--client-slice", choices=("default", "short"), default="default",
                    help="short: the measuring client asks for a 0.1 ms time slice (Linux 6.12+)")
    args = ap.parse_args()
    if args.client_slice == "short":
        short_slice()
    os.environ["KQ_BINARY"] = os.path.abspath(args.binary)
    print("| layout | load | calls | timeouts | p50 ms | p99 ms | max ms | p99 / unloaded | p99 / bystander |")
    print("|---|---|---|---|---|---|---|---|---|")
    for layout in args.layouts.split(","):
        res, rounds = run_layout(args, layout)
        for cond, m in res.items():
            r_none = "%.2fx" % (m["p99"] / res["none"]["p99"]) if cond != "none" else ""
            r_by = "%.2fx" % (m["p99"] / res["bystander"]["p99"]) if cond == "main" and "bystander" in res else ""
            print("| %s | %s | %d | %d | %.2f | %.2f | %.1f | %s | %s |" % (
                NAMES[layout], LOADS[cond], m["n"], m["timeouts"], m["p50"], m["p99"], m["max"], r_none, r_by),
                flush=True)
        if len(rounds) > 1:
            print("#   per round, p99 ms (%s): %s" % (" / ".join(rounds[0]), ", ".join(
                " / ".join("%.2f" % v for v in r.values()) for r in rounds)), flush=True)


if __name__ == "__main__":
    main()
