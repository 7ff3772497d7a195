// Latch: a CoreLatch plus the identity of the one thread that waits on it.
//
// The waiter is fixed when the latch is made, on the waiter's own stack:
// either a worker (which waits by running other jobs of its pool and sleeps
// through the sleep protocol) or a thread outside every pool (which parks).
// The setter reads that identity *before* it sets: once the latch is set
// the waiter may return and its stack frame, with the latch, is gone.
#pragma once

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

    explicit Latch(Waiter waiter) : worker_(waiter.worker), parker_(waiter.parker) {}

    Latch(const Latch &) = delete;
    Latch &operator=(const Latch &) = delete;

    // Any thread, once. Wakes the waiter if it sleeps on this latch.
    void set();

    // The waiter: returns once the latch is set.
    void wait();

    bool probe() const { return core_.probe(); }
    CoreLatch<> &core() { return core_; }

private:
    CoreLatch<> core_;
    Worker *const worker_;
    Parker *const parker_;
};

}  // namespace blz
