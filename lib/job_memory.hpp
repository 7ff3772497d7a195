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
#include <cstdint>

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
        give_chain(node, node);
    }

    // Any thread: blocks already poisoned, linked from `first` to `last`.
    void give_chain(FreeBlock *first, FreeBlock *last) {
        // relaxed: a retry reloads it; the CAS below publishes the links.
        FreeBlock *head = head_.load(std::memory_order_relaxed);
        do {
            last->next = head;
            // release: the taker that acquires the head sees every link of the chain.
        } while (!head_.compare_exchange_weak(head, first, std::memory_order_release,
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

// A worker's detached tasks' blocks on their way to its pool's recycler,
// handed over a batch at a time: one write to the recycler's shared line
// per kBlocks tasks instead of one per task (on 2 workers that line
// otherwise moves between their caches with every task that ends). Owned
// by one worker and touched by its thread only; it holds no job, only
// memory, so a block held here delays nothing but its reuse. Emptied when
// the worker stops running and before its thread leaves the slot
// (Worker::settle), so that the recycler (which the pool frees after
// joining its workers) gets every block.
class RecycleBatch {
public:
    static constexpr uint32_t kBlocks = 64;

    // The owner: `block` joins the batch; a full batch goes to `recycler`.
    void add(void *block, JobRecycler &recycler) {
        auto *node = static_cast<FreeBlock *>(block);
        poison_free_block(node);
        node->next = first_;
        if (first_ == nullptr) last_ = node;
        first_ = node;
        if (++count_ == kBlocks) flush(recycler);
    }

    // The owner: everything held goes to `recycler`.
    void flush(JobRecycler &recycler) {
        if (first_ == nullptr) return;
        recycler.give_chain(first_, last_);
        first_ = last_ = nullptr;
        count_ = 0;
    }

private:
    FreeBlock *first_ = nullptr;
    FreeBlock *last_ = nullptr;
    uint32_t count_ = 0;
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
