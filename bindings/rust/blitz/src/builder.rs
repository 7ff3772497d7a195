//! `ThreadPoolBuilder` (Rayon's, over `blz_pool_create`), its error type,
//! custom thread spawning, and the deprecated `Configuration`.
use std::any::Any;
use std::error::Error as StdError;
use std::ffi::CString;
use std::fmt;
use std::io;
use std::os::raw::c_void;
use std::panic::{self, AssertUnwindSafe};
use std::ptr;
use std::sync::Arc;

use blitz_sys as sys;

use crate::registry::{
    self, on_thread_start, on_thread_stop, Handler, PanicHandler, Registry, RegistryParts, StopSignal,
};
use crate::{Error, ThreadPool};

/// Why a pool could not be built.
#[derive(Debug)]
pub struct ThreadPoolBuildError {
    kind: BuildErrorKind,
}

#[derive(Debug)]
enum BuildErrorKind {
    GlobalPoolAlreadyInitialized,
    /// libblitz refused: too many threads, a bad stack size or name, out
    /// of memory, or the OS refused a worker thread.
    Library(Error),
    /// A spawn handler's error.
    Io(io::Error),
}

const GLOBAL_POOL_ALREADY_INITIALIZED: &str = "The global thread pool has already been initialized.";

impl ThreadPoolBuildError {
    pub(crate) fn global_pool_already_initialized() -> ThreadPoolBuildError {
        ThreadPoolBuildError { kind: BuildErrorKind::GlobalPoolAlreadyInitialized }
    }

    /// The libblitz error behind it, if libblitz refused the pool
    /// ([`Error::InvalidArgument`], [`Error::OutOfMemory`], [`Error::ThreadSpawn`]).
    pub fn library_error(&self) -> Option<&Error> {
        match &self.kind {
            BuildErrorKind::Library(error) => Some(error),
            _ => None,
        }
    }

    /// Whether [`ThreadPoolBuilder::build_global`] found a global pool already there.
    pub fn is_global_pool_already_initialized(&self) -> bool {
        matches!(self.kind, BuildErrorKind::GlobalPoolAlreadyInitialized)
    }
}

impl From<Error> for ThreadPoolBuildError {
    fn from(error: Error) -> ThreadPoolBuildError {
        ThreadPoolBuildError { kind: BuildErrorKind::Library(error) }
    }
}

impl fmt::Display for ThreadPoolBuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            BuildErrorKind::GlobalPoolAlreadyInitialized => f.write_str(GLOBAL_POOL_ALREADY_INITIALIZED),
            BuildErrorKind::Library(error) => fmt::Display::fmt(error, f),
            BuildErrorKind::Io(error) => fmt::Display::fmt(error, f),
        }
    }
}

impl StdError for ThreadPoolBuildError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        match &self.kind {
            BuildErrorKind::GlobalPoolAlreadyInitialized => None,
            BuildErrorKind::Library(error) => Some(error),
            BuildErrorKind::Io(error) => Some(error),
        }
    }
}

/// A worker thread to start, given to a [spawn handler](ThreadPoolBuilder::spawn_handler).
///
/// The handler starts a thread (or hands the work to one it has) that
/// calls [`run`](ThreadBuilder::run): that thread is then the pool's worker
/// `index` until the pool has ended, so thread-locals it set before `run`
/// are seen by the pool's jobs, as in Rayon. `run` must be called exactly
/// once, and not on the thread that builds the pool (the build returns
/// without waiting for it; the pool's end waits for every `run`): a
/// `ThreadBuilder` dropped without `run` leaves the pool's end waiting
/// for ever.
pub struct ThreadBuilder {
    index: usize,
    name: Option<String>,
    stack_size: Option<usize>,
    run: WorkerRun,
}

/// libblitz's `run(run_arg)` for one worker.
struct WorkerRun {
    run: unsafe extern "C" fn(*mut c_void),
    arg: *mut c_void,
}

// SAFETY: the run belongs to whichever thread calls it, once; libblitz
// keeps its worker alive until that call has returned.
unsafe impl Send for WorkerRun {}

impl ThreadBuilder {
    /// The index of the worker this stands for, `0 .. num_threads`.
    pub fn index(&self) -> usize {
        self.index
    }

