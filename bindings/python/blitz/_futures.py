"""blitz.Future: the concurrent.futures.Future that a libblitz task completes.

Its own state. A standard Future keeps its state under a threading.Condition
(`_condition`), whose __enter__, __exit__, wait and notify_all are Python
code: a Ctrl-C on the main thread inside one of them can leave its lock
held by a `with` that never began (the worker that completes the Future
then blocks on it for ever), release a lock it no longer holds, or wake
only some waiters (_runtime.py, "Interrupts"). The binding used to swap
that condition for one with C-level methods; it now uses only the
standard Future's public methods, so this subclass keeps a state of its
own, under a _thread lock (`_state_lock`) taken by `with` (its C
__enter__ and __exit__), and the main thread never enters the standard
part's condition:

- result(), exception(), done(), cancelled(), running(), cancel(),
  add_done_callback() and repr() read and change the own state only. A
  thread that waits blocks on a lock of its own, listed in `_blocked`
  and released when the Future is done (all of them in one C call).
- The standard part (what concurrent.futures.wait and as_completed read
  through the Future's private fields) follows, changed only through
  the public set_running_or_notify_cancel, set_result, set_exception
  and cancel of concurrent.futures.Future, and only on a worker (where
  no interrupt comes), except for a Future completed by hand. A result
  or an exception is set on both parts under `_state_lock`, the
  standard part first: once this Future reads as finished, wait() sees
  it finished too, and a thread that wait() woke and that asks this
  Future finds it finished (it waits for the lock at most). A cancel()
  changes the own state at once (cancelled() is True, result() raises
  CancelledError, the done callbacks run), and the standard part hears
  of it when the task is skipped or its trampoline starts, on the worker
  (set_running_or_notify_cancel): that is when a standard executor's
  worker tells wait() and as_completed() about a cancelled Future too.
- Done callbacks are kept here (the standard part has none) and called
  once this Future is done: after both parts for a result or an
  exception, at once for a cancel(), as the standard cancel() calls them;
  each exception is logged as the standard Future logs it.
- In a child forked while the task was pending, only the own state fails
  (BLZ_EFORK): the standard part's lock may have been held by a thread of
  the parent, and resetting it would take private API; so wait() and
  as_completed() there see such a Future pending, as they see a
  ThreadPoolExecutor's (whose workers are gone too).

Every libblitz call on the task's handle (wait, detach, cancel) is made by
the runtime (Runtime.task_wait_for and the others), whose module holds
the library: one place calls C.
"""
from __future__ import annotations

import _thread
import collections
import concurrent.futures
import logging
import operator
from ctypes import c_void_p
from concurrent.futures.thread import BrokenThreadPool

from ._arguments import NO_PIN, timeout_argument
from ._capi import BLZ_ECANCELED, BLZ_EDEADLK, BLZ_EFORK, BLZ_ETIMEDOUT, BLZ_OK
from ._errors import BlitzError, strip

_LOGGER = logging.getLogger("concurrent.futures")  # where the standard Future logs
_NO_DEADLINE = (1 << 64) - 1
_allocate_lock = _thread.allocate_lock
_release_lock = operator.methodcaller("release")

# The own state: ordered so that `phase < _CANCELLED` means not done.
_PENDING, _RUNNING, _CANCELLED, _CANCELLED_AND_NOTIFIED, _FINISHED = range(5)
_DESCRIPTIONS = ("pending", "running", "cancelled", "cancelled", "finished")
_CANCELLED_STATES = (_CANCELLED, _CANCELLED_AND_NOTIFIED)


