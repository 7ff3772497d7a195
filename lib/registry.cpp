#include "registry.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <optional>
#include <vector>
#include <sched.h>

#include "cpu_quota.hpp"
#include "fault.hpp"
#include "publish.hpp"
#include "task.hpp"
#include "worker.hpp"

namespace blz {

std::atomic<uint64_t> g_fork_generation{0};

namespace {

// In the child after fork(): the parent's pools are dead here, and the
// forking thread is nobody's worker any more.
void on_fork_child() {
    g_fork_generation.fetch_add(1, std::memory_order_relaxed);  // relaxed: the child is single-threaded now
    set_current_worker(nullptr);
    t_task_frames = nullptr;
}

const int g_atfork_registered = pthread_atfork(nullptr, nullptr, &on_fork_child);

void *thread_main(void *worker) {
    // The thread is the pool's, not its jobs': a pthread_cancel aimed at it
    // stays pending for ever instead of ending it inside the runtime (a job
    // that enables cancellation and is cancelled stops the process:
    // die_unwound_out_of).
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, nullptr);
    Worker &w = *static_cast<Worker *>(worker);
    w.registry().run_worker(w);
    return nullptr;
}

// pthread_create for worker `index`. The fault-injection tests (tests/fault)
// build the library a second time with BLZ_FAULT_INJECTION to make the OS
// refuse a chosen worker; the shipped library has no such branch.
int create_worker_thread(pthread_t *thread, const pthread_attr_t *attr, Worker *worker, uint32_t index) {
#if defined(BLZ_FAULT_INJECTION)
    // relaxed: the test stores it before calling blz_pool_create on this thread.
    if (fault::g_refuse_thread.load(std::memory_order_relaxed) == int64_t{index}) return EAGAIN;
#else
    (void)index;
#endif
    return pthread_create(thread, attr, &thread_main, worker);
}

// Parses BLZ_NUM_THREADS: a decimal number in 1..BLZ_MAX_THREADS, else 0.
uint32_t num_threads_from_environment() {
    const char *text = std::getenv("BLZ_NUM_THREADS");
    if (text == nullptr || *text == '\0') return 0;
    char *end = nullptr;
    errno = 0;
    unsigned long value = std::strtoul(text, &end, 10);
    if (errno != 0 || *end != '\0' || text[0] == '-' || text[0] == '+') return 0;
    if (value < 1 || value > BLZ_MAX_THREADS) return 0;
    return static_cast<uint32_t>(value);
}

// The CPUs in the process's affinity mask (placement.hpp); 1 if it cannot be read.
uint32_t cpus_in_affinity_mask() {
    const bool fixed = BLZ_FAULT_MUTANT(kFixedCpuMask);  // a cpu_set_t only, never grown
    const uint32_t count = AffinityMask::of_process(fixed ? CPU_SETSIZE : 1024, !fixed).count();
    return count > 0 ? count : 1;
}

// What a thread is to libblitz besides its worker: the task frames it
// works in and its blz_fail count (job.hpp). A thread that is handed a
// run() while it is a worker of another pool (inside one of that pool's
// tasks) is this pool's worker only until run() returns, and then exactly
// what it was before.
struct ThreadRole {
    Worker *worker;
    const TaskFrame *frames;
    uint32_t failures;
    Isolation isolation;  // isolation.hpp: a base in the old worker's deque means nothing in the new one

    static ThreadRole current() { return {t_current_worker, t_task_frames, t_failures, t_isolation}; }
    // The role of `worker`, fresh: outside every task, no failure pending.
    static void become(Worker &worker) {
        set_current_worker(&worker);
        t_task_frames = nullptr;
        t_failures = 0;
        t_isolation = {false, 0};
    }
    void restore() const {
        set_current_worker(worker);
        t_task_frames = frames;
        t_failures = failures;
        t_isolation = isolation;
    }
};

}  // namespace

// Adds one worker's phase times to a snapshot's.
static void add_times(blz_stats &stats, const PhaseTimes &times) {
    stats.run_ns += times.ns[static_cast<uint32_t>(Phase::kRunning)];
    stats.search_ns += times.ns[static_cast<uint32_t>(Phase::kSearching)];
    stats.sleep_ns += times.ns[static_cast<uint32_t>(Phase::kSleeping)];
}

