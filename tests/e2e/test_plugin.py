"""The kubectl plugin (issue 19): `kubectl kubequota usage | why | what-if`, run as the
kubequota binary under the name kubectl-kubequota (and as `kubequota kubectl`), against the
simulator's service proxy (/api/v1/namespaces/{ns}/services/https:{svc}:{port}/proxy/...,
which authenticates the caller's token and drops the Authorization header before forwarding,
as kube-apiserver does: kubernetes staging/src/k8s.io/apiserver/pkg/endpoints/filters/
authentication.go). Expected numbers come from the pods' quantities and the limits, computed
here; verdicts are compared with kubequota's own explain answers."""

import json
import os
import subprocess

from kqtest import (REPO, KQTestCase, PARTITION, ANN_USER, LABEL_APP, LABEL_QUEUE, binary, certs, pod_manifest,
                    queues_config, to_yaml, wait_until, write_kubeconfig)

CONFIG = queues_config(
    {"name": "default", "submitacl": "*"},
    {"name": "team-a", "submitacl": "*",
     "limits": [
         {"limit": "alice", "users": ["alice"], "maxresources": {"cpu": "3", "memory": "4Gi"},
          "maxapplications": 3},
         {"limit": "devs", "groups": ["devs"], "maxresources": {"cpu": "6"}}]},
    {"name": "team-b", "submitacl": "*", "resources": {"max": {"vcore": "8"}}},
)
NS, SVC = "kubequota-system", "kubequota"  # the README's install (namespace) and the chart's Service name


def job_yaml(name, parallelism, cpu, user="alice", groups=("devs",), queue="root.team-a"):
    """A batch/v1 Job as a person writes it (YAML, numbers unquoted where YAML allows)."""
    return """apiVersion: batch/v1
kind: Job
metadata:
  name: %s
  namespace: default
spec:
  parallelism: %d
  template:
    metadata:
      labels:
        %s: %s
      annotations:
        %s: '%s'
    spec:
      schedulerName: kubequota-scheduler
      restartPolicy: Never
      containers:
        - name: main
          image: busybox:1.36
          resources:
            requests:
              cpu: %s
              memory: 256Mi
""" % (name, parallelism, LABEL_QUEUE, queue, ANN_USER, json.dumps({"user": user, "groups": list(groups)}), cpu)


def plugin_setup(t):
    """The API server's view of kubequota's Service, a user token it authenticates, a
    kubeconfig with it, and the plugin as `make install` lays it down."""
    t.sim.sim.proxy_services = {"%s/%s:443" % (NS, SVC): "127.0.0.1:%d" % t.kq.port}
    t.sim.sim.review_tokens = {t.kq.rest_token: {"username": "ops"}}
    t.kubeconfig = write_kubeconfig(os.path.join(t.kq.workdir, "user-kubeconfig"), t.sim.url,
                                    certs()["ca"], t.kq.rest_token)
    t.bindir = os.path.join(t.kq.workdir, "bin")
    os.makedirs(t.bindir)
    t.plugin = os.path.join(t.bindir, "kubectl-kubequota")
    os.symlink(binary(), t.plugin)


