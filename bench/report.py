"""Renders bench/results/latest.json (written by bench/run.py) as
docs/benchmarks.md with gnuplot charts in bench/results/, and judges the
goals of issue 4. Python 3 standard library; gnuplot from Debian.
"""
import os
import shutil
import subprocess
import tempfile

BLITZ, RAYON, TBB, OMP, SEQ = "libblitz", "Rayon", "oneTBB", "OpenMP", "sequential"
PEERS = [RAYON, TBB, OMP]
IMPLS = [BLITZ] + PEERS + [SEQ]

HOW = {
    "fib": "fib(n) with no cutoff: every call above fib(1) forks. libblitz `blz_fork_join` inside one `blz_call`; "
           "Rayon `join` inside `install`; oneTBB `parallel_invoke` inside `task_arena::execute`; OpenMP "
           "`task` + `taskwait` under `parallel` + `single`. Metric: wall ns per join = time / (fib(n+1) - 1).",
    "tree": "Sum of a perfect binary tree (the Spice/Chili benchmark), one fork-join per inner node, no cutoff; "
            "nodes in one preorder block. The 1023-node tree is summed 1000 times inside one entry into the pool "
            "(the entry cost is the round-trip workload's). Workers 4-16 exceed the 2 vCPUs on purpose: adding "
            "workers must not slow a small job down. Metric: wall ns per node.",
    "parfor": "Sum (a reduction) and map (y = 3 sqrt(x)) over 10^7 doubles: libblitz `blz_parallel_for` (automatic "
              "grain; the sum keeps one partial per worker), Rayon `par_iter().sum()` / `par_iter_mut().zip()`, "
              "oneTBB `parallel_reduce` / `parallel_for`, OpenMP `parallel for` (with `reduction`). The C and C++ "
              "programs compile the kernels with `-fno-math-errno`, as Rust's `sqrt` never sets errno: with errno "
              "gcc keeps the map's `sqrt` scalar, LLVM vectorizes it (bench/meson.build). Quicksort: "
              "the same Hoare partition everywhere, the two parts forked down to 4096 elements. Metric: wall ms.",
    "uts": "Unbalanced Tree Search T1 (-t 1 -a 3 -d 10 -b 4 -r 19: geometric, SHA-1 node states, 4130071 nodes, "
           "3305118 leaves, checked). Each node's children are split in halves by the runtime's fork-join. "
           "Load balance shows as the speedup over sequential code. Metric: wall ms.",
    "spawn": "One outside thread submits 10^6 tiny tasks (each writes one slot) and waits for all of them: libblitz "
             "`blz_group_spawn` + `blz_group_wait`; Rayon `ThreadPool::spawn` + a counting latch (atomic counter, "
             "mutex and condition variable); oneTBB `task_group::run` + `wait` inside `task_arena::execute` (the "
             "caller joins the arena, TBB's model); OpenMP `task` in a `single`. Metric: wall ns per task "
             "(throughput = 1 / that).",
    "roundtrip": "An empty function run on a worker from an outside thread, back to back: libblitz `blz_call`, "
                 "Rayon `install`, oneTBB `task_arena::enqueue` + a wait on an atomic (C++20 `wait`/`notify`), "
                 "OpenMP a `parallel` region whose last thread runs it. Metric: median µs per call.",
    "wake": "The pool sleeps (libblitz: `sleeping_now` equals the worker count; the others: the same gap of "
            "sleep), an outside thread submits a task as in the round trip, the task records when it started. "
            "Each program also measures the raw futex wake-to-run latency of a thread of its own (the floor), "
            "sample by sample between its runtime's samples. Metric: p50 over all samples of all runs. Each sample "
            "also records whether the woken thread ran on the CPU it was woken from: on a VM, a wake-up onto "
            "another, idle CPU must first bring that virtual CPU back from its halt, which costs more and "
            "sometimes a whole tick of the host (docs/wake-latency.md traces it). The floor's own waiter nearly "
            "always runs on its poster's CPU, since the poster blocks at once.",
    "idle": "After: CPU time of the whole process in the 100 ms after a fib(27) by the pool ends. Trickle (the "
            "pattern of Rayon issue #642): one tiny task submitted every 1 ms for 2 s (libblitz `blz_spawn`, "
            "Rayon `spawn`, oneTBB `enqueue`, OpenMP a parallel region per task, synchronous); CPU % of the "
            "process over the 2 s and the latency from submission to start. Sequential: the task runs inline "
            "(the main thread's own cost).",
    "storm": "1000 tiny spawns (as in the spawn workload) into a sleeping pool, 10 storms per run, each after the "
             "pool fell asleep again; 16 workers on 2 vCPUs against 2 workers. Metric: median µs per storm. "
             "libblitz also reports wakeups and spurious wakeups per job from `blz_pool_stats` (over the storms "
             "and the time the pool took to fall asleep after the last).",
}

