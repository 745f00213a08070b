"""kubequota's ClusterRole grants exactly the API calls its C code makes.

The calls are derived from the source, not listed by hand:
  1. every API path literal in src/*.c ("/api/...", "/apis/...") must match PATH_TABLE,
     which says which resource the path names (a new path fails until it is mapped);
  2. the public request functions of src/kube/kube.c are described in KUBE_FUNCS; the test
     reads each one's body and checks the description (the subresource it passes to
     pod_path, the method it sends), and fails for a public kq_kube_* function that
     builds a request and is not described;
  3. the calls other modules make: kq_kube_* functions from KUBE_FUNCS, the collection
     path given to kq_kube_watch_start (list + watch), and literal paths sent through a
     helper that calls kq_kube_request with a literal method (auth.c's post_json);
  4. paths a module builds at run time (format strings, macros) are explained by
     CALL_SITES entries, whose evidence must still be in the file; and every HTTP method
     a module sends (method literals in calls of *request* functions) must be explained by
     (3) or (4), so a new PUT or DELETE fails until it is mapped.
The ClusterRole (and kubequota's Role) rendered with every feature on must cover this and
grant nothing else except PLANNED permissions, each with the reason it is granted early.
"""

import glob
import os
import re
import unittest

import chartlib as cl

SRC = os.path.join(cl.REPO, "src")

# path regex (C format string as written in the source) -> (apiGroup, resource, item?)
PATH_TABLE = [
    (r"^/api/v1/namespaces/%s/pods/%s(%s%s)?$", ("", "pods", True)),      # kube.c pod_path()
    (r"^/api/v1/pods$", ("", "pods", False)),
    (r"^/api/v1/namespaces/%s/events$", ("", "events", False)),
    (r"^/api/v1/namespaces/%s/events/%s$", ("", "events", True)),
    (r"^/api/v1/nodes$", ("", "nodes", False)),
    (r"^/api/v1/namespaces$", ("", "namespaces", False)),
    (r"^/apis/resource\.k8s\.io/v1/resourceclaims$", ("resource.k8s.io", "resourceclaims", False)),  # sync.c (DRA)
    (r"^/apis/authentication\.k8s\.io/v1/tokenreviews$", ("authentication.k8s.io", "tokenreviews", False)),
    (r"^/apis/authorization\.k8s\.io/v1/subjectaccessreviews$", ("authorization.k8s.io", "subjectaccessreviews", False)),
    (r"^/apis/(scheduling\.x-k8s\.io|scheduling\.sigs\.k8s\.io)/v1alpha1/elasticquotas$", ("@1", "elasticquotas", False)),
    (r"^/apis/%s/v1alpha1/(namespaces/%s/)?elasticquotas(/%s)?$", ("@eq", "elasticquotas", None)),
    (r"^/apis/coordination\.k8s\.io/v1(/namespaces/%s/leases(/%s)?)?$", ("coordination.k8s.io", "leases", None)),
    (r"^/apis/quota\.koordinator\.sh/v1alpha1/elasticquotaprofiles$", ("quota.koordinator.sh", "elasticquotaprofiles", False)),
    (r"^/api/v1/namespaces/%s/configmaps(/%s)?$", ("", "configmaps", None)),  # gating.c's usage history
    (r"^/apis/resource\.k8s\.io/v1/resourceslices$", ("resource.k8s.io", "resourceslices", False)),  # slices.c
    (r"^/apis/resource\.k8s\.io/v1/deviceclasses$", ("resource.k8s.io", "deviceclasses", False)),
    (r"^/api/v1/namespaces/%s/services/https:%s:%s/proxy$", ("", "services/proxy", True)),  # the kubectl plugin
]


def eq_groups():
    """The ElasticQuota API groups kubequota serves (include/kubequota/control/elastic.h)."""
    text = read(os.path.join(cl.REPO, "include", "kubequota", "control", "elastic.h"))
    return sorted(set(re.findall(r'#define KQ_EQ_GROUP_\w+\s+"([^"]+)"', text)))


