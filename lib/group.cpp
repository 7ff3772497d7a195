#include "group.hpp"

#include <new>

#include "deadline.hpp"
#include "fault.hpp"
#include "registry.hpp"
#include "task.hpp"

namespace blz {

blz_status Group::create(Registry &registry, uint32_t flags, Group **out) {
    blz_status status = registry.acquire_ref();
    if (status != BLZ_OK) return status;
    Group *group = new (std::nothrow) Group(registry, flags);
    if (group == nullptr) {
        registry.release_ref();
        return BLZ_ENOMEM;
    }
    *out = group;
    return BLZ_OK;
}

blz_status Group::spawn(blz_fn fn, void *arg) {
    if (registry_->forked()) return BLZ_EFORK;
    SpawnOptions options;
    options.group = this;
    return spawn_task(*registry_, fn, arg, options, nullptr);
}

void Group::task_added() {
    // relaxed: the task that will decrement this is published to its
    // worker by the queue it goes into, after this increment.
    counts_.fetch_add(kOneTask, std::memory_order_relaxed);
}

void Group::task_finished(blz_status status) {
    // relaxed: published by the release below. A skipped task (ECANCELED)
    // is marked whatever skipped it: the group's flag (then the mark adds
    // nothing) or the task's own cancel (then the mark is all the wait sees).
    if (status == BLZ_ETASK) failed_.store(true, std::memory_order_relaxed);
    if (status == BLZ_ECANCELED) skipped_.store(true, std::memory_order_relaxed);
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
                waiters_.notify([this] { return all_finished(); },
                                [this] { BLZ_FAULT_POINT(kGroupTookWaiters, registry_); },
                                [this] { return peek_outcome(); });
                unref();
            }
            return;
        }
    }
}

blz_status Group::wait(uint64_t deadline) {
    if (is_running_on_this_thread(this)) return BLZ_EDEADLK;
    if (registry_->forked()) return BLZ_EFORK;  // the parent's tasks never finish here
    if (!waiters_.wait([this] { return all_finished(); }, deadline, registry_)) return BLZ_ETIMEDOUT;
    return take_outcome();
}

// What a finished wait reports, once: a failure, else a cancellation.
// Both marks are cleared, which resets the group for reuse.
blz_status Group::take_outcome() {
    // acq_rel: reports each failure to exactly one waiter.
    const bool failed = failed_.exchange(false, std::memory_order_acq_rel);
    // relaxed: the flag is a request (see group.hpp); the exchange makes
    // one waiter the one that reports and clears it.
    const bool cancelled = cancelled_.exchange(false, std::memory_order_relaxed);
    // acq_rel, as for failed_: one waiter reports each skip.
    const bool skipped = skipped_.exchange(false, std::memory_order_acq_rel);
    if (failed) return BLZ_ETASK;
    if (skipped) return BLZ_ECANCELED;
    return cancelled ? BLZ_ECANCELED : BLZ_OK;
}

blz_status Group::peek_outcome() const {
    // acquire: pairs with the acq_rel exchanges of take_outcome, as a
    // wait's own read would; the tasks' marks are published by the count.
    if (failed_.load(std::memory_order_acquire)) return BLZ_ETASK;
    if (skipped_.load(std::memory_order_acquire)) return BLZ_ECANCELED;
    return cancelled() ? BLZ_ECANCELED : BLZ_OK;
}

bool Group::add_callback(WaiterList::Callback *callback, blz_status *status) {
    if (waiters_.add_callback([this] { return all_finished(); }, callback)) return true;
    *status = peek_outcome();
    return false;
}

blz_status Group::destroy() {
    blz_status status = wait(kNoDeadline);
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
