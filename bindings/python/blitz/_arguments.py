"""Checks of the arguments the binding passes on to C, made before any C
call, and the pins that keep a C function's argument in place while C uses
it."""
from __future__ import annotations

import ctypes
import math
import operator
from ctypes import byref, c_int, c_void_p

from . import _capi
from ._capi import FN, RANGE_FN

SIZE_MAX = (1 << (8 * ctypes.sizeof(ctypes.c_size_t))) - 1
_UINTPTR_MAX = (1 << (8 * ctypes.sizeof(c_void_p))) - 1


# ---------------------------------------------------------------- Python values

def check_callable(fn, what):
    if not callable(fn):
        raise TypeError(f"{what} must be callable, not {type(fn).__name__}")


def index_argument(value, what):
    if isinstance(value, bool) or not hasattr(type(value), "__index__"):
        raise TypeError(f"{what} must be an int, not {type(value).__name__}")
    return operator.index(value)


def size_argument(value, what):
    value = index_argument(value, what)
    if not 0 <= value <= SIZE_MAX:
        raise ValueError(f"{what} must be in 0..{SIZE_MAX}, not {value}")
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


# ---------------------------------------------------------------- C functions

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
_PyBUF_C_CONTIGUOUS = 0x38  # PyBUF_STRIDES | 0x20: one block of memory, in C order


class Pin:
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


NO_PIN = Pin(None)


def c_argument(arg):
    """The Pin of a C function's argument: None (NULL), an int address, a
    ctypes object (a pointer passes its value, any other object its address),
    or an object with a C-contiguous buffer (numpy array, bytearray,
    memoryview, bytes) whose address is passed."""
    if arg is None:
        return NO_PIN
    if isinstance(arg, bool):
        raise TypeError("arg must not be a bool")
    if isinstance(arg, int):
        if not 0 <= arg <= _UINTPTR_MAX:
            raise ValueError(f"an int arg is an address in 0..{_UINTPTR_MAX}, not {arg}")
        return Pin(arg or None)
    if isinstance(arg, ctypes._CFuncPtr):
        raise TypeError("arg is a function pointer; pass data (an address, a buffer, a ctypes object)")
    if isinstance(arg, (ctypes._Pointer, c_void_p, ctypes.c_char_p, ctypes.c_wchar_p)):
        return Pin(ctypes.cast(arg, c_void_p).value, obj=arg)
    if isinstance(arg, (ctypes._SimpleCData, ctypes.Array, ctypes.Structure, ctypes.Union)):
        return Pin(ctypes.addressof(arg), obj=arg)
    pin = Pin(None, view=_PyBuffer())
    try:
        pin.export(arg)
    except BufferError as exc:
        raise ValueError(f"arg's buffer cannot be passed to C: {exc}") from None
    except TypeError:
        raise TypeError("arg must be None, an int address, a ctypes object or an object with a "
                        f"C-contiguous buffer (numpy array, bytearray, memoryview), not "
                        f"{type(arg).__name__}") from None
    return pin
