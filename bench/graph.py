#!/usr/bin/env python3
"""Graph workloads (issue 30, item 4): dependency-heavy task graphs on
libblitz next to OpenMP tasks with `depend`, oneTBB's flow graph and
Taskflow, with the sequential loops as the baseline.

    bench/graph.py BUILD_DIR [--runs N]
    bench/graph.py BUILD_DIR --smoke
    bench/graph.py BUILD_DIR --report-only   (the report again from graph.json's runs)

Rows (bench/graph_kernels.h has the algorithms):
  * wavefront 64 x 64 blocks of 32 x 32 cells: each block after its upper
    and left neighbours (8064 edges, about 4 us of work per block);
  * wavefront 256 x 256 empty blocks (130560 edges): a block only adds its
    neighbours' path counts, so the time is the runtime's; the time divided
    by the edges is the scheduling cost per dependency edge (task creation
    included: one task per block, under two edges per task);
  * tiled Cholesky of a 1024 x 1024 matrix of doubles, tiles of 64 and 32
    (816 and 5984 tasks).
Every implementation runs on 1 and 2 workers (the sequential program once
per round), in rounds that rotate the order; each run is one invocation
with a warm-up and one measured pass (bench/harness.c). A run whose CPU
time over wall time is below `workers - 0.1` either did not get its CPUs
from the VM or left a worker asleep (a graph's serial build and narrow
tail do, in a runtime that sleeps when idle): bench/cpu_probe spins as
many threads as workers just before and just after each multi-worker
run, and the run is counted when both probes reached `workers - 0.1`;
otherwise it is flagged and left out of the medians (with none left, the
row has no figure). The 1-worker runs (and the sequential program's) are
pinned to one CPU, the faster of the VM's at the start: its vCPUs have
differed by up to 1.8x on the Cholesky kernels for minutes at a time, and
a process that lands on the slower one otherwise decides a verdict.
Every run's checksum must equal the sequential program's (the
Cholesky runs also check L L^T = A on sampled entries). Writes
bench/results/graph.{json,md} with verdicts: libblitz against each peer
(ahead: a lower median), and the cost per edge on the empty wavefront
against the goal of 1 us.

libblitz runs twice: through the C ABI (blitz_bench: tasks that name
their predecessors' handles) and as C++20 coroutines (blitzco_bench: a
coroutine per task that co_awaits its predecessors' events); each gets
its own verdicts. A program that does not implement the graph workloads
(bench_runtime's wavefront and cholesky left NULL) is a missing column
with a note, never a failure.

--smoke runs every available implementation once on tiny sizes, on 1 and
2 workers, and checks that they all print the sequential checksum; nothing
is timed.
"""
import argparse
import datetime
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import run as harness  # noqa: E402  (bench/run.py: invoking, medians, the machine)
from run import fmt  # noqa: E402

SEQ, BLITZ, CO = "sequential", "libblitz", "libblitz coroutines"
MINE = [BLITZ, CO]
# (column, program in BUILD_DIR/bench), in the table's order.
IMPLS = [(BLITZ, "blitz_bench"), (CO, "blitzco_bench"), ("OpenMP", "omp_bench"),
         ("oneTBB", "tbb_bench"), ("Taskflow", "taskflow_bench"), (SEQ, "seq_bench")]
PEERS = ["OpenMP", "oneTBB", "Taskflow"]
THREADS = (1, 2)
EDGE_GOAL_US = 1.0
PROBE_MS = 20  # long enough to see a VM that takes a CPU away, short next to a run
RESULTS = os.path.join(HERE, "results")

# (label, workload, parameters, the smoke test's parameters, what the row measures)
ROWS = [
    ("wavefront 64x64 blocks of 32x32 cells", "wavefront", {"blocks": 64, "side": 32},
     {"blocks": 6, "side": 4}, "work"),
    ("wavefront 256x256 empty blocks", "wavefront", {"blocks": 256, "side": 0},
     {"blocks": 7, "side": 0}, "edges"),
    ("cholesky n=1024 tile=64", "cholesky", {"n": 1024, "tile": 64}, {"n": 48, "tile": 8}, "work"),
    ("cholesky n=1024 tile=32", "cholesky", {"n": 1024, "tile": 32}, {"n": 40, "tile": 4}, "work"),
]


