#include "worker.hpp"

#include <cstdlib>
#include <cstring>
#include <unistd.h>

#include "fault.hpp"

namespace blz {

constinit thread_local Worker *t_current_worker = nullptr;

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

void Worker::wait_until(CoreLatch<> &latch) {
    Sleep<> &sleep = *sleep_;
    auto has_shared_jobs = [this] { return registry_->has_shared_jobs(); };
    while (!latch.probe()) {
        // One search while still active: a worker fed by steals or by the
        // injector (a stream of spawns from outside) goes from job to job
        // without the two counter updates of going idle and back.
        if (Job *job = find_work(false)) {
            execute(job);
            continue;
        }
        IdleState idle = sleep.start_looking(index_);
        Job *found = nullptr;
        bool woken = false;
        while (!latch.probe()) {
            found = find_work(woken);
            if (found != nullptr) break;
            woken = sleep.no_work_found(idle, latch, has_shared_jobs, fork_awake_limit_) == IdleOutcome::kWoken;
        }
        // Leaving the idle state: we found a job, or the latch was set (the
        // work we were waiting for is done: also a reason to be awake).
        sleep.work_found(index_, has_shared_jobs);
        if (found == nullptr) return;
        execute(found);
    }
}

Job *Worker::find_work(bool woken) {
    // A worker just woken was most likely woken for an injected job (a
    // fork-join half is handed over as a steal by the worker that woke
    // it, whose deque is also scanned below): look there first.
    if (woken) {
        if (Job *job = registry_->injector().pop()) return job;
    }
    if (Job *job = pop()) return job;
    no_public_tasks();  // an empty pop: our deque is empty
    if (Job *job = steal()) return job;
    return registry_->injector().pop();
}

Job *Worker::steal() {
    const uint32_t n = registry_->num_threads();
    if (n <= 1) return nullptr;
    const uint32_t start = rng_.below(n);
    for (;;) {
        bool contended = false;
        for (uint32_t k = 0; k < n; ++k) {
            uint32_t victim = start + k;
            if (victim >= n) victim -= n;
            if (victim == index_) continue;
            auto stolen = registry_->worker(victim).deque_.steal();
            if (stolen.status == Deque<Job *>::Steal::kSuccess) {
                bump(steals_);
                return stolen.value;
            }
            contended |= stolen.status == Deque<Job *>::Steal::kAbort;
        }
        if (!contended) return nullptr;  // every deque was seen empty
    }
}

void count_task_failure() { Worker::current()->registry().count_task_failure(); }

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

void Latch::set() {
    // Copy the waiter first: after the swap the latch may be gone.
    Worker *waiter = this->worker();
    if (waiter == nullptr) {
        Parker *parker = this->parker();
        if (core_.set()) parker->unpark();  // parker.hpp: the parker's own rule covers its lifetime
        return;
    }
    // Once the swap is done the waiter may leave its wait for another
    // reason, return, and its pool may be destroyed before our wake-up call.
    // A worker of that pool is safe (destroy joins it before freeing); any
    // other setter pins the pool first, while the waiter still waits, so
    // that the memory outlives the call (admission.hpp [A4]).
    Registry &pool = waiter->registry();
    const uint32_t index = waiter->index();
    const bool pin = !pool.is_own(Worker::current()) && !BLZ_FAULT_MUTANT(kNoPinOnLatchSet);
    if (pin) pool.pin();
    if (core_.set()) {
        BLZ_FAULT_POINT(kLatchSetBeforeWake, &pool);
        pool.sleep().wake_specific_thread(index);
    }
    if (pin) {
        BLZ_FAULT_POINT(kLatchSetBeforeUnpin, &pool);
        pool.unpin();  // may free the pool: its last access
    }
}

void Latch::wait() {
    if (Worker *worker = this->worker()) {
        worker->wait_until(core_);
        return;
    }
    // A parked thread uses the same transitions as a sleeping worker: a
    // setter that finds SLEEPING will unpark us, and only then may we
    // return (the setter still touches the parker).
    if (!core_.get_sleepy()) return;
    if (!core_.fall_asleep()) return;
    parker()->park();
}

bool parallel_for_on_worker(Registry &registry, size_t begin, size_t end, size_t grain,
                            blz_range_fn body, void *arg) {
    if (end - begin <= grain) {
        return run_guarded([&] { body(arg, begin, end); });
    }
    size_t mid = begin + (end - begin) / 2;
    // Each half asks for the current worker: a thief runs it on its own thread.
    auto left = [&] { return parallel_for_on_worker(registry, begin, mid, grain, body, arg); };
    auto right = [&] { return parallel_for_on_worker(registry, mid, end, grain, body, arg); };
    return Worker::current()->join(left, right);
}

}  // namespace blz
