//! The Rust side of one pool (`Registry`): the handlers the C hooks call,
//! the per-worker FIFO queues of `spawn_fifo`, the "stopped" signal, the
//! thread-local that tells a worker which pool it belongs to, and the
//! global pool.
use std::any::Any;
use std::cell::Cell;
use std::collections::VecDeque;
use std::fmt;
use std::io::{self, Write as _};
use std::os::raw::c_void;
use std::panic::{self, AssertUnwindSafe};
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use blitz_sys as sys;

use crate::builder::{ThreadPoolBuildError, ThreadPoolBuilder, ThreadSpawn};
use crate::job::drop_payload;
use crate::ThreadPool;

pub(crate) type Handler = Box<dyn Fn(usize) + Send + Sync + 'static>;
pub(crate) type PanicHandler = Box<dyn Fn(Box<dyn Any + Send>) + Send + Sync + 'static>;
/// A closure queued by `spawn_fifo` on a worker, run by the next of that
/// worker's queue references to execute.
pub(crate) type FifoJob = Box<dyn FnOnce() + Send + 'static>;
pub(crate) type FifoQueue = Mutex<VecDeque<FifoJob>>;

/// Locks a mutex whose data stays consistent even if a holder panicked:
/// every critical section here is a push, a pop or a store.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Set once, when the pool's destroy has finished: every worker ran its
/// exit handler and was joined. Shared with the `ThreadBuilder`s, which
/// exist before the pool does.
#[derive(Default)]
pub(crate) struct StopSignal {
    stopped: Mutex<bool>,
    cv: Condvar,
}

impl StopSignal {
    pub(crate) fn set(&self) {
        *lock(&self.stopped) = true;
        self.cv.notify_all();
    }

    pub(crate) fn is_set(&self) -> bool {
        *lock(&self.stopped)
    }

    pub(crate) fn wait(&self) {
        let mut stopped = lock(&self.stopped);
        while !*stopped {
            stopped = self.cv.wait(stopped).unwrap_or_else(|poisoned| poisoned.into_inner());
        }
    }
}

/// The Rust side of one pool: what its workers and its free functions need
/// to know, and a way to wait for the pool's end.
///
/// A [`ThreadPool`] holds one in its public field `registry`; keep an
/// `Arc` of it to wait for the workers after the pool was dropped:
///
/// ```
/// use std::sync::Arc;
/// let pool = blitz::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
/// let registry = Arc::clone(&pool.registry);
/// pool.spawn(|| std::thread::sleep(std::time::Duration::from_millis(10)));
/// drop(pool); // returns at once; the task still runs
/// registry.wait_until_stopped(); // the task ran, the workers are gone
/// assert!(registry.is_stopped());
/// assert_eq!(registry.num_threads(), 2);
/// ```
pub struct Registry {
    /// The C pool, published once `blz_pool_create` returned. Until then no
    /// job can reach a worker (nobody holds the handle to submit one).
    pool: AtomicPtr<sys::blz_pool>,
    num_threads: usize,
    start_handler: Option<Handler>,
    exit_handler: Option<Handler>,
    panic_handler: Option<PanicHandler>,
    /// `spawn` and `Scope::spawn` queue as their FIFO forms do (the
    /// deprecated `breadth_first` hint).
    pub(crate) breadth_first: bool,
    /// One FIFO queue per worker for `spawn_fifo` from that worker.
    pub(crate) fifos: Box<[FifoQueue]>,
    /// Detached work not finished (`spawn`, `spawn_fifo`, `spawn_broadcast`
    /// and handle tasks), times two, plus 1 once the `ThreadPool` was
    /// dropped. The pool is released (`blz_pool_release`) when both hold:
    /// dropped, and no detached work left. Until then its work may still
    /// do everything a pool's work does, creating scopes too (libblitz
    /// refuses new groups once its destroy has begun). Work that is not
    /// detached needs no count: it runs inside a call that holds the pool
    /// (`install`, `scope`, `join`, `broadcast`) or inside detached work.
    work: AtomicUsize,
    /// Set by the one `release` that calls `blz_pool_release`.
    released: AtomicBool,
    stop: Arc<StopSignal>,
}

