#!/usr/bin/python3
"""Runs kubequota's end-to-end scenarios (tests/e2e/test_*.py).

  python3 tests/e2e/run.py [--binary bin/kubequota] [-k PATTERN ...] [-v] [--keep]

Each scenario starts its own API simulator and its own kubequota. On a failure the tail
of that kubequota's log is printed. The last line is always
  e2e: N passed, M failed[, K skipped]
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
        self.verbose = verbose
        self.passed = 0
        self.t0 = 0.0

    def startTest(self, test):
        super().startTest(test)
        self.t0 = time.monotonic()
        if self.verbose:
            print("  ... %s" % test.id(), flush=True)

    def line(self, status, test, extra=""):
        print("%-5s %s (%.1fs)%s" % (status, test.id(), time.monotonic() - self.t0, extra),
              flush=True)

    def addSuccess(self, test):
        super().addSuccess(test)
        self.passed += 1
        self.line("ok", test)

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self.line("skip", test, ": " + reason)

    def _fail(self, kind, test, err):
        self.line(kind, test)
        print(self._exc_info_to_string(err, test), flush=True)
        kq = getattr(test, "kq", None)
        if kq is not None and getattr(kq, "starts", 0):
            print("  kubequota log (%s), last lines:\n%s" % (kq.log_path, kq.log_tail(40)),
                  flush=True)

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._fail("FAIL", test, err)

    def addError(self, test, err):
        super().addError(test, err)
        self._fail("ERROR", test, err)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--binary", help="kubequota binary (default bin/kubequota)")
    ap.add_argument("-k", action="append", default=[], metavar="PATTERN",
                    help="run tests whose id contains PATTERN (or matches it as a glob)")
    ap.add_argument("-v", "--verbose", action="store_true")
    ap.add_argument("--keep", action="store_true", help="keep the temp dir (logs, configs)")
    args = ap.parse_args(argv)
    if args.binary:
        os.environ["KQ_BINARY"] = os.path.abspath(args.binary)
    if args.keep:
        os.environ["KQ_E2E_KEEP"] = "1"

    import kqtest  # after the environment is set
    loader = unittest.TestLoader()
    suite = loader.discover(HERE, pattern="test_*.py", top_level_dir=HERE)
    tests = list(iter_tests(suite))
    broken = [t for t in tests if t.__class__.__name__ in ("_FailedTest", "ModuleImportFailure")]
    if args.k:
        tests = [t for t in tests if t in broken or any(
            k in t.id() or fnmatch.fnmatch(t.id(), k) for k in args.k)]
    if not kqtest.have_binary():
        print("e2e: %s not found: only the simulator self-test can run" % kqtest.binary(),
              flush=True)
    result = Result(args.verbose)
    t0 = time.monotonic()
    unittest.TestSuite(tests).run(result)
    failed = len(result.failures) + len(result.errors)
    line = "e2e: %d passed, %d failed" % (result.passed, failed)
    if result.skipped:
        line += ", %d skipped" % len(result.skipped)
    if args.keep:
        print("e2e: logs and configs kept in %s" % kqtest.tmp_root())
    print("e2e: took %.1fs" % (time.monotonic() - t0))
    print(line, flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
