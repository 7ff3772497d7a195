"""The core under blitz.Executor and blitz.Pool: one libblitz pool driven
from Python through ctypes. The Future its tasks complete is in
_futures.py, the checks of arguments and the pins of C arguments in
_arguments.py; this module makes every libblitz call of the binding.

How work reaches a worker. C calls back through module-level ctypes
trampolines (_RUN_TASK, a blz_fn; _TASK_DONE, a blz_done_fn; the thread
hooks; _RUN_HALF and _RUN_RANGE for fork-join halves and Python loop
bodies), which live as long as the module, so no callback object is made
per task and none can be freed while C may call it. The void * that C
passes back is id(record) of an object registered in _callbacks; the
registration is what keeps the record alive while C holds its key, and
while it is registered no other object has that id.

A task. Executor.submit / Pool.spawn make a Future, register it and call
blz_spawn_ex with on_done = _TASK_DONE. On a worker, _RUN_TASK runs the
callable (after the standard set_running_or_notify_cancel) and keeps its
outcome; then the task's on_done, on the same worker, unregisters the
Future and completes it (set_result, set_exception, or cancelled when the
task, or its group, was cancelled before it started). C tasks (submit_c)
have the user's function pointer as blz_fn and the same on_done. Nothing
polls. Every task submitted is in the pool's task group, which
shutdown(cancel_futures=True) cancels.

Handles. Each task is spawned with a blz_task handle, so that a worker of
the same pool that waits for the Future can wait in C, running the pool's
other jobs meanwhile (blz_task_wait_for), instead of blocking a worker the
task may need, and so that the task can be cancelled on its own
(blz_task_cancel). blz_spawn_ex writes the handle straight into the
Future's _task_cell. Exactly one party frees it, decided under the
Future's _handle_lock: a waiter takes it (blz_task_wait_for frees it
unless it timed out, and then the waiter gives it back, and detaches it if
on_done has passed meanwhile); otherwise on_done detaches it. A cancel
uses it under the same lock, only while neither has taken it. Dropped
Futures leak nothing and need no reaper.

Cancelling. Future.cancel() cancels its task's handle (the trampoline's
set_running_or_notify_cancel is what guarantees that a cancelled Future's
callable never runs; the C cancel spares the trampoline's start). A
parallel_for from outside the pool (KernelRun) is a task of its own, in
no group, whose handle Ctrl-C cancels: its blz_parallel_for stops starting
pieces. A map run (_map.py) stops its claims and cancels its drainers'
handles. shutdown(cancel_futures=True) cancels the task group and every
map run. No task waits in a group of its own: the only group is the task
group, made with the pool and freed after it.

The GIL. Calls that may wait go through _capi.lib (ctypes.CDLL), which
releases the GIL, since what they wait for may need it. Short calls that
never run Python go through _capi.held (ctypes.PyDLL), which keeps it.
A worker keeps one Python thread state from its start hook to its stop
hook (one extra PyGILState_Ensure): threading.local values, such as what
an executor's initializer sets up, last for the worker's life, and a
callback does not build and tear down a thread state each time.

Lifetimes. The C pool is freed by blz_pool_destroy, after which no call on
it may start. A unit of busy stands for something that may still touch
it: a C call from a thread outside the pool while it runs, and each task
from its spawn until its on_done has completed its Future. A unit is a
lock of its own, held while it lasts and listed in Runtime._units.
close() refuses new units from outside, waits (interruptibly) for every
listed unit's lock, and only then destroys the pool; a task may spawn
more while it runs, since its own unit is still listed. The task group is
freed after the pool. A buffer passed as a C argument stays exported
(pinned, so that a bytearray cannot move) until the C code that uses it
has returned. Runtimes left open are closed by an atexit handler, before
the interpreter finalizes (a worker taking the GIL in a finalizing
interpreter would be ended by pthread_exit inside its job), and Ctrl-C
cannot make that handler return early (see _close_all_at_exit).

Interrupts. CPython raises an asynchronous exception (KeyboardInterrupt
for Ctrl-C, or what another signal handler raises) only on the main
thread, and only where its eval loop checks for pending calls: at the
start of a Python function (or of a generator's resumption), right after
a call returns (before its result is stored), and at a loop's backward
jump; also inside a blocking wait that checks for signals (a lock's
acquire), which then has taken nothing. The workers never get one, so on_done
and the trampolines need none of what follows. On the main thread the
binding keeps its state whole at each such point by four rules:
  1. Locks are _thread locks taken by `with`: the lock's own (C)
     __enter__ takes it, and any exception after that reaches its (C)
     __exit__. No threading.Condition: its __enter__ is Python, and an
     interrupt after its lock is taken and before `with` owns it leaves
     the lock held for ever. The standard Future keeps its state under
     one, so blitz.Future keeps a state of its own under a _thread lock,
     and the main thread never enters the standard part (_futures.py).
  2. A unit is given back by releasing its lock, one C call at the head
     of the `with`, finally or on_done that owns it; close() waits for
     each unit's lock, never for a count that an interrupted decrement
     could leave wrong.
  3. What C creates is recorded before the call, in a ctypes cell the
     call itself writes (the pool, the task group, each task's handle):
     an interrupt after the call returns loses nothing, and a caller's
     finally asks the cell whether the call happened.
  4. What C frees is taken out of its record first, with no such point
     between that and the call (take-then-call): freed exactly once.
Steps that cannot be one C call are ordered so that an interrupt between
them leaves only work that the next close() or the exit handler finishes:
never a held lock, a unit counted for nothing, a double free or a Future
that cannot complete. tests/ctrl_c_child.py raises KeyboardInterrupt at
every such point of the main thread's calls, in turn, and checks this.
Two Ctrl-C in a row may still land in an interrupted call's own cleanup
(a map's or loop's calls not cancelled, a cancelled Future's done
callbacks not called): work that runs to its end, never a crash or a
wedge.

Free-threaded CPython. Shared state is guarded by locks, never by the GIL:
Runtime._mutex guards its state and the task group; a Future's
_handle_lock its handle and _state_lock its state; _units, _callbacks and
the other registries are sets, dicts and lists used by single operations
(each atomic in both builds, under the object's own lock there). Python
callables then really run on all workers at once.
"""
from __future__ import annotations

