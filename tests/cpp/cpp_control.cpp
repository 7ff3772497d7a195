// The C++ layer's control of tasks and groups, include/blitz.hpp (since 0.2): task::wait_for,
// is_ready, detach and cancel, spawn with a completion callback, group
// cancellation (cancel, cancelled, blz::cancelled, cancel_on_failure,
// wait_for), broadcast, and the trampolines reporting failures to the C
// API with blz_fail. Built twice: as C++20 and as C++17.
//
// No test depends on timing to pass: gates hold work until the test opens
// them, so that an assertion on what ran is decided by the interleaving the
// test forces. Timeouts are only upper bounds that turn a bug into a
// failure instead of a hang.
#include <blitz.h>
#include <blitz.hpp>

#include <catch2/catch.hpp>

#include <sched.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <exception>
#include <limits>
#include <mutex>
#include <set>
#include <string>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

#include "../support.hpp"
#include "../temp_dir.hpp"

namespace {

using blz_test::test_error;
using blz_test::tracked;
using blz_test::Watchdog;
using std::chrono::milliseconds;
using std::chrono::nanoseconds;
using std::chrono::seconds;
using clock_type = std::chrono::steady_clock;

// Long enough never to run out on a loaded machine; only reached by a bug.
constexpr seconds kPatience(30);


// Polls pred until it holds or the deadline passed; returns pred().
template <class P>
bool eventually(P pred, clock_type::time_point deadline) {
    while (!pred() && clock_type::now() < deadline) std::this_thread::sleep_for(std::chrono::microseconds(50));
    return pred();
}

template <class P>
bool eventually(P pred) {
    return eventually(pred, clock_type::now() + kPatience);
}

// Work waits at a gate until the test opens it.
class gate {
public:
    void open() { open_.store(true); }
    bool wait() const {
        return eventually([this] { return open_.load(); });
    }

private:
    std::atomic<bool> open_{false};
};

template <class F>
blz_status status_thrown_by(F &&f) {
    try {
        f();
    } catch (const blz::error &e) {
        return e.status();
    }
    return 0;
}

// The code of the test_error that f throws; -1 if it throws none.
template <class F>
int code_thrown_by(F &&f) {
    try {
        f();
    } catch (const test_error &e) {
        return e.code;
    }
    return -1;
}

std::uint64_t failed_tasks(const blz::pool &pool) { return pool.stats().tasks_failed; }

}  // namespace

// ---------------------------------------------------------------------------
// task::wait_for, is_ready

TEST_CASE("task::wait_for times out while the task is held, then reports it finished", "[cpp][task][wait_for]") {
    Watchdog watchdog("task wait_for", seconds(120));
    const std::uint32_t workers = GENERATE(1U, 2U);
    blz::pool pool(workers);
    gate release;
    blz::task<int> t = pool.spawn([&] {
        release.wait();
        return 5;
    });
    CHECK_FALSE(t.wait_for(milliseconds(1)));
    CHECK_FALSE(t.wait_for(nanoseconds(0)));
    CHECK_FALSE(t.wait_for(seconds(-1)));  // negative: a poll
    CHECK_FALSE(t.is_ready());
    CHECK(t.valid());  // a timeout changes nothing
    release.open();
    CHECK(t.wait_for(kPatience));
    CHECK(t.valid());  // until get()
    CHECK(t.is_ready());
    CHECK(t.wait_for(nanoseconds(0)));
    CHECK(t.get() == 5);  // without a second join of a freed handle
    CHECK_FALSE(t.valid());
    CHECK(status_thrown_by([&] { t.wait_for(milliseconds(1)); }) == BLZ_EINVAL);
    CHECK(status_thrown_by([&] { t.is_ready(); }) == BLZ_EINVAL);
    blz::task<void> empty;
    CHECK(status_thrown_by([&] { empty.wait_for(milliseconds(1)); }) == BLZ_EINVAL);
}

TEST_CASE("task::wait_for: then get() rethrows, returns references; move, destroy", "[cpp][task][wait_for]") {
    Watchdog watchdog("task wait_for results", seconds(120));
    blz::pool pool(2);
    blz::task<int> e = pool.spawn([]() -> int { throw test_error{6}; });
    CHECK(e.wait_for(kPatience));  // the exception is kept for get()
    CHECK(code_thrown_by([&] { e.get(); }) == 6);
    CHECK_FALSE(e.valid());

    int x = 0;
    blz::task<int &> r = pool.spawn([&]() -> int & { return x; });
    CHECK(r.wait_for(std::chrono::hours(1)));
    blz::task<int &> moved(std::move(r));  // a finished task moves with its status and value
    CHECK_FALSE(r.valid());                 // NOLINT(bugprone-use-after-move): empty by contract
    CHECK(&moved.get() == &x);

    tracked::live = 0;
    {
        blz::task<tracked> finished = pool.spawn([capture = tracked()] { return tracked(); });
        CHECK(finished.wait_for(kPatience));
        CHECK(tracked::live.load() == 1);  // the result, kept for get()
    }
    CHECK(tracked::live.load() == 0);  // freed without get(), and without a join
    blz::task<int> a = pool.spawn([] { return 1; });
    CHECK(a.wait_for(kPatience));
    a = pool.spawn([] { return 2; });  // replacing a finished task
    CHECK(a.get() == 2);
}

