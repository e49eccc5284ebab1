//! POSIX timers that report to a kevent queue (`SIGEV_KEVENT`): `kevent_timer_create`,
//! `kevent_timer_settime`, `kevent_timer_gettime`, `kevent_timer_delete`.
//!
//! The `sigevent` names the queue: `sigev_notify = SIGEV_KEVENT` and the queue fd in the first
//! int of `_sigev_un` (spec section 2). On a kevent kernel the backend issues the kernel's
//! `timer_*` syscalls; on the fallback the engine emulates them. Either way the `timer_t` C
//! gets is the backend's timer id carried in the pointer-sized `timer_t`
//! ([`kevent::backend::PosixTimerId`]), so it is only valid with these four calls.
//!
//! Arguments are few bytes; they are copied through `uaccess` on both backends.
//!
//! # Safety
//!
//! C pointers are only passed to `uaccess`, which reads and writes them without trusting them
//! (`EFAULT`).
#![allow(unsafe_code)]

use std::os::raw::c_int;

use kevent_sys::Errno;

use super::backend::process;
use super::errno::c_return;
use super::uaccess;

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
        if sevp.is_null() {
            return Err(Errno::EINVAL);
        }
        let sev = uaccess::read_value(sevp.cast_const())?;
        // Only queue timers: on a kevent kernel the syscall below would also create a
        // SIGEV_NONE or SIGEV_SIGNAL timer, which these four calls are not for (and which the
        // fallback cannot make), so both backends refuse them here.
        if sev.sigev_notify != kevent_sys::SIGEV_KEVENT as c_int {
            return Err(Errno::EINVAL);
        }
        let id = b.timer_create(clockid, &sev)?;
        if let Err(e) = uaccess::write_value(timerid, &id.to_timer_t()) {
            // Nobody can name this timer: do not leak it.
            let _ = b.timer_delete(id);
            return Err(e);
        }
        Ok(())
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
        let id = b.timer_from_timer_t(timerid)?;
        if new_value.is_null() {
            return Err(Errno::EINVAL);
        }
        let new = uaccess::read_value(new_value)?;
        if old_value.is_null() {
            return b.timer_settime(id, flags, &new, None);
        }
        let mut old = new;
        b.timer_settime(id, flags, &new, Some(&mut old))?;
        uaccess::write_value(old_value, &old)
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
        let id = b.timer_from_timer_t(timerid)?;
        let cur = b.timer_gettime(id)?;
        uaccess::write_value(curr_value, &cur)
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
    c_return(process().and_then(|b| b.timer_delete(b.timer_from_timer_t(timerid)?)))
}
