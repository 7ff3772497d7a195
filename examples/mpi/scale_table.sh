#!/usr/bin/env bash
# Measures the table of docs/scale-out.md: hybrid_primes at ranks x workers
# = 1x1, 1x2 and 2x1, plus 1x2 under mpirun's default binding (which pins a
# lone rank to one core). Prints one Markdown row per run, the load average
# before and after (a busy machine makes the figures worthless), and exits
# non-zero if a run's checks failed. Not a test: it reports timings.
#
# usage: examples/mpi/scale_table.sh [build dir=build] [N=30000000] [chunk=1000000] [repeats=3]
set -euo pipefail
build=${1:-build}
n=${2:-30000000}
chunk=${3:-1000000}
repeats=${4:-3}
exe=$build/examples/mpi/hybrid_primes
[ -x "$exe" ] || { echo "scale_table: $exe is not built (ninja -C $build)" >&2; exit 1; }
# mpirun refuses to start as root unless both are set; harmless otherwise.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

echo "N=$n chunk=$chunk, fastest of $repeats runs; load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "| ranks x workers | mpirun placement | wall s | CPU s | CPU/wall | speedup over 1x1 | claim us (per rank) | chunk ms (per rank) |"
echo "|---|---|---|---|---|---|---|---|"

status=0
base_wall=
sequential=
notes=
# label, workers per rank, then mpirun's arguments
run() {
    local label=$1 workers=$2
    shift 2
    local out
    out=$(mpirun "$@" "$exe" -w "$workers" -n "$n" -c "$chunk" -r "$repeats")
    grep -q '^mpi: [0-9]* passed, 0 failed$' <<<"$out" || { echo "$out" >&2; status=1; }
    # hybrid:     pi(N) = X  wall W s  CPU C s  CPU/wall R
    local wall cpu ratio claims chunk_ms
    read -r wall cpu ratio < <(awk '/^hybrid:/ {print $6, $9, $12}' <<<"$out")
    # the first run's: in the others, ranks waiting in MPI spin beside rank 0's sequential loop
    sequential=${sequential:-$(awk '/^sequential:/ {print $6}' <<<"$out")}
    # the per-rank lines (13 columns): claim_us and chunk_ms are the 11th and 12th
    claims=$(awk '/^ *[0-9]+ / && NF == 13 {printf "%s%s", sep, $11; sep=" / "}' <<<"$out")
    chunk_ms=$(awk '/^ *[0-9]+ / && NF == 13 {printf "%s%s", sep, $12; sep=" / "}' <<<"$out")
    base_wall=${base_wall:-$wall}
    printf '| %s | `%s` | %s | %s | %s | %.2f | %s | %s |\n' "$label" "$*" "$wall" "$cpu" "$ratio" \
        "$(awk -v b="$base_wall" -v w="$wall" 'BEGIN {print b / w}')" "$claims" "$chunk_ms"
    notes+=$(grep '^note:' <<<"$out" | sed "s/^/$label: /")$'\n' || true
}

run "1x1" 1 -np 1 --bind-to none
run "1x2" 2 -np 1 --bind-to none
run "2x1" 1 -np 2 --bind-to core
run "1x2, default binding" 2 -np 1
echo "sequential loop (rank 0 of the 1x1 run, no pool, no MPI): $sequential s"
printf '%s' "$notes" | grep . || true
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
exit "$status"
