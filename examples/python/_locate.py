"""Lets the examples run from a checkout: imports this checkout's blitz
package (which finds libblitz.so as always: $BLITZ_LIBRARY, the package
directory, <repo>/build, an installed one) and finds the example kernel."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
_BINDINGS = os.path.join(REPO, "bindings", "python")
if os.path.isdir(os.path.join(_BINDINGS, "blitz")) and _BINDINGS not in sys.path:
    sys.path.insert(0, _BINDINGS)

KERNEL_NAME = "blitz_example_kernel.so"


def kernel_path():
    """$BLITZ_EXAMPLE_KERNEL, else the build directory's examples/python/ (build/ or $BUILD_DIR)."""
    env = os.environ.get("BLITZ_EXAMPLE_KERNEL")
    if env:
        return env
    tried = []
    for build in dict.fromkeys([os.environ.get("BUILD_DIR") or "build", "build"]):
        path = os.path.join(REPO, build, "examples", "python", KERNEL_NAME)
        if os.path.isfile(path):
            return path
        tried.append(path)
    sys.exit("cannot find the example kernel; build it (./dev build) or set "
             "BLITZ_EXAMPLE_KERNEL. Tried: " + ", ".join(tried))