TEST_CASE("task::wait_for on a worker runs the task it waits for", "[cpp][task][wait_for]") {
    Watchdog watchdog("task wait_for on a worker", seconds(120));
    blz::pool pool(1);  // the only worker waits: only it can run the task
    const bool finished = pool.call([&] {
        blz::task<int> t = pool.spawn([] { return 3; });
        return t.wait_for(kPatience) && t.get() == 3;
    });
    CHECK(finished);
}

TEST_CASE("timeout_ns: any duration to nanoseconds, without overflow", "[cpp][wait_for]") {
    using blz::detail::timeout_ns;
    constexpr std::uint64_t forever = std::numeric_limits<std::uint64_t>::max();
    CHECK(timeout_ns(nanoseconds(0)) == 0);
    CHECK(timeout_ns(nanoseconds(-5)) == 0);
    CHECK(timeout_ns(std::chrono::hours::min()) == 0);
    CHECK(timeout_ns(nanoseconds(1)) == 1);
    CHECK(timeout_ns(milliseconds(3)) == 3000000U);
    CHECK(timeout_ns(seconds(1000)) == 1000000000000U);
    CHECK(timeout_ns(std::chrono::duration<double, std::nano>(1.25)) == 2);  // rounded up
    CHECK(timeout_ns(std::chrono::duration<double>(1e-12)) == 1);           // never a poll by rounding
    CHECK(timeout_ns(std::chrono::duration<double>(std::nan(""))) == 0);
    CHECK(timeout_ns(std::chrono::hours::max()) == forever);
    CHECK(timeout_ns(std::chrono::duration<double>(1e300)) == forever);
    CHECK(timeout_ns(std::chrono::duration<double>(HUGE_VAL)) == forever);
    CHECK(timeout_ns(seconds(600000000000LL)) == forever);  // beyond 2^64 ns
}

// ---------------------------------------------------------------------------
// task::detach

TEST_CASE("task::detach: the task runs on and frees itself; the pool waits for it", "[cpp][task][detach]") {
    Watchdog watchdog("task detach", seconds(120));
    tracked::live = 0;
    std::atomic<bool> ran{false};
    gate release;
    {
        blz::pool pool(2);
        blz::task<tracked> t = pool.spawn([&, capture = tracked()] {
            release.wait();
            ran = true;
            return tracked();
        });
        t.detach();
        CHECK_FALSE(t.valid());
        CHECK(status_thrown_by([&] { t.get(); }) == BLZ_EINVAL);
        CHECK(status_thrown_by([&] { t.detach(); }) == BLZ_EINVAL);
        CHECK_FALSE(ran.load());  // held at the gate
        CHECK(tracked::live.load() == 1);  // its callable: the state lives on without the task object
        release.open();
    }  // the pool's destructor waits for the detached task
    CHECK(ran.load());
    CHECK(tracked::live.load() == 0);  // callable and result freed by the task itself
}

TEST_CASE("task::detach before, during and after the task's end leaks nothing", "[cpp][task][detach]") {
    Watchdog watchdog("task detach races", seconds(120));
    const std::uint32_t workers = GENERATE(1U, 2U, 4U);
    tracked::live = 0;
    std::atomic<int> done{0}, failed{0};
    {
        blz::pool pool(workers);
        const int n = 400;
        for (int i = 0; i < n; ++i) {
            blz::task<tracked> t = pool.spawn(
                [capture = tracked(), i] {
                    if (i % 4 == 0) throw test_error{i};
                    return tracked();
                },
                [&](blz_status status, const std::exception_ptr &error) {
                    if (status == BLZ_ETASK && error) failed.fetch_add(1);
                    done.fetch_add(1);
                });
            for (int k = 0; k < i % 7; ++k) std::this_thread::yield();  // detach at varied moments
            t.detach();
        }
        CHECK(eventually([&] { return done.load() == n; }));
        CHECK(failed.load() == n / 4);
    }
    CHECK(done.load() == 400);
    CHECK(tracked::live.load() == 0);

    // Detached after wait_for saw it finish: on_done has run, so the state goes at once.
    blz::pool pool(2);
    blz::task<tracked> t = pool.spawn([] { return tracked(); });
    CHECK(t.wait_for(kPatience));
    CHECK(tracked::live.load() == 1);
    t.detach();
    CHECK_FALSE(t.valid());
    CHECK(tracked::live.load() == 0);
}

