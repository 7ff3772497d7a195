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

use harness::{add_cpu_split, current_cpu, quantile, sleep, sleep_until, wall, Args, FutexFloor, Report};
use kernels::{Bfs, Graph, MmJob, Node, Tree, UtsCount, UtsNode};
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

/// msort: both halves sorted by `join`, then merged by `join` (kernels.h).
fn merge(x: &[u64], y: &[u64], out: &mut [u64]) {
    if x.len() + y.len() <= kernels::MERGE_GRAIN {
        kernels::merge_sequential(x, y, out);
        return;
    }
    let ((lx, ly), (rx, ry)) = kernels::merge_split(x, y);
    let (left, right) = out.split_at_mut(lx.len() + ly.len());
    rayon::join(|| merge(lx, ly, left), || merge(rx, ry, right));
}

fn msort(a: &mut [u64], b: &mut [u64], to_b: bool) {
    if a.len() <= kernels::MSORT_GRAIN {
        kernels::msort_sequential(a, b, to_b);
        return;
    }
    let h = a.len() / 2;
    {
        let (a0, a1) = a.split_at_mut(h);
        let (b0, b1) = b.split_at_mut(h);
        rayon::join(|| msort(a0, b0, !to_b), || msort(a1, b1, !to_b));
    }
    let (x, y, out) = kernels::msort_halves(a, b, to_b);
    merge(x, y, out);
}

/// matmul: the four quadrants of C by nested `join`s, k halves in order.
fn matmul(job: &MmJob) {
    if job.n <= kernels::MM_BLOCK {
        job.block();
        return;
    }
    let quadrant = |q| {
        for k in 0..2 {
            matmul(&job.part(q, k));
        }
    };
    rayon::join(|| rayon::join(|| quadrant(0), || quadrant(1)), || rayon::join(|| quadrant(2), || quadrant(3)));
}

/// bfs: each level's frontier split in halves by `join`.
fn bfs_range(search: &Bfs, begin: usize, end: usize) {
    if end - begin <= kernels::BFS_GRAIN {
        search.chunk(begin, end);
        return;
    }
    let mid = begin + (end - begin) / 2;
    rayon::join(|| bfs_range(search, begin, mid), || bfs_range(search, mid, end));
}

