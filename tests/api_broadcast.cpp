// 0.2 blz_broadcast, from the contract in blitz.h: fn(arg, worker_index)
// exactly once on every worker, the return after all of them, from outside,
// from the pool's own workers (no deadlock), from another pool's worker,
// nested in a broadcast, on a sleeping pool, with a busy worker, with
// failing calls, concurrent broadcasts, and refusals.
//
// Code on workers and helper threads only records (atomics); the test
// thread asserts afterwards. Interleavings are held open by gates; timeouts
// are generous upper bounds. Every case runs under a watchdog.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <thread>
#include <vector>

#include "support.hpp"

namespace {

using blz_test::Pool;
using blz_test::thunk_of;
using blz_test::on_worker;
using blz_test::eventually;
using blz_test::Gate;
using blz_test::gate_fn;
using blz_test::OpenOnExit;
using blz_test::count_into;
using blz_test::stats_of;
using blz_test::Watchdog;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr bool kSanitized = blz_test::kAddressSanitizer || blz_test::kThreadSanitizer;
constexpr uint32_t kMaxWorkers = 8;


// One broadcast's record: calls per worker index, and what went wrong.
struct Record {
    blz_pool *pool = nullptr;
    uint32_t n = 0;
    std::atomic<int> calls[kMaxWorkers];
    std::atomic<int> bad_index{0};      // index out of range
    std::atomic<int> not_that_worker{0};  // blz_worker_index(pool) on the calling thread differs
    int throw_on = -1;                  // the call on this worker throws
    int fail_on = -1;                   // the call on this worker calls blz_fail
    Gate *gate = nullptr;               // every call passes it, if set
    Record() {
        for (auto &c : calls) c.store(0);
    }
    void init(blz_pool *p) {
        pool = p;
        n = blz_pool_num_threads(p);
    }
    // Every worker exactly once.
    bool each_once() const {
        for (uint32_t i = 0; i < n; ++i) {
            if (calls[i].load() != 1) return false;
        }
        return bad_index.load() == 0;
    }
    int total() const {
        int t = 0;
        for (uint32_t i = 0; i < n; ++i) t += calls[i].load();
        return t;
    }
};

void record_fn(void *arg, uint32_t index) {
    auto *r = static_cast<Record *>(arg);
    if (index >= r->n || index >= kMaxWorkers) {
        r->bad_index.fetch_add(1);
        return;
    }
    if (blz_worker_index(r->pool) != static_cast<int32_t>(index)) r->not_that_worker.fetch_add(1);
    r->calls[index].fetch_add(1);
    if (r->gate != nullptr) r->gate->pass();
    if (static_cast<int>(index) == r->fail_on) blz_fail();
    if (static_cast<int>(index) == r->throw_on) throw std::runtime_error("broadcast call throws");
}

void check_record(const Record &r) {
    INFO(r.total() << " calls for " << r.n << " workers");
    CHECK(r.each_once());
    CHECK(r.bad_index.load() == 0);
    CHECK(r.not_that_worker.load() == 0);
}

}  // namespace

TEST_CASE("blz_broadcast with NULL pool or fn returns EINVAL and calls nothing", "[api][v02][broadcast]") {
    Watchdog watchdog("broadcast EINVAL", seconds(60));
    Pool pool(2);
    Record r;
    r.init(pool);
    CHECK(blz_broadcast(nullptr, record_fn, &r) == BLZ_EINVAL);
    CHECK(blz_broadcast(pool, nullptr, &r) == BLZ_EINVAL);
    CHECK(blz_broadcast(nullptr, nullptr, nullptr) == BLZ_EINVAL);
    CHECK(blz_test::wait_until_asleep(pool, milliseconds(60000)));
    CHECK(r.total() == 0);
}

TEST_CASE("blz_broadcast calls fn once on every worker, with its index, from outside", "[api][v02][broadcast]") {
    const uint32_t workers = GENERATE(1u, 2u, 4u, 8u);
    INFO("workers: " << workers);
    Watchdog watchdog("broadcast from outside", seconds(120));
    Pool pool(workers);
    const int rounds = kSanitized ? 100 : 1000;
    int bad = 0;
    for (int i = 0; i < rounds; ++i) {
        Record r;
        r.init(pool);
        const blz_status status = blz_broadcast(pool, record_fn, &r);
        // Every call has returned: the counts are final now.
        if (status != BLZ_OK || !r.each_once() || r.not_that_worker.load() != 0) {
            ++bad;
            INFO("round " << i << ": status " << status);
            check_record(r);
        }
    }
    CHECK(bad == 0);
    CHECK(blz_test::fib(pool, 15) == 610);  // the pool keeps working
}

