// ForkStack: the fork-join halves a worker has forked and not yet joined,
// in the record (blz_fork_stack, blitz.h) that code compiled into the
// caller reads and writes too (blitz.hpp's pool::join): a fork that nobody
// steals is two stores and a load on each side, and never a call into the
// library.
//
// The stack holds frame pointers, oldest first. A frame is *pending* while
// only its owner can run it, and *promoted* once it was turned into a job
// on the owner's deque, where thieves may take it:
//
//     frames[0] ... frames[promoted-1] | frames[promoted] ... frames[depth-1]
//     promoted: jobs on the deque      | pending: the owner's alone
//
// Invariants (each kept by the code marked with it):
//  [F1] Only the owner reads or writes frames, depth, capacity and
//       promoted, and the frames they point to while pending: plain
//       accesses. Other threads set bits in `requests` only.
//  [F2] Promotion takes the oldest pending frame, so the promoted frames
//       are a prefix of the stack, and they sit on the deque in stack
//       order: the newest promoted frame is the deque's newest fork-join
//       job (spawned tasks may lie above it: the join runs those first).
//  [F3] A pending frame is popped by the owner's join and run inline; a
//       promoted one is joined through the deque (taken back, or waited
//       for). Either way it leaves the stack before its stack frame ends.
//  [F4] Pending frames exist only while the owner runs user code inline:
//       before it runs anything else on this thread (waiting for a latch,
//       a task, a group, which runs other jobs meanwhile), it promotes
//       every pending frame (Worker::wait_until). So the context a frame
//       was forked in (the task frames, job.hpp) is the thread's context
//       whenever the frame is promoted, and a waiting owner hides no work.
//  [F5] `requests` bit kWanted is set by thieves (a steal from this deque,
//       or one that found it empty) and cleared by the owner when it
//       promotes. It is a hint: a lost or stale request costs parallelism
//       for a while, never a job, since the owner runs every frame nobody
//       took.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "blitz.h"
#include "sync.hpp"

namespace blz {

// How a ForkStack reaches its record's `requests` word atomically. The
// runtime's: std::atomic_ref on the field itself, the word the inline path
// of blitz.h reads. A model checker whose atomics cannot alias a plain
// field specializes this for its Sync with an atomic of its own
// (tests/relacy); the owner's other fields stay plain there too [F1].
template <class Sync>
struct ForkRequestsWord {
    static uint32_t load(uint32_t &field, std::memory_order order) {
        return std::atomic_ref<uint32_t>(field).load(order);
    }
    static void fetch_or(uint32_t &field, uint32_t bits, std::memory_order order) {
        std::atomic_ref<uint32_t>(field).fetch_or(bits, order);
    }
    static void fetch_and(uint32_t &field, uint32_t bits, std::memory_order order) {
        std::atomic_ref<uint32_t>(field).fetch_and(bits, order);
    }
};

template <class Sync = StdSync>
class ForkStack {
public:
    using SyncPolicy = Sync;

    // requests bits.
    static constexpr uint32_t kWanted = 1;  // a thief would take a promoted frame
    static constexpr uint32_t kTraced = 2;  // tracing: every frame is promoted at once

    static constexpr uint32_t kInitialCapacity = 64;

    ForkStack() {
        std::memset(&record_, 0, sizeof record_);
        // An idle pool's first fork promotes: nothing of ours is public yet.
        word_.fetch_or(record_.requests, kWanted, std::memory_order_relaxed);  // relaxed: before any other thread sees us
    }
    ~ForkStack() { std::free(record_.frames); }
    ForkStack(const ForkStack &) = delete;
    ForkStack &operator=(const ForkStack &) = delete;

    // Before the worker's thread starts. False when out of memory.
    bool init(const blz_pool *pool) {
        record_.pool = pool;
        record_.frames = static_cast<blz_fork_frame **>(std::calloc(kInitialCapacity, sizeof(blz_fork_frame *)));
        record_.capacity = record_.frames != nullptr ? kInitialCapacity : 0;
        return record_.frames != nullptr;
    }

    blz_fork_stack &record() { return record_; }

    // Owner: the inline push (blitz.h, step 1); false when the library
    // must push (no room, or a request to serve).
    [[gnu::always_inline]] bool try_push(blz_fork_frame *frame) {
        const uint32_t d = record_.depth;
        if (d >= record_.capacity || requests() != 0) [[unlikely]] return false;
        record_.frames[d] = frame;  // [F1]
        record_.depth = d + 1;
        return true;
    }

