// 0.2 operating a pool, from the contract in blitz.h (issue 18, part A):
// CPU placement (blz_pool_config.cpu_list, BLZ_CPU_LIST) read back with
// sched_getaffinity inside jobs; the cap of blz_pool_set_max_active counted
// inside jobs (at most n workers inside a job at once, with tasks and
// fork-join), and lifting it wakes the workers held back (a lost wake-up
// hangs, and the watchdog fails the test); BLZ_SPAWN_HIGH_PRIORITY jumps a
// queue of 1000 normal tasks; blz_worker_stats sums to blz_pool_stats; bad
// input gives BLZ_EINVAL. No assertion depends on timing: waits are for
// states, under a watchdog.
#include <catch2/catch.hpp>

#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "support.hpp"

namespace {

using blz_test::eventually;
using blz_test::Gate;
using blz_test::OpenOnExit;
using blz_test::Pool;
using blz_test::stats_of;
using blz_test::thunk_of;
using blz_test::wait_until_asleep;
using blz_test::Watchdog;
using std::chrono::milliseconds;
using std::chrono::seconds;

// ---- placement ----

// The CPUs in the calling thread's affinity mask, in increasing order; empty
// if sched_getaffinity failed. No Catch2 assertion here: workers call it, and
// Catch2's assertions are for the test's own thread (TSan reports the race).
std::vector<int> affinity_of_this_thread() {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof(set), &set) != 0) return {};
    std::vector<int> cpus;
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
        if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
    }
    return cpus;
}

// Each worker's affinity mask, read inside a job that runs on that worker.
struct Affinities {
    std::vector<std::vector<int>> of_worker;
};

void read_affinity(void *arg, uint32_t worker_index) {
    static_cast<Affinities *>(arg)->of_worker[worker_index] = affinity_of_this_thread();
}

Affinities affinities_of(blz_pool *pool) {
    Affinities a;
    a.of_worker.resize(blz_pool_num_threads(pool));
    REQUIRE(blz_broadcast(pool, read_affinity, &a) == BLZ_OK);
    for (const auto &cpus : a.of_worker) REQUIRE(!cpus.empty());  // every worker read its mask
    return a;
}

blz_status create_pinned(const char *cpu_list, uint32_t num_threads, blz_pool **out) {
    blz_pool_config config;
    blz_pool_config_init(&config);
    config.num_threads = num_threads;
    config.cpu_list = cpu_list;
    return blz_pool_create(&config, out);
}

// A list of the given CPUs, "a,b,...".
std::string list_of(const std::vector<int> &cpus) {
    std::string text;
    for (int cpu : cpus) {
        if (!text.empty()) text.push_back(',');
        text.append(std::to_string(cpu));
    }
    return text;
}

// Sets an environment variable for one scope.
class ScopedEnv {
public:
    ScopedEnv(const char *name, const char *value) : name_(name) { setenv(name, value, 1); }
    ~ScopedEnv() { unsetenv(name_); }
    ScopedEnv(const ScopedEnv &) = delete;
    ScopedEnv &operator=(const ScopedEnv &) = delete;

private:
    const char *name_;
};

