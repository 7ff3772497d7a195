"""`await` on blitz Futures (Executor.submit, submit_c, Pool.spawn) in asyncio:
woken by the task's on_done through loop.call_soon_threadsafe, with no thread
per wait; cancellation both ways; a loop closed, interrupted by Ctrl-C or
abandoned at interpreter exit before the task ends."""
import asyncio
import logging
import os
import subprocess
import sys
import textwrap
import threading
import unittest

import support
import blitz

GUARD = 60  # seconds: a bound on waits for conditions, never a measurement


def threads_of_this_process():
    return len(os.listdir("/proc/self/task"))


class CallbackLog(logging.Handler):
    """What the standard Future logger ("concurrent.futures") records: a
    done callback that raised is logged there."""

    def __init__(self):
        super().__init__(logging.ERROR)
        self.records = []

    def emit(self, record):
        self.records.append(record)


class TestAwait(unittest.TestCase):
    def setUp(self):
        self.executor = blitz.Executor(max_workers=2)
        self.addCleanup(self.executor.shutdown, True)
        self.gates = []
        self.addCleanup(lambda: [gate.set() for gate in self.gates])
        self.log = CallbackLog()
        logger = logging.getLogger("concurrent.futures")
        logger.addHandler(self.log)
        self.addCleanup(logger.removeHandler, self.log)

    def gate(self):
        gate = threading.Event()
        self.gates.append(gate)
        return gate

    def test_await_gives_the_value_or_the_exception(self):
        def fail():
            raise KeyError("in the task")

        async def main():
            value = await self.executor.submit(pow, 2, 10)
            with blitz.Pool(num_threads=1) as pool:
                spawned = await pool.spawn(sum, [1, 2, 3])
            with self.assertRaises(KeyError) as raised:
                await self.executor.submit(fail)
            done = self.executor.submit(abs, -5)
            done.result(GUARD)
            return value, spawned, raised.exception, await done   # done: no loop hop

        value, spawned, exc, already = asyncio.run(main())
        self.assertEqual((value, spawned, already), (1024, 6, 5))
        self.assertEqual(exc.args, ("in the task",))
        self.assertEqual(self.log.records, [])

    @unittest.skipIf(support.kernel() is None, support.kernel_skip_reason())
    def test_await_a_c_task(self):
        kernel = support.kernel()
        counter = bytearray(8)
        increment = blitz.TASK_FN(("blz_test_increment", kernel))
        failing = blitz.TASK_FN(("blz_test_failing_task", kernel))

        async def main():
            values = [await self.executor.submit_c(increment, counter) for _ in range(3)]
            with self.assertRaises(blitz.BlitzError) as raised:
                await self.executor.submit_c(failing)
            return values, raised.exception.status

        values, status = asyncio.run(main())
        self.assertEqual(values, [None] * 3)
        self.assertEqual(int.from_bytes(counter, "little"), 3)
        self.assertEqual(status, blitz.BLZ_ETASK)

    def test_many_awaits_start_no_thread(self):
        gate = self.gate()

        async def main():
            futures = [self.executor.submit(lambda i=i: gate.wait(GUARD) and i) for i in range(50)]
            awaiting = asyncio.gather(*futures)
            await asyncio.sleep(0.05)   # every await is registered
            during = threads_of_this_process()
            gate.set()
            return during, await awaiting

        self.executor.submit(abs, 1).result(GUARD)   # the workers exist before the count
        before = threads_of_this_process()
        during, results = asyncio.run(main())
        self.assertEqual(results, list(range(50)))
        self.assertEqual(during, before, "awaiting started threads")

    def test_cancelling_the_await_cancels_a_task_not_started(self):
        gate = self.gate()
        ran = []

        async def main():
            busy = [self.executor.submit(gate.wait, GUARD) for _ in range(2)]   # both workers held
            queued = self.executor.submit(ran.append, "ran")
            awaiting = asyncio.ensure_future(self._await(queued))
            await asyncio.sleep(0.05)
            awaiting.cancel()
            with self.assertRaises(asyncio.CancelledError):
                await awaiting
            gate.set()
            for future in busy:
                await future
            return queued

        queued = asyncio.run(main())
        self.assertTrue(queued.cancelled())
        self.assertEqual(ran, [])

    def test_cancelling_the_await_lets_a_running_task_finish(self):
        gate = self.gate()

        async def main():
            running = self.executor.submit(lambda: gate.wait(GUARD) and "finished")
            awaiting = asyncio.ensure_future(self._await(running))
            await asyncio.sleep(0.05)
            awaiting.cancel()
            with self.assertRaises(asyncio.CancelledError):
                await awaiting
            gate.set()
            return running

        running = asyncio.run(main())
        self.assertEqual(running.result(GUARD), "finished")
        self.assertEqual(self.log.records, [])

    def test_a_future_cancelled_elsewhere_raises_cancelled_error(self):
        gate = self.gate()

        async def main():
            busy = [self.executor.submit(gate.wait, GUARD) for _ in range(2)]
            queued = self.executor.submit(abs, -1)
            awaiting = asyncio.ensure_future(self._await(queued))
            await asyncio.sleep(0.05)
            self.assertTrue(queued.cancel())
            try:
                await awaiting
            except asyncio.CancelledError:
                return "cancelled", busy
            return "not cancelled", busy

        outcome, busy = asyncio.run(main())
        gate.set()
        self.assertEqual(outcome, "cancelled")
        for future in busy:
            future.result(GUARD)

    def test_the_loop_closed_before_the_task_ends(self):
        gate = self.gate()
        future = self.executor.submit(lambda: gate.wait(GUARD) and "late")
        loop = asyncio.new_event_loop()
        awaiting = loop.create_task(self._await(future))
        loop.run_until_complete(asyncio.sleep(0.05))   # the await is registered
        awaiting.cancel()
        loop.run_until_complete(asyncio.wait([awaiting]))
        loop.close()
        gate.set()
        self.assertEqual(future.result(GUARD), "late")
        # The done callback found the loop closed and did nothing: no log.
        self.executor.submit(abs, 1).result(GUARD)
        self.assertEqual(self.log.records, [])

    def test_awaiting_from_several_loops_in_threads(self):
        gate = self.gate()
        futures = [self.executor.submit(lambda i=i: gate.wait(GUARD) and i) for i in range(8)]
        results = {}

        def in_a_thread(index):
            async def main():
                return await futures[index]
            results[index] = asyncio.run(main())

        threads = [threading.Thread(target=in_a_thread, args=(i,)) for i in range(8)]
        for thread in threads:
            thread.start()
        gate.set()
        for thread in threads:
            thread.join(GUARD)
        self.assertEqual(results, {i: i for i in range(8)})

    @staticmethod
    async def _await(future):
        return await future


