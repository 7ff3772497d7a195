#!/usr/bin/env bash
# tools/soak.sh BUILD_DIR [SECONDS=600]
#
# The stress tests again and again, in turn, for SECONDS (not part of CI):
# sleep/wake cycles, the concurrency suites, and the fault-injection suite,
# from BUILD_DIR; and, when BUILD_DIR-chaos exists (./dev verify makes it),
# the chaos build's sleep/wake stress too. Every program is a pass/fail test
# on its own; the soak stops at the first failure and prints its output. No
# program starts after SECONDS; one that started runs to its end (the
# longest, sleep_wake, about 50 s here). Ends with a line per program and
# "soak: N passed, M failed".
set -euo pipefail

[ $# -ge 1 ] || { sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
BUILD_DIR=$(cd "$1" && pwd)
SECONDS_WANTED=${2:-600}
case "$SECONDS_WANTED" in '' | *[!0-9]*) echo "soak: SECONDS must be a number" >&2; exit 2 ;; esac

PROGRAMS=(
    tests/sleep_wake
    tests/concurrency_deque
    tests/concurrency_pool
    tests/fault/fault_destroy_under_load
    tests/fault/fault_create_destroy
    tests/fault/fault_fork
    tests/fault/fault_exceptions
    tests/fault/fault_ethread
)
RUN=()
for p in "${PROGRAMS[@]}"; do
    [ -x "$BUILD_DIR/$p" ] && RUN+=("$BUILD_DIR/$p")
done
[ -x "$BUILD_DIR-chaos/tests/fault/chaos_sleep" ] && RUN+=("$BUILD_DIR-chaos/tests/fault/chaos_sleep")
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
        if "$program" >"$LOG" 2>&1; then
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
