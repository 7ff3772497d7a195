// SpareCounts: the spare threads' accounting (docs/protocol.md, "Blocking
// sections and spare threads"): how many threads are in a blocking section
// that gave a slot back (blocked), how many spares are alive (live), and
// the decisions taken on them. Registry keeps the slots and the threads;
// this class keeps only the counts and the rules, so that it can be a
// template on the synchronisation policy (sync.hpp) and Relacy can run the
// real rules (tests/relacy "spare hand-off").
//
// Every count changes only under mutex(), which Registry also takes for its
// slot states. The counts are atomics only so that a reader outside the lock
// (the stale read kSpareRetiresOnStaleCount stands for) is no data race.
//   [B1] block_begin wants a stand-in while live < blocked, within the bound.
//   [B3] an idle spare retires only while live > blocked, decided under the
//        lock that block_begin counts under: so while blocked <= max_spares,
//        live >= blocked (up to a retired slot's [B4] window).
//   [B4] a retired spare's thread takes its slot back on the [B1] rule.
#pragma once

#include <cstdint>
#include <mutex>

#include "sync.hpp"

namespace blz {

template <class Sync = StdSync>
class SpareCounts {
public:
    SpareCounts() = default;
    explicit SpareCounts(uint32_t max_spares) : max_spares_(max_spares) {}
    // The bound, set once before any thread uses this object (a pool's creation).
    void set_max_spares(uint32_t max_spares) { max_spares_ = max_spares; }

    uint32_t max_spares() const { return max_spares_; }
    // Guards every count below and the caller's slot states.
    typename Sync::mutex &mutex() const { return mutex_; }

    // ---- under mutex() ----
    // [B1] A thread enters a blocking section: counted; true when it needs
    // a new spare as its stand-in (the caller claims a slot, or finds none).
    bool count_blocked() {
        add(blocked_, +1);
        return needs_stand_in();
    }
    // [B2] A thread is back from its section.
    void uncount_blocked() { add(blocked_, -1); }
    // [B1]/[B4] Fewer live spares than blocked threads, and room for one more.
    bool needs_stand_in() const { return live() < blocked() && live() < max_spares_; }
    // A spare slot got (or lost, its thread failed to start) a thread.
    uint32_t add_live() { return add(live_, +1); }
    uint32_t remove_live() { return add(live_, -1); }
    // [B3] May an idle spare retire? `early` is stale_retire_choice(), read
    // before the lock; only the mutant decides on it.
    bool may_retire(bool early) const {
        if constexpr (Sync::kMutant == Mutant::kSpareRetiresOnStaleCount) return early;
        return live() > blocked();
    }
    // [B3] What must hold under the lock whenever no retired thread is
    // between its retirement and its [B4] check.
    bool stand_ins_cover_blocked() const { return blocked() > max_spares_ || live() >= blocked(); }
    // relaxed, here and in add(): every change is under the lock, which orders them.
    uint32_t live() const { return live_.load(std::memory_order_relaxed); }
    uint32_t blocked() const { return blocked_.load(std::memory_order_relaxed); }

    // ---- outside the lock ----
    // The mutant's early read: a block_begin may count a thread between it
    // and the lock. relaxed: this read is the race the mutant stands for.
    bool stale_retire_choice() const {
        return live_.load(std::memory_order_relaxed) > blocked_.load(std::memory_order_relaxed);
    }

private:
    using Count = typename Sync::template atomic<uint32_t>;

    static uint32_t add(Count &count, int delta) {
        const uint32_t now = count.load(std::memory_order_relaxed) + static_cast<uint32_t>(delta);
        count.store(now, std::memory_order_relaxed);
        return now;
    }

    uint32_t max_spares_ = 0;
    mutable typename Sync::mutex mutex_;  // mutable: statistics (const) read the counts under it
    Count live_{0};
    Count blocked_{0};
};

}  // namespace blz
