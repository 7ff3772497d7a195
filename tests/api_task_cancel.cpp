// Cancelling one task (blz_task_cancel) and the completion callback that
// runs once the task has finished (BLZ_SPAWN_DONE_AFTER_FINISH), from the
// contract in blitz.h. These two are what a binding needs to cancel a call
// and free its handle without a group per call.
//
// Interleavings are held open by gates: a 1-worker pool whose worker is
// held keeps a task queued; an on_done held at a gate keeps the "task
// finished, on_done still running" window open while the test frees the
// handle and the group (under ASan this is the lifetime check: on_done
// must not touch the freed task). Every case runs under a watchdog.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <thread>
#include <vector>

#include "support.hpp"
#include "task_records.hpp"

namespace {

using blz_test::HeldWorker;
using blz_test::Gate;
using blz_test::gate_fn;
using blz_test::OpenOnExit;
using blz_test::Pool;
using blz_test::Watchdog;
using blz_test::count_into;
using blz_test::eventually;
using blz_test::stats_of;
using std::chrono::seconds;

// What a task saw and what its on_done got.
struct Record {
    std::atomic<int> ran{0};
    std::atomic<int> done{0};
    std::atomic<blz_status> done_status{BLZ_EINVAL};
};

void record_fn(void *arg) { static_cast<Record *>(arg)->ran.fetch_add(1); }
void record_done(void *arg, blz_status status) {
    auto *r = static_cast<Record *>(arg);
    r->done_status.store(status);
    r->done.fetch_add(1);
}

blz_spawn_options options_for(Record &record, blz_group *group = nullptr, uint32_t flags = 0) {
    blz_spawn_options opts;
    blz_spawn_options_init(&opts);
    opts.flags = flags;
    opts.group = group;
    opts.on_done = record_done;
    opts.done_arg = &record;
    return opts;
}

}  // namespace

TEST_CASE("blz_task_cancel with NULL is BLZ_EINVAL", "[api][task][cancel]") {
    CHECK(blz_task_cancel(nullptr) == BLZ_EINVAL);
}

TEST_CASE("a cancelled task that has not started is skipped; the others run", "[api][task][cancel]") {
    Watchdog watchdog("task cancel before start", seconds(60));
    Pool pool(1);
    const uint64_t failed_before = stats_of(pool).tasks_failed;
    Record cancelled, kept;
    blz_task *cancelled_task = nullptr;
    blz_task *kept_task = nullptr;
    {
        HeldWorker held(pool);
        blz_spawn_options a = options_for(cancelled);
        blz_spawn_options b = options_for(kept);
        REQUIRE(blz_spawn_ex(pool, record_fn, &cancelled, &a, &cancelled_task) == BLZ_OK);
        REQUIRE(blz_spawn_ex(pool, record_fn, &kept, &b, &kept_task) == BLZ_OK);
        CHECK(blz_task_cancel(cancelled_task) == BLZ_OK);
        CHECK(blz_task_cancel(cancelled_task) == BLZ_OK);  // twice is once
    }
    CHECK(blz_join(cancelled_task) == BLZ_ECANCELED);
    CHECK(blz_join(kept_task) == BLZ_OK);
    CHECK(cancelled.ran.load() == 0);
    CHECK(cancelled.done.load() == 1);
    CHECK(cancelled.done_status.load() == BLZ_ECANCELED);
    CHECK(kept.ran.load() == 1);
    CHECK(kept.done_status.load() == BLZ_OK);
    CHECK(stats_of(pool).tasks_failed == failed_before);  // a cancel is no failure
}

