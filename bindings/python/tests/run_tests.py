#!/usr/bin/env python3
"""Runs the binding's unittest suite (unittest discover on this directory)
and writes unittest's report to stdout, then the summary line that
tools/test_summary.py counts:

    python: N passed, M failed

A test counts once: passed when it and all its subtests passed, failed
when it (or any of its subtests) failed or raised, or passed although
marked as an expected failure. Skipped tests are neither; a line
"python: S skipped" names them. Exit status 0 when no test failed and at
least one passed.

A watchdog dumps every thread's stack and exits if the suite hangs.
"""
import faulthandler
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
WATCHDOG_SECONDS = 540  # below the meson timeout (600 s)


class CountingResult(unittest.TextTestResult):
    """unittest's text result, plus the outcome of each test by its id."""

    def startTestRun(self):
        super().startTestRun()
        self.outcomes = {}  # test id -> "passed", "failed" or "skipped"

    def record(self, test, outcome):
        if self.outcomes.get(test.id()) != "failed":  # a failure is final
            self.outcomes[test.id()] = outcome

    def addSubTest(self, test, subtest, err):
        super().addSubTest(test, subtest, err)
        if err is not None:  # the test itself may report success afterwards: failed stays
            self.record(test, "failed")

    def count(self, outcome):
        return sum(1 for value in self.outcomes.values() if value == outcome)


# What each of unittest's reports means for the count.
OUTCOMES = {"addSuccess": "passed", "addExpectedFailure": "passed", "addSkip": "skipped",
            "addFailure": "failed", "addError": "failed", "addUnexpectedSuccess": "failed"}


def _recording(name, outcome):
    report = getattr(unittest.TextTestResult, name)

    def method(self, test, *details):
        report(self, test, *details)
        self.record(test, outcome)
    return method


for _name, _outcome in OUTCOMES.items():
    setattr(CountingResult, _name, _recording(_name, _outcome))


def main():
    sys.path.insert(0, os.path.dirname(HERE))  # the package, when not on PYTHONPATH
    faulthandler.enable()
    faulthandler.dump_traceback_later(WATCHDOG_SECONDS, exit=True)
    suite = unittest.defaultTestLoader.discover(HERE, pattern="test*.py", top_level_dir=HERE)
    runner = unittest.TextTestRunner(stream=sys.stdout, verbosity=2, resultclass=CountingResult)
    result = runner.run(suite)
    faulthandler.cancel_dump_traceback_later()
    passed, failed, skipped = (result.count(o) for o in ("passed", "failed", "skipped"))
    if skipped:
        print(f"python: {skipped} skipped")
    print(f"python: {passed} passed, {failed} failed", flush=True)
    return 0 if failed == 0 and passed > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
