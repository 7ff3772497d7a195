// Isolation: while a thread runs a blz_isolate function, or a job made
// inside one, every wait of its runs only work made inside it.
//
// A job made in an isolated context (a promoted fork frame, a spawned or
// group task, a blz_call it submits) records that it was (its `isolated`
// flag, read from t_isolation when the job is made); whoever runs it runs
// it isolated, with a base of its own. An isolated wait (Worker::
// wait_until) pops only its own deque's entries at or above the base, so
// only jobs this thread pushed since the isolation began, all of them made
// inside it; it steals nothing, takes nothing injected and no mail, and
// otherwise blocks on its latch outside the sleep protocol.
// docs/protocol.md, "Isolation", has the argument.
//
// Invariants:
//  [S1] Every job on a worker's deque at or above its t_isolation.base
//       was pushed by the worker while isolated, so it is flagged
//       isolated: pending fork frames are promoted when a region begins
//       (enter_isolation), so the frames of the enclosing context lie
//       below the base, and frames forked inside are promoted in the
//       context they were forked in (fork_stack.hpp [F4]).
//  [S2] Contexts nest: a region and a job's run save the thread's
//       t_isolation and put it back before they return.
#pragma once

#include <cstdint>

namespace blz {

// The calling thread's isolation. `on`: it runs an isolated region or a
// job made inside one. `base`: its deque's bottom index when that began
// (meaningless off a worker, which has no deque).
struct Isolation {
    bool on;
    int64_t base;
};
extern constinit thread_local Isolation t_isolation __attribute__((tls_model("initial-exec")));

// Makes the calling thread isolated from here on (worker.cpp): on a
// worker, promotes its pending forks first [S1] and records the base.
void enter_isolation();

// A scope in which the calling thread is isolated [S2].
class IsolatedScope {
public:
    IsolatedScope() : outer_(t_isolation) { enter_isolation(); }
    ~IsolatedScope() { t_isolation = outer_; }
    IsolatedScope(const IsolatedScope &) = delete;
    IsolatedScope &operator=(const IsolatedScope &) = delete;

private:
    const Isolation outer_;
};

// Runs `f` isolated when `isolated` (a job's flag), as it is otherwise.
template <class F>
decltype(auto) run_isolated_if(bool isolated, F &&f) {
    if (!isolated) [[likely]] return f();
    IsolatedScope scope;
    return f();
}

}  // namespace blz
