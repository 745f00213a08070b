"""The chart, rendered by real Helm for every value set, checked object by object.

For each value set in chartlib.VALUE_SETS a TestCase class is generated (RenderDefault,
RenderCertManager, ...) running every check below against that rendering.
"""

import base64
import os
import re
import ssl
import subprocess
import tempfile
import unittest

import yaml

import chartlib as cl

# apiVersion/kind pairs a Kubernetes 1.35+ API server serves out of the box.
SERVED = {
    ("v1", "ServiceAccount"), ("v1", "ConfigMap"), ("v1", "Secret"), ("v1", "Service"),
    ("apps/v1", "Deployment"),
    ("rbac.authorization.k8s.io/v1", "ClusterRole"),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
    ("rbac.authorization.k8s.io/v1", "Role"),
    ("rbac.authorization.k8s.io/v1", "RoleBinding"),
    ("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration"),
    ("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration"),
    ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy"),         # GA in 1.30
    ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding"),
    ("policy/v1", "PodDisruptionBudget"),
    ("apiextensions.k8s.io/v1", "CustomResourceDefinition"),
    ("v1", "PersistentVolumeClaim"),
    ("flowcontrol.apiserver.k8s.io/v1", "FlowSchema"),                        # GA in 1.29
}
# Served once their operator's CRDs are installed; rendered only when the values ask.
FROM_CRDS = {
    ("cert-manager.io/v1", "Issuer"): lambda v: v["certManager"],
    ("cert-manager.io/v1", "Certificate"): lambda v: v["certManager"],
    ("monitoring.coreos.com/v1", "ServiceMonitor"): lambda v: v["serviceMonitor"],
}
CLUSTER_SCOPED = {"ClusterRole", "ClusterRoleBinding", "MutatingWebhookConfiguration",
                  "ValidatingWebhookConfiguration", "CustomResourceDefinition", "Namespace",
                  "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding", "FlowSchema"}
BUILTIN_ROLES = {("ClusterRole", "system:kube-scheduler"), ("ClusterRole", "system:volume-scheduler"),
                 ("Role", "extension-apiserver-authentication-reader")}
# Objects the chart deliberately puts outside the release namespace.
OTHER_NAMESPACE = {("RoleBinding", cl.fullname() + "-auth-reader"): "kube-system"}

# Flags the chart renders that kubequota's `serve --help` does not list yet, because the
# code for them is being written (issue 6 names them). Each entry must be removed when the
# binary gains the flag: the test fails for an entry the binary already documents.
PENDING_FLAGS = {
    # flags the chart may render before the binary has them (none now)
}


def values_of(r):
    """The value-set facts the checks need, read from the rendering's -f files."""
    v = {}
    for i, a in enumerate(r.values_args):
        if a == "-f":
            with open(r.values_args[i + 1]) as f:
                v = merge(v, yaml.safe_load(f) or {})
    with open(os.path.join(cl.CHART, "values.yaml")) as f:
        full = merge(yaml.safe_load(f), v)
    return {
        "full": full,
        "certManager": full["tls"]["certManager"]["enabled"],
        "existingSecret": full["tls"]["existingSecret"],
        "clientAuth": full["tls"]["clientAuth"]["enabled"],
        "extenderTls": full["scheduler"]["extender"]["tls"],
        "gateOnly": full["scheduler"]["extender"]["mode"] == "gate-only",
        "serviceMonitor": full["serviceMonitor"]["enabled"],
        "webhooks": full["webhooks"]["enabled"],
        "helmCerts": not full["tls"]["certManager"]["enabled"] and not full["tls"]["existingSecret"],
    }


def merge(a, b):
    out = dict(a)
    for k, v in b.items():
        out[k] = merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def cert_info(pem):
    """Subject alternative names of a PEM certificate, via the ssl module's decoder."""
    with tempfile.NamedTemporaryFile("w", suffix=".pem", delete=False) as f:
        f.write(pem)
    try:
        return ssl._ssl._test_decode_cert(f.name)  # noqa: SLF001 (stdlib, no other decoder)
    finally:
        os.unlink(f.name)


def b64(s):
    return base64.b64decode(s).decode()


