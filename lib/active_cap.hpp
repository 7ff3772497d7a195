// ActiveCap: blz_pool_set_max_active's cap on the workers that run jobs.
//
// A worker is *engaged* from the moment it enters its main loop (after its
// start hook; for an embedder's thread, once run() was called) until it
// terminates, except while it sits out the cap (parked, Worker::
// park_until_engaged). A worker that has not reached its loop yet cannot
// run jobs, so it is not counted: it enters engaged only if the pool is
// under its cap, and parks otherwise. Only engaged workers take jobs while
// they are between jobs (at the top of their loop); a worker inside a job
// keeps running whatever its joins need, counted once, since it is engaged
// already. So the workers running jobs are a subset of the engaged ones, and:
//
//   [C1] engaged only falls by a CAS from e > cap to e - 1, so a parking
//        worker never takes the pool below the cap: while cap >= 1 and some
//        worker is in its loop, one of them is engaged and will run
//        queued work.
//   [C2] engaged only rises by a CAS from e < cap to e + 1 (a worker
//        entering its loop, or a parked one coming back), so once the cap
//        is lowered, engaged falls to it as engaged workers come between
//        jobs, and never exceeds it again until it is raised.
//   [C3] engaged only changes at the top of a worker's loop, never on the
//        fork-join path; the check there is two relaxed loads.
//   [C4] destroy lifts the cap for good (lift_for_good) before it waits for
//        the accepted work: a later set() changes nothing, so the queues
//        drain on every worker, and work that waits outside the runtime
//        for other queued work cannot keep destroy from returning.
//   [C5] Blocking sections (blz_block_begin, docs/protocol.md "Blocking
//        sections"): a worker entering one leaves the engaged ones
//        whatever the cap (leave), since it takes no job while it blocks,
//        and its slot goes to a parked or spare thread; a spare retiring
//        leaves the same way. A worker coming back rejoins whatever the
//        cap (rejoin) and finishes the job it is in: waiting for a slot
//        could wait for ever, when every engaged thread waits inside its
//        job for the job the returning worker is in. engaged may then be
//        above the cap, and over() makes the next engaged thread to reach
//        its job boundary sit out: no thread takes a new job while
//        engaged > cap, so the threads that take jobs stay within the cap,
//        beyond it only returning workers finishing their own job.
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
    explicit ActiveCap(uint32_t num_workers) : workers_(num_workers), engaged_(0), cap_(num_workers) {}

    // n workers at most; 0 or n >= the pool's size: no cap. Nothing once
    // the cap was lifted for good [C4].
    void set(uint32_t n) {
        const uint32_t wanted = n == 0 || n > workers_ ? workers_ : n;
        // seq_cst: a parked worker's check after its fence (Worker::
        // park_until_engaged) and the unparking after this store form a
        // store-buffering pair: it sees the new cap or is unparked. A CAS,
        // not a store: a lift for good must not be overwritten.
        uint32_t current = cap_.load(std::memory_order_seq_cst);
        while ((current & kLiftedForGood) == 0 &&
               !cap_.compare_exchange_weak(current, wanted, std::memory_order_seq_cst, std::memory_order_seq_cst)) {
        }
    }

    // [C4] Destroy: no cap from now on, whatever set() is called later.
    // seq_cst: as in set(); the caller unparks every worker after it.
    void lift_for_good() { cap_.store(workers_ | kLiftedForGood, std::memory_order_seq_cst); }

    // Between jobs: whether this engaged worker should sit out. relaxed:
    // a hint that is re-checked by the CAS in try_disengage; a set() that
    // happened before (in the C++ sense) is seen by coherence.
    bool over() const { return engaged_.load(std::memory_order_relaxed) > cap(std::memory_order_relaxed); }

    // [C1] True when this worker left the engaged ones.
    bool try_disengage() { return step(-1); }
    // [C2] True when this worker, entering its loop or parked, may run jobs.
    bool try_engage() { return step(+1); }

    // [C5] Into a blocking section, or a spare retiring: one slot less,
    // whatever the cap. seq_cst: the store-buffering pair with a parked
    // thread's check (park_until_engaged), as for set(); the caller
    // unparks the parked threads after it.
    void leave() { engaged_.fetch_sub(1, std::memory_order_seq_cst); }
    // [C5] Back from a blocking section: one slot more, whatever the cap.
    // seq_cst: as in step(); others see over() at their next boundary.
    void rejoin() { engaged_.fetch_add(1, std::memory_order_seq_cst); }
    // Statistics and tests: the threads holding a slot now. relaxed: a snapshot.
    uint32_t engaged() const { return engaged_.load(std::memory_order_relaxed); }

private:
    // Above any pool size (BLZ_MAX_THREADS is 65535): marks a lift for good.
    static constexpr uint32_t kLiftedForGood = uint32_t{1} << 31;

    uint32_t cap(std::memory_order order) const { return cap_.load(order) & ~kLiftedForGood; }

    bool step(int direction) {
        // seq_cst CAS: part of the same store-buffering pairs as set(); a
        // weaker order would need its own argument and saves nothing here
        // (this runs at most once per park or unpark).
        uint32_t e = engaged_.load(std::memory_order_seq_cst);
        for (;;) {
            const uint32_t limit = cap(std::memory_order_seq_cst);
            const bool allowed = direction < 0 ? e > limit : e < limit;
            if (!allowed) return false;
            if (engaged_.compare_exchange_weak(e, direction < 0 ? e - 1 : e + 1, std::memory_order_seq_cst,
                                               std::memory_order_seq_cst)) {
                return true;
            }
        }
    }

    const uint32_t workers_;
    std::atomic<uint32_t> engaged_;
    std::atomic<uint32_t> cap_;  // the cap, with kLiftedForGood once destroy began
};

}  // namespace blz
