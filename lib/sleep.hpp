// Sleep: when idle workers block, and who wakes them. docs/protocol.md
// carries the whole argument; the rules each function keeps are restated
// where the function keeps them.
//
// A worker that finds no work calls no_work_found() once per search round:
//   rounds 0 .. kRoundsUntilSleepy-1   yield and search again;
//   round kRoundsUntilSleepy           get sleepy: JEC odd -> even, remember it;
//   then one more search, then sleep():
//     latch UNSET -> SLEEPY; lock own mutex; latch SLEEPY -> SLEEPING;
//     JEC still the remembered value? else search again (from "sleepy");
//     +1 sleeping in the same CAS that re-checks the JEC;
//     seq-cst fence; final check of the shared jobs (the injector, and
//     the tasks spawned onto workers' deques);
//     blocked = 1; unlock; block on the futex word `blocked` until a
//     waker clears it, or (a bounded wait) until the deadline: then, under
//     the mutex, a sleeper still marked blocked clears the mark and
//     undoes its own registration, as a final check that finds work
//     does; one that a waker claimed first was woken.
// A poster publishes its job, (shared jobs only: seq-cst fence), turns an
// even JEC odd, and wakes at most num_jobs sleepers, decrementing `sleeping`
// for each worker it wakes (the waker decrements, never the woken worker).
//
// Two kinds of posts. *Internal* jobs (fork-join halves) are run by their
// owner if nobody steals them, so a sleeper that misses one costs
// parallelism, never progress: no fence. *Shared* jobs (injected jobs,
// spawned tasks) may have nobody else to run them: the injector has no
// owner, and a worker that spawned a task may block outside the runtime
// before it returns to its deque. Their posts take the fence, and the final
// check before sleeping looks for them.
//
// Lifetime: a WorkerSleepState lives as long as the pool's struct
// (Registry), which a thread outside the pool that wakes a worker keeps
// alive by a pin (Latch::set, admission.hpp [A4]).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <new>

#include "core_latch.hpp"
#include "counters.hpp"
#include "sync.hpp"

namespace blz {

// Idle rounds spent searching (and yielding) before a worker gets sleepy.
inline constexpr uint32_t kRoundsUntilSleepy = 32;
// The round at which a sleepy worker blocks: one more search after getting sleepy.
inline constexpr uint32_t kRoundsUntilSleeping = kRoundsUntilSleepy + 1;

// The rounds a policy uses: its own kRoundsUntilSleepy if it has one (the
// model checker shortens the idle phase), else the constant above.
template <class Sync>
constexpr uint32_t rounds_until_sleepy() {
    if constexpr (requires { Sync::kRoundsUntilSleepy; }) {
        return Sync::kRoundsUntilSleepy;
    } else {
        return kRoundsUntilSleepy;
    }
}

// A worker's progress towards sleep during one idle period.
struct IdleState {
    uint32_t worker_index;
    uint32_t rounds = 0;
    uint32_t jec = 0;  // meaningful once the worker got sleepy

    void wake_fully() { rounds = 0; }
};

// The default for no_work_found's `on_block`: nobody is told.
struct NoBlockHook {
    void operator()() const {}
};

enum class IdleOutcome {
    kKeepLooking,  // yielded (or got sleepy); search again
    kLatchSet,     // the awaited latch was set on the way to sleep
    kAborted,      // the last check found new work (JEC changed or a shared job)
    kWoken,        // blocked, then woken
    kTimedOut,     // blocked, and the deadline passed before a waker came
};

// Told of each wake-up a waker makes (tracing, trace.hpp), by the waking
// thread under the sleeper's mutex, before the sleeper can return: it may
// not block, and takes no lock that is ever held while taking a sleep
// mutex. `sleep_count`: the woken worker's count of sleeps, which names
// this sleep (the woken worker knows it too).
class WakeObserver {
public:
    virtual void woke(uint32_t worker, uint64_t sleep_count) = 0;

protected:
    ~WakeObserver() = default;
};

template <class Sync = StdSync>
class Sleep {
    template <class U>
    using Atomic = typename Sync::template atomic<U>;

