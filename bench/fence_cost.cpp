// fence_cost: what one full fence costs on this machine, single-threaded.
//
// Each kernel below is a noinline loop whose body is the operation under
// test, once per iteration. A sample times `iterations` trips of one kernel
// with CLOCK_MONOTONIC; the kernels take turns within each round, so drift
// on a noisy machine spreads over all of them. After a warm-up round, every
// kernel gets `samples` samples; the table gives ns per iteration (median and
// min over the samples) and the median less the empty loop's median.
//
// blz::full_fence() is whatever ../lib/fence.hpp compiles to: AO_nop_full()
// by default, std::atomic_thread_fence(seq_cst) with -DBLZ_FENCE_STD (the
// meson option fence=std). docs/fences.md has the figures and how to
// reproduce them.
//
// usage: fence_cost [iterations per sample = 2000000] [samples = 21]
#include <atomic_ops.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <vector>

#include "fence.hpp"

#if defined(BLZ_FENCE_STD)
#define BLZ_FENCE_VARIANT "std::atomic_thread_fence(seq_cst) (BLZ_FENCE_STD)"
#else
#define BLZ_FENCE_VARIANT "AO_nop_full() (libatomic_ops, the default)"
#endif

#if defined(__clang__)
#define BENCH_COMPILER "clang " __clang_version__
#elif defined(__GNUC__)
#define BENCH_COMPILER "gcc " __VERSION__
#else
#define BENCH_COMPILER "unknown compiler"
#endif

#if !defined(__x86_64__)
#error "fence_cost times x86-64 instructions (lock or, mfence)"
#endif

// The two sides of pop()'s store-buffering pair, on separate cache lines as
// in blz::Deque. External linkage on purpose: with internal linkage clang 14
// sees that nothing else writes g_top or reads g_bottom and deletes the
// store and the load of the pop shape.
struct alignas(64) FenceCostLine {
    std::atomic<int64_t> value{0};
};
extern FenceCostLine g_bottom, g_top, g_counter;
FenceCostLine g_bottom, g_top, g_counter;
extern volatile int64_t g_sink;
volatile int64_t g_sink;

