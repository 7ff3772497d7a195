"""blitz.Pool: the binding's first API (0.1), now a thin layer over the same
runtime as blitz.Executor (see _runtime.py for how work reaches C)."""
from __future__ import annotations

from typing import Any, Callable, Iterable, List, Optional, Tuple

from ._arguments import check_callable
from ._errors import BlitzError, raise_stored
from ._futures import Future
from ._map import MapRun
from ._operate import PoolOperations
from ._runtime import Runtime

Task = Future  # what Pool.spawn returns: a standard concurrent.futures.Future


class Pool(PoolOperations):
    """A libblitz work-stealing pool with its own names (spawn, call, join, map, close).

    Pool(num_threads=None, name="blz", cpu_list=None): num_threads None uses the library's
    default (BLZ_NUM_THREADS if set, else the CPUs this process may use);
    name prefixes the worker thread names ("blz-0", "blz-1", ...).
    Pool() with nothing asked for (no size, the default name, no CPU list)
    is a reference to the process pool (blz_pool_shared, 0.3), the one pool
    every library of the process shares, C code included: close() waits for
    this object's own work and gives the reference up; the pool goes with
    the last user. Its workers run no Python hooks (another user may have
    made it), so threading.local values do not last between its tasks.
    Use it in a with-block or call close(); a pool still open when the
    interpreter exits is closed by an atexit handler. For code written for
    concurrent.futures, blitz.Executor is the same pool behind the standard API.
    """

    def __init__(self, num_threads: Optional[int] = None, name: Optional[str] = "blz",
                 cpu_list: Optional[str] = None):
        # cpu_list: a Linux CPU list ("0-3,8-11"); worker i is pinned to its
        # i-th CPU, cycling, and with num_threads None there is one worker
        # per entry (blz_pool_config.cpu_list; BlitzError BLZ_EINVAL if bad).
        self._runtime = None
        # Nothing asked for (no size, the default name, no CPU list): the
        # process pool that every library of the process shares (0.3).
        shared = num_threads is None and name == "blz" and cpu_list is None
        self._runtime = Runtime(num_threads, name, cpu_list=cpu_list, shared=shared)

    @property
    def num_threads(self) -> int:
        """The number of workers."""
        self._runtime.ensure_usable()
        return self._runtime.num_threads

    @property
    def name(self) -> Optional[str]:
        return self._runtime.name

    @property
    def closed(self) -> bool:
        """True once close() has begun."""
        return self._runtime.closed

    @property
    def _ptr(self):
        return self._runtime._ptr

    def spawn(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Task:
        """Runs fn(*args, **kwargs) on a worker, later; returns its Future
        (blitz.Task). The pool's own tasks may spawn while it closes."""
        check_callable(fn, "fn")
        return self._runtime.submit(fn, args, kwargs)

    def call(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        """Runs fn(*args, **kwargs) on a worker and returns its value (or raises
        its exception). On a worker of this pool it runs inline. Ctrl-C
        interrupts the wait (fn keeps running)."""
        check_callable(fn, "fn")
        if self._runtime.is_own_worker():
            return fn(*args, **kwargs)
        return self._runtime.submit(fn, args, kwargs).result()

    def join(self, f: Callable[[], Any], g: Callable[[], Any]) -> Tuple[Any, Any]:
        """Runs f() and g(), possibly in parallel (blz_fork_join), and returns
        (f(), g()). Both run even if one raises; f's exception wins."""
        check_callable(f, "f")
        check_callable(g, "g")
        if not self._runtime.is_own_worker():
            return self.call(self.join, f, g)
        outcomes = self._runtime.fork_join(f, g)
        for ok, value in outcomes:  # f first: its exception wins
            if not ok:
                raise_stored(value)
        return outcomes[0][1], outcomes[1][1]

    def parallel_for(self, begin: int, end: int, body, grain: int = 0, *, arg=None) -> None:
        """Calls body on disjoint sub-ranges covering [begin, end) exactly once.

        body is a Python callable, called as body(lo, hi) (one call at a
        time: it holds the GIL), or a blitz.RANGE_FN pointer to a C
        function, called as body(arg, lo, hi) on the workers without the
        GIL; arg as for Executor.submit_c (keyword-only here, so that 0.1
        calls passing grain by position keep their meaning). grain: indices
        per call at most (0: automatic). If Python calls raise, every other
        piece still runs and the exception of the lowest piece is raised.
        Ctrl-C cancels the loop (see Executor.parallel_for).
        """
        self._runtime.parallel_for(begin, end, body, arg, grain)

    def map(self, fn: Callable[[Any], Any], iterable: Iterable[Any]) -> List[Any]:
        """[fn(x) for x in iterable], computed on the workers, in input order.

        Every item runs; if some raise, the first in input order is raised.
        At most one task per worker claims the next call, in input order,
        until none is left (blitz._map); a call that blocks (sleeps, waits
        for I/O) holds its worker only, and the others take the rest. On a worker of the pool
        the caller runs calls while it waits. Ctrl-C cancels the calls not
        started.
        """
        check_callable(fn, "fn")
        items = list(iterable)
        if not items:
            self._runtime.ensure_usable()  # a closed pool raises all the same
            return []
        outcomes = MapRun(self._runtime, fn, [(item,) for item in items], 1, None).outcomes()
        for ok, value in outcomes:
            if not ok:
                raise_stored(value)
        return [value for _, value in outcomes]

    def close(self) -> None:
        """Waits for every accepted task, stops the workers and frees the pool.

        Idempotent. From one of the pool's own workers it raises BlitzError
        (BLZ_EDEADLK) and changes nothing. Calls from outside the pool made
        once close() has begun raise PoolClosedError; the pool's own tasks
        may still submit work, which runs. Ctrl-C interrupts the wait: the
        pool stays closing, and close() again (or the exit handler) finishes.
        """
        if self._runtime is not None:
            self._runtime.close()

    def __enter__(self):
        self._runtime.ensure_usable()
        return self

    def __exit__(self, *exc_info):
        self.close()

    def __repr__(self):
        runtime = self._runtime
        if runtime is None or not hasattr(runtime, "num_threads"):   # the pool was never created
            return "<blitz.Pool (not created)>"
        return (f"<blitz.Pool name={runtime.name!r} num_threads={runtime.num_threads} "
                f"{runtime.state_name}>")


__all__ = ["Pool", "Task", "BlitzError"]
