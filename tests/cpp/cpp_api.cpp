// The C++ layer, include/blitz.hpp: every facility with values and
// exceptions, move semantics and lifetimes, parallel_reduce and
// parallel_sort against sequential answers, on 1, 2 and 4 workers.
// Built twice: as C++20 (the project's standard) and as C++17. No test
// asserts on timing; sleeps only make an interleaving likely.
#include <blitz.h>  // the C header first: both must coexist
#include <blitz.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <numeric>
#include <optional>
#include <pthread.h>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "../support.hpp"

namespace {

using blz_test::test_error;
using blz_test::tracked;
using blz_test::Watchdog;
using std::chrono::milliseconds;
using std::chrono::seconds;


// Callable only as an rvalue: checks that the layer forwards callables.
struct once {
    int operator()() && { return 7; }
};

template <class P>
void spin_until(P pred) {
    while (!pred()) std::this_thread::sleep_for(std::chrono::microseconds(50));
}

std::string thread_name() {
    char name[16] = {};
    pthread_getname_np(pthread_self(), name, sizeof(name));
    return name;
}

long fib(blz::pool &pool, int n) {
    if (n < 2) return n;
    auto [a, b] = pool.join([&] { return fib(pool, n - 1); }, [&] { return fib(pool, n - 2); });
    return a + b;
}

// The status of the blz::error that f throws; 0 if it throws none.
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

// ---------------------------------------------------------------------------
// blz::error and blz::pool

TEST_CASE("blz::error carries the status and names it in what()", "[cpp][error]") {
    try {
        blz::pool pool(BLZ_MAX_THREADS + 1U);
        FAIL("a pool of BLZ_MAX_THREADS + 1 workers was created");
    } catch (const blz::error &e) {
        CHECK(e.status() == BLZ_EINVAL);
        const std::string what = e.what();
        CHECK(what.find("blz::pool") != std::string::npos);
        CHECK(what.find("BLZ_EINVAL") != std::string::npos);
    }
    CHECK_THROWS_AS(blz::pool(BLZ_MAX_THREADS + 1U), std::runtime_error);
}

TEST_CASE("pool: defaults, a number of workers, introspection", "[cpp][pool]") {
    Watchdog watchdog("pool introspection", seconds(120));
    blz::pool defaults;
    CHECK(defaults.num_threads() >= 1);
    CHECK(defaults.native_handle() != nullptr);
    CHECK(defaults.worker_index() == -1);

    blz::pool pool(3);
    CHECK(pool.num_threads() == 3);
    const std::int32_t index = pool.call([&] { return pool.worker_index(); });
    CHECK(index >= 0);
    CHECK(index < 3);
    CHECK(defaults.call([&] { return pool.worker_index(); }) == -1);  // another pool's worker
    const blz_stats stats = pool.stats();
    CHECK(stats.struct_size == sizeof(blz_stats));
    CHECK(stats.num_threads == 3);
}

namespace {
std::atomic<int> pointer_hook_starts{0};
std::atomic<int> pointer_hook_stops{0};
void count_start(std::uint32_t) { pointer_hook_starts.fetch_add(1); }
void count_stop(std::uint32_t) { pointer_hook_stops.fetch_add(1); }
thread_local bool hook_ran_here = false;
}  // namespace

TEST_CASE("pool_options: thread name, std::function hooks with captures", "[cpp][pool]") {
    Watchdog watchdog("pool options", seconds(120));
    std::atomic<int> starts{0}, stops{0};
    std::atomic<unsigned> started_mask{0}, stopped_mask{0};
    auto keep_alive = std::make_shared<int>(1);  // captured by the hooks
    {
        blz::pool_options options;
        options.num_threads = 2;
        options.thread_name = "cpphook";
        options.on_thread_start = [&, keep_alive](std::uint32_t i) {
            hook_ran_here = true;
            starts.fetch_add(1);
            started_mask.fetch_or(1U << i);
        };
        options.on_thread_stop = [&, keep_alive](std::uint32_t i) {
            stops.fetch_add(1);
            stopped_mask.fetch_or(1U << i);
        };
        blz::pool first(std::move(options));
        blz::pool pool(std::move(first));  // the hooks move with the pool
        CHECK(pool.num_threads() == 2);
        CHECK(pool.call([] { return hook_ran_here; }));  // before the worker's first job
        const std::string name = pool.call([] { return thread_name(); });
        CHECK((name == "cpphook-0" || name == "cpphook-1"));
        CHECK(stops.load() == 0);
    }
    CHECK(starts.load() == 2);
    CHECK(stops.load() == 2);
    CHECK(started_mask.load() == 3U);
    CHECK(stopped_mask.load() == 3U);
    CHECK(keep_alive.use_count() == 1);  // the pool's copies of the hooks are gone
}

TEST_CASE("pool_options: function pointer hooks; throwing hooks are ignored", "[cpp][pool]") {
    Watchdog watchdog("pool hooks", seconds(120));
    pointer_hook_starts = 0;
    pointer_hook_stops = 0;
    {
        blz::pool_options options;
        options.num_threads = 2;
        options.on_thread_start = count_start;
        options.on_thread_stop = &count_stop;
        blz::pool pool(std::move(options));
        CHECK(pool.call([] { return 5; }) == 5);
    }
    CHECK(pointer_hook_starts.load() == 2);
    CHECK(pointer_hook_stops.load() == 2);

    blz::pool_options throwing;
    throwing.num_threads = 2;
    throwing.on_thread_start = [](std::uint32_t) { throw std::runtime_error("start"); };
    throwing.on_thread_stop = [](std::uint32_t) { throw test_error{1}; };
    blz::pool pool(std::move(throwing));
    CHECK(pool.call([] { return 6; }) == 6);
    CHECK(pool.call([] { return thread_name(); }).rfind("blz-", 0) == 0);  // default prefix
}

TEST_CASE("pool is move-only; a moved-from pool is empty and refuses work", "[cpp][pool][move]") {
    Watchdog watchdog("pool move", seconds(120));
    static_assert(!std::is_copy_constructible_v<blz::pool>);
    static_assert(!std::is_copy_assignable_v<blz::pool>);
    static_assert(std::is_nothrow_move_constructible_v<blz::pool>);
    static_assert(std::is_nothrow_move_assignable_v<blz::pool>);

    blz::pool a(2);
    blz_pool *handle = a.native_handle();
    blz::pool b(std::move(a));
    CHECK(b.native_handle() == handle);
    CHECK(a.native_handle() == nullptr);  // NOLINT(bugprone-use-after-move): empty by contract
    CHECK(a.num_threads() == 0);
    CHECK(a.worker_index() == -1);
    CHECK(status_thrown_by([&] { a.call([] { return 1; }); }) == BLZ_EINVAL);
    CHECK(status_thrown_by([&] { a.join([] {}, [] {}); }) == BLZ_EINVAL);
    CHECK(status_thrown_by([&] { a.spawn([] {}); }) == BLZ_EINVAL);
    CHECK(status_thrown_by([&] { a.parallel_for(0, 10, [](std::size_t, std::size_t) {}); }) == BLZ_EINVAL);
    CHECK(status_thrown_by([&] { a.group(); }) == BLZ_EINVAL);
    CHECK(status_thrown_by([&] { a.stats(); }) == BLZ_EINVAL);
    CHECK(status_thrown_by([&] {
              blz::parallel_reduce(a, 0, 10, 0, [](std::size_t, std::size_t) { return 1; }, std::plus<>());
          }) == BLZ_EINVAL);
    CHECK(status_thrown_by([&] {
              blz::parallel_reduce(a, 0, 0, 0, [](std::size_t, std::size_t) { return 1; }, std::plus<>());
          }) == BLZ_EINVAL);
    std::vector<int> v{3, 2, 1};
    CHECK(status_thrown_by([&] { blz::parallel_sort(a, v.begin(), v.end()); }) == BLZ_EINVAL);
    CHECK(b.call([] { return 2; }) == 2);

    // Move assignment destroys the old pool, which waits for its tasks.
    std::atomic<bool> ran{false};
    blz::pool c(1);
    blz::task<int> t = c.spawn([&] {
        std::this_thread::sleep_for(milliseconds(20));
        ran = true;
        return 8;
    });
    c = std::move(b);
    CHECK(ran.load());
    CHECK(c.native_handle() == handle);
    CHECK(c.num_threads() == 2);
    CHECK(t.get() == 8);  // the handle outlives its pool
    a = std::move(c);
    CHECK(a.num_threads() == 2);
}

// ---------------------------------------------------------------------------
// join

TEST_CASE("join returns both values; void gives std::monostate", "[cpp][join]") {
    Watchdog watchdog("join values", seconds(120));
    const std::uint32_t workers = GENERATE(1U, 2U, 4U);
    blz::pool pool(workers);

    auto [a, b] = pool.join([] { return 1; }, [] { return std::string("two"); });
    CHECK(a == 1);
    CHECK(b == "two");

    auto [u, v] = pool.join([] {}, [] { return 2.5; });
    static_assert(std::is_same_v<decltype(u), std::monostate>);
    CHECK(v == 2.5);
    auto [w, z] = pool.join([] {}, [] {});
    static_assert(std::is_same_v<decltype(w), std::monostate>);
    static_assert(std::is_same_v<decltype(z), std::monostate>);

    int x = 0;
    auto [ref, copy] = pool.join([&]() -> int & { return x; }, [&]() -> const int & { return x; });
    static_assert(std::is_same_v<decltype(ref), int &>);
    static_assert(std::is_same_v<decltype(copy), const int &>);
    ref = 5;
    CHECK(x == 5);
    CHECK(&copy == &x);

    auto [p, q] = pool.join([] { return std::make_unique<int>(3); }, [] { return std::make_unique<int>(4); });
    CHECK(*p + *q == 7);

    auto [r1, r2] = pool.join(once{}, once{});
    CHECK(r1 + r2 == 14);
    const auto lvalue = [] { return 9; };
    auto [l1, l2] = pool.join(lvalue, lvalue);
    CHECK(l1 + l2 == 18);

    // Recursively from workers, and from outside.
    CHECK(fib(pool, 20) == 6765);
    CHECK(pool.call([&] { return fib(pool, 22); }) == 17711);
    CHECK(pool.stats().tasks_failed == 0);
}

TEST_CASE("join carries exceptions: rethrown after both sides ran, f's first", "[cpp][join][exceptions]") {
    Watchdog watchdog("join exceptions", seconds(120));
    const std::uint32_t workers = GENERATE(1U, 2U, 4U);
    blz::pool pool(workers);
    for (int round = 0; round < 50; ++round) {
        std::atomic<int> ran{0};
        auto slow_ok = [&] {
            std::this_thread::sleep_for(std::chrono::microseconds(round % 5 * 100));
            ran.fetch_add(1);
            return 1;
        };
        auto throws = [&](int code) {
            return [&ran, code]() -> int {
                ran.fetch_add(1);
                throw test_error{code};
            };
        };
        // f throws: g still ran.
        try {
            pool.join(throws(1), slow_ok);
            FAIL("no exception");
        } catch (const test_error &e) {
            CHECK(e.code == 1);
        }
        CHECK(ran.exchange(0) == 2);
        // g throws: f ran.
        try {
            pool.join(slow_ok, throws(2));
            FAIL("no exception");
        } catch (const test_error &e) {
            CHECK(e.code == 2);
        }
        CHECK(ran.exchange(0) == 2);
        // Both throw: f's wins, whichever finished first.
        try {
            pool.join(throws(3), [&]() -> int {
                std::this_thread::sleep_for(std::chrono::microseconds(round % 3 * 100));
                ran.fetch_add(1);
                throw std::runtime_error("g");
            });
            FAIL("no exception");
        } catch (const test_error &e) {
            CHECK(e.code == 3);
        }
        CHECK(ran.exchange(0) == 2);
    }
    // On a worker, through nested joins: the exception unwinds C++ frames only.
    const int code = pool.call([&] {
        try {
            pool.join([&] { return pool.join([] { return 1; }, []() -> int { throw test_error{7}; }).first; },
                      [] { return 0; });
        } catch (const test_error &e) {
            return e.code;
        }
        return 0;
    });
    CHECK(code == 7);
    // The trampolines report every exception to the C API with blz_fail: 50
    // rounds of 1 + 1 + (1 or 2: both sides count as one unless a thief ran
    // one), then the inner join and the outer f.
    const std::uint64_t failed = pool.stats().tasks_failed;
    CHECK(failed >= 50 * 3 + 2);
    CHECK(failed <= 50 * 4 + 2);
}

TEST_CASE("join from a worker of another pool", "[cpp][join]") {
    Watchdog watchdog("join across pools", seconds(120));
    blz::pool outer(2), inner(2);
    const long result = outer.call([&] { return fib(inner, 18) + inner.call([] { return 1L; }); });
    CHECK(result == 2585);
}

// ---------------------------------------------------------------------------
// call

TEST_CASE("call returns the value, a reference, void; rethrows", "[cpp][call]") {
    Watchdog watchdog("call", seconds(120));
    blz::pool pool(2);
    CHECK(pool.call([] { return 42; }) == 42);
    std::string s = "abc";
    std::string &r = pool.call([&]() -> std::string & { return s; });
    CHECK(&r == &s);
    const auto nothing = [] {};
    static_assert(std::is_same_v<decltype(pool.call(nothing)), void>);
    bool ran = false;
    pool.call([&] { ran = true; });
    CHECK(ran);
    CHECK(*pool.call([] { return std::make_unique<int>(11); }) == 11);
    CHECK(pool.call(once{}) == 7);
    CHECK_THROWS_AS(pool.call([]() -> int { throw test_error{3}; }), test_error);
    CHECK_THROWS_WITH(pool.call([] { throw std::invalid_argument("bad"); }), "bad");
    // On a worker of the pool it runs inline.
    CHECK(pool.call([&] { return pool.call([&] { return pool.worker_index(); }) == pool.worker_index(); }));
    CHECK(pool.stats().tasks_failed == 2);  // the two exceptions, reported by blz_fail
}

// ---------------------------------------------------------------------------
// spawn and task

TEST_CASE("spawn: get() returns the value once, rethrows the exception", "[cpp][task]") {
    Watchdog watchdog("task get", seconds(120));
    const std::uint32_t workers = GENERATE(1U, 2U, 4U);
    blz::pool pool(workers);

    blz::task<int> t = pool.spawn([] { return 42; });
    CHECK(t.valid());
    CHECK(t.get() == 42);
    CHECK_FALSE(t.valid());
    CHECK(status_thrown_by([&] { t.get(); }) == BLZ_EINVAL);

    blz::task<void> v = pool.spawn([] {});
    static_assert(std::is_same_v<decltype(v.get()), void>);
    v.get();

    int x = 1;
    blz::task<int &> r = pool.spawn([&]() -> int & { return x; });
    CHECK(&r.get() == &x);
    blz::task<std::unique_ptr<int>> m = pool.spawn([] { return std::make_unique<int>(5); });
    CHECK(*m.get() == 5);
    blz::task<int> o = pool.spawn(once{});
    CHECK(o.get() == 7);

    blz::task<int> e = pool.spawn([]() -> int { throw test_error{4}; });
    try {
        e.get();
        FAIL("no exception");
    } catch (const test_error &err) {
        CHECK(err.code == 4);
    }
    CHECK_FALSE(e.valid());

    blz::task<int> empty;
    CHECK_FALSE(empty.valid());
    CHECK(status_thrown_by([&] { empty.get(); }) == BLZ_EINVAL);

    // Many tasks from a worker go to its deque and are joined there.
    const long sum = pool.call([&] {
        std::vector<blz::task<long>> tasks;
        for (long i = 0; i < 1000; ++i) tasks.push_back(pool.spawn([i] { return i; }));
        long total = 0;
        for (auto &task : tasks) total += task.get();
        return total;
    });
    CHECK(sum == 999L * 1000 / 2);
    CHECK(pool.stats().tasks_failed == 1);  // the exception, reported by blz_fail
}

TEST_CASE("task is move-only; moving keeps the one join", "[cpp][task][move]") {
    Watchdog watchdog("task move", seconds(120));
    static_assert(!std::is_copy_constructible_v<blz::task<int>>);
    static_assert(std::is_nothrow_move_constructible_v<blz::task<int>>);
    static_assert(std::is_nothrow_move_assignable_v<blz::task<int>>);
    blz::pool pool(2);
    blz::task<int> a = pool.spawn([] { return 1; });
    blz::task<int> b(std::move(a));
    CHECK_FALSE(a.valid());  // NOLINT(bugprone-use-after-move): empty by contract
    CHECK(b.valid());
    std::vector<blz::task<int>> tasks;
    tasks.push_back(std::move(b));
    CHECK(tasks[0].get() == 1);

    // Move assignment joins the task it replaces first.
    std::atomic<bool> first_ran{false};
    blz::task<int> c = pool.spawn([&] {
        std::this_thread::sleep_for(milliseconds(20));
        first_ran = true;
        return 1;
    });
    c = pool.spawn([] { return 2; });
    CHECK(first_ran.load());
    CHECK(c.get() == 2);
}

TEST_CASE("a task destroyed without get() is joined and leaks nothing", "[cpp][task]") {
    Watchdog watchdog("task destroyed", seconds(120));
    const std::uint32_t workers = GENERATE(1U, 2U, 4U);
    blz::pool pool(workers);
    tracked::live = 0;
    std::atomic<bool> done{false};
    {
        blz::task<tracked> t = pool.spawn([&, capture = tracked()] {
            std::this_thread::sleep_for(milliseconds(20));
            done = true;
            return tracked();
        });
    }
    CHECK(done.load());            // the destructor waited for it
    CHECK(tracked::live.load() == 0);  // the callable and the result are gone
    {
        blz::task<int> t = pool.spawn([capture = tracked()]() -> int { throw test_error{5}; });
    }  // its exception is discarded, not thrown from the destructor
    CHECK(tracked::live.load() == 0);
    for (int i = 0; i < 200; ++i) {
        (void)pool.spawn([capture = tracked(), i] { return i; });  // destroyed at once
    }
    CHECK(tracked::live.load() == 0);
    CHECK(pool.stats().tasks_failed == 1);  // the discarded exception still counts
}

TEST_CASE("a task's callable is destroyed once it has run, before get()", "[cpp][task]") {
    Watchdog watchdog("task captures", seconds(60));
    blz::pool pool(2);
    auto shared = std::make_shared<int>(1);
    blz::task<int> t = pool.spawn([shared] { return *shared; });
    spin_until([&] { return shared.use_count() == 1; });
    CHECK(t.get() == 1);
}

TEST_CASE("a task outlives its pool", "[cpp][task]") {
    Watchdog watchdog("task outlives pool", seconds(60));
    std::optional<blz::pool> pool(std::in_place, 2U);
    blz::task<int> t = pool->spawn([] {
        std::this_thread::sleep_for(milliseconds(10));
        return 3;
    });
    pool.reset();  // waits for the task
    CHECK(t.get() == 3);
}

// ---------------------------------------------------------------------------
// parallel_for

TEST_CASE("parallel_for covers every index exactly once", "[cpp][parallel_for]") {
    Watchdog watchdog("parallel_for", seconds(120));
    const std::uint32_t workers = GENERATE(1U, 2U, 4U);
    blz::pool pool(workers);
    const std::size_t offset = 100, n = 10000;
    for (std::size_t grain : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{100}, n, 2 * n}) {
        std::vector<std::atomic<int>> hits(offset + n);
        std::atomic<std::size_t> max_piece{0};
        std::atomic<bool> empty_piece{false};  // no Catch2 assertion on a worker: it is not thread-safe
        pool.parallel_for(offset, offset + n, [&](std::size_t lo, std::size_t hi) {
            if (lo >= hi) empty_piece = true;
            std::size_t piece = hi - lo, seen = max_piece.load();
            while (piece > seen && !max_piece.compare_exchange_weak(seen, piece)) {
            }
            for (std::size_t i = lo; i < hi; ++i) hits[i].fetch_add(1);
        }, grain);
        CHECK_FALSE(empty_piece.load());
        for (std::size_t i = 0; i < offset + n; ++i) REQUIRE(hits[i].load() == (i >= offset ? 1 : 0));
        if (grain != 0) CHECK(max_piece.load() <= grain);
    }
    bool called = false;
    pool.parallel_for(5, 5, [&](std::size_t, std::size_t) { called = true; });
    CHECK_FALSE(called);
    CHECK(status_thrown_by([&] { pool.parallel_for(6, 5, [](std::size_t, std::size_t) {}); }) == BLZ_EINVAL);

