// Events (blz_event_*), from the contract in blitz.h: set once with a
// status that every wait returns, bounded waits, waiters on workers that
// run other jobs meanwhile, and a destroy that releases waiters. The race
// of a set against its waiter's destroy is held open in
// tests/fault/lifetime_checks.cpp ("event set vs its waiter's destroy").
// Every case runs under a watchdog.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#include "support.hpp"
#include "task_records.hpp"

namespace {

using blz_test::HeldWorker;
using blz_test::kForever;
using blz_test::Pool;
using blz_test::Watchdog;
using blz_test::Event;
using blz_test::stats_of;
using std::chrono::milliseconds;
using std::chrono::seconds;

// A task that waits for an event without a bound and records the status.
struct Waiting {
    blz_event *event;
    std::atomic<int32_t> status{99};
};
void wait_fn(void *arg) {
    auto *w = static_cast<Waiting *>(arg);
    w->status.store(blz_event_wait_for(w->event, kForever));
}

struct Setting {
    blz_event *event;
    blz_status status;
    std::atomic<int32_t> result{99};
};
void set_fn(void *arg) {
    auto *s = static_cast<Setting *>(arg);
    s->result.store(blz_event_set(s->event, s->status));
}

}  // namespace

TEST_CASE("blz_event calls refuse NULL and bad statuses", "[api][event]") {
    CHECK(blz_event_create(nullptr) == BLZ_EINVAL);
    CHECK(blz_event_set(nullptr, BLZ_OK) == BLZ_EINVAL);
    CHECK(blz_event_wait_for(nullptr, 0) == BLZ_EINVAL);
    CHECK(blz_event_destroy(nullptr) == BLZ_EINVAL);
    Event event;
    CHECK(blz_event_set(event, BLZ_EINVAL) == BLZ_EINVAL);
    CHECK(blz_event_set(event, BLZ_ETIMEDOUT) == BLZ_EINVAL);
    CHECK(blz_event_set(event, static_cast<blz_status>(5)) == BLZ_EINVAL);
    CHECK(blz_event_wait_for(event, 0) == BLZ_ETIMEDOUT);  // none of them set it
}

TEST_CASE("an event is set once: every wait returns the first status", "[api][event]") {
    for (blz_status status : {BLZ_OK, BLZ_ETASK, BLZ_ECANCELED}) {
        Event event;
        CHECK(blz_event_wait_for(event, 0) == BLZ_ETIMEDOUT);
        CHECK(blz_event_wait_for(event, 1000000) == BLZ_ETIMEDOUT);  // 1 ms, bounded
        CHECK(blz_event_set(event, status) == BLZ_OK);
        CHECK(blz_event_set(event, BLZ_OK) == BLZ_EINVAL);  // a second set is refused...
        CHECK(blz_event_set(event, status) == BLZ_EINVAL);
        CHECK(blz_event_wait_for(event, 0) == status);  // ...and changes nothing
        CHECK(blz_event_wait_for(event, kForever) == status);
    }
}

TEST_CASE("threads blocked on an event all wake with its status", "[api][event]") {
    Watchdog watchdog("event waiters", seconds(60));
    Event event;
    constexpr int kThreads = 6;
    std::atomic<int> started{0};
    std::vector<std::atomic<int32_t>> got(kThreads);
    std::vector<std::thread> threads;
    for (int i = 0; i < kThreads; ++i) {
        got[i].store(99);
        threads.emplace_back([&, i] {
            started.fetch_add(1);
            // Half bounded, half not; both outlast the set below.
            got[i].store(blz_event_wait_for(event, i % 2 == 0 ? kForever : 60ull * 1000 * 1000 * 1000));
        });
    }
    blz_test::eventually([&] { return started.load() == kThreads; }, seconds(10));
    std::this_thread::sleep_for(milliseconds(20));  // most of them are blocked by now
    std::atomic<int32_t> set_result{99};
    std::thread setter([&] { set_result.store(blz_event_set(event, BLZ_ETASK)); });
    setter.join();
    for (auto &t : threads) t.join();
    CHECK(set_result.load() == BLZ_OK);
    for (int i = 0; i < kThreads; ++i) CHECK(got[i].load() == BLZ_ETASK);
}

