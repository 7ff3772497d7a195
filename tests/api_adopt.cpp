// 0.2 blz_pool_config.spawn_thread: the embedder starts the workers'
// threads, and each becomes worker i while it is inside run(). From the
// contract in blitz.h: calls in index order on the creating thread; the
// pool's jobs and hooks run on those threads (a thread-local the embedder
// set before run() is seen by them); cancellation is disabled inside run()
// and restored after; a refused or throwing spawn_thread gives BLZ_ETHREAD
// once the runs handed out have returned; run() may come late (work waits
// in the queues, destroy waits for it); destroy and release wait for every
// run() to return.
//
// The dangerous interleavings are held open by gates: a run() that has not
// been called yet while work is queued and while the pool is destroyed.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <pthread.h>
#include <sched.h>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "support.hpp"

namespace {

using blz_test::eventually;
using blz_test::Gate;
using blz_test::OpenOnExit;
using blz_test::Watchdog;
using std::chrono::seconds;

thread_local int t_embedder_tag = -1;

// The calling thread's cancellation state (POSIX has no getter: set and put back).
int cancel_state() {
    int state = -1;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &state);
    pthread_setcancelstate(state, nullptr);
    return state;
}  // what the embedder sets on its thread before run()

// The embedder's side: starts a std::thread per worker that sets its tag,
// optionally waits at a gate, calls run(), and records what it saw.
struct Embedder {
    std::vector<std::thread> threads;
    std::vector<uint32_t> indices;   // spawn_thread's calls, in order
    int refuse_at = -1;              // return non-zero for this index
    int throw_at = -1;               // throw for this index
    Gate *before_run = nullptr;      // threads pass it before calling run()
    std::atomic<int> runs_returned{0};
    std::atomic<int> cancel_restored{0};
    std::thread::id creator = std::this_thread::get_id();
    std::atomic<int> called_on_creator{0};

    static int spawn(void *user, uint32_t index, blz_fn run, void *run_arg) {
        auto *self = static_cast<Embedder *>(user);
        self->indices.push_back(index);
        if (std::this_thread::get_id() == self->creator) self->called_on_creator.fetch_add(1);
        if (static_cast<int>(index) == self->refuse_at) return 1;
        if (static_cast<int>(index) == self->throw_at) throw std::runtime_error("no thread today");
        self->threads.emplace_back([self, index, run, run_arg] {
            t_embedder_tag = static_cast<int>(index);
            pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, nullptr);
            if (self->before_run != nullptr) self->before_run->pass();
            run(run_arg);
            if (cancel_state() == PTHREAD_CANCEL_ENABLE) self->cancel_restored.fetch_add(1);
            self->runs_returned.fetch_add(1);
        });
        return 0;
    }

    void join() {
        for (std::thread &t : threads) t.join();
        threads.clear();
    }
};

struct Hooks {
    std::atomic<int> starts{0};
    std::atomic<int> stops{0};
    std::atomic<int> tags_matching{0};  // hooks that ran on the embedder's thread for their index
    static void on_start(void *user, uint32_t index) {
        auto *h = static_cast<Hooks *>(user);
        if (t_embedder_tag == static_cast<int>(index)) h->tags_matching.fetch_add(1);
        h->starts.fetch_add(1);
    }
    static void on_stop(void *user, uint32_t index) {
        auto *h = static_cast<Hooks *>(user);
        if (t_embedder_tag == static_cast<int>(index)) h->tags_matching.fetch_add(1);
        h->stops.fetch_add(1);
    }
};

blz_pool_config adopted_config(Embedder &embedder, Hooks &hooks, uint32_t threads) {
    blz_pool_config config;
    blz_pool_config_init(&config);
    config.num_threads = threads;
    config.spawn_thread = &Embedder::spawn;
    config.spawn_user = &embedder;
    config.on_thread_start = &Hooks::on_start;
    config.on_thread_stop = &Hooks::on_stop;
    config.user = &hooks;
    return config;
}

// Per piece of a parallel_for: whether it ran on the embedder's thread of
// the worker that runs it, with cancellation disabled.
struct PieceCheck {
    blz_pool *pool = nullptr;
    std::atomic<int> pieces{0};
    std::atomic<int> on_own_thread{0};
    std::atomic<int> cancel_disabled{0};
    static void run(void *self, size_t, size_t) {
        auto *c = static_cast<PieceCheck *>(self);
        c->pieces.fetch_add(1);
        if (t_embedder_tag >= 0 && t_embedder_tag == blz_worker_index(c->pool)) c->on_own_thread.fetch_add(1);
        if (cancel_state() == PTHREAD_CANCEL_DISABLE) c->cancel_disabled.fetch_add(1);
        std::this_thread::sleep_for(std::chrono::microseconds(50));  // room for the other worker to steal
    }
};

}  // namespace

