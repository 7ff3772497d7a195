// Cancellation: what a cancel request is, and who reads it.
//
// Two things can be cancelled: a group (blz_group_cancel, or the first
// failure in a BLZ_GROUP_CANCEL_ON_FAILURE group) and a single task
// (blz_task_cancel). Each is one flag. A task reads both of its flags
// before it starts (set: it is skipped), and the work it does reads them
// through a CancelWatch: blz_cancelled() and every piece a blz_parallel_for
// of the task starts.
//
// Every access is relaxed. A cancel is a request: it promises only that
// work starting after it can see it is skipped, and a task that starts on
// another worker at the moment of the cancel may still run. Nothing is
// published with the flag (no data is read because of it), so no ordering
// is needed; the store becomes visible soon, as every store does.
#pragma once

#include <atomic>

namespace blz {

// The flags a piece of work obeys: its innermost task's own, and that
// task's group's. Either may be null (no task, or a task in no group).
// Both outlive the work that reads them: a task's flag lives in the task,
// which cannot finish before the work it runs, and its group lives until
// its last task has finished.
struct CancelWatch {
    const std::atomic<bool> *task = nullptr;
    const std::atomic<bool> *group = nullptr;

    bool requested() const {
        // relaxed: a cancel is a request (above).
        return (task != nullptr && task->load(std::memory_order_relaxed)) ||
               (group != nullptr && group->load(std::memory_order_relaxed));
    }
};

}  // namespace blz
