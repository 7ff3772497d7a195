"""Executor.map (and Pool.map) without a Future or a spawn per call.

A Future and a spawn per call cost far more than the call of a small fn.
MapRun spawns at most one task per worker instead (the run's *drainers*,
in no group), and each drainer claims the next chunk of `chunksize`
calls, runs them, publishes their outcomes at once, and claims again
until none is left. The consumer waits for the next index in order.

This is the standard executor's own model, a FIFO queue drained by its W
threads, so it behaves the same where the calls block: at most one call
per drainer runs at a time, calls start in input order, and a call that
blocks (sleeps, waits at a barrier for the others, waits for I/O) holds
its worker only, while the other drainers take the rest. (A parallel loop
of fork-join pieces would not: a piece left in the deque of a worker that
blocks in a call may wait for that call.) The drainers are shared jobs,
so each wakes a sleeping worker when one is free.

What the standard semantics need, and what keeps them:
- every call is accepted when map() returns: the calls are collected
  then, and each drainer is a task, whose unit of the runtime's busy
  count makes shutdown(wait=True) wait for it;
- a call that raises does not stop the others; its exception is raised
  when the iteration reaches it;
- an iteration that stops early (an exception, a timeout, the generator
  closed or dropped) cancels the calls not started: `cancelled` stops the
  claims, and each drainer's task cancel (blz_task_cancel) skips the
  drainers not started;
  shutdown(cancel_futures=True) does the same (Runtime.cancel_queued); a
  call that never ran reads as cancelled (CancelledError);
- a result is held by the run only until the consumer takes it (the run
  then keeps a placeholder) and the consumer's generator keeps no name
  for it: once the caller drops a result, it is freed (CPython's issue 14406);
- waiting on one of the pool's own workers waits in C for the drainers
  (Future.exception on each), which runs them instead of blocking the
  worker they may need.

Lifetimes. Each drainer's Future holds the run (its work is the bound
method `_drain`); the iterator holds it too. `_drainer_done`, a drainer's
done callback, is the last thing that touches the run from a worker. A
cancel reaches a drainer's task through the handle its Future keeps, and
only while that handle is valid (Future._cancel_task): a late cancel
touches nothing freed, and no other run's work. No group is made for a
run: each drainer is cancelled on its own.

Shared state (the next claim, the outcomes, the waiting consumer, the
drainers left) is guarded by `_lock`, a _thread lock taken by `with`,
never by the GIL. The consumer waits on a lock of its own (`_waiter`),
which a drainer that publishes what it waits for releases: no
threading.Condition, whose Python methods an interrupt (Ctrl-C on the
consumer's thread) can cut in the middle with its lock held
(_runtime.py, "Interrupts"). `cancelled` is a flag written once under
`_lock` (a drainer reading it late starts one more call, as a cancel
coming while a call starts does in the standard executor).
"""
from __future__ import annotations

import _thread
import concurrent.futures
import time
from concurrent.futures.thread import BrokenThreadPool

from ._errors import PoolClosedError, strip
from ._futures import Future
from ._runtime import _RUN_TASK

_ALL = -1   # what the consumer of outcomes() waits for: every drainer done