pub(crate) struct RegistryParts {
    pub(crate) num_threads: usize,
    pub(crate) start_handler: Option<Handler>,
    pub(crate) exit_handler: Option<Handler>,
    pub(crate) panic_handler: Option<PanicHandler>,
    pub(crate) breadth_first: bool,
    pub(crate) stop: Arc<StopSignal>,
}

impl Registry {
    pub(crate) fn new(parts: RegistryParts) -> Registry {
        Registry {
            pool: AtomicPtr::new(ptr::null_mut()),
            num_threads: parts.num_threads,
            start_handler: parts.start_handler,
            exit_handler: parts.exit_handler,
            panic_handler: parts.panic_handler,
            breadth_first: parts.breadth_first,
            fifos: (0..parts.num_threads).map(|_| Mutex::new(VecDeque::new())).collect(),
            work: AtomicUsize::new(0),
            released: AtomicBool::new(false),
            stop: parts.stop,
        }
    }

    /// Detached work is about to be submitted: counted first, so that the
    /// pool cannot be released while it is on its way.
    pub(crate) fn work_started(&self) {
        // Relaxed: only the count matters; the RMWs on `work` are ordered
        // among themselves, and the release that reads the last one is AcqRel.
        self.work.fetch_add(2, Ordering::Relaxed);
    }

    /// Detached work has finished (or was refused): the last of it after
    /// the drop releases the pool. Called on a worker of the pool (or by
    /// the submitter of refused work); `self` may be freed once this
    /// returns and the caller's job has ended.
    pub(crate) fn work_finished(&self) {
        // AcqRel: whoever releases sees the other work's last accesses.
        if self.work.fetch_sub(2, Ordering::AcqRel) == 3 {
            self.release();
        }
    }

    /// The `ThreadPool` was dropped: released now unless detached work is
    /// left, whose last piece then releases it. `self` may be freed once
    /// this returned.
    pub(crate) fn pool_dropped(&self) {
        if self.work.fetch_or(1, Ordering::AcqRel) == 0 {
            self.release();
        }
    }

    /// Gives the pool up, once: `blz_pool_release` destroys it on a thread
    /// of libblitz's, then `on_destroyed` marks this Registry stopped and
    /// gives up the hooks' `Arc` of it.
    fn release(&self) {
        // Once only: work refused after the release (a spawn from an exit
        // handler) must not release again.
        if self.released.swap(true, Ordering::AcqRel) {
            return;
        }
        let pool = self.pool.load(Ordering::Acquire);
        // The hooks' Arc: `Arc::into_raw` gave exactly this address.
        let done_arg = self as *const Registry as *mut c_void;
        // SAFETY: the pool handle is given up here, once; from now on only
        // its own workers, inside accepted work, use it. After the call
        // `self` may be freed at any time: it is not touched again.
        let status = unsafe { sys::blz_pool_release(pool, Some(on_destroyed), done_arg) };
        if status == sys::BLZ_OK || status == sys::BLZ_EFORK {
            return; // on_destroyed has run or will run
        }
        // No thread could be started for the release (ENOMEM, ETHREAD):
        // destroy here, waiting, unless this is one of the pool's own
        // workers, which would wait for itself; then the pool is leaked.
        // SAFETY: as above; destroy then on_destroyed, as the release
        // thread would have done.
        unsafe {
            if sys::blz_worker_index(pool) < 0 {
                let status = sys::blz_pool_destroy(pool);
                on_destroyed(done_arg, status);
            } else {
                let _ = writeln!(
                    io::stderr(),
                    "blitz: no thread to release a pool dropped on its own worker (status {}); the pool is leaked",
                    status
                );
            }
        }
    }

