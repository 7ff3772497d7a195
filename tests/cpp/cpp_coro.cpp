// C++20 coroutines of include/blitz.hpp (blz::co, 0.3): co::task awaited
// by another, co::spawn and co::spawned (co_await and get), co::when_all,
// co_await of a blz::task and of a C task from co::spawn_ex (blz_spawn_ex
// with on_done), exceptions, the hand-off race of an await and on_done in
// both orders, and what a pool's destruction does to a suspended coroutine.
//
// No thread blocks: every coroutine body of these tests counts itself on
// the thread it runs on (bodies_here, a thread_local), from the moment it
// resumes to the moment its await has suspended it. A wait that blocked a
// worker inside an await (and ran other jobs meanwhile, as blz_join does)
// would run another body on the same stack while the first is still
// counted: nested_bodies counts every such sight, and the tests require 0.
// Where a test holds an awaited task open, it also requires the awaiting
// coroutine's worker to go idle (blz_stats::inactive_now): a coroutine
// waiting inside its job would keep it busy.
//
// No test depends on timing to pass: gates hold tasks until the test opens
// them; timeouts are upper bounds that turn a bug into a failure.
#include <blitz.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "../support.hpp"

#if !defined(BLZ_HAS_COROUTINES)
#error "cpp_coro needs a compiler with C++20 coroutines"
#endif

namespace {

using blz_test::Gate;
using blz_test::OpenOnExit;
using blz_test::test_error;
using blz_test::tracked;
using blz_test::Watchdog;
using std::chrono::milliseconds;
using std::chrono::seconds;

namespace co = blz::co;

// Coroutine bodies of the tests running on this thread's stack right now.
thread_local int bodies_here = 0;
// Times a body resumed on a thread where another body was still counted.
std::atomic<int> nested_bodies{0};

void body_enters() {
    if (++bodies_here != 1) nested_bodies.fetch_add(1);
}
void body_leaves() { --bodies_here; }
// A plain job (not a coroutine) runs: on a stack where no body is counted.
void job_runs() {
    if (bodies_here != 0) nested_bodies.fetch_add(1);
}

// A body that enters now and leaves at scope exit: for a body whose end
// (co_return or an exception) is its only way out after the last await.
struct body_scope {
    body_scope() { body_enters(); }
    ~body_scope() { body_leaves(); }
    body_scope(const body_scope &) = delete;
    body_scope &operator=(const body_scope &) = delete;
};

// The awaiter an awaitable gives: its operator co_await (member or free), else itself.
template <class A>
decltype(auto) awaiter_of(A &&a) {
    if constexpr (requires { std::forward<A>(a).operator co_await(); }) {
        return std::forward<A>(a).operator co_await();
    } else if constexpr (requires { operator co_await(std::forward<A>(a)); }) {
        return operator co_await(std::forward<A>(a));
    } else {
        return std::forward<A>(a);
    }
}

// co_await counted(x): x's await, with the body leaving the thread's count
// once x's await_suspend has returned (the coroutine is suspended; nothing
// of it is touched after that but the thread_local) and entering it again
// where it resumes. The flag `left` is written before await_suspend, while
// the coroutine is still ours.
template <class A>
struct counted {
    A inner;
    bool left = false;

    bool await_ready() { return inner.await_ready(); }

    template <class P>
    auto await_suspend(std::coroutine_handle<P> h) {
        left = true;
        using result = decltype(inner.await_suspend(h));
        if constexpr (std::is_void_v<result>) {
            inner.await_suspend(h);
            body_leaves();
        } else if constexpr (std::is_same_v<result, bool>) {
            const bool suspended = inner.await_suspend(h);
            if (suspended) {
                body_leaves();
            } else {
                left = false;
            }
            return suspended;
        } else {
            const std::coroutine_handle<> next = inner.await_suspend(h);
            body_leaves();
            return next;
        }
    }

