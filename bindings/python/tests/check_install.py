#!/usr/bin/env python3
"""Checks that the README's install works offline, with each interpreter.

Usage: check_install.py BINDINGS_DIR LIBBLITZ_PATH

For the python3 running this script (the first on PATH when meson runs it)
and for Debian's /usr/bin/python3: copies BINDINGS_DIR (so the source tree
gets no build output), runs the README's two commands

    python3 -m venv --system-site-packages .venv
    .venv/bin/pip install --no-build-isolation ./bindings/python

with no package index and BLITZ_LIBRARY naming the library to bundle,
then imports blitz from the venv, outside the checkout and with no
BLITZ_LIBRARY: it must load the bundled copy and run an executor. The
build needs neither setuptools nor wheel (the package's own backend,
_blitz_build.py). An interpreter that is not there is left out; none at
all is a failure.
"""
import os
import shutil
import subprocess
import sys
import tempfile

SMOKE = (
    "import blitz, sys\n"
    "assert blitz.library_path.startswith(sys.prefix), blitz.library_path\n"
    "with blitz.Executor(2) as executor:\n"
    "    assert list(executor.map(abs, [-1, -2, 3])) == [1, 2, 3]\n"
    "    assert executor.submit(pow, 2, 10).result() == 1024\n"
    "print('installed blitz', blitz.__version__, 'with libblitz', blitz.library_version(),"
    " 'from', blitz.library_path, 'for', sys.version.split()[0])\n"
)


def run(cmd, **kwargs):
    print("+", " ".join(cmd), flush=True)
    return subprocess.run(cmd, **kwargs).returncode == 0


def interpreters():
    found = []
    for python in (sys.executable, "/usr/bin/python3"):
        if os.path.exists(python) and os.path.realpath(python) not in map(os.path.realpath, found):
            found.append(python)
    return found


def check(python, bindings_dir, library):
    with tempfile.TemporaryDirectory(prefix="blitz-install-") as tmp:
        source = os.path.join(tmp, "bindings", "python")
        shutil.copytree(bindings_dir, source, ignore=shutil.ignore_patterns(
            "build", "dist", "*.egg-info", "__pycache__", "libblitz.so*"))
        env = dict(os.environ, BLITZ_LIBRARY=library, PIP_NO_INDEX="1",
                   PIP_DISABLE_PIP_VERSION_CHECK="1")
        env.pop("PYTHONPATH", None)
        venv_python = os.path.join(tmp, ".venv", "bin", "python")
        if not (run([python, "-m", "venv", "--system-site-packages", ".venv"], env=env, cwd=tmp)
                and run([os.path.join(tmp, ".venv", "bin", "pip"), "install", "--no-build-isolation",
                         "./bindings/python"], env=env, cwd=tmp)):
            return "the README's install commands failed"
        env.pop("BLITZ_LIBRARY")
        if not run([venv_python, "-c", SMOKE], env=env, cwd=tmp):
            return "the installed package does not work"
    return None


def main(bindings_dir, library):
    failures = {}
    pythons = interpreters()
    for python in pythons:
        failure = check(python, bindings_dir, library)
        if failure:
            failures[python] = failure
    for python, failure in failures.items():
        print(f"FAILED with {python}: {failure}")
    if not pythons:
        print("FAILED: no interpreter to check")
        return 1
    if failures:
        return 1
    print("ok: pip install --no-build-isolation works offline with", ", ".join(pythons))
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sys.exit(main(os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])))
