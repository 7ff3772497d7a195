use std::any::Any;
use std::fmt;
use std::marker::PhantomData;
use std::os::raw::c_void;
use std::panic::{self, AssertUnwindSafe};
use std::ptr;
use std::sync::Mutex;

use blitz_sys as sys;

use crate::job::{drop_payload, fail, failed};
use crate::Error;

/// A scope in which tasks borrowing from the enclosing stack frames can be
/// spawned; made by [`ThreadPool::scope`](crate::ThreadPool::scope), which
/// returns only when every task spawned in it has finished.
///
/// A task may borrow anything that outlives the `scope` call, and may spawn
/// more tasks in the same scope through the `&Scope` it is given:
///
/// ```
/// let pool = blitz::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
/// let data = vec![1, 2, 3, 4];
/// let mut left = 0;
/// let mut right = 0;
/// pool.scope(|s| {
///     s.spawn(|_| left = data[..2].iter().sum());
///     s.spawn(|s| {
///         s.spawn(|_| right = data[2..].iter().sum());   // nested: same scope
///     });
/// });
/// assert_eq!((left, right), (3, 7));
/// ```
///
/// What the borrow checker refuses, so that no task outlives what it borrows:
///
/// A task may not borrow a value that dies before the scope ends:
/// ```compile_fail,E0373
/// let pool = blitz::ThreadPoolBuilder::new().build().unwrap();
/// pool.scope(|s| {
///     let local = vec![1, 2, 3];
///     s.spawn(|_| println!("{:?}", local));   // `local` is dropped when `op` returns
/// });
/// ```
///
/// Naming a shorter lifetime for the scope does not help either (`Scope` is
/// invariant in it). The same lines compile when `local` outlives the scope:
/// ```
/// let pool = blitz::ThreadPoolBuilder::new().build().unwrap();
/// let local = 5;
/// pool.scope(|s| {
///     let shorter: &blitz::Scope<'_> = s;
///     shorter.spawn(|_| println!("{}", local));
/// });
/// ```
/// but not when it lives inside it (the error code differs between Rust
/// versions: E0373 in 1.63, E0597 in 1.95):
/// ```compile_fail
/// let pool = blitz::ThreadPoolBuilder::new().build().unwrap();
/// pool.scope(|s| {
///     let local = 5;
///     let shorter: &blitz::Scope<'_> = s;
///     shorter.spawn(|_| println!("{}", local));
/// });
/// ```
///
/// The `&Scope` cannot escape the closure:
/// ```compile_fail,E0521
/// let pool = blitz::ThreadPoolBuilder::new().build().unwrap();
/// let mut escaped = None;
/// pool.scope(|s| escaped = Some(s));
/// ```
///
/// Two tasks cannot both borrow a value mutably:
/// ```compile_fail,E0499
/// let pool = blitz::ThreadPoolBuilder::new().build().unwrap();
/// let mut v = Vec::new();
/// pool.scope(|s| {
///     s.spawn(|_| v.push(1));
///     s.spawn(|_| v.push(2));
/// });
/// ```
///
/// Nor can `op` change what a running task borrows:
/// ```compile_fail,E0506
/// let pool = blitz::ThreadPoolBuilder::new().build().unwrap();
/// let mut x = 1;
/// pool.scope(|s| {
///     s.spawn(|_| println!("{}", x));
///     x += 1;
/// });
/// ```
///
/// A task runs on another thread, so what it captures must be `Send`:
/// ```compile_fail,E0277
/// let pool = blitz::ThreadPoolBuilder::new().build().unwrap();
/// let rc = std::rc::Rc::new(5);
/// pool.scope(|s| {
///     s.spawn(move |_| println!("{}", rc));
/// });
/// ```
pub struct Scope<'scope> {
    group: *mut sys::blz_group,
    fail_fast: bool,
    /// The first panic of a task.
    panic: Mutex<Option<Box<dyn Any + Send + 'static>>>,
    /// Invariant in 'scope: a `Scope<'long>` is never a `Scope<'short>`,
    /// so a task cannot borrow something shorter-lived than the scope.
    marker: PhantomData<InvariantTask<'scope>>,
}

type InvariantTask<'scope> = Box<dyn FnOnce(&Scope<'scope>) + Send + Sync + 'scope>;

