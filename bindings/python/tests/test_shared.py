"""The process pool (0.3, blz_pool_shared): blitz.Pool() and blitz.Executor()
with nothing asked for share the one pool of the process with each other
and with C code in the same process; Executor(max_workers=n), a name or a
CPU list keep a pool of their own; closing one user leaves the others'
work running; the last one gives the pool up and the next makes a new one."""
import concurrent.futures
import ctypes
import os
import threading
import time
import unittest

import blitz

GUARD = 60


def native(obj):
    return obj._runtime._ptr


def c_library():
    """libblitz as a C library of the process would load it (ctypes, its own handle)."""
    lib = ctypes.CDLL(os.environ.get("BLITZ_LIBRARY", "libblitz.so.0"))
    lib.blz_pool_shared.restype = ctypes.c_int32
    lib.blz_pool_shared.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)]
    lib.blz_pool_destroy.restype = ctypes.c_int32
    lib.blz_pool_destroy.argtypes = [ctypes.c_void_p]
    lib.blz_pool_num_threads.restype = ctypes.c_uint32
    lib.blz_pool_num_threads.argtypes = [ctypes.c_void_p]
    return lib


def blz_threads():
    """The libblitz worker threads of this process (named blz-<i> by the library)."""
    names = []
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                names.append(f.read().strip())
        except OSError:
            pass
    return [n for n in names if n.startswith("blz-")]


class TestProcessPool(unittest.TestCase):
    def test_pool_and_executor_share_one_pool(self):
        with blitz.Pool() as a, blitz.Pool() as b, blitz.Executor() as e:
            self.assertEqual(native(a), native(b))
            self.assertEqual(native(a), native(e))
            self.assertEqual(a.spawn(pow, 2, 10).result(timeout=GUARD), 1024)
            self.assertEqual(e.submit(pow, 3, 3).result(timeout=GUARD), 27)
            self.assertEqual(a.num_threads, e._max_workers)

    def test_asking_for_something_gives_a_pool_of_its_own(self):
        with blitz.Pool() as shared, blitz.Executor(max_workers=2) as own, blitz.Pool(2) as own_pool, \
                blitz.Pool(name="calc") as named:
            self.assertNotEqual(native(shared), native(own))
            self.assertNotEqual(native(shared), native(own_pool))
            self.assertNotEqual(native(shared), native(named))
            self.assertEqual(own._max_workers, 2)
            self.assertEqual(own.submit(pow, 2, 3).result(timeout=GUARD), 8)

    def test_closing_one_user_leaves_the_other_running(self):
        a = blitz.Pool()
        b = blitz.Executor()
        started = threading.Event()
        go = threading.Event()

        def held():
            started.set()
            go.wait(GUARD)
            return "done"
        future = b.submit(held)
        self.assertTrue(started.wait(GUARD))
        a.close()   # gives its reference up: b's task keeps running
        self.assertEqual(b.submit(pow, 2, 5).result(timeout=GUARD), 32)
        go.set()
        self.assertEqual(future.result(timeout=GUARD), "done")
        b.shutdown(wait=True)

    def test_c_code_in_the_same_process_gets_the_same_pool(self):
        lib = c_library()
        with blitz.Executor() as e:
            self.assertEqual(e.submit(pow, 2, 1).result(timeout=GUARD), 2)
            # Every worker thread exists once the pool does (it may not have named itself yet).
            before = len(os.listdir("/proc/self/task"))
            handle = ctypes.c_void_p()
            self.assertEqual(lib.blz_pool_shared(None, ctypes.byref(handle)), 0)
            try:
                self.assertEqual(handle.value, native(e))
                self.assertEqual(e.submit(pow, 2, 2).result(timeout=GUARD), 4)
                # One set of workers for both users, not two: the C user added no thread.
                self.assertEqual(len(os.listdir("/proc/self/task")), before)
                deadline = time.monotonic() + GUARD
                while len(blz_threads()) < lib.blz_pool_num_threads(handle) and time.monotonic() < deadline:
                    time.sleep(0.001)
                self.assertGreaterEqual(len(blz_threads()), lib.blz_pool_num_threads(handle))
            finally:
                self.assertEqual(lib.blz_pool_destroy(handle), 0)
            self.assertEqual(e.submit(pow, 2, 3).result(timeout=GUARD), 8)

    def test_the_last_user_gives_it_up_and_the_next_makes_a_new_one(self):
        with blitz.Pool() as a:
            self.assertEqual(a.spawn(pow, 2, 2).result(timeout=GUARD), 4)
        with blitz.Pool() as b:   # a new pool (maybe at the same address): it works
            self.assertEqual(b.spawn(pow, 2, 3).result(timeout=GUARD), 8)

    def test_map_on_the_shared_executor(self):
        with blitz.Executor() as e:
            self.assertEqual(list(e.map(pow, range(20), [2] * 20)), [i * i for i in range(20)])
        with self.assertRaises(RuntimeError):
            e.submit(pow, 1, 1)


if __name__ == "__main__":
    unittest.main()
