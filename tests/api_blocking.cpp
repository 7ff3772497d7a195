// Blocking sections (issue 28 item 3): blz_block_begin/blz_block_end and
// blz_blocking keep the pool's runnable threads at its size by standing a
// spare (or a thread the cap held back) in for a blocked worker; spares
// are bounded by max_spares, retire after spare_idle_ms, are counted in
// blz_stats, start through spawn_thread when set; the cap still bounds
// the threads that take jobs; destroy ends spares that block or retire.
//
// No assertion depends on timing. The blockers wait on a Gate the test
// opens, so "the fork-join finished while every blocker was still blocked"
// is a fact the test reads from the gate, not a race; without sections the
// fork-join cannot finish before the gate opens (every worker is in it),
// which the test shows by its flag still being false after a pause.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "support.hpp"

namespace {

using blz_test::eventually;
using blz_test::fib;
using blz_test::Gate;
using blz_test::OpenOnExit;
using blz_test::stats_of;
using blz_test::thunk_of;
using blz_test::Watchdog;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr uint64_t kFib20 = 6765;

// A pool with spare settings, destroyed at scope exit.
class SparePool {
public:
    SparePool(uint32_t num_threads, uint32_t max_spares, uint32_t spare_idle_ms) {
        blz_pool_config config;
        blz_pool_config_init(&config);
        config.num_threads = num_threads;
        config.max_spares = max_spares;
        config.spare_idle_ms = spare_idle_ms;
        if (blz_pool_create(&config, &pool_) != BLZ_OK) throw std::runtime_error("blz_pool_create failed");
    }
    ~SparePool() {
        if (pool_ != nullptr) blz_pool_destroy(pool_);
    }
    SparePool(const SparePool &) = delete;
    SparePool &operator=(const SparePool &) = delete;
    operator blz_pool *() const { return pool_; }
    blz_status destroy() {
        blz_status status = blz_pool_destroy(pool_);
        pool_ = nullptr;
        return status;
    }

private:
    blz_pool *pool_ = nullptr;
};

// A task that blocks on `gate`, inside a blocking section or not.
struct Blocker {
    Gate *gate;
    bool in_section;
    std::atomic<int> *done;
    std::atomic<int> *spare_seen;  // blockers that ran on a spare (index >= num_threads)
    blz_pool *pool;

    static void run(void *arg) {
        auto *b = static_cast<Blocker *>(arg);
        if (blz_worker_index(b->pool) >= static_cast<int32_t>(blz_pool_num_threads(b->pool))) {
            b->spare_seen->fetch_add(1);
        }
        if (b->in_section) (void)blz_block_begin();
        b->gate->pass();
        if (b->in_section) (void)blz_block_end();
        b->done->fetch_add(1);
    }
};

// Spawns n blockers (detached tasks) and waits until all are in the gate.
struct Blockers {
    Gate gate;
    std::atomic<int> done{0};
    std::atomic<int> on_spare{0};
    std::vector<Blocker> args;

    Blockers(blz_pool *pool, int n, bool in_section) : args(static_cast<size_t>(n)) {
        for (Blocker &b : args) {
            b = Blocker{&gate, in_section, &done, &on_spare, pool};
            REQUIRE(blz_spawn(pool, &Blocker::run, &b, nullptr) == BLZ_OK);
        }
    }
    bool all_blocked() { return gate.wait_entered(static_cast<int>(args.size())); }
    bool all_done() {
        return eventually([&] { return done.load() == static_cast<int>(args.size()); }, seconds(30));
    }
};

// fib(20) by fork-join from a thread of the test's, which sets `finished`.
struct ForkJoinBeside {
    std::atomic<bool> finished{false};
    uint64_t result = 0;
    std::thread thread;

    explicit ForkJoinBeside(blz_pool *pool) {
        thread = std::thread([this, pool] {
            result = fib(pool, 20);
            finished.store(true);
        });
    }
    ~ForkJoinBeside() { thread.join(); }
};

}  // namespace