DefaultSize default_size() {
    DefaultSize size;
    size.environment = num_threads_from_environment();
    size.affinity_cpus = cpus_in_affinity_mask();
    size.quota_cpus = cgroup_cpu_limit();
    if (size.environment != 0) {
        size.num_threads = size.environment;
        size.source = BLZ_SIZE_FROM_ENVIRONMENT;
    } else if (size.quota_cpus != 0 && size.quota_cpus < size.affinity_cpus) {
        size.num_threads = size.quota_cpus;
        size.source = BLZ_SIZE_FROM_CPU_QUOTA;
    } else {
        size.num_threads = size.affinity_cpus;
        size.source = BLZ_SIZE_FROM_AFFINITY;
    }
    return size;
}

uint32_t resolve_num_threads(uint32_t requested) { return requested != 0 ? requested : default_size().num_threads; }

Registry::Registry(uint32_t num_threads, const blz_pool_config &config, CpuList &&cpu_list)
    : cpu_list_(std::move(cpu_list)),
      num_threads_(num_threads),
      // Pinned workers can run at once on as many CPUs as their list has.
      cpus_(std::min(num_threads, cpu_list_.empty() ? cpus_in_affinity_mask() : cpu_list_.distinct())),
      fork_generation_(g_fork_generation.load(std::memory_order_relaxed)),
      on_thread_start_(config.on_thread_start),
      on_thread_stop_(config.on_thread_stop),
      hook_user_(config.user),
      cap_(num_threads),
      spawn_thread_(config.spawn_thread),
      spawn_user_(config.spawn_user),
      spare_idle_ms_(config.spare_idle_ms != 0 ? config.spare_idle_ms : kDefaultSpareIdleMs),
      stack_size_(config.stack_size) {
    (void)g_atfork_registered;
    sleep_.observe_wakes(&tracer_);
    const char *prefix = config.thread_name != nullptr ? config.thread_name : "blz";
    std::snprintf(name_prefix_, sizeof(name_prefix_), "%s", prefix);
}

Registry::~Registry() {
    BLZ_FAULT_POINT(kRegistryFreed, this);
    delete[] spare_slots_;
}

blz_status Registry::resolve_max_spares(uint32_t requested, uint32_t num_threads, uint32_t *out) {
    // The default, one spare per worker, keeps the pool at its size when
    // every worker blocks at once, and never exceeds the counters' room.
    if (requested == 0) {
        *out = std::min(num_threads, BLZ_MAX_THREADS - std::min<uint32_t>(num_threads, BLZ_MAX_THREADS));
        return BLZ_OK;
    }
    if (requested == BLZ_NO_SPARES) {
        *out = 0;
        return BLZ_OK;
    }
    // Workers and spares share the sleep counters' 16-bit fields (counters.hpp).
    if (requested > BLZ_MAX_THREADS || num_threads + requested > BLZ_MAX_THREADS) return BLZ_EINVAL;
    *out = requested;
    return BLZ_OK;
}

