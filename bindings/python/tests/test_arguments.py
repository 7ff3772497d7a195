"""Invalid Python arguments raise TypeError or ValueError before any C call."""
import contextlib
import ctypes
import ctypes.util
import math
import os
import pickle
import re
import threading
import unittest

import support
import blitz
from blitz import _runtime as impl


class _NoC:
    """Stands in for the library: any use is a test failure."""

    def __getattr__(self, name):
        raise AssertionError(f"{name} was called: the argument check came too late")


@contextlib.contextmanager
def no_c_calls():
    real = impl._lib, impl._held
    impl._lib = impl._held = _NoC()
    try:
        yield
    finally:
        impl._lib, impl._held = real


class TestInvalidArguments(unittest.TestCase):
    def setUp(self):
        self.pool = blitz.Pool(1)
        self.addCleanup(self.pool.close)

    def check(self, exc_type, fn, *args, **kwargs):
        with no_c_calls():
            with self.assertRaises(exc_type):
                fn(*args, **kwargs)

    def test_num_threads(self):
        for bad in (0, -1, 65536, 10 ** 20):
            with self.subTest(num_threads=bad):
                self.check(ValueError, blitz.Pool, bad)
        for bad in (1.5, "2", True, [], 2.0):
            with self.subTest(num_threads=bad):
                self.check(TypeError, blitz.Pool, bad)
        with blitz.Pool(num_threads=1) as pool:  # the bounds themselves are fine
            self.assertEqual(pool.num_threads, 1)

    def test_name(self):
        self.check(TypeError, blitz.Pool, 1, name=5)
        self.check(TypeError, blitz.Pool, 1, name=b"bytes")
        self.check(ValueError, blitz.Pool, 1, name="a\0b")
        with blitz.Pool(1, name=None) as pool:
            self.assertIsNone(pool.name)

    def test_not_callable(self):
        pool = self.pool
        for bad in (None, 3, "fn"):
            with self.subTest(fn=bad):
                self.check(TypeError, pool.spawn, bad)
                self.check(TypeError, pool.call, bad)
                self.check(TypeError, pool.join, bad, int)
                self.check(TypeError, pool.join, int, bad)
                self.check(TypeError, pool.map, bad, [1])
                self.check(TypeError, pool.parallel_for, 0, 1, bad)

    def test_map_needs_an_iterable(self):
        self.check(TypeError, self.pool.map, abs, 5)

    def test_parallel_for_bounds(self):
        body = lambda lo, hi: None  # noqa: E731
        size_max = 2 ** (8 * ctypes.sizeof(ctypes.c_size_t)) - 1
        pf = self.pool.parallel_for
        self.check(TypeError, pf, "0", 1, body)
        self.check(TypeError, pf, 0, 1.0, body)
        self.check(TypeError, pf, 0, None, body)
        self.check(TypeError, pf, 0, 1, body, grain=0.5)
        self.check(TypeError, pf, False, 1, body)
        self.check(ValueError, pf, -1, 1, body)
        self.check(ValueError, pf, 5, 4, body)
        self.check(ValueError, pf, 0, size_max + 1, body)
        self.check(ValueError, pf, 0, 1, body, grain=-1)
        self.check(ValueError, pf, 0, 1, body, grain=size_max + 1)

    def test_parallel_for_function_pointers(self):
        pf = self.pool.parallel_for
        self.check(ValueError, pf, 0, 1, blitz.RANGE_FN())              # NULL
        python_backed = blitz.RANGE_FN(lambda arg, lo, hi: None)
        self.check(TypeError, pf, 0, 1, python_backed)
        self.check(TypeError, pf, 0, 1, ctypes.cast(python_backed, blitz.RANGE_FN))
        other_type = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)(lambda arg: 0)
        self.check(TypeError, pf, 0, 1, other_type)
        libc = ctypes.CDLL(ctypes.util.find_library("c"))
        self.check(TypeError, pf, 0, 1, libc.free)  # a foreign function, not cast to RANGE_FN

    def test_timeouts(self):
        # The standard Future's rules: a negative timeout is 0 (wait no
        # more), and a finished task answers without looking at it.
        task = self.pool.spawn(int)
        task.result()
        for timeout in (-1, -0.5, 0, math.inf):
            with self.subTest(timeout=timeout), no_c_calls():
                self.assertEqual(task.result(timeout), 0)
                self.assertIsNone(task.exception(timeout))
        gate = threading.Event()
        self.addCleanup(gate.set)
        pending = self.pool.spawn(gate.wait)
        for timeout in (-1, 0, 0.01):
            with self.subTest(timeout=timeout), no_c_calls():
                with self.assertRaises(TimeoutError):
                    pending.result(timeout)


