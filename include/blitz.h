/**
 * @file blitz.h
 * @brief libblitz: a work-stealing thread pool behind a plain C ABI.
 *
 * Plain C99 that also compiles as C++. Every handle is opaque, every status
 * is an int32_t, no struct holds a bitfield or an enum, so a Rust
 * #[repr(C)] mirror or a ctypes declaration can be exact.
 *
 * Threading in one paragraph: every function may be called from any thread,
 * including the pool's own workers and the workers of other pools, unless
 * its documentation says otherwise. A worker that waits (blz_join,
 * blz_fork_join, blz_call, blz_parallel_for, blz_group_wait) runs other jobs
 * of its own pool while it waits and sleeps when there are none; any other
 * thread blocks without spinning.
 *
 * Worker threads belong to their pool. They run with thread cancellation
 * disabled, so a pthread_cancel aimed at one stays pending and has no
 * effect. Code the pool runs on a worker (a job, a hook) must not end the
 * thread: if it calls pthread_exit, or enables cancellation and is
 * cancelled (or any other unwind that is not a C++ exception leaves it),
 * libblitz prints "libblitz: fatal: ..." on stderr and aborts the process,
 * since the pool would otherwise lose the worker's queue and wait for it
 * for ever. C++ exceptions are caught and reported as BLZ_ETASK. No
 * libblitz function is a cancellation point: every call that could reach
 * one (blz_pool_destroy joining the workers, a trace file being written, a
 * wait) runs with cancellation disabled and puts the caller's state back
 * before it returns, so a thread cancelled meanwhile is cancelled at its
 * next cancellation point after the call returned. (As POSIX requires, a
 * thread must not call libblitz with asynchronous cancellation enabled.)
 */

#ifndef BLITZ_H
#define BLITZ_H

#include <stddef.h>
#include <stdint.h>

/**
 * BLZ_API marks every exported declaration. Building the library defines
 * BLZ_BUILDING_LIBRARY so that only these symbols are visible.
 */
#if defined(BLZ_BUILDING_LIBRARY) && defined(__GNUC__)
#define BLZ_API __attribute__((visibility("default")))
#else
#define BLZ_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/** Major version: changes when the ABI breaks. */
#define BLZ_VERSION_MAJOR 0
/** Minor version: changes when the ABI grows. */
#define BLZ_VERSION_MINOR 3
/** Patch version: changes for fixes only. */
#define BLZ_VERSION_PATCH 0
/** The header's version as one number, MAJOR * 10000 + MINOR * 100 + PATCH. */
#define BLZ_VERSION_NUMBER (BLZ_VERSION_MAJOR * 10000 + BLZ_VERSION_MINOR * 100 + BLZ_VERSION_PATCH)
/** The most workers one pool may have (the sleep counters hold 16 bits). */
#define BLZ_MAX_THREADS 65535

/**
 * Status codes. Functions return them as blz_status (an int32_t); the enum
 * only names the values and never appears in a signature or a struct.
 */
enum blz_status_code {
    /** Success. */
    BLZ_OK = 0,
    /** An argument is invalid; nothing was done. */
    BLZ_EINVAL = -1,
    /** Out of memory; nothing was done. */
    BLZ_ENOMEM = -2,
    /** The OS refused to start a worker thread. */
    BLZ_ETHREAD = -3,
    /** The pool is being destroyed. */
    BLZ_ESHUTDOWN = -4,
    /** The call would wait for itself. */
    BLZ_EDEADLK = -5,
    /** A task it waited for ended by an exception. */
    BLZ_ETASK = -6,
    /** The pool was created before fork() in another process. */
    BLZ_EFORK = -7,
    /** A bounded wait ended before the work did; nothing was freed or changed. (0.2) */
    BLZ_ETIMEDOUT = -8,
    /** The work was cancelled: skipped before it started, or stopped early. (0.2) */
    BLZ_ECANCELED = -9
};

/** A status: BLZ_OK or one of the negative blz_status_code values. */
typedef int32_t blz_status;

/** A thread pool. Opaque; created by blz_pool_create. */
typedef struct blz_pool blz_pool;

/** A spawned task that will be joined. Opaque; created by blz_spawn. */
typedef struct blz_task blz_task;

/** A set of tasks waited for together. Opaque; created by blz_group_create. */
typedef struct blz_group blz_group;

/** An opaque completion that the embedder sets once (0.3; blz_event_create). */
typedef struct blz_event blz_event;

/** A job: called once with the argument it was given. */
typedef void (*blz_fn)(void *arg);

/** A loop body: called with disjoint sub-ranges [begin, end). */
typedef void (*blz_range_fn)(void *arg, size_t begin, size_t end);

/** A worker hook: called with the pool's user pointer and the worker's index. */
typedef void (*blz_thread_fn)(void *user, uint32_t worker_index);

/**
 * Starts the thread of worker `worker_index` for an embedder that owns its
 * threads (blz_pool_config.spawn_thread, 0.2): it must make a thread other
 * than the caller call run(run_arg) exactly once, and return 0; or start
 * nothing and return any other value.
 */
typedef int (*blz_spawn_thread_fn)(void *user, uint32_t worker_index, blz_fn run, void *run_arg);

/**
 * A completion callback (0.2): called once, on the worker that finished
 * the task, with the task's status (BLZ_OK, BLZ_ETASK or BLZ_ECANCELED).
 */
typedef void (*blz_done_fn)(void *done_arg, blz_status status);

/** blz_group_create_ex flag: the first failure in the group cancels it (0.2). */
#define BLZ_GROUP_CANCEL_ON_FAILURE 1u

/**
 * blz_spawn_options flag (0.2): the task goes to the pool's high-priority
 * queue, which every worker looking for work searches before the queue of
 * normal tasks (from any thread, also from one of the pool's own workers:
 * such a task does not go onto that worker's deque). A worker that finishes
 * a job looks there before it takes its next injected task.
 *
 * Not promised: a running job is never preempted; the fork-join halves and
 * normal spawned tasks already in workers' deques are not reordered (a
 * worker runs the high-priority task before it takes another job from
 * them, but one that is inside a job finishes that job's own forks first
 * when it runs them inline); among high-priority tasks the order is the
 * queue's (first in, first taken), and a blz_broadcast call still comes
 * first. On a pool capped by blz_pool_set_max_active, the task waits for
 * an active worker like any other.
 */
#define BLZ_SPAWN_HIGH_PRIORITY 1u

/**
 * blz_spawn_options flag (0.3): on_done runs once the task has finished,
 * instead of just before. By default on_done runs before the task counts
 * as finished, so that a join, a group wait and a pool's destroy return
 * only after it; with this flag it runs after: the task has left its group
 * (a blz_group_wait, blz_group_wait_for or blz_group_destroy of the group
 * may return, and the group be freed, while on_done runs) and a join or
 * blz_task_wait_for of the task returns its status without waiting (so
 * another thread may join and free the handle meanwhile: on_done must not
 * use it). blz_pool_destroy still returns only after on_done returned.
 *
 * What it is for: a binding that learns of the end from on_done, and then
 * frees the task's handle or its group from another thread, never waits
 * for a task still leaving them. Inside on_done everything else is as
 * without the flag (blz_spawn_ex), except that a wait there for its own
 * task or its group no longer deadlocks: the task has finished.
 */
#define BLZ_SPAWN_DONE_AFTER_FINISH 2u

/**
 * blz_spawn_options flag (0.3): the first failure of the task's own work
 * (an exception or a blz_fail in the task, in a fork-join half or in a
 * blz_parallel_for piece it runs) cancels the task, as blz_task_cancel
 * would: its loops stop starting pieces and blz_cancelled() turns 1 in it.
 * Fail-fast for one task, as BLZ_GROUP_CANCEL_ON_FAILURE is for a group;
 * the task's status is still BLZ_ETASK if the failure was its own.
 */
#define BLZ_SPAWN_CANCEL_ON_FAILURE 4u

/**
 * blz_spawn_options flag (0.3): the task runs after its predecessors
 * (after_tasks, after_events, after_groups) whatever they ended with.
 * Without it, a predecessor that ended in BLZ_ETASK or BLZ_ECANCELED (a
 * task that failed or was cancelled, an event set or destroyed with either,
 * a group whose blz_group_wait would report either) cancels the task: fn
 * is not called, its status is BLZ_ECANCELED and its on_done gets that.
 * See "Dependencies" at blz_spawn_ex.
 */
#define BLZ_SPAWN_AFTER_ANY_END 8u

/**
 * How blz_spawn_ex spawns a task (0.2). Initialise with
 * blz_spawn_options_init, then change the fields you need; the options are
 * read only during the call.
 */
typedef struct blz_spawn_options {
    /** sizeof(blz_spawn_options); set by blz_spawn_options_init. */
    uint32_t struct_size;
    /** 0, or BLZ_SPAWN_HIGH_PRIORITY, BLZ_SPAWN_DONE_AFTER_FINISH, BLZ_SPAWN_CANCEL_ON_FAILURE and BLZ_SPAWN_AFTER_ANY_END (0.3) OR'ed; any other bit gives BLZ_EINVAL. */
    uint32_t flags;
    /** NULL, or the group the task belongs to: the group's waits count it and its cancel skips it. */
    blz_group *group;
    /** NULL, or called exactly once after the task ended (see blz_spawn_ex). */
    blz_done_fn on_done;
    /** Passed to on_done. */
    void *done_arg;
    /* 0.3: a caller whose struct_size ends before these fields names no predecessors. */
    /** NULL, or num_after_tasks tasks this task runs after (handles read during the call only). */
    blz_task *const *after_tasks;
    /** How many handles after_tasks holds. */
    size_t num_after_tasks;
    /** NULL, or num_after_events events this task runs after. */
    blz_event *const *after_events;
    /** How many handles after_events holds. */
    size_t num_after_events;
    /** NULL, or num_after_groups groups: runs once each has no task left, as blz_group_wait would return. */
    blz_group *const *after_groups;
    /** How many handles after_groups holds. */
    size_t num_after_groups;
} blz_spawn_options;

/**
 * How to build a pool. Initialise with blz_pool_config_init, then change
 * the fields you need; a config is read only during blz_pool_create.
 */
