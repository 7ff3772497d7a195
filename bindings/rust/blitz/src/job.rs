//! Closures turned into C jobs. Every trampoline catches the closure's panic
//! (no unwind ever crosses the C boundary) and keeps it for the thread that
//! waits, which resumes it.
use std::any::Any;
use std::cell::Cell;
use std::mem::MaybeUninit;
use std::os::raw::c_void;
use std::panic::{self, AssertUnwindSafe};
use std::ptr;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::thread;

use blitz_sys as sys;

/// Tells libblitz that the job the calling worker runs failed, after its
/// panic was caught: the C call that waits for it returns `BLZ_ETASK`,
/// `tasks_failed` counts it, and a fail-fast scope it works for is
/// cancelled at once, while the panic itself still has to travel up to the
/// scope's task through every `join` on the way.
#[cold]
pub(crate) fn fail() {
    // SAFETY: no precondition; outside a job it does nothing.
    unsafe { sys::blz_fail() }
}

/// Drops a panic payload whose destructor might itself panic.
pub(crate) fn drop_payload(payload: Box<dyn Any + Send>) {
    if let Err(again) = panic::catch_unwind(AssertUnwindSafe(move || drop(payload))) {
        std::mem::forget(again);
    }
}

/// A closure and the slots for its outcome, both in the waiting caller's
/// stack frame: the caller does not return before the job has run.
///
/// The value and the panic have separate, uninitialised slots and a state
/// byte says which one the trampoline wrote (rather than one
/// `Option<thread::Result<R>>`), because this is the hot path of every
/// join: the caller reads the value with loads as wide as the stores that
/// wrote it (copying a whole enum can become one 16-byte load after 8-byte
/// stores, which store-to-load forwarding cannot serve), and nothing is
/// written for the panic on the common path. bench/rust-join measures what
/// remains of the difference to the raw `blz_fork_join`.
pub(crate) struct StackJob<F, R> {
    f: Option<F>,
    state: u8,
    value: MaybeUninit<R>,
    panic: MaybeUninit<Box<dyn Any + Send + 'static>>,
}

const NOT_RUN: u8 = 0;
const RETURNED: u8 = 1;
const PANICKED: u8 = 2;

impl<F: FnOnce() -> R, R> StackJob<F, R> {
    #[inline]
    pub(crate) fn new(f: F) -> Self {
        StackJob { f: Some(f), state: NOT_RUN, value: MaybeUninit::uninit(), panic: MaybeUninit::uninit() }
    }

    /// The C function that runs `arg`, a `*mut StackJob<F, R>`.
    #[inline]
    pub(crate) fn c_fn() -> sys::blz_fn {
        Some(Self::execute)
    }

    #[inline]
    pub(crate) fn c_arg(&mut self) -> *mut c_void {
        self as *mut Self as *mut c_void
    }

    #[inline]
    pub(crate) unsafe extern "C" fn execute(arg: *mut c_void) {
        // SAFETY: arg is the StackJob the waiting caller passed; it is alive
        // until the C call that runs us returns, and only we touch it meanwhile.
        let job = &mut *(arg as *mut Self);
        if let Some(f) = job.f.take() {
            match panic::catch_unwind(AssertUnwindSafe(f)) {
                Ok(value) => {
                    job.value = MaybeUninit::new(value);
                    job.state = RETURNED;
                }
                Err(payload) => {
                    job.panic = MaybeUninit::new(payload);
                    job.state = PANICKED;
                    fail();
                }
            }
        }
    }

    /// The closure's value or its panic; None if it never ran.
    #[inline]
    pub(crate) fn into_result(self) -> Option<thread::Result<R>> {
        // SAFETY: the state says which slot execute wrote; each is read once
        // (MaybeUninit never drops what it holds).
        match self.state {
            RETURNED => Some(Ok(unsafe { self.value.as_ptr().read() })),
            PANICKED => Some(Err(unsafe { self.panic.as_ptr().read() })),
            _ => None,
        }
    }
}

