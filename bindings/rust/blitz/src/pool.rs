use std::cell::Cell;
use std::ffi::CString;
use std::fmt;
use std::os::raw::c_void;
use std::panic::{self, AssertUnwindSafe};
use std::ptr;
use std::sync::atomic::{AtomicPtr, Ordering};

use blitz_sys as sys;

use crate::broadcast::{self, BroadcastContext};
use crate::job::{self, drop_payload};
use crate::scope::{self, Scope};
use crate::task::JoinHandle;
use crate::{Error, Stats};

type Handler = Box<dyn Fn(usize) + Send + Sync + 'static>;

/// What the pool's workers know of their pool: `user` of the C hooks.
/// Freed only after `blz_pool_destroy` returned, so after every worker's
/// `on_thread_stop`.
pub(crate) struct Shared {
    /// The pool's handle, set once `blz_pool_create` returned: no job can
    /// reach a worker before, as nobody has the handle to submit one.
    pool: AtomicPtr<sys::blz_pool>,
    start_handler: Option<Handler>,
    exit_handler: Option<Handler>,
}

thread_local! {
    /// On a worker of a pool built by this crate: its pool's `Shared` and
    /// the worker's index. Set by `on_thread_start`, cleared by `on_thread_stop`.
    static CURRENT: Cell<(*const Shared, usize)> = const { Cell::new((ptr::null(), 0)) };
}

/// The calling worker's pool (if it is a worker of a pool of this crate
/// whose `build` has returned) and its index.
#[inline(always)]
pub(crate) fn current_worker() -> Option<(*mut sys::blz_pool, usize)> {
    let (shared, index) = CURRENT.try_with(Cell::get).unwrap_or((ptr::null(), 0));
    if shared.is_null() {
        return None;
    }
    // SAFETY: a worker's Shared outlives the worker (freed after destroy).
    // Acquire: pairs with the Release in `build`, so a worker that sees the
    // handle also sees everything `build` did before publishing it.
    let pool = unsafe { (*shared).pool.load(Ordering::Acquire) };
    if pool.is_null() {
        None
    } else {
        Some((pool, index))
    }
}

/// The calling worker's index, also in a start handler (before the pool's
/// handle is known).
pub(crate) fn current_index() -> Option<usize> {
    let (shared, index) = CURRENT.try_with(Cell::get).unwrap_or((ptr::null(), 0));
    if shared.is_null() {
        None
    } else {
        Some(index)
    }
}

fn run_handler(handler: &Option<Handler>, index: usize) {
    if let Some(handler) = handler {
        // A handler has nobody to report to: its panic is printed by the
        // panic hook and otherwise ignored, as the C hooks' exceptions are.
        if let Err(payload) = panic::catch_unwind(AssertUnwindSafe(|| handler(index))) {
            drop_payload(payload);
        }
    }
}

unsafe extern "C" fn on_thread_start(user: *mut c_void, worker_index: u32) {
    let shared = user as *const Shared;
    let index = worker_index as usize;
    let _ = CURRENT.try_with(|c| c.set((shared, index)));
    run_handler(&(*shared).start_handler, index);
}

unsafe extern "C" fn on_thread_stop(user: *mut c_void, worker_index: u32) {
    let shared = user as *const Shared;
    run_handler(&(*shared).exit_handler, worker_index as usize);
    let _ = CURRENT.try_with(|c| c.set((ptr::null(), 0)));
}

/// Configures and builds a [`ThreadPool`], as Rayon's builder does.
///
/// ```
/// let pool = blitz::ThreadPoolBuilder::new()
///     .num_threads(2)
///     .thread_name("worker")   // the workers are "worker-0", "worker-1"
///     .build()?;
/// assert_eq!(pool.current_num_threads(), 2);
/// # Ok::<(), blitz::Error>(())
/// ```
#[derive(Default)]
pub struct ThreadPoolBuilder {
    num_threads: usize,
    thread_name: Option<String>,
    stack_size: usize,
    start_handler: Option<Handler>,
    exit_handler: Option<Handler>,
}

impl ThreadPoolBuilder {
    /// A builder with the defaults: one worker per CPU this process may run
    /// on (or `BLZ_NUM_THREADS`), workers named "blz-0", "blz-1", ...
    pub fn new() -> ThreadPoolBuilder {
        ThreadPoolBuilder::default()
    }

    /// The number of workers; 0 (the default) means `BLZ_NUM_THREADS` if it
    /// holds 1..65535, else the number of CPUs this process may run on.
    /// More than 65535 makes `build` fail with [`Error::InvalidArgument`].
    pub fn num_threads(mut self, num_threads: usize) -> ThreadPoolBuilder {
        self.num_threads = num_threads;
        self
    }

