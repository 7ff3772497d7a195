// Relacy checks of libblitz's own core classes, and of deliberately broken
// variants of them that each check must catch.
//
// Every check instantiates the real templates from lib/ (Deque,
// AtomicCounters, CoreLatch, Sleep, Injector, Admission, ForkStack, the
// worker's idle loop run_until/search_until from idle_loop.hpp, the fork
// protocol of fork_join.hpp, publication and injection from publish.hpp,
// spawn_task's submit_admitted, Latch::set's set_and_wake_worker, and the
// spare accounting SpareCounts) with
// RelacySync, which gives them Relacy's atomics, mutexes, condition
// variables, fences and heap. The workers around them are hosts below (a
// check's own find_work, ForkModelHost); the code that is not a template
// (Registry::shut_down and destroy's order of steps, a task's timed join
// and its finish) is restated here, step by step. A mutant is the same
// code with one `if constexpr` switch turned (blz::Mutant in lib/sync.hpp),
// in lib/ or in a restatement.
// Relacy runs each test program many times under its memory model (C++11's,
// with stale reads of relaxed loads) and fails it on: an RL_ASSERT, a
// deadlock (every thread blocked: a lost wake-up leaves a worker on its
// condition variable after everyone else finished), a livelock, an access to
// freed memory, a data race on an rl::var (the lifetime checks' stand-in for
// a pool's plain memory), or a leak.
//
// Scope and limits: docs/verification.md.
//
// usage: relacy_checks [--iterations N] [--quick] [--only SUBSTRING] [--history]
//   --iterations  random-scheduler iterations per check (default 200000)
//   --quick       the real variants of the full-search checks search at
//                 random too (--iterations): ./dev test's setting; the full
//                 searches (minutes) are ./dev verify's. Mutants keep their
//                 full search, which stops at the first finding.
//   --only        run the rows whose check name contains SUBSTRING
//   --history     print Relacy's report (with the failing execution's history)
// Prints one row per (check, variant) and ends with "relacy: N passed, M failed":
// a real variant passes when Relacy finds nothing, a mutant when it is caught.

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "relacy_sync.hpp"  // last: relacy.hpp's macros must not see the headers above

namespace {

using blz::IdleOutcome;
using blz::Mutant;

template <Mutant M>
using RS = blz_relacy::RelacySync<M>;

// Spins in a way Relacy's scheduler understands.
// ---------------------------------------------------------------------------
// Dependencies (lib/dependency_count.hpp, the real class; task.cpp's
// register_predecessors around it): a spawner registers its task on two
// predecessors, each of which completes on its own thread. A predecessor
// is modelled as an event: a `done` flag and a one-entry list under a
// mutex (WaiterList::add_callback / notify). The task must be queued
// exactly once, after both predecessors completed and after its spawn is
// done with it (in the runtime, a task queued earlier may run and free
// itself under the spawn). The mutant spawner takes no hold.
template <class S>
struct DependencyHandOff : rl::test_suite<DependencyHandOff<S>, 3> {
    struct Predecessor {
        rl::mutex mutex;
        bool done = false;        // guarded by mutex
        bool registered = false;  // guarded by mutex: the task's edge is in the list
    };
    Predecessor predecessors[2];
    blz::DependencyCount<S> count;
    typename S::template atomic<int> queued{0};
    typename S::template atomic<int> completed{0};
    typename S::template atomic<bool> spawn_over{false};

    void queue() {
        // The queue's acquire side: the count's acq_rel chain orders both
        // predecessors' completion before this.
        RL_ASSERT(completed.load(std::memory_order::relaxed) == 2);
        RL_ASSERT(spawn_over.load(std::memory_order::relaxed));
        queued.fetch_add(1, std::memory_order::relaxed);
    }

    void thread(unsigned index) {
        if (index == 0) {
            spawn();
        } else {
            complete(predecessors[index - 1]);
        }
    }

    void spawn() {
        const bool hold = count.hold(2);
        for (Predecessor &p : predecessors) {
            count.count_one(hold);
            p.mutex.lock($);
            const bool already = p.done;
            if (!already) p.registered = true;
            p.mutex.unlock($);
            if (already && count.release()) queue();
        }
        // The spawn's last access to the task; in the runtime the task may
        // run and be freed from the final release on.
        spawn_over.store(true, std::memory_order::relaxed);
        if (hold && count.release()) queue();
    }

    void complete(Predecessor &p) {
        completed.fetch_add(1, std::memory_order::relaxed);
        p.mutex.lock($);
        p.done = true;
        const bool registered = p.registered;
        p.mutex.unlock($);
        if (registered && count.release()) queue();
    }

    void after() { RL_ASSERT(queued.load(std::memory_order::relaxed) == 1); }
};

template <class Pred>
void spin_until(Pred pred) {
    rl::backoff backoff;
    while (!pred()) backoff.yield($);
}

struct NoInjectedJobs {
    bool operator()() const { return false; }
};

// Items handed around by the deque checks; `taken[i]` counts how often item
// i came out of the deque.
template <class S, int N>
struct Items {
    int items[N] = {};
    typename S::template atomic<int> taken[N];

    int *operator[](int i) { return &items[i]; }
    void take(int *item) {
        if (item != nullptr) taken[item - items].fetch_add(1, std::memory_order::relaxed);
    }
    void assert_each_taken_once() {
        for (auto &count : taken) RL_ASSERT(count.load(std::memory_order::relaxed) == 1);
    }
};

template <class S>
using IntDeque = blz::Deque<int *, S>;

template <class S, int N>
void steal_into(IntDeque<S> &deque, Items<S, N> &items) {
    auto stolen = deque.steal();
    if (stolen.status == IntDeque<S>::Steal::kSuccess) {
        RL_ASSERT(stolen.value != nullptr);  // a success always carries a pushed item
        items.take(stolen.value);
    }
}

// ---------------------------------------------------------------------------
// deque: the owner pushes, publishes, pops its private part (no fence) and
// its public part (the fenced pop, racing for the last element) while two
// thieves steal, starting at capacity 2 so that the buffer grows twice
// (2 -> 4 -> 8) or wraps around onto slots the thieves freed. Every item
// comes out exactly once; Relacy reports any read of a freed buffer.

template <class S>
struct DequeOwnerTwoThieves : rl::test_suite<DequeOwnerTwoThieves<S>, 3> {
    IntDeque<S> deque{2};
    Items<S, 6> items;

    void before() { RL_ASSERT(deque.init()); }

    void thread(unsigned index) {
        if (index != 0) {
            for (int attempt = 0; attempt < 3; ++attempt) steal_into(deque, items);
            return;
        }
        RL_ASSERT(deque.push(items[0]));
        RL_ASSERT(deque.push(items[1]));
        RL_ASSERT(deque.publish() == 2);     // 0, 1 public: the buffer is full
        RL_ASSERT(deque.push(items[2]));     // grows, or reuses slot 0 if a thief took item 0
        RL_ASSERT(deque.publish(1) == 1);    // 2 public
        RL_ASSERT(deque.push(items[3]));     // private
        int *newest = deque.pop();           // the private pop: no thief can reach it
        RL_ASSERT(newest == items[3]);
        items.take(newest);
        RL_ASSERT(deque.push(items[4]));
        RL_ASSERT(deque.push(items[5]));     // may grow again
        deque.publish();
        // The public pops: the fenced claim, down to the last element.
        for (int *item = deque.pop(); item != nullptr; item = deque.pop()) items.take(item);
    }

    void after() { items.assert_each_taken_once(); }
};

// deque: one thief stealing across a grow, every interleaving: it may load
// the old buffer pointer and read from it while the owner replaces it, or
// claim a slot the owner then reuses. The owner only pushes; after() pops
// what is left, so the search spends its steps on the race.
template <class S>
struct DequeStealAcrossGrow : rl::test_suite<DequeStealAcrossGrow<S>, 2> {
    IntDeque<S> deque{2};
    Items<S, 3> items;

    void before() { RL_ASSERT(deque.init()); }

    void thread(unsigned index) {
        if (index == 1) {
            steal_into(deque, items);
            return;
        }
        RL_ASSERT(deque.push(items[0]));
        RL_ASSERT(deque.push(items[1]));
        deque.publish();
        RL_ASSERT(deque.push(items[2]));  // grows 2 -> 4, or wraps onto slot 0 if the thief took item 0
    }

