//! A parallel quicksort on a slice: partition, then sort both halves with
//! `blitz::join` (the halves are disjoint `&mut` borrows of the slice).
//! Checks the result against `sort_unstable` and exits non-zero if it differs.
//!
//! usage: cargo run --release --example quicksort [len=1000000] [threads=0]
use std::time::Instant;

/// Splits `v` around the value at its middle into three runs: less than,
/// equal to, greater than the pivot (Dijkstra's Dutch national flag), and
/// returns where the equal run begins and ends. Keys equal to the pivot are
/// done with, so many equal keys cannot make the recursion deep.
fn partition<T: Ord + Copy>(v: &mut [T]) -> (usize, usize) {
    let pivot = v[v.len() / 2];
    let (mut less, mut next, mut greater) = (0, 0, v.len());
    while next < greater {
        if v[next] < pivot {
            v.swap(less, next);
            less += 1;
            next += 1;
        } else if v[next] > pivot {
            greater -= 1;
            v.swap(next, greater);
        } else {
            next += 1;
        }
    }
    (less, greater)
}

fn quicksort<T: Ord + Copy + Send>(v: &mut [T]) {
    if v.len() <= 1024 {
        v.sort_unstable();
        return;
    }
    let (less, greater) = partition(v);
    let (left, rest) = v.split_at_mut(less);
    let right = &mut rest[greater - less..];
    blitz::join(|| quicksort(left), || quicksort(right));
}

/// A deterministic pseudo-random sequence (xorshift64*), so the example needs no crate.
fn random_vec(len: usize) -> Vec<u64> {
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    (0..len)
        .map(|_| {
            state ^= state >> 12;
            state ^= state << 25;
            state ^= state >> 27;
            state.wrapping_mul(0x2545_F491_4F6C_DD1D)
        })
        .collect()
}

fn main() -> Result<(), blitz::ThreadPoolBuildError> {
    let mut args = std::env::args().skip(1);
    let len: usize = args.next().map_or(1_000_000, |a| a.parse().expect("len"));
    let threads: usize = args.next().map_or(0, |a| a.parse().expect("threads"));
    let pool = blitz::ThreadPoolBuilder::new().num_threads(threads).build()?;

    // Random keys, then keys with only eight distinct values (the case that
    // a two-way partition handles badly).
    let random = random_vec(len);
    let few_keys: Vec<u64> = random.iter().map(|x| x % 8).collect();
    for (what, mut v) in [("random", random), ("8 distinct", few_keys)] {
        let mut expected = v.clone();
        expected.sort_unstable();
        let start = Instant::now();
        pool.install(|| quicksort(&mut v));
        let elapsed = start.elapsed();
        assert!(v == expected, "{} keys: not sorted", what);
        println!(
            "sorted {} u64 ({} keys) on {} workers in {:.3} ms",
            len,
            what,
            pool.current_num_threads(),
            elapsed.as_secs_f64() * 1e3
        );
    }
    Ok(())
}
