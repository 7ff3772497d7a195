//! The behaviours a rayon-core user relies on, checked on blitz: the order
//! in which scoped and pool spawns start (latest first, or first in first
//! out), nested scopes, panics wherever they happen (with and without a
//! panic handler), start and exit handlers that block, a pool dropped
//! while its workers are busy, broadcasts reaching every worker once,
//! `join_context`'s migration flag, custom thread spawning and names.
//!
//! Orders are checked on one-worker pools, where no thief can reorder
//! anything: there the order is exact. Interleavings that a test needs
//! (a task still running, a handler blocked) are held by barriers and
//! channels; time appears only as generous bounds. Every test runs under a
//! watchdog. The global pool has tests of its own (tests/global_pool.rs),
//! since it is set once per process.
mod common;

use std::collections::HashSet;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Barrier, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use blitz::{Scope, ScopeFifo, ThreadPool, ThreadPoolBuilder};
use common::{aborted, child_case, message, quiet_panics, run_child, within_a_minute, Watchdog};

fn pool(n: usize) -> ThreadPool {
    ThreadPoolBuilder::new().num_threads(n).build().expect("build")
}

/// Records values from any thread, in the order they arrive.
#[derive(Default)]
struct Log(Mutex<Vec<i32>>);

impl Log {
    fn push(&self, v: i32) {
        self.0.lock().unwrap().push(v);
    }
    fn take(&self) -> Vec<i32> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}

// ---- Order: latest first (LIFO) and first in, first out (FIFO)

#[test]
fn scope_spawns_from_a_worker_start_latest_first() {
    let _w = Watchdog::new("scope LIFO", 120);
    let pool = pool(1);
    let log = Log::default();
    // op runs on the only worker; nothing starts until op returns, then
    // the worker takes its own queue from the top.
    pool.scope(|s| {
        for i in 0..6 {
            let log = &log;
            s.spawn(move |_| log.push(i));
        }
    });
    assert_eq!(log.take(), [5, 4, 3, 2, 1, 0]);

    // Tasks spawned by a task go on top of what is left: depth first.
    pool.scope(|s| {
        for i in 0..3 {
            let log = &log;
            s.spawn(move |s| {
                log.push(i * 10);
                for j in 1..3 {
                    s.spawn(move |_| log.push(i * 10 + j));
                }
            });
        }
    });
    assert_eq!(log.take(), [20, 22, 21, 10, 12, 11, 0, 2, 1]);
}

#[test]
fn scope_fifo_spawns_from_a_worker_start_in_order() {
    let _w = Watchdog::new("scope FIFO", 120);
    let pool = pool(1);
    let log = Log::default();
    pool.scope_fifo(|s| {
        for i in 0..6 {
            let log = &log;
            s.spawn_fifo(move |_| log.push(i));
        }
    });
    assert_eq!(log.take(), [0, 1, 2, 3, 4, 5]);

    // Breadth first: the children queue behind the remaining parents.
    pool.scope_fifo(|s| {
        for i in 0..3 {
            let log = &log;
            s.spawn_fifo(move |s| {
                log.push(i * 10);
                for j in 1..3 {
                    s.spawn_fifo(move |_| log.push(i * 10 + j));
                }
            });
        }
    });
    assert_eq!(log.take(), [0, 10, 20, 1, 2, 11, 12, 21, 22]);
}

#[test]
fn lifo_and_fifo_spawns_interleave_as_in_rayon() {
    let _w = Watchdog::new("mixed orders", 120);
    let pool = pool(1);
    let log = Log::default();
    // Each FIFO spawn leaves a reference on the worker's (LIFO) queue that
    // takes the oldest FIFO closure: the two kinds alternate from the top.
    pool.scope_fifo(|s| {
        let log = &log;
        for i in 1..=3 {
            s.spawn_fifo(move |_| log.push(i)); // FIFO: 1, 2, 3
            blitz::scope(|_| {}); // (an empty nested scope changes nothing)
        }
        blitz::in_place_scope(|inner| {
            for i in 1..=3 {
                inner.spawn(move |_| log.push(-i)); // LIFO: -3, -2, -1
                s.spawn_fifo(move |_| log.push(10 * i)); // FIFO: 10, 20, 30 after 1, 2, 3
            }
            // The inner scope's wait runs the worker's queue from the top
            // until its own three tasks are done.
        });
    });
    assert_eq!(log.take(), [1, -3, 2, -2, 3, -1, 10, 20, 30]);
}

#[test]
fn pool_spawns_from_a_worker_start_latest_first_or_in_order() {
    let _w = Watchdog::new("pool spawn order", 120);
    for fifo in [false, true] {
        let pool = pool(1);
        let (tx, rx) = mpsc::channel();
        let started = Arc::new(AtomicUsize::new(0));
        let pool = &pool;
        // `move`: the Sender goes into the closure (it is Send, not Sync
        // before Rust 1.72) and is dropped there.
        let nothing_started = pool.install(move || {
            for i in 0..5 {
                let (tx, started) = (tx.clone(), started.clone());
                let send = move || {
                    started.fetch_add(1, Ordering::SeqCst);
                    tx.send(i).unwrap()
                };
                if fifo {
                    pool.spawn_fifo(send)
                } else {
                    pool.spawn(send)
                }
            }
            // The only worker is busy here, and a fire-and-forget spawn
            // does not wait for its task: nothing has started.
            started.load(Ordering::SeqCst) == 0
        });
        assert!(nothing_started);
        let got: Vec<i32> = rx.iter().collect();
        let want: Vec<i32> = if fifo { (0..5).collect() } else { (0..5).rev().collect() };
        assert_eq!(got, want, "fifo: {}", fifo);
    }
}

