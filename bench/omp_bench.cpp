// The benchmark workloads on OpenMP tasks (g++ -fopenmp, libgomp), written
// the way an OpenMP user would: a parallel region of N threads whose single
// thread starts the recursion, `task` + `taskwait` for fork-join, worksharing
// loops for sum and map. OpenMP has no way to hand work to a team from a
// thread outside it, so "run on a worker" (round trip, wake, trickle) is a
// parallel region whose last thread runs the function while the caller
// waits at the region's end; the trickle is therefore synchronous.
// libgomp runs with its defaults (OMP_WAIT_POLICY unset: spin, then sleep).
// usage: omp_bench WORKLOAD [threads=N] [key=value ...]
#include <omp.h>

#include <cstdint>

#include "harness.h"

namespace {

int team = 1;

int start(unsigned threads) {
    team = static_cast<int>(threads);
    omp_set_dynamic(0);
    omp_set_num_threads(team);
    return 0;
}

void stop() {}

// Runs f on one thread of a team of `team` threads; the others take its tasks.
template <class F>
void in_team(F f) {
#pragma omp parallel num_threads(team)
#pragma omp single
    f();
}

uint64_t fib_rec(unsigned n) {
    if (n < 2) return n;
    uint64_t a = 0, b = 0;
#pragma omp task shared(a)
    a = fib_rec(n - 1);
    b = fib_rec(n - 2);
#pragma omp taskwait
    return a + b;
}

uint64_t fib(unsigned n) {
    uint64_t r = 0;
    in_team([&] { r = fib_rec(n); });
    return r;
}

int64_t tree_rec(const bench_node *node) {
    if (node->left == nullptr || node->right == nullptr) return bench_tree_sum(node);
    int64_t a = 0, b = 0;
#pragma omp task shared(a)
    a = tree_rec(node->left);
    b = tree_rec(node->right);
#pragma omp taskwait
    return node->value + a + b;
}

int64_t tree_sum(const bench_node *root, unsigned reps) {
    int64_t r = 0;
    in_team([&] {
        for (unsigned i = 0; i < reps; ++i) r = tree_rec(root);
    });
    return r;
}

double sum(const double *x, size_t n) {
    double s = 0;
#pragma omp parallel for reduction(+ : s) num_threads(team)
    for (size_t i = 0; i < n; ++i) s += x[i];
    return s;
}

void map(const double *x, double *y, size_t n) {
#pragma omp parallel for num_threads(team)
    for (size_t i = 0; i < n; ++i) y[i] = bench_map_one(x[i]);
}

void sort_rec(double *a, size_t n) {
    if (n <= BENCH_QS_GRAIN) {
        bench_qs_sequential(a, n);
        return;
    }
    size_t k = bench_qs_partition(a, n);
#pragma omp task
    sort_rec(a, k);
    sort_rec(a + k, n - k);
#pragma omp taskwait
}

void sort(double *a, size_t n) {
    in_team([&] { sort_rec(a, n); });
}

// Children [first, last) of parent, split in halves.
bench_uts_count uts_children(const bench_uts_node *parent, int first, int last, int max_depth) {
    if (last - first == 1) return bench_uts_count_child(parent, first, max_depth, uts_children);
    int mid = first + (last - first) / 2;
    bench_uts_count a{}, b{};
#pragma omp task shared(a)
    a = uts_children(parent, first, mid, max_depth);
    b = uts_children(parent, mid, last, max_depth);
#pragma omp taskwait
    bench_uts_add(&a, b);
    return a;
}

bench_uts_count uts(const bench_uts_node *root, int max_depth) {
    bench_uts_count r{};
    in_team([&] { r = bench_uts_count_node(root, max_depth, uts_children); });
    return r;
}

// msort: both halves sorted by a task and the caller, then merged so too.
void merge_rec(const bench_merge_job &job) {
    if (job.nx + job.ny <= BENCH_MERGE_GRAIN) {
        bench_merge_sequential(&job);
        return;
    }
    bench_merge_job left, right;
    bench_merge_split(&job, &left, &right);
#pragma omp task firstprivate(left)
    merge_rec(left);
    merge_rec(right);
#pragma omp taskwait
}

void msort_rec(uint64_t *a, uint64_t *b, size_t n, int to_b) {
    if (n <= BENCH_MSORT_GRAIN) {
        bench_msort_sequential(a, b, n, to_b);
        return;
    }
    size_t h = n / 2;
#pragma omp task
    msort_rec(a, b, h, !to_b);
    msort_rec(a + h, b + h, n - h, !to_b);
#pragma omp taskwait
    merge_rec(bench_msort_merge_job(a, b, n, to_b));
}

void msort(uint64_t *a, uint64_t *b, size_t n) {
    in_team([&] { msort_rec(a, b, n, 0); });
}

// matmul: three quadrants of C as tasks, the fourth by the caller, k halves in order.
void mm_rec(const bench_mm_job &job);

void mm_quadrant(const bench_mm_job &job, int q) {
    for (int k = 0; k < 2; ++k) mm_rec(bench_mm_part(&job, q, k));
}

void mm_rec(const bench_mm_job &job) {
    if (job.n <= BENCH_MM_BLOCK) {
        bench_mm_block(&job);
        return;
    }
    for (int q = 0; q < 3; ++q) {
#pragma omp task firstprivate(q)
        mm_quadrant(job, q);
    }
    mm_quadrant(job, 3);
#pragma omp taskwait
}

void matmul(double *c, const double *a, const double *b, size_t n) {
    in_team([&] { mm_rec(bench_mm_job{c, a, b, n, n}); });
}

// bfs: each level's frontier split in halves, one half a task.
void bfs_range(bench_bfs *search, size_t begin, size_t end) {
    if (end - begin <= BENCH_BFS_GRAIN) {
        bench_bfs_chunk(search, begin, end);
        return;
    }
    size_t mid = begin + (end - begin) / 2;
#pragma omp task
    bfs_range(search, begin, mid);
    bfs_range(search, mid, end);
#pragma omp taskwait
}

void bfs(bench_bfs *search) {
    in_team([search] {
        for (size_t n = bench_bfs_frontier_size(search); n > 0; n = bench_bfs_advance(search)) bfs_range(search, 0, n);
    });
}

// Also the spawn_inside workload: OpenMP has no outside thread, and the
// single thread that creates the tasks is a member of the team, so its
// spawns were always made from inside the pool.
void spawn_wait(size_t count) {
    in_team([count] {
        for (size_t i = 0; i < count; ++i) {
#pragma omp task firstprivate(i)
            bench_tiny_task(i);
        }
#pragma omp taskwait
    });
}

// The graph workloads: one thread of the team creates a task per block (or
// Cholesky task) in the sequential order, each with depend clauses on the
// data it reads and writes, as an OpenMP user writes them; libgomp derives
// the edges from the clauses at run time. A block depends on its
// neighbours' path counts (wavefront) and a Cholesky task on the first
// element of each tile (graph_kernels.h); the `no_*` variables stand in
// for an input a task does not have: no task writes them, so they order
// nothing. Two of them, never one address twice in a task's clauses:
// libgomp (Debian's gcc 12) then leaked a dependency record (LeakSanitizer
// saw 280 bytes per run). And the master thread creates the tasks, not
// `single`'s (in_team): libgomp leaks the dependency table of a task
// creator other than the master (LeakSanitizer, 1048 bytes in about half
// the 2-thread runs with `single`, none with the master). The
// pointers named only in depend clauses are [[maybe_unused]]: g++ 12 does
// not count a use there and warns.
uint64_t no_upper, no_left;
double no_first, no_second;

// Runs f on the team's master thread; the others take its tasks at the
// region's closing barrier, which also waits for every task.
template <class F>
void on_master(F f) {
#pragma omp parallel num_threads(team)
#pragma omp master
    f();
}

void wavefront(bench_wave *wave) {
    on_master([wave] {
        uint32_t n = wave->blocks;
        uint64_t *paths = wave->paths;
        for (uint32_t row = 0; row < n; ++row)
            for (uint32_t col = 0; col < n; ++col) {
                uint64_t *here = paths + static_cast<size_t>(row) * n + col;
                [[maybe_unused]] uint64_t *up = row > 0 ? here - n : &no_upper;
                [[maybe_unused]] uint64_t *left = col > 0 ? here - 1 : &no_left;
#pragma omp task depend(in : up[0], left[0]) depend(out : here[0]) firstprivate(row, col)
                bench_wave_block(wave, row, col);
            }
#pragma omp taskwait
    });
}

void cholesky(bench_chol *chol, const bench_chol_graph *graph) {
    on_master([chol, graph] {
        for (size_t t = 0; t < graph->num_tasks; ++t) {
            const bench_chol_task *task = &graph->tasks[t];
            double *inputs[2] = {&no_first, &no_second};
            bench_chol_inputs(chol, task, inputs);
            [[maybe_unused]] double *output = bench_chol_output(chol, task);
            [[maybe_unused]] double *first = inputs[0], *second = inputs[1];
#pragma omp task depend(in : first[0], second[0]) depend(inout : output[0]) firstprivate(task)
            bench_chol_run(chol, task);
        }
#pragma omp taskwait
    });
}

void call(bench_fn fn, void *arg) {
#pragma omp parallel num_threads(team)
    if (omp_get_thread_num() == omp_get_num_threads() - 1) fn(arg);
}

}  // namespace

int main(int argc, char **argv) {
    static const bench_runtime runtime = {
        "OpenMP", 0, start, stop, fib, tree_sum, sum, map, sort, uts, spawn_wait, call, call, nullptr, nullptr,
        msort, matmul, bfs, spawn_wait, wavefront, cholesky,
    };
    return bench_main(argc, argv, &runtime);
}
