#!/usr/bin/env bash
# Runs rayon 1.6.1's own test suite on libblitz: Debian's copy of rayon,
# unchanged, with rayon-core replaced by bindings/rust/rayon-core through
# `[patch.crates-io]` (the one line a user adds), offline.
#
#   bindings/rust/rayon-on-blitz/run.sh [WORK_DIR]
#
# rayon's sources come from Debian's librust-rayon-dev
# (/usr/share/cargo/registry/rayon-1.6.1, copied, never modified), its
# dependencies (either) and dev-dependencies (rand, rand_xorshift,
# lazy_static) from the same directory source. The copy's Cargo.toml gets
# the patch line and an empty [workspace] table, nothing else; its sources
# are not touched. Everything is generated in WORK_DIR (default: a new
# temporary directory, removed at the end unless KEEP=1); cargo's output
# goes to $CARGO_TARGET_DIR (default: WORK_DIR/target).
#
# What runs: the library's unit tests (src/**/test.rs and the other
# #[cfg(test)] modules: `cargo test --lib`), each tests/*.rs, and, with
# DOCTESTS=1 (the default), the doctests (`cargo test --doc`, which include
# rayon's compile_fail examples). Each program runs under a timeout
# (TEST_TIMEOUT seconds, default 600); when one times out, its tests run
# again one at a time (each under TEST_TIMEOUT_ONE, default 60 s), so that
# a hang is pinned on its test.
#
# The summary counts tests: compiled (its program built), passed, failed,
# hung, ignored (rayon's own #[ignore]). EXPECTED_FAILURES (below, each
# with its reason) lists tests known to fail for a documented difference:
# their failures are counted apart, and one that passes counts as a
# failure (the list is then out of date). The last line is
# "rayon-on-blitz: N passed, N failed". Exits 77 (skipped) when cargo or
# Debian's crate sources are missing.
# Environment: BLITZ_LIB_DIR (set: that libblitz.so; unset: the bundled
# build), BLITZ_INCLUDE_DIR, as for blitz-sys; CARGO.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
rayon_core=$(cd "$here/../rayon-core" && pwd)
registry=/usr/share/cargo/registry
rayon=$registry/rayon-1.6.1
cargo=${CARGO:-cargo}
timeout_s=${TEST_TIMEOUT:-600}
timeout_one=${TEST_TIMEOUT_ONE:-60}
doctests=${DOCTESTS:-1}

# Tests expected to fail, and why (none at present: every rayon 1.6.1 test
# passes on libblitz). Format: "NAME" entries as libtest prints them.
EXPECTED_FAILURES=""

if ! command -v "$cargo" >/dev/null 2>&1; then
    echo "rayon-on-blitz: skipped: no cargo"
    exit 77
fi
if [ ! -d "$rayon" ]; then
    echo "rayon-on-blitz: skipped: $rayon not found (apt-get install librust-rayon-dev)"
    exit 77
fi
for crate in either-1 rand-0.8 rand_xorshift-0.3 lazy_static-1 cc-1.0; do
    if ! compgen -G "$registry/$crate.*" >/dev/null; then
        echo "rayon-on-blitz: skipped: $crate not in $registry" \
            "(apt-get install librust-rayon-dev librust-rand-dev librust-rand-xorshift-dev librust-lazy-static-dev librust-cc-dev)"
        exit 77
    fi
done

