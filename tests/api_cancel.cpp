// 0.2 cancellation and failure, from the contract in blitz.h:
// blz_group_create_ex, blz_group_cancel (tasks not started are skipped,
// later spawns too, the wait reports BLZ_ECANCELED once and resets the
// group, BLZ_ETASK wins), blz_group_wait_for (0 and a timeout change
// nothing), BLZ_GROUP_CANCEL_ON_FAILURE, blz_cancelled() and
// blz_group_cancelled(), blz_parallel_for inside a group's task, and
// blz_fail in every kind of job.
//
// Code on workers and helper threads only records (atomics); the test
// thread asserts afterwards. Interleavings are held open by gates (a 1-thread
// pool whose worker is held keeps everything queued behind it); timeouts
// are generous upper bounds. Every case runs under a watchdog.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <thread>
#include <vector>

#include "support.hpp"
#include "task_records.hpp"

namespace {

using blz_test::HeldWorker;
using blz_test::settled_tasks_failed;
using blz_test::kSanitized;
using blz_test::kForever;
using blz_test::kMinute;
using blz_test::Pool;
using blz_test::thunk_of;
using blz_test::range_thunk_of;
using blz_test::on_worker;
using blz_test::eventually;
using blz_test::Gate;
using blz_test::gate_fn;
using blz_test::OpenOnExit;
using blz_test::count_into;
using blz_test::sentinel;
using blz_test::stats_of;
using blz_test::Watchdog;
using std::chrono::milliseconds;
using std::chrono::seconds;


// ---------------------------------------------------------------------------
// Helpers


void fail_fn(void *) { blz_fail(); }
void throw_fn(void *) { throw std::runtime_error("throw_fn"); }

// Counts many tasks and their on_done calls by status.
struct Tally {
    std::atomic<int> fn_runs{0};
    std::atomic<int> done{0};
    std::atomic<int> ok{0};
    std::atomic<int> failed{0};
    std::atomic<int> canceled{0};
    std::atomic<int> bad_status{0};
};
void tally_fn(void *arg) { static_cast<Tally *>(arg)->fn_runs.fetch_add(1); }
void tally_done(void *arg, blz_status status) {
    auto *t = static_cast<Tally *>(arg);
    switch (status) {
        case BLZ_OK: t->ok.fetch_add(1); break;
        case BLZ_ETASK: t->failed.fetch_add(1); break;
        case BLZ_ECANCELED: t->canceled.fetch_add(1); break;
        default: t->bad_status.fetch_add(1); break;
    }
    t->done.fetch_add(1);
}
blz_spawn_options tally_options(Tally &t, blz_group *group) {
    blz_spawn_options opts;
    blz_spawn_options_init(&opts);
    opts.group = group;
    opts.on_done = tally_done;
    opts.done_arg = &t;
    return opts;
}

// A group task that holds its worker in a gate, records what it sees
// afterwards, and ends as told.
enum class Ending { kOk, kThrow, kFail };
struct Holder {
    blz_group *group = nullptr;
    Gate gate;
    Ending ending = Ending::kOk;
    std::atomic<int32_t> cancelled_after_gate{-1};
    std::atomic<int32_t> group_cancelled_after_gate{-1};
    std::atomic<int32_t> cancelled_after_fail{-1};
    std::atomic<bool> ended{false};
};
void holder_fn(void *arg) {
    auto *h = static_cast<Holder *>(arg);
    h->gate.pass();
    h->cancelled_after_gate.store(blz_cancelled());
    h->group_cancelled_after_gate.store(blz_group_cancelled(h->group));
    h->ended.store(true);
    if (h->ending == Ending::kThrow) throw std::runtime_error("holder fails");
    if (h->ending == Ending::kFail) {
        blz_fail();
        h->cancelled_after_fail.store(blz_cancelled());
    }
}

// After a wait reported the group's cancel (or failure): the group is
// reset, new tasks run and the next wait is clean.
void check_group_reset(blz_group *group) {
    CHECK(blz_group_cancelled(group) == 0);
    CHECK(blz_group_wait(group) == BLZ_OK);  // reported once
    std::atomic<int> ran{0};
    for (int i = 0; i < 20; ++i) REQUIRE(blz_group_spawn(group, count_into, &ran) == BLZ_OK);
    CHECK(blz_group_wait(group) == BLZ_OK);
    CHECK(ran.load() == 20);
}

}  // namespace

// ===========================================================================
// Arguments

TEST_CASE("blz_group_create_ex takes 0 or BLZ_GROUP_CANCEL_ON_FAILURE, nothing else", "[api][v02][group]") {
    Watchdog watchdog("group_create_ex arguments", seconds(60));
    Pool pool(2);
    for (uint32_t flags : {0u, unsigned{BLZ_GROUP_CANCEL_ON_FAILURE}}) {
        INFO("flags " << flags);
        blz_group *group = nullptr;
        REQUIRE(blz_group_create_ex(pool, flags, &group) == BLZ_OK);
        REQUIRE(group != nullptr);
        CHECK(blz_group_cancelled(group) == 0);
        std::atomic<int> ran{0};
        for (int i = 0; i < 10; ++i) REQUIRE(blz_group_spawn(group, count_into, &ran) == BLZ_OK);
        CHECK(blz_group_destroy(group) == BLZ_OK);
        CHECK(ran.load() == 10);
    }
    blz_group *group = sentinel<blz_group>();
    for (uint32_t flags : {2u, 3u, 0x100u, 0x80000000u, ~0u}) {
        INFO("flags " << flags);
        CHECK(blz_group_create_ex(pool, flags, &group) == BLZ_EINVAL);
    }
    CHECK(blz_group_create_ex(nullptr, 0, &group) == BLZ_EINVAL);
    CHECK(blz_group_create_ex(pool, 0, nullptr) == BLZ_EINVAL);
    CHECK(group == sentinel<blz_group>());
}

TEST_CASE("group cancellation functions with NULL", "[api][v02][group]") {
    CHECK(blz_group_cancel(nullptr) == BLZ_EINVAL);
    CHECK(blz_group_cancelled(nullptr) == 0);
    CHECK(blz_group_wait_for(nullptr, 0) == BLZ_EINVAL);
    CHECK(blz_group_wait_for(nullptr, kForever) == BLZ_EINVAL);
}

// ===========================================================================
// blz_group_cancel

TEST_CASE("a cancel skips the group's tasks that have not started; the running one finishes",
          "[api][v02][group][cancel]") {
    Watchdog watchdog("cancel skips queued tasks", seconds(60));
    constexpr int kTally = 100, kPlain = 50, kHandles = 5;
    Pool pool(1);
    blz_group *group = nullptr;
    REQUIRE(blz_group_create(pool, &group) == BLZ_OK);
    Holder holder;
    holder.group = group;
    OpenOnExit open_on_exit{holder.gate};
    Tally running, queued;
    blz_spawn_options running_opts = tally_options(running, group);
    REQUIRE(blz_spawn_ex(nullptr, holder_fn, &holder, &running_opts, nullptr) == BLZ_OK);
    REQUIRE(holder.gate.wait_entered());  // the only worker runs the holder

    blz_spawn_options opts = tally_options(queued, group);
    for (int i = 0; i < kTally; ++i) REQUIRE(blz_spawn_ex(nullptr, tally_fn, &queued, &opts, nullptr) == BLZ_OK);
    std::atomic<int> plain_ran{0};
    for (int i = 0; i < kPlain; ++i) REQUIRE(blz_group_spawn(group, count_into, &plain_ran) == BLZ_OK);
    std::vector<blz_task *> handles(kHandles, nullptr);
    for (blz_task *&h : handles) REQUIRE(blz_spawn_ex(nullptr, tally_fn, &queued, &opts, &h) == BLZ_OK);

    CHECK(blz_group_cancelled(group) == 0);
    REQUIRE(blz_group_cancel(group) == BLZ_OK);
    CHECK(blz_group_cancelled(group) == 1);
    holder.gate.release();
    CHECK(blz_group_wait(group) == BLZ_ECANCELED);

    CHECK(holder.cancelled_after_gate.load() == 1);  // the running task sees its group cancelled
    CHECK(holder.group_cancelled_after_gate.load() == 1);
    CHECK(running.ok.load() == 1);                   // not interrupted, ended normally
    CHECK(queued.fn_runs.load() == 0);
    CHECK(plain_ran.load() == 0);
    CHECK(queued.canceled.load() == kTally + kHandles);
    CHECK(queued.done.load() == kTally + kHandles);
    CHECK(queued.bad_status.load() == 0);
    // Their handles report the cancel (join and bounded wait alike).
    for (size_t i = 0; i < handles.size(); ++i) {
        CHECK((i % 2 ? blz_join(handles[i]) : blz_task_wait_for(handles[i], kMinute)) == BLZ_ECANCELED);
    }
    check_group_reset(group);
    CHECK(blz_group_destroy(group) == BLZ_OK);
}

