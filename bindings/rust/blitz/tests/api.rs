//! The safe API behaves as documented: values, threads, panics, errors,
//! lifetimes at run time, and dropping.
//! Atomics here are counters and flags read after a join or a wait that
//! already orders them; SeqCst is used throughout only for simplicity.
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::thread;
use std::time::Duration;

use blitz::{Error, ThreadPool, ThreadPoolBuilder};

mod common;
use common::{message, quiet_panics};

fn pool(n: usize) -> ThreadPool {
    ThreadPoolBuilder::new().num_threads(n).build().expect("build")
}

fn fib(n: u64) -> u64 {
    if n < 2 {
        return n;
    }
    let (a, b) = blitz::join(|| fib(n - 1), || fib(n - 2));
    a + b
}

fn assert_send_sync<T: Send + Sync>() {}
fn assert_send<T: Send>() {}

#[test]
fn pool_and_handles_are_send_and_sync() {
    assert_send_sync::<ThreadPool>();
    assert_send_sync::<Error>();
    assert_send_sync::<blitz::Scope<'static>>();
    assert_send::<blitz::JoinHandle<Vec<u8>>>();
}

/// The names (from /proc) of the workers that ran one of `tasks` tasks.
fn worker_names(pool: &ThreadPool, tasks: usize) -> Vec<String> {
    let names = Mutex::new(Vec::new());
    pool.scope(|s| {
        for _ in 0..tasks {
            s.spawn(|_| {
                let name = std::fs::read_to_string("/proc/thread-self/comm").unwrap();
                names.lock().unwrap().push(name.trim().to_string());
                // Makes it likely (not needed) that the other worker takes a task too.
                thread::sleep(Duration::from_millis(20));
            });
        }
    });
    names.into_inner().unwrap()
}

#[test]
fn builder_sets_threads_and_names() {
    let pool = ThreadPoolBuilder::new().num_threads(2).thread_name_prefix("worker").build().unwrap();
    assert_eq!(pool.current_num_threads(), 2);
    for name in worker_names(&pool, 2) {
        assert!(name == "worker-0" || name == "worker-1", "{}", name);
    }
    assert!(format!("{:?}", pool).contains("num_threads: 2"));

    // Linux keeps 15 bytes of a name: the prefix gives way to the index.
    let pool = ThreadPoolBuilder::new().num_threads(2).thread_name_prefix("a-much-too-long-prefix").build().unwrap();
    for name in worker_names(&pool, 2) {
        assert!(name == "a-much-too-lo-0" || name == "a-much-too-lo-1", "{}", name);
    }
}

#[test]
fn builder_errors_map_to_einval() {
    let einval = |built: Result<ThreadPool, blitz::ThreadPoolBuildError>| {
        matches!(built.unwrap_err().library_error(), Some(Error::InvalidArgument))
    };
    assert!(einval(ThreadPoolBuilder::new().num_threads(65536).build()));
    assert!(einval(ThreadPoolBuilder::new().num_threads(usize::MAX).build()));
    assert!(einval(ThreadPoolBuilder::new().thread_name_prefix("a\0b").build()));
    assert!(einval(ThreadPoolBuilder::new().thread_name(|i| format!("a\0{}", i)).build()));
    assert!(einval(ThreadPoolBuilder::new().num_threads(1).stack_size(1).build()));
    let pool = ThreadPoolBuilder::new().num_threads(1).stack_size(1 << 20).build().unwrap();
    assert_eq!(pool.install(|| 7), 7);
}

#[test]
fn default_thread_count_is_positive() {
    let pool = ThreadPoolBuilder::new().build().unwrap();
    assert!(pool.current_num_threads() >= 1);
}

#[test]
fn join_from_outside_runs_on_workers() {
    let pool = pool(2);
    let (a, b) = pool.join(blitz::current_thread_index, blitz::current_thread_index);
    assert!(a.unwrap() < 2 && b.unwrap() < 2);
    assert_eq!(pool.join(|| fib(20), || fib(21)), (6765, 10946));
}

#[test]
fn free_join_uses_the_workers_pool() {
    let pool = pool(2);
    let (a, b, n) = pool.install(|| {
        let (a, b) = blitz::join(blitz::current_thread_index, blitz::current_thread_index);
        (a, b, blitz::current_num_threads())
    });
    assert!(a.is_some() && b.is_some());
    assert_eq!(n, 2);
    for _ in 0..20 {
        assert_eq!(pool.install(|| fib(25)), 75025);
    }
    assert!(pool.stats().jobs_executed > 0);
}

#[test]
fn free_join_outside_a_pool_runs_in_the_global_pool() {
    let here = thread::current().id();
    let (a, b) = blitz::join(
        || (thread::current().id(), blitz::current_thread_index()),
        || (thread::current().id(), blitz::current_thread_index()),
    );
    assert!(a.0 != here && b.0 != here, "both moved into the global pool");
    assert!(a.1.is_some() && b.1.is_some());
    assert_eq!(blitz::current_thread_index(), None);
    assert!(blitz::current_num_threads() >= 1);
    assert_eq!(fib(15), 610);
}

