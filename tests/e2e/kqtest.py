"""Shared helpers for kubequota's end-to-end tests (standard library only).

  certs()                  throwaway CA + certificates, made once per run (certs/gen-certs.sh)
  Sim                      the API simulator (tests/e2e/apisim.py) in this process, over HTTPS
  Kubequota                bin/kubequota serve with an inline queues.yaml against a Sim
  SchedulerDriver          behaves like kube-scheduler: filter, then bind, over HTTPS
  HttpClient               small HTTPS/JSON client verifying the test CA
  expected_usage()         usage per user/group/queue computed from the simulator's state
  actual_usage()           the same from kubequota's REST view, for comparison
  wait_until()             poll a condition (tests wait for states, never sleep-and-assert)
  views(), view_diff()     every usage view of a kubequota, canonical, and the differences
                           between two (a running kubequota and one started fresh)
  KQTestCase               a unittest base class wiring all of the above per test

Configs are written as Python data and rendered to YuniKorn's queues.yaml by to_yaml(), so
the expectation helpers know the queues and limits without a YAML parser.
"""

import atexit
import fractions
import http.client
import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

import apisim  # noqa: E402

SCHED = "kubequota-scheduler"
PARTITION = "default"
ANN_USER = "kubequota.io/user-info"
LABEL_QUEUE = "kubequota.io/queue"
LABEL_APP = "kubequota.io/app-id"


def binary():
    b = os.environ.get("KQ_BINARY") or os.path.join(REPO, "bin", "kubequota")
    return b if os.path.isabs(b) else os.path.join(REPO, b)


def have_binary():
    b = binary()
    return os.path.isfile(b) and os.access(b, os.X_OK)


# ---------------------------------------------------------------------------------------
# certificates, temp dirs
# ---------------------------------------------------------------------------------------

_tmp_root = None
_certs = None
_lock = threading.Lock()


def tmp_root():
    global _tmp_root
    with _lock:
        if _tmp_root is None:
            _tmp_root = tempfile.mkdtemp(prefix="kq-e2e-")
            if not os.environ.get("KQ_E2E_KEEP"):
                atexit.register(shutil.rmtree, _tmp_root, True)
        return _tmp_root


def certs():
    """Dict of paths: ca, ca_key, server, server_key, client, client_key, apiserver, apiserver_key."""
    global _certs
    root = tmp_root()
    with _lock:
        if _certs is None:
            d = os.path.join(root, "certs")
            r = subprocess.run(["bash", os.path.join(REPO, "certs", "gen-certs.sh"), d],
                               capture_output=True, text=True)
            if r.returncode != 0:
                raise RuntimeError("gen-certs.sh failed: %s%s" % (r.stdout, r.stderr))
            _certs = {n: os.path.join(d, f) for n, f in (
                ("ca", "ca.crt"), ("ca_key", "ca.key"), ("server", "server.crt"),
                ("server_key", "server.key"), ("client", "client.crt"),
                ("client_key", "client.key"), ("apiserver", "apiserver.crt"),
                ("apiserver_key", "apiserver.key"))}
        return _certs


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


GATE_RELEASED = re.compile(r"event=gate_released pod=(\S+)")
UNGATE_FAILED = re.compile(r"event=ungate_failed pod=(\S+)")


def gate_release_order(kq, sim, gate="kubequota.io/admission"):
    """The pods ("ns/name") whose gate kubequota removed, in the order its passes decided to
    release them: the order of its event=gate_released log lines (written under the gating
    controller's lock, before any PATCH of the pass is sent), not the order the PATCHes
    reached the simulator (one pass sends them in parallel). A decision followed by an
    event=ungate_failed for the same pod did not release it (the pod went back in line);
    of a pod decided more than once (a failed removal, a restart in between) its last
    decision counts. Only pods whose removal reached the simulator are listed, and every
    one of those must have a decision in the log."""
    landed = {key for _, key, g in sim.state()["gate_removals"] if g == gate}
    decided = []  # [key or None], in log order; None: a decision a failure took back
    last = {}     # key -> index in decided of its latest decision
    for line in kq.logs().splitlines():
        m = GATE_RELEASED.search(line)
        if m:
            last[m.group(1)] = len(decided)
            decided.append(m.group(1))
            continue
        m = UNGATE_FAILED.search(line)
        if m and m.group(1) in last and decided[last[m.group(1)]] is not None:
            decided[last.pop(m.group(1))] = None
    order = [k for i, k in enumerate(decided) if k is not None and last.get(k) == i and k in landed]
    missing = landed - set(order)
    if missing:
        raise AssertionError("gate removed without a release decision in kubequota's log: %s"
                             % sorted(missing))
    return order