TEST_CASE("the embedder's threads become the workers: jobs and hooks run on them", "[api][adopt]") {
    Watchdog watchdog("adopted workers", seconds(120));
    Embedder embedder;
    Hooks hooks;
    blz_pool_config config = adopted_config(embedder, hooks, 3);
    blz_pool *pool = nullptr;
    REQUIRE(blz_pool_create(&config, &pool) == BLZ_OK);
    CHECK(embedder.indices == std::vector<uint32_t>{0, 1, 2});
    CHECK(embedder.called_on_creator.load() == 3);
    CHECK(blz_pool_num_threads(pool) == 3);

    PieceCheck check;
    check.pool = pool;
    REQUIRE(blz_parallel_for(pool, 0, 300, 1, &PieceCheck::run, &check) == BLZ_OK);
    CHECK(check.pieces.load() == 300);
    CHECK(check.on_own_thread.load() == 300);
    CHECK(check.cancel_disabled.load() == 300);
    CHECK(blz_test::fib(pool, 18) == 2584);

    REQUIRE(blz_pool_destroy(pool) == BLZ_OK);
    // destroy returned after every run() ran its stop hook and left the pool.
    CHECK(hooks.starts.load() == 3);
    CHECK(hooks.stops.load() == 3);
    CHECK(hooks.tags_matching.load() == 6);
    embedder.join();
    CHECK(embedder.runs_returned.load() == 3);
    CHECK(embedder.cancel_restored.load() == 3);
}

TEST_CASE("a run() that comes late: work waits in the queues, destroy waits for it", "[api][adopt]") {
    Watchdog watchdog("late run", seconds(120));
    Embedder embedder;
    Hooks hooks;
    Gate gate;
    OpenOnExit opener{gate};
    embedder.before_run = &gate;
    blz_pool_config config = adopted_config(embedder, hooks, 2);
    blz_pool *pool = nullptr;
    REQUIRE(blz_pool_create(&config, &pool) == BLZ_OK);  // returns with no worker running
    REQUIRE(gate.wait_entered(2));
    CHECK(hooks.starts.load() == 0);

    std::atomic<int> ran{0};
    blz_task *task = nullptr;
    REQUIRE(blz_spawn(pool, blz_test::count_into, &ran, &task) == BLZ_OK);
    std::atomic<bool> destroyed{false};
    std::atomic<blz_status> join_status{99};
    std::atomic<blz_status> destroy_status{99};
    std::thread destroyer([&] {  // no Catch2 assertion off the main thread
        join_status.store(blz_join(task));
        destroy_status.store(blz_pool_destroy(pool));
        destroyed.store(true);
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    // Nothing can have run or ended: no run() has been called.
    CHECK(ran.load() == 0);
    CHECK_FALSE(destroyed.load());
    gate.release();
    destroyer.join();
    CHECK(ran.load() == 1);
    CHECK(join_status.load() == BLZ_OK);
    CHECK(destroy_status.load() == BLZ_OK);
    CHECK(hooks.stops.load() == 2);
    embedder.join();
    CHECK(embedder.runs_returned.load() == 2);
}

TEST_CASE("a spawn_thread that refuses or throws gives BLZ_ETHREAD after the runs handed out returned",
          "[api][adopt]") {
    Watchdog watchdog("refused spawn", seconds(120));
    for (bool throws : {false, true}) {
        INFO((throws ? "throws" : "returns 1") << " for worker 2");
        Embedder embedder;
        Hooks hooks;
        (throws ? embedder.throw_at : embedder.refuse_at) = 2;
        blz_pool_config config = adopted_config(embedder, hooks, 4);
        blz_pool *pool = blz_test::sentinel<blz_pool>();
        CHECK(blz_pool_create(&config, &pool) == BLZ_ETHREAD);
        CHECK(pool == blz_test::sentinel<blz_pool>());
        CHECK(embedder.indices == std::vector<uint32_t>{0, 1, 2});  // none after the refusal
        // Workers 0 and 1 came, started and stopped before create returned.
        CHECK(hooks.starts.load() == 2);
        CHECK(hooks.stops.load() == 2);
        embedder.join();
        CHECK(embedder.runs_returned.load() == 2);
    }
}

TEST_CASE("workers on the embedder's threads are pinned by cpu_list", "[api][adopt]") {
    Watchdog watchdog("adopted pinning", seconds(120));
    Embedder embedder;
    Hooks hooks;
    blz_pool_config config = adopted_config(embedder, hooks, 2);
    config.cpu_list = "0";
    blz_pool *pool = nullptr;
    REQUIRE(blz_pool_create(&config, &pool) == BLZ_OK);
    std::atomic<int> only_cpu0{0};
    auto probe = [&](size_t, size_t) {
        cpu_set_t set;
        CPU_ZERO(&set);
        if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) == 1 && CPU_ISSET(0, &set)) {
            only_cpu0.fetch_add(1);
        }
    };
    REQUIRE(blz_parallel_for(pool, 0, 64, 1, blz_test::range_thunk_of(probe), &probe) == BLZ_OK);
    CHECK(only_cpu0.load() == 64);
    REQUIRE(blz_pool_destroy(pool) == BLZ_OK);
    embedder.join();
}

