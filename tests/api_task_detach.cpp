// Detached tasks, from the contract in blitz.h: blz_task_detach (of a
// task held, finished, racing its end, still queued when blz_pool_destroy
// starts, or of itself), and a second thread that detaches, joins or waits
// for a task another thread waits for. The records of tasks it shares with
// api_on_done.cpp are in task_records.hpp.
//
// Code on workers and helper threads only records (atomics); the test
// thread asserts afterwards. Interleavings are held open by gates, never by
// sleeps; the few sleeps below only give a wrong implementation the time to
// show itself, and timeouts are generous upper bounds. Every case runs
// under a watchdog.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <thread>

#include "support.hpp"
#include "task_records.hpp"

namespace {

using blz_test::kSanitized;
using blz_test::kForever;
using blz_test::kMinute;
using blz_test::Pool;
using blz_test::eventually;
using blz_test::Gate;
using blz_test::gate_fn;
using blz_test::OpenOnExit;
using blz_test::count_into;
using blz_test::stats_of;
using blz_test::Watchdog;
using blz_test::Ending;
using blz_test::status_of;
using blz_test::Rec;
using blz_test::rec_fn;
using blz_test::options_for;
using blz_test::check_rec;
using blz_test::Tally;
using blz_test::tally_fn;
using blz_test::tally_options;
using blz_test::settled_tasks_failed;
using blz_test::Slot;
using blz_test::slot_fn;
using blz_test::slot_options;
using blz_test::Waiter;
using blz_test::name_of;
using std::chrono::milliseconds;
using std::chrono::seconds;


}  // namespace

TEST_CASE("blz_task_detach(NULL) returns EINVAL", "[api][v02][detach]") {
    CHECK(blz_task_detach(nullptr) == BLZ_EINVAL);
}

TEST_CASE("a detached task still runs and calls its on_done", "[api][v02][detach]") {
    Watchdog watchdog("detach while held", seconds(60));
    Pool pool(2);
    const Ending ending = GENERATE(Ending::kOk, Ending::kThrow, Ending::kFail);
    INFO("ending " << static_cast<int>(ending));
    const uint64_t failed = stats_of(pool).tasks_failed;
    Gate gate;
    OpenOnExit open_on_exit{gate};
    Rec r;
    r.pool = pool;
    r.gate = &gate;
    r.ending = ending;
    blz_spawn_options opts = options_for(r);
    blz_task *task = nullptr;
    REQUIRE(blz_spawn_ex(pool, rec_fn, &r, &opts, &task) == BLZ_OK);
    REQUIRE(gate.wait_entered());
    CHECK(blz_task_detach(task) == BLZ_OK);
    CHECK(r.done_calls.load() == 0);
    gate.release();
    REQUIRE(eventually([&] { return r.done_returned.load(); }));
    check_rec(r, status_of(ending), true);
    // A failure of a detached task is still counted.
    const uint64_t expected = failed + (ending == Ending::kOk ? 0 : 1);
    CHECK(settled_tasks_failed(pool, expected) == expected);

    // A handle from plain blz_spawn detaches the same way.
    std::atomic<int> ran{0};
    blz_task *plain = nullptr;
    REQUIRE(blz_spawn(pool, count_into, &ran, &plain) == BLZ_OK);
    CHECK(blz_task_detach(plain) == BLZ_OK);
    CHECK(eventually([&] { return ran.load() == 1; }));
}

TEST_CASE("blz_task_detach after the task finished, and racing its end", "[api][v02][detach]") {
    Watchdog watchdog("detach after finish", seconds(120));
    Pool pool(2);
    const int n = kSanitized ? 3000 : 20000;
    std::unique_ptr<Slot[]> slots(new Slot[static_cast<size_t>(n)]);
    int spawn_errors = 0, detach_errors = 0, finished_before = 0;
    for (int i = 0; i < n; ++i) {
        slots[i].pool = pool;
        blz_spawn_options opts = slot_options(slots[i]);
        blz_task *task = nullptr;
        if (blz_spawn_ex(pool, slot_fn, &slots[i], &opts, &task) != BLZ_OK) {
            ++spawn_errors;
            continue;
        }
        if (i % 2 == 0) {  // after on_done ran (the task may still be finishing)
            eventually([&] { return slots[i].done_calls.load() == 1; });
            ++finished_before;
        }
        if (blz_task_detach(task) != BLZ_OK) ++detach_errors;
    }
    CHECK(spawn_errors == 0);
    CHECK(detach_errors == 0);
    REQUIRE(eventually([&] {
        for (int i = 0; i < n; ++i) {
            if (slots[i].done_calls.load() == 0) return false;
        }
        return true;
    }));
    REQUIRE(blz_test::wait_until_asleep(pool, milliseconds(60000)));
    int not_once = 0, problems = 0;
    for (int i = 0; i < n; ++i) {
        if (slots[i].done_calls.load() != 1 || slots[i].fn_runs.load() != 1) ++not_once;
        if (slots[i].done_status.load() != BLZ_OK) ++not_once;
        problems += slots[i].problems.load();
    }
    CHECK(not_once == 0);
    CHECK(problems == 0);
    CHECK(finished_before == (n + 1) / 2);
}

