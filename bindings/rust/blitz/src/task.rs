use std::cell::{Cell, UnsafeCell};
use std::fmt;
use std::future::Future;
use std::os::raw::c_void;
use std::panic::{self, AssertUnwindSafe};
use std::pin::Pin;
use std::ptr;
use std::sync::atomic::{self, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::task::{Context, Poll, Waker};
use std::thread;
use std::time::Duration;

use blitz_sys as sys;

use crate::error::PanicPayload;
use crate::job::{drop_payload, fail};
use crate::registry::{lock, with_worker_registry, Registry};
use crate::Error;

type Outcome<T> = Option<thread::Result<T>>;

/// The part of a spawned job that the handle uses, first in the job
/// (repr(C)) so that the handle can reach it without knowing the closure's type.
#[repr(C)]
struct Shared<T> {
    /// Who still holds the job: the task until its on_done ran (which
    /// libblitz calls for every accepted task, also one a cancel skipped),
    /// and the handle until it took the outcome or let go. The last one
    /// frees the job, so that a detached task frees its own memory and a
    /// handle that outlives its task still finds the outcome.
    owners: AtomicUsize,
    /// Written by the trampoline; read by the handle only after libblitz
    /// said the task finished, which orders the two. None: never ran.
    outcome: UnsafeCell<Outcome<T>>,
    /// What a poll of the handle as a Future and the task's on_done tell
    /// each other (see `WakeState`).
    wake: Mutex<WakeState>,
}

/// The hand-off between `poll` and `task_done`, under one mutex so that a
/// waker stored by a poll is either seen by `task_done` or the poll sees
/// `finished` (no lost wake-up, whichever comes first).
#[derive(Default)]
struct WakeState {
    /// Set by `task_done`, which runs after the task finished
    /// (BLZ_SPAWN_DONE_AFTER_FINISH): from then on a join returns at once.
    finished: bool,
    /// The waker of the last poll that found the task unfinished.
    waker: Option<Waker>,
}

#[repr(C)]
struct SpawnJob<F, T> {
    shared: Shared<T>,
    /// Taken by the trampoline; nothing else touches it. Still there when a
    /// cancel skipped the task: dropped with the job.
    f: UnsafeCell<Option<F>>,
}

unsafe extern "C" fn execute<F: FnOnce() -> T, T>(arg: *mut c_void) {
    // SAFETY: arg is the job spawn made, alive while the task owns a share
    // (until task_done). Only shared references: the handle may touch
    // `owners` meanwhile.
    let job = arg as *const SpawnJob<F, T>;
    if let Some(f) = (*(*job).f.get()).take() {
        let result = panic::catch_unwind(AssertUnwindSafe(f));
        let panicked = result.is_err();
        *(*job).shared.outcome.get() = Some(result);
        if panicked {
            fail();
        }
    }
}

/// The task's on_done: after `execute`, or instead of it when a cancel
/// skipped the task. It gives up the task's share of the job.
unsafe extern "C" fn task_done<F: FnOnce() -> T, T>(arg: *mut c_void, _status: sys::blz_status) {
    // If the handle let go, this frees the job and drops the value, the
    // panic payload or the closure that never ran here, on the worker;
    // none of them may unwind into C.
    // The wake comes first: the job is alive until our share is given up.
    // A waker's wake may run the executor's code, which may panic.
    let job = arg as *const SpawnJob<F, T>;
    let end = || {
        let waker = {
            let mut state = lock(&(*job).shared.wake);
            state.finished = true;
            state.waker.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
        release::<F, T>(job as *const Shared<T>)
    };
    if let Err(payload) = panic::catch_unwind(AssertUnwindSafe(end)) {
        std::mem::forget(payload);
    }
    // Last: the pool may be released from here on (see Registry::work).
    with_worker_registry(Registry::work_finished);
}

/// Gives up one share of the job; the last one frees it.
unsafe fn release<F, T>(shared: *const Shared<T>) {
    // Release/Acquire as in Arc: whoever frees the job sees every write
    // the other owner made to it.
    if (*shared).owners.fetch_sub(1, Ordering::Release) != 1 {
        return;
    }
    atomic::fence(Ordering::Acquire);
    drop(Box::from_raw(shared as *mut SpawnJob<F, T>));
}

/// The handle of a task started by [`ThreadPool::spawn_with_handle`](crate::ThreadPool::spawn_with_handle).
///
/// [`join`](JoinHandle::join) waits for the task and returns its value;
/// [`is_finished`](JoinHandle::is_finished) asks without waiting,
/// [`join_timeout`](JoinHandle::join_timeout) waits at most so long, and
/// [`detach`](JoinHandle::detach) lets the task run on without a handle.
/// Dropping the handle without any of these waits for the task, like the
/// handles of `std::thread::scope`. The handle stays valid after its pool
/// was dropped.
///
/// The handle is also a [`Future`] of what `join` returns, for any
/// executor: a poll never blocks (it only registers the waker, or takes the
/// value of a finished task), and the task's end wakes the waker of the
/// latest poll from the worker that ran it. Dropping a handle that was
/// polled but is not ready still waits for the task, as above: to let an
/// async caller walk away, [`detach`](JoinHandle::detach) it, or use
/// [`ThreadPool::spawn_future`](crate::ThreadPool::spawn_future), whose
/// future detaches when dropped.
#[must_use = "dropping a JoinHandle waits for the task; join it to get its value, or detach it"]
pub struct JoinHandle<T> {
    /// The C handle until a wait saw the task finish (libblitz freed it
    /// then) or it was given up; null from the start if the spawn was refused.
    task: Cell<*mut sys::blz_task>,
    /// The status of the wait that saw the task finish.
    status: Cell<sys::blz_status>,
    /// The handle's share of the job; null once given up.
    shared: *const Shared<T>,
    release: unsafe fn(*const Shared<T>),
    /// Why the task was not started, when it was not.
    refused: Option<Error>,
}

// SAFETY: the task's value is sent to the thread that joins, and the job
// may be freed on a worker (T: Send); every libblitz function may be called
// from any thread. Not Sync: `is_finished` takes `&self` and changes the
// Cells, and libblitz allows one thread at a time to wait for a task.
unsafe impl<T: Send> Send for JoinHandle<T> {}

impl<T> JoinHandle<T> {
    /// # Safety
    /// `pool` is a live pool; `registry` is its Registry.
    pub(crate) unsafe fn spawn<F>(pool: *mut sys::blz_pool, registry: &Registry, f: F) -> JoinHandle<T>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let job = Box::into_raw(Box::new(SpawnJob::<F, T> {
            shared: Shared {
                owners: AtomicUsize::new(2),
                outcome: UnsafeCell::new(None),
                wake: Mutex::new(WakeState::default()),
            },
            f: UnsafeCell::new(Some(f)),
        }));
        let mut task = ptr::null_mut();
        registry.work_started();
        let mut options = std::mem::MaybeUninit::<sys::blz_spawn_options>::uninit();
        sys::blz_spawn_options_init(options.as_mut_ptr());
        let mut options = options.assume_init();
        options.on_done = Some(task_done::<F, T>);
        options.done_arg = job as *mut c_void;
        // on_done after the end: when it wakes a poll, that poll's join
        // returns at once (and a wake run inline may join without EDEADLK).
        options.flags = sys::BLZ_SPAWN_DONE_AFTER_FINISH;
        let status = sys::blz_spawn_ex(pool, Some(execute::<F, T>), job as *mut c_void, &options, &mut task);
        let mut handle = JoinHandle {
            task: Cell::new(ptr::null_mut()),
            status: Cell::new(sys::BLZ_OK),
            shared: ptr::null(),
            release: release::<F, T>,
            refused: None,
        };
        match Error::check(status) {
            Ok(()) => {
                handle.task.set(task);
                handle.shared = job as *const Shared<T>;
            }
            Err(error) => {
                // The task will not run: free the closure now, report at join.
                drop(Box::from_raw(job));
                registry.work_finished();
                handle.refused = Some(error);
            }
        }
        handle
    }

    /// Waits for the task and returns its value.
    ///
    /// A worker of the task's pool runs other jobs of its pool while it
    /// waits. Errors: [`Error::TaskPanicked`] with the panic's payload if the
    /// task panicked; the error that kept the task from starting
    /// ([`Error::OutOfMemory`], [`Error::Forked`]); [`Error::WouldDeadlock`]
    /// if called from inside the task itself (the task then runs on as if
    /// detached).
    pub fn join(mut self) -> Result<T, Error> {
        if let Some(error) = self.refused.take() {
            return Err(error);
        }
        match self.wait(u64::MAX) {
            Ok(true) => self.take_result(),
            Ok(false) => unreachable!("blz_join does not time out"),
            Err(error) => {
                self.let_go();
                Err(error)
            }
        }
    }

    /// Whether the task has finished, so that [`join`](JoinHandle::join)
    /// would return at once; asked without blocking. Also `true` for a task
    /// that never started (its `join` returns the error at once), and
    /// `false` when asked from inside the task itself.
    ///
    /// ```
    /// # let pool = blitz::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
    /// let (go, wait) = std::sync::mpsc::channel::<()>();
    /// let handle = pool.spawn_with_handle(move || {
    ///     wait.recv().unwrap(); // held until the send below
    ///     7
    /// });
    /// assert!(!handle.is_finished());
    /// go.send(()).unwrap();
    /// while !handle.is_finished() {
    ///     std::thread::yield_now();
    /// }
    /// assert_eq!(handle.join()?, 7); // does not block now
    /// # Ok::<(), blitz::Error>(())
    /// ```
    pub fn is_finished(&self) -> bool {
        self.refused.is_some() || matches!(self.wait(0), Ok(true))
    }

    /// Waits at most `timeout` for the task: `Ok` with what
    /// [`join`](JoinHandle::join) returns if it finished in time, else
    /// `Err` with the handle itself, to wait again, join or detach.
    /// `Duration::ZERO` only looks.
    ///
    /// The handle comes back rather than an [`Error::TimedOut`] because the
    /// task still runs and its value is still to come: this way no value
    /// can be lost, and no handle can be left in a state where joining it
    /// again is an error.
    ///
    /// From a thread outside the pool the wait blocks at most about
    /// `timeout`. A worker of the task's pool runs other jobs while it
    /// waits, as in `join`, and a job it runs is not interrupted, so its
    /// wait can end later than `timeout`.
    ///
    /// ```
    /// use std::time::Duration;
    /// # let pool = blitz::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
    /// let (go, wait) = std::sync::mpsc::channel::<()>();
    /// let handle = pool.spawn_with_handle(move || {
    ///     wait.recv().unwrap(); // held until the send below
    ///     7
    /// });
    /// let handle = match handle.join_timeout(Duration::from_millis(10)) {
    ///     Ok(_) => unreachable!("the task waits for the send below"),
    ///     Err(handle) => handle, // still running: the handle comes back
    /// };
    /// go.send(()).unwrap();
    /// let value = handle.join_timeout(Duration::from_secs(600)).expect("finished in time")?;
    /// assert_eq!(value, 7);
    /// # Ok::<(), blitz::Error>(())
    /// ```
    pub fn join_timeout(mut self, timeout: Duration) -> Result<Result<T, Error>, JoinHandle<T>> {
        if let Some(error) = self.refused.take() {
            return Ok(Err(error));
        }
        // u64::MAX nanoseconds (585 years) is libblitz's "no bound".
        let timeout_ns = u64::try_from(timeout.as_nanos()).unwrap_or(u64::MAX);
        match self.wait(timeout_ns) {
            Ok(true) => Ok(self.take_result()),
            Ok(false) => Err(self),
            Err(error) => {
                self.let_go();
                Ok(Err(error))
            }
        }
    }

    /// Asks the task to stop (`blz_task_cancel`): a task that has not
    /// started yet never runs, and [`join`](JoinHandle::join) then returns
    /// [`Error::Cancelled`]; a running one is not interrupted, but
    /// [`is_cancelled`](crate::is_cancelled) is `true` in it from now on, so
    /// it may return early, and its parallel loops stop starting pieces.
    /// Nothing happens to a task that already finished. The handle stays
    /// to be joined or detached as before.
    ///
    /// ```
    /// # let pool = blitz::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
    /// let (go, wait) = std::sync::mpsc::channel::<()>();
    /// let busy = pool.spawn_with_handle(move || wait.recv().unwrap()); // the only worker, held
    /// let queued = pool.spawn_with_handle(|| 7);
    /// queued.cancel();
    /// go.send(()).unwrap();
    /// busy.join()?;
    /// assert!(matches!(queued.join(), Err(blitz::Error::Cancelled)));
    /// # Ok::<(), blitz::Error>(())
    /// ```
    pub fn cancel(&self) {
        let task = self.task.get();
        if !task.is_null() {
            // SAFETY: the C handle is valid until a wait saw the task finish
            // (then it is null here); the handle is not Sync.
            unsafe { sys::blz_task_cancel(task) };
        }
    }

    /// Lets the task run on without a handle: nobody waits for it (but
    /// the end of its pool does), its value is dropped on the worker that ran
    /// it, and a panic in it is dropped there too (after the panic hook
    /// printed it). The task's memory is freed when it ends.
    ///
    /// ```
    /// # let pool = blitz::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// pool.spawn_with_handle(move || tx.send(42).unwrap()).detach();
    /// assert_eq!(rx.recv().unwrap(), 42);
    /// ```
    pub fn detach(mut self) {
        self.let_go();
    }

    /// Waits up to `timeout_ns` (`u64::MAX`: for ever, as `blz_join`).
    /// Ok(true): finished, the status kept and the C handle gone; Ok(false):
    /// not yet; Err: refused, nothing changed.
    fn wait(&self, timeout_ns: u64) -> Result<bool, Error> {
        let task = self.task.get();
        if task.is_null() {
            return Ok(true);
        }
        // SAFETY: the C handle is valid until a wait returns something
        // other than ETIMEDOUT, EDEADLK or EINVAL, and then is nulled here;
        // the handle is not Sync, so no other thread waits at once.
        let status = unsafe {
            if timeout_ns == u64::MAX {
                sys::blz_join(task)
            } else {
                sys::blz_task_wait_for(task, timeout_ns)
            }
        };
        match status {
            sys::BLZ_ETIMEDOUT => Ok(false),
            sys::BLZ_EDEADLK | sys::BLZ_EINVAL => Err(Error::check(status).unwrap_err()),
            _ => {
                self.task.set(ptr::null_mut());
                self.status.set(status);
                Ok(true)
            }
        }
    }

    /// The finished task's value or error; gives up the handle's share.
    fn take_result(&mut self) -> Result<T, Error> {
        let status = self.status.get();
        let shared = std::mem::replace(&mut self.shared, ptr::null());
        if shared.is_null() {
            return Err(Error::InvalidArgument); // already taken
        }
        if status == sys::BLZ_EFORK {
            // In a child forked while the task may have been running in the
            // parent: the job may be half written. Leaked, not read.
            return Err(Error::Forked);
        }
        // SAFETY: the task finished, so its trampoline wrote the outcome
        // (or was skipped by a cancel: None); the job is alive until our
        // share is given up below.
        let outcome = unsafe {
            let outcome = (*(*shared).outcome.get()).take();
            (self.release)(shared);
            outcome
        };
        match outcome {
            Some(Ok(value)) => Ok(value),
            Some(Err(payload)) => Err(Error::TaskPanicked(Some(PanicPayload::new(payload)))),
            None => Err(Error::check(status).err().unwrap_or(Error::Unknown(status))),
        }
    }

    /// Gives up the C handle and the handle's share without waiting.
    fn let_go(&mut self) {
        let task = self.task.replace(ptr::null_mut());
        if !task.is_null() {
            // SAFETY: the C handle is valid (see wait) and given up once.
            // Allowed from inside the task itself too; it refuses only while
            // another thread waits for the task, which a !Sync handle excludes.
            unsafe { sys::blz_task_detach(task) };
            let shared = std::mem::replace(&mut self.shared, ptr::null());
            if !shared.is_null() {
                // Nobody polls any more: the executor's waker is dropped
                // here rather than kept until the task ends.
                // SAFETY: our share keeps the job alive until released below.
                let waker = unsafe { lock(&(*shared).wake).waker.take() };
                drop(waker);
                // SAFETY: our share, given up once; the task frees the job if
                // it is still running.
                unsafe { (self.release)(shared) };
            }
        } else if !self.shared.is_null() {
            // Finished: the outcome is ours to drop, here.
            self.drop_result();
        }
    }

    fn drop_result(&mut self) {
        if let Err(Error::TaskPanicked(Some(payload))) = self.take_result() {
            drop_payload(payload.into_inner());
        }
    }
}

impl<T> Future for JoinHandle<T> {
    type Output = Result<T, Error>;

    /// Ready with what [`join`](JoinHandle::join) would return once the
    /// task has finished; else stores the waker (replacing the one of an
    /// earlier poll) and returns `Pending`. Never blocks. Polling again
    /// after `Ready` gives `Err(Error::InvalidArgument)`.
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        if let Some(error) = this.refused.take() {
            return Poll::Ready(Err(error));
        }
        if !this.task.get().is_null() && !this.shared.is_null() {
            // SAFETY: the handle's share keeps the job alive.
            let mut state = lock(unsafe { &(*this.shared).wake });
            if !state.finished {
                if !matches!(&state.waker, Some(waker) if waker.will_wake(cx.waker())) {
                    state.waker = Some(cx.waker().clone());
                }
                return Poll::Pending;
            }
            drop(state);
            // on_done ran after the task finished: this join returns at once.
            if let Err(error) = this.wait(u64::MAX) {
                this.let_go();
                return Poll::Ready(Err(error));
            }
        }
        Poll::Ready(this.take_result())
    }
}

