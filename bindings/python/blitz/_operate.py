"""What Executor and Pool both say about their pool while it runs."""
from __future__ import annotations

import os
from typing import Optional, Union


class PoolOperations:
    """Statistics, the cap of active workers and tracing, for a class with a `_runtime`."""

    def stats(self) -> dict:
        """A snapshot of the pool's counters (blz_pool_stats) as a dict."""
        return self._runtime.stats()

    def worker_stats(self, index: int) -> dict:
        """One worker's counters and run/search/sleep nanoseconds (blz_worker_stats);
        the pool's stats() are their sum. BlitzError (BLZ_EINVAL) for an unknown index."""
        return self._runtime.worker_stats(index)

    def set_max_active(self, n: Optional[int]) -> None:
        """At most n workers run jobs at once from now on (blz_pool_set_max_active);
        0 or None lifts the cap. Lowering takes effect as running jobs finish."""
        self._runtime.set_max_active(n)

    def trace_start(self, path: Union[str, bytes, "os.PathLike[str]"]) -> None:
        """Starts recording what the workers do, for a Chrome Trace Event file
        written to path by trace_stop() or when the pool closes (blz_pool_trace_start;
        docs/tracing.md reads one). Jobs that run Python functions are named
        after the binding's trampoline, not the function. BlitzError
        (BLZ_EINVAL) for an empty path, one that cannot be opened, or a trace
        already running; ValueError for a path with a NUL byte."""
        self._runtime.trace_start(path)

    def trace_stop(self) -> None:
        """Stops the trace and writes its file (blz_pool_trace_stop). BlitzError
        (BLZ_EINVAL) when no trace runs or the file could not be written."""
        self._runtime.trace_stop()
