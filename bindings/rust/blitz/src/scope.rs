//! Scopes: tasks that may borrow from the enclosing frames, in a libblitz
//! group that the scope waits for before it returns.
use std::any::Any;
use std::collections::VecDeque;
use std::fmt;
use std::marker::PhantomData;
use std::os::raw::c_void;
use std::panic::{self, AssertUnwindSafe};
use std::ptr;
use std::sync::Mutex;

use blitz_sys as sys;

use crate::broadcast::{self, BroadcastContext};
use crate::job::{drop_payload, fail, failed};
use crate::registry::{current_or_global, current_worker, global_pool, lock};
use crate::Error;

/// A scope in which tasks borrowing from the enclosing stack frames can be
/// spawned; made by [`scope`], [`in_place_scope`],
/// [`ThreadPool::scope`](crate::ThreadPool::scope) and their kin, which
/// return only when every task spawned in it has finished.
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
#[repr(transparent)]
pub struct Scope<'scope> {
    base: ScopeBase<'scope>,
}

/// A scope whose tasks, spawned by one worker with
/// [`spawn_fifo`](ScopeFifo::spawn_fifo), start in the order they were
/// spawned (first in, first out), where [`Scope`]'s start the latest
/// first; made by [`scope_fifo`], [`in_place_scope_fifo`] and their
/// [`ThreadPool`](crate::ThreadPool) forms. Borrowing, panics and
/// cancelling work as in [`Scope`].
///
/// ```
/// use std::sync::Mutex;
/// let pool = blitz::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
/// let order = Mutex::new(Vec::new());
/// pool.scope_fifo(|s| {
///     for i in 0..3 {
///         let order = &order;
///         s.spawn_fifo(move |s| {
///             order.lock().unwrap().push(i);
///             s.spawn_fifo(move |_| order.lock().unwrap().push(10 + i)); // after the first three
///         });
///     }
/// });
/// assert_eq!(order.into_inner().unwrap(), [0, 1, 2, 10, 11, 12]);
/// ```
#[repr(transparent)]
pub struct ScopeFifo<'scope> {
    base: ScopeBase<'scope>,
}

/// A task queued by `spawn_fifo` on a worker: run (or dropped, if its
/// reference task was skipped by a cancel) by one of the scope's reference
/// tasks, with the scope it belongs to.
type FifoItem<'scope> = Box<dyn FnOnce(&ScopeBase<'scope>) + Send + 'scope>;

/// What `Scope` and `ScopeFifo` share.
pub(crate) struct ScopeBase<'scope> {
    group: *mut sys::blz_group,
    /// The pool the tasks run in; alive while the scope is (the scope's
    /// caller holds it: a `&ThreadPool`, a worker of it, or the global pool).
    pool: *mut sys::blz_pool,
    fail_fast: bool,
    /// The first panic of a task.
    panic: Mutex<Option<Box<dyn Any + Send + 'static>>>,
    /// One queue per worker of the pool for FIFO spawns (see crate::spawn
    /// for the scheme); empty for a LIFO scope.
    fifos: Box<[Mutex<VecDeque<FifoItem<'scope>>>]>,
    /// Invariant in 'scope: a `Scope<'long>` is never a `Scope<'short>`,
    /// so a task cannot borrow something shorter-lived than the scope.
    marker: PhantomData<InvariantTask<'scope>>,
}

type InvariantTask<'scope> = Box<dyn FnOnce(&Scope<'scope>) + Send + Sync + 'scope>;

// SAFETY: blz_spawn_ex and the group's calls may be made from any number
// of threads at once; the panic slot and the FIFO queues are behind mutexes.
unsafe impl Send for Scope<'_> {}
unsafe impl Sync for Scope<'_> {}
unsafe impl Send for ScopeFifo<'_> {}
unsafe impl Sync for ScopeFifo<'_> {}

/// The two scope types, as the tasks see them.
pub(crate) trait ScopeKind<'scope>: Sized {
    fn from_base<'a>(base: &'a ScopeBase<'scope>) -> &'a Self;
}

