/* Two rows of the fork path's benchmark (bench/forkpath.py, issue 31) that
 * the shared harness has no workload for: libblitz alone, measured against
 * the same work done without the pool in the same process.
 *
 *   forkpath_bench grain threads=T n=N grain=G
 *       blz_parallel_for over n indices of a ~1 ns body (y[i] = 3 sqrt(x[i]))
 *       with grain G (0: automatic), against a plain loop that calls the same
 *       body through a function pointer on the same pieces (G indices per
 *       call; G = 0: one call for the whole range).
 *   forkpath_bench leaves threads=T ms=M
 *       blz_fork_join of two leaves that each burn M ms of their thread's CPU
 *       time and never fork again, from inside the pool, against running the
 *       two leaves one after the other on one thread.
 *
 * Prints one JSON line: the pool's and the plain run's wall time, their
 * ratio, and the pool run's CPU time / wall time (a 2-worker figure that got
 * less than 1.9 CPUs did not get its two CPUs). */
#include <blitz.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double seconds_of(clockid_t clock) {
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void fail(const char *what, blz_status status) {
    fprintf(stderr, "forkpath_bench: %s: %s\n", what, blz_status_string(status));
    exit(1);
}

static long arg_long(int argc, char **argv, const char *name, long fallback) {
    size_t len = strlen(name);
    for (int i = 2; i < argc; ++i) {
        if (strncmp(argv[i], name, len) == 0 && argv[i][len] == '=') return strtol(argv[i] + len + 1, NULL, 10);
    }
    return fallback;
}

/* ---- grain ---- */

typedef struct {
    const double *x;
    double *y;
} map_args;

static void map_body(void *arg, size_t lo, size_t hi) {
    map_args *a = arg;
    for (size_t i = lo; i < hi; ++i) a->y[i] = 3.0 * sqrt(a->x[i]);
}

/* volatile: the plain loop calls the body as the pool does, not inlined. */
static void (*volatile plain_body)(void *, size_t, size_t) = map_body;

static void plain_loop(map_args *a, size_t n, size_t grain) {
    if (grain == 0) {
        plain_body(a, 0, n);
        return;
    }
    for (size_t lo = 0; lo < n; lo += grain) plain_body(a, lo, lo + grain < n ? lo + grain : n);
}

static int grain_case(blz_pool *pool, long threads, size_t n, size_t grain) {
    double *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
    if (x == NULL || y == NULL) fail("out of memory", BLZ_ENOMEM);
    for (size_t i = 0; i < n; ++i) x[i] = (double)(i % 1000);
    map_args a = {x, y};
    blz_status status = blz_parallel_for(pool, 0, n, grain, map_body, &a); /* warm: pages, workers */
    if (status != BLZ_OK) fail("blz_parallel_for", status);
    plain_loop(&a, n, grain);

    double start = seconds_of(CLOCK_MONOTONIC);
    plain_loop(&a, n, grain);
    double plain = seconds_of(CLOCK_MONOTONIC) - start;
    double check_plain = y[n - 1] + y[n / 2];

    memset(y, 0, n * sizeof *y);
    double cpu0 = seconds_of(CLOCK_PROCESS_CPUTIME_ID);
    start = seconds_of(CLOCK_MONOTONIC);
    status = blz_parallel_for(pool, 0, n, grain, map_body, &a);
    double wall = seconds_of(CLOCK_MONOTONIC) - start;
    double cpu = seconds_of(CLOCK_PROCESS_CPUTIME_ID) - cpu0;
    if (status != BLZ_OK) fail("blz_parallel_for", status);
    int ok = y[n - 1] + y[n / 2] == check_plain;
    for (size_t i = 0; ok && i < n; i += 997) ok = y[i] == 3.0 * sqrt(x[i]);

    printf("{\"workload\": \"grain\", \"threads\": %ld, \"n\": %zu, \"grain\": %zu, \"plain_ns_per_index\": %.4f, "
           "\"pool_ns_per_index\": %.4f, \"pool_over_plain\": %.4f, \"cpu_per_wall\": %.3f, \"checksum_ok\": %s}\n",
           threads, n, grain, plain * 1e9 / (double)n, wall * 1e9 / (double)n, wall / plain, cpu / wall,
           ok ? "true" : "false");
    free(x);
    free(y);
    return ok ? 0 : 1;
}

