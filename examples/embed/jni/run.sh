#!/usr/bin/env bash
# examples/embed/jni/run.sh: builds and runs the JNI example.
#
#   run.sh                          against an installed libblitz (pkg-config blitz)
#   run.sh --libdir DIR --includedir DIR [--out DIR]
#                                   against a libblitz.so in DIR (a build directory)
#
# Builds, in --out (default: a temporary directory, removed afterwards):
#   classes/BlitzPool.class      javac -Xlint:all -Werror, plus javac -h for
#                                the header of the native methods
#   libblitz_jni.so              blitz_jni.c, C11, against the JDK's jni.h
#                                (JAVA_HOME is found from javac's real path)
#                                and libblitz, with an rpath to libblitz
# then runs `java -Xcheck:jni BlitzPool` and fails if the program fails or if
# the JVM's JNI checker prints a warning.
#
# Without a JDK (javac and jni.h), prints why and exits 77: the test is skipped.
# Debian: apt-get install openjdk-17-jdk-headless. $CC picks the C compiler.
# SANITIZER_PRELOAD, when set, names tools/sanitizer_preload.py: java then
# runs through it, which preloads the sanitizer runtime that a libblitz
# built with -Db_sanitize needs (the meson test sets it).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
libdir="" includedir="" out=""
while [ $# -gt 0 ]; do
    case "$1" in
        --libdir) libdir=$2; shift 2 ;;
        --includedir) includedir=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        *) echo "usage: $0 [--libdir DIR --includedir DIR] [--out DIR]" >&2; exit 2 ;;
    esac
done

if ! command -v javac >/dev/null 2>&1; then
    echo "jni: skipped: no JDK (javac not found); apt-get install openjdk-17-jdk-headless"
    exit 77
fi
JAVA_HOME=$(dirname "$(dirname "$(readlink -f "$(command -v javac)")")")
if [ ! -f "$JAVA_HOME/include/jni.h" ] || [ ! -x "$JAVA_HOME/bin/java" ]; then
    echo "jni: skipped: $JAVA_HOME (from javac) has no include/jni.h or bin/java"
    exit 77
fi
jni_md_dir=$(dirname "$(find "$JAVA_HOME/include" -name jni_md.h | head -n 1)")

if [ -z "$libdir" ]; then
    if ! pkg-config --exists blitz; then
        echo "jni: libblitz is not installed (pkg-config blitz); pass --libdir and --includedir" >&2
        exit 1
    fi
    blitz_cflags=$(pkg-config --cflags blitz)
    libdir=$(pkg-config --variable=libdir blitz)
    blitz_libs="$(pkg-config --libs blitz) -Wl,-rpath,$libdir"
else
    libdir=$(cd "$libdir" && pwd)
    includedir=$(cd "${includedir:?--includedir is needed with --libdir}" && pwd)
    blitz_cflags="-I$includedir"
    blitz_libs="-L$libdir -lblitz -Wl,-rpath,$libdir"
fi

if [ -z "$out" ]; then
    out=$(mktemp -d "${TMPDIR:-/tmp}/blitz-jni.XXXXXX")
    trap 'rm -rf "$out"' EXIT
else
    mkdir -p "$out"
    out=$(cd "$out" && pwd)
fi

echo "jni: JAVA_HOME=$JAVA_HOME ($("$JAVA_HOME/bin/java" -version 2>&1 | head -n 1))"
echo "jni: javac BlitzPool.java"
"$JAVA_HOME/bin/javac" -Xlint:all -Werror -d "$out/classes" -h "$out/include" "$here/BlitzPool.java"

echo "jni: ${CC:-cc} blitz_jni.c -> libblitz_jni.so"
# shellcheck disable=SC2086
${CC:-cc} -std=c11 -O2 -g -fPIC -shared \
    -Wall -Wextra -Wpedantic -Werror -Wconversion -Wsign-conversion -Wstrict-prototypes \
    -Wmissing-prototypes \
    -I"$out/include" -I"$JAVA_HOME/include" -I"$jni_md_dir" $blitz_cflags \
    "$here/blitz_jni.c" $blitz_libs -o "$out/libblitz_jni.so"

echo "jni: java -Xcheck:jni BlitzPool"
launcher=()
if [ -n "${SANITIZER_PRELOAD:-}" ]; then launcher=("$SANITIZER_PRELOAD" "$libdir/libblitz.so"); fi
status=0
"${launcher[@]}" "$JAVA_HOME/bin/java" -Xcheck:jni -XX:-UsePerfData -Djava.library.path="$out" -cp "$out/classes" BlitzPool \
    > "$out/java.log" 2>&1 || status=$?
cat "$out/java.log"
if [ "$status" -ne 0 ]; then
    echo "jni: FAIL: java exited with status $status" >&2
    exit 1
fi
# "WARNING: JNI local refs: N, exceeds capacity: M" is how the checker
# reports local references piling up (a worker's frame never popped).
if grep -Eq 'WARNING in native method|FATAL ERROR in native method|^Warning: JNI|WARNING: JNI local refs' "$out/java.log"; then
    echo "jni: FAIL: -Xcheck:jni reported a problem" >&2
    exit 1
fi
