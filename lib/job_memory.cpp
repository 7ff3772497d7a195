#include "job_memory.hpp"

#include <atomic>
#include <new>
#include <pthread.h>
#include <type_traits>

#include "fault.hpp"
#include "task.hpp"

namespace blz {

namespace {

constexpr std::size_t kBlockSize = sizeof(SpawnedJob);
static_assert(kBlockSize >= sizeof(FreeBlock), "a free block holds its link");

// The blocks one thread holds for its next spawns: whole stacks taken from
// a recycler (as many as that pool had in flight at its peak, no more), and
// blocks of tasks this thread joined, of which it keeps a bounded number.
constexpr std::size_t kJoinedBlocksKept = 1024;

// Trivially destructible, so that it registers no C++ TLS destructor: glibc
// allocates for that registration at a thread's first use of such an
// object and treats the allocation's failure as fatal, which turned a
// thread's first spawn under memory pressure into an abort instead of
// BLZ_ENOMEM. The blocks are freed at thread exit by a pthread key's
// destructor instead, whose registration reports failure as a status.
struct ThreadCache {
    FreeBlock *recycled;
    FreeBlock *joined;
    std::size_t joined_count;
    bool registered;  // the key's destructor will free this thread's blocks
};
static_assert(std::is_trivially_destructible_v<ThreadCache>);

constinit thread_local ThreadCache t_cache __attribute__((tls_model("initial-exec"))) = {};

FreeBlock *pop(FreeBlock *&list) {
    FreeBlock *block = list;
    if (block != nullptr) list = block->next;
    return block;
}

void free_list(FreeBlock *list) {
    while (FreeBlock *block = pop(list)) {
        unpoison_block(block);
        ::operator delete(block, kBlockSize);
    }
}

// At thread exit (the key's destructor), after the thread's C++ thread_local
// destructors, which may still spawn. The cache is left empty and valid:
// a pthread key destructor that runs after this one may spawn again, and
// registers the cache again, so that glibc calls this once more (up to
// PTHREAD_DESTRUCTOR_ITERATIONS rounds; blocks cached after the last are lost).
void free_thread_cache(void *) {
    ThreadCache &cache = t_cache;
    free_list(cache.recycled);
    free_list(cache.joined);
    if (BLZ_FAULT_MUTANT(kCacheKeepsFreedLists)) return;
    cache = ThreadCache{};
}

// The key, made when the library is loaded and deleted when it is unloaded
// (or at process exit): a key whose destructor outlived the library's code
// would be called into unmapped memory. Threads that end after that keep
// their blocks (the process is ending) and threads that have not cached yet
// cache nothing. Plain globals and functions rather than an object with a
// destructor: other threads may still spawn while the process exits.
pthread_key_t g_cache_key;
std::atomic<bool> g_cache_key_made{false};

[[gnu::constructor]] void make_cache_key() {
    // relaxed: loading the library happens before any thread uses it.
    g_cache_key_made.store(pthread_key_create(&g_cache_key, &free_thread_cache) == 0, std::memory_order_relaxed);
}

[[gnu::destructor]] void delete_cache_key() {
    // relaxed: a thread that still reads true calls pthread_setspecific on
    // a deleted key, which fails (EINVAL): it then does not cache.
    if (g_cache_key_made.exchange(false, std::memory_order_relaxed)) pthread_key_delete(g_cache_key);
}

// Whether the calling thread may keep blocks in `cache`: only once the
// key's destructor will free them. False when the key or its slot for this
// thread could not be made (pthread_setspecific: ENOMEM).
bool cache_registered(ThreadCache &cache) {
    if (cache.registered) return true;
    if (!g_cache_key_made.load(std::memory_order_relaxed) || pthread_setspecific(g_cache_key, &cache) != 0) {
        return false;
    }
    cache.registered = true;
    return true;
}

#if defined(BLZ_FAULT_INJECTION)
// The mutant kCacheTlsDestructor: a C++ thread_local with a destructor,
// used at each thread's first spawn as the cache used to be.
struct TlsDestructorProbe {
    bool used = false;
    ~TlsDestructorProbe() {}  // user-provided: glibc must register it
};
thread_local TlsDestructorProbe t_probe;
#endif

ThreadCache &thread_cache() {
#if defined(BLZ_FAULT_INJECTION)
    if (BLZ_FAULT_MUTANT(kCacheTlsDestructor)) t_probe.used = true;
#endif
    return t_cache;
}

}  // namespace

#if defined(BLZ_FAULT_INJECTION)
bool fault::thread_cache_empty() { return t_cache.recycled == nullptr && t_cache.joined == nullptr; }
#endif

JobRecycler::~JobRecycler() { free_list(head_.load(std::memory_order_relaxed)); }

#if defined(BLZ_POISON_FREE_BLOCKS)
void poison_free_block(FreeBlock *block) {
    ASAN_POISON_MEMORY_REGION(reinterpret_cast<char *>(block) + sizeof(FreeBlock), kBlockSize - sizeof(FreeBlock));
}
void unpoison_block(void *block) { ASAN_UNPOISON_MEMORY_REGION(block, kBlockSize); }
#endif

void *allocate_job_block(JobRecycler &recycler) {
    ThreadCache &cache = thread_cache();
    if (cache.recycled == nullptr && cache_registered(cache)) cache.recycled = recycler.take_all();
    FreeBlock *block = pop(cache.recycled);
    if (block == nullptr && (block = pop(cache.joined)) != nullptr) --cache.joined_count;
    if (block == nullptr) return ::operator new(kBlockSize, std::nothrow);
    unpoison_block(block);
    return block;
}

void release_job_block_here(void *block) {
    ThreadCache &cache = thread_cache();
    if (cache.joined_count == kJoinedBlocksKept || !cache_registered(cache)) {
        ::operator delete(block, kBlockSize);
        return;
    }
    auto *node = static_cast<FreeBlock *>(block);
    node->next = cache.joined;
    poison_free_block(node);
    cache.joined = node;
    ++cache.joined_count;
}

}  // namespace blz
