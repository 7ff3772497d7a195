"""Shared by the tests: makes `import blitz` work from the checkout, finds
(or builds) the C test kernel, counts blz_task handles, reads blitz.h."""
import atexit
import contextlib
import ctypes
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE_PARENT = os.path.dirname(HERE)           # bindings/python
REPO = os.path.dirname(os.path.dirname(PACKAGE_PARENT))
if PACKAGE_PARENT not in sys.path:
    sys.path.insert(0, PACKAGE_PARENT)

import blitz  # noqa: E402
from blitz import _pool  # noqa: E402

HEADER = os.path.join(REPO, "include", "blitz.h")
# Running under ThreadSanitizer (tools/sanitizer_preload.py preloads it for a -Db_sanitize=thread build).
UNDER_TSAN = "libtsan" in os.environ.get("LD_PRELOAD", "")

_kernel = None
_kernel_error = None


def kernel():
    """The C test kernel (tests/ckernel.c) as a ctypes.CDLL, or None.

    $BLITZ_TEST_KERNEL (set by meson) names it; otherwise it is compiled
    here with cc, if there is one."""
    global _kernel, _kernel_error
    if _kernel is not None or _kernel_error is not None:
        return _kernel
    path = os.environ.get("BLITZ_TEST_KERNEL")
    if not path:
        cc = shutil.which("cc") or shutil.which("gcc")
        if cc is None:
            _kernel_error = "no $BLITZ_TEST_KERNEL and no C compiler"
            return None
        scratch = tempfile.mkdtemp(prefix="blitz-test-kernel-")
        atexit.register(shutil.rmtree, scratch, True)
        out = os.path.join(scratch, "kernel.so")
        library = os.path.realpath(blitz.library_path)   # blz_fail comes from it
        done = subprocess.run([cc, "-std=c99", "-O2", "-shared", "-fPIC", "-o", out,
                               os.path.join(HERE, "ckernel.c"), library,
                               "-Wl,-rpath," + os.path.dirname(library)],
                              capture_output=True, text=True)
        if done.returncode != 0:
            _kernel_error = f"compiling ckernel.c failed: {done.stderr}"
            return None
        path = out
    lib = ctypes.CDLL(path)
    lib.blz_test_set_counts.argtypes = [ctypes.POINTER(ctypes.c_uint32), ctypes.c_size_t]
    lib.blz_test_set_counts.restype = None
    for name in ("blz_test_nonnull_args", "blz_test_out_of_range", "blz_test_rendezvous_met"):
        getattr(lib, name).argtypes = []
        getattr(lib, name).restype = ctypes.c_uint32
    lib.blz_test_rendezvous_reset.argtypes = [ctypes.c_uint32]
    lib.blz_test_rendezvous_reset.restype = None
    lib.blz_test_release.argtypes = [ctypes.c_uint32]
    lib.blz_test_release.restype = None
    _kernel = lib
    return lib


def kernel_skip_reason():
    kernel()
    return _kernel_error or "no C test kernel"


def subprocess_env(**changes):
    """os.environ with PYTHONPATH leading to this checkout's package, plus changes
    (a value of None removes the variable)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (PACKAGE_PARENT, env.get("PYTHONPATH")) if p)
    for key, value in changes.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


class HandleCounter:
    """Stands in for the library in blitz's runtime module (both views of
    it: the one that releases the GIL and the one that keeps it), passes
    every call on, and counts the blz_task handles the C calls create
    (blz_spawn_ex with an out_task that succeeds) and free (blz_task_detach
    that succeeds; blz_task_wait_for and blz_join unless they answer
    BLZ_ETIMEDOUT, BLZ_EINVAL or BLZ_EDEADLK: then nothing changed).
    Independent of the binding's own bookkeeping."""

    KEEPS = (blitz.BLZ_ETIMEDOUT, blitz.BLZ_EINVAL, blitz.BLZ_EDEADLK)

    def __init__(self, lib):
        self._lib = lib
        self._lock = threading.Lock()
        self.created = 0
        self.freed = 0

    def __getattr__(self, name):
        return getattr(self._lib, name)

    def _count(self, created=0, freed=0):
        with self._lock:
            self.created += created
            self.freed += freed

    def blz_spawn_ex(self, pool, fn, arg, options, out_task):
        status = self._lib.blz_spawn_ex(pool, fn, arg, options, out_task)
        if status == blitz.BLZ_OK and out_task:
            self._count(created=1)
        return status

    def blz_task_detach(self, task):
        status = self._lib.blz_task_detach(task)
        if status == blitz.BLZ_OK:
            self._count(freed=1)
        return status

    def blz_task_wait_for(self, task, timeout_ns):
        status = self._lib.blz_task_wait_for(task, timeout_ns)
        if status not in self.KEEPS:
            self._count(freed=1)
        return status

    def blz_join(self, task):
        status = self._lib.blz_join(task)
        if status not in self.KEEPS:
            self._count(freed=1)
        return status

    @property
    def live(self):
        """Handles created and not freed yet."""
        with self._lock:
            return self.created - self.freed