// ---------------------------------------------------------------------------
// task::cancel (0.3)

TEST_CASE("task::cancel: a queued task never runs and get() throws BLZ_ECANCELED; nothing leaks",
          "[cpp][task][cancel]") {
    Watchdog watchdog("task cancel", seconds(120));
    tracked::live = 0;
    std::atomic<int> ran{0};
    std::atomic<blz_status> done_status{0};
    {
        blz::pool pool(1);
        gate release;
        blz::task<void> holder = pool.spawn([&] { release.wait(); });
        blz::task<tracked> skipped = pool.spawn([&, capture = tracked()] {
            ran.fetch_add(1);
            return tracked();
        });
        blz::task<int> reported = pool.spawn([&] { ran.fetch_add(1); return 1; },
                                             [&](blz_status status, const std::exception_ptr &) { done_status = status; });
        skipped.cancel();
        reported.cancel();
        release.open();
        holder.get();
        CHECK(status_thrown_by([&] { skipped.get(); }) == BLZ_ECANCELED);
        CHECK_FALSE(skipped.valid());
        CHECK(status_thrown_by([&] { reported.get(); }) == BLZ_ECANCELED);
        CHECK(done_status.load() == BLZ_ECANCELED);
        CHECK(status_thrown_by([&] { skipped.cancel(); }) == BLZ_EINVAL);  // empty now
    }
    CHECK(ran.load() == 0);
    CHECK(tracked::live.load() == 0);  // the skipped task's callable was freed
}

TEST_CASE("task::cancel: a running task sees blz::cancelled() and returns its value", "[cpp][task][cancel]") {
    Watchdog watchdog("task cancel running", seconds(120));
    blz::pool pool(2);
    std::atomic<bool> started{false};
    blz::task<int> t = pool.spawn([&] {
        started = true;
        return eventually([] { return blz::cancelled(); }) ? 7 : -1;
    });
    REQUIRE(eventually([&] { return started.load(); }));
    t.cancel();
    CHECK(t.get() == 7);

    blz::task<int> finished = pool.spawn([] { return 3; });
    CHECK(finished.wait_for(kPatience));
    finished.cancel();  // finished: nothing changes
    CHECK(finished.get() == 3);
}

// ---------------------------------------------------------------------------
// spawn with on_done

TEST_CASE("spawn(f, on_done): once, on a worker, before get() returns, with status and exception",
          "[cpp][task][on_done]") {
    Watchdog watchdog("spawn on_done", seconds(120));
    const std::uint32_t workers = GENERATE(1U, 2U, 4U);
    blz::pool pool(workers);
    std::atomic<int> calls{0};
    std::atomic<blz_status> seen_status{1};
    std::atomic<std::int32_t> seen_worker{-2};
    std::atomic<bool> after_f{false};
    std::atomic<bool> f_returned{false};
    std::exception_ptr seen_error;  // written on the worker, read after the task finished
    const auto on_done = [&](blz_status status, std::exception_ptr error) {
        after_f = f_returned.load();
        seen_status = status;
        seen_error = std::move(error);
        seen_worker = pool.worker_index();
        calls.fetch_add(1);
    };

    blz::task<int> ok = pool.spawn(
        [&] {
            f_returned = true;
            return 3;
        },
        on_done);
    CHECK(ok.get() == 3);
    CHECK(calls.load() == 1);  // already, when get() returned
    CHECK(seen_status.load() == BLZ_OK);
    CHECK_FALSE(seen_error);
    CHECK(after_f.load());
    CHECK(seen_worker.load() >= 0);

    calls = 0;
    blz::task<int> thrown = pool.spawn([]() -> int { throw test_error{9}; }, on_done);
    CHECK(code_thrown_by([&] { thrown.get(); }) == 9);
    CHECK(calls.load() == 1);
    CHECK(seen_status.load() == BLZ_ETASK);
    REQUIRE(seen_error);
    CHECK(code_thrown_by([&] { std::rethrow_exception(seen_error); }) == 9);

    calls = 0;
    blz::task<int> failed = pool.spawn(
        [] {
            blz_fail();  // a failure without an exception
            return 1;
        },
        on_done);
    CHECK(status_thrown_by([&] { failed.get(); }) == BLZ_ETASK);
    CHECK(calls.load() == 1);
    CHECK(seen_status.load() == BLZ_ETASK);
    CHECK_FALSE(seen_error);

    calls = 0;
    { blz::task<int> unjoined = pool.spawn([] { return 2; }, on_done); }
    CHECK(calls.load() == 1);  // before the destructor's join returned
    calls = 0;
    blz::task<int> waited = pool.spawn([] { return 2; }, on_done);
    CHECK(waited.wait_for(kPatience));
    CHECK(calls.load() == 1);  // before wait_for reported it finished
    CHECK(waited.get() == 2);
    CHECK(calls.load() == 1);
}

