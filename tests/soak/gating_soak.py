"""The admission gate under kills (issue 18; docs/gating.md), a phase of tests/soak/soak.py.

One API simulator and one kubequota with --admission-gate. Each round: tenants create gated
pods (kubequota.io/admission) in a queue with a per-user limit and a queue max; kubequota
releases what fits while the fake kube-scheduler is paused; kubequota is killed with
SIGKILL at random moments, most often between gate removal and bind (released pods not yet
bound), and restarted; the scheduler then binds ungated pods; some pods finish or are
deleted. Invariants, all computed from the simulator's state:
  - at every 50 ms poll and after every step: per user and per queue, the cpu of live pods
    that are bound or ungated (reserved) never exceeds the limit (no over-admission);
  - at quiescence (0 drift): kubequota's usage per user equals bound + reserved from the
    simulator, kubequota_gating_reserved_pods equals the simulator's ungated unbound pods and
    kubequota_gating_waiting_pods its gated pods;
  - at the end, with everything finishing, every gated pod is released (nothing lost);
  - the queue's order policy flips between "fair" and "usage" (with half-lives 0, 30s, 10m)
    by configuration reloads; under "usage", the current usage kubequota ranks each waiting
    user by equals the simulator's bound + reserved pods of that user (0 drift through the
    kills), and the history it keeps in its ConfigMap never averages more than the user
    limit (an average of values that never exceed it; more would mean double counting);
  - kubequota exits 0 on the final SIGTERM and its log has no sanitizer report.
Tenants also resize pods (issue 37 route 5): while gated, just released (not bound yet) or
bound, before and after the kills, a tenant sends the pods/resize AdmissionReview to
/admission/mutate as the API server would (sometimes as a dry run), and the pod is updated
in the simulator when it is allowed (a dry run never); the checks above then hold with the
requests the pods have now. One exception, by kubequota's design: a pod resized before it
was bound may, when the resize races its release, show up ungated with a request that does not
fit; kubequota then holds nothing for it and leaves it to filter and bind
(event=reservation_refused). Such a pod counts once bound; until then the polls leave it out and
quiescence accepts kubequota's usage (and reserved-pod count) anywhere between the sum without
it and the sum with it, never above the limit.
"""

import copy
import json
import os
import random
import threading
import time

GATE = "kubequota.io/admission"
USERS = ["u%d" % i for i in range(6)]
USER_MAX_M = 3000
QUEUE_MAX_M = 10000


class Failure(AssertionError):
    pass


def cpu_m(p):
    q = p["spec"]["containers"][0]["resources"]["requests"]["cpu"]
    return int(q[:-1]) if q.endswith("m") else int(float(q) * 1000)


def gated(p):
    return any(g.get("name") == GATE for g in p["spec"].get("schedulingGates") or [])


def alive(p):
    return p["status"].get("phase") not in ("Succeeded", "Failed") and not p["metadata"].get("deletionTimestamp")


