"""asyncio helpers where the standard path lacks something.

Python callables need nothing from here: ``await loop.run_in_executor(executor,
fn, *args)`` runs fn on a blitz.Executor, and ``loop.set_default_executor(executor)``
makes it asyncio's default (blitz.Executor is a ThreadPoolExecutor subclass
for that reason). What asyncio cannot do by itself is cancel C code:

    await blitz.aio.parallel_for(executor, 0, n, kernel, array)

awaits a C kernel without blocking the event loop, and cancelling the
awaiting task cancels the kernel: pieces not started are skipped, and the
coroutine raises CancelledError once the pieces already running have
returned, so the argument is no longer in use when the cancellation
arrives.
"""
from __future__ import annotations

import asyncio

from ._capi import BLZ_ECANCELED

__all__ = ["parallel_for"]


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
