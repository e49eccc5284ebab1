//! The five calls of spec section 3, as C functions: `kevent_init`, `kevent_ctl`,
//! `kevent_get_events`, `kevent_wait`, `kevent_commit`.
//!
//! Each one takes the process's backend and dispatches on its arm:
//!
//! * **Native**: the C pointers go straight to the kernel's syscalls
//!   ([`kevent_sys::syscall`]), which copy user memory with `copy_from_user`/`copy_to_user`
//!   and so answer a bad pointer with `EFAULT` themselves. No copy, no check: the C API costs
//!   nothing over the raw syscall.
//! * **Fallback**: the engine works on Rust slices, which must never be built over memory that
//!   is not there, so `uaccess` copies the caller's arrays in and out (and checks the ring
//!   once, at init) and the slices are private buffers.
//!
//! The result goes through `errno::c_return`. No kevent rule is decided here: argument checks
//! (`EINVAL`, `EBADF`, …) are the backend's.
//!
//! Each `extern "C"` function is a thin wrapper over an `*_on` function ([`init_on`],
//! [`ctl_on`], [`get_events_on`], [`wait_on`], [`commit_on`]) that takes the backend
//! explicitly and returns `Result<_, Errno>`: the same code, on a backend of the caller's
//! choice. A benchmark of "what C users get" calls the `extern "C"` functions (the process's
//! backend, `-1`/`errno`), or the `*_on` functions to measure the C path of one backend
//! (`RawBackend::fallback()` on a machine whose default is native), beside the Rust rows that
//! call [`RawBackend`] directly.
//!
//! # Safety
//!
//! * A native syscall table ([`kevent::backend::RawBackend::syscalls`]) can only come from
//!   detection (the `kevent` crate builds it, and only from the numbers the kernel advertised
//!   and a probe confirmed), so the syscalls issued are the kernel's kevent calls.
//! * Raw C pointers are handed only to the kernel (native arm) or to `uaccess`, never
//!   dereferenced here.
//! * The ring registered by `kevent_init` must stay mapped until the queue fd is closed: that
//!   is the C contract documented in `<kevent/kevent.h>`, the same as the Rust `init`'s.
#![allow(unsafe_code)]

use std::os::raw::{c_int, c_uint};

use kevent::backend::RawBackend;
use kevent_sys::{Errno, KEVENT_CTL_ADD, kevent_ring, syscall, ukevent};

use super::backend::process;
use super::errno::c_return;
use super::uaccess;

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
        // SAFETY: this function's C contract is `init_on`'s.
        unsafe { init_on(b, ring, num, flags) }
    }))
}

/// What [`kevent_init`] does, on the backend `b` instead of the process's, returning the
/// `Errno` instead of setting `errno` (like the other `*_on` functions: for the suite and the
/// benchmark, which measure the C path on each backend a machine has).
///
/// # Safety
///
/// As [`kevent_init`].
pub unsafe fn init_on(
    b: RawBackend,
    ring: *mut kevent_ring,
    num: c_uint,
    flags: c_uint,
) -> Result<c_int, Errno> {
    if b.syscalls().is_none() {
        // The one re-check of what the copies depend on (uaccess, safecopy): cheap here,
        // never on the per-call path.
        uaccess::refresh();
        if !ring.is_null() {
            uaccess::check_ring(ring, num)?;
        }
    }
    // SAFETY: native: the kernel checks `ring` itself. Fallback: the ring was just checked
    // mapped, writable and aligned. That it stays so while the queue lives is this function's
    // C contract.
    unsafe { b.init(ring, num, flags) }
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
        // SAFETY: this function's C contract is `ctl_on`'s.
        unsafe { ctl_on(b, fd, cmd, num, arg) }
    }))
}

/// What [`kevent_ctl`] does, on the backend `b` (see [`init_on`]).
///
/// # Safety
///
/// `arg` is NULL, or an address with nothing mapped, or valid for reads and writes of `num`
/// ukevents that nothing else writes during the call; a ring registered with `fd` is covered
/// by `kevent_init`'s contract.
pub unsafe fn ctl_on(
    b: RawBackend,
    fd: c_int,
    cmd: c_uint,
    num: c_uint,
    arg: *mut ukevent,
) -> Result<u32, Errno> {
    match b.syscalls() {
        // SAFETY: `t` came from detection (module docs); the kernel copies `arg` in and out
        // itself (EFAULT for a bad pointer), and a ring of `fd` is covered by kevent_init's
        // contract.
        Some(t) => unsafe { syscall::kevent_ctl(&t, fd, cmd, num, arg) },
        None => uaccess::with_events_inout(
            arg,
            num,
            // Only if the copy would make a pipe: the queue fd's EBADF/EINVAL first (an ADD of
            // no entries checks the fd and changes nothing), decision P22.
            || b.ctl(fd, KEVENT_CTL_ADD, &mut []).map(drop),
            |ev| b.ctl(fd, cmd, ev),
        ),
    }
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
        // SAFETY: this function's C contract is `get_events_on`'s.
        unsafe { get_events_on(b, fd, min_nr, max_nr, &timeout, buf, flags) }
    }))
}

/// What [`kevent_get_events`] does, on the backend `b` instead of the process's, returning
/// the `Errno` instead of setting `errno` (see [`init_on`]). The conformance suite runs the C
/// library's argument checks through it on every backend a machine has.
///
/// # Safety
///
/// `buf` is NULL, or an address with nothing mapped, or valid for writes of `max_nr`
/// ukevents that nothing else reads or writes during the call (the call may write any of
/// them); a ring registered with `fd` is covered by `kevent_init`'s contract.
pub unsafe fn get_events_on(
    b: RawBackend,
    fd: c_int,
    min_nr: c_uint,
    max_nr: c_uint,
    timeout: &libc::timespec,
    buf: *mut ukevent,
    flags: c_uint,
) -> Result<u32, Errno> {
    match b.syscalls() {
        // SAFETY: `t` came from detection; the kernel checks and writes `buf` itself (EFAULT
        // for a bad pointer, D15 for NULL); `timeout` is a reference; a ring of `fd` is
        // covered by kevent_init's contract.
        Some(t) => unsafe {
            syscall::kevent_get_events(&t, fd, min_nr, max_nr, timeout, buf, flags)
        },
        None => uaccess::with_events_out(buf, max_nr, |ev| {
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
    c_return(process().and_then(|b| wait_on(b, fd, num, old_uidx, &timeout, flags)))
}

/// What [`kevent_wait`] does, on the backend `b` (see [`init_on`]). Safe: the only memory it
/// writes is a ring, covered by `kevent_init`'s contract.
pub fn wait_on(
    b: RawBackend,
    fd: c_int,
    num: c_uint,
    old_uidx: c_uint,
    timeout: &libc::timespec,
    flags: c_uint,
) -> Result<u32, Errno> {
    b.wait(fd, num, old_uidx, timeout, flags)
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
    c_return(process().and_then(|b| commit_on(b, fd, new_uidx, over)))
}

/// What [`kevent_commit`] does, on the backend `b` (see [`init_on`]).
pub fn commit_on(b: RawBackend, fd: c_int, new_uidx: c_uint, over: c_uint) -> Result<u32, Errno> {
    b.commit(fd, new_uidx, over)
}
