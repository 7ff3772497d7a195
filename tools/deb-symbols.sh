#!/usr/bin/env bash
# tools/deb-symbols.sh [--check | --update]
#
# The symbols file of the Debian package libblitz0, generated from the
# version script abi/libblitz.map: every symbol of every version node, with
# the version that introduced it (node BLITZ_X.Y: version X.Y), and each
# node's own symbol. dpkg-gensymbols (debian/rules, dh_makeshlibs -c4)
# checks the built library against it, so that the package build fails on
# a symbol the library lost or one it exports that the file lacks.
#
# The file is committed, like the ABI baseline abi/blitz.abi, and never
# edited by hand: a symbol removed from the map must fail the package build
# until the file is regenerated on purpose, in the same commit:
#     tools/deb-symbols.sh --update
#   (no option)  print the generated file
#   --check      fail unless debian/libblitz0.symbols is what the map gives
#   --update     write debian/libblitz0.symbols
set -euo pipefail

src=$(cd "$(dirname "$0")/.." && pwd)
map="$src/abi/libblitz.map"
symbols="$src/debian/libblitz0.symbols"

soversion=$(sed -n "s/^soversion = '\([0-9]*\)'.*/\1/p" "$src/meson.build")
[ -n "$soversion" ] || { echo "deb-symbols: no soversion in meson.build" >&2; exit 1; }

generate() {
    echo "# Generated from abi/libblitz.map by tools/deb-symbols.sh --update: do not edit."
    echo "libblitz.so.$soversion libblitz$soversion #MINVER#"
    echo "* Build-Depends-Package: libblitz-dev"
    # Comments out; then a node opens with "NAME {", lists its symbols after
    # "global:" and ends at "local:" or "}".
    sed -e 's|/\*.*\*/||g' -e '/\/\*/,/\*\//d' "$map" | awk '
        /^[[:space:]]*[A-Za-z0-9_.]+[[:space:]]*\{/ {
            node = $1; sub(/\{.*/, "", node)
            version = node; sub(/^[A-Za-z]+_/, "", version)
            printf " %s@%s %s\n", node, node, version
            global = 0; next
        }
        /global:/ { global = 1; next }
        /local:/ || /\}/ { global = 0; next }
        global && /;/ {
            name = $0; gsub(/[[:space:];]/, "", name)
            if (name != "") printf " %s@%s %s\n", name, node, version
        }'
}

case "${1:-}" in
    "") generate ;;
    --update)
        generate > "$symbols"
        echo "deb-symbols: wrote $symbols ($(grep -c '^ ' "$symbols") symbols); commit it with the map"
        ;;
    --check)
        if ! diff -u "$symbols" <(generate); then
            echo "deb-symbols: FAIL: debian/libblitz0.symbols is not what abi/libblitz.map gives (diff above)." >&2
            echo "deb-symbols: after a deliberate change of the map: tools/deb-symbols.sh --update" >&2
            exit 1
        fi
        echo "deb-symbols: ok: debian/libblitz0.symbols matches abi/libblitz.map ($(grep -c '^ ' "$symbols") symbols)"
        ;;
    *) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
