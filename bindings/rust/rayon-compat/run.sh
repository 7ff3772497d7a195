#!/usr/bin/env bash
# Runs rayon-core 1.10.1's own tests against the blitz crate, with only
# their imports rewritten (rayon_core::, crate:: and super:: become blitz::),
# and counts how many compile and pass.
#
#   bindings/rust/rayon-compat/run.sh [WORK_DIR]
#
# The tests come from Debian's librust-rayon-core-dev (read from
# /usr/share/cargo/registry/rayon-core-1.10.1, never modified), their
# dev-dependencies (rand, rand_xorshift, scoped-tls, crossbeam-channel,
# crossbeam-utils, libc, num_cpus) from the same directory source, offline.
# Everything is generated in WORK_DIR (default: a new temporary directory,
# removed at the end unless KEEP=1); cargo's output goes to
# $CARGO_TARGET_DIR (default: WORK_DIR/target).
#
# What is run: each src/<module>/test.rs and src/test.rs as an integration
# test program, each tests/*.rs (stack_overflow_crash without libtest's
# harness, as rayon-core declares it), and the compile_fail doctests of
# src/compile_fail/*.rs. Each program runs under a timeout (TEST_TIMEOUT
# seconds, default 600); when one times out, its tests run again one by
# one, each under the timeout, so that a hang is pinned on its test.
#
# The summary counts tests: compiled (its program built), passed, failed,
# hung; a program that does not compile counts all its tests as not
# compiled. EXPECTED_FAILURES names tests (space-separated) known to fail
# for a documented difference: their failures are counted apart, and one
# that passes counts as a failure (the list is then out of date). The last
# line is "rayon-compat: N passed, N failed".
# Environment: BLITZ_LIB_DIR, BLITZ_INCLUDE_DIR as for blitz-sys; CARGO.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
blitz_crate=$(cd "$here/../blitz" && pwd)
registry=/usr/share/cargo/registry
rayon=$registry/rayon-core-1.10.1
cargo=${CARGO:-cargo}
timeout_s=${TEST_TIMEOUT:-600}

if [ ! -d "$rayon" ]; then
    echo "rayon-compat: $rayon not found (apt-get install librust-rayon-core-dev)" >&2
    exit 77
fi
for crate in rand-0.8 rand_xorshift-0.3 scoped-tls-1 crossbeam-channel-0.5 crossbeam-utils-0.8 libc-0.2 num_cpus-1; do
    if ! compgen -G "$registry/$crate.*" >/dev/null; then
        echo "rayon-compat: $crate not in $registry (apt-get install librust-rand-dev librust-rand-xorshift-dev librust-scoped-tls-dev)" >&2
        exit 77
    fi
done
if ! command -v "$cargo" >/dev/null 2>&1; then
    echo "rayon-compat: skipped: no cargo" >&2
    exit 77
fi

