#!/usr/bin/env python3
"""Issue 28's blocking mix: N tasks that each block 100 ms (nanosleep,
standing for I/O) on an N-worker pool, and beside them a fork-join
(fib(25) by join); the figure is the fork-join's completion time.

    bench/blocking_mix.py BUILD_DIR [--runs N]
    bench/blocking_mix.py BUILD_DIR --smoke

Columns: libblitz with blocking sections (blz_block_begin/end around the
sleep), libblitz without them, Rayon (bench/rayon, workload blockmix: no
blocking support, so the fork-join waits for the blockers), oneTBB
(bench/tbb_blocking_mix.cpp: task_arena(N, 0), no compensation). Each also
runs without blockers (the fork-join alone). N = the CPUs available.
Each run is one invocation; the fork-join starts once every blocker has
started. A run's CPU/wall is the process's CPU time over the fork-join's
wall time: in a starved row it is low by nature (the fork-join waits), in
an unstarved row a value under 0.5 means the VM did not give the CPU; such
runs are flagged "low" (kept in the medians: the effect measured is 100 ms
against a few ms).

Also the process pool's cost on the fork-join path: callgrind's instruction
count of fib(24) minus fib(20) on 1 worker, divided by the joins between
them, on blz_pool_shared and on blz_pool_create (exactly repeatable, unlike
a time on this VM).

Writes bench/results/blocking-mix.{json,md}. --smoke runs the C programs
once at tiny sizes and checks the checksums; nothing is timed.
"""
import argparse
import datetime
import json
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import run as harness  # noqa: E402  (bench/run.py: invoking, medians, the machine)
from run import fmt  # noqa: E402

RESULTS = os.path.join(HERE, "results")
LOW_CPU_PER_WALL = 0.5
# (row, program key, mode or workload, extra parameters)
ROWS = [
    ("libblitz, blocking sections", "blitz", "sections", {}),
    ("libblitz, no sections", "blitz", "plain", {}),
    ("Rayon", "rayon", "blockmix", {}),
    ("oneTBB", "tbb", "plain", {}),
    ("libblitz, no blockers", "blitz", "alone", {}),
    ("Rayon, no blockers", "rayon", "blockmix", {"blockers": 0}),
    ("oneTBB, no blockers", "tbb", "alone", {}),
]


def fib(n):
    a, b = 0, 1
    for _ in range(n):
        a, b = b, a + b
    return a


def find_programs(build_dir, with_rayon):
    programs, notes = {}, {}
    for key, name in (("blitz", "blocking_mix"), ("tbb", "tbb_blocking_mix")):
        path = os.path.join(build_dir, "bench", name)
        if os.access(path, os.X_OK):
            programs[key] = path
        else:
            notes[key] = f"{path} was not built"
    if with_rayon:
        path, note = harness.build_rayon(build_dir)
        if path:
            programs["rayon"] = path
        else:
            notes["rayon"] = note
    return programs, notes


def one_run(program, key, mode, params, threads, n, block_ms):
    size = {"n": n} if key == "rayon" else {"fib": n}
    run = harness.invoke(program, mode, dict(params, block_ms=block_ms, **size), threads, timeout=120)
    if "error" in run:
        return run
    forkjoin_ms = run["metric"] if key == "rayon" else run["forkjoin_ms"]
    return {"forkjoin_ms": forkjoin_ms, "cpu_per_wall": run["cpu_per_wall"], "checksum": str(run["checksum"])}


def measure(programs, threads, n, block_ms, runs):
    table = {}
    for _ in range(runs):  # rounds: every row once per round, so the VM's slow spells spread over rows
        for row, key, mode, params in ROWS:
            if key in programs:
                table.setdefault(row, []).append(one_run(programs[key], key, mode, params, threads, n, block_ms))
    return table


def summarize(table, n):
    summary, bad = {}, 0
    for row, runs in table.items():
        errors = [r["error"] for r in runs if "error" in r]
        good = [r for r in runs if "error" not in r]
        wrong = [r for r in good if r["checksum"] != str(fib(n))]
        bad += len(errors) + len(wrong)
        times = [r["forkjoin_ms"] for r in good]
        ratios = [r["cpu_per_wall"] for r in good]
        summary[row] = {
            "median_ms": harness.median(times) if times else None,
            "min_ms": min(times) if times else None, "max_ms": max(times) if times else None,
            "cpu_per_wall_median": harness.median(ratios) if ratios else None,
            "low_cpu_runs": sum(1 for v in ratios if v < LOW_CPU_PER_WALL),
            "runs": len(good), "errors": errors[:3], "wrong_checksums": len(wrong),
        }
    return summary, bad