blz_status Registry::create(const blz_pool_config &config, Registry **out) {
    CpuList cpu_list;
    if (const char *text = cpu_list_text(config.cpu_list)) {
        blz_status parsed = cpu_list.parse(text);
        if (parsed != BLZ_OK) return parsed;
    }
    // A CPU list sets the default size: one worker per entry.
    uint32_t num_threads = config.num_threads == 0 && !cpu_list.empty() ? cpu_list.size()
                                                                        : resolve_num_threads(config.num_threads);
    uint32_t max_spares = 0;
    if (blz_status spares = resolve_max_spares(config.max_spares, num_threads, &max_spares); spares != BLZ_OK) {
        return spares;
    }
    Registry *registry = new (std::nothrow) Registry(num_threads, config, std::move(cpu_list));
    if (registry == nullptr) return BLZ_ENOMEM;
    registry->spares_.set_max_spares(max_spares);
    registry->spare_slots_ = new (std::nothrow) SpareSlot[max_spares]();
    if (registry->spare_slots_ == nullptr || !registry->sleep_.init(num_threads, max_spares) ||
        !registry->allocate_workers()) {
        registry->free_workers();
        delete registry;
        return BLZ_ENOMEM;
    }
    registry->tracer_.start_from_environment();  // before the workers start: the trace has their start-up
    blz_status status = registry->start_workers(config.stack_size);
    if (status != BLZ_OK) {
        // The workers already started stop as in destroy, and the memory
        // goes as in destroy too: a worker's start hook may have waited on
        // another pool, whose latch setter may still hold a pin on this one.
        registry->shut_down();
        (void)registry->tracer_.stop();
        registry->free_workers();
        if (BLZ_FAULT_MUTANT(kCreateFailureDeletes)) {
            delete registry;
        } else {
            registry->mark_destroyed();
        }
        return status;
    }
    *out = registry;
    return BLZ_OK;
}

bool Registry::allocate_workers() {
    // The spares' slots too, made now (a deque and a fork stack, about a
    // kilobyte each): a thief that reads a slot index finds a whole worker
    // whatever the slot's thread does, and a spare's start cannot fail
    // for memory.
    const uint32_t slots = num_threads_ + max_spares();
    void *raw = ::operator new(sizeof(Worker) * slots, std::align_val_t{alignof(Worker)}, std::nothrow);
    if (raw == nullptr) return false;
    workers_ = static_cast<Worker *>(raw);
    for (uint32_t i = 0; i < slots; ++i) new (&workers_[i]) Worker(*this, i);
    uint32_t ready = 0;
    while (ready < slots && workers_[ready].init()) ++ready;
    // relaxed: published to the workers by their thread starts.
    slots_in_use_.store(num_threads_, std::memory_order_relaxed);
    if (ready == slots) return true;
    for (uint32_t i = 0; i < slots; ++i) workers_[i].~Worker();
    ::operator delete(workers_, std::align_val_t{alignof(Worker)});
    workers_ = nullptr;
    return false;
}

void Registry::free_workers() {
    if (workers_ == nullptr) return;
    for (uint32_t i = 0; i < num_threads_ + max_spares(); ++i) workers_[i].~Worker();
    ::operator delete(workers_, std::align_val_t{alignof(Worker)});
    workers_ = nullptr;
}

blz_status Registry::start_workers(size_t stack_size) {
    if (spawn_thread_ != nullptr) return hand_out_workers();
    pthread_attr_t attr;
    if (pthread_attr_init(&attr) != 0) return BLZ_ENOMEM;
    blz_status status = BLZ_OK;
    if (stack_size != 0 && pthread_attr_setstacksize(&attr, stack_size) != 0) status = BLZ_EINVAL;
    // Unpinned workers run on the process's CPUs, not the creating
    // thread's (a worker of a pinned pool, say). Without the memory to read
    // the mask they inherit the creator's.
    if (cpu_list_.empty()) (void)AffinityMask::of_process().apply(attr);
    for (uint32_t i = 0; status == BLZ_OK && i < num_threads_; ++i) {
        if (!cpu_list_.pin(attr, i)) {
            status = BLZ_ETHREAD;  // the CPU was checked against the mask: the platform refused
        } else if (create_worker_thread(&workers_[i].thread(), &attr, &workers_[i], i) != 0) {
            status = BLZ_ETHREAD;
        } else {
            started_ = i + 1;
        }
    }
    pthread_attr_destroy(&attr);
    return status;
}

// The embedder's threads: each spawn_thread call hands out worker i's
// run(). The count goes up before the call, so that a destroy (or this
// create's failure) waits for every run() that may still come.
blz_status Registry::hand_out_workers() {
    for (uint32_t i = 0; i < num_threads_; ++i) {
        // relaxed: read by the run()s and the destroyer only after the
        // handoff, which the embedder's thread start orders (and the
        // destroyer is this thread, or one that got the pool from it).
        adopted_running_.fetch_add(1, std::memory_order_relaxed);
        if (!call_spawn_thread(i)) {
            adopted_running_.fetch_sub(1, std::memory_order_relaxed);  // relaxed: as above, nothing was handed out
            return BLZ_ETHREAD;
        }
        started_ = i + 1;
    }
    return BLZ_OK;
}

