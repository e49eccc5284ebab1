//! The five calls of spec section 3, as C functions: `kevent_init`, `kevent_ctl`,
//! `kevent_get_events`, `kevent_wait`, `kevent_commit`.
//!
//! Each one takes the process's backend, calls the dispatch's C-memory entry point
//! ([`kevent_backend::user`], or the [`Backend`] method where no C pointer is involved), and
//! returns through `errno::c_return`. Nothing here knows which backend runs, and no kevent
//! rule is decided here: argument checks (`EINVAL`, `EBADF`, …) are the backend's, and a bad
//! pointer becomes `EFAULT` inside the dispatch.
//!
//! # Safety
//!
//! Raw C pointers are passed on unchanged to [`kevent_backend::user`], whose contracts are
//! these functions' C contracts. The ring registered by `kevent_init` must stay mapped until
//! the queue fd is closed: that is the C contract documented in `<kevent/kevent.h>`.
#![allow(unsafe_code)]

use std::os::raw::{c_int, c_uint};

use kevent_backend::{Backend, user};
use kevent_sys::{kevent_ring, ukevent};

use super::backend::process;
use super::errno::c_return;

/// `int kevent_init(struct kevent_ring *ring, unsigned int num, unsigned int flags)`—Creates
/// a queue and returns its fd (close-on-exec), or -1 with `errno`.
///
/// # Safety
///
/// C contract: a non-null `ring` points to `8 + num * 40` bytes, aligned for
/// `struct kevent_ring`, that stay mapped and writable until the queue fd and its duplicates
/// are closed. A ring that is not mapped and writable *now* gives `EFAULT`, not a crash.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn kevent_init(ring: *mut kevent_ring, num: c_uint, flags: c_uint) -> c_int {
    c_return(process().and_then(|b| {
        // SAFETY: this function's C contract is `user::init`'s.
        unsafe { user::init(b, ring, num, flags) }
    }))
}

/// `int kevent_ctl(int fd, unsigned int cmd, unsigned int num, struct ukevent *arg)`—Adds,
/// removes, modifies or marks ready `num` kevents; returns the count the command defines, or
/// -1 with `errno`.
///
/// # Safety
///
/// None beyond C's: an `arg` that is not readable (and, where the call rewrites entries,
/// writable) for `num` entries gives `EFAULT`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn kevent_ctl(
    fd: c_int,
    cmd: c_uint,
    num: c_uint,
    arg: *mut ukevent,
) -> c_int {
    c_return(process().and_then(|b| {
        // SAFETY: this function's C contract is `user::ctl`'s.
        unsafe { user::ctl(b, fd, cmd, num, arg) }
    }))
}

/// `int kevent_get_events(int fd, unsigned int min_nr, unsigned int max_nr, struct timespec
/// timeout, struct ukevent *buf, unsigned int flags)`—Waits for ready kevents and copies up to
/// `max_nr` into `buf`; returns how many, or -1 with `errno`.
///
/// `max_nr == 0` or `min_nr > max_nr` is `EINVAL`, a NULL `buf` with `max_nr > 0` is `EFAULT`
/// (spec **D15**), before the call waits or takes any event.
///
/// # Backends
///
/// On the fallback one call returns at most 4096 events (and `min_nr` is clamped to that).
///
/// # Safety
///
/// None beyond C's: a `buf` that cannot take the returned events gives `EFAULT`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn kevent_get_events(
    fd: c_int,
    min_nr: c_uint,
    max_nr: c_uint,
    timeout: libc::timespec,
    buf: *mut ukevent,
    flags: c_uint,
) -> c_int {
    c_return(process().and_then(|b| {
        // SAFETY: this function's C contract is `user::get_events`'s.
        unsafe { user::get_events(b, fd, min_nr, max_nr, &timeout, buf, flags) }
    }))
}

/// `int kevent_wait(int fd, unsigned int num, unsigned int old_uidx, struct timespec timeout,
/// unsigned int flags)`—Waits, then moves up to `num` ready kevents into the ring; returns how
/// many, or -1 with `errno`.
///
/// # Safety
///
/// None beyond C's: the only user memory written is the ring, covered by kevent_init's
/// contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn kevent_wait(
    fd: c_int,
    num: c_uint,
    old_uidx: c_uint,
    timeout: libc::timespec,
    flags: c_uint,
) -> c_int {
    c_return(process().and_then(|b: Backend| b.wait(fd, num, old_uidx, &timeout, flags)))
}

/// `int kevent_commit(int fd, unsigned int new_uidx, unsigned int over)`—Releases ring slots
/// up to `new_uidx`; returns how many (0 if stale), or -1 with `errno`.
///
/// # Safety
///
/// None beyond C's: the only user memory written is the ring's `ring_over`, covered by
/// kevent_init's contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn kevent_commit(fd: c_int, new_uidx: c_uint, over: c_uint) -> c_int {
    c_return(process().and_then(|b: Backend| b.commit(fd, new_uidx, over)))
}