    pub(crate) fn publish(&self, pool: *mut sys::blz_pool) {
        // Release: pairs with the Acquire in current_worker, so that a worker
        // that sees the handle also sees everything `build` did before.
        self.pool.store(pool, Ordering::Release);
    }

    /// The number of workers of the pool.
    pub fn num_threads(&self) -> usize {
        self.num_threads
    }

    /// Whether the pool has ended: it was dropped, every accepted task
    /// finished, every exit handler returned and the threads were joined.
    pub fn is_stopped(&self) -> bool {
        self.stop.is_set()
    }

    /// Blocks until the pool has ended (see [`Registry::is_stopped`]).
    /// Dropping the [`ThreadPool`] starts the end; until then this waits.
    ///
    /// # Panics
    /// On one of the pool's own workers, which would wait for itself.
    pub fn wait_until_stopped(&self) {
        if let Some(worker) = current_worker() {
            if ptr::eq(worker.registry, self) {
                panic!("blitz: wait_until_stopped on a worker of the same pool would wait for itself");
            }
        }
        self.stop.wait();
    }

    /// Calls the pool's panic handler with a panic nobody else can take
    /// (a detached `spawn`, a `spawn_broadcast` call, a start or exit
    /// handler). With no handler, or if the handler itself panics, the
    /// process aborts, as Rayon does: a panic must not go unobserved. Never
    /// unwinds, so it may be called where the C boundary is near.
    pub(crate) fn handle_panic(&self, payload: Box<dyn Any + Send>) {
        match &self.panic_handler {
            Some(handler) => {
                if let Err(again) = panic::catch_unwind(AssertUnwindSafe(|| handler(payload))) {
                    std::mem::forget(again);
                    abort("the panic_handler panicked");
                }
            }
            None => {
                drop_payload(payload);
                abort("a spawned closure or a worker handler panicked and the pool has no panic_handler");
            }
        }
    }

    fn run_handler(&self, handler: &Option<Handler>, index: usize) {
        if let Some(handler) = handler {
            if let Err(payload) = panic::catch_unwind(AssertUnwindSafe(|| handler(index))) {
                self.handle_panic(payload);
            }
        }
    }
}

impl fmt::Debug for Registry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Registry")
            .field("num_threads", &self.num_threads)
            .field("stopped", &self.is_stopped())
            .finish_non_exhaustive()
    }
}

/// Ends the process after a panic that has nowhere to go. Writes with
/// `write!` rather than `eprintln!`, which would panic if stderr is closed.
#[cold]
pub(crate) fn abort(why: &str) -> ! {
    let _ = writeln!(io::stderr(), "blitz: {}: aborting", why);
    std::process::abort()
}

thread_local! {
    /// On a worker of a pool built by this crate: its Registry and the
    /// worker's index. Set by `on_thread_start`, cleared by `on_thread_stop`.
    static CURRENT: Cell<(*const Registry, usize)> = const { Cell::new((ptr::null(), 0)) };
}

/// The calling thread's worker identity, to put back after it served
/// another pool as that pool's worker (`ThreadBuilder::run` inside a job):
/// the inner pool's `on_thread_stop` leaves it cleared.
pub(crate) fn save_current() -> (*const Registry, usize) {
    CURRENT.try_with(Cell::get).unwrap_or((ptr::null(), 0))
}

/// Puts back what `save_current` returned.
pub(crate) fn restore_current(saved: (*const Registry, usize)) {
    let _ = CURRENT.try_with(|c| c.set(saved));
}

/// What a worker knows of itself.
#[derive(Clone, Copy)]
pub(crate) struct WorkerRef {
    /// Alive while the worker runs: the C hooks' `Arc` is released only
    /// after every worker was joined.
    pub(crate) registry: *const Registry,
    pub(crate) pool: *mut sys::blz_pool,
    pub(crate) index: usize,
}

