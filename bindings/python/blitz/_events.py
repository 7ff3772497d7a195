"""blitz.Event: a completion that Python code sets (blz_event, 0.3), and the
predecessors of Executor.submit_after.

An Event is set once, from any thread, with a status (set() or
set(BLZ_ETASK) / set(BLZ_ECANCELED)); tasks submitted after it run once it
is set; wait() blocks for it, and `await event` waits for it in asyncio
without a thread (a task of the process pool that runs after the event
hands the end to the loop, as an awaited Future does).

The handle's lifetime. blz_event_destroy must not overlap any other call
on the handle. Every call that uses it (set, a wait slice, a spawn that
names it) holds a use: _acquire() takes the handle and counts the use
under `_lock` (a _thread lock taken by `with`), _release() gives it back.
close() sets the event BLZ_ECANCELED if it is unset (which wakes the
waiters and cancels, or runs, its successors, as blz_event_destroy does)
and takes the handle out at once; the destroy itself is made by whoever
ends the last use (close() itself when there is none): take-then-call,
once. Waits are slices of at most _SLICE seconds, so that Ctrl-C reaches a
waiting main thread and a close() is seen within a slice.

Predecessors that are Futures. submit_after(after, ...) turns each
concurrent.futures.Future in `after` into a bridge Event, set by the
Future's done callback with the Future's end (BLZ_OK, BLZ_ETASK for an
exception, BLZ_ECANCELED for a cancel) and closed right after. The
spawner holds a use of each bridge from before the callback is
registered until the spawn returned, so a callback that runs at once (a
Future already done) cannot destroy the bridge under the spawn.

Exit. A task waiting for an event that nobody sets would keep its pool's
close (and the interpreter's exit handler) waiting for ever: every Event
still open at exit is closed (BLZ_ECANCELED) by an atexit handler that
runs before the pools are closed (atexit runs the last registered first,
and this module is imported after _runtime registered its handler).
"""
from __future__ import annotations

import _thread
import atexit
import concurrent.futures
import ctypes
import weakref
from ctypes import byref, c_void_p

from . import _capi
from ._capi import BLZ_ECANCELED, BLZ_EINVAL, BLZ_ETASK, BLZ_ETIMEDOUT, BLZ_OK, BLZ_SPAWN_AFTER_ANY_END
from ._errors import BlitzError, check

_SLICE_NS = 50_000_000   # 50 ms: a wait's slice (see the module's docstring)
_SETTABLE = (BLZ_OK, BLZ_ETASK, BLZ_ECANCELED)
_open_events = weakref.WeakSet()   # closed at exit (see the module's docstring)
_allocate_lock = _thread.allocate_lock


