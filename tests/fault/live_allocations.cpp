// Replaces the global operator new and delete of a test program (and so of
// the libblitz it uses, which allocates only through them) by versions that
// count the blocks alive, for exact leak checks: blz_test::live_allocations().
// Linked into the fault tests that need it; the blocks come from malloc, so
// LeakSanitizer and valgrind still see every one of them.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <new>

#include "live_allocations.hpp"

// clang links its sanitizers' own operator new and delete statically into
// every executable (g++ uses a shared runtime, which this file overrides),
// so two definitions would not link: in clang's ASan and TSan builds
// nothing is replaced and nothing is counted (LeakSanitizer counts there).
#if defined(__clang__) && defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define BLZ_TEST_NO_COUNTING 1
#endif
#endif

#if defined(BLZ_TEST_NO_COUNTING)

bool blz_test::allocations_counted() { return false; }
int64_t blz_test::live_allocations() { return 0; }

#else

namespace {

std::atomic<int64_t> g_live{0};

void *allocate(std::size_t size, std::size_t alignment) {
    if (size == 0) size = 1;
    void *p = nullptr;
    if (alignment <= alignof(std::max_align_t)) {
        p = std::malloc(size);
    } else if (posix_memalign(&p, alignment, size) != 0) {
        p = nullptr;
    }
    // relaxed: a count; the test reads it after joining the threads that allocate.
    if (p != nullptr) g_live.fetch_add(1, std::memory_order_relaxed);
    return p;
}

void release(void *p) {
    if (p == nullptr) return;
    g_live.fetch_sub(1, std::memory_order_relaxed);  // relaxed: as above
    std::free(p);
}

void *allocate_or_throw(std::size_t size, std::size_t alignment) {
    void *p = allocate(size, alignment);
    if (p == nullptr) throw std::bad_alloc();
    return p;
}

constexpr std::size_t kDefault = alignof(std::max_align_t);

}  // namespace

bool blz_test::allocations_counted() { return true; }
int64_t blz_test::live_allocations() { return g_live.load(std::memory_order_relaxed); }

void *operator new(std::size_t n) { return allocate_or_throw(n, kDefault); }
void *operator new[](std::size_t n) { return allocate_or_throw(n, kDefault); }
void *operator new(std::size_t n, const std::nothrow_t &) noexcept { return allocate(n, kDefault); }
void *operator new[](std::size_t n, const std::nothrow_t &) noexcept { return allocate(n, kDefault); }
void *operator new(std::size_t n, std::align_val_t a) { return allocate_or_throw(n, static_cast<std::size_t>(a)); }
void *operator new[](std::size_t n, std::align_val_t a) { return allocate_or_throw(n, static_cast<std::size_t>(a)); }
void *operator new(std::size_t n, std::align_val_t a, const std::nothrow_t &) noexcept {
    return allocate(n, static_cast<std::size_t>(a));
}
void *operator new[](std::size_t n, std::align_val_t a, const std::nothrow_t &) noexcept {
    return allocate(n, static_cast<std::size_t>(a));
}

void operator delete(void *p) noexcept { release(p); }
void operator delete[](void *p) noexcept { release(p); }
void operator delete(void *p, std::size_t) noexcept { release(p); }
void operator delete[](void *p, std::size_t) noexcept { release(p); }
void operator delete(void *p, const std::nothrow_t &) noexcept { release(p); }
void operator delete[](void *p, const std::nothrow_t &) noexcept { release(p); }
void operator delete(void *p, std::align_val_t) noexcept { release(p); }
void operator delete[](void *p, std::align_val_t) noexcept { release(p); }
void operator delete(void *p, std::size_t, std::align_val_t) noexcept { release(p); }
void operator delete[](void *p, std::size_t, std::align_val_t) noexcept { release(p); }
void operator delete(void *p, std::align_val_t, const std::nothrow_t &) noexcept { release(p); }
void operator delete[](void *p, std::align_val_t, const std::nothrow_t &) noexcept { release(p); }

#endif  // BLZ_TEST_NO_COUNTING
