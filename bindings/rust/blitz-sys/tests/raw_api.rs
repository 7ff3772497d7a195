//! The raw functions called the way C calls them: a smoke test of linking,
//! of the calling convention of every kind of callback, and of the statuses.
//! The atomics are counters read after the call that waited for them, which
//! already orders them; SeqCst is used only for simplicity.
use std::ffi::CString;
use std::os::raw::c_void;
use std::ptr;
use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicUsize, Ordering};

use blitz_sys::*;

unsafe fn pool(threads: u32) -> *mut blz_pool {
    let mut config = std::mem::zeroed::<blz_pool_config>();
    blz_pool_config_init(&mut config);
    assert_eq!(config.struct_size as usize, std::mem::size_of::<blz_pool_config>());
    config.num_threads = threads;
    let mut pool = ptr::null_mut();
    assert_eq!(blz_pool_create(&config, &mut pool), BLZ_OK);
    pool
}

unsafe extern "C" fn add_one(arg: *mut c_void) {
    (*(arg as *const AtomicUsize)).fetch_add(1, Ordering::SeqCst);
}

unsafe extern "C" fn sum_range(arg: *mut c_void, begin: usize, end: usize) {
    (*(arg as *const AtomicUsize)).fetch_add((begin..end).sum::<usize>(), Ordering::SeqCst);
}

static STARTED: AtomicU32 = AtomicU32::new(0);
static STOPPED: AtomicU32 = AtomicU32::new(0);

unsafe extern "C" fn on_start(user: *mut c_void, index: u32) {
    assert_eq!(user as usize, 0x5eed);
    STARTED.fetch_or(1 << index, Ordering::SeqCst);
}

unsafe extern "C" fn on_stop(_user: *mut c_void, index: u32) {
    STOPPED.fetch_or(1 << index, Ordering::SeqCst);
}

#[test]
fn pool_lifecycle_hooks_and_names() {
    unsafe {
        let name = CString::new("rawtest").unwrap();
        let mut config = std::mem::zeroed::<blz_pool_config>();
        blz_pool_config_init(&mut config);
        config.num_threads = 2;
        config.thread_name = name.as_ptr();
        config.on_thread_start = Some(on_start);
        config.on_thread_stop = Some(on_stop);
        config.user = 0x5eed as *mut c_void;
        let mut pool = ptr::null_mut();
        assert_eq!(blz_pool_create(&config, &mut pool), BLZ_OK);
        assert_eq!(blz_pool_num_threads(pool), 2);
        assert_eq!(blz_worker_index(pool), -1);
        assert_eq!(blz_pool_destroy(pool), BLZ_OK);
        assert_eq!(STARTED.load(Ordering::SeqCst), 0b11);
        assert_eq!(STOPPED.load(Ordering::SeqCst), 0b11);
    }
}

#[test]
fn every_kind_of_submission() {
    unsafe {
        let pool = pool(2);
        let count = AtomicUsize::new(0);
        let arg = &count as *const AtomicUsize as *mut c_void;

        assert_eq!(blz_fork_join(pool, Some(add_one), arg, Some(add_one), arg), BLZ_OK);
        assert_eq!(blz_call(pool, Some(add_one), arg), BLZ_OK);
        let mut task = ptr::null_mut();
        assert_eq!(blz_spawn(pool, Some(add_one), arg, &mut task), BLZ_OK);
        assert_eq!(blz_join(task), BLZ_OK);
        let mut group = ptr::null_mut();
        assert_eq!(blz_group_create(pool, &mut group), BLZ_OK);
        for _ in 0..10 {
            assert_eq!(blz_group_spawn(group, Some(add_one), arg), BLZ_OK);
        }
        assert_eq!(blz_group_wait(group), BLZ_OK);
        assert_eq!(blz_group_destroy(group), BLZ_OK);
        assert_eq!(count.load(Ordering::SeqCst), 14);

        let sum = AtomicUsize::new(0);
        let sum_arg = &sum as *const AtomicUsize as *mut c_void;
        assert_eq!(blz_parallel_for(pool, 0, 1000, 0, Some(sum_range), sum_arg), BLZ_OK);
        assert_eq!(sum.load(Ordering::SeqCst), 999 * 1000 / 2);

        let mut stats = blz_stats { struct_size: std::mem::size_of::<blz_stats>() as u32, ..Default::default() };
        assert_eq!(blz_pool_stats(pool, &mut stats), BLZ_OK);
        assert_eq!(stats.num_threads, 2);
        assert!(stats.jobs_executed >= 13, "{:?}", stats);
        // A shorter struct gets its prefix only.
        let mut short = blz_stats { struct_size: 8, num_threads: 0, sleeping_now: 77, ..Default::default() };
        assert_eq!(blz_pool_stats(pool, &mut short), BLZ_OK);
        assert_eq!((short.num_threads, short.sleeping_now), (2, 77));

        assert_eq!(blz_pool_destroy(pool), BLZ_OK);
    }
}

