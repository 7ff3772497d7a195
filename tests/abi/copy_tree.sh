#!/usr/bin/env bash
# copy_tree.sh <source-root> <destination>
#
# Copies the libblitz source tree for a throw-away build: in a git checkout,
# the files git knows or would add (tracked, plus untracked files that are
# not ignored, so uncommitted work is included); otherwise everything except
# .git and build directories (a directory holding meson-private/ or
# build.ninja). Build outputs never come along.
set -euo pipefail
src=$(cd "$1" && pwd)
dst=$2
mkdir -p "$dst"
if git -C "$src" rev-parse --show-toplevel >/dev/null 2>&1 &&
   [ "$(git -C "$src" rev-parse --show-toplevel)" = "$src" ]; then
    (cd "$src" && git ls-files -z -co --exclude-standard |
        while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
        tar --null -T - -cf -) | tar -C "$dst" -xf -
else
    for entry in "$src"/* "$src"/.[!.]*; do
        [ -e "$entry" ] || continue
        [ "$(basename "$entry")" = .git ] && continue
        if [ -d "$entry" ] && { [ -e "$entry/meson-private" ] || [ -e "$entry/build.ninja" ]; }; then
            continue
        fi
        cp -a "$entry" "$dst/"
    done
fi
