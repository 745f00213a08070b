"""Validators agree with serve (issue 14): every queues.yaml of tests/data/config that
`kubequota serve` refuses at start-up is refused by its live reload, by `check-config`, by
the ConfigMap admission webhook (/admission/validate) and by /ws/v1/validate-conf, with the
same first message; every file serve accepts, all of them accept.

The truth is serve itself: each file is given to a real `serve` start-up, whose exit status
and first diagnostic decide. The expected refusals of serve-refuses/ (empty file,
comment-only file, no `default` partition) and every file of invalid/ are also named here,
so a serve that started accepting them fails the test rather than redefining the truth.

The first message is compared without the file name each tool puts in front of it (serve
and check-config name the path, the webhook and validate-conf name the ConfigMap key
queues.yaml): "LINE:COL: WHERE: TEXT", or ": TEXT" for a file-level message.
"""

import base64
import json
import os
import re
import subprocess

import kqtest
from kqtest import KQTestCase, binary, queues_config, wait_until

DATA = os.path.join(kqtest.REPO, "tests", "data", "config")
CM_NS, CM_NAME = "kubequota-system", "kq-queues"
GOOD = queues_config({"name": "default"}, {"name": "dev"})


def corpus():
    out = []
    for sub in ("valid", "invalid", "serve-refuses"):
        d = os.path.join(DATA, sub)
        for f in sorted(os.listdir(d)):
            if f.endswith(".yaml"):
                out.append((sub, os.path.join(d, f)))
    return out


def read(path):
    with open(path, "rb") as f:
        return f.read().decode("utf-8", errors="surrogateescape")


def first_after(text, prefix):
    """The first line of text starting with prefix, without the prefix; None if none."""
    for line in text.splitlines():
        if line.startswith(prefix):
            return line[len(prefix):]
    return None


def logfmt_value(line, key):
    """The value of key="..." in a log line, unescaped (\\" and \\\\), or ""."""
    i = line.find(" %s=\"" % key)
    if i < 0:
        return ""
    out, j = [], i + len(key) + 3
    while j < len(line):
        c = line[j]
        if c == "\\" and j + 1 < len(line):
            out.append({"n": "\n", "t": "\t"}.get(line[j + 1], line[j + 1]))
            j += 2
            continue
        if c == '"':
            break
        out.append(c)
        j += 1
    return "".join(out)


def first_joined(joined, file="queues.yaml"):
    """The first of the diagnostics the webhook and validate-conf join with "; ", each of
    which starts with the file name, without that name."""
    assert joined.startswith(file), joined
    return joined[len(file):].split("; " + file, 1)[0]


def config_map_review(yaml_text, uid="parity-0001"):
    cm = {"apiVersion": "v1", "kind": "ConfigMap",
          "metadata": {"name": CM_NAME, "namespace": CM_NS}, "data": {"queues.yaml": yaml_text}}
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": uid, "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
                        "resource": {"group": "", "version": "v1", "resource": "configmaps"},
                        "namespace": CM_NS, "name": CM_NAME, "operation": "UPDATE",
                        "userInfo": {"username": "admin", "groups": ["system:masters"]},
                        "object": cm, "oldObject": cm, "dryRun": False}}


