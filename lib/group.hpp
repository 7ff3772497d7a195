// Group: tasks waited for together (blz_group).
//
// `counts_` holds two counts in one word, so that a task that is not the
// last one to finish updates both with one atomic operation:
//   bits 32-63  pending: unfinished tasks;
//   bits  0-31  refs: the handle plus one per unfinished task, which keep
//               the group alive while a finishing task still touches it.
// A waiter that finds pending nonzero puts a latch on its own stack into
// the waiter list, under the mutex, after re-checking pending there; the
// task that brings pending to zero keeps its ref, takes the list under the
// mutex (only if pending is still zero, since a new spawn may have raced
// in), sets each latch after unlocking, and only then drops its ref.
// Either the waiter's locked check sees zero, or its latch is in the list
// when the last task locks: no lost wake-up. A bounded wait that ends
// first takes its entry out of the list under the mutex; if the entry is
// gone, the last task has taken the list and will set the latch, and the
// waiter waits for that set (its latch lives on its stack).
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
#include "latch.hpp"

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

    // Called by spawn_task before the task is queued, and by the task when it ends.
    void task_added();
    void task_finished(blz_status status);

private:
    struct Waiter {
        Latch latch;
        Waiter *next;
    };

    Group(Registry &registry, uint32_t flags)
        : registry_(&registry), cancel_on_failure_((flags & BLZ_GROUP_CANCEL_ON_FAILURE) != 0) {}

    void notify_waiters();
    void unref();
    bool wait_for_tasks(uint64_t deadline);
    bool withdraw(Waiter *waiter);
    blz_status take_outcome();

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
    std::mutex mutex_;
    Waiter *waiters_ = nullptr;  // guarded by mutex_
};

}  // namespace blz