TEST_CASE("tasks spawned after the cancel are accepted and skipped until a wait resets the group",
          "[api][v02][group][cancel]") {
    Watchdog watchdog("spawns after cancel", seconds(60));
    Pool pool(2);
    blz_pool *p = pool;
    blz_group *group = nullptr;
    REQUIRE(blz_group_create(pool, &group) == BLZ_OK);
    REQUIRE(blz_group_cancel(group) == BLZ_OK);
    REQUIRE(blz_group_cancel(group) == BLZ_OK);  // twice is once
    CHECK(blz_group_cancelled(group) == 1);

    Tally tally;
    blz_spawn_options opts = tally_options(tally, group);
    std::atomic<int> plain_ran{0};
    blz_task *task = nullptr;
    CHECK(blz_spawn_ex(nullptr, tally_fn, &tally, &opts, nullptr) == BLZ_OK);
    CHECK(blz_spawn_ex(p, tally_fn, &tally, &opts, &task) == BLZ_OK);
    CHECK(blz_group_spawn(group, count_into, &plain_ran) == BLZ_OK);
    // From a worker of the pool too (its own deque).
    blz_status from_worker[2] = {99, 99};
    REQUIRE(on_worker(p, [&] {
                from_worker[0] = blz_spawn_ex(nullptr, tally_fn, &tally, &opts, nullptr);
                from_worker[1] = blz_group_spawn(group, count_into, &plain_ran);
            }) == BLZ_OK);
    CHECK(from_worker[0] == BLZ_OK);
    CHECK(from_worker[1] == BLZ_OK);
    CHECK(blz_join(task) == BLZ_ECANCELED);
    CHECK(blz_group_wait(group) == BLZ_ECANCELED);  // once, though cancelled twice
    CHECK(tally.fn_runs.load() == 0);
    CHECK(plain_ran.load() == 0);
    CHECK(tally.canceled.load() == 3);
    check_group_reset(group);

    // A cancelled group that is destroyed reports the cancel and is freed.
    REQUIRE(blz_group_cancel(group) == BLZ_OK);
    CHECK(blz_spawn_ex(nullptr, tally_fn, &tally, &opts, nullptr) == BLZ_OK);
    CHECK(blz_group_destroy(group) == BLZ_ECANCELED);
    CHECK(tally.fn_runs.load() == 0);
    CHECK(tally.canceled.load() == 4);
}

TEST_CASE("a task of the group cancels its own group", "[api][v02][group][cancel]") {
    Watchdog watchdog("cancel from inside", seconds(60));
    Pool pool(1);
    blz_group *group = nullptr;
    REQUIRE(blz_group_create(pool, &group) == BLZ_OK);
    struct Ctx {
        blz_group *group;
        Tally *tally;
        std::atomic<int> spawn_errors{0};
        std::atomic<blz_status> cancel{99};
        std::atomic<int32_t> seen_before{-1}, seen_after{-1};
    };
    Tally tally;
    Ctx ctx{group, &tally};
    auto canceller = [](void *arg) {
        auto *c = static_cast<Ctx *>(arg);
        blz_spawn_options opts = tally_options(*c->tally, c->group);
        for (int i = 0; i < 50; ++i) {  // into this worker's deque, behind us
            if (blz_spawn_ex(nullptr, tally_fn, c->tally, &opts, nullptr) != BLZ_OK) c->spawn_errors.fetch_add(1);
        }
        c->seen_before.store(blz_cancelled());
        c->cancel.store(blz_group_cancel(c->group));
        c->seen_after.store(blz_cancelled());
    };
    REQUIRE(blz_group_spawn(group, canceller, &ctx) == BLZ_OK);
    CHECK(blz_group_wait(group) == BLZ_ECANCELED);
    CHECK(ctx.spawn_errors.load() == 0);
    CHECK(ctx.cancel.load() == BLZ_OK);
    CHECK(ctx.seen_before.load() == 0);
    CHECK(ctx.seen_after.load() == 1);
    CHECK(tally.fn_runs.load() == 0);
    CHECK(tally.canceled.load() == 50);
    check_group_reset(group);
    CHECK(blz_group_destroy(group) == BLZ_OK);
}

TEST_CASE("BLZ_ETASK wins over BLZ_ECANCELED, and the wait that reports it resets the cancel too",
          "[api][v02][group][cancel]") {
    Watchdog watchdog("ETASK wins", seconds(60));
    Pool pool(1);
    blz_group *group = nullptr;
    REQUIRE(blz_group_create(pool, &group) == BLZ_OK);
    Tally queued;
    blz_spawn_options opts = tally_options(queued, group);

    SECTION("a task failed, then the group was cancelled") {
        const bool by_throw = GENERATE(true, false);
        INFO((by_throw ? "the task threw" : "the task called blz_fail"));
        Tally failing;
        blz_spawn_options failing_opts = tally_options(failing, group);
        REQUIRE(blz_spawn_ex(nullptr, by_throw ? throw_fn : fail_fn, nullptr, &failing_opts, nullptr) == BLZ_OK);
        REQUIRE(eventually([&] { return failing.done.load() == 1; }));
        CHECK(failing.failed.load() == 1);
        CHECK(blz_group_cancelled(group) == 0);  // no fail-fast flag
        {
            HeldWorker held(pool);
            for (int i = 0; i < 10; ++i) REQUIRE(blz_spawn_ex(nullptr, tally_fn, &queued, &opts, nullptr) == BLZ_OK);
            REQUIRE(blz_group_cancel(group) == BLZ_OK);
        }
        CHECK(blz_group_wait(group) == BLZ_ETASK);
        CHECK(queued.canceled.load() == 10);
    }
    SECTION("the group was cancelled while a task ran; then that task failed") {
        const Ending ending = GENERATE(Ending::kThrow, Ending::kFail);
        Holder holder;
        holder.group = group;
        holder.ending = ending;
        OpenOnExit open_on_exit{holder.gate};
        REQUIRE(blz_group_spawn(group, holder_fn, &holder) == BLZ_OK);
        REQUIRE(holder.gate.wait_entered());
        for (int i = 0; i < 10; ++i) REQUIRE(blz_spawn_ex(nullptr, tally_fn, &queued, &opts, nullptr) == BLZ_OK);
        REQUIRE(blz_group_cancel(group) == BLZ_OK);
        holder.gate.release();
        CHECK(blz_group_wait(group) == BLZ_ETASK);
        CHECK(queued.canceled.load() == 10);
    }
    CHECK(queued.fn_runs.load() == 0);
    check_group_reset(group);
    CHECK(blz_group_destroy(group) == BLZ_OK);
}

TEST_CASE("blz_group_wait_for with 0 and with a timeout changes nothing; a later wait reports",
          "[api][v02][group][wait_for]") {
    Watchdog watchdog("group_wait_for", seconds(60));
    Pool pool(2);
    blz_pool *p = pool;
    blz_group *group = nullptr;
    REQUIRE(blz_group_create(pool, &group) == BLZ_OK);
    Holder holder;
    holder.group = group;
    OpenOnExit open_on_exit{holder.gate};
    REQUIRE(blz_group_spawn(group, holder_fn, &holder) == BLZ_OK);
    REQUIRE(holder.gate.wait_entered());
    const bool failure = GENERATE(true, false);
    INFO((failure ? "a task failed" : "the group is cancelled"));
    Tally pending;
    if (failure) {
        blz_spawn_options opts = tally_options(pending, group);
        REQUIRE(blz_spawn_ex(nullptr, fail_fn, nullptr, &opts, nullptr) == BLZ_OK);
        REQUIRE(eventually([&] { return pending.done.load() == 1; }));  // the other worker ran it
    } else {
        REQUIRE(blz_group_cancel(group) == BLZ_OK);
    }
    for (int round = 0; round < 3; ++round) {
        auto start = std::chrono::steady_clock::now();
        CHECK(blz_group_wait_for(group, 0) == BLZ_ETIMEDOUT);
        CHECK(std::chrono::steady_clock::now() - start < seconds(10));
        start = std::chrono::steady_clock::now();
        CHECK(blz_group_wait_for(group, 10 * 1000000) == BLZ_ETIMEDOUT);
        CHECK(std::chrono::steady_clock::now() - start >= milliseconds(5));
    }
    blz_status from_worker = 99;
    REQUIRE(on_worker(p, [&] { from_worker = blz_group_wait_for(group, 5 * 1000000); }) == BLZ_OK);
    CHECK(from_worker == BLZ_ETIMEDOUT);
    // Nothing was consumed or reset.
    CHECK(blz_group_cancelled(group) == (failure ? 0 : 1));
    if (!failure) {  // still cancelled: a new task is skipped
        Tally late;
        blz_spawn_options opts = tally_options(late, group);
        REQUIRE(blz_spawn_ex(nullptr, tally_fn, &late, &opts, nullptr) == BLZ_OK);
        REQUIRE(eventually([&] { return late.done.load() == 1; }));
        CHECK(late.canceled.load() == 1);
        CHECK(late.fn_runs.load() == 0);
    }
    holder.gate.release();
    SECTION("then blz_group_wait") { CHECK(blz_group_wait(group) == (failure ? BLZ_ETASK : BLZ_ECANCELED)); }
    SECTION("then polls until done") {
        blz_status status = BLZ_ETIMEDOUT;
        REQUIRE(eventually([&] { return (status = blz_group_wait_for(group, 0)) != BLZ_ETIMEDOUT; }));
        CHECK(status == (failure ? BLZ_ETASK : BLZ_ECANCELED));
    }
    SECTION("then blz_group_wait_for(UINT64_MAX)") {
        CHECK(blz_group_wait_for(group, kForever) == (failure ? BLZ_ETASK : BLZ_ECANCELED));
    }
    SECTION("then a long bounded wait") {
        CHECK(blz_group_wait_for(group, kMinute) == (failure ? BLZ_ETASK : BLZ_ECANCELED));
    }
    CHECK(blz_group_wait_for(group, 0) == BLZ_OK);  // empty and reset: a poll succeeds
    check_group_reset(group);
    CHECK(blz_group_destroy(group) == BLZ_OK);
}