import _thread
import atexit
import concurrent.futures
import ctypes
import logging
import os
import signal
import sys
import threading
from ctypes import byref, c_int, c_void_p

from . import _capi
from ._arguments import (NO_PIN, c_argument, check_c_function, check_callable, index_argument,
                         size_argument)
from ._capi import (BLZ_EDEADLK, BLZ_EFORK, BLZ_MAX_THREADS, BLZ_OK, DONE_FN, FN, RANGE_FN,
                    THREAD_FN, PoolConfig, SpawnOptions, Stats)
from ._errors import BlitzError, PoolClosedError, check, raise_stored, strip
from ._futures import Future

_lib = _capi.lib
_held = _capi.held
_EVENTS = ctypes.POINTER(ctypes.c_void_p)   # blz_event *const *
_LOGGER = logging.getLogger("concurrent.futures")  # where the standard executors log

_python = ctypes.PyDLL(None)  # the interpreter's own C API; calls keep the GIL
_python.PyGILState_Ensure.argtypes = []
_python.PyGILState_Ensure.restype = c_int
_python.PyGILState_Release.argtypes = [c_int]
_python.PyGILState_Release.restype = None


# ---------------------------------------------------------------- callbacks from C

_callbacks = {}               # id(record) -> record, while C may call back with that key
_tls = threading.local()      # .runtime, .index: set on a worker by its start hook


def _thread_started(key, index):
    _callbacks[key]._worker_started(index)


def _thread_stopping(key, index):
    _callbacks[key]._worker_stopping()


def _run_task(key):
    _callbacks[key]._run()


def _task_done(key, status):
    _callbacks.pop(key)._settle(status)


def _run_half(key):
    _callbacks[key].run()


def _run_range(key, lo, hi):
    _callbacks[key].run(lo, hi)


_THREAD_STARTED = THREAD_FN(_thread_started)
_THREAD_STOPPING = THREAD_FN(_thread_stopping)
_RUN_TASK = FN(_run_task)
_TASK_DONE = DONE_FN(_task_done)
_RUN_HALF = FN(_run_half)
_RUN_RANGE = RANGE_FN(_run_range)


def _spawn_scratch():
    """This thread's blz_spawn_options and its address, taken out of the
    thread-local store while in use: a signal handler that spawns in the
    middle of a spawn gets one of its own."""
    scratch = _tls.__dict__.pop("scratch", None)
    if scratch is None:
        options = SpawnOptions()
        _held.blz_spawn_options_init(byref(options))
        options.on_done = _TASK_DONE
        scratch = (options, ctypes.addressof(options))
    return scratch


