//! The five raw syscalls of a kevent kernel (spec section 3) and the optional sixth,
//! `kevent_aio_sendfile` (D18), through a [`SyscallTable`], and
//! the kernel's POSIX timer syscalls, which a kevent kernel extends with `SIGEV_KEVENT`.
//!
//! These are every native system call of the project: the backend dispatch
//! (`kevent-backend`) calls them and nothing else issues a kevent or `timer_*` syscall.
//!
//! The five kevent calls are thin `unsafe` wrappers over one raw system call each (the
//! `syscall` instruction on x86_64, `crate::arch`): they decode the kernel's `-errno` result
//! into [`Errno`] and do nothing else; they leave the thread's `errno` alone. They never pick a syscall number themselves; the caller
//! passes the table that [`crate::detect`] proved (spec section 6) or, for a historic kernel the
//! user vouched for with `KEVENT_BACKEND=native`, [`SyscallTable::from_header`]. Calling them
//! with numbers of a kernel that did not advertise kevent runs whatever syscall owns that number
//! (x86_64 280, the historic `kevent_get_events`, is `utimensat` today).
//!
//! # The timeout is passed by pointer
//!
//! The original patch declared `kevent_get_events(int fd, unsigned int min_nr, unsigned int
//! max_nr, struct timespec timeout, struct ukevent *buf, unsigned int flags)`: `timeout` by
//! value. x86_64 passes syscall arguments in six registers; a by-value `timespec` takes two, so
//! `kevent_get_events` needed seven and its last argument, `flags`, was silently lost (the bug
//! that spec decision **D5** names). This project's kernel port therefore takes the timeout of
//! `kevent_get_events` and `kevent_wait` as a `const struct timespec *`, and so do these
//! wrappers. Only the syscall boundary differs: the C library's prototypes keep the by-value
//! signature of spec section 3.
//!
//! # Arguments
//!
//! Every integer argument is widened to `c_long` explicitly before it is passed: `u32` values
//! are zero-extended and file descriptors sign-extended, so the upper half of each argument
//! register is defined; pointers are passed as their address.

use std::os::fd::RawFd;

use libc::c_long;

use crate::{Errno, kevent_ring, ukevent};

/// The syscall numbers of the five kevent calls on the running kernel.
///
/// The numbers come from the kernel's own advertisement (`/sys/kernel/kevent/syscalls`, read by
/// [`crate::detect`]) or, for a historic kernel selected explicitly, from the patched headers
/// the build found ([`SyscallTable::from_header`]). They are never written as literals.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SyscallTable {
    /// `__NR_kevent_init`.
    pub init: c_long,
    /// `__NR_kevent_ctl`.
    pub ctl: c_long,
    /// `__NR_kevent_get_events`.
    pub get_events: c_long,
    /// `__NR_kevent_wait`.
    pub wait: c_long,
    /// `__NR_kevent_commit`.
    pub commit: c_long,
    /// `__NR_kevent_aio_sendfile` (D18): the optional sixth number, `None` on a kernel that
    /// advertises five. [`kevent_aio_sendfile`] then answers `ENOSYS` without a syscall.
    pub aio_sendfile: Option<c_long>,
}

impl SyscallTable {
    /// Numbers found by bindgen in a patched kernel's headers (cfg `kevent_header_syscalls`),
    /// else `None`.
    ///
    /// These numbers describe the kernel the program was *built* against, not necessarily the
    /// one it runs on. Detection uses them only with `KEVENT_BACKEND=native` on a kernel that
    /// does not advertise itself (spec section 6); `auto` never does.
    pub const fn from_header() -> Option<SyscallTable> {
        #[cfg(kevent_header_syscalls)]
        {
            Some(SyscallTable {
                init: crate::__NR_kevent_init as c_long,
                ctl: crate::__NR_kevent_ctl as c_long,
                get_events: crate::__NR_kevent_get_events as c_long,
                wait: crate::__NR_kevent_wait as c_long,
                commit: crate::__NR_kevent_commit as c_long,
                // The historic patches that define the five numbers never shipped this call
                // under this name: a historic kernel has no native AIO (ENOSYS).
                aio_sendfile: None,
            })
        }
        #[cfg(not(kevent_header_syscalls))]
        {
            None
        }
    }
}

