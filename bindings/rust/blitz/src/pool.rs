//! `ThreadPool` and the free functions that work in the current pool (the
//! calling worker's) or the global one.
use std::fmt;
use std::sync::Arc;

use blitz_sys as sys;

use crate::broadcast::{self, BroadcastContext};
#[allow(deprecated)]
use crate::builder::Configuration;
use crate::job;
use crate::registry::{self, current_worker, global_pool, Registry};
use crate::scope::{self, Scope, ScopeFifo};
use crate::spawn::{spawn_fifo_in, spawn_in};
use crate::task::{JoinHandle, SpawnFuture};
use crate::{Error, Stats};

/// A pool of worker threads that run closures by work stealing.
///
/// `Send + Sync`: share it by reference or in an `Arc`. Dropping it does
/// not wait: the work it accepted (spawned tasks, and what they do: spawn,
/// open scopes, ...) still runs, then the workers run their exit handlers
/// and stop, in the background (on a thread libblitz starts for that,
/// `blz_pool_release`), also when it is dropped on one of its own workers.
/// To wait for that end, use
/// [`ThreadPool::wait_until_stopped`], or keep an `Arc` of
/// [`registry`](ThreadPool::registry) and call
/// [`Registry::wait_until_stopped`].
pub struct ThreadPool {
    /// The pool's [`Registry`]: an `Arc` of it outlives the pool and tells
    /// when the pool has ended. Public (as a field, the way Rayon's own
    /// tests reach it) only to be read or cloned: the pool itself keeps
    /// its own reference, so replacing this field changes nothing.
    pub registry: Arc<Registry>,
    raw: *mut sys::blz_pool,
    /// The Registry the pool's C hooks use, from `Arc::into_raw`; given up
    /// by `on_destroyed` once the workers are joined.
    hooks_ref: *const Registry,
}

// SAFETY: every libblitz function may be called from any thread; the
// Registry holds Send + Sync handlers, mutexes and atomics.
unsafe impl Send for ThreadPool {}
unsafe impl Sync for ThreadPool {}

impl ThreadPool {
    pub(crate) fn from_parts(registry: Arc<Registry>, raw: *mut sys::blz_pool, hooks_ref: *const Registry) -> Self {
        ThreadPool { registry, raw, hooks_ref }
    }

    /// Rayon's deprecated constructor: [`ThreadPoolBuilder::build`](crate::ThreadPoolBuilder::build).
    #[deprecated(note = "Use `ThreadPoolBuilder::build`")]
    #[allow(deprecated)]
    pub fn new(configuration: Configuration) -> Result<ThreadPool, Box<dyn std::error::Error>> {
        configuration.into_builder().build().map_err(Box::from)
    }

    /// Whether the pool was built with the deprecated `breadth_first`.
    pub(crate) fn breadth_first(&self) -> bool {
        self.own_registry().breadth_first
    }

    /// The pool's own Registry (not the public field, which a user may replace).
    pub(crate) fn own_registry(&self) -> &Registry {
        // SAFETY: the hooks' Arc is given up only after the pool ended,
        // which starts when self is dropped.
        unsafe { &*self.hooks_ref }
    }

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
    /// Inside `op`, the free functions ([`crate::join()`], [`crate::scope()`],
    /// [`crate::spawn()`], [`crate::current_thread_index`], ...) refer to this pool.
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