    static constexpr uint32_t kSleepy = rounds_until_sleepy<Sync>();
    static constexpr uint32_t kSleeping = kSleepy + (kRoundsUntilSleeping - kRoundsUntilSleepy);

    // One worker's sleep state, alone on its cache lines.
    struct alignas(kCacheLine) WorkerSleepState {
        typename Sync::mutex mutex;
        // 1 from the sleeper's last check until a waker clears it, the word
        // the sleeper blocks on. Written only under `mutex` (set by the
        // sleeper, cleared by its one waker); read without it by the
        // sleeper, to know when to stop blocking.
        Atomic<uint32_t> blocked{0};
        bool woken_idle = false;   // owner only: woken and found no job since
        // Statistics: written by the owner only (relaxed load + store), read by anyone.
        Atomic<uint64_t> sleeps{0};
        Atomic<uint64_t> wakeups{0};
        Atomic<uint64_t> spurious_wakeups{0};
        Atomic<uint64_t> sleep_aborts{0};
        // The word an isolated waiter blocks on outside the protocol
        // (Sleep::block_isolated): 1 while it may block, 0 once a latch
        // setter woke it. Here, not in the Worker, because a setter reaches
        // it after the waiter may have returned and its pool destroyed its
        // workers: the pin it holds keeps only the pool's struct, and these
        // states with it (Latch::set).
        Atomic<uint32_t> isolated_wait{0};
    };

public:
    struct Stats {
        uint64_t sleeps = 0, wakeups = 0, spurious_wakeups = 0, sleep_aborts = 0;
    };

    Sleep() = default;
    Sleep(const Sleep &) = delete;
    Sleep &operator=(const Sleep &) = delete;
    ~Sleep() { release(); }

    // False when out of memory. Before any worker starts. `num_spares`:
    // the spare threads' slots (blocking sections, docs/protocol.md), after
    // the workers' (indices num_workers ..): they sleep and are woken like
    // workers, but the awake count of new_internal_jobs stays the
    // workers': a spare runs only in place of a worker that blocks.
    bool init(uint32_t num_workers, uint32_t num_spares = 0) {
        const uint32_t slots = num_workers + num_spares;
        void *raw = ::operator new(sizeof(WorkerSleepState) * slots, std::align_val_t{alignof(WorkerSleepState)},
                                   std::nothrow);
        if (raw == nullptr) return false;
        states_ = static_cast<WorkerSleepState *>(raw);
        for (uint32_t i = 0; i < slots; ++i) new (&states_[i]) WorkerSleepState();
        num_workers_ = num_workers;
        num_slots_ = slots;
        return true;
    }

    // Frees the per-worker states once no worker uses them. Idempotent.
    void release() {
        for (uint32_t i = 0; i < num_slots_; ++i) states_[i].~WorkerSleepState();
        release_memory();
        num_workers_ = num_slots_ = 0;
    }

    // In a forked child, the mutexes and condition variables may be held or
    // waited on by threads that do not exist: free the memory without
    // running their destructors (a mutex may be held by a thread that is gone).
    void abandon() {
        release_memory();
        num_workers_ = num_slots_ = 0;
    }

    // --- the idle worker's side ---

    IdleState start_looking(uint32_t worker_index) {
        counters_.add_inactive_thread();
        return IdleState{worker_index};
    }

    // The worker leaves the idle state: it found a job, or its latch was
    // set. A poster that saw this worker idle did not wake anyone for its
    // shared job; if we were the last awake searcher and shared jobs are
    // still queued, hand them to one sleeper instead of leaving them behind the
    // job we are about to run (Rayon wakes up to two here; one suffices, and
    // keeps bursts at no more than one wake-up per job).
    template <class HasSharedJobs>
    void work_found(uint32_t worker_index, HasSharedJobs &&has_shared_jobs) {
        Counters after{counters_.sub_inactive_thread() - Counters::kOneInactive};
        WorkerSleepState &st = states_[worker_index];
        if (st.woken_idle) st.woken_idle = false;
        if (after.sleeping() == 0 || after.awake_but_idle() != 0) return;
        // seq-cst fence: a poster whose post only *read* the counters (JEC
        // already odd) and saw us idle forms a store-buffering pair with
        // us; with its shared-job fence, either it saw us active (and woke
        // someone) or we see its job here.
        Sync::full_fence();
        if (has_shared_jobs()) wake_any_threads(1);
    }