HOW.update({
    "msort": "Merge sort of 10^7 64-bit keys (mix64(i), the harness's sequence): split in halves, sort both by "
             "fork-join into the other buffer (the two buffers alternate by level, no copy-back), then merge by "
             "fork-join, the middle key of the longer run cut against its lower bound in the other, down to 8192 "
             "output keys; ranges of at most 2048 keys are sorted by one sequential merge sort (insertion sort "
             "below 16), the same code (bench/kernels.c, its Rust twin in bench/rayon/src/kernels.rs) in every "
             "runtime. The sequential program runs that sequential merge sort on all keys. Checksum: FNV-1a of the "
             "sorted keys. libblitz `blz_fork_join`, Rayon `join`, oneTBB `parallel_invoke`, OpenMP `task` + "
             "`taskwait`. Metric: wall ms.",
    "matmul": "C += A B, 1024 x 1024 doubles (integer-valued from mix64, so the product is exact and checked by "
              "FNV-1a of C): the four quadrants of C by fork-join (OpenMP: three tasks and the caller), each "
              "quadrant doing its two halves of the k dimension one after the other, down to 64 x 64 blocks that "
              "one plain loop kernel computes (four k per pass over a row of C, written out in C and in Rust so "
              "that gcc and LLVM compile it to kernels of about the same speed; bench/kernels.c says why). The sequential "
              "program runs the same recursion without forks. Metric: wall ms.",
    "bfs": "Level-synchronous breadth-first search from vertex 0 of a 1000 x 1000 grid (4-neighbour) with 3 "
           "undirected shortcuts per vertex to mix64-chosen vertices: 10^6 vertices, 9 996 000 directed edges in "
           "CSR form, built before the timed run. Each level's frontier is split in halves by fork-join down to "
           "512 vertices; a piece claims unseen neighbours by compare-and-swap on their level and appends them to "
           "the next frontier in batches (one atomic add per 1024 vertices). Checksum: vertices reached and the "
           "sum of their levels, the same whatever the schedule. The sequential program expands each level in "
           "one piece. The search is memory-bound (random reads of the levels): on the 2-vCPU virtual machine "
           "its 1-worker times moved by up to 15% from round to round for every runtime alike (see the raw "
           "runs), and 2 workers may gain more than 2x from a second core's caches. Metric: wall ms.",
})

HOW["spawn_inside"] = (
    "The spawn workload's 10^6 tiny tasks, spawned instead by one task running on a worker, into a group, and "
    "waited for there; the pool is entered once. libblitz `blz_group_create`, `blz_group_spawn` x 10^6 and "
    "`blz_group_destroy` (which waits, running tasks meanwhile) inside one `blz_call`: on a worker each spawn "
    "goes to that worker's own deque; Rayon `scope` with `s.spawn` x 10^6 inside `install` (its own deque "
    "too). oneTBB and OpenMP run the spawn workload's code again, since it already spawned from inside: "
    "`task_arena::execute` makes its caller one of the arena's threads, with its own task pool, for "
    "`task_group::run` + `wait`, and OpenMP's `task` x 10^6 + `taskwait` come from the thread of a `single` "
    "in the team; their two sections measure the same program. OpenMP's task creation is not a queued task "
    "for most of the 10^6: libgomp runs a task at once on the thread that creates it (undeferred, as with "
    "`if(0)`) while the team has more than 64 tasks per thread queued (`GOMP_task` in libgomp's task.c, GCC 12), "
    "so beyond the first 64 x threads a spawn is mostly a direct call. The other runtimes queue every task, "
    "which the spawner takes back from its own queue or a thief steals. 1 worker: no thief, the runtime's own "
    "path per task; 2 workers: the second worker steals from the spawner. Runs short of the CPUs are left out as "
    "for fib. Metric: wall ns per task (the spawns, the tasks and the wait, over 10^6).")

TITLES = {
    "fib": "1. fib by fork-join, ns per join",
    "tree": "2. Binary-tree sum, ns per node",
    "parfor": "3. parallel_for, reduce and quicksort",
    "uts": "4. Unbalanced Tree Search T1",
    "spawn": "5. Spawn throughput",
    "spawn_inside": "5b. Spawn from a worker into its own group",
    "roundtrip": "6. Round trip from outside the pool",
    "wake": "7. Wake latency from deep sleep",
    "idle": "8. Idle cost",
    "storm": "9. Wake storm",
}


def fmt(value, digits=3):
    if value is None:
        return "n/a"
    if value == 0:
        return "0"
    if abs(value) >= 10 ** digits:
        return f"{value:.0f}"
    return f"{value:.{digits}g}"


def ratio(a, b):
    return a / b if a is not None and b not in (None, 0) else None


def fmt_ratio(value):
    return "n/a" if value is None else f"{value:.2f}"


def cell(s):
    """median (CPU/wall), with flagged runs said."""
    if s is None:
        return "—"
    if s["errors"] or s["wrong_checksums"]:
        return "FAILED" if s["errors"] else "WRONG CHECKSUM"
    ok = len(s["metric_runs"])
    if s["median"] is None:
        return f"n/a ({s['flagged']}/{ok} runs short of CPUs; CPU/wall {fmt(s['cpu_per_wall'], 2)})"
    text = f"{fmt(s['median'])} ({fmt(s['cpu_per_wall'], 2)})"
    if s["flagged"]:
        text += f" [{ok - s['flagged']}/{ok} runs]"
    return text


def table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def impls_present(case):
    present = set()
    for row in case["by_threads"].values():
        present |= set(row["impls"])
    return [i for i in IMPLS if i in present]


def seq_summary(case):
    return case["by_threads"][str(case["threads"][0])]["impls"].get(SEQ)


def threads_table(case):
    impls = impls_present(case)
    peers = [i for i in impls if i != BLITZ]
    header = ["workers"] + impls + [f"libblitz/{p}" for p in peers]
    rows = []
    for threads in case["threads"]:
        row = case["by_threads"][str(threads)]
        cells = [str(threads)]
        for impl in impls:
            s = row["impls"].get(impl)
            cells.append(cell(s) if s else ("(1 thread, above)" if impl == SEQ else "—"))
        cells += [fmt_ratio(row["ratio_blitz_over"].get(p)) for p in peers]
        rows.append(cells)
    return table(header, rows)


