// lifetime_checks' operator delete: frees late, and poisons what it frees.
//
// A mutant that leaves a pointer to freed memory behind is caught when the
// runtime reads through it; whether that read faults depends on what the
// allocator wrote into the freed block (a free-list link that points into
// the heap faults nowhere) and on MALLOC_PERTURB_, which meson sets at
// random. Here every block given back to operator delete is first filled
// with 0xDB (an address that always faults) and kept out of the allocator
// for the next kQuarantine frees, so such a read faults every time.
//
// Only the unaligned forms are replaced: libstdc++'s operator new takes
// them from malloc, so free() gives them back; aligned blocks keep
// libstdc++'s own pair. No scenario forks while another thread deletes
// (each runs in a child the single-threaded parent forks), so the mutex
// is never copied held.
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <malloc.h>
#include <mutex>
#include <new>

namespace {

constexpr std::size_t kQuarantine = std::size_t{1} << 12;
constexpr unsigned char kPoison = 0xDB;

std::mutex g_mutex;
void *g_ring[kQuarantine];
std::size_t g_next = 0;

void quarantine(void *block) noexcept {
    if (block == nullptr) return;
    std::memset(block, kPoison, malloc_usable_size(block));
    void *evicted = nullptr;
    {
        std::lock_guard<std::mutex> lock(g_mutex);
        evicted = g_ring[g_next];
        g_ring[g_next] = block;
        g_next = (g_next + 1) % kQuarantine;
    }
    std::free(evicted);
}

}  // namespace

void operator delete(void *block) noexcept { quarantine(block); }
void operator delete[](void *block) noexcept { quarantine(block); }
void operator delete(void *block, std::size_t) noexcept { quarantine(block); }
void operator delete[](void *block, std::size_t) noexcept { quarantine(block); }
void operator delete(void *block, const std::nothrow_t &) noexcept { quarantine(block); }
void operator delete[](void *block, const std::nothrow_t &) noexcept { quarantine(block); }
