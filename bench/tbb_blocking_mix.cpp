// Issue 28's blocking-mix workload on oneTBB (bench/blocking_mix.c is the
// libblitz side; bench/blocking_mix.py drives both). An arena of N slots,
// none reserved for an external thread (task_arena(N, 0)), so the N
// blockers can hold every slot as they hold every libblitz worker; the
// fork-join is fib(n) by tbb::task_group inside arena.execute. oneTBB has
// no call that tells the scheduler a task blocks, so nothing compensates:
// execute waits for a free slot.
// usage: tbb_blocking_mix MODE [threads=N] [fib=n] [block_ms=m]
//   MODE plain: N blockers; alone: none.
#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/task_arena.h>
#include <oneapi/tbb/task_group.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <thread>

namespace {

std::uint64_t fib(unsigned n) {
    if (n < 2)
        return n;
    std::uint64_t a = 0, b = 0;
    tbb::task_group group;
    group.run([&] { a = fib(n - 1); });
    b = fib(n - 2);
    group.wait();
    return a + b;
}

unsigned arg_value(int argc, char **argv, const char *key, unsigned fallback) {
    std::size_t len = std::strlen(key);
    for (int i = 2; i < argc; i++)
        if (std::strncmp(argv[i], key, len) == 0 && argv[i][len] == '=')
            return static_cast<unsigned>(std::strtoul(argv[i] + len + 1, nullptr, 10));
    return fallback;
}

double cpu_seconds() {
    timespec t{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

} // namespace

int main(int argc, char **argv) {
    std::string mode = argc > 1 ? argv[1] : "";
    if (mode != "plain" && mode != "alone") {
        std::fprintf(stderr, "usage: tbb_blocking_mix plain|alone [threads=N] [fib=n] [block_ms=m]\n");
        return 2;
    }
    unsigned threads = arg_value(argc, argv, "threads", 2);
    unsigned n = arg_value(argc, argv, "fib", 25);
    unsigned block_ms = arg_value(argc, argv, "block_ms", 100);
    unsigned blockers = mode == "plain" ? threads : 0;

    // N worker threads for the arena's N slots (the limit counts the
    // external thread too).
    tbb::global_control control(tbb::global_control::max_allowed_parallelism, threads + 1);
    tbb::task_arena arena(static_cast<int>(threads), 0);
    arena.initialize();
    std::atomic<unsigned> started{0};
    tbb::task_group blockers_group;
    for (unsigned i = 0; i < blockers; i++)
        arena.enqueue(blockers_group.defer([&] {
            // relaxed: only tells the main thread when to start; nothing is published
            started.fetch_add(1, std::memory_order_relaxed);
            std::this_thread::sleep_for(std::chrono::milliseconds(block_ms));
        }));
    auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (started.load(std::memory_order_relaxed) < blockers && std::chrono::steady_clock::now() < give_up)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));

    auto wall0 = std::chrono::steady_clock::now();
    double cpu0 = cpu_seconds();
    std::uint64_t result = 0;
    arena.execute([&] { result = fib(n); });
    double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
    double cpu = cpu_seconds() - cpu0;
    arena.execute([&] { blockers_group.wait(); });
    std::printf("{\"impl\": \"oneTBB-%s\", \"threads\": %u, \"fib\": %u, \"block_ms\": %u, \"checksum\": %llu, "
                "\"forkjoin_ms\": %.3f, \"cpu_per_wall\": %.3f}\n",
                mode.c_str(), threads, n, block_ms, static_cast<unsigned long long>(result), wall * 1e3,
                wall > 0 ? cpu / wall : 0.0);
    return 0;
}