impl<T> Drop for JoinHandle<T> {
    fn drop(&mut self) {
        if self.shared.is_null() {
            return;
        }
        if !self.task.get().is_null() && self.wait(u64::MAX).is_err() {
            // Dropped inside the task itself: waiting would deadlock.
            self.let_go();
            return;
        }
        self.drop_result();
    }
}

impl<T> fmt::Debug for JoinHandle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JoinHandle").field("refused", &self.refused).finish_non_exhaustive()
    }
}

/// The future of [`ThreadPool::spawn_future`](crate::ThreadPool::spawn_future)
/// (and [`spawn_future`](crate::spawn_future)): the closure's value once
/// the task has run.
///
/// A panic of the closure is resumed in the poll that finds it, as
/// [`join`](crate::join) resumes one. Dropping the future before it is
/// ready lets the task run on, detached: the value is then dropped on the
/// worker. Polling never blocks, and the task's end wakes the latest
/// poll's waker, so any executor can drive it.
#[must_use = "a SpawnFuture does nothing unless polled; the task runs anyway"]
pub struct SpawnFuture<T> {
    /// None once ready.
    handle: Option<JoinHandle<T>>,
}

impl<T> SpawnFuture<T> {
    pub(crate) fn new(handle: JoinHandle<T>) -> Self {
        SpawnFuture { handle: Some(handle) }
    }
}

impl<T> Future for SpawnFuture<T> {
    type Output = T;

    /// # Panics
    /// With the closure's panic; if the task could not be started (as
    /// [`spawn`](crate::spawn) panics then); if polled again after `Ready`.
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        let handle = self.handle.as_mut().expect("blitz: SpawnFuture polled after it was ready");
        let result = match Pin::new(handle).poll(cx) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(result) => result,
        };
        self.handle = None;
        match result {
            Ok(value) => Poll::Ready(value),
            Err(Error::TaskPanicked(Some(payload))) => panic::resume_unwind(payload.into_inner()),
            Err(error) => panic!("blitz: spawn_future's closure did not run: {}", error),
        }
    }
}

impl<T> Drop for SpawnFuture<T> {
    fn drop(&mut self) {
        if let Some(handle) = self.handle.take() {
            handle.detach();
        }
    }
}

impl<T> fmt::Debug for SpawnFuture<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SpawnFuture").field("ready", &self.handle.is_none()).finish()
    }
}
