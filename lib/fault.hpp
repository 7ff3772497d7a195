// Fault injection: pause points and lifetime mutants for the tests that
// hold a dangerous interleaving open (tests/fault). Compiled in only when
// the library is built with BLZ_FAULT_INJECTION, which tests/fault/meson.build
// does for a static copy of the library that only the fault tests link;
// the shipped libblitz.so has none of it (every macro below is a no-op).
//
// A pause point calls the hook the test installed, with the point and the
// object it concerns (a Registry*): the hook may record the event, or block
// the calling thread until the test has made the other threads do what the
// interleaving needs. A lifetime mutant puts back one defect that issue 13
// fixed, so that the test which reproduces the defect can show that it
// still catches it (tests/fault/lifetime_checks.cpp, docs/verification.md).
#pragma once

#if defined(BLZ_FAULT_INJECTION)

#include <atomic>
#include <cstdint>

namespace blz::fault {

enum class Point {
    kEntered,              // Registry::enter decided (admitted or refused)
    kInjectedBeforePost,   // Registry::inject: the job is queued, the post not yet made
    kDestroyWaitsForWork,  // destroy found accepted work unfinished and is about to wait
    kLatchSetBeforeWake,   // Latch::set found its waiter asleep and is about to wake it
    kLatchSetBeforeUnpin,  // Latch::set is done with the waiter's pool and about to unpin it
    kRegistryFreed,        // a Registry's memory is about to be freed
    kWaiterInstalled,      // a task or group waiter put its latch where the finishing task will find it
    kTimedWaitExpired,     // a bounded wait's deadline passed; it has yet to learn whether its latch was taken
    kTaskTookLatch,        // a finishing task took its joiner's latch and is about to set it
    kGroupTookWaiters,     // a group's last task took the waiter list and is about to set the latches
    kTraceWriteHoldsBuffer,  // a trace writer loaded its buffer and is about to append (registry: nullptr)
    kThiefTookJob,         // a thief's steal succeeded; it has yet to run the job (a promoted fork: on its owner's stack)
    kTaskFinishedBeforeLateDone,  // a task with BLZ_SPAWN_DONE_AFTER_FINISH finished; its on_done has yet to run
    kEventSetBeforeNotify, // an event's set won its CAS and has yet to wake the waiters (registry: the Event)
    kEventFreed,           // an event's memory is about to be freed (registry: the Event)
    kEventTookWaiters,     // an event's set (or destroy) took its waiter list and is about to set the latches (registry: the Event)
    kSharedLastGiveUp,     // the process pool's last give-up took it out of reach and has yet to destroy it
    kEdgeRegistered,       // a spawn registered one predecessor of its task and may register more
    kReleasingSuccessors,  // a finishing task is about to release the tasks that run after it
    kSpareRetiring,        // an idle spare is about to decide, under the spare lock, whether it retires
    kSpareExiting,         // a retired spare ran its stop hook and is about to free its slot (or take it again)
};

using Hook = void (*)(Point point, const void *registry);

// The test's hook, or nullptr. Set before the threads it concerns start.
extern std::atomic<Hook> g_hook;

inline void reach(Point point, const void *registry) {
    // acquire: the test stored its hook's state before the hook itself.
    if (Hook hook = g_hook.load(std::memory_order_acquire)) hook(point, registry);
}

// The defects of issue 13 (and the lifetime rules of issue 14), one at a time.
enum class Mutant {
    kNone,
    kSpawnCountsOnlyTask,   // an outside spawn's admission ends with its task, not with the call
    kNoPinOnLatchSet,       // Latch::set wakes a waiter of another pool without pinning that pool
    kCacheKeepsFreedLists,  // the job-block cache's thread-exit cleanup leaves its lists pointing at freed blocks
    kCacheTlsDestructor,    // the job-block cache is a C++ thread_local with a destructor
    kForcedUnwindEscapes,   // thread cancellation's unwind leaves a job through the runtime's frames
    kFixedCpuMask,          // the affinity mask is a fixed cpu_set_t (1024 CPUs at most)
    kCreateFailureDeletes,  // a pool whose worker failed to start is deleted, pins or not
    kTimedWaitForgetsLatch, // a bounded wait returns at its deadline although a task took its latch
    kTraceDetachSkipsWriters, // a trace stop frees the buffers without waiting out a write in progress
    kJoinSkipsStolenFrame,  // a join whose promoted half was stolen returns without waiting for the thief
    kLateDoneReadsTask,     // an on_done after the finish is read from the task, which its joiner may have freed
    kEventSetUnreferenced,  // an event's set holds no reference, so its waiter's destroy may free it under the set
    kSharedUnlinkedLate,    // the process pool's last give-up leaves it reachable by blz_pool_shared until its destroy returned
    kSharedDestroyedAtExit, // a static destructor destroys the process pool at exit, waiting for its tasks
    kSpawnerHoldsNoCount,   // a spawn with predecessors registers them without holding a count of its own
    kSuccessorsAfterFinish, // a finishing task releases its successors after handing itself to its joiner
    kSpareRetiresOnStaleCount, // a spare decides to retire on counts read before the spare lock, not under it
    kSpareExitIgnoresBlocked,  // a retired spare frees its slot although a blocked thread found no stand-in meanwhile
    kSettleOnlyAtExit,      // a worker hands back its ended tasks' units and blocks only when its thread ends
};

// Set by the test before it starts the scenario (relaxed reads: no order needed).
extern std::atomic<Mutant> g_mutant;

inline bool mutant(Mutant m) { return g_mutant.load(std::memory_order_relaxed) == m; }

// The index of the worker whose thread creation fails with EAGAIN, or -1.
extern std::atomic<int64_t> g_refuse_thread;

// Whether the calling thread's job-block cache holds no list (job_memory.cpp):
// after its thread-exit cleanup it must not, whatever it held before.
bool thread_cache_empty();

}  // namespace blz::fault

#define BLZ_FAULT_POINT(point, registry) ::blz::fault::reach(::blz::fault::Point::point, registry)
#define BLZ_FAULT_MUTANT(name) ::blz::fault::mutant(::blz::fault::Mutant::name)

#else

#define BLZ_FAULT_POINT(point, registry) ((void)0)
#define BLZ_FAULT_MUTANT(name) false

#endif