TEST_CASE("without blocking sections, N blocked tasks starve a fork-join on an N-worker pool") {
    Watchdog watchdog("starvation without sections", seconds(60));
    SparePool pool(2, 0, 0);
    Blockers blockers(pool, 2, false);
    OpenOnExit opener{blockers.gate};
    REQUIRE(blockers.all_blocked());
    ForkJoinBeside beside(pool);
    // Every worker is in the gate: nothing can run the fork-join, however
    // long we wait. The pause only gives a defect the chance to show.
    std::this_thread::sleep_for(milliseconds(200));
    CHECK_FALSE(beside.finished.load());
    CHECK(stats_of(pool).spares_started == 0);
    blockers.gate.release();
    REQUIRE(eventually([&] { return beside.finished.load(); }, seconds(30)));
    CHECK(beside.result == kFib20);
    REQUIRE(blockers.all_done());
}

TEST_CASE("with blocking sections, a fork-join finishes while N tasks block on an N-worker pool") {
    Watchdog watchdog("fork-join beside blocking sections", seconds(60));
    SparePool pool(2, 0, 0);  // default spares: one per worker
    Blockers blockers(pool, 2, true);
    OpenOnExit opener{blockers.gate};
    REQUIRE(blockers.all_blocked());
    {
        ForkJoinBeside beside(pool);
        // The gate is closed until after this wait: the fork-join can only
        // finish on stand-ins while both blockers are still blocked.
        REQUIRE(eventually([&] { return beside.finished.load(); }, seconds(30)));
        CHECK(blockers.gate.open.load() == false);
        CHECK(beside.result == kFib20);
    }
    const blz_stats during = stats_of(pool);
    CHECK(during.blocked_now == 2);
    CHECK(during.max_spares == 2);
    CHECK(during.spares_started >= 1);
    CHECK(during.spares_now >= 1);
    CHECK(during.spares_now <= 2);
    CHECK(during.num_threads == 2);
    blockers.gate.release();
    REQUIRE(blockers.all_done());
    CHECK(eventually([&] { return stats_of(pool).blocked_now == 0; }, seconds(10)));
}

TEST_CASE("spares stay within max_spares: S+1 blockers beyond the workers start S spares") {
    Watchdog watchdog("spare bound", seconds(60));
    constexpr uint32_t kWorkers = 2, kSpares = 1;
    SparePool pool(kWorkers, kSpares, 0);
    // Two blockers take both workers; the spare that stands in takes the
    // third, which needs another spare the bound refuses.
    Blockers blockers(pool, kWorkers + kSpares, true);
    OpenOnExit opener{blockers.gate};
    REQUIRE(blockers.all_blocked());
    CHECK(blockers.on_spare.load() >= 1);  // the third blocker ran on the spare
    const blz_stats s = stats_of(pool);
    CHECK(s.blocked_now == kWorkers + kSpares);
    CHECK(s.spares_now == kSpares);
    CHECK(s.spares_peak == kSpares);
    CHECK(s.spares_started == kSpares);
    CHECK(s.max_spares == kSpares);
    blockers.gate.release();
    REQUIRE(blockers.all_done());
    CHECK(stats_of(pool).spares_peak == kSpares);
}

TEST_CASE("a spare retires after spare_idle_ms without a job, and a later section starts another") {
    Watchdog watchdog("spare retirement", seconds(60));
    SparePool pool(1, 1, 20);
    for (int round = 1; round <= 2; ++round) {
        Blockers blockers(pool, 1, true);
        OpenOnExit opener{blockers.gate};
        REQUIRE(blockers.all_blocked());
        REQUIRE(eventually([&] { return stats_of(pool).spares_now == 1; }, seconds(10)));
        // While the worker blocks, its stand-in never retires, idle or not.
        std::this_thread::sleep_for(milliseconds(100));
        CHECK(stats_of(pool).spares_now == 1);
        blockers.gate.release();
        REQUIRE(blockers.all_done());
        REQUIRE(eventually([&] { return stats_of(pool).spares_now == 0; }, seconds(10)));
        const blz_stats s = stats_of(pool);
        CHECK(s.spares_retired == static_cast<uint64_t>(round));
        CHECK(s.spares_started == static_cast<uint64_t>(round));
    }
    CHECK(fib(pool, 20) == kFib20);  // the worker took its slot back
}