    decltype(auto) await_resume() {
        if (left) body_enters();
        return inner.await_resume();
    }
};

// The awaiter is held by value, or by reference when it is the awaitable
// itself (a temporary of the co_await's full expression, such as when_all's).
template <class A>
auto counted_await(A &&a) {
    return counted<decltype(awaiter_of(std::forward<A>(a)))>{awaiter_of(std::forward<A>(a))};
}

long fib_sequential(int n) { return n < 2 ? n : fib_sequential(n - 1) + fib_sequential(n - 2); }

// fib with a spawned child (in parallel) and an awaited one (here).
co::task<long> fib(blz::pool &pool, int n) {
    body_enters();
    if (n < 2) {
        body_leaves();
        co_return n;
    }
    co::spawned<long> first = co::spawn(pool, fib(pool, n - 1));
    const long second = co_await counted_await(fib(pool, n - 2));
    const long sum = co_await counted_await(first) + second;
    body_leaves();
    co_return sum;
}

co::task<std::uint64_t> square(std::uint64_t i) {
    const body_scope body;
    co_return i * i;
}

co::task<std::uint64_t> fan_out(blz::pool &pool, std::size_t n) {
    body_enters();
    std::vector<co::spawned<std::uint64_t>> children;
    children.reserve(n);
    for (std::size_t i = 0; i < n; ++i) children.push_back(co::spawn(pool, square(i)));
    const std::vector<std::uint64_t> squares = co_await counted_await(co::when_all(std::move(children)));
    std::uint64_t sum = 0;
    for (std::size_t i = 0; i < squares.size(); ++i) {
        if (squares[i] != std::uint64_t{i} * i) sum = ~std::uint64_t{0};  // out of order: a wrong sum
        if (sum != ~std::uint64_t{0}) sum += squares[i];
    }
    body_leaves();
    co_return sum;
}

std::uint64_t sum_of_squares(std::uint64_t n) { return (n - 1) * n * (2 * n - 1) / 6; }

// Waits until a worker of the pool is idle: the coroutine that ran there
// has suspended and its job returned.
bool some_worker_idle(const blz::pool &pool, std::uint32_t busy_elsewhere) {
    return blz_test::eventually([&] { return pool.stats().inactive_now + busy_elsewhere >= pool.num_threads(); },
                                seconds(30));
}

template <class F>
blz_status status_thrown_by(F &&f) {
    try {
        f();
    } catch (const blz::error &e) {
        return e.status();
    }
    return 0;
}

}  // namespace

TEST_CASE("coroutine fib matches the sequential one, no body nested", "[cpp][coro]") {
    Watchdog watchdog("coroutine fib", seconds(120));
    const std::uint32_t workers = GENERATE(1U, 2U);
    blz::pool pool(workers);
    nested_bodies.store(0);
    CHECK(co::spawn(pool, fib(pool, 18)).get() == fib_sequential(18));
    CHECK(co::spawn(pool, fib(pool, 1)).get() == 1);
    CHECK(nested_bodies.load() == 0);
    CHECK(pool.stats().tasks_failed == 0);
}

TEST_CASE("coroutine fib started from inside the pool, awaited there", "[cpp][coro]") {
    Watchdog watchdog("coroutine fib on a worker", seconds(120));
    blz::pool pool(2);
    nested_bodies.store(0);
    // A coroutine that spawns fib and awaits it: every start is on a worker.
    auto outer = [](blz::pool &p) -> co::task<long> {
        body_enters();
        const long r = co_await counted_await(co::spawn(p, fib(p, 15)));
        body_leaves();
        co_return r;
    };
    CHECK(co::spawn(pool, outer(pool)).get() == fib_sequential(15));
    CHECK(nested_bodies.load() == 0);
}

TEST_CASE("fan-out of 1000 coroutines, fan-in by when_all", "[cpp][coro][when_all]") {
    Watchdog watchdog("when_all 1000", seconds(120));
    const std::uint32_t workers = GENERATE(1U, 2U);
    blz::pool pool(workers);
    nested_bodies.store(0);
    CHECK(co::spawn(pool, fan_out(pool, 1000)).get() == sum_of_squares(1000));
    CHECK(nested_bodies.load() == 0);
}

