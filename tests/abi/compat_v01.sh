#!/usr/bin/env bash
# compat_v01.sh <compat_v01 program> [nm]
#
# The program was compiled against the 0.1 header (tests/abi/compat_v01.c):
# every libblitz symbol it needs must be bound to version node BLITZ_0.1,
# as in a program linked against the 0.1 library itself; then it runs
# against the library built here and must pass its own checks.
set -euo pipefail
prog=$1 nm=${2:-nm}
fail=0
while read -r _type name; do
    case "$name" in
        blz_*@BLITZ_0.1) ;;
        blz_*) echo "FAIL: $name is not bound to BLITZ_0.1"; fail=1 ;;
    esac
done < <("$nm" -D --undefined-only "$prog")
bound=$("$nm" -D --undefined-only "$prog" | grep -c 'blz_' || true)
if [ "$bound" -lt 17 ]; then
    echo "FAIL: the program binds only $bound blz_* functions; it should use all 17 of 0.1"
    fail=1
fi
echo "compat_v01: $bound blz_* symbols, all @BLITZ_0.1"
"$prog" || fail=1
exit "$fail"
