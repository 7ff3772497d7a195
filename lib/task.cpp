#include "task.hpp"

#include <cstddef>
#include <memory>
#include <new>

#include <thread>

#include "event.hpp"
#include "fault.hpp"
#include "group.hpp"
#include "job_memory.hpp"
#include "registry.hpp"
#include "worker.hpp"

namespace blz {

constinit thread_local const TaskFrame *t_task_frames = nullptr;
constinit thread_local uint32_t t_failures = 0;

namespace {
Latch *const kFinished = reinterpret_cast<Latch *>(uintptr_t{1});
Latch *const kDetached = reinterpret_cast<Latch *>(uintptr_t{2});

// A joined task's memory goes to the joiner's own cache: the joiner may
// outlive the pool, whose recycler is gone by then.
void free_task(SpawnedJob *task) {
    task->~SpawnedJob();
    release_job_block_here(task);
}

// This thread's worker when it is one of `registry`'s workers, else nullptr.
Worker *own_worker(Registry &registry) {
    Worker *worker = Worker::current();
    return registry.is_own(worker) ? worker : nullptr;
}
}

SpawnedJob::SpawnedJob(Registry &owner, blz_fn task_fn, void *task_arg, const SpawnOptions &options,
                       bool detached)
    : QueuedJob(&run),
      registry(&owner),
      fn(task_fn),
      arg(task_arg),
      group(options.group),
      on_done(options.on_done),
      done_arg(options.done_arg),
      fork_generation(g_fork_generation.load(std::memory_order_relaxed)),
      flags(options.flags | (options.num_predecessors() != 0 ? kSpawnedAfterPredecessors : 0)),
      isolated(t_isolation.on),
      joiner(detached ? kDetached : nullptr) {}

const std::atomic<bool> *SpawnedJob::group_cancel_flag() const { return group->cancel_flag(); }

namespace {

WaiterList::Callback *const kClosedList = reinterpret_cast<WaiterList::Callback *>(uintptr_t{1});

// Into the pool's queues: the urgent injector for a high-priority task,
// else the calling worker's deque or the injector (Registry::submit).
void post(Registry &registry, SpawnedJob *task) {
    if (task->high_priority()) {
        registry.inject_urgent(task);
    } else {
        registry.submit(task);
    }
}

// A task whose last predecessor completed (or whose finish_later event was
// set), queued from any thread. The task holds its unit of the pool, so
// the pool is alive here; a thread that is not one of its workers takes a
// unit of its own for the post, as an outside spawn does (admission.hpp),
// since the task may run, end and let destroy free the pool before the
// post's wake-up returns. That unit is never refused: ACTIVE is above zero
// ([A1]); only a full count (2^31 units) makes it wait for one to leave.
void queue_ready(SpawnedJob *task) {
    Registry &registry = *task->registry;
    // In a forked child the parent's tasks never run (their joins return
    // BLZ_EFORK); an event set in the child must not queue one there.
    if (registry.forked()) return;
    if (Worker *worker = own_worker(registry)) {
        if (task->high_priority() || !worker->offer_continuation(task)) post(registry, task);
        return;
    }
    while (registry.enter(1, true) == BLZ_ENOMEM) std::this_thread::yield();
    post(registry, task);
    registry.leave();  // the post's last access to the pool
}

// One predecessor of `task` completed with `status`: the release that
// takes `blockers` to zero queues the task.
void release_dependency(SpawnedJob *task, blz_status status) {
    // relaxed: published to the last releaser by the decrement below.
    if (status != BLZ_OK) task->predecessor_failed.store(true, std::memory_order_relaxed);
    // The count's acq_rel release orders the mark (dependency_count.hpp).
    if (task->blockers.release()) queue_ready(task);
}

void run_edge(WaiterList::Callback *edge, blz_status status) {
    release_dependency(static_cast<DependencyEdge *>(edge)->successor, status);
}

// Puts `edge` on `predecessor`'s successor stack (true), or finds it
// finished (false, with its status).
bool add_to_task(SpawnedJob *predecessor, WaiterList::Callback *edge, blz_status *status) {
    // acquire: a closed stack's task wrote `status` before closing it.
    WaiterList::Callback *head = predecessor->successors.load(std::memory_order_acquire);
    do {
        if (head == kClosedList) {
            *status = predecessor->status;
            return false;
        }
        edge->next = head;
        // release: the edge's fields reach the finishing task's exchange;
        // acquire on failure: as the load above.
    } while (!predecessor->successors.compare_exchange_weak(head, edge, std::memory_order_release,
                                                            std::memory_order_acquire));
    return true;
}

// Registers the edge to one predecessor, counted already (hold(); the
// mutant counts it here): the predecessor may release it at once from
// another thread.
template <class Add>
void register_edge(SpawnedJob *task, DependencyEdge &edge, bool held, Add &&add) {
    edge.run = &run_edge;
    edge.successor = task;
    task->blockers.count_one(held);
    blz_status status = BLZ_OK;
    if (!add(&edge, &status)) release_dependency(task, status);  // complete already
    BLZ_FAULT_POINT(kEdgeRegistered, task->registry);
}

// Counts every predecessor and the spawner's hold at once, registers each
// predecessor, then drops the hold: the task is queued here if they all
// completed, else by the last one.
void register_predecessors(SpawnedJob *task, const SpawnOptions &options) {
    // The mutant spawner (lifetime_checks) counts as it registers and takes
    // no hold: the runtime's fault switch, the model's is DependencyCount's own.
    const bool hold = task->blockers.hold(options.num_predecessors(), !BLZ_FAULT_MUTANT(kSpawnerHoldsNoCount));
    DependencyEdge *edge = task->edges;
    for (size_t i = 0; i < options.num_after_tasks; ++i) {
        SpawnedJob *predecessor = options.after_tasks[i];
        register_edge(task, *edge++, hold, [predecessor](WaiterList::Callback *e, blz_status *status) {
            return add_to_task(predecessor, e, status);
        });
    }
    for (size_t i = 0; i < options.num_after_events; ++i) {
        Event *event = options.after_events[i];
        register_edge(task, *edge++, hold,
                      [event](WaiterList::Callback *e, blz_status *status) { return event->add_callback(e, status); });
    }
    for (size_t i = 0; i < options.num_after_groups; ++i) {
        Group *group = options.after_groups[i];
        register_edge(task, *edge++, hold,
                      [group](WaiterList::Callback *e, blz_status *status) { return group->add_callback(e, status); });
    }
    if (hold) release_dependency(task, BLZ_OK);
}

// Runs each successor's edge with this task's status; the stack is closed
// so that a later spawn counts this task as complete.
void release_successors(SpawnedJob *task, blz_status status) {
    // acq_rel: release publishes `status` to a spawner that finds the stack
    // closed; acquire makes the edges pushed (release CAS) visible.
    WaiterList::Callback *edge = task->successors.exchange(kClosedList, std::memory_order_acq_rel);
    while (edge != nullptr) {
        WaiterList::Callback *next = edge->next;  // read first: the release may free its task
        edge->run(edge, status);
        edge = next;
    }
}

// blz_task_finish_later's event was set: the task is queued again, to finish.
void finish_deferred(WaiterList::Callback *edge, blz_status status) {
    SpawnedJob *task = static_cast<DependencyEdge *>(edge)->successor;
    task->deferred_status = status;  // published by the queue
    queue_ready(task);
}

// After fn returned, for a task that called blz_task_finish_later: true
// when its event is set already (*status becomes its status), false when
// the task was registered on it and will be queued again once it is set
// (then the task is not ours to touch any more).
bool finish_event_set(SpawnedJob *task, Event *event, blz_status *status) {
    task->body_done = true;
    DependencyEdge &edge = task->finish_edge();  // no predecessor reads its edge any more (task.hpp)
    edge.run = &finish_deferred;
    edge.successor = task;
    const bool waiting = event->add_callback(&edge, status);
    event->drop();  // the task's own reference (finish_task_later), kept while it registered
    return !waiting;
}

// The task's own work: skipped when it or its group is cancelled before
// it starts, or when a predecessor failed or was cancelled (unless
// BLZ_SPAWN_AFTER_ANY_END).
blz_status run_task_body(SpawnedJob *task) {
    if (task->cancel_watch().requested()) return BLZ_ECANCELED;
    // relaxed: the last release's acquire and the queue made it visible.
    if (!task->after_any_end() && task->predecessor_failed.load(std::memory_order_relaxed)) return BLZ_ECANCELED;
    TaskFrame frame{task, t_task_frames, nullptr};
    t_task_frames = &frame;
    const bool ok = run_job([task] { task->fn(task->arg); });
    t_task_frames = frame.outer;
    return ok ? BLZ_OK : BLZ_ETASK;
}

// on_done has nobody to report to: its exception is counted, its blz_fail
// belongs to no job (the count is put back) and cancels no group. It runs
// in a completion frame (job.hpp): a wait in it for its own task or group
// returns BLZ_EDEADLK.
//
// `task` is nullptr for an on_done that runs after the task finished
// (BLZ_SPAWN_DONE_AFTER_FINISH): the task may be freed by then, and a wait
// for it or its group no longer waits for itself.
void call_on_done(Registry &registry, const SpawnedJob *task, blz_done_fn on_done, void *done_arg,
                  blz_status status) {
    const uint32_t failures = t_failures;
    TaskFrame frame{task, t_task_frames, nullptr, true};
    t_task_frames = &frame;
    try {
        on_done(done_arg, status);
    } catch (...) {
        stop_unless_cxx_exception("an on_done callback");
        registry.count_task_failure();
    }
    t_task_frames = frame.outer;
    t_failures = failures;
}

}  // namespace

void SpawnedJob::run(Job *job) {
    auto *task = static_cast<SpawnedJob *>(job);
    // The whole run, on_done included, in the context the task was
    // spawned in; the flag is copied: the task may be freed before the end.
    run_isolated_if(task->isolated, [task] { run_spawned(task); });
}

void SpawnedJob::run_spawned(SpawnedJob *task) {
    if (task->body_done) {
        finish(task, task->deferred_status);
        return;
    }
    // Every predecessor released the task: none reads its edge again.
    if (task->edges != task->inline_edges) {
        delete[] task->edges;
        task->edges = task->inline_edges;
    }
    blz_status status = run_task_body(task);
    // relaxed: written by fn's own frames (or a half it joined) on this thread's side of the join.
    Event *event = task->finish_event.load(std::memory_order_relaxed);
    if (event != nullptr) {
        if (status != BLZ_OK) {
            event->drop();  // fn failed: the task ends now, the event changes nothing
        } else if (!finish_event_set(task, event, &status)) {
            return;  // queued again when the event is set
        }
    }
    finish(task, status);
}

void SpawnedJob::finish(SpawnedJob *task, blz_status status) {
    Registry &registry = *task->registry;
    Group *group = task->group;
    // Copied now: once kFinished is out, the joiner may free the task.
    const blz_done_fn late_done = task->done_after_finish() ? task->on_done : nullptr;
    void *const done_arg = task->done_arg;
    if (task->on_done != nullptr && late_done == nullptr) call_on_done(registry, task, task->on_done, done_arg, status);

    task->status = status;
    const bool successors_late = BLZ_FAULT_MUTANT(kSuccessorsAfterFinish);
    if (!successors_late) {
        BLZ_FAULT_POINT(kReleasingSuccessors, &registry);
        // A successor may wait in the continuation only when nothing but
        // the pool's own code runs between here and this job's return to
        // Worker::execute: not with an on_done still to call, nor in an
        // isolated context (its waits must not run what was made outside).
        Worker::ContinuationWindow window(late_done == nullptr && !t_isolation.on ? Worker::current() : nullptr);
        release_successors(task, status);  // before the exchange: the joiner may free the task after it
    }
    // acquire alone (no exchange) for a task nobody can join: no other
    // thread writes its word again; acquire orders a late detacher's CAS
    // before the free. Otherwise acq_rel: release publishes `status` to the
    // joiner, acquire makes the joiner's latch (written before its CAS)
    // visible to us.
    Latch *joiner = task->joiner.load(std::memory_order_acquire);
    if (joiner != kDetached) joiner = task->joiner.exchange(kFinished, std::memory_order_acq_rel);
    // One of the pool's workers hands back the task's block and unit in
    // batches (admission.hpp [A5]); the pool outlives its workers' batches.
    Worker *const own = own_worker(registry);
    if (joiner == kDetached) {
        task->~SpawnedJob();
        // For the next spawn into the pool, likely from the thread that spawned this task.
        if (own != nullptr) [[likely]] {
            own->recycle(task);
        } else {
            registry.recycle(task);
        }
    } else if (joiner != nullptr) {
        BLZ_FAULT_POINT(kTaskTookLatch, &registry);
        joiner->set();
    }
    if (successors_late) {
        BLZ_FAULT_POINT(kReleasingSuccessors, &registry);
        release_successors(task, status);  // the defect: the joiner may have freed the task
    }
    if (group != nullptr) group->task_finished(status);
    // Before leave(): blz_pool_destroy returns after every on_done.
    if (late_done != nullptr) {
        BLZ_FAULT_POINT(kTaskFinishedBeforeLateDone, &registry);
        if (BLZ_FAULT_MUTANT(kLateDoneReadsTask)) {
            call_on_done(registry, nullptr, task->on_done, task->done_arg, status);  // the defect: task may be freed
        } else {
            call_on_done(registry, nullptr, late_done, done_arg, status);
        }
    }
    if (own != nullptr) [[likely]] {
        own->leave_later();
    } else {
        registry.leave();
    }
}

namespace {

// An open-addressing hash set of frame pointers, kept at most half full,
// in a table on the stack until it outgrows it.
class FrameSet {
public:
    FrameSet() = default;
    FrameSet(const FrameSet &) = delete;
    FrameSet &operator=(const FrameSet &) = delete;

