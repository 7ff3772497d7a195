"""Issue 18 in Python: Pool(cpu_list=...) and Executor(cpu_list=...) pin the
workers (read back with os.sched_getaffinity inside the jobs), the cap of
set_max_active, per-worker statistics that sum to the pool's, and a trace
taken from Python (checked by tools/blitz-trace --check)."""
import json
import os
import subprocess
import sys
import tempfile
import threading
import unittest

import support  # noqa: F401 (finds the library)
import blitz

COUNTERS = ("jobs_executed", "steals", "sleeps", "wakeups", "spurious_wakeups", "sleep_aborts",
            "run_ns", "search_ns", "sleep_ns")


def affinity_on_each_worker(pool):
    """Each worker's mask, read by a task that holds every worker at once."""
    n = pool.num_threads
    barrier = threading.Barrier(n)

    def read():
        mask = os.sched_getaffinity(0)
        barrier.wait()  # n tasks at once: one on each worker
        return mask
    return [task.result() for task in [pool.spawn(read) for _ in range(n)]]


class PlacementTest(unittest.TestCase):
    def test_pool_pins_each_worker_to_one_cpu(self):
        mine = sorted(os.sched_getaffinity(0))
        with blitz.Pool(cpu_list=",".join(map(str, mine))) as pool:
            self.assertEqual(pool.num_threads, len(mine))  # one worker per entry
            masks = affinity_on_each_worker(pool)
            self.assertEqual(sorted(masks, key=min), [{cpu} for cpu in mine])

    def test_executor_takes_a_cpu_list(self):
        first = min(os.sched_getaffinity(0))
        with blitz.Executor(cpu_list=str(first)) as executor:
            self.assertEqual(executor.submit(os.sched_getaffinity, 0).result(), {first})

    def test_bad_lists_are_refused(self):
        for bad in ("", "a", "3-1", "0-", "4096"):
            with self.subTest(cpu_list=bad):
                with self.assertRaises(blitz.BlitzError):
                    blitz.Pool(cpu_list=bad)
        with self.assertRaises(TypeError):
            blitz.Pool(cpu_list=0)


class CapAndStatsTest(unittest.TestCase):
    def test_cap_and_worker_stats(self):
        with blitz.Pool(2) as pool:
            pool.set_max_active(1)
            self.assertEqual(sum(pool.map(lambda x: x, range(100))), 4950)
            pool.set_max_active(None)
            before = pool.stats()
            each = [pool.worker_stats(i) for i in range(pool.num_threads)]
            after = pool.stats()
            for name in COUNTERS:
                with self.subTest(counter=name):
                    total = sum(w[name] for w in each)
                    self.assertLessEqual(before[name], total)
                    self.assertLessEqual(total, after[name])
            self.assertEqual([w["num_threads"] for w in each], [1, 1])
            with self.assertRaises(blitz.BlitzError):
                pool.worker_stats(2)


class TraceTest(unittest.TestCase):
    def test_trace_start_and_stop(self):
        with tempfile.TemporaryDirectory() as tmp, blitz.Pool(2) as pool:
            path = os.path.join(tmp, "py.json")
            pool.trace_start(path)
            with self.assertRaises(blitz.BlitzError):   # one trace at a time
                pool.trace_start(path)
            tasks = 100
            self.assertEqual(sum(pool.map(lambda x: x, range(tasks))), 4950)
            pool.trace_stop()
            with self.assertRaises(blitz.BlitzError):   # none running
                pool.trace_stop()
            for bad in ("", os.path.join(tmp, "missing", "x.json")):
                with self.subTest(path=bad), self.assertRaises(blitz.BlitzError):
                    pool.trace_start(bad)
            with self.assertRaises(ValueError):
                pool.trace_start("a\0b")

            with open(path) as f:
                events = json.load(f)["traceEvents"]
            # A span is written when its job ends, possibly after the task's
            # result was taken; a worker that ran two tasks wrote the first.
            injected = [e for e in events if e.get("ph") == "X" and e.get("args", {}).get("source") == "injected"]
            self.assertTrue(1 <= len(injected) <= tasks, len(injected))
            tool = os.path.join(support.REPO, "tools", "blitz-trace")
            checked = subprocess.run([sys.executable, tool, path, "--check", "--workers", "2"],
                                     capture_output=True, text=True)
            self.assertEqual(checked.returncode, 0, checked.stdout + checked.stderr)

    def test_executor_traces_too(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "executor.json")
            with blitz.Executor(max_workers=2) as executor:
                executor.trace_start(path)
                self.assertEqual(list(executor.map(abs, [-1, -2])), [1, 2])
            # Closing the executor with the trace running wrote the file.
            with open(path) as f:
                self.assertIn("traceEvents", json.load(f))


if __name__ == "__main__":
    unittest.main()