TEST_CASE("a running task sees its cancel in blz_cancelled and its blz_parallel_for", "[api][task][cancel]") {
    Watchdog watchdog("task cancel while running", seconds(60));
    Pool pool(2);
    struct Running {
        blz_pool *pool;
        Gate started;
        int cancelled_before = -1, cancelled_after = -1;
        blz_status loop = BLZ_EINVAL;
        std::atomic<int> pieces{0};
    } running{pool.get(), {}, -1, -1, BLZ_EINVAL, {0}};
    auto body = [](void *arg) {
        auto *r = static_cast<Running *>(arg);
        r->cancelled_before = blz_cancelled();
        r->started.pass();  // the test cancels, then opens the gate
        r->cancelled_after = blz_cancelled();
        auto piece = [](void *p, size_t, size_t) { static_cast<Running *>(p)->pieces.fetch_add(1); };
        r->loop = blz_parallel_for(r->pool, 0, 1000, 1, piece, r);
    };
    blz_task *task = nullptr;
    REQUIRE(blz_spawn(pool, body, &running, &task) == BLZ_OK);
    OpenOnExit open{running.started};
    REQUIRE(running.started.wait_entered());
    REQUIRE(blz_task_cancel(task) == BLZ_OK);
    running.started.release();
    CHECK(blz_join(task) == BLZ_OK);  // not interrupted: its status is what fn made it
    CHECK(running.cancelled_before == 0);
    CHECK(running.cancelled_after == 1);
    CHECK(running.loop == BLZ_ECANCELED);
    CHECK(running.pieces.load() == 0);  // the cancel came before the loop's first piece
}

TEST_CASE("a task can cancel itself", "[api][task][cancel]") {
    Watchdog watchdog("task cancels itself", seconds(60));
    Pool pool(2);
    struct Self {
        blz_task *handle = nullptr;  // written by blz_spawn before the task can start
        int seen = -1;
    } self;
    auto body = [](void *arg) {
        auto *s = static_cast<Self *>(arg);
        blz_task_cancel(s->handle);
        s->seen = blz_cancelled();
    };
    REQUIRE(blz_spawn(pool, body, &self, &self.handle) == BLZ_OK);
    CHECK(blz_join(self.handle) == BLZ_OK);
    CHECK(self.seen == 1);
}

TEST_CASE("cancelling a finished task keeps its status", "[api][task][cancel]") {
    Watchdog watchdog("cancel after finish", seconds(60));
    Pool pool(1);
    Record record;
    blz_spawn_options opts = options_for(record);
    blz_task *task = nullptr;
    REQUIRE(blz_spawn_ex(pool, record_fn, &record, &opts, &task) == BLZ_OK);
    REQUIRE(eventually([&] { return record.done.load() == 1; }));
    // on_done has run; the task may still be finishing: the cancel reaches a live task either way.
    CHECK(blz_task_cancel(task) == BLZ_OK);
    CHECK(blz_join(task) == BLZ_OK);
    CHECK(record.ran.load() == 1);
}

TEST_CASE("a task's cancel leaves its group uncancelled; the group's wait reports the skip once",
          "[api][task][cancel][group]") {
    Watchdog watchdog("task cancel in a group", seconds(60));
    Pool pool(1);
    blz_group *group = nullptr;
    REQUIRE(blz_group_create(pool, &group) == BLZ_OK);
    Record skipped, sibling;
    blz_task *task = nullptr;
    {
        HeldWorker held(pool);
        blz_spawn_options a = options_for(skipped, group);
        blz_spawn_options b = options_for(sibling, group);
        REQUIRE(blz_spawn_ex(nullptr, record_fn, &skipped, &a, &task) == BLZ_OK);
        REQUIRE(blz_spawn_ex(nullptr, record_fn, &sibling, &b, nullptr) == BLZ_OK);
        REQUIRE(blz_task_cancel(task) == BLZ_OK);
        CHECK(blz_group_cancelled(group) == 0);
    }
    CHECK(blz_group_wait(group) == BLZ_ECANCELED);
    CHECK(blz_join(task) == BLZ_ECANCELED);
    CHECK(skipped.ran.load() == 0);
    CHECK(sibling.ran.load() == 1);
    CHECK(sibling.done_status.load() == BLZ_OK);
    // Reported once: the wait reset the group.
    REQUIRE(blz_group_spawn(group, record_fn, &sibling) == BLZ_OK);
    CHECK(blz_group_wait(group) == BLZ_OK);
    CHECK(blz_group_destroy(group) == BLZ_OK);
}

