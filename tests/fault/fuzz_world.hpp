// The call-sequence fuzzer's world (tests/fault/fuzz_calls.cpp): the
// ledger of every task it spawns, the record of every pool it creates,
// the shared slots through which several threads use a pool, and the
// rules that keep every call legal while another thread destroys that
// pool (blitz.h, blz_pool_destroy).
//
// Lifetimes:
//  - A TaskEntry belongs to its PoolRec (entries) and lives as long as
//    it; the task's fn, its on_done and whoever holds its handle read it.
//  - A PoolRec is shared (std::shared_ptr): its slot holds it until the
//    pool was destroyed and reconciled; a group session, a handle in the
//    bag, a SlotAccess and a release under way hold it as long as they use
//    it. The pool's own tasks use it through a plain pointer: the slot's
//    hold outlives them (destroy waits for them before the reconciliation
//    drops it).
//  - A RegWatch outlives its PoolRec: the pause-point hook finds it by the
//    pool's address in a global map until the library frees the pool, and
//    a CallMark or a hold keeps its own reference.
//  - A GroupSession lives until its owner destroyed the group, after the
//    last wait; a TaskEntry's `session` is read only until then (later,
//    by a join from the bag, it is only compared with nullptr).
//
// Memory orders: the ledger's atomics use the default (seq_cst) unless a
// comment gives a reason for another; the fuzzer's own cost does not
// matter, and one total order keeps each check's reasoning short. What a
// check reads after a wait of the library (a join, a group wait, a
// destroy) is ordered by that wait: the library's release and acquire.
#pragma once

#include <blitz.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "fuzz_support.hpp"

namespace fuzz {

constexpr int32_t kPending = 1000;         // a status not known yet
constexpr int kSlots = 4;                  // shared pools at once; slot i has level i + 1
constexpr int kPrivateLevel = kSlots + 1;  // pools a task makes for itself block on nothing

// How a job fails, when it does: both are BLZ_ETASK to its waiter.
enum class Fail : uint8_t { kNone, kBlzFail, kThrow };
struct FuzzError {};  // what a failing job throws

// What happens to a spawned task's handle.
enum class Disposition : uint8_t {
    kDetached,  // spawned without one
    kJoin,      // the spawner joins it at once
    kWaitFor,   // the spawner polls it with bounded waits, and may detach it
    kDetach,    // the spawner detaches it at once
    kBag,       // put into the bag: any thread (a task: of a lower level) joins it later
    kSelf,      // the task owns it: checks EDEADLK on itself, then detaches itself
    kDoneSelf,  // its on_done owns it: checks EDEADLK on its task, then detaches it
};

struct GroupSession;
struct PoolRec;

struct TaskEntry {
    PoolRec *rec = nullptr;
    GroupSession *session = nullptr;  // the group it was spawned into, or nullptr (see Lifetimes)
    uint64_t id = 0;
    uint64_t seed = 0;  // the task's own choices
    int depth = 0;      // how much nested work it may still start
    Fail fail = Fail::kNone;
    Disposition disposition = Disposition::kDetached;
    bool has_on_done = false;
    bool done_throws = false;        // on_done throws once its checks are done
    bool done_fails = false;         // on_done calls blz_fail, which must change nothing
    bool done_probes = false;        // on_done waits for its group (BLZ_EDEADLK)
    bool must_be_cancelled = false;  // spawned by its group's owner after that owner's cancel
    // blz_task_cancel: only tasks in no group that their spawner polls
    // (kWaitFor) are cancelled, so that a group's wait stays as the session
    // predicts it. `cancellable` is decided before the spawn (the task's
    // work reads it); `cancel_sent` is set just before the call, so a task
    // skipped by it always finds it set.
    bool cancellable = false;
    std::atomic<bool> cancel_sent{false};
    blz_task *handle = nullptr;      // written by the library before the task can run
    std::atomic<int32_t> spawn_status{kPending};
    std::atomic<int> runs{0};
    std::atomic<bool> fn_ended{false};
    std::atomic<int> done_calls{0};
    std::atomic<int32_t> done_status{kPending};
    std::atomic<int32_t> final_status{kPending};  // what the wait that freed the handle returned
    // The bounded waits on the handle, numbered 1, 2, ...: the task that
    // takes a waiter's latch records that waiter's number; only the wait
    // that returns the task's status may be it (a wait that took its latch
    // back returned BLZ_ETIMEDOUT, and the task then finds no latch).
    std::atomic<uint32_t> wait_seq{0};
    std::atomic<uint32_t> took_latch_seq{0};
    std::atomic<uint32_t> final_seq{0};
    std::atomic<bool> finish_counted{false};

