//! `broadcast`: one call of a closure on every worker, through `blz_broadcast`.
use std::any::Any;
use std::marker::PhantomData;
use std::os::raw::c_void;
use std::panic::{self, AssertUnwindSafe};
use std::sync::Mutex;

use blitz_sys as sys;

use crate::job::{drop_payload, fail, failed};
use crate::registry::Registry;

/// What a [`broadcast`](crate::ThreadPool::broadcast) closure learns of the
/// worker it runs on. (The lifetime is Rayon's, where the context borrows
/// the worker; here it borrows nothing.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BroadcastContext<'a> {
    index: usize,
    num_threads: usize,
    _marker: PhantomData<&'a ()>,
}

impl<'a> BroadcastContext<'a> {
    fn new(index: usize, num_threads: usize) -> Self {
        BroadcastContext { index, num_threads, _marker: PhantomData }
    }

    /// The worker's index in its pool, `0 .. num_threads()`: the index of
    /// this call's value in the `Vec` that `broadcast` returns.
    pub fn index(&self) -> usize {
        self.index
    }

    /// How many calls the broadcast makes: the pool's number of workers.
    pub fn num_threads(&self) -> usize {
        self.num_threads
    }
}

/// The closure, one slot per worker for its value, and the first panic;
/// in the caller's frame, which `blz_broadcast` outlives.
struct BroadcastJob<'a, OP, R> {
    op: &'a OP,
    num_threads: usize,
    // One mutex per slot rather than unsafe cells: each is locked once per
    // broadcast, by its own worker, so there is no contention to save.
    values: Vec<Mutex<Option<R>>>,
    panic: Mutex<Option<Box<dyn Any + Send + 'static>>>,
}

unsafe extern "C" fn execute<OP, R>(arg: *mut c_void, worker_index: u32)
where
    OP: Fn(BroadcastContext<'_>) -> R + Sync,
    R: Send,
{
    // SAFETY: arg is the job in `run`'s frame, alive until blz_broadcast
    // returned, which is after every call of this function.
    let job = &*(arg as *const BroadcastJob<'_, OP, R>);
    let index = worker_index as usize;
    let context = BroadcastContext::new(index, job.num_threads);
    match panic::catch_unwind(AssertUnwindSafe(|| (job.op)(context))) {
        Ok(value) => {
            if let Some(slot) = job.values.get(index) {
                *slot.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(value);
            }
        }
        Err(payload) => {
            let mut first = job.panic.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            if first.is_none() {
                *first = Some(payload);
            } else {
                drop(first);
                drop_payload(payload);
            }
            fail();
        }
    }
}

/// Calls `op` once on every worker of `pool` and returns the values in
/// the workers' order, or resumes the first panic once every call ended.
///
/// # Safety
/// `pool` is a live pool.
pub(crate) unsafe fn run<OP, R>(pool: *mut sys::blz_pool, op: OP) -> Vec<R>
where
    OP: Fn(BroadcastContext<'_>) -> R + Sync,
    R: Send,
{
    let num_threads = sys::blz_pool_num_threads(pool) as usize;
    let job = BroadcastJob {
        op: &op,
        num_threads,
        values: (0..num_threads).map(|_| Mutex::new(None)).collect(),
        panic: Mutex::new(None),
    };
    let status =
        sys::blz_broadcast(pool, Some(execute::<OP, R>), &job as *const BroadcastJob<'_, OP, R> as *mut c_void);
    let BroadcastJob { values, panic: first_panic, .. } = job;
    if let Some(payload) = first_panic.into_inner().unwrap_or_else(|poisoned| poisoned.into_inner()) {
        drop(values);
        panic::resume_unwind(payload);
    }
    let values: Option<Vec<R>> =
        values.into_iter().map(|slot| slot.into_inner().unwrap_or_else(|poisoned| poisoned.into_inner())).collect();
    match values {
        Some(values) => values,
        // BLZ_ENOMEM (op ran nowhere) or BLZ_EFORK.
        None => failed("broadcast", status),
    }
}

unsafe extern "C" fn spawned_call<OP>(arg: *mut c_void, worker_index: u32)
where
    OP: Fn(BroadcastContext<'_>) + Send + Sync,
{
    // SAFETY: arg is the closure the driver task owns; blz_broadcast returns
    // (in that task) only after every call of this function.
    let op = &*(arg as *const OP);
    let context = BroadcastContext::new(worker_index as usize, crate::current_num_threads());
    crate::spawn::run_detached(|| op(context));
}

/// Calls `op` once on every worker of `pool` without waiting: a detached
/// task (the driver) makes the `blz_broadcast` call, which runs the
/// driver's own worker's call too while it waits for the others, and
/// then drops `op`. Each call's panic goes to the panic handler.
///
/// # Safety
/// `pool` is a live pool (or one whose own worker calls this from accepted
/// work); `registry` is its Registry.
pub(crate) unsafe fn spawn_broadcast<OP>(pool: *mut sys::blz_pool, registry: &Registry, op: OP)
where
    OP: Fn(BroadcastContext<'_>) + Send + Sync + 'static,
{
    let pool_ptr = crate::pool::SendPtr(pool);
    crate::spawn::spawn_in(pool, registry, move || {
        let pool = pool_ptr;
        // SAFETY: the driver is accepted work of `pool`, which is alive
        // until it returns; `op` lives in this frame until the call returned.
        let status = sys::blz_broadcast(pool.0, Some(spawned_call::<OP>), &op as *const OP as *mut c_void);
        // BLZ_ETASK: some calls panicked, each already handed to the panic
        // handler. Anything else means the calls did not run.
        if status != sys::BLZ_OK && status != sys::BLZ_ETASK {
            failed("spawn_broadcast", status);
        }
    });
}
