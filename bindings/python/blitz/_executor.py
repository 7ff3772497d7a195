"""blitz.Executor: the concurrent.futures executor on a libblitz pool."""
from __future__ import annotations

import concurrent.futures
import threading
from concurrent.futures.thread import BrokenThreadPool
from typing import Any, Callable, Iterable, Iterator, Optional, Tuple

from ._arguments import index_argument
from ._capi import BLZ_MAX_THREADS
from ._errors import raise_stored
from ._map import MapRun
from ._operate import PoolOperations
from ._runtime import KernelRun, LoopCall, Runtime, interpreter_exiting


class Executor(PoolOperations, concurrent.futures.ThreadPoolExecutor):
    """A concurrent.futures executor whose workers are a libblitz pool.

    Executor(max_workers=None, thread_name_prefix="blz", initializer=None, initargs=())

    It behaves as ThreadPoolExecutor does: submit() returns a standard
    concurrent.futures.Future (so as_completed, wait, add_done_callback,
    result(timeout) and asyncio's run_in_executor work), map() yields
    results lazily and in order, shutdown(wait, cancel_futures) and the
    with-block have the standard meaning, and an initializer that raises
    breaks the executor (BrokenThreadPool). It is a subclass of
    ThreadPoolExecutor so that asyncio accepts it as a default executor;
    ThreadPoolExecutor's own threads and queue are never created.

    What differs: the workers (max_workers None: one per CPU this process
    may use, or BLZ_NUM_THREADS; with no initializer, prefix or CPU list
    either, the process pool every library of the process shares, see
    blitz.Pool) start at once and steal work from each
    other; a Future is completed by its task's completion callback on the
    worker; waiting for a Future on one of the pool's own workers runs other
    tasks meanwhile instead of blocking the worker; and C functions run on
    the workers without the GIL: submit_c() and parallel_for().
    """

    def __init__(self, max_workers: Optional[int] = None, thread_name_prefix: str = "blz",
                 initializer: Optional[Callable[..., Any]] = None, initargs: Tuple[Any, ...] = (),
                 cpu_list: Optional[str] = None):
        # ThreadPoolExecutor.__init__ is not called: its queue and threads
        # would be unused. Its public behaviour is reimplemented here.
        if max_workers is not None:
            max_workers = index_argument(max_workers, "max_workers")
            if max_workers <= 0:
                raise ValueError("max_workers must be greater than 0")
            if max_workers > BLZ_MAX_THREADS:
                raise ValueError(f"max_workers must be at most {BLZ_MAX_THREADS}")
        if initializer is not None and not callable(initializer):
            raise TypeError("initializer must be a callable")
        self._shutdown_lock = threading.Lock()
        self._shutdown = False
        # cpu_list: pins the workers, as Pool(cpu_list=...) does (blz_pool_config.cpu_list).
        # max_workers=n keeps its standard meaning (a pool of its own, as do
        # an initializer, a thread name prefix and a CPU list); with none of
        # them the executor uses the process pool every library shares (0.3).
        shared = (max_workers is None and initializer is None and thread_name_prefix == "blz"
                  and cpu_list is None)
        self._runtime = Runtime(max_workers, thread_name_prefix, initializer, initargs, cpu_list=cpu_list,
                                shared=shared)
        self._max_workers = self._runtime.num_threads
        self._thread_name_prefix = thread_name_prefix

    # -- the standard API ---------------------------------------------------

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> concurrent.futures.Future:
        """Runs fn(*args, **kwargs) on a worker; returns its Future."""
        with self._shutdown_lock:   # no shutdown between the check and the spawn
            self._check_open()
            return self._runtime.submit(fn, args, kwargs)

    def submit_after(self, after: Iterable[Any], fn: Callable[..., Any], /, *args: Any,
                     **kwargs: Any) -> concurrent.futures.Future:
        """Runs fn(*args, **kwargs) on a worker once every predecessor in
        `after` has completed: Futures (this executor's or any other
        concurrent.futures.Future) and blitz.Events. Until then the task
        is queued nowhere and no thread waits for it (libblitz 0.3's
        dependencies). A predecessor that raised or was cancelled (an Event
        set with BLZ_ETASK or BLZ_ECANCELED, or closed unset) cancels the
        task: its Future is then cancelled. submit() keeps its standard
        signature; this is the separate door for dependencies."""
        from ._events import Predecessors
        predecessors = Predecessors(after)
        try:
            with self._shutdown_lock:   # no shutdown between the check and the spawn
                self._check_open()
                return self._runtime.submit(fn, args, kwargs, after_events=predecessors.handles)
        finally:
            predecessors.release()

    def map(self, fn: Callable[..., Any], *iterables: Iterable[Any], timeout: Optional[float] = None,
            chunksize: int = 1) -> Iterator[Any]:
        """fn over the iterables' items, as the builtin map, computed on the
        workers: every call is submitted at once, and the results come in
        order as they are iterated. A result not ready timeout seconds after
        map() was called raises TimeoutError; an iteration that stops early
        cancels the calls not started. No Future or task per call: at most
        one task per worker claims chunksize calls at a time, in input
        order, until none is left (blitz._map). If an iterable raises part-way,
        map() raises it, and the calls before it, accepted first, still run
        (as in the standard executor, whose map has submitted them)."""
        if chunksize < 1:
            raise ValueError("chunksize must be >= 1.")
        calls, failure = _argument_tuples(iterables)
        if failure is not None and not calls:   # nothing was accepted: as the standard map
            raise_stored(failure)
        with self._shutdown_lock:   # no shutdown between the check and the start
            self._check_open()
            results = MapRun(self._runtime, fn, calls, chunksize, timeout).results() if calls else iter(())
        if failure is not None:   # the calls before it run all the same
            raise_stored(failure)
        return results

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Refuses new work, then (wait=True) waits until every submitted
        task has finished and frees the pool; with wait=False it returns at
        once and the pool is freed when the work is done. cancel_futures
        cancels the tasks that have not started (the group cancel of the C
        API), whose Futures become cancelled. Idempotent. Ctrl-C interrupts
        the wait; the executor then finishes closing at a later shutdown or
        at exit. From one of its own workers, shutdown(wait=True) raises
        BlitzError (BLZ_EDEADLK) after refusing new work."""
        with self._shutdown_lock:
            self._shutdown = True
            if cancel_futures:
                self._runtime.cancel_queued()
        if wait:
            self._runtime.close()
        else:
            self._runtime.close_soon()

    # -- C code -------------------------------------------------------------

    def submit_c(self, cfunc, arg=None) -> concurrent.futures.Future:
        """Runs the C function cfunc(arg) on a worker, without the GIL;
        returns a Future whose result is None.

        cfunc is a blitz.TASK_FN (CFUNCTYPE(None, c_void_p), the type of
        blz_fn) pointing to C code. arg: None (NULL), an int address, a
        ctypes object (a pointer passes its value, another object its
        address), or an object with a C-contiguous buffer (a numpy array, a
        bytearray, a memoryview) whose address is passed and which stays
        alive and in place until the function has returned. The Future
        fails with BlitzError (BLZ_ETASK) if the function calls blz_fail.
        It cannot be cancelled on its own (cancel() returns False), but
        shutdown(cancel_futures=True) cancels it while it has not started."""
        with self._shutdown_lock:
            self._check_open()
            return self._runtime.submit_c(cfunc, arg)

    def parallel_for(self, begin: int, end: int, kernel, arg=None, grain: int = 0) -> None:
        """Calls kernel on disjoint sub-ranges that cover [begin, end)
        exactly once, on all workers at once, and returns when all have.

        kernel is a blitz.RANGE_FN (the type of blz_range_fn) pointing to C
        code, called as kernel(arg, lo, hi) without the GIL, with arg as for
        submit_c; or a Python callable, called as kernel(lo, hi) (holding
        the GIL: no parallel speed-up). grain: indices per call at most (0:
        automatic). Ctrl-C cancels the loop: pieces not started are skipped
        and KeyboardInterrupt is raised once the running ones have returned.
        Raises BlitzError (BLZ_ETASK) if a piece called blz_fail; if Python
        pieces raise, every piece still runs and the exception of the lowest
        is raised."""
        self._check_open_unless_worker()
        self._runtime.parallel_for(begin, end, kernel, arg, grain)

    # -- the rest -------------------------------------------------------

    def _start_parallel_for(self, begin, end, kernel, arg, grain) -> KernelRun:
        """For blitz.aio: parallel_for started as a cancellable KernelRun, from outside the pool."""
        self._check_open()
        return KernelRun(self._runtime, LoopCall(self._runtime, begin, end, kernel, arg, grain)).start()

    def _check_open(self):
        if self._runtime.broken is not None:
            raise BrokenThreadPool(self._runtime.broken)
        if self._shutdown:
            raise RuntimeError("cannot schedule new futures after shutdown")
        if interpreter_exiting():
            raise RuntimeError("cannot schedule new futures after interpreter shutdown")

    def _check_open_unless_worker(self):
        # A task that is still running during shutdown may finish its own loops.
        if not self._runtime.is_own_worker():
            self._check_open()

    def __repr__(self):
        return (f"<blitz.Executor max_workers={self._max_workers} "
                f"{'shut down' if self._shutdown else self._runtime.state_name}>")


def _argument_tuples(iterables):
    """The argument tuples of map's calls, and the exception that ended the
    iterables early (or None): the tuples before it are still called."""
    calls = []
    try:
        calls.extend(zip(*iterables))   # keeps the tuples it got before an exception
    except BaseException as exc:   # what the standard map lets through, after submitting the rest
        return calls, exc
    return calls, None
