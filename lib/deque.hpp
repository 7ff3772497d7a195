// The work-stealing deque: a Chase-Lev deque whose bottom end is split in
// two, so that the owner's common case uses no fence and no locked
// instruction.
//
// Indices grow from top_ to bottom_, in one circular buffer:
//
//     top_ ........ split_ ........ bottom_
//     |  public: thieves  |  private: the  |
//     |  steal here, FIFO |  owner's alone |
//
// The public part [top_, split_) is exactly the Chase-Lev deque of Lê, Pop,
// Cohen and Zappa Nardelli, "Correct and Efficient Work-Stealing for Weak
// Memory Models" (PPoPP 2013), figure 1, with split_ in the role of the
// paper's bottom: thieves CAS top_, and the owner takes public elements
// back with the paper's fenced pop. The private part [split_, bottom_)
// needs no synchronisation at all: thieves never read past split_, so the
// owner pushes and pops there with plain loads and stores. publish() moves
// split_ up to bottom_ (one release store) when another worker wants work;
// the policy that decides when lives in the worker, not here. The idea of a
// split deque is Lace's (van Dijk and van de Pol, "Lace: non-blocking split
// deque for work-stealing", Euro-Par 2014); the code and its argument are
// this project's.
//
// Invariants (each kept by the code marked with it):
//  [I1] top_ only grows; a slot index is taken by at most one party: the
//       thief or owner whose CAS moves top_ past it, or the owner taking an
//       index that no thief can reach (private, or above top_ after the
//       owner's fenced claim).
//  [I2] Slots are atomics and a thief reads its slot before its CAS: the
//       owner may overwrite the slot concurrently, but only after top_ has
//       moved past it, so such a thief's CAS fails and the stale value is
//       dropped.
//  [I3] Buffers only grow, and a retired buffer is kept until the deque is
//       destroyed: a thief that loaded an old buffer pointer still reads
//       valid memory, and because grow copies every live slot, the value at
//       index t in the old buffer equals the one in the new buffer for as
//       long as top_ == t (after that the thief's CAS fails).
//  [I4] A thief loads buffer_ after its acquire load of split_: if it saw
//       an element published in a new buffer, it also sees that buffer
//       (grow's release store precedes publish's release of split_).
//  [I5] Only the owner writes split_ and bottom_, and split_ <= bottom_.
//       The owner keeps an exact copy of split_ (split_mirror_; it differs
//       only inside pop_public()), so it never reads the thieves' line to
//       tell a private element from a public one.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <new>

#include "sync.hpp"

namespace blz {

template <class T, class Sync = StdSync>
class Deque {
    template <class U>
    using Atomic = typename Sync::template atomic<U>;

    // A header followed in the same allocation by capacity atomic slots.
    struct Buffer {
        int64_t mask;          // capacity - 1; capacity is a power of two
        Buffer *retired_next;  // owner-only list of buffers replaced by grow

        Atomic<T> *slots() { return reinterpret_cast<Atomic<T> *>(this + 1); }
        Atomic<T> &at(int64_t index) { return slots()[index & mask]; }
    };
    static_assert(sizeof(Buffer) % alignof(Atomic<T>) == 0, "slots follow the header");

public:
    enum class Steal { kEmpty, kAbort, kSuccess };
    struct StealResult {
        Steal status;
        T value;
    };

    static constexpr int64_t kInitialCapacity = 64;

    // The model checker starts small so that grows and wrap-arounds happen
    // within a few operations.
    explicit Deque(int64_t initial_capacity = kInitialCapacity)
        : buffer_(nullptr), initial_capacity_(initial_capacity) {}

    Deque(const Deque &) = delete;
    Deque &operator=(const Deque &) = delete;

    ~Deque() {
        Buffer *b = buffer_.load(std::memory_order_relaxed);  // no thread uses the deque any more
        while (b != nullptr) {
            Buffer *next = b->retired_next;
            free_buffer(b);
            b = next;
        }
    }

    // Allocates the first buffer; false when out of memory. Not thread-safe.
    bool init() {
        Buffer *b = make_buffer(initial_capacity_);
        buffer_.store(b, std::memory_order_relaxed);  // published by the thread start that follows
        return b != nullptr;
    }

    // Owner only: pushes onto the private part. False when the buffer was
    // full and could not grow (out of memory); the value was not pushed.
    bool push(T value) {
        int64_t b = bottom_;
        Buffer *a = buffer_.load(std::memory_order_relaxed);  // relaxed: only the owner writes buffer_
        // top_seen_ is a value of top_ read with acquire, never above the
        // real one: enough to know the slot is free ([I1]), and it spares
        // the owner a read of the thieves' cache line on most pushes.
        if (b - top_seen_ > a->mask) {
            // acquire: a thief's successful CAS (which read the slot first,
            // [I2]) happens-before we reuse that slot.
            top_seen_ = top_.load(std::memory_order_acquire);
            if (b - top_seen_ > a->mask) {
                a = grow(a, b, top_seen_);  // use the new buffer from here on (the CDSChecker fix)
                if (a == nullptr) return false;
            }
        }
        // relaxed: private until publish()'s release store of split_.
        a->at(b).store(value, std::memory_order_relaxed);
        bottom_ = b + 1;
        return true;
    }