#[test]
fn free_spawns_in_a_pool_use_that_pool_and_its_order() {
    let _w = Watchdog::new("free spawn order", 120);
    let pool = pool(1);
    let (tx, rx) = mpsc::channel();
    pool.install(move || {
        for i in 0..3 {
            let tx = tx.clone();
            blitz::spawn(move || tx.send((i, blitz::current_num_threads())).unwrap());
        }
        for i in 10..13 {
            let tx = tx.clone();
            blitz::spawn_fifo(move || tx.send((i, blitz::current_num_threads())).unwrap());
        }
    });
    let got: Vec<(i32, usize)> = rx.iter().collect();
    // The three FIFO references are on top: 10, 11, 12; then 2, 1, 0.
    assert_eq!(got.iter().map(|p| p.0).collect::<Vec<_>>(), [10, 11, 12, 2, 1, 0]);
    assert!(got.iter().all(|p| p.1 == 1), "every task ran on the one-worker pool");
}

#[test]
#[allow(deprecated)]
fn breadth_first_makes_spawns_fifo() {
    let _w = Watchdog::new("breadth_first", 120);
    let pool = ThreadPoolBuilder::new().num_threads(1).breadth_first().build().unwrap();
    let log = Log::default();
    pool.scope(|s| {
        for i in 0..4 {
            let log = &log;
            s.spawn(move |_| log.push(i));
        }
    });
    assert_eq!(log.take(), [0, 1, 2, 3]);
}

#[test]
fn fifo_spawns_from_outside_the_pool_keep_their_order() {
    let _w = Watchdog::new("FIFO from outside", 120);
    let pool = pool(1);
    let log = Log::default();
    let (go, wait) = mpsc::channel::<()>();
    // The only worker is held, so everything below queues up first.
    pool.spawn(move || wait.recv().unwrap());
    pool.in_place_scope_fifo(|s| {
        for i in 0..5 {
            let log = &log;
            s.spawn_fifo(move |_| log.push(i));
        }
        go.send(()).unwrap();
    });
    assert_eq!(log.take(), [0, 1, 2, 3, 4]);
}

// ---- Nested scopes

#[test]
fn scopes_nest_within_tasks_and_across_pools() {
    let _w = Watchdog::new("nested scopes", 120);
    let outer = pool(2);
    let inner = pool(2);
    let count = AtomicUsize::new(0);
    let leaves = AtomicUsize::new(0);
    outer.scope(|s1| {
        for _ in 0..4 {
            s1.spawn(|s1| {
                // A scope inside a task: it returns only when its own tasks
                // are done, and its tasks may spawn into the outer scope.
                blitz::scope(|s2| {
                    for _ in 0..4 {
                        s2.spawn(|_| {
                            leaves.fetch_add(1, Ordering::SeqCst);
                        });
                        s1.spawn(|_| {
                            count.fetch_add(1, Ordering::SeqCst);
                        });
                    }
                });
                // The inner scope waited for its own four leaves.
                assert!(leaves.load(Ordering::SeqCst) >= 4);
            });
        }
        // A scope of another pool, inside this one, spawning into both.
        inner.scope(|s3| {
            s3.spawn(|_| {
                assert!(inner.current_thread_index().is_some());
                count.fetch_add(100, Ordering::SeqCst);
            });
            s1.spawn(|_| {
                assert!(outer.current_thread_index().is_some());
                count.fetch_add(1000, Ordering::SeqCst);
            });
        });
    });
    assert_eq!(leaves.load(Ordering::SeqCst), 16);
    assert_eq!(count.load(Ordering::SeqCst), 16 + 100 + 1000);
}

#[test]
fn scopes_borrow_what_outlives_them_at_any_depth() {
    let _w = Watchdog::new("scope lifetimes", 120);
    // A function generic over the scope's lifetime, as recursive scoped code is.
    fn fill<'scope>(s: &Scope<'scope>, out: &'scope [AtomicUsize], depth: usize) {
        if depth == 0 {
            for slot in out {
                slot.fetch_add(1, Ordering::SeqCst);
            }
            return;
        }
        let (left, right) = out.split_at(out.len() / 2);
        s.spawn(move |s| fill(s, left, depth - 1));
        s.spawn(move |s| fill(s, right, depth - 1));
    }
    let slots: Vec<AtomicUsize> = (0..64).map(|_| AtomicUsize::new(0)).collect();
    blitz::scope(|s| fill(s, &slots, 4));
    assert!(slots.iter().all(|s| s.load(Ordering::SeqCst) == 1));

    fn fill_fifo<'scope>(s: &ScopeFifo<'scope>, out: &'scope AtomicUsize, n: usize) {
        if n > 0 {
            s.spawn_fifo(move |s| fill_fifo(s, out, n - 1));
        }
        out.fetch_add(1, Ordering::SeqCst);
    }
    let total = AtomicUsize::new(0);
    blitz::scope_fifo(|s| fill_fifo(s, &total, 50));
    assert_eq!(total.load(Ordering::SeqCst), 51);
}