TEST_CASE("blz_group_wait_for from inside the group's own task returns EDEADLK", "[api][v02][group][wait_for]") {
    Watchdog watchdog("group_wait_for self", seconds(60));
    Pool pool(2);
    blz_group *group = nullptr;
    REQUIRE(blz_group_create(pool, &group) == BLZ_OK);
    struct Ctx {
        blz_group *group;
        blz_status poll = 99, bounded = 99, forever = 99;
    } ctx{group};
    auto task = [](void *arg) {
        auto *c = static_cast<Ctx *>(arg);
        c->poll = blz_group_wait_for(c->group, 0);
        c->bounded = blz_group_wait_for(c->group, 1000000);
        c->forever = blz_group_wait_for(c->group, kForever);
    };
    REQUIRE(blz_group_spawn(group, task, &ctx) == BLZ_OK);
    CHECK(blz_group_wait(group) == BLZ_OK);
    CHECK(ctx.poll == BLZ_EDEADLK);
    CHECK(ctx.bounded == BLZ_EDEADLK);
    CHECK(ctx.forever == BLZ_EDEADLK);
    CHECK(blz_group_destroy(group) == BLZ_OK);
}

// ===========================================================================
// BLZ_GROUP_CANCEL_ON_FAILURE

TEST_CASE("BLZ_GROUP_CANCEL_ON_FAILURE: a failing task cancels the rest of the group at once",
          "[api][v02][group][fail_fast]") {
    Watchdog watchdog("cancel on failure", seconds(60));
    const Ending ending = GENERATE(Ending::kThrow, Ending::kFail);
    const bool fail_fast = GENERATE(true, false);
    INFO((ending == Ending::kThrow ? "the task throws" : "the task calls blz_fail")
         << (fail_fast ? ", BLZ_GROUP_CANCEL_ON_FAILURE" : ", no flag"));
    constexpr int kQueued = 100;
    Pool pool(1);
    blz_group *group = nullptr;
    REQUIRE(blz_group_create_ex(pool, fail_fast ? BLZ_GROUP_CANCEL_ON_FAILURE : 0u, &group) == BLZ_OK);
    Holder holder;
    holder.group = group;
    holder.ending = ending;
    OpenOnExit open_on_exit{holder.gate};
    Tally failing, queued;
    blz_spawn_options failing_opts = tally_options(failing, group);
    REQUIRE(blz_spawn_ex(nullptr, holder_fn, &holder, &failing_opts, nullptr) == BLZ_OK);
    REQUIRE(holder.gate.wait_entered());
    blz_spawn_options opts = tally_options(queued, group);
    for (int i = 0; i < kQueued; ++i) REQUIRE(blz_spawn_ex(nullptr, tally_fn, &queued, &opts, nullptr) == BLZ_OK);
    holder.gate.release();
    REQUIRE(eventually([&] { return failing.done.load() == 1; }));
    CHECK(failing.failed.load() == 1);
    CHECK(holder.cancelled_after_gate.load() == 0);
    if (ending == Ending::kFail) CHECK(holder.cancelled_after_fail.load() == (fail_fast ? 1 : 0));  // at once
    if (fail_fast) CHECK(blz_group_cancelled(group) == 1);  // until a wait reports it
    CHECK(blz_group_wait(group) == BLZ_ETASK);
    CHECK(queued.done.load() == kQueued);
    if (fail_fast) {
        CHECK(queued.fn_runs.load() == 0);
        CHECK(queued.canceled.load() == kQueued);
    } else {
        CHECK(queued.fn_runs.load() == kQueued);
        CHECK(queued.ok.load() == kQueued);
    }
    check_group_reset(group);
    CHECK(blz_group_destroy(group) == BLZ_OK);
}

namespace {

// A fork_join of two halves inside a group task; one half fails. With
// `steal`, the halves run on two workers (a waits until a thief runs b).
struct HalfFail {
    blz_pool *pool = nullptr;
    blz_group *group = nullptr;
    bool fail_b = false;  // else a fails
    bool fail_both = false;
    bool steal = false;
    std::atomic<std::thread::id> a_thread{}, b_thread{};
    std::atomic<bool> b_started{false};
    std::atomic<int> halves_ran{0};
    std::atomic<blz_status> fork_join{99};
    std::atomic<int32_t> cancelled_after{-1}, group_cancelled_after{-1};
    std::atomic<int32_t> cancelled_in_half{-1};  // right after the half's blz_fail
};
void half_a(void *arg) {
    auto *h = static_cast<HalfFail *>(arg);
    h->a_thread.store(std::this_thread::get_id());
    if (h->steal) eventually([&] { return h->b_started.load(); });
    h->halves_ran.fetch_add(1);
    if (!h->fail_b || h->fail_both) {
        blz_fail();
        h->cancelled_in_half.store(blz_cancelled());
    }
}
void half_b(void *arg) {
    auto *h = static_cast<HalfFail *>(arg);
    h->b_thread.store(std::this_thread::get_id());
    h->b_started.store(true);
    h->halves_ran.fetch_add(1);
    if (h->fail_b) {
        blz_fail();
        h->cancelled_in_half.store(blz_cancelled());
    }
}
void half_fail_task(void *arg) {
    auto *h = static_cast<HalfFail *>(arg);
    h->fork_join.store(blz_fork_join(h->pool, half_a, h, half_b, h));
    h->cancelled_after.store(blz_cancelled());
    h->group_cancelled_after.store(blz_group_cancelled(h->group));
}

}  // namespace

TEST_CASE("BLZ_GROUP_CANCEL_ON_FAILURE: a failing fork-join half of a group task cancels the group",
          "[api][v02][group][fail_fast]") {
    Watchdog watchdog("fail-fast from a fork-join half", seconds(60));
    const bool fail_b = GENERATE(false, true);
    const bool steal = GENERATE(false, true);
    INFO((fail_b ? "half b fails" : "half a fails") << (steal ? ", b stolen" : ", b inline"));
    Pool pool(steal ? 2 : 1);
    blz_group *group = nullptr;
    REQUIRE(blz_group_create_ex(pool, BLZ_GROUP_CANCEL_ON_FAILURE, &group) == BLZ_OK);
    HalfFail h;
    h.pool = pool;
    h.group = group;
    h.fail_b = fail_b;
    h.steal = steal;
    REQUIRE(blz_group_spawn(group, half_fail_task, &h) == BLZ_OK);
    const blz_status waited = blz_group_wait(group);
    CHECK(h.halves_ran.load() == 2);
    CHECK(h.fork_join.load() == BLZ_ETASK);
    CHECK((h.a_thread.load() != h.b_thread.load()) == steal);
    CHECK(h.cancelled_in_half.load() == 1);  // "cancelled at once"
    CHECK(h.cancelled_after.load() == 1);
    CHECK(h.group_cancelled_after.load() == 1);
    // The task itself returned normally; its group was cancelled by the
    // half's failure. The header does not say whether the group's wait
    // reports that failure (BLZ_ETASK) or only the cancel (BLZ_ECANCELED).
    INFO("blz_group_wait returned " << waited);
    CHECK((waited == BLZ_ETASK || waited == BLZ_ECANCELED));
    check_group_reset(group);
    CHECK(blz_group_destroy(group) == BLZ_OK);
}

// A failure in work that a fail-fast group's task waits for is a failure of
// the group's work (blitz.h): a blz_call or blz_broadcast it makes, into
// its own pool or another, cancels the group at once, while the call
// returns BLZ_ETASK to the task, which may go past it (then the task itself
// did not fail, and the wait reports BLZ_ECANCELED).