/// Turns the kernel's result (the value, or `-errno` in `-4095..=-1`) into a `Result`: the
/// one place that convention is read.
fn decode(ret: c_long) -> Result<c_long, Errno> {
    if (-4095..0).contains(&ret) {
        Err(Errno::from_raw(-ret as i32).unwrap_or(Errno::EINVAL))
    } else {
        Ok(ret)
    }
}

/// System call `nr` with up to six arguments, decoded.
///
/// # Safety
///
/// As [`crate::arch::syscall6`]: the call's effects are the caller's to prove.
unsafe fn call(nr: c_long, a: [c_long; 6]) -> Result<c_long, Errno> {
    // SAFETY: forwarded: the caller proves the call sound.
    decode(unsafe { crate::arch::syscall6(nr, a[0], a[1], a[2], a[3], a[4], a[5]) })
}

/// A pointer as a system call argument.
fn ptr<T>(p: *const T) -> c_long {
    p as usize as c_long
}

/// `kevent_init(ring, num, flags)`—Creates a queue and returns its fd (close-on-exec).
///
/// `ring == NULL && num == 0` creates a queue without a ring; otherwise `ring` must be non-null
/// and `num >= 2` (`EINVAL`). No `flags` are defined (D1: unknown bits give `EINVAL`).
///
/// The caller owns the returned fd and must close it.
///
/// # Safety
///
/// * `t` holds the numbers of the running kernel's kevent syscalls: it comes from
///   [`crate::detect`], or from [`SyscallTable::from_header`] on a kernel known to carry the
///   same patch. Any other number runs an unrelated syscall with these arguments.
/// * `ring` is null with `num == 0`, or points to `crate::ring_bytes(num)` bytes, aligned for
///   [`kevent_ring`], valid for reads and writes until the returned fd and every duplicate of it
///   are closed. The kernel writes `ring_kidx`, `ring_over` and the entries from this call on
///   and during later calls on the queue, so that memory must not be freed, moved, or covered
///   by a Rust `&`/`&mut` reference while the queue is open.
pub unsafe fn kevent_init(
    t: &SyscallTable,
    ring: *mut kevent_ring,
    num: u32,
    flags: u32,
) -> Result<RawFd, Errno> {
    // SAFETY: `t.init` is the kernel's kevent_init (caller contract). The kernel reads and
    // writes `ring` (null, or `ring_bytes(num)` bytes the caller keeps alive for the queue's
    // lifetime); no other user memory is touched.
    let r = unsafe { call(t.init, [ptr(ring), num as c_long, flags as c_long, 0, 0, 0]) };
    r.map(|fd| fd as RawFd)
}

/// `kevent_ctl(fd, cmd, num, arg)`—Adds, removes, modifies or marks ready `num` kevents.
///
/// Returns, for `KEVENT_CTL_ADD`, how many entries were written back to the start of `arg`
/// (ready at once or failed); for `KEVENT_CTL_READY`, the number marked (spec section 3).
///
/// # Safety
///
/// * `t` holds the running kernel's kevent syscall numbers (see [`kevent_init`]).
/// * `arg` is null with `num == 0` (a null `arg` with `num > 0` gives `EFAULT`), or points to
///   `num` initialized [`ukevent`]s valid for reads and writes for the duration of the call;
///   the kernel rewrites entries in place.
/// * If `fd` is a queue with a ring, the ring contract of [`kevent_init`] still holds.
pub unsafe fn kevent_ctl(
    t: &SyscallTable,
    fd: RawFd,
    cmd: u32,
    num: u32,
    arg: *mut ukevent,
) -> Result<u32, Errno> {
    // SAFETY: `t.ctl` is the kernel's kevent_ctl (caller contract). The kernel reads and writes
    // `num` ukevents at `arg`, which the caller keeps valid for this call, and no other user
    // memory except the queue's ring (kept alive per the kevent_init contract).
    let r = unsafe {
        call(
            t.ctl,
            [fd as c_long, cmd as c_long, num as c_long, ptr(arg), 0, 0],
        )
    };
    r.map(|n| n as u32)
}