    // One idle round without work. `max_searching`: once more workers than
    // that search at the same time, a searcher skips its remaining rounds
    // and gets sleepy now: searchers beyond the CPUs the pool may use only
    // take turns on them with the workers that have work. Skipping rounds
    // changes only when a worker sleeps, never how (the protocol below).
    // `deadline` (deadline.hpp): a bounded wait blocks no longer than that.
    // `on_block` runs once the worker is committed to blocking (its latch
    // SLEEPING, counted in `sleeping`), just before it blocks: a phase it
    // publishes from there (blz_stats.sleeping_now) is never ahead of the
    // protocol, so a latch setter that saw it will find SLEEPING.
    template <class HasSharedJobs, class OnBlock = NoBlockHook>
    IdleOutcome no_work_found(IdleState &idle, CoreLatch<Sync> &latch, HasSharedJobs &&has_shared_jobs,
                              uint32_t max_searching = UINT32_MAX, uint64_t deadline = UINT64_MAX,
                              OnBlock &&on_block = {}) {
        if (idle.rounds < kSleepy) {
            if (counters_.load().awake_but_idle() <= max_searching) {
                Sync::yield();
                ++idle.rounds;
                return IdleOutcome::kKeepLooking;
            }
            idle.rounds = kSleepy;
        }
        if (idle.rounds == kSleepy) {
            idle.jec = counters_.announce_sleepy();
            ++idle.rounds;
            Sync::yield();
            return IdleOutcome::kKeepLooking;
        }
        if (idle.rounds < kSleeping) {
            ++idle.rounds;
            Sync::yield();
            return IdleOutcome::kKeepLooking;
        }
        return sleep(idle, latch, has_shared_jobs, deadline, on_block);
    }

    // --- the poster's side ---

    // Jobs pushed onto a worker's own deque: no fence (a missed internal job
    // costs parallelism, never progress: its owner will run it).
    // `queue_was_empty` is only called when some worker sleeps: it may read
    // a cache line the thieves write.
    // `awake_limit`: wake nobody once that many workers are awake (running
    // or searching); by default no limit. Jobs split off by fork-join pass the number of CPUs
    // the pool may use: more awake workers than CPUs only take turns on
    // them, and a small fork-join would pay their wake-ups and their
    // spinning. Progress never needs these wakes (the owner runs its jobs).
    template <class QueueWasEmpty>
    void new_internal_jobs(uint32_t num_jobs, QueueWasEmpty &&queue_was_empty, uint32_t awake_limit = UINT32_MAX) {
        Counters c = counters_.post_event();
        if (c.sleeping() == 0) return;
        // Sleeping spares count too, so the difference saturates.
        uint32_t awake = c.sleeping() < num_workers_ ? num_workers_ - c.sleeping() : 0;
        if (awake >= awake_limit) return;
        wake_for_jobs(c, std::min(num_jobs, awake_limit - awake), queue_was_empty());
    }

    // Shared jobs, already visible in their queue (pushed into the
    // injector, or published on the spawning worker's deque). The seq-cst
    // fence is the poster's half of the store-buffering pair with sleep()'s
    // fence: either this fence comes first in S and the sleeper's final
    // check sees the job, or the sleeper's comes first and the counters
    // read below show it sleeping. No awake limit: a task may block, and
    // its siblings should not wait for it. `queue_was_empty` as above.
    template <class QueueWasEmpty>
    void new_shared_jobs(uint32_t num_jobs, QueueWasEmpty &&queue_was_empty) {
        if constexpr (Sync::kMutant != Mutant::kNoInjectFence) Sync::full_fence();
        Counters c = counters_.post_event();
        if (c.sleeping() == 0) return;
        wake_for_jobs(c, num_jobs, queue_was_empty());
    }

