// Never lose a wake-up. For pools of 1, 2 and 8 workers, thousands of
// cycles of: wait until every worker sleeps, inject one job from outside,
// check that it runs within a second. A job that does not run while every
// worker sleeps is a lost wake-up: the program prints the cycle, the pool
// size and the pool's counters and ends with _exit (the stranded job would
// make blz_pool_destroy hang, so nothing is cleaned up).
//
// Also: the same through blz_call and through a group, a variant that
// injects while the workers are on their way to sleep, two injectors at
// once, a woken worker that leaves for its own latch instead of taking the
// job it was woken for, and the statistics the cycles must move.
//
// Catch2's macros run on the test thread only; helper threads count.
#include <blitz.h>

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <thread>
#include <unistd.h>

#include "support.hpp"

namespace {

using Clock = std::chrono::steady_clock;

constexpr int kCycles = 10000;
// How long a job injected into a sleeping pool may take to run.
constexpr std::chrono::seconds kWakeLimit{1};
// How long a pool may take to fall asleep when idle (a failure too: an idle pool must be silent).
constexpr std::chrono::milliseconds kAsleepLimit{30000};
// After kWakeLimit, how much longer we wait to tell "late" from "never" in the report.
constexpr std::chrono::seconds kDiagnosisLimit{10};
// Per (test case, pool size); a run takes a few seconds here.
constexpr std::chrono::seconds kCaseLimit{120};

long long ms_since(Clock::time_point start) {
    return static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count());
}

void print_stats(const char *label, blz_pool *pool) {
    blz_stats s;
    s.struct_size = sizeof(s);
    if (blz_pool_stats(pool, &s) != BLZ_OK) {
        std::fprintf(stderr, "  %s: blz_pool_stats failed\n", label);
        return;
    }
    std::fprintf(stderr,
                 "  %s: num_threads=%u sleeping_now=%u inactive_now=%u jobs_injected=%llu jobs_executed=%llu "
                 "sleeps=%llu wakeups=%llu spurious_wakeups=%llu sleep_aborts=%llu\n",
                 label, s.num_threads, s.sleeping_now, s.inactive_now, static_cast<unsigned long long>(s.jobs_injected),
                 static_cast<unsigned long long>(s.jobs_executed), static_cast<unsigned long long>(s.sleeps),
                 static_cast<unsigned long long>(s.wakeups), static_cast<unsigned long long>(s.spurious_wakeups),
                 static_cast<unsigned long long>(s.sleep_aborts));
}

// The failure path: no Catch2 report is possible after this, so the message goes to stderr.
[[noreturn]] void fail_and_exit(const char *variant, uint32_t workers, int cycle, const char *what) {
    std::fprintf(stderr, "LOST WAKE-UP [%s] pool of %u workers, cycle %d: %s\n", variant, workers, cycle, what);
    std::fflush(stderr);
    _exit(98);
}

// Where injected jobs report that they ran.
struct Done {
    blz_pool *pool = nullptr;
    std::mutex mutex;
    std::condition_variable cv;
    uint64_t completed = 0;      // guarded by mutex
    uint64_t not_on_worker = 0;  // guarded by mutex: jobs that ran outside the pool's workers

    // Waits until `completed` reaches `target`; false after `limit`.
    bool wait_for(uint64_t target, std::chrono::milliseconds limit) {
        std::unique_lock<std::mutex> lock(mutex);
        return cv.wait_for(lock, limit, [&] { return completed >= target; });
    }
    uint64_t completed_now() {
        std::lock_guard<std::mutex> lock(mutex);
        return completed;
    }
};

void signal_done(void *p) {
    Done &d = *static_cast<Done *>(p);
    int32_t index = blz_worker_index(d.pool);
    std::lock_guard<std::mutex> lock(d.mutex);
    if (index < 0) ++d.not_on_worker;
    ++d.completed;
    d.cv.notify_all();  // under the lock: the waiter cannot return and reuse Done before we are out
}

