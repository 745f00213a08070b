#!/usr/bin/python3
"""A small Kubernetes API server simulator for kubequota's end-to-end tests and `make run`.

It speaks enough of the real API for a scheduler extender's client: pods (create, get,
delete, list with limit/continue and field/label selectors, merge and JSON patches,
scheduling gates (set at creation, only removed afterwards, a gated pod is not bindable),
watch with resourceVersion,
bookmarks, timeoutSeconds and in-band 410 errors after compaction), pods/binding,
pods/eviction, pods/status, core/v1 events, configmaps, nodes, coordination.k8s.io/v1 leases, and the
ElasticQuota custom resources of scheduling.x-k8s.io/v1alpha1 (status subresource) and
scheduling.sigs.k8s.io/v1alpha1 (Koordinator's CRD: no status subresource); which of the
two the cluster serves is configurable (POST /_sim/config {"crds": [...]}). Errors use
the Kubernetes Status shape. A plain-JSON control API under /_sim/ lets tests reset the
world, add nodes, change pod phases, compact the history, drop watch connections or stall
them (silent, open), inject faults (status, delay, hold, close, or lose_answer: carry the
request out and drop the answer) and read the whole state.

DESIGN: one lock (a Condition) guards the whole world: objects, the event history, the
resourceVersion counter and the fault list. Every change takes one new resourceVersion from
one global counter, is appended to the history and wakes every watcher. Each watch runs in
its own request thread: it takes the events after its position under the lock, then writes
them (chunked) without the lock. Compaction raises the floor: a watch (or continue token)
older than the floor gets 410 Expired. Handlers never do socket I/O under the lock.

PARITY: tests/cluster/test_kube_apisim_parity.py runs one set of API checks against this
simulator and a real kube-apiserver (the version pinned in tests/cluster/versions.env, which
/version reports); the answers it checks (Status bodies, 410s, bookmarks, gates, bindings,
quantities, selectors, Leases, TokenReview, pagination, evictions) are the real server's.
What it models differently on purpose, and the parity checks leave out:
  - no Namespace objects: any namespace exists; of a new pod's defaults only what kubequota
    reads (requests from limits, canonical quantities, qosClass, the SchedulingGated
    condition), not the admission plugins' (service account volume, tolerations, dnsPolicy
    ...), and no managedFields
  - deletion is immediate: no graceful deletion (deletionTimestamp while a kubelet stops the
    pod) and no finalizers; binding a pod being deleted is refused as the real server does,
    but only a pod created with deletionTimestamp set can be in that state
  - no PodDisruptionBudget objects: evictions are refused for named pods (eviction_refused)
    or all (eviction_status) with the answer a PDB would give (the budget is named by
    eviction_pdb, default sim-pdb)
  - compaction (/_sim/compact) also ends a running watch that is behind the new floor with
    an in-band 410, as a real server does to a watcher its watch cache dropped; the real
    watch cache keeps a running watch going through an etcd compaction
  - bookmarks come every bookmark_interval seconds (the real server: about once a minute)
    and 2 s before a watch's timeout, as there
  - TokenReview knows only the review_tokens configured (service account tokens are not
    issued; the audience is kubeadm's default one)
  - no server-side apply (application/apply-patch+yaml is a 415); a strategic merge patch
    is a JSON merge patch (lists are replaced, never merged by key)
  - no authorization: a request with the token is allowed everything; one without a token
    is 401 (the real server goes on as system:anonymous and RBAC answers 403)
  - World.watch_lag delays one resource's watch events (a test knob: the real server has
    no such setting, but a busy one or a slow informer delivers one watch late)

Standalone: python3 tests/e2e/apisim.py --port 0 --cert C --key K [--port-file F]
            [--token T] [--nodes N] [--bookmark-interval S] [--host H]
In-process: sim = ApiSim(cert=..., key=...); sim.start(); ...; sim.stop()
Standard library only.
"""

import argparse
import base64
import bisect
import copy
import datetime
import http.client
import http.server
import io
import json
import os
import re
import secrets
import signal
import socket
import ssl
import sys
import threading
import time
import urllib.parse
import uuid

MAX_BODY = 3 * 1024 * 1024  # the API server's request body limit
EQ_GROUPS = ("scheduling.x-k8s.io", "scheduling.sigs.k8s.io")
EQ_RESOURCES = {"elasticquotas." + g: g for g in EQ_GROUPS}  # world resource key -> API group
EQ_NO_STATUS = ("scheduling.sigs.k8s.io",)  # Koordinator's CRD has no status subresource
# Koordinator's ElasticQuotaProfile (namespaced, no status subresource used); served when
# World.crds holds its group, which it does not by default
PROFILE_GROUP = "quota.koordinator.sh"
DEFAULT_SCHEDULER = "default-scheduler"
TERMINAL = ("Succeeded", "Failed")
# PUT without metadata.resourceVersion is an unconditional update for these (their registry
# strategies allow it); Leases and the ElasticQuota custom resources refuse it (422)
UNCONDITIONAL_UPDATE = ("pods", "nodes", "events", "namespaces", "configmaps")
# PUT of a missing object creates it (AllowCreateOnUpdate) for these; 404 for the others
CREATE_ON_UPDATE = ("leases", "events")

POD_FIELDS = ("metadata.name", "metadata.namespace", "spec.nodeName", "spec.restartPolicy",
              "spec.schedulerName", "spec.serviceAccountName", "spec.hostNetwork",
              "status.phase", "status.podIP", "status.nominatedNodeName")
NODE_FIELDS = ("metadata.name", "spec.unschedulable")
EVENT_FIELDS = ("metadata.name", "metadata.namespace", "involvedObject.kind",
                "involvedObject.namespace", "involvedObject.name", "involvedObject.uid",
                "reason", "type", "source")


def now_rfc3339():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class ApiError(Exception):
    """An error answered with a Kubernetes Status object."""

    def __init__(self, code, reason, message, details=None):
        super().__init__(message)
        self.code, self.reason, self.message, self.details = code, reason, message, details
        self.list_meta = {}  # the Status's metadata (an expired list's continue token)

    def status(self):
        s = {"kind": "Status", "apiVersion": "v1", "metadata": dict(self.list_meta), "status": "Failure",
             "message": self.message, "reason": self.reason}
        if self.details is not None:
            s["details"] = self.details
        s["code"] = self.code
        return s


RESOURCE_GROUPS = {"leases": "coordination.k8s.io", "elasticquotaprofiles": PROFILE_GROUP,
                   "resourceclaims": "resource.k8s.io"}


def resource_of(resource):
    """(plural, API group) of a world resource key ("leases", "elasticquotas.<group>")."""
    if resource in EQ_RESOURCES:
        return "elasticquotas", EQ_RESOURCES[resource]
    return resource, RESOURCE_GROUPS.get(resource, "")


def qualified(resource):
    """The resource as kube-apiserver names it in messages: leases.coordination.k8s.io."""
    plural, group = resource_of(resource)
    return plural + "." + group if group else plural


def details(resource, name, **extra):
    """A Status's details: name, the API group (when there is one), kind (the plural)."""
    plural, group = resource_of(resource)
    d = {"name": name}
    if group:
        d["group"] = group
    d["kind"] = plural
    d.update(extra)
    return d


def not_found(kind, name):
    return ApiError(404, "NotFound", '%s "%s" not found' % (qualified(kind), name),
                    details(kind, name))


def conflict_modified(resource, name):
    return ApiError(409, "Conflict",
                    'Operation cannot be fulfilled on %s "%s": the object has been modified; please '
                    'apply your changes to the latest version and try again' % (qualified(resource), name),
                    details(resource, name))


def uid_precondition_failed(name, want, have):
    """kube-apiserver's answer to a delete whose preconditions.uid does not match."""
    return ApiError(409, "Conflict",
                    'Operation cannot be fulfilled on Pod "%s": the UID in the precondition (%s) does not '
                    'match the UID in record (%s). The object might have been deleted and then recreated'
                    % (name, want, have), {"name": name, "kind": "Pod"})


def status_success(code=201):
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": code}


def status_expired(message):
    return ApiError(410, "Expired", message)


QUANTITY_RE = re.compile(r"^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$")
QUANTITY_FORMAT_ERR = ("quantities must match the regular expression "
                       "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")
DEC_SUFFIX = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
BIN_SUFFIX = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}


