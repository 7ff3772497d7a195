// 0.2 blz_pool_release, from the contract in blitz.h: the call returns at
// once; a destroy on a thread of its own waits for the accepted work, runs
// on_thread_stop on every worker, and only then calls on_destroyed, once,
// with BLZ_OK; a task may release its own pool (where blz_pool_destroy says
// BLZ_EDEADLK) and keeps using it until it returns; refusals change nothing;
// in a forked child the release is synchronous and says BLZ_EFORK.
//
// The dangerous interleavings are held open by gates: the pool released
// while a task runs (and spawns more work after the release), while a
// thread outside the pool is inside blz_call, and from inside the task
// itself. Timeouts are generous upper bounds; every case runs under a watchdog.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <pthread.h>
#include <thread>

#include "support.hpp"

namespace {

using blz_test::eventually;
using blz_test::Gate;
using blz_test::OpenOnExit;
using blz_test::on_worker;
using blz_test::run_forked;
using blz_test::thunk_of;
using blz_test::Watchdog;
using std::chrono::milliseconds;
using std::chrono::seconds;

// What a released pool did, in order: every hook and the callback draws a
// ticket from one counter, so the test can tell which came first.
struct Record {
    std::atomic<int> ticket{0};
    std::atomic<int> stops{0};
    std::atomic<int> last_stop_ticket{-1};
    std::atomic<int> destroyed_calls{0};
    std::atomic<int> destroyed_ticket{-1};
    std::atomic<blz_status> destroyed_status{99};
    std::atomic<bool> destroyed_on_worker{false};
    std::atomic<int> tasks_run{0};
    pthread_t destroyed_thread{};
    // on_destroyed passes through this gate when it is set: the callback may block.
    Gate *destroyed_gate = nullptr;

    bool destroyed() const { return destroyed_calls.load() > 0; }
};

void on_stop(void *user, uint32_t) {
    auto *r = static_cast<Record *>(user);
    const int t = r->ticket.fetch_add(1);
    int last = r->last_stop_ticket.load();
    while (t > last && !r->last_stop_ticket.compare_exchange_weak(last, t)) {
    }
    r->stops.fetch_add(1);  // last: a test that saw every stop may let `r` go
}

void on_destroyed(void *arg, blz_status status) {
    auto *r = static_cast<Record *>(arg);
    r->destroyed_thread = pthread_self();
    r->destroyed_status.store(status);
    r->destroyed_ticket.store(r->ticket.fetch_add(1));
    if (r->destroyed_gate != nullptr) r->destroyed_gate->pass();
    r->destroyed_calls.fetch_add(1);  // last: the test reads the rest after seeing it
}

blz_pool *make_pool(Record &r, uint32_t workers) {
    blz_pool_config config;
    blz_pool_config_init(&config);
    config.num_threads = workers;
    config.on_thread_stop = on_stop;
    config.user = &r;
    blz_pool *pool = nullptr;
    REQUIRE(blz_pool_create(&config, &pool) == BLZ_OK);
    return pool;
}

void count_task(void *arg) { static_cast<Record *>(arg)->tasks_run.fetch_add(1); }

// After on_destroyed: it ran once, with BLZ_OK, after every worker's on_thread_stop.
void check_destroyed_after_stops(const Record &r, uint32_t workers) {
    CHECK(r.destroyed_calls.load() == 1);
    CHECK(r.destroyed_status.load() == BLZ_OK);
    CHECK(r.stops.load() == static_cast<int>(workers));
    CHECK(r.destroyed_ticket.load() > r.last_stop_ticket.load());
}

}  // namespace

TEST_CASE("blz_pool_release(NULL) returns EINVAL and calls nothing", "[api][v02][release]") {
    Record r;
    CHECK(blz_pool_release(nullptr, on_destroyed, &r) == BLZ_EINVAL);
    CHECK(blz_pool_release(nullptr, nullptr, nullptr) == BLZ_EINVAL);
    CHECK(r.destroyed_calls.load() == 0);
}

TEST_CASE("blz_pool_release of an idle pool: on_destroyed once, with BLZ_OK, on its own thread, after every stop",
          "[api][v02][release]") {
    const uint32_t workers = GENERATE(1u, 2u, 4u);
    INFO("workers: " << workers);
    Watchdog watchdog("release of an idle pool", seconds(60));
    Record r;
    blz_pool *pool = make_pool(r, workers);
    REQUIRE(blz_pool_release(pool, on_destroyed, &r) == BLZ_OK);
    REQUIRE(eventually([&] { return r.destroyed(); }));
    check_destroyed_after_stops(r, workers);
    CHECK_FALSE(pthread_equal(r.destroyed_thread, pthread_self()));
}

