// fork() while the pool is busy: two threads run fork-join trees through
// blz_call and a third spawns detached and group tasks, without pause,
// while the main thread forks again and again. At the moment of each fork
// workers are stealing, sleeping, waking and holding the pool's locks. In
// every child (which has only the forking thread) each call on the old pool
// and its group returns BLZ_EFORK without touching those locks, and a new
// pool works; in the parent the pool is unaffected: every result is right
// and destroy returns BLZ_OK. tests/api_lifecycle.cpp forks an idle pool
// and one blocked in a long task; this is the busy case.
#include <blitz.h>

#include <catch2/catch.hpp>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include "support.hpp"

namespace {

constexpr int kForks = 40;

// This test's children are forked while parent threads allocate all the
// time, so under AddressSanitizer they stay off the heap (no destroy, no
// new pool), and under g++'s ThreadSanitizer they start no thread
// (tests/support.hpp says why for both).
constexpr bool kChildMayUseHeap = blz_test::kAllocatorForkSafe;
constexpr bool kChildMayStartThreads = blz_test::kForkChildMayStartThreads && kChildMayUseHeap;
using blz_test::fib;

void count(void *counter) { static_cast<std::atomic<uint64_t> *>(counter)->fetch_add(1); }
void count_range(void *counter, size_t lo, size_t hi) {
    static_cast<std::atomic<uint64_t> *>(counter)->fetch_add(hi - lo);
}

// In the child: the number of failed checks (0: all passed), printed to stderr.
int child_checks(blz_pool *old_pool, blz_group *old_group) {
    int failures = 0;
    auto check = [&](bool ok, const char *what) {
        if (!ok) {
            std::fprintf(stderr, "  child check failed: %s\n", what);
            ++failures;
        }
    };
    std::atomic<uint64_t> ran{0};
    check(blz_spawn(old_pool, count, &ran, nullptr) == BLZ_EFORK, "spawn on the old pool");
    check(blz_call(old_pool, count, &ran) == BLZ_EFORK, "call on the old pool");
    check(blz_fork_join(old_pool, count, &ran, count, &ran) == BLZ_EFORK, "fork_join on the old pool");
    check(blz_parallel_for(old_pool, 0, 100, 1, count_range, &ran) == BLZ_EFORK, "parallel_for on the old pool");
    check(blz_group_spawn(old_group, count, &ran) == BLZ_EFORK, "group spawn on the old group");
    blz_stats stats;
    stats.struct_size = sizeof(stats);
    check(blz_pool_stats(old_pool, &stats) == BLZ_EFORK, "stats of the old pool");
    check(ran.load() == 0, "nothing ran on the old pool");
    if (!kChildMayUseHeap) return failures;
    check(blz_pool_destroy(old_pool) == BLZ_EFORK, "destroy of the old pool");
    check(blz_group_destroy(old_group) == BLZ_EFORK, "destroy of the old group");
    if (!kChildMayStartThreads) return failures;

    blz_pool_config config;
    blz_pool_config_init(&config);
    config.num_threads = 2;
    blz_pool *fresh = nullptr;
    check(blz_pool_create(&config, &fresh) == BLZ_OK, "a new pool in the child");
    if (fresh != nullptr) {
        check(fib(fresh, 20) == 6765, "fib(20) on the new pool");
        check(blz_parallel_for(fresh, 0, 10000, 1, count_range, &ran) == BLZ_OK, "parallel_for on the new pool");
        check(ran.load() == 10000, "parallel_for covered the range");
        check(blz_pool_destroy(fresh) == BLZ_OK, "destroy of the new pool");
    }
    return failures;
}

// Forks; the child runs the checks under a 30 s alarm (a hang kills it).
// Returns the child's wait status.
int fork_and_check(blz_pool *pool, blz_group *group) {
    std::fflush(nullptr);
    pid_t pid = fork();
    if (pid == 0) {
        std::signal(SIGALRM, SIG_DFL);
        alarm(30);
        int failures = child_checks(pool, group);
        std::fflush(stderr);
        _exit(failures > 100 ? 100 : failures);
    }
    if (pid < 0) return -1;
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return status;
}

}  // namespace

TEST_CASE("fault: fork() while the pool is busy: EFORK in the child, the parent's pool unaffected", "[fault][fork]") {
    blz_test::Watchdog dog("fork while busy", std::chrono::seconds(600));
    blz_test::Pool pool(2);
    blz_group *group = nullptr;
    REQUIRE(blz_group_create(pool, &group) == BLZ_OK);

    std::atomic<bool> stop{false};
    std::atomic<int> wrong_fibs{0};
    std::atomic<uint64_t> fibs{0};
    std::atomic<uint64_t> spawned{0}, ran{0};
    std::atomic<int> failed_submits{0};
    std::vector<std::thread> busy;
    for (int i = 0; i < 2; ++i) {
        busy.emplace_back([&] {
            while (!stop.load()) {
                wrong_fibs.fetch_add(fib(pool, 16) != 987);
                fibs.fetch_add(1);
            }
        });
    }
    busy.emplace_back([&] {
        while (!stop.load()) {
            for (int k = 0; k < 64; ++k) {
                failed_submits.fetch_add(blz_spawn(pool, count, &ran, nullptr) != BLZ_OK);
                failed_submits.fetch_add(blz_group_spawn(group, count, &ran) != BLZ_OK);
                spawned.fetch_add(2);
            }
            failed_submits.fetch_add(blz_group_wait(group) != BLZ_OK);
        }
    });

    std::vector<int> statuses;
    for (int i = 0; i < kForks; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        statuses.push_back(fork_and_check(pool, group));
    }
    stop.store(true);
    for (auto &t : busy) t.join();

    int failed_children = 0;
    for (int status : statuses) {
        bool passed = status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
        if (!passed) {
            ++failed_children;
            if (status >= 0 && WIFSIGNALED(status)) {
                WARN("a child was killed by signal " << WTERMSIG(status) << " (" << strsignal(WTERMSIG(status))
                                                     << (WTERMSIG(status) == SIGALRM ? ": it hung)" : ")"));
            } else if (status >= 0 && WIFEXITED(status)) {
                WARN("a child had " << WEXITSTATUS(status) << " failed checks (printed above)");
            }
        }
    }
    CHECK(failed_children == 0);
    CHECK(fibs.load() > 0);
    CHECK(wrong_fibs.load() == 0);
    CHECK(failed_submits.load() == 0);
    // The parent's pool: everything submitted runs, and it is destroyed normally.
    CHECK(blz_group_destroy(group) == BLZ_OK);
    CHECK(pool.destroy() == BLZ_OK);
    CHECK(ran.load() == spawned.load());
}
