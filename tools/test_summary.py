#!/usr/bin/env python3
"""Prints one line per test program and the totals as "N passed, N failed".

Reads meson's testlog.json. A Catch2 program counts its test cases (parsed
from its summary line); a program that prints a line "<name>: N passed, M
failed" (the Python, Rust and model-checking suites) counts what its last
such line says; any other program counts as one test. A program that failed
without such a summary (a crash, a watchdog, a timeout) counts as one
failure.
"""
import json
import re
import sys

ALL_PASSED = re.compile(r"All tests passed \(\d+ assertions? in (\d+) test cases?\)")
MIXED = re.compile(r"test cases:\s*(\d+)\s*\|\s*(\d+) passed\s*\|\s*(\d+) failed")
OWN_SUMMARY = re.compile(r"^[\w.-]+: (\d+) passed, (\d+) failed\s*$", re.MULTILINE)


def counts(entry):
    out = entry.get("stdout") or ""
    ok = entry.get("result") == "OK"
    m = ALL_PASSED.search(out)
    if m and ok:
        return int(m.group(1)), 0
    m = MIXED.search(out)
    if m:
        failed = int(m.group(3)) or (0 if ok else 1)
        return int(m.group(2)), failed
    own = OWN_SUMMARY.findall(out)
    if own:
        passed, failed = (int(n) for n in own[-1])
        return passed, failed or (0 if ok else 1)
    return (1, 0) if ok else (0, 1)


def main(path):
    passed = failed = 0
    with open(path) as log:
        for line in log:
            line = line.strip()
            if not line:
                continue
            entry = json.loads(line)
            if entry.get("result") == "SKIP":
                print(f"  skipped  {entry['name']}")
                continue
            p, f = counts(entry)
            passed += p
            failed += f
            mark = "ok  " if f == 0 else "FAIL"
            print(f"  {mark}  {entry['name']}: {p} passed, {f} failed ({entry.get('duration', 0):.1f} s)")
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 and passed > 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "build/meson-logs/testlog.json"))
