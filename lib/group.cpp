#include "group.hpp"

#include <new>

#include "registry.hpp"
#include "task.hpp"

namespace blz {

blz_status Group::create(Registry &registry, Group **out) {
    blz_status status = registry.acquire_ref();
    if (status != BLZ_OK) return status;
    Group *group = new (std::nothrow) Group(registry);
    if (group == nullptr) {
        registry.release_ref();
        return BLZ_ENOMEM;
    }
    *out = group;
    return BLZ_OK;
}

blz_status Group::spawn(blz_fn fn, void *arg) {
    if (registry_->forked()) return BLZ_EFORK;
    return spawn_task(*registry_, fn, arg, this, nullptr);
}

void Group::task_added() {
    // relaxed: the task that will decrement this is published to its
    // worker by the queue it goes into, after this increment.
    counts_.fetch_add(kOneTask, std::memory_order_relaxed);
}

void Group::task_finished(bool ok) {
    if (!ok) failed_.store(true, std::memory_order_relaxed);  // published by the release below
    // relaxed: only a first guess for the CAS, which reloads on failure.
    uint64_t counts = counts_.load(std::memory_order_relaxed);
    for (;;) {
        const bool last = pending_of(counts) == 1;
        // Not the last: drop our pending count and our ref at once. The
        // last: keep the ref, which the waiters' notification needs.
        const uint64_t next = counts - (last ? kOnePending : kOneTask);
        // acq_rel: release hands the task's effects to a waiter that sees
        // zero; acquire orders our list check after the other tasks' updates.
        if (counts_.compare_exchange_weak(counts, next, std::memory_order_acq_rel, std::memory_order_relaxed)) {
            if (last) {
                notify_waiters();
                unref();
            }
            return;
        }
    }
}

void Group::notify_waiters() {
    Waiter *list = nullptr;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        if (pending_of(counts_.load(std::memory_order_acquire)) == 0) {  // a new spawn keeps them waiting
            list = waiters_;
            waiters_ = nullptr;
        }
    }
    while (list != nullptr) {
        Waiter *next = list->next;  // read first: the waiter's frame ends once its latch is set
        list->latch.set();
        list = next;
    }
}

blz_status Group::wait() {
    if (is_running_on_this_thread(this)) return BLZ_EDEADLK;
    if (registry_->forked()) return BLZ_EFORK;  // the parent's tasks never finish here
    // acquire (here and under the lock): a zero count makes the tasks'
    // effects visible, paired with their acq_rel decrement.
    if (pending_of(counts_.load(std::memory_order_acquire)) != 0) {
        Parker parker;
        Waiter waiter{Latch(Latch::current_thread(&parker)), nullptr};
        bool registered = false;
        {
            std::lock_guard<std::mutex> lock(mutex_);
            if (pending_of(counts_.load(std::memory_order_acquire)) != 0) {
                waiter.next = waiters_;
                waiters_ = &waiter;
                registered = true;
            }
        }
        if (registered) waiter.latch.wait();
    }
    // acq_rel: reports each failure to exactly one waiter.
    return failed_.exchange(false, std::memory_order_acq_rel) ? BLZ_ETASK : BLZ_OK;
}

blz_status Group::destroy() {
    blz_status status = wait();
    if (status == BLZ_EDEADLK) return status;
    if (status == BLZ_EFORK) {
        // In a forked child the unfinished tasks' references never drop.
        Registry *registry = registry_;
        delete this;
        registry->release_ref();
        return status;
    }
    unref();
    return status;
}

void Group::unref() {
    // acq_rel: the last owner sees every other owner's last access before
    // freeing. The last ref is dropped with no task pending, so the word is
    // then exactly one ref.
    if (counts_.fetch_sub(kOneRef, std::memory_order_acq_rel) == kOneRef) {
        Registry *registry = registry_;
        delete this;
        registry->release_ref();
    }
}

}  // namespace blz
