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

/// A "C user" of libblitz in this process: blitz-sys's raw calls, as a C
/// library would make them.
mod c_user {
    use std::os::raw::c_void;
    use std::ptr;

    use blitz::sys;

    /// blz_pool_shared(NULL): a reference to the process pool.
    pub fn shared_pool() -> *mut sys::blz_pool {
        let mut raw = ptr::null_mut();
        assert_eq!(unsafe { sys::blz_pool_shared(ptr::null(), &mut raw) }, sys::BLZ_OK);
        raw
    }

    /// What a C task saw of itself: libblitz's worker index and the Rust
    /// crate's (which must know the thread as a worker of its global pool).
    pub struct Seen {
        pool: *mut sys::blz_pool,
        c_index: i32,
        rust_index: Option<usize>,
        rust_threads: usize,
    }

    unsafe extern "C" fn look(arg: *mut c_void) {
        let seen = &mut *(arg as *mut Seen);
        seen.c_index = sys::blz_worker_index(seen.pool);
        seen.rust_index = blitz::current_thread_index();
        seen.rust_threads = blitz::current_num_threads();
    }

    /// Spawns a C task on `pool` and joins it: (C index, Rust index, Rust's num_threads).
    pub fn task_sees(pool: *mut sys::blz_pool) -> (i32, Option<usize>, usize) {
        let mut seen = Seen { pool, c_index: -2, rust_index: None, rust_threads: 0 };
        let mut task = ptr::null_mut();
        unsafe {
            assert_eq!(sys::blz_spawn(pool, Some(look), &mut seen as *mut Seen as *mut c_void, &mut task), sys::BLZ_OK);
            assert_eq!(sys::blz_join(task), sys::BLZ_OK);
        }
        (seen.c_index, seen.rust_index, seen.rust_threads)
    }

    pub fn num_threads(pool: *mut sys::blz_pool) -> usize {
        unsafe { sys::blz_pool_num_threads(pool) as usize }
    }

    pub fn release(pool: *mut sys::blz_pool) {
        assert_eq!(unsafe { sys::blz_pool_destroy(pool) }, sys::BLZ_OK);
    }
}

/// The threads of this process that libblitz named for the process pool.
fn process_pool_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|task| std::fs::read_to_string(task.unwrap().path().join("comm")).ok())
        .filter(|name| name.starts_with("blz-"))
        .count()
}

/// Both users on one pool: a Rust job and a C task see the same worker
/// index from both APIs, the same size, and the process has one set of workers.
fn check_one_pool(c_pool: *mut blitz::sys::blz_pool) {
    let n = c_user::num_threads(c_pool);
    assert_eq!(blitz::current_num_threads(), n);
    let (c_index, rust_index, rust_threads) = c_user::task_sees(c_pool);
    assert!(c_index >= 0, "the C task ran on a worker");
    assert_eq!(rust_index, Some(c_index as usize), "Rust knows the C task's thread as that worker of its global pool");
    assert_eq!(rust_threads, n);
    let raw = c_pool as usize; // a pointer is not Sync; its address is
    let seen: Vec<(Option<usize>, i32)> = blitz::broadcast(|_| {
        (blitz::current_thread_index(), unsafe { blitz::sys::blz_worker_index(raw as *const _) })
    });
    assert_eq!(seen.len(), n);
    for (rust_index, c_index) in seen {
        assert_eq!(rust_index.map(|i| i as i32), Some(c_index), "a Rust job is on a worker of the C user's pool");
    }
    assert_eq!(process_pool_threads(), n, "one set of workers, not one per user");
    // Another C reference is the same handle.
    let again = c_user::shared_pool();
    assert_eq!(again, c_pool);
    c_user::release(again);
}

/// C creates the process pool; Rust's global pool (first use) joins it.
fn shared_c_first() {
    let c_pool = c_user::shared_pool();
    let here = thread::current().id();
    let (a, b) = blitz::join(|| thread::current().id(), || thread::current().id());
    assert!(a != here && b != here);
    check_one_pool(c_pool);
    c_user::release(c_pool); // the pool stays: Rust's global pool holds it
    check_one_pool_after_release();
}

/// Rust's global pool creates the process pool; a C user then gets it.
fn shared_rust_first() {
    let (a, b) = blitz::join(|| 40, || 2);
    assert_eq!(a + b, 42);
    let c_pool = c_user::shared_pool();
    check_one_pool(c_pool);
    c_user::release(c_pool);
    check_one_pool_after_release();
}

/// The process pool exists (C made it): a global configuration it cannot
/// have is refused with the library's error, a matching one is accepted.
fn shared_configured_after_c() {
    let c_pool = c_user::shared_pool();
    let n = c_user::num_threads(c_pool);
    let error = ThreadPoolBuilder::new().start_handler(|_| {}).build_global().unwrap_err();
    assert!(matches!(error.library_error(), Some(blitz::Error::InvalidArgument)), "{:?}", error);
    let error = ThreadPoolBuilder::new().num_threads(n + 1).build_global().unwrap_err();
    assert!(matches!(error.library_error(), Some(blitz::Error::InvalidArgument)), "{:?}", error);
    ThreadPoolBuilder::new().num_threads(n).build_global().unwrap();
    check_one_pool(c_pool);
    c_user::release(c_pool);
}

fn check_one_pool_after_release() {
    let c_pool = c_user::shared_pool();
    check_one_pool(c_pool);
    c_user::release(c_pool);
}

#[test]
fn global_pool() {
    let _w = Watchdog::new("global pool", 300); // in the parent and in each child
    match child_case().as_deref() {
        Some("configured once") => return configured_once(),
        Some("built on first use") => return built_on_first_use(),
        Some("bad environment") => return bad_environment_means_one_per_cpu(),
        Some("shared, C first") => return shared_c_first(),
        Some("shared, Rust first") => return shared_rust_first(),
        Some("shared, configured after C") => return shared_configured_after_c(),
        _ => {}
    }
    let cases: [(&str, &[(&str, &str)]); 7] = [
        ("shared, C first", &[("BLZ_NUM_THREADS", "3")]),
        ("shared, Rust first", &[("BLZ_NUM_THREADS", "2")]),
        ("shared, configured after C", &[("BLZ_NUM_THREADS", "2")]),
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
