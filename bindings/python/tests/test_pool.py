"""Pool and Task: results, exceptions, fork-join, map, parallel_for, stats, closing."""
import ctypes
import gc
import operator
import os
import threading
import time
import traceback
import unittest
import weakref

import support
import blitz
from blitz import _runtime as impl

N_SPAWNS = 10_000


class CustomError(Exception):
    def __init__(self, code):
        super().__init__(f"custom {code}")
        self.code = code


def fail_with_value_error(x):
    raise ValueError(f"bad {x}")


def worker_index(pool):
    """The calling thread's index in pool, or -1 (blz_worker_index)."""
    return impl._lib.blz_worker_index(pool._ptr)


def wait_until_asleep(pool):
    """Waits until every worker of pool sleeps (stats' sleeping_now), as a
    condition, not a delay; gives up after a minute, a guard."""
    deadline = time.monotonic() + 60
    while pool.stats()["sleeping_now"] < pool.num_threads:
        if time.monotonic() > deadline:
            raise AssertionError(f"the workers did not fall asleep: {pool.stats()}")
        time.sleep(0.001)


class PoolTestCase(unittest.TestCase):
    num_threads = 2

    def setUp(self):
        self.pool = blitz.Pool(self.num_threads)
        self.addCleanup(self.pool.close)


class TestResultsAndExceptions(PoolTestCase):
    def test_result_crosses_over_with_args_and_kwargs(self):
        task = self.pool.spawn(lambda a, b=0, *, c: (a, b, c), 1, b=2, c=3)
        self.assertIsInstance(task, blitz.Task)
        self.assertEqual(task.result(), (1, 2, 3))
        self.assertTrue(task.done())
        self.assertEqual(task.result(), (1, 2, 3))  # again: the same value

    def test_task_runs_on_a_worker(self):
        main = threading.get_ident()
        task = self.pool.spawn(lambda: (threading.get_ident(), worker_index(self.pool)))
        ident, index = task.result()
        self.assertNotEqual(ident, main)
        self.assertIn(index, range(self.pool.num_threads))
        self.assertEqual(worker_index(self.pool), -1)

    def test_exception_same_type_message_and_traceback(self):
        task = self.pool.spawn(fail_with_value_error, 3)
        try:  # not assertRaises: it drops the traceback
            task.result()
        except ValueError as exc:
            caught = exc
        else:
            self.fail("no exception")
        self.assertEqual(str(caught), "bad 3")
        names = [frame.name for frame in traceback.extract_tb(caught.__traceback__)]
        self.assertEqual(names[-1], "fail_with_value_error")  # where it was raised
        self.assertIn("test_exception_same_type_message_and_traceback", names)  # where re-raised
        self.assertNotIn("_run_job", names)  # the trampoline's frame is dropped
        self.assertIs(task.exception(), caught)
        self.assertTrue(task.done())

    def test_custom_exception_keeps_its_attributes(self):
        def fail():
            raise CustomError(42)
        with self.assertRaises(CustomError) as caught:
            self.pool.spawn(fail).result()
        self.assertEqual(caught.exception.code, 42)

    def test_base_exceptions_cross_over(self):
        for exc_type in (SystemExit, KeyboardInterrupt, GeneratorExit):
            def fail(exc_type=exc_type):
                raise exc_type("from a worker")
            with self.subTest(exc_type=exc_type.__name__):
                with self.assertRaises(exc_type):
                    self.pool.spawn(fail).result()
                with self.assertRaises(exc_type):
                    self.pool.call(fail)
        self.assertEqual(self.pool.call(lambda: "still works"), "still works")

    def test_exception_returns_none_on_success(self):
        self.assertIsNone(self.pool.spawn(int).exception())

    def test_done_and_result_timeout(self):
        gate = threading.Event()
        task = self.pool.spawn(gate.wait)
        self.assertFalse(task.done())  # it cannot finish before the gate opens
        with self.assertRaises(TimeoutError):
            task.result(timeout=0.01)
        with self.assertRaises(TimeoutError):
            task.result(timeout=0)
        self.assertFalse(task.done())
        gate.set()
        self.assertIs(task.result(timeout=60), True)
        self.assertTrue(task.done())
        self.assertIs(task.result(timeout=0), True)

    def test_many_spawns(self):
        tasks = [self.pool.spawn(operator.mul, i, 2) for i in range(N_SPAWNS)]
        self.assertEqual([t.result() for t in tasks], [2 * i for i in range(N_SPAWNS)])
        self.assertTrue(all(t.done() for t in tasks))
        # A worker counts a job just after the job has finished: allow for
        # one increment per worker still on its way.
        self.assertGreaterEqual(self.pool.stats()["jobs_executed"], N_SPAWNS - self.pool.num_threads)
        self.assertEqual(support.records_of(self.pool), [])

    def test_result_from_several_threads(self):
        gate = threading.Event()
        task = self.pool.spawn(lambda: gate.wait() and "ok")
        seen = []
        threads = [threading.Thread(target=lambda: seen.append(task.result())) for _ in range(4)]
        for thread in threads:
            thread.start()
        gate.set()
        for thread in threads:
            thread.join()
        self.assertEqual(seen, ["ok"] * 4)

    def test_result_of_itself_is_a_deadlock(self):
        holder = []
        gate = threading.Event()

        def wait_for_myself():
            gate.wait()
            return holder[0].result()
        task = self.pool.spawn(wait_for_myself)
        holder.append(task)
        gate.set()
        with self.assertRaises(blitz.BlitzError) as caught:
            task.result()
        self.assertEqual(caught.exception.status, blitz.BLZ_EDEADLK)
        self.assertEqual(caught.exception.name, "BLZ_EDEADLK")
        holder.clear()

    def test_call(self):
        main = threading.get_ident()
        self.assertNotEqual(self.pool.call(threading.get_ident), main)
        self.assertEqual(self.pool.call(divmod, 17, 5), (3, 2))
        self.assertEqual(self.pool.call(dict, a=1), {"a": 1})
        with self.assertRaises(ZeroDivisionError):
            self.pool.call(operator.truediv, 1, 0)

    def test_call_from_a_worker_runs_inline(self):
        def outer():
            return threading.get_ident(), self.pool.call(threading.get_ident)
        outer_ident, inner_ident = self.pool.call(outer)
        self.assertEqual(outer_ident, inner_ident)