typedef struct blz_pool_config {
    /** sizeof(blz_pool_config); set by blz_pool_config_init. */
    uint32_t struct_size;
    /**
     * 0: the default size (blz_default_size): BLZ_NUM_THREADS if it
     * parses to 1..65535, else the CPUs in the process's affinity mask, or
     * fewer when the process's cgroup has a CPU quota (0.3). The process's
     * mask is its main thread's (what taskset, numactl or an MPI launcher
     * set), not the calling thread's: a pool made on a thread pinned to one
     * CPU (a worker of a pinned pool, say) is not sized 1. Without a CPU
     * list the workers run on the process's mask too.
     */
    uint32_t num_threads;
    /** Bytes of stack per worker; 0: the platform's default. */
    size_t stack_size;
    /** Worker name prefix ("blz" names the workers "blz-0", "blz-1", ...); NULL: "blz". */
    const char *thread_name;
    /** Runs on each worker before its first job; NULL: none. Exceptions it throws are ignored. */
    blz_thread_fn on_thread_start;
    /** Runs on each worker after its last job; NULL: none. Exceptions it throws are ignored. */
    blz_thread_fn on_thread_stop;
    /** Passed to both hooks. */
    void *user;
    /**
     * (0.2) NULL: workers are not pinned, unless BLZ_CPU_LIST in the
     * environment holds a list (an empty one counts as unset). Else a Linux
     * CPU list, the syntax of `taskset -c` and /sys/devices/system/cpu/online:
     * comma-separated CPU numbers and ranges, "0-3,8-11" (no spaces, a range
     * low-high with low <= high, a CPU may repeat). Worker i is pinned to
     * the (i mod length)-th CPU of the list. Every CPU must be in the
     * process's affinity mask (see num_threads) when the pool is created.
     * With num_threads 0 the pool has one worker per entry of the list
     * (BLZ_NUM_THREADS is then ignored). Read only during the call.
     */
    const char *cpu_list;
    /**
     * (0.2) NULL: libblitz starts the workers' threads. Else the embedder
     * starts them (a runtime that owns its threads, a thread with state the
     * jobs need): blz_pool_create calls spawn_thread(spawn_user, i, run,
     * run_arg) for i = 0, 1, ... in order, on the calling thread, and each
     * call must make another thread call run(run_arg) once, at any time
     * (blz_pool_create does not wait for it; jobs wait in the queues). That
     * thread is worker i while run() runs: run() pins it (cpu_list), runs
     * on_thread_start, the pool's jobs until the pool is destroyed, then
     * on_thread_stop, and returns; the thread is then the embedder's again,
     * with its cancellation state and CPU mask as they were. The thread may
     * already be a worker of another pool (run() called from one of that
     * pool's tasks): while run() runs it is this pool's worker only (its
     * hooks and jobs are outside that task), and when run() returns it is
     * that pool's worker again, inside that task, exactly as before (its
     * index, blz_cancelled, blz_fail and deadlock detection). That task
     * holds its worker until this pool is destroyed. libblitz does not name such
     * threads or set their stacks (thread_name and stack_size are unused),
     * and a pin the platform refuses leaves the thread unpinned. If
     * spawn_thread returns non-zero (or throws), blz_pool_create returns
     * BLZ_ETHREAD once the runs already handed out have returned. Instead
     * of joining threads, blz_pool_destroy waits until every run() has
     * returned: a run that is never called makes it wait for ever.
     */
    blz_spawn_thread_fn spawn_thread;
    /** Passed to spawn_thread. */
    void *spawn_user;
    /**
     * (0.3) The spare threads the pool may add while workers sit in
     * blocking sections (blz_block_begin): at most this many at once. 0:
     * the default, one per worker (num_threads), which keeps the pool at
     * its size even when every worker blocks at once; BLZ_NO_SPARES: none
     * (blocking sections then only take the worker off the cap). Workers
     * plus spares may not exceed BLZ_MAX_THREADS. Spares start through
     * the same path as workers: spawn_thread when set (worker_index is the
     * spare's index, num_threads and up), the hooks and thread_name
     * ("blz-s<index>"), stack_size and the CPU list (entry index mod length).
     */
    uint32_t max_spares;
    /**
     * (0.3) Milliseconds a spare thread stays without a job before it
     * retires (its thread ends, or its spawn_thread run() returns); 0: the
     * default, 1000. A spare never retires while the workers in blocking
     * sections outnumber the other spares.
     */
    uint32_t spare_idle_ms;
} blz_pool_config;

/** blz_pool_config::max_spares: no spare threads at all (0.3). */
#define BLZ_NO_SPARES 0xFFFFFFFFu

/**
 * A snapshot of a pool's counters, filled by blz_pool_stats, or of one
 * worker's, filled by blz_worker_stats. Counters are summed over workers
 * without stopping them, so a snapshot taken while the pool runs may mix
 * moments a few nanoseconds apart. Still, no counter or time ever
 * decreases from one snapshot to a later one (a call that returned before
 * the other began), and each worker is counted once in sleeping_now and
 * inactive_now, so sleeping_now <= inactive_now <= num_threads.
 *
 * A worker's time is in three phases that add up to its life so far:
 * searching (looking for work without a job to run: between jobs, or
 * inside a join whose other half runs elsewhere), sleeping (blocked,
 * waiting for work or for the cap of blz_pool_set_max_active to rise) and
 * running (everything else: jobs, fork-join halves run inline, hooks).
 * Clocks are read only when a worker goes idle or busy, never per job.
 * Utilisation over an interval: the difference of run_ns between two
 * snapshots divided by the difference of the three sums. (To keep every
 * time monotonic, a figure once reported is never taken back: the three
 * times of one snapshot can add up to a few nanoseconds more than the
 * worker's life.)
 */
typedef struct blz_stats {
    /** Set by the caller to sizeof(blz_stats). */
    uint32_t struct_size;
    /** Workers in the pool. */
    uint32_t num_threads;
    /** Workers blocked right now (waiting for work, or held back by the cap of blz_pool_set_max_active). */
    uint32_t sleeping_now;
    /** Workers not running a job right now (searching or sleeping). */
    uint32_t inactive_now;
    /** Jobs taken from a queue (own deque, a steal or the injector) and run.
     *  A job is counted as it starts, so one whose end the caller has seen
     *  (blz_call or a join returned) is always in the count. */
    uint64_t jobs_executed;
    /** Jobs that came from threads outside the pool. */
    uint64_t jobs_injected;
    /** Jobs taken from another worker's deque. */
    uint64_t steals;
    /** Times a worker blocked. */
    uint64_t sleeps;
    /** Times a sleeping worker was woken. */
    uint64_t wakeups;
    /** Wakeups after which the worker found no job before sleeping again. */
    uint64_t spurious_wakeups;
    /** Sleeps abandoned at the last check (JEC changed, injected job seen). */
    uint64_t sleep_aborts;
    /**
     * Failures: each exception caught at a job's boundary (also one escaping
     * an on_done), and each job that called blz_fail (0.2). A statistic, not
     * an exact tally of jobs: for blz_fail, the two halves of a
     * blz_fork_join that the forking worker runs itself are one job, and a
     * half run by a thief is a job of its own, so a fork-join whose halves
     * both fail counts 1 or 2 (and one more if a half also threw) depending
     * on stealing. A spawned task, a blz_call function, a parallel_for piece
     * or a broadcast call that failed counts exactly once.
     */
    uint64_t tasks_failed;
    /** (0.2) Nanoseconds the workers spent running (see above). */
    uint64_t run_ns;
    /** (0.2) Nanoseconds the workers spent searching for work. */
    uint64_t search_ns;
    /** (0.2) Nanoseconds the workers spent blocked. */
    uint64_t sleep_ns;
    /**
     * (0.3) Spare threads alive now (blz_block_begin): running, idle or
     * held back by the cap. Spares are not in num_threads, sleeping_now,
     * inactive_now or the three times; the jobs they run, their steals and
     * their sleeps are in the counters above. This field and the five
     * after it are 0 in a worker's snapshot (blz_worker_stats).
     */
    uint32_t spares_now;
    /** (0.3) Threads of the pool inside a blocking section now that gave their slot back (workers and spares). */
    uint32_t blocked_now;
    /** (0.3) The pool's bound on spares (blz_pool_config::max_spares, resolved). */
    uint32_t max_spares;
    /** (0.3) The most spares ever alive at once. */
    uint32_t spares_peak;
    /** (0.3) Spare threads started so far. */
    uint64_t spares_started;
    /** (0.3) Spare threads retired so far (idle for spare_idle_ms). Those ended by blz_pool_destroy are not counted. */
    uint64_t spares_retired;
} blz_stats;

/**
 * The library's version as BLZ_VERSION_NUMBER computes it, for comparing
 * the loaded library with the header a program was compiled against.
 * Any thread. Never fails.
 *
 * @return MAJOR * 10000 + MINOR * 100 + PATCH of the loaded library.
 */
BLZ_API uint32_t blz_version_number(void);

/**
 * A short English description of a status ("BLZ_EINVAL: invalid argument").
 * Any thread. Never fails.
 *
 * @param status any value; an unknown code gives a generic string.
 * @return a static string, never NULL; do not free it.
 */
BLZ_API const char *blz_status_string(blz_status status);

/**
 * Fills config with the defaults: struct_size set, every other field 0 or
 * NULL. Any thread.
 *
 * @param config the config to fill; NULL: nothing is done.
 */
BLZ_API void blz_pool_config_init(blz_pool_config *config);

/**
 * Creates a pool and starts its workers.
 *
 * Any thread, including a worker of another pool.
 *
 * @param config     NULL for the defaults, else a config whose struct_size is at least the 0.1 layout's.
 * @param out_pool   receives the pool; untouched on failure.
 * @return BLZ_OK;
 *         BLZ_EINVAL if out_pool is NULL, config->struct_size is too small,
 *         config->num_threads is above BLZ_MAX_THREADS, stack_size is
 *         rejected by the platform, or the CPU list (config->cpu_list, else
 *         BLZ_CPU_LIST) is malformed, names a CPU outside the caller's
 *         affinity mask or has more than BLZ_MAX_THREADS entries (0.2),
 *         or the workers plus max_spares exceed BLZ_MAX_THREADS (0.3);
 *         BLZ_ENOMEM if memory ran out;
 *         BLZ_ETHREAD if the OS refused a worker thread, or spawn_thread
 *         returned non-zero or threw (0.2). On every failure
 *         the threads already started are stopped and nothing leaks.
 */
BLZ_API blz_status blz_pool_create(const blz_pool_config *config, blz_pool **out_pool);

