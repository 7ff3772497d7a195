//! Raw bindings to libblitz, a work-stealing thread pool behind a plain C ABI.
//!
//! Every item here mirrors one declaration of `include/blitz.h`, with the
//! same name, the same types and the same layout; the header's comments are
//! the documentation of record. `tests/abi_mirror.rs` proves the mirror
//! exact: it compiles a C program generated from the header and compares
//! every constant, every struct's size, alignment and field offsets, and
//! every prototype with the declarations below.
//!
//! Use the `blitz` crate for a safe API. Calling these functions is unsafe:
//! the caller keeps the header's rules (a task handle is given up exactly
//! once, by `blz_join`, a `blz_task_wait_for` that did not time out, or
//! `blz_task_detach`; no call on a pool after `blz_pool_destroy`; callbacks
//! must not unwind).
//!
//! The build script links `libblitz.so` from `BLITZ_LIB_DIR`, else from
//! `pkg-config --libs blitz`, else from the checkout's `build/` directory.
#![allow(non_camel_case_types)]

use std::marker::{PhantomData, PhantomPinned};
use std::os::raw::{c_char, c_int, c_void};

/// Major version: changes when the ABI breaks.
pub const BLZ_VERSION_MAJOR: u32 = 0;
/// Minor version: changes when the ABI grows.
pub const BLZ_VERSION_MINOR: u32 = 3;
/// Patch version: changes for fixes only.
pub const BLZ_VERSION_PATCH: u32 = 0;
/// The header's version as one number, MAJOR * 10000 + MINOR * 100 + PATCH.
pub const BLZ_VERSION_NUMBER: u32 = BLZ_VERSION_MAJOR * 10000 + BLZ_VERSION_MINOR * 100 + BLZ_VERSION_PATCH;
/// The most workers one pool may have.
pub const BLZ_MAX_THREADS: u32 = 65535;
/// The layout version of [`blz_fork_frame`] and [`blz_fork_stack`] (0.3): the suffix of `blz_fork_stack_v1`.
pub const BLZ_FORK_LAYOUT_VERSION: u32 = 1;

/// A status: `BLZ_OK` or one of the negative status codes below.
pub type blz_status = i32;

/// Success.
pub const BLZ_OK: blz_status = 0;
/// An argument is invalid; nothing was done.
pub const BLZ_EINVAL: blz_status = -1;
/// Out of memory; nothing was done.
pub const BLZ_ENOMEM: blz_status = -2;
/// The OS refused to start a worker thread.
pub const BLZ_ETHREAD: blz_status = -3;
/// The pool is being destroyed.
pub const BLZ_ESHUTDOWN: blz_status = -4;
/// The call would wait for itself.
pub const BLZ_EDEADLK: blz_status = -5;
/// A task it waited for ended by an exception.
pub const BLZ_ETASK: blz_status = -6;
/// The pool was created before fork() in another process.
pub const BLZ_EFORK: blz_status = -7;
/// A bounded wait ended before the work did; nothing was freed or changed. (0.2)
pub const BLZ_ETIMEDOUT: blz_status = -8;
/// The work was cancelled: skipped before it started, or stopped early. (0.2)
pub const BLZ_ECANCELED: blz_status = -9;

/// A thread pool. Opaque; created by [`blz_pool_create`].
#[repr(C)]
pub struct blz_pool {
    _opaque: [u8; 0],
    _marker: PhantomData<(*mut u8, PhantomPinned)>,
}

/// A spawned task that will be joined. Opaque; created by [`blz_spawn`].
#[repr(C)]
pub struct blz_task {
    _opaque: [u8; 0],
    _marker: PhantomData<(*mut u8, PhantomPinned)>,
}

/// A set of tasks waited for together. Opaque; created by [`blz_group_create`].
#[repr(C)]
pub struct blz_group {
    _opaque: [u8; 0],
    _marker: PhantomData<(*mut u8, PhantomPinned)>,
}

/// A completion that the embedder sets once. Opaque; created by [`blz_event_create`]. (0.3)
#[repr(C)]
pub struct blz_event {
    _opaque: [u8; 0],
    _marker: PhantomData<(*mut u8, PhantomPinned)>,
}

