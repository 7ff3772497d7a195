// The C boundary: handle conversion, argument checks and status codes.
// Nothing below this file knows about the C types' error conventions, and
// no C++ exception crosses it (user code runs inside run_guarded).
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <new>
#include <pthread.h>

#include "blitz.h"
#include "broadcast.hpp"
#include "deadline.hpp"
#include "event.hpp"
#include "group.hpp"
#include "placement.hpp"
#include "registry.hpp"
#include "task.hpp"
#include "worker.hpp"

using blz::Event;
using blz::Group;
using blz::Registry;
using blz::SpawnedJob;
using blz::Worker;

namespace {

// The size of blz_pool_config in version 0.1: the smallest struct_size accepted.
constexpr uint32_t kConfigSizeV01 = offsetof(blz_pool_config, user) + sizeof(void *);
// With 0.2's cpu_list, spawn_thread and spawn_user: a caller whose struct_size
// is smaller gets no pinning and libblitz's own threads.
constexpr uint32_t kConfigSizeV02 = offsetof(blz_pool_config, spawn_user) + sizeof(void *);
// With 0.3's max_spares and spare_idle_ms (blocking sections).
constexpr uint32_t kConfigSizeV03 = offsetof(blz_pool_config, spare_idle_ms) + sizeof(uint32_t);
static_assert(kConfigSizeV03 == sizeof(blz_pool_config), "0.3 is the current layout");
// The size of blz_spawn_options in version 0.2, where it appeared.
constexpr uint32_t kSpawnOptionsSizeV02 = offsetof(blz_spawn_options, done_arg) + sizeof(void *);
// With 0.3's predecessors: a caller whose struct_size is smaller names none.
constexpr uint32_t kSpawnOptionsSizeV03 = offsetof(blz_spawn_options, num_after_groups) + sizeof(size_t);
// The flags each version knows; any other bit is refused.
constexpr uint32_t kKnownSpawnFlags = BLZ_SPAWN_HIGH_PRIORITY | BLZ_SPAWN_DONE_AFTER_FINISH |
                                      BLZ_SPAWN_CANCEL_ON_FAILURE | BLZ_SPAWN_AFTER_ANY_END;
static_assert((kKnownSpawnFlags & SpawnedJob::kSpawnedAfterPredecessors) == 0, "the task's own mark is no BLZ_SPAWN_ flag");
constexpr uint32_t kKnownGroupFlags = BLZ_GROUP_CANCEL_ON_FAILURE;

Registry *registry_of(blz_pool *pool) { return reinterpret_cast<Registry *>(pool); }
const Registry *registry_of(const blz_pool *pool) { return reinterpret_cast<const Registry *>(pool); }
Group *group_of(blz_group *group) { return reinterpret_cast<Group *>(group); }
Event *event_of(blz_event *event) { return reinterpret_cast<Event *>(event); }

// The calling worker if it belongs to `registry`, else nullptr.
Worker *own_worker(const Registry *registry) {
    Worker *worker = Worker::current();
    return worker != nullptr && &worker->registry() == registry ? worker : nullptr;
}

// Checks shared by every call that submits work to a pool.
blz_status check_pool(const Registry *registry) {
    if (registry == nullptr) return BLZ_EINVAL;
    if (registry->forked()) return BLZ_EFORK;
    return BLZ_OK;
}

// blitz.h: no libblitz function is a cancellation point. A call that may
// reach one runs with cancellation disabled, and puts the caller's state
// back before it returns: a cancellation requested meanwhile acts at the
// caller's next cancellation point. Those calls are the ones that may
// join a thread or write a file: blz_pool_create (a failed create joins
// the workers it started; BLZ_TRACE opens a file), blz_pool_destroy and
// blz_pool_release (pthread_join, and the trace file), and the trace's
// start and stop (stdio). Every other call blocks only on futexes through
// syscall(2), and locks mutexes, neither of which is a cancellation point:
// they skip the guard (two atomic read-modify-writes, about 17-20 ns here,
// a tenth of a spawn from outside). Workers run with cancellation disabled
// (thread_main, run_adopted) and skip it too. The lifetime row
// "cancellation pending in calls" makes each kind of call with a
// cancellation pending.
template <class F>
blz_status without_cancellation(F &&f) {
    if (Worker::current() != nullptr) return f();
    int state = PTHREAD_CANCEL_ENABLE;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &state);
    const blz_status status = f();
    pthread_setcancelstate(state, nullptr);
    return status;
}

// The chaos build pauses with nanosleep, a cancellation point, at every
// step of the core classes: there every call that touches a pool takes the
// guard. Elsewhere this is just the call.
template <class F>
blz_status without_chaos_cancellation(F &&f) {
#if defined(BLZ_CHAOS)
    return without_cancellation(f);
#else
    return f();
#endif
}

// Runs f(registry) as an admitted call: the pool's workers, which the
// tracer touches, stay until it left.
template <class F>
blz_status admitted(blz_pool *pool, F f) {
    Registry *registry = registry_of(pool);
    blz_status status = check_pool(registry);
    if (status != BLZ_OK) return status;
    status = registry->enter();
    if (status != BLZ_OK) return status;
    status = f(*registry);
    registry->leave();
    return status;
}

