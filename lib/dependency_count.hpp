// DependencyCount: the hand-off of a task that runs after others (task.hpp,
// blitz.h "Dependencies"): exactly one release queues it, and only once
// every predecessor has completed and its spawn has registered them all.
//
// The count is the predecessors not yet released plus the spawner's hold.
// Before its first registration, while nobody else knows the task, the
// spawner stores them all at once (every predecessor counted, and the
// hold); a predecessor found complete at its registration is released by
// the spawner at once, the others release when they complete (on any
// thread); the spawner drops the hold after the last registration. While
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
    // Before the first registration, with the number of predecessors the
    // spawner will register: stores them and the hold at once; true. The
    // mutant (the model's, or `real` false: the runtime's fault switch) is
    // the protocol this one replaced, without its hold: it stores 0 and
    // counts each predecessor just before registering it (count_one), so a
    // predecessor that completes while later ones are still being
    // registered takes the count to zero; false.
    bool hold(size_t predecessors, bool real = true) {
        const bool mutant = !real || Sync::kMutant == Mutant::kSpawnerHoldsNoCount;
        // relaxed: nobody else knows the task yet; a predecessor learns of
        // it through its own list (a CAS or a mutex), which publishes this.
        count_.store(mutant ? 0 : predecessors + 1, std::memory_order_relaxed);
        return !mutant;
    }
    // Just before registering one predecessor: nothing, as hold() counted
    // it; the mutant (`held` false) counts it here.
    void count_one(bool held) {
        // relaxed: as in hold().
        if (!held) count_.fetch_add(1, std::memory_order_relaxed);
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
