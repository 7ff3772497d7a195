// Dependencies (blz_spawn_options' after_tasks, after_events, after_groups,
// BLZ_SPAWN_AFTER_ANY_END) and blz_task_finish_later, from the contract in
// blitz.h ("Dependencies" at blz_spawn_ex). The races of an event set
// against its successor's spawn, and of a predecessor's end against a
// group cancel, are held open in tests/fault/lifetime_checks.cpp; the
// count's hand-off is model-checked by Relacy (tests/relacy: "dependency
// count hand-off"). Every case runs under a watchdog.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "support.hpp"
#include "task_records.hpp"

namespace {

using blz_test::check_rec;
using blz_test::count_into;
using blz_test::Gate;
using blz_test::gate_fn;
using blz_test::OpenOnExit;
using blz_test::Ending;
using blz_test::kForever;
using blz_test::options_for;
using blz_test::Rec;
using blz_test::rec_fn;
using blz_test::Tally;
using blz_test::tally_done;
using blz_test::tally_fn;
using blz_test::tally_options;
using blz_test::Watchdog;
using blz_test::Event;
using std::chrono::milliseconds;
using std::chrono::seconds;

class Group {
public:
    explicit Group(blz_pool *pool, uint32_t flags = 0) { REQUIRE(blz_group_create_ex(pool, flags, &group_) == BLZ_OK); }
    ~Group() { blz_group_destroy(group_); }
    Group(const Group &) = delete;
    Group &operator=(const Group &) = delete;
    operator blz_group *() const { return group_; }
    blz_group *const *address() const { return &group_; }

private:
    blz_group *group_ = nullptr;
};

// Rec's options with predecessors.
blz_spawn_options after(Rec &r, blz_task *const *tasks, size_t num_tasks, blz_event *const *events = nullptr,
                        size_t num_events = 0, blz_group *group = nullptr) {
    blz_spawn_options opts = options_for(r, group);
    opts.after_tasks = tasks;
    opts.num_after_tasks = num_tasks;
    opts.after_events = events;
    opts.num_after_events = num_events;
    return opts;
}

// Whether a task has not finished: a poll of its handle times out.
bool unfinished(blz_task *task) { return blz_task_wait_for(task, 0) == BLZ_ETIMEDOUT; }

// A predecessor that writes a value (plain memory) and a successor that reads it.
struct Handoff {
    uint64_t written = 0;  // plain: the dependency alone orders the write before the read
    uint64_t seen = 0;
};
void write_value(void *arg) { static_cast<Handoff *>(arg)->written = 42; }
void read_value(void *arg) {
    auto *h = static_cast<Handoff *>(arg);
    h->seen = h->written;
}

// finish_later tasks.
struct Later {
    std::atomic<blz_event *> event{nullptr};
    std::atomic<int32_t> first{99};   // blz_task_finish_later's status
    std::atomic<int32_t> second{99};  // a second call's
    bool fail = false;
};
void later_fn(void *arg) {
    auto *l = static_cast<Later *>(arg);
    blz_event *event = nullptr;
    l->first.store(blz_task_finish_later(&event));
    blz_event *again = nullptr;
    l->second.store(blz_task_finish_later(&again));
    l->event.store(event);
    if (l->fail) blz_fail();
}

}  // namespace

TEST_CASE("predecessor lists are checked", "[api][after]") {
    Watchdog watchdog("predecessor lists are checked", seconds(60));
    blz_test::Pool pool(1);
    std::atomic<int> runs{0};
    blz_spawn_options opts;
    blz_spawn_options_init(&opts);
    opts.num_after_tasks = 1;  // with a NULL list
    CHECK(blz_spawn_ex(pool, count_into, &runs, &opts, nullptr) == BLZ_EINVAL);
    blz_spawn_options_init(&opts);
    blz_event *none = nullptr;
    opts.after_events = &none;
    opts.num_after_events = 1;  // a NULL handle
    CHECK(blz_spawn_ex(pool, count_into, &runs, &opts, nullptr) == BLZ_EINVAL);
    Group group(pool);
    blz_spawn_options_init(&opts);
    opts.group = group;
    opts.after_groups = group.address();
    opts.num_after_groups = 1;
    CHECK(blz_spawn_ex(pool, count_into, &runs, &opts, nullptr) == BLZ_EDEADLK);
    blz_spawn_options_init(&opts);
    opts.flags = 16;  // not a flag
    CHECK(blz_spawn_ex(pool, count_into, &runs, &opts, nullptr) == BLZ_EINVAL);

    // A 0.2 caller's struct ends before the lists: whatever follows is not read.
    blz_spawn_options old;
    blz_spawn_options_init(&old);
    old.struct_size = static_cast<uint32_t>(offsetof(blz_spawn_options, after_tasks));
    old.after_events = &none;
    old.num_after_events = 7;
    blz_task *task = nullptr;
    REQUIRE(blz_spawn_ex(pool, count_into, &runs, &old, &task) == BLZ_OK);
    CHECK(blz_join(task) == BLZ_OK);
    CHECK(runs.load() == 1);
}