TEST_CASE("spawn(f, on_done): a throwing callback is discarded; callables are freed", "[cpp][task][on_done]") {
    Watchdog watchdog("spawn on_done lifetimes", seconds(120));
    blz::pool pool(2);
    const auto throwing_done = [](blz_status, const std::exception_ptr &) { throw test_error{1}; };
    blz::task<int> t = pool.spawn([] { return 4; }, throwing_done);
    CHECK(t.get() == 4);  // the task's status is untouched
    CHECK(pool.call([] { return 5; }) == 5);

    tracked::live = 0;
    std::atomic<int> calls{0};
    blz::task<void> v = pool.spawn(  // both callables hold a tracked, created in place
        [capture = tracked()] {},
        [&calls, capture = tracked()](blz_status, std::exception_ptr) { calls.fetch_add(1); });
    v.get();
    CHECK(calls.load() == 1);
    CHECK(tracked::live.load() == 0);  // both callables went once they had run

    // A move-only callback, called as an rvalue.
    struct move_only_done {
        std::unique_ptr<int> value;
        std::atomic<int> *calls;
        void operator()(blz_status, const std::exception_ptr &) && { calls->fetch_add(*value); }
    };
    pool.spawn([] {}, move_only_done{std::make_unique<int>(10), &calls}).get();
    CHECK(calls.load() == 11);
}

// ---------------------------------------------------------------------------
// group: cancel, cancelled, blz::cancelled, wait_for

TEST_CASE("group::cancel skips the tasks not started; blz::cancelled() inside; reported once",
          "[cpp][group][cancel]") {
    Watchdog watchdog("group cancel", seconds(120));
    blz::pool pool(1);  // its one worker is held, so no other task of the group can start
    blz::group g = pool.group();
    gate release;
    std::atomic<bool> started{false};
    std::atomic<int> saw_cancelled{-1}, saw_group_cancelled{-1}, ran{0};
    tracked::live = 0;
    CHECK_FALSE(blz::cancelled());  // outside any task
    g.spawn([&] {
        started = true;
        release.wait();
        saw_cancelled = blz::cancelled() ? 1 : 0;
        saw_group_cancelled = g.cancelled() ? 1 : 0;
    });
    REQUIRE(eventually([&] { return started.load(); }));
    for (int i = 0; i < 50; ++i) g.spawn([&, capture = tracked()] { ran.fetch_add(1); });
    CHECK_FALSE(g.cancelled());
    g.cancel();
    CHECK(g.cancelled());
    g.cancel();  // the same as once
    for (int i = 0; i < 50; ++i) g.spawn([&, capture = tracked()] { ran.fetch_add(1); });  // skipped too
    release.open();
    CHECK(status_thrown_by([&] { g.wait(); }) == BLZ_ECANCELED);
    CHECK(ran.load() == 0);
    CHECK(tracked::live.load() == 0);  // the skipped tasks' callables were freed
    CHECK(saw_cancelled.load() == 1);
    CHECK(saw_group_cancelled.load() == 1);
    CHECK(pool.stats().tasks_failed == 0);  // a cancellation is no failure

    // The wait reset the group: reported once, and spawns run again.
    CHECK_FALSE(g.cancelled());
    CHECK_NOTHROW(g.wait());
    std::atomic<int> uncancelled{-1};
    g.spawn([&] {
        ran.fetch_add(1);
        uncancelled = blz::cancelled() ? 1 : 0;
    });
    g.wait();
    CHECK(ran.load() == 1);
    CHECK(uncancelled.load() == 0);

    // A task may cancel its own group.
    std::atomic<int> self_cancelled{-1};
    g.spawn([&] {
        g.cancel();
        self_cancelled = blz::cancelled() ? 1 : 0;
    });
    CHECK(status_thrown_by([&] { g.wait(); }) == BLZ_ECANCELED);
    CHECK(self_cancelled.load() == 1);

    blz::group empty;
    CHECK(status_thrown_by([&] { empty.cancel(); }) == BLZ_EINVAL);
    CHECK_FALSE(empty.cancelled());
}