bool Registry::call_spawn_thread(uint32_t index) {
    try {
        return spawn_thread_(spawn_user_, index, &Registry::run_adopted, &workers_[index]) == 0;
    } catch (...) {
        stop_unless_cxx_exception("a spawn_thread callback");
        return false;  // a C++ exception: no thread was started, as a refusal
    }
}

void Registry::run_adopted(void *worker) {
    Worker &w = *static_cast<Worker *>(worker);
    Registry &registry = w.registry();
    int cancel_state = PTHREAD_CANCEL_ENABLE;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel_state);  // as on libblitz's own threads
    // The pin is this pool's: the thread's own mask comes back when run()
    // returns. A mask that cannot be saved (no memory) is not changed:
    // unpinned, as for a pin the platform refuses (blitz.h).
    std::optional<AffinityMask> own_mask;
    if (!registry.cpu_list_.empty()) own_mask.emplace(1024, true);
    const bool pin = own_mask && own_mask->loaded();
    if (pin) (void)registry.cpu_list_.pin_calling_thread(w.index());
    registry.run_worker(w);
    if (pin) (void)own_mask->apply_to_calling_thread();
    pthread_setcancelstate(cancel_state, nullptr);
    // The registry lives until the destroyer's latch is set, which only the
    // last run() to return does: the others touch nothing after their
    // decrement. acq_rel: the last one's set() comes after every other
    // run()'s work on the pool.
    if (registry.adopted_running_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        // acquire: pairs with the release store that published the latch
        // before the workers were told to stop (shut_down).
        registry.adopted_returned_.load(std::memory_order_acquire)->set();
    }
}

void Registry::name_thread(uint32_t index) {
    // "<prefix>-<index>" (a spare: "<prefix>-s<index>") in 15 bytes: the prefix gives way to the index.
    char suffix[16];
    const char *format = is_spare_index(index) ? "-s%u" : "-%u";
    size_t suffix_len = static_cast<size_t>(std::snprintf(suffix, sizeof(suffix), format, index));
    size_t prefix_len = std::min(std::strlen(name_prefix_), 15 - suffix_len);
    char name[16];
    std::memcpy(name, name_prefix_, prefix_len);
    std::memcpy(name + prefix_len, suffix, suffix_len + 1);
    pthread_setname_np(pthread_self(), name);
}

void Registry::run_worker(Worker &worker) {
    const ThreadRole before = ThreadRole::current();  // null on libblitz's own threads
    ThreadRole::become(worker);
    if (spawn_thread_ == nullptr) name_thread(worker.index());  // the embedder names the threads it starts
    const bool spare = is_spare_index(worker.index());
    for (;;) {
        // The hooks run as this worker (fork-join from a hook works), but not
        // inside accepted work: what they spawn is refused once destroy drained.
        if (on_thread_start_ != nullptr) run_user_hook(on_thread_start_, worker.index());
        if (spare) {
            worker.spare_loop();
        } else {
            worker.main_loop();
        }
        if (on_thread_stop_ != nullptr) run_user_hook(on_thread_stop_, worker.index());
        // Before the slot may pass to another thread [B4], and before the
        // pool, which frees its recycler after joining this thread, goes.
        worker.settle();
        // [B4] A retired spare whose slot is needed again runs as a new
        // spare on this thread; else the slot may get a new thread from
        // here on, and this one reads nothing of it any more (restore()
        // touches this thread's own state only).
        if (!spare || !spare_exited(worker)) break;
        ThreadRole::become(worker);  // a fresh spare: outside every task, no failure pending
    }
    before.restore();
}

void Registry::run_user_hook(blz_thread_fn hook, uint32_t index) {
    try {
        hook(hook_user_, index);
    } catch (...) {
        stop_unless_cxx_exception("an on_thread_start or on_thread_stop hook");
        // A hook has nobody to report to; the documented rule is to ignore it.
    }
}

