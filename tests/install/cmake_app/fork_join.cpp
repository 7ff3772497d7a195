// fib by blz::pool::join (blitz.hpp, C++17), built by CMake against an
// installed libblitz with CMAKE_CXX_STANDARD 11: it compiles only if
// blitz::blitz raised the standard. Exit 0 when the results are right.
#include <blitz.hpp>

#include <cstdio>
#include <stdexcept>

namespace {

long fib(blz::pool &pool, int n) {
    if (n < 2) return n;
    auto [a, b] = pool.join([&] { return fib(pool, n - 1); }, [&] { return fib(pool, n - 2); });
    return a + b;
}

long fib_seq(int n) { return n < 2 ? n : fib_seq(n - 1) + fib_seq(n - 2); }

}  // namespace

int main() {
    std::printf("fork_join_cpp: compiled as C++ %ld\n", static_cast<long>(__cplusplus));
    if (blz_version_number() != BLZ_VERSION_NUMBER) {
        std::printf("fork_join_cpp: FAIL: header %d, library %u\n", BLZ_VERSION_NUMBER, blz_version_number());
        return 1;
    }
    try {
        blz::pool pool(2);
        const long result = pool.call([&] { return fib(pool, 25); });
        std::printf("fork_join_cpp: fib(25) = %ld by blz::pool::join\n", result);
        if (result != fib_seq(25)) {
            std::printf("fork_join_cpp: FAIL: expected %ld\n", fib_seq(25));
            return 1;
        }
        // An exception thrown on a side crosses the join to the caller.
        try {
            pool.join([] {}, []() -> int { throw std::runtime_error("from the second side"); });
            std::printf("fork_join_cpp: FAIL: join swallowed an exception\n");
            return 1;
        } catch (const std::runtime_error &) {
        }
    } catch (const std::exception &e) {
        std::printf("fork_join_cpp: FAIL: %s\n", e.what());
        return 1;
    }
    std::printf("fork_join_cpp: ok\n");
    return 0;
}