class MapRun:
    """fn over a list of argument tuples, drained by up to one task per
    worker; iterate results(), or wait for outcomes()."""

    def __init__(self, runtime, fn, calls, chunksize, timeout):
        self._runtime = runtime
        self._fn = fn
        self._calls = calls                   # an argument tuple per call; None once claimed
        self._chunksize = chunksize
        self._outcomes = [None] * len(calls)  # (True, value) or (False, exception) per call
        self._lock = _thread.allocate_lock()
        self._next = 0                        # the first call not claimed yet
        self._waiter = None                   # (index, lock) of the waiting consumer, if it waits
        self._failure = None                  # why a drainer could not run, if one could not
        self.cancelled = False
        self._deadline = None if timeout is None else time.monotonic() + timeout
        count = min(runtime.num_threads, -(-len(calls) // chunksize))
        self._drainers = [Future(runtime, (self._drain, (), {})) for _ in range(count)]
        self._running = count                 # drainers not done (the ones never spawned are cancelled)
        for drainer in self._drainers:
            drainer.add_done_callback(self._drainer_done)
        try:
            runtime.add_cancellable(self)
            for drainer in self._drainers:
                runtime.spawn(drainer, _RUN_TASK, in_task_group=False)
        except PoolClosedError:
            if not any(map(_spawned, self._drainers)):
                self._abandon()
                raise
            self._cancel_unspawned()   # closing meanwhile: the drainers started take every call
        except BaseException:
            self._abandon()   # as an iteration stopped early: stop what can be stopped
            raise

    def _abandon(self):
        self.cancel()
        self._cancel_unspawned()

    def _cancel_unspawned(self):
        """A drainer whose task does not exist is cancelled here, so that its
        done callback counts it out (its spawn cannot come any more)."""
        for drainer in self._drainers:
            if not _spawned(drainer):
                drainer.cancel()

    # -- on the workers ---------------------------------------------------

    def _drain(self):
        while (claim := self._claim()) is not None:
            lo, hi = claim
            self._publish(lo, self._run_calls(lo, hi))

    def _claim(self):
        with self._lock:
            lo = self._next
            if self.cancelled or lo >= len(self._calls):
                return None
            self._next = hi = min(lo + self._chunksize, len(self._calls))
            return lo, hi

    def _run_calls(self, lo, hi):
        fn, calls, outcomes = self._fn, self._calls, []
        for i in range(lo, hi):
            args, calls[i] = calls[i], None   # the arguments are dropped once used
            broken = self._runtime.broken
            if broken is not None:
                outcomes.append((False, BrokenThreadPool(broken)))
                continue
            try:
                outcomes.append((True, fn(*args)))
            except BaseException as exc:   # everything, as a Future keeps it
                outcomes.append((False, strip(exc)))
        return outcomes

    def _publish(self, lo, outcomes):
        with self._lock:
            end = lo + len(outcomes)
            self._outcomes[lo:end] = outcomes
            if self._waiter is not None and lo <= self._waiter[0] < end:
                self._wake()

    def _drainer_done(self, future):
        """A drainer's done callback (on a worker, or where it was cancelled)."""
        self._unit_done(None if future.cancelled() else future.exception())

    def _unit_done(self, why):
        """The last drainer settles the calls that never ran: cancelled, or
        failed with why a drainer could not run."""
        with self._lock:
            self._running -= 1
            self._failure = self._failure or why
            if self._running:
                return
            for i, outcome in enumerate(self._outcomes):
                if outcome is None:
                    self._outcomes[i] = (False, self._failure or concurrent.futures.CancelledError())
            if self._waiter is not None:
                self._wake()
        self._runtime.discard_cancellable(self)

    def _wake(self):
        """Releases the waiting consumer's lock (under _lock), once."""
        waiter, self._waiter = self._waiter, None
        waiter[1].release()

    # -- the consumer -----------------------------------------------------

    def cancel(self):
        """The calls that have not started are skipped; running ones finish.
        The claims stop first: an interrupt before every drainer's task is
        cancelled leaves drainers that start, find nothing to claim and end."""
        with self._lock:
            if self._running == 0:   # nothing left to skip
                return
            self.cancelled = True
        for drainer in self._drainers:
            drainer._cancel_task()   # not started: skipped; running: its loops stop starting pieces

    def results(self):
        """The results in order; raises a call's exception when reaching it."""
        try:
            for i in range(len(self._outcomes)):
                yield self._result(i)   # no name here holds the result once yielded
        finally:
            self.cancel()

    def _result(self, i):
        ok, value = self._wait_for(i)
        if not ok:
            raise value
        return value

    def outcomes(self):
        """Waits until every call has run (or was cancelled) and returns
        their (ok, value) pairs in order; an interrupted wait (Ctrl-C)
        cancels the calls not started."""
        try:
            self._wait_for_drainers(None)
            self._wait_until(_ALL, lambda: None if self._running else True)
        except BaseException:
            self.cancel()
            raise
        return list(self._outcomes)

    def _wait_for(self, i):
        with self._lock:
            outcome = self._take(i)
        if outcome is not None:
            return outcome
        self._wait_for_drainers(self._remaining)
        return self._wait_until(i, lambda: self._take(i))

    def _wait_until(self, index, ready):
        """ready() (asked under _lock) until it is not None, waiting for the
        drainer that publishes `index` (or, for _ALL, the last one) between
        tries; TimeoutError once the run's deadline has passed."""
        waiter = _thread.allocate_lock()
        waiter.acquire()   # held: the consumer blocks on it until a drainer releases it
        while True:
            with self._lock:
                outcome = ready()
                if outcome is None:
                    self._waiter = (index, waiter)
            if outcome is not None:
                return outcome
            remaining = self._remaining()
            if waiter.acquire(True, -1 if remaining is None else remaining):
                continue   # released by _wake, so taken again: ready for the next round
            with self._lock:   # timed out, unless it was published meanwhile
                self._waiter = None
                outcome = ready()
            if outcome is None:
                raise concurrent.futures.TimeoutError()
            return outcome

    def _wait_for_drainers(self, remaining):
        """On one of the pool's own workers: waits for the drainers in C,
        running them (and the pool's other jobs) meanwhile."""
        if not self._runtime.is_own_worker():
            return
        for future in self._drainers:
            try:
                future.exception(remaining() if remaining else None)
            except concurrent.futures.CancelledError:   # skipped: its calls read as cancelled
                pass

    def _take(self, i):
        """Call i's outcome or None (under _lock); the run lets go of a taken result."""
        outcome = self._outcomes[i]
        if outcome is not None:
            self._outcomes[i] = _TAKEN
        return outcome

    def _remaining(self):
        if self._deadline is None:
            return None
        return max(0.0, self._deadline - time.monotonic())


def _spawned(drainer):
    return bool(drainer._task_cell.value)


_TAKEN = (True, None)   # stands for an outcome the consumer has taken