def wait_until(pred, timeout=10.0, interval=0.05, msg=None):
    """Calls pred() until it returns something truthy; returns it. On timeout raises
    AssertionError naming msg and the last value (or exception) seen."""
    deadline = time.monotonic() + timeout
    last = None
    while True:
        try:
            last = pred()
            if last:
                return last
        except (AssertionError, OSError, http.client.HTTPException) as e:
            last = e  # predicates may assert to explain themselves; servers may be starting
        if time.monotonic() >= deadline:
            raise AssertionError("timed out after %.1fs waiting for %s; last: %s"
                                 % (timeout, msg or getattr(pred, "__name__", "condition"), last))
        time.sleep(interval)


# ---------------------------------------------------------------------------------------
# HTTP
# ---------------------------------------------------------------------------------------

class Response:
    def __init__(self, status, headers, body):
        self.status, self.headers, self.body = status, headers, body

    def json(self):
        return json.loads(self.body.decode() or "null")

    @property
    def text(self):
        return self.body.decode(errors="replace")

    def __repr__(self):
        return "<Response %d %s>" % (self.status, self.text[:300])


class HttpClient:
    """One new connection per request (like a fresh client), TLS verified against ca."""

    def __init__(self, base, ca=None, cert=None, key=None, token=None, timeout=10.0):
        u = base.split("://", 1)
        self.https = u[0] == "https"
        hostport = u[1].rstrip("/")
        host, _, port = hostport.rpartition(":")
        self.host, self.port = host.strip("[]"), int(port)
        self.token, self.timeout = token, timeout
        self.ctx = None
        if self.https:
            self.ctx = ssl.create_default_context(cafile=ca) if ca else \
                ssl._create_unverified_context()
            if cert:
                self.ctx.load_cert_chain(cert, key)

    def connection(self, timeout=None):
        t = timeout or self.timeout
        if self.https:
            return http.client.HTTPSConnection(self.host, self.port, timeout=t, context=self.ctx)
        return http.client.HTTPConnection(self.host, self.port, timeout=t)

    def request(self, method, path, body=None, raw=None, headers=None, timeout=None):
        h = {"Accept": "application/json"}
        if self.token:
            h["Authorization"] = "Bearer " + self.token
        data = None
        if raw is not None:
            data = raw if isinstance(raw, bytes) else raw.encode()
            h["Content-Type"] = "application/json"
        elif body is not None:
            data = json.dumps(body).encode()
            h["Content-Type"] = "application/json"
        h.update(headers or {})
        c = self.connection(timeout)
        try:
            c.request(method, path, body=data, headers=h)
            r = c.getresponse()
            return Response(r.status, dict(r.getheaders()), r.read())
        finally:
            c.close()

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def post(self, path, body=None, **kw):
        return self.request("POST", path, body=body, **kw)


# ---------------------------------------------------------------------------------------
# simulator
# ---------------------------------------------------------------------------------------

class Sim:
    """apisim in this process over HTTPS, with direct access to its world."""

    def __init__(self, token="e2e-token", nodes=("node-1", "node-2", "node-3"),
                 bookmark_interval=1.0):
        c = certs()
        self.token = token
        self.sim = apisim.ApiSim("127.0.0.1", 0, c["apiserver"], c["apiserver_key"], token,
                                 bookmark_interval)
        self.world = self.sim.world
        self.sim.start()
        self.url = self.sim.url
        self.http = HttpClient(self.url, ca=c["ca"], token=token)
        for n in nodes:
            self.world.add_node(n, cpu="64", memory="256Gi")

    def stop(self):
        self.sim.stop()

    def kubeconfig(self, path):
        write_kubeconfig(path, self.url, certs()["ca"], self.token)
        return path

    # world operations
    def create_pod(self, pod):
        ns = pod["metadata"].get("namespace") or "default"
        return self.world.create_pod(ns, pod)

    def get_pod(self, ns, name):
        return self.world.get("pods", ns, name)

    def delete_pod(self, ns, name):
        return self.world.delete_pod(ns, name)

    def set_phase(self, ns, name, phase):
        return self.world.set_pod_phase(ns, name, phase)

    def bind(self, ns, name, node, uid=None):
        """Binds like another scheduler would, through the REST API."""
        body = {"kind": "Binding", "apiVersion": "v1",
                "metadata": {"name": name, "namespace": ns},
                "target": {"kind": "Node", "name": node}}
        if uid:
            body["metadata"]["uid"] = uid
        return self.http.post("/api/v1/namespaces/%s/pods/%s/binding" % (ns, name), body)

    def state(self):
        return self.world.state()

    def events(self, ns=None):
        return [e for e in self.state()["events"]
                if ns is None or e["metadata"].get("namespace") == ns]

    def compact(self):
        return self.world.compact()

    def drop_watches(self, mode="close", resource=None):
        return self.world.drop_watches(mode, resource)

    def stall_watches(self, resource=None):
        return self.world.stall_watches(resource)

    def fault(self, **spec):
        return self.world.add_fault(spec)

    def clear_faults(self):
        return self.world.clear_faults()


