#!/usr/bin/env bash
# abi_demo.sh <source-root>
#
# Shows, once, that tools/abi-check.sh catches ABI changes. Everything
# happens on a throw-away copy of the source tree in a temporary directory
# (the real header, library and baseline are never touched):
#   1. the unmodified copy passes against abi/blitz.abi;
#   2. a changed signature (blz_pool_num_threads returning uint64_t instead
#      of uint32_t, in the copy's header and library) fails;
#   3. a changed type (blz_stats::steals as uint32_t, which moves every
#      later member) fails;
#   4. a removed function (blz_version_number) fails;
#   5. an added function (blz_abi_demo_added) fails too: adding a symbol
#      needs a deliberate baseline update;
#   6. after that update (--update, on the copy's baseline), it passes.
# Each case starts from the unmodified copy. Exit 0 when all six behave so;
# the temporary directory is removed.
set -euo pipefail

if [ $# -ne 1 ]; then
    echo "usage: $0 <source-root>" >&2
    exit 2
fi
src=$(cd "$1" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/blitz-abi-demo.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
copy="$tmp/src"
build="$tmp/build"

fail() { echo "abi_demo: FAIL: $*" >&2; exit 1; }

# The tree as git sees it (uncommitted work included, build outputs not).
"$(dirname "$0")/copy_tree.sh" "$src" "$copy"
cp -a "$copy/include" "$tmp/include.orig"
cp -a "$copy/lib" "$tmp/lib.orig"

restore() {
    rm -rf "$copy/include" "$copy/lib"
    cp -a "$tmp/include.orig" "$copy/include"
    cp -a "$tmp/lib.orig" "$copy/lib"
}

build_lib() {
    meson compile -C "$build" blitz > "$tmp/compile.log" 2>&1 || {
        cat "$tmp/compile.log"
        fail "the copy's library does not build"
    }
}

check() { # check <expected: pass|fail> <label>
    local status=0
    echo
    echo "=== $2: tools/abi-check.sh (expected to $1)"
    "$copy/tools/abi-check.sh" "$build" > "$tmp/check.log" 2>&1 || status=$?
    sed 's/^/    /' "$tmp/check.log"
    if [ "$1" = pass ] && [ "$status" -ne 0 ]; then
        fail "abi-check failed on $2"
    fi
    if [ "$1" = fail ] && [ "$status" -eq 0 ]; then
        fail "abi-check did not notice $2"
    fi
}

# edit <file> <sed expression> <text the edit must produce>: a change to the
# copy that is verified, so that a reworded source fails loudly here
# instead of silently testing nothing.
edit() {
    grep -qF "$3" "$1" && fail "'$3' is already in ${1#"$copy"/} before the edit"
    sed -i "$2" "$1"
    grep -qF "$3" "$1" || fail "could not edit ${1#"$copy"/} (is the pattern of tests/abi/abi_demo.sh out of date?)"
    echo "abi_demo: changed in the copy: ${1#"$copy"/}: $(grep -F "$3" "$1" | head -n 1)"
}

# expect_caught <label> <name the report must mention>: the edited copy is
# rebuilt and must fail the check, naming what changed.
expect_caught() {
    build_lib
    check fail "$1"
    grep -q "$2" "$tmp/check.log" || fail "the report of '$1' does not name $2"
    restore
}

echo "abi_demo: throw-away copy of $src in $copy"
# The library alone, unoptimized for speed of the demo: the baseline does
# not depend on -O (meson.build compiles the library with -g at any level).
meson setup "$build" "$copy" --buildtype=debug -Dtests=false -Dexamples=false \
    -Dwerror=false > "$tmp/setup.log" 2>&1 || {
    cat "$tmp/setup.log"
    fail "meson setup of the copy failed"
}
capi="$copy/lib/capi.cpp"
header="$copy/include/blitz.h"

build_lib
check pass "1. the unmodified copy"

edit "$header" 's/^BLZ_API uint32_t blz_pool_num_threads(/BLZ_API uint64_t blz_pool_num_threads(/' \
    'BLZ_API uint64_t blz_pool_num_threads('
edit "$capi" 's/^BLZ_API uint32_t blz_pool_num_threads(/BLZ_API uint64_t blz_pool_num_threads(/' \
    'BLZ_API uint64_t blz_pool_num_threads('
expect_caught "2. blz_pool_num_threads returning uint64_t" blz_pool_num_threads

edit "$header" 's/^    uint64_t steals;$/    uint32_t steals;/' '    uint32_t steals;'
expect_caught "3. blz_stats::steals as uint32_t" steals

edit "$header" 's|^BLZ_API uint32_t blz_version_number(void);$|/* blz_version_number removed by abi_demo.sh */|' \
    'blz_version_number removed by abi_demo.sh'
edit "$capi" '/^BLZ_API uint32_t blz_version_number(void)/s/^/\/\/ removed by abi_demo.sh: /' \
    '// removed by abi_demo.sh: '
expect_caught "4. blz_version_number removed" blz_version_number

edit "$header" 's/^BLZ_API uint32_t blz_version_number(void);$/&\n\/** Added by tests\/abi\/abi_demo.sh. *\/\nBLZ_API int32_t blz_abi_demo_added(void);/' \
    'BLZ_API int32_t blz_abi_demo_added(void);'
printf '\nBLZ_API int32_t blz_abi_demo_added(void) { return 42; }\n' >> "$capi"
# Exported as a new function would be: listed in the newest version node.
edit "$copy/abi/libblitz.map" 's/^    blz_broadcast;$/&\n    blz_abi_demo_added;/' '    blz_abi_demo_added;'
build_lib
check fail "5. an added function blz_abi_demo_added"
grep -q "blz_abi_demo_added" "$tmp/check.log" || fail "the report does not name blz_abi_demo_added"

echo
echo "=== 6. tools/abi-check.sh --update, on the copy's abi/blitz.abi"
"$copy/tools/abi-check.sh" "$build" --update | sed 's/^/    /'
check pass "6. the added function after the baseline update"

echo
echo "abi_demo: ok: the unchanged library passes; a changed signature, a changed struct and a removed"
echo "abi_demo: function fail; an added function fails until the baseline is updated on purpose"
