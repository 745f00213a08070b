"""Helpers for the chart tests (Python standard library + Debian's python3-yaml).

  helm(*args)            runs the real Helm fetched by scripts/helm.sh
  render(name)           `helm template` of the chart with one named value set (cached):
                         a Rendered with .docs (parsed objects), .text, .values_args
  VALUE_SETS             the value sets every rendering check runs over
  routes()               kubequota's real HTTP routes, read from src/serve/server.c's table
  serve_flags()          the flags `bin/kubequota serve --help` documents
  binary()               bin/kubequota (KQ_BINARY overrides)

The chart is rendered for Kubernetes 1.35 (the oldest version the chart supports) into the
namespace NAMESPACE with release RELEASE.
"""

import functools
import json
import os
import re
import subprocess
import sys

import yaml  # Debian python3-yaml, installed by scripts/deps.sh

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
CHART = os.path.join(REPO, "charts", "kubequota")
VALUES_DIR = os.path.join(HERE, "values")
RELEASE = "kq"
NAMESPACE = "kubequota-system"
KUBE_VERSION = "1.35.0"
# kubequota.image.repository has no default (no image is published); every rendering names one.
IMAGE_REPOSITORY = "registry.example.com/kubequota"


def binary():
    b = os.environ.get("KQ_BINARY") or os.path.join(REPO, "bin", "kubequota")
    return b if os.path.isabs(b) else os.path.join(REPO, b)


@functools.lru_cache(maxsize=None)
def helm_path():
    p = os.environ.get("KQ_HELM")
    if p:
        return p
    r = subprocess.run(["bash", os.path.join(REPO, "scripts", "helm.sh")], capture_output=True,
                       text=True)
    if r.returncode != 0:
        raise RuntimeError("scripts/helm.sh failed:\n" + r.stderr)
    return r.stdout.strip().splitlines()[-1]


def helm(*args, check=True):
    r = subprocess.run([helm_path()] + list(args), capture_output=True, text=True)
    if check and r.returncode != 0:
        raise AssertionError("helm %s failed (%d):\n%s%s" % (" ".join(args), r.returncode,
                                                              r.stdout, r.stderr))
    return r


# name -> list of helm arguments that select the value set. Every file lives in
# tests/chart/values/ and says what it exercises.
VALUE_SETS = {
    "default": [],
    "cert-manager": ["-f", os.path.join(VALUES_DIR, "cert-manager.yaml")],
    "cert-manager-issuer": ["-f", os.path.join(VALUES_DIR, "cert-manager-issuer.yaml")],
    "existing-secret": ["-f", os.path.join(VALUES_DIR, "existing-secret.yaml")],
    "two-replicas": ["-f", os.path.join(VALUES_DIR, "two-replicas.yaml")],
    "custom-queues": ["-f", os.path.join(VALUES_DIR, "custom-queues.yaml")],
    "client-auth": ["-f", os.path.join(VALUES_DIR, "client-auth.yaml")],
    "rest-kubernetes": ["-f", os.path.join(VALUES_DIR, "rest-kubernetes.yaml")],
    "rest-default": ["-f", os.path.join(VALUES_DIR, "rest-default.yaml")],
    "minimal": ["-f", os.path.join(VALUES_DIR, "minimal.yaml")],
    "metrics-scraper": ["-f", os.path.join(VALUES_DIR, "metrics-scraper.yaml")],
    "service-proxy": ["-f", os.path.join(VALUES_DIR, "service-proxy.yaml")],
    "filtering": ["-f", os.path.join(VALUES_DIR, "filtering.yaml")],
    "extender-tls": ["-f", os.path.join(VALUES_DIR, "extender-tls.yaml")],
    "gate-only": ["-f", os.path.join(VALUES_DIR, "gate-only.yaml")],
}