def write_kubeconfig(path, server, ca, token=None, client_cert=None, client_key=None):
    user = {}
    if token:
        user["token"] = token
    if client_cert:
        user["client-certificate"] = client_cert
        user["client-key"] = client_key
    cfg = {"apiVersion": "v1", "kind": "Config", "current-context": "sim",
           "clusters": [{"name": "sim", "cluster": {"server": server,
                                                    "certificate-authority": ca}}],
           "users": [{"name": "sim-user", "user": user}],
           "contexts": [{"name": "sim", "context": {"cluster": "sim", "user": "sim-user",
                                                    "namespace": "default"}}]}
    with open(path, "w") as f:
        f.write(to_yaml(cfg))
    return path


# ---------------------------------------------------------------------------------------
# YAML rendering (block style; strings double-quoted, which is valid YAML)
# ---------------------------------------------------------------------------------------

def _scalar(v):
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return str(v)
    return json.dumps(str(v))


def to_yaml(obj, indent=0):
    pad = " " * indent
    lines = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            if isinstance(v, (dict, list)) and v:
                lines.append("%s%s:" % (pad, k))
                lines.append(to_yaml(v, indent + 2))
            elif isinstance(v, dict):
                lines.append("%s%s: {}" % (pad, k))
            elif isinstance(v, list):
                lines.append("%s%s: []" % (pad, k))
            else:
                lines.append("%s%s: %s" % (pad, k, _scalar(v)))
    elif isinstance(obj, list):
        for v in obj:
            if isinstance(v, dict) and v:
                sub = to_yaml(v, indent + 2).split("\n")
                lines.append("%s- %s" % (pad, sub[0].lstrip()))
                lines.extend(sub[1:])
            elif isinstance(v, list) and v:
                lines.append("%s-" % pad)
                lines.append(to_yaml(v, indent + 2))
            else:
                lines.append("%s- %s" % (pad, _scalar(v) if not isinstance(v, (dict, list))
                                         else ("{}" if isinstance(v, dict) else "[]")))
    else:
        lines.append(pad + _scalar(obj))
    return "\n".join(lines)


def queues_config(*queues, limits=None, partition=PARTITION):
    """A one-partition config whose root has the given child queue dicts."""
    root = {"name": "root", "submitacl": "*", "queues": list(queues)}
    part = {"name": partition, "queues": [root]}
    if limits:
        part["limits"] = limits
    return {"partitions": [part]}


# ---------------------------------------------------------------------------------------
# kubequota
# ---------------------------------------------------------------------------------------

class KubequotaError(AssertionError):
    pass


