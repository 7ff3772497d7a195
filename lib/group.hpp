// Group: tasks waited for together (blz_group).
//
// `pending_` counts unfinished tasks. A waiter that finds it nonzero puts a
// latch on its own stack into the waiter list, under the mutex, after
// re-checking `pending_` there; the task that brings `pending_` to zero
// takes the list under the mutex (only if `pending_` is still zero, since
// a new spawn may have raced in) and sets each latch after unlocking.
// Either the waiter's locked check sees zero, or its latch is in the list
// when the last task locks: no lost wake-up.
//
// `refs_` (the handle plus one per unfinished task) keeps the group alive
// while a finishing task still touches it after its decrement of `pending_`.
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
    std::atomic<uint64_t> pending_{0};
    std::atomic<uint32_t> refs_{1};
    std::atomic<bool> failed_{false};
    std::mutex mutex_;
    Waiter *waiters_ = nullptr;  // guarded by mutex_
};

}  // namespace blz