class Future(concurrent.futures.Future):
    """A standard concurrent.futures.Future whose task runs on a libblitz pool.

    It is completed by the task's completion callback (on_done), on the
    worker that ran the task. result() and exception() called on a worker
    of the same pool wait in C and run the pool's other jobs meanwhile, so
    that waiting for a subtask never takes a worker away from it; they raise
    BlitzError (BLZ_EDEADLK) when a task waits for its own Future.
    """

    def __init__(self, runtime, work=None, pin=NO_PIN):
        super().__init__()
        self._runtime = runtime
        self._is_c_task = work is None
        self._work = work        # (fn, args, kwargs) of a Python task until it starts
        self._pin = pin          # a C task's argument, released when it is done
        self._outcome = None     # (True, value) or (False, exception), set by _run
        self._unit = None        # the unit of busy the task holds until its on_done
        self._task_cell = c_void_p()   # blz_spawn_ex writes the handle here: the task exists
        self._handle_lock = _allocate_lock()
        self._handle_taken = False     # a waiter or on_done has the handle (under _handle_lock)
        self._settled = False          # on_done has run (under _handle_lock)
        # The own state (see the module's docstring), changed under _state_lock:
        self._state_lock = _allocate_lock()
        self._phase = _PENDING
        self._final = None             # (True, result) or (False, exception) once finished
        self._blocked = []             # a held lock per thread waiting for the end
        self._own_callbacks = []       # done callbacks not called yet

    # -- the standard API, on the own state --------------------------------

    def cancel(self):
        """Cancels the task if it has not started; returns whether it is
        cancelled. The task is then skipped in C too (blz_task_cancel). A C
        task (submit_c) cannot be cancelled on its own: nothing runs between
        its start and its C function that could tell whether it was skipped
        or ran, so cancel() returns False for it."""
        if self._is_c_task:
            return self.cancelled()
        if not self._cancel_state():
            return False
        self._cancel_task()
        return True

    def cancelled(self):
        return self._phase in _CANCELLED_STATES   # one read: written last (under _state_lock)

    def running(self):
        return self._phase == _RUNNING

    def done(self):
        return self._phase >= _CANCELLED

    def result(self, timeout=None):
        self._wait_in_c(timeout)
        ok, value = self._wait(timeout)
        if ok:
            return value
        try:
            raise value
        finally:
            value = self = None   # no cycle through this frame

    def exception(self, timeout=None):
        self._wait_in_c(timeout)
        ok, value = self._wait(timeout)
        return None if ok else value

    def add_done_callback(self, fn):
        with self._state_lock:
            if self._phase < _CANCELLED:
                self._own_callbacks.append(fn)
                return
        self._invoke((fn,))

    def set_running_or_notify_cancel(self):
        """The standard method (a task's trampoline calls it before the
        callable): True, and the Future is running; False if it was
        cancelled, and then the standard part is cancelled and tells
        wait() and as_completed()."""
        with self._state_lock:
            phase = self._phase
            if phase == _PENDING:
                super().set_running_or_notify_cancel()   # the standard part: running too
                self._phase = _RUNNING
            elif phase == _CANCELLED:
                super().cancel()                          # the standard part follows the cancel
                super().set_running_or_notify_cancel()    # and tells wait() and as_completed()
                self._phase = _CANCELLED_AND_NOTIFIED
        if phase == _PENDING:
            return True
        if phase == _CANCELLED:
            return False
        _LOGGER.critical("Future %s in unexpected state: %s", id(self), _DESCRIPTIONS[phase])
        raise RuntimeError("Future in unexpected state")

    def set_result(self, result):
        self._finish((True, result))

    def set_exception(self, exception):
        self._finish((False, exception))

    def __await__(self):
        """`await future` in a coroutine: the result, without a thread
        waiting for it (blitz.aio.result_of, which has the details)."""
        from .aio import result_of   # asyncio is loaded only by those who await
        return result_of(self).__await__()

    def __repr__(self):
        phase, final = self._phase, self._final   # the phase first: final is written before it
        name = f"<{type(self).__name__} at {id(self):#x} state={_DESCRIPTIONS[phase]}"
        if phase != _FINISHED:
            return name + ">"
        ok, value = final
        return f"{name} {'returned' if ok else 'raised'} {type(value).__name__}>"

    # -- the own state -----------------------------------------------------

    def _wait(self, timeout):
        """The final (ok, value), waiting for it at most timeout seconds
        (None: without limit); CancelledError or TimeoutError instead.
        Interruptible: an interrupt in the wait leaves at most the thread's
        lock in _blocked, to be released (by nobody's wait) at the end."""
        phase = self._phase   # one read: a done Future needs no lock
        if phase < _CANCELLED:
            waiter = _allocate_lock()
            waiter.acquire()   # held: the end releases it
            with self._state_lock:
                phase = self._phase
                if phase < _CANCELLED:
                    self._blocked.append(waiter)
            if phase < _CANCELLED:
                try:   # as threading.Condition.wait takes a timeout
                    if timeout is None:
                        waiter.acquire()
                    elif timeout > 0:
                        waiter.acquire(True, timeout)
                finally:
                    with self._state_lock:
                        phase = self._phase
                        if phase < _CANCELLED:   # not done: the list still holds it
                            self._blocked.remove(waiter)
        if phase in _CANCELLED_STATES:
            raise concurrent.futures.CancelledError()
        if phase == _FINISHED:
            return self._final
        raise concurrent.futures.TimeoutError()

    def _become(self, phase, final):
        """Under _state_lock: the Future is done (phase cancelled or
        finished). Wakes every thread blocked in _wait and returns the done
        callbacks, to be called once the lock is released. An interrupt at
        any point leaves it not done, or done with every waiter woken."""
        wake = map(_release_lock, self._blocked)   # lazy: nothing happens yet
        callbacks = self._own_callbacks
        self._own_callbacks = []
        self._blocked = []
        self._final = final
        self._phase = phase
        collections.deque(wake, 0)   # one C call, no interrupt point inside
        return callbacks

    def _cancel_state(self):
        """Pending -> cancelled (also for a C task, whose group cancel
        skipped it); returns whether the Future is cancelled."""
        with self._state_lock:
            phase = self._phase
            if phase == _PENDING:
                callbacks = self._become(_CANCELLED, None)
        if phase != _PENDING:
            return phase in _CANCELLED_STATES
        self._invoke(callbacks)
        return True

    def _finish(self, final):
        with self._state_lock:
            phase = self._phase
            if phase < _CANCELLED:
                if final[0]:   # the standard part first: wait() sees it finished no later than this part
                    super().set_result(final[1])
                else:
                    super().set_exception(final[1])
                callbacks = self._become(_FINISHED, final)
        if phase >= _CANCELLED:
            raise concurrent.futures.InvalidStateError(f"{_DESCRIPTIONS[phase]}: {self!r}")
        self._invoke(callbacks)

    def _invoke(self, callbacks):
        for callback in callbacks:
            try:
                callback(self)
            except Exception:
                _LOGGER.exception("exception calling callback for %r", self)

    # -- the handle (on the workers: no interrupt reaches this) -------------

    def _wait_in_c(self, timeout):
        """On a worker of the task's pool: waits in blz_task_wait_for, which
        runs other jobs meanwhile; elsewhere the own state's wait does."""
        if not self._runtime.is_own_worker() or self.done():
            return
        timeout = timeout_argument(timeout)
        with self._handle_lock:
            handle = None if self._handle_taken else self._task_cell.value
            if handle is None:   # another waiter has it, on_done has passed, or no task yet
                return
            self._handle_taken = True
        ns = _NO_DEADLINE if timeout is None else min(int(timeout * 1e9), _NO_DEADLINE - 1)
        status = self._runtime.task_wait_for(handle, ns)
        if status == BLZ_ETIMEDOUT or status == BLZ_EDEADLK:   # the handle is still valid
            self._give_back_handle(handle)
            if status == BLZ_EDEADLK:
                raise BlitzError(status, "a task waits for its own result, or for work it is part of")
            raise concurrent.futures.TimeoutError()
        # The task has finished: its on_done completed this Future before the wait returned.

    def _give_back_handle(self, handle):
        """After a wait that did not free the handle: for the next waiter,
        or detached here if on_done passed meanwhile."""
        with self._handle_lock:
            detach = self._settled
            self._handle_taken = detach
        if detach:
            self._runtime.task_detach(handle)

    def _cancel_task(self):
        """Asks libblitz to skip the task if it has not started (a running
        one sees blz_cancelled() == 1, and its loops stop starting pieces).
        Only while the handle is valid: under _handle_lock, before a waiter
        or on_done took it (a taken handle is being freed, or is)."""
        with self._handle_lock:
            handle = None if self._handle_taken else self._task_cell.value
            if handle is not None:
                self._runtime.task_cancel(handle)

    # -- on the worker -----------------------------------------------------

    def _run(self):
        """A Python task's body (through the runtime's _RUN_TASK)."""
        work, self._work = self._work, None
        if not self.set_running_or_notify_cancel():   # cancelled while queued
            return
        broken = self._runtime.broken
        if broken is not None:
            self._outcome = (False, BrokenThreadPool(broken))
            return
        fn, args, kwargs = work
        try:
            self._outcome = (True, fn(*args, **kwargs))
        except BaseException as exc:  # everything: nothing may propagate into C
            self._outcome = (False, strip(exc))

    def _settle(self, status):
        """The task's on_done: completes the Future, frees the handle unless a
        waiter holds it, and gives back the task's unit of busy."""
        try:
            with self._handle_lock:
                handle = None if self._handle_taken else self._task_cell.value
                self._handle_taken = self._settled = True
            if handle is not None:
                self._runtime.task_detach(handle)
            pin, self._pin = self._pin, None
            if pin is not None:
                pin.release()
            self._work = None   # a task skipped before it started still held its callable
            self._complete(status)
        finally:
            self._runtime.give_back(self._unit)

    def _complete(self, status):
        outcome, self._outcome = self._outcome, None
        if status == BLZ_ECANCELED:        # skipped before it started: its own cancel or its group's
            broken = self._runtime.broken
            if broken is not None and not self.cancelled():
                try:
                    self.set_exception(BrokenThreadPool(broken))
                    return
                except concurrent.futures.InvalidStateError:   # cancelled meanwhile
                    pass
            if self._cancel_state():
                self.set_running_or_notify_cancel()   # the standard part: tells wait() and as_completed()
        elif self.cancelled():             # cancelled while queued: _run saw it and told the standard part
            pass
        elif status == BLZ_OK:
            if outcome is None:            # a C task
                self.set_result(None)
            elif outcome[0]:
                self.set_result(outcome[1])
            else:
                self.set_exception(outcome[1])
        else:                              # a C task that failed (blz_fail, a C++ exception)
            self.set_exception(BlitzError(status, "the C task failed"))

    def _fail_in_forked_child(self):
        """In a child process: the parent's task will not end here. Fails the
        own state (BLZ_EFORK) unless it is done; see the module's docstring."""
        self._handle_lock = _allocate_lock()   # the parent's locks may have been held
        self._handle_taken = True   # the parent's handle: nothing to free here
        self._state_lock = _allocate_lock()
        self._blocked = []          # the locks of the parent's waiting threads: none exist here
        callbacks = ()
        with self._state_lock:
            if self._phase < _CANCELLED:
                failure = BlitzError(BLZ_EFORK, "the task was queued in the parent process")
                callbacks = self._become(_FINISHED, (False, failure))
        self._invoke(callbacks)