TEST_CASE("cancels racing with the start: each task either ran or was skipped, and says which",
          "[api][task][cancel]") {
    Watchdog watchdog("task cancel races", seconds(120));
    constexpr int kTasks = 2000;
    Pool pool(2);
    std::vector<Record> records(kTasks);
    std::vector<blz_task *> tasks(kTasks, nullptr);
    for (int i = 0; i < kTasks; ++i) {
        blz_spawn_options opts = options_for(records[i]);
        REQUIRE(blz_spawn_ex(pool, record_fn, &records[i], &opts, &tasks[i]) == BLZ_OK);
        if (i % 2 == 0) REQUIRE(blz_task_cancel(tasks[i]) == BLZ_OK);
    }
    int skipped = 0, bad = 0;
    for (int i = 0; i < kTasks; ++i) {
        const blz_status status = blz_join(tasks[i]);
        const Record &r = records[i];
        const bool consistent = r.done.load() == 1 && r.done_status.load() == status &&
                                (status == BLZ_OK ? r.ran.load() == 1 : status == BLZ_ECANCELED && r.ran.load() == 0) &&
                                (i % 2 == 0 || status == BLZ_OK);
        if (!consistent) ++bad;
        if (status == BLZ_ECANCELED) ++skipped;
    }
    CHECK(bad == 0);
    INFO("skipped " << skipped << " of " << kTasks / 2 << " cancelled");
    CHECK(skipped <= kTasks / 2);
}

// ---------------------------------------------------------------------------
// BLZ_SPAWN_DONE_AFTER_FINISH

TEST_CASE("BLZ_SPAWN_CANCEL_ON_FAILURE: the task's first failing piece stops its loop; without it every piece runs",
          "[api][task][cancel]") {
    Watchdog watchdog("task cancel on failure", seconds(60));
    // One worker: the loop's pieces run in order, so the failure at piece 10
    // comes before pieces 11..99 start.
    Pool pool(1);
    for (const bool fail_fast : {true, false}) {
        INFO("BLZ_SPAWN_CANCEL_ON_FAILURE: " << fail_fast);
        struct Loop {
            blz_pool *pool;
            std::atomic<int> pieces{0};
            blz_status loop = BLZ_EINVAL;
            int cancelled_after = -1;
        } loop{pool.get()};
        auto body = [](void *arg) {
            auto *l = static_cast<Loop *>(arg);
            auto piece = [](void *p, size_t lo, size_t) {
                static_cast<Loop *>(p)->pieces.fetch_add(1);
                if (lo == 10) blz_fail();
            };
            l->loop = blz_parallel_for(l->pool, 0, 100, 1, piece, l);
            l->cancelled_after = blz_cancelled();
        };
        blz_spawn_options opts;
        blz_spawn_options_init(&opts);
        opts.flags = fail_fast ? BLZ_SPAWN_CANCEL_ON_FAILURE : 0;
        blz_task *task = nullptr;
        REQUIRE(blz_spawn_ex(pool, body, &loop, &opts, &task) == BLZ_OK);
        CHECK(blz_join(task) == BLZ_OK);  // the loop's failure went to the task, which returned normally
        CHECK(loop.loop == BLZ_ETASK);
        CHECK(loop.pieces.load() == (fail_fast ? 11 : 100));
        CHECK(loop.cancelled_after == (fail_fast ? 1 : 0));
    }
}

