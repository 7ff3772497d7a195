// Unit tests of blz::Sleep: the idle rounds, getting sleepy, every way a
// sleep attempt ends (JEC changed, injected job, latch set, woken), the
// waker-decrements rule, and how many sleepers a post wakes.
//
// No test depends on timing: a thread that must be blocked is waited for
// through the counters (`sleeping` is incremented under the sleeper's own
// mutex, which it holds until it blocks, so a waker that sees the count
// always finds it blocked). Every wait is guarded by a watchdog.
#include <catch2/catch.hpp>

#include <sleep.hpp>

#include "support.hpp"

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace {

using Sleep = blz::Sleep<>;
using Latch = blz::CoreLatch<>;
using blz::IdleOutcome;
using blz::kRoundsUntilSleeping;
using blz::kRoundsUntilSleepy;

constexpr auto kWatchdogLimit = std::chrono::seconds(30);

auto no_shared_jobs = [] { return false; };

// Calls no_work_found until the next call would try to sleep; every call
// must keep looking.
void run_to_sleep_point(Sleep &s, blz::IdleState &idle, Latch &latch) {
    while (idle.rounds < kRoundsUntilSleeping) {
        REQUIRE(s.no_work_found(idle, latch, no_shared_jobs) == IdleOutcome::kKeepLooking);
    }
}

// Waits (without a timeout of its own: the caller's watchdog has it)
// until exactly `n` workers are counted as sleeping.
void wait_until_sleeping(const Sleep &s, uint32_t n) {
    while (s.counters().sleeping() != n) std::this_thread::sleep_for(std::chrono::microseconds(100));
}

// The idle loop of a worker that finds no job: returns how it left.
IdleOutcome idle_until_not_keep_looking(Sleep &s, blz::IdleState &idle, Latch &latch) {
    IdleOutcome out;
    do {
        out = s.no_work_found(idle, latch, no_shared_jobs);
    } while (out == IdleOutcome::kKeepLooking);
    return out;
}

// A worker on a thread of its own that goes idle with nothing to find,
// until its idle loop ends (woken, latch set), then leaves the idle state.
// `outcome` is -1 until then.
struct IdleWorker {
    IdleWorker(Sleep &s, uint32_t index)
        : thread([this, &s, index] {
              blz::IdleState idle = s.start_looking(index);
              outcome.store(static_cast<int>(idle_until_not_keep_looking(s, idle, latch)));
              s.work_found(index, no_shared_jobs);
          }) {}

    bool woken() const { return outcome.load() == static_cast<int>(IdleOutcome::kWoken); }
    bool still_idle() const { return outcome.load() == -1; }

    Latch latch;
    std::atomic<int> outcome{-1};
    std::thread thread;  // last: starts once the members above exist
};

}  // namespace

TEST_CASE("sleep: init sets the worker count, counters and stats start at zero", "[sleep]") {
    Sleep s;
    REQUIRE(s.init(3));
    CHECK(s.num_workers() == 3);
    CHECK(s.counters().word == 0);
    Sleep::Stats st = s.stats();
    CHECK(st.sleeps == 0);
    CHECK(st.wakeups == 0);
    CHECK(st.spurious_wakeups == 0);
    CHECK(st.sleep_aborts == 0);
    s.release();
    CHECK(s.num_workers() == 0);
    s.release();  // idempotent
    CHECK(s.num_workers() == 0);
}

TEST_CASE("sleep: start_looking and work_found adjust inactive only", "[sleep]") {
    Sleep s;
    REQUIRE(s.init(2));
    blz::IdleState a = s.start_looking(0);
    CHECK(a.worker_index == 0);
    CHECK(a.rounds == 0);
    CHECK(s.counters().inactive() == 1);
    blz::IdleState b = s.start_looking(1);
    CHECK(b.worker_index == 1);
    CHECK(s.counters().inactive() == 2);
    CHECK(s.counters().sleeping() == 0);
    CHECK(s.counters().jec() == 0);
    s.work_found(0, no_shared_jobs);
    CHECK(s.counters().inactive() == 1);
    s.work_found(1, no_shared_jobs);
    CHECK(s.counters().word == 0);
}

