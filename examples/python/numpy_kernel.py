#!/usr/bin/env python3
"""numpy + a cffi-compiled C kernel on blitz.Executor: y = 3 * sqrt(x).

    python3 examples/python/numpy_kernel.py [--size N] [--runs N] [--quick]

Runs the kernel (cffi_kernel.py) over N doubles, interleaved run by run:
one call on this thread; Executor.parallel_for with 1 and with 2 workers;
and ThreadPoolExecutor(2) running the same kernel in 16 chunks (the way a
Python user would parallelise it without blitz; the kernel releases the
GIL there too). Prints the median wall time, CPU/wall and the ratio to the
single-threaded call. A 2-worker figure counts only when CPU/wall reached
1.9: on a shared machine that delivered less, it says so. Needs Debian's
python3-numpy, python3-cffi and python3-dev.
"""
import argparse
import concurrent.futures as cf
import os
import platform
import statistics
import tempfile
import time

import _locate  # noqa: F401  (this checkout's blitz)
import blitz
import cffi_kernel
import numpy


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def timed(fn):
    cpu, wall = time.process_time(), time.perf_counter()
    fn()
    wall = time.perf_counter() - wall
    return wall, (time.process_time() - cpu) / wall


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=10_000_000)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--quick", action="store_true", help="a small run that checks the results")
    args = parser.parse_args()
    if args.quick:
        args.size, args.runs = 200_000, 1
    with tempfile.TemporaryDirectory(prefix="blitz-cffi-") as tmp:
        _, kernel, Args = cffi_kernel.build(tmp)
        x = numpy.random.default_rng(1).random(args.size) * 100.0
        expected = 3.0 * numpy.sqrt(x)
        outputs = {}

        def case(name, run):
            y = numpy.zeros_like(x)
            outputs[name] = y
            kernel_args = Args(x, y)
            return name, lambda: run(kernel_args.pointer)

        one, two = blitz.Executor(1), blitz.Executor(2)
        tpe = cf.ThreadPoolExecutor(2)
        chunk = -(-args.size // 16)

        def tpe_chunks(pointer):
            futures = [tpe.submit(kernel, pointer, lo, min(lo + chunk, args.size))
                       for lo in range(0, args.size, chunk)]
            for future in futures:
                future.result()
        cases = dict([
            case("one call on this thread", lambda p: kernel(p, 0, args.size)),
            case("blitz.Executor(1).parallel_for", lambda p: one.parallel_for(0, args.size, kernel, p)),
            case("blitz.Executor(2).parallel_for", lambda p: two.parallel_for(0, args.size, kernel, p)),
            case("ThreadPoolExecutor(2), 16 chunks", tpe_chunks),
        ])
        samples = {name: [] for name in cases}
        for _ in range(args.runs):
            for name, run in cases.items():
                samples[name].append(timed(run))
        for executor in (one, two, tpe):
            executor.shutdown()
        for name, y in outputs.items():
            if not numpy.array_equal(y, expected):
                raise SystemExit(f"FAILED: {name} computed a different result")

    base = statistics.median(w for w, _ in samples["one call on this thread"])
    print(f"y = 3*sqrt(x) over {args.size} doubles, median of {args.runs} interleaved runs, "
          f"{cpu_model()}, {len(os.sched_getaffinity(0))} CPUs for this process")
    print(f"  {'case':<36}{'wall ms':>9}{'CPU/wall':>10}{'vs one call':>13}")
    for name, runs in samples.items():
        wall = statistics.median(w for w, _ in runs)
        ratio = statistics.median(c for _, c in runs)
        note = ""
        if "(2)" in name and ratio < 1.9:
            note = "  (CPU/wall < 1.9: not a 2-worker figure)"
        print(f"  {name:<36}{wall * 1e3:9.2f}{ratio:10.2f}{base / wall:12.2f}x{note}")
    print("results identical to numpy's 3*sqrt(x) in every case")


if __name__ == "__main__":
    main()