#[test]
fn install_returns_the_value_on_a_worker() {
    let pool = pool(2);
    let outside = thread::current().id();
    let (id, index) = pool.install(|| (thread::current().id(), pool.current_thread_index()));
    assert_ne!(id, outside);
    assert!(index.unwrap() < 2);
    assert!(pool.install(blitz::current_thread_index).is_some());
    // Nested install on the same pool runs inline.
    let nested = pool.install(|| {
        let me = thread::current().id();
        pool.install(|| thread::current().id()) == me
    });
    assert!(nested);
    assert_eq!(pool.current_thread_index(), None);
    // Borrowing and mutating the caller's data.
    let mut v = vec![1, 2, 3];
    pool.install(|| v.push(4));
    assert_eq!(v, [1, 2, 3, 4]);
}

#[test]
fn join_resumes_the_first_closures_panic_after_both_ran() {
    quiet_panics();
    let pool = pool(2);
    let b_ran = AtomicBool::new(false);
    let caught = panic::catch_unwind(AssertUnwindSafe(|| {
        pool.join(|| panic!("a on purpose"), || b_ran.store(true, Ordering::SeqCst))
    }));
    assert_eq!(message(&*caught.unwrap_err()), "a on purpose");
    assert!(b_ran.load(Ordering::SeqCst));

    let both = panic::catch_unwind(AssertUnwindSafe(|| {
        pool.join(|| -> () { panic!("first on purpose") }, || -> () { panic!("second on purpose") })
    }));
    assert_eq!(message(&*both.unwrap_err()), "first on purpose");

    let only_b = panic::catch_unwind(AssertUnwindSafe(|| pool.join(|| 1, || -> i32 { panic!("b on purpose") })));
    assert_eq!(message(&*only_b.unwrap_err()), "b on purpose");

    // The same rules on a worker and outside any pool.
    let inner = pool.install(|| {
        panic::catch_unwind(AssertUnwindSafe(|| {
            blitz::join(|| -> () { panic!("inner a on purpose") }, || -> () { panic!("inner b on purpose") })
        }))
        .map_err(|p| message(&*p))
    });
    assert_eq!(inner.unwrap_err(), "inner a on purpose");
    let b_ran = AtomicBool::new(false);
    let outside = panic::catch_unwind(AssertUnwindSafe(|| {
        blitz::join(|| panic!("outside on purpose"), || b_ran.store(true, Ordering::SeqCst))
    }));
    assert_eq!(message(&*outside.unwrap_err()), "outside on purpose");
    assert!(b_ran.load(Ordering::SeqCst));

    // The pool still works. Each of the four joins that panicked on the
    // pool failed at least one job, which libblitz counted (a job counts
    // once however many of its halves failed, so no exact figure).
    assert_eq!(pool.join(|| 1, || 2), (1, 2));
    assert!(pool.stats().tasks_failed >= 4, "{:?}", pool.stats());
}

#[test]
fn install_resumes_a_panic() {
    quiet_panics();
    let pool = pool(1);
    let caught = panic::catch_unwind(AssertUnwindSafe(|| pool.install(|| -> () { panic!("install on purpose") })));
    assert_eq!(message(&*caught.unwrap_err()), "install on purpose");
    assert_eq!(pool.install(|| 5), 5);
}

#[test]
fn scope_tasks_borrow_and_finish_before_return() {
    let pool = pool(2);
    let data: Vec<u64> = (0..1000).collect();
    let counter = AtomicUsize::new(0);
    let mut sums = [0u64; 10];
    pool.scope(|s| {
        for (chunk, sum) in data.chunks(100).zip(sums.iter_mut()) {
            let counter = &counter;
            s.spawn(move |s| {
                *sum = chunk.iter().sum();
                counter.fetch_add(1, Ordering::SeqCst);
                s.spawn(move |_| {
                    thread::sleep(Duration::from_millis(1));
                    counter.fetch_add(1, Ordering::SeqCst);
                });
            });
        }
    });
    assert_eq!(counter.load(Ordering::SeqCst), 20);
    assert_eq!(sums.iter().sum::<u64>(), 999 * 1000 / 2);
}

#[test]
fn scope_returns_the_value_and_spawns_from_other_threads() {
    let pool = pool(2);
    let count = AtomicUsize::new(0);
    let r = pool.scope(|s| {
        // A thread outside the pool may spawn into the scope too.
        thread::scope(|t| {
            t.spawn(|| {
                for _ in 0..100 {
                    s.spawn(|_| {
                        count.fetch_add(1, Ordering::SeqCst);
                    });
                }
            });
        });
        "done"
    });
    assert_eq!(r, "done");
    assert_eq!(count.load(Ordering::SeqCst), 100);
}

