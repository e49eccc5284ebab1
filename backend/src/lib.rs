//! The one backend dispatch of the kevent ABI: which engine serves a queue (a kevent
//! kernel's syscalls or the userspace fallback), and the calls routed to it.
//!
//! [`Backend`] is the project's one backend type. The safe API (`kevent`), the C library
//! (`libkevent`), the benchmarks and the suite all go through it; nothing else matches on
//! which engine runs, and nothing else issues a kevent syscall. Its two arms expose the same
//! calls, the way mio's selectors share a shape rather than a trait object:
//! [`Backend::Native`] holds the syscall numbers [`kevent_sys::detect`] proved and calls
//! [`kevent_sys::syscall`]; [`Backend::Fallback`] forwards to [`kevent_fallback`].
//!
//! Two sets of entry points:
//!
//! * **Rust memory**: the methods of [`Backend`] take slices and references (what the safe
//!   API and the Rust benchmarks call), and [`init`] takes a ring the caller keeps alive.
//! * **C memory** ([`user`]): raw pointers a C caller passed, which may be NULL, unmapped or
//!   read-only; a bad one gives `EFAULT` on both arms, never a crash. The native arm hands
//!   them to the kernel, which checks them itself; the fallback arm copies them through the
//!   crate's `uaccess` module (fault-safe copies). The C library is a thin `extern "C"` layer
//!   over these.
//!
//! The choice is made once per process ([`Backend::current`], from `KEVENT_BACKEND` and the
//! kernel's advertisement, spec section 6). Tests and benchmarks can pick an arm per queue
//! with [`Backend::fallback`] and [`Backend::native`].
//!
//! Every call is a thin forwarder: it validates nothing the engines validate themselves, and
//! returns the engines' [`Errno`] unchanged.
//!
//! # Safety
//!
//! This crate calls the raw syscalls of [`kevent_sys::syscall`]. The invariants it relies on:
//!
//! * A [`Backend::Native`] value can only be built inside this crate, from a
//!   [`SyscallTable`] that detection read from the kernel's own advertisement and probed (the
//!   variant is `#[non_exhaustive]`, so other crates can match it but not construct it). So the
//!   numbers are the running kernel's kevent syscalls, never arbitrary ones.
//! * Slices passed to the kernel are valid for reads and writes of their whole length for the
//!   duration of the call, and their length is the count the kernel is told.
//! * The ring registered by [`init`] (or [`user::init`]) stays valid until the queue fd is
//!   closed: that is their `# Safety` contract. The other calls may make the engine write that
//!   ring, which is sound because of that contract.
#![allow(unsafe_code)]
#![deny(unsafe_op_in_unsafe_fn)]

pub mod hash;
mod uaccess;
pub mod user;

use std::ffi::CStr;
use std::fmt;
use std::os::fd::{AsRawFd, BorrowedFd, RawFd};

use kevent_fallback::posix_timer::TimerId;
use kevent_sys::detect::{self, Unavailable};
use kevent_sys::syscall::{self, SyscallTable};
use kevent_sys::{Errno, kevent_ring, ukevent};

/// The engine behind a queue: the kernel's kevent syscalls, or the userspace fallback.
///
/// Obtained from [`Backend::current`] (the process's choice), [`Backend::native`] or
/// [`Backend::fallback`]. Every call takes the same arguments and returns the same
/// `Result<_, Errno>` on both arms; the calls are the raw ABI calls of spec section 3, taking
/// slices where the ABI takes a pointer and a count.
///
/// ```
/// use kevent_backend::Backend;
///
/// assert_eq!(Backend::fallback().as_str(), "fallback");
/// // The process's backend, as `KEVENT_BACKEND` and the kernel decided it.
/// match Backend::current() {
///     Ok(b) => println!("this process uses the {b} backend"),
///     Err(e) => println!("no backend: {e}"),
/// }
/// if let Some(why) = Backend::native_unavailable() {
///     println!("native is not used: {why}");
/// }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Backend {
    /// The running kernel's kevent syscalls, with the numbers detection proved.
    ///
    /// Not constructible outside this crate (the numbers must come from detection); match it
    /// as `Backend::Native(..)`.
    #[non_exhaustive]
    Native(SyscallTable),
    /// The userspace engine of `kevent-fallback` (epoll, timerfd, eventfd, inotify, a signal
    /// handler).
    Fallback,
}

