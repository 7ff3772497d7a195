//! The benchmark workloads on Rayon, written the way a Rayon user would:
//! `join` for fork-join, parallel iterators for sum and map, `install` to
//! run on the pool from outside, `spawn` for detached tasks, and for the
//! spawn workloads `spawn` plus a counting latch (an atomic counter and a
//! condition variable) so that the external thread can wait for them all.
//! One warm-up, one measured run, one JSON line per invocation, exactly as
//! bench/harness.c does for the C programs.
//!
//! usage: rayon-peer-bench WORKLOAD [threads=N] [key=value ...]
mod harness;
mod kernels;

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};

use harness::{quantile, sleep, sleep_until, wall, Args, FutexFloor, Report};
use kernels::{Node, Tree, UtsCount, UtsNode};
use rayon::prelude::*;

fn fib(n: u32) -> u64 {
    if n < 2 {
        return n as u64;
    }
    let (a, b) = rayon::join(|| fib(n - 1), || fib(n - 2));
    a + b
}

fn tree_sum(node: &Node) -> i64 {
    match node.children() {
        None => node.value,
        Some((l, r)) => {
            let (a, b) = rayon::join(|| tree_sum(l), || tree_sum(r));
            node.value + a + b
        }
    }
}

fn sort(a: &mut [f64]) {
    if a.len() <= kernels::QS_GRAIN {
        kernels::qs_sequential(a);
        return;
    }
    let k = kernels::qs_partition(a);
    let (left, right) = a.split_at_mut(k);
    rayon::join(|| sort(left), || sort(right));
}

/// Children [first, last) of parent, split in halves.
fn uts_children(parent: &UtsNode, first: i32, last: i32, max_depth: i32) -> UtsCount {
    if last - first == 1 {
        return uts_node(&parent.child(first), max_depth);
    }
    let mid = first + (last - first) / 2;
    let (a, b) = rayon::join(
        || uts_children(parent, first, mid, max_depth),
        || uts_children(parent, mid, last, max_depth),
    );
    a.add(b)
}

fn uts_node(node: &UtsNode, max_depth: i32) -> UtsCount {
    let children = node.children(max_depth);
    let count = UtsCount { nodes: 1, leaves: (children == 0) as u64 };
    if children == 0 {
        count
    } else {
        count.add(uts_children(node, 0, children, max_depth))
    }
}

/// The counting latch of the spawn workloads: tasks still to run, and the
/// flag the last one raises. Static, so a task may still touch it after
/// the waiter returned.
static REMAINING: AtomicUsize = AtomicUsize::new(0);
static ALL_DONE: Mutex<bool> = Mutex::new(false);
static ALL_DONE_CV: Condvar = Condvar::new();

fn count_down() {
    // AcqRel: the last task must see every other task's writes before it signals.
    if REMAINING.fetch_sub(1, Ordering::AcqRel) == 1 {
        *ALL_DONE.lock().unwrap() = true;
        ALL_DONE_CV.notify_one();
    }
}

/// `count` tiny tasks spawned from this (external) thread; waits for all.
fn spawn_wait(pool: &rayon::ThreadPool, count: usize) {
    *ALL_DONE.lock().unwrap() = false;
    REMAINING.store(count, Ordering::Relaxed); // relaxed: published by the spawns below
    for i in 0..count {
        pool.spawn(move || {
            harness::tiny_task(i);
            count_down();
        });
    }
    let mut done = ALL_DONE.lock().unwrap();
    while !*done {
        done = ALL_DONE_CV.wait(done).unwrap();
    }
}

struct Bench {
    pool: rayon::ThreadPool,
    threads: usize,
}

impl Bench {
    fn fib(&self, args: &mut Args, r: &mut Report) {
        let n = args.number("n", 30) as u32;
        if n > 50 {
            harness::fail("fib: n above 50 would take hours");
        }
        self.pool.install(|| fib(n.min(20)));
        let value = r.measure(|| self.pool.install(|| fib(n)));
        let joins = kernels::fib(n + 1) - 1;
        r.metric = r.wall * 1e9 / joins.max(1) as f64;
        r.unit = "ns/join";
        r.checksum = value.to_string();
    }

