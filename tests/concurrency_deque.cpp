// blz::Deque under contention: one owner pushes 10^6 items (from the
// initial capacity, so the buffer grows many times while thieves read it),
// publishes most of them (the rest stay private for a while) and pops some,
// while 3 thieves steal continuously. Every item is
// a pointer to its own counter: whoever takes it increments the counter,
// so at the end each counter must be exactly 1 (none lost, none taken
// twice). Failures are gathered in atomics and asserted on the main thread
// (Catch's assertions are not thread-safe).
#include <catch2/catch.hpp>

#include <deque.hpp>

#include "support.hpp"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <thread>
#include <vector>

namespace {

using Slot = std::atomic<uint32_t>;
using SlotDeque = blz::Deque<Slot *>;

struct RoundResult {
    uint64_t popped = 0;
    uint64_t stolen = 0;
    uint64_t aborts = 0;
    uint64_t null_values = 0;  // a kSuccess steal with no value
    uint64_t foreign = 0;      // a value that is not one of the items
    uint64_t never = 0;        // items nobody took
    uint64_t twice = 0;        // items taken more than once
    int64_t final_capacity = 0;
    int64_t final_size_hint = -1;
    bool push_failed = false;
};

enum class OwnerPattern {
    kBursts,      // long runs of pushes (the deque grows) with some pops
    kLastElement  // push one, pop one: owner and thieves race for the last element
};

RoundResult run_round(std::size_t num_items, int num_thieves, OwnerPattern pattern) {
    std::unique_ptr<Slot[]> slots(new Slot[num_items]);
    for (std::size_t i = 0; i < num_items; ++i) slots[i].store(0, std::memory_order_relaxed);
    Slot *const first = &slots[0];
    Slot *const last = &slots[num_items - 1];

    auto take = [&](Slot *s, std::atomic<uint64_t> &foreign) {
        if (s < first || s > last) {
            foreign.fetch_add(1);
            return;
        }
        s->fetch_add(1, std::memory_order_relaxed);
    };

    SlotDeque d;
    REQUIRE(d.init());
    REQUIRE(d.capacity_for_owner() == SlotDeque::kInitialCapacity);

    std::atomic<bool> go{false};
    std::atomic<bool> owner_done{false};
    std::atomic<uint64_t> stolen{0}, aborts{0}, null_values{0}, foreign{0};
    std::atomic<bool> push_failed{false};
    std::atomic<uint64_t> spin_sink{0};
    uint64_t popped = 0;

    std::vector<std::thread> thieves;
    for (int t = 0; t < num_thieves; ++t) {
        thieves.emplace_back([&] {
            uint64_t my_stolen = 0, my_aborts = 0;
            while (!go.load()) std::this_thread::yield();
            for (;;) {
                // Read the flag before stealing: once the owner is done
                // and a steal then sees the deque empty, nothing is left.
                bool done = owner_done.load();
                SlotDeque::StealResult r = d.steal();
                if (r.status == SlotDeque::Steal::kSuccess) {
                    if (r.value == nullptr) {
                        null_values.fetch_add(1);
                    } else {
                        take(r.value, foreign);
                    }
                    ++my_stolen;
                } else if (r.status == SlotDeque::Steal::kAbort) {
                    ++my_aborts;
                } else if (done) {
                    break;
                }
            }
            stolen.fetch_add(my_stolen);
            aborts.fetch_add(my_aborts);
        });
    }

    std::thread owner([&] {
        while (!go.load()) std::this_thread::yield();
        auto pop_one = [&] {
            Slot *s = d.pop();
            if (s == nullptr) return false;
            take(s, foreign);
            ++popped;
            return true;
        };
        if (pattern == OwnerPattern::kBursts) {
            // Long runs of pushes with a few pops in between, so that the
            // deque fills up (and grows) faster than the thieves drain it.
            for (std::size_t i = 0; i < num_items; ++i) {
                if (!d.push(&slots[i])) {
                    push_failed.store(true);
                    break;
                }
                // Publish in batches of up to five: the pops below take
                // private and public elements in turn.
                if (i % 5 == 4) d.publish();
                if (i % 7 == 3) pop_one();
                // Drain from the bottom now and then: races on the last elements.
                if (i % 50000 == 49999) {
                    while (pop_one()) {
                    }
                }
            }
        } else {
            for (std::size_t i = 0; i < num_items; ++i) {
                if (!d.push(&slots[i])) {
                    push_failed.store(true);
                    break;
                }
                // Publish three pushes in four: the fourth stays private,
                // and its pop must not race anyone.
                if (i % 4 != 3) d.publish();
                // Leave the elements out for a moment so that thieves get to
                // them (this only widens the race window; nothing depends on it).
                for (std::size_t k = 0; k < i % 32; ++k) spin_sink.fetch_add(1, std::memory_order_relaxed);
                // Pop after every second push: the first pop finds two elements
                // (the fence-only path, no CAS) while thieves take the oldest,
                // the second races them for the last one (the CAS path).
                if (i % 2 == 0) continue;
                pop_one();
                pop_one();
            }
        }
        // Drain. A null pop means empty (or a thief won the last element,
        // which also leaves it empty), and nothing more is pushed.
        while (pop_one()) {
        }
        owner_done.store(true);
    });

    go.store(true);
    owner.join();
    for (auto &t : thieves) t.join();

    RoundResult r;
    r.popped = popped;
    r.stolen = stolen.load();
    r.aborts = aborts.load();
    r.null_values = null_values.load();
    r.foreign = foreign.load();
    r.push_failed = push_failed.load();
    for (std::size_t i = 0; i < num_items; ++i) {
        uint32_t n = slots[i].load();
        if (n == 0) ++r.never;
        if (n > 1) ++r.twice;
    }
    r.final_capacity = d.capacity_for_owner();
    r.final_size_hint = d.size_hint();
    return r;
}

}  // namespace