namespace {

enum class Via { kCallOwn, kCallOther, kBroadcastOwn, kBroadcastOther };

const char *name_of(Via via) {
    switch (via) {
        case Via::kCallOwn: return "blz_call into its own pool";
        case Via::kCallOther: return "blz_call into another pool";
        case Via::kBroadcastOwn: return "blz_broadcast on its own pool";
        case Via::kBroadcastOther: return "blz_broadcast on another pool";
    }
    return "?";
}

struct FailVia {
    blz_pool *own = nullptr;
    blz_pool *other = nullptr;
    blz_group *group = nullptr;
    Via via = Via::kCallOwn;
    std::atomic<blz_status> call{99};
    std::atomic<int32_t> cancelled_after{-9};

    static void fail_on_worker(void *, uint32_t) { blz_fail(); }
    static void task(void *arg) {
        auto *f = static_cast<FailVia *>(arg);
        blz_status status = 99;
        switch (f->via) {
            case Via::kCallOwn: status = blz_call(f->own, fail_fn, nullptr); break;
            case Via::kCallOther: status = blz_call(f->other, fail_fn, nullptr); break;
            case Via::kBroadcastOwn: status = blz_broadcast(f->own, &FailVia::fail_on_worker, nullptr); break;
            case Via::kBroadcastOther: status = blz_broadcast(f->other, &FailVia::fail_on_worker, nullptr); break;
        }
        f->call.store(status);
        f->cancelled_after.store(blz_group_cancelled(f->group));
    }
};

}  // namespace

TEST_CASE("BLZ_GROUP_CANCEL_ON_FAILURE: a failing blz_call or blz_broadcast made by a group task cancels the group",
          "[api][v02][group][fail_fast]") {
    Watchdog watchdog("fail-fast through calls", seconds(60));
    const Via via = GENERATE(Via::kCallOwn, Via::kCallOther, Via::kBroadcastOwn, Via::kBroadcastOther);
    INFO(name_of(via));
    Pool own(2);
    Pool other(2);
    FailVia f;
    f.own = own;
    f.other = other;
    f.via = via;
    REQUIRE(blz_group_create_ex(own, BLZ_GROUP_CANCEL_ON_FAILURE, &f.group) == BLZ_OK);
    REQUIRE(blz_group_spawn(f.group, &FailVia::task, &f) == BLZ_OK);
    CHECK(blz_group_wait(f.group) == BLZ_ECANCELED);
    CHECK(f.call.load() == BLZ_ETASK);
    CHECK(f.cancelled_after.load() == 1);
    CHECK(blz_group_destroy(f.group) == BLZ_OK);
}

// ===========================================================================
// A cancel racing spawns and starts

namespace {

struct RaceSlot {
    std::atomic<int> fn_runs{0};
    std::atomic<int> done_calls{0};
    std::atomic<int32_t> status{99};
    bool after_cancel = false;  // the spawner saw the cancel done before spawning
};
void race_fn(void *arg) { static_cast<RaceSlot *>(arg)->fn_runs.fetch_add(1); }
void race_done(void *arg, blz_status status) {
    auto *s = static_cast<RaceSlot *>(arg);
    s->status.store(status);
    s->done_calls.fetch_add(1);
}

}  // namespace

TEST_CASE("a cancel racing spawns from several threads: every task ran or was cancelled, exactly once",
          "[api][v02][group][cancel][race]") {
    Watchdog watchdog("cancel vs spawns", seconds(180));
    const int per_thread = kSanitized ? 1500 : 10000;
    const int rounds = kSanitized ? 3 : 5;
    constexpr int kSpawners = 3;  // two outside threads and one worker of the pool
    Pool pool(3);
    blz_pool *p = pool;
    blz_group *group = nullptr;
    REQUIRE(blz_group_create(pool, &group) == BLZ_OK);
    const int total = kSpawners * per_thread;
    for (int round = 0; round < rounds; ++round) {
        INFO("round " << round);
        std::unique_ptr<RaceSlot[]> slots(new RaceSlot[static_cast<size_t>(total)]);
        std::atomic<int> spawned{0}, spawn_errors{0};
        std::atomic<bool> cancel_done{false};
        auto spawner = [&](int t) {
            for (int i = 0; i < per_thread; ++i) {
                RaceSlot &s = slots[t * per_thread + i];
                s.after_cancel = cancel_done.load();
                blz_spawn_options opts;
                blz_spawn_options_init(&opts);
                opts.group = group;
                opts.on_done = race_done;
                opts.done_arg = &s;
                if (blz_spawn_ex(nullptr, race_fn, &s, &opts, nullptr) != BLZ_OK) spawn_errors.fetch_add(1);
                spawned.fetch_add(1);
            }
        };
        std::vector<std::thread> threads;
        threads.emplace_back([&] { spawner(0); });
        threads.emplace_back([&] { spawner(1); });
        threads.emplace_back([&] {
            if (on_worker(p, [&] { spawner(2); }) != BLZ_OK) spawn_errors.fetch_add(1000000);
        });
        threads.emplace_back([&] {
            const int trigger = total / 3 + round * total / 10;
            while (spawned.load() < trigger) std::this_thread::yield();
            if (blz_group_cancel(group) != BLZ_OK) spawn_errors.fetch_add(1000000);
            cancel_done.store(true);
        });
        for (auto &t : threads) t.join();
        const blz_status waited = blz_group_wait(group);
        CHECK(spawn_errors.load() == 0);
        CHECK(waited == BLZ_ECANCELED);
        int not_once = 0, ran_but_cancelled = 0, skipped_but_ok = 0, bad_status = 0, late_ran = 0;
        int ran = 0, cancelled = 0;
        for (int i = 0; i < total; ++i) {
            const RaceSlot &s = slots[i];
            if (s.done_calls.load() != 1) ++not_once;
            const int32_t st = s.status.load();
            if (st == BLZ_OK) {
                ++ran;
                if (s.fn_runs.load() != 1) ++skipped_but_ok;
            } else if (st == BLZ_ECANCELED) {
                ++cancelled;
                if (s.fn_runs.load() != 0) ++ran_but_cancelled;
            } else {
                ++bad_status;
            }
            if (s.after_cancel && st != BLZ_ECANCELED) ++late_ran;
        }
        INFO(ran << " ran, " << cancelled << " cancelled");
        CHECK(not_once == 0);
        CHECK(ran_but_cancelled == 0);
        CHECK(skipped_but_ok == 0);
        CHECK(bad_status == 0);
        CHECK(late_ran == 0);
        CHECK(ran + cancelled == total);
        // Reset: all of the next batch runs.
        CHECK(blz_group_cancelled(group) == 0);
        std::atomic<int> after{0};
        for (int i = 0; i < 100; ++i) REQUIRE(blz_group_spawn(group, count_into, &after) == BLZ_OK);
        CHECK(blz_group_wait(group) == BLZ_OK);
        CHECK(after.load() == 100);
    }
    CHECK(blz_group_destroy(group) == BLZ_OK);
}

// ===========================================================================
// blz_cancelled and blz_group_cancelled

namespace {

// What blz_cancelled() returns in each kind of work of a task; -1: not run.
struct Seen {
    std::atomic<int32_t> task{-1}, call{-1}, half_a{-1}, half_b{-1}, piece_min{2}, piece_max{-1};
    std::atomic<int> pieces{0};
};
void note_piece(Seen *s, int32_t v) {
    s->pieces.fetch_add(1);
    int32_t cur = s->piece_min.load();
    while (v < cur && !s->piece_min.compare_exchange_weak(cur, v)) {
    }
    cur = s->piece_max.load();
    while (v > cur && !s->piece_max.compare_exchange_weak(cur, v)) {
    }
}
struct SeenCtx {
    blz_pool *pool;
    Seen *seen;
};
void seen_call(void *arg) { static_cast<SeenCtx *>(arg)->seen->call.store(blz_cancelled()); }
void seen_a(void *arg) { static_cast<SeenCtx *>(arg)->seen->half_a.store(blz_cancelled()); }
void seen_b(void *arg) { static_cast<SeenCtx *>(arg)->seen->half_b.store(blz_cancelled()); }
void seen_piece(void *arg, size_t lo, size_t hi) {
    for (size_t i = lo; i < hi; ++i) note_piece(static_cast<SeenCtx *>(arg)->seen, blz_cancelled());
}
// Every kind of work, from inside a job of `pool`.
void seen_everywhere(void *arg) {
    auto *c = static_cast<SeenCtx *>(arg);
    c->seen->task.store(blz_cancelled());
    blz_call(c->pool, seen_call, c);
    blz_fork_join(c->pool, seen_a, c, seen_b, c);
    blz_parallel_for(c->pool, 0, 64, 1, seen_piece, c);
}
void check_seen_zero(const Seen &s) {
    CHECK(s.task.load() == 0);
    CHECK(s.call.load() == 0);
    CHECK(s.half_a.load() == 0);
    CHECK(s.half_b.load() == 0);
    CHECK(s.pieces.load() == 64);
    CHECK(s.piece_max.load() == 0);
}

}  // namespace