    /// The name the builder gives the worker, if it names them.
    pub fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }

    /// The stack size the builder asked for, if any.
    pub fn stack_size(&self) -> Option<usize> {
        self.stack_size
    }

    /// Runs the worker on the calling thread: its start handler, the
    /// pool's jobs until the pool has ended, its exit handler; then returns.
    ///
    /// The calling thread may be a worker of another pool (this is called
    /// from one of its jobs): while this runs it is this pool's worker
    /// only, and when it returns it is that pool's worker again, with its
    /// index, as libblitz restores its own state (blitz.h, `spawn_thread`).
    pub fn run(self) {
        let outer = crate::registry::save_current();
        // SAFETY: called once (self is consumed), as blz_pool_config.spawn_thread requires.
        unsafe { (self.run.run)(self.run.arg) }
        crate::registry::restore_current(outer);
    }
}

impl fmt::Debug for ThreadBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ThreadBuilder")
            .field("index", &self.index)
            .field("name", &self.name)
            .field("stack_size", &self.stack_size)
            .finish()
    }
}

mod sealed {
    pub trait Sealed {}
}

/// How a builder hands out its [`ThreadBuilder`]s: [`DefaultSpawn`] or the
/// closure given to [`ThreadPoolBuilder::spawn_handler`]. Sealed.
pub trait ThreadSpawn: sealed::Sealed {
    #[doc(hidden)]
    fn spawn(&mut self, thread: ThreadBuilder) -> io::Result<()>;
    #[doc(hidden)]
    fn is_default(&self) -> bool {
        false
    }
}

/// No spawn handler: libblitz starts the worker threads, or, with a name
/// closure, std threads with those names do (as Rayon's default does).
#[derive(Debug, Default, Clone, Copy)]
pub struct DefaultSpawn;

impl sealed::Sealed for DefaultSpawn {}

impl ThreadSpawn for DefaultSpawn {
    /// Rayon's default: a std thread with the worker's name and stack size
    /// (used when a name closure is set; else libblitz starts its own).
    fn spawn(&mut self, thread: ThreadBuilder) -> io::Result<()> {
        let mut builder = std::thread::Builder::new();
        if let Some(name) = thread.name() {
            builder = builder.name(name.to_string());
        }
        if let Some(size) = thread.stack_size() {
            builder = builder.stack_size(size);
        }
        builder.spawn(move || thread.run()).map(drop)
    }
    fn is_default(&self) -> bool {
        true
    }
}

/// A spawn handler given to [`ThreadPoolBuilder::spawn_handler`].
#[derive(Debug)]
pub struct CustomSpawn<F>(F);

impl<F> sealed::Sealed for CustomSpawn<F> where F: FnMut(ThreadBuilder) -> io::Result<()> {}

impl<F> ThreadSpawn for CustomSpawn<F>
where
    F: FnMut(ThreadBuilder) -> io::Result<()>,
{
    fn spawn(&mut self, thread: ThreadBuilder) -> io::Result<()> {
        (self.0)(thread)
    }
}

type NameFn = Box<dyn FnMut(usize) -> String>;

/// Configures and builds a [`ThreadPool`], or the global pool, as Rayon's
/// builder does.
///
/// ```
/// let pool = blitz::ThreadPoolBuilder::new()
///     .num_threads(2)
///     .thread_name(|i| format!("worker-{}", i))   // "worker-0", "worker-1"
///     .build()?;
/// assert_eq!(pool.current_num_threads(), 2);
/// # Ok::<(), blitz::ThreadPoolBuildError>(())
/// ```
pub struct ThreadPoolBuilder<S = DefaultSpawn> {
    num_threads: usize,
    get_thread_name: Option<NameFn>,
    thread_name_prefix: Option<String>,
    stack_size: Option<usize>,
    start_handler: Option<Handler>,
    exit_handler: Option<Handler>,
    panic_handler: Option<PanicHandler>,
    breadth_first: bool,
    cpu_list: Option<String>,
    spawn_handler: S,
}

impl Default for ThreadPoolBuilder {
    fn default() -> Self {
        ThreadPoolBuilder {
            num_threads: 0,
            get_thread_name: None,
            thread_name_prefix: None,
            stack_size: None,
            start_handler: None,
            exit_handler: None,
            panic_handler: None,
            breadth_first: false,
            cpu_list: None,
            spawn_handler: DefaultSpawn,
        }
    }
}

impl ThreadPoolBuilder {
    /// A builder with the defaults: `BLZ_NUM_THREADS` workers if it holds
    /// 1..65535, else one per CPU this process may run on; workers named
    /// "blz-0", "blz-1", ...; no handlers.
    pub fn new() -> Self {
        Self::default()
    }