TEST_CASE("group::cancel stops a parallel_for of its task, which throws BLZ_ECANCELED (no failure)",
          "[cpp][group][cancel][parallel_for]") {
    Watchdog watchdog("group cancel parallel_for", seconds(120));
    const std::uint32_t workers = GENERATE(1U, 2U, 4U);
    blz::pool pool(workers);
    blz::group g = pool.group();
    const std::size_t n = 10000;
    std::atomic<std::size_t> pieces{0};
    std::atomic<blz_status> loop_status{0};
    const auto deadline = clock_type::now() + kPatience;
    g.spawn([&] {
        try {
            pool.parallel_for(0, n, [&](std::size_t lo, std::size_t) {
                pieces.fetch_add(1);
                if (lo == 0) g.cancel();  // the first piece of the calling worker, which runs it inline
                // Hold the other pieces until the cancel: few start before it,
                // whatever the timing. One deadline for all: a bug fails, not hangs.
                eventually([] { return blz::cancelled(); }, deadline);
            }, 1);
        } catch (const blz::error &e) {
            loop_status = e.status();
            throw;  // the cancellation travels up: no failure
        }
    });
    CHECK(status_thrown_by([&] { g.wait(); }) == BLZ_ECANCELED);
    CHECK(loop_status.load() == BLZ_ECANCELED);
    CHECK(pieces.load() >= 1);
    CHECK(pieces.load() < n / 10);  // far fewer than all
    CHECK(pool.stats().tasks_failed == 0);
}

TEST_CASE("group::wait_for: times out without consuming, then reports as wait does", "[cpp][group][wait_for]") {
    Watchdog watchdog("group wait_for", seconds(120));
    const std::uint32_t workers = GENERATE(1U, 2U);
    blz::pool pool(workers);
    blz::group g = pool.group();
    CHECK(g.wait_for(nanoseconds(0)));  // nothing to wait for
    gate release;
    g.spawn([] { throw test_error{4}; });
    g.spawn([&] { release.wait(); });
    CHECK_FALSE(g.wait_for(milliseconds(1)));
    CHECK_FALSE(g.wait_for(nanoseconds(0)));
    release.open();
    CHECK(code_thrown_by([&] { g.wait_for(kPatience); }) == 4);  // kept through the timeouts
    CHECK(g.wait_for(kPatience));                                // reported once
    CHECK_NOTHROW(g.wait());

    g.cancel();
    CHECK(status_thrown_by([&] { g.wait_for(kPatience); }) == BLZ_ECANCELED);
    CHECK(g.wait_for(nanoseconds(0)));
    blz::group empty;
    CHECK(status_thrown_by([&] { empty.wait_for(milliseconds(1)); }) == BLZ_EINVAL);
}

// ---------------------------------------------------------------------------
// cancel_on_failure

TEST_CASE("cancel_on_failure: a failing parallel_for piece stops the loop early", "[cpp][group][cancel_on_failure]") {
    Watchdog watchdog("cancel_on_failure parallel_for", seconds(120));
    const std::uint32_t workers = GENERATE(1U, 2U, 4U);
    blz::pool pool(workers);
    blz::group g = pool.group(blz::cancel_on_failure);
    const std::size_t n = 10000;
    std::atomic<std::size_t> pieces{0};
    const auto deadline = clock_type::now() + kPatience;
    g.spawn([&] {
        pool.parallel_for(0, n, [&](std::size_t lo, std::size_t) {
            pieces.fetch_add(1);
            if (lo == 0) throw test_error{0};  // the calling worker's first piece
            // Only the failure's blz_fail can end this wait before the
            // deadline (one for all pieces): without it every piece runs.
            eventually([] { return blz::cancelled(); }, deadline);
        }, 1);
    });
    CHECK(code_thrown_by([&] { g.wait(); }) == 0);
    CHECK(pieces.load() >= 1);
    CHECK(pieces.load() < n / 10);  // far fewer than all
    // Reset by the wait: the group runs tasks again.
    std::atomic<int> ran{0};
    g.spawn([&] { ran.fetch_add(1); });
    CHECK_NOTHROW(g.wait());
    CHECK(ran.load() == 1);
}