TEST_CASE("spawn flags: BLZ_SPAWN_DONE_AFTER_FINISH is known, other new bits are not", "[api][task][on_done]") {
    Pool pool(1);
    Record record;
    blz_spawn_options opts = options_for(record, nullptr, BLZ_SPAWN_DONE_AFTER_FINISH | BLZ_SPAWN_HIGH_PRIORITY);
    blz_task *task = nullptr;
    REQUIRE(blz_spawn_ex(pool, record_fn, &record, &opts, &task) == BLZ_OK);
    CHECK(blz_join(task) == BLZ_OK);
    for (uint32_t flags : {16u, 32u, 0x80000000u}) {  // 8 is BLZ_SPAWN_AFTER_ANY_END (api_after.cpp)
        INFO("flags " << flags);
        opts.flags = flags;
        blz_task *untouched = blz_test::sentinel<blz_task>();
        CHECK(blz_spawn_ex(pool, record_fn, &record, &opts, &untouched) == BLZ_EINVAL);
        CHECK(untouched == blz_test::sentinel<blz_task>());
    }
}

namespace {

// An on_done that reports where it is and then waits at a gate.
struct HeldDone {
    blz_group *group = nullptr;
    Gate gate;
    std::atomic<blz_status> group_poll{BLZ_EINVAL};  // blz_group_wait_for(group, 0) from inside on_done
    std::atomic<int> cancelled_inside{-1};
    std::atomic<blz_status> status{BLZ_EINVAL};
    std::atomic<bool> returned{false};
};

void held_done(void *arg, blz_status status) {
    auto *h = static_cast<HeldDone *>(arg);
    h->status.store(status);
    h->cancelled_inside.store(blz_cancelled());
    if (h->group != nullptr) h->group_poll.store(blz_group_wait_for(h->group, 0));
    h->gate.pass();
    h->returned.store(true);
}

}  // namespace

TEST_CASE("without the flag, on_done runs before the task has left its group", "[api][task][on_done]") {
    Watchdog watchdog("on_done before finish", seconds(60));
    Pool pool(1);
    HeldDone held;
    OpenOnExit open{held.gate};
    REQUIRE(blz_group_create(pool, &held.group) == BLZ_OK);
    blz_spawn_options opts;
    blz_spawn_options_init(&opts);
    opts.group = held.group;
    opts.on_done = held_done;
    opts.done_arg = &held;
    std::atomic<int> ran{0};
    blz_task *task = nullptr;
    REQUIRE(blz_spawn_ex(nullptr, count_into, &ran, &opts, &task) == BLZ_OK);
    REQUIRE(held.gate.wait_entered());
    CHECK(held.group_poll.load() == BLZ_EDEADLK);            // it would wait for itself
    CHECK(blz_task_wait_for(task, 0) == BLZ_ETIMEDOUT);      // not finished while on_done runs
    CHECK(blz_group_wait_for(held.group, 0) == BLZ_ETIMEDOUT);
    held.gate.release();
    CHECK(blz_join(task) == BLZ_OK);
    CHECK(held.returned.load());  // a join returns after on_done
    CHECK(blz_group_destroy(held.group) == BLZ_OK);
}

TEST_CASE("with BLZ_SPAWN_DONE_AFTER_FINISH, the handle and the group can be freed while on_done runs",
          "[api][task][on_done][lifetime]") {
    Watchdog watchdog("on_done after finish", seconds(60));
    const uint64_t kPolls = 3;
    for (const bool cancel_it : {false, true}) {
        INFO("task cancelled while running: " << cancel_it);
        Pool pool(1);
        HeldDone held;
        OpenOnExit open{held.gate};
        REQUIRE(blz_group_create(pool, &held.group) == BLZ_OK);
        blz_spawn_options opts;
        blz_spawn_options_init(&opts);
        opts.flags = BLZ_SPAWN_DONE_AFTER_FINISH;
        opts.group = held.group;
        opts.on_done = held_done;
        opts.done_arg = &held;
        Gate body_gate;
        OpenOnExit open_body{body_gate};
        blz_task *task = nullptr;
        REQUIRE(blz_spawn_ex(nullptr, gate_fn, &body_gate, &opts, &task) == BLZ_OK);
        REQUIRE(body_gate.wait_entered());
        if (cancel_it) REQUIRE(blz_task_cancel(task) == BLZ_OK);
        body_gate.release();
        REQUIRE(held.gate.wait_entered());
        // The task has finished and left its group: on_done's own poll of the
        // group saw it empty, and from here nothing waits for on_done.
        CHECK(held.group_poll.load() == BLZ_OK);
        CHECK(held.cancelled_inside.load() == 0);  // on_done is no task's work
        blz_status joined = BLZ_ETIMEDOUT;
        for (uint64_t i = 0; i < kPolls && joined == BLZ_ETIMEDOUT; ++i) joined = blz_task_wait_for(task, 0);
        CHECK(joined == BLZ_OK);  // frees the task while on_done still runs
        CHECK(blz_group_destroy(held.group) == BLZ_OK);  // frees the group too
        CHECK_FALSE(held.returned.load());
        held.gate.release();
        CHECK(pool.destroy() == BLZ_OK);
        CHECK(held.returned.load());  // destroy waits for every on_done
        CHECK(held.status.load() == BLZ_OK);
    }
}