    /// Builds a pool whose workers start by calling `wrapper` with their
    /// [`ThreadBuilder`], on threads of a [`std::thread::scope`], calls
    /// `with_pool` with the pool, then drops the pool and returns
    /// `with_pool`'s value once the pool has ended and the threads have
    /// returned: anything `wrapper` borrows outlives them.
    ///
    /// As with every [spawn handler](ThreadPoolBuilder::spawn_handler), the
    /// thread that calls `wrapper` is the pool's worker while
    /// `ThreadBuilder::run` runs on it (libblitz's `spawn_thread`): the
    /// pool's work runs on these threads, so what `wrapper` sets up around
    /// `run` (a scoped thread-local) is seen by that work.
    ///
    /// ```
    /// thread_local!(static TAG: std::cell::Cell<u32> = const { std::cell::Cell::new(0) });
    /// let (total, tags) = blitz::ThreadPoolBuilder::new().num_threads(2).build_scoped(
    ///     |thread| {
    ///         TAG.with(|t| t.set(7));
    ///         thread.run()
    ///     },
    ///     |pool| (pool.install(|| blitz::join(|| 1, || 2)), pool.broadcast(|_| TAG.with(|t| t.get()))),
    /// )?;
    /// assert_eq!(total, (1, 2));
    /// assert_eq!(tags, [7, 7]);
    /// # Ok::<(), blitz::ThreadPoolBuildError>(())
    /// ```
    pub fn build_scoped<W, F, R>(self, wrapper: W, with_pool: F) -> Result<R, ThreadPoolBuildError>
    where
        W: Fn(ThreadBuilder) + Sync,
        F: FnOnce(&ThreadPool) -> R,
    {
        std::thread::scope(|scope| {
            let wrapper = &wrapper;
            let pool = self
                .spawn_handler(|thread| {
                    let mut builder = std::thread::Builder::new();
                    if let Some(name) = thread.name() {
                        builder = builder.name(name.to_string());
                    }
                    if let Some(size) = thread.stack_size() {
                        builder = builder.stack_size(size);
                    }
                    builder.spawn_scoped(scope, move || wrapper(thread))?;
                    Ok(())
                })
                .build()?;
            Ok(with_pool(&pool))
            // The pool is dropped here; the scope then joins the threads,
            // whose `run` returns once the pool has ended.
        })
    }
}

impl<S: ThreadSpawn> ThreadPoolBuilder<S> {
    /// Creates the pool and starts its workers.
    ///
    /// Fails when libblitz refuses ([`ThreadPoolBuildError::library_error`]:
    /// [`Error::InvalidArgument`] for more than 65535 threads, a NUL byte in
    /// a name or a stack size the platform rejects; [`Error::OutOfMemory`];
    /// [`Error::ThreadSpawn`]) or when the spawn handler returns an error.
    /// A name closure that panics makes `build` panic; as in Rayon, the
    /// workers named before it were started, and are stopped again.
    pub fn build(self) -> Result<ThreadPool, ThreadPoolBuildError> {
        self.build_pool()
    }

    /// Builds the global pool with this configuration, which the free
    /// functions ([`crate::join()`], [`crate::scope()`], [`crate::spawn()`], ...)
    /// use on threads that are no workers. Optional: without it the global
    /// pool is built with the defaults on first use. Works once: afterwards
    /// (or after that first use) it returns an error.
    ///
    /// ```
    /// // (In a fresh process; this doctest is one.)
    /// blitz::ThreadPoolBuilder::new().num_threads(2).build_global()?;
    /// assert_eq!(blitz::current_num_threads(), 2);
    /// let again = blitz::ThreadPoolBuilder::new().build_global().unwrap_err();
    /// assert!(again.is_global_pool_already_initialized());
    /// # Ok::<(), blitz::ThreadPoolBuildError>(())
    /// ```
    pub fn build_global(self) -> Result<(), ThreadPoolBuildError> {
        registry::init_global(self).map(|_| ())
    }
}