TEST_CASE("a successor runs after its predecessors and sees their writes", "[api][after]") {
    Watchdog watchdog("a successor sees its predecessors' writes", seconds(60));
    blz_test::Pool pool(2);
    for (int round = 0; round < 200; ++round) {
        Handoff h;
        Event event;
        blz_task *first = nullptr;
        REQUIRE(blz_spawn(pool, write_value, &h, &first) == BLZ_OK);
        blz_spawn_options opts;
        blz_spawn_options_init(&opts);
        opts.after_tasks = &first;
        opts.num_after_tasks = 1;
        opts.after_events = event.address();
        opts.num_after_events = 1;
        blz_task *second = nullptr;
        REQUIRE(blz_spawn_ex(pool, read_value, &h, &opts, &second) == BLZ_OK);
        REQUIRE(blz_join(first) == BLZ_OK);  // the handle may go as soon as the spawn returned
        if (round == 0) CHECK(unfinished(second));  // the event is not set
        REQUIRE(blz_event_set(event, BLZ_OK) == BLZ_OK);
        REQUIRE(blz_join(second) == BLZ_OK);
        CHECK(h.seen == 42);
    }
}

TEST_CASE("a waiting task holds no worker", "[api][after]") {
    Watchdog watchdog("a waiting task holds no worker", seconds(60));
    blz_test::Pool pool(1);
    Event event;
    Rec r;
    r.pool = pool;
    blz_spawn_options opts = after(r, nullptr, 0, event.address(), 1);
    blz_task *task = nullptr;
    REQUIRE(blz_spawn_ex(pool, rec_fn, &r, &opts, &task) == BLZ_OK);
    // The only worker runs other work meanwhile.
    std::atomic<int> ran{0};
    REQUIRE(blz_call(pool, count_into, &ran) == BLZ_OK);
    CHECK(ran.load() == 1);
    CHECK(r.fn_runs.load() == 0);
    CHECK(unfinished(task));
    REQUIRE(blz_event_set(event, BLZ_OK) == BLZ_OK);
    CHECK(blz_join(task) == BLZ_OK);
    check_rec(r, BLZ_OK, true);
}

TEST_CASE("a failed or cancelled predecessor cancels its successor unless BLZ_SPAWN_AFTER_ANY_END",
          "[api][after]") {
    Watchdog watchdog("the failure policy", seconds(60));
    blz_test::Pool pool(2);
    const bool any_end = GENERATE(false, true);
    const int kind = GENERATE(0, 1, 2, 3);  // a task that throws, one that calls blz_fail, an event set ETASK, ECANCELED
    INFO("any_end " << any_end << ", kind " << kind);
    Rec pred;
    pred.pool = pool;
    pred.ending = kind == 0 ? Ending::kThrow : Ending::kFail;
    Event event;
    blz_task *first = nullptr;
    Rec r;
    r.pool = pool;
    blz_spawn_options opts;
    if (kind < 2) {
        REQUIRE(blz_spawn(pool, rec_fn, &pred, &first) == BLZ_OK);
        opts = after(r, &first, 1);
    } else {
        opts = after(r, nullptr, 0, event.address(), 1);
    }
    if (any_end) opts.flags = BLZ_SPAWN_AFTER_ANY_END;
    blz_task *task = nullptr;
    REQUIRE(blz_spawn_ex(pool, rec_fn, &r, &opts, &task) == BLZ_OK);
    // A third task after the second: a cancellation travels on.
    Rec third;
    third.pool = pool;
    blz_spawn_options then = after(third, &task, 1);
    blz_task *last = nullptr;
    REQUIRE(blz_spawn_ex(pool, rec_fn, &third, &then, &last) == BLZ_OK);
    if (kind < 2) CHECK(blz_join(first) == BLZ_ETASK);
    if (kind == 2) REQUIRE(blz_event_set(event, BLZ_ETASK) == BLZ_OK);
    if (kind == 3) REQUIRE(blz_event_set(event, BLZ_ECANCELED) == BLZ_OK);
    const blz_status expected = any_end ? BLZ_OK : BLZ_ECANCELED;
    CHECK(blz_join(task) == expected);
    check_rec(r, expected, any_end);
    CHECK(blz_join(last) == expected);
    check_rec(third, expected, any_end);
}