def parse_quantity(text, digits=9):
    """(value as a Fraction rounded up to 10^-digits, format "bin"/"dec"/"exp") of a
    resource.Quantity; ValueError with the API server's message when it is no quantity."""
    import fractions
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        text = repr(text)  # a JSON number: Quantity's UnmarshalJSON takes its text
    if not isinstance(text, str):
        raise ValueError(QUANTITY_FORMAT_ERR)
    m = QUANTITY_RE.match(text.strip())
    if not m or m.group(1).count(".") > 1 or not any(ch.isdigit() for ch in m.group(1)):
        raise ValueError(QUANTITY_FORMAT_ERR)
    num, suf = m.group(1), m.group(2)
    value = fractions.Fraction(num)
    if suf in BIN_SUFFIX:
        fmt, value = "bin", value * 1024 ** BIN_SUFFIX[suf]
    elif suf in DEC_SUFFIX:
        fmt, value = "dec", value * fractions.Fraction(10) ** DEC_SUFFIX[suf]
    elif re.match(r"^[eE][-+]?[0-9]+$", suf):
        fmt, value = "exp", value * fractions.Fraction(10) ** int(suf[1:])
    else:
        raise ValueError("unable to parse quantity's suffix")
    scaled = value * 10 ** digits  # round up (away from zero)
    whole = -((-abs(scaled)) // 1) * (1 if scaled >= 0 else -1)
    return fractions.Fraction(whole, 10 ** digits), fmt


def canonical_quantity(text, digits=9):
    """A resource.Quantity in the form kube-apiserver stores and answers (k8s.io/apimachinery
    pkg/api/resource, CanonicalizeBytes): "1000m" -> "1", "0.5" -> "500m", "1024Mi" -> "1Gi",
    "2000" -> "2k", "1e3" stays "1e3". The value is rounded up to 10^-digits: nano units as
    ParseQuantity does; a core/v1 ResourceList is defaulted to milli units (digits=3,
    SetDefaults_ResourceList: "0.1m" cpu is stored as "1m"). ValueError with the API server's
    message when it is no quantity."""
    value, fmt = parse_quantity(text, digits)
    if value == 0:
        return "0"
    if fmt == "bin" and (abs(value) < 1024 or value.denominator != 1):
        fmt = "dec"
    sign = "-" if value < 0 else ""
    value = abs(value)
    if fmt == "bin":
        n, k = int(value), 0
        while k < 6 and n % 1024 == 0:
            n, k = n // 1024, k + 1
        return "%s%d%s" % (sign, n, ("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")[k])
    n, e = value * 10 ** 9, -9  # an integer now
    n = int(n)
    while n % 10 == 0:
        n, e = n // 10, e + 1
    while e % 3:
        n, e = n * 10, e - 1
    if fmt == "dec":
        for s_, x in DEC_SUFFIX.items():
            if x == e:
                return "%s%d%s" % (sign, n, s_)
    return "%s%d%s" % (sign, n, "e%d" % e if e else "")


def pod_defaults(pod):
    """What kube-apiserver itself writes into a new pod: a container's requests default to
    its limits (SetDefaults_Pod), status.qosClass (GetPodQOS), and for a gated pod the
    PodScheduled=False condition with reason SchedulingGated."""
    spec, status = pod["spec"], pod["status"]
    containers = [c for f in ("initContainers", "containers") for c in spec.get(f) or [] if isinstance(c, dict)]
    for c in containers:
        res = c.get("resources")
        if isinstance(res, dict) and isinstance(res.get("limits"), dict):
            req = res.setdefault("requests", {})
            for k, v in res["limits"].items():
                req.setdefault(k, v)
    requests, limits, guaranteed = {}, {}, True
    for c in containers:
        res = c.get("resources") or {}
        for k, v in (res.get("requests") or {}).items():
            if k in ("cpu", "memory") and parse_quantity(v)[0] != 0:
                requests[k] = requests.get(k, 0) + parse_quantity(v)[0]
        found = set()
        for k, v in (res.get("limits") or {}).items():
            if k in ("cpu", "memory") and parse_quantity(v)[0] != 0:
                found.add(k)
                limits[k] = limits.get(k, 0) + parse_quantity(v)[0]
        if found != {"cpu", "memory"}:
            guaranteed = False
    if not requests and not limits:
        status.setdefault("qosClass", "BestEffort")
    elif guaranteed and requests == limits:
        status.setdefault("qosClass", "Guaranteed")
    else:
        status.setdefault("qosClass", "Burstable")
    if spec.get("schedulingGates") and not any(c.get("type") == "PodScheduled"
                                               for c in status.get("conditions") or []):
        status.setdefault("conditions", []).append({
            "type": "PodScheduled", "status": "False", "lastProbeTime": None,
            "lastTransitionTime": now_rfc3339(), "reason": "SchedulingGated",
            "message": "Scheduling is blocked due to non-empty scheduling gates"})


def canonical_resources(obj, kind):
    """Every resource list of a Pod or Node in canonical quantities (in place); a bad
    quantity is the API server's 400 for a body it cannot decode."""
    def fix(rl):
        if isinstance(rl, dict):
            for k in list(rl):
                rl[k] = canonical_quantity(rl[k], 3)
    try:
        if kind == "Pod":
            spec = obj.get("spec") or {}
            for field in ("containers", "initContainers", "ephemeralContainers"):
                for c in spec.get(field) or []:
                    if isinstance(c, dict) and isinstance(c.get("resources"), dict):
                        fix(c["resources"].get("requests"))
                        fix(c["resources"].get("limits"))
            fix(spec.get("overhead"))
            if isinstance(spec.get("resources"), dict):
                fix(spec["resources"].get("requests"))
                fix(spec["resources"].get("limits"))
        else:
            st = obj.get("status") or {}
            fix(st.get("capacity"))
            fix(st.get("allocatable"))
    except ValueError as e:
        raise ApiError(400, "BadRequest", '%s in version "v1" cannot be handled as a %s: %s' % (kind, kind, e))
    return obj


def field_value(obj, path):
    """The string value of a selectable field (missing -> "")."""
    cur = obj
    for part in path.split("."):
        if not isinstance(cur, dict):
            return ""
        cur = cur.get(part)
    if cur is None:
        return ""
    if isinstance(cur, bool):
        return "true" if cur else "false"
    if isinstance(cur, dict):  # event source
        return cur.get("component", "")
    return str(cur)


def parse_field_selector(sel, allowed):
    """'a=b,c!=d' -> [(field, op, value)]; unknown fields -> 400 like the API server."""
    out = []
    if not sel:
        return out
    for term in sel.split(","):
        term = term.strip()
        if not term:
            continue
        m = re.match(r"^([A-Za-z0-9_.\-/]+)\s*(==|!=|=)\s*(.*)$", term)
        if not m:
            raise ApiError(400, "BadRequest", "invalid field selector: %r" % term)
        field, op, value = m.group(1), m.group(2), m.group(3)
        if field not in allowed:
            raise ApiError(400, "BadRequest",
                           'field label not supported: %s' % field)
        out.append((field, "!=" if op == "!=" else "=", value))
    return out


def parse_label_selector(sel):
    """Equality (k=v, k==v, k!=v), existence (k, !k) and set (k in (a,b), k notin (a))."""
    out = []
    if not sel:
        return out
    # split on commas outside parentheses
    terms, depth, cur = [], 0, ""
    for ch in sel:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            terms.append(cur)
            cur = ""
        else:
            cur += ch
    terms.append(cur)
    for term in terms:
        term = term.strip()
        if not term:
            continue
        m = re.match(r"^([A-Za-z0-9_.\-/]+)\s+(in|notin)\s+\((.*)\)$", term)
        if m:
            vals = {v.strip() for v in m.group(3).split(",") if v.strip()}
            out.append((m.group(1), m.group(2), vals))
            continue
        m = re.match(r"^([A-Za-z0-9_.\-/]+)\s*(==|!=|=)\s*([A-Za-z0-9_.\-]*)$", term)
        if m:
            out.append((m.group(1), "!=" if m.group(2) == "!=" else "=", m.group(3)))
            continue
        m = re.match(r"^(!?)([A-Za-z0-9_.\-/]+)$", term)
        if m:
            out.append((m.group(2), "!exists" if m.group(1) else "exists", None))
            continue
        raise ApiError(400, "BadRequest", "unable to parse requirement: %r" % term)
    return out


def matches(obj, fsel, lsel):
    for field, op, value in fsel:
        v = field_value(obj, field)
        if (v == value) != (op == "="):
            return False
    labels = (obj.get("metadata") or {}).get("labels") or {}
    for key, op, value in lsel:
        present = key in labels
        if op == "=" and labels.get(key) != value:
            return False
        if op == "!=" and present and labels.get(key) == value:
            return False
        if op == "exists" and not present:
            return False
        if op == "!exists" and present:
            return False
        if op == "in" and labels.get(key) not in value:
            return False
        if op == "notin" and present and labels.get(key) in value:
            return False
    return True


def merge_patch(target, patch):
    """RFC 7386 JSON merge patch (also used for strategic-merge patches of simple fields)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if not isinstance(target, dict):
        target = {}
    out = dict(target)
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


def gate_names(pod):
    gates = (pod.get("spec") or {}).get("schedulingGates") or []
    return [g.get("name") if isinstance(g, dict) else None for g in gates]


def check_gates_create(pod):
    """Pod creation: gates are {name} objects with unique names, and a gated pod cannot name
    a node (kubernetes pkg/apis/core/validation/validation.go, validateSchedulingGates and
    ValidatePodCreate's nodeName rule)."""
    name = pod["metadata"].get("name", "")
    gates = pod["spec"].get("schedulingGates")
    if gates is None:
        return
    if not isinstance(gates, list):
        raise ApiError(422, "Invalid", 'Pod "%s" is invalid: spec.schedulingGates: Invalid value: '
                       'must be a list' % name)
    seen = set()
    for i, g in enumerate(gates):
        n = g.get("name") if isinstance(g, dict) else None
        if not isinstance(n, str) or not n:
            raise ApiError(422, "Invalid", 'Pod "%s" is invalid: spec.schedulingGates[%d].name: '
                           'Required value' % (name, i))
        if n in seen:
            raise ApiError(422, "Invalid", 'Pod "%s" is invalid: spec.schedulingGates[%d].name: '
                           'Duplicate value: "%s"' % (name, i, n))
        seen.add(n)
    if gates and pod["spec"].get("nodeName"):
        raise ApiError(422, "Invalid", 'Pod "%s" is invalid: spec.nodeName: Forbidden: cannot be set '
                       'until all schedulingGates have been cleared' % name)


def check_gates_update(name, old, new):
    """Gates may only be removed after creation (validation.go
    validateOnlyDeletedSchedulingGates); the wording is kube-apiserver's."""
    before = set(n for n in gate_names(old) if n)
    for i, n in enumerate(gate_names(new)):
        if n not in before:
            raise ApiError(422, "Invalid", "Pod \"%s\" is invalid: spec.schedulingGates[%d].name: "
                           "Forbidden: only deletion is allowed, but found new scheduling gate '%s'"
                           % (name, i, n), {"name": name, "kind": "Pod",
                                            "causes": [{"reason": "FieldValueForbidden",
                                                        "message": "Forbidden: only deletion is allowed, "
                                                                   "but found new scheduling gate '%s'" % n,
                                                        "field": "spec.schedulingGates[%d].name" % i}]})


def _pointer(path):
    if path == "":
        return []
    if not path.startswith("/"):
        raise ValueError("JSON pointer %r does not start with /" % path)
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


class PatchTestFailed(ValueError):
    """A JSON patch "test" operation did not hold."""


def json_patch(doc, ops):
    """RFC 6902 JSON Patch (add, remove, replace, test, copy, move). ValueError on failure."""
    if not isinstance(ops, list):
        raise ValueError("a JSON patch must be an array of operations")
    doc = copy.deepcopy(doc)

    def parent(segs):
        cur = doc
        for s in segs[:-1]:
            if isinstance(cur, dict) and s in cur:
                cur = cur[s]
            elif isinstance(cur, list) and s.isdigit() and int(s) < len(cur):
                cur = cur[int(s)]
            else:
                raise ValueError("path %s does not exist" % "/".join(segs))
        return cur

    def get(segs):
        if not segs:
            return doc
        par, last = parent(segs), segs[-1]
        if isinstance(par, dict) and last in par:
            return par[last]
        if isinstance(par, list) and last.isdigit() and int(last) < len(par):
            return par[int(last)]
        raise ValueError("path /%s does not exist" % "/".join(segs))

    def remove(segs):
        par, last = parent(segs), segs[-1]
        if isinstance(par, dict) and last in par:
            return par.pop(last)
        if isinstance(par, list) and last.isdigit() and int(last) < len(par):
            return par.pop(int(last))
        raise ValueError("unable to remove nonexistent key: %s" % last)

    def add(segs, value):
        nonlocal doc
        if not segs:
            doc = value
            return
        par, last = parent(segs), segs[-1]
        if isinstance(par, dict):
            par[last] = value
        elif isinstance(par, list) and (last == "-" or (last.isdigit() and int(last) <= len(par))):
            par.insert(len(par) if last == "-" else int(last), value)
        else:
            raise ValueError("cannot add at /%s" % "/".join(segs))

    for op in ops:
        if not isinstance(op, dict) or not isinstance(op.get("path"), str):
            raise ValueError("operation without a path")
        segs = _pointer(op["path"])
        kind = op.get("op")
        if kind == "test":
            try:
                have = get(segs)
            except ValueError:
                raise PatchTestFailed("testing value %s failed: no such path" % op["path"])
            if have != op.get("value"):
                raise PatchTestFailed("testing value %s failed" % op["path"])
        elif kind == "remove":
            remove(segs)
        elif kind == "add":
            add(segs, copy.deepcopy(op.get("value")))
        elif kind == "replace":
            get(segs)
            remove(segs)
            add(segs, copy.deepcopy(op.get("value")))
        elif kind in ("copy", "move"):
            src = _pointer(op.get("from") or "")
            v = copy.deepcopy(get(src))
            if kind == "move":
                remove(src)
            add(segs, v)
        else:
            raise ValueError("unexpected kind of operation: %r" % kind)
    return doc


class Fault:
    def __init__(self, spec, fid):
        self.id = fid
        self.method = (spec.get("method") or "").upper() or None
        self.path = re.compile(spec.get("path") or ".*")
        self.status = spec.get("status")
        self.reason = spec.get("reason") or "InternalError"
        self.message = spec.get("message") or "injected fault"
        self.delay = float(spec.get("delay") or 0)
        self.hold = bool(spec.get("hold"))
        self.close = bool(spec.get("close"))  # close the connection without answering
        # carry the request out, then close the connection without answering: the client
        # cannot tell whether it happened (a timeout after the server committed)
        self.lose_answer = bool(spec.get("lose_answer"))
        self.count = spec.get("count", 1)     # None/-1 = until cleared
        if self.count is not None and self.count < 0:
            self.count = None
        self.hits = 0
        self.released = threading.Event()

    def describe(self):
        return {"id": self.id, "method": self.method, "path": self.path.pattern,
                "status": self.status, "delay": self.delay, "hold": self.hold,
                "close": self.close, "lose_answer": self.lose_answer, "count": self.count, "hits": self.hits}


class World:
    """All simulated state, guarded by self.cond."""

    RESOURCES = ("pods", "nodes", "events", "leases", "namespaces", "configmaps",
                 "elasticquotaprofiles", "resourceclaims") + tuple(EQ_RESOURCES)

    def __init__(self, bookmark_interval=2.0):
        self.cond = threading.Condition()
        self.rv = 1000
        self.floor = 0
        self.bookmark_interval = bookmark_interval
        self.auto_run = True          # binding also marks the pod Running (the kubelet)
        self.eviction_status = None   # e.g. 429: every eviction is refused like a PDB would
        self.eviction_refused = set()  # "ns/name": evictions of these pods are refused (429)
        self.eviction_pdb = "sim-pdb"  # the PodDisruptionBudget a refusal names
        self.crds = set(EQ_GROUPS)    # ElasticQuota API groups served
        # resource -> seconds: that resource's watches hold each batch of events this long
        # before sending it, so its events reach a client later than other resources' (the
        # interleavings of a busy API server or a slow informer; tests/e2e/test_order_model.py)
        self.watch_lag = {}
        self.stopping = False
        self.generation = 0           # bumped by reset/drop: watchers of older generations end
        self._init_state()

    def _init_state(self):
        self.objs = {r: {} for r in self.RESOURCES}  # resource -> key -> object (no kind)
        self.history = []       # (rv, resource, type, obj, prev)
        self.history_rvs = []
        self.snapshots = {}     # continue id -> (rv, resource, [(key, item)], created)
        self.faults = []
        self.held_faults = []   # hold faults that matched: released by clear/reset/stop
        self.fault_seq = 0
        self.held = 0
        self.counters = {"bindings": 0, "binding_conflicts": 0, "evictions": 0,
                         "evictions_refused": 0, "lists": {}, "watches": {},
                         "watch_expired": 0, "continue_expired": 0, "requests": 0,
                         "faults_hit": 0, "events_posted": 0,
                         "writes": 0, "writes_but_events": 0, "write_log": []}
        self.watchers = set()
        self.drop_requests = {}  # watcher id -> mode
        self.gate_removals = []  # (time.monotonic(), "ns/name", gate) in the order they happened

    # ---- helpers (lock held) ----
    def next_rv(self):
        self.rv += 1
        return self.rv

    @staticmethod
    def key(ns, name):
        return "%s/%s" % (ns, name) if ns else name

    def record(self, resource, etype, obj, prev=None):
        """Appends a history event (obj already carries its new resourceVersion)."""
        rv = int(obj["metadata"]["resourceVersion"])
        self.history.append((rv, resource, etype, copy.deepcopy(obj),
                             copy.deepcopy(prev) if prev is not None else None))
        self.history_rvs.append(rv)
        self.cond.notify_all()

    def store(self, resource, key, obj, etype, prev=None):
        obj["metadata"]["resourceVersion"] = str(self.next_rv())
        if etype == "DELETED":
            self.objs[resource].pop(key, None)
        else:
            self.objs[resource][key] = obj
        self.record(resource, etype, obj, prev)
        return obj

    def bump(self, name, resource=None):
        c = self.counters
        if resource is None:
            c[name] += 1
        else:
            c[name][resource] = c[name].get(resource, 0) + 1

    # ---- control operations (take the lock) ----
    def reset(self):
        with self.cond:
            for f in self.faults + self.held_faults:
                f.released.set()
            self.generation += 1
            self._init_state()
            self.floor = self.rv  # old resourceVersions are now too old
            self.cond.notify_all()

    def compact(self):
        with self.cond:
            self.floor = self.rv
            self.history = []
            self.history_rvs = []
            self.snapshots = {k: v for k, v in self.snapshots.items() if v[0] >= self.floor}
            self.cond.notify_all()
            return self.floor

    def stall_watches(self, resource=None):
        """The open watches (of resource, or all) go silent for good: no events, no
        bookmarks, the connection stays open (a stalled proxy or API server). Watches
        opened later are not affected."""
        with self.cond:
            n = 0
            for w in list(self.watchers):
                if resource and w.resource != resource:
                    continue
                w.stalled = True
                n += 1
            self.cond.notify_all()
            return n

    def drop_watches(self, mode="close", resource=None):
        """Ends open watches abruptly: mode "close" (no terminating chunk) or "partial"
        (half an event line first)."""
        with self.cond:
            n = 0
            for w in list(self.watchers):
                if resource and w.resource != resource:
                    continue
                self.drop_requests[w.id] = mode
                n += 1
            self.cond.notify_all()
            return n

    def add_fault(self, spec):
        with self.cond:
            self.fault_seq += 1
            f = Fault(spec, self.fault_seq)
            self.faults.append(f)
            return f.describe()

    def clear_faults(self):
        with self.cond:
            for f in self.faults + self.held_faults:
                f.released.set()
            n = len(self.faults)
            self.faults = []
            self.held_faults = []
            self.cond.notify_all()
            return n

    def match_fault(self, method, path):
        with self.cond:
            for f in self.faults:
                if f.method and f.method != method:
                    continue
                if not f.path.search(path):
                    continue
                f.hits += 1
                self.counters["faults_hit"] += 1
                if f.hold and f not in self.held_faults:
                    self.held_faults.append(f)
                if f.count is not None:
                    f.count -= 1
                    if f.count <= 0:
                        self.faults.remove(f)
                return f
        return None

    def add_node(self, name, cpu="8", memory="32Gi", pods="110", labels=None, extra=None):
        with self.cond:
            if name in self.objs["nodes"]:
                raise ApiError(409, "AlreadyExists", 'nodes "%s" already exists' % name,
                               {"name": name, "kind": "nodes"})
            node = {
                "metadata": {"name": name, "uid": str(uuid.uuid4()),
                             "creationTimestamp": now_rfc3339(),
                             "labels": dict({"kubernetes.io/hostname": name,
                                             "kubernetes.io/os": "linux"}, **(labels or {}))},
                "spec": {},
                "status": {
                    "capacity": {"cpu": str(cpu), "memory": str(memory), "pods": str(pods)},
                    "allocatable": {"cpu": str(cpu), "memory": str(memory), "pods": str(pods)},
                    "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                    "message": "kubelet is posting ready status",
                                    "lastHeartbeatTime": now_rfc3339(),
                                    "lastTransitionTime": now_rfc3339()}],
                },
            }
            if extra:
                node = merge_patch(node, extra)
            canonical_resources(node, "Node")
            return copy.deepcopy(self.store("nodes", name, node, "ADDED"))

    def delete_node(self, name):
        with self.cond:
            node = self.objs["nodes"].get(name)
            if node is None:
                raise not_found("nodes", name)
            node = copy.deepcopy(node)
            return self.store("nodes", name, node, "DELETED", prev=node)

    def create_pod(self, ns, pod, uid=None):
        """uid: the one the API server gave the pod before its validating webhooks were
        called (a test that plays the API server's admission chain); None: a new one."""
        if not isinstance(pod, dict) or not isinstance(pod.get("metadata", {}), dict):
            raise ApiError(400, "BadRequest", "the body of the request was not a Pod object")
        pod = copy.deepcopy(pod)
        pod.pop("kind", None)
        pod.pop("apiVersion", None)
        md = pod.setdefault("metadata", {})
        if md.get("namespace") not in (None, "", ns):
            raise ApiError(400, "BadRequest", "the namespace of the provided object does not "
                           "match the namespace sent on the request")
        spec = pod.get("spec")
        if not isinstance(spec, dict) or not isinstance(spec.get("containers"), list) \
                or not spec["containers"]:
            raise ApiError(422, "Invalid", 'Pod "%s" is invalid: spec.containers: Required value'
                           % md.get("name", ""))
        with self.cond:
            if not md.get("name"):
                if not md.get("generateName"):
                    raise ApiError(422, "Invalid", "name or generateName is required")
                while True:
                    name = md["generateName"] + secrets.token_hex(3)[:5]
                    if self.key(ns, name) not in self.objs["pods"]:
                        break
                md["name"] = name
            key = self.key(ns, md["name"])
            if key in self.objs["pods"]:
                raise ApiError(409, "AlreadyExists", 'pods "%s" already exists' % md["name"],
                               {"name": md["name"], "kind": "pods"})
            check_gates_create(pod)
            canonical_resources(pod, "Pod")
            md["namespace"] = ns
            md["uid"] = uid or str(uuid.uuid4())
            md["creationTimestamp"] = now_rfc3339()
            md.pop("deletionTimestamp", None)
            if not spec.get("schedulerName"):
                spec["schedulerName"] = DEFAULT_SCHEDULER
            spec.setdefault("restartPolicy", "Always")
            spec.setdefault("priority", 0)
            status = pod.get("status") if isinstance(pod.get("status"), dict) else {}
            status.setdefault("phase", "Pending")
            pod["status"] = status
            pod_defaults(pod)
            self.store("pods", key, pod, "ADDED")
            if spec.get("nodeName") and self.auto_run and status["phase"] == "Pending":
                self._run(key)
            return copy.deepcopy(self.objs["pods"][key])

    def _run(self, key):
        prev = copy.deepcopy(self.objs["pods"][key])
        pod = copy.deepcopy(prev)
        st = pod["status"]
        st["phase"] = "Running"
        st.setdefault("startTime", now_rfc3339())
        st["hostIP"] = "10.0.0.1"
        st["podIP"] = "10.244.0.%d" % (self.rv % 250 + 2)
        self.store("pods", key, pod, "MODIFIED", prev)

    def get(self, resource, ns, name):
        with self.cond:
            obj = self.objs[resource].get(self.key(ns, name))
            if obj is None:
                raise not_found(resource, name)
            return copy.deepcopy(obj)

    def delete_pod(self, ns, name, uid=None):
        with self.cond:
            key = self.key(ns, name)
            pod = self.objs["pods"].get(key)
            if pod is None:
                raise not_found("pods", name)
            if uid and pod["metadata"]["uid"] != uid:
                raise uid_precondition_failed(name, uid, pod["metadata"]["uid"])
            prev = copy.deepcopy(pod)
            pod = copy.deepcopy(pod)
            pod["metadata"]["deletionTimestamp"] = now_rfc3339()
            pod["metadata"]["deletionGracePeriodSeconds"] = 0
            return copy.deepcopy(self.store("pods", key, pod, "DELETED", prev))

    def bind(self, ns, name, body):
        if not isinstance(body, dict) or not isinstance(body.get("target"), dict):
            raise ApiError(400, "BadRequest", "the body of the request was not a Binding")
        target = body["target"]
        node = target.get("name") or ""
        if not node or target.get("kind", "Node") not in ("Node", ""):
            raise ApiError(422, "Invalid", 'Binding "%s" is invalid: target: Invalid value' % name)
        md = body.get("metadata") or {}
        if md.get("name") not in (None, "", name):
            raise ApiError(400, "BadRequest", "name in URL does not match name in Binding object")
        with self.cond:
            key = self.key(ns, name)
            pod = self.objs["pods"].get(key)
            if pod is None:
                raise not_found("pods", name)
            uid = md.get("uid")
            if uid and uid != pod["metadata"]["uid"]:
                self.counters["binding_conflicts"] += 1
                # kube-apiserver answers with the storage layer's error, key and all
                raise ApiError(409, "Conflict",
                               "Operation cannot be fulfilled on pods \"%s\": StorageError: invalid "
                               "object, Code: 4, Key: /registry/pods/%s/%s, ResourceVersion: 0, "
                               "AdditionalErrorMsg: Precondition failed: UID in precondition: %s, UID "
                               "in object meta: %s" % (name, ns, name, uid, pod["metadata"]["uid"]),
                               {"name": name, "kind": "pods"})
            # kubernetes pkg/registry/core/pod/storage/storage.go setPodNodeAndMetadata, in its
            # order; a pod that has ended (Succeeded/Failed) is bound like any other
            if pod["metadata"].get("deletionTimestamp"):
                self.counters["binding_conflicts"] += 1
                raise ApiError(409, "Conflict", 'Operation cannot be fulfilled on pods/binding '
                               '"%s": pod %s is being deleted, cannot be assigned to a host' % (name, name),
                               {"name": name, "kind": "pods/binding"})
            if pod["spec"].get("nodeName"):
                self.counters["binding_conflicts"] += 1
                raise ApiError(409, "Conflict",
                               "Operation cannot be fulfilled on pods/binding \"%s\": pod %s is "
                               "already assigned to node \"%s\"" % (name, name,
                                                                   pod["spec"]["nodeName"]),
                               {"name": name, "kind": "pods/binding"})
            if pod["spec"].get("schedulingGates"):
                # kubernetes pkg/registry/core/pod/storage/storage.go (BindingREST, assignPod):
                # "Reject binding to a scheduling un-ready Pod."
                self.counters["binding_conflicts"] += 1
                raise ApiError(409, "Conflict", 'Operation cannot be fulfilled on pods/binding '
                               '"%s": pod %s has non-empty .spec.schedulingGates' % (name, name),
                               {"name": name, "kind": "pods/binding"})
            prev = copy.deepcopy(pod)
            pod = copy.deepcopy(pod)
            pod["spec"]["nodeName"] = node
            conds = [c for c in pod["status"].get("conditions") or []
                     if c.get("type") != "PodScheduled"]
            conds.append({"type": "PodScheduled", "status": "True", "lastProbeTime": None,
                          "lastTransitionTime": now_rfc3339()})
            pod["status"]["conditions"] = conds
            self.store("pods", key, pod, "MODIFIED", prev)
            self.counters["bindings"] += 1
            if self.auto_run and pod["status"].get("phase") == "Pending":
                self._run(key)
            return status_success(201)

    def evict(self, ns, name, body):
        uid = None
        if isinstance(body, dict):
            uid = (((body.get("deleteOptions") or {}).get("preconditions")) or {}).get("uid")
        with self.cond:
            if self.key(ns, name) not in self.objs["pods"]:
                raise not_found("pods", name)
            if self.eviction_status or self.key(ns, name) in self.eviction_refused:
                self.counters["evictions_refused"] += 1
                raise ApiError(int(self.eviction_status or 429), "TooManyRequests",
                               "Cannot evict pod as it would violate the pod's disruption budget.",
                               {"causes": [{"reason": "DisruptionBudget",
                                            "message": "The disruption budget %s needs 1 "
                                                       "healthy pods and has 1 currently"
                                                       % self.eviction_pdb}]})
            self.delete_pod(ns, name, uid)
            self.counters["evictions"] += 1
            return status_success(201)

    def set_pod_phase(self, ns, name, phase, reason=None):
        if phase not in ("Pending", "Running", "Succeeded", "Failed", "Unknown"):
            raise ApiError(422, "Invalid", "unknown phase %r" % phase)
        with self.cond:
            key = self.key(ns, name)
            pod = self.objs["pods"].get(key)
            if pod is None:
                raise not_found("pods", name)
            prev = copy.deepcopy(pod)
            pod = copy.deepcopy(pod)
            pod["status"]["phase"] = phase
            if reason:
                pod["status"]["reason"] = reason
            return copy.deepcopy(self.store("pods", key, pod, "MODIFIED", prev))

    def update(self, resource, ns, name, body, subresource=None, patch=False):
        """PUT (replace) or PATCH (merge; patch="json" for an RFC 6902 JSON patch) of an
        object or its status."""
        if patch == "json":
            return self.json_patch(resource, ns, name, body, subresource)
        if not isinstance(body, dict):
            raise ApiError(400, "BadRequest", "the body of the request was not a JSON object")
        body_name = (body.get("metadata") or {}).get("name")
        if not patch and body_name not in (None, "", name):
            raise ApiError(400, "BadRequest", "the name of the object (%s) does not match the name "
                           "on the URL (%s)" % (body_name, name))
        with self.cond:
            key = self.key(ns, name)
            cur = self.objs[resource].get(key)
            if cur is None:
                raise not_found(resource, name)
            want_rv = (body.get("metadata") or {}).get("resourceVersion")
            if not patch and not want_rv and resource not in UNCONDITIONAL_UPDATE:
                # Leases and custom resources refuse an update that names no resourceVersion
                # (their strategies' AllowUnconditionalUpdate is false)
                msg = "Invalid value: 0: must be specified for an update"
                raise ApiError(422, "Invalid", '%s "%s" is invalid: metadata.resourceVersion: %s'
                               % (qualified(resource), name, msg),
                               details(resource, name, causes=[{"reason": "FieldValueInvalid", "message": msg,
                                                                "field": "metadata.resourceVersion"}]))
            if want_rv and want_rv != cur["metadata"]["resourceVersion"]:
                raise conflict_modified(resource, name)
            prev = copy.deepcopy(cur)
            if patch:
                body = dict(body)
                body.pop("kind", None)
                body.pop("apiVersion", None)
                if subresource == "status":
                    new = copy.deepcopy(cur)
                    new["status"] = merge_patch(cur.get("status") or {}, body.get("status") or {})
                else:
                    new = merge_patch(cur, body)
            else:
                if subresource == "status":
                    new = copy.deepcopy(cur)
                    new["status"] = copy.deepcopy(body.get("status") or {})
                else:
                    new = copy.deepcopy(body)
                    new.pop("kind", None)
                    new.pop("apiVersion", None)
                    if resource == "pods":
                        new["status"] = copy.deepcopy(cur.get("status") or {})
            if resource == "resourceclaims" and subresource is None:
                new["status"] = copy.deepcopy(cur.get("status") or {})
                if not new["status"]:
                    new.pop("status")
            if resource in EQ_RESOURCES and subresource is None and \
                    EQ_RESOURCES[resource] not in EQ_NO_STATUS:
                # with a status subresource, writes to the object leave its status alone
                new["status"] = copy.deepcopy(cur.get("status") or {})
                if not new["status"]:
                    new.pop("status")
            # identity fields cannot change
            md = new.setdefault("metadata", {})
            for f in ("name", "namespace", "uid", "creationTimestamp"):
                if f in cur["metadata"]:
                    md[f] = cur["metadata"][f]
            if resource == "pods":
                if not isinstance(new.get("spec"), dict):
                    raise ApiError(422, "Invalid", 'Pod "%s" is invalid: spec: Required value' % name)
                canonical_resources(new, "Pod")
                new["spec"]["nodeName"] = cur["spec"].get("nodeName")
                if new["spec"]["nodeName"] is None:
                    new["spec"].pop("nodeName")
                check_gates_update(name, cur, new)
                after = set(gate_names(new))
                for gname in gate_names(cur):
                    if gname not in after:
                        self.gate_removals.append((time.monotonic(), key, gname))
                if new["spec"].get("schedulingGates") == []:
                    new["spec"].pop("schedulingGates")
            if resource == "configmaps":
                check_configmap(name, new)
            return copy.deepcopy(self.store(resource, key, new, "MODIFIED", prev))

    def json_patch(self, resource, ns, name, ops, subresource=None):
        """PATCH with Content-Type application/json-patch+json: the operations apply to the
        stored object (a failed "test" is the caller's precondition: 422, nothing stored)."""
        with self.cond:
            key = self.key(ns, name)
            cur = self.objs[resource].get(key)
            if cur is None:
                raise not_found(resource, name)
            try:
                new = json_patch(cur, ops)
            except PatchTestFailed:
                # kube-apiserver says no more than this when a "test" operation fails
                raise ApiError(422, "Invalid", "the server rejected our request due to an error "
                               "in our request", {})
            except ValueError as e:
                raise ApiError(422, "Invalid", "the server rejected our request due to an error "
                               "in our request: %s" % e)
            if not isinstance(new, dict):
                raise ApiError(422, "Invalid", "the patched object is not an object")
            new.setdefault("metadata", {})["resourceVersion"] = cur["metadata"]["resourceVersion"]
            if subresource == "status":
                new = dict(copy.deepcopy(cur), status=new.get("status") or {})
            elif resource == "pods":
                new["status"] = copy.deepcopy(cur.get("status") or {})
            return self.update(resource, ns, name, new, subresource, patch=False)

    def create_simple(self, resource, ns, body):
        """POST of an event or a lease (and nodes through the API)."""
        if not isinstance(body, dict) or not isinstance(body.get("metadata") or {}, dict):
            raise ApiError(400, "BadRequest", "the body of the request was not a JSON object")
        obj = copy.deepcopy(body)
        obj.pop("kind", None)
        obj.pop("apiVersion", None)
        md = obj.setdefault("metadata", {})
        if ns and md.get("namespace") not in (None, "", ns):
            raise ApiError(400, "BadRequest", "the namespace of the provided object does not "
                           "match the namespace sent on the request")
        if resource in EQ_RESOURCES:
            obj.setdefault("spec", {})
            if EQ_RESOURCES[resource] not in EQ_NO_STATUS:
                # with a status subresource, the status given at creation is dropped
                obj.pop("status", None)
        if resource == "configmaps":
            check_configmap(md.get("name") or md.get("generateName") or "", obj)
        if resource == "resourceclaims":
            obj.pop("status", None)  # a status subresource: the status given at creation is dropped
        if resource == "events":
            io = obj.get("involvedObject")
            if not isinstance(io, dict) or not io.get("name"):
                raise ApiError(422, "Invalid", "Event is invalid: involvedObject: Required value")
            if io.get("namespace") not in (None, "", ns):
                raise ApiError(422, "Invalid", "Event is invalid: involvedObject.namespace: "
                               "Invalid value: does not match event.namespace")
            if obj.get("type") not in (None, "", "Normal", "Warning"):
                raise ApiError(422, "Invalid", "Event is invalid: type: Unsupported value: %r"
                               % obj.get("type"))
        with self.cond:
            if not md.get("name"):
                if not md.get("generateName"):
                    raise ApiError(422, "Invalid", "%s is invalid: metadata.name: Required value: "
                                   "name or generateName is required" % resource)
                md["name"] = md["generateName"] + secrets.token_hex(3)[:5]
            key = self.key(ns, md["name"])
            if key in self.objs[resource]:
                raise ApiError(409, "AlreadyExists", '%s "%s" already exists' % (qualified(resource), md["name"]),
                               details(resource, md["name"]))
            if ns:
                md["namespace"] = ns
            md["uid"] = str(uuid.uuid4())
            md["creationTimestamp"] = now_rfc3339()
            if resource == "events":
                self.counters["events_posted"] += 1
            return copy.deepcopy(self.store(resource, key, obj, "ADDED"))

    def list(self, resource, ns, fsel, lsel, limit, cont):
        """A list, in pages of `limit` with continue tokens. A token names a position (the key
        after which the next page starts) in the list at its resourceVersion, as etcd's keys
        do: it can be used again, until compaction removes that version; then the answer is
        410 Expired carrying a token that goes on from the same key in the current state (the
        real server's "inconsistent continue", resourceVersion -1)."""
        def enc(tok):
            return base64.urlsafe_b64encode(json.dumps(tok).encode()).decode().rstrip("=")

        def current():
            return [(k, o) for k, o in sorted(self.objs[resource].items())
                    if (not ns or o["metadata"].get("namespace") == ns) and matches(o, fsel, lsel)]
        with self.cond:
            self.bump("lists", resource)
            sid = None
            if cont:
                try:
                    tok = json.loads(base64.urlsafe_b64decode(cont.encode() + b"=="))
                    sid, srv, off, after = tok["id"], int(tok["rv"]), int(tok["off"]), str(tok["after"])
                except Exception as e:
                    raise ApiError(400, "BadRequest", "invalid continue token: continue key is not "
                                   "valid: %s" % e)
                if srv == -1:  # go on from the key, in the current state
                    sid, off = None, 0
                    list_rv, items = self.rv, [(k, o) for k, o in current() if k > after]
                else:
                    snap = self.snapshots.get(sid)
                    if snap is None or srv < self.floor:
                        self.counters["continue_expired"] += 1
                        err = status_expired(
                            "The provided continue parameter is too old to display a consistent "
                            "list result. You can start a new list without the continue parameter, "
                            "or use the continue token in this response to retrieve the remainder "
                            "of the results. Continuing with the provided token results in an "
                            "inconsistent list - objects that were created, modified, or deleted "
                            "between the time the first chunk was returned and now may show up in "
                            "the list.")
                        err.list_meta = {"continue": enc({"id": None, "rv": -1, "off": 0, "after": after})}
                        raise err
                    list_rv, items = snap[0], snap[2][off:]
            else:
                off = 0
                list_rv, items = self.rv, current()
            meta = {"resourceVersion": str(list_rv)}
            if limit and limit > 0 and len(items) > limit:
                if sid is None:
                    sid, off = secrets.token_hex(8), 0
                    self.snapshots[sid] = (list_rv, resource, [(k, copy.deepcopy(o)) for k, o in items],
                                           time.time())
                    # forget abandoned snapshots
                    old = [k for k, v in self.snapshots.items() if time.time() - v[3] > 600]
                    for k in old:
                        del self.snapshots[k]
                meta["continue"] = enc({"id": sid, "rv": list_rv, "off": off + limit,
                                        "after": items[limit - 1][0]})
                if not fsel and not lsel:
                    # with a selector the number left is unknown: unset, as on the real server
                    meta["remainingItemCount"] = len(items) - limit
                items = items[:limit]
            kind = KINDS[resource][0] + "List"
            api = KINDS[resource][1]
            return {"kind": kind, "apiVersion": api, "metadata": meta,
                    "items": [copy.deepcopy(o) for _, o in items]}

    def state(self):
        with self.cond:
            return {
                "resourceVersion": str(self.rv), "floor": self.floor,
                "pods": [copy.deepcopy(p) for _, p in sorted(self.objs["pods"].items())],
                "nodes": [copy.deepcopy(n) for _, n in sorted(self.objs["nodes"].items())],
                "events": [copy.deepcopy(e) for _, e in sorted(
                    self.objs["events"].items(),
                    key=lambda kv: int(kv[1]["metadata"]["resourceVersion"]))],
                "leases": [copy.deepcopy(e) for _, e in sorted(self.objs["leases"].items())],
                "configmaps": [copy.deepcopy(e) for _, e in sorted(self.objs["configmaps"].items())],
                "elasticquotas": {EQ_RESOURCES[r]: [copy.deepcopy(e) for _, e in
                                                   sorted(self.objs[r].items())] for r in EQ_RESOURCES},
                "crds": sorted(self.crds),
                "counters": copy.deepcopy(self.counters),
                "gate_removals": list(self.gate_removals),
                "watches": sorted(w.resource for w in self.watchers),
                "held": self.held,
                "faults": [f.describe() for f in self.faults],
                "bookmark_interval": self.bookmark_interval,
                "auto_run": self.auto_run,
                "eviction_status": self.eviction_status,
            }