    // An lvalue body, const.
    std::atomic<std::size_t> total{0};
    const auto body = [&](std::size_t lo, std::size_t hi) { total.fetch_add(hi - lo); };
    pool.parallel_for(0, 1000, body, 10);
    CHECK(total.load() == 1000);
}

TEST_CASE("parallel_for rethrows one exception after every piece ran", "[cpp][parallel_for][exceptions]") {
    Watchdog watchdog("parallel_for exceptions", seconds(120));
    const std::uint32_t workers = GENERATE(1U, 2U, 4U);
    blz::pool pool(workers);
    const std::size_t n = 10000;
    std::vector<std::atomic<int>> hits(n);
    try {
        pool.parallel_for(0, n, [&](std::size_t lo, std::size_t hi) {
            for (std::size_t i = lo; i < hi; ++i) hits[i].fetch_add(1);
            if (lo <= 5000 && 5000 < hi) throw test_error{5000};
        }, 10);
        FAIL("no exception");
    } catch (const test_error &e) {
        CHECK(e.code == 5000);
    }
    for (std::size_t i = 0; i < n; ++i) REQUIRE(hits[i].load() == 1);

    // Every piece throws: one of the exceptions arrives.
    std::atomic<int> pieces{0};
    try {
        pool.parallel_for(0, n, [&](std::size_t lo, std::size_t) {
            pieces.fetch_add(1);
            throw test_error{static_cast<int>(lo)};
        }, 100);
        FAIL("no exception");
    } catch (const test_error &e) {
        CHECK(e.code % 100 == 0);
    }
    CHECK(pieces.load() >= static_cast<int>(n / 100));
    CHECK(pool.stats().tasks_failed == 1 + static_cast<std::uint64_t>(pieces.load()));  // one per failed piece
}