// The job was injected `target`-th; wait for it with the 1 s limit, and on
// timeout report (and _exit) with as much of the pool's state as we can see.
void expect_completion(Done &done, uint64_t target, const char *variant, uint32_t workers, int cycle,
                       Clock::time_point injected_at) {
    if (done.wait_for(target, kWakeLimit)) return;
    std::fprintf(stderr, "LOST WAKE-UP [%s] pool of %u workers, cycle %d: the job injected %lld ms ago has not run\n",
                 variant, workers, cycle, ms_since(injected_at));
    print_stats("at the 1 s mark", done.pool);
    if (done.wait_for(target, std::chrono::duration_cast<std::chrono::milliseconds>(kDiagnosisLimit))) {
        std::fprintf(stderr, "  it ran after all, %lld ms after injection (a wake-up later than 1 s)\n",
                     ms_since(injected_at));
    } else {
        print_stats("after 10 more s", done.pool);
        std::fprintf(stderr, "  it never ran: the wake-up was lost\n");
    }
    fail_and_exit(variant, workers, cycle, "injected job not run within 1 s");
}

// Every worker asleep, or fail (an idle pool that never sleeps is a failure too).
void expect_asleep(blz_pool *pool, const char *variant, uint32_t workers, int cycle) {
    if (blz_test::wait_until_asleep(pool, kAsleepLimit)) return;
    std::fprintf(stderr, "[%s] pool of %u workers, cycle %d: the idle pool did not fall asleep within %lld ms\n",
                 variant, workers, cycle, static_cast<long long>(kAsleepLimit.count()));
    print_stats("then", pool);
    std::fflush(stderr);
    FAIL("the idle pool did not fall asleep: variant " << variant << ", " << workers << " workers, cycle " << cycle);
}

// For the variants whose injection blocks the test thread (blz_call,
// blz_group_wait): a thread that watches each cycle and reports the cycle
// that does not finish within kWakeLimit, then _exits after kDiagnosisLimit.
class CycleMonitor {
public:
    CycleMonitor(const char *variant, uint32_t workers, blz_pool *pool)
        : variant_(variant), workers_(workers), pool_(pool), thread_([this] { watch(); }) {}
    ~CycleMonitor() {
        stop_.store(true);
        thread_.join();
    }
    CycleMonitor(const CycleMonitor &) = delete;
    CycleMonitor &operator=(const CycleMonitor &) = delete;

    void begin(int cycle) {
        cycle_.store(cycle);
        start_ns_.store(Clock::now().time_since_epoch().count());
    }
    // The cycle finished; one that finished after kWakeLimit fails here.
    void end() {
        start_ns_.store(kIdle);
        if (late_.load()) {
            std::fprintf(stderr, "  cycle %d finished late, after more than %lld s\n", cycle_.load(),
                         static_cast<long long>(kWakeLimit.count()));
            fail_and_exit(variant_, workers_, cycle_.load(), "injected job not finished within 1 s");
        }
    }

private:
    static constexpr Clock::rep kIdle = -1;

    void watch() {
        while (!stop_.load()) {
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
            Clock::rep start = start_ns_.load();
            if (start == kIdle) continue;
            auto elapsed = Clock::now() - Clock::time_point(Clock::duration(start));
            if (elapsed > kWakeLimit && !late_.exchange(true)) {
                std::fprintf(stderr, "LOST WAKE-UP [%s] pool of %u workers, cycle %d: not finished after 1 s\n",
                             variant_, workers_, cycle_.load());
                print_stats("at the 1 s mark", pool_);
                std::fflush(stderr);
            }
            if (elapsed > kWakeLimit + kDiagnosisLimit && start_ns_.load() == start) {
                print_stats("10 s later", pool_);
                fail_and_exit(variant_, workers_, cycle_.load(), "the blocked call never returned");
            }
        }
    }

    const char *variant_;
    uint32_t workers_;
    blz_pool *pool_;
    std::atomic<int> cycle_{-1};
    std::atomic<Clock::rep> start_ns_{kIdle};
    std::atomic<bool> late_{false};
    std::atomic<bool> stop_{false};
    std::thread thread_;
};

struct Delta {
    uint64_t injected, executed, sleeps, wakeups, spurious, aborts;
};

Delta delta(const blz_stats &before, const blz_stats &after) {
    return {after.jobs_injected - before.jobs_injected, after.jobs_executed - before.jobs_executed,
            after.sleeps - before.sleeps,               after.wakeups - before.wakeups,
            after.spurious_wakeups - before.spurious_wakeups, after.sleep_aborts - before.sleep_aborts};
}