TEST_CASE("cpu_list pins worker i to the i-th CPU of the list, cycling", "[placement]") {
    Watchdog watchdog("placement", seconds(120));
    const std::vector<int> mine = affinity_of_this_thread();
    REQUIRE(!mine.empty());

    SECTION("one CPU at a time: each CPU of the mask alone (\"0\", \"1\" on two CPUs)") {
        for (int cpu : mine) {
            INFO("cpu " << cpu);
            blz_pool *pool = nullptr;
            REQUIRE(create_pinned(std::to_string(cpu).c_str(), 0, &pool) == BLZ_OK);
            CHECK(blz_pool_num_threads(pool) == 1);  // the default size: the list's length
            CHECK(affinities_of(pool).of_worker[0] == std::vector<int>{cpu});
            CHECK(blz_pool_destroy(pool) == BLZ_OK);
        }
    }
    SECTION("the whole mask as a list (\"0,1\"), more workers than CPUs: cycling") {
        const uint32_t workers = static_cast<uint32_t>(2 * mine.size() + 1);
        blz_pool *pool = nullptr;
        REQUIRE(create_pinned(list_of(mine).c_str(), workers, &pool) == BLZ_OK);
        CHECK(blz_pool_num_threads(pool) == workers);
        Affinities a = affinities_of(pool);
        for (uint32_t i = 0; i < workers; ++i) {
            INFO("worker " << i);
            CHECK(a.of_worker[i] == std::vector<int>{mine[i % mine.size()]});
        }
        CHECK(blz_pool_destroy(pool) == BLZ_OK);
    }
    SECTION("a range, as /sys writes it") {
        std::string range = std::to_string(mine.front());
        range.push_back('-');
        range.append(std::to_string(mine.front()));
        blz_pool *pool = nullptr;
        REQUIRE(create_pinned(range.c_str(), 0, &pool) == BLZ_OK);
        CHECK(affinities_of(pool).of_worker[0] == std::vector<int>{mine.front()});
        CHECK(blz_pool_destroy(pool) == BLZ_OK);
    }
    SECTION("no list: workers run on the process's CPUs (the main thread's mask)") {
        Pool pool(2);
        Affinities a = affinities_of(pool);
        for (const auto &cpus : a.of_worker) CHECK(cpus == mine);
    }
    SECTION("BLZ_CPU_LIST pins a pool created with the defaults, and sets its size") {
        ScopedEnv env("BLZ_CPU_LIST", std::to_string(mine.back()).c_str());
        blz_pool *pool = nullptr;
        REQUIRE(blz_pool_create(nullptr, &pool) == BLZ_OK);
        CHECK(blz_pool_num_threads(pool) == 1);
        CHECK(affinities_of(pool).of_worker[0] == std::vector<int>{mine.back()});
        CHECK(blz_pool_destroy(pool) == BLZ_OK);
    }
    SECTION("a config's own list wins over BLZ_CPU_LIST") {
        ScopedEnv env("BLZ_CPU_LIST", "not a list");
        blz_pool *pool = nullptr;
        REQUIRE(create_pinned(std::to_string(mine.front()).c_str(), 0, &pool) == BLZ_OK);
        CHECK(affinities_of(pool).of_worker[0] == std::vector<int>{mine.front()});
        CHECK(blz_pool_destroy(pool) == BLZ_OK);
    }
    SECTION("a 0.1 caller's config (struct_size without cpu_list) is not pinned") {
        // Whatever lies past the old struct must not be read as a list.
        blz_pool_config config;
        blz_pool_config_init(&config);
        config.struct_size = offsetof(blz_pool_config, cpu_list);
        config.num_threads = 2;
        config.cpu_list = "garbage";
        blz_pool *pool = nullptr;
        REQUIRE(blz_pool_create(&config, &pool) == BLZ_OK);
        for (const auto &cpus : affinities_of(pool).of_worker) CHECK(cpus == mine);
        CHECK(blz_pool_destroy(pool) == BLZ_OK);
    }
}

// A thread pinned to one CPU (a worker of a pinned pool, say) that makes a
// pool with the defaults or releases one: the pool is sized by the CPUs
// the process may run on, its unpinned workers run on all of them, and so
// does the thread a release starts. "The process's mask" is its main
// thread's (what taskset, numactl and MPI launchers set), read here by the
// test's main thread.
namespace {

struct ReleaseAffinity {
    std::atomic<bool> done{false};
    std::vector<int> cpus;
    static void on_destroyed(void *arg, blz_status) {
        auto *r = static_cast<ReleaseAffinity *>(arg);
        r->cpus = affinity_of_this_thread();
        r->done.store(true);
    }
};

}  // namespace

TEST_CASE("a pool made or released on a pinned thread uses the process's CPUs and not that thread's",
          "[placement]") {
    Watchdog watchdog("placement from a pinned thread", seconds(120));
    const std::vector<int> process = affinity_of_this_thread();  // the main thread's
    REQUIRE(!process.empty());
    if (process.size() < 2) {
        WARN("one CPU in the process's mask: nothing to tell apart");
        return;
    }
    unsetenv("BLZ_NUM_THREADS");
    unsetenv("BLZ_CPU_LIST");
    uint32_t workers = 0;
    Affinities worker_masks;
    ReleaseAffinity released;
    std::thread pinned([&] {  // no Catch2 assertion off the main thread
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(process.front(), &one);
        if (pthread_setaffinity_np(pthread_self(), sizeof(one), &one) != 0) return;
        blz_pool *pool = nullptr;
        if (blz_pool_create(nullptr, &pool) != BLZ_OK) return;
        workers = blz_pool_num_threads(pool);
        worker_masks.of_worker.resize(workers);
        if (blz_broadcast(pool, read_affinity, &worker_masks) != BLZ_OK) worker_masks.of_worker.clear();
        if (blz_pool_release(pool, &ReleaseAffinity::on_destroyed, &released) != BLZ_OK) blz_pool_destroy(pool);
    });
    pinned.join();
    CHECK(workers == process.size());
    REQUIRE(worker_masks.of_worker.size() == workers);
    for (const auto &cpus : worker_masks.of_worker) CHECK(cpus == process);
    REQUIRE(eventually([&] { return released.done.load(); }));
    CHECK(released.cpus == process);
}