// ---------------------------------------------------------------------------
// group

TEST_CASE("group: spawn and wait, reuse, nested spawns", "[cpp][group]") {
    Watchdog watchdog("group", seconds(120));
    const std::uint32_t workers = GENERATE(1U, 2U, 4U);
    blz::pool pool(workers);
    blz::group g = pool.group();
    CHECK(g.native_handle() != nullptr);
    std::atomic<int> count{0};
    for (int i = 0; i < 1000; ++i) g.spawn([&] { count.fetch_add(1); });
    g.wait();
    CHECK(count.load() == 1000);
    // Reused, with a lvalue callable and with spawns from its own tasks.
    const auto add = [&] { count.fetch_add(1); };
    g.spawn(add);
    std::function<void(int)> tree = [&](int depth) {
        count.fetch_add(1);
        if (depth > 0) {
            g.spawn([&tree, depth] { tree(depth - 1); });
            g.spawn([&tree, depth] { tree(depth - 1); });
        }
    };
    g.spawn([&] { tree(9); });  // 1023 tasks
    g.wait();
    CHECK(count.load() == 1000 + 1 + 1023);
    // From a worker too.
    pool.call([&] {
        for (int i = 0; i < 100; ++i) g.spawn([&] { count.fetch_add(1); });
        g.wait();
    });
    CHECK(count.load() == 2124);
}