    // Worker `index` in an isolated wait, its latch not set: blocks on its
    // own word until the latch is set (true) or `deadline` passed (false,
    // the latch back to UNSET). Outside the sleep protocol: no poster
    // counts on this worker for a job it would refuse (docs/protocol.md,
    // "Isolation").
    bool block_isolated(uint32_t index, CoreLatch<Sync> &latch, uint64_t deadline) {
        // SLEEPING obliges a setter to call wake_isolated().
        if (!latch.get_sleepy() || !latch.fall_asleep()) return true;  // set meanwhile
        Atomic<uint32_t> &word = states_[index].isolated_wait;
        bool set = true;
        for (;;) {
            // seq_cst store, then the fence: our half of the
            // store-buffering pair with wake_isolated().
            word.store(1, std::memory_order_seq_cst);
            Sync::full_fence();
            if (latch.probe()) break;
            if (Sync::wait_until(word, 1, deadline)) continue;
            // Timed out: back to UNSET unless a setter found SLEEPING
            // (then the latch is SET, and its wake-up touches only us).
            set = !latch.wake_up();
            break;
        }
        // relaxed: a wake_isolated() that still sees 1 wakes nobody.
        word.store(0, std::memory_order_relaxed);
        return set;
    }

    // Any thread, after setting a latch that worker `index` waited on while
    // it was SLEEPING: wakes it if it blocked in an isolated wait. The
    // fence orders the set before the exchange: with the waiter's store of
    // 1 and its fence before it probes the latch, either it sees the set
    // or we see its 1 and wake it.
    void wake_isolated(uint32_t index) {
        Atomic<uint32_t> &word = states_[index].isolated_wait;
        if constexpr (Sync::kMutant == Mutant::kIsolatedWakeNoFence) {
            if (word.load(std::memory_order_relaxed) == 1 && word.exchange(0, std::memory_order_relaxed) == 1) {
                Sync::wake_one(word);
            }
            return;
        }
        Sync::full_fence();
        // seq_cst: see above.
        if (word.exchange(0, std::memory_order_seq_cst) == 1) Sync::wake_one(word);
    }

    // Wakes `index` if it is blocked; the waker decrements `sleeping`. True
    // when it woke it. Used for latches: setting a latch wakes exactly its waiter.
    bool wake_specific_thread(uint32_t index) {
        WorkerSleepState &st = states_[index];
        {
            std::lock_guard<typename Sync::mutex> lock(st.mutex);
            // relaxed: the mutex orders this with the sleeper's store of 1.
            if (st.blocked.load(std::memory_order_relaxed) == 0) return false;
            // Reported before the sleeper can run again, so that the wake-up's
            // time comes before the woken worker's. relaxed: the mutex
            // orders the load with the sleeper's bump.
            if (observer_ != nullptr) observer_->woke(index, st.sleeps.load(std::memory_order_relaxed));
            // release: the sleeper's acquire load that sees 0 also sees what
            // we did before (the job we posted, the latch we set).
            st.blocked.store(0, std::memory_order_release);
            // The waker decrements: the woken worker may take long to run, and a
            // poster must not count it as still asleep in the meantime (it would
            // skip waking another one), nor may two wakers both count it.
            if constexpr (Sync::kMutant != Mutant::kSleeperDecrements) counters_.sub_sleeping_thread();
        }
        // After unlocking, so that the sleeper, once running, finds the mutex
        // free. The state outlives this call: a waker from outside the pool
        // has pinned it (Latch::set), one of its workers is joined before it
        // is freed. A futex wake is harmless even on reused memory (futex.hpp).
        Sync::wake_one(st.blocked);
        return true;
    }

    // Before any worker starts: who hears of wake-ups (nullptr: nobody).
    void observe_wakes(WakeObserver *observer) { observer_ = observer; }

    // Owner only: the worker's own count of sleeps (the name of its last one).
    uint64_t own_sleep_count(uint32_t index) const {
        return states_[index].sleeps.load(std::memory_order_relaxed);  // relaxed: the owner's own writes
    }

