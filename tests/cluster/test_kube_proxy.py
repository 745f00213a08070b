"""The kubectl plugin and the dashboard through the real API server's service proxy, as
docs/cli.md and charts/kubequota/README.md ("Reaching kubequota through the service proxy")
describe: the chart's serviceProxyAccess Role, the caller's own token, and the plugin's
defaults (namespace kubequota-system, Service kubequota, port 443) with no flags at all.

The API server refuses to proxy to loopback, so Cluster.expose_service() puts kubequota's
Service endpoint in a network namespace of this cluster's own (needs root; skipped without).
Follows kubectl's own plugin mechanism (k8s.io/kubectl pkg/cmd/plugin: `kubectl X` runs
`kubectl-X` from PATH) and the API server's service proxy
(k8s.io/kubernetes pkg/registry/core/service/proxy.go).
"""

import json
import os
import shutil
import subprocess
import tempfile
import unittest

from kubetest import KubeTestCase, queues_config, wait_until

PROXY = "/api/v1/namespaces/kubequota-system/services/https:kubequota:443/proxy"


class ServiceProxy(KubeTestCase):
    CHART_VALUES = {"serviceProxyAccess": {"enabled": True},
                    "kubequota": {"admissionGate": {"enabled": False}}}
    CONFIG = queues_config({"name": "default"}, {"name": "dev", "limits": [
        {"limit": "alice in dev", "users": ["alice"], "maxresources": {"cpu": "2"}}]})

    @classmethod
    def setUpClass(cls):
        if os.geteuid() != 0 or not shutil.which("ip"):
            raise unittest.SkipTest("needs root and iproute2 for a network namespace")
        super().setUpClass()
        cls.c.expose_service()
        cls.plugdir = tempfile.mkdtemp(prefix="kq-plugin-")
        os.symlink(__import__("cluster").kq_binary(), os.path.join(cls.plugdir, "kubectl-kubequota"))

    @classmethod
    def tearDownClass(cls):
        try:
            super().tearDownClass()
        finally:
            cls.c._unexpose()
            shutil.rmtree(getattr(cls, "plugdir", ""), ignore_errors=True)

    def plugin(self, user, *args):
        """`kubectl kubequota ARGS` with the built kubectl, as `user`, no other flags."""
        env = dict(os.environ, PATH=self.plugdir + ":" + os.environ.get("PATH", ""),
                   KUBECONFIG=self.c.kubeconfig_for(user))
        return subprocess.run([os.path.join(self.c.bin, "kubectl")] + list(args), env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)

    def test_plugin_with_no_flags_reaches_kubequota(self):
        ns = self.ns()
        self.pod(ns, "a1", user="alice", queue="root.dev", cpu="1500m")
        self.wait_bound(ns, "a1")

        def usage():
            r = self.plugin("alice", "kubequota", "usage", "--user", "alice", "-o", "json")
            self.assertEqual(r.returncode, 0, r.stderr)
            return json.loads(r.stdout)
        # alice's pods of earlier classes may still be on their way out with their namespaces
        # (deleted in tearDown, not waited for): her usage is this pod's once they are gone
        doc = wait_until(lambda: (lambda d: d if d["queues"]["resourceUsage"].get("vcore") == 1500 else None)(
            usage()), 90, 0.5, "alice's usage to be her one pod's 1500m")
        self.assertEqual(doc["userName"], "alice")
        # why: a pod over alice's limit, explained through the proxy
        self.pod(ns, "a2", user="alice", queue="root.dev", cpu="1")
        self.wait_unschedulable(ns, "a2")
        r = self.plugin("alice", "kubequota", "why", "a2", "-n", ns)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("alice in dev", r.stdout)

    def test_dashboard_through_the_proxy(self):
        api = self.c.api("bob")
        page = api.request("GET", PROXY + "/ui/", ok=(200,))
        self.assertIn("<html", page if isinstance(page, str) else json.dumps(page))

    def test_proxy_needs_the_role(self):
        # the chart's Role grants services/proxy on kubequota's Service only
        st, body = self.c.api("alice").status("GET", "/api/v1/namespaces/kubequota-system/services/https:other:443/proxy/")
        self.assertEqual(st, 403, body)
