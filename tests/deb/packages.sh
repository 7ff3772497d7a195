#!/usr/bin/env bash
# packages.sh <source-root>
#
# The Debian packages, built and used as a user would, in a temporary
# directory outside the tree (removed at the end):
#   1. tools/deb.sh (./dev deb) builds libblitz0, libblitz-dev and
#      libblitz-doc with dpkg-buildpackage; lintian finds no error;
#   2. each package holds its files, with its Multi-Arch field, and
#      libblitz0's symbols file lists every symbol of abi/libblitz.map;
#   3. as root: dpkg -i installs the three, then with no path given to any
#      tool: consumer.c and consumer.cpp built with
#      `pkg-config --cflags --libs blitz`, the CMake project of
#      tests/install/cmake_consume.sh, the Python package (import blitz) and
#      the Rust crates (through pkg-config, then without it) find and run
#      the installed library; dpkg --purge removes the three, also when a
#      step failed (trap).
# Not root: steps 1 and 2 run, then exit 77 (skipped): dpkg -i needs root.
# Also skipped when a libblitz package is installed already: the test
# could not put the machine back as it found it.
set -euo pipefail

if [ $# -ne 1 ]; then
    echo "usage: $0 <source-root>" >&2
    exit 2
fi
src=$(cd "$1" && pwd)
packages=(libblitz0 libblitz-dev libblitz-doc)

tmp=$(mktemp -d "${TMPDIR:-/tmp}/blitz-deb.XXXXXX")
installed=0
cleanup() {
    if [ "$installed" -eq 1 ]; then
        echo "=== dpkg --purge ${packages[*]}"
        # In a session of its own: on a timeout meson sends SIGTERM to the
        # test's process group and SIGKILL half a second later, which would
        # stop dpkg halfway; this dpkg runs to the end either way.
        setsid --wait dpkg --purge "${packages[@]}" > "$tmp/purge.log" 2>&1 || cat "$tmp/purge.log"
    fi
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 143' TERM INT HUP

step() { echo; echo "=== $*"; }
fail() { echo "deb_packages: FAIL: $*" >&2; exit 1; }
run_logged() { # run_logged <log> <command...>: quiet unless it fails
    local log=$1
    shift
    "$@" > "$log" 2>&1 || { cat "$log"; fail "$*"; }
}

step "1. tools/deb.sh $tmp/out"
"$src/tools/deb.sh" "$tmp/out"

step "2. the packages"
version=$(cd "$src" && dpkg-parsechangelog -S Version)
arch=$(dpkg-architecture -qDEB_HOST_ARCH)
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
libdir=/usr/lib/$multiarch
upstream=${version%-*}
declare -A deb multi_arch contents
deb[libblitz0]="$tmp/out/libblitz0_${version}_$arch.deb"
deb[libblitz-dev]="$tmp/out/libblitz-dev_${version}_$arch.deb"
deb[libblitz-doc]="$tmp/out/libblitz-doc_${version}_all.deb"
multi_arch=([libblitz0]=same [libblitz-dev]=same [libblitz-doc]=foreign)
contents[libblitz0]="$libdir/libblitz.so.0 $libdir/libblitz.so.$upstream"
contents[libblitz-dev]="/usr/include/blitz.h /usr/include/blitz.hpp /usr/include/blitz_algorithms.hpp $libdir/libblitz.so
    $libdir/pkgconfig/blitz.pc $libdir/cmake/blitz/blitzConfig.cmake
    $libdir/cmake/blitz/blitzConfigVersion.cmake"
contents[libblitz-doc]="/usr/share/doc/libblitz-dev/html/index.html /usr/share/doc/libblitz-dev/html/blitz_8h.html"
for p in "${packages[@]}"; do
    [ -f "${deb[$p]}" ] || fail "no ${deb[$p]}"
    files=$(dpkg-deb -c "${deb[$p]}" | awk '{print substr($6, 2)}')
    for f in ${contents[$p]}; do
        grep -qxF "$f" <<<"$files" || fail "$p does not hold $f"
    done
    field=$(dpkg-deb -f "${deb[$p]}" Multi-Arch)
    [ "$field" = "${multi_arch[$p]}" ] || fail "$p: Multi-Arch '$field', expected ${multi_arch[$p]}"
    echo "    $p: $(xargs <<<"${contents[$p]}") (Multi-Arch: $field)"
done
# The API reference is whole where the package puts it: every relative
# link and picture of its pages resolves to a file the package holds
# (issue 27: two links pointed into the source tree, which the package
# does not contain, and dh_compress renames what it compresses).
mkdir "$tmp/doc"
dpkg-deb -x "${deb[libblitz-doc]}" "$tmp/doc"
python3 - "$tmp/doc/usr/share/doc/libblitz-dev/html" <<'EOF' || fail "libblitz-doc links to files it does not hold (above)"
import os, re, sys
html = os.path.realpath(sys.argv[1])
missing = set()
for root, _, files in os.walk(html):
    for f in (f for f in files if f.endswith(".html")):
        for target in re.findall(r'(?:href|src)="([^"]*)"', open(os.path.join(root, f), encoding="utf-8").read()):
            if re.match(r"^([a-z]+:|#|$)", target):
                continue
            path = os.path.realpath(os.path.join(root, target.split("#")[0].split("?")[0]))
            if not path.startswith(html + os.sep) or not os.path.exists(path):
                missing.add("%s: %s" % (f, target))
for m in sorted(missing):
    print("    missing: " + m)
sys.exit(1 if missing else 0)
EOF
echo "    libblitz-doc: every relative link of its HTML resolves inside the package"
# Every symbol of the map, with the version of its node; dpkg-gensymbols
# checked the library against them during the build.
dpkg-deb -I "${deb[libblitz0]}" symbols > "$tmp/symbols"
"$src/tools/deb-symbols.sh" | grep '^ ' | sort > "$tmp/symbols.expected"
grep '^ ' "$tmp/symbols" | sort | diff "$tmp/symbols.expected" - ||
    fail "libblitz0's symbols file differs from abi/libblitz.map (diff above)"
echo "    libblitz0 symbols: $(wc -l < "$tmp/symbols.expected") symbols of abi/libblitz.map"

if [ "$(id -u)" -ne 0 ]; then
    echo
    echo "deb_packages: skipped: the packages built and passed lintian, but installing them needs root (dpkg -i)"
    exit 77
fi
for p in "${packages[@]}"; do
    state=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
    if [ -n "$state" ] && [ "$state" != not-installed ]; then
        echo "deb_packages: skipped: $p is on this machine already ($state); the test would replace it and could not put it back"
        exit 77
    fi
done

step "3. dpkg -i"
installed=1
run_logged "$tmp/install.log" dpkg -i "${deb[@]}"
for p in "${packages[@]}"; do
    dpkg-query -W -f='    ${Package} ${Version} ${Status}\n' "$p"
    [ "$(dpkg-query -W -f='${Version}' "$p")" = "$version" ] || fail "$p $version is not installed"
done

# Nothing points the consumers at the library.
unset PKG_CONFIG_PATH LD_LIBRARY_PATH CMAKE_PREFIX_PATH BLITZ_LIBRARY BLITZ_LIB_DIR BLITZ_INCLUDE_DIR
loads_installed() { # loads_installed <program>: its libblitz is the package's
    local loaded # (/lib is /usr/lib on a merged-/usr system: compare real paths)
    loaded=$(ldd "$1" | sed -n 's/^[[:space:]]*libblitz\.so\.0 => \(.*\) (0x.*/\1/p')
    [ -n "$loaded" ] && [ "$(readlink -f "$loaded")" = "$(readlink -f "$libdir/libblitz.so.0")" ] ||
        { ldd "$1"; fail "$1 does not load $libdir/libblitz.so.0"; }
}

step "pkg-config --cflags --libs blitz"
[ "$(pkg-config --variable=libdir blitz)" = "$libdir" ] ||
    fail "pkg-config finds blitz.pc in $(pkg-config --variable=pcfiledir blitz), not the package's"
[ "$(pkg-config --modversion blitz)" = "$upstream" ] || fail "pkg-config --modversion blitz is not $upstream"
flags=$(pkg-config --cflags --libs blitz)
echo "    $flags"
mkdir "$tmp/pc"
# shellcheck disable=SC2086
cc -std=c99 -Wall -Wextra -Werror "$src/tests/install/consumer.c" $flags -o "$tmp/pc/consumer_c"
# shellcheck disable=SC2086
c++ -std=c++17 -Wall -Wextra -Werror "$src/tests/install/consumer.cpp" $flags -o "$tmp/pc/consumer_cpp"
for prog in consumer_c consumer_cpp; do
    loads_installed "$tmp/pc/$prog"
    "$tmp/pc/$prog" || fail "$prog (pkg-config)"
done

step "CMake: find_package(blitz), blitz::blitz"
"$src/tests/install/cmake_consume.sh" system

step "Python: the package, without BLITZ_LIBRARY"
# A copy outside the checkout, as an installed package is.
mkdir "$tmp/python"
cp -r "$src/bindings/python/blitz" "$tmp/python/blitz"
(cd "$tmp/python" && PYTHONDONTWRITEBYTECODE=1 python3 - "$libdir") <<'EOF' || fail "the Python package"
import os, sys
import blitz
from blitz import _loader
lib, path = _loader.load()
print(f"    import blitz: ok; its loader finds {path} (version {lib.blz_version_number()})")
if os.path.dirname(os.path.realpath(path)) != sys.argv[1]:
    sys.exit(f"loaded {path}, not the library in {sys.argv[1]}")
EOF

step "Rust: blitz-sys without BLITZ_LIB_DIR (the system library: no bundled build)"
if command -v cargo >/dev/null 2>&1; then
    # The workspace without any cargo output directory (CACHEDIR.TAG).
    tar -C "$src/bindings" --exclude-caches-all --exclude=target -cf - rust | tar -C "$tmp" -xf -
    export CARGO_TARGET_DIR="$tmp/cargo-target" CARGO_TERM_COLOR=never
    for how in "pkg-config:\`pkg-config --libs blitz\`" "false:the C compiler's library path"; do
        echo "    PKG_CONFIG=${how%%:*}: expecting libblitz from ${how#*:}"
        (cd "$tmp/rust/blitz" && PKG_CONFIG=${how%%:*} cargo build --offline --no-default-features --example fib) \
            > "$tmp/cargo.log" 2>&1 ||
            { cat "$tmp/cargo.log"; fail "cargo build (PKG_CONFIG=${how%%:*})"; }
        grep -F "blitz-sys: libblitz from ${how#*:}" "$tmp/cargo.log" | sed 's/^/    /' ||
            { cat "$tmp/cargo.log"; fail "blitz-sys did not take libblitz from ${how#*:}"; }
        grep -F "header /usr/include/blitz.h" "$tmp/cargo.log" >/dev/null ||
            { cat "$tmp/cargo.log"; fail "blitz-sys did not take /usr/include/blitz.h"; }
        loads_installed "$CARGO_TARGET_DIR/debug/examples/fib"
        "$CARGO_TARGET_DIR/debug/examples/fib" 20 2 || fail "the Rust example fib"
    done
else
    echo "    (no cargo: not checked; ./dev installs it)"
fi

step "dpkg --purge"
installed=0
run_logged "$tmp/purge.log" dpkg --purge "${packages[@]}"
for f in /usr/include/blitz.h "$libdir/libblitz.so.0" "$libdir/cmake/blitz"; do
    [ ! -e "$f" ] || fail "$f is still there after dpkg --purge"
done
echo "    removed"

echo
echo "deb_packages: ok"