    // Owner: pushes with room made first; false when out of memory.
    bool push_growing(blz_fork_frame *frame) {
        if (record_.depth >= record_.capacity && !grow()) return false;
        record_.frames[record_.depth++] = frame;
        return true;
    }

    // Owner: the inline pop (blitz.h, step 3). True when the newest frame
    // was pending: popped, the caller runs it. False when it was
    // promoted: still on the stack, for Worker::join_promoted.
    [[gnu::always_inline]] bool pop_pending() {
        const uint32_t d = record_.depth - 1;
        if constexpr (Sync::kMutant != Mutant::kPopIgnoresPromoted) {
            if (d < record_.promoted) [[unlikely]] return false;  // [F2]: promoted frames are the oldest
        }
        record_.depth = d;
        return true;
    }

    // Owner: removes the newest frame, which was promoted.
    void pop_promoted() {
        --record_.depth;
        record_.promoted = record_.depth;
    }

    // Owner: the oldest pending frame [F2]; has_pending() first.
    blz_fork_frame *oldest_pending() const { return record_.frames[record_.promoted]; }
    // Owner: that frame's job is on the deque now.
    void mark_oldest_promoted() { ++record_.promoted; }

    bool has_pending() const { return record_.promoted < record_.depth; }
    // Owner: whether `frame` is the newest frame (a check of the C ABI's callers).
    bool is_newest(const blz_fork_frame *frame) const {
        return record_.depth > 0 && record_.frames[record_.depth - 1] == frame;
    }

    uint32_t requests() const {
        // relaxed: a hint [F5]; the jobs it leads to are published by the deque's release store.
        return word_.load(const_cast<uint32_t &>(record_.requests), std::memory_order_relaxed);
    }

    // Any thread: asks the owner to promote a frame at its next fork [F5].
    // Read first: thieves that find the bit set leave the owner's line alone.
    void request() {
        // relaxed: a hint [F5].
        if ((word_.load(record_.requests, std::memory_order_relaxed) & kWanted) != 0) return;
        if constexpr (Sync::kMutant == Mutant::kNoForkRequest) return;
        word_.fetch_or(record_.requests, kWanted, std::memory_order_relaxed);
    }

    // Owner: a request is being served.
    void clear_request() { word_.fetch_and(record_.requests, ~kWanted, std::memory_order_relaxed); }  // relaxed: [F5]

    // Any thread (the tracer): every fork goes through the library while set.
    void set_traced(bool traced) {
        // relaxed: a fork that misses the change is traced (or not) one fork late.
        if (traced) {
            word_.fetch_or(record_.requests, kTraced, std::memory_order_relaxed);
        } else {
            word_.fetch_and(record_.requests, ~kTraced, std::memory_order_relaxed);
        }
    }

    // Owner: one more job run (blz_worker_stats). Readers are other threads.
    void count_job() {
        std::atomic_ref<uint64_t> jobs(record_.jobs_executed);
        // relaxed load + store: only the owner writes; stats readers need no order.
        jobs.store(jobs.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    }

    uint64_t jobs_executed() const {
        return std::atomic_ref<uint64_t>(const_cast<uint64_t &>(record_.jobs_executed)).load(std::memory_order_relaxed);
    }

private:
    // Owner: doubles the frame array ([F1]: nobody else reads it).
    [[gnu::noinline]] bool grow() {
        const uint32_t bigger = record_.capacity * 2;
        if (bigger <= record_.capacity) return false;
        void *raw = std::realloc(record_.frames, bigger * sizeof(blz_fork_frame *));
        if (raw == nullptr) return false;
        record_.frames = static_cast<blz_fork_frame **>(raw);
        record_.capacity = bigger;
        return true;
    }

    // On a line boundary: its first line is the owner's, the second the
    // thieves' (blitz.h), so requests never disturb the owner's stores.
    alignas(64) blz_fork_stack record_;
    // mutable: requests() reads the word through the same policy as its writers.
    [[no_unique_address]] mutable ForkRequestsWord<Sync> word_;
    static_assert(offsetof(blz_fork_stack, requests) == 64, "requests starts the second line");
};

}  // namespace blz