#[test]
fn bad_arguments_give_einval() {
    unsafe {
        assert_eq!(blz_pool_create(ptr::null(), ptr::null_mut()), BLZ_EINVAL);
        assert_eq!(blz_pool_destroy(ptr::null_mut()), BLZ_EINVAL);
        assert_eq!(blz_join(ptr::null_mut()), BLZ_EINVAL);
        let mut config = std::mem::zeroed::<blz_pool_config>();
        blz_pool_config_init(&mut config);
        config.num_threads = BLZ_MAX_THREADS + 1;
        let mut pool = ptr::null_mut();
        assert_eq!(blz_pool_create(&config, &mut pool), BLZ_EINVAL);
        assert!(pool.is_null());
        let pool = pool_or_default();
        assert_eq!(blz_fork_join(pool, None, ptr::null_mut(), Some(add_one), ptr::null_mut()), BLZ_EINVAL);
        assert_eq!(blz_parallel_for(pool, 5, 4, 0, Some(sum_range), ptr::null_mut()), BLZ_EINVAL);
        assert_eq!(blz_pool_destroy(pool), BLZ_OK);
    }
}

unsafe fn pool_or_default() -> *mut blz_pool {
    let mut pool = ptr::null_mut();
    assert_eq!(blz_pool_create(ptr::null(), &mut pool), BLZ_OK);
    pool
}

// ---- 0.2: completion callbacks, bounded waits, cancellation, failure, broadcast

use std::sync::atomic::AtomicI32;
use std::sync::Barrier;
use std::time::{Duration, Instant};

/// Spins (yielding) until `done` holds; a generous bound turns a hang into a failure.
fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !done() {
        assert!(Instant::now() < deadline, "still not {} after 60 s", what);
        std::thread::yield_now();
    }
}

/// What on_done saw: how often it ran, and the last status.
struct Done {
    calls: AtomicUsize,
    status: AtomicI32,
}

impl Done {
    fn new() -> Done {
        Done { calls: AtomicUsize::new(0), status: AtomicI32::new(1) }
    }
    fn arg(&self) -> *mut c_void {
        self as *const Done as *mut c_void
    }
    fn seen(&self) -> (usize, blz_status) {
        (self.calls.load(Ordering::SeqCst), self.status.load(Ordering::SeqCst))
    }
}

unsafe extern "C" fn record_done(arg: *mut c_void, status: blz_status) {
    let done = &*(arg as *const Done);
    done.status.store(status, Ordering::SeqCst);
    done.calls.fetch_add(1, Ordering::SeqCst);
}

unsafe extern "C" fn fail(arg: *mut c_void) {
    if !arg.is_null() {
        add_one(arg);
    }
    blz_fail();
    blz_fail(); // twice is once
}

/// A task that holds its worker until the test lets it go: the first
/// `wait` says it started, the second lets it finish. `ran` counts it.
struct Gate {
    barrier: Barrier,
    ran: AtomicUsize,
}

impl Gate {
    fn new() -> Gate {
        Gate { barrier: Barrier::new(2), ran: AtomicUsize::new(0) }
    }
    fn arg(&self) -> *mut c_void {
        self as *const Gate as *mut c_void
    }
}