/// A job: called once with the argument it was given. Must not unwind.
pub type blz_fn = Option<unsafe extern "C" fn(arg: *mut c_void)>;

/// A loop body: called with disjoint sub-ranges `[begin, end)`. Must not unwind.
pub type blz_range_fn = Option<unsafe extern "C" fn(arg: *mut c_void, begin: usize, end: usize)>;

/// A worker hook: called with the pool's user pointer and the worker's index. Must not unwind.
pub type blz_thread_fn = Option<unsafe extern "C" fn(user: *mut c_void, worker_index: u32)>;

/// Starts worker `worker_index`'s thread for an embedder that owns its
/// threads (`blz_pool_config::spawn_thread`, 0.2): makes a thread other
/// than the caller call `run(run_arg)` once and returns 0, or starts
/// nothing and returns non-zero. Must not unwind.
pub type blz_spawn_thread_fn =
    Option<unsafe extern "C" fn(user: *mut c_void, worker_index: u32, run: blz_fn, run_arg: *mut c_void) -> c_int>;

/// A completion callback (0.2): called once, on the worker that finished the
/// task, with the task's status (`BLZ_OK`, `BLZ_ETASK` or `BLZ_ECANCELED`).
/// Must not unwind.
pub type blz_done_fn = Option<unsafe extern "C" fn(done_arg: *mut c_void, status: blz_status)>;

/// [`blz_group_create_ex`] flag: the first failure in the group cancels it (0.2).
pub const BLZ_GROUP_CANCEL_ON_FAILURE: u32 = 1;
/// `blz_spawn_options` flag: the task goes to the pool's high-priority queue,
/// searched before the normal one by every worker. (0.2)
pub const BLZ_SPAWN_HIGH_PRIORITY: u32 = 1;
/// `blz_spawn_options` flag: `on_done` runs once the task has finished (it
/// has left its group, and a join returns at once), not just before. (0.3)
pub const BLZ_SPAWN_DONE_AFTER_FINISH: u32 = 2;
/// `blz_spawn_options` flag: the task's first failure cancels the task itself
/// (its loops stop starting pieces). (0.3)
pub const BLZ_SPAWN_CANCEL_ON_FAILURE: u32 = 4;
/// `blz_spawn_options` flag: the task runs after its predecessors whatever
/// they ended with; without it a failed or cancelled predecessor cancels it. (0.3)
pub const BLZ_SPAWN_AFTER_ANY_END: u32 = 8;

/// How [`blz_spawn_ex`] spawns a task (0.2). Initialise with
/// [`blz_spawn_options_init`], then change the fields you need; the options
/// are read only during the call.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct blz_spawn_options {
    /// `size_of::<blz_spawn_options>()`; set by `blz_spawn_options_init`.
    pub struct_size: u32,
    /// 0, or `BLZ_SPAWN_*` flags OR'ed; any other bit gives `BLZ_EINVAL`.
    pub flags: u32,
    /// NULL, or the group the task belongs to: the group's waits count it and its cancel skips it.
    pub group: *mut blz_group,
    /// None, or called exactly once after the task ended (see [`blz_spawn_ex`]).
    pub on_done: blz_done_fn,
    /// Passed to `on_done`.
    pub done_arg: *mut c_void,
    /// NULL, or `num_after_tasks` tasks this task runs after (handles read during the call only). (0.3)
    pub after_tasks: *const *mut blz_task,
    /// How many handles `after_tasks` holds.
    pub num_after_tasks: usize,
    /// NULL, or `num_after_events` events this task runs after. (0.3)
    pub after_events: *const *mut blz_event,
    /// How many handles `after_events` holds.
    pub num_after_events: usize,
    /// NULL, or `num_after_groups` groups: runs once each has no task left. (0.3)
    pub after_groups: *const *mut blz_group,
    /// How many handles `after_groups` holds.
    pub num_after_groups: usize,
}

