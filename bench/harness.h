/*
 * The measuring harness shared by the C and C++ benchmark programs.
 *
 * A program describes its runtime (libblitz, oneTBB, OpenMP or plain
 * sequential code) as a table of operations and calls bench_main, which
 * parses `WORKLOAD key=value ...`, starts the runtime with the requested
 * number of workers, runs a warm-up, then ONE measured run, and prints one
 * JSON line: wall time, process CPU time, the metric (lower is better), a
 * checksum that the driver (bench/run.py) compares with the sequential
 * program's, and workload-specific extras. One run per invocation lets the
 * driver interleave runtimes run by run.
 */
#ifndef BLZ_BENCH_HARNESS_H
#define BLZ_BENCH_HARNESS_H

#include "graph_kernels.h"
#include "kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef void (*bench_fn)(void *arg);

/* What blz_pool_stats reports, for runtimes that can tell. */
typedef struct bench_pool_stats {
    uint64_t jobs_executed, jobs_injected, steals, sleeps, wakeups, spurious_wakeups, sleep_aborts;
    uint32_t sleeping_now, num_threads;
} bench_pool_stats;

typedef struct bench_runtime {
    const char *name;
    /* 1 for the sequential program: no pool; the wake workload then measures
     * only the futex floor. */
    int sequential;
    /* Starts a pool of `threads` workers; 0 on success. */
    int (*start)(unsigned threads);
    void (*stop)(void);
    /* The workloads, run from the main thread (outside the pool). */
    uint64_t (*fib)(unsigned n);
    /* Sums the tree `reps` times inside one entry into the pool; returns one sum. */
    int64_t (*tree_sum)(const bench_node *root, unsigned reps);
    double (*sum)(const double *x, size_t n);
    void (*map)(const double *x, double *y, size_t n);
    void (*sort)(double *a, size_t n);
    bench_uts_count (*uts)(const bench_uts_node *root, int max_depth);
    /* Submits bench_tiny_task(0 .. count-1) as `count` separate tasks from
     * this thread and returns when all have run. */
    void (*spawn_wait)(size_t count);
    /* Runs fn(arg) on a worker and waits for it. */
    void (*call)(bench_fn fn, void *arg);
    /* Submits fn(arg) to run on a worker; does not wait. */
    void (*post)(bench_fn fn, void *arg);
    /* Optional (NULL: unknown): 1 when every worker sleeps; pool counters. */
    int (*all_asleep)(void);
    int (*stats)(bench_pool_stats *out);
    /* The application workloads, each by the recursion kernels.h describes:
     * sorts a[0..n) with scratch b (the result in a); C += A B with the
     * matrices n x n; the search bench_bfs_reset prepared, level by level. */
    void (*msort)(uint64_t *a, uint64_t *b, size_t n);
    void (*matmul)(double *c, const double *a, const double *b, size_t n);
    void (*bfs)(bench_bfs *search);
    /* Enters the pool once and, from a worker there, submits bench_tiny_task(0
     * .. count-1) as `count` separate tasks (into that worker's own queue, where
     * the runtime has one), then waits for all before it returns. The spawn
     * workload's twin from inside: what a task that fans out costs per spawn.
     * Optional: with NULL the workload spawn_inside fails with a message. */
    void (*spawn_wait_inside)(size_t count);
    /* The graph workloads (issue 30, graph_kernels.h), entered from the main
     * thread; optional (NULL: the workload fails with a message). Runs
     * bench_wave_block for every block, each after its upper and left
     * neighbours' ended. */
    void (*wavefront)(bench_wave *wave);
    /* Runs bench_chol_run for every task of graph, each after its
     * predecessors ended (the graph's edges, or dependencies the runtime
     * derives itself with the same effect). */
    void (*cholesky)(bench_chol *chol, const bench_chol_graph *graph);
} bench_runtime;

/* Runs the workload named by argv and prints its JSON line; the exit status
 * is 0, or 2 for bad arguments, 1 for a runtime failure. */
int bench_main(int argc, char **argv, const bench_runtime *runtime);

/* Prints "bench: <what>" to stderr and exits with status 1. */
void bench_fail(const char *what);

#ifdef __cplusplus
}
#endif

#endif
