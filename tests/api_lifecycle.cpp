// Lifecycle of pools, tasks and groups: EDEADLK, destroy while work runs,
// nothing accepted dropped, handles outliving their pool, C++ exceptions in
// tasks, worker hooks and names, fork() and a worker thread the OS refuses.
#include <catch2/catch.hpp>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <pthread.h>
#include <stdexcept>
#include <string>
#include <sys/resource.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include "support.hpp"

namespace {

using blz_test::fib;
using blz_test::child_prologue;
using blz_test::on_worker;
using blz_test::run_forked;
using blz_test::wait_for_child;
using blz_test::Pool;
using blz_test::thunk_of;
using blz_test::sentinel;
using blz_test::stats_of;
using blz_test::Watchdog;
using std::chrono::milliseconds;
using std::chrono::seconds;

// ---------------------------------------------------------------------------
// Helpers

// Spins (politely) until pred() holds; the caller's watchdog bounds it.
template <class P>
void spin_until(P pred) {
    while (!pred()) std::this_thread::sleep_for(std::chrono::microseconds(50));
}

// printf into a std::string (GCC 12's -Wrestrict misfires on "a" + std::to_string(i)).
std::string format(const char *fmt, unsigned long value) {
    char buf[128];
    std::snprintf(buf, sizeof(buf), fmt, value);
    return buf;
}

std::atomic<int> g_must_not_run{0};
void must_not_run(void *) { g_must_not_run.fetch_add(1); }
void must_not_run_range(void *, size_t, size_t) { g_must_not_run.fetch_add(1); }

void count_into(void *counter) { static_cast<std::atomic<int> *>(counter)->fetch_add(1); }

// --- child processes -------------------------------------------------------

// Checks inside a forked child: no Catch2 there, only stderr and _exit.
struct ChildChecks {
    int failures = 0;
    void check(bool ok, const char *expr, int line) {
        if (!ok) {
            std::fprintf(stderr, "  child check FAILED (line %d): %s\n", line, expr);
            ++failures;
        }
    }
    int exit_code() const { return failures > 100 ? 100 : failures; }
};
#define CHILD_CHECK(checks, expr) (checks).check((expr), #expr, __LINE__)


std::string describe_child(int status) {
    char text[128];
    if (WIFEXITED(status)) {
        std::snprintf(text, sizeof(text), "child exited with status %d (number of failed checks)",
                      WEXITSTATUS(status));
    } else if (WIFSIGNALED(status)) {
        std::snprintf(text, sizeof(text), "child killed by signal %d (%s)%s", WTERMSIG(status),
                      strsignal(WTERMSIG(status)), WTERMSIG(status) == SIGALRM ? ": it hung" : "");
    } else {
        std::snprintf(text, sizeof(text), "child ended with raw status %d", status);
    }
    return text;
}

bool child_passed(int status) { return WIFEXITED(status) && WEXITSTATUS(status) == 0; }

}  // namespace

// ===========================================================================
// EDEADLK

TEST_CASE("blz_pool_destroy from one of the pool's own workers returns EDEADLK", "[api][lifecycle]") {
    Watchdog watchdog("destroy from own worker", seconds(60));
    blz_pool *pool = nullptr;
    blz_pool_config config;
    blz_pool_config_init(&config);
    config.num_threads = 2;
    REQUIRE(blz_pool_create(&config, &pool) == BLZ_OK);

    blz_status from_call = 99;
    REQUIRE(on_worker(pool, [&] { from_call = blz_pool_destroy(pool); }) == BLZ_OK);
    CHECK(from_call == BLZ_EDEADLK);

    // From a spawned task as well.
    blz_status from_task = 99;
    auto task_fn = [&] { from_task = blz_pool_destroy(pool); };
    blz_task *task = nullptr;
    REQUIRE(blz_spawn(pool, thunk_of(task_fn), &task_fn, &task) == BLZ_OK);
    REQUIRE(blz_join(task) == BLZ_OK);
    CHECK(from_task == BLZ_EDEADLK);

    // From a fork_join half that a thief runs: still one of the pool's workers.
    std::atomic<int> halves_seen{0};
    blz_status from_thief = 99;
    blz_status from_inline = 99;
    auto half_a = [&] {
        from_inline = blz_pool_destroy(pool);
        halves_seen.fetch_add(1);
    };
    auto half_b = [&] {
        from_thief = blz_pool_destroy(pool);
        halves_seen.fetch_add(1);
    };
    REQUIRE(blz_fork_join(pool, thunk_of(half_a), &half_a, thunk_of(half_b), &half_b) == BLZ_OK);
    CHECK(halves_seen.load() == 2);
    CHECK(from_inline == BLZ_EDEADLK);
    CHECK(from_thief == BLZ_EDEADLK);

    // Nothing changed: the pool still works.
    CHECK(blz_pool_num_threads(pool) == 2);
    CHECK(fib(pool, 18) == 2584);
    std::atomic<int> ran{0};
    REQUIRE(blz_spawn(pool, count_into, &ran, nullptr) == BLZ_OK);
    spin_until([&] { return ran.load() == 1; });

    CHECK(blz_pool_destroy(pool) == BLZ_OK);
}

TEST_CASE("blz_pool_destroy from a worker of another pool is allowed", "[api][lifecycle]") {
    Watchdog watchdog("destroy from another pool's worker", seconds(60));
    Pool outer(2);
    blz_pool *inner = nullptr;
    blz_pool_config config;
    blz_pool_config_init(&config);
    config.num_threads = 2;
    REQUIRE(blz_pool_create(&config, &inner) == BLZ_OK);
    std::atomic<int> ran{0};
    REQUIRE(blz_spawn(inner, count_into, &ran, nullptr) == BLZ_OK);
    blz_status status = 99;
    REQUIRE(on_worker(outer, [&] { status = blz_pool_destroy(inner); }) == BLZ_OK);
    CHECK(status == BLZ_OK);
    CHECK(ran.load() == 1);  // the accepted task ran before destroy returned

    // A whole pool lifetime inside a worker of another pool.
    struct Nested {
        blz_status create = 99, destroy = 99;
        uint64_t fib = 0;
        int32_t index_in_new = -7;
    } nested;
    REQUIRE(on_worker(outer, [&] {
                blz_pool *p = nullptr;
                nested.create = blz_pool_create(&config, &p);
                if (nested.create != BLZ_OK) return;
                nested.index_in_new = blz_worker_index(p);
                nested.fib = fib(p, 17);
                nested.destroy = blz_pool_destroy(p);
            }) == BLZ_OK);
    CHECK(nested.create == BLZ_OK);
    CHECK(nested.index_in_new == -1);
    CHECK(nested.fib == 1597);
    CHECK(nested.destroy == BLZ_OK);
}

namespace {

struct SelfJoin {
    std::atomic<blz_task *> handle{nullptr};
    blz_pool *pool = nullptr;
    blz_status direct = 99;
    blz_status nested_call = 99;
    std::atomic<bool> done{false};
};

void self_join_task(void *arg) {
    auto *s = static_cast<SelfJoin *>(arg);
    blz_task *me;
    // The spawner publishes the handle after blz_spawn returns: wait for it.
    while ((me = s->handle.load()) == nullptr) std::this_thread::yield();
    s->direct = blz_join(me);
    // Inside a blz_call nested in the task (runs inline on this worker):
    // still inside the task.
    auto nested = [s, me] { s->nested_call = blz_join(me); };
    if (blz_call(s->pool, thunk_of(nested), &nested) != BLZ_OK) s->nested_call = 98;
    s->done.store(true);
}

}  // namespace

