"""blitz.blocking() (0.3, blz_block_begin/blz_block_end): tasks that wait
outside the pool inside the block no longer hold the pool's workers; other
tasks run beside them on spare threads, which the statistics count. No
assertion depends on timing: the blockers wait on an Event the test sets
only after the other work finished."""
import concurrent.futures
import threading
import unittest

import blitz

GUARD = 60


class BlockingTest(unittest.TestCase):
    def run_beside_blockers(self, in_block):
        with blitz.Executor(max_workers=2) as executor:
            release = threading.Event()
            entered = threading.Semaphore(0)

            def blocker():
                entered.release()
                if in_block:
                    with blitz.blocking():
                        release.wait(GUARD)
                else:
                    release.wait(GUARD)
                return release.is_set()

            blockers = [executor.submit(blocker) for _ in range(2)]
            for _ in blockers:
                self.assertTrue(entered.acquire(timeout=GUARD))
            other = executor.submit(sum, range(10))
            try:
                if in_block:
                    self.assertEqual(other.result(timeout=GUARD), 45)
                    self.assertFalse(release.is_set())   # both blockers were still blocked
                else:
                    # Both workers wait: the other task cannot start (the
                    # short wait only gives a defect the chance to show).
                    with self.assertRaises(concurrent.futures.TimeoutError):
                        other.result(timeout=0.2)
            finally:
                release.set()
            self.assertEqual(other.result(timeout=GUARD), 45)
            self.assertTrue(all(b.result(timeout=GUARD) for b in blockers))

    def test_blocked_tasks_starve_the_pool_without_the_block(self):
        self.run_beside_blockers(in_block=False)

    def test_blocked_tasks_leave_the_pool_running_with_the_block(self):
        self.run_beside_blockers(in_block=True)

    def test_outside_a_pool_the_block_changes_nothing_and_nests(self):
        with blitz.blocking():
            with blitz.blocking():
                pass
        with self.assertRaises(ZeroDivisionError):
            with blitz.blocking():
                1 / 0
        # every section was closed, also the one left by the exception
        self.assertEqual(blitz._capi.held.blz_block_end(), blitz.BLZ_EINVAL)


if __name__ == "__main__":
    unittest.main()