class GatingSoak:
    def __init__(self, kqtest, seed, verbose=False):
        self.kt, self.rng, self.verbose = kqtest, random.Random(seed), verbose
        self.sim = self.kq = None
        self.stop_ev = threading.Event()
        self.sched_on = threading.Event()
        self.errors = []
        self.n = 0
        self.kills = self.polls = self.kills_reserved = 0
        self.resizes = {}    # "gated|released|bound allowed|refused|dry|gone" -> count
        self.resized_early = set()  # pods resized (stored) before they were bound
        self.worst = {}
        self.policy, self.halflife, self.flips = "usage", "10m", 0

    def log(self, msg):
        if self.verbose:
            print("  gating: " + msg, flush=True)

    def config(self):
        return self.kt.queues_config({"name": "default"}, {
            "name": "g", "resources": {"max": {"vcore": "%dm" % QUEUE_MAX_M}},
            "properties": {"kubequota.io/gating.policy": self.policy, "kubequota.io/gating.halflife": self.halflife},
            "limits": [{"limit": "each user", "users": ["*"], "maxresources": {"cpu": "%dm" % USER_MAX_M}}]})

    def flip_policy(self):
        self.policy = "fair" if self.policy == "usage" else "usage"
        self.halflife = self.rng.choice(["0", "30s", "10m"])
        self.flips += 1
        self.kq.write_config(self.config())

    @staticmethod
    def cpu_q(q):
        return int(q[:-1]) if q.endswith("m") else int(float(q) * 1000)

    def check_usage_view(self, want, unsure=None):
        """Policy "usage": each waiting user's current usage (what the ledger reported to the
        history) equals its bound + reserved pods in the simulator (plus, at most, its pods
        left to filter and bind)."""
        unsure = unsure or {}
        for q in self.kq.get_json("/ws/v1/partition/default/gating/waiting"):
            if q["queue"] != "root.g" or q.get("policy") != "usage":
                continue
            for u in q["users"]:
                got = self.cpu_q(u["current"].get("cpu", "0"))
                lo = want.get(u["user"], 0)
                if not lo <= got <= lo + unsure.get(u["user"], 0):
                    return "history's current usage of %s: %dm, pods say %dm" % (u["user"], got,
                                                                                  want.get(u["user"], 0))
        return None

    def check_stored_history(self):
        for cm in self.sim.state().get("configmaps", []):
            if cm["metadata"]["name"] != "kubequota-gating-usage":
                continue
            doc = json.loads(cm["data"]["usage.json"])
            for q in doc["queues"]:
                for u in q["users"]:
                    avg = self.cpu_q(u["average"].get("cpu", "0"))
                    if avg > USER_MAX_M + 1:
                        raise Failure("stored average of %s in %s is %dm, above the %dm limit it never exceeded"
                                      % (u["user"], q["queue"], avg, USER_MAX_M))

    def start(self):
        self.sim = self.kt.Sim()
        self.kq = self.kt.Kubequota(self.sim, self.config(), name="kq-gating",
                                    extra_args=("--admission-gate", "--admission-gate-reserve-timeout", "10m",
                                                "--admission-gate-usage-checkpoint", "1s"))
        self.kq.start()
        self.driver = self.kt.SchedulerDriver(self.kq, self.sim)
        self.threads = [threading.Thread(target=self.monitor, daemon=True),
                        threading.Thread(target=self.scheduler, daemon=True)]
        for t in self.threads:
            t.start()

    def stop(self):
        self.stop_ev.set()
        for t in getattr(self, "threads", []):
            t.join(10)
        if self.kq is not None:
            try:
                if self.kq.alive() and self.kq.stop() not in (0, None):
                    self.errors.append("kubequota did not exit 0 on SIGTERM")
            finally:
                self.kq.kill()
        if self.sim is not None:
            self.sim.stop()

    # -- the truth, from the simulator
    def pods(self):
        return [p for p in self.sim.state()["pods"] if alive(p)]

    @staticmethod
    def user(p):
        return p["metadata"]["labels"].get("soak-user")

    def left_to_bind(self, p):
        """An ungated, unbound pod resized before it was bound: kubequota may hold it or not.
        A resize racing the release drops the reservation made for the old request, and when
        the pod then shows up ungated and does not fit, kubequota leaves it to filter and bind
        (ledger.c, event=reservation_refused): it holds nothing until a bind admits it."""
        return p["metadata"]["name"] in self.resized_early and not p["spec"].get("nodeName") and not gated(p)

    def holding(self, pods, unsure=None):
        """Per user and in all, the cpu of bound and released pods; pods left_to_bind are
        summed into unsure (per user) instead."""
        per, total = {}, 0
        for p in pods:
            if unsure is not None and self.left_to_bind(p):
                unsure[self.user(p)] = unsure.get(self.user(p), 0) + cpu_m(p)
            elif p["spec"].get("nodeName") or not gated(p):
                per[self.user(p)] = per.get(self.user(p), 0) + cpu_m(p)
                total += cpu_m(p)
        return per, total

    def check_limits(self, where):
        per, total = self.holding(self.pods(), unsure={})
        for u, m in per.items():
            self.worst[u] = max(self.worst.get(u, 0), m)
            if m > USER_MAX_M:
                raise Failure("%s: user %s holds %dm bound+reserved, limit %dm" % (where, u, m, USER_MAX_M))
        if total > QUEUE_MAX_M:
            raise Failure("%s: queue holds %dm bound+reserved, max %dm" % (where, total, QUEUE_MAX_M))

    def monitor(self):
        while not self.stop_ev.is_set():
            try:
                self.check_limits("poll")
                self.polls += 1
            except Failure as e:
                self.errors.append(str(e))
            self.stop_ev.wait(0.05)

    def scheduler(self):
        while not self.stop_ev.is_set():
            if self.sched_on.is_set():
                for p in self.pods():
                    if not gated(p) and not p["spec"].get("nodeName"):
                        try:
                            self.driver.schedule("default", p["metadata"]["name"])
                        except Exception:  # kubequota down: kube-scheduler retries
                            pass
            self.stop_ev.wait(0.05)

    # -- steps
    def create(self, k):
        for _ in range(k):
            self.n += 1
            u = self.rng.choice(USERS)
            m = self.kt.pod_manifest("g%04d" % self.n, user=u, cpu=self.rng.choice(["500m", "1", "2"]),
                                     memory="64Mi", queue="root.g", gates=(GATE,), labels={"soak-user": u})
            self.sim.create_pod(m)

    def resize(self, k):
        """Issue 37 route 5: k pods resized by their tenants, as the API server would: the
        pods/resize AdmissionReview to /admission/mutate, then the update stored when allowed
        (the API server retries admission on a conflict, so does this). A dry run stores
        nothing (and must hold nothing)."""
        pods = sorted(self.pods(), key=lambda p: p["metadata"]["name"])
        for p in self.rng.sample(pods, min(k, len(pods))):
            name = p["metadata"]["name"]
            cpu = self.rng.choice(["250m", "500m", "1", "1500m", "2", "3"])
            dry = self.rng.random() < 0.15
            for _ in range(3):
                try:
                    cur = self.sim.get_pod("default", name)
                except Exception:
                    self.count("gone")
                    break
                state = "bound" if cur["spec"].get("nodeName") else "gated" if gated(cur) else "released"
                new = copy.deepcopy(cur)
                res = new["spec"]["containers"][0]["resources"]
                res["requests"]["cpu"] = res["limits"]["cpu"] = cpu
                rev = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                       "request": {"uid": "resize-%s" % name, "kind": {"group": "", "version": "v1", "kind": "Pod"},
                                   "resource": {"group": "", "version": "v1", "resource": "pods"},
                                   "subResource": "resize", "namespace": "default", "operation": "UPDATE",
                                   "userInfo": {"username": self.user(cur), "groups": ["system:authenticated"]},
                                   "object": new, "oldObject": cur, "dryRun": dry}}
                try:
                    r = self.kq.post("/admission/mutate", rev)
                    ok = r.status == 200 and r.json()["response"]["allowed"]
                except Exception:  # kubequota down: the API server refuses (failurePolicy Fail)
                    ok = False
                if not ok or dry:
                    self.count("%s %s" % (state, "dry" if dry and ok else "refused" if not ok else "allowed"))
                    break
                try:
                    self.sim.world.update("pods", "default", name, new)
                except self.kt.apisim.ApiError as e:
                    if e.code == 409:
                        continue       # changed meanwhile: admitted again against the new pod
                    self.count("gone")
                    break
                self.count("%s allowed" % state)
                if state != "bound":
                    self.resized_early.add(name)
                self.log("resized %s (%s) to %s" % (name, state, cpu))
                break

    def count(self, key):
        self.resizes[key] = self.resizes.get(key, 0) + 1

    def kill(self):
        self.kills += 1
        self.kq.kill()
        self.kq.start()

    def finish_some(self, frac):
        for p in self.pods():
            if p["spec"].get("nodeName") and self.rng.random() < frac:
                if self.rng.random() < 0.5:
                    self.sim.set_phase("default", p["metadata"]["name"], "Succeeded")
                else:
                    self.sim.delete_pod("default", p["metadata"]["name"])

    def metric(self, text, name):
        for line in text.splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
        return None

    def quiesce(self, timeout=30):
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            try:
                pods = self.pods()
                unsure = {}
                per, _ = self.holding(pods, unsure)
                got = {}
                for u in USERS:
                    use = self.kt.user_usage(self.kq, u, "root.g")
                    got[u] = int(use.get("vcore", use.get("cpu", 0)) or 0)
                want = {u: per.get(u, 0) for u in USERS}
                text = self.kq.get("/metrics").text
                reserved = self.metric(text, "kubequota_gating_reserved_pods")
                waiting = self.metric(text, "kubequota_gating_waiting_pods")
                n_unsure = sum(1 for p in pods if self.left_to_bind(p))
                want_res = sum(1 for p in pods if not gated(p) and not p["spec"].get("nodeName")) - n_unsure
                want_wait = sum(1 for p in pods if gated(p))
                view = self.check_usage_view(want, unsure)
                last = (want, got, want_res, reserved, want_wait, waiting, view, unsure)
                # exact, but for pods left to filter and bind (each held or not); never over
                usage_ok = all(want[u] <= got[u] <= min(want[u] + unsure.get(u, 0), USER_MAX_M) for u in USERS)
                if usage_ok and reserved is not None and want_res <= reserved <= want_res + n_unsure and \
                        waiting == want_wait and view is None:
                    self.check_stored_history()
                    return
            except Exception as e:
                last = repr(e)
            time.sleep(0.2)
        raise Failure("no quiescence (usage want/got, reserved want/got, waiting want/got): %r" % (last,))

    def round(self, r):
        rng = self.rng
        self.sched_on.clear()
        if rng.random() < 0.25:
            self.flip_policy()
            self.log("round %d: policy %s, half-life %s" % (r, self.policy, self.halflife))
        self.finish_some(rng.uniform(0.5, 1.0))     # room frees: the backlog is released, unbound
        self.create(rng.randint(6, 16))
        if rng.random() < 0.5:
            self.resize(rng.randint(1, 4))         # most still gated
        time.sleep(rng.uniform(0.1, 1.2))         # releases happen; nobody binds yet
        if rng.random() < 0.6:
            self.resize(rng.randint(1, 4))         # released and not bound yet, or gated
        self.check_limits("before kill")
        if rng.random() < 0.7:
            held = sum(1 for p in self.pods() if not gated(p) and not p["spec"].get("nodeName"))
            self.kills_reserved += held > 0
            self.log("round %d: SIGKILL between ungate and bind (%d pods reserved)" % (r, held))
            self.kill()                            # reserved pods only in the API's truth
            self.check_limits("after restart")
            if rng.random() < 0.5:
                self.resize(rng.randint(1, 3))
        self.sched_on.set()
        time.sleep(rng.uniform(0.3, 1.5))
        if rng.random() < 0.5:
            self.resize(rng.randint(1, 4))         # bound, released or gated, while binding
        if rng.random() < 0.4:
            self.log("round %d: SIGKILL while binding" % r)
            self.kill()
        self.finish_some(rng.uniform(0.2, 0.7))
        time.sleep(rng.uniform(0.2, 1.0))
        self.sched_on.clear()
        time.sleep(0.3)                            # let binds in flight land
        self.quiesce()
        if self.errors:
            raise Failure(self.errors[0])

    def drain(self, timeout=90, per_pod=3.0):
        """Everything finishes: every gated pod must be released and run (nothing lost).
        The deadline grows with the backlog: this harness's scheduler thread binds about one
        pod a second once the simulator holds a few thousand pods (a 1,000-round run left
        about 500 waiting; releases went on at that rate until a fixed 90 s ran out)."""
        self.sched_on.set()
        deadline = time.monotonic() + max(timeout, per_pod * len(self.pods()))
        while True:
            pods = self.pods()
            if not pods:
                break
            if time.monotonic() > deadline:
                raise Failure("pods never released or bound: %s" % sorted(
                    p["metadata"]["name"] + (" gated" if gated(p) else "") for p in pods)[:20])
            self.finish_some(1.0)
            time.sleep(0.2)
        self.sched_on.clear()
        if self.errors:
            raise Failure(self.errors[0])


