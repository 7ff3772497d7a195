// The pool under load: many spawns, joins, fork-joins, parallel loops and
// groups, from outside threads and from inside workers, on several pool
// sizes and across two pools that call into each other.
//
// Catch2's assertion macros are not thread-safe: code running on workers or
// on helper threads only counts what went wrong (atomics), and the test
// thread asserts on those counts afterwards. Every test case runs under a
// blz_test::Watchdog, so a hang ends the program with a message instead of
// stalling the suite. Nothing here asserts on timing.
#include <blitz.h>

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <set>
#include <thread>
#include <vector>

#include "support.hpp"

namespace {

constexpr std::chrono::seconds kCaseLimit{120};

using Counter = std::atomic<uint64_t>;

void increment(void *p) { static_cast<Counter *>(p)->fetch_add(1, std::memory_order_relaxed); }

// Waits (yielding) until `flag` is true; the watchdog covers a flag that never comes.
void wait_for_flag(const std::atomic<bool> &flag) {
    while (!flag.load(std::memory_order_acquire)) std::this_thread::yield();
}

// ---------------------------------------------------------------------------
// spawn / join
// ---------------------------------------------------------------------------

TEST_CASE("10^6 spawn+join from an outside thread, 1000 handles at a time", "[concurrency][spawn]") {
    const uint32_t workers = GENERATE(1u, 2u, 4u);
    INFO("workers: " << workers);
    blz_test::Watchdog dog("10^6 spawn+join from outside", kCaseLimit);
    Counter counter{0};
    blz_test::Pool pool(workers);

    constexpr int kTotal = 1000000;
    constexpr int kBatch = 1000;
    std::vector<blz_task *> handles(kBatch, nullptr);
    uint64_t spawn_failures = 0, join_failures = 0, null_handles = 0;
    for (int done = 0; done < kTotal; done += kBatch) {
        for (int i = 0; i < kBatch; ++i) {
            handles[i] = nullptr;
            if (blz_spawn(pool, &increment, &counter, &handles[i]) != BLZ_OK) ++spawn_failures;
            if (handles[i] == nullptr) ++null_handles;
        }
        for (int i = 0; i < kBatch; ++i) {
            if (handles[i] != nullptr && blz_join(handles[i]) != BLZ_OK) ++join_failures;
        }
        // Every task of the batch was joined: its increment is visible now.
        if (counter.load() != static_cast<uint64_t>(done + kBatch)) break;
    }
    CHECK(spawn_failures == 0);
    CHECK(null_handles == 0);
    CHECK(join_failures == 0);
    REQUIRE(counter.load() == kTotal);
    CHECK(blz_test::stats_of(pool).jobs_injected >= static_cast<uint64_t>(kTotal));
}

TEST_CASE("10^6 detached spawns from outside, then destroy waits for all of them", "[concurrency][spawn]") {
    const uint32_t workers = GENERATE(1u, 2u, 4u);
    INFO("workers: " << workers);
    blz_test::Watchdog dog("10^6 detached spawns + destroy", kCaseLimit);
    Counter counter{0};
    blz_test::Pool pool(workers);

    constexpr uint64_t kTotal = 1000000;
    uint64_t spawn_failures = 0;
    for (uint64_t i = 0; i < kTotal; ++i) {
        if (blz_spawn(pool, &increment, &counter, nullptr) != BLZ_OK) ++spawn_failures;
    }
    REQUIRE(spawn_failures == 0);
    REQUIRE(pool.destroy() == BLZ_OK);
    REQUIRE(counter.load() == kTotal);
}

TEST_CASE("detached spawns from four outside threads at once, then destroy", "[concurrency][spawn]") {
    blz_test::Watchdog dog("4 x 250000 detached spawns + destroy", kCaseLimit);
    Counter counter{0};
    Counter spawn_failures{0};
    blz_test::Pool pool(2);

    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
        threads.emplace_back([&] {
            for (int i = 0; i < 250000; ++i) {
                if (blz_spawn(pool, &increment, &counter, nullptr) != BLZ_OK) spawn_failures.fetch_add(1);
            }
        });
    }
    for (auto &t : threads) t.join();
    REQUIRE(spawn_failures.load() == 0);
    REQUIRE(pool.destroy() == BLZ_OK);
    REQUIRE(counter.load() == 1000000);
}

// A task that spawns `fanout` children with handles and joins them, down to depth 0.
struct SpawnTree {
    blz_pool *pool;
    int depth;
    int fanout;
    Counter *nodes;
    Counter *errors;
};

void spawn_tree(void *p) {
    const SpawnTree &self = *static_cast<SpawnTree *>(p);
    self.nodes->fetch_add(1, std::memory_order_relaxed);
    if (blz_worker_index(self.pool) < 0) self.errors->fetch_add(1);
    if (self.depth == 0) return;
    std::vector<SpawnTree> kids(static_cast<size_t>(self.fanout),
                                SpawnTree{self.pool, self.depth - 1, self.fanout, self.nodes, self.errors});
    std::vector<blz_task *> handles(kids.size(), nullptr);
    for (size_t k = 0; k < kids.size(); ++k) {
        if (blz_spawn(self.pool, &spawn_tree, &kids[k], &handles[k]) != BLZ_OK) {
            self.errors->fetch_add(1);
            handles[k] = nullptr;
        }
    }
    for (blz_task *h : handles) {
        if (h != nullptr && blz_join(h) != BLZ_OK) self.errors->fetch_add(1);
    }
}