// The fields of blz_stats that fit in `size` bytes, rounded down to a field boundary.
size_t stats_prefix(uint32_t size) {
    const size_t head = offsetof(blz_stats, jobs_executed);  // four uint32_t fields
    if (size >= sizeof(blz_stats)) return sizeof(blz_stats);
    if (size < head) return size / sizeof(uint32_t) * sizeof(uint32_t);
    return head + (size - head) / sizeof(uint64_t) * sizeof(uint64_t);
}

// blz_pool_stats and blz_worker_stats: checks, admission, and the prefix
// of the snapshot that fits the caller's struct. `fill` returns a status.
template <class Fill>
blz_status fill_stats_admitted(const blz_pool *pool, blz_stats *out_stats, Fill fill) {
    if (pool == nullptr || out_stats == nullptr || out_stats->struct_size < sizeof(uint32_t)) {
        return BLZ_EINVAL;
    }
    // Admitted like any call, so that a concurrent destroy keeps the
    // workers (whose counters are read) alive until we are done.
    Registry *registry = const_cast<Registry *>(registry_of(pool));
    if (registry->forked()) return BLZ_EFORK;
    blz_status status = registry->enter();
    if (status != BLZ_OK) return status;
    blz_stats full;
    std::memset(&full, 0, sizeof(full));
    status = fill(*registry, full);
    registry->leave();
    if (status != BLZ_OK) return status;
    full.struct_size = out_stats->struct_size;
    std::memcpy(out_stats, &full, stats_prefix(out_stats->struct_size));
    return BLZ_OK;
}

// Whether `handles` is a valid list of `count` handles: NULL with 0, or
// `count` non-NULL entries.
template <class Handle>
bool valid_handles(Handle *const *handles, size_t count) {
    if (handles == nullptr) return count == 0;
    for (size_t i = 0; i < count; ++i) {
        if (handles[i] == nullptr) return false;
    }
    return true;
}

// blz_spawn_options' predecessors (0.3), when struct_size holds them.
blz_status read_predecessors(const blz_spawn_options *opts, blz::SpawnOptions &out) {
    if (opts->struct_size < kSpawnOptionsSizeV03) return BLZ_OK;
    if (!valid_handles(opts->after_tasks, opts->num_after_tasks) ||
        !valid_handles(opts->after_events, opts->num_after_events) ||
        !valid_handles(opts->after_groups, opts->num_after_groups)) {
        return BLZ_EINVAL;
    }
    for (size_t i = 0; i < opts->num_after_groups; ++i) {
        if (opts->group != nullptr && opts->after_groups[i] == opts->group) return BLZ_EDEADLK;  // after itself
    }
    out.after_tasks = reinterpret_cast<SpawnedJob *const *>(opts->after_tasks);
    out.num_after_tasks = opts->num_after_tasks;
    out.after_events = reinterpret_cast<Event *const *>(opts->after_events);
    out.num_after_events = opts->num_after_events;
    out.after_groups = reinterpret_cast<Group *const *>(opts->after_groups);
    out.num_after_groups = opts->num_after_groups;
    return BLZ_OK;
}

// blz_spawn_ex's options as the library uses them, checked against `pool`.
blz_status read_spawn_options(blz_pool *&pool, const blz_spawn_options *opts, blz::SpawnOptions &out) {
    if (opts == nullptr) return BLZ_OK;
    if (opts->struct_size < kSpawnOptionsSizeV02 || (opts->flags & ~kKnownSpawnFlags) != 0) return BLZ_EINVAL;
    if (opts->group != nullptr) {
        blz_pool *group_pool = reinterpret_cast<blz_pool *>(&group_of(opts->group)->registry());
        if (pool == nullptr) pool = group_pool;
        if (pool != group_pool) return BLZ_EINVAL;
    }
    out.group = group_of(opts->group);
    out.on_done = opts->on_done;
    out.done_arg = opts->done_arg;
    out.flags = opts->flags;  // known flags only: checked above
    return read_predecessors(opts, out);
}

blz_status status_of(blz::RangeOutcome outcome) {
    switch (outcome) {
        case blz::RangeOutcome::kOk: return BLZ_OK;
        case blz::RangeOutcome::kCancelled: return BLZ_ECANCELED;
        case blz::RangeOutcome::kFailed: break;
    }
    return BLZ_ETASK;
}

size_t automatic_grain(size_t count, uint32_t num_threads) {
    size_t pieces = size_t{8} * num_threads;
    size_t grain = count / pieces;
    return grain > 0 ? grain : 1;
}

[[gnu::noinline]] blz_status fork_join_slow(blz_pool *pool, blz_fn a, void *arg_a, blz_fn b, void *arg_b) {
    Registry *registry = registry_of(pool);
    if (a == nullptr || b == nullptr) return BLZ_EINVAL;
    blz_status status = check_pool(registry);
    if (status != BLZ_OK) return status;
    if (Worker *worker = own_worker(registry)) return blz::fork_join_on_worker(*worker, a, arg_a, b, arg_b);
    auto on_worker = [&] {
        return blz::fork_join_on_worker(*Worker::current(), a, arg_a, b, arg_b) == BLZ_OK;
    };
    return registry->call_from_outside(on_worker);
}

