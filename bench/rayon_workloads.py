#!/usr/bin/env python3
"""Rayon on libblitz (issue 29, item 4): the same Rayon program built twice,
natively (bench/rayon) and with rayon-core replaced by libblitz's crate
(bench/rayon-on-blitz, whose manifest is the patch line a user adds), run
interleaved in one run.

    bench/rayon_workloads.py BUILD_DIR [--runs N]
    bench/rayon_workloads.py BUILD_DIR --smoke

Rows (the issue's): par_iter().map().sum() and filter().count() over
2*10^7 f64, collect of 10^7, par_sort and par_sort_unstable of 10^7 u64,
join fib(30) and a 2^22-node tree sum, on 1 and 2 workers. Each run is one
invocation with one warm-up and one measured pass (bench/run.py's rules:
medians of the runs that got their CPUs, a 1- or 2-worker run with less
than 0.9 or 1.9 CPUs is flagged and left out). Both builds must print the
same checksum. Writes bench/results/rayon-workloads.{json,md} with a
verdict per row: libblitz at or under native Rayon's median, and on the
fork-join rows (fib, tree) clearly under it (0.9x or less).

--smoke builds both programs, runs every row once at tiny sizes and checks
that their checksums agree; nothing is timed (exit 77 without cargo).
"""
import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import run as harness  # noqa: E402  (bench/run.py: invoking, medians, the machine)
from run import fmt  # noqa: E402

NATIVE, BLITZ = "Rayon", "rayon on libblitz"
CRATES = {NATIVE: ("rayon", "rayon-peer-bench"), BLITZ: ("rayon-on-blitz", "rayon-on-blitz-bench")}
FORK_JOIN = {"fib", "tree"}
# filter_count's measured region runs this many passes (one pass on 2
# workers, 3 to 6 ms here, is shorter than the VM takes to give a second
# CPU: every 2-worker run of either build was flagged, 2026-11-29).
FILTER_PASSES = 10
# The instruction counts (callgrind, 1 worker) run the iterator rows at a
# tenth of their size: callgrind is some 50 times slower than the program.
INSTRUCTIONS_SCALE = 10
RESULTS = os.path.join(HERE, "results")


def plan(smoke):
    """(label, workload, params) rows, each run on 1 and 2 workers."""
    small = 1 << 12
    rows = [(f"iter {op}", "iter", {"op": op, "n": small if smoke else (20_000_000 if op in (
        "sum_map", "filter_count") else 10_000_000)})
            for op in ("sum_map", "filter_count", "collect", "sort", "sort_unstable")]
    rows[1][2]["passes"] = 2 if smoke else FILTER_PASSES
    rows.append(("join fib(30)", "fib", {"n": 12 if smoke else 30}))
    rows.append(("tree sum 2^22 nodes", "tree", {"depth": 8 if smoke else 22, "reps": 1}))
    return rows


def build(build_dir):
    """{impl: program path}, {impl: why it is missing}."""
    cargo = shutil.which("cargo")
    if cargo is None:
        return {}, {NATIVE: "cargo not found", BLITZ: "cargo not found"}
    programs, notes = {}, {}
    # blitz-sys's default, bundled build: libblitz compiled into the program
    # (what a Rust user gets), so the binary needs no libblitz.so at run time.
    env = {k: v for k, v in os.environ.items() if k not in ("BLITZ_LIB_DIR", "BLITZ_INCLUDE_DIR")}
    if "HOME" not in env and "CARGO_HOME" not in env:  # cargo needs a home: one in the build directory
        env["CARGO_HOME"] = os.path.join(build_dir, "bench", "cargo-home")
    for impl, (folder, binary) in CRATES.items():
        target = os.path.join(build_dir, "bench", folder + "-target")
        harness.log(f"rayon-workloads: building {impl} (cargo build --release --offline in bench/{folder})")
        out = subprocess.run([cargo, "build", "--release", "--offline"], cwd=os.path.join(HERE, folder),
                             env=dict(env, CARGO_TARGET_DIR=target), capture_output=True, text=True)
        if out.returncode != 0:
            notes[impl] = "cargo build failed: " + " ".join(out.stderr.strip().splitlines()[-3:])
        else:
            programs[impl] = os.path.join(target, "release", binary)
    return programs, notes