/**
 * Waits until every accepted task has finished (spawned, detached, in a
 * group, running), runs on_thread_stop on each worker, joins the workers
 * and frees the pool.
 *
 * While it runs, threads outside the pool that call blz_spawn, blz_call,
 * blz_fork_join, blz_parallel_for or blz_group_spawn on this pool get
 * BLZ_ESHUTDOWN and their work does not run. The pool's own workers are
 * still running accepted work, and what they submit is accepted and run.
 * A call that was admitted before (blz_spawn from another thread, say)
 * may still be posting its task: destroy waits for that call to leave the
 * pool, not only for its task.
 *
 * No call on the pool may start after this function returns, and a call
 * that overlaps its return is not safe either: destroy can wait only for
 * the calls it admitted, and a call from another thread reads the pool to
 * learn whether it is admitted or refused. So every call that runs
 * concurrently with destroy must have been admitted or refused before
 * destroy returns (for example: the calling threads are stopped, or have
 * said they are done, before destroy is called). Calls through a group
 * are the exception: a group that is still alive keeps the pool's
 * bookkeeping (about 128 bytes per worker) until blz_group_destroy, and
 * its spawns then get BLZ_ESHUTDOWN at any time.
 *
 * The pool's own workers, inside accepted work, may still spawn, create
 * groups, call and wait on the pool while destroy waits for that work:
 * what they submit is accepted and run before destroy returns. Destroy
 * lifts the cap of blz_pool_set_max_active for good when it begins, so
 * the accepted work drains on every worker.
 *
 * Destroy waits for calls under way to return, and a worker of another
 * pool that waits in a call (blz_call, blz_fork_join, a join) runs its own
 * pool's jobs meanwhile: its call returns only after those jobs. A
 * destroy made from such a job, or from work it waits for, waits for
 * itself and never returns. Work running in a pool destroys another pool
 * safely with blz_pool_release, which does not wait.
 *
 * Any thread; from one of the pool's own workers it returns BLZ_EDEADLK
 * and changes nothing (blz_pool_release works there).
 *
 * On the handle of the process pool (blz_pool_shared, 0.3) it gives up
 * the caller's reference, and destroys the pool only if that was the last
 * one; see blz_pool_shared.
 *
 * @param pool the pool; it must not be used again once this returned BLZ_OK or BLZ_EFORK.
 * @return BLZ_OK;
 *         BLZ_EINVAL if pool is NULL, or is the process pool given up more
 *         often than blz_pool_shared gave it;
 *         BLZ_EDEADLK if called from one of the pool's workers (nothing changes);
 *         BLZ_EFORK in a child process forked after the pool was created:
 *         the memory is freed without joining threads that do not exist
 *         there, and jobs queued at fork time are neither run nor freed.
 */
BLZ_API blz_status blz_pool_destroy(blz_pool *pool);

/**
 * The number of workers. Any thread.
 *
 * @param pool the pool, or NULL.
 * @return its number of workers; 0 when pool is NULL.
 */
BLZ_API uint32_t blz_pool_num_threads(const blz_pool *pool);

/** blz_default_size's source: BLZ_NUM_THREADS chose the size (0.3). */
#define BLZ_SIZE_FROM_ENVIRONMENT 1u
/** blz_default_size's source: the CPUs in the process's affinity mask (0.3). */
#define BLZ_SIZE_FROM_AFFINITY 2u
/** blz_default_size's source: the cgroup CPU quota, below the affinity mask (0.3). */
#define BLZ_SIZE_FROM_CPU_QUOTA 3u

/**
 * The default pool size and why (blz_default_size, 0.3). Set struct_size
 * to sizeof(blz_default_size_info) before the call.
 */
typedef struct blz_default_size_info {
    /** Set by the caller to sizeof(blz_default_size_info). */
    uint32_t struct_size;
    /** The workers a pool created now with num_threads 0 would get. */
    uint32_t num_threads;
    /** What decided it: BLZ_SIZE_FROM_ENVIRONMENT, _AFFINITY or _CPU_QUOTA. */
    uint32_t source;
    /** BLZ_NUM_THREADS as parsed: 1..65535, or 0 when unset or not such a number. */
    uint32_t environment;
    /** The CPUs in the process's affinity mask (at least 1). */
    uint32_t affinity_cpus;
    /** The CPU quota of the process's cgroup in whole CPUs, rounded up; 0: none. */
    uint32_t quota_cpus;
} blz_default_size_info;

/**
 * Reports the size a pool created now with num_threads 0 would get, and
 * where it comes from. (0.3)
 *
 * The size is BLZ_NUM_THREADS when it parses to 1..65535 (an explicit
 * choice, as num_threads is: it may exceed the CPUs); else the smaller of
 * the CPUs in the process's affinity mask and the CPU quota of the
 * process's cgroup. The quota is read from the cgroup the process is in
 * (/proc/self/cgroup, the mounts in /proc/self/mountinfo), cgroup v2's
 * cpu.max or v1's cpu.cfs_quota_us and cpu.cfs_period_us, the smallest
 * over the cgroup and its ancestors, in whole CPUs rounded up (1.5 CPUs:
 * 2). Everything is read at each call and each pool creation: a quota
 * changed meanwhile applies to the next pool, never to one that exists.
 *
 * Any thread.
 *
 * @param out filled; its struct_size set by the caller.
 * @return BLZ_OK; BLZ_EINVAL if out is NULL or its struct_size is smaller
 *         than the 0.3 layout's (nothing is written).
 */
BLZ_API blz_status blz_default_size(blz_default_size_info *out);

/**
 * The process pool: one pool that every library, binding and thread of
 * the process can share, so that a process using libblitz from C, C++,
 * Rust and Python runs one set of workers, not one per user. (0.3)
 *
 * Each successful call gives the caller one reference to the same pool.
 * The first call (or the first after the pool was given up entirely, see
 * below) creates it from config, NULL meaning the defaults: the size is
 * blz_default_size's (BLZ_NUM_THREADS, else the affinity mask bounded by
 * the cgroup CPU quota) and BLZ_CPU_LIST applies, as for blz_pool_create.
 * A later call with a NULL config gets the pool as it is. A later call
 * with a config gets it only if every field the config sets (non-zero,
 * non-NULL, a non-empty cpu_list) is what the pool already has:
 * num_threads equal to the pool's number of workers, the same stack_size,
 * the same thread_name text ("blz" when the creator set none), the same
 * cpu_list text as the creator's list (its config's, else BLZ_CPU_LIST),
 * the same hook, user, spawn_thread and spawn_user pointers. Otherwise the
 * call returns BLZ_EINVAL and changes nothing: there is never a second,
 * silent process pool. A library that needs its own size or pinning
 * makes its own pool with blz_pool_create.
 *
 * Giving a reference up: blz_pool_destroy or blz_pool_release on the
 * handle, once per successful blz_pool_shared. While other references
 * remain, both only drop the caller's (blz_pool_release then calls
 * on_destroyed(done_arg, BLZ_OK) before it returns), and the caller must
 * not use its handle again; the pool and every other user's work are
 * untouched. Tasks the caller spawned keep running: a reference is a
 * right to call, not an owner of work. The last reference destroys the
 * pool exactly as those calls destroy any pool: blz_pool_destroy waits
 * for every accepted task (also the detached tasks of users who gave up
 * their references before) and joins the workers, and returns BLZ_EDEADLK
 * without change on one of the pool's own workers; blz_pool_release does
 * it on a thread of its own. The next blz_pool_shared then creates a new
 * pool, which may run while the old one still drains. Why not keep the
 * pool to process exit: a library whose users all gave it up leaves no
 * thread behind (its code may then be unloaded), leak checkers see no
 * pool, and a config can change between uses; a user that calls
 * blz_pool_shared for each piece of work, and so would create a pool each
 * time, keeps one reference for its whole life instead.
 *
 * Process exit: libblitz registers no atexit handler and no static
 * destructor for the process pool. exit() (or returning from main) while
 * references are held neither waits for the pool's tasks nor stops them:
 * the workers keep running until the kernel ends the process, and a task
 * running then may meet the program's and other libraries' destroyed
 * static objects (as any thread still running at exit may). To have every
 * task finished at exit, give every reference up before exit: the last
 * blz_pool_destroy waits. blz_pool_shared and the give-ups remain safe to
 * call from atexit handlers and from the workers while exit() runs.
 *
 * fork(): in the child, the parent's process pool is dead like every
 * other parent pool: every call on its handle returns BLZ_EFORK, and so do
 * blz_pool_destroy and blz_pool_release on it, which there free nothing
 * (other handles to it may be given up in the child too; its memory goes
 * with the child). The first blz_pool_shared in the child creates a fresh
 * pool, sized and configured as in a new process.
 *
 * dlclose: a library that used the process pool must, before it is
 * unloaded, give its references up and wait for the tasks running its
 * code (blz_group_wait, blz_join): the pool outlives it when other users
 * hold it, and its workers would otherwise run unmapped code. libblitz
 * itself stays loaded while any library linked against it is.
 *
 * Any thread, including the workers of any pool (the pool's own workers
 * get it too). Thread-safe: concurrent first calls create one pool and
 * all get it. The call creating the pool holds a lock that the others
 * wait for, so config->spawn_thread (which that call runs) must not call
 * blz_pool_shared, blz_pool_destroy or blz_pool_release on this pool, nor
 * fork() (the fork handlers take the same lock).
 *
 * @param config   NULL: the defaults when creating, anything when not; else as for blz_pool_create, and checked as above.
 * @param out_pool receives the process pool's handle (a reference); untouched on failure.
 * @return BLZ_OK;
 *         BLZ_EINVAL if out_pool is NULL, config is malformed (as for
 *         blz_pool_create), or config asks for something the existing
 *         pool does not have (nothing changes);
 *         BLZ_ENOMEM, BLZ_ETHREAD as blz_pool_create when creating.
 */
BLZ_API blz_status blz_pool_shared(const blz_pool_config *config, blz_pool **out_pool);

/**
 * Which of pool's workers the calling thread is. Any thread.
 *
 * @param pool the pool, or NULL.
 * @return the calling thread's index in pool (0 .. num_threads - 1), or -1
 *         unless the caller is one of pool's workers (also for NULL). On
 *         one of pool's spare threads (blz_block_begin, 0.3): its index,
 *         num_threads .. num_threads + max_spares - 1.
 */
BLZ_API int32_t blz_worker_index(const blz_pool *pool);

