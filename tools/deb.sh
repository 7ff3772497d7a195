#!/usr/bin/env bash
# tools/deb.sh <outdir> [dpkg-buildpackage options, default -b]
#   (./dev deb [outdir] runs it; outdir defaults to ../libblitz-deb)
#
# Builds the Debian packages libblitz0, libblitz-dev and libblitz-doc
# (debian/) from a copy of this tree, with dpkg-buildpackage -b -us -uc,
# into <outdir>, which must be outside the tree; then runs lintian on them
# and fails on any lintian error. The copy (what git would commit,
# uncommitted work included, no build directories) keeps dpkg-buildpackage's
# files out of the tree; it is removed at the end. Options replace -b
# (-B: the architecture-dependent packages only, without the docs).
# The build's output is in <outdir>/build.log, lintian's in <outdir>/lintian.log.
set -euo pipefail

if [ $# -lt 1 ]; then
    sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
fi
src=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$1"
out=$(cd "$1" && pwd)
shift
build_opts=("$@")
[ ${#build_opts[@]} -gt 0 ] || build_opts=(-b)
case "$out/" in
    "$src"/*) echo "deb: $out is inside the tree $src: give a directory outside it" >&2; exit 2 ;;
esac
for tool in dpkg-buildpackage dh lintian; do
    command -v "$tool" >/dev/null 2>&1 ||
        { echo "deb: $tool is not installed (./dev setup installs dpkg-dev, debhelper, lintian)" >&2; exit 1; }
done

version=$(cd "$src" && dpkg-parsechangelog -S Version)
# dpkg-buildpackage writes the packages next to the source directory.
copy="$out/libblitz-${version%-*}"
rm -rf "$copy"
trap 'rm -rf "$copy"' EXIT
"$src/tests/abi/copy_tree.sh" "$src" "$copy"

echo "deb: dpkg-buildpackage ${build_opts[*]} -us -uc in $copy (log: $out/build.log)"
started=$SECONDS
if ! (cd "$copy" && dpkg-buildpackage "${build_opts[@]}" -us -uc) > "$out/build.log" 2>&1; then
    tail -n 40 "$out/build.log"
    echo "deb: FAIL: dpkg-buildpackage failed; the whole output is in $out/build.log" >&2
    exit 1
fi
changes=$(ls -t "$out"/libblitz_"$version"_*.changes | head -n 1)
echo "deb: built in $((SECONDS - started)) s:"
sed -n '/^Files:/,/^[^ ]/s/^ .* \([^ ]*\.d\?deb\)$/    \1/p' "$changes"

# Errors fail; warnings and notes are printed for the record.
status=0
lintian --fail-on error --tag-display-limit 0 "$changes" > "$out/lintian.log" 2>&1 || status=$?
sed 's/^/    lintian: /' "$out/lintian.log"
errors=$(grep -c '^E: ' "$out/lintian.log" || true)
warnings=$(grep -c '^W: ' "$out/lintian.log" || true)
if [ "$status" -ne 0 ]; then
    echo "deb: FAIL: lintian exit status $status, $errors errors ($out/lintian.log)" >&2
    exit 1
fi
echo "deb: lintian: $errors errors, $warnings warnings"
echo "deb: ok: $(dirname "$changes")"
