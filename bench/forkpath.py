#!/usr/bin/env python3
"""The fork path's benchmark (issue 31): what a fork-join costs through
libblitz's C ABI (blitz_bench: blz_fork_join; blitz_inline_bench:
blz_fork_join_inline, compiled into the caller), its C++ header
(blitzxx_bench: pool.join; blitzxx_free_bench: blz::join; blitzco_bench:
C++20 coroutines, co::spawn and co_await) and its Rust
crate (bench/rust-join), next to Rayon, oneTBB, OpenMP tasks and plain
recursion (seq_bench), in one run.

    bench/forkpath.py BUILD_DIR [--runs N] [--quick]
    bench/forkpath.py BUILD_DIR --smoke

Rows: a tree-size sweep on 1 worker (2^10 to 2^24 nodes, each run summing
about 2^24 nodes), fib(30) on 1 and 2 workers, 1023-node trees summed 1000
times inside a 2-worker pool, the 2^24-node tree and fib(32) on 2 workers
against 1; and, through bench/forkpath_bench.c (libblitz against the same
work without the pool, in one process): the parallel_for grain sweep (a
~1 ns body over 10^7 indices, grain 0 = automatic, 1 to 4096, on 1 and 2
workers, against a plain loop calling the body on the same pieces) and two
20 ms leaves forked once on 2 workers against running them one after the
other. The harness programs run interleaved, one measured run per
invocation (bench/run.py's rules: medians, a 1- or 2-worker run that got
less than 0.9 or 1.9 CPUs is flagged and left out); fib through Rust comes
from bench/rust-join in the same run. Writes bench/results/forkpath.json
and bench/results/forkpath.md (the table, the goals with verdicts), and
bench/results/forkpath_tree.png when gnuplot is installed.

--smoke runs every program at tiny sizes and checks checksums only (the
meson test bench_forkpath_smoke); nothing is timed there.
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
import run as harness  # noqa: E402  (bench/run.py: invoking, checksums, medians)
from run import fmt  # noqa: E402

C, CINL, CXX, CXXF = "libblitz C", "libblitz C inline", "libblitz C++", "libblitz C++ blz::join"
CO = "libblitz C++ coroutines"
RAYON, TBB, OMP, SEQ = "Rayon", "oneTBB", "OpenMP", "plain recursion"
PROGRAMS = {C: "blitz_bench", CINL: "blitz_inline_bench", CXX: "blitzxx_bench", CXXF: "blitzxx_free_bench",
            CO: "blitzco_bench",
            TBB: "tbb_bench", OMP: "omp_bench", SEQ: "seq_bench"}
ORDER = [C, CINL, CXX, CXXF, CO, RAYON, TBB, OMP, SEQ]
RESULTS = os.path.join(HERE, "results")


def plan(quick, smoke):
    if smoke:
        return [("tree", {"depth": 6, "reps": 3}, [1, 2]), ("fib", {"n": 12}, [1, 2])]
    depths = [10, 14, 18, 22, 24] if quick else [10, 12, 14, 16, 18, 20, 22, 24]
    cases = [("tree", {"depth": d, "reps": 1 << (24 - d)}, [1]) for d in depths]
    cases += [("fib", {"n": 30}, [1, 2]), ("fib", {"n": 32}, [1, 2]),
              ("tree", {"depth": 10, "reps": 1000}, [2]), ("tree", {"depth": 24, "reps": 1}, [2])]
    return cases


GRAINS = [0, 1, 4, 16, 64, 256, 4096]


def plan_extras(smoke):
    """forkpath_bench's cases: (workload, params, threads)."""
    if smoke:
        return [("grain", {"n": 1000, "grain": g}, t) for g in (0, 1) for t in (1, 2)] + \
               [("leaves", {"ms": 2}, 2)]
    return [("grain", {"n": 10**7, "grain": g}, t) for g in GRAINS for t in (1, 2)] + [("leaves", {"ms": 20}, 2)]


def run_extras(program, cases, runs):
    """{case key: {threads: [run, ...]}}, the cases interleaved run by run."""
    raw = {}
    for round_ in range(runs):
        for workload, params, threads in cases:
            r = harness.invoke(program, workload, params, threads)
            raw.setdefault(key(workload, params), {}).setdefault(str(threads), []).append(r)
    harness.log("forkpath: grain sweep and leaves done")
    return raw


