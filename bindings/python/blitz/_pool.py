"""Pool and Task: libblitz's pool driven from Python through ctypes.

How Python code reaches a worker. C calls back through two module-level
ctypes trampolines, _FN_TRAMPOLINE (a blz_fn) and _RANGE_TRAMPOLINE (a
blz_range_fn), which live as long as the module. The void *arg C passes
back is an integer key into _jobs, where the Python job waits (holding its
callable, arguments and, later, its result or exception) until it has run.
So no ctypes callback object is made per job, and none can be freed while
C may still call it. A trampoline catches every exception of the user's
code and stores it in the job: nothing ever propagates into C, and the
caller re-raises it (same object, same type, its traceback kept).

The GIL. Every call into libblitz goes through ctypes.CDLL, which releases
the GIL for the duration of the call; a trampoline running on a worker
takes the GIL (ctypes does that). So the thread waiting in C never holds
the GIL the workers need, and Python callables run one at a time (each
releases the GIL while it sleeps or does I/O). A blitz.RANGE_FN pointer to
a C function is handed to blz_parallel_for as is and runs on the workers
without the GIL.

Lifetime. The C pool is freed by blz_pool_destroy, after which no call on
it may start. Each Pool method that passes the pool pointer to C counts
itself in _inflight while it does; close() first refuses new calls from
outside the pool (the pool's own workers may still submit work, as in C),
waits until those in flight have left, and only then destroys. Open pools
are kept in _open_pools (a Pool lives until it is closed) and closed by an
atexit handler, which runs before the interpreter begins to finalize, so
no trampoline can run in a finalizing interpreter.

Tasks. pool.spawn keeps a blz_task handle per task in pool._unjoined.
Task.result() without a timeout joins it with blz_join, so a worker that
waits for a task runs other jobs of its pool meanwhile (a recursive spawn
on one worker completes). Completion is also published on the Python side
(the job's done flag and lock), which result(timeout=...) waits on. A
handle is joined exactly once: by result(), by the reaper (a dropped Task
puts its key in pool._orphans; spawn joins the orphans whose job has
finished) or by close(), which joins every handle left after
blz_pool_destroy (when every task has run, so that never blocks).
"""
import _thread
import atexit
import collections
import ctypes
import itertools
import math
import operator
import os
import threading
from ctypes import byref, c_void_p

from . import _capi
from ._capi import (BLZ_EDEADLK, BLZ_EFORK, BLZ_ESHUTDOWN, BLZ_MAX_THREADS, BLZ_OK, FN,
                    RANGE_FN, PoolConfig, Stats)

_lib = _capi.lib
_SIZE_MAX = (1 << (8 * ctypes.sizeof(ctypes.c_size_t))) - 1
# Orphaned handles a worker of the pool lets pile up before it reaps them
# itself (reaping may wait a moment in blz_join, and a waiting worker runs
# other jobs): outside threads and close() reap them otherwise.
_WORKER_REAP_THRESHOLD = 1024
_REAP_BATCH = 64


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


def _check(status, what):
    if status == BLZ_OK:
        return
    if status == BLZ_ESHUTDOWN:
        raise PoolClosedError(status, what)
    raise BlitzError(status, what)


# ---------------------------------------------------------------- jobs

_jobs = {}                    # key -> _Job or _RangeJob while C may call back with key
_keys = itertools.count(1)    # next() is atomic under the GIL; 0 would be NULL
_tls = threading.local()      # .pool: the Pool whose job this thread is running


class _Job:
    """A callable for blz_spawn, blz_call or one half of blz_fork_join."""
    __slots__ = ("pool", "fn", "args", "kwargs", "result", "exc", "done", "lock")

    def __init__(self, pool, fn, args, kwargs, lock):
        self.pool = pool
        self.fn = fn
        self.args = args
        self.kwargs = kwargs
        self.result = None
        self.exc = None
        self.done = False
        self.lock = lock      # spawned tasks: held until the job has run


class _RangeJob:
    """A Python loop body for blz_parallel_for."""
    __slots__ = ("pool", "body", "exc", "exc_lo", "lock")

    def __init__(self, pool, body):
        self.pool = pool
        self.body = body
        self.exc = None
        self.exc_lo = 0
        self.lock = threading.Lock()


def _strip(exc):
    """Drops the trampoline's own frame from exc's traceback (the frames of
    the user's code stay) and with it a reference cycle through the job."""
    tb = exc.__traceback__
    if tb is not None:
        exc.__traceback__ = tb.tb_next
    return exc