def runtime_table(case, columns, threads=None):
    """One row per runtime; columns: (header, function of the summary)."""
    row = case["by_threads"][str(threads or case["threads"][0])]
    blitz = row["impls"].get(BLITZ)
    rows = []
    for impl in impls_present(case):
        s = row["impls"].get(impl)
        if s is None:
            continue
        if s["errors"] or s["wrong_checksums"]:
            rows.append([impl, cell(s)] + [""] * (len(columns) - 1))
            continue
        rows.append([impl] + [f(s, blitz) for _, f in columns])
    return table(["runtime"] + [h for h, _ in columns], rows)


def extra(s, key):
    return s["extra"].get(key) if s else None


def case_by(data, workload, **params):
    for case in data["workloads"].get(workload, {}).get("cases", []):
        if all(case["params"].get(k) == v for k, v in params.items()):
            return case
    return None


def impl_summary(case, threads, impl):
    if case is None:
        return None
    return case["by_threads"].get(str(threads), {}).get("impls", {}).get(impl)


def med(case, threads, impl):
    s = impl_summary(case, threads, impl)
    return s["median"] if s else None


# ---- goals ----

def goal(text, measured, met, note=""):
    return {"goal": text, "measured": measured, "met": met, "note": note}


def judge(value, limit, less=True):
    if value is None:
        return None
    return value <= limit if less else value >= limit


def pool_per(s, counter, denominator):
    """A libblitz counter summed over all runs, divided by `denominator`
    summed over the same runs (None when the runtime has no counters)."""
    if s is None or "pool_sum" not in s or not denominator:
        return None
    return s["pool_sum"][counter] / denominator


def storm_jobs(s):
    return s.get("extra_sum", {}).get("jobs") if s else None


def spurious_share(s):
    """Spurious wakeups over wakeups, summed over all runs."""
    if s is None or "pool_sum" not in s:
        return None
    return ratio(s["pool_sum"]["spurious_wakeups"], s["pool_sum"]["wakeups"]) or 0.0


def storm_figures(case):
    """libblitz's 16-worker storm summary, its wake-ups per job and its
    spurious share of wake-ups (None where not measured)."""
    s16 = impl_summary(case, 16, BLITZ)
    return s16, pool_per(s16, "wakeups", storm_jobs(s16)), spurious_share(s16)


def pooled_value(s, group, key):
    """A wake-latency figure over all samples of all runs (`group`:
    "floor_pooled" for the futex floor measured in the same program)."""
    return (s or {}).get(group, {}).get(key)


def goals(data):
    out = []
    for n in (30, 35):
        case = case_by(data, "fib", n=n)
        r = ratio(med(case, 1, BLITZ), med(case, 1, RAYON))
        out.append(goal(f"fib({n}) ns per join on 1 worker at most 0.5x Rayon's",
                        f"{fmt(med(case, 1, BLITZ))} vs {fmt(med(case, 1, RAYON))} ns: ratio {fmt_ratio(r)}",
                        judge(r, 0.5)))
        two = impl_summary(case, 2, BLITZ)
        speedup = ratio(med(case, 1, BLITZ), med(case, 2, BLITZ))
        note = ""
        if two and two["median"] is None:
            note = (f"no 2-worker run got 1.9 CPUs ({two['flagged']} flagged, median CPU/wall "
                    f"{fmt(two['cpu_per_wall'], 2)}): not measurable on this run")
        elif impl_summary(case, 1, BLITZ) and med(case, 1, BLITZ) is None:
            note = "no 1-worker run got a whole CPU: not measurable on this run"
        out.append(goal(f"fib({n}) on 2 workers at least 1.9x faster than on 1 (runs with 1.9 CPUs only)",
                        f"speedup {fmt_ratio(speedup)}", judge(speedup, 1.9, less=False), note))
    case = case_by(data, "tree", depth=10)
    r16 = ratio(med(case, 16, BLITZ), med(case, 1, BLITZ))
    rayon16 = ratio(med(case, 16, RAYON), med(case, 1, RAYON))
    one = impl_summary(case, 1, BLITZ)
    note = "no 1-worker run got a whole CPU: not measurable on this run" if one and one["median"] is None else ""
    out.append(goal("Tree sum, 1023 nodes: 16 workers at most 1.2x the 1-worker time",
                    f"{fmt_ratio(r16)} (Rayon {fmt_ratio(rayon16)})", judge(r16, 1.2), note))
    case = case_by(data, "idle", phase="after")
    b, p = med(case, 2, BLITZ), med(case, 2, RAYON)
    out.append(goal("Idle: CPU burned in the 100 ms after work at most Rayon's",
                    f"{fmt(b)} vs {fmt(p)} ms CPU", judge(ratio(b, p), 1.0)))
    case = case_by(data, "idle", phase="trickle")
    b, p = med(case, 2, BLITZ), med(case, 2, RAYON)
    bl, pl = extra(impl_summary(case, 2, BLITZ), "p50_us"), extra(impl_summary(case, 2, RAYON), "p50_us")
    cpu_ok, lat_ok = judge(ratio(b, p), 0.5), judge(ratio(bl, pl), 1.0)
    out.append(goal("Idle: 1 ms trickle at most 0.5x Rayon's CPU% at equal or better latency",
                    f"{fmt(b)}% vs {fmt(p)}% (ratio {fmt_ratio(ratio(b, p))}); p50 latency {fmt(bl)} vs "
                    f"{fmt(pl)} µs", None if cpu_ok is None or lat_ok is None else cpu_ok and lat_ok))
    s16, wakeups, share = storm_figures(case_by(data, "storm"))
    out.append(goal("Wake storm (16 workers): at most 1.0 wakeup per injected job",
                    f"{fmt(wakeups)} wakeups per job", judge(wakeups, 1.0)))
    out.append(goal("Wake storm (16 workers): spurious wakeups under 5% of wakeups",
                    f"{fmt(None if share is None else share * 100)}% "
                    f"({fmt(pool_per(s16, 'spurious_wakeups', storm_jobs(s16)))} per job)",
                    None if share is None else share < 0.05))
    case = case_by(data, "roundtrip")
    b, p = med(case, 2, BLITZ), med(case, 2, RAYON)
    out.append(goal("`blz_call` round trip at most Rayon's `install`", f"{fmt(b)} vs {fmt(p)} µs",
                    judge(ratio(b, p), 1.0)))
    case = case_by(data, "wake")
    s = impl_summary(case, 2, BLITZ)
    p50, floor = pooled_value(s, "pooled", "p50_us"), pooled_value(s, "floor_pooled", "p50_us")
    out.append(goal("Wake latency p50 within 1.2x of the futex floor (same program)",
                    f"{fmt(p50)} vs {fmt(floor)} µs: {fmt_ratio(ratio(p50, floor))}x",
                    judge(ratio(p50, floor), 1.2)))
    case = case_by(data, "spawn")
    b, p = med(case, 2, BLITZ), med(case, 2, RAYON)
    r = ratio(p, b)
    out.append(goal("Spawn throughput at least 2x Rayon's `spawn` with a counting latch",
                    f"{fmt(1e3 / b if b else None)} vs {fmt(1e3 / p if p else None)} M tasks/s: {fmt_ratio(r)}x",
                    judge(r, 2.0, less=False)))
    return out