class RenderChecks:
    set_name = None

    @classmethod
    def setUpClass(cls):
        cls.r = cl.render(cls.set_name)
        cls.v = values_of(cls.r)

    # -- helm itself ------------------------------------------------------------------

    def test_lint_strict(self):
        r = cl.helm("lint", "--strict", cl.CHART, "--namespace", cl.NAMESPACE,
                    "--kube-version", cl.KUBE_VERSION, "--set", "kubequota.image.repository=" + cl.IMAGE_REPOSITORY,
                    *self.r.values_args, check=False)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("0 chart(s) failed", r.stdout)

    def test_every_document_parses(self):
        self.assertGreater(len(self.r.docs), 8)
        for d in self.r.docs:
            self.assertIsInstance(d, dict)
            for k in ("apiVersion", "kind", "metadata"):
                self.assertIn(k, d, "object without %s: %r" % (k, str(d)[:200]))
            self.assertTrue(d["metadata"].get("name"))
        for cm in self.r.all("ConfigMap"):
            for key, text in cm["data"].items():
                if key.endswith(".yaml"):
                    self.assertIsInstance(yaml.safe_load(text), dict, "%s/%s" % (cm["metadata"]["name"], key))

    def test_kinds_served_by_kubernetes_1_29(self):
        for d in self.r.docs:
            av = (d["apiVersion"], d["kind"])
            if av in SERVED:
                continue
            self.assertIn(av, FROM_CRDS, "%s %s is not served by Kubernetes 1.35+" % av)
            self.assertTrue(FROM_CRDS[av](self.v), "%s %s rendered though not enabled" % av)
        for av, enabled in FROM_CRDS.items():
            if enabled(self.v) and av[1] != "Issuer":
                self.assertTrue(self.r.all(av[1]), "%s enabled but not rendered" % av[1])

    # -- names, labels, references ---------------------------------------------------

    def test_names_labels_namespaces(self):
        seen = set()
        for d in self.r.docs:
            kind, md = d["kind"], d["metadata"]
            key = (kind, md.get("namespace"), md["name"])
            self.assertNotIn(key, seen, "duplicate object %s" % (key,))
            seen.add(key)
            if kind == "CustomResourceDefinition":
                continue
            self.assertTrue(md["name"] == cl.fullname() or md["name"].startswith(cl.fullname() + "-"),
                            "%s %s does not carry the release prefix %s" % (kind, md["name"], cl.fullname()))
            self.assertLessEqual(len(md["name"]), 63)
            lab = cl.labels(d)
            self.assertEqual(lab.get("app.kubernetes.io/name"), "kubequota", "%s %s" % (kind, md["name"]))
            self.assertEqual(lab.get("app.kubernetes.io/instance"), cl.RELEASE)
            self.assertEqual(lab.get("app.kubernetes.io/managed-by"), "Helm")
            self.assertTrue(lab.get("helm.sh/chart", "").startswith("kubequota-"))
            if kind in CLUSTER_SCOPED:
                self.assertNotIn("namespace", md, "%s %s is cluster-scoped" % (kind, md["name"]))
            else:
                want = OTHER_NAMESPACE.get((kind, md["name"]), cl.NAMESPACE)
                self.assertEqual(md.get("namespace"), want, "%s %s" % (kind, md["name"]))

    def test_selectors_match_pods(self):
        dep = self.r.deployment()
        pod_labels = dep["spec"]["template"]["metadata"]["labels"]
        sel = dep["spec"]["selector"]["matchLabels"]
        self.assertTrue(sel)
        self.assertLessEqual(sel.items(), pod_labels.items())
        svc = self.r.one("Service")
        self.assertLessEqual(svc["spec"]["selector"].items(), pod_labels.items())
        for pdb in self.r.all("PodDisruptionBudget"):
            self.assertEqual(pdb["spec"]["selector"]["matchLabels"], sel)
            self.assertLess(int(pdb["spec"]["minAvailable"]), dep["spec"]["replicas"],
                            "a PDB as large as the Deployment blocks every drain")
        for sm in self.r.all("ServiceMonitor"):
            self.assertLessEqual(sm["spec"]["selector"]["matchLabels"].items(), cl.labels(svc).items())
            self.assertIn(cl.NAMESPACE, sm["spec"]["namespaceSelector"]["matchNames"])
            names = {p["name"] for p in svc["spec"]["ports"]}
            for ep in sm["spec"]["endpoints"]:
                self.assertIn(ep["port"], names)
                self.assertTrue(cl.route_matches("GET", ep["path"]), ep["path"])
                self.assertEqual(ep["tlsConfig"]["serverName"], "%s.%s.svc" % (cl.fullname(), cl.NAMESPACE))

    def secret_names(self):
        """Secrets that exist after install: rendered, issued by cert-manager, or given."""
        names = {d["metadata"]["name"] for d in self.r.all("Secret")}
        names |= {c["spec"]["secretName"] for c in self.r.all("Certificate")}
        full = self.v["full"]
        names |= {n for n in (full["tls"]["existingSecret"], full["tls"]["clientAuth"]["existingSecret"],
                              full["kubequota"]["restTokenSecret"]) if n}
        return names

    def test_references_resolve(self):
        pod = self.r.deployment()["spec"]["template"]["spec"]
        sas = {d["metadata"]["name"] for d in self.r.all("ServiceAccount")}
        self.assertIn(pod["serviceAccountName"], sas)
        proxy = cl.fullname() + "-service-proxy"  # bound to people (values), not to kubequota
        for kind in ("ClusterRoleBinding", "RoleBinding"):
            for b in self.r.all(kind):
                if (kind, b["metadata"]["name"]) == ("RoleBinding", proxy):
                    want = [dict(s, **({"namespace": s.get("namespace", cl.NAMESPACE)} if s["kind"] == "ServiceAccount"
                                       else {"apiGroup": "rbac.authorization.k8s.io"}))
                            for s in self.v["full"]["serviceProxyAccess"]["subjects"]]
                    self.assertEqual(b["subjects"], want)
                    self.assertEqual(b["roleRef"], {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                                    "name": proxy})
                    continue
                for s in b["subjects"]:
                    self.assertEqual(s["kind"], "ServiceAccount")
                    self.assertIn(s["name"], sas)
                    self.assertEqual(s["namespace"], cl.NAMESPACE)
                ref = b["roleRef"]
                if (ref["kind"], ref["name"]) not in BUILTIN_ROLES:
                    role = self.r.get(ref["kind"], ref["name"])
                    self.assertIsNotNone(role, "%s %s -> missing %s %s" % (kind, b["metadata"]["name"],
                                                                          ref["kind"], ref["name"]))
                    if kind == "RoleBinding":
                        self.assertEqual(role["metadata"]["namespace"], b["metadata"]["namespace"])
        cms = {d["metadata"]["name"] for d in self.r.all("ConfigMap")}
        secrets = self.secret_names()
        vols = {}
        for vol in pod["volumes"]:
            vols[vol["name"]] = vol
            if "configMap" in vol:
                self.assertIn(vol["configMap"]["name"], cms)
            if "secret" in vol:
                self.assertIn(vol["secret"]["secretName"], secrets)
        for c in pod["containers"]:
            for m in c.get("volumeMounts", []):
                self.assertIn(m["name"], vols, "%s mounts unknown volume %s" % (c["name"], m["name"]))
        for cert in self.r.all("Certificate"):
            ref = cert["spec"]["issuerRef"]
            if ref.get("kind", "Issuer") == "Issuer":
                self.assertIsNotNone(self.r.get("Issuer", ref["name"]), ref)

    # -- ports, probes, endpoints -----------------------------------------------------

    def test_service_ports_match_container(self):
        svc = self.r.one("Service")
        kq = self.r.container("kubequota")
        ports = {p["name"]: p["containerPort"] for p in kq["ports"]}
        for p in svc["spec"]["ports"]:
            tp = p["targetPort"]
            self.assertIn(tp, ports, "Service port %s targets %s, not a kubequota port" % (p["name"], tp))
        listen = self.r.arg("--listen")
        self.assertIsNotNone(listen)
        self.assertEqual(int(listen.rpartition(":")[2]), ports["https"], "--listen and containerPort differ")
        self.assertEqual(listen.rpartition(":")[0], "0.0.0.0", "the API server reaches kubequota via the Service")
        wl = self.r.arg("--webhook-listen")
        if self.v["webhooks"]:
            self.assertIsNotNone(wl, "the webhooks get their own listener")
            self.assertEqual(int(wl.rpartition(":")[2]), ports["webhook"], "--webhook-listen and containerPort differ")
            self.assertEqual(wl.rpartition(":")[0], "0.0.0.0", "the API server reaches the webhooks via the Service")
        else:
            self.assertIsNone(wl)

    def test_probes(self):
        for c in self.r.deployment()["spec"]["template"]["spec"]["containers"]:
            names = {p["name"] for p in c.get("ports", [])}
            for kind in ("livenessProbe", "readinessProbe"):
                self.assertIn(kind, c, "%s has no %s" % (c["name"], kind))
                p = c[kind]
                h = p.get("httpGet") or p.get("tcpSocket")
                self.assertIsNotNone(h)
                self.assertIn(h["port"], names)
                if c["name"] == "kubequota" and "httpGet" in p:
                    self.assertEqual(p["httpGet"]["scheme"], "HTTPS")
                    self.assertTrue(cl.route_matches("GET", p["httpGet"]["path"]), p["httpGet"]["path"])
        kq = self.r.container("kubequota")
        if self.v["clientAuth"]:
            self.assertIn("tcpSocket", kq["readinessProbe"], "kubelet probes carry no client certificate")
        else:
            self.assertEqual(kq["livenessProbe"]["httpGet"]["path"], "/healthz")
            self.assertEqual(kq["readinessProbe"]["httpGet"]["path"], "/readyz")

    def webhooks(self):
        out = []
        for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
            for cfg in self.r.all(kind):
                out += [(cfg, w) for w in cfg["webhooks"]]
        return out

    def test_webhooks(self):
        hooks = self.webhooks()
        if not self.v["webhooks"]:
            self.assertEqual(hooks, [])
            return
        svc = self.r.one("Service")
        svc_ports = {p["port"] for p in svc["spec"]["ports"]}
        paths = set()
        for cfg, w in hooks:
            name = w["name"]
            self.assertRegex(name, r"^[a-z0-9-]+(\.[a-z0-9-]+){2,}$", "webhook names are fully qualified")
            self.assertEqual(w["admissionReviewVersions"], ["v1"])
            # the nodeName guard counts the pod it admits (ledger.h, kq_ledger_admit) and the
            # identity webhook holds an admitted resize's growth (kq_ledger_check_resize):
            # side effects, skipped for a dry run
            self.assertEqual(w["sideEffects"], "NoneOnDryRun"
                             if name in ("pods-on-node.kubequota.io", "identity.kubequota.io") else "None")
            self.assertIn(w["failurePolicy"], ("Fail", "Ignore"))
            self.assertTrue(1 <= w["timeoutSeconds"] <= 30)
            s = w["clientConfig"]["service"]
            self.assertEqual((s["name"], s["namespace"]), (svc["metadata"]["name"], cl.NAMESPACE))
            self.assertIn(s["port"], svc_ports)
            target = [p["targetPort"] for p in svc["spec"]["ports"] if p["port"] == s["port"]]
            self.assertEqual(target, ["webhook"], "%s: the webhooks call their own port (--webhook-listen)" % name)
            self.assertTrue(cl.route_matches("POST", s["path"]),
                            "%s: path %s is not a POST route of src/serve/server.c" % (name, s["path"]))
            self.assertTrue(s["path"].startswith("/admission/"), s["path"])
            paths.add(s["path"])
            ns_sel = w["namespaceSelector"]
            exprs = {e["key"]: e for e in ns_sel.get("matchExpressions", [])}
            e = exprs["kubernetes.io/metadata.name"]
            if e["operator"] == "NotIn":
                self.assertLessEqual({"kube-system", cl.NAMESPACE}, set(e["values"]), name)
                for extra in self.v["full"]["webhooks"]["excludeNamespaces"]:
                    self.assertIn(extra, e["values"])
            else:
                # only the config guard looks inside the release namespace, at one ConfigMap
                self.assertEqual((e["operator"], e["values"]), ("In", [cl.NAMESPACE]), name)
                self.assertEqual([r["resources"] for r in w["rules"]], [["configmaps"]])
                cm = self.r.one("ConfigMap", cl.fullname() + "-queues")
                self.assertLessEqual(w["objectSelector"]["matchLabels"].items(), cl.labels(cm).items(),
                                     "the config guard's objectSelector misses the queues ConfigMap")
                other = self.r.one("ConfigMap", cl.fullname() + "-scheduler")
                self.assertFalse(w["objectSelector"]["matchLabels"].items() <= cl.labels(other).items())
            self.check_ca_bundle(cfg, w)
        self.assertEqual(paths, {p for m, p in cl.routes() if p.startswith("/admission/")},
                         "every admission endpoint of src/serve/server.c is registered, and only those")
        by_path = {}
        for _, w in hooks:
            for rule in w["rules"]:
                for g in rule["apiGroups"]:
                    for res in rule["resources"]:
                        for op in rule["operations"]:
                            by_path.setdefault(w["clientConfig"]["service"]["path"], set()).add((g, res, op))
        mutate = by_path["/admission/mutate"]
        for g, res in [("", "pods"), ("apps", "deployments"), ("apps", "replicasets"), ("apps", "statefulsets"),
                       ("apps", "daemonsets"), ("batch", "jobs"), ("batch", "cronjobs")]:
            self.assertLessEqual({(g, res, "CREATE"), (g, res, "UPDATE")}, mutate)
        # pods/status is guarded like a pod UPDATE (issue 37 route 7), next to pods/resize
        self.assertLessEqual({("", "pods/status", "UPDATE"), ("", "pods/resize", "UPDATE")}, mutate)
        self.assertEqual(by_path["/admission/mutate-scheduler-opt-in"], {("", "pods", "CREATE")})
        self.assertLessEqual({("", "pods", "CREATE"), ("apps", "deployments", "CREATE")},
                             by_path["/admission/mutate-scheduler"])
        self.assertNotIn(("", "pods", "UPDATE"), by_path["/admission/mutate-scheduler"])
        self.assertEqual(by_path["/admission/validate"], {("", "configmaps", "CREATE"), ("", "configmaps", "UPDATE")} |
                         ({("", "pods", "CREATE")} if self.v["full"]["webhooks"]["identity"]["enabled"] else set()))
        validate = by_path["/admission/validate-elasticquota"]
        for g in ("scheduling.x-k8s.io", "scheduling.sigs.k8s.io"):
            for op in ("CREATE", "UPDATE", "DELETE"):
                self.assertIn((g, "elasticquotas", op), validate)
        wh = self.v["full"]["webhooks"]
        by_name = {w["name"]: w for _, w in hooks}
        # issue 37: unlabelled namespaces are governed (kubequota's filters decide), true opts
        # in whatever they say, false opts out
        self.assertIn({"key": "kubequota.io/enabled", "operator": "NotIn", "values": ["true", "false"]},
                      by_name["scheduler.kubequota.io"]["namespaceSelector"]["matchExpressions"])
        self.assertIn({"key": "kubequota.io/enabled", "operator": "In", "values": ["true"]},
                      by_name["scheduler-opt-in.kubequota.io"]["namespaceSelector"]["matchExpressions"])
        for n in ("scheduler.kubequota.io", "scheduler-opt-in.kubequota.io"):
            self.assertEqual(by_name[n]["failurePolicy"], wh["setSchedulerName"]["failurePolicy"])
        for w in [w for _, w in hooks if w["clientConfig"]["service"]["path"] == "/admission/mutate"
                  or w["name"].startswith("workloads")]:
            self.assertEqual(w["failurePolicy"], wh["identity"]["failurePolicy"], w["name"])
        # the scheduler webhook runs before the identity webhooks (the API server calls a
        # configuration's webhooks in order), so a renamed pod is stamped in the same request
        order = [w["name"] for _, w in hooks]
        self.assertLess(order.index("scheduler.kubequota.io"), order.index("identity.kubequota.io"))
        # matchConditions are GA in 1.30 (beta, on by default, in 1.28-1.29): the chart
        # needs at least 1.28
        self.assertTrue(any(w.get("matchConditions") for _, w in hooks))
        for _, w in hooks:
            pol = w["failurePolicy"]
            if "DELETE" in {op for rule in w["rules"] for op in rule["operations"]}:
                self.assertEqual(pol, "Ignore", "%s: a DELETE must stay possible while kubequota is down" % w["name"])

    def check_ca_bundle(self, cfg, w):
        cc = w["clientConfig"]
        ann = cfg["metadata"].get("annotations") or {}
        if self.v["certManager"]:
            self.assertNotIn("caBundle", cc)
            ns, _, cert = ann["cert-manager.io/inject-ca-from"].partition("/")
            self.assertEqual(ns, cl.NAMESPACE)
            self.assertIsNotNone(self.r.get("Certificate", cert), "inject-ca-from names no Certificate")
        elif self.v["existingSecret"]:
            self.assertEqual(cc.get("caBundle"), self.v["full"]["tls"]["caBundle"] or None)
        else:
            secret = self.r.one("Secret", cl.fullname() + "-tls")
            self.assertEqual(cc["caBundle"], secret["data"]["ca.crt"], "caBundle is not the Secret's CA")

    def test_extender_config(self):
        sc = self.r.scheduler_config()
        self.assertEqual(sc["apiVersion"], "kubescheduler.config.k8s.io/v1")
        self.assertEqual(sc["kind"], "KubeSchedulerConfiguration")
        name = self.v["full"]["schedulerName"]
        self.assertEqual([p["schedulerName"] for p in sc["profiles"]], [name])
        self.assertEqual(self.r.arg("--scheduler-name"), name)
        le = sc["leaderElection"]
        self.assertTrue(le["leaderElect"])
        self.assertEqual(le["resourceNamespace"], cl.NAMESPACE)
        role = self.r.one("Role", cl.fullname() + "-scheduler")
        self.assertEqual(role["rules"][0]["resourceNames"], [le["resourceName"]])
        if self.v["gateOnly"]:
            # no extender: nothing in the serial cycle calls kubequota, and preemption
            # (which would cross quota groups) is off; the gate decides
            self.assertNotIn("extenders", sc)
            (prof,) = sc["profiles"]
            self.assertEqual(prof["plugins"]["postFilter"]["disabled"], [{"name": "DefaultPreemption"}])
            args = [f for f, _ in self.r.kubequota_args()]
            self.assertIn("--admission-gate-only", args)
            self.assertIn("--admission-gate", args)
            return
        self.assertNotIn("plugins", sc["profiles"][0], "with the extender, kube-scheduler preempts through it")
        self.assertNotIn("--admission-gate-only", [f for f, _ in self.r.kubequota_args()])
        (ext,) = sc["extenders"]
        scheme = "https" if self.v["extenderTls"] else "http"
        m = re.match(r"^%s://([^/:]+):(\d+)(/.*)$" % scheme, ext["urlPrefix"])
        self.assertIsNotNone(m, ext["urlPrefix"])
        host, port, prefix = m.group(1), int(m.group(2)), m.group(3)
        self.assertEqual(host, "127.0.0.1", "kubequota is the scheduler's sidecar")
        # the verbs go to kubequota's own scheduler listener (own workers, loopback only),
        # never to the webhook port, which then refuses them
        self.assertEqual(self.r.arg("--scheduler-listen"), "127.0.0.1:%d" % port)
        self.assertRegex(self.r.arg("--scheduler-threads"), r"^[1-9][0-9]*$")
        self.assertNotEqual(self.r.arg("--listen").rpartition(":")[2], str(port))
        kq_ports = {p["containerPort"] for p in self.r.container("kubequota")["ports"]}
        self.assertNotIn(port, kq_ports, "the scheduler port is not exposed beyond the pod")
        for verb in ("filterVerb", "bindVerb", "preemptVerb"):
            self.assertTrue(cl.route_matches("POST", prefix + "/" + ext[verb]),
                            "%s %s/%s is not a POST route of src/serve/server.c" % (verb, prefix, ext[verb]))
        self.assertNotIn("prioritizeVerb", ext)
        self.assertIs(ext["nodeCacheCapable"], True)
        self.assertIs(ext["ignorable"], False)
        self.assertRegex(str(ext["httpTimeout"]), r"^\d+(ms|s|m)$")
        plain = [f for f, _ in self.r.kubequota_args()].count("--scheduler-plain-http")
        if not self.v["extenderTls"]:
            # plain HTTP on the pod's loopback: no handshake per bind (README.md, "The
            # scheduler's port"); kubequota serves plain HTTP on that port alone
            self.assertIs(ext["enableHTTPS"], False)
            self.assertNotIn("tlsConfig", ext)
            self.assertEqual(plain, 1)
            return
        self.assertEqual(plain, 0)
        self.assertIs(ext["enableHTTPS"], True)
        tls = ext["tlsConfig"]
        self.assertNotIn("insecure", tls)
        self.assertEqual(tls["serverName"], "%s.%s.svc" % (cl.fullname(), cl.NAMESPACE))
        sched = self.r.container("kube-scheduler")
        mounts = {m["mountPath"]: m["name"] for m in sched["volumeMounts"]}
        vols = {v["name"]: v for v in self.r.deployment()["spec"]["template"]["spec"]["volumes"]}
        ca_dir, _, ca_file = tls["caFile"].rpartition("/")
        ca_vol = vols[mounts[ca_dir]]
        self.assertEqual([i["path"] for i in ca_vol["secret"]["items"]], [ca_file],
                         "the scheduler gets the CA only, never kubequota's key")
        self.assertEqual(ca_vol["secret"]["secretName"], self.tls_secret(),
                         "the scheduler trusts the CA of kubequota's own certificate")
        if self.v["clientAuth"]:
            ca_arg = self.r.arg("--client-ca")
            self.assertIsNotNone(ca_arg)
            self.assertEqual(ca_arg.rpartition("/")[0], self.r.arg("--tls-cert").rpartition("/")[0])
            for f in ("certFile", "keyFile"):
                d, _, _ = tls[f].rpartition("/")
                self.assertIn(d, mounts)
        else:
            self.assertNotIn("certFile", tls)
            self.assertIsNone(self.r.arg("--client-ca"))
        self.assertIn(tls["serverName"], self.serving_names())

    def tls_secret(self):
        kq = self.r.container("kubequota")
        d = self.r.arg("--tls-cert").rpartition("/")[0]
        name = [m["name"] for m in kq["volumeMounts"] if m["mountPath"] == d][0]
        vols = {v["name"]: v for v in self.r.deployment()["spec"]["template"]["spec"]["volumes"]}
        return vols[name]["secret"]["secretName"]

    def serving_names(self):
        if self.v["certManager"]:
            return set(self.r.one("Certificate", self.tls_secret())["spec"]["dnsNames"])
        if self.v["existingSecret"]:
            # made by certs/gen-certs.sh with KQ_NAMESPACE and the service name (certs/README.md)
            return {"%s.%s.svc" % (cl.fullname(), cl.NAMESPACE)}
        crt = b64(self.r.one("Secret", self.tls_secret())["data"]["tls.crt"])
        return {v for k, v in cert_info(crt).get("subjectAltName", ()) if k == "DNS"}

    def test_tls_material(self):
        text = self.r.text
        if self.v["helmCerts"]:
            s = self.r.one("Secret", self.tls_secret())
            self.assertEqual(s["type"], "kubernetes.io/tls")
            self.assertIn("PRIVATE KEY", b64(s["data"]["tls.key"]))
            # ECDSA P-256 like cert-manager's and gen-certs.sh's, not genCA's RSA-2048 (an RSA
            # signature in every handshake, and kube-scheduler reconnects for most binds)
            for pem, cmd in ((b64(s["data"]["tls.key"]), "pkey"), (b64(s["data"]["ca.crt"]), "x509")):
                out = subprocess.run(["openssl", cmd, "-noout", "-text"], input=pem, capture_output=True,
                                     text=True, check=True).stdout
                self.assertIn("NIST CURVE: P-256", out, "%s: not an ECDSA P-256 key" % cmd)
            ca = cert_info(b64(s["data"]["ca.crt"]))
            leaf = cert_info(b64(s["data"]["tls.crt"]))
            self.assertEqual(leaf["issuer"], ca["subject"], "the serving certificate is signed by the CA")
            dns = {v for k, v in leaf["subjectAltName"] if k == "DNS"}
            svc = "%s.%s.svc" % (cl.fullname(), cl.NAMESPACE)
            self.assertLessEqual({svc, svc + ".cluster.local", cl.fullname()}, dns)
        else:
            self.assertNotIn("PRIVATE KEY", text, "no key material may be rendered in this mode")
            self.assertNotIn("tls.key:", text)

    # -- pod hardening ----------------------------------------------------------------

    def test_security_context_and_resources(self):
        pod = self.r.deployment()["spec"]["template"]["spec"]
        self.assertTrue(pod["securityContext"]["runAsNonRoot"])
        self.assertEqual(pod["securityContext"]["seccompProfile"]["type"], "RuntimeDefault")
        self.assertNotIn("hostNetwork", pod)
        for c in pod["containers"]:
            sc = c["securityContext"]
            self.assertIs(sc["runAsNonRoot"], True, c["name"])
            self.assertIs(sc["readOnlyRootFilesystem"], True, c["name"])
            self.assertIs(sc["allowPrivilegeEscalation"], False, c["name"])
            self.assertEqual(sc["capabilities"]["drop"], ["ALL"], c["name"])
            self.assertNotIn("add", sc["capabilities"])
            self.assertNotIn("privileged", sc)
            req = c["resources"]["requests"]
            self.assertIn("cpu", req)
            self.assertIn("memory", req)
            for m in c.get("volumeMounts", []):
                if m["name"] not in ("tmp", "metering"):
                    self.assertTrue(m.get("readOnly"), "%s mounts %s writable" % (c["name"], m["name"]))

    def test_scheduler_image_version(self):
        img = self.r.container("kube-scheduler")["image"]
        self.assertRegex(img, r"^registry\.k8s\.io/kube-scheduler:v\d+\.\d+\.\d+$")
        if not self.v["full"]["scheduler"]["image"]["tag"]:
            self.assertTrue(img.endswith(":v" + cl.KUBE_VERSION), "default tag follows the cluster version")

    # -- queues.yaml ------------------------------------------------------------------

    def test_queues_mounted_for_reload(self):
        kq = self.r.container("kubequota")
        cfg = self.r.arg("--config")
        d, _, key = cfg.rpartition("/")
        (m,) = [m for m in kq["volumeMounts"] if m["mountPath"] == d]
        self.assertNotIn("subPath", m, "a subPath mount never sees ConfigMap updates")
        vols = {v["name"]: v for v in self.r.deployment()["spec"]["template"]["spec"]["volumes"]}
        cm_name = vols[m["name"]]["configMap"]["name"]
        self.assertIn(key, self.r.one("ConfigMap", cm_name)["data"])
        if self.v["webhooks"] and self.v["full"]["webhooks"]["validate"]["enabled"]:
            self.assertEqual(self.r.arg("--config-map"), "%s/%s" % (cl.NAMESPACE, cm_name))

    @unittest.skipUnless(cl.have_binary(), "bin/kubequota not built")
    def test_queues_pass_check_config(self):
        text = self.r.queues_yaml()
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "queues.yaml")
            with open(p, "w") as f:
                f.write(text)
            r = subprocess.run([cl.binary(), "check-config", "--partition", self.r.arg("--partition"), p],
                               capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, "rendered queues.yaml rejected:\n%s%s" % (r.stdout, r.stderr))
        parts = [p["name"] for p in yaml.safe_load(text)["partitions"]]
        self.assertIn(self.r.arg("--partition"), parts, "--partition names a partition of queues.yaml")

    @unittest.skipUnless(cl.have_binary(), "bin/kubequota not built")
    def test_rendered_flags_exist(self):
        known = cl.serve_flags()
        for flag, _ in self.r.kubequota_args():
            if flag in known:
                continue
            self.assertIn(flag, PENDING_FLAGS, "kubequota serve has no flag %s" % flag)
        stale = sorted(f for f in PENDING_FLAGS if f in known)
        self.assertEqual(stale, [], "kubequota serve now documents these; remove them from PENDING_FLAGS")


