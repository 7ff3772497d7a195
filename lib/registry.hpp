// Registry: one pool. Owns the workers, the sleep state and the injector,
// admits work, and takes the pool down.
//
// Lifetimes (docs/protocol.md, "Lifetimes", has the whole table):
//  - The Registry struct, with its sleep state, injector and job recycler,
//    lives until the word in `admission_` says CLOSED|DESTROYED with no
//    REFS (admission.hpp [A3]): destroy has joined the workers, no group
//    holds it, and no latch setter has it pinned.
//  - The workers (their deques) live until destroy has joined their
//    threads; only the pool's own workers and admitted callers touch them.
//  - A thread that is not one of the pool's workers touches the pool only
//    between an admission (enter) and its leave, or while it holds a REF;
//    a worker of the pool touches it until its thread is joined.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <pthread.h>

#include "active_cap.hpp"
#include "spares.hpp"
#include "admission.hpp"
#include "blitz.h"
#include "injector.hpp"
#include "job_memory.hpp"
#include "job.hpp"
#include "placement.hpp"
#include "sleep.hpp"
#include "trace.hpp"

namespace blz {

class Worker;

// blz_pool_config::spare_idle_ms's default: a spare idle for a second
// retires. Long enough that a steady stream of blocking sections (one a
// second or more) keeps its spares instead of paying a thread start each
// time; short enough that a burst's spares are gone soon after it
// (ForkJoinPool keeps its spares 60 s, Tokio its blocking threads 10 s,
// for pools whose normal work blocks; here blocking is the exception).
inline constexpr uint32_t kDefaultSpareIdleMs = 1000;

// Incremented in the child after every fork(); a pool remembers the value
// it was created under, so the child can tell the parent's pools apart.
extern std::atomic<uint64_t> g_fork_generation;

class Registry {
public:
    static blz_status create(const blz_pool_config &config, Registry **out);

    // The destroyer: waits for accepted work, stops the workers, frees.
    blz_status destroy();

    bool forked() const { return fork_generation_ != g_fork_generation.load(std::memory_order_relaxed); }
    // The process pool (blz_pool_shared): destroy and release drop one of
    // its references instead. Set once, under the shared pool's mutex,
    // before the handle is handed out; never changed after (read without
    // a lock by whoever holds the handle, which came to it after the set).
    bool shared() const { return shared_; }
    void mark_shared() { shared_ = true; }
    uint32_t num_threads() const { return num_threads_; }
    // The CPUs this pool's workers can run on at once: the affinity mask's
    // count when the pool was made, at most num_threads().
    uint32_t cpus() const { return cpus_; }
    Worker &worker(uint32_t index) const;
    Sleep<> &sleep() { return sleep_; }
    Injector<QueuedJob> &injector() { return injector_; }
    // BLZ_SPAWN_HIGH_PRIORITY tasks: searched before injector() by every worker.
    Injector<QueuedJob> &urgent_injector() { return urgent_injector_; }
    // blz_pool_set_max_active's cap (active_cap.hpp).
    ActiveCap &cap() { return cap_; }
    // blz_pool_trace_start/stop (trace.hpp).
    Tracer &tracer() { return tracer_; }
    JobRecycler &recycler() { return recycler_; }
    // A detached task's memory, handed back for the next spawn into this pool.
    void recycle(void *block) { recycler_.give(block); }

    // Admission of `units` of work (see admission.hpp: an outside spawn
    // takes two, one for its task and one for the call itself). BLZ_OK,
    // BLZ_ESHUTDOWN or BLZ_ENOMEM (the count is full). The pool's own
    // workers are admitted while accepted work still runs; every other
    // thread is refused once destroy has begun.
    blz_status enter(uint64_t units = 1);
    // The same, for a caller that already knows whether it is one of the
    // pool's workers.
    blz_status enter(uint64_t units, bool own_worker);
    // `units` of accepted work are finished: the caller's last access to
    // the pool unless it is one of its workers or holds a ref.
    void leave(uint64_t units = 1);

