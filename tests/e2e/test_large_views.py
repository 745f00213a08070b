"""Large views (issue 29, "Memory"): at most --max-concurrent-views answers that grow with
users, pods or applications are built and sent at once; one more answers 503 with
Retry-After, other views are not limited.

A slot is held until the answer is written, so a client that stops reading a large answer
holds it: the test's slow client asks for usage/users (several MB: 12,000 users), reads the
status line and stops reading with a small receive buffer, so the server blocks in its write.
No assertion is on time."""

import json
import socket
import ssl

import kqtest
from kqtest import KQTestCase, Kubequota, certs, queues_config, wait_until

USERS = 12000
USERS_VIEW = "/ws/v1/partition/default/usage/users"


def preload(sim, users, apps_per_user=1):
    """One bound, running pod per user and application, straight into the simulator's store."""
    w = sim.world
    with w.cond:
        for u in range(users):
            for a in range(apps_per_user):
                name = "p%d-%d" % (u, a)
                w.objs["pods"]["default/" + name] = {
                    "metadata": {"name": name, "namespace": "default", "uid": "uid-" + name,
                                 "resourceVersion": str(w.next_rv()),
                                 "creationTimestamp": "2026-01-01T00:00:00Z",
                                 "labels": {kqtest.LABEL_QUEUE: "root.q%d" % (u % 4),
                                            kqtest.LABEL_APP: "app-%d-%d" % (u, a)},
                                 "annotations": {kqtest.ANN_USER: json.dumps(
                                     {"user": "user-%05d" % u, "groups": ["group-%d" % (u % 7)]})}},
                    "spec": {"schedulerName": kqtest.SCHED, "nodeName": "node-1",
                             "containers": [{"name": "c", "image": "busybox",
                                             "resources": {"requests": {"cpu": "10m", "memory": "1Mi"}}}]},
                    "status": {"phase": "Running"},
                }


CONFIG = queues_config(*[{"name": "q%d" % i, "limits": [
    {"limit": "everyone", "users": ["*"], "maxresources": {"cpu": "1000"}},
    {"limit": "group-0", "groups": ["group-0"], "maxresources": {"cpu": "100000"}},
    {"limit": "every group", "groups": ["*"], "maxresources": {"cpu": "100000"}}]} for i in range(4)])


class SlowReader:
    """A TLS client that asks for `path`, reads the status line and then stops reading."""

    def __init__(self, kq, path):
        raw = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # no receive autotuning
        raw.settimeout(30)
        raw.connect(("127.0.0.1", kq.port))
        ctx = ssl.create_default_context(cafile=certs()["ca"])
        ctx.check_hostname = False
        self.s = ctx.wrap_socket(raw)
        self.s.sendall(("GET %s HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer %s\r\n\r\n"
                        % (path, kq.rest_token)).encode())
        self.head = self.s.recv(64)

    def close(self):
        try:
            self.s.close()
        except OSError:
            pass


class LargeViewLimitTest(KQTestCase):
    CONFIG = CONFIG
    START = False

    def start(self, *extra):
        preload(self.sim, USERS)
        self.kq = Kubequota(self.sim, self.CONFIG, extra_args=extra)
        self.kq.start(timeout=120)
        wait_until(lambda: len(self.kq.users()) == USERS, timeout=60, msg="every user in the view")

    def test_over_the_limit_answers_503_with_retry_after(self):
        self.start("--max-concurrent-views", "1")
        slow = SlowReader(self.kq, USERS_VIEW)
        self.addCleanup(slow.close)
        self.assertTrue(slow.head.startswith(b"HTTP/1.1 200"), slow.head)
        # the slow reader holds the only slot: every large view is refused ...
        for path in (USERS_VIEW, "/ws/v1/partition/default/usage/groups",
                     "/ws/v1/partition/default/applications", "/metrics", "/ws/v1/metrics",
                     "/ws/v1/partition/default/application/app-00001"):
            r = self.kq.get(path, timeout=30)
            self.assertEqual(r.status, 503, "%s: %r" % (path, r))
            self.assertEqual(r.headers.get("Retry-After"), "1", path)
        body = self.kq.get(USERS_VIEW, timeout=30).json()
        self.assertEqual(body["status_code"], 503)
        self.assertIn("--max-concurrent-views", body["description"])
        # ... and the small ones are not
        self.assertEqual(self.kq.get("/ws/v1/partition/default/usage/user/user-00001").status, 200)
        self.assertEqual(self.kq.get("/ws/v1/partition/default/queues").status, 200)
        self.assertEqual(self.kq.get("/readyz").status, 200)
        # the slot comes back when the slow reader goes away
        slow.close()
        wait_until(lambda: self.kq.get(USERS_VIEW, timeout=30).status == 200, timeout=30,
                   msg="usage/users answers again once the slow reader is gone")
        self.assertIn("event=large_views_refused", self.kq.logs())

    def test_no_limit(self):
        self.start("--max-concurrent-views", "0")
        slow = SlowReader(self.kq, USERS_VIEW)
        self.addCleanup(slow.close)
        self.assertTrue(slow.head.startswith(b"HTTP/1.1 200"), slow.head)
        self.assertEqual(self.kq.get(USERS_VIEW, timeout=30).status, 200)