class Event:
    """A completion set from Python: a predecessor of Executor.submit_after
    tasks, waitable with wait() and awaitable in asyncio. Use it in a
    with-block or close() it; see the module's docstring."""

    def __init__(self):
        self._lock = _allocate_lock()
        self._cell = c_void_p()   # written by blz_event_create: the event exists iff set
        self._users = 0           # calls using the handle now (under _lock)
        self._closed = False      # close() was called (under _lock)
        self._final = None        # the status of the set this object made or saw
        check(_capi.held.blz_event_create(byref(self._cell)), "blz_event_create")
        _open_events.add(self)

    # -- the handle's uses -------------------------------------------------

    def _acquire(self):
        """The handle, with one more use counted; BlitzError(BLZ_EINVAL) once closed."""
        with self._lock:
            handle = None if self._closed else self._cell.value
            if handle is not None:
                self._users += 1
        if handle is None:
            raise BlitzError(BLZ_EINVAL, "the event is closed")
        return handle

    def _release(self):
        """Ends a use; the last use after a close() destroys the event."""
        with self._lock:
            self._users -= 1
            handle = self._take_if_unused()
        if handle is not None:
            _capi.lib.blz_event_destroy(handle)

    def _take_if_unused(self):
        """Under _lock: the handle, taken out, if it is closed and unused."""
        if not self._closed or self._users > 0 or not self._cell.value:
            return None
        handle, self._cell.value = self._cell.value, None
        return handle

    # -- the API -------------------------------------------------------------

    def set(self, status: int = BLZ_OK) -> None:
        """Sets the event: BLZ_OK, or BLZ_ETASK / BLZ_ECANCELED for work that
        failed or was given up (its successors are then cancelled, unless
        submitted with after_any_end). Once: a second set raises
        BlitzError(BLZ_EINVAL) and changes nothing. Any thread."""
        if status not in _SETTABLE:
            raise ValueError("status must be BLZ_OK, BLZ_ETASK or BLZ_ECANCELED")
        handle = self._acquire()
        try:
            check(_capi.held.blz_event_set(handle, status), "blz_event_set")
            self._final = status
        finally:
            self._release()

    def is_set(self) -> bool:
        """Whether the event was set (or closed)."""
        return self._status(0) != BLZ_ETIMEDOUT

    def wait(self, timeout=None) -> int:
        """Waits until the event is set and returns its status (BLZ_OK,
        BLZ_ETASK or BLZ_ECANCELED; BLZ_ECANCELED too once it is closed);
        raises TimeoutError after `timeout` seconds (None: no bound).
        Interruptible by Ctrl-C between slices of 50 ms."""
        remaining = None if timeout is None else max(0, int(timeout * 1e9))
        while True:
            step = _SLICE_NS if remaining is None else min(_SLICE_NS, remaining)
            status = self._status(step)
            if status != BLZ_ETIMEDOUT:
                return status
            if remaining is not None:
                remaining -= step
                if remaining <= 0:
                    raise concurrent.futures.TimeoutError()

    def _status(self, timeout_ns):
        try:
            handle = self._acquire()
        except BlitzError:   # closed: its final status, or the close's cancel
            return BLZ_ECANCELED if self._final is None else self._final
        try:
            status = _capi.lib.blz_event_wait_for(handle, timeout_ns)   # releases the GIL
        finally:
            self._release()
        return status

    def close(self) -> None:
        """Gives the event up: unset, it is set BLZ_ECANCELED first (its
        waiters wake, its successors are cancelled or, with after_any_end,
        run). Idempotent; the handle is freed once no call uses it."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            handle = self._cell.value
            if handle is not None and _capi.held.blz_event_set(handle, BLZ_ECANCELED) == BLZ_OK:
                self._final = BLZ_ECANCELED
            handle = self._take_if_unused()
        if handle is not None:
            _capi.lib.blz_event_destroy(handle)

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()

    def __del__(self):   # a backstop: an Event dropped without close()
        try:
            self.close()
        except Exception:
            pass

    def __await__(self):
        """`status = await event` in a coroutine (blitz.aio.event_status)."""
        from .aio import event_status
        return event_status(self).__await__()

    def __repr__(self):
        state = "closed" if self._closed else "open"
        return f"<blitz.Event at {id(self):#x} {state}>"


def _status_of(future):
    """What a done Future's end is as an event status."""
    if future.cancelled():
        return BLZ_ECANCELED
    return BLZ_OK if future.exception() is None else BLZ_ETASK


def _settle_bridge(bridge, future):
    """A predecessor Future's done callback: sets its bridge, then gives
    the bridge up (destroyed once the spawn's use has ended)."""
    try:
        bridge.set(_status_of(future))
    finally:
        bridge.close()


class Predecessors:
    """The events of a submit_after call, each with a use held for the
    spawn: `handles` is the ctypes array blz_spawn_ex reads; release() ends
    the uses (in a finally, spawned or not)."""

    def __init__(self, after):
        self._held = []
        try:
            for item in after:
                self._hold(item)
        except BaseException:
            self.release()
            raise
        self.handles = (c_void_p * len(self._held))(*(handle for _, handle in self._held))

    def _hold(self, item):
        if isinstance(item, Event):
            self._held.append((item, item._acquire()))
            return
        if not isinstance(item, concurrent.futures.Future):
            raise TypeError(f"after: a concurrent.futures.Future or a blitz.Event, not {type(item).__name__}")
        bridge = Event()
        self._held.append((bridge, bridge._acquire()))   # before the callback can close it
        item.add_done_callback(lambda future, bridge=bridge: _settle_bridge(bridge, future))

    def release(self):
        held, self._held = self._held, []
        for event, _ in held:
            event._release()


_notifier_lock = _allocate_lock()
_notifier = []   # [Runtime]: the process pool's reference that awaits of events use


def _nothing():
    return None


def notify_after(event):
    """A Future completed once `event` is set or closed, whatever its
    status: a task of the process pool (BLZ_SPAWN_AFTER_ANY_END) that does
    nothing, so that asyncio hears of the event through the Future's
    on_done as for any task, with no thread waiting."""
    from ._runtime import Runtime
    with _notifier_lock:
        if not _notifier or _notifier[0].closed:
            _notifier[:] = [Runtime(None, "blz", shared=True)]
        runtime = _notifier[0]
    predecessors = Predecessors([event])
    try:
        return runtime.submit(_nothing, (), {}, after_events=predecessors.handles, flags=BLZ_SPAWN_AFTER_ANY_END)
    finally:
        predecessors.release()


def close_open_events():
    """At exit, before the pools close: every Event still open is closed."""
    for event in list(_open_events):
        try:
            event.close()
        except Exception:
            pass


atexit.register(close_open_events)

__all__ = ["Event", "BLZ_SPAWN_AFTER_ANY_END"]