TEST_CASE("blz_join on a task from inside that same task returns EDEADLK", "[api][lifecycle]") {
    Watchdog watchdog("self join", seconds(60));
    Pool pool(2);
    SelfJoin s;
    s.pool = pool;
    blz_task *task = nullptr;
    REQUIRE(blz_spawn(pool, self_join_task, &s, &task) == BLZ_OK);
    REQUIRE(task != nullptr);
    s.handle.store(task);
    // One thread joins a task, once: wait for the task's end by other
    // means. Nothing changed: the handle is still valid and joins normally.
    spin_until([&] { return s.done.load(); });
    CHECK(blz_join(task) == BLZ_OK);
    CHECK(s.direct == BLZ_EDEADLK);
    CHECK(s.nested_call == BLZ_EDEADLK);
}

TEST_CASE("blz_group_wait and blz_group_destroy from inside a task of that group return EDEADLK",
          "[api][lifecycle]") {
    Watchdog watchdog("group self wait", seconds(60));
    Pool pool(2);
    blz_group *group = nullptr;
    REQUIRE(blz_group_create(pool, &group) == BLZ_OK);
    struct Ctx {
        blz_group *group;
        blz_pool *pool;
        blz_status wait = 99, destroy = 99, nested = 99;
        std::atomic<int> ran{0};
    } ctx{group, pool};
    auto task = [](void *arg) {
        auto *c = static_cast<Ctx *>(arg);
        c->wait = blz_group_wait(c->group);
        c->destroy = blz_group_destroy(c->group);
        auto nested = [c] { c->nested = blz_group_wait(c->group); };
        if (blz_call(c->pool, thunk_of(nested), &nested) != BLZ_OK) c->nested = 98;
        c->ran.fetch_add(1);
    };
    REQUIRE(blz_group_spawn(group, task, &ctx) == BLZ_OK);
    CHECK(blz_group_wait(group) == BLZ_OK);  // the group survived the refused destroy
    CHECK(ctx.ran.load() == 1);
    CHECK(ctx.wait == BLZ_EDEADLK);
    CHECK(ctx.destroy == BLZ_EDEADLK);
    CHECK(ctx.nested == BLZ_EDEADLK);
    // Still usable.
    std::atomic<int> more{0};
    REQUIRE(blz_group_spawn(group, count_into, &more) == BLZ_OK);
    CHECK(blz_group_destroy(group) == BLZ_OK);
    CHECK(more.load() == 1);
}

// A waiting call made from inside a task's own fork_join half would wait for
// itself just the same when a thief runs that half on another worker. Run
// in a child process: if the library does not detect it, the child hangs
// (SIGALRM) and only this test fails.
namespace {

struct ThiefCtx {
    blz_pool *pool = nullptr;
    blz_group *group = nullptr;
    std::atomic<blz_task *> handle{nullptr};
    std::atomic<bool> b_started{false};
    std::atomic<int> b_thread_differs{-1};
    std::atomic<std::thread::id> a_thread{};  // set by a before it waits for b
    bool use_group = false;
    bool steal = true;  // false: one worker, so b runs inline after a
    blz_status from_b = 99;
    std::atomic<bool> task_done{false};
};

void thief_half_a(void *arg) {
    auto *c = static_cast<ThiefCtx *>(arg);
    c->a_thread.store(std::this_thread::get_id());
    // Keep this worker busy until the other worker has stolen b.
    while (c->steal && !c->b_started.load()) std::this_thread::yield();
}

void thief_half_b(void *arg) {
    auto *c = static_cast<ThiefCtx *>(arg);
    while (c->a_thread.load() == std::thread::id()) std::this_thread::yield();
    c->b_thread_differs.store(std::this_thread::get_id() != c->a_thread.load() ? 1 : 0);
    c->b_started.store(true);
    c->from_b = c->use_group ? blz_group_wait(c->group) : blz_join(c->handle.load());
}

void thief_task(void *arg) {
    auto *c = static_cast<ThiefCtx *>(arg);
    if (!c->use_group) {
        while (c->handle.load() == nullptr) std::this_thread::yield();
    }
    blz_fork_join(c->pool, thief_half_a, c, thief_half_b, c);
    c->task_done.store(true);
}

int thief_scenario(bool use_group, bool steal) {
    ChildChecks checks;
    blz_pool *pool = nullptr;
    blz_pool_config config;
    blz_pool_config_init(&config);
    config.num_threads = steal ? 2 : 1;
    if (blz_pool_create(&config, &pool) != BLZ_OK) return 90;
    ThiefCtx c;
    c.pool = pool;
    c.use_group = use_group;
    c.steal = steal;
    if (use_group) {
        if (blz_group_create(pool, &c.group) != BLZ_OK) return 91;
        if (blz_group_spawn(c.group, thief_task, &c) != BLZ_OK) return 92;
        blz_status waited = blz_group_wait(c.group);
        CHILD_CHECK(checks, waited == BLZ_OK);
        CHILD_CHECK(checks, blz_group_destroy(c.group) == BLZ_OK);
    } else {
        blz_task *task = nullptr;
        if (blz_spawn(pool, thief_task, &c, &task) != BLZ_OK) return 92;
        c.handle.store(task);
        // One thread joins a task: wait for the task's end by other means,
        // so the join from half b is the only join under way.
        while (!c.task_done.load()) std::this_thread::sleep_for(std::chrono::microseconds(100));
        CHILD_CHECK(checks, blz_join(task) == BLZ_OK);
    }
    CHILD_CHECK(checks, c.b_thread_differs.load() == (steal ? 1 : 0));  // b ran where intended
    if (c.from_b != BLZ_EDEADLK) std::fprintf(stderr, "  half b got status %d\n", c.from_b);
    CHILD_CHECK(checks, c.from_b == BLZ_EDEADLK);
    CHILD_CHECK(checks, blz_pool_destroy(pool) == BLZ_OK);
    return checks.exit_code();
}

}  // namespace

TEST_CASE("blz_join from the task's own fork_join half run inline returns EDEADLK", "[api][lifecycle]") {
    // The control for the thief case below: the same code, b on the task's thread.
    int status = run_forked([] { return thief_scenario(false, false); }, 20);
    INFO(describe_child(status));
    CHECK(child_passed(status));
}

TEST_CASE("blz_group_wait from a group task's own fork_join half run inline returns EDEADLK", "[api][lifecycle]") {
    int status = run_forked([] { return thief_scenario(true, false); }, 20);
    INFO(describe_child(status));
    CHECK(child_passed(status));
}

TEST_CASE("blz_join from the task's own fork_join half run by a thief returns EDEADLK", "[api][lifecycle][thief]") {
    int status = run_forked([] { return thief_scenario(false, true); }, 20);
    INFO(describe_child(status));
    CHECK(child_passed(status));
}

TEST_CASE("blz_group_wait from a group task's own fork_join half run by a thief returns EDEADLK",
          "[api][lifecycle][thief]") {
    int status = run_forked([] { return thief_scenario(true, true); }, 20);
    INFO(describe_child(status));
    CHECK(child_passed(status));
}

// ===========================================================================
// Destroy while work runs

