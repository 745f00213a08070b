#!/usr/bin/python3
"""Randomized fault soak for kubequota (issue 9).

  python3 tests/soak/soak.py [--seed N] [--rounds K] [--binary bin/kubequota] [-v] [--keep]

One API simulator (tests/e2e/apisim.py) and one kubequota, for the whole run. Each round a
driver creates pods for many users, groups and queues, schedules some of them the way
kube-scheduler does (filter, then bind, from a few threads at once), binds some directly as
another scheduler would, completes and deletes some, and injects faults at random: 500, 503
and 429 answers and slow or cut answers on POST .../binding and on the pod LIST, failing and
slow watch requests, watch connections dropped (closed, or cut in the middle of an event),
history compaction (410 on resume), bindings that commit while their answer is lost
(ambiguous outcomes: kubequota must look the pod up, and a retry meets 409), pod watches
that go silent with the connection open (stalled: kubequota must notice and relist),
attempts to relabel a bound pod's queue or application through the webhook (refused, for
every key podkeys.h guards), a hostile tenant's pods labelled with another user's application
id (refused at filter and bind, never charged to the owner), the routes of issue 37 (the
ReplicaSet controller creating tenants' pods with spec.nodeName at once through both
webhooks, admitted ones counting as kubequota's decisions; a pod naming a Koordinator quota
that does not exist; a user root.secure's submitacl excludes adding a pod of an application
running elsewhere to it), a relabel followed by a
restart (the restarted process must count every pod where the live one did), and kubequota killed with SIGKILL (at rest, while binds
are in flight, in the middle of one bind held by the simulator, or, with
--unready-requests, restarted at once so that requests reach it while it starts), or stopped
with SIGTERM (it must exit 0) and restarted.

After each round it waits for quiescence (faults cleared, kubequota ready, the usage view
equal to the truth) and checks the invariants:
  - for every user, group and queue the REST usage equals the sum of the requests of the
    live bound pods computed from the simulator's own state, and so does each queue's
    pending resource (pods of our scheduler not bound yet);
  - running applications match: per user and per group at every queue, and per queue;
  - no pod whose last filter or bind was denied for quota is bound;
  - no limit (user, group, queue resources and maxapplications, at every level) is exceeded
    by the pods kubequota bound (the driver got "bound" back), checked from the simulator's
    state after every successful bind, after every step and at quiescence. Pods bound by
    anybody else, or whose bind was cut off by a kill, are reality: counted, never refused,
    so they are left out of this check;
  - a bind kubequota reported as done is what the simulator shows (same node);
  - kubequota never dies unless the soak killed it, exits 0 on the final SIGTERM, and logs
    no sanitizer report (run it with --binary build/asan/kubequota).

One random.Random(seed) makes every decision, so a seed replays the same plan of operations
and faults; thread interleavings are not reproducible, so a replay may need a few runs to hit
the same race. Every failure prints the seed and the replay command. The last line is
  soak: N passed, M failed
and the exit status is 1 on any failure. Standard library only.
"""

import argparse
import base64
import collections
import copy
import http.client
import json
import os
import random
import re
import shutil
import socket
import ssl
import sys
import threading
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tests", "e2e"))

kqtest = None  # imported in main() once --binary is in the environment

NS_QUEUELESS = "apps"  # a namespace without a queue of its name: unlabeled pods go to root.default

# ------------------------------------------------------------------------------------------
# the world: queues, limits, users
# ------------------------------------------------------------------------------------------


def lim(name, users=None, groups=None, cpu=None, memory=None, apps=None):
    d = {"limit": name}
    if users:
        d["users"] = users
    if groups:
        d["groups"] = groups
    res = {}
    if cpu:
        res["cpu"] = cpu
    if memory:
        res["memory"] = memory
    if res:
        d["maxresources"] = res
    if apps:
        d["maxapplications"] = apps
    return d


# A three-level tree with queue maxima, maxapplications, named and "*" user limits and named
# and "*" group limits at several levels. root.default has no limit of its own. Everyone may
# submit everywhere but to root.secure, whose submitacl names SECURE_ACL's users and group
# (an ACL is granted by the queue or a parent's, so root names nobody).
SECURE = "root.secure"
SECURE_USERS, SECURE_GROUPS = ("alice", "bob"), ("ops",)
CONFIG = {"partitions": [{"name": "default", "queues": [{
    "name": "root", "submitacl": " ",
    "limits": [lim("everyone anywhere", users=["*"], cpu="14", memory="28Gi", apps=10)],
    "queues": [
        {"name": "default", "submitacl": "*"},
        {"name": "secure", "submitacl": "%s %s" % (",".join(SECURE_USERS), ",".join(SECURE_GROUPS)),
         "resources": {"max": {"cpu": "4", "memory": "8Gi"}}},
        {"name": "dev", "submitacl": "*", "maxapplications": 12,
         "resources": {"max": {"cpu": "24", "memory": "48Gi"}},
         "limits": [
             lim("alice in dev", users=["alice"], cpu="6", memory="12Gi", apps=4),
             lim("everyone in dev", users=["*"], cpu="4", memory="8Gi", apps=3),
             lim("ml in dev", groups=["ml"], cpu="10"),
             lim("web in dev", groups=["web"], cpu="5", apps=4),
             lim("other groups in dev", groups=["*"], cpu="6"),
         ],
         "queues": [
             {"name": "team-a", "maxapplications": 8,
              "resources": {"max": {"cpu": "12", "memory": "24Gi"}},
              "limits": [
                  lim("bob in team-a", users=["bob"], cpu="3", apps=3),
                  lim("everyone in team-a", users=["*"], cpu="2", apps=2),
                  lim("ml in team-a", groups=["ml"], cpu="5", apps=3),
              ]},
             {"name": "team-b", "maxapplications": 6,
              "limits": [
                  lim("ops in team-b", groups=["ops"], cpu="4", memory="6Gi", apps=3),
                  lim("other groups in team-b", groups=["*"], cpu="3"),
              ]},
         ]},
        {"name": "prod", "submitacl": "*",
         "resources": {"max": {"cpu": "16", "memory": "32Gi"}},
         "queues": [
             {"name": "batch", "limits": [
                 lim("everyone in batch", users=["*"], cpu="3", apps=4),
                 lim("ml in batch", groups=["ml"], cpu="6", apps=3),
             ]},
             {"name": "web", "resources": {"max": {"cpu": "6", "memory": "12Gi"}}},
         ]},
    ]}]}]}

USERS = {
    "alice": ["ml", "dev"], "bob": ["dev"], "carol": ["ml"], "dan": ["web"],
    "erin": ["web", "ml"], "frank": ["ops"], "gina": ["ops", "web"], "hank": [],
    "ivy": ["qa"], "judy": ["qa", "ml"], "ken": ["misc", "ops"], "leo": ["misc"],
}
# Leaves the random pods go to (root.secure only through the ACL steps).
LEAVES = [("root.default", 2), ("root.dev.team-a", 3), ("root.dev.team-b", 3),
          ("root.prod.batch", 2), ("root.prod.web", 2)]
CPUS = [("100m", 3), ("250m", 3), ("500m", 4), ("1", 4), ("1500m", 2), ("2", 2), (None, 1)]
MEMS = [("128Mi", 3), ("256Mi", 3), ("512Mi", 3), ("1Gi", 3), ("2Gi", 2), ("3Gi", 1), (None, 1)]

# Paths the faults aim at (query strings included: the simulator matches the raw path).
P_BINDING = r"/pods/[^/]+/binding$"
P_LIST = r"^/api/v1/pods\?(?!(.*&)?watch=(1|true))"
P_WATCH = r"^/api/v1/pods\?(.*&)?watch=(1|true)"

# A bind or filter answer that is a quota decision (ugm's and the ledger's reasons).
DENIAL_RE = re.compile(r"^(user|group) \S+ in queue \S+: |^queue \S+: |^quota |^application \"[^\"]*\" belongs to another user"
                       r"|^user \S+ \([^)]*\) may not submit to queue |elastic quota \S+ not found")
# The pod keys that place a pod, name its application or carry its identity
# (include/kubequota/kube/podkeys.h): fixed once the pod exists.
GUARDED_LABELS = ["kubequota.io/queue", "yunikorn.apache.org/queue", "queue", "kubequota.io/app-id",
                  "yunikorn.apache.org/app-id", "applicationId", "spark-app-selector",
                  "quota.scheduling.koordinator.sh/name"]
APP_LABELS = ["kubequota.io/app-id", "yunikorn.apache.org/app-id", "applicationId", "spark-app-selector"]


