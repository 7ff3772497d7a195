// The one place where the protocol's full (sequentially consistent) fences
// come from. By default libatomic_ops' AO_nop_full; with the meson option
// fence=std, std::atomic_thread_fence(seq_cst). docs/fences.md gives what each
// compiles to and costs on this machine with g++ and clang++.
//
// ThreadSanitizer builds (detected from the compiler's own macros, so a
// plain `meson setup -Db_sanitize=thread` needs nothing else) replace the
// fence by a seq_cst read-modify-write of one process-wide atomic. TSan
// does not model standalone fences (AO_nop_full is inline assembly it never
// sees; g++ rejects atomic_thread_fence with -Wtsan), so without this it
// would miss the ordering the fences give. TSan models the RMW as an
// acquire and a release on one object: every two such "fences" are ordered
// in happens-before, which is at least what two seq_cst fences give the
// store-buffering pairs of docs/protocol.md (it is stronger, so TSan can
// only miss, never invent, a race that depends on a fence). On x86 the RMW
// is a locked instruction, a full barrier for the hardware as well.
#pragma once

#if defined(__SANITIZE_THREAD__)
#define BLZ_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define BLZ_TSAN 1
#endif
#endif

#if defined(BLZ_TSAN) || defined(BLZ_FENCE_STD)
#include <atomic>
#else
#include <atomic_ops.h>
#endif

namespace blz {

#if defined(BLZ_TSAN)
// The object every fence of a TSan build synchronizes through.
inline std::atomic<unsigned> g_tsan_fence{0};
#endif

inline void full_fence() noexcept {
#if defined(BLZ_TSAN)
    // seq_cst RMW: TSan's acquire + release in place of the fence (see above).
    g_tsan_fence.fetch_add(0, std::memory_order_seq_cst);
#elif defined(BLZ_FENCE_STD)
    std::atomic_thread_fence(std::memory_order_seq_cst);
#else
    AO_nop_full();
#endif
}

}  // namespace blz
