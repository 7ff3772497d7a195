// Admission: one pool's admission count and lifetime in one 64-bit word.
//
//   bit 0      CLOSED     destroy has begun: threads outside the pool are refused
//   bit 1      DESTROYED  destroy has finished: the workers are joined
//   bits 2-32  ACTIVE     units of accepted work not finished
//   bits 33-63 REFS       holders of the pool's memory besides destroy: live
//                         groups, and latch setters pinning the pool for a wake-up
//
// A unit of ACTIVE is a task or call that runs in the pool, or a call from
// a thread that is not one of the pool's workers for as long as that call
// touches the pool. Such a call (blz_spawn, blz_group_spawn from outside)
// enters with two units: one its task gives back when it ends, one the call
// gives back as its last access to the pool, after it posted the task.
//
// Invariants:
//  [A1] After CLOSED, ACTIVE only grows through work submitted by work that
//       is itself counted (the pool's own workers inside accepted work), so
//       once ACTIVE reaches 0 it stays 0, and exactly one leave() sees the
//       transition (and sets the destroyer's latch).
//  [A2] Every queued job belongs to counted work, except the fork-join
//       halves of the start and stop hooks (they run as their worker but
//       outside accepted work, blitz.h). So when ACTIVE is 0 after CLOSED,
//       every queue is empty but for such halves, and the workers may stop:
//       a hook's half is run by its forker, which pops it back or waits
//       for the thief that took it, and a thief runs a job to its end
//       before it looks at its terminate latch. And no thread outside the
//       workers still touches the pool, except holders of REFS.
//  [A3] The memory is freed by whoever makes the word CLOSED|DESTROYED with
//       REFS 0: destroy itself, the last group to go, or the last pin.
//  [A4] REFS are taken only while the pool is known to be alive: a group
//       through acquire_ref(), which refuses once CLOSED unless the caller
//       is one of the pool's workers inside accepted work (ACTIVE > 0, so
//       destroy is still waiting); a pin by a thread whose waiter, a
//       worker of this pool, cannot have returned yet.
//  [A5] A worker may give back the units of tasks that ended on it later
//       than at their end, a batch at a time (Worker::leave_later), but
//       always before it stops running (searches, sleeps or parks) and
//       before its thread leaves the slot (Worker::settle). ACTIVE then
//       counts too many, never too few, and only while the worker runs:
//       the drain waits at most until it next looks for work, which it
//       does once no work is left; and a worker outside accepted work
//       (a hook) holds none, so [A1]'s admission after CLOSED is unchanged.
//
// The class is a template on the synchronisation policy (sync.hpp) so that
// the model checker runs this very code (tests/relacy: the destroy path).
#pragma once

#include <cstdint>

#include "blitz.h"
#include "fault.hpp"
#include "sync.hpp"

namespace blz {

template <class Sync = StdSync>
class Admission {
public:
    // Admits `units` of work. `own_worker`: the caller is one of the pool's
    // workers, which may still add work after CLOSED while accepted work
    // runs [A1]. BLZ_OK, BLZ_ESHUTDOWN, or BLZ_ENOMEM when the count is full.
    blz_status enter(bool own_worker, uint64_t units) {
        // relaxed: only the count matters here. The accepted job is published
        // by the queue it goes into; leave() carries the release to the destroyer.
        uint64_t state = state_.load(std::memory_order_relaxed);
        for (;;) {
            if ((state & kClosed) && (!own_worker || active_units(state) == 0)) return BLZ_ESHUTDOWN;
            if (active_units(state) > kActiveMax - units) return BLZ_ENOMEM;
            if (state_.compare_exchange_weak(state, state + units * kOneActive, std::memory_order_relaxed,
                                             std::memory_order_relaxed)) {
                return BLZ_OK;
            }
        }
    }

    // Gives back `units`. True for the one leave that drains a closed pool
    // [A1]: the caller then sets the destroyer's latch, which it may read
    // because the destroyer waits for exactly that.
    bool leave(uint64_t units = 1) {
        // acq_rel: release hands the work's effects (and the end of every
        // access to the pool) to the destroyer; acquire makes what the
        // destroyer wrote before CLOSED (its latch) visible to the last leaver.
        uint64_t state = state_.fetch_sub(units * kOneActive, std::memory_order_acq_rel) - units * kOneActive;
        return (state & (kClosed | kActiveMask)) == kClosed;
    }

