"""Packaging hook: metadata lives in pyproject.toml.

When a libblitz.so is at hand at build time it is bundled into the package
(as blitz/libblitz.so.0), which `import blitz` then loads first after
$BLITZ_LIBRARY: the one named by $BLITZ_LIBRARY, else the checkout's
build/libblitz.so when this directory is <repo>/bindings/python (so
`./dev build && pip install --no-build-isolation ./bindings/python` gives a
self-contained install). Without one the package loads an installed
libblitz (ctypes.util.find_library). A wheel with a bundled library is
tagged for this platform (py3-none-linux_x86_64, say), since it holds
machine code; without one it is py3-none-any.
"""
import importlib.util
import os
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py

try:  # setuptools 70.1 and later ship their own; before, the wheel package's
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:
    from wheel.bdist_wheel import bdist_wheel

HERE = os.path.dirname(os.path.abspath(__file__))


def _loader():
    """blitz/_loader.py alone: importing the package would load the library."""
    spec = importlib.util.spec_from_file_location(
        "blitz_loader", os.path.join(HERE, "blitz", "_loader.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


LOADER = _loader()


def library_to_bundle():
    """$BLITZ_LIBRARY if set, else the checkout's build/libblitz.so; None if not a file."""
    library = os.environ.get(LOADER.ENV_VAR) or LOADER.checkout_library()
    return library if library and os.path.isfile(library) else None


class BuildPyBundlingLibblitz(build_py):
    def run(self):
        super().run()
        library = library_to_bundle()
        if library is None:
            print("blitz: no libblitz.so to bundle; the package will load an installed one")
            return
        target = os.path.join(self.build_lib, "blitz", "libblitz.so.0")
        print(f"blitz: bundling {os.path.realpath(library)} as {target}")
        shutil.copyfile(os.path.realpath(library), target)


class BdistWheelTaggedForTheLibrary(bdist_wheel):
    def finalize_options(self):
        super().finalize_options()
        self.root_is_pure = library_to_bundle() is None

    def get_tag(self):
        python, abi, platform = super().get_tag()
        if self.root_is_pure:
            return python, abi, platform
        return "py3", "none", platform  # machine code, but no Python C API used


setup(cmdclass={"build_py": BuildPyBundlingLibblitz, "bdist_wheel": BdistWheelTaggedForTheLibrary})
