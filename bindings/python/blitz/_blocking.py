"""blitz.blocking(): a blocking section for a task that waits outside the pool."""
import contextlib

from . import _capi


@contextlib.contextmanager
def blocking():
    """Marks the code inside as blocking outside the pool (blz_block_begin/blz_block_end).

    A task of an Executor or Pool that sleeps, reads a socket or waits for a
    lock releases the GIL but still holds its worker; inside this block the
    pool stands a spare thread in for it, so that other tasks (and fork-join)
    keep running on as many threads as the pool has:

        def fetch(url):
            with blitz.blocking():
                return urllib.request.urlopen(url).read()

    Sections nest; outside a pool's worker the block changes nothing. Keep
    only the blocking call inside (see blitz.h, blz_block_begin).
    """
    _capi.held.blz_block_begin()
    try:
        yield
    finally:
        _capi.held.blz_block_end()