    void after() {
        for (int *item = deque.pop(); item != nullptr; item = deque.pop()) items.take(item);
        items.assert_each_taken_once();
    }
};

// deque: the owner's fenced pop against a thief that steals twice, from a
// deque holding two public elements (pushed and published in before()):
// the owner takes index 1 without a CAS (two elements left) only when the
// thief can no longer reach it, and races the thief's CAS for index 0.
// The owner pops twice; after() takes what is left.
template <class S>
struct DequePublicPopVsThief : rl::test_suite<DequePublicPopVsThief<S>, 2> {
    IntDeque<S> deque{4};
    Items<S, 2> items;

    void before() {
        RL_ASSERT(deque.init());
        RL_ASSERT(deque.push(items[0]));
        RL_ASSERT(deque.push(items[1]));
        deque.publish();
    }

    void thread(unsigned index) {
        if (index == 1) {
            steal_into(deque, items);
            steal_into(deque, items);
            return;
        }
        items.take(deque.pop());
        items.take(deque.pop());
    }

    void after() {
        for (int *item = deque.pop(); item != nullptr; item = deque.pop()) items.take(item);
        items.assert_each_taken_once();
    }
};

// ---------------------------------------------------------------------------
// A worker for the checks: the real idle loop (lib/idle_loop.hpp, which
// Worker::wait_until runs) around a check's own `find_work`, which runs the
// job it finds and returns true. Its phase and tracing hooks do nothing
// (they are statistics, not protocol), and it reads no clock: the model's
// wait_until decides timeouts (RelacySync).

template <class FindWork, class HasSharedJobs>
struct ModelWorker {
    struct Found {
        const void *job;  // non-null: find_work found (and ran) a job
    };

    uint32_t me;
    FindWork find;
    HasSharedJobs shared;

    uint32_t index() const { return me; }
    uint32_t awake_limit() const { return UINT32_MAX; }
    Found find_work(bool) { return {find() ? this : nullptr}; }
    void execute(const Found &) {}  // find_work ran it
    bool has_jobs_for_me() { return shared(); }
    bool has_shared_jobs() { return shared(); }
    static bool deadline_passed(uint64_t) { return false; }
    void on_searching() {}
    void on_blocking() {}
    void on_running() {}
    void on_woken() {}
};

// Worker::wait_until: returns when `latch` is set, or (with a deadline)
// when the model timed the sleep out; true when the latch is set.
template <class S, class FindWork, class HasSharedJobs>
bool wait_until(blz::Sleep<S> &sleep, uint32_t me, blz::CoreLatch<S> &latch, FindWork find_work,
                HasSharedJobs has_shared_jobs, uint64_t deadline = blz::kNoDeadline) {
    ModelWorker<FindWork, HasSharedJobs> worker{me, find_work, has_shared_jobs};
    return blz::run_until<false>(worker, sleep, latch, deadline);
}

// A pool as set_and_wake_worker sees it when the setter is one of its
// workers (no pin): its Sleep.
template <class S>
struct SleepOnly {
    blz::Sleep<S> &sleep;
    void pin() {}
    void wake(uint32_t index) { sleep.wake_specific_thread(index); }
    void unpin() {}
};

// Latch::set by a worker of the waiter's pool (lib/core_latch.hpp).
template <class S>
void set_latch(blz::CoreLatch<S> &latch, blz::Sleep<S> &sleep, uint32_t waiter) {
    SleepOnly<S> pool{sleep};
    blz::set_and_wake_worker(latch, pool, waiter, false);
}

template <class S>
struct Node {
    typename S::template atomic<Node *> next;
};

// ---------------------------------------------------------------------------
// sleep handshake against an external injector: a worker searching the
// injector and going to sleep, a thread outside the pool injecting one job
// (Registry::inject: Injector::push, then Sleep::new_shared_jobs). The
// JEC starts odd (a post nobody got sleepy after, the state of a pool that
// just ran work), so the poster's post_event may only read the counters:
// then the two seq-cst fences alone decide whether the job is seen. No
// execution may end with the job queued and the worker blocked (Relacy:
// deadlock) or the job not taken.

template <class S>
struct SleepVsInjector : rl::test_suite<SleepVsInjector<S>, 2> {
    blz::Sleep<S> sleep;
    blz::Injector<Node<S>, S> injector;
    blz::CoreLatch<S> terminate;
    Node<S> job;
    typename S::template atomic<int> taken;

    void before() {
        RL_ASSERT(sleep.init(1));
        sleep.atomic_counters().post_event();
    }

    void thread(unsigned index) {
        auto has_shared_jobs = [this] { return injector.has_jobs(); };
        if (index == 1) {
            bool was_empty = injector.push(&job);
            sleep.new_shared_jobs(1, [was_empty] { return was_empty; });
            return;
        }
        auto find_work = [this] {
            if (injector.pop() != &job) return false;
            taken.fetch_add(1, std::memory_order::relaxed);
            terminate.set();  // our own latch: the worker then returns (what destroy would do)
            return true;
        };
        wait_until(sleep, 0, terminate, find_work, has_shared_jobs);
    }

    void after() { RL_ASSERT(taken.load(std::memory_order::relaxed) == 1); }
};

// sleep handshake, two workers against a poster of two jobs: the wake
// decision (wake_for_jobs: idle workers count as finding the job
// themselves), wake_any_threads, and work_found's hand-off of injected work
// to a sleeper. Once both jobs ran, the poster sets both workers'
// terminate latches as blz_pool_destroy does (Latch::set).

template <class S>
struct TwoWorkersTwoJobs : rl::test_suite<TwoWorkersTwoJobs<S>, 3> {
    blz::Sleep<S> sleep;
    blz::Injector<Node<S>, S> injector;
    blz::CoreLatch<S> terminate[2];
    Node<S> jobs[2];
    typename S::template atomic<int> taken;

    void before() {
        RL_ASSERT(sleep.init(2));
        sleep.atomic_counters().post_event();  // the JEC starts odd, as in SleepVsInjector
    }

    void thread(unsigned index) {
        auto has_shared_jobs = [this] { return injector.has_jobs(); };
        if (index == 2) {
            for (Node<S> &job : jobs) {
                bool was_empty = injector.push(&job);
                sleep.new_shared_jobs(1, [was_empty] { return was_empty; });
            }
            spin_until([this] { return taken.load(std::memory_order::acquire) == 2; });
            for (uint32_t w = 0; w < 2; ++w) set_latch(terminate[w], sleep, w);
            return;
        }
        auto find_work = [this] {
            if (injector.pop() == nullptr) return false;
            taken.fetch_add(1, std::memory_order::release);
            return true;
        };
        wait_until(sleep, index, terminate[index], find_work, has_shared_jobs);
    }
};

// ---------------------------------------------------------------------------
// fork-join through the fork stack (lib/fork_join.hpp, fork_stack.hpp):
// worker 0 runs the real fork_join over a real ForkStack and Deque, with
// a ForkModelHost below as its worker: b's frame is pushed pending, a
// runs, b is popped and run inline, or, once promoted (push_fork_slow on a
// request: promote_forks, publish_forks with the internal post), joined
// through join_promoted_frame: taken back from the deque, or waited for
// through the idle loop while worker 1 runs it. Worker 1 runs the idle
// loop; its find_work is the real steal_and_request on worker 0's deque
// (a steal that took or found nothing asks for a promotion), and it runs
// a stolen frame's job as StackJob::run does: b, the result, then
// Latch::set (set_and_wake_worker), its last access to the job. Once the
// join returned, worker 0 ends the frame (the job's memory, on Relacy's
// heap: any later access by the thief is ACCESS TO FREED MEMORY) and sets
// worker 1's terminate latch.

// The job a promoted frame becomes (the runtime's FrameJob, a
// StackJob<CFunction> placed in the frame itself): here on Relacy's heap,
// where its end is visible. It carries the frame's function by value, as
// FrameJob's CFunction does.
template <class S>
struct ModelFrameJob {
    blz_fn fn = nullptr;
    void *arg = nullptr;
    blz::CoreLatch<S> latch;
    rl::var<bool> ok;
};

template <class S>
struct ForkModel {
    blz::Sleep<S> sleep;
    blz::Deque<ModelFrameJob<S> *, S> deque0{2};
    blz::ForkStack<S> forks0;
    blz::CoreLatch<S> terminate1;
    ModelFrameJob<S> *frame_storage = nullptr;  // the frame's memory: new before the fork, delete after the join
    typename S::template atomic<int> b_runs, b_started;

    void init(bool with_initial_request) {
        RL_ASSERT(sleep.init(2));
        RL_ASSERT(deque0.init());
        RL_ASSERT(forks0.init(nullptr));
        if (!with_initial_request) forks0.clear_request();
    }

