//! [`Error`]: what a call of this crate returns when the call itself fails.
//!
//! The one error type of the crate. A refused ADD is an [`AddError`](crate::AddError), which
//! holds an [`Error`] (and hands the fd holder back) and converts into one with `?`. An
//! [`Error`] always names the [`Op`] and carries the OS error as its
//! [`source`](std::error::Error::source); [`Error::errno`] gives it as an
//! [`Errno`](crate::Errno).

use core::fmt;
use std::io;

use kevent_sys::Errno;
use kevent_sys::detect::Unavailable;

/// The operation that failed, named after the ABI call it wraps.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Op {
    /// Choosing the backend (`KEVENT_BACKEND`, spec section 6).
    Backend,
    /// `kevent_init`: creating a queue (and allocating its ring).
    Init,
    /// `fcntl(F_SETFL, O_NONBLOCK)` on the queue fd.
    SetNonblocking,
    /// `kevent_ctl(KEVENT_CTL_ADD)`.
    Add,
    /// `kevent_ctl(KEVENT_CTL_REMOVE)`.
    Remove,
    /// `kevent_ctl(KEVENT_CTL_MODIFY)`.
    Modify,
    /// `kevent_ctl(KEVENT_CTL_READY)` with entries.
    Ready,
    /// `kevent_ctl(KEVENT_CTL_READY)` with no entry (wake every waiter).
    Wake,
    /// `kevent_get_events`.
    GetEvents,
    /// `kevent_wait`.
    Wait,
    /// `kevent_commit`.
    Commit,
    /// Taking a ring consumer ([`Queue::ring`](crate::Queue::ring),
    /// [`Queue::shared_ring`](crate::Queue::shared_ring)).
    RingConsumer,
    /// `timer_create(SIGEV_KEVENT)`.
    TimerCreate,
    /// `timer_settime`.
    TimerSettime,
    /// `timer_gettime`.
    TimerGettime,
    /// `timer_delete`.
    TimerDelete,
    /// `kevent_aio_sendfile` ([`Queue::sendfile`](crate::Queue::sendfile)).
    AioSendfile,
    /// Registering the queue fd with an async runtime's reactor, or waiting for it to be
    /// readable (the `tokio` and `async-io` features).
    Reactor,
}

impl Op {
    /// The ABI call, as the docs write it (`"kevent_ctl(KEVENT_CTL_ADD)"`).
    pub const fn as_str(self) -> &'static str {
        match self {
            Op::Backend => "backend selection",
            Op::Init => "kevent_init",
            Op::SetNonblocking => "fcntl(F_SETFL, O_NONBLOCK)",
            Op::Add => "kevent_ctl(KEVENT_CTL_ADD)",
            Op::Remove => "kevent_ctl(KEVENT_CTL_REMOVE)",
            Op::Modify => "kevent_ctl(KEVENT_CTL_MODIFY)",
            Op::Ready => "kevent_ctl(KEVENT_CTL_READY)",
            Op::Wake => "kevent_ctl(KEVENT_CTL_READY, 0)",
            Op::GetEvents => "kevent_get_events",
            Op::Wait => "kevent_wait",
            Op::Commit => "kevent_commit",
            Op::RingConsumer => "ring consumer",
            Op::TimerCreate => "timer_create(SIGEV_KEVENT)",
            Op::TimerSettime => "timer_settime",
            Op::TimerGettime => "timer_gettime",
            Op::TimerDelete => "timer_delete",
            Op::AioSendfile => "kevent_aio_sendfile",
            Op::Reactor => "async reactor",
        }
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A failed call: which operation, and the OS error.
///
/// ```
/// use kevent::{Error, Op, Queue};
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let queue = Queue::builder().ring_size(1).build();
/// let err: Error = queue.unwrap_err();
/// assert_eq!(err.op(), Op::Init);
/// assert_eq!(err.raw_os_error(), Some(libc::EINVAL));
/// assert!(err.to_string().starts_with("kevent_init: "));
/// # Ok(()) }
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The call reached a backend, which refused it with an error number.
    #[error("{op}: {source}")]
    Os {
        /// The failing operation.
        op: Op,
        /// The error number, as an `io::Error` (`raw_os_error()` is `Some`).
        #[source]
        source: io::Error,
    },
    /// No backend can serve (`KEVENT_BACKEND=native` on a kernel without kevent, or an invalid
    /// `KEVENT_BACKEND`). The source is an `io::Error` of kind `Unsupported` whose inner
    /// error is the [`BackendError`](crate::BackendError);
    /// [`Error::unavailable_reason`] gives the reason.
    #[error("{op}: {source}")]
    Unavailable {
        /// The failing operation.
        op: Op,
        /// Why, as an `io::Error` wrapping the backend error.
        #[source]
        source: io::Error,
    },
    /// The arguments cannot be expressed in the ABI or are refused by this crate before any
    /// call (a ring too large, a ring consumer already taken). `raw_os_error()` is the error
    /// number the ABI would use (`EINVAL`, `EBUSY`, `ENOMEM`).
    #[error("{op}: {source}")]
    Invalid {
        /// The operation that was refused.
        op: Op,
        /// What is wrong, with the matching error number.
        #[source]
        source: io::Error,
    },
}

