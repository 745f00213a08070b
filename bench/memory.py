#!/usr/bin/python3
"""Memory of the large views (issue 29, "Memory"), a bench row (never a test): bin/kubequota
against the API simulator, everything on loopback.

  python3 bench/memory.py [--binary bin/kubequota] [--pods 5000] [--users 500] [--groups 50]
                          [--pods-per-app 5] [--queues 10] [--concurrency 8] [--settle 10]
                          [-- extra kubequota flags]

  the row: python3 bench/memory.py --pods 150000 --users 20000 --groups 2000

The simulator starts with --pods bound, running pods already in its store (no watch history:
the daemon sees them in its first LIST), spread round-robin over --users users (user u is in
group u % --groups), applications of --pods-per-app pods of one user, and --queues leaf
queues. Then kubequota starts; at ready the script reads the daemon's VmRSS, resets its peak
(/proc/PID/clear_refs 5), reads every view whose answer grows with users, groups, pods or
applications once each (sequentially), then --concurrency copies of each view at once (one
view after the other), and prints VmRSS and VmHWM after each phase and --settle seconds after
the last read, plus the status codes and sizes of the answers. Every number is the daemon's
own /proc/PID/status; a background sampler also records the highest VmRSS it saw.
"""

import argparse
import json
import os
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests", "e2e"))

import kqtest  # noqa: E402
from kqtest import Kubequota, Sim, queues_config  # noqa: E402

VIEWS = [
    "/ws/v1/partition/default/usage/users",
    "/ws/v1/partition/default/usage/groups",
    "/ws/v1/partition/default/applications",
    "/ws/v1/partition/default/queues",
    "/metrics",
]


def status_kb(pid):
    out = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "VmHWM"):
                out[k] = int(v.split()[0])
    return out


def mb(kb):
    return "%.0f MB" % (kb / 1024.0)


class Sampler(threading.Thread):
    def __init__(self, pid):
        super().__init__(daemon=True)
        self.pid = pid
        self.peak = 0
        self.stop = threading.Event()

    def run(self):
        while not self.stop.is_set():
            try:
                self.peak = max(self.peak, status_kb(self.pid)["VmRSS"])
            except (OSError, KeyError):
                return
            self.stop.wait(0.05)


