//! SOCKET kevents: `id.raw[0]` is a socket fd; RECV, ACCEPT, SEND.
//!
//! Readable (data, a pending connection, EOF) and writable are ready; a socket error is
//! BROKEN with `-SO_ERROR`; a hang-up is BROKEN (`-EPIPE`) only for a kevent that watches
//! nothing but SEND, since for RECV the hang-up reads as EOF. `ret_data[0]` holds the
//! `KEVENT_SOCKET_*` bits that are ready.

use std::os::fd::RawFd;

use kevent_sys::{Errno, KEVENT_SOCKET_ACCEPT, KEVENT_SOCKET_RECV, KEVENT_SOCKET_SEND};

use crate::rules::Report;
use crate::sys;

const IN: u32 = libc::EPOLLIN as u32;
const OUT: u32 = libc::EPOLLOUT as u32;
const RDHUP: u32 = libc::EPOLLRDHUP as u32;
const HUP: u32 = libc::EPOLLHUP as u32;
const ERR: u32 = libc::EPOLLERR as u32;

pub(crate) fn epoll_events(event: u32) -> u32 {
    let mut e = 0;
    if event & (KEVENT_SOCKET_RECV | KEVENT_SOCKET_ACCEPT) != 0 {
        e |= IN | RDHUP;
    }
    if event & KEVENT_SOCKET_SEND != 0 {
        e |= OUT;
    }
    e
}

/// How epoll's `revents` read for a SOCKET kevent watching `event` on `fd`.
///
/// Inline (it runs once per delivered socket event); the error case, which reads
/// `SO_ERROR`, stays out of line.
#[inline]
pub(crate) fn report(fd: RawFd, event: u32, revents: u32) -> Option<Report> {
    if revents & ERR != 0 {
        return Some(broken(fd));
    }
    let mut ready = 0;
    if revents & (IN | RDHUP | HUP) != 0 {
        ready |= event & (KEVENT_SOCKET_RECV | KEVENT_SOCKET_ACCEPT);
    }
    if revents & OUT != 0 {
        ready |= event & KEVENT_SOCKET_SEND;
    }
    if ready != 0 {
        Some(Report::Ready([ready, 0]))
    } else if revents & HUP != 0 {
        Some(Report::Broken(Errno::EPIPE))
    } else {
        None
    }
}

/// The report of a socket with an error pending: `BROKEN` with its `SO_ERROR` (P49).
#[cold]
#[inline(never)]
fn broken(fd: RawFd) -> Report {
    Report::Broken(sys::socket_error(fd).unwrap_or(Errno::EIO))
}