namespace {

struct DuringDestroy {
    blz_pool *pool = nullptr;
    blz_group *group = nullptr;
    std::atomic<bool> started{false};
    std::atomic<bool> release{false};
    // Statuses of what the running task submits while destroy waits for it.
    blz_status spawn_detached = 99, spawn_handle = 99, join = 99, group_spawn = 99, call = 99, fork_join = 99,
               parallel_for = 99, group_create = 99, new_group_spawn = 99, new_group_destroy = 99;
    std::atomic<int> inner_ran{0};
};

void inner_count(void *arg) { static_cast<DuringDestroy *>(arg)->inner_ran.fetch_add(1); }
void inner_count_range(void *arg, size_t lo, size_t hi) {
    static_cast<DuringDestroy *>(arg)->inner_ran.fetch_add(static_cast<int>(hi - lo));
}

void blocking_task(void *arg) {
    auto *d = static_cast<DuringDestroy *>(arg);
    d->started.store(true);
    while (!d->release.load()) std::this_thread::sleep_for(std::chrono::microseconds(100));
    // destroy has begun (the test saw ESHUTDOWN from outside) and waits for us.
    d->spawn_detached = blz_spawn(d->pool, inner_count, d, nullptr);
    blz_task *task = nullptr;
    d->spawn_handle = blz_spawn(d->pool, inner_count, d, &task);
    d->join = d->spawn_handle == BLZ_OK ? blz_join(task) : 98;
    d->group_spawn = blz_group_spawn(d->group, inner_count, d);
    d->call = blz_call(d->pool, inner_count, d);
    d->fork_join = blz_fork_join(d->pool, inner_count, d, inner_count, d);
    d->parallel_for = blz_parallel_for(d->pool, 0, 10, 1, inner_count_range, d);
    // A group of its own, made now: accepted like its spawns (blitz.h).
    blz_group *mine = nullptr;
    d->group_create = blz_group_create(d->pool, &mine);
    if (d->group_create != BLZ_OK) return;
    d->new_group_spawn = blz_group_spawn(mine, inner_count, d);
    d->new_group_destroy = blz_group_destroy(mine);
}

}  // namespace

