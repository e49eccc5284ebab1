//! inotify: the queue's one inotify fd and its watches (INODE kevents).

use std::os::fd::{OwnedFd, RawFd};

use kevent_sys::Errno;

use super::{above_floor, check, owned};

/// `inotify_init1(IN_CLOEXEC | IN_NONBLOCK)`, above the internal fd floor.
pub(crate) fn inotify_init() -> Result<OwnedFd, Errno> {
    // SAFETY: no pointer arguments.
    owned(unsafe { libc::inotify_init1(libc::IN_CLOEXEC | libc::IN_NONBLOCK) }).map(above_floor)
}

/// Watches the directory open as `dir_fd` through `/proc/self/fd/N`; returns the watch
/// descriptor.
pub(crate) fn inotify_watch_fd(inotify: RawFd, dir_fd: RawFd, mask: u32) -> Result<i32, Errno> {
    let path = format!("/proc/self/fd/{dir_fd}\0");
    // SAFETY: `path` is a NUL-terminated string that lives across the call.
    check(unsafe { libc::inotify_add_watch(inotify, path.as_ptr().cast(), mask) })
}

/// Removes an inotify watch (errors are ignored: the watch may already be gone).
pub(crate) fn inotify_unwatch(inotify: RawFd, wd: i32) {
    // SAFETY: no pointer arguments.
    unsafe { libc::inotify_rm_watch(inotify, wd) };
}

/// Reads pending inotify records into `buf`; returns the number of bytes (0 when none).
pub(crate) fn inotify_read(inotify: RawFd, buf: &mut [u8]) -> usize {
    // SAFETY: `buf` is valid for writes of `buf.len()` bytes.
    let n = unsafe { libc::read(inotify, buf.as_mut_ptr().cast(), buf.len()) };
    if n < 0 { 0 } else { n as usize }
}
