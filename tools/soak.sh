#!/usr/bin/env bash
# tools/soak.sh BUILD_DIR [SECONDS=600]
#
# The stress tests again and again, in turn, for SECONDS (not part of CI):
# sleep/wake cycles, the concurrency suites, the fault-injection suite and
# the call-sequence fuzzer (two minutes a run, a new seed each), from
# BUILD_DIR; and, when BUILD_DIR-chaos exists (./dev verify makes it), the
# chaos build's sleep/wake stress and fuzzer too. Every program is a
# pass/fail test on its own; the soak stops at the first failure and prints
# its output (a fuzzer's names the seed that replays it). No program starts
# after SECONDS; one that started runs to its end (the longest, the fuzzer,
# about 125 s). Ends with a line per program and "soak: N passed, M failed".
set -euo pipefail

[ $# -ge 1 ] || { sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
BUILD_DIR=$(cd "$1" && pwd)
SECONDS_WANTED=${2:-600}
case "$SECONDS_WANTED" in '' | *[!0-9]*) echo "soak: SECONDS must be a number" >&2; exit 2 ;; esac

# A program and its arguments, one string each (split on spaces).
FUZZ="tests/fault/fuzz_calls --seconds 120"
PROGRAMS=(
    tests/sleep_wake
    tests/concurrency_deque
    tests/concurrency_pool
    tests/fault/fault_destroy_under_load
    tests/fault/fault_create_destroy
    tests/fault/fault_fork
    tests/fault/fault_exceptions
    tests/fault/fault_ethread
    "$FUZZ"
)
RUN=()
for p in "${PROGRAMS[@]}"; do
    [ -x "$BUILD_DIR/${p%% *}" ] && RUN+=("$BUILD_DIR/$p")
done
for p in tests/fault/chaos_sleep "$FUZZ"; do
    [ -x "$BUILD_DIR-chaos/${p%% *}" ] && RUN+=("$BUILD_DIR-chaos/$p")
done
[ ${#RUN[@]} -gt 0 ] || { echo "soak: no test programs in $BUILD_DIR (build it first)" >&2; exit 2; }

declare -A RUNS
LOG=$(mktemp)
trap 'rm -f "$LOG"' EXIT
passed=0
failed=0
deadline=$(($(date +%s) + SECONDS_WANTED))
echo "soak: ${#RUN[@]} programs for ${SECONDS_WANTED} s"
while [ "$(date +%s)" -lt "$deadline" ] && [ "$failed" = 0 ]; do
    for program in "${RUN[@]}"; do
        [ "$(date +%s)" -lt "$deadline" ] || break
        read -r -a command <<<"$program"
        if "${command[@]}" >"$LOG" 2>&1; then
            passed=$((passed + 1))
            RUNS[$program]=$((${RUNS[$program]:-0} + 1))
        else
            failed=$((failed + 1))
            echo "soak: FAILED: $program (after $passed passing runs); its output:"
            tail -60 "$LOG"
            break
        fi
    done
done
for program in "${RUN[@]}"; do
    echo "  ${program#"$(dirname "$BUILD_DIR")"/}: ${RUNS[$program]:-0} runs passed"
done
echo "soak: $passed passed, $failed failed"
[ "$failed" = 0 ]