TEST_CASE("with BLZ_SPAWN_DONE_AFTER_FINISH, skipped, detached and failing tasks report as before",
          "[api][task][on_done]") {
    Watchdog watchdog("on_done after finish statuses", seconds(60));
    Pool pool(1);
    const uint64_t failed_before = stats_of(pool).tasks_failed;
    Record skipped, detached, failing;
    blz_task *skipped_task = nullptr;
    blz_task *failing_task = nullptr;
    auto fail_body = [](void *arg) {
        static_cast<Record *>(arg)->ran.fetch_add(1);
        blz_fail();
    };
    {
        HeldWorker held(pool);
        blz_spawn_options a = options_for(skipped, nullptr, BLZ_SPAWN_DONE_AFTER_FINISH);
        blz_spawn_options b = options_for(detached, nullptr, BLZ_SPAWN_DONE_AFTER_FINISH);
        blz_spawn_options c = options_for(failing, nullptr, BLZ_SPAWN_DONE_AFTER_FINISH);
        REQUIRE(blz_spawn_ex(pool, record_fn, &skipped, &a, &skipped_task) == BLZ_OK);
        REQUIRE(blz_spawn_ex(pool, record_fn, &detached, &b, nullptr) == BLZ_OK);
        REQUIRE(blz_spawn_ex(pool, fail_body, &failing, &c, &failing_task) == BLZ_OK);
        REQUIRE(blz_task_cancel(skipped_task) == BLZ_OK);
    }
    CHECK(blz_join(skipped_task) == BLZ_ECANCELED);
    CHECK(blz_join(failing_task) == BLZ_ETASK);
    REQUIRE(eventually([&] { return skipped.done.load() + detached.done.load() + failing.done.load() == 3; }));
    CHECK(skipped.ran.load() == 0);
    CHECK(skipped.done_status.load() == BLZ_ECANCELED);
    CHECK(detached.ran.load() == 1);
    CHECK(detached.done_status.load() == BLZ_OK);
    CHECK(failing.done_status.load() == BLZ_ETASK);
    CHECK(stats_of(pool).tasks_failed == failed_before + 1);
}

TEST_CASE("an exception from a late on_done is counted and changes no status", "[api][task][on_done]") {
    Watchdog watchdog("late on_done throws", seconds(60));
    Pool pool(1);
    const uint64_t failed_before = stats_of(pool).tasks_failed;
    std::atomic<int> ran{0};
    blz_spawn_options opts;
    blz_spawn_options_init(&opts);
    opts.flags = BLZ_SPAWN_DONE_AFTER_FINISH;
    opts.on_done = [](void *, blz_status) { throw std::runtime_error("late on_done"); };
    blz_task *task = nullptr;
    REQUIRE(blz_spawn_ex(pool, count_into, &ran, &opts, &task) == BLZ_OK);
    CHECK(blz_join(task) == BLZ_OK);  // may return before on_done ran
    CHECK(eventually([&] { return stats_of(pool).tasks_failed == failed_before + 1; }));
    CHECK(ran.load() == 1);
}