class Rendered:
    def __init__(self, name, args, text):
        self.name, self.values_args, self.text = name, args, text
        self.docs = [d for d in yaml.safe_load_all(text) if d is not None]

    def all(self, kind):
        return [d for d in self.docs if d.get("kind") == kind]

    def one(self, kind, name=None):
        found = [d for d in self.all(kind) if name is None or d["metadata"]["name"] == name]
        if len(found) != 1:
            raise AssertionError("%s: expected one %s%s, found %d" % (
                self.name, kind, " " + name if name else "", len(found)))
        return found[0]

    def get(self, kind, name):
        for d in self.all(kind):
            if d["metadata"]["name"] == name:
                return d
        return None

    def deployment(self):
        return self.one("Deployment")

    def container(self, name):
        for c in self.deployment()["spec"]["template"]["spec"]["containers"]:
            if c["name"] == name:
                return c
        raise AssertionError("%s: no container %s" % (self.name, name))

    def kubequota_args(self):
        """The kubequota container's args as an ordered list of (flag, value-or-None)."""
        out = []
        for a in self.container("kubequota")["args"][1:]:
            flag, eq, val = a.partition("=")
            out.append((flag, val if eq else None))
        return out

    def arg(self, flag):
        for f, v in self.kubequota_args():
            if f == flag:
                return v
        return None

    def scheduler_config(self):
        cm = self.one("ConfigMap", fullname() + "-scheduler")
        return yaml.safe_load(cm["data"]["scheduler-config.yaml"])

    def queues_yaml(self):
        return self.one("ConfigMap", fullname() + "-queues")["data"]["queues.yaml"]


def fullname():
    return RELEASE + "-kubequota"


def template_args(extra=(), include_crds=True):
    a = ["template", RELEASE, CHART, "--namespace", NAMESPACE, "--kube-version", KUBE_VERSION,
         "--set", "kubequota.image.repository=" + IMAGE_REPOSITORY]
    if include_crds:
        a.append("--include-crds")
    return a + list(extra)


@functools.lru_cache(maxsize=None)
def render(name):
    args = VALUE_SETS[name]
    return Rendered(name, args, helm(*template_args(args)).stdout)


def render_with(*args):
    """Renders with ad-hoc arguments; returns the CompletedProcess (no check)."""
    return helm(*template_args(args), check=False)


@functools.lru_cache(maxsize=None)
def routes():
    """(method, path) pairs of kubequota's routing table in src/serve/server.c."""
    src = open(os.path.join(REPO, "src", "serve", "server.c")).read()
    m = re.search(r"static const route_t routes\[\] = \{(.*?)\n\};", src, re.S)
    if not m:
        raise AssertionError("src/serve/server.c: routing table `static const route_t routes[]` not found")
    found = re.findall(r'\{\s*"([A-Z]+)"\s*,\s*"([^"]+)"', m.group(1))
    if not found:
        raise AssertionError("src/serve/server.c: routing table has no entries the test can read")
    return frozenset(found)


def route_matches(method, path):
    for m, pat in routes():
        if m != method:
            continue
        rx = "^" + "/".join("[^/]+" if seg == "*" else re.escape(seg) for seg in pat.split("/")) + "$"
        if re.match(rx, path):
            return True
    return False


@functools.lru_cache(maxsize=None)
def serve_flags():
    r = subprocess.run([binary(), "serve", "--help"], capture_output=True, text=True)
    if r.returncode != 0:
        raise AssertionError("kubequota serve --help exited %d: %s" % (r.returncode, r.stderr))
    return frozenset(re.findall(r"(?m)^\s+(--[a-z][a-z0-9-]*)", r.stdout))


def have_binary():
    b = binary()
    return os.path.isfile(b) and os.access(b, os.X_OK)


def labels(obj):
    return obj.get("metadata", {}).get("labels") or {}


def eprint(*a):
    print(*a, file=sys.stderr, flush=True)


@functools.lru_cache(maxsize=None)
def models_dir():
    """The folder scripts/kube-models.sh installs kubernetes-models and @bufbuild/cel into."""
    r = subprocess.run(["bash", os.path.join(REPO, "scripts", "kube-models.sh")], capture_output=True,
                       text=True)
    if r.returncode != 0:
        raise RuntimeError("scripts/kube-models.sh failed:\n" + r.stderr)
    return r.stdout.strip().splitlines()[-1]


def _node(script, payload):
    r = subprocess.run(["node", os.path.join(HERE, script), models_dir()], input=json.dumps(payload),
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise AssertionError("node %s failed (%d): %s" % (script, r.returncode, r.stderr))
    return json.loads(r.stdout)


def validate_objects(docs):
    """Per object: None when kubernetes-models' validate() accepts it, else the message."""
    return _node("validate_models.mjs", list(docs))


def cel_eval(cases):
    """Per {expression, object, oldObject, request}: True, False or {"error": ...}."""
    return _node("cel_eval.mjs", list(cases))
