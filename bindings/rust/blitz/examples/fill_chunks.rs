//! A scope that fills a Vec in parallel chunks: each task borrows one
//! disjoint `&mut` chunk of the vector, which outlives the scope.
//!
//! usage: cargo run --release --example fill_chunks [len=10000000] [chunk=100000] [threads=0]
use std::sync::Mutex;
use std::time::Instant;

fn main() -> Result<(), blitz::ThreadPoolBuildError> {
    let mut args = std::env::args().skip(1);
    let len: usize = args.next().map_or(10_000_000, |a| a.parse().expect("len"));
    let chunk: usize = args.next().map_or(100_000, |a| a.parse().expect("chunk"));
    let threads: usize = args.next().map_or(0, |a| a.parse().expect("threads"));
    if chunk == 0 {
        eprintln!("fill_chunks: chunk must be at least 1");
        std::process::exit(2);
    }
    let pool = blitz::ThreadPoolBuilder::new().num_threads(threads).build()?;

    let mut v = vec![0u64; len];
    let per_worker = Mutex::new(vec![0usize; pool.current_num_threads()]);
    let start = Instant::now();
    pool.scope(|s| {
        for (k, piece) in v.chunks_mut(chunk).enumerate() {
            let per_worker = &per_worker;
            s.spawn(move |_| {
                let base = k * chunk;
                for (i, x) in piece.iter_mut().enumerate() {
                    let j = (base + i) as u64;
                    *x = j * j;
                }
                if let Some(w) = blitz::current_thread_index() {
                    per_worker.lock().unwrap()[w] += 1;
                }
            });
        }
    });
    let elapsed = start.elapsed();
    assert!(v.iter().enumerate().all(|(i, &x)| x == (i as u64) * (i as u64)), "wrong value");
    println!(
        "filled {} elements in {} chunks of {} on {} workers in {:.3} ms; chunks per worker: {:?}",
        len,
        (len + chunk - 1) / chunk,
        chunk,
        pool.current_num_threads(),
        elapsed.as_secs_f64() * 1e3,
        per_worker.into_inner().unwrap()
    );
    Ok(())
}
