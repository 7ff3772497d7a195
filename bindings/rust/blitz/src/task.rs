use std::fmt;
use std::os::raw::c_void;
use std::panic::{self, AssertUnwindSafe};
use std::ptr;
use std::thread;

use blitz_sys as sys;

use crate::error::PanicPayload;
use crate::Error;

type Outcome<T> = Option<thread::Result<T>>;

/// A spawned closure and its outcome, in one allocation. `outcome` comes
/// first (repr(C)) so that the handle can reach it without knowing `F`.
#[repr(C)]
struct SpawnJob<F, T> {
    outcome: Outcome<T>,
    f: Option<F>,
}

unsafe extern "C" fn execute<F: FnOnce() -> T, T>(arg: *mut c_void) {
    // SAFETY: arg is the job spawn made; the handle reads it only after
    // blz_join returned, which is after this function returned.
    let job = &mut *(arg as *mut SpawnJob<F, T>);
    if let Some(f) = job.f.take() {
        job.outcome = Some(panic::catch_unwind(AssertUnwindSafe(f)));
    }
}

unsafe fn free<F, T>(outcome: *mut Outcome<T>) {
    drop(Box::from_raw(outcome as *mut SpawnJob<F, T>));
}

/// The handle of a task started by [`ThreadPool::spawn`](crate::ThreadPool::spawn).
///
/// [`join`](JoinHandle::join) waits for the task and returns its value.
/// Dropping the handle without joining also waits for the task (the C
/// handle must be joined once), like the handles of `std::thread::scope`.
/// The handle stays valid after its pool was dropped.
#[must_use = "dropping a JoinHandle waits for the task; join it to get its value"]
pub struct JoinHandle<T> {
    task: *mut sys::blz_task,
    outcome: *mut Outcome<T>,
    free: unsafe fn(*mut Outcome<T>),
    /// Why the task was not started, when it was not.
    refused: Option<Error>,
}

// SAFETY: the task's value is sent to the thread that joins; blz_join may
// be called from any thread.
unsafe impl<T: Send> Send for JoinHandle<T> {}

impl<T> JoinHandle<T> {
    /// # Safety
    /// `pool` is a live pool.
    pub(crate) unsafe fn spawn<F>(pool: *mut sys::blz_pool, f: F) -> JoinHandle<T>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let job = Box::into_raw(Box::new(SpawnJob::<F, T> { outcome: None, f: Some(f) }));
        let mut task = ptr::null_mut();
        let status = sys::blz_spawn(pool, Some(execute::<F, T>), job as *mut c_void, &mut task);
        let outcome = job as *mut Outcome<T>;
        match Error::check(status) {
            Ok(()) => JoinHandle { task, outcome, free: free::<F, T>, refused: None },
            Err(error) => {
                // The task will not run: free the closure now, report at join.
                free::<F, T>(outcome);
                JoinHandle { task: ptr::null_mut(), outcome: ptr::null_mut(), free: free::<F, T>, refused: Some(error) }
            }
        }
    }

    /// Waits for the task and returns its value.
    ///
    /// A worker of the task's pool runs other jobs of its pool while it
    /// waits. Errors: [`Error::TaskPanicked`] with the panic's payload if the
    /// task panicked; the error that kept the task from starting
    /// ([`Error::OutOfMemory`], [`Error::Forked`]); [`Error::WouldDeadlock`]
    /// if called from inside the task itself (the task's memory is then
    /// leaked, as it is still running).
    pub fn join(mut self) -> Result<T, Error> {
        self.wait()
    }

    fn wait(&mut self) -> Result<T, Error> {
        if let Some(error) = self.refused.take() {
            return Err(error);
        }
        if self.task.is_null() {
            return Err(Error::InvalidArgument); // already joined
        }
        let task = std::mem::replace(&mut self.task, ptr::null_mut());
        // SAFETY: the task handle is joined exactly once (it is nulled above).
        let status = unsafe { sys::blz_join(task) };
        if status == sys::BLZ_EDEADLK || status == sys::BLZ_EINVAL {
            // The task still runs and will write its outcome: leak it.
            self.outcome = ptr::null_mut();
            return Err(Error::check(status).unwrap_err());
        }
        // SAFETY: the task has finished (or, after fork, will never run):
        // its outcome is ours, and so is the job's memory.
        let outcome = unsafe {
            let outcome = (*self.outcome).take();
            (self.free)(self.outcome);
            self.outcome = ptr::null_mut();
            outcome
        };
        match outcome {
            Some(Ok(value)) => Ok(value),
            Some(Err(payload)) => Err(Error::TaskPanicked(Some(PanicPayload::new(payload)))),
            None => Err(Error::check(status).err().unwrap_or(Error::Unknown(status))),
        }
    }
}

impl<T> Drop for JoinHandle<T> {
    fn drop(&mut self) {
        if !self.task.is_null() {
            if let Err(Error::TaskPanicked(Some(payload))) = self.wait() {
                crate::job::drop_payload(payload.into_inner());
            }
        }
    }
}

impl<T> fmt::Debug for JoinHandle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JoinHandle").field("refused", &self.refused).finish_non_exhaustive()
    }
}
