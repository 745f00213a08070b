"""`make run` as a newcomer meets it (issue 28): scripts/run.sh (what the Makefile's run target
runs) starts the simulator and kubequota with the admission gate on, shows the fair order,
prints a kubectl plugin line that works when pasted, never suggests editing a tracked file,
and Ctrl-C (SIGINT to its whole process group, as a terminal sends it) stops everything it
started: exit 0 or 130, no traceback, no process left in the group."""

import os
import queue
import re
import signal
import socket
import subprocess
import tempfile
import threading
import time
import unittest

from kqtest import REPO, binary, have_binary, tmp_root

DEADLINE_S = 120  # a hang guard only: the script is ready in seconds


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class MakeRun:
    """scripts/run.sh in a session (process group) of its own, its output read line by line."""

    def __init__(self, test):
        self.workdir = tempfile.mkdtemp(prefix="kq-run-", dir=tmp_root())  # removed at exit unless --keep
        env = dict(os.environ, KQ_LISTEN="127.0.0.1:%d" % free_port(), KQ_RUN_DIR=self.workdir,
                   KQ_BINARY=os.path.abspath(binary()))
        env.pop("KQ_CONFIG", None)
        env.pop("KQ_KUBECONFIG", None)
        self.p = subprocess.Popen(["bash", "scripts/run.sh"], cwd=REPO, env=env, start_new_session=True,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.pgid = self.p.pid
        self.lines, self.q = [], queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        test.addCleanup(self.kill)

    def _read(self):
        for line in self.p.stdout:
            self.q.put(line)
        self.q.put(None)

    def until(self, pred):
        """Lines up to the first one pred accepts (the output so far on EOF or the deadline)."""
        end = time.monotonic() + DEADLINE_S
        while time.monotonic() < end:
            try:
                line = self.q.get(timeout=1)
            except queue.Empty:
                continue
            if line is None:
                break
            self.lines.append(line)
            if pred(line):
                return True
        return False

    def interrupt(self):
        """Ctrl-C: SIGINT to every process of the group; the rest of the output and the exit code."""
        os.killpg(self.pgid, signal.SIGINT)
        rc = self.p.wait(timeout=DEADLINE_S)
        self.until(lambda line: False)
        return rc

    def group_alive(self):
        try:
            os.killpg(self.pgid, 0)
            return True
        except ProcessLookupError:
            return False

    def group_ps(self):
        r = subprocess.run(["ps", "-o", "pid,stat,cmd", "-g", str(self.pgid)], capture_output=True, text=True)
        return r.stdout

    def kill(self):
        if self.group_alive():
            os.killpg(self.pgid, signal.SIGKILL)
        if self.p.poll() is None:
            self.p.wait(10)

    def out(self):
        return "".join(self.lines)


class MakeRunTest(unittest.TestCase):
    def setUp(self):
        if not have_binary():
            self.skipTest("%s not built" % binary())

    def assert_clean_stop(self, run, rc):
        out = run.out()
        self.assertIn(rc, (0, 130), out)
        self.assertNotIn("Traceback", out)
        self.assertNotIn("KeyboardInterrupt", out)
        self.assertNotIn("exited; last log lines", out)  # kubequota did not die on its own
        self.assertFalse(run.group_alive(), "processes left after Ctrl-C:\n%s" % run.group_ps())

    def test_demo_shows_the_gate_prints_a_working_plugin_line_and_stops_on_ctrl_c(self):
        run = MakeRun(self)
        self.assertTrue(run.until(lambda line: "Press Ctrl-C to stop" in line), run.out())
        out = run.out()
        # the gate is on: pods wait in line with their place and reason
        self.assertIn("behind the admission gate", out)
        waits = [line for line in out.splitlines() if line.lstrip().startswith("WAITS")]
        self.assertTrue(waits, out)
        self.assertTrue(all(re.search(r" \d+ of \d+ ", line) for line in waits), waits)
        self.assertTrue(any(line.lstrip().startswith("BOUND") for line in out.splitlines()), out)

        # the dashboard: its URL and where its token is; the page and a view it reads answer
        dash = re.search(r"^\s*dashboard\s+(https://\S+/ui/)\s+\(Token button: paste the token in (\S+)\)$",
                         out, re.M)
        self.assertIsNotNone(dash, out)
        ca = os.path.join(REPO, "build", "dev-certs", "ca.crt")
        page = subprocess.run(["curl", "-sS", "--cacert", ca, "-o", "/dev/null", "-w", "%{http_code}", dash.group(1)],
                              capture_output=True, text=True, timeout=30)
        self.assertEqual(page.stdout, "200", page.stderr)
        with open(dash.group(2)) as f:
            token = f.read().strip()
        view = subprocess.run(["curl", "-sS", "--cacert", ca, "-o", "/dev/null", "-w", "%{http_code}", "-H",
                               "Authorization: Bearer " + token, dash.group(1).replace("/ui/", "/ws/v1/partition/"
                                                                                        "default/queues")],
                              capture_output=True, text=True, timeout=30)
        self.assertEqual(view.stdout, "200", view.stderr)

        # the plugin line, pasted as it is, answers (through the simulator's service proxy)
        lines = [line.strip() for line in out.splitlines() if line.strip().endswith(" kubectl usage")]
        self.assertEqual(len(lines), 1, out)
        r = subprocess.run(["bash", "-c", lines[0]], cwd=tempfile.gettempdir(), capture_output=True, text=True,
                           timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.splitlines()[0].split(), ["USER", "QUEUE", "CPU", "MEMORY", "PODS", "APPS"])
        self.assertIn("alice", r.stdout)
        r = subprocess.run(["bash", "-c", lines[0][:-len("usage")] + "waiting"], capture_output=True, text=True,
                           timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("alice-train-3", r.stdout)

        # the file it suggests editing is not one git tracks
        edit = re.search(r"^Edit (\S+) and kubequota reloads it", out, re.M)
        self.assertIsNotNone(edit, out)
        tracked = subprocess.run(["git", "ls-files", "--error-unmatch", edit.group(1)], cwd=REPO,
                                 capture_output=True, text=True)
        self.assertNotEqual(tracked.returncode, 0, "make run suggests editing the tracked file %s" % edit.group(1))

        self.assert_clean_stop(run, run.interrupt())

    def test_ctrl_c_during_the_sample_workload(self):
        run = MakeRun(self)
        self.assertTrue(run.until(lambda line: line.lstrip().startswith(("BOUND", "DENIED"))), run.out())
        self.assert_clean_stop(run, run.interrupt())


if __name__ == "__main__":
    unittest.main()