def cpu_of(data, workload):
    """The CPU model the workload's section ran on."""
    entry = data["workloads"].get(workload) or {}
    return (entry.get("machine") or data["machine"]).get("cpu", "an unnamed CPU")


def goals_issue17(data):
    """The goals table of issue 17, one row per measure."""
    out = []
    case = case_by(data, "spawn")
    b, p, t = med(case, 2, BLITZ), med(case, 2, RAYON), med(case, 2, TBB)
    vs_rayon, vs_tbb = ratio(b, p), ratio(b, t)
    met = None if vs_rayon is None or vs_tbb is None else vs_rayon <= 0.5 and vs_tbb <= 0.75
    out.append(goal("Outside spawn + group wait, 10^6 tiny tasks, 2 workers: at most 0.5x Rayon's time and "
                    "0.75x oneTBB's",
                    f"{fmt(b)} ns per task vs Rayon {fmt(p)}, oneTBB {fmt(t)}: ratios {fmt_ratio(vs_rayon)} and "
                    f"{fmt_ratio(vs_tbb)}", met))
    case = case_by(data, "spawn_inside")
    for threads in (1, 2):
        b, p = med(case, threads, BLITZ), med(case, threads, OMP)
        r = ratio(b, p)
        workers = f"{threads} worker" + ("s" if threads > 1 else "")
        out.append(goal(f"Spawn from a worker (10^6 tasks into a group, inside `blz_call`), {workers}: "
                        "ns per task at most OpenMP's task creation time per task",
                        f"{fmt(b)} vs {fmt(p)} ns per task: ratio {fmt_ratio(r)}", judge(r, 1.0),
                        short_of_cpus(case, threads, [BLITZ, OMP])))
    out.extend(wake_goals(case_by(data, "wake")))
    out.append(storm_goal(case_by(data, "storm")))
    case = case_by(data, "fib", n=30)
    r = ratio(med(case, 1, BLITZ), med(case, 1, RAYON))
    out.append(goal("fib(30) ns per join, 1 worker: at most 0.45x Rayon's, on Intel and AMD hosts alike",
                    f"{fmt(med(case, 1, BLITZ))} vs {fmt(med(case, 1, RAYON))} ns: ratio {fmt_ratio(r)} "
                    f"on {cpu_of(data, 'fib')}", judge(r, 0.45)))
    case = case_by(data, "tree", depth=24)
    r = ratio(med(case, 1, BLITZ), med(case, 1, SEQ))
    out.append(goal("Tree sum of 2^24 - 1 nodes, 1 worker: at most 2.0x the sequential sum",
                    f"{fmt(med(case, 1, BLITZ))} vs {fmt(med(case, 1, SEQ))} ns per node: {fmt_ratio(r)}x "
                    f"(Rayon {fmt_ratio(ratio(med(case, 1, RAYON), med(case, 1, SEQ)))}x)", judge(r, 2.0)))
    for op, name in (("sum", "sum of 10^7 doubles"), ("map", "map over 10^7 doubles"),
                     ("sort", "quicksort of 10^7 doubles")):
        out.append(best_peer_goal(case_by(data, "parfor", op=op), f"Data-parallel {name}, 1 worker"))
    return out


def wake_goals(case):
    """p50 within 1.2x and p99 within 2x of the futex floor, each better
    than Rayon's and oneTBB's; and p99 on the waker's CPU alone."""
    s = impl_summary(case, 2, BLITZ)
    out = []
    for pct, limit in (("p50", 1.2), ("p99", 2.0)):
        key = f"{pct}_us"
        mine, floor = pooled_value(s, "pooled", key), pooled_value(s, "floor_pooled", key)
        peers = {impl: pooled_value(impl_summary(case, 2, impl), "pooled", key) for impl in (RAYON, TBB)}
        r = ratio(mine, floor)
        beats = [None if v is None or mine is None else mine < v for v in peers.values()]
        met = None if r is None or None in beats else r <= limit and all(beats)
        out.append(goal(f"Wake from deep sleep: {pct} at most {limit}x the futex floor's {pct} (all samples), "
                        "and better than Rayon's and oneTBB's",
                        f"{fmt(mine)} vs floor {fmt(floor)} µs: {fmt_ratio(r)}x; Rayon {fmt(peers[RAYON])}, "
                        f"oneTBB {fmt(peers[TBB])} µs", met))
    same99, floor_same99 = extra(s, "same_p99_us"), extra(s, "floor_same_p99_us")
    out.append(goal("The p99 again, wake-ups on the waker's CPU only, against the floor's on its poster's CPU "
                    "(each run's p99, median over runs; wake-ups onto another CPU are section 7's last column)",
                    f"{fmt(same99)} vs {fmt(floor_same99)} µs: {fmt_ratio(ratio(same99, floor_same99))}x",
                    judge(ratio(same99, floor_same99), 2.0)))
    return out