_allocate_lock = _thread.allocate_lock


# ---------------------------------------------------------------- jobs a worker runs inline

class _Half:
    """One callable of a blz_fork_join (Pool.join on a worker)."""
    __slots__ = ("fn", "outcome")

    def __init__(self, fn):
        self.fn = fn
        self.outcome = None

    def run(self):
        try:
            self.outcome = (True, self.fn())
        except BaseException as exc:
            self.outcome = (False, strip(exc))


class _RangeBody:
    """A Python loop body for blz_parallel_for."""
    __slots__ = ("body", "exc", "exc_lo", "lock")

    def __init__(self, body):
        self.body = body
        self.exc = None
        self.exc_lo = 0
        self.lock = threading.Lock()

    def run(self, lo, hi):
        try:
            self.body(lo, hi)
        except BaseException as exc:
            with self.lock:  # keep the exception of the lowest piece: deterministic
                if self.exc is None or lo < self.exc_lo:
                    self.exc, self.exc_lo = strip(exc), lo


# ---------------------------------------------------------------- the runtime

_OPEN, _DRAINING, _CLOSED = range(3)
STATE_NAMES = ("open", "closing", "closed")

_registry_lock = threading.Lock()
_open_runtimes = set()   # strong references: a runtime lives until it is closed
_exiting = False


def interpreter_exiting():
    return _exiting


