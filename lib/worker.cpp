#include "worker.hpp"

#include <cstdlib>
#include <cstring>
#include <new>
#include <sched.h>
#include <unistd.h>
#include <utility>

#include "fault.hpp"
#include "idle_loop.hpp"

namespace blz {

constinit thread_local Worker *t_current_worker = nullptr;
constinit thread_local Isolation t_isolation = {false, 0};

void enter_isolation() {
    Worker *worker = Worker::current();
    t_isolation = {true, worker != nullptr ? worker->isolation_base() : 0};
}

}  // namespace blz

// blitz.h: the inline fork path's view of t_current_worker.
BLZ_API __thread blz_fork_stack *blz_fork_stack_v1 = nullptr;

namespace blz {

void set_current_worker(Worker *worker) {
    t_current_worker = worker;
    if (worker == nullptr) {
        blz_fork_stack_v1 = nullptr;
        return;
    }
    blz_fork_stack &record = worker->forks().record();
    record.failures = &t_failures;  // this thread's, for step 4 of blitz.h's fork path
    blz_fork_stack_v1 = &record;
}

namespace {

// SplitMix64: turns a worker index into a well-mixed, nonzero seed.
uint64_t seed_for(uint32_t index) {
    uint64_t z = (uint64_t{index} + 1) * 0x9E3779B97F4A7C15ULL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    z ^= z >> 31;
    return z != 0 ? z : 1;
}

}  // namespace

Worker::Worker(Registry &registry, uint32_t index)
    : registry_(&registry),
      sleep_(&registry.sleep()),
      index_(index),
      fork_awake_limit_(registry.cpus()),
      rng_{seed_for(index)},
      terminate_(Latch::Waiter{this, nullptr}) {}

// The worker as the idle loop's host (idle_loop.hpp lists what it asks).
struct Worker::IdleHost {
    Worker &w;