class TestOneWorker(PoolTestCase):
    num_threads = 1

    def test_recursive_spawn_and_join_on_one_worker(self):
        # result() without a timeout joins with blz_join: the only worker runs
        # the child while it waits for it instead of deadlocking.
        pool = self.pool

        def fib(n):
            if n < 2:
                return n
            child = pool.spawn(fib, n - 1)
            return fib(n - 2) + child.result()
        self.assertEqual(pool.call(fib, 12), 144)
        self.assertEqual(pool.spawn(fib, 10).result(), 55)

    def test_recursive_join_on_one_worker(self):
        pool = self.pool

        def fib(n):
            if n < 2:
                return n
            a, b = pool.join(lambda: fib(n - 1), lambda: fib(n - 2))
            return a + b
        self.assertEqual(pool.call(fib, 12), 144)


class TestJoin(PoolTestCase):
    def test_values(self):
        self.assertEqual(self.pool.join(lambda: "f", lambda: "g"), ("f", "g"))

    def test_f_fails_and_g_still_runs(self):
        ran = []
        def f():
            raise ValueError("f")
        with self.assertRaises(ValueError) as caught:
            self.pool.join(f, lambda: ran.append("g"))
        self.assertEqual(str(caught.exception), "f")
        self.assertEqual(ran, ["g"])

    def test_g_fails_and_f_still_runs(self):
        ran = []
        def g():
            raise KeyError("g")
        with self.assertRaises(KeyError) as caught:
            self.pool.join(lambda: ran.append("f"), g)
        self.assertEqual(caught.exception.args, ("g",))
        self.assertEqual(ran, ["f"])

    def test_both_fail_and_f_wins(self):
        ran = []
        def f():
            ran.append("f")
            raise ValueError("f")
        def g():
            ran.append("g")
            raise TypeError("g")
        with self.assertRaises(ValueError) as caught:
            self.pool.join(f, g)
        self.assertEqual(str(caught.exception), "f")
        self.assertEqual(sorted(ran), ["f", "g"])

    def test_nested_join_from_workers(self):
        pool = self.pool

        def total(lo, hi):
            if hi - lo <= 4:
                return sum(range(lo, hi))
            mid = (lo + hi) // 2
            a, b = pool.join(lambda: total(lo, mid), lambda: total(mid, hi))
            return a + b
        self.assertEqual(pool.call(total, 0, 1000), sum(range(1000)))
        self.assertEqual(total(0, 1000), sum(range(1000)))