def run(kqtest, seed, rounds, verbose=False):
    """Returns (passed, failed, summary line)."""
    s = GatingSoak(kqtest, seed, verbose)
    passed = failed = 0
    t0 = time.monotonic()
    try:
        s.start()
        for r in range(1, rounds + 1):
            rt = time.monotonic()
            s.round(r)
            passed += 1
            print("gating round %d ok (%.1fs) pods=%d kills=%d policy=%s flips=%d"
                  % (r, time.monotonic() - rt, s.n, s.kills, s.policy, s.flips), flush=True)
        s.drain()
    except Exception as e:
        failed += 1
        print("FAIL gating round (seed %d): %s" % (seed, e), flush=True)
        if s.kq is not None:
            import shutil
            keep = "/tmp/kq-soak-gating-fail-%d" % seed
            os.makedirs(keep, exist_ok=True)
            shutil.copy(s.kq.log_path, os.path.join(keep, "kubequota.log"))
            with open(os.path.join(keep, "pods.json"), "w") as f:
                json.dump(s.sim.state()["pods"], f, indent=1)
            print("  kubequota log and the simulator's pods kept in %s/" % keep)
    finally:
        s.stop()
        log = s.kq.logs() if s.kq is not None else ""
        for marker in kqtest.SANITIZER_MARKERS:
            if marker in log and not s.errors:
                s.errors.append("sanitizer report in kubequota's log (%s)" % marker)
        if s.errors and not failed:
            failed += 1
            print("FAIL gating (seed %d): %s" % (seed, s.errors[0]), flush=True)
    line = ("gating: %d rounds, %d pods, %d SIGKILLs (%d with released pods not bound yet), %d polls, peak per "
            "user %dm of %dm, %.0fs; resizes: %s" % (rounds, s.n, s.kills, s.kills_reserved, s.polls,
                                                     max(s.worst.values() or [0]), USER_MAX_M, time.monotonic() - t0,
                                                     ", ".join("%s=%d" % kv for kv in sorted(s.resizes.items()))
                                                     or "none"))
    return passed, failed, line
