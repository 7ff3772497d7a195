#!/usr/bin/env bash
# tools/bench.sh BUILD_DIR [NAME ...] [--runs N] [--note TEXT]
#   (./dev bench [NAME] builds, then runs this on $BUILD_DIR)
#
# The benchmarks of issue 4: libblitz next to Rayon, oneTBB, OpenMP and
# sequential code, interleaved run by run. Writes bench/results/latest.json
# and docs/benchmarks.md (tables, goals, charts). With NAME, only that
# workload (fib tree parfor uts spawn roundtrip wake idle storm, or the
# extra sections rustjoin and sort) runs again; the rest of the report keeps
# the previous figures. All of it took 9 min 16 s on the 2-vCPU machine
# while it was busy (about 5 min of CPU time); see bench/run.py.
set -euo pipefail
[ $# -ge 1 ] || { sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
root=$(cd "$(dirname "$0")/.." && pwd)
exec python3 "$root/bench/run.py" "$@"