TEST_CASE("cancel_on_failure: a failing task skips the queued ones; join and call sides cancel at once",
          "[cpp][group][cancel_on_failure]") {
    Watchdog watchdog("cancel_on_failure", seconds(120));
    blz::pool pool(1);  // one worker: what runs after the failure is decided, not raced
    blz::group g = pool.group(blz::group_flags::cancel_on_failure);
    gate release;
    std::atomic<bool> started{false};
    std::atomic<int> ran{0};
    g.spawn([&] {
        started = true;
        release.wait();
        throw test_error{1};
    });
    REQUIRE(eventually([&] { return started.load(); }));
    for (int i = 0; i < 50; ++i) g.spawn([&] { ran.fetch_add(1); });
    release.open();
    CHECK(code_thrown_by([&] { g.wait(); }) == 1);
    CHECK(ran.load() == 0);
    CHECK(pool.stats().tasks_failed == 1);

    // A join side that throws cancels the group before the join returns:
    // the other side, run after it on the one worker, sees it (if it runs).
    std::atomic<int> other_side{-1};
    g.spawn([&] {
        pool.join([] { throw test_error{2}; }, [&] { other_side = blz::cancelled() ? 1 : 0; });
    });
    CHECK(code_thrown_by([&] { g.wait(); }) == 2);
    CHECK(other_side.load() != 0);

    // A call() that throws cancels the group before it returns.
    std::atomic<int> after_call{-1};
    g.spawn([&] {
        try {
            pool.call([] { throw test_error{3}; });
        } catch (const test_error &) {
            after_call = blz::cancelled() ? 1 : 0;
        }
    });
    // The task itself did not throw: the wait reports the failure of its
    // call (BLZ_ETASK) or only the cancellation it caused.
    const blz_status after_call_wait = status_thrown_by([&] { g.wait(); });
    CHECK((after_call_wait == BLZ_ETASK || after_call_wait == BLZ_ECANCELED));
    CHECK(after_call.load() == 1);

    // A plain group is not cancelled by a failure.
    blz::group plain = pool.group();
    std::atomic<int> plain_ran{0};
    plain.spawn([] { throw test_error{4}; });
    for (int i = 0; i < 10; ++i) plain.spawn([&] { plain_ran.fetch_add(1); });
    CHECK(code_thrown_by([&] { plain.wait(); }) == 4);
    CHECK(plain_ran.load() == 10);
}

// ---------------------------------------------------------------------------
// Every trampoline reports its failure to the C API

TEST_CASE("every trampoline reports its exception to the C API (tasks_failed)", "[cpp][exceptions][fail]") {
    Watchdog watchdog("tasks_failed", seconds(120));
    const std::uint32_t workers = GENERATE(1U, 2U);
    blz::pool pool(workers);
    std::uint64_t before = failed_tasks(pool);
    REQUIRE(before == 0);
    // How many failures the C API counted since the previous call.
    const auto counted = [&] {
        const std::uint64_t now = failed_tasks(pool);
        return now - std::exchange(before, now);
    };
    CHECK(code_thrown_by([&] { pool.join([]() -> int { throw test_error{1}; }, [] { return 0; }); }) == 1);
    CHECK(counted() == 1);
    CHECK(code_thrown_by([&] { pool.join([] { return 0; }, []() -> int { throw test_error{2}; }); }) == 2);
    CHECK(counted() == 1);
    // Both sides: once per side a thief ran, once for the two the forker ran
    // itself (their failures belong to the job the join runs in).
    CHECK(code_thrown_by([&] { pool.join([] { throw test_error{3}; }, [] { throw test_error{4}; }); }) == 3);
    const std::uint64_t both = counted();
    CHECK((both == 1 || both == 2));
    CHECK(code_thrown_by([&] { pool.call([] { throw test_error{5}; }); }) == 5);
    CHECK(counted() == 1);
    blz::task<void> t = pool.spawn([] { throw test_error{6}; });
    CHECK(code_thrown_by([&] { t.get(); }) == 6);
    CHECK(counted() == 1);
    blz::group g = pool.group();
    g.spawn([] { throw test_error{7}; });
    CHECK(code_thrown_by([&] { g.wait(); }) == 7);
    CHECK(counted() == 1);
    CHECK(code_thrown_by([&] {
              pool.parallel_for(0, 100, [](std::size_t lo, std::size_t hi) {
                  if (lo <= 50 && 50 < hi) throw test_error{8};
              }, 1);
          }) == 8);
    CHECK(counted() == 1);
    CHECK(code_thrown_by([&] {
              pool.broadcast([](std::uint32_t index) {
                  if (index == 0) throw test_error{9};
              });
          }) == 9);
    CHECK(counted() == 1);
    // Caught inside user code: the inner call failed, the outer one did not.
    pool.call([&] {
        try {
            pool.call([] { throw test_error{10}; });
        } catch (const test_error &) {
        }
    });
    CHECK(counted() == 1);
    pool.call([] {});
    pool.join([] {}, [] {});
    CHECK(counted() == 0);
}