bool Registry::is_own(const Worker *worker) const { return worker != nullptr && &worker->registry() == this; }

blz_status Registry::enter(uint64_t units) { return enter(units, is_own(Worker::current())); }

blz_status Registry::enter(uint64_t units, bool own_worker) {
    blz_status status = admission_.enter(own_worker, units);
    BLZ_FAULT_POINT(kEntered, this);
    return status;
}

void Registry::leave(uint64_t units) {
    if (admission_.leave(units)) drained_->set();  // [A1] exactly once
}

blz_status Registry::acquire_ref() { return admission_.acquire_ref(is_own(Worker::current())); }

void Registry::release_ref() {
    if (admission_.release_ref()) free_memory();
}

void Registry::mark_destroyed() {
    if (admission_.mark_destroyed()) free_memory();
}

void Registry::free_memory() {
    delete this;  // the sleep states, the injector and the recycler with it
}

void Registry::submit(QueuedJob *job) {
    Worker *worker = Worker::current();
    if (worker != nullptr && &worker->registry() == this && worker->push_public(job)) return;
    inject(job);  // other threads, other pools' workers, or a deque that could not grow
}

void Registry::inject(QueuedJob *job) {
    inject_shared(injector_, sleep_, job, [this] { BLZ_FAULT_POINT(kInjectedBeforePost, this); });
}

void Registry::inject_urgent(QueuedJob *job) {
    // A shared job like any injected one (the same post and fence); the
    // sleepers' final check looks at both injectors.
    inject_shared(urgent_injector_, sleep_, job, [] {});
}

void Registry::set_max_active(uint32_t n) {
    cap_.set(n);
    unpark_all();
}

void Registry::unpark_all() {
    // Slots beyond slots_in_use() never had a thread; a spare slot whose
    // thread ended has parked_ 0, so its unpark makes no system call.
    const uint32_t slots = slots_in_use();
    for (uint32_t i = 0; i < slots; ++i) workers_[i].unpark();
}

bool Registry::has_shared_jobs() const {
    return shared_jobs_wait<StdSync>([this] { return urgent_injector_.has_jobs() || injector_.has_jobs(); },
                                     slots_in_use(), [this](uint32_t i) { return workers_[i].offers_tasks(); });
}

bool Registry::block_begin(Worker &worker) {
    if (!worker.holds_slot()) return false;  // a hook, or mail run while held back by the cap
    worker.give_slot_back();
    cap_.leave();  // [C5]
    SpareClaim claim;
    {
        std::lock_guard<StdSync::mutex> lock(spare_lock());
        // [B1] Stand-ins: one spare alive per blocked thread, up to the bound.
        if (spares_.count_blocked() && !spares_closed_) claim = claim_spare_slot();
    }
    // A thread the cap held back (a parked spare among them) may run in our
    // place at once: the unparking re-checks after cap_.leave() above.
    unpark_all();
    if (claim.index != UINT32_MAX) start_spare(claim);
    return true;
}

void Registry::block_end(Worker &worker) {
    {
        std::lock_guard<StdSync::mutex> lock(spare_lock());
        spares_.uncount_blocked();  // [B2]
    }
    // [C5] Rejoin at once, over the cap if need be; the next thread to
    // reach a job boundary while engaged > cap sits out.
    cap_.rejoin();
    worker.take_slot();
}

Registry::SpareClaim Registry::claim_spare_slot() {
    // Under spare_lock(). kRetiring slots still run their thread: skipped.
    for (uint32_t k = 0; k < max_spares(); ++k) {
        const SpareSlot state = spare_slots_[k];
        if (state != SpareSlot::kEmpty && state != SpareSlot::kExited) continue;
        SpareClaim claim;
        claim.index = num_threads_ + k;
        claim.join_first = state == SpareSlot::kExited && spawn_thread_ == nullptr;
        spare_slots_[k] = SpareSlot::kLive;
        spares_.add_live();
        return claim;
    }
    return {};
}

