#!/usr/bin/env python3
"""Runs a program that is not sanitized against a sanitized libblitz.

Usage: sanitizer_preload.py LIBRARY COMMAND [ARGS...]
       sanitizer_preload.py LIBRARY --python SCRIPT [ARGS...]
                                 runs SCRIPT in this interpreter's binary
       sanitizer_preload.py --sanitized LIBRARY   prints the sanitizer runtimes
                                 LIBRARY links, one per line, and exits 0;
                                 exits 1 if it links none

A libblitz built with -Db_sanitize (./dev test --sanitize ...) needs the
sanitizer's runtime loaded before anything else, which a host built
without it (the Python interpreter, the JVM, a Rust test binary) does not
do: ASan refuses to start ("runtime does not come first"), TSan cannot
place its thread-local storage ("cannot allocate memory in static TLS
block"). So when LIBRARY links such runtimes (ldd lists libasan, libubsan,
libtsan), COMMAND runs with them in LD_PRELOAD, plus what a foreign host
process needs: no leak report at exit (the host's own allocations are not
ours to judge, and an interpreter or a JVM frees little on purpose; leaks
of libblitz are checked by its own tests under LeakSanitizer) and threads
allowed after fork (tests fork). Otherwise COMMAND runs unchanged.

COMMAND is executed directly (execvp), never through a shell: bash itself
crashes with libtsan preloaded. For the same reason a Python script runs
in sys.executable (--python): the python3 on PATH may be a shell shim
(pyenv's is). Used by the Python binding's tests and
examples, the Rust binding's tests (as cargo's runner) and the JNI example.
"""
import os
import re
import subprocess
import sys

RUNTIME = re.compile(r"^\s*(lib(?:asan|ubsan|tsan|lsan)\.so\S*)\s+=>\s+(\S+)", re.MULTILINE)
OPTIONS = {"ASAN_OPTIONS": "detect_leaks=0", "TSAN_OPTIONS": "die_after_fork=0"}


def sanitizer_runtimes(library):
    """The sanitizer runtimes the library links, as ldd resolves them."""
    if not os.path.isfile(library):
        sys.exit(f"sanitizer_preload.py: {library}: no such file")
    done = subprocess.run(["ldd", library], capture_output=True, text=True, check=False)
    return [path for _, path in RUNTIME.findall(done.stdout)]


def main(argv):
    if len(argv) < 2:
        sys.exit(__doc__)
    if argv[0] == "--sanitized":
        runtimes = sanitizer_runtimes(argv[1])
        print("\n".join(runtimes))
        sys.exit(0 if runtimes else 1)
    library, command = argv[0], argv[1:]
    if command[0] == "--python":
        command = [sys.executable, *command[1:]]
    env = dict(os.environ)
    runtimes = sanitizer_runtimes(library)
    if runtimes:
        env["LD_PRELOAD"] = " ".join(runtimes + env.get("LD_PRELOAD", "").split())
        for name, option in OPTIONS.items():
            env[name] = ":".join(filter(None, (env.get(name), option)))
    os.execvpe(command[0], command, env)


if __name__ == "__main__":
    main(sys.argv[1:])
