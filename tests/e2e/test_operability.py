"""Operable like a Kubernetes component: structured logs (klog text and JSON), the command
line (help per command, one-line errors, --version, durations, kube-scheduler flag names),
startup errors that name their cause.

Log formats as Kubernetes documents them for its components
(kubernetes/website content/en/docs/concepts/cluster-administration/system-logs.md):
JSON lines carry "ts" (seconds since the epoch), "v" and "msg" plus structured keys."""

import json
import os
import re
import shutil
import socket
import subprocess

from kqtest import (KQTestCase, Kubequota, Sim, binary, certs, have_binary, queues_config,
                    wait_until)
import unittest

CONFIG = queues_config({"name": "default"}, {"name": "dev", "limits": [
    {"limit": "one core", "users": ["*"], "maxresources": {"cpu": "1"}}]})

KLOG = re.compile(r'^[IWE]\d{4} \d\d:\d\d:\d\d\.\d{6} +\d+ [\w.]+:\d+\] "(?:[^"\\]|\\.)*"( [\w.-]+=\S.*)?$')


def run(*args, timeout=10):
    return subprocess.run([binary()] + list(args), capture_output=True, text=True, timeout=timeout)


def kq_lines(text):
    """kubequota's own lines (the harness writes '---- start' markers into the same file)."""
    return [line for line in text.splitlines() if line and not line.startswith("---- start")]


class JsonLogTest(KQTestCase):
    CONFIG = CONFIG
    EXTRA_ARGS = ("--logging-format", "json", "-v=4")

    def test_every_line_is_an_object_and_denials_are_logged(self):
        self.create("p1", user="alice", queue="root.dev", cpu="1")
        self.assert_bound("p1")
        self.create("p2", user="alice", queue="root.dev", cpu="1")
        self.assert_denied("p2")
        for _ in range(5):  # kube-scheduler retrying: logged once per pod and reason a minute
            self.schedule("p2")
        wait_until(lambda: '"result":"denied"' in self.kq.logs(), 10, 0.05,
                   msg="no denial line in the log")
        objs = []
        for line in kq_lines(self.kq.logs()):
            try:
                o = json.loads(line)
            except ValueError:
                self.fail("log line is not JSON: %r" % line)
            self.assertIsInstance(o, dict, line)
            self.assertIsInstance(o.get("ts"), (int, float), line)
            self.assertIsInstance(o.get("msg"), str, line)
            self.assertTrue(o["msg"], "empty message: %r" % line)
            self.assertTrue("v" in o or o.get("level") == "error", line)
            objs.append(o)
        started = [o for o in objs if o.get("event") == "started"]
        self.assertEqual(len(started), 1)
        self.assertIn("commit", started[0])
        denials = [o for o in objs if o.get("result") == "denied"]
        self.assertEqual(len(denials), 1, "a retried denial is logged once: %r" % denials)
        d = denials[0]
        self.assertEqual(d["v"], 0)  # info, not debug
        self.assertEqual(d["pod"], "default/p2")
        self.assertEqual(d["user"], "alice")
        self.assertEqual(d["queue"], "root.dev")
        self.assertIn("cpu", d["reason"])
        # debug lines (-v=4) carry their verbosity
        self.assertTrue(any(o.get("v") == 4 for o in objs))

    def test_rejected_config_map_edit_names_the_user(self):
        body = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                "request": {"uid": "cm-1", "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
                            "resource": {"group": "", "version": "v1", "resource": "configmaps"},
                            "namespace": "kube-system", "name": "kubequota-config",
                            "operation": "UPDATE",
                            "userInfo": {"username": "mallory@example.com", "groups": ["ops"]},
                            "object": {"apiVersion": "v1", "kind": "ConfigMap",
                                       "metadata": {"name": "kubequota-config",
                                                    "namespace": "kube-system"},
                                       "data": {"queues.yaml": "partitions: [{name: x, queues: 7}]"}}}}
        r = self.kq.post("/admission/validate", body)
        self.assertEqual(r.status, 200)
        self.assertFalse(r.json()["response"]["allowed"])
        wait_until(lambda: "admission_denied" in self.kq.logs(), 10, 0.05)
        lines = [json.loads(line) for line in kq_lines(self.kq.logs())]
        denied = [o for o in lines if o.get("event") == "admission_denied"]
        self.assertEqual(len(denied), 1)
        self.assertEqual(denied[0]["user"], "mallory@example.com")
        self.assertEqual(denied[0]["name"], "kubequota-config")
        self.assertIn("invalid", denied[0]["msg"])