TEST_CASE("a successor after a finished task is queued at once", "[api][after]") {
    Watchdog watchdog("a successor after a finished task", seconds(60));
    blz_test::Pool pool(1);
    Rec pred;
    pred.pool = pool;
    pred.ending = GENERATE(Ending::kOk, Ending::kThrow);
    blz_task *first = nullptr;
    REQUIRE(blz_spawn(pool, rec_fn, &pred, &first) == BLZ_OK);
    // The pool's only worker runs tasks in order: once this call ran, the
    // predecessor has finished (its handle is still valid: nobody joined).
    Event ran_after;
    struct Marker {
        blz_event *event;
    } marker{ran_after};
    auto mark = [&marker] { blz_event_set(marker.event, BLZ_OK); };
    blz_task *probe = nullptr;
    blz_spawn_options popts;
    blz_spawn_options_init(&popts);
    popts.after_tasks = &first;
    popts.num_after_tasks = 1;
    popts.flags = BLZ_SPAWN_AFTER_ANY_END;
    REQUIRE(blz_spawn_ex(pool, blz_test::thunk_of(mark), &mark, &popts, &probe) == BLZ_OK);
    REQUIRE(blz_event_wait_for(ran_after, blz_test::kMinute) == BLZ_OK);
    REQUIRE(blz_join(probe) == BLZ_OK);
    Rec r;
    r.pool = pool;
    blz_spawn_options opts = after(r, &first, 1);
    blz_task *task = nullptr;
    REQUIRE(blz_spawn_ex(pool, rec_fn, &r, &opts, &task) == BLZ_OK);
    const blz_status pred_status = blz_test::status_of(pred.ending);
    const blz_status expected = pred_status == BLZ_OK ? BLZ_OK : BLZ_ECANCELED;
    CHECK(blz_join(task) == expected);
    check_rec(r, expected, pred_status == BLZ_OK);
    CHECK(blz_join(first) == pred_status);
}

TEST_CASE("a group's cancel reaches a task waiting for predecessors", "[api][after]") {
    Watchdog watchdog("a group cancel reaches a waiting task", seconds(60));
    blz_test::Pool pool(2);
    const bool by_task_cancel = GENERATE(false, true);
    Group group(pool);
    Event event;
    Rec r;
    r.pool = pool;
    blz_spawn_options opts = after(r, nullptr, 0, event.address(), 1, group);
    blz_task *task = nullptr;
    REQUIRE(blz_spawn_ex(nullptr, rec_fn, &r, &opts, &task) == BLZ_OK);
    if (by_task_cancel) {
        REQUIRE(blz_task_cancel(task) == BLZ_OK);
    } else {
        REQUIRE(blz_group_cancel(group) == BLZ_OK);
    }
    CHECK(blz_group_wait_for(group, 0) == BLZ_ETIMEDOUT);  // still waiting for its predecessor
    REQUIRE(blz_event_set(event, BLZ_OK) == BLZ_OK);
    CHECK(blz_group_wait(group) == BLZ_ECANCELED);
    CHECK(blz_join(task) == BLZ_ECANCELED);
    check_rec(r, BLZ_ECANCELED, false);
}

TEST_CASE("a task after a group runs once the group has no task left", "[api][after]") {
    Watchdog watchdog("a task after a group", seconds(60));
    blz_test::Pool pool(2);
    const bool fail = GENERATE(false, true);
    Group group(pool);
    Gate gate;
    OpenOnExit open{gate};
    std::atomic<int> runs{0};
    for (int i = 0; i < 3; ++i) REQUIRE(blz_group_spawn(group, count_into, &runs) == BLZ_OK);
    Rec failing;
    failing.pool = pool;
    failing.gate = &gate;
    failing.ending = fail ? Ending::kFail : Ending::kOk;
    blz_spawn_options fopts = options_for(failing, group);
    REQUIRE(blz_spawn_ex(nullptr, rec_fn, &failing, &fopts, nullptr) == BLZ_OK);
    Rec r;
    r.pool = pool;
    blz_spawn_options opts = options_for(r);
    opts.after_groups = group.address();
    opts.num_after_groups = 1;
    blz_task *task = nullptr;
    REQUIRE(blz_spawn_ex(pool, rec_fn, &r, &opts, &task) == BLZ_OK);
    REQUIRE(gate.wait_entered());
    CHECK(unfinished(task));
    gate.release();
    const blz_status expected = fail ? BLZ_ECANCELED : BLZ_OK;
    CHECK(blz_join(task) == expected);
    check_rec(r, expected, !fail);
    CHECK(runs.load() == 3);
    // The successor read the group's report without taking it.
    CHECK(blz_group_wait(group) == (fail ? BLZ_ETASK : BLZ_OK));

    // An empty group counts at once.
    Rec r2;
    r2.pool = pool;
    blz_spawn_options opts2 = options_for(r2);
    opts2.after_groups = group.address();
    opts2.num_after_groups = 1;
    REQUIRE(blz_spawn_ex(pool, rec_fn, &r2, &opts2, &task) == BLZ_OK);
    CHECK(blz_join(task) == BLZ_OK);
}

