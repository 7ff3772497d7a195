#!/usr/bin/env bash
# A crate outside the workspace, in a temporary directory, that depends on
# `blitz` by path, as a user's crate does: its binary and its tests must
# find libblitz.so at run time with no LD_LIBRARY_PATH and no build script
# of its own when cargo runs them (`cargo run`, `cargo test`). A second
# crate adds the documented rpath line to its build.rs (with blitz-sys as
# a direct dependency, for DEP_BLITZ_RPATH): its binary then runs directly,
# outside cargo, too.
#
#   dependent-crate.sh WORKSPACE_DIR TARGET_DIR [RUNNER...]
#
# TARGET_DIR holds cargo's output (kept between runs); RUNNER, if given,
# prefixes the direct run of the binary (the sanitizer preloader).
# BLITZ_LIB_DIR and BLITZ_INCLUDE_DIR are read by blitz-sys as usual.
# Prints one line per check and ends with "dependent-crate: N passed, N failed".
set -uo pipefail

if [ $# -lt 2 ]; then
    echo "usage: $0 WORKSPACE_DIR TARGET_DIR [RUNNER...]" >&2
    exit 2
fi
workspace=$(cd "$1" && pwd)
target=$2
shift 2
runner=("$@")
cargo=${CARGO:-cargo}
mkdir -p "$target"
target=$(cd "$target" && pwd)
tmp=$(mktemp -d /tmp/blitz-dependent.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
# The test is that nothing else points at the library; each program checks
# that the libblitz.so it mapped is the one in BLITZ_LIB_DIR (a copy
# installed system-wide would be found without any of this).
unset LD_LIBRARY_PATH
export EXPECT_LIBBLITZ_DIR=${BLITZ_LIB_DIR:?BLITZ_LIB_DIR names the libblitz to use}
export CARGO_TARGET_DIR=$target CARGO_TERM_COLOR=never

passed=0
failed=0
check() { # check NAME COMMAND...: runs it, counts it
    local name=$1
    shift
    if "$@" > "$tmp/out" 2>&1; then
        passed=$((passed + 1))
        echo "dependent-crate: $name: ok"
    else
        failed=$((failed + 1))
        echo "dependent-crate: $name: FAILED (exit $?)"
        tail -20 "$tmp/out" | sed 's/^/    /'
    fi
}

# 1. Depends on blitz only: cargo run and cargo test work as they are.
mkdir -p "$tmp/plain/src" "$tmp/plain/tests"
cat > "$tmp/plain/Cargo.toml" <<EOF
[package]
name = "uses-blitz"
version = "0.1.0"
edition = "2021"
publish = false

[dependencies]
blitz = { path = "$workspace/blitz" }

[workspace]
EOF
cat > "$tmp/plain/src/main.rs" <<'EOF'
fn fib(n: u64) -> u64 {
    if n < 2 {
        return n;
    }
    let (a, b) = blitz::join(|| fib(n - 1), || fib(n - 2));
    a + b
}

/// The directory of the libblitz.so this process mapped (the kernel shows
/// the file's real path): a system-wide copy must not pass for ours.
fn loaded_from() -> std::path::PathBuf {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    let line = maps.lines().find(|l| l.contains("/libblitz.so")).expect("libblitz.so is mapped");
    let path = std::path::Path::new(&line[line.find('/').unwrap()..]);
    path.parent().unwrap().to_path_buf()
}

fn main() {
    let pool = blitz::ThreadPoolBuilder::new().num_threads(2).build().expect("pool");
    assert_eq!(pool.install(|| fib(20)), 6765);
    assert_eq!(fib(15), 610); // the global pool
    let want = std::fs::canonicalize(std::env::var("EXPECT_LIBBLITZ_DIR").unwrap()).unwrap();
    assert_eq!(loaded_from(), want, "libblitz.so came from elsewhere");
    println!("uses-blitz: ok");
}
EOF
cat > "$tmp/plain/tests/scope.rs" <<'EOF'
#[test]
fn a_scope_runs_its_tasks() {
    let mut sums = [0u64; 4];
    blitz::scope(|s| {
        for (i, sum) in sums.iter_mut().enumerate() {
            s.spawn(move |_| *sum = (0..=i as u64).sum());
        }
    });
    assert_eq!(sums, [0, 1, 3, 6]);
}
EOF
cd "$tmp/plain" || exit 1
check "cargo run (depends on blitz only)" "$cargo" run --offline --quiet
check "cargo test (depends on blitz only)" "$cargo" test --offline --quiet

# 2. The rpath line in build.rs: the binary runs outside cargo as well.
mkdir -p "$tmp/rpath/src"
cp "$tmp/plain/src/main.rs" "$tmp/rpath/src/main.rs"
cat > "$tmp/rpath/Cargo.toml" <<EOF
[package]
name = "uses-blitz-rpath"
version = "0.1.0"
edition = "2021"
publish = false
build = "build.rs"

[dependencies]
blitz = { path = "$workspace/blitz" }
blitz-sys = { path = "$workspace/blitz-sys" }

[workspace]
EOF
cat > "$tmp/rpath/build.rs" <<'EOF'
fn main() {
    // The one line (README, "Where libblitz comes from"): blitz-sys's rpath for our binaries.
    println!("cargo:rustc-link-arg={}", std::env::var("DEP_BLITZ_RPATH").unwrap());
}
EOF
cd "$tmp/rpath" || exit 1
check "cargo build (with the rpath line)" "$cargo" build --offline --quiet
check "the binary run directly (with the rpath line)" "${runner[@]}" "$target/debug/uses-blitz-rpath"

echo "dependent-crate: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