def preload(sim, args):
    """Bound running pods straight into the simulator's store (no events: a LIST sees them)."""
    w = sim.world
    nodes = ["node-1", "node-2", "node-3"]
    with w.cond:
        for i in range(args.pods):
            u = i % args.users
            app = "app-%d-%d" % (u, (i // args.users) // args.pods_per_app)
            name = "p%d" % i
            pod = {
                "metadata": {
                    "name": name, "namespace": "default", "uid": "uid-%d" % i,
                    "resourceVersion": str(w.next_rv()), "creationTimestamp": "2026-01-01T00:00:00Z",
                    "labels": {kqtest.LABEL_QUEUE: "root.q%d" % (u % args.queues), kqtest.LABEL_APP: app},
                    "annotations": {kqtest.ANN_USER: json.dumps({"user": "user-%d" % u,
                                                                 "groups": ["group-%d" % (u % args.groups)]})},
                },
                "spec": {"schedulerName": kqtest.SCHED, "nodeName": nodes[i % 3],
                         "containers": [{"name": "c", "image": "busybox",
                                         "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]},
                "status": {"phase": "Running"},
            }
            w.objs["pods"]["default/" + name] = pod


def read(kq, path, out, i):
    t0 = time.monotonic()
    try:
        r = kq.http.get(path, timeout=600)
        out[i] = (r.status, len(r.body), time.monotonic() - t0, r.headers.get("Retry-After"))
    except Exception as e:  # noqa: BLE001 (a bench: report, do not stop)
        out[i] = (repr(e), 0, time.monotonic() - t0, None)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary")
    ap.add_argument("--pods", type=int, default=5000)
    ap.add_argument("--users", type=int, default=500)
    ap.add_argument("--groups", type=int, default=50)
    ap.add_argument("--pods-per-app", type=int, default=5)
    ap.add_argument("--queues", type=int, default=10)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--settle", type=float, default=10.0)
    ap.add_argument("--ready-timeout", type=float, default=1800.0)
    ap.add_argument("extra", nargs="*", help="more kubequota flags (after --)")
    args = ap.parse_args()
    if args.binary:
        os.environ["KQ_BINARY"] = os.path.abspath(args.binary)

    sim = Sim()
    kq = None
    try:
        t0 = time.monotonic()
        preload(sim, args)
        print("simulator: %d pods of %d users in %d groups preloaded in %.1f s"
              % (args.pods, args.users, args.groups, time.monotonic() - t0), flush=True)
        # "*" user and group limits: YuniKorn (and the ugm) track a group only under a group limit
        leaves = [{"name": "q%d" % i, "limits": [
            {"limit": "everyone", "users": ["*"], "maxresources": {"cpu": "100000"}},
            {"limit": "group-0", "groups": ["group-0"], "maxresources": {"cpu": "1000000"}},
            {"limit": "every group", "groups": ["*"], "maxresources": {"cpu": "1000000"}}]}
            for i in range(args.queues)]
        config = queues_config(*leaves)
        kq = Kubequota(sim, config, extra_args=["--log-level", "info"] + args.extra, name="mem")
        t0 = time.monotonic()
        kq.start(wait=True, timeout=args.ready_timeout)
        pid = kq.proc.pid
        print("kubequota: ready in %.1f s (pid %d, %s)" % (time.monotonic() - t0, pid, " ".join(args.extra)),
              flush=True)
        time.sleep(1.0)
        ready = status_kb(pid)
        with open("/proc/%d/clear_refs" % pid, "w") as f:
            f.write("5")  # VmHWM := VmRSS
        sampler = Sampler(pid)
        sampler.start()
        print("%-22s VmRSS %8s  VmHWM %8s" % ("ready", mb(ready["VmRSS"]), mb(ready["VmHWM"])), flush=True)

        for path in VIEWS:
            out = [None]
            read(kq, path, out, 0)
            st = status_kb(pid)
            print("  once %-44s %s %10d B %6.2f s   VmRSS %8s  VmHWM %8s"
                  % (path, out[0][0], out[0][1], out[0][2], mb(st["VmRSS"]), mb(st["VmHWM"])), flush=True)
        once = status_kb(pid)
        print("%-22s VmRSS %8s  VmHWM %8s" % ("after one of each", mb(once["VmRSS"]), mb(once["VmHWM"])), flush=True)

        for path in VIEWS:
            out = [None] * args.concurrency
            ts = [threading.Thread(target=read, args=(kq, path, out, i)) for i in range(args.concurrency)]
            for t in ts:
                t.start()
            for t in ts:
                t.join()
            codes = {}
            for o in out:
                codes[o[0]] = codes.get(o[0], 0) + 1
            st = status_kb(pid)
            print("  %dx   %-44s %s max %6.2f s   VmRSS %8s  VmHWM %8s"
                  % (args.concurrency, path, " ".join("%s:%d" % kv for kv in sorted(codes.items(), key=str)),
                     max(o[2] for o in out), mb(st["VmRSS"]), mb(st["VmHWM"])), flush=True)
        conc = status_kb(pid)
        print("%-22s VmRSS %8s  VmHWM %8s" % ("after concurrent", mb(conc["VmRSS"]), mb(conc["VmHWM"])), flush=True)
        time.sleep(args.settle)
        after = status_kb(pid)
        sampler.stop.set()
        sampler.join()
        print("%-22s VmRSS %8s  VmHWM %8s" % ("%.0f s later" % args.settle, mb(after["VmRSS"]), mb(after["VmHWM"])))
        print("ROW pods=%d users=%d groups=%d ready=%s peak(VmHWM)=%s sampled_peak=%s after_%.0fs=%s"
              % (args.pods, args.users, args.groups, mb(ready["VmRSS"]), mb(after["VmHWM"]), mb(sampler.peak),
                 args.settle, mb(after["VmRSS"])))
        trims = [float(x.split("ms=")[1].split()[0]) for x in kq.logs().splitlines()
                 if "event=malloc_trim" in x and "ms=" in x]
        if trims:  # only with --log-level debug among the extra flags
            print("malloc_trim: %d calls, median %.1f ms, max %.1f ms"
                  % (len(trims), sorted(trims)[len(trims) // 2], max(trims)))
        if not kq.alive():
            print("kubequota died:\n" + kq.log_tail())
            return 1
        return 0
    finally:
        if kq is not None:
            kq.stop()
        sim.stop()


if __name__ == "__main__":
    sys.exit(main())