TEST_CASE("when_all: void, empty, already ended children, an empty co::spawned", "[cpp][coro][when_all]") {
    Watchdog watchdog("when_all forms", seconds(120));
    blz::pool pool(2);
    std::atomic<int> ran{0};
    auto count = [](std::atomic<int> &r) -> co::task<void> {
        r.fetch_add(1);
        co_return;
    };
    auto all = [&](std::size_t n) -> co::task<void> {
        std::vector<co::spawned<void>> kids;
        for (std::size_t i = 0; i < n; ++i) kids.push_back(co::spawn(pool, count(ran)));
        // Some have ended before the await parks on them, most likely all on one worker.
        if (n > 0) (void)kids.front().wait_for(seconds(30));
        co_await co::when_all(std::move(kids));
    };
    co::spawn(pool, all(0)).get();
    co::spawn(pool, all(1)).get();
    co::spawn(pool, all(300)).get();
    CHECK(ran.load() == 301);

    std::vector<co::spawned<int>> with_empty(2);
    CHECK(status_thrown_by([&] { (void)co::when_all(std::move(with_empty)); }) == BLZ_EINVAL);
}

TEST_CASE("exceptions travel up: awaited task, spawned coroutine, get, when_all", "[cpp][coro][exceptions]") {
    Watchdog watchdog("coroutine exceptions", seconds(120));
    blz::pool pool(2);
    auto thrower = [](int code) -> co::task<int> {
        if (code >= 0) throw test_error{code};
        co_return -code;
    };
    auto catches = [&]() -> co::task<int> {
        int caught = 0;
        co::task<int> named = thrower(-30);
        caught += co_await std::move(named);
        if (named.valid()) caught = -1000;  // awaited: empty
        try {
            (void)co_await thrower(3);
        } catch (const test_error &e) {
            caught += e.code;
        }
        try {
            (void)co_await co::spawn(pool, thrower(4));
        } catch (const test_error &e) {
            caught += 10 * e.code;
        }
        co_return caught + co_await thrower(-100);
    };
    const std::uint64_t failed_before = pool.stats().tasks_failed;
    CHECK(co::spawn(pool, catches()).get() == 173);
    // The spawned thrower counted once; the awaited one travelled, uncounted.
    // The count is made at the end of the job that ran the thrower, which
    // may come after get() returned (the coroutine's end woke it first).
    CHECK(blz_test::eventually([&] { return pool.stats().tasks_failed >= failed_before + 1; }));
    CHECK(pool.stats().tasks_failed == failed_before + 1);

    co::spawned<int> root = co::spawn(pool, thrower(5));
    try {
        (void)root.get();
        FAIL("get() returned");
    } catch (const test_error &e) {
        CHECK(e.code == 5);
    }
    CHECK_FALSE(root.valid());
    CHECK(status_thrown_by([&] { (void)root.get(); }) == BLZ_EINVAL);

    // when_all: every child ends, then the first exception in order.
    std::atomic<int> ended{0};
    auto child = [](int i, std::atomic<int> &e) -> co::task<int> {
        e.fetch_add(1);
        if (i % 7 == 3) throw test_error{i};
        co_return i;
    };
    auto gather = [&]() -> co::task<int> {
        std::vector<co::spawned<int>> kids;
        for (int i = 0; i < 50; ++i) kids.push_back(co::spawn(pool, child(i, ended)));
        try {
            (void)co_await co::when_all(std::move(kids));
        } catch (const test_error &e) {
            co_return e.code;
        }
        co_return -1;
    };
    CHECK(co::spawn(pool, gather()).get() == 3);
    CHECK(ended.load() == 50);
}