unsafe extern "C" fn at_gate(arg: *mut c_void) {
    let gate = &*(arg as *const Gate);
    gate.barrier.wait();
    gate.barrier.wait();
    gate.ran.fetch_add(1, Ordering::SeqCst);
}

unsafe fn options(group: *mut blz_group, done: Option<&Done>) -> blz_spawn_options {
    let mut opts = std::mem::zeroed::<blz_spawn_options>();
    blz_spawn_options_init(&mut opts);
    opts.group = group;
    if let Some(done) = done {
        opts.on_done = Some(record_done);
        opts.done_arg = done.arg();
    }
    opts
}

unsafe fn tasks_failed(pool: *mut blz_pool) -> u64 {
    let mut stats = blz_stats { struct_size: std::mem::size_of::<blz_stats>() as u32, ..Default::default() };
    assert_eq!(blz_pool_stats(pool, &mut stats), BLZ_OK);
    stats.tasks_failed
}

#[test]
fn spawn_options_init_sets_the_defaults() {
    unsafe {
        let mut opts = std::mem::MaybeUninit::<blz_spawn_options>::uninit();
        ptr::write_bytes(opts.as_mut_ptr(), 0xa5, 1);
        blz_spawn_options_init(opts.as_mut_ptr());
        let opts = opts.assume_init();
        assert_eq!(opts.struct_size as usize, std::mem::size_of::<blz_spawn_options>());
        assert_eq!(opts.flags, 0);
        assert!(opts.group.is_null() && opts.on_done.is_none() && opts.done_arg.is_null(), "{:?}", opts);
        blz_spawn_options_init(ptr::null_mut());
    }
}

#[test]
fn spawn_ex_reports_to_on_done_before_the_join_returns() {
    unsafe {
        let pool = pool(2);
        let count = AtomicUsize::new(0);
        let arg = &count as *const AtomicUsize as *mut c_void;

        let done = Done::new();
        let opts = options(ptr::null_mut(), Some(&done));
        let mut task = ptr::null_mut();
        assert_eq!(blz_spawn_ex(pool, Some(add_one), arg, &opts, &mut task), BLZ_OK);
        assert_eq!(blz_join(task), BLZ_OK);
        assert_eq!(done.seen(), (1, BLZ_OK));
        assert_eq!(count.load(Ordering::SeqCst), 1);

        // A task that calls blz_fail ran, and failed once.
        let failed_before = tasks_failed(pool);
        let done = Done::new();
        let opts = options(ptr::null_mut(), Some(&done));
        assert_eq!(blz_spawn_ex(pool, Some(fail), arg, &opts, &mut task), BLZ_OK);
        assert_eq!(blz_join(task), BLZ_ETASK);
        assert_eq!(done.seen(), (1, BLZ_ETASK));
        assert_eq!(count.load(Ordering::SeqCst), 2);
        assert_eq!(tasks_failed(pool), failed_before + 1);

        // No options: blz_spawn.
        assert_eq!(blz_spawn_ex(pool, Some(add_one), arg, ptr::null(), &mut task), BLZ_OK);
        assert_eq!(blz_join(task), BLZ_OK);
        assert_eq!(count.load(Ordering::SeqCst), 3);

        // A group given, no pool: the group's pool runs it.
        let mut group = ptr::null_mut();
        assert_eq!(blz_group_create(pool, &mut group), BLZ_OK);
        let in_group = Done::new();
        let opts = options(group, Some(&in_group));
        assert_eq!(blz_spawn_ex(ptr::null_mut(), Some(add_one), arg, &opts, &mut task), BLZ_OK);
        assert_eq!(blz_join(task), BLZ_OK);
        assert_eq!(blz_spawn_ex(pool, Some(add_one), arg, &opts, ptr::null_mut()), BLZ_OK);
        assert_eq!(blz_group_wait(group), BLZ_OK);
        assert_eq!(in_group.seen(), (2, BLZ_OK));
        assert_eq!(count.load(Ordering::SeqCst), 5);

        // Refused spawns: the task does not run and on_done is not called.
        let refused = Done::new();
        let good = options(group, Some(&refused));
        let other = pool_or_default();
        let mut flagged = good;
        flagged.flags = 16; // 1 HIGH_PRIORITY (0.2), 2 DONE_AFTER_FINISH, 4 CANCEL_ON_FAILURE and 8 AFTER_ANY_END (0.3); 16 is unknown
        let mut short = good;
        short.struct_size = 4;
        let no_group = options(ptr::null_mut(), Some(&refused));
        let mut task = ptr::null_mut();
        assert_eq!(blz_spawn_ex(pool, None, arg, &good, &mut task), BLZ_EINVAL);
        assert_eq!(blz_spawn_ex(ptr::null_mut(), Some(add_one), arg, &no_group, &mut task), BLZ_EINVAL);
        assert_eq!(blz_spawn_ex(other, Some(add_one), arg, &good, &mut task), BLZ_EINVAL);
        assert_eq!(blz_spawn_ex(pool, Some(add_one), arg, &flagged, &mut task), BLZ_EINVAL);
        assert_eq!(blz_spawn_ex(pool, Some(add_one), arg, &short, &mut task), BLZ_EINVAL);
        assert!(task.is_null());
        assert_eq!(blz_group_destroy(group), BLZ_OK);

        // A detached task with on_done: destroy waits for both.
        let detached = Done::new();
        let opts = options(ptr::null_mut(), Some(&detached));
        assert_eq!(blz_spawn_ex(pool, Some(add_one), arg, &opts, ptr::null_mut()), BLZ_OK);
        assert_eq!(blz_pool_destroy(other), BLZ_OK);
        assert_eq!(blz_pool_destroy(pool), BLZ_OK);
        assert_eq!(detached.seen(), (1, BLZ_OK));
        assert_eq!(count.load(Ordering::SeqCst), 6);
        assert_eq!(refused.seen().0, 0);
    }
}

