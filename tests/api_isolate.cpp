// blz_isolate and pool::isolate: the mutex-across-a-join deadlock of
// rayon-rs/rayon#592 reproduced without isolation and gone with it; work
// made inside runs and its results and failures come back; a stolen half
// from inside a region, waiting itself, runs no outside work.
//
// "The lock" is a thread-local flag, not a mutex: a re-entry into the
// locked section on the thread that holds it is counted instead of
// deadlocking, so the suite never hangs (and a watchdog bounds each case).
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <thread>
#include <vector>

#include "blitz.hpp"
#include "support.hpp"

namespace {

using blz_test::eventually;
using blz_test::Pool;
using blz_test::thunk_of;
using blz_test::Watchdog;
using std::chrono::milliseconds;
using std::chrono::seconds;

// The calling thread holds "M" (is inside the locked section).
thread_local bool t_holds_m = false;

// Spins (yielding) until pred() or `limit`; false on time-out.
template <class P>
bool spin_until(P pred, milliseconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (!pred()) {
        if (std::chrono::steady_clock::now() > deadline) return false;
        std::this_thread::yield();
    }
    return true;
}

// One attempt at rayon#592. Task T locks M, then joins (a, b): a waits
// until another worker has started b (else the attempt does not count);
// b, on that worker, waits until the test has queued task C from outside
// and C has started (or 30 ms passed). C "locks" M too: if T's worker,
// waiting for b, takes C, C finds M held by its own thread.
struct Attempt {
    blz_pool *pool;
    bool isolated;
    std::atomic<std::thread::id> t_thread{};
    std::atomic<bool> b_stolen{false};
    std::atomic<bool> c_queued{false};
    std::atomic<bool> c_started{false};
    std::atomic<bool> c_reentered{false};
    std::atomic<bool> c_done{false};
    std::atomic<blz_status> status{BLZ_OK};  // T's blz_isolate (checked by the test's thread)
};

void half_a(void *arg) {
    auto *at = static_cast<Attempt *>(arg);
    (void)spin_until([at] { return at->b_stolen.load(); }, milliseconds(50));
}

void half_b(void *arg) {
    auto *at = static_cast<Attempt *>(arg);
    if (std::this_thread::get_id() == at->t_thread.load()) return;  // not stolen: run inline
    at->b_stolen.store(true);
    (void)spin_until([at] { return at->c_queued.load(); }, milliseconds(1000));
    std::this_thread::sleep_for(milliseconds(1));
    (void)spin_until([at] { return at->c_started.load(); }, milliseconds(30));
}

void locked_section(void *arg) {
    auto *at = static_cast<Attempt *>(arg);
    t_holds_m = true;
    blz_fork_join(at->pool, half_a, at, half_b, at);
    t_holds_m = false;
}

void task_t(void *arg) {
    auto *at = static_cast<Attempt *>(arg);
    at->t_thread.store(std::this_thread::get_id());
    if (at->isolated) {
        at->status.store(blz_isolate(at->pool, locked_section, at));
    } else {
        locked_section(at);
    }
}

void task_c(void *arg) {
    auto *at = static_cast<Attempt *>(arg);
    if (t_holds_m) at->c_reentered.store(true);  // with a real mutex: deadlock
    at->c_started.store(true);
    at->c_done.store(true);
}

struct Tally {
    int counted = 0;  // attempts in which b was stolen
    int reentered = 0;
};

Tally attempts(bool isolated, int n) {
    Pool pool(2);
    Tally tally;
    for (int i = 0; i < n; ++i) {
        Attempt at;
        at.pool = pool;
        at.isolated = isolated;
        std::this_thread::sleep_for(milliseconds(2));  // both workers idle: one asks to steal
        blz_task *t = nullptr;
        REQUIRE(blz_spawn(pool, task_t, &at, &t) == BLZ_OK);
        const bool stolen = eventually([&] { return at.b_stolen.load() || at.t_thread.load() != std::thread::id{}; });
        REQUIRE(stolen);
        // Queue C once b runs elsewhere (or T ended without a steal).
        (void)spin_until([&] { return at.b_stolen.load(); }, milliseconds(100));
        blz_task *c = nullptr;
        REQUIRE(blz_spawn(pool, task_c, &at, &c) == BLZ_OK);
        at.c_queued.store(true);
        REQUIRE(blz_join(t) == BLZ_OK);
        REQUIRE(blz_join(c) == BLZ_OK);
        CHECK(at.c_done.load());
        CHECK(at.status.load() == BLZ_OK);
        if (at.b_stolen.load()) ++tally.counted;
        if (at.c_reentered.load()) ++tally.reentered;
    }
    return tally;
}

}  // namespace

