//! A safe API over libblitz, a work-stealing thread pool for fine-grained
//! fork-join parallelism behind a plain C ABI, with rayon-core's API: code
//! written for rayon-core 1.10 compiles against this crate with its imports
//! changed (the README's Rust section lists what behaves differently).
//!
//! ```
//! fn fib(n: u64) -> u64 {
//!     if n < 2 { return n; }
//!     let (a, b) = blitz::join(|| fib(n - 1), || fib(n - 2));
//!     a + b
//! }
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! assert_eq!(fib(20), 6765);             // off any pool: in the global pool
//!
//! let pool = blitz::ThreadPoolBuilder::new()
//!     .num_threads(2)
//!     .thread_name(|i| format!("worker-{}", i))
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
//! let (tx, rx) = std::sync::mpsc::channel();
//! pool.spawn(move || tx.send(42).unwrap()); // fire and forget
//! assert_eq!(rx.recv()?, 42);
//! let handle = pool.spawn_with_handle(|| 42); // or keep a handle
//! let v: i32 = handle.join()?;           // Result<T, blitz::Error>
//! assert_eq!(v, 42);
//!
//! assert_eq!(blitz::current_thread_index(), None);    // not a worker
//! assert_eq!(pool.current_num_threads(), 2);
//! println!("{:?}", pool.stats());
//! pool.wait_until_stopped();             // drop, and wait for the workers' end
//! # Ok(())
//! # }
//! ```
//!
//! Panics never cross the C boundary: every closure runs under
//! `catch_unwind`, and the call that waits for it resumes the panic (`join`
//! runs both closures and resumes the first closure's panic first; a scope
//! resumes `op`'s, else its first task's; [`JoinHandle::join`] returns
//! [`Error::TaskPanicked`] with the payload). A panic of work nobody waits
//! for (a detached [`spawn`], a `spawn_broadcast` call, a start or exit
//! handler) goes to the pool's
//! [panic handler](ThreadPoolBuilder::panic_handler), and aborts the process
//! without one, as in Rayon. A panic is also reported to libblitz
//! (`blz_fail`), which counts it in `tasks_failed` and cancels a
//! [fail-fast scope](ThreadPool::scope_fail_fast).
//!
//! Beyond rayon-core (libblitz 0.2): [`JoinHandle`]s
//! ([`is_finished`](JoinHandle::is_finished),
//! [`join_timeout`](JoinHandle::join_timeout),
//! [`detach`](JoinHandle::detach)), cancellable scopes ([`Scope::cancel`],
//! [`ThreadPool::scope_fail_fast`], [`is_cancelled`]), [`ThreadPool::stats`]
//! and [`ThreadPool::wait_until_stopped`].
//!
//! The crate links `libblitz.so` through `blitz-sys`, whose build script
//! finds it by `BLITZ_LIB_DIR`, `pkg-config --libs blitz` or the
//! checkout's `build/` directory; `cargo run` and `cargo test` of any crate
//! that depends on this one find it at run time (see the README).
#![warn(missing_docs)]

mod broadcast;
mod builder;
mod error;
mod job;
mod pool;
mod registry;
mod scope;
mod spawn;
mod task;

/// A snapshot of a pool's counters, from [`ThreadPool::stats`]: the C
/// struct itself, whose fields the `blitz-sys` documentation describes.
pub use blitz_sys::blz_stats as Stats;
pub use broadcast::BroadcastContext;
#[allow(deprecated)]
pub use builder::{initialize, Configuration};
pub use builder::{CustomSpawn, DefaultSpawn, ThreadBuilder, ThreadPoolBuildError, ThreadPoolBuilder, ThreadSpawn};
pub use error::{Error, PanicPayload};
pub use job::{join_context, FnContext};
pub use pool::{
    block_in_place, broadcast, current_num_threads, current_thread_index, is_cancelled, isolate, join, max_num_threads,
    spawn, spawn_broadcast, spawn_fifo, spawn_future, ThreadPool,
};
pub use registry::Registry;
pub use scope::{in_place_scope, in_place_scope_fifo, scope, scope_fifo, Scope, ScopeFifo};
pub use task::{JoinHandle, SpawnFuture};

/// The raw C API, re-exported.
pub use blitz_sys as sys;

/// [`join()`] and [`join_context`] under the module path rayon-core's
/// sources name them by (`join::join`), so that `use ...::join::*` works.
pub mod join {
    pub use crate::job::{join_context, FnContext};
    pub use crate::pool::join;
}

/// Catching a panic to look at it, as rayon-core's tests do.
pub mod unwind {
    use std::panic::{self, AssertUnwindSafe};
    use std::thread;

    /// Runs `f` and returns its value, or the payload of its panic:
    /// `catch_unwind` for a closure that need not be `UnwindSafe` (a test
    /// that checks what was left behind after the panic).
    ///
    /// ```
    /// let caught = blitz::unwind::halt_unwinding(|| blitz::join(|| 1, || -> i32 { panic!("b") }));
    /// assert!(caught.is_err());
    /// ```
    pub fn halt_unwinding<F, R>(f: F) -> thread::Result<R>
    where
        F: FnOnce() -> R,
    {
        panic::catch_unwind(AssertUnwindSafe(f))
    }
}