TEST_CASE("an event set from a thread of no pool queues its successor on the pool", "[api][after]") {
    Watchdog watchdog("an event set from a foreign thread", seconds(60));
    blz_test::Pool pool(2);
    for (int round = 0; round < 100; ++round) {
        Event event;
        Rec r;
        r.pool = pool;
        blz_spawn_options opts = after(r, nullptr, 0, event.address(), 1);
        blz_task *task = nullptr;
        REQUIRE(blz_spawn_ex(pool, rec_fn, &r, &opts, &task) == BLZ_OK);
        std::thread setter([&event] { blz_event_set(event, BLZ_OK); });
        CHECK(blz_join(task) == BLZ_OK);
        setter.join();
        check_rec(r, BLZ_OK, true);  // on_done on the worker that ran fn
    }
}

TEST_CASE("predecessors may belong to another pool", "[api][after]") {
    Watchdog watchdog("a predecessor of another pool", seconds(60));
    blz_test::Pool first_pool(1);
    blz_test::Pool pool(1);
    Handoff h;
    blz_task *first = nullptr;
    REQUIRE(blz_spawn(first_pool, write_value, &h, &first) == BLZ_OK);
    blz_spawn_options opts;
    blz_spawn_options_init(&opts);
    opts.after_tasks = &first;
    opts.num_after_tasks = 1;
    blz_task *second = nullptr;
    REQUIRE(blz_spawn_ex(pool, read_value, &h, &opts, &second) == BLZ_OK);
    REQUIRE(blz_join(second) == BLZ_OK);
    CHECK(h.seen == 42);
    REQUIRE(blz_join(first) == BLZ_OK);
}

TEST_CASE("10^5 successors of one task, and one task after 10^5", "[api][after]") {
    Watchdog watchdog("fan-out and fan-in of 10^5", seconds(120));
    blz_test::Pool pool(2);
    // 10^4 under the sanitizers, whose cost per spawn made 10^5 take 24 s (TSan).
    constexpr size_t kMany = blz_test::kSanitized ? 10000 : 100000;
    // Fan-out: one gated task, 10^5 detached successors.
    Gate gate;
    OpenOnExit open{gate};
    blz_task *root = nullptr;
    REQUIRE(blz_spawn(pool, gate_fn, &gate, &root) == BLZ_OK);
    Tally tally;
    tally.pool = pool;
    Group group(pool);
    blz_spawn_options opts = tally_options(tally, group);
    opts.after_tasks = &root;
    opts.num_after_tasks = 1;
    for (size_t i = 0; i < kMany; ++i) REQUIRE(blz_spawn_ex(nullptr, tally_fn, &tally, &opts, nullptr) == BLZ_OK);
    CHECK(tally.fn_runs.load() == 0);
    gate.release();
    REQUIRE(blz_join(root) == BLZ_OK);
    REQUIRE(blz_group_wait(group) == BLZ_OK);
    CHECK(tally.fn_runs.load() == static_cast<int>(kMany));
    CHECK(tally.ok.load() == static_cast<int>(kMany));
    CHECK(tally.off_worker.load() == 0);

    // Fan-in: 10^5 tasks, then one after them all.
    std::vector<blz_task *> tasks(kMany);
    std::atomic<int> runs{0};
    for (auto &task : tasks) REQUIRE(blz_spawn(pool, count_into, &runs, &task) == BLZ_OK);
    Rec r;
    r.pool = pool;
    blz_spawn_options last = after(r, tasks.data(), tasks.size());
    blz_task *sink = nullptr;
    REQUIRE(blz_spawn_ex(pool, rec_fn, &r, &last, &sink) == BLZ_OK);
    CHECK(blz_join(sink) == BLZ_OK);
    CHECK(runs.load() == static_cast<int>(kMany));
    check_rec(r, BLZ_OK, true);
    for (blz_task *task : tasks) REQUIRE(blz_join(task) == BLZ_OK);
}

// A task after 3 predecessors (the most whose edges live in the task
// itself, task.hpp kInlineEdges) and after 4 (the fewest that need an
// array): each predecessor but the last is a task waiting for its own
// event, the last an event; the successor must not run before the last
// of them completes, must see every task's write, and then finishes
// later, through the edge it shares with its predecessors' first.
namespace {
struct FanIn {
    static constexpr size_t kMax = 4;
    bool written[kMax] = {};  // plain: the dependencies alone order them before the read
    bool all_seen = false;
    size_t tasks = 0;
    Later later;
};
struct FanInSlot {
    FanIn *fan_in;
    size_t index;
};
void write_slot(void *arg) {
    auto *slot = static_cast<FanInSlot *>(arg);
    slot->fan_in->written[slot->index] = true;
}
void read_slots_then_finish_later(void *arg) {
    auto *f = static_cast<FanIn *>(arg);
    f->all_seen = true;
    for (size_t i = 0; i < f->tasks; ++i) f->all_seen = f->all_seen && f->written[i];
    later_fn(&f->later);
}
}  // namespace

