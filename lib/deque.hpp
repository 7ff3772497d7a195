// The Chase-Lev work-stealing deque, with the C11 memory orders of Lê, Pop,
// Cohen and Zappa Nardelli, "Correct and Efficient Work-Stealing for Weak
// Memory Models" (PPoPP 2013), figure 1.
//
// One owner thread pushes and pops at the bottom (LIFO) without locks; any
// number of thieves steal at the top (FIFO) with one CAS on `top_`.
//
// Invariants (each kept by the code marked with it):
//  [I1] top_ only grows; a slot index is taken by at most one party: the
//       thief or owner whose CAS moves top_ past it, or the owner popping
//       an index above every thief's reach.
//  [I2] Slots are atomics and a thief reads its slot before its CAS: the
//       owner may overwrite the slot concurrently, but only after top_ has
//       moved past it, so such a thief's CAS fails and the stale value is
//       dropped.
//  [I3] Buffers only grow, and a retired buffer is kept until the deque is
//       destroyed: a thief that loaded an old buffer pointer still reads
//       valid memory, and because grow copies every live slot, the value at
//       index t in the old buffer equals the one in the new buffer for as
//       long as top_ == t (after that the thief's CAS fails).
//  [I4] A thief loads buffer_ after its acquire load of bottom_: if it saw
//       an element pushed into a new buffer, it also sees that buffer
//       (grow's release store precedes the push's release of bottom_).
#pragma once

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

    Deque() : buffer_(nullptr) {}

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
        Buffer *b = make_buffer(kInitialCapacity);
        buffer_.store(b, std::memory_order_relaxed);  // published by the thread start that follows
        return b != nullptr;
    }

    // Owner only. False when the buffer was full and could not grow (out
    // of memory); the value was not pushed.
    bool push(T value) {
        // relaxed: only the owner writes bottom_ and buffer_.
        int64_t b = bottom_.load(std::memory_order_relaxed);
        Buffer *a = buffer_.load(std::memory_order_relaxed);
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
        // relaxed: published by the release store of bottom_ below.
        a->at(b).store(value, std::memory_order_relaxed);
        // release: a thief that acquires the new bottom_ sees the slot.
        bottom_.store(b + 1, std::memory_order_release);
        return true;
    }

    // Owner only. Returns T{} when empty or when a thief won the last element.
    T pop() {
        int64_t b = bottom_.load(std::memory_order_relaxed) - 1;  // relaxed: owner-only variable
        Buffer *a = buffer_.load(std::memory_order_relaxed);      // relaxed: owner-only variable
        bottom_.store(b, std::memory_order_relaxed);  // ordered before the top_ load by the fence
        // seq-cst fence: our claim on index b (the bottom_ store) and a thief's
        // claim (its top_ load, behind its own fence) form a store-buffering
        // pair; without both fences each could miss the other and take the
        // same element.
        Sync::full_fence();
        int64_t t = top_.load(std::memory_order_relaxed);  // relaxed: ordered by the fence above
        if (t > b) {  // empty
            bottom_.store(b + 1, std::memory_order_relaxed);  // relaxed: restores our own variable
            return T{};
        }
        T value = a->at(b).load(std::memory_order_relaxed);  // relaxed: we wrote it ourselves
        if (t == b) {
            // The last element: race the thieves for it with their own CAS [I1].
            // seq_cst: the CAS takes part in the same total order as the fences.
            if (!top_.compare_exchange_strong(t, t + 1, std::memory_order_seq_cst,
                                              std::memory_order_relaxed)) {
                value = T{};
            }
            bottom_.store(b + 1, std::memory_order_relaxed);  // relaxed: owner-only variable
        }
        return value;
    }

    // Any thread.
    StealResult steal() {
        // acquire: pairs with the CAS of an earlier thief or the owner, so the
        // slot we read below is not older than the element at index t.
        int64_t t = top_.load(std::memory_order_acquire);
        // seq-cst fence: the other half of pop()'s store-buffering pair.
        Sync::full_fence();
        // acquire: sees the slot stored before the owner's release of bottom_.
        int64_t b = bottom_.load(std::memory_order_acquire);
        if (t >= b) return {Steal::kEmpty, T{}};
        // acquire: after bottom_, so a buffer installed by grow before the
        // push we saw is visible with its copied slots [I3][I4].
        Buffer *a = buffer_.load(std::memory_order_acquire);
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

    // Any thread: a snapshot of the number of elements, never negative.
    int64_t size_hint() const {
        int64_t t = top_.load(std::memory_order_acquire);
        int64_t b = bottom_.load(std::memory_order_acquire);
        return b > t ? b - t : 0;
    }

    // The number of slots in the current buffer (for tests).
    int64_t capacity_for_owner() const {
        return buffer_.load(std::memory_order_relaxed)->mask + 1;
    }

private:
    static Buffer *make_buffer(int64_t capacity) {
        std::size_t bytes = sizeof(Buffer) + sizeof(Atomic<T>) * static_cast<std::size_t>(capacity);
        void *raw = ::operator new(bytes, std::nothrow);
        if (raw == nullptr) return nullptr;
        Buffer *b = new (raw) Buffer{capacity - 1, nullptr};
        for (int64_t i = 0; i < capacity; ++i) new (&b->slots()[i]) Atomic<T>(T{});
        return b;
    }

    static void free_buffer(Buffer *b) {
        for (int64_t i = 0; i <= b->mask; ++i) b->slots()[i].~Atomic<T>();
        b->~Buffer();
        ::operator delete(b);
    }

    // Owner only: doubles the buffer, keeping the old one alive [I3].
    Buffer *grow(Buffer *old, int64_t b, int64_t t) {
        Buffer *bigger = make_buffer(2 * (old->mask + 1));
        if (bigger == nullptr) return nullptr;
        for (int64_t i = t; i < b; ++i) {
            // relaxed: the copies are published by the release store below.
            bigger->at(i).store(old->at(i).load(std::memory_order_relaxed), std::memory_order_relaxed);
        }
        bigger->retired_next = old;
        // release: a thief that acquires this pointer sees the copied slots [I4].
        buffer_.store(bigger, std::memory_order_release);
        return bigger;
    }

    alignas(kCacheLine) Atomic<int64_t> top_{0};
    alignas(kCacheLine) Atomic<int64_t> bottom_{0};
    Atomic<Buffer *> buffer_;
    int64_t top_seen_ = 0;  // owner only
};

}  // namespace blz