TEST_CASE("blz_broadcast on a sleeping pool wakes every worker", "[api][v02][broadcast]") {
    const uint32_t workers = GENERATE(1u, 2u, 4u);
    INFO("workers: " << workers);
    Watchdog watchdog("broadcast on a sleeping pool", seconds(120));
    Pool pool(workers);
    for (int i = 0; i < 3; ++i) {
        REQUIRE(blz_test::wait_until_asleep(pool, milliseconds(60000)));
        Record r;
        r.init(pool);
        CHECK(blz_broadcast(pool, record_fn, &r) == BLZ_OK);
        check_record(r);
    }
}

TEST_CASE("blz_broadcast from one of the pool's own workers does not deadlock", "[api][v02][broadcast]") {
    const uint32_t workers = GENERATE(1u, 2u, 4u);
    INFO("workers: " << workers);
    Watchdog watchdog("broadcast from own worker", seconds(120));
    Pool pool(workers);
    blz_pool *p = pool;

    SECTION("from blz_call") {
        Record r;
        r.init(p);
        blz_status status = 99;
        int32_t caller = -2;
        REQUIRE(on_worker(p, [&] {
                    caller = blz_worker_index(p);
                    status = blz_broadcast(p, record_fn, &r);
                }) == BLZ_OK);
        CHECK(status == BLZ_OK);
        CHECK(caller >= 0);
        check_record(r);  // the caller's own index included
    }
    SECTION("from a spawned task and from a fork-join half") {
        Record r1, r2, r3;
        r1.init(p);
        r2.init(p);
        r3.init(p);
        struct Ctx {
            blz_pool *pool;
            Record *r;
            blz_status status;
        };
        Ctx c1{p, &r1, 99}, c2{p, &r2, 99}, c3{p, &r3, 99};
        auto job = [](void *arg) {
            auto *c = static_cast<Ctx *>(arg);
            c->status = blz_broadcast(c->pool, record_fn, c->r);
        };
        blz_task *task = nullptr;
        REQUIRE(blz_spawn(p, job, &c1, &task) == BLZ_OK);
        CHECK(blz_join(task) == BLZ_OK);
        CHECK(blz_fork_join(p, job, &c2, job, &c3) == BLZ_OK);
        CHECK(c1.status == BLZ_OK);
        CHECK(c2.status == BLZ_OK);
        CHECK(c3.status == BLZ_OK);
        check_record(r1);
        check_record(r2);
        check_record(r3);
    }
    SECTION("from every worker at once") {
        const uint32_t n = workers;
        std::unique_ptr<Record[]> records(new Record[n]);
        for (uint32_t i = 0; i < n; ++i) records[i].init(p);
        struct Ctx {
            blz_pool *pool;
            Record *records;
            uint32_t n;
            std::atomic<uint32_t> arrived{0}, next{0};
            std::atomic<int> bad_status{0};
        } ctx{p, records.get(), n};
        auto job = [](void *arg) {
            auto *c = static_cast<Ctx *>(arg);
            const uint32_t mine = c->next.fetch_add(1);
            c->arrived.fetch_add(1);
            // Every worker holds one of these tasks (they wait for each other).
            while (c->arrived.load() < c->n) std::this_thread::yield();
            if (blz_broadcast(c->pool, record_fn, &c->records[mine]) != BLZ_OK) c->bad_status.fetch_add(1);
        };
        std::vector<blz_task *> tasks(n, nullptr);
        for (auto &t : tasks) REQUIRE(blz_spawn(p, job, &ctx, &t) == BLZ_OK);
        for (auto *t : tasks) CHECK(blz_join(t) == BLZ_OK);
        CHECK(ctx.bad_status.load() == 0);
        for (uint32_t i = 0; i < n; ++i) check_record(records[i]);
    }
}