    // b, wherever it runs.
    static void run_b(void *self) {
        auto &model = *static_cast<ForkModel *>(self);
        model.b_runs.fetch_add(1, std::memory_order::relaxed);
        model.b_started.store(1, std::memory_order::release);
    }
};

// Worker 0 as fork_join.hpp's host (the runtime's is Worker::ForkHost).
template <class S>
struct ForkModelHost {
    ForkModel<S> &m;
    using Job = ModelFrameJob<S>;

    blz::ForkStack<S> &forks() { return m.forks0; }
    bool push_fork(blz_fork_frame *frame) { return blz::push_fork_slow(*this, frame); }
    bool join_promoted(blz_fork_frame *frame) { return blz::join_promoted_frame(*this, frame); }
    bool push_frame_job(blz_fork_frame *frame) {
        Job *job = frame_job(frame);
        job->fn = frame->fn;
        job->arg = frame->arg;
        return m.deque0.push(job);
    }
    void publish_promoted(uint32_t n) { blz::publish_forks(m.deque0, m.sleep, n, UINT32_MAX); }
    Job *frame_job(blz_fork_frame *) { return m.frame_storage; }
    Job *pop() { return m.deque0.pop(); }
    void run_own(Job *) { RL_ASSERT(false); }  // nothing but the frame's job is ever on the deque
    bool run_taken_back(blz_fork_frame *frame) {
        frame->fn(frame->arg);
        return true;
    }
    bool wait_for_thief(Job *job) {
        NoInjectedJobs none;
        auto nothing_to_find = [] { return false; };
        wait_until(m.sleep, 0, job->latch, nothing_to_find, none);
        return job->ok($);
    }
    void end_frame_job(Job *) {}
    bool public_part_empty() const { return m.deque0.public_part_empty(); }
};

// Worker 1's find_work: steal from worker 0 (asking for a promotion), run
// the job as StackJob::run does.
template <class S>
bool steal_frame_job(ForkModel<S> &m) {
    auto stolen = blz::steal_and_request(m.deque0, m.forks0);
    if (stolen.status != blz::Deque<ModelFrameJob<S> *, S>::Steal::kSuccess) return false;
    ModelFrameJob<S> *job = stolen.value;
    job->fn(job->arg);
    job->ok($) = true;
    set_latch(job->latch, m.sleep, 0);  // last access to the job
    return true;
}

// Worker 1: the idle loop, stealing from worker 0, until worker 0 ends it.
template <class S>
void thief(ForkModel<S> &m) {
    wait_until(m.sleep, 1, m.terminate1, [&m] { return steal_frame_job(m); }, NoInjectedJobs{});
}

// Worker 0: fork_join(a, b) on a frame that ends after the join returns;
// then it sets worker 1's terminate latch, as destroy would.
template <class S, class A>
void fork_then_end(ForkModel<S> &m, A a) {
    m.frame_storage = new ModelFrameJob<S>;
    blz_fork_frame frame;
    frame.fn = &ForkModel<S>::run_b;
    frame.arg = &m;
    ForkModelHost<S> host{m};
    auto b = [&m] {
        ForkModel<S>::run_b(&m);
        return true;
    };
    RL_ASSERT(blz::fork_join(host, frame, a, b, [] { return true; }));
    // b ended before the join returned, and ran once.
    RL_ASSERT(m.b_runs.load(std::memory_order::relaxed) == 1);
    RL_ASSERT(m.forks0.record().depth == 0);
    delete m.frame_storage;  // the frame's end
    set_latch(m.terminate1, m.sleep, 1);
}

// fork: worker 1 searches while worker 0 forks (a does nothing) with the
// initial request set, so b is promoted at the push and published: worker
// 1 steals it or worker 0 takes it back, racing for it. b runs once, the
// join returns only after it ended, and nothing touches the frame after.
template <class S>
struct ForkThiefVsJoin : rl::test_suite<ForkThiefVsJoin<S>, 2> {
    ForkModel<S> m;

    void before() { m.init(true); }

    void thread(unsigned index) {
        if (index == 0) {
            fork_then_end(m, [] { return true; });
        } else {
            thief(m);
        }
    }
};

// fork: a sleeper gets a fork's second half. Worker 1 searches worker 0's
// empty deque (its steal asks for a promotion) and falls asleep; only then
// does worker 0 fork, with no initial request, and its a waits until b has
// started, as two long leaves that must run side by side would. b starts
// only if worker 0's push serves the thief's request (promotes b) and the
// promotion's post wakes worker 1; otherwise a spins for ever (Relacy:
// livelock).
template <class S>
struct ForkSleeperGetsHalf : rl::test_suite<ForkSleeperGetsHalf<S>, 2> {
    ForkModel<S> m;

    void before() { m.init(false); }

    void thread(unsigned index) {
        if (index == 0) {
            spin_until([this] { return m.sleep.atomic_counters().load().sleeping() == 1; });
            fork_then_end(m, [this] {
                spin_until([this] { return m.b_started.load(std::memory_order::acquire) == 1; });
                return true;
            });
        } else {
            thief(m);
        }
    }
};

// ---------------------------------------------------------------------------
// a task spawned on a worker whose job then blocks (issue 13): worker 0
// spawns one task from inside a job (Worker::push_public: the real
// push_public_task of publish.hpp: push, set the `public_tasks_` flag,
// publish, post with new_shared_jobs and its fence), and the job then blocks outside the
// runtime, so worker 0 never comes back to its deque (here its thread
// returns). Worker 1 searches (steals from worker 0), sleeps, and checks
// before sleeping, and when it hands work off, for shared jobs as
// Registry::has_shared_jobs does: the injector (empty here), then every
// worker that offers tasks (Worker::offers_tasks: the flag, and a public
// element by Deque::size_hint). The JEC starts odd, as in
// SleepVsInjector, so that the post may only read the counters: only the
// two fences and the final check decide whether worker 1 sees the task.
// A worker 1 that sleeps for good with the task public is a deadlock.

template <class S>
struct SpawnOnBlockingWorker : rl::test_suite<SpawnOnBlockingWorker<S>, 2> {
    using TaskDeque = blz::Deque<Node<S> *, S>;

    blz::Sleep<S> sleep;
    blz::Injector<Node<S>, S> injector;
    TaskDeque deque0{2};
    typename S::template atomic<bool> public_tasks0;  // worker 0's Worker::public_tasks_
    blz::CoreLatch<S> terminate1;
    Node<S> task;
    typename S::template atomic<int> taken;

    void before() {
        RL_ASSERT(sleep.init(2));
        RL_ASSERT(deque0.init());
        sleep.atomic_counters().post_event();  // the JEC starts odd
    }

    // Worker::push_public on worker 0 (publish.hpp).
    void push_public(Node<S> *job) { RL_ASSERT(blz::push_public_task(deque0, sleep, public_tasks0, job)); }

    // Registry::has_shared_jobs (the real shared_jobs_wait and
    // offers_public_tasks of publish.hpp). Worker 1's own deque stays
    // empty and is not modelled. The mutant is the code before the fix:
    // the injector only.
    bool has_shared_jobs() const {
        return blz::shared_jobs_wait<S>([this] { return injector.has_jobs(); }, 1,
                                        [this](uint32_t) { return blz::offers_public_tasks(public_tasks0, deque0); });
    }

    void thread(unsigned index) {
        if (index == 0) {
            push_public(&task);
            return;  // the spawning job blocks outside the runtime: the deque is never popped
        }
        auto steal_task = [this] {
            auto stolen = deque0.steal();
            if (stolen.status != TaskDeque::Steal::kSuccess) return false;
            RL_ASSERT(stolen.value == &task);
            taken.fetch_add(1, std::memory_order::relaxed);
            terminate1.set();  // our own latch: the worker then returns (as in SleepVsInjector)
            return true;
        };
        wait_until(sleep, 1, terminate1, steal_task, [this] { return has_shared_jobs(); });
    }

    void after() { RL_ASSERT(taken.load(std::memory_order::relaxed) == 1); }
};

// ---------------------------------------------------------------------------
// the latch: a set() that races its waiter falling asleep always wakes it.

template <class S>
struct LatchSetVsSleep : rl::test_suite<LatchSetVsSleep<S>, 2> {
    blz::Sleep<S> sleep;
    blz::CoreLatch<S> latch;

    void before() { RL_ASSERT(sleep.init(1)); }