# Requests whose path is built at run time. Each entry's evidence must all be found in
# its file (or the entry is stale); its methods explain that file's method literals.
def call_sites():
    g = eq_groups()
    return [
        {"file": "elastic.c", "why": "ElasticQuota informer per API group: GET ?limit=1 probe, then list+watch",
         "evidence": [r'"/apis/%s/v1alpha1/elasticquotas"', r'kq_kube_request\([^;]*"GET"',
                      r'kq_kube_watch_start\(\s*[^,]+,\s*path\b', r'api_groups\[N_API\] = \{KQ_EQ_GROUP_'],
         "methods": {"GET"}, "watch": True,
         "perms": [(x, "elasticquotas", v) for x in g for v in ("list", "watch")]},
        {"file": "elastic.c", "why": "status.used (status subresource, or the object for CRDs without one) "
                                     "and the runtime annotation, by merge patch",
         "evidence": [r'"/apis/%s/v1alpha1/namespaces/%s/elasticquotas/%s"', r'"%s/status"',
                      r'kq_kube_request\([^;]*"PATCH"'],
         "methods": {"PATCH"},
         "perms": [(x, r, "patch") for x in g for r in ("elasticquotas", "elasticquotas/status")]},
        {"file": "elastic.c", "why": "ElasticQuotaProfile informer (Koordinator's multi-tree quotas): GET ?limit=1 "
                                     "probe, then list+watch",
         "evidence": [r'#define PROFILE_PATH "/apis/quota\.koordinator\.sh/v1alpha1/elasticquotaprofiles"',
                      r'kq_kube_watch_start\([^;]*PROFILE_PATH', r'kq_kube_request\([^;]*"GET", PROFILE_PATH'],
         "methods": {"GET"}, "watch": True,
         "perms": [("quota.koordinator.sh", "elasticquotaprofiles", v) for v in ("list", "watch")]},
        {"file": "gating.c", "why": "the admission gate: JSON patch removing kubequota.io/admission from the "
                                    "pod's spec.schedulingGates (docs/gating.md)",
         "evidence": [r'"/api/v1/namespaces/%s/pods/%s"', r'kq_kube_request\([^;]*"PATCH"'],
         "methods": {"PATCH"},
         "perms": [("", "pods", "patch")]},
        {"file": "gating.c", "why": "the usage policy's history in one ConfigMap of kubequota's namespace: GET when "
                                    "this replica starts leading, then PUT it (POST the first time) every checkpoint",
         "evidence": [r'"/api/v1/namespaces/%s/configmaps/%s"', r'"/api/v1/namespaces/%s/configmaps"',
                      r'kq_kube_request\([^;]*"GET"', r'kq_kube_request\([^;]*"PUT" : "POST"'],
         "methods": {"GET", "PUT", "POST"},
         "perms": [("", "configmaps", v) for v in ("get", "update", "create")]},
        {"file": "kubectl.c", "why": "the kubectl plugin (kubectl-kubequota) reaches the usage view through the "
                                     "service proxy with the user's own kubeconfig, never kubequota's ServiceAccount: "
                                     "the user needs get services/proxy, kubequota nothing (docs/cli.md)",
         "evidence": [r'"/api/v1/namespaces/%s/services/https:%s:%s/proxy"', r'kq_kubeconfig_load\(',
                      r'kq_kube_request\(c->kube, method,'],
         "methods": {"GET", "POST"},
         "perms": []},
        {"file": "leader.c", "why": "kubequota's Lease: create (POST collection), get, renew (PUT item)",
         "evidence": [r'#define LEASE_API "/apis/coordination\.k8s\.io/v1"', r'"/namespaces/%s/leases"',
                      r'"/namespaces/%s/leases/%s"', r'do_request\([^;]*"POST"', r'do_request\([^;]*"PUT"',
                      r'do_request\([^;]*"GET"'],
         "methods": {"POST", "PUT", "GET"},
         "perms": [("coordination.k8s.io", "leases", v) for v in ("create", "get", "update")]},
    ]

# Public request functions of src/kube/kube.c: name -> (method, pod subresource or None, verb).
# The test checks method and subresource against the function's body.
KUBE_FUNCS = {
    "kq_kube_bind": ("POST", "binding", "create"),
    "kq_kube_evict": ("POST", "eviction", "create"),
    "kq_kube_get_pod": ("GET", None, "get"),
    # queued; event_post() creates the Event (POST) and raises its count later (PATCH), as
    # client-go's recorder does
    "kq_kube_event": ("POST", "events", ("create", "patch")),
    "kq_kube_event_confirmed": ("POST", "events", ("create", "patch")),  # the same queue
}
# kube.c functions that take the path from their caller.
PATH_FROM_CALLER = {"kq_kube_watch_start": ("list", "watch"), "kq_kube_request": None}

