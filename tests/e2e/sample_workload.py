#!/usr/bin/python3
"""The `make run` demo workload: creates pods for several users and groups through the API
(simulator), drives kubequota's extender like kube-scheduler (filter, then bind), prints
every decision, then prints kubequota's usage view.

  sample_workload.py --api URL --ca CA --token T --kubequota URL [--namespace NS] [--gate]
  sample_workload.py --kubequota URL --ca CA --show          (only print the usage view)

With --gate (kubequota serves with --admission-gate, as the chart does) the pods are created
with the scheduling gate kubequota.io/admission, as kubequota's mutating webhook creates them
(the simulator calls no webhooks); the pods kubequota releases are then scheduled, and the
rest are listed in the order kubequota will release them, each with why it waits.

The workload is written for examples/queues.yaml (queues root.default, root.dev.team-a,
root.dev.team-b, root.prod; users alice, bob, carol, dave, erin; groups dev, test): some
pods fit, some hit a user limit, a group limit, a queue maximum or an application cap.
Users and groups can be renamed with KQ_SAMPLE_USERS="alice:dev bob:dev carol:test
dave:dev erin:" (user:group,group ...) in that order. Standard library only.
"""

import argparse
import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from kqtest import HttpClient, ci_get, pod_manifest  # noqa: E402

SCHED = os.environ.get("KQ_SCHEDULER_NAME", "kubequota-scheduler")


def users_from_env():
    default = [("alice", ["dev"]), ("bob", ["dev"]), ("carol", ["test"]), ("dave", ["dev"]),
               ("erin", [])]
    spec = os.environ.get("KQ_SAMPLE_USERS")
    if not spec:
        return default
    out = []
    for item in spec.split():
        u, _, gs = item.partition(":")
        out.append((u, [g for g in gs.split(",") if g]))
    while len(out) < len(default):
        out.append(default[len(out)])
    return out


def workload():
    """(pod name, user index, queue, app, cpu, memory, note)"""
    return [
        ("alice-train-1", 0, "root.dev.team-a", "alice-train", "1", "1Gi", "fits"),
        ("alice-train-2", 0, "root.dev.team-a", "alice-train", "500m", "1Gi",
         "fills alice's 1500m in team-a"),
        ("alice-train-3", 0, "root.dev.team-a", "alice-train", "500m", "1Gi",
         "over alice's team-a limit"),
        ("alice-notebook", 0, "root.dev.team-b", "alice-nb", "500m", "512Mi",
         "alice's 2 cores in dev are now used"),
        ("bob-web-1", 1, "root.prod", "bob-web", "2", "4Gi", "fits"),
        ("bob-web-2", 1, "root.prod", "bob-web", "2", "2Gi", "fills bob's 4 cores in prod"),
        ("bob-web-3", 1, "root.prod", "bob-web", "1", "1Gi", "over bob's prod limit"),
        ("bob-dev", 1, "root.dev.team-b", "bob-dev", "1", "1Gi", "the * user limit in dev"),
        ("dave-b", 3, "root.dev.team-b", "dave-b", "1", "1Gi", "team-b max is 2 cores"),
        ("dave-a", 3, "root.dev.team-a", "dave-a", "1", "1Gi", "fills the dev group's 4 cores"),
        ("carol-1", 2, "root.dev.team-a", "carol-1", "1", "1Gi", "carol's group: the * group"),
        ("carol-2", 2, "root.dev.team-a", "carol-2", "500m", "512Mi", "over carol's 1 core"),
        ("erin-1", 4, "root.default", "erin-1", "1500m", "1Gi", "fits root.default"),
        ("erin-2", 4, "root.default", "erin-2", "1", "1Gi", "root.default max is 2 cores"),
    ]


class Driver:
    def __init__(self, api, kq, ns):
        self.api, self.kq, self.ns = api, kq, ns

    def nodes(self):
        r = self.api.get("/api/v1/nodes")
        if r.status != 200:
            raise SystemExit("sample: cannot list nodes: %s" % r)
        return [n["metadata"]["name"] for n in r.json()["items"]] or ["node-1"]

    def create(self, pod):
        path = "/api/v1/namespaces/%s/pods" % self.ns
        name = pod["metadata"]["name"]
        r = self.api.get("%s/%s" % (path, name))
        if r.status == 200:
            return r.json(), False
        r = self.api.post(path, pod)
        if r.status != 201:
            raise SystemExit("sample: creating %s failed: %s" % (name, r))
        return r.json(), True

    def schedule(self, pod, nodes):
        if pod["spec"].get("nodeName"):
            return True, "already bound to %s" % pod["spec"]["nodeName"]
        cached = {k: v for k, v in pod.items() if k not in ("kind", "apiVersion")}
        r = self.kq.post("/scheduler/filter", {"Pod": cached, "Nodes": None, "NodeNames": nodes})
        if r.status != 200:
            return False, "filter failed: HTTP %d %s" % (r.status, r.text[:200])
        res = r.json()
        left = ci_get(res, "NodeNames") or []
        if ci_get(res, "Error"):
            return False, ci_get(res, "Error")
        if not left:
            for k in ("FailedAndUnresolvableNodes", "FailedNodes"):
                m = ci_get(res, k)
                if m:
                    return False, next(iter(m.values()))
            return False, "no node left"
        md = pod["metadata"]
        r = self.kq.post("/scheduler/bind", {"PodName": md["name"], "PodNamespace": md["namespace"],
                                             "PodUID": md["uid"], "Node": left[0]})
        if r.status != 200:
            return False, "bind failed: HTTP %d %s" % (r.status, r.text[:200])
        err = ci_get(r.json(), "Error")
        return (False, err) if err else (True, "bound to %s" % left[0])