impl<'scope> ScopeKind<'scope> for Scope<'scope> {
    fn from_base<'a>(base: &'a ScopeBase<'scope>) -> &'a Self {
        // SAFETY: Scope is a repr(transparent) ScopeBase.
        unsafe { &*(base as *const ScopeBase<'scope> as *const Scope<'scope>) }
    }
}

impl<'scope> ScopeKind<'scope> for ScopeFifo<'scope> {
    fn from_base<'a>(base: &'a ScopeBase<'scope>) -> &'a Self {
        // SAFETY: ScopeFifo is a repr(transparent) ScopeBase.
        unsafe { &*(base as *const ScopeBase<'scope> as *const ScopeFifo<'scope>) }
    }
}

/// A task's closure; freed by `done_job`, which libblitz calls exactly
/// once for every accepted task, also one that a cancel skipped (its
/// closure is then dropped without running).
struct ScopeJob<'scope, K, BODY> {
    body: Option<BODY>,
    base: *const ScopeBase<'scope>,
    kind: PhantomData<fn(&K)>,
}

/// A FIFO reference task: takes the front of one worker's queue.
struct FifoRef<'scope> {
    base: *const ScopeBase<'scope>,
    queue: usize,
    ran: bool,
}

impl<'scope> Scope<'scope> {
    /// Spawns `body` as a task of this scope. It runs on one of the pool's
    /// workers, gets this scope to spawn more tasks, and finishes before
    /// the scope returns. A panic in it is kept and resumed by the scope
    /// once every task has ended. Spawned from a worker of the scope's
    /// pool, the task goes to that worker's queue, whose latest task runs
    /// first.
    ///
    /// In a cancelled scope (see [`Scope::cancel`]) the task is skipped:
    /// `body` is dropped without running, before the scope returns.
    pub fn spawn<BODY>(&self, body: BODY)
    where
        BODY: FnOnce(&Scope<'scope>) + Send + 'scope,
    {
        if self.base.fifos.is_empty() {
            self.base.spawn_job::<Scope<'scope>, BODY>(body);
        } else {
            // A pool built with `breadth_first`: spawns queue in order.
            self.base.spawn_fifo::<Scope<'scope>, BODY>(body);
        }
    }

    /// Calls `body` once on every worker of the scope's pool, as a task of
    /// this scope: returns at once, and the scope waits for every call.
    /// Each call gets this scope and its [`BroadcastContext`]; the first
    /// panic of a call is kept as a task's panic is.
    pub fn spawn_broadcast<BODY>(&self, body: BODY)
    where
        BODY: Fn(&Scope<'scope>, BroadcastContext<'_>) + Send + Sync + 'scope,
    {
        self.base.spawn_broadcast::<Scope<'scope>, BODY>(body);
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
        self.base.cancel();
    }

    /// Whether the scope was cancelled, by [`Scope::cancel`] or, in a
    /// [fail-fast](crate::ThreadPool::scope_fail_fast) scope, by a panic.
    /// A cancel from another thread is seen soon, not at once.
    pub fn is_cancelled(&self) -> bool {
        self.base.is_cancelled()
    }
}

impl<'scope> ScopeFifo<'scope> {
    /// Spawns `body` as a task of this scope, as [`Scope::spawn`] does, but
    /// first in, first out: spawned from a worker of the scope's pool, it
    /// starts after the tasks that worker spawned into this scope before.
    pub fn spawn_fifo<BODY>(&self, body: BODY)
    where
        BODY: FnOnce(&ScopeFifo<'scope>) + Send + 'scope,
    {
        self.base.spawn_fifo::<ScopeFifo<'scope>, BODY>(body);
    }

    /// [`Scope::spawn_broadcast`], for a FIFO scope.
    pub fn spawn_broadcast<BODY>(&self, body: BODY)
    where
        BODY: Fn(&ScopeFifo<'scope>, BroadcastContext<'_>) + Send + Sync + 'scope,
    {
        self.base.spawn_broadcast::<ScopeFifo<'scope>, BODY>(body);
    }

    /// [`Scope::cancel`], for a FIFO scope.
    pub fn cancel(&self) {
        self.base.cancel();
    }

    /// [`Scope::is_cancelled`], for a FIFO scope.
    pub fn is_cancelled(&self) -> bool {
        self.base.is_cancelled()
    }
}

impl<'scope> ScopeBase<'scope> {
    fn cancel(&self) {
        // SAFETY: the group is alive as long as the scope; BLZ_EINVAL only for NULL.
        unsafe { sys::blz_group_cancel(self.group) };
    }