    fn tree(&self, args: &mut Args, r: &mut Report) {
        let depth = args.number("depth", 10) as u32;
        let reps = args.number("reps", 1);
        if !(1..=30).contains(&depth) || reps < 1 {
            harness::fail("tree: depth must be 1..30, reps at least 1");
        }
        let warm = Tree::build(depth.min(12));
        let tree = Tree::build(depth);
        self.pool.install(|| tree_sum(warm.root()));
        let sum = r.measure(|| {
            self.pool.install(|| {
                let mut s = 0;
                for _ in 0..reps {
                    s = tree_sum(tree.root());
                }
                s
            })
        });
        let nodes = ((1u64 << depth) - 1) as f64;
        r.metric = r.wall * 1e9 / (nodes * reps as f64);
        r.unit = "ns/node";
        r.checksum = sum.to_string();
        r.extra.push(("nodes", nodes));
        r.extra.push(("reps", reps as f64));
    }

    fn parfor(&self, args: &mut Args, r: &mut Report) {
        let op = args.string("op", "sum");
        let n = args.number("n", 10_000_000) as usize;
        if n < 16 {
            harness::fail("parfor: n must be at least 16");
        }
        let mut x = vec![0.0f64; n];
        let mut y = vec![0.0f64; n];
        match op.as_str() {
            "sum" => {
                kernels::fill_integers(&mut x);
                let x = &x;
                self.pool.install(|| x[..n / 16].par_iter().sum::<f64>());
                let s = r.measure(|| self.pool.install(|| x.par_iter().sum::<f64>()));
                r.checksum = format!("{:.0}", s);
            }
            "map" => {
                kernels::fill_integers(&mut x);
                let map = |x: &[f64], y: &mut [f64]| {
                    y.par_iter_mut().zip(x.par_iter()).for_each(|(y, &x)| *y = kernels::map_one(x))
                };
                self.pool.install(|| map(&x[..n / 16], &mut y[..n / 16]));
                r.measure(|| self.pool.install(|| map(&x, &mut y)));
                r.checksum = format!("{:016x}", kernels::hash_doubles(&y));
            }
            "sort" => {
                kernels::fill_uniform(&mut x);
                y[..n / 16].copy_from_slice(&x[..n / 16]);
                self.pool.install(|| sort(&mut y[..n / 16]));
                r.measure(|| self.pool.install(|| sort(&mut x)));
                r.checksum = if kernels::is_sorted(&x) {
                    format!("{:016x}", kernels::hash_doubles(&x))
                } else {
                    "unsorted".to_string()
                };
            }
            _ => {
                eprintln!("bench: parfor op must be sum, map or sort, not '{}'", op);
                std::process::exit(2);
            }
        }
        r.metric = r.wall * 1e3;
        r.unit = "ms";
    }

    fn uts(&self, args: &mut Args, r: &mut Report) {
        let depth = args.number("depth", 10) as i32;
        if !(1..=14).contains(&depth) {
            harness::fail("uts: depth must be 1..14");
        }
        let root = UtsNode::root();
        self.pool.install(|| uts_node(&root, depth.min(5)));
        let count = r.measure(|| self.pool.install(|| uts_node(&root, depth)));
        r.metric = r.wall * 1e3;
        r.unit = "ms";
        r.checksum = format!("{}/{}", count.nodes, count.leaves);
        r.extra.push(("ns_per_node", r.wall * 1e9 / count.nodes as f64));
    }