// What every variant checks about the counters over its cycles, and reports.
void check_counters(const char *variant, uint32_t workers, const blz_stats &before, const blz_stats &after,
                    uint64_t jobs, Clock::time_point started) {
    Delta d = delta(before, after);
    double ratio = jobs != 0 ? static_cast<double>(d.wakeups) / static_cast<double>(jobs) : 0.0;
    WARN("[" << variant << "] " << workers << " workers, " << jobs << " injected jobs in " << ms_since(started)
             << " ms: wakeups/job = " << ratio << " (wakeups " << d.wakeups << ", sleeps " << d.sleeps
             << ", spurious " << d.spurious << ", sleep_aborts " << d.aborts << ")");
    INFO("variant " << variant << ", " << workers << " workers");
    CHECK(after.num_threads == workers);
    CHECK(d.injected == jobs);
    CHECK(d.executed == jobs);
    CHECK(d.sleeps > 0);
    CHECK(d.wakeups > 0);
    REQUIRE(after.wakeups != 0);
    // How many wakeups a cycle costs depends on scheduling (reported above);
    // what always holds is that a worker is woken only after it slept.
    CHECK(d.wakeups <= d.sleeps + workers);
}

// The idle pool stays asleep: no worker wakes without a reason.
//
// sleeping_now counts phases, and a worker woken just before (its waker
// already done) shows kSleeping until it gets the CPU back; only then does
// it count its wake-up, search and sleep again. So the quiet window starts
// once two snapshots 50 ms apart agree (a TSan run under load once saw
// such a late-running woken worker count 1 wake-up and 1 sleep inside the
// window, after all 8 workers showed asleep).
void check_silent_when_idle(blz_pool *pool, uint32_t workers) {
    REQUIRE(blz_test::wait_until_asleep(pool, kAsleepLimit));
    blz_stats first = blz_test::stats_of(pool);
    const auto settle_until = Clock::now() + std::chrono::seconds(5);
    for (;;) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        const blz_stats next = blz_test::stats_of(pool);
        const bool settled = next.wakeups == first.wakeups && next.sleeps == first.sleeps &&
                             next.sleeping_now == workers;
        first = next;
        if (settled || Clock::now() > settle_until) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    blz_stats second = blz_test::stats_of(pool);
    INFO(workers << " workers, idle for 200 ms");
    CHECK(second.sleeping_now == workers);
    CHECK(second.wakeups == first.wakeups);
    CHECK(second.sleeps == first.sleeps);
    CHECK(second.jobs_executed == first.jobs_executed);
}

TEST_CASE("sleep/wake: a job spawned into a sleeping pool runs within 1 s, 10^4 cycles", "[sleep]") {
    const uint32_t workers = GENERATE(1u, 2u, 8u);
    const char *variant = "blz_spawn";
    blz_test::Watchdog dog("sleep/wake blz_spawn cycles", kCaseLimit);
    Done done;  // outlives the pool
    blz_test::Pool pool(workers);
    done.pool = pool;

    expect_asleep(pool, variant, workers, -1);
    const blz_stats before = blz_test::stats_of(pool);
    const auto started = Clock::now();
    uint64_t spawn_failures = 0, join_failures = 0;
    for (int cycle = 0; cycle < kCycles; ++cycle) {
        expect_asleep(pool, variant, workers, cycle);
        const bool detached = cycle % 2 == 0;
        blz_task *task = nullptr;
        const auto injected_at = Clock::now();
        if (blz_spawn(pool, &signal_done, &done, detached ? nullptr : &task) != BLZ_OK) {
            ++spawn_failures;
            break;
        }
        expect_completion(done, static_cast<uint64_t>(cycle) + 1, variant, workers, cycle, injected_at);
        if (!detached && blz_join(task) != BLZ_OK) ++join_failures;
    }
    expect_asleep(pool, variant, workers, kCycles);
    const blz_stats after = blz_test::stats_of(pool);
    REQUIRE(spawn_failures == 0);
    CHECK(join_failures == 0);
    REQUIRE(done.completed_now() == static_cast<uint64_t>(kCycles));
    CHECK(done.not_on_worker == 0);
    check_counters(variant, workers, before, after, kCycles, started);
    if (workers == 8) {
        // "at most about one wakeup per injected job" on this machine: reported, not required.
        Delta d = delta(before, after);
        if (d.wakeups > static_cast<uint64_t>(kCycles) * 3 / 2) {
            WARN("8 workers woke " << d.wakeups << " times for " << kCycles << " jobs: more than ~1 per job");
        }
    }
    check_silent_when_idle(pool, workers);
}

