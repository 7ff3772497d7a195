#include "event.hpp"

#include <new>

#include "deadline.hpp"
#include "fault.hpp"

namespace blz {

blz_status Event::create(Event **out) {
    Event *event = new (std::nothrow) Event();
    if (event == nullptr) return BLZ_ENOMEM;
    *out = event;
    return BLZ_OK;
}

bool Event::complete(blz_status status) {
    int32_t expected = kUnset;
    // acq_rel: release publishes what the setter did before to the waiters
    // that acquire the state; acquire orders the walk of the list after it.
    // relaxed on failure: the loser only reports the refusal.
    return state_.compare_exchange_strong(expected, status, std::memory_order_acq_rel, std::memory_order_relaxed);
}

blz_status Event::set(blz_status status) {
    if (status != BLZ_OK && status != BLZ_ETASK && status != BLZ_ECANCELED) return BLZ_EINVAL;
    // Before the CAS: a waiter that saw it may destroy the event (event.hpp).
    const bool referenced = !BLZ_FAULT_MUTANT(kEventSetUnreferenced);
    if (referenced) ref();
    const bool won = complete(status);
    if (won) {
        BLZ_FAULT_POINT(kEventSetBeforeNotify, this);
        notify();
    }
    if (referenced) unref();
    return won ? BLZ_OK : BLZ_EINVAL;
}

blz_status Event::wait(uint64_t deadline) {
    if (is_set()) return static_cast<blz_status>(state());  // as poll(): nothing to wait for
    ref();
    const bool done = waiters_.wait([this] { return is_set(); }, deadline, this);
    const int32_t status = done ? state() : BLZ_ETIMEDOUT;
    unref();
    return static_cast<blz_status>(status);
}

void Event::notify() {
    waiters_.notify([this] { return is_set(); }, [this] { BLZ_FAULT_POINT(kEventTookWaiters, this); },
                    [this] { return static_cast<blz_status>(state()); });
}

bool Event::add_callback(WaiterList::Callback *callback, blz_status *status) {
    if (waiters_.add_callback([this] { return is_set(); }, callback)) return true;
    *status = static_cast<blz_status>(state());
    return false;
}

void Event::destroy() {
    if (complete(BLZ_ECANCELED)) notify();
    unref();
}

void Event::unref() {
    // acq_rel, as Arc's drop: the last one sees every other reference's
    // accesses before it frees the event.
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        BLZ_FAULT_POINT(kEventFreed, this);
        delete this;
    }
}

}  // namespace blz
