// Worker: one thread of a pool, its deque, and how it finds, runs and
// waits for work.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <pthread.h>
#include <type_traits>

#include "cancel.hpp"
#include "deadline.hpp"
#include "fence.hpp"
#include "futex.hpp"
#include "deque.hpp"
#include "fork_join.hpp"
#include "fork_stack.hpp"
#include "injector.hpp"
#include "isolation.hpp"
#include "job.hpp"
#include "phase_clock.hpp"
#include "publish.hpp"
#include "registry.hpp"
#include "trace.hpp"

namespace blz {

class Worker;
struct CFunction;

// The worker the calling thread is, or nullptr. initial-exec: one load from
// the thread pointer on the fork-join path (the library is small enough
// for the static TLS reserve even when loaded by dlopen).
extern constinit thread_local Worker *t_current_worker __attribute__((tls_model("initial-exec")));

// Makes the calling thread `worker` (nullptr: nobody's worker): the
// library's pointer and the inline fork path's (blz_fork_stack_v1).
void set_current_worker(Worker *worker);

// XorShift64*: cheap per-worker randomness for choosing steal victims.
struct XorShift64Star {
    uint64_t state;

    uint64_t next() {
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        return state * 0x2545F4914F6CDD1DULL;
    }

    // A number in [0, n) without a division.
    uint32_t below(uint32_t n) { return static_cast<uint32_t>(((next() >> 32) * n) >> 32); }
};

// A job a worker found, and where (tracing tells them apart).
struct Found {
    Job *job;
    TraceKind source;
};

class alignas(kCacheLine) Worker {
public:
    Worker(Registry &registry, uint32_t index);
    // The pool frees its workers before its recycler: blocks a batch still
    // holds (a forked child's copy of a busy worker) go to the recycler.
    ~Worker() { recycled_.flush(registry_->recycler()); }
    Worker(const Worker &) = delete;
    Worker &operator=(const Worker &) = delete;
    bool init() { return deque_.init() && forks_.init(reinterpret_cast<const blz_pool *>(registry_)); }

    static Worker *current() { return t_current_worker; }
    Registry &registry() const { return *registry_; }
    uint32_t index() const { return index_; }
    Latch &terminate_latch() { return terminate_; }
    pthread_t &thread() { return thread_; }

    // Fork-join on this worker: a runs inline while b waits on the fork
    // stack, pending, and is promoted to a job thieves can take if one asks
    // (fork_stack.hpp, fork_join.hpp). a and b return true when they ended
    // normally; join returns true when both did. Both always run.
    template <class A, class B>
    [[gnu::always_inline]] bool join(A &&a, B &&b) {
        // A C function is its own frame (traces name it); any other
        // callable goes through a ForkHalf, which keeps its result.
        using Half = ForkHalf<std::remove_reference_t<B>>;
        constexpr bool kCFunction = std::is_same_v<std::decay_t<B>, CFunction>;
        Half half{b, true};
        blz_fork_frame frame;
        if constexpr (kCFunction) {
            frame.fn = b.fn;
            frame.arg = b.arg;
        } else {
            frame.fn = &Half::run;
            frame.arg = &half;
        }
        ForkHost host{*this};
        return fork_join(host, frame, a, b, [&half] { return kCFunction || half.ok; });
    }

    // The fork path's out-of-line halves (blitz.h's blz_fork_push_v1 and
    // blz_fork_join_v1 too): push_fork_slow and join_promoted_frame of
    // fork_join.hpp.
    [[gnu::noinline]] bool push_fork(blz_fork_frame *frame);
    [[gnu::noinline]] bool join_promoted(blz_fork_frame *frame);

    ForkStack<> &forks() { return forks_; }

    // Pushes a spawned task, which others may take at once. It is a shared
    // job (sleep.hpp): the job that spawned it may block outside the
    // runtime before this worker returns to its deque, so it is posted with
    // the fence, and `public_tasks_` shows the sleepers' final checks where
    // to find it. False when the deque could not grow.
    bool push_public(Job *job) { return push_public_task(deque_, *sleep_, public_tasks_, job); }

    // Any thread, after a seq-cst fence: whether this deque may hold a
    // public spawned task (publish.hpp).
    bool offers_tasks() const { return offers_public_tasks(public_tasks_, deque_); }

    // What a task that ends on this worker hands back to its pool, held
    // and handed over kBatch at a time: one write to each of two lines all
    // workers share (the recycler's head and the admission word) per batch
    // instead of per task. Held, they delay nothing but the blocks' reuse
    // and destroy's wait; settle() hands everything over whenever the
    // worker leaves the running phase (enter_phase: before it searches,
    // sleeps or parks) and before its thread leaves the slot. Owner only.
    static constexpr uint32_t kBatch = RecycleBatch::kBlocks;
    // A detached task's memory, for the pool's next spawn (RecycleBatch, job_memory.hpp).
    void recycle(void *block) { recycled_.add(block, registry_->recycler()); }
    // One unit of accepted work finished (admission.hpp [A5]).
    void leave_later() {
        if (++units_to_leave_ == kBatch) settle_units();
    }
    void settle() {
        recycled_.flush(registry_->recycler());
        if (units_to_leave_ != 0) settle_units();
    }