TEST_CASE("a task after 3 and after 4 predecessors runs after every one of them", "[api][after]") {
    Watchdog watchdog("a task after 3 and after 4", seconds(60));
    blz_test::Pool pool(2);
    const size_t predecessors = GENERATE(3, 4);
    INFO("predecessors " << predecessors);
    FanIn f;
    f.tasks = predecessors - 1;
    Event events[FanIn::kMax];
    FanInSlot slots[FanIn::kMax];
    blz_task *tasks[FanIn::kMax] = {};
    for (size_t i = 0; i < f.tasks; ++i) {
        slots[i] = {&f, i};
        blz_spawn_options opts;
        blz_spawn_options_init(&opts);
        opts.after_events = events[i].address();
        opts.num_after_events = 1;
        REQUIRE(blz_spawn_ex(pool, write_slot, &slots[i], &opts, &tasks[i]) == BLZ_OK);
    }
    blz_spawn_options opts;
    blz_spawn_options_init(&opts);
    opts.after_tasks = tasks;
    opts.num_after_tasks = f.tasks;
    opts.after_events = events[f.tasks].address();
    opts.num_after_events = 1;
    blz_task *successor = nullptr;
    REQUIRE(blz_spawn_ex(pool, read_slots_then_finish_later, &f, &opts, &successor) == BLZ_OK);
    // And a task after the successor: it waits for the successor's finish.
    Handoff h;
    blz_spawn_options then;
    blz_spawn_options_init(&then);
    then.after_tasks = &successor;
    then.num_after_tasks = 1;
    blz_task *last = nullptr;
    REQUIRE(blz_spawn_ex(pool, read_value, &h, &then, &last) == BLZ_OK);
    for (size_t i = 0; i < f.tasks; ++i) {
        REQUIRE(blz_event_set(events[i], BLZ_OK) == BLZ_OK);
        REQUIRE(blz_join(tasks[i]) == BLZ_OK);
        CHECK(unfinished(successor));  // the last event is not set
    }
    h.written = 42;  // before the successor may run: the last task reads it
    REQUIRE(blz_event_set(events[f.tasks], BLZ_OK) == BLZ_OK);
    REQUIRE(blz_test::eventually([&] { return f.later.event.load() != nullptr; }));
    CHECK(f.all_seen);
    CHECK(f.later.first.load() == BLZ_OK);
    CHECK(unfinished(successor));  // until its finish_later event is set
    CHECK(unfinished(last));
    REQUIRE(blz_event_set(f.later.event.load(), BLZ_OK) == BLZ_OK);
    blz_event_destroy(f.later.event.load());
    CHECK(blz_join(successor) == BLZ_OK);
    CHECK(blz_join(last) == BLZ_OK);
    CHECK(h.seen == 42);
}

TEST_CASE("blz_task_finish_later: the task finishes when its event is set", "[api][after][finish_later]") {
    Watchdog watchdog("finish_later", seconds(60));
    blz_test::Pool pool(2);
    const blz_status set_with = GENERATE(BLZ_OK, BLZ_ETASK, BLZ_ECANCELED);
    Later later;
    Tally tally;
    tally.pool = pool;
    blz_spawn_options opts = tally_options(tally);
    blz_task *task = nullptr;
    REQUIRE(blz_spawn_ex(pool, later_fn, &later, &opts, &task) == BLZ_OK);
    REQUIRE(blz_test::eventually([&] { return later.event.load() != nullptr; }));
    CHECK(later.first.load() == BLZ_OK);
    CHECK(later.second.load() == BLZ_EINVAL);  // once per task
    // A successor waits for the finish, not for fn.
    Rec r;
    r.pool = pool;
    blz_spawn_options sopts = after(r, &task, 1);
    sopts.flags = BLZ_SPAWN_AFTER_ANY_END;
    blz_task *successor = nullptr;
    REQUIRE(blz_spawn_ex(pool, rec_fn, &r, &sopts, &successor) == BLZ_OK);
    CHECK(blz_task_wait_for(task, 20 * 1000 * 1000) == BLZ_ETIMEDOUT);
    CHECK(tally.done.load() == 0);
    CHECK(r.fn_runs.load() == 0);
    blz_event *event = later.event.load();
    std::thread setter([event, set_with] {
        blz_event_set(event, set_with);
        blz_event_destroy(event);  // at once: the task keeps what it needs
    });
    CHECK(blz_join(task) == set_with);
    setter.join();
    CHECK(tally.done.load() == 1);
    CHECK(tally.off_worker.load() == 0);  // on_done on a worker, not on the setter
    CHECK(blz_join(successor) == BLZ_OK);
    check_rec(r, BLZ_OK, true);
}