# One TestCase class per value set.
for _name in cl.VALUE_SETS:
    _cls = "Render" + "".join(p.capitalize() for p in _name.split("-"))
    globals()[_cls] = type(_cls, (RenderChecks, unittest.TestCase), {"set_name": _name})


class ValuesBehaviour(unittest.TestCase):
    """What the value sets change, and values the chart refuses."""

    def test_auth_review_permissions_follow_rest_auth(self):
        kq = cl.fullname()
        for name, want in (("default", True), ("rest-kubernetes", True), ("rest-default", False)):
            r = cl.render(name)
            rules = r.one("ClusterRole", kq)["rules"]
            got = {res for rule in rules for res in rule["resources"]}
            self.assertEqual({"tokenreviews", "subjectaccessreviews"} <= got, want, name)
            self.assertEqual(r.get("ClusterRole", kq + "-usage-viewer") is not None, want, name)
            self.assertEqual(r.arg("--rest-auth"), values_of(r)["full"]["kubequota"]["restAuth"])
        viewer = cl.render("default").one("ClusterRole", kq + "-usage-viewer")
        self.assertEqual(viewer["rules"], [{"apiGroups": ["kubequota.io"], "resources": ["usage"], "verbs": ["get"]}],
                         "the usage view asks SubjectAccessReview for get usage.kubequota.io")

    def test_two_replicas(self):
        r = cl.render("two-replicas")
        self.assertEqual(r.deployment()["spec"]["replicas"], 2)
        self.assertEqual(r.deployment()["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"], 0)
        self.assertEqual(r.scheduler_config()["leaderElection"]["resourceName"], "kubequota-scheduler-kq")

    def test_custom_queues_text_is_kept(self):
        r = cl.render("custom-queues")
        self.assertIn("# batch partition", r.queues_yaml(), "queuesYaml is stored verbatim")
        self.assertEqual(r.arg("--partition"), "batch")
        self.assertEqual(r.arg("--trusted-users"), "system:serviceaccount:argo:*")
        self.assertEqual(r.scheduler_config()["profiles"][0]["schedulerName"], "quota-batch")

    def test_helm_certs_differ_per_install(self):
        a = cl.helm(*cl.template_args()).stdout
        b = cl.helm(*cl.template_args()).stdout
        ka = re.search(r"tls.key: (\S+)", a).group(1)
        kb = re.search(r"tls.key: (\S+)", b).group(1)
        self.assertNotEqual(ka, kb, "each install generates its own key")

    @unittest.skipUnless(cl.have_binary(), "bin/kubequota not built")
    def test_bad_queues_fail_check_config(self):
        r = cl.render_with("-f", os.path.join(cl.VALUES_DIR, "bad-queues.yaml"))
        self.assertEqual(r.returncode, 0, r.stderr)
        docs = [d for d in yaml.safe_load_all(r.stdout) if d]
        text = [d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"].endswith("-queues")][0]
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "queues.yaml")
            with open(p, "w") as f:
                f.write(text["data"]["queues.yaml"])
            res = subprocess.run([cl.binary(), "check-config", p], capture_output=True, text=True)
        self.assertEqual(res.returncode, 1, "check-config must refuse it: %s" % res.stderr)
        self.assertIn("guaranteed", res.stdout + res.stderr)

    def test_refused_values(self):
        cases = [
            (["--set", "tls.certManager.enabled=true", "--set", "tls.existingSecret=x"], "not both"),
            (["--set", "kubequota.restAuth=basic"], "restAuth"),
            (["--set", "serviceMonitor.enabled=true", "--set", "kubequota.metricsAuth=true",
              "--set", "kubequota.restAuth=none"], "metricsAuth"),
            (["--set", "tls.existingSecret=x", "--set", "tls.clientAuth.enabled=true"], "clientAuth.existingSecret"),
            (["--set", "queues=null"], "queues"),
        ]
        for args, word in cases:
            r = cl.render_with(*args)
            self.assertNotEqual(r.returncode, 0, "helm accepted %s" % args)
            self.assertIn(word, r.stderr, args)


