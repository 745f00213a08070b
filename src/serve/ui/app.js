/* kubequota dashboard. Reads the usage view (/ws/v1) of the kubequota that served this page,
 * with the caller's credentials: a client certificate the browser presents, or a bearer token
 * entered here and kept in sessionStorage (this tab only). Everything is built with DOM calls
 * and textContent (names come from pods: never parsed as HTML). URLs are relative to the
 * page, so it also works behind the API server's service proxy
 * (/api/v1/namespaces/NS/services/https:kubequota:443/proxy/ui/). */
"use strict";

(function () {
  var TOKEN_KEY = "kubequota.token";
  var REFRESH_MS = 15000;
  // "/ui/" -> "/", ".../proxy/ui/" -> ".../proxy/"
  var base = window.location.pathname.replace(/ui\/[^/]*$/, "");
  var timer = null;
  var loads = 0;

  function $(id) { return document.getElementById(id); }

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }

  function token() {
    try { return window.sessionStorage.getItem(TOKEN_KEY) || ""; } catch (e) { return ""; }
  }

  function setToken(t) {
    try {
      if (t) window.sessionStorage.setItem(TOKEN_KEY, t);
      else window.sessionStorage.removeItem(TOKEN_KEY);
    } catch (e) { /* storage disabled: the token lives until the page is left */ }
  }

  function AuthError(status, message) { this.status = status; this.message = message; }
  function HttpError(path, status, message) { this.path = path; this.status = status; this.message = message; }

  /* GET base+path as JSON. 401/403 -> AuthError; other errors -> HttpError. */
  function get(path) {
    var headers = { "Accept": "application/json" };
    var t = token();
    if (t) {
      headers["Authorization"] = "Bearer " + t;
      // the API server's service proxy (kubectl proxy) drops Authorization; this one passes
      headers["X-Kubequota-Authorization"] = "Bearer " + t;
    }
    return window.fetch(base + path, { headers: headers, cache: "no-store", credentials: "same-origin" })
      .then(function (r) {
        return r.text().then(function (body) {
          var data = null;
          try { data = body ? JSON.parse(body) : null; } catch (e) { data = null; }
          if (r.ok) return data;
          var msg = (data && (data.description || data.message || data.error)) || r.statusText;
          if (r.status === 401 || r.status === 403) throw new AuthError(r.status, msg);
          throw new HttpError(path, r.status, msg);
        });
      });
  }

  /* ---------------------------------------------------------------- numbers */

  var CPU = { vcore: 1, cpu: 1 };
  var BYTES = /^(memory|ephemeral-storage|hugepages-.*)$/;
  /* DRA: the "memory" counter of partitionable devices, <class>.deviceclass.resource.k8s.io/memory,
   * is bytes too (80Gi of a GPU's memory, not 85899345920; docs/dra.md) */
  var DRA_BYTES = /\.deviceclass\.resource\.k8s\.io\/memory$/;

  function trim(x, digits) { return String(Number(x.toFixed(digits))); }

  function fmtBytes(b) {
    var units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    var i = 0;
    while (Math.abs(b) >= 1024 && i < units.length - 1) { b /= 1024; i++; }
    return b === 0 ? "0" : trim(b, 2) + " " + units[i];
  }

  /* Values as the usage view gives them: cpu in millicores, memory in bytes. */
  function fmt(res, v) {
    if (v === undefined || v === null) return "–";
    if (CPU[res]) return trim(v / 1000, 3);
    if (res === "credits") return trim(v, 2);
    if (BYTES.test(res) || DRA_BYTES.test(res)) return fmtBytes(v);
    return String(v);
  }

  function resName(res) { return CPU[res] ? "cpu" : res; }

  /* A usage widget: a bar when there is a limit, and "used / max". */
  function usage(res, used, max) {
    var box = el("div", "usage");
    box.dataset.resource = resName(res);
    if (max !== undefined && max !== null) {
      var bar = el("div", "bar");
      var fill = el("div", "fill");
      var pct = max > 0 ? Math.min(100, (100 * (used || 0)) / max) : ((used || 0) > 0 ? 100 : 0);
      fill.style.width = pct.toFixed(1) + "%";
      if ((used || 0) > max) fill.classList.add("over");
      else if (pct >= 90) fill.classList.add("high");
      bar.setAttribute("role", "progressbar");
      bar.setAttribute("aria-valuemin", "0");
      bar.setAttribute("aria-valuemax", String(max));
      bar.setAttribute("aria-valuenow", String(used || 0));
      bar.appendChild(fill);
      box.appendChild(bar);
      box.appendChild(el("span", "text", fmt(res, used || 0) + " / " + fmt(res, max)));
    } else {
      box.appendChild(el("span", "text", fmt(res, used || 0)));
    }
    return box;
  }

  /* ---------------------------------------------------------------- tables */

  function table(head) {
    var t = el("table");
    var tr = el("tr");
    head.forEach(function (h) { tr.appendChild(el("th", null, h)); });
    var thead = el("thead");
    thead.appendChild(tr);
    t.appendChild(thead);
    t.appendChild(el("tbody"));
    return t;
  }

  function cell(tr, content, cls) {
    var td = el("td", cls || null);
    if (content instanceof Node) td.appendChild(content);
    else if (content !== undefined && content !== null) td.textContent = String(content);
    tr.appendChild(td);
    return td;
  }

  /* Each cell gets its column's name (data-label): on a narrow screen the rows become
   * stacked cards and the CSS writes the name before the value (attr(), no inline style). */
  function labelCells(node) {
    var tables = node.tagName === "TABLE" ? [node] : Array.prototype.slice.call(node.querySelectorAll("table"));
    tables.forEach(function (t) {
      var head = Array.prototype.map.call(t.tHead ? t.tHead.rows[0].cells : [], function (th) {
        return th.textContent;
      });
      Array.prototype.forEach.call(t.tBodies[0].rows, function (tr) {
        Array.prototype.forEach.call(tr.cells, function (td, i) {
          if (head[i] !== undefined) td.dataset.label = head[i];
          if (td.textContent.trim() === "") td.classList.add("blank"); /* no empty line on a card */
        });
      });
    });
  }

  function fill(id, node) {
    var p = $(id);
    while (p.firstChild) p.removeChild(p.firstChild);
    labelCells(node);
    p.appendChild(node);
  }

  function empty(text) { return el("div", "empty", text); }

  function keys(o) { return o ? Object.keys(o) : []; }

  /* cpu, memory, pods first, then the others by name. */
  function order(names) {
    var rank = { vcore: 0, cpu: 0, memory: 1, pods: 2 };
    return names.filter(function (n, i) { return names.indexOf(n) === i; }).sort(function (a, b) {
      var ra = a in rank ? rank[a] : 3, rb = b in rank ? rank[b] : 3;
      return ra !== rb ? ra - rb : (a < b ? -1 : a > b ? 1 : 0);
    });
  }

  /* The cells of the "other resources" column: one usage widget per extra resource. */
  function others(used, max, skip) {
    var box = el("div");
    order(keys(used).concat(keys(max))).forEach(function (r) {
      if (skip.indexOf(r) >= 0) return;
      var line = el("div");
      line.appendChild(el("span", "muted", resName(r) + " "));
      line.appendChild(usage(r, (used || {})[r], (max || {})[r]));
      box.appendChild(line);
    });
    return box;
  }

  /* A user's or group's queue tree (usage view) as a list of the queues with something to show. */
  function flatten(node, out) {
    if (!node) return out;
    var hasUse = keys(node.resourceUsage).some(function (k) { return node.resourceUsage[k]; });
    if (hasUse || node.maxResources || node.maxApplications) out.push(node);
    (node.children || []).forEach(function (c) { flatten(c, out); });
    return out;
  }

  function trackerTable(list, nameKey, withUsers) {
    if (!list || list.length === 0) return empty("none yet: a " + (withUsers ? "group" : "user") +
                                                 " appears with its first pod or a configured limit");
    var head = [withUsers ? "Group" : "User", "Queue", "cpu", "memory", "pods", "other", "applications"];
    if (withUsers) head.push("users");
    var t = table(head);
    var body = t.tBodies[0];
    list.slice().sort(function (a, b) { return a[nameKey] < b[nameKey] ? -1 : 1; }).forEach(function (u) {
      var rows = flatten(u.queues, []);
      if (rows.length === 0) rows = [u.queues || { queuePath: "root" }];
      rows.forEach(function (q, i) {
        var tr = el("tr", i === 0 ? "first" : null);
        tr.dataset.name = u[nameKey];
        tr.dataset.queue = q.queuePath;
        cell(tr, i === 0 ? u[nameKey] : "", "name");
        cell(tr, q.queuePath);
        var use = q.resourceUsage || {}, max = q.maxResources || {};
        cell(tr, usage("vcore", use.vcore, max.vcore));
        cell(tr, usage("memory", use.memory, max.memory));
        cell(tr, usage("pods", use.pods, max.pods));
        cell(tr, others(use, max, ["vcore", "memory", "pods"]));
        var apps = (q.runningApplications || []).length;
        cell(tr, q.maxApplications ? usage("applications", apps, q.maxApplications) : String(apps), "num");
        if (withUsers) cell(tr, i === 0 ? (u.users || []).join(", ") : "");
        body.appendChild(tr);
      });
    });
    return t;
  }

  function queueRows(q, depth, body) {
    var tr = el("tr");
    tr.dataset.queue = q.queuename;
    var name = cell(tr, q.queuename.split(".").pop(), "indent" + Math.min(depth, 5));
    name.title = q.queuename;
    var use = q.allocatedResource || {}, max = q.maxResource || {};
    cell(tr, usage("vcore", use.vcore, max.vcore));
    cell(tr, usage("memory", use.memory, max.memory));
    cell(tr, usage("pods", use.pods, max.pods));
    cell(tr, others(use, max, ["vcore", "memory", "pods"]));
    var g = q.guaranteedResource || {};
    cell(tr, order(keys(g)).map(function (r) { return resName(r) + " " + fmt(r, g[r]); }).join(", "));
    var p = q.pendingResource || {};
    cell(tr, order(keys(p)).map(function (r) { return resName(r) + " " + fmt(r, p[r]); }).join(", "));
    cell(tr, q.maxRunningApps ? usage("applications", q.runningApps || 0, q.maxRunningApps)
                              : String(q.runningApps || 0), "num");
    body.appendChild(tr);
    (q.children || []).forEach(function (c) { queueRows(c, depth + 1, body); });
  }

  function queuesTable(root) {
    if (!root) return empty("no queues");
    var t = table(["Queue", "cpu", "memory", "pods", "other", "guaranteed", "pending", "applications"]);
    queueRows(root, 0, t.tBodies[0]);
    return t;
  }

  /* The elastic quota tree (kq_qtree_json): groups with min, max, runtime and used. */
  function treeTable(tree) {
    var groups = (tree && tree.groups) || [];
    if (groups.length === 0) return empty("no quota groups");
    var byParent = {};
    groups.forEach(function (g) {
      var p = g.parent || "";
      (byParent[p] = byParent[p] || []).push(g);
    });
    var t = table(["Quota group", "cpu used / runtime", "cpu min", "cpu max",
                   "memory used / runtime", "memory min", "memory max", "request"]);
    var body = t.tBodies[0];
    var seen = {};
    function walk(parent, depth) {
      (byParent[parent] || []).slice().sort(function (a, b) { return a.name < b.name ? -1 : 1; })
        .forEach(function (g) {
          if (seen[g.name]) return;
          seen[g.name] = true;
          var tr = el("tr");
          tr.dataset.group = g.name;
          if (g.tree) tr.dataset.tree = g.tree;
          var c = cell(tr, g.name, "indent" + Math.min(depth, 5));
          c.title = g.name + (g.tree ? " (tree " + g.tree + ")" : "");
          var used = g.allocatedResource || {}, rt = g.runtimeResource || {};
          var min = g.minResource || {}, max = g.maxResource || {};
          cell(tr, usage("cpu", used.cpu, rt.cpu));
          cell(tr, fmt("cpu", min.cpu), "num");
          cell(tr, max.cpu === undefined ? "∞" : fmt("cpu", max.cpu), "num");
          cell(tr, usage("memory", used.memory, rt.memory));
          cell(tr, fmt("memory", min.memory), "num");
          cell(tr, max.memory === undefined ? "∞" : fmt("memory", max.memory), "num");
          var rq = g.requestResource || {};
          cell(tr, order(keys(rq)).map(function (r) { return resName(r) + " " + fmt(r, rq[r]); }).join(", "));
          body.appendChild(tr);
          walk(g.name, depth + 1);
        });
    }
    walk("", 0);
    // groups whose parent is not in the list (should not happen): still shown
    groups.forEach(function (g) { if (!seen[g.name]) { byParent["\u0000"] = [g]; walk("\u0000", 0); } });
    var total = tree.clusterTotal || {};
    var wrap = el("div");
    wrap.appendChild(el("div", "empty", "cluster: cpu " + fmt("cpu", total.cpu) + ", memory " +
                        fmt("memory", total.memory)));
    /* Koordinator's multi-tree quotas: one line per ElasticQuotaProfile's tree */
    (tree.trees || []).forEach(function (q) {
      var tt = q.totalResource || {};
      var d = el("div", "empty", "tree " + q.tree + " (profile " + q.profile + ", root " + q.rootQuota +
                 "): " + (q.nodes || []).length + ((q.nodes || []).length === 1 ? " node" : " nodes") + ", cpu " + fmt("cpu", tt.cpu) + ", memory " +
                 fmt("memory", tt.memory));
      d.dataset.tree = q.tree;
      wrap.appendChild(d);
    });
    wrap.appendChild(t);
    return wrap;
  }

  /* Waiting pods behind the admission gate (GET .../gating/waiting): per queue, in release
   * order, with the reason each waits; under the usage policy, the share each user is
   * ranked by (the smallest goes first). */
  function waitingTable(data) {
    var t = table(["Queue", "#", "Pod", "User", "Priority", "Waiting", "Share", "Why it waits"]);
    var body = t.tBodies[0];
    data.forEach(function (q) {
      var share = {};
      if (q.policy === "usage") {
        (q.users || []).forEach(function (u) {
          if (typeof u.share === "number") share[u.user] = (u.share * 100).toFixed(1) + "%";
        });
      }
      (q.pods || []).forEach(function (p, i) {
        var tr = el("tr", i === 0 ? "first" : null);
        tr.dataset.pod = p.namespace + "/" + p.name;
        var qc = cell(tr, i === 0 ? q.queue : "");
        if (i === 0) qc.title = "order: " + (q.policy || "fair");
        /* a pod that can never fit as it is has no place in the order: say so instead */
        if (p.neverFits) cell(tr, "never fits", "never");
        else cell(tr, p.position, "num");
        cell(tr, p.namespace + "/" + p.name);
        cell(tr, p.user);
        cell(tr, p.priority, "num");
        cell(tr, duration(p.waitingSeconds || 0), "num");
        cell(tr, share[p.user] || "", "num");
        var reason = cell(tr, p.reason || "", "reason");
        reason.title = p.reason || "";
        body.appendChild(tr);
      });
    });
    return body.rows.length ? t : empty("no pods are waiting behind the admission gate");
  }

  /* "42 s", "3 min", "2 h 5 min": how long a person reads a wait. */
  function duration(s) {
    if (s > 0 && s < 10) return trim(s, 1) + " s";
    s = Math.round(s);
    if (s < 60) return s + " s";
    if (s < 3600) return Math.floor(s / 60) + " min";
    return Math.floor(s / 3600) + " h " + Math.floor((s % 3600) / 60) + " min";
  }

  /* Waiting pods: whatever list the route returns, as a table of its fields. */
  function genericTable(data) {
    var list = Array.isArray(data) ? data : null;
    if (!list && data && typeof data === "object") {
      keys(data).forEach(function (k) { if (!list && Array.isArray(data[k])) list = data[k]; });
    }
    if (!list || list.length === 0) return empty("no pods are waiting");
    var cols = [];
    list.forEach(function (o) { keys(o).forEach(function (k) { if (cols.indexOf(k) < 0) cols.push(k); }); });
    var t = table(cols);
    list.forEach(function (o) {
      var tr = el("tr");
      cols.forEach(function (k) {
        var v = o[k];
        cell(tr, v !== null && typeof v === "object" ? JSON.stringify(v) : v);
      });
      t.tBodies[0].appendChild(tr);
    });
    return t;
  }

  /* Charges (metering): one row per user, group and queue, credits against the budget. */
  function chargesTable(data) {
    var t = table(["Kind", "Name", "credits (total)", "credits (range)", "budget"]);
    var body = t.tBodies[0];
    [["users", "user"], ["groups", "group"], ["queues", "queue"]].forEach(function (kv) {
      ((data && data[kv[0]]) || []).forEach(function (c, i) {
        var tr = el("tr", i === 0 ? "first" : null);
        tr.dataset.kind = kv[1];
        tr.dataset.name = c.name;
        cell(tr, i === 0 ? kv[1] + "s" : "");
        cell(tr, c.name);
        cell(tr, trim(c.totalCredits || 0, 2), "num");
        cell(tr, trim(c.rangeCredits || 0, 2), "num");
        cell(tr, c.budget !== undefined ? usage("credits", c.totalCredits || 0, c.budget) : "–");
        body.appendChild(tr);
      });
    });
    return body.rows.length ? t : empty("nothing charged yet");
  }

  /* ---------------------------------------------------------------- summary */

  /* Queues at their max: any resource of maxResource used in full (or beyond), or as many
   * running applications as maxRunningApps. */
  function fullQueues(q, out) {
    if (!q) return out;
    var use = q.allocatedResource || {}, max = q.maxResource || {};
    var full = keys(max).some(function (r) { return (use[r] || 0) >= max[r]; }) ||
      (q.maxRunningApps > 0 && (q.runningApps || 0) >= q.maxRunningApps);
    if (full) out.push(q.queuename);
    (q.children || []).forEach(function (c) { fullQueues(c, out); });
    return out;
  }

  function tile(id, value, note, alert) {
    $("sum-" + id).textContent = value;
    $("sum-" + id + "-note").textContent = note || "";
    $("tile-" + id).classList.toggle("alert", !!alert);
  }

  function summary(queues, waiting, history) {
    if (waiting === null) {
      tile("waiting", "–", "admission gate off: kubectl kubequota why POD");
    } else if (waiting === undefined) {
      tile("waiting", "–", "no admission gate view");
    } else {
      var pods = [];
      (Array.isArray(waiting) ? waiting : []).forEach(function (q) { pods = pods.concat(q.pods || []); });
      var never = pods.filter(function (p) { return p.neverFits; }).length;
      tile("waiting", String(pods.length), never ? never + " never fit" + (never === 1 ? "s" : "") + " as asked"
                                                 : "behind the admission gate", never > 0);
    }
    if (!history) tile("denials", "–", "usage history is off");
    else tile("denials", String(history.denialsLastHour || 0), "filter and bind refusals", history.denialsLastHour > 0);
    var full = fullQueues(queues, []);
    tile("full", String(full.length), full.slice(0, 3).join(", ") + (full.length > 3 ? ", …" : ""), full.length > 0);
  }

  /* ---------------------------------------------------------------- usage over time */

  var SVG = "http://www.w3.org/2000/svg";
  var chosen = null; /* "queue:NAME" or "user:NAME", kept across refreshes */

  function svg(tag, attrs) {
    var e = document.createElementNS(SVG, tag);
    keys(attrs).forEach(function (k) { e.setAttribute(k, String(attrs[k])); });
    return e;
  }

  /* One small line chart of res over the samples: SVG built here (no inline style), the
   * latest value and the highest one written beside it. */
  function chart(res, title, points, limit) {
    var W = 300, H = 70, PAD = 4;
    var vals = points.map(function (p) { return p[res] || 0; });
    var top = Math.max.apply(null, vals.concat([0]));
    var hasLimit = typeof limit === "number";
    /* headroom: a steady line is not drawn on the border; a queue's max is in view */
    var scale = Math.max(top, hasLimit ? limit : 0) * 1.15;
    var box = el("figure", "chart");
    box.dataset.resource = resName(res);
    var g = svg("svg", { viewBox: "0 0 " + W + " " + H, preserveAspectRatio: "none", role: "img",
                         "aria-label": title + " over time" });
    g.appendChild(svg("line", { x1: 0, y1: H - PAD, x2: W, y2: H - PAD, "class": "axis" }));
    var n = vals.length;
    var xy = vals.map(function (v, i) {
      var x = n > 1 ? (i * W) / (n - 1) : W / 2;
      var y = H - PAD - (scale > 0 ? ((H - 2 * PAD) * v) / scale : 0);
      return x.toFixed(1) + "," + y.toFixed(1);
    });
    if (n > 1) /* the area under the line */
      g.appendChild(svg("polygon", { points: "0," + (H - PAD) + " " + xy.join(" ") + " " + W + "," + (H - PAD),
                                     "class": "area" }));
    var line = svg("polyline", { points: xy.join(" "), "class": "series" });
    g.appendChild(line);
    if (hasLimit && scale > 0) {
      var ly = (H - PAD - ((H - 2 * PAD) * limit) / scale).toFixed(1);
      g.appendChild(svg("line", { x1: 0, y1: ly, x2: W, y2: ly, "class": "limit" }));
    }
    box.dataset.points = String(n);
    box.appendChild(g);
    var cap = el("figcaption");
    cap.appendChild(el("span", "name", title));
    cap.appendChild(el("span", "muted", " now " + fmt(res, n ? vals[n - 1] : 0) + ", highest " + fmt(res, top) +
                       (hasLimit ? ", max " + fmt(res, limit) : "")));
    box.appendChild(cap);
    return box;
  }

  /* The queue named in the queue view, or null. */
  function findQueue(q, name) {
    if (!q) return null;
    if (q.queuename === name) return q;
    var kids = q.children || [];
    for (var i = 0; i < kids.length; i++) {
      var f = findQueue(kids[i], name);
      if (f) return f;
    }
    return null;
  }

  /* max: a queue's maxResource (drawn as a dashed line), {} for a user. */
  function historyView(series, sumry, max) {
    var pts = series.points || [];
    var wrap = el("div", "charts");
    if (pts.length === 0) return empty("no samples yet");
    wrap.appendChild(chart("vcore", "cpu", pts, max.vcore));
    wrap.appendChild(chart("memory", "memory", pts, max.memory));
    wrap.appendChild(chart("pods", "pods", pts, max.pods));
    var first = new Date(pts[0].time * 1000), last = new Date(pts[pts.length - 1].time * 1000);
    $("history-window").textContent = pts.length + " sample" + (pts.length === 1 ? "" : "s") + ", " +
      first.toLocaleTimeString() + " – " + last.toLocaleTimeString() + " (every " +
      duration(sumry.intervalSeconds) + ", last " + sumry.points + " kept)";
    return wrap;
  }

  /* The series to show: the one chosen before, else the first queue below root that uses
   * something, else root. */
  function pickSeries(sumry, queues) {
    var all = (sumry.queues || []).map(function (n) { return "queue:" + n; })
      .concat((sumry.users || []).map(function (n) { return "user:" + n; }));
    if (chosen && all.indexOf(chosen) >= 0) return chosen;
    var busy = [];
    (function walk(q) {
      if (!q) return;
      if (q.queuename !== "root" && keys(q.allocatedResource).some(function (k) { return q.allocatedResource[k]; }))
        busy.push("queue:" + q.queuename);
      (q.children || []).forEach(walk);
    })(queues);
    var pick = busy.filter(function (k) { return all.indexOf(k) >= 0; })[0];
    return pick || all[0] || null;
  }

  function loadHistory(p, sumry, queues) {
    var sel = $("history-select");
    while (sel.firstChild) sel.removeChild(sel.firstChild);
    var key = pickSeries(sumry, queues);
    [["queue", sumry.queues || []], ["user", sumry.users || []]].forEach(function (kv) {
      if (kv[1].length === 0) return;
      var grp = el("optgroup");
      grp.label = kv[0] === "queue" ? "Queues" : "Users";
      kv[1].forEach(function (n) {
        var o = el("option", null, kv[0] + " " + n); /* the closed menu shows which kind it is */
        o.value = kv[0] + ":" + n;
        if (o.value === key) o.selected = true;
        grp.appendChild(o);
      });
      sel.appendChild(grp);
    });
    if (!key) {
      fill("history", empty("nothing sampled yet"));
      return Promise.resolve();
    }
    chosen = key;
    var kind = key.slice(0, key.indexOf(":")), name = key.slice(key.indexOf(":") + 1);
    return get(p + "history/" + kind + "/" + encodeURIComponent(name)).then(function (series) {
      var q = kind === "queue" ? findQueue(queues, name) : null;
      fill("history", historyView(series, sumry, (q && q.maxResource) || {}));
      $("history").dataset.series = key;
    }, function (e) {
      if (e instanceof AuthError) throw e;
      fill("history", empty("no history of " + kind + " " + name + " (" + (e.message || e.status) + ")"));
    });
  }

  /* ---------------------------------------------------------------- flow */

  function status(text, isError) {
    var s = $("status");
    s.textContent = text;
    s.className = isError ? "error" : "muted";
  }

  function showAuth(why) {
    $("auth").hidden = false;
    $("auth-why").textContent = why || "";
    if (why) $("token").focus();
  }

  function optional(path, wanted) {
    return wanted ? get(path) : Promise.resolve(undefined);
  }

  function load() {
    if (timer) { window.clearTimeout(timer); timer = null; }
    status("loading…");
    return get("ui/features.json").then(function (f) {
      var p = "ws/v1/partition/" + encodeURIComponent(f.partition) + "/";
      $("partition").textContent = "partition " + f.partition;
      var waiting = (f.routes || []).filter(function (r) { return /waiting/.test(r) && !/\*$/.test(r); })[0];
      var waitingPath = waiting ? waiting.replace(/^\/ws\/v1\/partition\/\*\//, p).replace(/^\//, "") : null;
      var history = !!f.history && (f.routes || []).indexOf("/ws/v1/partition/*/history") >= 0;
      return Promise.all([
        get(p + "usage/users"), get(p + "usage/groups"), get(p + "queues"),
        optional(p + "charges", f.metering), optional(waitingPath, !!waitingPath && waitingPath.indexOf("*") < 0),
        /* off with --history-interval 0 (features.history false): no chart, no denials tile */
        optional(p + "history", history).catch(function (e) {
          if (e instanceof AuthError) throw e;
          return undefined;
        })
      ]).then(function (r) {
        summary(r[2], f.gate === false ? null : r[4], r[5]);
        $("history-section").hidden = !r[5];
        return (r[5] ? loadHistory(p, r[5], r[2]) : Promise.resolve()).then(function () { return r; });
      }).then(function (r) {
        fill("users", trackerTable(r[0], "userName", false));
        fill("groups", trackerTable(r[1], "groupName", true));
        fill("queues", queuesTable(r[2]));
        var tree = r[2] && r[2].quotaTree;
        $("tree-section").hidden = !tree;
        if (tree) fill("tree", treeTable(tree));
        $("charges-section").hidden = r[3] === undefined;
        if (r[3] !== undefined) fill("charges", chargesTable(r[3]));
        if (f.gate === false) {
          fill("waiting", empty("the admission gate is off (--admission-gate): pods wait in kube-scheduler's " +
                                "queue; kubectl kubequota why POD tells why one waits"));
        } else if (r[4] === undefined) {
          fill("waiting", empty("this kubequota has no admission gate view"));
        } else {
          var perQueue = Array.isArray(r[4]) && r[4].every(function (q) { return q && Array.isArray(q.pods); });
          fill("waiting", perQueue ? waitingTable(r[4]) : genericTable(r[4]));
        }
        $("auth").hidden = true;
        loads++;
        document.body.dataset.loads = String(loads);
        document.body.dataset.state = "ready";
        status("updated " + new Date().toLocaleTimeString());
        timer = window.setTimeout(load, REFRESH_MS);
      });
    }).catch(function (e) {
      if (e instanceof AuthError) {
        document.body.dataset.state = "auth";
        status(e.status === 401 ? "sign in to see the usage view" : "not allowed", true);
        showAuth((e.status === 401 ? "The usage view needs credentials: " : "This token may not read the usage view: ") +
                 e.message);
        return;
      }
      document.body.dataset.state = "error";
      status("could not load " + (e.path || "the usage view") + ": " +
             (e.status ? e.status + " " : "") + (e.message || String(e)), true);
      timer = window.setTimeout(load, REFRESH_MS);
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    $("auth-form").addEventListener("submit", function (ev) {
      ev.preventDefault();
      var t = $("token").value.trim();
      $("token").value = "";
      setToken(t);
      load();
    });
    $("token-clear").addEventListener("click", function () {
      setToken("");
      $("token").value = "";
      load();
    });
    $("token-toggle").addEventListener("click", function () {
      var a = $("auth");
      a.hidden = !a.hidden;
      if (!a.hidden) $("token").focus();
    });
    $("refresh").addEventListener("click", function () { load(); });
    $("history-select").addEventListener("change", function () {
      chosen = $("history-select").value;
      load();
    });
    load();
  });
})();
