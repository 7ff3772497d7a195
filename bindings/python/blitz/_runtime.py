"""The core under blitz.Executor and blitz.Pool: one libblitz pool driven
from Python through ctypes, and the Future its tasks complete.

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
task's group was cancelled before it started). C tasks (submit_c) have the
user's function pointer as blz_fn and the same on_done. Nothing polls.

Handles. Each task is spawned with a blz_task handle, so that a worker of
the same pool that waits for the Future can wait in C, running the pool's
other jobs meanwhile (blz_task_wait_for), instead of blocking a worker the
task may need. blz_spawn_ex writes the handle straight into the Future's
_task_cell. Exactly one party frees it, decided under the Future's
_handle_lock: a waiter takes it (blz_task_wait_for frees it unless it
timed out, and then the waiter gives it back, and detaches it if on_done
has passed meanwhile); otherwise on_done detaches it. Dropped Futures leak
nothing and need no reaper.

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
more while it runs, since its own unit is still listed. The groups are
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
     the lock held for ever. A Future's condition gets C-level
     __enter__/__exit__ (_Condition).
  2. A unit is given back by releasing its lock, one C call at the head
     of the `with`, finally or on_done that owns it; close() waits for
     each unit's lock, never for a count that an interrupted decrement
     could leave wrong.
  3. What C creates is recorded before the call, in a ctypes cell the
     call itself writes (the pool, each group, each task's handle): an
     interrupt after the call returns loses nothing, and a caller's
     finally asks the cell whether the call happened.
  4. What C frees is taken out of its record first, with no such point
     between that and the call (take-then-call): freed exactly once.
Steps that cannot be one C call are ordered so that an interrupt between
them leaves only work that the next close() or the exit handler finishes,
or a spare group not reused before the pool closes: never a held lock, a
unit counted for nothing, a double free or a Future that cannot
complete. tests/ctrl_c_child.py raises KeyboardInterrupt at every such
point of the main thread's calls, in turn, and checks this. Two Ctrl-C
in a row may still land in an interrupted call's own cleanup (a group
not given back, a map's or loop's calls not cancelled): a leak until the
pool closes, or work that runs to its end, never a crash or a wedge.

Free-threaded CPython. Shared state is guarded by locks, never by the GIL:
_Runtime._mutex guards its state and groups; a Future's _handle_lock its
handle; _units, _callbacks and the other registries are sets, dicts and
lists used by single operations (each atomic in both builds, under the
object's own lock there). Python callables then really run on all
workers at once.
"""
from __future__ import annotations

import _thread
import atexit
import collections
import concurrent.futures
import ctypes
import logging
import math
import operator
import os
import signal
import sys
import threading
from ctypes import byref, c_int, c_void_p
from concurrent.futures.thread import BrokenThreadPool

from . import _capi
from ._capi import (BLZ_ECANCELED, BLZ_EDEADLK, BLZ_EFORK, BLZ_ESHUTDOWN, BLZ_ETIMEDOUT,
                    BLZ_MAX_THREADS, BLZ_OK, DONE_FN, FN, RANGE_FN, THREAD_FN, PoolConfig,
                    SpawnOptions, Stats)

_lib = _capi.lib
_held = _capi.held
_SIZE_MAX = (1 << (8 * ctypes.sizeof(ctypes.c_size_t))) - 1
_UINTPTR_MAX = (1 << (8 * ctypes.sizeof(c_void_p))) - 1
_NO_DEADLINE = (1 << 64) - 1
_LOGGER = logging.getLogger("concurrent.futures")  # where the standard executors log


# ---------------------------------------------------------------- errors

class BlitzError(Exception):
    """A libblitz call failed. .status is the blz_status, .name its name ("BLZ_EINVAL")."""

    def __init__(self, status, message=None):
        self.status = int(status)
        self.name = _capi.status_name(self.status)
        self.message = message
        text = _capi.status_string(self.status)
        super().__init__(f"{message}: {text}" if message else text)

    def __reduce__(self):
        return (type(self), (self.status, self.message))