def summarize_extra(threads, runs):
    """Medians of the runs that got their CPUs (0.9 per worker, 1.9 for two)."""
    floor = 0.9 if threads == 1 else 1.9
    errors = [r["error"] for r in runs if "error" in r] + \
             ["wrong result" for r in runs if "error" not in r and not r.get("checksum_ok")]
    good = [r for r in runs if "error" not in r and r.get("checksum_ok") and r["cpu_per_wall"] >= floor]
    row = {"runs": len(runs), "qualified": len(good), "problems": errors[:3],
           "cpu_per_wall": harness.median([r["cpu_per_wall"] for r in runs if "cpu_per_wall" in r]),
           "pool_over_plain": harness.median([r["pool_over_plain"] for r in good])}
    for field in ("plain_ns_per_index", "pool_ns_per_index", "plain_ms", "pool_ms"):
        if good and field in good[0]:
            row[field] = harness.median([r[field] for r in good])
    return row


def key(workload, params):
    return workload + ":" + ",".join(f"{k}={v}" for k, v in params.items())


def run_all(cases, programs, runs):
    """{case key: {threads: {impl: [run, ...]}}}, every impl interleaved run by run."""
    raw = {}
    for workload, params, threads_list in cases:
        k = key(workload, params)
        raw.setdefault(k, {})  # a case may come back with other worker counts
        for threads in threads_list:
            impls = [i for i in ORDER if i in programs and (i != SEQ or threads == 1)]
            raw[k][threads] = harness.interleaved(impls, runs, lambda impl: harness.invoke(
                programs[impl], workload, params, 1 if impl == SEQ else threads))
            harness.log(f"forkpath: {k} threads={threads} done")
    return raw


def summarize(workload, params, threads, runs, expected):
    """bench/run.py's summary of the runs (medians of those that got their CPUs),
    with its problems in one list."""
    row = harness.summarize_runs(harness.Case(workload, params, [threads], ""), threads, runs, expected)
    row["problems"] = (row["errors"] + [f"checksum {c} != {expected}" for c in row["wrong_checksums"]])[:3]
    return row


def rust_fib(build_dir, runs):
    """bench/rust-join's rows (blitz::join, rayon::join, blz_fork_join from Rust), or a note."""
    script = os.path.join(HERE, "rust-join", "run.sh")
    env = dict(os.environ, BLITZ_LIB_DIR=os.path.abspath(build_dir))
    try:
        out = subprocess.run([script, "--json", "30", str(runs), "3", "1,2"], capture_output=True, text=True,
                             timeout=1800, env=env)
    except (OSError, subprocess.TimeoutExpired) as e:
        return {"skipped": str(e)}
    text = out.stdout.strip()
    if out.returncode != 0 or not text.startswith("{"):
        return {"skipped": "rust-join failed: " + " ".join(out.stderr.strip().splitlines()[-2:])}
    return json.loads(text)


def ratio(a, b):
    return a / b if a is not None and b else None


def verdict(value, limit):
    if value is None:
        return "not measured"
    return "met" if value <= limit else "NOT met"


