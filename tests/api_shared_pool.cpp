// 0.3 blz_pool_shared, the process pool, from the contract in blitz.h:
// every caller gets the same pool (also many threads at once); a later
// config that differs is refused with BLZ_EINVAL and changes nothing;
// blz_pool_destroy and blz_pool_release on its handle give up one
// reference and never take the pool from under another user; the last one
// destroys it as they destroy any pool (waiting for accepted work), and
// the next call makes a new pool; BLZ_NUM_THREADS sizes it; in a forked
// child the parent's handle says BLZ_EFORK and blz_pool_shared makes a
// fresh pool.
//
// Every case starts and ends with no reference held, so that each one
// creates the pool afresh. Gates hold the dangerous interleavings open;
// every case runs under a watchdog.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <thread>
#include <vector>

#include "support.hpp"

namespace {

using blz_test::eventually;
using blz_test::Gate;
using blz_test::OpenOnExit;
using blz_test::run_forked;
using blz_test::thunk_of;
using blz_test::Watchdog;
using std::chrono::seconds;

blz_pool *acquire(const blz_pool_config *config = nullptr) {
    blz_pool *pool = nullptr;
    REQUIRE(blz_pool_shared(config, &pool) == BLZ_OK);
    REQUIRE(pool != nullptr);
    return pool;
}

// BLZ_NUM_THREADS and BLZ_CPU_LIST as the case needs them, put back after.
// (Only this thread calls setenv, and only while no pool is being made.)
struct ScopedEnv {
    ScopedEnv(const char *name, const char *value) : name_(name) {
        if (const char *old = std::getenv(name)) {
            had_ = true;
            old_ = old;
        }
        if (value != nullptr) {
            setenv(name, value, 1);
        } else {
            unsetenv(name);
        }
    }
    ~ScopedEnv() {
        if (had_) {
            setenv(name_, old_.c_str(), 1);
        } else {
            unsetenv(name_);
        }
    }
    const char *name_;
    bool had_ = false;
    std::string old_;
};

struct Done {
    std::atomic<int> calls{0};
    std::atomic<blz_status> status{1};
};
void on_destroyed(void *arg, blz_status status) {
    auto *done = static_cast<Done *>(arg);
    done->status.store(status);
    done->calls.fetch_add(1);
}

// A task that stops at its gate until the test opens it, then counts.
struct GatedTask {
    Gate gate;
    OpenOnExit opener{gate};  // a failed REQUIRE never leaves it stuck
    std::atomic<int> ran{0};
    void operator()() {
        gate.pass();
        ran.fetch_add(1);
    }
};

}  // namespace

TEST_CASE("every caller gets the same pool, also many threads at once", "[api][shared]") {
    Watchdog watchdog("shared same pool", seconds(120));
    constexpr int kThreads = 8;
    for (int round = 0; round < 20; ++round) {
        std::vector<blz_pool *> got(kThreads, nullptr);
        std::vector<blz_status> status(kThreads, 1);
        std::atomic<int> ready{0};
        std::vector<std::thread> threads;
        for (int i = 0; i < kThreads; ++i) {
            threads.emplace_back([&, i] {
                ready.fetch_add(1);
                while (ready.load() < kThreads) std::this_thread::yield();  // start together
                status[i] = blz_pool_shared(nullptr, &got[i]);
            });
        }
        for (auto &t : threads) t.join();
        for (int i = 0; i < kThreads; ++i) {
            REQUIRE(status[i] == BLZ_OK);
            REQUIRE(got[i] == got[0]);
        }
        CHECK(blz_test::fib(got[0], 15) == 610);
        // Each reference is given up once, from as many threads at once.
        std::vector<blz_status> released(kThreads, 1);
        threads.clear();
        for (int i = 0; i < kThreads; ++i) {
            threads.emplace_back([&, i] { released[i] = blz_pool_destroy(got[i]); });
        }
        for (auto &t : threads) t.join();
        for (int i = 0; i < kThreads; ++i) CHECK(released[i] == BLZ_OK);
    }
}

