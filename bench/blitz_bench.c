/*
 * The benchmark workloads on libblitz, written in C against include/blitz.h
 * as a user would write them. usage: blitz_bench WORKLOAD [threads=N] [key=value ...]
 * (see harness.h; bench/run.py drives it).
 */
#include <blitz.h>

#include <stdio.h>
#include <stdlib.h>

#include "blitz_stats.h"
#include "harness.h"

/* blitz_inline_bench is this file built with BENCH_INLINE_FORK: the same
 * workloads through blz_fork_join_inline, the fork-join blitz.h compiles
 * into its caller (bench/forkpath.py's "libblitz C inline"). */
#ifdef BENCH_INLINE_FORK
#define FORK_JOIN blz_fork_join_inline
#define IMPL_NAME "libblitz C inline"
#else
#define FORK_JOIN blz_fork_join
#define IMPL_NAME "libblitz"
#endif

static blz_pool *pool;

static void check(blz_status status, const char *what) {
    if (status == BLZ_OK) return;
    fprintf(stderr, "bench: %s: %s\n", what, blz_status_string(status));
    exit(1);
}

static int start(unsigned threads) {
    blz_pool_config config;
    blz_pool_config_init(&config);
    config.num_threads = threads;
    return blz_pool_create(&config, &pool) == BLZ_OK ? 0 : -1;
}

static void stop(void) { check(blz_pool_destroy(pool), "blz_pool_destroy"); }

/* ---- fib: every call above fib(1) is a blz_fork_join ---- */

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
    check(FORK_JOIN(pool, fib_task, &left, fib_task, &right), "blz_fork_join");
    a->result = left.result + right.result;
}

static uint64_t fib(unsigned n) {
    fib_args a = {n, 0};
    check(blz_call(pool, fib_task, &a), "blz_call");
    return a.result;
}

/* ---- tree sum: a fork-join at every node with two children ---- */

typedef struct tree_args {
    const bench_node *node;
    int64_t sum;
} tree_args;

static void tree_task(void *p) {
    tree_args *a = p;
    const bench_node *node = a->node;
    if (node->left == NULL || node->right == NULL) {
        a->sum = bench_tree_sum(node);
        return;
    }
    tree_args left = {node->left, 0}, right = {node->right, 0};
    check(FORK_JOIN(pool, tree_task, &left, tree_task, &right), "blz_fork_join");
    a->sum = node->value + left.sum + right.sum;
}

typedef struct tree_reps {
    const bench_node *root;
    unsigned reps;
    int64_t sum;
} tree_reps;

static void tree_reps_task(void *p) {
    tree_reps *a = p;
    for (unsigned i = 0; i < a->reps; ++i) {
        tree_args root = {a->root, 0};
        tree_task(&root);
        a->sum = root.sum;
    }
}

static int64_t tree_sum(const bench_node *root, unsigned reps) {
    tree_reps a = {root, reps, 0};
    check(blz_call(pool, tree_reps_task, &a), "blz_call");
    return a.sum;
}

/* ---- parallel_for: sum (per-worker partial sums) and map ---- */

typedef struct partial {
    double value;
    char pad[64 - sizeof(double)];  /* one cache line per worker */
} partial;

typedef struct sum_args {
    const double *x;
    partial *partials;
} sum_args;

static void sum_body(void *p, size_t begin, size_t end) {
    sum_args *a = p;
    double s = 0;
    for (size_t i = begin; i < end; ++i) s += a->x[i];
    a->partials[blz_worker_index(pool)].value += s;
}

static double sum(const double *x, size_t n) {
    uint32_t workers = blz_pool_num_threads(pool);
    partial *partials = calloc(workers, sizeof *partials);
    if (partials == NULL) bench_fail("out of memory");
    sum_args a = {x, partials};
    check(blz_parallel_for(pool, 0, n, 0, sum_body, &a), "blz_parallel_for");
    double total = 0;
    for (uint32_t w = 0; w < workers; ++w) total += partials[w].value;
    free(partials);
    return total;
}

typedef struct map_args {
    const double *x;
    double *y;
} map_args;

static void map_body(void *p, size_t begin, size_t end) {
    map_args *a = p;
    for (size_t i = begin; i < end; ++i) a->y[i] = bench_map_one(a->x[i]);
}

static void map(const double *x, double *y, size_t n) {
    map_args a = {x, y};
    check(blz_parallel_for(pool, 0, n, 0, map_body, &a), "blz_parallel_for");
}

/* ---- quicksort: the two parts of each partition fork ---- */