fn bfs(search: &mut Bfs) {
    let mut n = search.frontier_size();
    while n > 0 {
        bfs_range(search, 0, n);
        n = search.advance();
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

/// `count` tiny tasks spawned from a worker: a scope entered inside `install`,
/// whose `spawn`s push to that worker's own deque and whose end waits for
/// them all (running them meanwhile). No latch: the scope counts its jobs.
fn spawn_wait_inside(pool: &rayon::ThreadPool, count: usize) {
    pool.install(|| {
        rayon::scope(|s| {
            for i in 0..count {
                s.spawn(move |_| harness::tiny_task(i));
            }
        })
    });
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

    /// Issue 28's blocking mix (bench/blocking_mix.py): one task per worker
    /// sleeps block_ms (standing for I/O; Rayon has no way to say a task
    /// blocks), and fib(n) by join starts once they all sleep. The measured
    /// region is the fork-join alone (blockers=0: its time without them).
    fn blockmix(&self, args: &mut Args, r: &mut Report) {
        let n = args.number("n", 25) as u32;
        let block_ms = args.number("block_ms", 100);
        let blockers = args.number("blockers", self.threads as u64) as usize;
        if n > 40 {
            harness::fail("blockmix: n above 40 is not this workload's fork-join of a few ms");
        }
        // Relaxed: the counters only pace the main thread; no data is published through them.
        let started = Arc::new(AtomicUsize::new(0));
        let finished = Arc::new(AtomicUsize::new(0));
        for _ in 0..blockers {
            let (started, finished) = (started.clone(), finished.clone());
            self.pool.spawn(move || {
                started.fetch_add(1, Ordering::Relaxed);
                std::thread::sleep(std::time::Duration::from_millis(block_ms));
                finished.fetch_add(1, Ordering::Relaxed);
            });
        }
        let give_up = wall() + 5.0;
        while started.load(Ordering::Relaxed) < blockers && wall() < give_up {
            sleep(0.001);
        }
        let value = r.measure(|| self.pool.install(|| fib(n)));
        while finished.load(Ordering::Relaxed) < blockers {
            sleep(0.001);
        }
        r.metric = r.wall * 1e3;
        r.unit = "ms";
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

    /// Issue 29's rayon rows: what a Rayon user writes with parallel
    /// iterators and slices, on sizes the issue names (op=sum_map and
    /// filter_count over 2*10^7 f64, collect of 10^7, sort and
    /// sort_unstable of 10^7 u64). Run natively and, from the same source,
    /// on libblitz through the rayon-core replacement (bench/rayon-on-blitz).
    fn iter(&self, args: &mut Args, r: &mut Report) {
        let op = args.string("op", "sum_map");
        let default_n = if op == "sum_map" || op == "filter_count" { 20_000_000 } else { 10_000_000 };
        let n = args.number("n", default_n) as usize;
        // sum_map and filter_count only: the measured region runs the pass
        // this many times and the metric is per pass (a 2-worker filter_count
        // pass, 3 to 6 ms here, is too short for a CPU/wall figure).
        let passes = args.number("passes", 1) as usize;
        if n < 16 || passes < 1 {
            harness::fail("iter: n must be at least 16, passes at least 1");
        }
        let warm = n / 16;
        match op.as_str() {
            "sum_map" | "filter_count" => {
                let mut x = vec![0.0f64; n];
                kernels::fill_uniform(&mut x);
                let run = |x: &[f64]| -> f64 {
                    if op == "sum_map" {
                        x.par_iter().map(|&v| kernels::map_one(v)).sum::<f64>()
                    } else {
                        x.par_iter().filter(|&&v| v < 0.25).count() as f64
                    }
                };
                self.pool.install(|| run(&x[..warm]));
                let value = r.measure(|| (0..passes).map(|_| self.pool.install(|| run(&x))).last().unwrap());
                // A sum's last bits depend on how the pool split it: the checksum keeps 7 digits.
                r.checksum = format!("{:.6e}", value);
            }
            "collect" => {
                let run = |n: usize| -> Vec<u64> { (0..n as u64).into_par_iter().map(kernels::mix64).collect() };
                self.pool.install(|| run(warm));
                let v = r.measure(|| self.pool.install(|| run(n)));
                r.checksum = format!("{:016x}", v.iter().fold(0u64, |h, &x| h.rotate_left(5) ^ x));
            }
            "sort" | "sort_unstable" => {
                let keys: Vec<u64> = (0..n as u64).map(kernels::mix64).collect();
                let run = |v: &mut [u64]| {
                    if op == "sort" {
                        v.par_sort()
                    } else {
                        v.par_sort_unstable()
                    }
                };
                let mut w = keys[..warm].to_vec();
                self.pool.install(|| run(&mut w));
                let mut v = keys;
                r.measure(|| self.pool.install(|| run(&mut v)));
                r.checksum = if v.windows(2).all(|w| w[0] <= w[1]) {
                    format!("{:016x}", v.iter().fold(0u64, |h, &x| h.rotate_left(5) ^ x))
                } else {
                    "unsorted".to_string()
                };
            }
            _ => {
                eprintln!("bench: iter op must be sum_map, filter_count, collect, sort or sort_unstable, not '{}'", op);
                std::process::exit(2);
            }
        }
        r.metric = r.wall * 1e3 / passes as f64;
        r.unit = "ms";
        r.extra.push(("n", n as f64));
        r.extra.push(("passes", passes as f64));
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

    fn msort(&self, args: &mut Args, r: &mut Report) {
        let n = args.number("n", 10_000_000) as usize;
        if n < 32 {
            harness::fail("msort: n must be at least 32");
        }
        let mut keys = vec![0u64; n];
        kernels::fill_keys(&mut keys);
        // Warm-up: a sixteenth of the keys, sorted in the scratch array's halves.
        let mut scratch = keys.clone();
        let warm = n / 16;
        {
            let (w, rest) = scratch.split_at_mut(warm);
            self.pool.install(|| msort(w, &mut rest[..warm], false));
        }
        // The scratch is written before it is read; the copy took its page faults untimed.
        scratch.copy_from_slice(&keys);
        r.measure(|| self.pool.install(|| msort(&mut keys, &mut scratch, false)));
        r.checksum = if kernels::keys_sorted(&keys) {
            format!("{:016x}", kernels::hash_keys(&keys))
        } else {
            "unsorted".to_string()
        };
        r.metric = r.wall * 1e3;
        r.unit = "ms";
        r.extra.push(("ns_per_key", r.wall * 1e9 / n as f64));
    }

    fn matmul(&self, args: &mut Args, r: &mut Report) {
        let n = args.number("n", 1024) as usize;
        let blocks = n / kernels::MM_BLOCK;
        if n % kernels::MM_BLOCK != 0 || !blocks.is_power_of_two() || n > 16384 {
            harness::fail("matmul: n must be 64 times a power of two, up to 16384");
        }
        let matrices = |side: usize| {
            let (mut a, mut b, mut c) = (vec![0.0; side * side], vec![0.0; side * side], vec![0.0; side * side]);
            // C starts as a third matrix: every page is touched untimed.
            kernels::fill_matrices(&mut a, &mut b, &mut c);
            (a, b, c)
        };
        let warm = (n / 4).max(kernels::MM_BLOCK);
        let (wa, wb, mut wc) = matrices(warm);
        let (a, b, mut c) = matrices(n);
        self.pool.install(|| matmul(&MmJob::new(&mut wc, &wa, &wb, warm)));
        r.measure(|| self.pool.install(|| matmul(&MmJob::new(&mut c, &a, &b, n))));
        r.checksum = format!("{:016x}", kernels::hash_doubles(&c));
        r.metric = r.wall * 1e3;
        r.unit = "ms";
        r.extra.push(("gflops", 2.0 * (n as f64).powi(3) / r.wall * 1e-9));
    }

    fn bfs(&self, args: &mut Args, r: &mut Report) {
        let side = args.number("side", 1000);
        let shortcuts = args.number("shortcuts", 3);
        if !(2..=20000).contains(&side) || shortcuts > 64 {
            harness::fail("bfs: side must be 2..20000, shortcuts 0..64");
        }
        let graph = Graph::build(side as u32, shortcuts as u32);
        let mut search = Bfs::new(&graph);
        // Warm-up: the same search once (it also brings the graph into the caches).
        search.reset(0);
        self.pool.install(|| bfs(&mut search));
        search.reset(0);
        r.measure(|| self.pool.install(|| bfs(&mut search)));
        let found = search.summary();
        r.checksum = format!("{}/{}", found.reached, found.level_sum);
        r.metric = r.wall * 1e3;
        r.unit = "ms";
        r.extra.push(("vertices", graph.vertices as f64));
        r.extra.push(("edges", graph.edges() as f64));
        r.extra.push(("levels", found.levels as f64));
    }

    /// The spawn workloads (as harness.c's time_spawns): `tasks` tiny tasks by
    /// `spawn_wait`, after a warm-up of at most 10^4; the checksum shows a lost task.
    fn time_spawns(&self, spawn_wait: fn(&rayon::ThreadPool, usize), args: &mut Args, r: &mut Report) {
        let tasks = args.number("tasks", 1_000_000) as usize;
        if tasks < 1 {
            harness::fail(&format!("{}: tasks must be at least 1", r.workload));
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

    fn spawn(&self, args: &mut Args, r: &mut Report) {
        self.time_spawns(spawn_wait, args, r);
    }

    fn spawn_inside(&self, args: &mut Args, r: &mut Report) {
        self.time_spawns(spawn_wait_inside, args, r);
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
        let measured: Vec<(f64, bool, f64, bool)> = r.measure(|| {
            (0..samples)
                .map(|_| {
                    sleep(gap);
                    let (f, f_same) = floor.sample();
                    sleep(gap); // Rayon cannot tell whether its workers sleep: wait as long
                    let caller_cpu = current_cpu();
                    let t0 = wall();
                    let (started, cpu) = self.pool.install(|| (wall(), current_cpu()));
                    ((started - t0) * 1e6, cpu == caller_cpu, f, f_same)
                })
                .collect()
        });
        let pool_us: Vec<f64> = measured.iter().map(|m| m.0).collect();
        let pool_same: Vec<bool> = measured.iter().map(|m| m.1).collect();
        let floor_us: Vec<f64> = measured.iter().map(|m| m.2).collect();
        let floor_same: Vec<bool> = measured.iter().map(|m| m.3).collect();
        drop(floor);
        r.metric = quantile(&pool_us, 0.5);
        r.unit = "us";
        r.extra.push(("p99_us", quantile(&pool_us, 0.99)));
        r.extra.push(("floor_p50_us", quantile(&floor_us, 0.5)));
        r.extra.push(("floor_p99_us", quantile(&floor_us, 0.99)));
        r.extra.push(("never_asleep", 0.0));
        let floor_keys = ["floor_same_cpu", "floor_same_p50_us", "floor_same_p99_us", "floor_other_p50_us", "floor_other_p99_us"];
        add_cpu_split(r, floor_keys, &floor_us, &floor_same);
        add_cpu_split(r, ["same_cpu", "same_p50_us", "same_p99_us", "other_p50_us", "other_p99_us"], &pool_us, &pool_same);
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
    let workloads = [
        "fib", "tree", "parfor", "uts", "spawn", "roundtrip", "wake", "idle", "storm", "msort", "matmul", "bfs",
        "spawn_inside", "iter", "blockmix",
    ];
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
        "spawn_inside" => bench.spawn_inside(&mut args, &mut report),
        "roundtrip" => bench.roundtrip(&mut args, &mut report),
        "wake" => bench.wake(&mut args, &mut report),
        "idle" => bench.idle(&mut args, &mut report),
        "msort" => bench.msort(&mut args, &mut report),
        "matmul" => bench.matmul(&mut args, &mut report),
        "bfs" => bench.bfs(&mut args, &mut report),
        "iter" => bench.iter(&mut args, &mut report),
        "blockmix" => bench.blockmix(&mut args, &mut report),
        _ => bench.storm(&mut args, &mut report),
    }
    if let Some(key) = args.unused() {
        eprintln!("bench: unknown argument '{}' for this workload", key);
        std::process::exit(2);
    }
    report.print();
}
