// The chaos build (meson setup -Dchaos=true, which defines BLZ_CHAOS): the
// runtime's synchronisation policy with a random pause at every step.
//
// ChaosSync has StdSync's members, but each atomic operation, lock, unlock,
// futex wait or wake and fence of the classes written against the policy (the deque,
// the injector, the counters, the core latch, the sleep protocol and the
// pool's admission word) is
// preceded and followed by a chaos point: usually nothing, sometimes a
// sched_yield, now and then a sleep of a few microseconds. This stretches
// the windows between the protocol's steps far beyond what a normal run
// shows, so that interleavings a normal run almost never reaches (a poster
// between its push and its fence, a sleeper between its registration and
// its final check, a thief between reading its slot and its CAS) happen
// thousands of times in a stress test (tests/fault/chaos_sleep.cpp).
// Without BLZ_CHAOS this header is not included and nothing changes.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <sched.h>
#include <time.h>

#include "fence.hpp"

namespace blz::chaos {

// One chaos point. Per thread, a xorshift generator seeded from the
// generator's own address (distinct per thread): no shared state, so the
// chaos adds no synchronisation of its own.
inline void point() noexcept {
    thread_local uint64_t state = 0;
    if (state == 0) state = reinterpret_cast<uintptr_t>(&state) | 1;
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    const uint64_t r = state >> 32;
    if ((r & 7) == 0) {  // 1 in 8: give the CPU away
        sched_yield();
    } else if ((r & 0x3FF) == 1) {  // 1 in 1024: sleep 1-64 µs
        timespec pause{0, static_cast<long>(1000 * (1 + ((r >> 10) & 63)))};
        nanosleep(&pause, nullptr);
    }
}

// RAII: a chaos point before and after an operation.
struct Around {
    Around() noexcept { point(); }
    ~Around() { point(); }
    Around(const Around &) = delete;
    Around &operator=(const Around &) = delete;
};

// std::atomic<T> with a chaos point around every operation the core uses.
template <class T>
class Atomic {
public:
    Atomic() noexcept = default;
    constexpr Atomic(T value) noexcept : value_(value) {}  // NOLINT: mirrors std::atomic
    Atomic(const Atomic &) = delete;
    Atomic &operator=(const Atomic &) = delete;

    T load(std::memory_order order = std::memory_order_seq_cst) const noexcept {
        Around chaos;
        return value_.load(order);
    }
    void store(T value, std::memory_order order = std::memory_order_seq_cst) noexcept {
        Around chaos;
        value_.store(value, order);
    }
    T exchange(T value, std::memory_order order = std::memory_order_seq_cst) noexcept {
        Around chaos;
        return value_.exchange(value, order);
    }
    bool compare_exchange_strong(T &expected, T desired, std::memory_order success,
                                 std::memory_order failure) noexcept {
        Around chaos;
        return value_.compare_exchange_strong(expected, desired, success, failure);
    }
    bool compare_exchange_weak(T &expected, T desired, std::memory_order success,
                               std::memory_order failure) noexcept {
        Around chaos;
        return value_.compare_exchange_weak(expected, desired, success, failure);
    }
    T fetch_add(T value, std::memory_order order = std::memory_order_seq_cst) noexcept {
        Around chaos;
        return value_.fetch_add(value, order);
    }
    T fetch_sub(T value, std::memory_order order = std::memory_order_seq_cst) noexcept {
        Around chaos;
        return value_.fetch_sub(value, order);
    }
    T fetch_or(T value, std::memory_order order = std::memory_order_seq_cst) noexcept {
        Around chaos;
        return value_.fetch_or(value, order);
    }

    // The word itself, for the futex calls of the sleep protocol.
    std::atomic<T> &underlying() noexcept { return value_; }

private:
    std::atomic<T> value_{};
};

class Mutex {
public:
    void lock() {
        Around chaos;
        mutex_.lock();
    }
    bool try_lock() {
        Around chaos;
        return mutex_.try_lock();
    }
    void unlock() {
        Around chaos;
        mutex_.unlock();
    }

private:
    std::mutex mutex_;
};

}  // namespace blz::chaos