def report(data):
    s, lines = data["summary"], []
    lines.append(f"# The fork path (issue 31): {data['machine']['cpu']}, {data['date']}")
    lines.append("")
    lines.append(f"`bench/forkpath.py {data['build_dir']} --runs {data['runs']}`; medians of the runs that got "
                 "their CPUs (CPU/wall >= 0.9 per worker); the last column of each row is the median CPU/wall.")
    lines.append("")
    sweep = [(k, v) for k, v in s.items() if k.startswith("tree:") and "1" in v and v["1"]
             and k != "tree:depth=10,reps=1000"]
    sweep.sort(key=lambda kv: int(kv[0].split("depth=")[1].split(",")[0]))
    lines.append("## Tree sum on 1 worker: ns per node")
    lines.append("")
    lines.append("| nodes | " + " | ".join(ORDER) + " | C / plain | C inline / plain | C++ / plain |"
                 " C++ blz::join / plain |")
    lines.append("|---" * (len(ORDER) + 5) + "|")
    for k, v in sweep:
        row = v["1"]
        depth = int(k.split("depth=")[1].split(",")[0])
        cells = [f"{fmt(row[i]['median'])} ({fmt(row[i]['cpu_per_wall'])})" if i in row else "-" for i in ORDER]
        plain = row.get(SEQ, {}).get("median")
        lines.append(f"| 2^{depth} | " + " | ".join(cells) + f" | {fmt(ratio(row.get(C, {}).get('median'), plain))}"
                     f" | {fmt(ratio(row.get(CINL, {}).get('median'), plain))}"
                     f" | {fmt(ratio(row.get(CXX, {}).get('median'), plain))}"
                     f" | {fmt(ratio(row.get(CXXF, {}).get('median'), plain))} |")
    lines.append("")
    lines.append("## Other rows")
    lines.append("")
    lines.append("| case | workers | " + " | ".join(ORDER) + " |")
    lines.append("|---" * (len(ORDER) + 2) + "|")
    for k, v in s.items():
        if k in dict(sweep):
            continue
        for threads, row in v.items():
            cells = [f"{fmt(row[i]['median'])} ({fmt(row[i]['cpu_per_wall'])})" if i in row else "-" for i in ORDER]
            lines.append(f"| {k} | {threads} | " + " | ".join(cells) + " |")
    rust = data.get("rust", {})
    if "rows" in rust:
        lines.append("")
        lines.append("fib(30) from Rust (bench/rust-join, same run), ns per join (CPU/wall): " + ", ".join(
            f"{r['runtime']} {r['threads']} worker(s) {fmt(r['median_ns_per_join'])} ({fmt(r['cpu_per_wall'])})"
            for r in rust["rows"]))
    elif rust:
        lines.append("")
        lines.append(f"fib from Rust: {rust.get('skipped')}")
    extras = data.get("extras", {})
    if extras:
        lines.append("")
        lines.append("## parallel_for grain sweep (bench/forkpath_bench.c): ns per index")
        lines.append("")
        lines.append("A ~1 ns body (y[i] = 3 sqrt(x[i])) over 10^7 indices; the plain loop calls the same body on the "
                     "same pieces through a function pointer (grain 0: one call). Medians of the runs that got their "
                     "CPUs (runs kept / runs); CPU/wall is the median of all runs.")
        lines.append("")
        lines.append("| grain | plain, 1 thread | pool, 1 worker | pool / plain | pool, 2 workers | 2 workers / 1 | "
                     "CPU/wall (2) | kept |")
        lines.append("|---|---|---|---|---|---|---|---|")
        for g in GRAINS:
            v = extras.get(f"grain:n={10**7},grain={g}", {})
            one, two = v.get("1", {}), v.get("2", {})
            lines.append(f"| {g if g else 'automatic (0)'} | {fmt(one.get('plain_ns_per_index'))} | "
                         f"{fmt(one.get('pool_ns_per_index'))} | {fmt(one.get('pool_over_plain'))} | "
                         f"{fmt(two.get('pool_ns_per_index'))} | "
                         f"{fmt(ratio(one.get('pool_ns_per_index'), two.get('pool_ns_per_index')))}x | "
                         f"{fmt(two.get('cpu_per_wall'))} | {one.get('qualified', 0)}/{one.get('runs', 0)}, "
                         f"{two.get('qualified', 0)}/{two.get('runs', 0)} |")
        leaves = extras.get("leaves:ms=20", {}).get("2", {})
        if leaves:
            lines.append("")
            lines.append(f"Two 20 ms leaves forked once on 2 workers: {fmt(leaves.get('pool_ms'))} ms against "
                         f"{fmt(leaves.get('plain_ms'))} ms one after the other, "
                         f"{fmt(leaves.get('pool_over_plain'))}x (CPU/wall {fmt(leaves.get('cpu_per_wall'))}, "
                         f"{leaves.get('qualified', 0)} of {leaves.get('runs', 0)} runs kept).")
    lines.append("")
    lines.append("## Goals")
    lines.append("")
    lines.append("| goal | measured | verdict |")
    lines.append("|---|---|---|")
    for goal, value, limit, shown in data["goals"]:
        lines.append(f"| {goal} | {shown} | {verdict(value, limit)} |")
    return "\n".join(lines) + "\n"