TEST_CASE("blz_cancelled is 0 outside tasks, in work with no group and in a group not cancelled",
          "[api][v02][cancelled]") {
    Watchdog watchdog("blz_cancelled 0", seconds(60));
    CHECK(blz_cancelled() == 0);  // the test thread runs no job
    Pool pool(2);
    blz_pool *p = pool;
    SECTION("blz_call from outside") {
        Seen seen;
        SeenCtx ctx{p, &seen};
        REQUIRE(blz_call(p, seen_everywhere, &ctx) == BLZ_OK);
        check_seen_zero(seen);
    }
    SECTION("a spawned task with no group") {
        Seen seen;
        SeenCtx ctx{p, &seen};
        blz_task *task = nullptr;
        REQUIRE(blz_spawn(p, seen_everywhere, &ctx, &task) == BLZ_OK);
        REQUIRE(blz_join(task) == BLZ_OK);
        check_seen_zero(seen);
    }
    SECTION("a task of a group that is not cancelled, while another group is") {
        blz_group *group = nullptr, *cancelled = nullptr;
        REQUIRE(blz_group_create(p, &group) == BLZ_OK);
        REQUIRE(blz_group_create(p, &cancelled) == BLZ_OK);
        REQUIRE(blz_group_cancel(cancelled) == BLZ_OK);
        Seen seen;
        SeenCtx ctx{p, &seen};
        REQUIRE(blz_group_spawn(group, seen_everywhere, &ctx) == BLZ_OK);
        CHECK(blz_group_wait(group) == BLZ_OK);
        check_seen_zero(seen);
        CHECK(blz_group_cancelled(group) == 0);
        CHECK(blz_group_cancelled(cancelled) == 1);
        CHECK(blz_group_destroy(group) == BLZ_OK);
        CHECK(blz_group_destroy(cancelled) == BLZ_ECANCELED);
    }
    SECTION("parallel_for pieces from outside the pool") {
        Seen seen;
        SeenCtx ctx{p, &seen};
        REQUIRE(blz_parallel_for(p, 0, 64, 1, seen_piece, &ctx) == BLZ_OK);
        CHECK(seen.pieces.load() == 64);
        CHECK(seen.piece_max.load() == 0);
    }
    SECTION("worker hooks") {
        static std::atomic<int32_t> in_hook{-1};
        in_hook.store(-1);
        blz_pool_config config;
        blz_pool_config_init(&config);
        config.num_threads = 1;
        config.on_thread_start = [](void *, uint32_t) { in_hook.store(blz_cancelled()); };
        blz_pool *hooked = nullptr;
        REQUIRE(blz_pool_create(&config, &hooked) == BLZ_OK);
        CHECK(blz_pool_destroy(hooked) == BLZ_OK);
        CHECK(in_hook.load() == 0);
    }
    CHECK(blz_cancelled() == 0);
}

namespace {

// A group task that runs every kind of work while its group is cancelled
// under it: it waits until the test cancelled, then looks.
struct CancelledWork {
    blz_pool *pool = nullptr;
    blz_pool *other = nullptr;  // for a blz_call into another pool; NULL: skip it
    blz_group *group = nullptr;
    Gate started;               // passed once the test may cancel: open = "cancelled"
    Seen seen;
    std::atomic<std::thread::id> a_thread{}, b_thread{};
    std::atomic<bool> b_running{false};
    std::atomic<int32_t> group_cancelled{-1}, other_call{-1};
    std::atomic<int32_t> stale{-1};  // a job of no group run inline by the task's wait
};

// Waits until blz_cancelled() is 1 ("seen soon, not at once"); returns what it saw last.
int32_t soon_cancelled() {
    int32_t v = 0;
    eventually([&] { return (v = blz_cancelled()) == 1; }, seconds(20));
    return v;
}

void cw_call(void *arg) { static_cast<CancelledWork *>(arg)->seen.call.store(soon_cancelled()); }
void cw_a(void *arg) {
    auto *w = static_cast<CancelledWork *>(arg);
    w->a_thread.store(std::this_thread::get_id());
    eventually([&] { return w->b_running.load(); }, seconds(20));  // b is on a thief
    w->seen.half_a.store(soon_cancelled());
}
void cw_b(void *arg) {
    auto *w = static_cast<CancelledWork *>(arg);
    w->b_thread.store(std::this_thread::get_id());
    w->b_running.store(true);
    w->seen.half_b.store(soon_cancelled());
}
void cw_other_call(void *arg) { static_cast<CancelledWork *>(arg)->other_call.store(soon_cancelled()); }
void cw_stale(void *arg) { static_cast<CancelledWork *>(arg)->stale.store(blz_cancelled()); }
void cw_task(void *arg) {
    auto *w = static_cast<CancelledWork *>(arg);
    w->started.pass();  // the test cancels the group, then opens
    w->seen.task.store(soon_cancelled());
    w->group_cancelled.store(blz_group_cancelled(w->group));
    blz_call(w->pool, cw_call, w);
    blz_fork_join(w->pool, cw_a, w, cw_b, w);
    if (w->other != nullptr) blz_call(w->other, cw_other_call, w);
    // A task with no group, joined from here: innermost, it is not cancelled.
    blz_task *plain = nullptr;
    if (blz_spawn(w->pool, cw_stale, w, &plain) == BLZ_OK) blz_join(plain);
}

}  // namespace

TEST_CASE("blz_cancelled is 1 in a task of a cancelled group, in its blz_call and in a half a thief runs",
          "[api][v02][cancelled]") {
    Watchdog watchdog("blz_cancelled 1", seconds(120));
    Pool pool(2);
    blz_group *group = nullptr;
    REQUIRE(blz_group_create(pool, &group) == BLZ_OK);
    CancelledWork w;
    w.pool = pool;
    w.group = group;
    OpenOnExit open_on_exit{w.started};
    REQUIRE(blz_group_spawn(group, cw_task, &w) == BLZ_OK);
    REQUIRE(w.started.wait_entered());
    REQUIRE(blz_group_cancel(group) == BLZ_OK);
    w.started.release();
    CHECK(blz_group_wait(group) == BLZ_ECANCELED);
    CHECK(w.seen.task.load() == 1);
    CHECK(w.group_cancelled.load() == 1);
    CHECK(w.seen.call.load() == 1);
    CHECK(w.a_thread.load() != w.b_thread.load());  // b ran on the other worker
    CHECK(w.seen.half_a.load() == 1);
    CHECK(w.seen.half_b.load() == 1);
    CHECK(w.stale.load() == 0);
    CHECK(blz_group_destroy(group) == BLZ_OK);
}

TEST_CASE("blz_cancelled is 1 in a blz_call that a cancelled group's task makes into another pool",
          "[api][v02][cancelled][cross_pool]") {
    // "the innermost task it works for (... a blz_call it made, even when
    // another worker runs them)": the other pool's worker works for the task.
    Watchdog watchdog("blz_cancelled across pools", seconds(120));
    Pool pool(2);
    Pool other(1);
    blz_group *group = nullptr;
    REQUIRE(blz_group_create(pool, &group) == BLZ_OK);
    CancelledWork w;
    w.pool = pool;
    w.other = other;
    w.group = group;
    OpenOnExit open_on_exit{w.started};
    REQUIRE(blz_group_spawn(group, cw_task, &w) == BLZ_OK);
    REQUIRE(w.started.wait_entered());
    REQUIRE(blz_group_cancel(group) == BLZ_OK);
    w.started.release();
    CHECK(blz_group_wait(group) == BLZ_ECANCELED);
    CHECK(w.other_call.load() == 1);
    CHECK(blz_group_destroy(group) == BLZ_OK);
}

