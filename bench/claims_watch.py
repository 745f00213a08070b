#!/usr/bin/env python3
"""Cost of the ResourceClaim informer (issue 39): kubequota started against the API
simulator holding N claims (and optionally N bound pods, one claim each), versus none.
Prints the claim list's time (informer start to claims_synced; the Python simulator
serving the pages dominates it), the time to ready, kubequota's RSS and its CPU time once
the claims are listed. Not a test: numbers depend on the host.

  python3 bench/claims_watch.py [--claims 10000] [--pods]

With --pods: also N bound pods without claims, and N bound pods each using one claim.
"""
import argparse
import os
import re
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "e2e"))
import kqtest  # noqa: E402
from kqtest import Kubequota, Sim, pod_manifest, queues_config  # noqa: E402

DEV = "gpu.example.com.deviceclass.resource.k8s.io/devices"
CONFIG = queues_config({"name": "default"}, {"name": "gpu", "resources": {"max": {DEV: "100000"}}})


def rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def cpu_s(pid):
    with open("/proc/%d/stat" % pid) as f:
        parts = f.read().rsplit(")", 1)[1].split()
    return (int(parts[11]) + int(parts[12])) / os.sysconf("SC_CLK_TCK")


def stamp(line):
    m = re.match(r"^[IWE]\d{4} (\d\d):(\d\d):(\d\d\.\d+)", line)
    return int(m.group(1)) * 3600 + int(m.group(2)) * 60 + float(m.group(3)) if m else None


def queue_devices(kq):
    def find(q):
        if isinstance(q, list):
            return next((r for r in map(find, q) if r is not None), None)
        if not isinstance(q, dict):
            return None
        if q.get("queuename") in ("root.gpu", "gpu"):
            return int((q.get("allocatedResource") or {}).get(DEV, 0))
        return find(q.get("children") or [])
    return find(kq.queues()) or 0


def run(n, pods, claims=True):
    sim = Sim(nodes=("node-1",))
    w = sim.world
    for i in range(n):
        name = "claim-%05d" % i
        if not claims:
            p = pod_manifest("p-%05d" % i, user="u%d" % (i % 50), queue="root.gpu", cpu="10m", memory=None,
                             node="node-1")
            w.create_pod("default", p)
            continue
        w.create_simple("resourceclaims", "default", {
            "metadata": {"name": name},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com",
                                                                          "count": 1}}]}}})
        w.update("resourceclaims", "default", name, {"status": {
            "allocation": {"devices": {"results": [{"request": "gpu", "driver": "d", "pool": "node-1",
                                                    "device": "gpu-%d" % i}]}}}},
            subresource="status", patch=True)
        if pods:
            p = pod_manifest("p-%05d" % i, user="u%d" % (i % 50), queue="root.gpu", cpu="10m", memory=None,
                             node="node-1")
            p["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": name}]
            w.create_pod("default", p)
    kq = Kubequota(sim, CONFIG)
    t0 = time.monotonic()
    kq.start(timeout=300)
    ready = time.monotonic() - t0
    deadline = time.monotonic() + 300
    while "claims_synced" not in kq.logs() and time.monotonic() < deadline:
        time.sleep(0.2)
    while pods and claims and queue_devices(kq) != n and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(1.0)
    rss = rss_kb(kq.proc.pid)
    cpu = cpu_s(kq.proc.pid)
    log = kq.logs()
    start = synced = None
    for line in log.splitlines():
        if "informer started" in line and "resourceclaims" in line and start is None:
            start = stamp(line)
        if "claims_synced" in line and synced is None:
            synced = stamp(line)
    devices = queue_devices(kq)
    kq.stop()
    sim.stop()
    return {"claims": n if claims else 0, "pods": n if pods else 0, "devices_charged": devices, "claim_list_s": (synced - start) if start and synced else None,
            "ready_s": round(ready, 2), "rss_mb": round(rss / 1024, 1), "kubequota_cpu_s": round(cpu, 2)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--claims", type=int, default=10000)
    ap.add_argument("--pods", action="store_true")
    a = ap.parse_args()
    if not kqtest.have_binary():
        sys.exit("bin/kubequota not built")
    print(run(0, False), flush=True)
    if a.pods:
        print(run(a.claims, True, claims=False), flush=True)
    print(run(a.claims, a.pods), flush=True)


if __name__ == "__main__":
    main()
