// Memory for spawned jobs, recycled from the threads that free it to the
// threads that allocate it.
//
// A task spawned from outside a pool is allocated by the spawning thread and
// freed by the worker that ran it. With malloc that is the allocator's slow
// path on both sides (the spawner's per-thread cache never refills; the
// worker's overflows), and in a stream of spawns it was a fifth of the
// CPU time. Here a worker gives the block back to its pool's recycler, a
// lock-free stack; a spawner whose own cache is empty takes the recycler's
// whole stack at once. Taking everything with one exchange (never one node
// at a time) is what makes the stack free of ABA: a pop never reads a
// `next` that another pop could have changed.
#pragma once

#include <atomic>
#include <cstddef>

#if defined(__SANITIZE_ADDRESS__)
#define BLZ_POISON_FREE_BLOCKS 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define BLZ_POISON_FREE_BLOCKS 1
#endif
#endif
#if defined(BLZ_POISON_FREE_BLOCKS)
#include <sanitizer/asan_interface.h>
#endif

namespace blz {

// A free block, linked through its first word.
struct FreeBlock {
    FreeBlock *next;
};

// Under AddressSanitizer a free block is poisoned but for its link, so
// that a task touched after its owner freed it is reported although its
// memory went to a cache, not back to malloc. Poisoned before the block is
// published (a taker may unpoison it at once), unpoisoned when handed out.
// No-ops in other builds, inline there: a task's free and its block's
// next spawn call neither.
#if defined(BLZ_POISON_FREE_BLOCKS)
void poison_free_block(FreeBlock *block);
void unpoison_block(void *block);
#else
inline void poison_free_block(FreeBlock *) {}
inline void unpoison_block(void *) {}
#endif

// One per pool: blocks its workers freed, waiting for a spawner.
class JobRecycler {
public:
    JobRecycler() = default;
    JobRecycler(const JobRecycler &) = delete;
    JobRecycler &operator=(const JobRecycler &) = delete;
    ~JobRecycler();  // frees what is left: no thread uses the pool any more

    // Any thread.
    void give(void *block) {
        auto *node = static_cast<FreeBlock *>(block);
        poison_free_block(node);
        // relaxed: a retry reloads it; the CAS below publishes the link.
        FreeBlock *head = head_.load(std::memory_order_relaxed);
        do {
            node->next = head;
            // release: the taker that acquires the head sees node->next.
        } while (!head_.compare_exchange_weak(head, node, std::memory_order_release,
                                              std::memory_order_relaxed));
    }

    // Any thread: the whole stack (nullptr when empty).
    FreeBlock *take_all() {
        // relaxed peek first: an empty recycler costs no write to its line.
        if (head_.load(std::memory_order_relaxed) == nullptr) return nullptr;
        // acquire: pairs with give()'s release, so every link is visible.
        return head_.exchange(nullptr, std::memory_order_acquire);
    }

private:
    std::atomic<FreeBlock *> head_{nullptr};
};

// Blocks the size of a spawned job (SpawnedJob).
// From the calling thread's cache, else from what `recycler` holds (all of
// it moves to the thread's cache), else from the heap; nullptr when out of
// memory. The memory a thread holds this way is at most what the pools it
// spawned into had in flight at their peak; it is freed when the thread ends.
void *allocate_job_block(JobRecycler &recycler);
// Into the calling thread's cache (it keeps a bounded number), else back
// to the heap. For a thread that may outlive the pool (a task's joiner).
void release_job_block_here(void *block);

}  // namespace blz
