#!/usr/bin/env bash
# symbols_demo.sh <source-root>
#
# Shows, once, that the package build catches a change of the exported
# symbols. On a throw-away copy of the tree in a temporary directory (the
# real map and symbols file are never touched), each case builds the
# architecture-dependent packages (tools/deb.sh -B: no docs) and must fail
# in dpkg-gensymbols, which names the symbol:
#   1. blz_task_wait_for removed from the version script abi/libblitz.map;
#   2. a function added to the library and to the map, with
#      debian/libblitz0.symbols not regenerated.
# Each case starts from the unmodified copy; deb_packages shows that the
# unmodified tree builds. Exit 0 when both fail so.
set -euo pipefail

if [ $# -ne 1 ]; then
    echo "usage: $0 <source-root>" >&2
    exit 2
fi
src=$(cd "$1" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/blitz-deb-demo.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
copy="$tmp/src"

fail() { echo "deb_symbols_demo: FAIL: $*" >&2; exit 1; }

"$src/tests/abi/copy_tree.sh" "$src" "$copy"
cp "$copy/abi/libblitz.map" "$tmp/libblitz.map.orig"
cp "$copy/lib/capi.cpp" "$tmp/capi.cpp.orig"

# change <file> <sed expression> <line before> <line after>: an edit of the
# copy that is verified (a line that must be there before and one that must
# be there after; "" for none), so that a reworded source fails here
# instead of silently testing nothing.
change() {
    local file=$1 expr=$2 before=$3 after=$4
    if [ -n "$before" ] && ! grep -qxF -- "$before" "$file"; then
        fail "no line '$before' in ${file#"$copy"/} (is tests/deb/symbols_demo.sh out of date?)"
    fi
    sed -i "$expr" "$file"
    if [ -n "$before" ] && grep -qxF -- "$before" "$file"; then
        fail "could not remove '$before' from ${file#"$copy"/}"
    fi
    if [ -n "$after" ] && ! grep -qxF -- "$after" "$file"; then
        fail "could not add '$after' to ${file#"$copy"/}"
    fi
    echo "deb_symbols_demo: in the copy's ${file#"$copy"/}: ${before:+removed '$before'}${after:+added '$after'}"
}

# expect_caught <label> <line of dpkg-gensymbols' diff>: the package build
# of the edited copy fails, and dpkg-gensymbols reports that line.
expect_caught() {
    local status=0
    echo
    echo "=== $1: tools/deb.sh -B (expected to fail in dpkg-gensymbols)"
    "$copy/tools/deb.sh" "$tmp/out" -B > "$tmp/deb.log" 2>&1 || status=$?
    [ "$status" -ne 0 ] || { cat "$tmp/deb.log"; fail "the package build did not notice $1"; }
    grep -q '^dpkg-gensymbols: error: some new symbols appeared\|^dpkg-gensymbols: error: some symbols or patterns disappeared' \
        "$tmp/out/build.log" || { cat "$tmp/out/build.log"; fail "$1 failed the build, but not in dpkg-gensymbols"; }
    grep -E "$2" "$tmp/out/build.log" | sed 's/^/    /' ||
        { cat "$tmp/out/build.log"; fail "dpkg-gensymbols' report of $1 has no line matching $2"; }
    grep '^dpkg-gensymbols: ' "$tmp/out/build.log" | sed 's/^/    /'
    cp "$tmp/libblitz.map.orig" "$copy/abi/libblitz.map"
    cp "$tmp/capi.cpp.orig" "$copy/lib/capi.cpp"
}

echo "deb_symbols_demo: throw-away copy of $src in $copy"

change "$copy/abi/libblitz.map" '/^    blz_task_wait_for;$/d' '    blz_task_wait_for;' ''
expect_caught "1. blz_task_wait_for removed from the map" '^-.*blz_task_wait_for@BLITZ_0\.2'

# extern "C", as blitz.h declares the others: the map names C symbols.
printf '\nextern "C" BLZ_API int32_t blz_deb_demo_added(void) { return 42; }\n' >> "$copy/lib/capi.cpp"
change "$copy/abi/libblitz.map" 's/^    blz_broadcast;$/&\n    blz_deb_demo_added;/' '' '    blz_deb_demo_added;'
expect_caught "2. blz_deb_demo_added added to the library and the map" '^\+.*blz_deb_demo_added@BLITZ_0\.2'

echo
echo "deb_symbols_demo: ok: a symbol removed from the version script and one added to it each fail"
echo "deb_symbols_demo: the package build until debian/libblitz0.symbols is regenerated on purpose"
