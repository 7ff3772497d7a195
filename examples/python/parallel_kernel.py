#!/usr/bin/env python3
"""A C kernel through Executor.parallel_for: the speedup over a sequential loop.

The kernel (kernel.c, built into <build>/examples/python/blitz_example_kernel.so)
is passed as a blitz.RANGE_FN pointer with its data as the argument (a
ctypes Structure), so the workers call it directly, without the GIL. For contrast the same loop with a Python body, which holds
the GIL and so runs one piece at a time.

    python3 examples/python/parallel_kernel.py [--threads N] [--size N]
        [--iterations N] [--runs N] [--quick]

CPU/wall is the process's CPU time over the wall time of the parallel run:
the speedup measures the library only when the machine delivered the
workers' CPUs (CPU/wall at least 0.95 x workers, 1.9 for two).
"""
import argparse
import ctypes
import os
import time

import _locate
import blitz


def best_of(runs, fn):
    """(wall, cpu) of the fastest of `runs` calls of fn."""
    best = None
    for _ in range(runs):
        cpu0, wall0 = time.process_time(), time.perf_counter()
        fn()
        wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
        if best is None or wall < best[0]:
            best = (wall, cpu)
    return best


class Job(ctypes.Structure):
    """struct blitz_example_job of kernel.c."""
    _fields_ = [("out", ctypes.POINTER(ctypes.c_double)), ("size", ctypes.c_size_t),
                ("iterations", ctypes.c_uint32)]


def python_logistic(out, lo, hi, iterations):
    for i in range(lo, hi):
        x = 0.1 + 0.8 * (i % 1000) / 1000.0
        for _ in range(iterations):
            x = 3.7 * x * (1.0 - x)
        out[i] = x


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=None, help="workers (default: the library's)")
    parser.add_argument("--size", type=int, default=200_000, help="indices")
    parser.add_argument("--iterations", type=int, default=1000, help="work per index")
    parser.add_argument("--runs", type=int, default=5, help="best of this many runs")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, one run (a smoke test)")
    args = parser.parse_args()
    if args.quick:
        args.size, args.iterations, args.runs = 20_000, 100, 1

    lib = ctypes.CDLL(_locate.kernel_path())
    kernel = blitz.RANGE_FN(("blitz_example_kernel", lib))
    n, iterations = args.size, args.iterations
    sequential_out = (ctypes.c_double * n)()
    parallel_out = (ctypes.c_double * n)()
    sequential_job = Job(ctypes.cast(sequential_out, ctypes.POINTER(ctypes.c_double)), n, iterations)
    parallel_job = Job(ctypes.cast(parallel_out, ctypes.POINTER(ctypes.c_double)), n, iterations)

    with blitz.Executor(args.threads) as executor:
        workers = executor._max_workers
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
        print(f"libblitz {blitz.library_version()} ({blitz.library_path})")
        print(f"{workers} workers, {cpus} CPUs available to this process")

        def sequential():
            kernel(ctypes.addressof(sequential_job), 0, n)    # one call, on this thread

        def parallel():
            executor.parallel_for(0, n, kernel, parallel_job)    # pieces on every worker, no GIL

        sequential()
        parallel()                                  # warm up: wake the workers
        before = executor.stats()
        seq_wall, seq_cpu = best_of(args.runs, sequential)
        par_wall, par_cpu = best_of(args.runs, parallel)
        after = executor.stats()
        if bytes(sequential_out) != bytes(parallel_out):
            raise SystemExit("FAILED: the parallel result differs from the sequential one")

        print(f"\nC kernel, {n} indices x {iterations} iterations, best of {args.runs} runs:")
        print(f"  {'sequential loop (this thread)':<34}{seq_wall:8.4f} s   CPU/wall {seq_cpu / seq_wall:4.2f}")
        print(f"  {f'parallel_for ({workers} workers)':<34}{par_wall:8.4f} s   CPU/wall {par_cpu / par_wall:4.2f}")
        print(f"  speedup {seq_wall / par_wall:.2f}x over the sequential loop "
              f"({(after['steals'] - before['steals'])} steals, results identical)")
        needed = 0.95 * workers
        ratio = par_cpu / par_wall
        if workers == 1:
            print("  one worker: no speedup to expect")
        elif ratio >= needed:
            print(f"  CPU/wall {ratio:.2f} >= {needed:.2f}: the machine delivered {workers} CPUs, "
                  "the speedup counts")
        else:
            print(f"  CPU/wall {ratio:.2f} < {needed:.2f}: the machine did not deliver {workers} CPUs "
                  "during the run, so the speedup does not measure the library")

        # The same loop with a Python body: it holds the GIL, pieces run one at a time.
        py_n = max(1, n // 100)
        py_seq = [0.0] * py_n
        py_par = [0.0] * py_n
        python_logistic(py_seq, 0, py_n, iterations)   # warm up the interpreter's specializations
        py_runs = min(args.runs, 3)
        py_seq_wall, _ = best_of(py_runs, lambda: python_logistic(py_seq, 0, py_n, iterations))
        py_par_wall, py_par_cpu = best_of(
            py_runs, lambda: executor.parallel_for(0, py_n, lambda lo, hi: python_logistic(py_par, lo, hi, iterations)))
        if py_seq != py_par:
            raise SystemExit("FAILED: the Python parallel result differs from the sequential one")
        print(f"\nPython body, {py_n} indices x {iterations} iterations (holds the GIL), best of {py_runs}:")
        print(f"  {'sequential loop':<34}{py_seq_wall:8.4f} s")
        print(f"  {f'parallel_for ({workers} workers)':<34}{py_par_wall:8.4f} s   "
              f"CPU/wall {py_par_cpu / py_par_wall:4.2f}")
        print(f"  speedup {py_seq_wall / py_par_wall:.2f}x: Python callables run one at a time; "
              "use C function pointers for parallel speed")


if __name__ == "__main__":
    main()
