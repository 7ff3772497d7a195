// Per-worker statistics, from the contract in blitz.h (issue 18, part A):
// blz_worker_stats sums to blz_pool_stats, fills the prefix its struct_size
// asks for, and never goes backwards while workers change phase; bad input
// gives BLZ_EINVAL. No assertion depends on timing: waits are for states,
// under a watchdog.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "support.hpp"

namespace {

using blz_test::eventually;
using blz_test::Pool;
using blz_test::stats_of;
using blz_test::wait_until_asleep;
using blz_test::Watchdog;
using std::chrono::milliseconds;
using std::chrono::seconds;

blz_stats worker_stats_of(blz_pool *pool, uint32_t index) {
    blz_stats stats;
    stats.struct_size = sizeof(stats);
    REQUIRE(blz_worker_stats(pool, index, &stats) == BLZ_OK);
    return stats;
}

// The fields every snapshot only ever increases.
constexpr uint64_t blz_stats::*kMonotonic[] = {
    &blz_stats::jobs_executed, &blz_stats::steals,       &blz_stats::sleeps, &blz_stats::wakeups,
    &blz_stats::spurious_wakeups, &blz_stats::sleep_aborts, &blz_stats::run_ns, &blz_stats::search_ns,
    &blz_stats::sleep_ns,
};

TEST_CASE("per-worker statistics sum to the pool's", "[stats]") {
    Watchdog watchdog("per-worker stats", seconds(120));
    const uint32_t workers = 3;
    Pool pool(workers);
    REQUIRE(blz_test::fib(pool, 20) == 6765);
    std::atomic<int> counter{0};
    for (int i = 0; i < 100; ++i) REQUIRE(blz_spawn(pool, blz_test::count_into, &counter, nullptr) == BLZ_OK);
    REQUIRE(eventually([&] { return counter.load() == 100; }));
    REQUIRE(wait_until_asleep(pool, milliseconds(60000)));
    // Every worker blocked, nobody posts: no worker changes phase, and
    // every counter only grows between the two pool snapshots.
    const blz_stats before = stats_of(pool);
    std::vector<blz_stats> each;
    for (uint32_t i = 0; i < workers; ++i) each.push_back(worker_stats_of(pool, i));
    const blz_stats after = stats_of(pool);
    for (auto field : kMonotonic) {
        uint64_t sum = 0;
        for (const blz_stats &w : each) sum += w.*field;
        CHECK(before.*field <= sum);
        CHECK(sum <= after.*field);
    }
    uint32_t sleeping = 0;
    for (const blz_stats &w : each) {
        CHECK(w.num_threads == 1);
        CHECK(w.jobs_injected == 0);  // a pool-wide counter
        CHECK(w.sleep_ns > 0);        // blocked right now, and counted up to now
        sleeping += w.sleeping_now;
        CHECK(w.inactive_now == 1);
    }
    CHECK(sleeping == workers);
    CHECK(before.jobs_executed >= 100);
    CHECK(before.run_ns > 0);
}

// A job is counted as it starts (blitz.h): when blz_call returns, its job
// is in jobs_executed. Counted after it ran, the count lagged the latch the
// caller woke on, and a snapshot taken right away missed the job (seen under
// ASan in CI, 2 runs in 30 of api_fork_join).
TEST_CASE("a job whose call returned is in jobs_executed", "[stats]") {
    Pool pool(1);
    std::atomic<int> counter{0};
    const uint64_t before = stats_of(pool).jobs_executed;
    int lagging = 0;
    for (int i = 1; i <= 20000; ++i) {
        REQUIRE(blz_call(pool, blz_test::count_into, &counter) == BLZ_OK);
        if (stats_of(pool).jobs_executed - before != static_cast<uint64_t>(i)) ++lagging;
    }
    CHECK(counter.load() == 20000);
    CHECK(lagging == 0);
}

TEST_CASE("blz_worker_stats fills the prefix its struct_size asks for", "[stats]") {
    Pool pool(2);
    REQUIRE(blz_test::fib(pool, 10) == 55);
    unsigned char raw[sizeof(blz_stats) + 16];
    std::memset(raw, 0xAB, sizeof(raw));
    const uint32_t size = offsetof(blz_stats, run_ns);  // a struct from before the times
    std::memcpy(raw, &size, sizeof(size));
    REQUIRE(blz_worker_stats(pool, 1, reinterpret_cast<blz_stats *>(raw)) == BLZ_OK);
    size_t untouched = 0;
    for (size_t i = size; i < sizeof(raw); ++i) untouched += raw[i] == 0xAB;
    CHECK(untouched == sizeof(raw) - size);
    uint32_t n;
    std::memcpy(&n, raw + offsetof(blz_stats, num_threads), sizeof(n));
    CHECK(n == 1);
}

TEST_CASE("blz_worker_stats refuses bad input", "[stats][bad_input]") {
    Pool pool(2);
    blz_stats stats;
    stats.struct_size = sizeof(stats);
    CHECK(blz_worker_stats(nullptr, 0, &stats) == BLZ_EINVAL);
    CHECK(blz_worker_stats(pool, 0, nullptr) == BLZ_EINVAL);
    CHECK(blz_worker_stats(pool, 2, &stats) == BLZ_EINVAL);  // one past the last worker
    CHECK(blz_worker_stats(pool, UINT32_MAX, &stats) == BLZ_EINVAL);
    stats.struct_size = 3;
    CHECK(blz_worker_stats(pool, 0, &stats) == BLZ_EINVAL);
    stats.struct_size = sizeof(stats);
    CHECK(blz_worker_stats(pool, 1, &stats) == BLZ_OK);
    CHECK(blz_pool_stats(pool, nullptr) == BLZ_EINVAL);
}

// Snapshots taken while workers change phase all the time (tiny tasks
// from outside, the cap lowered and lifted): each worker's three times
// never decrease from one snapshot to the next, and the pool's counts of
// sleeping and inactive workers never exceed its size. A time limit, not
// a count: sanitizer builds take several times longer per snapshot.
TEST_CASE("statistics never go backwards and counts stay within the pool", "[stats]") {
    Watchdog watchdog("monotonic statistics", seconds(240));
    const uint32_t workers = 2;
    // Before the pool: its detached tasks may still run after churn ends,
    // until the pool's destroy has drained them.
    std::atomic<int> counter{0};
    Pool pool(workers);
    std::atomic<bool> stop{false};
    std::thread churn([&] {
        for (uint32_t round = 0; !stop.load(); ++round) {
            for (int i = 0; i < 20; ++i) (void)blz_spawn(pool, blz_test::count_into, &counter, nullptr);
            (void)blz_pool_set_max_active(pool, round % 2 == 0 ? 1 : 0);
            std::this_thread::sleep_for(std::chrono::microseconds(round % 7 == 0 ? 200 : 5));
        }
        (void)blz_pool_set_max_active(pool, 0);
    });
    uint64_t snapshots = 0, decreases = 0, over_size = 0;
    uint64_t last[workers][3] = {};
    uint64_t last_pool[3] = {};
    constexpr uint64_t blz_stats::*kTimes[3] = {&blz_stats::run_ns, &blz_stats::search_ns, &blz_stats::sleep_ns};
    const auto until = std::chrono::steady_clock::now() + seconds(4);
    while (std::chrono::steady_clock::now() < until && snapshots < 20'000'000) {
        for (uint32_t w = 0; w < workers; ++w) {
            blz_stats one;
            one.struct_size = sizeof(one);
            if (blz_worker_stats(pool, w, &one) != BLZ_OK) continue;
            for (int f = 0; f < 3; ++f) {
                decreases += one.*kTimes[f] < last[w][f];
                last[w][f] = one.*kTimes[f];
            }
            over_size += one.sleeping_now > one.inactive_now || one.inactive_now > 1;
            ++snapshots;
        }
        blz_stats all;
        all.struct_size = sizeof(all);
        if (blz_pool_stats(pool, &all) != BLZ_OK) continue;
        for (int f = 0; f < 3; ++f) {
            decreases += all.*kTimes[f] < last_pool[f];
            last_pool[f] = all.*kTimes[f];
        }
        over_size += all.sleeping_now > all.inactive_now || all.inactive_now > all.num_threads;
        ++snapshots;
    }
    stop.store(true);
    churn.join();
    INFO(snapshots << " snapshots");
    CHECK(snapshots > 10'000);
    CHECK(decreases == 0);
    CHECK(over_size == 0);
}

}  // namespace
