//! The calls on C callers' memory: raw pointers that may be NULL, unmapped or read-only, where
//! a bad one gives `EFAULT`, never a crash (the kernel's contract, on both backends).
//!
//! The C library (`libkevent`) is an `extern "C"` layer over these functions: it takes the
//! process's [`Backend`], calls one of them, and turns the `Result` into `-1` and `errno`.
//! The suite and the benchmark call them directly to run the C path on a chosen backend.
//!
//! * **Native**: the pointers go straight to the kernel's syscalls, which copy user memory
//!   with `copy_from_user`/`copy_to_user` and so answer a bad pointer with `EFAULT`
//!   themselves. No copy, no check: the C API costs nothing over the raw syscall.
//! * **Fallback**: the engine works on Rust slices, which must never be built over memory that
//!   is not there, so `uaccess` copies the caller's arrays in and out (and checks the ring
//!   once, at init) and the slices are private buffers.
//!
//! No kevent rule is decided here: argument checks (`EINVAL`, `EBADF`, …) are the engines'.
//! The only rule of this module's own is that of `kevent_timer_create` (queue timers only,
//! and no leaked timer when its id cannot be written back).
//!
//! # Safety
//!
//! Raw C pointers are handed only to the kernel (native arm) or to `uaccess`, which reads and
//! writes them without trusting them; they are never dereferenced here. The ring registered
//! by [`init`] must stay mapped until the queue fd is closed: that is the C contract
//! documented in `<kevent/kevent.h>`.

use std::os::fd::RawFd;
use std::os::raw::c_int;

use kevent_sys::syscall;
use kevent_sys::{Errno, KEVENT_CTL_ADD, KEVENT_INIT_ASYNC_RING, kevent_ring, ukevent};

use crate::{Backend, uaccess};

/// `kevent_init(ring, num, flags)` with a C caller's ring: creates a queue and returns its fd
/// (close-on-exec).
///
/// # Errors
///
/// `EFAULT` for a ring that is not mapped and writable now; `EINVAL` for a misaligned ring
/// (decision P3); what [`crate::init`] returns otherwise.
///
/// # Safety
///
/// A non-null `ring` that is mapped points to `8 + num * 40` bytes (with
/// `KEVENT_INIT_ASYNC_RING`, `8 + num * 40 + 8`: P38), aligned for `struct kevent_ring`, that stay mapped and writable until the queue fd and its duplicates
/// are closed, and that no Rust reference covers meanwhile.
#[doc(alias = "kevent_init")]
pub unsafe fn init(
    b: Backend,
    ring: *mut kevent_ring,
    num: u32,
    flags: u32,
) -> Result<RawFd, Errno> {
    if !b.is_native() {
        // The one re-check of what the copies depend on (uaccess, safecopy): cheap here,
        // never on the per-call path.
        uaccess::refresh();
        // The ring's size by its layout; a size the engine refuses anyway (EINVAL) is not
        // checked here, so that the engine's EINVAL comes before an EFAULT (P38).
        let len = if flags == KEVENT_INIT_ASYNC_RING {
            kevent_sys::ring::async_ring_bytes(num)
        } else {
            kevent_sys::ring_bytes(num)
        };
        if let (false, Some(len)) = (ring.is_null(), len) {
            uaccess::check_ring(ring, len)?;
        }
    }
    // SAFETY: native: the kernel checks `ring` itself. Fallback: the ring was just checked
    // mapped, writable and aligned. That it stays so while the queue lives is this function's
    // contract.
    unsafe { crate::init(b, ring, num, flags) }
}

/// `kevent_ctl(fd, cmd, num, arg)` with a C caller's array: adds, removes, modifies or marks
/// ready `num` kevents; returns the count the command defines.
///
/// # Errors
///
/// `EFAULT` for an `arg` that is not readable (and, where the call rewrites entries,
/// writable) for `num` entries; what [`Backend::ctl`] returns otherwise.
///
/// # Safety
///
/// `arg` is NULL, or an address with nothing mapped, or valid for reads and writes of `num`
/// ukevents that nothing else accesses during the call; a ring registered with `fd` is
/// covered by [`init`]'s contract.
#[doc(alias = "kevent_ctl")]
pub unsafe fn ctl(
    b: Backend,
    fd: RawFd,
    cmd: u32,
    num: u32,
    arg: *mut ukevent,
) -> Result<u32, Errno> {
    match b {
        // SAFETY: `t` came from detection (crate docs); the kernel copies `arg` in and out
        // itself (EFAULT for a bad pointer), and a ring of `fd` is covered by init's contract.
        Backend::Native(t) => unsafe { syscall::kevent_ctl(&t, fd, cmd, num, arg) },
        Backend::Fallback => uaccess::with_events_inout(
            arg,
            num,
            // Only if the copy would make a pipe: the queue fd's EBADF/EINVAL first (an ADD of
            // no entries checks the fd and changes nothing), decision P22.
            || b.ctl(fd, KEVENT_CTL_ADD, &mut []).map(drop),
            |ev| b.ctl(fd, cmd, ev),
        ),
    }
}