/// How to build a pool. Initialise with [`blz_pool_config_init`], then
/// change the fields you need; a config is read only during [`blz_pool_create`].
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct blz_pool_config {
    /// `size_of::<blz_pool_config>()`; set by `blz_pool_config_init`.
    pub struct_size: u32,
    /// 0: `BLZ_NUM_THREADS` if it parses to 1..65535, else the CPUs this process may run on.
    pub num_threads: u32,
    /// Bytes of stack per worker; 0: the platform's default.
    pub stack_size: usize,
    /// Worker name prefix; NULL: "blz".
    pub thread_name: *const c_char,
    /// Runs on each worker before its first job; None: none.
    pub on_thread_start: blz_thread_fn,
    /// Runs on each worker after its last job; None: none.
    pub on_thread_stop: blz_thread_fn,
    /// Passed to both hooks.
    pub user: *mut c_void,
    /// NULL: no pinning (unless `BLZ_CPU_LIST`); else a Linux CPU list
    /// ("0-3,8-11"): worker i pinned to the i-th CPU, cycling. (0.2)
    pub cpu_list: *const c_char,
    /// None: libblitz starts the workers' threads. Else called for each
    /// worker, in order, during `blz_pool_create`: the thread that calls
    /// `run(run_arg)` is that worker until the pool is destroyed. (0.2)
    pub spawn_thread: blz_spawn_thread_fn,
    /// Passed to `spawn_thread`. (0.2)
    pub spawn_user: *mut c_void,
    /// Spare threads at most while workers sit in blocking sections
    /// ([`blz_block_begin`]); 0: one per worker; [`BLZ_NO_SPARES`]: none. (0.3)
    pub max_spares: u32,
    /// Milliseconds a spare stays without a job before it retires; 0: 1000. (0.3)
    pub spare_idle_ms: u32,
}

/// [`blz_pool_config::max_spares`]: no spare threads at all. (0.3)
pub const BLZ_NO_SPARES: u32 = 0xFFFF_FFFF;

/// A snapshot of a pool's counters, filled by [`blz_pool_stats`]. Counters
/// are summed over workers without stopping them, so a snapshot taken while
/// the pool runs may mix moments a few nanoseconds apart.
/// [`blz_default_size_info::source`]: `BLZ_NUM_THREADS` chose the size. (0.3)
pub const BLZ_SIZE_FROM_ENVIRONMENT: u32 = 1;
/// [`blz_default_size_info::source`]: the CPUs in the affinity mask. (0.3)
pub const BLZ_SIZE_FROM_AFFINITY: u32 = 2;
/// [`blz_default_size_info::source`]: the cgroup CPU quota, below the mask. (0.3)
pub const BLZ_SIZE_FROM_CPU_QUOTA: u32 = 3;

/// The default pool size and why ([`blz_default_size`], 0.3).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct blz_default_size_info {
    /// Set by the caller to `size_of::<blz_default_size_info>()`.
    pub struct_size: u32,
    /// The workers a pool created now with `num_threads` 0 would get.
    pub num_threads: u32,
    /// `BLZ_SIZE_FROM_ENVIRONMENT`, `_AFFINITY` or `_CPU_QUOTA`.
    pub source: u32,
    /// `BLZ_NUM_THREADS` as parsed, 0 when unset or invalid.
    pub environment: u32,
    /// The CPUs in the process's affinity mask.
    pub affinity_cpus: u32,
    /// The cgroup CPU quota in whole CPUs, rounded up; 0: none.
    pub quota_cpus: u32,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct blz_stats {
    /// Set by the caller to `size_of::<blz_stats>()`.
    pub struct_size: u32,
    /// Workers in the pool.
    pub num_threads: u32,
    /// Workers blocked right now.
    pub sleeping_now: u32,
    /// Workers not running a job right now (searching or sleeping).
    pub inactive_now: u32,
    /// Jobs taken from a queue (own deque, a steal or the injector) and run.
    /// A job is counted as it starts, so one whose end the caller has seen
    /// (blz_call or a join returned) is always in the count.
    pub jobs_executed: u64,
    /// Jobs that came from threads outside the pool.
    pub jobs_injected: u64,
    /// Jobs taken from another worker's deque.
    pub steals: u64,
    /// Times a worker blocked.
    pub sleeps: u64,
    /// Times a sleeping worker was woken.
    pub wakeups: u64,
    /// Wakeups after which the worker found no job before sleeping again.
    pub spurious_wakeups: u64,
    /// Sleeps abandoned at the last check (JEC changed, injected job seen).
    pub sleep_aborts: u64,
    /// Tasks that ended by an exception.
    pub tasks_failed: u64,
    /// Nanoseconds the workers spent running jobs (and everything but searching and sleeping). (0.2)
    pub run_ns: u64,
    /// Nanoseconds the workers spent searching for work. (0.2)
    pub search_ns: u64,
    /// Nanoseconds the workers spent blocked. (0.2)
    pub sleep_ns: u64,
    /// Spare threads alive now ([`blz_block_begin`]). (0.3)
    pub spares_now: u32,
    /// Threads of the pool inside a blocking section now. (0.3)
    pub blocked_now: u32,
    /// The pool's bound on spares. (0.3)
    pub max_spares: u32,
    /// The most spares ever alive at once. (0.3)
    pub spares_peak: u32,
    /// Spare threads started so far. (0.3)
    pub spares_started: u64,
    /// Spare threads retired so far (idle for `spare_idle_ms`). (0.3)
    pub spares_retired: u64,
}