TEST_CASE("without isolation a join inside a locked section runs a task that takes the same lock (rayon#592)",
          "[isolate]") {
    Watchdog watchdog("rayon#592 without isolation", seconds(120));
    const Tally tally = attempts(false, 40);
    INFO("attempts with b stolen: " << tally.counted << ", re-entries: " << tally.reentered);
    REQUIRE(tally.counted > 0);
    CHECK(tally.reentered > 0);  // the deadlock's cause is real here
    WARN("without isolation: " << tally.reentered << " re-entries in " << tally.counted << " counted attempts");
}

TEST_CASE("with blz_isolate the join inside a locked section never runs the outside task", "[isolate]") {
    Watchdog watchdog("rayon#592 with isolation", seconds(120));
    const Tally tally = attempts(true, 40);
    INFO("attempts with b stolen: " << tally.counted << ", re-entries: " << tally.reentered);
    REQUIRE(tally.counted > 0);
    CHECK(tally.reentered == 0);
    WARN("with isolation: " << tally.reentered << " re-entries in " << tally.counted << " counted attempts");
}

namespace {

// A stolen half from inside a region, itself joining, must not run
// outside work while it waits. Three workers: R's worker forks (a, b),
// b is stolen by W1; b spawns task b2, which W2 takes, and joins it;
// while W2 holds b2, probes are queued from outside. R's worker and W1 both wait
// (isolated): a probe that runs on a thread inside the region is wrong.
thread_local int t_in_region = 0;

struct Nested {
    blz_pool *pool;
    std::atomic<std::thread::id> r_thread{};
    std::atomic<std::thread::id> b_thread{};
    std::atomic<bool> b_stolen{false};
    std::atomic<bool> b2_stolen{false};
    std::atomic<bool> probes_queued{false};
    std::atomic<blz_status> status{BLZ_OK};
};

struct Probe {
    std::atomic<int> ran{0};
    std::atomic<int> inside{0};  // ran on a thread inside the region
};

void nested_b2(void *arg) {
    auto *n = static_cast<Nested *>(arg);
    const auto me = std::this_thread::get_id();
    if (me == n->b_thread.load() || me == n->r_thread.load()) return;  // not stolen by a third worker
    ++t_in_region;
    n->b2_stolen.store(true);
    (void)spin_until([n] { return n->probes_queued.load(); }, milliseconds(1000));
    std::this_thread::sleep_for(milliseconds(20));  // the waiters' chance to misbehave
    --t_in_region;
}

void nested_b(void *arg) {
    auto *n = static_cast<Nested *>(arg);
    if (std::this_thread::get_id() == n->r_thread.load()) return;
    n->b_thread.store(std::this_thread::get_id());
    ++t_in_region;
    n->b_stolen.store(true);
    // A task spawned here is a shared post: it wakes the third worker,
    // which takes it; then this thread waits for it (blz_join).
    blz_task *b2 = nullptr;
    if (blz_spawn(n->pool, nested_b2, n, &b2) == BLZ_OK) {
        (void)spin_until([n] { return n->b2_stolen.load(); }, milliseconds(50));
        if (blz_join(b2) != BLZ_OK) n->status.store(BLZ_ETASK);
    } else {
        n->status.store(BLZ_ENOMEM);
    }
    --t_in_region;
}

void nested_a(void *arg) {
    auto *n = static_cast<Nested *>(arg);
    (void)spin_until([n] { return n->b_stolen.load(); }, milliseconds(50));
}

void nested_region(void *arg) {
    auto *n = static_cast<Nested *>(arg);
    ++t_in_region;
    blz_fork_join(n->pool, nested_a, n, nested_b, n);
    --t_in_region;
}

void nested_task(void *arg) {
    auto *n = static_cast<Nested *>(arg);
    n->r_thread.store(std::this_thread::get_id());
    n->status.store(blz_isolate(n->pool, nested_region, n));
}

void probe(void *arg) {
    auto *p = static_cast<Probe *>(arg);
    if (t_in_region != 0) p->inside.fetch_add(1);
    p->ran.fetch_add(1);
}

}  // namespace

