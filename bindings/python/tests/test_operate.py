"""Issue 18 in Python: Pool(cpu_list=...) and Executor(cpu_list=...) pin the
workers (read back with os.sched_getaffinity inside the jobs), the cap of
set_max_active, and per-worker statistics that sum to the pool's."""
import os
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


if __name__ == "__main__":
    unittest.main()