void Registry::start_spare(SpareClaim claim) {
    // The slot is ours (kLive, no thread yet): nobody else touches it.
    Worker &spare = workers_[claim.index];
    if (claim.join_first) {
        int cancel_state = PTHREAD_CANCEL_ENABLE;
        pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel_state);  // no libblitz call is a cancellation point
        pthread_join(spare.thread(), nullptr);
        pthread_setcancelstate(cancel_state, nullptr);
    }
    spare.prepare_spare_run();
    // Scans (steals, the sleepers' final check, unparking) reach the slot
    // from here. release: pairs with slots_in_use()'s acquire, so a scan
    // that sees the slot sees the reset above. A max, not a store: another
    // block_begin may have published a higher slot meanwhile.
    uint32_t seen = slots_in_use_.load(std::memory_order_relaxed);
    while (seen <= claim.index && !slots_in_use_.compare_exchange_weak(seen, claim.index + 1, std::memory_order_release,
                                                                       std::memory_order_relaxed)) {
    }
    const bool ok = start_spare_thread(claim.index);
    std::lock_guard<StdSync::mutex> lock(spare_lock());
    if (!ok) {
        // No stand-in this time: the slot is free again (a block_begin
        // retries). relaxed: under the lock, as every change of the counts.
        spare_slots_[claim.index - num_threads_] = SpareSlot::kEmpty;
        spares_.remove_live();
        return;
    }
    // relaxed: statistics, changed under the lock.
    spares_started_.store(spares_started_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    const uint32_t live = spares_.live();
    if (live > spares_peak_.load(std::memory_order_relaxed)) spares_peak_.store(live, std::memory_order_relaxed);
}

bool Registry::start_spare_thread(uint32_t index) {
    Worker &spare = workers_[index];
    if (spawn_thread_ != nullptr) {
        // Counted before the call, as in hand_out_workers: a destroy waits
        // for this run() too. relaxed: as there.
        adopted_running_.fetch_add(1, std::memory_order_relaxed);
        if (call_spawn_thread(index)) return true;
        adopted_running_.fetch_sub(1, std::memory_order_relaxed);
        return false;
    }
    pthread_attr_t attr;
    if (pthread_attr_init(&attr) != 0) return false;
    bool ok = stack_size_ == 0 || pthread_attr_setstacksize(&attr, stack_size_) == 0;
    if (cpu_list_.empty()) (void)AffinityMask::of_process().apply(attr);  // as start_workers
    ok = ok && cpu_list_.pin(attr, index) && create_worker_thread(&spare.thread(), &attr, &spare, index) == 0;
    pthread_attr_destroy(&attr);
    return ok;
}