#[test]
fn in_place_scope_runs_op_here_and_may_block_on_its_tasks() {
    let _w = Watchdog::new("in_place_scope", 120);
    let pool = pool(1);
    let here = thread::current().id();
    for fifo in [false, true] {
        let (tx, rx) = mpsc::channel();
        let ran_here = if fifo {
            pool.in_place_scope_fifo(|s| {
                s.spawn_fifo(move |_| tx.send(blitz::current_thread_index()).unwrap());
                // op holds no worker: the only worker runs the task meanwhile.
                assert_eq!(rx.recv().unwrap(), Some(0));
                thread::current().id()
            })
        } else {
            pool.in_place_scope(|s| {
                s.spawn(move |_| tx.send(blitz::current_thread_index()).unwrap());
                assert_eq!(rx.recv().unwrap(), Some(0));
                thread::current().id()
            })
        };
        assert_eq!(ran_here, here);
    }
}

// ---- Panics in every position

#[test]
fn join_panics_resume_after_both_closures_ran() {
    let _w = Watchdog::new("join panics", 120);
    quiet_panics();
    let pool = pool(2);
    let ran = AtomicUsize::new(0);
    let case = |a_panics: bool, b_panics: bool| {
        ran.store(0, Ordering::SeqCst);
        let result = panic::catch_unwind(AssertUnwindSafe(|| {
            blitz::join(
                || {
                    ran.fetch_add(1, Ordering::SeqCst);
                    if a_panics {
                        panic!("a on purpose");
                    }
                },
                || {
                    ran.fetch_add(1, Ordering::SeqCst);
                    if b_panics {
                        panic!("b on purpose");
                    }
                },
            )
        }));
        assert_eq!(ran.load(Ordering::SeqCst), 2, "both closures always run");
        result.err().map(|p| message(&*p))
    };
    // On a worker, and outside any pool (in the global pool).
    for on_pool in [true, false] {
        let outcomes = |f: &(dyn Fn() -> Vec<Option<String>> + Sync)| if on_pool { pool.install(f) } else { f() };
        let got = outcomes(&|| vec![case(true, false), case(false, true), case(true, true), case(false, false)]);
        assert_eq!(
            got,
            [
                Some("a on purpose".to_string()),
                Some("b on purpose".to_string()),
                Some("a on purpose".to_string()),
                None
            ],
            "on a pool: {}",
            on_pool
        );
    }
}