class Kubequota:
    """bin/kubequota serve against a Sim, with its own work dir, config and log file."""

    def __init__(self, sim, config, scheduler_name=SCHED, extra_args=(), name="kq"):
        self.sim = sim
        self.workdir = tempfile.mkdtemp(prefix=name + "-", dir=tmp_root())
        self.config = config
        self.config_path = os.path.join(self.workdir, "queues.yaml")
        self.write_config(config)
        self.kubeconfig = sim.kubeconfig(os.path.join(self.workdir, "kubeconfig"))
        self.port = free_port()
        self.url = "https://127.0.0.1:%d" % self.port
        self.log_path = os.path.join(self.workdir, "kubequota.log")
        self.scheduler_name = scheduler_name
        self.extra_args = list(extra_args)
        self.proc = None
        self.starts = 0
        # The usage view is closed unless a mechanism is configured: the tests use a bearer
        # token from a file, as an operator without a client CA would.
        self.rest_token = os.urandom(16).hex()
        self.rest_token_path = os.path.join(self.workdir, "rest-token")
        with open(self.rest_token_path, "w") as f:
            f.write(self.rest_token + "\n")
        self.http = HttpClient(self.url, ca=certs()["ca"], token=self.rest_token)

    def write_config(self, config):
        self.config = config
        text = config if isinstance(config, str) else to_yaml(config) + "\n"
        with open(self.config_path, "w") as f:
            f.write(text)

    def argv(self):
        c = certs()
        return [binary(), "serve", "--config", self.config_path, "--kubeconfig", self.kubeconfig,
                "--listen", "127.0.0.1:%d" % self.port, "--tls-cert", c["server"],
                "--tls-key", c["server_key"], "--scheduler-name", self.scheduler_name,
                "--partition", PARTITION, "--log-level", "debug",
                "--rest-token-file", self.rest_token_path] + self.extra_args

    def start(self, wait=True, timeout=20.0):
        self.starts += 1
        log = open(self.log_path, "ab")
        log.write(("---- start #%d: %s\n" % (self.starts, " ".join(self.argv()))).encode())
        log.flush()
        self.proc = subprocess.Popen(self.argv(), stdout=log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, cwd=REPO)
        log.close()
        if wait:
            self.wait_ready(timeout)
        return self

    def wait_ready(self, timeout=20.0):
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise KubequotaError("kubequota exited with %s before /readyz:\n%s"
                                     % (self.proc.returncode, self.log_tail()))
            try:
                r = self.http.get("/readyz", timeout=2)
                last = r
                if r.status == 200:
                    return
            except (OSError, http.client.HTTPException) as e:
                last = e
            time.sleep(0.05)
        raise KubequotaError("kubequota not ready after %.0fs (last: %r):\n%s"
                             % (timeout, last, self.log_tail()))

    def stop(self, timeout=10.0):
        """SIGTERM, then SIGKILL. Returns the exit code."""
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else None
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise KubequotaError("kubequota did not stop within %.0fs of SIGTERM:\n%s"
                                 % (timeout, self.log_tail()))

    def kill(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def restart(self, wait=True):
        self.stop()
        return self.start(wait)

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def logs(self):
        try:
            with open(self.log_path, "rb") as f:
                return f.read().decode(errors="replace")
        except OSError:
            return ""

    def log_tail(self, n=60):
        lines = self.logs().splitlines()
        return "\n".join("    | " + line for line in lines[-n:])

    # REST
    def get(self, path, **kw):
        return self.http.get(path, **kw)

    def post(self, path, body=None, **kw):
        return self.http.post(path, body, **kw)

    def get_json(self, path):
        r = self.http.get(path)
        if r.status != 200:
            raise AssertionError("GET %s -> %d %s" % (path, r.status, r.text[:500]))
        return r.json()

    def users(self):
        return self.get_json("/ws/v1/partition/%s/usage/users" % PARTITION)

    def groups(self):
        return self.get_json("/ws/v1/partition/%s/usage/groups" % PARTITION)

    def queues(self):
        return self.get_json("/ws/v1/partition/%s/queues" % PARTITION)


# ---------------------------------------------------------------------------------------
# kube-scheduler stand-in
# ---------------------------------------------------------------------------------------

def ci_get(d, key):
    """Go's encoding/json matches keys case-insensitively; so do we when reading replies."""
    if not isinstance(d, dict):
        return None
    if key in d:
        return d[key]
    for k, v in d.items():
        if k.lower() == key.lower():
            return v
    return None


class SchedulerDriver:
    """Does what kube-scheduler does with an extender (nodeCacheCapable: true, bindVerb set):
    POST <prefix>/filter with the pod from its cache and the candidate node names; if some
    nodes remain, POST <prefix>/bind for the first one."""

    def __init__(self, kq, sim, prefix="/scheduler", nodes=None):
        self.kq, self.sim, self.prefix = kq, sim, prefix
        self.nodes = nodes
        self.last = None

    def node_names(self):
        if self.nodes is not None:
            return list(self.nodes)
        return [n["metadata"]["name"] for n in self.sim.state()["nodes"]]

    @staticmethod
    def cached(pod):
        """The informer cache's copy: no kind/apiVersion."""
        pod = json.loads(json.dumps(pod))
        pod.pop("kind", None)
        pod.pop("apiVersion", None)
        return pod

    def filter(self, pod, nodes):
        r = self.kq.post(self.prefix + "/filter", {"Pod": self.cached(pod), "Nodes": None,
                                                   "NodeNames": nodes})
        if r.status != 200:
            raise AssertionError("filter: HTTP %d %s" % (r.status, r.text[:500]))
        return r.json()

    def bind_call(self, pod, node):
        md = pod["metadata"]
        r = self.kq.post(self.prefix + "/bind", {"PodName": md["name"],
                                                 "PodNamespace": md["namespace"],
                                                 "PodUID": md["uid"], "Node": node})
        if r.status != 200:
            raise AssertionError("bind: HTTP %d %s" % (r.status, r.text[:500]))
        return r.json()

    @staticmethod
    def filter_reason(res):
        err = ci_get(res, "Error")
        if err:
            return "error: " + err
        for k in ("FailedAndUnresolvableNodes", "FailedNodes"):
            m = ci_get(res, k)
            if m:
                return next(iter(m.values()))
        return "no nodes left"

    def schedule(self, ns, name, nodes=None):
        """Returns (allowed, reason): (True, node) when bound, (False, why) when not."""
        pod = self.sim.get_pod(ns, name)
        nodes = nodes if nodes is not None else self.node_names()
        res = self.filter(pod, nodes)
        left = ci_get(res, "NodeNames") or []
        self.last = {"filter": res}
        if not left or ci_get(res, "Error"):
            return False, self.filter_reason(res)
        bad = [n for n in left if n not in nodes]
        if bad:
            raise AssertionError("filter claims nodes not in the input: %s" % bad)
        return self.bind(pod, left[0])

    def bind(self, pod, node):
        res = self.bind_call(pod, node)
        self.last = dict(self.last or {}, bind=res)
        err = ci_get(res, "Error")
        if err:
            return False, err
        return True, node


# ---------------------------------------------------------------------------------------
# pods, quantities, expected usage
# ---------------------------------------------------------------------------------------

def pod_manifest(name, ns="default", user=None, groups=(), cpu="500m", memory="256Mi",
                 queue=None, app=None, scheduler=SCHED, labels=None, extra_requests=None,
                 node=None, gates=()):
    md = {"name": name, "namespace": ns, "labels": dict(labels or {}), "annotations": {}}
    if user is not None:
        md["annotations"][ANN_USER] = json.dumps({"user": user, "groups": list(groups)})
    if queue:
        md["labels"][LABEL_QUEUE] = queue
    if app:
        md["labels"][LABEL_APP] = app
    req = {}
    if cpu is not None:
        req["cpu"] = cpu
    if memory is not None:
        req["memory"] = memory
    req.update(extra_requests or {})
    spec = {"containers": [{"name": "main", "image": "busybox:1.36",
                            "command": ["sleep", "3600"],
                            "resources": {"requests": req, "limits": dict(req)}}]}
    if scheduler:
        spec["schedulerName"] = scheduler
    if node:
        spec["nodeName"] = node
    if gates:
        spec["schedulingGates"] = [{"name": g} for g in gates]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": md, "spec": spec}


_SUFFIX = {"n": fractions.Fraction(1, 10**9), "u": fractions.Fraction(1, 10**6),
           "m": fractions.Fraction(1, 1000), "": 1, "k": 10**3, "M": 10**6, "G": 10**9,
           "T": 10**12, "P": 10**15, "E": 10**18, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30,
           "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}


def parse_quantity(q):
    """Kubernetes quantity -> Fraction."""
    s = str(q).strip()
    for suf in ("Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "n", "u", "m", "k", "M", "G", "T", "P", "E"):
        if s.endswith(suf) and not (suf == "E" and "e" in s.lower()[:-1]):
            return fractions.Fraction(s[:-len(suf)]) * _SUFFIX[suf]
    if "e" in s.lower():
        base, exp = s.lower().split("e")
        return fractions.Fraction(base) * fractions.Fraction(10) ** int(exp)
    return fractions.Fraction(s)


def canonical(name, q):
    """cpu -> millicores, everything else -> integer units (rounded up, like Kubernetes)."""
    v = parse_quantity(q)
    if name == "cpu":
        v = v * 1000
    n = v.numerator // v.denominator
    return n + (1 if n * v.denominator < v.numerator else 0)


def pod_request(pod):
    spec = pod.get("spec") or {}

    def res(c):
        return {k: canonical(k, v) for k, v in
                (((c.get("resources") or {}).get("requests")) or {}).items()}
    total = {}
    for c in spec.get("containers") or []:
        for k, v in res(c).items():
            total[k] = total.get(k, 0) + v
    for c in spec.get("initContainers") or []:
        for k, v in res(c).items():
            total[k] = max(total.get(k, 0), v)
    for k, v in (spec.get("overhead") or {}).items():
        total[k] = total.get(k, 0) + canonical(k, v)
    return total


def config_queues(config):
    """{path: queue dict} for the first partition of a config dict."""
    out = {}

    def walk(q, parent):
        path = q["name"] if not parent else parent + "." + q["name"]
        out[path] = q
        for c in q.get("queues") or []:
            walk(c, path)
    for q in config["partitions"][0]["queues"]:
        walk(q, "")
    return out


def pod_identity(pod, queues, owner=False):
    """(user, groups, queue path, application) as kubequota reads them; owner=True: the
    application as with --app-id-fallback owner."""
    md = pod["metadata"]
    ann = md.get("annotations") or {}
    labels = md.get("labels") or {}
    user, groups = "nobody", []
    if ANN_USER in ann:
        info = json.loads(ann[ANN_USER])
        user, groups = info.get("user") or "nobody", list(info.get("groups") or [])
    q = labels.get(LABEL_QUEUE) or ann.get(LABEL_QUEUE)
    if q:
        if q != "root" and not q.startswith("root."):
            leaves = [p for p in queues if p.rsplit(".", 1)[-1] == q]
            q = leaves[0] if len(leaves) == 1 else "root." + q
    elif "root." + md["namespace"] in queues:
        q = "root." + md["namespace"]
    else:
        q = "root.default"
    return user, groups, q, app_id(md, owner)


def app_id(md, owner=False):
    """The application id as YuniKorn's k8shim reads it (pkg/common/utils/utils.go
    GetApplicationIDFromPod; README "Who, where, what"): kubequota's label, then YuniKorn's
    app-id label, its annotation, applicationId, spark-app-selector; then YuniKorn's
    generated id (GenerateApplicationID: "yunikorn-<namespace>-autogen", cut at 63 bytes).
    owner=True: --app-id-fallback owner, the controller's UID, then the pod's own."""
    labels, ann = md.get("labels") or {}, md.get("annotations") or {}
    for v in (labels.get(LABEL_APP), labels.get("yunikorn.apache.org/app-id"),
              ann.get("yunikorn.apache.org/app-id"), labels.get("applicationId"),
              labels.get("spark-app-selector")):
        if v:
            return v
    if not owner:
        return ("yunikorn-%s-autogen" % md.get("namespace", "default"))[:63]
    for o in md.get("ownerReferences") or []:
        if o.get("controller"):
            return o["uid"]
    return md["uid"]


def tracked_group(queues, path, groups):
    """The group an application is tracked against (see include/kubequota/ugm.h): walk the
    limits from the leaf up to root; the first group limit naming one of the user's groups
    wins; a "*" group limit tracks it against the group "*" (cumulative, as YuniKorn)."""
    parts = path.split(".")
    for i in range(len(parts), 0, -1):
        q = queues.get(".".join(parts[:i])) or {}
        for lim in q.get("limits") or []:
            lg = lim.get("groups") or []
            if not lg:
                continue
            for g in groups:
                if g in lg:
                    return g
            if "*" in lg and groups:
                return "*"
    return None


def counts(pod):
    """Would kubequota count this pod? Bound to a node, alive, not terminal."""
    return bool(pod["spec"].get("nodeName")) and \
        pod["status"].get("phase") not in ("Succeeded", "Failed") and \
        not pod["metadata"].get("deletionTimestamp")


def _add(d, key, res):
    cur = d.setdefault(key, {})
    for k, v in res.items():
        cur[k] = cur.get(k, 0) + v


def expected_usage(state, config):
    """{"users": {user: {queue_path: {res: n}}}, "groups": {...}, "queues": {path: {...}},
    "apps": {user: set(app)}} from the simulator's state."""
    queues = config_queues(config)
    users, groups, qs, apps = {}, {}, {}, {}
    for pod in state["pods"]:
        if not counts(pod):
            continue
        user, gs, path, app = pod_identity(pod, queues)
        req = pod_request(pod)
        g = tracked_group(queues, path, gs)
        parts = path.split(".")
        for i in range(1, len(parts) + 1):
            prefix = ".".join(parts[:i])
            _add(users.setdefault(user, {}), prefix, req)
            _add(qs, prefix, req)
            if g:
                _add(groups.setdefault(g, {}), prefix, req)
        apps.setdefault(user, set()).add(app)
    return normalize({"users": users, "groups": groups, "queues": qs, "apps": apps})


def _clean(res):
    """Without pods (every pod counts pods: 1); cpu as kubequota's view names it ("vcore",
    as YuniKorn's shim does) or as the pods name it."""
    return {("cpu" if k == "vcore" else k): v for k, v in (res or {}).items() if k != "pods" and v}


def _flatten(node, parent, out, key="resourceUsage"):
    name = ci_get(node, "queuePath") or ci_get(node, "queuename") or ci_get(node, "queueName")
    if name is None:
        return
    path = name if (name == "root" or name.startswith("root.") or not parent) \
        else parent + "." + name
    res = _clean(ci_get(node, key))
    if res:
        out[path] = res
    for c in ci_get(node, "children") or []:
        _flatten(c, path, out, key)


def normalize(u):
    def nz(m):
        out = {}
        for k, per_q in m.items():
            per_q = {q: _clean(r) for q, r in per_q.items() if _clean(r)}
            if per_q:
                out[k] = per_q
        return out
    return {"users": nz(u["users"]), "groups": nz(u["groups"]),
            "queues": {q: _clean(r) for q, r in u["queues"].items() if _clean(r)},
            "apps": {k: v for k, v in u.get("apps", {}).items() if v}}


def actual_usage(kq):
    """The same shape as expected_usage from kubequota's REST view."""
    users, groups, qs, apps = {}, {}, {}, {}
    uv = kq.users()
    for u in (uv if isinstance(uv, list) else [uv]) if uv else []:
        per = {}
        tree = ci_get(u, "queues")
        if tree:
            _flatten(tree, "", per)
        users[ci_get(u, "userName")] = per
        if tree:
            apps[ci_get(u, "userName")] = set(ci_get(tree, "runningApplications") or [])
    gv = kq.groups()
    for g in (gv if isinstance(gv, list) else [gv]) if gv else []:
        per = {}
        tree = ci_get(g, "queues")
        if tree:
            _flatten(tree, "", per)
        groups[ci_get(g, "groupName")] = per
    qv = kq.queues()
    for q in (qv if isinstance(qv, list) else [qv]) if qv else []:
        _flatten(q, "", qs, "allocatedResource")
    return normalize({"users": users, "groups": groups, "queues": qs, "apps": apps})


def usage_matches(kq, sim, config, check_apps=False):
    """Predicate for wait_until: True when kubequota's view equals the simulator's truth;
    otherwise raises AssertionError describing the difference."""
    exp = expected_usage(sim.state(), config)
    act = actual_usage(kq)
    diffs = []
    for k in ("users", "groups", "queues") + (("apps",) if check_apps else ()):
        if exp[k] != act[k]:
            diffs.append("%s: expected %s, kubequota shows %s" % (k, exp[k], act[k]))
    if diffs:
        raise AssertionError("; ".join(diffs))
    return True


def user_usage(kq, user, queue="root"):
    """{res: n} a user uses at a queue according to the REST view (empty when none)."""
    return actual_usage(kq)["users"].get(user, {}).get(queue, {})


# ---------------------------------------------------------------------------------------
# views compared between two daemons (a running one and one started fresh on the same objects)
# ---------------------------------------------------------------------------------------

VOLATILE = {"lastUpdate", "timestamp", "generatedAt", "uptime", "startTime"}


def canon(v):
    """A view with lists sorted (so that orders that mean nothing do not show) and volatile
    keys left out."""
    if isinstance(v, dict):
        return {k: canon(x) for k, x in v.items() if k not in VOLATILE}
    if isinstance(v, list):
        items = [canon(x) for x in v]
        return sorted(items, key=lambda x: json.dumps(x, sort_keys=True))
    return v


def views(kq):
    """The usage views users, groups and queues (the quota tree is in queues), canonical."""
    return {"users": canon(kq.users()), "groups": canon(kq.groups()), "queues": canon(kq.queues())}


def item_name(x):
    if not isinstance(x, dict):
        return None
    for k in ("name", "queuename", "queuePath", "userName", "groupName"):
        if isinstance(x.get(k), str):
            return x[k]
    return None


def view_diff(a, b, path="", out=None, limit=12):
    """The first differences between two views, as "path: a vs b" lines; lists of named
    items (groups, queues, users) are compared by name."""
    out = [] if out is None else out
    if len(out) >= limit:
        return out
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                out.append("%s/%s: %s vs %s" % (path, k, json.dumps(a.get(k))[:200], json.dumps(b.get(k))[:200]))
            else:
                view_diff(a[k], b[k], "%s/%s" % (path, k), out, limit)
    elif isinstance(a, list) and isinstance(b, list) and all(map(item_name, a + b)):
        ka, kb = {item_name(x): x for x in a}, {item_name(x): x for x in b}
        view_diff(ka, kb, path, out, limit)
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            view_diff(x, y, "%s[%d]" % (path, i), out, limit)
    elif a != b:
        out.append("%s: %s vs %s" % (path, json.dumps(a)[:300], json.dumps(b)[:300]))
    return out


# ---------------------------------------------------------------------------------------
# unittest base
# ---------------------------------------------------------------------------------------

SANITIZER_MARKERS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:",
                     "WARNING: ThreadSanitizer")


class KQTestCase(unittest.TestCase):
    """Per test: a fresh simulator, kubequota started with CONFIG, a scheduler driver."""

    CONFIG = None        # config dict (rendered with to_yaml)
    NODES = ("node-1", "node-2", "node-3")
    START = True         # start kubequota in setUp
    EXTRA_ARGS = ()

    def setUp(self):
        if not have_binary():
            self.skipTest("%s not built" % binary())
        self.sim = Sim(nodes=self.NODES)
        self.addCleanup(self.sim.stop)
        self.kq = Kubequota(self.sim, self.CONFIG, extra_args=self.EXTRA_ARGS)
        self.addCleanup(self.check_clean_exit)
        self.sched = SchedulerDriver(self.kq, self.sim)
        if self.START:
            self.kq.start()

    def check_clean_exit(self):
        """Stops kubequota with SIGTERM; a sanitizer report anywhere in its log fails the test
        (run the suite with --binary build/asan/kubequota to use this)."""
        rc = None
        try:
            if self.kq.alive():
                rc = self.kq.stop()
        finally:
            self.kq.kill()
        log = self.kq.logs()
        if rc not in (None, 0):
            raise AssertionError("kubequota exited with %s after SIGTERM:\n%s"
                                 % (rc, self.kq.log_tail(30)))
        for marker in SANITIZER_MARKERS:
            if marker in log:
                raise AssertionError("kubequota's log has a sanitizer report (%s):\n%s"
                                     % (marker, self.kq.log_tail(80)))

    # helpers for scenarios
    def create(self, name, **kw):
        return self.sim.create_pod(pod_manifest(name, **kw))

    def schedule(self, name, ns="default"):
        return self.sched.schedule(ns, name)

    def assert_bound(self, name, ns="default"):
        ok, why = self.schedule(name, ns)
        self.assertTrue(ok, "pod %s/%s should have been bound, got: %s" % (ns, name, why))
        self.assertTrue(self.sim.get_pod(ns, name)["spec"].get("nodeName"),
                        "kubequota said bound but the API server has no nodeName")
        return why

    def assert_denied(self, name, ns="default", *words):
        ok, why = self.schedule(name, ns)
        self.assertFalse(ok, "pod %s/%s should have been denied" % (ns, name))
        self.assertFalse(self.sim.get_pod(ns, name)["spec"].get("nodeName"),
                         "denied pod must not be bound")
        for w in words:
            self.assertIn(w, why, "denial reason should name %r" % w)
        return why

    def wait_usage(self, timeout=15.0, check_apps=False):
        return wait_until(lambda: usage_matches(self.kq, self.sim, self.CONFIG, check_apps),
                          timeout, 0.1, "kubequota's usage view to match the API server")