    void thread(unsigned index) {
        NoInjectedJobs none;
        if (index == 0) {
            wait_until(sleep, 0, latch, [] { return false; }, none);
        } else {
            set_latch(latch, sleep, 0);
        }
    }
};

// ---------------------------------------------------------------------------
// the isolated wait (blz_isolate): a worker blocks on its own word, outside
// the sleep protocol, and the latch's setter wakes it through
// Sleep::wake_isolated as WakeablePool::wake does (lib/worker.cpp). The
// bounded variant's waits time out wherever the model chooses: a wait that
// says "set" must find the latch set, and the last wait returns.

// The pool as a latch setter from one of its workers sees it, with both
// wake-ups of WakeablePool::wake.
template <class S>
struct SleepAndIsolated {
    blz::Sleep<S> &sleep;
    void pin() {}
    void wake(uint32_t index) {
        sleep.wake_specific_thread(index);
        sleep.wake_isolated(index);
    }
    void unpin() {}
};

template <class S, uint64_t Deadline>
struct IsolatedWaitVsSet : rl::test_suite<IsolatedWaitVsSet<S, Deadline>, 2> {
    blz::Sleep<S> sleep;
    blz::CoreLatch<S> latch;

    void before() { RL_ASSERT(sleep.init(1)); }

    void thread(unsigned index) {
        if (index == 0) {
            while (!latch.probe()) {
                if (sleep.block_isolated(0, latch, Deadline)) RL_ASSERT(latch.probe());
            }
        } else {
            SleepAndIsolated<S> pool{sleep};
            blz::set_and_wake_worker(latch, pool, 0, false);
        }
    }
};
template <class S>
using IsolatedWaitVsSetUnbounded = IsolatedWaitVsSet<S, blz::kNoDeadline>;
template <class S>
using IsolatedWaitVsSetBounded = IsolatedWaitVsSet<S, 1>;

// ---------------------------------------------------------------------------
// the JEC: a post made after a worker got sleepy is noticed before it
// blocks: its next sleep attempt aborts. (Blitz's direction misses it once
// the JEC is odd, and the worker blocks for good.)

template <class S>
struct JecSeesPostAfterSleepy : rl::test_suite<JecSeesPostAfterSleepy<S>, 2> {
    blz::Sleep<S> sleep;
    blz::CoreLatch<S> latch;
    typename S::template atomic<int> announced, posted;

    void before() {
        RL_ASSERT(sleep.init(1));
        sleep.atomic_counters().post_event();  // an earlier post: the JEC is odd
    }

    void thread(unsigned index) {
        NoInjectedJobs none;
        if (index == 0) {
            blz::IdleState idle = sleep.start_looking(0);
            RL_ASSERT(sleep.no_work_found(idle, latch, none) == IdleOutcome::kKeepLooking);  // gets sleepy
            announced.store(1, std::memory_order::release);
            spin_until([this] { return posted.load(std::memory_order::acquire) == 1; });
            RL_ASSERT(sleep.no_work_found(idle, latch, none) == IdleOutcome::kAborted);
            sleep.work_found(0, none);
        } else {
            spin_until([this] { return announced.load(std::memory_order::acquire) == 1; });
            sleep.new_internal_jobs(1, [] { return true; });
            posted.store(1, std::memory_order::release);
        }
    }
};

// the JEC: with no post after getting sleepy, the first sleep attempt
// blocks. (A worker that remembers the JEC from before its own change sees
// that change as a post and aborts a sleep it should have taken.)

template <class S>
struct JecNoPostNoAbort : rl::test_suite<JecNoPostNoAbort<S>, 2> {
    blz::Sleep<S> sleep;
    blz::CoreLatch<S> latch;

    void before() {
        RL_ASSERT(sleep.init(1));
        sleep.atomic_counters().post_event();  // an earlier post: the JEC is odd
    }

    void thread(unsigned index) {
        NoInjectedJobs none;
        if (index == 0) {
            blz::IdleState idle = sleep.start_looking(0);
            RL_ASSERT(sleep.no_work_found(idle, latch, none) == IdleOutcome::kKeepLooking);  // gets sleepy
            RL_ASSERT(sleep.no_work_found(idle, latch, none) == IdleOutcome::kWoken);
            sleep.work_found(0, none);
        } else {
            spin_until([this] { return sleep.counters().sleeping() == 1; });
            RL_ASSERT(sleep.wake_specific_thread(0));
        }
    }
};

// ---------------------------------------------------------------------------
// the waker decrements: once wake_specific_thread() has woken a worker,
// `sleeping` no longer counts it, whether or not it has run yet (posters in
// between must not count it as asleep).

template <class S>
struct WakerDecrements : rl::test_suite<WakerDecrements<S>, 3> {
    blz::Sleep<S> sleep;
    blz::CoreLatch<S> latches[2];

    void before() { RL_ASSERT(sleep.init(2)); }

    void thread(unsigned index) {
        NoInjectedJobs none;
        if (index < 2) {
            blz::IdleState idle = sleep.start_looking(index);
            while (sleep.no_work_found(idle, latches[index], none) != IdleOutcome::kWoken) {
            }
            sleep.work_found(index, none);
            return;
        }
        spin_until([this] { return sleep.counters().sleeping() == 2; });
        RL_ASSERT(sleep.wake_specific_thread(0));
        RL_ASSERT(sleep.counters().sleeping() == 1);
        RL_ASSERT(sleep.wake_specific_thread(1));
        RL_ASSERT(sleep.counters().sleeping() == 0);
    }
};

// ---------------------------------------------------------------------------
// Bounded waits (0.2): a sleep with a deadline ends woken or timed out
// (Sleep::give_up_sleep), never both. Exactly one of the sleeper and a
// waker takes it out of `sleeping`, and a job posted meanwhile is not lost.
// RelacySync::wait_until with a finite deadline times out or blocks, at the
// model's choice (rl::rand), so every sleep below is explored both ways.

// Any finite deadline: the model's wait_until only tells it from UINT64_MAX.
constexpr uint64_t kDeadline = 1;

// The counters as every moment of every execution must show them: no more
// workers in `sleeping` than the pool has (each is in it at most once: it
// registers again only under its mutex, which its waker holds until it has
// decremented), and none in `inactive` either. A decrement of `sleeping`
// too many wraps the field around (and borrows from the next one). The
// bound is the pool's size, not `inactive`: a waker clears `blocked` before
// it decrements, and a sleeper that sees the 0 before it ever blocked
// leaves `inactive` in work_found in between (Relacy finds that schedule,
// so `sleeping <= inactive` does not hold at every moment).
template <class S>
void assert_counters_sane(const blz::Sleep<S> &sleep) {
    blz::Counters c = sleep.counters();
    RL_ASSERT(c.sleeping() <= sleep.num_workers());
    RL_ASSERT(c.inactive() <= sleep.num_workers());
}

// Once every thread has ended: nobody sleeping, nobody idle.
template <class S>
void assert_counters_at_rest(const blz::Sleep<S> &sleep) {
    blz::Counters c = sleep.counters();
    RL_ASSERT(c.sleeping() == 0);
    RL_ASSERT(c.inactive() == 0);
}

// bounded sleep vs external injector: "sleep vs external injector" with a
// deadline. The worker waits, bounded, for a latch that the job sets when it
// runs; a thread outside the pool injects the job (Injector::push, then
// new_shared_jobs, which wakes the worker if it counts it asleep), so the
// worker's timeout races the poster's wake-up. The poster waits until the
// worker is registered in `sleeping` (or its bounded wait is over) before
// it pushes: a timeout comes only after the registration, and a post before
// it is what "sleep vs external injector" checks; the push, the fences and
// the wake-up still interleave with the worker's final check, its blocking
// and its timeout. A worker that timed out finds the job still queued: it
// waits again, without a deadline (as it does back in its main loop, or in
// wait_for_finish once the task holds its latch, task.cpp), and there a
// lost job is a deadlock. The counters stay sane while it runs and are at
// rest at the end; the job runs once.

template <class S>
struct BoundedSleepVsInjector : rl::test_suite<BoundedSleepVsInjector<S>, 2> {
    blz::Sleep<S> sleep;
    blz::Injector<Node<S>, S> injector;
    blz::CoreLatch<S> done;  // set by the job
    Node<S> job;
    typename S::template atomic<int> taken;
    typename S::template atomic<bool> bounded_over;  // the worker's bounded wait returned

    void before() {
        RL_ASSERT(sleep.init(1));
        sleep.atomic_counters().post_event();  // the JEC starts odd, as in SleepVsInjector
    }