// ---------------------------------------------------------------------------
// broadcast

TEST_CASE("broadcast calls f once on every worker, from outside and from a worker", "[cpp][broadcast]") {
    Watchdog watchdog("broadcast", seconds(120));
    const std::uint32_t workers = GENERATE(1U, 2U, 4U);
    blz::pool pool(workers);
    std::vector<std::atomic<int>> hits(workers);
    std::atomic<bool> bad_index{false};
    std::mutex mutex;
    std::set<std::thread::id> threads;
    const auto count = [&](std::uint32_t index) {
        if (index >= workers || pool.worker_index() != static_cast<std::int32_t>(index)) {
            bad_index = true;
            return;
        }
        hits[index].fetch_add(1);
        std::lock_guard<std::mutex> lock(mutex);
        threads.insert(std::this_thread::get_id());
    };
    pool.broadcast(count);
    CHECK_FALSE(bad_index.load());
    for (std::uint32_t i = 0; i < workers; ++i) CHECK(hits[i].load() == 1);
    CHECK(threads.size() == workers);

    pool.call([&] { pool.broadcast(count); });  // from a worker: no deadlock
    for (std::uint32_t i = 0; i < workers; ++i) CHECK(hits[i].load() == 2);
    CHECK_FALSE(bad_index.load());

    std::atomic<std::uint32_t> ran{0};
    CHECK(code_thrown_by([&] {
              pool.broadcast([&](std::uint32_t index) {
                  ran.fetch_add(1);
                  if (index == workers - 1) throw test_error{static_cast<int>(index)};
              });
          }) == static_cast<int>(workers - 1));
    CHECK(ran.load() == workers);  // every worker still ran f

    blz::pool taken(std::move(pool));
    // NOLINTNEXTLINE(bugprone-use-after-move): empty by contract
    CHECK(status_thrown_by([&] { pool.broadcast([](std::uint32_t) {}); }) == BLZ_EINVAL);
}

TEST_CASE("pool_options::cpu_list, set_max_active, worker_stats and spawn_high_priority", "[cpp][operate]") {
    blz_test::Watchdog watchdog("cpp operate", std::chrono::seconds(120));
    cpu_set_t mine;
    CPU_ZERO(&mine);
    REQUIRE(sched_getaffinity(0, sizeof(mine), &mine) == 0);
    int first = 0;
    while (!CPU_ISSET(first, &mine)) ++first;
    blz::pool_options options;
    options.cpu_list = std::to_string(first);
    blz::pool pool(options);
    REQUIRE(pool.num_threads() == 1);  // one worker per entry
    int seen_cpu = -1;
    pool.broadcast([&](std::uint32_t) { seen_cpu = sched_getcpu(); });
    CHECK(seen_cpu == first);

    pool.set_max_active(1);
    CHECK(pool.spawn_high_priority([] { return 7; }).get() == 7);
    pool.set_max_active(0);
    const blz_stats worker = pool.worker_stats(0);
    CHECK(worker.num_threads == 1);
    CHECK(worker.jobs_executed >= 2);
    CHECK(status_thrown_by([&] { (void)pool.worker_stats(1); }) == BLZ_EINVAL);

    blz::pool_options bad;
    bad.cpu_list = "0-";
    CHECK(status_thrown_by([&] { blz::pool refused(bad); }) == BLZ_EINVAL);
}

TEST_CASE("pool::trace_start and trace_stop write a trace file; misuse throws", "[cpp][trace]") {
    Watchdog watchdog("cpp trace", std::chrono::seconds(120));
    const blz_test::TempDir dir;
    const std::string path = dir / "cpp.json";
    blz::pool pool(2);
    const std::uint32_t workers = pool.num_threads();

    pool.trace_start(path);
    CHECK(status_thrown_by([&] { pool.trace_start(path); }) == BLZ_EINVAL);  // one trace at a time
    // A span is written when its job ends, possibly after the broadcast
    // returned; the broadcast after it cannot finish before each worker
    // wrote its span of the one before.
    const int broadcasts = 3;
    for (int i = 0; i < broadcasts; ++i) pool.broadcast([](std::uint32_t) {});
    pool.trace_stop();
    CHECK(status_thrown_by([&] { pool.trace_stop(); }) == BLZ_EINVAL);  // none running
    CHECK(status_thrown_by([&] { pool.trace_start(dir / "missing/x.json"); }) == BLZ_EINVAL);
    CHECK(status_thrown_by([&] { pool.trace_start(""); }) == BLZ_EINVAL);

    const std::string text = blz_test::contents_of(path);
    CHECK(text.rfind("{", 0) == 0);
    CHECK(blz_test::occurrences(text, "\"traceEvents\"") == 1);
    const std::size_t spans = blz_test::occurrences(text, "\"source\":\"broadcast\"");
    CHECK(spans >= workers * (broadcasts - 1));
    CHECK(spans <= workers * broadcasts);
}