bool Registry::retire_spare(Worker &spare, bool engaged) {
    // The mutant decides on counts read before the lock: a block_begin in
    // between counts on this spare as its stand-in, and loses it.
    const bool stale_choice = spares_.stale_retire_choice();
    BLZ_FAULT_POINT(kSpareRetiring, this);
    {
        std::lock_guard<StdSync::mutex> lock(spare_lock());
        // [B3] Only a spare beyond the blocked threads retires: the others
        // stand in for them. Under the lock, which block_begin holds while
        // it counts a blocked thread and decides whether to start a spare:
        // either it counted this spare (and we stay), or it sees it gone.
        bool beyond = spares_.may_retire(stale_choice);
        if (BLZ_FAULT_MUTANT(kSpareRetiresOnStaleCount)) beyond = stale_choice;
        if (spares_closed_ || !beyond) return false;
        if (engaged) {
            // An engaged spare may have been counted on for a shared job (a
            // poster saw it awake and woke nobody): the store-buffering
            // pair with the poster's fence (sleep.hpp), as before parking.
            StdSync::full_fence();
            if (has_shared_jobs()) return false;
        }
        spares_.remove_live();
        spares_retired_.store(spares_retired_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
        spare_slots_[spare.index() - num_threads_] = SpareSlot::kRetiring;
    }
    if (engaged) cap_.leave();  // [C5]
    // A thread the cap held back may take the slot now.
    unpark_all();
    return true;
}

bool Registry::spare_exited(Worker &spare) {
    BLZ_FAULT_POINT(kSpareExiting, this);
    std::lock_guard<StdSync::mutex> lock(spare_lock());
    SpareSlot &slot = spare_slots_[spare.index() - num_threads_];
    if (slot == SpareSlot::kLive) {
        // A spare ended by destroy was never kRetiring: it goes from kLive.
        spares_.remove_live();
    } else if (!spares_closed_ && spares_.needs_stand_in() && !BLZ_FAULT_MUTANT(kSpareExitIgnoresBlocked)) {
        // [B4] A block_begin since this spare retired found its slot still
        // kRetiring and started no stand-in (the bound was reached): this
        // thread is that stand-in. Under the lock, which block_begin holds
        // to count itself: either it saw the slot free, or we see it here.
        slot = SpareSlot::kLive;
        const uint32_t live = spares_.add_live();
        // relaxed: statistics, changed under the lock.
        spares_started_.store(spares_started_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
        if (live > spares_peak_.load(std::memory_order_relaxed)) spares_peak_.store(live, std::memory_order_relaxed);
        spare.prepare_spare_run();
        return true;
    }
    // An embedder's run() needs no join: its slot is free at once.
    slot = spawn_thread_ != nullptr ? SpareSlot::kEmpty : SpareSlot::kExited;
    return false;
}

void Registry::stop_spares() {
    // After the drain: no job runs, so no block_begin starts a spare; the
    // lock makes it so for good, and names the threads to end.
    std::vector<uint32_t> to_join;
    {
        std::lock_guard<StdSync::mutex> lock(spare_lock());
        spares_closed_ = true;
        for (uint32_t k = 0; k < max_spares(); ++k) {
            if (spare_slots_[k] != SpareSlot::kEmpty) to_join.push_back(num_threads_ + k);
        }
    }
    for (uint32_t index : to_join) workers_[index].terminate();  // harmless on a thread that retired
    if (spawn_thread_ != nullptr) return;  // their run()s count in adopted_running_
    int cancel_state = PTHREAD_CANCEL_ENABLE;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel_state);
    for (uint32_t index : to_join) pthread_join(workers_[index].thread(), nullptr);
    pthread_setcancelstate(cancel_state, nullptr);
}

void Registry::shut_down() {
    // [C4] No cap from here on: the accepted work drains on every worker
    // (a parked worker checks the cap again when unparked).
    cap_.lift_for_good();
    unpark_all();
    Parker parker;
    Latch drained(Latch::current_thread(&parker));
    drained_ = &drained;
    if (admission_.close() != 0) {
        BLZ_FAULT_POINT(kDestroyWaitsForWork, this);
        drained.wait();
    }
    Parker adopted_parker;  // a second one: a Parker's token serves one wait
    Latch adopted_returned(Latch::current_thread(&adopted_parker));
    // release: a run() that returns last reads it (run_adopted); stored
    // before any worker is told to stop, so before any run() can return.
    adopted_returned_.store(&adopted_returned, std::memory_order_release);
    // [A2] every queue is empty: stop the spares, then the workers.
    stop_spares();
    for (uint32_t i = 0; i < started_; ++i) workers_[i].terminate();
    wait_for_threads(adopted_returned);
    started_ = 0;
}

void Registry::wait_for_threads(Latch &adopted_returned) {
    if (spawn_thread_ != nullptr) {
        // Every handed-out run() returns, and the last one sets the latch:
        // wait for it even if the count reads 0 already, since that run()
        // may still be about to set it (the latch is on this stack).
        if (started_ > 0) adopted_returned.wait();
        return;
    }
    // pthread_join is a cancellation point; a destroy cancelled there would
    // leave the pool half taken down. No libblitz call is one (blitz.h).
    int cancel_state = PTHREAD_CANCEL_ENABLE;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel_state);
    for (uint32_t i = 0; i < started_; ++i) pthread_join(workers_[i].thread(), nullptr);
    pthread_setcancelstate(cancel_state, nullptr);
}