#[test]
fn task_wait_for_times_out_without_freeing_and_detach_lets_go() {
    unsafe {
        let pool = pool(2);
        let gate = Gate::new();
        let mut task = ptr::null_mut();
        assert_eq!(blz_spawn(pool, Some(at_gate), gate.arg(), &mut task), BLZ_OK);
        gate.barrier.wait(); // running, and held until the second wait
        assert_eq!(blz_task_wait_for(task, 0), BLZ_ETIMEDOUT);
        assert_eq!(blz_task_wait_for(task, 1_000_000), BLZ_ETIMEDOUT);
        assert_eq!(blz_task_wait_for(task, 0), BLZ_ETIMEDOUT, "the handle is still valid");
        gate.barrier.wait();
        assert_eq!(blz_task_wait_for(task, u64::MAX), BLZ_OK);
        assert_eq!(gate.ran.load(Ordering::SeqCst), 1);

        // Polling until it finished gives the task's status once.
        let mut task = ptr::null_mut();
        assert_eq!(blz_spawn(pool, Some(fail), ptr::null_mut(), &mut task), BLZ_OK);
        let mut status = BLZ_ETIMEDOUT;
        eventually("finished", || {
            status = blz_task_wait_for(task, 0);
            status != BLZ_ETIMEDOUT
        });
        assert_eq!(status, BLZ_ETASK);

        // Detached while it runs: it still finishes and reports to on_done.
        let done = Done::new();
        let opts = options(ptr::null_mut(), Some(&done));
        let gate = Gate::new();
        let mut task = ptr::null_mut();
        assert_eq!(blz_spawn_ex(pool, Some(at_gate), gate.arg(), &opts, &mut task), BLZ_OK);
        gate.barrier.wait();
        assert_eq!(blz_task_detach(task), BLZ_OK);
        assert_eq!(done.seen().0, 0);
        gate.barrier.wait();
        eventually("reported", || done.seen().0 == 1);
        assert_eq!(done.seen(), (1, BLZ_OK));
        assert_eq!(gate.ran.load(Ordering::SeqCst), 1);

        assert_eq!(blz_task_wait_for(ptr::null_mut(), 0), BLZ_EINVAL);
        assert_eq!(blz_task_detach(ptr::null_mut()), BLZ_EINVAL);
        assert_eq!(blz_pool_destroy(pool), BLZ_OK);
    }
}

