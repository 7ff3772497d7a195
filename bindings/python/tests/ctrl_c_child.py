"""The child program of test_interrupts.py: Ctrl-C where a user can press it.

    python3 ctrl_c_child.py every-point       one KeyboardInterrupt at each point where CPython
                                              can raise one, in turn, during each operation
    python3 ctrl_c_child.py signals SECONDS   real signals (SIGALRM at random short intervals,
                                              whose handler raises KeyboardInterrupt) for SECONDS
    python3 ctrl_c_child.py at-exit           starts Python tasks, prints "exiting" and ends:
                                              the parent sends SIGINT during blitz's exit handler

The first two then shut every executor and pool down (wait=True) and check
that nothing was left half-changed: every Future returned is done, no
task record or unit of work is left, every pool is closed, every lock is
free. They print one line "checked: ..." and exit 0 when all holds; a
wedge shows as a hang (the parent's timeout; faulthandler dumps the stacks).

Where CPython raises an asynchronous exception (a signal handler's, such
as KeyboardInterrupt) on the main thread: at the points where its eval
loop checks for pending calls, which are the start of a Python function
(or the resumption of a generator), right after a call returns (before
its result is used), and a loop's backward jump; also inside blocking C
calls that check for signals (a lock's acquire), where nothing was taken.
every-point raises there, one point per run, counted in order:
  * a function's start: sys.setprofile's "call" event;
  * after a C function returns: its "c_return" event, raised there so that
    CPython drops the result and raises at the call, as a real interrupt does;
  * after a Python function returns: its "return" event, likewise;
  * after a call that the profiler does not see (a ctypes function, a
    class): the "opcode" event (sys.settrace) of the next instruction, when
    that instruction has the same exception handler as the call;
    otherwise the point cannot be reproduced this way and is counted as
    "unmodelled" (the binding's own code has none; the test checks that);
  * a backward jump: the "opcode" event of the jump itself.
Only frames of the blitz package, threading and concurrent.futures are
interrupted: the operations' own code is the test's.
"""
import _thread
import concurrent.futures
import ctypes
import dis
import faulthandler
import gc
import os
import random
import signal
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import blitz  # noqa: E402
from blitz import _runtime  # noqa: E402

OPERATION_SECONDS = 30   # a bound on one operation, and on the final shutdown: beyond it,
                         # a wedge: faulthandler dumps the stacks and the program exits
_GENERATOR_FLAGS = 0x20 | 0x80 | 0x200   # CO_GENERATOR, CO_COROUTINE, CO_ASYNC_GENERATOR


def _is_call(opname):
    # CALL, CALL_FUNCTION_EX, CALL_KW (3.13); 3.12's CALL_INTRINSIC_* call no user code.
    return opname.startswith("CALL") and not opname.startswith("CALL_INTRINSIC")


class _CodeInfo:
    """For one code object: the instruction after each call, the backward
    jumps, and the exception handler of each offset."""

    def __init__(self, code):
        instructions = list(dis.get_instructions(code))
        self.after_call = {}   # offset of the next instruction -> offset of the call
        for this, following in zip(instructions, instructions[1:]):
            if _is_call(this.opname):
                self.after_call[following.offset] = this.offset
        self.backward = {i.offset for i in instructions if i.opname.startswith("JUMP_BACKWARD")
                         and i.opname != "JUMP_BACKWARD_NO_INTERRUPT"}
        self.table = dis._parse_exception_table(code)

    def handler(self, offset):
        for entry in self.table:
            if entry.start <= offset < entry.end:
                return entry.target, entry.depth, entry.lasti
        return None


