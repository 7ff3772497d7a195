// Priorities, from the contract in blitz.h (issue 18, part A):
// BLZ_SPAWN_HIGH_PRIORITY jumps a queue of 1000 normal tasks; unknown
// spawn flags give BLZ_EINVAL. No assertion depends on timing: waits are
// for states, under a watchdog.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <vector>

#include "support.hpp"

namespace {

using blz_test::Gate;
using blz_test::OpenOnExit;
using blz_test::Pool;
using blz_test::thunk_of;
using blz_test::Watchdog;
using std::chrono::seconds;

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
    for (uint32_t flags : {16u, BLZ_SPAWN_HIGH_PRIORITY | 16u, 0x80000000u}) {  // 8: BLZ_SPAWN_AFTER_ANY_END (0.3)
        INFO("flags " << flags);
        CHECK(spawn_flagged(pool, nullptr, [](void *p) { ++*static_cast<int *>(p); }, &never, flags) == BLZ_EINVAL);
    }
    CHECK(pool.destroy() == BLZ_OK);
    CHECK(never == 0);
}

}  // namespace