TEST_CASE("sleep: a post with no sleeper turns the JEC odd and never asks about the queue", "[sleep]") {
    Sleep s;
    REQUIRE(s.init(1));
    int asked = 0;
    s.new_internal_jobs(1, [&] {
        ++asked;
        return true;
    });
    CHECK(s.counters().jec() == 1);
    CHECK(asked == 0);
    s.new_shared_jobs(1, [] { return true; });
    CHECK(s.counters().jec() == 1);  // already odd: unchanged
    CHECK(s.counters().sleeping() == 0);
}

TEST_CASE("sleep: a post asks whether the queue was empty only when someone sleeps", "[sleep]") {
    Sleep s;
    REQUIRE(s.init(1));
    // Count a sleeper by hand (no thread is blocked, so nobody is woken).
    s.atomic_counters().add_inactive_thread();
    REQUIRE(s.atomic_counters().try_add_sleeping_thread(s.counters()));
    int asked = 0;
    s.new_internal_jobs(1, [&] {
        ++asked;
        return true;
    });
    CHECK(asked == 1);
    CHECK(s.counters().sleeping() == 1);  // nobody blocked: nobody woken, nothing decremented
    CHECK(s.stats().wakeups == 0);
    CHECK_FALSE(s.wake_specific_thread(0));  // not blocked: false, no decrement
    CHECK(s.counters().sleeping() == 1);
    s.atomic_counters().sub_sleeping_thread();
    s.atomic_counters().sub_inactive_thread();
}

TEST_CASE("sleep: no_work_found keeps looking for rounds 0..kRoundsUntilSleepy and gets sleepy at the last",
          "[sleep]") {
    Sleep s;
    REQUIRE(s.init(1));
    Latch latch;
    int injected_checks = 0;
    auto has_injected = [&] {
        ++injected_checks;
        return false;
    };
    s.new_internal_jobs(1, [] { return true; });  // an earlier post: JEC odd
    REQUIRE(s.counters().jec() == 1);

    blz::IdleState idle = s.start_looking(0);
    for (uint32_t r = 0; r < kRoundsUntilSleepy; ++r) {
        INFO("round " << r);
        REQUIRE(s.no_work_found(idle, latch, has_injected) == IdleOutcome::kKeepLooking);
        CHECK(idle.rounds == r + 1);
        CHECK(s.counters().jec() == 1);  // not sleepy yet
    }
    // Round kRoundsUntilSleepy: gets sleepy (odd -> even), still keeps looking.
    REQUIRE(s.no_work_found(idle, latch, has_injected) == IdleOutcome::kKeepLooking);
    CHECK(s.counters().jec() == 2);
    CHECK(s.counters().jec_is_sleepy());
    CHECK(idle.jec == 2);
    CHECK(idle.rounds == kRoundsUntilSleeping);
    CHECK(injected_checks == 0);
    CHECK(latch.state() == Latch::kUnset);
    CHECK(s.counters().sleeping() == 0);
    CHECK(s.counters().inactive() == 1);
    CHECK(s.stats().sleeps == 0);
}

TEST_CASE("sleep: with more searchers than max_searching, a searcher gets sleepy at once", "[sleep]") {
    Sleep s;
    REQUIRE(s.init(3));
    Latch latch;
    s.new_internal_jobs(1, [] { return true; });  // an earlier post: JEC odd
    blz::IdleState first = s.start_looking(0);
    blz::IdleState second = s.start_looking(1);
    // Two searchers, at most two allowed: an ordinary round.
    REQUIRE(s.no_work_found(first, latch, no_shared_jobs, 2) == IdleOutcome::kKeepLooking);
    CHECK(first.rounds == 1);
    CHECK(s.counters().jec() == 1);
    // At most one allowed: the rest of the rounds are skipped, and this
    // round already announces the sleepy state (JEC odd -> even).
    REQUIRE(s.no_work_found(second, latch, no_shared_jobs, 1) == IdleOutcome::kKeepLooking);
    CHECK(second.rounds == kRoundsUntilSleeping);
    CHECK(s.counters().jec() == 2);
    CHECK(second.jec == 2);
    s.atomic_counters().sub_inactive_thread();
    s.atomic_counters().sub_inactive_thread();
}

