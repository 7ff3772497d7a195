// Spawned tasks: heap jobs that run later, detached or joined through a
// blz_task handle, alone or as part of a group.
//
// The `joiner` word tells the task and its handle apart:
//   nullptr     the task has not finished and nobody waits;
//   a latch     the joiner waits on that latch (on its own stack);
//   kDetached   nobody will join: the task frees itself when it ends
//               (spawned without a handle, or blz_task_detach);
//   kFinished   the task has finished; `status` is valid.
// Who frees the task: the one of the two that comes second. The task
// exchanges in kFinished as its last access to itself (then sets the
// joiner's latch if there was one, or frees itself if it finds
// kDetached); the handle's owner frees it only after it has seen kFinished
// (by its own load or CAS, or through the latch). A bounded wait that
// ends first takes its latch back by CAS (latch -> nullptr); if the CAS
// fails the task has already taken the latch, and the waiter waits for
// the set that follows, however long the deadline, since the latch lives
// on its stack.
//
// on_done runs before the exchange: a joiner sees its status only after
// it returned; and before the group and the pool hear of the end, so that
// a group wait and destroy return after it too. With
// BLZ_SPAWN_DONE_AFTER_FINISH it runs after the group heard of the end,
// from copies of on_done and done_arg taken before the exchange (the
// joiner may free the task from then on), and before the pool does.
//
// Dependencies (blitz.h: after_tasks, after_events, after_groups). A task
// with predecessors is counted and holds its unit of the pool from its
// spawn, but is queued only when `blockers` reaches zero. `blockers`
// counts the predecessors not yet complete plus the spawner's own hold,
// taken before the first registration and dropped after the last: a
// predecessor that completes while the spawner still registers others can
// never bring it to zero, so the one release that does (the last
// predecessor's, or the spawner's own) queues the task, exactly once
// (docs/model/blitz.pml). Each predecessor holds one DependencyEdge of the
// task's `edges` (the count's hand-off: dependency_count.hpp): in a task
// predecessor's `successors` stack, or as a callback entry in an event's
// or a group's waiter list. The edges live until the task runs (every
// predecessor has released it then, and reads nothing of an edge after
// its release: `next` first). They are the task's own `inline_edges` for
// up to kInlineEdges predecessors, else one heap array, freed when the
// task runs: a spawn with few predecessors allocates nothing but its block.
//
// A task releases its successors when it finishes, before the exchange
// that hands it to its joiner: it closes `successors` (kClosedList), and a
// spawn that finds it closed counts the predecessor as complete with its
// `status`. A release comes from any thread (an event's setter, another
// pool's worker): queue_ready then takes a unit of the pool for the post
// itself, which the pool cannot refuse, since the task's own unit keeps
// ACTIVE above zero (admission.hpp [A1]).
//
// blz_task_finish_later stores an event in `finish_event` while fn runs;
// when fn returns, the task registers `finish_edge()` on it and is queued
// again when it is set, to finish then with that status (`body_done` set).
// finish_edge() is inline_edges[0]: the two uses never overlap, since the
// predecessor edges are all released before fn runs (above), and the
// finish edge is registered only after fn returned.
//
// `cancelled` (blz_task_cancel) is written through the handle, so only
// while the handle is valid: the task's memory is then alive (its owner
// frees it only after kFinished). cancel.hpp says why relaxed is enough.
#pragma once

#include <atomic>
#include <cstdint>

#include <cstddef>

#include "blitz.h"
#include "cancel.hpp"
#include "dependency_count.hpp"
#include "job.hpp"
#include "waiter_list.hpp"

namespace blz {

class Event;
class Group;
class Registry;
struct SpawnedJob;

// One predecessor's hold on a task that runs after it (task.hpp's top).
struct DependencyEdge : WaiterList::Callback {
    SpawnedJob *successor = nullptr;
};

// What blz_spawn_ex adds to a spawn.
struct SpawnOptions {
    Group *group = nullptr;  // nullptr unless spawned into a group
    blz_done_fn on_done = nullptr;
    void *done_arg = nullptr;
    // BLZ_SPAWN_* bits, known ones only (checked by the caller); the task
    // keeps the word as it is, rather than a bool per flag to pack again.
    uint32_t flags = 0;
    // Predecessors, read during the spawn only (checked non-null by the caller).
    SpawnedJob *const *after_tasks = nullptr;
    size_t num_after_tasks = 0;
    Event *const *after_events = nullptr;
    size_t num_after_events = 0;
    Group *const *after_groups = nullptr;
    size_t num_after_groups = 0;