    // Groups keep the memory. acquire_ref refuses once destroy began,
    // except to the pool's own workers inside accepted work.
    blz_status acquire_ref();
    void release_ref();
    // A thread about to wake one of this pool's workers from outside the
    // pool (Latch::set) keeps the memory until its wake-up call returned.
    // Only while that worker cannot have left its wait (admission.hpp [A4]).
    void pin() { admission_.pin(); }
    void unpin() { release_ref(); }

    // Whether `worker` (nullptr: not a worker at all) is one of this pool's.
    bool is_own(const Worker *worker) const;

    // After a seq-cst fence (a sleeper's final check, a hand-off): whether
    // a shared job is queued, in the injector or as a public task on a
    // worker's deque (sleep.hpp).
    bool has_shared_jobs() const;

    // Queues a job: on the calling worker's deque if it is one of ours,
    // else through the injector.
    void submit(QueuedJob *job);
    void inject(QueuedJob *job);
    // A high-priority job: always through the urgent injector, also from a worker.
    void inject_urgent(QueuedJob *job);

    // blz_pool_set_max_active: stores the cap, then lets parked workers
    // check it again.
    void set_max_active(uint32_t n);

    // ---- Blocking sections and spare threads (docs/protocol.md, "Blocking sections") ----
    // Spare slots follow the workers': indices num_threads() .. + max_spares() - 1.
    uint32_t max_spares() const { return spares_.max_spares(); }
    uint32_t spare_idle_ms() const { return spare_idle_ms_; }
    bool is_spare_index(uint32_t index) const { return index >= num_threads_; }
    // The slots that ever had a thread (workers first, then spares up to
    // the highest one started): steals, the sleepers' final check and the
    // unparking look at these (every slot's deque exists from creation).
    // acquire: pairs with the release that published a spare slot (start_spare).
    uint32_t slots_in_use() const { return slots_in_use_.load(std::memory_order_acquire); }
    // [B1] The calling worker (running a job) enters a blocking section:
    // false when it holds no slot of the cap (nothing to stand in for).
    bool block_begin(Worker &worker);
    // [B2] Back from the section block_begin returned true for.
    void block_end(Worker &worker);
    // [B3] A spare idle for spare_idle_ms: true when it retired (its loop
    // ends). `engaged`: it holds a slot, which it gives back.
    bool retire_spare(Worker &spare, bool engaged);
    // [B4] A spare's thread after its stop hook: true when the slot is
    // needed again and the thread goes on as a new spare; else the slot is
    // free (or to join) and the thread touches nothing of it any more.
    bool spare_exited(Worker &spare);
    // Every parked thread checks the cap again (Worker::unpark has the fence).
    void unpark_all();
    // blz_pool_config's max_spares, resolved for a pool of num_threads
    // workers; BLZ_EINVAL when workers plus spares exceed BLZ_MAX_THREADS.
    static blz_status resolve_max_spares(uint32_t requested, uint32_t num_threads, uint32_t *out);

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
    void fill_worker_stats(uint32_t index, blz_stats &stats) const;

    // The worker thread's body.
    void run_worker(Worker &worker);
    // Worker `worker`'s life on a thread the embedder started (spawn_thread's run).
    static void run_adopted(void *worker);

private:
    Registry(uint32_t num_threads, const blz_pool_config &config, CpuList &&cpu_list);
    ~Registry();

    bool allocate_workers();
    void free_workers();
    blz_status start_workers(size_t stack_size);
    blz_status hand_out_workers();
    void wait_for_threads(Latch &adopted_returned);
    bool call_spawn_thread(uint32_t index);
    void shut_down();
    void destroy_in_forked_child();
    void mark_destroyed();
    void free_memory();
    void run_user_hook(blz_thread_fn hook, uint32_t index);
    void name_thread(uint32_t index);
    // Spares: a slot for a new one (under spare_lock()), its thread, and destroy's end of them.
    struct SpareClaim {
        uint32_t index = UINT32_MAX;
        bool join_first = false;  // the slot's last thread ended and was not joined
    };
    SpareClaim claim_spare_slot();
    StdSync::mutex &spare_lock() const { return spares_.mutex(); }
    void start_spare(SpareClaim claim);
    bool start_spare_thread(uint32_t index);
    void stop_spares();
    void fill_spare_stats(blz_stats &stats) const;

