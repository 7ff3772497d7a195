// Group: tasks waited for together (blz_group).
//
// `counts_` holds two counts in one word, so that a task that is not the
// last one to finish updates both with one atomic operation:
//   bits 32-63  pending: unfinished tasks;
//   bits  0-31  refs: the handle plus one per unfinished task, which keep
//               the group alive while a finishing task still touches it.
// A waiter waits in `waiters_` (waiter_list.hpp) until pending is zero;
// the task that brings pending to zero keeps its ref, notifies the list
// (which wakes nobody if a new spawn raced in and pending is nonzero
// again), and only then drops its ref.
//
// Cancellation is one flag, `cancelled_`: set by cancel() (or by a failure
// in a group made with BLZ_GROUP_CANCEL_ON_FAILURE), read relaxed by every
// task before it starts and by blz_cancelled()/parallel_for pieces
// (cancel.hpp: why relaxed is enough), and cleared by the wait that
// reports it. A task skipped by its own cancel (blz_task_cancel) marks
// `skipped_`, so that the wait reports a cancellation for it too.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>

#include "blitz.h"
#include "waiter_list.hpp"

namespace blz {

class Registry;

class Group {
public:
    static blz_status create(Registry &registry, uint32_t flags, Group **out);

    blz_status spawn(blz_fn fn, void *arg);
    // kNoDeadline (deadline.hpp): blz_group_wait; else BLZ_ETIMEDOUT when
    // it passed first, with nothing reset.
    blz_status wait(uint64_t deadline);
    blz_status destroy();

    Registry &registry() const { return *registry_; }

    void cancel() { cancelled_.store(true, std::memory_order_relaxed); }  // relaxed: cancel.hpp
    bool cancelled() const { return cancelled_.load(std::memory_order_relaxed); }
    const std::atomic<bool> *cancel_flag() const { return &cancelled_; }
    // A failure of the group's work: cancels the group if it was made to.
    void work_failed() {
        if (cancel_on_failure_) cancel();
    }

    // A task that runs after the group (task.hpp): `callback` runs, with
    // what a wait would report (nothing is reset), when no task is left
    // (true); or nothing is added because none is left now (false;
    // *status then holds that report).
    bool add_callback(WaiterList::Callback *callback, blz_status *status);

    // Called by spawn_task before the task is queued, and by the task when it ends.
    void task_added();
    void task_finished(blz_status status);

private:
    Group(Registry &registry, uint32_t flags)
        : registry_(&registry), cancel_on_failure_((flags & BLZ_GROUP_CANCEL_ON_FAILURE) != 0) {}

    void unref();
    // acquire: a zero count makes the tasks' effects visible, paired with
    // their acq_rel decrement.
    bool all_finished() const { return pending_of(counts_.load(std::memory_order_acquire)) == 0; }
    blz_status take_outcome();
    // What take_outcome would report, without clearing anything.
    blz_status peek_outcome() const;

    Registry *const registry_;
    const bool cancel_on_failure_;
    static constexpr uint64_t kOneRef = 1;
    static constexpr uint64_t kOnePending = uint64_t{1} << 32;
    static constexpr uint64_t kOneTask = kOnePending + kOneRef;
    static uint64_t pending_of(uint64_t counts) { return counts >> 32; }

    std::atomic<uint64_t> counts_{kOneRef};  // the handle's ref
    std::atomic<bool> failed_{false};
    std::atomic<bool> cancelled_{false};
    std::atomic<bool> skipped_{false};  // a task of the group was skipped by its own cancel
    WaiterList waiters_;
};

}  // namespace blz