/// A group task that waits until its group is cancelled, as a long task
/// polls blz_cancelled, and records what it saw.
struct Poller {
    started: Barrier,
    group: AtomicPtr<blz_group>,
    saw_cancelled: AtomicI32,
    saw_group_cancelled: AtomicI32,
}

unsafe extern "C" fn poll_until_cancelled(arg: *mut c_void) {
    let p = &*(arg as *const Poller);
    p.started.wait();
    let deadline = Instant::now() + Duration::from_secs(60);
    while blz_cancelled() == 0 && Instant::now() < deadline {
        std::thread::yield_now();
    }
    p.saw_cancelled.store(blz_cancelled(), Ordering::SeqCst);
    p.saw_group_cancelled.store(blz_group_cancelled(p.group.load(Ordering::SeqCst)), Ordering::SeqCst);
}

#[test]
fn a_cancelled_group_skips_what_has_not_started_until_a_wait_resets_it() {
    unsafe {
        let pool = pool(2);
        let mut group = ptr::null_mut();
        assert_eq!(blz_group_create(pool, &mut group), BLZ_OK);
        let poller = Poller {
            started: Barrier::new(2),
            group: AtomicPtr::new(group),
            saw_cancelled: AtomicI32::new(-1),
            saw_group_cancelled: AtomicI32::new(-1),
        };
        assert_eq!(blz_group_spawn(group, Some(poll_until_cancelled), &poller as *const Poller as *mut c_void), BLZ_OK);
        poller.started.wait();
        assert_eq!(blz_group_cancelled(group), 0);
        assert_eq!(blz_cancelled(), 0, "outside any task");
        assert_eq!(blz_group_cancel(group), BLZ_OK);
        assert_eq!(blz_group_cancel(group), BLZ_OK, "twice is once");
        assert_eq!(blz_group_cancelled(group), 1);

        // Spawned after the cancel: skipped, with on_done told so.
        let count = AtomicUsize::new(0);
        let arg = &count as *const AtomicUsize as *mut c_void;
        let skipped = Done::new();
        let opts = options(group, Some(&skipped));
        let mut task = ptr::null_mut();
        assert_eq!(blz_spawn_ex(ptr::null_mut(), Some(add_one), arg, &opts, &mut task), BLZ_OK);
        assert_eq!(blz_join(task), BLZ_ECANCELED);
        assert_eq!(skipped.seen(), (1, BLZ_ECANCELED));
        assert_eq!(blz_spawn_ex(ptr::null_mut(), Some(add_one), arg, &opts, ptr::null_mut()), BLZ_OK);
        assert_eq!(blz_group_spawn(group, Some(add_one), arg), BLZ_OK);

        assert_eq!(blz_group_wait(group), BLZ_ECANCELED);
        assert_eq!(skipped.seen(), (2, BLZ_ECANCELED));
        assert_eq!(count.load(Ordering::SeqCst), 0, "no skipped task ran");
        assert_eq!(poller.saw_cancelled.load(Ordering::SeqCst), 1, "the running task saw the cancel");
        assert_eq!(poller.saw_group_cancelled.load(Ordering::SeqCst), 1);

        // The wait reset the group: tasks run again, and nothing is reported twice.
        assert_eq!(blz_group_cancelled(group), 0);
        assert_eq!(blz_group_spawn(group, Some(add_one), arg), BLZ_OK);
        assert_eq!(blz_group_wait(group), BLZ_OK);
        assert_eq!(count.load(Ordering::SeqCst), 1);
        assert_eq!(blz_group_destroy(group), BLZ_OK);

        assert_eq!(blz_group_cancel(ptr::null_mut()), BLZ_EINVAL);
        assert_eq!(blz_group_cancelled(ptr::null()), 0);
        assert_eq!(blz_pool_destroy(pool), BLZ_OK);
    }
}

/// A group task that holds the only worker until let go, then fails.
unsafe extern "C" fn gate_then_fail(arg: *mut c_void) {
    let gate = &*(arg as *const Gate);
    gate.barrier.wait();
    gate.barrier.wait();
    blz_fail();
    // The group was cancelled by the failure at once, not when the task ends.
    gate.ran.store(if blz_cancelled() == 1 { 1 } else { 2 }, Ordering::SeqCst);
}