namespace {

// Every kernel is a noinline loop of its own, and every iteration holds
// ITERATION(i), an empty asm that the compiler must assume reads i and
// touches memory; the empty loop is that alone, and each other kernel adds
// one operation to it. Without ITERATION clang 14 folds a loop of nothing
// but fences into a single mfence (adjacent fences with no memory access
// between them are merged), which would time nothing. `#pragma GCC unroll 1`
// (understood by g++ and clang++) keeps clang from unrolling some loops and
// not others.
#define KERNEL __attribute__((noinline)) void
#define ITERATION(i) asm volatile("" : : "r"(i) : "memory")

KERNEL empty_loop(uint64_t n) {
#pragma GCC unroll 1
    for (uint64_t i = 0; i < n; ++i) ITERATION(i);
}

KERNEL blz_full_fence(uint64_t n) {
#pragma GCC unroll 1
    for (uint64_t i = 0; i < n; ++i) {
        ITERATION(i);
        blz::full_fence();
    }
}

KERNEL std_fence(uint64_t n) {
#pragma GCC unroll 1
    for (uint64_t i = 0; i < n; ++i) {
        ITERATION(i);
        std::atomic_thread_fence(std::memory_order_seq_cst);
    }
}

KERNEL ao_nop_full(uint64_t n) {
#pragma GCC unroll 1
    for (uint64_t i = 0; i < n; ++i) {
        ITERATION(i);
        AO_nop_full();
    }
}

KERNEL asm_lock_or(uint64_t n) {
#pragma GCC unroll 1
    for (uint64_t i = 0; i < n; ++i) {
        ITERATION(i);
        asm volatile("lock orq $0, (%%rsp)" : : : "memory", "cc");
    }
}

KERNEL asm_mfence(uint64_t n) {
#pragma GCC unroll 1
    for (uint64_t i = 0; i < n; ++i) {
        ITERATION(i);
        asm volatile("mfence" : : : "memory");
    }
}

// The shape of Deque::pop(): relaxed store of bottom, the fence, relaxed
// load of top (bottom and top on separate cache lines); the loaded value
// feeds the next store.
KERNEL pop_shape(uint64_t n) {
    int64_t t = 0;
#pragma GCC unroll 1
    for (uint64_t i = 0; i < n; ++i) {
        ITERATION(i);
        g_bottom.value.store(static_cast<int64_t>(i) + t, std::memory_order_relaxed);
        blz::full_fence();
        t = g_top.value.load(std::memory_order_relaxed);
    }
    g_sink = t;
}

// The same without the fence: what the fence adds to pop's shape.
KERNEL pop_shape_no_fence(uint64_t n) {
    int64_t t = 0;
#pragma GCC unroll 1
    for (uint64_t i = 0; i < n; ++i) {
        ITERATION(i);
        g_bottom.value.store(static_cast<int64_t>(i) + t, std::memory_order_relaxed);
        t = g_top.value.load(std::memory_order_relaxed);
    }
    g_sink = t;
}

// An uncontended lock-prefixed read-modify-write (lock add / lock xadd).
KERNEL rmw_fetch_add(uint64_t n) {
#pragma GCC unroll 1
    for (uint64_t i = 0; i < n; ++i) {
        ITERATION(i);
        g_counter.value.fetch_add(1, std::memory_order_seq_cst);
    }
}

struct Kernel {
    const char *name;
    void (*run)(uint64_t);
};

const Kernel kKernels[] = {
    {"empty loop iteration (baseline)", empty_loop},
    {"blz::full_fence() as compiled", blz_full_fence},
    {"std::atomic_thread_fence(seq_cst)", std_fence},
    {"AO_nop_full()", ao_nop_full},
    {"asm lock orq $0,(%rsp)", asm_lock_or},
    {"asm mfence", asm_mfence},
    {"pop shape: store; full_fence; load", pop_shape},
    {"pop shape without the fence", pop_shape_no_fence},
    {"fetch_add(1, seq_cst), uncontended", rmw_fetch_add},
};
constexpr std::size_t kNumKernels = sizeof(kKernels) / sizeof(kKernels[0]);

double now(clockid_t clock) {
    timespec ts;
    clock_gettime(clock, &ts);
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    std::size_t m = v.size() / 2;
    return v.size() % 2 == 1 ? v[m] : (v[m - 1] + v[m]) / 2;
}

}  // namespace

int main(int argc, char **argv) {
    long long iterations = argc > 1 ? std::atoll(argv[1]) : 2000000;
    int samples = argc > 2 ? std::atoi(argv[2]) : 21;
    if (iterations < 1 || samples < 1) {
        std::fprintf(stderr, "usage: fence_cost [iterations per sample >= 1] [samples >= 1]\n");
        return 2;
    }
    const uint64_t n = static_cast<uint64_t>(iterations);

    std::vector<std::vector<double>> ns(kNumKernels);
    for (const Kernel &k : kKernels) k.run(n);  // warm-up round, not recorded

    double wall0 = now(CLOCK_MONOTONIC), cpu0 = now(CLOCK_PROCESS_CPUTIME_ID);
    for (int s = 0; s < samples; ++s) {
        for (std::size_t k = 0; k < kNumKernels; ++k) {
            double t0 = now(CLOCK_MONOTONIC);
            kKernels[k].run(n);
            double t = now(CLOCK_MONOTONIC) - t0;
            ns[k].push_back(t * 1e9 / static_cast<double>(n));
        }
    }
    double wall = now(CLOCK_MONOTONIC) - wall0, cpu = now(CLOCK_PROCESS_CPUTIME_ID) - cpu0;

    std::printf("compiler:        %s\n", BENCH_COMPILER);
    std::printf("blz::full_fence: %s\n", BLZ_FENCE_VARIANT);
    std::printf("samples:         %d of %lld iterations each, kernels interleaved\n", samples, iterations);
    std::printf("CPU / wall:      %.3f s / %.3f s = %.3f\n", cpu, wall, cpu / wall);
    std::printf("\n%-38s %10s %10s %12s\n", "operation (one per loop iteration)", "median ns", "min ns",
                "median-base");
    double base = median(ns[0]);
    for (std::size_t k = 0; k < kNumKernels; ++k) {
        double med = median(ns[k]);
        double min = *std::min_element(ns[k].begin(), ns[k].end());
        std::printf("%-38s %10.2f %10.2f %12.2f\n", kKernels[k].name, med, min, med - base);
    }
    return 0;
}
