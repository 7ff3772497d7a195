"""Loading libblitz (in fresh interpreters) and closing pools at exit."""
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import unittest

import support
import blitz

PLACES = ["$BLITZ_LIBRARY", "package directory", "checkout build directory",
          'ctypes.util.find_library("blitz")']


def run_python(code, cwd=None, **env_changes):
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=300, cwd=cwd, env=support.subprocess_env(**env_changes))


class TestLoading(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="blitz-loading-")
        self.addCleanup(shutil.rmtree, self.tmp, True)

    def copy_package(self):
        """A copy of the package outside any checkout; returns its parent directory."""
        shutil.copytree(os.path.join(support.PACKAGE_PARENT, "blitz"),
                        os.path.join(self.tmp, "blitz"),
                        ignore=shutil.ignore_patterns("__pycache__", "libblitz.so*"))
        return self.tmp

    def copy_library(self, *path):
        """A copy of the loaded library at self.tmp/path; returns its path."""
        target = os.path.join(self.tmp, *path)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copyfile(os.path.realpath(blitz.library_path), target)
        return target

    def fake_checkout(self):
        """A copy of the package in a fake checkout, with a copy of the library
        in the package directory and in the build directory. Returns the
        package's parent directory and the two copies."""
        package_parent = os.path.join(self.tmp, "repo", "bindings", "python")
        shutil.copytree(os.path.join(support.PACKAGE_PARENT, "blitz"),
                        os.path.join(package_parent, "blitz"),
                        ignore=shutil.ignore_patterns("__pycache__", "libblitz.so*"))
        os.makedirs(os.path.join(self.tmp, "repo", "include"))
        open(os.path.join(self.tmp, "repo", "include", "blitz.h"), "w").close()
        bundled = self.copy_library("repo", "bindings", "python", "blitz", "libblitz.so.0")
        built = self.copy_library("repo", "build", "libblitz.so")
        return package_parent, bundled, built

    def test_explicit_path_that_does_not_load_is_an_error(self):
        # Even with the library in the other places: $BLITZ_LIBRARY is a choice.
        package_parent, _, _ = self.fake_checkout()
        missing = os.path.join(self.tmp, "nowhere", "libblitz.so")
        not_a_library = os.path.join(self.tmp, "libblitz.so")
        with open(not_a_library, "w") as f:
            f.write("not ELF")
        for path in (missing, not_a_library):
            with self.subTest(path=path):
                done = run_python("import blitz", cwd=self.tmp, BLITZ_LIBRARY=path,
                                  PYTHONPATH=package_parent)
                self.assertNotEqual(done.returncode, 0)
                self.assertIn("ImportError", done.stderr)
                self.assertIn(f"$BLITZ_LIBRARY: {path}", done.stderr)

    def test_library_inside_the_package_directory(self):
        parent = self.copy_package()
        bundled = os.path.join(parent, "blitz", "libblitz.so.0")
        shutil.copyfile(os.path.realpath(blitz.library_path), bundled)
        done = run_python("""
            import blitz
            with blitz.Pool(1) as pool:
                assert pool.call(lambda: 6 * 7) == 42
            print(blitz.library_path)
            """, cwd=parent, BLITZ_LIBRARY=None, PYTHONPATH=parent)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(done.stdout.strip(), bundled)

    def test_error_lists_every_place_tried(self):
        parent = self.copy_package()
        # (meson's LD_LIBRARY_PATH would let find_library find the build's copy)
        done = run_python("import blitz; print(blitz.library_path)", cwd=parent,
                          BLITZ_LIBRARY=None, PYTHONPATH=parent, LD_LIBRARY_PATH=None)
        if done.returncode == 0:
            self.skipTest(f"an installed libblitz ({done.stdout.strip()}) leaves no error to check")
        for place in PLACES:
            self.assertIn(place, done.stderr)
        self.assertIn("not inside a libblitz checkout", done.stderr)
        self.assertIn(os.path.join(parent, "blitz", "libblitz.so*"), done.stderr)

    def test_the_places_in_order(self):
        # A copy of the library in each of the first three places; removing
        # them one at a time shows which comes first (find_library, the
        # fourth, has its own test).
        package_parent, bundled, built = self.fake_checkout()
        from_env = self.copy_library("env", "libblitz.so.0")
        for expected, env_value in ((from_env, from_env), (bundled, None), (built, None)):
            with self.subTest(expected=expected):
                done = run_python("import blitz; print(blitz.library_path)", cwd=self.tmp,
                                  BLITZ_LIBRARY=env_value, PYTHONPATH=package_parent)
                self.assertEqual(done.returncode, 0, done.stderr)
                self.assertEqual(done.stdout.strip(), expected)
            if env_value is None:
                os.remove(expected)   # the next place's turn

    def test_installed_library_found_by_find_library(self):
        parent = self.copy_package()
        self.copy_library("lib", "libblitz.so")           # the link name, for find_library
        libdir = os.path.dirname(self.copy_library("lib", "libblitz.so.0"))   # the soname, for dlopen
        done = run_python("""
            import ctypes.util
            if ctypes.util.find_library("blitz") is None:
                print("unsupported")
            else:
                import blitz
                print(blitz.library_path)
            """, cwd=parent, BLITZ_LIBRARY=None, PYTHONPATH=parent, LD_LIBRARY_PATH=libdir)
        self.assertEqual(done.returncode, 0, done.stderr)
        if done.stdout.strip() == "unsupported":
            self.skipTest("this find_library does not search LD_LIBRARY_PATH (no gcc or ld)")
        self.assertEqual(done.stdout.strip(), os.path.join(libdir, "libblitz.so.0"))

    def test_checkout_build_directory(self):
        built = os.path.join(support.REPO, "build", "libblitz.so")
        done = run_python("import blitz; print(blitz.library_path)", BLITZ_LIBRARY=None,
                          LD_LIBRARY_PATH=None)
        if os.path.isfile(built):
            self.assertEqual(done.returncode, 0, done.stderr)
            self.assertEqual(done.stdout.strip(), built)
        else:  # nothing built in <repo>/build: the place was tried all the same
            self.assertIn(built, done.stdout + done.stderr)


