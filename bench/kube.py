#!/usr/bin/python3
"""End-to-end scheduling throughput on the real control plane (issue 26), a bench row (never a
test): kube-scheduler alone against kube-scheduler with kubequota in the path.

  python3 bench/kube.py [--nodes 500,5000] [--pods 10000] [--backlog | --rate 0]
                        [--rows 1,2,3,4,5,6,7] [--abba 3] [--fresh-plane] [--mem-pods 150000]
                        [--threads 16] [--keep] [--kq-arg FLAG] [--perf PREFIX] [--json FILE]

A row is N, or N:ARG+ARG for a variant whose kubequota gets those extra arguments, or
N:bin=PATH for another kubequota binary (before/after a change in the same run), or N:nobind
for the extender without its bindVerb (kube-scheduler binds; kubequota filters and counts from
its watch), N:split for the extender as two entries (filter and preempt; bind) or
N:nofilter for the extender without its filterVerb (with the gate, row 4: the release and
bind decide; 4:nofilter+nobind: the gate's release alone decides and kube-scheduler binds),
N:nobatch for kube-scheduler with its OpportunisticBatching feature off (as it turns it off by
itself for a profile with an extender), N:tls for the extender (kubequota's, rows 2-5, or the
null one, row 6) over HTTPS, as the chart served it before scheduler.extender.tls defaulted
to false, or 1:kq for kube-scheduler alone with kubequota running beside it (watching
pods and nodes, never called), words joined by +, e.g.
--rows "1,2:--scheduler-threads=8,2,2:nobind,4,4:bin=/tmp/new/kubequota".

For each node count one control plane (tests/cluster/cluster.py: etcd, kube-apiserver,
kube-controller-manager, kwok, kube-scheduler 1.37, all on loopback) is started and every
row runs in it, one after the other, each with a fresh kube-scheduler (and a fresh kubequota
where it has one) and its own namespace, so all rows of one node count share one run:

  1 sched-only   kube-scheduler alone: the chart's profile and clientConnection, no extender
  2 extender     kubequota as the chart installs it by default: its extender (filter, bind,
                 preempt; plain HTTP on loopback since issue 40), limits never hit
  3 users        10,000 users, 1,000 groups, 1,000 leaf queues three levels deep; a fifth of
                 the leaves cap pods at half of what they get: 10% of the pods are denied
                 (they stay pending until others end; the row's throughput counts the others; in the one
                 full run every pod of the capped leaves stayed pending: BENCHMARKS.md)
  4 gate         row 2 with the admission gate on (mutating webhook + release by the leader)
  5 elastic      an elastic quota tree: 10 parents x 100 leaf groups with min and max
  6 null         the null extender (bench/null_extender.py, its own process): filter only,
                 every node passes, no bind; the physical limit of the extender path.
                 6:bind adds the bind verb (the Binding POSTed with kube-scheduler's own
                 token): the floor of an extender that binds, as kubequota's does
  7 gate-only    the chart's scheduler.extender.mode gate-only: the gate's webhooks and
                 release (row 4's) with a profile that has no extender and no preemption

Order and drift. Rows run in the order given, in one control plane. --abba N runs them N
times as ABBA rounds (forward then backward: 1 2 6 6 2 1), and each row's ratio to the first
of --rows is the mean of its two runs over the base row's two in the same round: a baseline
that drifts linearly through a round cannot bias it; the median and min-max of the rounds
are printed. --fresh-plane starts a new control plane (and nodes) for every row instead.
Each row also reports kube-scheduler's CPU per bound pod and its serial cycle
(scheduler_scheduling_algorithm_duration_seconds, the extender's filter call included): on
a 2-core shared host pods/s is a CPU share, these two are what a scheduler with its own
cores sees.

Pods (cpu 100m, memory 128Mi) are created by --threads keep-alive HTTPS clients at --rate pods/s
(0: as fast as they go); a watch records when each pod is first seen with spec.nodeName.
Throughput is bound pods / (last bound - first create); latency is create (request sent) to
bound (watch event received). --backlog creates every pod first and only then starts
kube-scheduler (its scheduling capacity, as upstream's SchedulingBasic measures it):
throughput and latency then count from the first binding. kubequota's peak RSS is its VmHWM at the end of the row (a fresh
process per row). --mem-pods N then starts one more kubequota after creating N pods already
bound (spec.nodeName set, to a node kwok does not manage, tolerating everything) and reports its
RSS when ready: the LIST at start.

The same client settings in every row: kube-scheduler clientConnection qps/burst --sched-qps
(default 5000/5000, not the 50/100 default, which caps binding at 50 pods/s); kubequota has no
client rate limit. kwok heartbeats each Node through a Lease of --node-lease seconds (40, a
kubelet's), renewed every quarter of it. Before each row after the first, the bench waits (up
to --settle s) until the host is as idle as before the first row: kwok and the API server work
off a row's deleted pods for minutes after the last DELETE. Then the idle control plane's CPU is
measured (--idle-seconds), and each row reports the host's busy cores and CPU per bound pod
while it schedules: at 5,000 nodes the Lease renewals alone keep both cores of this host busy.
"""

import argparse
import copy
import http.client
import json
import os
import ssl
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "tests", "cluster"))

import cluster as clus  # noqa: E402
import yaml  # noqa: E402

SCHED = clus.SCHED


# ---------------------------------------------------------------- clients

class Conn:
    """One keep-alive HTTPS connection to the API server as the admin."""

    def __init__(self, c):
        self.c = c
        self.ctx = ssl.create_default_context(cafile=c.certs["ca"])
        self.h = None
        self.hdr = {"Authorization": "Bearer " + clus.USERS["admin"][0], "Accept": "application/json",
                    "Content-Type": "application/json"}

    def req(self, method, path, body=None):
        for attempt in range(3):
            try:
                if self.h is None:
                    self.h = http.client.HTTPSConnection("127.0.0.1", self.c.port, context=self.ctx, timeout=60)
                self.h.request(method, path, body=body, headers=self.hdr)
                r = self.h.getresponse()
                data = r.read()
                return r.status, data
            except (OSError, http.client.HTTPException):
                if self.h is not None:
                    self.h.close()
                self.h = None
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")