    // A group's hold on the memory. Refused once destroy has begun [A4],
    // except to the pool's own workers while accepted work runs (they may
    // still add work then [A1], and destroy, which waits for that work,
    // has not freed anything yet).
    blz_status acquire_ref(bool own_worker) {
        uint64_t state = state_.load(std::memory_order_relaxed);  // relaxed: a count, as in enter()
        for (;;) {
            if ((state & kClosed) && (!own_worker || active_units(state) == 0)) return BLZ_ESHUTDOWN;
            if ((state >> kRefShift) >= kGroupRefsMax) return BLZ_ENOMEM;
            if (state_.compare_exchange_weak(state, state + kOneRef, std::memory_order_relaxed,
                                             std::memory_order_relaxed)) {
                return BLZ_OK;
            }
        }
    }

    // A hold on the memory that cannot be refused: only for a caller that
    // knows the pool is alive [A4]. Groups stop kPinHeadroom short of the
    // field's end, and each thread holds at most one pin at a time.
    void pin() {
        // relaxed: the caller already knows the memory is alive; the release
        // that matters is the one in release_ref().
        state_.fetch_add(kOneRef, std::memory_order_relaxed);
    }

    // Drops a group's ref or a pin. True when the caller must free the memory [A3].
    bool release_ref() {
        // acq_rel: whoever frees sees every other holder's last access.
        uint64_t state = state_.fetch_sub(kOneRef, std::memory_order_acq_rel) - kOneRef;
        return state == (kClosed | kDestroyed);
    }

    // Destroy begins. Returns the ACTIVE units at that moment: the destroyer
    // waits for its latch when they are not 0.
    uint64_t close() {
        // acq_rel: release publishes the destroyer's latch to the last
        // leaver; acquire sees the work of everyone who left before.
        return active_units(state_.fetch_or(kClosed, std::memory_order_acq_rel));
    }

    // Destroy ends. True when the caller must free the memory (no REFS) [A3].
    bool mark_destroyed() {
        // acq_rel: as in release_ref.
        uint64_t state = state_.fetch_or(kClosed | kDestroyed, std::memory_order_acq_rel);
        return (state >> kRefShift) == 0;
    }

    // In a forked child: the parent's accepted work never finishes here.
    void drop_active_work() {
        uint64_t state = state_.load(std::memory_order_relaxed);  // relaxed: the child has one thread
        while (!state_.compare_exchange_weak(state, state & ~kActiveMask, std::memory_order_relaxed,
                                             std::memory_order_relaxed)) {
        }
    }

private:
    static constexpr uint64_t kClosed = 1;
    static constexpr uint64_t kDestroyed = 2;
    static constexpr uint64_t kOneActive = 4;
    static constexpr uint64_t kActiveMax = (uint64_t{1} << 31) - 1;
    static constexpr uint64_t kActiveMask = kActiveMax * kOneActive;
    static constexpr int kRefShift = 33;
    static constexpr uint64_t kOneRef = uint64_t{1} << kRefShift;
    static constexpr uint64_t kPinHeadroom = uint64_t{1} << 24;
    static constexpr uint64_t kGroupRefsMax = (uint64_t{1} << 31) - kPinHeadroom;

    static uint64_t active_units(uint64_t state) { return (state & kActiveMask) / kOneActive; }

    typename Sync::template atomic<uint64_t> state_{0};
};

// A submission (spawn_task): admits it, lets `queue` make and queue the
// task, then, from a thread that is not one of the pool's workers, gives
// back the call's own unit as its last access to the pool: its task may
// run and leave before the call's post returns, and destroy must not free
// the pool under the call. The pool's own workers need no such unit:
// destroy joins them before freeing. `queue` returns BLZ_OK once the task
// is queued (it holds the task's unit from then on), or an error with
// nothing queued (both units go back). The pool provides
// enter(units, own_worker) and leave(units) (Registry, or the model's).
template <class Sync, class Pool, class Queue>
blz_status submit_admitted(Pool &pool, bool own_worker, Queue &&queue) {
    bool outside = !own_worker && !BLZ_FAULT_MUTANT(kSpawnCountsOnlyTask);
    if constexpr (Sync::kMutant == Mutant::kSpawnCountsOnlyTask) outside = false;
    const uint64_t units = outside ? 2 : 1;
    const blz_status admitted = pool.enter(units, own_worker);
    if (admitted != BLZ_OK) return admitted;
    const blz_status queued = queue();
    if (queued != BLZ_OK) {
        pool.leave(units);
        return queued;
    }
    if (outside) pool.leave(1);  // the call's unit: its last access to the pool
    return BLZ_OK;
}

}  // namespace blz
