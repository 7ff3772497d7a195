// 0.3: the inline fork path (issue 31; blitz.h, "The inline fork path";
// lib/fork_stack.hpp). What it must keep of blz_fork_join's contract, and
// what is new: a pending half that its owner never gets back to (a long
// first half that does not fork again) is still handed to an idle worker;
// forks deeper than the stack's first capacity; blz_fail and the job count
// through the inline path of blitz.hpp; the exported calls refuse a stack
// that is not the caller's. No assertion depends on timing: "in parallel"
// means that one half saw the other start, under a bounded wait.
#include <catch2/catch.hpp>

#include <blitz.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>

#include "support.hpp"

namespace {

using blz_test::eventually;
using blz_test::Pool;
using blz_test::stats_of;
using blz_test::thunk_of;
using blz_test::Watchdog;
using std::chrono::seconds;

// Two halves that each run until the other has started (bounded): they
// end with both flags set only if they ran at the same time.
struct Meeting {
    std::atomic<bool> first_started{false}, second_started{false};
    std::atomic<bool> first_met{false}, second_met{false};

    static void first(void *arg) {
        auto &m = *static_cast<Meeting *>(arg);
        m.first_started.store(true);
        m.first_met.store(eventually([&] { return m.second_started.load(); }, seconds(20)));
    }
    static void second(void *arg) {
        auto &m = *static_cast<Meeting *>(arg);
        m.second_started.store(true);
        m.second_met.store(eventually([&] { return m.first_started.load(); }, seconds(20)));
    }
};

uint64_t fib_cpp(blz::pool &pool, unsigned n) {
    if (n < 2) return n;
    auto [a, b] = pool.join([&] { return fib_cpp(pool, n - 1); }, [&] { return fib_cpp(pool, n - 2); });
    return a + b;
}

// A chain of forks `depth` deep: each level's first half forks the next.
uint64_t chain(blz::pool &pool, unsigned depth) {
    if (depth == 0) return 0;
    auto [a, b] = pool.join([&] { return chain(pool, depth - 1); }, [] { return uint64_t{1}; });
    return a + b;
}

struct ChainArgs {
    blz_pool *pool;
    unsigned depth;
    uint64_t sum;
};

void chain_c(void *arg) {
    auto &c = *static_cast<ChainArgs *>(arg);
    if (c.depth == 0) return;
    ChainArgs next{c.pool, c.depth - 1, 0};
    ChainArgs leaf{c.pool, 0, 1};
    if (blz_fork_join(c.pool, chain_c, &next, chain_c, &leaf) != BLZ_OK) return;
    c.sum = next.sum + leaf.sum;
}

}  // namespace

TEST_CASE("two long halves forked once run in parallel on two workers", "[v03][fork]") {
    Watchdog watchdog("two long halves", seconds(120));
    Pool pool(2);
    // After other work (the fork stack has pushed, promoted and joined
    // before), and from a fresh pool: the first half never forks again,
    // and the second must still reach the idle worker.
    for (unsigned warm_up : {0u, 18u}) {
        INFO("fib(" << warm_up << ") first");
        CHECK(blz_test::fib(pool, warm_up) != blz_test::kFibFailed);
        Meeting m;
        auto fork = [&] { return blz_fork_join(pool, Meeting::first, &m, Meeting::second, &m); };
        blz_status status = 99;
        auto run = [&] { status = fork(); };
        REQUIRE(blz_call(pool, thunk_of(run), &run) == BLZ_OK);
        CHECK(status == BLZ_OK);
        CHECK(m.first_met.load());
        CHECK(m.second_met.load());
    }
}

TEST_CASE("two long halves through blitz.hpp's inline join run in parallel", "[v03][fork][cpp]") {
    Watchdog watchdog("two long halves, C++", seconds(120));
    blz::pool pool(2);
    for (unsigned warm_up : {0u, 18u}) {
        INFO("fib(" << warm_up << ") first");
        Meeting m;
        pool.call([&] {
            CHECK(fib_cpp(pool, warm_up) == (warm_up == 0 ? 0u : 2584u));
            pool.join([&] { Meeting::first(&m); }, [&] { Meeting::second(&m); });
        });
        CHECK(m.first_met.load());
        CHECK(m.second_met.load());
    }
}

