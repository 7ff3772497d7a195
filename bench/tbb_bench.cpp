// The benchmark workloads on oneTBB (Debian's libtbb-dev), written the way
// a TBB user would: a task_arena of N threads (the calling thread takes one
// of its slots, as TBB's external threads do) under a global_control that
// allows N, fork-join by parallel_invoke, loops by parallel_for and
// parallel_reduce, spawns by task_group, and work sent from outside by
// task_arena::enqueue. usage: tbb_bench WORKLOAD [threads=N] [key=value ...]
#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/flow_graph.h>
#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/parallel_invoke.h>
#include <oneapi/tbb/parallel_reduce.h>
#include <oneapi/tbb/task_arena.h>
#include <oneapi/tbb/task_group.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>

#include "harness.h"

namespace {

std::unique_ptr<tbb::global_control> control;
std::unique_ptr<tbb::task_arena> arena;

int start(unsigned threads) {
    control = std::make_unique<tbb::global_control>(tbb::global_control::max_allowed_parallelism, threads);
    arena = std::make_unique<tbb::task_arena>(static_cast<int>(threads));
    arena->initialize();
    return 0;
}

void stop() {
    arena.reset();
    control.reset();
}

uint64_t fib_rec(unsigned n) {
    if (n < 2) return n;
    uint64_t a = 0, b = 0;
    tbb::parallel_invoke([&] { a = fib_rec(n - 1); }, [&] { b = fib_rec(n - 2); });
    return a + b;
}

uint64_t fib(unsigned n) {
    uint64_t r = 0;
    arena->execute([&] { r = fib_rec(n); });
    return r;
}

int64_t tree_rec(const bench_node *node) {
    if (node->left == nullptr || node->right == nullptr) return bench_tree_sum(node);
    int64_t a = 0, b = 0;
    tbb::parallel_invoke([&] { a = tree_rec(node->left); }, [&] { b = tree_rec(node->right); });
    return node->value + a + b;
}

int64_t tree_sum(const bench_node *root, unsigned reps) {
    int64_t r = 0;
    arena->execute([&] {
        for (unsigned i = 0; i < reps; ++i) r = tree_rec(root);
    });
    return r;
}

double sum(const double *x, size_t n) {
    double r = 0;
    arena->execute([&] {
        r = tbb::parallel_reduce(
            tbb::blocked_range<size_t>(0, n), 0.0,
            [x](const tbb::blocked_range<size_t> &range, double s) {
                for (size_t i = range.begin(); i != range.end(); ++i) s += x[i];
                return s;
            },
            std::plus<double>());
    });
    return r;
}

void map(const double *x, double *y, size_t n) {
    arena->execute([&] {
        tbb::parallel_for(tbb::blocked_range<size_t>(0, n), [x, y](const tbb::blocked_range<size_t> &range) {
            for (size_t i = range.begin(); i != range.end(); ++i) y[i] = bench_map_one(x[i]);
        });
    });
}

void sort_rec(double *a, size_t n) {
    if (n <= BENCH_QS_GRAIN) {
        bench_qs_sequential(a, n);
        return;
    }
    size_t k = bench_qs_partition(a, n);
    tbb::parallel_invoke([=] { sort_rec(a, k); }, [=] { sort_rec(a + k, n - k); });
}

void sort(double *a, size_t n) {
    arena->execute([&] { sort_rec(a, n); });
}

// Children [first, last) of parent, split in halves.
bench_uts_count uts_children(const bench_uts_node *parent, int first, int last, int max_depth) {
    if (last - first == 1) return bench_uts_count_child(parent, first, max_depth, uts_children);
    int mid = first + (last - first) / 2;
    bench_uts_count a{}, b{};
    tbb::parallel_invoke([&] { a = uts_children(parent, first, mid, max_depth); },
                         [&] { b = uts_children(parent, mid, last, max_depth); });
    bench_uts_add(&a, b);
    return a;
}

bench_uts_count uts(const bench_uts_node *root, int max_depth) {
    bench_uts_count r{};
    arena->execute([&] { r = bench_uts_count_node(root, max_depth, uts_children); });
    return r;
}

// msort: both halves sorted by parallel_invoke, then merged by parallel_invoke.
void merge_rec(const bench_merge_job &job) {
    if (job.nx + job.ny <= BENCH_MERGE_GRAIN) {
        bench_merge_sequential(&job);
        return;
    }
    bench_merge_job left, right;
    bench_merge_split(&job, &left, &right);
    tbb::parallel_invoke([&] { merge_rec(left); }, [&] { merge_rec(right); });
}

void msort_rec(uint64_t *a, uint64_t *b, size_t n, int to_b) {
    if (n <= BENCH_MSORT_GRAIN) {
        bench_msort_sequential(a, b, n, to_b);
        return;
    }
    size_t h = n / 2;
    tbb::parallel_invoke([=] { msort_rec(a, b, h, !to_b); }, [=] { msort_rec(a + h, b + h, n - h, !to_b); });
    merge_rec(bench_msort_merge_job(a, b, n, to_b));
}

void msort(uint64_t *a, uint64_t *b, size_t n) {
    arena->execute([&] { msort_rec(a, b, n, 0); });
}

// matmul: the four quadrants of C by one parallel_invoke, k halves in order.
void mm_rec(const bench_mm_job &job) {
    if (job.n <= BENCH_MM_BLOCK) {
        bench_mm_block(&job);
        return;
    }
    auto quadrant = [&job](int q) {
        for (int k = 0; k < 2; ++k) mm_rec(bench_mm_part(&job, q, k));
    };
    tbb::parallel_invoke([&] { quadrant(0); }, [&] { quadrant(1); }, [&] { quadrant(2); }, [&] { quadrant(3); });
}

void matmul(double *c, const double *a, const double *b, size_t n) {
    arena->execute([&] { mm_rec(bench_mm_job{c, a, b, n, n}); });
}

// bfs: each level's frontier split in halves by parallel_invoke.
void bfs_range(bench_bfs *search, size_t begin, size_t end) {
    if (end - begin <= BENCH_BFS_GRAIN) {
        bench_bfs_chunk(search, begin, end);
        return;
    }
    size_t mid = begin + (end - begin) / 2;
    tbb::parallel_invoke([=] { bfs_range(search, begin, mid); }, [=] { bfs_range(search, mid, end); });
}

void bfs(bench_bfs *search) {
    arena->execute([&] {
        for (size_t n = bench_bfs_frontier_size(search); n > 0; n = bench_bfs_advance(search)) bfs_range(search, 0, n);
    });
}

// Also the spawn_inside workload: execute makes the calling thread one of the
// arena's threads, with a task pool of its own, so task_group::run here
// already spawns from inside the pool, into that thread's own pool, and wait
// runs the tasks there. The spawn workload measured this all along.
void spawn_wait(size_t count) {
    arena->execute([&] {
        tbb::task_group group;
        for (size_t i = 0; i < count; ++i) group.run([i] { bench_tiny_task(i); });
        group.wait();
    });
}

// Completed calls; lives forever, so a task may still notify after the
// caller returned.
std::atomic<uint64_t> calls_done{0};

void call(bench_fn fn, void *arg) {
    uint64_t before = calls_done.load(std::memory_order_relaxed);  // relaxed: only this thread calls
    arena->enqueue([fn, arg] {
        fn(arg);
        calls_done.fetch_add(1, std::memory_order_release);  // release: the caller reads fn's effects
        calls_done.notify_one();
    });
    calls_done.wait(before, std::memory_order_acquire);  // acquire: pairs with the task's release
}

void post(bench_fn fn, void *arg) {
    arena->enqueue([fn, arg] { fn(arg); });
}

// The graph workloads on a flow graph, as a TBB user builds a dependency
// graph: a continue_node per block or Cholesky task, an edge per
// dependency, a message into each node without predecessors, then
// wait_for_all. The graph is built anew on every run (libblitz and OpenMP
// create their tasks on every run too), inside the arena, and the building
// is timed.
using node = tbb::flow::continue_node<tbb::flow::continue_msg>;

void wavefront(bench_wave *wave) {
    arena->execute([wave] {
        uint32_t n = wave->blocks;
        tbb::flow::graph g;
        std::deque<node> nodes;  // a deque: nodes are neither copied nor moved once made
        for (uint32_t row = 0; row < n; ++row)
            for (uint32_t col = 0; col < n; ++col) {
                node &here = nodes.emplace_back(g, [wave, row, col](const tbb::flow::continue_msg &) {
                    bench_wave_block(wave, row, col);
                });
                if (row > 0) tbb::flow::make_edge(nodes[static_cast<size_t>(row - 1) * n + col], here);
                if (col > 0) tbb::flow::make_edge(nodes[static_cast<size_t>(row) * n + col - 1], here);
            }
        nodes.front().try_put(tbb::flow::continue_msg());
        g.wait_for_all();
    });
}

void cholesky(bench_chol *chol, const bench_chol_graph *graph) {
    arena->execute([chol, graph] {
        tbb::flow::graph g;
        std::deque<node> nodes;
        for (size_t t = 0; t < graph->num_tasks; ++t) {
            const bench_chol_task *task = &graph->tasks[t];
            node &here = nodes.emplace_back(g, [chol, task](const tbb::flow::continue_msg &) {
                bench_chol_run(chol, task);
            });
            for (unsigned p = 0; p < task->num_predecessors; ++p)
                tbb::flow::make_edge(nodes[task->predecessors[p]], here);
        }
        for (size_t t = 0; t < graph->num_tasks; ++t)
            if (graph->tasks[t].num_predecessors == 0) nodes[t].try_put(tbb::flow::continue_msg());
        g.wait_for_all();
    });
}

}  // namespace

int main(int argc, char **argv) {
    static const bench_runtime runtime = {
        "oneTBB", 0, start, stop, fib, tree_sum, sum, map, sort, uts, spawn_wait, call, post, nullptr, nullptr,
        msort, matmul, bfs, spawn_wait, wavefront, cholesky,
    };
    return bench_main(argc, argv, &runtime);
}
