// fib and tree on libblitz through C++20 coroutines (blz::co, blitz.hpp):
// each node spawns one child as a coroutine (co::spawn, a job of the pool)
// and awaits the other inline (co_await of a co::task, symmetric
// transfer), then awaits the spawned one, which suspends instead of
// waiting when it has not ended. No cutoff, as in blitzxx_bench: what it
// measures is the cost of a coroutine fork against pool.join's.
// usage: blitzco_bench WORKLOAD [threads=N] [key=value ...] (harness.h);
// the workloads here: fib, tree; the others fail with a message.
#include <blitz.hpp>

#include <cstdint>
#include <memory>

#include "harness.h"

namespace {

namespace co = blz::co;

std::unique_ptr<blz::pool> pool;

int start(unsigned threads) {
    try {
        pool = std::make_unique<blz::pool>(threads);
        return 0;
    } catch (const blz::error &) {
        return -1;
    }
}

void stop() { pool.reset(); }

co::task<uint64_t> fib_co(blz::pool &p, unsigned n) {
    if (n < 2) co_return n;
    co::spawned<uint64_t> first = co::spawn(p, fib_co(p, n - 1));
    const uint64_t second = co_await fib_co(p, n - 2);
    co_return co_await first + second;
}

uint64_t fib(unsigned n) { return co::spawn(*pool, fib_co(*pool, n)).get(); }

co::task<int64_t> tree_co(blz::pool &p, const bench_node *node) {
    if (node->left == nullptr || node->right == nullptr) co_return bench_tree_sum(node);
    co::spawned<int64_t> left = co::spawn(p, tree_co(p, node->left));
    const int64_t right = co_await tree_co(p, node->right);
    co_return node->value + co_await left + right;
}

co::task<int64_t> tree_reps(blz::pool &p, const bench_node *root, unsigned reps) {
    int64_t sum = 0;
    for (unsigned i = 0; i < reps; ++i) sum = co_await tree_co(p, root);
    co_return sum;
}

int64_t tree_sum(const bench_node *root, unsigned reps) { return co::spawn(*pool, tree_reps(*pool, root, reps)).get(); }

int read_stats(bench_pool_stats *out) {
    const blz_stats s = pool->stats();
    out->jobs_executed = s.jobs_executed;
    out->jobs_injected = s.jobs_injected;
    out->steals = s.steals;
    out->sleeps = s.sleeps;
    out->wakeups = s.wakeups;
    out->spurious_wakeups = s.spurious_wakeups;
    out->sleep_aborts = s.sleep_aborts;
    out->sleeping_now = s.sleeping_now;
    out->num_threads = s.num_threads;
    return 0;
}

}  // namespace

int main(int argc, char **argv) {
    bench_runtime runtime{};
    runtime.name = "libblitz C++ coroutines";
    runtime.start = start;
    runtime.stop = stop;
    runtime.fib = fib;
    runtime.tree_sum = tree_sum;
    runtime.stats = read_stats;
    return bench_main(argc, argv, &runtime);
}
