// The synchronisation policy the core classes are written against.
//
// Deque, AtomicCounters, CoreLatch, Sleep, Injector and Admission take a `Sync` template
// parameter instead of naming std::atomic directly, so that a model checker
// (Relacy) can instantiate the same code with its own atomics, mutexes and
// fences. A policy provides:
//   template <class T> using atomic;  // load/store/exchange/compare_exchange/fetch_*
//                                     // taking std::memory_order arguments
//   using mutex;                      // lock()/unlock()
//   static bool wait_until(atomic<uint32_t>&, uint32_t expected, uint64_t deadline);
//                                     // block while it holds expected, until the
//                                     // deadline (deadline.hpp; may return spuriously);
//                                     // false only when the deadline passed
//   static void wake_one(atomic<uint32_t>&);                 // wake one thread blocked in wait
//   static void full_fence();         // a sequentially consistent fence
//   static void yield();              // give the CPU away for a moment
//   static constexpr Mutant kMutant;  // Mutant::kNone outside the model-checking tests
// and may provide `static constexpr uint32_t kRoundsUntilSleepy` to shorten
// the idle phase (the model checker does, to keep schedules short), and
// `static void *allocate(size_t)` / `static void deallocate(void *)` for the
// deque's buffers (the model checker's allocator detects reads of freed ones).
#pragma once

#include <atomic>
#include <mutex>
#include <sched.h>

#include "fence.hpp"
#include "futex.hpp"
#if defined(BLZ_CHAOS)
#include "chaos.hpp"
#endif

namespace blz {

// Deliberately broken variants of the protocol, compiled only by the
// model-checking tests (tests/relacy) to prove that each check can fail.
// Every switch is an `if constexpr` on the policy's kMutant; the runtime's
// policy selects kNone, so the runtime's code is exactly the correct one.
enum class Mutant {
    kNone,
    kNoInjectFence,         // Sleep::new_shared_jobs without its fence
    kNoSleepFence,          // Sleep::sleep without the fence before the final check
    kJecSavedBeforeChange,  // a sleepy worker remembers the JEC before its own change
    kBlitzJecDirection,     // the sleepy worker also increments only when even
    kSleeperDecrements,     // the woken worker decrements `sleeping`, not its waker
    kSlotReadAfterCas,      // a thief reads the slot after its CAS
    kFreeRetiredBuffer,     // grow frees the old buffer at once
    kRelaxedPublish,        // Deque::publish stores split_ relaxed, not release
    kNoPublicPopFence,      // Deque::pop_public without its fence
    kLatchIgnoresSleepy,    // Sleep::sleep blocks although fall_asleep() failed
    kSpawnCountsOnlyTask,   // submit_admitted (spawn_task) gives the call no unit of its own
    kNoPinOnLatchSet,       // tests/relacy's setter from outside a pool calls set_and_wake_worker without a pin
    kChecksOnlyInjector,    // shared_jobs_wait (Registry::has_shared_jobs) looks at the injectors only
    kTimeoutWithoutMutex,   // Sleep::give_up_sleep reads and clears `blocked` without the mutex
    kNoForkRequest,         // ForkStack::request does not set the bit (a thief's request lost)
    kPromoteWithoutPost,    // promote_forks publishes its jobs without posting them (a lost announcement)
    kPopIgnoresPromoted,    // ForkStack::pop_pending pops a promoted frame as if pending (promotion vs the owner's return)
    kJoinSkipsStolenFrame,  // join_promoted returns while a thief runs the frame (a thief reads it after its owner moved on)
    kIsolatedWakeNoFence,   // Sleep::wake_isolated reads the waiter's word without its fence (a lost isolated wake-up)
    kSpawnerHoldsNoCount,   // DependencyCount: the spawner counts each predecessor as it registers it, without a hold
    kSpareRetiresOnStaleCount,  // SpareCounts::may_retire decides on counts read before the spare lock
};

// The runtime's policy. In the chaos build (BLZ_CHAOS, lib/chaos.hpp) the
// same types with a random pause around every operation; otherwise the
// standard ones, unchanged.
struct StdSync {
#if defined(BLZ_CHAOS)
    template <class T>
    using atomic = chaos::Atomic<T>;
    using mutex = chaos::Mutex;

    static void full_fence() noexcept {
        chaos::Around pause;
        blz::full_fence();
    }
    static bool wait_until(atomic<uint32_t> &word, uint32_t expected, uint64_t deadline) noexcept {
        chaos::Around pause;
        return futex_wait_until(word.underlying(), expected, deadline);
    }
    static void wake_one(atomic<uint32_t> &word) noexcept {
        chaos::Around pause;
        futex_wake_one(word.underlying());
    }
#else
    template <class T>
    using atomic = std::atomic<T>;
    using mutex = std::mutex;

    static void full_fence() noexcept { blz::full_fence(); }
    static bool wait_until(std::atomic<uint32_t> &word, uint32_t expected, uint64_t deadline) noexcept {
        return futex_wait_until(word, expected, deadline);
    }
    static void wake_one(std::atomic<uint32_t> &word) noexcept { futex_wake_one(word); }
#endif
    static void yield() noexcept { sched_yield(); }
    static constexpr Mutant kMutant = Mutant::kNone;
};

// Keeps a value alone on its cache line(s) so that writers of neighbours
// do not steal the line from its readers.
inline constexpr std::size_t kCacheLine = 64;

}  // namespace blz
