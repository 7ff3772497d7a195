// Deadlines for the bounded waits (blz_task_wait_for, blz_group_wait_for):
// absolute times on CLOCK_MONOTONIC in nanoseconds, so that a wait that
// blocks, wakes and blocks again keeps one end, and the wall clock's jumps
// do not move it.
#pragma once

#include <cstdint>
#include <ctime>

namespace blz {

// The deadline of a wait without one: never reached.
inline constexpr uint64_t kNoDeadline = UINT64_MAX;

inline uint64_t monotonic_now_ns() {
    timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return static_cast<uint64_t>(now.tv_sec) * 1000000000u + static_cast<uint64_t>(now.tv_nsec);
}

// `timeout_ns` from now; UINT64_MAX (or a sum that would overflow) waits for ever.
inline uint64_t deadline_after(uint64_t timeout_ns) {
    if (timeout_ns == kNoDeadline) return kNoDeadline;
    const uint64_t now = monotonic_now_ns();
    return timeout_ns >= kNoDeadline - now ? kNoDeadline : now + timeout_ns;
}

inline bool deadline_passed(uint64_t deadline) {
    return deadline != kNoDeadline && monotonic_now_ns() >= deadline;
}

}  // namespace blz
