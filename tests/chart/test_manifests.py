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

    def test_gen_certs_matches_the_manifests(self):
        docs = load_all()
        ns = docs[0][1]["metadata"]["name"]
        (dep,) = [d for _, d in docs if d["kind"] == "Deployment"]
        (cm,) = [d for _, d in docs if d["kind"] == "ConfigMap" and "scheduler-config.yaml" in d["data"]]
        server_name = yaml.safe_load(cm["data"]["scheduler-config.yaml"])["extenders"][0]["tlsConfig"]["serverName"]
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