GATE = "kubequota.io/admission"


def gated(pod):
    return any(g.get("name") == GATE for g in pod["spec"].get("schedulingGates") or [])


def waiting_view(kq, partition="default"):
    """{pod name: (queue, position or None, length of the queue's line, reason)} from the
    admission gate's view."""
    r = kq.get("/ws/v1/partition/%s/gating/waiting" % partition)
    if r.status != 200:
        raise SystemExit("sample: GET gating/waiting: HTTP %d %s" % (r.status, r.text[:200]))
    out = {}
    for q in r.json():
        line = max([p["position"] or 0 for p in q["pods"]] or [0])
        for p in q["pods"]:
            out[p["name"]] = (q["queue"], p["position"], line, p["reason"])
    return out


NEXT_PASS = "waiting for the admission controller's next pass"


def settle(d, kq, names, timeout=15.0):
    """Waits until the gate has decided every pod once: each is released (ungated) or waits
    with a reason of its own. Returns (pods by name, waiting view)."""
    deadline = time.monotonic() + timeout
    while True:
        pods = {n: d.api.get("/api/v1/namespaces/%s/pods/%s" % (d.ns, n)).json() for n in names}
        view = waiting_view(kq)
        undecided = [n for n in names if gated(pods[n]) and (n not in view or view[n][3] == NEXT_PASS)]
        if not undecided or time.monotonic() > deadline:
            return pods, view
        time.sleep(0.2)


def run_gated(d, kq, nodes, users):
    print("Creating %d pods behind the admission gate %s, as kubequota's webhook creates them "
          "(scheduler %s):" % (len(workload()), GATE, SCHED), flush=True)
    rows = []
    for name, ui, queue, app, cpu, mem, note in workload():
        user, groups = users[ui]
        d.create(pod_manifest(name, ns=d.ns, user=user, groups=groups, cpu=cpu, memory=mem, queue=queue,
                              app=app, scheduler=SCHED, gates=(GATE,)))
        rows.append((name, "%s%s" % (user, "(%s)" % ",".join(groups) if groups else ""), queue, cpu, mem, note))
    pods, view = settle(d, kq, [r[0] for r in rows])
    print("Released by kubequota, then scheduled like kube-scheduler would (filter, bind):", flush=True)
    bound = 0
    for name, who, queue, cpu, mem, note in rows:
        if gated(pods[name]):
            continue
        ok, why = d.schedule(pods[name], nodes)
        bound += ok
        print("  %-6s %-15s %-12s %-16s cpu %-5s mem %-6s %s" % (
            "BOUND" if ok else "DENIED", name, who, queue, cpu, mem, why if not ok else "[%s] %s" % (note, why)),
            flush=True)
    waiting = [r for r in rows if gated(pods[r[0]])]
    order = sorted(waiting, key=lambda r: (view.get(r[0], ("", None))[0], view.get(r[0], ("", None))[1] or 10**9))
    print("Waiting behind the gate, in the order kubequota will release them "
          "(GET /ws/v1/partition/default/gating/waiting):", flush=True)
    for name, who, queue, cpu, mem, note in order:
        _, pos, line, reason = view.get(name, (queue, None, 0, NEXT_PASS))
        place = "%d of %d" % (pos, line) if pos else "never"
        print("  %-6s %-15s %-12s %-16s cpu %-5s mem %-6s %-8s %s" % ("WAITS", name, who, queue, cpu, mem, place,
                                                                       reason), flush=True)
    print("%d bound, %d waiting (when a pod ends, the next in its queue's line that fits is released)"
          % (bound, len(waiting)), flush=True)


