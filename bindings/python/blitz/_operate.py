"""What Executor and Pool both say about their pool while it runs."""
from __future__ import annotations

from typing import Optional


class PoolOperations:
    """Statistics and the cap of active workers, for a class with a `_runtime`."""

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