def find_programs(build_dir):
    """{impl: path} of the programs that implement both graph workloads, and
    {impl: why not} for the others."""
    programs, notes = {}, {}
    for impl, name in IMPLS:
        path = os.path.join(build_dir, "bench", name)
        if not os.access(path, os.X_OK):
            notes[impl] = f"bench/{name} was not built"
            continue
        missing = [w for w in ("wavefront", "cholesky") if not implements(path, w)]
        if missing:
            notes[impl] = f"bench/{name} does not implement {' and '.join(missing)}"
        else:
            programs[impl] = path
    return programs, notes


def implements(path, workload):
    """False only when the harness says the runtime leaves the workload out
    (any other failure shows up, and fails, in the runs)."""
    tiny = {"wavefront": ["blocks=1", "side=0"], "cholesky": ["n=4", "tile=4"]}[workload]
    out = subprocess.run([path, workload, "threads=1"] + tiny, capture_output=True, text=True, timeout=120)
    return "does not implement" not in out.stderr


def run_all(rows, programs, runs, probe, one_cpu):
    """{label: {threads: {impl: [run, ...]}}}; the sequential program runs
    with the 1-worker rounds only, and a multi-worker run between two
    probes of the CPUs the VM delivered (`probe`: bench/cpu_probe, or None).
    The 1-worker runs are pinned to the CPU `one_cpu` (None: not pinned)."""
    raw = {}
    for label, workload, params, _, _ in rows:
        raw[label] = {}
        for index, threads in enumerate(THREADS):
            impls = [i for i, _ in IMPLS if i in programs and (i != SEQ or index == 0)]
            cpus = {one_cpu} if threads == 1 and one_cpu is not None else None
            raw[label][str(threads)] = harness.interleaved(impls, runs, lambda impl: probed(
                probe if threads > 1 else None, threads,
                lambda: harness.invoke(programs[impl], workload, params, 1 if impl == SEQ else threads,
                                       cpus=cpus)))
            harness.log(f"graph: {label} threads={threads} done")
    return raw


def cpu_speeds(seq_program):
    """{cpu: ms}: the sequential tile-32 Cholesky of a 512 x 512 matrix
    pinned to each CPU this process may use (the median of 3). On this VM
    the vCPUs have run that kernel up to 1.8 times apart, steadily for
    minutes (a process stays on one): unpinned, a 1-worker run's time
    depends on the CPU it landed on more than on the runtime."""
    speeds = {}
    for cpu in sorted(os.sched_getaffinity(0)):
        times = [harness.invoke(seq_program, "cholesky", {"n": 512, "tile": 32}, 1, cpus={cpu}).get("metric")
                 for _ in range(3)]
        if None not in times:
            speeds[cpu] = harness.median(times)
    return speeds


def probed(probe, threads, run_one):
    """run_one()'s run, with "probes": the CPUs over wall time that `threads`
    spinning threads got just before and just after it."""
    if probe is None:
        return run_one()
    before = probe_cpus(probe, threads)
    run = run_one()
    if "error" not in run:
        run["probes"] = [before, probe_cpus(probe, threads)]
    return run


def probe_cpus(probe, threads):
    out = subprocess.run([probe, f"threads={threads}", f"ms={PROBE_MS}"], capture_output=True, text=True,
                         timeout=60, check=True)
    return json.loads(out.stdout)["cpu_per_wall"]


def got_cpus(run, threads):
    """Whether the VM gave the run its workers' CPUs: its own CPU time over
    wall time says so, or, when the runtime's workers slept (which lowers
    that ratio too), the probes on both sides of it do."""
    floor = threads - harness.CPU_SHORTFALL_ALLOWED
    return run["cpu_per_wall"] >= floor or (threads > 1 and min(run.get("probes", [0])) >= floor)


