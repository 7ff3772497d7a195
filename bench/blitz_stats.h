/*
 * libblitz's counters in the harness's form (harness.h bench_pool_stats),
 * for the programs that run on libblitz through the C ABI or blitz.hpp.
 */
#ifndef BLZ_BENCH_BLITZ_STATS_H
#define BLZ_BENCH_BLITZ_STATS_H

#include <blitz.h>

#include "harness.h"

/* 0 on success, -1 if blz_pool_stats refused. */
static inline int bench_read_blitz_stats(blz_pool *pool, bench_pool_stats *out) {
    blz_stats s;
    s.struct_size = sizeof s;
    if (blz_pool_stats(pool, &s) != BLZ_OK) return -1;
    out->jobs_executed = s.jobs_executed;
    out->jobs_injected = s.jobs_injected;
    out->steals = s.steals;
    out->sleeps = s.sleeps;
    out->wakeups = s.wakeups;
    out->spurious_wakeups = s.spurious_wakeups;
    out->sleep_aborts = s.sleep_aborts;
    out->sleeping_now = s.sleeping_now;
    out->num_threads = s.num_threads;
    return 0;
}

#endif