/// The calling thread as a worker of a pool of this crate whose `build`
/// has returned, or None.
#[inline(always)]
pub(crate) fn current_worker() -> Option<WorkerRef> {
    let (registry, index) = CURRENT.try_with(Cell::get).unwrap_or((ptr::null(), 0));
    if registry.is_null() {
        return global_worker();
    }
    // SAFETY: a worker's Registry outlives the worker (see WorkerRef).
    // Acquire: pairs with the Release in `publish`.
    let pool = unsafe { (*registry).pool.load(Ordering::Acquire) };
    if pool.is_null() {
        None
    } else {
        Some(WorkerRef { registry, pool, index })
    }
}

thread_local! {
    /// On a worker of the global pool that no hook of ours marked (see
    /// global_worker): its index + 1, once asked; 0 until then.
    static GLOBAL_INDEX: Cell<usize> = const { Cell::new(0) };
}

/// The calling thread as a worker of the global pool when no hook set
/// CURRENT: the process pool may have been created by another user of
/// libblitz (C code, Python), without our hooks, so its workers are asked
/// of libblitz (`blz_worker_index`). A yes is kept in a thread-local: a
/// worker of the process pool stays one for its whole life, since the
/// global pool's reference keeps that pool from ever ending. A no is asked
/// again each time (a cheap call; a thread outside the pool pays it only
/// on its way into the pool), so that no answer can go stale.
#[cold]
fn global_worker() -> Option<WorkerRef> {
    // Acquire: pairs with the Release in init_global (the pool is built).
    let global = GLOBAL.load(Ordering::Acquire);
    if global.is_null() {
        return None;
    }
    // SAFETY: the global pool is never freed once published.
    let global = unsafe { &*global };
    let pool = global.as_raw();
    let known = GLOBAL_INDEX.try_with(Cell::get).unwrap_or(0);
    let index = if known != 0 {
        known - 1
    } else {
        // SAFETY: the process pool's handle, whose reference is never given up.
        let index = unsafe { sys::blz_worker_index(pool) };
        if index < 0 {
            return None;
        }
        let _ = GLOBAL_INDEX.try_with(|c| c.set(index as usize + 1));
        index as usize
    };
    Some(WorkerRef { registry: global.own_registry(), pool, index })
}

/// The calling worker's index, also in a start handler (before the pool's
/// handle is known).
pub(crate) fn current_index() -> Option<usize> {
    let (registry, index) = CURRENT.try_with(Cell::get).unwrap_or((ptr::null(), 0));
    if registry.is_null() {
        global_worker().map(|worker| worker.index)
    } else {
        Some(index)
    }
}

/// The pool the free functions work in, and whether it spawns breadth
/// first: the calling worker's pool, else the global one (built on first
/// use). The pool outlives the caller's use of it: a worker's pool outlives
/// its workers' work, and the global pool is never dropped.
pub(crate) fn current_or_global() -> (*mut sys::blz_pool, bool) {
    match current_worker() {
        // SAFETY: a worker's Registry outlives the worker (see WorkerRef).
        Some(worker) => (worker.pool, unsafe { (*worker.registry).breadth_first }),
        None => {
            let global = global_pool();
            (global.as_raw(), global.breadth_first())
        }
    }
}

/// The number of workers of the calling worker's pool, also in a start
/// handler (before the pool's handle is known); None on any other thread.
pub(crate) fn current_num_threads() -> Option<usize> {
    let (registry, _) = CURRENT.try_with(Cell::get).unwrap_or((ptr::null(), 0));
    if registry.is_null() {
        // SAFETY: as in current_worker.
        return global_worker().map(|worker| unsafe { (*worker.registry).num_threads });
    }
    // SAFETY: as in current_worker.
    unsafe { registry.as_ref() }.map(|registry| registry.num_threads)
}

/// Runs `f` with the registry of the worker this runs on. Used in the
/// trampolines of detached work, which always runs on a worker of its pool.
pub(crate) fn with_worker_registry(f: impl FnOnce(&Registry)) {
    let (mut registry, _) = CURRENT.try_with(Cell::get).unwrap_or((ptr::null(), 0));
    if registry.is_null() {
        registry = global_worker().map_or(ptr::null(), |worker| worker.registry);
    }
    if registry.is_null() {
        abort("detached work ran outside a worker of its pool");
    }
    // SAFETY: as in current_worker.
    f(unsafe { &*registry })
}

