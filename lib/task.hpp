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
// `cancelled` (blz_task_cancel) is written through the handle, so only
// while the handle is valid: the task's memory is then alive (its owner
// frees it only after kFinished). cancel.hpp says why relaxed is enough.
#pragma once

#include <atomic>
#include <cstdint>

#include "blitz.h"
#include "cancel.hpp"
#include "job.hpp"

namespace blz {

class Group;
class Registry;

// What blz_spawn_ex adds to a spawn.
struct SpawnOptions {
    Group *group = nullptr;  // nullptr unless spawned into a group
    blz_done_fn on_done = nullptr;
    void *done_arg = nullptr;
    bool high_priority = false;      // BLZ_SPAWN_HIGH_PRIORITY: through the urgent injector
    bool done_after_finish = false;  // BLZ_SPAWN_DONE_AFTER_FINISH
    bool cancel_on_failure = false;  // BLZ_SPAWN_CANCEL_ON_FAILURE
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
    const bool done_after_finish;
    const bool cancel_on_failure;
    const bool isolated;  // spawned in an isolated context: runs isolated (isolation.hpp)
    // blz_task_cancel, or the task's first failure with cancel_on_failure.
    // mutable: a failure is found through const frames (innermost_task).
    mutable std::atomic<bool> cancelled{false};
    std::atomic<Latch *> joiner;

    // The flags this task's work obeys (cancel.hpp).
    CancelWatch cancel_watch() const { return {&cancelled, group != nullptr ? group_cancel_flag() : nullptr}; }

    static void run(Job *job);

private:
    static void run_spawned(SpawnedJob *task);  // run's body
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

// The flags the calling thread's work obeys: its innermost task's (none
// outside any task, and in an on_done).
CancelWatch cancel_watch_here();

}  // namespace blz