class HighAvailabilityTest(unittest.TestCase):
    """Issue 14: more than one replica means one acting leader, spread replicas and a PDB;
    one replica never gets a PDB (minAvailable 1 of 1 blocks every node drain)."""

    def rendered(self, *args):
        res = cl.render_with(*args)
        self.assertEqual(res.returncode, 0, res.stderr)
        return cl.Rendered("adhoc", list(args), res.stdout)

    def test_default_is_two_replicas_with_leader_election(self):
        r = cl.render("default")
        self.assertEqual(r.deployment()["spec"]["replicas"], 2)
        self.assertIn(("--leader-elect", None), r.kubequota_args())
        self.assertEqual(r.arg("--leader-elect-resource-namespace"), cl.NAMESPACE)
        pod = r.deployment()["spec"]["template"]["spec"]
        self.assertEqual(pod["priorityClassName"], "system-cluster-critical")
        term = pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]["podAffinityTerm"]
        self.assertEqual(term["topologyKey"], "kubernetes.io/hostname")
        sel = r.deployment()["spec"]["selector"]["matchLabels"]
        self.assertEqual(term["labelSelector"]["matchLabels"], sel)
        (spread,) = pod["topologySpreadConstraints"]
        self.assertEqual((spread["topologyKey"], spread["whenUnsatisfiable"]), ("topology.kubernetes.io/zone", "ScheduleAnyway"))
        self.assertEqual(spread["labelSelector"]["matchLabels"], sel)
        pdb = r.one("PodDisruptionBudget")
        self.assertEqual(pdb["spec"]["selector"]["matchLabels"], sel)

    def test_replicas_force_leader_election(self):
        for n in ("2", "3"):
            r = self.rendered("--set", "replicaCount=" + n, "--set", "kubequota.leaderElection.enabled=false")
            self.assertIn(("--leader-elect", None), r.kubequota_args(), n)
            self.assertIsNotNone(r.get("Role", cl.fullname()), "the lease Role comes with it")

    def test_one_replica_no_pdb_no_election(self):
        r = self.rendered("--set", "replicaCount=1")
        self.assertEqual(r.all("PodDisruptionBudget"), [])
        self.assertNotIn(("--leader-elect", None), r.kubequota_args())
        r = self.rendered("--set", "replicaCount=1", "--set", "kubequota.leaderElection.enabled=true")
        self.assertIn(("--leader-elect", None), r.kubequota_args())
        self.assertEqual(r.all("PodDisruptionBudget"), [])

    def test_image_repository_required(self):
        res = cl.helm("template", cl.RELEASE, cl.CHART, "--namespace", cl.NAMESPACE,
                      "--kube-version", cl.KUBE_VERSION, check=False)
        self.assertNotEqual(res.returncode, 0)
        self.assertIn("kubequota.image.repository is required", res.stderr)
        self.assertIn("make image", res.stderr)
        self.assertEqual(cl.render("default").container("kubequota")["image"],
                         cl.IMAGE_REPOSITORY + ":" + yaml.safe_load(open(os.path.join(cl.CHART, "Chart.yaml")))["appVersion"])