TEST_CASE("co_await of a blz::task: value, exception, cancellation; no worker waits", "[cpp][coro][task]") {
    Watchdog watchdog("co_await blz::task", seconds(120));
    Gate gate;
    blz::pool pool(2);
    nested_bodies.store(0);
    OpenOnExit opener{gate};
    std::atomic<bool> about_to_await{false};
    auto awaits = [&]() -> co::task<int> {
        body_enters();
        blz::task<int> t = pool.spawn([&] {
            job_runs();
            gate.pass();
            return 41;
        });
        about_to_await.store(true);
        const int v = co_await counted_await(t);  // suspends: the task is held at the gate
        body_leaves();
        co_return t.valid() ? -1 : v + 1;  // the task is empty after the await
    };
    co::spawned<int> s = co::spawn(pool, awaits());
    REQUIRE(gate.wait_entered());
    REQUIRE(blz_test::eventually([&] { return about_to_await.load(); }));
    // One worker holds the gate; the coroutine's has gone idle: it waits in no job.
    CHECK(some_worker_idle(pool, 1));
    CHECK_FALSE(s.is_ready());
    gate.release();
    CHECK(s.get() == 42);
    CHECK(nested_bodies.load() == 0);

    // Finished before the await (the hand-off's other order): no suspension.
    auto late = [&]() -> co::task<int> {
        blz::task<int> t = pool.spawn([] { return 7; });
        if (!t.wait_for(seconds(30))) co_return -1;
        co_return co_await t;
    };
    CHECK(co::spawn(pool, late()).get() == 7);

    auto fails = [&]() -> co::task<int> {
        int code = 0;
        try {
            co_await pool.spawn([] { throw test_error{9}; });
        } catch (const test_error &e) {
            code = e.code;
        }
        blz::task<void> cancelled = pool.spawn([&] { gate.pass(); });
        cancelled.cancel();  // at the gate or not yet started: either way an answer comes
        try {
            co_await std::move(cancelled);
        } catch (const blz::error &e) {
            if (e.status() == BLZ_ECANCELED) code += 100;
        }
        blz::task<void> empty;
        try {
            co_await empty;
        } catch (const blz::error &e) {
            if (e.status() == BLZ_EINVAL) code += 1000;
        }
        co_return code;
    };
    // The gate is open: a cancelled task that started anyway returns normally.
    const int code = co::spawn(pool, fails()).get();
    CHECK((code == 1109 || code == 1009));
}

TEST_CASE("the hand-off of an await and on_done, many times in both orders", "[cpp][coro][task]") {
    Watchdog watchdog("await/on_done race", seconds(120));
    blz::pool pool(2);
    nested_bodies.store(0);
    auto many = [&](int rounds) -> co::task<long> {
        body_enters();
        long sum = 0;
        for (int i = 0; i < rounds; ++i) {
            sum += co_await counted_await(pool.spawn([i] {
                job_runs();
                return i;
            }));
        }
        body_leaves();
        co_return sum;
    };
    co::spawned<long> a = co::spawn(pool, many(2000));
    co::spawned<long> b = co::spawn(pool, many(2000));
    CHECK(a.get() == 1999L * 2000 / 2);
    CHECK(b.get() == 1999L * 2000 / 2);
    CHECK(nested_bodies.load() == 0);
}

