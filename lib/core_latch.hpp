// CoreLatch: the four-state latch a worker waits on.
//
//   UNSET --get_sleepy--> SLEEPY --fall_asleep--> SLEEPING --wake_up--> UNSET
//     \________________________\__________________________\___set___> SET
//
// Only the waiting thread moves between UNSET, SLEEPY and SLEEPING; any
// thread may set. set() returns true exactly when the latch was SLEEPING:
// the waiter committed to block (or is about to), so the setter must wake
// it. A setter that finds SLEEPY needs to do nothing: the waiter's
// fall_asleep() CAS will fail and it will see SET. This is why the SLEEPY
// state exists: a two-state latch cannot tell "about to block" from "will
// look again".
#pragma once

#include <cstdint>

#include "sync.hpp"

namespace blz {

template <class Sync = StdSync>
class CoreLatch {
public:
    enum State : uint32_t { kUnset = 0, kSleepy = 1, kSleeping = 2, kSet = 3 };

    // Waiter: UNSET -> SLEEPY. False when the latch was set meanwhile.
    // seq_cst (also on the three transitions below): they are ordered
    // against set() and against the counters in the single total order the
    // sleep argument uses; the CAS is a locked instruction either way.
    bool get_sleepy() {
        uint32_t expected = kUnset;
        return state_.compare_exchange_strong(expected, kSleepy, std::memory_order_seq_cst,
                                              std::memory_order_seq_cst);
    }

    // Waiter: SLEEPY -> SLEEPING. False when the latch was set meanwhile.
    bool fall_asleep() {
        uint32_t expected = kSleepy;
        return state_.compare_exchange_strong(expected, kSleeping, std::memory_order_seq_cst,
                                              std::memory_order_seq_cst);
    }

    // Waiter, after waking or abandoning a sleep: SLEEPING -> UNSET, unless
    // the latch was set (then it stays SET). True when it went back to
    // UNSET: no setter saw SLEEPING, so none will wake this waiter (a
    // waiter whose bounded wait ends relies on that).
    bool wake_up() {
        uint32_t expected = kSleeping;
        return state_.compare_exchange_strong(expected, kUnset, std::memory_order_seq_cst,
                                              std::memory_order_seq_cst);
    }

    // Any thread. True when the waiter was SLEEPING and must be woken by the
    // caller. seq_cst: release publishes the work done before the set to the
    // waiter's acquire in probe(); the total order keeps the swap consistent
    // with the waiter's transitions (Rayon strengthened this swap to SeqCst
    // in 2026 after AcqRel was found too weak).
    bool set() { return state_.exchange(kSet, std::memory_order_seq_cst) == kSleeping; }

    // Waiter. acquire: after true, everything the setter did before set()
    // is visible.
    bool probe() const { return state_.load(std::memory_order_acquire) == kSet; }

    // For tests: the current state.
    State state() const { return static_cast<State>(state_.load(std::memory_order_acquire)); }

private:
    typename Sync::template atomic<uint32_t> state_{kUnset};
};

// Sets a latch whose waiter is worker `index` of `pool`, and wakes that
// worker if it sleeps on it (Latch::set). A template over the pool, so that
// tests/relacy runs this code. The caller read the waiter's identity before
// (after the set the latch may be gone). `pin`: the setter is not one of
// the pool's workers, which destroy joins before it frees the pool. Once
// the swap is done the waiter may leave its wait for another reason,
// return, and its pool may be destroyed before the wake-up: the pin, taken
// while the waiter still waits (so the pool is alive), keeps the pool's
// memory until after the wake-up (admission.hpp [A4]).
//
// Pool provides: pin(); wake(index) (Sleep::wake_specific_thread); unpin(),
// which may free the pool (so it is the last access).
template <class Pool, class Sync>
void set_and_wake_worker(CoreLatch<Sync> &latch, Pool &pool, uint32_t index, bool pin) {
    if (pin) pool.pin();
    if (latch.set()) pool.wake(index);
    if (pin) pool.unpin();
}

}  // namespace blz
