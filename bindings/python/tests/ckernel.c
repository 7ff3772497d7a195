/*
 * C loop bodies for the Python binding's tests: blz_range_fn functions that
 * the tests pass to pool.parallel_for as blitz.RANGE_FN pointers, so that
 * they run on the workers without the GIL. Built by bindings/python/meson.build;
 * the tests find it through $BLITZ_TEST_KERNEL.
 */
#define _POSIX_C_SOURCE 200809L
#include <stddef.h>
#include <stdint.h>
#include <time.h>

static uint32_t *g_counts;
static size_t g_size;
static uint32_t g_nonnull_args;
static uint32_t g_out_of_range;

/* Where blz_test_mark counts its indices. */
void blz_test_set_counts(uint32_t *counts, size_t size) {
    g_counts = counts;
    g_size = size;
    __atomic_store_n(&g_nonnull_args, 0, __ATOMIC_SEQ_CST);
    __atomic_store_n(&g_out_of_range, 0, __ATOMIC_SEQ_CST);
}

/* Calls of blz_test_mark whose arg was not NULL. */
uint32_t blz_test_nonnull_args(void) { return __atomic_load_n(&g_nonnull_args, __ATOMIC_SEQ_CST); }

/* Indices blz_test_mark saw outside the counts array. */
uint32_t blz_test_out_of_range(void) { return __atomic_load_n(&g_out_of_range, __ATOMIC_SEQ_CST); }

/* A blz_range_fn: counts each index of [lo, hi) once. */
void blz_test_mark(void *arg, size_t lo, size_t hi) {
    if (arg != NULL) __atomic_add_fetch(&g_nonnull_args, 1, __ATOMIC_SEQ_CST);
    for (size_t i = lo; i < hi; ++i) {
        if (i < g_size) {
            __atomic_add_fetch(&g_counts[i], 1, __ATOMIC_SEQ_CST);
        } else {
            __atomic_add_fetch(&g_out_of_range, 1, __ATOMIC_SEQ_CST);
        }
    }
}

static uint32_t g_arrived;
static uint32_t g_met;
static uint32_t g_parties;

/* Prepares blz_test_rendezvous for `parties` indices. */
void blz_test_rendezvous_reset(uint32_t parties) {
    __atomic_store_n(&g_arrived, 0, __ATOMIC_SEQ_CST);
    __atomic_store_n(&g_met, 0, __ATOMIC_SEQ_CST);
    __atomic_store_n(&g_parties, parties, __ATOMIC_SEQ_CST);
}

/* Indices whose call saw every party arrive. */
uint32_t blz_test_rendezvous_met(void) { return __atomic_load_n(&g_met, __ATOMIC_SEQ_CST); }

/*
 * A blz_range_fn: each index arrives, then waits (up to 60 s, a guard, not
 * a measurement) until every party has arrived. All indices can meet only
 * if their calls run at the same time on different workers, which calls
 * holding the GIL could not do while they wait.
 */
void blz_test_rendezvous(void *arg, size_t lo, size_t hi) {
    (void)arg;
    uint32_t parties = __atomic_load_n(&g_parties, __ATOMIC_SEQ_CST);
    __atomic_add_fetch(&g_arrived, (uint32_t)(hi - lo), __ATOMIC_SEQ_CST);
    struct timespec start, now, pause = {0, 100000};
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (;;) {
        if (__atomic_load_n(&g_arrived, __ATOMIC_SEQ_CST) >= parties) {
            __atomic_add_fetch(&g_met, (uint32_t)(hi - lo), __ATOMIC_SEQ_CST);
            return;
        }
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec - start.tv_sec > 60) return;
        nanosleep(&pause, NULL);
    }
}

/* ---- kernels that take their data from arg (0.2: C functions with arguments) ---- */

void blz_fail(void); /* from libblitz, which this module links */

/* A blz_range_fn: squares the uint32_t array at arg, in place, over [lo, hi). */
void blz_test_square(void *arg, size_t lo, size_t hi) {
    uint32_t *values = arg;
    for (size_t i = lo; i < hi; ++i) values[i] *= values[i];
}

/* A blz_fn: adds one to the uint64_t at arg. */
void blz_test_increment(void *arg) {
    __atomic_add_fetch((uint64_t *)arg, 1, __ATOMIC_SEQ_CST);
}

/* A blz_fn that reports a failure (its Future fails with BLZ_ETASK). */
void blz_test_failing_task(void *arg) {
    (void)arg;
    blz_fail();
}

/* A blz_range_fn: counts the indices it ran into the uint64_t at arg, each
 * taking about 1 ms, so that a loop over many indices can be interrupted
 * while it runs. */
void blz_test_slow_count(void *arg, size_t lo, size_t hi) {
    struct timespec pause = {0, 1000000};
    for (size_t i = lo; i < hi; ++i) {
        nanosleep(&pause, NULL);
        __atomic_add_fetch((uint64_t *)arg, 1, __ATOMIC_SEQ_CST);
    }
}

static uint32_t g_released;

/* Lets every blz_test_block_until_released call return. */
void blz_test_release(uint32_t released) { __atomic_store_n(&g_released, released, __ATOMIC_SEQ_CST); }

/* A blz_fn that holds its worker (and its argument) until blz_test_release(1),
 * or 60 s, a guard rather than a measurement. */
void blz_test_block_until_released(void *arg) {
    (void)arg;
    struct timespec start, now, pause = {0, 100000};
    clock_gettime(CLOCK_MONOTONIC, &start);
    while (!__atomic_load_n(&g_released, __ATOMIC_SEQ_CST)) {
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec - start.tv_sec > 60) return;
        nanosleep(&pause, NULL);
    }
}
