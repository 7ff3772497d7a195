// Every allocation fails in turn, as in SQLite's allocation-failure loop:
// for k = 0, 1, 2, ... a scenario that makes every call of the API runs on a
// fresh thread while the k-th allocation of the process (from that thread
// or the pool's workers) fails, until a run ends without reaching
// allocation k. The calls: 0.1's, and 0.2's (blz_spawn_ex with on_done,
// joined, polled, waited for and detached; fail-fast and cancelled groups;
// blz_broadcast; the cap; blz_worker_stats; a trace started and stopped;
// a second pool given up by blz_pool_release). After every run: each call
// returned BLZ_OK or BLZ_ENOMEM (the calls that start threads also
// BLZ_ETHREAD), each task whose spawn was accepted ran exactly once (or was
// skipped, in a cancelled group) and its on_done ran once, no refused one
// ran, blz_pool_destroy returned BLZ_OK, and the process holds exactly the
// blocks it held before. Issue 27 (0.2.1) found that a trace's start and
// stop let std::bad_alloc cross the C ABI and leak an admission unit, so
// that destroy waited for ever: the 0.2 calls are here since. Defect 4 of issue 13
// fails here: the job-block cache was a C++ thread_local with a destructor,
// which glibc registers at a thread's first use with a calloc whose failure
// ends the process ("Fatal glibc error: failed to register TLS destructor:
// out of memory") where the spawn should have reported BLZ_ENOMEM.
//
// The allocator is replaced for the whole process (malloc and its kin are
// defined below and forward to glibc's own entry points), so every block is
// seen: the library's (libstdc++'s operator new calls malloc, and
// aligned_alloc for over-aligned types), glibc's own (the calloc of
// __cxa_thread_atexit_impl, the dtv of a new thread in pthread_create) and
// this program's. The loop runs in a child process: a fatal error or a hang
// there is a failed test with the child's output, not a crashed or stuck
// test program. The second test case runs the loop with the mutant that
// puts the thread_local back (lib/fault.hpp) and expects the child to fail.
// Not built with sanitizers (tests/fault/meson.build): their runtimes own malloc.
#include <blitz.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <malloc.h>
#include <span>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include "child_process.hpp"
#include "fault.hpp"
#include "support.hpp"

// ---------------------------------------------------------------------------
// The allocator, interposed. The executable's definitions take the place of
// libc's for every caller in the process, glibc's own internal calls
// included (they go through the same symbols); each forwards to the entry
// point glibc exports under its own name. Nothing here may allocate or
// lock: it runs inside every allocation, before main and at thread exit.

extern "C" {
void *__libc_malloc(size_t size) noexcept;
void __libc_free(void *block) noexcept;
void *__libc_calloc(size_t count, size_t size) noexcept;
void *__libc_realloc(void *block, size_t size) noexcept;
void *__libc_memalign(size_t alignment, size_t size) noexcept;
void *__libc_valloc(size_t size) noexcept;
void *__libc_pvalloc(size_t size) noexcept;
}

namespace {

constexpr int64_t kNever = -1;  // no allocation fails

// relaxed throughout: the threads that allocate while armed are started by
// the armed thread and joined before it disarms (pthread_create and
// pthread_join order them), and the counts are read after those joins.
std::atomic<int64_t> g_live{0};        // blocks allocated and not freed, whole process, since it began
std::atomic<bool> g_armed{false};      // allocations are numbered, and number g_fail_at fails
std::atomic<int64_t> g_seen{0};        // allocations numbered since the last arm_at
std::atomic<int64_t> g_fail_at{kNever};
std::atomic<bool> g_injected{false};   // allocation g_fail_at happened (and failed)

void arm_at(int64_t k) {
    g_fail_at.store(k, std::memory_order_relaxed);
    g_seen.store(0, std::memory_order_relaxed);
    g_injected.store(false, std::memory_order_relaxed);
}

// Whether this allocation is the one that fails (errno is then ENOMEM).
bool fail_this_one() {
    if (!g_armed.load(std::memory_order_relaxed)) return false;
    if (g_seen.fetch_add(1, std::memory_order_relaxed) != g_fail_at.load(std::memory_order_relaxed)) return false;
    g_injected.store(true, std::memory_order_relaxed);
    errno = ENOMEM;
    return true;
}

void *counted(void *block) {
    if (block != nullptr) g_live.fetch_add(1, std::memory_order_relaxed);
    return block;
}

bool is_power_of_two(size_t n) { return n != 0 && (n & (n - 1)) == 0; }

}  // namespace