class PoolClosedError(BlitzError):
    """The pool is closed or closing; status is BLZ_ESHUTDOWN."""

    def __init__(self, status=BLZ_ESHUTDOWN, message="the pool is closed"):
        super().__init__(status, message)


def check(status, what):
    if status == BLZ_OK:
        return
    if status == BLZ_ESHUTDOWN:
        raise PoolClosedError(status, what)
    raise BlitzError(status, what)


def _strip(exc):
    """Drops the trampoline's own frame from exc's traceback (the frames of
    the user's code stay) and with it a reference cycle through the record."""
    tb = exc.__traceback__
    if tb is not None:
        exc.__traceback__ = tb.tb_next
    return exc


# ---------------------------------------------------------------- argument checks

def check_callable(fn, what):
    if not callable(fn):
        raise TypeError(f"{what} must be callable, not {type(fn).__name__}")


def index_argument(value, what):
    if isinstance(value, bool) or not hasattr(type(value), "__index__"):
        raise TypeError(f"{what} must be an int, not {type(value).__name__}")
    return operator.index(value)


def size_argument(value, what):
    value = index_argument(value, what)
    if not 0 <= value <= _SIZE_MAX:
        raise ValueError(f"{what} must be in 0..{_SIZE_MAX}, not {value}")
    return value


def timeout_argument(timeout):
    """None, or the timeout in seconds as a float >= 0 (a negative one is 0, as
    the standard Future treats it)."""
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        raise TypeError(f"timeout must be a number or None, not {type(timeout).__name__}")
    if math.isnan(timeout):
        raise ValueError("timeout must not be NaN")
    return max(0.0, float(timeout))


def _wraps_python(fnptr, depth=0):
    """Whether a ctypes function pointer calls a Python function (a ctypes thunk)."""
    objects = getattr(fnptr, "_objects", None)
    if not isinstance(objects, dict) or depth > 4:
        return False
    for value in objects.values():
        if type(value).__name__ == "CThunkObject":
            return True
        if isinstance(value, ctypes._CFuncPtr) and value is not fnptr and _wraps_python(value, depth + 1):
            return True
    return False


def check_c_function(fnptr, fn_type, what):
    """Raises unless fnptr is a non-NULL fn_type pointer to a C function."""
    if not isinstance(fnptr, fn_type):
        raise TypeError(f"{what} must be a blitz.{_TYPE_NAMES[fn_type]} (ctypes.cast converts "
                        f"a function pointer), not {type(fnptr).__name__}")
    if _capi.null_pointer(fnptr):
        raise ValueError(f"{what} is a NULL function pointer")
    if _wraps_python(fnptr):
        raise TypeError(f"{what} wraps a Python function, whose exceptions ctypes would "
                        "swallow: pass the Python callable itself")


_TYPE_NAMES = {RANGE_FN: "RANGE_FN", FN: "TASK_FN"}


# ---------------------------------------------------------------- C arguments

class _PyBuffer(ctypes.Structure):
    """CPython's Py_buffer (stable since 3.3, in the limited API since 3.11)."""
    _fields_ = [("buf", c_void_p), ("obj", c_void_p), ("len", ctypes.c_ssize_t),
                ("itemsize", ctypes.c_ssize_t), ("readonly", c_int), ("ndim", c_int),
                ("format", ctypes.c_char_p), ("shape", c_void_p), ("strides", c_void_p),
                ("suboffsets", c_void_p), ("internal", c_void_p)]


