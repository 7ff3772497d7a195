#!/usr/bin/env bash
# tools/abi-check.sh <builddir | path/to/libblitz.so> [--update] [--baseline FILE]
#   (./dev abi-check [--update] runs it on $BUILD_DIR; options may come first too)
#
# Compares the ABI of the built libblitz.so with the baseline abi/blitz.abi
# (written by Debian's abigail-tools: abidw, compared by abidiff) and fails
# on any difference abidiff reports: a removed, changed or ADDED function,
# a changed type reachable from a function (struct layout, member type,
# typedef, pointer, function pointer), a changed SONAME or symbol version.
#
# Adding a function is an ABI change too: it must come with an updated
# baseline, on purpose, in the same commit:
#     ./dev abi-check --update     (then commit abi/blitz.abi)
# A removal or an incompatible change also needs a new major version and
# soname (meson.build soversion, BLZ_VERSION_MAJOR, the version node).
#
# abidw needs DWARF: the library must be compiled with -g (meson.build adds
# -g to the library's flags; it changes no generated code). A library without
# debug info is refused, since the comparison would then see the symbol
# names only.
#
# What the baseline holds and why it is stable across rebuilds:
#   --exported-interfaces-only  the exported blz_* functions and the types
#                               reachable from them, nothing of lib/'s
#                               internals or of libstdc++;
#   --no-corpus-path --no-comp-dir-path --short-locs --no-show-locs
#                               no build directory, source path or line
#                               number (a comment edit changes nothing);
#   --no-elf-needed             not the DT_NEEDED list (libstdc++ is an
#                               implementation detail);
#   --no-parameter-names        parameter names are not ABI;
#   --type-id-style hash        ids from the types, so that an update
#                               shows as a small diff.
# The same sources give a byte-identical file at -O0 and -O3. Another
# compiler (clang) gives a textually different file that abidiff finds
# equivalent. Enum values and #define constants are not reachable from a
# symbol: tests/abi/header_c.c pins them at compile time.
set -euo pipefail

src=$(cd "$(dirname "$0")/.." && pwd)
baseline="$src/abi/blitz.abi"
update=0
target=""
usage() { echo "usage: $0 <builddir | path/to/libblitz.so> [--update] [--baseline FILE]" >&2; exit 2; }
while [ $# -gt 0 ]; do
    case "$1" in
        --update) update=1; shift ;;
        --baseline) [ $# -ge 2 ] || usage; baseline=$2; shift 2 ;;
        -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        -*) echo "abi-check: unknown option $1" >&2; usage ;;
        *) [ -z "$target" ] || usage; target=$1; shift ;;
    esac
done
[ -n "$target" ] || usage

for tool in abidw abidiff readelf; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "abi-check: $tool is not installed (apt-get install abigail-tools binutils)" >&2
        exit 1
    fi
done

if [ -d "$target" ]; then
    lib="$target/libblitz.so"
    outdir=$target
else
    lib=$target
    outdir=$(dirname "$target")
fi
if [ ! -e "$lib" ]; then
    echo "abi-check: no $lib (build first: ninja -C <builddir>)" >&2
    exit 1
fi
lib=$(readlink -f "$lib")

if ! LC_ALL=C readelf -S "$lib" | grep -q '\.debug_info'; then
    echo "abi-check: $lib has no DWARF debug info (.debug_info)." >&2
    echo "abi-check: abidw needs it to see the types of the functions; compile the library" >&2
    echo "abi-check: with -g (meson.build puts -g in lib_args)." >&2
    exit 1
fi

current="$outdir/blitz.abi.current"
abidw --exported-interfaces-only \
      --no-corpus-path --no-comp-dir-path --short-locs --no-show-locs \
      --no-elf-needed --no-parameter-names --type-id-style hash \
      --out-file "$current" "$lib"

# Every exported function must have come with its type from the DWARF.
# (The one variable, the thread-local blz_fork_stack_v1, is a symbol
# abidw records without a declaration; its type is blz_fork_stack, which
# the functions of the inline fork path reach.)
symbols=$(grep "<elf-symbol name='blz_" "$current" | grep -c "type='func-type'" || true)
decls=$(grep -c "<function-decl name='blz_" "$current" || true)
if [ "$symbols" -eq 0 ] || [ "$symbols" -ne "$decls" ]; then
    echo "abi-check: $symbols exported blz_* functions but $decls with a type in the DWARF of $lib" >&2
    exit 1
fi

if [ "$update" -eq 1 ]; then
    cp "$current" "$baseline"
    echo "abi-check: baseline $baseline updated from $lib ($symbols functions); commit it with the change"
    exit 0
fi

if [ ! -f "$baseline" ]; then
    echo "abi-check: no baseline $baseline (create it on purpose: $0 <builddir> --update)" >&2
    exit 1
fi

echo "abi-check: abidiff $baseline $current"
status=0
abidiff "$baseline" "$current" > "$outdir/blitz.abi.diff" 2>&1 || status=$?
if [ "$status" -ne 0 ]; then
    cat "$outdir/blitz.abi.diff"
    # abidiff's exit status is a bit set: 1 error, 2 usage, 4 ABI change,
    # 8 incompatible change (removed symbol).
    echo "abi-check: FAIL (abidiff exit status $status): the ABI of $(basename "$lib") differs from $baseline." >&2
    if [ $((status & 3)) -ne 0 ]; then
        echo "abi-check: abidiff itself failed (status bit 1 or 2): see its message above." >&2
    elif [ $((status & 8)) -ne 0 ]; then
        echo "abi-check: an incompatible change (a removed function or symbol version): it needs a new" >&2
        echo "abi-check: major version and soname (soversion, BLZ_VERSION_MAJOR, the version node), not a new baseline." >&2
    else
        echo "abi-check: a changed function or type breaks callers built against the old header: revert it," >&2
        echo "abi-check: or make a new major version. If the change is intended and compatible (an added" >&2
        echo "abi-check: function, a struct grown at its end behind struct_size), update the baseline on" >&2
        echo "abi-check: purpose, in the same commit:  ./dev abi-check --update && git add abi/blitz.abi" >&2
    fi
    exit 1
fi

if ! cmp -s "$baseline" "$current"; then
    # Same ABI, different text: another compiler or abigail version.
    echo "abi-check: note: $current differs textually from the baseline, but abidiff finds no ABI change"
fi
echo "abi-check: ok: $symbols functions of $(basename "$lib") match $(basename "$baseline")"
