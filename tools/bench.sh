#!/usr/bin/env bash
# tools/bench.sh BUILD_DIR [NAME ...] [--runs N] [--note TEXT]
#   (./dev bench [NAME] builds, then runs this on $BUILD_DIR)
#
# The benchmarks of issue 4: libblitz next to Rayon, oneTBB, OpenMP and
# sequential code, interleaved run by run. Writes bench/results/latest.json
# and docs/benchmarks.md (tables, goals, charts). With NAME, only that
# workload (fib tree parfor uts spawn roundtrip wake idle storm, the
# applications msort matmul bfs, or apps for all three, or the extra
# sections rustjoin and sort) runs again; the rest of the report keeps
# the previous figures. All of it, with node and python below, took
# 18 min 33 s on the 2-vCPU machine on 2026-11-27 (20 min of CPU time,
# the build included); see bench/run.py.
#
# NAME node is the Node binding's benchmark (issue 16,
# bindings/node/bench/hash.mjs: CRC-32 of many buffers on libblitz, the
# libuv threadpool and worker_threads; the run() round trip), which prints
# its tables and writes bindings/node/bench/results.json; about 3 min.
# `./dev bench node` runs only it; a run with no NAME runs it after the rest.
#
# NAME python is the Python binding's (issue 15): blitz.Executor's per-task
# cost against ThreadPoolExecutor (bindings/python/bench/executor_overhead.py)
# and a numpy array through a cffi kernel (examples/python/numpy_kernel.py),
# with Debian's python3 (numpy, cffi); the output also goes to
# bindings/python/bench/results.txt. About 2 min. Like node, it runs alone
# with `./dev bench python`, and after the rest in a run with no NAME.
#
# NAME forkpath is the fork path's benchmark (issue 31, bench/forkpath.py:
# the tree-size sweep, fib and the small trees through libblitz's C ABI,
# C++ header and Rust crate next to Rayon, oneTBB, OpenMP and plain
# recursion; the parallel_for grain sweep and two 20 ms leaves against the
# same work without the pool), which writes
# bench/results/forkpath.{json,md,png}; about 20 min with --runs 5. It
# runs only when named.
#
# NAME rayon-workloads is issue 29's (bench/rayon_workloads.py): one Rayon
# program built natively and on libblitz (rayon-core replaced by
# bindings/rust/rayon-core), iterators, sorts, fib and a tree on 1 and 2
# workers, alternating; writes bench/results/rayon-workloads.{json,md}.
# About 10 min with --runs 5; runs only when named.
#
# NAME graph is issue 30's (bench/graph.py): a 2D wavefront (with real
# blocks, and with empty ones for the cost per dependency edge) and a tiled
# Cholesky on libblitz, OpenMP tasks with depend, oneTBB's flow graph,
# Taskflow and sequential code, on 1 and 2 workers; writes
# bench/results/graph.{json,md}. 70 s with --runs 5 (2026-11-29); runs only
# when named.
#
# NAME blocking-mix is issue 28's (bench/blocking_mix.py): N blockers of
# 100 ms beside fib(25) by join, on libblitz with and without blocking
# sections, Rayon and oneTBB, and callgrind's instructions per join on the
# process pool and an own pool; writes bench/results/blocking-mix.{json,md}.
# Runs only when named.
set -euo pipefail
[ $# -ge 1 ] || { sed -n '2,/^set -euo/{/^#/p}' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
root=$(cd "$(dirname "$0")/.." && pwd)
build_dir=$1
shift
names=0 node=0 python=0 forkpath=0 rayon=0 graph=0 blockmix=0 report_only=0 others=() runs_args=()
while [ $# -gt 0 ]; do
    case "$1" in
        --runs) others+=("$1" "${2:-}"); runs_args+=("$1" "${2:-}"); shift; [ $# -gt 0 ] && shift ;;
        --note) others+=("$1" "${2:-}"); shift; [ $# -gt 0 ] && shift ;;
        --smoke | --report-only) report_only=1; others+=("$1"); shift ;;
        -*) others+=("$1"); shift ;;
        node) node=1; shift ;;
        python) python=1; shift ;;
        forkpath) forkpath=1; shift ;;
        rayon-workloads) rayon=1; shift ;;
        graph) graph=1; shift ;;
        blocking-mix) blockmix=1; shift ;;
        *) names=$((names + 1)); others+=("$1"); shift ;;
    esac
done
status=0
if [ "$forkpath" = 1 ]; then
    python3 "$root/bench/forkpath.py" "$build_dir" "${runs_args[@]}" || status=$?
fi
if [ "$rayon" = 1 ]; then
    python3 "$root/bench/rayon_workloads.py" "$build_dir" "${runs_args[@]}" || status=$?
fi
if [ "$graph" = 1 ]; then
    python3 "$root/bench/graph.py" "$build_dir" "${runs_args[@]}" || status=$?
fi
if [ "$blockmix" = 1 ]; then
    python3 "$root/bench/blocking_mix.py" "$build_dir" "${runs_args[@]}" || status=$?
fi
if [ $((forkpath + rayon + graph + blockmix)) -gt 0 ] && [ $((names + node + python)) -eq 0 ]; then
    exit "$status"
fi
only_bindings=$(( node + python > 0 && names == 0 ))
if [ "$only_bindings" = 0 ] || [ "$report_only" = 1 ]; then
    python3 "$root/bench/run.py" "$build_dir" "${others[@]}" || status=$?
fi
if [ "$report_only" = 0 ] && { [ "$python" = 1 ] || [ "$names$node" = 00 ]; }; then
    case "$build_dir" in /*) library=$build_dir ;; *) library=$root/$build_dir ;; esac
    export BLITZ_LIBRARY="$library/libblitz.so"
    { /usr/bin/python3 "$root/bindings/python/bench/executor_overhead.py" &&
      /usr/bin/python3 "$root/examples/python/numpy_kernel.py"; } |
        tee "$root/bindings/python/bench/results.txt" || status=1
fi
if [ "$report_only" = 0 ] && { [ "$node" = 1 ] || [ "$names$python" = 00 ]; }; then
    if command -v node >/dev/null 2>&1 && [ -f "$build_dir/bindings/node/blitz_node.node" ] &&
        [ -f "$build_dir/bindings/node/blitz_node_bench.node" ]; then
        node "$root/bindings/node/bench/hash.mjs" --build-dir "$build_dir" || status=$?
    else
        echo "bench: node: skipped (no node on PATH, or $build_dir/bindings/node/blitz_node{,_bench}.node not built)" >&2
    fi
fi
exit "$status"
