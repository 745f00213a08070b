"""kubequota's own HTTP surface and command line: bad requests are refused and change
nothing, readiness follows the first pod list, check-config and validate-conf judge files."""

import os
import subprocess

import kqtest
from kqtest import (KQTestCase, PARTITION, actual_usage, binary, queues_config, to_yaml,
                    wait_until)

CONFIG = queues_config({"name": "default"}, {"name": "dev", "limits": [
    {"limit": "one core", "users": ["*"], "maxresources": {"cpu": "1"}}]})

INVALID_YAML = """partitions:
  - name: default
    queues:
      - name: root
        queues:
          - name: dev
            limits:
              - limit: broken
                users: [alice]
                maxresources: {cpu: "two"}
"""


class MalformedRequestTest(KQTestCase):
    CONFIG = CONFIG

    def raw(self, method, path, body=b"", headers=None, send_body=True):
        c = self.kq.http.connection(10)
        try:
            c.putrequest(method, path)
            h = {"Content-Type": "application/json", "Content-Length": str(len(body))}
            h.update(headers or {})
            for k, v in h.items():
                c.putheader(k, v)
            c.endheaders()
            if send_body and body:
                c.send(body)
            r = c.getresponse()
            return r.status, dict(r.getheaders()), r.read()
        finally:
            c.close()

    def test_bad_requests_change_nothing(self):
        self.create("p", user="alice", queue="root.dev", cpu="1")
        self.create("q", user="alice", queue="root.dev", cpu="1")
        pod = self.sim.get_pod("default", "p")
        for verb in ("filter", "bind", "preempt"):
            path = "/scheduler/" + verb
            for body in (b"{not json", b"[1,2]", b"\"Pod\"", b"", b"\xff\xfe"):
                st, _, _ = self.raw("POST", path, body)
                self.assertEqual(st, 400, "%s with %r" % (path, body))
            st, hdrs, _ = self.raw("GET", path)
            self.assertEqual(st, 405, path)
            allow = {k.lower(): v for k, v in hdrs.items()}.get("allow", "")
            self.assertIn("POST", allow)
            st, _, _ = self.raw("PUT", path, b"{}")
            self.assertEqual(st, 405, path)
        for path in ("/nope", "/scheduler", "/scheduler/filter/extra", "/ws/v1/partition",
                     "/ws/v1/partition/%s/nope" % PARTITION):
            self.assertEqual(self.kq.get(path).status, 404, path)
        self.assertEqual(self.raw("POST", "/ws/v1/partition/%s/queues" % PARTITION, b"{}")[0], 405)
        # a huge body is refused from its Content-Length alone
        st, _, _ = self.raw("POST", "/scheduler/filter", b"{" * 1024,
                            {"Content-Length": str(1 << 30)}, send_body=False)
        self.assertEqual(st, 413)
        # wrong types inside a well-formed request: answered, nothing counted
        for args in ({"PodName": 7, "PodNamespace": "default", "PodUID": pod["metadata"]["uid"],
                      "Node": "node-1"},
                     {"PodName": "p", "PodNamespace": "default", "PodUID": "not-the-uid",
                      "Node": "node-1"},
                     {"PodName": "p", "PodNamespace": "default", "PodUID": pod["metadata"]["uid"],
                      "Node": None},
                     {"PodName": "ghost", "PodNamespace": "default", "PodUID": "x",
                      "Node": "node-1"}):
            r = self.kq.post("/scheduler/bind", args)
            self.assertIn(r.status, (200, 400), args)
            if r.status == 200:
                self.assertTrue(kqtest.ci_get(r.json(), "Error"), "bind %s should fail" % args)
        r = self.kq.post("/scheduler/filter", {"Pod": {"metadata": {"name": "x"}},
                                               "NodeNames": ["node-1"]})
        self.assertIn(r.status, (200, 400))
        # nothing changed: no binding, no usage, kubequota still healthy
        st = self.sim.state()
        self.assertEqual(st["counters"]["bindings"], 0)
        self.assertFalse([p for p in st["pods"] if p["spec"].get("nodeName")])
        self.assertEqual(actual_usage(self.kq)["users"], {})
        self.assertTrue(self.kq.alive())
        self.assertEqual(self.kq.get("/healthz").status, 200)
        # and it still works
        self.assert_bound("p")
        self.assert_denied("q", "default", "alice")
        self.wait_usage()


class ReadyzTest(KQTestCase):
    CONFIG = CONFIG
    START = False

    def test_ready_after_first_pod_list(self):
        # hold the first LIST of pods
        self.sim.fault(method="GET", path=r"^/api/v1/pods(\?(?!(.*&)?watch=)|$)", hold=True,
                       count=None)
        self.create("early", user="bob", queue="root.dev", cpu="600m", node="node-1")
        self.kq.start(wait=False)
        wait_until(lambda: self.kq.get("/healthz").status == 200, 20, 0.05, "/healthz")
        wait_until(lambda: self.sim.state()["held"] >= 1, 20, 0.05, "the first pod LIST")
        r = self.kq.get("/readyz")
        self.assertEqual(r.status, 503, r.text)
        self.sim.clear_faults()
        self.kq.wait_ready(20)
        # the pre-existing bound pod was counted by the first list
        self.wait_usage()
        self.create("late", user="bob", queue="root.dev", cpu="600m")
        self.assert_denied("late", "default", "bob")
        m = self.kq.get("/metrics")
        self.assertEqual(m.status, 200)
        self.assertTrue(m.headers.get("Content-Type", "").startswith("text/plain"), m.headers)


