//! rayon-core 1.10.1's public API, on libblitz.
//!
//! A stand-in for the real rayon-core through `[patch.crates-io]`, so that
//! `rayon` runs on libblitz without a change to the code that uses it:
//!
//! ```toml
//! [patch.crates-io]
//! rayon-core = { path = ".../bindings/rust/rayon-core" }
//! ```
//!
//! Every item is the `blitz` crate's, re-exported under rayon-core's
//! names; this crate adds no code of its own. The exported set is exactly
//! rayon-core 1.10.1's, less `current_thread_has_pending_tasks` (libblitz's
//! C ABI does not show a worker's queue; a caller gets a compile error
//! rather than a made-up answer). The differences in behaviour are those of
//! the `blitz` crate: bindings/rust/README.md, "What differs from
//! rayon-core". `BLZ_NUM_THREADS`, not `RAYON_NUM_THREADS`, sizes the
//! global pool.
//!
//! The items that rayon 1.6.1 takes from rayon-core (its `lib.rs`
//! re-exports them, its iterators call `join`, `join_context` and
//! `current_num_threads`, its tests use the rest) are all here; the test at
//! the end of this file names each one with rayon-core's signature, so a
//! missing or reshaped item fails to compile.

#![deny(missing_docs)]

/// `broadcast`, `spawn_broadcast` (rayon-core's `broadcast` module).
pub use blitz::{broadcast, spawn_broadcast, BroadcastContext};
/// The current pool's size, the current worker's index, the largest size.
pub use blitz::{current_num_threads, current_thread_index, max_num_threads};
/// Scopes, as in rayon-core.
pub use blitz::{in_place_scope, in_place_scope_fifo, scope, scope_fifo, Scope, ScopeFifo};
/// rayon-core's deprecated configuration API (rayon-core still exports it).
#[allow(deprecated)]
pub use blitz::{initialize, Configuration};
/// `join`, `join_context` and the context they pass.
pub use blitz::{join, join_context, FnContext};
/// Detached work.
pub use blitz::{spawn, spawn_fifo};
/// Pools and their builder.
pub use blitz::{ThreadBuilder, ThreadPool, ThreadPoolBuildError, ThreadPoolBuilder};

#[cfg(test)]
mod tests {
    // rayon-core 1.10.1's signatures, spelled out: coercing each item to a
    // function pointer of rayon-core's type fails to compile if the item is
    // missing or its shape differs (arguments, return type).
    #[test]
    fn rayon_core_items_have_rayon_core_signatures() {
        let _: fn() -> usize = crate::current_num_threads;
        let _: fn() -> usize = crate::max_num_threads;
        let _: fn() -> Option<usize> = crate::current_thread_index;
        let _: fn(fn() -> u8, fn() -> u16) -> (u8, u16) = crate::join;
        let _: fn(fn(crate::FnContext) -> u8, fn(crate::FnContext) -> u16) -> (u8, u16) = crate::join_context;
        let _: fn(fn(&crate::Scope<'static>) -> u8) -> u8 = crate::scope;
        let _: fn(fn(&crate::Scope<'static>) -> u8) -> u8 = crate::in_place_scope;
        let _: fn(fn(&crate::ScopeFifo<'static>) -> u8) -> u8 = crate::scope_fifo;
        let _: fn(fn(&crate::ScopeFifo<'static>) -> u8) -> u8 = crate::in_place_scope_fifo;
        let _: fn(fn()) = crate::spawn;
        let _: fn(fn()) = crate::spawn_fifo;
        let _: fn(fn(crate::BroadcastContext<'_>) -> u8) -> Vec<u8> = crate::broadcast;
        let _: fn(fn(crate::BroadcastContext<'_>)) = crate::spawn_broadcast;
        let _: fn() -> crate::ThreadPoolBuilder = crate::ThreadPoolBuilder::new;
        let _: fn(crate::ThreadPoolBuilder) -> Result<crate::ThreadPool, crate::ThreadPoolBuildError> =
            crate::ThreadPoolBuilder::build;
        let _: fn(&crate::ThreadBuilder) -> usize = crate::ThreadBuilder::index;
        let _: fn(crate::ThreadBuilder) = crate::ThreadBuilder::run;
        let _: fn(&crate::FnContext) -> bool = crate::FnContext::migrated;
    }

    // And they work: a pool of this crate's runs rayon-core's calls.
    #[test]
    fn a_pool_runs_rayon_core_calls() {
        let pool = crate::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
        let (a, b) = pool.install(|| crate::join(|| 1 + 1, || crate::current_num_threads()));
        assert_eq!((a, b), (2, 2));
        let seen = pool.broadcast(|ctx| ctx.index());
        assert_eq!(seen, vec![0, 1]);
        let mut v = [0u32; 8];
        pool.scope(|s| {
            for (i, x) in v.iter_mut().enumerate() {
                s.spawn(move |_| *x = i as u32 * 2);
            }
        });
        assert_eq!(v, [0, 2, 4, 6, 8, 10, 12, 14]);
    }
}
