//! Fire-and-forget spawns (`spawn`, `spawn_fifo`): detached C tasks whose
//! panics go to the pool's panic handler.
//!
//! FIFO order on a worker: libblitz's worker queue runs the latest task
//! first, so `spawn_fifo` from a worker puts the closure at the back of
//! that worker's FIFO queue (in its Registry) and spawns a plain task that
//! runs whatever is at the front of the same queue when it starts. Each
//! such task takes exactly one closure, so every closure runs once, and
//! the closures of one worker start in the order they were queued, whichever
//! task (or thief) takes them. From any other thread, the injector is
//! first in, first out already.
use std::os::raw::c_void;
use std::panic::{self, AssertUnwindSafe};
use std::ptr;

use blitz_sys as sys;

use crate::job::{fail, failed};
use crate::registry::{current_worker, lock, with_worker_registry, FifoQueue, Registry};

/// Runs a detached closure on a worker: a panic is reported to libblitz
/// (`tasks_failed`) and handed to the pool's panic handler, never unwound
/// into C.
pub(crate) fn run_detached<F: FnOnce()>(f: F) {
    if let Err(payload) = panic::catch_unwind(AssertUnwindSafe(f)) {
        fail();
        with_worker_registry(|registry| registry.handle_panic(payload));
    }
}

/// `blz_spawn_options` as `blz_spawn_options_init` fills them (struct_size
/// set, every other field zero: no predecessor lists, whatever this
/// version of the struct holds) with these fields, without a C call per
/// spawn. Not a struct literal, so that fields the struct gains (0.3's
/// predecessor lists) stay zero without a change here.
pub(crate) fn spawn_options(
    flags: u32,
    group: *mut sys::blz_group,
    on_done: sys::blz_done_fn,
    done_arg: *mut c_void,
) -> sys::blz_spawn_options {
    // SAFETY: every field is an integer, a raw pointer or an Option of a
    // function pointer, for which all-zero bytes are valid (0, NULL, None).
    let mut opts: sys::blz_spawn_options = unsafe { std::mem::zeroed() };
    opts.struct_size = std::mem::size_of::<sys::blz_spawn_options>() as u32;
    opts.flags = flags;
    opts.group = group;
    opts.on_done = on_done;
    opts.done_arg = done_arg;
    opts
}

unsafe extern "C" fn run_boxed<F: FnOnce() + Send>(arg: *mut c_void) {
    // SAFETY: arg is the Box that spawn_in leaked for this task, run once.
    let f = Box::from_raw(arg as *mut F);
    run_detached(*f);
    with_worker_registry(Registry::work_finished);
}

/// Spawns `f` as a detached task of `pool`, counted as its detached work.
///
/// # Safety
/// `pool` is a live pool (or one whose own worker calls this from accepted
/// work); `registry` is its Registry.
pub(crate) unsafe fn spawn_in<F>(pool: *mut sys::blz_pool, registry: &Registry, f: F)
where
    F: FnOnce() + Send + 'static,
{
    spawn_flagged_in(pool, registry, f, 0)
}

/// [`spawn_in`] with `blz_spawn_options` flags (`BLZ_SPAWN_HIGH_PRIORITY`).
///
/// # Safety
/// As for [`spawn_in`].
pub(crate) unsafe fn spawn_flagged_in<F>(pool: *mut sys::blz_pool, registry: &Registry, f: F, flags: u32)
where
    F: FnOnce() + Send + 'static,
{
    let job = Box::into_raw(Box::new(f));
    registry.work_started();
    let opts = spawn_options(flags, ptr::null_mut(), None, ptr::null_mut());
    let status = sys::blz_spawn_ex(pool, Some(run_boxed::<F>), job as *mut c_void, &opts, ptr::null_mut());
    if status != sys::BLZ_OK {
        // Refused (out of memory, or a forked child): the task will not run.
        drop(Box::from_raw(job));
        registry.work_finished();
        failed("spawn", status);
    }
}

unsafe extern "C" fn run_fifo_front(arg: *mut c_void) {
    // SAFETY: arg is a FIFO queue of the Registry of the pool this task
    // belongs to; the Registry outlives every task of its pool.
    let queue = &*(arg as *const FifoQueue);
    let job = lock(queue).pop_front();
    if let Some(job) = job {
        run_detached(job);
    }
    with_worker_registry(Registry::work_finished);
}

/// Spawns `f` into `pool`, first in, first out among the FIFO spawns of
/// the calling worker (see the module's documentation).
///
/// # Safety
/// As for `spawn_in`; `registry` is `pool`'s.
pub(crate) unsafe fn spawn_fifo_in<F>(pool: *mut sys::blz_pool, registry: &Registry, f: F)
where
    F: FnOnce() + Send + 'static,
{
    let worker = match current_worker() {
        Some(worker) if worker.pool == pool => worker,
        _ => return spawn_in(pool, registry, f),
    };
    let queue = &registry.fifos[worker.index];
    lock(queue).push_back(Box::new(f));
    registry.work_started();
    let status = sys::blz_spawn(pool, Some(run_fifo_front), queue as *const FifoQueue as *mut c_void, ptr::null_mut());
    if status != sys::BLZ_OK {
        // No task will take a closure: take one back (ours is the newest;
        // only this worker pushes to its queue) so the count stays one to one.
        let ours = lock(queue).pop_back();
        drop(ours);
        registry.work_finished();
        failed("spawn_fifo", status);
    }
}