/// `kevent_get_events(fd, min_nr, max_nr, timeout, buf, flags)`—Waits for ready kevents and
/// copies up to `max_nr` of them into `buf`.
///
/// Waits until at least `max(min_nr, 1)` kevents are ready (D4), `timeout` passes (relative on
/// CLOCK_MONOTONIC, or absolute CLOCK_REALTIME with `KEVENT_FLAGS_ABSTIME`, D5) or a
/// `READY(0)` wake-up comes, and returns how many events it copied (0 on timeout). The timeout
/// travels by pointer (see the module docs).
///
/// # Safety
///
/// * `t` holds the running kernel's kevent syscall numbers (see [`kevent_init`]).
/// * `buf` points to `max_nr` [`ukevent`]s valid for writes for the duration of the call
///   (null only with `max_nr == 0`).
/// * If `fd` is a queue with a ring, the ring contract of [`kevent_init`] still holds: this call
///   writes ring entries and `ring_kidx`.
pub unsafe fn kevent_get_events(
    t: &SyscallTable,
    fd: RawFd,
    min_nr: u32,
    max_nr: u32,
    timeout: &libc::timespec,
    buf: *mut ukevent,
    flags: u32,
) -> Result<u32, Errno> {
    let timeout: *const libc::timespec = timeout;
    // SAFETY: `t.get_events` is the kernel's kevent_get_events (caller contract). The kernel
    // reads `*timeout` (borrowed for this call), writes up to `max_nr` ukevents to `buf` (valid
    // for the call per the caller contract) and may write the queue's ring (kevent_init
    // contract); nothing else.
    let r = unsafe {
        call(
            t.get_events,
            [
                fd as c_long,
                min_nr as c_long,
                max_nr as c_long,
                ptr(timeout),
                ptr(buf),
                flags as c_long,
            ],
        )
    };
    r.map(|n| n as u32)
}

/// `kevent_wait(fd, num, old_uidx, timeout, flags)`—Waits, then moves up to `num` ready
/// kevents into the queue's ring.
///
/// Returns 0 at once if `old_uidx` is not the queue's consumer index; otherwise the number of
/// events moved into free ring slots starting at `ring_kidx` (spec section 3, D12). The timeout
/// travels by pointer (see the module docs).
///
/// # Safety
///
/// * `t` holds the running kernel's kevent syscall numbers (see [`kevent_init`]).
/// * The ring contract of [`kevent_init`] holds: this call writes ring entries and `ring_kidx`.
pub unsafe fn kevent_wait(
    t: &SyscallTable,
    fd: RawFd,
    num: u32,
    old_uidx: u32,
    timeout: &libc::timespec,
    flags: u32,
) -> Result<u32, Errno> {
    let timeout: *const libc::timespec = timeout;
    // SAFETY: `t.wait` is the kernel's kevent_wait (caller contract). The kernel reads
    // `*timeout` (borrowed for this call) and writes only the queue's ring, which the caller
    // keeps alive and unaliased per the kevent_init contract.
    let r = unsafe {
        call(
            t.wait,
            [
                fd as c_long,
                num as c_long,
                old_uidx as c_long,
                ptr(timeout),
                flags as c_long,
                0,
            ],
        )
    };
    r.map(|n| n as u32)
}

/// `kevent_commit(fd, new_uidx, over)`—Releases ring slots up to `new_uidx`.
///
/// Returns how many slots were released; 0 for a stale commit (D13). `over` is the `ring_over`
/// the committer read before it consumed (`EOVERFLOW` if it fell a whole ring behind).
///
/// # Safety
///
/// * `t` holds the running kernel's kevent syscall numbers (see [`kevent_init`]).
/// * The ring contract of [`kevent_init`] holds: this call may write `ring_over`.
pub unsafe fn kevent_commit(
    t: &SyscallTable,
    fd: RawFd,
    new_uidx: u32,
    over: u32,
) -> Result<u32, Errno> {
    // SAFETY: `t.commit` is the kernel's kevent_commit (caller contract). The only user memory
    // it writes is the queue's `ring_over`, kept alive per the kevent_init contract.
    let r = unsafe {
        call(
            t.commit,
            [fd as c_long, new_uidx as c_long, over as c_long, 0, 0, 0],
        )
    };
    r.map(|n| n as u32)
}