TEST_CASE("sleep/wake: blz_call into a sleeping pool returns, 10^4 cycles", "[sleep]") {
    const uint32_t workers = GENERATE(1u, 2u, 8u);
    const char *variant = "blz_call";
    blz_test::Watchdog dog("sleep/wake blz_call cycles", kCaseLimit);
    Done done;  // outlives the pool
    blz_test::Pool pool(workers);
    done.pool = pool;

    expect_asleep(pool, variant, workers, -1);
    const blz_stats before = blz_test::stats_of(pool);
    const auto started = Clock::now();
    uint64_t call_failures = 0;
    {
        CycleMonitor monitor(variant, workers, pool);
        for (int cycle = 0; cycle < kCycles; ++cycle) {
            expect_asleep(pool, variant, workers, cycle);
            monitor.begin(cycle);
            if (blz_call(pool, &signal_done, &done) != BLZ_OK) ++call_failures;
            monitor.end();
            if (done.completed_now() != static_cast<uint64_t>(cycle) + 1) break;
        }
    }
    expect_asleep(pool, variant, workers, kCycles);
    const blz_stats after = blz_test::stats_of(pool);
    REQUIRE(call_failures == 0);
    REQUIRE(done.completed_now() == static_cast<uint64_t>(kCycles));
    CHECK(done.not_on_worker == 0);
    check_counters(variant, workers, before, after, kCycles, started);
    check_silent_when_idle(pool, workers);
}

TEST_CASE("sleep/wake: blz_group_spawn + blz_group_wait on a sleeping pool, 10^4 cycles", "[sleep]") {
    const uint32_t workers = GENERATE(1u, 2u, 8u);
    const char *variant = "blz_group";
    blz_test::Watchdog dog("sleep/wake group cycles", kCaseLimit);
    Done done;  // outlives the pool
    blz_test::Pool pool(workers);
    done.pool = pool;
    blz_group *group = nullptr;
    REQUIRE(blz_group_create(pool, &group) == BLZ_OK);

    expect_asleep(pool, variant, workers, -1);
    const blz_stats before = blz_test::stats_of(pool);
    const auto started = Clock::now();
    uint64_t failures = 0;
    {
        CycleMonitor monitor(variant, workers, pool);
        for (int cycle = 0; cycle < kCycles; ++cycle) {
            expect_asleep(pool, variant, workers, cycle);
            monitor.begin(cycle);
            if (blz_group_spawn(group, &signal_done, &done) != BLZ_OK) ++failures;
            if (blz_group_wait(group) != BLZ_OK) ++failures;
            monitor.end();
            if (done.completed_now() != static_cast<uint64_t>(cycle) + 1) break;
        }
    }
    expect_asleep(pool, variant, workers, kCycles);
    const blz_stats after = blz_test::stats_of(pool);
    REQUIRE(blz_group_destroy(group) == BLZ_OK);
    REQUIRE(failures == 0);
    REQUIRE(done.completed_now() == static_cast<uint64_t>(kCycles));
    CHECK(done.not_on_worker == 0);
    check_counters(variant, workers, before, after, kCycles, started);
    check_silent_when_idle(pool, workers);
}

// Injects while the workers are anywhere on their way to sleep: after each
// job, a varying delay before the next injection (a third of the cycles
// spin 0-100 us, where a worker is still searching or getting sleepy; the
// others sleep 0-0.5 ms or 0-5 ms, leaving the CPU to the workers, which
// also reaches the moments around blocking).
TEST_CASE("sleep/wake: jobs injected while workers are falling asleep, 10^4 cycles", "[sleep][race]") {
    const uint32_t workers = GENERATE(1u, 2u, 8u);
    const char *variant = "racing blz_spawn";
    blz_test::Watchdog dog("sleep/wake racing injections", kCaseLimit);
    Done done;  // outlives the pool
    blz_test::Pool pool(workers);
    done.pool = pool;

    const blz_stats before = blz_test::stats_of(pool);
    const auto started = Clock::now();
    uint64_t spawn_failures = 0;
    uint64_t rng = 0x9E3779B97F4A7C15ULL;
    for (int cycle = 0; cycle < kCycles; ++cycle) {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        switch ((rng >> 40) % 3) {
            case 0: {  // busy: the workers are still searching or getting sleepy
                const auto until = Clock::now() + std::chrono::microseconds(rng % 100);
                while (Clock::now() < until) {
                }
                break;
            }
            case 1: std::this_thread::sleep_for(std::chrono::microseconds(rng % 500)); break;
            default: std::this_thread::sleep_for(std::chrono::microseconds(rng % 5000)); break;
        }
        const auto injected_at = Clock::now();
        if (blz_spawn(pool, &signal_done, &done, nullptr) != BLZ_OK) {
            ++spawn_failures;
            break;
        }
        expect_completion(done, static_cast<uint64_t>(cycle) + 1, variant, workers, cycle, injected_at);
    }
    const blz_stats after = blz_test::stats_of(pool);
    REQUIRE(spawn_failures == 0);
    REQUIRE(done.completed_now() == static_cast<uint64_t>(kCycles));
    CHECK(done.not_on_worker == 0);
    Delta d = delta(before, after);
    CHECK(d.injected == static_cast<uint64_t>(kCycles));
    WARN("[" << variant << "] " << workers << " workers, " << kCycles << " jobs in " << ms_since(started)
             << " ms: wakeups " << d.wakeups << ", sleeps " << d.sleeps << ", sleep_aborts " << d.aborts
             << ", spurious " << d.spurious);
    check_silent_when_idle(pool, workers);
}

