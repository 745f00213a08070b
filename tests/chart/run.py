#!/usr/bin/python3
"""Runs the chart, manifests, RBAC, Dockerfile and install end-to-end tests (tests/chart/test_*.py).

  /usr/bin/python3 tests/chart/run.py [-k PATTERN ...] [-v]

Uses the Helm that scripts/helm.sh fetches (KQ_HELM overrides) and bin/kubequota
(KQ_BINARY overrides). The last line is always
  chart: N passed, M failed[, K skipped]
and the exit status is 1 when anything failed.
"""

import argparse
import fnmatch
import os
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def iter_tests(suite):
    for t in suite:
        if isinstance(t, unittest.TestSuite):
            yield from iter_tests(t)
        else:
            yield t


class Result(unittest.TestResult):
    def __init__(self, verbose):
        super().__init__()
        self.verbose, self.passed, self.t0 = verbose, 0, 0.0

    def startTest(self, test):
        super().startTest(test)
        self.t0 = time.monotonic()

    def line(self, status, test, extra=""):
        if self.verbose or status != "ok":
            print("%-5s %s (%.1fs)%s" % (status, test.id(), time.monotonic() - self.t0, extra), flush=True)

    def addSuccess(self, test):
        super().addSuccess(test)
        self.passed += 1
        self.line("ok", test)

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self.line("skip", test, ": " + reason)

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self.line("FAIL", test)
        print(self._exc_info_to_string(err, test), flush=True)

    def addError(self, test, err):
        super().addError(test, err)
        self.line("ERROR", test)
        print(self._exc_info_to_string(err, test), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-k", action="append", default=[], help="run tests whose id matches this glob")
    ap.add_argument("-v", action="store_true", help="print every test")
    a = ap.parse_args()
    t0 = time.monotonic()
    try:
        import chartlib
        print("chart: helm %s" % chartlib.helm("version", "--short").stdout.strip(), flush=True)
    except Exception as e:  # no Helm, no chart tests: say so and fail
        print("chart: cannot run: %s" % e)
        print("chart: 0 passed, 1 failed")
        return 1
    suite = unittest.defaultTestLoader.discover(HERE, pattern="test_*.py", top_level_dir=HERE)
    tests = list(iter_tests(suite))
    if a.k:
        tests = [t for t in tests if any(fnmatch.fnmatch(t.id(), "*" + k + "*") for k in a.k)]
    res = Result(a.v)
    unittest.TestSuite(tests).run(res)
    failed = len(res.failures) + len(res.errors)
    skipped = len(res.skipped)
    print("chart: %.0fs" % (time.monotonic() - t0))
    print("chart: %d passed, %d failed%s" % (res.passed, failed, ", %d skipped" % skipped if skipped else ""))
    return 1 if failed or not res.testsRun else 0


if __name__ == "__main__":
    sys.exit(main())