class Injector:
    """Raises KeyboardInterrupt("injected") at the n-th point of an operation."""

    def __init__(self, watched_dirs, watched_files):
        self._dirs = tuple(watched_dirs)
        self._files = set(watched_files)
        self._watched = {}
        self._info = {}
        self.unmodelled = set()
        self._target = self._count = 0
        self._returned_into = None
        self._previous = {}

    def watched(self, code):
        known = self._watched.get(code.co_filename)
        if known is None:
            name = code.co_filename
            known = name in self._files or name.startswith(self._dirs)
            self._watched[name] = known
        return known

    def run(self, op, target):
        """Runs op() with the interrupt at point `target` (1 is the first);
        returns whether op reached that point."""
        self._target, self._count = target, 0
        self._returned_into = None
        faulthandler.dump_traceback_later(OPERATION_SECONDS, exit=True)
        self._previous = {}
        sys.settrace(self._trace)
        sys.setprofile(self._profile)
        try:
            op()
        except KeyboardInterrupt as exc:
            if exc.args != ("injected",):
                raise
        finally:
            sys.setprofile(None)
            sys.settrace(None)
            self._previous = {}
        return self._count >= target

    def _point(self):
        self._count += 1
        if self._count == self._target:
            raise KeyboardInterrupt("injected")

    def _profile(self, frame, event, arg):
        if event == "call":
            if self.watched(frame.f_code):
                self._point()
        elif event == "c_return":
            if self.watched(frame.f_code):
                self._returned_into = frame
                self._point()
        elif event == "return":
            caller = frame.f_back
            if (caller is not None and self.watched(caller.f_code)
                    and not frame.f_code.co_flags & _GENERATOR_FLAGS):
                self._returned_into = caller
                self._point()

    def _trace(self, frame, event, arg):
        if event == "call" and self.watched(frame.f_code):
            frame.f_trace_lines = False
            frame.f_trace_opcodes = True
            return self._local
        return None

    def _local(self, frame, event, arg):
        if event != "opcode":
            return self._local
        code = frame.f_code
        info = self._info.get(code)
        if info is None:
            info = self._info[code] = _CodeInfo(code)
        at = frame.f_lasti
        previous = self._previous.get(frame)
        self._previous[frame] = at
        returned_into, self._returned_into = self._returned_into, None
        if at in info.backward:
            self._point()
        call = info.after_call.get(at)
        if call is not None and call == previous and returned_into is not frame:
            if info.handler(call) == info.handler(at):
                self._point()
            else:
                self.unmodelled.add(f"{os.path.basename(code.co_filename)}:{code.co_name}@{call}")
        return self._local


# ---------------------------------------------------------------- what a user does

class World:
    """The executors and pools the operations use, and what they returned."""

    def __init__(self):
        self.executor = blitz.Executor(2)
        self.pool = blitz.Pool(2)
        self.others = []      # executors and pools made (and maybe closed) by operations
        self.futures = []     # every Future an operation got back
        self.buffers = []     # bytearrays passed to C: each must be unpinned in the end

    def keep(self, future):
        self.futures.append(future)
        return future

    def made(self, thing):
        self.others.append(thing)
        return thing

    def buffer(self, size):
        data = bytearray(size)
        self.buffers.append(data)
        return data


def _pass_gate(gate):
    if gate.acquire(True, 5):
        gate.release()


def _short(*args):
    time.sleep(0.0005)
    return 1