TEST_CASE("group: wait rethrows the first exception since the last wait, once", "[cpp][group][exceptions]") {
    Watchdog watchdog("group exceptions", seconds(120));
    {
        // One worker: "first" is recorded before "second" can run, because
        // the task that throws it spawns the other onto the same worker.
        blz::pool pool(1);
        blz::group g = pool.group();
        std::atomic<int> ran{0};
        g.spawn([&] {
            g.spawn([&] {
                ran.fetch_add(1);
                throw std::runtime_error("second");
            });
            ran.fetch_add(1);
            throw std::runtime_error("first");
        });
        CHECK_THROWS_WITH(g.wait(), "first");
        CHECK(ran.load() == 2);
        CHECK_NOTHROW(g.wait());  // reported once
        g.spawn([&] { ran.fetch_add(1); });
        CHECK_NOTHROW(g.wait());
        CHECK(ran.load() == 3);
        CHECK(pool.stats().tasks_failed == 2);  // both exceptions, reported by blz_fail
    }
    const std::uint32_t workers = GENERATE(2U, 4U);
    blz::pool pool(workers);
    blz::group g = pool.group();
    std::atomic<int> ran{0};
    for (int i = 0; i < 100; ++i) {
        g.spawn([&ran, i] {
            ran.fetch_add(1);
            if (i % 10 == 3) throw test_error{i};
        });
    }
    try {
        g.wait();
        FAIL("no exception");
    } catch (const test_error &e) {
        CHECK(e.code % 10 == 3);
    }
    CHECK(ran.load() == 100);
    CHECK_NOTHROW(g.wait());
}

