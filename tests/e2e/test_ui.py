"""The dashboard (issue 19): GET /ui/ serves a page embedded in the binary that reads the usage
view with the caller's credentials. Loaded in a real headless Chromium (Debian's `chromium`,
installed by scripts/chromium.sh; no browser is a failure, not a skip) over the DevTools
protocol (cdp.py): the page asks for a token, shows the users, groups, queues, quota tree and
charges kubequota counted, logs no console error, fits a 1366x768 laptop screen without
horizontal scrolling, and is photographed to build/ui/dashboard.png for review.

Expected texts are computed here from the pods' and limits' quantities (1500m cpu is "1.5",
1Gi is "1 GiB"), not read back from kubequota."""

import json
import os
import subprocess

import cdp
from kqtest import (REPO, HttpClient, KQTestCase, PARTITION, certs, parse_quantity, pod_manifest,
                    queues_config, wait_until)

CONFIG = queues_config(
    {"name": "default", "submitacl": "*"},
    {"name": "team-a", "submitacl": "*",
     "resources": {"guaranteed": {"vcore": "4"}, "max": {"vcore": "8"}},
     # the admission gate ranks team-a's users by their dominant share of what they run now
     "properties": {"kubequota.io/gating.policy": "usage", "kubequota.io/gating.halflife": "0"},
     "limits": [
         {"limit": "alice", "users": ["alice"], "maxresources": {"cpu": "3", "memory": "4Gi"},
          "maxapplications": 3},
         {"limit": "devs", "groups": ["devs"], "maxresources": {"cpu": "6"}}]},
    {"name": "team-b", "submitacl": "*",
     "resources": {"guaranteed": {"vcore": "4"}, "max": {"vcore": "8"}}},
)
PODS = [  # name, user, groups, queue, cpu, memory
    ("a1", "alice", ["devs"], "root.team-a", "1500m", "1Gi"),
    ("b1", "bob", [], "root.team-b", "2", "2560Mi"),
]
SHOTS = os.path.join(REPO, "build", "ui")
GATE = "kubequota.io/admission"
WAITING = "/ws/v1/partition/%s/gating/waiting" % PARTITION


def cores(q):
    """"1500m" -> "1.5", as a person reads cpu."""
    return ("%.3f" % float(parse_quantity(q))).rstrip("0").rstrip(".")


def binary_size(q):
    """"2560Mi" -> "2.5 GiB"."""
    v = float(parse_quantity(q))
    units = ["B", "KiB", "MiB", "GiB", "TiB"]
    i = 0
    while v >= 1024 and i < len(units) - 1:
        v /= 1024
        i += 1
    return ("%.2f" % v).rstrip("0").rstrip(".") + " " + units[i]


def chromium():
    r = subprocess.run(["bash", os.path.join(REPO, "scripts", "chromium.sh")], capture_output=True, text=True)
    if r.returncode != 0:
        raise AssertionError("no Chromium for the dashboard's browser test (scripts/chromium.sh):\n"
                             + r.stdout + r.stderr)
    return r.stdout.strip().splitlines()[-1]


# The page's rows as text: {section: [[cell texts]...]}, and what the page says about itself.
ROWS_JS = """(() => {
  const out = {};
  for (const id of ["users", "groups", "queues", "tree", "charges", "waiting"]) {
    out[id] = Array.from(document.querySelectorAll("#" + id + " tbody tr"))
      .map(tr => Array.from(tr.cells).map(td => td.textContent.trim()));
  }
  out.hidden = Object.fromEntries(["tree", "charges", "waiting", "auth"].map(
    s => [s, document.getElementById(s === "auth" ? "auth" : s + "-section").hidden]));
  out.scrollWidth = document.documentElement.scrollWidth;
  out.token = sessionStorage.getItem("kubequota.token");
  out.local = localStorage.length;
  return JSON.stringify(out);
})()"""