# Issue 37 route 1: a controller of kube-controller-manager (trusted: its pods keep the
# identity their template carries) creating a tenant's pod with spec.nodeName.
RS_CONTROLLER = "system:serviceaccount:kube-system:replicaset-controller"
RS_GROUPS = ["system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"]
# Issue 37 route 2: the Koordinator quota label.
LABEL_KOORD_QUOTA = "quota.scheduling.koordinator.sh/name"


def secure_ok(user):
    """May user submit to root.secure (SECURE_USERS, SECURE_GROUPS)?"""
    return user in SECURE_USERS or bool(set(USERS.get(user, ())) & set(SECURE_GROUPS))


def review(obj, username, groups, operation="CREATE", old=None, sub=None, dry_run=False, uid="soak"):
    """An AdmissionReview as the API server sends it."""
    req = {"uid": uid, "kind": {"group": "", "version": "v1", "kind": "Pod"},
           "resource": {"group": "", "version": "v1", "resource": "pods"},
           "namespace": obj["metadata"].get("namespace", "default"), "operation": operation,
           "userInfo": {"username": username, "groups": list(groups)},
           "object": obj, "oldObject": old, "dryRun": dry_run}
    if sub:
        req["subResource"] = sub
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": req}


def weighted(rng, pairs):
    total = sum(w for _, w in pairs)
    x = rng.uniform(0, total)
    for v, w in pairs:
        x -= w
        if x <= 0:
            return v
    return pairs[-1][0]


class Failure(Exception):
    pass


def dict_diff(what, exp, act, depth=2):
    """Lines naming each key (two levels down) where exp and act differ."""
    out = []
    if exp == act:
        return out
    if depth == 0 or not isinstance(exp, dict) or not isinstance(act, dict):
        return ["%s: expected %s, kubequota shows %s" % (what, exp, act)]
    for k in sorted(set(exp) | set(act), key=str):
        out += dict_diff("%s %s" % (what, k), exp.get(k), act.get(k), depth - 1)
    return out


# ------------------------------------------------------------------------------------------
# limits as the configuration states them (the soak's own reading, for the invariant)
# ------------------------------------------------------------------------------------------

def canon_res(d):
    return {("cpu" if k == "vcore" else k): kqtest.canonical("cpu" if k == "vcore" else k, v)
            for k, v in (d or {}).items()}


class Limits:
    """Per queue path: queue max and maxapplications, user limits (named, "*"), group limits
    (named, "*"), each as (description, {res: max}, maxapps)."""

    def __init__(self, config):
        self.queues = kqtest.config_queues(config)
        self.at = {}
        for path, q in self.queues.items():
            e = {"qmax": canon_res((q.get("resources") or {}).get("max")),
                 "qapps": int(q.get("maxapplications") or 0),
                 "users": {}, "groups": {}}
            for li in q.get("limits") or []:
                entry = (li.get("limit") or "?", canon_res(li.get("maxresources")),
                         int(li.get("maxapplications") or 0))
                for u in li.get("users") or []:
                    e["users"].setdefault(u, entry)
                for g in li.get("groups") or []:
                    e["groups"].setdefault(g, entry)
            self.at[path] = e

    def violations(self, pods, tainted=()):
        """What the given (bound, live) pods exceed: a list of sentences. Applications in
        `tainted` had pods bound by someone else (or with an unknown outcome): those pods
        may have started them without a check, and kubequota rightly lets more pods of a
        running application in, so they are left out of the maxapplications checks."""
        use = {"user": {}, "group": {}, "queue": {}}
        apps = {"user": {}, "group": {}, "queue": {}}
        who = {}
        for pod in pods:
            user, groups, path, app = kqtest.pod_identity(pod, self.queues, owner=True)
            g = kqtest.tracked_group(self.queues, path, groups)
            req = kqtest.pod_request(pod)
            parts = path.split(".")
            for i in range(1, len(parts) + 1):
                prefix = ".".join(parts[:i])
                keys = [("user", user), ("queue", "")] + ([("group", g)] if g else [])
                for kind, name in keys:
                    cur = use[kind].setdefault((name, prefix), {})
                    for k, v in req.items():
                        cur[k] = cur.get(k, 0) + v
                    if app not in tainted:
                        apps[kind].setdefault((name, prefix), set()).add(app)
                    who.setdefault((kind, name, prefix), []).append(pod["metadata"]["name"])
        out = []

        def over(kind, name, prefix, desc, maxres, maxapps):
            used = use[kind].get((name, prefix), {})
            for k, m in maxres.items():
                if used.get(k, 0) > m:
                    out.append("%s %s at %s: %s %s used > %s max (%s); pods %s" % (
                        kind, name or "-", prefix, k, used[k], m, desc,
                        sorted(who.get((kind, name, prefix), []))))
            n = len(apps[kind].get((name, prefix), ()))
            if maxapps and n > maxapps:
                out.append("%s %s at %s: %d applications running > %d max (%s): %s" % (
                    kind, name or "-", prefix, n, maxapps, desc,
                    sorted(apps[kind][(name, prefix)])))

        for (name, prefix) in use["user"]:
            e = self.at.get(prefix)
            if e:
                li = e["users"].get(name) or e["users"].get("*")
                if li:
                    over("user", name, prefix, "limit \"%s\"" % li[0], li[1], li[2])
        for (name, prefix) in use["group"]:
            e = self.at.get(prefix)
            if e:
                li = e["groups"].get(name) or e["groups"].get("*")
                if li:
                    over("group", name, prefix, "limit \"%s\"" % li[0], li[1], li[2])
        for (_, prefix) in use["queue"]:
            e = self.at.get(prefix)
            if e:
                over("queue", "", prefix, "queue max", e["qmax"], e["qapps"])
        return out


# ------------------------------------------------------------------------------------------
# the soak
# ------------------------------------------------------------------------------------------

class PodRec:
    __slots__ = ("ns", "name", "uid", "app", "kind", "outcome", "node", "reason", "raced",
                 "attempts")

    def __init__(self, ns, name, uid, app, kind):
        self.ns, self.name, self.uid, self.app, self.kind = ns, name, uid, app, kind
        self.outcome = None      # last driver outcome: bound, denied, error, unknown
        self.node = None
        self.reason = None
        self.raced = False       # someone else tried to bind it too
        self.attempts = 0