class TestErrors(unittest.TestCase):
    def test_blitz_error(self):
        exc = blitz.BlitzError(blitz.BLZ_EINVAL)
        self.assertEqual(exc.status, -1)
        self.assertEqual(exc.name, "BLZ_EINVAL")
        self.assertIn("invalid argument", str(exc))
        with_message = blitz.BlitzError(blitz.BLZ_ENOMEM, "blz_spawn")
        self.assertTrue(str(with_message).startswith("blz_spawn: BLZ_ENOMEM"))
        copy = pickle.loads(pickle.dumps(with_message))
        self.assertEqual((copy.status, copy.name, str(copy)),
                         (with_message.status, with_message.name, str(with_message)))
        self.assertEqual(blitz.BlitzError(-99).name, "BLZ_UNKNOWN(-99)")

    def test_status_names(self):
        names = {"BLZ_OK": 0, "BLZ_EINVAL": -1, "BLZ_ENOMEM": -2, "BLZ_ETHREAD": -3,
                 "BLZ_ESHUTDOWN": -4, "BLZ_EDEADLK": -5, "BLZ_ETASK": -6, "BLZ_EFORK": -7}
        for name, value in names.items():
            self.assertEqual(getattr(blitz, name), value)
            self.assertEqual(impl._capi.status_name(value), name)  # the library's own name
            if value:
                self.assertEqual(blitz.BlitzError(value).name, name)
                self.assertTrue(str(blitz.BlitzError(value)).startswith(name))

    def test_pool_closed_error(self):
        exc = blitz.PoolClosedError()
        self.assertIsInstance(exc, blitz.BlitzError)
        self.assertEqual((exc.status, exc.name), (blitz.BLZ_ESHUTDOWN, "BLZ_ESHUTDOWN"))
        self.assertIsInstance(pickle.loads(pickle.dumps(exc)), blitz.PoolClosedError)


