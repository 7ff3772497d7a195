/*
 * The demo: fib(n) by fork-join with no cutoff, every call a blz_fork_join.
 * Prints the sequential time, the pool's time on one worker and on all of
 * them, ns per join, the speedups, CPU time / wall time (below 1.9 on two
 * workers, the machine did not give the run two CPUs) and the pool's
 * statistics.
 *
 * usage: fib [n=32] [workers=0 (the library's default)] [repeats=3]
 */
#define _POSIX_C_SOURCE 200809L
#include <blitz.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

typedef struct fib_args {
    blz_pool *pool;
    unsigned n;
    uint64_t result;
} fib_args;

static uint64_t fib_sequential(unsigned n) { return n < 2 ? n : fib_sequential(n - 1) + fib_sequential(n - 2); }

static void fib_task(void *p) {
    fib_args *args = (fib_args *)p;
    if (args->n < 2) {
        args->result = args->n;
        return;
    }
    fib_args left = {args->pool, args->n - 1, 0};
    fib_args right = {args->pool, args->n - 2, 0};
    blz_fork_join(args->pool, fib_task, &left, fib_task, &right);
    args->result = left.result + right.result;
}

static double seconds(clockid_t clock) {
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int check(blz_status status, const char *what) {
    if (status == BLZ_OK) return 0;
    fprintf(stderr, "%s: %s\n", what, blz_status_string(status));
    return 1;
}

typedef struct run {
    uint32_t threads;
    uint64_t result;
    double wall;      /* best wall time, seconds */
    double cpu_ratio; /* CPU time / wall time of that run */
    blz_stats stats;  /* the pool's statistics after the runs */
} run;

/* Best of `repeats` runs of fib(n) on a new pool of `workers` (0: default). */
static run run_pool(unsigned n, uint32_t workers, int repeats) {
    run out = {0, 0, 1e30, 0, {0}};
    blz_pool_config config;
    blz_pool_config_init(&config);
    config.num_threads = workers;
    blz_pool *pool = NULL;
    if (check(blz_pool_create(&config, &pool), "blz_pool_create")) exit(1);
    out.threads = blz_pool_num_threads(pool);
    for (int r = 0; r < repeats; ++r) {
        fib_args args = {pool, n, 0};
        double w0 = seconds(CLOCK_MONOTONIC), c0 = seconds(CLOCK_PROCESS_CPUTIME_ID);
        if (check(blz_call(pool, fib_task, &args), "blz_call")) exit(1);
        double wall = seconds(CLOCK_MONOTONIC) - w0, cpu = seconds(CLOCK_PROCESS_CPUTIME_ID) - c0;
        out.result = args.result;
        if (wall < out.wall) {
            out.wall = wall;
            out.cpu_ratio = cpu / wall;
        }
    }
    out.stats.struct_size = sizeof(out.stats);
    if (check(blz_pool_stats(pool, &out.stats), "blz_pool_stats")) exit(1);
    if (check(blz_pool_destroy(pool), "blz_pool_destroy")) exit(1);
    return out;
}

int main(int argc, char **argv) {
    unsigned n = argc > 1 ? (unsigned)atoi(argv[1]) : 32;
    uint32_t workers = argc > 2 ? (uint32_t)atoi(argv[2]) : 0;
    int repeats = argc > 3 ? atoi(argv[3]) : 3;
    if (n > 45 || repeats < 1) {
        fprintf(stderr, "usage: fib [n<=45] [workers] [repeats>=1]\n");
        return 2;
    }

    double best_seq = 1e30;
    uint64_t expected = 0;
    for (int r = 0; r < repeats; ++r) {
        double t0 = seconds(CLOCK_MONOTONIC);
        expected = fib_sequential(n);
        double t = seconds(CLOCK_MONOTONIC) - t0;
        if (t < best_seq) best_seq = t;
    }

    run one = run_pool(n, 1, repeats);
    run all = run_pool(n, workers, repeats);
    if (one.result != expected || all.result != expected) {
        fprintf(stderr, "WRONG: fib(%u) = %" PRIu64 ", got %" PRIu64 " and %" PRIu64 "\n", n, expected,
                one.result, all.result);
        return 1;
    }

    /* fib(n) by fork-join makes fib(n+1) - 1 joins. */
    uint64_t joins = fib_sequential(n + 1) - 1;
    printf("fib(%u) = %" PRIu64 " by fork-join, %" PRIu64 " joins, no cutoff (best of %d runs)\n", n, expected,
           joins, repeats);
    printf("sequential:            %8.3f ms  (plain recursion)\n", best_seq * 1e3);
    printf("pool, 1 worker:        %8.3f ms  %6.2f ns per join  CPU/wall %.2f\n", one.wall * 1e3,
           one.wall * 1e9 / (double)joins, one.cpu_ratio);
    printf("pool, %2" PRIu32 " worker%s:      %8.3f ms  %6.2f ns per join  CPU/wall %.2f\n", all.threads,
           all.threads == 1 ? " " : "s", all.wall * 1e3, all.wall * 1e9 / (double)joins, all.cpu_ratio);
    printf("speedup:               %.2fx over 1 worker, %.2fx over sequential\n", one.wall / all.wall,
           best_seq / all.wall);
    if (all.threads >= 2 && all.cpu_ratio < 1.9)
        printf("note: the machine gave this run %.2f CPUs, not %" PRIu32 ": not a %" PRIu32 "-worker figure\n",
               all.cpu_ratio, all.threads, all.threads);

    blz_stats stats = all.stats;
    printf("stats: jobs_executed=%" PRIu64 " jobs_injected=%" PRIu64 " steals=%" PRIu64 " sleeps=%" PRIu64
           " wakeups=%" PRIu64 " spurious_wakeups=%" PRIu64 " sleep_aborts=%" PRIu64 " tasks_failed=%" PRIu64
           " sleeping_now=%" PRIu32 " inactive_now=%" PRIu32 "\n",
           stats.jobs_executed, stats.jobs_injected, stats.steals, stats.sleeps, stats.wakeups,
           stats.spurious_wakeups, stats.sleep_aborts, stats.tasks_failed, stats.sleeping_now,
           stats.inactive_now);

    return 0;
}