impl<S> ThreadPoolBuilder<S> {
    /// Sets a custom function for starting threads: it gets a
    /// [`ThreadBuilder`] for each worker, in index order, and typically
    /// starts a thread that calls [`ThreadBuilder::run`]. An error from it
    /// fails the build (the workers handed out before it are stopped).
    ///
    /// libblitz starts its workers itself; see [`ThreadBuilder`] for what
    /// the handler's threads are then for.
    ///
    /// ```
    /// let mut handles = Vec::new();
    /// let pool = blitz::ThreadPoolBuilder::new()
    ///     .num_threads(2)
    ///     .spawn_handler(|thread| {
    ///         handles.push(std::thread::spawn(move || thread.run()));
    ///         Ok(())
    ///     })
    ///     .build()?;
    /// assert_eq!(pool.install(|| 6 * 7), 42);
    /// drop(pool);
    /// for handle in handles {
    ///     handle.join().unwrap(); // returns once the pool has ended
    /// }
    /// # Ok::<(), blitz::ThreadPoolBuildError>(())
    /// ```
    pub fn spawn_handler<F>(self, spawn: F) -> ThreadPoolBuilder<CustomSpawn<F>>
    where
        F: FnMut(ThreadBuilder) -> io::Result<()>,
    {
        ThreadPoolBuilder {
            num_threads: self.num_threads,
            get_thread_name: self.get_thread_name,
            thread_name_prefix: self.thread_name_prefix,
            stack_size: self.stack_size,
            start_handler: self.start_handler,
            exit_handler: self.exit_handler,
            panic_handler: self.panic_handler,
            breadth_first: self.breadth_first,
            cpu_list: self.cpu_list,
            spawn_handler: CustomSpawn(spawn),
        }
    }

    /// The number of workers; 0 (the default) means `BLZ_NUM_THREADS` if it
    /// holds 1..65535, else the number of CPUs this process may run on
    /// ([`std::thread::available_parallelism`]). More than 65535 makes
    /// `build` fail with [`Error::InvalidArgument`].
    pub fn num_threads(mut self, num_threads: usize) -> Self {
        self.num_threads = num_threads;
        self
    }

    /// Names each worker: `closure(index)` is called on the building
    /// thread, once per worker in index order. The name goes to the OS
    /// thread (what `ps`, `top` and debuggers show), cut to the 15 bytes
    /// Linux keeps; `std::thread::current().name()` stays `None` on a
    /// worker, which libblitz, not Rust's `std`, started.
    pub fn thread_name<F>(mut self, closure: F) -> Self
    where
        F: FnMut(usize) -> String + 'static,
    {
        self.get_thread_name = Some(Box::new(closure));
        self.thread_name_prefix = None;
        self
    }

    /// Names the workers "`prefix`-0", "`prefix`-1", ... through libblitz
    /// (cut to 15 bytes, the prefix giving way to the index).
    pub fn thread_name_prefix<P: Into<String>>(mut self, prefix: P) -> Self {
        self.thread_name_prefix = Some(prefix.into());
        self.get_thread_name = None;
        self
    }

    /// Pins the workers to CPUs: `list` is a Linux CPU list ("0-3,8-11",
    /// as `taskset -c` takes it); worker i runs on the i-th CPU of the list,
    /// cycling. Without [`num_threads`](ThreadPoolBuilder::num_threads) the
    /// pool has one worker per entry. `build` fails with
    /// [`Error::InvalidArgument`] for a malformed list or a CPU outside the
    /// process's affinity mask. Without it, `BLZ_CPU_LIST` does the same.
    pub fn cpu_list<L: Into<String>>(mut self, list: L) -> Self {
        self.cpu_list = Some(list.into());
        self
    }

    /// Bytes of stack per worker (the platform's default if not set).
    pub fn stack_size(mut self, stack_size: usize) -> Self {
        self.stack_size = Some(stack_size);
        self
    }

    /// Runs on each worker, with its index, before its first job. A panic
    /// in it goes to the [panic handler](ThreadPoolBuilder::panic_handler).
    /// It may run before `build` has returned: [`crate::current_thread_index`]
    /// and [`crate::current_num_threads`] already describe this pool, but
    /// work it starts with the free functions ([`crate::join()`],
    /// [`crate::spawn()`], ...) goes to the global pool, since this pool
    /// cannot be reached yet.
    pub fn start_handler<H>(mut self, handler: H) -> Self
    where
        H: Fn(usize) + Send + Sync + 'static,
    {
        self.start_handler = Some(Box::new(handler));
        self
    }