class TestAwaitAtTheEdges(unittest.TestCase):
    """In child processes: Ctrl-C in asyncio.run and interpreter exit while an
    await is pending; the child must end normally, with no traceback from
    a done callback and no fatal error."""

    def run_child(self, code):
        try:
            return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                                  text=True, timeout=240, env=support.subprocess_env())
        except subprocess.TimeoutExpired as exc:
            self.fail(f"the child did not end (a wedge):\n{exc.stdout}\n{exc.stderr}")

    def check(self, done, expected):
        report = f"exit {done.returncode}\n--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}"
        self.assertEqual(done.returncode, 0, report)
        self.assertEqual(done.stdout.split(), expected, report)
        self.assertNotIn("Traceback", done.stderr, report)
        self.assertNotIn("Fatal", done.stderr, report)

    PRELUDE = """
        import asyncio, os, signal, sys, threading, time
        sys.path.insert(0, {path!r})
        import blitz
        executor = blitz.Executor(max_workers=2)
        started = threading.Event()
        def slow():
            started.set()
            time.sleep(0.3)
            return "slow"
    """

    def prelude(self):
        return self.PRELUDE.format(path=support.PACKAGE_PARENT)

    def test_ctrl_c_in_asyncio_run_while_awaiting(self):
        done = self.run_child(self.prelude() + """
        future = executor.submit(slow)
        async def main():
            started.wait(60)
            os.kill(os.getpid(), signal.SIGINT)   # Ctrl-C: asyncio.run cancels main
            return await future
        try:
            asyncio.run(main())
        except KeyboardInterrupt:
            print("interrupted")
        print(future.result(60))   # the task ran on; its end found the loop closed
        executor.shutdown()
        print("closed")
        """)
        self.check(done, ["interrupted", "slow", "closed"])

    def test_exit_with_an_await_pending(self):
        # The loop is left running nowhere and never closed; the interpreter
        # exits while the task still runs: the exit handler waits for it,
        # and its end finds nobody to wake.
        done = self.run_child(self.prelude() + """
        loop = asyncio.new_event_loop()
        async def main():
            return await executor.submit(slow)
        task = loop.create_task(main())
        loop.run_until_complete(asyncio.sleep(0.01))
        started.wait(60)
        print("exiting")
        """)
        self.check(done, ["exiting"])


if __name__ == "__main__":
    unittest.main()