    // Pops from this worker's deque (newest first); nullptr when empty.
    // Every job on it is public (spawned tasks, promoted forks).
    Job *pop() { return deque_.pop(); }

    // Runs a job taken from `source` (tracing names it), then the
    // continuation the job left, if any, and the one that left, and so on.
    // Every job of the pool runs through here (the only caller of
    // Job::execute), so a continuation never outlives the job that left it.
    void execute(Job *job, TraceKind source) {
        run_job(job, source);
        while (continuation_ != nullptr) [[unlikely]] run_continuation();
    }

    // The continuation (docs/protocol.md, "Continuations"): while a task
    // that this worker runs releases its successors (SpawnedJob::finish
    // opens the window), the first successor it makes ready is kept here
    // rather than pushed, and execute() runs it as soon as the task
    // returns: no deque push and pop, no fence, no wake-up, as the worker
    // would have popped it next anyway (its deque is LIFO) unless its loop
    // had something to check first (run_continuation). True when the job
    // was taken. Owner only.
    bool offer_continuation(QueuedJob *job) {
        if (!continuation_open_ || continuation_ != nullptr) return false;
        continuation_ = job;
        return true;
    }
    // Open from construction to destruction; not nested (finish is not).
    class ContinuationWindow {
    public:
        explicit ContinuationWindow(Worker *worker) : worker_(worker) {
            if (worker_ != nullptr) worker_->continuation_open_ = true;
        }
        ~ContinuationWindow() {
            if (worker_ != nullptr) worker_->continuation_open_ = false;
        }
        ContinuationWindow(const ContinuationWindow &) = delete;
        ContinuationWindow &operator=(const ContinuationWindow &) = delete;

    private:
        Worker *worker_;
    };

    // The slot this worker's trace events go through (trace.hpp).
    TraceSlot &trace_slot() { return trace_; }
    // Any thread (the tracer): starts and ends this worker's tracing. While
    // traced every fork is promoted, so each half is a span of its own.
    void attach_trace(TraceBuffer *buffer) {
        trace_.attach(buffer);
        forks_.set_traced(true);
    }
    TraceBuffer *detach_trace() {
        forks_.set_traced(false);
        return trace_.detach();
    }

    // Runs jobs of this pool until `latch` is set, sleeping when there are
    // none, or until `deadline` (deadline.hpp) has passed: then false,
    // unless the latch was set meanwhile. A job it runs is never cut short,
    // so a bounded wait can end later than its deadline.
    bool wait_until(CoreLatch<> &latch, uint64_t deadline = kNoDeadline);

    // Owner: promotes every pending fork, then returns the deque index
    // from which pushes are new (isolation.hpp: a region's base [S1]).
    int64_t isolation_base();

    // Any thread: queues a job that only this worker may run (blz_broadcast)
    // and wakes the worker if it sleeps. The worker runs it when it next
    // looks for work. The mailbox is part of the worker's final check
    // before sleeping, which runs under its sleep mutex, and the wake-up
    // takes that mutex after the push: either the check sees the job or
    // the wake-up sees the worker blocked.
    void post_mail(QueuedJob *job) {
        mailbox_.push(job);
        sleep_->wake_specific_thread(index_);
        unpark();  // a worker sitting out the cap runs its mail too
    }

    // The worker thread's main loop: runs jobs until terminated.
    void main_loop();
    // A spare's loop (docs/protocol.md, "Blocking sections"): runs jobs
    // like main_loop, and returns once it retired (idle for spare_idle_ms,
    // Registry::retire_spare) or was terminated.
    void spare_loop();
    // Before a spare slot's new thread starts (the starter owns the slot).
    void prepare_spare_run() {
        leaving_ = false;
        holds_slot_ = false;
    }

    // Owner: whether this thread holds a slot of the cap (active_cap.hpp):
    // from its engaging until it sits out, and not while in a blocking
    // section (Registry::block_begin gives it back, block_end takes it).
    bool holds_slot() const { return holds_slot_; }
    void give_slot_back() { holds_slot_ = false; }
    void take_slot() { holds_slot_ = true; }

    // Destroy, once the pool is drained: ends the main loop, also of a
    // worker sitting out the cap.
    void terminate() {
        terminate_.set();
        unpark();
    }