// blz_pool_release: what the destroying thread needs, on the heap because
// the releasing call returns before that thread has even started.
//
// Lifetimes: from the moment pthread_create succeeded, the thread owns
// `registry` as the destroyer (the caller gave the handle up, exactly as
// if blz_pool_destroy had returned), so nothing else destroys it and
// Registry::destroy's own rules keep it alive for the workers, groups and
// latch setters until they are done. The thread is no worker of any pool
// (t_current_worker is null on a new thread), so destroy cannot refuse
// with BLZ_EDEADLK, and a releasing task is accepted work that destroy
// waits for like any other: the task finishes, its worker returns to its
// loop, and only then is that worker told to stop and joined. The Release
// block is the thread's alone and freed by it after on_destroyed, which
// gets done_arg and the status only: the pool may be freed by then.
struct Release {
    Registry *registry;
    blz_done_fn on_destroyed;
    void *done_arg;
};

void *release_main(void *arg) {
    Release release = *static_cast<Release *>(arg);
    delete static_cast<Release *>(arg);
    pthread_setname_np(pthread_self(), "blz-release");
    const blz_status status = release.registry->destroy();
    if (release.on_destroyed != nullptr) {
        try {
            release.on_destroyed(release.done_arg, status);
        } catch (...) {
            // Nobody to report a C++ exception to (blitz.h: must not
            // unwind); any other unwind (pthread_exit) may end this
            // thread, which owns nothing any more.
            if (!std::current_exception()) throw;
        }
    }
    return nullptr;
}

blz_status release_pool(Registry *registry, blz_done_fn on_destroyed, void *done_arg) {
    if (registry->forked()) {
        // No thread to wait for in the child: destroy frees the memory at
        // once without blocking, so it runs here.
        const blz_status status = registry->destroy();
        if (on_destroyed != nullptr) on_destroyed(done_arg, status);
        return status;
    }
    Release *release = new (std::nothrow) Release{registry, on_destroyed, done_arg};
    if (release == nullptr) return BLZ_ENOMEM;
    pthread_attr_t attr;
    if (pthread_attr_init(&attr) != 0) {
        delete release;
        return BLZ_ENOMEM;
    }
    // Detached: nobody joins it; it ends by itself after on_destroyed. It
    // runs on the process's CPUs, not the releasing thread's (a pinned
    // worker, say); without the memory to read them, on the releaser's.
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    (void)blz::AffinityMask::of_process().apply(attr);
    pthread_t thread;
    const int error = pthread_create(&thread, &attr, &release_main, release);
    pthread_attr_destroy(&attr);
    if (error != 0) {
        delete release;  // the thread never started: the caller still owns the pool
        return BLZ_ETHREAD;
    }
    return BLZ_OK;
}

}  // namespace

