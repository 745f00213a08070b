#!/usr/bin/python3
"""A throwaway real Kubernetes control plane on loopback, with kubequota in the loop.

  python3 tests/cluster/cluster.py up [--nodes N] [--keep]   start everything, print how to
                                                             reach it, serve until Ctrl-C
  from cluster import Cluster                                 the same from a test

What it starts, every process on 127.0.0.1 and stopped by PID on success, failure and Ctrl-C:
  etcd            --unsafe-no-fsync, data in the work directory
  kube-apiserver  TLS, a token-auth file of test users and groups (USERS below), RBAC
                  authorization, service-account token signing (TokenRequest, TokenReview)
  kube-controller-manager  every default controller (ServiceAccounts, namespaces, garbage
                  collection, node lifecycle, ReplicaSets, Deployments, Jobs), each as its own
                  ServiceAccount
  kwok            manages the fake Nodes (annotation kwok.x-k8s.io/node=fake): they become
                  Ready, pods bound to them become Running, and a deletion completes (kwok's
                  default pod stages: ready, complete for Job-owned pods, delete)
  kubequota       bin/kubequota serve with the arguments the chart renders for its container
                  (paths and ports rewritten), as the chart's ServiceAccount: a TokenRequest
                  token, bound by the chart's rendered (Cluster)Roles and nothing else
  kube-scheduler  the chart's KubeSchedulerConfiguration (profile kubequota-scheduler, kubequota
                  as extender over TLS on its scheduler listener), as the same ServiceAccount

The chart is rendered once with the real Helm (scripts/helm.sh): its CRDs, ServiceAccount,
(Cluster)Roles and bindings, ConfigMaps and webhook configurations are applied as rendered,
except that each webhook's clientConfig.service becomes url: https://127.0.0.1:PORT/PATH.
The Deployment, Service and Secret are not: kubequota and kube-scheduler run as local
processes. The binaries come from scripts/kube-build.sh (tests/cluster/versions.env).
"""

import argparse
import base64
import http.client
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.append(os.path.join(REPO, "tests", "e2e"))

import yaml  # noqa: E402  (python3-yaml, a test dependency in scripts/deps.sh)

RELEASE = "kubequota"
NAMESPACE = "kubequota-system"
SCHED = "kubequota-scheduler"
SA = "kubequota"
# kubequota runs as a ServiceAccount of its own here, bound by exactly the chart's bindings of
# kubequota's own (Cluster)Roles. In the chart both containers share the pod's ServiceAccount
# (SA), which is also bound to system:kube-scheduler for the scheduler: that role alone grants
# much of what kubequota does (pods, bindings, events, leases, token and access reviews), so a
# missing rule in kubequota's own role would never show. The scheduler keeps the chart's SA.
KQ_SA = "kubequota-only"
SCHEDULER_ROLES = ("system:kube-scheduler", "system:volume-scheduler",
                   "extension-apiserver-authentication-reader")

# Token users of the API server (--token-auth-file): token, user, uid, groups.
USERS = {
    "admin": ("admin-token", "kq-admin", ["system:masters"]),
    "alice": ("alice-token", "alice", ["dev", "ml"]),
    "bob": ("bob-token", "bob", ["dev"]),
    "carol": ("carol-token", "carol", ["ml", "test"]),
    "dave": ("dave-token", "dave", ["ops", "dev"]),
    "eve": ("eve-token", "eve", ["dev"]),
    "erin": ("erin-token", "erin", []),
    "kwok": ("kwok-token", "kwok", ["system:masters"]),
    # the bootstrap RBAC binds this user to system:kube-controller-manager; each controller
    # then runs as its own ServiceAccount (--use-service-account-credentials), as on kubeadm
    "kcm": ("kcm-token", "system:kube-controller-manager", []),
}
# Namespaces every tenant above may create, read and delete pods in (tenant ClusterRole).
TENANT_NAMESPACES = ("team-a", "team-b", "team-c")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def bin_dir():
    """The built control plane (scripts/kube-build.sh builds what is missing)."""
    d = os.environ.get("KQ_KUBE_BIN")
    if d:
        return d
    out = subprocess.run(["bash", os.path.join(REPO, "scripts", "kube-build.sh")],
                         check=True, stdout=subprocess.PIPE, text=True).stdout
    return out.strip().splitlines()[-1]


def kq_binary():
    b = os.environ.get("KQ_BINARY") or os.path.join(REPO, "bin", "kubequota")
    return b if os.path.isabs(b) else os.path.join(REPO, b)


def helm():
    return subprocess.run(["bash", os.path.join(REPO, "scripts", "helm.sh")], check=True,
                          stdout=subprocess.PIPE, text=True).stdout.strip().splitlines()[-1]


class ApiError(Exception):
    def __init__(self, status, body, method, path):
        self.status, self.body = status, body
        msg = body.get("message") if isinstance(body, dict) else body
        super().__init__("%s %s: %d %s" % (method, path, status, msg))


class Api:
    """A small JSON client of the real API server with one user's bearer token."""

    def __init__(self, port, ca, token):
        self.port, self.token = port, token
        self.ctx = ssl.create_default_context(cafile=ca)

    def request(self, method, path, body=None, ctype="application/json", timeout=30,
                ok=(200, 201, 202)):
        c = http.client.HTTPSConnection("127.0.0.1", self.port, context=self.ctx, timeout=timeout)
        try:
            hdr = {"Authorization": "Bearer " + self.token, "Accept": "application/json"}
            data = None
            if body is not None:
                data = body if isinstance(body, (bytes, str)) else json.dumps(body)
                hdr["Content-Type"] = ctype
            c.request(method, path, body=data, headers=hdr)
            r = c.getresponse()
            raw = r.read()
            try:
                doc = json.loads(raw) if raw else {}
            except ValueError:
                doc = raw.decode("utf-8", "replace")
            if ok and r.status not in ok:
                raise ApiError(r.status, doc, method, path)
            return doc
        finally:
            c.close()

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def post(self, path, body, **kw):
        return self.request("POST", path, body, **kw)

    def delete(self, path, body=None, **kw):
        return self.request("DELETE", path, body, **kw)

    def patch(self, path, body, ctype="application/merge-patch+json", **kw):
        return self.request("PATCH", path, body, ctype=ctype, **kw)

    def status(self, method, path, body=None, ctype="application/json"):
        """(HTTP status, body) without raising."""
        try:
            self.request(method, path, body, ctype=ctype, ok=(-1,))
        except ApiError as e:
            return e.status, e.body
        raise AssertionError("unreachable")


def _write(path, text, mode=0o644):
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, mode)


def kubeconfig(path, port, ca, token, user="user"):
    doc = {
        "apiVersion": "v1", "kind": "Config", "current-context": "kq",
        "clusters": [{"name": "local", "cluster": {"server": "https://127.0.0.1:%d" % port,
                                                   "certificate-authority": ca}}],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": "kq", "context": {"cluster": "local", "user": user}}],
    }
    _write(path, yaml.safe_dump(doc), 0o600)
    return path