def goals(s, rust, extras):
    def med(k, threads, impl):
        return s.get(k, {}).get(str(threads), s.get(k, {}).get(threads, {})).get(impl, {}).get("median")

    def cpu(k, threads, impl):
        return s.get(k, {}).get(threads, {}).get(impl, {}).get("cpu_per_wall")

    out = []
    big = "tree:depth=24,reps=1"
    for impl, limit in ((CXX, 1.2), (CXXF, 1.2), (C, 1.5), (CINL, 1.5)):
        r = ratio(med(big, 1, impl), med(big, 1, SEQ))
        out.append((f"2^24-node tree on 1 worker through {impl}: <= {limit}x plain recursion", r, limit,
                    f"{fmt(r)}x"))
    fib = "fib:n=30"
    rayon_native = med(fib, 1, RAYON)
    for impl, limit in ((CXX, 0.35), (CXXF, 0.35), (C, 0.5), (CINL, 0.5)):
        r = ratio(med(fib, 1, impl), rayon_native)
        out.append((f"fib(30) per join on 1 worker through {impl}: <= {limit}x Rayon", r, limit, f"{fmt(r)}x"))
    # Item 4: a binding never costs more than the C call it wraps.
    for k, label in ((fib, "fib(30)"), (big, "2^24-node tree")):
        for impl in (CXX, CXXF):
            r = ratio(med(k, 1, impl), med(k, 1, C))
            out.append((f"{label} on 1 worker: {impl} <= libblitz C (blz_fork_join)", r, 1.0, f"{fmt(r)}x"))
    rows = {(r["runtime"], r["threads"]): r for r in rust.get("rows", [])}
    if ("blitz::join", 1) in rows and ("rayon::join", 1) in rows:
        r = ratio(rows[("blitz::join", 1)]["median_ns_per_join"], rows[("rayon::join", 1)]["median_ns_per_join"])
        out.append(("fib(30) per join on 1 worker through Rust (blitz::join): <= 0.35x rayon::join", r, 0.35,
                    f"{fmt(r)}x"))
    if ("blitz::join", 1) in rows and ("blz_fork_join", 1) in rows:
        r = ratio(rows[("blitz::join", 1)]["median_ns_per_join"], rows[("blz_fork_join", 1)]["median_ns_per_join"])
        out.append(("fib(30) on 1 worker: Rust's blitz::join <= blz_fork_join called from Rust", r, 1.0,
                    f"{fmt(r)}x"))
    small = "tree:depth=10,reps=1000"
    plain_small = med(f"tree:depth=10,reps={1 << 14}", 1, SEQ)  # the sweep's 2^10 row: ns per node
    for impl in (C, CINL, CXX, CXXF):
        r = ratio(med(small, 2, impl), plain_small)
        out.append((f"1023-node trees inside a 2-worker pool through {impl}: <= 2.0x plain recursion per tree",
                    r, 2.0, f"{fmt(r)}x"))
    for k, label in ((big, "tree 2^24"), ("fib:n=32", "fib(32)")):
        for impl in (C, CXX, CXXF):
            one, two = med(k, 1, impl), med(k, 2, impl)
            speedup = ratio(one, two)
            c = cpu(k, 2, impl)
            # A goal met is a speed-up of at least 1.85 at a CPU/wall of at least 1.9: scored as 1.85 / speedup.
            score = None if speedup is None or c is None or c < 1.9 else 1.85 / speedup
            out.append((f"{label} on 2 workers through {impl}: >= 1.85x 1 worker, CPU/wall >= 1.9", score, 1.0,
                        f"{fmt(speedup)}x at CPU/wall {fmt(c)}"))
    for g, label in ((0, "automatic grain"), (1, "grain 1")):
        v = extras.get(f"grain:n={10**7},grain={g}", {})
        one, two = v.get("1", {}), v.get("2", {})
        r = one.get("pool_over_plain")
        out.append((f"parallel_for, {label}, ~1 ns body, 1 worker: <= 1.3x a plain loop", r, 1.3, f"{fmt(r)}x"))
        speedup = ratio(one.get("pool_ns_per_index"), two.get("pool_ns_per_index"))
        c = two.get("cpu_per_wall")
        # Scaling, as for the tree: at least 1.7x the 1-worker speed at a CPU/wall of at least 1.9.
        score = None if speedup is None or c is None or c < 1.9 else 1.7 / speedup
        out.append((f"parallel_for, {label}, 2 workers: >= 1.7x 1 worker, CPU/wall >= 1.9", score, 1.0,
                    f"{fmt(speedup)}x at CPU/wall {fmt(c)}"))
    leaves = extras.get("leaves:ms=20", {}).get("2", {})
    r = leaves.get("pool_over_plain")
    out.append(("two 20 ms leaves forked once on 2 workers: wall <= 0.6x one after the other (CPU/wall >= 1.9)",
                r, 0.6, f"{fmt(r)}x at CPU/wall {fmt(leaves.get('cpu_per_wall'))}"))
    return out