_python = ctypes.PyDLL(None)  # the interpreter's own C API; calls keep the GIL
_python.PyObject_GetBuffer.argtypes = [ctypes.py_object, ctypes.POINTER(_PyBuffer), c_int]
_python.PyObject_GetBuffer.restype = c_int
_python.PyBuffer_Release.argtypes = [ctypes.POINTER(_PyBuffer)]
_python.PyBuffer_Release.restype = None
_python.PyGILState_Ensure.argtypes = []
_python.PyGILState_Ensure.restype = c_int
_python.PyGILState_Release.argtypes = [c_int]
_python.PyGILState_Release.restype = None
_PyBUF_C_CONTIGUOUS = 0x38  # PyBUF_STRIDES | 0x20: one block of memory, in C order


class _Pin:
    """Keeps a C argument's memory valid and in place until release().

    For a buffer object it holds a buffer export (PyObject_GetBuffer): the
    object stays alive and cannot move or resize (a bytearray refuses to)
    while C code uses the address. For a ctypes object it holds a reference.

    The export is made into the pin's own Py_buffer (export()), so that no
    interrupt can come between taking it and the pin owning it; releasing
    an export that was never made, or twice, does nothing (PyBuffer_Release
    clears the view's object)."""
    __slots__ = ("address", "_obj", "_view")

    def __init__(self, address, obj=None, view=None):
        self.address = address
        self._obj = obj
        self._view = view

    def export(self, arg):
        """Exports arg's buffer into this pin (a pin made with view=_PyBuffer())."""
        _python.PyObject_GetBuffer(arg, byref(self._view), _PyBUF_C_CONTIGUOUS)
        self.address = self._view.buf

    def release(self):
        view = self._view
        if view is not None:
            _python.PyBuffer_Release(byref(view))   # first: cleared once it has run
        self._view = self._obj = None

    def __del__(self):  # a backstop: a pin an interrupt dropped is released here
        if getattr(self, "_view", None) is not None:
            self.release()


_NO_PIN = _Pin(None)


def c_argument(arg):
    """The _Pin of a C function's argument: None (NULL), an int address, a
    ctypes object (a pointer passes its value, any other object its address),
    or an object with a C-contiguous buffer (numpy array, bytearray,
    memoryview, bytes) whose address is passed."""
    if arg is None:
        return _NO_PIN
    if isinstance(arg, bool):
        raise TypeError("arg must not be a bool")
    if isinstance(arg, int):
        if not 0 <= arg <= _UINTPTR_MAX:
            raise ValueError(f"an int arg is an address in 0..{_UINTPTR_MAX}, not {arg}")
        return _Pin(arg or None)
    if isinstance(arg, ctypes._CFuncPtr):
        raise TypeError("arg is a function pointer; pass data (an address, a buffer, a ctypes object)")
    if isinstance(arg, (ctypes._Pointer, c_void_p, ctypes.c_char_p, ctypes.c_wchar_p)):
        return _Pin(ctypes.cast(arg, c_void_p).value, obj=arg)
    if isinstance(arg, (ctypes._SimpleCData, ctypes.Array, ctypes.Structure, ctypes.Union)):
        return _Pin(ctypes.addressof(arg), obj=arg)
    pin = _Pin(None, view=_PyBuffer())
    try:
        pin.export(arg)
    except BufferError as exc:
        raise ValueError(f"arg's buffer cannot be passed to C: {exc}") from None
    except TypeError:
        raise TypeError("arg must be None, an int address, a ctypes object or an object with a "
                        f"C-contiguous buffer (numpy array, bytearray, memoryview), not "
                        f"{type(arg).__name__}") from None
    return pin


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


# ---------------------------------------------------------------- Future

_release_lock = operator.methodcaller("release")
_release_saving = operator.methodcaller("_release_save")