    Counters counters() const { return counters_.load(); }
    AtomicCounters<Sync> &atomic_counters() { return counters_; }
    uint32_t num_workers() const { return num_workers_; }

    Stats stats() const {
        Stats s;
        for (uint32_t i = 0; i < num_slots_; ++i) {
            Stats one = stats_of(i);
            s.sleeps += one.sleeps;
            s.wakeups += one.wakeups;
            s.spurious_wakeups += one.spurious_wakeups;
            s.sleep_aborts += one.sleep_aborts;
        }
        return s;
    }

    // One worker's counters. relaxed loads: statistics, written by the owner only.
    Stats stats_of(uint32_t index) const {
        const WorkerSleepState &st = states_[index];
        return {st.sleeps.load(std::memory_order_relaxed), st.wakeups.load(std::memory_order_relaxed),
                st.spurious_wakeups.load(std::memory_order_relaxed), st.sleep_aborts.load(std::memory_order_relaxed)};
    }

    // A worker that stopped taking jobs (it sits out the cap, active_cap.hpp)
    // after it may have been counted on for shared jobs: woken for one, or
    // seen idle or running by a poster that then woke nobody. seq-cst fence:
    // the store-buffering pair with new_shared_jobs() (its fence): either
    // the poster sees what this worker did before (left the idle count,
    // left the engaged workers) or we see its job here and hand it to a
    // sleeper. Without a sleeper, every worker the protocol counts on is
    // awake and will search (docs/protocol.md, "The cap on active workers").
    template <class HasSharedJobs>
    void hand_off_shared_jobs(HasSharedJobs &&has_shared_jobs) {
        Sync::full_fence();
        if (counters_.load().sleeping() != 0 && has_shared_jobs()) wake_any_threads(1);
    }

private:
    static void bump(Atomic<uint64_t> &counter) {
        // relaxed: only the owner writes; readers want a recent value, not an order.
        counter.store(counter.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    }

    // `c` was read by the post that turned the JEC odd. Out of line: the
    // posts that find no sleeper (the fork-join fast path) never get here.
    [[gnu::noinline]] void wake_for_jobs(Counters c, uint32_t num_jobs, bool queue_was_empty) {
        uint32_t sleeping = c.sleeping();
        // Awake idle workers will find the job themselves: each is either
        // still searching, or sleepy and about to see the JEC we just turned
        // odd. Into an empty queue, wake sleepers only for the jobs the idle
        // workers do not cover (the seeds' rule). Into a queue that already
        // had work, the seeds wake min(num_jobs, sleeping) to clear the
        // backlog; libblitz does so only when no awake worker is idle. An
        // idle worker takes the next job, and work_found() then wakes the
        // next helper if jobs are still queued and nobody else is idle: a
        // backlog ramps up one wake per job taken. The seeds' rule woke all
        // 16 workers of a sleeping pool for a burst of 1000 tiny spawns
        // from one thread, 62-88% of them for nothing (bench storm);
        // docs/protocol.md has the figures.
        uint32_t idle = c.awake_but_idle();
        uint32_t to_wake = queue_was_empty ? (idle < num_jobs ? std::min(num_jobs - idle, sleeping) : 0)
                                           : (idle == 0 ? std::min(num_jobs, sleeping) : 0);
        wake_any_threads(to_wake);
    }

    // Wakes up to n blocked workers (or spares), one at a time: never a
    // broadcast. A spare slot without a thread is never marked blocked.
    void wake_any_threads(uint32_t n) {
        for (uint32_t i = 0; n > 0 && i < num_slots_; ++i) {
            if (wake_specific_thread(i)) --n;
        }
    }

    template <class HasSharedJobs, class OnBlock>
    IdleOutcome sleep(IdleState &idle, CoreLatch<Sync> &latch, HasSharedJobs &&has_shared_jobs, uint64_t deadline,
                      OnBlock &on_block) {
        if (!latch.get_sleepy()) return IdleOutcome::kLatchSet;

        WorkerSleepState &st = states_[idle.worker_index];
        std::unique_lock<typename Sync::mutex> lock(st.mutex);

        // A set() between get_sleepy() and here found SLEEPY and will not
        // wake us, so we must not block: the CAS fails and we return.
        bool committed = latch.fall_asleep();
        if constexpr (Sync::kMutant == Mutant::kLatchIgnoresSleepy) committed = true;
        if (!committed) {
            idle.wake_fully();
            return IdleOutcome::kLatchSet;
        }

        // Register as sleeping only if the JEC is still the value we left
        // when we got sleepy: the re-check and the increment are one CAS, so
        // no post can slip between them.
        for (;;) {
            Counters c = counters_.load();
            if (c.jec() != idle.jec) {
                idle.rounds = kSleepy;  // back to just before getting sleepy: one more search
                latch.wake_up();
                bump(st.sleep_aborts);
                return IdleOutcome::kAborted;
            }
            if (counters_.try_add_sleeping_thread(c)) break;
        }

        // The sleeper's half of the store-buffering pair with
        // new_shared_jobs(): after this fence, either we see the shared
        // job below, or its poster sees us in `sleeping` and wakes us.
        if constexpr (Sync::kMutant != Mutant::kNoSleepFence) Sync::full_fence();

        if (has_shared_jobs()) {
            // Nobody woke us, so we undo our own registration.
            counters_.sub_sleeping_thread();
            idle.wake_fully();
            latch.wake_up();
            bump(st.sleep_aborts);
            return IdleOutcome::kAborted;
        }

        if (st.woken_idle) bump(st.spurious_wakeups);
        bump(st.sleeps);
        // relaxed: under the mutex, like every write of `blocked`; a waker
        // that locks after us sees 1 and wakes us.
        st.blocked.store(1, std::memory_order_relaxed);
        lock.unlock();
        on_block();
        // acquire: pairs with the waker's release. Only a waker (or our own
        // timeout, below) clears the word, so a spurious return just blocks again.
        while (st.blocked.load(std::memory_order_acquire) != 0) {
            if (Sync::wait_until(st.blocked, 1, deadline)) continue;
            if (give_up_sleep(st)) {
                idle.wake_fully();
                latch.wake_up();
                return IdleOutcome::kTimedOut;
            }
        }
        if constexpr (Sync::kMutant == Mutant::kSleeperDecrements) counters_.sub_sleeping_thread();

        bump(st.wakeups);
        st.woken_idle = true;
        idle.wake_fully();
        latch.wake_up();
        return IdleOutcome::kWoken;
    }

    // The deadline passed while blocked. Under the mutex, like every write
    // of `blocked`: if no waker has cleared it, nobody will count this
    // worker awake, so it clears the mark and leaves `sleeping` itself
    // (exactly one of it and a waker decrements). False when a waker came
    // first: the worker was woken.
    bool give_up_sleep(WorkerSleepState &st) {
        if constexpr (Sync::kMutant == Mutant::kTimeoutWithoutMutex) {
            // The same steps without the mutex: a waker that claims the
            // worker meanwhile decrements as well.
            if (st.blocked.load(std::memory_order_relaxed) == 0) return false;
            st.blocked.store(0, std::memory_order_relaxed);
            counters_.sub_sleeping_thread();
            return true;
        }
        std::lock_guard<typename Sync::mutex> lock(st.mutex);
        // relaxed: the mutex orders it with the waker's store.
        if (st.blocked.load(std::memory_order_relaxed) == 0) return false;
        st.blocked.store(0, std::memory_order_relaxed);
        counters_.sub_sleeping_thread();
        return true;
    }

    void release_memory() {
        if (states_ != nullptr) {
            ::operator delete(states_, std::align_val_t{alignof(WorkerSleepState)});
            states_ = nullptr;
        }
    }

    alignas(kCacheLine) AtomicCounters<Sync> counters_;
    alignas(kCacheLine) WorkerSleepState *states_ = nullptr;
    uint32_t num_workers_ = 0;  // the pool's workers: new_internal_jobs' awake count
    uint32_t num_slots_ = 0;    // the workers' states and the spares' after them
    WakeObserver *observer_ = nullptr;  // set before the workers start, then only read
};

}  // namespace blz