def operations(world):
    """(name, op) pairs: each op is what a user's main thread does, once."""
    ex, pool = world.executor, world.pool

    def cancel_queued_future():
        # Both workers wait at a gate, so the third task is queued when cancelled.
        # The gate is a bare lock: opening it is one C call, which no interrupt splits.
        gate = _thread.allocate_lock()
        gate.acquire()
        try:
            world.keep(ex.submit(_pass_gate, gate))
            world.keep(ex.submit(_pass_gate, gate))
            world.keep(ex.submit(abs, -1)).cancel()
        finally:
            gate.release()

    def new_executor_and_shutdown():
        executor = world.made(blitz.Executor(1))
        world.keep(executor.submit(_short))
        executor.shutdown(wait=True)

    def new_pool_and_close():
        p = world.made(blitz.Pool(1))
        world.keep(p.spawn(_short))
        p.close()

    def shutdown_without_waiting():
        executor = world.made(blitz.Executor(1))
        world.keep(executor.submit(_short))
        executor.shutdown(wait=False, cancel_futures=True)

    c_operations = []
    kernel_path = os.environ.get("BLITZ_TEST_KERNEL")
    if kernel_path:   # C functions with a buffer argument: the buffer's pin must not leak
        kernel = ctypes.CDLL(kernel_path)
        increment = blitz.TASK_FN(("blz_test_increment", kernel))
        square = blitz.RANGE_FN(("blz_test_square", kernel))
        c_operations = [
            ("submit_c with a buffer", lambda: world.keep(ex.submit_c(increment, world.buffer(8)))),
            ("parallel_for, C kernel and a buffer",
             lambda: ex.parallel_for(0, 16, square, world.buffer(64), grain=4)),
        ]
    return c_operations + [
        ("submit", lambda: world.keep(ex.submit(abs, -1))),
        ("submit and result", lambda: world.keep(ex.submit(abs, -1)).result()),
        ("result of a running task", lambda: world.keep(ex.submit(_short)).result()),
        ("map", lambda: list(ex.map(abs, range(-3, 3)))),
        ("map with chunks", lambda: list(ex.map(abs, range(-6, 6), chunksize=4))),
        ("map stopped early", lambda: next(ex.map(_short, range(8)))),
        ("stats", ex.stats),
        ("worker_stats", lambda: ex.worker_stats(1)),
        ("set_max_active", lambda: ex.set_max_active(0)),
        ("parallel_for, Python body", lambda: ex.parallel_for(0, 8, lambda lo, hi: None, grain=2)),
        ("cancel a queued future", cancel_queued_future),
        ("Pool.spawn", lambda: world.keep(pool.spawn(abs, -2))),
        ("Pool.call", lambda: pool.call(abs, -2)),
        ("Pool.map", lambda: pool.map(abs, [-1, 2, -3])),
        ("Pool.join", lambda: pool.join(int, float)),
        ("new executor, submit, shutdown", new_executor_and_shutdown),
        ("new pool, spawn, close", new_pool_and_close),
        ("shutdown(wait=False, cancel_futures=True)", shutdown_without_waiting),
    ]


# ---------------------------------------------------------------- the checks

def check_everything_settled(world):
    """Shuts everything down (wait=True) and returns the problems found."""
    problems = []
    runtimes = [world.executor._runtime, world.pool._runtime]
    runtimes += [thing._runtime for thing in world.others]
    world.executor.shutdown(wait=True)
    world.pool.close()
    for thing in world.others:
        if isinstance(thing, blitz.Executor):
            thing.shutdown(wait=True)
        else:
            thing.close()
    for future in world.futures:
        if not future.done():
            problems.append(f"a Future is not done: {future!r}")
    gc.collect()   # a pin that an interrupt dropped is released by its __del__
    for data in world.buffers:
        try:
            data.append(0)
        except BufferError:
            problems.append("a buffer passed to C is still pinned")
    for key, record in list(_runtime._callbacks.items()):
        if getattr(record, "_runtime", None) in runtimes or record in runtimes:
            problems.append(f"a record is still registered: {record!r}")
    for runtime in runtimes:
        problems += runtime_problems(runtime)
    for name, lock in (("the registry lock", _runtime._registry_lock),):
        if not lock.acquire(timeout=1):
            problems.append(f"{name} is held")
        else:
            lock.release()
    return problems


def runtime_problems(runtime):
    """What a closed runtime must not have left behind (the binding's own bookkeeping)."""
    problems = []
    if not runtime.closed or runtime.state_name != "closed":
        problems.append(f"a runtime is {runtime.state_name}")
    if runtime in _runtime._open_runtimes:
        problems.append("a closed runtime is still registered for the exit handler")
    for name in ("_mutex", "_destroy_mutex"):
        lock = getattr(runtime, name, None)
        if lock is not None:
            if lock.acquire(timeout=1):
                lock.release()
            else:
                problems.append(f"the runtime's {name} is held")
    units = getattr(runtime, "_units", None)
    if units:
        problems.append(f"{len(units)} units of work are still held")
    return problems