    fn is_cancelled(&self) -> bool {
        // SAFETY: the group is alive as long as the scope.
        unsafe { sys::blz_group_cancelled(self.group) != 0 }
    }

    fn keep_panic(&self, payload: Box<dyn Any + Send + 'static>) {
        let mut slot = lock(&self.panic);
        if slot.is_none() {
            *slot = Some(payload);
        } else {
            drop(slot);
            drop_payload(payload);
        }
    }

    /// Spawns a task of the group: `execute(job)`, then `done(job, status)`
    /// exactly once (libblitz's promise for an accepted task), which frees
    /// `job`. A refused task frees `job` here and panics.
    ///
    /// # Safety
    /// `execute` and `done` take `job` as what it is.
    unsafe fn spawn_raw(
        &self,
        execute: unsafe extern "C" fn(*mut c_void),
        done: unsafe extern "C" fn(*mut c_void, sys::blz_status),
        job: *mut c_void,
        free_refused: impl FnOnce(),
    ) {
        let opts = crate::spawn::spawn_options(0, self.group, Some(done), job);
        // The group lives until every task of it has ended (the scope
        // waits, and on_done runs before that wait returns).
        let status = sys::blz_spawn_ex(ptr::null_mut(), Some(execute), job, &opts, ptr::null_mut());
        if status != sys::BLZ_OK {
            // The task will not run and on_done will not be called.
            free_refused();
            panic!("blitz: spawn into a scope: {}", Error::check(status).err().unwrap_or(Error::Unknown(status)));
        }
    }

    fn spawn_job<K, BODY>(&self, body: BODY)
    where
        K: ScopeKind<'scope>,
        BODY: FnOnce(&K) + Send + 'scope,
    {
        let job = Box::into_raw(Box::new(ScopeJob::<'scope, K, BODY> {
            body: Some(body),
            base: self as *const ScopeBase<'scope>,
            kind: PhantomData,
        }));
        // SAFETY: execute_job and done_job take a ScopeJob<K, BODY>, which
        // lives until done_job (or the refusal) frees it.
        unsafe {
            self.spawn_raw(execute_job::<K, BODY>, done_job::<K, BODY>, job as *mut c_void, || drop(Box::from_raw(job)))
        }
    }