class TestMap(PoolTestCase):
    def test_order(self):
        self.assertEqual(self.pool.map(lambda x: x * x, range(1000)), [x * x for x in range(1000)])

    def test_iterables(self):
        self.assertEqual(self.pool.map(str.upper, (c for c in "abc")), ["A", "B", "C"])
        self.assertEqual(self.pool.map(len, {"x": 1}), [1])
        self.assertEqual(self.pool.map(abs, []), [])

    def test_first_failure_in_input_order_and_every_item_runs(self):
        seen = []

        def fn(x):
            seen.append(x)
            if x in (70, 30):
                raise ValueError(x)
            return x
        with self.assertRaises(ValueError) as caught:
            self.pool.map(fn, range(100))
        self.assertEqual(caught.exception.args, (30,))
        self.assertEqual(sorted(seen), list(range(100)))

    def test_callables_that_release_the_gil_overlap(self):
        # Four items meet at a barrier: they can only if four workers run
        # them at the same time (each releases the GIL while it waits).
        with blitz.Pool(4) as pool:
            barrier = threading.Barrier(4, timeout=60)
            indices = pool.map(lambda _: barrier.wait(), range(4))
        self.assertEqual(sorted(indices), [0, 1, 2, 3])


class TestParallelFor(PoolTestCase):
    def check_python_body(self, begin, end, grain):
        counts = [0] * end
        calls = []

        def body(lo, hi):
            calls.append((lo, hi))
            for i in range(lo, hi):
                counts[i] += 1
        self.pool.parallel_for(begin, end, body, grain)
        self.assertEqual(counts, [0] * begin + [1] * (end - begin))
        if grain:
            self.assertTrue(all(hi - lo <= grain for lo, hi in calls), calls)
        self.assertTrue(all(begin <= lo < hi <= end for lo, hi in calls), calls)

    def test_python_body_covers_each_index_once(self):
        for begin, end, grain in [(0, 1000, 0), (0, 1000, 1), (5, 1005, 7), (0, 1, 0),
                                  (3, 10, 100), (0, 4096, 64)]:
            with self.subTest(begin=begin, end=end, grain=grain):
                self.check_python_body(begin, end, grain)

    def test_empty_range_calls_nothing(self):
        calls = []
        self.pool.parallel_for(5, 5, lambda lo, hi: calls.append((lo, hi)))
        self.assertEqual(calls, [])

    def test_python_body_failure(self):
        counts = [0] * 1000

        def body(lo, hi):
            for i in range(lo, hi):
                counts[i] += 1
            for bad in (500, 100):
                if lo <= bad < hi:
                    raise ValueError(bad)
        with self.assertRaises(ValueError) as caught:
            self.pool.parallel_for(0, 1000, body, grain=10)
        self.assertEqual(caught.exception.args, (100,))  # the lowest failing piece
        self.assertEqual(counts, [1] * 1000)             # every piece ran

    def c_body(self):
        lib = support.kernel()
        if lib is None:
            self.skipTest(support.kernel_skip_reason())
        return lib

    def test_c_pointer_covers_each_index_once(self):
        lib = self.c_body()
        variants = {
            "RANGE_FN((name, lib))": blitz.RANGE_FN(("blz_test_mark", lib)),
            "cast": ctypes.cast(lib.blz_test_mark, blitz.RANGE_FN),
        }
        for label, body in variants.items():
            for begin, end, grain in [(0, 100_000, 0), (0, 1000, 1), (7, 5000, 33)]:
                with self.subTest(body=label, begin=begin, end=end, grain=grain):
                    counts = (ctypes.c_uint32 * end)()
                    lib.blz_test_set_counts(counts, end)
                    self.pool.parallel_for(begin, end, body, grain)
                    self.assertEqual(list(counts), [0] * begin + [1] * (end - begin))
                    self.assertEqual(lib.blz_test_out_of_range(), 0)
                    self.assertEqual(lib.blz_test_nonnull_args(), 0)  # called as body(None, lo, hi)

    def test_c_pointer_runs_without_the_gil(self):
        # Two calls that each wait for the other: they meet only if two
        # workers run them at once, which calls needing the GIL could not
        # (the waiting is a C loop that never releases anything).
        lib = self.c_body()
        lib.blz_test_rendezvous_reset(2)
        # Start from a sleeping pool, so that the second piece reaches the
        # other worker through the wake path (publish, post, wake). Jobs a
        # worker publishes carry no fence (docs/protocol.md): a worker
        # falling asleep at that very instant may overlook one, which costs
        # parallelism, never progress. The library allows that; this test,
        # which needs both pieces at once, should not depend on it.
        wait_until_asleep(self.pool)
        self.pool.parallel_for(0, 2, blitz.RANGE_FN(("blz_test_rendezvous", lib)), grain=1)
        self.assertEqual(lib.blz_test_rendezvous_met(), 2)

    def test_c_pointer_from_a_worker(self):
        lib = self.c_body()
        counts = (ctypes.c_uint32 * 1000)()
        lib.blz_test_set_counts(counts, 1000)
        body = blitz.RANGE_FN(("blz_test_mark", lib))
        self.pool.call(self.pool.parallel_for, 0, 1000, body)
        self.assertEqual(set(counts), {1})


