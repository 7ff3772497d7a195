// fuzz_calls: a multi-threaded, seeded, call-sequence fuzzer of the whole
// C ABI (issue 27), against the fault-injection build of the library.
//
// Driver threads (--threads) each draw operations from a stream of their
// own, seeded from (--seed, thread index): create pools of several sizes
// and configurations in shared slots, destroy or release them in every
// way blitz.h allows, and call everything else on them; the tasks they
// spawn draw nested operations from streams seeded by their spawner's.
// A seed therefore replays every thread's choices (which operation, with
// what parameters, in what order), though not the interleaving, and so
// not the outcomes that depend on it (a refusal during a destroy, a
// timeout, a cancellation seen or not).
//
// A ledger records every task: whether its spawn was accepted, how often
// its fn ran, its on_done's calls and status, what its join returned.
// It checks, as the calls return and once each pool is destroyed: an
// accepted task ran exactly once or was cancelled (its group's skip, or a
// blz_task_cancel its spawner sent while polling it); a
// refused one never ran; on_done ran once, with the status the task
// earned; a join returned that status, after the task's end; a group wait
// reported what its batch did; blz_stats agrees (tasks_failed within the
// failures caused, exactly at a private pool's quiescence; counters that
// never go back; gauges within the pool's size; jobs_injected at least the
// outside submissions). Pause points of the fault build widen the windows
// of the lifetime rules (a spawn between queueing and posting while its
// pool is destroyed, a latch setter before its wake-up, a finishing task
// holding its waiter's latch) and check them.
//
// A watchdog reports the seed, every driver's operation and the pools'
// state when an operation or the whole run stops making progress.
//
// usage: fuzz_calls [--seed N] [--seconds S | --iterations N] [--threads T]
//                   [--mutant NAME | --catch NAME | --mutant-table | --replay-check] [--skip-known LIST]
//                   [--watchdog S] [--pause-on-hang S]
// fuzz_ops.hpp lists the parts; docs/verification.md, "The call-sequence
// fuzzer", has the checks and how to replay a seed.
#include <blitz.h>

#include <dirent.h>
#include <pthread.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cinttypes>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "child_process.hpp"
#include "fault.hpp"
#include "fuzz_ops.hpp"