uint64_t tree_nodes(int depth, int fanout) {
    uint64_t total = 0, level = 1;
    for (int d = 0; d <= depth; ++d, level *= static_cast<uint64_t>(fanout)) total += level;
    return total;
}

// Spawns `count` children with handles from inside a worker (the deque has
// to grow far past its first buffer), then joins them oldest first.
struct WideSpawn {
    blz_pool *pool;
    int count;
    Counter *ran;
    Counter *errors;
};

void wide_spawn(void *p) {
    const WideSpawn &self = *static_cast<WideSpawn *>(p);
    std::vector<blz_task *> handles(static_cast<size_t>(self.count), nullptr);
    for (auto &h : handles) {
        if (blz_spawn(self.pool, &increment, self.ran, &h) != BLZ_OK) {
            self.errors->fetch_add(1);
            h = nullptr;
        }
    }
    for (blz_task *h : handles) {
        if (h != nullptr && blz_join(h) != BLZ_OK) self.errors->fetch_add(1);
    }
}

TEST_CASE("spawns from inside workers: tasks spawn subtasks with handles and join them", "[concurrency][spawn]") {
    const uint32_t workers = GENERATE(1u, 2u, 4u);
    INFO("workers: " << workers);
    blz_test::Watchdog dog("spawns from inside workers", kCaseLimit);
    Counter nodes{0}, errors{0};
    blz_test::Pool pool(workers);

    SECTION("a tree of depth 8, fanout 3, entered with blz_call") {
        SpawnTree root{pool, 8, 3, &nodes, &errors};
        REQUIRE(blz_call(pool, &spawn_tree, &root) == BLZ_OK);
        CHECK(errors.load() == 0);
        REQUIRE(nodes.load() == tree_nodes(8, 3));
    }
    SECTION("a tree of depth 12, fanout 2, whose root is spawned from outside") {
        SpawnTree root{pool, 12, 2, &nodes, &errors};
        blz_task *task = nullptr;
        REQUIRE(blz_spawn(pool, &spawn_tree, &root, &task) == BLZ_OK);
        REQUIRE(blz_join(task) == BLZ_OK);
        CHECK(errors.load() == 0);
        REQUIRE(nodes.load() == tree_nodes(12, 2));
    }
    SECTION("one task spawns 10000 joined children (the deque grows)") {
        WideSpawn wide{pool, 10000, &nodes, &errors};
        REQUIRE(blz_call(pool, &wide_spawn, &wide) == BLZ_OK);
        CHECK(errors.load() == 0);
        REQUIRE(nodes.load() == 10000);
    }
    SECTION("detached spawns from inside a worker, then destroy waits for them") {
        struct Ctx {
            blz_pool *pool;
            Counter *ran;
            Counter *errors;
        } ctx{pool, &nodes, &errors};
        auto spawner = +[](void *p) {
            auto &c = *static_cast<Ctx *>(p);
            for (int i = 0; i < 100000; ++i) {
                if (blz_spawn(c.pool, &increment, c.ran, nullptr) != BLZ_OK) c.errors->fetch_add(1);
            }
        };
        REQUIRE(blz_call(pool, spawner, &ctx) == BLZ_OK);
        REQUIRE(pool.destroy() == BLZ_OK);
        CHECK(errors.load() == 0);
        REQUIRE(nodes.load() == 100000);
    }
}

// ---------------------------------------------------------------------------
// fork-join
// ---------------------------------------------------------------------------

struct Fib {
    blz_pool *pool;
    unsigned n;
    uint64_t result;
    Counter *errors;
};

void fib_task(void *p) {
    Fib &self = *static_cast<Fib *>(p);
    if (self.n < 2) {
        self.result = self.n;
        return;
    }
    Fib left{self.pool, self.n - 1, 0, self.errors};
    Fib right{self.pool, self.n - 2, 0, self.errors};
    if (blz_fork_join(self.pool, &fib_task, &left, &fib_task, &right) != BLZ_OK) self.errors->fetch_add(1);
    self.result = left.result + right.result;
}

uint64_t fib_sequential(unsigned n) { return n < 2 ? n : fib_sequential(n - 1) + fib_sequential(n - 2); }

TEST_CASE("fib(25) by fork-join without cutoff equals the sequential value", "[concurrency][fork_join]") {
    const uint32_t workers = GENERATE(1u, 2u, 4u, 16u);
    INFO("workers: " << workers);
    blz_test::Watchdog dog("fib(25) by fork-join", kCaseLimit);
    REQUIRE(fib_sequential(25) == 75025);
    Counter errors{0};
    blz_test::Pool pool(workers);

    SECTION("entered with blz_call") {
        Fib root{pool, 25, 0, &errors};
        REQUIRE(blz_call(pool, &fib_task, &root) == BLZ_OK);
        CHECK(errors.load() == 0);
        REQUIRE(root.result == 75025);
    }
    SECTION("blz_fork_join called from outside directly") {
        Fib left{pool, 24, 0, &errors};
        Fib right{pool, 23, 0, &errors};
        REQUIRE(blz_fork_join(pool, &fib_task, &left, &fib_task, &right) == BLZ_OK);
        CHECK(errors.load() == 0);
        REQUIRE(left.result + right.result == 75025);
    }
    SECTION("several times in a row on the same pool") {
        for (int i = 0; i < 5; ++i) {
            Fib root{pool, 25, 0, &errors};
            REQUIRE(blz_call(pool, &fib_task, &root) == BLZ_OK);
            REQUIRE(root.result == 75025);
        }
        CHECK(errors.load() == 0);
    }
}

