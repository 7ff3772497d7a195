"""blitz: Python binding of libblitz, a work-stealing thread pool (ctypes, no compiled extension).

    import blitz

    with blitz.Executor() as executor:              # a concurrent.futures executor
        future = executor.submit(pow, 2, 10)
        print(future.result())                      # 1024
        print(list(executor.map(abs, [-1, 2, -3]))) # [1, 2, 3]
        executor.parallel_for(0, len(array), kernel, array)   # a C kernel, no GIL

blitz.Executor is the standard API (submit, map, shutdown, Futures, asyncio's
run_in_executor); blitz.Pool is the binding's first API (spawn, call, join,
map, parallel_for, close) on the same runtime; blitz.aio awaits C kernels.
Python callables hold the GIL while they run, so they run one at a time
(unless the interpreter is free-threaded); C functions (blitz.TASK_FN for
submit_c, blitz.RANGE_FN for parallel_for) run on all workers at once.
"""
import importlib
from concurrent.futures import BrokenExecutor
from concurrent.futures.thread import BrokenThreadPool

from ._capi import (BLZ_ECANCELED, BLZ_EDEADLK, BLZ_EFORK, BLZ_EINVAL, BLZ_ENOMEM, BLZ_ESHUTDOWN,
                    BLZ_ETASK, BLZ_ETHREAD, BLZ_ETIMEDOUT, BLZ_MAX_THREADS, BLZ_OK, LIBRARY_VERSION,
                    RANGE_FN, TASK_FN)
from ._capi import library_path
from ._blocking import blocking
from ._executor import Executor
from ._pool import Pool, Task
from ._errors import BlitzError, PoolClosedError
from ._futures import Future
from ._events import Event

__version__ = "0.3.0"

__all__ = [
    "__version__", "library_version", "library_path", "aio",
    "Executor", "Event", "Future", "Pool", "Task", "BlitzError", "PoolClosedError", "blocking",
    "BrokenExecutor", "BrokenThreadPool", "RANGE_FN", "TASK_FN",
    "BLZ_OK", "BLZ_EINVAL", "BLZ_ENOMEM", "BLZ_ETHREAD", "BLZ_ESHUTDOWN", "BLZ_EDEADLK",
    "BLZ_ETASK", "BLZ_EFORK", "BLZ_ETIMEDOUT", "BLZ_ECANCELED", "BLZ_MAX_THREADS",
]


def __getattr__(name):
    # blitz.aio on first use: `import blitz` does not pay for importing asyncio.
    if name == "aio":
        return importlib.import_module(".aio", __name__)   # which also sets blitz.aio
    raise AttributeError(f"module 'blitz' has no attribute {name!r}")


def library_version():
    """The loaded libblitz's version, "MAJOR.MINOR.PATCH", from blz_version_number()."""
    return "%d.%d.%d" % LIBRARY_VERSION
