//! eventfd: the queue's wake eventfd and the signal doorbell (its signalling write is
//! async-signal-safe: [`super::async_safe::eventfd_signal`]).

use std::os::fd::{OwnedFd, RawFd};

use kevent_sys::Errno;

use super::{above_floor, owned};

/// `eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)`, above the internal fd floor.
pub(crate) fn eventfd() -> Result<OwnedFd, Errno> {
    // SAFETY: no pointer arguments.
    owned(unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) }).map(above_floor)
}

/// Resets an eventfd counter to zero (it stops being readable).
pub(crate) fn eventfd_drain(fd: RawFd) {
    let mut v: u64 = 0;
    // SAFETY: reads at most 8 bytes into `v`. EAGAIN (already zero) is fine.
    unsafe { libc::read(fd, (&mut v as *mut u64).cast(), 8) };
}