class TestModule(unittest.TestCase):
    def test_versions(self):
        self.assertEqual(blitz.__version__, "0.3.0")
        self.assertEqual(blitz.library_version(), blitz.__version__)

    def test_library_path(self):
        self.assertTrue(os.path.isfile(blitz.library_path), blitz.library_path)
        self.assertIn("libblitz.so", os.path.basename(blitz.library_path))
        if os.environ.get("BLITZ_LIBRARY"):
            self.assertEqual(os.path.realpath(blitz.library_path),
                             os.path.realpath(os.environ["BLITZ_LIBRARY"]))

    def test_range_fn_is_the_blz_range_fn_type(self):
        self.assertIs(blitz.RANGE_FN._restype_, None)
        self.assertEqual(blitz.RANGE_FN._argtypes_, (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t))
        same = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t)
        self.assertIs(same, blitz.RANGE_FN)  # ctypes caches the type: a user's own works too

    def test_every_function_of_the_header_is_declared(self):
        functions = support.header_functions()
        if functions is None:
            self.skipTest(f"no {support.HEADER}")
        # The parser found them all: as many as the header has BLZ_API
        # declarations of functions, but the inline fork path's.
        with open(support.HEADER) as header:
            declared = sum(1 for line in header
                           if line.startswith("BLZ_API ") and not line.startswith("BLZ_API extern ")
                           and not support.INLINE_FORK_PATH.search(line.split("(")[0]))
        self.assertEqual(len(functions), declared)
        self.assertEqual(sorted(impl._capi._PROTOTYPES), sorted(functions))
        for name, (returns_void, num_params) in functions.items():
            with self.subTest(function=name):
                fn = getattr(impl._capi.lib, name)
                self.assertEqual(len(fn.argtypes), num_params)
                self.assertEqual(fn.restype is None, returns_void)

    def test_struct_fields_match_the_header(self):
        for struct, name in ((impl.Stats, "blz_stats"), (impl.PoolConfig, "blz_pool_config"),
                             (impl._capi.SpawnOptions, "blz_spawn_options"),
                             (impl._capi.DefaultSizeInfo, "blz_default_size_info")):
            fields = support.header_struct_fields(name)
            if fields is None:
                self.skipTest(f"no {support.HEADER}")
            with self.subTest(struct=name):
                self.assertEqual([field for field, _ in struct._fields_], fields)


    # How blitz.h's C types are declared for ctypes (_capi.py). Opaque
    # handles go as addresses; a few parameters and fields are declared as
    # addresses on purpose (EXCEPTIONS).
    @staticmethod
    def ctypes_of(c_type):
        capi = impl._capi
        handles = ("blz_pool", "blz_task", "blz_group", "blz_event")
        structs = {"blz_pool_config": capi.PoolConfig, "blz_stats": capi.Stats,
                   "blz_spawn_options": capi.SpawnOptions, "blz_default_size_info": capi.DefaultSizeInfo}
        base = c_type.replace("const ", "").replace("* *", "**").strip()  # "blz_task *const *" -> "blz_task **"
        plain = {"void": None, "void *": ctypes.c_void_p, "char *": ctypes.c_char_p, "uint32_t": ctypes.c_uint32,
                 "int32_t": ctypes.c_int32, "uint64_t": ctypes.c_uint64, "size_t": ctypes.c_size_t,
                 "blz_status": capi.blz_status, "blz_fn": capi.FN, "blz_range_fn": capi.RANGE_FN,
                 "blz_thread_fn": capi.THREAD_FN, "blz_done_fn": capi.DONE_FN}
        if base in plain:
            return plain[base]
        name, _, stars = base.partition(" ")
        stars = stars.replace(" ", "")   # "blz_task *const *" (a const array of handles) reads "* *"
        if name in handles:
            return {"*": ctypes.c_void_p, "**": ctypes.POINTER(ctypes.c_void_p)}[stars]
        if name in structs and stars == "*":
            return ctypes.POINTER(structs[name])
        raise AssertionError(f"blitz.h type {c_type!r}: the test does not know how ctypes declares it")

    # Declared as addresses on purpose: (function or struct, parameter index or field).
    EXCEPTIONS = {
        ("blz_spawn_ex", 3): "opts: the binding passes a preallocated struct's address (a cheaper conversion)",
        ("blz_spawn_ex", 4): "out_task: likewise",
        ("blz_pool_config", "spawn_thread"): "NULL here: the binding lets libblitz start the threads",
    }

    def test_prototypes_match_the_header_type_by_type(self):
        prototypes = support.header_prototypes()
        if prototypes is None:
            self.skipTest(f"no {support.HEADER}")
        for name, (returns, params) in prototypes.items():
            restype, argtypes = impl._capi._PROTOTYPES[name]
            with self.subTest(function=name):
                self.assertIs(restype, self.ctypes_of(returns))
                self.assertEqual(len(argtypes), len(params))
                for i, (declared, c_type) in enumerate(zip(argtypes, params)):
                    expected = ctypes.c_void_p if (name, i) in self.EXCEPTIONS else self.ctypes_of(c_type)
                    self.assertIs(declared, expected, f"parameter {i} ({c_type})")

    def test_struct_fields_match_the_header_type_by_type(self):
        capi = impl._capi
        for struct, name in ((capi.Stats, "blz_stats"), (capi.PoolConfig, "blz_pool_config"),
                             (capi.SpawnOptions, "blz_spawn_options"),
                             (capi.DefaultSizeInfo, "blz_default_size_info")):
            fields = support.header_struct_types(name)
            if fields is None:
                self.skipTest(f"no {support.HEADER}")
            with self.subTest(struct=name):
                self.assertEqual(len(struct._fields_), len(fields))
                for (field, declared), (c_field, c_type) in zip(struct._fields_, fields):
                    self.assertEqual(field, c_field)
                    expected = ctypes.c_void_p if (name, field) in self.EXCEPTIONS else self.ctypes_of(c_type)
                    self.assertIs(declared, expected, f"field {field} ({c_type})")

    def test_status_codes_match_the_header(self):
        codes = support.header_status_codes()
        if codes is None:
            self.skipTest(f"no {support.HEADER}")
        self.assertEqual(len(codes), 10)
        for name, value in codes.items():
            with self.subTest(code=name):
                self.assertEqual(getattr(impl._capi, name), value)

    def test_calls_that_keep_the_gil_never_wait_or_call_back(self):
        # _capi._HELD's rule: a call that keeps the GIL returns at once and
        # runs no Python code. So it takes no function the call itself
        # could run (blz_spawn_ex's runs later, on a worker) and is none
        # of the calls that wait (running other jobs meanwhile) or start
        # threads (whose hooks may be Python functions).
        prototypes = support.header_prototypes()
        if prototypes is None:
            self.skipTest(f"no {support.HEADER}")
        callbacks = ("blz_fn", "blz_range_fn", "blz_thread_fn", "blz_done_fn")
        waiting = re.compile(r"join|wait|call|parallel|broadcast|destroy|release|trace|pool_create")
        for name in impl._capi._HELD:
            with self.subTest(function=name):
                self.assertIn(name, prototypes)
                self.assertIsNone(waiting.search(name[len("blz_"):]))
                if name != "blz_spawn_ex":
                    self.assertFalse([t for t in prototypes[name][1] if t in callbacks])


if __name__ == "__main__":
    unittest.main()