class ConfigParityTest(KQTestCase):
    CONFIG = GOOD
    START = False

    def startup_verdict(self, path, partition="default"):
        """(accepted, first message) of a real serve start-up on path: refused when it exits
        before event=started, accepted once it logs event=started (then it is stopped)."""
        argv = [binary(), "serve", "--config", path, "--kubeconfig", self.kq.kubeconfig,
                "--listen", "127.0.0.1:%d" % kqtest.free_port(), "--tls-cert", kqtest.certs()["server"],
                "--tls-key", kqtest.certs()["server_key"], "--partition", partition,
                "--log-level", "info"]
        errpath = os.path.join(self.kq.workdir, "startup.err")
        with open(errpath, "wb") as err:
            p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err, stdin=subprocess.DEVNULL)

        def log():
            with open(errpath, "rb") as f:
                return f.read().decode(errors="replace")
        try:
            wait_until(lambda: p.poll() is not None or "event=started" in log(), 30, 0.02,
                       "serve to start or exit on %s" % path)
        finally:
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        text = log()
        if "event=started" in text:
            return True, None
        self.assertEqual(p.returncode, 2, "serve on %s: exit %s\n%s" % (path, p.returncode, text[-2000:]))
        return False, first_after(text, "kubequota: " + path)

    def check_config(self, path, partition="default"):
        r = subprocess.run([binary(), "check-config", "--partition", partition, path], capture_output=True,
                           text=True, errors="replace", timeout=20)
        if r.returncode == 0:
            return True, None
        self.assertEqual(r.returncode, 1, "check-config %s: exit %d (%s)" % (path, r.returncode, r.stderr))
        return False, first_after(r.stderr, path)

    def validate_conf(self, text):
        r = self.kq.post("/ws/v1/validate-conf", raw=text.encode("utf-8", errors="surrogateescape"),
                         headers={"Content-Type": "application/x-yaml"})
        self.assertEqual(r.status, 200, r.text)
        j = r.json()
        if j["allowed"]:
            return True, None
        return False, first_joined(j["reason"])

    def webhook(self, text):
        r = self.kq.post("/admission/validate", config_map_review(text))
        self.assertEqual(r.status, 200, r.text)
        resp = r.json()["response"]
        if resp["allowed"]:
            return True, None
        msg = resp["status"]["message"]
        head = "ConfigMap %s/%s: queues.yaml is invalid, the running scheduler keeps its current queues: " % (
            CM_NS, CM_NAME)
        self.assertTrue(msg.startswith(head), msg)
        return False, first_joined(msg[len(head):])

    def reload(self, path):
        """Installs path as the running serve's config (atomic rename) and returns its verdict."""
        before = self.reload_events()
        tmp = self.kq.config_path + ".new"
        with open(path, "rb") as src, open(tmp, "wb") as dst:
            dst.write(src.read())
        os.rename(tmp, self.kq.config_path)
        wait_until(lambda: len(self.reload_events()) > len(before), 20, 0.05,
                   "kubequota to reload %s" % os.path.basename(path))
        ev = self.reload_events()[len(before)]
        if ev[0] == "config_reloaded":
            return True, None
        return False, ev[1]

    def reload_events(self):
        out = []
        for line in self.kq.logs().splitlines():
            m = re.search(r"event=(config_reloaded|config_rejected) file=(\S+)", line)
            if m:
                err = logfmt_value(line, "errors")
                out.append((m.group(1), err))
        return out

    def test_every_validator_refuses_what_serve_refuses(self):
        self.kq.extra_args += ["--config-map", "%s/%s" % (CM_NS, CM_NAME), "--reload-interval", "100"]
        self.kq.start()
        files = corpus()
        self.assertGreater(len(files), 80)
        refused = 0
        for sub, path in files:
            name = "%s/%s" % (sub, os.path.basename(path))
            serve_ok, serve_first = self.startup_verdict(path)
            if sub in ("invalid", "serve-refuses"):
                self.assertFalse(serve_ok, "serve accepts %s" % name)
            if not serve_ok:
                refused += 1
                self.assertTrue(serve_first, "serve refused %s without a diagnostic naming it" % name)
            text = read(path)
            verdicts = {"check-config": self.check_config(path), "validate-conf": self.validate_conf(text),
                        "webhook": self.webhook(text)}
            for tool, (ok, first) in verdicts.items():
                self.assertEqual(ok, serve_ok, "%s: serve %s it, %s %s it" % (
                    name, "accepts" if serve_ok else "refuses", tool, "accepts" if ok else "refuses"))
                if not serve_ok:
                    self.assertEqual(first, serve_first, "%s: %s's first message differs from serve's" % (name, tool))
            ok, errors = self.reload(path)
            self.assertEqual(ok, serve_ok, "%s: the live reload %s it" % (name, "accepts" if ok else "refuses"))
            if not serve_ok:
                want = self.kq.config_path + serve_first
                # a log line holds at most 2 KiB: a longer message is logged as its prefix
                cut = not errors.startswith(want) and want.startswith(errors) and len(errors) > 1500
                self.assertTrue(errors.startswith(want) or cut,
                                "%s: the reload's first message is not serve's: %s" % (name, errors[:300]))
        self.assertGreaterEqual(refused, 70)
        self.assertTrue(self.kq.alive(), "a refused reload never stops serve")

    def test_the_partition_in_use_must_exist(self):
        both = os.path.join(self.kq.workdir, "both.yaml")
        only_default = os.path.join(self.kq.workdir, "default-only.yaml")
        with open(both, "w") as f:
            f.write(kqtest.to_yaml(queues_config({"name": "a"}, partition="default")) + "\n")
            f.write("  - name: batch\n    queues:\n      - name: root\n")
        with open(only_default, "w") as f:
            f.write(kqtest.to_yaml(GOOD) + "\n")
        self.assertEqual(self.check_config(both, "batch"), (True, None))
        serve_ok, serve_first = self.startup_verdict(only_default, "batch")
        self.assertFalse(serve_ok)
        self.assertEqual(serve_first, ': partition "batch" is not defined (kubequota enforces it: --partition)')
        self.assertEqual(self.check_config(only_default, "batch"), (False, serve_first))
        # a serve enforcing batch: its webhook and validate-conf refuse a file without it
        self.kq.write_config(read(both))
        self.kq.extra_args += ["--partition", "batch", "--config-map", "%s/%s" % (CM_NS, CM_NAME)]
        self.kq.start()
        self.assertEqual(self.validate_conf(read(only_default)), (False, serve_first))
        self.assertEqual(self.webhook(read(only_default)), (False, serve_first))
        self.assertEqual(self.validate_conf(read(both)), (True, None))
        self.assertEqual(self.webhook(read(both)), (True, None))