class TextLogTest(KQTestCase):
    CONFIG = CONFIG

    def test_klog_text_lines(self):
        self.create("p1", user="bob", queue="root.dev", cpu="2")
        self.assert_denied("p1")
        wait_until(lambda: "result=denied" in self.kq.logs(), 10, 0.05)
        for line in kq_lines(self.kq.logs()):
            self.assertRegex(line, KLOG)
        self.assertRegex(self.kq.logs(), r'(?m)^I\d{4} .*\] "pod denied by quota" event=filter '
                                         r'result=denied pod=default/p1 .*user=bob queue=root.dev ')


class CommandLineTest(unittest.TestCase):
    def setUp(self):
        if not have_binary():
            self.skipTest("%s not built" % binary())

    def test_help_per_command(self):
        for cmd, words in ((["serve", "--help"], ["--leader-elect-lease-duration", "--logging-format",
                                                  "interval=DURATION"]),
                           (["serve", "-h"], ["Usage: kubequota serve"]),
                           (["check-config", "--help"], ["Usage: kubequota check-config", "FILE"]),
                           (["check-config", "-h"], ["Exit status"]),
                           (["--help"], ["serve", "check-config", "--version"])):
            r = run(*cmd)
            self.assertEqual(r.returncode, 0, "%s: %s" % (cmd, r.stderr))
            for w in words:
                self.assertIn(w, r.stdout, cmd)
            self.assertEqual(r.stderr, "", cmd)

    def test_errors_are_one_line_and_point_at_help(self):
        for cmd, text in ((["serve", "--no-such-flag"], "unknown flag --no-such-flag"),
                          (["serve", "--no-such-flag=3"], "unknown flag --no-such-flag"),
                          (["serve", "-q"], "unknown flag -q"),
                          (["serve", "--config"], "--config needs a value"),
                          (["check-config", "--strict", "x.yaml"], "unknown flag --strict"),
                          (["check-config"], "expected exactly one FILE"),
                          (["serve", "--config", "x", "--reload-interval", "2 minutes"],
                           '"2 minutes" is not a duration'),
                          (["serve", "--config", "x", "--leader-elect-lease-duration", "15"],
                           "missing unit"),
                          (["serve", "--config", "x", "--logging-format", "xml"],
                           "expected text or json")) + tuple(
                (["serve", "--config", "x", "--admission-gate-release-parallel", v],
                 "--admission-gate-release-parallel %s: expected a whole number from 1 to 64" % v)
                for v in ("0", "-1", "65", "many", "1.5", "")):
            r = run(*cmd)
            self.assertEqual(r.returncode, 2, cmd)
            self.assertEqual(r.stdout, "", cmd)
            lines = r.stderr.splitlines()
            self.assertEqual(len(lines), 1, "%s: %r" % (cmd, r.stderr))
            self.assertIn(text, lines[0], cmd)
            self.assertIn("--help", lines[0], cmd)
        r = run("frobnicate")
        self.assertEqual(r.returncode, 2)
        self.assertEqual(len(r.stderr.splitlines()), 1)
        self.assertIn("see 'kubequota --help'", r.stderr)

    def test_version_names_commit_and_date(self):
        r = run("--version")
        self.assertEqual(r.returncode, 0)
        self.assertRegex(r.stdout, r"^kubequota \d+\.\d+\.\d+ \(commit ([0-9a-f]{7,40}(-dirty)?|unknown), "
                                   r"built (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ|unknown)\)\n$")

    def test_missing_file_is_named_before_anything_starts(self):
        c = certs()
        r = run("serve", "--config", "/nonexistent/queues.yaml", "--tls-cert", c["server"],
                "--tls-key", c["server_key"])
        self.assertEqual(r.returncode, 2)
        self.assertIn("--config /nonexistent/queues.yaml: No such file or directory", r.stderr)
        r = run("serve", "--config", os.path.join(os.path.dirname(__file__), "..", "..", "examples",
                                                  "queues.yaml"),
                "--tls-cert", "/nonexistent/tls.crt", "--tls-key", c["server_key"])
        self.assertEqual(r.returncode, 2)
        self.assertIn("--tls-cert /nonexistent/tls.crt: No such file or directory", r.stderr)


