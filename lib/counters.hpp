// AtomicCounters: the sleep protocol's shared state in one 64-bit word, so
// that a worker can check "no new work" and register as sleeping in one CAS.
//
//   bits  0-15  sleeping threads  (blocked on their condition variable)
//   bits 16-31  inactive threads  (searching for work or sleeping)
//   bits 32-63  JEC, the jobs event counter (wraps around)
//
// JEC direction (Rayon's, see docs/protocol.md): a poster turns an even JEC
// odd ("new work since the last worker got sleepy"); a worker getting
// sleepy turns an odd JEC even and remembers the value after its own
// change. Any later change means a post happened since, so the sleepy
// worker searches again instead of blocking.
#pragma once

#include <algorithm>
#include <cstdint>

#include "sync.hpp"

namespace blz {

// A snapshot of the word.
struct Counters {
    uint64_t word;

    static constexpr uint64_t kOneSleeping = 1;
    static constexpr uint64_t kOneInactive = uint64_t{1} << 16;
    static constexpr uint64_t kOneJec = uint64_t{1} << 32;
    static constexpr uint64_t kThreadMask = 0xFFFF;

    uint32_t sleeping() const { return static_cast<uint32_t>(word & kThreadMask); }
    uint32_t inactive() const { return static_cast<uint32_t>((word >> 16) & kThreadMask); }
    uint32_t jec() const { return static_cast<uint32_t>(word >> 32); }

    // Even JEC: no post since the last worker got sleepy.
    bool jec_is_sleepy() const { return (jec() & 1) == 0; }

    // Workers searching for work but not blocked. Saturating: a waker
    // clears the sleeper's `blocked` mark before it decrements `sleeping`,
    // and a sleeper that sees the mark cleared before it ever blocked can
    // leave `inactive` in between, so for a moment `sleeping` may exceed
    // `inactive` (the model checker found it; it costs nothing beyond the
    // clamp: at worst a post sees no idle worker for that moment).
    uint32_t awake_but_idle() const {
        return inactive() > sleeping() ? inactive() - sleeping() : 0;
    }
};

template <class Sync = StdSync>
class AtomicCounters {
public:
    // seq_cst on every operation below: the counters are one half of the
    // store-buffering argument between a poster and a sleeper (docs/protocol.md);
    // keeping every access in the single total order S is what the argument
    // assumes, and on x86 a seq_cst RMW or load costs the same as a weaker one.

    Counters load() const { return {value_.load(std::memory_order_seq_cst)}; }

    // Poster: JEC even -> odd. Returns the counters after the change (or as
    // found, when the JEC was already odd and nothing changed).
    Counters post_event() {
        Counters old = load();
        for (;;) {
            if (!old.jec_is_sleepy()) return old;
            Counters next{old.word + Counters::kOneJec};  // wraps within bits 32-63
            if (value_.compare_exchange_weak(old.word, next.word, std::memory_order_seq_cst,
                                             std::memory_order_seq_cst)) {
                return next;
            }
        }
    }

    // Sleepy worker: JEC odd -> even. Returns the JEC after its own change
    // (or as found, when it was already even): the value to compare with
    // before blocking.
    uint32_t announce_sleepy() {
        if constexpr (Sync::kMutant == Mutant::kBlitzJecDirection) return post_event().jec();
        Counters old = load();
        for (;;) {
            if (old.jec_is_sleepy()) return old.jec();
            Counters next{old.word + Counters::kOneJec};
            if (value_.compare_exchange_weak(old.word, next.word, std::memory_order_seq_cst,
                                             std::memory_order_seq_cst)) {
                if constexpr (Sync::kMutant == Mutant::kJecSavedBeforeChange) return old.jec();
                return next.jec();
            }
        }
    }

    // Sleeper: +1 sleeping, only if the word is still `expected` (so the JEC
    // did not change since it was checked).
    bool try_add_sleeping_thread(Counters expected) {
        return value_.compare_exchange_strong(expected.word, expected.word + Counters::kOneSleeping,
                                              std::memory_order_seq_cst, std::memory_order_seq_cst);
    }

    // The waker (or a sleeper that undoes its own registration before blocking).
    void sub_sleeping_thread() { value_.fetch_sub(Counters::kOneSleeping, std::memory_order_seq_cst); }

    void add_inactive_thread() { value_.fetch_add(Counters::kOneInactive, std::memory_order_seq_cst); }

    // Returns the word as it was before.
    uint64_t sub_inactive_thread() { return value_.fetch_sub(Counters::kOneInactive, std::memory_order_seq_cst); }

    // For tests and mutants: replace the whole word if it is `expected`.
    bool compare_exchange(Counters &expected, Counters desired) {
        return value_.compare_exchange_strong(expected.word, desired.word, std::memory_order_seq_cst,
                                              std::memory_order_seq_cst);
    }

private:
    typename Sync::template atomic<uint64_t> value_{0};
};

}  // namespace blz