// SAFETY: blz_group_spawn may be called from any number of threads at
// once; the panic slot is behind a mutex.
unsafe impl Send for Scope<'_> {}
unsafe impl Sync for Scope<'_> {}

/// A task's closure; freed by `done`, which libblitz calls exactly once for
/// every accepted task, also one that a cancel skipped (its closure is then
/// dropped without running).
struct ScopeJob<'scope, BODY> {
    body: Option<BODY>,
    scope: *const Scope<'scope>,
}

impl<'scope> Scope<'scope> {
    /// Spawns `body` as a task of this scope. It runs on one of the pool's
    /// workers, gets this scope to spawn more tasks, and finishes before
    /// the `scope` call returns. A panic in it is kept and resumed by
    /// `scope` once every task has ended.
    ///
    /// In a cancelled scope (see [`Scope::cancel`]) the task is skipped:
    /// `body` is dropped without running, before `scope` returns.
    pub fn spawn<BODY>(&self, body: BODY)
    where
        BODY: FnOnce(&Scope<'scope>) + Send + 'scope,
    {
        let job = Box::into_raw(Box::new(ScopeJob { body: Some(body), scope: self as *const Scope<'scope> }));
        let opts = sys::blz_spawn_options {
            // What blz_spawn_options_init sets, without a call per spawn.
            struct_size: std::mem::size_of::<sys::blz_spawn_options>() as u32,
            flags: 0,
            group: self.group,
            on_done: Some(done::<BODY>),
            done_arg: job as *mut c_void,
        };
        // SAFETY: the group lives until every task of it has ended (scope::run
        // waits, and on_done runs before that wait returns); the job is freed
        // by `done`, or below if refused (then on_done is never called).
        let status = unsafe {
            sys::blz_spawn_ex(ptr::null_mut(), Some(execute::<BODY>), job as *mut c_void, &opts, ptr::null_mut())
        };
        if status != sys::BLZ_OK {
            // The task will not run: drop the closure here.
            drop(unsafe { Box::from_raw(job) });
            panic!("blitz: Scope::spawn: {}", Error::check(status).err().unwrap_or(Error::Unknown(status)));
        }
    }

    /// Cancels the scope: its tasks that have not started are skipped
    /// (dropped without running; one that another worker starts at the same
    /// moment may still run), and so are tasks spawned in it from now on.
    /// Running tasks are not interrupted; they can ask
    /// [`crate::is_cancelled`] (or [`Scope::is_cancelled`]) and return
    /// early. The `scope` call still waits for every running task, then
    /// returns `op`'s value as usual (or resumes a panic). Cancelling twice
    /// is the same as once; any thread may cancel.
    ///
    /// ```
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// let pool = blitz::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
    /// let ran = AtomicUsize::new(0);
    /// let found = pool.scope(|s| {
    ///     for i in 0..1000 {
    ///         let ran = &ran;
    ///         s.spawn(move |s| {
    ///             if blitz::is_cancelled() {
    ///                 return; // another task found it first
    ///             }
    ///             ran.fetch_add(1, Ordering::Relaxed);
    ///             if i == 10 {
    ///                 s.cancel(); // found: the tasks not started yet are skipped
    ///             }
    ///         });
    ///     }
    ///     "searched"
    /// });
    /// assert_eq!(found, "searched");
    /// assert!(ran.load(Ordering::Relaxed) >= 1);
    ///
    /// // Spawned into a cancelled scope: dropped without running.
    /// pool.scope(|s| {
    ///     s.cancel();
    ///     assert!(s.is_cancelled());
    ///     s.spawn(|_| unreachable!());
    /// });
    /// ```
    pub fn cancel(&self) {
        // SAFETY: the group is alive as long as the scope; BLZ_EINVAL only for NULL.
        unsafe { sys::blz_group_cancel(self.group) };
    }

    /// Whether the scope was cancelled, by [`Scope::cancel`] or, in a
    /// [fail-fast](crate::ThreadPool::scope_fail_fast) scope, by a panic.
    /// A cancel from another thread is seen soon, not at once.
    pub fn is_cancelled(&self) -> bool {
        // SAFETY: the group is alive as long as the scope.
        unsafe { sys::blz_group_cancelled(self.group) != 0 }
    }

    fn keep_panic(&self, payload: Box<dyn Any + Send + 'static>) {
        let mut slot = self.panic.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if slot.is_none() {
            *slot = Some(payload);
        } else {
            drop(slot);
            drop_payload(payload);
        }
    }
}

unsafe extern "C" fn execute<'scope, BODY>(arg: *mut c_void)
where
    BODY: FnOnce(&Scope<'scope>) + Send + 'scope,
{
    // SAFETY: arg is the job made by spawn, alive until `done`, which runs
    // after this returned; its scope is alive until the group's wait
    // returned, which is after `done`.
    let job = &mut *(arg as *mut ScopeJob<'scope, BODY>);
    let scope = &*job.scope;
    if let Some(body) = job.body.take() {
        if let Err(payload) = panic::catch_unwind(AssertUnwindSafe(|| body(scope))) {
            // Kept first, so that in a fail-fast scope the panic resumed is
            // the one whose failure cancelled the scope.
            scope.keep_panic(payload);
            fail();
        }
    }
}

unsafe extern "C" fn done<'scope, BODY>(arg: *mut c_void, _status: sys::blz_status)
where
    BODY: FnOnce(&Scope<'scope>) + Send + 'scope,
{
    // SAFETY: called once per accepted task, after execute (if it ran at
    // all) and before the group's wait returns.
    let job = Box::from_raw(arg as *mut ScopeJob<'scope, BODY>);
    let scope = &*job.scope;
    // A skipped task's closure is dropped here; its destructor may panic.
    if let Err(payload) = panic::catch_unwind(AssertUnwindSafe(move || drop(job))) {
        scope.keep_panic(payload);
    }
}

/// Runs `op` in a new scope on the calling thread (a worker of `pool`),
/// waits for its tasks, then returns `op`'s value or resumes a panic.
/// `fail_fast`: the first panic, of a task or of `op`, cancels the scope.
///
/// # Safety
/// `pool` is a live pool.
pub(crate) unsafe fn run<'scope, OP, R>(pool: *mut sys::blz_pool, fail_fast: bool, op: OP) -> R
where
    OP: FnOnce(&Scope<'scope>) -> R,
{
    let mut group = ptr::null_mut();
    let flags = if fail_fast { sys::BLZ_GROUP_CANCEL_ON_FAILURE } else { 0 };
    let status = sys::blz_group_create_ex(pool, flags, &mut group);
    if status != sys::BLZ_OK {
        failed("scope", status);
    }
    let scope = Scope { group, fail_fast, panic: Mutex::new(None), marker: PhantomData };
    let result = panic::catch_unwind(AssertUnwindSafe(|| op(&scope)));
    if result.is_err() && scope.fail_fast {
        // op is no task of the group: its panic does not cancel by itself.
        scope.cancel();
    }
    // Every task must have ended before `scope` (and what the tasks
    // borrow) can go: this wait is what makes the lifetimes sound.
    let status = sys::blz_group_destroy(group);
    if status == sys::BLZ_EINVAL || status == sys::BLZ_EDEADLK {
        // The group was not waited for: tasks may still use borrowed data.
        eprintln!("blitz: scope: blz_group_destroy: {}", Error::check(status).unwrap_err());
        std::process::abort();
    }
    let task_panic = scope.panic.into_inner().unwrap_or_else(|poisoned| poisoned.into_inner());
    match result {
        Err(payload) => {
            if let Some(other) = task_panic {
                drop_payload(other);
            }
            panic::resume_unwind(payload)
        }
        Ok(value) => {
            if let Some(payload) = task_panic {
                drop(value);
                panic::resume_unwind(payload);
            }
            // BLZ_ECANCELED: the scope was cancelled and no task panicked,
            // an outcome the caller asked for.
            if status != sys::BLZ_OK && status != sys::BLZ_ECANCELED {
                // BLZ_ETASK from a task that did not unwind as a Rust panic, or BLZ_EFORK.
                failed("scope", status);
            }
            value
        }
    }
}

impl fmt::Debug for Scope<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Scope").field("fail_fast", &self.fail_fast).finish_non_exhaustive()
    }
}
