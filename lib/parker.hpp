// Parker: how a thread outside the pool blocks until a latch it waits on is
// set. A short spin first, then a futex on one token word.
//
// The spin is for the round trip: a blz_call of a short function is
// answered within a few microseconds, and a caller that is still awake then
// submits its next call while the worker is still searching, so neither side
// pays a futex wake-up. A caller that went to sleep instead needs one (tens
// of microseconds on a VM), during which the worker's idle rounds run out and
// it falls asleep too, and the next call pays a second one.
//
// Token states: kEmpty, kSet (unpark ran), kBlocked (the waiter is, or is
// about to be, blocked on the futex). unpark() makes the system call only
// for kBlocked: a waiter that caught the token while spinning costs its
// setter no syscall.
//
// The setter's last access to the parker is its exchange, or the futex wake
// that follows it when the waiter blocked; the waiter may already have
// returned by then. A futex wake on memory that was reused is harmless (it
// can only cause a spurious wakeup elsewhere, which every futex user
// tolerates), so the parker can live on the waiter's stack.
#pragma once

#include <atomic>
#include <cstdint>
#include <thread>

#include "deadline.hpp"
#include "futex.hpp"

namespace blz {

class Parker {
public:
    // Blocks until unpark() has been called.
    void park() { park_until(kNoDeadline); }

    // park() until the absolute CLOCK_MONOTONIC time `deadline`
    // (deadline.hpp; kNoDeadline: no end). False when it passed first: the
    // token is then back to kEmpty, so a later unpark() costs no system
    // call and a later park() blocks again.
    bool park_until(uint64_t deadline) {
        if (spin_until_set()) return true;
        uint32_t expected = kEmpty;
        // acquire on failure: the token is kSet, as in spin_until_set. On
        // success announcing kBlocked publishes nothing, but gcc rejects a
        // success order weaker than the failure order (free on x86 anyway).
        if (!token_.compare_exchange_strong(expected, kBlocked, std::memory_order_acquire)) return true;
        // acquire: as above; the futex re-checks the word, so a set between
        // the load and the wait is never slept through.
        while (token_.load(std::memory_order_acquire) != kSet) {
            if (futex_wait_until(token_, kBlocked, deadline)) continue;
            expected = kBlocked;
            // acquire on failure: the token is kSet, the setter's work is ours.
            return !token_.compare_exchange_strong(expected, kEmpty, std::memory_order_acquire);
        }
        return true;
    }

    void unpark() {
        // release: see park(). The exchange says whether the waiter blocked.
        if (token_.exchange(kSet, std::memory_order_release) == kBlocked) futex_wake_one(token_);
    }

private:
    bool spin_until_set() const {
        for (uint32_t i = 0; i < kSpinYields; ++i) {
            // acquire: pairs with unpark's exchange, so what the setter did
            // before setting the latch is visible here.
            if (token_.load(std::memory_order_acquire) == kSet) return true;
            std::this_thread::yield();
        }
        return false;
    }

    static constexpr uint32_t kEmpty = 0;
    static constexpr uint32_t kSet = 1;
    static constexpr uint32_t kBlocked = 2;
    // Yields before blocking: each returns at once on a CPU with nothing else
    // to run (about 0.5 us here), so this covers a short call's answer
    // without holding a CPU another thread needs.
    static constexpr uint32_t kSpinYields = 16;
    std::atomic<uint32_t> token_{kEmpty};
};

}  // namespace blz