class StartupErrorTest(unittest.TestCase):
    def setUp(self):
        if not have_binary():
            self.skipTest("%s not built" % binary())
        self.sim = Sim(nodes=("n1",))
        self.addCleanup(self.sim.stop)

    def test_address_in_use_and_old_flag_names(self):
        busy = socket.socket()
        busy.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        self.addCleanup(busy.close)
        # old leader election names stay accepted as aliases, with Go durations
        kq = Kubequota(self.sim, CONFIG, extra_args=[
            "--lease-duration", "15s", "--renew-deadline", "10s", "--retry-period", "2s",
            "--leader-elect-resource-name", "x", "--reclaim-grace", "1m", "--elastic-tick", "500ms",
            "--status-interval", "10s", "--reload-interval", "2000"])
        kq.port = busy.getsockname()[1]
        kq.start(wait=False)
        try:
            rc = kq.proc.wait(20)
        finally:
            kq.kill()
        self.assertEqual(rc, 2, kq.log_tail())
        self.assertRegex(kq.logs(), r"(?i)address already in use")


# ---------------------------------------------------------------------------------------
# Events
# ---------------------------------------------------------------------------------------

EV_CONFIG = queues_config(
    {"name": "default"},
    {"name": "dev", "resources": {"max": {"cpu": "4"}},
     "limits": [{"limit": "one core", "users": ["*"], "maxresources": {"cpu": "1"}},
                {"limit": "dev group", "groups": ["dev"], "maxresources": {"cpu": "3"}}]},
    {"name": "org", "queues": [{"name": "team"}]})


def pod_events(sim, name, ns="default"):
    return [e for e in sim.events(ns) if (e.get("involvedObject") or {}).get("name") == name]


