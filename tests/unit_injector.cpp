// Unit tests of blz::Injector: FIFO order, empty pops, has_jobs()/pushed(),
// push's was_empty hint, node reuse; then producers and consumers on
// several threads: every node popped exactly once, per-producer order kept.
#include <catch2/catch.hpp>

#include <injector.hpp>

#include "support.hpp"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

namespace {

struct Node {
    std::atomic<Node *> next{nullptr};
    uint32_t producer = 0;
    uint32_t seq = 0;
    std::atomic<uint32_t> times_popped{0};
};

using Injector = blz::Injector<Node>;

}  // namespace

TEST_CASE("injector: pop on a fresh or drained injector returns nullptr", "[injector]") {
    Injector inj;
    CHECK_FALSE(inj.has_jobs());
    CHECK(inj.pushed() == 0);
    CHECK(inj.pop() == nullptr);
    CHECK(inj.pop() == nullptr);

    Node a;
    inj.push(&a);
    CHECK(inj.pop() == &a);
    CHECK(inj.pop() == nullptr);
    CHECK_FALSE(inj.has_jobs());
}

TEST_CASE("injector: one producer is served FIFO", "[injector]") {
    constexpr int kN = 100;
    std::vector<Node> nodes(kN);
    Injector inj;
    for (int i = 0; i < kN; ++i) {
        nodes[i].seq = static_cast<uint32_t>(i);
        inj.push(&nodes[i]);
    }
    for (int i = 0; i < kN; ++i) {
        Node *n = inj.pop();
        REQUIRE(n == &nodes[i]);
        CHECK(n->seq == static_cast<uint32_t>(i));
    }
    CHECK(inj.pop() == nullptr);
}

TEST_CASE("injector: FIFO across interleaved pushes and pops (stub re-linked many times)",
          "[injector]") {
    std::vector<Node> nodes(50);
    Injector inj;
    std::size_t next_push = 0, next_pop = 0;
    // Pattern: push k, pop k-1, ... so the queue often runs down to its last
    // node (the stub path of take()) and also holds several nodes.
    for (int round = 0; round < 10; ++round) {
        for (int k = 0; k < 3; ++k) inj.push(&nodes[next_push++]);
        for (int k = 0; k < 2; ++k) REQUIRE(inj.pop() == &nodes[next_pop++]);
    }
    while (next_pop < next_push) REQUIRE(inj.pop() == &nodes[next_pop++]);
    CHECK(inj.pop() == nullptr);
    // Alternating single push/pop: every pop takes the last node.
    for (int k = 0; k < 20; ++k) {
        inj.push(&nodes[next_push]);
        REQUIRE(inj.pop() == &nodes[next_push]);
        ++next_push;
        REQUIRE(inj.pop() == nullptr);
    }
}

TEST_CASE("injector: has_jobs and pushed count nodes in and out", "[injector]") {
    Node a, b, c;
    Injector inj;
    inj.push(&a);
    CHECK(inj.has_jobs());
    CHECK(inj.pushed() == 1);
    inj.push(&b);
    inj.push(&c);
    CHECK(inj.pushed() == 3);
    REQUIRE(inj.pop() == &a);
    CHECK(inj.has_jobs());
    CHECK(inj.pushed() == 3);  // pushed() is the number ever pushed
    REQUIRE(inj.pop() == &b);
    CHECK(inj.has_jobs());
    REQUIRE(inj.pop() == &c);
    CHECK_FALSE(inj.has_jobs());
    CHECK(inj.pushed() == 3);
    CHECK(inj.pop() == nullptr);
    CHECK(inj.pushed() == 3);  // a failed pop counts nothing
    CHECK_FALSE(inj.has_jobs());
}

TEST_CASE("injector: push reports whether the queue was empty", "[injector]") {
    Node a, b, c;
    Injector inj;
    CHECK(inj.push(&a));        // empty before
    CHECK_FALSE(inj.push(&b));  // a queued
    REQUIRE(inj.pop() == &a);
    CHECK_FALSE(inj.push(&c));  // b still queued
    REQUIRE(inj.pop() == &b);
    REQUIRE(inj.pop() == &c);
    CHECK(inj.push(&a));  // drained: empty again
    REQUIRE(inj.pop() == &a);
}

TEST_CASE("injector: a popped node can be pushed again", "[injector]") {
    Node a, b;
    Injector inj;
    for (int i = 0; i < 5; ++i) {
        inj.push(&a);
        inj.push(&b);
        REQUIRE(inj.pop() == &a);
        inj.push(&a);  // while b is still queued
        REQUIRE(inj.pop() == &b);
        REQUIRE(inj.pop() == &a);
        REQUIRE(inj.pop() == nullptr);
    }
}

