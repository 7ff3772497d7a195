"""Dependencies (libblitz 0.3) from Python: Executor.submit_after(after, fn,
...) runs fn once its predecessors (Futures, blitz.Events) completed, with
no thread waiting; blitz.Event set from Python, waited for, awaited in
asyncio; an unset event at interpreter exit does not hang it."""
import asyncio
import concurrent.futures as cf
import os
import subprocess
import sys
import textwrap
import threading
import time
import unittest

import support
import blitz

GUARD = 60  # seconds: a bound on waits for conditions, never a measurement


def threads_of_this_process():
    return len(os.listdir("/proc/self/task"))


class TestSubmitAfter(unittest.TestCase):
    def setUp(self):
        self.executor = blitz.Executor(max_workers=2)
        self.addCleanup(self.executor.shutdown, True)
        self.events = []
        self.addCleanup(lambda: [event.close() for event in self.events])

    def event(self):
        event = blitz.Event()
        self.events.append(event)
        return event

    def test_runs_after_its_predecessor_futures(self):
        order = []
        lock = threading.Lock()

        def step(name, pause=0.0):
            time.sleep(pause)
            with lock:
                order.append(name)
            return name

        first = self.executor.submit(step, "first", 0.1)
        second = self.executor.submit(step, "second", 0.05)
        by_hand = cf.Future()   # any concurrent.futures.Future, completed by hand
        last = self.executor.submit_after([first, second, by_hand], step, "last")
        time.sleep(0.2)
        self.assertFalse(last.done(), "ran before the Future set by hand")
        by_hand.set_result(None)
        self.assertEqual(last.result(GUARD), "last")
        self.assertEqual(order[-1], "last")
        self.assertEqual(sorted(order[:2]), ["first", "second"])

    def test_a_failed_or_cancelled_predecessor_cancels_the_task(self):
        ran = []
        failing = self.executor.submit(lambda: 1 / 0)
        after_failure = self.executor.submit_after([failing], ran.append, "after failure")
        with self.assertRaises(cf.CancelledError):
            after_failure.result(GUARD)
        cancelled = cf.Future()
        self.assertTrue(cancelled.cancel())
        after_cancel = self.executor.submit_after([cancelled], ran.append, "after cancel")
        with self.assertRaises(cf.CancelledError):
            after_cancel.result(GUARD)
        self.assertEqual(ran, [])

    def test_waiting_successors_hold_no_thread(self):
        event = self.event()
        self.executor.submit(abs, 1).result(GUARD)   # the workers exist before the count
        before = threads_of_this_process()
        successors = [self.executor.submit_after([event], abs, -i) for i in range(100)]
        time.sleep(0.05)
        self.assertEqual(threads_of_this_process(), before)
        self.assertFalse(any(f.done() for f in successors))
        event.set()
        self.assertEqual([f.result(GUARD) for f in successors], list(range(100)))

    def test_events(self):
        ok, failed, closed = self.event(), self.event(), self.event()
        ran = []
        runs = self.executor.submit_after([ok], ran.append, "ok")
        skipped = self.executor.submit_after([failed], ran.append, "failed")
        dropped = self.executor.submit_after([closed], ran.append, "closed")
        self.assertFalse(ok.is_set())
        with self.assertRaises(cf.TimeoutError):
            ok.wait(0.01)
        threading.Timer(0.05, ok.set).start()
        self.assertEqual(ok.wait(GUARD), blitz.BLZ_OK)
        failed.set(blitz.BLZ_ETASK)
        closed.close()
        runs.result(GUARD)
        for future in (skipped, dropped):
            with self.assertRaises(cf.CancelledError):
                future.result(GUARD)
        self.assertEqual(ran, ["ok"])
        self.assertEqual(failed.wait(), blitz.BLZ_ETASK)
        self.assertEqual(closed.wait(), blitz.BLZ_ECANCELED)

    def test_event_misuse_is_an_error_not_a_crash(self):
        event = self.event()
        event.set()
        with self.assertRaises(blitz.BlitzError) as again:
            event.set()
        self.assertEqual(again.exception.status, blitz.BLZ_EINVAL)
        with self.assertRaises(ValueError):
            self.event().set(12345)
        event.close()
        event.close()   # idempotent
        self.assertEqual(event.wait(), blitz.BLZ_OK, "a closed event keeps the status it was set with")
        with self.assertRaises(blitz.BlitzError):
            event.set()
        with self.assertRaises(blitz.BlitzError):
            self.executor.submit_after([event], abs, 1)
        with self.assertRaises(TypeError):
            self.executor.submit_after([object()], abs, 1)

    def test_submit_keeps_its_standard_signature(self):
        def takes_after(after):
            return after

        self.assertEqual(self.executor.submit(takes_after, after=7).result(GUARD), 7)


class TestAwaitEvents(unittest.TestCase):
    def test_await_an_event_set_by_another_thread(self):
        plain, failed = blitz.Event(), blitz.Event()
        self.addCleanup(plain.close)
        self.addCleanup(failed.close)

        async def main():
            threading.Timer(0.05, plain.set).start()
            threading.Timer(0.05, failed.set, (blitz.BLZ_ETASK,)).start()
            return await plain, await failed

        self.assertEqual(asyncio.run(main()), (blitz.BLZ_OK, blitz.BLZ_ETASK))

    def test_await_a_closed_event_and_many_awaits(self):
        events = [blitz.Event() for _ in range(20)]

        async def main():
            awaiting = asyncio.gather(*events)
            await asyncio.sleep(0.05)
            for i, event in enumerate(events):
                if i % 2:
                    event.close()
                else:
                    event.set()
            return await awaiting

        statuses = asyncio.run(main())
        self.assertEqual(statuses, [blitz.BLZ_OK if i % 2 == 0 else blitz.BLZ_ECANCELED for i in range(20)])
        for event in events:
            event.close()


class TestExitWithAnUnsetEvent(unittest.TestCase):
    def test_exit_does_not_wait_for_an_event_nobody_sets(self):
        code = textwrap.dedent(f"""
            import sys
            sys.path.insert(0, {support.PACKAGE_PARENT!r})
            import blitz
            executor = blitz.Executor(max_workers=2)
            never = blitz.Event()
            executor.submit_after([never], print, "ran")
            print("exiting")
        """)
        try:
            done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                                  env=support.subprocess_env())
        except subprocess.TimeoutExpired as exc:
            self.fail(f"the exit waited for the event (a hang):\n{exc.stdout}\n{exc.stderr}")
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(done.stdout.split(), ["exiting"], "the successor was cancelled, not run")
        self.assertNotIn("Traceback", done.stderr)


if __name__ == "__main__":
    unittest.main()