def summarize(threads, runs, expected):
    """Medians of the runs that got their CPUs, and what went wrong."""
    ok = [r for r in runs if "error" not in r]
    wrong = [r["checksum"] for r in ok if r["checksum"] != expected]
    good = [r for r in ok if got_cpus(r, threads)]
    counted = good or ok
    return {
        "runs": len(runs),
        "problems": ([r["error"] for r in runs if "error" in r] + [f"checksum {c} != {expected}" for c in wrong])[:3],
        "flagged": len(ok) - len(good),
        # counted on the probes' word, below workers - 0.1 by their own ratio
        "by_probe": sum(r["cpu_per_wall"] < threads - harness.CPU_SHORTFALL_ALLOWED for r in good),
        "median_ms": harness.median([r["metric"] for r in good]) if not wrong else None,
        "counted_ms": [r["metric"] for r in good],  # the runs the median is of, for the verdict's interval
        "ms_runs": [r["metric"] for r in ok],
        # CPU time of the whole process, over every run: on 1 worker it is
        # the work plus the runtime's own cost even when the VM delivered a
        # fraction of a CPU (a worker that spins while it waits adds to it).
        "cpu_ms_all_runs": harness.median([r["cpu_s"] * 1e3 for r in ok]),
        "cpu_per_wall": harness.median([r["cpu_per_wall"] for r in counted]),
        "cpu_per_wall_runs": [r["cpu_per_wall"] for r in ok],
        "edges": ok[0]["extra"].get("edges") if ok else None,
        "tasks": ok[0]["extra"].get("tasks") if ok else None,
    }


def expected_checksum(raw_row):
    """The sequential program's checksum, which must agree with itself."""
    seen = {r["checksum"] for r in raw_row.get("1", {}).get(SEQ, []) if "error" not in r}
    return seen.pop() if len(seen) == 1 else None


def verdicts(kind, summary):
    """{libblitz column: {workers: verdicts}}: each libblitz column against
    each peer and, on the empty wavefront, its cost per edge against the goal."""
    return {mine: {threads: versus(mine, kind, row, summary.get("1", {}).get(SEQ, {}).get("median_ms"))
                   for threads, row in summary.items()} for mine in MINE}


def versus(mine, kind, row, seq):
    """One libblitz column on one worker count: {peer: ratio, its 95%
    interval and verdict}. Behind by a ratio whose interval holds 1.00 is
    a tie: this VM cannot tell the two apart on that row."""
    blitz = row.get(mine, {}).get("median_ms")
    v = {}
    for peer in PEERS + [SEQ]:
        other = row.get(peer, {}).get("median_ms") if peer != SEQ else seq
        if peer not in row and peer != SEQ:
            continue
        if blitz is None or other is None:
            v[peer] = {"ratio": None, "verdict": "not measured"}
        elif peer == SEQ:
            v[peer] = {"ratio": blitz / other, "verdict": "-"}
        else:
            interval = harness.median_ratio_interval(row[mine]["counted_ms"], row[peer]["counted_ms"])
            tie = blitz >= other and interval is not None and interval[0] <= 1.0
            v[peer] = {"ratio": blitz / other, "interval": interval,
                       "verdict": "ahead" if blitz < other else "tie" if tie else "behind"}
    if kind == "edges":
        per_edge = {impl: s["median_ms"] * 1e3 / s["edges"] if s["median_ms"] is not None and s["edges"] else None
                    for impl, s in row.items()}
        v["us_per_edge"] = per_edge
        v["edge_goal"] = ("not measured" if per_edge.get(mine) is None
                          else "met" if per_edge[mine] < EDGE_GOAL_US else "NOT met")
    return v


def verdict_cell(v):
    """"0.93 ahead (0.90-0.97)": the ratio, the verdict, the interval."""
    span = v.get("interval")
    return f"{fmt(v['ratio'])} {v['verdict']}" + (f" ({fmt(span[0])}-{fmt(span[1])})" if span else "")


def cell(s):
    if s is None:
        return "-"
    text = fmt(s["median_ms"], 3) + f" ({fmt(s['cpu_per_wall'])})"
    notes = ([f"{s['flagged']}/{s['runs']} flagged"] if s["flagged"] else []) + \
        ([f"{s['by_probe']} by the probes"] if s.get("by_probe") else [])
    return text + (f" [{'; '.join(notes)}]" if notes else "")


