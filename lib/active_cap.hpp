// ActiveCap: blz_pool_set_max_active's cap on the workers that run jobs.
//
// A worker is *engaged* unless it sits out the cap (parked, Worker::
// sit_out_cap). Only engaged workers take jobs while they are between
// jobs (at the top of their loop); a worker inside a job keeps running
// whatever its joins need, counted once, since it is engaged already. So
// the workers running jobs are a subset of the engaged ones, and:
//
//   [C1] engaged only falls by a CAS from e > cap to e - 1, so a parking
//        worker never takes the pool below the cap, and engaged >= 1
//        (cap >= 1) always: some worker is there to run queued work.
//   [C2] engaged only rises by a CAS from e < cap to e + 1 (a parked
//        worker coming back), so once the cap is lowered, engaged falls to
//        it as engaged workers come between jobs, and never exceeds it
//        again until it is raised.
//   [C3] engaged only changes at the top of a worker's loop, never on the
//        fork-join path; the check there is two relaxed loads.
//
// The sleep protocol (sleep.hpp) never sees parked workers: they are not
// in its `sleeping` or `inactive` counts and its wake-ups never reach
// them (they block on their own futex word). docs/protocol.md, "The cap
// on active workers", has the argument that no wake-up is lost.
#pragma once

#include <atomic>
#include <cstdint>

namespace blz {

class ActiveCap {
public:
    explicit ActiveCap(uint32_t num_workers) : workers_(num_workers), engaged_(num_workers), cap_(num_workers) {}

    // n workers at most; 0 or n >= the pool's size: no cap.
    void set(uint32_t n) {
        // seq_cst: a parked worker's check after its fence (Worker::
        // sit_out_cap) and the unparking after this store form a
        // store-buffering pair: it sees the new cap or is unparked.
        cap_.store(n == 0 || n > workers_ ? workers_ : n, std::memory_order_seq_cst);
    }

    // Between jobs: whether this engaged worker should sit out. relaxed:
    // a hint that is re-checked by the CAS in try_disengage; a set() that
    // happened before (in the C++ sense) is seen by coherence.
    bool over() const {
        return engaged_.load(std::memory_order_relaxed) > cap_.load(std::memory_order_relaxed);
    }

    // [C1] True when this worker left the engaged ones.
    bool try_disengage() { return step(-1); }
    // [C2] True when this parked worker may run jobs again.
    bool try_engage() { return step(+1); }

    uint32_t engaged() const { return engaged_.load(std::memory_order_relaxed); }  // relaxed: statistics

private:
    bool step(int direction) {
        // seq_cst CAS: part of the same store-buffering pairs as set(); a
        // weaker order would need its own argument and saves nothing here
        // (this runs at most once per park or unpark).
        uint32_t e = engaged_.load(std::memory_order_seq_cst);
        for (;;) {
            const uint32_t cap = cap_.load(std::memory_order_seq_cst);
            const bool allowed = direction < 0 ? e > cap : e < cap;
            if (!allowed) return false;
            if (engaged_.compare_exchange_weak(e, direction < 0 ? e - 1 : e + 1, std::memory_order_seq_cst,
                                               std::memory_order_seq_cst)) {
                return true;
            }
        }
    }

    const uint32_t workers_;
    std::atomic<uint32_t> engaged_;
    std::atomic<uint32_t> cap_;
};

}  // namespace blz