def fmt_res(res):
    if not res:
        return "-"
    parts = []
    for k, v in sorted(res.items()):
        if k == "cpu":
            parts.append("cpu %s" % ("%gm" % v if v % 1000 else "%d" % (v // 1000)))
        elif k in ("memory", "ephemeral-storage") and v:
            parts.append("%s %s" % (k, "%gGi" % (v / 2**30) if v >= 2**30 else "%gMi" % (v / 2**20)))
        else:
            parts.append("%s %s" % (k, v))
    return ", ".join(parts)


def walk(node, parent=""):
    name = ci_get(node, "queuePath") or ci_get(node, "queuename") or ci_get(node, "queueName") or "?"
    path = name if (name.startswith("root") or not parent) else parent + "." + name
    yield path, node
    for c in ci_get(node, "children") or []:
        yield from walk(c, path)


def show(kq, partition="default"):
    def get(path):
        r = kq.get("/ws/v1/partition/%s/%s" % (partition, path))
        if r.status != 200:
            print("  (GET %s: HTTP %d %s)" % (path, r.status, r.text[:200]))
            return []
        v = r.json()
        return v if isinstance(v, list) else [v]

    print("\nUsers (GET /ws/v1/partition/%s/usage/users)" % partition)
    for u in get("usage/users"):
        print("  %s" % ci_get(u, "userName"))
        for path, n in walk(ci_get(u, "queues") or {}):
            use = {k: v for k, v in (ci_get(n, "resourceUsage") or {}).items() if v}
            if not use:
                continue
            mx = ci_get(n, "maxResources")
            apps = ci_get(n, "runningApplications") or []
            print("    %-22s used %-22s max %-22s apps %d%s" % (
                path, fmt_res(use), fmt_res(mx), len(apps),
                "/%d" % ci_get(n, "maxApplications") if ci_get(n, "maxApplications") else ""))
    print("\nGroups (GET /ws/v1/partition/%s/usage/groups)" % partition)
    for g in get("usage/groups"):
        print("  %s  users: %s" % (ci_get(g, "groupName"), ", ".join(ci_get(g, "users") or [])))
        for path, n in walk(ci_get(g, "queues") or {}):
            use = {k: v for k, v in (ci_get(n, "resourceUsage") or {}).items() if v}
            if use:
                print("    %-22s used %-22s max %s" % (path, fmt_res(use),
                                                        fmt_res(ci_get(n, "maxResources"))))
    print("\nQueues (GET /ws/v1/partition/%s/queues)" % partition)
    for q in get("queues"):
        for path, n in walk(q):
            print("  %-24s allocated %-22s max %-22s pending %s" % (
                path, fmt_res(ci_get(n, "allocatedResource")), fmt_res(ci_get(n, "maxResource")),
                fmt_res(ci_get(n, "pendingResource"))))


def main(argv=None):
    ap = argparse.ArgumentParser(description="kubequota demo workload")
    ap.add_argument("--api", help="API server (simulator) URL")
    ap.add_argument("--token")
    ap.add_argument("--ca", required=True, help="CA for both servers")
    ap.add_argument("--kubequota", required=True, help="kubequota URL")
    ap.add_argument("--namespace", default="default")
    ap.add_argument("--show", action="store_true", help="only print the usage view")
    ap.add_argument("--rest-token-file", help="bearer token for kubequota's usage view")
    ap.add_argument("--gate", action="store_true", help="create the pods behind the admission gate")
    args = ap.parse_args(argv)
    rest_token = None
    if args.rest_token_file:
        with open(args.rest_token_file) as f:
            rest_token = f.read().strip()
    kq = HttpClient(args.kubequota, ca=args.ca, token=rest_token)
    if not args.show:
        if not args.api:
            ap.error("--api is required unless --show")
        api = HttpClient(args.api, ca=args.ca, token=args.token)
        d = Driver(api, kq, args.namespace)
        nodes = d.nodes()
        users = users_from_env()
        if args.gate:
            run_gated(d, kq, nodes, users)
            time.sleep(0.3)  # let the watch deliver the bindings before printing the view
            show(kq)
            return 0
        print("Scheduling %d pods on nodes %s (scheduler %s):" % (len(workload()), ", ".join(nodes),
                                                                    SCHED))
        bound = denied = 0
        for name, ui, queue, app, cpu, mem, note in workload():
            user, groups = users[ui]
            pod, _ = d.create(pod_manifest(name, ns=args.namespace, user=user, groups=groups,
                                           cpu=cpu, memory=mem, queue=queue, app=app,
                                           scheduler=SCHED))
            ok, why = d.schedule(pod, nodes)
            bound += ok
            denied += not ok
            who = "%s%s" % (user, "(%s)" % ",".join(groups) if groups else "")
            print("  %-6s %-15s %-12s %-16s cpu %-5s mem %-6s %s" % (
                "BOUND" if ok else "DENIED", name, who, queue, cpu, mem,
                why if not ok else "[%s] %s" % (note, why)))
        print("%d bound, %d denied" % (bound, denied))
        time.sleep(0.3)  # let the watch deliver the bindings before printing the view
    show(kq)
    return 0


if __name__ == "__main__":
    # Ctrl-C in `make run` reaches kubequota in the same instant: a request in flight may fail
    # with a reset before Python raises KeyboardInterrupt. Die of SIGINT at once instead, so
    # that run.sh (bash waits for its foreground child) sees it and runs its INT trap.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # Ctrl-C in `make run`: its script stops everything, quietly
        sys.exit(130)
    except BrokenPipeError:
        sys.exit(141)
