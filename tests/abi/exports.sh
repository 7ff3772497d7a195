#!/usr/bin/env bash
# exports.sh <libblitz.so> <blitz.h> [nm]
#
# What the library exports, checked with nm:
#   * every defined dynamic symbol is a blz_* function in the version node
#     BLITZ_0.1 (blz_x@@BLITZ_0.1), or the node itself (BLITZ_0.1, type A);
#     nothing else: no C++ symbol, no weak template instance, no unversioned
#     or local-version symbol leaks out;
#   * the exported functions are exactly the BLZ_API functions of blitz.h;
#   * the SONAME is libblitz.so.<major>.
set -euo pipefail

if [ $# -lt 2 ]; then
    echo "usage: $0 <libblitz.so> <blitz.h> [nm]" >&2
    exit 2
fi
lib=$1 header=$2 nm=${3:-nm}
node=BLITZ_0.1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

fail=0
"$nm" -D --defined-only "$lib" > "$tmp/nm.txt"
echo "exports: $nm -D --defined-only $(basename "$lib")"
sed 's/^/  /' "$tmp/nm.txt"

: > "$tmp/exported"
while read -r _addr type name; do
    if [ "$type" = A ] && [ "$name" = "$node" ]; then
        continue
    fi
    if [ "$type" = T ] && [[ "$name" =~ ^(blz_[a-z0-9_]+)@@${node//./\\.}$ ]]; then
        echo "${BASH_REMATCH[1]}" >> "$tmp/exported"
        continue
    fi
    echo "FAIL: exported symbol outside the blz_*@@$node functions: $type $name"
    fail=1
done < "$tmp/nm.txt"

if ! grep -qx "$node" <(awk '$2 == "A" {print $3}' "$tmp/nm.txt"); then
    echo "FAIL: the version node $node is not defined"
    fail=1
fi

# The BLZ_API function declarations of the header: the identifier right
# before the first "(" on each line starting with BLZ_API.
grep -E '^BLZ_API[[:space:]]' "$header" |
    sed -E 's/\(.*//; s/.*[^A-Za-z0-9_]([A-Za-z_][A-Za-z0-9_]*)[[:space:]]*$/\1/' |
    sort -u > "$tmp/declared"
sort -u "$tmp/exported" -o "$tmp/exported"

if [ ! -s "$tmp/declared" ]; then
    echo "FAIL: no BLZ_API declaration found in $header"
    fail=1
fi
missing=$(comm -23 "$tmp/declared" "$tmp/exported")
extra=$(comm -13 "$tmp/declared" "$tmp/exported")
if [ -n "$missing" ]; then
    echo "FAIL: declared in $(basename "$header") but not exported:" $missing
    fail=1
fi
if [ -n "$extra" ]; then
    echo "FAIL: exported but not declared in $(basename "$header"):" $extra
    fail=1
fi

soname=$(LC_ALL=C readelf -d "$lib" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
if [[ ! "$soname" =~ ^libblitz\.so\.[0-9]+$ ]]; then
    echo "FAIL: SONAME is '$soname', expected libblitz.so.<major>"
    fail=1
fi

if [ "$fail" -ne 0 ]; then
    exit 1
fi
echo "ok: $(wc -l < "$tmp/exported") blz_* functions, all in $node, exactly those of $(basename "$header"); SONAME $soname"