extern "C" {

void *malloc(size_t size) noexcept { return fail_this_one() ? nullptr : counted(__libc_malloc(size)); }

void free(void *block) noexcept {
    if (block == nullptr) return;
    g_live.fetch_sub(1, std::memory_order_relaxed);
    __libc_free(block);
}

void *calloc(size_t count, size_t size) noexcept {
    return fail_this_one() ? nullptr : counted(__libc_calloc(count, size));
}

// glibc's semantics: realloc(NULL, n) allocates, realloc(p, 0) frees; a
// failure leaves the block as it was. Moving a block keeps the count.
void *realloc(void *block, size_t size) noexcept {
    if (block == nullptr) return malloc(size);
    if (size == 0) {
        free(block);
        return nullptr;
    }
    return fail_this_one() ? nullptr : __libc_realloc(block, size);
}

void *reallocarray(void *block, size_t count, size_t size) noexcept {
    size_t bytes = 0;
    if (__builtin_mul_overflow(count, size, &bytes)) {
        errno = ENOMEM;
        return nullptr;
    }
    return realloc(block, bytes);
}

void *memalign(size_t alignment, size_t size) noexcept {
    return fail_this_one() ? nullptr : counted(__libc_memalign(alignment, size));
}

void *aligned_alloc(size_t alignment, size_t size) noexcept { return memalign(alignment, size); }

int posix_memalign(void **out, size_t alignment, size_t size) noexcept {
    if (!is_power_of_two(alignment) || alignment % sizeof(void *) != 0) return EINVAL;
    void *block = memalign(alignment, size);
    if (block == nullptr) return ENOMEM;
    *out = block;
    return 0;
}

void *valloc(size_t size) noexcept { return fail_this_one() ? nullptr : counted(__libc_valloc(size)); }
void *pvalloc(size_t size) noexcept { return fail_this_one() ? nullptr : counted(__libc_pvalloc(size)); }

}  // extern "C"

namespace {

using blz::fault::Mutant;
using blz_test::sentinel;

// ---------------------------------------------------------------------------
// The scenario: every call of the API, on a pool of two workers.

constexpr uint32_t kWorkers = 2;
// More than glibc keeps in its cache of thread stacks (40 MiB unless tuned):
// each worker's stack and dtv are made anew, so pthread_create's calloc of
// the dtv is a failure point in every attempt (only reserved, never touched).
constexpr size_t kWorkerStack = size_t{64} << 20;
constexpr size_t kDetached = 8;      // per batch; the second batch reuses the first's blocks
constexpr size_t kGroupTasks = 8;
constexpr size_t kFanOut = 200;      // from one worker: its deque (64 slots at first) must grow
constexpr size_t kIndices = 64;      // of the blz_parallel_for, one piece each
constexpr int kMaxCalls = 40;
constexpr size_t kExTasks = 5;       // blz_spawn_ex with on_done: joined, waited for, detached, in a group
constexpr int kMaxNotes = 8;
constexpr blz_status kNotCalled = 1;  // no call returns a positive status

// A task: what the call that made it returned, how often it ran, and
// how often its on_done (when it has one) was called.
struct Run {
    blz_status accepted = kNotCalled;
    std::atomic<int> runs{0};
    std::atomic<int> dones{0};
};

void run_once(void *run) { static_cast<Run *>(run)->runs.fetch_add(1, std::memory_order_acq_rel); }
void done_once(void *run, blz_status) { static_cast<Run *>(run)->dones.fetch_add(1, std::memory_order_acq_rel); }

void run_range(void *runs, size_t lo, size_t hi) {
    for (size_t i = lo; i < hi; ++i) run_once(&static_cast<Run *>(runs)[i]);
}

// A call whose status is checked as it is (not through the tasks it made):
// BLZ_OK, BLZ_ENOMEM, or the one other status it may give here.
struct Call {
    const char *what;
    blz_status status;
    blz_status also_allowed;  // BLZ_ETHREAD for the calls that start threads, say; BLZ_OK: none
};

// What one run of the scenario did, filled without allocating by the
// scenario thread and the workers, read after the scenario thread ended.
struct Attempt {
    blz_pool *pool = nullptr;
    std::atomic<int> num_calls{0};
    Call calls[kMaxCalls] = {};
    std::atomic<int> num_notes{0};
    const char *notes[kMaxNotes] = {};  // violations seen while the scenario ran
    blz_status destroyed = kNotCalled;
    Run detached[2][kDetached];
    Run joined;
    Run grouped[kGroupTasks];
    Run fan_out_task;
    Run fanned[kFanOut];  // fanned[0] holds the other worker (hold_thief)
    std::atomic<bool> all_fanned{false};
    Run called;
    Run forked[2];
    Run indices[kIndices];
    Run called_capped;
    Run called_traced;
    Run with_done[kExTasks];  // blz_spawn_ex with on_done
    Run in_cancelled_group;   // the same, in a group cancelled first: skipped, or run if the cancel came late
    Run released_task;        // a detached task of the pool given up by blz_pool_release
    std::atomic<bool> released{false};
    const char *trace_path = nullptr;

