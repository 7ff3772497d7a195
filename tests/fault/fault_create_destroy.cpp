// 10^4 pools created and destroyed with work in flight, and not one block
// or thread left behind. Each cycle creates a pool (1 to 3 workers), spawns
// detached tasks that spawn more from their worker, a task whose handle is
// joined only after the pool is gone, and group tasks of a group destroyed
// only after the pool; then destroys the pool at once, while that work is
// queued or running. Every task must have run, and the count of blocks from
// operator new (live_allocations.cpp) and the process's thread count must
// be exactly what they were before the first cycle. The cycles run on a
// thread of their own, joined before the count: a thread that spawns and
// joins tasks keeps a bounded cache of task blocks for its next spawns
// (lib/job_memory.hpp), which goes back to the heap when the thread ends.
// Under -Db_sanitize=address LeakSanitizer checks the same at exit.
#include <blitz.h>

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>

#include "live_allocations.hpp"
#include "support.hpp"

namespace {

constexpr int kCycles = 10000;
constexpr int kDetached = 6;
constexpr int kGroupTasks = 4;
// Per cycle: each detached task spawns one child; plus the joined task and the group's.
constexpr int kTasksPerCycle = 2 * kDetached + 1 + kGroupTasks;

struct Cycle {
    blz_pool *pool = nullptr;
    std::atomic<int> ran{0};
    std::atomic<int> refused{0};
};

void leaf(void *arg) { static_cast<Cycle *>(arg)->ran.fetch_add(1); }

// Runs on a worker: a spawn from inside goes to the worker's own deque.
void parent(void *arg) {
    auto *cycle = static_cast<Cycle *>(arg);
    cycle->ran.fetch_add(1);
    if (blz_spawn(cycle->pool, leaf, cycle, nullptr) != BLZ_OK) cycle->refused.fetch_add(1);
}

// One cycle; false on any unexpected status.
bool run_cycle(uint32_t workers) {
    blz_pool_config config;
    blz_pool_config_init(&config);
    config.num_threads = workers;
    Cycle cycle;
    if (blz_pool_create(&config, &cycle.pool) != BLZ_OK) return false;
    bool ok = true;
    blz_group *group = nullptr;
    ok &= blz_group_create(cycle.pool, &group) == BLZ_OK;
    blz_task *task = nullptr;
    ok &= blz_spawn(cycle.pool, leaf, &cycle, &task) == BLZ_OK;
    for (int i = 0; i < kDetached; ++i) ok &= blz_spawn(cycle.pool, parent, &cycle, nullptr) == BLZ_OK;
    for (int i = 0; i < kGroupTasks && group != nullptr; ++i) ok &= blz_group_spawn(group, leaf, &cycle) == BLZ_OK;
    ok &= blz_pool_destroy(cycle.pool) == BLZ_OK;  // the work above is still queued or running
    if (task != nullptr) ok &= blz_join(task) == BLZ_OK;  // the handle outlives its pool
    if (group != nullptr) ok &= blz_group_destroy(group) == BLZ_OK;
    ok &= cycle.refused.load() == 0;  // spawns by accepted work are accepted during destroy
    ok &= cycle.ran.load() == kTasksPerCycle;
    return ok;
}


}  // namespace

TEST_CASE("fault: 10^4 create/destroy cycles with tasks in flight leave no block and no thread", "[fault][leak]") {
    blz_test::Watchdog dog("create/destroy cycles", std::chrono::seconds(600));
    if (!blz_test::allocations_counted()) WARN("operator new is not counted in this build (clang sanitizer runtime); the block checks are void");
    const int threads_before = blz_test::threads_alive();
    const int64_t blocks_before = blz_test::live_allocations();
    int failed_cycles = 0;  // no Catch2 assertion in the loop: they allocate
    std::thread([&] {
        for (int i = 0; i < kCycles; ++i) failed_cycles += !run_cycle(1 + static_cast<uint32_t>(i % 3));
    }).join();
    const int64_t blocks_after = blz_test::live_allocations();
    CHECK(failed_cycles == 0);
    CHECK(blocks_after == blocks_before);
    CHECK(blz_test::threads_back_to(threads_before));
}