TEST_CASE("blz_pool_release with no callback still destroys the pool", "[api][v02][release]") {
    Watchdog watchdog("release without callback", seconds(60));
    Record r;
    blz_pool *pool = make_pool(r, 2);
    REQUIRE(blz_pool_release(pool, nullptr, nullptr) == BLZ_OK);
    // The stops are the only trace left: every worker ran its on_thread_stop.
    CHECK(eventually([&] { return r.stops.load() == 2; }));
}

TEST_CASE("blz_pool_release while a task runs: returns at once, the task and its later spawns run, then on_destroyed",
          "[api][v02][release]") {
    Watchdog watchdog("release while a task runs", seconds(60));
    Record r;
    const uint32_t workers = 2;
    blz_pool *pool = make_pool(r, workers);
    Gate gate;
    OpenOnExit open{gate};
    std::atomic<blz_status> spawned_after_release{99};
    // Held open by the gate, then spawns onto its pool after the release:
    // the pool's own workers inside accepted work are still admitted.
    auto held = [&] {
        gate.pass();
        spawned_after_release.store(blz_spawn(pool, count_task, &r, nullptr));
        r.tasks_run.fetch_add(1);
    };
    REQUIRE(blz_spawn(pool, thunk_of(held), &held, nullptr) == BLZ_OK);
    for (int i = 0; i < 10; ++i) REQUIRE(blz_spawn(pool, count_task, &r, nullptr) == BLZ_OK);
    REQUIRE(gate.wait_entered());

    const auto before = std::chrono::steady_clock::now();
    REQUIRE(blz_pool_release(pool, on_destroyed, &r) == BLZ_OK);
    // Returned without waiting for the held task (a blocking destroy could
    // not return before the gate opens below).
    CHECK(std::chrono::steady_clock::now() - before < seconds(10));
    // The destroy is under way but must wait: nothing stopped, nothing reported.
    std::this_thread::sleep_for(milliseconds(50));
    CHECK(r.destroyed_calls.load() == 0);
    CHECK(r.stops.load() == 0);

    gate.release();
    REQUIRE(eventually([&] { return r.destroyed(); }));
    CHECK(spawned_after_release.load() == BLZ_OK);
    CHECK(r.tasks_run.load() == 12);  // the held task, the ten queued ones, and its late spawn
    check_destroyed_after_stops(r, workers);
}

TEST_CASE("blz_pool_release from a task of the pool itself: not EDEADLK; the task keeps its pool until it returns",
          "[api][v02][release]") {
    Watchdog watchdog("release from inside", seconds(60));
    Record r;
    const uint32_t workers = 2;
    blz_pool *pool = make_pool(r, workers);
    Gate gate;
    OpenOnExit open{gate};
    std::atomic<blz_status> release_status{99};
    std::atomic<blz_status> fork_join_after{99};
    std::atomic<int> halves{0};
    auto half = [&] { halves.fetch_add(1); };
    auto releasing = [&] {
        release_status.store(blz_pool_release(pool, on_destroyed, &r));
        // Still the pool's worker, inside accepted work: fork-join works.
        fork_join_after.store(blz_fork_join(pool, thunk_of(half), &half, thunk_of(half), &half));
        gate.pass();  // the destroy waits for this task
    };
    REQUIRE(blz_spawn(pool, thunk_of(releasing), &releasing, nullptr) == BLZ_OK);
    REQUIRE(gate.wait_entered());
    CHECK(release_status.load() == BLZ_OK);
    CHECK(fork_join_after.load() == BLZ_OK);
    CHECK(halves.load() == 2);
    std::this_thread::sleep_for(milliseconds(50));
    CHECK(r.destroyed_calls.load() == 0);
    CHECK(r.stops.load() == 0);

    gate.release();
    REQUIRE(eventually([&] { return r.destroyed(); }));
    check_destroyed_after_stops(r, workers);
}