if [ $# -ge 1 ]; then
    work=$1
    mkdir -p "$work"
else
    work=$(mktemp -d /tmp/rayon-on-blitz.XXXXXX)
    [ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$work"' EXIT
fi
work=$(cd "$work" && pwd)
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$work/target}
export CARGO_TERM_COLOR=never
crate=$work/rayon
rm -rf "$crate"
# Timestamps kept: a rerun in the same WORK_DIR rebuilds nothing.
cp -r --preserve=timestamps "$rayon" "$crate"
chmod -R u+w "$crate"
mkdir -p "$crate/.cargo"
# Debian's .cargo-checksum.json would make cargo check the copy as a
# registry crate; as a path project it has no use.
rm -f "$crate/.cargo-checksum.json"
cat >> "$crate/Cargo.toml" <<TOML

# Added by rayon-on-blitz/run.sh: rayon on libblitz.
[patch.crates-io]
rayon-core = { path = "$rayon_core" }

[workspace]
TOML
# Offline, from Debian's crate sources: the workspace's cargo config.
cp "$here/../.cargo/config.toml" "$crate/.cargo/config.toml"

cd "$crate" || exit 1
log=$work/log
mkdir -p "$log"
echo "rayon-on-blitz: rayon 1.6.1's tests with rayon-core from $rayon_core; $("$cargo" --version)"
# The patch must be in use: cargo lists an unused patch as a warning and
# keeps the registry's rayon-core, which would test Rayon, not libblitz.
if ! "$cargo" tree --offline -e normal -i rayon-core > "$log/tree" 2>&1 ||
    ! grep -q "^rayon-core v1.10.1 ($rayon_core)" "$log/tree"; then
    echo "rayon-on-blitz: the patch is not in use:"
    sed 's/^/    /' "$log/tree"
    echo "rayon-on-blitz: 0 passed, 1 failed"
    exit 1
fi

compiled=0 passed=0 failed=0 hung=0 not_compiled=0 expected=0 ignored=0
settle_expected() { # moves the expected failures of a run's log apart
    local name
    for name in $EXPECTED_FAILURES; do
        if grep -qxE "test $name( - should panic)? \.\.\. FAILED" "$1"; then
            failed=$((failed - 1)) expected=$((expected + 1))
            echo "    ($name: an expected failure)"
        elif grep -qxE "test $name( - should panic)? \.\.\. ok" "$1"; then
            passed=$((passed - 1)) failed=$((failed + 1))
            echo "    $name passed but is listed in EXPECTED_FAILURES"
        fi
    done
}

# run_program NAME CARGO_ARGS...: builds, lists, runs and counts one test program.
run_program() {
    local name=$1
    shift
    local args=("$@")
    # Doctests have no --no-run: building the library is their build step
    # (rustdoc then compiles each one as it runs it, and counts one that
    # does not compile as failed).
    local build=("$cargo" test --offline --no-run "${args[@]}")
    if [ "$name" = doctests ]; then build=("$cargo" build --offline --lib); fi
    if ! "${build[@]}" > "$log/$name.build" 2>&1; then
        echo "rayon-on-blitz: $name: does not compile; first errors:"
        grep -E '^error' -A6 "$log/$name.build" | head -30 | sed 's/^/    /'
        not_compiled=$((not_compiled + 1)) # the program, since its tests cannot be listed
        return
    fi
    local tests
    tests=$("$cargo" test --offline "${args[@]}" -- --list 2>/dev/null | grep -c ': test$')
    compiled=$((compiled + tests))
    timeout -k 10 "$timeout_s" "$cargo" test --offline "${args[@]}" > "$log/$name.run" 2>&1
    local status=$? p f i
    if [ "$status" -ne 124 ] && [ "$status" -ne 137 ]; then
        read -r p f i < <(sed -n 's/^test result: [A-Za-z]*\. \([0-9]*\) passed; \([0-9]*\) failed; \([0-9]*\) ignored.*/\1 \2 \3/p' \
            "$log/$name.run" | tail -1)
        p=${p:-0} f=${f:-0} i=${i:-0}
        if [ $((p + f + i)) -ne "$tests" ]; then
            # Crashed before its summary: whatever did not report passed failed.
            p=$(grep -c ' \.\.\. ok$' "$log/$name.run")
            i=$(grep -c ' \.\.\. ignored$' "$log/$name.run")
            f=$((tests - p - i))
            echo "rayon-on-blitz: $name: ended without its summary (exit $status)"
            tail -5 "$log/$name.run" | sed 's/^/    /'
        fi
        passed=$((passed + p)) failed=$((failed + f)) ignored=$((ignored + i))
        echo "rayon-on-blitz: $name: $tests tests: $p passed, $f failed, $i ignored"
        grep -E '^test .* FAILED$' "$log/$name.run" | sed 's/^/    /'
        settle_expected "$log/$name.run"
        return
    fi
    # Timed out: one test at a time, to find the one that hangs.
    echo "rayon-on-blitz: $name: timed out after $timeout_s s; its tests one by one:"
    local test_name
    while read -r test_name; do
        timeout -k 10 "$timeout_one" "$cargo" test --offline "${args[@]}" -- --exact "$test_name" \
            > "$log/$name.one.run" 2>&1
        case $? in
            0) if grep -q '1 ignored' "$log/$name.one.run"; then ignored=$((ignored + 1)); else passed=$((passed + 1)); fi ;;
            124|137) hung=$((hung + 1)); echo "    $test_name: HUNG" ;;
            *) failed=$((failed + 1)); echo "    $test_name: FAILED" ;;
        esac
        settle_expected "$log/$name.one.run"
    done < <("$cargo" test --offline "${args[@]}" -- --list 2>/dev/null | sed -n 's/: test$//p')
}

start=$(date +%s)
run_program lib --lib
for file in "$crate"/tests/*.rs; do
    name=$(basename "$file" .rs)
    run_program "$name" --test "$name"
done
if [ "$doctests" = 1 ]; then
    run_program doctests --doc
else
    echo "rayon-on-blitz: doctests left out (DOCTESTS=0)"
fi

echo "rayon-on-blitz: $compiled tests compile ($not_compiled programs do not), $passed pass," \
    "$((failed + expected)) fail ($expected of them expected), $hung hang, $ignored ignored (by rayon); $(($(date +%s) - start)) s"
echo "rayon-on-blitz: $passed passed, $((failed + hung + not_compiled)) failed"
[ $((failed + hung + not_compiled)) -eq 0 ]