// A loop whose first piece runs until a piece of the second half has
// started (bounded): it ends with `met` only if the loop was split for the
// idle worker before its first piece, as lazy splitting must when a thief
// has asked (lib/worker.cpp, parallel_for_on_worker). Every index runs once.
struct SplitLoop {
    static constexpr size_t kCount = 64;
    std::atomic<bool> second_half_started{false}, met{false};
    std::atomic<unsigned> runs[kCount] = {};

    static void body(void *arg, size_t lo, size_t hi) {
        auto &loop = *static_cast<SplitLoop *>(arg);
        for (size_t i = lo; i < hi; ++i) loop.runs[i].fetch_add(1);
        if (lo >= kCount / 2) loop.second_half_started.store(true);
        if (lo == 0) loop.met.store(eventually([&] { return loop.second_half_started.load(); }, seconds(20)));
    }
    bool each_ran_once() const {
        for (const auto &r : runs) {
            if (r.load() != 1) return false;
        }
        return true;
    }
};

TEST_CASE("a parallel_for with grain 1 hands half of it to an idle worker before its first piece",
          "[v03][fork][parallel_for]") {
    Watchdog watchdog("lazy split", seconds(120));
    Pool pool(2);
    // From outside and from inside the pool, fresh and after other forks
    // (the request bit served and asked again in between).
    for (int round = 0; round < 4; ++round) {
        INFO("round " << round);
        if (round == 2) CHECK(blz_test::fib(pool, 18) != blz_test::kFibFailed);
        SplitLoop loop;
        blz_status status = 99;
        if (round % 2 == 0) {
            status = blz_parallel_for(pool, 0, SplitLoop::kCount, 1, SplitLoop::body, &loop);
        } else {
            auto run = [&] { status = blz_parallel_for(pool, 0, SplitLoop::kCount, 1, SplitLoop::body, &loop); };
            REQUIRE(blz_call(pool, thunk_of(run), &run) == BLZ_OK);
        }
        CHECK(status == BLZ_OK);
        CHECK(loop.met.load());
        CHECK(loop.each_ran_once());
    }
}

TEST_CASE("forks deeper than the fork stack's first capacity", "[v03][fork]") {
    Watchdog watchdog("deep forks", seconds(120));
    for (uint32_t workers : {1u, 2u}) {
        INFO(workers << " workers");
        blz::pool pool(workers);
        // 64 frames fit the first array; these need it to grow twice.
        CHECK(pool.call([&] { return chain(pool, 300); }) == 300u);
        ChainArgs c{pool.native_handle(), 300, 0};
        REQUIRE(blz_call(pool.native_handle(), chain_c, &c) == BLZ_OK);
        CHECK(c.sum == 300u);
        CHECK(pool.call([&] { return fib_cpp(pool, 20); }) == 6765u);
    }
}

TEST_CASE("blitz.hpp's inline join: blz_fail in a half, exceptions, and the job count", "[v03][fork][cpp]") {
    blz::pool pool(1);
    pool.call([&] { fib_cpp(pool, 5); });  // the first fork is promoted: the ones below are inline
    const uint64_t jobs_before = pool.stats().jobs_executed;
    const uint64_t failed_before = pool.stats().tasks_failed;
    pool.call([&] {
        // A half that calls blz_fail: the join reports BLZ_ETASK, once.
        blz_status thrown = BLZ_OK;
        try {
            pool.join([] {}, [] { blz_fail(); });
        } catch (const blz::error &e) {
            thrown = e.status();
        }
        CHECK(thrown == BLZ_ETASK);
        // An exception in each half: the first half's is rethrown, both ran.
        int ran = 0;
        try {
            pool.join([&] { ++ran; throw 1; }, [&] { ++ran; throw 2; });
        } catch (int thrown) {
            CHECK(thrown == 1);
        }
        CHECK(ran == 2);
        // Values by value and by reference.
        int x = 7;
        auto [v, r] = pool.join([] { return 5; }, [&]() -> int & { return x; });
        CHECK(v == 5);
        CHECK(&r == &x);
    });
    const blz_stats after = pool.stats();
    // 1 call + 3 joins' second halves, each a job when run inline.
    CHECK(after.jobs_executed - jobs_before == 4u);
    CHECK(after.tasks_failed - failed_before == 2u);  // the blz_fail join, the throwing join
}

