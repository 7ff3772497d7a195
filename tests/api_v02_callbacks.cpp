// 0.2 completion callbacks and task handles, from the contract in blitz.h:
// blz_spawn_options_init, blz_spawn_ex (options, errors, the group's pool),
// on_done (exactly once, on the worker that finished the task, with its
// status, before every wait and blz_pool_destroy return, exceptions that
// escape it, blz_fail in it), blz_task_wait_for (poll, timeout, the race
// with the task's end, from a worker, EDEADLK), blz_task_detach, and the
// strings and version of 0.2.
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

namespace {

using blz_test::Pool;
using blz_test::thunk_of;
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

constexpr bool kSanitized = blz_test::kAddressSanitizer || blz_test::kThreadSanitizer;
constexpr uint64_t kForever = UINT64_MAX;
constexpr uint64_t kMinute = 60ull * 1000 * 1000 * 1000;  // ns: "long enough" in a bounded wait

// ---------------------------------------------------------------------------
// Helpers


// How a recorded task ends.
enum class Ending { kOk, kThrow, kFail };

blz_status status_of(Ending ending) { return ending == Ending::kOk ? BLZ_OK : BLZ_ETASK; }

// One task and its on_done, recorded in detail.
struct Rec {
    blz_pool *pool = nullptr;    // where fn and on_done must run
    Gate *gate = nullptr;        // fn passes it first, if set
    Ending ending = Ending::kOk;
    Gate *done_gate = nullptr;   // on_done passes it, if set
    bool done_throws = false;    // on_done throws after recording
    bool done_fails = false;     // on_done calls blz_fail
    std::atomic<int> fn_runs{0};
    std::atomic<bool> fn_ended{false};
    std::atomic<int32_t> fn_worker{-2};
    std::atomic<int> done_calls{0};
    std::atomic<int32_t> done_status{99};
    std::atomic<int32_t> done_worker{-2};
    std::atomic<bool> done_before_fn_ended{false};
    std::atomic<bool> done_returned{false};
};

void rec_fn(void *arg) {
    auto *r = static_cast<Rec *>(arg);
    r->fn_runs.fetch_add(1);
    r->fn_worker.store(blz_worker_index(r->pool));
    if (r->gate != nullptr) r->gate->pass();
    r->fn_ended.store(true);
    if (r->ending == Ending::kThrow) throw std::runtime_error("rec_fn fails");
    if (r->ending == Ending::kFail) blz_fail();
}

void rec_done(void *arg, blz_status status) {
    auto *r = static_cast<Rec *>(arg);
    if (r->fn_runs.load() != 0 && !r->fn_ended.load()) r->done_before_fn_ended.store(true);
    r->done_worker.store(blz_worker_index(r->pool));
    r->done_status.store(status);
    r->done_calls.fetch_add(1);
    if (r->done_gate != nullptr) r->done_gate->pass();
    if (r->done_fails) blz_fail();
    r->done_returned.store(true);
    if (r->done_throws) throw std::logic_error("on_done throws");
}

blz_spawn_options options_for(Rec &r, blz_group *group = nullptr) {
    blz_spawn_options opts;
    blz_spawn_options_init(&opts);
    opts.group = group;
    opts.on_done = rec_done;
    opts.done_arg = &r;
    return opts;
}

// What a finished Rec must show: on_done once, with `expected`, on the
// worker that ran fn (or on some worker when fn was skipped), after fn.
void check_rec(const Rec &r, blz_status expected, bool ran) {
    INFO("on_done status " << r.done_status.load() << ", expected " << expected);
    CHECK(r.done_calls.load() == 1);
    CHECK(r.done_status.load() == expected);
    CHECK(r.done_returned.load());
    CHECK(r.fn_runs.load() == (ran ? 1 : 0));
    CHECK(r.done_worker.load() >= 0);
    if (ran) CHECK(r.done_worker.load() == r.fn_worker.load());
    CHECK_FALSE(r.done_before_fn_ended.load());
}

// Counts many tasks and their on_done calls.
struct Tally {
    blz_pool *pool = nullptr;
    std::atomic<int> fn_runs{0};
    std::atomic<int> done{0};
    std::atomic<int> ok{0};
    std::atomic<int> failed{0};
    std::atomic<int> canceled{0};
    std::atomic<int> bad_status{0};
    std::atomic<int> off_worker{0};
};
void tally_fn(void *arg) { static_cast<Tally *>(arg)->fn_runs.fetch_add(1); }
void tally_done(void *arg, blz_status status) {
    auto *t = static_cast<Tally *>(arg);
    if (t->pool != nullptr && blz_worker_index(t->pool) < 0) t->off_worker.fetch_add(1);
    switch (status) {
        case BLZ_OK: t->ok.fetch_add(1); break;
        case BLZ_ETASK: t->failed.fetch_add(1); break;
        case BLZ_ECANCELED: t->canceled.fetch_add(1); break;
        default: t->bad_status.fetch_add(1); break;
    }
    std::this_thread::yield();  // a little work: a destroy that does not wait for on_done shows
    t->done.fetch_add(1);       // counted last: on_done has (all but) returned
}
blz_spawn_options tally_options(Tally &t, blz_group *group = nullptr) {
    blz_spawn_options opts;
    blz_spawn_options_init(&opts);
    opts.group = group;
    opts.on_done = tally_done;
    opts.done_arg = &t;
    return opts;
}

// Waits until tasks_failed reaches `expected` (at most a minute) and the pool
// is idle, then returns the settled count (an overcount shows as more).
uint64_t settled_tasks_failed(blz_pool *pool, uint64_t expected) {
    eventually([&] { return stats_of(pool).tasks_failed >= expected; }, seconds(10));
    REQUIRE(blz_test::wait_until_asleep(pool, milliseconds(60000)));
    return stats_of(pool).tasks_failed;
}

// A 1-thread pool's only worker held by a gate, so that what is spawned
// next queues behind it.
struct HeldWorker {
    Gate gate;
    blz_task *task = nullptr;
    explicit HeldWorker(blz_pool *pool) {
        REQUIRE(blz_spawn(pool, gate_fn, &gate, &task) == BLZ_OK);
        REQUIRE(gate.wait_entered());
    }
    ~HeldWorker() {
        gate.release();
        if (task != nullptr) blz_join(task);
    }
    HeldWorker(const HeldWorker &) = delete;
    HeldWorker &operator=(const HeldWorker &) = delete;
    void release() { gate.release(); }
};

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
        for (uint32_t size : {0u, 4u, static_cast<uint32_t>(offsetof(blz_spawn_options, done_arg)),
                              static_cast<uint32_t>(sizeof(blz_spawn_options) - 1)}) {
            INFO("struct_size " << size);
            opts.struct_size = size;
            for (blz_task **out : outs) CHECK(blz_spawn_ex(pool, tally_fn, &never, &opts, out) == BLZ_EINVAL);
            opts.group = group;  // with a group as well
            for (blz_task **out : outs) CHECK(blz_spawn_ex(nullptr, tally_fn, &never, &opts, out) == BLZ_EINVAL);
            opts.group = nullptr;
        }
    }
    SECTION("unknown flags") {
        // 1 is BLZ_SPAWN_HIGH_PRIORITY (api_v02_operate.cpp), 2 BLZ_SPAWN_DONE_AFTER_FINISH
        // (api_task_cancel.cpp); every other bit is unknown.
        for (uint32_t flags : {4u, 7u, 0x100u, 0x80000000u, ~0u}) {
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

struct Slot {
    blz_pool *pool = nullptr;
    std::atomic<int> fn_runs{0};
    std::atomic<int32_t> fn_worker{-2};
    std::atomic<bool> fn_ended{false};
    std::atomic<int> done_calls{0};
    std::atomic<int32_t> done_status{99};
    std::atomic<int> problems{0};  // on_done off a worker, on another worker than fn, or before fn ended
};
void slot_fn(void *arg) {
    auto *s = static_cast<Slot *>(arg);
    s->fn_runs.fetch_add(1);
    s->fn_worker.store(blz_worker_index(s->pool));
    s->fn_ended.store(true);
}
void slot_done(void *arg, blz_status status) {
    auto *s = static_cast<Slot *>(arg);
    int32_t here = blz_worker_index(s->pool);
    if (here < 0) s->problems.fetch_add(1);
    if (s->fn_runs.load() == 1 && (!s->fn_ended.load() || s->fn_worker.load() != here)) s->problems.fetch_add(1);
    s->done_status.store(status);
    s->done_calls.fetch_add(1);
}
blz_spawn_options slot_options(Slot &s, blz_group *group = nullptr) {
    blz_spawn_options opts;
    blz_spawn_options_init(&opts);
    opts.group = group;
    opts.on_done = slot_done;
    opts.done_arg = &s;
    return opts;
}

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

enum class Waiter { kJoin, kWaitForever, kWaitFor, kGroupWait, kGroupWaitFor };
enum class Outcome { kOk, kThrow, kFail, kCancelled };

const char *name_of(Waiter w) {
    switch (w) {
        case Waiter::kJoin: return "blz_join";
        case Waiter::kWaitForever: return "blz_task_wait_for(UINT64_MAX)";
        case Waiter::kWaitFor: return "blz_task_wait_for(60 s)";
        case Waiter::kGroupWait: return "blz_group_wait";
        case Waiter::kGroupWaitFor: return "blz_group_wait_for(60 s)";
    }
    return "?";
}
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
// blz_task_wait_for

TEST_CASE("blz_task_wait_for(NULL) returns EINVAL", "[api][v02][wait_for]") {
    CHECK(blz_task_wait_for(nullptr, 0) == BLZ_EINVAL);
    CHECK(blz_task_wait_for(nullptr, 1000) == BLZ_EINVAL);
    CHECK(blz_task_wait_for(nullptr, kForever) == BLZ_EINVAL);
}

TEST_CASE("blz_task_wait_for with 0 only polls: ETIMEDOUT while the task is held, the handle stays valid",
          "[api][v02][wait_for]") {
    Watchdog watchdog("wait_for 0 polls", seconds(60));
    Pool pool(2);
    Pool other(1);
    Gate gate;
    OpenOnExit open_on_exit{gate};
    Rec r;
    r.pool = pool;
    r.gate = &gate;
    blz_spawn_options opts = options_for(r);
    blz_task *task = nullptr;
    REQUIRE(blz_spawn_ex(pool, rec_fn, &r, &opts, &task) == BLZ_OK);
    REQUIRE(gate.wait_entered());

    for (int i = 0; i < 5; ++i) {
        auto start = std::chrono::steady_clock::now();
        CHECK(blz_task_wait_for(task, 0) == BLZ_ETIMEDOUT);
        CHECK(std::chrono::steady_clock::now() - start < seconds(10));  // a poll, not a wait for the task
    }
    // From a worker of another pool as well, and from a worker of the task's pool.
    blz_status from_other = 99, from_own = 99;
    REQUIRE(on_worker(other, [&] { from_other = blz_task_wait_for(task, 0); }) == BLZ_OK);
    REQUIRE(on_worker(pool, [&] { from_own = blz_task_wait_for(task, 0); }) == BLZ_OK);
    CHECK(from_other == BLZ_ETIMEDOUT);
    CHECK(from_own == BLZ_ETIMEDOUT);
    CHECK(r.done_calls.load() == 0);

    gate.release();
    SECTION("then blz_join") { CHECK(blz_join(task) == BLZ_OK); }
    SECTION("then blz_task_detach") {
        CHECK(blz_task_detach(task) == BLZ_OK);
        REQUIRE(eventually([&] { return r.done_returned.load(); }));
    }
    SECTION("then polls until it finished") {
        blz_status status = BLZ_ETIMEDOUT;
        REQUIRE(eventually([&] { return (status = blz_task_wait_for(task, 0)) != BLZ_ETIMEDOUT; }));
        CHECK(status == BLZ_OK);
    }
    check_rec(r, BLZ_OK, true);
}

TEST_CASE("blz_task_wait_for times out, then a later wait sees the task finish", "[api][v02][wait_for]") {
    Watchdog watchdog("wait_for timeout then finish", seconds(60));
    Pool pool(2);
    const Ending ending = GENERATE(Ending::kOk, Ending::kThrow, Ending::kFail);
    INFO("ending " << static_cast<int>(ending));
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

    for (uint64_t timeout_ms : {1u, 20u}) {
        INFO("timeout " << timeout_ms << " ms");
        auto start = std::chrono::steady_clock::now();
        CHECK(blz_task_wait_for(task, timeout_ms * 1000000) == BLZ_ETIMEDOUT);
        auto waited = std::chrono::steady_clock::now() - start;
        // It waited (about) the timeout: a deadline, not a poll. Half of it,
        // for clocks coarser than steady_clock.
        CHECK(waited >= std::chrono::microseconds(timeout_ms * 500));
    }
    CHECK(r.done_calls.load() == 0);

    // The task finishes while a long bounded wait is under way.
    std::thread opener([&] {
        std::this_thread::sleep_for(milliseconds(20));
        gate.release();
    });
    blz_status status = blz_task_wait_for(task, kMinute);
    opener.join();
    CHECK(status == status_of(ending));
    check_rec(r, status_of(ending), true);
}

TEST_CASE("blz_task_wait_for from a worker of the task's pool runs other jobs while it waits",
          "[api][v02][wait_for]") {
    Watchdog watchdog("wait_for from a worker", seconds(60));

    SECTION("one worker: the task sits in the waiter's own deque, so the waiter must run it") {
        Pool pool(1);
        blz_pool *p = pool;
        Rec r;
        r.pool = pool;
        blz_status spawned = 99, waited = 99;
        int32_t waiter_index = -2;
        REQUIRE(on_worker(p, [&] {
                    waiter_index = blz_worker_index(p);
                    blz_spawn_options opts = options_for(r);
                    blz_task *task = nullptr;
                    spawned = blz_spawn_ex(p, rec_fn, &r, &opts, &task);
                    if (spawned == BLZ_OK) waited = blz_task_wait_for(task, kMinute);
                }) == BLZ_OK);
        CHECK(spawned == BLZ_OK);
        CHECK(waited == BLZ_OK);
        CHECK(r.fn_worker.load() == waiter_index);
        check_rec(r, BLZ_OK, true);
    }
    SECTION("two workers: times out on a held task while running a job of its own deque, then finishes") {
        Pool pool(2);
        blz_pool *p = pool;
        Gate gate;
        OpenOnExit open_on_exit{gate};
        Rec held;
        held.pool = pool;
        held.gate = &gate;
        blz_spawn_options opts = options_for(held);
        blz_task *task = nullptr;
        REQUIRE(blz_spawn_ex(pool, rec_fn, &held, &opts, &task) == BLZ_OK);
        REQUIRE(gate.wait_entered());  // one worker is held; blz_call runs on the other
        struct {
            blz_status poll = 99, bounded = 99, finished = 99, spawned = 99;
            bool side_ran_during_wait = false;
            int32_t side_worker = -2, waiter_worker = -2;
        } out;
        std::atomic<int> side_runs{0};
        struct Side {
            std::atomic<int> *runs;
            blz_pool *pool;
            std::atomic<int32_t> worker{-2};
        } side{&side_runs, p};
        auto side_fn = [](void *arg) {
            auto *s = static_cast<Side *>(arg);
            s->worker.store(blz_worker_index(s->pool));
            s->runs->fetch_add(1);
        };
        REQUIRE(on_worker(p, [&] {
                    out.waiter_worker = blz_worker_index(p);
                    out.poll = blz_task_wait_for(task, 0);
                    out.spawned = blz_spawn(p, side_fn, &side, nullptr);  // into this worker's deque
                    // Only this worker can run the side job (the other one is
                    // held), and only inside a wait. A wait whose deadline
                    // passed before it looked (a descheduled thread) may not
                    // have: wait again, each wait timing out.
                    out.bounded = BLZ_ETIMEDOUT;
                    for (int i = 0; i < 100 && out.bounded == BLZ_ETIMEDOUT && side_runs.load() == 0; ++i) {
                        out.bounded = blz_task_wait_for(task, 20 * 1000000);
                    }
                    out.side_ran_during_wait = side_runs.load() == 1;
                    gate.release();
                    out.finished = blz_task_wait_for(task, kMinute);
                }) == BLZ_OK);
        CHECK(out.poll == BLZ_ETIMEDOUT);
        CHECK(out.spawned == BLZ_OK);
        CHECK(out.bounded == BLZ_ETIMEDOUT);
        CHECK(out.side_ran_during_wait);
        CHECK(side.worker.load() == out.waiter_worker);
        CHECK(out.finished == BLZ_OK);
        check_rec(held, BLZ_OK, true);
    }
}

namespace {

struct SelfWait {
    blz_pool *pool = nullptr;
    std::atomic<blz_task *> handle{nullptr};
    blz_status poll = 99, bounded = 99, forever = 99, nested = 99;
    std::atomic<bool> done{false};
};
void self_wait_task(void *arg) {
    auto *s = static_cast<SelfWait *>(arg);
    blz_task *me;
    while ((me = s->handle.load()) == nullptr) std::this_thread::yield();
    s->poll = blz_task_wait_for(me, 0);
    s->bounded = blz_task_wait_for(me, 1000000);
    s->forever = blz_task_wait_for(me, kForever);
    auto nested = [s, me] { s->nested = blz_task_wait_for(me, kMinute); };
    if (blz_call(s->pool, thunk_of(nested), &nested) != BLZ_OK) s->nested = 98;
    s->done.store(true);
}

}  // namespace

TEST_CASE("blz_task_wait_for from inside the task itself returns EDEADLK and changes nothing",
          "[api][v02][wait_for]") {
    Watchdog watchdog("wait_for self", seconds(60));
    Pool pool(2);
    SelfWait s;
    s.pool = pool;
    blz_task *task = nullptr;
    REQUIRE(blz_spawn(pool, self_wait_task, &s, &task) == BLZ_OK);
    s.handle.store(task);
    REQUIRE(eventually([&] { return s.done.load(); }));
    CHECK(s.poll == BLZ_EDEADLK);
    CHECK(s.bounded == BLZ_EDEADLK);
    CHECK(s.forever == BLZ_EDEADLK);
    CHECK(s.nested == BLZ_EDEADLK);
    CHECK(blz_task_wait_for(task, kMinute) == BLZ_OK);  // the handle is still valid
}

namespace {

// A task for the race: spins a little (a different amount each time) and
// ends as told; on_done records once.
struct RaceSlot {
    Ending ending = Ending::kOk;
    unsigned spin = 0;
    std::atomic<int> fn_runs{0};
    std::atomic<int> done_calls{0};
    std::atomic<int32_t> done_status{99};
};
void race_fn(void *arg) {
    auto *s = static_cast<RaceSlot *>(arg);
    s->fn_runs.fetch_add(1);
    std::atomic<unsigned> spun{0};
    while (spun.fetch_add(1, std::memory_order_relaxed) < s->spin) {
    }
    if (s->ending == Ending::kThrow) throw std::runtime_error("race_fn fails");
    if (s->ending == Ending::kFail) blz_fail();
}
void race_done(void *arg, blz_status status) {
    auto *s = static_cast<RaceSlot *>(arg);
    s->done_status.store(status);
    s->done_calls.fetch_add(1);
}

struct RaceResult {
    int spawn_errors = 0, wrong_status = 0, done_not_once = 0, done_status_differs = 0, fn_not_once = 0;
    long timeouts = 0;
};

// Spawns `n` tasks one after the other and waits for each with tiny
// timeouts in a loop until one call reports the end.
RaceResult wait_for_race(blz_pool *pool, int n, unsigned seed) {
    static constexpr uint64_t kTimeouts[] = {0, 1, 100, 1000, 20000};
    RaceResult out;
    std::unique_ptr<RaceSlot[]> slots(new RaceSlot[static_cast<size_t>(n)]);
    unsigned k = seed;
    for (int i = 0; i < n; ++i) {
        RaceSlot &s = slots[i];
        s.ending = i % 3 == 0 ? Ending::kOk : i % 3 == 1 ? Ending::kThrow : Ending::kFail;
        s.spin = (static_cast<unsigned>(i) * 2654435761u + seed) % 2000;
        blz_spawn_options opts;
        blz_spawn_options_init(&opts);
        opts.on_done = race_done;
        opts.done_arg = &s;
        blz_task *task = nullptr;
        if (blz_spawn_ex(pool, race_fn, &s, &opts, &task) != BLZ_OK) {
            ++out.spawn_errors;
            continue;
        }
        blz_status status;
        while ((status = blz_task_wait_for(task, kTimeouts[k++ % 5])) == BLZ_ETIMEDOUT) ++out.timeouts;
        // The handle is freed now: exactly one result that is not ETIMEDOUT.
        if (status != status_of(s.ending)) ++out.wrong_status;
        if (s.done_calls.load() != 1) ++out.done_not_once;  // on_done returned before the wait did
        if (s.done_status.load() != status) ++out.done_status_differs;
        if (s.fn_runs.load() != 1) ++out.fn_not_once;
    }
    return out;
}

void check_race(const RaceResult &r) {
    INFO("timeouts seen: " << r.timeouts);
    CHECK(r.spawn_errors == 0);
    CHECK(r.wrong_status == 0);
    CHECK(r.done_not_once == 0);
    CHECK(r.done_status_differs == 0);
    CHECK(r.fn_not_once == 0);
}

}  // namespace

TEST_CASE("blz_task_wait_for with tiny timeouts racing the task's end: one final result, on_done before it",
          "[api][v02][wait_for][race]") {
    Watchdog watchdog("wait_for race", seconds(180));
    const int n = blz_test::kThreadSanitizer ? 5000 : blz_test::kAddressSanitizer ? 10000 : 60000;
    Pool pool(2);
    blz_pool *p = pool;

    SECTION("from outside") { check_race(wait_for_race(p, n, 1)); }
    SECTION("from two outside threads at once") {
        RaceResult a, b;
        std::thread other([&] { b = wait_for_race(p, n / 2, 7); });
        a = wait_for_race(p, n / 2, 3);
        other.join();
        check_race(a);
        check_race(b);
    }
    SECTION("from a worker of the pool") {
        RaceResult r;
        REQUIRE(on_worker(p, [&] { r = wait_for_race(p, n, 5); }) == BLZ_OK);
        check_race(r);
    }
    SECTION("from a worker of another pool") {
        Pool other(1);
        RaceResult r;
        REQUIRE(on_worker(other, [&] { r = wait_for_race(p, n / 2, 11); }) == BLZ_OK);
        check_race(r);
    }
}

// ===========================================================================
// blz_task_detach

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
