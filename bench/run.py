#!/usr/bin/env python3
"""The benchmark driver of issue 4: libblitz next to Rayon, oneTBB, OpenMP
and sequential code.

    bench/run.py BUILD_DIR [NAME ...] [--runs N] [--note TEXT]
    bench/run.py BUILD_DIR --smoke
    bench/run.py BUILD_DIR --report-only

Every benchmark program (bench/harness.c and its Rust twin) runs ONE
measured run of one workload per invocation and prints one JSON line. This
driver interleaves the runtimes run by run (A B C D E, then the order
rotated, ...), at least --runs times each (default 5), checks every
checksum against the sequential program's, takes medians and the ratios
libblitz / peer, and writes bench/results/latest.json and, through
bench/report.py, docs/benchmarks.md with its charts. With NAMEs only those
workloads run (apps: the application workloads msort, matmul and bfs); the
others keep their figures from the previous run in latest.json, each with
its own date and machine.

--report-only renders the report again from the raw runs in latest.json
(medians and flags recomputed), running nothing.

--smoke runs every C/C++ program at tiny sizes and checks checksums only
(no timing is judged); it ends with "bench_smoke: N passed, M failed" and is
the meson test of suite 'bench'.

Python 3 standard library only.
"""
import argparse
import datetime
import hashlib
import json
import math
import os
import platform
import shutil
import statistics
import struct
import random
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
RESULTS = os.path.join(HERE, "results")
LATEST = os.path.join(RESULTS, "latest.json")

BLITZ, RAYON, TBB, OMP, SEQ = "libblitz", "Rayon", "oneTBB", "OpenMP", "sequential"
PEERS = [RAYON, TBB, OMP]
IMPLS = [BLITZ] + PEERS + [SEQ]

# Workloads that measure throughput: a run on 1 or 2 workers (or the
# sequential program) that got less than `threads - 0.1` CPUs (CPU/wall
# below 0.9, or below 1.9 on two workers) is flagged and left out of the
# medians: the VM did not deliver the CPUs. With more workers than the 2
# vCPUs, CPU/wall is shown but not judged (idle workers may rightly sleep).
# spawn_inside counts: from the first spawn to the last task there is work
# for every worker (the spawner's queue), so a run short of CPUs is the VM's
# doing. spawn does not: its outside thread and the workers wait on each
# other's cache lines, and runs that got one CPU were faster.
THROUGHPUT = {"fib", "tree", "parfor", "uts", "msort", "matmul", "bfs", "spawn_inside", "iter"}
CPU_SHORTFALL_ALLOWED = 0.1


class Case:
    """One workload with fixed parameters, run at each thread count."""

    def __init__(self, workload, params, threads, title):
        self.workload, self.params, self.threads, self.title = workload, params, threads, title

    def key(self):
        return self.workload + ":" + ",".join(f"{k}={v}" for k, v in self.params.items())