TEST_CASE("sleep: a post between getting sleepy and sleeping aborts the sleep", "[sleep]") {
    // A bug here would block this thread for good: fail instead.
    blz_test::Watchdog watchdog("sleep: post between sleepy and sleep", kWatchdogLimit);
    Sleep s;
    REQUIRE(s.init(1));
    Latch latch;
    int injected_checks = 0;
    auto has_injected = [&] {
        ++injected_checks;
        return false;
    };
    blz::IdleState idle = s.start_looking(0);
    run_to_sleep_point(s, idle, latch);
    REQUIRE(idle.jec == 0);  // JEC was even already: remembered as found

    s.new_internal_jobs(1, [] { return true; });  // JEC 0 -> 1
    REQUIRE(s.counters().jec() == 1);

    CHECK(s.no_work_found(idle, latch, has_injected) == IdleOutcome::kAborted);
    CHECK(injected_checks == 0);  // the JEC re-check comes first
    CHECK(s.counters().sleeping() == 0);
    CHECK(s.counters().inactive() == 1);
    CHECK(latch.state() == Latch::kUnset);  // back from SLEEPING
    CHECK(idle.rounds == kRoundsUntilSleepy);  // partly awake: gets sleepy again next round
    Sleep::Stats st = s.stats();
    CHECK(st.sleep_aborts == 1);
    CHECK(st.sleeps == 0);

    // The next round gets sleepy again (odd -> even) and the one after would sleep.
    CHECK(s.no_work_found(idle, latch, has_injected) == IdleOutcome::kKeepLooking);
    CHECK(s.counters().jec() == 2);
    CHECK(idle.jec == 2);
    CHECK(idle.rounds == kRoundsUntilSleeping);
}

TEST_CASE("sleep: an injected job seen by the final check aborts the sleep and undoes the registration",
          "[sleep]") {
    // A bug here would block this thread for good: fail instead.
    blz_test::Watchdog watchdog("sleep: injected job aborts", kWatchdogLimit);
    Sleep s;
    REQUIRE(s.init(1));
    Latch latch;
    blz::IdleState idle = s.start_looking(0);
    run_to_sleep_point(s, idle, latch);

    int checks = 0;
    uint32_t sleeping_during_check = 99;
    Latch::State latch_during_check = Latch::kUnset;
    auto has_injected = [&] {
        ++checks;
        sleeping_during_check = s.counters().sleeping();
        latch_during_check = latch.state();
        return true;
    };
    CHECK(s.no_work_found(idle, latch, has_injected) == IdleOutcome::kAborted);
    CHECK(checks == 1);
    CHECK(sleeping_during_check == 1);  // registered before the final check
    CHECK(latch_during_check == Latch::kSleeping);
    CHECK(s.counters().sleeping() == 0);  // and undone by the sleeper itself
    CHECK(s.counters().inactive() == 1);
    CHECK(latch.state() == Latch::kUnset);
    CHECK(idle.rounds == 0);  // fully awake
    Sleep::Stats st = s.stats();
    CHECK(st.sleep_aborts == 1);
    CHECK(st.sleeps == 0);
    CHECK(st.wakeups == 0);
}

TEST_CASE("sleep: a latch set before sleeping gives kLatchSet", "[sleep]") {
    // A bug here would block this thread for good: fail instead.
    blz_test::Watchdog watchdog("sleep: latch set before sleeping", kWatchdogLimit);
    Sleep s;
    REQUIRE(s.init(1));
    Latch latch;
    blz::IdleState idle = s.start_looking(0);
    run_to_sleep_point(s, idle, latch);
    REQUIRE_FALSE(latch.set());  // UNSET: nobody to wake
    int checks = 0;
    CHECK(s.no_work_found(idle, latch, [&] {
        ++checks;
        return false;
    }) == IdleOutcome::kLatchSet);
    CHECK(checks == 0);
    CHECK(latch.state() == Latch::kSet);
    CHECK(s.counters().sleeping() == 0);
    CHECK(s.counters().inactive() == 1);
    CHECK(s.stats().sleeps == 0);
}