#[test]
fn cancel_on_failure_skips_the_rest_of_the_group() {
    unsafe {
        let mut group = ptr::null_mut();
        assert_eq!(blz_group_create_ex(ptr::null_mut(), 0, &mut group), BLZ_EINVAL);
        // One worker: what is spawned while the gate holds it cannot start before the failure.
        let pool = pool(1);
        assert_eq!(blz_group_create_ex(pool, 2, &mut group), BLZ_EINVAL);
        assert_eq!(blz_group_create_ex(pool, BLZ_GROUP_CANCEL_ON_FAILURE, &mut group), BLZ_OK);

        let gate = Gate::new();
        assert_eq!(blz_group_spawn(group, Some(gate_then_fail), gate.arg()), BLZ_OK);
        gate.barrier.wait();
        let count = AtomicUsize::new(0);
        let arg = &count as *const AtomicUsize as *mut c_void;
        let later = Done::new();
        let opts = options(group, Some(&later));
        for _ in 0..3 {
            assert_eq!(blz_spawn_ex(pool, Some(add_one), arg, &opts, ptr::null_mut()), BLZ_OK);
        }
        gate.barrier.wait();
        assert_eq!(blz_group_wait(group), BLZ_ETASK, "the failure is reported, not the cancel it caused");
        assert_eq!(gate.ran.load(Ordering::SeqCst), 1, "blz_cancelled() right after blz_fail");
        assert_eq!(later.seen(), (3, BLZ_ECANCELED));
        assert_eq!(count.load(Ordering::SeqCst), 0);

        // Reset by the wait.
        assert_eq!(blz_group_cancelled(group), 0);
        assert_eq!(blz_group_spawn(group, Some(add_one), arg), BLZ_OK);
        assert_eq!(blz_group_wait(group), BLZ_OK);
        assert_eq!(count.load(Ordering::SeqCst), 1);
        assert_eq!(blz_group_destroy(group), BLZ_OK);
        assert_eq!(blz_pool_destroy(pool), BLZ_OK);
    }
}

#[test]
fn group_wait_for_times_out_without_consuming_a_failure() {
    unsafe {
        let pool = pool(2);
        let mut group = ptr::null_mut();
        assert_eq!(blz_group_create(pool, &mut group), BLZ_OK);
        // A failed task of the group, known to be finished (joined).
        let opts = options(group, None);
        let mut task = ptr::null_mut();
        assert_eq!(blz_spawn_ex(pool, Some(fail), ptr::null_mut(), &opts, &mut task), BLZ_OK);
        assert_eq!(blz_join(task), BLZ_ETASK);
        // And one held running.
        let gate = Gate::new();
        assert_eq!(blz_group_spawn(group, Some(at_gate), gate.arg()), BLZ_OK);
        gate.barrier.wait();
        assert_eq!(blz_group_wait_for(group, 0), BLZ_ETIMEDOUT);
        assert_eq!(blz_group_wait_for(group, 1_000_000), BLZ_ETIMEDOUT);
        gate.barrier.wait();
        assert_eq!(blz_group_wait_for(group, u64::MAX), BLZ_ETASK);
        assert_eq!(blz_group_wait_for(group, 0), BLZ_OK, "reported once");
        assert_eq!(gate.ran.load(Ordering::SeqCst), 1);
        assert_eq!(blz_group_destroy(group), BLZ_OK);
        assert_eq!(blz_pool_destroy(pool), BLZ_OK);
    }
}

/// A group task that cancels its own group, then runs a loop: no piece starts.
struct CancelledLoop {
    pool: *mut blz_pool,
    group: *mut blz_group,
    covered: AtomicUsize,
    status: AtomicI32,
}

unsafe extern "C" fn count_range(arg: *mut c_void, begin: usize, end: usize) {
    (*(arg as *const CancelledLoop)).covered.fetch_add(end - begin, Ordering::SeqCst);
}

