#!/usr/bin/env bash
# Runs the Rust binding's tests against a given libblitz; meson's 'rust' test.
#
#   run-tests.sh WORKSPACE_DIR CARGO_TARGET_DIR LIBBLITZ_SO INCLUDE_DIR
#
# Runs `cargo test --offline --no-fail-fast` in the workspace under a
# timeout (RUST_TEST_TIMEOUT seconds, default 900: a hang becomes a
# failure; each test program also has watchdogs of its own), then each
# example once with small arguments, then dependent-crate.sh (a crate
# outside the workspace must find libblitz.so at run time), then
# rayon-compat/run.sh (rayon-core 1.10.1's own tests against blitz, with
# the documented differences as expected failures; skipped where Debian's
# crate sources are missing, and in sanitized runs), then
# rayon-on-blitz/run.sh (rayon 1.6.1's own tests with rayon-core patched
# to bindings/rust/rayon-core; skipped likewise), and the comparison of
# blitz-sys's bundled build with meson's (blitz-sys/bundled-vs-meson.sh,
# on the bundled build dependent-crate.sh made; not in sanitized runs,
# whose meson flags add the sanitizer's). Ends with one line
# "rust: N passed, M failed" (the sum of cargo's "test result:" lines, a
# test program that crashed counted as one failure, each example and each
# dependent-crate check as one test, the bundled-vs-meson comparison as
# one, plus rayon-compat's and rayon-on-blitz's counts). Exits 77
# (meson's "skipped") when cargo or rustc is not installed. CARGO and
# RUSTC name other toolchains.
#
# SANITIZER_PRELOAD, when set, names tools/sanitizer_preload.py: against a
# libblitz built with -Db_sanitize, every test binary and example then runs
# through it (cargo's target runner), which preloads the sanitizer runtime
# the uninstrumented Rust binaries need. rustdoc has no runner on stable
# Rust, so the doctests are left out of such runs (and said to be); the
# normal build runs them. Against a ThreadSanitizer build the test is
# skipped (exit 77): Rust's standard library is not instrumented, so TSan
# cannot see the synchronization of its scoped threads, channels and
# parking, which the tests and libtest rely on, and reports races that are
# not there (seen: a thread::scope join, libtest's result channel). The
# ASan and UBSan build runs them.
set -uo pipefail