    /// The prefix of the workers' names: "worker" names them "worker-0",
    /// "worker-1", ... (cut to the 15 bytes Linux keeps, the index first).
    pub fn thread_name<S: Into<String>>(mut self, prefix: S) -> ThreadPoolBuilder {
        self.thread_name = Some(prefix.into());
        self
    }

    /// Bytes of stack per worker; 0 (the default) is the platform's default.
    pub fn stack_size(mut self, bytes: usize) -> ThreadPoolBuilder {
        self.stack_size = bytes;
        self
    }

    /// Runs on each worker, with its index, before its first job. A panic
    /// in it is printed and otherwise ignored.
    pub fn start_handler<H>(mut self, handler: H) -> ThreadPoolBuilder
    where
        H: Fn(usize) + Send + Sync + 'static,
    {
        self.start_handler = Some(Box::new(handler));
        self
    }

    /// Runs on each worker, with its index, after its last job (when the
    /// pool is dropped). A panic in it is printed and otherwise ignored.
    pub fn exit_handler<H>(mut self, handler: H) -> ThreadPoolBuilder
    where
        H: Fn(usize) + Send + Sync + 'static,
    {
        self.exit_handler = Some(Box::new(handler));
        self
    }

    /// Creates the pool and starts its workers.
    ///
    /// Fails with [`Error::InvalidArgument`] (too many threads, a NUL byte
    /// in the name, a stack size the platform rejects),
    /// [`Error::OutOfMemory`] or [`Error::ThreadSpawn`].
    pub fn build(self) -> Result<ThreadPool, Error> {
        let name = match self.thread_name {
            Some(name) => Some(CString::new(name).map_err(|_| Error::InvalidArgument)?),
            None => None,
        };
        let shared = Box::into_raw(Box::new(Shared {
            pool: AtomicPtr::new(ptr::null_mut()),
            start_handler: self.start_handler,
            exit_handler: self.exit_handler,
        }));
        // SAFETY: the config is initialised by the library, then filled with
        // values that live until blz_pool_create returns (the name is copied).
        unsafe {
            let mut config = std::mem::MaybeUninit::<sys::blz_pool_config>::zeroed().assume_init();
            sys::blz_pool_config_init(&mut config);
            config.num_threads = u32::try_from(self.num_threads).unwrap_or(u32::MAX);
            config.stack_size = self.stack_size;
            config.thread_name = name.as_ref().map_or(ptr::null(), |n| n.as_ptr());
            config.on_thread_start = Some(on_thread_start);
            config.on_thread_stop = Some(on_thread_stop);
            config.user = shared as *mut c_void;
            let mut raw = ptr::null_mut();
            if let Err(error) = Error::check(sys::blz_pool_create(&config, &mut raw)) {
                // The workers already started have stopped: nobody uses `shared`.
                drop(Box::from_raw(shared));
                return Err(error);
            }
            // Release: pairs with the Acquire in current_worker. (A job that
            // reaches a worker is ordered after this store by the C queue
            // anyway; this pair does not rely on it.)
            (*shared).pool.store(raw, Ordering::Release);
            Ok(ThreadPool { raw, shared })
        }
    }
}

impl fmt::Debug for ThreadPoolBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ThreadPoolBuilder")
            .field("num_threads", &self.num_threads)
            .field("thread_name", &self.thread_name)
            .field("stack_size", &self.stack_size)
            .field("start_handler", &self.start_handler.is_some())
            .field("exit_handler", &self.exit_handler.is_some())
            .finish()
    }
}

/// A pool of worker threads that run closures by work stealing.
///
/// `Send + Sync`: share it by reference or in an `Arc`. Dropping it waits
/// for every accepted task (spawned ones included), stops the workers and
/// frees the pool; dropped on one of its own workers (the last `Arc` let go
/// by a task), the destruction moves to a new thread so as not to wait for itself.
pub struct ThreadPool {
    raw: *mut sys::blz_pool,
    shared: *mut Shared,
}

// SAFETY: every libblitz function may be called from any thread; Shared
// holds Send + Sync handlers and an atomic.
unsafe impl Send for ThreadPool {}
unsafe impl Sync for ThreadPool {}

