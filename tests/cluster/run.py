#!/usr/bin/python3
"""Runs the real-cluster tier (tests/cluster/test_*.py) against one throwaway control plane
built from pinned Go modules (scripts/kube-build.sh) and started on loopback (cluster.py).

  python3 tests/cluster/run.py [--binary bin/kubequota] [-k PATTERN ...] [-v] [--keep]

The last line is always
  kube: N passed, M failed[, K skipped]
and the exit status is 1 when anything failed. On a failure the tails of kubequota's and
kube-scheduler's logs are printed; --keep keeps the work directory (logs, kubeconfigs).
"""

import argparse
import fnmatch
import importlib.util
import os
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import cluster as clus  # noqa: E402
import kubetest  # noqa: E402


# The e2e runner's result printer (one line a test, the traceback on failure), loaded by path:
# both runners are called run.py.
_spec = importlib.util.spec_from_file_location("e2e_run", os.path.join(os.path.dirname(HERE), "e2e", "run.py"))
e2e_run = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(e2e_run)
iter_tests = e2e_run.iter_tests


class Result(e2e_run.Result):
    """The e2e runner's, with the tails of kubequota's and kube-scheduler's logs on a failure."""

    def __init__(self, c):
        super().__init__(verbose=False)
        self.c = c

    def _fail(self, kind, test, err):
        super()._fail(kind, test, err)
        for name in ("kq", "kq-b", "kube-scheduler"):
            p = self.c.procs.get(name)
            if p:
                print("---- %s log tail ----\n%s" % (name, p.tail(30)), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary")
    ap.add_argument("-k", action="append", default=[])
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--failfast", action="store_true", help="stop at the first failure")
    a = ap.parse_args()
    if a.binary:
        os.environ["KQ_BINARY"] = os.path.abspath(a.binary)
    loader = unittest.TestLoader()
    suite = loader.discover(HERE, pattern="test_*.py", top_level_dir=HERE)
    tests = list(iter_tests(suite))
    if a.k:
        tests = [t for t in tests if any(fnmatch.fnmatch(t.id(), "*%s*" % k) for k in a.k)]
    for t in tests:
        if isinstance(t, unittest.loader._FailedTest):
            print("kube: could not load %s: %s" % (t.id(), t._exception))
            print("kube: 0 passed, 1 failed")
            return 1
    t0 = time.monotonic()
    c = clus.Cluster(keep=a.keep)
    try:
        c.start()
    except Exception as e:
        print("kube: the control plane did not start: %s" % e)
        for n, p in c.procs.items():
            print("---- %s ----\n%s" % (n, p.tail(30)))
        print("kube: 0 passed, 1 failed")
        return 1
    print("kube: control plane up in %.1fs (%s)" % (c.startup_seconds, c.work), flush=True)
    kubetest.CLUSTER = c
    res = Result(c)
    res.failfast = a.failfast
    try:
        unittest.TestSuite(tests).run(res)
    finally:
        c.stop()
    failed = len(res.failures) + len(res.errors)
    print("kube: ran in %.0fs" % (time.monotonic() - t0))
    line = "kube: %d passed, %d failed" % (res.passed, failed)
    if res.skipped:
        line += ", %d skipped" % len(res.skipped)
    print(line)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