class TestStats(PoolTestCase):
    FIELDS = ["struct_size", "num_threads", "sleeping_now", "inactive_now", "jobs_executed",
              "jobs_injected", "steals", "sleeps", "wakeups", "spurious_wakeups",
              "sleep_aborts", "tasks_failed", "run_ns", "search_ns", "sleep_ns",
              "spares_now", "blocked_now", "max_spares", "spares_peak", "spares_started", "spares_retired"]

    def test_fields(self):
        stats = self.pool.stats()
        self.assertEqual(list(stats), self.FIELDS)
        self.assertTrue(all(isinstance(v, int) and v >= 0 for v in stats.values()), stats)
        self.assertEqual(stats["struct_size"], ctypes.sizeof(impl.Stats))
        self.assertEqual(stats["num_threads"], self.pool.num_threads)
        self.assertLessEqual(stats["sleeping_now"], stats["num_threads"])
        self.assertLessEqual(stats["inactive_now"], stats["num_threads"])

    def test_counters_grow_with_work(self):
        before = self.pool.stats()
        for task in [self.pool.spawn(int) for _ in range(100)]:
            task.result()
        after = self.pool.stats()
        # (a worker counts a job just after it finished: allow one per worker)
        self.assertGreaterEqual(after["jobs_executed"] - before["jobs_executed"], 100 - self.pool.num_threads)
        self.assertGreaterEqual(after["jobs_injected"] - before["jobs_injected"], 100)

    def test_python_exceptions_are_not_task_failures(self):
        # The trampoline catches them, so the library sees a task that returned.
        self.pool.spawn(fail_with_value_error, 1).exception()
        self.assertEqual(self.pool.stats()["tasks_failed"], 0)

    def test_struct_layouts_match_the_library(self):
        config = impl.PoolConfig()
        impl._lib.blz_pool_config_init(ctypes.byref(config))
        self.assertEqual(config.struct_size, ctypes.sizeof(impl.PoolConfig))
        # Offer a bigger buffer: the library writes sizeof(blz_stats) bytes, no more.
        size = ctypes.sizeof(impl.Stats)
        buffer = (ctypes.c_ubyte * (size + 32))(*([0xAB] * (size + 32)))
        ctypes.cast(buffer, ctypes.POINTER(ctypes.c_uint32))[0] = size + 32
        status = impl._lib.blz_pool_stats(self.pool._ptr, ctypes.cast(buffer, ctypes.POINTER(impl.Stats)))
        self.assertEqual(status, blitz.BLZ_OK)
        self.assertEqual(bytes(buffer[size:]), b"\xab" * 32)
        self.assertNotEqual(bytes(buffer[size - 8:size]), b"\xab" * 8)  # tasks_failed was written
        stats = impl.Stats.from_buffer_copy(bytes(buffer[:size]))
        self.assertEqual(stats.num_threads, self.pool.num_threads)


