/*
 * Issue 28's blocking-mix workload on libblitz: N tasks that each block for
 * block_ms (nanosleep, standing for I/O) on an N-worker pool, and beside
 * them one fork-join (fib by blz_fork_join). It prints the fork-join's
 * completion time as one JSON line; bench/blocking_mix.py drives it.
 *
 * usage: blocking_mix MODE [threads=N] [fib=n] [block_ms=m] [pool=own|shared]
 *   MODE sections: each blocker wraps its sleep in blz_block_begin/end
 *   MODE plain:    the blockers sleep without telling the pool
 *   MODE alone:    no blockers (the fork-join's own time, the baseline)
 *   MODE fibonly:  fib(n) once on the pool, no blockers, nothing printed
 *                  but the checksum (for callgrind's instruction count)
 */
#define _POSIX_C_SOURCE 200809L
#include <blitz.h>

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static blz_pool *pool;
static atomic_uint blockers_started;
static unsigned block_ms = 100;
static int use_sections;

static void check(blz_status s, const char *what) {
    if (s != BLZ_OK) {
        fprintf(stderr, "blocking_mix: %s failed: %d\n", what, (int)s);
        exit(1);
    }
}

static double seconds(clockid_t clock) {
    struct timespec t;
    clock_gettime(clock, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

typedef struct fib_args {
    unsigned n;
    uint64_t result;
} fib_args;

static void fib_task(void *p) {
    fib_args *a = p;
    if (a->n < 2) {
        a->result = a->n;
        return;
    }
    fib_args left = {a->n - 1, 0}, right = {a->n - 2, 0};
    check(blz_fork_join(pool, fib_task, &left, fib_task, &right), "blz_fork_join");
    a->result = left.result + right.result;
}

static void blocker_task(void *unused) {
    (void)unused;
    /* relaxed: the count only tells the main thread when to start the
     * fork-join; no data is published through it */
    atomic_fetch_add_explicit(&blockers_started, 1, memory_order_relaxed);
    struct timespec t = {block_ms / 1000, (long)(block_ms % 1000) * 1000000L};
    if (use_sections)
        check(blz_block_begin(), "blz_block_begin");
    while (nanosleep(&t, &t) != 0) {
    }
    if (use_sections)
        check(blz_block_end(), "blz_block_end");
}

static unsigned arg_value(int argc, char **argv, const char *key, unsigned fallback) {
    size_t len = strlen(key);
    for (int i = 2; i < argc; i++)
        if (strncmp(argv[i], key, len) == 0 && argv[i][len] == '=')
            return (unsigned)strtoul(argv[i] + len + 1, NULL, 10);
    return fallback;
}

static int shared_pool_wanted(int argc, char **argv) {
    for (int i = 2; i < argc; i++)
        if (strcmp(argv[i], "pool=shared") == 0)
            return 1;
    return 0;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "";
    int blockers = strcmp(mode, "sections") == 0 || strcmp(mode, "plain") == 0;
    if (!blockers && strcmp(mode, "alone") != 0 && strcmp(mode, "fibonly") != 0) {
        fprintf(stderr, "usage: blocking_mix sections|plain|alone|fibonly [threads=N] [fib=n] [block_ms=m] "
                        "[pool=own|shared]\n");
        return 2;
    }
    unsigned threads = arg_value(argc, argv, "threads", 2);
    unsigned n = arg_value(argc, argv, "fib", 25);
    block_ms = arg_value(argc, argv, "block_ms", 100);
    use_sections = strcmp(mode, "sections") == 0;

    blz_pool_config config;
    blz_pool_config_init(&config);
    config.num_threads = threads;
    check(shared_pool_wanted(argc, argv) ? blz_pool_shared(&config, &pool) : blz_pool_create(&config, &pool),
          "pool");

    if (strcmp(mode, "fibonly") == 0) {
        fib_args a = {n, 0};
        check(blz_call(pool, fib_task, &a), "blz_call");
        printf("%llu\n", (unsigned long long)a.result);
        check(blz_pool_destroy(pool), "blz_pool_destroy");
        return 0;
    }

    blz_task **tasks = calloc(threads ? threads : 1, sizeof *tasks);
    if (tasks == NULL)
        return 1;
    for (unsigned i = 0; blockers && i < threads; i++)
        check(blz_spawn(pool, blocker_task, NULL, &tasks[i]), "blz_spawn");
    /* The fork-join starts once every blocker is asleep (or about to be):
     * this is the starvation case, not a race with the blockers' start. */
    double give_up = seconds(CLOCK_MONOTONIC) + 5.0;
    while (blockers && atomic_load_explicit(&blockers_started, memory_order_relaxed) < threads &&
           seconds(CLOCK_MONOTONIC) < give_up) {
        struct timespec ms = {0, 1000000L}; /* a sleep, not a spin: 2 vCPUs */
        nanosleep(&ms, NULL);
    }
    double wall0 = seconds(CLOCK_MONOTONIC), cpu0 = seconds(CLOCK_PROCESS_CPUTIME_ID);
    fib_args a = {n, 0};
    check(blz_call(pool, fib_task, &a), "blz_call");
    double wall = seconds(CLOCK_MONOTONIC) - wall0, cpu = seconds(CLOCK_PROCESS_CPUTIME_ID) - cpu0;
    for (unsigned i = 0; blockers && i < threads; i++)
        check(blz_join(tasks[i]), "blz_join");
    free(tasks);
    check(blz_pool_destroy(pool), "blz_pool_destroy");
    printf("{\"impl\": \"libblitz-%s\", \"threads\": %u, \"fib\": %u, \"block_ms\": %u, \"checksum\": %llu, "
           "\"forkjoin_ms\": %.3f, \"cpu_per_wall\": %.3f}\n",
           mode, threads, n, block_ms, (unsigned long long)a.result, wall * 1e3, wall > 0 ? cpu / wall : 0.0);
    return 0;
}