TEST_CASE("blz_cancelled: a job of no group, or of a live group, run inside a cancelled task's wait sees 0",
          "[api][v02][cancelled]") {
    Watchdog watchdog("blz_cancelled innermost", seconds(60));
    Pool pool(1);  // everything runs on the one worker, nested in the task's waits
    blz_pool *p = pool;
    blz_group *cancelled = nullptr, *live = nullptr;
    REQUIRE(blz_group_create(pool, &cancelled) == BLZ_OK);
    REQUIRE(blz_group_create(pool, &live) == BLZ_OK);
    struct Ctx {
        blz_pool *pool;
        blz_group *live;
        std::atomic<int32_t> outer_before{-1}, plain{-1}, in_live{-1}, outer_after{-1}, next_job{-1};
        std::atomic<blz_status> cancel{99};
        blz_group *self = nullptr;
    } ctx{p, live};
    ctx.self = cancelled;
    auto outer = [](void *arg) {
        auto *c = static_cast<Ctx *>(arg);
        c->cancel.store(blz_group_cancel(c->self));
        c->outer_before.store(blz_cancelled());
        auto look_plain = [](void *a) { static_cast<Ctx *>(a)->plain.store(blz_cancelled()); };
        auto look_live = [](void *a) { static_cast<Ctx *>(a)->in_live.store(blz_cancelled()); };
        blz_task *t = nullptr;
        if (blz_spawn(c->pool, look_plain, c, &t) == BLZ_OK) blz_join(t);
        blz_spawn_options opts;
        blz_spawn_options_init(&opts);
        opts.group = c->live;
        if (blz_spawn_ex(nullptr, look_live, c, &opts, &t) == BLZ_OK) blz_task_wait_for(t, kMinute);
        c->outer_after.store(blz_cancelled());
    };
    REQUIRE(blz_group_spawn(cancelled, outer, &ctx) == BLZ_OK);
    CHECK(blz_group_wait(cancelled) == BLZ_ECANCELED);
    // The worker's next job, of no group, is not cancelled either.
    auto next = [](void *a) { static_cast<Ctx *>(a)->next_job.store(blz_cancelled()); };
    blz_task *t = nullptr;
    REQUIRE(blz_spawn(p, next, &ctx, &t) == BLZ_OK);
    CHECK(blz_join(t) == BLZ_OK);
    CHECK(ctx.cancel.load() == BLZ_OK);
    CHECK(ctx.outer_before.load() == 1);
    CHECK(ctx.plain.load() == 0);
    CHECK(ctx.in_live.load() == 0);
    CHECK(ctx.outer_after.load() == 1);
    CHECK(ctx.next_job.load() == 0);
    CHECK(blz_group_wait(live) == BLZ_OK);
    CHECK(blz_group_destroy(live) == BLZ_OK);
    CHECK(blz_group_destroy(cancelled) == BLZ_OK);
}

// ===========================================================================
// blz_parallel_for inside a group's task

namespace {

constexpr size_t kPieces = 1000;  // grain 1: one index per piece

struct LoopCtx {
    blz_pool *pool = nullptr;
    blz_group *group = nullptr;
    size_t begin = 0, end = kPieces;
    Gate cancelled;                  // the test opens it once the group is cancelled
    bool wait_for_cancel = false;    // each piece passes `cancelled`, then waits to see it
    bool first_fails = false;        // the first piece to start calls blz_fail (the others wait to see the cancel)
    bool first_throws = false;
    bool wait_cancelled_first = false;  // the task waits to see its group cancelled before the loop
    bool hold_task = false;             // the task passes task_gate first
    Gate task_gate;
    std::atomic<bool> gave_up{false};   // a piece never saw the cancel: the others stop waiting
    std::atomic<bool> first_taken{false};
    std::atomic<int> started{0};
    std::atomic<int> saw_cancel{0};
    std::atomic<int> never_saw_cancel{0};
    std::atomic<int> visits[kPieces];
    std::atomic<blz_status> loop{99};
    std::atomic<int32_t> cancelled_after{-1};
    std::atomic<int32_t> first_saw_cancel{-1};  // the failing piece, right after its blz_fail
    LoopCtx() {
        for (auto &v : visits) v.store(0);
    }
};
void loop_piece(void *arg, size_t lo, size_t hi) {
    auto *c = static_cast<LoopCtx *>(arg);
    for (size_t i = lo; i < hi; ++i) c->visits[i].fetch_add(1);
    c->started.fetch_add(1);
    const bool first = (c->first_fails || c->first_throws) && !c->first_taken.exchange(true);
    if (first) {
        if (c->first_throws) throw std::runtime_error("first piece throws");
        blz_fail();
        c->first_saw_cancel.store(blz_cancelled());
        return;
    }
    if (c->wait_for_cancel) {
        c->cancelled.pass();
    }
    if (c->wait_for_cancel || c->first_fails || c->first_throws) {
        if (!c->gave_up.load() && soon_cancelled() == 1) {
            c->saw_cancel.fetch_add(1);
        } else {
            c->gave_up.store(true);
            c->never_saw_cancel.fetch_add(1);
        }
    }
}
void loop_task(void *arg) {
    auto *c = static_cast<LoopCtx *>(arg);
    if (c->hold_task) c->task_gate.pass();
    if (c->wait_cancelled_first) soon_cancelled();
    c->loop.store(blz_parallel_for(c->pool, c->begin, c->end, 1, loop_piece, c));
    c->cancelled_after.store(blz_cancelled());
}
int visited(const LoopCtx &c) {
    int n = 0;
    for (const auto &v : c.visits) n += v.load();
    return n;
}
int visited_twice(const LoopCtx &c) {
    int n = 0;
    for (const auto &v : c.visits) n += v.load() > 1;
    return n;
}

}  // namespace

TEST_CASE("parallel_for in a group task: a cancel stops new pieces, the loop returns BLZ_ECANCELED",
          "[api][v02][parallel_for][cancel]") {
    Watchdog watchdog("parallel_for cancelled", seconds(120));
    Pool pool(2);
    blz_group *group = nullptr;
    REQUIRE(blz_group_create(pool, &group) == BLZ_OK);
    auto c = std::make_unique<LoopCtx>();
    c->pool = pool;
    c->group = group;
    c->wait_for_cancel = true;
    OpenOnExit open_on_exit{c->cancelled};
    REQUIRE(blz_group_spawn(group, loop_task, c.get()) == BLZ_OK);
    REQUIRE(c->cancelled.wait_entered());  // a piece is running (each worker holds at most one)
    REQUIRE(blz_group_cancel(group) == BLZ_OK);
    c->cancelled.release();
    CHECK(blz_group_wait(group) == BLZ_ECANCELED);
    const int ran = visited(*c);
    INFO(ran << " of " << kPieces << " pieces ran");
    CHECK(c->loop.load() == BLZ_ECANCELED);
    CHECK(ran < static_cast<int>(kPieces / 4));  // far fewer than all
    CHECK(ran >= 1);
    CHECK(visited_twice(*c) == 0);
    CHECK(c->never_saw_cancel.load() == 0);  // running pieces see blz_cancelled() == 1
    CHECK(c->saw_cancel.load() == c->started.load());
    CHECK(c->cancelled_after.load() == 1);
    check_group_reset(group);
    CHECK(blz_group_destroy(group) == BLZ_OK);
}

TEST_CASE("parallel_for in a task of an already cancelled group runs no piece", "[api][v02][parallel_for][cancel]") {
    Watchdog watchdog("parallel_for after cancel", seconds(60));
    Pool pool(2);
    blz_group *group = nullptr;
    REQUIRE(blz_group_create(pool, &group) == BLZ_OK);
    // The task starts, the test cancels its group, the task sees the cancel
    // and only then calls blz_parallel_for.
    auto run = [&](LoopCtx &c) {
        c.pool = pool;
        c.group = group;
        c.hold_task = true;
        c.wait_cancelled_first = true;
        OpenOnExit open_on_exit{c.task_gate};
        REQUIRE(blz_group_spawn(group, loop_task, &c) == BLZ_OK);
        REQUIRE(c.task_gate.wait_entered());
        REQUIRE(blz_group_cancel(group) == BLZ_OK);
        c.task_gate.release();
        CHECK(blz_group_wait(group) == BLZ_ECANCELED);
    };
    auto c = std::make_unique<LoopCtx>();
    run(*c);
    CHECK(c->loop.load() == BLZ_ECANCELED);
    CHECK(visited(*c) == 0);
    check_group_reset(group);

    // begin == end: "BLZ_OK, also when begin == end"; no piece was skipped.
    auto empty = std::make_unique<LoopCtx>();
    empty->begin = empty->end = 5;
    run(*empty);
    INFO("parallel_for(5, 5) in a task of a cancelled group returned " << empty->loop.load());
    CHECK(empty->loop.load() == BLZ_OK);
    CHECK(visited(*empty) == 0);
    CHECK(blz_group_destroy(group) == BLZ_OK);
}