TEST_CASE("the cap still bounds the threads that take jobs while a worker blocks") {
    Watchdog watchdog("cap with blocking sections", seconds(60));
    SparePool pool(2, 0, 50);
    REQUIRE(blz_pool_set_max_active(pool, 1) == BLZ_OK);
    Blockers blockers(pool, 1, true);
    OpenOnExit opener{blockers.gate};
    REQUIRE(blockers.all_blocked());
    // Counted tasks, run while the blocker blocks: by a stand-in (the
    // worker the cap held back, or a spare), one at a time.
    std::atomic<int> now{0}, most{0}, finished{0};
    auto counted = [&] {
        const int n = now.fetch_add(1) + 1;
        int seen = most.load();
        while (n > seen && !most.compare_exchange_weak(seen, n)) {
        }
        std::this_thread::sleep_for(milliseconds(2));
        now.fetch_sub(1);
        finished.fetch_add(1);
    };
    constexpr int kTasks = 16;
    for (int i = 0; i < kTasks; ++i) REQUIRE(blz_spawn(pool, thunk_of(counted), &counted, nullptr) == BLZ_OK);
    REQUIRE(eventually([&] { return finished.load() == kTasks; }, seconds(30)));
    CHECK(blockers.gate.open.load() == false);
    CHECK(most.load() == 1);
    blockers.gate.release();
    REQUIRE(blockers.all_done());
    // After the blocker came back (over the cap for its own job's end),
    // the cap holds again.
    most.store(0);
    finished.store(0);
    for (int i = 0; i < kTasks; ++i) REQUIRE(blz_spawn(pool, thunk_of(counted), &counted, nullptr) == BLZ_OK);
    REQUIRE(eventually([&] { return finished.load() == kTasks; }, seconds(30)));
    CHECK(most.load() == 1);
}

TEST_CASE("destroy while a spare blocks in a section, and while spares retire") {
    Watchdog watchdog("destroy with spares", seconds(60));
    SECTION("a spare inside a blocking section: destroy waits for it") {
        SparePool pool(1, 2, 0);
        Blockers blockers(pool, 2, true);  // the second runs on the first's spare, and blocks there
        OpenOnExit opener{blockers.gate};
        REQUIRE(blockers.all_blocked());
        CHECK(blockers.on_spare.load() == 1);
        std::atomic<bool> destroyed{false};
        std::thread destroyer([&] {
            CHECK(pool.destroy() == BLZ_OK);
            destroyed.store(true);
        });
        std::this_thread::sleep_for(milliseconds(50));
        CHECK_FALSE(destroyed.load());  // accepted work still blocks
        blockers.gate.release();
        destroyer.join();
        CHECK(blockers.done.load() == 2);
    }
    SECTION("spares retiring while the pool is destroyed") {
        for (int i = 0; i < 20; ++i) {
            SparePool pool(1, 1, 1);
            Blockers blockers(pool, 1, true);
            blockers.gate.release();
            REQUIRE(blockers.all_done());
            if (i % 2 == 0) std::this_thread::sleep_for(milliseconds(1));  // retiring now, or about to
            REQUIRE(pool.destroy() == BLZ_OK);
        }
    }
}