class Runtime:
    """One libblitz pool and what Python keeps about it (see the module's docstring)."""

    def __init__(self, num_threads, name, initializer=None, initargs=(), cpu_list=None, shared=False):
        # shared: a reference to the process pool (blz_pool_shared), the one
        # every library of the process shares; no hooks (another user may
        # have made it), so no initializer, no names, and is_own_worker asks
        # the library. close() waits for this runtime's own work, then gives
        # the reference up (the pool goes with the last one in the process).
        self._shared = shared
        if shared and (num_threads is not None or initializer is not None or cpu_list is not None):
            raise ValueError("the process pool takes no size, initializer or cpu_list")
        self._state = _CLOSED     # until created: close() and repr work on a failed init
        self._ptr = None          # the pool, once created (a copy of _pool_cell's value)
        self._pool_cell = c_void_p()   # blz_pool_create writes the pool here; _destroy takes it out
        self._key = id(self)
        self._mutex = _allocate_lock()           # guards _state, the task group's cell, broken
        self._destroy_mutex = _allocate_lock()   # the closer that destroys holds it
        self._units = set()       # the lock of each unit of busy (see the module's docstring)
        self._task_group_cell = c_void_p()   # blz_group_create_ex writes it; freed after the pool
        self._cancellables = set()  # map runs that cancel_queued cancels (MapRun)
        self.broken = None        # why the pool is unusable (an initializer raised), else None
        self.name = name
        self._initializer = initializer
        self._initargs = tuple(initargs)
        if num_threads is None:
            count = 0
        else:
            count = index_argument(num_threads, "num_threads")
            if not 1 <= count <= BLZ_MAX_THREADS:
                raise ValueError(f"num_threads must be in 1..{BLZ_MAX_THREADS} or None, not {count}")
        if name is None:
            encoded = None
        elif isinstance(name, str):
            encoded = name.encode("utf-8")
            if b"\0" in encoded:
                raise ValueError("the thread name must not contain NUL characters")
        else:
            raise TypeError(f"the thread name must be a str or None, not {type(name).__name__}")

        if cpu_list is not None and not isinstance(cpu_list, str):
            raise TypeError(f"cpu_list must be a str or None, not {type(cpu_list).__name__}")
        config = PoolConfig()
        _lib.blz_pool_config_init(byref(config))
        config.num_threads = count
        config.thread_name = encoded  # read only during blz_pool_create
        # A Linux CPU list ("0-3,8"); a NUL in it cuts it short, which the library then judges.
        config.cpu_list = None if cpu_list is None else cpu_list.encode("ascii", "replace")
        config.on_thread_start = _THREAD_STARTED
        config.on_thread_stop = _THREAD_STOPPING
        config.user = self._key
        with _registry_lock:
            if _exiting:
                raise RuntimeError("blitz: cannot create a pool once the interpreter is exiting")
            _callbacks[self._key] = self   # the hooks find it from the first worker's start
            _open_runtimes.add(self)       # before the pool exists: an interrupted __init__ is closed at exit
            if shared:
                status = _lib.blz_pool_shared(None, byref(self._pool_cell))
            else:
                status = _lib.blz_pool_create(byref(config), byref(self._pool_cell))
            if status != BLZ_OK:
                _open_runtimes.discard(self)
                del _callbacks[self._key]
                check(status, "blz_pool_shared" if shared else "blz_pool_create")
            self._ptr = self._pool_cell.value
            self.num_threads = _held.blz_pool_num_threads(self._ptr)
            self._state = _OPEN
        try:
            check(self.call_admitted(_held.blz_group_create_ex, self._ptr, 0, byref(self._task_group_cell)),
                  "blz_group_create_ex")
        except BaseException:
            self.close()
            raise
        with self._mutex:
            broken = self.broken
        if broken is not None:   # an initializer failed before the group existed
            self._cancel_task_group()

    # -- workers --------------------------------------------------------

    def _worker_started(self, index):
        # One more PyGILState_Ensure than ctypes' own: this thread keeps its
        # Python thread state (and threading.local values) between callbacks.
        _tls.gilstate = _python.PyGILState_Ensure()
        _tls.runtime = self
        _tls.index = index
        if self.name is not None:
            threading.current_thread().name = f"{self.name}-{index}"
        if self._initializer is None:
            return
        try:
            self._initializer(*self._initargs)
        except BaseException:
            _LOGGER.critical("Exception in initializer:", exc_info=True)
            self._mark_broken("A thread initializer failed, the thread pool is not usable anymore")

    def _worker_stopping(self):
        _tls.runtime = None
        gilstate = _tls.__dict__.pop("gilstate", None)
        if gilstate is not None:   # the last callback on this thread frees its thread state
            _python.PyGILState_Release(gilstate)

    def _mark_broken(self, why):
        with self._mutex:
            if self.broken is None:
                self.broken = why
        self._cancel_task_group()   # queued tasks are skipped, and fail with BrokenThreadPool

    def is_own_worker(self):
        """Whether the calling thread is one of this pool's workers."""
        if self._shared:   # no start hook marked the thread: the library knows (a pointer comparison only)
            ptr = self._ptr
            return ptr is not None and _held.blz_worker_index(ptr) >= 0
        return getattr(_tls, "runtime", None) is self

    # -- admission ------------------------------------------------------

    def _admits(self):
        """Whether a new unit may start: the pool is open, or closing and
        this is one of its workers (running a task, whose unit is held).
        Asked after the unit is listed in _units: close() changes the state
        before it reads _units, so either close() sees the unit and waits
        for it, or this sees the change and refuses."""
        state = self._state
        return state == _OPEN or (state == _DRAINING and self.is_own_worker())

    def call_admitted(self, cfunc, *args):
        """cfunc(*args), a C call on the pool (or one of its groups), as a unit
        of busy: refused with PoolClosedError once close() has begun (from
        outside the pool), and the pool outlives it. Returns its status.

        A pool or group pointer among args may be read before admission:
        it is used only if admitted, and it cannot be freed once admitted."""
        unit = _allocate_lock()
        with unit:                  # held from before it is listed until `with` ends, whatever happens
            self._units.add(unit)
            try:
                if not self._admits():
                    raise PoolClosedError()
                status = cfunc(*args)
            finally:
                self._units.discard(unit)
        return status

    def give_back(self, unit):
        """Gives back a task's unit (its on_done, on a worker)."""
        self._units.discard(unit)
        unit.release()

    @property
    def closed(self):
        return self._state != _OPEN

    @property
    def state_name(self):
        return STATE_NAMES[self._state]

    def ensure_usable(self):
        """Raises PoolClosedError where a call on the pool would."""
        if not self._admits():
            raise PoolClosedError()

    # -- tasks ------------------------------------------------------------

    def spawn(self, future, fn, arg=None, in_task_group=True, after_events=None, flags=0):
        """Spawns fn (a blz_fn) as a task whose on_done completes future, in
        the pool's task group (or, in_task_group False, in no group: a map
        run's drainer or a kernel run, which cancel their own tasks); arg
        None passes the future's key (Python tasks). after_events: None, or
        a ctypes array of blz_event handles the task runs after (0.3; valid
        during the call: the caller holds a use of each, see _events.py);
        flags: blz_spawn_options flags (BLZ_SPAWN_AFTER_ANY_END). Raises,
        with nothing spawned, on failure. An interrupt may also come once
        the task exists (future._task_cell is set): it then runs and
        completes future."""
        key = id(future)
        task = future._task_cell
        unit = _allocate_lock()
        unit.acquire()              # listed below; given back by on_done, or by the finally if no task
        future._unit = unit
        try:
            self._units.add(unit)
            if not self._admits():
                raise PoolClosedError()
            _callbacks[key] = future
            options, options_address = scratch = _spawn_scratch()
            options.group = self._task_group_cell.value if in_task_group else None   # alive: we hold a unit
            options.done_arg = key
            options.flags = flags
            options.after_events = None if after_events is None else ctypes.cast(after_events, _EVENTS)
            options.num_after_events = 0 if after_events is None else len(after_events)
            status = _held.blz_spawn_ex(self._ptr, fn, key if arg is None else arg, options_address,
                                        ctypes.addressof(task))
            options.flags = 0                # the scratch goes back as blz_spawn_options_init left it
            options.after_events = None
            options.num_after_events = 0
            _tls.scratch = scratch
            check(status, "blz_spawn_ex")
        finally:
            # The handle is written (by C) if and only if the task exists:
            # blz_spawn_ex leaves out_task untouched when it fails.
            if not task.value:
                try:
                    _callbacks.pop(key, None)
                finally:
                    unit.release()
                    self._units.discard(unit)
        return future

    def submit(self, fn, args, kwargs, after_events=None, flags=0):
        """fn(*args, **kwargs) as a task; returns its Future. after_events
        and flags: as for spawn."""
        return self.spawn(Future(self, (fn, args, kwargs)), _RUN_TASK, after_events=after_events, flags=flags)

    def submit_c(self, cfunc, arg):
        """cfunc(arg) as a task, called by the worker directly; returns its Future."""
        check_c_function(cfunc, FN, "cfunc")
        pin = c_argument(arg)    # if an interrupt loses it before the try, Pin.__del__ releases it
        future = Future(self, None, pin)
        try:
            self.spawn(future, cfunc, pin.address or 0)
        except BaseException:
            if not future._task_cell.value:   # no task: the pin is still ours
                pin.release()
            raise
        return future

    def cancel_queued(self):
        """Cancels the task group and the map runs: the tasks and calls that
        have not started are skipped."""
        self._cancel_task_group()
        for run in list(self._cancellables):
            run.cancel()

    def add_cancellable(self, run):
        """run.cancel() is called by cancel_queued until discard_cancellable(run)."""
        self._cancellables.add(run)

    def discard_cancellable(self, run):
        self._cancellables.discard(run)

    # -- inline fork-join -----------------------------------------------

    def fork_join(self, f, g):
        """blz_fork_join of two Python callables, from one of the pool's own
        workers; returns ((ok, value), (ok, value))."""
        halves = (_Half(f), _Half(g))
        keys = [id(half) for half in halves]
        for key, half in zip(keys, halves):
            _callbacks[key] = half
        try:
            status = _lib.blz_fork_join(self._ptr, _RUN_HALF, keys[0], _RUN_HALF, keys[1])
        finally:
            for key in keys:
                del _callbacks[key]
        check(status, "blz_fork_join")   # BLZ_ETASK cannot come: the halves catch everything
        return halves[0].outcome, halves[1].outcome

    # -- loops --------------------------------------------------------------

    def parallel_for(self, begin, end, body, arg, grain):
        """blz_parallel_for over [begin, end) with a C body (a blitz.RANGE_FN,
        called as body(arg, lo, hi)) or a Python one (body(lo, hi)).

        From outside the pool the loop runs inside a task, and the caller
        waits for it as for a Future, so Ctrl-C interrupts the wait: the loop
        is cancelled (pieces not started are skipped), and the call raises
        KeyboardInterrupt once the pieces already running have returned."""
        loop = LoopCall(self, begin, end, body, arg, grain)
        if self.is_own_worker():   # the task this worker runs keeps the pool alive
            status = loop()
        else:
            status = KernelRun(self, loop).run()
        loop.raise_for(status)

    # -- the task group and task handles ----------------------------------

    def _cancel_task_group(self):
        """Tasks of the task group that have not started are skipped.
        Harmless before the group exists and once it is freed: the cell is
        empty then."""
        with self._mutex:   # the group is freed under it: alive until the cancel returns
            group = self._task_group_cell.value
            if group:
                _held.blz_group_cancel(group)

    # A Future's calls on its task's handle (_futures.py says when each is
    # allowed): made here, where every call into libblitz is made.

    @staticmethod
    def task_wait_for(handle, timeout_ns):
        return _lib.blz_task_wait_for(handle, timeout_ns)

    @staticmethod
    def task_detach(handle):
        _held.blz_task_detach(handle)

    @staticmethod
    def task_cancel(handle):
        _held.blz_task_cancel(handle)

    # -- the rest -------------------------------------------------------

    def stats(self):
        """blz_pool_stats as a dict."""
        stats = Stats()
        stats.struct_size = ctypes.sizeof(Stats)
        check(self.call_admitted(_held.blz_pool_stats, self._ptr, byref(stats)), "blz_pool_stats")
        return {name: getattr(stats, name) for name, _ in Stats._fields_}

    def worker_stats(self, index):
        """blz_worker_stats as a dict: one worker's counters and times."""
        index = index_argument(index, "index")
        stats = Stats()
        stats.struct_size = ctypes.sizeof(Stats)
        index = index if 0 <= index <= 0xFFFFFFFF else 0xFFFFFFFF
        check(self.call_admitted(_held.blz_worker_stats, self._ptr, index, byref(stats)), "blz_worker_stats")
        return {name: getattr(stats, name) for name, _ in Stats._fields_}

    def set_max_active(self, n):
        """blz_pool_set_max_active: at most n workers run at once; 0 (or None) lifts the cap."""
        n = 0 if n is None else index_argument(n, "n")
        if n < 0:
            raise ValueError(f"n must be 0 or more, not {n}")
        check(self.call_admitted(_held.blz_pool_set_max_active, self._ptr, min(n, 0xFFFFFFFF)),
              "blz_pool_set_max_active")

    def trace_start(self, path):
        """blz_pool_trace_start: records the workers' activity for the file at path.
        Through `lib` (the GIL released): the call allocates and opens the file."""
        encoded = os.fsencode(path)
        if b"\0" in encoded:
            raise ValueError("path contains a NUL byte")
        check(self.call_admitted(_lib.blz_pool_trace_start, self._ptr, encoded), "blz_pool_trace_start")

    def trace_stop(self):
        """blz_pool_trace_stop: writes the file (the GIL released meanwhile)."""
        check(self.call_admitted(_lib.blz_pool_trace_stop, self._ptr), "blz_pool_trace_stop")

    # -- closing ----------------------------------------------------------

    def close(self):
        """Waits for every accepted task, stops the workers and frees the pool.

        Idempotent; concurrent calls all return once it is closed. The wait
        is interruptible (Ctrl-C): then the pool stays closing, and a later
        close() (or the exit handler) finishes it; an interrupt at any other
        point leaves it the same way. From one of the pool's own workers it
        raises BlitzError (BLZ_EDEADLK) and waits for nothing."""
        if self.is_own_worker():   # nothing changes
            raise BlitzError(BLZ_EDEADLK, "closing a pool from one of its own workers")
        with self._mutex:
            if self._state == _OPEN:
                self._state = _DRAINING
        self._wait_idle()
        self._destroy()

    def close_soon(self):
        """Refuses new work from outside at once, and frees the pool once
        the accepted work is done, without waiting for it here."""
        with self._mutex:
            if self._state == _OPEN:
                self._state = _DRAINING
        if not self._units:   # nothing to wait for: free it now
            self.close()
            return
        # A bare thread: threading.Thread.start() waits on an Event (a
        # threading.Condition), which Ctrl-C can leave held, and the new
        # thread then hangs before it runs. If this close() is still under
        # way at exit, the exit handler's own close() waits for it (on
        # _destroy_mutex), so the pool is freed before finalization.
        try:
            _thread.start_new_thread(self.close, ())
        except RuntimeError:   # no new threads at interpreter shutdown: wait here
            self.close()

    def _wait_idle(self):
        """Waits until no unit is held. Interruptible, and changes nothing
        but _units (the units given back are taken off it)."""
        while True:
            units = list(self._units)   # one C call: a snapshot
            if not units:
                return
            for unit in units:
                with unit:   # returns once the unit's owner has given it back
                    pass
                self._units.discard(unit)

    def _destroy(self):
        """Frees the pool, then its task group, then forgets the runtime; each
        step once. A step that an interrupt skipped is done by the next
        close() (or the exit handler), which comes here again."""
        with self._destroy_mutex:   # one closer frees; the others wait here and find it done
            status = BLZ_OK
            pool = self._pool_cell.value
            self._pool_cell.value = None   # take-then-call
            if pool:
                status = _lib.blz_pool_destroy(pool)   # waits for stop hooks; no task is left
                if status not in (BLZ_OK, BLZ_EFORK):   # nothing changed (blitz.h): a later close retries
                    self._pool_cell.value = pool
                    raise BlitzError(status, "blz_pool_destroy")
            self._free_task_group()
            self._forget()
        if status == BLZ_EFORK:
            raise BlitzError(status, "closing in a child process: the workers were the parent's")

    def _free_task_group(self):
        cell = self._task_group_cell
        with self._mutex:   # _cancel_task_group reads the cell under it
            group = cell.value
            cell.value = None   # take-then-call
            if group:
                _lib.blz_group_destroy(group)   # every task has finished: no wait blocks

    def _forget(self):
        _callbacks.pop(self._key, None)   # the hooks' record: the workers are joined
        self._ptr = None
        with self._mutex:
            self._state = _CLOSED
        _open_runtimes.discard(self)   # last: until here the exit handler would finish the job

    def after_fork_in_child(self):
        # The parent's locks may have been held, and its units taken, by
        # threads that do not exist here.
        self._mutex = _allocate_lock()
        self._destroy_mutex = _allocate_lock()
        self._units = set()
        if self._state != _CLOSED:
            self._state = _OPEN   # close() then frees it (blz_pool_destroy answers BLZ_EFORK)
        for record in list(_callbacks.values()):
            if isinstance(record, Future) and record._runtime is self:
                _callbacks.pop(id(record), None)
                record._fail_in_forked_child()