// Counts the live objects of its type: a value the join drops or leaks shows here.
struct Counted {
    static inline std::atomic<int> live{0};
    int value;
    explicit Counted(int v) : value(v) { live.fetch_add(1); }
    Counted(const Counted &other) : value(other.value) { live.fetch_add(1); }
    Counted(Counted &&other) noexcept : value(other.value) { live.fetch_add(1); }
    ~Counted() { live.fetch_sub(1); }
};

struct ThiefError {
    int code;
};

// pool.join(f, g) on a worker where f returns only once g started on the
// other worker (a bounded wait): g was promoted and stolen, and its value
// or exception crosses threads through the frame on f's stack.
template <class F, class G>
auto join_with_stolen_second(blz::pool &pool, F &&f, G &&g) {
    return pool.call([&] {
        std::atomic<int32_t> g_worker{-1};
        auto first = [&] {
            const bool met = eventually([&] { return g_worker.load() >= 0; }, seconds(20));
            CHECK(met);
            CHECK(g_worker.load() != pool.worker_index());
            return f();
        };
        auto second = [&] {
            g_worker.store(pool.worker_index());
            return g();
        };
        return pool.join(first, second);
    });
}

TEST_CASE("blitz.hpp's inline join: a stolen second half's value, exception and blz_fail", "[v03][fork][cpp]") {
    Watchdog watchdog("stolen second half", seconds(120));
    blz::pool pool(2);
    const uint64_t failed_before = pool.stats().tasks_failed;
    {
        auto [a, b] = join_with_stolen_second(pool, [] { return Counted(1); }, [] { return Counted(2); });
        CHECK(a.value == 1);
        CHECK(b.value == 2);
        CHECK(Counted::live.load() == 2);
    }
    CHECK(Counted::live.load() == 0);
    // g throws on its thief: f's value is dropped, g's exception rethrown.
    int caught = 0;
    try {
        join_with_stolen_second(pool, [] { return Counted(3); }, []() -> Counted { throw ThiefError{4}; });
    } catch (const ThiefError &e) {
        caught = e.code;
    }
    CHECK(caught == 4);
    CHECK(Counted::live.load() == 0);
    // f throws while its thief gives g's value: that value is dropped.
    caught = 0;
    try {
        join_with_stolen_second(pool, []() -> Counted { throw ThiefError{5}; }, [] { return Counted(6); });
    } catch (const ThiefError &e) {
        caught = e.code;
    }
    CHECK(caught == 5);
    CHECK(Counted::live.load() == 0);
    // g calls blz_fail on its thief: the join reports BLZ_ETASK.
    blz_status status = BLZ_OK;
    try {
        join_with_stolen_second(pool, [] { return Counted(7); }, [] {
            blz_fail();
            return Counted(8);
        });
    } catch (const blz::error &e) {
        status = e.status();
    }
    CHECK(status == BLZ_ETASK);
    CHECK(Counted::live.load() == 0);
    // Two failed jobs per failing case: where the half failed (g's thief,
    // twice; the join on f's worker once), and the pool.call it escaped.
    CHECK(pool.stats().tasks_failed - failed_before == 6u);
}

// A value whose move throws when asked to: join() moves both values into
// its pair, and neither may outlive the join when one move throws.
struct ThrowingMove {
    static inline std::atomic<int> live{0};
    bool throw_on_move;
    explicit ThrowingMove(bool t) : throw_on_move(t) { live.fetch_add(1); }
    ThrowingMove(ThrowingMove &&other) : throw_on_move(other.throw_on_move) {
        if (throw_on_move) throw ThiefError{9};
        live.fetch_add(1);
    }
    ~ThrowingMove() { live.fetch_sub(1); }
};

