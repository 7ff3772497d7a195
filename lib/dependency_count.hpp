// DependencyCount: the hand-off of a task that runs after others (task.hpp,
// blitz.h "Dependencies"): exactly one release queues it, and only once
// every predecessor has completed and its spawn has registered them all.
//
// The count is the predecessors not yet complete plus the spawner's hold.
// The spawner takes the hold before its first registration, adds one
// before registering each predecessor (which may complete and release at
// once, on another thread), and drops the hold after the last one. While
// the hold is in, the count cannot reach zero, so no predecessor queues
// the task under a spawn still registering; afterwards the release that
// takes it to zero is unique (one RMW chain), whoever makes it: the last
// predecessor, or the spawner when they had all completed.
//
// A template on the synchronisation policy (sync.hpp), so that Relacy runs
// this very code (tests/relacy: "dependency count hand-off", whose mutant
// spawner takes no hold and is caught queueing the task twice or early).
#pragma once

#include <atomic>
#include <cstddef>

#include "sync.hpp"

namespace blz {

template <class Sync = StdSync>
class DependencyCount {
public:
    // Before the first registration: true when the hold was taken, false
    // for the mutant (the model's, or `take` false: the runtime's fault switch).
    bool hold(bool take = true) {
        const bool hold = take && Sync::kMutant != Mutant::kSpawnerHoldsNoCount;
        // relaxed: nobody else knows the task yet.
        count_.store(hold ? 1 : 0, std::memory_order_relaxed);
        return hold;
    }
    // Before registering one predecessor.
    void add() {
        // relaxed: the hold keeps the count above zero meanwhile; the
        // predecessor learns of the task through its own list (a CAS or a
        // mutex), which publishes it.
        count_.fetch_add(1, std::memory_order_relaxed);
    }
    // A predecessor completed, or the spawner drops its hold: true for the
    // one call that must queue the task.
    bool release() {
        // acq_rel: release hands this predecessor's effects on; acquire
        // makes every other one's visible to the last, which queues the
        // task (the queue publishes them to its worker).
        return count_.fetch_sub(1, std::memory_order_acq_rel) == 1;
    }

private:
    typename Sync::template atomic<size_t> count_{0};
};

}  // namespace blz