TEST_CASE("spares start through spawn_thread, with their own indices") {
    Watchdog watchdog("spares through spawn_thread", seconds(60));
    struct Embedder {
        std::mutex mutex;
        std::vector<uint32_t> indices;
        std::vector<std::thread> threads;
        static int spawn(void *user, uint32_t index, blz_fn run, void *run_arg) {
            auto *e = static_cast<Embedder *>(user);
            std::lock_guard<std::mutex> lock(e->mutex);
            e->indices.push_back(index);
            e->threads.emplace_back([run, run_arg] { run(run_arg); });
            return 0;
        }
    } embedder;
    {
        blz_pool_config config;
        blz_pool_config_init(&config);
        config.num_threads = 1;
        config.spawn_thread = &Embedder::spawn;
        config.spawn_user = &embedder;
        blz_pool *pool = nullptr;
        REQUIRE(blz_pool_create(&config, &pool) == BLZ_OK);
        {
            Blockers blockers(pool, 1, true);
            OpenOnExit opener{blockers.gate};
            REQUIRE(blockers.all_blocked());
            CHECK(fib(pool, 20) == kFib20);  // on the spare
            blockers.gate.release();
            REQUIRE(blockers.all_done());
        }
        REQUIRE(blz_pool_destroy(pool) == BLZ_OK);
    }
    for (std::thread &t : embedder.threads) t.join();
    REQUIRE(embedder.indices.size() >= 2);
    CHECK(embedder.indices[0] == 0);
    CHECK(embedder.indices[1] == 1);  // the spare: num_threads and up
}

TEST_CASE("blocking sections: nesting, calls outside a pool, and bad input") {
    CHECK(blz_block_end() == BLZ_EINVAL);  // nothing open
    CHECK(blz_block_begin() == BLZ_OK);    // outside every pool: counts the nesting only
    CHECK(blz_block_begin() == BLZ_OK);
    CHECK(blz_block_end() == BLZ_OK);
    CHECK(blz_block_end() == BLZ_OK);
    CHECK(blz_block_end() == BLZ_EINVAL);
    CHECK(blz_blocking(nullptr, nullptr) == BLZ_EINVAL);
    int calls = 0;
    auto count = [&] { ++calls; };
    CHECK(blz_blocking(thunk_of(count), &count) == BLZ_OK);
    auto throws = [] { throw std::runtime_error("blocked and failed"); };
    CHECK(blz_blocking(thunk_of(throws), &throws) == BLZ_ETASK);
    CHECK(blz_block_end() == BLZ_EINVAL);  // blz_blocking closed its section, also when fn threw
    CHECK(calls == 1);

    SparePool pool(1, 0, 0);
    // Nested sections on a worker give its slot back once and take it back once.
    std::atomic<uint32_t> blocked_inside{0};
    auto nested = [&] {
        (void)blz_block_begin();
        (void)blz_block_begin();
        blz_stats s;
        s.struct_size = sizeof(s);
        (void)blz_pool_stats(nullptr, &s);  // EINVAL, not a crash
        blocked_inside.store(stats_of(pool).blocked_now);
        (void)blz_block_end();
        (void)blz_block_end();
    };
    REQUIRE(blz_call(pool, thunk_of(nested), &nested) == BLZ_OK);
    CHECK(blocked_inside.load() == 1);
    CHECK(stats_of(pool).blocked_now == 0);
    CHECK(fib(pool, 20) == kFib20);

    blz_pool_config config;
    blz_pool_config_init(&config);
    config.num_threads = 2;
    config.max_spares = BLZ_MAX_THREADS;  // workers plus spares above BLZ_MAX_THREADS
    blz_pool *bad = blz_test::sentinel<blz_pool>();
    CHECK(blz_pool_create(&config, &bad) == BLZ_EINVAL);
    CHECK(bad == blz_test::sentinel<blz_pool>());
    config.max_spares = BLZ_NO_SPARES;
    blz_pool *none = nullptr;
    REQUIRE(blz_pool_create(&config, &none) == BLZ_OK);
    CHECK(stats_of(none).max_spares == 0);
    REQUIRE(blz_pool_destroy(none) == BLZ_OK);
    config.max_spares = 0;
    REQUIRE(blz_pool_create(&config, &none) == BLZ_OK);
    CHECK(stats_of(none).max_spares == 2);  // the default: one per worker
    REQUIRE(blz_pool_destroy(none) == BLZ_OK);
}