class _Condition(threading.Condition):
    """A threading.Condition (over an RLock) that an interrupt on the
    waiting thread cannot leave half-changed (see the module's "Interrupts").

    threading.Condition's methods are Python: an interrupt right after
    __enter__'s acquire returned leaves the lock held by a `with` that
    never began, and the worker that completes the Future then blocks on
    it for ever; one right after wait() released the lock, before its
    `try`, makes `with` release a lock it no longer holds (RuntimeError
    instead of the KeyboardInterrupt); one inside notify_all wakes only
    some waiters. Here __enter__ and __exit__ are the lock's own C
    methods, found through a C attrgetter; wait() releases the lock and
    keeps its state in one C call inside its `try`, and takes it back
    with the RLock's uninterruptible _acquire_restore; notify_all takes
    the waiters out, then wakes them all in one C call. A Future's
    condition becomes one by a change of class (no new lock)."""

    __enter__ = property(operator.attrgetter("_lock.__enter__"))
    __exit__ = property(operator.attrgetter("_lock.__exit__"))

    def wait(self, timeout=None):
        if not self._is_owned():
            raise RuntimeError("cannot wait on un-acquired lock")
        waiter = _allocate_lock()
        waiter.acquire()
        self._waiters.append(waiter)   # an interrupt from here to the try: a stale waiter, harmless
        release = map(_release_saving, (self._lock,))   # lazy: nothing happens yet
        saved = []
        gotit = False
        try:
            saved.extend(release)   # releases the lock and keeps its state: one C call
            if timeout is None:
                waiter.acquire()
                gotit = True
            elif timeout > 0:
                gotit = waiter.acquire(True, timeout)
            else:
                gotit = waiter.acquire(False)
            return gotit
        finally:
            if saved:
                self._acquire_restore(saved[0])   # C, blocking, not interruptible
            if not gotit:
                try:
                    self._waiters.remove(waiter)
                except ValueError:
                    pass

    def notify_all(self):
        wake_all = map(_release_lock, self._waiters)   # lazy: nothing happens yet
        self._waiters = collections.deque()
        collections.deque(wake_all, 0)                 # one C call, no interrupt point inside


class Future(concurrent.futures.Future):
    """A standard concurrent.futures.Future whose task runs on a libblitz pool.

    It is completed by the task's completion callback (on_done), on the
    worker that ran the task. result() and exception() called on a worker
    of the same pool wait in C and run the pool's other jobs meanwhile, so
    that waiting for a subtask never takes a worker away from it; they raise
    BlitzError (BLZ_EDEADLK) when a task waits for its own Future.
    """

    def __init__(self, runtime, work=None, pin=_NO_PIN):
        super().__init__()
        self._condition.__class__ = _Condition
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

    def cancel(self):
        """Cancels the task if it has not started; returns whether it is
        cancelled. A C task (submit_c) cannot be cancelled on its own, since
        nothing runs between its start and its C function: False."""
        if self._is_c_task:
            return self.cancelled()
        return super().cancel()

    def result(self, timeout=None):
        self._wait_in_c(timeout)
        return super().result(timeout)

    def exception(self, timeout=None):
        self._wait_in_c(timeout)
        return super().exception(timeout)

    # -- the handle (on the workers: no interrupt reaches this) -------------

    def _wait_in_c(self, timeout):
        """On a worker of the task's pool: waits in blz_task_wait_for, which
        runs other jobs meanwhile; elsewhere the standard wait does."""
        if not self._runtime.is_own_worker() or self.done():
            return
        timeout = timeout_argument(timeout)
        with self._handle_lock:
            handle = None if self._handle_taken else self._task_cell.value
            if handle is None:   # another waiter has it, on_done has passed, or no task yet
                return
            self._handle_taken = True
        ns = _NO_DEADLINE if timeout is None else min(int(timeout * 1e9), _NO_DEADLINE - 1)
        status = _lib.blz_task_wait_for(handle, ns)
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
            _held.blz_task_detach(handle)

    # -- on the worker -----------------------------------------------------

    def _run(self):
        """A Python task's body (through _RUN_TASK)."""
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
            self._outcome = (False, _strip(exc))

    def _settle(self, status):
        """The task's on_done: completes the Future, frees the handle unless a
        waiter holds it, and gives back the task's unit of busy."""
        try:
            with self._handle_lock:
                handle = None if self._handle_taken else self._task_cell.value
                self._handle_taken = self._settled = True
            if handle is not None:
                _held.blz_task_detach(handle)
            pin, self._pin = self._pin, None
            if pin is not None:
                pin.release()
            self._complete(status)
        finally:
            self._runtime.give_back(self._unit)

    def _complete(self, status):
        outcome, self._outcome = self._outcome, None
        if self.cancelled():               # cancelled while queued: _run saw it and notified
            return
        if status == BLZ_OK:
            if outcome is None:            # a C task
                self.set_result(None)
            elif outcome[0]:
                self.set_result(outcome[1])
            else:
                self.set_exception(outcome[1])
        elif status == BLZ_ECANCELED:      # skipped: its group was cancelled before it started
            broken = self._runtime.broken
            if broken is not None:
                self.set_exception(BrokenThreadPool(broken))
            else:
                super().cancel()
                self.set_running_or_notify_cancel()   # tells wait() and as_completed()
        else:                              # a C task that failed (blz_fail, a C++ exception)
            self.set_exception(BlitzError(status, "the C task failed"))


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
            self.outcome = (False, _strip(exc))


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
                    self.exc, self.exc_lo = _strip(exc), lo