def storm_goal(case):
    _, wakeups, share = storm_figures(case)
    met = None if wakeups is None or share is None else wakeups <= 1.0 and share < 0.05
    return goal("Wake storm, 16 workers on 2 CPUs: spurious under 5% of wake-ups, at most 1.0 wake-up per job",
                f"{fmt(None if share is None else share * 100)}% spurious; {fmt(wakeups)} wake-ups per job", met)


def best_peer_goal(case, name):
    """libblitz's 1-worker time within 1.05x of the fastest peer's."""
    peers = {impl: med(case, 1, impl) for impl in PEERS}
    timed = {impl: v for impl, v in peers.items() if v is not None}
    best = min(timed, key=timed.get) if timed else None
    r = ratio(med(case, 1, BLITZ), timed.get(best))
    return goal(f"{name}: within 1.05x of the fastest peer",
                f"{fmt(med(case, 1, BLITZ))} vs {best or 'no peer'} {fmt(timed.get(best))} ms: ratio {fmt_ratio(r)}",
                judge(r, 1.05), short_of_cpus(case, 1, [BLITZ] + PEERS))


def short_of_cpus(case, threads, impls):
    """A goal's note when a runtime it compares has no run that got the CPUs."""
    summaries = {impl: impl_summary(case, threads, impl) for impl in impls}
    short = [impl for impl, s in summaries.items() if s and s["median"] is None and s["flagged"]]
    if not short:
        return ""
    got = ", ".join(f"{impl} {fmt(summaries[impl]['cpu_per_wall'], 2)}" for impl in short)
    return (f"no {threads}-worker run of {' or '.join(short)} got {threads - 0.1:.1f} CPUs (median CPU/wall: {got}): "
            "not measurable on this run")


def goals_section(items, issue):
    mark = {True: "met", False: "**not met**", None: "not measured"}
    rows = [[g["goal"], g["measured"], mark[g["met"]] + (f" ({g['note']})" if g["note"] else "")] for g in items]
    return table([f"goal (issue {issue})", "measured", "verdict"], rows)


# ---- charts ----

def gnuplot(script, workdir):
    if shutil.which("gnuplot") is None:
        return "gnuplot not found (apt-get install gnuplot)"
    out = subprocess.run(["gnuplot"], input=script, text=True, capture_output=True, cwd=workdir)
    return out.stderr.strip() if out.returncode != 0 else ""


def histogram_script(png, title, ylabel, plots):
    """A clustered bar chart on a log scale, one cluster per data row."""
    return f"""set terminal pngcairo size 900,480 font ",10"
set output '{png}'
set title '{title}'
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set datafile missing '?'
set logscale y
set yrange [1:*]
set ylabel '{ylabel}'
set grid ytics
set key top left
plot {plots}
"""


def dat(value):
    return "?" if value is None else f"{value:.6g}"


def chart_fib(data, work, png):
    impls = [BLITZ] + PEERS
    lines = ["group " + " ".join(f'"{i}"' for i in impls)]
    for n in (30, 35):
        case = case_by(data, "fib", n=n)
        for threads in (1, 2):
            lines.append(f'"fib({n}), {threads}w" ' + " ".join(dat(med(case, threads, i)) for i in impls))
    with open(os.path.join(work, "fib.dat"), "w") as f:
        f.write("\n".join(lines) + "\n")
    plots = ", ".join(f"'fib.dat' using {k + 2}:xtic(1) title columnheader" for k in range(len(impls)))
    return gnuplot(histogram_script(png, "fib by fork-join, no cutoff: wall ns per join, log scale "
                                         "(no bar: no run got the CPUs)", "ns per join", plots), work)


def chart_tree(data, work, png):
    workers = [1, 2, 4, 8, 16]
    impls = [BLITZ] + PEERS
    for depth in (10, 24):
        case = case_by(data, "tree", depth=depth)
        with open(os.path.join(work, f"tree{depth}.dat"), "w") as f:
            for w in workers:
                f.write(f"{w} " + " ".join(dat(med(case, w, i)) for i in impls) + "\n")
    def plots(depth):
        return ", ".join(f"'tree{depth}.dat' using 1:{k + 2} with linespoints title '{i}'"
                         for k, i in enumerate(impls))
    return gnuplot(f"""set terminal pngcairo size 1000,440 font ",10"
set output '{png}'
set datafile missing '?'
set multiplot layout 1,2 title 'Binary-tree sum over workers (2 vCPUs): wall ns per node, log scale, lower is better; no point: no run got the CPUs'
set logscale xy
set xtics (1, 2, 4, 8, 16)
set xlabel 'workers'
set ylabel 'ns per node'
set grid
set key top left
set title '1023 nodes'
plot {plots(10)}
set title '2^{{24}} - 1 nodes'
plot {plots(24)}
unset multiplot
""", work)