    /// Runs on each worker, with its index, after its last job, once the
    /// pool was dropped and its work has finished. A panic in it goes to
    /// the [panic handler](ThreadPoolBuilder::panic_handler).
    pub fn exit_handler<H>(mut self, handler: H) -> Self
    where
        H: Fn(usize) + Send + Sync + 'static,
    {
        self.exit_handler = Some(Box::new(handler));
        self
    }

    /// Takes the panics nobody else can: of a detached [`ThreadPool::spawn`]
    /// (and `spawn_fifo`, free [`crate::spawn()`] on this pool's workers), of
    /// each call of a `spawn_broadcast`, and of the start and exit handlers.
    /// It may run on several workers at once. Without it such a panic
    /// aborts the process, as does a panic of the handler itself.
    pub fn panic_handler<H>(mut self, handler: H) -> Self
    where
        H: Fn(Box<dyn Any + Send>) + Send + Sync + 'static,
    {
        self.panic_handler = Some(Box::new(handler));
        self
    }

    /// Deprecated in Rayon (use [`ThreadPool::spawn_fifo`] and
    /// [`crate::scope_fifo`]). Here: the pool's `spawn` and `Scope::spawn`
    /// queue as their FIFO forms do; `join` is unchanged.
    #[deprecated(note = "use `scope_fifo` and `spawn_fifo` for similar effect")]
    pub fn breadth_first(mut self) -> Self {
        self.breadth_first = true;
        self
    }

    fn resolved_num_threads(&self) -> usize {
        if self.num_threads != 0 {
            return self.num_threads;
        }
        // A CPU list sets the size, as libblitz counts it (the library
        // checks the list itself; a malformed one fails the build there).
        let env_list = std::env::var("BLZ_CPU_LIST").ok().filter(|text| !text.is_empty());
        if let Some(entries) = self.cpu_list.as_deref().or(env_list.as_deref()).and_then(cpu_list_len) {
            return entries;
        }
        // As libblitz reads it: decimal digits only, 1..65535.
        if let Ok(text) = std::env::var("BLZ_NUM_THREADS") {
            if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
                if let Ok(n) = text.parse::<usize>() {
                    if (1..=sys::BLZ_MAX_THREADS as usize).contains(&n) {
                        return n;
                    }
                }
            }
        }
        std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
    }
}

impl<S: ThreadSpawn> ThreadPoolBuilder<S> {
    fn build_pool(self) -> Result<ThreadPool, ThreadPoolBuildError> {
        self.build_with(Creation::Own)
    }

    /// The global pool, on the process pool (`blz_pool_shared`) that C,
    /// C++, Python and other Rust users of libblitz in the process share.
    ///
    /// Its workers are known to this crate without hooks when the builder
    /// asks for nothing that needs them: the pool may have been created by
    /// another user (with no hooks of ours), so a worker of it is
    /// recognised by `blz_worker_index` instead (`registry::global_worker`),
    /// and the config names only what the builder set, which an existing
    /// pool must match (else `Error::InvalidArgument`: never a second
    /// pool). Start or exit handlers, a name closure or a spawn handler need
    /// our hooks or our threads: then the config carries them, and only a
    /// process pool that does not exist yet can have them.
    pub(crate) fn build_process_pool(mut self) -> Result<ThreadPool, ThreadPoolBuildError> {
        let needs_hooks = self.start_handler.is_some()
            || self.exit_handler.is_some()
            || self.get_thread_name.is_some()
            || !self.spawn_handler.is_default();
        if needs_hooks {
            return self.build_with(Creation::ProcessPool);
        }
        if self.num_threads > sys::BLZ_MAX_THREADS as usize {
            return Err(Error::InvalidArgument.into());
        }
        let prefix = optional_c_string(&self.thread_name_prefix)?;
        let cpu_list = optional_c_string(&self.cpu_list)?;
        let mut raw = ptr::null_mut();
        // SAFETY: the config is initialised by the library and points at
        // strings that live until the call returns (the library copies them).
        unsafe {
            let mut config = std::mem::MaybeUninit::<sys::blz_pool_config>::zeroed().assume_init();
            sys::blz_pool_config_init(&mut config);
            config.num_threads = self.num_threads as u32; // 0: whatever the pool has
            config.stack_size = self.stack_size.unwrap_or(0);
            config.thread_name = prefix.as_ref().map_or(ptr::null(), |p| p.as_ptr());
            config.cpu_list = cpu_list.as_ref().map_or(ptr::null(), |l| l.as_ptr());
            Error::check(sys::blz_pool_shared(&config, &mut raw))?;
        }
        // SAFETY: raw is the reference just taken, never given up.
        let num_threads = unsafe { sys::blz_pool_num_threads(raw) } as usize;
        let registry = Arc::new(Registry::new(RegistryParts {
            num_threads,
            start_handler: None,
            exit_handler: None,
            panic_handler: self.panic_handler.take(),
            breadth_first: self.breadth_first,
            stop: Arc::new(StopSignal::default()),
        }));
        registry.publish(raw);
        // The reference a hook would hold: the global pool is never dropped,
        // so this Registry lives as long as the process.
        let hooks_ref = Arc::into_raw(Arc::clone(&registry));
        Ok(ThreadPool::from_parts(registry, raw, hooks_ref))
    }