TEST_CASE("co_await of a C task spawned by blz_spawn_ex (co::spawn_ex)", "[cpp][coro][spawn_ex]") {
    Watchdog watchdog("co_await blz_spawn_ex", seconds(120));
    Gate gate;
    blz::pool pool(2);
    nested_bodies.store(0);
    OpenOnExit opener{gate};
    std::atomic<int> user_done_calls{0};
    std::atomic<int> ran{0};
    struct user_done {
        static void fn(void *arg, blz_status status) {
            if (status == BLZ_OK) static_cast<std::atomic<int> *>(arg)->fetch_add(1);
        }
    };
    blz_group *group = nullptr;
    REQUIRE(blz_group_create(pool.native_handle(), &group) == BLZ_OK);
    auto awaits = [&]() -> co::task<int> {
        body_enters();
        blz_spawn_options options;
        blz_spawn_options_init(&options);
        options.group = group;
        options.on_done = &user_done::fn;
        options.done_arg = &user_done_calls;
        auto held = [&] {
            job_runs();
            gate.pass();
            ran.fetch_add(1);
        };
        blz_status first = co_await counted_await(
            co::spawn_ex(nullptr, blz_test::thunk_of(held), &held, &options));
        // Finished and out of its group: the group has nothing left to wait for.
        if (blz_group_wait_for(group, 0) != BLZ_OK) first = BLZ_ETIMEDOUT;
        auto fails = [] { blz_fail(); };
        const blz_status second = co_await counted_await(
            co::spawn_ex(pool.native_handle(), blz_test::thunk_of(fails), &fails));
        body_leaves();
        co_return first == BLZ_OK && second == BLZ_ETASK ? 1 : 0;
    };
    co::spawned<int> s = co::spawn(pool, awaits());
    REQUIRE(gate.wait_entered());
    CHECK(some_worker_idle(pool, 1));
    gate.release();
    CHECK(s.get() == 1);
    CHECK(ran.load() == 1);
    CHECK(user_done_calls.load() == 1);  // the caller's on_done still ran, once
    CHECK(blz_group_destroy(group) == BLZ_OK);
    CHECK(nested_bodies.load() == 0);

    // A cancelled group's task reports BLZ_ECANCELED; a refused spawn throws.
    blz_group *cancelled = nullptr;
    REQUIRE(blz_group_create(pool.native_handle(), &cancelled) == BLZ_OK);
    REQUIRE(blz_group_cancel(cancelled) == BLZ_OK);
    auto skipped = [&]() -> co::task<blz_status> {
        blz_spawn_options options;
        blz_spawn_options_init(&options);
        options.group = cancelled;
        auto never = [&] { ran.fetch_add(100); };
        co_return co_await co::spawn_ex(nullptr, blz_test::thunk_of(never), &never, &options);
    };
    CHECK(co::spawn(pool, skipped()).get() == BLZ_ECANCELED);
    CHECK(blz_group_destroy(cancelled) == BLZ_ECANCELED);
    CHECK(ran.load() == 1);
    CHECK(status_thrown_by([] { (void)co::spawn_ex(nullptr, blz_test::count_into, nullptr); }) == BLZ_EINVAL);

    // Not awaited: the task is detached and still runs.
    std::atomic<int> counter{0};
    { co::native_task dropped = co::spawn_ex(pool.native_handle(), blz_test::count_into, &counter); }
    CHECK(blz_test::eventually([&] { return counter.load() == 1; }));
}

TEST_CASE("co::spawned: wait_for, is_ready, empty objects, a refused spawn", "[cpp][coro][spawned]") {
    Watchdog watchdog("co::spawned", seconds(120));
    Gate gate;
    blz::pool pool(2);
    OpenOnExit opener{gate};
    auto held = [&]() -> co::task<int> {
        co_return co_await pool.spawn([&] {
            gate.pass();
            return 3;
        });
    };
    co::spawned<int> s = co::spawn(pool, held());
    REQUIRE(gate.wait_entered());
    CHECK_FALSE(s.wait_for(milliseconds(1)));
    CHECK_FALSE(s.wait_for(milliseconds(0)));
    CHECK_FALSE(s.is_ready());
    gate.release();
    CHECK(s.wait_for(seconds(30)));
    CHECK(s.is_ready());
    CHECK(s.get() == 3);
    CHECK_FALSE(s.valid());
    CHECK(status_thrown_by([&] { (void)s.is_ready(); }) == BLZ_EINVAL);

    // A refused spawn destroys the frame, and with it what it holds.
    auto holds = [](tracked) -> co::task<void> { co_return; };
    const int live_before = tracked::live.load();
    blz::pool moved_to(std::move(pool));  // `pool` is empty now
    CHECK(status_thrown_by([&] { (void)co::spawn(pool, holds(tracked{})); }) == BLZ_EINVAL);
    CHECK(tracked::live.load() == live_before);
    co::task<void> none;
    CHECK(status_thrown_by([&] { (void)co::spawn(moved_to, std::move(none)); }) == BLZ_EINVAL);
    // Never started: destroying the task destroys its frame.
    { co::task<void> unstarted = holds(tracked{}); }
    CHECK(tracked::live.load() == live_before);
}

