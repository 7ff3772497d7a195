// The pool of the C++ benchmark programs (blitzxx_bench, blitzco_bench):
// one blz::pool for the run, made by start() and destroyed by stop(), and
// its counters for the harness (harness.h's start, stop and stats).
#ifndef BLZ_BENCH_BLITZXX_POOL_HPP
#define BLZ_BENCH_BLITZXX_POOL_HPP

#include <blitz.hpp>

#include <memory>

#include "blitz_stats.h"

namespace bench_pool {

inline std::unique_ptr<blz::pool> pool;

inline int start(unsigned threads) {
    try {
        pool = std::make_unique<blz::pool>(threads);
        return 0;
    } catch (const blz::error &) {
        return -1;
    }
}

inline void stop() { pool.reset(); }

inline int read_stats(bench_pool_stats *out) { return bench_read_blitz_stats(pool->native_handle(), out); }

// Fills the harness's pool entries; the caller adds its workloads.
inline bench_runtime runtime(const char *name) {
    bench_runtime r{};
    r.name = name;
    r.start = start;
    r.stop = stop;
    r.stats = read_stats;
    return r;
}

}  // namespace bench_pool

#endif