impl ThreadPool {
    /// Runs `a` and `b`, possibly in parallel, on this pool's workers, and
    /// returns both values. On a worker of this pool, `a` runs on the
    /// calling thread and `b` waits for a thief; from any other thread the
    /// pair first moves into the pool.
    ///
    /// Both closures always run. If `a` panicked, its panic is resumed
    /// (after `b` finished); else if `b` panicked, `b`'s.
    ///
    /// ```
    /// # let pool = blitz::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
    /// let (a, b) = pool.join(|| 1 + 1, || "two");
    /// assert_eq!((a, b), (2, "two"));
    /// ```
    ///
    /// Both closures may run on other threads, so what they use must be `Send`/`Sync`:
    /// ```compile_fail,E0277
    /// let pool = blitz::ThreadPoolBuilder::new().build().unwrap();
    /// let rc = std::rc::Rc::new(5);
    /// pool.join(|| *rc, || 0);
    /// ```
    pub fn join<A, B, RA, RB>(&self, a: A, b: B) -> (RA, RB)
    where
        A: FnOnce() -> RA + Send,
        B: FnOnce() -> RB + Send,
        RA: Send,
        RB: Send,
    {
        // SAFETY: self.raw is alive as long as &self.
        unsafe { job::fork_join(self.raw, a, b) }
    }

    /// Runs `op` on a worker of this pool and returns its value (resumes
    /// its panic). On a worker of this pool it runs on the calling thread.
    /// Inside `op`, [`crate::join`] and [`crate::current_thread_index`]
    /// refer to this pool.
    ///
    /// ```
    /// # let pool = blitz::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
    /// let index = pool.install(|| blitz::current_thread_index());
    /// assert!(index.unwrap() < 2);
    /// ```
    ///
    /// `op` runs on a worker, so it may not use what is not `Sync` by reference:
    /// ```compile_fail,E0277
    /// let pool = blitz::ThreadPoolBuilder::new().build().unwrap();
    /// let cell = std::cell::Cell::new(5);
    /// pool.install(|| cell.set(6));
    /// ```
    pub fn install<OP, R>(&self, op: OP) -> R
    where
        OP: FnOnce() -> R + Send,
        R: Send,
    {
        // SAFETY: self.raw is alive as long as &self.
        unsafe { job::call(self.raw, op) }
    }

