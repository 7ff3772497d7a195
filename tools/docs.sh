#!/usr/bin/env bash
# tools/docs.sh <builddir>: builds the HTML API reference with doxygen into
# <builddir>/docs/html from docs/Doxyfile.in (the public headers in include/,
# README.md as the main page, the pages docs/*.md and lib/README.md).
#
# Fails (exit 1) on any doxygen warning or error, listing them all.
# Needs Debian's doxygen (1.9.4 on bookworm). <builddir> need not be a
# configured meson build directory; it is created if missing.
set -euo pipefail

if [ $# -ne 1 ]; then
    echo "usage: $0 <builddir>" >&2
    exit 2
fi

src=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$1"
build=$(cd "$1" && pwd)
out="$build/docs"

if ! command -v doxygen >/dev/null 2>&1; then
    echo "docs: doxygen is not installed (apt-get install doxygen)" >&2
    exit 1
fi

# The version in project(... version: 'X.Y.Z' ...) of meson.build.
version=$(sed -n "s/^[[:space:]]*version:[[:space:]]*'\([^']*\)'.*/\1/p" "$src/meson.build" | head -n 1)
[ -n "$version" ] || version=unknown

rm -rf "$out/html"
mkdir -p "$out"
# @...@ substitution. The values are paths: escape sed's replacement specials.
esc() { printf '%s' "$1" | sed 's/[\\&|]/\\&/g'; }
sed -e "s|@SRCDIR@|$(esc "$src")|g" \
    -e "s|@OUTDIR@|$(esc "$out")|g" \
    -e "s|@VERSION@|$(esc "$version")|g" \
    "$src/docs/Doxyfile.in" > "$out/Doxyfile"

log="$out/doxygen-warnings.log"
rm -f "$log"
status=0
# Run from the source tree so that relative links in the Markdown pages
# (docs/protocol.md, include/blitz.h) resolve.
(cd "$src" && doxygen "$out/Doxyfile") > "$out/doxygen.out" 2>&1 || status=$?

problems=0
if [ -s "$log" ]; then
    problems=$(grep -c . "$log" || true)
fi
# Warnings that bypass WARN_LOGFILE (configuration problems) go to stderr.
if grep -Eiq 'warning|error' "$out/doxygen.out"; then
    problems=$((problems + $(grep -Eic 'warning|error' "$out/doxygen.out")))
fi

if [ "$status" -ne 0 ] || [ "$problems" -ne 0 ]; then
    echo "docs: doxygen failed (exit $status, $problems warning/error lines):" >&2
    [ -s "$log" ] && cat "$log" >&2
    grep -Ei 'warning|error' "$out/doxygen.out" >&2 || true
    exit 1
fi

if [ ! -f "$out/html/index.html" ]; then
    echo "docs: doxygen wrote no $out/html/index.html" >&2
    exit 1
fi

# Links in the Markdown pages to files of the tree are right on GitHub, but
# doxygen leaves them as they are: a link to a public header
# ([include/blitz.h](include/blitz.h) in README.md) is pointed at the
# header's page; any other file or directory of the tree (an image, the
# Promela model, the raw benchmark runs) is copied into the HTML, under
# tree/ with its path in the tree, and linked there, so that the HTML is
# whole wherever it is copied (the libblitz-doc package ships only this
# directory: before 0.2.1 two of its links and its pictures pointed into
# the source tree). A link is resolved from its page's directory in the
# tree: docs/ for the pages of docs/*.md (md_docs_*.html), the top for
# README.md and the headers. A relative link that resolves to nothing, in
# the HTML or in the tree, or that leaves the HTML, fails the build
# (doxygen does not check links in Markdown pages).
python3 - "$out/html" "$src" <<'EOF'
import os, re, shutil, sys
html, src = os.path.realpath(sys.argv[1]), os.path.realpath(sys.argv[2])
link = re.compile(r'(href|src)="([^"]*)"')

def page_of(path):
    # Doxygen's file page: "_" -> "__", "." -> "_8" (CASE_SENSE_NAMES = YES).
    name = os.path.basename(path).replace("_", "__").replace(".", "_8") + ".html"
    return name if os.path.isfile(os.path.join(html, name)) else None

def copy_into_html(in_src):
    # The file (or directory) at tree/<its path in the tree>.
    copy = os.path.join(html, "tree", os.path.relpath(in_src, src))
    if not os.path.exists(copy):
        os.makedirs(os.path.dirname(copy), exist_ok=True)
        (shutil.copytree if os.path.isdir(in_src) else shutil.copyfile)(in_src, copy)
    return copy

def inside_html(root, file):
    return os.path.realpath(os.path.join(root, file)).startswith(html + os.sep)

broken = []
for root, _, files in os.walk(html):
    for f in files:
        if not f.endswith(".html"):
            continue
        path = os.path.join(root, f)
        text = open(path, encoding="utf-8").read()
        def fix(m):
            target = m.group(2)
            if re.match(r"^([a-z]+:|#|$)", target):
                return m.group(0)
            file = target.split("#")[0].split("?")[0]
            if os.path.exists(os.path.join(root, file)) and inside_html(root, file):
                return m.group(0)
            page_dir = os.path.join(src, "docs") if f.startswith("md_docs_") else src
            in_src = os.path.normpath(os.path.join(page_dir, file))
            if not os.path.exists(in_src):  # doxygen may have made it relative to the HTML
                in_src = os.path.normpath(os.path.join(root, file))
            if in_src.startswith(src + os.sep) and os.path.exists(in_src):
                page = page_of(in_src) if os.path.relpath(in_src, src).startswith("include" + os.sep) else None
                target = os.path.join(html, page) if page else copy_into_html(in_src)
                return '%s="%s"' % (m.group(1), os.path.relpath(target, root))
            broken.append("%s: %s" % (os.path.relpath(path, html), target))
            return m.group(0)
        new = link.sub(fix, text)
        if new != text:
            open(path, "w", encoding="utf-8").write(new)
if broken:
    print("docs: broken links in the generated HTML:", file=sys.stderr)
    for b in broken:
        print("  " + b, file=sys.stderr)
    sys.exit(1)
EOF

echo "docs: $out/html/index.html (doxygen $(doxygen --version), 0 warnings)"
