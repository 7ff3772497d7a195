//! fib(n) by `blitz::join` with no cutoff: every call above fib(1) is a join.
//!
//! usage: cargo run --release --example fib [n=30] [threads=0 (one per CPU)]
use std::time::Instant;

fn fib(n: u32) -> u64 {
    if n < 2 {
        return n as u64;
    }
    let (a, b) = blitz::join(|| fib(n - 1), || fib(n - 2));
    a + b
}

fn fib_sequential(n: u32) -> u64 {
    if n < 2 {
        n as u64
    } else {
        fib_sequential(n - 1) + fib_sequential(n - 2)
    }
}

fn main() -> Result<(), blitz::ThreadPoolBuildError> {
    let mut args = std::env::args().skip(1);
    let n: u32 = args.next().map_or(30, |a| a.parse().expect("n"));
    let threads: usize = args.next().map_or(0, |a| a.parse().expect("threads"));
    let pool = blitz::ThreadPoolBuilder::new().num_threads(threads).build()?;
    let joins = fib_sequential(n + 1) - 1;

    let start = Instant::now();
    let value = pool.install(|| fib(n));
    let elapsed = start.elapsed();
    assert_eq!(value, fib_sequential(n));
    println!(
        "fib({}) = {} on {} workers: {:.3} ms, {} joins, {:.1} ns per join",
        n,
        value,
        pool.current_num_threads(),
        elapsed.as_secs_f64() * 1e3,
        joins,
        elapsed.as_secs_f64() * 1e9 / joins as f64
    );
    let stats = pool.stats();
    println!("steals {}, jobs executed {}, sleeps {}", stats.steals, stats.jobs_executed, stats.sleeps);
    Ok(())
}