class DashboardTest(KQTestCase):
    CONFIG = CONFIG
    NODES = ()
    START = False

    def setUp(self):
        super().setUp()
        self.sim.world.add_node("node-1", cpu="16", memory="64Gi")
        self.kq.extra_args += ["--metering", "interval=0.2", "--metering", "min-runtime=0",
                               "--metering", "state-dir=%s" % os.path.join(self.kq.workdir, "state"),
                               "--admission-gate"]
        self.kq.start()
        for name, user, groups, queue, cpu, mem in PODS:
            self.create(name, user=user, groups=groups, queue=queue, cpu=cpu, memory=mem, app="app-" + name)
            self.assert_bound(name)
        self.wait_usage()
        # a pod that waits behind the admission gate: alice has 3 - 1.5 cpu left, it asks 2
        p = pod_manifest("w1", user="alice", groups=["devs"], queue="root.team-a", cpu="2", memory="1Gi",
                         app="app-w1", gates=(GATE,))
        self.sim.create_pod(p)
        self.waiting = wait_until(lambda: [x for q in self.kq.get_json(WAITING) for x in q["pods"]], 15, 0.1,
                                  "w1 to be listed as waiting")

    def test_page_files_and_headers(self):
        anon = HttpClient(self.kq.url, ca=certs()["ca"])  # no credentials at all
        # /ui redirects relatively (so that it also works behind the API server's service proxy)
        r = anon.get("/ui")
        self.assertEqual(r.status, 301, r.text)
        self.assertEqual(r.headers.get("Location"), "ui/")
        for name, ctype in (("", "text/html"), ("index.html", "text/html"), ("app.js", "text/javascript"),
                            ("app.css", "text/css"), ("favicon.svg", "image/svg+xml")):
            # the page holds no data: served without credentials
            r = anon.get("/ui/" + name)
            self.assertEqual(r.status, 200, name)
            self.assertTrue(r.headers.get("Content-Type", "").startswith(ctype), (name, r.headers))
            # byte for byte the files of src/serve/ui (embedded at build time)
            with open(os.path.join(REPO, "src", "serve", "ui", name or "index.html"), "rb") as f:
                self.assertEqual(r.body, f.read(), name)
            csp = r.headers.get("Content-Security-Policy", "")
            for d in ("default-src 'none'", "script-src 'self'", "style-src 'self'", "connect-src 'self'",
                      "frame-ancestors 'none'"):
                self.assertIn(d, csp, name)
            self.assertNotIn("unsafe", csp)
            self.assertNotIn("http", csp)  # no other origin
            self.assertEqual(r.headers.get("X-Content-Type-Options"), "nosniff")
            self.assertEqual(r.headers.get("Cache-Control"), "no-store")
        # nothing in the page loads from another host
        for name in ("index.html", "app.js", "app.css"):
            body = self.kq.get("/ui/" + name).text
            self.assertNotRegex(body, r"(src|href)=\"(https?:)?//", name)
            self.assertNotIn("<script>", body, name)  # no inline script (the CSP forbids it)
        self.assertEqual(anon.get("/ui/nope.js").status, 404)
        f = self.kq.get("/ui/features.json").json()
        self.assertEqual(f["partition"], PARTITION)
        self.assertIs(f["metering"], True)
        self.assertIn("/ws/v1/partition/*/usage/users", f["routes"])
        self.assertNotIn("/ws/v1/validate-conf", f["routes"])  # GET routes only
        # the data itself still needs credentials
        r = anon.get("/ws/v1/partition/%s/usage/users" % PARTITION)
        self.assertEqual(r.status, 401)

    def test_dashboard_in_chromium(self):
        path = chromium()
        # metering has charged both users something before the page is read
        charges = "/ws/v1/partition/%s/charges" % PARTITION
        wait_until(lambda: {u["name"] for u in self.kq.get_json(charges)["users"] if u["totalCredits"] > 0}
                   >= {"alice", "bob"}, 15, 0.1, "charges for alice and bob")
        b = cdp.Browser(path, width=1366, height=768)
        self.addCleanup(b.close)
        b.navigate(self.kq.url + "/ui")  # the redirect, as a person types it
        # without a token the page asks for one, after nothing but the view's 401 answers
        b.wait_for("document.body.dataset.state === 'auth'", what="the page to ask for a token")
        self.assertEqual(b.eval("location.pathname"), "/ui/")
        self.assertFalse(b.eval("document.getElementById('auth').hidden"))
        self.assertIn("credentials", b.eval("document.getElementById('auth-why').textContent"))
        b.pump(0.2)
        for kind, level, text, url in b.messages:
            if level in ("error", "warning"):
                self.assertEqual(kind, "log:network", (kind, level, text, url))
                self.assertIn("401", text)
                self.assertIn("/ws/v1/", url)
        b.messages.clear()

        # the token is typed into the page's form
        b.eval("document.getElementById('token').value = %s;"
               "document.getElementById('auth-form').requestSubmit(); true" % json.dumps(self.kq.rest_token))
        b.wait_for("document.body.dataset.state === 'ready'", what="the dashboard to load")
        page = json.loads(b.eval(ROWS_JS))
        self.assertEqual(page["token"], self.kq.rest_token)  # sessionStorage only
        self.assertEqual(page["local"], 0)
        self.assertTrue(page["hidden"]["auth"])

        # users: one row per queue with usage, limits as "used / max"
        users = {(r[0] or prev, r[1]): r for prev, r in self.rows_with_owner(page["users"])}
        a = users[("alice", "root.team-a")]
        self.assertEqual(a[2], "%s / %s" % (cores("1500m"), cores("3")))
        self.assertEqual(a[3], "%s / %s" % (binary_size("1Gi"), binary_size("4Gi")))
        self.assertEqual(a[4], "1")            # pods
        self.assertEqual(a[6], "1 / 3")        # applications against maxapplications
        bob = users[("bob", "root.team-b")]
        self.assertEqual(bob[2], cores("2"))   # no limit: the number alone
        self.assertEqual(bob[3], binary_size("2560Mi"))
        self.assertEqual(users[("alice", "root")][2], cores("1500m"))
        # groups: devs against its own limit, with its users
        groups = {(r[0] or prev, r[1]): r for prev, r in self.rows_with_owner(page["groups"])}
        d = groups[("devs", "root.team-a")]
        self.assertEqual(d[2], "%s / %s" % (cores("1500m"), cores("6")))
        self.assertEqual(groups[("devs", "root")][7], "alice")
        # queues: allocated against the queue's max, the guaranteed share
        queues = {r[0]: r for r in page["queues"]}
        self.assertEqual(queues["team-a"][1], "%s / %s" % (cores("1500m"), cores("8")))
        self.assertEqual(queues["team-b"][1], "%s / %s" % (cores("2"), cores("8")))
        self.assertEqual(queues["team-a"][5], "cpu " + cores("4"))
        self.assertEqual(queues["root"][1], cores("3500m"))
        self.assertEqual(queues["root"][2], binary_size("3584Mi"))
        # the elastic quota tree: used against runtime, min and max
        self.assertFalse(page["hidden"]["tree"])
        tree = {r[0]: r for r in page["tree"]}
        ta = tree["root.team-a"]
        self.assertTrue(ta[1].startswith(cores("1500m") + " / "), ta)
        self.assertEqual((ta[2], ta[3]), (cores("4"), cores("8")))
        self.assertTrue(tree["root.team-b"][1].startswith(cores("2") + " / "))
        # charges: metering is on, both users were charged (amounts are the view's own)
        self.assertFalse(page["hidden"]["charges"])
        charged = {r[1]: float(r[2]) for r in page["charges"]}
        self.assertGreater(charged["alice"], 0)
        self.assertGreater(charged["bob"], 0)
        # waiting pods (the admission gate's route): alice's w1 with the gate's own reason
        self.assertFalse(page["hidden"]["waiting"])
        w = [r for r in page["waiting"] if r[2] == "default/w1"]
        self.assertEqual(len(w), 1, page["waiting"])
        self.assertEqual((w[0][0], w[0][1], w[0][3]), ("root.team-a", "1", "alice"))
        self.assertEqual(w[0][7], self.waiting[0]["reason"])
        self.assertIn("alice", w[0][7])
        # the usage policy's share: alice runs 1.5 of team-a's 8 cpu (memory is not capped)
        self.assertEqual(w[0][6], "%.1f%%" % (100 * 1.5 / 8))
        # a laptop screen: nothing wider than the window
        self.assertLessEqual(page["scrollWidth"], 1366)

        # the token survives a reload of the tab (sessionStorage), and refresh works
        b.navigate(self.kq.url + "/ui/")
        b.wait_for("document.body.dataset.state === 'ready'", what="the reloaded dashboard")
        b.eval("document.getElementById('refresh').click(); true")
        b.wait_for("document.body.dataset.loads === '2'", what="a second load after Refresh")

        b.pump(0.3)
        bad = [m for m in b.messages if m[1] in ("error", "warning")]
        self.assertEqual(bad, [], "console errors or warnings on the dashboard")
        b.screenshot(os.path.join(SHOTS, "dashboard.png"))
        png = b.screenshot(os.path.join(SHOTS, "dashboard-full.png"), full_page=True)
        self.assertEqual(png[:8], b"\x89PNG\r\n\x1a\n")

    def test_dashboard_behind_the_service_proxy(self):
        """The page at the API server's service proxy path (as `kubectl proxy` serves it): its
        relative URLs stay under the proxy, and the token it sends in
        X-Kubequota-Authorization reaches kubequota, which the proxy's dropped Authorization
        would not."""
        path = chromium()
        self.sim.sim.proxy_services = {"kubequota-system/kubequota:443": "127.0.0.1:%d" % self.kq.port}
        self.sim.sim.review_tokens = {"user-token": {"username": "viewer"}, self.kq.rest_token: {"username": "ops"}}
        b = cdp.Browser(path, width=1366, height=768)
        self.addCleanup(b.close)
        b.call("Network.enable")
        # the browser authenticates to the API server (kubectl proxy would add this)
        b.call("Network.setExtraHTTPHeaders", {"headers": {"Authorization": "Bearer user-token"}})
        base = self.sim.url + "/api/v1/namespaces/kubequota-system/services/https:kubequota:443/proxy/"
        before = self.sim.state()["counters"].get("proxied", 0)
        b.navigate(base + "ui")
        b.wait_for("document.body && document.body.dataset.state === 'auth'", what="the page to ask for a token")
        self.assertEqual(b.eval("location.href"), base + "ui/")
        b.eval("document.getElementById('token').value = %s;"
               "document.getElementById('auth-form').requestSubmit(); true" % json.dumps(self.kq.rest_token))
        b.wait_for("document.body.dataset.state === 'ready'", what="the dashboard through the proxy")
        page = json.loads(b.eval(ROWS_JS))
        self.assertIn(["alice", "root"], [r[:2] for r in page["users"]])
        # every request went through the proxy: page, script, style, features and the view
        self.assertGreaterEqual(self.sim.state()["counters"]["proxied"] - before, 8)

    @staticmethod
    def rows_with_owner(rows):
        """(owner of the row, row): an owner's name is written on its first row only."""
        owner = ""
        for r in rows:
            owner = r[0] or owner
            yield owner, r
