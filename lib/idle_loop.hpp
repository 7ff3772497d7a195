// The loop a worker runs between jobs: take work while there is some,
// else go idle, search, get sleepy and sleep (sleep.hpp), until a job, the
// latch it waits for, its deadline or (in the main loop) the cap ends it.
//
// A template over the synchronisation policy and over the worker it runs
// for, so that the model checker runs this code and not a copy of it:
// Worker instantiates it with StdSync (worker.cpp), tests/relacy with
// RelacySync and a worker of its own.
//
// The worker (`Host`) provides:
//   uint32_t index() const;             its index in the sleep protocol
//   uint32_t awake_limit() const;       see Sleep::no_work_found (max_searching)
//   Found find_work(bool woken);        a job (found.job != nullptr) or none
//   void execute(const Found &);        runs what find_work found
//   bool has_jobs_for_me();             the final check before blocking
//   bool has_shared_jobs();             work_found's hand-off
//   bool deadline_passed(uint64_t);     the clock (a model decides timeouts
//                                       in Sync::wait_until instead)
//   void on_searching(), on_blocking(), on_running();  its phase
//   void on_woken();                    after a wake-up (tracing)
// and, for the main loop (kTopLevel) only:
//   bool over_cap();                    active_cap.hpp
//   void sit_out_cap();
#pragma once

#include <cstdint>

#include "core_latch.hpp"
#include "deadline.hpp"
#include "sleep.hpp"

namespace blz {

// One idle period: searches (and sleeps) until it finds a job, the latch
// is set, the deadline passes or (top level) the pool is over its cap.
template <bool kTopLevel, class Host, class Sync>
auto search_until(Host &host, Sleep<Sync> &sleep, CoreLatch<Sync> &latch, uint64_t deadline) {
    // Before sleeping, also the worker's own mail (Worker::post_mail).
    auto has_jobs_for_me = [&host] { return host.has_jobs_for_me(); };
    IdleState idle = sleep.start_looking(host.index());
    host.on_searching();
    decltype(host.find_work(false)) found{};
    bool woken = false;
    while (!latch.probe()) {
        // Every round re-reads the cap: a worker woken, or still searching,
        // when the cap was lowered takes no job above it.
        if constexpr (kTopLevel) {
            if (host.over_cap()) break;
        }
        found = host.find_work(woken);
        if (found.job != nullptr || host.deadline_passed(deadline)) break;
        // The phase changes to blocked only once the sleep is committed
        // (on_block): a latch setter that saw it finds SLEEPING.
        IdleOutcome outcome = sleep.no_work_found(idle, latch, has_jobs_for_me, host.awake_limit(), deadline,
                                                  [&host] { host.on_blocking(); });
        if (outcome == IdleOutcome::kTimedOut) {
            host.on_searching();
            break;
        }
        woken = outcome == IdleOutcome::kWoken;
        if (woken) {
            host.on_searching();
            host.on_woken();
        }
    }
    // Leaving the idle state: we found a job, the latch was set (the work
    // we were waiting for is done: also a reason to be awake), the deadline
    // passed, or the pool is over its cap.
    sleep.work_found(host.index(), [&host] { return host.has_shared_jobs(); });
    host.on_running();
    return found;
}

// Runs jobs until `latch` is set (true), or until `deadline` has passed
// (false, unless the latch was set meanwhile). kTopLevel: the main loop,
// not inside a job; only there does the worker obey the cap.
template <bool kTopLevel, class Host, class Sync>
bool run_until(Host &host, Sleep<Sync> &sleep, CoreLatch<Sync> &latch, uint64_t deadline) {
    while (!latch.probe()) {
        if (host.deadline_passed(deadline)) return false;
        // Between jobs at the top level: a worker over the cap stops here,
        // before it takes another job (active_cap.hpp [C3]).
        if constexpr (kTopLevel) {
            if (host.over_cap()) {
                host.sit_out_cap();
                continue;
            }
        }
        // One search while still active: a worker fed by steals or by the
        // injector (a stream of spawns from outside) goes from job to job
        // without the two counter updates of going idle and back.
        if (auto found = host.find_work(false); found.job != nullptr) {
            host.execute(found);
            continue;
        }
        auto found = search_until<kTopLevel>(host, sleep, latch, deadline);
        if (found.job == nullptr) {
            if (kTopLevel && !latch.probe()) continue;  // over the cap: sit out above
            return latch.probe();
        }
        host.execute(found);
    }
    return true;
}

}  // namespace blz