/* ---- leaves ---- */

typedef struct {
    double ms;
} leaf_args;

/* Spins until the calling thread has used ms of CPU time. */
static void burn(void *arg) {
    const leaf_args *a = arg;
    double until = seconds_of(CLOCK_THREAD_CPUTIME_ID) + a->ms * 1e-3;
    while (seconds_of(CLOCK_THREAD_CPUTIME_ID) < until) {
    }
}

typedef struct {
    blz_pool *pool;
    leaf_args a, b;
    blz_status status;
} leaves_args;

static void fork_leaves(void *arg) {
    leaves_args *l = arg;
    l->status = blz_fork_join(l->pool, burn, &l->a, burn, &l->b);
}

static int leaves_case(blz_pool *pool, long threads, double ms) {
    leaves_args l = {pool, {ms}, {ms}, BLZ_OK};
    blz_status status = blz_call(pool, fork_leaves, &l); /* warm */
    if (status != BLZ_OK || l.status != BLZ_OK) fail("blz_fork_join", status != BLZ_OK ? status : l.status);

    double start = seconds_of(CLOCK_MONOTONIC);
    burn(&l.a);
    burn(&l.b);
    double plain = seconds_of(CLOCK_MONOTONIC) - start;

    double cpu0 = seconds_of(CLOCK_PROCESS_CPUTIME_ID);
    start = seconds_of(CLOCK_MONOTONIC);
    status = blz_call(pool, fork_leaves, &l);
    double wall = seconds_of(CLOCK_MONOTONIC) - start;
    double cpu = seconds_of(CLOCK_PROCESS_CPUTIME_ID) - cpu0;
    if (status != BLZ_OK || l.status != BLZ_OK) fail("blz_fork_join", status != BLZ_OK ? status : l.status);

    printf("{\"workload\": \"leaves\", \"threads\": %ld, \"ms\": %.1f, \"plain_ms\": %.3f, \"pool_ms\": %.3f, "
           "\"pool_over_plain\": %.4f, \"cpu_per_wall\": %.3f, \"checksum_ok\": true}\n",
           threads, ms, plain * 1e3, wall * 1e3, wall / plain, cpu / wall);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2 || (strcmp(argv[1], "grain") != 0 && strcmp(argv[1], "leaves") != 0)) {
        fprintf(stderr, "usage: %s grain threads=T n=N grain=G | leaves threads=T ms=M\n", argv[0]);
        return 2;
    }
    long threads = arg_long(argc, argv, "threads", 1);
    if (threads < 1) threads = 1;
    blz_pool *pool = NULL;
    blz_pool_config config;
    blz_pool_config_init(&config);
    config.num_threads = (uint32_t)threads;
    blz_status status = blz_pool_create(&config, &pool);
    if (status != BLZ_OK) fail("blz_pool_create", status);
    int rc;
    if (strcmp(argv[1], "grain") == 0) {
        long n = arg_long(argc, argv, "n", 10000000), grain = arg_long(argc, argv, "grain", 0);
        if (n < 16 || grain < 0) {
            fprintf(stderr, "forkpath_bench: n must be at least 16 and grain at least 0\n");
            return 2;
        }
        rc = grain_case(pool, threads, (size_t)n, (size_t)grain);
    } else {
        long ms = arg_long(argc, argv, "ms", 20);
        if (ms < 1) {
            fprintf(stderr, "forkpath_bench: ms must be at least 1\n");
            return 2;
        }
        rc = leaves_case(pool, threads, (double)ms);
    }
    blz_pool_destroy(pool);
    return rc;
}