// A chain: each level does one blz_fork_join; one side recurses, the other
// marks the level's bit.
struct Chain {
    blz_pool *pool;
    int depth;
    bool recurse_in_b;
    std::atomic<uint64_t> *marks;
    Counter *errors;
};

void chain_step(void *p) {
    const Chain &self = *static_cast<Chain *>(p);
    if (self.depth == 0) return;
    struct Mark {
        std::atomic<uint64_t> *marks;
        int bit;
    } mark{self.marks, self.depth - 1};
    auto set_mark = +[](void *m) {
        auto &mk = *static_cast<Mark *>(m);
        mk.marks->fetch_or(uint64_t{1} << mk.bit);
    };
    Chain next{self.pool, self.depth - 1, self.recurse_in_b, self.marks, self.errors};
    blz_status status = self.recurse_in_b ? blz_fork_join(self.pool, set_mark, &mark, &chain_step, &next)
                                          : blz_fork_join(self.pool, &chain_step, &next, set_mark, &mark);
    if (status != BLZ_OK) self.errors->fetch_add(1);
}

struct Tree {
    blz_pool *pool;
    int depth;
    Counter *leaves;
    Counter *errors;
};

void tree_step(void *p) {
    const Tree &self = *static_cast<Tree *>(p);
    if (self.depth == 0) {
        self.leaves->fetch_add(1, std::memory_order_relaxed);
        return;
    }
    Tree a{self.pool, self.depth - 1, self.leaves, self.errors};
    Tree b = a;
    if (blz_fork_join(self.pool, &tree_step, &a, &tree_step, &b) != BLZ_OK) self.errors->fetch_add(1);
}

TEST_CASE("nested fork-join: a chain 30 deep and a full binary tree of depth 16", "[concurrency][fork_join]") {
    const uint32_t workers = GENERATE(1u, 2u, 4u);
    INFO("workers: " << workers);
    blz_test::Watchdog dog("nested fork-join", kCaseLimit);
    Counter errors{0};
    blz_test::Pool pool(workers);
    constexpr uint64_t kAllLevels = (uint64_t{1} << 30) - 1;

    SECTION("chain 30 deep, a recurses, entered with blz_call") {
        std::atomic<uint64_t> marks{0};
        Chain root{pool, 30, false, &marks, &errors};
        REQUIRE(blz_call(pool, &chain_step, &root) == BLZ_OK);
        CHECK(errors.load() == 0);
        REQUIRE(marks.load() == kAllLevels);
    }
    SECTION("chain 30 deep, b recurses (stolen continuations), from outside") {
        std::atomic<uint64_t> marks{0};
        Chain first{pool, 30, true, &marks, &errors};
        std::atomic<uint64_t> unused{0};
        Chain trivial{pool, 0, true, &unused, &errors};
        REQUIRE(blz_fork_join(pool, &chain_step, &trivial, &chain_step, &first) == BLZ_OK);
        CHECK(errors.load() == 0);
        CHECK(unused.load() == 0);
        REQUIRE(marks.load() == kAllLevels);
    }
    SECTION("full binary tree of depth 16 counts 65536 leaves") {
        Counter leaves{0};
        Tree root{pool, 16, &leaves, &errors};
        REQUIRE(blz_call(pool, &tree_step, &root) == BLZ_OK);
        CHECK(errors.load() == 0);
        REQUIRE(leaves.load() == 65536);
        // again, entering with blz_fork_join from outside
        leaves.store(0);
        Tree a{pool, 15, &leaves, &errors};
        Tree b = a;
        REQUIRE(blz_fork_join(pool, &tree_step, &a, &tree_step, &b) == BLZ_OK);
        CHECK(errors.load() == 0);
        REQUIRE(leaves.load() == 65536);
    }
}

// ---------------------------------------------------------------------------
// parallel_for
// ---------------------------------------------------------------------------

struct Coverage {
    Coverage(size_t b, size_t e, size_t g) : begin(b), end(e), grain(g), hits(e - b) {}
    const size_t begin, end, grain;
    std::vector<std::atomic<uint32_t>> hits;  // hits[i - begin]: calls that covered index i
    Counter calls{0};
    Counter bad_ranges{0};  // empty, reversed or outside [begin, end)
    Counter oversize{0};    // more than `grain` indices in one call (grain > 0)
};

void cover_body(void *p, size_t lo, size_t hi) {
    Coverage &c = *static_cast<Coverage *>(p);
    c.calls.fetch_add(1, std::memory_order_relaxed);
    if (!(lo < hi) || lo < c.begin || hi > c.end) {
        c.bad_ranges.fetch_add(1);
        return;
    }
    if (c.grain != 0 && hi - lo > c.grain) c.oversize.fetch_add(1);
    for (size_t i = lo; i < hi; ++i) c.hits[i - c.begin].fetch_add(1, std::memory_order_relaxed);
}

struct InsideFor {
    blz_pool *pool;
    size_t begin, end, grain;
    blz_range_fn body;
    void *arg;
    blz_status status;
    int32_t worker_index;
};