// The first CPU number that is not in the mask (there is one below 4096).
int cpu_outside_mask(const std::vector<int> &mine) {
    int cpu = 0;
    for (int in : mine) {
        if (in != cpu) break;
        ++cpu;
    }
    return cpu;
}

TEST_CASE("malformed CPU lists and CPUs outside the mask give BLZ_EINVAL", "[placement][bad_input]") {
    const std::string outside = std::to_string(cpu_outside_mask(affinity_of_this_thread()));
    std::string outside_then_0 = outside;
    outside_then_0.append(",0");
    const std::string bad[] = {"",   "a",     "3-1",  "0-",   "-1",    "0,",  ",0",      "0 ",     " 0",
                               "0;1", "0-1-2", "1-0",  "4096", "99999999999", "0x1", outside, outside_then_0};
    for (const std::string &list : bad) {
        INFO("cpu_list \"" << list << "\"");
        blz_pool *pool = blz_test::sentinel<blz_pool>();
        CHECK(create_pinned(list.c_str(), 0, &pool) == BLZ_EINVAL);
        CHECK(pool == blz_test::sentinel<blz_pool>());  // untouched
        CHECK(create_pinned(list.c_str(), 2, &pool) == BLZ_EINVAL);
    }
    SECTION("a malformed BLZ_CPU_LIST fails the pools that use it") {
        ScopedEnv env("BLZ_CPU_LIST", "0-");
        blz_pool *pool = blz_test::sentinel<blz_pool>();
        CHECK(blz_pool_create(nullptr, &pool) == BLZ_EINVAL);
        CHECK(pool == blz_test::sentinel<blz_pool>());
    }
    SECTION("an empty BLZ_CPU_LIST counts as unset") {
        ScopedEnv env("BLZ_CPU_LIST", "");
        blz_pool *pool = nullptr;
        REQUIRE(blz_pool_create(nullptr, &pool) == BLZ_OK);
        CHECK(blz_pool_destroy(pool) == BLZ_OK);
    }
}

// ---- the cap on active workers ----

// Counts the workers inside a job at once. A worker is inside from its
// outermost job's start to that job's end: the jobs it runs while it waits
// in a join are counted as the same worker (the cap's definition).
struct ActiveCount {
    std::atomic<int> now{0};
    std::atomic<int> most{0};
    std::atomic<int> failed_calls{0};  // Catch's macros are for the test's own thread

    void enter() {
        if (depth++ != 0) return;
        const int n = now.fetch_add(1) + 1;
        int seen = most.load();
        while (n > seen && !most.compare_exchange_weak(seen, n)) {
        }
    }
    void leave() {
        if (--depth == 0) now.fetch_sub(1);
    }
    inline static thread_local int depth = 0;
};

struct CountedFib {
    blz_pool *pool;
    ActiveCount *count;
    unsigned n;
};

// Every fork-join half is a job: it counts itself in.
void counted_fib(void *arg) {
    auto *f = static_cast<CountedFib *>(arg);
    f->count->enter();
    if (f->n >= 2) {
        CountedFib a{f->pool, f->count, f->n - 1};
        CountedFib b{f->pool, f->count, f->n - 2};
        if (blz_fork_join(f->pool, counted_fib, &a, counted_fib, &b) != BLZ_OK) f->count->failed_calls.fetch_add(1);
    }
    std::this_thread::yield();  // let others overlap, if the cap allowed them
    f->count->leave();
}

// Spawns `tasks` tasks doing fork-join from outside, and waits for them.
void run_counted_tasks(blz_pool *pool, ActiveCount &count, int tasks) {
    blz_group *group = nullptr;
    REQUIRE(blz_group_create(pool, &group) == BLZ_OK);
    std::vector<CountedFib> args(static_cast<size_t>(tasks), CountedFib{pool, &count, 10});
    for (auto &a : args) REQUIRE(blz_group_spawn(group, counted_fib, &a) == BLZ_OK);
    REQUIRE(blz_group_destroy(group) == BLZ_OK);
    CHECK(count.failed_calls.load() == 0);
}