TEST_CASE("detached tasks still queued when blz_pool_destroy starts: destroy waits for them and their on_done",
          "[api][v02][detach][destroy]") {
    Watchdog watchdog("detach then destroy", seconds(60));
    constexpr int kTasks = 200;
    blz_pool *pool = nullptr;
    blz_pool_config config;
    blz_pool_config_init(&config);
    config.num_threads = 1;
    REQUIRE(blz_pool_create(&config, &pool) == BLZ_OK);
    Gate gate;
    OpenOnExit open_on_exit{gate};
    blz_task *blocker = nullptr;
    REQUIRE(blz_spawn(pool, gate_fn, &gate, &blocker) == BLZ_OK);
    REQUIRE(gate.wait_entered());
    Tally tally;
    tally.pool = pool;
    blz_spawn_options opts = tally_options(tally);
    for (int i = 0; i < kTasks; ++i) {
        blz_task *task = nullptr;
        REQUIRE(blz_spawn_ex(pool, tally_fn, &tally, &opts, &task) == BLZ_OK);
        REQUIRE(blz_task_detach(task) == BLZ_OK);
    }
    CHECK(blz_task_detach(blocker) == BLZ_OK);  // even the running one
    blz_status destroy_status = 99;
    int done_at_return = -1;
    std::thread destroyer([&] {
        destroy_status = blz_pool_destroy(pool);
        done_at_return = tally.done.load();
    });
    // CHECK, not REQUIRE: the destroyer thread must still be joined.
    CHECK(eventually([&] {
        blz_stats stats;
        stats.struct_size = sizeof(stats);
        return blz_pool_stats(pool, &stats) == BLZ_ESHUTDOWN;
    }));
    gate.release();
    destroyer.join();
    CHECK(destroy_status == BLZ_OK);
    CHECK(done_at_return == kTasks);
    CHECK(tally.fn_runs.load() == kTasks);
    CHECK(tally.ok.load() == kTasks);
    CHECK(tally.off_worker.load() == 0);
}

namespace {

struct SelfDetach {
    Rec rec;
    std::atomic<blz_task *> handle{nullptr};
    std::atomic<blz_status> detached{99};
};
void self_detach_task(void *arg) {
    auto *s = static_cast<SelfDetach *>(arg);
    blz_task *me;
    while ((me = s->handle.load()) == nullptr) std::this_thread::yield();
    s->detached.store(blz_task_detach(me));
    rec_fn(&s->rec);
}

}  // namespace

TEST_CASE("a task detaches its own handle; it still ends and calls on_done", "[api][v02][detach]") {
    Watchdog watchdog("detach from inside", seconds(60));
    const int n = kSanitized ? 100 : 1000;
    Pool pool(2);
    std::unique_ptr<SelfDetach[]> tasks(new SelfDetach[static_cast<size_t>(n)]);
    for (int i = 0; i < n; ++i) {
        tasks[i].rec.pool = pool;
        tasks[i].rec.ending = i % 4 == 0 ? Ending::kFail : Ending::kOk;
        blz_spawn_options opts = options_for(tasks[i].rec);
        blz_task *task = nullptr;
        REQUIRE(blz_spawn_ex(pool, self_detach_task, &tasks[i], &opts, &task) == BLZ_OK);
        tasks[i].handle.store(task);  // not used here again
    }
    REQUIRE(eventually([&] {
        for (int i = 0; i < n; ++i) {
            if (!tasks[i].rec.done_returned.load()) return false;
        }
        return true;
    }));
    int bad_detach = 0, bad_done = 0;
    for (int i = 0; i < n; ++i) {
        bad_detach += tasks[i].detached.load() != BLZ_OK;
        bad_done += tasks[i].rec.done_calls.load() != 1 ||
                    tasks[i].rec.done_status.load() != status_of(tasks[i].rec.ending) ||
                    tasks[i].rec.done_before_fn_ended.load();
    }
    CHECK(bad_detach == 0);
    CHECK(bad_done == 0);
}

