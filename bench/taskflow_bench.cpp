// The graph workloads (issue 30) on Taskflow (bench/third_party/taskflow,
// header-only), written as a Taskflow user would: a tf::Executor of N
// workers, a tf::Taskflow with a task per block or Cholesky task and
// `precede` for each dependency, run once and waited for from the main
// thread (which, as with libblitz, is not one of the N). The taskflow is
// built anew on every run and the building is timed, as for oneTBB's flow
// graph (bench/tbb_bench.cpp). Only the graph workloads: the others fail
// with a message. usage: taskflow_bench WORKLOAD [threads=N] [key=value ...]
#include <taskflow/taskflow.hpp>

#include <cstdint>
#include <memory>
#include <vector>

#include "harness.h"

namespace {

std::unique_ptr<tf::Executor> executor;

int start(unsigned threads) {
    executor = std::make_unique<tf::Executor>(threads);
    return 0;
}

void stop() { executor.reset(); }

void wavefront(bench_wave *wave) {
    uint32_t n = wave->blocks;
    tf::Taskflow flow;
    std::vector<tf::Task> tasks;
    tasks.reserve(static_cast<size_t>(n) * n);
    for (uint32_t row = 0; row < n; ++row)
        for (uint32_t col = 0; col < n; ++col) {
            tf::Task here = flow.emplace([wave, row, col] { bench_wave_block(wave, row, col); });
            if (row > 0) tasks[static_cast<size_t>(row - 1) * n + col].precede(here);
            if (col > 0) tasks.back().precede(here);
            tasks.push_back(here);
        }
    executor->run(flow).wait();
}

void cholesky(bench_chol *chol, const bench_chol_graph *graph) {
    tf::Taskflow flow;
    std::vector<tf::Task> tasks;
    tasks.reserve(graph->num_tasks);
    for (size_t t = 0; t < graph->num_tasks; ++t) {
        const bench_chol_task *task = &graph->tasks[t];
        tf::Task here = flow.emplace([chol, task] { bench_chol_run(chol, task); });
        for (unsigned p = 0; p < task->num_predecessors; ++p) tasks[task->predecessors[p]].precede(here);
        tasks.push_back(here);
    }
    executor->run(flow).wait();
}

}  // namespace

int main(int argc, char **argv) {
    bench_runtime runtime{};
    runtime.name = "Taskflow";
    runtime.start = start;
    runtime.stop = stop;
    runtime.wavefront = wavefront;
    runtime.cholesky = cholesky;
    return bench_main(argc, argv, &runtime);
}