    blz_status record(const char *what, blz_status status, blz_status also_allowed = BLZ_OK) {
        int i = num_calls.fetch_add(1, std::memory_order_relaxed);
        if (i < kMaxCalls) calls[i] = {what, status, also_allowed};
        return status;
    }
    void note(const char *violation) {
        int i = num_notes.fetch_add(1, std::memory_order_relaxed);
        if (i < kMaxNotes) notes[i] = violation;
    }
    // A call that waits returned BLZ_OK: each task it accepted has run
    // (how often is checked at the end).
    void expect_ran(std::span<const Run> tasks, const char *violation) {
        for (const Run &task : tasks) {
            if (task.accepted == BLZ_OK && task.runs.load(std::memory_order_acquire) == 0) {
                note(violation);
                return;
            }
        }
    }
};

// Waits until each accepted task has run, for 10 s at most (a task that
// never runs is reported by the checks, or blocks destroy until the watchdog).
void wait_for(std::span<const Run> tasks) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    for (const Run &task : tasks) {
        while (task.accepted == BLZ_OK && task.runs.load(std::memory_order_acquire) == 0) {
            if (std::chrono::steady_clock::now() > deadline) return;
            std::this_thread::sleep_for(std::chrono::microseconds(50));
        }
    }
}

// Two batches of detached tasks: the first batch's blocks go back to the
// pool's recycler as its tasks end, and the second batch's spawns take them.
void spawn_detached(Attempt &a) {
    for (auto &batch : a.detached) {
        for (Run &task : batch) task.accepted = blz_spawn(a.pool, run_once, &task, nullptr);
        wait_for(batch);
    }
}

void spawn_and_join(Attempt &a) {
    blz_task *task = sentinel<blz_task>();
    a.joined.accepted = blz_spawn(a.pool, run_once, &a.joined, &task);
    if (a.joined.accepted != BLZ_OK) {
        if (task != sentinel<blz_task>()) a.note("a refused blz_spawn wrote *out_task");
        return;
    }
    if (a.record("blz_join", blz_join(task)) == BLZ_OK) {
        a.expect_ran({&a.joined, 1}, "blz_join returned before its task ran");
    }
}

void wait_and_destroy(Attempt &a, blz_group *group, std::span<const Run> tasks) {
    if (a.record("blz_group_wait", blz_group_wait(group)) == BLZ_OK) {
        a.expect_ran(tasks, "blz_group_wait returned before every task of the group ran");
    }
    a.record("blz_group_destroy", blz_group_destroy(group));
}

void group_from_outside(Attempt &a) {
    blz_group *group = sentinel<blz_group>();
    if (a.record("blz_group_create", blz_group_create(a.pool, &group)) != BLZ_OK) {
        if (group != sentinel<blz_group>()) a.note("a failed blz_group_create wrote *out_group");
        return;
    }
    for (Run &task : a.grouped) task.accepted = blz_group_spawn(group, run_once, &task);
    wait_and_destroy(a, group, a.grouped);
}