/// C's `uintptr_t`, as blitz.h spells it.
pub type uintptr_t = usize;

/// A fork's second half on the forker's stack: the inline fork path of
/// blitz.h (0.3). Only its owner touches it until the library promotes it.
#[repr(C)]
#[derive(Debug)]
pub struct blz_fork_frame {
    /// The second half: `fn(arg)`. Must not unwind.
    pub r#fn: blz_fn,
    /// Its argument.
    pub arg: *mut c_void,
    /// The library's, once promoted; never initialised by the caller.
    pub job: [uintptr_t; 8],
}

/// One worker's fork stack (blitz.h, "The inline fork path", 0.3): its
/// owner's line, then `requests`, which other threads set.
#[repr(C)]
#[derive(Debug)]
pub struct blz_fork_stack {
    /// The pool this worker belongs to.
    pub pool: *const blz_pool,
    /// The pending and promoted frames, oldest first.
    pub frames: *mut *mut blz_fork_frame,
    /// The number of frames pushed and not yet joined.
    pub depth: u32,
    /// The length of `frames`.
    pub capacity: u32,
    /// `frames[0..promoted]` are promoted: other workers may run them.
    pub promoted: u32,
    /// Zero.
    pub reserved0: u32,
    /// This thread's `blz_fail` count.
    pub failures: *mut u32,
    /// Jobs this worker ran; a relaxed atomic.
    pub jobs_executed: u64,
    /// Zero: pads the owner's line.
    pub reserved1: [u64; 2],
    /// Non-zero: the next push goes through `blz_fork_push_v1` (a relaxed atomic).
    pub requests: u32,
    /// Zero: pads the shared line.
    pub reserved2: [u32; 15],
}