class EventTest(KQTestCase):
    """What `kubectl describe pod` shows: one Event per pod and reason with a rising count
    (client-go's recorder: k8s.io/client-go tools/record/events_cache.go), a reason per
    situation, messages that say how much must be freed."""
    CONFIG = EV_CONFIG
    EXTRA_ARGS = ("--event-update-interval", "100ms")

    def test_one_event_with_rising_count(self):
        self.create("p1", user="alice", queue="root.dev", cpu="700m")
        self.assert_bound("p1")
        self.create("p2", user="alice", queue="root.dev", cpu="800m")
        for _ in range(5):
            self.assert_denied("p2")

        def counted():
            evs = [e for e in pod_events(self.sim, "p2") if e.get("reason") == "QuotaExceeded"]
            return evs if evs and evs[0].get("count") == 5 else None
        evs = wait_until(counted, 15, 0.1, "one QuotaExceeded event for p2 with count 5")
        self.assertEqual(len(evs), 1, evs)
        e = evs[0]
        self.assertEqual(e["type"], "Warning")
        # 700m used + 800m requested > 1 max: 500m must be freed (computed here: 0.7 + 0.8 - 1)
        self.assertIn("cpu 700m used + 800m requested > 1 max; needs 500m more cpu", e["message"])
        self.assertIn("alice", e["message"])
        self.assertLessEqual(e["firstTimestamp"], e["lastTimestamp"])

    def test_admitted_after_waiting_gets_a_normal_event(self):
        self.create("p1", user="bob", queue="root.dev", cpu="1")
        self.assert_bound("p1")
        self.create("p2", user="bob", queue="root.dev", cpu="1")
        self.assert_denied("p2")
        wait_until(lambda: [e for e in pod_events(self.sim, "p2") if e.get("type") == "Warning"], 10, 0.1)
        self.sim.delete_pod("default", "p1")
        wait_until(lambda: self.schedule("p2")[0], 15, 0.2, "p2 admitted once p1 is gone")
        ev = wait_until(lambda: [e for e in pod_events(self.sim, "p2") if e.get("reason") == "QuotaAdmitted"],
                        10, 0.1, "a QuotaAdmitted event for p2")
        self.assertEqual(ev[0]["type"], "Normal")
        self.assertEqual(len(ev), 1)
        # a pod that never waited gets none
        self.assertFalse([e for e in pod_events(self.sim, "p1") if e.get("reason") == "QuotaAdmitted"])

    def test_distinct_reasons(self):
        # the request alone is over the max: it can never fit
        self.create("huge", user="carol", queue="root.dev", cpu="5")
        self.assert_denied("huge")
        # a queue that does not exist
        self.create("lost", user="carol", queue="root.nowhere", cpu="100m")
        self.assert_denied("lost")
        # a parent queue
        self.create("parent", user="carol", queue="root.org", cpu="100m")
        self.assert_denied("parent")

        def reasons():
            got = {}
            for name in ("huge", "lost", "parent"):
                for e in pod_events(self.sim, name):
                    got[name] = (e.get("reason"), e.get("message", ""))
            return got if len(got) == 3 else None
        got = wait_until(reasons, 15, 0.1, "events for huge, lost and parent")
        self.assertEqual(got["huge"][0], "QuotaNeverFits", got)
        self.assertIn("can never fit", got["huge"][1])
        self.assertEqual(got["lost"][0], "QueueNotFound", got)
        self.assertEqual(got["parent"][0], "QueueNotLeaf", got)


class AclEventTest(KQTestCase):
    """A submitacl denial is its own reason (YuniKorn's ACL rules; the root has no '*')."""
    CONFIG = {"partitions": [{"name": "default", "queues": [{"name": "root", "queues": [
        {"name": "default", "submitacl": "*"},
        {"name": "locked", "submitacl": "alice"}]}]}]}

    def test_acl_denial(self):
        self.create("p", user="mallory", queue="root.locked", cpu="100m")
        why = self.assert_denied("p", "default", "may not submit")
        ev = wait_until(lambda: [e for e in pod_events(self.sim, "p") if e.get("type") == "Warning"], 10, 0.1,
                        "a Warning event for p")
        self.assertEqual(ev[0]["reason"], "QueueACLDenied", (ev, why))
        self.create("q", user="alice", queue="root.locked", cpu="100m")
        self.assert_bound("q")

    def test_acl_denial_of_a_user_named_like_another_denial(self):
        # the message names the user: "user x is a parent queue (groups: none) may not submit ..."
        self.create("r", user="x is a parent queue", queue="root.locked", cpu="100m")
        why = self.assert_denied("r", "default", "user x is a parent queue (groups: none) may not submit")
        ev = wait_until(lambda: [e for e in pod_events(self.sim, "r") if e.get("type") == "Warning"], 10, 0.1,
                        "a Warning event for r")
        self.assertEqual(ev[0]["reason"], "QueueACLDenied", (ev, why))


