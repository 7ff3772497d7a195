// Spawned tasks: heap jobs that run later, detached or joined through a
// blz_task handle, alone or as part of a group.
//
// A joined task's `joiner` word tells the two parties apart:
//   nullptr     the task has not finished and nobody waits;
//   a latch     the joiner waits on that latch (on its own stack);
//   kFinished   the task has finished; `failed` is valid.
// The task exchanges in kFinished as its last access to itself, then sets
// the joiner's latch if there was one; the joiner frees the task only after
// it has seen kFinished (by its own load or CAS, or through the latch).
#pragma once

#include <atomic>
#include <cstdint>

#include "blitz.h"
#include "job.hpp"

namespace blz {

class Group;
class Registry;

struct SpawnedJob : QueuedJob {
    SpawnedJob(Registry &registry, blz_fn fn, void *arg, Group *group, bool detached);

    Registry *const registry;
    const blz_fn fn;
    void *const arg;
    Group *const group;      // nullptr unless spawned into a group
    const bool detached;     // no handle: the job frees itself
    const uint64_t fork_generation;
    bool failed = false;     // joined tasks: written before kFinished is published
    std::atomic<Latch *> joiner{nullptr};

    static void run(Job *job);
};

// Whether the calling thread is working for `task` (or for a task of
// `group`), directly or through the submitter of a job it runs.
bool is_running_on_this_thread(const SpawnedJob *task);
bool is_running_on_this_thread(const Group *group);

// blz_spawn and blz_group_spawn: admit, allocate, queue.
blz_status spawn_task(Registry &registry, blz_fn fn, void *arg, Group *group, blz_task **out_task);

// blz_join.
blz_status join_task(SpawnedJob *task);

}  // namespace blz