TEST_CASE("blz_broadcast from a worker while another worker is busy: its own call runs, the return waits",
          "[api][v02][broadcast]") {
    Watchdog watchdog("broadcast with a busy worker", seconds(60));
    Pool pool(2);
    blz_pool *p = pool;
    Gate busy;
    OpenOnExit open_on_exit{busy};
    blz_task *busy_task = nullptr;
    REQUIRE(blz_spawn(p, gate_fn, &busy, &busy_task) == BLZ_OK);
    REQUIRE(busy.wait_entered());
    const int32_t busy_index = [&] {
        // The broadcast caller runs on the other worker: find its index there.
        int32_t idx = -2;
        REQUIRE(on_worker(p, [&] { idx = blz_worker_index(p); }) == BLZ_OK);
        return 1 - idx;
    }();
    REQUIRE((busy_index == 0 || busy_index == 1));

    SECTION("from the other worker") {
        Record r;
        r.init(p);
        std::atomic<bool> returned{false};
        bool returned_early = true;
        int busy_calls_while_held = -1;
        std::thread opener([&] {
            eventually([&] { return r.calls[1 - busy_index].load() == 1; });
            std::this_thread::sleep_for(milliseconds(30));
            returned_early = returned.load();
            busy_calls_while_held = r.calls[busy_index].load();
            busy.release();
        });
        blz_status status = 99;
        CHECK(on_worker(p, [&] { status = blz_broadcast(p, record_fn, &r); }) == BLZ_OK);
        returned.store(true);
        opener.join();
        CHECK(status == BLZ_OK);
        CHECK_FALSE(returned_early);
        CHECK(busy_calls_while_held == 0);  // a busy worker is not interrupted
        check_record(r);
    }
    SECTION("from outside") {
        Record r;
        r.init(p);
        std::atomic<bool> returned{false};
        blz_status status = 99;
        std::thread caller([&] {
            status = blz_broadcast(p, record_fn, &r);
            returned.store(true);
        });
        CHECK(eventually([&] { return r.calls[1 - busy_index].load() == 1; }));
        std::this_thread::sleep_for(milliseconds(30));
        CHECK_FALSE(returned.load());
        CHECK(r.calls[busy_index].load() == 0);
        busy.release();
        caller.join();
        CHECK(status == BLZ_OK);
        check_record(r);
    }
    CHECK(blz_join(busy_task) == BLZ_OK);
}

TEST_CASE("blz_broadcast from a worker of another pool", "[api][v02][broadcast]") {
    Watchdog watchdog("broadcast from another pool", seconds(60));
    Pool pool(4);
    Pool other(2);
    blz_pool *p = pool;
    Record r;
    r.init(p);
    blz_status status = 99;
    REQUIRE(on_worker(other, [&] { status = blz_broadcast(p, record_fn, &r); }) == BLZ_OK);
    CHECK(status == BLZ_OK);
    check_record(r);
    // And the other way round, both at once.
    Record a, b;
    a.init(p);
    b.init(other);
    blz_status sa = 99, sb = 99;
    blz_pool *o = other;
    blz_status call_a = 99;
    std::thread t([&] { call_a = on_worker(o, [&] { sa = blz_broadcast(p, record_fn, &a); }); });
    CHECK(on_worker(p, [&] { sb = blz_broadcast(o, record_fn, &b); }) == BLZ_OK);
    t.join();
    CHECK(call_a == BLZ_OK);
    CHECK(sa == BLZ_OK);
    CHECK(sb == BLZ_OK);
    check_record(a);
    check_record(b);
}

namespace {

struct Nest {
    blz_pool *pool = nullptr;
    uint32_t n = 0;
    bool all_nest = false;  // else only worker 0 nests
    Record outer;
    std::unique_ptr<Record[]> inner;  // one per nesting worker
    std::atomic<int> bad_status{0};
};
void nest_fn(void *arg, uint32_t index) {
    auto *x = static_cast<Nest *>(arg);
    record_fn(&x->outer, index);
    if (!x->all_nest && index != 0) return;
    if (index >= x->n) return;
    if (blz_broadcast(x->pool, record_fn, &x->inner[index]) != BLZ_OK) x->bad_status.fetch_add(1);
}

}  // namespace

TEST_CASE("blz_broadcast nested in a broadcast's fn", "[api][v02][broadcast]") {
    const uint32_t workers = GENERATE(1u, 2u, 4u);
    const bool all_nest = GENERATE(false, true);
    INFO("workers: " << workers << (all_nest ? ", every call nests" : ", worker 0's call nests"));
    Watchdog watchdog("nested broadcast", seconds(120));
    Pool pool(workers);
    for (int round = 0; round < (kSanitized ? 20 : 200); ++round) {
        Nest x;
        x.pool = pool;
        x.n = workers;
        x.all_nest = all_nest;
        x.outer.init(pool);
        x.inner.reset(new Record[workers]);
        for (uint32_t i = 0; i < workers; ++i) x.inner[i].init(pool);
        CHECK(blz_broadcast(pool, nest_fn, &x) == BLZ_OK);
        CHECK(x.bad_status.load() == 0);
        check_record(x.outer);
        for (uint32_t i = 0; i < workers; ++i) {
            if (all_nest || i == 0) {
                check_record(x.inner[i]);
            } else {
                CHECK(x.inner[i].total() == 0);
            }
        }
    }
}

