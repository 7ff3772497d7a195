#include "registry.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <sched.h>

#include "fault.hpp"
#include "task.hpp"
#include "worker.hpp"

namespace blz {

std::atomic<uint64_t> g_fork_generation{0};

namespace {

// In the child after fork(): the parent's pools are dead here, and the
// forking thread is nobody's worker any more.
void on_fork_child() {
    g_fork_generation.fetch_add(1, std::memory_order_relaxed);  // relaxed: the child is single-threaded now
    t_current_worker = nullptr;
    t_task_frames = nullptr;
}

const int g_atfork_registered = pthread_atfork(nullptr, nullptr, &on_fork_child);

void *thread_main(void *worker) {
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

uint32_t cpus_in_affinity_mask() {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) != 0) return 1;
    int count = CPU_COUNT(&set);
    return count > 0 ? static_cast<uint32_t>(count) : 1;
}

uint64_t active_of(uint64_t state) { return state & (((uint64_t{1} << 31) - 1) << 2); }

}  // namespace

uint32_t resolve_num_threads(uint32_t requested) {
    if (requested != 0) return requested;
    uint32_t from_env = num_threads_from_environment();
    return from_env != 0 ? from_env : cpus_in_affinity_mask();
}

Registry::Registry(uint32_t num_threads, const blz_pool_config &config)
    : num_threads_(num_threads),
      cpus_(std::min(num_threads, cpus_in_affinity_mask())),
      fork_generation_(g_fork_generation.load(std::memory_order_relaxed)),
      on_thread_start_(config.on_thread_start),
      on_thread_stop_(config.on_thread_stop),
      hook_user_(config.user) {
    (void)g_atfork_registered;
    const char *prefix = config.thread_name != nullptr ? config.thread_name : "blz";
    std::snprintf(name_prefix_, sizeof(name_prefix_), "%s", prefix);
}

Registry::~Registry() { BLZ_FAULT_POINT(kRegistryFreed, this); }

blz_status Registry::create(const blz_pool_config &config, Registry **out) {
    uint32_t num_threads = resolve_num_threads(config.num_threads);
    Registry *registry = new (std::nothrow) Registry(num_threads, config);
    if (registry == nullptr) return BLZ_ENOMEM;
    if (!registry->sleep_.init(num_threads) || !registry->allocate_workers()) {
        registry->free_workers();
        delete registry;
        return BLZ_ENOMEM;
    }
    blz_status status = registry->start_workers(config.stack_size);
    if (status != BLZ_OK) {
        registry->shut_down();  // the workers already started stop as in destroy
        registry->free_workers();
        delete registry;
        return status;
    }
    *out = registry;
    return BLZ_OK;
}

bool Registry::allocate_workers() {
    void *raw = ::operator new(sizeof(Worker) * num_threads_, std::align_val_t{alignof(Worker)}, std::nothrow);
    if (raw == nullptr) return false;
    workers_ = static_cast<Worker *>(raw);
    uint32_t built = 0;
    for (; built < num_threads_; ++built) {
        new (&workers_[built]) Worker(*this, built);
        if (!workers_[built].init()) break;
    }
    if (built == num_threads_) return true;
    for (uint32_t i = 0; i <= built; ++i) workers_[i].~Worker();
    ::operator delete(workers_, std::align_val_t{alignof(Worker)});
    workers_ = nullptr;
    return false;
}

void Registry::free_workers() {
    if (workers_ == nullptr) return;
    for (uint32_t i = 0; i < num_threads_; ++i) workers_[i].~Worker();
    ::operator delete(workers_, std::align_val_t{alignof(Worker)});
    workers_ = nullptr;
}

blz_status Registry::start_workers(size_t stack_size) {
    pthread_attr_t attr;
    if (pthread_attr_init(&attr) != 0) return BLZ_ENOMEM;
    blz_status status = BLZ_OK;
    if (stack_size != 0 && pthread_attr_setstacksize(&attr, stack_size) != 0) status = BLZ_EINVAL;
    for (uint32_t i = 0; status == BLZ_OK && i < num_threads_; ++i) {
        if (create_worker_thread(&workers_[i].thread(), &attr, &workers_[i], i) != 0) {
            status = BLZ_ETHREAD;
        } else {
            started_ = i + 1;
        }
    }
    pthread_attr_destroy(&attr);
    return status;
}

void Registry::run_worker(Worker &worker) {
    t_current_worker = &worker;
    // "<prefix>-<index>" in 15 bytes: the prefix gives way to the index.
    char suffix[16];
    size_t suffix_len = static_cast<size_t>(std::snprintf(suffix, sizeof(suffix), "-%u", worker.index()));
    size_t prefix_len = std::min(std::strlen(name_prefix_), 15 - suffix_len);
    char name[16];
    std::memcpy(name, name_prefix_, prefix_len);
    std::memcpy(name + prefix_len, suffix, suffix_len + 1);
    pthread_setname_np(pthread_self(), name);
    // The hooks run as this worker (fork-join from a hook works), but not
    // inside accepted work: what they spawn is refused once destroy drained.
    if (on_thread_start_ != nullptr) run_user_hook(on_thread_start_, worker.index());
    worker.main_loop();
    if (on_thread_stop_ != nullptr) run_user_hook(on_thread_stop_, worker.index());
    t_current_worker = nullptr;
}

void Registry::run_user_hook(blz_thread_fn hook, uint32_t index) {
    try {
        hook(hook_user_, index);
    } catch (abi::__forced_unwind &) {
        throw;
    } catch (...) {
        // A hook has nobody to report to; the documented rule is to ignore it.
    }
}

