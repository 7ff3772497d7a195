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

#include "futex.hpp"

namespace blz {

class Parker {
public:
    // Blocks until unpark() has been called.
    void park() {
        // acquire: pairs with unpark's release, so what the setter did before
        // setting the latch is visible here.
        while (token_.load(std::memory_order_acquire) == 0) futex_wait(token_, 0);
    }

    void unpark() {
        token_.store(1, std::memory_order_release);  // release: see park()
        futex_wake_one(token_);
    }

private:
    std::atomic<uint32_t> token_{0};
};

}  // namespace blz
