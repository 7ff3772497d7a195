// Registry: one pool. Owns the workers, the sleep state and the injector,
// admits work, and takes the pool down.
//
// Admission and lifetime share one 64-bit word, `state_`:
//   bit 0      CLOSED     destroy has begun: threads outside the pool are refused
//   bit 1      DESTROYED  destroy has finished; the struct lives on only for groups
//   bits 2-32  ACTIVE     accepted work not finished (tasks, calls from outside)
//   bits 33-63 REFS       groups that still point at this pool
// Invariants:
//  [A1] After CLOSED, ACTIVE only grows through work submitted by work that
//       is itself counted, so once ACTIVE reaches 0 it stays 0, and exactly
//       one leave() sees the transition and sets the destroyer's latch.
//  [A2] Every queued job belongs to counted work, so when ACTIVE is 0 after
//       CLOSED every queue is empty and the workers may stop.
//  [A3] The struct is freed by whoever makes the word CLOSED|DESTROYED with
//       REFS 0: destroy itself, or the last group to go.
#pragma once

#include <atomic>
#include <cstdint>
#include <pthread.h>

#include "blitz.h"
#include "injector.hpp"
#include "job_memory.hpp"
#include "job.hpp"
#include "sleep.hpp"

namespace blz {

class Worker;

// Incremented in the child after every fork(); a pool remembers the value
// it was created under, so the child can tell the parent's pools apart.
extern std::atomic<uint64_t> g_fork_generation;

class Registry {
public:
    static blz_status create(const blz_pool_config &config, Registry **out);

    // The destroyer: waits for accepted work, stops the workers, frees.
    blz_status destroy();

    bool forked() const { return fork_generation_ != g_fork_generation.load(std::memory_order_relaxed); }
    uint32_t num_threads() const { return num_threads_; }
    // The CPUs this pool's workers can run on at once: the affinity mask's
    // count when the pool was made, at most num_threads().
    uint32_t cpus() const { return cpus_; }
    Worker &worker(uint32_t index) const;
    Sleep<> &sleep() { return sleep_; }
    Injector<QueuedJob> &injector() { return injector_; }
    JobRecycler &recycler() { return recycler_; }
    // A detached task's memory, handed back for the next spawn into this pool.
    void recycle(void *block) { recycler_.give(block); }

    // Admission. BLZ_OK, BLZ_ESHUTDOWN or BLZ_ENOMEM (the count is full).
    // The pool's own workers are admitted while accepted work still runs;
    // every other thread is refused once destroy has begun.
    blz_status enter();
    // Accepted work is finished.
    void leave();

    // Groups keep the struct alive. acquire_ref refuses once destroy began.
    blz_status acquire_ref();
    void release_ref();

    // Queues a job: on the calling worker's deque if it is one of ours,
    // else through the injector.
    void submit(QueuedJob *job);
    void inject(QueuedJob *job);

    // Runs f (returning true when it ended normally) on a worker and waits;
    // for threads that are not workers of this pool.
    template <class F>
    blz_status call_from_outside(F f) {
        blz_status status = enter();
        if (status != BLZ_OK) return status;
        Parker parker;
        StackJob<F, QueuedJob> job(static_cast<F &&>(f), Latch::current_thread(&parker));
        inject(&job);
        job.latch.wait();
        leave();
        return job.ok ? BLZ_OK : BLZ_ETASK;
    }

    void count_task_failure() { tasks_failed_.fetch_add(1, std::memory_order_relaxed); }  // relaxed: a statistic
    void fill_stats(blz_stats &stats) const;

    // The worker thread's body.
    void run_worker(Worker &worker);

private:
    static constexpr uint64_t kClosed = 1;
    static constexpr uint64_t kDestroyed = 2;
    static constexpr uint64_t kOneActive = 4;
    static constexpr uint64_t kActiveMask = ((uint64_t{1} << 31) - 1) << 2;
    static constexpr uint64_t kOneRef = uint64_t{1} << 33;

    Registry(uint32_t num_threads, const blz_pool_config &config);
    ~Registry();

    bool allocate_workers();
    void free_workers();
    blz_status start_workers(size_t stack_size);
    void shut_down();
    void destroy_in_forked_child();
    void mark_destroyed();
    void run_user_hook(blz_thread_fn hook, uint32_t index);

    alignas(kCacheLine) std::atomic<uint64_t> state_{0};
    Latch *drained_ = nullptr;  // the destroyer's latch; written before CLOSED

    Sleep<> sleep_;
    Injector<QueuedJob> injector_;
    Worker *workers_ = nullptr;
    uint32_t num_threads_;
    uint32_t cpus_;
    uint32_t started_ = 0;  // workers whose thread exists
    uint64_t fork_generation_;
    blz_thread_fn on_thread_start_;
    blz_thread_fn on_thread_stop_;
    void *hook_user_;
    char name_prefix_[16];  // Linux thread names hold 15 bytes
    alignas(kCacheLine) std::atomic<uint64_t> tasks_failed_{0};
    alignas(kCacheLine) JobRecycler recycler_;  // pushed by workers, taken by spawners
};

// The number of workers a config asks for: its own, else BLZ_NUM_THREADS
// when it parses to 1..65535, else the CPUs in the affinity mask.
uint32_t resolve_num_threads(uint32_t requested);

}  // namespace blz