    // 1 if added, 0 if already present, -1 if out of memory.
    int insert(const TaskFrame *frame) {
        if (2 * (size_ + 1) > capacity_ && !grow()) return -1;
        const TaskFrame **slots = table();
        for (std::size_t i = slot_of(frame);; i = (i + 1) & (capacity_ - 1)) {
            if (slots[i] == frame) return 0;
            if (slots[i] == nullptr) {
                slots[i] = frame;
                ++size_;
                return 1;
            }
        }
    }

private:
    static constexpr std::size_t kInline = 64;

    const TaskFrame **table() { return heap_ ? heap_.get() : inline_; }
    std::size_t slot_of(const TaskFrame *frame) const {
        uint64_t h = (reinterpret_cast<uintptr_t>(frame) >> 4) * 0x9E3779B97F4A7C15ULL;
        return static_cast<std::size_t>(h >> 32) & (capacity_ - 1);
    }
    bool grow() {
        std::unique_ptr<const TaskFrame *[]> bigger(new (std::nothrow) const TaskFrame *[2 * capacity_]());
        if (!bigger) return false;
        const TaskFrame **old = table();
        std::size_t old_capacity = capacity_;
        std::unique_ptr<const TaskFrame *[]> keep = std::move(heap_);  // frees the old heap table at return
        heap_ = std::move(bigger);
        capacity_ *= 2;
        size_ = 0;
        for (std::size_t i = 0; i < old_capacity; ++i) {
            if (old[i] != nullptr) insert(old[i]);
        }
        return true;
    }