    size_t num_predecessors() const { return num_after_tasks + num_after_events + num_after_groups; }
};

struct SpawnedJob : QueuedJob {
    SpawnedJob(Registry &registry, blz_fn fn, void *arg, const SpawnOptions &options, bool detached);

    Registry *const registry;
    const blz_fn fn;
    void *const arg;
    Group *const group;
    const blz_done_fn on_done;
    void *const done_arg;
    const uint64_t fork_generation;
    blz_status status = BLZ_OK;  // written before kFinished is published
    // SpawnOptions::flags, and kSpawnedAfterPredecessors.
    const uint32_t flags;
    // Above every BLZ_SPAWN_* flag: the task had predecessors at its spawn.
    static constexpr uint32_t kSpawnedAfterPredecessors = uint32_t{1} << 31;
    const bool isolated;  // spawned in an isolated context: runs isolated (isolation.hpp)
    bool body_done = false;            // fn has run; the next run only finishes (finish_later)
    blz_status deferred_status = BLZ_OK;  // the finish_later event's status, written before the requeue
    // One edge per predecessor: inline_edges, or a heap array for more
    // than kInlineEdges predecessors, freed when the task runs.
    DependencyEdge *edges = inline_edges;
    // Predecessors not complete, plus the spawner's hold during registration.
    DependencyCount<> blockers;
    // A predecessor ended in BLZ_ETASK or BLZ_ECANCELED (published by blockers' decrement).
    std::atomic<bool> predecessor_failed{false};
    // The edges of the tasks that run after this one; kClosedList once it finished.
    std::atomic<WaiterList::Callback *> successors{nullptr};
    // blz_task_finish_later's event (mutable: found through innermost_task).
    mutable std::atomic<Event *> finish_event{nullptr};
    // The edges of a task with few predecessors. Three: the most a
    // Cholesky task has (a tile update after two panels and its previous
    // value), one more than a wavefront block's; each costs 24 bytes of
    // every job block (job_memory.cpp).
    static constexpr size_t kInlineEdges = 3;
    DependencyEdge inline_edges[kInlineEdges];
    // blz_task_finish_later's edge, once fn returned: every predecessor
    // released its edge before fn ran, so the first inline one is free.
    DependencyEdge &finish_edge() { return inline_edges[0]; }
    // blz_task_cancel, or the task's first failure with cancel_on_failure.
    // mutable: a failure is found through const frames (innermost_task).
    mutable std::atomic<bool> cancelled{false};
    std::atomic<Latch *> joiner;

    bool high_priority() const { return (flags & BLZ_SPAWN_HIGH_PRIORITY) != 0; }  // through the urgent injector
    bool done_after_finish() const { return (flags & BLZ_SPAWN_DONE_AFTER_FINISH) != 0; }
    bool cancel_on_failure() const { return (flags & BLZ_SPAWN_CANCEL_ON_FAILURE) != 0; }
    bool after_any_end() const { return (flags & BLZ_SPAWN_AFTER_ANY_END) != 0; }
    bool spawned_after_predecessors() const { return (flags & kSpawnedAfterPredecessors) != 0; }

    // The flags this task's work obeys (cancel.hpp).
    CancelWatch cancel_watch() const { return {&cancelled, group != nullptr ? group_cancel_flag() : nullptr}; }

    static void run(Job *job);

private:
    static void run_spawned(SpawnedJob *task);  // run's body
    static void finish(SpawnedJob *task, blz_status status);
    const std::atomic<bool> *group_cancel_flag() const;
};

// Whether the calling thread is working for `task` (or for a task of
// `group`), directly or through the submitter of a job it runs.
bool is_running_on_this_thread(const SpawnedJob *task);
bool is_running_on_this_thread(const Group *group);

// The innermost spawned task the calling thread works for (its own frames,
// or through a bridge its submitter's), or nullptr.
const SpawnedJob *innermost_task();

// blz_spawn, blz_spawn_ex and blz_group_spawn: admit, allocate, queue.
blz_status spawn_task(Registry &registry, blz_fn fn, void *arg, const SpawnOptions &options, blz_task **out_task);

// blz_join (deadline kNoDeadline) and blz_task_wait_for: BLZ_ETIMEDOUT
// leaves the handle valid, any other status frees it.
blz_status join_task(SpawnedJob *task, uint64_t deadline);

// blz_task_detach.
blz_status detach_task(SpawnedJob *task);

// blz_task_cancel.
void cancel_task(SpawnedJob *task);

// blz_task_finish_later: BLZ_EINVAL outside a task's fn, or when it was
// called already for this task.
blz_status finish_task_later(Event **out_event);

// The flags the calling thread's work obeys: its innermost task's (none
// outside any task, and in an on_done).
CancelWatch cancel_watch_here();

}  // namespace blz
