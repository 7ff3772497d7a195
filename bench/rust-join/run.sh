#!/usr/bin/env bash
# Builds and runs the join benchmark (fib by blitz::join, rayon::join and the
# raw blz_fork_join) against the checkout's libblitz.
#
#   bench/rust-join/run.sh [--json] [n=30] [runs=7] [reps=5] [threads=1,2]
#
# --json prints one JSON object on stdout; everything else goes to stderr.
# BLITZ_LIB_DIR defaults to the checkout's build/ (./dev build makes it);
# cargo's output goes to $CARGO_TARGET_DIR (default: $BLITZ_LIB_DIR/rust-join-bench).
# CARGO names another cargo. Needs: apt-get install cargo librust-rayon-dev
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cargo=${CARGO:-cargo}
# Where bench/.cargo/config.toml's directory source points.
registry=/usr/share/cargo/registry

if ! command -v "$cargo" >/dev/null 2>&1; then
    echo "rust-join: cargo not found (apt-get install cargo)" >&2
    exit 1
fi
if ! compgen -G "$registry/rayon-1.*" >/dev/null; then
    echo "rust-join: Rayon's sources are not in $registry (apt-get install librust-rayon-dev)" >&2
    exit 1
fi
export BLITZ_LIB_DIR=${BLITZ_LIB_DIR:-$root/build}
export BLITZ_INCLUDE_DIR=${BLITZ_INCLUDE_DIR:-$root/include}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$BLITZ_LIB_DIR/rust-join-bench}
cd "$here"
"$cargo" build --release --offline >&2
exec "$CARGO_TARGET_DIR/release/rust-join-bench" "$@"