    fn build_with(mut self, creation: Creation) -> Result<ThreadPool, ThreadPoolBuildError> {
        let num_threads = self.resolved_num_threads();
        if num_threads > sys::BLZ_MAX_THREADS as usize {
            return Err(Error::InvalidArgument.into());
        }
        let prefix = optional_c_string(&self.thread_name_prefix)?;
        let cpu_list = optional_c_string(&self.cpu_list)?;
        // libblitz starts and names ("prefix-i") its own threads, unless the
        // threads need more: a spawn handler's, or std threads named by the
        // name closure (Rayon's default spawn), handed out in index order.
        let handed_out = !self.spawn_handler.is_default() || self.get_thread_name.is_some();
        let registry = Registry::new(RegistryParts {
            num_threads,
            start_handler: self.start_handler.take(),
            exit_handler: self.exit_handler.take(),
            panic_handler: self.panic_handler.take(),
            breadth_first: self.breadth_first,
            stop: Arc::new(StopSignal::default()),
        });
        let mut handout = Handout {
            spawn: &mut self.spawn_handler,
            name_of: self.get_thread_name.as_mut(),
            prefix: prefix.as_ref(),
            stack_size: self.stack_size,
            early: None,
        };
        let threads = Threads {
            count: num_threads,
            stack_size: self.stack_size.unwrap_or(0),
            prefix: prefix.as_ref(),
            cpu_list: cpu_list.as_ref(),
            handout: if handed_out { Some(&mut handout) } else { None },
        };
        let created = create(registry, threads, creation);
        match (created, handout.early.take()) {
            (Ok(pool), _) => Ok(pool),
            // The workers handed out so far have come and gone (libblitz
            // waited for them): as in Rayon, the build fails as the
            // handler or the name closure did.
            (Err(_), Some(end)) => end.into_result().map(|never| match never {}),
            (Err(error), None) => Err(error.into()),
        }
    }
}

/// Worker `index`'s name: the closure's, else "prefix-index" with a prefix.
/// A builder's text for C: None stays NULL; a NUL byte inside is refused.
fn optional_c_string(text: &Option<String>) -> Result<Option<CString>, Error> {
    match text {
        Some(text) => CString::new(text.as_str()).map(Some).map_err(|_| Error::InvalidArgument),
        None => Ok(None),
    }
}

/// Which C call makes the pool: a pool of its own (`blz_pool_create`), or
/// the process pool with our hooks (`blz_pool_shared`, the global pool).
#[derive(Clone, Copy, PartialEq)]
enum Creation {
    Own,
    ProcessPool,
}

fn thread_name(
    name_of: Option<&mut NameFn>,
    prefix: Option<&CString>,
    index: usize,
) -> Result<Option<String>, EarlyEnd> {
    match name_of {
        Some(name_of) => panic::catch_unwind(AssertUnwindSafe(|| name_of(index))).map(Some).map_err(EarlyEnd::Panicked),
        None => Ok(prefix.map(|p| format!("{}-{}", p.to_string_lossy(), index))),
    }
}

/// Why a build stopped at a worker: a closure panicked (the panic goes on
/// once libblitz has stopped the workers handed out before), or failed.
enum EarlyEnd {
    Panicked(Box<dyn Any + Send>),
    Failed(ThreadPoolBuildError),
}

enum Never {}

impl EarlyEnd {
    fn into_result(self) -> Result<Never, ThreadPoolBuildError> {
        match self {
            EarlyEnd::Panicked(payload) => panic::resume_unwind(payload),
            EarlyEnd::Failed(error) => Err(error),
        }
    }
}

