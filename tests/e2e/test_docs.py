"""docs/ is the reference: every flag, metering key, metric, endpoint, environment variable and
Event reason that exists in the code must be documented there. Each failure names the thing and
the page (and table) to add it to, so whoever adds a flag, a route or a metric knows what to do.

The lists are read from the code itself, not from a copy: flags from `kubequota serve --help` and
`check-config --help` (generated from main.c's flag table), routes from src/serve/server.c's routing
table, metrics from the golden list that tests/e2e/test_operability.py checks against /metrics and
from the metric names in src/*.c, environment variables from scripts/*.sh, the Makefile and getenv()
calls, Event reasons from src/serve/extender.c and src/control/elastic.c."""

import glob
import os
import re
import subprocess
import unittest

from kqtest import binary, have_binary

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOCS = os.path.join(REPO, "docs")


def read(*parts):
    with open(os.path.join(REPO, *parts), encoding="utf-8") as f:
        return f.read()


def help_text(*cmd):
    r = subprocess.run([binary()] + list(cmd) + ["--help"], capture_output=True, text=True, timeout=10)
    assert r.returncode == 0, "%s --help exited %d: %s" % (" ".join(cmd), r.returncode, r.stderr)
    return r.stdout


def missing(names, page, how):
    text = read("docs", page)
    gone = sorted(n for n in names if not how(n, text))
    return gone


