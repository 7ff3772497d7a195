// Latch: a CoreLatch plus the identity of the one thread that waits on it.
//
// The waiter is fixed when the latch is made, on the waiter's own stack:
// either a worker (which waits by running other jobs of its pool and sleeps
// through the sleep protocol) or a thread outside every pool (which parks).
// The setter reads that identity *before* it sets: once the latch is set
// the waiter may return and its stack frame, with the latch, is gone.
#pragma once

#include <cstdint>

#include "core_latch.hpp"
#include "parker.hpp"

namespace blz {

class Worker;

class Latch {
public:
    // Who waits: a worker, or (worker == nullptr) a parked outside thread.
    struct Waiter {
        Worker *worker;
        Parker *parker;
    };

    // The calling thread as a waiter: as a worker if it is one (of any
    // pool), else through `parker`, which must live as long as the wait.
    static Waiter current_thread(Parker *parker);

    explicit Latch(Waiter waiter)
        : waiter_(waiter.worker != nullptr ? reinterpret_cast<uintptr_t>(waiter.worker)
                                           : reinterpret_cast<uintptr_t>(waiter.parker) | kParkerTag) {}

    Latch(const Latch &) = delete;
    Latch &operator=(const Latch &) = delete;

    // Any thread, once. Wakes the waiter if it sleeps on this latch.
    void set();

    // The waiter: returns once the latch is set.
    void wait();

    // The waiter: wait() until the absolute time `deadline` (deadline.hpp).
    // False when it passed first; then no setter is committed to wake the
    // waiter, and it may wait again later (or stop waiting, once it made
    // sure nobody will set the latch).
    bool wait_until(uint64_t deadline);

    bool probe() const { return core_.probe(); }
    CoreLatch<> &core() { return core_; }

private:
    // The waiter in one word (one store when a fork makes its latch): a
    // Worker*, or a Parker* with the low bit set (both are aligned).
    static constexpr uintptr_t kParkerTag = 1;
    static_assert(alignof(Parker) > kParkerTag, "the tag bit is free in a Parker*");

    Worker *worker() const {
        return (waiter_ & kParkerTag) == 0 ? reinterpret_cast<Worker *>(waiter_) : nullptr;
    }
    Parker *parker() const { return reinterpret_cast<Parker *>(waiter_ & ~kParkerTag); }

    CoreLatch<> core_;
    const uintptr_t waiter_;
};

}  // namespace blz