TEST_CASE("a worker waiting for an event runs the job that sets it", "[api][event]") {
    Watchdog watchdog("event wait on a worker", seconds(60));
    Pool pool(1);
    Event event;
    Waiting waiting{event};
    Setting setting{event, BLZ_OK};
    blz_task *waiter = nullptr;
    blz_task *setter = nullptr;
    {
        // Both queue behind the held worker: the waiter first, so that the
        // only worker waits for an event that the job behind it sets.
        HeldWorker held(pool);
        REQUIRE(blz_spawn(pool, wait_fn, &waiting, &waiter) == BLZ_OK);
        REQUIRE(blz_spawn(pool, set_fn, &setting, &setter) == BLZ_OK);
    }
    CHECK(blz_join(waiter) == BLZ_OK);
    CHECK(blz_join(setter) == BLZ_OK);
    CHECK(waiting.status.load() == BLZ_OK);
    CHECK(setting.result.load() == BLZ_OK);
}

TEST_CASE("an event set from another pool's worker wakes a sleeping worker", "[api][event]") {
    Watchdog watchdog("event across pools", seconds(60));
    Pool waiters(1), setters(1);
    Event event;
    Waiting waiting{event};
    blz_task *waiter = nullptr;
    REQUIRE(blz_spawn(waiters, wait_fn, &waiting, &waiter) == BLZ_OK);
    // The waiting worker, with nothing else to run, goes to sleep in the wait.
    REQUIRE(blz_test::wait_until_asleep(waiters, milliseconds(60000)));
    CHECK(waiting.status.load() == 99);
    Setting setting{event, BLZ_ECANCELED};
    REQUIRE(blz_call(setters, set_fn, &setting) == BLZ_OK);
    CHECK(setting.result.load() == BLZ_OK);
    CHECK(blz_join(waiter) == BLZ_OK);
    CHECK(waiting.status.load() == BLZ_ECANCELED);
}

TEST_CASE("destroying an unset event releases its waiters with BLZ_ECANCELED", "[api][event]") {
    Watchdog watchdog("event destroy with a waiter", seconds(60));
    Pool pool(1);
    Event event;
    Waiting waiting{event};
    blz_task *waiter = nullptr;
    REQUIRE(blz_spawn(pool, wait_fn, &waiting, &waiter) == BLZ_OK);
    // Asleep in the wait (its only job): the wait has begun, as the destroy
    // requires of a wait it releases.
    REQUIRE(blz_test::wait_until_asleep(pool, milliseconds(60000)));
    event.destroy();
    CHECK(blz_join(waiter) == BLZ_OK);
    CHECK(waiting.status.load() == BLZ_ECANCELED);
    CHECK(stats_of(pool).tasks_failed == 0);
}

TEST_CASE("a set event is destroyed at once; sets and waits race without harm", "[api][event]") {
    Watchdog watchdog("event races", seconds(120));
    // Under ASan this is the lifetime check of the common case: a waiter
    // returns and destroys while the setter may still be inside the set.
    for (int round = 0; round < 500; ++round) {
        blz_event *event = nullptr;
        REQUIRE(blz_event_create(&event) == BLZ_OK);
        std::atomic<int32_t> seen{99};
        std::thread waiter([&] {
            blz_status status;
            while ((status = blz_event_wait_for(event, round % 2 == 0 ? 0 : kForever)) == BLZ_ETIMEDOUT) {
            }
            seen.store(status);
            blz_event_destroy(event);
        });
        std::atomic<int32_t> set_result{99};
        std::thread setter([&] { set_result.store(blz_event_set(event, BLZ_OK)); });
        setter.join();
        waiter.join();
        REQUIRE(set_result.load() == BLZ_OK);
        REQUIRE(seen.load() == BLZ_OK);
    }
}
