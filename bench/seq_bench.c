/*
 * The benchmark workloads as plain sequential C: the floor every runtime is
 * compared with, and the checksums every runtime must reproduce. For the
 * wake workload it measures the raw futex wake-to-run latency only.
 * usage: seq_bench WORKLOAD [key=value ...] (see harness.h).
 */
#include "harness.h"

static int start(unsigned threads) {
    (void)threads;
    return 0;
}

static void stop(void) {}

static int64_t tree_sum(const bench_node *root, unsigned reps) {
    int64_t sum = 0;
    for (unsigned i = 0; i < reps; ++i) sum = bench_tree_sum(root);
    return sum;
}

static double sum(const double *x, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; ++i) s += x[i];
    return s;
}

static void map(const double *x, double *y, size_t n) {
    for (size_t i = 0; i < n; ++i) y[i] = bench_map_one(x[i]);
}

/* Both spawn workloads: with no pool, inside and outside are the same loop. */
static void spawn_wait(size_t count) {
    /* A call through a pointer, as a task runner would make it. */
    void (*volatile task)(size_t) = bench_tiny_task;
    for (size_t i = 0; i < count; ++i) task(i);
}

static void call(bench_fn fn, void *arg) { fn(arg); }

/* The application workloads: the same recursions, with no fork and the
 * merges sequential (kernels.h). */
static void msort(uint64_t *a, uint64_t *b, size_t n) { bench_msort_sequential(a, b, n, 0); }

static void matmul(double *c, const double *a, const double *b, size_t n) {
    bench_mm_job job = {c, a, b, n, n};
    bench_mm_sequential(&job);
}

/* The graph workloads: the plain loops, with no graph. */
static void wavefront(bench_wave *wave) { bench_wave_sequential(wave); }

static void cholesky(bench_chol *chol, const bench_chol_graph *graph) {
    (void)graph;
    bench_chol_sequential(chol);
}

int main(int argc, char **argv) {
    static const bench_runtime runtime = {
        "sequential", 1, start, stop, bench_fib, tree_sum, sum, map, bench_qs_sequential,
        bench_uts_sequential, spawn_wait, call, call, NULL, NULL, msort, matmul, bench_bfs_sequential,
        spawn_wait, wavefront, cholesky,
    };
    return bench_main(argc, argv, &runtime);
}