TEST_CASE("blz_pool_release while a thread outside is inside blz_call: the call completes first",
          "[api][v02][release]") {
    Watchdog watchdog("release during blz_call", seconds(60));
    Record r;
    blz_pool *pool = make_pool(r, 2);
    Gate gate;
    OpenOnExit open{gate};
    std::atomic<blz_status> call_status{99};
    std::atomic<int> call_returned_before_destroyed{-1};
    // Admitted before the release (its job has entered the gate), so the
    // destroy waits for it: the rule blz_pool_destroy sets for other threads.
    std::thread caller([&] {
        auto job = [&] { gate.pass(); };
        call_status.store(blz_call(pool, thunk_of(job), &job));
        call_returned_before_destroyed.store(r.destroyed() ? 0 : 1);
    });
    REQUIRE(gate.wait_entered());
    REQUIRE(blz_pool_release(pool, on_destroyed, &r) == BLZ_OK);
    std::this_thread::sleep_for(milliseconds(50));
    CHECK(r.destroyed_calls.load() == 0);
    gate.release();
    caller.join();
    CHECK(call_status.load() == BLZ_OK);
    REQUIRE(eventually([&] { return r.destroyed(); }));
    check_destroyed_after_stops(r, 2);
}

TEST_CASE("on_destroyed may block: the releasing thread is not held", "[api][v02][release]") {
    Watchdog watchdog("blocking on_destroyed", seconds(60));
    Record r;
    Gate gate;
    OpenOnExit open{gate};
    r.destroyed_gate = &gate;
    blz_pool *pool = make_pool(r, 2);
    REQUIRE(blz_pool_release(pool, on_destroyed, &r) == BLZ_OK);
    REQUIRE(gate.wait_entered());  // on_destroyed is blocked in the gate
    CHECK(r.stops.load() == 2);
    CHECK(r.destroyed_status.load() == BLZ_OK);
    // Meanwhile this thread goes on: another pool comes and goes.
    Record other;
    blz_pool *second = make_pool(other, 1);
    REQUIRE(blz_pool_destroy(second) == BLZ_OK);
    CHECK(r.destroyed_calls.load() == 0);
    gate.release();
    CHECK(eventually([&] { return r.destroyed(); }));
}

TEST_CASE("many pools released at once all end, each with its own callback", "[api][v02][release]") {
    Watchdog watchdog("many releases", seconds(120));
    constexpr int kPools = 32;
    Record records[kPools];
    for (int i = 0; i < kPools; ++i) {
        blz_pool *pool = make_pool(records[i], 1 + static_cast<uint32_t>(i) % 3);
        // Work still queued at the release: each pool must run it first.
        for (int k = 0; k < 4; ++k) REQUIRE(blz_spawn(pool, count_task, &records[i], nullptr) == BLZ_OK);
        REQUIRE(blz_pool_release(pool, on_destroyed, &records[i]) == BLZ_OK);
    }
    for (int i = 0; i < kPools; ++i) {
        INFO("pool " << i);
        REQUIRE(eventually([&] { return records[i].destroyed(); }));
        CHECK(records[i].tasks_run.load() == 4);
        check_destroyed_after_stops(records[i], 1 + static_cast<uint32_t>(i) % 3);
    }
}

// In a forked child the parent's workers do not exist: the release frees
// the memory on the calling thread, as destroy does there, and reports
// BLZ_EFORK through the callback before it returns.
TEST_CASE("blz_pool_release in a forked child: BLZ_EFORK, on_destroyed called before it returns",
          "[api][v02][release][fork]") {
    Watchdog watchdog("release in a forked child", seconds(60));
    Record r;
    blz_pool *pool = make_pool(r, 2);
    REQUIRE(blz_test::wait_until_asleep(pool, milliseconds(60000)));
    const int status = run_forked([&] {
        Record child;
        const blz_status released = blz_pool_release(pool, on_destroyed, &child);
        const bool ok = released == BLZ_EFORK && child.destroyed_calls.load() == 1 &&
                        child.destroyed_status.load() == BLZ_EFORK && r.stops.load() == 0;
        return ok ? 0 : 1;
    });
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
    // The parent's pool is untouched by the child's release.
    CHECK(blz_pool_num_threads(pool) == 2);
    REQUIRE(blz_pool_release(pool, on_destroyed, &r) == BLZ_OK);
    REQUIRE(eventually([&] { return r.destroyed(); }));
    check_destroyed_after_stops(r, 2);
}

TEST_CASE("blz_pool_release after blz_call from outside works like destroy for what it ran", "[api][v02][release]") {
    Watchdog watchdog("release after work", seconds(60));
    Record r;
    blz_pool *pool = make_pool(r, 2);
    CHECK(blz_test::fib(pool, 20) == 6765);
    CHECK(on_worker(pool, [&] { r.tasks_run.fetch_add(1); }) == BLZ_OK);
    REQUIRE(blz_pool_release(pool, on_destroyed, &r) == BLZ_OK);
    REQUIRE(eventually([&] { return r.destroyed(); }));
    CHECK(r.tasks_run.load() == 1);
    check_destroyed_after_stops(r, 2);
}
