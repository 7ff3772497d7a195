// PhaseClock: where one worker's time went, running, searching or sleeping
// (blz_stats run_ns, search_ns, sleep_ns). The owner reads the clock only
// when it changes phase: going idle, blocking, waking, finding work. Never
// per job or per join: the fork-join path does not know this exists.
//
// Readers on other threads take a consistent snapshot through a sequence
// word (a seqlock): the owner makes it odd, writes, makes it even; a
// reader retries until it saw the same even value before and after its
// loads. The phase under way counts up to the reader's own clock reading,
// taken inside that window, so that a phase change after it makes the
// reader retry rather than count the new phase's time as the old one's.
//
// What a reader reports never decreases from one snapshot to the next
// (blitz.h: utilisation is a difference of snapshots). The window above
// leaves a few nanoseconds of doubt (the owner reads the clock after its
// odd store, and neither CPU orders a clock read against memory), so each
// figure also has a floor, the largest value any reader reported, raised
// by a CAS: a snapshot that happens after another (in the C++ sense)
// reports at least what that one did. The Linux kernel keeps its
// utime/stime monotonic the same way (cputime_adjust).
//
// Lifetime: a member of its Worker; readers (blz_worker_stats,
// blz_pool_stats) are admitted calls, and destroy frees the workers only
// after every admitted call left (admission.hpp).
#pragma once

#include <atomic>
#include <cstdint>

#include "deadline.hpp"
#include "sync.hpp"

namespace blz {

enum class Phase : uint32_t { kRunning = 0, kSearching = 1, kSleeping = 2 };

// A phase that ended: what it was and when it ran (tracing draws it).
struct EndedPhase {
    Phase phase;
    uint64_t begin_ns, end_ns;
};

struct PhaseTimes {
    uint64_t ns[3] = {0, 0, 0};  // indexed by Phase
    Phase current = Phase::kRunning;
};

class PhaseClock {
public:
    // The worker is created running (start-up and its start hook count as running).
    PhaseClock() : since_(monotonic_now_ns()) {}

    // Owner only. Ends the phase under way and starts `next` (no-op if the
    // same: then the returned phase is `next`, with no time).
    EndedPhase enter(Phase next) {
        const Phase current = static_cast<Phase>(phase_.load(std::memory_order_relaxed));  // relaxed: owner's own write
        if (current == next) return {next, 0, 0};
        const uint32_t seq = seq_.load(std::memory_order_relaxed);  // relaxed: only the owner writes it
        // relaxed store + release fence: a reader that sees any of the
        // stores below also sees the odd value (its acquire fence pairs
        // with this one), so it retries.
        seq_.store(seq + 1, std::memory_order_relaxed);
        std::atomic_thread_fence(std::memory_order_release);
        const uint64_t now = monotonic_now_ns();
        const uint64_t since = since_.load(std::memory_order_relaxed);  // relaxed: owner's own write
        std::atomic<uint64_t> &total = ns_[static_cast<uint32_t>(current)];
        total.store(total.load(std::memory_order_relaxed) + (now - since), std::memory_order_relaxed);  // relaxed: inside the seqlock
        since_.store(now, std::memory_order_relaxed);            // relaxed: inside the seqlock
        phase_.store(static_cast<uint32_t>(next), std::memory_order_relaxed);  // relaxed: inside the seqlock
        // release: a reader that sees the even value sees every store above.
        seq_.store(seq + 2, std::memory_order_release);
        return {current, since, now};
    }

    Phase phase_for_owner() const { return static_cast<Phase>(phase_.load(std::memory_order_relaxed)); }  // relaxed: owner's own write

    // Any thread: the totals, with the phase under way counted up to now;
    // never less than what an earlier read() reported.
    PhaseTimes read() const {
        PhaseTimes t = snapshot();
        for (int i = 0; i < 3; ++i) t.ns[i] = at_least_reported(reported_[i], t.ns[i]);
        return t;
    }

private:
    PhaseTimes snapshot() const {
        for (;;) {
            // acquire: pairs with the owner's final release store.
            const uint32_t before = seq_.load(std::memory_order_acquire);
            PhaseTimes t;
            for (int i = 0; i < 3; ++i) t.ns[i] = ns_[i].load(std::memory_order_relaxed);  // relaxed: validated by seq_
            const uint64_t since = since_.load(std::memory_order_relaxed);              // relaxed: validated by seq_
            t.current = static_cast<Phase>(phase_.load(std::memory_order_relaxed));      // relaxed: validated by seq_
            const uint64_t now = monotonic_now_ns();  // inside the window: validated with the rest
            // acquire fence: the loads above happen before the re-check below,
            // and pair with the owner's release fence after its odd store.
            std::atomic_thread_fence(std::memory_order_acquire);
            // relaxed: ordered by the fence above.
            if ((before & 1) != 0 || seq_.load(std::memory_order_relaxed) != before) continue;
            t.ns[static_cast<uint32_t>(t.current)] += now > since ? now - since : 0;
            return t;
        }
    }

    // Raises `floor` to `value` if below; returns the larger. relaxed: the
    // floor only needs its own modification order (coherence), by which a
    // read that happens after another sees that one's raise or a later one.
    static uint64_t at_least_reported(std::atomic<uint64_t> &floor, uint64_t value) {
        uint64_t reported = floor.load(std::memory_order_relaxed);
        while (reported < value &&
               !floor.compare_exchange_weak(reported, value, std::memory_order_relaxed, std::memory_order_relaxed)) {
        }
        return reported > value ? reported : value;
    }

    std::atomic<uint32_t> seq_{0};    // odd while the owner writes
    std::atomic<uint32_t> phase_{0};  // a Phase
    std::atomic<uint64_t> since_;     // when the phase under way began
    std::atomic<uint64_t> ns_[3] = {}; // completed phases' totals
    // Written by readers only, on a line of their own: the owner's line
    // stays out of the readers' CAS traffic.
    alignas(kCacheLine) mutable std::atomic<uint64_t> reported_[3] = {};
};

}  // namespace blz