class PluginTest(KQTestCase):
    CONFIG = CONFIG

    def setUp(self):
        super().setUp()
        plugin_setup(self)
        self.create("a1", user="alice", groups=["devs"], queue="root.team-a", cpu="1500m", memory="1Gi", app="j1")
        self.assert_bound("a1")
        self.create("b1", user="bob", queue="root.team-b", cpu="2", memory="512Mi")
        self.assert_bound("b1")
        self.create("a2", user="alice", groups=["devs"], queue="root.team-a", cpu="2", memory="1Gi", app="j1")
        self.assert_denied("a2")
        self.wait_usage()

    def run_plugin(self, *args, argv0=None, stdin=None, env=None, status=0):
        e = dict(os.environ, KUBECONFIG=self.kubeconfig)
        e.update(env or {})
        cmd = [argv0 or self.plugin] + list(args)
        r = subprocess.run(cmd, capture_output=True, text=True, input=stdin, env=e, timeout=30)
        self.assertEqual(r.returncode, status, "%s -> %d\nstdout:\n%s\nstderr:\n%s"
                         % (" ".join(cmd), r.returncode, r.stdout, r.stderr))
        return r

    def rows(self, out):
        return [line.split() for line in out.splitlines()[1:] if line.strip()]

    def test_usage_tables_and_json_through_the_proxy(self):
        before = self.sim.state()["counters"].get("proxied", 0)
        r = self.run_plugin("usage")
        self.assertEqual(r.stdout.splitlines()[0].split(), ["USER", "QUEUE", "CPU", "MEMORY", "PODS", "APPS"])
        rows = self.rows(r.stdout)
        # alice: 1500m of 3 cpu and 1Gi of 4Gi in root.team-a, one of three applications
        self.assertIn(["root.team-a", "1.5/3", "1Gi/4Gi", "1", "1/3"], [x[-5:] for x in rows])
        self.assertIn(["bob", "root", "2", "512Mi", "1", "1"], rows)
        self.assertGreater(self.sim.state()["counters"]["proxied"], before)  # it went through the proxy
        # -o json is the usage view's own answer
        j = json.loads(self.run_plugin("usage", "-o", "json").stdout)
        self.assertEqual(j, self.kq.users())
        j = json.loads(self.run_plugin("usage", "--user", "alice", "-o", "json").stdout)
        self.assertEqual(j, self.kq.get_json("/ws/v1/partition/%s/usage/user/alice" % PARTITION))
        r = self.run_plugin("usage", "--group", "devs")
        self.assertEqual(r.stdout.splitlines()[0].split()[0], "GROUP")
        self.assertIn(["root.team-a", "1.5/6", "1Gi", "1", "1"], [x[-5:] for x in self.rows(r.stdout)])
        r = self.run_plugin("usage", "--queue", "root.team-b")
        self.assertIn(["root.team-b", "2/8", "512Mi", "1", "1"], self.rows(r.stdout))
        # an unknown user or queue: kubequota's own words, exit 1; no hint that the Service is
        # missing (it answered), no prefix said twice
        r = self.run_plugin("usage", "--user", "nobody-here", status=1)
        self.assertEqual(r.stderr, 'kubectl kubequota: user "nobody-here" not found (no usage tracked, not named '
                                   'in a limit)\n')
        r = self.run_plugin("usage", "--queue", "root.nope", status=1)
        self.assertEqual(r.stderr, 'kubectl kubequota: queue "root.nope" is neither configured nor in use\n')

    def test_why_matches_explain(self):
        want = self.kq.get_json("/ws/v1/partition/%s/explain/default/a2" % PARTITION)
        self.assertFalse(want["fits"])
        r = self.run_plugin("why", "a2", "-n", "default")
        self.assertIn("pod default/a2 (user alice, queue root.team-a): waits for quota", r.stdout)
        # the blocker's message names its scope itself: printed once, not after "user alice: "
        msg = want["blockers"][0]["message"]
        self.assertTrue(msg.startswith("user alice in queue root.team-a: "), msg)
        self.assertIn("\n  " + msg + "\n", r.stdout)
        self.assertNotIn("user alice: user alice", r.stdout)
        self.assertNotIn("place in line", r.stdout)  # no admission gate here
        # the kubeconfig's namespace (default) when -n is not given
        self.assertEqual(json.loads(self.run_plugin("why", "a2", "-o", "json").stdout), want)
        r = self.run_plugin("why", "b1")
        self.assertIn("fits its quota now", r.stdout)
        # a pod that is not there is named as such: not an HTTP error, not a hint at the Service
        r = self.run_plugin("why", "no-such-pod", status=1)
        self.assertEqual(r.stderr, 'kubectl kubequota: pod "no-such-pod" not found in namespace "default"\n')
        r = self.run_plugin("why", "a2", "-n", "elsewhere", status=1)
        self.assertEqual(r.stderr, 'kubectl kubequota: pod "a2" not found in namespace "elsewhere"\n')

    def test_what_if_job_yaml_json_and_list(self):
        path = os.path.join(self.kq.workdir, "job.yaml")
        # alice has 3 - 1.5 = 1.5 cpu left in root.team-a: of three 1-cpu pods one fits
        with open(path, "w") as f:
            f.write(job_yaml("train", 3, "1"))
        # not all would be admitted now: exit 3 (they would wait), with a table or JSON alike
        r = self.run_plugin("what-if", "-f", path, status=3)
        self.assertIn("1 of 3 pods would fit now", r.stdout)
        self.assertIn('limit "alice" exceeded', r.stdout)
        self.assertNotIn("user alice: user alice", r.stdout)
        j = json.loads(self.run_plugin("what-if", "-f", path, "-o", "json", status=3).stdout)
        self.assertEqual((j["fitCount"], j["podCount"]), (1, 3))
        # the same as kubequota's explain of the same pods posted directly
        pods = j["pods"]
        self.assertEqual(len(pods), 3)
        # 500m pods: all three fit (1.5 cpu exactly)
        with open(path, "w") as f:
            f.write(job_yaml("small", 3, "500m"))
        self.assertIn("3 of 3 pods would fit now", self.run_plugin("what-if", "-f", path).stdout)
        # one Pod as JSON, from stdin
        pod = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": "big", "namespace": "default",
                            "annotations": {ANN_USER: json.dumps({"user": "alice", "groups": ["devs"]})},
                            "labels": {LABEL_QUEUE: "root.team-a"}},
               "spec": {"schedulerName": "kubequota-scheduler",
                        "containers": [{"name": "m", "image": "x", "resources": {"requests": {"cpu": "4"}}}]}}
        # can never fit: exit 4, so a script can tell "wait" from "change the request"
        r = self.run_plugin("what-if", "-f", "-", "-o", "json", stdin=json.dumps(pod, indent="\t"), status=4)
        j = json.loads(r.stdout)
        self.assertFalse(j["fits"])
        self.assertTrue(j["neverFits"])  # 4 cpu alone is over alice's 3
        r = self.run_plugin("what-if", "-f", "-", stdin=json.dumps(pod), status=4)
        self.assertIn("0 of 1 pod would fit now; the rest can never fit as they are", r.stdout)
        # a List of two pods of one application, in YAML with an empty second document
        labels = {LABEL_QUEUE: "root.team-a", LABEL_APP: "j2"}
        lst = {"apiVersion": "v1", "kind": "List",
               "items": [dict(pod, metadata=dict(pod["metadata"], name=n, labels=labels)) for n in ("b1", "b2")]}
        for p in lst["items"]:
            p["spec"] = {"schedulerName": "kubequota-scheduler",
                         "containers": [{"name": "m", "image": "x", "resources": {"requests": {"cpu": "700m"}}}]}
        with open(path, "w") as f:
            f.write(to_yaml(lst) + "\n---\n")
        # 1.5 cpu left: 700m + 700m fit
        self.assertIn("2 of 2 pods would fit now", self.run_plugin("what-if", "-f", path).stdout)
        # nothing was written to the API server by what-if (explain changes nothing)
        self.assertEqual([w for w in self.sim.state()["counters"]["write_log"] if "/events" not in w
                          and "binding" not in w], [])

    def test_bad_input_and_flags(self):
        path = os.path.join(self.kq.workdir, "bad.yaml")
        with open(path, "w") as f:
            f.write("kind: Pod\nspec: [unclosed\n")
        r = self.run_plugin("what-if", "-f", path, status=2)
        self.assertIn("line", r.stderr)
        with open(path, "w") as f:
            f.write("kind: ConfigMap\ndata: {}\n")
        r = self.run_plugin("what-if", "-f", path, status=2)
        self.assertIn("pod template", r.stderr)
        r = self.run_plugin("usage", "--user", "a", "--group", "b", status=2)
        self.assertIn("at most one", r.stderr)
        self.run_plugin("frobnicate", status=2)
        self.run_plugin("why", status=2)
        # a Service that is not there: the API server's 404, and a hint at the flags
        r = self.run_plugin("usage", "--kubequota-service", "nope", status=1)
        self.assertIn("404", r.stderr)
        self.assertIn("--kubequota-service", r.stderr)
        # a token the API server does not know: 401
        bad = write_kubeconfig(os.path.join(self.kq.workdir, "bad-kubeconfig"), self.sim.url, certs()["ca"], "nope")
        r = self.run_plugin("usage", "--kubeconfig", bad, status=1)
        self.assertIn("401", r.stderr)
        # the hint names the RBAC verb the API server checks for the method: get for GET,
        # create for POST (kubernetes staging/src/k8s.io/apiserver/pkg/endpoints/request/
        # requestinfo.go, NewRequestInfo)
        self.assertIn("`get services/proxy`", r.stderr)
        path = os.path.join(self.kq.workdir, "job.yaml")
        with open(path, "w") as f:
            f.write(job_yaml("hint", 1, "100m"))
        r = self.run_plugin("what-if", "-f", path, "--kubeconfig", bad, status=1)
        self.assertIn("401", r.stderr)
        self.assertIn("POST", r.stderr)
        self.assertIn("`create services/proxy`", r.stderr)

    def test_make_install_lays_down_the_plugin_name(self):
        r = subprocess.run(["make", "-n", "-s", "install", "DESTDIR=/dest", "PREFIX=/usr/local"], cwd=REPO,
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        self.assertIn("ln -sf kubequota /dest/usr/local/bin/kubectl-kubequota", lines)
        self.assertTrue(any(x.startswith("install -m 0755 ") and x.endswith(" /dest/usr/local/bin/kubequota")
                            for x in lines), lines)

    def test_invocation_names_and_proxy_strips_authorization(self):
        # `kubequota kubectl ...` is the same program
        r = self.run_plugin("kubectl", "usage", "--user", "bob", argv0=binary())
        self.assertIn("root.team-b", r.stdout)
        self.assertIn("kubectl kubequota", self.run_plugin("--help").stdout)
        # the proxy forwards without Authorization (as kube-apiserver does): a caller that
        # only sends Authorization is authenticated by the API server, and kubequota sees no
        # credentials
        path = "/api/v1/namespaces/%s/services/https:%s:443/proxy/ws/v1/partition/%s/usage/users" % (
            NS, SVC, PARTITION)
        r = self.sim.http.request("GET", path, headers={"Authorization": "Bearer " + self.kq.rest_token})
        self.assertEqual(r.status, 401, r.text)
        self.assertIn("authentication required", r.text)  # kubequota's message, not the API server's
        r = self.sim.http.request("GET", path, headers={"Authorization": "Bearer " + self.kq.rest_token,
                                                        "X-Kubequota-Authorization": "Bearer " + self.kq.rest_token})
        self.assertEqual(r.status, 200, r.text)
        self.assertEqual(r.json(), self.kq.users())
        # the path form names the port; an unknown one is the API server's 404
        r = self.sim.http.request("GET", path.replace(":443/", ":8443/"),
                                  headers={"Authorization": "Bearer " + self.kq.rest_token})
        self.assertEqual(r.status, 404)


GATE = "kubequota.io/admission"
WAITING = "/ws/v1/partition/%s/gating/waiting" % PARTITION


class PluginWaitingTest(KQTestCase):
    """`waiting` and `why` behind the admission gate (issue 28): the pods in the order they
    will be released, each with its place in its queue's line, as the gate's own view
    (gating/waiting) ranks them; a pod that can never fit is listed apart, without a place."""
    CONFIG = queues_config({"name": "default", "submitacl": "*"},
                           {"name": "dev", "submitacl": "*", "resources": {"max": {"vcore": "2"}}},
                           {"name": "other", "submitacl": "*"})
    EXTRA_ARGS = ("--admission-gate",)

    def setUp(self):
        super().setUp()
        self.sim.sim.proxy_services = {"%s/%s:443" % (NS, SVC): "127.0.0.1:%d" % self.kq.port}
        self.sim.sim.review_tokens = {self.kq.rest_token: {"username": "ops"}}
        self.kubeconfig = write_kubeconfig(os.path.join(self.kq.workdir, "user-kubeconfig"), self.sim.url,
                                           certs()["ca"], self.kq.rest_token)
        # 2 cpu in root.dev: two of the five 1-cpu pods are released, three wait in line;
        # a 3-cpu pod can never fit
        for name, user in (("a1", "alice"), ("a2", "alice"), ("a3", "alice"), ("b1", "bob"), ("b2", "bob")):
            self.sim.create_pod(pod_manifest(name, user=user, cpu="1", memory="64Mi", queue="root.dev",
                                             gates=(GATE,)))
        self.sim.create_pod(pod_manifest("huge", user="carol", cpu="3", memory="64Mi", queue="root.dev",
                                         gates=(GATE,)))

        def settled():
            pods = [p for q in self.kq.get_json(WAITING) for p in q["pods"]]
            return len(pods) == 4 and sum(1 for p in pods if p["neverFits"]) == 1 and pods
        wait_until(settled, timeout=20, msg="three pods in line and one set aside")
        self.view = [q for q in self.kq.get_json(WAITING) if q["queue"] == "root.dev"][0]
        self.line = [p for p in self.view["pods"] if p["position"] is not None]
        self.assertEqual([p["position"] for p in self.line], [1, 2, 3])

    def run_plugin(self, *args, status=0):
        r = subprocess.run([binary(), "kubectl"] + list(args), capture_output=True, text=True, timeout=30,
                           env=dict(os.environ, KUBECONFIG=self.kubeconfig))
        self.assertEqual(r.returncode, status, "%s -> %d\nstdout:\n%s\nstderr:\n%s"
                         % (" ".join(args), r.returncode, r.stdout, r.stderr))
        return r

    def test_waiting_lists_the_line_in_release_order(self):
        for args in ((), ("--queue", "root.dev"), ("--queue", "root")):
            r = self.run_plugin("waiting", *args)
            lines = r.stdout.splitlines()
            self.assertEqual(lines[0].split(), ["QUEUE", "POSITION", "POD", "USER", "WAITING", "REASON"], r.stdout)
            rows = [x.split() for x in lines[1:]]
            # the gate's order, each with its place out of three
            want = [["root.dev", "%d/3" % p["position"], "default/" + p["name"], p["user"]] for p in self.line]
            self.assertEqual([x[:4] for x in rows[:3]], want, r.stdout)
            for line, p in zip(lines[1:4], self.line):
                self.assertTrue(line.endswith(p["reason"]), (line, p["reason"]))
            # the set-aside pod last, without a place, saying it never fits
            self.assertEqual(rows[3][:4], ["root.dev", "-", "default/huge", "carol"], r.stdout)
            self.assertIn("never fits", lines[4])
            self.assertEqual(len(rows), 4, r.stdout)
        # another queue, or one that merely shares a prefix: nothing waits there
        r = self.run_plugin("waiting", "--queue", "root.other")
        self.assertEqual(r.stdout, "no pod waits behind the admission gate in queue root.other\n")
        r = self.run_plugin("waiting", "--queue", "root.de")
        self.assertEqual(r.stdout, "no pod waits behind the admission gate in queue root.de\n")
        # -o json: the gate's own view (ages aside)
        j = json.loads(self.run_plugin("waiting", "-o", "json").stdout)

        def ageless(v):  # the plugin lists the queues by name
            return sorted((dict(q, pods=[{k: x for k, x in p.items() if k != "waitingSeconds"} for p in q["pods"]])
                           for q in v), key=lambda q: q["queue"])
        self.assertEqual(ageless(j), ageless(self.kq.get_json(WAITING)))
        self.run_plugin("waiting", "--user", "alice", status=2)

    def test_why_shows_the_place_in_line(self):
        for p in self.line:
            r = self.run_plugin("why", p["name"])
            self.assertIn("pod default/%s (user %s, queue root.dev): " % (p["name"], p["user"]), r.stdout)
            self.assertIn("place in line: %d of 3 behind the admission gate in queue root.dev (1 is released next)"
                          % p["position"], r.stdout)
        r = self.run_plugin("why", "huge")
        self.assertIn("can never fit as it is", r.stdout)
        self.assertIn("place in line: none, set aside behind the admission gate in queue root.dev: it can never "
                      "fit as it is", r.stdout)
        # a released pod is not in line any more
        released = sorted({"a1", "a2", "a3", "b1", "b2"} - {p["name"] for p in self.line})
        self.assertEqual(len(released), 2)
        r = self.run_plugin("why", released[0])
        self.assertNotIn("place in line", r.stdout)


class HostileServer:
    """An HTTPS stand-in for kubequota's usage view behind the proxy, answering every GET
    with a fixed JSON document (names and messages with terminal control characters)."""

    def __init__(self, answers):
        import http.server
        import threading
        answers_ = answers

        class H(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                status, doc = answers_(self.path)
                data = json.dumps(doc).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *a):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        import ssl
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(certs()["server"], certs()["server_key"])
        self.httpd.socket = ctx.wrap_socket(self.httpd.socket, server_side=True)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()


EVIL = "ev\x1b]0;owned\x07il\x1b[2J\rX\x9b"  # retitle + BEL, clear screen, CR, C1 CSI


class PluginHostileOutputTest(KQTestCase):
    """Names and messages from the server reach the terminal escaped (issue 29): ESC as ^[
    and CR as \\r as kubectl prints them, other controls visibly; and a FIFO given as the
    kubeconfig's CA or token file is refused with a clear error instead of hanging."""
    CONFIG = queues_config({"name": "default"})
    START = False

    def setUp(self):
        super().setUp()
        self.kubeconfig = write_kubeconfig(os.path.join(self.kq.workdir, "user-kubeconfig"), self.sim.url,
                                           certs()["ca"], self.sim.sim.token)

    def answers(self, path):
        if "/usage/users" in path:
            return 200, [{"userName": EVIL, "queues": {"queuePath": "root." + EVIL, "resourceUsage": {"vcore": 1000},
                                                       "maxResources": {}, "runningApplications": []}}]
        if "/gating/waiting" in path:
            return 200, [{"queue": "root." + EVIL, "waiting": 2, "pods": [
                {"namespace": "default", "name": "p1", "user": EVIL, "position": 1, "waitingSeconds": 3.5,
                 "reason": "over " + EVIL, "neverFits": False},
                {"namespace": EVIL, "name": EVIL, "user": EVIL, "position": None, "waitingSeconds": 1,
                 "reason": "never fits: " + EVIL, "neverFits": True}]}]
        if "/explain/" in path:
            return 200, {"user": EVIL, "queue": "root.q", "managed": True, "fits": False,
                         "blockers": [{"kind": "queue", "name": EVIL, "message": "over " + EVIL}]}
        return 404, {"status_code": 404, "message": "no " + EVIL, "description": "no such thing " + EVIL}

    def run_plugin(self, *args, status=0, kubeconfig=None):
        e = dict(os.environ, KUBECONFIG=kubeconfig or self.kubeconfig)
        r = subprocess.run([binary(), "kubectl"] + list(args), capture_output=True, env=e, timeout=30)
        self.assertEqual(r.returncode, status, r.stderr)
        return r.stdout.decode("utf-8", "replace"), r.stderr.decode("utf-8", "replace")

    def assert_no_controls(self, text):
        bad = sorted({"%r" % c for c in text if (ord(c) < 32 and c not in "\n\t") or 0x7f <= ord(c) <= 0x9f})
        self.assertEqual(bad, [], "control characters reached the terminal:\n%r" % text)

    def test_server_supplied_text_is_escaped(self):
        srv = HostileServer(self.answers)
        self.addCleanup(srv.stop)
        self.sim.sim.proxy_services = {"%s/%s:443" % (NS, SVC): "127.0.0.1:%d" % srv.port}
        out, _ = self.run_plugin("usage")
        self.assert_no_controls(out)
        self.assertIn("ev^[]0;owned^Gil^[[2J\\rX\\u009b", out)
        out, _ = self.run_plugin("why", "p1")
        self.assert_no_controls(out)
        self.assertIn("over ev^[]0;owned^Gil", out)
        self.assertIn("place in line: 1 of 1 behind the admission gate in queue root.ev^[]0;owned^Gil", out)
        out, _ = self.run_plugin("waiting")
        self.assert_no_controls(out)
        self.assertIn("never fits: ev^[]0;owned^Gil^[[2J\\rX\\u009b", out)
        _, err = self.run_plugin("usage", "--user", "x", status=1)
        self.assert_no_controls(err)
        self.assertIn("no such thing ev^[]0;owned^Gil", err)
        # -o json: the same document, control characters as JSON escapes
        out, _ = self.run_plugin("usage", "-o", "json")
        self.assert_no_controls(out)
        self.assertEqual(json.loads(out)[0]["userName"], EVIL)

    def test_fifo_as_ca_or_token_file(self):
        fifo = os.path.join(self.kq.workdir, "fifo")
        os.mkfifo(fifo)
        with open(self.kubeconfig) as f:
            text = f.read()
        for key, cfg in (("certificate-authority", text.replace(certs()["ca"], fifo)),
                         ("tokenFile", text.replace('token: "%s"' % self.sim.sim.token, 'tokenFile: "%s"' % fifo))):
            self.assertNotEqual(cfg, text)
            path = os.path.join(self.kq.workdir, "kc-" + key)
            with open(path, "w") as f:
                f.write(cfg)
            try:
                _, err = self.run_plugin("usage", status=2, kubeconfig=path)
            except subprocess.TimeoutExpired:
                self.fail("the plugin hung on a FIFO as %s" % key)
            self.assertIn("%s %s is not a regular file (a FIFO)" % (key, fifo), err)


# DRA (issue 39): a device class's devices and the "memory" counter of partitionable devices
# under ResourceQuota's names (docs/dra.md)
DEV = "gpu.example.com.deviceclass.resource.k8s.io/devices"
DEV_MEM = "gpu.example.com.deviceclass.resource.k8s.io/memory"


class PluginDraTest(KQTestCase):
    """`kubectl kubequota usage` prints device resources (dots and a slash in the name) on a
    line of their own under the row, used against max; a counter of bytes as memory is
    printed (80Gi, as queues.yaml says it, not 8.58993e+10) and a count exactly."""
    CONFIG = queues_config(
        {"name": "default", "submitacl": "*"},
        {"name": "gpu", "submitacl": "*",
         "resources": {"max": {"vcore": "8", DEV: "1234567", DEV_MEM: "80Gi"}},
         "limits": [{"limit": "alice's devices", "users": ["alice"], "maxresources": {DEV: "2"}}]})

    def setUp(self):
        super().setUp()
        plugin_setup(self)

    def run_plugin(self, *args):
        r = subprocess.run([self.plugin] + list(args), capture_output=True, text=True, timeout=30,
                           env=dict(os.environ, KUBECONFIG=self.kubeconfig))
        self.assertEqual(r.returncode, 0, r.stderr)
        return r.stdout

    def test_device_resources(self):
        self.sim.world.create_simple("resourceclaims", "default", {
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": "g1", "namespace": "default"},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                "deviceClassName": "gpu.example.com", "count": 1}}]}}})
        p = pod_manifest("g1", user="alice", queue="root.gpu", cpu="500m", memory="256Mi", app="app-g1")
        p["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "g1"}]
        p["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
        self.sim.create_pod(p)
        wait_until(lambda: self.schedule("g1")[0], 10, 0.1, "g1 bound once kubequota sees its claim")
        wait_until(lambda: DEV in self.run_plugin("usage", "--user", "alice"), 10, 0.1, "alice's devices")
        lines = [ln.split() for ln in self.run_plugin("usage", "--user", "alice").splitlines()]
        # alice: the root row, then root.gpu's against her limit of 2
        self.assertIn([DEV, "1/2"], lines)
        lines = [ln.split() for ln in self.run_plugin("usage", "--queue", "root.gpu").splitlines()]
        self.assertIn([DEV, "1/1234567"], lines)
        self.assertIn([DEV_MEM, "0/80Gi"], lines)