TEST_CASE("a later config that differs is refused; one that agrees gets the pool", "[api][shared]") {
    Watchdog watchdog("shared config", seconds(60));
    ScopedEnv cpu_list("BLZ_CPU_LIST", nullptr);
    blz_pool_config config;
    blz_pool_config_init(&config);
    config.num_threads = 3;
    config.thread_name = "shared";
    blz_pool *pool = acquire(&config);
    CHECK(blz_pool_num_threads(pool) == 3);

    blz_pool *same = acquire(nullptr);
    CHECK(same == pool);
    blz_pool_config agree;
    blz_pool_config_init(&agree);
    agree.num_threads = 3;
    CHECK(acquire(&agree) == pool);
    blz_pool_config empty;
    blz_pool_config_init(&empty);  // sets nothing: agrees with any pool
    CHECK(acquire(&empty) == pool);

    auto refused = [&](const blz_pool_config &bad) {
        blz_pool *out = blz_test::sentinel<blz_pool>();
        CHECK(blz_pool_shared(&bad, &out) == BLZ_EINVAL);
        CHECK(out == blz_test::sentinel<blz_pool>());  // untouched
    };
    blz_pool_config bad = agree;
    bad.num_threads = 2;
    refused(bad);
    bad = agree;
    bad.thread_name = "other";
    refused(bad);
    bad = agree;
    bad.cpu_list = "0";
    refused(bad);
    bad = agree;
    bad.stack_size = 1 << 20;
    refused(bad);
    bad = agree;
    bad.on_thread_start = [](void *, uint32_t) {};
    refused(bad);
    blz_pool *out = nullptr;
    CHECK(blz_pool_shared(&config, nullptr) == BLZ_EINVAL);
    bad = agree;
    bad.struct_size = 4;
    CHECK(blz_pool_shared(&bad, &out) == BLZ_EINVAL);

    // Refusals changed nothing: four references, the pool runs until the last.
    CHECK(blz_test::fib(pool, 15) == 610);
    for (int i = 0; i < 3; ++i) {
        REQUIRE(blz_pool_destroy(pool) == BLZ_OK);
        CHECK(blz_test::fib(pool, 12) == 144);  // still there for the holder left
    }
    REQUIRE(blz_pool_destroy(pool) == BLZ_OK);

    // Given up entirely: the next call makes a new pool, from its own config.
    config.num_threads = 2;
    blz_pool *fresh = acquire(&config);
    CHECK(blz_pool_num_threads(fresh) == 2);
    CHECK(blz_pool_destroy(fresh) == BLZ_OK);
}

TEST_CASE("a user giving the pool up while another spawns: the other's work completes", "[api][shared]") {
    Watchdog watchdog("shared release while spawning", seconds(120));
    blz_pool *a = acquire();
    blz_pool *b = acquire();
    REQUIRE(a == b);
    GatedTask held;
    Gate &gate = held.gate;
    std::atomic<int> &ran = held.ran;
    blz_task *task = nullptr;
    REQUIRE(blz_spawn(b, thunk_of(held), &held, &task) == BLZ_OK);
    REQUIRE(gate.wait_entered());

    SECTION("by blz_pool_destroy: returns at once, not waiting for b's task") {
        CHECK(blz_pool_destroy(a) == BLZ_OK);
    }
    SECTION("by blz_pool_release: on_destroyed is called at once with BLZ_OK") {
        Done done;
        CHECK(blz_pool_release(a, &on_destroyed, &done) == BLZ_OK);
        CHECK(done.calls.load() == 1);
        CHECK(done.status.load() == BLZ_OK);
    }
    // b spawns and waits on while a is gone; its gated task still runs.
    std::thread spawner([&] {
        for (int i = 0; i < 200; ++i) {
            if (blz_spawn(b, blz_test::count_into, &ran, nullptr) != BLZ_OK) return;
        }
    });
    spawner.join();
    CHECK(blz_test::fib(b, 15) == 610);
    gate.release();
    CHECK(blz_join(task) == BLZ_OK);
    CHECK(blz_pool_destroy(b) == BLZ_OK);  // the last: waits for the detached tasks
    CHECK(ran.load() == 201);
}