TEST_CASE("group: destroyed without wait runs every task; move; shutdown", "[cpp][group][move]") {
    Watchdog watchdog("group lifetime", seconds(120));
    static_assert(!std::is_copy_constructible_v<blz::group>);
    static_assert(std::is_nothrow_move_constructible_v<blz::group>);
    static_assert(std::is_nothrow_move_assignable_v<blz::group>);
    blz::pool pool(2);
    std::atomic<int> count{0};
    tracked::live = 0;
    {
        blz::group g = pool.group();
        for (int i = 0; i < 50; ++i) {
            g.spawn([&, capture = tracked()] {
                std::this_thread::sleep_for(std::chrono::microseconds(200));
                count.fetch_add(1);
            });
        }
        g.spawn([] { throw test_error{1}; });  // discarded by the destructor
    }
    CHECK(count.load() == 50);
    CHECK(tracked::live.load() == 0);

    blz::group a = pool.group();
    a.spawn([&] { count.fetch_add(1); });
    blz::group b(std::move(a));
    CHECK(a.native_handle() == nullptr);  // NOLINT(bugprone-use-after-move): empty by contract
    CHECK(status_thrown_by([&] { a.wait(); }) == BLZ_EINVAL);
    CHECK(status_thrown_by([&] { a.spawn([] {}); }) == BLZ_EINVAL);
    b.wait();
    CHECK(count.load() == 51);
    blz::group c = pool.group();
    c.spawn([&] {
        std::this_thread::sleep_for(milliseconds(10));
        count.fetch_add(1);
    });
    c = std::move(b);  // destroys c's group: waits
    CHECK(count.load() == 52);
    c.wait();

    // A group outliving its pool: spawns are refused, the callable freed.
    std::optional<blz::pool> short_lived(std::in_place, 1U);
    blz::group orphan = short_lived->group();
    short_lived.reset();
    bool ran = false;
    CHECK(status_thrown_by([&] { orphan.spawn([&ran, capture = tracked()] { ran = true; }); }) == BLZ_ESHUTDOWN);
    CHECK_FALSE(ran);
    CHECK(tracked::live.load() == 0);
}

