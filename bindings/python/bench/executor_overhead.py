#!/usr/bin/env python3
"""Per-task cost of blitz.Executor against concurrent.futures.ThreadPoolExecutor.

    python3 bindings/python/bench/executor_overhead.py [--workers N] [--runs N] [--quick]

Two measures, each in interleaved runs (blitz then the standard executor,
alternating which goes first), reported as medians in microseconds per
task with the ratio blitz/standard (the goal is at most 0.5):
  round trip   submit(f).result() one after the other (2,000 tasks)
  map          list(executor.map(f, range(100,000))) with chunksize 1
f is a trivial Python callable (it returns its argument). CPU/wall is the
process's CPU time over the wall time of the runs. The hand-off floor is
the round trip of the least any executor whose calls run on another
thread does (two lock hand-offs, no queue, no Future), measured in the
same runs: a round-trip goal below it cannot be met by running the call
on a worker.
"""
import argparse
import concurrent.futures as cf
import os
import statistics
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import blitz  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..",
                                "examples", "python"))
from numpy_kernel import cpu_model  # noqa: E402


def identity(x):
    return x


def round_trip(executor, n):
    for i in range(n):
        executor.submit(identity, i).result()


def mapped(executor, n):
    for _ in executor.map(identity, range(n)):
        pass


def handoff_floor(n):
    """The round trip of the least any executor does: hand one call to
    another thread and wait for its result, through two bare locks (the
    primitive under threading.Event and the standard executor's queue).
    Returns microseconds per call."""
    request, reply = threading.Lock(), threading.Lock()
    request.acquire()
    reply.acquire()
    slot = []

    def server():
        for _ in range(n):
            request.acquire()
            slot.append(identity(slot.pop()))
            reply.release()
    thread = threading.Thread(target=server)
    thread.start()
    started = time.perf_counter()
    for i in range(n):
        slot.append(i)
        request.release()
        reply.acquire()
        slot.pop()
    elapsed = time.perf_counter() - started
    thread.join()
    return elapsed / n * 1e6


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    sizes = {"round trip": 2_000, "map": 100_000}
    if args.quick:
        sizes, args.runs = {"round trip": 200, "map": 2_000}, 1
    makers = {"blitz.Executor": lambda: blitz.Executor(args.workers),
              "ThreadPoolExecutor": lambda: cf.ThreadPoolExecutor(args.workers)}
    measures = {"round trip": round_trip, "map": mapped}
    samples = {(m, e): [] for m in measures for e in makers}
    floors = []
    for run in range(args.runs):
        order = list(makers) if run % 2 == 0 else list(reversed(makers))
        for name in order:
            with makers[name]() as executor:
                mapped(executor, 1000)   # warm up: every worker has started
                for measure, fn in measures.items():
                    cpu, wall = time.process_time(), time.perf_counter()
                    fn(executor, sizes[measure])
                    wall = time.perf_counter() - wall
                    cpu = time.process_time() - cpu
                    samples[measure, name].append((wall / sizes[measure] * 1e6, cpu / wall))
        floors.append(handoff_floor(sizes["round trip"]))
    print(f"per-task cost, {args.workers} workers, median of {args.runs} interleaved runs, "
          f"{cpu_model()}, Python {sys.version.split()[0]}")
    print(f"  {'measure':<12}{'executor':<22}{'us/task':>9}{'CPU/wall':>10}")
    for measure in measures:
        medians = {}
        for name in makers:
            runs = samples[measure, name]
            medians[name] = statistics.median(us for us, _ in runs)
            print(f"  {measure:<12}{name:<22}{medians[name]:9.2f}"
                  f"{statistics.median(r for _, r in runs):10.2f}")
        ratio = medians["blitz.Executor"] / medians["ThreadPoolExecutor"]
        print(f"  {measure:<12}{'blitz / standard':<22}{ratio:9.2f}   "
              f"{'meets' if ratio <= 0.5 else 'misses'} the goal (<= 0.5)")
        if measure == "round trip":
            floor = statistics.median(floors)
            goal = 0.5 * medians["ThreadPoolExecutor"]
            print(f"  {measure:<12}{'hand-off floor':<22}{floor:9.2f}   one call to another thread and back "
                  f"through two locks; the goal ({goal:.2f} us) is "
                  f"{'below' if goal < floor else 'above'} it")


if __name__ == "__main__":
    main()