class Proc:
    def __init__(self, name, argv, log, env=None):
        self.name, self.argv, self.log_path = name, argv, log
        self.logf = open(log, "ab")
        self.p = subprocess.Popen(argv, stdout=self.logf, stderr=subprocess.STDOUT,
                                  stdin=subprocess.DEVNULL, env=env, start_new_session=True)
        self.pid = self.p.pid

    def alive(self):
        return self.p.poll() is None

    def stop(self, timeout=10.0, sig=signal.SIGTERM):
        if self.p.poll() is None:
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass
            try:
                self.p.wait(timeout)
            except subprocess.TimeoutExpired:
                os.kill(self.pid, signal.SIGKILL)
                self.p.wait(5)
        self.logf.close()
        return self.p.returncode

    def kill(self):
        return self.stop(timeout=0.1, sig=signal.SIGKILL)

    def tail(self, n=40):
        try:
            with open(self.log_path, "rb") as f:
                return b"\n".join(f.read().splitlines()[-n:]).decode("utf-8", "replace")
        except OSError:
            return ""


def wait_until(pred, timeout=30.0, interval=0.1, msg=None):
    end = time.monotonic() + timeout
    last = None
    while True:
        try:
            v = pred()
            if v:
                return v
        except Exception as e:  # the condition is re-evaluated until the deadline
            last = e
        if time.monotonic() > end:
            raise AssertionError("timed out after %.0fs waiting for %s%s" % (
                timeout, msg or getattr(pred, "__name__", "a condition"),
                " (last error: %s)" % last if last else ""))
        time.sleep(interval)


