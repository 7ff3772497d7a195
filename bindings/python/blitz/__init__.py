"""blitz: Python binding of libblitz, a work-stealing thread pool (ctypes, no compiled extension).

    import blitz

    with blitz.Pool() as pool:
        task = pool.spawn(pow, 2, 10)
        print(task.result())                       # 1024
        print(pool.map(abs, [-1, 2, -3]))          # [1, 2, 3]
        print(pool.join(lambda: 1, lambda: 2))     # (1, 2)

Python callables hold the GIL while they run, so they run one at a time
(a callable that sleeps or waits for I/O releases it); C function pointers
(blitz.RANGE_FN) passed to parallel_for run on all workers at once.
"""
from ._capi import (BLZ_EDEADLK, BLZ_EFORK, BLZ_EINVAL, BLZ_ENOMEM, BLZ_ESHUTDOWN, BLZ_ETASK,
                    BLZ_ETHREAD, BLZ_MAX_THREADS, BLZ_OK, LIBRARY_VERSION, RANGE_FN)
from ._capi import library_path
from ._pool import BlitzError, Pool, PoolClosedError, Task

__version__ = "0.2.0"

__all__ = [
    "__version__", "library_version", "library_path",
    "Pool", "Task", "BlitzError", "PoolClosedError", "RANGE_FN",
    "BLZ_OK", "BLZ_EINVAL", "BLZ_ENOMEM", "BLZ_ETHREAD", "BLZ_ESHUTDOWN", "BLZ_EDEADLK",
    "BLZ_ETASK", "BLZ_EFORK", "BLZ_MAX_THREADS",
]


def library_version():
    """The loaded libblitz's version, "MAJOR.MINOR.PATCH", from blz_version_number()."""
    return "%d.%d.%d" % LIBRARY_VERSION
