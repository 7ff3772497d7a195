"""Ctrl-C at any moment: no interrupt may leave the binding's state half
changed (a lock held, a unit of work counted for nothing, a record left),
and Ctrl-C during the exit handler must not end the process before the
pools are closed. Each case runs ctrl_c_child.py in a child process with a
timeout, so that a wedge is a failed test rather than a hung suite."""
import os
import signal
import subprocess
import sys
import tempfile
import time
import unittest

import support

CHILD = os.path.join(support.HERE, "ctrl_c_child.py")
BOUND = 240   # seconds: far above what a run takes; reaching it means a wedge
STOPPED_BY = {-signal.SIGABRT: "SIGABRT", -signal.SIGSEGV: "SIGSEGV", -signal.SIGKILL: "SIGKILL"}


def describe(done):
    return (f"exit status {done.returncode} {STOPPED_BY.get(done.returncode, '')}\n"
            f"--- stdout (end)\n{done.stdout[-3000:]}\n--- stderr (end)\n{done.stderr[-3000:]}")


class TestInterruptsLeaveNothingHalfChanged(unittest.TestCase):
    def run_child(self, *args):
        try:
            return subprocess.run([sys.executable, CHILD, *args], capture_output=True, text=True,
                                  timeout=BOUND, env=support.subprocess_env())
        except subprocess.TimeoutExpired as exc:
            self.fail(f"the child did not end in {BOUND} s (a wedge):\n{exc.stdout}\n{exc.stderr}")

    def test_an_interrupt_at_every_point(self):
        # One KeyboardInterrupt at each point where CPython can raise one
        # (see ctrl_c_child.py), in turn, in submit, result, map, stats,
        # parallel_for, cancel, Pool's calls, shutdown and close; then every
        # pool shuts down (wait=True) and nothing may be left over.
        done = self.run_child("every-point")
        self.assertEqual(done.returncode, 0, describe(done))
        self.assertRegex(done.stdout, r"checked: [1-9]\d+ interrupts.*; 0 problems")

    def test_interrupts_by_real_signals(self):
        # The same operations for 3 s under SIGALRM at random 20 us - 2 ms
        # intervals, whose handler raises KeyboardInterrupt: this also lands
        # inside blocking waits, which tracing cannot reach.
        done = self.run_child("signals", "3")
        self.assertEqual(done.returncode, 0, describe(done))
        self.assertRegex(done.stdout, r"checked: \d+ operations, [1-9]\d* interrupted; 0 problems")


@unittest.skipIf(support.UNDER_TSAN, "the child's timing under ThreadSanitizer is too slow for it")
class TestCtrlCAtExit(unittest.TestCase):
    """The child ends with 41 tasks of ~1 s of Python each, 40 of them on
    an executor of 2 workers (20 s if all run); the parent presses Ctrl-C
    while blitz's exit handler waits for them."""

    def exit_with_ctrl_c(self, presses):
        log = tempfile.NamedTemporaryFile("r", prefix="blitz-exit-", suffix=".log", delete=False)
        self.addCleanup(os.unlink, log.name)
        child = subprocess.Popen([sys.executable, CHILD, "at-exit"], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True,
                                 env=support.subprocess_env(BLITZ_TASK_LOG=log.name))
        try:
            self.assertEqual(child.stdout.readline(), "exiting\n")
            for _ in range(presses):
                time.sleep(0.3)   # the main program has ended: the exit handler is waiting
                child.send_signal(signal.SIGINT)
            started = time.monotonic()
            stdout, stderr = child.communicate(timeout=BOUND)
            waited = time.monotonic() - started
        finally:
            if child.poll() is None:
                child.kill()
                child.communicate()
        done = subprocess.CompletedProcess(child.args, child.returncode, stdout, stderr)
        lines = log.read().splitlines()
        return done, waited, lines

    def check_exit(self, done, lines):
        self.assertNotIn(done.returncode, STOPPED_BY, describe(done))
        self.assertNotIn("libblitz: fatal", done.stderr, describe(done))
        self.assertNotIn("Fatal Python error", done.stderr, describe(done))
        self.assertIn("blitz: Ctrl-C at exit", done.stderr, describe(done))
        started = {line.split()[1] for line in lines if line.startswith("start ")}
        ended = {line.split()[1] for line in lines if line.startswith("ran ")}
        self.assertEqual(started, ended, "every task that started ran to its end")
        self.assertGreater(len(ended), 0)
        self.assertLess(len(ended), 41, "the tasks not started were skipped")
        # The interrupt is delivered again once the pools are closed: the
        # default handler's KeyboardInterrupt, reported by atexit.
        self.assertIn("KeyboardInterrupt", done.stderr, describe(done))

    def test_one_ctrl_c_skips_what_has_not_started_and_waits_for_the_rest(self):
        done, waited, lines = self.exit_with_ctrl_c(1)
        self.check_exit(done, lines)
        self.assertLess(waited, 8.0, "the tasks not started were skipped, not waited for")

    def test_a_second_ctrl_c_keeps_waiting_for_the_running_tasks(self):
        done, waited, lines = self.exit_with_ctrl_c(2)
        self.check_exit(done, lines)
        self.assertIn("blitz: Ctrl-C again at exit", done.stderr, describe(done))


if __name__ == "__main__":
    unittest.main()
