#!/usr/bin/env bash
# consume.sh <pkgconfig|subproject> <source-root>
#
# Installs and consumes libblitz the way a user does, entirely in a
# temporary directory outside the source tree (removed at the end):
#
# pkgconfig   meson setup --prefix=<tmp>/prefix, meson install; checks the
#             installed files (library with its soname links, every header
#             of include/, blitz.pc); builds consumer.c (C99) and
#             consumer.cpp (C++17) with
#                 cc ... $(pkg-config --cflags --libs blitz)
#             and the meson project app/ (dependency('blitz') found through
#             pkg-config); runs all four programs against the installed
#             library.
# subproject  the meson project app/ with a copy of the libblitz tree in
#             subprojects/libblitz and no installed libblitz: dependency
#             ('blitz') takes the fallback; builds and runs both programs.
#
# Compilers: $CC and $CXX (meson passes its own), else cc and c++.
set -euo pipefail

if [ $# -ne 2 ]; then
    echo "usage: $0 <pkgconfig|subproject> <source-root>" >&2
    exit 2
fi
mode=$1
src=$(cd "$2" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
CC=${CC:-cc}
CXX=${CXX:-c++}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/blitz-consume.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"

step() { echo; echo "=== $*"; }
fail() { echo "consume($mode): FAIL: $*" >&2; exit 1; }
run_logged() { # run_logged <log> <command...>: quiet unless it fails
    local log=$1
    shift
    if ! "$@" > "$log" 2>&1; then
        cat "$log"
        fail "$*"
    fi
}

# The app project and the two programs, outside the source tree.
mkdir -p app
cp "$here/app/meson.build" "$here/consumer.c" "$here/consumer.cpp" app/

case "$mode" in
pkgconfig)
    prefix="$tmp/prefix"
    step "meson setup --prefix=$prefix, build, meson install"
    run_logged setup.log meson setup build "$src" --prefix="$prefix" \
        -Dtests=false -Dexamples=false
    run_logged compile.log meson compile -C build
    run_logged install.log meson install -C build
    sed 's/^/    /' install.log

    step "installed files"
    pc=$(find "$prefix" -name blitz.pc -path '*/pkgconfig/*' | head -n 1)
    [ -n "$pc" ] || fail "no blitz.pc under $prefix"
    export PKG_CONFIG_PATH
    PKG_CONFIG_PATH=$(dirname "$pc")
    pkg-config --validate blitz || fail "pkg-config --validate blitz"
    libdir=$(pkg-config --variable=libdir blitz)
    includedir=$(pkg-config --variable=includedir blitz)
    version=$(pkg-config --modversion blitz)
    echo "    blitz.pc: $pc (version $version)"
    echo "    libdir:   $libdir"
    [ "$(pkg-config --variable=prefix blitz)" = "$prefix" ] || fail "blitz.pc prefix is not $prefix"
    real="$libdir/libblitz.so.$version"
    [ -f "$real" ] && [ ! -L "$real" ] || fail "no library file $real"
    soname=$(LC_ALL=C readelf -d "$real" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
    major=${version%%.*}
    [ "$soname" = "libblitz.so.$major" ] || fail "SONAME $soname, expected libblitz.so.$major"
    [ "$(readlink "$libdir/libblitz.so.$major")" = "libblitz.so.$version" ] ||
        fail "libblitz.so.$major is not a link to libblitz.so.$version"
    [ "$(readlink "$libdir/libblitz.so")" = "libblitz.so.$major" ] ||
        fail "libblitz.so is not a link to libblitz.so.$major"
    echo "    libblitz.so -> libblitz.so.$major -> libblitz.so.$version (SONAME $soname)"
    for h in "$src"/include/*.h "$src"/include/*.hpp; do
        [ -e "$h" ] || continue
        name=$(basename "$h")
        cmp -s "$h" "$includedir/$name" || fail "header $name is not installed in $includedir"
        echo "    $includedir/$name"
    done

    export LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    cflags=$(pkg-config --cflags blitz)
    libs=$(pkg-config --libs blitz)
    echo "    pkg-config --cflags --libs blitz: $cflags $libs"

    step "C program: $CC -std=c99 consumer.c \$(pkg-config --cflags --libs blitz)"
    mkdir -p by-hand
    # shellcheck disable=SC2086
    $CC -std=c99 -Wall -Wextra -Wpedantic -Werror -Wconversion -Wsign-conversion \
        $cflags app/consumer.c $libs -o by-hand/consumer_c || fail "building consumer.c"
    ldd by-hand/consumer_c | grep -F "libblitz.so.$major => $libdir/libblitz.so.$major " >/dev/null ||
        { ldd by-hand/consumer_c; fail "consumer_c does not load $libdir/libblitz.so.$major"; }
    by-hand/consumer_c || fail "consumer_c"

    step "C++ program: $CXX -std=c++17 consumer.cpp \$(pkg-config --cflags --libs blitz)"
    # shellcheck disable=SC2086
    $CXX -std=c++17 -Wall -Wextra -Wpedantic -Werror -Wold-style-cast -Wconversion \
        -Wsign-conversion $cflags app/consumer.cpp $libs -o by-hand/consumer_cpp ||
        fail "building consumer.cpp"
    by-hand/consumer_cpp || fail "consumer_cpp"

    step "meson project app/: dependency('blitz') through pkg-config"
    run_logged app-setup.log meson setup app-build app
    grep -E "Run-time dependency blitz found: YES" app-setup.log | sed 's/^/    /' ||
        { cat app-setup.log; fail "dependency('blitz') not found through pkg-config"; }
    ;;

subproject)
    step "meson project app/ with subprojects/libblitz (a copy of the tree), no installed libblitz"
    "$here/../abi/copy_tree.sh" "$src" app/subprojects/libblitz
    # Even if a libblitz is installed on this machine, the fallback is
    # forced (the system's pkg-config path stays: atomic_ops is found there).
    unset PKG_CONFIG_PATH
    run_logged app-setup.log meson setup app-build app --force-fallback-for=blitz
    # libblitz's meson.build overrides 'blitz' with its blitz_dep, so meson
    # reports the dependency as "overridden" once the subproject ran.
    grep -E "Executing subproject libblitz|Subproject libblitz finished|Dependency blitz (from subproject subprojects/libblitz )?found: YES" \
        app-setup.log | sed 's/^/    /'
    grep -q "Subproject libblitz finished" app-setup.log &&
        grep -Eq "Dependency blitz (from subproject subprojects/libblitz )?found: YES" app-setup.log ||
        { cat app-setup.log; fail "dependency('blitz') did not come from the subproject"; }
    ;;

*)
    echo "usage: $0 <pkgconfig|subproject> <source-root>" >&2
    exit 2
    ;;
esac

run_logged app-compile.log meson compile -C app-build
for prog in consumer_c consumer_cpp; do
    step "app-build/$prog"
    "app-build/$prog" || fail "$prog (meson project)"
done

echo
echo "consume($mode): ok"
