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
// when the last task locks: no lost wake-up.
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
    static blz_status create(Registry &registry, Group **out);

    blz_status spawn(blz_fn fn, void *arg);
    blz_status wait();
    blz_status destroy();

    Registry &registry() const { return *registry_; }

    // Called by spawn_task before the task is queued, and by the task when it ends.
    void task_added();
    void task_finished(bool ok);

private:
    struct Waiter {
        Latch latch;
        Waiter *next;
    };

    explicit Group(Registry &registry) : registry_(&registry) {}

    void notify_waiters();
    void unref();

    Registry *const registry_;
    static constexpr uint64_t kOneRef = 1;
    static constexpr uint64_t kOnePending = uint64_t{1} << 32;
    static constexpr uint64_t kOneTask = kOnePending + kOneRef;
    static uint64_t pending_of(uint64_t counts) { return counts >> 32; }

    std::atomic<uint64_t> counts_{kOneRef};  // the handle's ref
    std::atomic<bool> failed_{false};
    std::mutex mutex_;
    Waiter *waiters_ = nullptr;  // guarded by mutex_
};

}  // namespace blz