impl Error {
    /// An error number returned by a backend.
    pub(crate) fn os(op: Op, errno: Errno) -> Error {
        Error::Os {
            op,
            source: errno.into(),
        }
    }

    /// An `io::Error` from outside the ABI (an async runtime's reactor).
    #[cfg(any(feature = "tokio", feature = "async-io"))]
    pub(crate) fn io(op: Op, source: io::Error) -> Error {
        Error::Os { op, source }
    }

    /// A condition found by this crate, with the error number the ABI uses for it.
    pub(crate) fn invalid(op: Op, errno: Errno) -> Error {
        Error::Invalid {
            op,
            source: errno.into(),
        }
    }

    /// The backend could not be chosen.
    pub(crate) fn unavailable(op: Op, e: kevent_backend::BackendError) -> Error {
        Error::Unavailable {
            op,
            source: io::Error::new(io::ErrorKind::Unsupported, e),
        }
    }

    /// The same error again (an `io::Error` is not `Clone`): for the entries of a batch
    /// that all failed with one call.
    pub(crate) fn duplicate(&self) -> Error {
        let source = match self.raw_os_error() {
            Some(n) => io::Error::from_raw_os_error(n),
            None => io::Error::new(self.kind(), self.io_error().to_string()),
        };
        let op = self.op();
        match self {
            Error::Os { .. } => Error::Os { op, source },
            Error::Unavailable { .. } => Error::Unavailable { op, source },
            Error::Invalid { .. } => Error::Invalid { op, source },
        }
    }

    /// The operation that failed.
    pub fn op(&self) -> Op {
        match self {
            Error::Os { op, .. } | Error::Unavailable { op, .. } | Error::Invalid { op, .. } => *op,
        }
    }

    /// The OS error.
    pub fn io_error(&self) -> &io::Error {
        match self {
            Error::Os { source, .. }
            | Error::Unavailable { source, .. }
            | Error::Invalid { source, .. } => source,
        }
    }

    /// The error number, when there is one (every variant but [`Error::Unavailable`]).
    pub fn raw_os_error(&self) -> Option<i32> {
        self.io_error().raw_os_error()
    }

    /// The error number as the project's [`Errno`].
    pub fn errno(&self) -> Option<Errno> {
        self.raw_os_error().and_then(Errno::from_raw)
    }

    /// The `io::ErrorKind` of the OS error.
    pub fn kind(&self) -> io::ErrorKind {
        self.io_error().kind()
    }

    /// Why native is unavailable, for [`Error::Unavailable`].
    pub fn unavailable_reason(&self) -> Option<&Unavailable> {
        match self {
            Error::Unavailable { source, .. } => source
                .get_ref()
                .and_then(|e| e.downcast_ref::<kevent_backend::BackendError>())
                .map(|e| e.reason()),
            _ => None,
        }
    }
}

impl From<Error> for io::Error {
    /// Keeps the `ErrorKind`; the message names the operation, and the [`Error`] (with its
    /// error number) is the inner error (`get_ref()?.downcast_ref::<kevent::Error>()`).
    fn from(e: Error) -> io::Error {
        io::Error::new(e.kind(), e)
    }
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn os_error_carries_op_and_errno() {
        let e = Error::os(Op::Add, Errno::EBADF);
        assert_eq!(e.op(), Op::Add);
        assert_eq!(e.raw_os_error(), Some(libc::EBADF));
        assert_eq!(e.errno(), Some(Errno::EBADF));
        assert!(
            e.to_string().starts_with("kevent_ctl(KEVENT_CTL_ADD): "),
            "{e}"
        );
        let src = std::error::Error::source(&e).map(|s| s.to_string());
        assert!(src.is_some());
        let io: io::Error = e.into();
        assert!(io.to_string().contains("KEVENT_CTL_ADD"), "{io}");
    }
}
