"""TLS lifecycle: the serving certificate is reloaded when its files change (cert-manager
rotates them in place), without a restart and without dropping the old one on a broken
rotation."""

import os
import shutil
import socket
import ssl
import subprocess

import kqtest
from kqtest import REPO, KQTestCase, Kubequota, certs, queues_config, tmp_root, wait_until


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