/// Neither backend can serve: `KEVENT_BACKEND` is invalid, or native was required (by
/// `KEVENT_BACKEND=native` or [`Backend::native`]) and the kernel cannot provide it.
#[derive(Debug, Clone, thiserror::Error)]
#[error("kevent backend unavailable: {reason}")]
pub struct BackendError {
    reason: Unavailable,
}

impl BackendError {
    /// Why detection refused: the kernel does not advertise kevent, the probe failed, the
    /// variable is invalid, …
    pub fn reason(&self) -> &Unavailable {
        &self.reason
    }
}

/// A POSIX timer created by [`Backend::timer_create`].
///
/// The C library hands it to C callers as a `timer_t` ([`PosixTimerId::to_timer_t`]) and gets
/// it back with [`Backend::timer_from_timer_t`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PosixTimerId {
    /// The kernel's timer id (what `timer_create(2)` returns; glibc's `timer_t` for every
    /// notification other than `SIGEV_THREAD` is this number).
    Native(i32),
    /// A timer of the fallback engine.
    Fallback(TimerId),
}

impl PosixTimerId {
    /// The id as a C `timer_t`: the number itself, carried in the pointer-sized `timer_t` the
    /// way glibc carries kernel timer ids. It is never a real pointer.
    pub fn to_timer_t(self) -> libc::timer_t {
        let raw = match self {
            PosixTimerId::Native(id) => id as isize as usize,
            PosixTimerId::Fallback(TimerId(id)) => id as usize,
        };
        std::ptr::without_provenance_mut(raw)
    }

    /// The id as the number a POSIX timer event carries in its `id` (spec section 5).
    pub fn as_u64(self) -> u64 {
        match self {
            PosixTimerId::Native(id) => u64::from(id as u32),
            PosixTimerId::Fallback(TimerId(id)) => u64::from(id),
        }
    }
}

/// Converts the detection outcome into a backend; a native detection always carries its
/// table (detection's contract), and anything else runs on the fallback.
fn from_detection(d: &detect::Detection) -> Backend {
    match d.syscalls {
        Some(t) => Backend::Native(t),
        None => Backend::Fallback,
    }
}

impl Backend {
    /// The backend of this process, decided once by [`kevent_sys::detect::current`].
    ///
    /// # Errors
    ///
    /// [`BackendError`] when `KEVENT_BACKEND` is invalid, or is `native` and the kernel does
    /// not provide kevent (spec section 6). With `auto` (the default) or `fallback` this never
    /// fails.
    pub fn current() -> Result<Backend, BackendError> {
        match detect::current() {
            Ok(d) => Ok(from_detection(d)),
            Err(why) => Err(BackendError {
                reason: why.clone(),
            }),
        }
    }

    /// The userspace engine, whatever the process uses (per-queue override for tests and
    /// benchmarks).
    pub const fn fallback() -> Backend {
        Backend::Fallback
    }

    /// The kernel's kevent syscalls, whatever the process's default is (per-queue override).
    ///
    /// This uses the process's one detection: it never probes syscall numbers the detection did
    /// not already prove, so `KEVENT_BACKEND=fallback` ("no kevent syscall at all") makes it
    /// fail with [`Unavailable::Disabled`].
    ///
    /// # Errors
    ///
    /// [`BackendError`] with the reason native is unavailable on this kernel.
    pub fn native() -> Result<Backend, BackendError> {
        match detect::current() {
            Ok(d) => match from_detection(d) {
                native @ Backend::Native(..) => Ok(native),
                Backend::Fallback => Err(BackendError {
                    // A fallback detection always says why (detection's contract); the default
                    // only covers a detection that broke it.
                    reason: d.unavailable.clone().unwrap_or(Unavailable::NotAdvertised {
                        path: detect::SYSFS_ROOT.into(),
                    }),
                }),
            },
            Err(why) => Err(BackendError {
                reason: why.clone(),
            }),
        }
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

    /// Whether this is the native arm.
    pub const fn is_native(&self) -> bool {
        matches!(self, Backend::Native(..))
    }

    /// `"native"` or `"fallback"`, the words of `KEVENT_BACKEND`.
    pub const fn as_str(&self) -> &'static str {
        match self {
            Backend::Native(..) => "native",
            Backend::Fallback => "fallback",
        }
    }

