"""The C ABI of include/blitz.h, declared for ctypes: structs, function
types, status codes and the prototype (argtypes, restype) of every function.
tests/test_arguments.py holds them to the header type by type, and _HELD
to its rule (below).
"""
import ctypes
from ctypes import (CFUNCTYPE, POINTER, Structure, c_char_p, c_int32, c_size_t,
                    c_uint32, c_uint64, c_void_p)

from . import _loader

# Status codes (enum blz_status_code).
BLZ_OK = 0
BLZ_EINVAL = -1
BLZ_ENOMEM = -2
BLZ_ETHREAD = -3
BLZ_ESHUTDOWN = -4
BLZ_EDEADLK = -5
BLZ_ETASK = -6
BLZ_EFORK = -7
BLZ_ETIMEDOUT = -8
BLZ_ECANCELED = -9
BLZ_MAX_THREADS = 65535
BLZ_GROUP_CANCEL_ON_FAILURE = 1
# The ABI this binding was written against: same major, at least this minor.
ABI_MAJOR = 0
ABI_MINOR = 3

blz_status = c_int32
# typedef void (*blz_fn)(void *arg);
FN = CFUNCTYPE(None, c_void_p)
TASK_FN = FN  # the public name: a C function submit_c runs
# typedef void (*blz_range_fn)(void *arg, size_t begin, size_t end);
RANGE_FN = CFUNCTYPE(None, c_void_p, c_size_t, c_size_t)
# typedef void (*blz_thread_fn)(void *user, uint32_t worker_index);
THREAD_FN = CFUNCTYPE(None, c_void_p, c_uint32)
# typedef void (*blz_done_fn)(void *done_arg, blz_status status);
DONE_FN = CFUNCTYPE(None, c_void_p, blz_status)


class PoolConfig(Structure):
    """struct blz_pool_config."""
    _fields_ = [
        ("struct_size", c_uint32),
        ("num_threads", c_uint32),
        ("stack_size", c_size_t),
        ("thread_name", c_char_p),
        ("on_thread_start", THREAD_FN),
        ("on_thread_stop", THREAD_FN),
        ("user", c_void_p),
        ("cpu_list", c_char_p),  # 0.2
        ("spawn_thread", c_void_p),  # 0.2; NULL here: the binding lets libblitz start the threads
        ("spawn_user", c_void_p),    # 0.2
    ]


class Stats(Structure):
    """struct blz_stats."""
    _fields_ = [
        ("struct_size", c_uint32),
        ("num_threads", c_uint32),
        ("sleeping_now", c_uint32),
        ("inactive_now", c_uint32),
        ("jobs_executed", c_uint64),
        ("jobs_injected", c_uint64),
        ("steals", c_uint64),
        ("sleeps", c_uint64),
        ("wakeups", c_uint64),
        ("spurious_wakeups", c_uint64),
        ("sleep_aborts", c_uint64),
        ("tasks_failed", c_uint64),
        ("run_ns", c_uint64),     # 0.2
        ("search_ns", c_uint64),  # 0.2
        ("sleep_ns", c_uint64),   # 0.2
    ]


class SpawnOptions(Structure):
    """struct blz_spawn_options (0.2; the predecessor lists 0.3)."""
    _fields_ = [
        ("struct_size", c_uint32),
        ("flags", c_uint32),
        ("group", c_void_p),
        ("on_done", DONE_FN),
        ("done_arg", c_void_p),
        ("after_tasks", POINTER(c_void_p)),
        ("num_after_tasks", c_size_t),
        ("after_events", POINTER(c_void_p)),
        ("num_after_events", c_size_t),
        ("after_groups", POINTER(c_void_p)),
        ("num_after_groups", c_size_t),
    ]


class DefaultSizeInfo(Structure):
    """struct blz_default_size_info (0.3): the default pool size and why."""
    _fields_ = [
        ("struct_size", c_uint32),
        ("num_threads", c_uint32),
        ("source", c_uint32),
        ("environment", c_uint32),
        ("affinity_cpus", c_uint32),
        ("quota_cpus", c_uint32),
    ]