TEST_CASE("concurrency deque: owner pushes 10^6 with pops, 3 thieves steal: every item taken exactly once",
          "[deque][concurrency]") {
    constexpr std::size_t kItems = 1000000;
    constexpr int kThieves = 3;
    constexpr int kRounds = 5;
    blz_test::Watchdog watchdog("concurrency_deque", std::chrono::seconds(240));

    for (int round = 0; round < kRounds; ++round) {
        RoundResult r = run_round(kItems, kThieves, OwnerPattern::kBursts);
        // For the log: how much the buffer grew and how contended it was.
        std::printf("round %d: popped %llu, stolen %llu, aborted steals %llu, final capacity %lld\n", round,
                    static_cast<unsigned long long>(r.popped), static_cast<unsigned long long>(r.stolen),
                    static_cast<unsigned long long>(r.aborts), static_cast<long long>(r.final_capacity));
        INFO("round " << round << ": popped " << r.popped << ", stolen " << r.stolen << ", aborts " << r.aborts
                      << ", final capacity " << r.final_capacity);
        REQUIRE_FALSE(r.push_failed);
        CHECK(r.null_values == 0);
        CHECK(r.foreign == 0);
        CHECK(r.never == 0);
        CHECK(r.twice == 0);
        CHECK(r.popped + r.stolen == kItems);
        CHECK(r.stolen > 0);  // the thieves took part
        CHECK(r.final_size_hint == 0);
        // A power of two no smaller than the initial capacity.
        CHECK(r.final_capacity >= SlotDeque::kInitialCapacity);
        CHECK((r.final_capacity & (r.final_capacity - 1)) == 0);
    }
}

// The store-buffering pair of pop() and steal(): the deque holds at most two
// elements, so every pop races the thieves, both on the last element (the
// t == b CAS path) and on the one below it (the fence-only path). Without
// the seq-cst fences both sides could take the same element.
TEST_CASE("concurrency deque: owner pops a deque of one or two elements while thieves steal: each taken once",
          "[deque][concurrency]") {
    constexpr std::size_t kItems = 1000000;
    constexpr int kRounds = 3;
    blz_test::Watchdog watchdog("concurrency_deque last element", std::chrono::seconds(240));

    for (int thieves = 1; thieves <= 3; thieves += 2) {
        for (int round = 0; round < kRounds; ++round) {
            RoundResult r = run_round(kItems, thieves, OwnerPattern::kLastElement);
            std::printf("small deque, %d thieves, round %d: popped %llu, stolen %llu, aborted steals %llu\n",
                        thieves, round, static_cast<unsigned long long>(r.popped),
                        static_cast<unsigned long long>(r.stolen), static_cast<unsigned long long>(r.aborts));
            INFO(thieves << " thieves, round " << round << ": popped " << r.popped << ", stolen " << r.stolen);
            REQUIRE_FALSE(r.push_failed);
            CHECK(r.null_values == 0);
            CHECK(r.foreign == 0);
            CHECK(r.never == 0);
            CHECK(r.twice == 0);
            CHECK(r.popped + r.stolen == kItems);
            CHECK(r.stolen > 0);  // the thieves took part
            CHECK(r.final_size_hint == 0);
            CHECK(r.final_capacity == SlotDeque::kInitialCapacity);  // never more than two elements
        }
    }
}