#[test]
fn scope_waits_for_tasks_before_resuming_a_panic() {
    quiet_panics();
    let pool = pool(2);
    let finished = AtomicUsize::new(0);
    let caught = panic::catch_unwind(AssertUnwindSafe(|| {
        pool.scope(|s| {
            for _ in 0..4 {
                s.spawn(|_| {
                    thread::sleep(Duration::from_millis(20));
                    finished.fetch_add(1, Ordering::SeqCst);
                });
            }
            panic!("op on purpose");
        })
    }));
    assert_eq!(message(&*caught.unwrap_err()), "op on purpose");
    assert_eq!(finished.load(Ordering::SeqCst), 4, "every task ended before the panic was resumed");

    let finished = AtomicUsize::new(0);
    let caught = panic::catch_unwind(AssertUnwindSafe(|| {
        pool.scope(|s| {
            s.spawn(|_| panic!("task on purpose"));
            for _ in 0..4 {
                s.spawn(|_| {
                    thread::sleep(Duration::from_millis(5));
                    finished.fetch_add(1, Ordering::SeqCst);
                });
            }
        })
    }));
    assert_eq!(message(&*caught.unwrap_err()), "task on purpose");
    assert_eq!(finished.load(Ordering::SeqCst), 4);
    assert_eq!(pool.scope(|_| 3), 3);
}

#[test]
fn spawn_and_join_handles() {
    quiet_panics();
    let pool = pool(2);
    assert_eq!(pool.spawn_with_handle(|| 42).join().unwrap(), 42);
    let handles: Vec<_> = (0..50u64).map(|i| pool.spawn_with_handle(move || i * i)).collect();
    let total: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
    assert_eq!(total, (0..50u64).map(|i| i * i).sum());

    let failed_before = pool.stats().tasks_failed;
    let err = pool.spawn_with_handle(|| -> i32 { panic!("task on purpose: {}", 7) }).join().unwrap_err();
    assert_eq!(pool.stats().tasks_failed, failed_before + 1, "the panic was reported to libblitz");
    assert_eq!(err.status(), blitz::sys::BLZ_ETASK);
    assert!(err.to_string().contains("task on purpose: 7"), "{}", err);
    match err {
        Error::TaskPanicked(Some(ref payload)) => assert_eq!(payload.message().unwrap(), "task on purpose: 7"),
        ref other => panic!("unexpected {:?}", other),
    }
    let payload = err.into_panic().unwrap();
    assert_eq!(message(&*payload), "task on purpose: 7");

    // Joined from a worker of the same pool: the worker helps while it waits.
    let v = pool.install(|| {
        let hs: Vec<_> = (0..10).map(|i| pool.spawn_with_handle(move || i)).collect();
        hs.into_iter().map(|h| h.join().unwrap()).sum::<i32>()
    });
    assert_eq!(v, 45);
}

#[test]
fn dropping_a_handle_waits_for_the_task() {
    let pool = pool(2);
    let done = Arc::new(AtomicBool::new(false));
    let flag = done.clone();
    drop(pool.spawn_with_handle(move || {
        thread::sleep(Duration::from_millis(30));
        flag.store(true, Ordering::SeqCst);
    }));
    assert!(done.load(Ordering::SeqCst));
}

#[test]
fn a_handle_outlives_its_pool() {
    let pool = pool(1);
    let handle = pool.spawn_with_handle(|| {
        thread::sleep(Duration::from_millis(10));
        String::from("kept")
    });
    drop(pool); // does not wait; the handle does
    assert_eq!(handle.join().unwrap(), "kept");
}

#[test]
fn joining_a_task_from_inside_itself_is_refused() {
    let pool = pool(2);
    let (tx, rx) = std::sync::mpsc::channel::<blitz::JoinHandle<()>>();
    let rx = Mutex::new(rx);
    let result = Arc::new(Mutex::new(None));
    let out = result.clone();
    let handle = pool.spawn_with_handle(move || {
        let me = rx.lock().unwrap().recv().unwrap();
        *out.lock().unwrap() = Some(matches!(me.join(), Err(Error::WouldDeadlock)));
    });
    tx.send(handle).unwrap();
    pool.wait_until_stopped(); // the task has run
    assert_eq!(*result.lock().unwrap(), Some(true));
}

#[test]
fn dropping_the_pool_runs_accepted_tasks_and_exit_handlers() {
    let started = Arc::new(AtomicUsize::new(0));
    let stopped = Arc::new(AtomicUsize::new(0));
    let (s, e) = (started.clone(), stopped.clone());
    let pool = ThreadPoolBuilder::new()
        .num_threads(2)
        .start_handler(move |i| {
            assert!(i < 2);
            assert_eq!(blitz::current_thread_index(), Some(i));
            s.fetch_add(1, Ordering::SeqCst);
        })
        .exit_handler(move |_| {
            e.fetch_add(1, Ordering::SeqCst);
        })
        .build()
        .unwrap();
    let ran = Arc::new(AtomicUsize::new(0));
    let handles: Vec<_> = (0..8)
        .map(|_| {
            let ran = ran.clone();
            pool.spawn_with_handle(move || {
                thread::sleep(Duration::from_millis(2));
                ran.fetch_add(1, Ordering::SeqCst);
            })
        })
        .collect();
    pool.wait_until_stopped();
    assert_eq!(ran.load(Ordering::SeqCst), 8);
    assert_eq!(started.load(Ordering::SeqCst), 2);
    assert_eq!(stopped.load(Ordering::SeqCst), 2);
    for h in handles {
        h.join().unwrap();
    }
}