class LoopCall:
    """One blz_parallel_for call, checked and ready: calling it runs the
    loop and returns its status; the argument's pin is released when the
    loop returns (or by release() if it never runs)."""

    def __init__(self, runtime, begin, end, body, arg, grain):
        self.runtime = runtime
        self.begin = size_argument(begin, "begin")
        self.end = size_argument(end, "end")
        self.grain = size_argument(grain, "grain")
        if self.begin > self.end:
            raise ValueError(f"begin ({self.begin}) must not be greater than end ({self.end})")
        self.python_body = None
        if isinstance(body, ctypes._CFuncPtr):
            check_c_function(body, RANGE_FN, "body")
            self.pin = c_argument(arg)
            self.c_body, self.c_arg = body, self.pin.address
        else:
            check_callable(body, "body")
            if arg is not None:
                raise TypeError("arg is for C bodies; a Python body gets (lo, hi) only")
            self.python_body, self.pin = _RangeBody(body), NO_PIN
            self.c_body, self.c_arg = _RUN_RANGE, id(self.python_body)

    def __call__(self):
        body = self.python_body
        if body is not None:   # registered only while the loop runs (on a worker)
            _callbacks[self.c_arg] = body
        try:
            status = _lib.blz_parallel_for(self.runtime._ptr, self.begin, self.end, self.grain,
                                           self.c_body, self.c_arg)
        finally:
            self.release()
        return status

    def release(self):
        self.pin.release()
        if self.python_body is not None:
            _callbacks.pop(self.c_arg, None)

    def raise_for(self, status):
        """Raises what the loop's status and a Python body's exception say."""
        body = self.python_body
        if body is not None and body.exc is not None:
            raise_stored(body.exc)
        check(status, "blz_parallel_for")


