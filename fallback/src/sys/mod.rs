//! The engine's system calls: every libc function and raw system call of `kevent-fallback`
//! is made here, and nowhere else (constants and types of `libc` are used everywhere).
//!
//! | module | what it wraps |
//! |---|---|
//! | [`epoll`] | the queue's epoll: create, `epoll_ctl`, harvest (raw system calls, P25) |
//! | [`eventfd`] | the wake eventfd and the signal doorbell |
//! | [`timerfd`] | the queue's timerfd, and `clock_gettime` |
//! | [`inotify`] | the queue's inotify fd and its watches |
//! | [`fd`] | the internal fd floor; `fstat`, `poll`, `SO_ERROR`, `F_GETFL` of an fd |
//! | [`aio`] | AIO transfers (D18): fd checks and duplicates, `pread`, non-blocking `send` without `SIGPIPE`, the worker's signal mask |
//! | [`async_safe`] | the async-signal-safe subset: the **only** wrappers code in signal context (the signal handler, the fork child handlers) may call |
//! | here | `pthread_atfork` (called by `crate::fork` alone) |
//!
//! Each wrapper is a small safe fn returning `Result<_, Errno>` (mio's `syscall!` shape) or
//! the plain result where failure is harmless; the only pointers handed to the kernel are
//! references or slices that live across the call.
//!
//! # epoll through raw system calls
//!
//! `epoll_create1`, `epoll_ctl` and `epoll_wait` go to the kernel with `syscall(2)`, never
//! through libc's exported wrappers (decision P25): `libkevent-epoll.so` interposes those
//! symbols to turn a program's epoll instances into kevent queues, and on the fallback
//! backend the engine inside it *is* a user of epoll. Through the wrappers its own calls would
//! land in the shim again (an endless recursion, or queues inside queues); as raw system
//! calls they reach the kernel whatever the process preloads. The wrappers add nothing the
//! engine needs: glibc's `epoll_wait` is `epoll_pwait` with no signal mask, which is what
//! [`epoll_wait`] calls, and its pthread cancellation point is not one the engine offers
//! (a kevent wait is not a cancellation point either). The signal handler's `epoll_ctl`
//! ([`async_safe::raw_epoll_ctl`]) is the same raw system call.
//!
//! # Safety
//!
//! Every `unsafe` block in this module and its children is a libc call whose pointer
//! arguments are derived from Rust references or slices valid for the duration of the call,
//! and whose fd arguments are plain integers (the kernel validates them; a wrong fd yields an
//! error, never memory unsafety); each says so in its own `// SAFETY:` comment.
#![allow(unsafe_code)]

pub(crate) mod aio;
pub(crate) mod async_safe;
mod epoll;
mod eventfd;
mod fd;
mod inotify;
mod timerfd;

use std::os::fd::{FromRawFd, OwnedFd};

use kevent_sys::Errno;

pub(crate) use async_safe::eventfd_signal;
pub(crate) use epoll::{Harvest, SignalsHeld, epoll_create, epoll_ctl, epoll_items, epoll_wait};
pub(crate) use eventfd::{eventfd, eventfd_drain};
pub(crate) use fd::{
    FileId, above_floor, file_id, nap_until_readable, poll_now, socket_error, status_flags,
};
pub(crate) use inotify::{inotify_init, inotify_read, inotify_unwatch, inotify_watch_fd};
pub(crate) use timerfd::{clock_gettime, timerfd_arm, timerfd_create, timerfd_drain};

/// Turns libc's `-1` sentinel into `Err(errno)` (read directly: an expected failure, such as
/// the `EEXIST` that proves a queue's identity, is on hot paths).
fn check(ret: libc::c_int) -> Result<libc::c_int, Errno> {
    if ret < 0 {
        Err(Errno::from_raw(async_safe::errno()).unwrap_or(Errno::EIO))
    } else {
        Ok(ret)
    }
}

/// A raw system call's result ([`async_safe::raw_syscall6`]: `-errno` on failure) as a
/// `Result`.
#[inline]
fn check_raw(ret: isize) -> Result<usize, Errno> {
    if ret < 0 {
        Err(Errno::from_raw(-ret as libc::c_int).unwrap_or(Errno::EIO))
    } else {
        Ok(ret as usize)
    }
}

/// Adopts a freshly created fd.
fn owned(fd: libc::c_int) -> Result<OwnedFd, Errno> {
    let fd = check(fd)?;
    // SAFETY: `fd` was just returned by a creating syscall (epoll_create1, eventfd,
    // timerfd_create, inotify_init1): it is open and nobody else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `pthread_atfork(prepare, parent, child)`: 0 or an error number. Only `crate::fork` calls
/// it, once.
pub(crate) fn pthread_atfork(
    prepare: extern "C" fn(),
    parent: extern "C" fn(),
    child: extern "C" fn(),
) -> libc::c_int {
    // SAFETY: three `extern "C"` functions without arguments that live for the whole program;
    // the call only stores their addresses.
    unsafe { libc::pthread_atfork(Some(prepare), Some(parent), Some(child)) }
}