class Soak:
    def __init__(self, args):
        self.args = args
        self.seed = args.seed
        self.rng = random.Random(self.seed)
        self.limits = Limits(CONFIG)
        self.lock = threading.Lock()
        self.recs = {}           # uid -> PodRec
        self.ops = collections.Counter()
        self.faults = collections.Counter()
        self.bind_errors = collections.Counter()
        self.thread_failures = []
        self.tainted = set()     # applications with a pod not bound (for sure) by kubequota
        self.seq = 0
        self.round = 0
        self.expect_down = False
        self.rss = []            # (round, pid, kB)
        self.sim = None
        self.kq = None
        self.sched = None
        self.step_name = ""
        self.current_batch = []
        self.log_pos = 0
        self.log_levels = collections.Counter()

    # ---- setup ---------------------------------------------------------------------------
    def start(self):
        self.sim = kqtest.Sim(nodes=("node-1", "node-2", "node-3"))
        # a stalled watch (the stall-watch fault) is noticed after 3 s instead of 150 s.
        # --app-id-fallback owner: the truth model below takes a pod's group from its own
        # queue, which holds while no application spans queues (the named ids here carry the
        # leaf). With the default, YuniKorn's per-namespace id, a user's id-less pods in two
        # queues are one application whose group is fixed at its first pod: history a
        # snapshot does not show (README, "YuniKorn: placement").
        self.kq = kqtest.Kubequota(self.sim, CONFIG, name="kq-soak",
                                   extra_args=("--watch-progress-deadline", "3s", "--app-id-fallback", "owner"))
        self.sched = kqtest.SchedulerDriver(self.kq, self.sim)
        self.nodes = self.sched.node_names()
        self.kq.start(timeout=30)

    def stop(self):
        try:
            if self.kq is not None and self.kq.alive():
                self.kq.stop()
        except Exception:
            pass
        finally:
            if self.kq is not None:
                self.kq.kill()
            if self.sim is not None:
                self.sim.stop()

    def rss_kb(self):
        if not self.kq.alive():
            return None
        try:
            with open("/proc/%d/status" % self.kq.proc.pid) as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1])
        except OSError:
            return None
        return None

    def bump(self, key, counter=None):
        with self.lock:
            (self.ops if counter is None else counter)[key] += 1

    def log(self, msg):
        if self.args.verbose:
            print("  [r%d] %s" % (self.round, msg), flush=True)

    # ---- simulator state -----------------------------------------------------------------
    def snapshot(self):
        """{"pods": [...]} copied under the simulator's lock (no events: they only grow)."""
        w = self.sim.world
        with w.cond:
            pods = [copy.deepcopy(p) for _, p in sorted(w.objs["pods"].items())]
            held = w.held
        return {"pods": pods, "held": held}

    def sim_counters(self):
        w = self.sim.world
        with w.cond:
            return copy.deepcopy(w.counters)

    # ---- pods ----------------------------------------------------------------------------
    def new_name(self, prefix, user):
        self.seq += 1
        return "%s%05d-%s" % (prefix, self.seq, user or "anon")

    def random_pod(self, prefix, node=None):
        rng = self.rng
        user = rng.choice(sorted(USERS))
        anon = rng.random() < 0.05
        leaf = weighted(rng, LEAVES)
        ns = "default"
        queue = leaf
        r = rng.random()
        if leaf == "root.default" and r < 0.4:
            queue = None                                  # no label: from the namespace
            ns = rng.choice(["default", NS_QUEUELESS])
        elif r < 0.2:
            queue = leaf.rsplit(".", 1)[-1]               # the leaf's short name
        app = None
        if rng.random() < 0.8:
            # fresh application ids every few rounds (see Limits.violations)
            app = "%s-%s-app%d-e%d" % ("nobody" if anon else user, leaf.rsplit(".", 1)[-1],
                                       rng.randrange(4), self.round // 4)
        cpu = weighted(rng, CPUS)
        mem = weighted(rng, MEMS)
        if cpu is None and mem is None:
            cpu = "100m"
        name = self.new_name(prefix, None if anon else user)
        return kqtest.pod_manifest(name, ns=ns, user=None if anon else user,
                                   groups=USERS[user], cpu=cpu, memory=mem, queue=queue,
                                   app=app, node=node)

    def track(self, pod, kind):
        md = pod["metadata"]
        app = kqtest.app_id(md, owner=True)
        rec = PodRec(md["namespace"], md["name"], md["uid"], app, kind)
        with self.lock:
            if kind != "driver":
                self.tainted.add(app)
            self.recs[rec.uid] = rec
        return rec

    def create_pods(self, n):
        for _ in range(n):
            pod = self.sim.create_pod(self.random_pod("p"))
            self.track(pod, "driver")
            self.bump("created")

    # ---- the scheduler stand-in ----------------------------------------------------------
    def schedule_one(self, rec, node_choice):
        """filter, then bind, like kube-scheduler; records the outcome on rec."""
        with self.lock:
            rec.attempts += 1
        self.bump("schedule_attempts")
        try:
            pod = self.sim.get_pod(rec.ns, rec.name)
        except Exception:
            self.bump("schedule_gone")
            return
        if pod["metadata"]["uid"] != rec.uid or pod["spec"].get("nodeName") or \
                pod["status"].get("phase") in ("Succeeded", "Failed"):
            self.bump("schedule_skipped")
            return
        outcome, reason, node = "error", None, None
        try:
            res = self.sched.filter(pod, self.nodes)
            left = kqtest.ci_get(res, "NodeNames") or []
            err = kqtest.ci_get(res, "Error")
            if err:
                outcome, reason = "error", "filter: " + err
            elif not left:
                reason = self.sched.filter_reason(res)
                outcome = "denied" if DENIAL_RE.search(reason or "") else "error"
                if outcome == "error":
                    reason = "filter: " + str(reason)
            else:
                node = left[node_choice % len(left)]
                res = self.sched.bind_call(pod, node)
                err = kqtest.ci_get(res, "Error")
                if not err:
                    outcome = "bound"
                elif DENIAL_RE.search(err):
                    outcome, reason = "denied", err
                else:
                    outcome, reason = "error", "bind: " + err
        except (OSError, http.client.HTTPException, ssl.SSLError, socket.timeout) as e:
            # no answer: kubequota was killed or is starting; the bind may have happened
            outcome, reason = "unknown", "%s: %s" % (type(e).__name__, e)
        except AssertionError as e:  # an HTTP status other than 200 from kubequota
            outcome, reason = "unknown", str(e)[:200]
            self.bump("http_not_200")
        with self.lock:
            rec.outcome, rec.reason, rec.node = outcome, reason, node
            if outcome in ("error", "unknown"):
                self.tainted.add(rec.app)
        self.bump("sched_" + outcome)
        if outcome == "error":
            key = re.sub(r"[0-9a-f]{8}-[0-9a-f-]{27,}", "UID", reason or "")
            key = re.sub(r"pod \S+/\S+", "pod P", key)
            key = re.sub(r'"[^"]*"', '"P"', key)
            key = re.sub(r"pod [a-z]\d+-\S+", "pod P", key)
            key = re.sub(r"node-\d", "N", key)[:120]
            self.bump(key, self.bind_errors)
        if outcome == "bound":
            self.after_bind(rec, node)

    def after_bind(self, rec, node):
        """kubequota said bound: the simulator must agree, and no limit may be exceeded."""
        try:
            pod = self.sim.get_pod(rec.ns, rec.name)
            if pod["metadata"]["uid"] == rec.uid and pod["spec"].get("nodeName") != node:
                self.fail_async("kubequota answered bound to %s for %s/%s, the API server shows "
                                "nodeName=%r" % (node, rec.ns, rec.name,
                                                 pod["spec"].get("nodeName")))
        except Exception:
            pass  # deleted since
        self.check_limits("after binding %s/%s" % (rec.ns, rec.name), async_=True)

    def fail_async(self, msg):
        with self.lock:
            self.thread_failures.append("round %d, %s: %s" % (self.round, self.step_name, msg))

    def raise_thread_failures(self):
        with self.lock:
            f = list(self.thread_failures)
        if f:
            raise Failure("\n  ".join(f))

    # ---- invariants ----------------------------------------------------------------------
    def kq_bound_pods(self, snap):
        with self.lock:
            bound = {uid for uid, r in self.recs.items() if r.outcome == "bound"}
        return [p for p in snap["pods"]
                if p["metadata"]["uid"] in bound and kqtest.counts(p)]

    def check_limits(self, where, async_=False, snap=None):
        snap = snap or self.snapshot()
        with self.lock:
            tainted = set(self.tainted)
        v = self.limits.violations(self.kq_bound_pods(snap), tainted)
        self.bump("limit_checks")
        if v:
            msg = "limit exceeded by pods kubequota bound (%s):\n    %s" % (where,
                                                                         "\n    ".join(v))
            if async_:
                self.fail_async(msg)
            else:
                raise Failure(msg)

    def check_denied_not_bound(self, snap):
        bad = []
        with self.lock:
            recs = dict(self.recs)
        for p in snap["pods"]:
            r = recs.get(p["metadata"]["uid"])
            if r and r.outcome == "denied" and not r.raced and p["spec"].get("nodeName"):
                bad.append("%s/%s (denied: %s) is bound to %s" % (
                    r.ns, r.name, r.reason, p["spec"]["nodeName"]))
        if bad:
            raise Failure("pods denied for quota were bound:\n    " + "\n    ".join(bad))

    def expected_pending(self, snap, queues):
        out = {}
        for p in snap["pods"]:
            if p["spec"].get("schedulerName") != kqtest.SCHED or p["spec"].get("nodeName") or \
                    p["status"].get("phase") in ("Succeeded", "Failed") or \
                    p["metadata"].get("deletionTimestamp"):
                continue
            _, _, path, _ = kqtest.pod_identity(p, queues, owner=True)
            req = kqtest.pod_request(p)
            parts = path.split(".")
            for i in range(1, len(parts) + 1):
                cur = out.setdefault(".".join(parts[:i]), {})
                for k, v in req.items():
                    cur[k] = cur.get(k, 0) + v
        return {q: {k: v for k, v in r.items() if v} for q, r in out.items()
                if any(r.values())}

    @staticmethod
    def tree_apps(node, out, parent=""):
        name = kqtest.ci_get(node, "queuename") or kqtest.ci_get(node, "queuePath")
        if name is None:
            return
        path = name if (name == "root" or name.startswith("root.") or not parent) \
            else parent + "." + name
        apps = set(kqtest.ci_get(node, "runningApplications") or [])
        if apps:
            out[path] = apps
        for c in kqtest.ci_get(node, "children") or []:
            Soak.tree_apps(c, out, path)

    def view_matches(self):
        """Predicate for wait_until: kubequota's REST view equals the simulator's truth."""
        snap = self.snapshot()
        cfgq = self.limits.queues
        exp = kqtest.expected_usage(snap, CONFIG)
        uv, gv, qv = self.kq.users(), self.kq.groups(), self.kq.queues()
        # resources (the shape of kqtest.actual_usage)
        users, groups, qs = {}, {}, {}
        uapps, gapps, qapps, qpend = {}, {}, {}, {}
        for u in uv or []:
            per, apps = {}, {}
            tree = kqtest.ci_get(u, "queues")
            if tree:
                kqtest._flatten(tree, "", per)
                self.tree_apps(tree, apps)
            users[kqtest.ci_get(u, "userName")] = per
            if apps:
                uapps[kqtest.ci_get(u, "userName")] = apps
        for g in gv or []:
            per, apps = {}, {}
            tree = kqtest.ci_get(g, "queues")
            if tree:
                kqtest._flatten(tree, "", per)
                self.tree_apps(tree, apps)
            groups[kqtest.ci_get(g, "groupName")] = per
            if apps:
                gapps[kqtest.ci_get(g, "groupName")] = apps

        def walk_q(node):
            path = kqtest.ci_get(node, "queuename")
            n = kqtest.ci_get(node, "runningApps") or 0
            if n:
                qapps[path] = n
            pend = kqtest._clean(kqtest.ci_get(node, "pendingResource"))
            if pend:
                qpend[path] = pend
            for c in kqtest.ci_get(node, "children") or []:
                walk_q(c)
        for q in (qv if isinstance(qv, list) else [qv]):
            kqtest._flatten(q, "", qs, "allocatedResource")
            walk_q(q)
        act = kqtest.normalize({"users": users, "groups": groups, "queues": qs})
        # expected applications per user, group and queue at every level
        e_uapps, e_gapps, e_qapps = {}, {}, {}
        for pod in snap["pods"]:
            if not kqtest.counts(pod):
                continue
            user, gs, path, app = kqtest.pod_identity(pod, cfgq, owner=True)
            g = kqtest.tracked_group(cfgq, path, gs)
            parts = path.split(".")
            for i in range(1, len(parts) + 1):
                prefix = ".".join(parts[:i])
                e_uapps.setdefault(user, {}).setdefault(prefix, set()).add(app)
                if g:
                    e_gapps.setdefault(g, {}).setdefault(prefix, set()).add(app)
                e_qapps.setdefault(prefix, set()).add(app)
        e_qapps = {q: len(a) for q, a in e_qapps.items()}
        diffs = []
        for k in ("users", "groups", "queues"):
            diffs += dict_diff(k + " usage", exp[k], act[k])
        diffs += dict_diff("user applications", e_uapps, uapps)
        diffs += dict_diff("group applications", e_gapps, gapps)
        diffs += dict_diff("queue runningApps", e_qapps, qapps)
        if not self.args.no_pending:
            diffs += dict_diff("queue pendingResource", self.expected_pending(snap, cfgq), qpend)
        if diffs:
            more = len(diffs) - 30
            raise AssertionError("\n    ".join(diffs[:30] + (["... %d more" % more] if more > 0
                                                             else [])))
        return snap

    # ---- faults --------------------------------------------------------------------------
    def fault(self, kind, **spec):
        self.sim.fault(**spec)
        self.bump(kind, self.faults)
        self.log("fault %s %s" % (kind, spec))

    def inject(self, kind):
        rng = self.rng
        n = rng.randint(1, 4)
        if kind == "bind-status":
            st = rng.choice([500, 503, 429])
            reason = {500: "InternalError", 503: "ServiceUnavailable", 429: "TooManyRequests"}[st]
            self.fault("bind-%d" % st, method="POST", path=P_BINDING, status=st, reason=reason,
                       count=n)
        elif kind == "bind-slow":
            self.fault("bind-slow", method="POST", path=P_BINDING,
                       delay=round(rng.uniform(0.2, 1.5), 2), count=n)
        elif kind == "bind-cut":
            self.fault("bind-cut", method="POST", path=P_BINDING, close=True, count=1)
        elif kind == "bind-lost":   # commits, the answer is lost: an ambiguous outcome
            self.fault("bind-lost", method="POST", path=P_BINDING, lose_answer=True, count=n)
        elif kind == "stall-watch":  # silent: no events, no bookmarks, connection open
            self.sim.stall_watches("pods")
            self.bump("stall-watch", self.faults)
        elif kind == "list-status":
            st = rng.choice([500, 503, 429])
            self.fault("list-%d" % st, method="GET", path=P_LIST, status=st, count=n)
        elif kind == "list-slow":
            self.fault("list-slow", method="GET", path=P_LIST,
                       delay=round(rng.uniform(0.2, 1.5), 2), count=1)
        elif kind == "watch-status":
            st = rng.choice([500, 503, 429])
            self.fault("watch-%d" % st, method="GET", path=P_WATCH, status=st, count=n)
        elif kind == "watch-slow":
            self.fault("watch-slow", method="GET", path=P_WATCH,
                       delay=round(rng.uniform(0.2, 1.5), 2), count=1)
        elif kind in ("drop-close", "drop-partial"):
            self.sim.drop_watches(kind.split("-")[1], "pods")
            self.bump(kind, self.faults)
        elif kind == "compact":
            self.sim.compact()
            self.bump("compact", self.faults)
        elif kind == "compact-drop":   # the resume after the drop gets 410 and relists
            self.sim.compact()
            self.sim.drop_watches(rng.choice(["close", "partial"]), "pods")
            self.bump("compact-drop", self.faults)
        else:
            raise ValueError(kind)

    FAULT_KINDS = [("bind-status", 4), ("bind-slow", 2), ("bind-cut", 1), ("list-status", 2),
                   ("list-slow", 1), ("watch-status", 2), ("watch-slow", 1),
                   ("drop-close", 2), ("drop-partial", 2), ("compact", 1), ("compact-drop", 2),
                   ("bind-lost", 2), ("stall-watch", 1)]

    def relabel_restart(self):
        """A tenant tries to move a bound pod to another queue (label) through the webhook,
        as the API server would ask it; it must be refused. Then kubequota restarts: the
        quiescence check proves the restarted process counts every pod where the live one
        did."""
        self.ensure_up()  # an earlier step may have left it down or starting
        snap = self.snapshot()
        bound = [p for p in self.live(snap, bound=True) if p["metadata"]["uid"] in self.recs]
        if bound:
            cur = self.rng.choice(bound)
            new = copy.deepcopy(cur)
            labels = new["metadata"].setdefault("labels", {})
            key = self.rng.choice(GUARDED_LABELS)   # any key that places the pod or names its app
            old_q = labels.get(key)
            if key in APP_LABELS:
                labels[key] = self.rng.choice([r.app for r in self.recs.values()] or ["x"])
            else:
                labels[key] = self.rng.choice([q for q, _ in LEAVES if q != old_q])
            review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                      "request": {"uid": "soak-relabel", "kind": {"group": "", "version": "v1", "kind": "Pod"},
                                  "resource": {"group": "", "version": "v1", "resource": "pods"},
                                  "namespace": cur["metadata"]["namespace"], "operation": "UPDATE",
                                  "userInfo": {"username": "mallory", "groups": ["system:authenticated"]},
                                  "object": new, "oldObject": cur}}
            r = self.kq.post("/admission/mutate", review)
            allowed = r.status == 200 and r.json()["response"]["allowed"]
            self.bump("relabel_refused" if not allowed else "relabel_allowed")
            if allowed:
                raise Failure("the webhook let pod %s/%s change %s %r -> %r"
                              % (cur["metadata"]["namespace"], cur["metadata"]["name"], key, old_q,
                                 labels[key]))
        rc = self.kq.stop()
        if rc != 0:
            raise Failure("kubequota exited %s after SIGTERM:\n%s" % (rc, self.kq.log_tail(40)))
        self.bump("relabel-restart", self.faults)
        self.restart()

    def hostile_app(self):
        """A hostile tenant (mallory) labels a pod with the application id of another user's
        running application, under one of the keys YuniKorn reads, in the same namespace or
        another: filter and bind must refuse it, never charging the owner (issue 29). The
        quiescence check then proves nothing drifted."""
        snap = self.snapshot()
        with self.lock:
            owned = {r.uid: r for r in self.recs.values() if r.kind == "driver" and r.app != r.uid}
        # not one of mallory's own: a hostile pod is retried by later batches, and once the
        # owner's application has ended it may start one of that id itself (seed 14)
        bound = [p for p in self.live(snap, bound=True) if p["metadata"]["uid"] in owned
                 and (p["metadata"].get("labels") or {}).get(kqtest.LABEL_APP)
                 and kqtest.pod_identity(p, self.limits.queues, owner=True)[0] != "mallory"]
        if not bound:
            return
        victim = self.rng.choice(bound)
        app = victim["metadata"]["labels"][kqtest.LABEL_APP]
        ns = self.rng.choice(["default", NS_QUEUELESS])
        pod = kqtest.pod_manifest(self.new_name("h", "mallory"), ns=ns, user="mallory", groups=["hostile"],
                                  cpu="100m", queue=(victim["metadata"].get("labels") or {}).get(kqtest.LABEL_QUEUE))
        key = self.rng.choice(APP_LABELS)
        pod["metadata"].setdefault("labels", {})[key] = app
        rec = self.track(self.sim.create_pod(pod), "driver")
        self.schedule_one(rec, 0)
        self.bump("hostile_app_" + str(rec.outcome))
        if rec.outcome == "bound":
            raise Failure("mallory's pod %s/%s joined application %r of another user (key %s)"
                          % (rec.ns, rec.name, app, key))

    def webhook(self, path, rev):
        """(allowed, response) of one of kubequota's admission webhooks."""
        r = self.kq.post(path, rev)
        if r.status != 200:
            return False, {"status": {"code": r.status, "message": r.text[:200]}}
        resp = r.json()["response"]
        return bool(resp.get("allowed")), resp

    def admit_on_node(self, pod, uid):
        """What the API server does with a pod created with spec.nodeName by the ReplicaSet
        controller: /admission/mutate, the uid given, /admission/validate (kubequota counts the
        pod under that uid), then storage. ("created", pod) or ("refused", message)."""
        from test_identity import apply_patch
        ns = pod["metadata"]["namespace"]
        ok, resp = self.webhook("/admission/mutate", review(pod, RS_CONTROLLER, RS_GROUPS, uid=uid))
        if ok and "patch" in resp:
            pod = apply_patch(pod, json.loads(base64.b64decode(resp["patch"])))
        if ok:
            pod = copy.deepcopy(pod)
            pod["metadata"]["uid"] = uid
            ok, resp = self.webhook("/admission/validate", review(pod, RS_CONTROLLER, RS_GROUPS, uid=uid))
        if not ok:
            return "refused", (resp.get("status") or {}).get("message", "")
        return "created", self.sim.world.create_pod(ns, pod, uid=uid)

    def controller_on_node(self, n):
        """Issue 37 route 1: the ReplicaSet controller creates n tenants' pods with spec.nodeName
        at once (their templates carry the tenants' stamped identity), through both webhooks as
        the API server calls them; an allowed pod is stored bound, with the uid kubequota saw.
        They skip filter and bind, so kubequota's admission is its decision: they count in the
        limit checks as pods kubequota bound, and concurrent ones must not pass a limit
        together. Sometimes one is a user that root.secure's submitacl excludes, labelled with
        it: refused."""
        self.ensure_up()
        rng = self.rng
        plans = []
        for _ in range(n):
            pod = self.random_pod("n", node=rng.choice(self.nodes))
            pod["spec"]["containers"][0]["resources"] = {
                "requests": {"cpu": rng.choice(["500m", "1", "1500m", "2"]), "memory": "256Mi"}}
            if rng.random() < 0.2:
                user = rng.choice(sorted(u for u in USERS if not secure_ok(u)))
                pod["metadata"]["name"] = self.new_name("n", user)
                pod["metadata"]["annotations"][kqtest.ANN_USER] = json.dumps(
                    {"user": user, "groups": USERS[user]})
                pod["metadata"]["labels"][kqtest.LABEL_QUEUE] = SECURE
                pod["metadata"]["labels"].pop(kqtest.LABEL_APP, None)
            uid = "%08x-50a6-4000-8000-%012x" % (rng.getrandbits(32), rng.getrandbits(48))
            plans.append((pod, uid))
        start = threading.Barrier(len(plans))
        results = [None] * len(plans)

        def one(i):
            try:
                start.wait(5)
            except threading.BrokenBarrierError:
                pass
            try:
                results[i] = self.admit_on_node(*plans[i])
            except (OSError, http.client.HTTPException, ssl.SSLError, socket.timeout, AssertionError) as e:
                results[i] = ("error", "%s: %s" % (type(e).__name__, e))
        ts = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(len(plans))]
        for t in ts:
            t.start()
        for t in ts:
            t.join(60)
        for (pod, _), res in zip(plans, results):
            what, val = res or ("error", "no answer")
            self.bump("on_node_" + what)
            if what != "created":
                self.log("on node %s: %s %s" % (pod["metadata"]["name"], what, val))
                continue
            user, _, path, _ = kqtest.pod_identity(val, self.limits.queues, owner=True)
            if path == SECURE and not secure_ok(user):
                raise Failure("pod %s/%s of %s created on node %s by %s in %s, whose submitacl excludes %s"
                              % (val["metadata"]["namespace"], val["metadata"]["name"], user,
                                 val["spec"]["nodeName"], RS_CONTROLLER, SECURE, user))
            rec = self.track(val, "driver")
            with self.lock:  # kubequota admitted it: its decision, like a bind it made
                rec.outcome, rec.node = "bound", val["spec"]["nodeName"]

    def quota_label(self):
        """Issue 37 route 2: a pod labelled with a Koordinator quota that does not exist, sent by
        the tenant or by a controller: refused at admission with the quota's name; the same pod
        put in the API server past the webhook: denied at filter and bind, never bound."""
        self.ensure_up()
        rng = self.rng
        pod = self.random_pod("q")
        quota = "no-such-quota-%d" % self.seq
        pod["metadata"]["labels"][LABEL_KOORD_QUOTA] = quota
        user = json.loads(pod["metadata"]["annotations"].get(kqtest.ANN_USER, '{"user": "nobody"}'))["user"]
        who, groups = ((RS_CONTROLLER, RS_GROUPS) if rng.random() < 0.5
                       else (user, ["system:authenticated"]))
        ok, resp = self.webhook("/admission/mutate", review(pod, who, groups))
        msg = (resp.get("status") or {}).get("message", "")
        self.bump("quota_label_" + ("allowed" if ok else "refused"))
        if ok or quota not in msg:
            raise Failure("the webhook %s pod %s labelled %s=%s (as %s): %r"
                          % ("allowed" if ok else "refused without naming the quota", pod["metadata"]["name"],
                             LABEL_KOORD_QUOTA, quota, who, msg))
        rec = self.track(self.sim.create_pod(pod), "driver")
        self.schedule_one(rec, 0)
        self.bump("quota_label_sched_" + str(rec.outcome))
        if rec.outcome == "bound":
            raise Failure("pod %s/%s labelled %s=%s, a quota that does not exist, was bound"
                          % (rec.ns, rec.name, LABEL_KOORD_QUOTA, quota))
        self.delete(1, pool=[p for p in self.snapshot()["pods"] if p["metadata"]["uid"] == rec.uid])

    def acl_hostile(self):
        """Issue 37 route 3: a user root.secure's submitacl excludes, whose application already
        runs in another queue, labels a further pod of it with root.secure (under one of the
        keys that name an application): filter and bind refuse it. A user the ACL names gets
        in (or is refused for quota, never for the ACL)."""
        self.ensure_up()
        rng = self.rng
        snap = self.snapshot()
        cands = []
        for p in self.live(snap, bound=True):
            app = (p["metadata"].get("labels") or {}).get(kqtest.LABEL_APP)
            user, _, path, _ = kqtest.pod_identity(p, self.limits.queues, owner=True)
            if app and user in USERS and not secure_ok(user) and path != SECURE:
                cands.append((p["metadata"]["name"], p, user, app))
        if cands:
            _, victim, user, app = rng.choice(sorted(cands, key=lambda c: c[0]))
            pod = kqtest.pod_manifest(self.new_name("a", user), ns=victim["metadata"]["namespace"], user=user,
                                      groups=USERS[user], cpu="100m", queue=SECURE)
            key = rng.choice(APP_LABELS)
            pod["metadata"]["labels"][key] = app
            rec = self.track(self.sim.create_pod(pod), "driver")
            self.schedule_one(rec, 0)
            self.bump("acl_hostile_" + str(rec.outcome))
            if rec.outcome == "bound":
                raise Failure("%s's pod %s/%s (application %r, running in %s; key %s) was bound in %s, whose "
                              "submitacl excludes %s" % (user, rec.ns, rec.name, app,
                                                         kqtest.pod_identity(victim, self.limits.queues,
                                                                             owner=True)[2], key, SECURE, user))
            self.delete(1, pool=[p for p in self.snapshot()["pods"] if p["metadata"]["uid"] == rec.uid])
        if rng.random() < 0.6:
            user = rng.choice(sorted(u for u in USERS if secure_ok(u)))
            pod = kqtest.pod_manifest(self.new_name("p", user), user=user, groups=USERS[user],
                                      cpu=rng.choice(["250m", "500m", "1"]), queue=SECURE,
                                      app="%s-secure-app%d-e%d" % (user, rng.randrange(3), self.round // 4))
            rec = self.track(self.sim.create_pod(pod), "driver")
            self.bump("created")
            self.schedule_one(rec, 0)
            self.bump("acl_allowed_" + str(rec.outcome))
            if rec.outcome == "denied" and "submit" in (rec.reason or "").lower():
                raise Failure("%s, whom %s's submitacl names, was refused: %s" % (user, SECURE, rec.reason))

    def check_acl(self, snap):
        """No pod kubequota bound or admitted in root.secure belongs to a user its ACL excludes."""
        with self.lock:
            recs = dict(self.recs)
        bad = []
        for p in self.live(snap, bound=True):
            r = recs.get(p["metadata"]["uid"])
            if r is None or r.kind != "driver" or r.outcome != "bound":
                continue
            user, _, path, _ = kqtest.pod_identity(p, self.limits.queues, owner=True)
            if path == SECURE and not secure_ok(user):
                bad.append("%s/%s of %s" % (r.ns, r.name, user))
        if bad:
            raise Failure("pods of users %s's submitacl excludes were bound there: %s" % (SECURE, ", ".join(bad)))

    # ---- kills ---------------------------------------------------------------------------
    def sigkill(self, kind):
        self.expect_down = True
        self.kq.kill()
        self.bump("sigkill", self.faults)
        self.bump("sigkill-" + kind, self.faults)
        self.log("SIGKILL (%s)" % kind)

    def restart(self, wait=True):
        self.kq.start(wait=wait, timeout=60)
        self.expect_down = False

    def ensure_up(self):
        if not self.kq.alive():
            if not self.expect_down:
                raise Failure("kubequota died on its own (exit %s):\n%s"
                              % (self.kq.proc.returncode, self.kq.log_tail(60)))
            self.restart()
        self.kq.wait_ready(60)

    def kill_mid_bind(self):
        """A bind held inside the API server when kubequota dies; released before or after
        the restart. Whether the Binding lands is up to the simulator: reality either way."""
        rng = self.rng
        pod = self.random_pod("h")
        pod["metadata"]["labels"][kqtest.LABEL_QUEUE] = "root.default"
        # its own application: an application lives in one queue here (its group is chosen
        # at its first pod, by that pod's queue, and kqtest's expectation is per pod)
        pod["metadata"]["labels"].pop(kqtest.LABEL_APP, None)
        pod["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "100m"},
                                                     "limits": {"cpu": "100m"}}
        pod = self.sim.create_pod(pod)
        rec = self.track(pod, "driver")
        with self.lock:
            self.tainted.add(rec.app)
        self.bump("created")
        name = rec.name
        fid = self.sim.fault(method="POST", path=r"/pods/%s/binding$" % re.escape(name),
                             hold=True, count=1)["id"]
        w = self.sim.world
        with w.cond:  # ahead of the other binding faults: the first match wins
            w.faults.sort(key=lambda f: f.id != fid)
        t = threading.Thread(target=self.schedule_one, args=(rec, 0), daemon=True)
        t.start()
        release_first = rng.random() < 0.5
        try:
            kqtest.wait_until(lambda: self.snapshot()["held"] >= 1 or not t.is_alive(), 20,
                              0.02, "the bind of %s to be held" % name)
        except AssertionError:
            pass
        held = self.snapshot()["held"] >= 1
        if not held:
            self.log("bind of %s not held: %s %s" % (name, rec.outcome, rec.reason))
        self.sigkill("mid-bind" if held else "mid-bind-missed")
        if release_first:
            self.release_holds()
            t.join(30)
            self.restart()
        else:
            self.restart()
            self.release_holds()
            t.join(30)
        with self.lock:
            rec.outcome = "unknown"
        if held:  # statistics only: did the Binding still reach the API server?
            def landed():
                try:
                    return bool(self.sim.get_pod(rec.ns, name)["spec"].get("nodeName"))
                except Exception:
                    return False
            try:
                kqtest.wait_until(landed, 3, 0.05)
                self.bump("held_bind_landed")
            except AssertionError:
                self.bump("held_bind_lost")

    def release_holds(self):
        w = self.sim.world
        with w.cond:
            for f in list(w.held_faults):
                if f.hold:
                    f.released.set()
            w.held_faults = [f for f in w.held_faults if not f.hold]
            for f in [f for f in w.faults if f.hold]:
                f.released.set()
                w.faults.remove(f)
            w.cond.notify_all()

    # ---- steps ---------------------------------------------------------------------------
    def pending_driver_pods(self, snap):
        with self.lock:
            recs = dict(self.recs)
        out = []
        for p in snap["pods"]:
            r = recs.get(p["metadata"]["uid"])
            if r and r.kind == "driver" and not p["spec"].get("nodeName") and \
                    p["status"].get("phase") not in ("Succeeded", "Failed"):
                out.append(r)
        return sorted(out, key=lambda r: r.name)

    def batch(self, chaos):
        """Schedules a batch of pending pods from a few threads while `chaos` actions
        (offset seconds, callable) run from a timer thread."""
        rng = self.rng
        snap = self.snapshot()
        cands = self.pending_driver_pods(snap)
        if not cands:
            return
        # pods that were tried often are left alone more and more (like a backoff queue)
        cands = [r for r in cands if r.attempts < 3 or rng.random() < 0.2]
        picks = rng.sample(cands, min(len(cands), rng.randint(4, 16)))
        nthreads = rng.randint(1, 4)
        work = [(r, rng.randrange(3)) for r in picks]
        self.current_batch = list(picks)
        idx = [0]
        wl = threading.Lock()

        def worker():
            while True:
                with wl:
                    if idx[0] >= len(work):
                        return
                    r, choice = work[idx[0]]
                    idx[0] += 1
                try:
                    self.schedule_one(r, choice)
                except Exception:
                    self.fail_async("driver thread crashed:\n" + traceback.format_exc())

        plan = [(round(rng.uniform(0.0, 1.2), 3), c) for c in chaos]
        plan.sort(key=lambda x: x[0])

        def chaos_thread():
            t0 = time.monotonic()
            for off, action in plan:
                d = off - (time.monotonic() - t0)
                if d > 0:
                    time.sleep(d)
                try:
                    action()
                except Failure as e:
                    self.fail_async(str(e))
                except Exception:
                    self.fail_async("chaos action crashed:\n" + traceback.format_exc())

        ts = [threading.Thread(target=worker, daemon=True) for _ in range(nthreads)]
        ct = threading.Thread(target=chaos_thread, daemon=True)
        ct.start()
        for t in ts:
            t.start()
        for t in ts:
            t.join(120)
            if t.is_alive():
                raise Failure("a driver thread is stuck after 120s")
        ct.join(120)
        self.bump("batches")
        self.log("batch of %d with %d threads, %d chaos actions" % (len(work), nthreads,
                                                                    len(chaos)))

    def foreign(self, n):
        """Pods bound by another scheduler (through the API) or created already bound."""
        for _ in range(n):
            node = self.rng.choice(self.nodes)
            if self.rng.random() < 0.3:
                pod = self.sim.create_pod(self.random_pod("s", node=node))
                self.track(pod, "foreign")
            else:
                pod = self.sim.create_pod(self.random_pod("f"))
                self.track(pod, "foreign")
                if not self.foreign_bind(pod["metadata"]["namespace"], pod["metadata"]["name"],
                                         node, pod["metadata"]["uid"]):
                    raise Failure("the simulator refused a foreign bind of %s"
                                  % pod["metadata"]["name"])
            self.bump("foreign_bound")

    def foreign_bind(self, ns, name, node, uid):
        """Binds through the simulator's world (the API semantics without the injected
        faults, which are meant for kubequota). True when bound."""
        body = {"kind": "Binding", "apiVersion": "v1",
                "metadata": {"name": name, "namespace": ns, "uid": uid},
                "target": {"kind": "Node", "name": node}}
        try:
            self.sim.world.bind(ns, name, body)
            return True
        except kqtest.apisim.ApiError as e:
            if e.code in (404, 409):
                return False
            raise

    def race_bind(self, rec, node):
        """Another scheduler binds a pod the driver may be binding right now."""
        with self.lock:
            rec.raced = True
            self.tainted.add(rec.app)
        self.bump("race_foreign_won" if self.foreign_bind(rec.ns, rec.name, node, rec.uid)
                  else "race_foreign_lost")

    def live(self, snap, bound=None):
        out = []
        for p in snap["pods"]:
            if p["status"].get("phase") in ("Succeeded", "Failed"):
                continue
            if bound is not None and bool(p["spec"].get("nodeName")) != bound:
                continue
            out.append(p)
        return out

    def complete(self, n, snap=None):
        snap = snap or self.snapshot()
        cands = self.live(snap, bound=True)
        for p in self.rng.sample(cands, min(n, len(cands))):
            phase = self.rng.choice(["Succeeded", "Failed"])
            try:
                self.sim.set_phase(p["metadata"]["namespace"], p["metadata"]["name"], phase)
                self.bump("completed")
            except Exception:
                pass

    def delete(self, n, snap=None, pool=None):
        snap = snap or self.snapshot()
        cands = pool if pool is not None else snap["pods"]
        for p in self.rng.sample(cands, min(n, len(cands))):
            try:
                self.sim.delete_pod(p["metadata"]["namespace"], p["metadata"]["name"])
                self.bump("deleted")
            except Exception:
                pass

    def trim(self):
        """Keeps the world small: finished pods go, then the oldest when there are many."""
        snap = self.snapshot()
        done = [p for p in snap["pods"] if p["status"].get("phase") in ("Succeeded", "Failed")]
        self.delete(len(done), pool=done)
        gone = {p["metadata"]["uid"] for p in done}
        left = [p for p in snap["pods"] if p["metadata"]["uid"] not in gone]
        if len(left) > 90:
            left.sort(key=lambda p: int(p["metadata"]["resourceVersion"]))
            for p in left[:len(left) - 70]:
                try:
                    self.sim.delete_pod(p["metadata"]["namespace"], p["metadata"]["name"])
                    self.bump("deleted")
                except Exception:
                    pass

    def chaos_actions(self):
        """Actions to run during a batch, chosen now (in plan order)."""
        rng = self.rng
        acts = []
        for _ in range(rng.choice([0, 1, 1, 2, 3])):
            kind = weighted(rng, self.FAULT_KINDS)
            acts.append(lambda k=kind: self.inject(k))
        if rng.random() < 0.3:
            n = rng.randint(1, 2)
            acts.append(lambda n=n: self.delete(n, pool=self.live(self.snapshot(), bound=None)))
        if rng.random() < 0.2:
            n = rng.randint(1, 2)
            acts.append(lambda n=n: self.complete(n))
        if rng.random() < 0.25:
            snap_pick = rng.random()
            node = rng.choice(self.nodes)

            def race():  # a pod of this batch: the driver may be binding it right now
                c = self.current_batch
                if c:
                    self.race_bind(c[int(snap_pick * len(c))], node)
            acts.append(race)
        if rng.random() < self.args.kill_rate:
            modes = ["batch", "batch"]
            if self.args.unready_requests:
                modes += ["starting", "starting-slow-list"]
            mode = rng.choice(modes)

            def kill(mode=mode):
                self.sigkill(mode)
                if mode.startswith("starting"):   # requests reach it while it starts up
                    if mode == "starting-slow-list":  # ... and for a while
                        self.fault("list-slow", method="GET", path=P_LIST, delay=1.5, count=1)
                    self.restart(wait=False)
            acts.append(kill)
        return acts

    def plan_round(self):
        rng = self.rng
        steps = [("create", lambda n=rng.randint(8, 20): self.create_pods(n))]
        middle = []
        for _ in range(rng.randint(1, 3)):
            middle.append(("batch", lambda c=self.chaos_actions(): self.batch(c)))
        for _ in range(rng.randint(0, 3)):
            kind = weighted(rng, self.FAULT_KINDS)
            middle.append(("fault " + kind, lambda k=kind: self.inject(k)))
        if rng.random() < 0.6:
            middle.append(("foreign", lambda n=rng.randint(1, 3): self.foreign(n)))
        if rng.random() < 0.6:
            middle.append(("complete", lambda n=rng.randint(1, 3): self.complete(n)))
        if rng.random() < 0.6:
            middle.append(("delete", lambda n=rng.randint(1, 3): self.delete(n)))
        if rng.random() < self.args.kill_rate * 0.6:
            middle.append(("kill mid-bind", self.kill_mid_bind))
        if rng.random() < self.args.kill_rate * 0.4:
            middle.append(("relabel then restart", self.relabel_restart))
        if rng.random() < 0.4:
            middle.append(("hostile application id", self.hostile_app))
        if rng.random() < 0.5:
            middle.append(("controller pods on nodes", lambda n=rng.randint(1, 4): self.controller_on_node(n)))
        if rng.random() < 0.3:
            middle.append(("unknown quota label", self.quota_label))
        if rng.random() < 0.4:
            middle.append(("submitacl of a running application", self.acl_hostile))
        if rng.random() < self.args.kill_rate * 0.5:
            def at_rest(behind=rng.randint(0, 3), graceful=rng.random() < 0.25):
                if graceful:
                    # at rest: started and ready (a batch may have restarted it without waiting,
                    # and a SIGTERM before main installs its handler ends it by the signal: -15)
                    self.ensure_up()
                    rc = self.kq.stop()
                    self.bump("sigterm", self.faults)
                    if rc != 0:
                        raise Failure("kubequota exited %s after SIGTERM:\n%s"
                                      % (rc, self.kq.log_tail(40)))
                    self.expect_down = True
                else:
                    self.sigkill("rest")
                for _ in range(behind):   # changes it cannot see
                    what = self.rng.choice(["create", "foreign", "complete", "delete"])
                    {"create": lambda: self.create_pods(1), "foreign": lambda: self.foreign(1),
                     "complete": lambda: self.complete(1), "delete": lambda: self.delete(1)}[what]()
                self.restart()
            middle.append(("kill at rest", at_rest))
        rng.shuffle(middle)
        return steps + middle

    # ---- a round -------------------------------------------------------------------------
    def quiesce(self):
        self.step_name = "quiesce"
        self.sim.clear_faults()
        self.ensure_up()
        try:
            snap = kqtest.wait_until(self.view_matches, self.args.settle, 0.2,
                                     "kubequota's view to match the API server")
        except AssertionError as e:
            raise Failure("usage view never matched the simulator's truth:\n    %s" % e)
        self.raise_thread_failures()
        self.check_denied_not_bound(snap)
        self.check_acl(snap)
        self.check_limits("at quiescence", snap=snap)
        if not self.kq.alive():
            raise Failure("kubequota died during the checks:\n%s" % self.kq.log_tail(60))
        self.scan_log()

    def shutdown_check(self):
        """SIGTERM at the end: exit 0, and no sanitizer report (LeakSanitizer reports at exit
        in an ASan build)."""
        self.step_name = "shutdown"
        self.expect_down = True
        rc = self.kq.stop(timeout=30)
        if rc != 0:
            raise Failure("kubequota exited %s after SIGTERM:\n%s" % (rc, self.kq.log_tail(40)))
        self.scan_log()

    def scan_log(self):
        """Reads what kubequota logged since the last call: sanitizer reports fail the run;
        warnings and errors are tallied for the summary."""
        try:
            with open(self.kq.log_path, "rb") as f:
                f.seek(self.log_pos)
                data = f.read()
        except OSError:
            return
        cut = data.rfind(b"\n") + 1
        self.log_pos += cut
        text = data[:cut].decode(errors="replace")
        for marker in kqtest.SANITIZER_MARKERS:
            if marker in text:
                raise Failure("sanitizer report in kubequota's log:\n%s" % self.kq.log_tail(80))
        # klog text lines: "W1124 14:26:20.555123  pid file.c:12] "message" key=value ..."
        for m in re.finditer(r"^([WE])\d{4} \S+ +\d+ \S+\] \"((?:[^\"\\]|\\.)*)\"([^\n]*)", text, re.M):
            level = "warn" if m.group(1) == "W" else "error"
            toks = m.group(3).split()
            if not toks or not toks[0].startswith("event="):
                toks = m.group(2).split() + toks
            if toks and toks[0].startswith("event="):
                key = " ".join(toks[:2] if len(toks) > 1 and toks[1].startswith("result=")
                               else toks[:1])
            else:
                key = " ".join(t for t in toks[:4] if "=" not in t)
            self.log_levels["%s %s" % (level, key)] += 1

    def compare_fresh(self):
        """Issue 38: a kubequota started now on the same simulator with the same config shows
        what the running one shows, on every view (users, groups, queues with the quota tree),
        whatever the order the running one learnt things in. Then it is stopped."""
        self.step_name = "fresh"
        fresh = kqtest.Kubequota(self.sim, CONFIG, name="kq-fresh", extra_args=self.kq.extra_args)
        try:
            fresh.start(timeout=30)
            last = []

            def same():
                a, b = kqtest.views(self.kq), kqtest.views(fresh)
                last[:] = kqtest.view_diff(a, b)
                return not last
            try:
                kqtest.wait_until(same, self.args.settle, 0.2, "a fresh kubequota to show the running one's views")
            except AssertionError:
                raise Failure("a kubequota started fresh shows other views than the running one (running vs "
                              "fresh):\n    %s\n  fresh kubequota's log: %s" % ("\n    ".join(last), fresh.log_path))
            self.ops["fresh comparisons"] += 1
        finally:
            try:
                fresh.stop()
            finally:
                fresh.kill()

    def run_round(self):
        self.trim()
        for name, step in self.plan_round():
            self.step_name = name
            step()
            self.raise_thread_failures()
            if not self.kq.alive() and not self.expect_down:
                raise Failure("kubequota died on its own during %s (exit %s):\n%s"
                              % (name, self.kq.proc.returncode, self.kq.log_tail(60)))
            self.check_limits("after step %s" % name)
            if not self.kq.alive() and self.expect_down and name == "batch":
                self.restart()
        self.quiesce()
        if self.args.fresh_every and self.round % self.args.fresh_every == 0:
            self.compare_fresh()

    def summary(self, passed, failed, t0):
        c = self.sim_counters() if self.sim else {}
        print("soak: seed %d, %d rounds in %.1fs" % (self.seed, passed + failed,
                                                     time.monotonic() - t0))
        ops = dict(sorted(self.ops.items()))
        print("soak: operations: " + ", ".join("%s=%d" % kv for kv in ops.items()))
        print("soak: faults survived: " + ", ".join("%s=%d" % kv
                                                    for kv in sorted(self.faults.items())))
        if c:
            print("soak: simulator: faults_hit=%d bindings=%d binding_conflicts=%d "
                  "watch_expired=%d pod_lists=%d pod_watches=%d requests=%d" % (
                      c.get("faults_hit", 0), c.get("bindings", 0),
                      c.get("binding_conflicts", 0), c.get("watch_expired", 0),
                      c.get("lists", {}).get("pods", 0), c.get("watches", {}).get("pods", 0),
                      c.get("requests", 0)))
        if self.bind_errors:
            print("soak: scheduling errors (retried by kube-scheduler in real life):")
            for k, v in self.bind_errors.most_common(8):
                print("    %5d  %s" % (v, k))
        if self.log_levels:
            print("soak: kubequota logged: " + ", ".join(
                "%s x%d" % kv for kv in sorted(self.log_levels.items())))
        if self.kq is not None:
            print("soak: kubequota starts=%d kills=%d" % (self.kq.starts,
                                                          self.faults.get("sigkill", 0)))
        if self.rss:
            first, last = self.rss[0], self.rss[-1]
            same = [r for r in self.rss if r[1] == last[1]]
            print("soak: RSS start %d kB (round %d, pid %d), end %d kB (round %d, pid %d); "
                  "the last process: %d kB at round %d -> %d kB, max %d kB" % (
                      first[2], first[0], first[1], last[2], last[0], last[1],
                      same[0][2], same[0][0], last[2], max(r[2] for r in self.rss)))


EXTRA_FLAGS = []  # options that change the plan, repeated in the replay command


def replay_cmd(seed, rounds):
    extra = " ".join(EXTRA_FLAGS)
    return ("make soak SEED=%d ROUNDS=%d%s   (or: python3 tests/soak/soak.py --seed %d "
            "--rounds %d%s)" % (seed, rounds, (" SOAK_ARGS='%s'" % extra) if extra else "",
                                seed, rounds, (" " + extra) if extra else ""))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=None, help="default: random (printed)")
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--binary", help="kubequota binary (default bin/kubequota)")
    ap.add_argument("--kill-rate", type=float, default=0.35,
                    help="chance per round (and per batch) of killing kubequota")
    ap.add_argument("--settle", type=float, default=60.0,
                    help="seconds to wait for the usage view to match at quiescence")
    ap.add_argument("--no-pending", action="store_true",
                    help="do not compare the queues' pendingResource")
    ap.add_argument("--unready-requests", action="store_true", default=True,
                    help="(default) after some kills, restart at once and keep scheduling while "
                         "kubequota starts (before /readyz): kube-scheduler does this when it "
                         "reaches kubequota without a readiness-gated Service")
    ap.add_argument("--ready-only", dest="unready_requests", action="store_false",
                    help="only schedule once kubequota is ready")
    ap.add_argument("--gating-rounds", type=int, default=None,
                    help="rounds of the admission gate phase (tests/soak/gating_soak.py; SIGKILL between "
                         "gate removal and bind); default max(3, rounds / 5); 0 skips it")
    ap.add_argument("--fresh-every", type=int, default=4, metavar="N",
                    help="every N rounds, after quiescence, start a second kubequota on the same simulator and "
                         "require the same users, groups and queues views (quota tree included); 0: never")
    ap.add_argument("-v", "--verbose", action="store_true")
    ap.add_argument("--keep", action="store_true", help="keep the temp dir (logs, configs)")
    args = ap.parse_args(argv)
    if args.seed is None:
        args.seed = random.SystemRandom().randrange(1, 2**31)
    if args.kill_rate != 0.35:
        EXTRA_FLAGS.append("--kill-rate %g" % args.kill_rate)
    if not args.unready_requests:
        EXTRA_FLAGS.append("--ready-only")
    if args.no_pending:
        EXTRA_FLAGS.append("--no-pending")
    if args.fresh_every != 4:
        EXTRA_FLAGS.append("--fresh-every %d" % args.fresh_every)
    if args.binary:
        os.environ["KQ_BINARY"] = os.path.abspath(args.binary)
    if args.keep:
        os.environ["KQ_E2E_KEEP"] = "1"
    global kqtest
    import kqtest as kqt
    kqtest = kqt
    print("soak: seed %d, %d rounds, binary %s" % (args.seed, args.rounds, kqtest.binary()),
          flush=True)
    print("soak: replay with: " + replay_cmd(args.seed, args.rounds), flush=True)
    if not kqtest.have_binary():
        print("soak: %s not built" % kqtest.binary())
        print("soak: 0 passed, 1 failed")
        return 1
    soak = Soak(args)
    t0 = time.monotonic()
    passed = failed = 0
    try:
        soak.start()
        rss0 = soak.rss_kb()
        if rss0:
            soak.rss.append((0, soak.kq.proc.pid, rss0))
        for r in range(1, args.rounds + 1):
            soak.round = r
            rt = time.monotonic()
            soak.run_round()
            passed += 1
            kb = soak.rss_kb()
            if kb:
                soak.rss.append((r, soak.kq.proc.pid, kb))
            print("round %d ok (%.1fs) pods=%d rss=%s kB" % (
                r, time.monotonic() - rt, len(soak.snapshot()["pods"]), kb), flush=True)
        soak.shutdown_check()
    except (Failure, Exception) as e:
        if soak.step_name == "shutdown" and passed:
            passed -= 1   # the last round did not end cleanly after all
        failed += 1
        kind = "FAIL" if isinstance(e, Failure) else "ERROR"
        print("%s round %d, step %s (seed %d):" % (kind, soak.round, soak.step_name, args.seed))
        if isinstance(e, Failure):
            print("  " + str(e))
        else:
            traceback.print_exc()
        if soak.kq is not None:
            keep = "/tmp/kq-soak-fail-%d" % args.seed
            try:
                os.makedirs(keep, exist_ok=True)
                shutil.copy(soak.kq.log_path, os.path.join(keep, "kubequota.log"))
                with open(os.path.join(keep, "pods.json"), "w") as f:
                    json.dump(soak.snapshot()["pods"], f, indent=1)
                with open(os.path.join(keep, "driver.json"), "w") as f:
                    json.dump({uid: {k: getattr(r, k) for k in PodRec.__slots__}
                               for uid, r in soak.recs.items()}, f, indent=1)
                lines = [ln for ln in soak.kq.logs().splitlines()
                         if "event=http_request" not in ln]
                print("  kubequota log, the simulator's pods and the driver's records kept in "
                      "%s/; last log lines (requests left out):\n%s"
                      % (keep, "\n".join("    | " + ln for ln in lines[-25:])))
            except OSError:
                pass
        print("%s round %d (seed %d): %s" % (kind, soak.round, args.seed,
                                              str(e).splitlines()[0] if str(e) else
                                              type(e).__name__))
        print("soak: replay with: " + replay_cmd(args.seed, max(1, soak.round)), flush=True)
    finally:
        try:
            soak.summary(passed, failed, t0)
        finally:
            soak.stop()
    gating_rounds = args.gating_rounds if args.gating_rounds is not None else max(3, args.rounds // 5)
    if gating_rounds > 0:
        sys.path.insert(0, HERE)
        import gating_soak
        gp, gf, line = gating_soak.run(kqtest, args.seed, gating_rounds, args.verbose)
        print(line, flush=True)
        passed += gp
        failed += gf
    print("soak: %d passed, %d failed" % (passed, failed), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