/**
 * Fills the fields of out_stats that fit in out_stats->struct_size (set it
 * to sizeof(blz_stats); an older, shorter struct gets its prefix).
 * sleeping_now lets a caller wait until the pool is asleep.
 *
 * Any thread.
 *
 * @param pool      the pool.
 * @param out_stats receives the snapshot; its struct_size says how much of it.
 * @return BLZ_OK;
 *         BLZ_EINVAL if pool or out_stats is NULL or struct_size is smaller than 4;
 *         BLZ_ESHUTDOWN if called from outside the pool once blz_pool_destroy has begun;
 *         BLZ_EFORK in a forked child.
 */
BLZ_API blz_status blz_pool_stats(const blz_pool *pool, blz_stats *out_stats);

/**
 * Runs fn(arg) on a worker of pool, later. With out_task NULL the task is
 * detached: its end is not reported and an exception in it is only
 * counted in tasks_failed. Otherwise *out_task receives a handle that must
 * be passed to blz_join exactly once.
 *
 * Called from one of pool's workers, the task goes to that worker's deque;
 * from any other thread (including another pool's worker), it goes
 * through pool's injector and wakes a sleeping worker if needed.
 *
 * @param pool     the pool that runs the task.
 * @param fn       the function to run.
 * @param arg      passed to fn; it must stay valid until fn has run.
 * @param out_task NULL for a detached task, else receives the handle to join.
 * @return BLZ_OK;
 *         BLZ_EINVAL if pool or fn is NULL;
 *         BLZ_ENOMEM if memory ran out (the task will not run);
 *         BLZ_ESHUTDOWN if pool is being destroyed (the task will not run);
 *         BLZ_EFORK in a forked child.
 */
BLZ_API blz_status blz_spawn(blz_pool *pool, blz_fn fn, void *arg, blz_task **out_task);

/**
 * Waits until task has run, then frees the handle. The handle stays valid
 * until this call, even after its pool was destroyed. One thread joins a
 * task, once.
 *
 * Any thread. A worker runs other jobs of its pool while it waits.
 *
 * @param task the handle blz_spawn gave.
 * @return BLZ_OK if the task returned normally;
 *         BLZ_ETASK if it ended by an exception or called blz_fail (the handle is freed);
 *         BLZ_ECANCELED if its group (0.2) or the task itself
 *         (blz_task_cancel, 0.3) was cancelled before it started (it did
 *         not run; the handle is freed);
 *         BLZ_EINVAL if task is NULL, or if libblitz sees that the handle is
 *         not the caller's to join: another thread is waiting for the task
 *         right now, or it was detached (nothing changes). That is misuse
 *         (a handle is joined once, by one thread at a time): the check is a
 *         diagnostic that keeps a second join from freeing the task twice,
 *         not a promise, and a handle already freed is undefined behaviour;
 *         BLZ_EDEADLK if called from inside the task itself, including from
 *         work the task is waiting for on another thread (a stolen
 *         blz_fork_join half, a blz_call) and from its on_done; nothing changes;
 *         BLZ_EFORK in a child forked before the task ran (the handle is
 *         given up; the child keeps the memory of a task spawned after
 *         predecessors or waiting to finish later, since an event set in
 *         the child still reaches it, and frees that of any other).
 */
BLZ_API blz_status blz_join(blz_task *task);

/**
 * Runs a(arg_a) and b(arg_b), possibly in parallel, and returns when both
 * have finished. On a worker of pool, a runs inline and b waits on the
 * worker's fork stack, from which it is handed to an idle worker that asks
 * for work; if nobody took it, the worker runs it inline after a. No heap
 * allocation, and no fence or locked instruction unless another worker
 * asked for work (see "The inline fork path" below). From any other
 * thread the pair first moves into the pool, as blz_call does.
 *
 * Only "possibly" in parallel: a must not wait for something b does (a
 * spin, a lock, a condition b signals). With every other worker busy, b can
 * stay on the calling worker until a returns, and then the pair deadlocks.
 *
 * @param pool  the pool that runs them.
 * @param a     run first, on the calling worker.
 * @param arg_a passed to a.
 * @param b     run on a thief, or after a on the calling worker.
 * @param arg_b passed to b.
 * @return BLZ_OK;
 *         BLZ_ETASK if a or b (or both) ended by an exception or called blz_fail; both ran;
 *         BLZ_EINVAL if pool, a or b is NULL;
 *         BLZ_ESHUTDOWN if called from outside while pool is being destroyed;
 *         BLZ_EFORK in a forked child.
 */
BLZ_API blz_status blz_fork_join(blz_pool *pool, blz_fn a, void *arg_a, blz_fn b, void *arg_b);

/**
 * @name The inline fork path (0.3)
 *
 * What blitz.hpp's blz::pool::join compiles into its caller, so that a
 * fork-join that nobody steals never enters the library: the calling
 * worker's fork stack (blz_fork_stack), reached through the thread-local
 * pointer blz_fork_stack_v1, and two functions for the cases the inline
 * code leaves to the library. Programs do not use these themselves; they
 * are here because their layout is part of the ABI: a library that
 * changes it exports a new pointer (blz_fork_stack_v2, ...) and keeps this
 * one NULL, which sends code compiled against this header down the
 * exported path. docs/protocol.md, "The fork stack", has the rules.
 *
 * The protocol, on a worker of the pool (blz_fork_stack_v1 non-NULL and
 * its pool the one forked on):
 *  1. push: if depth < capacity and requests == 0 (a relaxed atomic load),
 *     store the frame's address at frames[depth] and add one to depth;
 *     otherwise call blz_fork_push_v1, which pushes it (maybe promoting
 *     it, or an older frame, to a job other workers can steal) or returns
 *     0 when it could not (out of memory: run both halves inline);
 *  2. run the first half;
 *  3. pop: if depth - 1 >= promoted, the frame was never promoted: store
 *     depth - 1 and run the second half inline (and add one to
 *     jobs_executed, a relaxed atomic); otherwise call blz_fork_join_v1,
 *     which takes the frame back or waits for the worker that stole it;
 *  4. failures: if *failures changed since step 1, a half called blz_fail
 *     (or an exception was reported through it): blz_fork_failed_v1.
 * @{
 */

/** The layout version of blz_fork_frame and blz_fork_stack: the suffix of blz_fork_stack_v1. */
#define BLZ_FORK_LAYOUT_VERSION 1

/**
 * A fork's second half, on the forker's stack from the fork to the join.
 * Only its owner touches it, until the library promotes it: then job holds
 * the library's job, which another worker may run.
 */
typedef struct blz_fork_frame {
  /** The second half: fn(arg). Must not throw (blitz.hpp catches first). */
  blz_fn fn;
  /** Its argument. */
  void *arg;
  /** The library's, once promoted; never initialized by the caller. */
  uintptr_t job[8];
} blz_fork_frame;

/**
 * One worker's fork stack. The first cache line is its owner's alone; the
 * second holds requests, which other threads set.
 */
typedef struct blz_fork_stack {
  /** The pool this worker belongs to. */
  const blz_pool *pool;
  /** The pending and promoted frames, oldest first. */
  blz_fork_frame **frames;
  /** The number of frames pushed and not yet joined. */
  uint32_t depth;
  /** The length of frames. */
  uint32_t capacity;
  /** frames[0, promoted) are promoted: other workers may run them. */
  uint32_t promoted;
  /** Zero. */
  uint32_t reserved0;
  /** This thread's blz_fail count. */
  uint32_t *failures;
  /** Jobs this worker ran (blz_worker_stats); a relaxed atomic. */
  uint64_t jobs_executed;
  /** Zero: pads the owner's line. */
  uint64_t reserved1[2];
  /** Non-zero: the next push goes through blz_fork_push_v1 (a relaxed atomic). */
  uint32_t requests;
  /** Zero: pads the shared line. */
  uint32_t reserved2[15];
} blz_fork_stack;

/**
 * Pushes frame on stack, the calling worker's own, when the inline test
 * of step 1 failed. (0.3)
 * @param stack the calling thread's blz_fork_stack_v1.
 * @param frame the fork's frame; fn and arg set.
 * @return 1 when pushed; 0 when it could not be (out of memory): the
 *         caller runs both halves itself and does not pop.
 */
BLZ_API int blz_fork_push_v1(blz_fork_stack *stack, blz_fork_frame *frame);

/**
 * Joins frame, the newest on stack, when it was promoted: pops it back
 * and runs it, or runs other jobs of the pool until the worker that stole
 * it has finished. (0.3)
 * @param stack the calling thread's blz_fork_stack_v1.
 * @param frame the frame step 1 pushed.
 * @return 1 when frame->fn ran and returned normally.
 */
BLZ_API int blz_fork_join_v1(blz_fork_stack *stack, blz_fork_frame *frame);

/**
 * Step 4: puts the thread's blz_fail count back to before and counts one
 * failed job (blz_stats::tasks_failed; a cancel_on_failure group of the
 * task this runs in is cancelled). (0.3)
 * @param stack  the calling thread's blz_fork_stack_v1.
 * @param before *failures at step 1.
 */
BLZ_API void blz_fork_failed_v1(blz_fork_stack *stack, uint32_t before);

/**
 * Where the calling thread's blz_fork_stack_v1 is, for languages that
 * cannot name another library's thread-local variable (Rust): the address
 * stays valid for the thread's life, its value changes as the thread
 * becomes a worker and stops being one. Only read through it: the
 * library alone writes the pointer. (0.3)
 * @return the address of the calling thread's blz_fork_stack_v1.
 */
BLZ_API blz_fork_stack **blz_fork_stack_slot_v1(void);

#if defined(__GNUC__)
/**
 * The calling thread's fork stack when it is a worker of a pool, else
 * NULL. Written only by the thread itself. initial-exec: one load from the
 * thread pointer (libblitz.so is in the static TLS block, also when a
 * program loads it with dlopen). (0.3)
 */
BLZ_API extern __thread blz_fork_stack *blz_fork_stack_v1 __attribute__((tls_model("initial-exec")));

/**
 * blz_fork_join compiled into the caller (0.3): the same arguments, status
 * and promises, but a fork that nobody steals makes no call into the
 * library (steps 1 to 4 above, written out here), and a compiler that sees
 * a and b as constants calls them directly and may inline them. Off a
 * worker of pool, or with a or b NULL, it is a call of blz_fork_join.
 *
 * One difference: a and b must return normally, as C functions do. A half
 * left by an unwind (pthread_exit, a C++ exception, longjmp) leaves b's
 * frame on the fork stack after the caller's stack frame is gone, where a
 * thief can still run it; blz_fork_join stops the process with a message
 * in that case instead. Code that may unwind uses blz_fork_join or
 * blitz.hpp's blz::pool::join.
 *
 * @return as blz_fork_join.
 */
