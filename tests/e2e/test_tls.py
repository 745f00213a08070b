"""TLS lifecycle: the serving certificate is reloaded when its files change (cert-manager
rotates them in place), without a restart and without dropping the old one on a broken
rotation."""

import os
import shutil
import socket
import ssl
import subprocess
import time

import kqtest
from kqtest import REPO, HttpClient, KQTestCase, Kubequota, certs, queues_config, tmp_root, wait_until


def peer_cert(port):
    ctx = ssl.create_default_context(cafile=None)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
        with ctx.wrap_socket(raw, server_hostname="localhost") as s:
            return s.getpeercert(binary_form=True)


def pem_to_der(path):
    with open(path) as f:
        return ssl.PEM_cert_to_DER_cert(f.read())


class RotatingKubequota(Kubequota):
    """kubequota serving a certificate from files the test replaces."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.cert = os.path.join(self.workdir, "tls.crt")
        self.key = os.path.join(self.workdir, "tls.key")
        shutil.copy(certs()["server"], self.cert)
        shutil.copy(certs()["server_key"], self.key)

    def argv(self):
        args = super().argv()
        args[args.index("--tls-cert") + 1] = self.cert
        args[args.index("--tls-key") + 1] = self.key
        return args


class CertificateReloadTest(KQTestCase):
    CONFIG = queues_config({"name": "default"})
    START = False

    def test_rotation_is_picked_up_and_a_broken_one_ignored(self):
        self.kq = RotatingKubequota(self.sim, self.CONFIG)
        self.kq.start()
        first = peer_cert(self.kq.port)
        self.assertEqual(first, pem_to_der(self.kq.cert))

        # a new pair from another run of the generator (a different key and serial)
        d = os.path.join(tmp_root(), "rotated-certs")
        r = subprocess.run(["bash", os.path.join(REPO, "certs", "gen-certs.sh"), d],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        for src, dst in ((os.path.join(d, "server.key"), self.kq.key),
                         (os.path.join(d, "server.crt"), self.kq.cert)):
            shutil.copy(src, dst + ".tmp")
            os.replace(dst + ".tmp", dst)
        new = pem_to_der(self.kq.cert)
        self.assertNotEqual(new, first)
        wait_until(lambda: peer_cert(self.kq.port) == new, timeout=15,
                   msg="kubequota to serve the rotated certificate")

        # a rotation that leaves a key not matching the certificate is refused: the last good
        # pair keeps being served
        shutil.copy(certs()["server_key"], self.kq.key + ".tmp")
        os.replace(self.kq.key + ".tmp", self.kq.key)
        # (the files are looked at when a client connects, at most once a second)
        wait_until(lambda: peer_cert(self.kq.port) and "tls_reload_failed" in self.kq.logs(),
                   timeout=15, msg="the broken rotation to be reported")
        self.assertEqual(peer_cert(self.kq.port), new)
        self.assertTrue(self.kq.alive())


def non_loopback_address():
    """An address of this host that is not loopback, or None."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("192.0.2.1", 9))  # no packet is sent: this only picks a source address
            addr = s.getsockname()[0]
    except OSError:
        return None
    return None if addr.startswith("127.") else addr


class ExtenderLocalOnlyTest(KQTestCase):
    """--extender-local-only: the scheduler verbs answer only callers on this host."""
    CONFIG = queues_config({"name": "default"})
    START = False

    def test_remote_callers_are_refused(self):
        addr = non_loopback_address()
        if addr is None:
            self.skipTest("this host has no non-loopback address to call from")
        self.kq = Kubequota(self.sim, self.CONFIG, extra_args=("--extender-local-only",))
        args = self.kq.argv

        def argv():
            a = args()
            a[a.index("--listen") + 1] = "0.0.0.0:%d" % self.kq.port
            return a
        self.kq.argv = argv
        self.kq.start()
        body = {"Pod": {"metadata": {"name": "p", "namespace": "default", "uid": "u1"},
                        "spec": {"schedulerName": "other"}}, "Nodes": None, "NodeNames": ["n1"]}
        local = self.kq.http.post("/scheduler/filter", body)
        self.assertEqual(local.status, 200, local.text)
        remote = HttpClient("https://%s:%d" % (addr, self.kq.port), ca=certs()["ca"])
        remote.ctx.check_hostname = False
        r = remote.post("/scheduler/filter", body)
        self.assertEqual(r.status, 403, r.text)
        self.assertIn("extender-local-only", r.json()["error"])
        # the webhooks and health stay reachable from elsewhere (the API server calls them)
        self.assertEqual(remote.get("/healthz").status, 200)


class SlowClientTest(KQTestCase):
    """A client that stops sending in the middle of a request (slow loris) is cut off, and
    other clients are served meanwhile."""
    CONFIG = queues_config({"name": "default"})

    def test_stalled_body_is_cut_off(self):
        ctx = ssl.create_default_context(cafile=certs()["ca"])
        raw = socket.create_connection(("127.0.0.1", self.kq.port), timeout=30)
        s = ctx.wrap_socket(raw, server_hostname="localhost")
        s.sendall(b"POST /scheduler/filter HTTP/1.1\r\nHost: localhost\r\n"
                  b"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"Pod\":")
        start = time.monotonic()
        # another client is served while this one stalls
        self.assertEqual(self.kq.get("/healthz").status, 200)
        data = b""
        try:
            while True:
                chunk = s.recv(4096)
                if not chunk:
                    break
                data += chunk
        except (ssl.SSLError, OSError):
            pass
        waited = time.monotonic() - start
        s.close()
        # the server gave up on the request (an error answer or a closed connection) well
        # before the client's own 30 s timeout, and counted nothing
        self.assertLess(waited, 28, "the stalled request held its connection for %.1fs" % waited)
        self.assertFalse(data.startswith(b"HTTP/1.1 200"), data[:200])
        self.assertTrue(self.kq.alive())