/// `kevent_get_events(fd, min_nr, max_nr, timeout, buf, flags)` into a C caller's buffer:
/// waits for ready kevents and copies up to `max_nr` into `buf`; returns how many.
///
/// `max_nr == 0` or `min_nr > max_nr` is `EINVAL`, a NULL `buf` with `max_nr > 0` is `EFAULT`
/// (spec **D15**), before the call waits or takes any event. On the fallback one call returns
/// at most 4096 events (and `min_nr` is clamped to that).
///
/// # Errors
///
/// `EFAULT` for a `buf` that cannot take the returned events; what [`Backend::get_events`]
/// returns otherwise.
///
/// # Safety
///
/// `buf` is NULL, or an address with nothing mapped, or valid for writes of `max_nr`
/// ukevents that nothing else accesses during the call (the call may write any of them); a
/// ring registered with `fd` is covered by [`init`]'s contract.
#[doc(alias = "kevent_get_events")]
pub unsafe fn get_events(
    b: Backend,
    fd: RawFd,
    min_nr: u32,
    max_nr: u32,
    timeout: &libc::timespec,
    buf: *mut ukevent,
    flags: u32,
) -> Result<u32, Errno> {
    match b {
        // SAFETY: `t` came from detection; the kernel checks and writes `buf` itself (EFAULT
        // for a bad pointer, D15 for NULL); `timeout` is a reference; a ring of `fd` is
        // covered by init's contract.
        Backend::Native(t) => unsafe {
            syscall::kevent_get_events(&t, fd, min_nr, max_nr, timeout, buf, flags)
        },
        Backend::Fallback => uaccess::with_events_out(buf, max_nr, |ev| {
            // `ev` is shorter than `max_nr` only past MAX_OUT: then wait for at most that many
            // (a `min_nr` above `max_nr` goes through unchanged, for the engine's EINVAL, D15).
            let len = u32::try_from(ev.len()).unwrap_or(u32::MAX);
            let min_nr = if len < max_nr && min_nr <= max_nr {
                min_nr.min(len)
            } else {
                min_nr
            };
            b.get_events(fd, min_nr, ev, timeout, flags)
        }),
    }
}

/// `kevent_timer_create(clockid, sevp, timerid)`—Creates a POSIX timer whose expiries are
/// reported to the queue named in `*sevp`, and stores its id in `*timerid`.
///
/// `sevp == NULL`, or a `sigev_notify` other than `SIGEV_KEVENT`, gives `EINVAL` (these calls
/// are for queue timers only). If `*timerid` cannot be written the timer is deleted again and
/// the call fails with `EFAULT`, as the kernel does.
///
/// # Errors
///
/// `EFAULT` for an unreadable `sevp` or unwritable `timerid`; what
/// [`Backend::timer_create`] returns otherwise.
///
/// # Safety
///
/// `timerid` is an address with nothing mapped, or valid for a write of one `timer_t` that
/// nothing else accesses during the call.
#[doc(alias = "kevent_timer_create")]
pub unsafe fn timer_create(
    b: Backend,
    clock: libc::clockid_t,
    sevp: *const libc::sigevent,
    timerid: *mut libc::timer_t,
) -> Result<(), Errno> {
    if sevp.is_null() {
        return Err(Errno::EINVAL);
    }
    let sev = uaccess::read_value(sevp)?;
    // Only queue timers: on a kevent kernel the syscall would also create a SIGEV_NONE or
    // SIGEV_SIGNAL timer, which these calls are not for (and which the fallback cannot make),
    // so both backends refuse them here.
    if sev.sigev_notify != kevent_sys::SIGEV_KEVENT as c_int {
        return Err(Errno::EINVAL);
    }
    let id = b.timer_create(clock, &sev)?;
    if let Err(e) = uaccess::write_value(timerid, &id.to_timer_t()) {
        // Nobody can name this timer: do not leak it.
        let _ = b.timer_delete(id);
        return Err(e);
    }
    Ok(())
}

/// `kevent_timer_settime(timerid, flags, new_value, old_value)`—Arms or disarms the timer
/// (`TIMER_ABSTIME` in `flags`: absolute); the previous setting goes to `*old_value` if it is
/// not NULL. `new_value == NULL` gives `EINVAL`, as from the kernel.
///
/// # Errors
///
/// `EFAULT` for an unreadable `new_value` or unwritable `old_value`; what
/// [`Backend::timer_settime`] returns otherwise.
///
/// # Safety
///
/// `old_value` is NULL, an address with nothing mapped, or valid for a write of one
/// `itimerspec` that nothing else accesses during the call.
#[doc(alias = "kevent_timer_settime")]
pub unsafe fn timer_settime(
    b: Backend,
    timerid: libc::timer_t,
    flags: c_int,
    new_value: *const libc::itimerspec,
    old_value: *mut libc::itimerspec,
) -> Result<(), Errno> {
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
}

/// `kevent_timer_gettime(timerid, curr_value)`—Stores the time until the next expiry and the
/// interval.
///
/// # Errors
///
/// `EFAULT` for an unwritable `curr_value`; what [`Backend::timer_gettime`] returns
/// otherwise.
///
/// # Safety
///
/// `curr_value` is an address with nothing mapped, or valid for a write of one `itimerspec`
/// that nothing else accesses during the call.
#[doc(alias = "kevent_timer_gettime")]
pub unsafe fn timer_gettime(
    b: Backend,
    timerid: libc::timer_t,
    curr_value: *mut libc::itimerspec,
) -> Result<(), Errno> {
    let id = b.timer_from_timer_t(timerid)?;
    let cur = b.timer_gettime(id)?;
    uaccess::write_value(curr_value, &cur)
}

/// `kevent_timer_delete(timerid)`—Deletes the timer; no expiry is reported afterwards.
///
/// # Errors
///
/// What [`Backend::timer_delete`] returns.
#[doc(alias = "kevent_timer_delete")]
pub fn timer_delete(b: Backend, timerid: libc::timer_t) -> Result<(), Errno> {
    b.timer_delete(b.timer_from_timer_t(timerid)?)
}
