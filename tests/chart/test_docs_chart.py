"""What a newcomer reads while installing (issue 28) says what the chart renders: the chart
README's extender URL, Service ports and value defaults, NOTES.txt's plugin and dashboard
commands (against the rendered Service and the plugin's own flags), how NOTES.txt says to
change the queues, the empty default queues, reloadInterval as a duration, and the defaults
certs/README.md states for gen-certs.sh."""

import os
import re
import subprocess
import tempfile
import unittest

import yaml

import chartlib as cl

README = os.path.join(cl.CHART, "README.md")


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def notes(*extra):
    """NOTES.txt as `helm install --dry-run=client` prints it."""
    r = cl.helm("install", cl.RELEASE, cl.CHART, "--namespace", cl.NAMESPACE, "--dry-run=client",
                "--set", "kubequota.image.repository=" + cl.IMAGE_REPOSITORY, *extra)
    return r.stdout[r.stdout.index("NOTES:"):]


def https_port(r):
    (svc,) = r.all("Service")
    (p,) = [p for p in svc["spec"]["ports"] if p["name"] == "https"]
    return svc, p


class ChartReadme(unittest.TestCase):
    def test_extender_url_is_the_rendered_one(self):
        url = cl.render("default").scheduler_config()["extenders"][0]["urlPrefix"]
        found = re.findall(r"https?://127\.0\.0\.1:\d+/scheduler", read(README))
        self.assertTrue(found, "the chart README names the extender's URL")
        self.assertEqual(set(found), {url}, "charts/kubequota/README.md's extender URL drifted")

    def test_service_ports_are_the_rendered_ones(self):
        r = cl.render("default")
        (svc,) = r.all("Service")
        ports = {p["name"]: p for p in svc["spec"]["ports"]}
        c = {p["name"]: p["containerPort"] for p in r.container("kubequota")["ports"]}
        want = "(%d → %d, %d → %d)" % (ports["https"]["port"], c[ports["https"]["targetPort"]],
                                       ports["webhook"]["port"], c[ports["webhook"]["targetPort"]])
        self.assertIn("| Service `…` %s |" % want, read(README))

    def test_value_defaults_in_the_table(self):
        """Rows `| `a.b` | default |` whose default is a number, true/false or one `token`
        name the default values.yaml has."""
        values = yaml.safe_load(read(os.path.join(cl.CHART, "values.yaml")))
        checked = 0
        for key, default in re.findall(r"^\| `([A-Za-z.]+)` \| ([^|]+?) \|", read(README), re.M):
            v = values
            for part in key.split("."):
                v = v.get(part) if isinstance(v, dict) else None
            m = re.fullmatch(r"`([^`]*)`|(\d+)|(true|false)", default.strip())
            if v is None or m is None or isinstance(v, (dict, list)):
                continue
            shown = m.group(1) if m.group(1) is not None else m.group(2) or m.group(3)
            if shown == '""':
                shown = ""
            want = str(v).lower() if isinstance(v, bool) else str(v)
            self.assertEqual(shown, want, "charts/kubequota/README.md: %s's default" % key)
            checked += 1
        self.assertGreater(checked, 10)