@contextlib.contextmanager
def counting_handles():
    """Counts blz_task handles while the block runs (see HandleCounter)."""
    from blitz import _runtime
    real = _runtime._lib, _runtime._held
    counter = HandleCounter(real[0])
    _runtime._lib, _runtime._held = counter, _SharedCount(real[1], counter)
    try:
        yield counter
    finally:
        _runtime._lib, _runtime._held = real


class _SharedCount(HandleCounter):
    """The GIL-keeping view, counting into the same HandleCounter."""

    def __init__(self, lib, counter):
        super().__init__(lib)
        self._counter = counter

    def _count(self, created=0, freed=0):
        self._counter._count(created, freed)


def records_of(pool_or_executor):
    """The tasks of a pool or executor that C may still call back for: [] once all are done."""
    from blitz import _runtime
    runtime = pool_or_executor._runtime
    return [r for r in list(_runtime._callbacks.values())
            if getattr(r, "_runtime", None) is runtime]


def _header_text():
    """blitz.h without comments and preprocessor lines, or None outside a checkout."""
    if not os.path.isfile(HEADER):
        return None
    with open(HEADER) as f:
        text = re.sub(r"/\*.*?\*/", " ", f.read(), flags=re.S)
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))


# The inline fork path of blitz.h (blz_fork_*_v1): what C++ and Rust code
# compiled against the header calls from its own join; Python forks
# through blz_fork_join, so the binding does not declare them.
INLINE_FORK_PATH = re.compile(r"blz_fork_\w+_v\d+$")


def header_functions():
    """{name: (returns void, number of parameters)} of every BLZ_API function in
    blitz.h, but those of the inline fork path."""
    prototypes = header_prototypes()
    if prototypes is None:
        return None
    return {name: (returns == "void", len(params)) for name, (returns, params) in prototypes.items()}


def header_prototypes():
    """{name: (return type, [parameter types])} of every BLZ_API function in
    blitz.h but the inline fork path's, each type as written ("const
    blz_pool *"), with the parameter names dropped."""
    text = _header_text()
    if text is None:
        return None
    prototypes = {}
    for returns, name, params in re.findall(r"BLZ_API\s+([^;()]*?)\b(blz_\w+)\s*\(([^)]*)\)\s*;", text):
        if INLINE_FORK_PATH.match(name):
            continue
        types = [_without_name(p) for p in params.split(",") if p.strip() not in ("", "void")]
        prototypes[name] = (" ".join(returns.split()), types)
    return prototypes


def header_struct_types(name):
    """[(field, type as written)] of `typedef struct name {...} name;` in blitz.h."""
    text = _header_text()
    if text is None:
        return None
    body = re.search(r"typedef\s+struct\s+%s\s*\{(.*?)\}\s*%s\s*;" % (name, name), text, re.S)
    return [(re.search(r"(\w+)\s*$", f).group(1), _without_name(f))
            for f in body.group(1).split(";") if f.strip()]


def header_status_codes():
    """{name: value} of enum blz_status_code in blitz.h."""
    text = _header_text()
    if text is None:
        return None
    body = re.search(r"enum\s+blz_status_code\s*\{(.*?)\}", text, re.S).group(1)
    return {name: int(value) for name, value in re.findall(r"(BLZ_\w+)\s*=\s*(-?\d+)", body)}


def _without_name(declaration):
    """"const blz_pool *pool" -> "const blz_pool *"; "uint32_t n" -> "uint32_t"."""
    words = declaration.replace("*", " * ").split()
    return " ".join(words[:-1]).replace(" *", "*").replace("*", " *").replace("* *", "**").strip()


def header_struct_fields(name):
    """The field names of `typedef struct name {...} name;` in blitz.h, in order."""
    text = _header_text()
    if text is None:
        return None
    body = re.search(r"typedef\s+struct\s+%s\s*\{(.*?)\}\s*%s\s*;" % (name, name), text, re.S)
    return re.findall(r"(\w+)\s*;", body.group(1))