class TestClose(unittest.TestCase):
    def test_close_is_idempotent(self):
        pool = blitz.Pool(2)
        self.assertFalse(pool.closed)
        pool.close()
        pool.close()
        self.assertTrue(pool.closed)
        with blitz.Pool(1) as pool:
            pass
        pool.close()
        self.assertIn("closed", repr(pool))

    def test_with_block_closes(self):
        with blitz.Pool(2, name="py-test") as pool:
            self.assertEqual(pool.num_threads, 2)
            self.assertEqual(pool.name, "py-test")
        self.assertTrue(pool.closed)
        self.assertNotIn(pool._runtime, impl._open_runtimes)

    def test_default_num_threads(self):
        with blitz.Pool() as pool:
            self.assertGreaterEqual(pool.num_threads, 1)
        expected = os.environ.get("BLZ_NUM_THREADS")
        if expected and expected.isdigit() and 1 <= int(expected) <= 65535:
            self.assertEqual(pool._runtime.num_threads, int(expected))
        elif hasattr(os, "sched_getaffinity"):
            self.assertEqual(pool._runtime.num_threads, len(os.sched_getaffinity(0)))

    def test_worker_names(self):
        if not os.path.isdir("/proc/self/task"):
            self.skipTest("no /proc")
        with blitz.Pool(2, name="pyname") as pool:
            def my_name():
                with open(f"/proc/self/task/{threading.get_native_id()}/comm") as comm:
                    return comm.read().strip()
            names = {pool.call(my_name) for _ in range(20)}
        self.assertTrue(names <= {"pyname-0", "pyname-1"}, names)

    def test_closed_pool_raises_pool_closed_error(self):
        pool = blitz.Pool(1)
        task = pool.spawn(lambda: "before")
        pool.close()
        self.assertEqual(task.result(), "before")  # tasks outlive their pool
        uses = {
            "spawn": lambda: pool.spawn(int),
            "call": lambda: pool.call(int),
            "join": lambda: pool.join(int, int),
            "map": lambda: pool.map(int, [1]),
            "map (empty)": lambda: pool.map(int, []),
            "parallel_for": lambda: pool.parallel_for(0, 10, lambda lo, hi: None),
            "parallel_for (empty)": lambda: pool.parallel_for(0, 0, lambda lo, hi: None),
            "stats": pool.stats,
            "num_threads": lambda: pool.num_threads,
            "with": lambda: pool.__enter__(),
        }
        lib = support.kernel()
        if lib is not None:
            uses["parallel_for (C)"] = lambda: pool.parallel_for(
                0, 10, blitz.RANGE_FN(("blz_test_mark", lib)))
        for name, use in uses.items():
            with self.subTest(use=name):
                with self.assertRaises(blitz.PoolClosedError) as caught:
                    use()
                self.assertIsInstance(caught.exception, blitz.BlitzError)
                self.assertEqual(caught.exception.status, blitz.BLZ_ESHUTDOWN)
                self.assertEqual(caught.exception.name, "BLZ_ESHUTDOWN")

    def test_close_waits_for_accepted_work(self):
        done = []
        pool = blitz.Pool(2)
        gate = threading.Event()
        for i in range(50):
            pool.spawn(lambda i=i: (gate.wait(), done.append(i)))  # dropped at once
        threading.Timer(0.05, gate.set).start()
        pool.close()
        self.assertEqual(sorted(done), list(range(50)))
        self.assertEqual(support.records_of(pool), [])

    def test_close_from_a_worker_is_a_deadlock(self):
        with blitz.Pool(2) as pool:
            with self.assertRaises(blitz.BlitzError) as caught:
                pool.call(pool.close)
            self.assertEqual(caught.exception.status, blitz.BLZ_EDEADLK)
            self.assertEqual(caught.exception.name, "BLZ_EDEADLK")
            self.assertNotIsInstance(caught.exception, blitz.PoolClosedError)
            exc = pool.spawn(pool.close).exception()
            self.assertIsInstance(exc, blitz.BlitzError)
            self.assertEqual(exc.status, blitz.BLZ_EDEADLK)
            self.assertFalse(pool.closed)               # nothing changed
            self.assertEqual(pool.call(lambda: 7), 7)   # and the pool still works
        self.assertTrue(pool.closed)

    def test_workers_may_submit_while_closing_and_outsiders_may_not(self):
        pool = blitz.Pool(2)
        gate = threading.Event()

        def parent():
            gate.wait()
            child = pool.spawn(lambda: "child")   # accepted: we are a worker of the pool
            return child.result(), pool.map(abs, [-1, -2])
        parent_task = pool.spawn(parent)
        closer = threading.Thread(target=pool.close)
        closer.start()
        while not pool.closed:          # wait until close() has begun
            time.sleep(0.001)
        with self.assertRaises(blitz.PoolClosedError):
            pool.spawn(int)             # from outside: refused
        gate.set()
        closer.join()
        self.assertEqual(parent_task.result(), ("child", [1, 2]))
        self.assertEqual(support.records_of(pool), [])

    def test_concurrent_closes(self):
        pool = blitz.Pool(2)
        gate = threading.Event()
        pool.spawn(gate.wait)
        closers = [threading.Thread(target=pool.close) for _ in range(4)]
        for closer in closers:
            closer.start()
        gate.set()
        for closer in closers:
            closer.join()
        self.assertTrue(pool.closed)
        with self.assertRaises(blitz.PoolClosedError):
            pool.stats()

    def test_close_from_a_worker_of_another_pool(self):
        inner = blitz.Pool(1)
        inner.spawn(lambda: None)
        with blitz.Pool(1) as outer:
            outer.call(inner.close)
        self.assertTrue(inner.closed)

    def exit_code_in_child(self, body):
        """Runs body() in a forked child and returns its exit code: what body
        returned, 99 if it raised."""
        pid = os.fork()
        if pid == 0:
            code = 99
            try:
                code = body()
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        self.assertTrue(os.WIFEXITED(status), f"the child ended by a signal: {status}")
        return os.WEXITSTATUS(status)

    @unittest.skipUnless(hasattr(os, "fork"), "no fork")
    def test_parent_pool_in_a_forked_child(self):
        pool = blitz.Pool(2)
        self.addCleanup(pool.close)
        pool.spawn(int).result()

        def child():  # the parent's pool answers BLZ_EFORK, close() frees it
            try:
                pool.spawn(int)
                return 1
            except blitz.BlitzError as exc:
                if exc.status != blitz.BLZ_EFORK:
                    return 2
            try:
                pool.close()
                return 3
            except blitz.BlitzError as exc:
                return 0 if exc.status == blitz.BLZ_EFORK and pool.closed else 4
        self.assertEqual(self.exit_code_in_child(child), 0)
        self.assertEqual(pool.call(lambda: "parent"), "parent")

    @unittest.skipUnless(hasattr(os, "fork"), "no fork")
    @unittest.skipIf(support.UNDER_TSAN, "ThreadSanitizer cannot follow threads started in a "
                                         "child of a multithreaded process")
    def test_new_pool_in_a_forked_child(self):
        pool = blitz.Pool(2)
        self.addCleanup(pool.close)
        pool.spawn(int).result()

        def child():
            with blitz.Pool(1) as fresh:
                return 0 if fresh.call(lambda: 5) == 5 else 1
        self.assertEqual(self.exit_code_in_child(child), 0)


