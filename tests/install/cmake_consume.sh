#!/usr/bin/env bash
# cmake_consume.sh prefix <source-root> | system
#
# A CMake project consumes an installed libblitz the documented way,
# find_package(blitz 0.2 REQUIRED) and target_link_libraries(... blitz::blitz),
# in a temporary directory outside the source tree (removed at the end):
#
# prefix   meson setup --prefix=<tmp>/prefix, meson install; the project
#          finds it through CMAKE_PREFIX_PATH (test install_cmake)
# system   the libblitz of the Debian packages, found with no hint at all
#          (tests/deb/packages.sh, once libblitz-dev is installed)
#
# Checks: cmake_app/ (C99 and C++ programs, fib by fork-join) configures,
# builds and runs, each program loading the installed library; the C++ one
# compiles only because blitz::blitz raises CMAKE_CXX_STANDARD 11 to 17; a
# project with C alone (no C++ enabled) links blitz::blitz too; and
# SameMajorVersion: with 0.3.0 installed, find_package(blitz 0.3.0 EXACT),
# (blitz 0.3), (blitz 0.2) and (blitz 0.1) succeed, (blitz 0.4) and (blitz 1.0) fail.
set -euo pipefail

usage() { echo "usage: $0 prefix <source-root> | system" >&2; exit 2; }
[ $# -ge 1 ] || usage
mode=$1
here=$(cd "$(dirname "$0")" && pwd)
command -v cmake >/dev/null 2>&1 || { echo "cmake_consume: cmake is not installed (apt-get install cmake)" >&2; exit 1; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/blitz-cmake.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"

step() { echo; echo "=== $*"; }
fail() { echo "cmake_consume($mode): FAIL: $*" >&2; exit 1; }
run_logged() { # run_logged <log> <command...>: quiet unless it fails
    local log=$1
    shift
    "$@" > "$log" 2>&1 || { cat "$log"; fail "$*"; }
}

cmake_args=()
case "$mode" in
prefix)
    [ $# -eq 2 ] || usage
    src=$(cd "$2" && pwd)
    prefix="$tmp/prefix"
    step "meson setup --prefix=$prefix, build, meson install"
    run_logged setup.log meson setup build "$src" --prefix="$prefix" \
        -Dtests=false -Dexamples=false -Dcmake_package=enabled
    run_logged compile.log meson compile -C build
    run_logged install.log meson install -C build
    config=$(find "$prefix" -name blitzConfig.cmake)
    [ -n "$config" ] || fail "meson install put no blitzConfig.cmake under $prefix"
    libdir=$(cd "$(dirname "$config")/../.." && pwd)
    cmake_args=("-DCMAKE_PREFIX_PATH=$prefix")
    ;;
system)
    [ $# -eq 1 ] || usage
    libdir=/usr/lib/$(dpkg-architecture -qDEB_HOST_MULTIARCH)
    ;;
*) usage ;;
esac
echo "    expected library: $libdir/libblitz.so.0"
for f in blitzConfig.cmake blitzConfigVersion.cmake; do
    [ -f "$libdir/cmake/blitz/$f" ] || fail "no $libdir/cmake/blitz/$f"
done

step "cmake_app/: find_package(blitz 0.2 REQUIRED), blitz::blitz"
cp -r "$here/cmake_app" app
run_logged configure.log cmake -S app -B app-build "${cmake_args[@]}"
grep -F "blitz_DIR:PATH=$libdir/cmake/blitz" app-build/CMakeCache.txt | sed 's/^/    /' ||
    fail "blitz_DIR is not $libdir/cmake/blitz: $(grep blitz_DIR app-build/CMakeCache.txt)"
run_logged build.log cmake --build app-build --verbose
grep -E -- '-std=(gnu|c)\+\+17' build.log >/dev/null ||
    { cat build.log; fail "fork_join.cpp was not compiled as C++17 (blitz::blitz's cxx_std_17)"; }
for prog in fork_join_c fork_join_cpp; do
    step "app-build/$prog"
    # Real paths: on a merged-/usr system the loader may name /lib for /usr/lib.
    loaded=$(ldd "app-build/$prog" | sed -n 's/^[[:space:]]*libblitz\.so\.0 => \(.*\) (0x.*/\1/p')
    [ -n "$loaded" ] && [ "$(readlink -f "$loaded")" = "$(readlink -f "$libdir/libblitz.so.0")" ] ||
        { ldd "app-build/$prog"; fail "$prog does not load $libdir/libblitz.so.0"; }
    "app-build/$prog" || fail "$prog"
done

# project() and find_package() only: each case is a configure, no build. A
# language must be enabled, as in any real project: CMake searches
# lib/<multiarch>/cmake only once it knows the architecture.
find_only() { # find_only <dir> <languages> <find_package arguments>
    mkdir -p "$1"
    printf 'cmake_minimum_required(VERSION 3.16)\nproject(%s %s)\nfind_package(%s)\n' \
        "$1" "$2" "$3" > "$1/CMakeLists.txt"
}

step "C alone: project(LANGUAGES C) links blitz::blitz"
find_only c_only C "blitz 0.2 REQUIRED"
cp app/fork_join.c c_only/
printf 'add_executable(fork_join_c fork_join.c)\ntarget_link_libraries(fork_join_c PRIVATE blitz::blitz)\n' \
    >> c_only/CMakeLists.txt
run_logged c_only.log cmake -S c_only -B c_only/build "${cmake_args[@]}"
run_logged c_only-build.log cmake --build c_only/build
c_only/build/fork_join_c || fail "fork_join_c of the C-only project"

step "SameMajorVersion"
version=$(sed -n 's/^set(PACKAGE_VERSION "\(.*\)")$/\1/p' "$libdir/cmake/blitz/blitzConfigVersion.cmake")
[ -n "$version" ] || fail "no PACKAGE_VERSION in blitzConfigVersion.cmake"
echo "    installed version: $version"
IFS=. read -r major minor _ <<<"$version"
requests=("$version EXACT:found" "$major.$minor:found" "$major.$((minor + 1)):not found" "$((major + 1)).0:not found")
# An older minor of the same major: what the version nodes keep running.
[ "$minor" -eq 0 ] || requests+=("$major.$((minor - 1)):found")
i=0
for request in "${requests[@]}"; do
    want=${request#*:}
    args=${request%:*}
    i=$((i + 1))
    dir="version$i"
    find_only "$dir" C "blitz $args REQUIRED"
    got=found
    cmake -S "$dir" -B "$dir/build" "${cmake_args[@]}" > "$dir.log" 2>&1 || got="not found"
    echo "    find_package(blitz $args): $got"
    if [ "$got" != "$want" ]; then
        cat "$dir.log"
        fail "find_package(blitz $args) against $version: $got, expected $want"
    fi
    if [ "$want" = "not found" ]; then
        # CMake found the file and turned it down for its version.
        grep -q 'considered but not accepted' "$dir.log" ||
            { cat "$dir.log"; fail "find_package(blitz $args) failed, but not on the version"; }
    fi
done

echo
echo "cmake_consume($mode): ok"