# Opaque handles are passed as c_void_p.
_PROTOTYPES = {
    "blz_version_number": (c_uint32, []),
    "blz_status_string": (c_char_p, [blz_status]),
    "blz_pool_config_init": (None, [POINTER(PoolConfig)]),
    "blz_pool_create": (blz_status, [POINTER(PoolConfig), POINTER(c_void_p)]),
    "blz_pool_destroy": (blz_status, [c_void_p]),
    "blz_pool_num_threads": (c_uint32, [c_void_p]),
    "blz_worker_index": (c_int32, [c_void_p]),
    "blz_pool_stats": (blz_status, [c_void_p, POINTER(Stats)]),
    "blz_default_size": (blz_status, [POINTER(DefaultSizeInfo)]),
    "blz_spawn": (blz_status, [c_void_p, FN, c_void_p, POINTER(c_void_p)]),
    "blz_join": (blz_status, [c_void_p]),
    "blz_fork_join": (blz_status, [c_void_p, FN, c_void_p, FN, c_void_p]),
    "blz_call": (blz_status, [c_void_p, FN, c_void_p]),
    "blz_parallel_for": (blz_status, [c_void_p, c_size_t, c_size_t, c_size_t, RANGE_FN, c_void_p]),
    "blz_group_create": (blz_status, [c_void_p, POINTER(c_void_p)]),
    "blz_group_spawn": (blz_status, [c_void_p, FN, c_void_p]),
    "blz_group_wait": (blz_status, [c_void_p]),
    "blz_group_destroy": (blz_status, [c_void_p]),
    # 0.2
    "blz_spawn_options_init": (None, [POINTER(SpawnOptions)]),
    # opts and out_task as addresses: the binding passes preallocated structs (a cheaper conversion)
    "blz_spawn_ex": (blz_status, [c_void_p, FN, c_void_p, c_void_p, c_void_p]),
    "blz_task_wait_for": (blz_status, [c_void_p, c_uint64]),
    "blz_task_detach": (blz_status, [c_void_p]),
    "blz_group_create_ex": (blz_status, [c_void_p, c_uint32, POINTER(c_void_p)]),
    "blz_group_wait_for": (blz_status, [c_void_p, c_uint64]),
    "blz_group_cancel": (blz_status, [c_void_p]),
    "blz_group_cancelled": (c_int32, [c_void_p]),
    "blz_cancelled": (c_int32, []),
    "blz_fail": (None, []),
    "blz_broadcast": (blz_status, [c_void_p, THREAD_FN, c_void_p]),
    "blz_pool_release": (blz_status, [c_void_p, DONE_FN, c_void_p]),
    "blz_pool_set_max_active": (blz_status, [c_void_p, c_uint32]),
    "blz_worker_stats": (blz_status, [c_void_p, c_uint32, POINTER(Stats)]),
    "blz_pool_trace_start": (blz_status, [c_void_p, c_char_p]),
    "blz_pool_trace_stop": (blz_status, [c_void_p]),
    # 0.3
    "blz_task_cancel": (blz_status, [c_void_p]),
    "blz_event_create": (blz_status, [POINTER(c_void_p)]),
    "blz_event_set": (blz_status, [c_void_p, blz_status]),
    "blz_event_wait_for": (blz_status, [c_void_p, c_uint64]),
    "blz_event_destroy": (blz_status, [c_void_p]),
    "blz_task_finish_later": (blz_status, [POINTER(c_void_p)]),
    "blz_isolate": (blz_status, [c_void_p, FN, c_void_p]),
    "blz_pool_shared": (blz_status, [POINTER(PoolConfig), POINTER(c_void_p)]),
}


# Calls that return quickly and never run Python code (no callback, no job
# run while waiting) go through `held`, a view of the library that keeps the
# GIL during the call: releasing and taking it back would cost more than
# the call, and would hand the GIL to a worker between two spawns. Every
# other call goes through `lib`, which releases the GIL, since what it waits
# for may need it (a job, an on_done, a thread hook).
_HELD = ("blz_version_number", "blz_status_string", "blz_pool_config_init", "blz_pool_num_threads",
         "blz_worker_index", "blz_pool_stats", "blz_worker_stats", "blz_pool_set_max_active", "blz_spawn_options_init", "blz_spawn_ex",
         "blz_task_detach", "blz_task_cancel", "blz_group_create_ex", "blz_group_cancel",
         "blz_group_cancelled", "blz_cancelled", "blz_event_create", "blz_event_set", "blz_task_finish_later")


def _declare(lib, names):
    for name in names:
        restype, argtypes = _PROTOTYPES[name]
        fn = getattr(lib, name)  # AttributeError: not the libblitz this binding knows
        fn.restype = restype
        fn.argtypes = argtypes
    return lib


lib, library_path = _loader.load()
try:
    _declare(lib, _PROTOTYPES)
    held = _declare(ctypes.PyDLL(library_path, handle=lib._handle), _HELD)
except AttributeError as exc:
    raise ImportError(f"blitz: {library_path} lacks a libblitz 0.3 function: {exc}") from None

_number = lib.blz_version_number()
LIBRARY_VERSION = (_number // 10000, _number // 100 % 100, _number % 100)
if LIBRARY_VERSION[0] != ABI_MAJOR or LIBRARY_VERSION[1] < ABI_MINOR:
    raise ImportError(
        f"blitz: {library_path} is libblitz {'.'.join(map(str, LIBRARY_VERSION))}; "
        f"this binding needs {ABI_MAJOR}.{ABI_MINOR}.x or a later {ABI_MAJOR}.x")


def status_string(status):
    """blz_status_string(status) as a str ("BLZ_EINVAL: invalid argument")."""
    return lib.blz_status_string(status).decode("ascii", "replace")


def status_name(status):
    """The status's name ("BLZ_EINVAL"), the part of blz_status_string before
    its colon; "BLZ_UNKNOWN(<status>)" for a code the library does not know."""
    name, colon, _ = status_string(status).partition(":")
    return name if colon and name.startswith("BLZ_") else f"BLZ_UNKNOWN({status})"


def null_pointer(fnptr):
    """Whether a ctypes function pointer is NULL."""
    return ctypes.cast(fnptr, c_void_p).value is None
