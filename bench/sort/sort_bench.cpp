// sort_bench: blz::parallel_sort against std::sort and TBB's
// tbb::parallel_sort on random doubles.
//
//   sort_bench [--json] [n] [runs] [workers...]     defaults: 10000000 7 1 2
//
// Every measured sort (std::sort once, and each parallel sort with each
// worker count) runs in one interleaved round, A B C ... A B C ..., `runs`
// rounds (at least 5), so that a slow phase of the machine hits every row
// alike. Each run sorts a fresh copy of the same input (the copy is not
// timed) and is checked against std::sort's answer (not timed). Each run
// records wall time (steady_clock) and the process's CPU time
// (CLOCK_PROCESS_CPUTIME_ID: every thread, idle spinning included); a row
// gives the medians, and CPU/wall says how many CPUs the run really had.
//
// The table's last columns ("ok runs") keep, for a parallel sort on
// w >= 2 workers, only the runs that got at least w - 0.1 CPUs (CPU/wall
// >= 1.9 for two): a run below that ran on a machine that did not deliver
// its CPUs, or left a worker idle (TBB partitions each range serially, so
// its first partition, about 1/23 of the work for 10^7 elements, caps its
// CPU/wall near 1.92; blz::parallel_sort splits that partition too).
//
// --json prints one JSON object on stdout instead of the table:
//   {"name": "sort", "unit": "ms", "n": N, "input": "...", "rows": [
//     {"runtime": "blz::parallel_sort", "threads": 2, "median_ms": X,
//      "runs": [ms, ...], "cpu_per_wall": median, "cpu_per_wall_runs": [...]},
//     ...]}
//
// Built without TBB (no libtbb-dev), the TBB rows are left out.
#include <blitz.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#ifdef BLZ_BENCH_HAVE_TBB
#include <tbb/parallel_sort.h>
#include <tbb/task_arena.h>
#endif

