// Completion callbacks, from the contract in blitz.h:
// blz_spawn_options_init, blz_spawn_ex (options, errors, the group's pool),
// on_done (exactly once, on the worker that finished the task, with its
// status, before every wait and blz_pool_destroy return, exceptions that
// escape it, blz_fail in it), the 0.2 calls in a forked child, and the
// version number and the strings of BLZ_ETIMEDOUT and BLZ_ECANCELED.
// blz_task_wait_for and blz_task_detach are in api_task_wait_for.cpp and
// api_task_detach.cpp; the records of tasks they share, in task_records.hpp.
//
// Code on workers and helper threads only records (atomics); the test
// thread asserts afterwards. Interleavings are held open by gates, never by
// sleeps; the few sleeps below only give a wrong implementation the time to
// show itself, and timeouts are generous upper bounds. Every case runs
// under a watchdog.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cctype>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include "support.hpp"
#include "task_records.hpp"

namespace {

using blz_test::HeldWorker;
using blz_test::kSanitized;
using blz_test::kForever;
using blz_test::kMinute;
using blz_test::Pool;
using blz_test::on_worker;
using blz_test::eventually;
using blz_test::Gate;
using blz_test::gate_fn;
using blz_test::OpenOnExit;
using blz_test::count_into;
using blz_test::sentinel;
using blz_test::stats_of;
using blz_test::Watchdog;
using blz_test::Ending;
using blz_test::Rec;
using blz_test::rec_fn;
using blz_test::rec_done;
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

// ===========================================================================
// Version and status strings

TEST_CASE("0.2: version number and the strings of BLZ_ETIMEDOUT and BLZ_ECANCELED", "[api][v02]") {
    STATIC_REQUIRE(BLZ_VERSION_MINOR >= 2);  // 0.2 or later
    CHECK(blz_version_number() == BLZ_VERSION_NUMBER);
    STATIC_REQUIRE(BLZ_ETIMEDOUT == -8);
    STATIC_REQUIRE(BLZ_ECANCELED == -9);

    std::set<std::string> known;
    for (blz_status old : {BLZ_OK, BLZ_EINVAL, BLZ_ENOMEM, BLZ_ETHREAD, BLZ_ESHUTDOWN, BLZ_EDEADLK, BLZ_ETASK,
                           BLZ_EFORK}) {
        known.insert(blz_status_string(old));
    }
    const std::string unknown = blz_status_string(12345);
    struct Code {
        blz_status status;
        const char *name;
    };
    for (Code code : {Code{BLZ_ETIMEDOUT, "BLZ_ETIMEDOUT"}, Code{BLZ_ECANCELED, "BLZ_ECANCELED"}}) {
        INFO("status " << code.status);
        const char *text = blz_status_string(code.status);
        REQUIRE(text != nullptr);
        std::string s(text);
        const size_t len = std::strlen(code.name);
        CHECK(s.rfind(code.name, 0) == 0);  // starts with its name ...
        CHECK(s.size() > len + 2);          // ... and a description follows
        if (s.size() > len) CHECK(!(std::isalnum(static_cast<unsigned char>(s[len])) || s[len] == '_'));
        CHECK(known.count(s) == 0);
        CHECK(s != unknown);
        CHECK(blz_status_string(code.status) == text);  // static
        known.insert(s);
    }
    CHECK(std::string(blz_status_string(-10)) == unknown);  // the next code is still unknown
}

// ===========================================================================
// blz_spawn_options_init and blz_spawn_ex

TEST_CASE("blz_spawn_options_init fills the defaults and ignores NULL", "[api][v02][spawn_ex]") {
    blz_spawn_options_init(nullptr);  // must not crash
    blz_spawn_options opts;
    std::memset(&opts, 0xAB, sizeof(opts));
    blz_spawn_options_init(&opts);
    CHECK(opts.struct_size == sizeof(blz_spawn_options));
    CHECK(opts.flags == 0);
    CHECK(opts.group == nullptr);
    CHECK(opts.on_done == nullptr);
    CHECK(opts.done_arg == nullptr);
}

TEST_CASE("blz_spawn_ex with NULL options is blz_spawn", "[api][v02][spawn_ex]") {
    Watchdog watchdog("spawn_ex with NULL options", seconds(60));
    Pool pool(2);
    Rec r;
    r.pool = pool;

    SECTION("with a handle, from outside") {
        blz_task *task = nullptr;
        REQUIRE(blz_spawn_ex(pool, rec_fn, &r, nullptr, &task) == BLZ_OK);
        REQUIRE(task != nullptr);
        CHECK(blz_join(task) == BLZ_OK);
        CHECK(r.fn_runs.load() == 1);
        CHECK(r.fn_worker.load() >= 0);
        CHECK(r.done_calls.load() == 0);
    }
    SECTION("detached") {
        REQUIRE(blz_spawn_ex(pool, rec_fn, &r, nullptr, nullptr) == BLZ_OK);
        CHECK(eventually([&] { return r.fn_ended.load(); }));
        CHECK(blz_test::wait_until_asleep(pool, milliseconds(60000)));
        CHECK(r.fn_runs.load() == 1);
    }
    SECTION("a throwing task gives BLZ_ETASK") {
        r.ending = Ending::kThrow;
        blz_task *task = nullptr;
        REQUIRE(blz_spawn_ex(pool, rec_fn, &r, nullptr, &task) == BLZ_OK);
        CHECK(blz_join(task) == BLZ_ETASK);
    }
    SECTION("from a worker of the pool") {
        blz_status spawned = 99, joined = 99;
        blz_pool *p = pool;
        REQUIRE(on_worker(p, [&] {
                    blz_task *task = nullptr;
                    spawned = blz_spawn_ex(p, rec_fn, &r, nullptr, &task);
                    if (spawned == BLZ_OK) joined = blz_join(task);
                }) == BLZ_OK);
        CHECK(spawned == BLZ_OK);
        CHECK(joined == BLZ_OK);
        CHECK(r.fn_runs.load() == 1);
    }
    SECTION("default options are the same") {
        blz_spawn_options opts;
        blz_spawn_options_init(&opts);
        blz_task *task = nullptr;
        REQUIRE(blz_spawn_ex(pool, rec_fn, &r, &opts, &task) == BLZ_OK);
        CHECK(blz_join(task) == BLZ_OK);
        CHECK(r.fn_runs.load() == 1);
    }
}

TEST_CASE("blz_spawn_ex refuses bad arguments and options; a refused task never runs nor calls on_done",
          "[api][v02][spawn_ex]") {
    Watchdog watchdog("spawn_ex refusals", seconds(60));
    Pool pool(2);
    Pool other(1);
    blz_group *group = nullptr;
    blz_group *other_group = nullptr;
    REQUIRE(blz_group_create(pool, &group) == BLZ_OK);
    REQUIRE(blz_group_create(other, &other_group) == BLZ_OK);
    Tally never;
    blz_spawn_options opts = tally_options(never);
    blz_task *task = sentinel<blz_task>();
    blz_task **outs[] = {&task, nullptr};  // with a handle and detached

    SECTION("fn NULL") {
        for (blz_task **out : outs) {
            CHECK(blz_spawn_ex(pool, nullptr, &never, &opts, out) == BLZ_EINVAL);
            CHECK(blz_spawn_ex(pool, nullptr, &never, nullptr, out) == BLZ_EINVAL);
        }
    }
    SECTION("pool and group both NULL") {
        for (blz_task **out : outs) {
            CHECK(blz_spawn_ex(nullptr, tally_fn, &never, &opts, out) == BLZ_EINVAL);
            CHECK(blz_spawn_ex(nullptr, tally_fn, &never, nullptr, out) == BLZ_EINVAL);
        }
    }
    SECTION("struct_size too small") {
        // Below 0.2's layout (which ends with done_arg); a size between it
        // and 0.3's is a 0.2 caller's, accepted without predecessors (api_after.cpp).
        for (uint32_t size : {0u, 4u, static_cast<uint32_t>(offsetof(blz_spawn_options, done_arg)),
                              static_cast<uint32_t>(offsetof(blz_spawn_options, done_arg) + sizeof(void *) - 1)}) {
            INFO("struct_size " << size);
            opts.struct_size = size;
            for (blz_task **out : outs) CHECK(blz_spawn_ex(pool, tally_fn, &never, &opts, out) == BLZ_EINVAL);
            opts.group = group;  // with a group as well
            for (blz_task **out : outs) CHECK(blz_spawn_ex(nullptr, tally_fn, &never, &opts, out) == BLZ_EINVAL);
            opts.group = nullptr;
        }
    }
    SECTION("unknown flags") {
        // 1 is BLZ_SPAWN_HIGH_PRIORITY (api_priority.cpp); 2 BLZ_SPAWN_DONE_AFTER_FINISH and 4
        // BLZ_SPAWN_CANCEL_ON_FAILURE (api_task_cancel.cpp); 8 BLZ_SPAWN_AFTER_ANY_END
        // (api_after.cpp); every other bit is unknown.
        for (uint32_t flags : {16u, 31u, 0x100u, 0x80000000u, ~0u}) {
            INFO("flags " << flags);
            opts.flags = flags;
            for (blz_task **out : outs) CHECK(blz_spawn_ex(pool, tally_fn, &never, &opts, out) == BLZ_EINVAL);
        }
    }
    SECTION("pool is not the group's pool") {
        opts.group = group;
        for (blz_task **out : outs) CHECK(blz_spawn_ex(other, tally_fn, &never, &opts, out) == BLZ_EINVAL);
        opts.group = other_group;
        for (blz_task **out : outs) CHECK(blz_spawn_ex(pool, tally_fn, &never, &opts, out) == BLZ_EINVAL);
    }
    CHECK(task == sentinel<blz_task>());  // untouched by every refusal
    // Nothing was queued: the groups are empty, both pools fall asleep, and
    // neither fn nor on_done ever ran.
    CHECK(blz_group_wait(group) == BLZ_OK);
    CHECK(blz_group_wait(other_group) == BLZ_OK);
    CHECK(blz_test::wait_until_asleep(pool, milliseconds(60000)));
    CHECK(blz_test::wait_until_asleep(other, milliseconds(60000)));
    CHECK(never.fn_runs.load() == 0);
    CHECK(never.done.load() == 0);
    CHECK(blz_group_destroy(group) == BLZ_OK);
    CHECK(blz_group_destroy(other_group) == BLZ_OK);
}

TEST_CASE("blz_spawn_ex accepts a larger struct_size (a newer layout's prefix)", "[api][v02][spawn_ex]") {
    Watchdog watchdog("spawn_ex larger options", seconds(60));
    Pool pool(2);
    struct Newer {
        blz_spawn_options v02;
        uint64_t later_fields[4];
    } newer;
    std::memset(&newer, 0, sizeof(newer));
    blz_spawn_options_init(&newer.v02);
    newer.v02.struct_size = sizeof(Newer);
    Rec r;
    r.pool = pool;
    newer.v02.on_done = rec_done;
    newer.v02.done_arg = &r;
    blz_task *task = nullptr;
    REQUIRE(blz_spawn_ex(pool, rec_fn, &r, &newer.v02, &task) == BLZ_OK);
    CHECK(blz_join(task) == BLZ_OK);
    check_rec(r, BLZ_OK, true);
}

TEST_CASE("blz_spawn_ex with pool NULL and a group runs on the group's pool", "[api][v02][spawn_ex]") {
    Watchdog watchdog("spawn_ex on the group's pool", seconds(60));
    Pool pool(2);
    Pool other(2);
    blz_group *group = nullptr;
    REQUIRE(blz_group_create(pool, &group) == BLZ_OK);
    struct Where {
        blz_pool *pool;
        blz_pool *other;
        std::atomic<int> on_pool{0}, on_other{0}, runs{0};
    } where{pool, other};
    auto fn = [](void *arg) {
        auto *w = static_cast<Where *>(arg);
        if (blz_worker_index(w->pool) >= 0) w->on_pool.fetch_add(1);
        if (blz_worker_index(w->other) >= 0) w->on_other.fetch_add(1);
        w->runs.fetch_add(1);
    };
    Tally tally;
    tally.pool = pool;
    blz_spawn_options opts = tally_options(tally, group);
    constexpr int kTasks = 50;
    for (int i = 0; i < kTasks; ++i) REQUIRE(blz_spawn_ex(nullptr, fn, &where, &opts, nullptr) == BLZ_OK);
    blz_task *task = nullptr;
    REQUIRE(blz_spawn_ex(nullptr, fn, &where, &opts, &task) == BLZ_OK);
    CHECK(blz_join(task) == BLZ_OK);
    // The same pool given explicitly is accepted too.
    REQUIRE(blz_spawn_ex(pool, fn, &where, &opts, nullptr) == BLZ_OK);
    // From a worker of another pool: still the group's pool.
    blz_status from_other = 99;
    REQUIRE(on_worker(other, [&] { from_other = blz_spawn_ex(nullptr, fn, &where, &opts, nullptr); }) == BLZ_OK);
    CHECK(from_other == BLZ_OK);
    // The group's wait counts them all, and their on_done returned before it.
    CHECK(blz_group_wait(group) == BLZ_OK);
    CHECK(where.runs.load() == kTasks + 3);
    CHECK(where.on_pool.load() == kTasks + 3);
    CHECK(where.on_other.load() == 0);
    CHECK(tally.done.load() == kTasks + 3);
    CHECK(tally.ok.load() == kTasks + 3);
    CHECK(tally.off_worker.load() == 0);
    CHECK(blz_group_destroy(group) == BLZ_OK);
}

// ===========================================================================
// on_done

namespace {

// Spawns `n` slot tasks on `pool` (every other one detached) and joins the
// others; on_done must have returned before each join did.
struct SpawnResult {
    int spawn_errors = 0, join_errors = 0, done_before_join = 0;
};
SpawnResult spawn_and_join(blz_pool *pool, Slot *slots, int n) {
    SpawnResult out;
    std::vector<blz_task *> handles(static_cast<size_t>(n), nullptr);
    for (int i = 0; i < n; ++i) {
        slots[i].pool = pool;
        blz_spawn_options opts = slot_options(slots[i]);
        if (blz_spawn_ex(pool, slot_fn, &slots[i], &opts, i % 2 == 0 ? &handles[i] : nullptr) != BLZ_OK) {
            ++out.spawn_errors;
        }
    }
    for (int i = 0; i < n; ++i) {
        if (handles[i] == nullptr) continue;
        if (blz_join(handles[i]) != BLZ_OK) ++out.join_errors;
        if (slots[i].done_calls.load() == 1) ++out.done_before_join;
    }
    return out;
}

// On the test thread: waits for every on_done, then checks each task.
void check_slots(const SpawnResult &r, const Slot *slots, int n) {
    CHECK(r.spawn_errors == 0);
    CHECK(r.join_errors == 0);
    CHECK(r.done_before_join == (n + 1) / 2);
    CHECK(eventually([&] {
        for (int i = 0; i < n; ++i) {
            if (slots[i].done_calls.load() == 0) return false;
        }
        return true;
    }));
    int not_once = 0, bad_status = 0, problems = 0;
    for (int i = 0; i < n; ++i) {
        if (slots[i].done_calls.load() != 1 || slots[i].fn_runs.load() != 1) ++not_once;
        if (slots[i].done_status.load() != BLZ_OK) ++bad_status;
        problems += slots[i].problems.load();
    }
    CHECK(not_once == 0);
    CHECK(bad_status == 0);
    CHECK(problems == 0);
}

}  // namespace

TEST_CASE("on_done runs exactly once per task, on the worker that ran it, after fn, with BLZ_OK",
          "[api][v02][on_done]") {
    Watchdog watchdog("on_done exactly once", seconds(120));
    const int n = kSanitized ? 500 : 5000;
    const uint32_t workers = GENERATE(1u, 2u, 4u);
    INFO("workers: " << workers);
    Pool pool(workers);
    blz_pool *p = pool;

    std::unique_ptr<Slot[]> slots(new Slot[static_cast<size_t>(n)]);
    SpawnResult result;

    SECTION("spawned from outside") { result = spawn_and_join(p, slots.get(), n); }
    SECTION("spawned from a worker of the pool") {
        REQUIRE(on_worker(p, [&] { result = spawn_and_join(p, slots.get(), n); }) == BLZ_OK);
    }
    SECTION("spawned from a worker of another pool") {
        Pool other(1);
        REQUIRE(on_worker(other, [&] { result = spawn_and_join(p, slots.get(), n); }) == BLZ_OK);
    }
    check_slots(result, slots.get(), n);
}

TEST_CASE("on_done gets BLZ_ETASK when fn throws or calls blz_fail, also for a detached task",
          "[api][v02][on_done]") {
    Watchdog watchdog("on_done with ETASK", seconds(60));
    Pool pool(2);
    const Ending ending = GENERATE(Ending::kThrow, Ending::kFail);
    INFO((ending == Ending::kThrow ? "fn throws" : "fn calls blz_fail"));
    const uint64_t failed_before = stats_of(pool).tasks_failed;

    Rec joined;
    joined.pool = pool;
    joined.ending = ending;
    blz_spawn_options opts = options_for(joined);
    blz_task *task = nullptr;
    REQUIRE(blz_spawn_ex(pool, rec_fn, &joined, &opts, &task) == BLZ_OK);
    CHECK(blz_join(task) == BLZ_ETASK);
    check_rec(joined, BLZ_ETASK, true);

    Rec detached;
    detached.pool = pool;
    detached.ending = ending;
    opts = options_for(detached);
    REQUIRE(blz_spawn_ex(pool, rec_fn, &detached, &opts, nullptr) == BLZ_OK);
    REQUIRE(eventually([&] { return detached.done_returned.load(); }));
    check_rec(detached, BLZ_ETASK, true);

    CHECK(settled_tasks_failed(pool, failed_before + 2) == failed_before + 2);
}

namespace {

enum class Outcome { kOk, kThrow, kFail, kCancelled };

const char *name_of(Outcome o) {
    switch (o) {
        case Outcome::kOk: return "returns";
        case Outcome::kThrow: return "throws";
        case Outcome::kFail: return "calls blz_fail";
        case Outcome::kCancelled: return "cancelled before it started";
    }
    return "?";
}

}  // namespace

TEST_CASE("on_done has returned before the wait for its task returns, and they see the same status",
          "[api][v02][on_done]") {
    const Waiter waiter =
        GENERATE(Waiter::kJoin, Waiter::kWaitForever, Waiter::kWaitFor, Waiter::kGroupWait, Waiter::kGroupWaitFor);
    const Outcome outcome = GENERATE(Outcome::kOk, Outcome::kThrow, Outcome::kFail, Outcome::kCancelled);
    INFO(name_of(waiter) << ", the task " << name_of(outcome));
    Watchdog watchdog("on_done before the wait returns", seconds(60));
    Pool pool(1);
    blz_group *group = nullptr;
    REQUIRE(blz_group_create(pool, &group) == BLZ_OK);
    const bool group_waiter = waiter == Waiter::kGroupWait || waiter == Waiter::kGroupWaitFor;
    const bool in_group = group_waiter || outcome == Outcome::kCancelled;
    const blz_status expected = outcome == Outcome::kOk          ? BLZ_OK
                                : outcome == Outcome::kCancelled ? BLZ_ECANCELED
                                                                 : BLZ_ETASK;

    Gate done_gate;
    Rec r;
    r.pool = pool;
    r.ending = outcome == Outcome::kThrow ? Ending::kThrow : outcome == Outcome::kFail ? Ending::kFail : Ending::kOk;
    r.done_gate = &done_gate;
    OpenOnExit open_done{done_gate};
    blz_task *task = nullptr;
    {
        HeldWorker held(pool);  // the task queues behind it
        blz_spawn_options opts = options_for(r, in_group ? group : nullptr);
        REQUIRE(blz_spawn_ex(pool, rec_fn, &r, &opts, group_waiter ? nullptr : &task) == BLZ_OK);
        if (outcome == Outcome::kCancelled) REQUIRE(blz_group_cancel(group) == BLZ_OK);
    }  // the worker is released

    // on_done blocks in its gate; the opener opens it a while after it
    // entered, noting whether the wait had returned already.
    std::atomic<bool> wait_returned{false};
    std::atomic<bool> returned_while_on_done_ran{false};
    std::thread opener([&] {
        done_gate.wait_entered();
        std::this_thread::sleep_for(milliseconds(30));
        returned_while_on_done_ran.store(wait_returned.load());
        done_gate.release();
    });
    blz_status status = 99;
    switch (waiter) {
        case Waiter::kJoin: status = blz_join(task); break;
        case Waiter::kWaitForever: status = blz_task_wait_for(task, kForever); break;
        case Waiter::kWaitFor: status = blz_task_wait_for(task, kMinute); break;
        case Waiter::kGroupWait: status = blz_group_wait(group); break;
        case Waiter::kGroupWaitFor: status = blz_group_wait_for(group, kMinute); break;
    }
    wait_returned.store(true);
    const bool on_done_had_returned = r.done_returned.load();
    opener.join();

    CHECK(status == expected);
    CHECK(on_done_had_returned);
    CHECK_FALSE(returned_while_on_done_ran.load());
    CHECK(r.done_status.load() == status);
    check_rec(r, expected, outcome != Outcome::kCancelled);
    // The group still holds a cancellation that no group wait reported.
    const blz_status left = (!group_waiter && outcome == Outcome::kCancelled) ? BLZ_ECANCELED : BLZ_OK;
    CHECK(blz_group_destroy(group) == left);
}

TEST_CASE("blz_pool_destroy returns only after the on_done of every accepted task returned",
          "[api][v02][on_done][destroy]") {
    Watchdog watchdog("destroy waits for on_done", seconds(120));
    constexpr int kQueued = 1000;
    constexpr int kHandles = 10;
    constexpr int kCancelled = 300;
    blz_pool *pool = nullptr;
    blz_pool_config config;
    blz_pool_config_init(&config);
    config.num_threads = 1;
    REQUIRE(blz_pool_create(&config, &pool) == BLZ_OK);
    blz_group *group = nullptr;
    REQUIRE(blz_group_create(pool, &group) == BLZ_OK);

    // The blocker holds the only worker; once released (destroy has begun),
    // it spawns more tasks with on_done: a worker's spawns are accepted.
    constexpr int kFromWorker = 100;
    Tally plain, skipped, refused;
    plain.pool = pool;
    skipped.pool = pool;
    blz_spawn_options opts = tally_options(plain);
    struct Blocker {
        blz_pool *pool;
        Gate gate;
        blz_spawn_options *opts;
        Tally *tally;
        std::atomic<int> accepted{0};
    } b{pool, {}, &opts, &plain};
    Gate &gate = b.gate;
    OpenOnExit open_on_exit{gate};
    auto blocker_fn = [](void *arg) {
        auto *x = static_cast<Blocker *>(arg);
        x->gate.pass();
        for (int i = 0; i < kFromWorker; ++i) {
            if (blz_spawn_ex(x->pool, tally_fn, x->tally, x->opts, nullptr) == BLZ_OK) x->accepted.fetch_add(1);
        }
    };
    blz_task *blocker = nullptr;
    REQUIRE(blz_spawn(pool, blocker_fn, &b, &blocker) == BLZ_OK);
    REQUIRE(gate.wait_entered());

    // Queued behind the blocker: detached tasks, tasks with handles, and
    // tasks of a group that is then cancelled (skipped while destroy drains).
    for (int i = 0; i < kQueued; ++i) REQUIRE(blz_spawn_ex(pool, tally_fn, &plain, &opts, nullptr) == BLZ_OK);
    std::vector<blz_task *> handles(kHandles, nullptr);
    for (blz_task *&h : handles) REQUIRE(blz_spawn_ex(pool, tally_fn, &plain, &opts, &h) == BLZ_OK);
    blz_spawn_options group_opts = tally_options(skipped, group);
    for (int i = 0; i < kCancelled; ++i) {
        REQUIRE(blz_spawn_ex(nullptr, tally_fn, &skipped, &group_opts, nullptr) == BLZ_OK);
    }
    REQUIRE(blz_group_cancel(group) == BLZ_OK);

    std::atomic<bool> destroy_returned{false};
    blz_status destroy_status = 99;
    int plain_done_at_return = -1, plain_runs_at_return = -1, skipped_done_at_return = -1;
    std::thread destroyer([&] {
        destroy_status = blz_pool_destroy(pool);
        plain_done_at_return = plain.done.load();
        plain_runs_at_return = plain.fn_runs.load();
        skipped_done_at_return = skipped.done.load();
        destroy_returned.store(true);
    });
    // destroy has begun once the pool refuses outside calls.
    // CHECK, not REQUIRE: the destroyer thread must still be joined.
    CHECK(eventually([&] {
        blz_stats stats;
        stats.struct_size = sizeof(stats);
        return blz_pool_stats(pool, &stats) == BLZ_ESHUTDOWN;
    }));
    // Refused now, and their on_done never runs.
    blz_spawn_options refused_opts = tally_options(refused);
    blz_task *task = sentinel<blz_task>();
    CHECK(blz_spawn_ex(pool, tally_fn, &refused, &refused_opts, nullptr) == BLZ_ESHUTDOWN);
    CHECK(blz_spawn_ex(pool, tally_fn, &refused, &refused_opts, &task) == BLZ_ESHUTDOWN);
    CHECK(task == sentinel<blz_task>());
    CHECK_FALSE(destroy_returned.load());

    gate.release();
    destroyer.join();
    CHECK(destroy_status == BLZ_OK);
    CHECK(b.accepted.load() == kFromWorker);
    CHECK(plain_done_at_return == kQueued + kHandles + kFromWorker);
    CHECK(plain_runs_at_return == kQueued + kHandles + kFromWorker);
    CHECK(skipped_done_at_return == kCancelled);
    CHECK(plain.ok.load() == kQueued + kHandles + kFromWorker);
    CHECK(skipped.canceled.load() == kCancelled);
    CHECK(skipped.fn_runs.load() == 0);
    CHECK(plain.off_worker.load() == 0);
    CHECK(skipped.off_worker.load() == 0);
    CHECK(plain.bad_status.load() + skipped.bad_status.load() == 0);
    CHECK(refused.fn_runs.load() == 0);
    CHECK(refused.done.load() == 0);
    // Handles and the group outlive the pool.
    for (blz_task *h : handles) CHECK(blz_join(h) == BLZ_OK);
    CHECK(blz_join(blocker) == BLZ_OK);
    CHECK(blz_spawn_ex(nullptr, tally_fn, &refused, &group_opts, nullptr) == BLZ_ESHUTDOWN);
    CHECK(blz_group_wait(group) == BLZ_ECANCELED);
    CHECK(blz_group_destroy(group) == BLZ_OK);
    CHECK(skipped.done.load() == kCancelled);  // the refused group spawn added no on_done
}

TEST_CASE("an exception escaping on_done is counted in tasks_failed and changes nothing else",
          "[api][v02][on_done]") {
    Watchdog watchdog("on_done throws", seconds(60));
    Pool pool(1);
    uint64_t failed = stats_of(pool).tasks_failed;

    SECTION("the task succeeded: its join still returns BLZ_OK") {
        Rec r;
        r.pool = pool;
        r.done_throws = true;
        blz_spawn_options opts = options_for(r);
        blz_task *task = nullptr;
        REQUIRE(blz_spawn_ex(pool, rec_fn, &r, &opts, &task) == BLZ_OK);
        CHECK(blz_join(task) == BLZ_OK);
        check_rec(r, BLZ_OK, true);
        CHECK(settled_tasks_failed(pool, failed + 1) == failed + 1);
    }
    SECTION("the task failed too: BLZ_ETASK, counted twice") {
        Rec r;
        r.pool = pool;
        r.ending = Ending::kThrow;
        r.done_throws = true;
        blz_spawn_options opts = options_for(r);
        blz_task *task = nullptr;
        REQUIRE(blz_spawn_ex(pool, rec_fn, &r, &opts, &task) == BLZ_OK);
        CHECK(blz_task_wait_for(task, kForever) == BLZ_ETASK);
        check_rec(r, BLZ_ETASK, true);
        CHECK(settled_tasks_failed(pool, failed + 2) == failed + 2);
    }
    SECTION("detached, many times: the only worker survives and the pool keeps working") {
        constexpr int kTasks = 50;
        std::unique_ptr<Rec[]> recs(new Rec[kTasks]);
        for (int i = 0; i < kTasks; ++i) {
            recs[i].pool = pool;
            recs[i].done_throws = true;
            blz_spawn_options opts = options_for(recs[i]);
            REQUIRE(blz_spawn_ex(pool, rec_fn, &recs[i], &opts, nullptr) == BLZ_OK);
        }
        CHECK(settled_tasks_failed(pool, failed + kTasks) == failed + kTasks);
        for (int i = 0; i < kTasks; ++i) check_rec(recs[i], BLZ_OK, true);
        CHECK(blz_test::fib(pool, 15) == 610);
    }
    SECTION("in a group: the wait returns BLZ_OK and a fail-fast group is not cancelled") {
        for (uint32_t flags : {0u, unsigned{BLZ_GROUP_CANCEL_ON_FAILURE}}) {
            INFO("group flags " << flags);
            failed = stats_of(pool).tasks_failed;
            blz_group *group = nullptr;
            REQUIRE(blz_group_create_ex(pool, flags, &group) == BLZ_OK);
            Rec r;
            r.pool = pool;
            r.done_throws = true;
            blz_spawn_options opts = options_for(r, group);
            REQUIRE(blz_spawn_ex(nullptr, rec_fn, &r, &opts, nullptr) == BLZ_OK);
            CHECK(blz_group_wait(group) == BLZ_OK);
            CHECK(blz_group_cancelled(group) == 0);
            std::atomic<int> later{0};
            for (int i = 0; i < 10; ++i) REQUIRE(blz_group_spawn(group, count_into, &later) == BLZ_OK);
            CHECK(blz_group_destroy(group) == BLZ_OK);
            CHECK(later.load() == 10);
            check_rec(r, BLZ_OK, true);
            CHECK(settled_tasks_failed(pool, failed + 1) == failed + 1);
        }
    }
}

TEST_CASE("blz_fail in on_done has no effect", "[api][v02][on_done][fail]") {
    Watchdog watchdog("blz_fail in on_done", seconds(60));
    Pool pool(2);
    const uint64_t failed = stats_of(pool).tasks_failed;
    Rec r;
    r.pool = pool;
    r.done_fails = true;
    blz_spawn_options opts = options_for(r);
    blz_task *task = nullptr;
    REQUIRE(blz_spawn_ex(pool, rec_fn, &r, &opts, &task) == BLZ_OK);
    CHECK(blz_join(task) == BLZ_OK);
    check_rec(r, BLZ_OK, true);

    blz_group *group = nullptr;
    REQUIRE(blz_group_create_ex(pool, BLZ_GROUP_CANCEL_ON_FAILURE, &group) == BLZ_OK);
    Rec in_group;
    in_group.pool = pool;
    in_group.done_fails = true;
    opts = options_for(in_group, group);
    REQUIRE(blz_spawn_ex(nullptr, rec_fn, &in_group, &opts, nullptr) == BLZ_OK);
    CHECK(blz_group_wait(group) == BLZ_OK);
    CHECK(blz_group_cancelled(group) == 0);
    CHECK(blz_group_destroy(group) == BLZ_OK);
    check_rec(in_group, BLZ_OK, true);

    // A cancelled task's on_done calling blz_fail does not turn the
    // cancellation into a failure either.
    Pool single(1);
    REQUIRE(blz_group_create(single, &group) == BLZ_OK);
    Rec skipped;
    skipped.pool = single;
    skipped.done_fails = true;
    {
        HeldWorker held(single);
        opts = options_for(skipped, group);
        REQUIRE(blz_spawn_ex(nullptr, rec_fn, &skipped, &opts, nullptr) == BLZ_OK);
        REQUIRE(blz_group_cancel(group) == BLZ_OK);
    }
    CHECK(blz_group_wait(group) == BLZ_ECANCELED);
    CHECK(blz_group_destroy(group) == BLZ_OK);
    check_rec(skipped, BLZ_ECANCELED, false);

    CHECK(settled_tasks_failed(pool, failed) == failed);
    CHECK(stats_of(single).tasks_failed == 0);
}

// on_done belongs to no task: not to the task it reports, and not to a
// task whose join it happens to run nested in. So blz_cancelled() is 0 in
// it and blz_fail() changes nothing, even when it runs inside the join of a
// task whose group is cancelled or cancels on failure. Here the nesting is
// forced: on a pool of one worker, the outer task's blz_join runs the inner
// task (and then its on_done) inline.

namespace {

struct NestedDone {
    blz_pool *pool = nullptr;
    blz_group *outer_group = nullptr;
    bool cancel_outer_first = false;  // the outer task cancels its own group first
    std::atomic<int32_t> cancelled_in_done{-9};
    std::atomic<int> done_calls{0};
    std::atomic<blz_status> inner_join{99};