def full_plan():
    workers = [1, 2, 4, 8, 16]
    return {
        "fib": [Case("fib", {"n": 30}, [1, 2], "fib(30)"), Case("fib", {"n": 35}, [1, 2], "fib(35)")],
        "tree": [Case("tree", {"depth": 10, "reps": 1000}, workers, "1023 nodes, summed 1000 times per run"),
                 Case("tree", {"depth": 24, "reps": 1}, workers, "2^24 - 1 nodes")],
        "parfor": [Case("parfor", {"op": "sum", "n": 10**7}, [1, 2], "sum of 10^7 doubles"),
                   Case("parfor", {"op": "map", "n": 10**7}, [1, 2], "map over 10^7 doubles"),
                   Case("parfor", {"op": "sort", "n": 10**7}, [1, 2], "quicksort of 10^7 doubles")],
        "uts": [Case("uts", {"depth": 10}, [2], "UTS T1 (geometric, 4130071 nodes)")],
        "spawn": [Case("spawn", {"tasks": 10**6}, [2], "10^6 tiny tasks from an outside thread")],
        # Issue 17. 1 worker: what a spawn and the task's run cost with no
        # thief, so nothing but the runtime's own path; 2 workers: the same
        # with a thief taking tasks from the spawner's queue (the goal's
        # row judges both). More workers than the 2 vCPUs would only say
        # how the runtimes share CPUs, as the tree case does already.
        "spawn_inside": [Case("spawn_inside", {"tasks": 10**6}, [1, 2],
                              "10^6 tiny tasks from a worker into its own group")],
        "roundtrip": [Case("roundtrip", {"calls": 1000}, [2], "an empty function run on a worker, from outside")],
        "wake": [Case("wake", {"samples": 40, "gap_ms": 30}, [2], "spawn into a sleeping pool")],
        "idle": [Case("idle", {"phase": "after"}, [2], "CPU in the 100 ms after work"),
                 Case("idle", {"phase": "trickle", "ms": 2000}, [2], "one tiny task every 1 ms for 2 s")],
        "storm": [Case("storm", {"tasks": 1000, "storms": 10}, [16, 2], "1000 spawns into a sleeping pool")],
        # The application workloads (issue 17); the NAME apps runs all three.
        "msort": [Case("msort", {"n": 10**7}, [1, 2], "merge sort of 10^7 64-bit keys")],
        "matmul": [Case("matmul", {"n": 1024}, [1, 2], "C += A B, 1024 x 1024 doubles")],
        "bfs": [Case("bfs", {"side": 1000, "shortcuts": 3}, [1, 2],
                     "BFS of a 1000 x 1000 grid with 3 shortcuts per vertex (10^6 vertices, 10^7 directed edges)")],
    }


def smoke_plan():
    return {
        "fib": [Case("fib", {"n": 12}, [1, 2], "")],
        "tree": [Case("tree", {"depth": 6, "reps": 3}, [1, 16], "")],
        "parfor": [Case("parfor", {"op": op, "n": 20000}, [2], "") for op in ("sum", "map", "sort")],
        "uts": [Case("uts", {"depth": 3}, [2], "")],
        "spawn": [Case("spawn", {"tasks": 3000}, [2], "")],
        # Above 64 per thread, so that OpenMP also runs tasks undeferred (libgomp's cut-off).
        "spawn_inside": [Case("spawn_inside", {"tasks": 3000}, [1, 2], "")],
        "roundtrip": [Case("roundtrip", {"calls": 20}, [2], "")],
        "wake": [Case("wake", {"samples": 2, "gap_ms": 2}, [2], "")],
        "idle": [Case("idle", {"phase": "after", "quiet_ms": 5}, [2], ""),
                 Case("idle", {"phase": "trickle", "ms": 20}, [2], "")],
        "storm": [Case("storm", {"tasks": 50, "storms": 2, "gap_ms": 2}, [4], "")],
        # Above every cutoff, so that the forks and the parallel merge run.
        "msort": [Case("msort", {"n": 50000}, [1, 2], "")],
        "matmul": [Case("matmul", {"n": 128}, [2], "")],
        "bfs": [Case("bfs", {"side": 100, "shortcuts": 3}, [1, 2], "")],
    }


# NAMEs that stand for several workloads.
ALIASES = {"apps": ["msort", "matmul", "bfs"]}


EXTRAS = ["rustjoin", "sort"]

# ---- reference checksums, computed here independently of every program ----

MASK64 = (1 << 64) - 1


def mix64(x):
    x = (x + 0x9E3779B97F4A7C15) & MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK64
    return x ^ (x >> 31)


def fnv_doubles(values):
    h = 0xCBF29CE484222325
    for v in values:
        h = ((h ^ struct.unpack("<Q", struct.pack("<d", v))[0]) * 0x100000001B3) & MASK64
    return f"{h:016x}"


def uts_count(max_depth):
    """UTS T1 (geometric, fixed shape, b = 4, root 19) by hashlib's SHA-1."""
    def children(state, height):
        if height >= max_depth:
            return 0
        u = (int.from_bytes(state[16:20], "big") & 0x7FFFFFFF) / 2147483648.0
        return min(int(math.floor(math.log(1.0 - u) / math.log(1.0 - 1.0 / 5.0))), 100)
    nodes = leaves = 0
    stack = [(hashlib.sha1(bytes(16) + (19).to_bytes(4, "big")).digest(), 0)]
    while stack:
        state, height = stack.pop()
        n = children(state, height)
        nodes, leaves = nodes + 1, leaves + (n == 0)
        stack += [(hashlib.sha1(state + i.to_bytes(4, "big")).digest(), height + 1) for i in range(n)]
    return f"{nodes}/{leaves}"