TEST_CASE("blz_task_finish_later: refused outside a task; a failing fn finishes at once; destroy cancels",
          "[api][after][finish_later]") {
    Watchdog watchdog("finish_later edges", seconds(60));
    blz_test::Pool pool(1);
    blz_event *event = nullptr;
    CHECK(blz_task_finish_later(&event) == BLZ_EINVAL);  // no task here
    CHECK(blz_task_finish_later(nullptr) == BLZ_EINVAL);
    auto in_call = [&event] { return blz_task_finish_later(&event); };
    blz_status in_call_status = BLZ_OK;
    auto call_body = [&] { in_call_status = in_call(); };
    REQUIRE(blz_test::on_worker(pool, call_body) == BLZ_OK);
    CHECK(in_call_status == BLZ_EINVAL);  // a blz_call job from outside is no task
    CHECK(event == nullptr);

    Later failing;
    failing.fail = true;
    blz_task *task = nullptr;
    REQUIRE(blz_spawn(pool, later_fn, &failing, &task) == BLZ_OK);
    CHECK(blz_join(task) == BLZ_ETASK);  // without waiting for the event
    CHECK(blz_event_set(failing.event.load(), BLZ_OK) == BLZ_OK);  // still an ordinary event
    blz_event_destroy(failing.event.load());

    Later dropped;
    REQUIRE(blz_spawn(pool, later_fn, &dropped, &task) == BLZ_OK);
    REQUIRE(blz_test::eventually([&] { return dropped.event.load() != nullptr; }));
    blz_event_destroy(dropped.event.load());  // unset
    CHECK(blz_join(task) == BLZ_ECANCELED);
}

TEST_CASE("blz_pool_destroy waits for a task whose event is never set, until the event goes", "[api][after]") {
    Watchdog watchdog("destroy with a task waiting for an event", seconds(60));
    const bool finish_later = GENERATE(false, true);
    blz_pool_config config;
    blz_pool_config_init(&config);
    config.num_threads = 1;
    blz_pool *pool = nullptr;
    REQUIRE(blz_pool_create(&config, &pool) == BLZ_OK);
    Later later;
    Tally tally;
    tally.pool = pool;
    blz_spawn_options opts = tally_options(tally);
    blz_event *waited = nullptr;
    if (finish_later) {
        REQUIRE(blz_spawn_ex(pool, later_fn, &later, &opts, nullptr) == BLZ_OK);
        REQUIRE(blz_test::eventually([&] { return later.event.load() != nullptr; }));
        waited = later.event.load();
    } else {
        REQUIRE(blz_event_create(&waited) == BLZ_OK);
        opts.after_events = &waited;
        opts.num_after_events = 1;
        REQUIRE(blz_spawn_ex(pool, tally_fn, &tally, &opts, nullptr) == BLZ_OK);
    }
    std::atomic<bool> destroyed{false};
    std::atomic<int32_t> destroy_status{99};
    std::thread destroyer([&] {
        destroy_status.store(blz_pool_destroy(pool));
        destroyed.store(true);
    });
    std::this_thread::sleep_for(milliseconds(50));
    CHECK_FALSE(destroyed.load());  // the task is accepted work
    CHECK(tally.done.load() == 0);
    blz_event_destroy(waited);  // the way out: an unset event completes with BLZ_ECANCELED
    destroyer.join();
    CHECK(destroy_status.load() == BLZ_OK);
    CHECK(tally.done.load() == 1);  // before destroy returned
    CHECK(tally.canceled.load() == 1);
    CHECK(tally.fn_runs.load() == 0);  // later_fn is no tally_fn: neither ran one
}