class KernelRun:
    """A C kernel (or any blocking loop) run as a task of its own, so that
    it can be cancelled (blz_task_cancel: its blz_parallel_for stops
    starting pieces): for parallel_for from outside the pool and for
    blitz.aio. The task is in no group: shutdown(cancel_futures=True)
    skips what was queued, not a loop that a caller waits for."""

    def __init__(self, runtime, loop):
        self.runtime = runtime
        self.loop = loop
        self.future = Future(runtime, (loop, (), {}))

    def started(self):
        """Whether the loop's task exists (then it owns the loop)."""
        return bool(self.future._task_cell.value)

    def start(self):
        """Spawns the loop's task and returns self. If no task comes of it
        (a failure, or an interrupt before it exists), releases what the
        loop holds before raising."""
        try:
            self.runtime.spawn(self.future, _RUN_TASK, in_task_group=False)
        except BaseException:
            if not self.started():
                self.loop.release()
            raise
        return self

    def run(self):
        """Starts the loop and returns its status. Ctrl-C (any exception)
        cancels it: pieces not started are skipped, and the exception is
        raised again once the running pieces have returned. (A second
        Ctrl-C meanwhile leaves the loop to end in the background; the
        argument stays pinned until it has.)"""
        try:
            self.start()
            self.future.exception()
        except BaseException:
            if self.started():
                self.cancel()
                self.wait_quietly()
            raise
        return self.finished()

    def cancel(self):
        """Pieces that have not started are skipped; running ones finish."""
        self.future._cancel_task()

    def wait_quietly(self):
        """Waits until the loop's task is done (run or skipped), then releases the loop."""
        try:
            self.future.exception()
        except concurrent.futures.CancelledError:   # skipped before it started
            pass
        self.release()

    def finished(self):
        """The loop's status, once its task is done; releases the loop."""
        self.release()
        return self.future.result()

    def release(self):
        """Once the loop's task is done: releases what a loop that never
        ran still holds (the pin of its argument). Idempotent."""
        self.loop.release()