namespace fuzz {

const char *name_of(int32_t s) {
    switch (s) {
        case BLZ_OK: return "BLZ_OK";
        case BLZ_EINVAL: return "BLZ_EINVAL";
        case BLZ_ENOMEM: return "BLZ_ENOMEM";
        case BLZ_ETHREAD: return "BLZ_ETHREAD";
        case BLZ_ESHUTDOWN: return "BLZ_ESHUTDOWN";
        case BLZ_EDEADLK: return "BLZ_EDEADLK";
        case BLZ_ETASK: return "BLZ_ETASK";
        case BLZ_EFORK: return "BLZ_EFORK";
        case BLZ_ETIMEDOUT: return "BLZ_ETIMEDOUT";
        case BLZ_ECANCELED: return "BLZ_ECANCELED";
        case kPending: return "(pending)";
    }
    return "(unknown)";
}

// ---------------------------------------------------------------------------
// The pools by address, for the pause-point hook (which gets a Registry*,
// the same pointer as the blz_pool*): from their creation's return until
// the library frees them.

namespace {
std::mutex g_watch_mu;  // guards g_watches
std::unordered_map<const void *, std::shared_ptr<RegWatch>> g_watches;
}  // namespace

void watch_pool(PoolRec &rec) {
    std::lock_guard<std::mutex> lock(g_watch_mu);
    g_watches[rec.handle()] = rec.watch;
}

namespace {

using blz::fault::Mutant;
using blz::fault::Point;

std::atomic<bool> g_stop{false};

std::shared_ptr<RegWatch> watch_of(const void *registry) {
    std::lock_guard<std::mutex> lock(g_watch_mu);
    auto it = g_watches.find(registry);
    return it == g_watches.end() ? nullptr : it->second;
}

// ---------------------------------------------------------------------------
// The pause-point hook.

void on_entered(const void *registry) {
    CallMark *mark = t_call;
    if (mark != nullptr && mark->pending && mark->registry == registry) decide(*mark);
}

// An outside call whose pool's destroy was decided, between queueing its
// job and posting it: destroy must wait for the call (it holds a unit of
// admission until its post). Held here a while: if destroy returns
// meanwhile, it did not wait.
void on_injected_before_post(const void *registry) {
    CallMark *mark = t_call;
    if (mark == nullptr || mark->registry != registry || !mark->watch->closing.load()) return;
    bump(g_totals.held_posts);
    const uint64_t until = now_ns() + kHoldNs;
    while (now_ns() < until) {
        FUZZ_CHECK(!mark->watch->destroy_returned.load(),
                   "blz_pool_destroy returned while an admitted call from outside was still inside the pool "
                   "(its job queued, the post not yet made)");
        sleep_us(100);
    }
}

// A latch setter that is not a worker of the waiter's pool, after its
// swap and before its wake-up call: it must have pinned the waiter's pool
// (admission.hpp [A4]), so that pool's memory cannot be freed until it is
// done. Held a while when that pool is being destroyed.
void on_latch_set_before_wake(const void *registry) {
    // Compares pointers only: safe whatever the state of that pool.
    if (blz_worker_index(static_cast<const blz_pool *>(registry)) >= 0) return;
    std::shared_ptr<RegWatch> watch = watch_of(registry);  // none: not watched yet (in its creation), or freed
    // Always while that pool's destroy is decided; now and then before, for
    // a destroy that begins during the hold.
    if (watch == nullptr || !(watch->closing.load() || one_in(8))) return;
    const char *what =
        "a latch setter outside the waiter's pool is about to wake a worker of a pool whose memory "
        "was freed (the setter did not pin it)";
    bump(g_totals.held_wakes);
    const uint64_t until = now_ns() + kHoldNs;
    while (now_ns() < until) {
        FUZZ_CHECK(!watch->freed.load(), "%s", what);
        sleep_us(100);
    }
}

// The pool's address may be reused from here on: its entry goes, and
// whoever still holds its watch sees it freed.
void on_registry_freed(const void *registry) {
    std::lock_guard<std::mutex> lock(g_watch_mu);
    auto it = g_watches.find(registry);
    if (it == g_watches.end()) return;
    it->second->freed.store(true);
    g_watches.erase(it);
}

// The finishing task took a waiter's latch: only the wait that returns the
// task's status may be the one whose latch it took (checked when the pool's
// record goes, all waits done). Sometimes held, so that the waiter's
// deadline passes meanwhile.
void on_task_took_latch(const void *registry) {
    TaskEntry *e = t_finishing;
    t_finishing = nullptr;
    if (e == nullptr || e->rec->handle() != registry) return;
    // acquire: the waiter stored its number before installing the latch we took.
    e->took_latch_seq.store(e->wait_seq.load());
    if (one_in(4)) sleep_us(300);
}

void hook(Point point, const void *registry) {
    switch (point) {
        case Point::kEntered: on_entered(registry); return;
        case Point::kInjectedBeforePost: on_injected_before_post(registry); return;
        case Point::kLatchSetBeforeWake: on_latch_set_before_wake(registry); return;
        case Point::kRegistryFreed: on_registry_freed(registry); return;
        case Point::kTaskTookLatch: on_task_took_latch(registry); return;
        case Point::kGroupTookWaiters:
            if (one_in(4)) sleep_us(300);  // a group waiter's deadline may pass while its latch is held
            return;
        case Point::kTraceWriteHoldsBuffer:
            // A writer holding its buffer while a stop is under way: the stop
            // must wait for it (a buffer freed under it is caught by a
            // sanitizer, or by the crash that follows). relaxed: a hint.
            if (g_trace_stops.load(std::memory_order_relaxed) > 0 && one_in(2)) sleep_us(uint32_t(kHoldNs / 4000));
            return;
        case Point::kWaiterInstalled:
        case Point::kTimedWaitExpired:
        case Point::kLatchSetBeforeUnpin:
        case Point::kDestroyWaitsForWork:
        case Point::kSpareRetiring:  // a spare deciding whether to retire, while sections begin and end
        case Point::kSpareExiting:   // a retired spare freeing its slot, while sections begin
            if (one_in(64)) sleep_us(50);
            return;
        case Point::kEventSetBeforeNotify:  // the fuzzer makes no events (tests/api_event.cpp does)
        case Point::kEventFreed:
        case Point::kEventTookWaiters:
        case Point::kSharedLastGiveUp:  // nor uses the process pool (tests/api_shared_pool.cpp does)
        case Point::kEdgeRegistered:  // the fuzzer names no predecessors (tests/api_after.cpp does)
        case Point::kReleasingSuccessors:
            return;
        case Point::kTaskFinishedBeforeLateDone:
            // A finished task whose on_done has yet to run: its joiner may
            // free it meanwhile, and on_done must not need it.
            if (one_in(16)) sleep_us(100);
            return;
        case Point::kThiefTookJob:
            // A stolen job not run yet: a promoted fork's owner must wait for
            // it, whatever it does meanwhile (its frame is on that owner's stack).
            if (one_in(16)) sleep_us(100);
            return;
    }
}

// ---------------------------------------------------------------------------
// Nested operations: what tasks, blz_call functions and (through them)
// every level of nesting do.

// Calls f(target): the caller's own pool, or a shared pool above its
// level. Draws the same numbers whichever it finds.
template <class F>
void with_target(Ctx &ctx, F &&f) {
    const bool cross = ctx.own == nullptr || ctx.rng.percent(25);
    const uint32_t pick = ctx.rng.below(kSlots);
    if (!cross || ctx.released) {
        if (!ctx.released) f(Target{ctx.own, nullptr, true, ctx.own->level});
        return;
    }
    for (uint32_t k = 0; k < kSlots; ++k) {
        Slot &slot = g_slots[(pick + k) % kSlots];
        if (slot.index + 1 <= ctx.level) continue;
        SlotAccess access(slot);
        if (!access.ok()) continue;
        f(Target{access.rec().get(), &slot, false, slot.index + 1});
        return;
    }
    if (ctx.own != nullptr) f(Target{ctx.own, nullptr, true, ctx.own->level});
}

void one_nested_op(Ctx &ctx) {
    const uint32_t kind = ctx.rng.below(100);
    const bool rare = ctx.rng.percent(10);
    if (kind < 20) {
        if (ctx.session != nullptr && kind < 5) {
            spawn_into_session(ctx, *ctx.session, false);
        } else {
            with_target(ctx, [&](const Target &t) { spawn_task(ctx, t); });
        }
    } else if (kind < 32) {
        with_target(ctx, [&](const Target &t) { op_fork_join(ctx, t); });
    } else if (kind < 42) {
        with_target(ctx, [&](const Target &t) { op_parallel_for(ctx, t); });
    } else if (kind < 50) {
        with_target(ctx, [&](const Target &t) { op_call(ctx, t); });
    } else if (kind < 53) {
        with_target(ctx, [&](const Target &t) { op_broadcast(ctx, t); });
    } else if (kind < 60) {
        with_target(ctx, [&](const Target &t) { op_session(ctx, t); });
    } else if (kind < 64) {
        with_target(ctx, [&](const Target &t) { op_stats(ctx, t); });
    } else if (kind < 66) {
        with_target(ctx, [&](const Target &t) { op_cap(ctx, t); });
    } else if (kind < 68) {
        with_target(ctx, [&](const Target &t) { op_trace(ctx, t); });
    } else if (kind < 73) {
        if (!ctx.released) {
            probe_deadlocks(ctx);
            probe_identity(ctx);
        }
    } else if (kind < 78) {
        op_bag_join(ctx);
    } else if (kind < 80) {
        sleep_us(50 + ctx.rng.below(500));  // blocks outside the runtime, briefly
    } else if (kind == 80 && rare && ctx.depth >= 2) {
        op_private_pool(ctx);
    } else if (kind == 81 && rare) {
        destroy_slot(ctx, g_slots[ctx.rng.below(kSlots)]);
    } else if (kind == 82 && rare) {
        release_own_pool(ctx);
    }
}

}  // namespace

// The nested operations of a task or a blz_call function: a few, each
// drawing from a stream of its own.
void run_nested_ops(Ctx &ctx) {
    if (ctx.depth <= 0) return;
    const uint32_t n = ctx.rng.below(3);
    for (uint32_t i = 0; i < n && !ctx.released; ++i) {
        Ctx op = ctx;
        op.rng = Rng(ctx.rng.next());  // one number per operation, whatever it does
        one_nested_op(op);
        ctx.released = op.released;
    }
}

namespace {

// ---------------------------------------------------------------------------
// Drivers.

enum class DriverOp {
    kCreate,
    kDestroy,
    kSpawn,
    kCall,
    kForkJoin,
    kParallelFor,
    kBroadcast,
    kSession,
    kLongSession,
    kBagJoin,
    kStats,
    kCap,
    kTrace,
    kPrivatePool,
    kHostedPool,
    kThreadExit,
    kBadInput,
};

struct OpWeight {
    DriverOp op;
    const char *name;
    uint32_t weight;
};

const OpWeight kDriverOps[] = {
    {DriverOp::kCreate, "create a pool", 6},
    {DriverOp::kDestroy, "destroy a pool", 2},
    {DriverOp::kSpawn, "spawn", 16},
    {DriverOp::kCall, "blz_call", 6},
    {DriverOp::kForkJoin, "blz_fork_join", 6},
    {DriverOp::kParallelFor, "blz_parallel_for", 6},
    {DriverOp::kBroadcast, "blz_broadcast", 3},
    {DriverOp::kSession, "a group session", 6},
    {DriverOp::kLongSession, "a step of a long group session", 6},
    {DriverOp::kBagJoin, "join a handle from the bag", 6},
    {DriverOp::kStats, "statistics", 4},
    {DriverOp::kCap, "blz_pool_set_max_active", 3},
    {DriverOp::kTrace, "trace start or stop", 2},
    {DriverOp::kPrivatePool, "a private pool", 2},
    {DriverOp::kHostedPool, "a pool whose threads are another pool's tasks", 1},
    {DriverOp::kThreadExit, "spawns at thread exit", 1},
    {DriverOp::kBadInput, "bad input", 2},
};

const OpWeight &pick_op(Rng &r) {
    uint32_t total = 0;
    for (const OpWeight &w : kDriverOps) total += w.weight;
    uint32_t x = r.below(total);
    for (const OpWeight &w : kDriverOps) {
        if (x < w.weight) return w;
        x -= w.weight;
    }
    return kDriverOps[0];
}

void op_create(Ctx &ctx) {
    const uint32_t pick = ctx.rng.below(kSlots);
    Rng r(ctx.rng.next());
    for (uint32_t k = 0; k < kSlots; ++k) {
        Slot &slot = g_slots[(pick + k) % kSlots];
        int empty = kEmpty;
        if (!slot.state.compare_exchange_strong(empty, kCreating)) continue;
        std::shared_ptr<PoolRec> rec = make_rec(slot.index, slot.index + 1);
        if (create_pool(r, *rec, false) == BLZ_OK) {
            slot.set(rec);
            slot.state.store(kOccupied, std::memory_order_seq_cst);
        } else {
            slot.state.store(kEmpty, std::memory_order_seq_cst);
        }
        return;
    }
}

void op_destroy(Ctx &ctx) {
    const uint32_t pick = ctx.rng.below(kSlots);
    for (uint32_t k = 0; k < kSlots; ++k) {
        Slot &slot = g_slots[(pick + k) % kSlots];
        if (SlotAccess(slot).ok()) {
            destroy_slot(ctx, slot);
            return;
        }
    }
}

// One step of a group session kept across operations: it may outlive its
// pool (blitz.h: its spawns are then refused).
void op_long_session(Ctx &ctx, std::unique_ptr<GroupSession> &session) {
    const uint32_t step = ctx.rng.below(10);
    if (session == nullptr) {
        auto s = std::make_unique<GroupSession>();
        with_target(ctx, [&](const Target &t) {
            if (create_group(ctx, t, *s)) session = std::move(s);
        });
        return;
    }
    if (step < 5) {
        const uint32_t n = 1 + ctx.rng.below(3);
        for (uint32_t i = 0; i < n; ++i) spawn_into_session(ctx, *session, true);
    } else if (step < 6) {
        cancel_group(*session);
    } else if (step < 8) {
        wait_group(ctx, *session);
    } else {
        destroy_group(ctx, *session);
        session.reset();
    }
}

void run_driver_op(Ctx &ctx, DriverOp op, std::unique_ptr<GroupSession> &session) {
    switch (op) {
        case DriverOp::kCreate: op_create(ctx); return;
        case DriverOp::kDestroy: op_destroy(ctx); return;
        case DriverOp::kSpawn: with_target(ctx, [&](const Target &t) { spawn_task(ctx, t); }); return;
        case DriverOp::kCall: with_target(ctx, [&](const Target &t) { op_call(ctx, t); }); return;
        case DriverOp::kForkJoin: with_target(ctx, [&](const Target &t) { op_fork_join(ctx, t); }); return;
        case DriverOp::kParallelFor: with_target(ctx, [&](const Target &t) { op_parallel_for(ctx, t); }); return;
        case DriverOp::kBroadcast: with_target(ctx, [&](const Target &t) { op_broadcast(ctx, t); }); return;
        case DriverOp::kSession: with_target(ctx, [&](const Target &t) { op_session(ctx, t); }); return;
        case DriverOp::kLongSession: op_long_session(ctx, session); return;
        case DriverOp::kBagJoin: op_bag_join(ctx); return;
        case DriverOp::kStats: with_target(ctx, [&](const Target &t) { op_stats(ctx, t); }); return;
        case DriverOp::kCap: with_target(ctx, [&](const Target &t) { op_cap(ctx, t); }); return;
        case DriverOp::kTrace: with_target(ctx, [&](const Target &t) { op_trace(ctx, t); }); return;
        case DriverOp::kPrivatePool: op_private_pool(ctx); return;
        case DriverOp::kHostedPool: op_hosted_pool(ctx); return;
        case DriverOp::kThreadExit: with_target(ctx, [&](const Target &t) { op_thread_exit(ctx, t); }); return;
        case DriverOp::kBadInput: with_target(ctx, [&](const Target &t) { op_bad_input(ctx, t); }); return;
    }
}

std::vector<std::unique_ptr<Activity>> g_activity;  // the drivers', then the main thread's
uint64_t g_deadline_ns = 0;

bool driver_done(uint64_t op_index) {
    if (options().iterations != 0) return op_index >= options().iterations;
    return g_stop.load(std::memory_order_relaxed) || now_ns() >= g_deadline_ns;  // relaxed: a request, read again each operation
}

// Each driver's choices (operation and its seed, in order), folded: a
// replay with the same seed and --iterations shows the same digest.
std::vector<uint64_t> g_digests;

void driver_main(uint32_t index) {
    Rng stream = driver_stream(options().seed, index);
    Activity &activity = *g_activity[index];
    std::unique_ptr<GroupSession> session;
    uint64_t &digest = g_digests[index];
    for (uint64_t op_index = 0; !driver_done(op_index); ++op_index) {
        const OpWeight &op = pick_op(stream);
        const uint64_t op_seed = stream.next();
        digest = Rng::mix(digest ^ Rng::mix(op_seed + uint64_t(op.op)));
        Ctx ctx(op_seed);
        ctx.depth = 3;
        activity.begin(op.name, op_index, -1);
        run_driver_op(ctx, op.op, session);
        activity.end();
        bump(g_totals.ops);
        progress();
    }
    if (session != nullptr) {
        Ctx ctx(stream.next());
        activity.begin("close the long group session", 0, -1);
        destroy_group(ctx, *session);
        activity.end();
    }
}

// ---------------------------------------------------------------------------
// Reports, the watchdog, teardown.

const char *slot_state_name(Slot &slot) {
    switch (slot.state.load()) {
        case kEmpty: return "empty";
        case kCreating: return "creating";
    }
    std::shared_ptr<PoolRec> rec = slot.get();
    if (rec == nullptr) return "emptying";
    switch (rec->phase.load()) {
        case kPhaseOpen: return "open";
        case kPhaseClosing: return "closing";
    }
    return "destroyed";
}

void describe_threads() {
    const uint64_t now = now_ns();
    for (size_t i = 0; i < g_activity.size(); ++i) {
        const Activity &a = *g_activity[i];
        const bool busy = a.busy.load();
        const uint64_t since = std::min(a.since_ns.load(), now);
        std::fprintf(stderr, "fuzz_calls:   %s %zu: %s%s (operation %" PRIu64 ") for %.1f s\n",
                     i + 1 == g_activity.size() ? "main" : "driver", i, busy ? "in " : "idle after ", a.what.load(),
                     a.op_index.load(), busy ? double(now - since) / 1e9 : 0.0);
    }
    for (Slot &slot : g_slots) std::fprintf(stderr, "fuzz_calls:   slot %d: %s\n", slot.index, slot_state_name(slot));
    std::fprintf(stderr, "fuzz_calls:   releases pending %d, handles in the bag %zu\n", g_pending_releases.load(),
                 g_bag.size());
}

// The pools' counters, for a hang report: only pools that can be entered.
void describe_open_pools() {
    for (Slot &slot : g_slots) {
        SlotAccess access(slot);
        if (!access.ok()) continue;
        PoolRec *rec = access.rec().get();
        PoolCall call(true, rec);
        if (!call.ok()) continue;
        blz_stats st;
        st.struct_size = sizeof(st);
        if (blz_pool_stats(rec->handle(), &st) != BLZ_OK) continue;
        std::fprintf(stderr,
                     "fuzz_calls:   pool %" PRIu64 " (slot %d): %u workers, %u sleeping, %u inactive, %" PRIu64
                     " jobs run, %" PRIu64
                     " injected; "
                     "ledger: %" PRIu64 " accepted, %" PRIu64 " unfinished\n",
                     rec->id, slot.index, st.num_threads, st.sleeping_now, st.inactive_now, st.jobs_executed,
                     st.jobs_injected, rec->accepted.load(), rec->unfinished.load());
    }
}

// The trace files of a run that ends early (a violation, a hang).
void remove_tmpdir() {
    if (g_tmpdir.empty()) return;
    if (DIR *dir = opendir(g_tmpdir.c_str())) {
        while (dirent *entry = readdir(dir)) {
            if (entry->d_name[0] != '.') unlink((g_tmpdir + "/" + entry->d_name).c_str());
        }
        closedir(dir);
    }
    rmdir(g_tmpdir.c_str());
}

std::atomic<bool> g_watchdog_stop{false};

// Every thread's stack, printed by gdb when the machine has it (./dev
// installs it): a hang that a seed does not replay (it replays choices,
// not interleavings) is then explained by the run that had it, in CI too.
void print_stacks_with_gdb() {
    std::fflush(stderr);
    const std::string pid = std::to_string(getpid());
    const pid_t child = fork();
    if (child < 0) return;
    if (child == 0) {
        dup2(STDERR_FILENO, STDOUT_FILENO);
        execlp("gdb", "gdb", "-p", pid.c_str(), "-batch", "-nx", "-ex", "thread apply all bt 40", static_cast<char *>(nullptr));
        _exit(127);  // no gdb: nothing to add
    }
    // At most a minute: a gdb that cannot attach must not turn the report into a hang.
    for (int waited_ms = 0; waited_ms < 60000; waited_ms += 100) {
        if (waitpid(child, nullptr, WNOHANG) == child) return;
        sleep_us(100000);
    }
    kill(child, SIGKILL);
    waitpid(child, nullptr, 0);
}

[[noreturn]] void report_hang(const char *what, double seconds) {
    std::fprintf(stderr, "fuzz_calls: HANG: %s for %.0f s\nfuzz_calls: seed %" PRIu64 "; replay: %s\n", what, seconds,
                 options().seed, replay_command().c_str());
    describe_threads();
    describe_open_pools();
    print_stacks_with_gdb();
    if (options().pause_on_hang != 0) {
        std::fprintf(stderr, "fuzz_calls: pid %d waits %u s for a debugger\n", int(getpid()), options().pause_on_hang);
        std::fflush(stderr);
        sleep_us(options().pause_on_hang * 1000000u);
    }
    std::fflush(stderr);
    remove_tmpdir();
    std::abort();
}

void watchdog_main() {
    const uint32_t limit_s = options().watchdog_seconds != 0 ? options().watchdog_seconds : kSlowBuild ? 240 : 60;
    const uint64_t limit = uint64_t(limit_s) * 1000000000u;
    uint64_t last_progress = g_progress.load();
    uint64_t last_change = now_ns();
    while (!g_watchdog_stop.load()) {
        sleep_us(200000);
        const uint64_t now = now_ns();
        const uint64_t p = g_progress.load();
        if (p != last_progress) {
            last_progress = p;
            last_change = now;
        }
        if (now - last_change > limit) report_hang("no operation or task completed", double(limit_s));
        for (const auto &a : g_activity) {
            const uint64_t since = a->since_ns.load();  // may be after `now`: begun since
            if (a->busy.load() && since < now && now - since > limit)
                report_hang("an operation did not end", double(limit_s));
        }
    }
}

char g_crash_text[1024];

// A crash (an abort from the runtime, a segmentation fault without a
// sanitizer to report it) still names the seed. write(2) only: the heap
// may be what broke.
void on_fatal_signal(int sig) {
    (void)!write(STDERR_FILENO, g_crash_text, std::strlen(g_crash_text));
    signal(sig, SIG_DFL);
    raise(sig);
}

void install_crash_report() {
    std::snprintf(g_crash_text, sizeof(g_crash_text), "fuzz_calls: crashed; seed %" PRIu64 "; replay: %s\n",
                  options().seed, replay_command().c_str());
    signal(SIGABRT, on_fatal_signal);
    if (!blz_test::kAddressSanitizer && !blz_test::kThreadSanitizer) {
        signal(SIGSEGV, on_fatal_signal);
        signal(SIGBUS, on_fatal_signal);
    }
}

void drain_bag() {
    Rng rng(0);
    BagItem item;
    while (g_bag.take(-1, rng, item)) {
        join_handle(item.entry);
        item = BagItem{};
    }
}

// Every pool goes; every handle is joined; every record is checked.
void teardown() {
    Activity &activity = *g_activity.back();
    activity.begin("teardown", 0, -1);
    drain_bag();
    for (Slot &slot : g_slots) {
        while (slot.state.load() != kEmpty) {
            std::shared_ptr<PoolRec> rec = slot.get();
            if (rec != nullptr && claim(*rec)) {
                destroy_claimed(slot, rec, DestroyPlan{});
                break;
            }
            sleep_us(1000);  // a release or a task's destroy is under way
        }
    }
    wait_until([] { return g_pending_releases.load() == 0; });
    drain_bag();
    activity.end();
    FUZZ_CHECK(g_live_recs.load() == 0, "%" PRId64 " pool records still alive after the teardown", g_live_recs.load());
}

// ---------------------------------------------------------------------------
// The command line.

struct MutantName {
    const char *name;
    Mutant mutant;
};

const MutantName kMutants[] = {
    {"none", Mutant::kNone},
    {"spawn-counts-only-task", Mutant::kSpawnCountsOnlyTask},
    {"no-pin-on-latch-set", Mutant::kNoPinOnLatchSet},
    {"cache-keeps-freed-lists", Mutant::kCacheKeepsFreedLists},
    {"cache-tls-destructor", Mutant::kCacheTlsDestructor},
    {"forced-unwind-escapes", Mutant::kForcedUnwindEscapes},
    {"fixed-cpu-mask", Mutant::kFixedCpuMask},
    {"create-failure-deletes", Mutant::kCreateFailureDeletes},
    {"timed-wait-forgets-latch", Mutant::kTimedWaitForgetsLatch},
    {"trace-detach-skips-writers", Mutant::kTraceDetachSkipsWriters},
};

[[noreturn]] void usage(const char *why) {
    std::fprintf(
        stderr,
        "fuzz_calls: %s\nusage: fuzz_calls [--seed N] [--seconds S | --iterations N] [--threads T]\n"
        "                  [--mutant NAME | --catch NAME | --mutant-table | --replay-check] [--skip-known LIST]\n"
        "                  [--watchdog S] [--pause-on-hang S]\n"
        "  --catch NAME: run with the mutant in a child process; exit 0 if it is caught\n"
        "  --mutant-table: every mutant in turn, a row each\n"
        "  --replay-check: two runs of the seed (--iterations, 200 by default) make the same choices\n"
        "  --skip-known 3,4,5,8,10: leave out the operations and checks of issue 27's known items\n"
        "  mutants:",
        why);
    for (const MutantName &m : kMutants) std::fprintf(stderr, " %s", m.name);
    std::fprintf(stderr, "\n");
    std::exit(2);
}

uint64_t parse_number(const char *text, const char *flag) {
    char *end = nullptr;
    errno = 0;
    const unsigned long long value = std::strtoull(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0') usage((std::string("bad number for ") + flag).c_str());
    return value;
}

uint64_t random_seed() {
    uint64_t seed = 0;
    if (FILE *f = std::fopen("/dev/urandom", "rb")) {
        if (std::fread(&seed, sizeof(seed), 1, f) != 1) seed = 0;
        std::fclose(f);
    }
    return seed != 0 ? seed : now_ns();
}

void parse(int argc, char **argv) {
    Options &o = options();
    o.program = argv[0];
    bool seeded = false;
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        auto value = [&]() -> const char * {
            if (i + 1 >= argc) usage((arg + " needs a value").c_str());
            return argv[++i];
        };
        if (arg == "--seed") {
            o.seed = parse_number(value(), "--seed");
            seeded = true;
        } else if (arg == "--seconds") {
            o.seconds = std::strtod(value(), nullptr);
        } else if (arg == "--iterations") {
            o.iterations = parse_number(value(), "--iterations");
        } else if (arg == "--threads") {
            o.threads = uint32_t(parse_number(value(), "--threads"));
        } else if (arg == "--mutant") {
            o.mutant = value();
        } else if (arg == "--watchdog") {
            o.watchdog_seconds = uint32_t(parse_number(value(), "--watchdog"));
        } else if (arg == "--skip-known") {
            std::stringstream list(value());
            for (std::string item; std::getline(list, item, ',');)
                o.skip_known.insert(int(parse_number(item.c_str(), "--skip-known")));
        } else if (arg == "--catch") {
            o.catch_mutant = value();
        } else if (arg == "--mutant-table") {
            o.mutant_table = true;
        } else if (arg == "--replay-check") {
            o.replay_check = true;
        } else if (arg == "--pause-on-hang") {
            o.pause_on_hang = uint32_t(parse_number(value(), "--pause-on-hang"));
        } else {
            usage(("unknown argument " + arg).c_str());
        }
    }
    if (!seeded) o.seed = random_seed();
    if (o.seconds <= 0 && o.iterations == 0) o.seconds = 10;
    if (o.threads == 0 || o.threads > 64) usage("--threads must be 1..64");
}

Mutant mutant_named(const std::string &name) {
    for (const MutantName &m : kMutants) {
        if (name == m.name) return m.mutant;
    }
    usage(("unknown mutant " + name).c_str());
}

using Figures = std::initializer_list<std::pair<uint64_t, const char *>>;

void print_figures(const char *label, Figures figures) {
    std::printf("fuzz_calls: %s:", label);
    const char *separator = " ";
    for (const auto &[n, what] : figures) {
        std::printf("%s%" PRIu64 " %s", separator, n, what);
        separator = ", ";
    }
    std::printf("\n");
}

void print_summary(double seconds) {
    const Totals &t = g_totals;
    std::printf("fuzz_calls: %.1f s, %" PRIu64 " operations\n", seconds, t.ops.load());
    print_figures("pools", {{t.pools.load() + t.private_pools.load(), "created"},
                            {t.private_pools.load(), "private"},
                            {t.hosted.load(), "hosted in another pool's tasks"},
                            {t.create_refusals.load(), "creations refused"}});
    print_figures("destroys", {{t.destroys.load(), "in all"},
                               {t.gate_destroys.load(), "through a gate"},
                               {t.racer_refusals.load(), "raced until refused"},
                               {t.releases.load(), "released"},
                               {t.task_destroys.load(), "by a task"},
                               {t.cancel_pending_destroys.load(), "with a cancellation pending"}});
    print_figures("tasks", {{t.tasks.load(), "spawned"},
                            {t.accepted.load(), "accepted"},
                            {t.refused.load(), "refused"},
                            {t.failures.load(), "failures caused"},
                            {t.joins.load(), "handles joined"},
                            {t.timeouts.load(), "bounded waits timed out"},
                            {t.task_cancels.load(), "blz_task_cancel calls"},
                            {t.task_cancel_skips.load(), "tasks they skipped"},
                            {t.thread_exits.load(), "threads that spawned at exit"}});
    print_figures("calls", {{t.sessions.load(), "group sessions"},
                            {t.group_waits.load(), "group waits"},
                            {t.broadcasts.load(), "broadcasts"},
                            {t.caps.load(), "caps set"},
                            {t.blocks.load(), "blocking sections"},
                            {t.edeadlk.load(), "BLZ_EDEADLK probes"}});
    print_figures("checks", {{t.stats.load(), "statistics snapshots"},
                             {t.exact_checks.load(), "exact tasks_failed"},
                             {t.traces.load(), "trace files"},
                             {t.held_posts.load(), "posts held during a destroy"},
                             {t.held_wakes.load(), "wake-ups held"}});
}

// ---------------------------------------------------------------------------
// Mutants: this program again in a child process, with a mutant set; the
// mutant is caught when the child does not end cleanly (a violation, a
// hang, a crash or a sanitizer's report).

struct MutantRun {
    bool clean = false;
    double seconds = 0;
    std::string finding;  // how the child ended, and the first line that says why
    std::string output;
};

std::vector<std::string> child_args(const std::string &mutant);

MutantRun run_mutant(const std::string &name) {
    std::vector<std::string> args = child_args(name);
    const uint64_t start = now_ns();
    const blz_test::ChildResult r = blz_test::run_in_child([&args] {
        // ThreadSanitizer's first report ends the child, as AddressSanitizer's does.
        const char *tsan = std::getenv("TSAN_OPTIONS");
        setenv("TSAN_OPTIONS", (std::string(tsan != nullptr ? tsan : "") + ":halt_on_error=1").c_str(), 1);
        std::vector<char *> argv;
        for (std::string &a : args) argv.push_back(a.data());
        argv.push_back(nullptr);
        execv("/proc/self/exe", argv.data());
        return 127;
    });
    MutantRun run;
    run.clean = r.exited_cleanly();
    run.seconds = double(now_ns() - start) / 1e9;
    run.finding = run.clean ? "" : r.how();
    size_t first = std::string::npos;
    for (const char *sign :
         {"VIOLATION: ", "HANG: ", "ERROR: ", "WARNING: ThreadSanitizer", "runtime error: ", "terminate called",
          "libblitz: fatal", "free(): ", "malloc(): ", "double free", "corrupted"}) {
        first = std::min(first, r.output.find(sign));
    }
    if (first != std::string::npos) run.finding += ": " + r.output.substr(first, r.output.find('\n', first) - first);
    run.output = r.output;
    return run;
}

std::vector<std::string> child_args(const std::string &mutant) {
    const Options &o = options();
    std::vector<std::string> args = {
        "fuzz_calls", "--mutant", mutant, "--seed", std::to_string(o.seed), "--threads", std::to_string(o.threads)};
    if (o.iterations != 0) {
        args.insert(args.end(), {"--iterations", std::to_string(o.iterations)});
    } else {
        args.insert(args.end(), {"--seconds", std::to_string(o.seconds)});
    }
    for (int item : o.skip_known) args.insert(args.end(), {"--skip-known", std::to_string(item)});
    if (o.watchdog_seconds != 0) args.insert(args.end(), {"--watchdog", std::to_string(o.watchdog_seconds)});
    return args;
}

// --replay-check: two runs of the same seed and number of operations make
// the same choices (the digest of every driver's operations and seeds).
int replay_check() {
    if (options().iterations == 0) options().iterations = 200;
    std::string digests[2];
    for (std::string &digest : digests) {
        const MutantRun run = run_mutant("none");
        const size_t at = run.output.find("choices digest ");
        if (!run.clean || at == std::string::npos) {
            std::printf("fuzz_calls: a replay run failed: %s\n%s", run.finding.c_str(), run.output.c_str());
            return 1;
        }
        digest = run.output.substr(at, run.output.find('\n', at) - at);
    }
    const bool same = digests[0] == digests[1];
    std::printf("fuzz_calls: seed %" PRIu64 ", %" PRIu64 " operations per driver, twice: %s / %s: %s\n", options().seed,
                options().iterations, digests[0].c_str(), digests[1].c_str(),
                same ? "the same choices" : "DIFFERENT choices");
    return same ? 0 : 1;
}

// --catch NAME: exits 0 when the fuzzer catches the mutant within the budget.
int catch_mutant(const std::string &name) {
    mutant_named(name);  // a known name, or the usage
    const MutantRun run = run_mutant(name);
    std::printf("fuzz_calls: mutant %s %s after %.1f s (seed %" PRIu64 ")%s%s\n", name.c_str(),
                run.clean ? "MISSED" : "caught", run.seconds, options().seed, run.finding.empty() ? "" : ": ",
                run.finding.c_str());
    return run.clean ? 1 : 0;
}

// --mutant-table: every mutant in turn (and the real code first), one row each.
int mutant_table() {
    std::printf("%-28s %-8s %8s  %s\n", "mutant", "result", "time", "finding");
    bool real_clean = true;
    for (const MutantName &m : kMutants) {
        const MutantRun run = run_mutant(m.name);
        const bool real = m.mutant == Mutant::kNone;
        if (real) real_clean = run.clean;
        const char *result = real ? (run.clean ? "pass" : "FAIL") : (run.clean ? "missed" : "caught");
        std::printf("%-28s %-8s %7.1fs  %s\n", m.name, result, run.seconds, run.finding.c_str());
        std::fflush(stdout);
    }
    return real_clean ? 0 : 1;
}

}  // namespace

PoolRec::~PoolRec() {
    for (const auto &e : entries) {
        const int32_t s = e->spawn_status.load();
        FUZZ_CHECK(s != kPending, "the spawn of task %" PRIu64 " of pool %" PRIu64 " never returned", e->id, id);
        if (s != BLZ_OK) {
            check_refused_entry(*e);
            continue;
        }
        check_accepted_entry(*e, "at the end of the pool's record");
        const uint32_t took = e->took_latch_seq.load();
        FUZZ_CHECK(took == 0 || took == e->final_seq.load(),
                   "task %" PRIu64 " of pool %" PRIu64
                   " took the latch of wait #%u on its handle, but wait #%u returned its status "
                   "(a bounded wait returned BLZ_ETIMEDOUT while the task held its latch)",
                   e->id, id, took, e->final_seq.load());
    }
    // A trace still running at the destroy: destroy wrote its file.
    if (phase.load() == kPhaseDestroyed && trace_state.load() == 1) check_trace_file(this, trace_path);
    g_live_recs.fetch_sub(1);
}

}  // namespace fuzz

