// The one place where the protocol's full (sequentially consistent) fences
// come from. By default libatomic_ops' AO_nop_full; with the meson option
// fence=std, std::atomic_thread_fence(seq_cst). docs/fences.md gives what each
// compiles to and costs on this machine with g++ and clang++.
#pragma once

#if defined(BLZ_FENCE_STD)
#include <atomic>
#else
#include <atomic_ops.h>
#endif

namespace blz {

inline void full_fence() noexcept {
#if defined(BLZ_FENCE_STD)
    std::atomic_thread_fence(std::memory_order_seq_cst);
#else
    AO_nop_full();
#endif
}

}  // namespace blz