TEST_CASE("sleep: a blocked worker is woken by wake_specific_thread; the waker decrements sleeping",
          "[sleep][threads]") {
    blz_test::Watchdog watchdog("sleep: wake_specific_thread", kWatchdogLimit);
    Sleep s;
    REQUIRE(s.init(2));
    Latch latch;
    std::atomic<int> outcome{-1};
    std::atomic<uint32_t> rounds_after{99};
    std::atomic<int> latch_after{-1};

    std::thread worker([&] {
        blz::IdleState idle = s.start_looking(1);
        IdleOutcome out = idle_until_not_keep_looking(s, idle, latch);
        rounds_after.store(idle.rounds);
        latch_after.store(latch.state());
        outcome.store(static_cast<int>(out));
    });

    wait_until_sleeping(s, 1);
    CHECK(s.counters().inactive() == 1);
    CHECK(latch.state() == Latch::kSleeping);
    CHECK_FALSE(s.wake_specific_thread(0));  // worker 0 is not blocked
    CHECK(s.counters().sleeping() == 1);
    CHECK(s.wake_specific_thread(1));
    // The waker decremented at once, before the worker even runs.
    CHECK(s.counters().sleeping() == 0);
    CHECK(s.counters().inactive() == 1);
    worker.join();

    CHECK(outcome.load() == static_cast<int>(IdleOutcome::kWoken));
    CHECK(rounds_after.load() == 0);
    CHECK(latch_after.load() == Latch::kUnset);  // SLEEPING -> UNSET by wake_up
    CHECK(s.counters().sleeping() == 0);         // the woken worker did not decrement again
    CHECK(s.counters().inactive() == 1);         // still idle until work_found
    Sleep::Stats st = s.stats();
    CHECK(st.sleeps == 1);
    CHECK(st.wakeups == 1);
    CHECK(st.spurious_wakeups == 0);
    CHECK(st.sleep_aborts == 0);
    CHECK_FALSE(s.wake_specific_thread(1));  // no longer blocked
    CHECK(s.counters().sleeping() == 0);
    s.work_found(1, no_shared_jobs);
    CHECK(s.counters().word == 0);
}

TEST_CASE("sleep: a latch set while its waiter sleeps returns true and the setter wakes it",
          "[sleep][threads]") {
    blz_test::Watchdog watchdog("sleep: latch set while sleeping", kWatchdogLimit);
    Sleep s;
    REQUIRE(s.init(1));
    Latch latch;
    std::vector<IdleOutcome> outcomes;  // the worker's; read after join

    std::thread worker([&] {
        blz::IdleState idle = s.start_looking(0);
        while (!latch.probe()) outcomes.push_back(s.no_work_found(idle, latch, no_shared_jobs));
        s.work_found(0, no_shared_jobs);
    });

    wait_until_sleeping(s, 1);
    REQUIRE(latch.state() == Latch::kSleeping);
    CHECK(latch.set());  // SLEEPING: the setter must wake the waiter
    CHECK(s.wake_specific_thread(0));
    worker.join();

    REQUIRE(outcomes.size() == kRoundsUntilSleeping + 1);
    for (uint32_t i = 0; i < kRoundsUntilSleeping; ++i) CHECK(outcomes[i] == IdleOutcome::kKeepLooking);
    CHECK(outcomes.back() == IdleOutcome::kWoken);
    CHECK(latch.state() == Latch::kSet);  // wake_up left SET alone
    CHECK(s.counters().word == 0);
    CHECK(s.stats().wakeups == 1);
    CHECK(s.stats().sleeps == 1);
}

