// 0.2 tracing, from the contract in blitz.h (issue 18): a trace of a known
// workload has a track for every worker, spans that nest, one job span per
// job the pool counted, wake-up arrows with both ends, and the names of
// the C functions the jobs ran; BLZ_TRACE traces every pool from its
// creation to its destroy; a full buffer drops events and the file says
// so; start and stop work from inside a job, and while the pool works;
// bad input gives BLZ_EINVAL. The files are checked by tools/blitz-trace
// --check (its path in BLZ_TRACE_TOOL), so the tool is tested with them.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "support.hpp"
#include "temp_dir.hpp"

namespace {

using blz_test::contents_of;
using blz_test::count_into;
using blz_test::occurrences;
using blz_test::Pool;
using blz_test::stats_of;
using blz_test::TempDir;
using blz_test::wait_until_asleep;
using blz_test::Watchdog;
using std::chrono::milliseconds;
using std::chrono::seconds;

// tools/blitz-trace --check on `path` with `options`: true when it passes.
bool trace_checks(const std::string &path, const std::string &options = "") {
    const char *tool = std::getenv("BLZ_TRACE_TOOL");
    REQUIRE(tool != nullptr);  // meson sets it
    const std::string command = "python3 '" + std::string(tool) + "' '" + path + "' --check " + options;
    const int status = std::system(command.c_str());
    INFO(command);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

// Sets an environment variable for the scope (the pools read it when
// created or when a trace starts; no other thread calls setenv).
class ScopedEnv {
public:
    ScopedEnv(const char *name, const std::string &value) : name_(name) { setenv(name, value.c_str(), 1); }
    ~ScopedEnv() { unsetenv(name_); }
    ScopedEnv(const ScopedEnv &) = delete;
    ScopedEnv &operator=(const ScopedEnv &) = delete;

private:
    const char *name_;
};

void add_range(void *counter, size_t lo, size_t hi) {
    static_cast<std::atomic<uint64_t> *>(counter)->fetch_add(hi - lo);
}

void add_index(void *counter, uint32_t index) { static_cast<std::atomic<uint64_t> *>(counter)->fetch_add(index + 1); }

// A known workload with jobs of every source: a blz_call running fib by
// fork-join (own and stolen halves), 200 tasks spawned from outside
// (injected), a parallel_for, a broadcast (one share per worker) and a
// high-priority task (urgent).
void run_known_workload(blz_pool *pool) {
    CHECK(blz_test::fib(pool, 16) == 987);
    blz_group *group = nullptr;
    REQUIRE(blz_group_create(pool, &group) == BLZ_OK);
    std::atomic<int> tasks{0};
    for (int i = 0; i < 200; ++i) REQUIRE(blz_group_spawn(group, count_into, &tasks) == BLZ_OK);
    blz_spawn_options urgent;
    blz_spawn_options_init(&urgent);
    urgent.flags = BLZ_SPAWN_HIGH_PRIORITY;
    urgent.group = group;
    REQUIRE(blz_spawn_ex(pool, count_into, &tasks, &urgent, nullptr) == BLZ_OK);
    REQUIRE(blz_group_destroy(group) == BLZ_OK);
    CHECK(tasks.load() == 201);
    std::atomic<uint64_t> covered{0};
    REQUIRE(blz_parallel_for(pool, 0, 10000, 100, add_range, &covered) == BLZ_OK);
    CHECK(covered.load() == 10000);
    std::atomic<uint64_t> shares{0};
    REQUIRE(blz_broadcast(pool, add_index, &shares) == BLZ_OK);
    const uint64_t n = blz_pool_num_threads(pool);
    CHECK(shares.load() == n * (n + 1) / 2);
}

TEST_CASE("a trace of a known workload: every worker's track, nested spans, one job span per job", "[trace]") {
    Watchdog watchdog("known workload trace", seconds(300));
    TempDir dir;
    const std::string path = dir / "known.json";
    const uint32_t workers = 3;
    Pool pool(workers);
    // From an idle pool to an idle pool: every job's span is written (a
    // span is written when its job ends, after the job's waiter may have
    // returned), and every wake-up's arrow has both ends.
    REQUIRE(wait_until_asleep(pool, milliseconds(60000)));
    const uint64_t before = stats_of(pool).jobs_executed;
    REQUIRE(blz_pool_trace_start(pool, path.c_str()) == BLZ_OK);
    run_known_workload(pool);
    REQUIRE(wait_until_asleep(pool, milliseconds(60000)));
    const uint64_t jobs = stats_of(pool).jobs_executed - before;
    REQUIRE(blz_pool_trace_stop(pool) == BLZ_OK);
    REQUIRE(pool.destroy() == BLZ_OK);

    const std::string text = contents_of(path);
    INFO("jobs executed: " << jobs);
    CHECK(trace_checks(path, "--idle --workers " + std::to_string(workers) + " --jobs " + std::to_string(jobs)));
    // The functions exported by this program (linked with -rdynamic) are
    // named; every source shows up; the outside thread woke a sleeping worker.
    CHECK(occurrences(text, "\"name\":\"blz_test::fib_task(void*)\"") > 0);
    CHECK(occurrences(text, "\"name\":\"blz_test::count_into(void*)\"") == 201);
    for (const char *source : {"own", "injected", "urgent", "broadcast"}) {
        INFO("source " << source);
        CHECK(occurrences(text, std::string("\"source\":\"") + source + "\"") > 0);
    }
    CHECK(occurrences(text, "\"source\":\"broadcast\"") == workers);
    CHECK(occurrences(text, "\"ph\":\"s\"") > 0);
    CHECK(occurrences(text, "\"dropped_events\":0") == 1);
}

TEST_CASE("blz_pool_trace_start and stop refuse bad input", "[trace][bad_input]") {
    TempDir dir;
    const std::string path = dir / "t.json";
    Pool pool(2);
    CHECK(blz_pool_trace_start(nullptr, path.c_str()) == BLZ_EINVAL);
    CHECK(blz_pool_trace_start(pool, nullptr) == BLZ_EINVAL);
    CHECK(blz_pool_trace_start(pool, "") == BLZ_EINVAL);
    CHECK(blz_pool_trace_start(pool, (dir / "no/such/dir.json").c_str()) == BLZ_EINVAL);
    const std::string directory = dir / "";
    CHECK(blz_pool_trace_start(pool, directory.c_str()) == BLZ_EINVAL);
    CHECK(blz_pool_trace_stop(nullptr) == BLZ_EINVAL);
    CHECK(blz_pool_trace_stop(pool) == BLZ_EINVAL);  // none running
    REQUIRE(blz_pool_trace_start(pool, path.c_str()) == BLZ_OK);
    CHECK(blz_pool_trace_start(pool, (dir / "second.json").c_str()) == BLZ_EINVAL);  // one at a time
    CHECK(blz_pool_trace_stop(pool) == BLZ_OK);
    CHECK(blz_pool_trace_stop(pool) == BLZ_EINVAL);
    CHECK(pool.destroy() == BLZ_OK);
    CHECK(trace_checks(path, "--idle --workers 2"));
}

TEST_CASE("a trace started and stopped from inside jobs", "[trace]") {
    Watchdog watchdog("trace from a job", seconds(120));
    TempDir dir;
    const std::string path = dir / "inside.json";
    Pool pool(2);
    struct Calls {
        blz_pool *pool;
        std::string path;
        blz_status started = 99, stopped = 99;
    } calls{pool, path};
    auto start = [&calls] { calls.started = blz_pool_trace_start(calls.pool, calls.path.c_str()); };
    auto stop = [&calls] { calls.stopped = blz_pool_trace_stop(calls.pool); };
    REQUIRE(blz_call(pool, blz_test::thunk_of(start), &start) == BLZ_OK);
    CHECK(blz_test::fib(pool, 12) == 144);
    REQUIRE(blz_call(pool, blz_test::thunk_of(stop), &stop) == BLZ_OK);
    CHECK(calls.started == BLZ_OK);
    CHECK(calls.stopped == BLZ_OK);
    CHECK(pool.destroy() == BLZ_OK);
    CHECK(occurrences(contents_of(path), "blz_test::fib_task(void*)") > 0);
    CHECK(trace_checks(path, "--workers 2"));
}

TEST_CASE("destroy writes a trace still running", "[trace]") {
    TempDir dir;
    const std::string path = dir / "left.json";
    Pool pool(2);
    REQUIRE(blz_pool_trace_start(pool, path.c_str()) == BLZ_OK);
    CHECK(blz_test::fib(pool, 10) == 55);
    CHECK(pool.destroy() == BLZ_OK);
    // Destroy joined the workers first: the pool ended idle.
    CHECK(trace_checks(path, "--idle --workers 2"));
}

TEST_CASE("BLZ_TRACE traces every pool of the process, from creation to destroy", "[trace][env]") {
    TempDir dir;
    SECTION("numbered by %n, with the process id by %p") {
        ScopedEnv env("BLZ_TRACE", dir / "pool-%p-%n.json");
        for (uint32_t threads : {1u, 2u}) {
            Pool pool(threads);
            CHECK(blz_test::fib(pool, 10) == 55);
            CHECK(pool.destroy() == BLZ_OK);
        }
        const std::vector<std::string> files = dir.files();
        REQUIRE(files.size() == 2);
        for (const std::string &file : files) {
            INFO(file);
            CHECK(file.rfind("pool-" + std::to_string(getpid()) + "-", 0) == 0);
            CHECK(trace_checks(dir / file, "--idle"));
        }
    }
    SECTION("without %n, later pools add .n to the path") {
        ScopedEnv env("BLZ_TRACE", dir / "t.json");
        Pool first(1), second(1);
        CHECK(first.destroy() == BLZ_OK);
        CHECK(second.destroy() == BLZ_OK);
        const std::vector<std::string> files = dir.files();
        REQUIRE(files.size() == 2);
        for (const std::string &file : files) CHECK(file.rfind("t.json", 0) == 0);
    }
    SECTION("a path that cannot be opened: the pool is made, untraced") {
        ScopedEnv env("BLZ_TRACE", dir / "missing/t.json");
        Pool pool(1);
        CHECK(blz_test::fib(pool, 8) == 21);
        CHECK(blz_pool_trace_stop(pool) == BLZ_EINVAL);  // no trace runs
        CHECK(pool.destroy() == BLZ_OK);
        CHECK(dir.files().empty());
    }
}

TEST_CASE("a full buffer drops events, and the file says so", "[trace]") {
    TempDir dir;
    const std::string path = dir / "small.json";
    Pool pool(2);
    {
        ScopedEnv env("BLZ_TRACE_BUFFER", "64");  // read by trace_start
        REQUIRE(blz_pool_trace_start(pool, path.c_str()) == BLZ_OK);
    }
    CHECK(blz_test::fib(pool, 14) == 377);  // 609 joins: more events than 64 per thread
    REQUIRE(wait_until_asleep(pool, milliseconds(60000)));
    REQUIRE(blz_pool_trace_stop(pool) == BLZ_OK);
    CHECK(pool.destroy() == BLZ_OK);
    const std::string text = contents_of(path);
    CHECK(occurrences(text, "\"dropped_events\":0") == 0);
    CHECK(occurrences(text, "\"note\":\"") == 1);
    CHECK(occurrences(text, "\"name\":\"events dropped\"") >= 1);
    CHECK(occurrences(text, "\"cat\":\"job\"") <= 64 * 3);
    CHECK(trace_checks(path, "--workers 2"));  // what was kept is well formed
}

// Starts and stops while fork-join runs on the workers and an outside
// thread spawns (its wake-ups go to the outside track): under the
// sanitizers, the stop's hand-over of every buffer against writers in
// flight. Each file is well formed; arrows cut by a stop are allowed.
TEST_CASE("tracing starts and stops while the pool works", "[trace][race]") {
    Watchdog watchdog("trace start/stop under load", seconds(300));
    TempDir dir;
    Pool pool(3);
    // Catch2 asserts from this thread only: the helpers count their failures.
    std::atomic<bool> done{false};
    std::atomic<int> failures{0};
    std::thread forker([&] {
        while (!done.load()) failures += blz_test::fib(pool, 12) != 144;
    });
    std::thread spawner([&] {
        std::atomic<int> ran{0};
        while (!done.load()) {
            failures += blz_spawn(pool, count_into, &ran, nullptr) != BLZ_OK;
            std::this_thread::sleep_for(std::chrono::microseconds(200));
        }
    });
    const int rounds = 12;
    for (int i = 0; i < rounds; ++i) {
        const std::string path = dir / ("round" + std::to_string(i) + ".json");
        REQUIRE(blz_pool_trace_start(pool, path.c_str()) == BLZ_OK);
        std::this_thread::sleep_for(milliseconds(5));
        REQUIRE(blz_pool_trace_stop(pool) == BLZ_OK);
    }
    done.store(true);
    forker.join();
    spawner.join();
    CHECK(failures.load() == 0);
    CHECK(pool.destroy() == BLZ_OK);
    for (int i = 0; i < rounds; ++i) CHECK(trace_checks(dir / ("round" + std::to_string(i) + ".json"), "--workers 3"));
}

}  // namespace