TEST_CASE("the cap holds: at most n workers run jobs at once, with tasks and fork-join", "[cap]") {
    Watchdog watchdog("the cap holds", seconds(300));
    const uint32_t workers = 4;
    Pool pool(workers);
    for (uint32_t cap : {1u, 2u, 3u}) {
        INFO("cap " << cap);
        REQUIRE(blz_pool_set_max_active(pool, cap) == BLZ_OK);
        // Every worker blocked: none can be between its check of the cap and a job.
        REQUIRE(wait_until_asleep(pool, milliseconds(60000)));
        ActiveCount count;
        run_counted_tasks(pool, count, 200);
        CHECK(count.most.load() <= static_cast<int>(cap));
        CHECK(count.most.load() >= 1);
        CHECK(count.now.load() == 0);
    }
    SECTION("0 lifts the cap: every worker may run again") {
        REQUIRE(blz_pool_set_max_active(pool, 0) == BLZ_OK);
        // Each of `workers` tasks waits until all of them run at once:
        // only an uncapped pool finishes this.
        std::atomic<uint32_t> arrived{0};
        auto meet = [&] {
            arrived.fetch_add(1);
            while (arrived.load() < workers) std::this_thread::yield();
        };
        blz_group *group = nullptr;
        REQUIRE(blz_group_create(pool, &group) == BLZ_OK);
        for (uint32_t i = 0; i < workers; ++i) REQUIRE(blz_group_spawn(group, thunk_of(meet), &meet) == BLZ_OK);
        CHECK(blz_group_destroy(group) == BLZ_OK);
    }
}

TEST_CASE("lowering the cap takes effect as running jobs finish", "[cap]") {
    Watchdog watchdog("lowering the cap", seconds(120));
    const uint32_t workers = 3;
    Pool pool(workers);
    // Every worker inside a job, held at a gate.
    Gate gate;
    OpenOnExit open{gate};
    blz_group *group = nullptr;
    REQUIRE(blz_group_create(pool, &group) == BLZ_OK);
    for (uint32_t i = 0; i < workers; ++i) REQUIRE(blz_group_spawn(group, blz_test::gate_fn, &gate) == BLZ_OK);
    REQUIRE(gate.wait_entered(static_cast<int>(workers)));
    REQUIRE(blz_pool_set_max_active(pool, 1) == BLZ_OK);  // no running job is interrupted
    gate.release();
    REQUIRE(blz_group_destroy(group) == BLZ_OK);
    // Each worker finished its job after the cap was set: from here on one runs at a time.
    ActiveCount count;
    run_counted_tasks(pool, count, 100);
    CHECK(count.most.load() == 1);
}

TEST_CASE("lifting the cap wakes the workers held back", "[cap]") {
    Watchdog watchdog("lifting the cap", seconds(120));
    const uint32_t workers = 3;
    Pool pool(workers);
    REQUIRE(blz_pool_set_max_active(pool, 1) == BLZ_OK);
    REQUIRE(wait_until_asleep(pool, milliseconds(60000)));
    // The only active worker takes a task that waits for a second one to
    // run at the same time: under the cap the second stays queued.
    std::atomic<int> started{0};
    auto pair = [&] {
        started.fetch_add(1);
        while (started.load() < 2) std::this_thread::yield();
    };
    blz_group *group = nullptr;
    REQUIRE(blz_group_create(pool, &group) == BLZ_OK);
    REQUIRE(blz_group_spawn(group, thunk_of(pair), &pair) == BLZ_OK);
    REQUIRE(eventually([&] { return started.load() == 1; }));
    REQUIRE(blz_group_spawn(group, thunk_of(pair), &pair) == BLZ_OK);
    // The second task is queued, the other workers sit out the cap:
    // blocked (sleeping_now counts them), with one worker busy.
    REQUIRE(wait_until_asleep(pool, milliseconds(60000), 1));
    CHECK(started.load() == 1);
    SECTION("lifted with 0") { REQUIRE(blz_pool_set_max_active(pool, 0) == BLZ_OK); }
    SECTION("raised to 2") { REQUIRE(blz_pool_set_max_active(pool, 2) == BLZ_OK); }
    SECTION("raised from one of the pool's own workers") {
        std::atomic<int> raised{0};
        auto raise = [&] { raised += blz_pool_set_max_active(pool, workers) == BLZ_OK; };
        // blz_broadcast is not capped: every worker runs it, even those held back.
        REQUIRE(blz_broadcast(pool, [](void *f, uint32_t) { (*static_cast<decltype(raise) *>(f))(); }, &raise) ==
                BLZ_OK);
        CHECK(raised.load() == static_cast<int>(workers));
    }
    // A lost wake-up leaves the second task queued for ever: the watchdog fails the test.
    CHECK(blz_group_destroy(group) == BLZ_OK);
    CHECK(started.load() == 2);
}