class Cluster:
    """One throwaway control plane. start() brings up etcd, kube-apiserver and kwok, applies
    the chart's rendered objects and creates the nodes; start_kubequota() and
    start_scheduler() add the two components the chart deploys."""

    def __init__(self, workdir=None, nodes=3, node_cpu="64", node_memory="256Gi",
                 chart_values=None, keep=False, node_lease_s=40, apiserver_profiling=False):
        self.keep = keep
        # kwok renews each Node's Lease every quarter of this, as a kubelet does (40 s, its
        # default: 5,000 Nodes renew 500 times a second)
        self.node_lease_s = node_lease_s
        # /debug/pprof on kube-apiserver (bench/kube.py --pprof-apiserver); off as on kubeadm's
        self.apiserver_profiling = apiserver_profiling
        self.work = workdir or tempfile.mkdtemp(prefix="kq-cluster-")
        os.makedirs(self.work, exist_ok=True)
        self.bin = bin_dir()
        self.procs = {}
        self.kq = {}            # name -> (Proc, listen port, scheduler port, webhook port)
        self.nodes, self.node_cpu, self.node_memory = nodes, node_cpu, node_memory
        self.chart_values = dict(chart_values or {})
        self.etcd_port, self.etcd_peer = free_port(), free_port()
        self.port = free_port()
        self.kq_port, self.kq_sched_port, self.kq_webhook_port = free_port(), free_port(), free_port()
        self.sched_port = free_port()
        self.rendered = None

    # ---- paths and clients -------------------------------------------------------------

    def path(self, *p):
        return os.path.join(self.work, *p)

    def api(self, user="admin"):
        return Api(self.port, self.certs["ca"], USERS[user][0] if user in USERS else user)

    def kubeconfig_for(self, user):
        p = self.path("kubeconfig-%s" % user)
        if not os.path.exists(p):
            kubeconfig(p, self.port, self.certs["ca"], USERS[user][0], user)
        return p

    def kubectl(self, *args, user="admin", input=None, check=True, timeout=60):
        """The built kubectl against this cluster, as one of USERS."""
        argv = [os.path.join(self.bin, "kubectl"), "--kubeconfig", self.kubeconfig_for(user)] + list(args)
        r = subprocess.run(argv, input=input, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, timeout=timeout)
        if check and r.returncode != 0:
            raise AssertionError("kubectl %s: exit %d: %s%s" % (" ".join(args), r.returncode, r.stdout, r.stderr))
        return r

    # ---- lifecycle ---------------------------------------------------------------------

    def start(self):
        t0 = time.monotonic()
        try:
            self._certs()
            self._tokens()
            self._start_etcd()
            self._start_apiserver()
            self._start_controller_manager()
            self._bootstrap()
            self._start_kwok()
            self._create_nodes()
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - t0
        return self

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def stop(self):
        for name in list(self.kq):
            self.stop_kubequota(name)
        for name in ("fwd-inner", "fwd-outer", "kube-scheduler", "kwok", "kube-controller-manager",
                     "kube-apiserver", "etcd"):
            p = self.procs.pop(name, None)
            if p:
                p.stop()
        for name, p in list(self.procs.items()):
            p.stop()
            self.procs.pop(name)
        self._unexpose()
        if not self.keep:
            shutil.rmtree(self.work, ignore_errors=True)

    def _spawn(self, name, argv, env=None):
        p = Proc(name, argv, self.path(name + ".log"), env=env)
        self.procs[name] = p
        return p

    # ---- certificates, tokens ----------------------------------------------------------

    def _certs(self):
        d = self.path("pki")
        env = dict(os.environ, KQ_NAMESPACE=NAMESPACE)
        # kubequota's serving certificate names <release>.<namespace>.svc (the chart's
        # extender serverName), 127.0.0.1 (the webhook URLs) and kubequota.<ns>.svc.
        subprocess.run(["bash", os.path.join(REPO, "certs", "gen-certs.sh"), d,
                        "%s.%s.svc" % (RELEASE, NAMESPACE)], check=True, env=env,
                       stdout=subprocess.DEVNULL)
        sa_key = os.path.join(d, "sa.key")
        subprocess.run(["openssl", "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256",
                        "-out", sa_key], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        subprocess.run(["openssl", "pkey", "-in", sa_key, "-pubout", "-out", os.path.join(d, "sa.pub")],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.certs = {k: os.path.join(d, f) for k, f in (
            ("ca", "ca.crt"), ("server", "server.crt"), ("server_key", "server.key"),
            ("client", "client.crt"), ("client_key", "client.key"),
            ("apiserver", "apiserver.crt"), ("apiserver_key", "apiserver.key"),
            ("sa_key", "sa.key"), ("sa_pub", "sa.pub"))}

    def _tokens(self):
        lines = []
        for _, (tok, user, groups) in USERS.items():
            # no groups column for a user without groups (an empty one is the group "")
            lines.append('%s,%s,%s' % (tok, user, "uid-" + user) + (',"%s"' % ",".join(groups) if groups else ""))
        _write(self.path("tokens.csv"), "\n".join(lines) + "\n", 0o600)

    # ---- etcd, kube-apiserver ----------------------------------------------------------

    def _start_etcd(self):
        peer = "http://127.0.0.1:%d" % self.etcd_peer
        client = "http://127.0.0.1:%d" % self.etcd_port
        self._spawn("etcd", [
            os.path.join(self.bin, "etcd"), "--name", "kq", "--data-dir", self.path("etcd"),
            "--listen-client-urls", client, "--advertise-client-urls", client,
            "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
            "--initial-cluster", "kq=" + peer, "--unsafe-no-fsync", "--log-level", "warn",
            "--listen-metrics-urls", "http://127.0.0.1:%d" % free_port()])

    def _start_apiserver(self):
        issuer = "https://kubernetes.default.svc.cluster.local"
        self._spawn("kube-apiserver", [
            os.path.join(self.bin, "kube-apiserver"),
            "--etcd-servers", "http://127.0.0.1:%d" % self.etcd_port,
            "--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1",
            "--secure-port", str(self.port), "--cert-dir", self.path("apiserver-certs"),
            "--tls-cert-file", self.certs["apiserver"], "--tls-private-key-file", self.certs["apiserver_key"],
            "--client-ca-file", self.certs["ca"],
            # the front-proxy CA of kubeadm's clusters, so delegated authentication (the
            # scheduler's health port) finds one in extension-apiserver-authentication
            "--requestheader-client-ca-file", self.certs["ca"],
            "--requestheader-allowed-names", "front-proxy-client",
            "--requestheader-username-headers", "X-Remote-User",
            "--requestheader-group-headers", "X-Remote-Group",
            "--requestheader-extra-headers-prefix", "X-Remote-Extra-",
            "--token-auth-file", self.path("tokens.csv"),
            "--authorization-mode", "RBAC",
            "--service-account-issuer", issuer, "--api-audiences", issuer,
            "--service-account-key-file", self.certs["sa_pub"],
            "--service-account-signing-key-file", self.certs["sa_key"],
            "--service-cluster-ip-range", "10.96.0.0/24",
            # no kubernetes Service endpoints: its reconciler refuses a loopback address
            "--endpoint-reconciler-type", "none",
            "--profiling=%s" % ("true" if self.apiserver_profiling else "false"), "--v=0"])
        api = self.api()

        def ready():
            if not self.procs["kube-apiserver"].alive():
                raise AssertionError("kube-apiserver exited:\n" + self.procs["kube-apiserver"].tail())
            return api.request("GET", "/readyz", ok=(200,), timeout=2) is not None
        wait_until(ready, 60, 0.2, "kube-apiserver /readyz")

    def _start_controller_manager(self):
        kc = self.kubeconfig_for("kcm")
        self._spawn("kube-controller-manager", [
            os.path.join(self.bin, "kube-controller-manager"), "--kubeconfig", kc,
            "--authentication-kubeconfig", kc, "--authorization-kubeconfig", kc,
            "--bind-address", "127.0.0.1", "--secure-port", str(free_port()),
            "--use-service-account-credentials=true",
            "--service-account-private-key-file", self.certs["sa_key"],
            "--root-ca-file", self.certs["ca"], "--leader-elect=false",
            # the node lifecycle controller removes the not-ready taint of every new Node with
            # one PATCH each; at the default 20 requests/s, 5,000 kwok Nodes take 4 minutes
            "--kube-api-qps=500", "--kube-api-burst=500",
            "--cluster-cidr", "10.244.0.0/16", "--allocate-node-cidrs=false", "--v=1"]
            # a Node is NotReady once its Lease is older than this (default 50 s): with a
            # longer lease than a kubelet's (bench/kube.py --node-lease), the grace grows with it
            + (["--node-monitor-grace-period=%ds" % (self.node_lease_s * 3 // 2)] if self.node_lease_s > 40 else []))

    def restart_apiserver(self):
        """Stops kube-apiserver and starts it again on the same port and etcd: every watch
        breaks, and the new server's watch cache starts at etcd's current revision, so a
        watch resumed from an older resourceVersion is answered 410 Gone."""
        old = self.procs.pop("kube-apiserver")
        old.stop()
        self._spawn("kube-apiserver", old.argv)
        api = self.api()
        wait_until(lambda: api.request("GET", "/readyz", ok=(200,), timeout=2) is not None,
                   60, 0.2, "kube-apiserver /readyz after restart")
        self.revive()

    def revive(self, names=("kube-scheduler", "kube-controller-manager", "kwok")):
        """Starts again a component that exited (kube-scheduler exits when it loses its
        Lease, e.g. while the API server restarts), as the kubelet restarts a container."""
        for n in names:
            p = self.procs.get(n)
            if p is not None and not p.alive():
                p.stop()
                self._spawn(n, p.argv)

    # ---- objects -----------------------------------------------------------------------

    def apply(self, docs, user="admin"):
        """kubectl apply --server-side of a list of objects (or YAML text)."""
        text = docs if isinstance(docs, str) else yaml.safe_dump_all(docs)
        return self.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", input=text, user=user)

    def namespace(self, name, labels=None):
        """A namespace with its default ServiceAccount (no controller-manager runs here to
        create it, and the ServiceAccount admission plugin needs it for every pod)."""
        api = self.api()
        body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels or {}}}
        api.request("POST", "/api/v1/namespaces", body, ok=(201, 409))
        if labels:
            api.patch("/api/v1/namespaces/" + name, {"metadata": {"labels": labels}})
        api.request("POST", "/api/v1/namespaces/%s/serviceaccounts" % name,
                    {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}},
                    ok=(201, 409))

    def render_chart(self, values=None):
        vals = {
            "kubequota": {"image": {"repository": "kubequota.invalid/kubequota"}},
            "scheduler": {"image": {"repository": "kube-scheduler.invalid/kube-scheduler"}},
            "tls": {"existingSecret": "%s-tls" % RELEASE,
                    "caBundle": base64.b64encode(open(self.certs["ca"], "rb").read()).decode()},
        }
        _merge(vals, self.chart_values)
        _merge(vals, values or {})
        vf = self.path("values.yaml")
        _write(vf, yaml.safe_dump(vals))
        out = subprocess.run([helm(), "template", RELEASE, os.path.join(REPO, "charts", "kubequota"),
                              "--namespace", NAMESPACE, "--include-crds", "-f", vf],
                             check=True, stdout=subprocess.PIPE, text=True).stdout
        return [d for d in yaml.safe_load_all(out) if d]

    ADMISSION_KINDS = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration",
                       "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")

    def webhook_url_docs(self, docs, kq_port=None):
        """The chart's admission objects: webhook configurations with clientConfig.service
        turned into a URL of kubequota's webhook listener (--webhook-listen), and the binding
        policy (issue 37) with kubequota's own identity here (KQ_SA) allowed next to the
        chart's SA, under which both containers run in the chart's pod."""
        port = kq_port or self.kq_webhook_port
        out = []
        for d in docs:
            if d["kind"] not in self.ADMISSION_KINDS:
                continue
            d = json.loads(json.dumps(d))
            if d["kind"] == "ValidatingAdmissionPolicy":
                chart_sa = "'system:serviceaccount:%s:%s'" % (NAMESPACE, SA)
                for v in d["spec"].get("variables", []):
                    v["expression"] = v["expression"].replace(
                        chart_sa, "%s, 'system:serviceaccount:%s:%s'" % (chart_sa, NAMESPACE, KQ_SA))
                out.append(d)
                continue
            for w in d.get("webhooks", []):
                cc = w["clientConfig"]
                svc = cc.pop("service")
                cc["url"] = "https://127.0.0.1:%d%s" % (port, svc.get("path", "/"))
            out.append(d)
        return out

    def _bootstrap(self):
        self.namespace(NAMESPACE)
        for ns in TENANT_NAMESPACES:
            self.namespace(ns)
        # The tenants: create, read and delete their own pods, as a namespace admin would.
        # pods/resize: in-place resize of their own pods, a permission platforms commonly grant
        tenant_rules = [{"apiGroups": [""], "resources": ["pods"],
                         "verbs": ["create", "get", "list", "watch", "delete", "patch", "update"]},
                        {"apiGroups": [""], "resources": ["pods/resize"], "verbs": ["patch", "update"]},
                        {"apiGroups": [""], "resources": ["events"], "verbs": ["get", "list"]},
                        {"apiGroups": ["apps"], "resources": ["deployments"],
                         "verbs": ["create", "get", "list", "delete"]},
                        # DRA: their own claims and claim templates (as a namespace admin may;
                        # kube-controller-manager creates the claims of templates itself)
                        {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims", "resourceclaimtemplates"],
                         "verbs": ["create", "get", "list", "watch", "delete", "patch", "update"]}]
        docs = [{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                 "metadata": {"name": "kq-test-tenant"}, "rules": tenant_rules}]
        for ns in TENANT_NAMESPACES:
            docs.append({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                         "metadata": {"name": "kq-test-tenants", "namespace": ns},
                         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                     "name": "kq-test-tenant"},
                         "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": u[1]}
                                      for k, u in USERS.items() if k not in ("admin", "kwok")]})
        self.apply(docs)
        self.use_chart()

    KEEP_KINDS = ("CustomResourceDefinition", "ServiceAccount", "ClusterRole", "ClusterRoleBinding",
                  "Role", "RoleBinding", "ConfigMap", "FlowSchema")

    def use_chart(self, values=None):
        """Renders the chart with these values (over the cluster's) and makes the cluster hold
        exactly its objects: what the last rendering had and this one lacks is deleted."""
        new = mutate(self.render_chart(values), os.environ.get("KQ_CLUSTER_MUTATE", ""))
        key = lambda d: (d["kind"], d["metadata"].get("namespace", ""), d["metadata"]["name"])
        have = {key(d) for d in new}
        for d in self.rendered or []:
            if key(d) not in have and (d["kind"] in self.KEEP_KINDS or d["kind"] in self.ADMISSION_KINDS):
                self.delete_object(d)
        self.rendered = new
        self.apply([self.with_kubequota_only(d) for d in new if d["kind"] in self.KEEP_KINDS] +
                   self.kubequota_only_bindings(new))
        for crd in (d for d in new if d["kind"] == "CustomResourceDefinition"):
            wait_until(lambda: any(c["type"] == "Established" and c["status"] == "True" for c in
                                   self.api().get("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/"
                                                  + crd["metadata"]["name"]).get("status", {}).get("conditions", [])),
                       30, 0.1, "CRD %s established" % crd["metadata"]["name"])

    @staticmethod
    def with_kubequota_only(d):
        """A FlowSchema of the chart's SA, copied to hold KQ_SA too: here kubequota runs under
        KQ_SA, in the chart's pod both containers run under the chart's SA."""
        if d["kind"] != "FlowSchema":
            return d
        d = json.loads(json.dumps(d))
        for r in d["spec"].get("rules", []):
            r["subjects"] = r.get("subjects", []) + [
                {"kind": "ServiceAccount", "serviceAccount": {"name": KQ_SA, "namespace": NAMESPACE}}]
        return d

    def kubequota_only_bindings(self, docs):
        """KQ_SA and a copy of each of the chart's bindings of kubequota's own roles (not the
        scheduler's, nor its lease Role) naming KQ_SA instead of the chart's SA."""
        out = [{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": KQ_SA, "namespace": NAMESPACE}}]
        sched_lease_role = "%s-scheduler" % RELEASE
        for d in docs:
            if d["kind"] not in ("RoleBinding", "ClusterRoleBinding"):
                continue
            ref = d["roleRef"]["name"]
            if ref in SCHEDULER_ROLES or ref == sched_lease_role:
                continue
            b = json.loads(json.dumps(d))
            b["metadata"]["name"] = d["metadata"]["name"] + "-only"
            b["subjects"] = [{"kind": "ServiceAccount", "name": KQ_SA, "namespace": NAMESPACE}]
            out.append(b)
        return out

    def delete_object(self, d):
        r = self.kubectl("delete", "--ignore-not-found", "--wait=false", "-f", "-", input=yaml.safe_dump(d),
                         check=False)
        if r.returncode != 0:
            raise AssertionError("delete %s/%s: %s" % (d["kind"], d["metadata"]["name"], r.stderr))

    def apply_webhooks(self, kq_port=None):
        self.apply(self.webhook_url_docs(self.rendered, kq_port))

    def delete_webhooks(self):
        plural = {"MutatingWebhookConfiguration": "mutatingwebhookconfigurations",
                  "ValidatingWebhookConfiguration": "validatingwebhookconfigurations",
                  "ValidatingAdmissionPolicy": "validatingadmissionpolicies",
                  "ValidatingAdmissionPolicyBinding": "validatingadmissionpolicybindings"}
        for d in self.webhook_url_docs(self.rendered):
            path = "/apis/admissionregistration.k8s.io/v1/%s/%s" % (plural[d["kind"]], d["metadata"]["name"])
            self.api().request("DELETE", path, ok=(200, 404))

    def sa_token(self, hours=4, sa=SA):
        """A TokenRequest token of a ServiceAccount (default the chart's): what a pod mounts."""
        r = self.api().post("/api/v1/namespaces/%s/serviceaccounts/%s/token" % (NAMESPACE, sa),
                            {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                             "spec": {"expirationSeconds": hours * 3600}})
        return r["status"]["token"]

    # ---- kwok and nodes ----------------------------------------------------------------

    # kwok's stages (scripts/kube-build.sh copies them from the pinned module), as kwokctl
    # runs it: Nodes heartbeat through a Lease and report their status every 10-20 minutes,
    # as a kubelet does, not every 20-45 s (5,000 Nodes would send every watcher of Nodes
    # ~150 updates a second)
    KWOK_STAGES = ("node-fast-node-initialize.yaml", "node-heartbeat-with-lease-node-heartbeat-with-lease.yaml",
                   "pod-fast-pod-ready.yaml", "pod-fast-pod-complete.yaml", "pod-fast-pod-delete.yaml")

    def _start_kwok(self):
        stages = os.path.join(os.path.dirname(self.bin), "stages")
        self._spawn("kwok", [
            os.path.join(self.bin, "kwok"), "--kubeconfig", self.kubeconfig_for("kwok"),
            "--config", ",".join(os.path.join(stages, f) for f in self.KWOK_STAGES),
            "--node-lease-duration-seconds=%d" % self.node_lease_s,
            "--manage-all-nodes=false",
            "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
            "--cidr=10.244.0.0/16", "--node-ip=10.244.0.1",
            "--server-address=127.0.0.1:%d" % free_port()])

    def node_body(self, name, cpu=None, memory=None, pods="110", labels=None):
        cap = {"cpu": cpu or self.node_cpu, "memory": memory or self.node_memory, "pods": pods}
        lab = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "type": "kwok"}
        lab.update(labels or {})
        return {"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": name, "labels": lab, "annotations": {"kwok.x-k8s.io/node": "fake"}},
                "status": {"capacity": cap, "allocatable": cap}}

    def add_node(self, name, **kw):
        self.api().request("POST", "/api/v1/nodes", self.node_body(name, **kw), ok=(201, 409))

    def set_nodes(self, nodes):
        """Makes the kwok nodes exactly `nodes` ({name: {cpu, memory, ...}}): others are
        deleted, missing ones created; returns when all are Ready and untainted."""
        api = self.api()
        for n in api.get("/api/v1/nodes")["items"]:
            if n["metadata"]["name"] not in nodes:
                api.request("DELETE", "/api/v1/nodes/" + n["metadata"]["name"], ok=(200, 404))
        for name, kw in nodes.items():
            self.add_node(name, **kw)
        self._wait_nodes(set(nodes))

    def default_nodes(self):
        return {"kwok-node-%d" % i: {} for i in range(self.nodes)}

    def _create_nodes(self):
        for i in range(self.nodes):
            self.add_node("kwok-node-%d" % i)
        self._wait_nodes({"kwok-node-%d" % i for i in range(self.nodes)})

    def _wait_nodes(self, names):
        api = self.api()

        def ready():
            items = api.get("/api/v1/nodes")["items"]
            # Ready (kwok) and without the not-ready taint (TaintNodesByCondition adds it at
            # creation, the controller-manager's node lifecycle controller removes it)
            ok = {n["metadata"]["name"] for n in items
                  if any(c["type"] == "Ready" and c["status"] == "True"
                         for c in n.get("status", {}).get("conditions", []))
                  and not n["spec"].get("taints")}
            return names <= ok and len(items) == len(names)
        wait_until(ready, 90, 0.2, "kwok nodes %s Ready and untainted" % sorted(names))

    # ---- kubequota and kube-scheduler, as the chart renders them -------------------------

    def chart_container_args(self, container, rendered=None):
        dep = next(d for d in (rendered or self.rendered) if d["kind"] == "Deployment")
        c = next(c for c in dep["spec"]["template"]["spec"]["containers"] if c["name"] == container)
        return list(c.get("args", []))

    def kubequota_argv(self, config_path, port, sched_port, extra=(), webhook_port=None, rendered=None):
        """The chart's kubequota arguments, with the pod's paths and ports made local
        (rendered: another rendering of the chart, render_chart(values), e.g. bench/kube.py's
        variants; default the cluster's)."""
        argv = [kq_binary()]
        for a in self.chart_container_args("kubequota", rendered):
            k, _, v = a.partition("=")
            if k == "--config":
                a = "--config=" + config_path
            elif k == "--listen":
                a = "--listen=127.0.0.1:%d" % port
            elif k == "--scheduler-listen":
                a = "--scheduler-listen=127.0.0.1:%d" % sched_port
            elif k == "--webhook-listen":
                a = "--webhook-listen=127.0.0.1:%d" % (webhook_port or free_port())
            elif k == "--tls-cert":
                a = "--tls-cert=" + self.certs["server"]
            elif k == "--tls-key":
                a = "--tls-key=" + self.certs["server_key"]
            elif k == "--client-ca":
                a = "--client-ca=" + self.certs["ca"]
            elif k == "--rest-token-file":
                continue
            elif k == "--admission-gate-removers":
                # kubequota's own identity here (KQ_SA), where the chart names the pod's SA
                a = "--admission-gate-removers=" + v.replace(
                    "system:serviceaccount:%s:%s" % (NAMESPACE, SA), "system:serviceaccount:%s:%s" % (NAMESPACE, KQ_SA))
            argv.append(a)
        return argv + list(extra)

    def start_kubequota(self, queues_yaml, name="kq", extra=(), port=None, sched_port=None,
                        token=None, wait=True, rendered=None):
        port = port or (self.kq_port if name == "kq" else free_port())
        sched_port = sched_port or (self.kq_sched_port if name == "kq" else free_port())
        webhook_port = self.kq_webhook_port if name == "kq" else free_port()
        cfg = self.path("%s-queues.yaml" % name)
        _write(cfg, queues_yaml)
        kc = kubeconfig(self.path("%s.kubeconfig" % name), self.port, self.certs["ca"],
                        token or self.sa_token(sa=KQ_SA), "system:serviceaccount:%s:%s" % (NAMESPACE, KQ_SA))
        argv = self.kubequota_argv(cfg, port, sched_port, ["--kubeconfig=" + kc] + list(extra), webhook_port,
                                   rendered)
        p = self._spawn(name, argv)
        self.kq[name] = (p, port, sched_port, webhook_port)
        if wait:
            self.wait_kubequota_ready(name)
        return p

    def kubequota_client(self, name="kq"):
        from kqtest import HttpClient
        port = self.kq[name][1]
        # the chart's --rest-auth=kubernetes: a bearer token the API server's TokenReview
        # accepts and a SubjectAccessReview allows (the admin is system:masters)
        return HttpClient("https://127.0.0.1:%d" % port, ca=self.certs["ca"], token=USERS["admin"][0])

    def wait_kubequota_ready(self, name="kq", timeout=30):
        p = self.kq[name][0]
        cl = self.kubequota_client(name)

        def ready():
            if not p.alive():
                raise AssertionError("kubequota %s exited:\n%s" % (name, p.tail()))
            return cl.get("/readyz").status == 200
        wait_until(ready, timeout, 0.1, "kubequota %s /readyz" % name)

    def stop_kubequota(self, name="kq", kill=False):
        ent = self.kq.pop(name, None)
        if not ent:
            return None
        self.procs.pop(name, None)
        return ent[0].kill() if kill else ent[0].stop()

    def signal_kubequota(self, sig, name="kq"):
        os.kill(self.kq[name][0].pid, sig)

    def kubequota_log(self, name="kq"):
        with open(self.path(name + ".log"), "rb") as f:
            return f.read().decode("utf-8", "replace")

    def scheduler_config(self, kq_sched_port=None, rendered=None):
        cm = next(d for d in (rendered or self.rendered) if d["kind"] == "ConfigMap"
                  and "scheduler-config.yaml" in d.get("data", {}))
        cfg = yaml.safe_load(cm["data"]["scheduler-config.yaml"])
        tok = self.sa_token()
        cfg["clientConnection"] = {"kubeconfig": kubeconfig(
            self.path("scheduler.kubeconfig"), self.port, self.certs["ca"], tok, "scheduler")}
        for e in cfg.get("extenders", []):
            e["urlPrefix"] = e["urlPrefix"].replace(
                ":%d/" % int(e["urlPrefix"].rsplit(":", 1)[1].split("/")[0]),
                ":%d/" % (kq_sched_port or self.kq_sched_port))
            tc = e.get("tlsConfig", {})
            if "caFile" in tc:
                tc["caFile"] = self.certs["ca"]
            if "certFile" in tc:
                tc["certFile"], tc["keyFile"] = self.certs["client"], self.certs["client_key"]
        return cfg

    def start_scheduler(self, name="kube-scheduler", kq_sched_port=None, config=None, wait=True, extra_args=()):
        cfg = config or self.scheduler_config(kq_sched_port)
        path = self.path(name + "-config.yaml")
        _write(path, yaml.safe_dump(cfg))
        kc = cfg["clientConnection"]["kubeconfig"]
        secure_port = free_port()
        p = self._spawn(name, [
            os.path.join(self.bin, "kube-scheduler"), "--config", path,
            "--bind-address", "127.0.0.1", "--secure-port", str(secure_port),
            "--authentication-kubeconfig", kc, "--authorization-kubeconfig", kc, "--v=2"] + list(extra_args))
        p.secure_port = secure_port  # /metrics, /debug/pprof (admin's token: system:masters)
        if wait and cfg.get("leaderElection", {}).get("leaderElect", True):
            le = cfg.get("leaderElection", {})
            lease = "/apis/coordination.k8s.io/v1/namespaces/%s/leases/%s" % (
                le.get("resourceNamespace", "kube-system"), le.get("resourceName", "kube-scheduler"))
            wait_until(lambda: p.alive() and self.api().get(lease)["spec"].get("holderIdentity"),
                       60, 0.2, "kube-scheduler leader lease")
        return p

    # ---- the service proxy (kubectl plugin, dashboard) ---------------------------------

    def expose_service(self, kq_name="kq"):
        """Makes kubequota's Service (the chart's name and port, in its namespace) reachable
        through the real API server's service proxy. The API server refuses to proxy to a
        loopback address, so: a network namespace of this cluster's own with a veth pair
        (10.213.N.1 on this side, 10.213.N.2 inside), a TCP forwarder inside on .2:8443 to
        kubequota's main port on .1, and the Service without a selector whose Endpoints and
        EndpointSlice name .2 (no pod backs it here). Needs root (ip netns); undone by stop()."""
        import random
        tag = "%05d" % random.randrange(100000)
        n = random.randrange(1, 250)
        self.netns, host_if, ns_if = "kq-" + tag, "kqh" + tag, "kqn" + tag
        outer, inner = "10.213.%d.1" % n, "10.213.%d.2" % n
        for argv in (["ip", "netns", "add", self.netns],
                     ["ip", "link", "add", host_if, "type", "veth", "peer", "name", ns_if],
                     ["ip", "link", "set", ns_if, "netns", self.netns],
                     ["ip", "addr", "add", outer + "/30", "dev", host_if],
                     ["ip", "link", "set", host_if, "up"],
                     ["ip", "netns", "exec", self.netns, "ip", "addr", "add", inner + "/30", "dev", ns_if],
                     ["ip", "netns", "exec", self.netns, "ip", "link", "set", ns_if, "up"],
                     ["ip", "netns", "exec", self.netns, "ip", "link", "set", "lo", "up"]):
            subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.host_if = host_if
        # kubequota's main port is on loopback; a second forwarder on this side listens on
        # the veth address (kubequota stays bound to 127.0.0.1 as in every other test)
        port = self.kq[kq_name][1]
        self._spawn("fwd-outer", [sys.executable, os.path.join(HERE, "tcpfwd.py"), "%s:%d" % (outer, port),
                                  "127.0.0.1:%d" % port])
        self._spawn("fwd-inner", ["ip", "netns", "exec", self.netns, sys.executable,
                                  os.path.join(HERE, "tcpfwd.py"), inner + ":8443", "%s:%d" % (outer, port)])
        # The service proxy only proxies to endpoints that are pods with that IP
        # (pkg/registry/core/service/storage ResourceLocation, isValidAddress): a pod of no
        # scheduler of ours, on a node of its own that kwok does not manage and that offers
        # nothing (so quota totals do not change), with the namespace's address as its IP.
        host = "kq-proxy-host"
        self.api().request("POST", "/api/v1/nodes", {
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": host, "labels": {"kubernetes.io/hostname": host}},
            "spec": {"taints": [{"key": "kubequota.test/proxy-host", "effect": "NoSchedule"}]},
            "status": {"capacity": {"cpu": "0", "memory": "0", "pods": "1"},
                       "allocatable": {"cpu": "0", "memory": "0", "pods": "1"}}}, ok=(201, 409))
        pod = self.pod_body("kubequota-netns", cpu="0", memory="0", scheduler="default-scheduler")
        pod["spec"]["nodeName"] = host
        pod["spec"]["tolerations"] = [{"operator": "Exists"}]
        self.api().post("/api/v1/namespaces/%s/pods" % NAMESPACE, pod)
        self.api().patch("/api/v1/namespaces/%s/pods/kubequota-netns/status" % NAMESPACE,
                         {"status": {"phase": "Running", "podIP": inner, "podIPs": [{"ip": inner}],
                                     "conditions": [{"type": "Ready", "status": "True"}]}})
        target = {"kind": "Pod", "namespace": NAMESPACE, "name": "kubequota-netns"}
        svc = next(d for d in self.rendered if d["kind"] == "Service")
        svc = json.loads(json.dumps(svc))
        svc["spec"].pop("selector", None)
        name = svc["metadata"]["name"]
        ports = [{"name": p["name"], "port": p["port"], "protocol": "TCP"} for p in svc["spec"]["ports"]]
        svc["spec"]["ports"] = [dict(p, targetPort=8443) for p in ports]
        ep = {"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": name, "namespace": NAMESPACE},
              "subsets": [{"addresses": [{"ip": inner, "targetRef": target}],
                           "ports": [{"name": p["name"], "port": 8443, "protocol": "TCP"} for p in ports]}]}
        eps = {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
               "metadata": {"name": name + "-netns", "namespace": NAMESPACE,
                            "labels": {"kubernetes.io/service-name": name}},
               "addressType": "IPv4", "endpoints": [{"addresses": [inner], "conditions": {"ready": True},
                                                     "targetRef": target}],
               "ports": [{"name": p["name"], "port": 8443, "protocol": "TCP"} for p in ports]}
        self.apply([svc, ep, eps])
        return name

    def _unexpose(self):
        if getattr(self, "netns", None):
            for p in ("fwd-inner", "fwd-outer"):
                if p in self.procs:
                    self.procs.pop(p).stop()
            try:
                self.api().request("DELETE", "/api/v1/namespaces/%s/pods/kubequota-netns?gracePeriodSeconds=0" % NAMESPACE,
                                   ok=(200, 404))
                self.api().request("DELETE", "/api/v1/nodes/kq-proxy-host", ok=(200, 404))
            except Exception:  # the API server may already be gone (stop())
                pass
            subprocess.run(["ip", "netns", "del", self.netns], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            subprocess.run(["ip", "link", "del", self.host_if], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            self.netns = None

    # ---- pods --------------------------------------------------------------------------

    def pod_body(self, name, cpu="1", memory="128Mi", labels=None, annotations=None,
                 scheduler=SCHED, gates=None, priority_class=None, owner_job=None, claims=None,
                 extra_requests=None):
        """claims: DRA claims of the pod, {claim name in the pod: ("template", NAME) or
        ("claim", NAME)}, each used by the one container. extra_requests: more container
        requests (and the same limits, as extended resources must), e.g. {"example.com/gpu": "1"}."""
        req = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
        req.update(extra_requests or {})
        res = {"requests": req}
        if extra_requests:
            res["limits"] = dict(extra_requests)
        spec = {"schedulerName": scheduler, "restartPolicy": "Never",
                "automountServiceAccountToken": False,
                "containers": [{"name": "c", "image": "registry.invalid/pause:1", "resources": res}],
                "terminationGracePeriodSeconds": 0}
        if claims:
            spec["resourceClaims"] = [
                {"name": n, ("resourceClaimTemplateName" if kind == "template" else "resourceClaimName"): ref}
                for n, (kind, ref) in sorted(claims.items())]
            res["claims"] = [{"name": n} for n in sorted(claims)]
        if gates:
            spec["schedulingGates"] = [{"name": g} for g in gates]
        if priority_class:
            spec["priorityClassName"] = priority_class
        md = {"name": name, "labels": labels or {}, "annotations": annotations or {}}
        if owner_job:
            md["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": owner_job["name"],
                                      "uid": owner_job["uid"], "controller": True}]
        return {"apiVersion": "v1", "kind": "Pod", "metadata": md, "spec": spec}

    def create_pod(self, ns, name, user="alice", **kw):
        return self.api(user).post("/api/v1/namespaces/%s/pods" % ns, self.pod_body(name, **kw))

    def get_pod(self, ns, name, user="admin"):
        return self.api(user).get("/api/v1/namespaces/%s/pods/%s" % (ns, name))

    def pods(self, ns, selector=None):
        q = "?labelSelector=" + selector if selector else ""
        return self.api().get("/api/v1/namespaces/%s/pods%s" % (ns, q))["items"]

    def delete_pod(self, ns, name, user="admin"):
        return self.api(user).request("DELETE", "/api/v1/namespaces/%s/pods/%s" % (ns, name), ok=(200, 202, 404))

    def wait_pod_gone(self, ns, name, timeout=30):
        wait_until(lambda: self.api().request("GET", "/api/v1/namespaces/%s/pods/%s" % (ns, name),
                                              ok=None).get("code") == 404,
                   timeout, 0.1, "pod %s/%s gone" % (ns, name))

    def wait_bound(self, ns, name, timeout=30):
        return wait_until(lambda: self.get_pod(ns, name)["spec"].get("nodeName"), timeout, 0.1,
                          "pod %s/%s bound" % (ns, name))

    def wait_running(self, ns, name, timeout=30):
        return wait_until(lambda: self.get_pod(ns, name).get("status", {}).get("phase") == "Running",
                          timeout, 0.1, "pod %s/%s Running" % (ns, name))

    # ---- DRA (resource.k8s.io/v1) -------------------------------------------------------
    # Nothing runs a DRA driver here: the ResourceSlices a driver's kubelet plugin would
    # publish are published by hand (publish_devices), one pool per kwok node. kube-scheduler
    # allocates claims from them (its DynamicResources plugin is on by default; GA since
    # 1.34), kube-controller-manager's resource-claim controller creates the claims of
    # templates, and kwok runs the pods (no kubelet prepares a device; nothing needs it to).
    # Kubernetes 1.37.2 needs no feature gate for any of it: DRAPartitionableDevices
    # (sharedCounters, consumesCounters) is beta and on by default since 1.36, and
    # DRAExtendedResource (DeviceClass spec.extendedResourceName) is GA and locked on in 1.37
    # (pkg/features/kube_features.go of the pinned module).

    DRIVER = "gpu.example.com"
    RES = "/apis/resource.k8s.io/v1"

    def device_class(self, name, driver=DRIVER, extended_resource_name=None):
        """A DeviceClass selecting every device of one driver (CEL on device.driver);
        extended_resource_name: its spec.extendedResourceName (the extended-resource path)."""
        spec = {"selectors": [{"cel": {"expression": 'device.driver == "%s"' % driver}}]}
        if extended_resource_name:
            spec["extendedResourceName"] = extended_resource_name
        body = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name}, "spec": spec}
        api = self.api()
        if api.request("POST", self.RES + "/deviceclasses", body, ok=(201, 409)).get("code") == 409:
            cur = api.get(self.RES + "/deviceclasses/" + name)
            body["metadata"]["resourceVersion"] = cur["metadata"]["resourceVersion"]
            api.request("PUT", self.RES + "/deviceclasses/" + name, body)
        return body

    def publish_devices(self, node, n=0, driver=DRIVER, partitions=None, memory="80Gi", generation=1):
        """Publishes the pool `node` of `driver` on that node, as its driver would: n whole
        devices dev-0..dev-{n-1}, or with partitions = {"gpus": G, "parts": {name: memory}}
        G physical GPUs each with a counter set gpu-K (counter "memory" = `memory`) in a
        slice of its own, and per GPU one device per part ("gpu-K-NAME") consuming
        that much of gpu-K's memory (a whole GPU and its halves: the partitionable-devices
        layout of KEP-4815). Replaces whatever the pool had. Returns the slice names."""
        pool = node
        api = self.api()
        sel = "?fieldSelector=spec.driver%%3D%s,spec.pool.name%%3D%s" % (driver, pool)
        for sl in api.get(self.RES + "/resourceslices" + sel).get("items", []):
            api.request("DELETE", self.RES + "/resourceslices/" + sl["metadata"]["name"], ok=(200, 404))
        slices = []
        if partitions is None:
            slices.append({"devices": [{"name": "dev-%d" % i, "attributes": {"index": {"int": i}}}
                                       for i in range(n)]})
        else:
            slices.append({"sharedCounters": [{"name": "gpu-%d" % g, "counters": {"memory": {"value": memory}}}
                                              for g in range(partitions["gpus"])]})
            devs = []
            for g in range(partitions["gpus"]):
                for part, mem in sorted(partitions["parts"].items()):
                    devs.append({"name": "gpu-%d-%s" % (g, part),
                                 "attributes": {"gpu": {"int": g}, "part": {"string": part}},
                                 "consumesCounters": [{"counterSet": "gpu-%d" % g,
                                                       "counters": {"memory": {"value": mem}}}]})
            slices.append({"devices": devs})
        names = []
        base = "%s-%s" % (node, driver.replace(".", "-"))
        for i, extra in enumerate(slices):
            name = "%s-%d" % (base, i)
            spec = {"driver": driver, "nodeName": node,
                    "pool": {"name": pool, "generation": generation, "resourceSliceCount": len(slices)}}
            spec.update(extra)
            api.post(self.RES + "/resourceslices", {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                                                    "metadata": {"name": name}, "spec": spec})
            names.append(name)
        return names

    def unpublish_devices(self, driver=DRIVER):
        api = self.api()
        for sl in api.get(self.RES + "/resourceslices?fieldSelector=spec.driver%3D" + driver).get("items", []):
            api.request("DELETE", self.RES + "/resourceslices/" + sl["metadata"]["name"], ok=(200, 404))

    @staticmethod
    def claim_spec(device_class, count=1, mode="ExactCount", selector=None):
        exactly = {"deviceClassName": device_class, "allocationMode": mode}
        if mode == "ExactCount":
            exactly["count"] = count
        if selector:
            exactly["selectors"] = [{"cel": {"expression": selector}}]
        return {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}

    def create_claim_template(self, ns, name, device_class, count=1, user="alice", **kw):
        return self.api(user).post("%s/namespaces/%s/resourceclaimtemplates" % (self.RES, ns), {
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": name}, "spec": {"spec": self.claim_spec(device_class, count, **kw)}})

    def create_claim(self, ns, name, device_class, count=1, user="alice", **kw):
        return self.api(user).post("%s/namespaces/%s/resourceclaims" % (self.RES, ns), {
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name}, "spec": self.claim_spec(device_class, count, **kw)})

    def claims(self, ns):
        return self.api().get("%s/namespaces/%s/resourceclaims" % (self.RES, ns))["items"]

    def claim(self, ns, name):
        return self.api().get("%s/namespaces/%s/resourceclaims/%s" % (self.RES, ns, name))

    def pod_claims(self, ns, pod):
        """{pod's claim name: the ResourceClaim object} for a pod, through its
        status.resourceClaimStatuses (claims of templates) or spec (claims by name), plus the
        special claim of the extended-resource path (status.extendedResourceClaimStatus)."""
        p = self.get_pod(ns, pod)
        st = p.get("status") or {}
        names = {s["name"]: s.get("resourceClaimName") for s in st.get("resourceClaimStatuses") or []}
        for rc in p["spec"].get("resourceClaims") or []:
            if rc.get("resourceClaimName"):
                names[rc["name"]] = rc["resourceClaimName"]
        ext = st.get("extendedResourceClaimStatus")
        if ext:
            names[""] = ext["resourceClaimName"]
        return {k: self.claim(ns, v) for k, v in names.items() if v}

    @staticmethod
    def allocated_devices(claim):
        """[(driver, pool, device)] of a claim's status.allocation (empty when unallocated)."""
        alloc = (claim.get("status") or {}).get("allocation") or {}
        return [(r["driver"], r["pool"], r["device"]) for r in (alloc.get("devices") or {}).get("results") or []]

    def events(self, ns, name=None):
        q = "?fieldSelector=involvedObject.name%3D" + name if name else ""
        return self.api().get("/api/v1/namespaces/%s/events%s" % (ns, q))["items"]


def rbac_rules(docs):
    """(kind/name, index, rule) of every rule of the rendered (Cluster)Roles."""
    out = []
    for d in docs:
        if d["kind"] in ("ClusterRole", "Role"):
            for i, r in enumerate(d.get("rules") or []):
                out.append(("%s/%s" % (d["kind"], d["metadata"]["name"]), i, r))
    return out


def mutate(docs, how):
    """For tests/cluster/mutants.py only: break the rendered chart on purpose.
      widen-conditions     every webhook loses its matchConditions (sees every pod)
      drop-rule:KIND/NAME/I  rule I of that (Cluster)Role is removed
      preemption-on        the scheduler profile keeps DefaultPreemption (gate-only mode's
                           guard against preemption across quota groups removed)"""
    if not how:
        return docs
    if how == "preemption-on":
        for d in docs:
            if d["kind"] == "ConfigMap" and "scheduler-config.yaml" in d.get("data", {}):
                cfg = yaml.safe_load(d["data"]["scheduler-config.yaml"])
                for prof in cfg.get("profiles", []):
                    prof.pop("plugins", None)
                d["data"]["scheduler-config.yaml"] = yaml.safe_dump(cfg)
        return docs
    if how == "widen-conditions":
        for d in docs:
            for w in d.get("webhooks") or []:
                w.pop("matchConditions", None)
        return docs
    if how.startswith("drop-rule:"):
        kn, _, i = how[len("drop-rule:"):].rpartition("/")
        for d in docs:
            if "%s/%s" % (d["kind"], d["metadata"]["name"]) == kn:
                del d["rules"][int(i)]
        return docs  # a rendering without that role (other values) is left as it is
    raise AssertionError("unknown KQ_CLUSTER_MUTATE %r" % how)


def _merge(dst, src):
    for k, v in src.items():
        if isinstance(v, dict) and isinstance(dst.get(k), dict):
            _merge(dst[k], v)
        else:
            dst[k] = v
    return dst


def demo(c):
    """make run's sample workload (tests/e2e/sample_workload.py, written for
    examples/queues.yaml) on the real control plane: each pod created by its own token user
    through the real API server, gated, released and bound by the real kube-scheduler."""
    import sample_workload as sw
    from kqtest import HttpClient
    ns = "demo"
    c.namespace(ns)
    c.apply([{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
              "metadata": {"name": "kq-test-tenants", "namespace": ns},
              "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "kq-test-tenant"},
              "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": u[1]}
                           for k, u in USERS.items() if k not in ("admin", "kwok", "kcm")]}])
    users = ["alice", "bob", "carol", "dave", "erin"]
    print("Creating %d pods as the users of examples/queues.yaml (each with its own token):" % len(sw.workload()))
    for name, ui, queue, app, cpu, mem, note in sw.workload():
        body = c.pod_body(name, cpu=cpu, memory=mem, labels={"kubequota.io/queue": queue, "kubequota.io/app-id": app})
        c.api(users[ui]).post("/api/v1/namespaces/%s/pods" % ns, body)
    time.sleep(5)
    for name, ui, queue, app, cpu, mem, note in sw.workload():
        p = c.get_pod(ns, name)
        node = p["spec"].get("nodeName")
        why = ""
        if not node:
            ev = [e for e in c.events(ns, name) if e.get("reason") in ("WaitingForQuota", "QuotaExceeded", "QuotaNeverFits")]
            why = ev[-1]["message"] if ev else "waiting"
        print("  %-15s %-6s %-16s %-5s %s" % (name, users[ui], queue, cpu, ("bound to " + node) if node else "WAITS: " + why))
        print("  %15s (%s)" % ("", note))
    kq = HttpClient("https://127.0.0.1:%d" % c.kq_port, ca=c.certs["ca"], token=USERS["admin"][0])
    sw.show(kq)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("command", choices=["up"])
    ap.add_argument("--demo", action="store_true", help="run make run's sample workload, then serve")
    ap.add_argument("--nodes", type=int, default=3)
    ap.add_argument("--config", default=os.path.join(REPO, "examples", "queues.yaml"))
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    a = ap.parse_args()
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1) or (_ for _ in ()).throw(KeyboardInterrupt))
    c = Cluster(nodes=a.nodes, keep=a.keep)
    try:
        c.start()
        c.start_kubequota(open(a.config).read())
        c.apply_webhooks()
        c.start_scheduler()
        print("cluster: up in %.1fs (work directory %s)" % (c.startup_seconds, c.work))
        if a.demo:
            demo(c)
        print("  kubectl:   %s --kubeconfig %s get nodes" % (os.path.join(c.bin, "kubectl"), c.kubeconfig_for("admin")))
        for u in ("alice", "bob", "carol"):
            print("  as %-6s %s" % (u + ":", c.kubeconfig_for(u)))
        print("  kubequota: https://127.0.0.1:%d (log %s)" % (c.kq_port, c.path("kq.log")))
        print("Ctrl-C stops everything.")
        while True:
            time.sleep(1)
            for n, p in c.procs.items():
                if not p.alive():
                    print("cluster: %s exited:\n%s" % (n, p.tail()))
                    return 1
    except KeyboardInterrupt:
        return 0
    finally:
        c.stop()


if __name__ == "__main__":
    sys.exit(main())
