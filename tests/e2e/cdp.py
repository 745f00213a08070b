"""A headless Chromium driven over the DevTools protocol, standard library only.

Chromium is started with --remote-debugging-pipe: it reads protocol messages (JSON, each
ended by a NUL byte) on its fd 3 and writes answers and events on its fd 4, so no websocket
client is needed. One page target is attached in flat mode; every console message,
uncaught exception and browser log entry (network failures, CSP violations) is collected
in .messages.

  b = Browser(chromium_path, width=1366, height=768)
  b.navigate(url); b.wait_for("document.body.dataset.state === 'ready'")
  b.eval("document.title"); b.screenshot("build/ui/x.png"); b.close()

The protocol: https://chromedevtools.github.io/devtools-protocol/ (Target.attachToTarget
with flatten, Runtime.consoleAPICalled / exceptionThrown, Log.entryAdded,
Page.captureScreenshot, Emulation.setDeviceMetricsOverride).
"""

import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile
import time


class CDPError(AssertionError):
    pass


def _high(fd):
    """A copy of fd numbered 10 or more (inheritable); fd is closed."""
    h = fcntl.fcntl(fd, fcntl.F_DUPFD, 10)
    os.close(fd)
    return h


class Browser:
    def __init__(self, chromium, width=1366, height=768, timeout=30.0):
        self.timeout = timeout
        self.profile = tempfile.mkdtemp(prefix="kq-chromium-")
        to_child_r, self._w = os.pipe()      # we write, chromium reads on its fd 3
        self._r, from_child_w = os.pipe()    # chromium writes on its fd 4, we read
        # above 4, so that placing them on 3 and 4 in the child cannot overwrite each other
        to_child_r, from_child_w = (_high(to_child_r), _high(from_child_w))
        args = [chromium, "--headless", "--remote-debugging-pipe", "--no-sandbox",
                "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                "--no-default-browser-check", "--disable-extensions", "--disable-sync",
                "--disable-background-networking", "--disable-component-update",
                "--disable-features=Translate,MediaRouter,OptimizationHints",
                "--ignore-certificate-errors",  # the test CA is not in the browser's store
                "--user-data-dir=" + self.profile, "--window-size=%d,%d" % (width, height),
                "about:blank"]

        def child_fds():  # runs in the child before exec; close_fds would close 3 and 4
            os.dup2(to_child_r, 3)
            os.dup2(from_child_w, 4)
            os.close(to_child_r)
            os.close(from_child_w)

        self.stderr = open(os.path.join(self.profile, "stderr.log"), "wb")
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=self.stderr,
                                     stderr=self.stderr, close_fds=False,
                                     preexec_fn=child_fds)
        os.close(to_child_r)
        os.close(from_child_w)
        self._buf = b""
        self._id = 0
        self._pending = []   # events read while waiting for an answer
        self.messages = []   # (kind, level, text, url) of console/log/exception events
        self.session = None
        self.loaded = False
        t = self.call("Target.createTarget", {"url": "about:blank"})
        a = self.call("Target.attachToTarget", {"targetId": t["targetId"], "flatten": True})
        self.session = a["sessionId"]
        for m in ("Runtime.enable", "Log.enable", "Page.enable"):
            self.call(m)
        self.call("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})

    # ---------------------------------------------------------------- transport
    def _send(self, msg):
        data = json.dumps(msg).encode() + b"\0"
        while data:
            n = os.write(self._w, data)
            data = data[n:]

    def _read_one(self, deadline):
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise CDPError("no answer from chromium within %.0fs; its log:\n%s"
                               % (self.timeout, self.log_tail()))
            r, _, _ = select.select([self._r], [], [], min(left, 0.5))
            if r:
                chunk = os.read(self._r, 1 << 20)
                if not chunk:
                    raise CDPError("chromium closed the DevTools pipe (exit %s); its log:\n%s"
                                   % (self.proc.poll(), self.log_tail()))
                self._buf += chunk
        raw, self._buf = self._buf.split(b"\0", 1)
        return json.loads(raw)

    def _event(self, msg):
        method, p = msg.get("method"), msg.get("params", {})
        if method == "Page.loadEventFired":
            self.loaded = True
        elif method == "Runtime.consoleAPICalled":
            text = " ".join(str(a.get("value", a.get("description", ""))) for a in p.get("args", []))
            self.messages.append(("console", p.get("type"), text, ""))
        elif method == "Runtime.exceptionThrown":
            d = p.get("exceptionDetails", {})
            text = (d.get("exception") or {}).get("description") or d.get("text", "")
            self.messages.append(("exception", "error", text, d.get("url", "")))
        elif method == "Log.entryAdded":
            e = p.get("entry", {})
            self.messages.append(("log:" + e.get("source", ""), e.get("level"), e.get("text", ""),
                                  e.get("url", "")))

    def call(self, method, params=None):
        self._id += 1
        msg = {"id": self._id, "method": method, "params": params or {}}
        if self.session is not None:
            msg["sessionId"] = self.session
        self._send(msg)
        deadline = time.monotonic() + self.timeout
        while True:
            m = self._read_one(deadline)
            if m.get("id") == self._id:
                if "error" in m:
                    raise CDPError("%s: %s" % (method, m["error"]))
                return m.get("result", {})
            self._event(m)

    def pump(self, seconds=0.0):
        """Reads the events that arrived (for up to `seconds`)."""
        deadline = time.monotonic() + seconds
        while True:
            r, _, _ = select.select([self._r], [], [], max(0.0, deadline - time.monotonic()))
            if not r and b"\0" not in self._buf:
                return
            if r:
                chunk = os.read(self._r, 1 << 20)
                if not chunk:
                    return
                self._buf += chunk
            while b"\0" in self._buf:
                raw, self._buf = self._buf.split(b"\0", 1)
                self._event(json.loads(raw))
            if time.monotonic() >= deadline:
                return

    # ---------------------------------------------------------------- page
    def navigate(self, url):
        """Loads url and waits for its load event (the page's own scripts may still be busy)."""
        self.loaded = False
        r = self.call("Page.navigate", {"url": url})
        if r.get("errorText"):
            raise CDPError("navigating to %s: %s" % (url, r["errorText"]))
        deadline = time.monotonic() + self.timeout
        while not self.loaded:
            if time.monotonic() >= deadline:
                raise CDPError("%s did not finish loading within %.0fs" % (url, self.timeout))
            self.pump(0.1)

    def eval(self, expr):
        r = self.call("Runtime.evaluate", {"expression": expr, "returnByValue": True,
                                           "awaitPromise": True})
        if "exceptionDetails" in r:
            raise CDPError("evaluating %r: %s" % (expr, r["exceptionDetails"]))
        return r.get("result", {}).get("value")

    def wait_for(self, expr, timeout=20.0, what=None):
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            try:
                last = self.eval(expr)
            except CDPError as e:  # e.g. between two documents
                last = e
            else:
                if last:
                    return last
            self.pump(0.1)
        raise CDPError("timed out after %.0fs waiting for %s (last %r); page status: %r; messages: %s"
                       % (timeout, what or expr, last,
                          self.eval("(document.getElementById('status')||{}).textContent"),
                          self.messages))

    def screenshot(self, path, full_page=False):
        params = {"format": "png"}
        if full_page:
            m = self.call("Page.getLayoutMetrics")
            size = m.get("cssContentSize") or m.get("contentSize")
            params["clip"] = {"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1}
            params["captureBeyondViewport"] = True
        data = base64.b64decode(self.call("Page.captureScreenshot", params)["data"])
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
        return data

    def log_tail(self, n=30):
        try:
            self.stderr.flush()
            with open(os.path.join(self.profile, "stderr.log"), "rb") as f:
                return "\n".join(f.read().decode(errors="replace").splitlines()[-n:])
        except OSError:
            return ""

    def close(self):
        try:
            if self.proc.poll() is None:
                try:
                    self.session = None
                    self._send({"id": self._id + 1, "method": "Browser.close"})
                    self.proc.wait(5)
                except (OSError, subprocess.TimeoutExpired):
                    self.proc.kill()
                    self.proc.wait()
        finally:
            for fd in (self._r, self._w):
                try:
                    os.close(fd)
                except OSError:
                    pass
            self.stderr.close()
            shutil.rmtree(self.profile, ignore_errors=True)
