"""Finds and loads libblitz.so.

The places tried, in order (the first that loads wins):

1. the ``BLITZ_LIBRARY`` environment variable, a file path. When it is set,
   nothing else is tried: an explicit choice that fails is an error, never
   silently replaced by another copy of the library;
2. a ``libblitz.so*`` shipped inside this package's directory (a wheel built
   after ``./dev build`` bundles one);
3. the build directory of the checkout this package sits in, for
   development: ``<repo>/build/libblitz.so`` when the package is
   ``<repo>/bindings/python/blitz``;
4. ``ctypes.util.find_library("blitz")``: an installed libblitz.

Failing all of them raises ImportError listing each place with the reason.
"""
import ctypes
import ctypes.util
import glob
import os

ENV_VAR = "BLITZ_LIBRARY"
_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


def checkout_library():
    """<repo>/build/libblitz.so when this package is <repo>/bindings/python/blitz
    (whether or not it was built), else None. setup.py asks it too."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(_PACKAGE_DIR)))
    if not os.path.isfile(os.path.join(root, "include", "blitz.h")):
        return None
    return os.path.join(root, "build", "libblitz.so")


def _bundled():
    """libblitz.so* files in the package directory, the plainest name first."""
    found = glob.glob(os.path.join(_PACKAGE_DIR, "libblitz.so*"))
    return sorted(found, key=lambda p: (len(os.path.basename(p)), p))


def candidates():
    """(description, path or None, reason if None) for every place, in order."""
    places = []
    env = os.environ.get(ENV_VAR)
    if env:
        places.append((f"${ENV_VAR}", env, None))
        return places  # an explicit choice: nothing else is tried
    places.append((f"${ENV_VAR}", None, "not set"))

    bundled = _bundled()
    if bundled:
        places.extend(("package directory", path, None) for path in bundled)
    else:
        places.append(("package directory",
                       os.path.join(_PACKAGE_DIR, "libblitz.so*"), "no such file"))

    built = checkout_library()
    if built is None:
        places.append(("checkout build directory", None,
                       f"{_PACKAGE_DIR} is not inside a libblitz checkout"))
    else:
        places.append(("checkout build directory", built, None))

    name = ctypes.util.find_library("blitz")
    if name is None:
        places.append(('ctypes.util.find_library("blitz")', None, "found nothing"))
    else:
        places.append(('ctypes.util.find_library("blitz")', name, None))
    return places


def load():
    """Returns (ctypes.CDLL, path) or raises ImportError naming every place tried."""
    tried = []
    for where, path, reason in candidates():
        if path is None:
            tried.append(f"  {where}: {reason}")
            continue
        is_file_path = os.sep in path
        if is_file_path and not os.path.exists(path):
            tried.append(f"  {where}: {path}: no such file")
            continue
        try:
            lib = ctypes.CDLL(path)
        except OSError as exc:
            tried.append(f"  {where}: {path}: {exc}")
            continue
        if not hasattr(lib, "blz_version_number"):
            tried.append(f"  {where}: {path}: not libblitz (no blz_version_number)")
            continue
        return lib, (os.path.abspath(path) if is_file_path else _resolved(lib, path))
    raise ImportError(
        "blitz: cannot load libblitz.so. Build it (./dev build), install it, or set "
        f"{ENV_VAR} to its path. Tried, in order:\n" + "\n".join(tried))


def _resolved(lib, name):
    """The file a library loaded by name came from (via dladdr), else the name."""
    try:
        class DlInfo(ctypes.Structure):
            _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                        ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]
        libc = ctypes.CDLL(None)
        dladdr = libc.dladdr
        dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(DlInfo)]
        dladdr.restype = ctypes.c_int
        info = DlInfo()
        address = ctypes.cast(lib.blz_version_number, ctypes.c_void_p)
        if dladdr(address, ctypes.byref(info)) and info.dli_fname:
            return os.fsdecode(info.dli_fname)
    except (OSError, AttributeError):
        pass
    return name
