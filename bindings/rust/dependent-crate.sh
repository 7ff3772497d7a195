#!/usr/bin/env bash
# Crates outside the workspace, in a temporary directory, that depend on
# `blitz` by path, as a user's crate does.
#
# With the system library (BLITZ_LIB_DIR): the binary and the tests of the
# first crate must find libblitz.so at run time with no LD_LIBRARY_PATH and
# no build script of its own when cargo runs them (`cargo run`, `cargo
# test`). A second crate adds the documented rpath line to its build.rs
# (with blitz-sys as a direct dependency, for DEP_BLITZ_RPATH): its binary
# then runs directly, outside cargo, too.
#
# With the bundled build (the default features, BLITZ_LIB_DIR unset): a
# third crate builds with a plain `cargo build`, and its binary runs
# directly from another directory with an empty environment; it has no
# rpath, needs no libblitz.so and maps none. A fourth depends on rayon
# (Debian's librust-rayon-dev) with rayon-core patched to
# bindings/rust/rayon-core, and checks that rayon's pools are libblitz's
# (left out where rayon's sources are missing). The bundled crates use
# TARGET_DIR/bundled, so the two configurations do not rebuild each other;
# RUNNER does not apply to them (their libblitz is not the sanitized one).
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
registry=/usr/share/cargo/registry
# Each crate takes the registry's crates (blitz-sys's `cc`, rayon) from
# Debian's librust-*-dev sources, offline: the workspace's own cargo config.
cargo_config() { # cargo_config CRATE_DIR
    mkdir -p "$1/.cargo"
    cp "$workspace/.cargo/config.toml" "$1/.cargo/config.toml"
}

# fib_module CRATE_DIR: src/fib.rs, the fork-join every program runs.
fib_module() {
    cat > "$1/src/fib.rs" <<'EOF'
pub fn fib(n: u64) -> u64 {
    if n < 2 {
        return n;
    }
    let (a, b) = blitz::join(|| fib(n - 1), || fib(n - 2));
    a + b
}
EOF
}

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
cargo_config "$tmp/plain"
fib_module "$tmp/plain"
cat > "$tmp/plain/src/main.rs" <<'EOF'
mod fib;
use fib::fib;

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
cp "$tmp/plain/src/main.rs" "$tmp/plain/src/fib.rs" "$tmp/rpath/src/"
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
cargo_config "$tmp/rpath"
cat > "$tmp/rpath/build.rs" <<'EOF'
fn main() {
    // The one line (README, "Where libblitz comes from"): blitz-sys's rpath for our binaries.
    println!("cargo:rustc-link-arg={}", std::env::var("DEP_BLITZ_RPATH").unwrap());
}
EOF
cd "$tmp/rpath" || exit 1
check "cargo build (with the rpath line)" "$cargo" build --offline --quiet
check "the binary run directly (with the rpath line)" "${runner[@]}" "$target/debug/uses-blitz-rpath"

# 3. The bundled build: no libblitz.so anywhere in the picture.
unset BLITZ_LIB_DIR BLITZ_INCLUDE_DIR EXPECT_LIBBLITZ_DIR
export CARGO_TARGET_DIR=$target/bundled
mkdir -p "$tmp/bundled/src"
cat > "$tmp/bundled/Cargo.toml" <<EOF
[package]
name = "uses-blitz-bundled"
version = "0.1.0"
edition = "2021"
publish = false

[dependencies]
blitz = { path = "$workspace/blitz" }

[workspace]
EOF
cargo_config "$tmp/bundled"
fib_module "$tmp/bundled"
cat > "$tmp/bundled/src/main.rs" <<'EOF'
mod fib;
use fib::fib;

fn main() {
    let pool = blitz::ThreadPoolBuilder::new().num_threads(2).build().expect("pool");
    assert_eq!(pool.install(|| fib(20)), 6765);
    assert_eq!(pool.broadcast(|ctx| ctx.index()), vec![0, 1]);
    assert_eq!(fib(15), 610); // the global pool
    // libblitz is inside this program: no shared copy is mapped.
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    assert!(!maps.contains("libblitz.so"), "a libblitz.so is mapped:\n{}", maps);
    println!("uses-blitz-bundled: ok");
}
EOF
# No rpath or runpath, and no libblitz.so among the libraries it needs.
no_dynamic_blitz() {
    local dynamic
    dynamic=$(readelf -d "$1") || return 1
    if grep -E 'RPATH|RUNPATH|libblitz' <<<"$dynamic"; then return 1; fi
}
cd "$tmp/bundled" || exit 1
check "cargo build (bundled)" "$cargo" build --offline --quiet
bundled_bin=$CARGO_TARGET_DIR/debug/uses-blitz-bundled
check "the binary has no rpath and needs no libblitz.so (bundled)" no_dynamic_blitz "$bundled_bin"
# From another directory, with nothing in the environment.
check "the binary run directly from / with env -i (bundled)" \
    bash -c 'cd / && exec env -i "$@"' run "$bundled_bin"

# 4. rayon on libblitz through the patch, bundled.
if compgen -G "$registry/rayon-1.6.*" >/dev/null; then
    mkdir -p "$tmp/rayon/src"
    cat > "$tmp/rayon/Cargo.toml" <<EOF
[package]
name = "uses-rayon-on-blitz"
version = "0.1.0"
edition = "2021"
publish = false

[dependencies]
rayon = "1.6"

# The one line that puts rayon on libblitz (README).
[patch.crates-io]
rayon-core = { path = "$workspace/rayon-core" }

[workspace]
EOF
    cargo_config "$tmp/rayon"
    cat > "$tmp/rayon/src/main.rs" <<'EOF'
use rayon::prelude::*;

fn main() {
    let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().expect("pool");
    let sum: u64 = pool.install(|| (0..1_000_000u64).into_par_iter().map(|x| x % 7).sum());
    assert_eq!(sum, (0..1_000_000u64).map(|x| x % 7).sum());
    let mut v: Vec<u32> = (0..100_000).rev().collect();
    v.par_sort();
    assert!(v.windows(2).all(|w| w[0] <= w[1]));
    // rayon's pool is libblitz's: its workers are libblitz's threads,
    // named "blz-<index>" by libblitz (rayon's own would be unnamed).
    let names = pool.broadcast(|_| std::fs::read_to_string("/proc/thread-self/comm").unwrap());
    assert_eq!(names.iter().map(|n| n.trim()).collect::<Vec<_>>(), ["blz-0", "blz-1"]);
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    assert!(!maps.contains("libblitz.so"), "a libblitz.so is mapped");
    println!("uses-rayon-on-blitz: ok");
}
EOF
    cd "$tmp/rayon" || exit 1
    check "cargo build (rayon with the patch, bundled)" "$cargo" build --offline --quiet
    check "the binary run directly from / with env -i (rayon on libblitz)" \
        bash -c 'cd / && exec env -i "$@"' run "$CARGO_TARGET_DIR/debug/uses-rayon-on-blitz"
else
    echo "dependent-crate: rayon with the patch: left out ($registry/rayon-1.6.* not found: apt-get install librust-rayon-dev)"
fi

echo "dependent-crate: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