# ---------------------------------------------------------------- exit

class _InterruptAtExit(BaseException):
    """What the first Ctrl-C raises while the exit handler waits for the pools."""


_exit_sigint = []    # the SIGINT handler the exit handler found (filled by the swap below)
_exit_armed = []     # [True] while the first Ctrl-C may interrupt the exit handler's wait
_exit_presses = []   # each Ctrl-C received while the exit handler runs


def _sigint_at_exit(signum, frame):
    """SIGINT's handler while the exit handler runs."""
    _exit_presses.append(signum)
    if _exit_armed:
        _exit_armed.clear()
        raise _InterruptAtExit()
    if len(_exit_presses) == 2:
        print("blitz: Ctrl-C again at exit: running tasks cannot be stopped from outside; "
              "still waiting for them (SIGQUIT or SIGKILL ends the process at once)",
              file=sys.stderr, flush=True)


def _close_all_at_exit():
    """Closes the pools left open, while the interpreter can still run callbacks.

    It returns only once every pool is closed: no worker may still be in
    Python when the interpreter finalizes. Ctrl-C cannot cut that short.
    The first skips the tasks (and map calls) not started and keeps
    waiting for the running ones; later ones only print that it waits.
    Once closed, the interrupt is delivered again to SIGINT's own handler
    (Python's default raises KeyboardInterrupt here, which atexit reports).
    This works because SIGINT's handler was swapped for _sigint_at_exit
    by a C call that atexit makes just before this function (registered
    after it, below): no Python code runs between the two."""
    global _exiting
    with _registry_lock:
        _exiting = True
    previous = _exit_sigint[0] if _exit_sigint else None   # None: not one Python set
    deferring = previous not in (signal.SIG_DFL, signal.SIG_IGN)
    if not deferring:   # the user's choice stands (SIG_DFL ends the process at once,
        _restore_sigint(previous)   # before finalization: safe too)
    while True:
        try:
            if not _exit_presses:
                _exit_armed.append(True)
            _close_open_runtimes()
            break
        except _InterruptAtExit:
            print("blitz: Ctrl-C at exit: skipping the tasks not started; waiting for the running "
                  "ones to return", file=sys.stderr, flush=True)
            for runtime in list(_open_runtimes):
                runtime.cancel_queued()
    _exit_armed.clear()
    if deferring and _exit_sigint:
        _restore_sigint(previous)
        if _exit_presses:
            signal.raise_signal(signal.SIGINT)


def _restore_sigint(handler):
    try:
        signal.signal(signal.SIGINT, signal.default_int_handler if handler is None else handler)
    except (ValueError, TypeError):   # not the main thread, or not a handler Python can set
        pass


def _close_open_runtimes():
    with _registry_lock:
        runtimes = list(_open_runtimes)
    for runtime in runtimes:
        try:
            runtime.close()
        except BlitzError as exc:
            if exc.status != BLZ_EFORK:  # a forked child: nothing to wait for
                print(f"blitz: closing a pool at exit: {exc}", file=sys.stderr)


def _after_fork_in_child():
    global _registry_lock
    _registry_lock = threading.Lock()
    for runtime in list(_open_runtimes):
        runtime.after_fork_in_child()


atexit.register(_close_all_at_exit)
# atexit calls the last registered first: this runs just before
# _close_all_at_exit, and entirely in C (list.extend consuming a map that
# calls signal.signal), so no Ctrl-C can land between the interpreter's
# exit and the swap. signal.signal returns the handler it replaces, which
# is what _exit_sigint receives.
atexit.register(_exit_sigint.extend, map(signal.signal, (signal.SIGINT,), (_sigint_at_exit,)))
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)