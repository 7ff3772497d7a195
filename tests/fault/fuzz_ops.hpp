// The call-sequence fuzzer's operations (tests/fault/fuzz_calls.cpp and
// its parts): where code runs (Ctx), the pool an operation calls (Target),
// the run's shared state, and the operations each part provides:
//   fuzz_tasks.cpp  spawned tasks, their on_done and handles; group sessions
//   fuzz_work.cpp   fork-join, parallel_for, blz_call, broadcast, statistics,
//                   the cap, tracing, probes of known answers, the bag
//   fuzz_pools.cpp  pool configurations, hooks, embedder threads; destroy and
//                   release in each legal way, the reconciliation of a pool's
//                   ledger; private and hosted pools; spawns at thread exit
//   fuzz_calls.cpp  the pause-point hook, nested operations, the drivers, the
//                   watchdog, the command line, the mutants, main
#pragma once

#include <blitz.h>

#include <pthread.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fuzz_support.hpp"
#include "fuzz_world.hpp"
#include "support.hpp"

namespace fuzz {

constexpr bool kSlowBuild = blz_test::kAddressSanitizer || blz_test::kThreadSanitizer
#if defined(BLZ_CHAOS)
                            || true
#endif
    ;

// How long a pause point holds a thread in a window that a destroy must
// not close: long enough for the rest of the pool to finish its work, far
// longer in the slower builds.
constexpr uint64_t kHoldNs = kSlowBuild ? 20000000 : 4000000;

inline std::atomic<uint64_t> g_pool_ids{0};
inline std::atomic<int> g_pending_releases{0};  // releases whose on_destroyed has not run
inline std::atomic<int64_t> g_live_recs{0};     // pool records not yet checked and freed
inline std::atomic<int> g_trace_stops{0};       // trace stops under way (the trace-writer pause looks at it)
inline std::string g_tmpdir;                    // the run's trace files
inline std::vector<int> g_process_cpus;         // the main thread's affinity mask, read at the start
inline pthread_key_t g_late_key;  // made after the library's own key: its destructor runs after the library's

// What the run did, for the summary lines.
struct Totals {
    std::atomic<uint64_t> ops{0}, tasks{0}, accepted{0}, refused{0}, failures{0}, pools{0}, private_pools{0},
        create_refusals{0}, destroys{0}, releases{0}, gate_destroys{0}, racer_refusals{0}, task_destroys{0},
        cancel_pending_destroys{0}, sessions{0}, group_waits{0}, timeouts{0}, joins{0}, stats{0}, traces{0}, caps{0},
        broadcasts{0}, hosted{0}, edeadlk{0}, exact_checks{0}, held_posts{0}, held_wakes{0}, thread_exits{0},
        task_cancels{0}, task_cancel_skips{0}, blocks{0};
};
inline Totals g_totals;

inline void bump(std::atomic<uint64_t> &counter, uint64_t n = 1) {
    counter.fetch_add(n, std::memory_order_relaxed);
}  // relaxed: counters

const char *name_of(int32_t status);

// The pauses' own randomness: per thread, apart from the choice streams,
// so that a pause never shifts a choice.
inline bool one_in(uint32_t n) {
    thread_local uint64_t state = 0;
    if (state == 0) state = reinterpret_cast<uintptr_t>(&state) | 1;
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return (state >> 33) % n == 0;
}

template <class Pred>
void wait_until(Pred pred) {
    while (!pred()) sleep_us(50);
}

// The finishing task on this thread: set at the end of a task's fn and of
// its on_done, the last code of ours before the library takes its
// waiter's latch (the kTaskTookLatch pause point).
inline thread_local TaskEntry *t_finishing = nullptr;

// Where code runs and what it may do.
struct Ctx {
    explicit Ctx(uint64_t seed) : rng(seed) {}
    // Work running on a worker of `rec` (a task, a fork-join half, a call).
    Ctx(uint64_t seed, PoolRec *rec, int depth, TaskEntry *self, GroupSession *session, Link link)
        : rng(seed), own(rec), level(rec->level), depth(depth), self(self), session(session), link(link) {}
    Rng rng;
    PoolRec *own = nullptr;           // the pool whose worker runs this; nullptr on an outside thread
    int level = 0;                    // blocking waits only on pools of a higher level
    int depth = 0;                    // nested work it may still start
    TaskEntry *self = nullptr;        // the innermost task, while it owns its handle (kSelf)
    GroupSession *session = nullptr;  // the innermost task's group
    Link link = Link::kNone;
    bool task_cancel = false;  // the innermost task may be cancelled by blz_task_cancel (no group: see TaskEntry)
    bool nonblocking = false;  // a destroy's racer: must not wait for the pool's work
    bool released = false;     // this task gave its own pool up: no more calls on it
};

// The pool an operation calls, and how it reached it.
struct Target {
    PoolRec *rec = nullptr;
    Slot *slot = nullptr;  // through a shared slot (the calls follow its rule), or nullptr
    bool own = false;      // the calling thread is one of its workers
    int level = 0;
    bool racing = false;  // the racer of a destroy: calls made although the destroy was decided
    blz_pool *pool() const { return rec->handle(); }
    // A refusal is right only for a thread outside the pool once its destroy was decided.
    bool may_refuse() const { return !own && rec->phase.load(std::memory_order_seq_cst) != kPhaseOpen; }
};

// Work a group's task waits for through a blz_call or a broadcast, or on
// another pool, is the group's work (blitz.h, blz_group_create_ex); issue
// 27 item 9 found it undecided, so --skip-known 9 accepts either outcome.
inline Link called_link() { return options().skips(9) ? Link::kAmbiguous : Link::kDefinite; }

// The link of work on `t` started from `ctx`.
inline Link link_for(const Ctx &ctx, const Target &t) {
    if (ctx.session == nullptr) return Link::kNone;
    return t.own && ctx.link == Link::kDefinite ? Link::kDefinite : called_link();
}

// Makes one call on t's pool under the rule of blz_pool_destroy
// (PoolCall): false, and nothing called, once the pool's destroy was
// decided. One PoolCall covers one call: its admission is what the
// destroyer waits for, so a second call under it could start after the
// destroy returned.
template <class F>
bool call_once(const Target &t, F &&call) {
    PoolCall mark(t.slot != nullptr, t.rec, t.racing);
    if (!mark.ok()) return false;
    call();
    return true;
}

inline void fail_now(Fail fail) {
    if (fail == Fail::kBlzFail) blz_fail();
    if (fail == Fail::kThrow) throw FuzzError{};
}

inline Fail pick_fail(Rng &r, uint32_t percent) {
    if (!r.percent(percent)) return Fail::kNone;
    return r.percent(50) ? Fail::kBlzFail : Fail::kThrow;
}

// fuzz_tasks.cpp
void check_on_worker(PoolRec *rec, const char *what);
void check_cancel_flag(Ctx &ctx);
void task_main(void *arg);
void end_task_body(TaskEntry *e);
void join_handle(TaskEntry *e);
void wait_for_handle(TaskEntry *e, Rng rng);
TaskEntry *spawn_task(Ctx &ctx, const Target &t);
void spawn_into_session(Ctx &ctx, GroupSession &s, bool owner);
bool create_group(Ctx &ctx, const Target &t, GroupSession &s);
void cancel_group(GroupSession &s);
void wait_group(Ctx &ctx, GroupSession &s);
void destroy_group(Ctx &ctx, GroupSession &s);
void op_session(Ctx &ctx, const Target &t);

// fuzz_work.cpp
void op_fork_join(Ctx &ctx, const Target &t);
void op_parallel_for(Ctx &ctx, const Target &t);
void op_call(Ctx &ctx, const Target &t);
void op_broadcast(Ctx &ctx, const Target &t);
void op_stats(Ctx &ctx, const Target &t);
void op_cap(Ctx &ctx, const Target &t);
void op_trace(Ctx &ctx, const Target &t);
void check_trace_file(PoolRec *rec, const std::string &path);
void probe_deadlocks(Ctx &ctx);
void probe_identity(Ctx &ctx);
void op_bad_input(Ctx &ctx, const Target &t);
void op_bag_join(Ctx &ctx);

// fuzz_pools.cpp
enum class DestroyMode { kPlain, kGate, kRelease, kCancelPending };

struct DestroyPlan {
    DestroyMode mode = DestroyMode::kPlain;
    bool racer = false;
    bool child_waiter = false;  // if the pool has two workers at least
    bool cap_one = false;       // ... and the cap is 1 before destroy
    bool trace_first = false;   // cancel-pending: a trace destroy must write
    uint64_t racer_seed = 0;
};

std::vector<int> cpus_of_this_thread();
std::shared_ptr<PoolRec> make_rec(int slot, int level);
int32_t create_pool(Rng &r, PoolRec &rec, bool from_worker);
void check_accepted_entry(const TaskEntry &e, const char *when);
void check_refused_entry(const TaskEntry &e);
void destroy_claimed(Slot &slot, const std::shared_ptr<PoolRec> &rec, const DestroyPlan &p);
void destroy_slot(Ctx &ctx, Slot &slot);
void release_own_pool(Ctx &ctx);
void op_private_pool(Ctx &ctx);
void op_hosted_pool(Ctx &ctx);
void op_thread_exit(Ctx &ctx, const Target &t);
void late_key_destructor(void *arg);

// fuzz_calls.cpp
void watch_pool(PoolRec &rec);
void run_nested_ops(Ctx &ctx);

}  // namespace fuzz
