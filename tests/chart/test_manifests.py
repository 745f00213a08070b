"""manifests/ (plain `kubectl apply -f manifests/`) is the chart rendered by
scripts/render-manifests.sh, current, keyless, and usable with certs/gen-certs.sh."""

import os
import subprocess
import tempfile
import unittest

import yaml

import chartlib as cl
from test_render import cert_info

MANIFESTS = os.path.join(cl.REPO, "manifests")


def load_all():
    docs = []
    for f in sorted(os.listdir(MANIFESTS)):
        if f.endswith(".yaml"):
            with open(os.path.join(MANIFESTS, f)) as fh:
                docs += [(f, d) for d in yaml.safe_load_all(fh) if d]
    return docs


class Manifests(unittest.TestCase):
    def test_not_stale(self):
        with tempfile.TemporaryDirectory() as d:
            r = subprocess.run(["bash", os.path.join(cl.REPO, "scripts", "render-manifests.sh"), d],
                               capture_output=True, text=True, env=dict(os.environ, KQ_HELM=cl.helm_path()))
            self.assertEqual(r.returncode, 0, r.stderr)
            fresh = sorted(f for f in os.listdir(d) if f.endswith(".yaml") or f == "README.md")
            have = sorted(f for f in os.listdir(MANIFESTS) if f.endswith(".yaml") or f == "README.md")
            self.assertEqual(have, fresh, "manifests/ files differ: run `make manifests`")
            for f in fresh:
                with open(os.path.join(d, f)) as a, open(os.path.join(MANIFESTS, f)) as b:
                    self.assertTrue(a.read() == b.read(), "manifests/%s is stale: run `make manifests`" % f)

    def test_scheduler_versions_documented(self):
        """README.md names the kube-scheduler image 02-kubequota.yaml runs and the API server
        versions it serves (no newer than the API server, at most one minor older), and the
        supported versions start at the chart's kubeVersion floor."""
        import re
        with open(os.path.join(MANIFESTS, "README.md")) as f:
            readme = f.read()
        dep = [d for _, d in load_all() if d["kind"] == "Deployment"][0]
        (img,) = [c["image"] for c in dep["spec"]["template"]["spec"]["containers"] if c["name"] == "kube-scheduler"]
        tag = img.rsplit(":", 1)[1]
        self.assertIn("**%s**" % img, readme)
        major, minor = map(int, tag.lstrip("v").split(".")[:2])
        self.assertIn("**%d.%d** (or %d.%d:" % (major, minor, major, minor + 1), readme)
        rows = re.findall(r"^\| (\d+\.\d+) \| registry\.k8s\.io/kube-scheduler:v(\d+\.\d+)\.\d+ ", readme, re.M)
        self.assertTrue(rows)
        for api, sched in rows:
            self.assertEqual(api, sched, "a scheduler of the API server's own minor")
        self.assertIn("%d.%d" % (major, minor), [a for a, _ in rows])
        with open(os.path.join(cl.CHART, "Chart.yaml")) as f:
            floor = re.search(r">=(\d+\.\d+)", yaml.safe_load(f)["kubeVersion"]).group(1)
        self.assertEqual(rows[0][0], floor, "the oldest supported version is the chart's floor")
        self.assertIn("deployment/%s " % dep["metadata"]["name"], readme)

    def test_contents(self):
        docs = load_all()
        kinds = [d["kind"] for _, d in docs]
        self.assertEqual(kinds[0], "Namespace", "the namespace is applied first")
        self.assertEqual(kinds[1], "CustomResourceDefinition")
        for k in ("Deployment", "Service", "ConfigMap", "ClusterRole", "MutatingWebhookConfiguration",
                  "ValidatingWebhookConfiguration"):
            self.assertIn(k, kinds)
        ns = docs[0][1]["metadata"]["name"]
        for f, d in docs:
            md = d["metadata"]
            if "namespace" in md:
                self.assertIn(md["namespace"], (ns, "kube-system"), "%s: %s %s" % (f, d["kind"], md["name"]))
        for f in os.listdir(MANIFESTS):
            with open(os.path.join(MANIFESTS, f)) as fh:
                text = fh.read()
            self.assertNotIn("PRIVATE KEY", text, "manifests/%s holds key material" % f)
        secrets = [d for _, d in docs if d["kind"] == "Secret"]
        self.assertEqual(secrets, [], "the TLS Secret is made by the installer (certs/README.md)")

    def test_webhooks_wait_for_ca_bundle_and_readme_says_how(self):
        for _, d in load_all():
            if d["kind"].endswith("WebhookConfiguration"):
                for w in d["webhooks"]:
                    self.assertNotIn("caBundle", w["clientConfig"])
        readme = open(os.path.join(cl.REPO, "certs", "README.md")).read()
        self.assertIn("caBundle", readme)
        self.assertIn("kubectl apply -f manifests/", readme)

    def test_readme_install_puts_the_ca_in_every_webhook(self):
        """certs/README.md's commands for manifests/, run word for word (the certificates in a
        temporary folder) with a kubectl that records what it is given: every object of
        manifests/ is applied, and every webhook of both webhook configurations carries the CA
        that gen-certs.sh made (a webhook without it, failurePolicy Fail, refuses all it sees)."""
        import base64
        import re
        readme = open(os.path.join(cl.REPO, "certs", "README.md")).read()
        section = readme[readme.index("## Plain manifests"):]
        script = re.search(r"```sh\n(.*?)```", section, re.S).group(1)
        self.assertIn("/secure/place/kubequota-certs", script)
        with tempfile.TemporaryDirectory() as d:
            script = script.replace("/secure/place/kubequota-certs", os.path.join(d, "certs"))
            log = os.path.join(d, "log")
            os.makedirs(log)
            fake = os.path.join(d, "bin", "kubectl")
            os.makedirs(os.path.dirname(fake))
            with open(fake, "w") as f:  # records each call's arguments, and its input for -f -
                f.write('#!/usr/bin/env bash\nn=$(ls "$KLOG" | wc -l)\nprintf "%s\\n" "$@" > "$KLOG/$n.args"\n'
                        'for a in "$@"; do [ "$a" = - ] && cat > "$KLOG/$n.stdin"; done\nexit 0\n')
            os.chmod(fake, 0o755)
            r = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=cl.REPO, capture_output=True, text=True,
                               env=dict(os.environ, KLOG=log, PATH=os.path.dirname(fake) + ":" + os.environ["PATH"]))
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            with open(os.path.join(d, "certs", "ca.crt"), "rb") as f:
                ca = base64.b64encode(f.read()).decode()
            applied, secret = [], None
            calls = sorted(os.listdir(log), key=lambda x: int(x.split(".")[0]))
            for c in [c for c in calls if c.endswith(".args")]:
                args = open(os.path.join(log, c)).read().split("\n")
                if "apply" in args:
                    for i, a in enumerate(args):
                        if a == "-f":
                            src = args[i + 1]
                            path = os.path.join(log, c.replace(".args", ".stdin")) if src == "-" else \
                                os.path.join(cl.REPO, src)
                            paths = [os.path.join(path, f) for f in sorted(os.listdir(path)) if f.endswith(".yaml")] \
                                if os.path.isdir(path) else [path]
                            for x in paths:
                                applied += [o for o in yaml.safe_load_all(open(x)) if o]
                elif "secret" in args:
                    secret = args
        self.assertIsNotNone(secret, "the README creates the TLS Secret")
        self.assertIn("kubequota-tls", secret)
        want = [(d["kind"], d["metadata"]["name"]) for _, d in load_all()]
        self.assertEqual(sorted(want), sorted((d["kind"], d["metadata"]["name"]) for d in applied),
                         "the README applies every object of manifests/, once")
        hooks = [(d["kind"], w) for d in applied if d["kind"].endswith("WebhookConfiguration") for w in d["webhooks"]]
        kinds = {k for k, _ in hooks}
        self.assertEqual(kinds, {"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"})
        self.assertGreaterEqual(len(hooks), 7)
        for k, w in hooks:
            self.assertEqual(w["clientConfig"].get("caBundle"), ca, "%s %s: no CA" % (k, w["name"]))

    def test_inject_ca_refuses_bad_input(self):
        tool = os.path.join(cl.REPO, "certs", "inject-ca.sh")
        m = os.path.join(MANIFESTS, "02-kubequota.yaml")
        with tempfile.TemporaryDirectory() as d:
            subprocess.run(["bash", os.path.join(cl.REPO, "certs", "gen-certs.sh"), d], check=True,
                           capture_output=True)
            r = subprocess.run([tool, os.path.join(d, "server.crt"), m], capture_output=True, text=True)
            self.assertEqual((r.returncode, r.stdout), (1, ""))
            self.assertIn("not a CA certificate", r.stderr)
            r = subprocess.run([tool, os.path.join(d, "ca.key"), m], capture_output=True, text=True)
            self.assertEqual((r.returncode, r.stdout), (1, ""))
            self.assertIn("not a PEM certificate", r.stderr)
            r = subprocess.run([tool, os.path.join(d, "ca.crt"), os.path.join(MANIFESTS, "00-namespace.yaml")],
                               capture_output=True, text=True)
            self.assertEqual((r.returncode, r.stdout), (1, ""))
            self.assertIn("no admission webhook", r.stderr)
            # twice: the old caBundle is replaced, not doubled
            once = subprocess.run([tool, os.path.join(d, "ca.crt"), m], capture_output=True, text=True, check=True).stdout
            twice = subprocess.run([tool, os.path.join(d, "ca.crt")], input=once, capture_output=True, text=True,
                                   check=True).stdout
            self.assertEqual(once, twice)

    def test_gen_certs_matches_the_manifests(self):
        docs = load_all()
        ns = docs[0][1]["metadata"]["name"]
        (dep,) = [d for _, d in docs if d["kind"] == "Deployment"]
        (cm,) = [d for _, d in docs if d["kind"] == "ConfigMap" and "scheduler-config.yaml" in d["data"]]
        # the extender is plain HTTP on loopback by default (no name to verify); with
        # scheduler.extender.tls it is the Service's name, which the webhooks check below too
        ext = yaml.safe_load(cm["data"]["scheduler-config.yaml"])["extenders"][0]
        self.assertTrue(ext["urlPrefix"].startswith("http://127.0.0.1:"), ext["urlPrefix"])
        svc = next(d for _, d in docs if d["kind"] == "Service")
        server_name = ext.get("tlsConfig", {}).get("serverName", "%s.%s.svc" % (svc["metadata"]["name"], ns))
        vols = [v for v in dep["spec"]["template"]["spec"]["volumes"] if "secret" in v]
        self.assertEqual({v["secret"]["secretName"] for v in vols}, {"kubequota-tls"})
        with tempfile.TemporaryDirectory() as d:
            r = subprocess.run(["bash", os.path.join(cl.REPO, "certs", "gen-certs.sh"), d],
                               capture_output=True, text=True, env=dict(os.environ, KQ_NAMESPACE=ns))
            self.assertEqual(r.returncode, 0, r.stderr)
            sans = {v for k, v in cert_info(open(os.path.join(d, "server.crt")).read())["subjectAltName"]}
        self.assertIn(server_name, sans, "certs/gen-certs.sh with KQ_NAMESPACE=%s must cover the extender" % ns)
        for _, w in [(f, d) for f, d in docs if d["kind"].endswith("WebhookConfiguration")]:
            for hook in w["webhooks"]:
                s = hook["clientConfig"]["service"]
                self.assertIn("%s.%s.svc" % (s["name"], s["namespace"]), sans)