    // The status the task's end must have, from what it did.
    int32_t expected_status() const {
        if (runs.load() == 0) return BLZ_ECANCELED;
        return fail == Fail::kNone ? BLZ_OK : BLZ_ETASK;
    }
};

// What blz_stats' tasks_failed of one pool must lie within (blitz.h: each
// failed spawned task, blz_call function, parallel_for piece and broadcast
// call counts once; a fork-join counts its blz_fail halves once when its
// forker ran them, once each when stolen; an exception once; an exception
// escaping on_done once).
struct Tally {
    std::atomic<uint64_t> exact{0};      // exact failures begun (incremented just before each)
    std::atomic<uint64_t> fj_floor{0};   // fork-join failures: the least they count
    std::atomic<uint64_t> fj_ceil{0};    // ... and the most
    std::atomic<uint64_t> confirmed{0};  // failures known to be counted already
};

// The pause-point hook's view of a pool, by its address.
struct RegWatch {
    std::atomic<bool> closing{false};           // destroy was decided (the slot claimed)
    std::atomic<bool> destroy_returned{false};  // blz_pool_destroy returned (or on_destroyed ran)
    std::atomic<bool> freed{false};             // the library is freeing the pool's memory
};

// open -> closing (claim(): a thread decided to destroy it) -> destroyed (its destroy returned).
enum PoolPhase : int { kPhaseOpen, kPhaseClosing, kPhaseDestroyed };

struct PoolRec : std::enable_shared_from_this<PoolRec> {
    uint64_t id = 0;
    int slot_index = -1;  // -1: a private pool, used by its creator alone
    int level = 0;        // its tasks block only on pools of a higher level
    uint32_t threads = 0;
    bool hooks = false;
    bool embedder = false;       // spawn_thread: the fuzzer's threads call run()
    int late_starter = -1;       // a worker that starts only once the pool ran work (issue 27 item 3)
    int refuse_spawn_at = -1;    // spawn_thread refuses this index (create must give BLZ_ETHREAD)
    bool refuse_throws = false;  // ... by throwing rather than returning non-zero
    PoolRec *host = nullptr;     // the pool whose tasks call this one's run() (op_hosted_pool)
    std::shared_ptr<RegWatch> watch = std::make_shared<RegWatch>();
    std::atomic<blz_pool *> pool{nullptr};
    std::atomic<int> phase{kPhaseOpen};
    std::atomic<bool> create_returned{false};
    std::atomic<bool> work_seen{false};
    std::atomic<int64_t> unfinished{0};           // accepted tasks whose end was not seen yet
    std::atomic<int> unprotected_calls{0};        // group spawns under way that follow no slot rule
    std::atomic<int> undecided{0};                // outside calls not yet admitted or refused (see PoolCall)
    std::atomic<int> inside{0};                   // outside calls from slots not yet returned (see destroy_slot)
    std::atomic<uint64_t> injected_confirmed{0};  // outside spawns and calls that returned BLZ_OK
    Tally tally;

    // Hooks and embedder threads, per worker index.
    std::unique_ptr<std::atomic<int>[]> started, stopped, run_returned, worker_tid;
    std::mutex embed_mu;
    std::vector<std::thread> embedders;
    std::atomic<bool> spawn_thread_failed{false};

    // Statistics: the last snapshot of the pool and of each worker, in the
    // order they were taken (under stats_mu).
    std::mutex stats_mu;
    bool have_pool_stats = false;
    blz_stats last_pool{};
    std::vector<blz_stats> last_worker;
    std::vector<bool> have_worker;

    // Tracing: 0 off, 1 running, 2 a start or stop under way (one thread owns it).
    std::atomic<int> trace_state{0};
    std::string trace_path;
    uint32_t traces = 0;

    std::mutex entries_mu;
    std::vector<std::unique_ptr<TaskEntry>> entries;
    std::atomic<uint64_t> accepted{0}, refused{0};

    PoolRec(uint64_t pool_id, int slot, int pool_level) : id(pool_id), slot_index(slot), level(pool_level) {}
    ~PoolRec();
    PoolRec(const PoolRec &) = delete;
    PoolRec &operator=(const PoolRec &) = delete;

