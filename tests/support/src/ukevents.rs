//! ukevent constructors for each type.

use std::ffi::c_int;
use std::os::fd::RawFd;

use crate::*;

/// An UNOTIFY kevent (`event` 1) with request flags `req`.
pub fn user(id: u64, req: u32) -> ukevent {
    ukevent::new(KEVENT_UNOTIFY, kevent_id::from_u64(id), 1, req)
}

/// An UNOTIFY kevent with a cookie.
pub fn user_c(id: u64, req: u32, cookie: u64) -> ukevent {
    let mut e = user(id, req);
    e.set_cookie(cookie);
    e
}

/// A kevent watching fd `fd` (SOCKET, PIPE, POLL, INODE: `raw[0]` = fd).
pub fn on_fd(type_: u32, fd: RawFd, event: u32, req: u32) -> ukevent {
    ukevent::new(type_, kevent_id::from_raw([fd as u32, 0]), event, req)
}

/// A TIMER kevent of `sec` seconds and `nsec` nanoseconds.
pub fn timer(sec: u32, nsec: u32, req: u32) -> ukevent {
    ukevent::new(
        KEVENT_TIMER,
        kevent_id::from_raw([sec, nsec]),
        KEVENT_TIMER_FIRED,
        req,
    )
}

/// A SIGNAL kevent for `signo`, with NOMASK when `nomask`.
pub fn signal(signo: c_int, nomask: bool, req: u32) -> ukevent {
    ukevent::new(
        KEVENT_SIGNAL,
        kevent_id::signal(signo, nomask),
        KEVENT_SIGNAL_DELIVERY,
        req,
    )
}

/// The `-errno` a BROKEN entry carries in `ret_data[1]`.
pub fn neg(e: Errno) -> u32 {
    e.negated()
}