    fn spawn(&self, args: &mut Args, r: &mut Report) {
        let tasks = args.number("tasks", 1_000_000) as usize;
        if tasks < 1 {
            harness::fail("spawn: tasks must be at least 1");
        }
        harness::tiny_prepare(tasks.min(10_000));
        spawn_wait(&self.pool, tasks.min(10_000));
        harness::tiny_prepare(tasks);
        r.measure(|| spawn_wait(&self.pool, tasks));
        r.metric = r.wall * 1e9 / tasks as f64;
        r.unit = "ns/task";
        r.checksum = harness::tiny_checksum(tasks).to_string();
        r.extra.push(("tasks_per_s", tasks as f64 / r.wall));
    }

    fn roundtrip(&self, args: &mut Args, r: &mut Report) {
        let calls = args.number("calls", 2000) as usize;
        if calls < 1 {
            harness::fail("roundtrip: calls must be at least 1");
        }
        for _ in 0..100 {
            self.pool.install(|| {});
        }
        let us = r.measure(|| {
            (0..calls)
                .map(|_| {
                    let t0 = wall();
                    self.pool.install(|| {});
                    (wall() - t0) * 1e6
                })
                .collect::<Vec<f64>>()
        });
        r.metric = quantile(&us, 0.5);
        r.unit = "us";
        r.extra.push(("p99_us", quantile(&us, 0.99)));
        r.extra.push(("mean_us", r.wall * 1e6 / calls as f64));
        r.checksum = calls.to_string();
    }

    fn wake(&self, args: &mut Args, r: &mut Report) {
        let samples = args.number("samples", 10) as usize;
        let gap = args.number("gap_ms", 30) as f64 * 1e-3;
        if samples < 1 {
            harness::fail("wake: samples must be at least 1");
        }
        let floor = FutexFloor::start();
        self.pool.install(|| {});
        let (pool_us, floor_us): (Vec<f64>, Vec<f64>) = r.measure(|| {
            (0..samples)
                .map(|_| {
                    sleep(gap);
                    let f = floor.sample();
                    sleep(gap); // Rayon cannot tell whether its workers sleep: wait as long
                    let t0 = wall();
                    let started = self.pool.install(wall);
                    ((started - t0) * 1e6, f)
                })
                .unzip()
        });
        drop(floor);
        r.metric = quantile(&pool_us, 0.5);
        r.unit = "us";
        r.extra.push(("p99_us", quantile(&pool_us, 0.99)));
        r.extra.push(("floor_p50_us", quantile(&floor_us, 0.5)));
        r.extra.push(("floor_p99_us", quantile(&floor_us, 0.99)));
        r.extra.push(("never_asleep", 0.0));
        r.checksum = samples.to_string();
        r.samples.push(("samples_us", pool_us));
        r.samples.push(("floor_samples_us", floor_us));
    }

    fn idle(&self, args: &mut Args, r: &mut Report) {
        let phase = args.string("phase", "after");
        if phase == "after" {
            let quiet_ms = args.number("quiet_ms", 100);
            self.pool.install(|| fib(27));
            r.measure(|| sleep(quiet_ms as f64 * 1e-3));
            r.metric = r.cpu * 1e3;
            r.unit = "ms CPU";
            r.checksum = quiet_ms.to_string();
            return;
        }
        if phase != "trickle" {
            eprintln!("bench: idle phase must be after or trickle, not '{}'", phase);
            std::process::exit(2);
        }
        let seconds = args.number("ms", 2000) as f64 * 1e-3;
        let period = args.number("period_us", 1000) as f64 * 1e-6;
        let ticks = (seconds / period) as usize;
        if ticks < 1 {
            harness::fail("idle: the trickle needs at least one period");
        }
        let posted: Vec<f64> = vec![0.0; ticks];
        let started: Arc<Vec<AtomicU64>> = Arc::new((0..ticks).map(|_| AtomicU64::new(0)).collect());
        let done = Arc::new(AtomicUsize::new(0));
        self.pool.install(|| fib(20));
        let mut posted = posted;
        let w0 = wall();
        r.measure(|| {
            for (k, slot) in posted.iter_mut().enumerate() {
                sleep_until(w0 + k as f64 * period);
                *slot = wall();
                let (started, done) = (started.clone(), done.clone());
                self.pool.spawn(move || {
                    started[k].store(wall().to_bits(), Ordering::Relaxed); // published by the release below
                    done.fetch_add(1, Ordering::Release); // release: the poster reads started after counting
                });
            }
            // Acquire: pairs with each task's release.
            while done.load(Ordering::Acquire) < ticks {
                sleep(0.0002);
            }
        });
        let latency: Vec<f64> = posted
            .iter()
            .zip(started.iter())
            .map(|(p, s)| (f64::from_bits(s.load(Ordering::Relaxed)) - p) * 1e6)
            .collect();
        r.metric = r.cpu / r.wall * 100.0;
        r.unit = "% CPU";
        r.extra.push(("p50_us", quantile(&latency, 0.5)));
        r.extra.push(("p99_us", quantile(&latency, 0.99)));
        r.extra.push(("tasks", ticks as f64));
        r.checksum = ticks.to_string();
    }