void parallel_for_inside(void *p) {
    InsideFor &f = *static_cast<InsideFor *>(p);
    f.worker_index = blz_worker_index(f.pool);
    f.status = blz_parallel_for(f.pool, f.begin, f.end, f.grain, f.body, f.arg);
}

// Runs a parallel_for over [begin, end) with `grain`, from outside or from
// inside a worker (nested in blz_call), and checks every index was covered once.
void check_coverage(blz_pool *pool, size_t begin, size_t end, size_t grain, bool inside) {
    INFO("range [" << begin << ", " << end << "), grain " << grain << (inside ? ", inside a worker" : ", from outside"));
    Coverage c(begin, end, grain);
    blz_status status;
    if (inside) {
        InsideFor f{pool, begin, end, grain, &cover_body, &c, BLZ_EINVAL, -2};
        REQUIRE(blz_call(pool, &parallel_for_inside, &f) == BLZ_OK);
        CHECK(f.worker_index >= 0);
        status = f.status;
    } else {
        status = blz_parallel_for(pool, begin, end, grain, &cover_body, &c);
    }
    REQUIRE(status == BLZ_OK);
    CHECK(c.bad_ranges.load() == 0);
    CHECK(c.oversize.load() == 0);
    size_t missed = 0, repeated = 0;
    for (auto &h : c.hits) {
        uint32_t v = h.load();
        if (v == 0) ++missed;
        if (v > 1) ++repeated;
    }
    CHECK(missed == 0);
    CHECK(repeated == 0);
    CHECK(c.calls.load() >= 1);
    CHECK(c.calls.load() <= end - begin);
    if (grain >= end - begin) CHECK(c.calls.load() == 1);  // nothing to split
    if (grain != 0) CHECK(c.calls.load() >= (end - begin + grain - 1) / grain);
}

TEST_CASE("blz_parallel_for covers each index exactly once", "[concurrency][parallel_for]") {
    const uint32_t workers = GENERATE(1u, 2u, 4u);
    const bool inside = GENERATE(false, true);
    INFO("workers: " << workers << (inside ? ", inside a worker" : ", from outside"));
    blz_test::Watchdog dog("parallel_for coverage", kCaseLimit);
    blz_test::Pool pool(workers);

    SECTION("[0, 1)") {
        for (size_t grain : {size_t{0}, size_t{1}, size_t{7}, size_t{1000}}) check_coverage(pool, 0, 1, grain, inside);
    }
    SECTION("[0, 10^6)") {
        for (size_t grain : {size_t{0}, size_t{1}, size_t{7}, size_t{2000000}}) {
            check_coverage(pool, 0, 1000000, grain, inside);
        }
    }
    SECTION("[1000, 250000)") {
        for (size_t grain : {size_t{0}, size_t{1}, size_t{7}, size_t{249000}, size_t{1000000}}) {
            check_coverage(pool, 1000, 250000, grain, inside);
        }
    }
    SECTION("small odd ranges") {
        for (size_t len : {size_t{2}, size_t{3}, size_t{5}, size_t{63}, size_t{64}, size_t{65}, size_t{1023}}) {
            for (size_t grain : {size_t{0}, size_t{1}, size_t{2}, size_t{7}}) check_coverage(pool, 17, 17 + len, grain, inside);
        }
    }
    SECTION("a range that ends at SIZE_MAX") {
        const size_t top = SIZE_MAX;
        for (size_t grain : {size_t{0}, size_t{1}, size_t{7}}) check_coverage(pool, top - 100000, top, grain, inside);
    }
}

TEST_CASE("blz_parallel_for with begin == end returns BLZ_OK without calling body", "[concurrency][parallel_for]") {
    blz_test::Watchdog dog("parallel_for empty range", kCaseLimit);
    blz_test::Pool pool(2);
    auto count_calls = +[](void *p, size_t, size_t) { static_cast<Counter *>(p)->fetch_add(1); };
    Counter calls{0};
    for (size_t at : {size_t{0}, size_t{5}, size_t{1000000}, SIZE_MAX}) {
        for (size_t grain : {size_t{0}, size_t{1}, size_t{7}}) {
            INFO("begin == end == " << at << ", grain " << grain);
            REQUIRE(blz_parallel_for(pool, at, at, grain, count_calls, &calls) == BLZ_OK);
            InsideFor f{pool, at, at, grain, count_calls, &calls, BLZ_EINVAL, -2};
            REQUIRE(blz_call(pool, &parallel_for_inside, &f) == BLZ_OK);
            REQUIRE(f.status == BLZ_OK);
        }
    }
    REQUIRE(calls.load() == 0);
}

// ---------------------------------------------------------------------------
// groups
// ---------------------------------------------------------------------------

// A group task that spawns two more group tasks until depth 0; frees its argument.
struct GroupTree {
    blz_group *group;
    int depth;
    Counter *nodes;
    Counter *errors;
};

void group_tree(void *p) {
    GroupTree *self = static_cast<GroupTree *>(p);
    self->nodes->fetch_add(1, std::memory_order_relaxed);
    if (self->depth > 0) {
        for (int k = 0; k < 2; ++k) {
            auto *kid = new GroupTree{self->group, self->depth - 1, self->nodes, self->errors};
            if (blz_group_spawn(self->group, &group_tree, kid) != BLZ_OK) {
                self->errors->fetch_add(1);
                delete kid;
            }
        }
    }
    delete self;
}

struct Gated {
    std::atomic<bool> *gate;
    Counter *ran;
};

