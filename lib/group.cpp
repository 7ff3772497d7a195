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
    // relaxed: the task that will decrement these is published to its
    // worker by the queue it goes into, after this increment.
    pending_.fetch_add(1, std::memory_order_relaxed);
    refs_.fetch_add(1, std::memory_order_relaxed);
}

void Group::task_finished(bool ok) {
    if (!ok) failed_.store(true, std::memory_order_relaxed);  // published by the release below
    // acq_rel: release hands the task's effects to a waiter that sees zero;
    // acquire orders our list check after the other tasks' decrements.
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) notify_waiters();
    unref();
}

void Group::notify_waiters() {
    Waiter *list = nullptr;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        if (pending_.load(std::memory_order_acquire) == 0) {  // a new spawn keeps them waiting
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
    if (pending_.load(std::memory_order_acquire) != 0) {
        Parker parker;
        Waiter waiter{Latch(Latch::current_thread(&parker)), nullptr};
        bool registered = false;
        {
            std::lock_guard<std::mutex> lock(mutex_);
            if (pending_.load(std::memory_order_acquire) != 0) {
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
    // acq_rel: the last owner sees every other owner's last access before freeing.
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        Registry *registry = registry_;
        delete this;
        registry->release_ref();
    }
}

}  // namespace blz