class TestPackage(unittest.TestCase):
    def test_aio_comes_with_the_package(self):
        # The README's `import blitz` ... `blitz.aio.parallel_for(...)`, in a
        # fresh interpreter (here another test may have imported blitz.aio).
        done = run_python("import blitz; print(blitz.aio.parallel_for.__qualname__)")
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(done.stdout.strip(), "parallel_for")


class TestExit(unittest.TestCase):
    def test_open_pools_are_closed_at_exit(self):
        # The report handler is registered before blitz is imported, so it runs
        # after blitz's own atexit handler has closed the pools.
        done = run_python("""
            import atexit, threading, time
            finished = []
            def report():
                print("finished", len(finished))
                try:
                    import blitz
                    blitz.Pool(1)
                except RuntimeError as exc:
                    print("late pool refused")
            atexit.register(report)

            import blitz
            pool = blitz.Pool(2)
            blitz.Pool(1)                      # not even referenced
            for i in range(50):
                pool.spawn(lambda i=i: (time.sleep(0.002), finished.append(i)))
            kept = pool.spawn(time.sleep, 0.01)
            print("exiting")
            """)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(done.stdout.split("\n")[:3], ["exiting", "finished 50", "late pool refused"])
        self.assertNotIn("Fatal", done.stderr)
        self.assertEqual(done.stderr, "")

    def test_exit_while_a_thread_waits_on_a_pool(self):
        # A daemon thread still blocked in pool.call at exit: the atexit
        # handler's close waits for that call, then the interpreter exits.
        done = run_python("""
            import threading, time
            import blitz
            pool = blitz.Pool(1)
            started = threading.Event()
            def slow():
                started.set()
                time.sleep(0.05)
                return 1
            threading.Thread(target=lambda: print("call", pool.call(slow), flush=True), daemon=True).start()
            started.wait()
            """)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertNotIn("Fatal", done.stderr)


if __name__ == "__main__":
    unittest.main()
