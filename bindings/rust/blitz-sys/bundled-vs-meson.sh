#!/usr/bin/env bash
# Checks that blitz-sys's bundled build compiles libblitz as meson does:
# the same sources, and the same arguments that decide the generated code
# (-D, -std, -O, -f, -m, -g, -pthread; not -I, -W, nor meson's
# -fdiagnostics-color), and libatomic_ops linked when meson links it.
#
#   blitz-sys/bundled-vs-meson.sh MESON_BUILD_DIR BUNDLED_RECORD
#
# BUNDLED_RECORD is the $OUT_DIR/bundled-build.txt that build.rs writes
# when it compiles the bundled library ("source lib/x.cpp", "flag -O3",
# "link atomic_ops DIR" lines). Meson's side comes from
# `meson introspect --targets --dependencies` on MESON_BUILD_DIR (target
# `blitz`). Then the same comparison runs on altered records (a source
# left out, a define added, the optimization changed, libatomic_ops not
# linked), each of which must be reported: the check can fail.
# Prints the differences and "bundled-vs-meson: ok" or "... FAILED".
set -uo pipefail
if [ $# -ne 2 ]; then
    echo "usage: $0 MESON_BUILD_DIR BUNDLED_RECORD" >&2
    exit 2
fi
build_dir=$1
record=$2
command -v meson >/dev/null || { echo "bundled-vs-meson: no meson"; exit 77; }
[ -f "$record" ] || { echo "bundled-vs-meson: no record $record (was blitz-sys built bundled?)"; exit 1; }
meson introspect --targets --dependencies "$build_dir" > "${TMPDIR:-/tmp}/bundled-vs-meson.$$.json" || exit 1
trap 'rm -f "${TMPDIR:-/tmp}/bundled-vs-meson.$$.json"' EXIT

python3 - "${TMPDIR:-/tmp}/bundled-vs-meson.$$.json" "$record" "$(cd "$(dirname "$0")/../../.." && pwd)" <<'PY'
import json, os, sys

intro = json.load(open(sys.argv[1]))
record = open(sys.argv[2]).read().splitlines()
root = sys.argv[3]

def code_flags(params):
    """The arguments that change the generated code."""
    keep = []
    for p in params:
        if p.startswith(("-I", "-W", "-fdiagnostics-color")):
            continue
        if p.startswith(("-D", "-std=", "-O", "-f", "-m", "-g")) or p == "-pthread":
            keep.append(p)
        elif p.startswith("-"):
            keep.append(p)  # anything unknown counts: better a false alarm than drift
    return set(keep)

target = [t for t in intro["targets"] if t["name"] == "blitz" and t["type"] == "shared library"]
if len(target) != 1:
    sys.exit("bundled-vs-meson: meson has no single shared library target 'blitz'")
cpp = [s for s in target[0]["target_sources"] if s["language"] == "cpp"]
meson_sources = sorted(os.path.relpath(f, root) for s in cpp for f in s["sources"])
meson_flags = set().union(*(code_flags(s["parameters"]) for s in cpp))
meson_atomic_ops = any(d["name"] == "atomic_ops" for d in intro["dependencies"])

def differences(record):
    sources = sorted(l.split(" ", 1)[1] for l in record if l.startswith("source "))
    flags = set(l.split(" ", 1)[1] for l in record if l.startswith("flag "))
    atomic_ops = any(l.startswith("link atomic_ops") for l in record)
    out = []
    for s in sorted(set(meson_sources) - set(sources)):
        out.append("source only in meson: " + s)
    for s in sorted(set(sources) - set(meson_sources)):
        out.append("source only in the bundled build: " + s)
    for f in sorted(meson_flags - flags):
        out.append("argument only in meson: " + f)
    for f in sorted(flags - meson_flags):
        out.append("argument only in the bundled build: " + f)
    if meson_atomic_ops != atomic_ops:
        out.append("libatomic_ops: linked by meson %s, by the bundled build %s" % (meson_atomic_ops, atomic_ops))
    return out

found = differences(record)
for d in found:
    print("bundled-vs-meson: " + d)
print("bundled-vs-meson: %d sources, %d code arguments, atomic_ops %s: compared"
      % (len(meson_sources), len(meson_flags), "linked" if meson_atomic_ops else "not used"))

# The check must be able to fail: each alteration of the record is reported.
first_source = next(l for l in record if l.startswith("source "))
alterations = {
    "a source left out": [l for l in record if l != first_source],
    "a define added": record + ["flag -DBLZ_FENCE_STD"],
    "-O3 changed to -O2": [("flag -O2" if l == "flag -O3" else l) for l in record],
    "libatomic_ops not linked": [l for l in record if not l.startswith("link atomic_ops")],
}
missed = [name for name, altered in alterations.items() if not differences(altered)]
for name in missed:
    print("bundled-vs-meson: the check missed an alteration: " + name)
print("bundled-vs-meson: %d of %d alterations caught" % (len(alterations) - len(missed), len(alterations)))
ok = not found and not missed
print("bundled-vs-meson: " + ("ok" if ok else "FAILED"))
sys.exit(0 if ok else 1)
PY