    /// Creates a scope on a worker of this pool, runs `op` in it, and
    /// returns when `op` and every task spawned in the scope have finished.
    /// The tasks may borrow anything that outlives the call. A panic of `op`
    /// (else the first panic of a task) is resumed after all of them ended.
    /// See [`Scope`].
    pub fn scope<'scope, OP, R>(&self, op: OP) -> R
    where
        OP: FnOnce(&Scope<'scope>) -> R + Send,
        R: Send,
    {
        self.scope_with(false, op)
    }

    /// A [`scope`](ThreadPool::scope) that fails fast: the first panic, of a
    /// task or of `op`, cancels it at once (see [`Scope::cancel`]). The
    /// tasks that have not started are skipped (dropped without running),
    /// and running ones can see it with [`crate::is_cancelled`] and return
    /// early. A panic inside a task counts from where it is caught: in a
    /// [`join`](crate::join) half inside a task, the scope is cancelled
    /// before the panic reached the task. As in `scope`, the call returns
    /// only when every running task has finished, and then resumes the
    /// first panic (`op`'s if it panicked).
    ///
    /// ```
    /// use std::panic::{self, AssertUnwindSafe};
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// let pool = blitz::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
    /// let checked = AtomicUsize::new(0);
    /// let result = panic::catch_unwind(AssertUnwindSafe(|| {
    ///     pool.scope_fail_fast(|s| {
    ///         for i in 0..1000 {
    ///             let checked = &checked;
    ///             s.spawn(move |_| {
    ///                 if blitz::is_cancelled() {
    ///                     return; // another task failed: no use going on
    ///                 }
    ///                 assert!(i != 10, "bad input");
    ///                 checked.fetch_add(1, Ordering::Relaxed);
    ///             });
    ///         }
    ///     })
    /// }));
    /// assert!(result.is_err()); // the panic of task 10
    /// println!("{} of 1000 checked before the scope was cancelled", checked.into_inner());
    /// ```
    pub fn scope_fail_fast<'scope, OP, R>(&self, op: OP) -> R
    where
        OP: FnOnce(&Scope<'scope>) -> R + Send,
        R: Send,
    {
        self.scope_with(true, op)
    }

    fn scope_with<'scope, OP, R>(&self, fail_fast: bool, op: OP) -> R
    where
        OP: FnOnce(&Scope<'scope>) -> R + Send,
        R: Send,
    {
        let pool = SendPtr(self.raw);
        self.install(move || {
            let pool = pool;
            // SAFETY: the pool is alive for the whole install.
            unsafe { scope::run(pool.0, fail_fast, op) }
        })
    }

    /// Calls `op` once on every worker of this pool, concurrently, and
    /// returns the values in the workers' order (`op`'s
    /// [`BroadcastContext::index`]): to set up or flush per-worker state,
    /// such as thread-locals. A worker runs its call when it next looks for
    /// work, so one busy with a long job delays the return. Called from a
    /// worker of this pool it does not deadlock: that worker makes its own
    /// call while it waits for the others.
    ///
    /// Every call runs even if some panic; then the first panic is resumed.
    ///
    /// ```
    /// # let pool = blitz::ThreadPoolBuilder::new().num_threads(3).build().unwrap();
    /// let seen = pool.broadcast(|ctx| (ctx.index(), blitz::current_thread_index()));
    /// assert_eq!(seen, [(0, Some(0)), (1, Some(1)), (2, Some(2))]);
    /// ```
    pub fn broadcast<OP, R>(&self, op: OP) -> Vec<R>
    where
        OP: Fn(BroadcastContext) -> R + Sync,
        R: Send,
    {
        // SAFETY: self.raw is alive as long as &self.
        unsafe { broadcast::run(self.raw, op) }
    }

    /// Starts `f` on this pool and returns a handle to wait for its value.
    /// From a worker of this pool the task goes to that worker's queue.
    ///
    /// ```
    /// # let pool = blitz::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
    /// let handle = pool.spawn(|| 6 * 7);
    /// assert_eq!(handle.join()?, 42);
    /// # Ok::<(), blitz::Error>(())
    /// ```
    ///
    /// The closure must own what it uses (it may outlive the caller's frame):
    /// ```compile_fail,E0373
    /// let pool = blitz::ThreadPoolBuilder::new().build().unwrap();
    /// let v = vec![1, 2, 3];
    /// let handle = pool.spawn(|| v.len());
    /// ```
    pub fn spawn<F, T>(&self, f: F) -> JoinHandle<T>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        // SAFETY: self.raw is alive as long as &self.
        unsafe { JoinHandle::spawn(self.raw, f) }
    }

    /// The number of workers.
    pub fn current_num_threads(&self) -> usize {
        // SAFETY: self.raw is alive as long as &self.
        unsafe { sys::blz_pool_num_threads(self.raw) as usize }
    }

    /// The calling thread's index in this pool, if it is one of its workers.
    pub fn current_thread_index(&self) -> Option<usize> {
        // SAFETY: self.raw is alive as long as &self.
        let index = unsafe { sys::blz_worker_index(self.raw) };
        usize::try_from(index).ok()
    }

    /// A snapshot of the pool's counters. `tasks_failed` counts the
    /// closures that panicked (each job once: a panic that goes up through
    /// `join`s counts in each of them) and C++ exceptions.
    ///
    /// # Panics
    /// In a child process forked after the pool was created, where
    /// [`ThreadPool::try_stats`] returns [`Error::Forked`].
    pub fn stats(&self) -> Stats {
        self.try_stats().unwrap_or_else(|error| panic!("blitz: stats: {}", error))
    }

    /// A snapshot of the pool's counters, or the library's error.
    pub fn try_stats(&self) -> Result<Stats, Error> {
        let mut stats = Stats { struct_size: std::mem::size_of::<Stats>() as u32, ..Default::default() };
        // SAFETY: self.raw is alive as long as &self; stats is a full blz_stats.
        Error::check(unsafe { sys::blz_pool_stats(self.raw, &mut stats) })?;
        Ok(stats)
    }

    /// The C handle, for calling blitz-sys functions on this pool. It stays
    /// valid as long as the `ThreadPool`; do not destroy it.
    pub fn as_raw(&self) -> *mut sys::blz_pool {
        self.raw
    }
}

struct SendPtr<T>(*mut T);
// SAFETY: used only for handles whose functions may be called from any thread.
unsafe impl<T> Send for SendPtr<T> {}

impl Drop for ThreadPool {
    fn drop(&mut self) {
        let pool = SendPtr(self.raw);
        let shared = SendPtr(self.shared);
        let destroy = move || {
            let (pool, shared) = (pool, shared);
            // SAFETY: called once, from a thread that is not one of the pool's
            // workers; Shared is freed only after the workers stopped.
            unsafe {
                let status = sys::blz_pool_destroy(pool.0);
                if status == sys::BLZ_OK || status == sys::BLZ_EFORK {
                    drop(Box::from_raw(shared.0));
                }
            }
        };
        if self.current_thread_index().is_some() {
            // On one of our own workers, blz_pool_destroy would answer
            // BLZ_EDEADLK: let another thread wait for this one to finish.
            // If no thread can be started, the pool is leaked.
            let _ = std::thread::Builder::new().name("blitz-drop".to_string()).spawn(destroy);
        } else {
            destroy();
        }
    }
}

impl fmt::Debug for ThreadPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ThreadPool").field("num_threads", &self.current_num_threads()).finish()
    }
}

