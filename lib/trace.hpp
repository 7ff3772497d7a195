// Trace: what a pool's workers did, as a Chrome Trace Event file
// (blz_pool_trace_start/stop, BLZ_TRACE; docs/tracing.md). Each worker
// appends to a buffer of its own, with no lock; threads outside the pool
// (their wake-ups) share one buffer under a mutex. The stopping thread
// detaches every buffer, then writes the file.
//
// Lifetimes:
//  - A TraceBuffer is owned by the Tracer from start until a writer may
//    hold it: a writer touches it only while attached (TraceSlot), and
//    stop detaches every slot, waiting out a write in progress, before it
//    reads and frees the buffer.
//  - A TraceSlot is a member of its Worker (or of the Tracer, for outside
//    threads): it lives as long as the pool's workers.
//  - The Tracer is a member of the Registry. start and stop are admitted
//    calls; a wake-up reported from outside the pool comes from an
//    admitted call or a pinned latch setter (admission.hpp [A4]); destroy
//    stops the trace itself after joining the workers.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "blitz.h"
#include "fault.hpp"
#include "job.hpp"
#include "sleep.hpp"

namespace blz {

class Registry;

enum class TraceKind : uint8_t {
    kJobOwn,       // popped from the worker's own deque (or a fork-join half run inline)
    kJobStolen,    // taken from another worker's deque
    kJobInjected,  // from the pool's queue (spawns and calls from outside)
    kJobUrgent,    // from the high-priority queue
    kJobMail,      // a blz_broadcast share
    kSearch,       // looking for work
    kSleep,        // blocked (no work, or over the cap)
    kWakeOut,      // this thread woke a worker: `what` is the flow id
    kWakeIn,       // this worker was woken: `what` is the flow id
};

// One event: a span [begin_ns, end_ns] or an instant (begin == end).
// Times are CLOCK_MONOTONIC nanoseconds.
struct TraceEvent {
    uint64_t begin_ns;
    uint64_t end_ns;
    uint64_t what;  // jobs: the function's address; wakes: the flow id
    TraceKind kind;
    int32_t cpu = -1;  // wakes: the CPU the event happened on (sched_getcpu); -1 unknown
};
static_assert(sizeof(TraceEvent) == 32, "blitz.h documents 32 bytes per event");

// A wake-up's flow id: the woken worker and its sleep count, which the
// waker reads under the worker's sleep mutex and the woken worker knows.
inline uint64_t wake_flow_id(uint32_t worker, uint64_t sleep_count) {
    return (uint64_t{worker} << 40) | (sleep_count & ((uint64_t{1} << 40) - 1));
}

// The function a queued job runs, for its span's name: the user's
// function for spawned tasks and C fork-join halves, else the job's runner.
uint64_t function_of(const Job *job);

// One thread's events, at most `capacity`: later ones are counted as dropped.
class TraceBuffer {
public:
    explicit TraceBuffer(size_t capacity);
    bool ok() const { return events_ != nullptr; }
    // The attached writer only (TraceSlot).
    void append(const TraceEvent &event) {
        if (size_ < capacity_) {
            events_[size_++] = event;
            return;
        }
        if (dropped_++ == 0) first_drop_ns_ = event.end_ns;
    }
    // The stopper, once detached.
    const TraceEvent *begin() const { return events_.get(); }
    const TraceEvent *end() const { return events_.get() + size_; }
    uint64_t dropped() const { return dropped_; }
    uint64_t first_drop_ns() const { return first_drop_ns_; }

private:
    struct Free {
        void operator()(TraceEvent *p) const;
    };
    // malloc'd: pages the writer never reaches are never made resident.
    std::unique_ptr<TraceEvent[], Free> events_;
    size_t capacity_;
    size_t size_ = 0;
    uint64_t dropped_ = 0;
    uint64_t first_drop_ns_ = 0;
};

// A writer's connection to the trace under way. One writer at a time
// appends (a worker to its own slot; outside threads under the Tracer's
// mutex); any thread may attach, and the stopper detaches.
class TraceSlot {
public:
    // A hint for the hot paths: whether to take the traced path at all.
    // relaxed: write() checks again under the handshake.
    bool attached() const { return buffer_.load(std::memory_order_relaxed) != nullptr; }

    // release: the writer that sees the pointer sees the buffer's initial state.
    void attach(TraceBuffer *buffer) { buffer_.store(buffer, std::memory_order_release); }

    void write(const TraceEvent &event) {
        // seq_cst store, then seq_cst load: the writer's half of the
        // store-buffering pair with detach() (its exchange, then its load):
        // either we see the slot emptied, or the detacher sees us writing
        // and waits for our release below.
        writing_.store(1, std::memory_order_seq_cst);
        if (TraceBuffer *buffer = buffer_.load(std::memory_order_seq_cst)) {
            BLZ_FAULT_POINT(kTraceWriteHoldsBuffer, nullptr);
            buffer->append(event);
        }
        // release: the detacher that sees 0 sees the appended event.
        writing_.store(0, std::memory_order_release);
    }

    // The stopper: after this no writer touches the buffer, which it returns.
    TraceBuffer *detach();

private:
    std::atomic<TraceBuffer *> buffer_{nullptr};
    std::atomic<uint32_t> writing_{0};
};

// The trace of one pool: started and stopped by any thread, at most one at a time.
class Tracer final : public WakeObserver {
public:
    explicit Tracer(Registry &registry);
    ~Tracer();

    // BLZ_OK; BLZ_EINVAL (a trace is under way, or `path` cannot be
    // opened for writing: errno says why); BLZ_ENOMEM. Throws nothing.
    blz_status start(const char *path);
    // Writes and closes the file. BLZ_OK; BLZ_EINVAL (no trace under way,
    // or writing failed: errno says why); BLZ_ENOMEM (the trace is over,
    // its file unfinished). Throws nothing.
    blz_status stop();
    // BLZ_TRACE: a pool starts a trace at creation. Failures go to stderr:
    // the pool is made anyway.
    void start_from_environment();
    // In a forked child: the file is closed unwritten, the buffers freed.
    void abandon();

    // Sleep's report of a wake-up (any thread that woke one of our workers).
    void woke(uint32_t worker, uint64_t sleep_count) override;

private:
    struct Session;
    blz_status start_session(const char *path);  // may throw bad_alloc: start() catches it
    blz_status write_and_close(Session &session);  // may throw bad_alloc: stop() catches it

    Registry &registry_;
    std::mutex control_;  // start and stop, one at a time
    std::atomic<bool> active_{false};
    std::unique_ptr<Session> session_;  // under control_
    std::mutex outside_;  // serialises the outside threads' writes
    TraceSlot outside_slot_;
};

}  // namespace blz
