#!/usr/bin/env python3
"""Runs a Python script so that it can load a sanitized libblitz.

Usage: preload.py SCRIPT [ARGS...]   (the library is $BLITZ_LIBRARY)

A libblitz built with -Db_sanitize (./dev test --sanitize ...) needs the
sanitizer's runtime loaded before anything else, which an interpreter
built without it does not do: ASan refuses to start ("runtime does not
come first"), TSan cannot place its thread-local storage. So when the
library links such runtimes (ldd lists libasan, libubsan, libtsan), this
runs the script with them in LD_PRELOAD, plus the options a Python
process needs: no leak report at exit (the interpreter frees little on
purpose) and threads allowed after fork (a test forks). Otherwise it just
runs the script. Meson runs the binding's tests and the Python examples
through it.

The script runs in this interpreter binary (sys.executable), never through
a shell wrapper: bash itself crashes with libtsan preloaded.
"""
import os
import re
import subprocess
import sys

RUNTIME = re.compile(r"^\s*(lib(?:asan|ubsan|tsan|lsan)\.so\S*)\s+=>\s+(\S+)", re.MULTILINE)
OPTIONS = {"ASAN_OPTIONS": "detect_leaks=0", "TSAN_OPTIONS": "die_after_fork=0"}


def sanitizer_runtimes(library):
    """The sanitizer runtimes the library links, as ldd resolves them."""
    if not library or not os.path.isfile(library):
        return []
    done = subprocess.run(["ldd", library], capture_output=True, text=True)
    return [path for _, path in RUNTIME.findall(done.stdout)]


def main(argv):
    if not argv:
        sys.exit(__doc__)
    env = dict(os.environ)
    runtimes = sanitizer_runtimes(env.get("BLITZ_LIBRARY"))
    if runtimes:
        env["LD_PRELOAD"] = " ".join(runtimes + env.get("LD_PRELOAD", "").split())
        for name, option in OPTIONS.items():
            env[name] = ":".join(filter(None, (env.get(name), option)))
    os.execve(sys.executable, [sys.executable, *argv], env)


if __name__ == "__main__":
    main(sys.argv[1:])