def pinning(m):
    """The report's sentence on where the 1-worker runs ran."""
    speeds = m.get("cpu_speeds_ms")
    if not speeds or m.get("one_worker_cpu") is None:
        return "The 1-worker runs were not pinned."
    listed = ", ".join(f"CPU {c}: {fmt(ms, 1)} ms" for c, ms in speeds.items())
    return (f"The 1-worker runs ran on CPU {m['one_worker_cpu']}, the faster at the start on the sequential "
            f"tile-32 Cholesky of 512 x 512 ({listed}): this VM's CPUs differ in speed for minutes at a time.")


def report(data):
    m = data["machine"]
    impls = [i for i, _ in IMPLS if i in data["programs"]]
    lines = [f"# Graph workloads (issue 30): {m.get('cpu', '?')}, {data['date']}", "",
             f"`bench/graph.py build --runs {data['runs']}`: medians in ms of the runs that got their CPUs "
             "(CPU time / wall time, the median of the runs counted, in brackets). A run below workers - 0.1 "
             "is counted only when the probes on both sides of it (bench/cpu_probe: as many threads as "
             f"workers, spinning {PROBE_MS} ms) reached workers - 0.1: the VM delivered the CPUs and the "
             "runtime's own workers slept (\"k by the probes\"); otherwise it is flagged and left out, and a "
             "row with every run flagged has no figure. " + pinning(m) + " The graph is built "
             "inside the timed region by every runtime (tasks created, flow graph nodes and edges made). "
             f"Load average before the run: {m.get('load_before', '?')}.", "",
             "| row | workers | " + " | ".join(impls) + " |", "|---|---|" + "---|" * len(impls)]
    for label, by_threads in data["summary"].items():
        for threads, row in by_threads.items():
            lines.append(f"| {label} | {threads} | " + " | ".join(cell(row.get(i)) for i in impls) + " |")
    lines += ["", "## Verdicts: libblitz / peer (below 1.00: libblitz ahead; a bootstrap 95% interval in brackets; "
              "behind with an interval that holds 1.00 is a tie)", "",
              "| row | workers | libblitz | " + " | ".join(PEERS) + " | / sequential |",
              "|---|---|---|" + "---|" * (len(PEERS) + 1)]
    for label, by_mine in data["verdicts"].items():
        for mine, by_threads in by_mine.items():
            for threads, v in by_threads.items():
                cols = [verdict_cell(v[p]) if p in v else "-" for p in PEERS]
                lines.append(f"| {label} | {threads} | {mine} | " + " | ".join(cols)
                             + f" | {fmt(v.get(SEQ, {}).get('ratio'))} |")
    lines += ["", f"## Scheduling cost per dependency edge (empty wavefront time / edges; goal for libblitz < "
              f"{EDGE_GOAL_US:g} us)", "", "| workers | " + " | ".join(impls) + " | "
              + " | ".join(f"{m} goal" for m in MINE) + " |", "|---|" + "---|" * (len(impls) + len(MINE))]
    for label, by_mine in data["verdicts"].items():
        for threads, v in by_mine[BLITZ].items():
            if "us_per_edge" in v:
                goals = [by_mine[m][threads]["edge_goal"] for m in MINE]
                lines.append(f"| {threads} | " + " | ".join(fmt(v["us_per_edge"].get(i), 3) for i in impls)
                             + " | " + " | ".join(goals) + " |")
    lines += ["", "## CPU time on 1 worker, every run counted (ms; per edge in us on the empty wavefront)", "",
              "Not a verdict: what survives a VM that delivered less than one CPU (the wall times above are then "
              "flagged). A runtime that spins while waiting is charged for it here.", "",
              "| row | " + " | ".join(impls) + " |", "|---|" + "---|" * len(impls)]
    for label, by_threads in data["summary"].items():
        row = by_threads.get("1", {})
        edges = data["rows"][label]["kind"] == "edges"
        cols = []
        for i in impls:
            cpu = row.get(i, {}).get("cpu_ms_all_runs")
            e = row.get(i, {}).get("edges")
            cols.append(fmt(cpu, 3) + (f" ({fmt(cpu * 1e3 / e, 3)} us/edge)" if edges and cpu is not None and e else ""))
        lines.append(f"| {label} | " + " | ".join(cols) + " |")
    for impl, note in data["notes"].items():
        lines.append(f"\n{impl}: no column ({note}).")
    return "\n".join(lines) + "\n"


