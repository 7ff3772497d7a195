// Bounded waits for a task, from the contract in blitz.h: blz_task_wait_for
// (poll, timeout, the race with the task's end, from a worker, EDEADLK).
// The records of tasks it shares with api_on_done.cpp are in
// task_records.hpp.
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
#include <stdexcept>
#include <thread>

#include "support.hpp"
#include "task_records.hpp"

namespace {

using blz_test::kForever;
using blz_test::kMinute;
using blz_test::Pool;
using blz_test::thunk_of;
using blz_test::on_worker;
using blz_test::eventually;
using blz_test::Gate;
using blz_test::OpenOnExit;
using blz_test::Watchdog;
using blz_test::Ending;
using blz_test::status_of;
using blz_test::Rec;
using blz_test::rec_fn;
using blz_test::options_for;
using blz_test::check_rec;
using std::chrono::milliseconds;
using std::chrono::seconds;


}  // namespace

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