// The group's first task: a thief takes the oldest job of a deque, so the
// other worker, taking this one, stays here until every spawn is made, and
// the spawning worker's deque holds all of them at once.
void hold_thief(void *attempt) {
    auto *a = static_cast<Attempt *>(attempt);
    while (!a->all_fanned.load(std::memory_order_acquire)) std::this_thread::yield();
    run_once(&a->fanned[0]);
}

// On a worker: kFanOut spawns into a group go to this worker's own deque.
void fan_out(void *attempt) {
    auto *a = static_cast<Attempt *>(attempt);
    run_once(&a->fan_out_task);
    blz_group *group = nullptr;
    if (a->record("blz_group_create (on a worker)", blz_group_create(a->pool, &group)) != BLZ_OK) return;
    a->fanned[0].accepted = blz_group_spawn(group, hold_thief, a);
    for (size_t i = 1; i < kFanOut; ++i) a->fanned[i].accepted = blz_group_spawn(group, run_once, &a->fanned[i]);
    a->all_fanned.store(true, std::memory_order_release);
    wait_and_destroy(*a, group, a->fanned);
}

void fan_out_from_worker(Attempt &a) {
    blz_task *task = nullptr;
    a.fan_out_task.accepted = blz_spawn(a.pool, fan_out, &a, &task);
    if (a.fan_out_task.accepted == BLZ_OK) a.record("blz_join (fan-out task)", blz_join(task));
}

// Waiting calls from outside the pool. A status other than BLZ_OK means
// nothing ran (BLZ_ENOMEM: "nothing was done"), which the checks verify.
void call_fork_join_loop(Attempt &a) {
    a.called.accepted = blz_call(a.pool, run_once, &a.called);
    a.expect_ran({&a.called, 1}, "blz_call returned before its function ran");
    blz_status forked = blz_fork_join(a.pool, run_once, &a.forked[0], run_once, &a.forked[1]);
    for (Run &half : a.forked) half.accepted = forked;
    a.expect_ran(a.forked, "blz_fork_join returned before both functions ran");
    blz_status looped = blz_parallel_for(a.pool, 0, kIndices, 1, run_range, a.indices);
    for (Run &index : a.indices) index.accepted = looped;
    a.expect_ran(a.indices, "blz_parallel_for returned before every index ran");
}

// The 0.2 calls: blz_spawn_ex with on_done (joined, polled and waited
// for, detached, in a fail-fast group and in a cancelled one), broadcast,
// the cap, per-worker statistics and a trace.
blz_spawn_options done_options(Run &run, blz_group *group = nullptr) {
    blz_spawn_options opts;
    blz_spawn_options_init(&opts);
    opts.group = group;
    opts.on_done = done_once;
    opts.done_arg = &run;
    return opts;
}

void spawn_ex_calls(Attempt &a) {
    blz_spawn_options opts = done_options(a.with_done[0]);
    blz_task *task = sentinel<blz_task>();
    if ((a.with_done[0].accepted = blz_spawn_ex(a.pool, run_once, &a.with_done[0], &opts, &task)) == BLZ_OK) {
        a.record("blz_join (spawn_ex)", blz_join(task));
    }
    opts = done_options(a.with_done[1]);
    if ((a.with_done[1].accepted = blz_spawn_ex(a.pool, run_once, &a.with_done[1], &opts, &task)) == BLZ_OK) {
        // A poll that finds the task finished frees the handle: wait only after a timeout.
        if (a.record("blz_task_wait_for(0)", blz_task_wait_for(task, 0), BLZ_ETIMEDOUT) == BLZ_ETIMEDOUT) {
            a.record("blz_task_wait_for", blz_task_wait_for(task, UINT64_MAX));
        }
    }
    opts = done_options(a.with_done[2]);
    if ((a.with_done[2].accepted = blz_spawn_ex(a.pool, run_once, &a.with_done[2], &opts, &task)) == BLZ_OK) {
        a.record("blz_task_detach", blz_task_detach(task));
    }
    blz_group *group = nullptr;
    if (a.record("blz_group_create_ex", blz_group_create_ex(a.pool, BLZ_GROUP_CANCEL_ON_FAILURE, &group)) == BLZ_OK) {
        for (size_t i = 3; i < 5; ++i) {
            opts = done_options(a.with_done[i], group);
            a.with_done[i].accepted = blz_spawn_ex(nullptr, run_once, &a.with_done[i], &opts, nullptr);
        }
        a.record("blz_group_wait_for", blz_group_wait_for(group, UINT64_MAX));
        a.record("blz_group_destroy (fail-fast)", blz_group_destroy(group));
    }
    if (a.record("blz_group_create (cancelled)", blz_group_create(a.pool, &group)) == BLZ_OK) {
        a.record("blz_group_cancel", blz_group_cancel(group));
        opts = done_options(a.in_cancelled_group, group);
        a.in_cancelled_group.accepted = blz_spawn_ex(nullptr, run_once, &a.in_cancelled_group, &opts, nullptr);
        a.record("blz_group_destroy (cancelled)", blz_group_destroy(group), BLZ_ECANCELED);
    }
}