    void thread(unsigned index) {
        auto has_shared_jobs = [this] { return injector.has_jobs(); };
        if (index == 1) {
            spin_until([this] {
                return sleep.counters().sleeping() == 1 || bounded_over.load(std::memory_order::acquire);
            });
            bool was_empty = injector.push(&job);
            sleep.new_shared_jobs(1, [was_empty] { return was_empty; });
            assert_counters_sane(sleep);
            return;
        }
        auto find_work = [this] {
            if (injector.pop() != &job) return false;
            taken.fetch_add(1, std::memory_order::relaxed);
            done.set();  // the worker's own latch, UNSET while it runs a job: nobody to wake
            return true;
        };
        bool ran = wait_until(sleep, 0, done, find_work, has_shared_jobs, kDeadline);
        bounded_over.store(true, std::memory_order::release);
        if (ran) return;
        assert_counters_sane(sleep);
        wait_until(sleep, 0, done, find_work, has_shared_jobs);
        assert_counters_sane(sleep);
    }

    void after() {
        RL_ASSERT(taken.load(std::memory_order::relaxed) == 1);
        assert_counters_at_rest(sleep);
    }
};

// bounded join vs the task's finish: a worker's timed join of a task
// (blz_task_wait_for on a worker: join_task's wait_for_finish, task.cpp)
// against the task running on another worker. Three threads:
//  * worker 0 installs its latch in the task's `joiner` word (a CAS from
//    empty; finding the task finished, it has joined), waits on the latch
//    with a deadline (the bounded Worker::wait_until above: it may find
//    and run the task itself), and after a timeout takes the latch back (a
//    CAS to empty: BLZ_ETIMEDOUT); when the task took it first, it waits
//    without a deadline for the set that follows. Then it frees the latch
//    (in the runtime it is on its stack; here on Relacy's heap, so that a
//    set after the free is ACCESS TO FREED MEMORY) and its thread ends: the
//    job that joined returns to user code, which may block outside the
//    runtime for good;
//  * worker 1 runs its main loop (wait_until on its terminate latch); its
//    find_work takes the task from the injector and runs it;
//  * a thread outside the pool injects the task (Injector::push, then
//    new_shared_jobs) and, once the task ran, sets worker 1's terminate
//    latch (Latch::set). It pushes only once a worker is registered in
//    `sleeping` (or worker 0's join is over), so that the post meets
//    sleeps that may time out; posts before any sleep are the other checks'.
// The task's run ends as SpawnedJob::run's does: it exchanges `joiner` for
// kFinished and sets the latch it found (Latch::set: set(), and
// wake_specific_thread if the latch was SLEEPING). So worker 0's timeout
// races two wake-ups, the poster's (wake_any_threads tries worker 0 first)
// and the latch's. When the timeout wins, the poster's wake goes to worker
// 1 instead, and a worker 0 that leaves without the task hands it off in
// work_found: a task left queued with worker 1 asleep is a deadlock. A
// setter that found the latch SLEEPING while the timeout won wakes after
// worker 0 may have returned and freed the latch: wake_specific_thread
// reads only the worker's sleep state, which outlives it, and finds nobody
// blocked. Checked: the task runs once; the counters stay sane and end at
// rest; the join returned true exactly when it did not take the latch back,
// and a latch taken back is one the task never found.

template <class S>
struct BoundedJoinVsFinish : rl::test_suite<BoundedJoinVsFinish<S>, 3> {
    using JoinLatch = blz::CoreLatch<S>;

    // SpawnedJob's kFinished.
    static JoinLatch *finished() { return reinterpret_cast<JoinLatch *>(std::uintptr_t{1}); }

    blz::Sleep<S> sleep;
    blz::Injector<Node<S>, S> injector;
    blz::CoreLatch<S> terminate1;
    Node<S> task;
    typename S::template atomic<JoinLatch *> joiner;  // SpawnedJob::joiner: empty, a latch, or finished()
    typename S::template atomic<int> taken;
    typename S::template atomic<bool> join_over;  // worker 0's join returned
    // Plain: each written by one thread, read by after() once all ended.
    bool joined = false;            // worker 0's join returned true
    bool latch_taken_back = false;  // worker 0's join timed out (BLZ_ETIMEDOUT)
    bool task_found_latch = false;  // written by the worker that ran the task

    void before() {
        RL_ASSERT(sleep.init(2));
        sleep.atomic_counters().post_event();  // the JEC starts odd, as in SleepVsInjector
    }

    // The end of SpawnedJob::run for a task that is not detached.
    void run_task() {
        taken.fetch_add(1, std::memory_order::release);
        JoinLatch *latch = joiner.exchange(finished(), std::memory_order::acq_rel);
        if (latch == nullptr) return;
        task_found_latch = true;
        set_latch(*latch, sleep, 0);  // the setter is a worker of the waiter's pool: no pin
    }

    bool find_task() {
        if (injector.pop() != &task) return false;
        run_task();
        return true;
    }

    void thread(unsigned index) {
        auto has_shared_jobs = [this] { return injector.has_jobs(); };
        auto find_work = [this] { return find_task(); };
        if (index == 0) {
            join_with_deadline(find_work, has_shared_jobs);
            join_over.store(true, std::memory_order::release);
            assert_counters_sane(sleep);
        } else if (index == 1) {
            wait_until(sleep, 1, terminate1, find_work, has_shared_jobs);
            assert_counters_sane(sleep);
        } else {
            spin_until([this] {
                return sleep.counters().sleeping() >= 1 || join_over.load(std::memory_order::acquire);
            });
            bool was_empty = injector.push(&task);
            sleep.new_shared_jobs(1, [was_empty] { return was_empty; });
            assert_counters_sane(sleep);
            spin_until([this] { return taken.load(std::memory_order::acquire) == 1; });
            set_latch(terminate1, sleep, 1);
        }
    }

    // join_task -> wait_for_finish on worker 0 (Latch::wait_until and
    // Latch::wait of a worker are its Worker::wait_until).
    template <class FindWork, class HasSharedJobs>
    void join_with_deadline(FindWork find_work, HasSharedJobs has_shared_jobs) {
        // Relacy's heap by hand: `delete` would call the sized operator
        // delete, which relacy.hpp does not replace (the pools of the
        // lifetime checks have class-scope operators for that).
        JoinLatch *latch = std::construct_at(static_cast<JoinLatch *>(rl::rl_malloc(sizeof(JoinLatch), $)));
        JoinLatch *expected = nullptr;
        if (!joiner.compare_exchange_strong(expected, latch, std::memory_order::acq_rel,
                                            std::memory_order::acquire)) {
            RL_ASSERT(expected == finished());
            joined = true;
        } else if (wait_until(sleep, 0, *latch, find_work, has_shared_jobs, kDeadline)) {
            joined = true;
        } else {
            expected = latch;
            if (joiner.compare_exchange_strong(expected, nullptr, std::memory_order::relaxed,
                                               std::memory_order::acquire)) {
                latch_taken_back = true;
            } else {
                wait_until(sleep, 0, *latch, find_work, has_shared_jobs);
                joined = true;
            }
        }
        std::destroy_at(latch);
        rl::rl_free(latch, $);
    }