static inline blz_status blz_fork_join_inline(blz_pool *pool, blz_fn a, void *arg_a, blz_fn b, void *arg_b) {
  blz_fork_stack *const stack = blz_fork_stack_v1;
  blz_fork_frame frame;
  uint32_t failures_before, depth;
  int ok = 1;
  if (__builtin_expect(!stack || stack->pool != pool || !a || !b, 0))
    return blz_fork_join(pool, a, arg_a, b, arg_b);
  frame.fn = b;
  frame.arg = arg_b;
  failures_before = *stack->failures;
  depth = stack->depth; /* step 1 */
  /* relaxed: requests is a hint other workers set. */
  if (__builtin_expect(depth < stack->capacity && __atomic_load_n(&stack->requests, __ATOMIC_RELAXED) == 0, 1)) {
    stack->frames[depth] = &frame;
    stack->depth = depth + 1;
  } else if (blz_fork_push_v1(stack, &frame) == 0) { /* out of memory: both halves here */
    a(arg_a);
    b(arg_b);
    goto failures;
  }
  a(arg_a); /* step 2 */
  depth = stack->depth - 1; /* step 3 */
  if (__builtin_expect(depth >= stack->promoted, 1)) {
    stack->depth = depth;
    /* relaxed load and store: only this thread writes it; statistics read it. */
    __atomic_store_n(&stack->jobs_executed, __atomic_load_n(&stack->jobs_executed, __ATOMIC_RELAXED) + 1,
                     __ATOMIC_RELAXED);
    b(arg_b);
  } else {
    ok = blz_fork_join_v1(stack, &frame);
  }
failures: /* step 4 */
  if (__builtin_expect(*stack->failures != failures_before, 0)) {
    blz_fork_failed_v1(stack, failures_before);
    ok = 0;
  }
  return ok ? BLZ_OK : BLZ_ETASK;
}
#else
/** blz_fork_join, where the compiler cannot name the thread-local fork stack. */
static inline blz_status blz_fork_join_inline(blz_pool *pool, blz_fn a, void *arg_a, blz_fn b, void *arg_b) {
  return blz_fork_join(pool, a, arg_a, b, arg_b);
}
#endif
/** @} */

/**
 * Runs fn(arg) on one of pool's workers and waits for it. On a worker of
 * pool it runs inline.
 *
 * @param pool the pool that runs it.
 * @param fn   the function to run.
 * @param arg  passed to fn.
 * @return BLZ_OK;
 *         BLZ_ETASK if fn ended by an exception or called blz_fail;
 *         BLZ_EINVAL if pool or fn is NULL;
 *         BLZ_ESHUTDOWN if called from outside while pool is being destroyed;
 *         BLZ_EFORK in a forked child.
 */
BLZ_API blz_status blz_call(blz_pool *pool, blz_fn fn, void *arg);

/**
 * Runs fn(arg) as blz_call does, isolated: while it runs, every wait
 * inside it (a blz_fork_join join, blz_join and blz_task_wait_for,
 * blz_group_wait and blz_group_wait_for, a blz_call, a blz_parallel_for)
 * runs only work forked or spawned inside it. (0.3)
 *
 * Why: a waiting worker normally runs other jobs of the pool, and one of
 * them may need something the waiter holds. A function that locks a mutex
 * and then waits for a join would deadlock if, while waiting, its worker
 * took another task that locks the same mutex (rayon-rs/rayon#592):
 * isolated, it cannot take that task. docs/embedding.md says when to use
 * it.
 *
 * What it promises: the isolation travels with the work. A fork-join half,
 * a task (blz_spawn, blz_spawn_ex, blz_group_spawn), a blz_parallel_for
 * piece or a blz_call made inside fn, at any depth, runs isolated too,
 * whichever worker takes it; a worker that runs such a job, while the job
 * waits, runs only what the job itself forked or spawned. Regions nest.
 * Outside work is not lost: other workers run it, and a waiting worker
 * that has nothing of its own to run blocks on its wait without being
 * counted as idle, so work posted meanwhile wakes another worker.
 *
 * What it does not promise: it does not make a wait inside fn for work
 * made outside it safe. Waiting inside fn for a task spawned outside is
 * allowed, but the waiter never runs that task; if the only worker that
 * could is the waiter itself, or waits for the waiter, it deadlocks as a
 * non-isolated wait would not. A task made inside fn and detached may
 * still run after blz_isolate returned (isolated). A blz_broadcast made
 * inside runs the caller's own share on the spot; a worker blocked in an
 * isolated wait runs its share of any broadcast once that wait ends.
 * Isolation costs
 * parallelism: an isolated waiter sits idle where it would have helped.
 * Work outside any isolated region costs nothing more.
 *
 * Threads: any thread. On a worker of pool, fn runs inline. From anywhere
 * else (a thread outside the pool, a worker of another pool) it runs on
 * one of pool's workers, as blz_call runs it; a worker of another pool
 * waits for it isolated too.
 *
 * @param pool the pool that runs it.
 * @param fn   the function to run.
 * @param arg  passed to fn.
 * @return BLZ_OK;
 *         BLZ_ETASK if fn ended by an exception or called blz_fail;
 *         BLZ_EINVAL if pool or fn is NULL;
 *         BLZ_ESHUTDOWN if called from outside while pool is being destroyed;
 *         BLZ_EFORK in a forked child.
 */
BLZ_API blz_status blz_isolate(blz_pool *pool, blz_fn fn, void *arg);

/**
 * Tells the pool that the calling task is about to block outside the pool
 * (I/O, a lock, a wait for an external event), until blz_block_end. (0.3)
 *
 * On a worker of a pool (or one of its spare threads) that is running a
 * job, the thread stops counting against the pool's size and its cap
 * (blz_pool_set_max_active) for the section, and the pool keeps as many
 * threads runnable as before: it unparks a thread the cap held back, or
 * wakes or starts a spare thread, up to blz_pool_config::max_spares
 * spares alive at once. A spare runs the pool's jobs like a worker (it
 * steals, sleeps and is woken the same way) and retires when it had no
 * job for spare_idle_ms, unless blocked threads still outnumber the other
 * spares. blz_stats counts them (spares_now, blocked_now, spares_started,
 * spares_retired, spares_peak). When the bound is reached, or the OS
 * refuses the thread, the section runs without a stand-in, as a blocking
 * task did before 0.3.
 *
 * Sections nest: only the outermost pair counts. Keep a section to the
 * blocking call: a fork-join or a wait inside it still works, but the jobs
 * the thread runs there run beside its stand-in, above the pool's size.
 * Anywhere else (a thread outside every pool, a worker's on_thread_start
 * hook, a blz_broadcast call on a worker held back by the cap) the pair
 * only counts the nesting and changes nothing. In a spare,
 * blz_worker_index returns its index, num_threads and up (below
 * num_threads + max_spares): size per-thread arrays by both, or use
 * blz_pool_num_threads only for the pool's size. A blz_broadcast reaches
 * the workers, not the spares.
 *
 * Any thread. Never blocks (a spare's thread start, when one is needed, is
 * made here).
 *
 * @return BLZ_OK.
 */
BLZ_API blz_status blz_block_begin(void);

/**
 * Ends the blocking section the calling thread's last blz_block_begin
 * opened. (0.3)
 *
 * The outermost end takes the thread back into the pool at once, never
 * waiting for the cap: waiting could deadlock when every running thread
 * waits for the job this thread is in. If the pool is then above its size
 * or cap, the next thread to finish a job sits out (a spare first
 * retires or parks, any thread may), so no thread takes a new job while
 * the pool is above its cap: the returning thread finishes its own job
 * beside them.
 *
 * Any thread; the same thread that called blz_block_begin.
 *
 * @return BLZ_OK;
 *         BLZ_EINVAL if the calling thread has no open section.
 */
BLZ_API blz_status blz_block_end(void);

/**
 * Runs fn(arg) as a blocking section: blz_block_begin, fn(arg),
 * blz_block_end, on the calling thread. (0.3)
 *
 * Any thread.
 *
 * @param fn  the blocking function.
 * @param arg passed to fn.
 * @return BLZ_OK;
 *         BLZ_EINVAL if fn is NULL;
 *         BLZ_ETASK if fn ended by a C++ exception (caught here; the
 *         section is closed either way).
 */
BLZ_API blz_status blz_blocking(blz_fn fn, void *arg);

/**
 * Calls body(arg, lo, hi) on disjoint sub-ranges that cover [begin, end)
 * exactly once, at most grain indices per call (0: automatic, about eight
 * pieces per worker). Returns when every piece has run. From outside the
 * pool it first moves into the pool.
 *
 * (0.3) The range is split lazily: a worker runs its pieces one after the
 * other and splits what is left in two (a fork-join) only when another
 * worker has asked it for work, so a small grain costs about a function
 * call per piece when nobody steals, and the loop still spreads over idle
 * workers. Pieces on one worker run in index order between splits; no
 * order across workers is promised.
 *
 * Called from inside a task of a group (0.2), the loop obeys the group's
 * cancellation: once the group is cancelled, no further piece starts (each
 * piece costs one relaxed load to check), the pieces already running
 * finish, and the call returns BLZ_ECANCELED. With
 * BLZ_GROUP_CANCEL_ON_FAILURE, a failing piece cancels the group, so the
 * rest of the loop is skipped. Outside any group it behaves as in 0.1.
 *
 * @param pool  the pool that runs the loop.
 * @param begin the first index.
 * @param end   one past the last index.
 * @param grain the most indices per call of body; 0: automatic.
 * @param body  called as body(arg, lo, hi), concurrently on several workers.
 * @param arg   passed to every call of body.
 * @return BLZ_OK, also when begin == end (body is not called);
 *         BLZ_ETASK if a call of body ended by an exception or called blz_fail
 *         (every other piece still ran, unless the group's cancel skipped them);
 *         BLZ_ECANCELED if the task's group was cancelled and pieces were skipped (0.2);
 *         BLZ_EINVAL if pool or body is NULL or begin > end;
 *         BLZ_ESHUTDOWN if called from outside while pool is being destroyed;
 *         BLZ_EFORK in a forked child.
 */
BLZ_API blz_status blz_parallel_for(blz_pool *pool, size_t begin, size_t end, size_t grain,
                                    blz_range_fn body, void *arg);

