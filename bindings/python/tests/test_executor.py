"""blitz.Executor: the concurrent.futures conformance cases run against both
ThreadPoolExecutor and blitz.Executor (they must behave alike), then what
only blitz.Executor does (completion by on_done, waits that run jobs,
group cancellation, C functions, Ctrl-C, asyncio)."""
import asyncio
import concurrent.futures as cf
import ctypes
import logging
import os
import signal
import threading
import time
import traceback
import unittest
import weakref

import support
import blitz
from blitz import _runtime as impl

GUARD = 60  # seconds: a bound on waits for conditions, never a measurement


def fail(message):
    raise ValueError(message)


def thread_name():
    return threading.current_thread().name


class Record:
    """A result that a weak reference can follow."""

    def __init__(self, value):
        self.value = value


class Gate:
    """A task body that blocks its worker until open() (or GUARD seconds)."""

    def __init__(self):
        self.event = threading.Event()
        self.started = threading.Event()

    def __call__(self, value=None):
        self.started.set()
        self.event.wait(GUARD)
        return value

    def open(self):
        self.event.set()


class Conformance:
    """The behaviour of concurrent.futures' executors that code relies on.
    Subclasses name the executor class; every case runs against both."""
    executor_class = None

    def make(self, max_workers=2, **kwargs):
        executor = self.executor_class(max_workers=max_workers, **kwargs)
        self.addCleanup(executor.shutdown, True)
        return executor

    def gate(self):
        gate = Gate()
        self.addCleanup(gate.open)   # cleanups run last-in first-out: call it after make()
        return gate

    # -- submit and Future -------------------------------------------------

    def test_submit_returns_a_standard_future(self):
        executor = self.make()
        future = executor.submit(lambda a, b=0, *, c: (a, b, c), 1, b=2, c=3)
        self.assertIsInstance(future, cf.Future)
        self.assertEqual(future.result(timeout=GUARD), (1, 2, 3))
        self.assertTrue(future.done())
        self.assertFalse(future.cancelled())
        self.assertIsNone(future.exception())

    def test_exception_keeps_type_message_and_traceback(self):
        future = self.make().submit(fail, "bad")
        exc = future.exception(timeout=GUARD)
        self.assertIsInstance(exc, ValueError)
        self.assertEqual(str(exc), "bad")
        names = [frame.name for frame in traceback.extract_tb(exc.__traceback__)]
        self.assertEqual(names[-1], "fail")
        with self.assertRaises(ValueError):
            future.result()

    def test_non_callable_fails_its_future(self):
        future = self.make().submit(42)
        self.assertIsInstance(future.exception(timeout=GUARD), TypeError)

    def test_result_and_exception_time_out(self):
        gate = self.gate()
        future = self.make().submit(gate, "late")
        with self.assertRaises(cf.TimeoutError):
            future.result(timeout=0.01)
        with self.assertRaises(cf.TimeoutError):
            future.exception(timeout=0)
        gate.open()
        self.assertEqual(future.result(timeout=GUARD), "late")

    def test_done_callbacks(self):
        executor = self.make()
        seen = []
        called = threading.Event()
        future = executor.submit(pow, 2, 5)
        future.add_done_callback(lambda f: (seen.append(f.result()), called.set()))
        self.assertTrue(called.wait(GUARD))
        later = []
        future.add_done_callback(lambda f: later.append(f))   # done already: called at once
        self.assertEqual(seen, [32])
        self.assertEqual(later, [future])

    def test_a_raising_callback_is_logged_not_propagated(self):
        future = self.make().submit(int)
        future.result(timeout=GUARD)
        with self.assertLogs("concurrent.futures", level="ERROR"):
            future.add_done_callback(lambda f: fail("in a callback"))

    def test_as_completed_and_wait(self):
        executor = self.make()
        futures = [executor.submit(pow, i, 2) for i in range(50)]
        done = set(cf.as_completed(futures, timeout=GUARD))
        self.assertEqual(done, set(futures))
        finished, pending = cf.wait(futures, timeout=GUARD)
        self.assertEqual((len(finished), len(pending)), (50, 0))
        self.assertEqual(sorted(f.result() for f in futures), sorted(i * i for i in range(50)))

    def test_wait_first_completed_and_first_exception(self):
        executor = self.make()
        gate = self.gate()
        slow = executor.submit(gate)
        quick = executor.submit(int)
        finished, pending = cf.wait([slow, quick], timeout=GUARD, return_when=cf.FIRST_COMPLETED)
        self.assertIn(quick, finished)
        self.assertIn(slow, pending)
        failing = executor.submit(fail, "x")
        finished, pending = cf.wait([slow, failing], timeout=GUARD, return_when=cf.FIRST_EXCEPTION)
        self.assertEqual(finished, {failing})
        gate.open()

    def test_as_completed_times_out(self):
        executor = self.make()
        gate = self.gate()   # opened before the executor's shutdown
        future = executor.submit(gate)
        with self.assertRaises(cf.TimeoutError):
            list(cf.as_completed([future], timeout=0.05))

    # -- cancel ------------------------------------------------------------

    def test_cancel_while_queued_and_not_while_running(self):
        executor = self.make(max_workers=1)
        gate = self.gate()
        running = executor.submit(gate)
        self.assertTrue(gate.started.wait(GUARD))
        queued = executor.submit(int)
        self.assertTrue(queued.cancel())
        self.assertTrue(queued.cancelled())
        self.assertFalse(running.cancel())
        with self.assertRaises(cf.CancelledError):
            queued.result()
        gate.open()
        self.assertIsNone(running.result(timeout=GUARD))
        self.assertTrue(queued.cancelled())

    # -- map -----------------------------------------------------------------

    def test_map_in_order_over_several_iterables(self):
        executor = self.make()
        self.assertEqual(list(executor.map(pow, range(20), [2] * 20)), [i * i for i in range(20)])
        self.assertEqual(list(executor.map(abs, [])), [])

    def test_map_with_chunks(self):
        executor = self.make()
        for chunksize in (1, 3, 7, 100):
            with self.subTest(chunksize=chunksize):
                results = executor.map(pow, range(25), [3] * 25, chunksize=chunksize)
                self.assertEqual(list(results), [i ** 3 for i in range(25)])

    def test_map_raises_at_the_failing_item(self):
        results = self.make().map(lambda x: 1 // x, [1, 2, 0, 4])
        self.assertEqual(next(results), 1)
        self.assertEqual(next(results), 0)
        with self.assertRaises(ZeroDivisionError):
            next(results)

    def test_map_submits_at_once_and_yields_lazily(self):
        executor = self.make()
        ran = []
        results = executor.map(ran.append, range(10))
        deadline = time.monotonic() + GUARD
        while len(ran) < 10 and time.monotonic() < deadline:   # before any result is asked for
            time.sleep(0.001)
        self.assertEqual(sorted(ran), list(range(10)))
        self.assertEqual(list(results), [None] * 10)

    def test_map_timeout(self):
        gate = self.gate()
        results = self.make().map(gate, [1])
        with self.assertRaises(cf.TimeoutError):
            next(self.make().map(gate, [1], timeout=0.05))
        gate.open()
        self.assertEqual(list(results), [1])

    def test_map_stopped_early_cancels_the_calls_not_started(self):
        executor = self.make(max_workers=1)
        gate = self.gate()
        ran = []

        def call(i):
            ran.append(i)
            if i == 0:
                gate()
            return i

        results = executor.map(call, range(50), timeout=0.05)
        with self.assertRaises(cf.TimeoutError):   # call 0 holds the only worker
            next(results)
        gate.open()
        executor.shutdown(wait=True)
        self.assertEqual(ran, [0])

    def test_shutdown_cancel_futures_cancels_map_calls_not_started(self):
        executor = self.make(max_workers=1)
        gate = self.gate()
        results = executor.map(gate, range(10))
        self.assertTrue(gate.started.wait(GUARD))
        executor.shutdown(wait=False, cancel_futures=True)
        gate.open()
        self.assertEqual(next(results), 0)
        with self.assertRaises(cf.CancelledError):
            next(results)

    def test_map_keeps_no_reference_to_a_yielded_result(self):
        # CPython's issue 14406: once the caller drops a result, nothing else holds it.
        for result in self.make().map(Record, range(10)):
            freed = weakref.ref(result)
            del result
            self.assertIsNone(freed())

    def test_map_over_an_iterable_that_raises_runs_the_items_before(self):
        executor = self.make()
        ran = []

        def items():
            yield from (1, 2, 3)
            raise ValueError("the iterable failed")

        with self.assertRaisesRegex(ValueError, "the iterable failed"):
            executor.map(ran.append, items())
        executor.shutdown(wait=True)
        self.assertEqual(sorted(ran), [1, 2, 3])

    def test_map_after_shutdown_raises_at_once(self):
        executor = self.make()
        executor.shutdown()
        with self.assertRaises(RuntimeError):
            executor.map(abs, [1])

    # -- shutdown ------------------------------------------------------------

    def test_shutdown_waits_and_refuses_new_work(self):
        executor = self.make()
        done = []
        futures = [executor.submit(lambda i=i: (time.sleep(0.001), done.append(i))) for i in range(20)]
        executor.shutdown(wait=True)
        self.assertTrue(all(f.done() for f in futures))
        self.assertEqual(sorted(done), list(range(20)))
        with self.assertRaises(RuntimeError):
            executor.submit(int)
        executor.shutdown()   # again: nothing happens

    def test_with_block_shuts_down(self):
        with self.executor_class(max_workers=2) as executor:
            future = executor.submit(lambda: time.sleep(0.01) or "done")
        self.assertEqual(future.result(timeout=0), "done")
        with self.assertRaises(RuntimeError):
            executor.submit(int)

    def test_shutdown_without_waiting(self):
        executor = self.make()
        gate = self.gate()
        future = executor.submit(gate, "finished later")
        self.assertTrue(gate.started.wait(GUARD))
        executor.shutdown(wait=False)
        self.assertFalse(future.done())
        with self.assertRaises(RuntimeError):
            executor.submit(int)
        gate.open()
        self.assertEqual(future.result(timeout=GUARD), "finished later")

    def test_shutdown_cancels_what_has_not_started(self):
        executor = self.make(max_workers=1)
        gate = self.gate()
        running = executor.submit(gate, "ran")
        self.assertTrue(gate.started.wait(GUARD))
        queued = [executor.submit(int) for _ in range(10)]
        executor.shutdown(wait=False, cancel_futures=True)
        gate.open()
        self.assertEqual(running.result(timeout=GUARD), "ran")
        executor.shutdown(wait=True)
        self.assertTrue(all(f.cancelled() for f in queued))

    def test_tasks_may_submit_until_shutdown(self):
        executor = self.make()

        def parent():
            return executor.submit(pow, 3, 3)
        self.assertEqual(executor.submit(parent).result(timeout=GUARD).result(timeout=GUARD), 27)

    # -- initializer, threads ------------------------------------------------

    def test_initializer_runs_once_per_worker_and_its_state_lasts(self):
        initialized = []
        local = threading.local()

        def init(tag):
            initialized.append(threading.get_ident())
            local.tag = tag

        def where():
            time.sleep(0.002)
            return threading.get_ident(), getattr(local, "tag", None)
        executor = self.make(max_workers=2, initializer=init, initargs=("ready",))
        seen = [f.result(timeout=GUARD) for f in [executor.submit(where) for _ in range(40)]]
        executor.shutdown(wait=True)
        self.assertEqual(len(initialized), len(set(initialized)))   # once per thread
        self.assertLessEqual(len(initialized), 2)
        for ident, tag in seen:
            self.assertIn(ident, initialized)   # every task ran on an initialized thread
            self.assertEqual(tag, "ready")      # whose threading.local state lasted

    def test_a_failing_initializer_breaks_the_executor(self):
        def init():
            raise OSError("no database")
        with self.assertLogs("concurrent.futures", level="CRITICAL") as logs:
            executor = self.make(max_workers=1, initializer=init)
            try:
                future = executor.submit(int)
            except cf.BrokenExecutor:
                future = None
            if future is not None:
                with self.assertRaises(cf.BrokenExecutor):
                    future.result(timeout=GUARD)
        self.assertIn("Exception in initializer", logs.output[0])
        with self.assertRaises(cf.BrokenExecutor):
            executor.submit(int)

    def test_thread_names_have_the_prefix(self):
        executor = self.make(thread_name_prefix="worktest")
        self.assertTrue(executor.submit(thread_name).result(timeout=GUARD).startswith("worktest"))

    def test_bad_arguments(self):
        for bad in (0, -1):
            with self.subTest(max_workers=bad), self.assertRaises(ValueError):
                self.executor_class(max_workers=bad)
        with self.assertRaises(TypeError):
            self.executor_class(max_workers=1, initializer=42)

    # -- asyncio -------------------------------------------------------------

    def test_run_in_executor_and_default_executor(self):
        executor = self.make()

        async def main():
            loop = asyncio.get_running_loop()
            first = await loop.run_in_executor(executor, pow, 2, 8)
            loop.set_default_executor(executor)
            second = await loop.run_in_executor(None, thread_name)
            results = await asyncio.gather(*(loop.run_in_executor(None, abs, -i) for i in range(20)))
            return first, second, results
        first, second, results = asyncio.run(main())   # shuts the default executor down at the end
        self.assertEqual(first, 256)
        self.assertNotEqual(second, threading.current_thread().name)
        self.assertEqual(results, list(range(20)))


class TestThreadPoolExecutorConformance(Conformance, unittest.TestCase):
    executor_class = cf.ThreadPoolExecutor


class TestBlitzExecutorConformance(Conformance, unittest.TestCase):
    executor_class = blitz.Executor


class TestBlitzExecutor(unittest.TestCase):
    """What blitz.Executor adds or does differently."""

    def make(self, max_workers=2, **kwargs):
        executor = blitz.Executor(max_workers=max_workers, **kwargs)
        self.addCleanup(executor.shutdown, True)
        return executor

    def test_is_a_thread_pool_executor(self):
        executor = self.make()
        self.assertIsInstance(executor, cf.ThreadPoolExecutor)
        self.assertIsInstance(executor.submit(int), blitz.Future)
        self.assertEqual(executor._max_workers, 2)

    def test_completed_by_on_done_on_the_worker_without_helper_threads(self):
        executor = self.make()
        # Started threads only: a worker shows up as a dummy thread when its
        # start hook runs, which may be later than this line.
        def started_threads():
            return {t for t in threading.enumerate() if type(t) is threading.Thread}
        threads_before = started_threads()
        on_worker = []
        done = threading.Event()

        def callback(future):   # set_result runs it, in the task's on_done
            on_worker.append(impl._held.blz_worker_index(executor._runtime._ptr))
            done.set()
        gate = Gate()
        future = executor.submit(gate)
        future.add_done_callback(callback)
        gate.open()
        self.assertTrue(done.wait(GUARD))
        self.assertIn(on_worker[0], range(2))
        self.assertEqual(started_threads(), threads_before)  # no reaper, no poller

    def test_a_wait_on_a_worker_runs_other_jobs(self):
        executor = self.make(max_workers=1)   # the standard executor deadlocks here

        def depth(n):
            return 0 if n == 0 else 1 + executor.submit(depth, n - 1).result()
        self.assertEqual(executor.submit(depth, 50).result(timeout=GUARD), 50)

    def test_map_on_a_worker_runs_its_calls_while_waiting(self):
        executor = self.make(max_workers=1)   # the standard executor deadlocks here too

        def total(n):
            return sum(executor.map(abs, range(-n, 0), chunksize=3))
        self.assertEqual(executor.submit(total, 40).result(timeout=GUARD), 40 * 41 // 2)

    def test_map_spawns_one_task_per_worker_not_per_call(self):
        executor = self.make()
        for chunksize, calls, tasks in ((7, 100, 2), (1, 1, 1)):
            with self.subTest(chunksize=chunksize, calls=calls):
                injected = executor.stats()["jobs_injected"]
                self.assertEqual(list(executor.map(pow, range(calls), [2] * calls, chunksize=chunksize)),
                                 [i * i for i in range(calls)])
                self.assertEqual(executor.stats()["jobs_injected"] - injected, tasks)

    def test_map_calls_that_block_hold_their_worker_only(self):
        executor = self.make(max_workers=3)
        barrier = threading.Barrier(3, timeout=GUARD)   # three calls meet: on three workers at once
        self.assertEqual(sorted(executor.map(lambda _: barrier.wait(), range(3))), [0, 1, 2])

    def test_a_task_waiting_for_itself_is_a_deadlock(self):
        executor = self.make()
        holder = []
        ready = threading.Event()

        def wait_for_myself():
            ready.wait(GUARD)
            return holder[0].result()
        future = executor.submit(wait_for_myself)
        holder.append(future)
        ready.set()
        exc = future.exception(timeout=GUARD)
        self.assertIsInstance(exc, blitz.BlitzError)
        self.assertEqual(exc.status, blitz.BLZ_EDEADLK)
        holder.clear()

    def test_cancel_futures_goes_through_the_group_and_notifies_waiters(self):
        executor = self.make(max_workers=1)
        cancels = []
        real = impl._held
        gate = Gate()
        self.addCleanup(gate.open)
        running = executor.submit(gate)
        self.assertTrue(gate.started.wait(GUARD))
        inner = executor.submit(lambda: [executor.submit(int) for _ in range(5)])   # never starts
        queued = [executor.submit(int) for _ in range(5)]
        waiter = threading.Thread(target=lambda: cancels.append(
            len(list(cf.as_completed(queued, timeout=GUARD)))))
        waiter.start()
        try:
            impl._held = _Spy(impl._held, "blz_group_cancel", cancels)
            executor.shutdown(wait=False, cancel_futures=True)
        finally:
            impl._held = real
        gate.open()
        waiter.join(GUARD)
        self.assertIn("blz_group_cancel", cancels)   # the C API's group cancel did it
        self.assertIn(5, cancels)                    # as_completed saw all five cancelled
        self.assertTrue(all(f.cancelled() for f in queued))
        self.assertTrue(inner.cancelled())
        self.assertIsNone(running.result(timeout=GUARD))

    def test_cancel_futures_after_the_pool_is_freed_touches_no_group(self):
        # The groups are freed with the pool: a later shutdown(cancel_futures=True)
        # must not cancel the task group it had (a use after free).
        executor = blitz.Executor(1)
        executor.shutdown(wait=True)
        calls, real = [], impl._held
        try:
            impl._held = _Spy(impl._held, "blz_group_cancel", calls)
            executor.shutdown(wait=True, cancel_futures=True)
        finally:
            impl._held = real
        self.assertEqual(calls, [])

    def test_cancel_before_start_skips_the_task_through_its_own_handle(self):
        # The only worker is busy: the second task is queued when cancelled.
        # cancel() cancels that task's handle (blz_task_cancel), no group is
        # made or cancelled for it, the task is skipped in C (its on_done
        # reports BLZ_ECANCELED: not even the trampoline ran), and wait()
        # hears of the cancellation once the worker has skipped it, as it
        # does from a standard executor's worker.
        executor = self.make(max_workers=1)
        gate = Gate()
        self.addCleanup(gate.open)
        running = executor.submit(gate, "ran")
        self.assertTrue(gate.started.wait(GUARD))
        ran, statuses, called_back = [], [], []
        queued = executor.submit(ran.append, "the cancelled task ran")
        settle = queued._settle
        queued._settle = lambda status: (statuses.append(status), settle(status))
        queued.add_done_callback(called_back.append)
        calls, real = [], impl._held
        try:
            impl._held = _Spy(impl._held, ("blz_task_cancel", "blz_group_create_ex",
                                           "blz_group_cancel"), calls)
            self.assertTrue(queued.cancel())
        finally:
            impl._held = real
        self.assertEqual(calls, ["blz_task_cancel"])
        self.assertTrue(queued.cancelled() and queued.done())
        self.assertEqual(called_back, [queued])   # at once, as the standard cancel() calls them
        with self.assertRaises(cf.CancelledError):
            queued.result(timeout=0)
        gate.open()
        finished, _ = cf.wait([queued, running], timeout=GUARD)
        self.assertEqual(finished, {queued, running})
        self.assertEqual(running.result(), "ran")
        self.assertEqual(statuses, [blitz.BLZ_ECANCELED])
        self.assertEqual(ran, [])

    def test_map_runs_and_kernels_make_no_group(self):
        # A map run's drainers and a parallel_for's task are cancelled
        # through their own handles: the pool's task group is the only group.
        executor = self.make()
        calls, real = [], impl._held
        try:
            impl._held = _Spy(impl._held, ("blz_group_create_ex",), calls)
            self.assertEqual(list(executor.map(abs, range(-20, 0), chunksize=3)),
                             list(range(20, 0, -1)))
            results = executor.map(abs, range(-20, 0))
            self.assertEqual(next(results), 20)
            results.close()   # stopped early: the calls not started are cancelled
            seen = []
            executor.parallel_for(0, 10, lambda lo, hi: seen.extend(range(lo, hi)))
        finally:
            impl._held = real
        self.assertEqual(calls, [])
        self.assertEqual(sorted(seen), list(range(10)))

    @unittest.skipUnless(hasattr(os, "fork"), "no fork")
    def test_a_pending_future_fails_in_a_forked_child(self):
        executor = self.make(max_workers=1)
        gate = Gate()
        self.addCleanup(gate.open)
        running = executor.submit(gate)
        self.assertTrue(gate.started.wait(GUARD))
        queued = executor.submit(int)
        pid = os.fork()
        if pid == 0:
            code = 99
            try:   # the parent's task will not end here: the Future fails at once
                exc = queued.exception(timeout=GUARD)
                code = 0 if isinstance(exc, blitz.BlitzError) and exc.status == blitz.BLZ_EFORK else 1
                code = code or (0 if running.done() else 2)
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        self.assertTrue(os.WIFEXITED(status), f"the child ended by a signal: {status}")
        self.assertEqual(os.WEXITSTATUS(status), 0)
        gate.open()
        self.assertEqual(queued.result(timeout=GUARD), 0)   # the parent's own Future ran

    def test_submit_after_shutdown_and_broken_messages(self):
        executor = blitz.Executor(1)
        executor.shutdown()
        with self.assertRaisesRegex(RuntimeError, "after shutdown"):
            executor.submit(int)
        with self.assertRaisesRegex(RuntimeError, "after shutdown"):
            executor.parallel_for(0, 10, lambda lo, hi: None)
        self.assertIn("shut down", repr(executor))

    def test_shutdown_from_its_own_worker(self):
        executor = self.make()
        exc = executor.submit(executor.shutdown).exception(timeout=GUARD)
        self.assertIsInstance(exc, blitz.BlitzError)
        self.assertEqual(exc.status, blitz.BLZ_EDEADLK)
        with self.assertRaises(RuntimeError):   # but new work was refused first
            executor.submit(int)

    def test_chunksize_must_be_positive(self):
        with self.assertRaises(ValueError):
            self.make().map(abs, [1], chunksize=0)

    def test_ctrl_c_interrupts_a_wait_and_the_task_keeps_running(self):
        executor = self.make()
        gate = Gate()
        self.addCleanup(gate.open)
        future = executor.submit(gate, "still ran")
        self.assertTrue(gate.started.wait(GUARD))
        with interrupt_main_after(0.05):
            with self.assertRaises(KeyboardInterrupt):
                future.result()
        gate.open()
        self.assertEqual(future.result(timeout=GUARD), "still ran")


class _Spy:
    """Passes calls on to lib, recording the name of one function (or of
    each of a tuple of them) when it is called."""

    def __init__(self, lib, name, record):
        self._lib, self._record = lib, record
        self._names = name if isinstance(name, tuple) else (name,)

    def __getattr__(self, name):
        fn = getattr(self._lib, name)
        if name not in self._names:
            return fn

        def spy(*args):
            self._record.append(name)
            return fn(*args)
        return spy


class interrupt_main_after:
    """Sends SIGINT to the main thread after a delay, while the block runs
    (a real signal: it interrupts a blocking lock wait, as Ctrl-C does)."""

    def __init__(self, delay):
        self.delay = delay

    def __enter__(self):
        if threading.current_thread() is not threading.main_thread():
            raise unittest.SkipTest("signals reach the main thread only")
        if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
            raise unittest.SkipTest("SIGINT is not Python's default handler here")
        self.timer = threading.Timer(self.delay, signal.pthread_kill,
                                     (threading.main_thread().ident, signal.SIGINT))
        self.timer.start()

    def __exit__(self, *exc_info):
        self.timer.cancel()
        self.timer.join()


@unittest.skipIf(support.kernel() is None, support.kernel_skip_reason())
class TestCFunctions(unittest.TestCase):
    """submit_c and parallel_for with C functions that take an argument."""

    def setUp(self):
        self.kernel = support.kernel()
        self.executor = blitz.Executor(2)
        self.addCleanup(self.executor.shutdown, True)

    def fn(self, name, fn_type):
        return fn_type((name, self.kernel))

    def test_submit_c_with_a_buffer(self):
        counter = bytearray(8)
        increment = self.fn("blz_test_increment", blitz.TASK_FN)
        futures = [self.executor.submit_c(increment, counter) for _ in range(100)]
        for future in cf.as_completed(futures, timeout=GUARD):
            self.assertIsNone(future.result())
        self.assertEqual(int.from_bytes(counter, "little"), 100)

    def test_submit_c_failure_and_no_cancel(self):
        failing = self.executor.submit_c(self.fn("blz_test_failing_task", blitz.TASK_FN))
        exc = failing.exception(timeout=GUARD)
        self.assertIsInstance(exc, blitz.BlitzError)
        self.assertEqual(exc.status, blitz.BLZ_ETASK)
        self.kernel.blz_test_release(0)
        self.addCleanup(self.kernel.blz_test_release, 1)
        blocker = self.executor.submit_c(self.fn("blz_test_block_until_released", blitz.TASK_FN))
        self.assertFalse(blocker.cancel())   # a C task cannot be cancelled on its own
        self.kernel.blz_test_release(1)
        self.assertIsNone(blocker.result(timeout=GUARD))

    def test_a_buffer_stays_pinned_while_c_uses_it(self):
        self.kernel.blz_test_release(0)
        self.addCleanup(self.kernel.blz_test_release, 1)
        data = bytearray(16)
        future = self.executor.submit_c(self.fn("blz_test_block_until_released", blitz.TASK_FN), data)
        with self.assertRaises(BufferError):   # exported: it cannot move while C may use it
            data.extend(b"more")
        self.kernel.blz_test_release(1)
        future.result(timeout=GUARD)
        data.extend(b"more")                   # released once the function returned
        self.assertEqual(len(data), 20)

    def test_ctrl_c_cancels_a_kernel_and_returns_after_its_running_pieces(self):
        executor = blitz.Executor(1)
        self.addCleanup(executor.shutdown, True)
        count = ctypes.c_uint64(0)
        slow = self.fn("blz_test_slow_count", blitz.RANGE_FN)
        total = 20000   # 1 ms each: 20 s if nothing stopped it
        started = time.monotonic()
        with interrupt_main_after(0.1):
            with self.assertRaises(KeyboardInterrupt):
                executor.parallel_for(0, total, slow, ctypes.pointer(count), grain=16)
        self.assertLess(time.monotonic() - started, GUARD)
        stopped_at = count.value
        self.assertGreater(stopped_at, 0)
        self.assertLess(stopped_at, total)     # the rest was skipped
        time.sleep(0.05)
        self.assertEqual(count.value, stopped_at)   # and nothing was running any more
        executor.parallel_for(0, 10, slow, ctypes.pointer(count))   # the executor still works
        self.assertEqual(count.value, stopped_at + 10)

    def test_aio_parallel_for_and_its_cancellation(self):
        from blitz import aio
        count = ctypes.c_uint64(0)
        slow = self.fn("blz_test_slow_count", blitz.RANGE_FN)

        async def main():
            await aio.parallel_for(self.executor, 0, 50, slow, ctypes.pointer(count))
            finished = count.value
            task = asyncio.ensure_future(aio.parallel_for(self.executor, 0, 20000, slow,
                                                          ctypes.pointer(count), grain=8))
            await asyncio.sleep(0.1)
            task.cancel()
            with self.assertRaises(asyncio.CancelledError):
                await task
            return finished, count.value
        finished, stopped_at = asyncio.run(main())
        self.assertEqual(finished, 50)
        self.assertLess(stopped_at, 50 + 20000)
        time.sleep(0.05)
        self.assertEqual(count.value, stopped_at)   # nothing ran after the cancellation returned


if __name__ == "__main__":
    unittest.main()
