// Parker: how a thread outside the pool blocks until a latch it waits on is
// set. One token, a futex on it, no spinning.
//
// The setter's last access to the parker is the futex wake that follows
// its token store; the waiter may already have returned by then. A futex
// wake on memory that was reused is harmless (it can only cause a spurious
// wakeup elsewhere, which every futex user tolerates), so the parker can
// live on the waiter's stack.
#pragma once

#include <atomic>
#include <cstdint>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace blz {

class Parker {
public:
    // Blocks until unpark() has been called.
    void park() {
        // acquire: pairs with unpark's release, so what the setter did before
        // setting the latch is visible here.
        while (token_.load(std::memory_order_acquire) == 0) {
            syscall(SYS_futex, &token_, FUTEX_WAIT_PRIVATE, 0, nullptr, nullptr, 0);
        }
    }

    void unpark() {
        token_.store(1, std::memory_order_release);  // release: see park()
        syscall(SYS_futex, &token_, FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
    }

private:
    std::atomic<uint32_t> token_{0};
    static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t), "futex needs a plain 32-bit word");
};

}  // namespace blz
