// Unit tests of the spawned jobs' memory (lib/job_memory.hpp): the
// recycler hands back what workers give it, whole, and a spawner's thread
// reuses recycled and joined blocks before it asks the heap.
#include <catch2/catch.hpp>

#include <job_memory.hpp>
#include <task.hpp>

#include <memory>
#include <new>
#include <set>
#include <thread>
#include <vector>

namespace {

// Blocks of the real size, from the heap: the recycler poisons all of a
// block but its link under AddressSanitizer, so a smaller object would
// have its neighbours poisoned. Freed (unpoisoned first) at scope exit.
struct TestBlocks {
    explicit TestBlocks(std::size_t count) {
        for (std::size_t i = 0; i < count; ++i) blocks.push_back(::operator new(sizeof(blz::SpawnedJob)));
    }
    ~TestBlocks() {
        for (void *block : blocks) {
            blz::unpoison_block(block);
            ::operator delete(block);
        }
    }
    TestBlocks(const TestBlocks &) = delete;
    TestBlocks &operator=(const TestBlocks &) = delete;
    std::vector<void *> blocks;
};

// The blocks of a list, in order.
std::vector<void *> blocks_of(blz::FreeBlock *list) {
    std::vector<void *> out;
    for (; list != nullptr; list = list->next) out.push_back(list);
    return out;
}

}  // namespace

TEST_CASE("job memory: the recycler gives back everything, newest first, and is empty after", "[job_memory]") {
    blz::JobRecycler recycler;
    CHECK(recycler.take_all() == nullptr);
    TestBlocks storage(3);
    void *a = storage.blocks[0], *b = storage.blocks[1], *c = storage.blocks[2];
    recycler.give(a);
    recycler.give(b);
    recycler.give(c);
    CHECK(blocks_of(recycler.take_all()) == std::vector<void *>{c, b, a});
    CHECK(recycler.take_all() == nullptr);
}

TEST_CASE("job memory: recycled blocks are reused before the heap, joined ones too", "[job_memory]") {
    // In a thread of its own, so that its cache starts empty.
    std::thread([] {
        blz::JobRecycler recycler;
        void *first = blz::allocate_job_block(recycler);
        void *second = blz::allocate_job_block(recycler);
        REQUIRE(first != nullptr);
        REQUIRE(second != nullptr);
        CHECK(first != second);
        recycler.give(first);   // a worker ran it
        recycler.give(second);
        std::set<void *> again{blz::allocate_job_block(recycler), blz::allocate_job_block(recycler)};
        CHECK(again == std::set<void *>{first, second});
        CHECK(recycler.take_all() == nullptr);  // the spawner took the whole stack

        blz::release_job_block_here(first);  // this thread joined it
        CHECK(blz::allocate_job_block(recycler) == first);
        blz::release_job_block_here(first);
        blz::release_job_block_here(second);
    }).join();  // the thread's cache frees what it holds (LeakSanitizer/valgrind would see a leak)
}

TEST_CASE("job memory: a worker's batch reaches the recycler when full, and all of it when flushed",
          "[job_memory]") {
    constexpr uint32_t kFull = blz::RecycleBatch::kBlocks;
    TestBlocks storage(kFull + 3);
    blz::JobRecycler recycler;
    blz::RecycleBatch batch;
    for (uint32_t i = 0; i + 1 < kFull; ++i) batch.add(storage.blocks[i], recycler);
    CHECK(recycler.take_all() == nullptr);  // one short of a batch: held
    batch.add(storage.blocks[kFull - 1], recycler);
    // The whole batch at once, newest first, as single gives would have left it.
    std::vector<void *> expected(storage.blocks.rbegin() + 3, storage.blocks.rend());
    CHECK(blocks_of(recycler.take_all()) == expected);
    for (uint32_t i = kFull; i < kFull + 3; ++i) batch.add(storage.blocks[i], recycler);
    CHECK(recycler.take_all() == nullptr);
    batch.flush(recycler);
    CHECK(blocks_of(recycler.take_all()) ==
          std::vector<void *>{storage.blocks[kFull + 2], storage.blocks[kFull + 1], storage.blocks[kFull]});
    batch.flush(recycler);  // empty: gives nothing
    CHECK(recycler.take_all() == nullptr);
}

TEST_CASE("job memory: blocks given by many threads are all taken once", "[job_memory][threads]") {
    constexpr int kThreads = 4;
    constexpr int kPerThread = 10000;
    blz::JobRecycler recycler;
    std::vector<std::unique_ptr<TestBlocks>> storage;
    for (int t = 0; t < kThreads; ++t) storage.push_back(std::make_unique<TestBlocks>(kPerThread));
    std::vector<std::thread> givers;
    std::set<void *> taken;
    for (int t = 0; t < kThreads; ++t) {
        // Half the givers one block at a time, half in batches (workers do).
        givers.emplace_back([&, t] {
            if (t % 2 == 0) {
                for (void *block : storage[t]->blocks) recycler.give(block);
                return;
            }
            blz::RecycleBatch batch;
            for (void *block : storage[t]->blocks) batch.add(block, recycler);
            batch.flush(recycler);
        });
    }
    // Take while they give: nothing lost, nothing twice.
    std::size_t seen = 0;
    auto drain = [&] {
        for (void *block : blocks_of(recycler.take_all())) {
            CHECK(taken.insert(block).second);
            ++seen;
        }
    };
    while (seen < static_cast<std::size_t>(kThreads * kPerThread)) {
        drain();
        if (seen < static_cast<std::size_t>(kThreads * kPerThread)) std::this_thread::yield();
    }
    for (auto &g : givers) g.join();
    drain();
    CHECK(taken.size() == static_cast<std::size_t>(kThreads * kPerThread));
}