// ---------------------------------------------------------------------------
// parallel_reduce

TEST_CASE("parallel_reduce: sums", "[cpp][parallel_reduce]") {
    Watchdog watchdog("parallel_reduce sums", seconds(120));
    const std::uint32_t workers = GENERATE(1U, 2U, 4U);
    blz::pool pool(workers);
    const auto sum_range = [](std::size_t lo, std::size_t hi) {
        std::uint64_t s = 0;
        for (std::size_t i = lo; i < hi; ++i) s += i;
        return s;
    };
    const std::size_t n = 1000000;
    for (std::size_t grain : {std::size_t{0}, std::size_t{1000}, std::size_t{4097}, n, 2 * n}) {
        CHECK(blz::parallel_reduce(pool, 0, n, std::uint64_t{0}, sum_range, std::plus<>(), grain) ==
              std::uint64_t{n} * (n - 1) / 2);
    }
    CHECK(blz::parallel_reduce(pool, 0, 1000, std::uint64_t{0}, sum_range, std::plus<>(), 1) == 499500U);
    CHECK(blz::parallel_reduce(pool, 10, 20, std::uint64_t{0}, sum_range, std::plus<>(), 3) == 145U);
    // Empty: the identity, whatever it is.
    CHECK(blz::parallel_reduce(pool, 7, 7, 42, [](std::size_t, std::size_t) { return 1; }, std::plus<>()) == 42);
    CHECK(status_thrown_by([&] {
              blz::parallel_reduce(pool, 8, 7, 0, [](std::size_t, std::size_t) { return 1; }, std::plus<>());
          }) == BLZ_EINVAL);
    // From a worker of the pool.
    CHECK(pool.call([&] { return blz::parallel_reduce(pool, 0, 100, std::uint64_t{0}, sum_range, std::plus<>()); }) ==
          4950U);
}

TEST_CASE("parallel_reduce: a non-commutative combine keeps index order", "[cpp][parallel_reduce]") {
    Watchdog watchdog("parallel_reduce order", seconds(120));
    const std::uint32_t workers = GENERATE(1U, 2U, 4U);
    blz::pool pool(workers);
    const std::size_t n = 5000;
    std::string expected;
    for (std::size_t i = 0; i < n; ++i) expected += static_cast<char>('a' + i % 26);
    const auto letters = [](std::size_t lo, std::size_t hi) {
        std::string s;
        for (std::size_t i = lo; i < hi; ++i) s += static_cast<char>('a' + i % 26);
        return s;
    };
    const auto concat = [](std::string left, std::string right) { return left + right; };
    for (std::size_t grain : {std::size_t{0}, std::size_t{1}, std::size_t{3}, std::size_t{64}, n}) {
        CHECK(blz::parallel_reduce(pool, 0, n, std::string(), letters, concat, grain) == expected);
    }
    // A move-only accumulator: the indices, in order.
    using indices = std::unique_ptr<std::vector<std::size_t>>;
    const indices all = blz::parallel_reduce(
        pool, 0, n, indices(),
        [](std::size_t lo, std::size_t hi) {
            auto v = std::make_unique<std::vector<std::size_t>>();
            for (std::size_t i = lo; i < hi; ++i) v->push_back(i);
            return v;
        },
        [](indices left, indices right) {
            left->insert(left->end(), right->begin(), right->end());
            return left;
        },
        7);
    std::vector<std::size_t> iota(n);
    std::iota(iota.begin(), iota.end(), std::size_t{0});
    CHECK(*all == iota);
}