#[test]
fn a_panicking_handler_goes_to_the_panic_handler() {
    quiet_panics();
    let (tx, rx) = mpsc::channel();
    let tx = Mutex::new(tx);
    let pool = ThreadPoolBuilder::new()
        .num_threads(1)
        .start_handler(|_| panic!("handler on purpose"))
        .panic_handler(move |payload| tx.lock().unwrap().send(message(&*payload)).unwrap())
        .build()
        .unwrap();
    assert_eq!(pool.install(|| 1), 1);
    assert_eq!(rx.recv().unwrap(), "handler on purpose");
}

#[test]
fn the_last_arc_dropped_on_a_worker_does_not_deadlock() {
    let pool = Arc::new(pool(2));
    let inner = pool.clone();
    let barrier = Arc::new(Barrier::new(2));
    let b = barrier.clone();
    let handle = pool.spawn_with_handle(move || {
        b.wait(); // the outside Arc is gone by now
        drop(inner); // the last reference: destroyed on another thread
        5
    });
    drop(pool);
    barrier.wait();
    assert_eq!(handle.join().unwrap(), 5);
}

#[test]
fn pools_nest() {
    let outer = pool(1);
    let inner = pool(2);
    let (outer_index, inner_index, inner_threads) = outer.install(|| {
        let outer_index = blitz::current_thread_index();
        let (i, n) = inner.install(|| (blitz::current_thread_index(), blitz::current_num_threads()));
        (outer_index, i, n)
    });
    assert_eq!(outer_index, Some(0));
    assert!(inner_index.unwrap() < 2);
    assert_eq!(inner_threads, 2);
    assert_eq!(inner.current_thread_index(), None);
}

#[test]
fn many_threads_share_one_pool() {
    let pool = pool(2);
    thread::scope(|t| {
        for k in 0..4u64 {
            let pool = &pool;
            t.spawn(move || {
                for _ in 0..20 {
                    assert_eq!(pool.install(|| fib(15 + k % 2)), if k % 2 == 0 { 610 } else { 987 });
                    assert_eq!(pool.join(|| k, || k + 1), (k, k + 1));
                }
            });
        }
    });
}

#[test]
fn stats_are_a_debug_snapshot() {
    let pool = pool(2);
    pool.install(|| fib(18));
    let stats = pool.stats();
    assert_eq!(stats.num_threads, 2);
    assert!(stats.jobs_injected >= 1);
    assert!(stats.jobs_executed >= 1);
    let text = format!("{:?}", stats);
    assert!(text.contains("jobs_executed") && text.contains("steals"), "{}", text);
    assert_eq!(pool.try_stats().unwrap().num_threads, 2);
}

#[test]
fn every_status_maps_to_an_error() {
    use blitz::sys::*;
    let all = [
        (BLZ_EINVAL, "InvalidArgument"),
        (BLZ_ENOMEM, "OutOfMemory"),
        (BLZ_ETHREAD, "ThreadSpawn"),
        (BLZ_ESHUTDOWN, "ShuttingDown"),
        (BLZ_EDEADLK, "WouldDeadlock"),
        (BLZ_ETASK, "TaskPanicked"),
        (BLZ_EFORK, "Forked"),
        (BLZ_ETIMEDOUT, "TimedOut"),
        (BLZ_ECANCELED, "Cancelled"),
        (-99, "Unknown"),
    ];
    assert!(Error::check(BLZ_OK).is_ok());
    for (status, variant) in all {
        let error = Error::check(status).unwrap_err();
        assert_eq!(error.status(), status);
        assert!(format!("{:?}", error).starts_with(variant), "{:?}", error);
        let text = error.to_string();
        if status != -99 {
            assert!(text.starts_with("BLZ_E"), "{}", text);
        } else {
            assert!(text.contains("-99"), "{}", text);
        }
        // std::error::Error, and Send + Sync for boxing.
        let boxed: Box<dyn std::error::Error + Send + Sync> = Box::new(error);
        assert!(!boxed.to_string().is_empty());
    }
    assert_eq!(Error::InvalidArgument.to_string(), "BLZ_EINVAL: invalid argument");
}

#[test]
fn every_status_the_library_names_has_its_own_variant() {
    // The library's own list of statuses: those blz_status_string knows.
    let known: Vec<i32> = (-1000..0)
        .filter(|&status| {
            // SAFETY: blz_status_string accepts any value and returns a static string.
            let text = unsafe { std::ffi::CStr::from_ptr(blitz::sys::blz_status_string(status)) };
            text.to_bytes().starts_with(b"BLZ_E")
        })
        .collect();
    assert!(known.len() >= 9, "{:?}", known);
    for status in known {
        let error = Error::check(status).unwrap_err();
        assert!(!matches!(error, Error::Unknown(_)), "status {} has no variant", status);
        assert_eq!(error.status(), status);
    }
}

#[test]
fn question_mark_works_with_boxed_errors() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let pool = ThreadPoolBuilder::new().num_threads(1).build()?;
    let v: i32 = pool.spawn_with_handle(|| 42).join()?;
    assert_eq!(v, 42);
    Ok(())
}

// ---- 0.2: polling and bounded joins, detaching, cancelling scopes, broadcast

use std::sync::mpsc;
use std::time::Instant;

