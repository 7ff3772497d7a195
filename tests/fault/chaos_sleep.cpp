// The chaos build's sleep/wake stress (meson setup -Dchaos=true, which
// inserts random yields and short sleeps around every step of the sleep
// protocol, the deque and the injector: lib/chaos.hpp). 10^5 cycles of:
// wait until every worker of the pool sleeps, inject one job from outside
// the pool, wait until it has run. A job still queued while every worker
// sleeps is a stranded job, a lost wake-up: the program reports it with
// the pool's counters and fails. Pools of 1, 2 and 4 workers take turns;
// every 16th cycle injects a burst of 8 jobs from two threads at once.
//
// Registered only in chaos builds (tests/fault/meson.build); without chaos,
// tests/sleep_wake.cpp is the sleep/wake stress. ./dev verify runs it.
#include <blitz.h>

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <thread>
#include <unistd.h>

#include "support.hpp"

namespace {

constexpr int kCycles = 100000;
constexpr int kBurst = 8;
// A job that has not run after this long fails the test (each chaos pause
// is at most 64 µs); the report's sleeping_now equal to the pool's size
// says the job was stranded by a lost wake-up.
constexpr std::chrono::seconds kStrandedAfter{30};

struct Done {
    std::mutex mutex;
    std::condition_variable cv;
    uint64_t completed = 0;  // guarded by mutex

    bool wait_for(uint64_t target, std::chrono::seconds limit) {
        std::unique_lock<std::mutex> lock(mutex);
        return cv.wait_for(lock, limit, [&] { return completed >= target; });
    }
};

void job(void *arg) {
    auto *done = static_cast<Done *>(arg);
    std::lock_guard<std::mutex> lock(done->mutex);
    ++done->completed;
    done->cv.notify_all();
}

[[noreturn]] void report_stranded(blz_pool *pool, int cycle, uint64_t target, uint64_t completed) {
    blz_stats s = blz_test::stats_of(pool);
    std::fprintf(stderr,
                 "STRANDED: cycle %d, %u workers: %llu of %llu jobs ran after %lld s; sleeping_now=%u "
                 "inactive_now=%u injected=%llu executed=%llu sleeps=%llu wakeups=%llu sleep_aborts=%llu\n",
                 cycle, s.num_threads, static_cast<unsigned long long>(completed),
                 static_cast<unsigned long long>(target), static_cast<long long>(kStrandedAfter.count()),
                 s.sleeping_now, s.inactive_now, static_cast<unsigned long long>(s.jobs_injected),
                 static_cast<unsigned long long>(s.jobs_executed), static_cast<unsigned long long>(s.sleeps),
                 static_cast<unsigned long long>(s.wakeups), static_cast<unsigned long long>(s.sleep_aborts));
    std::fflush(stderr);
    _exit(98);  // destroy would wait for the stranded job forever
}

// Injects `count` jobs: from this thread, or half of them from a second one at the same time.
void inject(blz_pool *pool, Done &done, int count, bool two_threads) {
    auto spawn_n = [&](int n) {
        for (int i = 0; i < n; ++i) {
            if (blz_spawn(pool, job, &done, nullptr) != BLZ_OK) _exit(97);
        }
    };
    if (!two_threads) {
        spawn_n(count);
        return;
    }
    std::thread other([&] { spawn_n(count / 2); });
    spawn_n(count - count / 2);
    other.join();
}

}  // namespace

TEST_CASE("chaos: 10^5 jobs injected into a sleeping pool, none stranded", "[fault][chaos][sleep]") {
    const uint32_t sizes[] = {1, 2, 4};
    constexpr int kPerSize = kCycles / 3 + 1;
    int cycles = 0;
    for (uint32_t workers : sizes) {
        blz_test::Watchdog dog("chaos sleep/wake cycles", std::chrono::seconds(3600));
        blz_test::Pool pool(workers);
        Done done;
        uint64_t target = 0;
        int not_asleep = 0;
        for (int i = 0; i < kPerSize && cycles < kCycles; ++i, ++cycles) {
            // Asleep first: the job must be the one that wakes the pool.
            not_asleep += !blz_test::wait_until_asleep(pool, std::chrono::milliseconds(30000));
            const bool burst = i % 16 == 15;
            const int count = burst ? kBurst : 1;
            target += static_cast<uint64_t>(count);
            inject(pool, done, count, burst);
            if (!done.wait_for(target, kStrandedAfter)) {
                std::unique_lock<std::mutex> lock(done.mutex);
                report_stranded(pool, cycles, target, done.completed);
            }
        }
        // A job is counted once its function has returned, after it
        // reported done: asleep again, every worker has counted its jobs.
        not_asleep += !blz_test::wait_until_asleep(pool, std::chrono::milliseconds(30000));
        blz_stats s = blz_test::stats_of(pool);
        INFO(workers << " workers");
        CHECK(not_asleep == 0);
        CHECK(s.jobs_executed >= target);
        CHECK(s.sleeps > 0);
        CHECK(s.wakeups > 0);
        WARN(workers << " workers: " << target << " jobs, sleeps " << s.sleeps << ", wakeups " << s.wakeups
                     << ", sleep_aborts " << s.sleep_aborts);
    }
    CHECK(cycles == kCycles);
}