void gated_increment(void *p) {
    Gated &g = *static_cast<Gated *>(p);
    wait_for_flag(*g.gate);
    g.ran->fetch_add(1, std::memory_order_relaxed);
}

TEST_CASE("groups: many tasks, reuse, spawns from workers, concurrent waiters, destroy waits", "[concurrency][group]") {
    const uint32_t workers = GENERATE(1u, 2u, 4u);
    INFO("workers: " << workers);
    blz_test::Watchdog dog("groups", kCaseLimit);
    Counter ran{0}, errors{0};
    // Gated tasks wait for `gate`; it outlives the pool and opens before the
    // pool is destroyed, also when an assertion leaves the test early.
    std::atomic<bool> gate{false};
    Gated gated{&gate, &ran};
    blz_test::Pool pool(workers);
    struct OpenOnExit {
        std::atomic<bool> &gate;
        ~OpenOnExit() { gate.store(true, std::memory_order_release); }
    } open_on_exit{gate};
    blz_group *group = nullptr;
    REQUIRE(blz_group_create(pool, &group) == BLZ_OK);
    REQUIRE(group != nullptr);

    SECTION("10^5 tasks from outside, wait, then the same group again") {
        uint64_t spawn_failures = 0;
        for (int i = 0; i < 100000; ++i) {
            if (blz_group_spawn(group, &increment, &ran) != BLZ_OK) ++spawn_failures;
        }
        REQUIRE(spawn_failures == 0);
        REQUIRE(blz_group_wait(group) == BLZ_OK);
        REQUIRE(ran.load() == 100000);
        // reuse
        for (int i = 0; i < 100000; ++i) {
            if (blz_group_spawn(group, &increment, &ran) != BLZ_OK) ++spawn_failures;
        }
        REQUIRE(spawn_failures == 0);
        REQUIRE(blz_group_wait(group) == BLZ_OK);
        REQUIRE(ran.load() == 200000);
        // a wait with nothing pending returns at once
        REQUIRE(blz_group_wait(group) == BLZ_OK);
        REQUIRE(blz_group_destroy(group) == BLZ_OK);
    }
    SECTION("group tasks spawn more group tasks; the wait from outside sees them all") {
        for (int round = 0; round < 3; ++round) {
            ran.store(0);
            REQUIRE(blz_group_spawn(group, &group_tree, new GroupTree{group, 14, &ran, &errors}) == BLZ_OK);
            REQUIRE(blz_group_wait(group) == BLZ_OK);
            CHECK(errors.load() == 0);
            REQUIRE(ran.load() == (uint64_t{1} << 15) - 1);
        }
        REQUIRE(blz_group_destroy(group) == BLZ_OK);
    }
    SECTION("a worker spawns into a group and waits for it (nested in blz_call)") {
        struct Ctx {
            blz_group *group;
            Counter *ran;
            Counter *errors;
            blz_status status;
            uint64_t seen;
        } ctx{group, &ran, &errors, BLZ_EINVAL, 0};
        auto body = +[](void *p) {
            Ctx &c = *static_cast<Ctx *>(p);
            for (int i = 0; i < 10000; ++i) {
                if (blz_group_spawn(c.group, &increment, c.ran) != BLZ_OK) c.errors->fetch_add(1);
            }
            c.status = blz_group_wait(c.group);
            c.seen = c.ran->load();
        };
        REQUIRE(blz_call(pool, body, &ctx) == BLZ_OK);
        CHECK(errors.load() == 0);
        REQUIRE(ctx.status == BLZ_OK);
        REQUIRE(ctx.seen == 10000);
        REQUIRE(blz_group_destroy(group) == BLZ_OK);
    }
    SECTION("two threads wait on the same group at once; both return after every task ran") {
        constexpr uint64_t kTasks = 1000;
        for (uint64_t i = 0; i < kTasks; ++i) REQUIRE(blz_group_spawn(group, &gated_increment, &gated) == BLZ_OK);
        std::atomic<int> started{0};
        blz_status statuses[2] = {BLZ_EINVAL, BLZ_EINVAL};
        uint64_t seen[2] = {0, 0};
        std::vector<std::thread> waiters;
        for (int w = 0; w < 2; ++w) {
            waiters.emplace_back([&, w] {
                started.fetch_add(1);
                statuses[w] = blz_group_wait(group);
                seen[w] = ran.load();
            });
        }
        while (started.load() != 2) std::this_thread::yield();
        std::this_thread::sleep_for(std::chrono::milliseconds(50));  // let both block (not required for correctness)
        CHECK(ran.load() == 0);  // the gate is closed: no task could finish yet
        gate.store(true, std::memory_order_release);
        for (auto &t : waiters) t.join();
        CHECK(statuses[0] == BLZ_OK);
        CHECK(statuses[1] == BLZ_OK);
        CHECK(seen[0] == kTasks);
        CHECK(seen[1] == kTasks);
        REQUIRE(blz_group_destroy(group) == BLZ_OK);
    }
    SECTION("blz_group_destroy waits for the group's tasks") {
        constexpr uint64_t kTasks = 2000;
        for (uint64_t i = 0; i < kTasks; ++i) REQUIRE(blz_group_spawn(group, &gated_increment, &gated) == BLZ_OK);
        std::thread opener([&] {
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
            gate.store(true, std::memory_order_release);
        });
        blz_status status = blz_group_destroy(group);
        uint64_t seen = ran.load();
        opener.join();
        REQUIRE(status == BLZ_OK);
        REQUIRE(seen == kTasks);
    }
}