// The wake-up that goes to the wrong worker. Pool A has 2 workers, pool B
// one. Task T, on one of A's workers (W), does blz_call(B, on_b): W waits
// for the call in A's wait loop and falls asleep. on_b, on B's worker,
// waits until both of A's workers sleep, injects job J into A and returns.
// J's injection wakes one sleeper, W (the lowest blocked index); but before
// W runs again on_b has returned and set W's latch, so W goes back to T
// without taking J. T then blocks (outside the API) until J has run, for at
// most 10 s. J must not wait for that: A's other worker sleeps and has to be
// woken. A library that forgets it leaves J queued behind T for 10 s. The
// limit here is 5 s rather than 1 s: W runs at nice 19 and, for J to be
// handed on, W itself has to get the CPU back, which a loaded machine can delay.
//
// "Before W runs again" is a race the test makes likely, not certain: W and
// B's worker share one CPU and W runs at nice 19, so the waker usually keeps
// the CPU until it has set the latch. Attempts where W took J itself did not
// exercise the path; the count of those that did is reported.
struct StrandCtx {
    blz_pool *a = nullptr;
    blz_pool *b = nullptr;
    int cpu = -1;  // the CPU W and B's worker share; -1: no pinning
    std::mutex mutex;
    std::condition_variable cv;
    bool j_ran = false;  // guarded by mutex
    std::atomic<int32_t> t_worker{-2};
    std::atomic<int32_t> j_worker{-2};
    std::atomic<uint32_t> setup_timeouts{0};
};

void pin_to(int cpu) {
    if (cpu < 0) return;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    (void)pthread_setaffinity_np(pthread_self(), sizeof(set), &set);  // best effort: only makes the race likelier
}

void strand_job(void *p) {
    StrandCtx &c = *static_cast<StrandCtx *>(p);
    c.j_worker.store(blz_worker_index(c.a));
    std::lock_guard<std::mutex> lock(c.mutex);
    c.j_ran = true;
    c.cv.notify_all();
}

void strand_on_b(void *p) {
    StrandCtx &c = *static_cast<StrandCtx *>(p);
    pin_to(c.cpu);
    auto deadline = Clock::now() + std::chrono::seconds(10);
    while (blz_test::stats_of(c.a).sleeping_now != 2) {
        if (Clock::now() > deadline) {
            c.setup_timeouts.fetch_add(1);
            break;
        }
        std::this_thread::yield();
    }
    (void)blz_spawn(c.a, &strand_job, &c, nullptr);  // checked through j_ran
}

void strand_t(void *p) {
    StrandCtx &c = *static_cast<StrandCtx *>(p);
    c.t_worker.store(blz_worker_index(c.a));
    pin_to(c.cpu);
    (void)setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), 19);  // best effort, as pin_to
    (void)blz_call(c.b, &strand_on_b, &c);
    std::unique_lock<std::mutex> lock(c.mutex);
    c.cv.wait_for(lock, std::chrono::seconds(10), [&] { return c.j_ran; });
}