def matmul_reference(n):
    """C0 + A B exactly (integer-valued inputs, as bench_fill_matrices makes them)."""
    cells = n * n
    a = [mix64(i) % 1000 for i in range(cells)]
    b = [mix64(cells + i) % 1000 for i in range(cells)]
    columns = [b[j::n] for j in range(n)]
    c = []
    for i in range(n):
        row = a[i * n:(i + 1) * n]
        c += [mix64(2 * cells + i * n + j) % 1000 + sum(map(int.__mul__, row, columns[j])) for j in range(n)]
    return fnv_doubles(float(v) for v in c)


def bfs_reference(side, shortcuts):
    """Vertices reached from vertex 0 and the sum of their levels, by a plain
    queue over the edge set bench_graph_build makes."""
    vertices = side * side
    adjacent = [[] for _ in range(vertices)]
    for v in range(vertices):
        r, c = divmod(v, side)
        adjacent[v] += [u for u, ok in ((v + 1, c + 1 < side), (v - 1, c > 0), (v + side, r + 1 < side),
                                        (v - side, r > 0)) if ok]
        for s in range(shortcuts):
            u = mix64((1 << 40) + v * shortcuts + s) % vertices
            adjacent[v].append(u)
            adjacent[u].append(v)
    level = [-1] * vertices
    level[0], queue = 0, [0]
    for v in queue:  # the list grows while it is read: a FIFO queue
        for u in adjacent[v]:
            if level[u] < 0:
                level[u] = level[v] + 1
                queue.append(u)
    return f"{len(queue)}/{sum(level[v] for v in queue)}"


