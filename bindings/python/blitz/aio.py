"""asyncio helpers where the standard path lacks something.

A blitz.Future (what Executor.submit, Executor.submit_c and Pool.spawn
return) is awaitable: ``value = await executor.submit(fn, *args)`` in a
coroutine. No thread waits for it: the task's completion callback, on the
worker that ran it, hands the end to the event loop with
loop.call_soon_threadsafe, and the coroutine resumes on the loop's thread
with the result or the exception. Cancelling the awaiting coroutine
cancels the task if it has not started (as asyncio.wrap_future does); a
running task runs to its end and its result is dropped. A Future
cancelled by other means (cancel(), shutdown(cancel_futures=True)) raises
asyncio.CancelledError in the await. The event loop may be closed, or the
awaiting coroutine gone, before the task ends (Ctrl-C in asyncio.run, an
abandoned loop at interpreter exit): the end then finds nobody to tell and
does nothing. ``await loop.run_in_executor(executor, fn, *args)`` and
``loop.set_default_executor(executor)`` work too (blitz.Executor is a
ThreadPoolExecutor subclass for that reason). What asyncio cannot do by
itself is cancel C code:

    await blitz.aio.parallel_for(executor, 0, n, kernel, array)

awaits a C kernel without blocking the event loop, and cancelling the
awaiting task cancels the kernel: pieces not started are skipped, and the
coroutine raises CancelledError once the pieces already running have
returned, so the argument is no longer in use when the cancellation
arrives.
"""
from __future__ import annotations

import asyncio
import functools

from ._capi import BLZ_ECANCELED, BLZ_ETIMEDOUT

__all__ = ["parallel_for"]


async def result_of(future):
    """The result of a blitz.Future, awaited (what Future.__await__ does;
    see the module's docstring): returns its value, raises its exception,
    or asyncio.CancelledError if it was cancelled."""
    if not future.done():
        loop = asyncio.get_running_loop()
        waiter = loop.create_future()
        future.add_done_callback(functools.partial(_tell_loop, loop, waiter))
        try:
            await waiter
        except asyncio.CancelledError:
            future.cancel()   # skipped unless it started; a running task runs to its end
            raise
    if future.cancelled():
        raise asyncio.CancelledError()
    return future.result()   # done: returns or raises at once


async def event_status(event):
    """`await event` (blitz.Event): waits, without a thread, until the event
    is set or closed and returns its status (BLZ_OK, BLZ_ETASK or
    BLZ_ECANCELED). A task of the process pool that runs after the event
    carries the end to the loop (blitz._events.notify_after)."""
    from ._events import notify_after
    status = event._status(0)
    if status == BLZ_ETIMEDOUT:
        await result_of(notify_after(event))
        status = event._status(0)
    return status


def _tell_loop(loop, waiter, _future):
    """The Future's done callback: on the worker that completed it (or on the
    thread that cancelled it). Wakes the awaiting coroutine through the
    loop's thread-safe queue; a loop closed meanwhile has nobody to wake."""
    try:
        loop.call_soon_threadsafe(_wake, waiter)
    except RuntimeError:   # "Event loop is closed": the await was abandoned
        pass


def _wake(waiter):
    """On the loop's thread: resumes the await, unless it was cancelled."""
    if not waiter.done():
        waiter.set_result(None)


async def parallel_for(executor, begin: int, end: int, kernel, arg=None, grain: int = 0) -> None:
    """Executor.parallel_for as a coroutine (see the module's docstring).

    Call it from the event loop's thread, not from a worker of the executor."""
    run = executor._start_parallel_for(begin, end, kernel, arg, grain)
    done = asyncio.wrap_future(run.future)
    try:
        await asyncio.shield(done)
    except asyncio.CancelledError:
        run.cancel()
        await asyncio.wait([done])   # until the running pieces have returned
        run.release()
        raise
    status = run.finished()
    if status == BLZ_ECANCELED:
        raise asyncio.CancelledError()
    run.loop.raise_for(status)