// A handle is used by one thread at a time. A second thread that detaches,
// joins or waits for a task another thread is waiting for is misuse; when
// libblitz sees the first waiter's latch in the task's word it refuses with
// BLZ_EINVAL and changes nothing (a join that went on would free the task
// under the first waiter: a double free).
enum class Intruder { kDetach, kJoin, kWaitFor };

const char *name_of(Intruder i) {
    switch (i) {
        case Intruder::kDetach: return "then blz_task_detach";
        case Intruder::kJoin: return "then blz_join";
        case Intruder::kWaitFor: return "then blz_task_wait_for(60 s)";
    }
    return "?";
}

blz_status intrude(Intruder intruder, blz_task *task) {
    switch (intruder) {
        case Intruder::kDetach: return blz_task_detach(task);
        case Intruder::kJoin: return blz_join(task);
        case Intruder::kWaitFor: return blz_task_wait_for(task, kMinute);
    }
    return 99;
}

TEST_CASE("a second thread that detaches or joins or waits for a task another thread waits for gets EINVAL",
          "[api][v02][detach]") {
    Watchdog watchdog("second caller while waited for", seconds(60));
    const Waiter waiter = GENERATE(Waiter::kJoin, Waiter::kWaitForever, Waiter::kWaitFor);
    const Intruder intruder = GENERATE(Intruder::kDetach, Intruder::kJoin, Intruder::kWaitFor);
    INFO(name_of(waiter) << ", " << name_of(intruder));
    Pool pool(2);
    blz_pool *p = pool;
    Gate gate;
    OpenOnExit open_on_exit{gate};
    Rec r;
    r.pool = pool;
    r.gate = &gate;
    blz_spawn_options opts = options_for(r);
    blz_task *task = nullptr;
    REQUIRE(blz_spawn_ex(pool, rec_fn, &r, &opts, &task) == BLZ_OK);
    REQUIRE(gate.wait_entered());  // one worker held by the task

    // The other worker waits for the task. Before it does, it puts a probe
    // into its own deque; the probe can only run inside that wait (the held
    // worker cannot steal it), so while the probe runs, the waiter is
    // provably waiting.
    struct Probe {
        blz_pool *pool;
        Gate gate;
        std::atomic<int32_t> worker{-2};
    } probe{p, {}, {-2}};
    OpenOnExit open_probe{probe.gate};
    auto probe_fn = [](void *arg) {
        auto *pr = static_cast<Probe *>(arg);
        pr->worker.store(blz_worker_index(pr->pool));
        pr->gate.pass();
    };
    struct WaiterCtx {
        blz_pool *pool;
        blz_task *task;
        Waiter waiter;
        blz_fn probe_fn;
        Probe *probe;
        std::atomic<int32_t> worker{-2};
        std::atomic<blz_status> spawned{99}, waited{99};
    } ctx{p, task, waiter, probe_fn, &probe, {-2}, {99}, {99}};
    auto waiter_fn = [](void *arg) {
        auto *c = static_cast<WaiterCtx *>(arg);
        c->worker.store(blz_worker_index(c->pool));
        c->spawned.store(blz_spawn(c->pool, c->probe_fn, c->probe, nullptr));
        blz_status status = 99;
        switch (c->waiter) {
            case Waiter::kJoin: status = blz_join(c->task); break;
            case Waiter::kWaitForever: status = blz_task_wait_for(c->task, kForever); break;
            default: status = blz_task_wait_for(c->task, kMinute); break;
        }
        c->waited.store(status);
    };
    blz_task *waiter_task = nullptr;
    REQUIRE(blz_spawn(pool, waiter_fn, &ctx, &waiter_task) == BLZ_OK);
    REQUIRE(probe.gate.wait_entered());
    CHECK(probe.worker.load() == ctx.worker.load());  // the probe runs inside the waiter's wait

    CHECK(intrude(intruder, task) == BLZ_EINVAL);

    probe.gate.release();
    gate.release();
    CHECK(blz_join(waiter_task) == BLZ_OK);
    CHECK(ctx.spawned.load() == BLZ_OK);
    CHECK(ctx.waited.load() == BLZ_OK);  // the refused call changed nothing
    check_rec(r, BLZ_OK, true);
}