/**
 * Creates an empty group of tasks on pool. Any thread.
 *
 * @param pool      the pool that will run the group's tasks.
 * @param out_group receives the group; untouched on failure.
 * @return BLZ_OK;
 *         BLZ_EINVAL if pool or out_group is NULL;
 *         BLZ_ENOMEM if memory ran out;
 *         BLZ_ESHUTDOWN if pool is being destroyed;
 *         BLZ_EFORK in a forked child.
 */
BLZ_API blz_status blz_group_create(blz_pool *pool, blz_group **out_group);

/**
 * Spawns fn(arg) as a task of group (on the group's pool, as blz_spawn
 * does). Any thread, any number of threads at once.
 *
 * @param group the group.
 * @param fn    the function to run.
 * @param arg   passed to fn; it must stay valid until fn has run.
 * @return BLZ_OK;
 *         BLZ_EINVAL if group or fn is NULL;
 *         BLZ_ENOMEM if memory ran out (the task will not run);
 *         BLZ_ESHUTDOWN if the pool is being (or was) destroyed (the task will not run);
 *         BLZ_EFORK in a forked child.
 */
BLZ_API blz_status blz_group_spawn(blz_group *group, blz_fn fn, void *arg);

/**
 * Waits until the group has no unfinished task: every task spawned before
 * the call has run. The group can be reused afterwards. Several threads
 * may wait at once; a stream of new spawns from other threads can delay
 * the return.
 *
 * Any thread. A worker runs other jobs of its pool while it waits.
 *
 * @param group the group.
 * A cancelled group (0.2, blz_group_cancel) is reset by the wait that
 * reports it: later spawns run again.
 *
 * @return BLZ_OK;
 *         BLZ_ETASK if a task of the group ended by an exception or called
 *         blz_fail since the previous wait (the failure is reported once,
 *         and a cancellation with it is reset);
 *         BLZ_ECANCELED if the group was cancelled since the previous wait
 *         and no task failed (0.2; reported once: the group is reset);
 *         BLZ_EINVAL if group is NULL;
 *         BLZ_EDEADLK if called from inside one of the group's tasks, or from
 *         work such a task is waiting for on another thread, or from the
 *         on_done of one of its tasks (nothing changes);
 *         BLZ_EFORK in a forked child.
 */
BLZ_API blz_status blz_group_wait(blz_group *group);

/**
 * Waits as blz_group_wait does, then frees the group.
 *
 * Any thread, once per group, with no other call on the group under way.
 *
 * @param group the group.
 * @return the status of the wait, as blz_group_wait returns it; the group
 *         is freed unless the status is BLZ_EINVAL or BLZ_EDEADLK.
 */
BLZ_API blz_status blz_group_destroy(blz_group *group);

/* ---- 0.2: completion callbacks, bounded waits, cancellation, failure, broadcast, release ---- */

/**
 * Fills opts with the defaults: struct_size set, flags 0, no group, no
 * on_done. Any thread. (0.2)
 *
 * @param opts the options to fill; NULL: nothing is done.
 */
BLZ_API void blz_spawn_options_init(blz_spawn_options *opts);

/**
 * Spawns fn(arg) as blz_spawn does, with options: a group, and a
 * completion callback. (0.2)
 *
 * on_done(done_arg, status) runs exactly once for every task this call
 * accepted (returned BLZ_OK), and never when it returns an error. It runs
 * on the worker that finished the task, after fn returned, with BLZ_OK,
 * BLZ_ETASK (fn threw, or called blz_fail) or BLZ_ECANCELED (the task,
 * or its group, was cancelled before it started, so fn did not run). It
 * runs before the task counts as finished (unless the flags hold
 * BLZ_SPAWN_DONE_AFTER_FINISH: then right after): before a blz_join or
 * blz_task_wait_for of the task returns (they see the same status),
 * before a blz_group_wait of its group returns, and before
 * blz_pool_destroy returns (queued tasks are still run, or skipped as
 * cancelled, while destroy drains the pool). It must not block for long: a
 * worker runs it. An exception escaping it is caught and counted in
 * tasks_failed; it changes no status. on_done belongs to no task, neither
 * to the one it reports nor to a task whose join it happens to run in:
 * blz_cancelled() returns 0 in it, blz_fail() has no effect, and a
 * blz_parallel_for it calls obeys no group. Waiting in it for its own
 * task (blz_join, blz_task_wait_for) or its task's group (blz_group_wait,
 * blz_group_wait_for, blz_group_destroy), or for a task it runs nested in,
 * returns BLZ_EDEADLK and changes nothing: the task has not finished
 * until on_done returned.
 *
 * Dependencies (0.3). A task spawned with predecessors (opts->after_tasks,
 * after_events, after_groups) is accepted at once (it counts in its group
 * and in its pool, and its handle is valid) but is queued only when the
 * last of its predecessors has completed; until then it holds no worker
 * and no thread waits for it. A predecessor completes:
 *  - a task: when it finishes, as a blz_join of it would return (after its
 *    on_done, unless BLZ_SPAWN_DONE_AFTER_FINISH; before its group hears
 *    of the end). A task that has finished already counts as complete with
 *    its status. The handles are read during the call only: each must be
 *    valid then (not joined, detached or waited for meanwhile), and may be
 *    joined or detached right after the call, whatever the successor does;
 *  - an event: when it is set, with the status it is set with, or when it
 *    is destroyed unset (BLZ_ECANCELED). An event set already counts at once;
 *  - a group: when it has no task left, as blz_group_wait would return,
 *    with what that wait would report (BLZ_ETASK, BLZ_ECANCELED or BLZ_OK;
 *    the group is not reset, its own wait still reports it). A group with
 *    no task at the call counts at once; tasks spawned into it later do
 *    not delay this task.
 * Predecessors may belong to other pools. Everything a predecessor did
 * before it completed (a task's fn and on_done, the writes before a
 * blz_event_set, the tasks of a group) happens before fn starts. The last
 * predecessor's thread queues the task (from an event's setter: the task
 * goes to the pool's queue as a spawn from outside does) and never runs it
 * inside the predecessor: a worker whose task's end made it ready may run
 * it next, once that task has returned (docs/protocol.md, "Continuations");
 * a task with any number of predecessors or successors costs a constant
 * amount of work per edge, and none recurses.
 *
 * A predecessor that ended in BLZ_ETASK or BLZ_ECANCELED cancels the task,
 * unless opts->flags holds BLZ_SPAWN_AFTER_ANY_END: fn is not called, the
 * task's status is BLZ_ECANCELED, on_done gets it, and its own successors
 * then see BLZ_ECANCELED in turn. A cancel of the task (blz_task_cancel)
 * or of its group while it waits for predecessors skips it the same way
 * once they have completed: it still waits for them (a group wait
 * returns once they complete), and fn never runs.
 *
 * A task waiting for predecessors is accepted work: blz_pool_destroy
 * waits for it as for any other. A task that waits for an event that no
 * one will set keeps destroy waiting until the event is set or destroyed
 * (blz_event_destroy of an unset event completes it with BLZ_ECANCELED,
 * which cancels the task or, with BLZ_SPAWN_AFTER_ANY_END, runs it): an
 * embedder tears down its events, or sets them, before or while it
 * destroys the pool.
 *
 * Any thread.
 *
 * @param pool     the pool that runs the task; may be NULL when opts->group
 *                 is set (the group's pool is used), else must be the group's pool.
 * @param fn       the function to run.
 * @param arg      passed to fn; it must stay valid until fn has run.
 * @param opts     NULL for the defaults (then this is blz_spawn), else
 *                 options whose struct_size is at least the 0.2 layout's.
 * @param out_task NULL for a detached task, else receives the handle, to be
 *                 passed once to blz_join, or to blz_task_wait_for until it
 *                 returns something other than BLZ_ETIMEDOUT, or to
 *                 blz_task_detach. Written before the task can start (so
 *                 fn and on_done may read it where the caller stored it),
 *                 and left untouched when the call fails.
 * @return BLZ_OK;
 *         BLZ_EINVAL if fn is NULL, pool and opts->group are both NULL,
 *         pool is not opts->group's pool, opts->struct_size is too small
 *         or opts->flags has an unknown bit, or a predecessor list is NULL
 *         with a nonzero count or holds a NULL handle (0.3);
 *         BLZ_EDEADLK if opts->group is among opts->after_groups: the task
 *         would wait for itself (0.3);
 *         BLZ_ENOMEM if memory ran out;
 *         BLZ_ESHUTDOWN if pool is being (or was) destroyed: from outside
 *         the pool once destroy began, also through a group that outlived
 *         its pool (pool NULL, opts->group set), and from the pool's own
 *         workers once its accepted work is done (in on_thread_stop);
 *         BLZ_EFORK in a forked child. On every error the task will not
 *         run and on_done is not called.
 */
BLZ_API blz_status blz_spawn_ex(blz_pool *pool, blz_fn fn, void *arg, const blz_spawn_options *opts,
                                blz_task **out_task);

/**
 * Waits at most timeout_ns nanoseconds for task to finish. (0.2)
 *
 * On BLZ_ETIMEDOUT nothing changed: the handle stays valid, to be waited
 * for again, joined or detached. Any other status is what blz_join returns,
 * and the handle is freed. A worker of the task's pool runs other jobs of
 * its pool while it waits, as in blz_join, and a job it runs is never
 * interrupted: the wait can then end later than the timeout. Any other
 * thread blocks without spinning.
 *
 * Any thread; one thread at a time per task.
 *
 * @param task       the handle blz_spawn or blz_spawn_ex gave.
 * @param timeout_ns how long to wait: 0 only polls, without blocking;
 *                   UINT64_MAX waits as blz_join does.
 * @return BLZ_OK, BLZ_ETASK or BLZ_ECANCELED: the task finished with that
 *         status (the handle is freed);
 *         BLZ_ETIMEDOUT if it had not finished in time (the handle stays valid);
 *         BLZ_EINVAL as for blz_join (nothing changes);
 *         BLZ_EDEADLK as for blz_join (nothing changes);
 *         BLZ_EFORK as for blz_join (the handle is freed).
 */
BLZ_API blz_status blz_task_wait_for(blz_task *task, uint64_t timeout_ns);

/**
 * Frees the handle without waiting for the task, which still runs (and
 * calls its on_done) as if it had been spawned detached. (0.2)
 *
 * Any thread, including the task itself; once per handle, instead of a
 * join, and not while another thread waits for the task (a handle is used
 * by one thread at a time).
 *
 * @param task the handle blz_spawn or blz_spawn_ex gave.
 * @return BLZ_OK (the handle must not be used again);
 *         BLZ_EINVAL if task is NULL, or if libblitz sees that another
 *         thread is waiting for the task right now (nothing changes). As in
 *         blz_join, that is misuse caught when it is seen, not a promise:
 *         a waiter whose bounded wait ends at that moment may be missed, and
 *         a handle already joined or detached is undefined behaviour.
 */