#[test]
fn scope_panics_resume_after_every_task_ended() {
    let _w = Watchdog::new("scope panics", 120);
    quiet_panics();
    let pool = pool(2);
    let finished = AtomicUsize::new(0);
    // In op, in a task, in a nested task, and in a nested scope's task: the
    // scope waits for the others, then resumes the panic.
    type Body = dyn Fn(&Scope<'_>, &AtomicUsize) + Sync;
    let cases: [(&str, &Body); 4] = [
        ("op on purpose", &|_s, _f| panic!("op on purpose")),
        ("task on purpose", &|s, _f| s.spawn(|_| panic!("task on purpose"))),
        ("nested on purpose", &|s, _f| s.spawn(|s| s.spawn(|s| s.spawn(|_| panic!("nested on purpose"))))),
        ("inner scope on purpose", &|s, _f| {
            s.spawn(|_| blitz::scope(|s| s.spawn(|_| panic!("inner scope on purpose"))))
        }),
    ];
    for (expected, body) in cases {
        finished.store(0, Ordering::SeqCst);
        let caught = panic::catch_unwind(AssertUnwindSafe(|| {
            pool.scope(|s| {
                for _ in 0..3 {
                    let finished = &finished;
                    s.spawn(move |_| {
                        thread::sleep(Duration::from_millis(2));
                        finished.fetch_add(1, Ordering::SeqCst);
                    });
                }
                body(s, &finished);
            })
        }));
        assert_eq!(message(&*caught.unwrap_err()), expected);
        assert_eq!(finished.load(Ordering::SeqCst), 3, "{}: the other tasks ran first", expected);
    }
    // The FIFO scope too.
    let caught = panic::catch_unwind(AssertUnwindSafe(|| {
        blitz::scope_fifo(|s| s.spawn_fifo(|s| s.spawn_fifo(|_| panic!("fifo task on purpose"))))
    }));
    assert_eq!(message(&*caught.unwrap_err()), "fifo task on purpose");
}

#[test]
fn install_and_broadcast_resume_panics() {
    let _w = Watchdog::new("install and broadcast panics", 120);
    quiet_panics();
    let pool = pool(3);
    let caught = panic::catch_unwind(AssertUnwindSafe(|| pool.install(|| panic!("install on purpose"))));
    assert_eq!(message(&*caught.unwrap_err()), "install on purpose");
    let calls = AtomicUsize::new(0);
    let caught = panic::catch_unwind(AssertUnwindSafe(|| {
        pool.broadcast(|ctx| {
            calls.fetch_add(1, Ordering::SeqCst);
            if ctx.index() != 1 {
                panic!("broadcast on purpose");
            }
        })
    }));
    assert_eq!(message(&*caught.unwrap_err()), "broadcast on purpose");
    assert_eq!(calls.load(Ordering::SeqCst), 3, "every call ran");
}

/// A pool whose panic handler sends each payload's message to the returned channel.
fn pool_with_handler(n: usize) -> (ThreadPool, mpsc::Receiver<String>) {
    let (tx, rx) = mpsc::channel();
    let tx = Mutex::new(tx);
    let pool = ThreadPoolBuilder::new()
        .num_threads(n)
        .panic_handler(move |payload| tx.lock().unwrap().send(message(&*payload)).unwrap())
        .build()
        .unwrap();
    (pool, rx)
}

#[test]
fn detached_panics_go_to_the_panic_handler() {
    let _w = Watchdog::new("panic handler", 120);
    quiet_panics();
    let (pool, panics) = pool_with_handler(2);
    let failed_before = pool.stats().tasks_failed;
    pool.spawn(|| panic!("spawn on purpose"));
    assert_eq!(panics.recv().unwrap(), "spawn on purpose");
    pool.spawn_fifo(|| panic!("spawn_fifo on purpose"));
    assert_eq!(panics.recv().unwrap(), "spawn_fifo on purpose");
    // Free spawns on a worker go to that worker's pool, and its handler.
    pool.spawn(|| {
        blitz::spawn(|| panic!("nested spawn on purpose"));
        blitz::spawn_fifo(|| panic!("nested spawn_fifo on purpose"));
    });
    let mut nested = vec![panics.recv().unwrap(), panics.recv().unwrap()];
    nested.sort();
    assert_eq!(nested, ["nested spawn on purpose", "nested spawn_fifo on purpose"]);
    // Each call of a spawn_broadcast separately.
    pool.spawn_broadcast(|ctx| panic!("broadcast call {} on purpose", ctx.index()));
    let mut calls = vec![panics.recv().unwrap(), panics.recv().unwrap()];
    calls.sort();
    assert_eq!(calls, ["broadcast call 0 on purpose", "broadcast call 1 on purpose"]);
    // libblitz counted each as a failed job; the pool goes on working.
    assert!(within_a_minute(|| pool.stats().tasks_failed >= failed_before + 6));
    assert_eq!(pool.install(|| 7), 7);
    // Nothing else reached the handler.
    pool.wait_until_stopped();
    assert!(panics.try_recv().is_err());
}

#[test]
fn handler_panics_go_to_the_panic_handler() {
    let _w = Watchdog::new("handler panics", 120);
    quiet_panics();
    let (tx, rx) = mpsc::channel();
    let tx = Mutex::new(tx);
    let pool = ThreadPoolBuilder::new()
        .num_threads(3)
        .start_handler(|i| panic!("start {} on purpose", i))
        .exit_handler(|i| panic!("exit {} on purpose", i))
        .panic_handler(move |payload| tx.lock().unwrap().send(message(&*payload)).unwrap())
        .build()
        .unwrap();
    let mut starts: Vec<String> = (0..3).map(|_| rx.recv().unwrap()).collect();
    starts.sort();
    assert_eq!(starts, ["start 0 on purpose", "start 1 on purpose", "start 2 on purpose"]);
    // The workers work after their start handler panicked.
    assert_eq!(pool.broadcast(|ctx| ctx.index()), [0, 1, 2]);
    drop(pool);
    let mut exits: Vec<String> = rx.iter().collect(); // ends when the handler is dropped with the pool
    exits.sort();
    assert_eq!(exits, ["exit 0 on purpose", "exit 1 on purpose", "exit 2 on purpose"]);
}

#[test]
fn a_detached_panic_without_a_panic_handler_aborts() {
    match child_case().as_deref() {
        Some("spawn") => {
            let pool = pool(1);
            pool.spawn(|| panic!("unobserved on purpose"));
            pool.wait_until_stopped();
            println!("not aborted");
            return;
        }
        Some("handler panics") => {
            let pool = ThreadPoolBuilder::new()
                .num_threads(1)
                .panic_handler(|_| panic!("the handler itself, on purpose"))
                .build()
                .unwrap();
            pool.spawn(|| panic!("first on purpose"));
            pool.wait_until_stopped();
            println!("not aborted");
            return;
        }
        Some("start handler") => {
            let pool =
                ThreadPoolBuilder::new().num_threads(1).start_handler(|_| panic!("start on purpose")).build().unwrap();
            pool.wait_until_stopped();
            println!("not aborted");
            return;
        }
        _ => {}
    }
    let _w = Watchdog::new("abort without handler", 120);
    for case in ["spawn", "handler panics", "start handler"] {
        let (status, output) = run_child("a_detached_panic_without_a_panic_handler_aborts", case, &[]);
        assert!(aborted(&status), "{}: {:?}\n{}", case, status, output);
        assert!(output.contains("blitz:") && output.contains("aborting"), "{}: {}", case, output);
        assert!(!output.contains("not aborted"), "{}", output);
    }
}

// ---- Handlers that block; a pool dropped while busy

#[test]
fn start_handlers_may_wait_for_the_thread_that_built_the_pool() {
    let _w = Watchdog::new("blocking start handlers", 120);
    let workers = 4;
    let barrier = Arc::new(Barrier::new(workers + 1));
    let started = Arc::new(AtomicUsize::new(0));
    let (b, s) = (barrier.clone(), started.clone());
    let pool = ThreadPoolBuilder::new()
        .num_threads(workers)
        .start_handler(move |_| {
            s.fetch_add(1, Ordering::SeqCst);
            b.wait(); // until the builder's thread arrives, after build returned
        })
        .build()
        .unwrap();
    barrier.wait();
    assert_eq!(started.load(Ordering::SeqCst), workers);
    assert_eq!(pool.install(|| 5), 5);
}

#[test]
fn exit_handlers_may_wait_for_the_thread_that_dropped_the_pool() {
    let _w = Watchdog::new("blocking exit handlers", 120);
    let workers = 4;
    let barrier = Arc::new(Barrier::new(workers + 1));
    let exited = Arc::new(AtomicUsize::new(0));
    let (b, e) = (barrier.clone(), exited.clone());
    let pool = ThreadPoolBuilder::new()
        .num_threads(workers)
        .exit_handler(move |_| {
            e.fetch_add(1, Ordering::SeqCst);
            b.wait(); // until the dropping thread arrives, after drop returned
        })
        .build()
        .unwrap();
    let registry = Arc::clone(&pool.registry);
    drop(pool); // must not wait for the exit handlers
    barrier.wait();
    registry.wait_until_stopped();
    assert_eq!(exited.load(Ordering::SeqCst), workers);
}

#[test]
fn a_pool_dropped_while_busy_finishes_its_work_in_the_background() {
    let _w = Watchdog::new("drop while busy", 120);
    let exits = Arc::new(Mutex::new(Vec::new()));
    let e = exits.clone();
    let pool =
        ThreadPoolBuilder::new().num_threads(2).exit_handler(move |i| e.lock().unwrap().push(i)).build().unwrap();
    let (go, wait) = mpsc::channel::<()>();
    let (done_tx, done) = mpsc::channel::<&'static str>();
    let wait = Arc::new(Mutex::new(wait));
    for _ in 0..2 {
        let (wait, done_tx) = (wait.clone(), done_tx.clone());
        pool.spawn(move || {
            // Both workers are held here.
            wait.lock().unwrap().recv().unwrap();
            // Still the pool's worker after the drop: its spawns are
            // accepted, and its scopes work (rayon code does both freely).
            let later = done_tx.clone();
            blitz::spawn(move || later.send("spawned after the drop").unwrap());
            let in_scope = AtomicUsize::new(0);
            blitz::scope(|s| {
                s.spawn(|_| {
                    in_scope.fetch_add(1, Ordering::SeqCst);
                });
                s.spawn(|_| {
                    in_scope.fetch_add(1, Ordering::SeqCst);
                });
            });
            blitz::in_place_scope_fifo(|s| {
                s.spawn_fifo(|_| {
                    in_scope.fetch_add(1, Ordering::SeqCst);
                })
            });
            assert_eq!(in_scope.load(Ordering::SeqCst), 3);
            done_tx.send("held task").unwrap();
        });
    }
    drop(done_tx);
    let registry = Arc::clone(&pool.registry);
    let start = Instant::now();
    drop(pool);
    assert!(start.elapsed() < Duration::from_secs(10), "the drop did not wait for the held tasks");
    assert!(!registry.is_stopped());
    assert!(exits.lock().unwrap().is_empty(), "no worker stops while its work runs");
    go.send(()).unwrap();
    go.send(()).unwrap();
    let mut seen: Vec<&str> = done.iter().collect(); // ends when every task (and its sender) is gone
    seen.sort();
    assert_eq!(seen, ["held task", "held task", "spawned after the drop", "spawned after the drop"]);
    registry.wait_until_stopped();
    let mut exits = exits.lock().unwrap().clone();
    exits.sort();
    assert_eq!(exits, [0, 1]);
}

#[test]
fn the_last_reference_dropped_inside_the_pool_ends_it() {
    let _w = Watchdog::new("drop on own worker", 120);
    let pool = Arc::new(pool(2));
    let registry = Arc::clone(&pool.registry);
    let inside = pool.clone();
    let (go, wait) = mpsc::channel::<()>();
    let (tx, rx) = mpsc::channel();
    pool.spawn(move || {
        wait.recv().unwrap(); // the outside reference is gone by now
        drop(inside); // the last one, dropped on the pool's own worker
        tx.send("dropped").unwrap();
        // Still accepted work of the pool: it keeps working.
        let (a, b) = blitz::join(|| 1, || 2);
        tx.send(if (a, b) == (1, 2) { "joined after" } else { "wrong" }).unwrap();
    });
    drop(pool);
    go.send(()).unwrap();
    assert_eq!(rx.iter().collect::<Vec<_>>(), ["dropped", "joined after"]);
    registry.wait_until_stopped();
}

#[test]
fn wait_until_stopped_on_its_own_worker_panics_instead_of_hanging() {
    let _w = Watchdog::new("wait on own worker", 120);
    quiet_panics();
    let pool = Arc::new(pool(1));
    let registry = Arc::clone(&pool.registry);
    let seen = pool
        .install(|| panic::catch_unwind(AssertUnwindSafe(|| registry.wait_until_stopped())).map_err(|p| message(&*p)));
    assert!(seen.unwrap_err().contains("would wait for itself"));
    match Arc::try_unwrap(pool) {
        Ok(pool) => pool.wait_until_stopped(),
        Err(_) => panic!("the pool is still shared"),
    }
    assert!(registry.is_stopped());
}

// ---- Broadcast

#[test]
fn broadcasts_reach_every_worker_exactly_once() {
    let _w = Watchdog::new("broadcast", 120);
    let n = 4;
    let pool = pool(n);
    let per_worker: Vec<AtomicUsize> = (0..n).map(|_| AtomicUsize::new(0)).collect();
    let threads = Mutex::new(HashSet::new());
    let values = pool.broadcast(|ctx| {
        assert_eq!(ctx.num_threads(), n);
        assert_eq!(blitz::current_thread_index(), Some(ctx.index()));
        per_worker[ctx.index()].fetch_add(1, Ordering::SeqCst);
        threads.lock().unwrap().insert(thread::current().id());
        ctx.index() * 10
    });
    assert_eq!(values, [0, 10, 20, 30]);
    assert!(per_worker.iter().all(|c| c.load(Ordering::SeqCst) == 1));
    assert_eq!(threads.lock().unwrap().len(), n, "n different threads");

    // spawn_broadcast: returns at once, each worker once.
    let counts = Arc::new((0..n).map(|_| AtomicUsize::new(0)).collect::<Vec<_>>());
    let (tx, rx) = mpsc::channel();
    let tx = Mutex::new(tx); // Sync, as the closure must be
    let c = counts.clone();
    pool.spawn_broadcast(move |ctx| {
        c[ctx.index()].fetch_add(1, Ordering::SeqCst);
        tx.lock().unwrap().send(ctx.index()).unwrap();
    });
    let mut got: Vec<usize> = rx.iter().collect();
    got.sort();
    assert_eq!(got, [0, 1, 2, 3]);
    assert!(counts.iter().all(|c| c.load(Ordering::SeqCst) == 1));

    // A scope's spawn_broadcast: the scope waits for every call.
    let sum = AtomicUsize::new(0);
    pool.scope(|s| {
        s.spawn_broadcast(|_, ctx| {
            sum.fetch_add(ctx.index() + 1, Ordering::SeqCst);
        })
    });
    assert_eq!(sum.load(Ordering::SeqCst), 1 + 2 + 3 + 4);
    let sum = AtomicUsize::new(0);
    pool.in_place_scope_fifo(|s| {
        s.spawn_broadcast(|_, ctx| {
            sum.fetch_add(ctx.index() + 1, Ordering::SeqCst);
        })
    });
    assert_eq!(sum.load(Ordering::SeqCst), 1 + 2 + 3 + 4);
}

#[test]
fn broadcasts_between_pools_do_not_deadlock() {
    let _w = Watchdog::new("mutual broadcasts", 120);
    let a = pool(2);
    let b = pool(3);
    let calls = AtomicUsize::new(0);
    // A worker of `a` waits for `b`'s calls, which each wait for `a`'s.
    a.install(|| {
        b.broadcast(|_| {
            a.broadcast(|_| {
                calls.fetch_add(1, Ordering::SeqCst);
            })
        })
    });
    assert_eq!(calls.load(Ordering::SeqCst), 6);
}

// ---- join_context

#[test]
fn join_context_reports_migration() {
    let _w = Watchdog::new("join_context", 120);
    // One worker: b stays on the calling worker.
    let one = pool(1);
    assert_eq!(one.install(|| blitz::join_context(|a| a.migrated(), |b| b.migrated())), (false, false));
    // Two workers, and a that waits for b: b must have been stolen.
    let two = pool(2);
    let barrier = Barrier::new(2);
    let got = two.install(|| {
        blitz::join_context(
            |a| {
                barrier.wait();
                (a.migrated(), thread::current().id())
            },
            |b| {
                barrier.wait();
                (b.migrated(), thread::current().id())
            },
        )
    });
    assert_eq!((got.0 .0, got.1 .0), (false, true));
    assert_ne!(got.0 .1, got.1 .1);
    // From outside any pool both closures move into the global pool.
    let here = thread::current().id();
    let got =
        blitz::join_context(|a| (a.migrated(), thread::current().id()), |b| (b.migrated(), thread::current().id()));
    assert!(got.0 .0 && got.1 .0);
    assert!(got.0 .1 != here && got.1 .1 != here);
    // Rayon's path to it.
    assert_eq!(one.install(|| blitz::join::join_context(|a| a.migrated(), |_| 3)), (false, 3));
}

// ---- Building: names, custom spawning, errors

fn os_names(pool: &ThreadPool) -> Vec<Vec<u8>> {
    let mut names = pool.broadcast(|_| {
        let mut comm = std::fs::read("/proc/thread-self/comm").unwrap();
        comm.pop(); // the newline
        comm
    });
    names.sort();
    names
}

#[test]
fn thread_names_come_from_the_closure() {
    let _w = Watchdog::new("thread names", 120);
    let pool = ThreadPoolBuilder::new().num_threads(3).thread_name(|i| format!("calc#{}", i * 2)).build().unwrap();
    assert_eq!(os_names(&pool), [b"calc#0", b"calc#2", b"calc#4"]);
    // The workers are std threads with those names, as in Rayon.
    let names = pool.broadcast(|_| thread::current().name().map(str::to_string));
    assert!(names.iter().all(|name| name.as_deref().map_or(false, |n| n.starts_with("calc#"))), "{:?}", names);
    // Linux keeps 15 bytes of the name (std cuts it there).
    let pool = ThreadPoolBuilder::new().num_threads(1).thread_name(|_| "ééééééééé".to_string()).build().unwrap();
    assert_eq!(os_names(&pool), ["ééééééééé".as_bytes()[..15].to_vec()]);
    let pool = ThreadPoolBuilder::new().num_threads(2).thread_name_prefix("pre").build().unwrap();
    assert_eq!(os_names(&pool), [b"pre-0", b"pre-1"]);
}

#[test]
fn a_panicking_name_closure_starts_and_stops_the_workers_named_before() {
    let _w = Watchdog::new("name panic", 120);
    quiet_panics();
    let started = Arc::new(AtomicUsize::new(0));
    let stopped = Arc::new(AtomicUsize::new(0));
    let (s, e) = (started.clone(), stopped.clone());
    let built = panic::catch_unwind(|| {
        ThreadPoolBuilder::new()
            .num_threads(5)
            .start_handler(move |_| {
                s.fetch_add(1, Ordering::SeqCst);
            })
            .exit_handler(move |_| {
                e.fetch_add(1, Ordering::SeqCst);
            })
            .thread_name(|i| if i == 3 { panic!("name on purpose") } else { format!("n{}", i) })
            .build()
    });
    assert_eq!(message(&*built.unwrap_err()), "name on purpose");
    // Workers 0, 1 and 2 started, and stop in the background.
    assert!(within_a_minute(|| stopped.load(Ordering::SeqCst) == 3));
    assert_eq!(started.load(Ordering::SeqCst), 3);
}

thread_local! {
    static HANDLER_TAG: std::cell::Cell<usize> = const { std::cell::Cell::new(usize::MAX) };
}

#[test]
fn a_spawn_handler_gets_each_worker_and_run_lasts_as_long_as_the_pool() {
    let _w = Watchdog::new("spawn handler", 120);
    let mut handed = Vec::new();
    let returned = Arc::new(AtomicUsize::new(0));
    let mut threads = Vec::new();
    let pool = ThreadPoolBuilder::new()
        .num_threads(3)
        .thread_name(|i| format!("w{}", i))
        .stack_size(1 << 20)
        .spawn_handler(|thread| {
            handed.push((thread.index(), thread.name().map(String::from), thread.stack_size()));
            let returned = returned.clone();
            threads.push(thread::spawn(move || {
                HANDLER_TAG.with(|t| t.set(thread.index()));
                thread.run();
                assert_eq!(blitz::current_thread_index(), None);
                returned.fetch_add(1, Ordering::SeqCst);
            }));
            Ok(())
        })
        .build()
        .unwrap();
    assert_eq!(
        handed,
        [
            (0, Some("w0".to_string()), Some(1 << 20)),
            (1, Some("w1".to_string()), Some(1 << 20)),
            (2, Some("w2".to_string()), Some(1 << 20))
        ]
    );
    assert_eq!(pool.broadcast(|ctx| ctx.index()), [0, 1, 2]);
    thread::sleep(Duration::from_millis(20));
    assert_eq!(returned.load(Ordering::SeqCst), 0, "run lasts while the pool lives");
    // The handler's threads are the workers: what they set before run() is the jobs' to see.
    assert_eq!(pool.broadcast(|ctx| (ctx.index(), HANDLER_TAG.with(|t| t.get()))), [(0, 0), (1, 1), (2, 2)]);
    assert_eq!(pool.broadcast(|_| thread::current().name().map(String::from)), [None, None, None]);
    drop(pool);
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(returned.load(Ordering::SeqCst), 3);
}

// A worker of pool A that runs pool B's `ThreadBuilder::run` from one of
// A's jobs is B's worker while it runs, and A's worker again, with its
// index, when it returns: A's spawned work still finds its pool there
// (issue 27: it used to abort with "detached work ran outside a worker of
// its pool").
#[test]
fn a_worker_that_runs_another_pools_thread_builder_is_itself_again_after() {
    let _w = Watchdog::new("nested ThreadBuilder::run", 120);
    let outer = ThreadPoolBuilder::new().num_threads(1).build().unwrap();
    let (send, receive) = mpsc::channel();
    let inner = ThreadPoolBuilder::new()
        .num_threads(1)
        .spawn_handler(move |thread| {
            send.send(thread).unwrap();
            Ok(())
        })
        .build()
        .unwrap();
    let thread = receive.recv().unwrap();
    let (indices, spawned) = outer.install(move || {
        let before = blitz::current_thread_index();
        let closer = thread::spawn(move || {
            let inside = inner.install(|| (blitz::current_thread_index(), inner.current_thread_index()));
            drop(inner); // run() below returns once the inner pool has ended
            inside
        });
        thread.run();
        let after = blitz::current_thread_index();
        let spawned = Arc::new(AtomicUsize::new(0));
        let counter = spawned.clone();
        blitz::scope(|s| {
            s.spawn(move |_| {
                counter.fetch_add(1, Ordering::SeqCst);
            })
        });
        ((before, closer.join().unwrap(), after), spawned.load(Ordering::SeqCst))
    });
    assert_eq!(indices, (Some(0), (Some(0), Some(0)), Some(0)));
    assert_eq!(spawned, 1);
}

#[test]
fn a_failing_spawn_handler_fails_the_build() {
    let _w = Watchdog::new("spawn handler error", 120);
    let stopped = Arc::new(AtomicUsize::new(0));
    let e = stopped.clone();
    let mut runs = Vec::new();
    let error = ThreadPoolBuilder::new()
        .num_threads(4)
        .exit_handler(move |_| {
            e.fetch_add(1, Ordering::SeqCst);
        })
        .spawn_handler(|thread| {
            if thread.index() == 2 {
                return Err(std::io::Error::new(std::io::ErrorKind::Other, "no thread on purpose"));
            }
            runs.push(thread::spawn(move || thread.run()));
            Ok(())
        })
        .build()
        .unwrap_err();
    assert_eq!(error.to_string(), "no thread on purpose");
    assert!(std::error::Error::source(&error).is_some());
    // The two workers handed out before the error started and stopped;
    // the threads that ran them return.
    for t in runs {
        t.join().unwrap();
    }
    assert!(within_a_minute(|| stopped.load(Ordering::SeqCst) == 2));
}

#[test]
fn build_scoped_returns_after_the_pool_ended() {
    let _w = Watchdog::new("build_scoped", 120);
    let borrowed = [1, 2, 3];
    let wrapped = AtomicUsize::new(0);
    let stopped = Arc::new(AtomicBool::new(false));
    let s = stopped.clone();
    let sum = ThreadPoolBuilder::new()
        .num_threads(2)
        .exit_handler(move |_| s.store(true, Ordering::SeqCst))
        .build_scoped(
            |thread| {
                wrapped.fetch_add(borrowed.len(), Ordering::SeqCst);
                thread.run()
            },
            |pool| pool.install(|| borrowed.iter().sum::<i32>()),
        )
        .unwrap();
    assert_eq!(sum, 6);
    assert_eq!(wrapped.load(Ordering::SeqCst), 6, "the wrapper ran once per worker");
    assert!(stopped.load(Ordering::SeqCst), "the workers had stopped when build_scoped returned");
}

#[test]
fn build_errors_are_reported() {
    let _w = Watchdog::new("build errors", 120);
    let error = ThreadPoolBuilder::new().num_threads(blitz::max_num_threads() + 1).build().unwrap_err();
    assert!(matches!(error.library_error(), Some(blitz::Error::InvalidArgument)));
    assert!(!error.is_global_pool_already_initialized());
    assert!(error.to_string().contains("BLZ_EINVAL"), "{}", error);
    // A stack no thread can have: the OS refuses the first worker.
    let error = ThreadPoolBuilder::new().num_threads(2).stack_size(isize::MAX as usize).build().unwrap_err();
    assert!(error.library_error().is_some(), "{:?}", error);
    fn send_sync<T: Send + Sync>() {}
    send_sync::<blitz::ThreadPoolBuildError>();
    send_sync::<ThreadPool>();
    send_sync::<Scope<'static>>();
    send_sync::<ScopeFifo<'static>>();
}

#[test]
fn the_registry_field_observes_the_pool() {
    let _w = Watchdog::new("registry", 120);
    let pool = pool(3);
    let registry = pool.install(|| Arc::clone(&pool.registry));
    assert_eq!(registry.num_threads(), 3);
    assert!(!registry.is_stopped());
    // Replacing the public field does not change which pool is dropped.
    let mut pool = pool;
    let other = self::pool(1);
    pool.registry = Arc::clone(&other.registry);
    assert_eq!(pool.current_num_threads(), 3);
    drop(pool);
    registry.wait_until_stopped();
    assert!(!other.registry.is_stopped());
    assert_eq!(other.install(|| 4), 4);
}
