// Publication: how a job on a worker's deque becomes public (thieves may
// take it) and is announced to the sleep protocol (sleep.hpp). The two
// kinds of jobs differ in one thing, the fence:
//
//  * a promoted fork (fork_join.hpp) is an internal job: its owner runs it
//    if nobody steals it, so a sleeper that misses the post costs
//    parallelism, never progress: no fence (Sleep::new_internal_jobs);
//  * a spawned task is a shared job: the job that spawned it may block
//    outside the runtime before its worker returns to the deque, so the
//    post has the fence (Sleep::new_shared_jobs), and the `public_tasks`
//    flag shows the sleepers' final checks where to look
//    (Worker::offers_tasks, Registry::has_shared_jobs).
//
// Templates over the deque, the sleep state and the flag's atomic, so that
// the model checker (tests/relacy) runs this code with its own atomics.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "sleep.hpp"
#include "sync.hpp"

namespace blz {

// A publish of n jobs as a post counts them (sleep.hpp): how many, as the
// counters hold them.
inline uint32_t as_posted_jobs(int64_t n) { return static_cast<uint32_t>(std::min<int64_t>(n, UINT32_MAX)); }

// Whether the public part held nothing but the n jobs just published:
// asked by the wake decision only when some worker sleeps.
template <class Deque>
struct PublicPartHeldOnly {
    const Deque &deque;
    int64_t n;
    bool operator()() const { return deque.size_hint() <= n; }
};

// Owner: publishes up to `max` of its private jobs (promoted forks) and
// posts them without a fence. `awake_limit`: see Sleep::new_internal_jobs.
template <class Deque, class Sync>
void publish_forks(Deque &deque, Sleep<Sync> &sleep, int64_t max, uint32_t awake_limit) {
    const int64_t n = deque.publish(max);
    if (n == 0) return;
    if constexpr (Sync::kMutant == Mutant::kPromoteWithoutPost) return;
    sleep.new_internal_jobs(as_posted_jobs(n), PublicPartHeldOnly<Deque>{deque, n}, awake_limit);
}

// Owner: pushes a spawned task, public at once, and posts it with the
// fence. `public_tasks` is the owner's flag (set here, cleared by the
// owner when it sees its public part empty). False when the deque could
// not grow.
template <class Deque, class Sync, class Flag, class JobPtr>
bool push_public_task(Deque &deque, Sleep<Sync> &sleep, Flag &public_tasks, JobPtr job) {
    if (!deque.push(job)) return false;
    // relaxed: published by the release store and the fence that follow.
    if (!public_tasks.load(std::memory_order_relaxed)) public_tasks.store(true, std::memory_order_relaxed);
    const int64_t n = deque.publish();
    sleep.new_shared_jobs(as_posted_jobs(n), PublicPartHeldOnly<Deque>{deque, n});
    return true;
}

// Any thread, after a seq-cst fence (a sleeper's final check, a
// hand-off): whether a worker's deque may hold a public spawned task: its
// flag, and a public element. Public fork-join halves do not count: their
// owner runs them if nobody steals them, and counting them would keep
// every searcher from sleeping while a fork-join runs.
template <class Flag, class Deque>
bool offers_public_tasks(const Flag &public_tasks, const Deque &deque) {
    // relaxed: ordered by the caller's fence against push_public_task's.
    return public_tasks.load(std::memory_order_relaxed) && deque.size_hint() > 0;
}

// Any thread, after a seq-cst fence: whether a shared job waits anywhere
// in the pool (Registry::has_shared_jobs): `injected()` says whether an
// injector holds one, `offers(i)` whether worker i offers a task.
template <class Sync, class Injected, class Offers>
bool shared_jobs_wait(Injected &&injected, uint32_t num_workers, Offers &&offers) {
    if (injected()) return true;
    if constexpr (Sync::kMutant == Mutant::kChecksOnlyInjector) return false;  // the code before issue 13's fix
    for (uint32_t i = 0; i < num_workers; ++i) {
        if (offers(i)) return true;
    }
    return false;
}

// Any thread: queues a shared job in an injector and posts it with the
// fence (Registry::inject). `before_post` runs between the two (a fault
// point's pause, or the model's read of the pool's plain fields).
template <class Injector, class Sync, class JobPtr, class BeforePost>
void inject_shared(Injector &injector, Sleep<Sync> &sleep, JobPtr job, BeforePost &&before_post) {
    const bool was_empty = injector.push(job);
    before_post();
    sleep.new_shared_jobs(1, [was_empty] { return was_empty; });
}

}  // namespace blz
