"""A C kernel compiled by cffi (API mode), for numpy arrays: y = 3 * sqrt(x).

    module, kernel, Args = cffi_kernel.build(tmpdir)
    args = Args(x, y)                          # keeps x and y alive
    executor.parallel_for(0, x.size, kernel, args.pointer)

The kernel is a blz_range_fn, void three_sqrt(void *arg, size_t lo, size_t
hi), whose arg points to a struct holding the two arrays' addresses; blitz
calls it on every worker without the GIL. Needs python3-cffi, a C compiler
and the interpreter's headers (python3-dev for Debian's python3).
"""
import ctypes
import os
import sys

SOURCE = """
#include <math.h>
#include <stddef.h>
struct three_sqrt_args { const double *x; double *y; };
void three_sqrt(void *arg, size_t lo, size_t hi) {
    const struct three_sqrt_args *a = arg;
    for (size_t i = lo; i < hi; ++i) a->y[i] = 3.0 * sqrt(a->x[i]);
}
"""


class _Struct(ctypes.Structure):
    _fields_ = [("x", ctypes.c_void_p), ("y", ctypes.c_void_p)]


class Args:
    """The kernel's argument for two float64 numpy arrays of one length;
    holds them, so their memory stays valid while the kernel runs."""

    def __init__(self, x, y):
        if x.dtype.name != "float64" or y.dtype.name != "float64" or x.shape != y.shape:
            raise ValueError("x and y must be float64 arrays of one shape")
        if not (x.flags.c_contiguous and y.flags.c_contiguous and y.flags.writeable):
            raise ValueError("x and y must be C-contiguous, y writable")
        self.arrays = (x, y)
        self.struct = _Struct(x.ctypes.data, y.ctypes.data)
        self.pointer = ctypes.pointer(self.struct)


def build(tmpdir):
    """Compiles the kernel into tmpdir; returns (module, blitz.RANGE_FN, Args)."""
    import cffi
    import blitz
    ffibuilder = cffi.FFI()
    ffibuilder.cdef("void three_sqrt(void *arg, size_t lo, size_t hi);")
    ffibuilder.set_source("_blitz_three_sqrt", SOURCE, libraries=["m"],
                          extra_compile_args=["-O2"])
    # The compiler runs without sanitizer runtimes this process may have
    # preloaded (tools/sanitizer_preload.py): they are for libblitz, not cc.
    preload = os.environ.pop("LD_PRELOAD", None)
    try:
        ffibuilder.compile(tmpdir=tmpdir, verbose=False)
    finally:
        if preload is not None:
            os.environ["LD_PRELOAD"] = preload
    sys.path.insert(0, tmpdir)
    try:
        module = __import__("_blitz_three_sqrt")
    finally:
        sys.path.remove(tmpdir)
    address = int(module.ffi.cast("uintptr_t", module.ffi.addressof(module.lib, "three_sqrt")))
    return module, blitz.RANGE_FN(address), Args