TEST_CASE("the last reference destroys the pool after its accepted work", "[api][shared]") {
    Watchdog watchdog("shared last reference", seconds(120));
    GatedTask held;
    Gate &gate = held.gate;
    std::atomic<int> &ran = held.ran;
    blz_pool *pool = acquire();

    SECTION("blz_pool_release: on_destroyed only once the task ran") {
        REQUIRE(blz_spawn(pool, thunk_of(held), &held, nullptr) == BLZ_OK);
        REQUIRE(gate.wait_entered());
        Done done;
        REQUIRE(blz_pool_release(pool, &on_destroyed, &done) == BLZ_OK);
        // The pool is no longer the process pool: a new call makes another.
        blz_pool *next = acquire();
        CHECK(blz_test::fib(next, 12) == 144);
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        CHECK(done.calls.load() == 0);  // the held task keeps the old one
        gate.release();
        REQUIRE(eventually([&] { return done.calls.load() == 1; }));
        CHECK(done.status.load() == BLZ_OK);
        CHECK(ran.load() == 1);
        CHECK(blz_pool_destroy(next) == BLZ_OK);
    }
    SECTION("blz_pool_destroy: waits for the task") {
        REQUIRE(blz_spawn(pool, thunk_of(held), &held, nullptr) == BLZ_OK);
        REQUIRE(gate.wait_entered());
        std::thread opener_thread([&] {
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
            gate.release();
        });
        CHECK(blz_pool_destroy(pool) == BLZ_OK);
        CHECK(ran.load() == 1);
        opener_thread.join();
    }
    SECTION("from one of its workers: destroy says BLZ_EDEADLK and changes nothing; release works") {
        blz_status from_worker = 1;
        auto last = [&] { from_worker = blz_pool_destroy(pool); };
        REQUIRE(blz_call(pool, thunk_of(last), &last) == BLZ_OK);
        CHECK(from_worker == BLZ_EDEADLK);
        CHECK(blz_test::fib(pool, 12) == 144);
        Done done;
        auto release = [&] { from_worker = blz_pool_release(pool, &on_destroyed, &done); };
        REQUIRE(blz_call(pool, thunk_of(release), &release) == BLZ_OK);
        CHECK(from_worker == BLZ_OK);
        REQUIRE(eventually([&] { return done.calls.load() == 1; }));
        CHECK(done.status.load() == BLZ_OK);
    }
    SECTION("a worker of the pool takes and gives up references of its own") {
        blz_status got = 1;
        blz_status gave = 1;
        blz_pool *inner = nullptr;
        auto body = [&] {
            got = blz_pool_shared(nullptr, &inner);
            gave = blz_pool_destroy(inner);  // not the last: no deadlock
        };
        REQUIRE(blz_call(pool, thunk_of(body), &body) == BLZ_OK);
        CHECK(got == BLZ_OK);
        CHECK(inner == pool);
        CHECK(gave == BLZ_OK);
        CHECK(blz_pool_destroy(pool) == BLZ_OK);
    }
}

TEST_CASE("BLZ_NUM_THREADS sizes the process pool", "[api][shared]") {
    Watchdog watchdog("shared BLZ_NUM_THREADS", seconds(60));
    ScopedEnv cpu_list("BLZ_CPU_LIST", nullptr);
    for (const char *value : {"3", "1", "5"}) {
        ScopedEnv env("BLZ_NUM_THREADS", value);
        blz_pool *pool = acquire();
        const uint32_t expected = static_cast<uint32_t>(std::atoi(value));
        CHECK(blz_pool_num_threads(pool) == expected);
        blz_default_size_info info{};
        info.struct_size = sizeof(info);
        REQUIRE(blz_default_size(&info) == BLZ_OK);
        CHECK(info.num_threads == expected);
        blz_pool_config config;
        blz_pool_config_init(&config);
        config.num_threads = expected;  // the size it has: agrees
        CHECK(acquire(&config) == pool);
        config.num_threads = expected + 1;
        blz_pool *out = nullptr;
        CHECK(blz_pool_shared(&config, &out) == BLZ_EINVAL);
        CHECK(blz_test::fib(pool, 12) == 144);
        CHECK(blz_pool_destroy(pool) == BLZ_OK);
        CHECK(blz_pool_destroy(pool) == BLZ_OK);
    }
}

TEST_CASE("fork(): the parent's process pool is dead in the child, which gets a fresh one", "[api][shared][fork]") {
    Watchdog watchdog("shared fork", seconds(120));
    blz_pool *pool = acquire();
    blz_pool *second = acquire();
    CHECK(blz_test::fib(pool, 15) == 610);
    REQUIRE(blz_test::wait_until_asleep(pool, std::chrono::milliseconds(30000)));
    int status = run_forked([&]() -> int {
        blz_task *task = nullptr;
        if (blz_spawn(pool, blz_test::count_into, nullptr, &task) != BLZ_EFORK) return 10;
        // Giving the parent's handles up: BLZ_EFORK, nothing freed, twice.
        if (blz_pool_destroy(pool) != BLZ_EFORK) return 11;
        Done done;
        if (blz_pool_release(second, &on_destroyed, &done) != BLZ_EFORK) return 12;
        if (done.calls.load() != 1 || done.status.load() != BLZ_EFORK) return 13;
        // Not where the sanitizer runtime cannot start threads in a fork
        // child (tests/support.hpp).
        if (!blz_test::kForkChildMayStartThreads) return 0;
        blz_pool *fresh = nullptr;
        if (blz_pool_shared(nullptr, &fresh) != BLZ_OK) return 14;
        if (fresh == pool) return 15;
        if (blz_test::fib(fresh, 15) != 610) return 16;
        blz_pool *again = nullptr;
        if (blz_pool_shared(nullptr, &again) != BLZ_OK || again != fresh) return 17;
        if (blz_pool_destroy(again) != BLZ_OK) return 18;
        if (blz_pool_destroy(fresh) != BLZ_OK) return 19;
        return 0;
    });
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
    // The parent's pool is untouched.
    CHECK(blz_test::fib(pool, 15) == 610);
    CHECK(blz_pool_destroy(second) == BLZ_OK);
    CHECK(blz_pool_destroy(pool) == BLZ_OK);
}