namespace {

// kProducers threads push kPerProducer nodes each while num_consumers
// threads pop until all are out. Checked afterwards on the main thread
// (Catch's assertions are not thread-safe): each node popped exactly once;
// in each consumer's stream, each producer's nodes in increasing order
// (consumers are serialised by the injector, so each consumer's pops are a
// subsequence of the one FIFO order).
// prefill: the producers finish before the consumers start, so the
// consumers contend for the turn on a long queue (the try-lock path).
void run_producers_consumers(int num_consumers, bool prefill = false) {
    constexpr int kProducers = 4;
    constexpr uint32_t kPerProducer = 100000;
    constexpr uint64_t kTotal = uint64_t{kProducers} * kPerProducer;

    blz_test::Watchdog watchdog("injector producers/consumers", std::chrono::seconds(60));

    std::vector<std::vector<Node>> nodes(kProducers);
    for (int p = 0; p < kProducers; ++p) {
        nodes[p] = std::vector<Node>(kPerProducer);
        for (uint32_t i = 0; i < kPerProducer; ++i) {
            nodes[p][i].producer = static_cast<uint32_t>(p);
            nodes[p][i].seq = i;
        }
    }

    Injector inj;
    std::atomic<bool> go{false};
    std::atomic<bool> consumers_go{false};
    std::atomic<uint64_t> total_popped{0};
    std::atomic<uint64_t> order_violations{0};
    std::atomic<uint64_t> bad_nodes{0};
    std::vector<uint64_t> popped_by(static_cast<std::size_t>(num_consumers), 0);

    std::vector<std::thread> threads;
    for (int p = 0; p < kProducers; ++p) {
        threads.emplace_back([&, p] {
            while (!go.load()) std::this_thread::yield();
            for (uint32_t i = 0; i < kPerProducer; ++i) inj.push(&nodes[p][i]);
        });
    }
    for (int c = 0; c < num_consumers; ++c) {
        threads.emplace_back([&, c] {
            std::vector<int64_t> last(kProducers, -1);
            uint64_t mine = 0;
            while (!consumers_go.load()) std::this_thread::yield();
            while (total_popped.load(std::memory_order_relaxed) < kTotal) {
                Node *n = inj.pop();
                if (n == nullptr) {
                    std::this_thread::yield();
                    continue;
                }
                if (n->producer >= static_cast<uint32_t>(kProducers)) {
                    bad_nodes.fetch_add(1);
                    continue;
                }
                n->times_popped.fetch_add(1);
                if (static_cast<int64_t>(n->seq) <= last[n->producer]) order_violations.fetch_add(1);
                last[n->producer] = n->seq;
                ++mine;
                total_popped.fetch_add(1);
            }
            popped_by[static_cast<std::size_t>(c)] = mine;
        });
    }
    if (prefill) {
        go.store(true);
        for (int p = 0; p < kProducers; ++p) threads[static_cast<std::size_t>(p)].join();
        REQUIRE(inj.pushed() == kTotal);
        consumers_go.store(true);
        for (std::size_t t = kProducers; t < threads.size(); ++t) threads[t].join();
    } else {
        consumers_go.store(true);
        go.store(true);
        for (auto &t : threads) t.join();
    }

    CHECK(bad_nodes.load() == 0);
    CHECK(order_violations.load() == 0);
    CHECK(total_popped.load() == kTotal);
    uint64_t sum = 0;
    for (uint64_t n : popped_by) sum += n;
    CHECK(sum == kTotal);

    uint64_t never = 0, twice = 0;
    for (int p = 0; p < kProducers; ++p) {
        for (const Node &n : nodes[p]) {
            uint32_t times = n.times_popped.load();
            if (times == 0) ++never;
            if (times > 1) ++twice;
        }
    }
    CHECK(never == 0);
    CHECK(twice == 0);
    CHECK(inj.pushed() == kTotal);
    CHECK_FALSE(inj.has_jobs());
    CHECK(inj.pop() == nullptr);
}

}  // namespace

TEST_CASE("injector: 4 producers x 10^5 nodes, 2 consumers: each node once, per-producer order kept",
          "[injector][concurrent]") {
    run_producers_consumers(2);
}

TEST_CASE("injector: 4 producers x 10^5 nodes, 1 consumer: each node once, per-producer order kept",
          "[injector][concurrent]") {
    run_producers_consumers(1);
}

TEST_CASE("injector: 4 x 10^5 nodes pushed first, then drained by 2 consumers: each node once, in order",
          "[injector][concurrent]") {
    // Several rounds: the consumers' race for the turn is short, and each
    // round is another chance to catch two consumers in take() at once.
    for (int round = 0; round < 10; ++round) {
        INFO("round " << round);
        run_producers_consumers(2, true);
    }
}