def yunikorn_corpus():
    """(path, YuniKorn's verdict, kubequota's documented refusal or None) for every config of
    YuniKorn's own tests and docs in tests/data/config/yunikorn (each file names its source
    and YuniKorn's verdict as that test asserts it) and of examples/yunikorn (configurations
    from YuniKorn's code and docs, each naming its source: YuniKorn loads them)."""
    out = []
    d = os.path.join(DATA, "yunikorn")
    for f in sorted(os.listdir(d)):
        path = os.path.join(d, f)
        head = [ln for ln in read(path).splitlines() if ln.startswith("# ")]
        verdict = [ln[len("# yunikorn: "):] for ln in head if ln.startswith("# yunikorn: ")]
        differs = [ln[len("# kubequota: refused: "):] for ln in head if ln.startswith("# kubequota: refused: ")]
        assert verdict and verdict[0] in ("valid", "invalid"), path
        out.append((path, verdict[0], differs[0] if differs else None))
    ex = os.path.join(kqtest.REPO, "examples", "yunikorn")
    out += [(os.path.join(ex, f), "valid", None) for f in sorted(os.listdir(ex)) if f.endswith(".yaml")]
    return out


class YuniKornVerdictTest(KQTestCase):
    """Issue 27: check-config's verdict is YuniKorn's validator's (yunikorn-core
    pkg/common/configs ParseAndValidateConfig) on YuniKorn's own test configs
    (config_test.go, configvalidator_test.go TestCheckPlacementRules), the configs of its
    docs (yunikorn-site docs/api/cluster.md) and examples/yunikorn. Where kubequota refuses
    what YuniKorn's validator passes, the refusal is the one README "YuniKorn: configuration
    validation" documents, and its message says what YuniKorn does."""
    CONFIG = GOOD
    START = False

    def test_check_config_gives_yunikorns_verdicts(self):
        files = yunikorn_corpus()
        self.assertGreater(len(files), 70)
        readme = read(os.path.join(kqtest.REPO, "README.md"))
        section = readme.split("### YuniKorn: configuration validation", 1)[1].split("\n### ", 1)[0]
        differ = 0
        for path, verdict, refusal in files:
            name = os.path.relpath(path, kqtest.REPO)
            r = subprocess.run([binary(), "check-config", path], capture_output=True, text=True, errors="replace",
                               timeout=20)
            self.assertIn(r.returncode, (0, 1), "%s: %s" % (name, r.stderr))
            first = first_after(r.stderr, path)
            if refusal is None:
                self.assertEqual(r.returncode == 0, verdict == "valid", "%s: YuniKorn's verdict is %s, check-config "
                                 "says %s" % (name, verdict, first or "valid"))
                continue
            differ += 1
            self.assertEqual(verdict, "valid", name)
            self.assertEqual(r.returncode, 1, "%s: the documented refusal is gone; drop its kubequota line" % name)
            self.assertIn(refusal, first, name)
            self.assertIn(refusal.split(" (", 1)[0].split(" '", 1)[0], section,
                          "%s: README does not document this difference" % name)
        self.assertEqual(differ, 3, "the differences README documents: the empty config, two unknown rule names")


class MeteringOffByDefaultTest(KQTestCase):
    """Issue 14: metering runs only when asked (a --metering flag). Without one, nothing is
    priced or charged and the metering views answer 404; with one, they answer."""
    CONFIG = GOOD

    def test_metering_off_without_flags(self):
        self.assertEqual(self.kq.get("/ws/v1/partition/default/prices").status, 404)
        self.assertEqual(self.kq.get("/ws/v1/partition/default/charges?user=alice").status, 404)
        self.assertIn("event=metering_off", self.kq.logs())

    def test_metering_on_when_asked(self):
        self.kq.stop()
        self.kq.extra_args += ["--metering", "interval=0.2"]
        self.kq.start()
        self.assertEqual(self.kq.get("/ws/v1/partition/default/prices").status, 200)
        self.assertNotIn("event=metering_off", self.kq.logs().split("---- start #2")[-1])