    // Owner only: makes the `max` oldest private elements (all of them by
    // default) stealable. Returns how many it published.
    int64_t publish(int64_t max = INT64_MAX) {
        int64_t n = std::min(bottom_ - split_mirror_, max);
        if (n <= 0) return 0;
        split_mirror_ += n;
        if constexpr (Sync::kMutant == Mutant::kRelaxedPublish) {
            split_.store(split_mirror_, std::memory_order_relaxed);
        } else {
            // release: a thief that acquires the new split_ sees the slots
            // stored by push(), and the buffer they are in [I4].
            split_.store(split_mirror_, std::memory_order_release);
        }
        return n;
    }

    // Owner only: whether thieves have nothing left to take (a snapshot).
    bool public_part_empty() const {
        // relaxed: a hint; the line is written only by successful steals.
        return top_.load(std::memory_order_relaxed) >= split_mirror_;
    }

    // Owner only: the index the next push takes. Entries at or above a
    // value read here were pushed after it (isolation.hpp's base).
    int64_t bottom_index() const { return bottom_; }

    // Owner only: the number of elements no thief can take yet.
    int64_t private_size() const { return bottom_ - split_mirror_; }

    // Owner only. Returns T{} when empty or when a thief won the last element.
    T pop() {
        int64_t b = bottom_;
        if (b > split_mirror_) [[likely]] {  // private: no thief can reach index b - 1 [I5]
            bottom_ = b - 1;
            // relaxed: we wrote the slot ourselves.
            return buffer_.load(std::memory_order_relaxed)->at(b - 1).load(std::memory_order_relaxed);
        }
        return pop_public();
    }

    // Any thread.
    StealResult steal() {
        // acquire: pairs with the CAS of an earlier thief or the owner, so the
        // slot we read below is not older than the element at index t.
        int64_t t = top_.load(std::memory_order_acquire);
        // relaxed: a peek that spares an idle thief the fence on a deque it
        // sees empty. A stale split_ can only hide a job for this attempt,
        // which costs a steal, never the job (its owner still runs it);
        // claiming goes through the fence and the acquire load below.
        if (t >= split_.load(std::memory_order_relaxed)) return {Steal::kEmpty, T{}};
        // seq-cst fence: the other half of pop_public()'s store-buffering pair.
        Sync::full_fence();
        // acquire: pairs with publish(), so the slots below split_ are visible.
        int64_t s = split_.load(std::memory_order_acquire);
        if (t >= s) return {Steal::kEmpty, T{}};
        // acquire: after split_, so a buffer installed by grow before the
        // publish we saw is visible with its copied slots [I3][I4].
        Buffer *a = buffer_.load(std::memory_order_acquire);
        if constexpr (Sync::kMutant == Mutant::kSlotReadAfterCas) {
            int64_t claimed = t;
            if (!top_.compare_exchange_strong(t, t + 1, std::memory_order_seq_cst, std::memory_order_relaxed)) {
                return {Steal::kAbort, T{}};
            }
            return {Steal::kSuccess, a->at(claimed).load(std::memory_order_relaxed)};
        }
        // relaxed, and before the CAS [I2]: if the owner reuses the slot, top_
        // has moved and the CAS below fails.
        T value = a->at(t).load(std::memory_order_relaxed);
        // seq_cst: the claim is ordered with the owner's fence-protected pop.
        if (!top_.compare_exchange_strong(t, t + 1, std::memory_order_seq_cst,
                                          std::memory_order_relaxed)) {
            return {Steal::kAbort, T{}};
        }
        return {Steal::kSuccess, value};
    }

    // Any thread: a snapshot of the number of stealable elements, never negative.
    int64_t size_hint() const {
        int64_t t = top_.load(std::memory_order_acquire);   // acquire: a recent value; no order needed
        int64_t s = split_.load(std::memory_order_acquire);  // acquire: as above
        return s > t ? s - t : 0;
    }