/// Runs `a` and `b` through `blz_fork_join` on `pool` and returns both
/// values; resumes `a`'s panic first, then `b`'s (both always ran).
///
/// # Safety
/// `pool` is a live pool.
#[inline(always)]
pub(crate) unsafe fn fork_join<A, B, RA, RB>(pool: *mut sys::blz_pool, a: A, b: B) -> (RA, RB)
where
    A: FnOnce() -> RA + Send,
    B: FnOnce() -> RB + Send,
    RA: Send,
    RB: Send,
{
    let stack = current_fork_stack();
    if !stack.is_null() && (*stack).pool == pool as *const sys::blz_pool {
        return fork_join_inline(stack, a, b);
    }
    let mut job_a = StackJob::new(a);
    let mut job_b = StackJob::new(b);
    let status =
        sys::blz_fork_join(pool, StackJob::<A, RA>::c_fn(), job_a.c_arg(), StackJob::<B, RB>::c_fn(), job_b.c_arg());
    join_results(status, job_a.into_result(), job_b.into_result())
}

thread_local! {
    /// Where libblitz keeps this thread's `blz_fork_stack_v1` (blitz.h): its
    /// address is fixed for the thread's life, and stable Rust cannot name
    /// another library's thread-local, so it is asked for once per thread.
    static FORK_STACK_SLOT: Cell<*mut *mut sys::blz_fork_stack> = const { Cell::new(ptr::null_mut()) };
}

/// The calling thread's fork stack while it is a worker (of any pool), else null.
#[inline(always)]
fn current_fork_stack() -> *mut sys::blz_fork_stack {
    let slot = FORK_STACK_SLOT.with(|cell| {
        let slot = cell.get();
        if !slot.is_null() {
            return slot;
        }
        // SAFETY: no precondition; the address stays valid for the thread's life.
        let slot = unsafe { sys::blz_fork_stack_slot_v1() };
        cell.set(slot);
        slot
    });
    // SAFETY: the slot is this thread's, written only by this thread (inside libblitz).
    unsafe { *slot }
}