def chart_wake(data, work, png):
    case = case_by(data, "wake")
    lines = ['runtime "p50" "p99" "futex floor p50 (same program)" "futex floor p99"']
    for impl in [BLITZ] + PEERS + [SEQ]:
        s = impl_summary(case, 2, impl)
        if s is None:
            continue
        pooled, floor = s.get("pooled", {}), s.get("floor_pooled", {})
        label = "futex alone" if impl == SEQ else impl
        lines.append(f'"{label}" {dat(pooled.get("p50_us"))} {dat(pooled.get("p99_us"))} '
                     f'{dat(floor.get("p50_us"))} {dat(floor.get("p99_us"))}')
    with open(os.path.join(work, "wake.dat"), "w") as f:
        f.write("\n".join(lines) + "\n")
    plots = "'wake.dat' using 2:xtic(1) title columnheader, " + ", ".join(
        f"'' using {k} title columnheader" for k in (3, 4, 5))
    return gnuplot(histogram_script(png, "Wake latency from deep sleep against the futex floor (µs, log scale)",
                                    "µs from submission to the task starting", plots), work)


# The application workloads (issue 17): one section, a part per workload.
APPS = {"msort": "Merge sort", "matmul": "Matrix multiply", "bfs": "Breadth-first search"}
APPS_TITLE = "10. Real application workloads"


def speedup(case, threads, impl):
    """The sequential program's median time over this runtime's."""
    return ratio(med(case, case["threads"][0], SEQ), med(case, threads, impl))


def chart_apps(data, work, png):
    impls = [BLITZ] + PEERS
    lines = ["group " + " ".join(f'"{i}"' for i in impls)]
    for workload in APPS:
        for case in data["workloads"].get(workload, {}).get("cases", []):
            for threads in case["threads"]:
                lines.append(f'"{workload}, {threads}w" ' + " ".join(dat(speedup(case, threads, i)) for i in impls))
    with open(os.path.join(work, "apps.dat"), "w") as f:
        f.write("\n".join(lines) + "\n")
    plots = ", ".join(f"'apps.dat' using {k + 2}:xtic(1) title columnheader" for k in range(len(impls)))
    script = histogram_script(png, "Application workloads: speedup over sequential code, higher is better "
                                   "(no bar: no run got the CPUs)",
                              "speedup over sequential", plots)
    script = script.replace("set logscale y\nset yrange [1:*]", "set yrange [0:*]")
    return gnuplot(script, work)


CHARTS = [("fib", "fib.png", chart_fib, "ns per join"), ("tree", "tree_scaling.png", chart_tree, "tree-sum scaling"),
          ("wake", "wake_latency.png", chart_wake, "wake latency against the futex floor"),
          ("apps", "apps.png", chart_apps, "the application workloads' speedups")]


def make_charts(data, results_dir):
    """{workload: (png name or None, problem)}"""
    made = {}
    with tempfile.TemporaryDirectory() as work:
        for workload, name, draw, what in CHARTS:
            if not any(w in data["workloads"] for w in (APPS if workload == "apps" else [workload])):
                continue
            png = os.path.join(results_dir, name)
            problem = draw(data, work, png)
            made[workload] = (None, f"chart of {what} not drawn: {problem}") if problem else (name, "")
    return made


# ---- sections ----

def machine_section(data):
    m = data["machine"]
    rows = [["CPU", f"{m['cpu']} ({'virtual machine' if m['hypervisor'] else 'no hypervisor flag'})"],
            ["CPUs", f"{m['cpus_available']} available to the process, {m['cpus_online']} online"],
            ["memory", m["memory"]], ["kernel", m["kernel"]], ["OS", m["os"]],
            ["C / C++ compiler", f"{m['cc']} / {m['cxx']}"], ["Rust", f"{m['rustc']}; {m['cargo']}"],
            ["oneTBB", m["tbb"]], ["Rayon (Debian sources)", m["rayon_sources"]],
            ["OpenMP", "libgomp of the C++ compiler, default settings (OMP_WAIT_POLICY unset)"],
            ["build", f"{m['build_dir']}, {m['buildtype']}"]]
    return table(["", ""], rows)


def run_line(entry, data):
    """When and how a section ran, and on which machine if not the one above."""
    line = (f"Run on {entry['generated']}, {entry['runs']} runs per runtime, {entry['seconds']:.0f} s; "
            f"load average {entry['loadavg_before']} before, {entry['loadavg_after']} after.")
    cpu = (entry.get("machine") or {}).get("cpu")
    if cpu and cpu != data["machine"]["cpu"]:
        line += f" Machine: {cpu} (not the one the Machine section describes)."
    return line + (f" Conditions: {entry['note']}" if entry.get("note") else "")


def one_worker_line(cases):
    """Each runtime's 1-worker time over the sequential program's: its own
    cost on one worker, and for Rayon also its Rust kernels' speed."""
    parts = []
    for case in cases:
        cells = [f"{impl} {fmt_ratio(ratio(med(case, 1, impl), med(case, 1, SEQ)))}" for impl in [BLITZ] + PEERS
                 if impl_summary(case, 1, impl)]
        parts.append(", ".join(cells))
    return ("1 worker ÷ sequential program: " + "; ".join(parts) + ". Above 1.00: the runtime's cost on one "
            "worker; Rayon runs the Rust twins of the kernels, so its figure also shows how fast LLVM's code is "
            "against gcc's.")


def apps_section(data, charts, rel):
    m = [f"## {APPS_TITLE}\n",
         "Three applications written for each runtime with the same algorithm, the same cutoffs and the same "
         "sequential kernels, checked against the sequential program by checksum. Each table gives the median "
         "wall ms with CPU/wall in parentheses, on 1 and 2 workers, and libblitz ÷ each peer (below 1.00 "
         "libblitz is faster); runs that did not get the CPUs are left out as above.\n"]
    for workload, title in APPS.items():
        m.append(f"### {title} (`{workload}`)\n")
        entry = data["workloads"].get(workload)
        if entry is None:
            m.append(f"Not run yet (`./dev bench {workload}`; `./dev bench apps` runs all three).\n")
            continue
        m.append(HOW[workload] + "\n")
        m.append(run_line(entry, data) + "\n")
        m.append(section_body(workload, entry["cases"]) + "\n")
        m.append(one_worker_line(entry["cases"]) + "\n")
    if "apps" in charts:
        name, problem = charts["apps"]
        m.append(f"![application workloads]({rel}/{name})\n" if name else f"({problem})\n")
    return "\n".join(m)