blz_status Registry::destroy() {
    if (forked()) {
        destroy_in_forked_child();
        return BLZ_EFORK;
    }
    Worker *worker = Worker::current();
    if (worker != nullptr && &worker->registry() == this) return BLZ_EDEADLK;
    shut_down();
    (void)tracer_.stop();  // the trace of BLZ_TRACE, or one left running: written now that the workers are joined
    // The deques go now; the sleep states stay with the struct, for a latch
    // setter that pinned it and has yet to make its wake-up call.
    free_workers();
    mark_destroyed();
    return BLZ_OK;
}

void Registry::destroy_in_forked_child() {
    // No worker thread exists here, and their locks may be held by threads
    // that were not copied: free memory, touch no lock, join nothing. The
    // parent's accepted work never finishes here, so its count is dropped.
    sleep_.abandon();
    tracer_.abandon();
    free_workers();
    admission_.drop_active_work();
    mark_destroyed();
}

void Registry::fill_stats(blz_stats &stats) const {
    Sleep<>::Stats sleep_stats = sleep_.stats();
    stats.num_threads = num_threads_;
    stats.sleeping_now = stats.inactive_now = 0;
    stats.jobs_executed = 0;
    stats.steals = 0;
    stats.run_ns = stats.search_ns = stats.sleep_ns = 0;
    // Jobs and steals of the spares too; phases and "now" counts are the workers' (blitz.h).
    const uint32_t slots = slots_in_use();
    for (uint32_t i = num_threads_; i < slots; ++i) {
        stats.jobs_executed += workers_[i].jobs_executed();
        stats.steals += workers_[i].steals();
    }
    fill_spare_stats(stats);
    for (uint32_t i = 0; i < num_threads_; ++i) {
        stats.jobs_executed += workers_[i].jobs_executed();
        stats.steals += workers_[i].steals();
        // Each worker's phase, read with its times: counted once each,
        // whether it sleeps in the protocol or sits out the cap, so the
        // counts never exceed the pool (the sleep counters and the parked
        // flags, read at different moments, could count a worker twice).
        const PhaseTimes times = workers_[i].phase_times();
        add_times(stats, times);
        stats.sleeping_now += times.current == Phase::kSleeping ? 1 : 0;
        stats.inactive_now += times.current != Phase::kRunning ? 1 : 0;
    }
    stats.jobs_injected = injector_.pushed() + urgent_injector_.pushed();
    stats.sleeps = sleep_stats.sleeps;
    stats.wakeups = sleep_stats.wakeups;
    stats.spurious_wakeups = sleep_stats.spurious_wakeups;
    stats.sleep_aborts = sleep_stats.sleep_aborts;
    stats.tasks_failed = tasks_failed_.load(std::memory_order_relaxed);
}

void Registry::fill_spare_stats(blz_stats &stats) const {
    // Under the lock: the counts change together (a retirement lowers
    // spares_now and raises spares_retired), and a snapshot shows both or
    // neither. Nobody calls out of the library while holding it.
    std::lock_guard<StdSync::mutex> lock(spare_lock());
    // relaxed: under the lock.
    stats.spares_now = spares_.live();
    stats.blocked_now = spares_.blocked();
    stats.max_spares = max_spares();
    stats.spares_peak = spares_peak_.load(std::memory_order_relaxed);
    stats.spares_started = spares_started_.load(std::memory_order_relaxed);
    stats.spares_retired = spares_retired_.load(std::memory_order_relaxed);
}

void Registry::fill_worker_stats(uint32_t index, blz_stats &stats) const {
    const Worker &worker = workers_[index];
    const Sleep<>::Stats sleep_stats = sleep_.stats_of(index);
    const PhaseTimes times = worker.phase_times();
    stats.num_threads = 1;
    stats.sleeping_now = times.current == Phase::kSleeping ? 1 : 0;
    stats.inactive_now = times.current != Phase::kRunning ? 1 : 0;
    stats.jobs_executed = worker.jobs_executed();
    stats.steals = worker.steals();
    stats.sleeps = sleep_stats.sleeps;
    stats.wakeups = sleep_stats.wakeups;
    stats.spurious_wakeups = sleep_stats.spurious_wakeups;
    stats.sleep_aborts = sleep_stats.sleep_aborts;
    add_times(stats, times);
}

}  // namespace blz