TEST_CASE("work from outside is refused while the pool is destroyed; the workers' own is accepted",
          "[api][lifecycle]") {
    Watchdog watchdog("spawn during destroy", seconds(120));
    g_must_not_run.store(0);
    blz_pool_config config;
    blz_pool_config_init(&config);
    config.num_threads = 2;
    DuringDestroy d;
    REQUIRE(blz_pool_create(&config, &d.pool) == BLZ_OK);
    REQUIRE(blz_group_create(d.pool, &d.group) == BLZ_OK);
    Pool other(1);

    blz_task *blocker = nullptr;
    REQUIRE(blz_spawn(d.pool, blocking_task, &d, &blocker) == BLZ_OK);
    spin_until([&] { return d.started.load(); });

    std::atomic<bool> destroy_returned{false};
    blz_status destroy_status = 99;
    std::thread destroyer([&] {
        destroy_status = blz_pool_destroy(d.pool);
        destroy_returned.store(true);
    });

    // Until destroy closes the pool, spawns are accepted (and must all run).
    std::atomic<int> accepted_ran{0};
    int accepted = 0;
    blz_status polled;
    for (;;) {
        polled = blz_spawn(d.pool, count_into, &accepted_ran, nullptr);
        if (polled != BLZ_OK) break;
        ++accepted;
        std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
    CHECK(polled == BLZ_ESHUTDOWN);

    // Every entry point from outside is refused now, and nothing runs.
    blz_task *task = sentinel<blz_task>();
    CHECK(blz_spawn(d.pool, must_not_run, nullptr, &task) == BLZ_ESHUTDOWN);
    CHECK(task == sentinel<blz_task>());
    CHECK(blz_spawn(d.pool, must_not_run, nullptr, nullptr) == BLZ_ESHUTDOWN);
    CHECK(blz_call(d.pool, must_not_run, nullptr) == BLZ_ESHUTDOWN);
    CHECK(blz_isolate(d.pool, must_not_run, nullptr) == BLZ_ESHUTDOWN);
    CHECK(blz_fork_join(d.pool, must_not_run, nullptr, must_not_run, nullptr) == BLZ_ESHUTDOWN);
    CHECK(blz_parallel_for(d.pool, 0, 100, 0, must_not_run_range, nullptr) == BLZ_ESHUTDOWN);
    CHECK(blz_group_spawn(d.group, must_not_run, nullptr) == BLZ_ESHUTDOWN);
    blz_group *late_group = sentinel<blz_group>();
    CHECK(blz_group_create(d.pool, &late_group) == BLZ_ESHUTDOWN);
    CHECK(late_group == sentinel<blz_group>());

    // Another pool's worker is outside this pool too.
    struct FromOther {
        blz_status spawn = 99, call = 99, fork_join = 99, parallel_for = 99, group_spawn = 99;
    } from_other;
    REQUIRE(on_worker(other, [&] {
                from_other.spawn = blz_spawn(d.pool, must_not_run, nullptr, nullptr);
                from_other.call = blz_call(d.pool, must_not_run, nullptr);
                from_other.fork_join = blz_fork_join(d.pool, must_not_run, nullptr, must_not_run, nullptr);
                from_other.parallel_for = blz_parallel_for(d.pool, 0, 100, 0, must_not_run_range, nullptr);
                from_other.group_spawn = blz_group_spawn(d.group, must_not_run, nullptr);
            }) == BLZ_OK);
    CHECK(from_other.spawn == BLZ_ESHUTDOWN);
    CHECK(from_other.call == BLZ_ESHUTDOWN);
    CHECK(from_other.fork_join == BLZ_ESHUTDOWN);
    CHECK(from_other.parallel_for == BLZ_ESHUTDOWN);
    CHECK(from_other.group_spawn == BLZ_ESHUTDOWN);

    // destroy cannot have returned: the blocking task has not finished.
    CHECK_FALSE(destroy_returned.load());

    d.release.store(true);
    destroyer.join();
    CHECK(destroy_status == BLZ_OK);

    // What the running task submitted during destroy was accepted and ran
    // before destroy returned: 1 + 1 + 1 (group) + 1 + 2 + 10 + 1 (its own group).
    CHECK(d.spawn_detached == BLZ_OK);
    CHECK(d.spawn_handle == BLZ_OK);
    CHECK(d.join == BLZ_OK);
    CHECK(d.group_spawn == BLZ_OK);
    CHECK(d.call == BLZ_OK);
    CHECK(d.fork_join == BLZ_OK);
    CHECK(d.parallel_for == BLZ_OK);
    CHECK(d.group_create == BLZ_OK);
    CHECK(d.new_group_spawn == BLZ_OK);
    CHECK(d.new_group_destroy == BLZ_OK);
    CHECK(d.inner_ran.load() == 17);
    CHECK(accepted_ran.load() == accepted);
    CHECK(g_must_not_run.load() == 0);

    // The task handle outlives the pool.
    CHECK(blz_join(blocker) == BLZ_OK);

    // The still-alive group: its task ran, new spawns are refused (also
    // through blz_spawn_ex with the group and no pool), it frees.
    CHECK(blz_group_wait(d.group) == BLZ_OK);
    CHECK(blz_group_spawn(d.group, must_not_run, nullptr) == BLZ_ESHUTDOWN);
    blz_spawn_options opts;
    blz_spawn_options_init(&opts);
    opts.group = d.group;
    task = sentinel<blz_task>();
    CHECK(blz_spawn_ex(nullptr, must_not_run, nullptr, &opts, &task) == BLZ_ESHUTDOWN);
    CHECK(task == sentinel<blz_task>());
    CHECK(blz_group_destroy(d.group) == BLZ_OK);
    CHECK(g_must_not_run.load() == 0);
}

TEST_CASE("destroy right after 100000 detached spawns runs every one of them", "[api][lifecycle]") {
    Watchdog watchdog("nothing dropped", seconds(120));
    constexpr int kTasks = 100000;
    std::atomic<int> ran{0};
    blz_pool *pool = nullptr;
    REQUIRE(blz_pool_create(nullptr, &pool) == BLZ_OK);
    int accepted = 0;
    for (int i = 0; i < kTasks; ++i) accepted += blz_spawn(pool, count_into, &ran, nullptr) == BLZ_OK;
    CHECK(accepted == kTasks);
    CHECK(blz_pool_destroy(pool) == BLZ_OK);
    CHECK(ran.load() == kTasks);
}

namespace {

struct Tree {
    blz_pool *pool;
    std::atomic<int> *nodes;
    std::atomic<int> *refused;
    int depth;
};

void tree_node(void *arg) {
    std::unique_ptr<Tree> t(static_cast<Tree *>(arg));
    t->nodes->fetch_add(1);
    if (t->depth == 0) return;
    for (int i = 0; i < 2; ++i) {
        auto *child = new Tree{t->pool, t->nodes, t->refused, t->depth - 1};
        if (blz_spawn(t->pool, tree_node, child, nullptr) != BLZ_OK) {
            t->refused->fetch_add(1);
            delete child;
        }
    }
}

}  // namespace

TEST_CASE("destroy right after spawning a tree of detached tasks runs the whole tree", "[api][lifecycle]") {
    Watchdog watchdog("tree during destroy", seconds(120));
    constexpr int kDepth = 14;  // 2^15 - 1 nodes
    std::atomic<int> nodes{0};
    std::atomic<int> refused{0};
    blz_pool *pool = nullptr;
    REQUIRE(blz_pool_create(nullptr, &pool) == BLZ_OK);
    REQUIRE(blz_spawn(pool, tree_node, new Tree{pool, &nodes, &refused, kDepth}, nullptr) == BLZ_OK);
    CHECK(blz_pool_destroy(pool) == BLZ_OK);
    CHECK(refused.load() == 0);  // workers' spawns inside accepted work are accepted
    CHECK(nodes.load() == (1 << (kDepth + 1)) - 1);
}

TEST_CASE("a task handle stays valid after its pool is destroyed", "[api][lifecycle]") {
    Watchdog watchdog("handle outlives pool", seconds(60));
    blz_pool *pool = nullptr;
    REQUIRE(blz_pool_create(nullptr, &pool) == BLZ_OK);
    std::atomic<int> ran{0};
    auto thrower = [&] {
        ran.fetch_add(1);
        throw std::runtime_error("task failure");
    };
    blz_task *ok_task = nullptr;
    blz_task *failed_task = nullptr;
    REQUIRE(blz_spawn(pool, count_into, &ran, &ok_task) == BLZ_OK);
    REQUIRE(blz_spawn(pool, thunk_of(thrower), &thrower, &failed_task) == BLZ_OK);
    REQUIRE(blz_pool_destroy(pool) == BLZ_OK);
    CHECK(ran.load() == 2);
    CHECK(blz_join(ok_task) == BLZ_OK);
    CHECK(blz_join(failed_task) == BLZ_ETASK);
}

TEST_CASE("destroy waits for the pending tasks of a live group", "[api][lifecycle]") {
    Watchdog watchdog("destroy with a live group", seconds(60));
    blz_pool *pool = nullptr;
    REQUIRE(blz_pool_create(nullptr, &pool) == BLZ_OK);
    blz_group *group = nullptr;
    REQUIRE(blz_group_create(pool, &group) == BLZ_OK);
    std::atomic<int> ran{0};
    auto slowish = [&] {
        std::this_thread::sleep_for(milliseconds(2));
        ran.fetch_add(1);
    };
    for (int i = 0; i < 50; ++i) REQUIRE(blz_group_spawn(group, thunk_of(slowish), &slowish) == BLZ_OK);
    CHECK(blz_pool_destroy(pool) == BLZ_OK);
    CHECK(ran.load() == 50);
    CHECK(blz_group_spawn(group, must_not_run, nullptr) == BLZ_ESHUTDOWN);
    CHECK(blz_group_wait(group) == BLZ_OK);
    CHECK(blz_group_destroy(group) == BLZ_OK);
}

// ===========================================================================
// C++ exceptions in tasks

namespace {

struct Side {
    std::atomic<int> before_throw{0};
    std::atomic<int> ran{0};
};
struct NotAnException {
    int value;
};

void throw_runtime(void *arg) {
    static_cast<Side *>(arg)->before_throw.fetch_add(1);
    throw std::runtime_error("thrown by a task");
}
void throw_int(void *arg) {
    static_cast<Side *>(arg)->before_throw.fetch_add(1);
    throw 42;
}
void throw_struct(void *arg) {
    static_cast<Side *>(arg)->before_throw.fetch_add(1);
    throw NotAnException{7};
}
void run_normally(void *arg) { static_cast<Side *>(arg)->ran.fetch_add(1); }

struct Outcome {
    std::string what;
    blz_status status;
    blz_status expected;
    bool side_effects_ok;
};

constexpr size_t kForCount = 1000;
struct ForCtx {
    std::atomic<int> visits[kForCount];
};
void visit_then_throw(void *arg, size_t lo, size_t hi) {
    auto *c = static_cast<ForCtx *>(arg);
    bool throw_now = false;
    for (size_t i = lo; i < hi; ++i) {
        c->visits[i].fetch_add(1);
        throw_now |= i % 100 == 0;
    }
    if (throw_now) throw std::out_of_range("piece failed");
}

// Every way an exception can end a piece of user code, from wherever this
// runs; returns what each call gave. `exceptions` receives how many were
// thrown (all kinds) and `task_exceptions` how many by spawned tasks.
std::vector<Outcome> exception_scenarios(blz_pool *pool, int &exceptions, int &task_exceptions) {
    std::vector<Outcome> out;
    exceptions = 0;
    task_exceptions = 0;
    {
        Side a, b;
        blz_status st = blz_fork_join(pool, throw_runtime, &a, run_normally, &b);
        out.push_back({"fork_join, a throws", st, BLZ_ETASK, a.before_throw == 1 && b.ran == 1});
        exceptions += 1;
    }
    {
        Side a, b;
        blz_status st = blz_fork_join(pool, run_normally, &a, throw_int, &b);
        out.push_back({"fork_join, b throws", st, BLZ_ETASK, a.ran == 1 && b.before_throw == 1});
        exceptions += 1;
    }
    {
        Side a, b;
        blz_status st = blz_fork_join(pool, throw_struct, &a, throw_runtime, &b);
        out.push_back({"fork_join, both throw", st, BLZ_ETASK, a.before_throw == 1 && b.before_throw == 1});
        exceptions += 2;
    }
    {
        Side a, b;
        blz_status st = blz_fork_join(pool, run_normally, &a, run_normally, &b);
        out.push_back({"fork_join after failures, none throws", st, BLZ_OK, a.ran == 1 && b.ran == 1});
    }
    {
        Side s;
        blz_status st = blz_call(pool, throw_runtime, &s);
        out.push_back({"call throws", st, BLZ_ETASK, s.before_throw == 1});
        exceptions += 1;
    }
    {
        Side s;
        blz_status st = blz_call(pool, run_normally, &s);
        out.push_back({"call after a failure", st, BLZ_OK, s.ran == 1});
    }
    for (size_t grain : {size_t{1}, size_t{0}, size_t{37}}) {
        auto c = std::make_unique<ForCtx>();
        for (auto &v : c->visits) v.store(0);
        blz_status st = blz_parallel_for(pool, 0, kForCount, grain, visit_then_throw, c.get());
        bool once = true;
        for (auto &v : c->visits) once &= v.load() == 1;
        out.push_back({format("parallel_for with throwing pieces, grain %lu", grain), st, BLZ_ETASK, once});
        // The pieces that threw: those containing a multiple of 100.
        if (grain == 1) exceptions += 10;
        // For grain 0 and 37 the piece count depends on the split; not counted.
    }
    {
        Side s;
        blz_task *task = nullptr;
        blz_status spawned = blz_spawn(pool, throw_int, &s, &task);
        blz_status st = spawned == BLZ_OK ? blz_join(task) : spawned;
        out.push_back({"spawn + join, task throws", st, BLZ_ETASK, s.before_throw == 1});
        exceptions += 1;
        task_exceptions += 1;
    }
    {
        Side s;
        blz_group *group = nullptr;
        blz_status created = blz_group_create(pool, &group);
        out.push_back({"group_create", created, BLZ_OK, true});
        if (created == BLZ_OK) {
            blz_group_spawn(group, run_normally, &s);
            blz_group_spawn(group, throw_runtime, &s);
            blz_group_spawn(group, run_normally, &s);
            blz_status first = blz_group_wait(group);
            out.push_back({"group wait after a throwing task", first, BLZ_ETASK,
                           s.ran == 2 && s.before_throw == 1});
            blz_status second = blz_group_wait(group);
            out.push_back({"second group wait (failure reported once)", second, BLZ_OK, true});
            blz_group_spawn(group, throw_int, &s);
            blz_group_spawn(group, throw_struct, &s);
            blz_status two = blz_group_wait(group);
            out.push_back({"group wait after two throwing tasks", two, BLZ_ETASK, s.before_throw == 3});
            blz_group_spawn(group, run_normally, &s);
            blz_status destroyed = blz_group_destroy(group);
            out.push_back({"group destroy after the failures were reported", destroyed, BLZ_OK, s.ran == 3});
            exceptions += 3;
            task_exceptions += 3;
        }
    }
    return out;
}

void check_outcomes(const std::vector<Outcome> &outcomes) {
    for (const Outcome &o : outcomes) {
        INFO(o.what << ": status " << o.status << " (" << blz_status_string(o.status) << ")");
        CHECK(o.status == o.expected);
        CHECK(o.side_effects_ok);
    }
}

// Spawns `count` detached throwing tasks; they end in the pool later.
blz_status spawn_detached_throwers(blz_pool *pool, Side &side, int count) {
    for (int i = 0; i < count; ++i) {
        blz_status st = blz_spawn(pool, i % 2 ? throw_runtime : throw_struct, &side, nullptr);
        if (st != BLZ_OK) return st;
    }
    return BLZ_OK;
}

// Waits until tasks_failed reaches `expected` and the pool is idle, then
// returns the settled count (an overcount shows as a larger value).
uint64_t settled_tasks_failed(blz_pool *pool, uint64_t expected) {
    spin_until([&] { return stats_of(pool).tasks_failed >= expected; });
    REQUIRE(blz_test::wait_until_asleep(pool, milliseconds(30000)));
    return stats_of(pool).tasks_failed;
}

}  // namespace

TEST_CASE("C++ exceptions in tasks become BLZ_ETASK, from outside the pool", "[api][lifecycle][exceptions]") {
    Watchdog watchdog("exceptions from outside", seconds(120));
    Pool pool(2);
    int exceptions = 0, task_exceptions = 0;
    check_outcomes(exception_scenarios(pool, exceptions, task_exceptions));
    // Every spawned task that threw is counted; nothing beyond the exceptions thrown.
    blz_stats stats = stats_of(pool);
    CHECK(stats.tasks_failed >= static_cast<uint64_t>(task_exceptions));
    CHECK(fib(pool, 16) == 987);  // the pool keeps working
}

TEST_CASE("C++ exceptions in tasks become BLZ_ETASK, from inside a worker of the pool",
          "[api][lifecycle][exceptions]") {
    Watchdog watchdog("exceptions from a worker", seconds(120));
    Pool pool(2);
    int exceptions = 0, task_exceptions = 0;
    std::vector<Outcome> outcomes;
    blz_pool *p = pool;
    REQUIRE(on_worker(p, [&] { outcomes = exception_scenarios(p, exceptions, task_exceptions); }) == BLZ_OK);
    check_outcomes(outcomes);
    CHECK(stats_of(pool).tasks_failed >= static_cast<uint64_t>(task_exceptions));
    CHECK(fib(pool, 16) == 987);
}

TEST_CASE("C++ exceptions in tasks become BLZ_ETASK, from a worker of another pool", "[api][lifecycle][exceptions]") {
    Watchdog watchdog("exceptions from another pool's worker", seconds(120));
    Pool pool(2);
    Pool other(1);
    int exceptions = 0, task_exceptions = 0;
    std::vector<Outcome> outcomes;
    blz_pool *p = pool;
    REQUIRE(on_worker(other, [&] { outcomes = exception_scenarios(p, exceptions, task_exceptions); }) == BLZ_OK);
    check_outcomes(outcomes);
    CHECK(stats_of(pool).tasks_failed >= static_cast<uint64_t>(task_exceptions));
    CHECK(stats_of(other).tasks_failed == 0);  // the failures belong to the pool that ran them
}

TEST_CASE("tasks_failed counts exactly the exceptions of spawned tasks", "[api][lifecycle][exceptions]") {
    Watchdog watchdog("tasks_failed", seconds(120));
    constexpr int kDetached = 25;

    SECTION("detached throwing tasks spawned from outside") {
        Pool pool(2);
        Side side;
        REQUIRE(spawn_detached_throwers(pool, side, kDetached) == BLZ_OK);
        CHECK(settled_tasks_failed(pool, kDetached) == kDetached);
        CHECK(side.before_throw.load() == kDetached);
    }
    SECTION("detached throwing tasks spawned from a worker") {
        Pool pool(2);
        Side side;
        blz_status spawned = 99;
        blz_pool *p = pool;
        REQUIRE(on_worker(p, [&] { spawned = spawn_detached_throwers(p, side, kDetached); }) == BLZ_OK);
        CHECK(spawned == BLZ_OK);
        CHECK(settled_tasks_failed(pool, kDetached) == kDetached);
        CHECK(side.before_throw.load() == kDetached);
    }
    SECTION("joined and group tasks") {
        Pool pool(2);
        Side side;
        blz_task *t1 = nullptr;
        blz_task *t2 = nullptr;
        REQUIRE(blz_spawn(pool, throw_runtime, &side, &t1) == BLZ_OK);
        REQUIRE(blz_spawn(pool, run_normally, &side, &t2) == BLZ_OK);
        CHECK(blz_join(t1) == BLZ_ETASK);
        CHECK(blz_join(t2) == BLZ_OK);
        blz_group *group = nullptr;
        REQUIRE(blz_group_create(pool, &group) == BLZ_OK);
        for (int i = 0; i < 4; ++i) REQUIRE(blz_group_spawn(group, throw_int, &side) == BLZ_OK);
        for (int i = 0; i < 4; ++i) REQUIRE(blz_group_spawn(group, run_normally, &side) == BLZ_OK);
        CHECK(blz_group_destroy(group) == BLZ_ETASK);
        CHECK(settled_tasks_failed(pool, 5) == 5);
        CHECK(side.before_throw.load() == 5);
        CHECK(side.ran.load() == 5);
    }
    SECTION("all kinds of user code: at least the tasks, at most every exception thrown") {
        Pool pool(2);
        int exceptions = 0, task_exceptions = 0;
        check_outcomes(exception_scenarios(pool, exceptions, task_exceptions));
        // grain 0 and 37 pieces were not counted in `exceptions`: at most
        // 10 throwing pieces each.
        uint64_t failed = settled_tasks_failed(pool, static_cast<uint64_t>(task_exceptions));
        CHECK(failed >= static_cast<uint64_t>(task_exceptions));
        CHECK(failed <= static_cast<uint64_t>(exceptions + 20));
    }
}

// ===========================================================================
// Worker hooks and thread names

namespace {

constexpr uint32_t kMaxHookWorkers = 8;

struct HookCtx {
    std::atomic<int> starts[kMaxHookWorkers];
    std::atomic<int> stops[kMaxHookWorkers];
    std::atomic<int> bad_user{0};
    std::atomic<int> bad_index{0};
    std::atomic<int> stop_on_other_thread{0};
    uint32_t num_threads = 0;
    HookCtx() {
        for (auto &s : starts) s.store(0);
        for (auto &s : stops) s.store(0);
    }
};

thread_local const void *tl_started_for = nullptr;
thread_local const void *tl_stopped_for = nullptr;
thread_local int32_t tl_start_index = -1;

void start_hook(void *user, uint32_t index) {
    auto *ctx = static_cast<HookCtx *>(user);
    if (index >= ctx->num_threads) {
        ctx->bad_index.fetch_add(1);
        return;
    }
    ctx->starts[index].fetch_add(1);
    tl_started_for = user;
    tl_start_index = static_cast<int32_t>(index);
}

void stop_hook(void *user, uint32_t index) {
    auto *ctx = static_cast<HookCtx *>(user);
    if (index >= ctx->num_threads) {
        ctx->bad_index.fetch_add(1);
        return;
    }
    ctx->stops[index].fetch_add(1);
    if (tl_started_for != user || tl_start_index != static_cast<int32_t>(index)) {
        ctx->stop_on_other_thread.fetch_add(1);
    }
    tl_stopped_for = user;
}

std::atomic<void *> g_expected_user{nullptr};
std::atomic<int> g_wrong_user{0};
void start_hook_checked(void *user, uint32_t index) {
    if (user != g_expected_user.load()) {
        g_wrong_user.fetch_add(1);
        return;
    }
    start_hook(user, index);
}
void stop_hook_checked(void *user, uint32_t index) {
    if (user != g_expected_user.load()) {
        g_wrong_user.fetch_add(1);
        return;
    }
    stop_hook(user, index);
}

struct JobCheck {
    blz_pool *pool;
    HookCtx *ctx;
    std::atomic<int> jobs{0};
    std::atomic<int> before_start{0};
    std::atomic<int> after_stop{0};
    std::atomic<int> index_mismatch{0};
};
void job_check(void *arg, size_t lo, size_t hi) {
    auto *j = static_cast<JobCheck *>(arg);
    for (size_t i = lo; i < hi; ++i) {
        j->jobs.fetch_add(1);
        if (tl_started_for != j->ctx) j->before_start.fetch_add(1);
        if (tl_stopped_for == j->ctx) j->after_stop.fetch_add(1);
        if (blz_worker_index(j->pool) != tl_start_index) j->index_mismatch.fetch_add(1);
    }
}
void job_check_task(void *arg) { job_check(arg, 0, 1); }

// Runs `n` tasks that wait for each other, so each of the pool's `n`
// workers runs one; each records f(worker index) under a lock.
template <class F>
void on_every_worker(blz_pool *pool, uint32_t n, F f) {
    struct Ctx {
        blz_pool *pool;
        uint32_t n;
        F *f;
        std::atomic<uint32_t> arrived{0};
        std::atomic<uint32_t> finished{0};
    } ctx{pool, n, &f};
    auto task = [](void *arg) {
        auto *c = static_cast<Ctx *>(arg);
        c->arrived.fetch_add(1);
        while (c->arrived.load() < c->n) std::this_thread::yield();
        (*c->f)(blz_worker_index(c->pool));
        c->finished.fetch_add(1);
    };
    for (uint32_t i = 0; i < n; ++i) REQUIRE(blz_spawn(pool, task, &ctx, nullptr) == BLZ_OK);
    spin_until([&] { return ctx.finished.load() == n; });
}

std::vector<std::string> worker_names(blz_pool *pool, uint32_t n, int &bad_index) {
    std::vector<std::string> names(n);
    std::mutex mutex;
    bad_index = 0;
    on_every_worker(pool, n, [&](int32_t index) {
        char buf[64];
        std::memset(buf, 0, sizeof(buf));
        int rc = pthread_getname_np(pthread_self(), buf, sizeof(buf));
        std::lock_guard<std::mutex> lock(mutex);
        if (index < 0 || static_cast<uint32_t>(index) >= n) {
            ++bad_index;
            return;
        }
        names[static_cast<size_t>(index)] = rc == 0 ? std::string(buf) : "<pthread_getname_np failed>";
    });
    return names;
}

blz_pool *create_named_pool(uint32_t n, const char *prefix) {
    blz_pool_config config;
    blz_pool_config_init(&config);
    config.num_threads = n;
    config.thread_name = prefix;
    blz_pool *pool = nullptr;
    REQUIRE(blz_pool_create(&config, &pool) == BLZ_OK);
    return pool;
}

}  // namespace

TEST_CASE("on_thread_start and on_thread_stop run once per worker with the user pointer", "[api][lifecycle][hooks]") {
    Watchdog watchdog("hooks", seconds(120));
    for (uint32_t n : {1u, 2u, 3u, 5u}) {
        DYNAMIC_SECTION(n << " workers") {
            HookCtx ctx;
            ctx.num_threads = n;
            g_expected_user.store(&ctx);
            g_wrong_user.store(0);
            blz_pool_config config;
            blz_pool_config_init(&config);
            config.num_threads = n;
            config.on_thread_start = start_hook_checked;
            config.on_thread_stop = stop_hook_checked;
            config.user = &ctx;
            blz_pool *pool = nullptr;
            REQUIRE(blz_pool_create(&config, &pool) == BLZ_OK);

            // Jobs of every kind: each checks that its worker's start hook ran
            // on this thread before it, and its stop hook did not yet.
            JobCheck jobs{pool, &ctx};
            REQUIRE(blz_parallel_for(pool, 0, 2000, 1, job_check, &jobs) == BLZ_OK);
            for (int i = 0; i < 200; ++i) REQUIRE(blz_spawn(pool, job_check_task, &jobs, nullptr) == BLZ_OK);
            on_every_worker(pool, n, [&](int32_t) { job_check(&jobs, 0, 1); });

            REQUIRE(blz_pool_destroy(pool) == BLZ_OK);
            // By the time destroy returned, every stop hook has run.
            CHECK(jobs.jobs.load() == 2000 + 200 + static_cast<int>(n));
            CHECK(jobs.before_start.load() == 0);
            CHECK(jobs.after_stop.load() == 0);
            CHECK(jobs.index_mismatch.load() == 0);
            CHECK(g_wrong_user.load() == 0);
            CHECK(ctx.bad_index.load() == 0);
            CHECK(ctx.stop_on_other_thread.load() == 0);
            for (uint32_t i = 0; i < kMaxHookWorkers; ++i) {
                INFO("worker " << i);
                CHECK(ctx.starts[i].load() == (i < n ? 1 : 0));
                CHECK(ctx.stops[i].load() == (i < n ? 1 : 0));
            }
        }
    }
}

namespace {
std::atomic<int> g_throwing_hooks{0};
void throwing_start_hook(void *, uint32_t) {
    g_throwing_hooks.fetch_add(1);
    throw std::runtime_error("start hook");
}
void throwing_stop_hook(void *, uint32_t) {
    g_throwing_hooks.fetch_add(1);
    throw 5;
}
}  // namespace

TEST_CASE("exceptions thrown by worker hooks are ignored", "[api][lifecycle][hooks]") {
    Watchdog watchdog("throwing hooks", seconds(60));
    g_throwing_hooks.store(0);
    blz_pool_config config;
    blz_pool_config_init(&config);
    config.num_threads = 2;
    config.on_thread_start = throwing_start_hook;
    config.on_thread_stop = throwing_stop_hook;
    blz_pool *pool = nullptr;
    REQUIRE(blz_pool_create(&config, &pool) == BLZ_OK);
    CHECK(fib(pool, 15) == 610);
    CHECK(stats_of(pool).tasks_failed == 0);  // a hook is not a task
    CHECK(blz_pool_destroy(pool) == BLZ_OK);
    CHECK(g_throwing_hooks.load() == 4);
}

TEST_CASE("worker thread names", "[api][lifecycle][names]") {
    Watchdog watchdog("thread names", seconds(60));
    const uint32_t n = 3;
    int bad_index = 0;

    SECTION("default prefix blz") {
        blz_pool *pool = create_named_pool(n, nullptr);
        std::vector<std::string> names = worker_names(pool, n, bad_index);
        REQUIRE(blz_pool_destroy(pool) == BLZ_OK);
        CHECK(bad_index == 0);
        for (uint32_t i = 0; i < n; ++i) CHECK(names[i] == format("blz-%lu", i));
    }
    SECTION("prefix wrk") {
        blz_pool *pool = create_named_pool(n, "wrk");
        std::vector<std::string> names = worker_names(pool, n, bad_index);
        REQUIRE(blz_pool_destroy(pool) == BLZ_OK);
        CHECK(bad_index == 0);
        for (uint32_t i = 0; i < n; ++i) CHECK(names[i] == format("wrk-%lu", i));
    }
    SECTION("a long prefix is truncated to fit 15 bytes") {
        const std::string prefix = "averyveryverylongworkerprefix";
        blz_pool *pool = create_named_pool(n, prefix.c_str());
        std::vector<std::string> names = worker_names(pool, n, bad_index);
        REQUIRE(blz_pool_destroy(pool) == BLZ_OK);
        CHECK(bad_index == 0);
        for (uint32_t i = 0; i < n; ++i) {
            const std::string &name = names[i];
            const std::string suffix = format("-%lu", i);
            INFO("worker " << i << " is named '" << name << "'");
            CHECK(name.size() <= 15);
            REQUIRE(name.size() > suffix.size());
            CHECK(name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0);
            const std::string kept = name.substr(0, name.size() - suffix.size());
            CHECK(!kept.empty());
            CHECK(prefix.compare(0, kept.size(), kept) == 0);  // a prefix of the prefix
        }
    }
}

// ===========================================================================
// fork()

namespace {

// What a child checks on a pool created by its parent: every call is
// refused with EFORK, nothing runs, destroy frees without hanging, and a
// new pool works.
struct ForkedState {
    blz_pool *old_pool = nullptr;
    blz_group *old_group = nullptr;       // may be null
    blz_task *pending_task = nullptr;     // may be null: a task that has not run
    bool destroy_pool_first = false;      // destroy the old pool before the group and the task
    blz_task *finished_ok = nullptr;      // may be null: a task that returned before the fork
    blz_task *finished_failed = nullptr;  // may be null: a task that threw before the fork
};

std::atomic<int> g_child_ran{0};
void child_count(void *) { g_child_ran.fetch_add(1); }
void child_count_range(void *, size_t, size_t) { g_child_ran.fetch_add(1); }


int checks_in_forked_child(const ForkedState &state) {
    ChildChecks c;
    g_child_ran.store(0);
    blz_pool *old = state.old_pool;

    CHILD_CHECK(c, blz_worker_index(old) == -1);
    blz_task *task = sentinel<blz_task>();
    CHILD_CHECK(c, blz_spawn(old, child_count, nullptr, &task) == BLZ_EFORK);
    CHILD_CHECK(c, task == sentinel<blz_task>());
    CHILD_CHECK(c, blz_spawn(old, child_count, nullptr, nullptr) == BLZ_EFORK);
    CHILD_CHECK(c, blz_call(old, child_count, nullptr) == BLZ_EFORK);
    CHILD_CHECK(c, blz_isolate(old, child_count, nullptr) == BLZ_EFORK);
    CHILD_CHECK(c, blz_fork_join(old, child_count, nullptr, child_count, nullptr) == BLZ_EFORK);
    CHILD_CHECK(c, blz_parallel_for(old, 0, 100, 0, child_count_range, nullptr) == BLZ_EFORK);
    blz_group *group = sentinel<blz_group>();
    CHILD_CHECK(c, blz_group_create(old, &group) == BLZ_EFORK);
    CHILD_CHECK(c, group == sentinel<blz_group>());
    blz_stats stats;
    std::memset(&stats, 0xAB, sizeof(stats));
    stats.struct_size = sizeof(stats);
    CHILD_CHECK(c, blz_pool_stats(old, &stats) == BLZ_EFORK);
    // A task that ended before the fork reports its result as usual.
    if (state.finished_ok != nullptr) CHILD_CHECK(c, blz_join(state.finished_ok) == BLZ_OK);
    if (state.finished_failed != nullptr) CHILD_CHECK(c, blz_join(state.finished_failed) == BLZ_ETASK);
    if (state.destroy_pool_first) CHILD_CHECK(c, blz_pool_destroy(old) == BLZ_EFORK);
    if (state.old_group != nullptr) {
        CHILD_CHECK(c, blz_group_spawn(state.old_group, child_count, nullptr) == BLZ_EFORK);
        CHILD_CHECK(c, blz_group_wait(state.old_group) == BLZ_EFORK);
        CHILD_CHECK(c, blz_group_destroy(state.old_group) == BLZ_EFORK);
    }
    if (state.pending_task != nullptr) CHILD_CHECK(c, blz_join(state.pending_task) == BLZ_EFORK);
    if (!state.destroy_pool_first) CHILD_CHECK(c, blz_pool_destroy(old) == BLZ_EFORK);
    CHILD_CHECK(c, g_child_ran.load() == 0);
    // Not where the sanitizer runtime cannot start threads in a fork child
    // (tests/support.hpp). These parents are idle or blocked at the fork,
    // so the child's heap is safe even under ASan.
    if (!blz_test::kForkChildMayStartThreads) return c.exit_code();

    // A new pool in the child works.
    blz_pool_config config;
    blz_pool_config_init(&config);
    config.num_threads = 2;
    blz_pool *fresh = nullptr;
    CHILD_CHECK(c, blz_pool_create(&config, &fresh) == BLZ_OK);
    if (fresh != nullptr) {
        CHILD_CHECK(c, blz_worker_index(fresh) == -1);
        CHILD_CHECK(c, fib(fresh, 20) == 6765);
        blz_test::IndexSum sum;
        CHILD_CHECK(c, blz_parallel_for(fresh, 0, 10000, 0, blz_test::IndexSum::add_range, &sum) == BLZ_OK);
        CHILD_CHECK(c, sum.total.load() == 10000ull * 9999ull / 2);
        blz_task *t = nullptr;
        CHILD_CHECK(c, blz_spawn(fresh, child_count, nullptr, &t) == BLZ_OK);
        if (t != nullptr) CHILD_CHECK(c, blz_join(t) == BLZ_OK);
        blz_group *g = nullptr;
        CHILD_CHECK(c, blz_group_create(fresh, &g) == BLZ_OK);
        if (g != nullptr) {
            CHILD_CHECK(c, blz_group_spawn(g, child_count, nullptr) == BLZ_OK);
            CHILD_CHECK(c, blz_group_destroy(g) == BLZ_OK);
        }
        CHILD_CHECK(c, g_child_ran.load() == 2);
        CHILD_CHECK(c, blz_pool_destroy(fresh) == BLZ_OK);
    }
    return c.exit_code();
}

}  // namespace

TEST_CASE("fork() while the pool is idle: the child gets EFORK and can make a new pool", "[api][lifecycle][fork]") {
    Watchdog watchdog("fork idle", seconds(120));
    Pool pool(2);
    blz_group *group = nullptr;
    REQUIRE(blz_group_create(pool, &group) == BLZ_OK);
    CHECK(fib(pool, 15) == 610);  // some work first
    std::atomic<int> ran{0};
    auto thrower = [&] {
        ran.fetch_add(1);
        throw std::runtime_error("before the fork");
    };
    blz_task *finished_ok = nullptr;
    blz_task *finished_failed = nullptr;
    REQUIRE(blz_spawn(pool, count_into, &ran, &finished_ok) == BLZ_OK);
    REQUIRE(blz_spawn(pool, thunk_of(thrower), &thrower, &finished_failed) == BLZ_OK);
    spin_until([&] { return ran.load() == 2; });
    // Asleep: both tasks have ended completely (workers sleep only between jobs).
    REQUIRE(blz_test::wait_until_asleep(pool, milliseconds(30000)));

    ForkedState state{pool, group, nullptr, false, finished_ok, finished_failed};
    int status = run_forked([&] { return checks_in_forked_child(state); });
    INFO(describe_child(status));
    CHECK(child_passed(status));

    // The parent's pool, group and handles keep working after the fork.
    CHECK(blz_join(finished_ok) == BLZ_OK);
    CHECK(blz_join(finished_failed) == BLZ_ETASK);
    CHECK(fib(pool, 18) == 2584);
    REQUIRE(blz_group_spawn(group, count_into, &ran) == BLZ_OK);
    CHECK(blz_group_destroy(group) == BLZ_OK);
    CHECK(ran.load() == 3);
    CHECK(pool.destroy() == BLZ_OK);
}

TEST_CASE("fork() while a long task runs: the child gets EFORK for the task, the group and the pool",
          "[api][lifecycle][fork]") {
    Watchdog watchdog("fork while busy", seconds(120));
    Pool pool(2);
    std::atomic<bool> started{false};
    std::atomic<bool> release{false};
    auto long_task = [&] {
        started.store(true);
        while (!release.load()) std::this_thread::sleep_for(std::chrono::microseconds(100));
    };
    blz_task *running = nullptr;
    REQUIRE(blz_spawn(pool, thunk_of(long_task), &long_task, &running) == BLZ_OK);
    blz_group *group = nullptr;
    REQUIRE(blz_group_create(pool, &group) == BLZ_OK);
    REQUIRE(blz_group_spawn(group, thunk_of(long_task), &long_task) == BLZ_OK);
    spin_until([&] { return started.load(); });

    for (bool pool_first : {false, true}) {
        INFO("in the child, the pool is destroyed " << (pool_first ? "before" : "after") << " the group");
        ForkedState state{pool, group, running, pool_first, nullptr, nullptr};
        int status = run_forked([&] { return checks_in_forked_child(state); });
        INFO(describe_child(status));
        CHECK(child_passed(status));
    }

    // In the parent, the task and the group finish normally.
    release.store(true);
    CHECK(blz_join(running) == BLZ_OK);
    CHECK(blz_group_destroy(group) == BLZ_OK);
    CHECK(fib(pool, 18) == 2584);
    CHECK(pool.destroy() == BLZ_OK);
}

TEST_CASE("fork() from inside a task: in the child the thread is nobody's worker", "[api][lifecycle][fork]") {
    Watchdog watchdog("fork from a worker", seconds(120));
    Pool pool(2);
    blz_pool *p = pool;
    pid_t pid = -1;
    int32_t index_in_parent = -2;
    bool parent_quiet = false;
    auto forker = [&] {
        index_in_parent = blz_worker_index(p);
        // The child starts a new pool, whose threads allocate: under ASan
        // (tests/support.hpp) no parent thread may be inside the allocator
        // at the fork. The caller is parked in blz_call; wait until the
        // other worker sleeps too (it may still be freeing an earlier job).
        parent_quiet = blz_test::wait_until_asleep(p, milliseconds(30000), /*awake=*/1);
        if (!parent_quiet) return;
        std::fflush(nullptr);
        pid_t child = fork();
        if (child == 0) {
            child_prologue(30);
            ForkedState state{p, nullptr, nullptr, false, nullptr, nullptr};
            int rc = checks_in_forked_child(state);
            std::fflush(stderr);
            _exit(rc);
        }
        pid = child;
    };
    REQUIRE(on_worker(p, forker) == BLZ_OK);
    REQUIRE(parent_quiet);
    CHECK(index_in_parent >= 0);
    const int status = wait_for_child(pid);
    INFO(describe_child(status));
    CHECK(child_passed(status));
    CHECK(fib(pool, 18) == 2584);
    CHECK(pool.destroy() == BLZ_OK);
}

// ===========================================================================
// The OS refuses a worker thread

namespace {

long vm_size_kib() {
    FILE *f = std::fopen("/proc/self/status", "r");
    if (f == nullptr) return -1;
    char line[256];
    long kib = -1;
    while (std::fgets(line, sizeof(line), f) != nullptr) {
        if (std::sscanf(line, "VmSize: %ld kB", &kib) == 1) break;
    }
    std::fclose(f);
    return kib;
}

std::atomic<int> g_refused_starts{0};
std::atomic<int> g_refused_stops{0};
void refused_start(void *, uint32_t) { g_refused_starts.fetch_add(1); }
void refused_stop(void *, uint32_t) { g_refused_stops.fetch_add(1); }

int refused_thread_scenario() {
    ChildChecks c;
    constexpr rlim_t kStack = rlim_t{64} << 20;
    struct rlimit original;
    if (getrlimit(RLIMIT_AS, &original) != 0) return 90;
    long vm = vm_size_kib();
    if (vm <= 0) return 91;
    // Room for the bookkeeping and about two and a half 64 MiB stacks: the
    // third worker's stack does not fit.
    struct rlimit low = original;
    low.rlim_cur = static_cast<rlim_t>(vm) * 1024 + 2 * kStack + kStack / 2;
    if (original.rlim_cur != RLIM_INFINITY && original.rlim_cur < low.rlim_cur) return 92;
    if (setrlimit(RLIMIT_AS, &low) != 0) return 93;

    blz_pool_config config;
    blz_pool_config_init(&config);
    config.num_threads = 4;
    config.stack_size = static_cast<size_t>(kStack);
    config.on_thread_start = refused_start;
    config.on_thread_stop = refused_stop;
    blz_pool *pool = sentinel<blz_pool>();
    blz_status st = blz_pool_create(&config, &pool);
    std::fprintf(stderr, "  blz_pool_create under RLIMIT_AS: %s; workers started before the refusal: %d\n",
                 blz_status_string(st), g_refused_starts.load());
    CHILD_CHECK(c, st == BLZ_ETHREAD);
    CHILD_CHECK(c, pool == sentinel<blz_pool>());
    // The threads that had started were stopped (their stop hook ran) before create returned.
    CHILD_CHECK(c, g_refused_starts.load() == 2);
    CHILD_CHECK(c, g_refused_stops.load() == g_refused_starts.load());

    if (setrlimit(RLIMIT_AS, &original) != 0) return 94;
    config.stack_size = 256 * 1024;
    config.on_thread_start = nullptr;
    config.on_thread_stop = nullptr;
    blz_pool *later = nullptr;
    CHILD_CHECK(c, blz_pool_create(&config, &later) == BLZ_OK);
    if (later != nullptr) {
        CHILD_CHECK(c, blz_pool_num_threads(later) == 4);
        CHILD_CHECK(c, fib(later, 20) == 6765);
        CHILD_CHECK(c, blz_pool_destroy(later) == BLZ_OK);
    }
    return c.exit_code();
}

}  // namespace

TEST_CASE("a worker thread the OS refuses gives BLZ_ETHREAD without hanging", "[api][lifecycle][ethread]") {
    int status = run_forked(refused_thread_scenario, 30);
    INFO(describe_child(status));
    CHECK(child_passed(status));
}