def section_body(workload, cases):
    parts = []
    for case in cases:
        title = f"**{case['title']}**" if case.get("title") else ""
        if case["checksum_problem"]:
            parts.append(f"{title}\n\nCHECKSUM PROBLEM: {case['checksum_problem']}")
            continue
        if workload in ("fib", "tree", "parfor", "storm", "spawn_inside") or workload in APPS:
            body = threads_table(case)
            if workload == "storm":
                body += "\n\n" + storm_stats(case)
            if workload == "spawn_inside":
                body += "\n\n" + steal_line(case)
        else:
            body = runtime_table(case, COLUMNS[(workload, case["params"].get("phase"))])
        parts.append(f"{title}\n\n{body}" if title else body)
    return "\n\n".join(parts)


def blitz_counters(case):
    """(workers, libblitz's summary) for each worker count whose runs have pool counters."""
    for threads in case["threads"]:
        s = impl_summary(case, threads, BLITZ)
        if s is not None and "pool_sum" in s:
            yield threads, s


def storm_stats(case):
    rows = []
    for threads, s in blitz_counters(case):
        jobs, share = storm_jobs(s), spurious_share(s)
        rows.append([threads, fmt(pool_per(s, "wakeups", jobs)), fmt(pool_per(s, "spurious_wakeups", jobs)),
                     fmt(None if share is None else share * 100), fmt(pool_per(s, "sleeps", jobs)),
                     fmt(s.get("extra_sum", {}).get("never_asleep"))])
    return ("libblitz's counters (`blz_pool_stats`), summed over all runs and divided by all their "
            "jobs:\n\n") + table(
        ["workers", "wakeups per job", "spurious wakeups per job", "spurious % of wakeups", "sleeps per job",
         "storms that began before the pool slept"], rows)


def steal_line(case):
    """How many of libblitz's tasks a thief took, from its counters."""
    cells = []
    for threads, s in blitz_counters(case):
        steals = pool_per(s, "steals", case["params"]["tasks"] * s["pool_runs"])
        cells.append(f"{fmt(steals)} on {threads} worker" + ("s" if threads > 1 else ""))
    if not cells:
        return ""
    return ("libblitz's steals per task (`blz_pool_stats`, summed over the runs that counted): " + ", ".join(cells)
            + ". Each steal takes one task from the spawner's deque.")


def per_seq(s, case_seq):
    return ratio(case_seq, s["median"]) if case_seq else None


def blitz_ratio(s, blitz):
    return fmt_ratio(ratio(blitz["median"] if blitz else None, s["median"]))


def pooled(s, group, key):
    return fmt(pooled_value(s, group, key))


def on_waker_cpu(s, key):
    """Wake-ups that ran on the waker's CPU, over all samples of all runs."""
    here, samples = s.get("extra_sum", {}).get(key), s.get("pooled", s.get("floor_pooled", {})).get("samples")
    return f"{here:.0f}/{samples}" if here is not None and samples else "n/a"


def worst_elsewhere(s, count_key, p99_key):
    """The slowest wake-up onto another CPU (each run's p99 of those, the worst run), or none."""
    sums = s.get("extra_sum", {})
    samples = s.get("pooled", s.get("floor_pooled", {})).get("samples")
    if sums.get(count_key) is None or not samples:
        return "n/a"
    return "none" if sums[count_key] >= samples else fmt(s.get("extra_max", {}).get(p99_key))


COLUMNS = {
    ("uts", None): [
        ("ms", lambda s, b: cell(s)), ("ns per node", lambda s, b: fmt(extra(s, "ns_per_node"))),
        ("libblitz / this", blitz_ratio)],
    ("spawn", None): [
        ("ns per task (CPU/wall)", lambda s, b: cell(s)),
        ("M tasks/s", lambda s, b: fmt(1e3 / s["median"]) if s["median"] else "n/a"),
        ("libblitz / this (time)", blitz_ratio)],
    ("roundtrip", None): [
        ("median µs (CPU/wall)", lambda s, b: cell(s)), ("p99 µs", lambda s, b: fmt(extra(s, "p99_us"))),
        ("mean µs", lambda s, b: fmt(extra(s, "mean_us"))),
        ("worker sleeps per call", lambda s, b: fmt(pool_per(s, "sleeps", s.get("extra_sum", {}).get("calls")))),
        ("libblitz / this", blitz_ratio)],
    ("wake", None): [
        ("p50 µs", lambda s, b: pooled(s, "pooled", "p50_us") if "pooled" in s else "(the floor only)"),
        ("p99 µs", lambda s, b: pooled(s, "pooled", "p99_us") if "pooled" in s else ""),
        ("samples", lambda s, b: str(s.get("pooled", s.get("floor_pooled", {})).get("samples", ""))),
        ("futex floor p50 µs", lambda s, b: pooled(s, "floor_pooled", "p50_us")),
        ("floor p99 µs", lambda s, b: pooled(s, "floor_pooled", "p99_us")),
        ("p50 / floor p50", lambda s, b: fmt_ratio(ratio(s.get("pooled", {}).get("p50_us"),
                                                         s.get("floor_pooled", {}).get("p50_us")))),
        ("on the waker's CPU (floor)", lambda s, b: (on_waker_cpu(s, "same_cpu") if "pooled" in s else "-")
         + f" ({on_waker_cpu(s, 'floor_same_cpu')})"),
        ("slowest onto another CPU µs (floor)", lambda s, b: (worst_elsewhere(s, "same_cpu", "other_p99_us")
                                                              if "pooled" in s else "-")
         + f" ({worst_elsewhere(s, 'floor_same_cpu', 'floor_other_p99_us')})")],
    ("idle", "after"): [
        ("ms CPU in 100 ms", lambda s, b: fmt(s["median"])), ("runs", lambda s, b: str(len(s["metric_runs"]))),
        ("all runs, ms", lambda s, b: ", ".join(fmt(v, 2) for v in s["metric_runs"])),
        ("libblitz / this", blitz_ratio)],
    ("idle", "trickle"): [
        ("CPU %", lambda s, b: fmt(s["median"])), ("task latency p50 µs", lambda s, b: fmt(extra(s, "p50_us"))),
        ("p99 µs", lambda s, b: fmt(extra(s, "p99_us"))), ("libblitz / this (CPU)", blitz_ratio),
        ("libblitz / this (p50)", lambda s, b: fmt_ratio(ratio(extra(b, "p50_us"), extra(s, "p50_us"))))],
}


