#include "job_memory.hpp"

#include <new>

#include "task.hpp"

namespace blz {

namespace {

constexpr std::size_t kBlockSize = sizeof(SpawnedJob);
static_assert(kBlockSize >= sizeof(FreeBlock), "a free block holds its link");

// The blocks one thread holds for its next spawns: whole stacks taken from
// a recycler (as many as that pool had in flight at its peak, no more), and
// blocks of tasks this thread joined, of which it keeps a bounded number.
constexpr std::size_t kJoinedBlocksKept = 1024;

struct ThreadCache {
    FreeBlock *recycled = nullptr;
    FreeBlock *joined = nullptr;
    std::size_t joined_count = 0;

    ThreadCache() = default;
    ThreadCache(const ThreadCache &) = delete;
    ThreadCache &operator=(const ThreadCache &) = delete;
    ~ThreadCache() {
        free_list(recycled);
        free_list(joined);
    }

    static FreeBlock *pop(FreeBlock *&list) {
        FreeBlock *block = list;
        if (block != nullptr) list = block->next;
        return block;
    }

    static void free_list(FreeBlock *list) {
        while (FreeBlock *block = pop(list)) ::operator delete(block, kBlockSize);
    }
};

thread_local ThreadCache t_cache;

}  // namespace

JobRecycler::~JobRecycler() { ThreadCache::free_list(head_.load(std::memory_order_relaxed)); }

void *allocate_job_block(JobRecycler &recycler) {
    ThreadCache &cache = t_cache;
    if (cache.recycled == nullptr) cache.recycled = recycler.take_all();
    if (FreeBlock *block = ThreadCache::pop(cache.recycled)) return block;
    if (FreeBlock *block = ThreadCache::pop(cache.joined)) {
        --cache.joined_count;
        return block;
    }
    return ::operator new(kBlockSize, std::nothrow);
}

void release_job_block_here(void *block) {
    ThreadCache &cache = t_cache;
    if (cache.joined_count == kJoinedBlocksKept) {
        ::operator delete(block, kBlockSize);
        return;
    }
    auto *node = static_cast<FreeBlock *>(block);
    node->next = cache.joined;
    cache.joined = node;
    ++cache.joined_count;
}

}  // namespace blz
