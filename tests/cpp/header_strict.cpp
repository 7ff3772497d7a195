// include/blitz.hpp on its own, compiled with strict warnings as errors
// (see meson.build: C++17 and C++20, g++ and clang++), instantiating every
// template of the header, then a short run that checks the results.
// Built with BLZ_TEST_C_HEADER_FIRST, <blitz.h> comes first, and then
// <blitz_algorithms.hpp> alone, which brings <blitz.hpp> (the other order
// of the two C++ headers: blitz.hpp includes the algorithms at its end).
#ifdef BLZ_TEST_C_HEADER_FIRST
#include <blitz.h>
#include <blitz_algorithms.hpp>
#else
#include <blitz.hpp>
#include <blitz.h>
#endif

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

namespace {

int failures = 0;

void expect(bool ok, const char *what) {
    if (!ok) {
        std::fprintf(stderr, "FAILED: %s\n", what);
        ++failures;
    }
}

void hook(std::uint32_t) {}

struct once {
    int operator()() && { return 7; }
};

static_assert(!std::is_copy_constructible_v<blz::pool>, "pool is move-only");
static_assert(std::is_nothrow_move_constructible_v<blz::pool>, "pool moves");
static_assert(std::is_nothrow_move_assignable_v<blz::pool>, "pool moves");
static_assert(!std::is_copy_constructible_v<blz::task<int>>, "task is move-only");
static_assert(std::is_nothrow_move_constructible_v<blz::task<int>>, "task moves");
static_assert(!std::is_copy_constructible_v<blz::group>, "group is move-only");
static_assert(std::is_nothrow_move_constructible_v<blz::group>, "group moves");
static_assert(std::is_base_of_v<std::runtime_error, blz::error>, "error is a runtime_error");

#if defined(BLZ_HAS_COROUTINES)
// Every template of blz::co, instantiated under the strict warnings.
blz::co::task<int> coro_fib(blz::pool &pool, int n) {
    if (n < 2) co_return n;
    blz::co::spawned<int> first = blz::co::spawn(pool, coro_fib(pool, n - 1));
    const int second = co_await coro_fib(pool, n - 2);
    co_return co_await first + second;
}

blz::co::task<void> coro_nothing() { co_return; }

blz::co::task<int> coro_all(blz::pool &pool) {
    std::vector<blz::co::spawned<int>> kids;
    for (int i = 0; i < 4; ++i) kids.push_back(blz::co::spawn(pool, coro_fib(pool, i)));
    const std::vector<int> values = co_await blz::co::when_all(std::move(kids));
    std::vector<blz::co::spawned<void>> none;
    none.push_back(blz::co::spawn(pool.native_handle(), coro_nothing()));
    co_await blz::co::when_all(std::move(none));
    co_await coro_nothing();
    const int spawned = co_await pool.spawn([] { return 10; });
    blz::task<void> kept = pool.spawn([] {});
    co_await kept;
    const blz_status status = co_await blz::co::spawn_ex(pool.native_handle(), [](void *) {}, nullptr);
    blz_event *event = nullptr;
    blz_status set = blz_event_create(&event);
    if (set == BLZ_OK && blz_event_set(event, BLZ_OK) == BLZ_OK) set = co_await blz::co::after(event);
    if (event != nullptr) (void)blz_event_destroy(event);
    blz_task *c_task = nullptr;
    blz_status joined = blz_spawn(pool.native_handle(), [](void *) {}, nullptr, &c_task);
    if (joined == BLZ_OK) joined = co_await blz::co::after(c_task);
    blz::group group = pool.group();
    group.spawn([] {});
    co_await group;
    const blz_status waited = co_await blz::co::after(group.native_handle());
    const bool all_ok = status == BLZ_OK && set == BLZ_OK && joined == BLZ_OK && waited == BLZ_OK;
    co_return values[3] + spawned + (all_ok ? 100 : 0);
}

static_assert(!std::is_copy_constructible_v<blz::co::task<int>>, "co::task is move-only");
static_assert(std::is_nothrow_move_constructible_v<blz::co::task<int>>, "co::task moves");
static_assert(!std::is_copy_constructible_v<blz::co::spawned<int>>, "co::spawned is move-only");
static_assert(std::is_nothrow_move_constructible_v<blz::co::spawned<int>>, "co::spawned moves");
static_assert(std::is_nothrow_move_constructible_v<blz::co::native_task>, "co::native_task moves");

void run_coroutines(blz::pool &pool) {
    expect(blz::co::spawn(pool, coro_fib(pool, 12)).get() == 144, "coroutine fib");
    blz::co::spawned<int> all = blz::co::spawn(pool, coro_all(pool));
    expect(all.wait_for(std::chrono::seconds(60)) && all.is_ready() && all.get() == 112, "coroutine awaits");
}
#endif

void run() {
    blz::pool_options options;
    options.num_threads = 2;
    options.thread_name = "strict";
    options.on_thread_start = hook;
    options.on_thread_stop = [](std::uint32_t) {};
    blz::pool pool(std::move(options));
    blz::pool defaults;
    blz::pool moved(std::move(defaults));
    expect(defaults.num_threads() == 0 && moved.num_threads() > 0, "move");

    int x = 1;
    auto [a, b] = pool.join([] { return 1; }, [] { return std::string("b"); });
    expect(a == 1 && b == "b", "join values");
    auto [u, r] = pool.join([] {}, [&]() -> int & { return x; });
    static_assert(std::is_same_v<decltype(u), std::monostate>, "void side gives std::monostate");
    r = 2;
    expect(x == 2, "join reference");
    auto [o1, o2] = pool.join(once{}, once{});
    expect(o1 + o2 == 14, "join rvalue callables");
    try {
        pool.join([]() -> int { throw std::runtime_error("f"); }, []() -> int { throw std::logic_error("g"); });
        expect(false, "join throws");
    } catch (const std::runtime_error &e) {
        expect(std::string(e.what()) == "f", "join: f's exception");
    }

    expect(pool.call([] { return 3; }) == 3, "call");
    pool.call([] {});
    expect(&pool.call([&]() -> int & { return x; }) == &x, "call reference");
    expect(pool.call(once{}) == 7, "call rvalue callable");

    blz::task<int> t = pool.spawn([] { return 4; });
    expect(t.valid() && t.get() == 4 && !t.valid(), "task");
    blz::task<void> tv = pool.spawn([] {});
    tv.get();
    blz::task<std::unique_ptr<int>> tm = pool.spawn([] { return std::make_unique<int>(5); });
    expect(*tm.get() == 5, "task move-only value");
    blz::task<int &> tr = pool.spawn([&]() -> int & { return x; });
    expect(&tr.get() == &x, "task reference");
    blz::task<int> moved_task;
    moved_task = pool.spawn(once{});
    { blz::task<int> unjoined = pool.spawn([] { return 6; }); }
    expect(moved_task.get() == 7, "task move");

    std::vector<int> hits(1000, 0);
    pool.parallel_for(0, hits.size(), [&](std::size_t lo, std::size_t hi) {
        for (std::size_t i = lo; i < hi; ++i) hits[i] += 1;
    });
    pool.parallel_for(0, hits.size(), [&](std::size_t lo, std::size_t hi) {
        for (std::size_t i = lo; i < hi; ++i) hits[i] += 1;
    }, 10);
    expect(std::count(hits.begin(), hits.end(), 2) == 1000, "parallel_for");

    blz::group g = pool.group();
    std::atomic<int> count{0};
    for (int i = 0; i < 100; ++i) g.spawn([&] { count.fetch_add(1); });
    auto counter = [&] { count.fetch_add(1); };
    g.spawn(counter);
    g.wait();
    expect(count.load() == 101, "group");

    const unsigned long long sum = blz::parallel_reduce(
        pool, 0, 100001, 0ULL,
        [](std::size_t lo, std::size_t hi) {
            unsigned long long s = 0;
            for (std::size_t i = lo; i < hi; ++i) s += i;
            return s;
        },
        std::plus<>(), 100);
    expect(sum == 5000050000ULL, "parallel_reduce sum");
    const std::string text = blz::parallel_reduce(
        pool, 0, 26, std::string(),
        [](std::size_t lo, std::size_t hi) {
            std::string s;
            for (std::size_t i = lo; i < hi; ++i) s += static_cast<char>('a' + static_cast<int>(i));
            return s;
        },
        [](std::string left, std::string right) { return left + right; }, 1);
    expect(text == "abcdefghijklmnopqrstuvwxyz", "parallel_reduce in order");

    std::vector<double> v(50000);
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>((i * 7919) % 10007);
    blz::parallel_sort(pool, v.begin(), v.end());
    expect(std::is_sorted(v.begin(), v.end()), "parallel_sort");
    std::deque<int> d;
    for (int i = 0; i < 20000; ++i) d.push_back((i * 31) % 1013);
    blz::parallel_sort(pool, d.begin(), d.end(), std::greater<>());
    expect(std::is_sorted(d.begin(), d.end(), std::greater<>()), "parallel_sort deque, greater");
    int small[] = {3, 1, 2};
    blz::parallel_sort(pool, small, small + 3, [](int l, int h) { return l < h; });
    expect(small[0] == 1 && small[2] == 3, "parallel_sort array");

    // 0.2: bounded waits, detach, completion callbacks, cancellation, broadcast.
    blz::task<int> polled = pool.spawn([] { return 8; });
    while (!polled.wait_for(std::chrono::milliseconds(10))) {
    }
    expect(polled.is_ready() && polled.valid() && polled.get() == 8, "task wait_for, is_ready");
    std::atomic<int> done_calls{0};
    blz::task<void> with_callback = pool.spawn([] {}, [&](blz_status status, const std::exception_ptr &error) {
        if (status == BLZ_OK && !error) done_calls.fetch_add(1);
    });
    with_callback.get();
    expect(done_calls.load() == 1, "spawn with on_done");
    pool.spawn([] { return 9; }, [](blz_status, std::exception_ptr) {}).detach();
    std::atomic<unsigned> broadcast_mask{0};
    pool.broadcast([&](std::uint32_t index) { broadcast_mask.fetch_or(1U << index); });
    expect(broadcast_mask.load() == 3U, "broadcast");
    blz::group fail_fast = pool.group(blz::cancel_on_failure);
    fail_fast.spawn([] { expect(!blz::cancelled(), "not cancelled"); });
    expect(fail_fast.wait_for(std::chrono::seconds(60)), "group wait_for");
    fail_fast.cancel();
    expect(fail_fast.cancelled(), "group cancelled");
    try {
        fail_fast.wait();
        expect(false, "cancelled wait throws");
    } catch (const blz::error &e) {
        expect(e.status() == BLZ_ECANCELED && !fail_fast.cancelled(), "cancelled wait: BLZ_ECANCELED, reset");
    }
    blz::group plain = pool.group(blz::group_flags::none);
    plain.wait();

#if defined(BLZ_HAS_COROUTINES)
    run_coroutines(pool);
#endif
    const blz_stats stats = pool.stats();
    // The join whose two sides threw, reported by blz_fail: once per side a
    // thief ran, once for the sides the forker ran itself.
    expect(stats.num_threads == 2 && stats.tasks_failed >= 1 && stats.tasks_failed <= 2, "stats");
    expect(pool.worker_index() == -1 && pool.native_handle() != nullptr, "introspection");

    try {
        blz::pool bad(BLZ_MAX_THREADS + 1U);
        expect(false, "error thrown");
    } catch (const blz::error &e) {
        expect(e.status() == BLZ_EINVAL, "error status");
    }
}

}  // namespace

int main() {
    try {
        run();
    } catch (const std::exception &e) {
        std::fprintf(stderr, "FAILED: unexpected exception: %s\n", e.what());
        return 1;
    }
    std::printf("%s\n", failures == 0 ? "blitz.hpp: all checks passed" : "blitz.hpp: checks failed");
    return failures == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