extern "C" {
    /// The library's version as `BLZ_VERSION_NUMBER` computes it.
    pub fn blz_version_number() -> u32;
    /// A short English description of a status; never NULL, static.
    pub fn blz_status_string(status: blz_status) -> *const c_char;
    /// Fills `config` with the defaults. Does nothing when `config` is NULL.
    pub fn blz_pool_config_init(config: *mut blz_pool_config);
    /// Creates a pool and starts its workers.
    pub fn blz_pool_create(config: *const blz_pool_config, out_pool: *mut *mut blz_pool) -> blz_status;
    /// Waits for every accepted task, stops the workers and frees the pool.
    pub fn blz_pool_destroy(pool: *mut blz_pool) -> blz_status;
    /// The number of workers; 0 when `pool` is NULL.
    pub fn blz_pool_num_threads(pool: *const blz_pool) -> u32;
    /// The size a pool of `num_threads` 0 would get now, and why. (0.3)
    pub fn blz_default_size(out: *mut blz_default_size_info) -> blz_status;
    /// A reference to the process pool, the one every user of the process
    /// shares; created by the first call. `blz_pool_destroy` or
    /// `blz_pool_release` gives the reference up; the last one destroys it. (0.3)
    pub fn blz_pool_shared(config: *const blz_pool_config, out_pool: *mut *mut blz_pool) -> blz_status;
    /// The calling thread's index in `pool`, or -1.
    pub fn blz_worker_index(pool: *const blz_pool) -> i32;
    /// Fills the fields of `out_stats` that fit in `out_stats->struct_size`.
    pub fn blz_pool_stats(pool: *const blz_pool, out_stats: *mut blz_stats) -> blz_status;
    /// Runs `f(arg)` on a worker later; detached when `out_task` is NULL.
    pub fn blz_spawn(pool: *mut blz_pool, f: blz_fn, arg: *mut c_void, out_task: *mut *mut blz_task) -> blz_status;
    /// Waits until `task` has run, then frees the handle.
    pub fn blz_join(task: *mut blz_task) -> blz_status;
    /// Runs `a(arg_a)` and `b(arg_b)`, possibly in parallel.
    pub fn blz_fork_join(
        pool: *mut blz_pool,
        a: blz_fn,
        arg_a: *mut c_void,
        b: blz_fn,
        arg_b: *mut c_void,
    ) -> blz_status;
    /// Runs `f(arg)` on one of the pool's workers and waits for it.
    pub fn blz_call(pool: *mut blz_pool, f: blz_fn, arg: *mut c_void) -> blz_status;
    /// Calls `body(arg, lo, hi)` on disjoint sub-ranges covering `[begin, end)`.
    pub fn blz_parallel_for(
        pool: *mut blz_pool,
        begin: usize,
        end: usize,
        grain: usize,
        body: blz_range_fn,
        arg: *mut c_void,
    ) -> blz_status;
    /// Creates an empty group of tasks on `pool`.
    pub fn blz_group_create(pool: *mut blz_pool, out_group: *mut *mut blz_group) -> blz_status;
    /// Spawns `f(arg)` as a task of `group`.
    pub fn blz_group_spawn(group: *mut blz_group, f: blz_fn, arg: *mut c_void) -> blz_status;
    /// Waits until the group has no unfinished task.
    pub fn blz_group_wait(group: *mut blz_group) -> blz_status;
    /// Waits as `blz_group_wait` does, then frees the group.
    pub fn blz_group_destroy(group: *mut blz_group) -> blz_status;

    // ---- 0.2: completion callbacks, bounded waits, cancellation, failure, broadcast, release

    /// Fills `opts` with the defaults. Does nothing when `opts` is NULL. (0.2)
    pub fn blz_spawn_options_init(opts: *mut blz_spawn_options);
    /// Spawns `f(arg)` as `blz_spawn` does, with a group and a completion callback. (0.2)
    pub fn blz_spawn_ex(
        pool: *mut blz_pool,
        f: blz_fn,
        arg: *mut c_void,
        opts: *const blz_spawn_options,
        out_task: *mut *mut blz_task,
    ) -> blz_status;
    /// Waits at most `timeout_ns` for `task`; frees the handle unless it returns `BLZ_ETIMEDOUT`. (0.2)
    pub fn blz_task_wait_for(task: *mut blz_task, timeout_ns: u64) -> blz_status;
    /// Frees the handle without waiting; the task still runs. (0.2)
    pub fn blz_task_detach(task: *mut blz_task) -> blz_status;
    /// Cancels one task: skipped if it has not started, `blz_cancelled()` in it
    /// if it runs. Only while the handle is valid. (0.3)
    pub fn blz_task_cancel(task: *mut blz_task) -> blz_status;
    /// Makes an event, not yet set. (0.3)
    pub fn blz_event_create(out_event: *mut *mut blz_event) -> blz_status;
    /// Sets the event, once, with `BLZ_OK`, `BLZ_ETASK` or `BLZ_ECANCELED`; wakes its waiters. (0.3)
    pub fn blz_event_set(event: *mut blz_event, status: blz_status) -> blz_status;
    /// Waits at most `timeout_ns` for the event; its status, or `BLZ_ETIMEDOUT`. (0.3)
    pub fn blz_event_wait_for(event: *mut blz_event, timeout_ns: u64) -> blz_status;
    /// Gives the handle up; an unset event is set to `BLZ_ECANCELED` first. (0.3)
    pub fn blz_event_destroy(event: *mut blz_event) -> blz_status;
    /// Inside a task's fn: the task finishes when the event it gives is set
    /// (its status becomes the event's), not when fn returns. (0.3)
    pub fn blz_task_finish_later(out_event: *mut *mut blz_event) -> blz_status;
    /// Runs `f(arg)` as `blz_call` does, isolated: every wait inside it runs
    /// only work forked or spawned inside it. (0.3)
    pub fn blz_isolate(pool: *mut blz_pool, f: blz_fn, arg: *mut c_void) -> blz_status;
    /// The calling task is about to block outside the pool: on a worker, the
    /// pool stands a spare (or a thread the cap held back) in until
    /// [`blz_block_end`]. Nests; `BLZ_OK`. (0.3)
    pub fn blz_block_begin() -> blz_status;
    /// Ends the section of the last [`blz_block_begin`]; `BLZ_EINVAL` if none is open. (0.3)
    pub fn blz_block_end() -> blz_status;
    /// `f(arg)` as a blocking section; `BLZ_ETASK` if it threw. (0.3)
    pub fn blz_blocking(f: blz_fn, arg: *mut c_void) -> blz_status;
    /// Creates an empty group with `flags` (0 or `BLZ_GROUP_CANCEL_ON_FAILURE`). (0.2)
    pub fn blz_group_create_ex(pool: *mut blz_pool, flags: u32, out_group: *mut *mut blz_group) -> blz_status;
    /// Waits as `blz_group_wait` does, but at most `timeout_ns`. (0.2)
    pub fn blz_group_wait_for(group: *mut blz_group, timeout_ns: u64) -> blz_status;
    /// Cancels the group: its tasks that have not started are skipped. (0.2)
    pub fn blz_group_cancel(group: *mut blz_group) -> blz_status;
    /// 1 if the group is cancelled (since the wait that last reset it), else 0. (0.2)
    pub fn blz_group_cancelled(group: *const blz_group) -> i32;
    /// 1 if the work the calling thread runs belongs to a cancelled group, else 0. (0.2)
    pub fn blz_cancelled() -> i32;
    /// Reports that the calling job failed, as if it had thrown. (0.2)
    pub fn blz_fail();
    /// Calls `f(arg, worker_index)` once on every worker of `pool` and waits for all. (0.2)
    pub fn blz_broadcast(pool: *mut blz_pool, f: blz_thread_fn, arg: *mut c_void) -> blz_status;
    /// Gives the pool up without waiting: `blz_pool_destroy` runs on a thread of
    /// its own, then `on_destroyed(done_arg, status)`; callable from the pool's
    /// own workers too. (0.2)
    pub fn blz_pool_release(pool: *mut blz_pool, on_destroyed: blz_done_fn, done_arg: *mut c_void) -> blz_status;
    /// At most `n` workers run jobs at once from now on; 0 lifts the cap. (0.2)
    pub fn blz_pool_set_max_active(pool: *mut blz_pool, n: u32) -> blz_status;
    /// One worker's counters and times, as `blz_pool_stats` fills the pool's. (0.2)
    pub fn blz_worker_stats(pool: *const blz_pool, worker_index: u32, out_stats: *mut blz_stats) -> blz_status;
    /// Starts recording what the pool's workers do, for a Chrome Trace Event
    /// file written to the NUL-terminated `path` by `blz_pool_trace_stop` or
    /// `blz_pool_destroy`. (0.2)
    pub fn blz_pool_trace_start(pool: *mut blz_pool, path: *const c_char) -> blz_status;
    /// Stops the pool's trace and writes its file. (0.2)
    pub fn blz_pool_trace_stop(pool: *mut blz_pool) -> blz_status;

    /// The inline fork path, step 1's slow case: pushes `frame` on `stack`, the
    /// calling worker's own (0.3). 1 when pushed, 0 when not (run both halves inline).
    pub fn blz_fork_push_v1(stack: *mut blz_fork_stack, frame: *mut blz_fork_frame) -> c_int;
    /// Step 3's slow case: joins the promoted newest frame (0.3). 1 when it ran normally.
    pub fn blz_fork_join_v1(stack: *mut blz_fork_stack, frame: *mut blz_fork_frame) -> c_int;
    /// Step 4: a half called `blz_fail` since `before` was read (0.3).
    pub fn blz_fork_failed_v1(stack: *mut blz_fork_stack, before: u32);
    /// The address of the calling thread's `blz_fork_stack_v1` (0.3): stays valid for the
    /// thread's life; the pointer it holds is the thread's fork stack while it is a worker.
    /// Only read through it.
    pub fn blz_fork_stack_slot_v1() -> *mut *mut blz_fork_stack;
}