/// What the C `spawn_thread` callback needs to hand out one worker to the
/// spawn handler: a `ThreadBuilder` with its name, index and stack size.
struct Handout<'a> {
    spawn: &'a mut dyn ThreadSpawn,
    name_of: Option<&'a mut NameFn>,
    prefix: Option<&'a CString>,
    stack_size: Option<usize>,
    /// Why the last call refused, for build to report after blz_pool_create.
    early: Option<EarlyEnd>,
}

impl Handout<'_> {
    fn hand_out(&mut self, index: usize, run: WorkerRun) -> Result<(), EarlyEnd> {
        let name = thread_name(self.name_of.as_deref_mut(), self.prefix, index)?;
        if name.as_deref().map_or(false, |name| name.contains('\0')) {
            return Err(EarlyEnd::Failed(Error::InvalidArgument.into())); // no thread can have it
        }
        let thread = ThreadBuilder { index, name, stack_size: self.stack_size, run };
        match panic::catch_unwind(AssertUnwindSafe(|| self.spawn.spawn(thread))) {
            Ok(Ok(())) => Ok(()),
            Ok(Err(error)) => Err(EarlyEnd::Failed(ThreadPoolBuildError { kind: BuildErrorKind::Io(error) })),
            Err(payload) => Err(EarlyEnd::Panicked(payload)),
        }
    }
}

/// The C `spawn_thread`: hands worker `index`'s run to the spawn handler.
/// Never unwinds: a panic or an error is kept for build and refuses the worker.
///
/// # Safety
/// `user` is the `Handout` of the `blz_pool_create` call that calls this.
unsafe extern "C" fn hand_out_worker(
    user: *mut c_void,
    index: u32,
    run: sys::blz_fn,
    run_arg: *mut c_void,
) -> std::os::raw::c_int {
    let handout = &mut *(user as *mut Handout<'_>);
    let run = match run {
        Some(run) => run,
        None => return 1,
    };
    match handout.hand_out(index as usize, WorkerRun { run, arg: run_arg }) {
        Ok(()) => 0,
        Err(end) => {
            handout.early = Some(end);
            1
        }
    }
}

/// How `create` starts the workers.
struct Threads<'a, 'h> {
    count: usize,
    stack_size: usize,
    prefix: Option<&'a CString>,
    cpu_list: Option<&'a CString>,
    /// None: libblitz starts them; else the spawn handler, through `hand_out_worker`.
    handout: Option<&'a mut Handout<'h>>,
}

/// The number of entries of a CPU list ("0-3,8" has 5), None if it is
/// malformed: then the library refuses the list and the count is moot.
fn cpu_list_len(list: &str) -> Option<usize> {
    let mut entries = 0usize;
    for item in list.split(',') {
        let (low, high) = item.split_once('-').unwrap_or((item, item));
        let number = |s: &str| {
            if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
                s.parse::<usize>().ok()
            } else {
                None
            }
        };
        let (low, high) = (number(low)?, number(high)?);
        entries = entries.checked_add(high.checked_sub(low)? + 1)?;
    }
    Some(entries)
}

/// `blz_pool_create` (or `blz_pool_shared`) for a registry; the pool's
/// hooks hold an `Arc` of it until `on_destroyed` (for ever for the process
/// pool, whose reference the global pool never gives up).
fn create(registry: Registry, threads: Threads<'_, '_>, creation: Creation) -> Result<ThreadPool, Error> {
    let registry = Arc::new(registry);
    let hooks_ref = Arc::into_raw(Arc::clone(&registry));
    // SAFETY: the config is initialised by the library, then filled with
    // values that live until blz_pool_create returns (the name is copied;
    // the handout is only used during the call); `hooks_ref` stays valid
    // until on_destroyed gives it up (or below).
    unsafe {
        let mut config = std::mem::MaybeUninit::<sys::blz_pool_config>::zeroed().assume_init();
        sys::blz_pool_config_init(&mut config);
        config.num_threads = u32::try_from(threads.count).unwrap_or(u32::MAX);
        config.stack_size = threads.stack_size;
        config.thread_name = threads.prefix.map_or(ptr::null(), |p| p.as_ptr());
        config.cpu_list = threads.cpu_list.map_or(ptr::null(), |l| l.as_ptr());
        config.on_thread_start = Some(on_thread_start);
        config.on_thread_stop = Some(on_thread_stop);
        config.user = hooks_ref as *mut c_void;
        if let Some(handout) = threads.handout {
            config.spawn_thread = Some(hand_out_worker);
            config.spawn_user = handout as *mut Handout<'_> as *mut c_void;
        }
        let mut raw = ptr::null_mut();
        let status = match creation {
            Creation::Own => sys::blz_pool_create(&config, &mut raw),
            // Only a process pool not created yet takes our hooks: any
            // other is refused (EINVAL), and nothing of ours was used.
            Creation::ProcessPool => sys::blz_pool_shared(&config, &mut raw),
        };
        if let Err(error) = Error::check(status) {
            // The workers already started have stopped: nobody uses the hooks' Arc.
            drop(Arc::from_raw(hooks_ref));
            return Err(error);
        }
        registry.publish(raw);
        Ok(ThreadPool::from_parts(registry, raw, hooks_ref))
    }
}