/// `fork_join` on a worker of the pool, compiled into the caller: blitz.h's
/// inline fork path (steps 1 to 4). When nobody asked for work, `b` waits
/// as a pending frame that costs two stores to push and a load and a store
/// to pop, and both closures are direct calls.
///
/// # Safety
/// `stack` is the calling thread's fork stack (`current_fork_stack`).
#[inline(always)]
unsafe fn fork_join_inline<A, B, RA, RB>(stack: *mut sys::blz_fork_stack, a: A, b: B) -> (RA, RB)
where
    A: FnOnce() -> RA + Send,
    B: FnOnce() -> RB + Send,
    RA: Send,
    RB: Send,
{
    let mut job_b = StackJob::new(b);
    // What a thief runs if b is promoted; `job` is the library's, left uninitialised.
    let mut frame = MaybeUninit::<sys::blz_fork_frame>::uninit();
    let frame_ptr = frame.as_mut_ptr();
    ptr::addr_of_mut!((*frame_ptr).r#fn).write(StackJob::<B, RB>::c_fn());
    ptr::addr_of_mut!((*frame_ptr).arg).write(job_b.c_arg());
    let failures_before = *(*stack).failures;

    // Step 1: push.
    let depth = (*stack).depth;
    // Relaxed: `requests` is a hint other workers set (blitz.h).
    let requests = &*(ptr::addr_of!((*stack).requests) as *const AtomicU32);
    let pushed = if depth < (*stack).capacity && requests.load(Ordering::Relaxed) == 0 {
        *(*stack).frames.add(depth as usize) = frame_ptr;
        (*stack).depth = depth + 1;
        true
    } else {
        sys::blz_fork_push_v1(stack, frame_ptr) != 0
    };

    // Step 2: a, its panic kept for later (and reported, as a trampoline would).
    let result_a = panic::catch_unwind(AssertUnwindSafe(a));
    if result_a.is_err() {
        fail();
    }

    // Step 3: pop; b runs here unless it was promoted.
    let mut ok = true;
    let newest = (*stack).depth.wrapping_sub(1);
    if !pushed {
        StackJob::<B, RB>::execute(job_b.c_arg());
    } else if newest >= (*stack).promoted {
        (*stack).depth = newest;
        // Relaxed load and store: only this thread writes it; statistics read it.
        let jobs = &*(ptr::addr_of!((*stack).jobs_executed) as *const AtomicU64);
        jobs.store(jobs.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
        StackJob::<B, RB>::execute(job_b.c_arg());
    } else {
        ok = sys::blz_fork_join_v1(stack, frame_ptr) == 1;
    }

    // Step 4: a blz_fail (or a panic reported as one) in either half.
    if *(*stack).failures != failures_before {
        sys::blz_fork_failed_v1(stack, failures_before);
        ok = false;
    }
    let status = if ok { sys::BLZ_OK } else { sys::BLZ_ETASK };
    join_results(status, Some(result_a), job_b.into_result())
}

#[inline]
pub(crate) fn join_results<RA, RB>(
    status: sys::blz_status,
    a: Option<thread::Result<RA>>,
    b: Option<thread::Result<RB>>,
) -> (RA, RB) {
    match (a, b) {
        (Some(Ok(a)), Some(Ok(b))) => (a, b),
        (Some(Err(payload)), b) => {
            if let Some(Err(other)) = b {
                drop_payload(other);
            }
            panic::resume_unwind(payload)
        }
        (_, Some(Err(payload))) => panic::resume_unwind(payload),
        _ => failed("join", status),
    }
}

/// Runs `op` on a worker of `pool` through `blz_call` and returns its value
/// or resumes its panic.
///
/// # Safety
/// `pool` is a live pool.
pub(crate) unsafe fn call<OP, R>(pool: *mut sys::blz_pool, op: OP) -> R
where
    OP: FnOnce() -> R + Send,
    R: Send,
{
    let mut job = StackJob::new(op);
    let status = sys::blz_call(pool, StackJob::<OP, R>::c_fn(), job.c_arg());
    match job.into_result() {
        Some(Ok(value)) => value,
        Some(Err(payload)) => panic::resume_unwind(payload),
        None => failed("install", status),
    }
}

/// Runs `op` through `blz_isolate` (as [`call`] through `blz_call`): every
/// wait inside `op` runs only work forked or spawned inside it.
///
/// # Safety
/// `pool` is a live pool.
pub(crate) unsafe fn isolate<OP, R>(pool: *mut sys::blz_pool, op: OP) -> R
where
    OP: FnOnce() -> R + Send,
    R: Send,
{
    let mut job = StackJob::new(op);
    let status = sys::blz_isolate(pool, StackJob::<OP, R>::c_fn(), job.c_arg());
    match job.into_result() {
        Some(Ok(value)) => value,
        Some(Err(payload)) => panic::resume_unwind(payload),
        None => failed("isolate", status),
    }
}

/// A call whose work never ran: only in a forked child (`BLZ_EFORK`) or on
/// a pool being destroyed, which a live `&ThreadPool` excludes.
#[cold]
pub(crate) fn failed(what: &str, status: sys::blz_status) -> ! {
    let error = crate::Error::check(status).err().unwrap_or(crate::Error::Unknown(status));
    panic!("blitz: {} did not run its closures: {}", what, error)
}

/// What [`join_context`](crate::join_context) tells each closure.
#[derive(Debug)]
pub struct FnContext {
    migrated: bool,
    /// Neither `Send` nor `Sync`: it describes the thread it was made on.
    _marker: std::marker::PhantomData<*mut ()>,
}

impl FnContext {
    /// Whether the closure runs on another thread than the one that called
    /// `join_context`: `b` stolen by another worker, or either closure of a
    /// call made outside any pool (which moved both into the global pool).
    #[inline]
    pub fn migrated(&self) -> bool {
        self.migrated
    }
}

/// A number that differs between threads alive at the same time: the
/// address of a thread-local.
#[inline]
fn thread_marker() -> usize {
    thread_local!(static MARKER: u8 = const { 0 });
    MARKER.with(|m| m as *const u8 as usize)
}

/// [`join`](crate::join()), telling each closure whether it
/// [migrated](FnContext::migrated) to another thread.
///
/// ```
/// let pool = blitz::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
/// let (a, b) = pool.install(|| blitz::join_context(|a| a.migrated(), |b| b.migrated()));
/// assert_eq!((a, b), (false, false)); // one worker: nobody could steal `b`
/// let (a, b) = blitz::join_context(|a| a.migrated(), |b| b.migrated());
/// assert_eq!((a, b), (true, true));   // from outside: both moved into the global pool
/// ```
pub fn join_context<A, B, RA, RB>(a: A, b: B) -> (RA, RB)
where
    A: FnOnce(FnContext) -> RA + Send,
    B: FnOnce(FnContext) -> RB + Send,
    RA: Send,
    RB: Send,
{
    let caller = thread_marker();
    let context = move || FnContext { migrated: thread_marker() != caller, _marker: std::marker::PhantomData };
    crate::join(move || a(context()), move || b(context()))
}