typedef struct sort_args {
    double *a;
    size_t n;
} sort_args;

static void sort_task(void *p) {
    sort_args *s = p;
    if (s->n <= BENCH_QS_GRAIN) {
        bench_qs_sequential(s->a, s->n);
        return;
    }
    size_t k = bench_qs_partition(s->a, s->n);
    sort_args left = {s->a, k}, right = {s->a + k, s->n - k};
    check(FORK_JOIN(pool, sort_task, &left, sort_task, &right), "blz_fork_join");
}

static void sort(double *a, size_t n) {
    sort_args s = {a, n};
    check(blz_call(pool, sort_task, &s), "blz_call");
}

/* ---- UTS: each node's children split in halves by fork-join ---- */

typedef struct uts_args {
    const bench_uts_node *parent;
    int first, last;  /* children [first, last) of parent */
    int max_depth;
    bench_uts_count count;
} uts_args;

static bench_uts_count uts_children(const bench_uts_node *parent, int first, int last, int max_depth);

static void uts_children_task(void *p) {
    uts_args *a = p;
    a->count = uts_children(a->parent, a->first, a->last, a->max_depth);
}

static bench_uts_count uts_children(const bench_uts_node *parent, int first, int last, int max_depth) {
    if (last - first == 1) return bench_uts_count_child(parent, first, max_depth, uts_children);
    int mid = first + (last - first) / 2;
    uts_args left = {parent, first, mid, max_depth, {0, 0}};
    uts_args right = {parent, mid, last, max_depth, {0, 0}};
    check(FORK_JOIN(pool, uts_children_task, &left, uts_children_task, &right), "blz_fork_join");
    bench_uts_add(&left.count, right.count);
    return left.count;
}

typedef struct uts_root_args {
    const bench_uts_node *root;
    int max_depth;
    bench_uts_count count;
} uts_root_args;

static void uts_root_task(void *p) {
    uts_root_args *a = p;
    a->count = bench_uts_count_node(a->root, a->max_depth, uts_children);
}

static bench_uts_count uts(const bench_uts_node *root, int max_depth) {
    uts_root_args a = {root, max_depth, {0, 0}};
    check(blz_call(pool, uts_root_task, &a), "blz_call");
    return a.count;
}

/* ---- msort: both halves sorted by fork-join, then merged by fork-join ---- */

static void merge_task(void *p) {
    const bench_merge_job *job = p;
    if (job->nx + job->ny <= BENCH_MERGE_GRAIN) {
        bench_merge_sequential(job);
        return;
    }
    bench_merge_job left, right;
    bench_merge_split(job, &left, &right);
    check(FORK_JOIN(pool, merge_task, &left, merge_task, &right), "blz_fork_join");
}

typedef struct msort_args {
    uint64_t *a, *b;
    size_t n;
    int to_b;
} msort_args;

static void msort_task(void *p) {
    const msort_args *s = p;
    if (s->n <= BENCH_MSORT_GRAIN) {
        bench_msort_sequential(s->a, s->b, s->n, s->to_b);
        return;
    }
    size_t h = s->n / 2;
    msort_args left = {s->a, s->b, h, !s->to_b}, right = {s->a + h, s->b + h, s->n - h, !s->to_b};
    check(FORK_JOIN(pool, msort_task, &left, msort_task, &right), "blz_fork_join");
    bench_merge_job job = bench_msort_merge_job(s->a, s->b, s->n, s->to_b);
    merge_task(&job);
}

static void msort(uint64_t *a, uint64_t *b, size_t n) {
    msort_args s = {a, b, n, 0};
    check(blz_call(pool, msort_task, &s), "blz_call");
}

/* ---- matmul: the four quadrants of C by fork-join, k halves in order ---- */

typedef struct mm_quadrant {
    const bench_mm_job *job;
    int q;
} mm_quadrant;

static void mm_task(void *p);

static void mm_quadrant_task(void *p) {
    const mm_quadrant *quadrant = p;
    for (int k = 0; k < 2; ++k) {
        bench_mm_job part = bench_mm_part(quadrant->job, quadrant->q, k);
        mm_task(&part);
    }
}

/* Quadrants q[0] and q[1] of one row of C. */
static void mm_row_task(void *p) {
    mm_quadrant *q = p;
    check(FORK_JOIN(pool, mm_quadrant_task, &q[0], mm_quadrant_task, &q[1]), "blz_fork_join");
}

