"""The package's build backend (PEP 517, PEP 660), in the tree: pip needs
nothing else to build blitz, neither setuptools nor wheel, and so no
network either (`pip install --no-build-isolation ./bindings/python` works
with any python3 that has pip, 3.8 or later).

A wheel holds the blitz package, and a libblitz.so bundled as
blitz/libblitz.so.0 when one is at hand: the file $BLITZ_LIBRARY names,
else the checkout's build/libblitz.so when this directory is
<repo>/bindings/python (`./dev build` first). `import blitz` loads it
first after $BLITZ_LIBRARY. A wheel with a bundled library is tagged for
this platform (py3-none-linux_x86_64, say), since it holds machine code;
without one it is py3-none-any and loads an installed libblitz.
"""
import base64
import hashlib
import importlib.util
import io
import os
import re
import sysconfig
import tarfile
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
NAME = "blitz"
SUMMARY = "Python binding of libblitz, a work-stealing thread pool (ctypes, no compiled extension)"


def _version():
    """blitz.__version__, read without importing the package (which loads the library)."""
    with open(os.path.join(HERE, NAME, "__init__.py"), encoding="utf-8") as f:
        return re.search(r'^__version__ = "([^"]+)"', f.read(), re.M).group(1)


def _loader():
    spec = importlib.util.spec_from_file_location("blitz_loader", os.path.join(HERE, NAME, "_loader.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def library_to_bundle():
    """$BLITZ_LIBRARY if set, else the checkout's build/libblitz.so; None if not a file."""
    loader = _loader()
    library = os.environ.get(loader.ENV_VAR) or loader.checkout_library()
    return os.path.realpath(library) if library and os.path.isfile(library) else None


def _package_files():
    """(path in the archive, path on disk) of the package's sources."""
    package = os.path.join(HERE, NAME)
    for name in sorted(os.listdir(package)):
        if name.endswith(".py") or name == "py.typed":
            yield f"{NAME}/{name}", os.path.join(package, name)


def _metadata(version):
    with open(os.path.join(HERE, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    return (f"Metadata-Version: 2.1\nName: {NAME}\nVersion: {version}\nSummary: {SUMMARY}\n"
            "License: MIT\nRequires-Python: >=3.8\n"
            "Classifier: Programming Language :: Python :: 3\n"
            "Classifier: Operating System :: POSIX :: Linux\n"
            f"Description-Content-Type: text/markdown\n\n{readme}")


def _tag(library):
    if library is None:
        return "py3-none-any"
    return "py3-none-" + re.sub(r"[^A-Za-z0-9]", "_", sysconfig.get_platform())


class _Wheel:
    """A wheel being written: each file's hash goes into RECORD."""

    def __init__(self, path, dist_info):
        self.zip = zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED)
        self.dist_info = dist_info
        self.records = []

    def add(self, arcname, data, mode=0o644):
        info = zipfile.ZipInfo(arcname, date_time=(2026, 1, 1, 0, 0, 0))
        info.external_attr = (0o100000 | mode) << 16
        info.compress_type = zipfile.ZIP_DEFLATED
        self.zip.writestr(info, data)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        self.records.append(f"{arcname},sha256={digest},{len(data)}")

    def close(self):
        record = f"{self.dist_info}/RECORD"
        self.records.append(f"{record},,")
        self.zip.writestr(record, "\n".join(self.records) + "\n")
        self.zip.close()


def _build(wheel_directory, metadata_directory, editable):
    version = _version()
    library = None if editable else library_to_bundle()
    tag = _tag(library)
    dist_info = f"{NAME}-{version}.dist-info"
    filename = f"{NAME}-{version}-{tag}.whl"
    wheel = _Wheel(os.path.join(wheel_directory, filename), dist_info)
    if editable:   # the source directory goes on sys.path; the library comes as without installing
        wheel.add(f"__editable__.{NAME}.pth", (HERE + "\n").encode())
    else:
        for arcname, path in _package_files():
            with open(path, "rb") as f:
                wheel.add(arcname, f.read())
        if library is not None:
            print(f"blitz: bundling {library} as {NAME}/libblitz.so.0")
            with open(library, "rb") as f:
                wheel.add(f"{NAME}/libblitz.so.0", f.read(), 0o755)
        else:
            print("blitz: no libblitz.so to bundle; the package will load an installed one")
    wheel.add(f"{dist_info}/METADATA", _metadata(version).encode())
    wheel.add(f"{dist_info}/WHEEL", (f"Wheel-Version: 1.0\nGenerator: {NAME} _blitz_build\n"
                                     f"Root-Is-Purelib: {'true' if library is None else 'false'}\n"
                                     f"Tag: {tag}\n").encode())
    wheel.add(f"{dist_info}/top_level.txt", f"{NAME}\n".encode())
    wheel.close()
    return filename


# ---- the PEP 517 and PEP 660 hooks

def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    return _build(wheel_directory, metadata_directory, editable=False)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    return _build(wheel_directory, metadata_directory, editable=True)


def build_sdist(sdist_directory, config_settings=None):
    version = _version()
    base = f"{NAME}-{version}"
    filename = f"{base}.tar.gz"
    files = [(arcname, path) for arcname, path in _package_files()]
    files += [(name, os.path.join(HERE, name)) for name in ("pyproject.toml", "_blitz_build.py", "README.md")]
    with tarfile.open(os.path.join(sdist_directory, filename), "w:gz", format=tarfile.PAX_FORMAT) as tar:
        for arcname, path in files:
            tar.add(path, arcname=f"{base}/{arcname}")
        data = _metadata(version).encode()
        info = tarfile.TarInfo(f"{base}/PKG-INFO")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return filename