def _run_job(key):
    # Runs on a worker (or inline on the caller of blz_call/blz_fork_join
    # when it is a worker), with the GIL, which ctypes took for us.
    job = _jobs[key]
    tls = _tls
    outer = getattr(tls, "pool", None)
    running = getattr(tls, "running", None)
    if running is None:
        running = tls.running = []
    tls.pool = job.pool
    running.append(key)
    try:
        job.result = job.fn(*job.args, **job.kwargs)
    except BaseException as exc:  # everything: nothing may propagate into C
        job.exc = _strip(exc)
    finally:  # the job is over whatever happened: waiters must wake
        running.pop()
        tls.pool = outer
        job.fn = job.args = job.kwargs = None
        job.done = True
        del _jobs[key]
        if job.lock is not None:
            job.lock.release()


def _run_range(key, lo, hi):
    job = _jobs[key]
    outer = getattr(_tls, "pool", None)
    _tls.pool = job.pool
    try:
        job.body(lo, hi)
    except BaseException as exc:
        with job.lock:  # keep the exception of the lowest piece: deterministic
            if job.exc is None or lo < job.exc_lo:
                job.exc, job.exc_lo = _strip(exc), lo
    finally:
        _tls.pool = outer


_FN_TRAMPOLINE = FN(_run_job)
_RANGE_TRAMPOLINE = RANGE_FN(_run_range)


def _raise_stored(exc):
    try:
        raise exc
    finally:
        exc = None  # no cycle through this frame


def _finish_unrun(job, status):
    """A joined task that never ran (its pool was the parent's of a fork)."""
    if job.done:
        return
    job.exc = BlitzError(status, "the task never ran")
    job.fn = job.args = job.kwargs = None
    job.done = True
    if job.lock is not None:
        job.lock.release()


# ---------------------------------------------------------------- argument checks

def _callable(fn, what):
    if not callable(fn):
        raise TypeError(f"{what} must be callable, not {type(fn).__name__}")


def _index(value, what):
    if isinstance(value, bool) or not hasattr(type(value), "__index__"):
        raise TypeError(f"{what} must be an int, not {type(value).__name__}")
    return operator.index(value)


def _size(value, what):
    value = _index(value, what)
    if not 0 <= value <= _SIZE_MAX:
        raise ValueError(f"{what} must be in 0..{_SIZE_MAX}, not {value}")
    return value


def _timeout(timeout):
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        raise TypeError(f"timeout must be a number or None, not {type(timeout).__name__}")
    if math.isnan(timeout) or timeout < 0:
        raise ValueError(f"timeout must be >= 0, not {timeout}")
    return min(float(timeout), threading.TIMEOUT_MAX)


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


# ---------------------------------------------------------------- pools

_OPEN, _DRAINING, _DESTROYING, _CLOSED = range(4)
_STATE_NAMES = ("open", "closing", "closing", "closed")

_registry_lock = threading.Lock()
_open_pools = set()   # strong references: a pool lives until it is closed
_exiting = False


class Task:
    """The result of pool.spawn: a handle on a callable that runs on a worker."""
    __slots__ = ("_pool", "_key", "_job", "__weakref__")

    def __init__(self, pool, key, job):
        self._pool = pool
        self._key = key
        self._job = job

    def done(self):
        """True once the callable has run (returned or raised)."""
        return self._job.done

    def result(self, timeout=None):
        """The callable's return value; re-raises its exception.

        Waits up to timeout seconds (None: as long as it takes) and raises
        TimeoutError if the task has not run by then. Without a timeout a
        worker of the same pool runs other jobs of the pool while it waits;
        with one it only blocks.
        """
        self._wait(_timeout(timeout))
        exc = self._job.exc
        if exc is not None:
            _raise_stored(exc)
        return self._job.result

    def exception(self, timeout=None):
        """The exception the callable raised, or None; waits as result() does."""
        self._wait(_timeout(timeout))
        return self._job.exc

    def _wait(self, timeout):
        job, pool, key = self._job, self._pool, self._key
        if not job.done and key in getattr(_tls, "running", ()):
            raise BlitzError(BLZ_EDEADLK, "a task waits for its own result")
        if not job.done and timeout is not None:
            if not job.lock.acquire(True, timeout):
                raise TimeoutError(f"the task did not finish within {timeout} s")
            job.lock.release()
        # blz_join waits (a worker runs other jobs meanwhile) and frees the handle.
        if not pool._join(key) and not job.done:
            job.lock.acquire()   # another thread (or close) joins it: wait for the job itself
            job.lock.release()

    def __del__(self):
        # Never calls C nor takes a lock: a finalizer may run anywhere.
        try:
            pool = self._pool
            if self._key in pool._unjoined:
                pool._orphans.append(self._key)
        except Exception:  # interpreter shutdown: nothing left to free
            pass

    def __repr__(self):
        job = self._job
        if not job.done:
            state = "pending"
        elif job.exc is not None:
            state = f"raised {type(job.exc).__name__}"
        else:
            state = "finished"
        return f"<blitz.Task {state}>"