class TestWhatSpawnReliesOn(unittest.TestCase):
    def test_spawn_ex_leaves_out_task_untouched_when_it_fails(self):
        # Runtime.spawn learns whether its task exists from the handle cell
        # that blz_spawn_ex writes (so that an interrupt right after the
        # call cannot make it undo a spawned task): the cell must keep its
        # value when the call fails.
        options = impl.SpawnOptions()
        impl._held.blz_spawn_options_init(ctypes.byref(options))
        cell = ctypes.c_void_p(0x5A5A0)
        status = impl._held.blz_spawn_ex(None, impl._RUN_TASK, 0, ctypes.addressof(options),
                                             ctypes.addressof(cell))
        self.assertEqual(status, blitz.BLZ_EINVAL)   # no pool and no group
        self.assertEqual(cell.value, 0x5A5A0)
        pool = blitz.Pool(1)
        self.addCleanup(pool.close)
        options.flags = 0x80                          # an unknown flag
        status = impl._held.blz_spawn_ex(pool._ptr, impl._RUN_TASK, 0, ctypes.addressof(options),
                                             ctypes.addressof(cell))
        self.assertEqual(status, blitz.BLZ_EINVAL)
        self.assertEqual(cell.value, 0x5A5A0)


class TestHandles(unittest.TestCase):
    """Handles counted at the C calls (support.HandleCounter): blz_spawn_ex
    creates one per task; a detach, or a wait that ends, frees it."""

    def setUp(self):
        counting = support.counting_handles()
        self.handles = counting.__enter__()
        self.addCleanup(counting.__exit__, None, None, None)  # after the test's own cleanups

    def test_dropped_tasks_leak_no_handle(self):
        pool = blitz.Pool(2)
        self.addCleanup(pool.close)
        finished = []
        all_done = threading.Event()

        def work(i):
            finished.append(i)
            if len(finished) == N_SPAWNS:
                all_done.set()
        refs = []
        for i in range(N_SPAWNS):
            task = pool.spawn(work, i)
            if i % 1000 == 0:
                refs.append(weakref.ref(task))
            del task                                  # dropped, never waited for
        self.assertEqual(self.handles.created, N_SPAWNS)
        self.assertTrue(all_done.wait(120), "the tasks did not all run")
        # Each task's on_done frees its handle, with no reaper: once the last
        # on_done has run, none is left (a condition, with a guard).
        deadline = time.monotonic() + 60
        while (self.handles.live or support.records_of(pool)) and time.monotonic() < deadline:
            time.sleep(0.001)
        self.assertEqual(self.handles.live, 0)
        self.assertEqual(support.records_of(pool), [])
        gc.collect()
        self.assertTrue(all(ref() is None for ref in refs))    # the Future objects are gone
        self.assertEqual(sorted(finished), list(range(N_SPAWNS)))

    def test_close_frees_every_handle(self):
        pool = blitz.Pool(2)
        gate = threading.Event()
        kept = [pool.spawn(lambda i=i: gate.wait() and i) for i in range(100)]
        for _ in range(100):
            pool.spawn(int)                           # dropped
        self.assertEqual(self.handles.created, 200)
        gate.set()
        pool.close()
        self.assertEqual(self.handles.live, 0)
        self.assertEqual([t.result() for t in kept], list(range(100)))

    def test_waits_on_a_worker_free_the_handle_once(self):
        # A worker waiting for a subtask takes its handle and waits in C; a
        # timed-out wait puts it back, and the next wait frees it.
        pool = blitz.Pool(2)
        self.addCleanup(pool.close)
        started, gate = threading.Event(), threading.Event()

        def child():
            started.set()
            return gate.wait()

        def parent():
            task = pool.spawn(child)
            started.wait()          # running on the other worker: this wait cannot run it
            try:
                task.result(timeout=0.01)
            except TimeoutError:
                pass
            else:
                raise AssertionError("the child finished before its gate opened")
            gate.set()
            return task.result()
        self.assertIs(pool.call(parent), True)
        pool.close()
        self.assertEqual(self.handles.created, 2)     # the call's task and the child
        self.assertEqual(self.handles.live, 0)

    def test_dropped_tasks_spawned_by_workers(self):
        pool = blitz.Pool(2)

        def fan_out(n):
            for _ in range(n):
                pool.spawn(int)                       # dropped on a worker
            return n
        self.assertEqual(pool.call(fan_out, 3000), 3000)
        pool.close()
        self.assertEqual(self.handles.created, 3001)  # with the call's own task
        self.assertEqual(self.handles.live, 0)


if __name__ == "__main__":
    unittest.main()
