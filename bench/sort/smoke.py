#!/usr/bin/env python3
"""sort_bench_smoke: runs `sort_bench --json` at a tiny size and checks the
JSON object the benchmark report reads (bench/run.py, bench/report.py):
its fields, one row per sort and worker count, at least 5 runs per row,
medians that are the medians of the runs. sort_bench itself fails when a
sort's result differs from std::sort's. No time is judged.

    smoke.py <path/to/sort_bench>
"""
import json
import statistics
import subprocess
import sys

N, RUNS, WORKERS = 30000, 5, (1, 2)


def problems(data, expected_runtimes):
    if data.get("name") != "sort" or data.get("unit") != "ms" or data.get("n") != N:
        yield f"header fields: {dict((k, data.get(k)) for k in ('name', 'unit', 'n'))}"
    rows = data.get("rows", [])
    keys = sorted((r.get("runtime"), r.get("threads")) for r in rows)
    if keys != sorted(expected_runtimes):
        yield f"rows {keys}, expected {sorted(expected_runtimes)}"
    for r in rows:
        runs, ratios = r.get("runs", []), r.get("cpu_per_wall_runs", [])
        label = f"{r.get('runtime')} on {r.get('threads')}"
        if len(runs) != RUNS or len(ratios) != RUNS:
            yield f"{label}: {len(runs)} runs and {len(ratios)} CPU/wall values, expected {RUNS}"
        elif abs(r.get("median_ms", -1) - statistics.median(runs)) > 1e-3:
            yield f"{label}: median_ms {r.get('median_ms')} is not the median of {runs}"
        elif abs(r.get("cpu_per_wall", -1) - statistics.median(ratios)) > 1e-3:
            yield f"{label}: cpu_per_wall {r.get('cpu_per_wall')} is not the median of {ratios}"
        elif min(runs) <= 0:
            yield f"{label}: a run of {min(runs)} ms"


def main(binary):
    command = [binary, "--json", str(N), str(RUNS)] + [str(w) for w in WORKERS]
    out = subprocess.run(command, capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        print(f"{' '.join(command)} failed (exit {out.returncode}): {out.stderr.strip()}")
        return 1
    data = json.loads(out.stdout)
    parallel = ["blz::parallel_sort"] + (["tbb::parallel_sort"] if "tbb::parallel_sort" in out.stdout else [])
    expected = [("std::sort", 1)] + [(p, w) for w in WORKERS for p in parallel]
    found = list(problems(data, expected))
    for p in found:
        print("FAIL: " + p)
    print(f"sort_bench_smoke: {len(data.get('rows', []))} rows, {'ok' if not found else 'FAIL'}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