/// Runs `a` and `b` and returns both values, as Rayon's `join` does.
///
/// On a worker of a [`ThreadPool`] (inside `install`, `scope`, `spawn`,
/// `join` or a task), this is that pool's `join`: `a` runs here and `b` may
/// be stolen by another worker. On any other thread both closures run on
/// the calling thread, `a` first.
///
/// Both closures always run; `a`'s panic is resumed first, then `b`'s.
///
/// ```
/// fn fib(n: u64) -> u64 {
///     if n < 2 { return n; }
///     let (a, b) = blitz::join(|| fib(n - 1), || fib(n - 2));
///     a + b
/// }
/// let pool = blitz::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
/// assert_eq!(pool.install(|| fib(20)), 6765);   // in parallel on the pool
/// assert_eq!(fib(10), 55);                       // here, sequentially
/// ```
#[inline]
pub fn join<A, B, RA, RB>(a: A, b: B) -> (RA, RB)
where
    A: FnOnce() -> RA + Send,
    B: FnOnce() -> RB + Send,
    RA: Send,
    RB: Send,
{
    match current_worker() {
        // SAFETY: a worker's pool is alive while the worker runs.
        Some((pool, _)) => unsafe { job::fork_join(pool, a, b) },
        None => {
            let ra = panic::catch_unwind(AssertUnwindSafe(a));
            let rb = panic::catch_unwind(AssertUnwindSafe(b));
            job::join_results(sys::BLZ_OK, Some(ra), Some(rb))
        }
    }
}

/// The calling thread's index in its pool (`0 .. num_threads`) if it is a
/// worker of a [`ThreadPool`], else `None`.
pub fn current_thread_index() -> Option<usize> {
    current_index()
}

/// The number of workers of the calling worker's pool; 1 on any other
/// thread (where [`join`] runs both closures on the calling thread).
pub fn current_num_threads() -> usize {
    match current_worker() {
        // SAFETY: a worker's pool is alive while the worker runs.
        Some((pool, _)) => unsafe { sys::blz_pool_num_threads(pool) as usize },
        None => 1,
    }
}

/// Calls `op` once on every worker of the calling worker's pool and returns
/// the values in the workers' order: [`ThreadPool::broadcast`] on that pool.
/// On any other thread `op` runs once, here, with index 0 of 1 (as
/// [`join`] runs both closures here and [`current_num_threads`] is 1).
///
/// ```
/// let pool = blitz::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
/// let indices = pool.install(|| blitz::broadcast(|ctx| ctx.index()));
/// assert_eq!(indices, [0, 1]);
/// assert_eq!(blitz::broadcast(|ctx| (ctx.index(), ctx.num_threads())), [(0, 1)]);
/// ```
pub fn broadcast<OP, R>(op: OP) -> Vec<R>
where
    OP: Fn(BroadcastContext) -> R + Sync,
    R: Send,
{
    match current_worker() {
        // SAFETY: a worker's pool is alive while the worker runs.
        Some((pool, _)) => unsafe { broadcast::run(pool, op) },
        None => broadcast::here(op),
    }
}

/// Whether the work the calling thread does belongs to a cancelled scope:
/// `true` inside a task of a scope that was cancelled (by
/// [`Scope::cancel`] or by a panic in a
/// [fail-fast](ThreadPool::scope_fail_fast) scope), and inside what such a
/// task runs through [`join`], `install` or a nested call, wherever it is
/// stolen to. For long tasks to poll and return early. It looks at the
/// innermost task only: inside a scope nested in a task, it is the inner
/// scope's state. `false` outside any scope's task, and in `op` itself
/// (which is no task; ask [`Scope::is_cancelled`] there).
///
/// ```
/// let pool = blitz::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
/// pool.scope(|s| {
///     s.spawn(|s| {
///         assert!(!blitz::is_cancelled());
///         s.cancel();
///         assert!(blitz::is_cancelled()); // the same thread sees its own cancel at once
///     });
/// });
/// assert!(!blitz::is_cancelled());
/// ```
pub fn is_cancelled() -> bool {
    // SAFETY: no precondition.
    unsafe { sys::blz_cancelled() != 0 }
}