/// The C `on_thread_start` of every pool of this crate.
///
/// # Safety
/// `user` is the Registry whose `Arc` the pool's config holds (see
/// `ThreadPool`'s `hooks_ref`), alive until after `on_thread_stop`.
pub(crate) unsafe extern "C" fn on_thread_start(user: *mut c_void, worker_index: u32) {
    let registry = &*(user as *const Registry);
    let index = worker_index as usize;
    let _ = CURRENT.try_with(|c| c.set((registry as *const Registry, index)));
    // run_handler never unwinds (handle_panic aborts rather than unwind).
    registry.run_handler(&registry.start_handler, index);
}

/// The C `on_thread_stop`: the exit handler, then the worker is no worker.
///
/// # Safety
/// As for `on_thread_start`.
pub(crate) unsafe extern "C" fn on_thread_stop(user: *mut c_void, worker_index: u32) {
    let registry = &*(user as *const Registry);
    registry.run_handler(&registry.exit_handler, worker_index as usize);
    let _ = CURRENT.try_with(|c| c.set((ptr::null(), 0)));
}

/// `on_destroyed` of `blz_pool_release`: the pool is gone, its workers
/// joined; the hooks' `Arc` of the Registry is given up here.
///
/// # Safety
/// `done_arg` is the pointer `Arc::into_raw` made for the hooks, given up once.
pub(crate) unsafe extern "C" fn on_destroyed(done_arg: *mut c_void, _status: sys::blz_status) {
    let registry = Arc::from_raw(done_arg as *const Registry);
    registry.stop.set();
    // The last Arc drops the user's handlers here; their destructors may panic.
    if let Err(payload) = panic::catch_unwind(AssertUnwindSafe(move || drop(registry))) {
        std::mem::forget(payload);
    }
}

// ---- The global pool: built on first use, or once by build_global.

static GLOBAL: AtomicPtr<ThreadPool> = AtomicPtr::new(ptr::null_mut());
static GLOBAL_INIT: Mutex<()> = Mutex::new(());

/// Installs a pool built by `builder` as the global pool, unless one exists.
pub(crate) fn init_global<S: ThreadSpawn>(
    builder: ThreadPoolBuilder<S>,
) -> Result<&'static ThreadPool, ThreadPoolBuildError> {
    let _guard = lock(&GLOBAL_INIT);
    if !GLOBAL.load(Ordering::Acquire).is_null() {
        return Err(ThreadPoolBuildError::global_pool_already_initialized());
    }
    let pool = builder.build_process_pool()?;
    // Leaked on purpose: the global pool lives as long as the process, and
    // with it the process pool's reference (see global_worker).
    let pool = Box::into_raw(Box::new(pool));
    // Release: pairs with the Acquire in global_pool.
    GLOBAL.store(pool, Ordering::Release);
    // SAFETY: never freed.
    Ok(unsafe { &*pool })
}

/// The global pool, on the process pool (`blz_pool_shared`: the pool
/// every libblitz user of the process shares, created with libblitz's
/// defaults by whoever comes first), taken on first use.
///
/// # Panics
/// If it cannot be built (the OS refused its threads).
pub(crate) fn global_pool() -> &'static ThreadPool {
    let pool = GLOBAL.load(Ordering::Acquire);
    if !pool.is_null() {
        // SAFETY: never freed once published.
        return unsafe { &*pool };
    }
    init_global(ThreadPoolBuilder::new()).unwrap_or_else(|error| {
        let pool = GLOBAL.load(Ordering::Acquire);
        if pool.is_null() {
            panic!("blitz: the global thread pool could not be built: {}", error);
        }
        // SAFETY: as above (another thread built it first).
        unsafe { &*pool }
    })
}