def check_runs(raw, smoke):
    """Every run's checksum against the sequential one; returns (summary, failures)."""
    summary, bad = {}, 0
    for label, by_threads in raw.items():
        expected = expected_checksum(by_threads)
        summary[label] = {}
        for threads, per_impl in by_threads.items():
            summary[label][threads] = {}
            for impl, runs in per_impl.items():
                s = summarize(int(threads) if impl != SEQ else 1, runs, expected)
                summary[label][threads][impl] = s
                failed = bool(s["problems"]) or expected is None
                bad += failed
                if failed:
                    print(f"  FAIL {impl} {label} threads={threads}: {s['problems'] or 'no sequential checksum'}")
                elif smoke:
                    print(f"  ok   {impl} {label} threads={threads}")
    return summary, bad


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("build_dir")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, checksums only")
    parser.add_argument("--report-only", action="store_true",
                        help="medians, verdicts and the report again from the runs in bench/results/graph.json")
    args = parser.parse_args()
    if args.report_only:
        with open(os.path.join(RESULTS, "graph.json")) as f:
            data = json.load(f)
        summary, bad = check_runs(data["raw"], False)
        data["summary"] = summary
        data["verdicts"] = {label: verdicts(data["rows"][label]["kind"], summary[label]) for label in summary}
        return write_outputs(data) or (1 if bad else 0)
    build_dir = os.path.abspath(args.build_dir)
    programs, notes = find_programs(build_dir)
    for impl, note in notes.items():
        harness.log(f"graph: no {impl}: {note}")
    if SEQ not in programs:
        print("graph: the sequential program is missing; nothing to check against")
        return 1
    rows = [(f"{w} " + " ".join(f"{k}={v}" for k, v in smoke.items()) if args.smoke else label, w,
             smoke if args.smoke else params, None, kind) for label, w, params, smoke, kind in ROWS]
    machine = harness.machine(build_dir)
    machine["load_before"] = harness.loadavg()
    probe = os.path.join(build_dir, "bench", "cpu_probe")
    if not args.smoke and not os.access(probe, os.X_OK):
        harness.log("graph: bench/cpu_probe was not built: a multi-worker run counts on its own CPU time only")
        probe = None
    speeds = {} if args.smoke else cpu_speeds(programs[SEQ])
    one_cpu = min(speeds, key=speeds.get) if speeds else None
    machine["cpu_speeds_ms"] = speeds
    machine["one_worker_cpu"] = one_cpu
    harness.log(f"graph: tile-32 Cholesky 512 by CPU (ms): {speeds}; 1-worker runs on CPU {one_cpu}")
    raw = run_all(rows, programs, 1 if args.smoke else args.runs, None if args.smoke else probe, one_cpu)
    summary, bad = check_runs(raw, args.smoke)
    if args.smoke:
        total = sum(len(per) for t in summary.values() for per in t.values())
        print(f"graph_smoke: {total - bad} passed, {bad} failed ({len(programs)} programs; "
              f"not checked: {', '.join(notes) or 'none'})")
        return 1 if bad else 0
    data = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": machine, "runs": args.runs, "programs": sorted(programs), "notes": notes,
        "rows": {label: {"workload": w, "params": p, "kind": kind} for label, w, p, _, kind in rows},
        "summary": summary,
        "verdicts": {label: verdicts(kind, summary[label]) for label, _, _, _, kind in rows},
        "raw": raw,
    }
    return write_outputs(data) or (1 if bad else 0)


def write_outputs(data):
    """bench/results/graph.{json,md}, and the report on stdout."""
    os.makedirs(RESULTS, exist_ok=True)
    with open(os.path.join(RESULTS, "graph.json"), "w") as f:
        json.dump(data, f, indent=1, default=str)
    text = report(data)
    with open(os.path.join(RESULTS, "graph.md"), "w") as f:
        f.write(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
