#!/usr/bin/env bash
# header_compile.sh <c|c++> <std> <include-dir> <source> <compiler> [compiler args...]
#
# Compiles <source> (which includes blitz.h and uses every declaration) with
# -std=<std> and the strictest warnings the compiler has, every warning an
# error. gcc gets an explicit list; clang gets -Weverything minus the
# warnings about C++98 compatibility (blitz.h is C99 and C++11 or later).
# Prints the command and the compiler's output; exit 0 when it compiles.
set -euo pipefail

if [ $# -lt 5 ]; then
    echo "usage: $0 <c|c++> <std> <include-dir> <source> <compiler> [args...]" >&2
    exit 2
fi
lang=$1 std=$2 inc=$3 src=$4
shift 4
compiler=("$@")

common=(-Wall -Wextra -Wpedantic -pedantic-errors -Werror
        -Wconversion -Wsign-conversion -Wshadow -Wcast-qual -Wcast-align
        -Wundef -Wredundant-decls -Wmissing-declarations -Wpadded
        -Wdouble-promotion -Wformat=2 -Wvla -Wwrite-strings)
# -Wpadded: the public structs have no hidden padding, so that a Rust
# #[repr(C)] or ctypes mirror of them is exact. -Wc++-compat and
# -Wdeclaration-after-statement: C code of any style can include the header.
if [ "$lang" = c ]; then
    strict=("${common[@]}" -Wstrict-prototypes -Wmissing-prototypes
            -Wold-style-definition -Wnested-externs -Wbad-function-cast
            -Wc++-compat -Wdeclaration-after-statement)
else
    strict=("${common[@]}" -Wold-style-cast -Wzero-as-null-pointer-constant
            -Wnon-virtual-dtor -Wextra-semi -Wctor-dtor-privacy -Woverloaded-virtual)
fi

if "${compiler[@]}" --version 2>/dev/null | grep -qi clang; then
    family=clang
    strict+=(-Weverything)
    if [ "$lang" = c++ ]; then
        strict+=(-Wno-c++98-compat -Wno-c++98-compat-pedantic)
    fi
else
    family=gcc
    if [ "$lang" = c ]; then
        strict+=(-Wjump-misses-init -Wlogical-op -Wduplicated-cond -Wduplicated-branches)
    else
        strict+=(-Wuseless-cast -Wlogical-op -Wduplicated-cond -Wduplicated-branches
                 -Wsuggest-override -Wnoexcept -Wstrict-null-sentinel)
    fi
fi

cmd=("${compiler[@]}" "-std=$std" "${strict[@]}" -I "$inc" -fsyntax-only -x "$lang" "$src")
echo "header_compile ($family, $lang, -std=$std):"
echo "  ${cmd[*]}"
if "${cmd[@]}"; then
    echo "ok: blitz.h compiles as $std with $family, no warnings"
else
    echo "FAIL: blitz.h does not compile warning-free as $std with $family" >&2
    exit 1
fi