/// Polls `done` until it holds or a minute passed: a bound that turns a
/// hang into a failure, never a timing a test relies on. Whether it held.
fn within_a_minute(mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if done() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        thread::yield_now();
    }
}

/// Counts its drops: a closure or a value that is neither leaked nor dropped twice.
struct DropCount(Arc<AtomicUsize>);

impl Drop for DropCount {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

fn counter() -> Arc<AtomicUsize> {
    Arc::new(AtomicUsize::new(0))
}

#[test]
fn is_finished_polls_and_the_handle_keeps_the_outcome() {
    quiet_panics();
    let pool = pool(2);
    let (go, wait) = mpsc::channel::<()>();
    let handle = pool.spawn_with_handle(move || {
        wait.recv().unwrap();
        String::from("done")
    });
    assert!(!handle.is_finished(), "held until the send");
    assert!(!handle.is_finished());
    go.send(()).unwrap();
    assert!(within_a_minute(|| handle.is_finished()));
    // libblitz freed its handle at the poll that saw the end; ours goes on.
    assert!(handle.is_finished());
    assert_eq!(handle.join().unwrap(), "done");

    let handle = pool.spawn_with_handle(|| -> i32 { panic!("polled on purpose") });
    assert!(within_a_minute(|| handle.is_finished()));
    match handle.join() {
        Err(Error::TaskPanicked(Some(payload))) => assert_eq!(payload.message().unwrap(), "polled on purpose"),
        other => panic!("unexpected {:?}", other),
    }

    // A value that finished and was never joined is dropped with the handle.
    let drops = counter();
    let value = DropCount(drops.clone());
    let handle = pool.spawn_with_handle(move || value);
    assert!(within_a_minute(|| handle.is_finished()));
    assert_eq!(drops.load(Ordering::SeqCst), 0, "the value waits in the handle");
    drop(handle);
    assert_eq!(drops.load(Ordering::SeqCst), 1);
}

#[test]
fn join_timeout_hands_the_handle_back_until_the_task_finished() {
    quiet_panics();
    let pool = pool(2);
    let (go, wait) = mpsc::channel::<()>();
    let handle = pool.spawn_with_handle(move || {
        wait.recv().unwrap();
        7
    });
    let handle = handle.join_timeout(Duration::ZERO).unwrap_err();
    let handle = handle.join_timeout(Duration::from_millis(5)).unwrap_err();
    assert!(!handle.is_finished());
    go.send(()).unwrap();
    assert_eq!(handle.join_timeout(Duration::from_secs(600)).unwrap().unwrap(), 7);

    // A failure comes as the join's own error.
    let handle = pool.spawn_with_handle(|| -> () { panic!("timed on purpose") });
    let error = handle.join_timeout(Duration::from_secs(600)).unwrap().unwrap_err();
    assert_eq!(error.status(), blitz::sys::BLZ_ETASK);
    assert!(error.to_string().contains("timed on purpose"), "{}", error);

    // Longer than libblitz can say: no bound at all.
    assert_eq!(pool.spawn_with_handle(|| 1).join_timeout(Duration::MAX).unwrap().unwrap(), 1);
    // From a worker of the same pool, which runs other jobs while it waits.
    let v = pool.install(|| pool.spawn_with_handle(|| 5).join_timeout(Duration::from_secs(600)).unwrap().unwrap());
    assert_eq!(v, 5);
}

#[test]
fn cancel_skips_a_queued_task_and_tells_a_running_one() {
    let pool = pool(1);
    // The only worker held: what is spawned next queues behind it.
    let (go, wait) = mpsc::channel::<()>();
    let (started, has_started) = mpsc::channel::<()>();
    let busy = pool.spawn_with_handle(move || {
        started.send(()).unwrap();
        wait.recv().unwrap();
        blitz::is_cancelled()
    });
    has_started.recv().unwrap();
    // Skipped: it never runs, its closure is dropped (on a worker) and its join says so.
    let drops = counter();
    let captured = DropCount(drops.clone());
    let ran = Arc::new(AtomicUsize::new(0));
    let ran_in_task = ran.clone();
    let queued = pool.spawn_with_handle(move || {
        let _keep = &captured;
        ran_in_task.fetch_add(1, Ordering::SeqCst);
    });
    queued.cancel();
    queued.cancel(); // a second cancel changes nothing
    // Running: not interrupted, but it sees the cancel.
    busy.cancel();
    go.send(()).unwrap();
    assert!(busy.join().unwrap(), "the running task saw is_cancelled()");
    assert!(matches!(queued.join(), Err(Error::Cancelled)));
    assert_eq!(ran.load(Ordering::SeqCst), 0);
    assert_eq!(drops.load(Ordering::SeqCst), 1, "the closure that never ran was dropped");
    // A finished task keeps its value.
    let done = pool.spawn_with_handle(|| 3);
    assert!(within_a_minute(|| done.is_finished()));
    done.cancel();
    assert_eq!(done.join().unwrap(), 3);
    // A skipped task that nobody joins frees itself.
    let drops = counter();
    let captured = DropCount(drops.clone());
    let (go, wait) = mpsc::channel::<()>();
    let busy = pool.spawn_with_handle(move || wait.recv().unwrap());
    let queued = pool.spawn_with_handle(move || drop(captured));
    queued.cancel();
    queued.detach();
    go.send(()).unwrap();
    busy.join().unwrap();
    assert!(within_a_minute(|| drops.load(Ordering::SeqCst) == 1));
}

#[test]
fn a_detached_task_runs_on_and_frees_itself() {
    quiet_panics();
    let pool = pool(2);
    let drops = counter();
    let (go, wait) = mpsc::channel::<()>();
    let (ran, has_run) = mpsc::channel::<()>();
    let value = DropCount(drops.clone());
    pool.spawn_with_handle(move || {
        wait.recv().unwrap();
        ran.send(()).unwrap();
        value
    })
    .detach();
    go.send(()).unwrap();
    has_run.recv().unwrap();
    assert!(within_a_minute(|| drops.load(Ordering::SeqCst) == 1), "the value was dropped on the worker");

    // Detached once finished: dropped at once, here.
    let drops = counter();
    let value = DropCount(drops.clone());
    let handle = pool.spawn_with_handle(move || value);
    assert!(within_a_minute(|| handle.is_finished()));
    handle.detach();
    assert_eq!(drops.load(Ordering::SeqCst), 1);

    // A detached panic is dropped with the task.
    pool.spawn_with_handle(|| -> () { panic!("detached on purpose") }).detach();

    // The end of the pool waits for detached tasks too.
    let done = Arc::new(AtomicBool::new(false));
    let flag = done.clone();
    let (go, wait) = mpsc::channel::<()>();
    pool.spawn_with_handle(move || {
        wait.recv().unwrap();
        flag.store(true, Ordering::SeqCst);
    })
    .detach();
    go.send(()).unwrap();
    pool.wait_until_stopped();
    assert!(done.load(Ordering::SeqCst));
}

#[test]
fn a_task_asking_about_itself_is_not_finished_and_cannot_join() {
    let pool = pool(2);
    let drops = counter();
    let value = DropCount(drops.clone());
    let (tx, rx) = mpsc::channel::<blitz::JoinHandle<DropCount>>();
    let rx = Mutex::new(rx);
    let seen = Arc::new(Mutex::new(None));
    let out = seen.clone();
    let handle = pool.spawn_with_handle(move || {
        let me = rx.lock().unwrap().recv().unwrap();
        let finished = me.is_finished();
        let joined = me.join();
        *out.lock().unwrap() = Some((finished, matches!(joined, Err(Error::WouldDeadlock))));
        value
    });
    tx.send(handle).unwrap();
    pool.wait_until_stopped(); // the task has run
    assert_eq!(*seen.lock().unwrap(), Some((false, true)));
    // The refused join let the task go, which freed its value.
    assert_eq!(drops.load(Ordering::SeqCst), 1);
}

#[test]
fn a_cancelled_scope_drops_what_has_not_started() {
    let pool = pool(2);
    let drops = counter();
    let ran = AtomicUsize::new(0);
    let r = pool.scope(|s| {
        assert!(!s.is_cancelled());
        s.cancel();
        s.cancel();
        assert!(s.is_cancelled());
        for _ in 0..10 {
            let (captured, ran) = (DropCount(drops.clone()), &ran);
            s.spawn(move |_| {
                let _captured = captured;
                ran.fetch_add(1, Ordering::SeqCst);
            });
        }
        "op's value"
    });
    assert_eq!(r, "op's value", "a cancel is no failure");
    assert_eq!(ran.load(Ordering::SeqCst), 0);
    assert_eq!(drops.load(Ordering::SeqCst), 10, "every skipped closure dropped, before scope returned");
    assert!(!pool.scope(|s| s.is_cancelled()), "a new scope starts afresh");
}

#[test]
fn a_running_task_sees_its_scope_cancelled() {
    let pool = pool(2);
    let seen = Mutex::new(None);
    let started = Barrier::new(2);
    pool.scope(|s| {
        let (seen, started) = (&seen, &started);
        s.spawn(move |s| {
            assert!(!blitz::is_cancelled());
            started.wait();
            let saw = within_a_minute(blitz::is_cancelled);
            // Also in both halves of a join, wherever they run.
            let (a, b) = blitz::join(blitz::is_cancelled, blitz::is_cancelled);
            *seen.lock().unwrap() = Some((saw, s.is_cancelled(), a, b));
        });
        // op blocks its worker here: the other worker runs the task.
        started.wait();
        s.cancel();
        assert!(!blitz::is_cancelled(), "op is no task of the scope");
    });
    assert_eq!(*seen.lock().unwrap(), Some((true, true, true, true)));
    assert!(!blitz::is_cancelled());
}

#[test]
fn a_fail_fast_scope_is_cancelled_by_the_first_panic() {
    quiet_panics();
    let pool = pool(2);
    let drops = counter();
    let ran = AtomicUsize::new(0);
    let cancelled = AtomicBool::new(false);
    let caught = panic::catch_unwind(AssertUnwindSafe(|| {
        pool.scope_fail_fast(|s| {
            s.spawn(|_| panic!("fail-fast on purpose"));
            // op blocks its worker: the other one runs the task, whose panic cancels.
            cancelled.store(within_a_minute(|| s.is_cancelled()), Ordering::SeqCst);
            for _ in 0..10 {
                let (captured, ran) = (DropCount(drops.clone()), &ran);
                s.spawn(move |_| {
                    let _captured = captured;
                    ran.fetch_add(1, Ordering::SeqCst);
                });
            }
        })
    }));
    assert_eq!(message(&*caught.unwrap_err()), "fail-fast on purpose");
    assert!(cancelled.load(Ordering::SeqCst), "the panic cancelled the scope before the scope ended");
    assert_eq!(ran.load(Ordering::SeqCst), 0);
    assert_eq!(drops.load(Ordering::SeqCst), 10);

    // A plain scope is not cancelled by a panic (scope_waits_for_tasks_before_resuming_a_panic
    // shows that every task runs).
    let caught = panic::catch_unwind(AssertUnwindSafe(|| {
        pool.scope(|s| {
            s.spawn(|_| panic!("plain on purpose"));
        })
    }));
    assert_eq!(message(&*caught.unwrap_err()), "plain on purpose");
}

#[test]
fn a_panic_in_a_join_half_cancels_a_fail_fast_scope_before_it_reaches_the_task() {
    quiet_panics();
    let pool = pool(2);
    let b_saw = AtomicBool::new(false);
    let caught = panic::catch_unwind(AssertUnwindSafe(|| {
        pool.scope_fail_fast(|s| {
            s.spawn(|_| {
                // b runs after a here, or on a thief meanwhile; either way a's
                // panic has cancelled the scope while join still waits for b.
                blitz::join(
                    || panic!("half on purpose"),
                    || b_saw.store(within_a_minute(blitz::is_cancelled), Ordering::SeqCst),
                );
            });
        })
    }));
    assert_eq!(message(&*caught.unwrap_err()), "half on purpose");
    assert!(b_saw.load(Ordering::SeqCst));
}

#[test]
fn a_panic_of_op_cancels_a_fail_fast_scope() {
    quiet_panics();
    let pool = pool(2);
    let saw = AtomicBool::new(false);
    let started = Barrier::new(2);
    let caught = panic::catch_unwind(AssertUnwindSafe(|| {
        pool.scope_fail_fast(|s| {
            let (saw, started) = (&saw, &started);
            s.spawn(move |_| {
                started.wait();
                saw.store(within_a_minute(blitz::is_cancelled), Ordering::SeqCst);
            });
            started.wait();
            panic!("op fail-fast on purpose");
        })
    }));
    assert_eq!(message(&*caught.unwrap_err()), "op fail-fast on purpose");
    assert!(saw.load(Ordering::SeqCst), "the running task saw the cancel");
}

thread_local! {
    static SLOT: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

#[test]
fn broadcast_calls_the_closure_once_on_every_worker() {
    let pool = pool(3);
    let seen =
        pool.broadcast(|ctx| (ctx.index(), ctx.num_threads(), blitz::current_thread_index(), thread::current().id()));
    assert_eq!(seen.len(), 3);
    for (i, (index, num_threads, current, _)) in seen.iter().enumerate() {
        assert_eq!((*index, *num_threads, *current), (i, 3, Some(i)));
    }
    let mut ids: Vec<_> = seen.iter().map(|s| format!("{:?}", s.3)).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 3, "three threads");

    // Per-worker state, set once and found by later calls on each worker.
    pool.broadcast(|ctx| SLOT.with(|slot| slot.set(100 + ctx.index())));
    assert_eq!(pool.broadcast(|ctx| SLOT.with(|slot| slot.get()) == 100 + ctx.index()), [true, true, true]);

    // It borrows from the caller's frame.
    let calls = AtomicUsize::new(0);
    pool.broadcast(|_| calls.fetch_add(1, Ordering::SeqCst));
    assert_eq!(calls.load(Ordering::SeqCst), 3);

    // From a worker of the pool: no deadlock, every worker once.
    assert_eq!(pool.install(|| blitz::broadcast(|ctx| ctx.index())), [0, 1, 2]);
    assert_eq!(pool.install(|| pool.broadcast(|ctx| ctx.index())), [0, 1, 2]);
    // Outside any pool: on every worker of the global pool.
    let global = blitz::broadcast(|ctx| (ctx.index(), ctx.num_threads(), blitz::current_thread_index()));
    let n = blitz::current_num_threads();
    assert_eq!(global, (0..n).map(|i| (i, n, Some(i))).collect::<Vec<_>>());
}

#[test]
fn broadcast_runs_everywhere_then_resumes_a_panic() {
    quiet_panics();
    let pool = pool(3);
    let calls = AtomicUsize::new(0);
    let caught = panic::catch_unwind(AssertUnwindSafe(|| {
        pool.broadcast(|ctx| {
            calls.fetch_add(1, Ordering::SeqCst);
            if ctx.index() == 1 {
                panic!("broadcast on purpose");
            }
            ctx.index()
        })
    }));
    assert_eq!(message(&*caught.unwrap_err()), "broadcast on purpose");
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    assert_eq!(pool.broadcast(|ctx| ctx.index()), [0, 1, 2]);
}

/// Issue 18: a CPU list pins the workers (one per entry by default), the
/// cap and per-worker statistics are reachable, a high-priority spawn runs.
#[test]
fn cpu_list_cap_priority_and_worker_stats() {
    let pool = ThreadPoolBuilder::new().cpu_list("0").build().unwrap();
    assert_eq!(pool.current_num_threads(), 1);
    let cpu = pool.install(|| unsafe { libc_sched_getcpu() });
    assert_eq!(cpu, 0);
    pool.set_max_active(1).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    pool.spawn_high_priority(move || tx.send(7).unwrap());
    assert_eq!(rx.recv().unwrap(), 7);
    pool.set_max_active(0).unwrap();
    // The install and the spawn: a job is counted once its function has returned.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let mut worker = pool.worker_stats(0).unwrap();
    while worker.jobs_executed < 2 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(1));
        worker = pool.worker_stats(0).unwrap();
    }
    assert_eq!(worker.num_threads, 1);
    assert!(worker.jobs_executed >= 2);
    assert!(matches!(pool.worker_stats(1), Err(Error::InvalidArgument)));
    for bad in ["", "a", "3-1", "0-", "4096"] {
        assert!(ThreadPoolBuilder::new().cpu_list(bad).build().is_err(), "{:?}", bad);
    }
}