    void after() {
        RL_ASSERT(taken.load(std::memory_order::relaxed) == 1);
        assert_counters_at_rest(sleep);
        RL_ASSERT(joined != latch_taken_back);
        RL_ASSERT(!(latch_taken_back && task_found_latch));
    }
};

// ---------------------------------------------------------------------------
// Lifetimes (issue 13): a pool freed while a thread outside it may still
// reach it.
//
// The pools of these checks live on Relacy's heap, so that `delete` ends
// the lives of their atomics and Relacy reports any later access as ACCESS
// TO FREED MEMORY (and a pool nobody frees as a leak, one freed twice as a
// bad free). relacy.hpp's `new` reaches Relacy's heap through the plain
// operator new, which it replaces; but a pool holds a Sleep, whose atomics
// sit on cache lines of their own, and `new` of an over-aligned type calls
// the aligned operator new, which Relacy does not replace. These
// class-scope operators, which `new` and `delete` of a pool find first,
// take Relacy's heap too: aligned by hand, the address of the raw block
// kept just before the object. (They have to name operator new and
// delete, which relacy.hpp's macros would rewrite.)
#pragma push_macro("new")
#pragma push_macro("delete")
#undef new
#undef delete
struct OnRelacyHeap {
    static void *operator new(std::size_t bytes, std::align_val_t alignment) {
        const auto align = static_cast<std::uintptr_t>(alignment);
        void *raw = rl::rl_malloc(bytes + sizeof(void *) + align, $);
        std::uintptr_t at = (reinterpret_cast<std::uintptr_t>(raw) + sizeof(void *) + align - 1) & ~(align - 1);
        reinterpret_cast<void **>(at)[-1] = raw;
        return reinterpret_cast<void *>(at);
    }
    static void operator delete(void *object, std::align_val_t) { rl::rl_free(static_cast<void **>(object)[-1], $); }
};
#pragma pop_macro("delete")
#pragma pop_macro("new")

// A pool's plain memory, as Relacy's race detector sees it. Every access
// of a thread to the pool must happen before the pool's destructor; Relacy
// checks that order only for its rl::var, and sees an access after the
// free only on its own objects. This variable stands for the pool's plain
// fields (Registry's members, Sleep::states_ and num_workers_, the words a
// post or a wake-up reads): a thread reads it where the code it restates
// makes such an access, and the destructor writes it, as the end of an
// object's life does. A read that does not happen before the destructor is
// a DATA RACE; one after it, ACCESS TO FREED MEMORY. Reading it adds no
// scheduling point. Declared last in a pool, so destroyed first: the
// destructor's write comes before those of the pool's other members.
class PlainFields : rl::nocopy<> {
public:
    PlainFields() : word_(0) {}
    ~PlainFields() { word_($) = 1; }

    void read() const { (void)word_($).load(); }

private:
    rl::var<int> word_;
};

// lifetime: a spawn from outside the pool against its destroy. Three
// threads:
//  * the spawner runs spawn_task's admission (submit_admitted,
//    admission.hpp) for a detached task from a thread that is not one of
//    the pool's workers: enter with two units (the task's and the call's),
//    Registry::inject (inject_shared, publish.hpp: Injector::push, then
//    Sleep::new_shared_jobs), then give back the call's unit as its last
//    access to the pool (Registry::leave). Refused (BLZ_ESHUTDOWN), it
//    does nothing;
//  * the pool's one worker runs the idle loop of Worker::wait_until; its
//    find_work pops the task from the injector, runs it and gives back the
//    task's unit (SpawnedJob::run), setting destroy's latch when that
//    leave drains the closed pool;
//  * the destroyer restates Registry::shut_down and destroy: close(); if
//    work was active, wait for the drained latch; set the worker's
//    terminate latch (Latch::set: wake it if it sleeps); join it (a flag
//    the worker raises as its thread ends); mark_destroyed(), and free the
//    pool when that says so.
// The spawner reads the pool's plain fields just before its post: the
// post's first access, its read of the counters word, must happen before
// the pool's destructor, and it does only through the leave that follows
// (or a CAS of the post that a worker's later update of the counters
// reads). The JEC starts odd, as in SleepVsInjector, so that the post
// usually only reads the counters and releases nothing.
// One assumption stands for the caller's side of the contract: the
// destroyer frees the pool only once the spawner's enter() has returned
// (a flag). Nothing in the pool can protect a call that is not counted
// yet: a refused spawner may read the word before close() (a stale
// relaxed load, or just before it) and make its CAS after a destroy that
// did not have to wait for it has freed the pool. The flag orders only
// the admission; the push, the post and the leave that the fix protects
// come after it.
// The mutant is the code before the fix: the spawner enters with the
// task's unit only and has no unit of its own to give back, so the task's
// leave can drain the pool before the spawner's post, and destroy free it.

template <class S>
struct SpawnPool : OnRelacyHeap {
    blz::Admission<S> admission;
    blz::Sleep<S> sleep;
    blz::Injector<Node<S>, S> injector;
    blz::CoreLatch<S> terminate;  // the worker's (Worker::terminate_)
    Node<S> task;                 // a task block comes from the pool's recycler
    PlainFields fields;
};

template <class S>
struct OutsideSpawnVsDestroy : rl::test_suite<OutsideSpawnVsDestroy<S>, 3> {
    SpawnPool<S> *pool = nullptr;  // freed by the destroyer
    // Outside the pool: destroy's latch is on its stack (Registry::shut_down),
    // the rest is the test's.
    blz::CoreLatch<S> drained;
    typename S::template atomic<bool> admission_over, worker_returned;
    // Plain: each written by one thread, read by after() once all ended.
    bool admitted = false;
    int runs = 0;

    void before() {
        pool = new SpawnPool<S>;
        RL_ASSERT(pool->sleep.init(1));
        pool->sleep.atomic_counters().post_event();  // the JEC starts odd
    }

    void thread(unsigned index) {
        if (index == 0) {
            spawn(*pool);
        } else if (index == 1) {
            work(*pool);
        } else {
            destroy(pool);
        }
    }

    // Registry::leave: the leave that drains a closed pool wakes destroy [A1].
    void leave(SpawnPool<S> &p) {
        if (p.admission.leave()) drained.set();
    }

    // The pool as submit_admitted sees it (Registry::enter and leave).
    struct Admitting {
        OutsideSpawnVsDestroy &test;
        SpawnPool<S> &p;
        blz_status enter(uint64_t units, bool own_worker) {
            blz_status status = p.admission.enter(own_worker, units);
            test.admission_over.store(true, std::memory_order::release);
            return status;
        }
        void leave(uint64_t units) {
            if (p.admission.leave(units)) test.drained.set();  // Registry::leave [A1]
        }
    };

    // spawn_task from outside the pool (detached, no group): the real
    // submit_admitted (admission.hpp) around Registry::inject's real
    // inject_shared (publish.hpp).
    void spawn(SpawnPool<S> &p) {
        Admitting pool{*this, p};
        blz_status status = blz::submit_admitted<S>(pool, false, [this, &p] {
            admitted = true;
            // From here on the task may run and leave; the post's first
            // access (above) is a read of the pool's plain fields.
            blz::inject_shared(p.injector, p.sleep, &p.task, [&p] { p.fields.read(); });
            return BLZ_OK;
        });
        (void)status;  // refused (BLZ_ESHUTDOWN): nothing was queued
    }

    void work(SpawnPool<S> &p) {
        auto run_task = [this, &p] {
            if (p.injector.pop() == nullptr) return false;
            ++runs;
            leave(p);  // the task's unit (SpawnedJob::run)
            return true;
        };
        auto has_shared_jobs = [&p] { return p.injector.has_jobs(); };
        wait_until(p.sleep, 0, p.terminate, run_task, has_shared_jobs);
        worker_returned.store(true, std::memory_order::release);  // the thread ends: pthread_join returns
    }

    void destroy(SpawnPool<S> *p) {
        if (p->admission.close() != 0) spin_until([this] { return drained.probe(); });
        set_latch(p->terminate, p->sleep, 0);
        spin_until([this] { return worker_returned.load(std::memory_order::acquire); });
        spin_until([this] { return admission_over.load(std::memory_order::acquire); });  // the assumption above
        if (p->admission.mark_destroyed()) delete p;  // no refs: destroy frees [A3]
    }

    // The task ran exactly once if it was admitted, never otherwise.
    void after() { RL_ASSERT(runs == (admitted ? 1 : 0)); }
};

// lifetime: a latch set across pools. The waiter W, the only worker of
// pool B, waits on a latch through the idle loop of Worker::wait_until with
// B's Sleep; the latch itself is outside B (in the runtime on W's stack,
// and W does not return before it is set). The setter X is not one of B's
// workers and runs Latch::set's set_and_wake_worker: pin B, set, wake W
// if set() found it SLEEPING, release the pin and free B if that was the
// last hold after destroy. A third thread P posts into B (new_internal_jobs: its JEC
// change aborts W's sleep, or P wakes W), so that W can leave its sleep
// for a reason other than X's wake-up; then P joins W (a flag W raises as
// it returns) and destroys B: close(), mark_destroyed(), free unless a pin
// still holds B. X's wake-up begins with a read of B's plain fields
// (Sleep::states_), which must happen before B's destructor. The mutant
// is the code before the fix: X does not pin, and nothing orders its
// wake-up before P's free.

template <class S>
struct LatchPool : OnRelacyHeap {
    blz::Admission<S> admission;
    blz::Sleep<S> sleep;
    PlainFields fields;
};

template <class S>
struct LatchSetAcrossPools : rl::test_suite<LatchSetAcrossPools<S>, 3> {
    static constexpr bool kPin = S::kMutant != Mutant::kNoPinOnLatchSet;

