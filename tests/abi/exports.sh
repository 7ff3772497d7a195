#!/usr/bin/env bash
# exports.sh <libblitz.so> <blitz.h> <0.1 blitz.h> <0.2 blitz.h> [nm]
#
# What the library exports, checked with nm:
#   * every defined dynamic symbol is a blz_* function in a version node
#     BLITZ_0.N (blz_x@@BLITZ_0.N), the one thread-local variable of the
#     inline fork path (blz_fork_stack_v1, type B), or a node itself
#     (BLITZ_0.N, type A); nothing else: no C++ symbol, no weak template
#     instance, no unversioned or local-version symbol leaks out;
#   * the exported symbols are exactly the BLZ_API declarations of blitz.h;
#   * the symbols of version 0.1 (the BLZ_API functions of the 0.1 header,
#     abi/v0.1/blitz.h) are exactly those of node BLITZ_0.1, where the
#     programs built against 0.1 look for them; those the 0.2 header
#     (abi/v0.2/blitz.h) added are exactly node BLITZ_0.2's, and every
#     later one is in BLITZ_0.3;
#   * the SONAME is libblitz.so.<major>.
set -euo pipefail

if [ $# -lt 4 ]; then
    echo "usage: $0 <libblitz.so> <blitz.h> <0.1 blitz.h> <0.2 blitz.h> [nm]" >&2
    exit 2
fi
lib=$1 header=$2 header_v01=$3 header_v02=$4 nm=${5:-nm}
nodes=(BLITZ_0.1 BLITZ_0.2 BLITZ_0.3)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

fail=0
"$nm" -D --defined-only "$lib" > "$tmp/nm.txt"
echo "exports: $nm -D --defined-only $(basename "$lib")"
sed 's/^/  /' "$tmp/nm.txt"

: > "$tmp/exported"
for node in "${nodes[@]}"; do : > "$tmp/in_$node"; done
while read -r _addr type name; do
    if [ "$type" = A ] && [[ " ${nodes[*]} " == *" $name "* ]]; then
        continue
    fi
    if [[ "$type" = T || ( "$type" = B && "$name" == blz_fork_stack_v1@@* ) ]] &&
        [[ "$name" =~ ^(blz_[a-z0-9_]+)@@(BLITZ_0\.[0-9]+)$ ]] &&
        [[ " ${nodes[*]} " == *" ${BASH_REMATCH[2]} "* ]]; then
        echo "${BASH_REMATCH[1]}" >> "$tmp/exported"
        echo "${BASH_REMATCH[1]}" >> "$tmp/in_${BASH_REMATCH[2]}"
        continue
    fi
    # An older version of a function whose default is in a newer node
    # (abi/libblitz.map: a symbol in two nodes), kept for programs linked
    # against that older node.
    if [ "$type" = T ] && [[ "$name" =~ ^(blz_[a-z0-9_]+)@(BLITZ_0\.[0-9]+)$ ]] &&
        [[ " ${nodes[*]} " == *" ${BASH_REMATCH[2]} "* ]]; then
        echo "${BASH_REMATCH[1]}" >> "$tmp/in_${BASH_REMATCH[2]}"
        echo "${BASH_REMATCH[1]}" >> "$tmp/older_versions"
        continue
    fi
    echo "FAIL: exported symbol outside the blz_*@@BLITZ_0.N functions: $type $name"
    fail=1
done < "$tmp/nm.txt"

for node in "${nodes[@]}"; do
    if ! grep -qx "$node" <(awk '$2 == "A" {print $3}' "$tmp/nm.txt"); then
        echo "FAIL: the version node $node is not defined"
        fail=1
    fi
done

# The BLZ_API declarations of a header: on each line starting with
# BLZ_API, the identifier right before the first "(" (a function), or, for
# "BLZ_API extern" (a variable), the one before its attributes or ";".
declared_in() {
    {
        grep -E '^BLZ_API[[:space:]]' "$1" | grep -vE '^BLZ_API[[:space:]]+extern[[:space:]]' |
            sed -E 's/\(.*//; s/.*[^A-Za-z0-9_]([A-Za-z_][A-Za-z0-9_]*)[[:space:]]*$/\1/'
        grep -E '^BLZ_API[[:space:]]+extern[[:space:]]' "$1" |
            sed -E 's/[[:space:]]*(__attribute__.*|;.*)$//; s/.*[^A-Za-z0-9_]([A-Za-z_][A-Za-z0-9_]*)$/\1/'
    } | sort -u || true  # grep finds no variable in the older headers
}
declared_in "$header" > "$tmp/declared"
declared_in "$header_v01" > "$tmp/declared_v01"
declared_in "$header_v02" > "$tmp/declared_v02_header"
sort -u "$tmp/exported" -o "$tmp/exported"
for node in "${nodes[@]}"; do sort -u "$tmp/in_$node" -o "$tmp/in_$node"; done
touch "$tmp/older_versions"
sort -u "$tmp/older_versions" -o "$tmp/older_versions"
# A later node holds the functions added in its version and the new
# versions of older ones; every older version has its default elsewhere.
for node in BLITZ_0.2 BLITZ_0.3; do
    comm -23 "$tmp/in_$node" "$tmp/older_versions" > "$tmp/added_in_$node"
    mv "$tmp/added_in_$node" "$tmp/in_$node"
done
missing_default=$(comm -23 "$tmp/older_versions" "$tmp/exported")
if [ -n "$missing_default" ]; then
    echo "FAIL: an older version without a default version:" $missing_default
    fail=1
fi
comm -23 "$tmp/declared_v02_header" "$tmp/declared_v01" > "$tmp/declared_v02"
comm -23 "$tmp/declared" "$tmp/declared_v02_header" > "$tmp/declared_v03"
if ! cmp -s "$tmp/declared_v01" "$tmp/in_BLITZ_0.1"; then
    echo "FAIL: node BLITZ_0.1 is not exactly the functions of the 0.1 header:"
    diff "$tmp/declared_v01" "$tmp/in_BLITZ_0.1" || true
    fail=1
fi
if ! cmp -s "$tmp/declared_v02" "$tmp/in_BLITZ_0.2"; then
    echo "FAIL: node BLITZ_0.2 is not exactly the functions the 0.2 header added:"
    diff "$tmp/declared_v02" "$tmp/in_BLITZ_0.2" || true
    fail=1
fi
if ! cmp -s "$tmp/declared_v03" "$tmp/in_BLITZ_0.3"; then
    echo "FAIL: node BLITZ_0.3 is not exactly the symbols added since the 0.2 header:"
    diff "$tmp/declared_v03" "$tmp/in_BLITZ_0.3" || true
    fail=1
fi

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
echo "ok: $(wc -l < "$tmp/exported") blz_* symbols, exactly those of $(basename "$header"):" \
    "$(wc -l < "$tmp/in_BLITZ_0.1") in BLITZ_0.1 (the 0.1 header's), $(wc -l < "$tmp/in_BLITZ_0.2") in BLITZ_0.2" \
    "(the 0.2 header's additions), $(wc -l < "$tmp/in_BLITZ_0.3") in BLITZ_0.3; SONAME $soname"