void count_worker(void *counter, uint32_t) { static_cast<std::atomic<int> *>(counter)->fetch_add(1); }

void operate_calls(Attempt &a) {
    std::atomic<int> calls{0};
    if (a.record("blz_broadcast", blz_broadcast(a.pool, count_worker, &calls)) == BLZ_OK &&
        calls.load() != static_cast<int>(kWorkers)) {
        a.note("blz_broadcast returned BLZ_OK before every worker ran its call");
    }
    a.record("blz_pool_set_max_active(1)", blz_pool_set_max_active(a.pool, 1));
    a.called_capped.accepted = blz_call(a.pool, run_once, &a.called_capped);
    a.record("blz_pool_set_max_active(0)", blz_pool_set_max_active(a.pool, 0));
    blz_stats stats;
    stats.struct_size = sizeof(stats);
    a.record("blz_worker_stats", blz_worker_stats(a.pool, kWorkers - 1, &stats));
    if (a.record("blz_pool_trace_start", blz_pool_trace_start(a.pool, a.trace_path)) == BLZ_OK) {
        a.called_traced.accepted = blz_call(a.pool, run_once, &a.called_traced);
        a.record("blz_pool_trace_stop", blz_pool_trace_stop(a.pool));
    }
}

// The threads of this process (field 20 of /proc/self/stat), read without
// allocating; 0 if it cannot be read.
long threads_in_process() {
    char text[1024];
    const int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    const ssize_t n = read(fd, text, sizeof(text) - 1);
    close(fd);
    if (n <= 0) return 0;
    text[n] = '\0';
    const char *p = std::strrchr(text, ')');  // the command name may hold spaces
    for (int field = 2; p != nullptr && field < 20; ++field) p = std::strchr(p + 1, ' ');
    return p != nullptr ? std::strtol(p + 1, nullptr, 10) : 0;
}

void on_released(void *attempt, blz_status status) {
    auto *a = static_cast<Attempt *>(attempt);
    if (status != BLZ_OK) a->note("on_destroyed got a status other than BLZ_OK");
    a->released.store(true, std::memory_order_release);
}