# Granted before the code that uses them lands. Keep short; remove an entry when its code
# arrives (the test fails for a planned permission the code already uses).
PLANNED = {}

# Used only when a value turns the feature on; the chart renders the rule only then.
CONDITIONAL = {
    ("authentication.k8s.io", "tokenreviews", "create"): ("restAuth", "kubernetes"),
    ("authorization.k8s.io", "subjectaccessreviews", "create"): ("restAuth", "kubernetes"),
}
# Namespaced, in a Role of the release namespace: resource -> (Role name suffix, when the
# chart renders it): kubequota's lease with its leader election, the usage history's
# ConfigMap with the admission gate.
NAMESPACED = {"leases": ("", "leader"), "configmaps": ("-gating", "gate")}


def namespaced_on(v, when):
    if when == "leader":
        return bool(v["kubequota"]["leaderElection"]["enabled"] or int(v["replicaCount"]) > 1)
    return bool(v["webhooks"]["enabled"] and v["kubequota"]["admissionGate"]["enabled"])

VERB_OF = {"GET": "get", "POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


def read(path):
    with open(path) as f:
        return f.read()


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", lambda m: " " * len(m.group(0)), text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def functions(text):
    """name -> body of every function defined at column 0 (the project's style)."""
    out = {}
    for m in re.finditer(r"(?m)^[A-Za-z_][\w \*]*?\b(\w+)\(([^;{]*?)\)\s*\n\{", text):
        end = re.search(r"(?m)^\}", text[m.end():])
        out[m.group(1)] = text[m.end():m.end() + end.start()] if end else ""
    return out


def map_path(path):
    for rx, (group, res, item) in PATH_TABLE:
        m = re.match(rx, path)
        if m:
            if group == "@1":
                group = m.group(1)
            elif group == "@eq":
                group = "|".join(eq_groups())
            return group, res, item
    return None


def enclosing_call(text, pos):
    """Name of the innermost call whose argument list contains text[pos]."""
    depth = 0
    i = pos
    while i > 0:
        i -= 1
        c = text[i]
        if c == ")":
            depth += 1
        elif c == "(":
            if depth == 0:
                m = re.search(r"(\w+)\s*$", text[:i])
                return m.group(1) if m else None
            depth -= 1
        elif c in ";{}" and depth == 0:
            return None
    return None


def derive():
    """(required permissions {(group, resource, verb): [why]}, problems [str])."""
    need, problems = {}, []

    def add(perm, why):
        need.setdefault(perm, []).append(why)

    kube = strip_comments(read(os.path.join(SRC, "kube", "kube.c")))
    kfuncs = functions(kube)
    # (2) kube.c's public request functions match KUBE_FUNCS
    for name, body in kfuncs.items():
        if not name.startswith("kq_kube_") or name in PATH_FROM_CALLER:
            continue
        builds = "pod_path(" in body or re.search(r'"/apis?/', body) or "post_mapped(" in body
        # the static helpers it calls (a name followed by "(", not a field of the same name),
        # three calls deep
        reach, seen = body, set()
        for _ in range(3):
            called = [n for n in kfuncs if not n.startswith("kq_") and n not in seen
                      and re.search(r"\b%s\s*\(" % re.escape(n), reach)]
            seen.update(called)
            reach += "".join(kfuncs[n] for n in called)
        if KUBE_FUNCS.get(name, (None, None))[1] == "events" and "ev_" in reach:
            reach += kfuncs.get("event_post", "")  # queued: the event thread's event_post() sends it
        if not builds and not re.search(r"\bevent_post\b|\bpost_mapped\(|pod_path\(", reach):
            continue
        if name not in KUBE_FUNCS:
            problems.append("src/kube/kube.c: %s makes an API call the test does not know: add it to KUBE_FUNCS" % name)
            continue
        method, sub, _ = KUBE_FUNCS[name]
        got_method = "POST" if "post_mapped(" in reach else \
            (re.search(r'kq_kube_request\(\s*\w+\s*,\s*"([A-Z]+)"', reach) or [None, None])[1]
        if got_method != method:
            problems.append("src/kube/kube.c: %s sends %s, KUBE_FUNCS says %s" % (name, got_method, method))
        if sub == "events":
            if '"/api/v1/namespaces/%s/events"' not in reach:
                problems.append("src/kube/kube.c: %s no longer posts to namespaces/{ns}/events" % name)
        else:
            m = re.search(r"pod_path\([^;]*?,\s*(NULL|\"(\w+)\")\s*\)", reach)
            got_sub = m and (m.group(2) or None)
            if not m or got_sub != sub:
                problems.append("src/kube/kube.c: %s uses pod subresource %r, KUBE_FUNCS says %r"
                                % (name, got_sub if m else "?", sub))
    for name in KUBE_FUNCS:
        if name not in kfuncs:
            problems.append("KUBE_FUNCS names %s, which src/kube/kube.c no longer defines" % name)

    for path in sorted(glob.glob(os.path.join(SRC, "**", "*.c"), recursive=True)):
        fname = os.path.basename(path)
        rel = os.path.relpath(path, SRC)
        text = strip_comments(read(path))
        # (1) every API path literal is mapped
        for m in re.finditer(r'"(/apis?/[^"]*)"', text):
            if map_path(m.group(1)) is None:
                problems.append("src/%s: API path %s is not in PATH_TABLE" % (rel, m.group(1)))
        if fname == "kube.c":
            continue
        # (3a) calls of kube.c's request functions
        for name, (method, sub, verb) in KUBE_FUNCS.items():
            if re.search(r"\b%s\(" % name, text):
                res = "events" if sub == "events" else ("pods/" + sub if sub else "pods")
                for v in (verb if isinstance(verb, tuple) else (verb,)):
                    add(("", res, v), "src/%s calls %s" % (rel, name))
        sites = [c for c in call_sites() if c["file"] == fname]
        for c in sites:
            for ev in c["evidence"]:
                if not re.search(ev, text):
                    problems.append("CALL_SITES entry for src/%s (%s) is stale: %s not found" % (fname, c["why"], ev))
            for perm in c["perms"]:
                add(perm, "src/%s: %s" % (rel, c["why"]))
        explained = set().union(*[c["methods"] for c in sites]) if sites else set()
        # (3b) informers: kq_kube_watch_start(k, "<collection>", ...)
        for m in re.finditer(r"\bkq_kube_watch_start\(\s*[^,]+,\s*(\"[^\"]*\"|[^,]+)\s*,", text):
            lit = m.group(1)
            if not lit.startswith('"'):
                if not any(c.get("watch") for c in sites):
                    problems.append("src/%s: kq_kube_watch_start with a computed path (%s): add CALL_SITES" % (rel, lit))
                continue
            mp = map_path(lit.strip('"'))
            if mp:
                for verb in PATH_FROM_CALLER["kq_kube_watch_start"]:
                    add((mp[0], mp[1], verb), "src/%s informer on %s" % (rel, lit))
        # (3c) literal paths sent by kq_kube_request, directly or through a local helper;
        # (4) literals that only build a path must be explained by CALL_SITES
        own = functions(text)
        for m in re.finditer(r'"(/apis?/[^"]*)"', text):
            call = enclosing_call(text, m.start())
            line_start = text.rfind("\n", 0, m.start()) + 1
            if call in ("kq_kube_watch_start",):
                continue
            if call in ("snprintf", "asprintf", "dup_printf") or text[line_start:].startswith("#define"):
                if not any(re.search(ev, m.group(0)) or m.group(0) in ev.replace("\\", "")
                           for c in sites for ev in c["evidence"]):
                    problems.append("src/%s: path %s is built at run time: explain it in CALL_SITES" % (rel, m.group(1)))
                continue
            if call == "kq_kube_request":
                seg = text[max(0, m.start() - 200):m.start()]
                mm = re.findall(r'kq_kube_request\(\s*[^,]+,\s*"([A-Z]+)"', seg)
                method = mm[-1] if mm else None
            elif call in own:
                mm = re.search(r'kq_kube_request\(\s*[^,]+,\s*"([A-Z]+)"', own[call])
                method = mm.group(1) if mm else None
            else:
                method = None
            mp = map_path(m.group(1))
            if method is None or mp is None:
                problems.append("src/%s: cannot tell the method of the call to %s (via %s)" % (rel, m.group(1), call))
                continue
            explained.add(method)
            verb = VERB_OF[method]
            if method == "GET" and mp[2] is False:
                verb = "list"
            add((mp[0], mp[1], verb), "src/%s %s %s" % (rel, method, m.group(1)))
        # (4) every method this file sends is explained
        for m in re.finditer(r"\b\w*request\w*\(([^;]*)", text):
            for meth in re.findall(r'"(GET|POST|PUT|PATCH|DELETE)"', m.group(1)):
                if meth not in explained:
                    problems.append("src/%s sends %s on a path the test cannot attribute: extend CALL_SITES"
                                    % (fname, meth))
                    explained.add(meth)
    return need, problems


def granted(rules):
    out = set()
    for r in rules:
        for g in r["apiGroups"]:
            for res in r["resources"]:
                for v in r["verbs"]:
                    out.add((g, res, v))
    return out


class RbacFromCode(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.need, cls.problems = derive()

    def test_source_is_understood(self):
        self.assertEqual(self.problems, [])
        # the derivation itself must see the calls that exist today
        self.assertEqual(eq_groups(), ["scheduling.sigs.k8s.io", "scheduling.x-k8s.io"])
        for perm in [("", "pods/binding", "create"), ("", "pods", "get"), ("", "pods", "list"),
                     ("", "pods", "watch"), ("", "events", "create"), ("", "events", "patch"),
                     ("resource.k8s.io", "resourceclaims", "list"), ("resource.k8s.io", "resourceclaims", "watch")]:
            self.assertIn(perm, self.need, "derivation lost %s: the parser is broken" % (perm,))

    def test_parser_catches_a_new_call(self):
        """A request the test cannot attribute is reported, not silently ignored."""
        import shutil
        import tempfile
        global SRC
        with tempfile.TemporaryDirectory() as d:
            shutil.copytree(SRC, d, dirs_exist_ok=True)
            with open(os.path.join(d, "control", "sync.c"), "a") as f:
                f.write('\nstatic int zz(kq_kube_t *k)\n{\n    kq_kube_resp_t r = {0};\n'
                        '    return kq_kube_request(k, "DELETE", "/api/v1/namespaces/a/configmaps/b", NULL, NULL, &r);\n}\n'
                        'static void zz2(kq_kube_t *k)\n{\n    kq_kube_evict(k, "a", "b", NULL, 0);\n}\n')
            saved, SRC = SRC, d
            try:
                need, problems = derive()
            finally:
                SRC = saved
        self.assertTrue(any("configmaps" in p and "PATH_TABLE" in p for p in problems), problems)
        self.assertTrue(any("DELETE" in p for p in problems), problems)
        self.assertIn("src/control/sync.c calls kq_kube_evict", need[("", "pods/eviction", "create")])

    def check_role(self, name, features_on):
        r = cl.render(name)
        role = granted(r.one("ClusterRole", cl.fullname())["rules"])
        ns_granted = set()
        for suffix, _ in NAMESPACED.values():
            kq_role = r.get("Role", cl.fullname() + suffix)
            ns_granted |= granted(kq_role["rules"]) if kq_role else set()
        for perm, whys in sorted(self.need.items()):
            if perm[1] in NAMESPACED:
                suffix, when = NAMESPACED[perm[1]]
                if namespaced_on(cl_values(r), when):
                    self.assertIn(perm, ns_granted, "%s: Role %s lacks %s, used by %s"
                                  % (name, cl.fullname() + suffix, perm, whys))
                continue
            cond = CONDITIONAL.get(perm)
            on = cond is None or cl_values(r)["kubequota"][cond[0]] == cond[1]
            if on:
                self.assertIn(perm, role, "%s: ClusterRole lacks %s, used by %s" % (name, perm, whys))
            else:
                self.assertNotIn(perm, role, "%s: %s granted though %s is off" % (name, perm, cond))
        extra = sorted(p for p in role if p not in self.need and p not in PLANNED)
        self.assertEqual(extra, [], "%s: ClusterRole grants what no code uses" % name)
        self.assertFalse([p for p in role if p[1] in NAMESPACED], "leases and configmaps belong in namespaced Roles")
        extra = sorted(p for p in ns_granted if p not in self.need)
        self.assertEqual(extra, [], "%s: Role %s grants what no code uses" % (name, cl.fullname()))
        stale = sorted(p for p in PLANNED if p in self.need)
        self.assertEqual(stale, [], "now used by the code: move these out of PLANNED")
        missing_planned = sorted(p for p in PLANNED if p not in role)
        self.assertEqual(missing_planned, [], "PLANNED permissions the chart no longer grants: drop them")
        if features_on:
            self.assertTrue(all(p in role for p in CONDITIONAL))

    def test_cluster_role_default(self):
        self.check_role("default", True)

    def test_cluster_role_rest_default(self):
        self.check_role("rest-default", False)

    def test_cluster_role_all_features(self):
        self.check_role("rest-kubernetes", True)

    def test_namespaced_roles(self):
        # the scheduler's lease only; kubequota's own lease only with its leader election,
        # which more than one replica (the default: 2) turns on
        res = cl.render_with("--set", "replicaCount=1")
        self.assertEqual(res.returncode, 0, res.stderr)
        r = cl.Rendered("one-replica", [], res.stdout)
        (sched,) = [x for x in r.all("Role") if x["metadata"]["name"] == cl.fullname() + "-scheduler"]
        self.assertEqual(sorted(x["metadata"]["name"] for x in r.all("Role")),
                         [cl.fullname() + "-gating", cl.fullname() + "-scheduler"])
        self.assertEqual(granted(sched["rules"]), {("coordination.k8s.io", "leases", "get"),
                                                   ("coordination.k8s.io", "leases", "update")})
        self.assertEqual(sched["rules"][0]["resourceNames"], [r.scheduler_config()["leaderElection"]["resourceName"]])
        self.assertIsNone(r.arg("--leader-elect"))
        for name in ("default", "rest-kubernetes"):
            r = cl.render(name)
            self.assertEqual(len(r.all("Role")), 3, name)
            kq = r.one("Role", cl.fullname())
            self.assertEqual(kq["rules"][1]["resourceNames"], [cl.fullname()])
            self.assertEqual(r.arg("--leader-elect-resource-name"), cl.fullname())
            # the admission gate (on by default): get/update of the one ConfigMap it names
            gate = r.one("Role", cl.fullname() + "-gating")
            cm = cl.fullname() + "-gating-usage"
            self.assertTrue(r.arg("--admission-gate-usage-configmap").endswith("/" + cm))
            self.assertEqual(gate["rules"][1]["resourceNames"], [cm])
            self.assertEqual(set(gate["rules"][1]["verbs"]), {"get", "update"})
            self.assertNotIn("resourceNames", gate["rules"][0])
            self.assertEqual(gate["rules"][0]["verbs"], ["create"])

    def test_no_wildcards(self):
        for name in cl.VALUE_SETS:
            r = cl.render(name)
            for kind in ("ClusterRole", "Role"):
                for role in r.all(kind):
                    for rule in role["rules"]:
                        for k in ("apiGroups", "resources", "verbs"):
                            self.assertNotIn("*", rule[k], "%s %s" % (name, role["metadata"]["name"]))


def cl_values(r):
    from test_render import values_of
    return values_of(r)["full"]


class ServiceProxyAccess(unittest.TestCase):
    """serviceProxyAccess: a Role for the people who use the kubectl plugin and the dashboard,
    granting the service-proxy requests the plugin sends and nothing else. The API server
    authorizes /api/v1/namespaces/NS/services/NAME/proxy/... as resource services, subresource
    proxy, object name NAME as written in the path (scheme and port included), verb from the
    HTTP method (GET get, POST create): kubernetes/kubernetes,
    staging/src/k8s.io/apiserver/pkg/endpoints/request/requestinfo.go (NewRequestInfo)."""

    NAME = cl.fullname() + "-service-proxy"

    def test_off_by_default(self):
        for name in cl.VALUE_SETS:
            r = cl.render(name)
            on = cl_values(r)["serviceProxyAccess"]["enabled"]
            self.assertEqual(r.get("Role", self.NAME) is not None, on, name)
            self.assertEqual(r.get("RoleBinding", self.NAME) is not None, on, name)
        self.assertFalse(cl.render("default").get("Role", self.NAME), "opt-in: the platform team decides who")

    def test_grants_exactly_what_the_plugin_sends(self):
        r = cl.render("service-proxy")
        kubectl = strip_comments(read(os.path.join(SRC, "serve", "kubectl.c")))
        m = re.search(r'"/api/v1/namespaces/%s/services/(https:%s:%s)/proxy"', kubectl)
        self.assertIsNotNone(m, "the plugin's proxy path changed: update the chart's resourceNames")
        svc = r.one("Service")
        # the plugin reaches the usage view's port; the webhooks' own port is not granted
        (port,) = [p for p in svc["spec"]["ports"] if p["name"] == "https"]
        self.assertEqual(port["port"], 8443, "the value set moves the port off 443")
        # --kubequota-port takes a number or a name: both spellings name the Service
        names = sorted(m.group(1) % (svc["metadata"]["name"], p) for p in (port["port"], port["name"]))
        (site,) = [c for c in call_sites() if c["file"] == "kubectl.c"]
        verbs = sorted(VERB_OF[x] for x in site["methods"])
        self.assertEqual(verbs, ["create", "get"])
        role = r.one("Role", self.NAME)
        self.assertEqual(role["metadata"]["namespace"], svc["metadata"]["namespace"])
        (rule,) = role["rules"]
        self.assertEqual(rule["apiGroups"], [""])
        self.assertEqual(rule["resources"], ["services/proxy"])
        self.assertEqual(sorted(rule["resourceNames"]), names)
        self.assertEqual(sorted(rule["verbs"]), verbs)
        b = r.one("RoleBinding", self.NAME)
        self.assertEqual(b["metadata"]["namespace"], cl.NAMESPACE)
        self.assertEqual(b["subjects"], [
            {"kind": "Group", "name": "platform-users", "apiGroup": "rbac.authorization.k8s.io"},
            {"kind": "User", "name": "alice@example.com", "apiGroup": "rbac.authorization.k8s.io"},
            {"kind": "ServiceAccount", "name": "dashboard-reader", "namespace": cl.NAMESPACE},
            {"kind": "ServiceAccount", "name": "ci", "namespace": "tools"},
        ])

    def test_default_subjects_when_enabled(self):
        res = cl.render_with("--set", "serviceProxyAccess.enabled=true")
        self.assertEqual(res.returncode, 0, res.stderr)
        r = cl.Rendered("proxy-on", [], res.stdout)
        self.assertEqual(r.one("RoleBinding", self.NAME)["subjects"],
                         [{"kind": "Group", "name": "system:authenticated", "apiGroup": "rbac.authorization.k8s.io"}])
        self.assertEqual(sorted(r.one("Role", self.NAME)["rules"][0]["resourceNames"]),
                         ["https:%s:443" % cl.fullname(), "https:%s:https" % cl.fullname()])

    def test_refused_values(self):
        cases = [
            (["--set", "serviceProxyAccess.enabled=true", "--set", "serviceProxyAccess.subjects=null"], "subjects"),
            (["--set", "serviceProxyAccess.enabled=true", "--set-json", "serviceProxyAccess.subjects=[]"], "subjects"),
            (["--set-json", 'serviceProxyAccess.subjects=[{"kind":"Role","name":"x"}]'], "kind"),
            (["--set-json", 'serviceProxyAccess.subjects=[{"kind":"Group"}]'], "name"),
            (["--set-json", 'serviceProxyAccess.subjects=[{"kind":"Group","name":"g","apiGroup":"x"}]'], "apiGroup"),
            (["--set", "serviceProxyAccess.verbs=get"], "verbs"),
            (["--set", "serviceProxyAccess.enabled=true", "--set-json",
              'serviceProxyAccess.subjects=[{"kind":"User","name":"alice","namespace":"dev"}]'],
             'User "alice" has namespace "dev"'),
        ]
        for args, word in cases:
            res = cl.render_with(*args)
            self.assertNotEqual(res.returncode, 0, "helm accepted %s" % args)
            self.assertIn(word, res.stderr, args)