def report(problems, summary):
    for problem in problems[:20]:
        print("PROBLEM:", problem, flush=True)
    print(f"checked: {summary}; {len(problems)} problems", flush=True)
    return 1 if problems else 0


# ---------------------------------------------------------------- the modes

def every_point():
    world = World()
    injector = Injector([os.path.dirname(blitz.__file__) + os.sep,
                         os.path.dirname(concurrent.futures.__file__) + os.sep],
                        [threading.__file__])
    injected = 0
    problems = []
    only = os.environ.get("BLITZ_CTRL_C_ONLY", "")   # a part of the operations' names, to debug one
    for name, op in operations(world):
        if only not in name:
            continue
        target = 1
        while True:
            try:
                if not injector.run(op, target):
                    break
            except Exception as exc:   # anything but the interrupt is a defect
                problems.append(f"{name}, interrupted at point {target}: {exc!r}")
            injected += 1
            target += 1
        print(f"{name}: {target - 1} points", flush=True)
    faulthandler.dump_traceback_later(OPERATION_SECONDS, exit=True)
    problems += check_everything_settled(world)
    ours = sorted(p for p in injector.unmodelled if p.startswith(("_runtime", "_futures", "_arguments",
                                                                  "_errors", "_map", "_executor",
                                                                  "_pool", "_operate", "__init__")))
    if ours:
        problems.append(f"points in the binding that cannot be reproduced: {ours}")
    return report(problems, f"{injected} interrupts, {len(injector.unmodelled)} unmodelled points "
                            f"outside the binding")


def signals(seconds):
    world = World()
    ops = operations(world)
    faulthandler.dump_traceback_later(seconds + OPERATION_SECONDS, exit=True)
    rng = random.Random(27)

    # Python runs a handler at a bytecode boundary after the signal, so a
    # SIGALRM that arrives just as a round stops its timer is handled
    # later, outside the round (once it was in the restore of the handler
    # below, under ASan: the child died of its own KeyboardInterrupt). The
    # handler raises only while its round is armed.
    armed = [False]

    def interrupt(signum, frame):
        if armed[0]:
            armed[0] = False
            raise KeyboardInterrupt("signal")

    previous = signal.signal(signal.SIGALRM, interrupt)
    interrupted = rounds = 0
    problems = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        name, op = ops[rounds % len(ops)]
        rounds += 1
        delay = rng.uniform(0.00002, 0.002)
        # A one-shot timer: one interrupt at most per round, inside the
        # outer try, which every path leaves disarmed (the handler disarms
        # itself before it raises).
        try:
            armed[0] = True
            signal.setitimer(signal.ITIMER_REAL, delay)
            try:
                op()
            except KeyboardInterrupt:
                raise
            except Exception as exc:   # anything but the interrupt is a defect
                problems.append(f"{name}: {exc!r}")
            armed[0] = False
        except KeyboardInterrupt:
            interrupted += 1
        signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, previous)
    problems += check_everything_settled(world)
    return report(problems, f"{rounds} operations, {interrupted} interrupted")


def at_exit():
    """Python tasks running and queued when the main program ends; each
    task appends a line to $BLITZ_TASK_LOG when it ends."""
    log = open(os.environ["BLITZ_TASK_LOG"], "a", buffering=1)

    def task(i):
        log.write(f"start {i}\n")
        for _ in range(200):       # ~1 s of Python that keeps taking the GIL back
            time.sleep(0.005)
        log.write(f"ran {i}\n")

    executor = blitz.Executor(2)
    for i in range(40):            # 20 rounds of 1 s on 2 workers: 20 s if none is skipped
        executor.submit(task, i)
    pool = blitz.Pool(1)
    pool.spawn(task, 100)
    print("exiting", flush=True)


def main():
    faulthandler.enable()
    mode = sys.argv[1]
    if mode == "every-point":
        status = every_point()
    elif mode == "signals":
        status = signals(float(sys.argv[2]))
    elif mode == "at-exit":
        at_exit()
        return 0
    else:
        sys.exit(__doc__)
    faulthandler.cancel_dump_traceback_later()
    return status


if __name__ == "__main__":
    sys.exit(main())