TEST_CASE("blz_pool_release with the embedder's threads calls on_destroyed after every run() returned",
          "[api][adopt]") {
    Watchdog watchdog("adopted release", seconds(120));
    Embedder embedder;
    Hooks hooks;
    blz_pool_config config = adopted_config(embedder, hooks, 2);
    blz_pool *pool = nullptr;
    REQUIRE(blz_pool_create(&config, &pool) == BLZ_OK);
    struct Done {
        Hooks *hooks;
        std::atomic<int> stops_seen{-1};
    } done{&hooks};
    auto on_destroyed = [](void *arg, blz_status status) {
        auto *d = static_cast<Done *>(arg);
        d->stops_seen.store(status == BLZ_OK ? d->hooks->stops.load() : -2);
    };
    REQUIRE(blz_pool_release(pool, on_destroyed, &done) == BLZ_OK);
    REQUIRE(eventually([&] { return done.stops_seen.load() != -1; }));
    CHECK(done.stops_seen.load() == 2);
    embedder.join();
    CHECK(embedder.runs_returned.load() == 2);
}

// ---------------------------------------------------------------------------
// A thread that is already a worker of one pool (P2) may be handed another
// pool's run() (blitz.h: "another thread"). While run() runs it is P1's
// worker only; when run() returns it is P2's worker again, exactly as
// before: its index, its task frames (what blz_cancelled and deadlock
// detection see), its failure count and its CPU mask.

namespace {

// An embedder that keeps the runs it is handed, for a thread of the
// test's choosing to call.
struct HeldRuns {
    std::vector<std::pair<blz_fn, void *>> runs;
    static int spawn(void *user, uint32_t, blz_fn run, void *run_arg) {
        static_cast<HeldRuns *>(user)->runs.emplace_back(run, run_arg);
        return 0;
    }
};

std::vector<int> allowed_cpus() {
    cpu_set_t set;
    CPU_ZERO(&set);
    std::vector<int> cpus;
    if (sched_getaffinity(0, sizeof(set), &set) != 0) return cpus;
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
        if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
    }
    return cpus;
}

// What P2's task saw before, during (in P1's hook and job) and after P1's run().
struct NestedRun {
    blz_pool *outer = nullptr;  // P2
    blz_pool *inner = nullptr;  // P1, made by the test's thread
    blz_group *group = nullptr;
    std::pair<blz_fn, void *> run{nullptr, nullptr};
    bool fail_in_hook = false;
    std::atomic<bool> run_entered{false};
    std::atomic<int32_t> index_before{-9}, index_after{-9}, inner_index_inside{-9};
    std::atomic<int32_t> outer_index_inside{-9};
    std::atomic<int32_t> cancelled_in_hook{-9}, cancelled_in_inner_job{-9}, cancelled_after{-9};
    std::atomic<bool> mask_restored{false};
    std::atomic<blz_status> fork_join_after{99};

    static void on_start(void *user, uint32_t) {
        auto *n = static_cast<NestedRun *>(user);
        n->cancelled_in_hook.store(blz_cancelled());
        if (n->fail_in_hook) blz_fail();  // outside any job: must change nothing
        n->run_entered.store(true);
    }