    /// [`Backend::as_str`] as a static C string (what `kevent_backend()` returns).
    pub const fn as_cstr(&self) -> &'static CStr {
        match self {
            Backend::Native(..) => c"native",
            Backend::Fallback => c"fallback",
        }
    }

    /// Whether a duplicate of a queue fd is still the queue, so that the engine may write a
    /// queue's ring after the queue's own fd is closed: true on native (the kernel's file
    /// lives while any duplicate does), false on the fallback (a queue is its fd number,
    /// decision P17). An owner of ring memory uses it to decide whether freeing the ring after
    /// the close is safe.
    pub const fn dup_is_queue(&self) -> bool {
        self.is_native()
    }

    /// `kevent_ctl(fd, cmd, events.len(), events)`—Adds, removes, modifies or marks ready the
    /// kevents in `events`, rewriting entries in place as spec section 3 says.
    ///
    /// # Errors
    ///
    /// `EBADF`/`EINVAL` for a bad fd, `EINVAL` for an unknown `cmd` or a slice longer than
    /// `u32::MAX` entries. Per-entry failures are data in `events`, not errors.
    #[doc(alias = "kevent_ctl")]
    pub fn ctl(&self, fd: RawFd, cmd: u32, events: &mut [ukevent]) -> Result<u32, Errno> {
        match self {
            Backend::Native(t) => {
                let num = slice_len(events)?;
                // SAFETY: `t` came from detection; `events` is valid for reads and writes of
                // `num` entries for this call; a ring of `fd` is covered by `init`'s contract.
                unsafe { syscall::kevent_ctl(t, fd, cmd, num, events.as_mut_ptr()) }
            }
            Backend::Fallback => kevent_fallback::kevent_ctl(fd, cmd, events),
        }
    }

    /// `kevent_get_events(fd, min_nr, buf.len(), timeout, buf, flags)`—Waits for at least
    /// `max(min_nr, 1)` ready kevents (D4), the timeout or a wake-up, then copies up to
    /// `buf.len()` of them into `buf` and returns how many.
    ///
    /// # Errors
    ///
    /// `EBADF`/`EINVAL` for a bad fd, `EINVAL` for a bad timeout or unknown `flags`.
    #[doc(alias = "kevent_get_events")]
    pub fn get_events(
        &self,
        fd: RawFd,
        min_nr: u32,
        buf: &mut [ukevent],
        timeout: &libc::timespec,
        flags: u32,
    ) -> Result<u32, Errno> {
        match self {
            Backend::Native(t) => {
                let max_nr = slice_len(buf)?;
                // SAFETY: `t` came from detection; `buf` is valid for writes of `max_nr`
                // entries for this call; a ring of `fd` is covered by `init`'s contract.
                unsafe {
                    syscall::kevent_get_events(
                        t,
                        fd,
                        min_nr,
                        max_nr,
                        timeout,
                        buf.as_mut_ptr(),
                        flags,
                    )
                }
            }
            Backend::Fallback => {
                kevent_fallback::kevent_get_events(fd, min_nr, buf, timeout, flags)
            }
        }
    }

    /// `kevent_wait(fd, num, old_uidx, timeout, flags)`—Waits, then moves up to `num` ready
    /// kevents into the queue's ring and returns how many (0 at once if `old_uidx` is stale).
    ///
    /// # Errors
    ///
    /// `EBADF`/`EINVAL` for a bad fd, `EINVAL` for a queue without a ring, `num` larger than
    /// the ring, a bad timeout or unknown `flags`.
    #[doc(alias = "kevent_wait")]
    pub fn wait(
        &self,
        fd: RawFd,
        num: u32,
        old_uidx: u32,
        timeout: &libc::timespec,
        flags: u32,
    ) -> Result<u32, Errno> {
        match self {
            // SAFETY: `t` came from detection; the only user memory written is the ring,
            // covered by `init`'s contract.
            Backend::Native(t) => unsafe {
                syscall::kevent_wait(t, fd, num, old_uidx, timeout, flags)
            },
            Backend::Fallback => kevent_fallback::kevent_wait(fd, num, old_uidx, timeout, flags),
        }
    }

    /// `kevent_commit(fd, new_uidx, over)`—Releases ring slots up to `new_uidx` (D13) and
    /// returns how many; 0 for a stale commit.
    ///
    /// # Errors
    ///
    /// `EBADF`/`EINVAL` for a bad fd, `EINVAL` for a queue without a ring or
    /// `new_uidx >= n`, `EOVERFLOW` for an `over` that is neither `ring_over` nor
    /// `ring_over - 1`.
    #[doc(alias = "kevent_commit")]
    pub fn commit(&self, fd: RawFd, new_uidx: u32, over: u32) -> Result<u32, Errno> {
        match self {
            // SAFETY: `t` came from detection; the only user memory written is the ring's
            // `ring_over`, covered by `init`'s contract.
            Backend::Native(t) => unsafe { syscall::kevent_commit(t, fd, new_uidx, over) },
            Backend::Fallback => kevent_fallback::kevent_commit(fd, new_uidx, over),
        }
    }

    /// `kevent_aio_sendfile(fd, sock_fd, in_fd, offset, count)`—Starts sending `count` bytes
    /// of `in_fd` from `offset` to the connected stream socket `sock_fd` and returns the
    /// request id (`> 0`); one `KEVENT_AIO` event on queue `fd` reports the end (spec D18).
    ///
    /// Native: the kernel's call through the sixth advertised number; on a kernel that
    /// advertised five there is none and this is `ENOSYS` (decision P37). Fallback: the
    /// engine's transfer ([`kevent_fallback::kevent_aio_sendfile`]).
    ///
    /// # Errors
    ///
    /// `EBADF`/`EINVAL` for a bad queue fd; `EBADF` for a closed `in_fd` or `sock_fd`;
    /// `EINVAL` for a file that is not regular or not readable, a socket that is not a
    /// stream socket, or `offset + count` past the largest file offset; `ENOTCONN` for an
    /// unconnected stream socket; `ENOSYS` natively without the call.
    #[doc(alias = "kevent_aio_sendfile")]
    pub fn aio_sendfile(
        &self,
        fd: RawFd,
        sock_fd: RawFd,
        in_fd: RawFd,
        offset: u64,
        count: u64,
    ) -> Result<u64, Errno> {
        match self {
            // SAFETY: `t` came from detection (crate docs); the call takes integers only.
            Backend::Native(t) => unsafe {
                syscall::kevent_aio_sendfile(t, fd, sock_fd, in_fd, offset, count)
            },
            Backend::Fallback => {
                kevent_fallback::kevent_aio_sendfile(fd, sock_fd, in_fd, offset, count)
            }
        }
    }

    /// Whether this backend can start AIO transfers (D18): always on the fallback; natively
    /// only when the kernel advertised the sixth syscall number.
    pub const fn has_aio(&self) -> bool {
        match self {
            Backend::Native(t) => t.aio_sendfile.is_some(),
            Backend::Fallback => true,
        }
    }

    /// `timer_create(clock, sev)`—Creates a POSIX timer; with `sev.sigev_notify ==
    /// SIGEV_KEVENT` its expiries are reported to the queue whose fd is in the first int of
    /// `sev`'s `_sigev_un` (`sigev_notify_thread_id`).
    ///
    /// Native: the kernel's `timer_create(2)` ([`kevent_sys::syscall::timer_create`]), which a
    /// kevent kernel extends with `SIGEV_KEVENT`. Fallback: the engine's emulation
    /// ([`kevent_fallback::posix_timer`]).
    ///
    /// # Errors
    ///
    /// `EINVAL` for a bad clock or notification, `EBADF`/`EINVAL` for a bad queue fd, and
    /// whatever `timer_create(2)` returns.
    pub fn timer_create(
        &self,
        clock: libc::clockid_t,
        sev: &libc::sigevent,
    ) -> Result<PosixTimerId, Errno> {
        match self {
            Backend::Native(_) => syscall::timer_create(clock, sev).map(PosixTimerId::Native),
            Backend::Fallback => {
                kevent_fallback::posix_timer::timer_create(clock, sev).map(PosixTimerId::Fallback)
            }
        }
    }

    /// `timer_settime(id, flags, new, old)`—Arms (or disarms, with a zero `it_value`) the
    /// timer; `flags` accepts `TIMER_ABSTIME`. `old`, if given, receives the previous setting.
    ///
    /// # Errors
    ///
    /// `EINVAL` for an unknown id, an id of the other backend, bad `flags` or a bad
    /// `itimerspec`.
    pub fn timer_settime(
        &self,
        id: PosixTimerId,
        flags: i32,
        new: &libc::itimerspec,
        old: Option<&mut libc::itimerspec>,
    ) -> Result<(), Errno> {
        match (self, id) {
            (Backend::Native(_), PosixTimerId::Native(id)) => {
                syscall::timer_settime(id, flags, new, old)
            }
            (Backend::Fallback, PosixTimerId::Fallback(id)) => {
                kevent_fallback::posix_timer::timer_settime(id, flags, new, old)
            }
            _ => Err(Errno::EINVAL),
        }
    }

    /// `timer_gettime(id)`—The time until the next expiry and the interval.
    ///
    /// # Errors
    ///
    /// `EINVAL` for an unknown id or an id of the other backend.
    pub fn timer_gettime(&self, id: PosixTimerId) -> Result<libc::itimerspec, Errno> {
        match (self, id) {
            (Backend::Native(_), PosixTimerId::Native(id)) => syscall::timer_gettime(id),
            (Backend::Fallback, PosixTimerId::Fallback(id)) => {
                kevent_fallback::posix_timer::timer_gettime(id)
            }
            _ => Err(Errno::EINVAL),
        }
    }

    /// `timer_delete(id)`—Disarms and deletes the timer; no expiry is reported afterwards.
    ///
    /// # Errors
    ///
    /// `EINVAL` for an unknown id or an id of the other backend.
    pub fn timer_delete(&self, id: PosixTimerId) -> Result<(), Errno> {
        match (self, id) {
            (Backend::Native(_), PosixTimerId::Native(id)) => syscall::timer_delete(id),
            (Backend::Fallback, PosixTimerId::Fallback(id)) => {
                kevent_fallback::posix_timer::timer_delete(id)
            }
            _ => Err(Errno::EINVAL),
        }
    }

    /// The timer a C `timer_t` names, for this backend (the inverse of
    /// [`PosixTimerId::to_timer_t`]).
    ///
    /// # Errors
    ///
    /// `EINVAL` if the value cannot be a timer id of this backend (negative, or too large).
    /// Whether the timer exists is checked by the timer calls themselves.
    pub fn timer_from_timer_t(&self, timer: libc::timer_t) -> Result<PosixTimerId, Errno> {
        let raw = timer.addr();
        match self {
            Backend::Native(_) => i32::try_from(raw as isize)
                .ok()
                .filter(|id| *id >= 0)
                .map(PosixTimerId::Native)
                .ok_or(Errno::EINVAL),
            Backend::Fallback => u32::try_from(raw)
                .map(|id| PosixTimerId::Fallback(TimerId(id)))
                .map_err(|_| Errno::EINVAL),
        }
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `kevent_init(ring, num, flags)` on `b`—Creates a queue and returns its fd (close-on-exec).
///
/// `ring` null with `num == 0`: a queue without a ring. This is the entry point for Rust
/// callers that own their ring memory; C callers' rings go through [`user::init`], which
/// checks the memory first.
///
/// # Errors
///
/// `EINVAL` for a null `ring` with `num > 0`, `num < 2`, or unknown `flags` (D1); what the
/// engine returns otherwise (`EMFILE`, `ENOMEM`, …).
///
/// # Safety
///
/// When `ring` is non-null it points to `8 + num * 40` bytes
/// ([`kevent_sys::ring_bytes`]), aligned for [`kevent_ring`], valid for reads and writes
/// until the returned fd and every duplicate of it are closed. The engine writes
/// `ring_kidx`, `ring_over` and the entries during later calls on the queue, so that memory
/// must not be freed, moved or covered by a Rust `&`/`&mut` reference while the queue is
/// open. The caller owns the returned fd.
#[doc(alias = "kevent_init")]
pub unsafe fn init(
    b: Backend,
    ring: *mut kevent_ring,
    num: u32,
    flags: u32,
) -> Result<RawFd, Errno> {
    match b {
        // SAFETY: `t` came from detection (see the crate docs); the ring contract is this
        // function's own `# Safety` contract, which is the syscall's.
        Backend::Native(t) => unsafe { syscall::kevent_init(&t, ring, num, flags) },
        // SAFETY: the fallback's ring contract is the same as this function's.
        Backend::Fallback => unsafe { kevent_fallback::kevent_init(ring, num, flags) },
    }
}

/// Declares, on `b`, that the caller owns queue `fd` and sees every close of it (decision
/// P65): on the fallback, while the returned [`QueueOwner`] lives, the engine's calls on the
/// queue skip the proof that the number still names it
/// ([`kevent_fallback::caller_owns`]: `kevent_commit`'s only system call). Natively it does
/// nothing (the kernel proves the fd inside each call's own system call).
///
/// # Errors
///
/// On the fallback, `EBADF`/`EINVAL` for a number that is not a queue.
///
/// # Safety
///
/// Until the returned [`QueueOwner`] is dropped, `fd` stays open and names this queue (no
/// `close()`, no `dup2()` onto it), and the ring memory registered with [`init`] stays valid.
pub unsafe fn owns_queue(b: Backend, fd: RawFd) -> Result<QueueOwner, Errno> {
    match b {
        Backend::Native(_) => Ok(QueueOwner { _fallback: None }),
        Backend::Fallback => {
            // SAFETY: this function's contract is the engine's.
            let owner = unsafe { kevent_fallback::caller_owns(fd) }?;
            Ok(QueueOwner {
                _fallback: Some(owner),
            })
        }
    }
}

/// What [`owns_queue`] returns: the declaration lasts until this is dropped (to be dropped
/// before the queue fd is closed and before its ring memory is freed).
#[derive(Debug)]
#[must_use = "the declaration ends when the QueueOwner is dropped"]
pub struct QueueOwner {
    /// Kept for its drop (the fallback's declaration); `None` natively.
    _fallback: Option<kevent_fallback::QueueOwner>,
}

/// `fcntl(fd, F_SETFL, O_NONBLOCK)` on or off (used by the safe API's queue builder).
///
/// # Errors
///
/// What `fcntl(2)` returns (`EBADF`).
pub fn set_nonblocking(fd: BorrowedFd<'_>, on: bool) -> Result<(), Errno> {
    let raw = fd.as_raw_fd();
    // SAFETY: F_GETFL reads the open file's status flags; it takes no pointer and touches no
    // user memory. `fd` is borrowed, so it is open for the call.
    let flags = unsafe { libc::fcntl(raw, libc::F_GETFL) };
    if flags == -1 {
        return Err(Errno::last());
    }
    let new = if on {
        flags | libc::O_NONBLOCK
    } else {
        flags & !libc::O_NONBLOCK
    };
    if new == flags {
        return Ok(());
    }
    // SAFETY: F_SETFL with an int argument touches no user memory; `fd` is open (borrowed).
    if unsafe { libc::fcntl(raw, libc::F_SETFL, new) } == -1 {
        return Err(Errno::last());
    }
    Ok(())
}

/// An all-zero `sigevent` (libc's has private padding, so it cannot be built field by field).
pub fn zeroed_sigevent() -> libc::sigevent {
    // SAFETY: `sigevent` is plain data (ints, a union of int and pointer, padding): all
    // zeroes is a valid value.
    unsafe { std::mem::zeroed() }
}

/// A slice's length as the ABI's `unsigned int` count.
fn slice_len(s: &[ukevent]) -> Result<u32, Errno> {
    u32::try_from(s.len()).map_err(|_| Errno::EINVAL)
}

#[cfg(test)]
mod tests;