BLZ_API blz_status blz_task_detach(blz_task *task);

/**
 * Cancels one task, as blz_group_cancel cancels a group. (0.3)
 *
 * A task that has not started is skipped: fn does not run, its on_done
 * gets BLZ_ECANCELED and a join of it returns BLZ_ECANCELED. A running
 * task is not interrupted: blz_cancelled() returns 1 in it from then on,
 * and a blz_parallel_for it calls stops starting pieces; its status stays
 * what fn makes it. A finished task does not change. The task's group, if
 * it has one, is not cancelled, and its other tasks run as before; the
 * group's wait reports the skipped task as a cancellation (BLZ_ECANCELED,
 * unless a task failed), as it does for a task its own cancel skipped.
 *
 * A cancel is a request, seen soon but not at once: a task that starts on
 * another worker at the moment of the call may still run (then it sees
 * blz_cancelled() == 1). Cancelling twice is the same as once.
 *
 * Any thread, including the task itself, while the handle is valid: not
 * after (nor concurrently with) the blz_join, blz_task_wait_for or
 * blz_task_detach that frees it. A detached task cannot be cancelled.
 *
 * @param task the handle blz_spawn or blz_spawn_ex gave.
 * @return BLZ_OK (also for a task that had already started or finished);
 *         BLZ_EINVAL if task is NULL.
 */
BLZ_API blz_status blz_task_cancel(blz_task *task);

/**
 * Creates an empty group with flags. blz_group_create is this with flags 0. (0.2)
 *
 * BLZ_GROUP_CANCEL_ON_FAILURE: the first failure of the group's work (an
 * exception or a blz_fail in a task, in a fork-join half or in a
 * blz_parallel_for piece that such a task runs) cancels the group at once,
 * as blz_group_cancel does: fail-fast. Its wait then reports BLZ_ETASK if
 * one of its tasks failed, else BLZ_ECANCELED: a failure inside a task that
 * the task itself handled (a blz_fork_join half whose BLZ_ETASK it went
 * past) cancels the group but is not the task's failure. Work a task of
 * the group waits for counts as the group's work wherever it runs: a
 * failing function of a blz_call or blz_broadcast that the task makes, into
 * its own pool or another, cancels the group too, while the call returns
 * BLZ_ETASK to the task. An on_done and the thread hooks are no group's
 * work.
 *
 * Any thread. On a pool being destroyed: BLZ_ESHUTDOWN from outside, but
 * the pool's own workers inside accepted work may still create groups.
 *
 * @param pool      the pool that will run the group's tasks.
 * @param flags     0 or BLZ_GROUP_CANCEL_ON_FAILURE; other bits: BLZ_EINVAL.
 * @param out_group receives the group; untouched on failure.
 * @return as blz_group_create; BLZ_EINVAL also for an unknown flag.
 */
BLZ_API blz_status blz_group_create_ex(blz_pool *pool, uint32_t flags, blz_group **out_group);

/**
 * Waits as blz_group_wait does, but at most timeout_ns nanoseconds. (0.2)
 *
 * Any thread. A worker runs other jobs of its pool while it waits (a job
 * it runs is not interrupted, so the wait can end later than the timeout).
 *
 * @param group      the group.
 * @param timeout_ns 0 only polls; UINT64_MAX waits as blz_group_wait does.
 * @return what blz_group_wait returns, and then the group was reset as it
 *         resets it; or BLZ_ETIMEDOUT if a task of the group was still
 *         unfinished at the deadline (nothing changed: no failure or
 *         cancellation was consumed).
 */
BLZ_API blz_status blz_group_wait_for(blz_group *group, uint64_t timeout_ns);

/**
 * Cancels the group. (0.2)
 *
 * Tasks of the group that have not started are skipped: fn does not run,
 * on_done gets BLZ_ECANCELED, a join of one returns BLZ_ECANCELED. Tasks
 * spawned into the group afterwards are skipped the same way, until a wait
 * of the group returns and resets it. Running tasks are not interrupted:
 * they may ask blz_cancelled() or blz_group_cancelled() and return early,
 * and a blz_parallel_for they call stops starting pieces. Once nothing of
 * the group runs, blz_group_wait returns BLZ_ECANCELED (BLZ_ETASK if a task
 * failed) and resets the group for reuse.
 *
 * Any thread, also from inside the group's own tasks. Cancelling twice is
 * the same as once.
 *
 * @param group the group.
 * @return BLZ_OK; BLZ_EINVAL if group is NULL.
 */
BLZ_API blz_status blz_group_cancel(blz_group *group);

/**
 * Whether the group is cancelled (since the last wait that reset it). (0.2)
 * Any thread. One relaxed load: a cancel from another thread is seen soon,
 * not at once.
 *
 * @param group the group, or NULL.
 * @return 1 if cancelled, 0 if not or if group is NULL.
 */
BLZ_API int32_t blz_group_cancelled(const blz_group *group);

/**
 * Whether the work the calling thread runs was cancelled: the innermost
 * task it works for (the task itself, a fork-join half or a
 * blz_parallel_for piece of it, a blz_call it made, even when another
 * worker runs them) was cancelled by blz_task_cancel (0.3), or is in a
 * group that is cancelled. For long-running tasks to poll and return
 * early. (0.2)
 *
 * Any thread; cheap (a walk of a few thread-local frames and two relaxed loads).
 *
 * @return 1 if so; 0 otherwise, also outside any task, in a task neither
 *         cancelled nor in a cancelled group, in an on_done (it belongs to no task) and in the thread
 *         hooks (a worker runs them outside any task, also when its thread
 *         is inside another pool's task, see spawn_thread).
 */
BLZ_API int32_t blz_cancelled(void);

/**
 * Reports that the job calling it failed, as if it had thrown: a C task,
 * a fork-join half, a blz_call function or a blz_parallel_for piece calls
 * it and then returns. The call that waits for that job returns BLZ_ETASK
 * (blz_join, blz_fork_join, blz_call, blz_parallel_for, blz_group_wait,
 * blz_broadcast), on_done gets BLZ_ETASK, tasks_failed counts it once per
 * failed job, and inside a group created with BLZ_GROUP_CANCEL_ON_FAILURE
 * the group is cancelled at once. Calling it several times in one job
 * is the same as once. (0.2)
 *
 * Any thread. Outside a job (on a thread that runs no job of any pool, or
 * in a hook or an on_done) it does nothing.
 */
BLZ_API void blz_fail(void);

/**
 * @name Events (0.3)
 * A completion that the embedder sets, exactly once, from any thread: an
 * I/O completion, a message, a timer, a callback of another runtime. Any
 * number of threads may wait for it with a bound; a worker that waits
 * runs other jobs of its pool meanwhile, as in blz_join. An event belongs
 * to no pool: it may be set and waited for from any thread, of any pool or
 * none, and outlives every pool.
 *
 * Lifetime: the handle is the creator's until blz_event_destroy. A set
 * that wakes a waiter may still be inside blz_event_set when that waiter
 * returns: the waiter's thread may destroy the event at once (the event's
 * memory goes when the set returns). No call may start after destroy began.
 * In a forked child an event is the parent's memory: a set from a thread
 * of the child still wakes the child's waiters.
 * @{
 */

/**
 * Makes an event, not yet set.
 *
 * Any thread.
 *
 * @param out_event receives the handle.
 * @return BLZ_OK; BLZ_EINVAL if out_event is NULL; BLZ_ENOMEM.
 */
BLZ_API blz_status blz_event_create(blz_event **out_event);

/**
 * Sets the event with status, which every wait for it returns: BLZ_OK,
 * or BLZ_ETASK or BLZ_ECANCELED for work that failed or was given up.
 * Wakes every waiter. Once per event: a second set is refused and changes
 * nothing.
 *
 * Any thread, including one of no pool, a signal-free callback of another
 * runtime, and a job of any pool (it does not block: at most a brief lock
 * that waiters hold while they register).
 *
 * @param event  the event.
 * @param status BLZ_OK, BLZ_ETASK or BLZ_ECANCELED.
 * @return BLZ_OK;
 *         BLZ_EINVAL if event is NULL, status is another value, or the
 *         event was already set (by a set, or by its destroy).
 */
BLZ_API blz_status blz_event_set(blz_event *event, blz_status status);

/**
 * Waits until the event is set, at most timeout_ns nanoseconds, and
 * returns the status it was set with. A worker of a pool runs other jobs
 * of its pool while it waits (one of them may end the wait later than the
 * timeout); any other thread blocks without spinning.
 *
 * Any thread, any number at once.
 *
 * @param event      the event.
 * @param timeout_ns 0 only looks; UINT64_MAX waits without a bound.
 * @return the status given to blz_event_set (BLZ_OK, BLZ_ETASK or
 *         BLZ_ECANCELED), or BLZ_ECANCELED if the event was destroyed
 *         unset while this waited;
 *         BLZ_ETIMEDOUT if it was not set in time;
 *         BLZ_EINVAL if event is NULL.
 */
BLZ_API blz_status blz_event_wait_for(blz_event *event, uint64_t timeout_ns);

/**
 * Gives the handle up. An event not yet set is set to BLZ_ECANCELED
 * first, which wakes the threads waiting for it; a later blz_event_set
 * must not be made (the handle is gone). The memory is freed once the
 * last set or wait in progress has returned.
 *
 * Any thread, once per event.
 *
 * @param event the event.
 * @return BLZ_OK; BLZ_EINVAL if event is NULL.
 */
BLZ_API blz_status blz_event_destroy(blz_event *event);