/// `kevent_aio_sendfile(fd, sock_fd, in_fd, offset, count)`—Starts sending `count` bytes of
/// `in_fd` from `offset` to the connected stream socket `sock_fd` in the kernel, and returns
/// the request id (`> 0`); the completion arrives on queue `fd` as one `KEVENT_AIO` event
/// (spec D18).
///
/// The number is the sixth one the kernel advertised ([`SyscallTable::aio_sendfile`]); a
/// kernel that advertised five has no such call, and this returns `ENOSYS` without issuing any
/// syscall (spec section 6: nothing calls a number the kernel did not name).
///
/// # Errors
///
/// `ENOSYS` without the sixth number; otherwise what the kernel returns (D18): `EBADF`,
/// `EINVAL`, `ENOTCONN`, `ENOMEM`, `EAGAIN`.
///
/// # Safety
///
/// `t` holds the running kernel's kevent syscall numbers (see [`kevent_init`]): a wrong
/// `aio_sendfile` number runs an unrelated syscall with these arguments. The call itself
/// touches no user memory.
pub unsafe fn kevent_aio_sendfile(
    t: &SyscallTable,
    fd: RawFd,
    sock_fd: RawFd,
    in_fd: RawFd,
    offset: u64,
    count: u64,
) -> Result<u64, Errno> {
    let Some(nr) = t.aio_sendfile else {
        return Err(Errno::ENOSYS);
    };
    // SAFETY: `nr` is the kernel's kevent_aio_sendfile (caller contract). The call takes
    // integers only and touches no user memory. The u64 arguments are passed whole (x86_64:
    // one register each).
    let r = unsafe {
        call(
            nr,
            [
                fd as c_long,
                sock_fd as c_long,
                in_fd as c_long,
                offset as c_long,
                count as c_long,
                0,
            ],
        )
    };
    r.map(|id| id as u64)
}

/// `timer_create(clock, sev)`—The kernel's `timer_create(2)`, which a kevent kernel extends
/// with `SIGEV_KEVENT` (expiries reported to the queue whose fd is in the first int of
/// `sev`'s `_sigev_un`); returns the kernel's timer id.
///
/// Issued as a raw syscall rather than through glibc's wrapper, so that the id is always the
/// kernel's number (glibc's `timer_t` for `SIGEV_THREAD` is a pointer it dereferences).
///
/// Safe: the kernel reads one `sigevent` (a reference, valid for the call) and writes one
/// `int` (a local). A `SIGEV_KEVENT` timer makes the kernel write the queue's ring later,
/// which the ring's registration (`kevent_init`'s contract) already covers.
///
/// # Errors
///
/// What `timer_create(2)` returns: `EINVAL` (clock, notification), `EBADF` (queue fd),
/// `EAGAIN`, `ENOMEM`.
pub fn timer_create(clock: libc::clockid_t, sev: &libc::sigevent) -> Result<i32, Errno> {
    let mut id: libc::c_int = 0;
    let sev: *const libc::sigevent = sev;
    let id_ptr: *mut libc::c_int = &mut id;
    // SAFETY: timer_create(2) reads one `struct sigevent` from `sev` (a reference, valid for
    // the call) and writes one int to `id_ptr` (a local); no other user memory.
    let r = unsafe {
        call(
            libc::SYS_timer_create,
            [c_long::from(clock), ptr(sev), ptr(id_ptr), 0, 0, 0],
        )
    };
    r.map(|_| id)
}

