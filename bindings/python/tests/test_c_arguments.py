"""C functions with arguments: every kind of arg parallel_for and submit_c
accept, what they refuse, two calls at once with their own data, and real
kernels from Python's ecosystem (a numpy array, a kernel compiled by cffi).

numpy and cffi come from Debian (python3-numpy, python3-cffi): with
BLITZ_REQUIRE_NUMPY=1 (set where ./dev runs the suite with Debian's
python3) their absence is a failure, elsewhere a skip."""
import array
import ctypes
import os
import shutil
import sys
import tempfile
import threading
import unittest

import support
import blitz

REQUIRED = os.environ.get("BLITZ_REQUIRE_NUMPY") == "1"
GUARD = 60


def optional(module):
    try:
        return __import__(module)
    except ImportError:
        if REQUIRED:
            raise
        return None


numpy = optional("numpy")
cffi = optional("cffi")


@unittest.skipIf(support.kernel() is None, support.kernel_skip_reason())
class TestArgumentKinds(unittest.TestCase):
    def setUp(self):
        self.square = blitz.RANGE_FN(("blz_test_square", support.kernel()))
        self.executor = blitz.Executor(2)
        self.addCleanup(self.executor.shutdown, True)

    def squared(self, make_arg, values=tuple(range(1000))):
        """Runs the square kernel over a uint32 array built from values, passed
        as make_arg(ctypes_array) makes it; returns the array's contents."""
        data = (ctypes.c_uint32 * len(values))(*values)
        self.executor.parallel_for(0, len(values), self.square, make_arg(data), grain=37)
        return list(data)

    def test_each_kind_of_argument(self):
        expected = [i * i for i in range(1000)]
        kinds = {
            "ctypes array": lambda data: data,
            "ctypes pointer": lambda data: ctypes.cast(data, ctypes.POINTER(ctypes.c_uint32)),
            "c_void_p": lambda data: ctypes.c_void_p(ctypes.addressof(data)),
            "int address": ctypes.addressof,
            "memoryview": memoryview,
        }
        for name, make_arg in kinds.items():
            with self.subTest(kind=name):
                self.assertEqual(self.squared(make_arg), expected)

    def test_bytearray_and_array_module(self):
        values = array.array("I", range(100))
        self.executor.parallel_for(0, 100, self.square, values)
        self.assertEqual(list(values), [i * i for i in range(100)])
        raw = bytearray(array.array("I", range(10)).tobytes())
        self.executor.parallel_for(0, 10, self.square, raw)
        self.assertEqual(list(array.array("I", bytes(raw))), [i * i for i in range(10)])

    def test_pool_takes_arg_by_keyword(self):
        values = array.array("I", range(50))
        with blitz.Pool(2) as pool:
            pool.parallel_for(0, 50, self.square, 7, arg=values)   # 7 is the grain, as in 0.1
        self.assertEqual(list(values), [i * i for i in range(50)])

    def test_two_calls_at_once_each_with_its_own_data(self):
        arrays = [array.array("I", [k] * 5000) for k in range(2, 10)]
        threads = [threading.Thread(target=self.executor.parallel_for,
                                    args=(0, 5000, self.square, values)) for values in arrays]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(GUARD)
        for k, values in zip(range(2, 10), arrays):
            self.assertEqual(set(values), {k * k})

    def test_refused_arguments(self):
        bad = {
            "a str": (TypeError, "text"),
            "a bool": (TypeError, True),
            "a negative address": (ValueError, -1),
            "an address too large": (ValueError, 1 << 64),
            "a function pointer": (TypeError, self.square),
            "a strided view": (ValueError, memoryview(bytearray(64))[::2]),
            "an object": (TypeError, object()),
        }
        for name, (exc_type, arg) in bad.items():
            with self.subTest(arg=name):
                with self.assertRaises(exc_type):
                    self.executor.parallel_for(0, 4, self.square, arg)
        with self.assertRaises(TypeError):   # arg is for C bodies
            self.executor.parallel_for(0, 4, lambda lo, hi: None, bytearray(4))
        with self.assertRaises(TypeError):
            self.executor.submit_c(lambda arg: None)
        with self.assertRaises(TypeError):
            self.executor.submit_c(blitz.TASK_FN(lambda arg: None))   # around Python

    def test_a_failed_kernel_piece_is_blz_etask(self):
        failing = blitz.RANGE_FN(("blz_test_failing_task", support.kernel()))
        with self.assertRaises(blitz.BlitzError) as caught:
            self.executor.parallel_for(0, 10, failing)
        self.assertEqual(caught.exception.status, blitz.BLZ_ETASK)


def cffi_kernel(tmp):
    """The example's kernel compiled by cffi (examples/python/cffi_kernel.py)."""
    sys.path.insert(0, os.path.join(support.REPO, "examples", "python"))
    try:
        import cffi_kernel as example
    finally:
        sys.path.pop(0)
    return example.build(tmp)


@unittest.skipIf(numpy is None, "numpy is not installed for this interpreter")
class TestNumpy(unittest.TestCase):
    def setUp(self):
        self.executor = blitz.Executor(2)
        self.addCleanup(self.executor.shutdown, True)

    @unittest.skipIf(support.kernel() is None, support.kernel_skip_reason())
    def test_numpy_array_through_a_ctypes_kernel(self):
        square = blitz.RANGE_FN(("blz_test_square", support.kernel()))
        values = numpy.arange(100_000, dtype=numpy.uint32)
        self.executor.parallel_for(0, values.size, square, values)
        expected = numpy.arange(100_000, dtype=numpy.uint32)
        numpy.testing.assert_array_equal(values, expected * expected)
        with self.assertRaises(ValueError):   # not C-contiguous
            self.executor.parallel_for(0, 10, square, numpy.arange(40, dtype=numpy.uint32)[::2])

    @unittest.skipIf(cffi is None, "cffi is not installed for this interpreter")
    def test_numpy_array_through_a_cffi_kernel(self):
        if shutil.which("cc") is None and shutil.which("gcc") is None:
            self.skipTest("no C compiler for cffi")
        tmp = tempfile.mkdtemp(prefix="blitz-cffi-")
        self.addCleanup(shutil.rmtree, tmp, True)
        _, kernel, Args = cffi_kernel(tmp)
        x = numpy.linspace(0.0, 100.0, 1_000_001)
        y = numpy.zeros_like(x)
        self.executor.parallel_for(0, x.size, kernel, Args(x, y).pointer)
        numpy.testing.assert_allclose(y, 3.0 * numpy.sqrt(x), rtol=1e-15, atol=0)
        small = numpy.linspace(0.0, 4.0, 1000)
        out = numpy.zeros_like(small)
        with blitz.Pool(2) as pool:
            pool.parallel_for(0, small.size, kernel, arg=Args(small, out).pointer)
        numpy.testing.assert_allclose(out, 3.0 * numpy.sqrt(small), rtol=1e-15, atol=0)

if __name__ == "__main__":
    unittest.main()