CONFIGMAP_MAX_BYTES = 1048576  # k8s.io/api/core/v1 MaxSecretSize, also ConfigMaps' limit


def check_configmap(name, obj):
    """kube-apiserver's ValidateConfigMap: data holds strings, binaryData base64 strings, and
    the two together at most 1 MiB (pkg/apis/core/validation/validation.go); a value of
    another JSON type fails to decode, with encoding/json's words."""
    go_types = {bool: "bool", int: "number", float: "number", dict: "object", list: "array"}
    total = 0
    for field, gotype in (("data", "string"), ("binaryData", "[]uint8")):
        d = obj.get(field)
        if d is None:
            continue
        if not isinstance(d, dict):
            raise ApiError(400, "BadRequest", 'ConfigMap in version "v1" cannot be handled as a ConfigMap: '
                           "json: cannot unmarshal %s into Go struct field ConfigMap.%s of type map[string]%s"
                           % (go_types.get(type(d), "string"), field, gotype))
        for v in d.values():
            if v is not None and not isinstance(v, str):
                raise ApiError(400, "BadRequest", 'ConfigMap in version "v1" cannot be handled as a '
                               "ConfigMap: json: cannot unmarshal %s into Go struct field ConfigMap.%s of "
                               "type %s" % (go_types.get(type(v), "object"), field, gotype))
            v = v or ""
            if field == "binaryData":
                try:
                    total += len(base64.b64decode(v, validate=True))
                    continue
                except ValueError:
                    pass  # (not checked further)
            total += len(v.encode())
    if total > CONFIGMAP_MAX_BYTES:
        msg = "Too long: may not be more than %d bytes" % CONFIGMAP_MAX_BYTES
        raise ApiError(422, "Invalid", 'ConfigMap "%s" is invalid: []: %s' % (name, msg),
                       {"name": name, "kind": "ConfigMap",
                        "causes": [{"reason": "FieldValueTooLong", "message": msg, "field": "[]"}]})


