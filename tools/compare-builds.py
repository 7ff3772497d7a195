#!/usr/bin/env python3
"""Fork-join cost of two builds of libblitz, side by side in one run.

usage: tools/compare-builds.py OLD_BUILD_DIR NEW_BUILD_DIR [--runs N] [--n N]

Each build's bench/blitz_bench runs `fib` (every call above fib(1) is a
blz_fork_join) alternately, old then new, N times per thread count, so
that both see the same machine load; prints the median ns per join of
each, their ratio, and the CPU time / wall time of the medians (a
two-worker figure below 1.9 did not have two CPUs). Then callgrind's
instruction count per join for each build, which does not depend on the
load: the difference between fib(24) and fib(20) divided by the
difference in joins (75024 - 10945), so start-up costs cancel out.
"""
import argparse
import json
import shutil
import statistics
import subprocess
import sys


def run_fib(build, threads, n):
    out = subprocess.run([f"{build}/bench/blitz_bench", "fib", f"threads={threads}", f"n={n}"],
                         check=True, capture_output=True, text=True).stdout
    for line in out.splitlines():
        if line.startswith("{"):
            return json.loads(line)
    raise RuntimeError(f"no result line from {build}: {out}")


def instructions(build, n):
    out = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
                          f"{build}/bench/blitz_bench", "fib", "threads=1", f"n={n}"],
                         capture_output=True, text=True, check=True).stderr
    for line in out.splitlines():
        if "Collected" in line:
            return int(line.split()[-1])
    raise RuntimeError(out)


def cpu_model():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return "unknown CPU"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("old")
    p.add_argument("new")
    p.add_argument("--runs", type=int, default=15)
    p.add_argument("--n", type=int, default=30)
    a = p.parse_args()
    print(f"CPU: {cpu_model()}; fib({a.n}), {a.runs} alternating runs per build")
    print(f"{'threads':>7} {'old ns/join':>12} {'new ns/join':>12} {'new/old':>8} {'old cpu/wall':>12} {'new cpu/wall':>12}")
    for threads in (1, 2):
        runs = {"old": [], "new": []}
        for _ in range(a.runs):
            for key in ("old", "new"):
                runs[key].append(run_fib(getattr(a, key), threads, a.n))
        med = {}
        for key, rs in runs.items():
            rs.sort(key=lambda r: r["metric"])
            med[key] = rs[len(rs) // 2]
        print(f"{threads:>7} {med['old']['metric']:>12.2f} {med['new']['metric']:>12.2f} "
              f"{med['new']['metric'] / med['old']['metric']:>8.3f} "
              f"{med['old']['cpu_per_wall']:>12.2f} {med['new']['cpu_per_wall']:>12.2f}")
    if shutil.which("valgrind"):
        joins = 75024 - 10945
        for key in ("old", "new"):
            build = getattr(a, key)
            per_join = (instructions(build, 24) - instructions(build, 20)) / joins
            print(f"callgrind {key}: {per_join:.1f} instructions per join (fib_task and blz_fork_join)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