TEST_CASE("a stolen half from inside a region that joins runs no outside work while it waits", "[isolate]") {
    Watchdog watchdog("stolen half waits isolated", seconds(120));
    Pool pool(3);
    int counted = 0;
    Probe probes;
    int queued = 0;
    for (int i = 0; i < 40; ++i) {
        Nested n;
        n.pool = pool;
        std::this_thread::sleep_for(milliseconds(2));
        blz_task *t = nullptr;
        REQUIRE(blz_spawn(pool, nested_task, &n, &t) == BLZ_OK);
        (void)spin_until([&] { return n.b2_stolen.load(); }, milliseconds(200));
        for (int k = 0; k < 4; ++k, ++queued) REQUIRE(blz_spawn(pool, probe, &probes, nullptr) == BLZ_OK);
        n.probes_queued.store(true);
        REQUIRE(blz_join(t) == BLZ_OK);
        CHECK(n.status.load() == BLZ_OK);
        if (n.b2_stolen.load()) ++counted;
    }
    REQUIRE(eventually([&] { return probes.ran.load() == queued; }));
    INFO("attempts with both halves stolen: " << counted);
    CHECK(counted > 0);
    CHECK(probes.inside.load() == 0);
    WARN("stolen-half case: " << counted << " of 40 attempts had both halves stolen");
}

namespace {

struct FibIso {
    blz_pool *pool;
    unsigned n;
    uint64_t result;
};

void fib_iso(void *arg) {
    auto *f = static_cast<FibIso *>(arg);
    blz_test::FibArgs args{f->pool, f->n, 0};
    blz_test::fib_task(&args);
    f->result = args.result;
}

void add_one(void *arg) { static_cast<std::atomic<int> *>(arg)->fetch_add(1); }
void add_one_each(void *arg, uint32_t) { static_cast<std::atomic<int> *>(arg)->fetch_add(1); }
void fails(void *) { blz_fail(); }
void throws(void *) { throw std::runtime_error("inside"); }

}  // namespace

TEST_CASE("work forked and spawned inside a region runs, from a worker and from outside", "[isolate]") {
    Watchdog watchdog("work inside a region", seconds(120));
    Pool pool(2);
    blz_pool *p = pool;
    for (int from_worker = 0; from_worker < 2; ++from_worker) {
        std::atomic<int> count{0};
        std::atomic<uint64_t> sum{0};
        FibIso f{p, 20, 0};
        auto body = [&] {
            fib_iso(&f);
            std::vector<blz_task *> tasks(16);
            for (auto &t : tasks) REQUIRE(blz_spawn(p, add_one, &count, &t) == BLZ_OK);
            for (auto *t : tasks) CHECK(blz_join(t) == BLZ_OK);
            blz_group *g = nullptr;
            REQUIRE(blz_group_create(p, &g) == BLZ_OK);
            for (int i = 0; i < 16; ++i) REQUIRE(blz_group_spawn(g, add_one, &count) == BLZ_OK);
            CHECK(blz_group_wait(g) == BLZ_OK);
            CHECK(blz_group_destroy(g) == BLZ_OK);
            auto range = [&](size_t lo, size_t hi) {
                for (size_t i = lo; i < hi; ++i) sum.fetch_add(i);
            };
            CHECK(blz_parallel_for(p, 0, 1000, 7, blz_test::range_thunk_of(range), &range) == BLZ_OK);
            CHECK(blz_call(p, add_one, &count) == BLZ_OK);
            // The caller's own share runs inline (its isolated wait runs no mail).
            CHECK(blz_broadcast(p, add_one_each, &count) == BLZ_OK);
        };
        if (from_worker != 0) {
            REQUIRE(blz_test::on_worker(p, [&] { CHECK(blz_isolate(p, thunk_of(body), &body) == BLZ_OK); }) == BLZ_OK);
        } else {
            REQUIRE(blz_isolate(p, thunk_of(body), &body) == BLZ_OK);
        }
        CHECK(f.result == 6765);
        CHECK(count.load() == 35);
        CHECK(sum.load() == 999 * 1000 / 2);
    }
}

