//! [`Errno`]: an OS error number, shared by every crate of the project.

use core::fmt;
use std::io;

/// A non-zero OS error number (`EBADF`, `EINVAL`, …).
///
/// A newtype rather than an enum: an error number the code does not know must stay a valid
/// value, never undefined behaviour. The raw kevent syscalls return `-errno`; the fallback
/// engine returns `Result<_, Errno>`; the C library turns it into `-1` plus `errno`; per-entry
/// failures are written to `ret_data[1]` as [`Errno::negated`].
///
/// ```
/// use kevent_sys::Errno;
/// let e = Errno::EBADF;
/// assert_eq!(e.raw(), libc::EBADF);
/// assert_eq!(e.negated(), (-libc::EBADF) as u32);
/// assert_eq!(Errno::from_negated(e.negated()), Some(e));
/// let io: std::io::Error = e.into();
/// assert_eq!(io.raw_os_error(), Some(libc::EBADF));
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(transparent)]
pub struct Errno(i32);

macro_rules! errno_consts {
    ($($name:ident),* $(,)?) => {
        impl Errno {
            $(
                #[doc = concat!("`", stringify!($name), "`")]
                pub const $name: Errno = Errno(libc::$name);
            )*
        }
        fn errno_name(raw: i32) -> Option<&'static str> {
            match raw {
                $(libc::$name => Some(stringify!($name)),)*
                _ => None,
            }
        }
    };
}

errno_consts!(
    EPERM, ENOENT, ESRCH, EINTR, EIO, EBADF, EAGAIN, ENOMEM, EACCES, EFAULT, EBUSY, EEXIST, ENODEV,
    ENOTDIR, EINVAL, ENFILE, EMFILE, ENOSPC, ESPIPE, EPIPE, ERANGE, ENOSYS, ENOTSOCK, EOPNOTSUPP,
    EOVERFLOW, ETIMEDOUT, ECONNRESET, ENOTCONN,
);

impl Errno {
    /// Wraps a positive error number; `None` for zero or a negative value.
    pub const fn from_raw(raw: i32) -> Option<Errno> {
        if raw > 0 { Some(Errno(raw)) } else { None }
    }

    /// The positive error number.
    pub const fn raw(self) -> i32 {
        self.0
    }

    /// `-errno` as the `u32` stored in `ukevent.ret_data[1]` of a `KEVENT_RET_BROKEN` entry.
    pub const fn negated(self) -> u32 {
        (-self.0) as u32
    }

    /// Reads back a value written by [`Errno::negated`]; `None` if it is not `-errno`.
    pub const fn from_negated(value: u32) -> Option<Errno> {
        let v = value as i32;
        if v < 0 && v >= -4095 {
            Some(Errno(-v))
        } else {
            None
        }
    }

    /// Decodes a raw syscall return value: `-4095..=-1` is `Err(errno)`, anything else `Ok`.
    pub const fn from_syscall_ret(ret: i64) -> Result<i64, Errno> {
        if ret < 0 && ret >= -4095 {
            Err(Errno(-ret as i32))
        } else {
            Ok(ret)
        }
    }

    /// The calling thread's `errno` after a libc call reported failure; `EIO` if it is unset.
    pub fn last() -> Errno {
        io::Error::last_os_error()
            .raw_os_error()
            .and_then(Errno::from_raw)
            .unwrap_or(Errno::EIO)
    }

    /// Sets the calling thread's `errno` to this number: the one place a crate of the
    /// project writes it (the C library's `-1`/`errno` returns, the epoll shim's).
    ///
    /// ```
    /// use kevent_sys::Errno;
    /// Errno::EBADF.set_last();
    /// assert_eq!(Errno::last(), Errno::EBADF);
    /// ```
    pub fn set_last(self) {
        // SAFETY: `__errno_location()` (glibc and musl) returns a valid, aligned pointer to
        // the calling thread's `errno`, live for the thread's lifetime; only this thread
        // writes through it.
        unsafe { *libc::__errno_location() = self.0 };
    }

    /// The symbolic name (`"EBADF"`) when this crate knows it.
    pub fn name(self) -> Option<&'static str> {
        errno_name(self.0)
    }
}

impl fmt::Debug for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(n) => f.write_str(n),
            None => write!(f, "Errno({})", self.0),
        }
    }
}

impl fmt::Display for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let msg = io::Error::from_raw_os_error(self.0);
        match self.name() {
            Some(n) => write!(f, "{n}: {msg}"),
            None => write!(f, "{msg}"),
        }
    }
}

impl std::error::Error for Errno {}

impl From<Errno> for io::Error {
    fn from(e: Errno) -> io::Error {
        io::Error::from_raw_os_error(e.0)
    }
}

impl TryFrom<&io::Error> for Errno {
    type Error = ();
    fn try_from(e: &io::Error) -> Result<Errno, ()> {
        e.raw_os_error().and_then(Errno::from_raw).ok_or(())
    }
}
