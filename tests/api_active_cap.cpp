// The cap on active workers, from the contract in blitz.h (issue 18,
// part A): the cap of blz_pool_set_max_active counted inside jobs (at most
// n workers inside a job at once, with tasks and fork-join), and lifting it
// wakes the workers held back (a lost wake-up hangs, and the watchdog fails
// the test); a worker that cannot run jobs yet is not counted; destroy lifts
// the cap; bad input gives BLZ_EINVAL. No assertion depends on timing: waits
// are for states, under a watchdog.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <utility>
#include <vector>

#include "support.hpp"

namespace {

using blz_test::eventually;
using blz_test::Gate;
using blz_test::OpenOnExit;
using blz_test::Pool;
using blz_test::thunk_of;
using blz_test::wait_until_asleep;
using blz_test::Watchdog;
using std::chrono::milliseconds;
using std::chrono::seconds;

// Counts the workers inside a job at once. A worker is inside from its
// outermost job's start to that job's end: the jobs it runs while it waits
// in a join are counted as the same worker (the cap's definition).
struct ActiveCount {
    std::atomic<int> now{0};
    std::atomic<int> most{0};
    std::atomic<int> failed_calls{0};  // Catch's macros are for the test's own thread

    void enter() {
        if (depth++ != 0) return;
        const int n = now.fetch_add(1) + 1;
        int seen = most.load();
        while (n > seen && !most.compare_exchange_weak(seen, n)) {
        }
    }
    void leave() {
        if (--depth == 0) now.fetch_sub(1);
    }
    inline static thread_local int depth = 0;
};

struct CountedFib {
    blz_pool *pool;
    ActiveCount *count;
    unsigned n;
};

// Every fork-join half is a job: it counts itself in.
void counted_fib(void *arg) {
    auto *f = static_cast<CountedFib *>(arg);
    f->count->enter();
    if (f->n >= 2) {
        CountedFib a{f->pool, f->count, f->n - 1};
        CountedFib b{f->pool, f->count, f->n - 2};
        if (blz_fork_join(f->pool, counted_fib, &a, counted_fib, &b) != BLZ_OK) f->count->failed_calls.fetch_add(1);
    }
    std::this_thread::yield();  // let others overlap, if the cap allowed them
    f->count->leave();
}

// Spawns `tasks` tasks doing fork-join from outside, and waits for them.
void run_counted_tasks(blz_pool *pool, ActiveCount &count, int tasks) {
    blz_group *group = nullptr;
    REQUIRE(blz_group_create(pool, &group) == BLZ_OK);
    std::vector<CountedFib> args(static_cast<size_t>(tasks), CountedFib{pool, &count, 10});
    for (auto &a : args) REQUIRE(blz_group_spawn(group, counted_fib, &a) == BLZ_OK);
    REQUIRE(blz_group_destroy(group) == BLZ_OK);
    CHECK(count.failed_calls.load() == 0);
}

TEST_CASE("the cap holds: at most n workers run jobs at once, with tasks and fork-join", "[cap]") {
    Watchdog watchdog("the cap holds", seconds(300));
    const uint32_t workers = 4;
    Pool pool(workers);
    for (uint32_t cap : {1u, 2u, 3u}) {
        INFO("cap " << cap);
        REQUIRE(blz_pool_set_max_active(pool, cap) == BLZ_OK);
        // Every worker blocked: none can be between its check of the cap and a job.
        REQUIRE(wait_until_asleep(pool, milliseconds(60000)));
        ActiveCount count;
        run_counted_tasks(pool, count, 200);
        CHECK(count.most.load() <= static_cast<int>(cap));
        CHECK(count.most.load() >= 1);
        CHECK(count.now.load() == 0);
    }
    SECTION("0 lifts the cap: every worker may run again") {
        REQUIRE(blz_pool_set_max_active(pool, 0) == BLZ_OK);
        // Each of `workers` tasks waits until all of them run at once:
        // only an uncapped pool finishes this.
        std::atomic<uint32_t> arrived{0};
        auto meet = [&] {
            arrived.fetch_add(1);
            while (arrived.load() < workers) std::this_thread::yield();
        };
        blz_group *group = nullptr;
        REQUIRE(blz_group_create(pool, &group) == BLZ_OK);
        for (uint32_t i = 0; i < workers; ++i) REQUIRE(blz_group_spawn(group, thunk_of(meet), &meet) == BLZ_OK);
        CHECK(blz_group_destroy(group) == BLZ_OK);
    }
}

TEST_CASE("lowering the cap takes effect as running jobs finish", "[cap]") {
    Watchdog watchdog("lowering the cap", seconds(120));
    const uint32_t workers = 3;
    Pool pool(workers);
    // Every worker inside a job, held at a gate.
    Gate gate;
    OpenOnExit open{gate};
    blz_group *group = nullptr;
    REQUIRE(blz_group_create(pool, &group) == BLZ_OK);
    for (uint32_t i = 0; i < workers; ++i) REQUIRE(blz_group_spawn(group, blz_test::gate_fn, &gate) == BLZ_OK);
    REQUIRE(gate.wait_entered(static_cast<int>(workers)));
    REQUIRE(blz_pool_set_max_active(pool, 1) == BLZ_OK);  // no running job is interrupted
    gate.release();
    REQUIRE(blz_group_destroy(group) == BLZ_OK);
    // Each worker finished its job after the cap was set: from here on one runs at a time.
    ActiveCount count;
    run_counted_tasks(pool, count, 100);
    CHECK(count.most.load() == 1);
}

TEST_CASE("lifting the cap wakes the workers held back", "[cap]") {
    Watchdog watchdog("lifting the cap", seconds(120));
    const uint32_t workers = 3;
    Pool pool(workers);
    REQUIRE(blz_pool_set_max_active(pool, 1) == BLZ_OK);
    REQUIRE(wait_until_asleep(pool, milliseconds(60000)));
    // The only active worker takes a task that waits for a second one to
    // run at the same time: under the cap the second stays queued.
    std::atomic<int> started{0};
    auto pair = [&] {
        started.fetch_add(1);
        while (started.load() < 2) std::this_thread::yield();
    };
    blz_group *group = nullptr;
    REQUIRE(blz_group_create(pool, &group) == BLZ_OK);
    REQUIRE(blz_group_spawn(group, thunk_of(pair), &pair) == BLZ_OK);
    REQUIRE(eventually([&] { return started.load() == 1; }));
    REQUIRE(blz_group_spawn(group, thunk_of(pair), &pair) == BLZ_OK);
    // The second task is queued, the other workers sit out the cap:
    // blocked (sleeping_now counts them), with one worker busy.
    REQUIRE(wait_until_asleep(pool, milliseconds(60000), 1));
    CHECK(started.load() == 1);
    SECTION("lifted with 0") { REQUIRE(blz_pool_set_max_active(pool, 0) == BLZ_OK); }
    SECTION("raised to 2") { REQUIRE(blz_pool_set_max_active(pool, 2) == BLZ_OK); }
    SECTION("raised from one of the pool's own workers") {
        std::atomic<int> raised{0};
        auto raise = [&] { raised += blz_pool_set_max_active(pool, workers) == BLZ_OK; };
        // blz_broadcast is not capped: every worker runs it, even those held back.
        REQUIRE(blz_broadcast(pool, [](void *f, uint32_t) { (*static_cast<decltype(raise) *>(f))(); }, &raise) ==
                BLZ_OK);
        CHECK(raised.load() == static_cast<int>(workers));
    }
    // A lost wake-up leaves the second task queued for ever: the watchdog fails the test.
    CHECK(blz_group_destroy(group) == BLZ_OK);
    CHECK(started.load() == 2);
}

TEST_CASE("a capped pool runs broadcasts on every worker and is destroyed cleanly", "[cap]") {
    Watchdog watchdog("capped broadcast and destroy", seconds(120));
    const uint32_t workers = 3;
    Pool pool(workers);
    REQUIRE(blz_pool_set_max_active(pool, 1) == BLZ_OK);
    ActiveCount count;
    run_counted_tasks(pool, count, 20);  // the other workers come between jobs and sit out
    REQUIRE(wait_until_asleep(pool, milliseconds(60000)));
    std::atomic<uint32_t> calls{0};
    auto call = [&] { calls.fetch_add(1); };
    REQUIRE(blz_broadcast(pool, [](void *f, uint32_t) { (*static_cast<decltype(call) *>(f))(); }, &call) == BLZ_OK);
    CHECK(calls.load() == workers);
    CHECK(pool.destroy() == BLZ_OK);  // parked workers end too
}

TEST_CASE("blz_pool_set_max_active refuses bad input", "[cap][bad_input]") {
    CHECK(blz_pool_set_max_active(nullptr, 1) == BLZ_EINVAL);
    CHECK(blz_pool_set_max_active(nullptr, 0) == BLZ_EINVAL);
    Pool pool(2);
    CHECK(blz_pool_set_max_active(pool, 1000000) == BLZ_OK);  // above the pool's size: no cap
    CHECK(blz_pool_set_max_active(pool, 0) == BLZ_OK);
}

// The cap counts only workers that can run jobs: a worker still in its
// start hook, or one whose embedder has not called run() yet, is not one
// of the n. With cap 1, the one running worker must take the task.

namespace {

struct HeldRun {
    std::vector<std::pair<blz_fn, void *>> runs;
    static int spawn(void *user, uint32_t index, blz_fn run, void *run_arg) {
        auto *self = static_cast<HeldRun *>(user);
        if (index == 0) {
            std::thread(run, run_arg).detach();  // worker 0 runs at once; the pool outlives it (destroy waits)
        } else {
            self->runs.emplace_back(run, run_arg);
        }
        return 0;
    }
};

void gate_in_hook(void *gate, uint32_t index) {
    if (index == 1) static_cast<Gate *>(gate)->pass();
}

constexpr uint64_t kPatientNs = 5'000'000'000;  // far longer than any task here needs

// With the cap at 1 and one of the pool's two workers unable to run jobs
// yet, a spawned task runs at once on the other (bounded wait OK); then
// `let_other_go` releases the held worker, and a task that timed out is
// joined, so that the check fails without hanging.
template <class LetOtherGo>
void spawn_under_cap_of_one(blz_pool *pool, LetOtherGo let_other_go) {
    REQUIRE(blz_pool_set_max_active(pool, 1) == BLZ_OK);
    std::atomic<int> ran{0};
    blz_task *task = nullptr;
    REQUIRE(blz_spawn(pool, blz_test::count_into, &ran, &task) == BLZ_OK);
    const blz_status waited = blz_task_wait_for(task, kPatientNs);
    CHECK(waited == BLZ_OK);
    let_other_go();
    if (waited == BLZ_ETIMEDOUT) CHECK(blz_join(task) == BLZ_OK);
    CHECK(ran.load() == 1);
}

}  // namespace

TEST_CASE("the cap does not count a worker whose embedder has not called run() yet", "[cap]") {
    Watchdog watchdog("cap with a late run()", seconds(120));
    HeldRun held;
    blz_pool_config config;
    blz_pool_config_init(&config);
    config.num_threads = 2;
    config.spawn_thread = &HeldRun::spawn;
    config.spawn_user = &held;
    blz_pool *pool = nullptr;
    REQUIRE(blz_pool_create(&config, &pool) == BLZ_OK);
    std::thread late;
    spawn_under_cap_of_one(pool, [&] { late = std::thread(held.runs.at(0).first, held.runs.at(0).second); });
    CHECK(blz_pool_destroy(pool) == BLZ_OK);
    late.join();
}

TEST_CASE("the cap does not count a worker still in its start hook", "[cap]") {
    Watchdog watchdog("cap with a slow start hook", seconds(120));
    Gate gate;
    OpenOnExit open{gate};
    blz_pool_config config;
    blz_pool_config_init(&config);
    config.num_threads = 2;
    config.on_thread_start = gate_in_hook;
    config.user = &gate;
    blz_pool *pool = nullptr;
    REQUIRE(blz_pool_create(&config, &pool) == BLZ_OK);
    REQUIRE(gate.wait_entered());
    spawn_under_cap_of_one(pool, [&] { gate.release(); });
    CHECK(blz_pool_destroy(pool) == BLZ_OK);
}

// Destroy lifts the cap (blitz.h): the queued work drains on every
// worker, and a task that waits outside the runtime for work it queued
// does not keep destroy from returning.

namespace {

// Two tasks that each wait (at most kPatientNs) for the other to run at
// the same time: under cap 1 they cannot, until destroy lifts the cap.
struct Meeting {
    std::atomic<int> arrived{0};
    std::atomic<int> met{0};
    static void task(void *self) {
        auto *m = static_cast<Meeting *>(self);
        m->arrived.fetch_add(1);
        const bool both = eventually([m] { return m->arrived.load() >= 2; }, seconds(kPatientNs / 1'000'000'000));
        if (both) m->met.fetch_add(1);
    }
};

// A task that spawns a child into its own pool and waits for it outside
// the runtime (a spin, not a join): under cap 1 the child can only run on
// another worker, once destroy lifted the cap.
struct WaitsForChild {
    blz_pool *pool = nullptr;
    std::atomic<bool> child_ran{false};
    std::atomic<int> outcome{0};  // 1: the child ran in time, -1: it did not
    static void child(void *self) { static_cast<WaitsForChild *>(self)->child_ran.store(true); }
    static void task(void *self) {
        auto *w = static_cast<WaitsForChild *>(self);
        if (blz_spawn(w->pool, &WaitsForChild::child, w, nullptr) != BLZ_OK) {
            w->outcome.store(-2);
            return;
        }
        const bool ran = eventually([w] { return w->child_ran.load(); }, seconds(kPatientNs / 1'000'000'000));
        w->outcome.store(ran ? 1 : -1);
    }
};

}  // namespace

TEST_CASE("destroy lifts the cap: queued tasks drain on every worker", "[cap]") {
    Watchdog watchdog("destroy lifts the cap", seconds(120));
    Pool pool(4);
    REQUIRE(blz_pool_set_max_active(pool, 1) == BLZ_OK);
    REQUIRE(wait_until_asleep(pool, milliseconds(60000)));
    Meeting meeting;
    REQUIRE(blz_spawn(pool, &Meeting::task, &meeting, nullptr) == BLZ_OK);
    REQUIRE(blz_spawn(pool, &Meeting::task, &meeting, nullptr) == BLZ_OK);
    REQUIRE(eventually([&] { return meeting.arrived.load() >= 1; }));
    CHECK(pool.destroy() == BLZ_OK);
    CHECK(meeting.met.load() == 2);
}

TEST_CASE("destroy lifts the cap: a task waiting outside the runtime for its child lets destroy return",
          "[cap]") {
    Watchdog watchdog("destroy lifts the cap for a waiting task", seconds(120));
    Pool pool(2);
    REQUIRE(blz_pool_set_max_active(pool, 1) == BLZ_OK);
    REQUIRE(wait_until_asleep(pool, milliseconds(60000)));  // one worker sits out the cap
    WaitsForChild waits;
    waits.pool = pool;
    REQUIRE(blz_spawn(pool, &WaitsForChild::task, &waits, nullptr) == BLZ_OK);
    CHECK(pool.destroy() == BLZ_OK);
    CHECK(waits.outcome.load() == 1);
}

}  // namespace