def raw_get(kq, path, version):
    """GET over a fresh TLS connection in HTTP/`version`, read to the end: (status line,
    headers as a lowercase dict, body bytes, chunk-decoded when chunked)."""
    raw = socket.create_connection(("127.0.0.1", kq.port), timeout=30)
    ctx = ssl.create_default_context(cafile=certs()["ca"])
    ctx.check_hostname = False
    s = ctx.wrap_socket(raw)
    try:
        s.sendall(("GET %s HTTP/%s\r\nHost: localhost\r\nAuthorization: Bearer %s\r\nConnection: close\r\n\r\n"
                   % (path, version, kq.rest_token)).encode())
        data = b""
        while True:
            b = s.recv(65536)
            if not b:
                break
            data += b
    finally:
        s.close()
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (l.partition(":") for l in lines[1:])}
    if headers.get("transfer-encoding") == "chunked":
        out, rest = b"", body
        while True:
            size_line, _, rest = rest.partition(b"\r\n")
            n = int(size_line, 16)
            if n == 0:
                break
            out, rest = out + rest[:n], rest[n + 2:]
        body = out
    return lines[0], headers, body


class StreamedViewTest(KQTestCase):
    """usage/users, usage/groups and applications are written in chunks over HTTP/1.1 while
    being built; HTTP/1.0 gets the buffered answer with a Content-Length. Same state, same
    bytes."""
    CONFIG = CONFIG
    START = False

    def test_streamed_is_byte_identical(self):
        preload(self.sim, 3000, apps_per_user=2)
        self.kq = Kubequota(self.sim, self.CONFIG)
        self.kq.start(timeout=120)
        wait_until(lambda: len(self.kq.users()) == 3000, timeout=60, msg="every user in the view")
        for path in (USERS_VIEW, "/ws/v1/partition/default/usage/groups",
                     "/ws/v1/partition/default/applications", "/ws/v1/partition/default/applications/active"):
            st11, h11, b11 = raw_get(self.kq, path, "1.1")
            st10, h10, b10 = raw_get(self.kq, path, "1.0")
            self.assertTrue(st11.startswith("HTTP/1.1 200"), st11)
            self.assertTrue(st10.startswith("HTTP/1.1 200"), st10)
            self.assertEqual(h11.get("transfer-encoding"), "chunked", h11)
            self.assertNotIn("content-length", h11)
            self.assertEqual(int(h10["content-length"]), len(b10))
            self.assertEqual(h11.get("content-type"), h10.get("content-type"))
            self.assertGreater(len(b10), 65536 * 2, "more than one chunk")  # noqa
            self.assertEqual(b11, b10, path)
            json.loads(b11)
            # http.client (what most clients do) reads the chunked answer too
            r = self.kq.get(path)
            self.assertEqual(r.status, 200)
            self.assertEqual(r.body, b10)
        # a state without history is the ordinary (empty) answer
        st, h, b = raw_get(self.kq, "/ws/v1/partition/default/applications/completed", "1.1")
        self.assertTrue(st.startswith("HTTP/1.1 200"), st)
        self.assertEqual(h.get("content-length"), "2")
        self.assertEqual(b, b"[]")
        # an unknown partition is still the ordinary error answer
        st, h, b = raw_get(self.kq, "/ws/v1/partition/other/usage/users", "1.1")
        self.assertTrue(st.startswith("HTTP/1.1 404"), st)
        self.assertEqual(json.loads(b)["message"], "Partition not found")
