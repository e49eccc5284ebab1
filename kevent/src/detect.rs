//! [`Backend`]: which engine serves this process's queues, and why native is not used.

use core::fmt;

use kevent_sys::detect::{self, Unavailable};

use crate::backend::RawBackend;
use crate::error::{Error, Op, Result};

/// The engine behind a queue: a kevent kernel's syscalls, or the userspace fallback.
///
/// The process's choice is made once (spec section 6): `KEVENT_BACKEND` = `auto` (default:
/// native if the kernel proves it carries kevent, else fallback), `native` or `fallback`.
/// A queue can override it ([`Builder::backend`](crate::Builder::backend)).
///
/// ```
/// use kevent::Backend;
/// match Backend::current() {
///     Ok(b) => println!("queues use the {b} backend"),
///     Err(e) => println!("no backend: {e}"),
/// }
/// if let Some(why) = Backend::native_unavailable() {
///     println!("native is not used: {why}");
/// }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Backend {
    /// The running kernel's kevent syscalls.
    Native,
    /// The userspace engine (epoll, timerfd, eventfd, inotify, a signal handler).
    Fallback,
}

impl Backend {
    /// The backend of this process, as `KEVENT_BACKEND` and the kernel decided it.
    ///
    /// # Errors
    ///
    /// [`Op::Backend`] ([`Error::Unavailable`], with [`Error::unavailable_reason`]) when
    /// `KEVENT_BACKEND` is invalid, or is `native` and the kernel has no kevent. With `auto`
    /// or `fallback` this never fails.
    pub fn current() -> Result<Backend> {
        RawBackend::current()
            .map(|b| b.kind().into())
            .map_err(|e| Error::unavailable(Op::Backend, e))
    }

    /// Why this process does not use the native backend (`None` when it does): the kernel
    /// does not advertise kevent, the probe was denied by seccomp, `KEVENT_BACKEND=fallback`,
    /// …
    pub fn native_unavailable() -> Option<&'static Unavailable> {
        match detect::current() {
            Ok(d) => d.unavailable.as_ref(),
            Err(why) => Some(why),
        }
    }

    /// `"native"` or `"fallback"`, the words of `KEVENT_BACKEND`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Backend::Native => "native",
            Backend::Fallback => "fallback",
        }
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<detect::Backend> for Backend {
    fn from(b: detect::Backend) -> Backend {
        match b {
            detect::Backend::Native => Backend::Native,
            detect::Backend::Fallback => Backend::Fallback,
        }
    }
}
