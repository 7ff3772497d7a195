"""The binding's exceptions, and how an exception caught on a worker is kept
and raised again on the thread that asks for it."""
from __future__ import annotations

from . import _capi
from ._capi import BLZ_ESHUTDOWN, BLZ_OK


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


def strip(exc):
    """Drops the trampoline's own frame from exc's traceback (the frames of
    the user's code stay) and with it a reference cycle through the record."""
    tb = exc.__traceback__
    if tb is not None:
        exc.__traceback__ = tb.tb_next
    return exc


def raise_stored(exc):
    try:
        raise exc
    finally:
        exc = None  # no cycle through this frame