def parallel(c, n_threads, items, fn, rate=0.0):
    """fn(conn, i, item) for every item on n_threads keep-alive clients; with rate > 0, item i
    is not sent before t0 + i / rate. Returns the start time t0."""
    lock = threading.Lock()
    nxt = [0]
    errors = []
    t0 = time.monotonic()

    def worker():
        conn = Conn(c)
        while True:
            with lock:
                i = nxt[0]
                nxt[0] += 1
            if i >= len(items) or errors:
                return
            if rate > 0:
                d = t0 + i / rate - time.monotonic()
                if d > 0:
                    time.sleep(d)
            try:
                fn(conn, i, items[i])
            except Exception as e:  # reported once the pool ends
                errors.append(e)
                return
    ts = [threading.Thread(target=worker, daemon=True) for _ in range(n_threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if errors:
        raise errors[0]
    return t0


class BoundWatch:
    """Watches the pods of one namespace and records when each is first seen bound."""

    def __init__(self, c, ns):
        self.c, self.ns = c, ns
        self.bound = {}
        self.lock = threading.Lock()
        self.stop = False
        st, data = Conn(c).req("GET", "/api/v1/namespaces/%s/pods?limit=1" % ns)
        self.rv = json.loads(data)["metadata"]["resourceVersion"]
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def run(self):
        ctx = ssl.create_default_context(cafile=self.c.certs["ca"])
        while not self.stop:
            h = http.client.HTTPSConnection("127.0.0.1", self.c.port, context=ctx, timeout=600)
            h.request("GET", "/api/v1/namespaces/%s/pods?watch=1&resourceVersion=%s&timeoutSeconds=3600"
                      % (self.ns, self.rv), headers={"Authorization": "Bearer " + clus.USERS["admin"][0]})
            r = h.getresponse()
            while not self.stop:
                line = r.readline()
                if not line:
                    break
                now = time.monotonic()
                ev = json.loads(line)
                o = ev["object"]
                if ev["type"] == "ERROR":
                    raise AssertionError("watch: %s" % o)
                self.rv = o["metadata"]["resourceVersion"]
                if o.get("spec", {}).get("nodeName"):
                    name = o["metadata"]["name"]
                    with self.lock:
                        self.bound.setdefault(name, now)
            h.close()

    def count(self):
        with self.lock:
            return len(self.bound)


# ---------------------------------------------------------------- process memory

def proc_kb(pid, key):
    try:
        with open("/proc/%d/status" % pid) as f:
            for ln in f:
                if ln.startswith(key + ":"):
                    return int(ln.split()[1])
    except OSError:
        pass
    return 0


class RssSampler:
    """Peak RSS of named processes, sampled every half second (VmHWM is exact for kubequota;
    the samples are for the others, which live through several rows)."""

    def __init__(self, pids):
        self.pids, self.peak, self.stop = pids, {k: 0 for k in pids}, False
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def run(self):
        while not self.stop:
            for k, pid in list(self.pids.items()):
                self.peak[k] = max(self.peak.get(k, 0), proc_kb(pid, "VmRSS"))
            time.sleep(0.5)

    def end(self):
        self.stop = True
        self.t.join()
        return self.peak


# ---------------------------------------------------------------- configurations

def q_open():
    """Limits that are never hit: one queue, everybody may submit."""
    return yaml.safe_dump({"partitions": [{"name": "default", "queues": [{
        "name": "root", "submitacl": "*", "queues": [{"name": "bench"}]}]}]})


def q_users(npods):
    """root -> 10 -> 100 -> 1,000 leaf queues; 1,000 groups (g<k>, one per leaf, with a group
    limit there) and 10,000 users (u<j>, in group g<j % 1000>, a wildcard user limit on root so
    every user is tracked). Every fifth leaf caps pods at half of its share: 10% denied."""
    per_leaf = max(1, npods // 1000)
    l1 = []
    for a in range(10):
        l2 = []
        for b in range(10):
            leaves = []
            for cc in range(10):
                k = a * 100 + b * 10 + cc
                leaf = {"name": "q%d" % k,
                        "limits": [{"limit": "group g%d" % k, "groups": ["g%d" % k],
                                    "maxresources": {"vcore": 1000000}, "maxapplications": 1000000}]}
                if k % 5 == 0:
                    leaf["resources"] = {"max": {"pods": per_leaf // 2}}
                leaves.append(leaf)
            l2.append({"name": "b%d" % b, "parent": True, "queues": leaves})
        l1.append({"name": "a%d" % a, "parent": True, "queues": l2})
    return yaml.safe_dump({"partitions": [{"name": "default", "queues": [{
        "name": "root", "submitacl": "*",
        "limits": [{"limit": "every user", "users": ["*"], "maxresources": {"pods": 1000000},
                    "maxapplications": 1000000}],
        "queues": l1}]}]})


def q_elastic():
    """10 parents x 100 leaf quota groups, each with a min (guaranteed) and a max."""
    parents = []
    for a in range(10):
        leaves = [{"name": "e%d" % (a * 100 + b),
                   "resources": {"guaranteed": {"vcore": 2, "memory": "4Gi"},
                                 "max": {"vcore": 1000, "memory": "4000Gi"}}} for b in range(100)]
        parents.append({"name": "p%d" % a, "parent": True, "queues": leaves})
    return yaml.safe_dump({"partitions": [{"name": "default", "queues": [{
        "name": "root", "submitacl": "*", "queues": parents}]}]})


def pod_template(c, scheduler=SCHED):
    return c.pod_body("X", cpu="100m", memory="128Mi", scheduler=scheduler)


def pod_json(tpl, name, labels=None, annotations=None, node=None):
    p = copy.deepcopy(tpl)
    p["metadata"]["name"] = name
    if labels:
        p["metadata"]["labels"] = labels
    if annotations:
        p["metadata"]["annotations"] = annotations
    if node:
        p["spec"]["nodeName"] = node
        p["spec"]["tolerations"] = [{"operator": "Exists"}]
    return json.dumps(p).encode()


ROWS = {1: "sched-only", 2: "extender", 3: "users", 4: "gate", 5: "elastic", 6: "null", 7: "gate-only"}

# chart values of the rows and variants that are not the chart's default (render_chart)
TLS_VALUES = {"scheduler": {"extender": {"tls": True}}}
GATE_ONLY_VALUES = {"scheduler": {"extender": {"mode": "gate-only"}}}


def row_pods(row, tpl, n):
    out = []
    for i in range(n):
        name = "p%d" % i
        if row == 3:
            leaf, user = i % 1000, i % 10000
            out.append(pod_json(tpl, name, labels={"kubequota.io/queue": "root.a%d.b%d.q%d" % (
                leaf // 100, leaf // 10 % 10, leaf)}, annotations={"kubequota.io/user-info": json.dumps(
                    {"user": "u%d" % user, "groups": ["g%d" % (user % 1000)]})}))
        elif row == 5:
            leaf = i % 1000
            out.append(pod_json(tpl, name, labels={"kubequota.io/queue": "root.p%d.e%d" % (leaf // 100, leaf)}))
        elif row in (2, 4, 7):
            out.append(pod_json(tpl, name, labels={"kubequota.io/queue": "root.bench"}))
        else:
            out.append(pod_json(tpl, name))
    return out


def expected_bound(row, n):
    if row != 3:
        return n
    per_leaf = max(1, n // 1000)
    denied = 0
    for k in range(1000):
        cnt = len(range(k, n, 1000))
        if k % 5 == 0:
            denied += max(0, cnt - per_leaf // 2)
    return n - denied


# ---------------------------------------------------------------- one run

class Bench:
    def __init__(self, a, nodes):
        self.a, self.nodes = a, nodes
        self.c = clus.Cluster(nodes=0, keep=a.keep, node_lease_s=a.node_lease,
                                apiserver_profiling=bool(a.pprof_apiserver))
        self.results = []
        self.idle_first = None  # the host's busy cores before the first row (settle)
        self.idle_cores = 0.0   # ... and before the current row

    def log(self, msg):
        print("[%6.1fs] %s" % (time.monotonic() - T0, msg), flush=True)

    def start(self):
        self.c.start()
        self.log("control plane up; creating %d nodes" % self.nodes)
        names = ["kwok-node-%d" % i for i in range(self.nodes)]

        def mk(conn, i, name):
            st, data = conn.req("POST", "/api/v1/nodes", json.dumps(self.c.node_body(name)).encode())
            if st not in (201, 409):
                raise AssertionError("node %s: %d %s" % (name, st, data[:200]))
        parallel(self.c, 8, names, mk)
        api = self.c.api()

        def ready():
            items = api.get("/api/v1/nodes", timeout=120)["items"]
            rdy = [n for n in items if any(x["type"] == "Ready" and x["status"] == "True"
                                           for x in n.get("status", {}).get("conditions", []))]
            ok = [n for n in rdy if not n["spec"].get("taints")]
            self.log("nodes: %d created, %d Ready, %d Ready and untainted" % (len(items), len(rdy), len(ok)))
            return len(ok) >= self.nodes
        # a LIST of 5,000 Nodes is ~20 MB for the API server: poll slowly
        clus.wait_until(ready, self.a.node_wait or max(600, self.nodes * 0.3), 10,
                        "%d nodes Ready and untainted" % self.nodes)
        self.log("%d nodes ready" % self.nodes)

    def settle(self, seconds, max_wait):
        """measure_idle, first waiting (10-s windows, at most max_wait s) until the host is no
        busier than the run's first idle measurement allows: 1.25x it plus 0.1 core."""
        if seconds <= 0:
            return 0.0
        if self.idle_first is not None and max_wait > 0:
            limit = self.idle_first * 1.25 + 0.1
            t_end = time.monotonic() + max_wait
            while time.monotonic() < t_end:
                busy = host_busy_cores(10)
                if busy <= limit:
                    break
                self.log("settling: host busy %.2f cores, waiting for %.2f" % (busy, limit))
            else:
                self.log("not settled after %.0f s; the row starts on a busier host" % max_wait)
        busy = self.measure_idle(seconds)
        if self.idle_first is None:
            self.idle_first = busy
        return busy

    def measure_idle(self, seconds):
        """The control plane's own load with no pod being created or scheduled (node
        heartbeats through Leases, controllers): cores busy on the host, and per process.
        Every row shares the host with it; at 5,000 nodes it is a large part of two cores."""
        if seconds <= 0:
            return 0.0
        pids = {k: p.pid for k, p in self.c.procs.items()}
        cpu0, t0 = {k: cpu_ticks(p) for k, p in pids.items()}, time.monotonic()
        busy = host_busy_cores(seconds)
        cpu1, dt = {k: cpu_ticks(p) for k, p in pids.items()}, time.monotonic() - t0
        self.log("idle control plane, %d nodes, %.0f s: host busy %.2f of %d cores (%s)" % (
            self.nodes, dt, busy, os.cpu_count(),
            ", ".join("%s %.2f" % (k, (cpu1[k] - cpu0[k]) / CLK / dt) for k in sorted(pids))))
        return busy

    # scheduler-side variant words (run_row): the extender's entries as the row uses them;
    # tls: the extender (kubequota's or the null one) over HTTPS, as the chart did before
    # scheduler.extender.tls defaulted to false
    SCHED_WORDS = ("nobind", "nofilter", "split", "nobatch", "tls", "bind")

    def sched_config(self, row, variant=(), rendered=None, null_port=None):
        cfg = self.c.scheduler_config(rendered=rendered)
        cfg["clientConnection"]["qps"] = self.a.sched_qps
        cfg["clientConnection"]["burst"] = self.a.sched_qps
        # no leader election: each row's scheduler starts at once, not after the last one's Lease
        cfg["leaderElection"] = {"leaderElect": False}
        if row == 1:
            cfg.pop("extenders", None)
            return cfg
        if row == 7:
            # the chart's gate-only profile: no extender, DefaultPreemption off
            assert "extenders" not in cfg, "gate-only renders no extender"
            return cfg
        (e,) = cfg["extenders"]  # the chart's one entry
        if row == 6:
            # the null extender (bench/null_extender.py): filter only, no bind, no preempt
            tls = "tls" in variant
            cfg["extenders"] = [{
                "urlPrefix": "%s://127.0.0.1:%d/scheduler" % ("https" if tls else "http", null_port),
                "filterVerb": "filter", "nodeCacheCapable": True, "enableHTTPS": tls,
                "httpTimeout": e["httpTimeout"], "ignorable": False}]
            if "bind" in variant:
                cfg["extenders"][0]["bindVerb"] = "bind"
            if tls:
                cfg["extenders"][0]["tlsConfig"] = {"serverName": "%s.%s.svc" % (clus.RELEASE, clus.NAMESPACE),
                                                    "caFile": self.c.certs["ca"]}
            return cfg
        if "nobind" in variant:
            e.pop("bindVerb", None)
        if "nofilter" in variant:
            # no filterVerb: the scheduling cycle never calls kubequota; bind (and, with the
            # gate, the release) still decide every pod. With nobind too (row 4), only the
            # gate's release decides and kube-scheduler binds: the extender entry is left
            # with its preemptVerb, called only when kube-scheduler preempts
            e.pop("filterVerb", None)
        if "split" in variant and "bindVerb" in e and "filterVerb" in e:
            # the same extender as two entries, filter (+ preempt) and bind: kube-scheduler
            # gives each its own HTTP transport, so the serial filter calls keep their idle
            # connection while the parallel binds open theirs
            f, b = copy.deepcopy(e), copy.deepcopy(e)
            f.pop("bindVerb", None)
            for k in ("filterVerb", "preemptVerb", "prioritizeVerb"):
                b.pop(k, None)
            cfg["extenders"] = [f, b]
        return cfg

    def start_sched(self, row, variant=(), rendered=None, null_port=None):
        # nobatch: kube-scheduler without OpportunisticBatching (beta, on by default since
        # 1.35), which it turns off by itself for a profile with any extender
        # (computeBatchablePlugins in pkg/scheduler/framework/runtime/framework.go)
        args = ["--feature-gates=OpportunisticBatching=false"] if "nobatch" in variant else []
        sched = self.c.start_scheduler(config=self.sched_config(row, variant, rendered, null_port), extra_args=args)
        time.sleep(5)   # informers synced (no Lease to wait for)
        return sched

    def start_null(self, tls, bind=False):
        """bench/null_extender.py as its own process (its CPU is measured apart); bind: with
        the bind verb, POSTing Bindings with kube-scheduler's own ServiceAccount token."""
        import socket
        port = clus.free_port()
        argv = [sys.executable, os.path.join(HERE, "null_extender.py"), "--listen", "127.0.0.1:%d" % port]
        if bind:
            tf = self.c.path("null-extender.token")
            with open(tf, "w") as f:
                f.write(self.c.sa_token())
            argv += ["--bind-api", "https://127.0.0.1:%d" % self.c.port, "--bind-ca", self.c.certs["ca"],
                     "--bind-token-file", tf]
        if tls:
            argv += ["--tls-cert", self.c.certs["server"], "--tls-key", self.c.certs["server_key"]]
        p = self.c._spawn("null-extender", argv)

        def up():
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return True
            except OSError:
                return False
        clus.wait_until(up, 30, 0.1, "null extender listening")
        return p, port

    def profile_scheduling(self, sched, row, tag, perfs):
        """The profiles asked for, from the moment kube-scheduler schedules the row: perf of
        kube-scheduler (appended to perfs), its pprof and execution trace, the API server's pprof."""
        a, k = self.a, len(self.results)
        if a.perf:
            perfs.append(perf_start(sched.pid, "%s-%d-r%d-sched.data" % (a.perf, self.nodes, row)))
        if a.pprof:
            pprof_start(sched.secure_port, a.pprof_seconds, "%s-%d-%s-%d.pprof" % (a.pprof, self.nodes, tag, k))
        if a.pprof_apiserver:
            pprof_start(self.c.port, a.pprof_seconds, "%s-%d-%s-%d-apiserver.pprof" % (
                a.pprof_apiserver, self.nodes, tag, k))
        if a.trace:
            pprof_start(sched.secure_port, a.trace_seconds, "%s-%d-%s-%d.trace" % (a.trace, self.nodes, tag, k),
                        "trace")

    def run_row(self, row, variant=()):
        c, a = self.c, self.a
        ns = "bench-%d-r%d-%d" % (self.nodes, row, len(self.results))
        c.namespace(ns)
        n = a.pods
        kq = None
        # variant words: bin=PATH (another kubequota binary), SCHED_WORDS (the extender as
        # kube-scheduler calls it), kq (row 1 only: kubequota runs and watches, kube-scheduler
        # does not call it; what its presence alone costs the API server), anything else an
        # extra kubequota argument
        binary = next((v[4:] for v in variant if v.startswith("bin=")), None)
        beside = row == 1 and "kq" in variant
        kq_extra = [v for v in variant if not v.startswith("bin=") and v not in self.SCHED_WORDS + ("kq",)]
        # the chart rendered for this row: gate-only (row 7), the extender over HTTPS (tls),
        # else the cluster's rendering of the chart's defaults (row 2: as the chart installs it)
        rendered = None
        if row == 7:
            rendered = c.render_chart(GATE_ONLY_VALUES)
        elif "tls" in variant and row in (2, 3, 4, 5):
            rendered = c.render_chart(TLS_VALUES)
        null = None
        if row == 6:
            null = self.start_null("tls" in variant, "bind" in variant)
        if (row != 1 or beside) and row != 6:
            qs = {1: q_open, 2: q_open, 4: q_open, 5: q_elastic, 7: q_open}.get(row)
            old = os.environ.get("KQ_BINARY")
            if binary:
                os.environ["KQ_BINARY"] = os.path.abspath(binary)
            try:
                kq = c.start_kubequota(q_users(n) if row == 3 else qs(), extra=list(a.kq_arg) + kq_extra,
                                       rendered=rendered)
            finally:
                if binary:
                    if old is None:
                        os.environ.pop("KQ_BINARY", None)
                    else:
                        os.environ["KQ_BINARY"] = old
            if row in (4, 7):
                c.apply_webhooks()
        null_port = null[1] if null else None
        sched = None
        if not a.backlog:
            sched = self.start_sched(row, variant, rendered, null_port)
        pids = {"kube-apiserver": c.procs["kube-apiserver"].pid,
                "etcd": c.procs["etcd"].pid, "kwok": c.procs["kwok"].pid}
        if kq:
            pids["kubequota"] = kq.pid
        if null:
            pids["null-extender"] = null[0].pid
        if sched:
            pids["kube-scheduler"] = sched.pid
        perfs = []
        if kq and a.perf:
            perfs.append(perf_start(kq.pid, "%s-%d-r%d.data" % (a.perf, self.nodes, row)))
        tag = "r%d%s" % (row, "".join("-" + v.replace("/", "_").replace("=", "") for v in variant))
        if sched:
            self.profile_scheduling(sched, row, tag, perfs)
        bodies = row_pods(row, pod_template(c), n)
        want = expected_bound(row, n)
        w = BoundWatch(c, ns)
        rss = RssSampler(pids)
        created = [0.0] * n
        cpu0 = {k: cpu_ticks(p) for k, p in pids.items()}
        apf0 = apf_snapshot(c)
        path = "/api/v1/namespaces/%s/pods" % ns

        def mk(conn, i, body):
            created[i] = time.monotonic()
            st, data = conn.req("POST", path, body)
            if st != 201:
                raise AssertionError("pod %d: %d %s" % (i, st, data[:300]))
        # before each row: the host drifts between rows (run K: the last row 1 of a 5,000-node
        # run at 0.69x of the first). After a row's pods are deleted, kwok and the API server
        # keep working off the deletions for minutes (run N: 1.8 busy cores at 500 nodes, where
        # the first row started at 0.3), so wait until the idle load is back near the run's
        # first measurement (--settle seconds at most), then record it
        self.idle_cores = self.settle(a.idle_seconds, a.settle)
        self.log("row %d (%s): creating %d pods" % (row, ROWS[row], n))
        host0, t_host0 = host_ticks(), time.monotonic()
        t0 = parallel(c, a.threads, bodies, mk, a.rate)
        t_created = time.monotonic()
        if a.backlog:
            # every pod exists (and, with the gate, was released) before the scheduler starts:
            # throughput and latency count from the scheduler's start
            if row in (4, 7):
                clus.wait_until(lambda: all(not p.get("spec", {}).get("schedulingGates") for p in
                                            c.api().get(path, timeout=120)["items"]), 600, 1, "gates released")
            sched = self.start_sched(row, variant, rendered, null_port)
            pids["kube-scheduler"] = sched.pid
            self.profile_scheduling(sched, row, tag, perfs)
            cpu0["kube-scheduler"] = 0
            host0, t_host0 = host_ticks(), time.monotonic()
        self.log("row %d: created in %.1fs (%.0f/s); %d bound" % (row, t_created - t0, n / (t_created - t0),
                                                                  w.count()))
        last, last_t = -1, time.monotonic()
        while w.count() < want:
            time.sleep(0.5)
            k = w.count()
            if k != last:
                last, last_t = k, time.monotonic()
            elif time.monotonic() - last_t > a.stall:
                self.log("row %d: stalled at %d of %d bound" % (row, k, want))
                break
        cpu1 = {k: cpu_ticks(p) for k, p in pids.items()}
        apf1 = apf_snapshot(c)
        host1, t_host1 = host_ticks(), time.monotonic()
        for perf in perfs:
            perf.send_signal(2)
            perf.wait()
        peak = rss.end()
        if kq:
            peak["kubequota"] = proc_kb(kq.pid, "VmHWM")
        if row == 3:
            time.sleep(2)   # the denied stay pending: count what bound beyond the expected
        w.stop = True
        names = ["p%d" % i for i in range(n)]
        if a.backlog and w.bound:
            # from the first binding (the scheduler's start-up is not scheduling)
            t0 = min(w.bound.values())
            created = [t0] * n
        lat = sorted(w.bound[x] - created[i] for i, x in enumerate(names) if x in w.bound)
        tb = max(w.bound.values()) if w.bound else t0
        res = {"nodes": self.nodes, "row": row, "name": ROWS[row] + "".join(" " + v for v in variant), "pods": n, "bound": len(w.bound),
               "want": want, "create_s": t_created - t0,
               "tput": len(w.bound) / (tb - t0) if w.bound else 0.0,
               "p50": pct(lat, 50), "p99": pct(lat, 99),
               "rss_mb": {k: v / 1024.0 for k, v in peak.items()},
               "cpu_s": {k: (cpu1[k] - cpu0[k]) / CLK for k in pids}}
        # the whole host's CPU while pods were being scheduled (from the scheduler's start with
        # --backlog, else from the first create), per bound pod, with and without the idle
        # control plane's share: the row's throughput is about (cores - idle) / that
        busy = (host1 - host0) / CLK
        dur = t_host1 - t_host0
        if w.bound:
            res["host"] = {"busy_cores": busy / dur, "cpu_ms_per_pod": busy * 1e3 / len(w.bound),
                           "work_ms_per_pod": max(0.0, busy - self.idle_cores * dur) * 1e3 / len(w.bound)}
        # kube-scheduler's own CPU per bound pod: on a shared 2-core host throughput is a CPU
        # share; this (and the serial cycle below) is what a scheduler with its own cores sees
        if w.bound and "kube-scheduler" in res["cpu_s"]:
            res["sched_cpu_ms_per_pod"] = res["cpu_s"]["kube-scheduler"] * 1e3 / len(w.bound)
        res["apf"] = apf_delta(apf0, apf1)
        self.results.append(res)
        self.log("row %d: %s" % (row, fmt_row(res, self.base())))
        self.log("row %d: API priority and fairness (per level: rejected, executed, mean queue wait): %s" % (
            row, ", ".join("%s %d/%d/%.1f ms" % (pl, v["rejected"], v["executed"], v["mean_wait_ms"])
                           for pl, v in res["apf"].items())))
        if "host" in res:
            self.log("row %d: host busy %.2f cores while scheduling; %.2f cpu-ms per bound pod, %.2f beyond the "
                     "idle control plane's %.2f cores" % (row, res["host"]["busy_cores"], res["host"]["cpu_ms_per_pod"],
                                                         res["host"]["work_ms_per_pod"], self.idle_cores))
        if kq:
            # kubequota's own view of the row: per-route latency histograms and counters
            m = c.kubequota_client().get("/metrics")
            text = m.body.decode() if isinstance(m.body, bytes) else str(m.body)
            res["kq_means_ms"] = route_means(text)
            self.log("row %d: kubequota mean per route: %s" % (row, res["kq_means_ms"]))
            # each is a TLS handshake on both sides (kube-scheduler keeps 2 idle connections)
            res["kq_tls_connections"] = tls_connections(text)
            res["kq_connections"] = tls_connections(text, "kubequota_connections_total")
            self.log("row %d: connections accepted by kubequota: TLS %s, all %s" % (
                row, res["kq_tls_connections"], res["kq_connections"]))
        # kube-scheduler's own view: mean time per extension point and per scheduling
        # attempt, attempts by result (retries would show here)
        try:
            res["sched_metrics"] = sched_metrics(sched.secure_port)
            self.log("row %d: kube-scheduler: %s" % (row, res["sched_metrics"]))
            algo = res["sched_metrics"].get("algorithm -")
            if algo:
                res["algo_ms"] = float(algo.split()[0])  # the serial cycle's mean, ms
        except (OSError, ValueError) as e:
            self.log("row %d: kube-scheduler metrics: %s" % (row, e))
        # tear down: scheduler, kubequota, webhooks, pods
        sched.stop()
        c.procs.pop("kube-scheduler", None)
        if kq:
            c.stop_kubequota()
        if null:
            null[0].stop()
            c.procs.pop("null-extender", None)
        if row in (4, 7):
            c.delete_webhooks()
        self.delete_pods(ns, names)
        return res

    def delete_pods(self, ns, names):
        # one DELETE per pod from the client pool: a DeleteCollection is served by one
        # worker in the API server (--delete-collection-workers=1), about 10 pods/s here
        def rm(conn, i, name):
            st, data = conn.req("DELETE", "/api/v1/namespaces/%s/pods/%s?gracePeriodSeconds=0" % (ns, name))
            if st not in (200, 202, 404):
                raise AssertionError("delete %s: %d %s" % (name, st, data[:200]))
        parallel(self.c, self.a.threads, names, rm)
        api = self.c.api()
        clus.wait_until(lambda: not api.get("/api/v1/namespaces/%s/pods?limit=1" % ns, timeout=120)["items"],
                        900, 1, "pods of %s deleted" % ns)

    def base(self):
        for r in self.results:
            if r["row"] == 1 and r["nodes"] == self.nodes:
                return r
        return None

    def mem_row(self, n):
        """kubequota's RSS after a LIST of n existing pods (bound to a node kwok ignores)."""
        c, a = self.c, self.a
        ns = "bench-mem"
        c.namespace(ns)
        api = c.api()
        api.request("POST", "/api/v1/nodes", c.node_body("kq-mem-node", pods="1000000"), ok=(201, 409))
        api.patch("/api/v1/nodes/kq-mem-node", {"metadata": {"annotations": {"kwok.x-k8s.io/node": None}}})
        tpl = pod_template(c)
        self.log("mem: creating %d bound pods" % n)
        t0 = time.monotonic()

        def mk(conn, i, _):
            body = pod_json(tpl, "m%d" % i, labels={"kubequota.io/queue": "root.bench"},
                            annotations={"kubequota.io/user-info": json.dumps(
                                {"user": "u%d" % (i % 10000), "groups": ["g%d" % (i % 1000)]})},
                            node="kq-mem-node")
            st, data = conn.req("POST", "/api/v1/namespaces/%s/pods" % ns, body)
            if st != 201:
                raise AssertionError("pod %d: %d %s" % (i, st, data[:300]))

        # several processes (one Python process tops out near 150 creates/s)
        import multiprocessing
        ctx = multiprocessing.get_context("fork")
        procs = []
        for k in range(a.mem_procs):
            idx = list(range(k, n, a.mem_procs))
            pr = ctx.Process(target=lambda idx=idx: parallel(c, a.threads, idx, lambda conn, _, i: mk(conn, i, None)))
            pr.start()
            procs.append(pr)
        for pr in procs:
            pr.join()
            if pr.exitcode != 0:
                raise AssertionError("a pod creator exited with %s" % pr.exitcode)
        self.log("mem: created in %.0fs" % (time.monotonic() - t0))
        pids = {"kube-apiserver": c.procs["kube-apiserver"].pid, "etcd": c.procs["etcd"].pid}
        t1 = time.monotonic()
        kq = c.start_kubequota(q_open(), wait=False)
        c.wait_kubequota_ready(timeout=600)
        ready_s = time.monotonic() - t1
        # ready means the informers have listed; let the ledger settle a moment
        time.sleep(3)
        res = {"nodes": self.nodes, "row": "mem", "pods": n, "ready_s": ready_s,
               "kq_hwm_mb": proc_kb(kq.pid, "VmHWM") / 1024.0, "kq_rss_mb": proc_kb(kq.pid, "VmRSS") / 1024.0,
               "apiserver_rss_mb": proc_kb(pids["kube-apiserver"], "VmRSS") / 1024.0,
               "etcd_rss_mb": proc_kb(pids["etcd"], "VmRSS") / 1024.0}
        self.log("mem: %s" % json.dumps(res))
        self.results.append(res)
        c.stop_kubequota()
        return res


def pprof_start(port, seconds, out, kind="profile"):
    """kube-scheduler's (or kube-apiserver's) own CPU profile (Go's pprof, with symbols: the
    binaries are stripped, so perf cannot name their functions) for `seconds`, written to `out`
    by a thread; summarize with `go tool pprof -top out`. kind "trace": its execution trace, whose network-blocking profile
    (`go tool trace -pprof=net out`) is the wall time the scheduling cycle waits for the
    extender's answers."""
    def run():
        ctx = ssl.create_default_context()
        ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE  # its self-signed serving cert
        h = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=seconds + 60)
        try:
            h.request("GET", "/debug/pprof/%s?seconds=%d" % (kind, seconds),
                      headers={"Authorization": "Bearer " + clus.USERS["admin"][0]})
            r = h.getresponse()
            data = r.read()
            if r.status == 200:
                with open(out, "wb") as f:
                    f.write(data)
            else:
                print("pprof %s: HTTP %d %s" % (out, r.status, data[:200]), flush=True)
        except OSError as e:
            print("pprof %s: %s" % (out, e), flush=True)
        finally:
            h.close()
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def perf_start(pid, out):
    import subprocess
    return subprocess.Popen(["perf", "record", "-F", "499", "-g", "-p", str(pid), "-o", out],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def route_means(text):
    """Mean latency (ms) and count per endpoint of kubequota_request_duration_seconds."""
    sums, cnts = {}, {}
    for ln in text.splitlines():
        if ln.startswith("kubequota_request_duration_seconds_sum{") or \
                ln.startswith("kubequota_request_duration_seconds_count{"):
            lab = ln[ln.index("{"):ln.index("}") + 1]
            ep = lab.split('endpoint="', 1)[1].split('"', 1)[0] if 'endpoint="' in lab else lab
            v = float(ln.rsplit(" ", 1)[1])
            (sums if "_sum{" in ln else cnts)[ep] = v
    return {k: "%.2f ms x %d" % (1000 * sums[k] / cnts[k], cnts[k]) for k in sums if cnts.get(k)}


def apf_snapshot(c):
    """API Priority and Fairness counters of the API server, per priority level: requests
    rejected (429: queue-full, time-out, concurrency-limit), and the queue wait of the
    requests that executed (sum s, count). Issue 40: the drift between rows was requests of
    the chart's ServiceAccount queued and rejected in workload-low."""
    st, data = Conn(c).req("GET", "/metrics")
    if st != 200:
        return {}
    out = {}
    for ln in data.decode().splitlines():
        if ln.startswith("#") or not ln.startswith("apiserver_flowcontrol_"):
            continue
        name, _, val = ln.rpartition(" ")
        if '{' not in name or 'priority_level="' not in name:
            continue
        pl = name.split('priority_level="', 1)[1].split('"', 1)[0]
        if name.startswith("apiserver_flowcontrol_rejected_requests_total{"):
            k = "rejected"
        elif name.startswith("apiserver_flowcontrol_request_wait_duration_seconds_sum{") and 'execute="true"' in name:
            k = "wait_s"
        elif name.startswith("apiserver_flowcontrol_request_wait_duration_seconds_count{") and 'execute="true"' in name:
            k = "executed"
        else:
            continue
        out[(pl, k)] = out.get((pl, k), 0.0) + float(val)
    return out


def apf_delta(a, b):
    """{priority level: {rejected, executed, mean_wait_ms}} of what happened between two
    snapshots, for the levels with any request."""
    res = {}
    for pl in sorted({k[0] for k in b}):
        d = {k: b.get((pl, k), 0.0) - a.get((pl, k), 0.0) for k in ("rejected", "executed", "wait_s")}
        if d["executed"] > 0 or d["rejected"] > 0:
            res[pl] = {"rejected": int(d["rejected"]), "executed": int(d["executed"]),
                       "mean_wait_ms": round(1e3 * d["wait_s"] / d["executed"], 2) if d["executed"] else 0.0}
    return res


def sched_metrics(port):
    """From kube-scheduler's /metrics: mean ms and count of each extension point's duration
    and of scheduling attempts, and schedule_attempts_total by result."""
    ctx = ssl.create_default_context()
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    h = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=30)
    try:
        h.request("GET", "/metrics", headers={"Authorization": "Bearer " + clus.USERS["admin"][0]})
        r = h.getresponse()
        text = r.read().decode()
        if r.status != 200:
            raise ValueError("HTTP %d" % r.status)
    finally:
        h.close()
    sums, cnts, out = {}, {}, {}
    for ln in text.splitlines():
        if ln.startswith("#"):
            continue
        name, _, val = ln.rpartition(" ")
        for fam, key in (("scheduler_framework_extension_point_duration_seconds", "extension_point"),
                         ("scheduler_scheduling_attempt_duration_seconds", "result")):
            for suf, d in (("_sum{", sums), ("_count{", cnts)):
                if name.startswith(fam + suf):
                    lab = name.split(key + '="', 1)[1].split('"', 1)[0] if key + '="' in name else "-"
                    k = (fam.split("_")[1 if fam.startswith("scheduler_framework") else 2], lab)
                    d[k] = d.get(k, 0.0) + float(val)
        if name.startswith("scheduler_schedule_attempts_total{"):
            out["attempts " + name.split('result="', 1)[1].split('"', 1)[0]] = int(float(val))
        if name in ("scheduler_scheduling_algorithm_duration_seconds_sum",
                    "scheduler_scheduling_algorithm_duration_seconds_count"):
            # the serial cycle's filtering and scoring, the extender's filter call included
            # (schedulingAlgorithm in pkg/scheduler/schedule_one.go)
            (sums if name.endswith("_sum") else cnts)[("algorithm", "-")] = float(val)
        if name.startswith("scheduler_batch_attempts_total{"):
            # OpportunisticBatching: "hint_used" when a pod reused the previous pods' filtering
            # and scoring, "no_hint" when it was filtered and scored over the nodes
            k = "batch " + name.split('result="', 1)[1].split('"', 1)[0]
            out[k] = out.get(k, 0) + int(float(val))
    for k in sums:
        if cnts.get(k):
            out["%s %s" % k] = "%.2f ms x %d" % (1000 * sums[k] / cnts[k], cnts[k])
    return out


def tls_connections(text, family="kubequota_tls_connections_total"):
    """kubequota_tls_connections_total (or another per-listener counter) per listener."""
    out = {}
    for ln in text.splitlines():
        if ln.startswith(family + "{"):
            out[ln.split('listener="', 1)[1].split('"', 1)[0]] = int(float(ln.rsplit(" ", 1)[1]))
    return out


CLK = os.sysconf("SC_CLK_TCK")


def cpu_ticks(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            parts = f.read().rsplit(")", 1)[1].split()
        return int(parts[11]) + int(parts[12])
    except OSError:
        return 0


def host_ticks():
    """Busy clock ticks of the whole host since boot (all CPUs), from /proc/stat."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:9]]
    return sum(v) - v[3] - v[4]  # all but idle and iowait


def host_busy_cores(seconds):
    """How many of the host's cores were busy, on average, over the next `seconds`."""
    h0, t0 = host_ticks(), time.monotonic()
    time.sleep(seconds)
    return (host_ticks() - h0) / CLK / (time.monotonic() - t0)


def pct(v, p):
    if not v:
        return 0.0
    return v[min(len(v) - 1, int(len(v) * p / 100.0))] * 1000.0


def fmt_row(r, base):
    ratio = ""
    if base and r is not base and base["tput"] > 0:
        ratio = " | %.2fx | %.2fx" % (r["tput"] / base["tput"], r["p99"] / base["p99"] if base["p99"] else 0)
    elif r is base:
        ratio = " | 1.00x | 1.00x"
    rss = r["rss_mb"]
    return ("%d nodes | %d %s | %d/%d bound | %.0f pods/s | p50 %.0f ms | p99 %.0f ms%s | sched cpu/pod %s | "
            "cycle %s | kubequota peak %s | cpu s: %s" % (
                r["nodes"], r["row"], r["name"], r["bound"], r["want"], r["tput"], r["p50"], r["p99"], ratio,
                ("%.2f ms" % r["sched_cpu_ms_per_pod"]) if "sched_cpu_ms_per_pod" in r else "-",
                ("%.2f ms" % r["algo_ms"]) if "algo_ms" in r else "-",
                ("%.0f MiB" % rss["kubequota"]) if "kubequota" in rss else "-",
                " ".join("%s=%.0f" % (k, v) for k, v in sorted(r["cpu_s"].items()))))


def abba_order(rows, n):
    """rows in ABBA order n times: forward then backward is one round (A B C C B A), so a
    drift linear in time weighs equally on every row of a round."""
    out = []
    for k in range(n):
        out.append(list(rows) + list(reversed(rows)))
    return out


def median(v):
    v = sorted(v)
    return (v[len(v) // 2] + v[(len(v) - 1) // 2]) / 2.0 if v else 0.0


def abba_summary(results, rows, rounds):
    """Per row (its spelling in --rows): in each round, the mean of its two runs over the mean
    of the base row's (the first of --rows) two runs in the same round; the median of those
    per-round ratios and their spread (min-max). Also kube-scheduler's CPU per pod and serial
    cycle (means over every run of the row), which do not depend on the host's CPU share."""
    keyed = {}
    for r in results:
        if "spec" in r and "round" in r:
            keyed.setdefault((r["spec"], r["round"]), []).append(r)
    base = rows[0]
    lines = ["| row | pods/s (median of rounds) | pods/s ratio to %s: median [min-max] | p99 ratio: median [min-max] "
             "| kube-scheduler CPU per pod | serial cycle (algorithm) | kubequota new connections per pod (TLS) "
             "| API server 429s per run (all levels), mean |" % base, "|---|---|---|---|---|---|---|---|"]
    for spec in rows:
        ratios, p99s, tputs, cpu, algo, conns, tlsc, rej = [], [], [], [], [], [], [], []
        for k in range(rounds):
            mine, ref = keyed.get((spec, k), []), keyed.get((base, k), [])
            if not mine or not ref:
                continue
            t = sum(x["tput"] for x in mine) / len(mine)
            tb = sum(x["tput"] for x in ref) / len(ref)
            p = sum(x["p99"] for x in mine) / len(mine)
            pb = sum(x["p99"] for x in ref) / len(ref)
            tputs.append(t)
            if tb > 0:
                ratios.append(t / tb)
            if pb > 0:
                p99s.append(p / pb)
            for x in mine:
                if "sched_cpu_ms_per_pod" in x:
                    cpu.append(x["sched_cpu_ms_per_pod"])
                if "algo_ms" in x:
                    algo.append(x["algo_ms"])
                if "apf" in x:
                    rej.append(sum(v["rejected"] for v in x["apf"].values()))
                if x.get("kq_connections") and x["bound"]:
                    conns.append(x["kq_connections"].get("scheduler", 0) / x["bound"])
                    tlsc.append(x["kq_tls_connections"].get("scheduler", 0) / x["bound"])

        def spread(v):
            return "%.2f [%.2f-%.2f]" % (median(v), min(v), max(v)) if v else "-"

        def mean(v, fmt):
            return fmt % (sum(v) / len(v)) if v else "-"
        lines.append("| %s | %.0f | %s | %s | %s | %s | %s | %s |" % (
            spec, median(tputs), spread(ratios), spread(p99s), mean(cpu, "%.2f ms"), mean(algo, "%.2f ms"),
            ("%.3f (%.3f)" % (sum(conns) / len(conns), sum(tlsc) / len(tlsc))) if conns else "-",
            mean(rej, "%.0f")))
    return "\n".join(lines)


T0 = time.monotonic()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", default="500")
    ap.add_argument("--pods", type=int, default=10000)
    ap.add_argument("--rate", type=float, default=0.0, help="pods/s created (0: as fast as the clients go)")
    ap.add_argument("--rows", default="1,2,3,4,5")
    ap.add_argument("--threads", type=int, default=16)
    ap.add_argument("--sched-qps", type=int, default=5000)
    ap.add_argument("--node-lease", type=int, default=40,
                    help="seconds of each kwok Node's Lease, renewed every quarter of it (40: a kubelet's; at "
                         "5,000 nodes the renewals alone keep this 2-core host busy)")
    ap.add_argument("--settle", type=float, default=300,
                    help="before each row after the first, wait up to this long for the host to be as idle as "
                         "before the first row (0: do not wait)")
    ap.add_argument("--idle-seconds", type=float, default=20,
                    help="before each row, measure the idle control plane's CPU this long (0: skip)")
    ap.add_argument("--stall", type=float, default=30.0, help="seconds without a new binding that end a row")
    ap.add_argument("--mem-pods", type=int, default=0)
    ap.add_argument("--mem-procs", type=int, default=3, help="creator processes of the memory row")
    ap.add_argument("--json", default=os.path.join(REPO, "build", "bench", "kube-results.json"))
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--node-wait", type=float, default=0,
                    help="seconds to wait for the nodes to be Ready and untainted (0: max(600, 0.3 s per node))")
    ap.add_argument("--backlog", action="store_true",
                    help="create every pod first, then start kube-scheduler (scheduling capacity, "
                         "latency from the scheduler's start)")
    ap.add_argument("--perf", help="perf record kubequota during each row into PREFIX-NODES-rROW.data")
    ap.add_argument("--pprof", help="kube-scheduler's CPU profile (Go pprof) of each row into "
                    "PREFIX-NODES-rROW[-variant]-N.pprof (go tool pprof -top FILE)")
    ap.add_argument("--pprof-apiserver", help="kube-apiserver's CPU profile of each row into "
                    "PREFIX-NODES-rROW[-variant]-N-apiserver.pprof (the bench's API server then runs "
                    "with --profiling=true): where the API server's extra CPU per pod goes")
    ap.add_argument("--pprof-seconds", type=int, default=20)
    ap.add_argument("--trace", help="kube-scheduler's execution trace of each row into "
                    "PREFIX-NODES-rROW[-variant]-N.trace (go tool trace -pprof=net FILE: where it waits)")
    ap.add_argument("--trace-seconds", type=int, default=5)
    ap.add_argument("--kq-arg", action="append", default=[], help="an extra kubequota argument")
    ap.add_argument("--abba", type=int, default=0,
                    help="run --rows N times in ABBA order (forward then backward is one round); each "
                         "row's ratio to the first of --rows is taken within its round, and the median "
                         "and spread of the rounds are reported (a drift of the baseline cannot bias it)")
    ap.add_argument("--fresh-plane", action="store_true",
                    help="a fresh control plane (etcd, API server, kwok, nodes) for every row: no row "
                         "inherits another's deleted pods, events or etcd growth")
    a = ap.parse_args()
    # a row is N, or N:ARG+ARG to give that row's kubequota extra arguments (a variant)
    rows = [x for x in a.rows.split(",") if x]
    allres = []
    os.makedirs(os.path.dirname(a.json), exist_ok=True)
    # the order: as given, or ABBA rounds; each entry (spec, round)
    order = [(r, 0) for r in rows]
    if a.abba > 0:
        order = [(r, k) for k, rnd in enumerate(abba_order(rows, a.abba)) for r in rnd]
    for nodes in [int(x) for x in a.nodes.split(",")]:
        # one control plane for every row, or (--fresh-plane) one per row
        groups = [[o] for o in order] if a.fresh_plane else [order]
        for gi, group in enumerate(groups):
            b = Bench(a, nodes)
            try:
                b.start()
                for spec, rnd in group:
                    num, _, extra = spec.partition(":")
                    res = b.run_row(int(num), [x for x in extra.split("+") if x])
                    res["spec"], res["round"] = spec, rnd
                    res["plane"] = gi
                    # after every row: a run stopped early keeps what it measured
                    with open(a.json, "w") as f:
                        json.dump(allres + b.results, f, indent=1)
                if a.mem_pods and gi == len(groups) - 1:
                    b.mem_row(a.mem_pods)
            finally:
                allres.extend(b.results)
                with open(a.json, "w") as f:
                    json.dump(allres, f, indent=1)
                b.c.stop()
    print("\nnodes | row | bound/want | pods/s | p50 ms | p99 ms | tput ratio | p99 ratio | kubequota peak RSS | cpu s")
    for nodes in sorted({r["nodes"] for r in allres}):
        rs = [r for r in allres if r["nodes"] == nodes and r["row"] != "mem"]
        base = next((r for r in rs if r["row"] == 1), None)
        for r in rs:
            print(fmt_row(r, base))
        if a.abba > 0:
            print("\n%d nodes, %d ABBA rounds%s:" % (nodes, a.abba, ", a fresh control plane per row"
                                                       if a.fresh_plane else ""))
            print(abba_summary([r for r in allres if r["nodes"] == nodes], rows, a.abba))
        for r in allres:
            if r["nodes"] == nodes and r["row"] == "mem":
                print("%d nodes | LIST of %d pods at start: ready %.1fs, kubequota VmHWM %.0f MiB (RSS %.0f), "
                      "kube-apiserver %.0f MiB, etcd %.0f MiB" % (nodes, r["pods"], r["ready_s"], r["kq_hwm_mb"],
                                                                  r["kq_rss_mb"], r["apiserver_rss_mb"],
                                                                  r["etcd_rss_mb"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