    /// A job that calls `body` once on every worker of the pool.
    fn spawn_broadcast<K, BODY>(&self, body: BODY)
    where
        K: ScopeKind<'scope> + Sync,
        BODY: Fn(&K, BroadcastContext<'_>) + Send + Sync + 'scope,
    {
        let pool = crate::pool::SendPtr(self.pool);
        self.spawn_job::<K, _>(move |scope: &K| {
            let pool = pool;
            // SAFETY: the pool is alive while the scope is.
            unsafe { broadcast::run(pool.0, |ctx| body(scope, ctx)) };
        });
    }

    fn spawn_fifo<K, BODY>(&self, body: BODY)
    where
        K: ScopeKind<'scope>,
        BODY: FnOnce(&K) + Send + 'scope,
    {
        // SAFETY: the pool is alive while the scope is.
        let index = unsafe { sys::blz_worker_index(self.pool) };
        let queue = match usize::try_from(index) {
            Ok(index) if index < self.fifos.len() => index,
            // Not one of the pool's workers: its spawns go through the
            // pool's injector, which is first in, first out already.
            _ => return self.spawn_job::<K, BODY>(body),
        };
        let item: FifoItem<'scope> = Box::new(move |base: &ScopeBase<'scope>| body(K::from_base(base)));
        lock(&self.fifos[queue]).push_back(item);
        let job = Box::into_raw(Box::new(FifoRef { base: self as *const ScopeBase<'scope>, queue, ran: false }));
        // SAFETY: execute_fifo and done_fifo take a FifoRef.
        unsafe {
            self.spawn_raw(execute_fifo, done_fifo, job as *mut c_void, || {
                drop(Box::from_raw(job));
                // Only this worker pushes to its queue: the back is ours.
                let ours = lock(&self.fifos[queue]).pop_back();
                drop(ours);
            })
        }
    }

    /// Runs `item` as a task of this scope: its panic is kept and reported.
    fn run_item(&self, item: impl FnOnce()) {
        if let Err(payload) = panic::catch_unwind(AssertUnwindSafe(item)) {
            // Kept first, so that in a fail-fast scope the panic resumed is
            // the one whose failure cancelled the scope.
            self.keep_panic(payload);
            fail();
        }
    }

    /// Drops a closure that never ran; its destructor may panic.
    fn drop_item<T>(&self, item: T) {
        if let Err(payload) = panic::catch_unwind(AssertUnwindSafe(move || drop(item))) {
            self.keep_panic(payload);
        }
    }
}

unsafe extern "C" fn execute_job<'scope, K, BODY>(arg: *mut c_void)
where
    K: ScopeKind<'scope>,
    BODY: FnOnce(&K) + Send + 'scope,
{
    // SAFETY: arg is the job made by spawn_job, alive until done_job, which
    // runs after this returned; its scope is alive until the group's wait
    // returned, which is after done_job.
    let job = &mut *(arg as *mut ScopeJob<'scope, K, BODY>);
    let base = &*job.base;
    if let Some(body) = job.body.take() {
        base.run_item(|| body(K::from_base(base)));
    }
}

unsafe extern "C" fn done_job<'scope, K, BODY>(arg: *mut c_void, _status: sys::blz_status)
where
    K: ScopeKind<'scope>,
    BODY: FnOnce(&K) + Send + 'scope,
{
    // SAFETY: called once per accepted task, after execute_job (if it ran
    // at all) and before the group's wait returns.
    let job = Box::from_raw(arg as *mut ScopeJob<'scope, K, BODY>);
    let base = &*job.base;
    // A skipped task's closure is dropped here.
    base.drop_item(job);
}

unsafe extern "C" fn execute_fifo(arg: *mut c_void) {
    // SAFETY: as in execute_job, for a FifoRef.
    let job = &mut *(arg as *mut FifoRef<'_>);
    let base = &*job.base;
    job.ran = true;
    let item = lock(&base.fifos[job.queue]).pop_front();
    if let Some(item) = item {
        base.run_item(|| item(base));
    }
}

unsafe extern "C" fn done_fifo(arg: *mut c_void, _status: sys::blz_status) {
    // SAFETY: as in done_job, for a FifoRef.
    let job = Box::from_raw(arg as *mut FifoRef<'_>);
    let base = &*job.base;
    if !job.ran {
        // Skipped by a cancel: take one closure all the same (each
        // reference task takes exactly one), and drop it without running.
        let item = lock(&base.fifos[job.queue]).pop_front();
        base.drop_item(item);
    }
}

/// Runs `op` in a new scope on the calling thread, with tasks spawned into
/// `pool`, waits for its tasks, then returns `op`'s value or resumes a
/// panic. `fail_fast`: the first panic, of a task or of `op`, cancels the
/// scope. `fifo`: the scope gets FIFO queues (one per worker).
///
/// # Safety
/// `pool` is alive until this returns.
unsafe fn run_base<'scope, R>(
    pool: *mut sys::blz_pool,
    fail_fast: bool,
    fifo: bool,
    op: impl FnOnce(&ScopeBase<'scope>) -> R,
) -> R {
    let mut group = ptr::null_mut();
    let flags = if fail_fast { sys::BLZ_GROUP_CANCEL_ON_FAILURE } else { 0 };
    let status = sys::blz_group_create_ex(pool, flags, &mut group);
    if status != sys::BLZ_OK {
        failed("scope", status);
    }
    let queues = if fifo { sys::blz_pool_num_threads(pool) as usize } else { 0 };
    let scope = ScopeBase {
        group,
        pool,
        fail_fast,
        panic: Mutex::new(None),
        fifos: (0..queues).map(|_| Mutex::new(VecDeque::new())).collect(),
        marker: PhantomData,
    };
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
        crate::registry::abort(&format!("scope: blz_group_destroy: {}", Error::check(status).unwrap_err()));
    }
    let ScopeBase { panic: task_panic, .. } = scope;
    let task_panic = task_panic.into_inner().unwrap_or_else(|poisoned| poisoned.into_inner());
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

/// A LIFO scope on the calling thread; `breadth_first` (the pool was
/// built with it) gives it FIFO queues for its `Scope::spawn`.
///
/// # Safety
/// `pool` is alive until this returns.
pub(crate) unsafe fn run<'scope, OP, R>(pool: *mut sys::blz_pool, breadth_first: bool, fail_fast: bool, op: OP) -> R
where
    OP: FnOnce(&Scope<'scope>) -> R,
{
    run_base(pool, fail_fast, breadth_first, |base| op(Scope::from_base(base)))
}

/// A FIFO scope on the calling thread.
///
/// # Safety
/// `pool` is alive until this returns.
pub(crate) unsafe fn run_fifo<'scope, OP, R>(pool: *mut sys::blz_pool, op: OP) -> R
where
    OP: FnOnce(&ScopeFifo<'scope>) -> R,
{
    run_base(pool, false, true, |base| op(ScopeFifo::from_base(base)))
}

/// Creates a scope in the current pool and runs `op` in it; returns when
/// `op` and every task spawned in the scope have finished, as
/// [`ThreadPool::scope`](crate::ThreadPool::scope) does. On a worker, the
/// scope lives on that worker, in its pool; on any other thread, `op` moves
/// into the global pool (built on first use).
///
/// ```
/// let mut left = 0;
/// let mut right = 0;
/// let data = [1, 2, 3, 4];
/// blitz::scope(|s| {
///     s.spawn(|_| left = data[..2].iter().sum());
///     s.spawn(|_| right = data[2..].iter().sum());
/// });
/// assert_eq!((left, right), (3, 7));
/// ```
pub fn scope<'scope, OP, R>(op: OP) -> R
where
    OP: FnOnce(&Scope<'scope>) -> R + Send,
    R: Send,
{
    match current_worker() {
        // SAFETY: a worker's pool and Registry are alive while the worker runs.
        Some(worker) => unsafe { run(worker.pool, (*worker.registry).breadth_first, false, op) },
        None => global_pool().scope(op),
    }
}

/// [`scope`] with a [`ScopeFifo`].
pub fn scope_fifo<'scope, OP, R>(op: OP) -> R
where
    OP: FnOnce(&ScopeFifo<'scope>) -> R + Send,
    R: Send,
{
    match current_worker() {
        // SAFETY: a worker's pool is alive while the worker runs.
        Some(worker) => unsafe { run_fifo(worker.pool, op) },
        None => global_pool().scope_fifo(op),
    }
}

/// Creates a scope that runs `op` on the calling thread, which need not be
/// a worker, with its tasks spawned into the current pool (the calling
/// worker's, else the global one); returns when `op` and every task have
/// finished. See [`ThreadPool::in_place_scope`](crate::ThreadPool::in_place_scope).
pub fn in_place_scope<'scope, OP, R>(op: OP) -> R
where
    OP: FnOnce(&Scope<'scope>) -> R,
{
    let (pool, breadth_first) = current_or_global();
    // SAFETY: the current pool outlives this call (see current_or_global).
    unsafe { run(pool, breadth_first, false, op) }
}

/// [`in_place_scope`] with a [`ScopeFifo`].
pub fn in_place_scope_fifo<'scope, OP, R>(op: OP) -> R
where
    OP: FnOnce(&ScopeFifo<'scope>) -> R,
{
    let (pool, _) = current_or_global();
    // SAFETY: as in in_place_scope.
    unsafe { run_fifo(pool, op) }
}

impl fmt::Debug for Scope<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Scope").field("fail_fast", &self.base.fail_fast).finish_non_exhaustive()
    }
}

impl fmt::Debug for ScopeFifo<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScopeFifo").finish_non_exhaustive()
    }
}