class ValidateConfTest(KQTestCase):
    CONFIG = CONFIG

    def post_yaml(self, text):
        r = self.kq.http.request("POST", "/ws/v1/validate-conf", raw=text.encode(),
                                 headers={"Content-Type": "application/x-yaml"})
        self.assertEqual(r.status, 200, r.text)
        return r.json()

    def test_validate_conf(self):
        ok = self.post_yaml(to_yaml(CONFIG) + "\n")
        self.assertEqual(ok, {"allowed": True, "reason": ""})
        bad = self.post_yaml(INVALID_YAML)
        self.assertIs(bad["allowed"], False)
        self.assertIn("two", bad["reason"])
        self.assertFalse(self.post_yaml("partitions: [")["allowed"])
        # validation applies nothing: the running limits are unchanged
        self.create("p", user="zed", queue="root.dev", cpu="1")
        self.assert_bound("p")
        self.create("q", user="zed", queue="root.dev", cpu="1")
        self.assert_denied("q", "default", "zed")
        self.assertEqual(self.kq.get("/ws/v1/validate-conf").status, 405)


class CheckConfigTest(KQTestCase):
    CONFIG = CONFIG
    START = False

    def run_check(self, *args):
        return subprocess.run([binary(), "check-config"] + list(args), capture_output=True,
                              text=True, timeout=20)

    def write(self, name, text):
        path = os.path.join(self.kq.workdir, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def test_check_config_exit_codes(self):
        good = self.write("good.yaml", to_yaml(CONFIG) + "\n")
        r = self.run_check(good)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(len(r.stdout.strip().splitlines()), 1, r.stdout)
        self.assertIn("queue", r.stdout)
        bad = self.write("bad.yaml", INVALID_YAML)
        r = self.run_check(bad)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        lines = [l for l in r.stderr.splitlines() if l.strip()]
        self.assertTrue(lines)
        self.assertTrue(any("bad.yaml" in l and "two" in l for l in lines), r.stderr)
        self.assertEqual(self.run_check(os.path.join(self.kq.workdir, "missing.yaml")).returncode, 2)
        self.assertEqual(self.run_check().returncode, 2)
        example = os.path.join(kqtest.REPO, "examples", "queues.yaml")
        if os.path.exists(example):
            r = self.run_check(example)
            self.assertEqual(r.returncode, 0, r.stderr)

    def test_serve_refuses_invalid_config(self):
        self.kq.write_config(INVALID_YAML)
        self.kq.start(wait=False)
        self.assertNotEqual(self.kq.proc.wait(20), 0)
        self.assertIn("two", self.kq.logs())


class ClientCATest(KQTestCase):
    CONFIG = CONFIG
    START = False

    def test_client_certificate_required(self):
        import ssl
        c = kqtest.certs()
        self.kq.extra_args += ["--client-ca", c["ca"]]
        self.kq.http = kqtest.HttpClient(self.kq.url, ca=c["ca"], cert=c["client"],
                                         key=c["client_key"])
        self.kq.start()
        self.assertEqual(self.kq.get("/healthz").status, 200)
        self.create("p", user="alice", queue="root.dev", cpu="1")
        self.assert_bound("p")
        anonymous = kqtest.HttpClient(self.kq.url, ca=c["ca"])
        with self.assertRaises((ssl.SSLError, ConnectionError, OSError)):
            r = anonymous.get("/ws/v1/partition/%s/usage/users" % PARTITION)
            self.fail("served without a client certificate: %r" % r)
        self.wait_usage()


class ConfigReloadTest(KQTestCase):
    CONFIG = queues_config({"name": "default"}, {"name": "dev", "limits": [
        {"limit": "alice", "users": ["alice"], "maxresources": {"cpu": "2"}}]})
    EXTRA_ARGS = ("--reload-interval", "100")

    def alice_max(self):
        u = self.kq.get_json("/ws/v1/partition/%s/usage/user/alice" % PARTITION)
        for c in u["queues"].get("children") or []:
            if c.get("queuePath", c.get("queuename")) in ("root.dev", "dev"):
                return (c.get("maxResources") or {}).get("vcore")  # YuniKorn's shim name for cpu

    def test_reload_applies_new_limits_and_keeps_old_on_error(self):
        self.create("a1", user="alice", queue="root.dev", cpu="1")
        self.assert_bound("a1")
        self.assertEqual(self.alice_max(), 2000)
        # a broken file is refused: the old limits stay
        self.kq.write_config(INVALID_YAML)
        wait_until(lambda: "config_rejected" in self.kq.logs(), 15, 0.1,
                   "kubequota to notice and reject the broken file")
        self.create("a2", user="alice", queue="root.dev", cpu="500m")
        self.assert_bound("a2")
        self.assertTrue(self.kq.alive())
        # a valid change lowers alice's limit to 1 core: she is over it now, new pods wait
        lower = queues_config({"name": "default"}, {"name": "dev", "limits": [
            {"limit": "alice lowered", "users": ["alice"], "maxresources": {"cpu": "1"}}]})
        self.kq.write_config(lower)
        wait_until(lambda: self.alice_max() == 1000, 15, 0.1, "the lowered limit in the view")
        self.create("a3", user="alice", queue="root.dev", cpu="100m")
        self.assert_denied("a3", "default", "alice", "alice lowered")
        # usage is unchanged by a reload
        self.CONFIG = lower
        self.wait_usage()