TEST_CASE("blz_broadcast: a call that throws or calls blz_fail gives BLZ_ETASK; every worker still ran",
          "[api][v02][broadcast][fail]") {
    const uint32_t workers = GENERATE(1u, 2u, 4u);
    INFO("workers: " << workers);
    Watchdog watchdog("broadcast failure", seconds(60));
    Pool pool(workers);
    blz_pool *p = pool;
    SECTION("a call throws") {
        for (uint32_t w = 0; w < workers; ++w) {
            Record r;
            r.init(p);
            r.throw_on = static_cast<int>(w);
            CHECK(blz_broadcast(p, record_fn, &r) == BLZ_ETASK);
            check_record(r);
        }
    }
    SECTION("a call calls blz_fail") {
        for (uint32_t w = 0; w < workers; ++w) {
            const uint64_t before = stats_of(p).tasks_failed;
            Record r;
            r.init(p);
            r.fail_on = static_cast<int>(w);
            CHECK(blz_broadcast(p, record_fn, &r) == BLZ_ETASK);
            check_record(r);
            // "tasks_failed counts it once per failed job": the call failed.
            CHECK(stats_of(p).tasks_failed == before + 1);
        }
    }
    SECTION("one throws, another fails, from a worker") {
        Record r;
        r.init(p);
        r.throw_on = 0;
        r.fail_on = static_cast<int>(workers - 1);
        blz_status status = 99;
        REQUIRE(on_worker(p, [&] { status = blz_broadcast(p, record_fn, &r); }) == BLZ_OK);
        CHECK(status == BLZ_ETASK);
        check_record(r);
    }
    // The failure does not stick: the next broadcast is clean.
    Record clean;
    clean.init(p);
    CHECK(blz_broadcast(p, record_fn, &clean) == BLZ_OK);
    check_record(clean);
}

TEST_CASE("concurrent broadcasts from outside threads and workers each reach every worker once",
          "[api][v02][broadcast][race]") {
    Watchdog watchdog("concurrent broadcasts", seconds(180));
    constexpr uint32_t kWorkers = 4;
    constexpr int kThreads = 3;
    const int rounds = kSanitized ? 200 : 2000;
    Pool pool(kWorkers);
    blz_pool *p = pool;
    std::atomic<int> bad{0};
    auto broadcaster = [&] {
        for (int i = 0; i < rounds; ++i) {
            Record r;
            r.init(p);
            if (blz_broadcast(p, record_fn, &r) != BLZ_OK || !r.each_once() || r.not_that_worker.load() != 0) {
                bad.fetch_add(1);
            }
        }
    };
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) threads.emplace_back(broadcaster);
    // One more from a worker of the pool.
    threads.emplace_back([&] {
        if (on_worker(p, broadcaster) != BLZ_OK) bad.fetch_add(1000);
    });
    for (auto &t : threads) t.join();
    CHECK(bad.load() == 0);
}

TEST_CASE("blz_broadcast from outside while the pool is destroyed returns ESHUTDOWN and calls nothing",
          "[api][v02][broadcast][destroy]") {
    Watchdog watchdog("broadcast during destroy", seconds(60));
    blz_pool *pool = nullptr;
    blz_pool_config config;
    blz_pool_config_init(&config);
    config.num_threads = 2;
    REQUIRE(blz_pool_create(&config, &pool) == BLZ_OK);
    Pool other(1);
    Gate gate;
    OpenOnExit open_on_exit{gate};
    blz_task *blocker = nullptr;
    REQUIRE(blz_spawn(pool, gate_fn, &gate, &blocker) == BLZ_OK);
    REQUIRE(gate.wait_entered());
    blz_status destroy_status = 99;
    std::thread destroyer([&] { destroy_status = blz_pool_destroy(pool); });
    // CHECK, not REQUIRE: the destroyer thread must still be joined.
    CHECK(eventually([&] {
        blz_stats stats;
        stats.struct_size = sizeof(stats);
        return blz_pool_stats(pool, &stats) == BLZ_ESHUTDOWN;
    }));
    Record r;
    r.pool = pool;
    r.n = 2;
    CHECK(blz_broadcast(pool, record_fn, &r) == BLZ_ESHUTDOWN);
    blz_status from_other = 99;
    CHECK(on_worker(other, [&] { from_other = blz_broadcast(pool, record_fn, &r); }) == BLZ_OK);
    CHECK(from_other == BLZ_ESHUTDOWN);
    gate.release();
    destroyer.join();
    CHECK(destroy_status == BLZ_OK);
    CHECK(blz_join(blocker) == BLZ_OK);
    CHECK(r.total() == 0);
}