TEST_CASE("parallel_for in a fail-fast group's task: a failing piece cancels the rest of the loop",
          "[api][v02][parallel_for][fail_fast]") {
    Watchdog watchdog("parallel_for fail-fast", seconds(120));
    const bool throws = GENERATE(false, true);
    INFO((throws ? "the first piece throws" : "the first piece calls blz_fail"));
    Pool pool(2);
    blz_group *group = nullptr;
    REQUIRE(blz_group_create_ex(pool, BLZ_GROUP_CANCEL_ON_FAILURE, &group) == BLZ_OK);
    auto c = std::make_unique<LoopCtx>();
    c->pool = pool;
    c->group = group;
    c->first_fails = !throws;
    c->first_throws = throws;
    REQUIRE(blz_group_spawn(group, loop_task, c.get()) == BLZ_OK);
    const blz_status waited = blz_group_wait(group);
    const int ran = visited(*c);
    INFO(ran << " of " << kPieces << " pieces ran; blz_group_wait returned " << waited);
    CHECK(c->loop.load() == BLZ_ETASK);  // the failure, though pieces were also skipped
    if (!throws) CHECK(c->first_saw_cancel.load() == 1);  // "cancelled at once"
    CHECK(ran < static_cast<int>(kPieces / 4));
    CHECK(visited_twice(*c) == 0);
    CHECK(c->never_saw_cancel.load() == 0);  // the other running pieces saw the cancel
    CHECK(c->cancelled_after.load() == 1);
    // The task returned normally: the wait reports the cancel or the
    // piece's failure (the header leaves open which).
    CHECK((waited == BLZ_ETASK || waited == BLZ_ECANCELED));
    check_group_reset(group);
    CHECK(blz_group_destroy(group) == BLZ_OK);
}

TEST_CASE("parallel_for outside fail-fast groups: a failing piece does not stop the loop",
          "[api][v02][parallel_for]") {
    Watchdog watchdog("parallel_for without fail-fast", seconds(120));
    Pool pool(2);
    blz_pool *p = pool;
    auto c = std::make_unique<LoopCtx>();
    c->pool = p;
    struct NoWait {
        LoopCtx *c;
        std::atomic<bool> first_taken{false};
    };
    // Pieces: the first to start fails, the others just count (they must
    // not wait for a cancel that never comes).
    auto piece = [](void *arg, size_t lo, size_t hi) {
        auto *n = static_cast<NoWait *>(arg);
        for (size_t i = lo; i < hi; ++i) n->c->visits[i].fetch_add(1);
        if (blz_cancelled() != 0) n->c->saw_cancel.fetch_add(1);
        if (!n->first_taken.exchange(true)) blz_fail();
    };
    NoWait nw{c.get()};
    auto loop = [&] { return blz_parallel_for(p, 0, kPieces, 1, piece, &nw); };

    SECTION("from outside the pool") { CHECK(loop() == BLZ_ETASK); }
    SECTION("from a task with no group") {
        blz_status status = 99;
        auto task = [&] { status = loop(); };
        blz_task *t = nullptr;
        REQUIRE(blz_spawn(p, thunk_of(task), &task, &t) == BLZ_OK);
        CHECK(blz_join(t) == BLZ_OK);  // the task did not fail itself
        CHECK(status == BLZ_ETASK);
    }
    SECTION("from a task of a group without the flag") {
        blz_group *group = nullptr;
        REQUIRE(blz_group_create(p, &group) == BLZ_OK);
        blz_status status = 99;
        auto task = [&] { status = loop(); };
        REQUIRE(blz_group_spawn(group, thunk_of(task), &task) == BLZ_OK);
        const blz_status waited = blz_group_wait(group);
        CHECK(status == BLZ_ETASK);
        CHECK(blz_group_cancelled(group) == 0);
        // The failed job is the piece, and the loop reported it; the group's
        // task returned normally (blz_fail: "the call that waits for that job
        // returns BLZ_ETASK").
        CHECK(waited == BLZ_OK);
        CHECK(blz_group_destroy(group) == BLZ_OK);
    }
    CHECK(visited(*c) == static_cast<int>(kPieces));  // every piece ran
    CHECK(visited_twice(*c) == 0);
    CHECK(c->saw_cancel.load() == 0);
    // A loop with no failure, unchanged from 0.1.
    blz_test::IndexSum sum;
    CHECK(blz_parallel_for(p, 0, 10000, 0, blz_test::IndexSum::add_range, &sum) == BLZ_OK);
    CHECK(sum.total.load() == uint64_t{10000} * 9999 / 2);
}

// ===========================================================================
// blz_fail

namespace {

struct FailCount {
    std::atomic<int> ran{0};
};
void fail_once(void *arg) {
    static_cast<FailCount *>(arg)->ran.fetch_add(1);
    blz_fail();
}
void fail_twice(void *arg) {
    static_cast<FailCount *>(arg)->ran.fetch_add(1);
    blz_fail();
    blz_fail();
}
void fail_then_throw(void *arg) {
    static_cast<FailCount *>(arg)->ran.fetch_add(1);
    blz_fail();
    throw std::runtime_error("after blz_fail");
}
void ok_once(void *arg) { static_cast<FailCount *>(arg)->ran.fetch_add(1); }

}  // namespace

TEST_CASE("blz_fail in a spawned task: BLZ_ETASK, counted once per failed task", "[api][v02][fail]") {
    Watchdog watchdog("blz_fail in a task", seconds(60));
    Pool pool(2);
    FailCount count;
    const uint64_t before = stats_of(pool).tasks_failed;
    for (blz_fn fn : {fail_once, fail_twice, fail_then_throw}) {
        blz_task *task = nullptr;
        REQUIRE(blz_spawn(pool, fn, &count, &task) == BLZ_OK);
        CHECK(blz_join(task) == BLZ_ETASK);
    }
    // Detached: counted too.
    REQUIRE(blz_spawn(pool, fail_twice, &count, nullptr) == BLZ_OK);
    CHECK(settled_tasks_failed(pool, before + 4) == before + 4);
    CHECK(count.ran.load() == 4);
    // The worker's next job is not failed.
    blz_task *task = nullptr;
    REQUIRE(blz_spawn(pool, ok_once, &count, &task) == BLZ_OK);
    CHECK(blz_join(task) == BLZ_OK);
    CHECK(blz_call(pool, ok_once, &count) == BLZ_OK);
}

// tasks_failed for fork-join halves (blitz.h, blz_stats): the halves the
// forker runs itself are one job for blz_fail, a stolen half is one of its
// own, and an exception counts apart. So a case counts between
// `min_count` (nothing stolen) and `max_count` (b stolen).
TEST_CASE("blz_fail in a fork-join half: BLZ_ETASK, both halves ran, counted as blitz.h says",
          "[api][v02][fail]") {
    Watchdog watchdog("blz_fail in a half", seconds(60));
    const bool from_worker = GENERATE(false, true);
    INFO((from_worker ? "from a worker" : "from outside"));
    Pool pool(2);
    blz_pool *p = pool;
    struct Case {
        const char *what;
        blz_fn a, b;
        uint64_t min_count, max_count;
    };
    const Case cases[] = {
        {"a fails", fail_once, ok_once, 1, 1},        {"b fails", ok_once, fail_once, 1, 1},
        {"both fail", fail_once, fail_twice, 1, 2},   {"a fails twice", fail_twice, ok_once, 1, 1},
        {"none fails", ok_once, ok_once, 0, 0},      {"a throws, b fails", fail_then_throw, fail_once, 2, 3},
    };
    for (const Case &c : cases) {
        INFO(c.what);
        const uint64_t before = settled_tasks_failed(p, 0);
        FailCount a, b;
        blz_status status = 99;
        if (from_worker) {
            REQUIRE(on_worker(p, [&] { status = blz_fork_join(p, c.a, &a, c.b, &b); }) == BLZ_OK);
        } else {
            status = blz_fork_join(p, c.a, &a, c.b, &b);
        }
        CHECK(status == (c.max_count != 0 ? BLZ_ETASK : BLZ_OK));
        CHECK(a.ran.load() == 1);
        CHECK(b.ran.load() == 1);
        const uint64_t counted = settled_tasks_failed(p, before + c.min_count) - before;
        CHECK(counted >= c.min_count);
        CHECK(counted <= c.max_count);
    }
}

TEST_CASE("blz_fail in a stolen fork-join half: BLZ_ETASK, the thief's half counted on its own; the thief's next job is clean",
          "[api][v02][fail]") {
    Watchdog watchdog("blz_fail on a thief", seconds(60));
    Pool pool(2);
    const bool both = GENERATE(false, true);
    INFO((both ? "both halves fail, b on a thief" : "b fails on a thief"));
    const uint64_t before = settled_tasks_failed(pool, 0);
    HalfFail h;
    h.pool = pool;
    h.fail_b = true;
    h.fail_both = both;
    h.steal = true;
    blz_status status = 99;
    REQUIRE(on_worker(pool, [&] { status = blz_fork_join(h.pool, half_a, &h, half_b, &h); }) == BLZ_OK);
    CHECK(status == BLZ_ETASK);
    CHECK(h.halves_ran.load() == 2);
    CHECK(h.a_thread.load() != h.b_thread.load());
    const uint64_t expected = before + (both ? 2 : 1);
    CHECK(settled_tasks_failed(pool, expected) == expected);
    // Whatever runs next on either worker succeeds.
    for (int i = 0; i < 20; ++i) CHECK(blz_test::fib(pool, 12) == 144);
    FailCount count;
    CHECK(blz_parallel_for(pool, 0, 100, 1, [](void *arg, size_t, size_t) { ok_once(arg); }, &count) == BLZ_OK);
    CHECK(count.ran.load() == 100);
    CHECK(settled_tasks_failed(pool, expected) == expected);
}