class TriggerPhraseNameTest(KQTestCase):
    """The Event reason and the metric label come from the kind of denial the engine
    reports, not from phrases in its text: a user name or a limit description that reads
    like another denial ("does not exist", "the pod can never fit", "may not submit to
    queue") is still an ordinary QuotaExceeded / over_limit."""
    CONFIG = queues_config(
        {"name": "default"},
        {"name": "dev", "limits": [{"limit": "the pod can never fit", "users": ["*"],
                                    "maxresources": {"cpu": "1"}}]},
        {"name": "ops", "limits": [{"users": ["*"], "maxresources": {"cpu": "1"}}]},
        {"name": "lab", "limits": [{"limit": "x may not submit to queue y", "users": ["*"],
                                    "maxresources": {"cpu": "1"}}]})
    EXTRA_ARGS = ("--rest-auth", "none", "--event-update-interval", "100ms")

    def test_names_do_not_change_the_reason(self):
        cases = (("a", "carol", "root.dev", "the pod can never fit"),
                 ("b", "ann does not exist", "root.ops", "user ann does not exist in queue root.ops"),
                 ("c", "dave", "root.lab", "may not submit to queue"))
        for name, user, queue, phrase in cases:
            self.create(name + "1", user=user, queue=queue, cpu="700m")
            self.assert_bound(name + "1")
            self.create(name + "2", user=user, queue=queue, cpu="800m")
            # 700m + 800m > 1: over the limit now, not forever (0.8 <= 1)
            self.assert_denied(name + "2", "default", phrase, "needs 500m more cpu")

        def reasons():
            got = {}
            for name, _, _, _ in cases:
                for e in pod_events(self.sim, name + "2"):
                    if e.get("type") == "Warning":
                        got[name] = e.get("reason")
            return got if len(got) == len(cases) else None
        got = wait_until(reasons, 15, 0.1, "a Warning event for each denied pod")
        self.assertEqual(got, {name: "QuotaExceeded" for name, _, _, _ in cases})
        text = self.kq.get("/metrics").text
        for queue in ("root.dev", "root.ops", "root.lab"):
            self.assertIn('kubequota_admission_attempts_total{queue="%s",result="denied",reason="over_limit"} 1\n'
                          % queue, text)
        self.assertNotRegex(text, r'kubequota_admission_attempts_total\{[^}]*reason="(never_fits|queue_missing|acl)"')
        # the name with spaces is one quoted value of the log line, not "user=ann" plus junk
        wait_until(lambda: ' user="ann does not exist" ' in self.kq.logs(), 10, 0.05,
                   msg="no log line with the quoted user name")
        self.assertNotRegex(self.kq.logs(), r' user=ann ')


# ---------------------------------------------------------------------------------------
# Metrics
# ---------------------------------------------------------------------------------------

GOLDEN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "metrics_golden.txt")


def parse_metrics(text):
    """{family: (type, set of label names)} and the samples, read independently of the code."""
    types, labels, samples = {}, {}, []
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, typ = line.split(" ", 3)
            types[name] = typ
            labels.setdefault(name, set())
        elif line and not line.startswith("#"):
            m = re.match(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$', line)
            assert m, "bad sample line %r" % line
            name, lbl = m.group(1), m.group(3) or ""
            names = set(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="(?:[^"\\]|\\.)*"', lbl))
            fam = name
            for suffix in ("_bucket", "_sum", "_count"):
                if name.endswith(suffix) and name[:-len(suffix)] in types:
                    fam = name[:-len(suffix)]
            names.discard("le")
            labels.setdefault(fam, set()).update(names)
            samples.append((name, lbl, float(m.group(4))))
    return types, labels, samples


