// The synchronisation policy the core classes are written against.
//
// Deque, AtomicCounters, CoreLatch and Sleep take a `Sync` template
// parameter instead of naming std::atomic directly, so that a model checker
// (Relacy) can instantiate the same code with its own atomics, mutexes and
// fences. A policy provides:
//   template <class T> using atomic;  // load/store/exchange/compare_exchange/fetch_*
//                                     // taking std::memory_order arguments
//   using mutex;                      // lock()/unlock()
//   using condvar;                    // wait(std::unique_lock<mutex>&), notify_one()
//   static void full_fence();         // a sequentially consistent fence
//   static void yield();              // give the CPU away for a moment
#pragma once

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <sched.h>

#include "fence.hpp"

namespace blz {

struct StdSync {
    template <class T>
    using atomic = std::atomic<T>;
    using mutex = std::mutex;
    using condvar = std::condition_variable;

    static void full_fence() noexcept { blz::full_fence(); }
    static void yield() noexcept { sched_yield(); }
};

// Keeps a value alone on its cache line(s) so that writers of neighbours
// do not steal the line from its readers.
inline constexpr std::size_t kCacheLine = 64;

}  // namespace blz
