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
 * libblitz function is a cancellation point: a thread cancelled while it
 * waits in one (blz_pool_destroy joining the workers, say) is cancelled at
 * its next cancellation point after the call returned.
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
#define BLZ_VERSION_MINOR 1
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
    BLZ_EFORK = -7
};

/** A status: BLZ_OK or one of the negative blz_status_code values. */
typedef int32_t blz_status;

/** A thread pool. Opaque; created by blz_pool_create. */
typedef struct blz_pool blz_pool;

/** A spawned task that will be joined. Opaque; created by blz_spawn. */
typedef struct blz_task blz_task;

/** A set of tasks waited for together. Opaque; created by blz_group_create. */
typedef struct blz_group blz_group;

/** A job: called once with the argument it was given. */
typedef void (*blz_fn)(void *arg);

/** A loop body: called with disjoint sub-ranges [begin, end). */
typedef void (*blz_range_fn)(void *arg, size_t begin, size_t end);

/** A worker hook: called with the pool's user pointer and the worker's index. */
typedef void (*blz_thread_fn)(void *user, uint32_t worker_index);

/**
 * How to build a pool. Initialise with blz_pool_config_init, then change
 * the fields you need; a config is read only during blz_pool_create.
 */
typedef struct blz_pool_config {
    /** sizeof(blz_pool_config); set by blz_pool_config_init. */
    uint32_t struct_size;
    /** 0: BLZ_NUM_THREADS if it parses to 1..65535, else the CPUs this process may run on. */
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
} blz_pool_config;

/**
 * A snapshot of a pool's counters, filled by blz_pool_stats. Counters are
 * summed over workers without stopping them, so a snapshot taken while the
 * pool runs may mix moments a few nanoseconds apart.
 */
typedef struct blz_stats {
    /** Set by the caller to sizeof(blz_stats). */
    uint32_t struct_size;
    /** Workers in the pool. */
    uint32_t num_threads;
    /** Workers blocked right now. */
    uint32_t sleeping_now;
    /** Workers not running a job right now (searching or sleeping). */
    uint32_t inactive_now;
    /** Jobs taken from a queue (own deque, a steal or the injector) and run. */
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
    /** Tasks that ended by an exception. */
    uint64_t tasks_failed;
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
 *         config->num_threads is above BLZ_MAX_THREADS or stack_size is
 *         rejected by the platform;
 *         BLZ_ENOMEM if memory ran out;
 *         BLZ_ETHREAD if the OS refused a worker thread. On every failure
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
 * Any thread except the pool's own workers.
 *
 * @param pool the pool; it must not be used again once this returned BLZ_OK or BLZ_EFORK.
 * @return BLZ_OK;
 *         BLZ_EINVAL if pool is NULL;
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

/**
 * Which of pool's workers the calling thread is. Any thread.
 *
 * @param pool the pool, or NULL.
 * @return the calling thread's index in pool (0 .. num_threads - 1), or -1
 *         unless the caller is one of pool's workers (also for NULL).
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
 *         BLZ_ETASK if it ended by an exception (the handle is freed);
 *         BLZ_EINVAL if task is NULL;
 *         BLZ_EDEADLK if called from inside the task itself, including from
 *         work the task is waiting for on another thread (a stolen
 *         blz_fork_join half, a blz_call); nothing changes;
 *         BLZ_EFORK in a child forked before the task ran (the handle is freed).
 */
BLZ_API blz_status blz_join(blz_task *task);

/**
 * Runs a(arg_a) and b(arg_b), possibly in parallel, and returns when both
 * have finished. On a worker of pool, a runs inline and b waits on the
 * worker's deque, where an idle worker may steal it; if nobody took it, the
 * worker runs it inline after a. No heap allocation, and no fence or locked
 * instruction unless another worker is looking for work. From any other
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
 *         BLZ_ETASK if a or b (or both) ended by an exception; both ran;
 *         BLZ_EINVAL if pool, a or b is NULL;
 *         BLZ_ESHUTDOWN if called from outside while pool is being destroyed;
 *         BLZ_EFORK in a forked child.
 */
BLZ_API blz_status blz_fork_join(blz_pool *pool, blz_fn a, void *arg_a, blz_fn b, void *arg_b);

/**
 * Runs fn(arg) on one of pool's workers and waits for it. On a worker of
 * pool it runs inline.
 *
 * @param pool the pool that runs it.
 * @param fn   the function to run.
 * @param arg  passed to fn.
 * @return BLZ_OK;
 *         BLZ_ETASK if fn ended by an exception;
 *         BLZ_EINVAL if pool or fn is NULL;
 *         BLZ_ESHUTDOWN if called from outside while pool is being destroyed;
 *         BLZ_EFORK in a forked child.
 */
BLZ_API blz_status blz_call(blz_pool *pool, blz_fn fn, void *arg);

/**
 * Calls body(arg, lo, hi) on disjoint sub-ranges that cover [begin, end)
 * exactly once, splitting by fork-join down to grain indices per call
 * (0: automatic, about eight pieces per worker). Returns when every piece
 * has run. From outside the pool it first moves into the pool.
 *
 * @param pool  the pool that runs the loop.
 * @param begin the first index.
 * @param end   one past the last index.
 * @param grain the most indices per call of body; 0: automatic.
 * @param body  called as body(arg, lo, hi), concurrently on several workers.
 * @param arg   passed to every call of body.
 * @return BLZ_OK, also when begin == end (body is not called);
 *         BLZ_ETASK if a call of body ended by an exception (every other piece still ran);
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
 * @return BLZ_OK;
 *         BLZ_ETASK if a task of the group ended by an exception since the
 *         previous wait (the failure is reported once);
 *         BLZ_EINVAL if group is NULL;
 *         BLZ_EDEADLK if called from inside one of the group's tasks, or from
 *         work such a task is waiting for on another thread (nothing changes);
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

#ifdef __cplusplus
}
#endif

#endif /* BLITZ_H */