class MetricsTest(KQTestCase):
    CONFIG = EV_CONFIG
    EXTRA_ARGS = ("--rest-auth", "none", "--metering", "interval=1s")

    def scrape(self):
        r = self.kq.get("/metrics")
        self.assertEqual(r.status, 200)
        return r.text

    def test_golden_names_units_labels(self):
        self.create("p1", user="alice", groups=("dev",), queue="root.dev", cpu="700m")
        self.assert_bound("p1")
        self.create("p2", user="alice", queue="root.dev", cpu="800m")
        self.assert_denied("p2")
        text = self.scrape()
        types, labels, samples = parse_metrics(text)
        want = {}
        with open(GOLDEN) as f:
            for line in f:
                line = line.split("#", 1)[0].strip()
                if not line:
                    continue
                name, typ, lbls = (line.split(None, 2) + [""])[:3]
                want[name] = (typ, set(x for x in lbls.split(",") if x))
        got = {n: (types[n], labels.get(n, set())) for n in types}
        missing = sorted(set(want) - set(got))
        extra = sorted(set(got) - set(want))
        self.assertEqual(missing, [], "families in %s but not on /metrics" % GOLDEN)
        self.assertEqual(extra, [], "families on /metrics but not in %s (add them there and to "
                                    "docs/metrics.md)" % GOLDEN)
        for name, (typ, lbls) in want.items():
            self.assertEqual(got[name][0], typ, name)
            # a family without samples now shows no labels; those it shows must be the golden ones
            self.assertTrue(got[name][1] <= lbls, "%s labels %s, golden %s" % (name, got[name][1], lbls))
        # base units: 700m cpu is 0.7 cores; a user group and a quota group have their own labels
        self.assertIn('kubequota_user_resource_used{user="alice",queue="root.dev",resource="cpu"} 0.7\n', text)
        self.assertIn('kubequota_user_resource_limit{user="alice",queue="root.dev",resource="cpu"} 1\n', text)
        self.assertIn('kubequota_user_group_resource_used{user_group="dev",queue="root.dev",resource="cpu"} 0.7\n',
                      text)
        self.assertIn('kubequota_user_group_resource_limit{user_group="dev",queue="root.dev",resource="cpu"} 3\n',
                      text)
        self.assertIn('kubequota_queue_resource_max{queue="root.dev",resource="cpu"} 4\n', text)
        self.assertIn('kubequota_admission_attempts_total{queue="root.dev",result="denied",reason="over_limit"} 1\n',
                      text)
        self.assertIn('kubequota_admission_attempts_total{queue="root.dev",result="admitted",reason=""} 1\n', text)
        self.assertIn('kubequota_config_last_reload_successful 1\n', text)
        self.assertRegex(text, r'kubequota_build_info\{version="[^"]+",commit="[^"]+",build_date="[^"]+"\} 1\n')
        self.assertRegex(text, r'(?m)^process_resident_memory_bytes [1-9]')
        # histogram buckets reach the extender timeout (10s in the chart)
        self.assertIn('kubequota_request_duration_seconds_bucket{endpoint="/scheduler/filter",le="10"}', text)

    def test_promtool_accepts_the_exposition(self):
        promtool = os.environ.get("KQ_PROMTOOL") or shutil.which("promtool")
        if promtool is None:
            self.skipTest("no promtool (`make e2e` gets one with scripts/promtool.sh; or set KQ_PROMTOOL)")
        self.create("p1", user="alice", queue="root.dev", cpu="700m")
        self.assert_bound("p1")
        r = subprocess.run([promtool, "check", "metrics"], input=self.scrape(), capture_output=True, text=True,
                           timeout=60)
        self.assertEqual(r.returncode, 0, "promtool check metrics:\n%s%s" % (r.stdout, r.stderr))
        self.assertEqual((r.stdout + r.stderr).strip(), "", "promtool found lint problems")

    def test_failed_reload_sets_the_gauge(self):
        self.kq.write_config("partitions: [{name: default, queues: 7}]\n")
        wait_until(lambda: "kubequota_config_last_reload_successful 0\n" in self.scrape(), 15, 0.1,
                   "the gauge drops to 0 after a rejected edit")
