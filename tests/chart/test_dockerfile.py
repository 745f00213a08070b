"""The Dockerfile cannot be built here (no Docker engine); these checks keep it in step
with the Makefile and with what bin/kubequota links."""

import os
import re
import subprocess
import unittest

import chartlib as cl

DOCKERFILE = os.path.join(cl.REPO, "Dockerfile")
# In every Debian image already (everything depends on it).
BASE_IMAGE = {"libc6"}
# Needed at run time without being linked: TLS roots for API servers with public CAs.
EXTRA = {"ca-certificates"}


def stages():
    """[(FROM line, [RUN command text...], [other instructions...])] with continuations joined."""
    text = open(DOCKERFILE).read()
    text = re.sub(r"\\\n", " ", text)
    out = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        word, _, rest = line.partition(" ")
        if word.upper() == "FROM":
            out.append((rest, [], []))
        elif word.upper() == "RUN":
            out[-1][1].append(rest)
        else:
            out[-1][2].append(line)
    return out


def make_targets():
    text = open(os.path.join(cl.REPO, "Makefile")).read()
    return set(re.findall(r"(?m)^([A-Za-z0-9_./-]+)\s*:(?!=)", text))


def linked_packages():
    r = subprocess.run(["readelf", "-d", cl.binary()], capture_output=True, text=True, check=True)
    libs = re.findall(r"\(NEEDED\).*\[(.+)\]", r.stdout)
    ldd = subprocess.run(["ldd", cl.binary()], capture_output=True, text=True, check=True).stdout
    where = dict(re.findall(r"^\s*(\S+) => (\S+)", ldd, re.M))
    pkgs = {}
    for lib in libs:
        path = where[lib]
        cands = [path, os.path.realpath(path)]
        cands += [c.replace("/usr/lib/", "/lib/", 1) for c in cands]
        for c in cands:
            q = subprocess.run(["dpkg", "-S", c], capture_output=True, text=True)
            if q.returncode == 0:
                pkgs[lib] = q.stdout.split(":")[0]
                break
        else:
            raise AssertionError("no Debian package owns %s (%s)" % (lib, path))
    return pkgs


class Dockerfile(unittest.TestCase):
    def test_two_stages_from_bookworm(self):
        s = stages()
        self.assertEqual(len(s), 2)
        self.assertRegex(s[0][0], r"^debian:bookworm\s+AS\s+build$")
        self.assertEqual(s[1][0], "debian:bookworm-slim")

    def test_build_runs_make_targets_that_exist(self):
        runs = stages()[0][1]
        targets = make_targets()
        invoked = []
        for cmd in runs:
            for m in re.finditer(r"(?:^|&&|;)\s*make((?:\s+[^\s&;|]+)*)", cmd):
                words = [w for w in m.group(1).split() if not w.startswith("-") and "=" not in w]
                invoked += words or ["all"]   # bare make: the default goal, all
        self.assertEqual(invoked, ["deps", "all"], "the image builds with `make deps` then `make`")
        for t in invoked:
            self.assertIn(t, targets, "Makefile has no target %s" % t)
        text = open(os.path.join(cl.REPO, "Makefile")).read()
        self.assertRegex(text, r"(?m)^\.DEFAULT_GOAL := all$")
        self.assertRegex(text, r"(?m)^BIN := bin/kubequota$")
        copies = [l for l in stages()[1][2] if l.startswith("COPY --from=build")]
        self.assertEqual(copies, ["COPY --from=build /src/bin/kubequota /usr/local/bin/kubequota"])

    @unittest.skipUnless(cl.have_binary(), "bin/kubequota not built")
    def test_runtime_packages_are_the_linked_libraries(self):
        (run_install,) = [r for r in stages()[1][1] if "apt-get install" in r]
        m = re.search(r"apt-get install ((?:\s*[-\w.+=]+)+)", run_install)
        pkgs = {w for w in m.group(1).split() if not w.startswith("-")}
        want = (set(linked_packages().values()) - BASE_IMAGE) | EXTRA
        self.assertEqual(pkgs, want, "runtime packages differ from what bin/kubequota links")

    def test_runs_unprivileged(self):
        other = stages()[1][2]
        users = [l.split(None, 1)[1] for l in other if l.startswith("USER ")]
        self.assertEqual(len(users), 1)
        uid = users[0].split(":")[0]
        self.assertTrue(uid.isdigit() and int(uid) != 0, "numeric non-root USER (runAsNonRoot can check it)")
        ctx = cl.render("default").deployment()["spec"]["template"]["spec"]["securityContext"]
        self.assertEqual(ctx["runAsUser"], int(uid), "the chart runs the image's user")
        self.assertIn('ENTRYPOINT ["/usr/local/bin/kubequota"]', other)

    def test_dockerignore_keeps_keys_and_builds_out(self):
        lines = set(open(os.path.join(cl.REPO, ".dockerignore")).read().split())
        self.assertLessEqual({"build/", "bin/", "*.key", "*.pem", ".git"}, lines)
