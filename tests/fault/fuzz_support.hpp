// The call-sequence fuzzer's plumbing (tests/fault/fuzz_calls.cpp): its
// random streams, its command line, how it reports a violation with the
// seed that replays it, and what the watchdog reads to name a hang.
#pragma once

#include <atomic>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <mutex>
#include <set>
#include <string>
#include <unistd.h>

namespace fuzz {

inline uint64_t now_ns() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return uint64_t(ts.tv_sec) * 1000000000u + uint64_t(ts.tv_nsec);
}

inline void sleep_us(uint32_t us) {
    timespec pause{time_t(us / 1000000), long(us % 1000000) * 1000};
    nanosleep(&pause, nullptr);
}

// SplitMix64: a whole stream from one 64-bit seed, and a good mixer for
// deriving the seeds of sub-streams. Every choice the fuzzer makes comes
// from one of these; none is shared between threads.
class Rng {
public:
    explicit Rng(uint64_t seed) : state_(mix(seed)) {}

    static uint64_t mix(uint64_t z) {
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
        return z ^ (z >> 31);
    }
    uint64_t next() { return mix(state_ += 0x9E3779B97F4A7C15ULL); }
    // A number in [0, n); 0 when n is 0.
    uint32_t below(uint32_t n) { return uint32_t(((next() >> 32) * n) >> 32); }
    bool percent(uint32_t p) { return below(100) < p; }
    // A stream of its own, for choices whose number depends on outcomes
    // (a retry loop): drawing it costs this stream exactly one number.
    Rng fork() { return Rng(next()); }

private:
    uint64_t state_;
};

// The stream of driver thread `index` for `seed`.
inline Rng driver_stream(uint64_t seed, uint32_t index) {
    return Rng(seed ^ Rng::mix(0xD1B54A32D192ED03ULL * (index + 1)));
}

struct Options {
    uint64_t seed = 0;
    double seconds = 0;       // 0: bounded by iterations
    uint64_t iterations = 0;  // per driver thread; 0: bounded by seconds
    uint32_t threads = 4;
    std::string mutant = "none";
    std::string catch_mutant;  // --catch: run with this mutant in a child, expect it caught
    bool mutant_table = false;
    bool replay_check = false;
    uint32_t watchdog_seconds = 0;  // 0: the build's default
    uint32_t pause_on_hang = 0;     // seconds a hang report waits before the abort, for a debugger
    std::set<int> skip_known;       // issue 27's items whose checks or operations are left out
    std::string program;

    bool skips(int item) const { return skip_known.count(item) != 0; }
};

inline Options &options() {
    static Options o;
    return o;
}

inline std::string replay_command() {
    const Options &o = options();
    std::string cmd = o.program + " --seed " + std::to_string(o.seed) + " --threads " + std::to_string(o.threads);
    if (o.iterations != 0) {
        cmd += " --iterations " + std::to_string(o.iterations);
    } else {
        char s[32];
        std::snprintf(s, sizeof(s), "%g", o.seconds);
        cmd += std::string(" --seconds ") + s;
    }
    if (o.mutant != "none") cmd += " --mutant " + o.mutant;
    if (!o.skip_known.empty()) {
        cmd += " --skip-known ";
        bool first = true;
        for (int item : o.skip_known) {
            if (!first) cmd += ',';
            cmd += std::to_string(item);
            first = false;
        }
    }
    return cmd;
}

// Where each thread was, for the reports: the seed replays each driver's
// choices, and a report names the operation under way.
struct Activity {
    std::atomic<const char *> what{"idle"};
    std::atomic<uint64_t> since_ns{0};
    std::atomic<uint64_t> op_index{0};
    std::atomic<int> slot{-1};
    std::atomic<bool> busy{false};

    void begin(const char *op, uint64_t index, int on_slot) {
        // relaxed: read only by the watchdog and the reports, as hints.
        what.store(op, std::memory_order_relaxed);
        op_index.store(index, std::memory_order_relaxed);
        slot.store(on_slot, std::memory_order_relaxed);
        since_ns.store(now_ns(), std::memory_order_relaxed);
        busy.store(true, std::memory_order_relaxed);
    }
    void end() { busy.store(false, std::memory_order_relaxed); }
};

// Bumped by every completed operation and task: the watchdog's sign of life.
inline std::atomic<uint64_t> g_progress{0};
inline void progress() { g_progress.fetch_add(1, std::memory_order_relaxed); }  // relaxed: a counter

// Prints the activity of every thread, and removes the run's files; set by fuzz_calls.cpp.
inline void (*g_describe_threads)() = nullptr;
inline void (*g_cleanup)() = nullptr;

// The first violation reports and ends the process; a second thread that
// finds one meanwhile waits for that end instead of interleaving its text.
[[noreturn]] inline void violation(const char *format, ...) {
    static std::mutex once;
    once.lock();  // never unlocked: the process ends below
    std::fprintf(stderr, "fuzz_calls: VIOLATION: ");
    va_list args;
    va_start(args, format);
    std::vfprintf(stderr, format, args);
    va_end(args);
    std::fprintf(stderr, "\nfuzz_calls: seed %llu; replay: %s\n", static_cast<unsigned long long>(options().seed),
                 replay_command().c_str());
    if (g_describe_threads != nullptr) g_describe_threads();
    std::fflush(stderr);
    std::fflush(stdout);
    if (g_cleanup != nullptr) g_cleanup();
    _exit(1);
}

#define FUZZ_CHECK(cond, ...)                        \
    do {                                             \
        if (!(cond)) ::fuzz::violation(__VA_ARGS__); \
    } while (0)

}  // namespace fuzz