    // Any thread: a worker sitting out the cap (sit_out_cap) checks again
    // what it waits for (the cap, its mail, termination). The seq-cst
    // fence orders the caller's change (a cap store, a mail push, the
    // terminate latch) before the exchange: with the parked worker's own
    // fence between its store of 1 and its checks, either it sees the
    // change or we see its 1 and wake it.
    void unpark() {
        full_fence();
        if (parked_.exchange(0, std::memory_order_seq_cst) == 1) futex_wake_one(parked_);  // seq_cst: see above
    }

    // Any thread: where the worker's time went (phase_clock.hpp).
    PhaseTimes phase_times() const { return clock_.read(); }

    uint64_t jobs_executed() const { return forks_.jobs_executed(); }
    uint64_t steals() const { return steals_.load(std::memory_order_relaxed); }

private:
    static void bump(std::atomic<uint64_t> &counter) {
        // relaxed load + store: only this worker writes; stats readers need no order.
        counter.store(counter.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    }

    // A fork's second half as its frame's function: `ok` is b's result.
    template <class B>
    struct ForkHalf {
        B &b;
        bool ok;
        static void run(void *self) {
            auto &half = *static_cast<ForkHalf *>(self);
            half.ok = half.b();
        }
    };

    // Runs a promoted frame's job that its owner took back.
    bool run_taken_back(blz_fork_frame *frame);

    void run_job(Job *job, TraceKind source) {
        // Counted before it runs, as the inline fork path counts: the job's
        // end (a latch set with release) then publishes the count too, so a
        // caller that saw blz_call or a join return finds the job in its stats.
        forks_.count_job();
        if (trace_.attached()) [[unlikely]] {
            execute_traced(job, source);
        } else {
            job->execute(job);
        }
    }
    // Runs the continuation, or pushes it when this worker should not run
    // it now: what the idle loop checks between jobs says so (a
    // high-priority task or mail waits, the worker is over the cap or
    // leaving), or the wait it runs in is over.
    void run_continuation();

    [[gnu::noinline, gnu::cold]] void execute_traced(Job *job, TraceKind source);
    [[gnu::noinline, gnu::cold]] void trace_woken();

    // Ends the phase under way and starts `next` (phase_clock.hpp); traced,
    // a search or sleep that ended becomes a span.
    void enter_phase(Phase next) {
        const EndedPhase ended = clock_.enter(next);
        if (ended.phase == next) return;
        if (ended.phase == Phase::kRunning) {
            // No task of ours can end until we run again: hand over what
            // ended ones left (settle()). Never under a sleep mutex: the
            // sleep protocol's on_block comes from searching, not running.
            if (!BLZ_FAULT_MUTANT(kSettleOnlyAtExit)) settle();
            return;
        }
        if (!trace_.attached()) return;
        const TraceKind kind = ended.phase == Phase::kSearching ? TraceKind::kSearch : TraceKind::kSleep;
        trace_.write({ended.begin_ns, ended.end_ns, 0, kind});
    }

    [[gnu::noinline]] void settle_units();

    // The worker as the host of the idle loop (idle_loop.hpp): run_until
    // is wait_until's and main_loop's loop, search_until its idle period.
    struct IdleHost;
    // Top level, over the cap: leaves the engaged workers and parks.
    void sit_out_cap();
    // Not engaged: parks until the cap lets this worker run again or the
    // pool terminates, running only its mail meanwhile. A spare parked for
    // spare_idle_ms may retire instead: then false.
    bool park_until_engaged();
    // Parked: runs one job of this worker's mail, if one is linked yet.
    void run_mail();

    // wait_until in an isolated context (isolation.hpp): runs only the
    // jobs of this deque at or above the base, then blocks on the latch.
    bool wait_isolated(CoreLatch<> &latch, uint64_t deadline);
    // Blocks until the latch is set (true) or the deadline passed (false),
    // outside the sleep protocol: the counters keep this worker active.
    bool block_isolated(CoreLatch<> &latch, uint64_t deadline);

    Found find_work(bool woken);
    Job *steal();

    // Owner, having seen its public part empty: no spawned task of ours is
    // left to offer. The flag is only a filter for offers_tasks(); a stale
    // true costs a sleeper one more search, never a job.
    void no_public_tasks() {
        // relaxed: see offers_tasks().
        if (public_tasks_.load(std::memory_order_relaxed)) public_tasks_.store(false, std::memory_order_relaxed);
    }

    // The worker as fork_join.hpp's host.
    struct ForkHost;
    // Makes promoted forks stealable and tells the sleep protocol
    // (publish.hpp: an internal post, no fence).
    [[gnu::noinline]] void publish(int64_t max) { publish_forks(deque_, *sleep_, max, fork_awake_limit_); }

    Deque<Job *> deque_;
    Injector<QueuedJob> mailbox_;  // jobs for this worker only (post_mail)
    Registry *const registry_;
    Sleep<> *const sleep_;  // registry_->sleep(), one load closer
    const uint32_t index_;
    const uint32_t fork_awake_limit_;  // the CPUs the pool may use: see Sleep::new_internal_jobs
    XorShift64Star rng_;
    Latch terminate_;
    pthread_t thread_{};
    // Written by the owner only, and rarely: true from a push_public until
    // the owner sees its public part empty. On a line of its own: every
    // sleeper's final check reads it, and the owner writes its neighbours
    // above (rng_) on every steal.
    alignas(kCacheLine) std::atomic<bool> public_tasks_{false};
    alignas(kCacheLine) std::atomic<uint64_t> steals_{0};
    TraceSlot trace_;
    // The pending forks (fork_stack.hpp); the inline fork path of
    // blitz.hpp reaches its record through blz_fork_stack_v1.
    ForkStack<> forks_;
    // Written by the owner at idle/busy transitions only, read by statistics.
    alignas(kCacheLine) PhaseClock clock_;
    // The futex word of a worker sitting out the cap: 1 while it may
    // block, set to 0 by unpark(). Written by the owner (1) and by any
    // unparking thread (0); lives as long as the worker, and unparking
    // threads are the pool's workers or admitted calls (set_max_active,
    // broadcast, destroy itself), which destroy outlives.
    std::atomic<uint32_t> parked_{0};
    // Owner only (the thread running this slot): see holds_slot(); a
    // spare's retirement, which ends its loop (spare_loop).
    bool holds_slot_ = false;
    bool leaving_ = false;
    // Owner only: the continuation, and whether one may be offered now.
    QueuedJob *continuation_ = nullptr;
    bool continuation_open_ = false;
    // Owner only: see settle().
    RecycleBatch recycled_;
    uint32_t units_to_leave_ = 0;
    // Owner only: the innermost wait_until under way (no latch: none). A
    // continuation yields to it once its latch is set or its deadline
    // passed: the wait's loop would have returned before popping the job.
    struct Wait {
        const CoreLatch<> *latch;
        uint64_t deadline;
    };
    Wait wait_{nullptr, 0};
};

inline Worker &Registry::worker(uint32_t index) const { return workers_[index]; }

// A C function and its argument as a fork-join half: returns false when
// the call ended by an exception. Held by value in the job, so a thief calls
// it directly. A blz_fail in it is not looked for here but once per join,
// by fork_join_on_worker (a stolen half: by StackJob::run on the thief).
struct CFunction {
    blz_fn fn;
    void *arg;
    bool operator()() const {
        return run_guarded([this] { fn(arg); });
    }
};

// A promoted frame's job lives in the frame (blitz.h reserves the room).
using FrameJob = StackJob<CFunction>;

// The worker as the host of fork_join.hpp's protocol.
struct Worker::ForkHost {
    Worker &w;