// A second pool, given up with blz_pool_release while its task is queued.
// The attempt waits for on_destroyed, then for the releasing thread to be
// gone: glibc caches a detached thread's stack (with its dtv, counted
// here) only as the thread exits, and a thread made while that stack is
// still in use gets a new one, which would look like a leak.
void release_a_pool(Attempt &a) {
    const long threads_before = threads_in_process();
    blz_pool_config config;
    blz_pool_config_init(&config);
    config.num_threads = 1;
    config.stack_size = kWorkerStack;
    blz_pool *pool = nullptr;
    if (a.record("blz_pool_create (released)", blz_pool_create(&config, &pool), BLZ_ETHREAD) != BLZ_OK) return;
    a.released_task.accepted = blz_spawn(pool, run_once, &a.released_task, nullptr);
    if (a.record("blz_pool_release", blz_pool_release(pool, on_released, &a), BLZ_ETHREAD) != BLZ_OK) {
        a.record("blz_pool_destroy (release refused)", blz_pool_destroy(pool));
        return;
    }
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!a.released.load(std::memory_order_acquire) && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    if (!a.released.load(std::memory_order_acquire)) a.note("on_destroyed was not called within 10 s");
    while (threads_in_process() > threads_before && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
}

void scenario(Attempt &a) {
    blz_pool_config config;
    blz_pool_config_init(&config);
    config.num_threads = kWorkers;
    config.stack_size = kWorkerStack;
    blz_pool *pool = sentinel<blz_pool>();
    // BLZ_ETHREAD: glibc's pthread_create reports its own failed allocation
    // (the new thread's dtv or TLS) as EAGAIN, which the library reports as
    // the OS refusing a worker.
    if (a.record("blz_pool_create", blz_pool_create(&config, &pool), BLZ_ETHREAD) != BLZ_OK) {
        if (pool != sentinel<blz_pool>()) a.note("a failed blz_pool_create wrote *out_pool");
        return;
    }
    a.pool = pool;
    spawn_detached(a);
    spawn_and_join(a);
    group_from_outside(a);
    fan_out_from_worker(a);
    call_fork_join_loop(a);
    spawn_ex_calls(a);
    operate_calls(a);
    release_a_pool(a);
    blz_stats stats;
    stats.struct_size = sizeof(stats);
    a.record("blz_pool_stats", blz_pool_stats(pool, &stats));
    a.destroyed = blz_pool_destroy(pool);
}

// ---------------------------------------------------------------------------
// The checks of one attempt, in the child. Output goes to stderr (the
// child's output file) without stdio's buffers, whose allocation the leak
// count would see.

[[gnu::format(printf, 1, 2)]] void say(const char *format, ...) {
    char line[512];
    va_list args;
    va_start(args, format);
    int n = std::vsnprintf(line, sizeof(line), format, args);
    va_end(args);
    if (n <= 0) return;
    ssize_t written = write(STDERR_FILENO, line, std::min(static_cast<size_t>(n), sizeof(line) - 1));
    (void)written;
}

bool is_failure(blz_status status) { return status != BLZ_OK && status != kNotCalled; }

struct TaskSet {
    const char *what;
    std::span<const Run> tasks;
    bool with_on_done = false;  // each accepted task's on_done ran once, a refused one's never
    bool may_be_skipped = false;  // cancelled: an accepted task may not run (its on_done still does)
};

std::array<TaskSet, 14> task_sets(const Attempt &a) {
    return {{{"blz_spawn_ex with on_done", a.with_done, true},
             {"blz_spawn_ex into a cancelled group", {&a.in_cancelled_group, 1}, true, true},
             {"blz_call under a cap of 1", {&a.called_capped, 1}},
             {"blz_call while traced", {&a.called_traced, 1}},
             {"blz_spawn into a pool then released", {&a.released_task, 1}},
             {"blz_spawn, detached (first batch)", a.detached[0]},
             {"blz_spawn, detached (second batch)", a.detached[1]},
             {"blz_spawn + blz_join", {&a.joined, 1}},
             {"blz_group_spawn from outside", a.grouped},
             {"blz_spawn of the fan-out task", {&a.fan_out_task, 1}},
             {"blz_group_spawn on a worker", a.fanned},
             {"blz_call", {&a.called, 1}},
             {"blz_fork_join", a.forked},
             {"blz_parallel_for", a.indices}}};
}

int check_calls(const Attempt &a, int64_t k) {
    int violations = 0;
    const int n = a.num_calls.load(std::memory_order_relaxed);
    if (n > kMaxCalls) {
        say("k=%lld: %d calls recorded, room for %d\n", static_cast<long long>(k), n, kMaxCalls);
        ++violations;
    }
    for (const Call &call : std::span(a.calls, static_cast<size_t>(std::min(n, kMaxCalls)))) {
        const bool allowed = call.status == BLZ_OK || call.status == BLZ_ENOMEM || call.status == call.also_allowed;
        if (allowed) continue;
        say("k=%lld: %s returned %s\n", static_cast<long long>(k), call.what, blz_status_string(call.status));
        ++violations;
    }
    return violations;
}

// Accepted: ran exactly once; refused (or never spawned): never ran.
int check_tasks(const Attempt &a, int64_t k) {
    int violations = 0;
    for (const TaskSet &set : task_sets(a)) {
        for (size_t i = 0; i < set.tasks.size(); ++i) {
            const Run &task = set.tasks[i];
            const int runs = task.runs.load(std::memory_order_acquire);
            const int dones = task.dones.load(std::memory_order_acquire);
            const bool allowed = task.accepted == BLZ_OK || task.accepted == BLZ_ENOMEM || task.accepted == kNotCalled;
            const int expected = task.accepted == BLZ_OK ? 1 : 0;
            const bool ran_as_expected = runs == expected || (set.may_be_skipped && runs == 0);
            if (allowed && ran_as_expected && dones == (set.with_on_done ? expected : 0)) continue;
            say("k=%lld: %s, task %zu: the call returned %s, the task ran %d times, its on_done %d times\n",
                static_cast<long long>(k), set.what, i,
                task.accepted == kNotCalled ? "nothing (not called)" : blz_status_string(task.accepted), runs,
                dones);
            ++violations;
        }
    }
    return violations;
}

int check_attempt(const Attempt &a, int64_t k) {
    int violations = check_calls(a, k) + check_tasks(a, k);
    const int notes = std::min(a.num_notes.load(std::memory_order_relaxed), kMaxNotes);
    for (const char *note : std::span(a.notes, static_cast<size_t>(notes))) {
        say("k=%lld: %s\n", static_cast<long long>(k), note);
        ++violations;
    }
    if (a.pool != nullptr && a.destroyed != BLZ_OK) {
        say("k=%lld: blz_pool_destroy returned %s\n", static_cast<long long>(k), blz_status_string(a.destroyed));
        ++violations;
    }
    return violations;
}

bool failure_reported(const Attempt &a) {
    const int n = std::min(a.num_calls.load(std::memory_order_relaxed), kMaxCalls);
    for (const Call &call : std::span(a.calls, static_cast<size_t>(n))) {
        if (is_failure(call.status)) return true;
    }
    for (const TaskSet &set : task_sets(a)) {
        for (const Run &task : set.tasks) {
            if (is_failure(task.accepted)) return true;
        }
    }
    return false;
}

// ---------------------------------------------------------------------------
// The loop, in the child process.

constexpr unsigned kWatchdogSeconds = 300;  // the whole loop; it takes seconds
constexpr int64_t kMinFailurePoints = 50;   // fewer: the interposer is not seeing the library
constexpr int64_t kMaxFailurePoints = 100000;

struct Outcome {
    int violations;
    bool injected;  // allocation k happened (and failed)
    bool reported;  // some call returned a failure status
    int64_t live;   // blocks alive in the process after the attempt
};

// One attempt on a fresh thread, armed from its first instruction to its
// last (its own thread-exit frees come after, unarmed, and are counted).
// The trace file of operate_calls, named by the parent before the child starts (no allocation).
char g_trace_path[64];

Outcome attempt(int64_t k) {
    Attempt a;
    a.trace_path = g_trace_path;
    arm_at(k);
    std::thread thread([&a] {
        g_armed.store(true, std::memory_order_relaxed);
        scenario(a);
        g_armed.store(false, std::memory_order_relaxed);
    });
    thread.join();
    const int64_t live = g_live.load(std::memory_order_relaxed);
    return {check_attempt(a, k), g_injected.load(std::memory_order_relaxed), failure_reported(a), live};
}

// The exit status of the child: 0 when every failure point was handled.
int alloc_failure_loop() {
    // The warm-up leaves what glibc keeps for the process's later threads
    // (cached thread stacks with their dtv blocks) in place, so that the
    // baseline includes it.
    const Outcome warm = attempt(kNever);
    if (warm.violations != 0) {
        say("alloc failure: the warm-up (k=-1, no allocation fails) went wrong\n");
        return 1;
    }
    const int64_t baseline = warm.live;
    int64_t k = 0;
    int64_t reported = 0;
    for (;; ++k) {
        const Outcome o = attempt(k);
        if (o.live != baseline) {
            say("k=%lld: %lld blocks alive after the attempt, %lld before (a leak, or a block freed twice)\n",
                static_cast<long long>(k), static_cast<long long>(o.live), static_cast<long long>(baseline));
        }
        if (o.violations != 0 || o.live != baseline) return 1;
        if (!o.injected) break;
        reported += o.reported;
        if (k == kMaxFailurePoints) {
            say("alloc failure: still failing allocations after %lld attempts\n", static_cast<long long>(k));
            return 1;
        }
    }
    say("alloc failure: %lld failure points, all handled (%lld reported by a status, %lld absorbed)\n",
        static_cast<long long>(k), static_cast<long long>(reported), static_cast<long long>(k - reported));
    if (k >= kMinFailurePoints) return 0;
    say("alloc failure: fewer than %lld failure points\n", static_cast<long long>(kMinFailurePoints));
    return 1;
}

void write_text(const char *text) {
    ssize_t written = write(STDERR_FILENO, text, std::strlen(text));
    (void)written;
}

void write_number(uint64_t value) {
    char digits[24];
    char *first = digits + sizeof(digits);
    *--first = '\0';
    do {
        *--first = static_cast<char>('0' + value % 10);
        value /= 10;
    } while (value != 0);
    write_text(first);
}

// A signal that ends the child (glibc's fatal error aborts; the watchdog's
// SIGALRM) names the attempt under way, then ends it (SA_RESETHAND: the
// default action). Only async-signal-safe steps: no stdio.
void on_fatal_signal(int sig) {
    const int64_t k = g_fail_at.load(std::memory_order_relaxed);
    if (k == kNever) {
        write_text("alloc failure: the child was killed in the warm-up\n");
    } else {
        write_text("alloc failure: the child was killed in the attempt with k=");
        write_number(static_cast<uint64_t>(k));
        write_text("\n");
    }
    raise(sig);
}

void install_signal_handlers() {
    // Catch2 handles these in the parent to report a crashed test case; the
    // child reports its own end and dies of the signal.
    struct sigaction action = {};
    action.sa_handler = on_fatal_signal;
    action.sa_flags = SA_RESETHAND | SA_NODEFER;
    for (int sig : {SIGABRT, SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGALRM}) sigaction(sig, &action, nullptr);
    for (int sig : {SIGTERM, SIGINT}) std::signal(sig, SIG_DFL);
}

int child_main(Mutant mutant) {
    install_signal_handlers();
    alarm(kWatchdogSeconds);  // SIGALRM ends a child that hangs
    // glibc writes its fatal errors to the terminal unless this is set.
    setenv("LIBC_FATAL_STDERR_", "1", 1);
    // Small trace buffers: every attempt allocates them anew.
    setenv("BLZ_TRACE_BUFFER", "64", 1);
    blz::fault::g_mutant.store(mutant);
    return alloc_failure_loop();
}

// ---------------------------------------------------------------------------
// The parent: one child per test case, its stdout and stderr in a file.

blz_test::ChildResult run_loop_in_child(Mutant mutant) {
    // Named and removed here, so that no file stays behind however the
    // child ends (a caught mutant crashes it).
    std::snprintf(g_trace_path, sizeof(g_trace_path), "/tmp/blitz-alloc-failure-%d-%d.json", static_cast<int>(getpid()),
                  static_cast<int>(mutant));
    // The parent has no thread besides this one: the child may allocate.
    blz_test::ChildResult child = blz_test::run_in_child([mutant] { return child_main(mutant); });
    unlink(g_trace_path);
    return child;
}

std::string describe(const blz_test::ChildResult &child) {
    return "the child " + child.how() + (child.output.empty() ? ", no output" : ":\n" + child.output);
}

}  // namespace

TEST_CASE("fault: each allocation fails in turn: every call reports it or succeeds, nothing leaks",
          "[fault][alloc]") {
    const blz_test::ChildResult child = run_loop_in_child(Mutant::kNone);
    INFO(describe(child));
    REQUIRE(child.exited_cleanly());
    WARN(child.output);
}

TEST_CASE("fault: the allocation-failure loop catches a C++ thread_local with a destructor (mutant)",
          "[fault][alloc][mutant]") {
    const blz_test::ChildResult child = run_loop_in_child(Mutant::kCacheTlsDestructor);
    WARN("mutant " << describe(child));
    CHECK_FALSE(child.exited_cleanly());
}