unsafe extern "C" fn cancel_then_loop(arg: *mut c_void) {
    let l = &*(arg as *const CancelledLoop);
    // (No assert here: a panic must not unwind into C.)
    if blz_group_cancel(l.group) == BLZ_OK {
        l.status.store(blz_parallel_for(l.pool, 0, 1000, 1, Some(count_range), arg), Ordering::SeqCst);
    }
}

unsafe extern "C" fn fail_in_first_piece(arg: *mut c_void, begin: usize, end: usize) {
    if begin == 0 {
        blz_fail();
    }
    sum_range(arg, begin, end);
}

#[test]
fn failure_reaches_every_waiting_call_and_a_loop_obeys_its_groups_cancel() {
    unsafe {
        let pool = pool(2);
        let count = AtomicUsize::new(0);
        let arg = &count as *const AtomicUsize as *mut c_void;
        blz_fail(); // outside any job: nothing happens
        assert_eq!(blz_call(pool, Some(fail), arg), BLZ_ETASK);
        assert_eq!(blz_fork_join(pool, Some(fail), arg, Some(add_one), arg), BLZ_ETASK);
        assert_eq!(count.load(Ordering::SeqCst), 3, "both halves ran");
        let sum = AtomicUsize::new(0);
        let sum_arg = &sum as *const AtomicUsize as *mut c_void;
        assert_eq!(blz_parallel_for(pool, 0, 1000, 10, Some(fail_in_first_piece), sum_arg), BLZ_ETASK);
        assert_eq!(sum.load(Ordering::SeqCst), 999 * 1000 / 2, "every other piece still ran");
        assert_eq!(blz_call(pool, Some(add_one), arg), BLZ_OK, "a failure is not sticky");

        let mut group = ptr::null_mut();
        assert_eq!(blz_group_create(pool, &mut group), BLZ_OK);
        let l = CancelledLoop { pool, group, covered: AtomicUsize::new(0), status: AtomicI32::new(1) };
        assert_eq!(blz_group_spawn(group, Some(cancel_then_loop), &l as *const CancelledLoop as *mut c_void), BLZ_OK);
        assert_eq!(blz_group_wait(group), BLZ_ECANCELED);
        assert_eq!(l.status.load(Ordering::SeqCst), BLZ_ECANCELED);
        assert_eq!(l.covered.load(Ordering::SeqCst), 0, "no piece starts in a group cancelled before the loop");
        assert_eq!(blz_group_destroy(group), BLZ_OK);
        assert_eq!(blz_pool_destroy(pool), BLZ_OK);
    }
}

/// Which workers broadcast reached, how often each, and whether each call
/// ran on the worker its index names.
struct Reached {
    pool: AtomicPtr<blz_pool>,
    calls: [AtomicUsize; 4],
    wrong_thread: AtomicUsize,
    fail_on: u32,
}

unsafe extern "C" fn reach(arg: *mut c_void, worker_index: u32) {
    let r = &*(arg as *const Reached);
    r.calls[worker_index as usize].fetch_add(1, Ordering::SeqCst);
    if blz_worker_index(r.pool.load(Ordering::SeqCst)) != worker_index as i32 {
        r.wrong_thread.fetch_add(1, Ordering::SeqCst);
    }
    if worker_index == r.fail_on {
        blz_fail();
    }
}

unsafe extern "C" fn broadcast_from_a_worker(arg: *mut c_void) {
    let r = &*(arg as *const Reached);
    if blz_broadcast(r.pool.load(Ordering::SeqCst), Some(reach), arg) != BLZ_OK {
        r.wrong_thread.fetch_add(100, Ordering::SeqCst);
    }
}