    ForkStack<> &forks() { return w.forks_; }
    bool push_fork(blz_fork_frame *frame) { return w.push_fork(frame); }
    bool join_promoted(blz_fork_frame *frame) { return w.join_promoted(frame); }
    // Out of line (worker.cpp): the promotion and the join of a promoted frame.
    bool push_frame_job(blz_fork_frame *frame);
    void publish_promoted(uint32_t n) { w.publish(n); }
    static FrameJob *frame_job(blz_fork_frame *frame);
    Job *pop() { return w.pop(); }
    void run_own(Job *job) { w.execute(job, TraceKind::kJobOwn); }
    bool run_taken_back(blz_fork_frame *frame) { return w.run_taken_back(frame); }
    bool wait_for_thief(FrameJob *job);
    static void end_frame_job(FrameJob *job) { job->~FrameJob(); }
    bool public_part_empty() const { return w.deque_.public_part_empty(); }
};

// Fork-join of two C functions on the calling worker: the hot path of
// blz_fork_join. Two loads of the thread's failure count around the join
// are its whole price for blz_fail (job.hpp).
inline blz_status fork_join_on_worker(Worker &worker, blz_fn a, void *arg_a, blz_fn b, void *arg_b) {
    return consume_failures([&] { return worker.join(CFunction{a, arg_a}, CFunction{b, arg_b}); }) ? BLZ_OK
                                                                                                  : BLZ_ETASK;
}

// parallel_for on the calling worker. `cancel`: the cancellation flags of
// the task that calls it and of its group (cancel.hpp), read before each
// piece starts.
enum class RangeOutcome : uint8_t { kOk, kCancelled, kFailed };
RangeOutcome parallel_for_on_worker(Registry &registry, size_t begin, size_t end, size_t grain,
                                    blz_range_fn body, void *arg, CancelWatch cancel);

}  // namespace blz