TEST_CASE("regions nest, and failures come back as blz_call's do", "[isolate]") {
    Watchdog watchdog("nested regions and failures", seconds(60));
    Pool pool(2);
    blz_pool *p = pool;
    std::atomic<int> count{0};
    auto inner = [&] {
        FibIso f{p, 15, 0};
        CHECK(blz_isolate(p, fib_iso, &f) == BLZ_OK);
        CHECK(f.result == 610);
        count.fetch_add(1);
    };
    auto outer = [&] {
        blz_fork_join(p, thunk_of(inner), &inner, thunk_of(inner), &inner);
        CHECK(blz_isolate(p, thunk_of(inner), &inner) == BLZ_OK);
    };
    CHECK(blz_isolate(p, thunk_of(outer), &outer) == BLZ_OK);
    CHECK(count.load() == 3);

    CHECK(blz_isolate(p, fails, nullptr) == BLZ_ETASK);
    CHECK(blz_isolate(p, throws, nullptr) == BLZ_ETASK);
    blz_status in_worker[2] = {BLZ_OK, BLZ_OK};
    REQUIRE(blz_test::on_worker(p, [&] {
                in_worker[0] = blz_isolate(p, fails, nullptr);
                in_worker[1] = blz_isolate(p, throws, nullptr);
            }) == BLZ_OK);
    CHECK(in_worker[0] == BLZ_ETASK);
    CHECK(in_worker[1] == BLZ_ETASK);
    // A fork-join half that fails inside a region fails its join.
    auto forks_failure = [&] { CHECK(blz_fork_join(p, fails, nullptr, add_one, &count) == BLZ_ETASK); };
    CHECK(blz_isolate(p, thunk_of(forks_failure), &forks_failure) == BLZ_OK);
}

TEST_CASE("pool::isolate returns f's value and rethrows its exception", "[isolate]") {
    Watchdog watchdog("pool::isolate", seconds(60));
    blz::pool pool(2);
    CHECK(pool.isolate([] { return 42; }) == 42);
    CHECK_THROWS_WITH(pool.isolate([]() -> int { throw std::runtime_error("from inside"); }), "from inside");
    int value = 0;
    int &ref = pool.isolate([&]() -> int & { return value; });
    CHECK(&ref == &value);
    auto joined = pool.isolate([&] {
        auto [x, y] = pool.join([] { return 1; }, [] { return 2; });
        return x + y;
    });
    CHECK(joined == 3);
}

TEST_CASE("a bounded wait inside a region ends at its deadline", "[isolate]") {
    Watchdog watchdog("bounded wait inside a region", seconds(60));
    Pool pool(2);
    blz_pool *p = pool;
    blz_test::Gate gate;
    blz_test::OpenOnExit opener{gate};
    auto body = [&] {
        blz_task *t = nullptr;
        auto held = [&] { gate.pass(); };
        CHECK(blz_spawn(p, thunk_of(held), &held, &t) == BLZ_OK);
        // The task is ours to run, or another worker's: wait until it is held.
        CHECK(gate.wait_entered());
        CHECK(blz_task_wait_for(t, 20'000'000) == BLZ_ETIMEDOUT);
        gate.open.store(true);
        CHECK(blz_join(t) == BLZ_OK);
    };
    CHECK(blz_isolate(p, thunk_of(body), &body) == BLZ_OK);
}