    static void inner(void *) {}
    static void on_done(void *arg, blz_status) {
        auto *n = static_cast<NestedDone *>(arg);
        n->cancelled_in_done.store(blz_cancelled());
        blz_fail();
        n->done_calls.fetch_add(1);
    }
    static void outer(void *arg) {
        auto *n = static_cast<NestedDone *>(arg);
        if (n->cancel_outer_first) blz_group_cancel(n->outer_group);
        blz_spawn_options opts;
        blz_spawn_options_init(&opts);
        opts.on_done = &NestedDone::on_done;
        opts.done_arg = n;
        blz_task *task = nullptr;
        if (blz_spawn_ex(n->pool, &NestedDone::inner, nullptr, &opts, &task) != BLZ_OK) return;
        n->inner_join.store(blz_join(task));  // runs the inner task here: the only worker
    }
};

}  // namespace

TEST_CASE("on_done nested in another task's join: blz_fail in it cancels nobody and blz_cancelled is 0",
          "[api][v02][on_done][fail]") {
    Watchdog watchdog("on_done nested in a join", seconds(60));
    const bool cancel_outer_first = GENERATE(false, true);
    INFO((cancel_outer_first ? "the outer task cancels its group first" : "the outer group cancels on failure"));
    Pool pool(1);
    NestedDone n;
    n.pool = pool;
    n.cancel_outer_first = cancel_outer_first;
    REQUIRE(blz_group_create_ex(pool, BLZ_GROUP_CANCEL_ON_FAILURE, &n.outer_group) == BLZ_OK);
    REQUIRE(blz_group_spawn(n.outer_group, &NestedDone::outer, &n) == BLZ_OK);
    const blz_status outer = blz_group_wait(n.outer_group);
    CHECK(outer == (cancel_outer_first ? BLZ_ECANCELED : BLZ_OK));
    CHECK(blz_group_destroy(n.outer_group) == BLZ_OK);
    CHECK(n.inner_join.load() == BLZ_OK);
    CHECK(n.done_calls.load() == 1);
    CHECK(n.cancelled_in_done.load() == 0);
    CHECK(settled_tasks_failed(pool, 0) == 0);
}

// on_done runs before its task counts as finished: a wait in it for that
// task, or for its group, would wait for itself. It returns BLZ_EDEADLK
// and changes nothing (the handle stays valid, the group is not reset).

namespace {

struct DoneWaitsForItself {
    Gate gate;                          // the task waits here until its handle is stored
    std::atomic<blz_task *> handle{nullptr};
    blz_group *group = nullptr;
    std::atomic<blz_status> bounded_join{99}, bounded_group{99}, join{99}, group_wait{99};