def chart(data, path):
    gnuplot = shutil.which("gnuplot")
    if gnuplot is None:
        return None
    s = data["summary"]
    rows = []
    for k, v in s.items():
        if k.startswith("tree:") and "1" in v and k != "tree:depth=10,reps=1000":
            depth = int(k.split("depth=")[1].split(",")[0])
            rows.append((depth, [v["1"].get(i, {}).get("median") for i in ORDER]))
    if not rows:
        return None
    rows.sort()
    dat = path + ".dat"
    with open(dat, "w") as f:
        for depth, values in rows:
            f.write(f"{depth} " + " ".join("nan" if x is None else f"{x}" for x in values) + "\n")
    plots = ", ".join(f"'{dat}' using 1:{i + 2} with linespoints title '{name}'" for i, name in enumerate(ORDER))
    script = (f"set terminal png size 900,540; set output '{path}'; set logscale y; "
              f"set xlabel 'log2 of the nodes'; set ylabel 'ns per node (1 worker)'; "
              f"set title 'Tree sum on 1 worker, {data['machine']['cpu']}'; set key top right; plot {plots}")
    subprocess.run([gnuplot, "-e", script], check=False)
    os.unlink(dat)
    return path if os.path.exists(path) else None


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("build_dir")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="fewer tree sizes")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, checksums only")
    args = parser.parse_args()
    args.build_dir = os.path.abspath(args.build_dir)  # cargo builds the Rayon peer from bench/rayon
    programs, notes = harness.find_programs(args.build_dir, not args.smoke, PROGRAMS)
    for impl, note in notes.items():
        harness.log(f"forkpath: no {impl}: {note}")
    cases = plan(args.quick, args.smoke)
    raw = run_all(cases, programs, 1 if args.smoke else args.runs)
    extra_program = os.path.join(args.build_dir, "bench", "forkpath_bench")
    extra_cases = plan_extras(args.smoke)
    extra_raw = run_extras(extra_program, extra_cases, 1 if args.smoke else args.runs)
    extras = {k: {t: summarize_extra(int(t), runs) for t, runs in v.items()} for k, v in extra_raw.items()}
    for k, v in extras.items():
        for t, row in v.items():
            if row["problems"]:
                print(f"  FAIL forkpath_bench {k} threads={t}: {row['problems']}")
            elif args.smoke:
                print(f"  ok   forkpath_bench {k} threads={t}")
    bad_extras = sum(1 for v in extras.values() for row in v.values() if row["problems"])
    summary, bad = {}, 0
    for workload, params, threads_list in cases:
        k = key(workload, params)
        expected = harness.reference_checksum(workload, params)
        summary.setdefault(k, {})
        for threads in threads_list:
            summary[k][str(threads)] = {impl: summarize(workload, params, threads, runs, expected)
                                        for impl, runs in raw[k][threads].items()}
            for impl, row in summary[k][str(threads)].items():
                if row["problems"]:
                    bad += 1
                    print(f"  FAIL {impl} {k} threads={threads}: {row['problems']}")
                elif args.smoke:
                    print(f"  ok   {impl} {k} threads={threads}")
    if args.smoke:
        total = sum(len(v) for t in summary.values() for v in t.values()) + sum(len(v) for v in extras.values())
        print(f"bench_forkpath_smoke: {total - bad - bad_extras} passed, {bad + bad_extras} failed")
        return 1 if bad or bad_extras else 0
    # JSON keys are strings: goals() looks rows up by either.
    rust = rust_fib(args.build_dir, args.runs)
    data = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": harness.machine(args.build_dir), "build_dir": os.path.relpath(args.build_dir, harness.ROOT),
        "runs": args.runs, "summary": summary, "rust": rust, "raw": raw, "notes": notes,
        "extras": extras, "extras_raw": extra_raw,
    }
    data["goals"] = goals({k: {int(t): row for t, row in v.items()} for k, v in summary.items()}, rust, extras)
    os.makedirs(RESULTS, exist_ok=True)
    with open(os.path.join(RESULTS, "forkpath.json"), "w") as f:
        json.dump(data, f, indent=1, default=str)
    text = report(data)
    png = chart(data, os.path.join(RESULTS, "forkpath_tree.png"))
    if png:
        text += "\n![tree sweep](forkpath_tree.png)\n"
    with open(os.path.join(RESULTS, "forkpath.md"), "w") as f:
        f.write(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