#[test]
fn broadcast_runs_once_on_every_worker() {
    unsafe {
        let pool = pool(3);
        let reached = || Reached {
            pool: AtomicPtr::new(pool),
            calls: Default::default(),
            wrong_thread: AtomicUsize::new(0),
            fail_on: u32::MAX,
        };
        let calls = |r: &Reached| r.calls.iter().map(|c| c.load(Ordering::SeqCst)).collect::<Vec<_>>();

        let r = reached();
        assert_eq!(blz_broadcast(pool, Some(reach), &r as *const Reached as *mut c_void), BLZ_OK);
        assert_eq!(calls(&r), [1, 1, 1, 0]);
        assert_eq!(r.wrong_thread.load(Ordering::SeqCst), 0);

        // From one of the pool's own workers: no deadlock, every worker once.
        let r = reached();
        assert_eq!(blz_call(pool, Some(broadcast_from_a_worker), &r as *const Reached as *mut c_void), BLZ_OK);
        assert_eq!(calls(&r), [1, 1, 1, 0]);
        assert_eq!(r.wrong_thread.load(Ordering::SeqCst), 0, "(100: blz_broadcast failed)");

        // A call that fails: BLZ_ETASK, and every worker still ran.
        let r = Reached { fail_on: 1, ..reached() };
        assert_eq!(blz_broadcast(pool, Some(reach), &r as *const Reached as *mut c_void), BLZ_ETASK);
        assert_eq!(calls(&r), [1, 1, 1, 0]);

        assert_eq!(blz_broadcast(ptr::null_mut(), Some(reach), ptr::null_mut()), BLZ_EINVAL);
        assert_eq!(blz_broadcast(pool, None, ptr::null_mut()), BLZ_EINVAL);
        assert_eq!(blz_pool_destroy(pool), BLZ_OK);
    }
}

/// What `on_destroyed` of `blz_pool_release` saw: how often, and the status.
static RELEASED_CALLS: AtomicUsize = AtomicUsize::new(0);
static RELEASED_STATUS: AtomicI32 = AtomicI32::new(1);
static RELEASE_STOPS: AtomicUsize = AtomicUsize::new(0);

unsafe extern "C" fn on_released(done_arg: *mut c_void, status: blz_status) {
    assert_eq!(done_arg as usize, 0xd0e);
    RELEASED_STATUS.store(status, Ordering::SeqCst);
    RELEASED_CALLS.fetch_add(1, Ordering::SeqCst);
}

unsafe extern "C" fn count_stop(_user: *mut c_void, _index: u32) {
    RELEASE_STOPS.fetch_add(1, Ordering::SeqCst);
}

/// A task that releases its own pool (where blz_pool_destroy answers
/// EDEADLK), then still runs a fork-join on it: it is accepted work, which
/// the destroy on the other thread waits for.
unsafe extern "C" fn release_own_pool(arg: *mut c_void) {
    let pool = arg as *mut blz_pool;
    assert_eq!(blz_pool_destroy(pool), BLZ_EDEADLK);
    assert_eq!(blz_pool_release(pool, Some(on_released), 0xd0e as *mut c_void), BLZ_OK);
    let count = AtomicUsize::new(0);
    let count_arg = &count as *const AtomicUsize as *mut c_void;
    assert_eq!(blz_fork_join(pool, Some(add_one), count_arg, Some(add_one), count_arg), BLZ_OK);
    assert_eq!(count.load(Ordering::SeqCst), 2);
    assert_eq!(RELEASED_CALLS.load(Ordering::SeqCst), 0, "the destroy waits for this task");
}

#[test]
fn release_from_a_task_of_the_pool() {
    unsafe {
        assert_eq!(blz_pool_release(ptr::null_mut(), Some(on_released), ptr::null_mut()), BLZ_EINVAL);
        let mut config = std::mem::zeroed::<blz_pool_config>();
        blz_pool_config_init(&mut config);
        config.num_threads = 2;
        config.on_thread_stop = Some(count_stop);
        let mut pool = ptr::null_mut();
        assert_eq!(blz_pool_create(&config, &mut pool), BLZ_OK);
        assert_eq!(blz_spawn(pool, Some(release_own_pool), pool as *mut c_void, ptr::null_mut()), BLZ_OK);
        eventually("released", || RELEASED_CALLS.load(Ordering::SeqCst) == 1);
        assert_eq!(RELEASED_STATUS.load(Ordering::SeqCst), BLZ_OK);
        assert_eq!(RELEASE_STOPS.load(Ordering::SeqCst), 2, "every worker stopped before on_destroyed");
    }
}