// fork(): the child's join of a parent's task returns BLZ_EFORK. A task
// that waits for an event (or whose fn asked to finish later) is on that
// event's list, and the child may still set the event: the join must not
// free the task under it (AddressSanitizer's build sees the set touch
// freed memory if it does). The parent is untouched.
TEST_CASE("fork(): a task waiting for an event is joined in the child, then the event is set there",
          "[api][after][fork]") {
    Watchdog watchdog("fork with tasks waiting for events", seconds(120));
    blz_test::Pool pool(1);
    Event predecessor;
    Rec after_event;
    after_event.pool = pool;
    blz_spawn_options opts = after(after_event, nullptr, 0, predecessor.address(), 1);
    blz_task *waiting = nullptr;
    REQUIRE(blz_spawn_ex(pool, rec_fn, &after_event, &opts, &waiting) == BLZ_OK);
    Later later;
    blz_task *finishing = nullptr;
    REQUIRE(blz_spawn_ex(pool, later_fn, &later, nullptr, &finishing) == BLZ_OK);
    REQUIRE(blz_test::eventually([&] { return later.event.load() != nullptr; }));
    // The worker asleep: nobody allocates while the child is forked.
    REQUIRE(blz_test::eventually([&] { return blz_test::stats_of(pool).sleeping_now == 1; }));

    const int status = blz_test::run_forked([&] {
        int failures = 0;
        failures += blz_join(waiting) != BLZ_EFORK;
        failures += blz_join(finishing) != BLZ_EFORK;
        failures += blz_event_set(predecessor, BLZ_OK) != BLZ_OK;  // releases `waiting`: queued nowhere
        failures += blz_event_set(later.event.load(), BLZ_OK) != BLZ_OK;
        return failures;
    });
    INFO("child status " << status);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);

    CHECK(unfinished(waiting));
    REQUIRE(blz_event_set(predecessor, BLZ_OK) == BLZ_OK);
    CHECK(blz_join(waiting) == BLZ_OK);
    check_rec(after_event, BLZ_OK, true);
    CHECK(unfinished(finishing));
    REQUIRE(blz_event_set(later.event.load(), BLZ_ETASK) == BLZ_OK);
    CHECK(blz_join(finishing) == BLZ_ETASK);
    blz_event_destroy(later.event.load());
}

// The continuation (docs/protocol.md, "Continuations"): the successor a
// task's end makes ready runs next on that task's worker, unless something
// must go first.
namespace {

// Tasks that note which worker ran them, and in which order.
struct Tracks {
    blz_pool *pool = nullptr;
    std::atomic<int> next{0};
};
struct Track {
    Tracks *tracks = nullptr;
    int32_t worker = -1;  // plain: written by the task, read after its join
    int order = -1;
    blz_task *spawn_high = nullptr;  // set by a task that spawns a high-priority one
    Track *high = nullptr;
    blz_status spawn_status = BLZ_OK;  // of that spawn (no Catch2 assertion off the test's thread)
};
void track_fn(void *arg);
void note(Track *t) {
    t->worker = blz_worker_index(t->tracks->pool);
    t->order = t->tracks->next.fetch_add(1);
}
void track_fn(void *arg) {
    auto *t = static_cast<Track *>(arg);
    note(t);
    if (t->high == nullptr) return;
    blz_spawn_options opts;
    blz_spawn_options_init(&opts);
    opts.flags = BLZ_SPAWN_HIGH_PRIORITY;
    t->spawn_status = blz_spawn_ex(t->tracks->pool, track_fn, t->high, &opts, &t->spawn_high);
}

blz_task *spawn_after_one(blz_pool *pool, blz_fn fn, void *arg, blz_task *const *before, blz_event *const *event,
                          uint32_t flags = 0, blz_done_fn on_done = nullptr, void *done_arg = nullptr) {
    blz_spawn_options opts;
    blz_spawn_options_init(&opts);
    opts.flags = flags;
    opts.on_done = on_done;
    opts.done_arg = done_arg;
    opts.after_tasks = before;
    opts.num_after_tasks = before != nullptr ? 1 : 0;
    opts.after_events = event;
    opts.num_after_events = event != nullptr ? 1 : 0;
    blz_task *task = nullptr;
    REQUIRE(blz_spawn_ex(pool, fn, arg, &opts, &task) == BLZ_OK);
    return task;
}

// A job that spawns c, then d after c, joins c and notes when it resumed.
struct JoinsFirst {
    Tracks tracks;
    Track c, d;
    blz_task *d_handle = nullptr;
    blz_status spawn_c = BLZ_OK, spawn_d = BLZ_OK, join_c = BLZ_OK;
    int resumed = -1;
};
void joins_first(void *arg) {
    auto *j = static_cast<JoinsFirst *>(arg);
    blz_task *c = nullptr;
    j->spawn_c = blz_spawn(j->tracks.pool, track_fn, &j->c, &c);
    if (j->spawn_c != BLZ_OK) return;
    blz_spawn_options opts;
    blz_spawn_options_init(&opts);
    opts.after_tasks = &c;
    opts.num_after_tasks = 1;
    j->spawn_d = blz_spawn_ex(j->tracks.pool, track_fn, &j->d, &opts, &j->d_handle);
    j->join_c = blz_join(c);
    j->resumed = j->tracks.next.fetch_add(1);
}

// A late on_done that waits (bounded) for another task of the pool.
struct WaitsInDone {
    std::atomic<blz_task *> other{nullptr};
    std::atomic<int32_t> status{99};
};
void wait_in_done(void *arg, blz_status) {
    auto *w = static_cast<WaitsInDone *>(arg);
    w->status.store(blz_task_wait_for(w->other.load(), 5000000000u));  // 5 s
}

}  // namespace