    LatchPool<S> *b = nullptr;  // freed by P, or by X's release of its pin
    blz::CoreLatch<S> latch;    // W waits on it
    typename S::template atomic<bool> w_returned;

    void before() {
        b = new LatchPool<S>;
        RL_ASSERT(b->sleep.init(1));
    }

    void thread(unsigned index) {
        if (index == 0) {
            wait_on_latch(*b);
        } else if (index == 1) {
            set_from_outside(b);
        } else {
            post_then_destroy(b);
        }
    }

    void wait_on_latch(LatchPool<S> &pool) {
        NoInjectedJobs none;
        wait_until(pool.sleep, 0, latch, [] { return false; }, none);
        w_returned.store(true, std::memory_order::release);  // W's job returns; its pool may go
    }

    // Latch::set by a thread that is not one of B's workers (the real
    // set_and_wake_worker): W still waits while X pins B, so B is alive
    // then [A4].
    void set_from_outside(LatchPool<S> *pool) {
        Wakeable wakeable{pool};
        blz::set_and_wake_worker(latch, wakeable, 0, kPin);
    }

    // B as set_and_wake_worker sees it (Registry's pin, wake and unpin).
    struct Wakeable {
        LatchPool<S> *pool;
        void pin() { pool->admission.pin(); }
        void wake(uint32_t index) {
            pool->fields.read();  // wake_specific_thread reads Sleep::states_ first
            pool->sleep.wake_specific_thread(index);
        }
        void unpin() {
            if (pool->admission.release_ref()) delete pool;  // the last hold after destroy [A3]
        }
    };

    void post_then_destroy(LatchPool<S> *pool) {
        pool->sleep.new_internal_jobs(1, [] { return true; });
        spin_until([this] { return w_returned.load(std::memory_order::acquire); });
        pool->admission.close();  // nothing active: destroy does not wait
        if (pool->admission.mark_destroyed()) delete pool;
    }
};

// ---------------------------------------------------------------------------
// Spare hand-off (lib/spares.hpp, the real SpareCounts; Registry's
// block_begin, block_end, retire_spare and spare_exited around it, restated
// with their slots left out: max_spares is 2 and one spare is alive, so a
// claim always finds a free slot). Thread W is a worker entering a blocking
// section and coming back; thread S is an idle spare deciding whether to
// retire, with the early read of the counts retire_spare makes before the
// spare lock, and, once retired, its thread's [B4] look before it ends.
// [B3] must hold under the lock at every step where no retired thread is
// between its retirement and its [B4] look: after W counted itself, before
// W leaves, and after S's decision. The mutant decides on the early read: W
// counts itself between that read and the lock, finds the spare alive and
// starts none, and the spare leaves W without a stand-in.
template <class S>
struct SpareHandOff : rl::test_suite<SpareHandOff<S>, 2> {
    using Lock = std::lock_guard<typename S::mutex>;
    blz::SpareCounts<S> counts{2};

    void before() {
        Lock lock(counts.mutex());
        counts.add_live();  // the idle spare, started by an earlier section
    }

    void thread(unsigned index) {
        if (index == 0) {
            block_then_return();
        } else {
            idle_spare();
        }
    }

    void block_then_return() {
        {
            Lock lock(counts.mutex());
            if (counts.count_blocked()) counts.add_live();  // [B1] claim_spare_slot: a slot is free
            RL_ASSERT(counts.stand_ins_cover_blocked());
        }
        {
            Lock lock(counts.mutex());
            RL_ASSERT(counts.stand_ins_cover_blocked());  // still blocked until here
            counts.uncount_blocked();                     // [B2]
        }
    }

    void idle_spare() {
        const bool early = counts.stale_retire_choice();  // retire_spare's read before the lock
        bool retired = false;
        {
            Lock lock(counts.mutex());
            if (counts.may_retire(early)) {
                counts.remove_live();
                retired = true;
            }
            RL_ASSERT(counts.stand_ins_cover_blocked());  // [B3]
        }
        if (!retired) return;
        Lock lock(counts.mutex());  // spare_exited: [B4] the slot back if a section needs it
        if (counts.needs_stand_in()) counts.add_live();
        RL_ASSERT(counts.stand_ins_cover_blocked());
    }