// 0.3: blz::pool::shared(), the process pool. Each object holds one
// reference; the pool goes with the last one, then a new one is made.
TEST_CASE("pool::shared: one pool for every user, given up by the last destructor", "[cpp][shared]") {
    blz_pool *first = nullptr;
    {
        blz::pool a = blz::pool::shared();
        blz::pool b = blz::pool::shared();
        REQUIRE(a.native_handle() != nullptr);
        CHECK(a.native_handle() == b.native_handle());
        first = a.native_handle();
        std::atomic<int> ran{0};
        auto task = b.spawn([&] { ran.fetch_add(1); return 7; });
        {
            blz::pool c = std::move(a);  // moved: still one reference
            CHECK(c.native_handle() == first);
        }  // c gives its reference up; b keeps the pool
        CHECK(task.get() == 7);
        auto [x, y] = b.join([] { return 1; }, [] { return 2; });
        CHECK(x + y == 3);
        CHECK(ran.load() == 1);
    }
    blz::pool again = blz::pool::shared();
    CHECK(again.num_threads() >= 1);
    CHECK(again.join([] { return 1; }, [] { return 2; }).second == 2);
}

namespace {
std::uint64_t fib_by_free_join(unsigned n) {
    if (n < 2) return n;
    auto [a, b] = blz::join([n] { return fib_by_free_join(n - 1); }, [n] { return fib_by_free_join(n - 2); });
    return a + b;
}
}  // namespace

TEST_CASE("blz::join forks on the calling worker's pool, and off every pool in the process pool", "[cpp][join]") {
    blz::pool p(2);
    // On a worker: the inline path of the worker's own pool.
    const auto on_worker = p.call([&] {
        auto [value, where] = blz::join([] { return fib_by_free_join(20); },
                                        [&p] { return blz_worker_index(p.native_handle()); });
        return std::make_pair(value, where);
    });
    CHECK(on_worker.first == 6765);
    CHECK(on_worker.second >= 0);  // g ran on a worker of p (inline, or stolen by p's other worker)
    // Off every pool: the pair runs in the process pool (blz_pool_shared).
    blz::pool shared = blz::pool::shared();
    auto [a, b] = blz::join([&] { return blz_worker_index(shared.native_handle()); },
                            [] { return fib_by_free_join(15); });
    CHECK(a >= 0);
    CHECK(b == 610);
    // Exceptions as pool::join's: f's is rethrown after both sides ran.
    std::atomic<bool> g_ran{false};
    CHECK_THROWS_AS(blz::join([]() -> int { throw std::runtime_error("f"); }, [&] { g_ran.store(true); }),
                    std::runtime_error);
    CHECK(g_ran.load());
    CHECK_THROWS_AS(p.call([] { return blz::join([] { return 1; }, []() -> int { throw std::logic_error("g"); }); }),
                    std::logic_error);
}

TEST_CASE("blz::blocking: tasks blocked inside it leave the pool running; values and exceptions pass through",
          "[cpp][blocking]") {
    blz::pool p(2);
    std::atomic<bool> release{false};
    std::atomic<int> entered{0};
    auto blocker = [&] {
        return blz::blocking([&] {
            entered.fetch_add(1);
            while (!release.load()) std::this_thread::sleep_for(std::chrono::microseconds(50));
            return 7;
        });
    };
    auto first = p.spawn(blocker);
    auto second = p.spawn(blocker);
    while (entered.load() < 2) std::this_thread::sleep_for(std::chrono::microseconds(50));
    // Both workers are inside blocking sections: the call runs on a stand-in
    // while neither blocker can have returned (release is still false).
    CHECK(p.call([] { return fib_by_free_join(20); }) == 6765);
    CHECK_FALSE(release.load());
    release.store(true);
    CHECK(first.get() == 7);
    CHECK(second.get() == 7);
    int value = 5;
    int &same = blz::blocking([&]() -> int & { return value; });
    CHECK(&same == &value);
    CHECK_THROWS_AS(blz::blocking([]() -> int { throw std::runtime_error("blocked"); }), std::runtime_error);
    CHECK(blz_block_end() == BLZ_EINVAL);  // the section was closed by the unwind
}