TEST_CASE("parallel_reduce rethrows from map_range and from combine", "[cpp][parallel_reduce][exceptions]") {
    Watchdog watchdog("parallel_reduce exceptions", seconds(120));
    const std::uint32_t workers = GENERATE(1U, 2U, 4U);
    blz::pool pool(workers);
    const auto ones = [](std::size_t lo, std::size_t hi) {
        if (lo <= 700 && 700 < hi) throw test_error{700};
        return static_cast<int>(hi - lo);
    };
    CHECK_THROWS_AS(blz::parallel_reduce(pool, 0, 1000, 0, ones, std::plus<>(), 10), test_error);
    // Several pieces throw: every piece runs, the leftmost failure arrives.
    std::atomic<int> pieces{0};
    for (int round = 0; round < 20; ++round) {
        pieces = 0;
        try {
            blz::parallel_reduce(pool, 0, 1000, 0, [&](std::size_t lo, std::size_t hi) {
                pieces.fetch_add(1);
                for (int bad : {300, 301, 700, 990}) {
                    if (lo <= static_cast<std::size_t>(bad) && static_cast<std::size_t>(bad) < hi) throw test_error{bad};
                }
                return static_cast<int>(hi - lo);
            }, std::plus<>(), 10);
            FAIL("no exception");
        } catch (const test_error &e) {
            CHECK(e.code == 300);
        }
        CHECK(pieces.load() >= 100);  // 1000 indices, at most 10 per piece
    }
    const auto bad_combine = [](int a, int b) -> int {
        if (a + b > 500) throw std::overflow_error("too big");
        return a + b;
    };
    CHECK_THROWS_WITH(blz::parallel_reduce(pool, 0, 1000, 0, [](std::size_t lo, std::size_t hi) {
                          return static_cast<int>(hi - lo);
                      }, bad_combine, 10),
                      "too big");
    // Each frame the exception leaves reported it by blz_fail.
    CHECK(pool.stats().tasks_failed >= 1);
}

// ---------------------------------------------------------------------------
// parallel_sort

namespace {

std::vector<double> make_input(const std::string &kind, std::size_t n) {
    std::vector<double> v(n);
    std::mt19937_64 rng(12345 + n);
    std::uniform_real_distribution<double> uniform(-1e6, 1e6);
    for (std::size_t i = 0; i < n; ++i) {
        if (kind == "random") v[i] = uniform(rng);
        else if (kind == "sorted") v[i] = static_cast<double>(i);
        else if (kind == "reversed") v[i] = static_cast<double>(n - i);
        else if (kind == "equal") v[i] = 1.5;
        else if (kind == "few") v[i] = static_cast<double>(rng() % 3);
        else if (kind == "organ") v[i] = static_cast<double>(i < n / 2 ? i : n - i);
        else v[i] = static_cast<double>(i % 2 == 0 ? i : n - i);  // "sawtooth"
    }
    return v;
}

}  // namespace

TEST_CASE("parallel_sort matches std::sort", "[cpp][parallel_sort]") {
    Watchdog watchdog("parallel_sort", seconds(300));
    const std::uint32_t workers = GENERATE(1U, 2U, 4U);
    blz::pool pool(workers);
    for (const std::string kind : {"random", "sorted", "reversed", "equal", "few", "organ", "sawtooth"}) {
        for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{2}, std::size_t{3}, std::size_t{10},
                              std::size_t{100}, std::size_t{4096}, std::size_t{4097}, std::size_t{5000},
                              std::size_t{100000}, std::size_t{1} << 20}) {
            INFO(kind << ", n = " << n << ", " << workers << " workers");
            std::vector<double> v = make_input(kind, n), expected = v;
            std::sort(expected.begin(), expected.end());
            blz::parallel_sort(pool, v.begin(), v.end());
            REQUIRE(v == expected);
            // With a custom comparator: descending.
            v = make_input(kind, n);
            std::sort(expected.begin(), expected.end(), std::greater<>());
            blz::parallel_sort(pool, v.begin(), v.end(), std::greater<>());
            REQUIRE(v == expected);
        }
    }
    CHECK(pool.stats().tasks_failed == 0);
}