def callgrind_instructions(program, n, pool):
    return harness.callgrind_instructions([program, "fibonly", "threads=1", f"fib={n}", f"pool={pool}"])


def pool_cost(programs):
    """Instructions per join of fib on the process pool and on an own pool."""
    if "blitz" not in programs or shutil.which("valgrind") is None:
        return {"note": "valgrind or blocking_mix missing"}
    joins = (fib(25) - 1) - (fib(21) - 1)  # fib(n) makes fib(n+1) - 1 joins
    cost = {}
    for pool in ("shared", "own"):
        high = callgrind_instructions(programs["blitz"], 24, pool)
        low = callgrind_instructions(programs["blitz"], 20, pool)
        cost[pool] = {"ir_fib24": high, "ir_fib20": low, "joins": joins, "ir_per_join": (high - low) / joins}
    return cost


def report(data):
    m = data["machine"]
    lines = [
        "# Blocking mix (issue 28)", "",
        f"{data['date']}; {m['cpu']}, {m['cpus_available']} CPUs available; load before {m['load_before']}; "
        f"{data['threads']} workers, {data['threads']} blockers of {data['block_ms']} ms, fork-join fib({data['n']}); "
        f"{data['runs']} runs per row (bench/blocking_mix.py).", "",
        "| row | fork-join median ms | min | max | CPU/wall median | runs with CPU/wall < 0.5 |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for row, s in data["summary"].items():
        lines.append(f"| {row} | {fmt(s['median_ms'], 1)} | {fmt(s['min_ms'], 1)} | {fmt(s['max_ms'], 1)} | "
                     f"{fmt(s['cpu_per_wall_median'], 2)} | {s['low_cpu_runs']} of {s['runs']} |")
    lines += ["", "CPU/wall: process CPU time over the fork-join's wall time. In a starved row it is low because "
              "the fork-join waits for the blockers; in a row without starvation a value under 0.5 is the VM "
              "not giving the CPU.", ""]
    cost = data["pool_cost"]
    if "shared" in cost:
        lines += ["Process pool on the fork-join path (callgrind, 1 worker, instructions of fib(24) minus fib(20) "
                  "over the joins between them):", "",
                  "| pool | Ir fib(24) | Ir fib(20) | joins | Ir per join |", "| --- | ---: | ---: | ---: | ---: |"]
        for pool, label in (("shared", "blz_pool_shared"), ("own", "blz_pool_create")):
            c = cost[pool]
            lines.append(f"| {label} | {c['ir_fib24']} | {c['ir_fib20']} | {c['joins']} | {c['ir_per_join']:.1f} |")
    else:
        lines.append(f"Process pool cost: not measured ({cost['note']}).")
    for key, note in data["notes"].items():
        lines.append(f"\nMissing {key}: {note}")
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("build_dir")
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, checksums only")
    args = parser.parse_args()
    build_dir = os.path.abspath(args.build_dir)
    programs, notes = find_programs(build_dir, with_rayon=not args.smoke)
    for key, note in notes.items():
        harness.log(f"blocking-mix: no {key}: {note}")
    if "blitz" not in programs:
        print("blocking_mix: bench/blocking_mix was not built")
        return 1
    threads = max(2, len(os.sched_getaffinity(0)))
    if args.smoke:
        summary, bad = summarize(measure(programs, 2, 10, 5, 1), 10)
        total = sum(s["runs"] + len(s["errors"]) for s in summary.values())
        for row, s in summary.items():
            if s["errors"] or s["wrong_checksums"]:
                print(f"blocking_mix_smoke: {row}: {s['errors'] or 'wrong checksum'}")
        print(f"blocking_mix_smoke: {total - bad} passed, {bad} failed")
        return 1 if bad else 0
    machine = harness.machine(build_dir)
    machine["load_before"] = harness.loadavg()
    n, block_ms = 25, 100
    summary, bad = summarize(measure(programs, threads, n, block_ms, args.runs), n)
    data = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": machine, "threads": threads, "n": n, "block_ms": block_ms, "runs": args.runs,
        "notes": notes, "summary": summary, "pool_cost": pool_cost(programs),
    }
    os.makedirs(RESULTS, exist_ok=True)
    with open(os.path.join(RESULTS, "blocking-mix.json"), "w") as f:
        json.dump(data, f, indent=1)
    text = report(data)
    with open(os.path.join(RESULTS, "blocking-mix.md"), "w") as f:
        f.write(text)
    print(text)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
