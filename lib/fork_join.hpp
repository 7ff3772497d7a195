// Fork-join on a worker: the four steps of a join over the fork stack
// (fork_stack.hpp), promotion of pending frames into jobs thieves can
// take, and the thief's side (a request). docs/protocol.md, "The fork
// stack", carries the argument that no fork is lost and that an idle
// worker sees promotable work.
//
// Templates over the worker they run for, so that the model checker runs
// this code and not a copy of it: Worker instantiates them (worker.hpp,
// worker.cpp), tests/relacy with its own worker and RelacySync.
//
// The worker (`Host`) provides:
//   ForkStack<Sync> &forks();
//   bool push_fork(blz_fork_frame *);      out of line: push_fork_slow below
//   bool join_promoted(blz_fork_frame *);  out of line: join_promoted_frame below
//   bool push_frame_job(blz_fork_frame *); makes the frame's job and pushes it
//                                          on the deque, private; false (and
//                                          nothing pushed) when out of memory
//   void publish_promoted(uint32_t n);     publish_forks (publish.hpp) of n jobs
//   JobPtr frame_job(blz_fork_frame *);    the job push_frame_job made
//   JobPtr pop();                          the deque's pop, newest first
//   void run_own(JobPtr);                  runs a job of its own deque
//   bool run_taken_back(blz_fork_frame *); runs a promoted frame it popped back
//   bool wait_for_thief(JobPtr);           runs other jobs until the job's latch
//                                          is set; the job's result
//   void end_frame_job(JobPtr);            the job's end of life (the frame's
//                                          memory stays the caller's)
//   bool public_part_empty();              the deque's public part, as the owner sees it
#pragma once

#include <cstdint>
#include <type_traits>

#include "blitz.h"
#include "fault.hpp"
#include "fork_stack.hpp"
#include "sync.hpp"

namespace blz {

// Owner: turns up to `max` of the oldest pending frames into jobs on the
// deque, in stack order [F2], and publishes them.
template <class Host>
void promote_forks(Host &host, uint32_t max) {
    auto &forks = host.forks();
    uint32_t n = 0;
    for (; n < max && forks.has_pending(); ++n) {
        if (!host.push_frame_job(forks.oldest_pending())) break;  // out of memory: stays pending, run by us
        forks.mark_oldest_promoted();
    }
    if (n != 0) host.publish_promoted(n);
}

// Owner: step 1 when the inline push could not: pushes `frame` with room
// made first, then serves what was asked (fork_stack.hpp [F5]): a thief's
// request promotes the oldest pending frame, tracing promotes them all.
// False when out of memory: nothing pushed, the caller runs both halves.
template <class Host>
bool push_fork_slow(Host &host, blz_fork_frame *frame) {
    auto &forks = host.forks();
    if (!forks.push_growing(frame)) return false;
    using Stack = std::remove_reference_t<decltype(forks)>;
    const uint32_t requests = forks.requests();
    if ((requests & Stack::kTraced) != 0) {
        promote_forks(host, UINT32_MAX);  // each half a span (run_taken_back)
    } else if ((requests & Stack::kWanted) != 0) {
        forks.clear_request();  // before promoting: a steal of what we promote asks again [F5]
        promote_forks(host, 1);
    }
    return true;
}

// Owner: step 3 when `frame`, the newest, was promoted [F3]: pops the
// deque until it finds the frame's job (jobs above it are tasks spawned
// after the fork: ours to run first) and runs it, or, when a thief took
// it, runs other work until the thief is done. The frame's memory is the
// caller's stack: only after this returns may the caller's frame end, and
// a thief's last access to it is the latch's set (StackJob::run).
// True when the job ended normally.
template <class Host>
bool join_promoted_frame(Host &host, blz_fork_frame *frame) {
    auto &forks = host.forks();
    auto job = host.frame_job(frame);
    forks.pop_promoted();  // [F3]: off the stack; its job is on the deque or taken
    using Sync = typename std::remove_reference_t<decltype(forks)>::SyncPolicy;
    bool ok;
    auto popped = host.pop();
    for (;;) {
        if (popped == job) {
            ok = host.run_taken_back(frame);
            break;
        }
        if (popped == nullptr) {  // a thief took it: help until it is done
            if (BLZ_FAULT_MUTANT(kJoinSkipsStolenFrame)) return true;  // the thief still runs the frame
            if constexpr (Sync::kMutant == Mutant::kJoinSkipsStolenFrame) return true;
            ok = host.wait_for_thief(job);
            break;
        }
        host.run_own(popped);
        popped = host.pop();
    }
    host.end_frame_job(job);
    // Nothing of ours may be public now: the next fork offers one [F5].
    if (host.public_part_empty()) forks.request();
    return ok;
}

// The join: `frame` (already holding b's function) is pushed, a runs, b
// runs inline unless its frame was promoted. a and b return true when they
// ended normally; `promoted_ok` says whether b did when a thief or a
// promoted job ran it (what join_promoted cannot see: a result the frame's
// function kept). Both always run. Inlined into its callers: the common
// case (b never promoted) is two stores, a call, a load and a store, and
// a call; the rest is out of line.
template <class Host, class A, class B, class PromotedOk>
[[gnu::always_inline]] inline bool fork_join(Host &host, blz_fork_frame &frame, A &&a, B &&b,
                                             PromotedOk &&promoted_ok) {
    auto &forks = host.forks();
    if (!forks.try_push(&frame) && !host.push_fork(&frame)) [[unlikely]] {  // out of memory: run both here
        const bool ok_a = a();
        const bool ok_b = b();
        return ok_a && ok_b;
    }
    const bool ok_a = a();
    bool ok_b;
    if (forks.pop_pending()) [[likely]] {
        forks.count_job();
        ok_b = b();
    } else {
        ok_b = host.join_promoted(&frame) && promoted_ok();
    }
    return ok_a && ok_b;
}

// Thief: one steal from a victim's deque. Whether it took a job or found
// the deque empty, the victim's next fork promotes one [F5]; a steal that
// lost a race (kAbort) asks nothing: someone else is taking.
template <class Deque, class Stack>
auto steal_and_request(Deque &deque, Stack &forks) {
    auto stolen = deque.steal();
    if (stolen.status != Deque::Steal::kAbort) forks.request();
    return stolen;
}

}  // namespace blz