namespace {

constexpr int kMinRuns = 5;

double now_wall() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double now_cpu() {
    timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

double median(std::vector<double> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    const std::size_t m = v.size() / 2;
    return v.size() % 2 == 1 ? v[m] : (v[m - 1] + v[m]) / 2;
}

// One row: a sort with a number of workers, and its runs.
struct row {
    std::string runtime;
    unsigned threads;
    std::function<void(std::vector<double> &)> sort;
    std::vector<double> wall_ms, cpu_per_wall;
};

struct options {
    bool json = false;
    std::size_t n = 10000000;
    int runs = 7;
    std::vector<unsigned> workers{1, 2};
};

bool parse(int argc, char **argv, options &o) {
    std::vector<const char *> positional;
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--json") == 0) o.json = true;
        else positional.push_back(argv[i]);
    }
    if (!positional.empty()) o.n = std::strtoull(positional[0], nullptr, 10);
    if (positional.size() > 1) o.runs = std::atoi(positional[1]);
    if (positional.size() > 2) {
        o.workers.clear();
        for (std::size_t i = 2; i < positional.size(); ++i) {
            const long w = std::atol(positional[i]);
            if (w < 1 || w > BLZ_MAX_THREADS) return false;
            o.workers.push_back(static_cast<unsigned>(w));
        }
    }
    return o.n > 0 && o.runs >= kMinRuns;
}

// The pools and arenas the rows sort with; they live as long as the rows.
struct runtimes {
    std::vector<std::unique_ptr<blz::pool>> pools;
#ifdef BLZ_BENCH_HAVE_TBB
    std::vector<std::unique_ptr<tbb::task_arena>> arenas;
#endif
};

std::vector<row> make_rows(const options &o, runtimes &rt) {
    std::vector<row> rows;
    rows.push_back({"std::sort", 1, [](std::vector<double> &v) { std::sort(v.begin(), v.end()); }, {}, {}});
    for (unsigned w : o.workers) {
        blz::pool *pool = rt.pools.emplace_back(std::make_unique<blz::pool>(w)).get();
        rows.push_back({"blz::parallel_sort", w,
                        [pool](std::vector<double> &v) { blz::parallel_sort(*pool, v.begin(), v.end()); }, {}, {}});
#ifdef BLZ_BENCH_HAVE_TBB
        tbb::task_arena *arena =
            rt.arenas.emplace_back(std::make_unique<tbb::task_arena>(static_cast<int>(w))).get();
        rows.push_back({"tbb::parallel_sort", w,
                        [arena](std::vector<double> &v) {
                            arena->execute([&] { tbb::parallel_sort(v.begin(), v.end()); });
                        },
                        {}, {}});
#endif
    }
    return rows;
}

// Runs every row once per round, interleaved; false if a sort was wrong.
bool measure(std::vector<row> &rows, const std::vector<double> &input, const std::vector<double> &expected,
             int runs) {
    std::vector<double> work(input.size());
    for (row &r : rows) {  // warm-up: pages, threads, caches
        work = input;
        r.sort(work);
    }
    for (int round = 0; round < runs; ++round) {
        for (row &r : rows) {
            work = input;
            std::this_thread::sleep_for(std::chrono::milliseconds(20));  // spinning idle threads settle
            const double w0 = now_wall(), c0 = now_cpu();
            r.sort(work);
            const double c1 = now_cpu(), w1 = now_wall();
            if (work != expected) {
                std::fprintf(stderr, "sort_bench: %s on %u workers sorted wrongly\n", r.runtime.c_str(), r.threads);
                return false;
            }
            r.wall_ms.push_back((w1 - w0) * 1e3);
            r.cpu_per_wall.push_back((c1 - c0) / (w1 - w0));
        }
    }
    return true;
}

void print_list(const std::vector<double> &v, const char *format) {
    std::printf("[");
    for (std::size_t i = 0; i < v.size(); ++i) {
        std::printf(i == 0 ? "" : ", ");
        std::printf(format, v[i]);
    }
    std::printf("]");
}

void print_json(const options &o, const std::vector<row> &rows) {
    std::printf("{\"name\": \"sort\", \"unit\": \"ms\", \"n\": %zu, \"input\": \"uniform random doubles\", \"rows\": [",
                o.n);
    for (std::size_t i = 0; i < rows.size(); ++i) {
        const row &r = rows[i];
        std::printf("%s\n  {\"runtime\": \"%s\", \"threads\": %u, \"median_ms\": %.3f, \"runs\": ", i == 0 ? "" : ",",
                    r.runtime.c_str(), r.threads, median(r.wall_ms));
        print_list(r.wall_ms, "%.3f");
        std::printf(", \"cpu_per_wall\": %.3f, \"cpu_per_wall_runs\": ", median(r.cpu_per_wall));
        print_list(r.cpu_per_wall, "%.3f");
        std::printf("}");
    }
    std::printf("\n]}\n");
}

void print_table(const options &o, const std::vector<row> &rows) {
    const double std_ms = median(rows.front().wall_ms);
    std::printf("sort_bench: %zu random doubles, %d interleaved runs each, medians; CPU = process CPU time\n", o.n,
                o.runs);
    std::printf("%-7s %-20s %9s %9s %9s %12s | %-9s %9s %12s\n", "workers", "sort", "wall ms", "CPU ms", "CPU/wall",
                "vs std::sort", "ok runs", "wall ms", "vs std::sort");
    for (const row &r : rows) {
        const double wall = median(r.wall_ms);
        std::vector<double> cpu_ms;
        for (std::size_t i = 0; i < r.wall_ms.size(); ++i) cpu_ms.push_back(r.wall_ms[i] * r.cpu_per_wall[i]);
        std::printf("%-7u %-20s %9.1f %9.1f %9.2f %11.2fx", r.threads, r.runtime.c_str(), wall, median(cpu_ms),
                    median(r.cpu_per_wall), std_ms / wall);
        if (r.threads < 2) {
            std::printf(" |\n");
            continue;
        }
        std::vector<double> good;
        for (std::size_t i = 0; i < r.wall_ms.size(); ++i) {
            if (r.cpu_per_wall[i] >= r.threads - 0.1) good.push_back(r.wall_ms[i]);
        }
        const std::string count = std::to_string(good.size()) + "/" + std::to_string(r.wall_ms.size());
        if (good.empty()) std::printf(" | %-9s %9s %12s\n", count.c_str(), "-", "-");
        else std::printf(" | %-9s %9.1f %11.2fx\n", count.c_str(), median(good), std_ms / median(good));
    }
}

}  // namespace

int main(int argc, char **argv) {
    options o;
    if (!parse(argc, argv, o)) {
        std::fprintf(stderr, "usage: %s [--json] [n > 0] [runs >= %d] [workers 1..%d ...]\n", argv[0], kMinRuns,
                     BLZ_MAX_THREADS);
        return 2;
    }
    std::vector<double> input(o.n);
    std::mt19937_64 rng(20261122);
    std::uniform_real_distribution<double> uniform(0.0, 1.0);
    for (double &x : input) x = uniform(rng);
    std::vector<double> expected = input;
    std::sort(expected.begin(), expected.end());

    runtimes rt;
    std::vector<row> rows = make_rows(o, rt);
    if (!measure(rows, input, expected, o.runs)) return 1;
    if (o.json) print_json(o, rows);
    else print_table(o, rows);
    return 0;
}