/**
 * Called inside a task's fn: the task finishes when the event this gives
 * is set, not when fn returns, and its status becomes the event's
 * (OpenMP's detach). (0.3) Until then the task is unfinished: a join of it, a
 * wait of its group, its successors and blz_pool_destroy wait for it, but
 * no worker does: fn returns and its worker goes on. When the event is
 * set, the task is queued on its pool once more to finish there: its
 * on_done runs on a worker of the pool, not on the setter's thread. If fn
 * fails (throws, or calls blz_fail), the task finishes at once with
 * BLZ_ETASK and the event's set changes nothing.
 *
 * The event is an ordinary event (blz_event_set, blz_event_wait_for) that
 * belongs to the caller: set it once, from any thread, and destroy it with
 * blz_event_destroy, which may follow the set at once (the task keeps what
 * it needs). Destroying it unset finishes the task with BLZ_ECANCELED.
 * An event never set nor destroyed leaves the task unfinished for good,
 * and blz_pool_destroy waits for it (see blz_spawn_ex, "Dependencies").
 *
 * Any thread that runs a task's fn (or a fork-join half or loop piece it
 * runs); once per task.
 *
 * @param out_event receives the event's handle.
 * @return BLZ_OK;
 *         BLZ_EINVAL if out_event is NULL, if the caller runs no task's fn
 *         (outside any job, in a blz_call job, in an on_done or a hook), or
 *         if it was called already for this task;
 *         BLZ_ENOMEM if memory ran out (the task finishes when fn returns).
 */
BLZ_API blz_status blz_task_finish_later(blz_event **out_event);
/** @} */

/**
 * Calls fn(arg, worker_index) exactly once on every worker of pool, and
 * returns when all of them have returned: to set up or flush per-worker
 * state. A worker runs it when it next looks for work: one busy with a long
 * job delays the return until that job ends. (0.2)
 *
 * Any thread. From one of pool's own workers it does not deadlock: that
 * worker runs its own call while waiting for the others.
 *
 * @param pool the pool.
 * @param fn   called once per worker, concurrently.
 * @param arg  passed to every call.
 * @return BLZ_OK;
 *         BLZ_ETASK if a call threw or called blz_fail (every worker still ran fn);
 *         BLZ_EINVAL if pool or fn is NULL;
 *         BLZ_ENOMEM if memory ran out (fn ran nowhere);
 *         BLZ_ESHUTDOWN if called from outside while pool is being destroyed;
 *         BLZ_EFORK in a forked child.
 */
BLZ_API blz_status blz_broadcast(blz_pool *pool, blz_thread_fn fn, void *arg);

/**
 * Gives the pool up without waiting: blz_pool_destroy runs on a thread of
 * its own, and this call returns at once. That destroy does everything
 * blz_pool_destroy does (waits for every accepted task, runs
 * on_thread_stop on each worker, joins the workers, frees the pool), then
 * calls on_destroyed(done_arg, status) on that thread with the status it
 * returned (BLZ_OK). (0.2)
 *
 * For the caller this is blz_pool_destroy returning at once: the handle
 * must not be used again, and the rules of blz_pool_destroy for calls from
 * other threads apply, with "before on_destroyed is called" for "before
 * destroy returns". The pool's own workers, inside accepted work, still
 * run, spawn and wait on the pool until that work is done.
 *
 * Any thread, including the pool's own workers (where blz_pool_destroy
 * returns BLZ_EDEADLK): a task may give up its own pool; the destroy waits
 * for that task to finish.
 *
 * on_destroyed runs once the workers are joined and the pool is freed: it
 * must not touch the pool. It may block (it runs on a thread no pool owns)
 * and must not unwind.
 *
 * On the handle of the process pool (blz_pool_shared, 0.3) it gives up
 * the caller's reference; only the last one destroys the pool, and
 * on_destroyed(done_arg, BLZ_OK) is called before this returns while
 * other references remain. See blz_pool_shared.
 *
 * @param pool         the pool.
 * @param on_destroyed NULL, or called exactly once when this returns
 *                     BLZ_OK or BLZ_EFORK.
 * @param done_arg     passed to on_destroyed.
 * @return BLZ_OK (the destroy has started);
 *         BLZ_EINVAL if pool is NULL;
 *         BLZ_ENOMEM or BLZ_ETHREAD if the destroying thread could not be
 *         started (nothing changed: the caller still owns the pool);
 *         BLZ_EFORK in a child forked after the pool was created: the
 *         memory is freed at once, as blz_pool_destroy frees it there, and
 *         on_destroyed(done_arg, BLZ_EFORK) is called before this returns.
 */
BLZ_API blz_status blz_pool_release(blz_pool *pool, blz_done_fn on_destroyed, void *done_arg);

/* ---- 0.2: operating a pool (the cap on active workers, per-worker statistics) ---- */

/**
 * Caps the number of active workers: from now on at most n of the pool's
 * workers run jobs at once; the others sleep, and wake-ups go only to
 * workers within the cap. 0 lifts the cap (all workers may run). (0.2)
 *
 * What the cap counts: a worker is active from the moment it takes a job
 * (from its deque, another worker's or the pool's queues) while it is not
 * inside a job, until it is back between jobs and finds the pool over the
 * cap; everything it does inside that job counts as that one worker: the
 * jobs it runs while it waits in a join (helping), and the time it blocks
 * there. Threads outside the pool never run the pool's jobs (blz_call and
 * friends hand them to a worker), so they are never counted. Not capped:
 * a blz_broadcast call runs on every worker, and the thread hooks.
 *
 * Lowering the cap takes effect as running jobs finish: no job is
 * interrupted, and a worker already taking a job when the call is made may
 * still start it. Raising it wakes the workers held back. Nothing accepted
 * is lost or delayed for ever: the queued work is run by the active
 * workers, as in a pool of n workers (so, as there, work that blocks
 * outside the runtime until other queued work runs can wait for ever when
 * n is smaller than what it needs).
 *
 * A worker counts from the moment it can run jobs: after its
 * on_thread_start returned, and for an embedder's thread (spawn_thread)
 * once run() was called; until then it is not one of the n. Once
 * blz_pool_destroy has begun the pool has no cap, and calls from its own
 * workers change nothing.
 *
 * Any thread, including the pool's own workers; calls may race, the last
 * one to store its cap wins.
 *
 * @param pool the pool.
 * @param n    the most workers running jobs at once; 0 or a value at least
 *             blz_pool_num_threads(pool): no cap.
 * @return BLZ_OK;
 *         BLZ_EINVAL if pool is NULL;
 *         BLZ_ESHUTDOWN if called from outside once blz_pool_destroy has begun
 *         (the pool lifts the cap itself while it is destroyed);
 *         BLZ_EFORK in a forked child.
 */
BLZ_API blz_status blz_pool_set_max_active(blz_pool *pool, uint32_t n);

/**
 * Fills the fields of out_stats that fit in out_stats->struct_size with one
 * worker's counters, as blz_pool_stats does for the pool: the pool's
 * snapshot is the sum of its workers' (taken at slightly different
 * moments). (0.2)
 *
 * In a worker's snapshot num_threads is 1; sleeping_now and inactive_now
 * are 1 or 0 (this worker is blocked; searching or blocked); jobs_executed,
 * steals, sleeps, wakeups, spurious_wakeups, sleep_aborts and the three
 * times are this worker's own; jobs_injected and tasks_failed are counted
 * for the pool only and are 0 here.
 *
 * Any thread.
 *
 * @param pool         the pool.
 * @param worker_index 0 .. blz_pool_num_threads(pool) - 1.
 * @param out_stats    receives the snapshot; its struct_size says how much of it.
 * @return BLZ_OK;
 *         BLZ_EINVAL if pool or out_stats is NULL, struct_size is smaller
 *         than 4 or worker_index is not a worker of the pool;
 *         BLZ_ESHUTDOWN if called from outside the pool once blz_pool_destroy has begun;
 *         BLZ_EFORK in a forked child.
 */
BLZ_API blz_status blz_worker_stats(const blz_pool *pool, uint32_t worker_index, blz_stats *out_stats);

/* ---- 0.2: tracing ---- */

/**
 * Starts recording what the pool's workers do, for a Chrome Trace Event
 * file written to path by blz_pool_trace_stop (or by blz_pool_destroy if
 * the trace is still running). The file loads in Perfetto
 * (ui.perfetto.dev) and chrome://tracing; tools/blitz-trace summarises it
 * and draws it; docs/tracing.md explains how to read it. (0.2)
 *
 * What is recorded, one track per worker (and one for threads outside the
 * pool): a span per job a worker runs (also each fork-join half its forker
 * runs itself), named after the job's function where dladdr finds a symbol
 * covering it (for C functions exported by their program or library), with
 * where it came from (own deque, stolen, injected, urgent, broadcast);
 * spans of searching and of sleeping; and each wake-up as a flow arrow
 * from the thread that woke a worker to that worker. A job's span is
 * recorded when it ends. Times are CLOCK_MONOTONIC, from the start.
 *
 * Cost: each worker appends to a buffer of its own, with no lock. A
 * thread's buffer holds BLZ_TRACE_BUFFER events (default 1048576, 32 bytes
 * each, made resident only as it fills); events past that are dropped and
 * counted, and the file says so ("dropped_events", and an "events dropped"
 * mark on the track). When no trace runs, the fork-join path pays one load
 * and one predictable branch.
 *
 * BLZ_TRACE=path in the environment traces every pool the process creates,
 * from its creation to its destroy: "%p" in the path becomes the process
 * id, "%n" the pool's number (1, 2, ... in creation order); without "%n",
 * pools after the first write to path.2, path.3, ... A path that cannot be
 * opened is reported on stderr, and the pool is created untraced.
 *
 * Any thread, including the pool's own workers; one trace at a time per pool.
 *
 * @param pool the pool.
 * @param path the file to write; created or truncated now.
 * @return BLZ_OK;
 *         BLZ_EINVAL if pool or path is NULL or path is empty, a trace of
 *         this pool is already running, or path cannot be opened for
 *         writing (errno says why);
 *         BLZ_ENOMEM if the buffers could not be allocated;
 *         BLZ_ESHUTDOWN if called from outside once blz_pool_destroy has begun;
 *         BLZ_EFORK in a forked child.
 */
BLZ_API blz_status blz_pool_trace_start(blz_pool *pool, const char *path);

/**
 * Stops the pool's trace and writes its file. Jobs running at this moment
 * are not in it (a span is recorded when its job ends). (0.2)
 *
 * Any thread, including the pool's own workers.
 *
 * @param pool the pool.
 * @return BLZ_OK;
 *         BLZ_EINVAL if pool is NULL, no trace of this pool is running, or
 *         writing the file failed (errno says why; the trace is over);
 *         BLZ_ENOMEM if memory ran out while writing (the trace is over,
 *         the file is unfinished);
 *         BLZ_ESHUTDOWN if called from outside once blz_pool_destroy has
 *         begun (destroy writes the file);
 *         BLZ_EFORK in a forked child.
 */
BLZ_API blz_status blz_pool_trace_stop(blz_pool *pool);

#ifdef __cplusplus
}
#endif

#endif /* BLITZ_H */
