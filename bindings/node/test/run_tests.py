#!/usr/bin/env python3
"""The Node binding's meson tests (suite 'node').

    run_tests.py suite   NODE LIBBLITZ NODE_DIR   node --test on NODE_DIR/test/*.test.mjs
    run_tests.py install NODE LIBBLITZ NODE_DIR   npm install --install-links, offline
    run_tests.py skip    REASON                   prints the reason, exits 77

Each ends with the line tools/test_summary.py counts, "node: N passed, M
failed" (or "node_install: ..."), and exits 77 (meson's "skipped") with
the reason when it cannot run here.

Sanitizers: node is not instrumented, so against a libblitz built with
-Db_sanitize every node process runs through tools/sanitizer_preload.py
($SANITIZER_PRELOAD), which puts the sanitizer runtimes into LD_PRELOAD
(and their options into the environment, which node's own child processes
and worker_threads inherit). AddressSanitizer and UBSan work that way.
Under ThreadSanitizer both tests are skipped: node starts, but TSan cannot
see the synchronization inside the uninstrumented node binary and reports
races there, in every test file (seen with Node 20.20:
v8::platform::DefaultJobState's mutex destroyed while "used" by a V8
worker, node::worker::MessagePort::PostMessage freeing a message the main
thread read). Suppressing by module would hide our own races too, since
every loop-thread stack passes through node's frames. The same reason
skips the Rust binding's tests there. npm and the C compiler it runs are
never preloaded: they load no libblitz.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

SKIP = 77
TIMEOUT = 270  # below meson's 300 s


def preload_command(library):
    """The prefix that runs a program against LIBRARY: the preloader, or nothing."""
    preload = os.environ.get("SANITIZER_PRELOAD")
    if not preload:
        return [], []
    done = subprocess.run([sys.executable, preload, "--sanitized", library], capture_output=True, text=True)
    runtimes = done.stdout.split() if done.returncode == 0 else []
    if not runtimes:
        return [], []
    return [sys.executable, preload, library], runtimes


TSAN_REASON = ("ThreadSanitizer cannot see the synchronization inside the uninstrumented node binary "
               "and reports races in V8 and node internals (v8::platform job threads, MessagePort)")


def run_suite(node, library, node_dir):
    prefix, runtimes = preload_command(library)
    if any("libtsan" in r for r in runtimes):
        print(f"node: skipped: {TSAN_REASON}")
        return SKIP
    if runtimes:
        print(f"node: sanitized libblitz: node runs with {', '.join(os.path.basename(r) for r in runtimes)} preloaded")
    test_dir = os.path.join(node_dir, "test")
    files = sorted(os.path.join(test_dir, f) for f in os.listdir(test_dir) if f.endswith(".test.mjs"))
    with tempfile.TemporaryDirectory(prefix="blitz-node-test-") as tmp:
        tap = os.path.join(tmp, "report.tap")
        command = prefix + [node, "--test",
                            "--test-reporter=spec", "--test-reporter-destination=stdout",
                            "--test-reporter=tap", f"--test-reporter-destination={tap}"] + files
        print("+", " ".join(command), flush=True)
        try:
            status = subprocess.run(command, cwd=node_dir, timeout=TIMEOUT).returncode
        except subprocess.TimeoutExpired:
            print(f"node: the suite did not finish in {TIMEOUT} s")
            status = -1
        text = open(tap).read() if os.path.exists(tap) else ""
    counts = {k: int(v) for k, v in re.findall(r"^# (pass|fail|cancelled|skipped|todo) (\d+)$", text, re.MULTILINE)}
    passed = counts.get("pass", 0)
    failed = counts.get("fail", 0) + counts.get("cancelled", 0)
    if status != 0 and failed == 0:
        failed = 1  # node --test died without a report (a crash, the timeout)
    if counts.get("skipped"):
        print(f"node: {counts['skipped']} skipped")
    print(f"node: {passed} passed, {failed} failed")
    return 0 if status == 0 and failed == 0 and passed > 0 else 1


SMOKE_CJS = r"""
const blitz = require('libblitz');
const zlib = require('node:zlib');
const path = require('node:path');
if (!blitz.addonPath.startsWith(path.join(process.cwd(), 'node_modules')))
  throw new Error('loaded the addon from ' + blitz.addonPath + ', not from the installed copy');
