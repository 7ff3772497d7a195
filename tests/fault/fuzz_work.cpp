// The call-sequence fuzzer's calls that are not spawns (fuzz_ops.hpp):
// fork-join, parallel_for, blz_call and broadcast, each checking that every
// piece ran as often as it must and that the status says what failed;
// statistics against the ledger; the cap; tracing; probes of calls whose
// answer is known; joins of handles from the bag.
#include <blitz.h>

#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "fuzz_ops.hpp"

namespace fuzz {

// ---------------------------------------------------------------------------
// Fork-join, parallel_for, blz_call, broadcast: each checks that every
// piece ran as often as it must, and that the status says what failed.

struct Half {
    PoolRec *rec = nullptr;
    uint64_t seed = 0;
    int depth = 0;
    Fail fail = Fail::kNone;
    bool nested = false;  // forks again (on the same pool)
    bool probe = false;   // asks for EDEADLK on its task's handle and group
    TaskEntry *self = nullptr;
    GroupSession *session = nullptr;
    Link link = Link::kNone;
    bool task_cancel = false;
    std::atomic<int> ran{0};
};

void probe_deadlocks(Ctx &ctx);
void op_fork_join(Ctx &ctx, const Target &t);

void half_main(void *arg) {
    auto *h = static_cast<Half *>(arg);
    const int ran = h->ran.fetch_add(1) + 1;
    FUZZ_CHECK(ran == 1, "a fork-join half ran %d times", ran);
    check_on_worker(h->rec, "a fork-join half");
    Ctx ctx(h->seed, h->rec, h->depth, h->self, h->session, h->link);
    ctx.task_cancel = h->task_cancel;
    if (h->probe) probe_deadlocks(ctx);
    if (h->nested) op_fork_join(ctx, Target{h->rec, nullptr, true, h->rec->level});
    if (h->fail != Fail::kNone && h->session != nullptr) h->session->note_failure(h->link);
    fail_now(h->fail);
}

void plan_half(Ctx &ctx, const Target &t, Half &h) {
    h.rec = t.rec;
    h.seed = ctx.rng.next();
    h.depth = ctx.depth - 1;
    h.fail = pick_fail(ctx.rng, 10);
    h.nested = ctx.depth > 1 && ctx.rng.percent(30);
    h.probe = ctx.rng.percent(15);
    h.self = t.own ? ctx.self : nullptr;  // probes of the same task's handle from its own pool's work
    h.session = ctx.session;
    h.link = link_for(ctx, t);
    h.task_cancel = ctx.task_cancel;
}

void op_fork_join(Ctx &ctx, const Target &t) {
    Half a, b;
    plan_half(ctx, t, a);
    plan_half(ctx, t, b);
    const uint64_t throws = (a.fail == Fail::kThrow) + (b.fail == Fail::kThrow);
    const uint64_t blz_fails = (a.fail == Fail::kBlzFail) + (b.fail == Fail::kBlzFail);
    const uint64_t floor = throws + (blz_fails > 0 ? 1 : 0);
    PoolCall call(t.slot != nullptr, t.rec, t.racing);
    if (!call.ok()) return;
    t.rec->tally.fj_ceil.fetch_add(throws + blz_fails);  // before: the upper bound covers failures under way
    const int32_t s = blz_fork_join(t.pool(), half_main, &a, half_main, &b);
    if (s == BLZ_ESHUTDOWN && t.may_refuse()) {
        FUZZ_CHECK(a.ran.load() == 0 && b.ran.load() == 0, "a refused blz_fork_join ran a half");
        return;
    }
    FUZZ_CHECK(a.ran.load() == 1 && b.ran.load() == 1, "blz_fork_join returned %s with halves run %d and %d times",
               name_of(s), a.ran.load(), b.ran.load());
    const int32_t expected = a.fail != Fail::kNone || b.fail != Fail::kNone ? BLZ_ETASK : BLZ_OK;
    FUZZ_CHECK(s == expected, "blz_fork_join on pool %" PRIu64 " returned %s, expected %s", t.rec->id, name_of(s),
               name_of(expected));
    t.rec->tally.fj_floor.fetch_add(floor);
    t.rec->tally.confirmed.fetch_add(floor);
    if (!t.own) t.rec->injected_confirmed.fetch_add(1);
    bump(g_totals.failures, throws + blz_fails);
}

struct Pfor {
    PoolRec *rec = nullptr;
    size_t begin = 0, end = 0, grain = 0;
    size_t poison = SIZE_MAX;  // the index whose piece fails
    Fail fail = Fail::kNone;
    std::unique_ptr<std::atomic<uint8_t>[]> hits;
    std::atomic<bool> poison_ran{false};
    GroupSession *session = nullptr;
    Link link = Link::kNone;
};

void pfor_body(void *arg, size_t lo, size_t hi) {
    auto *p = static_cast<Pfor *>(arg);
    FUZZ_CHECK(p->begin <= lo && lo < hi && hi <= p->end,
               "blz_parallel_for called its body with [%zu, %zu) outside [%zu, %zu)", lo, hi, p->begin, p->end);
    FUZZ_CHECK(p->grain == 0 || hi - lo <= p->grain, "blz_parallel_for piece [%zu, %zu) is larger than its grain %zu",
               lo, hi, p->grain);
    check_on_worker(p->rec, "a parallel_for piece");
    for (size_t i = lo; i < hi; ++i) {
        FUZZ_CHECK(p->hits[i - p->begin].fetch_add(1) == 0, "blz_parallel_for covered index %zu twice", i);
    }
    if (p->poison < lo || p->poison >= hi) return;
    p->poison_ran.store(true);
    p->rec->tally.exact.fetch_add(1);
    if (p->session != nullptr) p->session->note_failure(p->link);
    fail_now(p->fail);
}

void op_parallel_for(Ctx &ctx, const Target &t) {
    Pfor p;
    p.rec = t.rec;
    const size_t n = ctx.rng.percent(5) ? 0 : ctx.rng.below(1200);
    p.begin = ctx.rng.below(50);
    p.end = p.begin + n;
    const uint32_t grain_kind = ctx.rng.below(4);
    p.grain = grain_kind == 0   ? 0
              : grain_kind == 1 ? 1
              : grain_kind == 2 ? 1 + ctx.rng.below(16)
                                : 1 + ctx.rng.below(uint32_t(n) + 1);
    if (n != 0 && ctx.rng.percent(20)) p.poison = p.begin + ctx.rng.below(uint32_t(n));
    p.fail = ctx.rng.percent(50) ? Fail::kBlzFail : Fail::kThrow;
    p.hits.reset(new std::atomic<uint8_t>[n + 1]());
    p.session = ctx.session;
    p.link = link_for(ctx, t);
    PoolCall call(t.slot != nullptr, t.rec, t.racing);
    if (!call.ok()) return;
    const int32_t s = blz_parallel_for(t.pool(), p.begin, p.end, p.grain, pfor_body, &p);
    size_t covered = 0;
    for (size_t i = 0; i < n; ++i) covered += p.hits[i].load();
    if (s == BLZ_ESHUTDOWN && t.may_refuse()) {
        FUZZ_CHECK(covered == 0, "a refused blz_parallel_for ran pieces");
        return;
    }
    // The innermost task's group, or a blz_task_cancel of that task, cancels
    // the loop (blitz.h); only such a task's work can see it.
    const bool may_cancel = ctx.session != nullptr || ctx.task_cancel;
    const bool poisoned = p.poison_ran.load();
    if (poisoned) t.rec->tally.confirmed.fetch_add(1);
    if (!t.own && n != 0) t.rec->injected_confirmed.fetch_add(1);
    switch (s) {
        case BLZ_OK:
            FUZZ_CHECK(!poisoned && covered == n, "blz_parallel_for returned BLZ_OK with %zu of %zu indices covered%s",
                       covered, n, poisoned ? " and a failed piece" : "");
            return;
        case BLZ_ETASK:
            FUZZ_CHECK(poisoned, "blz_parallel_for returned BLZ_ETASK although no piece failed");
            FUZZ_CHECK(may_cancel || covered == n,
                       "blz_parallel_for with a failed piece covered %zu of %zu indices outside any group", covered, n);
            bump(g_totals.failures);
            return;
        case BLZ_ECANCELED:
            FUZZ_CHECK(may_cancel && !poisoned && covered < n,
                       "blz_parallel_for returned BLZ_ECANCELED (%s, %zu of %zu covered, %s)",
                       may_cancel ? "in a group's task" : "outside any group's task", covered, n,
                       poisoned ? "a piece failed" : "no piece failed");
            if (ctx.session != nullptr) ctx.session->saw_cancel.store(true);
            return;
    }
    violation("blz_parallel_for on pool %" PRIu64 " returned %s", t.rec->id, name_of(s));
}

struct CallArgs {
    PoolRec *rec = nullptr;
    uint64_t seed = 0;
    int depth = 0;
    Fail fail = Fail::kNone;
    TaskEntry *self = nullptr;
    GroupSession *session = nullptr;
    bool task_cancel = false;
    std::atomic<int> ran{0};
};

// A short wait outside the pool, marked as a blocking section: the pool
// stands a spare in meanwhile (blz_block_begin). Only in pools whose hooks
// and embedder threads do not keep a ledger per worker index, which a
// spare's index (threads and up) is outside of.
void block_briefly(Ctx &ctx, PoolRec *rec) {
    if (rec->hooks || rec->embedder || !ctx.rng.percent(12)) return;
    FUZZ_CHECK(blz_block_begin() == BLZ_OK, "blz_block_begin failed");
    sleep_us(100 + ctx.rng.below(400));
    FUZZ_CHECK(blz_block_end() == BLZ_OK, "blz_block_end failed");
    bump(g_totals.blocks);
}

void call_main(void *arg) {
    auto *c = static_cast<CallArgs *>(arg);
    const int ran = c->ran.fetch_add(1) + 1;
    FUZZ_CHECK(ran == 1, "a blz_call function ran %d times", ran);
    check_on_worker(c->rec, "a blz_call function");
    Ctx ctx(c->seed, c->rec, c->depth, c->self, c->session, c->session != nullptr ? called_link() : Link::kNone);
    block_briefly(ctx, c->rec);
    ctx.task_cancel = c->task_cancel;
    check_cancel_flag(ctx);
    run_nested_ops(ctx);
    if (c->fail == Fail::kNone) return;
    c->rec->tally.exact.fetch_add(1);
    if (c->session != nullptr) c->session->note_failure(called_link());
    fail_now(c->fail);
}

void op_call(Ctx &ctx, const Target &t) {
    CallArgs c;
    c.rec = t.rec;
    c.seed = ctx.rng.next();
    c.depth = ctx.depth - 1;
    c.fail = pick_fail(ctx.rng, 12);
    c.self = ctx.self;
    c.session = ctx.session;
    c.task_cancel = ctx.task_cancel;
    PoolCall call(t.slot != nullptr, t.rec, t.racing);
    if (!call.ok()) return;
    const int32_t s = blz_call(t.pool(), call_main, &c);
    if (s == BLZ_ESHUTDOWN && t.may_refuse()) {
        FUZZ_CHECK(c.ran.load() == 0, "a refused blz_call ran its function");
        return;
    }
    FUZZ_CHECK(c.ran.load() == 1, "blz_call returned %s and its function ran %d times", name_of(s), c.ran.load());
    const int32_t expected = c.fail != Fail::kNone ? BLZ_ETASK : BLZ_OK;
    FUZZ_CHECK(s == expected, "blz_call on pool %" PRIu64 " returned %s, expected %s", t.rec->id, name_of(s),
               name_of(expected));
    if (c.fail != Fail::kNone) {
        t.rec->tally.confirmed.fetch_add(1);
        bump(g_totals.failures);
    }
    if (!t.own) t.rec->injected_confirmed.fetch_add(1);
}

struct Broadcast {
    PoolRec *rec = nullptr;
    int fail_index = -1;
    Fail fail = Fail::kNone;
    std::unique_ptr<std::atomic<int>[]> calls;
    GroupSession *session = nullptr;
};

void broadcast_main(void *arg, uint32_t index) {
    auto *b = static_cast<Broadcast *>(arg);
    FUZZ_CHECK(index < b->rec->threads, "blz_broadcast called worker index %u of a pool of %u", index, b->rec->threads);
    FUZZ_CHECK(b->calls[index].fetch_add(1) == 0, "blz_broadcast called worker %u twice", index);
    FUZZ_CHECK(blz_worker_index(b->rec->handle()) == int32_t(index),
               "blz_broadcast's call for worker %u ran on worker %d", index, blz_worker_index(b->rec->handle()));
    b->rec->work_seen.store(true);
    if (int(index) != b->fail_index) return;
    b->rec->tally.exact.fetch_add(1);
    if (b->session != nullptr) b->session->note_failure(called_link());
    fail_now(b->fail);
}

void op_broadcast(Ctx &ctx, const Target &t) {
    Broadcast b;
    b.rec = t.rec;
    b.calls.reset(new std::atomic<int>[t.rec->threads]());
    if (ctx.rng.percent(20)) b.fail_index = int(ctx.rng.below(t.rec->threads));
    b.fail = ctx.rng.percent(50) ? Fail::kBlzFail : Fail::kThrow;
    b.session = ctx.session;
    PoolCall call(t.slot != nullptr, t.rec, t.racing);
    if (!call.ok()) return;
    const int32_t s = blz_broadcast(t.pool(), broadcast_main, &b);
    uint32_t total = 0;
    for (uint32_t i = 0; i < t.rec->threads; ++i) total += uint32_t(b.calls[i].load());
    bump(g_totals.broadcasts);
    if (s == BLZ_ESHUTDOWN && t.may_refuse()) {
        FUZZ_CHECK(total == 0, "a refused blz_broadcast called workers");
        return;
    }
    for (uint32_t i = 0; i < t.rec->threads; ++i) {
        FUZZ_CHECK(b.calls[i].load() == 1, "blz_broadcast returned %s having called worker %u %d times", name_of(s), i,
                   b.calls[i].load());
    }
    const int32_t expected = b.fail_index >= 0 ? BLZ_ETASK : BLZ_OK;
    FUZZ_CHECK(s == expected, "blz_broadcast on pool %" PRIu64 " returned %s, expected %s", t.rec->id, name_of(s),
               name_of(expected));
    if (b.fail_index >= 0) {
        t.rec->tally.confirmed.fetch_add(1);
        bump(g_totals.failures);
    }
}

// ---------------------------------------------------------------------------
// Statistics: bounds, agreement with the ledger, and counters that never
// go back between two snapshots of the same pool or worker (taken one
// after the other under the pool's stats mutex).

void check_monotonic(const blz_stats &before, const blz_stats &after, const char *what, PoolRec *rec) {
    const struct {
        const char *name;
        uint64_t a, b;
        bool times;
    } fields[] = {
        {"jobs_executed", before.jobs_executed, after.jobs_executed, false},
        {"jobs_injected", before.jobs_injected, after.jobs_injected, false},
        {"steals", before.steals, after.steals, false},
        {"sleeps", before.sleeps, after.sleeps, false},
        {"wakeups", before.wakeups, after.wakeups, false},
        {"spurious_wakeups", before.spurious_wakeups, after.spurious_wakeups, false},
        {"sleep_aborts", before.sleep_aborts, after.sleep_aborts, false},
        {"tasks_failed", before.tasks_failed, after.tasks_failed, false},
        {"run_ns", before.run_ns, after.run_ns, true},
        {"search_ns", before.search_ns, after.search_ns, true},
        {"sleep_ns", before.sleep_ns, after.sleep_ns, true},
    };
    for (const auto &f : fields) {
        if (f.times && options().skips(8)) continue;
        FUZZ_CHECK(f.b >= f.a,
                   "%s of pool %" PRIu64 ": %s went back from %" PRIu64 " to %" PRIu64 " between two snapshots%s", what,
                   rec->id, f.name, f.a, f.b, f.times ? " (issue 27 item 8)" : "");
    }
}

void check_gauges(const blz_stats &st, uint32_t n, const char *what, PoolRec *rec) {
    if (options().skips(8)) return;
    FUZZ_CHECK(st.sleeping_now <= st.inactive_now && st.inactive_now <= n,
               "%s of pool %" PRIu64 ": sleeping_now %u, inactive_now %u of %u workers (issue 27 item 8)", what,
               rec->id, st.sleeping_now, st.inactive_now, n);
}

void check_pool_snapshot(PoolRec *rec, const blz_stats &st, uint64_t confirmed_before, uint64_t injected_before) {
    FUZZ_CHECK(st.num_threads == rec->threads, "blz_pool_stats of pool %" PRIu64 ": num_threads %u, the pool has %u",
               rec->id, st.num_threads, rec->threads);
    check_gauges(st, rec->threads, "blz_pool_stats", rec);
    const uint64_t ceiling = rec->tally.exact.load() + rec->tally.fj_ceil.load();  // read after: only grows
    FUZZ_CHECK(st.tasks_failed >= confirmed_before && st.tasks_failed <= ceiling,
               "blz_pool_stats of pool %" PRIu64 ": tasks_failed %" PRIu64 ", but %" PRIu64
               " failures were already counted and at most %" PRIu64 " happened",
               rec->id, st.tasks_failed, confirmed_before, ceiling);
    FUZZ_CHECK(st.jobs_injected >= injected_before,
               "blz_pool_stats of pool %" PRIu64 ": jobs_injected %" PRIu64 ", but %" PRIu64
               " outside submissions had been accepted",
               rec->id, st.jobs_injected, injected_before);
    if (rec->have_pool_stats) check_monotonic(rec->last_pool, st, "blz_pool_stats", rec);
    rec->last_pool = st;
    rec->have_pool_stats = true;
}

void check_worker_snapshot(PoolRec *rec, uint32_t w, const blz_stats &st) {
    FUZZ_CHECK(st.num_threads == 1 && st.jobs_injected == 0 && st.tasks_failed == 0,
               "blz_worker_stats of pool %" PRIu64 " worker %u: num_threads %u, jobs_injected %" PRIu64
               ", tasks_failed %" PRIu64,
               rec->id, w, st.num_threads, st.jobs_injected, st.tasks_failed);
    check_gauges(st, 1, "blz_worker_stats", rec);
    if (rec->have_worker[w]) check_monotonic(rec->last_worker[w], st, "blz_worker_stats", rec);
    rec->last_worker[w] = st;
    rec->have_worker[w] = true;
}

// A snapshot into a struct of `size` bytes: the fields beyond it stay as they were.
int32_t snapshot(blz_pool *pool, int worker, blz_stats &st, uint32_t size) {
    std::memset(&st, 0xA5, sizeof(st));
    st.struct_size = size;
    const int32_t s = worker < 0 ? blz_pool_stats(pool, &st) : blz_worker_stats(pool, uint32_t(worker), &st);
    if (s == BLZ_OK && size < sizeof(blz_stats)) {
        const auto *bytes = reinterpret_cast<const unsigned char *>(&st);
        for (size_t i = size; i < sizeof(st); ++i) {
            FUZZ_CHECK(bytes[i] == 0xA5, "a snapshot into a %u-byte blz_stats wrote byte %zu", size, i);
        }
    }
    return s;
}

void op_stats(Ctx &ctx, const Target &t) {
    PoolRec *rec = t.rec;
    const uint32_t w = ctx.rng.below(rec->threads);
    const bool short_struct = ctx.rng.percent(10);
    const uint32_t size = short_struct ? uint32_t(offsetof(blz_stats, run_ns)) : uint32_t(sizeof(blz_stats));
    std::lock_guard<std::mutex> lock(rec->stats_mu);  // snapshots one after the other
    const uint64_t confirmed_before = rec->tally.confirmed.load();
    const uint64_t injected_before = rec->injected_confirmed.load();
    blz_stats st;
    int32_t s = kPending;
    if (!call_once(t, [&] { s = snapshot(t.pool(), -1, st, size); })) return;
    if (s == BLZ_ESHUTDOWN && t.may_refuse()) return;
    FUZZ_CHECK(s == BLZ_OK, "blz_pool_stats of pool %" PRIu64 " returned %s", rec->id, name_of(s));
    if (!short_struct) check_pool_snapshot(rec, st, confirmed_before, injected_before);
    if (!call_once(t, [&] { s = snapshot(t.pool(), int(w), st, sizeof(blz_stats)); })) return;
    if (s == BLZ_ESHUTDOWN && t.may_refuse()) return;
    FUZZ_CHECK(s == BLZ_OK, "blz_worker_stats of pool %" PRIu64 " returned %s", rec->id, name_of(s));
    check_worker_snapshot(rec, w, st);
    if (!call_once(t, [&] { s = blz_worker_stats(t.pool(), rec->threads, &st); })) return;
    FUZZ_CHECK(s == BLZ_EINVAL || (s == BLZ_ESHUTDOWN && t.may_refuse()),
               "blz_worker_stats of worker %u of a pool of %u returned %s", rec->threads, rec->threads, name_of(s));
    bump(g_totals.stats);
}

// blz_pool_set_max_active: from outside refused once the destroy was
// decided; from the pool's own workers accepted, and without effect once
// the destroy began (blitz.h: destroy lifts the cap for good).
void op_cap(Ctx &ctx, const Target &t) {
    const uint32_t n = ctx.rng.below(t.rec->threads + 2);
    PoolCall call(t.slot != nullptr, t.rec, t.racing);
    if (!call.ok()) return;
    const int32_t s = blz_pool_set_max_active(t.pool(), n);
    FUZZ_CHECK(s == BLZ_OK || (s == BLZ_ESHUTDOWN && t.may_refuse()),
               "blz_pool_set_max_active(%u) on pool %" PRIu64 " returned %s", n, t.rec->id, name_of(s));
    bump(g_totals.caps);
}

// ---------------------------------------------------------------------------
// Tracing: one start or stop at a time per pool (trace_state's owner).

bool ends_with(const std::string &s, const std::string &tail) {
    return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

void check_trace_file(PoolRec *rec, const std::string &path) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    const std::string s = text.str();
    const std::string workers = "\"workers\":" + std::to_string(rec->threads) + ",";
    FUZZ_CHECK(
        s.rfind("{\"displayTimeUnit\":\"ns\"", 0) == 0 && s.find(workers) != std::string::npos && ends_with(s, "]}\n"),
        "the trace file %s of pool %" PRIu64 " is not a whole trace of %u workers (%zu bytes)", path.c_str(), rec->id,
        rec->threads, s.size());
    unlink(path.c_str());
    bump(g_totals.traces);
}

void op_trace(Ctx &ctx, const Target &t) {
    (void)ctx;
    PoolRec *rec = t.rec;
    int state = rec->trace_state.load();
    if (state == 2 || !rec->trace_state.compare_exchange_strong(state, 2)) return;
    PoolCall call(t.slot != nullptr, rec, t.racing);
    if (!call.ok()) {
        rec->trace_state.store(state);
        return;
    }
    if (state == 0) {
        rec->trace_path =
            g_tmpdir + "/trace-" + std::to_string(rec->id) + "-" + std::to_string(rec->traces++) + ".json";
        const int32_t s = blz_pool_trace_start(t.pool(), rec->trace_path.c_str());
        FUZZ_CHECK(s == BLZ_OK || (s == BLZ_ESHUTDOWN && t.may_refuse()),
                   "blz_pool_trace_start on pool %" PRIu64 " returned %s", rec->id, name_of(s));
        if (s != BLZ_OK) unlink(rec->trace_path.c_str());
        rec->trace_state.store(s == BLZ_OK ? 1 : 0);
        return;
    }
    g_trace_stops.fetch_add(1);
    const int32_t s = blz_pool_trace_stop(t.pool());
    g_trace_stops.fetch_sub(1);
    FUZZ_CHECK(s == BLZ_OK || (s == BLZ_ESHUTDOWN && t.may_refuse()),
               "blz_pool_trace_stop on pool %" PRIu64 " returned %s", rec->id, name_of(s));
    if (s == BLZ_OK) check_trace_file(rec, rec->trace_path);
    rec->trace_state.store(s == BLZ_OK ? 0 : 1);  // refused: destroy writes the file
}

// ---------------------------------------------------------------------------
// Probes: calls whose answer is known without a ledger.

// From work for a task: waiting for itself or its own group is refused.
void probe_deadlocks(Ctx &ctx) {
    if (ctx.self != nullptr) {
        FUZZ_CHECK(blz_join(ctx.self->handle) == BLZ_EDEADLK,
                   "blz_join of a task from work it waits for did not return BLZ_EDEADLK");
        bump(g_totals.edeadlk);
    }
    if (ctx.session != nullptr) {
        FUZZ_CHECK(blz_group_wait(ctx.session->group) == BLZ_EDEADLK,
                   "blz_group_wait from work of one of the group's tasks did not return BLZ_EDEADLK");
        FUZZ_CHECK(blz_group_wait_for(ctx.session->group, 0) == BLZ_EDEADLK,
                   "blz_group_wait_for from work of one of the group's tasks did not return BLZ_EDEADLK");
        bump(g_totals.edeadlk, 2);
    }
    if (ctx.own != nullptr) {
        FUZZ_CHECK(blz_pool_destroy(ctx.own->handle()) == BLZ_EDEADLK,
                   "blz_pool_destroy from one of the pool's workers did not return BLZ_EDEADLK");
        bump(g_totals.edeadlk);
    }
}

void probe_identity(Ctx &ctx) {
    if (ctx.own == nullptr) return;
    check_on_worker(ctx.own, "a probe");
    FUZZ_CHECK(blz_pool_num_threads(ctx.own->handle()) == ctx.own->threads,
               "blz_pool_num_threads of pool %" PRIu64 " is %u, not %u", ctx.own->id,
               blz_pool_num_threads(ctx.own->handle()), ctx.own->threads);
    check_cancel_flag(ctx);
}

// Bad input on a live pool: each call under the destroy rule of its own.
void bad_input_on_pool(const Target &t) {
    blz_pool *pool = t.pool();
    auto check = [&t](bool ok, const char *what) {
        FUZZ_CHECK(ok, "%s (pool %" PRIu64 ")", what, t.rec->id);
    };
    call_once(t, [&] { check(blz_spawn(pool, nullptr, nullptr, nullptr) == BLZ_EINVAL, "blz_spawn of NULL is not BLZ_EINVAL"); });
    call_once(t, [&] { check(blz_call(pool, nullptr, nullptr) == BLZ_EINVAL, "blz_call of NULL is not BLZ_EINVAL"); });
    call_once(t, [&] {
        check(blz_fork_join(pool, nullptr, nullptr, half_main, nullptr) == BLZ_EINVAL, "blz_fork_join of NULL is not BLZ_EINVAL");
    });
    call_once(t, [&] {
        check(blz_parallel_for(pool, 5, 3, 0, pfor_body, nullptr) == BLZ_EINVAL,
              "blz_parallel_for with begin > end is not BLZ_EINVAL");
    });
    call_once(t, [&] {
        check(blz_parallel_for(pool, 3, 3, 0, pfor_body, nullptr) == BLZ_OK, "an empty blz_parallel_for is not BLZ_OK");
    });
    call_once(t, [&] {
        blz_spawn_options opts;
        blz_spawn_options_init(&opts);
        opts.flags = 0x80;
        check(blz_spawn_ex(pool, task_main, nullptr, &opts, nullptr) == BLZ_EINVAL, "an unknown spawn flag is not BLZ_EINVAL");
    });
    call_once(t, [&] {
        blz_group *group = blz_test::sentinel<blz_group>();
        check(blz_group_create_ex(pool, 0x10, &group) == BLZ_EINVAL && group == blz_test::sentinel<blz_group>(),
              "an unknown group flag is not BLZ_EINVAL, or it wrote the group");
    });
    call_once(t, [&] {
        blz_stats st;
        st.struct_size = 2;
        check(blz_pool_stats(pool, &st) == BLZ_EINVAL, "blz_pool_stats with struct_size 2 is not BLZ_EINVAL");
    });
    call_once(t, [&] { check(blz_pool_trace_start(pool, "") == BLZ_EINVAL, "a trace to \"\" is not BLZ_EINVAL"); });
    call_once(t, [&] { check(blz_pool_trace_start(pool, nullptr) == BLZ_EINVAL, "a trace to NULL is not BLZ_EINVAL"); });
    call_once(t, [&] { check(t.own || blz_worker_index(pool) == -1, "blz_worker_index from outside the pool is not -1"); });
    call_once(t, [&] { check(blz_pool_num_threads(pool) == t.rec->threads, "blz_pool_num_threads is not the pool's size"); });
}

// Bad input and calls with a known answer, from outside.
void op_bad_input(Ctx &ctx, const Target &t) {
    (void)ctx;
    FUZZ_CHECK(blz_spawn(nullptr, task_main, nullptr, nullptr) == BLZ_EINVAL, "blz_spawn(NULL pool) is not BLZ_EINVAL");
    FUZZ_CHECK(blz_join(nullptr) == BLZ_EINVAL && blz_task_wait_for(nullptr, 0) == BLZ_EINVAL &&
                   blz_task_detach(nullptr) == BLZ_EINVAL,
               "a NULL task handle is not BLZ_EINVAL");
    FUZZ_CHECK(blz_group_wait(nullptr) == BLZ_EINVAL && blz_group_cancel(nullptr) == BLZ_EINVAL &&
                   blz_group_cancelled(nullptr) == 0 && blz_group_destroy(nullptr) == BLZ_EINVAL &&
                   blz_group_wait_for(nullptr, 0) == BLZ_EINVAL &&
                   blz_group_spawn(nullptr, task_main, nullptr) == BLZ_EINVAL,
               "a NULL group is not BLZ_EINVAL");
    FUZZ_CHECK(blz_pool_num_threads(nullptr) == 0 && blz_worker_index(nullptr) == -1 &&
                   blz_pool_destroy(nullptr) == BLZ_EINVAL && blz_pool_release(nullptr, nullptr, nullptr) == BLZ_EINVAL,
               "a NULL pool is not refused");
    FUZZ_CHECK(blz_version_number() == BLZ_VERSION_NUMBER && blz_cancelled() == 0,
               "version or blz_cancelled outside a task");
    blz_fail();  // outside any job: nothing (the ledger of every later job would show it)
    bad_input_on_pool(t);
}

// Joins a handle someone put into the bag (a task: only one of a higher level).
void op_bag_join(Ctx &ctx) {
    BagItem item;
    if (!g_bag.take(ctx.own != nullptr ? ctx.level : -1, ctx.rng, item)) return;
    if (ctx.rng.percent(30)) {
        wait_for_handle(item.entry, ctx.rng.fork());
    } else {
        join_handle(item.entry);
    }
}

}  // namespace fuzz