TEST_CASE("continuation: a chain of tasks stays on the worker that ran its first", "[api][after][continuation]") {
    Watchdog watchdog("a chain stays on one worker", seconds(60));
    blz_test::Pool pool(2);
    constexpr int kLength = 200;
    Tracks tracks;
    tracks.pool = pool;
    std::vector<Track> links(kLength);
    std::vector<blz_task *> handles(kLength);
    Event start;
    for (int i = 0; i < kLength; ++i) {
        links[i].tracks = &tracks;
        handles[i] = spawn_after_one(pool, track_fn, &links[i], i > 0 ? &handles[i - 1] : nullptr,
                                     i == 0 ? start.address() : nullptr);
    }
    REQUIRE(blz_event_set(start, BLZ_OK) == BLZ_OK);
    for (blz_task *h : handles) REQUIRE(blz_join(h) == BLZ_OK);
    // Each successor was private to its predecessor's worker: no other
    // worker could take it, however often the second one searched.
    for (int i = 0; i < kLength; ++i) {
        CHECK(links[i].order == i);
        CHECK(links[i].worker == links[0].worker);
    }
}

TEST_CASE("continuation: a high-priority task goes first", "[api][after][continuation]") {
    Watchdog watchdog("a high-priority task before the continuation", seconds(60));
    blz_test::Pool pool(1);
    Tracks tracks;
    tracks.pool = pool;
    Track high, first, second;
    high.tracks = first.tracks = second.tracks = &tracks;
    first.high = &high;  // first spawns `high`, then its end makes `second` ready
    Event start;
    blz_task *a = spawn_after_one(pool, track_fn, &first, nullptr, start.address());
    blz_task *b = spawn_after_one(pool, track_fn, &second, &a, nullptr);
    REQUIRE(blz_event_set(start, BLZ_OK) == BLZ_OK);
    REQUIRE(blz_join(b) == BLZ_OK);
    REQUIRE(blz_join(a) == BLZ_OK);
    REQUIRE(first.spawn_status == BLZ_OK);
    REQUIRE(first.spawn_high != nullptr);
    REQUIRE(blz_join(first.spawn_high) == BLZ_OK);
    CHECK(first.order == 0);
    CHECK(high.order == 1);  // the urgent injector is searched first (blitz.h), and the continuation yields to it
    CHECK(second.order == 2);
}

TEST_CASE("continuation: none for a task whose on_done runs after it finished", "[api][after][continuation]") {
    Watchdog watchdog("no continuation under a late on_done", seconds(60));
    // One worker: the on_done's wait can only run the successor itself,
    // from the deque; a successor kept as the continuation would run only
    // after the on_done returned, and the wait would time out.
    blz_test::Pool pool(1);
    std::atomic<int> runs{0};
    WaitsInDone waits;
    Event start;
    blz_task *a = spawn_after_one(pool, count_into, &runs, nullptr, start.address(), BLZ_SPAWN_DONE_AFTER_FINISH,
                                  wait_in_done, &waits);
    blz_task *b = spawn_after_one(pool, count_into, &runs, &a, nullptr);
    waits.other.store(b);
    REQUIRE(blz_event_set(start, BLZ_OK) == BLZ_OK);
    REQUIRE(blz_join(a) == BLZ_OK);  // may return before the on_done ended
    while (waits.status.load() == 99) std::this_thread::sleep_for(milliseconds(1));
    CHECK(waits.status.load() == BLZ_OK);  // the wait freed b's handle
    if (waits.status.load() == BLZ_ETIMEDOUT) CHECK(blz_join(b) == BLZ_OK);
    CHECK(runs.load() == 2);
}

TEST_CASE("continuation: a wait that the task's end satisfied returns before the successor runs",
          "[api][after][continuation]") {
    Watchdog watchdog("a satisfied wait before the continuation", seconds(60));
    // One worker: the job joins c inside its wait; c's end makes d ready
    // and sets the join's latch. The wait returns first, as it did before
    // continuations; d runs after the job (with the continuation run
    // regardless, d would run inside the join, before the job resumed).
    blz_test::Pool pool(1);
    JoinsFirst j;
    j.tracks.pool = pool;
    j.c.tracks = j.d.tracks = &j.tracks;
    REQUIRE(blz_call(pool, joins_first, &j) == BLZ_OK);
    REQUIRE(j.spawn_c == BLZ_OK);
    REQUIRE(j.spawn_d == BLZ_OK);
    CHECK(j.join_c == BLZ_OK);
    REQUIRE(blz_join(j.d_handle) == BLZ_OK);
    CHECK(j.c.order == 0);
    CHECK(j.resumed == 1);
    CHECK(j.d.order == 2);
}
