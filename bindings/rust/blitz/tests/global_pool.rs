//! The global pool: what the free functions use on a thread that is no
//! worker. It is set once per process, so each case runs in a child process
//! of its own (this program, run again with BLITZ_TEST_CHILD naming the case).
mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Barrier, Mutex};
use std::thread;

use blitz::ThreadPoolBuilder;
use common::{child_case, run_child, Watchdog};

/// The OS names of the threads that run a broadcast on the global pool.
fn global_thread_names() -> Vec<String> {
    let mut names = blitz::broadcast(|_| std::fs::read_to_string("/proc/thread-self/comm").unwrap().trim().to_string());
    names.sort();
    names
}

/// `build_global` configures the pool the free functions use, once.
fn configured_once() {
    ThreadPoolBuilder::new().num_threads(3).thread_name(|i| format!("global-{}", i)).build_global().unwrap();
    assert_eq!(blitz::current_num_threads(), 3);
    assert_eq!(blitz::current_thread_index(), None, "this thread stays outside the pool");
    assert_eq!(global_thread_names(), ["global-0", "global-1", "global-2"]);

    // A second configuration is refused, whatever it asks for.
    let error = ThreadPoolBuilder::new().num_threads(5).build_global().unwrap_err();
    assert!(error.is_global_pool_already_initialized());
    assert_eq!(error.to_string(), "The global thread pool has already been initialized.");
    assert!(std::error::Error::source(&error).is_none());
    assert_eq!(blitz::current_num_threads(), 3, "the first configuration stays");

    // join from outside runs in the global pool, in parallel: each closure
    // waits for the other at a barrier, which only two threads can pass.
    let barrier = Barrier::new(2);
    let (a, b) = blitz::join(
        || {
            barrier.wait();
            blitz::current_thread_index()
        },
        || {
            barrier.wait();
            blitz::current_thread_index()
        },
    );
    assert!(a.is_some() && b.is_some() && a != b, "{:?} {:?}", a, b);

    // scope, spawn and spawn_broadcast from outside, too.
    let on_workers = AtomicUsize::new(0);
    blitz::scope(|s| {
        for _ in 0..10 {
            s.spawn(|_| {
                if blitz::current_thread_index().is_some() {
                    on_workers.fetch_add(1, Ordering::SeqCst);
                }
            });
        }
    });
    assert_eq!(on_workers.load(Ordering::SeqCst), 10);
    let (tx, rx) = mpsc::channel();
    blitz::spawn(move || tx.send(blitz::current_num_threads()).unwrap());
    assert_eq!(rx.recv().unwrap(), 3);
    let (tx, rx) = mpsc::channel();
    let tx = Mutex::new(tx);
    blitz::spawn_broadcast(move |ctx| tx.lock().unwrap().send(ctx.index()).unwrap());
    let mut seen: Vec<usize> = rx.iter().collect();
    seen.sort();
    assert_eq!(seen, [0, 1, 2]);
}

/// Without `build_global`, the first use builds the pool from
/// BLZ_NUM_THREADS (set to 3 by the parent), after which `build_global` is
/// refused.
fn built_on_first_use() {
    let here = thread::current().id();
    let (a, b) = blitz::join(|| thread::current().id(), || thread::current().id());
    assert!(a != here && b != here, "both closures ran on the global pool's workers");
    assert_eq!(blitz::current_num_threads(), 3);
    assert_eq!(global_thread_names(), ["blz-0", "blz-1", "blz-2"]);
    let error = ThreadPoolBuilder::new().build_global().unwrap_err();
    assert!(error.is_global_pool_already_initialized());
}

/// BLZ_NUM_THREADS that is no number in 1..65535 is ignored: one worker
/// per CPU, as with `num_threads(0)`.
fn bad_environment_means_one_per_cpu() {
    let cpus = thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    ThreadPoolBuilder::new().num_threads(0).build_global().unwrap();
    assert_eq!(blitz::current_num_threads(), cpus);
}

#[test]
fn global_pool() {
    let _w = Watchdog::new("global pool", 300); // in the parent and in each child
    match child_case().as_deref() {
        Some("configured once") => return configured_once(),
        Some("built on first use") => return built_on_first_use(),
        Some("bad environment") => return bad_environment_means_one_per_cpu(),
        _ => {}
    }
    let cases: [(&str, &[(&str, &str)]); 4] = [
        ("configured once", &[]),
        ("built on first use", &[("BLZ_NUM_THREADS", "3")]),
        ("bad environment", &[("BLZ_NUM_THREADS", "+2")]),
        ("bad environment", &[("BLZ_NUM_THREADS", "0")]),
    ];
    for (case, env) in cases {
        let (status, output) = run_child("global_pool", case, env);
        assert!(status.success(), "case '{}' {:?}: {:?}\n{}", case, env, status, output);
        assert!(output.contains("1 passed"), "case '{}' ran no test:\n{}", case, output);
    }
}
