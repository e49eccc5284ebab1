//! Which engine runs a queue: the kernel's kevent syscalls or the userspace fallback.
//!
//! [`RawBackend`] is an enum whose two arms expose the same methods, the way mio's selectors
//! share a shape rather than a trait object: [`RawBackend::Native`] holds the syscall numbers
//! that [`kevent_sys::detect`] proved, [`RawBackend::Fallback`] forwards to
//! [`kevent_fallback`]. Both the safe API and the C library (`libkevent`) dispatch through it,
//! so a queue behaves the same whichever arm serves it.
//!
//! The choice is made once per process ([`RawBackend::current`], from `KEVENT_BACKEND` and
//! the kernel's advertisement, spec section 6). Tests and benchmarks can pick an arm per
//! queue with [`RawBackend::fallback`] and [`RawBackend::native`].
//!
//! Every method is a thin forwarder: it validates nothing the engines validate themselves, and
//! returns the engines' [`Errno`] unchanged.
//!
//! # Safety
//!
//! This module calls the raw syscalls of [`kevent_sys::syscall`] and libc's POSIX timer
//! syscalls. The invariants it relies on:
//!
//! * A [`RawBackend::Native`] value can only be built inside this crate, from a
//!   [`SyscallTable`] that detection read from the kernel's own advertisement and probed (the
//!   variant is `#[non_exhaustive]`, so other crates can match it but not construct it). So the
//!   numbers are the running kernel's kevent syscalls, never arbitrary ones.
//! * Slices passed to the kernel are valid for reads and writes of their whole length for the
//!   duration of the call, and their length is the count the kernel is told.
//! * The ring registered by [`RawBackend::init`] stays valid until the queue fd is closed:
//!   that is the `# Safety` contract of `init`, the only `unsafe fn` here. The other methods
//!   may make the engine write that ring, which is sound because of that contract.
//! * [`set_nonblocking`] calls `fcntl(F_GETFL/F_SETFL)` on a borrowed (hence open) fd;
//!   [`zeroed_sigevent`] zero-initialises a plain-data C struct. Neither touches other memory.
#![allow(unsafe_code)]

use std::os::fd::{AsRawFd, BorrowedFd, RawFd};

use kevent_fallback::posix_timer::TimerId;
use kevent_sys::detect::{self, Backend, Unavailable};
use kevent_sys::syscall::{self, SyscallTable};
use kevent_sys::{Errno, kevent_ring, ukevent};

/// The engine behind a queue: the kernel's kevent syscalls, or the userspace fallback.
///
/// Obtained from [`RawBackend::current`] (the process's choice), [`RawBackend::native`] or
/// [`RawBackend::fallback`]. Every method takes the same arguments and returns the same
/// `Result<_, Errno>` on both arms; the calls are the raw ABI calls of spec section 3, taking
/// slices where the ABI takes a pointer and a count.
///
/// ```
/// use kevent::backend::RawBackend;
/// use kevent_sys::detect::Backend;
///
/// let fallback = RawBackend::fallback();
/// assert_eq!(fallback.kind(), Backend::Fallback);
/// // The process's backend, as `KEVENT_BACKEND` and the kernel decided it.
/// if let Ok(b) = RawBackend::current() {
///     println!("this process uses the {} backend", b.kind().as_str());
/// }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RawBackend {
    /// The running kernel's kevent syscalls, with the numbers detection proved.
    ///
    /// Not constructible outside this crate (the numbers must come from detection). Outside
    /// it, match `RawBackend::Native { .. }` and read the numbers with
    /// [`RawBackend::syscalls`].
    #[non_exhaustive]
    Native(SyscallTable),
    /// The userspace engine of `kevent-fallback` (epoll, timerfd, signalfd, eventfd, inotify).
    Fallback,
}

/// Neither backend can serve: `KEVENT_BACKEND` is invalid, or native was required (by
/// `KEVENT_BACKEND=native` or [`RawBackend::native`]) and the kernel cannot provide it.
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

/// A POSIX timer created by [`RawBackend::timer_create`].
///
/// The C library hands it to C callers as a `timer_t` ([`PosixTimerId::to_timer_t`]) and gets
/// it back with [`RawBackend::timer_from_timer_t`].
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
}

/// Converts the detection outcome into a backend; a `Native` detection always carries its
/// table (detection's contract), and anything else runs on the fallback.
fn from_detection(d: &detect::Detection) -> RawBackend {
    match (d.backend, d.syscalls) {
        (Backend::Native, Some(t)) => RawBackend::Native(t),
        _ => RawBackend::Fallback,
    }
}