TEST_CASE("pool destroyed while a coroutine is suspended on its work", "[cpp][coro][lifetime]") {
    Watchdog watchdog("destroy with suspended coroutines", seconds(120));
    Gate gate;
    std::atomic<int> finished{0};
    const int live_before = tracked::live.load();
    auto pool = std::make_unique<blz::pool>(2);
    OpenOnExit opener{gate};
    // The C handle: the blz::pool object is under destruction while they resume.
    blz_pool *const handle = pool->native_handle();
    std::atomic<int> more{0};
    auto suspended = [&](tracked) -> co::task<int> {
        const int v = co_await pool->spawn([&] {
            gate.pass();
            return 8;
        });
        // Resumed while the pool drains: spawning more is still accepted.
        const blz_status w = co_await co::spawn_ex(handle, blz_test::count_into, &more);
        finished.fetch_add(1);
        co_return w == BLZ_OK ? v + 1 : -1;
    };
    co::spawned<int> kept = co::spawn(*pool, suspended(tracked{}));
    { co::spawned<int> dropped = co::spawn(*pool, suspended(tracked{})); }  // detached
    REQUIRE(gate.wait_entered(2));
    std::atomic<bool> destroyed{false};
    std::thread destroyer([&] {
        pool.reset();
        destroyed.store(true);
    });
    std::this_thread::sleep_for(milliseconds(20));
    CHECK_FALSE(destroyed.load());  // the coroutines' awaited tasks are accepted work
    gate.release();
    destroyer.join();
    // Both ran to their end during the destroy; the detached one freed its frame.
    CHECK(finished.load() == 2);
    CHECK(more.load() == 2);
    CHECK(kept.is_ready());
    CHECK(kept.get() == 9);  // the value outlives the pool
    CHECK(tracked::live.load() == live_before);
}

TEST_CASE("co::spawned dropped before, at and after its coroutine's end: each frame freed once", "[cpp][coro][lifetime]") {
    Watchdog watchdog("co::spawned drops", seconds(120));
    const int live_before = tracked::live.load();
    std::atomic<int> ended{0};
    {
        blz::pool pool(2);
        auto short_one = [](tracked, std::atomic<int> &e) -> co::task<int> {
            e.fetch_add(1);
            co_return 1;
        };
        // Dropped at once: racing the coroutine's end, either side first.
        for (int i = 0; i < 500; ++i) (void)co::spawn(pool, short_one(tracked{}, ended));
        // Dropped after the end (the owner frees the frame).
        co::spawned<int> finished = co::spawn(pool, short_one(tracked{}, ended));
        REQUIRE(finished.wait_for(seconds(30)));
        finished = co::spawned<int>();
        CHECK_FALSE(finished.valid());
    }  // the pool's destroy ran every coroutine to its end
    CHECK(ended.load() == 501);
    CHECK(tracked::live.load() == live_before);
}

// ---------------------------------------------------------------------------
// Awaits through the dependency options (blz_spawn_options::after_*):
// events, C task handles, groups.

TEST_CASE("co::after(event): set from an outside thread; a 1-worker pool stays idle meanwhile", "[cpp][coro][event]") {
    Watchdog watchdog("co_await event", seconds(120));
    blz::pool pool(1);
    nested_bodies.store(0);
    blz_event *ok = nullptr;
    blz_event *failed = nullptr;
    REQUIRE(blz_event_create(&ok) == BLZ_OK);
    REQUIRE(blz_event_create(&failed) == BLZ_OK);
    std::atomic<int> awaits_started{0};
    auto awaits = [&](blz_event *event) -> co::task<blz_status> {
        body_enters();
        awaits_started.fetch_add(1);
        const blz_status status = co_await counted_await(co::after(event));
        body_leaves();
        co_return status;
    };
    co::spawned<blz_status> a = co::spawn(pool, awaits(ok));
    co::spawned<blz_status> b = co::spawn(pool, awaits(failed));
    REQUIRE(blz_test::eventually([&] { return awaits_started.load() == 2; }));
    // The only worker is idle: neither coroutine waits inside a job.
    CHECK(some_worker_idle(pool, 0));
    CHECK_FALSE(a.is_ready());
    CHECK_FALSE(b.is_ready());
    std::thread setter([&] {
        (void)blz_event_set(failed, BLZ_ETASK);
        (void)blz_event_set(ok, BLZ_OK);
    });
    CHECK(a.get() == BLZ_OK);
    CHECK(b.get() == BLZ_ETASK);
    setter.join();
    // Set already: no suspension.
    CHECK(co::spawn(pool, awaits(ok)).get() == BLZ_OK);
    CHECK(nested_bodies.load() == 0);
    CHECK(blz_event_destroy(ok) == BLZ_OK);
    CHECK(blz_event_destroy(failed) == BLZ_OK);

    auto null_event = []() -> co::task<int> {
        try {
            (void)co_await co::after(static_cast<blz_event *>(nullptr));
        } catch (const blz::error &e) {
            co_return e.status();
        }
        co_return 0;
    };
    CHECK(co::spawn(pool, null_event()).get() == BLZ_EINVAL);
}