TEST_CASE("blitz.hpp's inline join: a value whose move throws leaves nothing behind", "[v03][fork][cpp]") {
    blz::pool pool(1);
    pool.call([&] {
        int caught = 0;
        try {
            pool.join([] { return ThrowingMove(true); }, [] { return Counted(10); });
        } catch (const ThiefError &e) {
            caught = e.code;
        }
        CHECK(caught == 9);
        CHECK(ThrowingMove::live.load() == 0);
        CHECK(Counted::live.load() == 0);
        caught = 0;
        try {
            pool.join([] { return Counted(11); }, [] { return ThrowingMove(true); });
        } catch (const ThiefError &e) {
            caught = e.code;
        }
        CHECK(caught == 9);
        CHECK(ThrowingMove::live.load() == 0);
        CHECK(Counted::live.load() == 0);
        auto [m, c] = pool.join([] { return ThrowingMove(false); }, [] { return Counted(12); });
        CHECK(c.value == 12);
        CHECK(ThrowingMove::live.load() == 1);
    });
    CHECK(ThrowingMove::live.load() == 0);
    CHECK(Counted::live.load() == 0);
}

TEST_CASE("the inline fork path's exported calls refuse a stack that is not the caller's", "[v03][fork][bad_input]") {
    Pool pool(1);
    // Outside every pool: no stack.
    CHECK(*blz_fork_stack_slot_v1() == nullptr);
    blz_fork_stack fake{};
    blz_fork_frame frame{};
    frame.fn = [](void *) {};
    CHECK(blz_fork_push_v1(&fake, &frame) == 0);
    CHECK(blz_fork_push_v1(nullptr, &frame) == 0);
    CHECK(blz_fork_join_v1(&fake, &frame) == 0);
    blz_fork_failed_v1(&fake, 0);  // nothing to do, no crash
    struct Seen {
        blz_fork_stack *stack = nullptr;
        int push_null_frame = -1, push_null_fn = -1, join_not_pushed = -1, push_other = -1;
        uint32_t depth_before = 0, depth_after = 0;
    } seen;
    auto on_worker = [&] {
        blz_fork_stack *stack = *blz_fork_stack_slot_v1();
        seen.stack = stack;
        if (stack == nullptr) return;
        seen.depth_before = stack->depth;
        blz_fork_frame empty{};
        seen.push_null_frame = blz_fork_push_v1(stack, nullptr);
        seen.push_null_fn = blz_fork_push_v1(stack, &empty);
        blz_fork_frame never_pushed{};
        never_pushed.fn = [](void *) {};
        seen.join_not_pushed = blz_fork_join_v1(stack, &never_pushed);
        seen.push_other = blz_fork_push_v1(&fake, &never_pushed);
        seen.depth_after = stack->depth;
    };
    REQUIRE(blz_call(pool, thunk_of(on_worker), &on_worker) == BLZ_OK);
    REQUIRE(seen.stack != nullptr);
    CHECK(seen.stack->pool == pool.get());
    CHECK(seen.push_null_frame == 0);
    CHECK(seen.push_null_fn == 0);
    CHECK(seen.join_not_pushed == 0);
    CHECK(seen.push_other == 0);
    CHECK(seen.depth_after == seen.depth_before);
}

TEST_CASE("a worker's fork stack through the C ABI: push, promote on request, join", "[v03][fork]") {
    // The protocol of blitz.h's steps 1 to 4 written out in C terms, as a
    // binding without the C++ header would: a pushed frame run inline, and
    // one pushed through the library while a request is pending, which
    // promotes it and joins it through blz_fork_join_v1.
    Pool pool(1);
    struct Outcome {
        int ran = 0, pushed = -1, joined = -1;
        bool promoted = false, balanced = false;
    } out;
    auto on_worker = [&] {
        blz_fork_stack *stack = *blz_fork_stack_slot_v1();
        if (stack == nullptr) return;
        const uint32_t depth = stack->depth;
        __atomic_fetch_or(&stack->requests, 1u, __ATOMIC_RELAXED);  // as a thief would ask
        blz_fork_frame frame{};
        frame.fn = [](void *arg) { ++static_cast<Outcome *>(arg)->ran; };
        frame.arg = &out;
        out.pushed = blz_fork_push_v1(stack, &frame);
        // The first half would run here. Then step 3: promoted, so the library joins.
        out.promoted = stack->depth - 1 < stack->promoted;
        if (out.pushed == 1 && out.promoted) out.joined = blz_fork_join_v1(stack, &frame);
        out.balanced = stack->depth == depth;
    };
    REQUIRE(blz_call(pool, thunk_of(on_worker), &on_worker) == BLZ_OK);
    CHECK(out.pushed == 1);
    CHECK(out.promoted);
    CHECK(out.joined == 1);
    CHECK(out.ran == 1);
    CHECK(out.balanced);
}