def run_all(rows, programs, runs):
    """{label: {threads: {impl: [run, ...]}}}, the two builds alternating."""
    raw = {}
    impls = [i for i in (NATIVE, BLITZ) if i in programs]
    for label, workload, params in rows:
        raw[label] = {}
        for threads in (1, 2):
            raw[label][threads] = harness.interleaved(
                impls, runs, lambda impl: harness.invoke(programs[impl], workload, params, threads))
            harness.log(f"rayon-workloads: {label} threads={threads} done")
    return raw


def summarize(workload, threads, runs, expected):
    case = harness.Case(workload, {}, [threads], "")
    row = harness.summarize_runs(case, threads, runs, expected)
    row["problems"] = (row["errors"] + [f"checksum {c} != {expected}" for c in row["wrong_checksums"]])[:3]
    # The runs the median is taken over, for the verdict's interval.
    row["counted_runs"] = [r["metric"] for r in runs if "error" not in r and harness.qualifies(case, threads, r)]
    return row


def expected_checksum(runs_by_impl):
    """The native build's checksum: the patched build must print the same."""
    for run in runs_by_impl.get(NATIVE, []):
        if "checksum" in run:
            return run["checksum"]
    return None


def verdict(workload, row_native, row_blitz):
    """(ratio of medians, its 95% interval, verdict). The goal: at or under
    Rayon's median, and on the fork-join rows 0.9x or less. A ratio above
    1.00 whose interval holds 1.00 is a tie: the two builds run the same
    Rust code, and this VM cannot tell them apart there."""
    if row_native["median"] is None or row_blitz["median"] is None:
        return None, None, "not measured (no run got its CPUs, or a build is missing)"
    ratio = row_blitz["median"] / row_native["median"]
    interval = harness.median_ratio_interval(row_blitz["counted_runs"], row_native["counted_runs"])
    limit = 0.9 if workload in FORK_JOIN else 1.0
    if ratio <= limit:
        return ratio, interval, "met"
    if workload not in FORK_JOIN and interval is not None and interval[0] <= 1.0:
        return ratio, interval, "met: a tie within noise"
    return ratio, interval, "NOT met"


