"""Executor.map (and Pool.map) without a Future or a spawn per call.

A Future and a spawn per call cost far more than the call of a small fn.
MapRun spawns at most one task per worker instead (the run's *drainers*,
in a group of their own), and each drainer claims the next chunk of
`chunksize` calls, runs them, publishes their outcomes at once, and claims
again until none is left. The consumer waits for the next index in order.

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
  then, and each drainer holds a unit of the runtime's busy count, so
  shutdown(wait=True) waits for them;
- a call that raises does not stop the others; its exception is raised
  when the iteration reaches it;
- an iteration that stops early (an exception, a timeout, the generator
  closed or dropped) cancels the calls not started: `cancelled` stops the
  claims, and the group's cancel skips drainers not started;
  shutdown(cancel_futures=True) does the same (Runtime.cancel_queued); a
  call that never ran reads as cancelled (CancelledError);
- waiting on one of the pool's own workers waits in C for the drainers
  (Future.exception on each), which runs them instead of blocking the
  worker they may need.

Lifetimes. Each drainer's Future holds the run (its work is the bound
method `_drain`); the iterator holds it too. `_drainer_done`, a drainer's
done callback, is the last thing that touches the run from a worker; the
last one gives the group back. The group is the run's until then, and
cancel() touches it only before (both under `_lock`), so a late cancel
cannot skip another run's work.

Shared state (the next claim, the outcomes, the index the consumer waits
for, the drainers left) is guarded by `_lock`, never by the GIL;
`cancelled` is a flag written once under it (a drainer reading it late
starts one more call, as a cancel coming while a call starts does in the
standard executor).
"""
from __future__ import annotations

import concurrent.futures
import threading
import time
from concurrent.futures.thread import BrokenThreadPool

from ._runtime import _RUN_TASK, Future, PoolClosedError, _strip


class MapRun:
    """fn over a list of argument tuples, drained by up to one task per
    worker; iterate results(), or wait for outcomes()."""

    def __init__(self, runtime, fn, calls, chunksize, timeout):
        self._runtime = runtime
        self._fn = fn
        self._calls = calls                   # an argument tuple per call; None once claimed
        self._chunksize = chunksize
        self._outcomes = [None] * len(calls)  # (True, value) or (False, exception) per call
        self._lock = threading.Condition(threading.Lock())
        self._next = 0                        # the first call not claimed yet
        self._wanted = -1                     # the index the consumer waits for
        self._drainers = []                   # their Futures
        self._running = 1                     # drainers not done, + 1 while the constructor starts them
        self._failure = None                  # why a drainer could not run, if one could not
        self.cancelled = False
        self._deadline = None if timeout is None else time.monotonic() + timeout
        self._group = None
        runtime.enter()   # raises if the pool refuses the run; keeps it alive while starting
        try:
            self._group = runtime.take_group()
            self._start_drainers(min(runtime.num_threads, -(-len(calls) // chunksize)))
        except BaseException:
            self.cancel()   # drainers started: stop what can be stopped, as an early stop does
            raise
        finally:
            runtime.leave()
            self._unit_done(None)   # the constructor's unit: the group stays ours until here

    def _start_drainers(self, count):
        self._runtime.add_cancellable(self)
        for _ in range(count):
            future = Future(self._runtime, (self._drain, (), {}))
            with self._lock:
                self._running += 1
            try:
                self._runtime.spawn(future, _RUN_TASK, group=self._group)
            except PoolClosedError:
                with self._lock:
                    self._running -= 1
                if not self._drainers:
                    raise
                return   # closing meanwhile: the drainers started take every call
            except BaseException:
                with self._lock:
                    self._running -= 1
                raise
            self._drainers.append(future)
            future.add_done_callback(self._drainer_done)

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
                outcomes.append((False, _strip(exc)))
        return outcomes

    def _publish(self, lo, outcomes):
        with self._lock:
            end = lo + len(outcomes)
            self._outcomes[lo:end] = outcomes
            if lo <= self._wanted < end:
                self._lock.notify()

    def _drainer_done(self, future):
        """A drainer's done callback."""
        self._unit_done(None if future.cancelled() else future.exception())

    def _unit_done(self, why):
        """The last unit settles the calls that never ran: cancelled, or
        failed with why a drainer could not run."""
        with self._lock:
            self._running -= 1
            self._failure = self._failure or why
            if self._running:
                return
            for i, outcome in enumerate(self._outcomes):
                if outcome is None:
                    self._outcomes[i] = (False, self._failure or concurrent.futures.CancelledError())
            self._lock.notify_all()
        self._runtime.discard_cancellable(self)
        if self._group is not None:   # after _running hit 0: cancel() leaves it alone
            self._runtime.give_back_group(self._group)

    # -- the consumer -----------------------------------------------------

    def cancel(self):
        """The calls that have not started are skipped; running ones finish."""
        with self._lock:
            if self._running == 0:   # nothing left to skip, and the group is no longer ours
                return
            self.cancelled = True
            if self._group is not None:
                self._runtime.cancel_group(self._group)

    def results(self):
        """The results in order; raises a call's exception when reaching it."""
        try:
            for i in range(len(self._outcomes)):
                ok, value = self._wait_for(i)
                if not ok:
                    raise value
                yield value
        finally:
            self.cancel()

    def outcomes(self):
        """Waits until every call has run (or was cancelled) and returns
        their (ok, value) pairs in order; an interrupted wait (Ctrl-C)
        cancels the calls not started."""
        try:
            self._wait_for_drainers(None)
            with self._lock:
                while self._running:
                    self._lock.wait()
                return list(self._outcomes)
        except BaseException:
            self.cancel()
            raise

    def _wait_for(self, i):
        with self._lock:
            outcome = self._take(i)
            if outcome is not None:
                return outcome
        self._wait_for_drainers(self._remaining)
        with self._lock:
            self._wanted = i
            try:
                while (outcome := self._take(i)) is None:
                    if not self._lock.wait(self._remaining()):
                        if (outcome := self._take(i)) is not None:
                            break
                        raise concurrent.futures.TimeoutError()
            finally:
                self._wanted = -1
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


_TAKEN = (True, None)   # stands for an outcome the consumer has taken