// ---------------------------------------------------------------------------
// eight outside threads at once
// ---------------------------------------------------------------------------

struct Slot {
    blz_pool *pool;
    uint64_t value;
    int32_t worker_index;
};

void store_value(void *p) {
    Slot &s = *static_cast<Slot *>(p);
    s.worker_index = blz_worker_index(s.pool);
    s.value += 1;
}

void sum_indices(void *p, size_t lo, size_t hi) {
    uint64_t local = 0;
    for (size_t i = lo; i < hi; ++i) local += i;
    static_cast<Counter *>(p)->fetch_add(local, std::memory_order_relaxed);
}

TEST_CASE("eight outside threads use one pool at once", "[concurrency][mixed]") {
    const uint32_t workers = GENERATE(1u, 2u, 4u);
    INFO("workers: " << workers);
    blz_test::Watchdog dog("eight outside threads", kCaseLimit);
    blz_test::Pool pool(workers);
    constexpr int kThreads = 8;
    constexpr int kIterations = 2000;
    Counter errors[kThreads];
    Counter wrong[kThreads];
    for (int t = 0; t < kThreads; ++t) errors[t] = 0, wrong[t] = 0;

    auto client = [&](int t) {
        blz_group *group = nullptr;
        if (blz_group_create(pool, &group) != BLZ_OK) {
            errors[t].fetch_add(1);
            return;
        }
        Counter spawned_ran{0}, group_ran{0};
        for (int i = 0; i < kIterations; ++i) {
            // blz_call
            Slot call{pool, static_cast<uint64_t>(i), -1};
            if (blz_call(pool, &store_value, &call) != BLZ_OK) errors[t].fetch_add(1);
            if (call.value != static_cast<uint64_t>(i) + 1 || call.worker_index < 0 ||
                call.worker_index >= static_cast<int32_t>(workers)) {
                wrong[t].fetch_add(1);
            }
            // blz_fork_join
            Slot a{pool, 10, -1}, b{pool, 20, -1};
            if (blz_fork_join(pool, &store_value, &a, &store_value, &b) != BLZ_OK) errors[t].fetch_add(1);
            if (a.value != 11 || b.value != 21 || a.worker_index < 0 || b.worker_index < 0) wrong[t].fetch_add(1);
            // blz_spawn + blz_join
            blz_task *task = nullptr;
            if (blz_spawn(pool, &increment, &spawned_ran, &task) != BLZ_OK || task == nullptr) {
                errors[t].fetch_add(1);
            } else if (blz_join(task) != BLZ_OK) {
                errors[t].fetch_add(1);
            }
            if (spawned_ran.load() != static_cast<uint64_t>(i) + 1) wrong[t].fetch_add(1);
            // blz_parallel_for over [i, i + 100)
            Counter sum{0};
            if (blz_parallel_for(pool, static_cast<size_t>(i), static_cast<size_t>(i) + 100, static_cast<size_t>(i % 9),
                                 &sum_indices, &sum) != BLZ_OK) {
                errors[t].fetch_add(1);
            }
            if (sum.load() != static_cast<uint64_t>(100 * i + 4950)) wrong[t].fetch_add(1);
            // group spawn + wait
            for (int k = 0; k < 4; ++k) {
                if (blz_group_spawn(group, &increment, &group_ran) != BLZ_OK) errors[t].fetch_add(1);
            }
            if (blz_group_wait(group) != BLZ_OK) errors[t].fetch_add(1);
            if (group_ran.load() != 4 * (static_cast<uint64_t>(i) + 1)) wrong[t].fetch_add(1);
        }
        if (blz_group_destroy(group) != BLZ_OK) errors[t].fetch_add(1);
    };
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) threads.emplace_back(client, t);
    for (auto &th : threads) th.join();
    for (int t = 0; t < kThreads; ++t) {
        INFO("thread " << t);
        CHECK(errors[t].load() == 0);
        CHECK(wrong[t].load() == 0);
    }
}

// ---------------------------------------------------------------------------
// two pools calling into each other
// ---------------------------------------------------------------------------

enum PingMode { kPingCall, kPingSpawn, kPingForkJoin, kPingForkJoinTree, kPingMixed };

struct Ping {
    blz_pool *pools[2];
    int side;  // the pool this step runs on
    int depth;
    int mode;
    uint64_t result;
    Counter *errors;
};

int mode_at(int mode, int depth) { return mode == kPingMixed ? depth % 3 : mode; }