static void mm_task(void *p) {
    const bench_mm_job *job = p;
    if (job->n <= BENCH_MM_BLOCK) {
        bench_mm_block(job);
        return;
    }
    mm_quadrant q[4] = {{job, 0}, {job, 1}, {job, 2}, {job, 3}};
    check(FORK_JOIN(pool, mm_row_task, &q[0], mm_row_task, &q[2]), "blz_fork_join");
}

static void matmul(double *c, const double *a, const double *b, size_t n) {
    bench_mm_job job = {c, a, b, n, n};
    check(blz_call(pool, mm_task, &job), "blz_call");
}

/* ---- bfs: each level's frontier split in halves by fork-join ---- */

typedef struct bfs_range {
    bench_bfs *search;
    size_t begin, end;
} bfs_range;

static void bfs_range_task(void *p) {
    const bfs_range *r = p;
    if (r->end - r->begin <= BENCH_BFS_GRAIN) {
        bench_bfs_chunk(r->search, r->begin, r->end);
        return;
    }
    size_t mid = r->begin + (r->end - r->begin) / 2;
    bfs_range left = {r->search, r->begin, mid}, right = {r->search, mid, r->end};
    check(FORK_JOIN(pool, bfs_range_task, &left, bfs_range_task, &right), "blz_fork_join");
}

static void bfs_task(void *p) {
    bench_bfs *search = p;
    for (size_t n = bench_bfs_frontier_size(search); n > 0; n = bench_bfs_advance(search)) {
        bfs_range all = {search, 0, n};
        bfs_range_task(&all);
    }
}

static void bfs(bench_bfs *search) { check(blz_call(pool, bfs_task, search), "blz_call"); }

/* ---- spawns, calls and posts from the main thread ---- */

static void tiny_task(void *p) { bench_tiny_task((size_t)(uintptr_t)p); }

static void spawn_wait(size_t count) {
    blz_group *group;
    check(blz_group_create(pool, &group), "blz_group_create");
    for (size_t i = 0; i < count; ++i) check(blz_group_spawn(group, tiny_task, (void *)(uintptr_t)i), "blz_group_spawn");
    check(blz_group_destroy(group), "blz_group_destroy");
}

static void call(bench_fn fn, void *arg) { check(blz_call(pool, fn, arg), "blz_call"); }

static void post(bench_fn fn, void *arg) { check(blz_spawn(pool, fn, arg, NULL), "blz_spawn"); }

/* ---- spawns from a worker: spawn_wait's calls made inside blz_call. On a
 * worker blz_group_spawn pushes to that worker's own deque, and the group's
 * destroy waits cooperatively (the worker runs its own tasks while the
 * others steal from it) ---- */

static void spawn_inside_task(void *p) { spawn_wait(*(const size_t *)p); }

static void spawn_wait_inside(size_t count) { check(blz_call(pool, spawn_inside_task, &count), "blz_call"); }

static int read_stats(bench_pool_stats *out) { return bench_read_blitz_stats(pool, out); }

static int all_asleep(void) {
    bench_pool_stats s;
    return read_stats(&s) == 0 && s.sleeping_now == s.num_threads;
}

/* ---- the graph workloads: tasks that name their predecessors ----
 *
 * One job entered by blz_call builds the graph, then starts it: it
 * spawns every task with blz_spawn_ex, naming the handles of the tasks it
 * runs after (opts.after_tasks), and the tasks without predecessors after
 * a `start` event, which it sets once the last task is spawned (as a flow
 * graph is built, then given its first message). A task is queued only
 * when its last predecessor ended, and nothing waits on a worker. Without
 * the start event the graph runs while it is built, and on 2 workers the
 * builder and the worker that runs the tasks then pass every task's
 * memory back and forth (bench/findings.md, issue 30).
 * A handle is kept until its last successor has been spawned (the spawn
 * reads the predecessors' handles during the call only), then detached;
 * the tasks without successors are joined, which the job does on its
 * worker, running other tasks meanwhile. Every task is an ancestor of a
 * joined one, so when the joins return every task has ended. */

static blz_task *spawn_after(blz_fn fn, void *arg, blz_task *const *after, size_t num_after, blz_event *start) {
    blz_spawn_options opts;
    blz_spawn_options_init(&opts);
    opts.after_tasks = after;
    opts.num_after_tasks = num_after;
    if (num_after == 0) {
        opts.after_events = &start;
        opts.num_after_events = 1;
    }
    blz_task *task;
    check(blz_spawn_ex(pool, fn, arg, &opts, &task), "blz_spawn_ex");
    return task;
}

static blz_event *new_event(void) {
    blz_event *event;
    check(blz_event_create(&event), "blz_event_create");
    return event;
}

