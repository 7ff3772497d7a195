// Blocking a thread on a 32-bit word, the way the kernel does it (futex(2)).
// The sleeping worker (Sleep) and the parked outside thread (Parker) block
// here, so that a wake-up costs one system call on each side and nothing
// else: no mutex to re-acquire after waking.
#pragma once

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <ctime>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace blz {

static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t), "a futex is a plain 32-bit word");

// Blocks while `word` holds `expected`; returns at once when it does not,
// and may return spuriously: callers re-check their condition in a loop.
inline void futex_wait(std::atomic<uint32_t> &word, uint32_t expected) {
    syscall(SYS_futex, &word, FUTEX_WAIT_PRIVATE, expected, nullptr, nullptr, 0);
}

// As futex_wait, until the absolute CLOCK_MONOTONIC time `deadline_ns`
// (deadline.hpp; kNoDeadline: no end). False only when the deadline passed.
inline bool futex_wait_until(std::atomic<uint32_t> &word, uint32_t expected, uint64_t deadline_ns) {
    if (deadline_ns == UINT64_MAX) {
        futex_wait(word, expected);
        return true;
    }
    timespec end{static_cast<time_t>(deadline_ns / 1000000000u), static_cast<long>(deadline_ns % 1000000000u)};
    // FUTEX_WAIT_BITSET takes an absolute time, on CLOCK_MONOTONIC unless
    // FUTEX_CLOCK_REALTIME is given: no recomputing after a spurious return.
    long rc = syscall(SYS_futex, &word, FUTEX_WAIT_BITSET_PRIVATE, expected, &end, nullptr, FUTEX_BITSET_MATCH_ANY);
    return !(rc == -1 && errno == ETIMEDOUT);
}

// Wakes one thread blocked on `word`, if any. Harmless on a word nobody
// waits on, even one whose memory was reused (at worst a spurious wake-up
// of some other futex user, which every user tolerates).
inline void futex_wake_one(std::atomic<uint32_t> &word) {
    syscall(SYS_futex, &word, FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
}

}  // namespace blz