/// `timer_settime(id, flags, new, old)`—The kernel's `timer_settime(2)`: arms (or, with a
/// zero `it_value`, disarms) timer `id`; `old`, if given, receives the previous setting.
///
/// # Errors
///
/// `EINVAL` for an unknown id, bad `flags` or a bad `itimerspec`.
pub fn timer_settime(
    id: i32,
    flags: i32,
    new: &libc::itimerspec,
    old: Option<&mut libc::itimerspec>,
) -> Result<(), Errno> {
    let new: *const libc::itimerspec = new;
    let old: *mut libc::itimerspec = match old {
        Some(old) => old,
        None => std::ptr::null_mut(),
    };
    // SAFETY: timer_settime(2) reads one itimerspec from `new` (a reference) and, when `old`
    // is non-null, writes one to it (an exclusive reference); both are valid for the call. The
    // id is only a number: the kernel checks it.
    let r = unsafe {
        call(
            libc::SYS_timer_settime,
            [
                c_long::from(id),
                c_long::from(flags),
                ptr(new),
                ptr(old),
                0,
                0,
            ],
        )
    };
    r.map(drop)
}

/// `timer_gettime(id)`—The kernel's `timer_gettime(2)`: the time to the next expiry and the
/// interval of timer `id`.
///
/// # Errors
///
/// `EINVAL` for an unknown id.
pub fn timer_gettime(id: i32) -> Result<libc::itimerspec, Errno> {
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
    let r = unsafe {
        call(
            libc::SYS_timer_gettime,
            [c_long::from(id), ptr(cur_ptr), 0, 0, 0, 0],
        )
    };
    r.map(|_| cur)
}

/// `timer_delete(id)`—The kernel's `timer_delete(2)`: no expiry of timer `id` is reported
/// afterwards.
///
/// # Errors
///
/// `EINVAL` for an unknown id.
pub fn timer_delete(id: i32) -> Result<(), Errno> {
    // SAFETY: timer_delete(2) takes only a number and touches no user memory.
    let r = unsafe { call(libc::SYS_timer_delete, [c_long::from(id), 0, 0, 0, 0, 0]) };
    r.map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Without a patched header in this build there are no header numbers; with one, the
    /// numbers are the header's (checked end to end by `tests/bindgen_path.rs`).
    #[test]
    fn s6_from_header_matches_build_cfg() {
        let t = SyscallTable::from_header();
        assert_eq!(t.is_some(), cfg!(kevent_header_syscalls), "{t:?}");
    }

    #[test]
    fn decode_maps_minus_errno_to_errno() {
        assert_eq!(decode(5), Ok(5));
        assert_eq!(decode(0), Ok(0));
        assert_eq!(decode(-(libc::EBADF as c_long)), Err(Errno::EBADF));
        assert_eq!(decode(-4095), Err(Errno::from_raw(4095).unwrap()));
        // Below -4095 is a value (an address, say), not an error.
        assert_eq!(decode(-4096), Ok(-4096));
        // The raw call itself: `close(-1)` touches no memory and answers -EBADF, leaving
        // errno as it was.
        Errno::EAGAIN.set_last();
        // SAFETY: close(2) of -1 takes a number only.
        let r = unsafe { call(libc::SYS_close, [-1, 0, 0, 0, 0, 0]) };
        assert_eq!(r, Err(Errno::EBADF));
        assert_eq!(Errno::last(), Errno::EAGAIN);
        // SAFETY: getpid(2) takes nothing and touches no memory.
        let pid = unsafe { call(libc::SYS_getpid, [0; 6]) };
        // SAFETY: getpid(3) has no preconditions.
        assert_eq!(pid, Ok(c_long::from(unsafe { libc::getpid() })));
    }

    /// D18 / section 6: a kernel that advertised five numbers has no native AIO; the call
    /// answers ENOSYS without issuing a syscall (the numbers here would be unrelated calls).
    #[test]
    fn d18_aio_sendfile_without_sixth_number_is_enosys() {
        let t = SyscallTable {
            init: libc::SYS_getpid,
            ctl: libc::SYS_getpid,
            get_events: libc::SYS_getpid,
            wait: libc::SYS_getpid,
            commit: libc::SYS_getpid,
            aio_sendfile: None,
        };
        // SAFETY: without the sixth number no syscall is issued at all.
        let r = unsafe { kevent_aio_sendfile(&t, 0, 1, 2, 0, 1) };
        assert_eq!(r, Err(Errno::ENOSYS));
    }
}