    alignas(kCacheLine) Admission<> admission_;
    Latch *drained_ = nullptr;  // the destroyer's latch; written before CLOSED

    Sleep<> sleep_;
    Injector<QueuedJob> injector_;
    Injector<QueuedJob> urgent_injector_;
    Worker *workers_ = nullptr;
    CpuList cpu_list_;  // empty: workers are not pinned
    uint32_t num_threads_;
    uint32_t cpus_;
    uint32_t started_ = 0;  // workers whose thread exists (or whose run() was handed out)

    uint64_t fork_generation_;
    bool shared_ = false;  // blz_pool_shared's pool
    blz_thread_fn on_thread_start_;
    blz_thread_fn on_thread_stop_;
    void *hook_user_;
    char name_prefix_[16];  // Linux thread names hold 15 bytes
    alignas(kCacheLine) std::atomic<uint64_t> tasks_failed_{0};
    alignas(kCacheLine) ActiveCap cap_;  // read by every worker between jobs, written rarely
    alignas(kCacheLine) JobRecycler recycler_;  // pushed by workers, taken by spawners
    Tracer tracer_{*this};
    blz_spawn_thread_fn spawn_thread_;  // NULL: libblitz starts the threads
    void *spawn_user_;
    // Handed-out run()s that have not returned; the last one to return sets
    // the destroyer's latch, stored below before any worker can stop.
    std::atomic<uint32_t> adopted_running_{0};
    std::atomic<Latch *> adopted_returned_{nullptr};

    // Spares (docs/protocol.md, "Blocking sections"). The counts and slot
    // states change only under spare_lock(), and statistics read them under
    // it; the counts are atomics for the one read outside it (the mutant
    // kSpareRetiresOnStaleCount's, in retire_spare).
    enum class SpareSlot : uint8_t {
        kEmpty,     // no thread (never started, or its start failed)
        kLive,      // a thread runs the slot: counted in spares_.live()
        kRetiring,  // retired, still running its on_thread_stop hook as this slot
        kExited,    // its thread touches the slot no more; a pthread still to join
    };
    uint32_t spare_idle_ms_ = 0;
    size_t stack_size_ = 0;
    // The counts and rules [B1]-[B4]; its mutex is the spare lock (spare_lock()).
    SpareCounts<> spares_;
    SpareSlot *spare_slots_ = nullptr;  // max_spares_ entries, under spare_lock()
    bool spares_closed_ = false;        // destroy began to stop them: no new spare (under spare_lock())
    std::atomic<uint32_t> spares_peak_{0};
    std::atomic<uint64_t> spares_started_{0};
    std::atomic<uint64_t> spares_retired_{0};
    std::atomic<uint32_t> slots_in_use_{0};
};

// The size of a pool created with num_threads 0, and where it comes from
// (blz_default_size): BLZ_NUM_THREADS when it parses to 1..65535, else the
// smaller of the CPUs in the affinity mask and the cgroup CPU quota
// (cpu_quota.hpp). BLZ_NUM_THREADS is an explicit choice and wins, as a
// pool's own num_threads does: it may also ask for more workers than CPUs.
struct DefaultSize {
    uint32_t num_threads = 0;
    uint32_t source = 0;  // BLZ_SIZE_FROM_*
    uint32_t environment = 0;
    uint32_t affinity_cpus = 0;
    uint32_t quota_cpus = 0;
};
DefaultSize default_size();

// The number of workers a config asks for: its own, else default_size().
uint32_t resolve_num_threads(uint32_t requested);

}  // namespace blz