KINDS = {"pods": ("Pod", "v1"), "nodes": ("Node", "v1"), "events": ("Event", "v1"),
         "namespaces": ("Namespace", "v1"), "configmaps": ("ConfigMap", "v1"),
         "leases": ("Lease", "coordination.k8s.io/v1")}
KINDS.update({r: ("ElasticQuota", g + "/v1alpha1") for r, g in EQ_RESOURCES.items()})
KINDS["elasticquotaprofiles"] = ("ElasticQuotaProfile", PROFILE_GROUP + "/v1alpha1")
KINDS["resourceclaims"] = ("ResourceClaim", "resource.k8s.io/v1")


def with_kind(resource, obj):
    kind, api = KINDS[resource]
    out = {"kind": kind, "apiVersion": api}
    out.update(obj)
    return out


def bookmark(resource, rv, initial_events_end=False):
    kind, api = KINDS[resource]
    obj = {"kind": kind, "apiVersion": api, "metadata": {"resourceVersion": str(rv)}}
    if initial_events_end:
        # the end of a watch's initial state (the ADDED events of what exists)
        obj["metadata"]["annotations"] = {"k8s.io/initial-events-end": "true"}
    if resource == "pods":
        obj["spec"] = {"containers": None}
        obj["status"] = {}
    return {"type": "BOOKMARK", "object": obj}