const pool = new blitz.Pool({ threads: 2 });
const bufs = [Buffer.from('libblitz'), Buffer.alloc(100000, 7)];
pool.crc32(bufs).then(async (crcs) => {
  const want = bufs.map((b) => zlib.crc32(b));
  if (JSON.stringify(crcs) !== JSON.stringify(want)) throw new Error(`crc32 ${crcs} != ${want}`);
  await pool.close();
  console.log('require: crc32 of 2 buffers matches zlib.crc32, libblitz', blitz.libraryVersion, 'from', blitz.addonPath);
});
"""

SMOKE_ESM = r"""
import { Pool, kernels, version } from 'libblitz';
const pool = new Pool({ threads: 1 });
const arg = new Uint8Array(4);
if ((await pool.run(kernels.noop, arg)) !== arg) throw new Error('run did not resolve to its arg');
const sorted = await pool.sort(Float64Array.from([3, -1, 2]));
if (sorted.join() !== '-1,2,3') throw new Error('sort: ' + sorted.join());
await pool.close();
console.log('import: run and sort work, package', version);
"""


def run_install(node, library, node_dir):
    npm = shutil.which("npm") or os.path.join(os.path.dirname(node), "npm")
    if not os.access(npm, os.X_OK):
        print("node_install: skipped: npm not found (Debian: apt-get install npm)")
        return SKIP
    prefix, runtimes = preload_command(library)
    if any("libtsan" in r for r in runtimes):
        print(f"node_install: skipped: {TSAN_REASON}")
        return SKIP
    lib_dir = os.path.dirname(os.path.abspath(library))
    checks = []
    with tempfile.TemporaryDirectory(prefix="blitz-npm-") as tmp:
        base = dict(os.environ, npm_config_cache=os.path.join(tmp, "npm-cache"), npm_config_update_notifier="false",
                    npm_config_fund="false", npm_config_audit="false", HOME=os.environ.get("HOME") or tmp)
        for name in ("BLITZ_NODE_ADDON", "BLITZ_NODE_TEST_KERNELS", "BLITZ_LIB_DIR", "BLITZ_INCLUDE_DIR", "LD_PRELOAD"):
            base.pop(name, None)

        # A fake checkout around a copy of the package: include/blitz.h,
        # meson.build and build/libblitz.so (a link to the library under
        # test), to check the third way of finding libblitz.
        checkout = os.path.join(tmp, "checkout")
        package = os.path.join(checkout, "bindings", "node")
        shutil.copytree(node_dir, package, ignore=shutil.ignore_patterns("build", "node_modules", "*.node"))
        os.makedirs(os.path.join(checkout, "include"))
        repo_include = os.path.join(os.path.dirname(os.path.dirname(node_dir)), "include", "blitz.h")
        shutil.copy(repo_include, os.path.join(checkout, "include", "blitz.h"))
        open(os.path.join(checkout, "meson.build"), "w").close()
        os.makedirs(os.path.join(checkout, "build"))
        os.symlink(os.path.abspath(library), os.path.join(checkout, "build", "libblitz.so"))

        # A meson build directory outside the source tree (meson setup
        # /elsewhere/build): libblitz.so and meson-info/, no include/ near
        # it and no checkout above it. Its meson-info.json is the real
        # one of the build under test, which names the real source tree.
        elsewhere = os.path.join(tmp, "elsewhere", "build")
        os.makedirs(os.path.join(elsewhere, "meson-info"))
        os.symlink(os.path.abspath(library), os.path.join(elsewhere, "libblitz.so"))
        shutil.copy(os.path.join(lib_dir, "meson-info", "meson-info.json"), os.path.join(elsewhere, "meson-info"))

        # (how, the package to install, its environment, what the install script prints)
        ways = [
            ("BLITZ_LIB_DIR", node_dir, dict(base, BLITZ_LIB_DIR=lib_dir), "(BLITZ_LIB_DIR)"),
            ("BLITZ_LIB_DIR of a build directory outside the source tree", node_dir,
             dict(base, BLITZ_LIB_DIR=elsewhere), "blitz.h from meson's source directory"),
            # No BLITZ_LIB_DIR, and pkg-config sees no installed blitz.pc.
            ("the checkout's build/", package,
             dict(base, PKG_CONFIG_LIBDIR=os.path.join(tmp, "no-pc"), PKG_CONFIG_PATH=""),
             f"(the checkout {checkout})"),
        ]
        for index, (label, source, env, marker) in enumerate(ways):
            project = os.path.join(tmp, f"app-{index}")
            os.makedirs(project)
            with open(os.path.join(project, "package.json"), "w") as f:
                f.write('{"name": "app", "version": "1.0.0", "private": true}\n')
            command = [npm, "install", "--offline", "--install-links", "--foreground-scripts", source]
            print("+", " ".join(command), f"(libblitz by {label})", flush=True)
            done = subprocess.run(command, cwd=project, env=env, timeout=240, stdout=subprocess.PIPE, text=True)
            print(done.stdout, end="", flush=True)
            ok = done.returncode == 0
            if ok and os.path.islink(os.path.join(project, "node_modules", "libblitz")):
                print("node_install: npm linked the package instead of copying it")
                ok = False
            installed = os.path.join(project, "node_modules", "libblitz", "build", "blitz_node.node")
            ok = ok and os.path.exists(installed)
            if ok and marker not in done.stdout:
                print(f"node_install: the install script did not find libblitz by {label} (no '{marker}' above)")
                ok = False
            checks.append((f"npm install --install-links, libblitz by {label}", ok))
            if not ok:
                continue
            smoke_env = dict(base)
            for script, flag in ((SMOKE_CJS, "--input-type=commonjs"), (SMOKE_ESM, "--input-type=module")):
                done = subprocess.run(prefix + [node, flag, "-e", script], cwd=project, env=smoke_env, timeout=60)
                checks.append((f"  {flag.split('=')[1]} from the installed package", done.returncode == 0))
    passed = sum(ok for _, ok in checks)
    for label, ok in checks:
        print(f"{'ok  ' if ok else 'FAIL'} {label}")
    print(f"node_install: {passed} passed, {len(checks) - passed} failed")
    return 0 if passed == len(checks) else 1


def main(argv):
    if len(argv) >= 2 and argv[0] == "skip":
        print(f"node: skipped: {argv[1]}")
        return SKIP
    if len(argv) != 4 or argv[0] not in ("suite", "install"):
        sys.exit(__doc__)
    mode, node, library, node_dir = argv
    return (run_suite if mode == "suite" else run_install)(node, os.path.abspath(library), os.path.abspath(node_dir))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