blz_status Registry::enter() {
    Worker *worker = Worker::current();
    const bool own_worker = worker != nullptr && &worker->registry() == this;
    // relaxed: only the count matters here. The accepted job is published
    // by the queue it goes into; leave() carries the release to the destroyer.
    uint64_t state = state_.load(std::memory_order_relaxed);
    for (;;) {
        blz_status refusal = BLZ_OK;
        if (state & kClosed) {
            // [A1] a worker still inside counted work may add to it.
            if (!own_worker || active_of(state) == 0) refusal = BLZ_ESHUTDOWN;
        }
        if (refusal == BLZ_OK && active_of(state) == kActiveMask) refusal = BLZ_ENOMEM;
        if (refusal != BLZ_OK || state_.compare_exchange_weak(state, state + kOneActive, std::memory_order_relaxed,
                                                              std::memory_order_relaxed)) {
            BLZ_FAULT_POINT(kEntered, this);
            return refusal;
        }
    }
}

void Registry::leave() {
    // acq_rel: release hands the work's effects to the destroyer; acquire
    // makes drained_ (written before CLOSED) visible to the last leaver.
    uint64_t state = state_.fetch_sub(kOneActive, std::memory_order_acq_rel) - kOneActive;
    if ((state & (kClosed | kActiveMask)) == kClosed) drained_->set();  // [A1] exactly once
}

blz_status Registry::acquire_ref() {
    uint64_t state = state_.load(std::memory_order_relaxed);  // relaxed: a count, as in enter()
    for (;;) {
        if (state & kClosed) return BLZ_ESHUTDOWN;
        if ((state >> 33) == (uint64_t{1} << 31) - 1) return BLZ_ENOMEM;
        if (state_.compare_exchange_weak(state, state + kOneRef, std::memory_order_relaxed,
                                         std::memory_order_relaxed)) {
            return BLZ_OK;
        }
    }
}

void Registry::release_ref() {
    // acq_rel: whoever frees sees every other user's last access. [A3]
    uint64_t state = state_.fetch_sub(kOneRef, std::memory_order_acq_rel) - kOneRef;
    if (state == (kClosed | kDestroyed)) delete this;
}

void Registry::mark_destroyed() {
    // acq_rel: as in release_ref. [A3]
    uint64_t state = state_.fetch_or(kClosed | kDestroyed, std::memory_order_acq_rel);
    if ((state >> 33) == 0) delete this;
}

void Registry::submit(QueuedJob *job) {
    Worker *worker = Worker::current();
    if (worker != nullptr && &worker->registry() == this && worker->push_public(job)) return;
    inject(job);  // other threads, other pools' workers, or a deque that could not grow
}

void Registry::inject(QueuedJob *job) {
    bool was_empty = injector_.push(job);
    BLZ_FAULT_POINT(kInjectedBeforePost, this);
    sleep_.new_injected_jobs(1, was_empty);
}

void Registry::shut_down() {
    Parker parker;
    Latch drained(Latch::current_thread(&parker));
    drained_ = &drained;
    // acq_rel: release publishes drained_ to the last leaver; acquire sees
    // the work of everyone who left before.
    uint64_t state = state_.fetch_or(kClosed, std::memory_order_acq_rel);
    if (active_of(state) != 0) {
        BLZ_FAULT_POINT(kDestroyWaitsForWork, this);
        drained.wait();
    }
    // [A2] every queue is empty: stop the workers.
    for (uint32_t i = 0; i < started_; ++i) workers_[i].terminate_latch().set();
    for (uint32_t i = 0; i < started_; ++i) pthread_join(workers_[i].thread(), nullptr);
    started_ = 0;
}

blz_status Registry::destroy() {
    if (forked()) {
        destroy_in_forked_child();
        return BLZ_EFORK;
    }
    Worker *worker = Worker::current();
    if (worker != nullptr && &worker->registry() == this) return BLZ_EDEADLK;
    shut_down();
    free_workers();
    sleep_.release();
    mark_destroyed();
    return BLZ_OK;
}

void Registry::destroy_in_forked_child() {
    // No worker thread exists here, and their locks may be held by threads
    // that were not copied: free memory, touch no lock, join nothing. The
    // parent's accepted work never finishes here, so its count is dropped.
    sleep_.abandon();
    free_workers();
    uint64_t state = state_.load(std::memory_order_relaxed);
    while (!state_.compare_exchange_weak(state, state & ~kActiveMask, std::memory_order_relaxed,
                                         std::memory_order_relaxed)) {
    }
    mark_destroyed();
}

void Registry::fill_stats(blz_stats &stats) const {
    Counters counters = sleep_.counters();
    Sleep<>::Stats sleep_stats = sleep_.stats();
    stats.num_threads = num_threads_;
    stats.sleeping_now = counters.sleeping();
    stats.inactive_now = counters.inactive();
    stats.jobs_executed = 0;
    stats.steals = 0;
    for (uint32_t i = 0; i < num_threads_; ++i) {
        stats.jobs_executed += workers_[i].jobs_executed();
        stats.steals += workers_[i].steals();
    }
    stats.jobs_injected = injector_.pushed();
    stats.sleeps = sleep_stats.sleeps;
    stats.wakeups = sleep_stats.wakeups;
    stats.spurious_wakeups = sleep_stats.spurious_wakeups;
    stats.sleep_aborts = sleep_stats.sleep_aborts;
    stats.tasks_failed = tasks_failed_.load(std::memory_order_relaxed);
}

}  // namespace blz
