// Event: a completion that the embedder sets (blz_event), exactly once,
// from any thread, with the status its waiters get.
//
// `state_` is kUnset until the one set() whose CAS wins stores the status;
// a later set() finds it taken and is refused. Waiters wait in `waiters_`
// (waiter_list.hpp) until the state is set; the winning set() notifies
// them after its CAS.
//
// Lifetime: `refs_` counts the handle (until destroy) and every set() and
// wait() in progress, each taken first thing in the call; the last one
// frees the event. The dangerous interleaving it covers: a waiter sees the
// set, returns, and its thread destroys the event while the setter still
// walks the waiter list; the setter's reference, taken before its CAS
// (which the waiter saw), keeps the event alive until it is done
// (tests/fault/lifetime_checks.cpp, "event set vs its waiter's destroy").
// A call that starts after destroy began is a use after free, as for
// every handle of the C ABI.
#pragma once

#include <atomic>
#include <cstdint>

#include "blitz.h"
#include "waiter_list.hpp"

namespace blz {

class Event {
public:
    static blz_status create(Event **out);

    // BLZ_EINVAL when already set, or for a status other than BLZ_OK,
    // BLZ_ETASK or BLZ_ECANCELED.
    blz_status set(blz_status status);
    // The status it was set with; BLZ_ETIMEDOUT when `deadline`
    // (deadline.hpp) passed first.
    blz_status wait(uint64_t deadline);
    // wait() with a deadline passed already (a timeout of 0): the status,
    // or BLZ_ETIMEDOUT while unset. Takes no reference, no lock and reads
    // no clock: its one load of `state_` touches the event exactly where
    // wait()'s reference would, so the handle's rule (valid for the call)
    // covers it alike. The poll co::after makes before and after it awaits.
    blz_status poll() const { return static_cast<blz_status>(is_set() ? state() : BLZ_ETIMEDOUT); }
    // Sets it to BLZ_ECANCELED if nobody did, then gives up the handle.
    void destroy();

    // A task that runs after the event (task.hpp): `callback` runs with
    // the status when it is set (true), or nothing is added because it is
    // set already (false; *status then holds what it was set with).
    bool add_callback(WaiterList::Callback *callback, blz_status *status);

    // A reference besides the handle, for a holder that uses the event
    // after its handle may be given up (blz_task_finish_later's task).
    void hold() { ref(); }
    void drop() { unref(); }

private:
    // Above every blz_status (they are 0 or negative).
    static constexpr int32_t kUnset = 1;

    Event() = default;
    // acquire: a waiter that sees the status sees what the setter did before.
    int32_t state() const { return state_.load(std::memory_order_acquire); }
    bool is_set() const { return state() != kUnset; }
    // The one set that wins; false if another came first.
    bool complete(blz_status status);
    void ref() {
        // relaxed: the caller holds a reference already (the handle, valid
        // for the whole call); as Arc's clone.
        refs_.fetch_add(1, std::memory_order_relaxed);
    }
    void unref();
    void notify();  // after the winning CAS: wakes the waiters, runs the callbacks

    std::atomic<int32_t> state_{kUnset};
    std::atomic<uint32_t> refs_{1};  // the handle's
    WaiterList waiters_;
};

}  // namespace blz