    void after() {
        RL_ASSERT(counts.blocked() == 0);
        RL_ASSERT(counts.live() <= counts.max_spares());
    }
};

// ---------------------------------------------------------------------------
// running and reporting

enum class Search { kFull, kRandom };

struct Outcome {
    bool passed;             // Relacy found nothing
    std::string method;      // how it searched, and how far
    std::string finding;     // Relacy's verdict when it found something
    double seconds;
};

template <class Test>
Outcome run(Search search, rl::iteration_t iterations, bool history) {
    rl::test_params params;
    params.search_type = search == Search::kFull ? rl::sched_full : rl::sched_random;
    params.iteration_count = iterations;  // the random scheduler's budget; full search ignores it
    // A stream without a buffer discards what it is given (a failing run
    // prints its whole history, which the table does not want).
    std::ostream sink(nullptr);
    params.output_stream = history ? &std::cout : &sink;
    params.progress_stream = &sink;
    auto start = std::chrono::steady_clock::now();
    bool passed = rl::simulate<Test>(params);
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::string method;
    if (search == Search::kFull) {
        method = passed ? "full search, " + std::to_string(params.stop_iteration) + " executions"
                        : "full search, found at execution " + std::to_string(params.stop_iteration);
    } else {
        method = passed ? "random, " + std::to_string(params.stop_iteration) + " iterations"
                        : "random, found at iteration " + std::to_string(params.stop_iteration) + " of " +
                              std::to_string(iterations);
    }
    return {passed, method, passed ? "" : rl::test_result_str(params.test_result), seconds};
}

using Runner = Outcome (*)(Search, rl::iteration_t, bool);

struct Row {
    const char *check;
    Mutant mutant;
    Search search;
    Runner runner;
};

const char *mutant_name(Mutant m) {
    switch (m) {
        case Mutant::kNone: return "real";
        case Mutant::kNoInjectFence: return "no fence on inject";
        case Mutant::kNoSleepFence: return "no fence before final check";
        case Mutant::kJecSavedBeforeChange: return "JEC saved before own change";
        case Mutant::kBlitzJecDirection: return "Blitz's JEC direction";
        case Mutant::kSleeperDecrements: return "sleeper decrements sleeping";
        case Mutant::kSlotReadAfterCas: return "thief reads slot after CAS";
        case Mutant::kFreeRetiredBuffer: return "retired buffer freed at once";
        case Mutant::kRelaxedPublish: return "publish stores split relaxed";
        case Mutant::kNoPublicPopFence: return "public pop without fence";
        case Mutant::kLatchIgnoresSleepy: return "sleeper ignores failed fall_asleep";
        case Mutant::kIsolatedWakeNoFence: return "isolated wake without its fence";
        case Mutant::kSpawnCountsOnlyTask: return "spawn admission ends with its task";
        case Mutant::kNoPinOnLatchSet: return "latch set without pinning the pool";
        case Mutant::kChecksOnlyInjector: return "final check sees only the injector";
        case Mutant::kTimeoutWithoutMutex: return "timeout without the mutex";
        case Mutant::kNoForkRequest: return "a thief's request is lost";
        case Mutant::kPromoteWithoutPost: return "promotion without its post";
        case Mutant::kPopIgnoresPromoted: return "join pops a promoted frame inline";
        case Mutant::kJoinSkipsStolenFrame: return "join skips a stolen frame";
        case Mutant::kSpawnerHoldsNoCount: return "spawner takes no hold";
        case Mutant::kSpareRetiresOnStaleCount: return "spare retires on a stale count";
    }
    return "?";
}

// One row per (check, variant). The real variant first; every mutant whose
// switch lies on the path the check runs follows it.
#define ROW(check, Test, M, search) Row{check, M, search, &run<Test<RS<M>>>}

const std::vector<Row> &rows() {
    static const std::vector<Row> all = {
        ROW("deque: owner + 2 thieves across grows", DequeOwnerTwoThieves, Mutant::kNone, Search::kRandom),
        ROW("deque: owner + 2 thieves across grows", DequeOwnerTwoThieves, Mutant::kSlotReadAfterCas, Search::kRandom),
        ROW("deque: owner + 2 thieves across grows", DequeOwnerTwoThieves, Mutant::kFreeRetiredBuffer, Search::kRandom),
        ROW("deque: owner + 2 thieves across grows", DequeOwnerTwoThieves, Mutant::kRelaxedPublish, Search::kRandom),
        ROW("deque: owner + 2 thieves across grows", DequeOwnerTwoThieves, Mutant::kNoPublicPopFence, Search::kRandom),
        ROW("deque: a steal across a grow", DequeStealAcrossGrow, Mutant::kNone, Search::kFull),
        ROW("deque: a steal across a grow", DequeStealAcrossGrow, Mutant::kFreeRetiredBuffer, Search::kFull),
        ROW("deque: a steal across a grow", DequeStealAcrossGrow, Mutant::kSlotReadAfterCas, Search::kFull),
        ROW("deque: a steal across a grow", DequeStealAcrossGrow, Mutant::kRelaxedPublish, Search::kFull),
        ROW("deque: public pop vs thief", DequePublicPopVsThief, Mutant::kNone, Search::kFull),
        ROW("deque: public pop vs thief", DequePublicPopVsThief, Mutant::kNoPublicPopFence, Search::kFull),
        ROW("sleep vs external injector", SleepVsInjector, Mutant::kNone, Search::kRandom),
        ROW("sleep vs external injector", SleepVsInjector, Mutant::kNoInjectFence, Search::kRandom),
        ROW("sleep vs external injector", SleepVsInjector, Mutant::kNoSleepFence, Search::kRandom),
        ROW("2 workers vs poster of 2 jobs", TwoWorkersTwoJobs, Mutant::kNone, Search::kRandom),
        ROW("2 workers vs poster of 2 jobs", TwoWorkersTwoJobs, Mutant::kNoInjectFence, Search::kRandom),
        ROW("2 workers vs poster of 2 jobs", TwoWorkersTwoJobs, Mutant::kNoSleepFence, Search::kRandom),
        ROW("fork: thief vs the owner's join", ForkThiefVsJoin, Mutant::kNone, Search::kRandom),
        ROW("fork: thief vs the owner's join", ForkThiefVsJoin, Mutant::kPopIgnoresPromoted, Search::kRandom),
        ROW("fork: thief vs the owner's join", ForkThiefVsJoin, Mutant::kJoinSkipsStolenFrame, Search::kRandom),
        ROW("fork: thief vs the owner's join", ForkThiefVsJoin, Mutant::kLatchIgnoresSleepy, Search::kRandom),
        ROW("fork: a sleeper gets the second half", ForkSleeperGetsHalf, Mutant::kNone, Search::kRandom),
        ROW("fork: a sleeper gets the second half", ForkSleeperGetsHalf, Mutant::kNoForkRequest, Search::kRandom),
        ROW("fork: a sleeper gets the second half", ForkSleeperGetsHalf, Mutant::kPromoteWithoutPost, Search::kRandom),
        ROW("fork: a sleeper gets the second half", ForkSleeperGetsHalf, Mutant::kPopIgnoresPromoted, Search::kRandom),
        ROW("spawn on a worker whose job blocks", SpawnOnBlockingWorker, Mutant::kNone, Search::kRandom),
        ROW("spawn on a worker whose job blocks", SpawnOnBlockingWorker, Mutant::kNoInjectFence, Search::kRandom),
        ROW("spawn on a worker whose job blocks", SpawnOnBlockingWorker, Mutant::kNoSleepFence, Search::kRandom),
        ROW("spawn on a worker whose job blocks", SpawnOnBlockingWorker, Mutant::kChecksOnlyInjector, Search::kRandom),
        ROW("latch set races falling asleep", LatchSetVsSleep, Mutant::kNone, Search::kFull),
        ROW("latch set races falling asleep", LatchSetVsSleep, Mutant::kLatchIgnoresSleepy, Search::kFull),
        ROW("isolated wait vs latch set", IsolatedWaitVsSetUnbounded, Mutant::kNone, Search::kFull),
        ROW("isolated wait vs latch set", IsolatedWaitVsSetUnbounded, Mutant::kIsolatedWakeNoFence, Search::kFull),
        ROW("bounded isolated wait vs latch set", IsolatedWaitVsSetBounded, Mutant::kNone, Search::kRandom),
        ROW("bounded isolated wait vs latch set", IsolatedWaitVsSetBounded, Mutant::kIsolatedWakeNoFence, Search::kRandom),
        ROW("JEC: a post after getting sleepy", JecSeesPostAfterSleepy, Mutant::kNone, Search::kFull),
        ROW("JEC: a post after getting sleepy", JecSeesPostAfterSleepy, Mutant::kBlitzJecDirection, Search::kFull),
        ROW("JEC: no post, no aborted sleep", JecNoPostNoAbort, Mutant::kNone, Search::kRandom),
        ROW("JEC: no post, no aborted sleep", JecNoPostNoAbort, Mutant::kJecSavedBeforeChange, Search::kRandom),
        ROW("waker decrements sleeping", WakerDecrements, Mutant::kNone, Search::kRandom),
        ROW("waker decrements sleeping", WakerDecrements, Mutant::kSleeperDecrements, Search::kRandom),
        ROW("bounded sleep vs external injector", BoundedSleepVsInjector, Mutant::kNone, Search::kRandom),
        ROW("bounded sleep vs external injector", BoundedSleepVsInjector, Mutant::kTimeoutWithoutMutex,
            Search::kRandom),
        ROW("bounded join vs the task's finish", BoundedJoinVsFinish, Mutant::kNone, Search::kRandom),
        ROW("bounded join vs the task's finish", BoundedJoinVsFinish, Mutant::kTimeoutWithoutMutex, Search::kRandom),
        ROW("lifetime: outside spawn vs destroy", OutsideSpawnVsDestroy, Mutant::kNone, Search::kRandom),
        ROW("lifetime: outside spawn vs destroy", OutsideSpawnVsDestroy, Mutant::kSpawnCountsOnlyTask, Search::kRandom),
        ROW("lifetime: latch set across pools", LatchSetAcrossPools, Mutant::kNone, Search::kRandom),
        ROW("lifetime: latch set across pools", LatchSetAcrossPools, Mutant::kNoPinOnLatchSet, Search::kRandom),
        ROW("dependency count hand-off", DependencyHandOff, Mutant::kNone, Search::kRandom),
        ROW("dependency count hand-off", DependencyHandOff, Mutant::kSpawnerHoldsNoCount, Search::kRandom),
        ROW("spare hand-off: retire vs block", SpareHandOff, Mutant::kNone, Search::kFull),
        ROW("spare hand-off: retire vs block", SpareHandOff, Mutant::kSpareRetiresOnStaleCount, Search::kFull),
    };
    return all;
}

struct Options {
    rl::iteration_t iterations = 200000;
    const char *only = nullptr;
    bool history = false;
    bool quick = false;
};

Options parse(int argc, char **argv) {
    Options o;
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--iterations") == 0 && i + 1 < argc) {
            o.iterations = static_cast<rl::iteration_t>(std::strtoul(argv[++i], nullptr, 10));
        } else if (std::strcmp(argv[i], "--only") == 0 && i + 1 < argc) {
            o.only = argv[++i];
        } else if (std::strcmp(argv[i], "--history") == 0) {
            o.history = true;
        } else if (std::strcmp(argv[i], "--quick") == 0) {
            o.quick = true;
        } else {
            std::fprintf(stderr, "usage: %s [--iterations N] [--quick] [--only SUBSTRING] [--history]\n", argv[0]);
            std::exit(2);
        }
    }
    return o;
}

}  // namespace

int main(int argc, char **argv) {
    const Options options = parse(argc, argv);
    int good = 0, bad = 0;
    std::printf("%-36s %-36s %-8s %-44s %8s  %s\n", "check", "variant", "result", "method", "time", "finding");
    for (const Row &row : rows()) {
        if (options.only != nullptr && std::strstr(row.check, options.only) == nullptr) continue;
        const bool real = row.mutant == Mutant::kNone;
        const Search search = options.quick && real ? Search::kRandom : row.search;
        Outcome outcome = row.runner(search, options.iterations, options.history);
        const bool as_expected = outcome.passed == real;
        const char *result = real ? (outcome.passed ? "pass" : "FAIL") : (outcome.passed ? "MISSED" : "caught");
        std::printf("%-36s %-36s %-8s %-44s %7.2fs  %s\n", row.check, mutant_name(row.mutant), result,
                    outcome.method.c_str(), outcome.seconds, outcome.finding.c_str());
        std::fflush(stdout);
        (as_expected ? good : bad) += 1;
    }
    std::printf("relacy: %d passed, %d failed\n", good, bad);
    return bad == 0 ? 0 : 1;
}