TEST_CASE("parallel_sort: keys with satellite data, deque iterators, move-only elements", "[cpp][parallel_sort]") {
    Watchdog watchdog("parallel_sort types", seconds(300));
    const std::uint32_t workers = GENERATE(1U, 2U, 4U);
    blz::pool pool(workers);
    struct item {
        int key;
        int id;
    };
    const std::size_t n = 200000;
    std::vector<item> items(n);
    std::mt19937 rng(7);
    for (std::size_t i = 0; i < n; ++i) items[i] = {static_cast<int>(rng() % 1000), static_cast<int>(i)};
    std::atomic<std::uint64_t> comparisons{0};
    blz::parallel_sort(pool, items.begin(), items.end(), [&](const item &a, const item &b) {
        comparisons.fetch_add(1, std::memory_order_relaxed);
        return a.key < b.key;
    });
    CHECK(std::is_sorted(items.begin(), items.end(), [](const item &a, const item &b) { return a.key < b.key; }));
    std::vector<int> ids(n);
    std::transform(items.begin(), items.end(), ids.begin(), [](const item &it) { return it.id; });
    std::sort(ids.begin(), ids.end());
    for (std::size_t i = 0; i < n; ++i) REQUIRE(ids[i] == static_cast<int>(i));  // a permutation
    CHECK(comparisons.load() > n);

    std::deque<int> d;
    for (std::size_t i = 0; i < n; ++i) d.push_back(static_cast<int>(rng() % 100000));
    std::vector<int> expected(d.begin(), d.end());
    std::sort(expected.begin(), expected.end());
    blz::parallel_sort(pool, d.begin(), d.end());
    CHECK(std::equal(d.begin(), d.end(), expected.begin(), expected.end()));

    std::vector<std::unique_ptr<int>> owned;
    for (std::size_t i = 0; i < 50000; ++i) owned.push_back(std::make_unique<int>(static_cast<int>(rng() % 5000)));
    blz::parallel_sort(pool, owned.begin(), owned.end(),
                       [](const std::unique_ptr<int> &a, const std::unique_ptr<int> &b) { return *a < *b; });
    CHECK(std::is_sorted(owned.begin(), owned.end(),
                         [](const std::unique_ptr<int> &a, const std::unique_ptr<int> &b) { return *a < *b; }));
    CHECK(std::all_of(owned.begin(), owned.end(), [](const std::unique_ptr<int> &p) { return p != nullptr; }));

    // A plain array, from a worker of the pool.
    std::vector<long> plain(30000);
    for (auto &x : plain) x = static_cast<long>(rng());
    std::vector<long> sorted_plain = plain;
    std::sort(sorted_plain.begin(), sorted_plain.end());
    pool.call([&] { blz::parallel_sort(pool, plain.data(), plain.data() + plain.size()); });
    CHECK(plain == sorted_plain);
}

TEST_CASE("parallel_sort: the depth limit falls back to std::sort", "[cpp][parallel_sort]") {
    // White-box: the recursion with no depth left, and with one level.
    blz::pool pool(2);
    for (int depth : {0, 1, 2}) {
        std::vector<double> v = make_input("random", 100000), expected = v;
        std::sort(expected.begin(), expected.end());
        std::less<> comp;
        const auto plan = blz::detail::sort_plan::make(static_cast<std::ptrdiff_t>(v.size()), 2);
        pool.call([&] { blz::detail::sort_range(pool, v.begin(), v.end(), plan, depth, comp); });
        CHECK(v == expected);
    }
}

TEST_CASE("parallel_sort's parallel partition: pieces, then the middle blocks swapped", "[cpp][parallel_sort]") {
    // White-box: every input kind, pieces far smaller than the range, so
    // that the recursion and the block swap of every shape run; the result
    // must be a partition around the pivot and a permutation of the input.
    Watchdog watchdog("parallel partition", seconds(300));
    const std::uint32_t workers = GENERATE(1U, 2U, 4U);
    blz::pool pool(workers);
    std::less<> comp;
    for (const std::string kind : {"random", "sorted", "reversed", "equal", "few", "organ", "sawtooth"}) {
        for (std::ptrdiff_t n : {2, 3, 17, 100, 4097, 50000}) {
            for (std::ptrdiff_t block : {std::ptrdiff_t{1}, std::ptrdiff_t{7}, n / 3 + 1, n}) {
                INFO(kind << ", n = " << n << ", pieces of " << block << ", " << workers << " workers");
                std::vector<double> v = make_input(kind, static_cast<std::size_t>(n));
                std::vector<double> before = v;
                const blz::detail::sort_plan plan{1, 1, block};
                const auto cut = pool.call([&] {
                    return blz::detail::parallel_partition(pool, v.begin() + 1, v.end(), v.begin(), plan, comp);
                });
                const double pivot = v.front();
                REQUIRE(std::all_of(v.begin() + 1, cut, [&](double x) { return x <= pivot; }));
                REQUIRE(std::all_of(cut, v.end(), [&](double x) { return x >= pivot; }));
                std::sort(v.begin(), v.end());
                std::sort(before.begin(), before.end());
                REQUIRE(v == before);
            }
        }
    }
}

TEST_CASE("parallel_sort rethrows the comparator's exception", "[cpp][parallel_sort][exceptions]") {
    Watchdog watchdog("parallel_sort exceptions", seconds(120));
    const std::uint32_t workers = GENERATE(1U, 2U, 4U);
    blz::pool pool(workers);
    std::vector<int> v(100000);
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int>((i * 7919) % 100003);
    std::atomic<int> budget{300000};
    CHECK_THROWS_AS(blz::parallel_sort(pool, v.begin(), v.end(),
                                       [&](int a, int b) {
                                           if (budget.fetch_sub(1, std::memory_order_relaxed) <= 0) {
                                               throw test_error{0};
                                           }
                                           return a < b;
                                       }),
                    test_error);
    CHECK(v.size() == 100000);  // contents unspecified, as after std::sort
    CHECK(pool.stats().tasks_failed >= 1);  // the comparator's exception, reported by blz_fail
}
