//! timerfd and the clocks: the queue's one timerfd, armed at its earliest deadline, and
//! `clock_gettime`.

use std::os::fd::{OwnedFd, RawFd};

use kevent_sys::Errno;

use super::{above_floor, check, owned};

/// `timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK)`, above the internal fd floor.
pub(crate) fn timerfd_create() -> Result<OwnedFd, Errno> {
    // SAFETY: no pointer arguments.
    owned(unsafe {
        libc::timerfd_create(
            libc::CLOCK_MONOTONIC,
            libc::TFD_CLOEXEC | libc::TFD_NONBLOCK,
        )
    })
    .map(above_floor)
}

/// Arms a timerfd to fire once at the absolute CLOCK_MONOTONIC time `deadline_ns`, or
/// disarms it (`None`).
pub(crate) fn timerfd_arm(fd: RawFd, deadline_ns: Option<u64>) -> Result<(), Errno> {
    let value = match deadline_ns {
        // A zero it_value disarms; the earliest valid absolute time is 1 ns.
        Some(ns) => crate::timer::ns_to_timespec(ns.max(1)),
        None => libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        },
    };
    let spec = libc::itimerspec {
        it_interval: libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        },
        it_value: value,
    };
    // SAFETY: `spec` lives across the call; the old-value pointer is null (not wanted).
    check(unsafe {
        libc::timerfd_settime(fd, libc::TFD_TIMER_ABSTIME, &spec, std::ptr::null_mut())
    })
    .map(drop)
}

/// Reads (and so resets) a timerfd's expiration count; 0 if it had not fired.
pub(crate) fn timerfd_drain(fd: RawFd) -> u64 {
    let mut v: u64 = 0;
    // SAFETY: reads at most 8 bytes into `v`.
    unsafe { libc::read(fd, (&mut v as *mut u64).cast(), 8) };
    v
}

/// `clock_gettime(clock)`; the `timespec` stays zero if the clock is invalid (callers pass
/// only the clocks every Linux has).
pub(crate) fn clock_gettime(clock: libc::clockid_t) -> libc::timespec {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a live, writable `timespec` on this stack frame; `clock_gettime` writes
    // only that struct and keeps no pointer to it.
    let rc = unsafe { libc::clock_gettime(clock, &mut ts) };
    debug_assert_eq!(rc, 0, "clock_gettime({clock}) failed");
    ts
}
