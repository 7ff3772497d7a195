#!/usr/bin/env bash
# versions.sh <source-root> <project version> <soversion>
#
# debian/ names the version and the soname a second time; they must agree
# with meson.build's (meson passes its own values):
#   debian/changelog's latest entry is <project version>-<revision>;
#   the library package of debian/control is libblitz<soversion>.
set -euo pipefail

if [ $# -ne 3 ]; then
    echo "usage: $0 <source-root> <project version> <soversion>" >&2
    exit 2
fi
src=$(cd "$1" && pwd)
version=$2
soversion=$3
status=0

entry=$(sed -n '1s/^libblitz (\([^)]*\)).*/\1/p' "$src/debian/changelog")
if [ "${entry%-*}" = "$version" ] && [ "$entry" != "${entry%-*}" ]; then
    echo "deb_version: ok: debian/changelog $entry is meson.build's $version"
else
    echo "deb_version: FAIL: debian/changelog's latest entry is '$entry', meson.build's version $version:"
    echo "deb_version: add an entry $version-1 (dch -v $version-1) when the version changes"
    status=1
fi

library=$(sed -n 's/^Package: \(libblitz[0-9][0-9]*\)$/\1/p' "$src/debian/control")
if [ "$library" = "libblitz$soversion" ]; then
    echo "deb_version: ok: debian/control's library package $library is for libblitz.so.$soversion"
else
    echo "deb_version: FAIL: debian/control's library package is '$library', the soname libblitz.so.$soversion:"
    echo "deb_version: a new soname needs a new package name (and its .install file)"
    status=1
fi
exit "$status"