    // The number of slots in the current buffer (for tests).
    int64_t capacity_for_owner() const {
        return buffer_.load(std::memory_order_relaxed)->mask + 1;
    }

private:
    // Owner only, with the private part empty (bottom_ == split_): the
    // paper's pop on the public part, split_ standing for its bottom.
    [[gnu::noinline]] T pop_public() {
        // relaxed: top_ only grows, so a value at or past split_ proves the
        // public part empty, and only we can fill it. This spares the fence
        // to an idle worker polling its own empty deque.
        if (top_.load(std::memory_order_relaxed) >= split_mirror_) return T{};
        int64_t s = split_mirror_ - 1;
        Buffer *a = buffer_.load(std::memory_order_relaxed);  // relaxed: only the owner writes buffer_
        // release, not relaxed: a thief whose acquire load of split_ reads
        // this value steals an element below s, which only publish()'s
        // release store made visible. Since C++20 a release sequence no
        // longer continues through later plain stores of the same thread, so
        // a relaxed store here would give that thief no happens-before with
        // the slots and the jobs they point to (docs/protocol.md, "The
        // split deque"). On x86 both orders are the same plain mov.
        split_.store(s, std::memory_order_release);
        // seq-cst fence: our claim on index s (the split_ store) and a
        // thief's claim (its top_ load, behind its own fence) form a
        // store-buffering pair; without both fences each could miss the
        // other and take the same element.
        if constexpr (Sync::kMutant != Mutant::kNoPublicPopFence) Sync::full_fence();
        int64_t t = top_.load(std::memory_order_relaxed);  // relaxed: ordered by the fence above
        if (t > s) {  // empty
            split_.store(s + 1, std::memory_order_relaxed);  // relaxed: no element to publish
            return T{};
        }
        T value = a->at(s).load(std::memory_order_relaxed);  // relaxed: we wrote it ourselves
        if (t == s) {
            // The last element: race the thieves for it with their own CAS [I1].
            // seq_cst: the CAS takes part in the same total order as the fences.
            if (!top_.compare_exchange_strong(t, t + 1, std::memory_order_seq_cst,
                                              std::memory_order_relaxed)) {
                value = T{};
            }
            split_.store(s + 1, std::memory_order_relaxed);  // relaxed: empty, nothing to publish
            return value;
        }
        split_mirror_ = s;
        bottom_ = s;
        return value;
    }

    // The policy may supply the allocator (the model checker's tracks
    // accesses to freed buffers); else the global operator new.
    static void *allocate(std::size_t bytes) {
        if constexpr (requires { Sync::allocate(bytes); }) {
            return Sync::allocate(bytes);
        } else {
            return ::operator new(bytes, std::nothrow);
        }
    }
    static void deallocate(void *raw) {
        if constexpr (requires { Sync::deallocate(raw); }) {
            Sync::deallocate(raw);
        } else {
            ::operator delete(raw);
        }
    }

    static Buffer *make_buffer(int64_t capacity) {
        std::size_t bytes = sizeof(Buffer) + sizeof(Atomic<T>) * static_cast<std::size_t>(capacity);
        void *raw = allocate(bytes);
        if (raw == nullptr) return nullptr;
        Buffer *b = new (raw) Buffer{capacity - 1, nullptr};
        for (int64_t i = 0; i < capacity; ++i) new (&b->slots()[i]) Atomic<T>(T{});
        return b;
    }

    static void free_buffer(Buffer *b) {
        for (int64_t i = 0; i <= b->mask; ++i) b->slots()[i].~Atomic<T>();
        b->~Buffer();
        deallocate(b);
    }

    // Owner only: doubles the buffer, keeping the old one alive [I3].
    [[gnu::noinline]] Buffer *grow(Buffer *old, int64_t b, int64_t t) {
        Buffer *bigger = make_buffer(2 * (old->mask + 1));
        if (bigger == nullptr) return nullptr;
        for (int64_t i = t; i < b; ++i) {
            // relaxed: the copies are published by the release store below.
            bigger->at(i).store(old->at(i).load(std::memory_order_relaxed), std::memory_order_relaxed);
        }
        bigger->retired_next = old;
        // release: a thief that acquires this pointer sees the copied slots [I4].
        buffer_.store(bigger, std::memory_order_release);
        if constexpr (Sync::kMutant == Mutant::kFreeRetiredBuffer) {
            bigger->retired_next = old->retired_next;
            free_buffer(old);
        }
        return bigger;
    }

    // Written by thieves.
    alignas(kCacheLine) Atomic<int64_t> top_{0};
    // Written by the owner now and then (publish, pop_public, grow), read by thieves.
    alignas(kCacheLine) Atomic<int64_t> split_{0};
    Atomic<Buffer *> buffer_;
    // The owner's alone, on a line of their own: its pushes and pops write
    // here without disturbing the thieves' reads of the line above.
    alignas(kCacheLine) int64_t bottom_ = 0;
    int64_t split_mirror_ = 0;  // == split_ outside pop_public() [I5]
    int64_t top_seen_ = 0;
    const int64_t initial_capacity_;
};

}  // namespace blz