    /// Runs `op` as [`install`](ThreadPool::install) does, isolated
    /// (`blz_isolate`): while it runs, every wait inside it (a join, a
    /// scope's end, a call) runs only work forked or spawned inside `op`,
    /// on whichever worker that work runs. For a lock held across a join
    /// (rayon-rs/rayon#592): the waiting worker cannot take another task
    /// that takes the same lock.
    ///
    /// ```
    /// # let pool = blitz::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
    /// let lock = std::sync::Mutex::new(0);
    /// pool.install(|| {
    ///     let mut guard = lock.lock().unwrap();
    ///     let (a, b) = pool.isolate(|| blitz::join(|| 1, || 2));
    ///     *guard += a + b;
    /// });
    /// assert_eq!(*lock.lock().unwrap(), 3);
    /// ```
    pub fn isolate<OP, R>(&self, op: OP) -> R
    where
        OP: FnOnce() -> R + Send,
        R: Send,
    {
        // SAFETY: self.raw is alive as long as &self.
        unsafe { job::isolate(self.raw, op) }
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

    /// [`scope`](ThreadPool::scope) with a [`ScopeFifo`]: tasks that one
    /// worker spawns with [`ScopeFifo::spawn_fifo`] start in the order they
    /// were spawned (while [`Scope::spawn`] starts the latest first).
    ///
    /// ```
    /// use std::sync::Mutex;
    /// let pool = blitz::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
    /// let order = Mutex::new(Vec::new());
    /// pool.scope_fifo(|s| {
    ///     for i in 0..4 {
    ///         let order = &order;
    ///         s.spawn_fifo(move |_| order.lock().unwrap().push(i));
    ///     }
    /// });
    /// assert_eq!(order.into_inner().unwrap(), [0, 1, 2, 3]);
    /// ```
    pub fn scope_fifo<'scope, OP, R>(&self, op: OP) -> R
    where
        OP: FnOnce(&ScopeFifo<'scope>) -> R + Send,
        R: Send,
    {
        let pool = SendPtr(self.raw);
        self.install(move || {
            let pool = pool;
            // SAFETY: the pool is alive for the whole install.
            unsafe { scope::run_fifo(pool.0, op) }
        })
    }

    /// Runs `op` in a new scope on the calling thread (which need not be a
    /// worker), with its tasks spawned into this pool; returns when `op`
    /// and every task have finished. Unlike [`scope`](ThreadPool::scope),
    /// `op` may block on what a task does: it does not hold a worker.
    ///
    /// ```
    /// let pool = blitz::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// pool.in_place_scope(|s| {
    ///     s.spawn(move |_| tx.send(5).unwrap());
    ///     assert_eq!(rx.recv().unwrap(), 5); // the only worker runs the task meanwhile
    /// });
    /// ```
    pub fn in_place_scope<'scope, OP, R>(&self, op: OP) -> R
    where
        OP: FnOnce(&Scope<'scope>) -> R,
    {
        // SAFETY: self.raw is alive as long as &self.
        unsafe { scope::run(self.raw, self.breadth_first(), false, op) }
    }

    /// [`in_place_scope`](ThreadPool::in_place_scope) with a [`ScopeFifo`].
    pub fn in_place_scope_fifo<'scope, OP, R>(&self, op: OP) -> R
    where
        OP: FnOnce(&ScopeFifo<'scope>) -> R,
    {
        // SAFETY: self.raw is alive as long as &self.
        unsafe { scope::run_fifo(self.raw, op) }
    }

    /// A [`scope`](ThreadPool::scope) that fails fast: the first panic, of a
    /// task or of `op`, cancels it at once (see [`Scope::cancel`]). The
    /// tasks that have not started are skipped (dropped without running),
    /// and running ones can see it with [`crate::is_cancelled`] and return
    /// early. A panic inside a task counts from where it is caught: in a
    /// [`join`](crate::join()) half inside a task, the scope is cancelled
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
        let breadth_first = self.breadth_first();
        self.install(move || {
            let pool = pool;
            // SAFETY: the pool is alive for the whole install.
            unsafe { scope::run(pool.0, breadth_first, fail_fast, op) }
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
        OP: Fn(BroadcastContext<'_>) -> R + Sync,
        R: Send,
    {
        // SAFETY: self.raw is alive as long as &self.
        unsafe { broadcast::run(self.raw, op) }
    }

    /// Calls `op` once on every worker of this pool, as
    /// [`broadcast`](ThreadPool::broadcast) does, without waiting: returns
    /// at once. A panic of a call goes to the pool's
    /// [panic handler](crate::ThreadPoolBuilder::panic_handler) (the process
    /// aborts without one).
    ///
    /// ```
    /// let pool = blitz::ThreadPoolBuilder::new().num_threads(3).build().unwrap();
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// let tx = std::sync::Mutex::new(tx); // `op` is shared by the workers: Sync
    /// pool.spawn_broadcast(move |ctx| tx.lock().unwrap().send(ctx.index()).unwrap());
    /// let mut seen: Vec<usize> = rx.iter().collect(); // ends when `op` (and `tx`) is dropped
    /// seen.sort();
    /// assert_eq!(seen, [0, 1, 2]);
    /// ```
    pub fn spawn_broadcast<OP>(&self, op: OP)
    where
        OP: Fn(BroadcastContext<'_>) + Send + Sync + 'static,
    {
        // SAFETY: self.raw is alive as long as &self.
        unsafe { broadcast::spawn_broadcast(self.raw, self.own_registry(), op) }
    }

    /// Starts `op` on this pool and returns at once: fire and forget, as
    /// Rayon's `spawn`. From a worker of this pool the task goes to that
    /// worker's own queue, whose latest task runs first. A panic of `op`
    /// goes to the pool's [panic handler](crate::ThreadPoolBuilder::panic_handler)
    /// (the process aborts without one). To wait for a value, use
    /// [`spawn_with_handle`](ThreadPool::spawn_with_handle) or a [`scope`](ThreadPool::scope).
    ///
    /// ```
    /// let pool = blitz::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// pool.spawn(move || tx.send(6 * 7).unwrap());
    /// assert_eq!(rx.recv().unwrap(), 42);
    /// ```
    ///
    /// The closure must own what it uses (it may outlive the caller's frame):
    /// ```compile_fail,E0373
    /// let pool = blitz::ThreadPoolBuilder::new().build().unwrap();
    /// let v = vec![1, 2, 3];
    /// pool.spawn(|| println!("{}", v.len()));
    /// ```
    pub fn spawn<OP>(&self, op: OP)
    where
        OP: FnOnce() + Send + 'static,
    {
        // SAFETY: self.raw is alive as long as &self; the registry is this pool's.
        unsafe {
            if self.own_registry().breadth_first {
                spawn_fifo_in(self.raw, self.own_registry(), op)
            } else {
                spawn_in(self.raw, self.own_registry(), op)
            }
        }
    }

    /// Starts `op` on this pool and returns at once, as
    /// [`spawn`](ThreadPool::spawn); but the tasks one worker of this pool
    /// spawns this way start in the order they were spawned (first in,
    /// first out). From any other thread, tasks queue in order anyway.
    ///
    /// ```
    /// let pool = blitz::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// let pool_ref = &pool;
    /// pool.install(move || {
    ///     for i in 0..4 {
    ///         let tx = tx.clone();
    ///         pool_ref.spawn_fifo(move || tx.send(i).unwrap());
    ///     }
    /// }); // the last `tx` is dropped with the closure
    /// assert_eq!(rx.iter().collect::<Vec<_>>(), [0, 1, 2, 3]);
    /// ```
    pub fn spawn_fifo<OP>(&self, op: OP)
    where
        OP: FnOnce() + Send + 'static,
    {
        // SAFETY: self.raw is alive as long as &self; the registry is this pool's.
        unsafe { spawn_fifo_in(self.raw, self.own_registry(), op) }
    }

    /// Starts `op` on this pool and returns at once, as
    /// [`spawn`](ThreadPool::spawn), with high priority: every worker
    /// looking for work takes it before any normal queued task, also when
    /// it is spawned from one of this pool's workers. A running job is not
    /// preempted, and the `join` halves already queued are not reordered.
    ///
    /// ```
    /// let pool = blitz::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// pool.spawn_high_priority(move || tx.send(42).unwrap());
    /// assert_eq!(rx.recv().unwrap(), 42);
    /// ```
    pub fn spawn_high_priority<OP>(&self, op: OP)
    where
        OP: FnOnce() + Send + 'static,
    {
        // SAFETY: self.raw is alive as long as &self; the registry is this pool's.
        unsafe { crate::spawn::spawn_flagged_in(self.raw, self.own_registry(), op, sys::BLZ_SPAWN_HIGH_PRIORITY) }
    }

    /// From now on at most `n` workers run jobs at once; the others sleep
    /// until the cap is raised. 0 lifts the cap. Lowering it takes effect
    /// as running jobs finish; a worker waiting in a `join` (and the jobs it
    /// runs meanwhile) counts as one. `blz_pool_set_max_active` in blitz.h
    /// has the whole contract.
    ///
    /// ```
    /// let pool = blitz::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
    /// pool.set_max_active(1)?;
    /// assert_eq!(pool.install(|| 6 * 7), 42);
    /// pool.set_max_active(0)?;
    /// # Ok::<(), blitz::Error>(())
    /// ```
    pub fn set_max_active(&self, n: usize) -> Result<(), Error> {
        let n = u32::try_from(n).unwrap_or(u32::MAX); // above the pool's size: no cap, as any large n
                                                      // SAFETY: self.raw is alive as long as &self.
        Error::check(unsafe { sys::blz_pool_set_max_active(self.raw, n) })
    }

    /// One worker's counters and times (running, searching, sleeping, in
    /// nanoseconds); the pool's [`stats`](ThreadPool::stats) are their sum.
    /// [`Error::InvalidArgument`] for an index that is not a worker's.
    ///
    /// ```
    /// let pool = blitz::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
    /// let worker = pool.worker_stats(1)?;
    /// assert_eq!(worker.num_threads, 1);
    /// assert!(pool.worker_stats(2).is_err());
    /// # Ok::<(), blitz::Error>(())
    /// ```
    pub fn worker_stats(&self, worker_index: usize) -> Result<Stats, Error> {
        let index = u32::try_from(worker_index).map_err(|_| Error::InvalidArgument)?;
        let mut stats = Stats { struct_size: std::mem::size_of::<Stats>() as u32, ..Default::default() };
        // SAFETY: self.raw is alive as long as &self; stats is a full blz_stats.
        Error::check(unsafe { sys::blz_worker_stats(self.raw, index, &mut stats) })?;
        Ok(stats)
    }

    /// Starts recording what the workers do, for a Chrome Trace Event file
    /// written to `path` by [`trace_stop`](ThreadPool::trace_stop), or when
    /// the pool is dropped. Open it in Perfetto (ui.perfetto.dev) or read it
    /// with `tools/blitz-trace`; `blz_pool_trace_start` in blitz.h says what
    /// is recorded and what it costs, docs/tracing.md how to read it. A job
    /// that runs a closure carries the crate's trampoline, not the closure:
    /// its span is "job" unless the program exports that symbol.
    /// [`Error::InvalidArgument`] for an empty path or one holding
    /// a NUL byte, a path that cannot be opened, or a trace already running.
    ///
    /// ```
    /// let pool = blitz::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
    /// let path = std::env::temp_dir().join(format!("blitz-doc-trace-{}.json", std::process::id()));
    /// pool.trace_start(&path)?;
    /// assert_eq!(pool.install(|| blitz::join(|| 1, || 2)), (1, 2));
    /// pool.trace_stop()?;
    /// assert!(std::fs::read_to_string(&path).unwrap().contains("traceEvents"));
    /// # std::fs::remove_file(&path).unwrap();
    /// # Ok::<(), blitz::Error>(())
    /// ```
    pub fn trace_start<P: AsRef<std::path::Path>>(&self, path: P) -> Result<(), Error> {
        use std::os::unix::ffi::OsStrExt;
        let path = std::ffi::CString::new(path.as_ref().as_os_str().as_bytes()).map_err(|_| Error::InvalidArgument)?;
        // SAFETY: self.raw is alive as long as &self; path is NUL-terminated
        // and only read during the call (the file is opened there).
        Error::check(unsafe { sys::blz_pool_trace_start(self.raw, path.as_ptr()) })
    }

    /// Stops the trace and writes its file. [`Error::InvalidArgument`] when
    /// no trace runs or the file could not be written (the trace is over).
    pub fn trace_stop(&self) -> Result<(), Error> {
        // SAFETY: self.raw is alive as long as &self.
        Error::check(unsafe { sys::blz_pool_trace_stop(self.raw) })
    }

    /// Starts `f` on this pool and returns a handle to wait for its value.
    /// From a worker of this pool the task goes to that worker's queue.
    ///
    /// ```
    /// # let pool = blitz::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
    /// let handle = pool.spawn_with_handle(|| 6 * 7);
    /// assert_eq!(handle.join()?, 42);
    /// # Ok::<(), blitz::Error>(())
    /// ```
    ///
    /// The closure must own what it uses (it may outlive the caller's frame):
    /// ```compile_fail,E0373
    /// let pool = blitz::ThreadPoolBuilder::new().build().unwrap();
    /// let v = vec![1, 2, 3];
    /// let handle = pool.spawn_with_handle(|| v.len());
    /// ```
    pub fn spawn_with_handle<F, T>(&self, f: F) -> JoinHandle<T>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        // SAFETY: self.raw is alive as long as &self.
        unsafe { JoinHandle::spawn(self.raw, self.own_registry(), f) }
    }

    /// Starts `f` on this pool and returns a [`Future`](std::future::Future)
    /// of its value (rayon#679's `spawn_future`): no thread waits, the
    /// task's end wakes whoever polls. A panic of `f` is resumed in the
    /// poll that finds it; dropping the future lets the task run on,
    /// detached. Any executor drives it; here a bare one that parks the
    /// polling thread until it is woken:
    ///
    /// ```
    /// use std::future::Future;
    /// use std::sync::Arc;
    /// use std::task::{Context, Poll, Wake};
    /// use std::thread::{self, Thread};
    ///
    /// struct Unpark(Thread);
    /// impl Wake for Unpark {
    ///     fn wake(self: Arc<Self>) { self.0.unpark() }
    /// }
    ///
    /// let pool = blitz::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
    /// let mut future = Box::pin(pool.spawn_future(|| 6 * 7));
    /// let waker = Arc::new(Unpark(thread::current())).into();
    /// let value = loop {
    ///     match future.as_mut().poll(&mut Context::from_waker(&waker)) {
    ///         Poll::Ready(value) => break value,
    ///         Poll::Pending => thread::park(),
    ///     }
    /// };
    /// assert_eq!(value, 42);
    /// ```
    pub fn spawn_future<F, T>(&self, f: F) -> SpawnFuture<T>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        SpawnFuture::new(self.spawn_with_handle(f))
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

    /// Drops the pool and waits until it has ended: its accepted work has
    /// finished, every exit handler has returned and the threads are joined.
    ///
    /// # Panics
    /// On one of the pool's own workers, which would wait for itself (the
    /// pool is dropped all the same, and ends once that work returns).
    pub fn wait_until_stopped(self) {
        let registry = Arc::clone(&self.registry);
        let own = self.current_thread_index().is_some();
        drop(self);
        if own {
            panic!("blitz: wait_until_stopped on a worker of the same pool would wait for itself");
        }
        registry.wait_until_stopped();
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

pub(crate) struct SendPtr<T>(pub(crate) *mut T);
// SAFETY: used only for handles whose functions may be called from any thread.
unsafe impl<T> Send for SendPtr<T> {}

impl Drop for ThreadPool {
    fn drop(&mut self) {
        // Released now, or by the last detached task (see Registry::work).
        // The Registry may be freed once this returned.
        self.own_registry().pool_dropped();
    }
}

impl fmt::Debug for ThreadPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ThreadPool").field("num_threads", &self.current_num_threads()).finish()
    }
}

/// Runs `a` and `b` and returns both values, as Rayon's `join` does: `a`
/// runs on the calling thread and `b` may be stolen by another worker.
///
/// On a worker of a [`ThreadPool`] (inside `install`, `scope`, `spawn`,
/// `join` or a task) this is that pool's `join`; on any other thread the
/// pair moves into the global pool (built on first use), so the closures
/// may run in parallel there too.
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
/// assert_eq!(pool.install(|| fib(20)), 6765);   // on the pool
/// assert_eq!(fib(10), 55);                       // on the global pool
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
        Some(worker) => unsafe { job::fork_join(worker.pool, a, b) },
        None => global_pool().join(a, b),
    }
}

/// Runs `op` isolated ([`ThreadPool::isolate`]) in the calling worker's
/// pool; on any other thread, in the global pool.
pub fn isolate<OP, R>(op: OP) -> R
where
    OP: FnOnce() -> R + Send,
    R: Send,
{
    match current_worker() {
        // SAFETY: a worker's pool is alive while the worker runs.
        Some(worker) => unsafe { job::isolate(worker.pool, op) },
        None => global_pool().isolate(op),
    }
}

/// Runs `f` on the calling thread as a blocking section (`blz_block_begin`,
/// `blz_block_end`): for a task about to block outside the pool (I/O, a
/// lock, a channel fed from elsewhere). On a pool's worker, the pool stands
/// a spare thread (or a worker its cap held back) in while `f` runs, so
/// joins and other tasks keep as many threads as the pool has; on any other
/// thread nothing changes. Keep only the blocking call inside; sections
/// nest, and a panic of `f` closes the section as it unwinds.
///
/// A spare thread's [`current_thread_index`] is `num_threads` or more
/// (below `num_threads` plus the pool's spare bound, one per worker by
/// default): code that indexes per-thread arrays by it must size them for
/// both.
///
/// ```
/// let pool = blitz::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
/// let (tx, rx) = std::sync::mpsc::channel();
/// pool.spawn(move || {
///     let got = blitz::block_in_place(|| rx.recv().unwrap());  // the worker waits; a spare runs the rest
///     assert_eq!(got, 42);
/// });
/// assert_eq!(pool.install(|| blitz::join(|| 40, || 2)), (40, 2));  // runs while the task waits
/// tx.send(42).unwrap();
/// ```
pub fn block_in_place<F, R>(f: F) -> R
where
    F: FnOnce() -> R,
{
    struct Section;
    impl Drop for Section {
        fn drop(&mut self) {
            // SAFETY: no arguments; closes the section opened below on this
            // thread (BLZ_EINVAL is impossible: it is open).
            unsafe { sys::blz_block_end() };
        }
    }
    // SAFETY: no arguments; never fails (blitz.h).
    unsafe { sys::blz_block_begin() };
    let _section = Section;
    f()
}

/// The calling thread's index in its pool (`0 .. num_threads`) if it is a
/// worker of a [`ThreadPool`], else `None`.
pub fn current_thread_index() -> Option<usize> {
    registry::current_index()
}

/// The number of workers of the calling worker's pool; on any other thread,
/// of the global pool (which this builds if it did not exist yet).
pub fn current_num_threads() -> usize {
    registry::current_num_threads().unwrap_or_else(|| global_pool().current_num_threads())
}

/// The most workers a pool may have: 65535 (libblitz's `BLZ_MAX_THREADS`).
/// More makes `build` fail rather than being cut to this.
pub fn max_num_threads() -> usize {
    sys::BLZ_MAX_THREADS as usize
}

/// Calls `op` once on every worker of the current pool (the calling
/// worker's, else the global one) and returns the values in the workers'
/// order: [`ThreadPool::broadcast`] on that pool.
///
/// ```
/// let pool = blitz::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
/// let indices = pool.install(|| blitz::broadcast(|ctx| ctx.index()));
/// assert_eq!(indices, [0, 1]);
/// let global = blitz::broadcast(|ctx| ctx.num_threads());
/// assert_eq!(global.len(), blitz::current_num_threads());
/// ```
pub fn broadcast<OP, R>(op: OP) -> Vec<R>
where
    OP: Fn(BroadcastContext<'_>) -> R + Sync,
    R: Send,
{
    match current_worker() {
        // SAFETY: a worker's pool is alive while the worker runs.
        Some(worker) => unsafe { broadcast::run(worker.pool, op) },
        None => global_pool().broadcast(op),
    }
}

/// [`ThreadPool::spawn_broadcast`] on the current pool (the calling
/// worker's, else the global one).
pub fn spawn_broadcast<OP>(op: OP)
where
    OP: Fn(BroadcastContext<'_>) + Send + Sync + 'static,
{
    match current_worker() {
        // SAFETY: a worker's pool is alive while the worker runs.
        Some(worker) => unsafe { broadcast::spawn_broadcast(worker.pool, &*worker.registry, op) },
        None => global_pool().spawn_broadcast(op),
    }
}

/// [`ThreadPool::spawn`] on the current pool (the calling worker's, else
/// the global one): fire and forget.
///
/// ```
/// let (tx, rx) = std::sync::mpsc::channel();
/// blitz::spawn(move || tx.send(blitz::current_thread_index().is_some()).unwrap());
/// assert!(rx.recv().unwrap()); // it ran on a worker of the global pool
/// ```
pub fn spawn<OP>(op: OP)
where
    OP: FnOnce() + Send + 'static,
{
    match current_worker() {
        // SAFETY: a worker's pool and Registry are alive while the worker runs.
        Some(worker) => unsafe {
            if (*worker.registry).breadth_first {
                spawn_fifo_in(worker.pool, &*worker.registry, op)
            } else {
                spawn_in(worker.pool, &*worker.registry, op)
            }
        },
        None => global_pool().spawn(op),
    }
}

/// [`ThreadPool::spawn_future`] on the current pool (the calling worker's,
/// else the global one).
pub fn spawn_future<F, T>(f: F) -> SpawnFuture<T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    match current_worker() {
        // SAFETY: a worker's pool and Registry are alive while the worker runs.
        Some(worker) => SpawnFuture::new(unsafe { JoinHandle::spawn(worker.pool, &*worker.registry, f) }),
        None => global_pool().spawn_future(f),
    }
}

/// [`ThreadPool::spawn_fifo`] on the current pool (the calling worker's,
/// else the global one).
pub fn spawn_fifo<OP>(op: OP)
where
    OP: FnOnce() + Send + 'static,
{
    match current_worker() {
        // SAFETY: as in `spawn`.
        Some(worker) => unsafe { spawn_fifo_in(worker.pool, &*worker.registry, op) },
        None => global_pool().spawn_fifo(op),
    }
}

/// Whether the work the calling thread does belongs to a cancelled scope:
/// `true` inside a task of a scope that was cancelled (by
/// [`Scope::cancel`] or by a panic in a
/// [fail-fast](ThreadPool::scope_fail_fast) scope), and inside what such a
/// task runs through [`join()`], `install` or a nested call, wherever it is
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
