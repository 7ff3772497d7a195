// Shared helpers for the tests: a pool that is always destroyed, waiting
// for a pool to fall asleep, a watchdog that turns a hang into a failure
// with a message instead of a stuck test suite, fib by fork-join, out
// pointer sentinels, lambdas as C callbacks, gates that hold jobs open, and
// what a forked child may do under each sanitizer.
#pragma once

#include <blitz.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

namespace blz_test {

// Which sanitizer instruments this build: g++ defines __SANITIZE_*__,
// clang answers __has_feature.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)
constexpr bool kAddressSanitizer = __has_feature(address_sanitizer);
#else
constexpr bool kAddressSanitizer = false;
#endif
#if defined(__SANITIZE_THREAD__)
constexpr bool kThreadSanitizer = true;
#elif defined(__has_feature)
constexpr bool kThreadSanitizer = __has_feature(thread_sanitizer);
#else
constexpr bool kThreadSanitizer = false;
#endif

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

// Waits until all but `awake` workers of pool are blocked (a worker waiting
// for the others passes 1); false after `timeout`.
inline bool wait_until_asleep(blz_pool *pool, std::chrono::milliseconds timeout, uint32_t awake = 0) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (stats_of(pool).sleeping_now + awake != blz_pool_num_threads(pool)) {
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

// A value no successful call writes to an out pointer: a call that fails
// must leave it as it was.
template <class T>
T *sentinel() {
    return reinterpret_cast<T *>(uintptr_t{0x5EA1F00D});
}

// fib(n) by recursive blz_fork_join without cutoff, started by blz_call.
// A failing call anywhere in the tree makes the result kFibFailed or more,
// never a fib number of the sizes the tests use.
constexpr uint64_t kFibFailed = uint64_t{1} << 62;

struct FibArgs {
    blz_pool *pool;
    unsigned n;
    uint64_t result;
};

inline void fib_task(void *arg) {
    auto *f = static_cast<FibArgs *>(arg);
    if (f->n < 2) {
        f->result = f->n;
        return;
    }
    FibArgs a{f->pool, f->n - 1, 0};
    FibArgs b{f->pool, f->n - 2, 0};
    if (blz_fork_join(f->pool, fib_task, &a, fib_task, &b) != BLZ_OK) {
        f->result = kFibFailed;
        return;
    }
    f->result = a.result + b.result;
}

inline uint64_t fib(blz_pool *pool, unsigned n) {
    FibArgs f{pool, n, 0};
    return blz_call(pool, fib_task, &f) == BLZ_OK ? f.result : kFibFailed;
}

// A lambda as a blz_fn (or blz_range_fn): pass thunk_of(f) with &f.
template <class F>
struct Thunk {
    static void run(void *arg) { (*static_cast<F *>(arg))(); }
};
template <class F>
blz_fn thunk_of(F &) {
    return &Thunk<F>::run;
}
template <class F>
struct RangeThunk {
    static void run(void *arg, size_t lo, size_t hi) { (*static_cast<F *>(arg))(lo, hi); }
};
template <class F>
blz_range_fn range_thunk_of(F &) {
    return &RangeThunk<F>::run;
}

// Runs `f` on a worker of `pool` through blz_call; f must not throw.
template <class F>
blz_status on_worker(blz_pool *pool, F f) {
    return blz_call(pool, thunk_of(f), &f);
}

// Waits (politely) until pred() holds, at most `limit`; false if it never
// did. Also usable on workers, where a false result is recorded, not asserted.
template <class P>
bool eventually(P pred, std::chrono::seconds limit = std::chrono::seconds(60)) {
    auto deadline = std::chrono::steady_clock::now() + limit;
    while (!pred()) {
        if (std::chrono::steady_clock::now() > deadline) return false;
        std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
    return true;
}

// Holds jobs open: a job passes through the gate, which blocks it until the
// test opens it.
struct Gate {
    std::atomic<int> entered{0};
    std::atomic<bool> open{false};
    void pass() {
        entered.fetch_add(1);
        while (!open.load()) std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
    bool wait_entered(int n = 1) {
        return eventually([&] { return entered.load() >= n; });
    }
    void release() { open.store(true); }
};
inline void gate_fn(void *gate) { static_cast<Gate *>(gate)->pass(); }

// Opens a gate at scope exit, so a failed REQUIRE never leaves a worker
// blocked (and the pool's destructor hanging).
struct OpenOnExit {
    Gate &gate;
    ~OpenOnExit() { gate.release(); }
};

inline void count_into(void *counter) { static_cast<std::atomic<int> *>(counter)->fetch_add(1); }

// An exception type of the tests' own, to check that the type and its
// data arrive (the C++ layer's tests).
struct test_error {
    int code;
};

// Counts its live instances: callables, callbacks and results that must not leak.
struct tracked {
    inline static std::atomic<int> live{0};
    tracked() { live.fetch_add(1); }
    tracked(const tracked &) { live.fetch_add(1); }
    tracked(tracked &&) noexcept { live.fetch_add(1); }
    tracked &operator=(const tracked &) = default;
    tracked &operator=(tracked &&) = default;
    ~tracked() { live.fetch_sub(1); }
};

// In a forked child: default SIGALRM (a hang kills the child) armed for `seconds`.
inline void child_prologue(unsigned alarm_seconds) {
    std::signal(SIGALRM, SIG_DFL);
    alarm(alarm_seconds);
}

// Waits for `pid`, across EINTR; its status as waitpid gives it.
inline int wait_for_child(pid_t pid) {
    if (pid <= 0) throw std::runtime_error("fork failed");
    int status = 0;
    pid_t waited;
    do {
        waited = waitpid(pid, &status, 0);
    } while (waited < 0 && errno == EINTR);
    if (waited != pid) throw std::runtime_error("waitpid failed");
    return status;
}

// Forks; the child runs body() (returning its exit code) and _exits: it
// never returns into the test framework. A hang in the child becomes
// SIGALRM. Returns the child's status as waitpid gives it.
template <class F>
int run_forked(F body, unsigned alarm_seconds = 30) {
    std::fflush(nullptr);
    pid_t pid = fork();
    if (pid == 0) {
        child_prologue(alarm_seconds);
        int rc = body();
        std::fflush(stderr);
        _exit(rc);
    }
    return wait_for_child(pid);
}

// The sum of the indices a blz_parallel_for covered, each range adding its own.
struct IndexSum {
    std::atomic<uint64_t> total{0};
    static void add_range(void *self, size_t lo, size_t hi) {
        uint64_t sum = 0;
        for (size_t i = lo; i < hi; ++i) sum += i;
        static_cast<IndexSum *>(self)->total.fetch_add(sum);
    }
};

// What the child of a multi-threaded fork may do beyond the calls that must
// return BLZ_EFORK (those neither allocate nor lock). Two sanitizer
// runtimes restrict it, and only their builds skip those steps:
//  - g++ 12's ThreadSanitizer cannot start threads in such a child
//    ("starting new threads after multi-threaded fork is not supported";
//    with die_after_fork=0 it still fails on a reused thread id): no new
//    pool there. clang 14's runtime copes.
//  - AddressSanitizer's allocator (g++ 12's and clang 14's) is not
//    fork-safe: a child deadlocks in malloc or free when a parent thread
//    held the allocator's lock at the fork (seen: SizeClassAllocator64's
//    region mutex). Only a child forked while parent threads allocate must
//    stay off the heap.
#if defined(__SANITIZE_THREAD__) && !defined(__clang__)
constexpr bool kForkChildMayStartThreads = false;
#else
constexpr bool kForkChildMayStartThreads = true;
#endif
constexpr bool kAllocatorForkSafe = !kAddressSanitizer;

}  // namespace blz_test