class Pool:
    """A libblitz work-stealing pool.

    Pool(num_threads=None, name="blz"): num_threads None uses the library's
    default (BLZ_NUM_THREADS if set, else the CPUs this process may use);
    name prefixes the worker thread names ("blz-0", "blz-1", ...).
    Use it in a with-block or call close(); a pool still open when the
    interpreter exits is closed by an atexit handler.
    """

    def __init__(self, num_threads=None, name="blz"):
        self._state = _CLOSED   # until created: close() and repr work on a failed init
        self._ptr = None
        self._name = name
        self._cond = threading.Condition(threading.Lock())
        self._inflight = 0
        self._unjoined = {}                     # key -> (blz_task handle, _Job)
        self._orphans = collections.deque()     # keys of dropped Tasks
        if num_threads is None:
            count = 0
        else:
            count = _index(num_threads, "num_threads")
            if not 1 <= count <= BLZ_MAX_THREADS:
                raise ValueError(f"num_threads must be in 1..{BLZ_MAX_THREADS} or None, not {count}")
        if name is None:
            encoded = None
        elif isinstance(name, str):
            encoded = name.encode("utf-8")
            if b"\0" in encoded:
                raise ValueError("name must not contain NUL characters")
        else:
            raise TypeError(f"name must be a str or None, not {type(name).__name__}")

        config = PoolConfig()
        _lib.blz_pool_config_init(byref(config))
        config.num_threads = count
        config.thread_name = encoded  # read only during blz_pool_create
        handle = c_void_p()
        with _registry_lock:
            if _exiting:
                raise RuntimeError("blitz: cannot create a pool once the interpreter is exiting")
            _check(_lib.blz_pool_create(byref(config), byref(handle)), "blz_pool_create")
            self._ptr = handle.value
            self._num_threads = _lib.blz_pool_num_threads(self._ptr)
            self._state = _OPEN
            _open_pools.add(self)

    # -- admission ------------------------------------------------------

    def _enter(self):
        """Counts a call that will pass the pool pointer to C; returns it."""
        with self._cond:
            state = self._state
            if state == _OPEN or (state != _CLOSED and getattr(_tls, "pool", None) is self):
                self._inflight += 1
                return self._ptr
        raise PoolClosedError()

    def _leave(self):
        with self._cond:
            self._inflight -= 1
            if self._inflight == 0 and self._state == _DRAINING:
                self._cond.notify_all()

    def _ensure_usable(self):
        """Raises PoolClosedError where a call on the pool would."""
        self._enter()
        self._leave()

    def _run_in_c(self, what, c_call, *jobs):
        """Registers jobs under fresh keys, calls c_call(pool pointer, *keys)
        with the call counted in flight, unregisters the jobs (the call has
        waited for them) and raises for a failed status."""
        keys = [next(_keys) for _ in jobs]
        ptr = self._enter()
        try:
            _jobs.update(zip(keys, jobs))
            status = c_call(ptr, *keys)
        finally:
            for key in keys:
                _jobs.pop(key, None)
            self._leave()
        _check(status, what)

    # -- handles --------------------------------------------------------

    def _free_handle(self, key, handle, job):
        """blz_join(handle) for an entry taken out of _unjoined; it frees the
        handle. Returns False, the entry put back, if the library answered
        BLZ_EDEADLK (called from inside the task or from work it waits for):
        then nothing changed."""
        status = _lib.blz_join(handle)
        if status == BLZ_EDEADLK:
            self._unjoined[key] = (handle, job)
            return False
        if not job.done:          # BLZ_EFORK: a forked child, where the task never ran
            _jobs.pop(key, None)
            _finish_unrun(job, status)
        elif status not in (BLZ_OK, BLZ_EFORK):
            # The trampoline catches every exception, so BLZ_ETASK cannot come.
            raise BlitzError(status, "blz_join")
        return True

    def _join(self, key):
        """Joins the task's handle unless another thread took it; returns whether it did."""
        entry = self._unjoined.pop(key, None)   # atomic: one thread joins each handle
        if entry is None:
            return False
        if not self._free_handle(key, *entry):
            raise BlitzError(BLZ_EDEADLK, "Task.result() called from inside the task "
                                          "or from work the task waits for")
        return True

    def _reap(self):
        """Joins the handles of dropped Tasks whose job has run."""
        orphans = self._orphans
        for _ in range(min(_REAP_BATCH, len(orphans))):
            try:
                key = orphans.popleft()
            except IndexError:
                return
            if key in _jobs:          # not run yet: look again later
                orphans.append(key)
                continue
            entry = self._unjoined.pop(key, None)   # None: joined by someone else
            if entry is not None and not self._free_handle(key, *entry):
                orphans.append(key)

    def _handle_count(self):
        """blz_task handles not joined yet (for tests)."""
        return len(self._unjoined)

    # -- the API --------------------------------------------------------

    @property
    def num_threads(self):
        """The number of workers."""
        self._ensure_usable()
        return self._num_threads

    @property
    def name(self):
        return self._name if self._ptr is not None else None

    @property
    def closed(self):
        """True once close() has begun."""
        return self._state != _OPEN

    def spawn(self, fn, /, *args, **kwargs):
        """Runs fn(*args, **kwargs) on a worker, later; returns a Task."""
        _callable(fn, "fn")
        orphans = self._orphans
        if orphans and (len(orphans) > _WORKER_REAP_THRESHOLD
                        or getattr(_tls, "pool", None) is not self):
            self._reap()
        lock = _thread.allocate_lock()
        lock.acquire()
        job = _Job(self, fn, args, kwargs, lock)
        key = next(_keys)
        ptr = self._enter()
        try:
            _jobs[key] = job
            handle = c_void_p()
            status = _lib.blz_spawn(ptr, _FN_TRAMPOLINE, key, byref(handle))
            if status != BLZ_OK:
                del _jobs[key]
                _check(status, "blz_spawn")
            self._unjoined[key] = (handle.value, job)
        finally:
            self._leave()
        return Task(self, key, job)

    def call(self, fn, /, *args, **kwargs):
        """Runs fn(*args, **kwargs) on a worker and returns its value (or raises
        its exception). On a worker of this pool it runs inline."""
        _callable(fn, "fn")
        job = _Job(self, fn, args, kwargs, None)
        self._run_in_c("blz_call", lambda ptr, key: _lib.blz_call(ptr, _FN_TRAMPOLINE, key), job)
        if job.exc is not None:
            _raise_stored(job.exc)
        return job.result

    def join(self, f, g):
        """Runs f() and g(), possibly in parallel (blz_fork_join), and returns
        (f(), g()). Both run even if one raises; f's exception wins."""
        _callable(f, "f")
        _callable(g, "g")
        job_f = _Job(self, f, (), {}, None)
        job_g = _Job(self, g, (), {}, None)
        self._run_in_c("blz_fork_join", lambda ptr, key_f, key_g: _lib.blz_fork_join(
            ptr, _FN_TRAMPOLINE, key_f, _FN_TRAMPOLINE, key_g), job_f, job_g)
        for job in (job_f, job_g):  # f first: its exception wins
            if job.exc is not None:
                _raise_stored(job.exc)
        return job_f.result, job_g.result

    def parallel_for(self, begin, end, body, grain=0):
        """Calls body on disjoint sub-ranges covering [begin, end) exactly once.

        body is a Python callable, called as body(lo, hi) (one call at a
        time: it holds the GIL), or a blitz.RANGE_FN pointer to a C
        function, called as body(None, lo, hi) on the workers without the
        GIL. grain: indices per call at most (0: automatic, about eight
        pieces per worker). If Python calls raise, every other piece still
        runs and the exception of the lowest piece is raised.
        """
        begin = _size(begin, "begin")
        end = _size(end, "end")
        grain = _size(grain, "grain")
        if begin > end:
            raise ValueError(f"begin ({begin}) must not be greater than end ({end})")
        if isinstance(body, ctypes._CFuncPtr):
            if not isinstance(body, RANGE_FN):
                raise TypeError("a ctypes function pointer body must be a blitz.RANGE_FN "
                                "(ctypes.cast(fn, blitz.RANGE_FN) converts one)")
            if _capi.null_pointer(body):
                raise ValueError("body is a NULL function pointer")
            if _wraps_python(body):
                raise TypeError("body is a blitz.RANGE_FN around a Python function, whose "
                                "exceptions ctypes would swallow: pass a Python callable "
                                "body(lo, hi) instead")
            # The caller's reference keeps body alive while C calls it.
            self._run_in_c("blz_parallel_for", lambda ptr: _lib.blz_parallel_for(
                ptr, begin, end, grain, body, None))
            return
        _callable(body, "body")
        job = _RangeJob(self, body)
        self._run_in_c("blz_parallel_for", lambda ptr, key: _lib.blz_parallel_for(
            ptr, begin, end, grain, _RANGE_TRAMPOLINE, key), job)
        if job.exc is not None:
            _raise_stored(job.exc)

    def map(self, fn, iterable):
        """[fn(x) for x in iterable], computed on the workers, in input order.

        Every item runs; if some raise, the first in input order is raised.
        Each item is a spawned task: from outside the pool they go through
        the injector, which hands each to a free worker even while others
        block (sleep, wait for I/O); on a worker of the pool the caller runs
        the items left in its deque while it waits.
        """
        _callable(fn, "fn")
        items = list(iterable)
        if not items:
            self._ensure_usable()  # a closed pool raises all the same
            return []
        tasks = [self.spawn(fn, item) for item in items]
        results = []
        first = None
        for task in tasks:
            task._wait(None)
            job = task._job
            if job.exc is not None and first is None:
                first = job.exc
            results.append(job.result)
        if first is not None:
            _raise_stored(first)
        return results

    def stats(self):
        """A snapshot of the pool's counters (blz_pool_stats) as a dict."""
        stats = Stats()
        stats.struct_size = ctypes.sizeof(Stats)
        self._run_in_c("blz_pool_stats", lambda ptr: _lib.blz_pool_stats(ptr, byref(stats)))
        return {name: getattr(stats, name) for name, _ in Stats._fields_}

    def close(self):
        """Waits for every accepted task, stops the workers and frees the pool.

        Idempotent. From one of the pool's own workers it raises BlitzError
        (BLZ_EDEADLK) and changes nothing. Calls from outside the pool made
        once close() has begun raise PoolClosedError; the pool's own tasks
        may still submit work, which runs.
        """
        if getattr(_tls, "pool", None) is self:
            # A worker of this pool: the library refuses, nothing changes.
            status = _lib.blz_pool_destroy(self._ptr)
            if status == BLZ_OK:  # cannot happen; never use the pointer again
                self._finish_close()
            raise BlitzError(status, "Pool.close() from one of the pool's own workers")
        with self._cond:
            if self._state == _CLOSED:
                return
            if self._state != _OPEN:       # another thread is closing it
                while self._state != _CLOSED:
                    self._cond.wait()
                return
            self._state = _DRAINING
            while self._inflight:
                self._cond.wait()
            self._state = _DESTROYING
        status = _lib.blz_pool_destroy(self._ptr)   # waits for accepted work
        if status not in (BLZ_OK, BLZ_EFORK):       # nothing was freed
            with self._cond:
                self._state = _OPEN
                self._cond.notify_all()
            raise BlitzError(status, "blz_pool_destroy")
        self._finish_close()
        if status == BLZ_EFORK:
            raise BlitzError(status, "Pool.close() in a child process: the workers were the parent's")

    def _finish_close(self):
        # Every task has run (or, in a forked child, never will): no join blocks,
        # and no thread adds a handle any more.
        try:
            for key in list(self._unjoined):
                entry = self._unjoined.pop(key, None)
                if entry is not None:
                    self._free_handle(key, *entry)
        finally:
            self._orphans.clear()
            with self._cond:
                self._state = _CLOSED
                self._cond.notify_all()
            with _registry_lock:
                _open_pools.discard(self)

    def __enter__(self):
        if self._state != _OPEN:
            raise PoolClosedError()
        return self

    def __exit__(self, *exc_info):
        self.close()

    def __repr__(self):
        if self._ptr is None:
            return "<blitz.Pool (not created)>"
        return (f"<blitz.Pool name={self._name!r} num_threads={self._num_threads} "
                f"{_STATE_NAMES[self._state]}>")


def _close_all_at_exit():
    """Closes the pools left open, while the interpreter can still run callbacks."""
    global _exiting
    with _registry_lock:
        _exiting = True
        pools = list(_open_pools)
    for pool in pools:
        try:
            pool.close()
        except BlitzError as exc:
            if exc.status != BLZ_EFORK:  # a forked child: nothing to wait for
                import sys
                print(f"blitz: closing {pool!r} at exit: {exc}", file=sys.stderr)


def _after_fork_in_child():
    # The parent's locks may have been held by threads that do not exist here.
    global _registry_lock
    _registry_lock = threading.Lock()
    for pool in _open_pools:
        pool._cond = threading.Condition(threading.Lock())
        pool._inflight = 0
        if pool._state != _CLOSED:
            pool._state = _OPEN   # close() then frees it (blz_pool_destroy answers BLZ_EFORK)


atexit.register(_close_all_at_exit)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