    const TaskFrame *inline_[kInline] = {};
    std::unique_ptr<const TaskFrame *[]> heap_;
    std::size_t capacity_ = kInline;
    std::size_t size_ = 0;
};

// Whether a task that `match` accepts is in the frames reachable from `f`.
// Bridges of two threads can lead to the same older frames, so the frames
// form a DAG, and a walk without `visited` could take exponential time. A
// frame already visited was explored in full (there are no cycles), so the
// walk stops there. Out of memory, it answers false: it reports no
// deadlock it could not prove.
template <class Match>
bool any_task_in(const TaskFrame *f, FrameSet &visited, Match &match) {
    for (; f != nullptr; f = f->outer) {
        if (visited.insert(f) != 1) return false;
        if (f->task != nullptr && match(f->task)) return true;
        if (f->submitter != nullptr && any_task_in(f->submitter, visited, match)) return true;
    }
    return false;
}

template <class Match>
bool any_task_on_this_thread(Match match) {
    FrameSet visited;
    return any_task_in(t_task_frames, visited, match);
}

}  // namespace

bool is_running_on_this_thread(const SpawnedJob *task) {
    return any_task_on_this_thread([task](const SpawnedJob *t) { return t == task; });
}

bool is_running_on_this_thread(const Group *group) {
    return any_task_on_this_thread([group](const SpawnedJob *t) { return t->group == group; });
}

bool take_failures(uint32_t before, bool count) {
    t_failures = before;
    if (count) job_failed();
    return false;
}

void job_failed() {
    Worker::current()->registry().count_task_failure();
    cancel_group_on_failure();
}

void cancel_group_on_failure() {
    const SpawnedJob *task = innermost_task();
    if (task == nullptr) return;
    // relaxed: a cancel is a request (cancel.hpp).
    if (task->cancel_on_failure()) task->cancelled.store(true, std::memory_order_relaxed);
    if (task->group != nullptr) task->group->work_failed();
}

void cancel_task(SpawnedJob *task) {
    task->cancelled.store(true, std::memory_order_relaxed);  // relaxed: a cancel is a request (cancel.hpp)
}

blz_status finish_task_later(Event **out_event) {
    const SpawnedJob *task = innermost_task();
    if (task == nullptr) return BLZ_EINVAL;
    Event *event = nullptr;
    const blz_status created = Event::create(&event);
    if (created != BLZ_OK) return created;
    event->hold();  // the task's: it registers on the event after fn returned, when the handle may be gone
    Event *expected = nullptr;
    // relaxed: fn's frames are joined into the task's thread before it
    // reads the word (a fork-join half's join, or fn's own thread).
    if (!task->finish_event.compare_exchange_strong(expected, event, std::memory_order_relaxed)) {
        event->drop();
        event->destroy();
        return BLZ_EINVAL;  // called twice for the same task
    }
    *out_event = event;
    return BLZ_OK;
}

CancelWatch cancel_watch_here() {
    const SpawnedJob *task = innermost_task();
    return task != nullptr ? task->cancel_watch() : CancelWatch{};
}

const SpawnedJob *innermost_task() {
    // A bridge frame's work is its submitter's: follow the submitter, not
    // the thread's own enclosing frames. An on_done is no task's work.
    for (const TaskFrame *f = t_task_frames; f != nullptr; f = f->submitter) {
        if (f->completion) return nullptr;
        if (f->task != nullptr) return f->task;
    }
    return nullptr;
}

blz_status spawn_task(Registry &registry, blz_fn fn, void *arg, const SpawnOptions &options, blz_task **out_task) {
    const bool own_worker = registry.is_own(Worker::current());
    return submit_admitted<StdSync>(registry, own_worker, [&]() -> blz_status {
        const bool detached = out_task == nullptr;
        void *block = allocate_job_block(registry.recycler());
        if (block == nullptr) return BLZ_ENOMEM;
        const size_t predecessors = options.num_predecessors();
        DependencyEdge *heap_edges = nullptr;
        if (predecessors > SpawnedJob::kInlineEdges) {
            heap_edges = new (std::nothrow) DependencyEdge[predecessors];
            if (heap_edges == nullptr) {
                release_job_block_here(block);
                return BLZ_ENOMEM;
            }
        }
        auto *task = new (block) SpawnedJob(registry, fn, arg, options, detached);
        if (heap_edges != nullptr) task->edges = heap_edges;
        if (options.group != nullptr) options.group->task_added();
        if (!detached) *out_task = reinterpret_cast<blz_task *>(task);
        // The task may run and (if detached) be freed from here on. A
        // high-priority task skips the spawning worker's deque: every worker
        // searches the urgent injector before deques and the injector.
        if (predecessors != 0) {
            register_predecessors(task, options);
        } else {
            post(registry, task);
        }
        return BLZ_OK;
    });
}

namespace {

enum class WaitOutcome { kFinished, kTimedOut, kMisused };

// Waits on a latch put into the task's word, until the task sets it or
// the deadline passes. kTimedOut when it passed and the latch was taken
// back: the task will never see it. kMisused when the word held another
// waiter's latch or kDetached: the handle is not this thread's to wait
// for (blitz.h: one thread at a time, once), and freeing the task would
// free it under that waiter or twice.
WaitOutcome wait_for_finish(SpawnedJob *task, uint64_t deadline) {
    Parker parker;
    Latch latch(Latch::current_thread(&parker));
    Latch *expected = nullptr;
    // acq_rel: release publishes our latch to the task; acquire (also on
    // failure, when we find kFinished) makes `status` visible.
    if (!task->joiner.compare_exchange_strong(expected, &latch, std::memory_order_acq_rel,
                                              std::memory_order_acquire)) {
        return expected == kFinished ? WaitOutcome::kFinished : WaitOutcome::kMisused;
    }
    BLZ_FAULT_POINT(kWaiterInstalled, task->registry);
    if (latch.wait_until(deadline)) return WaitOutcome::kFinished;
    BLZ_FAULT_POINT(kTimedWaitExpired, task->registry);
    if (BLZ_FAULT_MUTANT(kTimedWaitForgetsLatch)) return WaitOutcome::kTimedOut;
    expected = &latch;
    // acquire on failure: the task exchanged kFinished (its `status` is
    // ours) and is about to set the latch, which must outlive that set.
    // (acquire on success too: gcc rejects a success order weaker than
    // the failure order; nothing is published or read then.)
    if (task->joiner.compare_exchange_strong(expected, nullptr, std::memory_order_acquire,
                                             std::memory_order_acquire)) {
        return WaitOutcome::kTimedOut;
    }
    latch.wait();
    return WaitOutcome::kFinished;
}

}  // namespace

blz_status join_task(SpawnedJob *task, uint64_t deadline) {
    if (is_running_on_this_thread(task)) return BLZ_EDEADLK;
    // acquire: pairs with the task's exchange, so `status` is visible.
    Latch *seen = task->joiner.load(std::memory_order_acquire);
    if (seen != kFinished) {
        if (task->fork_generation != g_fork_generation.load(std::memory_order_relaxed)) {
            // Queued or running in the parent: it never finishes here. A
            // task spawned after predecessors, or whose fn asked to finish
            // later, may be on an event's, group's or task's list, which a
            // thread of this child may still complete and so release the
            // task: it stays allocated (this child's copy of the memory)
            // rather than freed under that list. Neither field is written
            // in the child: the parent's workers did not come across.
            if (!task->spawned_after_predecessors() && !task->body_done) free_task(task);
            return BLZ_EFORK;
        }
        if (seen != nullptr) return BLZ_EINVAL;  // another thread waits, or it was detached (wait_for_finish)
        if (deadline_passed(deadline)) return BLZ_ETIMEDOUT;
        const WaitOutcome outcome = wait_for_finish(task, deadline);
        if (outcome == WaitOutcome::kTimedOut) return BLZ_ETIMEDOUT;
        if (outcome == WaitOutcome::kMisused) return BLZ_EINVAL;
    }
    const blz_status status = task->status;
    free_task(task);
    return status;
}

blz_status detach_task(SpawnedJob *task) {
    Latch *expected = nullptr;
    // release: orders our last access before the task's free (its acquire);
    // acquire on failure: a kFinished task's memory is ours to free.
    if (task->joiner.compare_exchange_strong(expected, kDetached, std::memory_order_release,
                                             std::memory_order_acquire)) {
        return BLZ_OK;
    }
    if (expected != kFinished) return BLZ_EINVAL;  // another thread waits for it right now
    free_task(task);
    return BLZ_OK;
}

}  // namespace blz