TEST_CASE("blz_fail in blz_call: BLZ_ETASK, from outside and from a worker", "[api][v02][fail]") {
    Watchdog watchdog("blz_fail in blz_call", seconds(60));
    Pool pool(2);
    blz_pool *p = pool;
    FailCount count;
    uint64_t before = stats_of(pool).tasks_failed;
    CHECK(blz_call(p, fail_once, &count) == BLZ_ETASK);
    CHECK(blz_call(p, fail_twice, &count) == BLZ_ETASK);
    CHECK(blz_call(p, ok_once, &count) == BLZ_OK);
    CHECK(settled_tasks_failed(p, before + 2) == before + 2);
    before = stats_of(pool).tasks_failed;
    blz_status inner = 99, after = 99;
    // The outer blz_call's function did not fail: only the inner one did.
    CHECK(on_worker(p, [&] {
              inner = blz_call(p, fail_once, &count);
              after = blz_call(p, ok_once, &count);
          }) == BLZ_OK);
    CHECK(inner == BLZ_ETASK);
    CHECK(after == BLZ_OK);
    CHECK(settled_tasks_failed(p, before + 1) == before + 1);
    CHECK(count.ran.load() == 5);
}

TEST_CASE("blz_fail in parallel_for pieces: BLZ_ETASK, every piece ran", "[api][v02][fail]") {
    Watchdog watchdog("blz_fail in pieces", seconds(60));
    Pool pool(2);
    struct Ctx {
        std::atomic<int> visits[100];
    };
    auto c = std::make_unique<Ctx>();
    for (auto &v : c->visits) v.store(0);
    auto piece = [](void *arg, size_t lo, size_t hi) {
        auto *x = static_cast<Ctx *>(arg);
        bool fail = false;
        for (size_t i = lo; i < hi; ++i) {
            x->visits[i].fetch_add(1);
            fail |= i % 10 == 0;
        }
        if (fail) blz_fail();
    };
    const uint64_t before = stats_of(pool).tasks_failed;
    CHECK(blz_parallel_for(pool, 0, 100, 1, piece, c.get()) == BLZ_ETASK);
    int once = 0;
    for (auto &v : c->visits) once += v.load() == 1;
    CHECK(once == 100);
    // Ten pieces failed (grain 1): counted once each.
    CHECK(settled_tasks_failed(pool, before + 10) == before + 10);
}

TEST_CASE("blz_fail in a group task: the wait returns BLZ_ETASK, the other tasks ran, no cancel",
          "[api][v02][fail]") {
    Watchdog watchdog("blz_fail in a group task", seconds(60));
    Pool pool(2);
    blz_group *group = nullptr;
    REQUIRE(blz_group_create(pool, &group) == BLZ_OK);
    FailCount count;
    for (int i = 0; i < 20; ++i) REQUIRE(blz_group_spawn(group, i == 5 ? fail_twice : ok_once, &count) == BLZ_OK);
    CHECK(blz_group_wait(group) == BLZ_ETASK);
    CHECK(count.ran.load() == 20);
    CHECK(blz_group_cancelled(group) == 0);
    CHECK(blz_group_wait(group) == BLZ_OK);  // reported once
    CHECK(blz_group_destroy(group) == BLZ_OK);
}

TEST_CASE("blz_fail outside a job does nothing", "[api][v02][fail]") {
    Watchdog watchdog("blz_fail outside a job", seconds(60));
    blz_fail();  // a thread that never ran a job
    blz_fail();
    Pool pool(2);
    FailCount count;
    blz_fail();  // between calls of a thread that uses the pool
    CHECK(blz_call(pool, ok_once, &count) == BLZ_OK);
    blz_fail();  // right after a blz_call returned
    blz_task *task = nullptr;
    REQUIRE(blz_spawn(pool, ok_once, &count, &task) == BLZ_OK);
    CHECK(blz_join(task) == BLZ_OK);
    blz_fail();
    CHECK(blz_fork_join(pool, ok_once, &count, ok_once, &count) == BLZ_OK);
    CHECK(settled_tasks_failed(pool, 0) == 0);
    CHECK(blz_call(pool, fail_once, &count) == BLZ_ETASK);
    const uint64_t after_failure = settled_tasks_failed(pool, 0);
    blz_fail();  // after a failed blz_call: the next call is still clean
    CHECK(blz_call(pool, ok_once, &count) == BLZ_OK);
    CHECK(settled_tasks_failed(pool, 0) == after_failure);

    // In the worker hooks.
    static std::atomic<int> hooks{0};
    hooks.store(0);
    blz_pool_config config;
    blz_pool_config_init(&config);
    config.num_threads = 2;
    config.on_thread_start = [](void *, uint32_t) {
        blz_fail();
        hooks.fetch_add(1);
    };
    config.on_thread_stop = [](void *, uint32_t) {
        blz_fail();
        hooks.fetch_add(1);
    };
    blz_pool *hooked = nullptr;
    REQUIRE(blz_pool_create(&config, &hooked) == BLZ_OK);
    CHECK(blz_call(hooked, ok_once, &count) == BLZ_OK);
    REQUIRE(blz_spawn(hooked, ok_once, &count, &task) == BLZ_OK);
    CHECK(blz_join(task) == BLZ_OK);
    CHECK(blz_fork_join(hooked, ok_once, &count, ok_once, &count) == BLZ_OK);
    CHECK(settled_tasks_failed(hooked, 0) == 0);
    CHECK(blz_pool_destroy(hooked) == BLZ_OK);
    CHECK(hooks.load() == 4);
}

TEST_CASE("blz_fail is per job: nested calls after it succeed, and a nested failure does not fail the caller",
          "[api][v02][fail]") {
    Watchdog watchdog("blz_fail nested", seconds(60));
    Pool pool(2);
    blz_pool *p = pool;
    FailCount count;
    struct Outcome {
        blz_status fork_join = 99, call = 99, loop = 99;
    };

    SECTION("the job fails first, then runs work that succeeds") {
        Outcome out;
        auto job = [&] {
            blz_fail();
            out.fork_join = blz_fork_join(p, ok_once, &count, ok_once, &count);
            out.call = blz_call(p, ok_once, &count);
            out.loop = blz_parallel_for(p, 0, 50, 1, [](void *arg, size_t, size_t) { ok_once(arg); }, &count);
        };
        blz_task *task = nullptr;
        REQUIRE(blz_spawn(p, thunk_of(job), &job, &task) == BLZ_OK);
        CHECK(blz_join(task) == BLZ_ETASK);  // the job itself failed
        CHECK(out.fork_join == BLZ_OK);
        CHECK(out.call == BLZ_OK);
        CHECK(out.loop == BLZ_OK);
        CHECK(count.ran.load() == 53);
        // The same inside blz_call and a fork-join half.
        Outcome in_call;
        auto call_job = [&] {
            blz_fail();
            in_call.fork_join = blz_fork_join(p, ok_once, &count, ok_once, &count);
        };
        CHECK(blz_call(p, thunk_of(call_job), &call_job) == BLZ_ETASK);
        CHECK(in_call.fork_join == BLZ_OK);
        Outcome in_half;
        auto half_job = [&] {
            blz_fail();
            in_half.call = blz_call(p, ok_once, &count);
        };
        CHECK(blz_fork_join(p, thunk_of(half_job), &half_job, ok_once, &count) == BLZ_ETASK);
        CHECK(in_half.call == BLZ_OK);
    }
    SECTION("the job's nested work fails; the job does not") {
        Outcome out;
        auto job = [&] {
            out.fork_join = blz_fork_join(p, fail_once, &count, ok_once, &count);
            out.call = blz_call(p, fail_once, &count);
            out.loop = blz_parallel_for(p, 0, 10, 1, [](void *arg, size_t, size_t) { fail_once(arg); }, &count);
        };
        blz_task *task = nullptr;
        REQUIRE(blz_spawn(p, thunk_of(job), &job, &task) == BLZ_OK);
        CHECK(blz_join(task) == BLZ_OK);
        CHECK(out.fork_join == BLZ_ETASK);
        CHECK(out.call == BLZ_ETASK);
        CHECK(out.loop == BLZ_ETASK);
        blz_group *group = nullptr;
        REQUIRE(blz_group_create(p, &group) == BLZ_OK);
        Outcome in_group;
        auto group_job = [&] { in_group.call = blz_call(p, fail_once, &count); };
        REQUIRE(blz_group_spawn(group, thunk_of(group_job), &group_job) == BLZ_OK);
        const blz_status waited = blz_group_wait(group);
        CHECK(in_group.call == BLZ_ETASK);
        CHECK(waited == BLZ_OK);  // the group's task returned normally
        CHECK(blz_group_destroy(group) == BLZ_OK);
    }
}
