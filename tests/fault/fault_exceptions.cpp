// Exceptions where the work was stolen or is being torn down. The simple
// cases (a side of blz_fork_join throws inline, a task or a group task
// throws) are in tests/api_lifecycle.cpp; here the throwing code runs on a
// thief, or while the pool is destroyed:
//   - blz_fork_join whose b half is stolen for sure (a waits until another
//     worker runs b): a throws, b throws on the thief, both throw, none;
//     and the same one level down, inside a stolen half;
//   - a group task that throws inside its own fork-join on a thief;
//   - detached tasks that throw while blz_pool_destroy waits for them.
// Every call reports BLZ_ETASK exactly when something threw, both halves
// always run, and the pool keeps working.
#include <blitz.h>

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>

#include "support.hpp"

namespace {

using std::chrono::seconds;

// One fork-join whose b is stolen: a records its worker, waits (at most
// 10 s) until b runs on another worker, then both may throw.
struct StolenJoin {
    blz_pool *pool = nullptr;
    bool a_throws = false, b_throws = false;
    std::atomic<int> a_worker{-1}, b_worker{-1};
    std::atomic<bool> b_started{false};
    std::atomic<int> a_done{0}, b_done{0};
    blz_status status = 99;
};

void half_a(void *arg) {
    auto *j = static_cast<StolenJoin *>(arg);
    j->a_worker.store(blz_worker_index(j->pool));
    // b is the oldest job of this worker's deque, so it is public: the
    // other worker takes it (docs/protocol.md, the split deque).
    auto deadline = std::chrono::steady_clock::now() + seconds(10);
    while (!j->b_started.load() && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
    j->a_done.fetch_add(1);
    if (j->a_throws) throw std::runtime_error("a");
}

void half_b(void *arg) {
    auto *j = static_cast<StolenJoin *>(arg);
    j->b_worker.store(blz_worker_index(j->pool));
    j->b_started.store(true);
    j->b_done.fetch_add(1);
    if (j->b_throws) throw 42;
}

void run_stolen_join(void *arg) {
    auto *j = static_cast<StolenJoin *>(arg);
    j->status = blz_fork_join(j->pool, half_a, j, half_b, j);
}

// The same join one level down: the outer b, stolen for sure, runs the
// inner join; its b is stolen back by the first worker, which waits for
// the outer b by running other jobs.
struct Nested {
    StolenJoin inner;
    std::atomic<bool> outer_b_started{false};
    std::atomic<int> outer_a_done{0};
    blz_status outer_status = 99;
};

void outer_a(void *arg) {
    auto *n = static_cast<Nested *>(arg);
    auto deadline = std::chrono::steady_clock::now() + seconds(10);
    while (!n->outer_b_started.load() && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
    n->outer_a_done.fetch_add(1);
}

void outer_b(void *arg) {
    auto *n = static_cast<Nested *>(arg);
    n->outer_b_started.store(true);
    run_stolen_join(&n->inner);
}

void run_nested(void *arg) {
    auto *n = static_cast<Nested *>(arg);
    n->outer_status = blz_fork_join(n->inner.pool, outer_a, n, outer_b, n);
}

std::atomic<int> g_thrown{0};
void throwing_task(void *) {
    g_thrown.fetch_add(1);
    throw std::logic_error("detached");
}

}  // namespace

TEST_CASE("fault: exceptions in a fork-join whose b half was stolen", "[fault][exceptions]") {
    blz_test::Watchdog dog("stolen-join exceptions", seconds(300));
    blz_test::Pool pool(2);
    for (int round = 0; round < 50; ++round) {
        for (int mask = 0; mask < 4; ++mask) {
            StolenJoin j;
            j.pool = pool;
            j.a_throws = mask & 1;
            j.b_throws = mask & 2;
            INFO("round " << round << ", a throws " << j.a_throws << ", b throws " << j.b_throws);
            REQUIRE(blz_call(pool, run_stolen_join, &j) == BLZ_OK);  // the call itself did not throw
            CHECK(j.status == (mask != 0 ? BLZ_ETASK : BLZ_OK));
            CHECK(j.a_done.load() == 1);
            CHECK(j.b_done.load() == 1);
            CHECK(j.b_started.load());
            CHECK(j.b_worker.load() >= 0);
            CHECK(j.a_worker.load() != j.b_worker.load());  // b ran on the thief
        }
    }
    blz_stats stats = blz_test::stats_of(pool);
    CHECK(stats.steals >= 200);
}

TEST_CASE("fault: exceptions in a stolen join nested inside a stolen half", "[fault][exceptions]") {
    blz_test::Watchdog dog("nested stolen-join exceptions", seconds(300));
    blz_test::Pool pool(2);
    for (int mask = 0; mask < 4; ++mask) {
        Nested n;
        n.inner.pool = pool;
        n.inner.a_throws = mask & 1;
        n.inner.b_throws = mask & 2;
        INFO("inner a throws " << n.inner.a_throws << ", inner b throws " << n.inner.b_throws);
        REQUIRE(blz_call(pool, run_nested, &n) == BLZ_OK);
        CHECK(n.outer_status == BLZ_OK);  // the inner failure was reported to its own caller
        CHECK(n.inner.status == (mask != 0 ? BLZ_ETASK : BLZ_OK));
        CHECK(n.inner.a_done.load() == 1);
        CHECK(n.inner.b_done.load() == 1);
        CHECK(n.outer_a_done.load() == 1);
        CHECK(n.inner.a_worker.load() != n.inner.b_worker.load());  // the inner b was stolen too
    }
}

TEST_CASE("fault: a group task whose stolen fork-join throws", "[fault][exceptions]") {
    blz_test::Watchdog dog("group task with a throwing stolen join", seconds(300));
    blz_test::Pool pool(2);
    blz_group *group = nullptr;
    REQUIRE(blz_group_create(pool, &group) == BLZ_OK);
    // The task rethrows what its join reported: the group sees one failure.
    struct Task {
        StolenJoin join;
        static void run(void *arg) {
            auto *t = static_cast<Task *>(arg);
            run_stolen_join(&t->join);
            if (t->join.status != BLZ_OK) throw std::runtime_error("join failed");
        }
    } task;
    task.join.pool = pool;
    task.join.b_throws = true;
    REQUIRE(blz_group_spawn(group, &Task::run, &task) == BLZ_OK);
    CHECK(blz_group_wait(group) == BLZ_ETASK);
    CHECK(task.join.status == BLZ_ETASK);
    CHECK(task.join.a_done.load() == 1);
    CHECK(task.join.b_done.load() == 1);
    CHECK(blz_group_wait(group) == BLZ_OK);  // reported once
    CHECK(blz_group_destroy(group) == BLZ_OK);
}

TEST_CASE("fault: detached tasks that throw while the pool is destroyed", "[fault][exceptions]") {
    blz_test::Watchdog dog("throwing tasks during destroy", seconds(300));
    for (int round = 0; round < 20; ++round) {
        g_thrown.store(0);
        blz_pool *pool = nullptr;
        REQUIRE(blz_pool_create(nullptr, &pool) == BLZ_OK);
        constexpr int kTasks = 500;
        for (int i = 0; i < kTasks; ++i) REQUIRE(blz_spawn(pool, throwing_task, nullptr, nullptr) == BLZ_OK);
        CHECK(blz_pool_destroy(pool) == BLZ_OK);  // waits for all of them, failures and all
        CHECK(g_thrown.load() == kTasks);
    }
}
