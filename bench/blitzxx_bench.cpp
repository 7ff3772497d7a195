// The fork-join workloads on libblitz through its C++ header (blitz.hpp),
// written as a C++ user would: blz::pool, lambdas, pool.join and
// pool.call. Next to blitz_bench (the same workloads through the C ABI),
// it shows what the header's inline fork path costs (issue 31). Built a
// second time as blitzxx_free_bench (-DBENCH_FREE_JOIN): fib and tree by
// blz::join, the pool-free form, with the halves capturing by copy.
// usage: blitzxx_bench WORKLOAD [threads=N] [key=value ...] (harness.h);
// the workloads here: fib, tree, parfor (sum and map by
// pool.parallel_for), and the application workloads msort and bfs; the
// others fail with a message.
#include <cstdint>
#include <vector>

#include "blitzxx_pool.hpp"

namespace {

using bench_pool::pool;

uint64_t fib_rec(blz::pool &p, unsigned n) {
    if (n < 2) return n;
    auto [a, b] = p.join([&] { return fib_rec(p, n - 1); }, [&] { return fib_rec(p, n - 2); });
    return a + b;
}

// blz::join (the calling worker's pool, as rayon::join), each half
// capturing its values: blitzxx_free_bench (-DBENCH_FREE_JOIN).
uint64_t fib_free(unsigned n) {
    if (n < 2) return n;
    auto [a, b] = blz::join([n] { return fib_free(n - 1); }, [n] { return fib_free(n - 2); });
    return a + b;
}

uint64_t fib(unsigned n) {
#ifdef BENCH_FREE_JOIN
    return pool->call([n] { return fib_free(n); });
#else
    return pool->call([n] { return fib_rec(*pool, n); });
#endif
}

int64_t tree_rec(blz::pool &p, const bench_node *node) {
    if (node->left == nullptr || node->right == nullptr) return bench_tree_sum(node);
    auto [a, b] = p.join([&] { return tree_rec(p, node->left); }, [&] { return tree_rec(p, node->right); });
    return node->value + a + b;
}

int64_t tree_free(const bench_node *node) {
    if (node->left == nullptr || node->right == nullptr) return bench_tree_sum(node);
    auto [a, b] = blz::join([node] { return tree_free(node->left); }, [node] { return tree_free(node->right); });
    return node->value + a + b;
}

int64_t tree_sum(const bench_node *root, unsigned reps) {
    return pool->call([root, reps] {
        int64_t sum = 0;
#ifdef BENCH_FREE_JOIN
        for (unsigned i = 0; i < reps; ++i) sum = tree_free(root);
#else
        for (unsigned i = 0; i < reps; ++i) sum = tree_rec(*pool, root);
#endif
        return sum;
    });
}

double sum(const double *x, size_t n) {
    std::vector<double> partials(pool->num_threads() * 8, 0.0);  // a cache line per worker
    pool->parallel_for(0, n, [&](size_t lo, size_t hi) {
        double s = 0;
        for (size_t i = lo; i < hi; ++i) s += x[i];
        partials[static_cast<size_t>(pool->worker_index()) * 8] += s;
    });
    double total = 0;
    for (double v : partials) total += v;
    return total;
}

void map(const double *x, double *y, size_t n) {
    pool->parallel_for(0, n, [&](size_t lo, size_t hi) {
        for (size_t i = lo; i < hi; ++i) y[i] = bench_map_one(x[i]);
    });
}

void merge_rec(blz::pool &p, const bench_merge_job &job) {
    if (job.nx + job.ny <= BENCH_MERGE_GRAIN) {
        bench_merge_sequential(&job);
        return;
    }
    bench_merge_job left, right;
    bench_merge_split(&job, &left, &right);
    p.join([&] { merge_rec(p, left); }, [&] { merge_rec(p, right); });
}

void msort_rec(blz::pool &p, uint64_t *a, uint64_t *b, size_t n, int to_b) {
    if (n <= BENCH_MSORT_GRAIN) {
        bench_msort_sequential(a, b, n, to_b);
        return;
    }
    const size_t h = n / 2;
    p.join([&] { msort_rec(p, a, b, h, !to_b); }, [&] { msort_rec(p, a + h, b + h, n - h, !to_b); });
    merge_rec(p, bench_msort_merge_job(a, b, n, to_b));
}

void msort(uint64_t *a, uint64_t *b, size_t n) {
    pool->call([=] { msort_rec(*pool, a, b, n, 0); });
}

void bfs_range(blz::pool &p, bench_bfs *search, size_t begin, size_t end) {
    if (end - begin <= BENCH_BFS_GRAIN) {
        bench_bfs_chunk(search, begin, end);
        return;
    }
    const size_t mid = begin + (end - begin) / 2;
    p.join([&] { bfs_range(p, search, begin, mid); }, [&] { bfs_range(p, search, mid, end); });
}

void bfs(bench_bfs *search) {
    pool->call([search] {
        for (size_t n = bench_bfs_frontier_size(search); n > 0; n = bench_bfs_advance(search)) {
            bfs_range(*pool, search, 0, n);
        }
    });
}

}  // namespace

int main(int argc, char **argv) {
    bench_runtime runtime = bench_pool::runtime("libblitz C++");
    runtime.fib = fib;
    runtime.tree_sum = tree_sum;
    runtime.sum = sum;
    runtime.map = map;
    runtime.msort = msort;
    runtime.bfs = bfs;
    return bench_main(argc, argv, &runtime);
}
