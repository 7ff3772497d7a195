//! A safe, Rayon-like API over libblitz, a work-stealing thread pool for
//! fine-grained fork-join parallelism behind a plain C ABI.
//!
//! ```
//! fn fib(n: u64) -> u64 {
//!     if n < 2 { return n; }
//!     let (a, b) = blitz::join(|| fib(n - 1), || fib(n - 2));
//!     a + b
//! }
//!
//! # fn main() -> Result<(), blitz::Error> {
//! let pool = blitz::ThreadPoolBuilder::new()
//!     .num_threads(2)
//!     .thread_name("worker")            // "worker-0", "worker-1"
//!     .build()?;
//! let (a, b) = pool.join(|| fib(20), || fib(21));
//! assert_eq!((a, b), (6765, 10946));
//! let r = pool.install(|| fib(22));      // runs on a worker, returns its value
//! assert_eq!(r, 17711);
//!
//! let data = vec![1u64, 2, 3, 4];
//! let (mut one, mut two) = (0, 0);
//! pool.scope(|s| {                       // tasks may borrow from this frame
//!     s.spawn(|_| one = data[..2].iter().sum());
//!     s.spawn(|_| two = data[2..].iter().sum());
//! });                                    // returns when both have finished
//! assert_eq!((one, two), (3, 7));
//!
//! let handle = pool.spawn(|| 42);        // a 'static closure
//! let v: i32 = handle.join()?;           // Result<T, blitz::Error>
//! assert_eq!(v, 42);
//!
//! assert_eq!(blitz::current_thread_index(), None);    // not a worker
//! assert_eq!(pool.current_num_threads(), 2);
//! println!("{:?}", pool.stats());
//! # Ok(())
//! # }
//! ```
//!
//! Panics never cross the C boundary: every closure runs under
//! `catch_unwind`, and the call that waits for it resumes the panic (`join`
//! runs both closures and resumes the first closure's panic first;
//! [`JoinHandle::join`] returns [`Error::TaskPanicked`] with the payload).
//! The panic is also reported to libblitz (`blz_fail`), which counts it in
//! `tasks_failed` and cancels a [fail-fast scope](ThreadPool::scope_fail_fast).
//!
//! Waiting with a bound, cancelling, and per-worker calls (libblitz 0.2):
//! [`JoinHandle::is_finished`], [`JoinHandle::join_timeout`] and
//! [`JoinHandle::detach`]; [`Scope::cancel`], [`Scope::is_cancelled`],
//! [`ThreadPool::scope_fail_fast`] and [`is_cancelled`] for tasks to poll;
//! [`ThreadPool::broadcast`] and [`broadcast`].
//!
//! The crate links `libblitz.so` through `blitz-sys`, whose build script
//! finds it by `BLITZ_LIB_DIR`, `pkg-config --libs blitz` or the
//! checkout's `build/` directory.
#![warn(missing_docs)]

mod broadcast;
mod error;
mod job;
mod pool;
mod scope;
mod task;

/// A snapshot of a pool's counters, from [`ThreadPool::stats`]: the C
/// struct itself, whose fields the `blitz-sys` documentation describes.
pub use blitz_sys::blz_stats as Stats;
pub use broadcast::BroadcastContext;
pub use error::{Error, PanicPayload};
pub use pool::{
    broadcast, current_num_threads, current_thread_index, is_cancelled, join, ThreadPool, ThreadPoolBuilder,
};
pub use scope::Scope;
pub use task::JoinHandle;

/// The raw C API, re-exported.
pub use blitz_sys as sys;