class Watcher:
    _seq = 0

    def __init__(self, resource):
        Watcher._seq += 1
        self.id = Watcher._seq
        self.resource = resource
        self.stalled = False


# ---------------------------------------------------------------------------------------
# HTTP layer
# ---------------------------------------------------------------------------------------

API_RE = re.compile(
    r"^/(?:api/v1|apis/coordination\.k8s\.io/v1)"
    r"(?:/namespaces/(?P<ns>[^/]+))?"
    r"/(?P<res>pods|nodes|events|leases|namespaces|configmaps)"
    r"(?:/(?P<name>[^/]+))?"
    r"(?:/(?P<sub>binding|eviction|status))?/?$")


EQ_RE = re.compile(
    r"^/apis/(?P<group>scheduling\.x-k8s\.io|scheduling\.sigs\.k8s\.io)/v1alpha1"
    r"(?:/namespaces/(?P<ns>[^/]+))?"
    r"/elasticquotas"
    r"(?:/(?P<name>[^/]+))?"
    r"(?:/(?P<sub>status))?/?$")

# DRA ResourceClaims (resource.k8s.io/v1, namespaced, with a status subresource). Served
# always, as kube-apiserver 1.35+ does; kube-controller-manager and the scheduler are not
# simulated: tests create claims and write their status.allocation themselves.
CLAIM_RE = re.compile(
    r"^/apis/resource\.k8s\.io/v1"
    r"(?:/namespaces/(?P<ns>[^/]+))?"
    r"/resourceclaims"
    r"(?:/(?P<name>[^/]+))?"
    r"(?:/(?P<sub>status))?/?$")