def raise_stored(exc):
    try:
        raise exc
    finally:
        exc = None  # no cycle through this frame


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

    def __init__(self, num_threads, name, initializer=None, initargs=(), cpu_list=None):
        self._state = _CLOSED     # until created: close() and repr work on a failed init
        self._ptr = None          # the pool, once created (a copy of _pool_cell's value)
        self._pool_cell = c_void_p()   # blz_pool_create writes the pool here; _destroy takes it out
        self._key = id(self)
        self._mutex = _allocate_lock()           # guards _state, the group cells, broken
        self._destroy_mutex = _allocate_lock()   # the closer that destroys holds it
        self._units = set()       # the lock of each unit of busy (see the module's docstring)
        self._group_cells = []    # a c_void_p per group made, freed after the pool
        self._spare_groups = []   # cells of groups of finished runs, for the next one
        self._task_group_cell = None
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
            status = _lib.blz_pool_create(byref(config), byref(self._pool_cell))
            if status != BLZ_OK:
                _open_runtimes.discard(self)
                del _callbacks[self._key]
                check(status, "blz_pool_create")
            self._ptr = self._pool_cell.value
            self.num_threads = _held.blz_pool_num_threads(self._ptr)
            self._state = _OPEN
        try:
            group = self._new_group()
        except BaseException:
            self.close()
            raise
        with self._mutex:
            self._task_group_cell = group
            broken = self.broken
        if broken is not None:   # an initializer failed before the group existed
            self.cancel_group(group)

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
            group = self._task_group_cell
        if group is not None:   # queued tasks are skipped, and fail with BrokenThreadPool
            self.cancel_group(group)

    def is_own_worker(self):
        """Whether the calling thread is one of this pool's workers."""
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

    def spawn(self, future, fn, arg=None, group=None):
        """Spawns fn (a blz_fn) as a task whose on_done completes future, in
        group (a cell from take_group; default: the pool's task group); arg
        None passes the future's key (Python tasks). Raises, with nothing
        spawned, on failure. An interrupt may also come once the task exists
        (future._task_cell is set): it then runs and completes future."""
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
            group = self._task_group_cell if group is None else group
            options.group = None if group is None else group.value   # alive: we hold a unit
            options.done_arg = key
            status = _held.blz_spawn_ex(self._ptr, fn, key if arg is None else arg, options_address,
                                        ctypes.addressof(task))
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

    def submit(self, fn, args, kwargs):
        """fn(*args, **kwargs) as a task; returns its Future."""
        return self.spawn(Future(self, (fn, args, kwargs)), _RUN_TASK)

    def submit_c(self, cfunc, arg):
        """cfunc(arg) as a task, called by the worker directly; returns its Future."""
        check_c_function(cfunc, FN, "cfunc")
        pin = c_argument(arg)    # if an interrupt loses it before the try, _Pin.__del__ releases it
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
        group = self._task_group_cell
        if group is not None:
            self.cancel_group(group)
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

    # -- groups ---------------------------------------------------------

    def _new_group(self):
        """The cell of a new group. The cell is recorded before the group
        exists (blz_group_create_ex writes it), so none is lost to an interrupt."""
        self.ensure_usable()   # no cell recorded for a pool that refuses anyway
        cell = c_void_p()
        self._group_cells.append(cell)
        check(self.call_admitted(_held.blz_group_create_ex, self._ptr, 0, byref(cell)), "blz_group_create_ex")
        return cell

    def take_group(self):
        """The cell of a group of no unfinished task and not cancelled, for
        one run; give it back with give_back_group once its tasks are done.
        A cell an interrupt loses is only not reused: the group is freed
        with the pool."""
        try:
            cell = self._spare_groups.pop()
        except IndexError:
            return self._new_group()
        # Resets a cancellation; BLZ_ETIMEDOUT: its last task is still ending.
        if self.call_admitted(_lib.blz_group_wait_for, cell.value, 0) != BLZ_ETIMEDOUT:
            return cell
        self.give_back_group(cell)
        return self._new_group()

    def give_back_group(self, cell):
        self._spare_groups.insert(0, cell)   # reused last: its last task has time to end

    def cancel_group(self, cell):
        """Tasks of the group that have not started are skipped. Harmless
        once the group is freed: the cell is empty then."""
        with self._mutex:   # groups are freed under it: this one stays alive until the cancel returns
            group = cell.value
            if group:
                _held.blz_group_cancel(group)

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
        """Frees the pool, then its groups, then forgets the runtime; each
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
            self._free_groups()
            self._forget()
        if status == BLZ_EFORK:
            raise BlitzError(status, "closing in a child process: the workers were the parent's")

    def _free_groups(self):
        for cell in self._group_cells:
            with self._mutex:   # cancel_group reads a cell under it
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
            self.python_body, self.pin = _RangeBody(body), _NO_PIN
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
    """A C kernel (or any blocking loop) run as a task of a group of its own,
    so that it can be cancelled: for parallel_for from outside the pool and
    for blitz.aio."""

    def __init__(self, runtime, loop):
        self.runtime = runtime
        self.loop = loop
        self.group = None
        self.future = Future(runtime, (loop, (), {}))

    def started(self):
        """Whether the loop's task exists (then it owns the loop)."""
        return bool(self.future._task_cell.value)

    def start(self):
        """Spawns the loop's task and returns self. If no task comes of it
        (a failure, or an interrupt before it exists), releases what the
        loop holds and gives the group back before raising."""
        try:
            self.group = self.runtime.take_group()
            self.runtime.spawn(self.future, _RUN_TASK, group=self.group)
        except BaseException:
            if not self.started():
                self.loop.release()
                self.give_back_group()
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
        if self.group is not None:
            self.runtime.cancel_group(self.group)

    def wait_quietly(self):
        """Waits until the loop's task is done (run or skipped), then gives the group back."""
        try:
            self.future.exception()
        except concurrent.futures.CancelledError:   # skipped before it started
            pass
        self.give_back_group()

    def finished(self):
        """The loop's status, once its task is done; gives the group back."""
        self.give_back_group()
        return self.future.result()

    def give_back_group(self):
        group, self.group = self.group, None
        if group is not None:
            self.runtime.give_back_group(group)


def _fail_in_forked_child(self):
    self._condition = _Condition()
    self._handle_lock = _allocate_lock()
    self._handle_taken = True   # the parent's handle: nothing to free here
    if not self.done():
        self.set_exception(BlitzError(BLZ_EFORK, "the task was queued in the parent process"))


Future._fail_in_forked_child = _fail_in_forked_child


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
