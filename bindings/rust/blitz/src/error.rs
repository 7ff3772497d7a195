use std::any::Any;
use std::ffi::CStr;
use std::fmt;
use std::sync::Mutex;

use blitz_sys as sys;

/// What went wrong: one variant per `BLZ_E*` status of the C API.
///
/// `Error` is `Send + Sync`, so `?` converts it into
/// `Box<dyn std::error::Error + Send + Sync>` as well as into `Box<dyn Error>`.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// `BLZ_EINVAL`: an argument is invalid (for example more than
    /// 65535 threads, a thread name with a NUL byte, a stack size the
    /// platform rejects); nothing was done.
    InvalidArgument,
    /// `BLZ_ENOMEM`: out of memory; nothing was done.
    OutOfMemory,
    /// `BLZ_ETHREAD`: the OS refused to start a worker thread.
    ThreadSpawn,
    /// `BLZ_ESHUTDOWN`: the pool is being destroyed.
    ShuttingDown,
    /// `BLZ_EDEADLK`: the call would wait for itself (joining a task from
    /// inside that task).
    WouldDeadlock,
    /// `BLZ_ETASK`: the task panicked. Carries the panic's payload when it
    /// was a Rust panic (it always is for tasks started by this crate).
    TaskPanicked(Option<PanicPayload>),
    /// `BLZ_EFORK`: the pool was created before `fork()`, in the parent process.
    Forked,
    /// `BLZ_ETIMEDOUT`: a bounded wait ended before the work did. The
    /// calls of this crate that wait with a bound hand the unfinished work
    /// back instead (see [`JoinHandle::join_timeout`](crate::JoinHandle::join_timeout)).
    TimedOut,
    /// `BLZ_ECANCELED`: the work was cancelled: skipped before it started
    /// (a task of a cancelled group), or stopped early.
    Cancelled,
    /// A status this version of the crate does not know.
    Unknown(i32),
}

impl Error {
    /// The error for a C status, or `Ok(())` for `BLZ_OK`.
    pub fn check(status: sys::blz_status) -> Result<(), Error> {
        match status {
            sys::BLZ_OK => Ok(()),
            sys::BLZ_EINVAL => Err(Error::InvalidArgument),
            sys::BLZ_ENOMEM => Err(Error::OutOfMemory),
            sys::BLZ_ETHREAD => Err(Error::ThreadSpawn),
            sys::BLZ_ESHUTDOWN => Err(Error::ShuttingDown),
            sys::BLZ_EDEADLK => Err(Error::WouldDeadlock),
            sys::BLZ_ETASK => Err(Error::TaskPanicked(None)),
            sys::BLZ_EFORK => Err(Error::Forked),
            sys::BLZ_ETIMEDOUT => Err(Error::TimedOut),
            sys::BLZ_ECANCELED => Err(Error::Cancelled),
            other => Err(Error::Unknown(other)),
        }
    }

    /// The C status this error stands for (`BLZ_EINVAL` ... `BLZ_ECANCELED`).
    pub fn status(&self) -> sys::blz_status {
        match self {
            Error::InvalidArgument => sys::BLZ_EINVAL,
            Error::OutOfMemory => sys::BLZ_ENOMEM,
            Error::ThreadSpawn => sys::BLZ_ETHREAD,
            Error::ShuttingDown => sys::BLZ_ESHUTDOWN,
            Error::WouldDeadlock => sys::BLZ_EDEADLK,
            Error::TaskPanicked(_) => sys::BLZ_ETASK,
            Error::Forked => sys::BLZ_EFORK,
            Error::TimedOut => sys::BLZ_ETIMEDOUT,
            Error::Cancelled => sys::BLZ_ECANCELED,
            Error::Unknown(status) => *status,
        }
    }

    /// The panic payload of a [`Error::TaskPanicked`], to pass to
    /// `std::panic::resume_unwind`.
    pub fn into_panic(self) -> Option<Box<dyn Any + Send + 'static>> {
        match self {
            Error::TaskPanicked(Some(payload)) => Some(payload.into_inner()),
            _ => None,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // SAFETY: blz_status_string never returns NULL and its strings are static.
        let text = unsafe { CStr::from_ptr(sys::blz_status_string(self.status())) };
        f.write_str(&text.to_string_lossy())?;
        if let Error::Unknown(status) = self {
            write!(f, " ({})", status)?;
        }
        if let Error::TaskPanicked(Some(payload)) = self {
            match payload.message() {
                Some(message) => write!(f, " (panicked: {})", message)?,
                None => f.write_str(" (panicked)")?,
            }
        }
        Ok(())
    }
}

impl std::error::Error for Error {}

/// The payload of a panic that ended a task, as `std::panic::catch_unwind`
/// returns it. Held behind a mutex so that [`Error`] is `Sync`.
pub struct PanicPayload(Mutex<Box<dyn Any + Send + 'static>>);

impl PanicPayload {
    pub(crate) fn new(payload: Box<dyn Any + Send + 'static>) -> PanicPayload {
        PanicPayload(Mutex::new(payload))
    }

    /// The payload, to pass to `std::panic::resume_unwind`.
    pub fn into_inner(self) -> Box<dyn Any + Send + 'static> {
        self.0.into_inner().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The panic's message, when it was given as a `&str` or a `String`
    /// (as `panic!` does).
    pub fn message(&self) -> Option<String> {
        let payload = self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(s) = payload.downcast_ref::<&'static str>() {
            Some((*s).to_string())
        } else {
            payload.downcast_ref::<String>().cloned()
        }
    }
}

impl fmt::Debug for PanicPayload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.message() {
            Some(message) => f.debug_tuple("PanicPayload").field(&message).finish(),
            None => f.write_str("PanicPayload(..)"),
        }
    }
}
