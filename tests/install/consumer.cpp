// A C++17 program built against an installed libblitz, outside the source
// tree:
//     c++ -std=c++17 consumer.cpp $(pkg-config --cflags --libs blitz)
// and by the meson project in app/. Uses the installed C++ layer blitz.hpp
// (every facility once) and the C ABI directly. Exit 0 when every result
// is right.
#include <blitz.hpp>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

bool check(bool ok, const char *what) {
    std::printf("consumer_cpp: %s %s\n", ok ? "ok  " : "FAIL", what);
    return ok;
}

}  // namespace

int main() {
    bool ok = check(blz_version_number() == BLZ_VERSION_NUMBER, "the library's version is the header's");
    try {
        blz::pool_options options;
        options.num_threads = 2;
        options.thread_name = "consumer";
        blz::pool pool(std::move(options));

        auto [a, b] = pool.join([] { return 20; }, [] { return std::string("22"); });
        ok &= check(a + std::stoi(b) == 42, "blz::pool::join");
        ok &= check(pool.call([&] { return pool.worker_index(); }) >= 0, "blz::pool::call");
        blz::task<int> t = pool.spawn([] { return 7; });
        ok &= check(t.get() == 7, "blz::pool::spawn, blz::task::get");

        std::vector<std::uint64_t> values(100000);
        pool.parallel_for(0, values.size(), [&values](std::size_t lo, std::size_t hi) {
            for (std::size_t i = lo; i < hi; ++i) values[i] = i + 1;
        }, 1000);
        const std::uint64_t total = std::accumulate(values.begin(), values.end(), std::uint64_t{0});
        ok &= check(total == 100000ULL * 100001ULL / 2, "blz::pool::parallel_for");

        const std::uint64_t reduced = blz::parallel_reduce(
            pool, 0, values.size(), std::uint64_t{0},
            [&values](std::size_t lo, std::size_t hi) {
                return std::accumulate(values.begin() + static_cast<std::ptrdiff_t>(lo),
                                       values.begin() + static_cast<std::ptrdiff_t>(hi), std::uint64_t{0});
            },
            std::plus<>());
        ok &= check(reduced == total, "blz::parallel_reduce");

        std::vector<std::uint64_t> reversed(values.rbegin(), values.rend());
        blz::parallel_sort(pool, reversed.begin(), reversed.end());
        ok &= check(reversed == values, "blz::parallel_sort");

        blz::group group = pool.group();
        std::atomic<int> count{0};
        for (int i = 0; i < 100; ++i) group.spawn([&count] { count.fetch_add(1); });
        group.wait();
        ok &= check(count.load() == 100, "blz::group spawn and wait");

        try {
            pool.join([] {}, []() -> int { throw std::range_error("from g"); });
            ok &= check(false, "an exception crosses join");
        } catch (const std::range_error &e) {
            ok &= check(std::string(e.what()) == "from g", "an exception crosses join");
        }
        // 0.2: the C++ layer reports a caught exception to the library (blz_fail).
        ok &= check(pool.stats().tasks_failed == 1, "blz_stats through blz::pool::stats");
    } catch (const std::exception &e) {
        std::printf("consumer_cpp: unexpected exception: %s\n", e.what());
        ok = false;
    }

    // The C ABI from C++, next to the C++ layer.
    blz_pool *pool = nullptr;
    ok &= check(blz_pool_create(nullptr, &pool) == BLZ_OK && blz_pool_num_threads(pool) >= 1 &&
                    blz_pool_destroy(pool) == BLZ_OK,
                "the C ABI from C++");

    std::printf("consumer_cpp: %s\n", ok ? "ok" : "FAIL");
    return ok ? 0 : 1;
}