PROFILE_RE = re.compile(
    r"^/apis/quota\.koordinator\.sh/v1alpha1"
    r"(?:/namespaces/(?P<ns>[^/]+))?"
    r"/elasticquotaprofiles"
    r"(?:/(?P<name>[^/]+))?/?$")


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "kube-apiserver-sim/1.0"

    def log_message(self, fmt, *args):
        if self.server.sim.verbose:
            sys.stderr.write("apisim: %s %s\n" % (self.address_string(), fmt % args))

    @property
    def world(self):
        return self.server.sim.world

    # ---- plumbing ----
    def send_json(self, code, obj, headers=None):
        data = (json.dumps(obj, separators=(",", ":")) + "\n").encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def send_error_status(self, err):
        self.send_json(err.code, err.status())

    def read_body(self):
        te = (self.headers.get("Transfer-Encoding") or "").lower()
        if "chunked" in te:
            data = b""
            while True:
                line = self.rfile.readline(65537)
                size = int(line.split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline(65537) not in (b"\r\n", b"\n", b""):
                        pass
                    break
                if len(data) + size > MAX_BODY:
                    self.close_connection = True
                    raise ApiError(413, "RequestEntityTooLarge", "the request is too large")
                data += self.rfile.read(size)
                self.rfile.readline(3)
            return data
        n = int(self.headers.get("Content-Length") or 0)
        if n > MAX_BODY:
            self.close_connection = True
            if n <= 16 * MAX_BODY:  # drain it so the client sees the answer
                left = n
                while left > 0:
                    got = self.rfile.read(min(left, 65536))
                    if not got:
                        break
                    left -= len(got)
            raise ApiError(413, "RequestEntityTooLarge", "the request is too large")
        return self.rfile.read(n) if n > 0 else b""

    def json_body(self):
        raw = self.read_body()
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError as e:
            raise ApiError(400, "BadRequest", "the body of the request could not be decoded: %s" % e)

    def dispatch(self):
        sim = self.server.sim
        with self.world.cond:
            self.world.counters["requests"] += 1
        url = urllib.parse.urlsplit(self.path)
        path = url.path
        q = dict(urllib.parse.parse_qsl(url.query, keep_blank_values=True))
        try:
            if path.startswith("/_sim/"):
                return self.control(path, q)
            m = PROXY_RE.match(path)
            if m:
                return self.service_proxy(m, url.query)
            if self.command not in ("GET", "HEAD"):  # the write log (explain must add nothing)
                with self.world.cond:
                    self.world.counters["writes"] += 1
                    if "/events" not in path:
                        self.world.counters["writes_but_events"] += 1
                    self.world.counters["write_log"].append("%s %s" % (self.command, path))
                    del self.world.counters["write_log"][:-200]
            fault = self.world.match_fault(self.command, self.path)
            if fault is not None:
                if fault.hold:
                    with self.world.cond:
                        self.world.held += 1
                    try:
                        fault.released.wait(60)
                    finally:
                        with self.world.cond:
                            self.world.held -= 1
                if fault.delay:
                    time.sleep(fault.delay)
                if fault.close:
                    self.close_connection = True
                    self.abort()
                    return
                if fault.lose_answer:
                    self.wfile = io.BytesIO()  # the answer goes nowhere; dispatch_once aborts
                    self.answer_lost = True
                if fault.status:
                    self.read_body_quietly()
                    return self.send_error_status(ApiError(int(fault.status), fault.reason,
                                                           fault.message))
            if path in ("/healthz", "/readyz", "/livez"):
                data = b"ok"
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(data)
                return
            if sim.token is not None:
                auth = self.headers.get("Authorization") or ""
                if auth != "Bearer " + sim.token:
                    self.read_body_quietly()
                    return self.send_error_status(ApiError(401, "Unauthorized", "Unauthorized"))
            if path in ("/api", "/api/"):
                return self.send_json(200, {"kind": "APIVersions", "versions": ["v1"]})
            if path == "/version":
                # the kube-apiserver version the parity checks last held it to
                return self.send_json(200, {"major": "1", "minor": "37", "gitVersion": "v1.37.2-sim"})
            if self.command == "POST" and path in REVIEW_PATHS:
                return self.review(path)
            m = EQ_RE.match(path)
            if m:
                with self.world.cond:
                    served = m.group("group") in self.world.crds
                if not served or (m.group("sub") and m.group("group") in EQ_NO_STATUS):
                    self.read_body_quietly()
                    raise ApiError(404, "NotFound", "the server could not find the requested resource")
                return self.api(m.group("ns"), "elasticquotas." + m.group("group"), m.group("name"),
                                m.group("sub"), q, True)
            m = CLAIM_RE.match(path)
            if m:
                return self.api(m.group("ns"), "resourceclaims", m.group("name"), m.group("sub"), q, True)
            m = PROFILE_RE.match(path)
            if m:
                with self.world.cond:
                    served = PROFILE_GROUP in self.world.crds
                if not served:
                    self.read_body_quietly()
                    raise ApiError(404, "NotFound", "the server could not find the requested resource")
                return self.api(m.group("ns"), "elasticquotaprofiles", m.group("name"), None, q, True)
            m = API_RE.match(path)
            if not m:
                self.read_body_quietly()
                raise ApiError(404, "NotFound", "the server could not find the requested resource")
            return self.api(m.group("ns"), m.group("res"), m.group("name"), m.group("sub"), q,
                            path.startswith("/apis/"))
        except ApiError as e:
            self.send_error_status(e)
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError, socket.timeout):
            self.close_connection = True

    def service_proxy(self, m, query):
        """The API server's service proxy, GET/POST
        /api/v1/namespaces/{ns}/services/[{scheme}:]{name}[:{port}]/proxy/{path}, as
        kube-apiserver serves it: the caller's bearer token must authenticate (the sim's own
        token or a review_tokens one), then the Authorization header is removed before the
        request goes on (kubernetes staging/src/k8s.io/apiserver/pkg/endpoints/filters/
        authentication.go deletes it after authenticating), and the request is sent to the
        Service's endpoint, over TLS without verifying the backend's certificate for https
        (the API server does not verify service proxy backends). Targets are set through
        /_sim/config (proxy_services: {"NS/NAME:PORT": "HOST:PORT"}) or sim.proxy_services.
        The answer is relayed with its status, Content-Type, body and a relative Location
        (absolute ones would need the API server's rewriting, which is not simulated)."""
        sim = self.server.sim
        auth = self.headers.get("Authorization") or ""
        token = auth[7:] if auth.startswith("Bearer ") else None
        if token is None or (token != sim.token and token not in getattr(sim, "review_tokens", {})):
            self.read_body_quietly()
            raise ApiError(401, "Unauthorized", "Unauthorized")
        ns, svc, rest = m.group("ns"), urllib.parse.unquote(m.group("svc")), m.group("rest") or "/"
        parts = svc.split(":")
        if len(parts) == 3:
            scheme, name, port = parts
        elif len(parts) == 2:
            scheme, name, port = "", parts[0], parts[1]
        else:
            scheme, name, port = "", parts[0], ""
        if scheme not in ("", "http", "https"):
            self.read_body_quietly()
            raise ApiError(400, "BadRequest", "invalid scheme %r in service proxy path" % scheme)
        target = getattr(sim, "proxy_services", {}).get("%s/%s:%s" % (ns, name, port or "80"))
        if target is None:
            self.read_body_quietly()
            raise ApiError(404, "NotFound", 'services "%s" not found' % name)
        body = self.read_body() if self.command in ("POST", "PUT", "PATCH") else None
        headers = {k: v for k, v in self.headers.items()
                   if k.lower() not in ("authorization", "host", "connection", "content-length",
                                        "transfer-encoding", "keep-alive", "upgrade")}
        host, _, tport = target.rpartition(":")
        if scheme == "https":
            ctx = ssl._create_unverified_context()
            conn = http.client.HTTPSConnection(host, int(tport), timeout=10, context=ctx)
        else:
            conn = http.client.HTTPConnection(host, int(tport), timeout=10)
        with self.world.cond:
            self.world.counters["proxied"] = self.world.counters.get("proxied", 0) + 1
        try:
            conn.request(self.command, rest + ("?" + query if query else ""), body=body, headers=headers)
            r = conn.getresponse()
            data = r.read()
            status, ctype = r.status, r.getheader("Content-Type") or "application/octet-stream"
            location = r.getheader("Location")
        except (OSError, http.client.HTTPException) as e:
            raise ApiError(503, "ServiceUnavailable", "error trying to reach service: %s" % e)
        finally:
            conn.close()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        if location is not None and not re.match(r"^[a-z]+://|^/", location):
            self.send_header("Location", location)  # relative: it stays under the proxy path
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def review(self, path):
        """TokenReview and SubjectAccessReview: tokens and who may get usage.kubequota.io
        are set through /_sim/config (review_tokens: {token: {username, groups}},
        review_allowed: [username])."""
        sim = self.server.sim
        body = self.json_body() or {}
        spec = body.get("spec") or {}
        with self.world.cond:
            self.world.counters[path.rsplit("/", 1)[1]] = self.world.counters.get(path.rsplit("/", 1)[1], 0) + 1
        if path.endswith("tokenreviews"):
            # kube-apiserver's answer: the spec echoed; authenticated users get the group
            # system:authenticated added; an unknown token leaves "authenticated" out (false)
            # with an empty user and an error; no token at all is a 400
            if not spec.get("token"):
                raise ApiError(400, "BadRequest", "token is required for TokenReview in authentication")
            who = getattr(sim, "review_tokens", {}).get(spec.get("token"))
            if who is not None:
                groups = list(who.get("groups", []))
                if "system:authenticated" not in groups:
                    groups.append("system:authenticated")
                status = {"authenticated": True,
                          "user": {"username": who["username"], "uid": "uid-" + who["username"],
                                   "groups": groups},
                          # the API server's audiences (--api-audiences; kubeadm's default)
                          "audiences": list(spec.get("audiences") or
                                            ["https://kubernetes.default.svc.cluster.local"])}
            else:
                status = {"user": {}, "error": "invalid bearer token"}
            return self.send_json(201, {"kind": "TokenReview", "apiVersion": "authentication.k8s.io/v1",
                                        "metadata": {}, "spec": spec, "status": status})
        ra = spec.get("resourceAttributes") or {}
        allowed = (spec.get("user") in getattr(sim, "review_allowed", ()) and ra.get("group") == "kubequota.io"
                   and ra.get("resource") == "usage" and ra.get("verb") == "get")
        return self.send_json(201, {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
                                    "spec": spec, "status": {"allowed": allowed}})

    def read_body_quietly(self):
        try:
            n = int(self.headers.get("Content-Length") or 0)
            if 0 < n <= MAX_BODY:
                self.rfile.read(n)
            elif n > MAX_BODY:
                self.close_connection = True
        except (OSError, ValueError):
            self.close_connection = True

    def abort(self):
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def dispatch_once(self):
        self.answer_lost = False
        self.dispatch()
        if self.answer_lost:
            self.close_connection = True
            self.abort()

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = lambda self: self.dispatch_once()

    # ---- Kubernetes API ----
    def api(self, ns, res, name, sub, q, is_apis):
        w = self.world
        if (res in RESOURCE_GROUPS or res in EQ_RESOURCES) != is_apis:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if ns is not None:
            ns = urllib.parse.unquote(ns)
        if name is not None:
            name = urllib.parse.unquote(name)
        cluster_scoped = res in ("nodes", "namespaces")
        if cluster_scoped and ns is not None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        method = self.command
        if name is None:
            if method in ("GET", "HEAD"):
                allowed = {"pods": POD_FIELDS, "nodes": NODE_FIELDS, "events": EVENT_FIELDS}.get(
                    res, ("metadata.name", "metadata.namespace"))
                fsel = parse_field_selector(q.get("fieldSelector", ""), allowed)
                lsel = parse_label_selector(q.get("labelSelector", ""))
                if q.get("watch") in ("1", "true", "True"):
                    return self.watch(res, ns, fsel, lsel, q)
                try:
                    limit = int(q.get("limit") or 0)
                except ValueError:
                    raise ApiError(400, "BadRequest", "limit must be an integer")
                return self.send_json(200, w.list(res, ns, fsel, lsel, limit, q.get("continue")))
            if method == "POST":
                body = self.json_body()
                if res == "pods":
                    if ns is None:
                        raise ApiError(405, "MethodNotAllowed", "pods must be created in a namespace")
                    return self.send_json(201, with_kind("pods", w.create_pod(ns, body)))
                if res == "nodes":
                    md = (body or {}).get("metadata") or {}
                    if not md.get("name"):
                        raise ApiError(422, "Invalid", "metadata.name: Required value")
                    node = w.add_node(md["name"], extra=body)
                    return self.send_json(201, with_kind("nodes", node))
                if ns is None:
                    raise ApiError(405, "MethodNotAllowed", "%s must be created in a namespace" % res)
                return self.send_json(201, with_kind(res, w.create_simple(res, ns, body)))
            raise ApiError(405, "MethodNotAllowed",
                           "the server does not allow this method on the requested resource")
        if not cluster_scoped and ns is None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if sub == "binding":
            if res != "pods" or method != "POST":
                raise ApiError(405, "MethodNotAllowed", "only POST is allowed on pods/binding")
            return self.send_json(201, w.bind(ns, name, self.json_body()))
        if sub == "eviction":
            if res != "pods" or method != "POST":
                raise ApiError(405, "MethodNotAllowed", "only POST is allowed on pods/eviction")
            return self.send_json(201, w.evict(ns, name, self.json_body()))
        if sub == "status" and res not in ("pods", "nodes", "resourceclaims") and res not in EQ_RESOURCES:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if method in ("GET", "HEAD"):
            return self.send_json(200, with_kind(res, w.get(res, ns, name)))
        if method == "DELETE":
            body = self.json_body()
            uid = None
            if isinstance(body, dict):
                uid = (body.get("preconditions") or {}).get("uid")
            if res == "pods":
                return self.send_json(200, with_kind(res, w.delete_pod(ns, name, uid)))
            if res == "nodes":
                return self.send_json(200, with_kind(res, w.delete_node(name)))
            with w.cond:
                key = w.key(ns, name)
                obj = w.objs[res].get(key)
                if obj is None:
                    raise not_found(res, name)
                obj = copy.deepcopy(obj)
                w.store(res, key, obj, "DELETED", prev=obj)
            return self.send_json(200, {"kind": "Status", "apiVersion": "v1", "metadata": {},
                                        "status": "Success",
                                        "details": details(res, name, uid=obj["metadata"].get("uid"))})
        if method in ("PUT", "PATCH"):
            body = self.json_body()
            ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
            if method == "PUT" and sub is None and res in CREATE_ON_UPDATE and isinstance(body, dict):
                with w.cond:
                    missing = w.key(ns, name) not in w.objs[res]
                if missing:
                    md = body.get("metadata") if isinstance(body.get("metadata"), dict) else {}
                    if md.get("name") not in (None, "", name):
                        raise ApiError(400, "BadRequest", "the name of the object (%s) does not match "
                                       "the name on the URL (%s)" % (md["name"], name))
                    body = dict(body, metadata=dict(md, name=name))
                    body["metadata"].pop("resourceVersion", None)
                    return self.send_json(201, with_kind(res, w.create_simple(res, ns, body)))
            mode = method == "PATCH"
            if mode and ctype not in ("application/json-patch+json", "application/merge-patch+json",
                                      "application/strategic-merge-patch+json"):
                # (server-side apply, application/apply-patch+yaml, is not simulated)
                raise ApiError(415, "UnsupportedMediaType", "415: Unsupported Media Type", {})
            if mode and ctype == "application/strategic-merge-patch+json" and res in EQ_RESOURCES:
                raise ApiError(415, "UnsupportedMediaType", "the body of the request was in an unknown "
                               "format - accepted media types include: application/json-patch+json, "
                               "application/merge-patch+json, application/apply-patch+yaml")
            if mode and ctype == "application/json-patch+json":
                mode = "json"
            return self.send_json(200, with_kind(res, w.update(res, ns, name, body, sub,
                                                               patch=mode)))
        raise ApiError(405, "MethodNotAllowed",
                       "the server does not allow this method on the requested resource")

    def write_chunk(self, data):
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def watch(self, res, ns, fsel, lsel, q):
        w = self.world
        try:
            timeout = float(q.get("timeoutSeconds") or 1800)
        except ValueError:
            raise ApiError(400, "BadRequest", "timeoutSeconds must be an integer")
        bookmarks = q.get("allowWatchBookmarks") in ("true", "1", "True")
        rv_param = q.get("resourceVersion", "")
        if rv_param not in ("", "0"):
            try:
                start = int(rv_param)
            except ValueError:
                raise ApiError(400, "BadRequest", "invalid resourceVersion %r" % rv_param)
        else:
            start = None
        # the current state as ADDED events first: by default for "any" resourceVersion
        # ("" or "0"); sendInitialEvents=true asks for it with any resourceVersion (with
        # resourceVersionMatch=NotOlderThan), false never
        initial = {"true": True, "false": False}.get(q.get("sendInitialEvents"), start is None)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Cache-Control", "no-cache, private")
        self.end_headers()
        self.wfile.flush()

        watcher = Watcher(res)
        deadline = time.monotonic() + timeout
        pending = []
        with w.cond:
            w.bump("watches", res)
            gen = w.generation
            if start is not None and start < w.floor and not initial:
                w.counters["watch_expired"] += 1
                err = {"type": "ERROR", "object": ApiError(
                    410, "Expired", "too old resource version: %d (%d)" % (start, w.floor + 1)
                ).status()}
                pending = [err]
                watcher = None
            else:
                if initial:
                    # synthetic ADDED events for the current state; with bookmarks, a bookmark
                    # annotated k8s.io/initial-events-end marks their end (as kube-apiserver's
                    # watch cache does)
                    for _, o in sorted(w.objs[res].items()):
                        if (not ns or o["metadata"].get("namespace") == ns) and \
                                matches(o, fsel, lsel):
                            pending.append({"type": "ADDED", "object": with_kind(res, o)})
                    if bookmarks:
                        pending.append(bookmark(res, w.rv, initial_events_end=True))
                    start = w.rv
                elif start is None:
                    start = w.rv
                w.watchers.add(watcher)
        pos = start
        def bookmark_after(t):
            # kube-apiserver's cacheWatcher.nextBookmarkTime: every bookmark_interval (about
            # a minute there), and once 2 s before the watch's timeout; none after that
            at = min(t + w.bookmark_interval, deadline - 2.0)
            return at if at > t else float("inf")
        next_bookmark = bookmark_after(time.monotonic())
        try:
            if watcher is None:
                self.send_events(pending)
                self.write_chunk_end()
                return
            if pending:
                self.send_events(pending)
                pending = []
            while True:
                drop = None
                expired = False
                with w.cond:
                    while True:
                        if w.stopping or w.generation != gen:
                            drop = "close"
                            break
                        drop = w.drop_requests.pop(watcher.id, None)
                        if drop:
                            break
                        if watcher.stalled:
                            w.cond.wait(0.5)
                            continue
                        if pos < w.floor:
                            expired = True
                            break
                        i = bisect.bisect_right(w.history_rvs, pos)
                        if i < len(w.history):
                            for rv, r, etype, obj, prev in w.history[i:]:
                                pos = rv
                                if r != res:
                                    continue
                                ev = self.filtered(res, ns, fsel, lsel, etype, obj, prev)
                                if ev:
                                    pending.append(ev)
                            if pending:
                                break
                            continue
                        t = time.monotonic()
                        if t >= deadline:
                            break
                        if bookmarks and t >= next_bookmark:
                            pending.append(bookmark(res, w.rv))
                            pos = max(pos, w.rv)
                            next_bookmark = bookmark_after(t)
                            break
                        wait = deadline - t
                        if bookmarks:
                            wait = min(wait, next_bookmark - t)
                        w.cond.wait(max(0.01, wait))
                if drop:
                    if drop == "partial":
                        line = json.dumps(pending[0] if pending else bookmark(res, pos),
                                          separators=(",", ":")).encode()
                        self.write_chunk(line[:max(1, len(line) // 2)])
                    self.close_connection = True
                    self.abort()
                    return
                if expired:
                    pending.append({"type": "ERROR", "object": ApiError(
                        410, "Expired", "too old resource version: %d (%d)" % (pos, w.floor + 1)
                    ).status()})
                    with w.cond:
                        w.counters["watch_expired"] += 1
                if pending:
                    lag = w.watch_lag.get(res, 0)
                    if lag and not expired:
                        time.sleep(lag)
                    self.send_events(pending)
                    pending = []
                if expired or time.monotonic() >= deadline:
                    self.write_chunk_end()
                    return
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError, OSError):
            self.close_connection = True
        finally:
            if watcher is not None:
                with w.cond:
                    w.watchers.discard(watcher)
                    w.drop_requests.pop(watcher.id, None)

    @staticmethod
    def filtered(res, ns, fsel, lsel, etype, obj, prev):
        def ok(o):
            return o is not None and (not ns or o["metadata"].get("namespace") == ns) \
                and matches(o, fsel, lsel)
        new_ok = ok(obj)
        if etype == "ADDED":
            return {"type": "ADDED", "object": with_kind(res, obj)} if new_ok else None
        if etype == "DELETED":
            return {"type": "DELETED", "object": with_kind(res, obj)} if ok(prev) or new_ok else None
        old_ok = ok(prev)
        if old_ok and new_ok:
            return {"type": "MODIFIED", "object": with_kind(res, obj)}
        if new_ok:
            return {"type": "ADDED", "object": with_kind(res, obj)}
        if old_ok:
            # leaving the selection: the object as it was, with the event's resourceVersion
            # (kube-apiserver's cacheWatcher.convertToWatchEvent)
            gone = copy.deepcopy(prev)
            gone["metadata"]["resourceVersion"] = obj["metadata"]["resourceVersion"]
            return {"type": "DELETED", "object": with_kind(res, gone)}
        return None

    def send_events(self, events):
        data = b"".join(json.dumps(e, separators=(",", ":")).encode() + b"\n" for e in events)
        self.write_chunk(data)

    def write_chunk_end(self):
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    # ---- control API ----
    def control(self, path, q):
        w = self.world
        sim = self.server.sim
        body = self.json_body() if self.command in ("POST", "PUT", "PATCH", "DELETE") else None
        body = body or {}
        method = self.command
        parts = [urllib.parse.unquote(p) for p in path.split("/")[2:] if p]
        if parts == ["state"] and method == "GET":
            return self.send_json(200, w.state())
        if parts == ["reset"] and method == "POST":
            w.reset()
            return self.send_json(200, {"ok": True, "floor": w.floor})
        if parts == ["compact"] and method == "POST":
            return self.send_json(200, {"floor": w.compact()})
        if parts == ["drop-watches"] and method == "POST":
            n = w.drop_watches(body.get("mode", "close"), body.get("resource"))
            return self.send_json(200, {"dropped": n})
        if parts == ["stall-watches"] and method == "POST":
            return self.send_json(200, {"stalled": w.stall_watches(body.get("resource"))})
        if parts == ["faults"]:
            if method == "POST":
                return self.send_json(201, w.add_fault(body))
            if method == "DELETE":
                return self.send_json(200, {"cleared": w.clear_faults()})
            if method == "GET":
                return self.send_json(200, w.state()["faults"])
        if parts == ["nodes"] and method == "POST":
            node = w.add_node(body.get("name") or "", body.get("cpu", "8"),
                              body.get("memory", "32Gi"), body.get("pods", "110"),
                              body.get("labels"))
            return self.send_json(201, node)
        if len(parts) == 2 and parts[0] == "nodes" and method == "DELETE":
            return self.send_json(200, w.delete_node(parts[1]))
        if len(parts) == 4 and parts[0] == "pods" and parts[3] == "phase" and method == "POST":
            return self.send_json(200, w.set_pod_phase(parts[1], parts[2], body.get("phase"),
                                                       body.get("reason")))
        if parts == ["config"] and method == "POST":
            with w.cond:
                if "bookmark_interval" in body:
                    w.bookmark_interval = float(body["bookmark_interval"])
                if "auto_run" in body:
                    w.auto_run = bool(body["auto_run"])
                if "eviction_status" in body:
                    w.eviction_status = body["eviction_status"]
                if "token" in body:
                    sim.token = body["token"]
                if "crds" in body:
                    w.crds = set(body["crds"]) & (set(EQ_GROUPS) | {PROFILE_GROUP})
                if "review_tokens" in body:
                    sim.review_tokens = dict(body["review_tokens"])
                if "proxy_services" in body:
                    sim.proxy_services = dict(body["proxy_services"])
                if "review_allowed" in body:
                    sim.review_allowed = set(body["review_allowed"])
                w.cond.notify_all()
            return self.send_json(200, {"ok": True})
        raise ApiError(404, "NotFound", "unknown control path %s %s" % (method, path))


PROXY_RE = re.compile(r"^/api/v1/namespaces/(?P<ns>[^/]+)/services/(?P<svc>[^/]+)/proxy(?P<rest>/.*)?$")
REVIEW_PATHS = ("/apis/authentication.k8s.io/v1/tokenreviews",
                "/apis/authorization.k8s.io/v1/subjectaccessreviews")


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 64

    def __init__(self, addr, sim):
        self.sim = sim
        super().__init__(addr, Handler)

    def finish_request(self, request, client_address):
        # TLS handshake in the connection's own thread, never in the accept loop
        if self.sim.ssl_context is not None:
            request.settimeout(10)
            try:
                request = self.sim.ssl_context.wrap_socket(request, server_side=True)
            except (ssl.SSLError, OSError):
                try:
                    request.close()
                except OSError:
                    pass
                return
            request.settimeout(None)
        try:
            self.RequestHandlerClass(request, client_address, self)
        finally:
            try:
                request.close()
            except OSError:
                pass

    def handle_error(self, request, client_address):
        exc = sys.exc_info()[1]
        if isinstance(exc, (BrokenPipeError, ConnectionResetError, ssl.SSLError, socket.timeout,
                            ConnectionAbortedError)):
            return
        super().handle_error(request, client_address)


class ApiSim:
    """The simulator: world + HTTPS server on a background thread."""

    def __init__(self, host="127.0.0.1", port=0, cert=None, key=None, token=None,
                 bookmark_interval=2.0, verbose=False):
        self.world = World(bookmark_interval)
        self.token = token
        self.verbose = verbose
        self.ssl_context = None
        if cert:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(cert, key)
            ctx.set_alpn_protocols(["http/1.1"])
            self.ssl_context = ctx
        self.httpd = Server((host, port), self)
        self.host = host
        self.port = self.httpd.server_address[1]
        self.thread = None

    @property
    def url(self):
        scheme = "https" if self.ssl_context else "http"
        host = "[%s]" % self.host if ":" in self.host else self.host
        return "%s://%s:%d" % (scheme, host, self.port)

    def start(self):
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.2},
                                       name="apisim", daemon=True)
        self.thread.start()
        return self

    def stop(self):
        with self.world.cond:
            self.world.stopping = True
            self.world.cond.notify_all()
        with self.world.cond:
            for f in self.world.faults + self.world.held_faults:
                f.released.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        if self.thread:
            self.thread.join(5)

    # in-process conveniences (the same operations as the control API)
    def add_node(self, name, cpu="8", memory="32Gi", **kw):
        return self.world.add_node(name, cpu, memory, **kw)

    def create_pod(self, pod):
        ns = (pod.get("metadata") or {}).get("namespace") or "default"
        return self.world.create_pod(ns, pod)

    def state(self):
        return self.world.state()