void ping(void *p) {
    Ping &self = *static_cast<Ping *>(p);
    blz_pool *own = self.pools[self.side];
    blz_pool *other = self.pools[1 - self.side];
    int32_t own_index = blz_worker_index(own);
    if (own_index < 0 || own_index >= static_cast<int32_t>(blz_pool_num_threads(own))) self.errors->fetch_add(1);
    if (blz_worker_index(other) != -1) self.errors->fetch_add(1);
    if (self.depth == 0) {
        self.result = 1;
        return;
    }
    Ping child{{self.pools[0], self.pools[1]}, 1 - self.side, self.depth - 1, self.mode, 0, self.errors};
    Ping child2 = child;
    switch (mode_at(self.mode, self.depth)) {
        case kPingCall:
            if (blz_call(other, &ping, &child) != BLZ_OK) self.errors->fetch_add(1);
            self.result = child.result + 1;
            break;
        case kPingSpawn: {
            blz_task *task = nullptr;
            if (blz_spawn(other, &ping, &child, &task) != BLZ_OK) {
                self.errors->fetch_add(1);
            } else if (blz_join(task) != BLZ_OK) {
                self.errors->fetch_add(1);
            }
            self.result = child.result + 1;
            break;
        }
        case kPingForkJoin: {
            // a crosses to the other pool and recurses; b is a leaf there
            child2.depth = 0;
            if (blz_fork_join(other, &ping, &child, &ping, &child2) != BLZ_OK) self.errors->fetch_add(1);
            self.result = child.result + child2.result;
            break;
        }
        case kPingForkJoinTree:
            if (blz_fork_join(other, &ping, &child, &ping, &child2) != BLZ_OK) self.errors->fetch_add(1);
            self.result = child.result + child2.result;
            break;
        default:
            self.errors->fetch_add(1);
    }
}

uint64_t ping_expected(int mode, int depth) {
    if (depth == 0) return 1;
    switch (mode_at(mode, depth)) {
        case kPingCall:
        case kPingSpawn: return ping_expected(mode, depth - 1) + 1;
        case kPingForkJoin: return ping_expected(mode, depth - 1) + 1;
        case kPingForkJoinTree: return 2 * ping_expected(mode, depth - 1);
        default: return 0;
    }
}

TEST_CASE("two pools calling into each other (ping-pong depth 10)", "[concurrency][two_pools]") {
    const uint32_t workers = GENERATE(1u, 2u);
    INFO("workers per pool: " << workers);
    blz_test::Watchdog dog("two pools ping-pong", kCaseLimit);
    Counter errors{0};
    blz_test::Pool a(workers), b(workers);
    constexpr int kDepth = 10;

    for (int mode : {kPingCall, kPingSpawn, kPingForkJoin, kPingForkJoinTree, kPingMixed}) {
        INFO("mode " << mode);
        for (int start_side = 0; start_side < 2; ++start_side) {
            blz_pool *start = start_side == 0 ? a.get() : b.get();
            Ping root{{a.get(), b.get()}, start_side, kDepth, mode, 0, &errors};
            REQUIRE(blz_call(start, &ping, &root) == BLZ_OK);
            CHECK(errors.load() == 0);
            REQUIRE(root.result == ping_expected(mode, kDepth));
        }
    }

    SECTION("four outside threads start ping-pongs at the same time") {
        Counter wrong{0};
        std::vector<std::thread> threads;
        for (int t = 0; t < 4; ++t) {
            threads.emplace_back([&, t] {
                for (int i = 0; i < 25; ++i) {
                    int mode = (t + i) % 5;
                    int side = (t + i) % 2;
                    blz_pool *start = side == 0 ? a.get() : b.get();
                    Ping root{{a.get(), b.get()}, side, kDepth, mode, 0, &errors};
                    if (blz_call(start, &ping, &root) != BLZ_OK) errors.fetch_add(1);
                    if (root.result != ping_expected(mode, kDepth)) wrong.fetch_add(1);
                }
            });
        }
        for (auto &t : threads) t.join();
        CHECK(errors.load() == 0);
        REQUIRE(wrong.load() == 0);
    }
}

// ---------------------------------------------------------------------------
// blz_worker_index and blz_pool_stats
// ---------------------------------------------------------------------------

struct Rendezvous {
    blz_pool *pool;
    blz_pool *other;
    uint32_t expected;
    std::atomic<uint32_t> arrived{0};
    std::atomic<bool> timed_out{false};
    std::atomic<int32_t> index_seen[16];
    std::atomic<int32_t> other_index_seen[16];
    std::atomic<uint32_t> next_slot{0};
};

// Each of `expected` tasks waits until all of them run at once, so each
// runs on its own worker; it records blz_worker_index for both pools.
void rendezvous_task(void *p) {
    Rendezvous &r = *static_cast<Rendezvous *>(p);
    uint32_t slot = r.next_slot.fetch_add(1);
    if (slot < 16) {
        r.index_seen[slot] = blz_worker_index(r.pool);
        r.other_index_seen[slot] = blz_worker_index(r.other);
    }
    r.arrived.fetch_add(1);
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (r.arrived.load() < r.expected) {
        if (std::chrono::steady_clock::now() > deadline) {
            r.timed_out.store(true);
            return;
        }
        std::this_thread::yield();
    }
}