class Notes(unittest.TestCase):
    @unittest.skipUnless(cl.have_binary(), "bin/kubequota not built")
    def test_plugin_and_dashboard_reach_the_rendered_service(self):
        flags = set(re.findall(r"--[a-z-]+", subprocess.run([cl.binary(), "kubectl", "--help"], capture_output=True,
                                                            text=True).stdout))
        for name, extra in (("default", ()), ("custom-queues", cl.VALUE_SETS["custom-queues"]),
                            ("service-proxy", cl.VALUE_SETS["service-proxy"])):
            text = notes(*extra)
            svc, port = https_port(cl.render(name))
            ns, sname = svc["metadata"]["namespace"], svc["metadata"]["name"]
            cmds = re.findall(r"kubectl kubequota (--.*)", text)
            self.assertGreaterEqual(len(cmds), 2, name)
            for c in cmds:
                used = re.findall(r"--[a-z-]+", c)
                self.assertFalse(set(used) - flags, "%s: NOTES uses flags the plugin lacks" % name)
                self.assertIn("--kubequota-namespace %s --kubequota-service %s --kubequota-port %d" %
                              (ns, sname, port["port"]), c, name)
            self.assertIn("/api/v1/namespaces/%s/services/https:%s:%d/proxy/ui/" % (ns, sname, port["port"]), text)
            self.assertIn(("GET", "/ui/"), cl.routes())
            self.assertIn("serviceProxyAccess", text)

    def test_queues_are_changed_with_helm_not_kubectl_edit(self):
        text = notes()
        self.assertIn("helm upgrade %s" % cl.RELEASE, text)
        self.assertIn("--set-file queuesYaml=", text)
        for line in text.splitlines():
            if re.search(r"kubectl .*edit configmap", line):
                self.assertIn("Do not", line, "NOTES.txt tells to kubectl edit the Helm-owned ConfigMap")
        cm = cl.render("default").one("ConfigMap", cl.fullname() + "-queues")
        self.assertIn("helm upgrade", cm["metadata"]["annotations"]["kubequota.io/owned-by"])
        self.assertIn("nothing\n   is enforced yet", text)
        self.assertNotIn("nothing\n   is enforced yet", notes(*cl.VALUE_SETS["custom-queues"]))

    def test_integer_reload_interval_is_flagged(self):
        self.assertEqual(cl.render("default").arg("--reload-interval"), "2s")
        self.assertNotIn("reloadInterval", notes())
        text = notes("--set", "kubequota.reloadInterval=2000")
        self.assertIn("kubequota.reloadInterval 2000 is read as milliseconds", text)
        r = cl.render_with("--set", "kubequota.reloadInterval=2 seconds")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("reloadInterval", r.stderr)

    def test_priority_class_fallback_is_told(self):
        self.assertIn("insufficient quota to match these scopes", notes())
        self.assertNotIn("insufficient quota", notes("--set", "priorityClassName="))


class DefaultQueues(unittest.TestCase):
    def test_default_enforces_nothing(self):
        q = yaml.safe_load(cl.render("default").queues_yaml())
        text = yaml.safe_dump(q)
        for word in ("limits", "resources", "maxapplications", "alice", "ml-team"):
            self.assertNotIn(word, text, "the default queues.yaml enforces something: %s" % word)
        (part,) = q["partitions"]
        (root,) = part["queues"]
        self.assertEqual([x["name"] for x in root["queues"]], ["default"])

    @unittest.skipUnless(cl.have_binary(), "bin/kubequota not built")
    def test_demo_values_render_and_pass_check_config(self):
        demo = os.path.join(cl.REPO, "examples", "values-demo.yaml")
        r = cl.render_with("-f", demo)
        self.assertEqual(r.returncode, 0, r.stderr)
        docs = [d for d in yaml.safe_load_all(r.stdout) if d]
        (cm,) = [d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"].endswith("-queues")]
        self.assertIn("alice", cm["data"]["queues.yaml"])
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "queues.yaml")
            with open(p, "w") as f:
                f.write(cm["data"]["queues.yaml"])
            c = subprocess.run([cl.binary(), "check-config", p], capture_output=True, text=True)
        self.assertEqual(c.returncode, 0, c.stdout + c.stderr)


class CertsReadme(unittest.TestCase):
    def test_gen_certs_defaults(self):
        readme = read(os.path.join(cl.REPO, "certs", "README.md"))
        script = read(os.path.join(cl.REPO, "certs", "gen-certs.sh"))
        for var in ("KQ_NAMESPACE", "KQ_CERT_DAYS"):
            (default,) = re.findall(r"\$\{%s:-([^}]+)\}" % var, script)
            self.assertIn("%s (default %s)" % (var, default), readme)