    fn storm(&self, args: &mut Args, r: &mut Report) {
        let tasks = args.number("tasks", 1000) as usize;
        let storms = args.number("storms", 10) as usize;
        let gap = args.number("gap_ms", 20) as f64 * 1e-3;
        if tasks < 1 || storms < 1 {
            harness::fail("storm: tasks and storms must be at least 1");
        }
        let expected = tasks as u64 * (tasks as u64 + 1) / 2;
        harness::tiny_prepare(tasks);
        spawn_wait(&self.pool, tasks);
        sleep(gap);
        let mut wrong = 0;
        let us: Vec<f64> = r.measure(|| {
            let us = (0..storms)
                .map(|s| {
                    if s > 0 {
                        sleep(gap);
                    }
                    harness::tiny_prepare(tasks);
                    let t0 = wall();
                    spawn_wait(&self.pool, tasks);
                    let t = (wall() - t0) * 1e6;
                    wrong += (harness::tiny_checksum(tasks) != expected) as usize;
                    t
                })
                .collect();
            sleep(gap);
            us
        });
        r.metric = quantile(&us, 0.5);
        r.unit = "us";
        r.extra.push(("never_asleep", 0.0));
        r.checksum =
            if wrong > 0 { format!("lost tasks in {} storms", wrong) } else { expected.to_string() };
    }
}

fn main() {
    let argv: Vec<String> = std::env::args().collect();
    let workloads = ["fib", "tree", "parfor", "uts", "spawn", "roundtrip", "wake", "idle", "storm"];
    if argv.len() < 2 || !workloads.contains(&argv[1].as_str()) {
        eprintln!("usage: {} WORKLOAD [threads=N] [key=value ...]\nworkloads: {}", argv[0], workloads.join(" "));
        std::process::exit(2);
    }
    let mut args = Args::parse(&argv[2..]).unwrap_or_else(|e| {
        eprintln!("bench: {}", e);
        std::process::exit(2)
    });
    let threads = args.number("threads", 2) as usize;
    if !(1..=1024).contains(&threads) {
        harness::fail("threads must be 1..1024");
    }
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap_or_else(|e| harness::fail(&format!("cannot start the pool: {}", e)));
    let bench = Bench { pool, threads };
    let mut report = Report::new(&argv[1], bench.threads);
    match argv[1].as_str() {
        "fib" => bench.fib(&mut args, &mut report),
        "tree" => bench.tree(&mut args, &mut report),
        "parfor" => bench.parfor(&mut args, &mut report),
        "uts" => bench.uts(&mut args, &mut report),
        "spawn" => bench.spawn(&mut args, &mut report),
        "roundtrip" => bench.roundtrip(&mut args, &mut report),
        "wake" => bench.wake(&mut args, &mut report),
        "idle" => bench.idle(&mut args, &mut report),
        _ => bench.storm(&mut args, &mut report),
    }
    if let Some(key) = args.unused() {
        eprintln!("bench: unknown argument '{}' for this workload", key);
        std::process::exit(2);
    }
    report.print();
}