TEST_CASE("a capped pool runs broadcasts on every worker and is destroyed cleanly", "[cap]") {
    Watchdog watchdog("capped broadcast and destroy", seconds(120));
    const uint32_t workers = 3;
    Pool pool(workers);
    REQUIRE(blz_pool_set_max_active(pool, 1) == BLZ_OK);
    ActiveCount count;
    run_counted_tasks(pool, count, 20);  // the other workers come between jobs and sit out
    REQUIRE(wait_until_asleep(pool, milliseconds(60000)));
    std::atomic<uint32_t> calls{0};
    auto call = [&] { calls.fetch_add(1); };
    REQUIRE(blz_broadcast(pool, [](void *f, uint32_t) { (*static_cast<decltype(call) *>(f))(); }, &call) == BLZ_OK);
    CHECK(calls.load() == workers);
    CHECK(pool.destroy() == BLZ_OK);  // parked workers end too
}

TEST_CASE("blz_pool_set_max_active refuses bad input", "[cap][bad_input]") {
    CHECK(blz_pool_set_max_active(nullptr, 1) == BLZ_EINVAL);
    CHECK(blz_pool_set_max_active(nullptr, 0) == BLZ_EINVAL);
    Pool pool(2);
    CHECK(blz_pool_set_max_active(pool, 1000000) == BLZ_OK);  // above the pool's size: no cap
    CHECK(blz_pool_set_max_active(pool, 0) == BLZ_OK);
}

// The cap counts only workers that can run jobs: a worker still in its
// start hook, or one whose embedder has not called run() yet, is not one
// of the n. With cap 1, the one running worker must take the task.

namespace {

struct HeldRun {
    std::vector<std::pair<blz_fn, void *>> runs;
    static int spawn(void *user, uint32_t index, blz_fn run, void *run_arg) {
        auto *self = static_cast<HeldRun *>(user);
        if (index == 0) {
            std::thread(run, run_arg).detach();  // worker 0 runs at once; the pool outlives it (destroy waits)
        } else {
            self->runs.emplace_back(run, run_arg);
        }
        return 0;
    }
};

void gate_in_hook(void *gate, uint32_t index) {
    if (index == 1) static_cast<Gate *>(gate)->pass();
}

constexpr uint64_t kPatientNs = 5'000'000'000;  // far longer than any task here needs

// With the cap at 1 and one of the pool's two workers unable to run jobs
// yet, a spawned task runs at once on the other (bounded wait OK); then
// `let_other_go` releases the held worker, and a task that timed out is
// joined, so that the check fails without hanging.
template <class LetOtherGo>
void spawn_under_cap_of_one(blz_pool *pool, LetOtherGo let_other_go) {
    REQUIRE(blz_pool_set_max_active(pool, 1) == BLZ_OK);
    std::atomic<int> ran{0};
    blz_task *task = nullptr;
    REQUIRE(blz_spawn(pool, blz_test::count_into, &ran, &task) == BLZ_OK);
    const blz_status waited = blz_task_wait_for(task, kPatientNs);
    CHECK(waited == BLZ_OK);
    let_other_go();
    if (waited == BLZ_ETIMEDOUT) CHECK(blz_join(task) == BLZ_OK);
    CHECK(ran.load() == 1);
}

}  // namespace

TEST_CASE("the cap does not count a worker whose embedder has not called run() yet", "[cap]") {
    Watchdog watchdog("cap with a late run()", seconds(120));
    HeldRun held;
    blz_pool_config config;
    blz_pool_config_init(&config);
    config.num_threads = 2;
    config.spawn_thread = &HeldRun::spawn;
    config.spawn_user = &held;
    blz_pool *pool = nullptr;
    REQUIRE(blz_pool_create(&config, &pool) == BLZ_OK);
    std::thread late;
    spawn_under_cap_of_one(pool, [&] { late = std::thread(held.runs.at(0).first, held.runs.at(0).second); });
    CHECK(blz_pool_destroy(pool) == BLZ_OK);
    late.join();
}

TEST_CASE("the cap does not count a worker still in its start hook", "[cap]") {
    Watchdog watchdog("cap with a slow start hook", seconds(120));
    Gate gate;
    OpenOnExit open{gate};
    blz_pool_config config;
    blz_pool_config_init(&config);
    config.num_threads = 2;
    config.on_thread_start = gate_in_hook;
    config.user = &gate;
    blz_pool *pool = nullptr;
    REQUIRE(blz_pool_create(&config, &pool) == BLZ_OK);
    REQUIRE(gate.wait_entered());
    spawn_under_cap_of_one(pool, [&] { gate.release(); });
    CHECK(blz_pool_destroy(pool) == BLZ_OK);
}

