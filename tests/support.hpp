// Shared helpers for the tests: a pool that is always destroyed, waiting
// for a pool to fall asleep, and a watchdog that turns a hang into a
// failure with a message instead of a stuck test suite.
#pragma once

#include <blitz.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <thread>
#include <unistd.h>

namespace blz_test {

// A pool destroyed at scope exit.
class Pool {
public:
    explicit Pool(uint32_t num_threads) {
        blz_pool_config config;
        blz_pool_config_init(&config);
        config.num_threads = num_threads;
        blz_status status = blz_pool_create(&config, &pool_);
        if (status != BLZ_OK) throw std::runtime_error(blz_status_string(status));
    }
    ~Pool() {
        if (pool_ != nullptr) blz_pool_destroy(pool_);
    }
    Pool(const Pool &) = delete;
    Pool &operator=(const Pool &) = delete;

    blz_pool *get() const { return pool_; }
    operator blz_pool *() const { return pool_; }
    // Destroys now (the destructor then does nothing) and returns the status.
    blz_status destroy() {
        blz_status status = blz_pool_destroy(pool_);
        pool_ = nullptr;
        return status;
    }

private:
    blz_pool *pool_ = nullptr;
};

inline blz_stats stats_of(blz_pool *pool) {
    blz_stats stats;
    stats.struct_size = sizeof(stats);
    if (blz_pool_stats(pool, &stats) != BLZ_OK) throw std::runtime_error("blz_pool_stats failed");
    return stats;
}

// Waits until every worker of pool is blocked; false after `timeout`.
inline bool wait_until_asleep(blz_pool *pool, std::chrono::milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (stats_of(pool).sleeping_now != blz_pool_num_threads(pool)) {
        if (std::chrono::steady_clock::now() > deadline) return false;
        std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    return true;
}

// Kills the process with a message if not disarmed within `limit`: a hang
// (a lost wake-up, a deadlock) becomes a failed test, never a stuck suite.
class Watchdog {
public:
    Watchdog(const char *what, std::chrono::seconds limit) : what_(what) {
        thread_ = std::thread([this, limit] {
            auto deadline = std::chrono::steady_clock::now() + limit;
            while (!done_.load()) {
                if (std::chrono::steady_clock::now() > deadline) {
                    std::fprintf(stderr, "WATCHDOG: '%s' still running after %lld s: hang or lost wake-up\n",
                                 what_, static_cast<long long>(limit.count()));
                    std::fflush(stderr);
                    _exit(97);
                }
                std::this_thread::sleep_for(std::chrono::milliseconds(20));
            }
        });
    }
    ~Watchdog() {
        done_.store(true);
        thread_.join();
    }
    Watchdog(const Watchdog &) = delete;
    Watchdog &operator=(const Watchdog &) = delete;

private:
    const char *what_;
    std::atomic<bool> done_{false};
    std::thread thread_;
};

}  // namespace blz_test