impl RawBackend {
    /// The backend of this process, decided once by [`kevent_sys::detect::current`].
    ///
    /// # Errors
    ///
    /// [`BackendError`] when `KEVENT_BACKEND` is invalid, or is `native` and the kernel does
    /// not provide kevent (spec section 6). With `auto` (the default) or `fallback` this never
    /// fails.
    pub fn current() -> Result<RawBackend, BackendError> {
        match detect::current() {
            Ok(d) => Ok(from_detection(d)),
            Err(why) => Err(BackendError {
                reason: why.clone(),
            }),
        }
    }

    /// The userspace engine, whatever the process uses (per-queue override for tests and
    /// benchmarks).
    pub fn fallback() -> RawBackend {
        RawBackend::Fallback
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
    pub fn native() -> Result<RawBackend, BackendError> {
        match detect::current() {
            Ok(d) => match from_detection(d) {
                native @ RawBackend::Native(..) => Ok(native),
                RawBackend::Fallback => Err(BackendError {
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

    /// Which arm this is.
    pub fn kind(&self) -> Backend {
        match self {
            RawBackend::Native(..) => Backend::Native,
            RawBackend::Fallback => Backend::Fallback,
        }
    }

    /// The native arm's syscall numbers (proved by detection); `None` on the fallback.
    ///
    /// For callers that issue the raw syscalls themselves with pointers only the kernel may
    /// check (the C library passes C callers' buffers this way).
    pub fn syscalls(&self) -> Option<SyscallTable> {
        match self {
            RawBackend::Native(t) => Some(*t),
            RawBackend::Fallback => None,
        }
    }

    /// `kevent_init(ring, num, flags)`—Creates a queue and returns its fd (close-on-exec).
    ///
    /// `ring` null with `num == 0`: a queue without a ring.
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
    pub unsafe fn init(
        &self,
        ring: *mut kevent_ring,
        num: u32,
        flags: u32,
    ) -> Result<RawFd, Errno> {
        match self {
            // SAFETY: `t` came from detection (see the module docs); the ring contract is this
            // function's own `# Safety` contract, which is the syscall's.
            RawBackend::Native(t) => unsafe { syscall::kevent_init(t, ring, num, flags) },
            // SAFETY: the fallback's ring contract is the same as this function's.
            RawBackend::Fallback => unsafe { kevent_fallback::kevent_init(ring, num, flags) },
        }
    }

    /// `kevent_ctl(fd, cmd, events.len(), events)`—Adds, removes, modifies or marks ready the
    /// kevents in `events`, rewriting entries in place as spec section 3 says.
    ///
    /// # Errors
    ///
    /// `EBADF`/`EINVAL` for a bad fd, `EINVAL` for an unknown `cmd` or a slice longer than
    /// `u32::MAX` entries. Per-entry failures are data in `events`, not errors.
    pub fn ctl(&self, fd: RawFd, cmd: u32, events: &mut [ukevent]) -> Result<u32, Errno> {
        match self {
            RawBackend::Native(t) => {
                let num = slice_len(events)?;
                // SAFETY: `t` came from detection; `events` is valid for reads and writes of
                // `num` entries for this call; a ring of `fd` is covered by `init`'s contract.
                unsafe { syscall::kevent_ctl(t, fd, cmd, num, events.as_mut_ptr()) }
            }
            RawBackend::Fallback => kevent_fallback::kevent_ctl(fd, cmd, events),
        }
    }

    /// `kevent_get_events(fd, min_nr, buf.len(), timeout, buf, flags)`—Waits for at least
    /// `max(min_nr, 1)` ready kevents (D4), the timeout or a wake-up, then copies up to
    /// `buf.len()` of them into `buf` and returns how many.
    ///
    /// # Errors
    ///
    /// `EBADF`/`EINVAL` for a bad fd, `EINVAL` for a bad timeout or unknown `flags`.
    pub fn get_events(
        &self,
        fd: RawFd,
        min_nr: u32,
        buf: &mut [ukevent],
        timeout: &libc::timespec,
        flags: u32,
    ) -> Result<u32, Errno> {
        match self {
            RawBackend::Native(t) => {
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
            RawBackend::Fallback => {
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
            RawBackend::Native(t) => unsafe {
                syscall::kevent_wait(t, fd, num, old_uidx, timeout, flags)
            },
            RawBackend::Fallback => kevent_fallback::kevent_wait(fd, num, old_uidx, timeout, flags),
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
    pub fn commit(&self, fd: RawFd, new_uidx: u32, over: u32) -> Result<u32, Errno> {
        match self {
            // SAFETY: `t` came from detection; the only user memory written is the ring's
            // `ring_over`, covered by `init`'s contract.
            RawBackend::Native(t) => unsafe { syscall::kevent_commit(t, fd, new_uidx, over) },
            RawBackend::Fallback => kevent_fallback::kevent_commit(fd, new_uidx, over),
        }
    }

    /// `timer_create(clock, sev)`—Creates a POSIX timer; with `sev.sigev_notify ==
    /// SIGEV_KEVENT` its expiries are reported to the queue whose fd is in the first int of
    /// `sev`'s `_sigev_un` (`sigev_notify_thread_id`).
    ///
    /// # Backends
    ///
    /// Native: the `timer_create(2)` syscall, which a kevent kernel extends with
    /// `SIGEV_KEVENT`. It is issued directly rather than through glibc's wrapper so that the
    /// id is always the kernel's number (glibc's `timer_t` for `SIGEV_THREAD` is a pointer it
    /// dereferences, which [`RawBackend::timer_from_timer_t`] could not check). Fallback:
    /// the engine's emulation ([`kevent_fallback::posix_timer`]).
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
            RawBackend::Native(_) => {
                let mut id: libc::c_int = 0;
                let sev: *const libc::sigevent = sev;
                let id_ptr: *mut libc::c_int = &mut id;
                // SAFETY: timer_create(2) reads one `struct sigevent` from `sev` (a reference,
                // valid for the call) and writes one int to `id_ptr` (a local); no other user
                // memory.
                let ret = unsafe { libc::syscall(libc::SYS_timer_create, clock, sev, id_ptr) };
                check(ret).map(|_| PosixTimerId::Native(id))
            }
            RawBackend::Fallback => {
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
            (RawBackend::Native(_), PosixTimerId::Native(id)) => {
                let new: *const libc::itimerspec = new;
                let old: *mut libc::itimerspec = match old {
                    Some(old) => old,
                    None => std::ptr::null_mut(),
                };
                // SAFETY: timer_settime(2) reads one itimerspec from `new` (a reference) and,
                // when `old` is non-null, writes one to it (an exclusive reference); both are
                // valid for the call. The id is only a number: the kernel checks it.
                let ret = unsafe { libc::syscall(libc::SYS_timer_settime, id, flags, new, old) };
                check(ret).map(drop)
            }
            (RawBackend::Fallback, PosixTimerId::Fallback(id)) => {
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
            (RawBackend::Native(_), PosixTimerId::Native(id)) => {
                let zero = libc::timespec {
                    tv_sec: 0,
                    tv_nsec: 0,
                };
                let mut cur = libc::itimerspec {
                    it_interval: zero,
                    it_value: zero,
                };
                let cur_ptr: *mut libc::itimerspec = &mut cur;
                // SAFETY: timer_gettime(2) writes one itimerspec to `cur_ptr`, a local.
                let ret = unsafe { libc::syscall(libc::SYS_timer_gettime, id, cur_ptr) };
                check(ret).map(|_| cur)
            }
            (RawBackend::Fallback, PosixTimerId::Fallback(id)) => {
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
            (RawBackend::Native(_), PosixTimerId::Native(id)) => {
                // SAFETY: timer_delete(2) takes only a number and touches no user memory.
                let ret = unsafe { libc::syscall(libc::SYS_timer_delete, id) };
                check(ret).map(drop)
            }
            (RawBackend::Fallback, PosixTimerId::Fallback(id)) => {
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
            RawBackend::Native(_) => i32::try_from(raw as isize)
                .ok()
                .filter(|id| *id >= 0)
                .map(PosixTimerId::Native)
                .ok_or(Errno::EINVAL),
            RawBackend::Fallback => u32::try_from(raw)
                .map(|id| PosixTimerId::Fallback(TimerId(id)))
                .map_err(|_| Errno::EINVAL),
        }
    }
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

/// Decodes a libc `syscall(2)` result (`-1` and `errno` on failure).
fn check(ret: libc::c_long) -> Result<libc::c_long, Errno> {
    if ret == -1 {
        Err(Errno::last())
    } else {
        Ok(ret)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kevent_sys::{KEVENT_CTL_ADD, KEVENT_CTL_READY, KEVENT_UNOTIFY, kevent_id};

    const ZERO: libc::timespec = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };

    fn kevent_kernel() -> bool {
        std::path::Path::new(detect::SYSFS_ROOT).exists()
    }

    #[test]
    fn fallback_is_the_fallback_arm() {
        assert_eq!(RawBackend::fallback(), RawBackend::Fallback);
        assert_eq!(RawBackend::fallback().kind(), Backend::Fallback);
        assert_eq!(RawBackend::fallback().kind().as_str(), "fallback");
        assert_eq!(RawBackend::fallback().syscalls(), None);
        let t = SyscallTable {
            init: 1,
            ctl: 2,
            get_events: 3,
            wait: 4,
            commit: 5,
        };
        assert_eq!(RawBackend::Native(t).syscalls(), Some(t));
        assert_eq!(RawBackend::Native(t).kind().as_str(), "native");
    }

    /// The fallback arm reaches `kevent_fallback`: each call gives exactly what the engine
    /// gives for the same arguments (whether the engine is complete or not).
    #[test]
    fn fallback_arm_routes_to_the_engine() {
        let b = RawBackend::fallback();
        let mut ev = [ukevent::new(KEVENT_UNOTIFY, kevent_id::from_u64(1), 0, 0)];
        let mut ev2 = ev;
        assert_eq!(
            b.ctl(-1, KEVENT_CTL_ADD, &mut ev),
            kevent_fallback::kevent_ctl(-1, KEVENT_CTL_ADD, &mut ev2)
        );
        assert_eq!(
            b.ctl(-1, KEVENT_CTL_READY, &mut []),
            kevent_fallback::kevent_ctl(-1, KEVENT_CTL_READY, &mut [])
        );
        assert_eq!(
            b.get_events(-1, 0, &mut ev, &ZERO, 0),
            kevent_fallback::kevent_get_events(-1, 0, &mut ev2, &ZERO, 0)
        );
        assert_eq!(
            b.wait(-1, 1, 0, &ZERO, 0),
            kevent_fallback::kevent_wait(-1, 1, 0, &ZERO, 0)
        );
        assert_eq!(b.commit(-1, 0, 0), kevent_fallback::kevent_commit(-1, 0, 0));
        let id = TimerId(u32::MAX);
        assert_eq!(
            b.timer_delete(PosixTimerId::Fallback(id)),
            kevent_fallback::posix_timer::timer_delete(id)
        );
        assert_eq!(
            b.timer_gettime(PosixTimerId::Fallback(id))
                .map(|t| t.it_value.tv_nsec),
            kevent_fallback::posix_timer::timer_gettime(id).map(|t| t.it_value.tv_nsec)
        );
    }

    /// A queue made by the fallback arm is a working queue: `init` reaches the engine, and
    /// once the engine serves, the fd is a real kevent queue.
    #[test]
    fn fallback_init_reaches_the_engine() {
        // SAFETY: a null ring with num 0: no ring memory is registered.
        let ours = unsafe { RawBackend::fallback().init(std::ptr::null_mut(), 0, 0) };
        // SAFETY: as above.
        let theirs = unsafe { kevent_fallback::kevent_init(std::ptr::null_mut(), 0, 0) };
        assert_eq!(ours.is_ok(), theirs.is_ok());
        for fd in [ours, theirs].into_iter().flatten() {
            assert_eq!(
                RawBackend::fallback().ctl(fd, KEVENT_CTL_READY, &mut []),
                Ok(0)
            );
            // SAFETY: `fd` was just returned to us by the engine and is closed once.
            unsafe { libc::close(fd) };
        }
        if let Err(e) = ours {
            assert_eq!(Some(e), theirs.err());
        }
    }

    #[test]
    fn native_on_a_stock_kernel_is_a_typed_error() {
        if kevent_kernel() {
            eprintln!("skipped: this kernel advertises kevent");
            return;
        }
        let err = RawBackend::native().expect_err("a stock kernel has no native backend");
        // `auto`: the kernel does not advertise; `fallback`: disabled; `native`: no numbers.
        assert!(
            matches!(
                err.reason(),
                Unavailable::NotAdvertised { .. }
                    | Unavailable::Disabled
                    | Unavailable::NoSyscallNumbers { .. }
                    | Unavailable::InvalidSelection { .. }
            ),
            "{err:?}"
        );
        assert!(
            err.to_string().starts_with("kevent backend unavailable: "),
            "{err}"
        );
        assert_eq!(
            err.to_string(),
            format!("kevent backend unavailable: {}", err.reason())
        );
    }

    #[test]
    fn current_on_a_stock_kernel_is_the_fallback_or_an_error() {
        if kevent_kernel() {
            eprintln!("skipped: this kernel advertises kevent");
            return;
        }
        match RawBackend::current() {
            Ok(b) => assert_eq!(b, RawBackend::Fallback),
            // KEVENT_BACKEND=native (or invalid) on a stock kernel.
            Err(e) => assert!(RawBackend::native().is_err(), "{e}"),
        }
    }

    #[test]
    fn timer_ids_round_trip_through_timer_t() {
        let fallback = RawBackend::Fallback;
        for id in [0, 1, 7, u32::MAX] {
            let t = PosixTimerId::Fallback(TimerId(id));
            assert_eq!(fallback.timer_from_timer_t(t.to_timer_t()), Ok(t));
        }
        let native = RawBackend::Native(SyscallTable {
            init: -1,
            ctl: -1,
            get_events: -1,
            wait: -1,
            commit: -1,
        });
        for id in [0, 1, i32::MAX] {
            let t = PosixTimerId::Native(id);
            assert_eq!(native.timer_from_timer_t(t.to_timer_t()), Ok(t));
        }
        // Not an id: negative (glibc's SIGEV_THREAD pointers) or too wide.
        let neg = PosixTimerId::Native(-5).to_timer_t();
        assert_eq!(native.timer_from_timer_t(neg), Err(Errno::EINVAL));
        let wide = std::ptr::without_provenance_mut(1usize << 40);
        assert_eq!(native.timer_from_timer_t(wide), Err(Errno::EINVAL));
        assert_eq!(fallback.timer_from_timer_t(wide), Err(Errno::EINVAL));
    }

    #[test]
    fn timer_ids_of_the_other_backend_are_einval() {
        let native = RawBackend::Native(SyscallTable {
            init: -1,
            ctl: -1,
            get_events: -1,
            wait: -1,
            commit: -1,
        });
        let f = PosixTimerId::Fallback(TimerId(3));
        assert_eq!(native.timer_delete(f), Err(Errno::EINVAL));
        assert_eq!(
            RawBackend::Fallback.timer_delete(PosixTimerId::Native(3)),
            Err(Errno::EINVAL)
        );
        assert!(matches!(native.timer_gettime(f), Err(Errno::EINVAL)));
    }

    /// The native arm's POSIX timer calls are the kernel's: on any kernel, a plain
    /// `SIGEV_NONE` timer can be created, read back and deleted through them (no kevent
    /// syscall is involved).
    #[test]
    fn native_timer_calls_are_the_kernels() {
        let native = RawBackend::Native(SyscallTable {
            init: -1,
            ctl: -1,
            get_events: -1,
            wait: -1,
            commit: -1,
        });
        // SAFETY: `sigevent` is plain data (ints, a union of int and pointer, padding): all
        // zeroes is a valid value.
        let mut sev: libc::sigevent = unsafe { std::mem::zeroed() };
        sev.sigev_notify = libc::SIGEV_NONE;
        let id = native
            .timer_create(libc::CLOCK_MONOTONIC, &sev)
            .expect("timer_create");
        assert!(matches!(id, PosixTimerId::Native(n) if n >= 0));
        let new = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 5_000_000,
            },
            it_value: libc::timespec {
                tv_sec: 100,
                tv_nsec: 0,
            },
        };
        let mut old = new;
        native
            .timer_settime(id, 0, &new, Some(&mut old))
            .expect("settime");
        assert_eq!((old.it_value.tv_sec, old.it_value.tv_nsec), (0, 0));
        let cur = native.timer_gettime(id).expect("gettime");
        assert_eq!(cur.it_interval.tv_nsec, 5_000_000);
        assert!(cur.it_value.tv_sec > 90);
        native.timer_delete(id).expect("delete");
        assert_eq!(native.timer_delete(id), Err(Errno::EINVAL));
        let bad = libc::itimerspec {
            it_interval: ZERO,
            it_value: libc::timespec {
                tv_sec: 0,
                tv_nsec: 2_000_000_000,
            },
        };
        let id = native
            .timer_create(libc::CLOCK_MONOTONIC, &sev)
            .expect("timer_create");
        assert_eq!(native.timer_settime(id, 0, &bad, None), Err(Errno::EINVAL));
        native.timer_delete(id).expect("delete");
    }
}