    void size_per_worker(uint32_t n) {
        threads = n;
        started.reset(new std::atomic<int>[n]());
        stopped.reset(new std::atomic<int>[n]());
        run_returned.reset(new std::atomic<int>[n]());
        worker_tid.reset(new std::atomic<int>[n]());
        last_worker.assign(n, blz_stats{});
        have_worker.assign(n, false);
    }
    blz_pool *handle() const { return pool.load(); }
    bool open() const { return phase.load(std::memory_order_seq_cst) == kPhaseOpen; }

    TaskEntry *add_entry() {
        auto entry = std::make_unique<TaskEntry>();
        entry->rec = this;
        TaskEntry *raw = entry.get();
        std::lock_guard<std::mutex> lock(entries_mu);
        raw->id = entries.size() + 1;
        entries.push_back(std::move(entry));
        return raw;
    }
};

// The end of an accepted task, counted once whichever sign of it comes first.
inline void count_finished(TaskEntry *e) {
    if (!e->finish_counted.exchange(true)) e->rec->unfinished.fetch_sub(1);
}

// ---------------------------------------------------------------------------
// Shared slots and the rule of blz_pool_destroy. A pool in a slot is used
// by any thread that finds it there; the thread that claims it (its
// phase open -> closing) destroys it. The rule: every call that overlaps
// destroy must have been admitted or refused before destroy returns. Each
// call from a thread that is not one of the pool's workers counts itself
// in the record's `undecided` until the library's admission decided it
// (the fault build's kEntered pause point, on the calling thread) or it
// returned; a Dekker pair with `phase` makes a call that starts after the
// claim see it and not call at all. The destroyer keeps destroy from
// returning until `undecided` is 0: either it waits for that before
// destroy, or a gate task that destroy must wait for waits for it.
//
// No call is undecided while its thread runs other work (admission comes
// before any wait in which a worker helps), so a destroyer that waits for
// `undecided` never waits for a call further down its own stack.

inline bool claim(PoolRec &rec) {
    int open = kPhaseOpen;
    // seq_cst: the second half of the Dekker pairs with PoolCall.
    return rec.phase.compare_exchange_strong(open, kPhaseClosing, std::memory_order_seq_cst);
}

enum SlotState : int { kEmpty, kCreating, kOccupied };

struct Slot {
    int index = 0;
    std::atomic<int> state{kEmpty};  // kEmpty -> kCreating (one creator) -> kOccupied -> kEmpty (the reconciler)

    std::shared_ptr<PoolRec> get() {
        std::lock_guard<std::mutex> lock(mu_);
        return rec_;
    }
    void set(std::shared_ptr<PoolRec> rec) {
        std::lock_guard<std::mutex> lock(mu_);
        rec_ = std::move(rec);
    }

private:
    std::mutex mu_;  // guards the pointer's copies and its replacement
    std::shared_ptr<PoolRec> rec_;
};

inline Slot g_slots[kSlots];

// A call under way on the calling thread: the hook marks it decided at the
// library's admission. A stack: work a waiting worker runs may call too.
struct CallMark {
    const void *registry = nullptr;
    std::atomic<int> *undecided = nullptr;  // the record's, while pending
    RegWatch *watch = nullptr;
    bool pending = false;
    CallMark *outer = nullptr;
};
inline thread_local CallMark *t_call = nullptr;

inline void decide(CallMark &mark) {
    if (!mark.pending) return;
    mark.pending = false;
    // seq_cst: the destroyer's wait for 0 is the other half of the Dekker pair.
    mark.undecided->fetch_sub(1, std::memory_order_seq_cst);
}

// One call on a pool. `shared`: the caller reached the pool through a slot
// and is not one of its workers; the call is then made only while the
// pool's destroy is not decided (ok()). Otherwise (the caller's own pool,
// a private pool) always. `racing`: counted as undecided without looking
// at the phase (the racer thread of a destroy, which the gate waits for).
class PoolCall {
public:
    PoolCall(bool shared, PoolRec *rec, bool racing = false) {
        mark_.registry = rec->handle();
        mark_.watch = rec->watch.get();
        mark_.outer = t_call;
        if (shared) {
            rec->undecided.fetch_add(1, std::memory_order_seq_cst);  // seq_cst: Dekker with claim()
            if (!racing && rec->phase.load(std::memory_order_seq_cst) != kPhaseOpen) {
                rec->undecided.fetch_sub(1, std::memory_order_seq_cst);
                return;
            }
            mark_.undecided = &rec->undecided;
            mark_.pending = true;
            inside_ = &rec->inside;
            inside_->fetch_add(1, std::memory_order_seq_cst);  // seq_cst: before the call, see destroy_slot
        }
        ok_ = true;
        publish(&mark_);
    }
    ~PoolCall() {
        if (!ok_) return;
        decide(mark_);
        if (inside_ != nullptr) inside_->fetch_sub(1, std::memory_order_seq_cst);
        t_call = mark_.outer;
    }
    PoolCall(const PoolCall &) = delete;
    PoolCall &operator=(const PoolCall &) = delete;
    bool ok() const { return ok_; }

private:
    // The mark lives in this object, which the destructor takes off the
    // stack of marks (t_call = outer) before it ends; g++ cannot see that
    // across the constructor and the destructor.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdangling-pointer"
#endif
    static void publish(CallMark *mark) { t_call = mark; }
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

