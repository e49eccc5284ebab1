//! The kevent ABI v1 as a userspace engine over epoll, timerfd, signalfd, eventfd and inotify.
//!
//! (Being built: the public signatures below are fixed; the bodies arrive with issue 3.)
#![deny(unsafe_op_in_unsafe_fn)]

use std::os::fd::RawFd;

use kevent_sys::{Errno, kevent_ring, ukevent};

/// `kevent_init(ring, num, flags)`: creates a queue and returns its fd (close-on-exec).
///
/// # Safety
///
/// When `ring` is non-null it must point to `8 + num * 40` bytes that stay valid and are not
/// freed until the queue fd is closed; the engine writes entries and `ring_kidx`/`ring_over`
/// there while the queue lives.
pub unsafe fn kevent_init(ring: *mut kevent_ring, num: u32, flags: u32) -> Result<RawFd, Errno> {
    let _ = (ring, num, flags);
    Err(Errno::ENOSYS)
}

/// `kevent_ctl(fd, cmd, events.len(), events)`.
pub fn kevent_ctl(fd: RawFd, cmd: u32, events: &mut [ukevent]) -> Result<u32, Errno> {
    let _ = (fd, cmd, events);
    Err(Errno::ENOSYS)
}

/// `kevent_get_events(fd, min_nr, buf.len(), timeout, buf, flags)`.
pub fn kevent_get_events(
    fd: RawFd,
    min_nr: u32,
    buf: &mut [ukevent],
    timeout: &libc::timespec,
    flags: u32,
) -> Result<u32, Errno> {
    let _ = (fd, min_nr, buf, timeout, flags);
    Err(Errno::ENOSYS)
}

/// `kevent_wait(fd, num, old_uidx, timeout, flags)`.
pub fn kevent_wait(
    fd: RawFd,
    num: u32,
    old_uidx: u32,
    timeout: &libc::timespec,
    flags: u32,
) -> Result<u32, Errno> {
    let _ = (fd, num, old_uidx, timeout, flags);
    Err(Errno::ENOSYS)
}

/// `kevent_commit(fd, new_uidx, over)`.
pub fn kevent_commit(fd: RawFd, new_uidx: u32, over: u32) -> Result<u32, Errno> {
    let _ = (fd, new_uidx, over);
    Err(Errno::ENOSYS)
}

pub mod posix_timer {
    //! POSIX timers that report to a queue (`SIGEV_KEVENT`), emulated.

    use kevent_sys::Errno;

    /// A fallback POSIX timer id (what `timer_t` carries for the C library).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub struct TimerId(pub u32);

    /// `timer_create(clock, sev)` with `sev.sigev_notify == SIGEV_KEVENT` and the queue fd in
    /// the first int of `_sigev_un`.
    pub fn timer_create(clock: libc::clockid_t, sev: &libc::sigevent) -> Result<TimerId, Errno> {
        let _ = (clock, sev);
        Err(Errno::ENOSYS)
    }

    /// `timer_settime(id, flags, new, old)`; `flags` accepts `TIMER_ABSTIME`.
    pub fn timer_settime(
        id: TimerId,
        flags: i32,
        new: &libc::itimerspec,
        old: Option<&mut libc::itimerspec>,
    ) -> Result<(), Errno> {
        let _ = (id, flags, new, old);
        Err(Errno::ENOSYS)
    }

    /// `timer_gettime(id)`.
    pub fn timer_gettime(id: TimerId) -> Result<libc::itimerspec, Errno> {
        let _ = id;
        Err(Errno::ENOSYS)
    }

    /// `timer_delete(id)`.
    pub fn timer_delete(id: TimerId) -> Result<(), Errno> {
        let _ = id;
        Err(Errno::ENOSYS)
    }
}
