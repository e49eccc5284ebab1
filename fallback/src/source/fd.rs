//! What SOCKET, PIPE and POLL kevents share: an fd registered in the queue's epoll.
//!
//! Level kevents (the default, **D7**) are registered level-triggered, so epoll itself
//! re-reports a source that is still ready on every wait; `REQ_ET` maps to `EPOLLET` and
//! `REQ_ONESHOT` to `EPOLLONESHOT` (the kevent is unregistered at its delivery). The type
//! files (`socket`, `pipe`, `poll`) only say which fds they accept, which epoll events they
//! need and how epoll's readiness reads as a report.

use std::os::fd::RawFd;

use kevent_sys::{Errno, KEVENT_PIPE, KEVENT_POLL, KEVENT_SOCKET};

use crate::rules::{self, Report};
use crate::sys::{self, FileId};

use super::{pipe, poll, socket};

/// The fd a SOCKET/PIPE/POLL kevent watches (`id.raw[0]`).
pub(crate) fn fd_of(id: [u32; 2]) -> RawFd {
    id[0] as i32
}

/// Checks that `fd` suits the type; returns its identity (kept for **D10**).
pub(crate) fn validate(type_: u32, fd: RawFd) -> Result<FileId, Errno> {
    let file = sys::file_id(fd)?;
    let ok = match type_ {
        KEVENT_SOCKET => file.is_socket(),
        KEVENT_PIPE => file.is_fifo(),
        // Regular files and directories have no ->poll; epoll refuses them (EPERM), the
        // spec says EINVAL.
        KEVENT_POLL => !(file.kind == libc::S_IFREG || file.is_dir()),
        _ => false,
    };
    if ok { Ok(file) } else { Err(Errno::EINVAL) }
}

/// The epoll events to ask for.
pub(crate) fn epoll_events(type_: u32, event: u32, req_flags: u32) -> u32 {
    let base = match type_ {
        KEVENT_SOCKET => socket::epoll_events(event),
        KEVENT_PIPE => pipe::epoll_events(event),
        _ => poll::epoll_events(event),
    };
    let mut mode = 0;
    if rules::edge(req_flags) {
        mode |= libc::EPOLLET as u32;
    }
    if req_flags & kevent_sys::KEVENT_REQ_ONESHOT != 0 {
        mode |= libc::EPOLLONESHOT as u32;
    }
    base | mode
}

/// How epoll's `revents` reads for this kevent: `None` when it is not ready for what the
/// kevent watches.
pub(crate) fn report(type_: u32, fd: RawFd, event: u32, revents: u32) -> Option<Report> {
    match type_ {
        KEVENT_SOCKET => socket::report(fd, event, revents),
        KEVENT_PIPE => pipe::report(event, revents),
        _ => poll::report(event, revents),
    }
}

/// Readiness right now (a `poll` with zero timeout), for ADD.
pub(crate) fn poll_now(type_: u32, fd: RawFd, event: u32) -> u32 {
    let want = epoll_events(type_, event, 0) as i16;
    sys::poll_now(fd, want) as u16 as u32
}

/// Readiness right now of a registered kevent's fd, for LAST_CHECK and READY marks: `None`
/// when the fd no longer names the file registered (`file`, its identity at ADD), whose
/// readiness must never be reported through this registration (**D10**).
pub(crate) fn poll_registered(type_: u32, fd: RawFd, file: (u64, u64), event: u32) -> Option<u32> {
    match sys::file_id(fd) {
        Ok(now) if now.identity() == file => Some(poll_now(type_, fd, event)),
        _ => None,
    }
}