def instruction_counts(programs, rows):
    """{label: {impl: instructions}}: each iterator row on 1 worker under
    callgrind, beyond start-up: the whole process (the data made, the
    warm-up and the measured pass: the same Rust code in both builds but
    the scheduler) minus the same row at n=16, which is the process's
    start-up (the dynamic loader: the bundled build links libstdc++), the
    pool's creation and its end."""
    if shutil.which("valgrind") is None or len(programs) < 2:
        return {}

    def count(path, params):
        return harness.callgrind_instructions([path, "iter", "threads=1"] + [f"{k}={v}" for k, v in params.items()])

    counts = {}
    for label, workload, params in rows:
        if workload in FORK_JOIN:
            continue
        small = dict(params, n=params["n"] // INSTRUCTIONS_SCALE, passes=1)
        counts[label] = {impl: count(path, small) - count(path, dict(small, n=16)) for impl, path in programs.items()}
        harness.log(f"rayon-workloads: {label} counted under callgrind")
    return counts


def report(data):
    m = data["machine"]
    lines = [f"# Rayon on libblitz (issue 29): {m.get('cpu', '?')}, {data['date']}", "",
             f"`bench/rayon_workloads.py build --runs {data['runs']}`: one Rayon program (bench/rayon/src) built "
             "natively and with `[patch.crates-io] rayon-core` pointing at bindings/rust/rayon-core "
             "(bench/rayon-on-blitz); runs alternate. Medians of the runs that got their CPUs (CPU/wall >= 0.9 per "
             "worker), in the program's unit; CPU/wall is the median of the runs counted.", "",
             "| row | workers | unit | Rayon | CPU/wall | on libblitz | CPU/wall | libblitz / Rayon | 95% interval "
             "| goal | verdict |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for label, by_threads in data["summary"].items():
        for threads, rows in by_threads.items():
            native, blitz = rows.get(NATIVE), rows.get(BLITZ)
            if native is None or blitz is None:
                continue
            ratio, interval, word = data["verdicts"][label][threads]
            goal = "<= 0.90" if data["workloads"][label] in FORK_JOIN else "<= 1.00"
            span = f"{fmt(interval[0])}-{fmt(interval[1])}" if interval else "-"
            lines.append(f"| {label} | {threads} | {native['unit']} | {fmt(native['median'])} | "
                         f"{fmt(native['cpu_per_wall'])} | {fmt(blitz['median'])} | {fmt(blitz['cpu_per_wall'])} | "
                         f"{fmt(ratio)} | {span} | {goal} | {word} |")
    if data.get("instructions"):
        lines += ["", f"Instructions on 1 worker (callgrind, the iterator rows at 1/{INSTRUCTIONS_SCALE} of "
                  "their size, minus the same row at n=16: start-up, the pool's creation and end):", "",
                  "| row | Rayon | on libblitz | libblitz - Rayon | libblitz / Rayon |", "|---|---|---|---|---|"]
        for label, counts in data["instructions"].items():
            native, blitz = counts[NATIVE], counts[BLITZ]
            lines.append(f"| {label} | {native} | {blitz} | {blitz - native:+d} | {blitz / native:.4f} |")
    for impl, note in data["notes"].items():
        lines.append(f"\n{impl}: not built ({note}).")
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("build_dir")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, checksums only")
    args = parser.parse_args()
    build_dir = os.path.abspath(args.build_dir)
    if args.smoke and shutil.which("cargo") is None:
        print("rayon_workloads_smoke: skipped: no cargo")
        return 77
    programs, notes = build(build_dir)
    for impl, note in notes.items():
        harness.log(f"rayon-workloads: no {impl}: {note}")
    if args.smoke and notes:
        print(f"rayon_workloads_smoke: 0 passed, {len(notes)} failed")
        return 1
    rows = plan(args.smoke)
    raw = run_all(rows, programs, 1 if args.smoke else args.runs)
    summary, verdicts, bad = {}, {}, 0
    for label, workload, _ in rows:
        summary[label], verdicts[label] = {}, {}
        for threads, runs_by_impl in raw[label].items():
            expected = expected_checksum(runs_by_impl)
            rows_here = {impl: summarize(workload, threads, runs, expected) for impl, runs in runs_by_impl.items()}
            summary[label][str(threads)] = rows_here
            for impl, row in rows_here.items():
                if row["problems"] or expected is None:
                    bad += 1
                    print(f"  FAIL {impl} {label} threads={threads}: {row['problems'] or 'no native checksum'}")
                elif args.smoke:
                    print(f"  ok   {impl} {label} threads={threads}")
            if NATIVE in rows_here and BLITZ in rows_here:
                verdicts[label][str(threads)] = verdict(workload, rows_here[NATIVE], rows_here[BLITZ])
    if args.smoke:
        total = sum(len(v) for t in summary.values() for v in t.values())
        print(f"rayon_workloads_smoke: {total - bad} passed, {bad} failed")
        return 1 if bad else 0
    data = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": harness.machine(build_dir), "runs": args.runs, "summary": summary, "verdicts": verdicts,
        "workloads": {label: workload for label, workload, _ in rows}, "notes": notes, "raw": raw,
        "instructions": instruction_counts(programs, rows),
    }
    os.makedirs(RESULTS, exist_ok=True)
    with open(os.path.join(RESULTS, "rayon-workloads.json"), "w") as f:
        json.dump(data, f, indent=1, default=str)
    text = report(data)
    with open(os.path.join(RESULTS, "rayon-workloads.md"), "w") as f:
        f.write(text)
    print(text)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