// Destroy lifts the cap (blitz.h): the queued work drains on every
// worker, and a task that waits outside the runtime for work it queued
// does not keep destroy from returning.

namespace {

// Two tasks that each wait (at most kPatientNs) for the other to run at
// the same time: under cap 1 they cannot, until destroy lifts the cap.
struct Meeting {
    std::atomic<int> arrived{0};
    std::atomic<int> met{0};
    static void task(void *self) {
        auto *m = static_cast<Meeting *>(self);
        m->arrived.fetch_add(1);
        const bool both = eventually([m] { return m->arrived.load() >= 2; }, seconds(kPatientNs / 1'000'000'000));
        if (both) m->met.fetch_add(1);
    }
};

// A task that spawns a child into its own pool and waits for it outside
// the runtime (a spin, not a join): under cap 1 the child can only run on
// another worker, once destroy lifted the cap.
struct WaitsForChild {
    blz_pool *pool = nullptr;
    std::atomic<bool> child_ran{false};
    std::atomic<int> outcome{0};  // 1: the child ran in time, -1: it did not
    static void child(void *self) { static_cast<WaitsForChild *>(self)->child_ran.store(true); }
    static void task(void *self) {
        auto *w = static_cast<WaitsForChild *>(self);
        if (blz_spawn(w->pool, &WaitsForChild::child, w, nullptr) != BLZ_OK) {
            w->outcome.store(-2);
            return;
        }
        const bool ran = eventually([w] { return w->child_ran.load(); }, seconds(kPatientNs / 1'000'000'000));
        w->outcome.store(ran ? 1 : -1);
    }
};

}  // namespace

TEST_CASE("destroy lifts the cap: queued tasks drain on every worker", "[cap]") {
    Watchdog watchdog("destroy lifts the cap", seconds(120));
    Pool pool(4);
    REQUIRE(blz_pool_set_max_active(pool, 1) == BLZ_OK);
    REQUIRE(wait_until_asleep(pool, milliseconds(60000)));
    Meeting meeting;
    REQUIRE(blz_spawn(pool, &Meeting::task, &meeting, nullptr) == BLZ_OK);
    REQUIRE(blz_spawn(pool, &Meeting::task, &meeting, nullptr) == BLZ_OK);
    REQUIRE(eventually([&] { return meeting.arrived.load() >= 1; }));
    CHECK(pool.destroy() == BLZ_OK);
    CHECK(meeting.met.load() == 2);
}

TEST_CASE("destroy lifts the cap: a task waiting outside the runtime for its child lets destroy return",
          "[cap]") {
    Watchdog watchdog("destroy lifts the cap for a waiting task", seconds(120));
    Pool pool(2);
    REQUIRE(blz_pool_set_max_active(pool, 1) == BLZ_OK);
    REQUIRE(wait_until_asleep(pool, milliseconds(60000)));  // one worker sits out the cap
    WaitsForChild waits;
    waits.pool = pool;
    REQUIRE(blz_spawn(pool, &WaitsForChild::task, &waits, nullptr) == BLZ_OK);
    CHECK(pool.destroy() == BLZ_OK);
    CHECK(waits.outcome.load() == 1);
}

// ---- priorities ----

struct OrderLog {
    std::atomic<int> next{0};
    std::vector<int> position;  // by task id: the order it ran in
};

struct Logged {
    OrderLog *log;
    int id;
};

void log_order(void *arg) {
    auto *l = static_cast<Logged *>(arg);
    l->log->position[static_cast<size_t>(l->id)] = l->log->next.fetch_add(1);
}

blz_status spawn_flagged(blz_pool *pool, blz_group *group, blz_fn fn, void *arg, uint32_t flags) {
    blz_spawn_options opts;
    blz_spawn_options_init(&opts);
    opts.flags = flags;
    opts.group = group;
    return blz_spawn_ex(pool, fn, arg, &opts, nullptr);
}

TEST_CASE("a high-priority task jumps 1000 queued normal tasks", "[priority]") {
    Watchdog watchdog("priority", seconds(120));
    const int normal = 1000;
    Pool pool(1);
    Gate gate;
    OpenOnExit open{gate};
    blz_group *group = nullptr;
    REQUIRE(blz_group_create(pool, &group) == BLZ_OK);
    OrderLog log;
    log.position.assign(normal + 1, -1);
    std::vector<Logged> tasks;
    for (int id = 0; id <= normal; ++id) tasks.push_back({&log, id});
    std::atomic<int> refused{0};
    // Spawns the normal tasks, then the high-priority one (from any thread).
    auto spawn_all = [&] {
        for (int id = 0; id < normal; ++id) refused += spawn_flagged(pool, group, log_order, &tasks[id], 0) != BLZ_OK;
        refused += spawn_flagged(pool, group, log_order, &tasks[normal], BLZ_SPAWN_HIGH_PRIORITY) != BLZ_OK;
    };

    SECTION("submitted from outside behind a busy worker") {
        REQUIRE(blz_group_spawn(group, blz_test::gate_fn, &gate) == BLZ_OK);
        REQUIRE(gate.wait_entered());  // the only worker is busy
        spawn_all();
        gate.release();
    }
    SECTION("spawned by the worker itself, behind its own deque") {
        REQUIRE(blz_group_spawn(group, thunk_of(spawn_all), &spawn_all) == BLZ_OK);
        gate.release();
    }
    REQUIRE(blz_group_destroy(group) == BLZ_OK);
    CHECK(refused.load() == 0);
    CHECK(log.position[normal] == 0);  // before every normal task
    CHECK(log.next.load() == normal + 1);
}

TEST_CASE("unknown spawn flags are still refused", "[priority][bad_input]") {
    Pool pool(1);
    int never = 0;
    for (uint32_t flags : {4u, BLZ_SPAWN_HIGH_PRIORITY | 4u, 0x80000000u}) {
        INFO("flags " << flags);
        CHECK(spawn_flagged(pool, nullptr, [](void *p) { ++*static_cast<int *>(p); }, &never, flags) == BLZ_EINVAL);
    }
    CHECK(pool.destroy() == BLZ_OK);
    CHECK(never == 0);
}

// ---- per-worker statistics ----

blz_stats worker_stats_of(blz_pool *pool, uint32_t index) {
    blz_stats stats;
    stats.struct_size = sizeof(stats);
    REQUIRE(blz_worker_stats(pool, index, &stats) == BLZ_OK);
    return stats;
}

// The fields every snapshot only ever increases.
constexpr uint64_t blz_stats::*kMonotonic[] = {
    &blz_stats::jobs_executed, &blz_stats::steals,       &blz_stats::sleeps, &blz_stats::wakeups,
    &blz_stats::spurious_wakeups, &blz_stats::sleep_aborts, &blz_stats::run_ns, &blz_stats::search_ns,
    &blz_stats::sleep_ns,
};

TEST_CASE("per-worker statistics sum to the pool's", "[stats]") {
    Watchdog watchdog("per-worker stats", seconds(120));
    const uint32_t workers = 3;
    Pool pool(workers);
    REQUIRE(blz_test::fib(pool, 20) == 6765);
    std::atomic<int> counter{0};
    for (int i = 0; i < 100; ++i) REQUIRE(blz_spawn(pool, blz_test::count_into, &counter, nullptr) == BLZ_OK);
    REQUIRE(eventually([&] { return counter.load() == 100; }));
    REQUIRE(wait_until_asleep(pool, milliseconds(60000)));
    // Every worker blocked, nobody posts: no worker changes phase, and
    // every counter only grows between the two pool snapshots.
    const blz_stats before = stats_of(pool);
    std::vector<blz_stats> each;
    for (uint32_t i = 0; i < workers; ++i) each.push_back(worker_stats_of(pool, i));
    const blz_stats after = stats_of(pool);
    for (auto field : kMonotonic) {
        uint64_t sum = 0;
        for (const blz_stats &w : each) sum += w.*field;
        CHECK(before.*field <= sum);
        CHECK(sum <= after.*field);
    }
    uint32_t sleeping = 0;
    for (const blz_stats &w : each) {
        CHECK(w.num_threads == 1);
        CHECK(w.jobs_injected == 0);  // a pool-wide counter
        CHECK(w.sleep_ns > 0);        // blocked right now, and counted up to now
        sleeping += w.sleeping_now;
        CHECK(w.inactive_now == 1);
    }
    CHECK(sleeping == workers);
    CHECK(before.jobs_executed >= 100);
    CHECK(before.run_ns > 0);
}

TEST_CASE("blz_worker_stats fills the prefix its struct_size asks for", "[stats]") {
    Pool pool(2);
    REQUIRE(blz_test::fib(pool, 10) == 55);
    unsigned char raw[sizeof(blz_stats) + 16];
    std::memset(raw, 0xAB, sizeof(raw));
    const uint32_t size = offsetof(blz_stats, run_ns);  // a struct from before the times
    std::memcpy(raw, &size, sizeof(size));
    REQUIRE(blz_worker_stats(pool, 1, reinterpret_cast<blz_stats *>(raw)) == BLZ_OK);
    size_t untouched = 0;
    for (size_t i = size; i < sizeof(raw); ++i) untouched += raw[i] == 0xAB;
    CHECK(untouched == sizeof(raw) - size);
    uint32_t n;
    std::memcpy(&n, raw + offsetof(blz_stats, num_threads), sizeof(n));
    CHECK(n == 1);
}

TEST_CASE("blz_worker_stats refuses bad input", "[stats][bad_input]") {
    Pool pool(2);
    blz_stats stats;
    stats.struct_size = sizeof(stats);
    CHECK(blz_worker_stats(nullptr, 0, &stats) == BLZ_EINVAL);
    CHECK(blz_worker_stats(pool, 0, nullptr) == BLZ_EINVAL);
    CHECK(blz_worker_stats(pool, 2, &stats) == BLZ_EINVAL);  // one past the last worker
    CHECK(blz_worker_stats(pool, UINT32_MAX, &stats) == BLZ_EINVAL);
    stats.struct_size = 3;
    CHECK(blz_worker_stats(pool, 0, &stats) == BLZ_EINVAL);
    stats.struct_size = sizeof(stats);
    CHECK(blz_worker_stats(pool, 1, &stats) == BLZ_OK);
    CHECK(blz_pool_stats(pool, nullptr) == BLZ_EINVAL);
}

// Snapshots taken while workers change phase all the time (tiny tasks
// from outside, the cap lowered and lifted): each worker's three times
// never decrease from one snapshot to the next, and the pool's counts of
// sleeping and inactive workers never exceed its size. A time limit, not
// a count: sanitizer builds take several times longer per snapshot.
TEST_CASE("statistics never go backwards and counts stay within the pool", "[stats]") {
    Watchdog watchdog("monotonic statistics", seconds(240));
    const uint32_t workers = 2;
    // Before the pool: its detached tasks may still run after churn ends,
    // until the pool's destroy has drained them.
    std::atomic<int> counter{0};
    Pool pool(workers);
    std::atomic<bool> stop{false};
    std::thread churn([&] {
        for (uint32_t round = 0; !stop.load(); ++round) {
            for (int i = 0; i < 20; ++i) (void)blz_spawn(pool, blz_test::count_into, &counter, nullptr);
            (void)blz_pool_set_max_active(pool, round % 2 == 0 ? 1 : 0);
            std::this_thread::sleep_for(std::chrono::microseconds(round % 7 == 0 ? 200 : 5));
        }
        (void)blz_pool_set_max_active(pool, 0);
    });
    uint64_t snapshots = 0, decreases = 0, over_size = 0;
    uint64_t last[workers][3] = {};
    uint64_t last_pool[3] = {};
    constexpr uint64_t blz_stats::*kTimes[3] = {&blz_stats::run_ns, &blz_stats::search_ns, &blz_stats::sleep_ns};
    const auto until = std::chrono::steady_clock::now() + seconds(4);
    while (std::chrono::steady_clock::now() < until && snapshots < 20'000'000) {
        for (uint32_t w = 0; w < workers; ++w) {
            blz_stats one;
            one.struct_size = sizeof(one);
            if (blz_worker_stats(pool, w, &one) != BLZ_OK) continue;
            for (int f = 0; f < 3; ++f) {
                decreases += one.*kTimes[f] < last[w][f];
                last[w][f] = one.*kTimes[f];
            }
            over_size += one.sleeping_now > one.inactive_now || one.inactive_now > 1;
            ++snapshots;
        }
        blz_stats all;
        all.struct_size = sizeof(all);
        if (blz_pool_stats(pool, &all) != BLZ_OK) continue;
        for (int f = 0; f < 3; ++f) {
            decreases += all.*kTimes[f] < last_pool[f];
            last_pool[f] = all.*kTimes[f];
        }
        over_size += all.sleeping_now > all.inactive_now || all.inactive_now > all.num_threads;
        ++snapshots;
    }
    stop.store(true);
    churn.join();
    INFO(snapshots << " snapshots");
    CHECK(snapshots > 10'000);
    CHECK(decreases == 0);
    CHECK(over_size == 0);
}

}  // namespace