    CallMark mark_;
    std::atomic<int> *inside_ = nullptr;
    bool ok_ = false;
};

// The record of a slot's pool, for one operation, while its destroy is not decided.
class SlotAccess {
public:
    explicit SlotAccess(Slot &slot) : rec_(slot.get()) {
        if (rec_ != nullptr && !rec_->open()) rec_.reset();
    }
    bool ok() const { return rec_ != nullptr; }
    const std::shared_ptr<PoolRec> &rec() const { return rec_; }

private:
    std::shared_ptr<PoolRec> rec_;
};

// ---------------------------------------------------------------------------
// Group sessions: a group used by one owner (a driver thread or a task):
// it spawns a batch (its tasks may add to it), may cancel, then waits and
// checks the outcome against what the batch did. The counters describe
// the batch since the last wait that returned (an epoch): its tasks all
// finish before that wait returns, so no two epochs mix.

enum class Link : uint8_t {
    kNone,       // not working for a group's task
    kDefinite,   // in the task, or in a fork-join half or parallel_for piece it runs
    kAmbiguous,  // in a blz_call or broadcast it made, or work on another pool, when --skip-known 9
};

struct GroupSession {
    std::shared_ptr<PoolRec> rec_ref;  // the ledger, which the group may outlive the pool with
    PoolRec *rec = nullptr;
    blz_group *group = nullptr;
    bool fail_fast = false;
    bool owner_is_task = false;  // a task of the same pool owns it
    bool cancel_issued = false;  // by the owner, in this epoch
    std::atomic<uint32_t> own_failures{0};
    std::atomic<uint32_t> definite_failures{0};
    std::atomic<uint32_t> ambiguous_failures{0};
    std::atomic<bool> saw_cancel{false};
    std::mutex mu;
    std::vector<TaskEntry *> epoch;  // the epoch's accepted tasks

    void note_failure(Link link) {
        if (link == Link::kDefinite) definite_failures.fetch_add(1);
        if (link == Link::kAmbiguous) ambiguous_failures.fetch_add(1);
    }
};

// ---------------------------------------------------------------------------
// The bag: handles any thread may join later. A task takes only handles of
// pools above its own level, so that no wait can close a cycle.

struct BagItem {
    TaskEntry *entry = nullptr;
    std::shared_ptr<PoolRec> rec;
    int level = 0;
};

class Bag {
public:
    bool put(BagItem item) {
        std::lock_guard<std::mutex> lock(mu_);
        if (items_.size() >= kMax) return false;
        items_.push_back(std::move(item));
        return true;
    }
    bool take(int above_level, Rng &rng, BagItem &out) {
        std::lock_guard<std::mutex> lock(mu_);
        if (items_.empty()) return false;
        const size_t start = rng.below(uint32_t(items_.size()));
        for (size_t k = 0; k < items_.size(); ++k) {
            size_t i = (start + k) % items_.size();
            if (items_[i].level > above_level) {
                out = std::move(items_[i]);
                items_[i] = std::move(items_.back());
                items_.pop_back();
                return true;
            }
        }
        return false;
    }
    size_t size() {
        std::lock_guard<std::mutex> lock(mu_);
        return items_.size();
    }

private:
    static constexpr size_t kMax = 256;
    std::mutex mu_;
    std::vector<BagItem> items_;
};

inline Bag g_bag;

}  // namespace fuzz