TEST_CASE("sleep: posts wake a blocked worker (internal and injected)", "[sleep][threads]") {
    blz_test::Watchdog watchdog("sleep: posts wake a blocked worker", kWatchdogLimit);
    Sleep s;
    REQUIRE(s.init(1));
    Latch latch;

    for (int injected = 0; injected < 2; ++injected) {
        INFO((injected ? "new_shared_jobs" : "new_internal_jobs"));
        std::atomic<int> outcome{-1};
        std::thread worker([&] {
            blz::IdleState idle = s.start_looking(0);
            outcome.store(static_cast<int>(idle_until_not_keep_looking(s, idle, latch)));
            s.work_found(0, no_shared_jobs);
        });
        wait_until_sleeping(s, 1);
        REQUIRE(s.counters().jec_is_sleepy());
        int asked = 0;
        if (injected) {
            s.new_shared_jobs(1, [] { return true; });
        } else {
            s.new_internal_jobs(1, [&] {
                ++asked;
                return true;
            });
        }
        CHECK(s.counters().sleeping() == 0);  // the poster woke it and decremented
        CHECK_FALSE(s.counters().jec_is_sleepy());
        worker.join();
        CHECK(outcome.load() == static_cast<int>(IdleOutcome::kWoken));
        if (!injected) CHECK(asked == 1);
        CHECK(s.counters().sleeping() == 0);
        CHECK(s.counters().inactive() == 0);
    }
    CHECK(s.stats().wakeups == 2);
}

TEST_CASE("sleep: a post wakes at most the jobs not covered by awake idle workers", "[sleep][threads]") {
    blz_test::Watchdog watchdog("sleep: wake counts", kWatchdogLimit);
    Sleep s;
    REQUIRE(s.init(3));
    IdleWorker w0(s, 0), w1(s, 1);
    wait_until_sleeping(s, 2);

    // A third worker (this thread) is idle and awake: one job is its to find.
    s.start_looking(2);
    REQUIRE(s.counters().inactive() == 3);
    REQUIRE(s.counters().awake_but_idle() == 1);
    s.new_internal_jobs(1, [] { return true; });
    CHECK(s.counters().sleeping() == 2);  // nobody woken
    CHECK(s.stats().wakeups == 0);

    // Queue not empty before the push, but an awake idle worker: it takes
    // the next job, so nobody is woken either.
    s.new_internal_jobs(1, [] { return false; });
    CHECK(s.counters().sleeping() == 2);
    CHECK(s.stats().wakeups == 0);

    // This thread leaves idle as the last awake searcher with sleepers
    // left: work_found asks about injected jobs (none here, so no wake).
    int asked = 0;
    s.work_found(2, [&] {
        ++asked;
        return false;
    });
    CHECK(asked == 1);
    CHECK(s.counters().sleeping() == 2);

    // Queue not empty, nobody idle: wake min(num_jobs, sleeping) = 1, the
    // lowest-numbered blocked worker; never a broadcast.
    REQUIRE(s.counters().awake_but_idle() == 0);
    s.new_internal_jobs(1, [] { return false; });
    CHECK(s.counters().sleeping() == 1);
    w0.thread.join();
    CHECK(w0.woken());
    CHECK(w1.still_idle());  // still blocked: nobody else woke it

    // Two injected jobs, one sleeper, nobody awake and idle: wakes the one.
    REQUIRE(s.counters().awake_but_idle() == 0);
    s.new_shared_jobs(2, [] { return true; });
    CHECK(s.counters().sleeping() == 0);
    w1.thread.join();
    CHECK(w1.woken());
    CHECK(s.counters().inactive() == 0);
    CHECK(s.stats().wakeups == 2);
    CHECK(s.stats().sleeps == 2);
}

TEST_CASE("sleep: a post with an awake limit wakes nobody once that many workers are awake", "[sleep][threads]") {
    blz_test::Watchdog watchdog("sleep: awake limit", kWatchdogLimit);
    Sleep s;
    REQUIRE(s.init(3));
    IdleWorker w1(s, 1), w2(s, 2);
    wait_until_sleeping(s, 2);
    // Worker 0 (this thread) runs a job: one of three awake.

    // Limit 1: the one awake worker is enough; nobody is woken.
    s.new_internal_jobs(2, [] { return false; }, 1);
    CHECK(s.counters().sleeping() == 2);
    CHECK(s.stats().wakeups == 0);

    // Limit 2: one more may wake, however many jobs were posted.
    s.new_internal_jobs(2, [] { return false; }, 2);
    CHECK(s.counters().sleeping() == 1);
    w1.thread.join();
    CHECK(w1.woken());
    CHECK(w2.still_idle());

    // No limit (the default): the last sleeper wakes too.
    s.new_internal_jobs(1, [] { return false; });
    CHECK(s.counters().sleeping() == 0);
    w2.thread.join();
    CHECK(w2.woken());
    CHECK(s.stats().wakeups == 2);
}

