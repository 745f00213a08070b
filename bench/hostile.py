#!/usr/bin/python3
"""Filter latency at one connection under a standing hostile load (issue 20), a bench row
(never a test): bin/kubequota against the API simulator, everything on loopback.

  python3 bench/hostile.py [--binary bin/kubequota] [--requests 400] [--seconds 20]

For two layouts, the scheduler on the shared TLS port and the scheduler on its own
TLS listener (--scheduler-listen, as the chart runs it), it measures filter latency (one connection at a
time, a new connection per request, as after a keep-alive timeout) unloaded and then while
hostile clients hold the main port: 64 slow bodies on /admission/mutate (one byte every
2 s), 150 idle TCP connections that never start TLS, 100 idle TLS connections and a
handshake flood (one thread, connect + handshake + close in a loop), all from 127.0.0.2
(another client than the scheduler's 127.0.0.1). Hostile clients are bounded in count and
in time (--seconds). Prints one row per layout and load: p50, p99,
max and the p99 ratio loaded / unloaded.
"""

import argparse
import json
import os
import socket
import ssl
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests", "e2e"))

import kqtest  # noqa: E402
from kqtest import HttpClient, Kubequota, Sim, SchedulerDriver, certs, free_port, pod_manifest, queues_config  # noqa: E402


HOSTILE_SRC = "127.0.0.2"


class Hostile:
    def __init__(self, port, seconds, flood=True):
        self.port, self.deadline, self.with_flood = port, time.monotonic() + seconds, flood
        self.stop = threading.Event()
        self.socks = []
        self.threads = []
        self.lock = threading.Lock()

    def ctx(self):
        c = ssl.create_default_context(cafile=certs()["ca"])
        c.check_hostname = False
        return c

    def connect(self, timeout):
        # the hostile clients are another host than the scheduler (127.0.0.2: another
        # loopback source address), as they would be in a cluster
        return socket.create_connection(("127.0.0.1", self.port), timeout=timeout, source_address=(HOSTILE_SRC, 0))

    def keep(self, s):
        with self.lock:
            self.socks.append(s)

    def slow_body(self):
        try:
            s = self.ctx().wrap_socket(self.connect(30))
            s.sendall(b"POST /admission/mutate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                      b"Content-Length: 100000\r\n\r\n{")
            self.keep(s)
            while not self.stop.is_set() and time.monotonic() < self.deadline:
                s.sendall(b" ")
                self.stop.wait(2)
        except OSError:
            pass

    def idle_tls(self):
        try:
            s = self.ctx().wrap_socket(self.connect(30))
            self.keep(s)
        except OSError:
            pass

    def flood(self):
        while not self.stop.is_set() and time.monotonic() < self.deadline:
            try:
                s = self.ctx().wrap_socket(self.connect(5))
                s.close()
            except OSError:
                time.sleep(0.01)

    def start(self):
        for _ in range(150):
            try:
                self.keep(self.connect(30))
            except OSError:
                break
        for fn, n in ((self.slow_body, 64), (self.idle_tls, 100), (self.flood, 1 if self.with_flood else 0)):
            for _ in range(n):
                t = threading.Thread(target=fn, daemon=True)
                t.start()
                self.threads.append(t)
        time.sleep(1.0)  # let the connections reach the server before measuring

    def end(self):
        self.stop.set()
        with self.lock:
            for s in self.socks:
                try:
                    s.close()
                except OSError:
                    pass
        for t in self.threads:
            t.join(5)


def measure(client, body, n, deadline):
    lat = []
    for _ in range(n):
        if time.monotonic() > deadline:
            break
        t0 = time.monotonic()
        r = client.post("/scheduler/filter", raw=body)
        lat.append(time.monotonic() - t0)
        if r.status != 200:
            raise SystemExit("filter answered %d %s" % (r.status, r.text[:200]))
    lat.sort()
    q = lambda p: lat[min(len(lat) - 1, int(p * len(lat)))] * 1e3  # noqa: E731
    return {"n": len(lat), "p50": q(0.50), "p99": q(0.99), "max": lat[-1] * 1e3}


def run_layout(args, separate):
    sim = Sim(nodes=["node-1", "node-2", "node-3"])
    extra = ["--log-level", "warn"]
    kq = Kubequota(sim, queues_config({"name": "default"}), extra_args=extra, name="bench")
    sport = free_port()
    while sport == kq.port:
        sport = free_port()
    if separate:
        kq.extra_args += ["--scheduler-listen", "127.0.0.1:%d" % sport]
    kq.start()
    try:
        sim.create_pod(pod_manifest("p1", cpu="100m"))
        pod = SchedulerDriver.cached(sim.get_pod("default", "p1"))
        body = json.dumps({"Pod": pod, "Nodes": None, "NodeNames": ["node-1", "node-2", "node-3"]})
        client = HttpClient("https://localhost:%d" % sport if separate else kq.url, ca=certs()["ca"], timeout=60)
        measure(client, body, 50, time.monotonic() + 30)  # warm-up
        quiet = measure(client, body, args.requests, time.monotonic() + args.seconds)
        h = Hostile(kq.port, args.seconds + 5, not args.no_flood)
        h.start()
        try:
            loaded = measure(client, body, args.requests, time.monotonic() + args.seconds)
        finally:
            h.end()
        return quiet, loaded
    finally:
        kq.stop(30)
        sim.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--binary", default=os.path.join(os.path.dirname(HERE), "bin", "kubequota"))
    ap.add_argument("--requests", type=int, default=400)
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--no-flood", action="store_true", help="leave out the handshake flood (CPU-bound)")
    ap.add_argument("--separate-only", action="store_true", help="only the --scheduler-listen layout")
    args = ap.parse_args()
    os.environ["KQ_BINARY"] = os.path.abspath(args.binary)
    print("| layout | load | filters | p50 ms | p99 ms | max ms | p99 loaded/unloaded |")
    print("|---|---|---|---|---|---|---|")
    for separate in ((True,) if args.separate_only else (False, True)):
        quiet, loaded = run_layout(args, separate)
        name = "--scheduler-listen (own workers)" if separate else "shared TLS port"
        for load, m in (("none", quiet), ("hostile", loaded)):
            ratio = "%.2fx" % (loaded["p99"] / quiet["p99"]) if load == "hostile" else ""
            print("| %s | %s | %d | %.2f | %.2f | %.1f | %s |" % (name, load, m["n"], m["p50"], m["p99"],
                                                                  m["max"], ratio), flush=True)


if __name__ == "__main__":
    main()