class ChartHygieneTest(unittest.TestCase):
    """ServiceMonitor credentials under --metrics-auth, metering off unless configured and
    its checkpoint on a claim every replica shares (issue 14)."""

    def rendered(self, *args):
        res = cl.render_with(*args)
        self.assertEqual(res.returncode, 0, res.stderr)
        return cl.Rendered("adhoc", list(args), res.stdout)

    def endpoint(self, r):
        return r.one("ServiceMonitor")["spec"]["endpoints"][0]

    def test_scraper_credential_and_rbac_with_kubernetes_tokens(self):
        r = cl.render("metrics-scraper")
        self.assertIn(("--metrics-auth", None), r.kubequota_args())
        scraper = cl.fullname() + "-metrics-scraper"
        auth = self.endpoint(r)["authorization"]
        self.assertEqual(auth["type"], "Bearer")
        self.assertEqual(auth["credentials"], {"name": scraper, "key": "token"})
        secret = r.one("Secret", scraper)
        self.assertEqual(secret["type"], "kubernetes.io/service-account-token")
        self.assertEqual(secret["metadata"]["annotations"]["kubernetes.io/service-account.name"], scraper)
        self.assertEqual(secret["metadata"]["namespace"], r.one("ServiceMonitor")["metadata"]["namespace"])
        r.one("ServiceAccount", scraper)
        # kubequota asks SubjectAccessReview for get usage.kubequota.io: the binding grants it
        crb = r.one("ClusterRoleBinding", scraper)
        self.assertEqual(crb["subjects"], [{"kind": "ServiceAccount", "name": scraper, "namespace": cl.NAMESPACE}])
        role = r.one("ClusterRole", crb["roleRef"]["name"])
        self.assertIn({"apiGroups": ["kubequota.io"], "resources": ["usage"], "verbs": ["get"]}, role["rules"])
        # and kubequota may ask (tokenreviews, subjectaccessreviews)
        kq_rules = r.one("ClusterRole", cl.fullname())["rules"]
        self.assertTrue(any("subjectaccessreviews" in x["resources"] for x in kq_rules))

    def test_static_token_credential(self):
        r = cl.render("rest-kubernetes")
        self.assertEqual(self.endpoint(r)["authorization"]["credentials"],
                         {"name": "kubequota-usage-token", "key": "token"})
        self.assertIsNone(r.get("ServiceAccount", cl.fullname() + "-metrics-scraper"))

    def test_open_metrics_need_no_credential(self):
        r = cl.render("two-replicas")
        self.assertNotIn(("--metrics-auth", None), r.kubequota_args())
        self.assertNotIn("authorization", self.endpoint(r))
        self.assertEqual(cl.render("default").all("ServiceMonitor"), [], "only when asked")

    def test_metering_off_by_default(self):
        r = cl.render("default")
        self.assertEqual([a for a in r.kubequota_args() if a[0] == "--metering"], [])
        self.assertEqual(r.all("PersistentVolumeClaim"), [])

    def test_metering_checkpoint_on_a_shared_claim(self):
        r = cl.render("rest-kubernetes")
        metering = [v for f, v in r.kubequota_args() if f == "--metering"]
        state = [m.partition("=")[2] for m in metering if m.startswith("state-dir=")]
        self.assertEqual(len(state), 1)
        self.assertIn("interval=30s", metering)
        self.assertIn("price-cpu=2", metering)
        pod = r.deployment()["spec"]["template"]["spec"]
        (mount,) = [m for m in r.container("kubequota")["volumeMounts"] if state[0].startswith(m["mountPath"] + "/")]
        (vol,) = [v for v in pod["volumes"] if v["name"] == mount["name"]]
        pvc = r.one("PersistentVolumeClaim", vol["persistentVolumeClaim"]["claimName"])
        self.assertNotIn("emptyDir", vol)
        self.assertEqual(pvc["spec"]["accessModes"], ["ReadWriteMany"], "two replicas on two nodes share it")
        self.assertEqual(pvc["metadata"]["annotations"]["helm.sh/resource-policy"], "keep")
        self.assertEqual(r.deployment()["spec"]["strategy"]["type"], "RollingUpdate")

    def test_metering_read_write_once(self):
        r = cl.render("metrics-scraper")
        self.assertEqual(r.deployment()["spec"]["strategy"], {"type": "Recreate"})
        self.assertEqual(r.one("PersistentVolumeClaim")["spec"]["storageClassName"], "standard")
        res = cl.render_with("--set", "metering.enabled=true", "--set", "metering.persistence.accessMode=ReadWriteOnce")
        self.assertNotEqual(res.returncode, 0)
        self.assertIn("ReadWriteMany", res.stderr)
        r = self.rendered("--set", "metering.enabled=true", "--set", "metering.persistence.existingClaim=mine")
        self.assertEqual(r.all("PersistentVolumeClaim"), [])
        vols = r.deployment()["spec"]["template"]["spec"]["volumes"]
        self.assertIn({"name": "metering", "persistentVolumeClaim": {"claimName": "mine"}}, vols)