def extras_section(data):
    out = []
    titles = {"rustjoin": ("Extra: the Rust binding's cost per join (bench/rust-join)", "median ns/join"),
              "sort": ("Extra: parallel sort (bench/sort/sort_bench)", "median ms")}
    for name, (title, unit) in titles.items():
        out.append(f"## {title}\n")
        entry = data["extras"].get(name)
        if entry is None:
            out.append("Not run yet (`./dev bench " + name + "`).\n")
            continue
        if "skipped" in entry:
            out.append(f"Skipped: {entry['skipped']} ({entry.get('generated', '')}).\n")
            continue
        d = entry["data"]
        key = "median_ns_per_join" if name == "rustjoin" else "median_ms"
        rows = [[r.get("runtime"), r.get("threads"), fmt(r.get(key)), len(r.get("runs", [])),
                 fmt(r.get("cpu_per_wall"), 2)] for r in d.get("rows", [])]
        out.append(f"`{entry.get('command', '')}`, {entry.get('generated', '')}; the program's own interleaving "
                   f"and filtering." + (f" Conditions: {entry['note']}" if entry.get("note") else "") + "\n")
        out.append(table(["runtime", "threads", unit, "runs", "CPU/wall"], rows) + "\n")
    return "\n".join(out)


def findings_section():
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "findings.md")
    try:
        with open(path) as f:
            return f.read().strip() + "\n"
    except OSError:
        return ""


def write(data, results_dir, markdown_path):
    """Writes the charts and the markdown; returns the goals by issue."""
    items = goals(data)
    items17 = goals_issue17(data)
    charts = make_charts(data, results_dir)
    rel = os.path.relpath(results_dir, os.path.dirname(markdown_path))
    m = []
    m.append("# Benchmarks: libblitz next to Rayon, oneTBB, OpenMP and sequential code\n")
    m.append(f"Generated by `./dev bench` (`tools/bench.sh` → `bench/run.py`) on {data['generated']}; raw runs in "
             f"[bench/results/latest.json](../bench/results/latest.json). Do not edit: rerun instead.\n")
    notes = sorted({e.get("note", "") for e in list(data["workloads"].values()) + list(data["extras"].values())} - {""})
    for note in notes:
        m.append(f"> **Conditions noted for the runs below:** {note}\n")
    m.append("How to read the tables: every figure is the median over interleaved runs (each runtime ran once per "
             "round, the order rotating each round; every run is a fresh process: one warm-up, then one measured "
             "run). In parentheses: CPU time of the whole process ÷ wall time of the measured run. Ratios are "
             "libblitz ÷ peer on the same metric: below 1.00 libblitz is faster (or cheaper). For fib, tree, "
             "parfor, UTS, the spawn from a worker and the application workloads, a run on 2 workers that got "
             "less than 1.9 CPUs, or on 1 worker (or sequential) less than 0.9, is flagged and left out of the median (`[k/n runs]` says how many counted); with "
             "none left the cell says n/a, never a figure for that many workers. With 4 to 16 workers on the 2 "
             "vCPUs, CPU/wall is shown but not judged. "
             "Every run's checksum was compared with the sequential program's; a mismatch would show as WRONG "
             "CHECKSUM.\n")
    for impl, note in data.get("missing_programs", {}).items():
        m.append(f"* {impl} is missing from this run: {note}")
    m.append("\n## Machine\n")
    m.append(f"The machine of the latest run ({data['generated']}). A section that ran on another machine names "
             "its CPU in its \"Run on\" line.\n")
    m.append(machine_section(data) + "\n")
    m.append("## Goals\n")
    m.append(goals_section(items, 4) + "\n")
    m.append("Issue 17 (performance, round 2). For each goal not met, the last part of this file (\"What the "
             "figures mean\") gives the measurement that explains it and the next step.\n")
    m.append(goals_section(items17, 17) + "\n")
    for workload, title in TITLES.items():
        entry = data["workloads"].get(workload)
        m.append(f"## {title}\n")
        if entry is None:
            m.append(f"Not run yet (`./dev bench {workload}`).\n")
            continue
        m.append(HOW[workload] + "\n")
        m.append(run_line(entry, data) + "\n")
        m.append(section_body(workload, entry["cases"]) + "\n")
        if workload in charts:
            name, problem = charts[workload]
            m.append(f"![{workload}]({rel}/{name})\n" if name else f"({problem})\n")
    m.append(apps_section(data, charts, rel))
    m.append(extras_section(data))
    m.append(findings_section())
    os.makedirs(os.path.dirname(markdown_path), exist_ok=True)
    with open(markdown_path, "w") as f:
        f.write("\n".join(m))
    return {"4": items, "17": items17}