impl<S> fmt::Debug for ThreadPoolBuilder<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ThreadPoolBuilder")
            .field("num_threads", &self.num_threads)
            .field("thread_name", &self.get_thread_name.is_some())
            .field("thread_name_prefix", &self.thread_name_prefix)
            .field("stack_size", &self.stack_size)
            .field("start_handler", &self.start_handler.is_some())
            .field("exit_handler", &self.exit_handler.is_some())
            .field("panic_handler", &self.panic_handler.is_some())
            .field("breadth_first", &self.breadth_first)
            .field("cpu_list", &self.cpu_list)
            .finish()
    }
}

/// Rayon's deprecated configuration type: a [`ThreadPoolBuilder`] behind
/// the old names.
#[deprecated(note = "Use `ThreadPoolBuilder`")]
#[derive(Default)]
pub struct Configuration {
    builder: ThreadPoolBuilder,
}

#[allow(deprecated)]
impl Configuration {
    /// A configuration with the defaults.
    pub fn new() -> Configuration {
        Configuration::default()
    }

    /// [`ThreadPoolBuilder::build`].
    pub fn build(self) -> Result<ThreadPool, Box<dyn StdError + 'static>> {
        self.builder.build().map_err(Box::from)
    }

    /// [`ThreadPoolBuilder::thread_name`].
    pub fn thread_name<F>(mut self, closure: F) -> Self
    where
        F: FnMut(usize) -> String + 'static,
    {
        self.builder = self.builder.thread_name(closure);
        self
    }

    /// [`ThreadPoolBuilder::num_threads`].
    pub fn num_threads(mut self, num_threads: usize) -> Configuration {
        self.builder = self.builder.num_threads(num_threads);
        self
    }

    /// [`ThreadPoolBuilder::panic_handler`].
    pub fn panic_handler<H>(mut self, panic_handler: H) -> Configuration
    where
        H: Fn(Box<dyn Any + Send>) + Send + Sync + 'static,
    {
        self.builder = self.builder.panic_handler(panic_handler);
        self
    }

    /// [`ThreadPoolBuilder::stack_size`].
    pub fn stack_size(mut self, stack_size: usize) -> Self {
        self.builder = self.builder.stack_size(stack_size);
        self
    }

    /// [`ThreadPoolBuilder::breadth_first`].
    pub fn breadth_first(mut self) -> Self {
        self.builder = self.builder.breadth_first();
        self
    }

    /// [`ThreadPoolBuilder::start_handler`].
    pub fn start_handler<H>(mut self, start_handler: H) -> Configuration
    where
        H: Fn(usize) + Send + Sync + 'static,
    {
        self.builder = self.builder.start_handler(start_handler);
        self
    }

    /// [`ThreadPoolBuilder::exit_handler`].
    pub fn exit_handler<H>(mut self, exit_handler: H) -> Configuration
    where
        H: Fn(usize) + Send + Sync + 'static,
    {
        self.builder = self.builder.exit_handler(exit_handler);
        self
    }

    pub(crate) fn into_builder(self) -> ThreadPoolBuilder {
        self.builder
    }
}

#[allow(deprecated)]
impl fmt::Debug for Configuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.builder.fmt(f)
    }
}

/// Rayon's deprecated [`ThreadPoolBuilder::build_global`].
#[deprecated(note = "use `ThreadPoolBuilder::build_global`")]
#[allow(deprecated)]
pub fn initialize(config: Configuration) -> Result<(), Box<dyn StdError>> {
    config.into_builder().build_global().map_err(Box::from)
}