if [ $# -ne 4 ]; then
    echo "usage: $0 WORKSPACE_DIR CARGO_TARGET_DIR LIBBLITZ_SO INCLUDE_DIR" >&2
    exit 2
fi
workspace=$1
target=$2
lib=$3
include=$4
cargo=${CARGO:-cargo}
rustc=${RUSTC:-rustc}

if ! command -v "$cargo" >/dev/null 2>&1 || ! command -v "$rustc" >/dev/null 2>&1; then
    echo "rust: skipped: no Rust toolchain ('$cargo' or '$rustc' not found; apt-get install cargo)"
    exit 77
fi

export BLITZ_LIB_DIR
BLITZ_LIB_DIR=$(cd "$(dirname "$lib")" && pwd)
export BLITZ_INCLUDE_DIR=$include
export CARGO_TARGET_DIR=$target
export CARGO_TERM_COLOR=never
# Cargo needs a home; a CI environment without HOME gets one in the target dir.
if [ -z "${HOME:-}" ] && [ -z "${CARGO_HOME:-}" ]; then export CARGO_HOME=$target/cargo-home; fi
# The tests carry an rpath to BLITZ_LIB_DIR; this covers anything that does not.
export LD_LIBRARY_PATH=$BLITZ_LIB_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
mkdir -p "$target"
cd "$workspace" || exit 1

echo "rust: $("$cargo" --version), $("$rustc" --version); libblitz from $BLITZ_LIB_DIR"
# The examples that run after the tests; built by `cargo test` (or, when
# it names its targets, by `cargo build --examples` below). Removed first
# so that a failed build cannot leave an old binary to run.
examples=("fib 20 2" "quicksort 100000 2" "fill_chunks 1000000 10000 2")
for example in "${examples[@]}"; do
    rm -f "$target/debug/examples/${example%% *}"
done

# A sanitized library: test binaries and examples through the preloader.
run=()
targets=()
if [ -n "${SANITIZER_PRELOAD:-}" ] && runtimes=$("$SANITIZER_PRELOAD" --sanitized "$lib"); then
    if [[ "$runtimes" == *libtsan* ]]; then
        echo "rust: skipped: ThreadSanitizer cannot see the synchronization inside Rust's uninstrumented std"
        exit 77
    fi
    host=$("$rustc" -vV | sed -n 's/^host: //p')
    runner_var=CARGO_TARGET_$(echo "$host" | tr 'a-z-' 'A-Z_')_RUNNER
    export "$runner_var=$SANITIZER_PRELOAD $lib"
    run=("$SANITIZER_PRELOAD" "$lib")
    targets=(--lib --bins --tests)
    echo "rust: sanitized libblitz: tests run through $runner_var; doctests left out (rustdoc has no runner)"
fi

log=$target/cargo-test.log
limit=${RUST_TEST_TIMEOUT:-900}
timeout -k 30 "$limit" "$cargo" test --offline --no-fail-fast "${targets[@]}" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
if [ "$status" -eq 124 ] || [ "$status" -eq 137 ]; then
    echo "rust: cargo test still running after $limit s: stopped (a hang)"
fi

passed=0
failed=0
while read -r p f; do
    passed=$((passed + p))
    failed=$((failed + f))
done < <(sed -n 's/^test result: [A-Za-z]*\. \([0-9]*\) passed; \([0-9]*\) failed.*/\1 \2/p' "$log")
# A test program that crashed (an abort, a signal) printed its "Running" or
# "Doc-tests" line but no "test result:" line: one failure each.
started=$(grep -cE '^ +(Running|Doc-tests) ' "$log")
finished=$(grep -c '^test result: ' "$log")
if [ "$started" -gt "$finished" ]; then
    echo "rust: $((started - finished)) test program(s) ended without a result"
    failed=$((failed + started - finished))
fi

# Each example runs once and checks its own result (a build error shows
# as examples that failed).
if [ ${#targets[@]} -gt 0 ]; then "$cargo" build --offline --examples 2>&1 | tee -a "$log"; fi
for example in "${examples[@]}"; do
    read -r name args <<<"$example"
    # shellcheck disable=SC2086
    if "${run[@]}" "$target/debug/examples/$name" $args; then
        passed=$((passed + 1))
    else
        echo "example $name failed"
        failed=$((failed + 1))
        status=1
    fi
done

# A crate outside the workspace that depends on blitz by path.
dependent_log=$target/dependent-crate.log
"$workspace/dependent-crate.sh" "$workspace" "$target/dependent-crate" "${run[@]}" 2>&1 | tee "$dependent_log"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
read -r p f < <(sed -n 's/^dependent-crate: \([0-9]*\) passed, \([0-9]*\) failed$/\1 \2/p' "$dependent_log")
passed=$((passed + ${p:-0}))
failed=$((failed + ${f:-1}))

# The bundled build (dependent-crate.sh's third crate built it) against
# meson's: the same sources and code-generating arguments.
if [ ${#targets[@]} -eq 0 ]; then
    record=$(ls -t "$target"/dependent-crate/bundled/debug/build/blitz-sys-*/out/bundled-build.txt 2>/dev/null | head -1)
    if "$workspace/blitz-sys/bundled-vs-meson.sh" "$(dirname "$lib")" "${record:-/nonexistent}"; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1))
        status=1
    fi
else
    echo "rust: bundled-vs-meson left out of sanitized runs (meson adds the sanitizer's flags)"
fi

# counted_suite NAME: runs $workspace/NAME/run.sh (which ends with "NAME: N
# passed, N failed", or exits 77 when it cannot run here) with its own
# target and work directories, and adds its counts to ours.
counted_suite() {
    local name=$1 log=$target/$1.log suite_status p f
    CARGO_TARGET_DIR=$target/$name "$workspace/$name/run.sh" "$target/$name-work" 2>&1 | tee "$log"
    suite_status=${PIPESTATUS[0]}
    [ "$suite_status" -eq 77 ] && return
    [ "$suite_status" -eq 0 ] || status=1
    read -r p f < <(sed -n "s/^$name: \\([0-9]*\\) passed, \\([0-9]*\\) failed\$/\\1 \\2/p" "$log")
    passed=$((passed + ${p:-0}))
    failed=$((failed + ${f:-1}))
}

# rayon-core's own tests, every one expected to pass.
if [ ${#targets[@]} -eq 0 ]; then
    # TEST_TIMEOUT: each of its programs takes seconds; a hang fails in 4 minutes.
    TEST_TIMEOUT=240 counted_suite rayon-compat

    # rayon 1.6.1's own tests on libblitz (through the rayon-core crate):
    # its unit tests, tests/*.rs and its 218 doctests (about 80 s of the
    # 184 s the whole run took on 2026-11-29 from an empty directory);
    # RAYON_DOCTESTS=0 leaves the doctests out.
    TEST_TIMEOUT=300 DOCTESTS=${RAYON_DOCTESTS:-1} counted_suite rayon-on-blitz
else
    echo "rust: rayon-compat and rayon-on-blitz left out of sanitized runs (their dependencies are not instrumented either)"
fi

if [ "$status" -ne 0 ] && [ "$failed" -eq 0 ]; then
    failed=1 # cargo failed without a test result (a build error)
fi
echo "rust: $passed passed, $failed failed"
exit "$status"
