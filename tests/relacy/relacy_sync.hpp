// RelacySync: the synchronisation policy (lib/sync.hpp) that instantiates
// libblitz's own Deque, AtomicCounters, CoreLatch, Sleep, Injector, Admission,
// the worker's idle loop (idle_loop.hpp) and Latch::set's wake-up with
// Relacy's atomics, mutexes, condition variables, fences and heap; the
// futex a sleeping worker blocks on is modelled by a mutex and a condition
// variable (below).
//
// Include order matters: the project's headers come first. relacy.hpp then
// defines macros (memory_order_relaxed, new, delete, ...) that would
// rewrite them; everything after it avoids those tokens (std::memory_order
// values are written as std::memory_order::relaxed and so on).
#pragma once

#include "admission.hpp"
#include "core_latch.hpp"
#include "counters.hpp"
#include "dependency_count.hpp"
#include "deque.hpp"
#include "fork_join.hpp"
#include "fork_stack.hpp"
#include "idle_loop.hpp"
#include "injector.hpp"
#include "publish.hpp"
#include "sleep.hpp"
#include "spares.hpp"

#include <relacy/relacy.hpp>

namespace blz_relacy {

inline rl::memory_order to_rl(std::memory_order order) {
    switch (order) {
        case std::memory_order::relaxed: return rl::mo_relaxed;
        case std::memory_order::consume: return rl::mo_consume;
        case std::memory_order::acquire: return rl::mo_acquire;
        case std::memory_order::release: return rl::mo_release;
        case std::memory_order::acq_rel: return rl::mo_acq_rel;
        default: return rl::mo_seq_cst;
    }
}

// `M` selects a mutant (blz::Mutant::kNone: the code as shipped). The idle
// phase is cut to no yielding rounds (kRoundsUntilSleepy = 0): a worker
// gets sleepy on its first fruitless round, searches once more and tries
// to sleep, so schedules stay short; the rounds only delay those steps.
template <blz::Mutant M>
struct RelacySync {
    static constexpr blz::Mutant kMutant = M;
    static constexpr uint32_t kRoundsUntilSleepy = 0;

    // Not copyable (rl::nocopy: `= delete` is rewritten by relacy.hpp's macros).
    template <class T>
    class atomic : rl::nocopy<> {
    public:
        atomic() { a_($).store(T{}, rl::mo_relaxed); }
        atomic(T value) { a_($).store(value, rl::mo_relaxed); }  // NOLINT: mirrors std::atomic

        T load(std::memory_order order = std::memory_order::seq_cst) const { return a_($).load(to_rl(order)); }
        void store(T value, std::memory_order order = std::memory_order::seq_cst) {
            a_($).store(value, to_rl(order));
        }
        T exchange(T value, std::memory_order order) { return a_($).exchange(value, to_rl(order)); }
        bool compare_exchange_strong(T &expected, T desired, std::memory_order success, std::memory_order failure) {
            return a_($).compare_exchange_strong(expected, desired, to_rl(success), to_rl(failure));
        }
        bool compare_exchange_weak(T &expected, T desired, std::memory_order success, std::memory_order failure) {
            return a_($).compare_exchange_weak(expected, desired, to_rl(success), to_rl(failure));
        }
        T fetch_add(T value, std::memory_order order) { return a_($).fetch_add(value, to_rl(order)); }
        T fetch_sub(T value, std::memory_order order) { return a_($).fetch_sub(value, to_rl(order)); }
        T fetch_or(T value, std::memory_order order) { return a_($).fetch_or(value, to_rl(order)); }
        T fetch_and(T value, std::memory_order order) { return a_($).fetch_and(value, to_rl(order)); }

        // The futex on this word (RelacySync::wait_until and wake_one). futex(2)
        // checks the value and blocks atomically, and a wake reaches a
        // thread that has checked: a waiter that checks under the mutex
        // and waits on the condition variable, and a waker that passes
        // through the mutex before it notifies, give the model the same
        // guarantee (the waker stored the new value before locking, so a
        // waiter that locks later sees it; one that locked earlier is
        // waiting and gets the notification).
        void futex_wait(T expected) {
            futex_mutex_.lock($);
            while (a_($).load(rl::mo_relaxed) == expected) futex_cv_.wait(futex_mutex_, $);
            futex_mutex_.unlock($);
        }
        void futex_wake_one() {
            futex_mutex_.lock($);
            futex_mutex_.unlock($);
            futex_cv_.notify_one($);
        }

    private:
        mutable rl::atomic<T> a_;
        rl::mutex futex_mutex_;
        rl::condition_variable futex_cv_;
    };

    class mutex {
    public:
        void lock() { m_.lock($); }
        void unlock() { m_.unlock($); }
        bool try_lock() { return m_.try_lock($); }

    private:
        rl::mutex m_;
    };

    // A wait with a deadline may time out at any point the model chooses,
    // without blocking: the checker explores both the timeout and the wake.
    static bool wait_until(atomic<uint32_t> &word, uint32_t expected, uint64_t deadline) {
        if (deadline != UINT64_MAX && rl::rand(2) == 0) return false;
        word.futex_wait(expected);
        return true;
    }
    static void wake_one(atomic<uint32_t> &word) { word.futex_wake_one(); }

    // Relacy's heap for the deque's buffers: it reports leaks at the end of
    // every execution, and a destroyed rl::atomic is marked, so a read
    // through a stale buffer pointer is reported as ACCESS TO FREED MEMORY.
    static void *allocate(std::size_t bytes) { return rl::rl_malloc(bytes, $); }
    static void deallocate(void *raw) { rl::rl_free(raw, $); }

    static void full_fence() { rl::atomic_thread_fence(rl::mo_seq_cst, $); }
    // Nothing: Relacy switches threads at every atomic operation anyway, and
    // its rl::yield also makes the yielding thread's next loads return the
    // newest values (a heuristic against livelocks in spin loops). The idle
    // rounds yield before the final check, so rl::yield would hide exactly
    // the stale reads that the fences must rule out.
    static void yield() {}
};

}  // namespace blz_relacy

// The fork stack's `requests` word in the model: Relacy's atomics cannot
// alias the record's plain field, so the word is an atomic of its own
// (fork_stack.hpp); the record's field stays unused.
template <blz::Mutant M>
struct blz::ForkRequestsWord<blz_relacy::RelacySync<M>> {
    typename blz_relacy::RelacySync<M>::template atomic<uint32_t> word;

    uint32_t load(uint32_t &, std::memory_order order) const { return word.load(order); }
    void fetch_or(uint32_t &, uint32_t bits, std::memory_order order) { word.fetch_or(bits, order); }
    void fetch_and(uint32_t &, uint32_t bits, std::memory_order order) { word.fetch_and(bits, order); }
};