TEST_CASE("pool destroyed while a coroutine awaits an event: destroy waits for the set", "[cpp][coro][event][lifetime]") {
    Watchdog watchdog("destroy with a coroutine awaiting an event", seconds(120));
    blz_event *never = nullptr;
    REQUIRE(blz_event_create(&never) == BLZ_OK);
    std::atomic<int> started{0};
    auto pool = std::make_unique<blz::pool>(2);
    auto awaits = [&]() -> co::task<blz_status> {
        started.fetch_add(1);
        co_return co_await co::after(never);
    };
    co::spawned<blz_status> kept = co::spawn(*pool, awaits());
    { co::spawned<blz_status> dropped = co::spawn(*pool, awaits()); }
    REQUIRE(blz_test::eventually([&] { return started.load() == 2; }));
    std::atomic<bool> destroyed{false};
    std::thread destroyer([&] {
        pool.reset();
        destroyed.store(true);
    });
    std::this_thread::sleep_for(milliseconds(20));
    CHECK_FALSE(destroyed.load());  // the resumptions are accepted work
    // The way out: set the event (BLZ_ECANCELED), then destroy it.
    CHECK(blz_event_set(never, BLZ_ECANCELED) == BLZ_OK);
    destroyer.join();
    CHECK(kept.get() == BLZ_ECANCELED);
    CHECK(blz_event_destroy(never) == BLZ_OK);
}

TEST_CASE("co::after(task): a C task handle awaited and joined", "[cpp][coro][task]") {
    Watchdog watchdog("co_await C task handle", seconds(120));
    Gate gate;
    blz::pool pool(2);
    OpenOnExit opener{gate};
    nested_bodies.store(0);
    blz_task *held = nullptr;
    REQUIRE(blz_spawn(pool.native_handle(), blz_test::gate_fn, &gate, &held) == BLZ_OK);
    auto awaits = [&](blz_task *t) -> co::task<blz_status> {
        body_enters();
        const blz_status status = co_await counted_await(co::after(t));
        body_leaves();
        co_return status;
    };
    co::spawned<blz_status> s = co::spawn(pool, awaits(held));
    REQUIRE(gate.wait_entered());
    CHECK(some_worker_idle(pool, 1));
    CHECK_FALSE(s.is_ready());
    gate.release();
    CHECK(s.get() == BLZ_OK);  // and the handle is freed: ASan reports a leak otherwise

    auto fails = [] { blz_fail(); };
    blz_task *failing = nullptr;
    REQUIRE(blz_spawn(pool.native_handle(), blz_test::thunk_of(fails), &fails, &failing) == BLZ_OK);
    CHECK(co::spawn(pool, awaits(failing)).get() == BLZ_ETASK);
    CHECK(nested_bodies.load() == 0);
}

