// Recorded tasks and their on_done, shared by the tests of blz_spawn_ex,
// on_done, blz_task_wait_for and blz_task_detach (api_on_done.cpp,
// api_task_wait_for.cpp, api_task_detach.cpp): a task recorded in detail
// (Rec), many tasks counted (Tally), one task of many (Slot), and the waits
// a test can make for a task. Code on workers only records (atomics); the
// checks, which assert with Catch2, run on the test thread. support.hpp
// stays free of Catch2 (the fuzzer includes it); this header does not.
#pragma once

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <thread>

#include "support.hpp"

namespace blz_test {

inline constexpr bool kSanitized = kAddressSanitizer || kThreadSanitizer;
inline constexpr uint64_t kForever = UINT64_MAX;                      // ns: no bound
inline constexpr uint64_t kMinute = 60ull * 1000 * 1000 * 1000;  // ns: "long enough" in a bounded wait

// Occupies the only worker of a 1-worker pool until it goes out of scope
// (or release()), so that what is spawned next queues behind it; joins the
// holding task there, before the gate it reads is gone.
struct HeldWorker {
    Gate gate;
    blz_task *task = nullptr;
    explicit HeldWorker(blz_pool *pool) {
        REQUIRE(blz_spawn(pool, gate_fn, &gate, &task) == BLZ_OK);
        if (!gate.wait_entered()) {  // no destructor runs for a constructor that throws
            gate.release();
            blz_join(task);
            FAIL("the holding task never started");
        }
    }
    ~HeldWorker() {
        gate.release();
        blz_join(task);
    }
    HeldWorker(const HeldWorker &) = delete;
    HeldWorker &operator=(const HeldWorker &) = delete;
    void release() { gate.release(); }
};

// How a recorded task ends.
enum class Ending { kOk, kThrow, kFail };

inline blz_status status_of(Ending ending) { return ending == Ending::kOk ? BLZ_OK : BLZ_ETASK; }

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

inline void rec_fn(void *arg) {
    auto *r = static_cast<Rec *>(arg);
    r->fn_runs.fetch_add(1);
    r->fn_worker.store(blz_worker_index(r->pool));
    if (r->gate != nullptr) r->gate->pass();
    r->fn_ended.store(true);
    if (r->ending == Ending::kThrow) throw std::runtime_error("rec_fn fails");
    if (r->ending == Ending::kFail) blz_fail();
}

inline void rec_done(void *arg, blz_status status) {
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

inline blz_spawn_options options_for(Rec &r, blz_group *group = nullptr) {
    blz_spawn_options opts;
    blz_spawn_options_init(&opts);
    opts.group = group;
    opts.on_done = rec_done;
    opts.done_arg = &r;
    return opts;
}

// What a finished Rec must show: on_done once, with `expected`, on the
// worker that ran fn (or on some worker when fn was skipped), after fn.
inline void check_rec(const Rec &r, blz_status expected, bool ran) {
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
inline void tally_fn(void *arg) { static_cast<Tally *>(arg)->fn_runs.fetch_add(1); }
inline void tally_done(void *arg, blz_status status) {
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
inline blz_spawn_options tally_options(Tally &t, blz_group *group = nullptr) {
    blz_spawn_options opts;
    blz_spawn_options_init(&opts);
    opts.group = group;
    opts.on_done = tally_done;
    opts.done_arg = &t;
    return opts;
}

// Waits until tasks_failed reaches `expected` (at most a minute) and the pool
// is idle, then returns the settled count (an overcount shows as more).
inline uint64_t settled_tasks_failed(blz_pool *pool, uint64_t expected) {
    eventually([&] { return stats_of(pool).tasks_failed >= expected; }, std::chrono::seconds(10));
    REQUIRE(blz_test::wait_until_asleep(pool, std::chrono::milliseconds(60000)));
    return stats_of(pool).tasks_failed;
}

// One task of many, with its on_done checked on the worker.
struct Slot {
    blz_pool *pool = nullptr;
    std::atomic<int> fn_runs{0};
    std::atomic<int32_t> fn_worker{-2};
    std::atomic<bool> fn_ended{false};
    std::atomic<int> done_calls{0};
    std::atomic<int32_t> done_status{99};
    std::atomic<int> problems{0};  // on_done off a worker, on another worker than fn, or before fn ended
};
inline void slot_fn(void *arg) {
    auto *s = static_cast<Slot *>(arg);
    s->fn_runs.fetch_add(1);
    s->fn_worker.store(blz_worker_index(s->pool));
    s->fn_ended.store(true);
}
inline void slot_done(void *arg, blz_status status) {
    auto *s = static_cast<Slot *>(arg);
    int32_t here = blz_worker_index(s->pool);
    if (here < 0) s->problems.fetch_add(1);
    if (s->fn_runs.load() == 1 && (!s->fn_ended.load() || s->fn_worker.load() != here)) s->problems.fetch_add(1);
    s->done_status.store(status);
    s->done_calls.fetch_add(1);
}
inline blz_spawn_options slot_options(Slot &s, blz_group *group = nullptr) {
    blz_spawn_options opts;
    blz_spawn_options_init(&opts);
    opts.group = group;
    opts.on_done = slot_done;
    opts.done_arg = &s;
    return opts;
}

// How a test waits for a task (or its group).
enum class Waiter { kJoin, kWaitForever, kWaitFor, kGroupWait, kGroupWaitFor };
inline const char *name_of(Waiter w) {
    switch (w) {
        case Waiter::kJoin: return "blz_join";
        case Waiter::kWaitForever: return "blz_task_wait_for(UINT64_MAX)";
        case Waiter::kWaitFor: return "blz_task_wait_for(60 s)";
        case Waiter::kGroupWait: return "blz_group_wait";
        case Waiter::kGroupWaitFor: return "blz_group_wait_for(60 s)";
    }
    return "?";
}

// An event made and destroyed by the test case.
class Event {
public:
    Event() { REQUIRE(blz_event_create(&event_) == BLZ_OK); }
    ~Event() {
        if (event_ != nullptr) blz_event_destroy(event_);
    }
    Event(const Event &) = delete;
    Event &operator=(const Event &) = delete;
    operator blz_event *() const { return event_; }
    // For a blz_spawn_options list of one (after_events).
    blz_event *const *address() const { return &event_; }
    // Destroys it now (the destructor then does nothing).
    void destroy() {
        REQUIRE(blz_event_destroy(event_) == BLZ_OK);
        event_ = nullptr;
    }

private:
    blz_event *event_ = nullptr;
};

}  // namespace blz_test