TEST_CASE("sleep/wake: a worker woken for a job that leaves for its own latch does not strand the job",
          "[sleep][race]") {
    blz_test::Watchdog dog("sleep/wake stranded job", kCaseLimit);
    blz_test::Pool a(2), b(1);
    StrandCtx ctx;
    ctx.a = a;
    ctx.b = b;
    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof(allowed), &allowed) == 0) {
        for (int i = 0; i < CPU_SETSIZE; ++i) {
            if (CPU_ISSET(i, &allowed)) {
                ctx.cpu = i;
                break;
            }
        }
    }
    constexpr int kAttempts = 40;
    constexpr std::chrono::seconds kStrandLimit{5};
    int late = 0, exercised = 0, first_late = -1;
    for (int attempt = 0; attempt < kAttempts && late < 2; ++attempt) {
        {
            std::lock_guard<std::mutex> lock(ctx.mutex);
            ctx.j_ran = false;
        }
        ctx.j_worker.store(-2);
        REQUIRE(blz_test::wait_until_asleep(a, kAsleepLimit));
        blz_task *t = nullptr;
        REQUIRE(blz_spawn(a, &strand_t, &ctx, &t) == BLZ_OK);
        bool in_time;
        {
            std::unique_lock<std::mutex> lock(ctx.mutex);
            in_time = ctx.cv.wait_for(lock, kStrandLimit, [&] { return ctx.j_ran; });
        }
        if (!in_time) {
            if (first_late < 0) first_late = attempt;
            ++late;
            std::fprintf(stderr,
                         "LOST WAKE-UP [stranded job] attempt %d: J not run within 5 s while T blocks on worker %d "
                         "and the pool's other worker sleeps\n",
                         attempt, ctx.t_worker.load());
            print_stats("pool A at the 5 s mark", a);
        }
        REQUIRE(blz_join(t) == BLZ_OK);  // T gives up after 10 s; then its worker runs J
        {
            std::unique_lock<std::mutex> lock(ctx.mutex);
            ctx.cv.wait(lock, [&] { return ctx.j_ran; });  // the watchdog covers a J that never runs
        }
        if (in_time && ctx.j_worker.load() != ctx.t_worker.load()) ++exercised;
    }
    WARN("[stranded job] attempts where T's worker returned to T and another worker ran J: " << exercised);
    CHECK(ctx.setup_timeouts.load() == 0);
    INFO("first late attempt: " << first_late);
    REQUIRE(late == 0);
}

// Two outside threads inject at the same moment into a sleeping pool.
TEST_CASE("sleep/wake: two injectors at once into a sleeping pool, 2000 cycles", "[sleep][race]") {
    const uint32_t workers = GENERATE(1u, 2u, 8u);
    const char *variant = "two injectors";
    constexpr int kTwoCycles = 2000;
    blz_test::Watchdog dog("sleep/wake two injectors", kCaseLimit);
    Done done;  // outlives the pool
    blz_test::Pool pool(workers);
    done.pool = pool;

    std::atomic<int> go{-1};        // the cycle the helper should inject for
    std::atomic<int> injected{-1};  // the last cycle the helper injected for
    std::atomic<uint64_t> helper_failures{0};
    std::atomic<bool> quit{false};
    std::thread helper([&] {
        int last = -1;
        while (!quit.load()) {
            int cycle = go.load();
            if (cycle == last) {
                std::this_thread::yield();
                continue;
            }
            last = cycle;
            if (blz_spawn(pool, &signal_done, &done, nullptr) != BLZ_OK) helper_failures.fetch_add(1);
            injected.store(cycle);
        }
    });
    struct StopHelper {  // also when an assertion leaves the test early
        std::atomic<bool> &quit;
        std::thread &helper;
        ~StopHelper() {
            quit.store(true);
            if (helper.joinable()) helper.join();
        }
    } stop_helper{quit, helper};

    const blz_stats before = blz_test::stats_of(pool);
    uint64_t spawn_failures = 0;
    for (int cycle = 0; cycle < kTwoCycles; ++cycle) {
        expect_asleep(pool, variant, workers, cycle);
        go.store(cycle);
        const auto injected_at = Clock::now();
        if (blz_spawn(pool, &signal_done, &done, nullptr) != BLZ_OK) ++spawn_failures;
        while (injected.load() != cycle) std::this_thread::yield();  // the watchdog covers a stuck helper
        expect_completion(done, 2 * (static_cast<uint64_t>(cycle) + 1), variant, workers, cycle, injected_at);
    }
    quit.store(true);
    helper.join();
    const blz_stats after = blz_test::stats_of(pool);
    REQUIRE(spawn_failures == 0);
    REQUIRE(helper_failures.load() == 0);
    REQUIRE(done.completed_now() == 2 * static_cast<uint64_t>(kTwoCycles));
    Delta d = delta(before, after);
    CHECK(d.injected == 2 * static_cast<uint64_t>(kTwoCycles));
    CHECK(d.wakeups > 0);
    check_silent_when_idle(pool, workers);
}

}  // namespace
