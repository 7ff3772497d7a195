// Placement, from the contract in blitz.h (issue 18, part A): CPU
// placement (blz_pool_config.cpu_list, BLZ_CPU_LIST) read back with
// sched_getaffinity inside jobs; a pool made or released on a pinned thread
// uses the process's CPUs; bad input gives BLZ_EINVAL. No assertion depends
// on timing: waits are for states, under a watchdog.
#include <catch2/catch.hpp>

#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "support.hpp"

namespace {

using blz_test::eventually;
using blz_test::Pool;
using blz_test::Watchdog;
using std::chrono::seconds;

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

}  // namespace