class DocsTest(unittest.TestCase):
    def test_every_flag_and_metering_key_is_in_cli_md(self):
        if not have_binary():
            self.skipTest("%s not built" % binary())
        serve = help_text("serve")
        flags = set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", serve))
        flags |= set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", help_text("check-config")))
        self.assertGreater(len(flags), 40, "the flag parser lost the help text")
        gone = missing(flags, "cli.md", lambda f, t: re.search(r"`%s[ `=]" % re.escape(f), t))
        self.assertEqual(gone, [], "flags in `kubequota serve --help` / `check-config --help` but not in "
                                   "docs/cli.md: add a row (`--flag ARG` | default | meaning) to the table of "
                                   "its section there (a renamed flag: its old name in the 'old name' column)")
        section = serve.split("metering keys", 1)[1] if "metering keys" in serve else ""
        keys = set(re.findall(r"(?<![\w-])([a-z][a-z-]*)=", section))
        self.assertGreater(len(keys), 8, "the metering key list was not found in serve --help")
        gone = missing(keys, "cli.md", lambda k, t: "`%s=" % k in t)
        self.assertEqual(gone, [], "metering keys in `serve --help` but not in docs/cli.md: add a row "
                                   "(`key=VALUE` | default | meaning) to its Metering table")

    def test_plugin_defaults_match_cli_md_and_the_chart(self):
        """The plugin's defaults (`kubequota kubectl --help`, generated from the code) are the
        ones docs/cli.md's plugin table gives, and its Service name and port are the chart's
        (a release named kubequota): a newcomer's `kubectl kubequota usage` finds kubequota."""
        if not have_binary():
            self.skipTest("%s not built" % binary())
        out = subprocess.run([binary(), "kubectl", "--help"], capture_output=True, text=True, timeout=10).stdout
        defaults = dict(re.findall(r"^\s+(--kubequota-[a-z]+|--partition) \S+\s.*\(default (\S+?)\)$", out, re.M))
        self.assertEqual(set(defaults), {"--kubequota-namespace", "--kubequota-service", "--kubequota-port",
                                         "--partition"}, out)
        cli = read("docs", "cli.md")
        for flag, value in defaults.items():
            self.assertRegex(cli, r"\| `%s [A-Z]+` \| `%s` \|" % (re.escape(flag), re.escape(value)),
                             "docs/cli.md's plugin table: %s defaults to %s" % (flag, value))
        values = read("charts", "kubequota", "values.yaml")
        port = re.search(r"^service:\n(?:  .*\n)*?  port: (\d+)", values, re.M).group(1)
        self.assertEqual(defaults["--kubequota-port"], port, "the plugin's port is the chart's service.port")
        self.assertEqual(defaults["--kubequota-service"], "kubequota", "a release named kubequota's Service")

    def test_every_metric_is_in_metrics_md(self):
        names = set()
        for line in read("tests", "e2e", "metrics_golden.txt").splitlines():
            line = line.split("#", 1)[0].strip()
            if line:
                names.add(line.split()[0])
        for path in glob.glob(os.path.join(REPO, "src", "**", "*.c"), recursive=True):
            with open(path, encoding="utf-8") as f:
                for n in re.findall(r'"(?:# (?:HELP|TYPE) )?((?:kubequota|process)_[a-z0-9_]+)', f.read()):
                    for suffix in ("_bucket", "_sum", "_count"):
                        if n.endswith(suffix) and n[:-len(suffix)] in names:
                            n = n[:-len(suffix)]
                    names.add(n)
        self.assertGreater(len(names), 30)
        gone = missing(names, "metrics.md", lambda n, t: "`%s`" % n in t)
        self.assertEqual(gone, [], "metrics served by the code but not in docs/metrics.md: add a row "
                                   "(`name` | type | labels | meaning, unit) to the table of its section, and "
                                   "the family to tests/e2e/metrics_golden.txt")

    def test_every_endpoint_is_in_endpoints_md(self):
        src = read("src", "serve", "server.c")
        m = re.search(r"static const route_t routes\[\] = \{(.*?)\n\};", src, re.S)
        self.assertIsNotNone(m, "src/serve/server.c: routing table `static const route_t routes[]` not found")
        routes = set(re.findall(r'\{\s*"([A-Z]+)"\s*,\s*"([^"]+)"', m.group(1)))
        self.assertGreater(len(routes), 20)
        text = read("docs", "endpoints.md")
        gone = []
        for method, path in sorted(routes):
            rx = re.escape(method + " ") + "/".join(r"\{[^}/]+\}" if seg == "*" else re.escape(seg)
                                                   for seg in path.split("/")) + r"[`\s?]"
            if not re.search(rx, text):
                gone.append("%s %s" % (method, path))
        self.assertEqual(gone, [], "routes in src/serve/server.c but not in docs/endpoints.md: add a row "
                                   "(`METHOD /path/{param}` | what) to its section (a * segment is written "
                                   "as {name})")

    def test_every_environment_variable_is_in_cli_md(self):
        names = set()
        for path in glob.glob(os.path.join(REPO, "scripts", "*.sh")):
            with open(path, encoding="utf-8") as f:
                names |= set(re.findall(r"\$\{?(KQ_[A-Z0-9_]+)", f.read()))
        names |= set(re.findall(r"(?m)^(KQ_[A-Z0-9_]+)\s*\?=", read("Makefile")))
        for path in glob.glob(os.path.join(REPO, "src", "**", "*.c"), recursive=True):
            with open(path, encoding="utf-8") as f:
                names |= set(re.findall(r'getenv\("([A-Z0-9_]+)"\)', f.read()))
        self.assertIn("KQ_LISTEN", names)
        gone = missing(names, "cli.md", lambda n, t: "`%s`" % n in t)
        self.assertEqual(gone, [], "environment variables read by scripts/, the Makefile or src/ but not in "
                                   "docs/cli.md: add a row to its 'Environment variables' table")

    def test_every_event_reason_is_in_events_md(self):
        reasons = set(re.findall(r'\{"([A-Z][A-Za-z]+)", "[a-z_]+"\}', read("src", "serve", "extender.c")))
        reasons |= set(re.findall(r'"(?:Warning|Normal)",\s*"([A-Z][A-Za-z]+)"', read("src", "serve", "extender.c")))
        reasons |= set(re.findall(r'"(QuotaAdmitted|Reclaimed)"', read("src", "serve", "extender.c") + read("src", "control", "elastic.c")))
        reasons |= set(re.findall(r'KQ_GATING_EVENT_REASON "([A-Za-z]+)"',
                                  read("include", "kubequota", "control", "gating.h")))
        self.assertGreater(len(reasons), 6)
        gone = missing(reasons, "events.md", lambda n, t: "`%s`" % n in t)
        self.assertEqual(gone, [], "Event reasons the code posts but not in docs/events.md: add a row to "
                                   "its Reasons table")

    def test_readme_links_every_page(self):
        readme = read("README.md")
        for page in sorted(os.listdir(DOCS)):
            if page.endswith(".md"):
                link = "docs/%s" % page if page != "README.md" else "docs/"
                self.assertTrue("(%s)" % link in readme or "(%s" % link in readme,
                                "README.md should link %s (its reference section)" % link)