static void start_graph(blz_event *start) {
    check(blz_event_set(start, BLZ_OK), "blz_event_set");
    check(blz_event_destroy(start), "blz_event_destroy");
}

typedef struct wave_block_arg {
    bench_wave *wave;
    uint32_t row, col;
} wave_block_arg;

static void wave_block_task(void *p) {
    const wave_block_arg *a = p;
    bench_wave_block(a->wave, a->row, a->col);
}

static void *alloc_array(size_t count, size_t size) {
    void *p = calloc(count ? count : 1, size);
    if (p == NULL) bench_fail("out of memory for the graph");
    return p;
}

/* Row by row; two rows of handles: block (r, c)'s successors are (r, c+1),
 * spawned next, and (r+1, c), spawned one row later. */
static void wave_spawn_all(void *p) {
    bench_wave *wave = p;
    uint32_t n = wave->blocks;
    wave_block_arg *args = alloc_array((size_t)n * n, sizeof *args);
    blz_task **above = alloc_array(n, sizeof *above), **here = alloc_array(n, sizeof *here);
    blz_event *start = new_event();
    for (uint32_t row = 0; row < n; ++row) {
        for (uint32_t col = 0; col < n; ++col) {
            blz_task *after[2];
            size_t count = 0;
            if (row > 0) after[count++] = above[col];
            if (col > 0) after[count++] = here[col - 1];
            wave_block_arg *arg = &args[(size_t)row * n + col];
            *arg = (wave_block_arg){wave, row, col};
            here[col] = spawn_after(wave_block_task, arg, after, count, start);
            /* (row-1, col)'s last successor is spawned; in the last row, (row, col-1)'s too. */
            if (row > 0) check(blz_task_detach(above[col]), "blz_task_detach");
            if (row == n - 1 && col > 0) check(blz_task_detach(here[col - 1]), "blz_task_detach");
        }
        blz_task **swap = above;
        above = here;
        here = swap;
    }
    start_graph(start);
    check(blz_join(above[n - 1]), "blz_join"); /* the last block: every other is its ancestor */
    free(above);
    free(here);
    free(args);
}

static void wavefront(bench_wave *wave) { check(blz_call(pool, wave_spawn_all, wave), "blz_call"); }

typedef struct chol_task_arg {
    bench_chol *chol;
    const bench_chol_task *task;
} chol_task_arg;

typedef struct chol_run {
    bench_chol *chol;
    const bench_chol_graph *graph;
} chol_run;

static void chol_task(void *p) {
    const chol_task_arg *a = p;
    bench_chol_run(a->chol, a->task);
}

/* In the graph's (sequential) order; a task's handle is detached once its
 * last successor, the highest-numbered, is spawned; the sinks are joined. */
static void chol_spawn_all(void *p) {
    const chol_run *run = p;
    const bench_chol_graph *g = run->graph;
    chol_task_arg *args = alloc_array(g->num_tasks, sizeof *args);
    blz_task **handles = alloc_array(g->num_tasks, sizeof *handles);
    blz_event *start = new_event();
    for (size_t t = 0; t < g->num_tasks; ++t) {
        const bench_chol_task *task = &g->tasks[t];
        blz_task *after[BENCH_CHOL_MAX_PREDECESSORS];
        for (unsigned i = 0; i < task->num_predecessors; ++i) after[i] = handles[task->predecessors[i]];
        args[t] = (chol_task_arg){run->chol, task};
        handles[t] = spawn_after(chol_task, &args[t], after, task->num_predecessors, start);
        for (unsigned i = 0; i < task->num_predecessors; ++i) {
            uint32_t pred = task->predecessors[i];
            if (g->successors[g->successor_start[pred] + g->num_successors[pred] - 1] == t)
                check(blz_task_detach(handles[pred]), "blz_task_detach");
        }
    }
    start_graph(start);
    for (size_t t = 0; t < g->num_tasks; ++t)
        if (g->num_successors[t] == 0) check(blz_join(handles[t]), "blz_join");
    free(handles);
    free(args);
}

static void cholesky(bench_chol *chol, const bench_chol_graph *graph) {
    chol_run run = {chol, graph};
    check(blz_call(pool, chol_spawn_all, &run), "blz_call");
}

int main(int argc, char **argv) {
    static const bench_runtime runtime = {
        IMPL_NAME, 0, start, stop, fib, tree_sum, sum, map, sort, uts, spawn_wait, call, post, all_asleep,
        read_stats, msort, matmul, bfs, spawn_wait_inside, wavefront, cholesky,
    };
    return bench_main(argc, argv, &runtime);
}
