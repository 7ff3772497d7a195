// The OS refuses a worker thread. This program links a build of the
// library with BLZ_FAULT_INJECTION (tests/fault/meson.build), whose
// worker-thread creation fails with EAGAIN for the worker index stored in
// blz::fault::g_refuse_thread. For every pool size and every refused index:
// blz_pool_create returns BLZ_ETHREAD and leaves *out_pool alone, the
// workers already started ran their start and stop hooks and are gone (the
// process's thread count is back), every allocation was freed (operator
// new/delete are counted: live_allocations.cpp), and nothing hangs (a
// watchdog). tests/api_lifecycle.cpp covers the same path with a real
// refusal by the OS (RLIMIT_AS); here every index is reached exactly.
#include <blitz.h>

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>

#include "live_allocations.hpp"
#include "fault.hpp"
#include "support.hpp"

namespace {

using std::chrono::seconds;

struct Hooks {
    std::atomic<int> starts{0};
    std::atomic<int> stops{0};
};

void on_start(void *user, uint32_t) { static_cast<Hooks *>(user)->starts.fetch_add(1); }
void on_stop(void *user, uint32_t) { static_cast<Hooks *>(user)->stops.fetch_add(1); }

using blz_test::sentinel;


struct Refusal {
    blz_status status;
    blz_pool *out;
    int starts, stops;
    int64_t leaked_blocks;
    bool threads_gone;
};

Refusal create_with_refused_thread(uint32_t workers, int64_t refused_index) {
    Hooks hooks;
    blz_pool_config config;
    blz_pool_config_init(&config);
    config.num_threads = workers;
    config.on_thread_start = on_start;
    config.on_thread_stop = on_stop;
    config.user = &hooks;
    const int threads_before = blz_test::threads_alive();
    const int64_t blocks_before = blz_test::live_allocations();
    blz::fault::g_refuse_thread.store(refused_index);
    blz_pool *pool = sentinel<blz_pool>();
    blz_status status = blz_pool_create(&config, &pool);
    blz::fault::g_refuse_thread.store(-1);
    bool gone = blz_test::threads_back_to(threads_before);
    return {status, pool, hooks.starts.load(), hooks.stops.load(),
            blz_test::live_allocations() - blocks_before, gone};
}

}  // namespace

TEST_CASE("fault: the OS refuses worker k of n: BLZ_ETHREAD, nothing leaks, nothing hangs", "[fault][ethread]") {
    blz_test::Watchdog dog("refused worker threads", seconds(300));
    if (!blz_test::allocations_counted()) WARN("operator new is not counted in this build (clang sanitizer runtime); the block checks are void");
    for (uint32_t workers : {1u, 2u, 3u, 8u}) {
        for (uint32_t k = 0; k < workers; ++k) {
            INFO(workers << " workers, worker " << k << " refused");
            Refusal r = create_with_refused_thread(workers, k);
            CHECK(r.status == BLZ_ETHREAD);
            CHECK(r.out == sentinel<blz_pool>());
            // Workers 0 .. k-1 had started: each ran its start hook, and was
            // stopped (its stop hook ran) before create returned.
            CHECK(r.starts == static_cast<int>(k));
            CHECK(r.stops == static_cast<int>(k));
            CHECK(r.threads_gone);
            CHECK(r.leaked_blocks == 0);
        }
    }
}

TEST_CASE("fault: after refusals, pools are created and work as before", "[fault][ethread]") {
    blz_test::Watchdog dog("pools after refusals", seconds(120));
    if (!blz_test::allocations_counted()) WARN("operator new is not counted in this build (clang sanitizer runtime); the block checks are void");
    const int threads_before = blz_test::threads_alive();
    const int64_t blocks_before = blz_test::live_allocations();
    // No Catch2 assertion inside the loop: they allocate, and the leak
    // check below must count only the pools' allocations.
    int wrong_status = 0, leaks = 0, wrong_sums = 0, failed_pools = 0;
    for (int round = 0; round < 200; ++round) {
        uint32_t workers = 1 + static_cast<uint32_t>(round % 4);
        Refusal r = create_with_refused_thread(workers, round % static_cast<int>(workers));
        wrong_status += r.status != BLZ_ETHREAD;
        leaks += r.leaked_blocks != 0 || !r.threads_gone;
        blz_pool_config config;
        blz_pool_config_init(&config);
        config.num_threads = workers;
        blz_pool *pool = nullptr;
        if (blz_pool_create(&config, &pool) != BLZ_OK) {
            ++failed_pools;
            continue;
        }
        blz_test::IndexSum sum;
        failed_pools += blz_parallel_for(pool, 0, 1000, 1, blz_test::IndexSum::add_range, &sum) != BLZ_OK;
        wrong_sums += sum.total.load() != 1000u * 999u / 2;
        failed_pools += blz_pool_destroy(pool) != BLZ_OK;
    }
    const int64_t blocks_after = blz_test::live_allocations();
    CHECK(wrong_status == 0);
    CHECK(leaks == 0);
    CHECK(failed_pools == 0);
    CHECK(wrong_sums == 0);
    CHECK(blocks_after == blocks_before);
    CHECK(blz_test::threads_back_to(threads_before));
}
