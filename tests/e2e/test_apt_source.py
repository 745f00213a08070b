"""scripts/apt-source.sh reads the Debian archive from the machine's own apt sources (issue
28), so scripts/deps.sh (deb-src for civetweb) and scripts/image.sh (debootstrap) work behind
any mirror; and no script names a mirror host of its own."""

import os
import re
import subprocess
import tempfile
import unittest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOL = os.path.join(REPO, "scripts", "apt-source.sh")
MIRROR = "http://apt-mirror.invalid/debian"  # .invalid: never a real host


def run(etc, what):
    return subprocess.run(["bash", TOOL, what], capture_output=True, text=True, timeout=10,
                          env=dict(os.environ, KQ_APT_ETC=etc))


class AptSourceTest(unittest.TestCase):
    def etc(self, sources_list=None, **files):
        d = tempfile.mkdtemp()
        self.addCleanup(subprocess.run, ["rm", "-rf", d])
        os.makedirs(os.path.join(d, "sources.list.d"))
        if sources_list is not None:
            with open(os.path.join(d, "sources.list"), "w") as f:
                f.write(sources_list)
        for name, text in files.items():
            with open(os.path.join(d, "sources.list.d", name.replace("_", ".")), "w") as f:
                f.write(text)
        return d

    def test_deb822(self):
        d = self.etc(debian_sources="Types: deb\nURIs: %s\nSuites: bookworm bookworm-updates\nComponents: main\n"
                     "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n\n"
                     "Types: deb\nURIs: %s-security\nSuites: bookworm-security\nComponents: main\n" % (MIRROR, MIRROR))
        self.assertEqual(run(d, "mirror").stdout, MIRROR + "\n")
        self.assertEqual(run(d, "deb-src").stdout,
                         "Types: deb-src\nURIs: %s\nSuites: bookworm bookworm-updates\nComponents: main\n"
                         "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n\n" % MIRROR)

    def test_one_line_with_options(self):
        d = self.etc("# a comment\ndeb [arch=amd64 signed-by=/etc/k.gpg] %s bookworm main contrib\n"
                     "deb %s-security bookworm-security main\n" % (MIRROR, MIRROR))
        self.assertEqual(run(d, "mirror").stdout, MIRROR + "\n")
        self.assertEqual(run(d, "deb-src").stdout, "Types: deb-src\nURIs: %s\nSuites: bookworm\n"
                                                   "Components: main contrib\nSigned-By: /etc/k.gpg\n\n" % MIRROR)

    def test_disabled_and_missing(self):
        d = self.etc(x_sources="Types: deb\nURIs: %s\nSuites: bookworm\nComponents: main\nEnabled: no\n" % MIRROR,
                     y_list_disabled="deb %s bookworm main\n" % MIRROR)
        r = run(d, "mirror")
        self.assertEqual((r.returncode, r.stdout), (1, ""))
        self.assertIn("no Debian archive", r.stderr)
        self.assertEqual(run(d, "nonsense").returncode, 1)  # no entry comes first

    def test_no_mirror_host_named(self):
        for path in ["Makefile", "Dockerfile"] + ["scripts/" + f for f in os.listdir(os.path.join(REPO, "scripts"))]:
            with open(os.path.join(REPO, path)) as f:
                text = f.read()
            for host in re.findall(r"https?://([a-z0-9.-]*(?:debian|ubuntu|mirror)[a-z0-9.-]*)", text):
                self.fail("%s names the mirror %s: take it from the machine's apt sources" % (path, host))