TEST_CASE("co_await of a group: waits for tasks spawned meanwhile, rethrows, resets", "[cpp][coro][group]") {
    Watchdog watchdog("co_await group", seconds(120));
    Gate first;
    Gate second;
    blz::pool pool(2);
    OpenOnExit open_first{first};
    OpenOnExit open_second{second};
    nested_bodies.store(0);
    blz::group group = pool.group();
    std::atomic<bool> first_done{false};
    group.spawn([&] {
        job_runs();
        first.pass();
        first_done.store(true);
    });
    std::atomic<bool> started{false};
    auto awaits = [&]() -> co::task<int> {
        body_enters();
        started.store(true);
        co_await counted_await(group);
        int result = 1;
        group.spawn([] { throw test_error{12}; });
        try {
            co_await counted_await(group);
        } catch (const test_error &e) {
            result += e.code;
        }
        co_await counted_await(group);  // reset by the previous await: nothing to report
        body_leaves();
        co_return result;
    };
    REQUIRE(first.wait_entered());
    co::spawned<int> s = co::spawn(pool, awaits());
    REQUIRE(blz_test::eventually([&] { return started.load(); }));
    CHECK(some_worker_idle(pool, 1));  // first holds one worker; the coroutine is suspended
    // A task spawned into the group while the coroutine waits: waited for too.
    group.spawn([&] {
        job_runs();
        second.pass();
    });
    REQUIRE(second.wait_entered());
    first.release();
    REQUIRE(blz_test::eventually([&] { return first_done.load(); }));
    CHECK(some_worker_idle(pool, 1));  // second holds one worker, the coroutine none
    CHECK_FALSE(s.is_ready());
    second.release();
    CHECK(s.get() == 13);
    CHECK(nested_bodies.load() == 0);

    // A C group through co::after: its status, and the group is reset.
    blz_group *c_group = nullptr;
    REQUIRE(blz_group_create(pool.native_handle(), &c_group) == BLZ_OK);
    auto fails = [] { blz_fail(); };
    REQUIRE(blz_group_spawn(c_group, blz_test::thunk_of(fails), &fails) == BLZ_OK);
    auto c_awaits = [&]() -> co::task<int> {
        const blz_status failed = co_await co::after(c_group);
        const blz_status after_reset = co_await co::after(c_group);
        co_return failed == BLZ_ETASK && after_reset == BLZ_OK ? 1 : 0;
    };
    CHECK(co::spawn(pool, c_awaits()).get() == 1);
    CHECK(blz_group_destroy(c_group) == BLZ_OK);

    blz::group empty;
    auto empty_group = [&]() -> co::task<int> {
        try {
            co_await empty;
        } catch (const blz::error &e) {
            co_return e.status();
        }
        co_return 0;
    };
    CHECK(co::spawn(pool, empty_group()).get() == BLZ_EINVAL);
}

// The per-thread cache of coroutine frames (blitz.hpp, detail::frame_cache):
// a freed frame comes back for the next one of its size class, at most
// kKeep of a class are kept, and a frame above the largest class is never
// kept. Driven directly: which frames a coroutine gets is the allocator's
// business, and under AddressSanitizer the promise does not use the cache.
TEST_CASE("coroutine frame cache: reuse by size class, at most kKeep kept", "[cpp][coro][frames]") {
    using blz::detail::frame_cache;
    frame_cache cache;
    constexpr unsigned kMore = frame_cache::kKeep + 8;
    std::vector<void *> first;
    for (unsigned i = 0; i < kMore; ++i) first.push_back(cache.allocate(100));  // the class of 65..128 bytes
    for (void *frame : first) cache.release(frame, 100);
    // The first kKeep released are kept, the later ones went back to the
    // heap; requests of any size in the class get the kept ones, last in
    // first out.
    std::vector<void *> second;
    for (unsigned i = 0; i < frame_cache::kKeep; ++i) second.push_back(cache.allocate(128));
    for (unsigned i = 0; i < frame_cache::kKeep; ++i) CHECK(second[i] == first[frame_cache::kKeep - 1 - i]);
    // Kept again, they are not handed to another class (the cache holds
    // them, so the heap cannot), whose own freed frame comes back to it.
    for (void *frame : second) cache.release(frame, 128);
    void *other = cache.allocate(200);
    CHECK(std::find(second.begin(), second.end(), other) == second.end());
    cache.release(other, 200);
    CHECK(cache.allocate(200) == other);
    cache.release(other, 200);
    // A frame above every class goes to the heap and back (nothing to see
    // but that it works, and ASan's build sees the sizes match).
    const std::size_t huge = frame_cache::kStep * frame_cache::kClasses + 1;
    cache.release(cache.allocate(huge), huge);
}
