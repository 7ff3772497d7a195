#include "broadcast.hpp"

#include <atomic>
#include <cstdint>
#include <new>

#include "registry.hpp"
#include "worker.hpp"

namespace blz {

namespace {

// The call's state, on the caller's stack; it lives until the last job
// has set `done`, which the caller waits for.
struct Broadcast {
    Broadcast(blz_thread_fn call_fn, void *call_arg, uint32_t workers, Parker *parker)
        : fn(call_fn), arg(call_arg), remaining(workers), done(Latch::current_thread(parker)) {}

    const blz_thread_fn fn;
    void *const arg;
    const TaskFrame *const submitter_frames = t_task_frames;  // the caller's, valid while it waits
    std::atomic<uint32_t> remaining;
    std::atomic<bool> failed{false};
    Latch done;
};

// One worker's share; the array of them is freed by the caller after the wait.
struct BroadcastJob : QueuedJob {
    BroadcastJob() : QueuedJob(&run) {}
    Broadcast *call = nullptr;

    static void run(Job *job) {
        Broadcast &call = *static_cast<BroadcastJob *>(job)->call;
        // The work is the caller's: blz_cancelled and deadlock detection
        // see its tasks, as for a stolen fork-join half.
        TaskFrame bridge{nullptr, t_task_frames, call.submitter_frames};
        t_task_frames = &bridge;
        const uint32_t index = Worker::current()->index();
        const bool ok = run_job([&call, index] { call.fn(call.arg, index); });
        t_task_frames = bridge.outer;
        // relaxed: published by the acq_rel decrement below.
        if (!ok) call.failed.store(true, std::memory_order_relaxed);
        // acq_rel: the last one sees every other worker's effects and hands
        // them to the caller through the latch. Only the last touches `call`
        // after this: the others' last access is the decrement.
        if (call.remaining.fetch_sub(1, std::memory_order_acq_rel) == 1) call.done.set();
    }
};

}  // namespace

blz_status broadcast(Registry &registry, blz_thread_fn fn, void *arg) {
    // One unit for the whole call: destroy waits for it, so every worker
    // stays in its loop until its job ran.
    blz_status status = registry.enter();
    if (status != BLZ_OK) return status;
    const uint32_t n = registry.num_threads();
    BroadcastJob *jobs = new (std::nothrow) BroadcastJob[n];
    if (jobs == nullptr) {
        registry.leave();
        return BLZ_ENOMEM;
    }
    Parker parker;
    Broadcast call(fn, arg, n, &parker);
    // A worker of this pool in an isolated context runs its own share
    // here: its wait below runs no mail (isolation.hpp), so its mailbox
    // would hold the share until the wait it blocks ends.
    Worker *self = Worker::current();
    if (self != nullptr && (&self->registry() != &registry || !t_isolation.on)) self = nullptr;
    for (uint32_t i = 0; i < n; ++i) {
        jobs[i].call = &call;
        if (self == nullptr || i != self->index()) registry.worker(i).post_mail(&jobs[i]);
    }
    if (self != nullptr) BroadcastJob::run(&jobs[self->index()]);
    call.done.wait();
    delete[] jobs;
    // relaxed: the latch ordered every job's store before us.
    const bool failed = call.failed.load(std::memory_order_relaxed);
    registry.leave();
    return failed ? BLZ_ETASK : BLZ_OK;
}

}  // namespace blz