int main(int argc, char **argv) {
    using namespace fuzz;
    parse(argc, argv);
    const Options &o = options();
    if (!o.catch_mutant.empty()) return catch_mutant(o.catch_mutant);  // before any thread: it forks
    if (o.mutant_table) return mutant_table();
    if (o.replay_check) return replay_check();
    blz::fault::g_mutant.store(mutant_named(o.mutant));
    std::printf("fuzz_calls: seed %" PRIu64 ", %u threads, %s; replay: %s\n", o.seed, o.threads,
                o.iterations != 0 ? (std::to_string(o.iterations) + " operations each").c_str()
                                  : (std::to_string(o.seconds) + " s").c_str(),
                replay_command().c_str());
    std::fflush(stdout);
    unsetenv("BLZ_NUM_THREADS");
    unsetenv("BLZ_CPU_LIST");
    unsetenv("BLZ_TRACE");
    setenv("BLZ_TRACE_BUFFER", "4096", 0);  // small buffers: traces fill and drop events
    char dir[] = "/tmp/blz-fuzz-XXXXXX";
    if (mkdtemp(dir) == nullptr) usage("mkdtemp failed");
    g_tmpdir = dir;
    pthread_key_create(&g_late_key, late_key_destructor);
    g_process_cpus = cpus_of_this_thread();
    for (int i = 0; i < kSlots; ++i) g_slots[i].index = i;
    for (uint32_t i = 0; i <= o.threads; ++i) g_activity.push_back(std::make_unique<Activity>());
    g_digests.assign(o.threads, 0);
    g_describe_threads = describe_threads;
    g_cleanup = remove_tmpdir;
    install_crash_report();
    blz::fault::g_hook.store(&hook);
    const uint64_t start = now_ns();
    g_deadline_ns = start + uint64_t(o.seconds * 1e9);
    std::thread watchdog(watchdog_main);
    std::vector<std::thread> drivers;
    for (uint32_t i = 0; i < o.threads; ++i) drivers.emplace_back(driver_main, i);
    for (std::thread &d : drivers) d.join();
    teardown();
    g_watchdog_stop.store(true);
    watchdog.join();
    blz::fault::g_hook.store(nullptr);
    remove_tmpdir();
    print_summary(double(now_ns() - start) / 1e9);
    uint64_t digest = 0;
    for (uint64_t d : g_digests) digest = Rng::mix(digest ^ d);
    std::printf("fuzz_calls: choices digest %016" PRIx64 "\n", digest);
    std::printf("fuzz_calls: ok (seed %" PRIu64 ")\n", o.seed);
    return 0;
}