    uint32_t index() const { return w.index_; }
    uint32_t awake_limit() const { return w.fork_awake_limit_; }
    Found find_work(bool woken) { return w.find_work(woken); }
    void execute(const Found &found) { w.execute(found.job, found.source); }
    // Before sleeping, also this worker's own mail (post_mail).
    bool has_jobs_for_me() const { return w.mailbox_.has_jobs() || w.registry_->has_shared_jobs(); }
    bool has_shared_jobs() const { return w.registry_->has_shared_jobs(); }
    // A spare that retired while sitting out the cap ends its run_until here.
    bool deadline_passed(uint64_t deadline) const { return w.leaving_ || blz::deadline_passed(deadline); }
    void on_searching() { w.enter_phase(Phase::kSearching); }
    void on_blocking() { w.enter_phase(Phase::kSleeping); }
    void on_running() { w.enter_phase(Phase::kRunning); }
    void on_woken() {
        if (w.trace_.attached()) [[unlikely]] w.trace_woken();
    }
    bool over_cap() const { return w.registry_->cap().over(); }
    void sit_out_cap() { w.sit_out_cap(); }
};

void Worker::settle_units() {
    registry_->leave(std::exchange(units_to_leave_, 0));
}

bool Worker::wait_until(CoreLatch<> &latch, uint64_t deadline) {
    // Before running anything else: every pending fork of ours becomes a
    // job, which this loop or a thief runs (fork_stack.hpp [F4]).
    ForkHost forks{*this};
    promote_forks(forks, UINT32_MAX);
    if (t_isolation.on) [[unlikely]] return wait_isolated(latch, deadline);  // offers no continuation
    const Wait outer = std::exchange(wait_, Wait{&latch, deadline});  // waits nest: the innermost counts
    IdleHost host{*this};
    const bool set = run_until<false>(host, *sleep_, latch, deadline);
    wait_ = outer;
    return set;
}

int64_t Worker::isolation_base() {
    ForkHost forks{*this};
    promote_forks(forks, UINT32_MAX);
    return deque_.bottom_index();
}

bool Worker::wait_isolated(CoreLatch<> &latch, uint64_t deadline) {
    // Only this thread pushes onto its deque, so once nothing at or above
    // the base is left, nothing of ours will come: block [S1].
    const int64_t base = t_isolation.base;
    while (!latch.probe()) {
        if (deque_.bottom_index() > base) {
            if (Job *job = pop()) {  // at index bottom - 1 >= base: made inside
                execute(job, TraceKind::kJobOwn);
                continue;
            }
        }
        if (blz::deadline_passed(deadline)) return false;
        if (!block_isolated(latch, deadline)) return latch.probe();
    }
    return true;
}

bool Worker::block_isolated(CoreLatch<> &latch, uint64_t deadline) {
    // A setter that finds the latch SLEEPING calls WakeablePool::wake,
    // which ends in Sleep::wake_isolated() (the handshake: sleep.hpp).
    enter_phase(Phase::kSleeping);
    const bool set = sleep_->block_isolated(index_, latch, deadline);
    enter_phase(Phase::kRunning);
    return set;
}

void Worker::main_loop() {
    // Counted against the cap from here, not from the worker's creation:
    // before this point (its start hook, an embedder's run() not called
    // yet) it could run no job (active_cap.hpp [C2]).
    holds_slot_ = registry_->cap().try_engage();
    if (!holds_slot_) (void)park_until_engaged();  // a worker never retires: true
    IdleHost host{*this};
    run_until<true>(host, *sleep_, terminate_.core(), kNoDeadline);
}

void Worker::spare_loop() {
    const uint64_t idle_ns = uint64_t{registry_->spare_idle_ms()} * 1000000u;
    holds_slot_ = registry_->cap().try_engage();
    if (!holds_slot_ && !park_until_engaged()) return;
    IdleHost host{*this};
    while (!leaving_ && !terminate_.core().probe()) {
        if (!holds_slot_) {  // terminated while parked, or back from a blocking section without one
            if (!park_until_engaged()) return;
            continue;
        }
        // One idle period at a time: run_until returns when spare_idle_ms
        // passed (between jobs, or asleep in the protocol: a bounded sleep).
        const uint64_t jobs_before = jobs_executed();
        run_until<true>(host, *sleep_, terminate_.core(), deadline_after(idle_ns));
        if (leaving_ || !holds_slot_ || jobs_executed() != jobs_before) continue;
        // No job for a whole period: retire if not standing in ([B3]).
        if (registry_->retire_spare(*this, true)) return;
    }
}

void Worker::sit_out_cap() {
    if (!registry_->cap().try_disengage()) return;  // others left first: within the cap again ([C1])
    holds_slot_ = false;
    if (!park_until_engaged()) leaving_ = true;  // a spare that retired: run_until ends (IdleHost)
}

bool Worker::park_until_engaged() {
    ActiveCap &cap = registry_->cap();
    enter_phase(Phase::kSleeping);
    // We may have been counted on for a shared job (woken for it, or seen
    // idle): hand it on before we stop looking (sleep.hpp).
    sleep_->hand_off_shared_jobs([this] { return registry_->has_shared_jobs(); });
    // A spare parked this long may retire ([B3]); a worker waits for ever.
    const bool spare = registry_->is_spare_index(index_);
    const uint64_t idle_ns = uint64_t{registry_->spare_idle_ms()} * 1000000u;
    uint64_t deadline = spare ? deadline_after(idle_ns) : kNoDeadline;
    bool stays = true;
    for (;;) {
        // seq_cst store, then the fence: the parked worker's half of the
        // store-buffering pair with unpark() (its fence, then its
        // exchange): either the checks below see the change unpark
        // announces (a cap raised or a slot given back, mail,
        // termination), or unpark sees this 1 and wakes us.
        parked_.store(1, std::memory_order_seq_cst);
        full_fence();
        if (terminate_.core().probe()) break;
        if (cap.try_engage()) {
            holds_slot_ = true;
            break;
        }
        if (mailbox_.has_jobs()) {
            run_mail();  // blz_broadcast reaches every worker, capped or not
            continue;
        }
        // Blocks while the word is 1; an unpark() stores 0 first, so a
        // wake-up between our checks and this call is not lost.
        if (futex_wait_until(parked_, 1, deadline)) continue;
        if (registry_->retire_spare(*this, false)) {
            stays = false;
            break;
        }
        deadline = deadline_after(idle_ns);  // still standing in: park another period
    }
    // relaxed: no wake-up is needed now; an unpark() that still sees 1
    // only makes a futex call that wakes nobody.
    parked_.store(0, std::memory_order_relaxed);
    enter_phase(Phase::kRunning);
    return stays;
}

void Worker::run_mail() {
    // A push still being linked shows in has_jobs() but not yet in pop():
    // the caller's loop comes back for it.
    if (Job *mail = mailbox_.pop()) {
        enter_phase(Phase::kRunning);
        execute(mail, TraceKind::kJobMail);
        enter_phase(Phase::kSleeping);
    }
}

Found Worker::find_work(bool woken) {
    // A worker just woken was most likely woken for an injected job (a
    // fork-join half is handed over as a steal by the worker that woke
    // it, whose deque is also scanned below): look there first.
    if (woken) {
        if (Job *job = registry_->urgent_injector().pop()) return {job, TraceKind::kJobUrgent};
        if (Job *job = registry_->injector().pop()) return {job, TraceKind::kJobInjected};
    }
    if (Job *job = mailbox_.pop()) return {job, TraceKind::kJobMail};
    // High-priority tasks before anything queued in deques or the injector
    // (blitz.h, BLZ_SPAWN_HIGH_PRIORITY).
    if (Job *job = registry_->urgent_injector().pop()) return {job, TraceKind::kJobUrgent};
    if (Job *job = pop()) return {job, TraceKind::kJobOwn};
    no_public_tasks();  // an empty pop: our deque is empty
    if (Job *job = steal()) return {job, TraceKind::kJobStolen};
    return {registry_->injector().pop(), TraceKind::kJobInjected};
}

void Worker::run_continuation() {
    QueuedJob *job = std::exchange(continuation_, nullptr);
    const bool wait_over = wait_.latch != nullptr && (wait_.latch->probe() || blz::deadline_passed(wait_.deadline));
    const bool run_now = holds_slot_ && !leaving_ && !wait_over && !registry_->cap().over() &&
                         !registry_->urgent_injector().has_jobs() && !mailbox_.has_jobs();
    if (run_now) [[likely]] {
        run_job(job, TraceKind::kJobOwn);
    } else {
        registry_->submit(job);  // public, posted with the fence, as queue_ready would have
    }
}

void Worker::execute_traced(Job *job, TraceKind source) {
    // Read before running: a spawned task's memory may be gone after.
    const uint64_t function = function_of(job);
    const uint64_t begin = monotonic_now_ns();
    job->execute(job);
    trace_.write({begin, monotonic_now_ns(), function, source});
}

void Worker::trace_woken() {
    // The waker's event carries the same id: our count of sleeps, which
    // it read under our sleep mutex while we were blocked.
    const uint64_t now = monotonic_now_ns();
    trace_.write({now, now, wake_flow_id(index_, sleep_->own_sleep_count(index_)), TraceKind::kWakeIn, sched_getcpu()});
}

Job *Worker::steal() {
    const uint32_t n = registry_->slots_in_use();  // the workers, and spares that ever ran
    if (n <= 1) return nullptr;
    const uint32_t start = rng_.below(n);
    for (;;) {
        bool contended = false;
        for (uint32_t k = 0; k < n; ++k) {
            uint32_t victim = start + k;
            if (victim >= n) victim -= n;
            if (victim == index_) continue;
            // Alive as long as the pool, whose worker we are.
            Worker &other = registry_->worker(victim);
            auto stolen = steal_and_request(other.deque_, other.forks_);
            if (stolen.status == Deque<Job *>::Steal::kSuccess) {
                BLZ_FAULT_POINT(kThiefTookJob, registry_);
                bump(steals_);
                return stolen.value;
            }
            contended |= stolen.status == Deque<Job *>::Steal::kAbort;
        }
        if (!contended) return nullptr;  // every deque was seen empty
    }
}

static_assert(sizeof(FrameJob) <= sizeof(blz_fork_frame::job), "blz_fork_frame::job holds a FrameJob");
static_assert(alignof(FrameJob) <= alignof(uintptr_t), "and aligns it");

FrameJob *Worker::ForkHost::frame_job(blz_fork_frame *frame) {
    return std::launder(reinterpret_cast<FrameJob *>(frame->job));
}

bool Worker::ForkHost::push_frame_job(blz_fork_frame *frame) {
    // The submitter's task frames are the thread's now [F4].
    auto *job = new (frame->job) FrameJob(CFunction{frame->fn, frame->arg}, Latch::Waiter{&w, nullptr});
    if (w.deque_.push(job)) return true;
    job->~FrameJob();
    return false;
}

bool Worker::ForkHost::wait_for_thief(FrameJob *job) {
    w.wait_until(job->latch.core());
    return job->ok;  // written before the thief set the latch (StackJob::run)
}

bool Worker::push_fork(blz_fork_frame *frame) {
    ForkHost host{*this};
    return push_fork_slow(host, frame);
}

bool Worker::join_promoted(blz_fork_frame *frame) {
    ForkHost host{*this};
    return join_promoted_frame(host, frame);
}

bool Worker::run_taken_back(blz_fork_frame *frame) {
    forks_.count_job();
    const CFunction half{frame->fn, frame->arg};
    if (!trace_.attached()) [[likely]] return half();
    const uint64_t begin = monotonic_now_ns();
    const bool ok = half();
    trace_.write({begin, monotonic_now_ns(), reinterpret_cast<uintptr_t>(frame->fn), TraceKind::kJobOwn});
    return ok;
}

void die_unwound_out_of(const char *what) {
    // write(2), not stdio: nothing here may allocate or take a lock the
    // unwound code might hold.
    auto say = [](const char *text) { (void)!write(STDERR_FILENO, text, std::strlen(text)); };
    say("libblitz: fatal: ");
    say(what);
    say(" on a worker thread was left by an unwind that is not a C++ exception (pthread_exit, a "
        "cancellation it enabled, or another language's exception); a worker thread cannot end "
        "inside user code, so the process stops here\n");
    std::abort();
}

Latch::Waiter Latch::current_thread(Parker *parker) {
    Worker *worker = Worker::current();
    return worker != nullptr ? Waiter{worker, nullptr} : Waiter{nullptr, parker};
}

namespace {

// A pool as set_and_wake_worker sees it (core_latch.hpp), with the fault
// points that hold its windows open.
struct WakeablePool {
    Registry &pool;