    static void on_done(void *arg, blz_status) {
        auto *w = static_cast<DoneWaitsForItself *>(arg);
        // Bounded first: on code that does not see the deadlock they time out instead of hanging.
        w->bounded_join.store(blz_task_wait_for(w->handle.load(), 100'000'000));
        w->bounded_group.store(blz_group_wait_for(w->group, 100'000'000));
        if (w->bounded_join.load() != BLZ_EDEADLK || w->bounded_group.load() != BLZ_EDEADLK) return;
        w->join.store(blz_join(w->handle.load()));
        w->group_wait.store(blz_group_wait(w->group));
    }
};

}  // namespace

TEST_CASE("on_done waiting for its own task or group returns BLZ_EDEADLK", "[api][v02][on_done]") {
    Watchdog watchdog("on_done waits for itself", seconds(60));
    Pool pool(2);
    DoneWaitsForItself w;
    OpenOnExit open{w.gate};
    REQUIRE(blz_group_create(pool, &w.group) == BLZ_OK);
    blz_spawn_options opts;
    blz_spawn_options_init(&opts);
    opts.group = w.group;
    opts.on_done = &DoneWaitsForItself::on_done;
    opts.done_arg = &w;
    blz_task *task = nullptr;
    REQUIRE(blz_spawn_ex(pool, gate_fn, &w.gate, &opts, &task) == BLZ_OK);
    w.handle.store(task);
    w.gate.release();
    CHECK(blz_group_wait(w.group) == BLZ_OK);
    CHECK(w.bounded_join.load() == BLZ_EDEADLK);
    CHECK(w.bounded_group.load() == BLZ_EDEADLK);
    CHECK(w.join.load() == BLZ_EDEADLK);
    CHECK(w.group_wait.load() == BLZ_EDEADLK);
    CHECK(blz_join(task) == BLZ_OK);  // the handle survived the refused waits
    CHECK(blz_group_destroy(w.group) == BLZ_OK);
}

// ===========================================================================
// fork()

namespace {

std::atomic<int> g_child_calls{0};
void child_fn(void *) { g_child_calls.fetch_add(1); }
void child_done(void *, blz_status) { g_child_calls.fetch_add(100); }
void child_bcast(void *, uint32_t) { g_child_calls.fetch_add(10000); }

int child_failures = 0;
#define CHILD_CHECK(expr)                                                              \
    do {                                                                               \
        if (!(expr)) {                                                                 \
            std::fprintf(stderr, "  child check FAILED (line %d): %s\n", __LINE__, #expr); \
            ++child_failures;                                                          \
        }                                                                              \
    } while (0)

struct ForkState {
    blz_pool *pool;
    blz_group *group;
    blz_task *pending;   // held by a gate in the parent at the fork
    blz_task *finished;  // ended before the fork
};

// In the child: every 0.2 call on the parent's pool is refused with
// EFORK, and nothing runs. No heap use beyond what the calls do.
int forked_child(const ForkState &s) {
    child_failures = 0;
    g_child_calls.store(0);
    blz_spawn_options opts;
    blz_spawn_options_init(&opts);
    opts.on_done = child_done;
    blz_task *task = sentinel<blz_task>();
    CHILD_CHECK(blz_spawn_ex(s.pool, child_fn, nullptr, &opts, &task) == BLZ_EFORK);
    CHILD_CHECK(blz_spawn_ex(s.pool, child_fn, nullptr, &opts, nullptr) == BLZ_EFORK);
    CHILD_CHECK(task == sentinel<blz_task>());
    opts.group = s.group;
    CHILD_CHECK(blz_spawn_ex(nullptr, child_fn, nullptr, &opts, nullptr) == BLZ_EFORK);
    blz_group *group = sentinel<blz_group>();
    CHILD_CHECK(blz_group_create_ex(s.pool, BLZ_GROUP_CANCEL_ON_FAILURE, &group) == BLZ_EFORK);
    CHILD_CHECK(group == sentinel<blz_group>());
    CHILD_CHECK(blz_broadcast(s.pool, child_bcast, nullptr) == BLZ_EFORK);
    CHILD_CHECK(blz_cancelled() == 0);
    blz_fail();  // no job here: nothing
    CHILD_CHECK(blz_task_wait_for(s.finished, 0) == BLZ_OK);  // ended before the fork
    CHILD_CHECK(blz_task_wait_for(s.pending, 0) == BLZ_EFORK);  // the handle is freed
    CHILD_CHECK(blz_group_wait_for(s.group, 0) == BLZ_EFORK);
    CHILD_CHECK(blz_group_destroy(s.group) == BLZ_EFORK);
    CHILD_CHECK(blz_pool_destroy(s.pool) == BLZ_EFORK);
    CHILD_CHECK(g_child_calls.load() == 0);
    return child_failures > 100 ? 100 : child_failures;
}

}  // namespace

TEST_CASE("fork(): in the child the 0.2 calls on the parent's pool return EFORK and run nothing",
          "[api][v02][fork]") {
    Watchdog watchdog("fork 0.2", seconds(120));
    Pool pool(2);
    blz_group *group = nullptr;
    REQUIRE(blz_group_create(pool, &group) == BLZ_OK);
    Gate gate;
    OpenOnExit open_on_exit{gate};
    Rec pending, finished;
    pending.pool = pool;
    pending.gate = &gate;
    finished.pool = pool;
    blz_spawn_options opts = options_for(pending);
    blz_task *pending_task = nullptr, *finished_task = nullptr;
    REQUIRE(blz_spawn_ex(pool, rec_fn, &pending, &opts, &pending_task) == BLZ_OK);
    REQUIRE(gate.wait_entered());
    opts = options_for(finished);
    REQUIRE(blz_spawn_ex(pool, rec_fn, &finished, &opts, &finished_task) == BLZ_OK);
    REQUIRE(eventually([&] { return finished.done_returned.load(); }));
    // The other worker asleep: nobody allocates while the child is forked.
    REQUIRE(eventually([&] { return stats_of(pool).sleeping_now == 1; }));

    ForkState state{pool, group, pending_task, finished_task};
    const int status = blz_test::run_forked([&] { return forked_child(state); });
    INFO("child status " << status);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);

    // The parent is untouched: the pending task finishes, on_done as usual.
    gate.release();
    CHECK(blz_task_wait_for(pending_task, kMinute) == BLZ_OK);
    CHECK(blz_join(finished_task) == BLZ_OK);
    check_rec(pending, BLZ_OK, true);
    check_rec(finished, BLZ_OK, true);
    CHECK(blz_group_destroy(group) == BLZ_OK);
}