def main(argv=None):
    ap = argparse.ArgumentParser(description="Kubernetes API simulator for kubequota tests")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--cert")
    ap.add_argument("--key")
    ap.add_argument("--token", help="require this bearer token on /api and /apis")
    ap.add_argument("--port-file", help="write the chosen port here once listening")
    ap.add_argument("--nodes", type=int, default=0, help="create node-1..node-N")
    ap.add_argument("--node-cpu", default="8")
    ap.add_argument("--node-memory", default="32Gi")
    ap.add_argument("--bookmark-interval", type=float, default=2.0)
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args(argv)
    if bool(args.cert) != bool(args.key):
        ap.error("--cert and --key go together")
    sim = ApiSim(args.host, args.port, args.cert, args.key, args.token,
                 args.bookmark_interval, args.verbose)
    for i in range(1, args.nodes + 1):
        sim.add_node("node-%d" % i, args.node_cpu, args.node_memory)
    print("apisim: listening on %s" % sim.url, flush=True)
    if args.port_file:
        tmp = args.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write("%d\n" % sim.port)
        os.replace(tmp, args.port_file)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *a: stop.set())
    signal.signal(signal.SIGINT, lambda *a: stop.set())
    sim.start()
    while not stop.wait(0.5):
        pass
    sim.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