/// Issue 18: a trace from Rust. The broadcast after each one cannot end
/// before every worker wrote its span of the one before (a span is written
/// when its job ends, possibly after the broadcast returned).
#[test]
fn trace_start_and_stop_write_the_file() {
    let pool = ThreadPoolBuilder::new().num_threads(2).build().unwrap();
    let dir = std::env::temp_dir().join(format!("blitz-rust-trace-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("rust.json");
    pool.trace_start(&path).unwrap();
    assert!(matches!(pool.trace_start(&path), Err(Error::InvalidArgument))); // one at a time
    let broadcasts = 3;
    for _ in 0..broadcasts {
        pool.broadcast(|_| ());
    }
    pool.trace_stop().unwrap();
    assert!(matches!(pool.trace_stop(), Err(Error::InvalidArgument))); // none running
    assert!(matches!(pool.trace_start(dir.join("missing/x.json")), Err(Error::InvalidArgument)));
    assert!(matches!(pool.trace_start("a\0b"), Err(Error::InvalidArgument)));
    assert!(matches!(pool.trace_start(""), Err(Error::InvalidArgument)));
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.starts_with('{') && text.contains("\"traceEvents\""));
    let spans = text.matches("\"source\":\"broadcast\"").count();
    assert!((2 * (broadcasts - 1)..=2 * broadcasts).contains(&spans), "{} broadcast spans", spans);
    std::fs::remove_dir_all(&dir).unwrap();
}

extern "C" {
    #[link_name = "sched_getcpu"]
    fn libc_sched_getcpu() -> i32;
}

#[test]
fn isolate_returns_the_value_runs_forks_inside_and_resumes_panics() {
    let pool = pool(2);
    assert_eq!(pool.isolate(|| fib(18)), 2584);
    let nested = pool.install(|| {
        let lock = Mutex::new(0u64);
        let mut guard = lock.lock().unwrap();
        *guard += blitz::isolate(|| fib(15) + blitz::isolate(|| fib(10)));
        *guard
    });
    assert_eq!(nested, 610 + 55);
    quiet_panics();
    let caught = panic::catch_unwind(AssertUnwindSafe(|| pool.isolate(|| panic!("inside isolate"))));
    assert_eq!(message(&*caught.unwrap_err()), "inside isolate");
}

#[test]
fn block_in_place_keeps_the_pool_running_beside_blocked_tasks() {
    let pool = pool(2);
    let release = Arc::new(AtomicBool::new(false));
    let entered = Arc::new(AtomicUsize::new(0));
    for _ in 0..2 {
        let (release, entered) = (release.clone(), entered.clone());
        pool.spawn(move || {
            blitz::block_in_place(|| {
                entered.fetch_add(1, Ordering::SeqCst);
                while !release.load(Ordering::SeqCst) {
                    thread::sleep(Duration::from_micros(50));
                }
            })
        });
    }
    while entered.load(Ordering::SeqCst) < 2 {
        thread::sleep(Duration::from_micros(50));
    }
    // Both workers block inside sections: the fork-join runs on stand-ins
    // while neither can have returned (release is still false).
    assert_eq!(pool.install(|| fib(20)), 6765);
    assert!(!release.load(Ordering::SeqCst));
    let stats = pool.stats();
    assert_eq!(stats.blocked_now, 2);
    assert!(stats.spares_started >= 1 && stats.spares_now <= stats.max_spares);
    release.store(true, Ordering::SeqCst);
    // A panic inside closes the section as it unwinds.
    quiet_panics();
    let caught = panic::catch_unwind(|| blitz::block_in_place(|| -> i32 { panic!("blocked on purpose") }));
    assert!(caught.is_err());
    // SAFETY: no arguments.
    assert_eq!(unsafe { blitz::sys::blz_block_end() }, blitz::sys::BLZ_EINVAL);
}
