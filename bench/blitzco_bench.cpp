// fib and tree on libblitz through C++20 coroutines (blz::co, blitz.hpp):
// each node spawns one child as a coroutine (co::spawn, a job of the pool)
// and awaits the other inline (co_await of a co::task, symmetric
// transfer), then awaits the spawned one, which suspends instead of
// waiting when it has not ended. No cutoff, as in blitzxx_bench: what it
// measures is the cost of a coroutine fork against pool.join's.
// The graph workloads (bench/graph.py) as a coroutine user writes them:
// a coroutine per block or Cholesky task that co_awaits its predecessors'
// events (co::after), runs its kernel and sets its own event.
// usage: blitzco_bench WORKLOAD [threads=N] [key=value ...] (harness.h);
// the workloads here: fib, tree, wavefront, cholesky; the others fail
// with a message.
#include <cstdint>
#include <vector>

#include "blitzxx_pool.hpp"

namespace {

namespace co = blz::co;
using bench_pool::pool;

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

// ---- the graph workloads: a coroutine per task, an event per task ----
//
// Task t's coroutine co_awaits the events of the tasks it runs after (an
// event set already does not suspend; an unset one queues the coroutine's
// resumption with the event as predecessor, so no thread waits), runs its
// kernel and sets its own event. One coroutine on the pool spawns them all
// in the sequential order and co_awaits them with when_all; the events are
// destroyed once every await has returned.

void check(blz_status status, const char *what) {
    if (status != BLZ_OK) bench_fail(what);
}

class task_events {
public:
    explicit task_events(size_t count) : events_(count) {
        for (blz_event *&e : events_) check(blz_event_create(&e), "blz_event_create");
    }
    ~task_events() {
        for (blz_event *e : events_) (void)blz_event_destroy(e);
    }
    task_events(const task_events &) = delete;
    task_events &operator=(const task_events &) = delete;

    blz_event *operator[](size_t task) const { return events_[task]; }

private:
    std::vector<blz_event *> events_;
};

co::task<void> wave_block(bench_wave *wave, task_events &events, uint32_t row, uint32_t col) {
    const size_t n = wave->blocks, here = row * n + col;
    if (row > 0) check(co_await co::after(events[here - n]), "co::after");
    if (col > 0) check(co_await co::after(events[here - 1]), "co::after");
    bench_wave_block(wave, row, col);
    check(blz_event_set(events[here], BLZ_OK), "blz_event_set");
}

co::task<void> wave_all(bench_wave *wave, task_events &events) {
    std::vector<co::spawned<void>> blocks;
    blocks.reserve(static_cast<size_t>(wave->blocks) * wave->blocks);
    for (uint32_t row = 0; row < wave->blocks; ++row)
        for (uint32_t col = 0; col < wave->blocks; ++col)
            blocks.push_back(co::spawn(*pool, wave_block(wave, events, row, col)));
    co_await co::when_all(std::move(blocks));
}

void wavefront(bench_wave *wave) {
    task_events events(static_cast<size_t>(wave->blocks) * wave->blocks);
    co::spawn(*pool, wave_all(wave, events)).get();
}

co::task<void> chol_task(bench_chol *chol, const bench_chol_graph *graph, task_events &events, size_t t) {
    const bench_chol_task &task = graph->tasks[t];
    for (unsigned i = 0; i < task.num_predecessors; ++i)
        check(co_await co::after(events[task.predecessors[i]]), "co::after");
    bench_chol_run(chol, &task);
    check(blz_event_set(events[t], BLZ_OK), "blz_event_set");
}

co::task<void> chol_all(bench_chol *chol, const bench_chol_graph *graph, task_events &events) {
    std::vector<co::spawned<void>> tasks;
    tasks.reserve(graph->num_tasks);
    for (size_t t = 0; t < graph->num_tasks; ++t) tasks.push_back(co::spawn(*pool, chol_task(chol, graph, events, t)));
    co_await co::when_all(std::move(tasks));
}

void cholesky(bench_chol *chol, const bench_chol_graph *graph) {
    task_events events(graph->num_tasks);
    co::spawn(*pool, chol_all(chol, graph, events)).get();
}

}  // namespace

int main(int argc, char **argv) {
    bench_runtime runtime = bench_pool::runtime("libblitz C++ coroutines");
    runtime.fib = fib;
    runtime.tree_sum = tree_sum;
    runtime.wavefront = wavefront;
    runtime.cholesky = cholesky;
    return bench_main(argc, argv, &runtime);
}
