#!/usr/bin/env python3
"""Checks that `pip install --no-build-isolation` installs a working blitz, offline.

Usage: check_install.py BINDINGS_DIR LIBBLITZ_PATH

Copies BINDINGS_DIR (so the source tree gets no build/ or egg-info), makes
a venv with --system-site-packages (pip, setuptools and wheel come from the
system), installs the copy with BLITZ_LIBRARY naming the library to bundle,
then imports blitz from the venv, outside the checkout and with no
BLITZ_LIBRARY: it must load the bundled copy and run a pool.

Exits 77 (meson's "skipped") when no interpreter has pip, setuptools and wheel.
"""
import os
import shutil
import subprocess
import sys
import tempfile

SKIP = 77
TOOLS_CHECK = (
    "import setuptools, pip  # setuptools first: Debian's distutils hack\n"
    "major, minor = (int(x) for x in setuptools.__version__.split('.')[:2])\n"
    "if (major, minor) < (70, 1):\n"
    "    import wheel  # older setuptools builds wheels with it\n"
)
SMOKE = (
    "import blitz, os, sys\n"
    "assert blitz.library_path.startswith(sys.prefix), blitz.library_path\n"
    "with blitz.Pool(2) as pool:\n"
    "    assert pool.map(abs, [-1, -2, 3]) == [1, 2, 3]\n"
    "    assert pool.spawn(pow, 2, 10).result() == 1024\n"
    "print('installed blitz', blitz.__version__, 'with libblitz', blitz.library_version(),"
    " 'from', blitz.library_path)\n"
)


def run(cmd, **kwargs):
    print("+", " ".join(cmd), flush=True)
    return subprocess.run(cmd, **kwargs)


def pick_python():
    """The first interpreter (this one, then Debian's) with pip, setuptools and wheel."""
    candidates = []
    for python in (sys.executable, "/usr/bin/python3"):
        if python and os.path.exists(python) and python not in candidates:
            candidates.append(python)
    for python in candidates:
        if subprocess.run([python, "-c", TOOLS_CHECK], capture_output=True).returncode == 0:
            return python
    return None


def main(bindings_dir, library):
    python = pick_python()
    if python is None:
        print("skipped: no python3 with pip, setuptools and wheel "
              "(apt-get install python3-pip python3-setuptools python3-wheel)")
        return SKIP
    with tempfile.TemporaryDirectory(prefix="blitz-install-") as tmp:
        source = os.path.join(tmp, "src")
        shutil.copytree(bindings_dir, source, ignore=shutil.ignore_patterns(
            "build", "dist", "*.egg-info", "__pycache__", "libblitz.so*"))
        venv = os.path.join(tmp, "venv")
        # --without-pip: the system's pip runs inside the venv, no ensurepip needed.
        if run([python, "-m", "venv", "--system-site-packages", "--without-pip", venv]).returncode:
            print("skipped: python3 -m venv failed (apt-get install python3-venv)")
            return SKIP
        venv_python = os.path.join(venv, "bin", "python")
        env = dict(os.environ, BLITZ_LIBRARY=library, PIP_NO_INDEX="1",
                   PIP_DISABLE_PIP_VERSION_CHECK="1")
        env.pop("PYTHONPATH", None)
        done = run([venv_python, "-m", "pip", "install", "--no-build-isolation", "--no-index",
                    "--no-deps", source], env=env, cwd=tmp)
        if done.returncode:
            print("FAILED: pip install")
            return 1
        env.pop("BLITZ_LIBRARY")
        done = run([venv_python, "-c", SMOKE], env=env, cwd=tmp)
        if done.returncode:
            print("FAILED: the installed package does not work")
            return 1
    print("ok: pip install --no-build-isolation works offline")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sys.exit(main(os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])))