    static void inner_job(void *self) {
        auto *n = static_cast<NestedRun *>(self);
        n->inner_index_inside.store(blz_worker_index(n->inner));
        n->outer_index_inside.store(blz_worker_index(n->outer));
        n->cancelled_in_inner_job.store(blz_cancelled());
    }

    static void task(void *self) {
        auto *n = static_cast<NestedRun *>(self);
        n->index_before.store(blz_worker_index(n->outer));
        blz_group_cancel(n->group);  // this task's group: P1's work must not see it
        cpu_set_t before, after;
        CPU_ZERO(&before);
        CPU_ZERO(&after);
        sched_getaffinity(0, sizeof(before), &before);
        n->run.first(n->run.second);  // P1's worker until P1 is destroyed
        sched_getaffinity(0, sizeof(after), &after);
        n->mask_restored.store(CPU_EQUAL(&before, &after));
        n->index_after.store(blz_worker_index(n->outer));
        n->cancelled_after.store(blz_cancelled());
        // Only if the worker is itself again: otherwise this would inject
        // into P2 and wait for P2's only worker, which is this thread.
        if (n->index_after.load() == 0) {
            std::atomic<int> halves{0};
            n->fork_join_after.store(
                blz_fork_join(n->outer, blz_test::count_into, &halves, blz_test::count_into, &halves));
            if (halves.load() != 2) n->fork_join_after.store(98);
        }
    }
};

// P2 (one worker) runs a task of a group that calls P1's run(); P1 is
// pinned to one CPU when the machine gives the process more than one.
void run_nested(NestedRun &n) {
    blz_test::Pool outer(1);
    n.outer = outer;
    HeldRuns held;
    blz_pool_config config;
    blz_pool_config_init(&config);
    config.num_threads = 1;
    config.spawn_thread = &HeldRuns::spawn;
    config.spawn_user = &held;
    config.on_thread_start = &NestedRun::on_start;
    config.user = &n;
    const std::vector<int> cpus = allowed_cpus();
    const std::string pin = cpus.empty() ? "" : std::to_string(cpus.front());
    if (cpus.size() > 1) config.cpu_list = pin.c_str();
    REQUIRE(blz_pool_create(&config, &n.inner) == BLZ_OK);
    REQUIRE(held.runs.size() == 1);
    n.run = held.runs.front();
    REQUIRE(blz_group_create(outer, &n.group) == BLZ_OK);

    blz_spawn_options opts;
    blz_spawn_options_init(&opts);
    opts.group = n.group;
    blz_task *task = nullptr;
    REQUIRE(blz_spawn_ex(outer, &NestedRun::task, &n, &opts, &task) == BLZ_OK);
    REQUIRE(eventually([&] { return n.run_entered.load(); }));
    CHECK(blz_call(n.inner, &NestedRun::inner_job, &n) == BLZ_OK);
    CHECK(blz_pool_destroy(n.inner) == BLZ_OK);  // run() returns into P2's task
    CHECK(blz_join(task) == BLZ_OK);
    CHECK(blz_group_destroy(n.group) == BLZ_ECANCELED);
}

}  // namespace

TEST_CASE("a worker of another pool that calls run() is that worker again when run() returns", "[api][adopt]") {
    Watchdog watchdog("nested run()", seconds(120));
    NestedRun n;
    run_nested(n);
    CHECK(n.index_before.load() == 0);
    // Inside run(): P1's worker 0, no worker of P2, and outside P2's task.
    CHECK(n.inner_index_inside.load() == 0);
    CHECK(n.outer_index_inside.load() == -1);
    CHECK(n.cancelled_in_hook.load() == 0);
    CHECK(n.cancelled_in_inner_job.load() == 0);
    // After run(): P2's worker 0 again, inside its cancelled task, unpinned as before.
    CHECK(n.index_after.load() == 0);
    CHECK(n.cancelled_after.load() == 1);
    CHECK(n.mask_restored.load());
    CHECK(n.fork_join_after.load() == BLZ_OK);
}

TEST_CASE("a blz_fail in a hook of a nested run() belongs to no job of the outer pool", "[api][adopt]") {
    Watchdog watchdog("nested run() failure count", seconds(120));
    NestedRun n;
    n.fail_in_hook = true;
    run_nested(n);  // the task's join must be BLZ_OK
    CHECK(n.index_after.load() == 0);
}