    void pin() { pool.pin(); }
    void wake(uint32_t index) {
        BLZ_FAULT_POINT(kLatchSetBeforeWake, &pool);
        // The waiter sleeps in the sleep protocol, or (isolated) on its
        // own word: the other call finds nobody and costs no system call.
        pool.sleep().wake_specific_thread(index);
        pool.sleep().wake_isolated(index);
    }
    void unpin() {
        BLZ_FAULT_POINT(kLatchSetBeforeUnpin, &pool);
        pool.unpin();  // may free the pool: its last access
    }
};

}  // namespace

void Latch::set() {
    // Copy the waiter first: after the swap the latch may be gone.
    Worker *waiter = this->worker();
    if (waiter == nullptr) {
        Parker *parker = this->parker();
        if (core_.set()) parker->unpark();  // parker.hpp: the parker's own rule covers its lifetime
        return;
    }
    WakeablePool pool{waiter->registry()};
    const bool pin = !pool.pool.is_own(Worker::current()) && !BLZ_FAULT_MUTANT(kNoPinOnLatchSet);
    set_and_wake_worker(core_, pool, waiter->index(), pin);
}

bool Latch::wait_until(uint64_t deadline) {
    if (Worker *worker = this->worker()) return worker->wait_until(core_, deadline);
    // A parked thread uses the same transitions as a sleeping worker: a
    // setter that finds SLEEPING will unpark us, and only then may we
    // return (the setter still touches the parker).
    if (!core_.get_sleepy()) return true;
    if (!core_.fall_asleep()) return true;
    if (parker()->park_until(deadline)) return true;
    // Back to UNSET unless a setter found SLEEPING meanwhile: that setter
    // will unpark us, and the parker must outlive its call.
    if (core_.wake_up()) return false;
    parker()->park();
    return true;
}

void Latch::wait() { wait_until(kNoDeadline); }

namespace {

// A half of a split range, run by whichever worker runs the half.
RangeOutcome split_range(Registry &registry, size_t begin, size_t end, size_t grain, blz_range_fn body, void *arg,
                         CancelWatch cancel) {
    const size_t mid = begin + (end - begin) / 2;
    // The join's halves report success as a bool: a half is "ok" unless it
    // failed, and a cancelled half is remembered aside.
    std::atomic<bool> skipped{false};
    auto half = [&](size_t lo, size_t hi) {
        RangeOutcome outcome = parallel_for_on_worker(registry, lo, hi, grain, body, arg, cancel);
        // relaxed: read after the join, which orders both halves before it.
        if (outcome == RangeOutcome::kCancelled) skipped.store(true, std::memory_order_relaxed);
        return outcome != RangeOutcome::kFailed;
    };
    if (!Worker::current()->join([&] { return half(begin, mid); }, [&] { return half(mid, end); })) {
        return RangeOutcome::kFailed;
    }
    return skipped.load(std::memory_order_relaxed) ? RangeOutcome::kCancelled : RangeOutcome::kOk;
}

}  // namespace

// Lazy splitting: the range runs here piece after piece (`grain` indices
// each), and what is left is split in two by a fork only when a thief has
// asked this worker for work (fork_stack.hpp [F5]: a steal from our deque,
// or one that found it empty) or tracing wants every fork: the fork then
// promotes at once (push_fork_slow), so the thief gets half of the rest. A
// loop nobody steals from costs one relaxed load per piece over a plain
// loop, whatever the grain; every steal splits off half of what is left,
// and each half splits the same way on its worker.
RangeOutcome parallel_for_on_worker(Registry &registry, size_t begin, size_t end, size_t grain,
                                    blz_range_fn body, void *arg, CancelWatch cancel) {
    ForkStack<> &forks = Worker::current()->forks();
    bool failed = false;
    while (begin < end) {
        const size_t left = end - begin;
        if (left > grain && forks.requests() != 0) [[unlikely]] {
            const RangeOutcome rest = split_range(registry, begin, end, grain, body, arg, cancel);
            return failed ? RangeOutcome::kFailed : rest;
        }
        // Relaxed loads (cancel.hpp), at most two per piece. Every piece
        // after it is skipped too, as a split would skip them.
        if (cancel.requested()) {
            return failed ? RangeOutcome::kFailed : RangeOutcome::kCancelled;
        }
        const size_t hi = begin + std::min(grain, left);
        // A failed piece is counted; the others still run (blitz.h).
        if (!run_job([&] { body(arg, begin, hi); })) failed = true;
        begin = hi;
    }
    return failed ? RangeOutcome::kFailed : RangeOutcome::kOk;
}

}  // namespace blz
