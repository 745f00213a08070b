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
    # one application at most: carol's c1 fills it (a queue at its max)
    {"name": "team-c", "submitacl": "*", "maxapplications": 1, "resources": {"max": {"vcore": "4"}}},
)
PODS = [  # name, user, groups, queue, cpu, memory
    ("a1", "alice", ["devs"], "root.team-a", "1500m", "1Gi"),
    ("b1", "bob", [], "root.team-b", "2", "2560Mi"),
    ("c1", "carol", [], "root.team-c", "500m", "512Mi"),
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


# Where things are: the summary tiles' texts, the visible sections in document order with
# their tops, the page's and the viewport's widths, every element that scrolls on its own
# (overflow auto or scroll, form controls aside) and every element wider than the viewport.
LAYOUT_JS = """(() => {
  const tile = id => [document.getElementById("sum-" + id).textContent.trim(),
                      document.getElementById("sum-" + id + "-note").textContent.trim()];
  const secs = Array.from(document.querySelectorAll("main > section")).filter(s => !s.hidden);
  const vw = document.documentElement.clientWidth;
  const all = Array.from(document.querySelectorAll("body *"));
  const scrollers = all.filter(e => !["SELECT", "INPUT", "OPTION", "OPTGROUP"].includes(e.tagName))
    .filter(e => { const c = getComputedStyle(e);
                   return ["auto", "scroll"].includes(c.overflowX) || ["auto", "scroll"].includes(c.overflowY); })
    .map(e => e.tagName + "#" + e.id + "." + e.className);
  const wide = all.filter(e => e.getClientRects().length && e.getBoundingClientRect().right > vw + 0.5)
    .map(e => e.tagName + "#" + e.id + "." + (e.className.baseVal !== undefined ? e.className.baseVal : e.className));
  const td = document.querySelector("#queues tbody tr td:last-child");
  return JSON.stringify({
    tiles: {waiting: tile("waiting"), denials: tile("denials"), full: tile("full")},
    order: secs.map(s => s.id), tops: secs.map(s => s.getBoundingClientRect().top + window.scrollY),
    scrollWidth: document.documentElement.scrollWidth, clientWidth: vw,
    scrollers: scrollers, wide: wide.slice(0, 10),
    cardCell: {display: getComputedStyle(td).display, label: td.dataset.label},
  });
})()"""

# The usage-over-time chart: the series shown, the points of each resource's line, captions.
CHART_JS = """(() => {
  const figs = Array.from(document.querySelectorAll("#history figure"));
  const points = {}, captions = {}, limits = {};
  for (const f of figs) {
    points[f.dataset.resource] = f.querySelector("polyline").getAttribute("points").trim().split(/\\s+/).length;
    captions[f.dataset.resource] = f.querySelector("figcaption").textContent;
    limits[f.dataset.resource] = f.querySelectorAll("line.limit").length;
  }
  return JSON.stringify({series: document.getElementById("history").dataset.series, points: points,
                         captions: captions, limits: limits});
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
                               "--admission-gate", "--history-interval", "100ms"]
        self.kq.start()
        for name, user, groups, queue, cpu, mem in PODS:
            self.create(name, user=user, groups=groups, queue=queue, cpu=cpu, memory=mem, app="app-" + name)
            self.assert_bound(name)
        self.wait_usage()
        # a pod that waits behind the admission gate: alice has 3 - 1.5 cpu left, it asks 2
        p = pod_manifest("w1", user="alice", groups=["devs"], queue="root.team-a", cpu="2", memory="1Gi",
                         app="app-w1", gates=(GATE,))
        self.sim.create_pod(p)
        # and one that never fits: 9 cpu in team-b, whose max is 8
        p = pod_manifest("w2", user="bob", queue="root.team-b", cpu="9", memory="1Gi", app="app-w2", gates=(GATE,))
        self.sim.create_pod(p)
        self.waiting = wait_until(lambda: (lambda ps: ps if {x["name"] for x in ps} == {"w1", "w2"} and
                                           any(x["neverFits"] for x in ps) else None)(
                                               [x for q in self.kq.get_json(WAITING) for x in q["pods"]]), 15, 0.1,
                                  "w1 to wait and w2 to be set aside as never fitting")
        # d1 (not gated) is refused by the filter twice: bob runs 2 of team-b's 8 cpu and asks 7
        self.create("d1", user="bob", queue="root.team-b", cpu="7", memory="1Gi", app="app-d1")
        self.assert_denied("d1")
        self.assert_denied("d1")

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
        self.assertEqual((f["history"], f["gate"]), (True, True))
        self.assertIn("/ws/v1/partition/*/history/user/*", f["routes"])
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
        self.assertEqual(queues["root"][1], cores("4"))           # 1.5 + 2 + 0.5
        self.assertEqual(queues["root"][2], binary_size("4Gi"))   # 1Gi + 2560Mi + 512Mi
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
        self.assertEqual(w[0][7], [x for x in self.waiting if x["name"] == "w1"][0]["reason"])
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

    def test_summary_first_and_fits_a_laptop_and_a_phone(self):
        """Issue 28: the summary tiles come first with numbers counted by hand from the
        scenario, waiting pods before the big tables, no table in its own scroll box, no
        sideways scroll and the token button on screen at 1366x768 and at 390x844 (where the
        tables become stacked cards), queues show maxapplications, and the usage-over-time
        chart has one point per sample kept."""
        path = chromium()
        hist = "/ws/v1/partition/%s/history" % PARTITION
        # every series below has been sampled a whole window (KQ_HISTORY_POINTS = 60 samples)
        for kind, name in (("queue", "root.team-a"), ("user", "alice")):
            wait_until(lambda: len(self.kq.get_json("%s/%s/%s" % (hist, kind, name))["points"]) == 60, 30, 0.2,
                       "60 samples of %s %s" % (kind, name))
        never = [p for q in self.kq.get_json(WAITING) for p in q["pods"] if p["name"] == "w2"][0]
        self.assertTrue(never["neverFits"])
        for width, height in ((1366, 768), (390, 844)):
            with self.subTest(viewport="%dx%d" % (width, height)):
                b = cdp.Browser(path, width=width, height=height)
                self.addCleanup(b.close)
                b.navigate(self.kq.url + "/ui/")
                b.wait_for("document.body.dataset.state === 'auth'", what="the page to ask for a token")
                # the prompt says where a token comes from
                help_text = b.eval("document.getElementById('token-help').textContent")
                self.assertIn("kubectl -n kubequota-system create token", help_text)
                self.assertIn("--rest-token-file", help_text)
                self.assertIn("kubeconfig", help_text)
                self.assert_on_screen(b, "token-toggle", width, height)
                self.assert_on_screen(b, "token", width, height)
                b.pump(0.2)
                b.messages.clear()  # the view's 401 answers before a token (test_dashboard_in_chromium)
                b.eval("document.getElementById('token').value = %s;"
                       "document.getElementById('auth-form').requestSubmit(); true" % json.dumps(self.kq.rest_token))
                b.wait_for("document.body.dataset.state === 'ready' && "
                           "!!document.querySelector('#history figure')", what="the dashboard and its chart")
                lay = json.loads(b.eval(LAYOUT_JS))
                # summary: w1 and w2 wait (w2 never fits), d1 was denied twice, team-c runs
                # its one allowed application
                self.assertEqual(lay["tiles"]["waiting"], ["2", "1 never fits as asked"])
                self.assertEqual(lay["tiles"]["denials"][0], "2")
                self.assertEqual(lay["tiles"]["full"], ["1", "root.team-c"])
                # order: summary, waiting pods, usage over time, then the big tables
                self.assertEqual(lay["order"], ["summary-section", "waiting-section", "history-section",
                                                "queues-section", "users-section", "groups-section",
                                                "tree-section", "charges-section"])
                self.assertEqual(lay["tops"], sorted(lay["tops"]))
                self.assertLess(lay["tops"][0], height)  # the summary is on the first screen
                # nothing scrolls sideways, nothing scrolls inside the page
                self.assertLessEqual(lay["scrollWidth"], lay["clientWidth"])
                self.assertEqual(lay["scrollers"], [])
                self.assertEqual(lay["wide"], [])
                self.assert_on_screen(b, "token-toggle", width, height)
                # waiting pods: w2 says it never fits, with the gate's reason naming the limit
                page = json.loads(b.eval(ROWS_JS))
                w2 = [r for r in page["waiting"] if r[2] == "default/w2"]
                self.assertEqual(len(w2), 1, page["waiting"])
                self.assertEqual(w2[0][1], "never fits")
                self.assertEqual(w2[0][7], never["reason"])
                self.assertTrue(w2[0][7].startswith("never fits: queue root.team-b"), w2[0][7])
                # queues show running applications against maxapplications
                queues = {r[0]: r for r in page["queues"]}
                self.assertEqual(queues["team-c"][7], "1 / 1")
                self.assertEqual(queues["team-a"][7], "1")
                # phone: the rows are stacked cards, each value headed by its column
                if width <= 1000:
                    self.assertEqual(lay["cardCell"], {"display": "flex", "label": "applications"})
                # the chart of the busiest queue below root: 60 samples, latest 1.5 cpu
                chart = json.loads(b.eval(CHART_JS))
                self.assertEqual(chart["series"], "queue:root.team-a")
                self.assertEqual(chart["points"], {"cpu": 60, "memory": 60, "pods": 60})
                self.assertIn("now " + cores("1500m") + ",", chart["captions"]["cpu"])
                self.assertIn("now " + binary_size("1Gi") + ",", chart["captions"]["memory"])
                # team-a's max (8 cpu) is drawn as a line; it has no memory max
                self.assertTrue(chart["captions"]["cpu"].endswith(", max " + cores("8")), chart["captions"])
                self.assertEqual(chart["limits"], {"cpu": 1, "memory": 0, "pods": 0})
                b.eval("document.getElementById('history-section').scrollIntoView(); true")
                b.screenshot(os.path.join(SHOTS, "dashboard-%dx%d-history.png" % (width, height)))
                # another series is one choice away: alice's
                b.eval("const s = document.getElementById('history-select'); s.value = 'user:alice';"
                       "s.dispatchEvent(new Event('change')); true")
                b.wait_for("document.getElementById('history').dataset.series === 'user:alice'",
                           what="alice's chart")
                chart = json.loads(b.eval(CHART_JS))
                self.assertEqual(chart["points"], {"cpu": 60, "memory": 60, "pods": 60})
                self.assertIn("now " + cores("1500m") + ",", chart["captions"]["cpu"])
                lay = json.loads(b.eval(LAYOUT_JS))
                self.assertLessEqual(lay["scrollWidth"], lay["clientWidth"])
                b.pump(0.2)
                bad = [m for m in b.messages if m[1] in ("error", "warning")]
                self.assertEqual(bad, [], "console errors or warnings on the dashboard")
                b.eval("window.scrollTo(0, 0); true")
                b.screenshot(os.path.join(SHOTS, "dashboard-%dx%d.png" % (width, height)))
                b.screenshot(os.path.join(SHOTS, "dashboard-%dx%d-full.png" % (width, height)), full_page=True)
                b.close()

    def test_history_endpoint(self):
        """The history routes need the usage view's credentials and answer what was sampled."""
        anon = HttpClient(self.kq.url, ca=certs()["ca"])
        hist = "/ws/v1/partition/%s/history" % PARTITION
        for path in ("", "/queue/root.team-a", "/user/alice"):
            self.assertEqual(anon.get(hist + path).status, 401, path)
        s = wait_until(lambda: (lambda x: x if "carol" in x["users"] else None)(self.kq.get_json(hist)), 15, 0.1,
                       "carol's series")
        self.assertEqual((s["intervalSeconds"], s["points"], s["maxSeries"]), (0.1, 60, 256))
        self.assertEqual(s["windowSeconds"], 6.0)
        self.assertEqual(s["denialsLastHour"], 2)
        self.assertEqual(s["seriesDropped"], 0)
        # every queue; the users who used something (bob's d1 was never counted, but b1 is)
        self.assertEqual(s["queues"], ["root", "root.default", "root.team-a", "root.team-b", "root.team-c"])
        self.assertEqual(s["users"], ["alice", "bob", "carol"])
        c = self.kq.get_json(hist + "/user/carol")
        last = c["points"][-1]
        self.assertEqual((last["vcore"], last["memory"], last["pods"]), (500, 512 * 2 ** 20, 1))
        times = [p["time"] for p in c["points"]]
        self.assertEqual(times, sorted(times))
        self.assertEqual(self.kq.get("%s/queue/%s" % (hist, "root.nope")).status, 404)
        self.assertEqual(self.kq.get("/ws/v1/partition/other/history").status, 404)

    def test_hostile_names_stay_text(self):
        """A user name made of markup reaches the summary, the tables, the history menu and
        its chart as text: no element is made from it and no script of it runs."""
        evil = '<img src=x onerror="document.body.dataset.pwned=1">'
        self.create("x1", user=evil, queue="root.team-b", cpu="100m", memory="64Mi", app="app-x1")
        self.assert_bound("x1")
        hist = "/ws/v1/partition/%s/history" % PARTITION
        wait_until(lambda: evil in self.kq.get_json(hist)["users"], 15, 0.1, "the hostile user's series")
        b = cdp.Browser(chromium(), width=1366, height=768)
        self.addCleanup(b.close)
        b.navigate(self.kq.url + "/ui/")
        b.wait_for("document.body.dataset.state === 'auth'", what="the page to ask for a token")
        b.eval("document.getElementById('token').value = %s;"
               "document.getElementById('auth-form').requestSubmit(); true" % json.dumps(self.kq.rest_token))
        b.wait_for("document.body.dataset.state === 'ready' && !!document.querySelector('#history figure')",
                   what="the dashboard")
        b.eval("const s = document.getElementById('history-select'); s.value = %s;"
               "s.dispatchEvent(new Event('change')); true" % json.dumps("user:" + evil))
        b.wait_for("document.getElementById('history').dataset.series === %s" % json.dumps("user:" + evil),
                   what="the hostile user's chart")
        b.pump(0.3)
        self.assertEqual(b.eval("document.querySelectorAll('img').length"), 0)
        self.assertIsNone(b.eval("document.body.dataset.pwned || null"))
        self.assertIn(evil, b.eval("Array.from(document.querySelectorAll('#history-select option'))"
                                   ".map(o => o.textContent).join('|')"))
        self.assertIn(evil, b.eval("document.getElementById('users').textContent"))

    def assert_on_screen(self, b, element_id, width, height):
        r = json.loads(b.eval("JSON.stringify(document.getElementById(%s).getBoundingClientRect())"
                              % json.dumps(element_id)))
        self.assertGreaterEqual(r["left"], 0, element_id)
        self.assertGreaterEqual(r["top"], 0, element_id)
        self.assertLessEqual(r["right"], width, element_id)
        self.assertLessEqual(r["bottom"], height, element_id)
        self.assertGreater(r["width"], 0, element_id)

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


class DashboardWithoutHistoryTest(KQTestCase):
    """--history-interval 0 and no admission gate: the history routes answer 404,
    features.json says so, and the page neither asks for them nor shows a chart; the denials
    and waiting tiles say what is off instead of showing a 0 that would mean "none"."""
    CONFIG = CONFIG
    EXTRA_ARGS = ("--history-interval", "0")

    def test_no_chart_and_no_request_for_one(self):
        hist = "/ws/v1/partition/%s/history" % PARTITION
        for path in ("", "/queue/root", "/user/alice"):
            r = self.kq.get(hist + path)
            self.assertEqual(r.status, 404, path)
            self.assertIn("--history-interval 0", r.text)
        f = self.kq.get("/ui/features.json").json()
        self.assertEqual((f["history"], f["gate"]), (False, False))
        self.create("c1", user="carol", queue="root.team-c", cpu="500m", memory="512Mi", app="app-c1")
        self.assert_bound("c1")
        self.wait_usage()
        b = cdp.Browser(chromium(), width=390, height=844)
        self.addCleanup(b.close)
        b.navigate(self.kq.url + "/ui/")
        b.wait_for("document.body.dataset.state === 'auth'", what="the page to ask for a token")
        b.pump(0.2)
        b.messages.clear()
        b.eval("document.getElementById('token').value = %s;"
               "document.getElementById('auth-form').requestSubmit(); true" % json.dumps(self.kq.rest_token))
        b.wait_for("document.body.dataset.state === 'ready'", what="the dashboard")
        lay = json.loads(b.eval(LAYOUT_JS))
        self.assertNotIn("history-section", lay["order"])
        self.assertEqual(lay["tiles"]["denials"], ["–", "usage history is off"])
        self.assertEqual(lay["tiles"]["waiting"], ["–", "admission gate off: kubectl kubequota why POD"])
        self.assertIn("admission gate is off", b.eval("document.getElementById('waiting').textContent"))
        self.assertEqual(lay["tiles"]["full"], ["1", "root.team-c"])
        self.assertLessEqual(lay["scrollWidth"], lay["clientWidth"])
        b.pump(0.2)
        self.assertEqual([m for m in b.messages if m[1] in ("error", "warning")], [])


# DRA (issue 39): resource names with dots and a slash, as Kubernetes' ResourceQuota names a
# device class's devices and the counters of partitionable devices (docs/dra.md).
DEV = "gpu.example.com.deviceclass.resource.k8s.io/devices"
DEV_MEM = "gpu.example.com.deviceclass.resource.k8s.io/memory"

# Every element that shows one resource (data-resource) and what it says, looked up by its
# name through a CSS attribute selector built from the name (CSS.escape), as a stylesheet or
# a test would find it; and the layout checks of LAYOUT_JS.
RES_JS = """((names) => JSON.stringify(Object.fromEntries(names.map(n => [n,
  Array.from(document.querySelectorAll('[data-resource="' + CSS.escape(n) + '"]')).map(e => {
    const tr = e.closest("tr"), sec = e.closest("section");
    return [sec ? sec.id : "", tr ? tr.cells[0].textContent.trim() : "", tr ? tr.cells[1].textContent.trim() : "",
            e.textContent.trim()];
  })]))))"""


class DashboardDraTest(KQTestCase):
    """The dashboard with DRA device resources: a user's devices against its limit, a queue's
    devices and a counter of partitionable devices (bytes) against the queue's max, in the
    users and queues tables, found by their names, on a laptop and on a phone, without a
    sideways scroll or a console error."""
    CONFIG = queues_config(
        {"name": "default", "submitacl": "*"},
        {"name": "gpu", "submitacl": "*", "resources": {"max": {"vcore": "8", DEV: "4", DEV_MEM: "80Gi"}},
         "limits": [{"limit": "alice's devices", "users": ["alice"], "maxresources": {DEV: "2"}}]})

    def test_device_resources_in_chromium(self):
        path = chromium()
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
        wait_until(lambda: '"%s"' % DEV in self.kq.get("/ws/v1/partition/%s/usage/users" % PARTITION).text, 10,
                   0.1, "alice charged the device")
        for width, height in ((1366, 768), (390, 844)):
            with self.subTest(viewport="%dx%d" % (width, height)):
                b = cdp.Browser(path, width=width, height=height)
                self.addCleanup(b.close)
                b.navigate(self.kq.url + "/ui/")
                b.wait_for("document.body.dataset.state === 'auth'", what="the page to ask for a token")
                b.pump(0.2)
                b.messages.clear()  # the view's 401 answers before a token
                b.eval("document.getElementById('token').value = %s;"
                       "document.getElementById('auth-form').requestSubmit(); true" % json.dumps(self.kq.rest_token))
                b.wait_for("document.body.dataset.state === 'ready'", what="the dashboard")
                res = json.loads(b.eval("%s(%s)" % (RES_JS, json.dumps([DEV, DEV_MEM]))))
                # alice in root.gpu: 1 device of her 2 (only a user's first row names the
                # user); the queue: 1 of 4, and 0 of its 80Gi counter, in bytes as memory is
                self.assertIn(["users-section", "", "root.gpu", "1 / 2"], res[DEV], res)
                self.assertIn(["queues-section", "gpu", cores("500m") + " / " + cores("8"), "1 / 4"], res[DEV], res)
                self.assertIn(["queues-section", "gpu", cores("500m") + " / " + cores("8"),
                               "0 / " + binary_size("80Gi")], res[DEV_MEM], res)
                lay = json.loads(b.eval(LAYOUT_JS))
                self.assertLessEqual(lay["scrollWidth"], lay["clientWidth"])
                self.assertEqual(lay["wide"], [])
                b.pump(0.2)
                bad = [m for m in b.messages if m[1] in ("error", "warning")]
                self.assertEqual(bad, [], "console errors or warnings on the dashboard")
                b.screenshot(os.path.join(SHOTS, "dashboard-dra-%dx%d-full.png" % (width, height)), full_page=True)
                b.close()