TEST_CASE("sleep: sleeping again after a wake-up without finding work counts a spurious wake-up",
          "[sleep][threads]") {
    blz_test::Watchdog watchdog("sleep: spurious wake-ups", kWatchdogLimit);
    Sleep s;
    REQUIRE(s.init(1));
    Latch latch;
    std::vector<IdleOutcome> outcomes;

    std::thread worker([&] {
        blz::IdleState idle = s.start_looking(0);
        outcomes.push_back(idle_until_not_keep_looking(s, idle, latch));  // sleep 1
        outcomes.push_back(idle_until_not_keep_looking(s, idle, latch));  // sleep 2: woken for nothing
        s.work_found(0, no_shared_jobs);  // found a job
        idle = s.start_looking(0);
        outcomes.push_back(idle_until_not_keep_looking(s, idle, latch));  // sleep 3: not spurious
        s.work_found(0, no_shared_jobs);
    });

    for (uint64_t k = 1; k <= 3; ++k) {
        wait_until_sleeping(s, 1);  // the waker's decrement makes each 1 a new sleep
        REQUIRE(s.wake_specific_thread(0));
        REQUIRE(s.counters().sleeping() == 0);
    }
    worker.join();

    REQUIRE(outcomes.size() == 3);
    for (IdleOutcome o : outcomes) CHECK(o == IdleOutcome::kWoken);
    Sleep::Stats st = s.stats();
    CHECK(st.sleeps == 3);
    CHECK(st.wakeups == 3);
    CHECK(st.spurious_wakeups == 1);
    CHECK(s.counters().word == 0);
}

TEST_CASE("sleep: work_found asks about injected jobs only when it leaves sleepers and no awake idle worker",
          "[sleep]") {
    Sleep s;
    REQUIRE(s.init(2));
    int asked = 0;
    auto has_injected = [&] {
        ++asked;
        return true;
    };
    SECTION("no sleeper: not asked") {
        s.start_looking(0);
        s.work_found(0, has_injected);
        CHECK(asked == 0);
        CHECK(s.counters().word == 0);
    }
    SECTION("a sleeper (counted by hand) but another awake idle worker: not asked") {
        s.start_looking(0);
        s.start_looking(1);
        s.atomic_counters().add_inactive_thread();  // the sleeper
        REQUIRE(s.atomic_counters().try_add_sleeping_thread(s.counters()));
        s.work_found(0, has_injected);  // worker 1 is still awake and idle
        CHECK(asked == 0);
        s.work_found(1, has_injected);  // now the last awake searcher
        CHECK(asked == 1);
        // Nobody is blocked, so nobody is woken and `sleeping` is untouched.
        CHECK(s.counters().sleeping() == 1);
        CHECK(s.counters().inactive() == 1);
        CHECK(s.stats().wakeups == 0);
        s.atomic_counters().sub_sleeping_thread();
        s.atomic_counters().sub_inactive_thread();
    }
}

TEST_CASE("sleep: the last awake idle worker that finds work hands queued injected jobs to one sleeper",
          "[sleep][threads]") {
    blz_test::Watchdog watchdog("sleep: work_found hand-off", kWatchdogLimit);
    Sleep s;
    REQUIRE(s.init(3));
    IdleWorker w1(s, 1), w2(s, 2);
    wait_until_sleeping(s, 2);

    // Worker 0 (this thread) was idle, then found a job while injected
    // jobs are still queued: it wakes exactly one sleeper (the first).
    s.start_looking(0);
    s.work_found(0, [] { return true; });
    CHECK(s.counters().sleeping() == 1);
    w1.thread.join();
    CHECK(w1.woken());
    CHECK(w2.still_idle());  // still blocked

    // No injected job queued: nobody is woken.
    s.start_looking(0);
    s.work_found(0, [] { return false; });
    CHECK(s.counters().sleeping() == 1);
    CHECK(w2.still_idle());

    REQUIRE(s.wake_specific_thread(2));
    w2.thread.join();
    CHECK(w2.woken());
    CHECK(s.counters().word == 0);
    CHECK(s.stats().wakeups == 2);
}