extern "C" {

BLZ_API uint32_t blz_version_number(void) { return BLZ_VERSION_NUMBER; }

BLZ_API const char *blz_status_string(blz_status status) {
    switch (status) {
        case BLZ_OK: return "BLZ_OK: success";
        case BLZ_EINVAL: return "BLZ_EINVAL: invalid argument";
        case BLZ_ENOMEM: return "BLZ_ENOMEM: out of memory";
        case BLZ_ETHREAD: return "BLZ_ETHREAD: the OS refused to start a worker thread";
        case BLZ_ESHUTDOWN: return "BLZ_ESHUTDOWN: the pool is being destroyed";
        case BLZ_EDEADLK: return "BLZ_EDEADLK: the call would wait for itself";
        case BLZ_ETASK: return "BLZ_ETASK: a task failed (an exception, or blz_fail)";
        case BLZ_EFORK: return "BLZ_EFORK: the pool belongs to the parent of a fork()";
        case BLZ_ETIMEDOUT: return "BLZ_ETIMEDOUT: the wait ended before the work did";
        case BLZ_ECANCELED: return "BLZ_ECANCELED: the work was cancelled";
        default: return "unknown libblitz status";
    }
}

// blz_pool_config_init has one version per size of the struct (abi/libblitz.map
// lists it in both nodes). A program built against 0.1 binds to
// blz_pool_config_init@BLITZ_0.1 and passes the 0.1 struct, beyond which
// nothing may be written (it would be the caller's stack); a program built
// against 0.2 binds to the default version, which clears the whole struct.
namespace {
void init_config(blz_pool_config *config, uint32_t size) {
    if (config == nullptr) return;
    std::memset(config, 0, size);
    config->struct_size = size;
}

// The caller's config as this version reads it: the fields both the
// caller's version and this one know; the rest keep their defaults.
blz_status effective_config(const blz_pool_config *config, blz_pool_config &effective) {
    init_config(&effective, sizeof(effective));
    if (config != nullptr) {
        if (config->struct_size < kConfigSizeV01) return BLZ_EINVAL;
        const uint32_t known = config->struct_size >= kConfigSizeV03   ? kConfigSizeV03
                               : config->struct_size >= kConfigSizeV02 ? kConfigSizeV02
                                                                       : kConfigSizeV01;
        std::memcpy(&effective, config, known);
        effective.struct_size = sizeof(effective);
    }
    if (effective.num_threads > BLZ_MAX_THREADS) return BLZ_EINVAL;
    return BLZ_OK;
}

blz_status create_pool(const blz_pool_config *config, blz_pool **out_pool) {
    if (out_pool == nullptr) return BLZ_EINVAL;
    blz_pool_config effective;
    if (blz_status checked = effective_config(config, effective); checked != BLZ_OK) return checked;
    Registry *registry = nullptr;
    blz_status status = Registry::create(effective, &registry);
    if (status == BLZ_OK) *out_pool = reinterpret_cast<blz_pool *>(registry);
    return status;
}

// ---- The process pool (blz_pool_shared, 0.3) ----
// One pool that every library in the process can share, with a count of
// references. blz_pool_destroy and blz_pool_release on its handle give up
// one reference; the last one destroys the pool, and the next
// blz_pool_shared makes a new one (blitz.h says why).
//
// Lifetimes: the SharedPool entry is reachable only through g_shared and
// only read or written with g_shared_lock held; whoever takes it out of
// g_shared (the last release) frees it. The Registry lives while the
// entry counts a reference to it: a holder's calls need no lock, and its
// destroy/release reads only registry->shared() and forked() before taking
// the lock, which its own reference keeps valid.
struct SharedPool {
    Registry *registry;
    uint64_t refs;
    // What the creator's config set, to refuse a later config that differs.
    size_t stack_size;
    char *thread_name;  // malloc'd copy; nullptr: the default "blz"
    char *cpu_list;     // malloc'd copy of the list used (config's, else BLZ_CPU_LIST); nullptr: none
    blz_thread_fn on_thread_start;
    blz_thread_fn on_thread_stop;
    void *user;
    blz_spawn_thread_fn spawn_thread;
    void *spawn_user;
};

// A plain pthread mutex and pointer: no destructor runs at exit, so a
// worker or an atexit handler that calls blz_pool_shared or gives the pool
// up while the process exits finds them intact.
// The lock: creation, the count and the entry change together, and two
// first callers must not both create.
pthread_mutex_t g_shared_lock = PTHREAD_MUTEX_INITIALIZER;
SharedPool *g_shared = nullptr;  // guarded by g_shared_lock

void free_shared_entry(SharedPool *entry) {
    std::free(entry->thread_name);
    std::free(entry->cpu_list);
    delete entry;
}

// fork(): the lock is taken around the fork so that the child never
// inherits it held by a thread that does not exist there. In the child
// the parent's pool is dead (its handles get BLZ_EFORK) and forgotten: the
// next blz_pool_shared there makes a fresh pool. The parent's entry and
// pool memory are left to the child's exit, since any number of handles to
// it may still be given up there (each gets BLZ_EFORK, reading only the
// Registry).
void shared_fork_prepare() { pthread_mutex_lock(&g_shared_lock); }
void shared_fork_parent() { pthread_mutex_unlock(&g_shared_lock); }
void shared_fork_child() {
    g_shared = nullptr;
    pthread_mutex_unlock(&g_shared_lock);  // the forking thread took it in prepare and is this thread
}
const int g_shared_atfork = pthread_atfork(&shared_fork_prepare, &shared_fork_parent, &shared_fork_child);

bool same_text(const char *a, const char *b) { return a == b || (a != nullptr && b != nullptr && std::strcmp(a, b) == 0); }

// blitz.h, blz_pool_shared: a later config may set only what the pool already has.
bool compatible(const SharedPool &pool, const blz_pool_config &config) {
    if (config.num_threads != 0 && config.num_threads != pool.registry->num_threads()) return false;
    if (config.stack_size != 0 && config.stack_size != pool.stack_size) return false;
    if (config.thread_name != nullptr && !same_text(config.thread_name, pool.thread_name ? pool.thread_name : "blz")) {
        return false;
    }
    if (config.cpu_list != nullptr && config.cpu_list[0] != '\0' && !same_text(config.cpu_list, pool.cpu_list)) {
        return false;
    }
    if (config.on_thread_start != nullptr && config.on_thread_start != pool.on_thread_start) return false;
    if (config.on_thread_stop != nullptr && config.on_thread_stop != pool.on_thread_stop) return false;
    if (config.user != nullptr && config.user != pool.user) return false;
    if (config.spawn_thread != nullptr && config.spawn_thread != pool.spawn_thread) return false;
    uint32_t max_spares = 0;
    if (config.max_spares != 0 && (Registry::resolve_max_spares(config.max_spares, pool.registry->num_threads(),
                                                                &max_spares) != BLZ_OK ||
                                   max_spares != pool.registry->max_spares())) {
        return false;
    }
    if (config.spare_idle_ms != 0 && config.spare_idle_ms != pool.registry->spare_idle_ms()) return false;
    if (config.spawn_user != nullptr && config.spawn_user != pool.spawn_user) return false;
    return true;
}

char *copy_text(const char *text, bool &ok) {
    if (text == nullptr) return nullptr;
    char *copy = strdup(text);
    if (copy == nullptr) ok = false;
    return copy;
}

// Called with g_shared_lock held: creates the pool and its entry.
blz_status create_shared(const blz_pool_config &config, SharedPool **out) {
    SharedPool *entry = new (std::nothrow) SharedPool{};
    if (entry == nullptr) return BLZ_ENOMEM;
    bool ok = true;
    entry->thread_name = copy_text(config.thread_name, ok);
    entry->cpu_list = copy_text(blz::cpu_list_text(config.cpu_list), ok);
    if (!ok) {
        free_shared_entry(entry);
        return BLZ_ENOMEM;
    }
    entry->stack_size = config.stack_size;
    entry->on_thread_start = config.on_thread_start;
    entry->on_thread_stop = config.on_thread_stop;
    entry->user = config.user;
    entry->spawn_thread = config.spawn_thread;
    entry->spawn_user = config.spawn_user;
    const blz_status status = Registry::create(config, &entry->registry);
    if (status != BLZ_OK) {
        free_shared_entry(entry);
        return status;
    }
    entry->registry->mark_shared();  // before the handle leaves this lock
    entry->refs = 0;
    *out = entry;
    return BLZ_OK;
}

blz_status acquire_shared(const blz_pool_config *config, blz_pool **out_pool) {
    (void)g_shared_atfork;
    if (out_pool == nullptr) return BLZ_EINVAL;
    blz_pool_config effective;
    if (blz_status checked = effective_config(config, effective); checked != BLZ_OK) return checked;
    pthread_mutex_lock(&g_shared_lock);  // see g_shared_lock
    blz_status status = BLZ_OK;
    if (g_shared == nullptr) {
        status = create_shared(effective, &g_shared);
    } else if (config != nullptr && !compatible(*g_shared, effective)) {
        status = BLZ_EINVAL;
    }
    if (status == BLZ_OK) {
        ++g_shared->refs;
        *out_pool = reinterpret_cast<blz_pool *>(g_shared->registry);
    }
    pthread_mutex_unlock(&g_shared_lock);
    return status;
}

// blz_pool_destroy (wait) or blz_pool_release (!wait) on the process
// pool's handle: gives up one reference; the last one destroys the pool
// as those calls destroy any pool.
blz_status give_up_shared(Registry *registry, bool wait, blz_done_fn on_destroyed, void *done_arg) {
    if (registry->forked()) {
        // The parent's pool: nothing is freed (see shared_fork_child).
        if (!wait && on_destroyed != nullptr) on_destroyed(done_arg, BLZ_EFORK);
        return BLZ_EFORK;
    }
    pthread_mutex_lock(&g_shared_lock);  // see g_shared_lock
    SharedPool *entry = g_shared;
    if (entry == nullptr || entry->registry != registry || entry->refs == 0) {
        pthread_mutex_unlock(&g_shared_lock);
        return BLZ_EINVAL;  // given up more often than it was acquired
    }
    if (entry->refs > 1) {
        --entry->refs;
        pthread_mutex_unlock(&g_shared_lock);
        if (!wait && on_destroyed != nullptr) on_destroyed(done_arg, BLZ_OK);
        return BLZ_OK;
    }
    // The last reference.
    if (wait && own_worker(registry) != nullptr) {
        pthread_mutex_unlock(&g_shared_lock);
        return BLZ_EDEADLK;  // as blz_pool_destroy: nothing changes
    }
    const bool unlink_late = wait && BLZ_FAULT_MUTANT(kSharedUnlinkedLate);
    if (!unlink_late) g_shared = nullptr;
    if (!wait) {
        // Started with the lock held, so that if it cannot start the
        // entry goes back before anyone saw it gone (nothing changed).
        const blz_status status = release_pool(registry, on_destroyed, done_arg);
        if (status != BLZ_OK) g_shared = entry;
        pthread_mutex_unlock(&g_shared_lock);
        if (status == BLZ_OK) free_shared_entry(entry);
        return status;
    }
    pthread_mutex_unlock(&g_shared_lock);
    // From here a blz_pool_shared makes a new pool: this one is out of
    // reach before it starts to die (lifetime row "shared pool: acquire in
    // last give-up").
    BLZ_FAULT_POINT(kSharedLastGiveUp, registry);
    if (unlink_late) {
        const blz_status status = registry->destroy();
        pthread_mutex_lock(&g_shared_lock);
        if (g_shared == entry) g_shared = nullptr;
        pthread_mutex_unlock(&g_shared_lock);
        free_shared_entry(entry);
        return status;
    }
    free_shared_entry(entry);
    // Outside the lock: destroy waits for accepted work, which may call
    // blz_pool_shared (and then gets a new pool).
    return registry->destroy();
}

#if defined(BLZ_FAULT_INJECTION)
// The defect blitz.h's "Process exit" rules out, for the lifetime row
// "shared pool: exit while a task runs":
// destroying the process pool from a static destructor waits at exit for
// tasks that may never end.
struct DestroySharedAtExit {
    ~DestroySharedAtExit() {
        if (BLZ_FAULT_MUTANT(kSharedDestroyedAtExit) && g_shared != nullptr) g_shared->registry->destroy();
    }
} g_destroy_shared_at_exit;
#endif
// ---- end of the process pool ----
}  // namespace

extern "C" BLZ_API void blz_pool_config_init_v01(blz_pool_config *config) { init_config(config, kConfigSizeV01); }
extern "C" BLZ_API void blz_pool_config_init_v02(blz_pool_config *config) { init_config(config, kConfigSizeV02); }
extern "C" BLZ_API void blz_pool_config_init_v03(blz_pool_config *config) { init_config(config, kConfigSizeV03); }
__asm__(".symver blz_pool_config_init_v01, blz_pool_config_init@BLITZ_0.1");
__asm__(".symver blz_pool_config_init_v02, blz_pool_config_init@BLITZ_0.2");
__asm__(".symver blz_pool_config_init_v03, blz_pool_config_init@@BLITZ_0.3");

BLZ_API blz_status blz_pool_create(const blz_pool_config *config, blz_pool **out_pool) {
    return without_cancellation([&] { return create_pool(config, out_pool); });
}

BLZ_API blz_status blz_pool_destroy(blz_pool *pool) {
    if (pool == nullptr) return BLZ_EINVAL;
    if (registry_of(pool)->shared()) {
        return without_cancellation([&] { return give_up_shared(registry_of(pool), true, nullptr, nullptr); });
    }
    return without_cancellation([&] { return registry_of(pool)->destroy(); });
}

BLZ_API blz_status blz_pool_shared(const blz_pool_config *config, blz_pool **out_pool) {
    return without_cancellation([&] { return acquire_shared(config, out_pool); });
}

BLZ_API uint32_t blz_pool_num_threads(const blz_pool *pool) {
    return pool != nullptr ? registry_of(pool)->num_threads() : 0;
}

BLZ_API int32_t blz_worker_index(const blz_pool *pool) {
    if (pool == nullptr) return -1;
    Worker *worker = own_worker(registry_of(pool));
    return worker != nullptr ? static_cast<int32_t>(worker->index()) : -1;
}

// ---- Blocking sections (blz_block_begin, 0.3; docs/protocol.md "Blocking sections") ----
namespace {
// The calling thread's open sections, and the worker that gave its slot
// back at the outermost one (nullptr: none did, so the end gives nothing back).
constinit thread_local uint32_t t_block_depth = 0;
constinit thread_local Worker *t_block_released = nullptr;
}  // namespace

BLZ_API blz_status blz_block_begin(void) {
    if (t_block_depth++ != 0) return BLZ_OK;  // nested: the outermost section counts
    Worker *worker = Worker::current();
    if (worker != nullptr && !worker->registry().forked() && worker->registry().block_begin(*worker)) {
        t_block_released = worker;
    }
    return BLZ_OK;
}

BLZ_API blz_status blz_block_end(void) {
    if (t_block_depth == 0) return BLZ_EINVAL;
    if (--t_block_depth != 0) return BLZ_OK;
    Worker *worker = t_block_released;
    t_block_released = nullptr;
    // In a forked child the pool is dead: nothing to take back.
    if (worker != nullptr && !worker->registry().forked()) worker->registry().block_end(*worker);
    return BLZ_OK;
}

BLZ_API blz_status blz_blocking(blz_fn fn, void *arg) {
    if (fn == nullptr) return BLZ_EINVAL;
    (void)blz_block_begin();
    bool ok = true;
    try {
        fn(arg);
    } catch (...) {
        // An unwind that is not a C++ exception (a cancellation in the
        // blocking call) goes on, with the section closed.
        if (!std::current_exception()) {
            (void)blz_block_end();
            throw;
        }
        ok = false;
    }
    (void)blz_block_end();
    return ok ? BLZ_OK : BLZ_ETASK;
}

BLZ_API blz_status blz_pool_stats(const blz_pool *pool, blz_stats *out_stats) {
    return without_chaos_cancellation([&]() -> blz_status {
        return fill_stats_admitted(pool, out_stats, [](const Registry &registry, blz_stats &full) {
            registry.fill_stats(full);
            return BLZ_OK;
        });
    });
}

BLZ_API blz_status blz_worker_stats(const blz_pool *pool, uint32_t worker_index, blz_stats *out_stats) {
    return without_chaos_cancellation([&]() -> blz_status {
        return fill_stats_admitted(pool, out_stats, [worker_index](const Registry &registry, blz_stats &full) {
            if (worker_index >= registry.num_threads()) return BLZ_EINVAL;
            registry.fill_worker_stats(worker_index, full);
            return BLZ_OK;
        });
    });
}

BLZ_API blz_status blz_pool_set_max_active(blz_pool *pool, uint32_t n) {
    return without_chaos_cancellation([&]() -> blz_status {
        // Admitted: the unparking touches the workers, which destroy frees.
        return admitted(pool, [n](Registry &registry) {
            registry.set_max_active(n);
            return BLZ_OK;
        });
    });
}

BLZ_API blz_status blz_pool_trace_start(blz_pool *pool, const char *path) {
    if (path == nullptr || *path == '\0') return BLZ_EINVAL;
    return without_cancellation(
        [&] { return admitted(pool, [path](Registry &registry) { return registry.tracer().start(path); }); });
}

BLZ_API blz_status blz_pool_trace_stop(blz_pool *pool) {
    return without_cancellation(
        [&] { return admitted(pool, [](Registry &registry) { return registry.tracer().stop(); }); });
}

BLZ_API blz_status blz_spawn(blz_pool *pool, blz_fn fn, void *arg, blz_task **out_task) {
    return blz_spawn_ex(pool, fn, arg, nullptr, out_task);
}

BLZ_API blz_status blz_join(blz_task *task) {
    if (task == nullptr) return BLZ_EINVAL;
    return without_chaos_cancellation(
        [&] { return blz::join_task(reinterpret_cast<SpawnedJob *>(task), blz::kNoDeadline); });
}

BLZ_API blz_status blz_fork_join(blz_pool *pool, blz_fn a, void *arg_a, blz_fn b, void *arg_b) {
    // The hot path: a worker of this pool forking, with both functions given.
    Worker *worker = Worker::current();
    if (worker != nullptr && &worker->registry() == registry_of(pool) && a != nullptr && b != nullptr)
        [[likely]] {
        return blz::fork_join_on_worker(*worker, a, arg_a, b, arg_b);
    }
    return without_chaos_cancellation([&] { return fork_join_slow(pool, a, arg_a, b, arg_b); });
}

// The inline fork path's calls (blitz.h, "The inline fork path"). The
// stack must be the calling worker's own: anything else is a caller's
// mistake, answered without touching it.
namespace {
Worker *fork_stack_owner(const blz_fork_stack *stack) {
    Worker *worker = Worker::current();
    return worker != nullptr && &worker->forks().record() == stack ? worker : nullptr;
}
}  // namespace

BLZ_API int blz_fork_push_v1(blz_fork_stack *stack, blz_fork_frame *frame) {
    Worker *worker = fork_stack_owner(stack);
    if (worker == nullptr || frame == nullptr || frame->fn == nullptr) return 0;  // run both inline
    return worker->push_fork(frame) ? 1 : 0;
}

BLZ_API int blz_fork_join_v1(blz_fork_stack *stack, blz_fork_frame *frame) {
    Worker *worker = fork_stack_owner(stack);
    if (worker == nullptr || frame == nullptr || !worker->forks().is_newest(frame)) return 0;
    return worker->join_promoted(frame) ? 1 : 0;
}

BLZ_API void blz_fork_failed_v1(blz_fork_stack *stack, uint32_t before) {
    if (fork_stack_owner(stack) == nullptr) return;
    (void)blz::take_failures(before, true);
}

BLZ_API blz_fork_stack **blz_fork_stack_slot_v1(void) { return &blz_fork_stack_v1; }

BLZ_API blz_status blz_call(blz_pool *pool, blz_fn fn, void *arg) {
    return without_chaos_cancellation([&]() -> blz_status {
        if (fn == nullptr) return BLZ_EINVAL;
        Registry *registry = registry_of(pool);
        blz_status status = check_pool(registry);
        if (status != BLZ_OK) return status;
        auto run = [&] { return blz::run_job([&] { fn(arg); }); };
        if (own_worker(registry) != nullptr) return run() ? BLZ_OK : BLZ_ETASK;
        return registry->call_from_outside(run);
    });
}

BLZ_API blz_status blz_isolate(blz_pool *pool, blz_fn fn, void *arg) {
    return without_chaos_cancellation([&]() -> blz_status {
        if (fn == nullptr) return BLZ_EINVAL;
        Registry *registry = registry_of(pool);
        blz_status status = check_pool(registry);
        if (status != BLZ_OK) return status;
        // blz_call's, with fn in a region (isolation.hpp) on whichever worker runs it.
        auto run = [&] {
            blz::IsolatedScope region;
            return blz::run_job([&] { fn(arg); });
        };
        if (own_worker(registry) != nullptr) return run() ? BLZ_OK : BLZ_ETASK;
        // A worker of another pool waits for the call isolated too: its
        // wait must not run its own pool's outside work either.
        if (Worker::current() != nullptr) {
            blz::IsolatedScope caller;
            return registry->call_from_outside(run);
        }
        return registry->call_from_outside(run);
    });
}

BLZ_API blz_status blz_parallel_for(blz_pool *pool, size_t begin, size_t end, size_t grain,
                                    blz_range_fn body, void *arg) {
    return without_chaos_cancellation([&]() -> blz_status {
        if (body == nullptr || begin > end) return BLZ_EINVAL;
        Registry *registry = registry_of(pool);
        blz_status status = check_pool(registry);
        if (status != BLZ_OK) return status;
        if (begin == end) return BLZ_OK;
        if (grain == 0) grain = automatic_grain(end - begin, registry->num_threads());
        const blz::CancelWatch cancel = blz::cancel_watch_here();  // its caller's innermost task's
        blz::RangeOutcome outcome = blz::RangeOutcome::kOk;
        auto run = [&] {
            outcome = blz::parallel_for_on_worker(*registry, begin, end, grain, body, arg, cancel);
            return outcome != blz::RangeOutcome::kFailed;
        };
        if (own_worker(registry) != nullptr) {
            run();
            return status_of(outcome);
        }
        status = registry->call_from_outside(run);
        return status == BLZ_OK ? status_of(outcome) : status;
    });
}

BLZ_API blz_status blz_group_create(blz_pool *pool, blz_group **out_group) {
    return blz_group_create_ex(pool, 0, out_group);
}

BLZ_API blz_status blz_group_spawn(blz_group *group, blz_fn fn, void *arg) {
    if (group == nullptr || fn == nullptr) return BLZ_EINVAL;
    return without_chaos_cancellation([&] { return group_of(group)->spawn(fn, arg); });
}

BLZ_API blz_status blz_group_wait(blz_group *group) {
    if (group == nullptr) return BLZ_EINVAL;
    return without_chaos_cancellation([&] { return group_of(group)->wait(blz::kNoDeadline); });
}

BLZ_API blz_status blz_group_destroy(blz_group *group) {
    if (group == nullptr) return BLZ_EINVAL;
    return without_chaos_cancellation([&] { return group_of(group)->destroy(); });
}

BLZ_API void blz_spawn_options_init(blz_spawn_options *opts) {
    if (opts == nullptr) return;
    std::memset(opts, 0, sizeof(*opts));
    opts->struct_size = sizeof(*opts);
}

BLZ_API blz_status blz_spawn_ex(blz_pool *pool, blz_fn fn, void *arg, const blz_spawn_options *opts,
                                blz_task **out_task) {
    return without_chaos_cancellation([&]() -> blz_status {
        if (fn == nullptr) return BLZ_EINVAL;
        blz::SpawnOptions options;
        blz_status status = read_spawn_options(pool, opts, options);
        if (status != BLZ_OK) return status;
        Registry *registry = registry_of(pool);
        status = check_pool(registry);
        if (status != BLZ_OK) return status;
        return blz::spawn_task(*registry, fn, arg, options, out_task);
    });
}

BLZ_API blz_status blz_task_wait_for(blz_task *task, uint64_t timeout_ns) {
    if (task == nullptr) return BLZ_EINVAL;
    return without_chaos_cancellation(
        [&] { return blz::join_task(reinterpret_cast<SpawnedJob *>(task), blz::deadline_after(timeout_ns)); });
}

BLZ_API blz_status blz_task_detach(blz_task *task) {
    if (task == nullptr) return BLZ_EINVAL;
    return blz::detach_task(reinterpret_cast<SpawnedJob *>(task));
}

BLZ_API blz_status blz_default_size(blz_default_size_info *out) {
    if (out == nullptr || out->struct_size < sizeof(blz_default_size_info)) return BLZ_EINVAL;
    const blz::DefaultSize size = blz::default_size();
    out->num_threads = size.num_threads;
    out->source = size.source;
    out->environment = size.environment;
    out->affinity_cpus = size.affinity_cpus;
    out->quota_cpus = size.quota_cpus;
    return BLZ_OK;
}

BLZ_API blz_status blz_task_cancel(blz_task *task) {
    if (task == nullptr) return BLZ_EINVAL;
    blz::cancel_task(reinterpret_cast<SpawnedJob *>(task));
    return BLZ_OK;
}

BLZ_API blz_status blz_group_create_ex(blz_pool *pool, uint32_t flags, blz_group **out_group) {
    return without_chaos_cancellation([&]() -> blz_status {
        if (out_group == nullptr || (flags & ~kKnownGroupFlags) != 0) return BLZ_EINVAL;
        Registry *registry = registry_of(pool);
        blz_status status = check_pool(registry);
        if (status != BLZ_OK) return status;
        Group *group = nullptr;
        status = Group::create(*registry, flags, &group);
        if (status == BLZ_OK) *out_group = reinterpret_cast<blz_group *>(group);
        return status;
    });
}

BLZ_API blz_status blz_group_wait_for(blz_group *group, uint64_t timeout_ns) {
    if (group == nullptr) return BLZ_EINVAL;
    return without_chaos_cancellation([&] { return group_of(group)->wait(blz::deadline_after(timeout_ns)); });
}

BLZ_API blz_status blz_group_cancel(blz_group *group) {
    if (group == nullptr) return BLZ_EINVAL;
    group_of(group)->cancel();
    return BLZ_OK;
}

BLZ_API int32_t blz_group_cancelled(const blz_group *group) {
    if (group == nullptr) return 0;
    return reinterpret_cast<const Group *>(group)->cancelled() ? 1 : 0;
}

BLZ_API int32_t blz_cancelled(void) { return blz::cancel_watch_here().requested() ? 1 : 0; }

BLZ_API void blz_fail(void) {
    ++blz::t_failures;  // found by the boundary of the job that runs this (job.hpp)
    blz::cancel_group_on_failure();
}

BLZ_API blz_status blz_event_create(blz_event **out_event) {
    if (out_event == nullptr) return BLZ_EINVAL;
    Event *event = nullptr;
    const blz_status status = Event::create(&event);
    if (status == BLZ_OK) *out_event = reinterpret_cast<blz_event *>(event);
    return status;
}

BLZ_API blz_status blz_event_set(blz_event *event, blz_status status) {
    if (event == nullptr) return BLZ_EINVAL;
    return event_of(event)->set(status);
}

BLZ_API blz_status blz_event_wait_for(blz_event *event, uint64_t timeout_ns) {
    if (event == nullptr) return BLZ_EINVAL;
    if (timeout_ns == 0) return event_of(event)->poll();  // no wait, so no clock and no cancellation point
    return without_chaos_cancellation([&] { return event_of(event)->wait(blz::deadline_after(timeout_ns)); });
}

BLZ_API blz_status blz_event_destroy(blz_event *event) {
    if (event == nullptr) return BLZ_EINVAL;
    event_of(event)->destroy();
    return BLZ_OK;
}

BLZ_API blz_status blz_task_finish_later(blz_event **out_event) {
    if (out_event == nullptr) return BLZ_EINVAL;
    Event *event = nullptr;
    const blz_status status = blz::finish_task_later(&event);
    if (status == BLZ_OK) *out_event = reinterpret_cast<blz_event *>(event);
    return status;
}

BLZ_API blz_status blz_broadcast(blz_pool *pool, blz_thread_fn fn, void *arg) {
    return without_chaos_cancellation([&]() -> blz_status {
        if (fn == nullptr) return BLZ_EINVAL;
        Registry *registry = registry_of(pool);
        blz_status status = check_pool(registry);
        if (status != BLZ_OK) return status;
        return blz::broadcast(*registry, fn, arg);
    });
}

BLZ_API blz_status blz_pool_release(blz_pool *pool, blz_done_fn on_destroyed, void *done_arg) {
    if (pool == nullptr) return BLZ_EINVAL;
    if (registry_of(pool)->shared()) {
        return without_cancellation([&] { return give_up_shared(registry_of(pool), false, on_destroyed, done_arg); });
    }
    return without_cancellation([&] { return release_pool(registry_of(pool), on_destroyed, done_arg); });
}

}  // extern "C"