TEST_CASE("blz_worker_index: -1 outside, in [0, n) inside, -1 for another pool's worker", "[concurrency][worker_index]") {
    blz_test::Watchdog dog("blz_worker_index", kCaseLimit);
    const uint32_t workers = GENERATE(1u, 2u, 4u);
    INFO("workers: " << workers);
    blz_test::Pool pool(workers), other(2);
    REQUIRE(blz_pool_num_threads(pool) == workers);
    CHECK(blz_worker_index(pool) == -1);
    CHECK(blz_worker_index(other) == -1);
    CHECK(blz_worker_index(nullptr) == -1);

    SECTION("every worker has its own index in [0, n)") {
        Rendezvous r;
        r.pool = pool;
        r.other = other;
        r.expected = workers;
        for (uint32_t i = 0; i < 16; ++i) r.index_seen[i] = -2, r.other_index_seen[i] = -2;
        std::vector<blz_task *> tasks(workers, nullptr);
        for (auto &t : tasks) REQUIRE(blz_spawn(pool, &rendezvous_task, &r, &t) == BLZ_OK);
        for (auto t : tasks) REQUIRE(blz_join(t) == BLZ_OK);
        REQUIRE_FALSE(r.timed_out.load());
        std::set<int32_t> seen;
        for (uint32_t i = 0; i < workers; ++i) {
            int32_t index = r.index_seen[i].load();
            CHECK(index >= 0);
            CHECK(index < static_cast<int32_t>(workers));
            CHECK(r.other_index_seen[i].load() == -1);
            seen.insert(index);
        }
        REQUIRE(seen.size() == workers);
    }
    SECTION("inside blz_call, fork-join halves and parallel_for bodies") {
        struct Ctx {
            blz_pool *pool;
            blz_pool *other;
            Counter bad{0};
            Counter checked{0};
        } ctx;
        ctx.pool = pool;
        ctx.other = other;
        auto check_here = +[](void *p) {
            Ctx &c = *static_cast<Ctx *>(p);
            int32_t i = blz_worker_index(c.pool);
            if (i < 0 || i >= static_cast<int32_t>(blz_pool_num_threads(c.pool))) c.bad.fetch_add(1);
            if (blz_worker_index(c.other) != -1) c.bad.fetch_add(1);
            c.checked.fetch_add(1);
        };
        auto body = +[](void *p, size_t lo, size_t hi) {
            Ctx &c = *static_cast<Ctx *>(p);
            for (size_t k = lo; k < hi; ++k) {
                int32_t i = blz_worker_index(c.pool);
                if (i < 0 || i >= static_cast<int32_t>(blz_pool_num_threads(c.pool))) c.bad.fetch_add(1);
                if (blz_worker_index(c.other) != -1) c.bad.fetch_add(1);
                c.checked.fetch_add(1);
            }
        };
        REQUIRE(blz_call(pool, check_here, &ctx) == BLZ_OK);
        REQUIRE(blz_fork_join(pool, check_here, &ctx, check_here, &ctx) == BLZ_OK);
        REQUIRE(blz_parallel_for(pool, 0, 1000, 1, body, &ctx) == BLZ_OK);
        blz_task *task = nullptr;
        REQUIRE(blz_spawn(pool, check_here, &ctx, &task) == BLZ_OK);
        REQUIRE(blz_join(task) == BLZ_OK);
        CHECK(ctx.checked.load() == 1004);
        CHECK(ctx.bad.load() == 0);
        CHECK(blz_worker_index(pool) == -1);
    }
    SECTION("a worker of another pool gets -1") {
        struct Ctx {
            blz_pool *pool;
            blz_pool *other;
            int32_t in_pool;
            int32_t in_other;
        } ctx{pool, other, -2, -2};
        auto probe = +[](void *p) {
            Ctx &c = *static_cast<Ctx *>(p);
            c.in_pool = blz_worker_index(c.pool);
            c.in_other = blz_worker_index(c.other);
        };
        REQUIRE(blz_call(other, probe, &ctx) == BLZ_OK);
        CHECK(ctx.in_pool == -1);
        CHECK(ctx.in_other >= 0);
        CHECK(ctx.in_other < 2);
    }
}

TEST_CASE("blz_pool_stats after work", "[concurrency][stats]") {
    blz_test::Watchdog dog("blz_pool_stats", kCaseLimit);
    const uint32_t workers = GENERATE(1u, 3u);
    INFO("workers: " << workers);
    blz_test::Pool pool(workers);
    blz_stats before = blz_test::stats_of(pool);
    CHECK(before.struct_size == sizeof(blz_stats));
    CHECK(before.num_threads == workers);
    CHECK(before.jobs_executed == 0);
    CHECK(before.jobs_injected == 0);

    constexpr uint64_t kSpawns = 5000;
    Counter ran{0};
    std::vector<blz_task *> tasks(kSpawns, nullptr);
    for (auto &t : tasks) REQUIRE(blz_spawn(pool, &increment, &ran, &t) == BLZ_OK);
    for (auto t : tasks) REQUIRE(blz_join(t) == BLZ_OK);
    for (uint64_t i = 0; i < kSpawns; ++i) REQUIRE(blz_spawn(pool, &increment, &ran, nullptr) == BLZ_OK);
    Counter errors{0};
    Fib root{pool, 15, 0, &errors};
    REQUIRE(blz_call(pool, &fib_task, &root) == BLZ_OK);
    REQUIRE(root.result == fib_sequential(15));
    // the detached ones: wait until they ran (the watchdog covers a hang)
    while (ran.load() != 2 * kSpawns) std::this_thread::yield();

    blz_stats after = blz_test::stats_of(pool);
    CHECK(after.num_threads == workers);
    CHECK(blz_pool_num_threads(pool) == workers);
    CHECK(after.jobs_executed > 0);
    // every spawned task and the call's job were taken from a queue
    CHECK(after.jobs_executed >= 2 * kSpawns + 1);
    CHECK(after.jobs_injected >= 2 * kSpawns + 1);
    CHECK(after.tasks_failed == 0);
    CHECK(after.sleeping_now <= workers);
    CHECK(after.inactive_now <= workers);
    CHECK(after.sleeping_now <= after.inactive_now);
    if (workers == 1) CHECK(after.steals == 0);
}

}  // namespace