if [ $# -ge 1 ]; then
    work=$1
    mkdir -p "$work"
else
    work=$(mktemp -d /tmp/rayon-compat.XXXXXX)
    [ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$work"' EXIT
fi
work=$(cd "$work" && pwd)
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$work/target}
export CARGO_TERM_COLOR=never
crate=$work/crate
rm -rf "$crate"
mkdir -p "$crate/src/compile_fail" "$crate/tests" "$crate/.cargo"

# The only changes to rayon-core's text: its own crate's paths become blitz's.
rewrite() {
    sed -e 's/\brayon_core::/blitz::/g' \
        -e 's/\bcrate::/blitz::/g' \
        -e 's/\bsuper::/blitz::/g' \
        -e 's/^\(\s*\)use rayon_core\b/\1use blitz/' "$1"
}

programs=()
for module in broadcast join scope spawn thread_pool; do
    rewrite "$rayon/src/$module/test.rs" > "$crate/tests/internal_$module.rs"
    programs+=("internal_$module")
done
rewrite "$rayon/src/test.rs" > "$crate/tests/internal_lib.rs"
programs+=(internal_lib)
for file in "$rayon"/tests/*.rs; do
    name=$(basename "$file" .rs)
    rewrite "$file" > "$crate/tests/$name.rs"
    programs+=("$name")
done
for file in "$rayon"/src/compile_fail/*.rs; do
    rewrite "$file" > "$crate/src/compile_fail/$(basename "$file")"
done

cat > "$crate/src/lib.rs" <<'EOF'
//! Holds rayon-core's compile_fail doctests (src/compile_fail), rewritten.
#[allow(dead_code)]
mod compile_fail;
EOF

cat > "$crate/Cargo.toml" <<EOF
[package]
name = "rayon-compat"
version = "0.0.0"
edition = "2021"
publish = false

[dependencies]
blitz = { path = "$blitz_crate" }

[dev-dependencies]
rand = "0.8"
rand_xorshift = "0.3"
scoped-tls = "1.0"
crossbeam-channel = "0.5"
crossbeam-utils = "0.8"
libc = "0.2"
num_cpus = "1.2"

[[test]]
name = "stack_overflow_crash"
path = "tests/stack_overflow_crash.rs"
harness = false

[workspace]
EOF

# Offline, from Debian's crate sources: the workspace's cargo config.
cp "$here/../.cargo/config.toml" "$crate/.cargo/config.toml"

cd "$crate" || exit 1
log=$work/log
mkdir -p "$log"
echo "rayon-compat: rayon-core 1.10.1's tests against $blitz_crate; $("$cargo" --version)"

compiled=0 passed=0 failed=0 hung=0 not_compiled=0 expected=0
# Moves the expected failures of a run's log from `failed` to `expected`,
# and an expected failure that passed from `passed` to `failed`.
settle_expected() {
    local name
    for name in ${EXPECTED_FAILURES:-}; do
        if grep -qxE "test $name( - should panic)? \.\.\. FAILED" "$1"; then
            failed=$((failed - 1)) expected=$((expected + 1))
            echo "    ($name: an expected failure)"
        elif grep -qxE "test $name( - should panic)? \.\.\. ok" "$1"; then
            passed=$((passed - 1)) failed=$((failed + 1))
            echo "    $name passed but is listed in EXPECTED_FAILURES"
        fi
    done
}
count_tests() { # the #[test] functions of a program's source
    grep -c '#\[test\]' "$crate/tests/$1.rs"
}

# Each program runs through `cargo test`, as a user runs a dependent
# crate's tests: nothing here sets the library path.
for program in "${programs[@]}"; do
    if [ "$program" = stack_overflow_crash ]; then tests=1; else tests=$(count_tests "$program"); fi
    if ! "$cargo" test --offline --no-run --test "$program" > "$log/$program.build" 2>&1; then
        echo "rayon-compat: $program: does not compile ($tests tests); first errors:"
        grep -E '^error' -A6 "$log/$program.build" | head -30 | sed 's/^/    /'
        not_compiled=$((not_compiled + tests))
        continue
    fi
    compiled=$((compiled + tests))
    run=("$cargo" test --offline --test "$program")
    if [ "$program" = stack_overflow_crash ]; then
        if timeout -k 10 "$timeout_s" "${run[@]}" > "$log/$program.run" 2>&1; then
            passed=$((passed + 1)); echo "rayon-compat: $program: passed"
        else
            failed=$((failed + 1)); echo "rayon-compat: $program: FAILED"; tail -5 "$log/$program.run" | sed 's/^/    /'
        fi
        continue
    fi
    timeout -k 10 "$timeout_s" "${run[@]}" > "$log/$program.run" 2>&1
    status=$?
    if [ "$status" -ne 124 ] && [ "$status" -ne 137 ]; then
        read -r p f < <(sed -n 's/^test result: [A-Za-z]*\. \([0-9]*\) passed; \([0-9]*\) failed.*/\1 \2/p' \
            "$log/$program.run" | tail -1)
        p=${p:-0} f=${f:-0}
        if [ $((p + f)) -ne "$tests" ]; then
            # Crashed before its summary: whatever did not report passed failed.
            p=$(grep -c ' \.\.\. ok$' "$log/$program.run")
            f=$((tests - p))
        fi
        passed=$((passed + p)) failed=$((failed + f))
        echo "rayon-compat: $program: $p passed, $f failed"
        grep -E '^test .* FAILED$' "$log/$program.run" | sed 's/^/    /'
        settle_expected "$log/$program.run"
        continue
    fi
    # Timed out: one test at a time, to find the one that hangs.
    echo "rayon-compat: $program: timed out after $timeout_s s; its tests one by one:"
    while read -r name; do
        timeout -k 10 "$timeout_s" "${run[@]}" -- --exact "$name" > "$log/$program.$name.run" 2>&1
        case $? in
            0) passed=$((passed + 1)) ;;
            124|137) hung=$((hung + 1)); echo "    $name: HUNG" ;;
            *) failed=$((failed + 1)); echo "    $name: FAILED" ;;
        esac
        settle_expected "$log/$program.$name.run"
    done < <("${run[@]}" -- --list 2>/dev/null | sed -n 's/: test$//p')
done

# The compile_fail doctests: rustdoc checks that each fails to compile with its error code.
doc_tests=$(cat "$crate"/src/compile_fail/*.rs | grep -c '```compile_fail')
if timeout -k 10 "$timeout_s" "$cargo" test --offline --doc > "$log/doctests.run" 2>&1 ||
    grep -q '^test result:' "$log/doctests.run"; then
    read -r p f < <(sed -n 's/^test result: [A-Za-z]*\. \([0-9]*\) passed; \([0-9]*\) failed.*/\1 \2/p' \
        "$log/doctests.run" | tail -1)
    p=${p:-0} f=${f:-0}
    compiled=$((compiled + doc_tests))
    passed=$((passed + p)) failed=$((failed + doc_tests - p))
    echo "rayon-compat: compile_fail doctests: $p passed, $((doc_tests - p)) failed"
    grep -E '^test .* FAILED$' "$log/doctests.run" | sed 's/^/    /'
else
    not_compiled=$((not_compiled + doc_tests))
    echo "rayon-compat: compile_fail doctests: the crate does not build"
    tail -20 "$log/doctests.run" | sed 's/^/    /'
fi

total=$((compiled + not_compiled))
echo "rayon-compat: $total tests: $compiled compile ($not_compiled do not), $passed pass, $((failed + expected)) fail" \
    "($expected of them expected), $hung hang"
echo "rayon-compat: $passed passed, $((failed + hung + not_compiled)) failed"
[ $((failed + hung + not_compiled)) -eq 0 ]
