//! POSIX timers that report to a kevent queue (`SIGEV_KEVENT`): `kevent_timer_create`,
//! `kevent_timer_settime`, `kevent_timer_gettime`, `kevent_timer_delete`.
//!
//! The `sigevent` names the queue: `sigev_notify = SIGEV_KEVENT` and the queue fd in the first
//! int of `_sigev_un` (spec section 2). On a kevent kernel the backend issues the kernel's
//! `timer_*` syscalls; on the fallback the engine emulates them. Either way the `timer_t` C
//! gets is the backend's timer id carried in the pointer-sized `timer_t`
//! ([`kevent_backend::PosixTimerId`]), so it is only valid with these four calls.
//!
//! Each function is the `extern "C"` face of the dispatch's C-memory entry point
//! ([`kevent_backend::user`]), which copies the few bytes of arguments without trusting them.
//!
//! # Safety
//!
//! C pointers are passed on unchanged to [`kevent_backend::user`], whose contracts are these
//! functions' C contracts.
#![allow(unsafe_code)]

use std::os::raw::c_int;

use kevent_backend::user;

use super::backend::process;
use super::errno::c_return;

/// `int kevent_timer_create(clockid_t clockid, struct sigevent *sevp, timer_t *timerid)`—
/// Creates a POSIX timer whose expiries are reported to the queue named in `*sevp`; stores its
/// id in `*timerid`. Returns 0, or -1 with `errno`.
///
/// `sevp == NULL`, or a `sigev_notify` other than `SIGEV_KEVENT`, gives `EINVAL` (use
/// `timer_create` for other timers). If
/// `*timerid` cannot be written the timer is deleted again and the call fails with `EFAULT`,
/// as the kernel does.
///
/// # Safety
///
/// None beyond C's: unreadable `sevp` or unwritable `timerid` give `EFAULT`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn kevent_timer_create(
    clockid: libc::clockid_t,
    sevp: *mut libc::sigevent,
    timerid: *mut libc::timer_t,
) -> c_int {
    c_return(process().and_then(|b| {
        // SAFETY: this function's C contract is `user::timer_create`'s.
        unsafe { user::timer_create(b, clockid, sevp.cast_const(), timerid) }
    }))
}

/// `int kevent_timer_settime(timer_t timerid, int flags, const struct itimerspec *new_value,
/// struct itimerspec *old_value)`—Arms or disarms the timer (`TIMER_ABSTIME` in `flags`:
/// absolute); the previous setting goes to `*old_value` if it is not NULL. Returns 0, or -1
/// with `errno`.
///
/// `new_value == NULL` gives `EINVAL`, as from the kernel.
///
/// # Safety
///
/// None beyond C's: unreadable `new_value` or unwritable `old_value` give `EFAULT`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn kevent_timer_settime(
    timerid: libc::timer_t,
    flags: c_int,
    new_value: *const libc::itimerspec,
    old_value: *mut libc::itimerspec,
) -> c_int {
    c_return(process().and_then(|b| {
        // SAFETY: this function's C contract is `user::timer_settime`'s.
        unsafe { user::timer_settime(b, timerid, flags, new_value, old_value) }
    }))
}

/// `int kevent_timer_gettime(timer_t timerid, struct itimerspec *curr_value)`—Stores the time
/// until the next expiry and the interval. Returns 0, or -1 with `errno`.
///
/// # Safety
///
/// None beyond C's: an unwritable `curr_value` gives `EFAULT`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn kevent_timer_gettime(
    timerid: libc::timer_t,
    curr_value: *mut libc::itimerspec,
) -> c_int {
    c_return(process().and_then(|b| {
        // SAFETY: this function's C contract is `user::timer_gettime`'s.
        unsafe { user::timer_gettime(b, timerid, curr_value) }
    }))
}

/// `int kevent_timer_delete(timer_t timerid)`—Deletes the timer; no expiry is reported
/// afterwards. Returns 0, or -1 with `errno`.
///
/// # Safety
///
/// None beyond C's.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn kevent_timer_delete(timerid: libc::timer_t) -> c_int {
    c_return(process().and_then(|b| user::timer_delete(b, timerid)))
}
