// Leak and thread counts for the fault tests (tests/fault).
#pragma once

#include <chrono>
#include <cstdint>
#include <dirent.h>
#include <thread>

namespace blz_test {

// Blocks allocated by operator new and not yet deleted, in the whole
// process (live_allocations.cpp replaces the global operators); always 0
// where allocations_counted() is false (clang's sanitizer builds).
int64_t live_allocations();
bool allocations_counted();

// The threads of this process now (the entries of /proc/self/task).
inline int threads_alive() {
    DIR *dir = opendir("/proc/self/task");
    if (dir == nullptr) return -1;
    int n = 0;
    while (dirent *entry = readdir(dir)) n += entry->d_name[0] != '.';
    closedir(dir);
    return n;
}

// Waits until the thread count is back to `baseline` (or below): a joined
// thread leaves /proc a moment after pthread_join returns (the kernel wakes
// the joiner before it removes the thread). False if not within 10 s.
inline bool threads_back_to(int baseline) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (threads_alive() > baseline) {
        if (std::chrono::steady_clock::now() > deadline) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return true;
}

}  // namespace blz_test