def reference_checksum(workload, p):
    if workload == "fib":
        a, b = 0, 1
        for _ in range(p["n"]):
            a, b = b, a + b
        return str(a)
    if workload == "tree":
        count = (1 << p["depth"]) - 1
        return str(count * (count + 1) // 2)
    if workload == "parfor":
        n = p["n"]
        if p["op"] == "sort":
            return fnv_doubles(sorted((mix64(i) >> 11) * 2.0 ** -53 for i in range(n)))
        x = [float(mix64(i) % 1000) for i in range(n)]
        return f"{sum(x):.0f}" if p["op"] == "sum" else fnv_doubles(math.sqrt(v) * 3.0 for v in x)
    if workload == "uts":
        return uts_count(p["depth"])
    if workload == "msort":
        h = 0xCBF29CE484222325
        for key in sorted(mix64(i) for i in range(p["n"])):
            h = ((h ^ key) * 0x100000001B3) & MASK64
        return f"{h:016x}"
    if workload == "matmul":
        return matmul_reference(p["n"])
    if workload == "bfs":
        return bfs_reference(p["side"], p["shortcuts"])
    if workload in ("spawn", "spawn_inside", "storm"):
        return str(p["tasks"] * (p["tasks"] + 1) // 2)
    if workload == "idle":
        if p["phase"] == "after":
            return str(p.get("quiet_ms", 100))
        return str(int((p["ms"] * 1e-3) / (p.get("period_us", 1000) * 1e-6)))
    return str(p["calls"] if workload == "roundtrip" else p["samples"])


def log(message):
    print(message, file=sys.stderr, flush=True)


def first_line(command):
    try:
        out = subprocess.run(command, capture_output=True, text=True, timeout=30)
        lines = (out.stdout or out.stderr).strip().splitlines()
        return lines[0] if lines else ""
    except (OSError, subprocess.SubprocessError):
        return ""


def build_rayon(build_dir):
    """Builds the Rayon peer with cargo; returns (path or None, note)."""
    cargo = shutil.which("cargo")
    if cargo is None:
        return None, "cargo not found (apt-get install cargo librust-rayon-dev)"
    target = os.path.join(build_dir, "bench", "rayon-target")
    env = dict(os.environ, CARGO_TARGET_DIR=target)
    log("bench: building the Rayon peer (cargo build --release --offline)")
    out = subprocess.run([cargo, "build", "--release", "--offline"], cwd=os.path.join(HERE, "rayon"), env=env,
                         capture_output=True, text=True)
    if out.returncode != 0:
        return None, "cargo build failed: " + " ".join(out.stderr.strip().splitlines()[-3:])
    return os.path.join(target, "release", "rayon-peer-bench"), ""


def find_programs(build_dir, with_rayon, names=None):
    """{impl: path} for every program that exists (names: {impl: program in
    BUILD_DIR/bench}, by default the four of this driver), and notes on the missing."""
    names = names or {BLITZ: "blitz_bench", TBB: "tbb_bench", OMP: "omp_bench", SEQ: "seq_bench"}
    programs, notes = {}, {}
    for impl, name in names.items():
        path = os.path.join(build_dir, "bench", name)
        if os.access(path, os.X_OK):
            programs[impl] = path
        else:
            notes[impl] = f"{path} was not built (dependency missing?)"
    if with_rayon:
        path, note = build_rayon(build_dir)
        if path:
            programs[RAYON] = path
        else:
            notes[RAYON] = note
    return programs, notes


def invoke(program, workload, params, threads, timeout=900, cpus=None):
    """One run (on the CPUs in `cpus` only, if given); returns the parsed
    JSON line, or {"error": ...}."""
    command = [program, workload, f"threads={threads}"] + [f"{k}={v}" for k, v in params.items()]
    pin = (lambda: os.sched_setaffinity(0, cpus)) if cpus else None
    try:
        out = subprocess.run(command, capture_output=True, text=True, timeout=timeout, preexec_fn=pin)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout} s: {' '.join(command)}"}
    lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
    if out.returncode != 0 or not lines:
        return {"error": f"exit {out.returncode}: {out.stderr.strip()[-300:]} ({' '.join(command)})"}
    return json.loads(lines[-1])


def interleaved(impls, runs, run_one):
    """{impl: [run_one(impl), ...]}: `runs` rounds that each run every
    implementation once, the order rotated from round to round, so that a
    machine whose speed drifts favours none of them."""
    out = {impl: [] for impl in impls}
    for round_ in range(runs):
        shift = round_ % len(impls) if impls else 0
        for impl in impls[shift:] + impls[:shift]:
            out[impl].append(run_one(impl))
    return out


def fmt(value, digits=2):
    """A figure for a report's table; "-" for one not measured."""
    return "-" if value is None else f"{value:.{digits}f}"


def run_case(case, programs, runs):
    """Runs every available implementation `runs` times per thread count,
    interleaved; the sequential program runs with the first thread count."""
    results = {}
    for index, threads in enumerate(case.threads):
        impls = [i for i in IMPLS if i in programs and (i != SEQ or index == 0)]
        results[str(threads)] = interleaved(impls, runs, lambda impl: invoke(
            programs[impl], case.workload, case.params, 1 if impl == SEQ else threads))
    return results


def median(values):
    return statistics.median(values) if values else None


def median_ratio_interval(mine, theirs, level=0.95, resamples=4000):
    """A bootstrap interval of median(mine) / median(theirs): each side
    resampled with replacement, the central `level` of the ratios. Seeded,
    so a report computed again from the same runs says the same. None when
    a side has fewer than 3 runs."""
    if len(mine) < 3 or len(theirs) < 3:
        return None
    rng = random.Random(20261129)
    ratios = sorted(statistics.median(rng.choices(mine, k=len(mine)))
                    / statistics.median(rng.choices(theirs, k=len(theirs))) for _ in range(resamples))
    tail = (1 - level) / 2
    return ratios[int(tail * resamples)], ratios[min(resamples - 1, int((1 - tail) * resamples))]


def callgrind_instructions(command):
    """The instructions callgrind counts over the whole of `command` (every
    thread): repeatable where wall time on a shared VM is not."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "cg.out")
        subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"] + command,
                       capture_output=True, text=True, check=True)
        with open(out) as f:
            for line in f:
                if line.startswith("summary:") or line.startswith("totals:"):
                    return int(line.split()[1])
    raise RuntimeError("callgrind wrote no totals")


def quantile(values, q):
    """Nearest rank, as the harnesses compute it."""
    if not values:
        return None
    ordered = sorted(values)
    rank = min(max(int(q * len(ordered) + 0.999999), 1), len(ordered))
    return ordered[rank - 1]


def qualifies(case, threads, run):
    judged = case.workload in THROUGHPUT and threads <= 2
    return not (judged and run["cpu_per_wall"] < threads - CPU_SHORTFALL_ALLOWED)


def summarize_runs(case, threads, runs, expected):
    ok = [r for r in runs if "error" not in r]
    errors = [r["error"] for r in runs if "error" in r]
    wrong = [r["checksum"] for r in ok if expected is not None and r["checksum"] != expected]
    good = [r for r in ok if qualifies(case, threads, r)]
    # What is quoted (medians, CPU/wall, extras, counters) comes from the
    # runs that count; with none, CPU/wall still says what the runs got.
    counted = good or ok
    summary = {
        "runs": len(runs),
        "errors": errors,
        "wrong_checksums": wrong,
        "flagged": len(ok) - len(good),
        "metric_runs": [r["metric"] for r in ok],
        "cpu_per_wall_runs": [r["cpu_per_wall"] for r in ok],
        "unit": ok[0]["unit"] if ok else "",
        "median": median([r["metric"] for r in good]) if not wrong else None,
        "median_all_runs": median([r["metric"] for r in ok]),
        "cpu_per_wall": median([r["cpu_per_wall"] for r in counted]),
        "extra": {},
    }
    keys = sorted({k for r in good for k in r.get("extra", {})})
    summary["extra_sum"], summary["extra_max"] = {}, {}
    for k in keys:
        values = [r["extra"][k] for r in good if k in r.get("extra", {})]
        summary["extra"][k], summary["extra_sum"][k], summary["extra_max"][k] = median(values), sum(values), max(values)
    pools = [r["pool"] for r in good if "pool" in r]
    if pools:  # libblitz's counters: summed over the runs
        summary["pool_sum"] = {k: sum(p[k] for p in pools) for k in pools[0]}
        summary["pool_runs"] = len(pools)
    for key in ("samples_us", "floor_samples_us"):
        pooled = [v for r in good for v in r.get(key, [])]
        if pooled:
            summary[key.replace("samples_us", "pooled")] = {
                "samples": len(pooled), "p50_us": quantile(pooled, 0.5), "p99_us": quantile(pooled, 0.99)}
    return summary


def summarize_case(case, raw, reference=None):
    """Medians and ratios; checksums must equal `reference` if given, else
    the sequential program's (which must agree with itself)."""
    seq_runs = [r for t in raw.values() for r in t.get(SEQ, []) if "error" not in r]
    seq_checks = sorted({r["checksum"] for r in seq_runs})
    expected = reference or (seq_checks[0] if len(seq_checks) == 1 else None)
    by_threads = {}
    for threads, per_impl in raw.items():
        row = {impl: summarize_runs(case, 1 if impl == SEQ else int(threads), runs, expected)
               for impl, runs in per_impl.items() if runs}
        blitz = row.get(BLITZ, {}).get("median")
        row_ratios = {}
        for peer in PEERS + [SEQ]:
            other = row.get(peer, {}).get("median")
            if peer == SEQ and other is None and SEQ in by_threads.get(str(case.threads[0]), {}).get("impls", {}):
                other = by_threads[str(case.threads[0])]["impls"][SEQ]["median"]
            row_ratios[peer] = blitz / other if blitz and other else None
        by_threads[threads] = {"impls": row, "ratio_blitz_over": row_ratios}
    return {
        "workload": case.workload, "params": case.params, "title": case.title, "threads": case.threads,
        "expected_checksum": expected,
        "checksum_problem": None if expected else f"sequential checksums disagree or missing: {seq_checks}",
        "by_threads": by_threads, "raw": raw,
    }


def loadavg():
    try:
        with open("/proc/loadavg") as f:
            return f.read().split()[0]
    except OSError:
        return "?"


def machine(build_dir):
    model, flags = "unknown", ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name") and model == "unknown":
                    model = line.split(":", 1)[1].strip()
                if line.startswith("flags") and not flags:
                    flags = line
    except OSError:
        pass
    rayon_dirs = sorted(d for d in os.listdir("/usr/share/cargo/registry")
                        if d.startswith("rayon")) if os.path.isdir("/usr/share/cargo/registry") else []
    mem = ""
    try:
        with open("/proc/meminfo") as f:
            mem = f.readline().split(":", 1)[1].strip()
    except OSError:
        pass
    return {
        "cpu": model,
        "hypervisor": "hypervisor" in flags.split(),
        "cpus_online": os.cpu_count(),
        "cpus_available": len(os.sched_getaffinity(0)),
        "memory": mem,
        "kernel": platform.system() + " " + platform.release() + " " + platform.version(),
        "os": first_line(["sh", "-c", ". /etc/os-release && echo $PRETTY_NAME"]),
        "cc": first_line([os.environ.get("CC", "cc"), "--version"]),
        "cxx": first_line([os.environ.get("CXX", "c++"), "--version"]),
        "rustc": first_line(["rustc", "--version"]),
        "cargo": first_line(["cargo", "--version"]),
        "tbb": first_line(["pkg-config", "--modversion", "tbb"]),
        "rayon_sources": ", ".join(rayon_dirs),
        "python": platform.python_version(),
        "build_dir": os.path.relpath(build_dir, ROOT),
        "buildtype": "release (meson default of the project: -O3)",
    }


def run_extra(name, build_dir):
    """The sections other helpers' programs provide: parsed JSON or a note."""
    if name == "rustjoin":
        script = os.path.join(HERE, "rust-join", "run.sh")
        command = [script, "--json"]
        env = dict(os.environ, BLITZ_LIB_DIR=build_dir)
    else:
        command = [os.path.join(build_dir, "bench", "sort", "sort_bench"), "--json", str(10**7), "5", "1", "2"]
        env = dict(os.environ)
    if not os.access(command[0], os.X_OK):
        return {"skipped": f"{os.path.relpath(command[0], ROOT)} is missing"}
    shown = " ".join([os.path.relpath(command[0], ROOT)] + command[1:])
    log(f"bench: {name}: {shown}")
    try:
        out = subprocess.run(command, capture_output=True, text=True, timeout=1800, env=env)
    except subprocess.TimeoutExpired:
        return {"skipped": f"{command[0]} timed out"}
    text = out.stdout.strip()
    start = text.find("{")
    if out.returncode != 0 or start < 0:
        return {"skipped": f"{os.path.relpath(command[0], ROOT)} failed (exit {out.returncode}): "
                           + " ".join(out.stderr.strip().splitlines()[-2:])}
    try:
        return {"data": json.loads(text[start:]), "command": shown}
    except json.JSONDecodeError as e:
        return {"skipped": f"{command[0]} printed no valid JSON ({e})"}


def smoke(build_dir):
    programs, notes = find_programs(build_dir, with_rayon=False)
    passed = failed = 0
    for impl, note in notes.items():
        print(f"  skipped {impl}: {note}")
    for cases in smoke_plan().values():
        for case in cases:
            reference = reference_checksum(case.workload, case.params)
            summary = summarize_case(case, run_case(case, programs, runs=1), reference)
            for threads, row in summary["by_threads"].items():
                for impl, s in row["impls"].items():
                    bad = s["errors"] or s["wrong_checksums"]
                    status = "FAIL" if bad else "ok"
                    passed, failed = passed + (not bad), failed + bool(bad)
                    print(f"  {status:4} {impl:10} {case.key()} threads={threads}"
                          + (f": {bad}" if bad else ""))
    print(f"bench_smoke: {passed} passed, {failed} failed")
    return 1 if failed else 0


def load_previous():
    try:
        with open(LATEST) as f:
            return json.load(f)
    except (OSError, json.JSONDecodeError):
        return {}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("build_dir")
    parser.add_argument("names", nargs="*",
                        help="workloads: " + " ".join(list(full_plan()) + list(ALIASES) + EXTRAS))
    parser.add_argument("--runs", type=int, default=5, help="interleaved runs per runtime (at least 5)")
    parser.add_argument("--note", default="", help="a line for the report about the conditions of the run")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, checksums only")
    parser.add_argument("--report-only", action="store_true",
                        help="run nothing: render docs/benchmarks.md again from latest.json")
    args = parser.parse_args()
    build_dir = os.path.abspath(args.build_dir)
    if args.smoke:
        return smoke(build_dir)
    if args.report_only:
        return write_outputs(resummarize(load_previous()))
    plan = full_plan()
    names = [n for name in args.names or list(plan) + EXTRAS for n in ALIASES.get(name, [name])]
    unknown = [n for n in names if n not in plan and n not in EXTRAS]
    if unknown or args.runs < 5:
        parser.error(f"unknown workload {unknown}" if unknown else "--runs must be at least 5")

    data = load_previous()
    data.setdefault("workloads", {})
    data.setdefault("extras", {})
    now = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
    # Each section keeps the machine it ran on (runs before this field
    # existed ran on the machine the previous report names).
    for entry in data["workloads"].values():
        entry.setdefault("machine", data.get("machine"))
    data["machine"] = machine(build_dir)
    data["generated"] = now
    data.pop("note", None)  # notes belong to the sections they describe
    programs, notes = find_programs(build_dir, with_rayon=any(n in plan for n in names))
    data["missing_programs"] = notes
    for impl, note in notes.items():
        log(f"bench: no {impl}: {note}")
    for name in names:
        if name in EXTRAS:
            data["extras"][name] = dict(run_extra(name, build_dir), generated=now, note=args.note)
            continue
        started, load_before = datetime.datetime.now(), loadavg()
        cases = []
        for case in plan[name]:
            log(f"bench: {case.key()} threads {case.threads}, {args.runs} interleaved runs each")
            summary = summarize_case(case, run_case(case, programs, args.runs))
            cases.append(summary)
            log_summary(summary)
        data["workloads"][name] = {
            "generated": now, "note": args.note, "runs": args.runs,
            "seconds": (datetime.datetime.now() - started).total_seconds(),
            "loadavg_before": load_before, "loadavg_after": loadavg(), "machine": data["machine"], "cases": cases}

    return write_outputs(data)


def resummarize(data):
    """Medians and flags again from the stored raw runs, by today's rules."""
    for entry in data.get("workloads", {}).values():
        entry["cases"] = [summarize_case(Case(c["workload"], c["params"], c["threads"], c["title"]), c["raw"])
                          for c in entry["cases"]]
    return data


def write_outputs(data):
    """latest.json, docs/benchmarks.md and the charts; 1 if a checksum was wrong."""
    if not data.get("workloads") and not data.get("extras"):
        log(f"bench: nothing to report: {os.path.relpath(LATEST, ROOT)} is missing or empty")
        return 1
    import report  # bench/report.py, next to this file
    os.makedirs(RESULTS, exist_ok=True)
    data["goals"] = report.write(data, RESULTS, os.path.join(ROOT, "docs", "benchmarks.md"))
    with open(LATEST, "w") as f:
        json.dump(data, f, indent=1)
        f.write("\n")
    log(f"bench: wrote {os.path.relpath(LATEST, ROOT)} and docs/benchmarks.md")
    problems = [c["checksum_problem"] for w in data["workloads"].values() for c in w["cases"]
                if c["checksum_problem"]]
    problems += [s["wrong_checksums"] for w in data["workloads"].values() for c in w["cases"]
                 for row in c["by_threads"].values() for s in row["impls"].values() if s["wrong_checksums"]]
    for p in problems:
        log(f"bench: CHECKSUM PROBLEM: {p}")
    return 1 if problems else 0


def log_summary(summary):
    for threads, row in summary["by_threads"].items():
        cells = []
        for impl, s in row["impls"].items():
            value = "n/a" if s["median"] is None else f"{s['median']:.4g}"
            cells.append(f"{impl} {value} (CPU/wall {s['cpu_per_wall'] or 0:.2f})")
        unit = next((s["unit"] for s in row["impls"].values() if s["unit"]), "")
        log(f"  threads={threads} [{unit}]: " + "; ".join(cells))


if __name__ == "__main__":
    sys.path.insert(0, HERE)
    sys.exit(main())
