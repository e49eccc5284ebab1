//! The author's epoll-over-kevent mapping ("Kevent bonus: epoll implementation over kevent",
//! LKML, 2007-01-10), as pure functions over the ABI types of `kevent-sys`.
//!
//! * An epoll registration of `fd` is a `KEVENT_POLL` kevent with `id.raw[0] = fd`, the
//!   registration's `epoll_data` as its cookie, and as `event` the epoll mask without epoll's
//!   own flags, plus `POLLERR | POLLHUP` (epoll reports those whatever the mask says).
//! * Request flags: `KEVENT_REQ_ALWAYS_QUEUE | KEVENT_REQ_LAST_CHECK` (an fd ready at
//!   `EPOLL_CTL_ADD` is reported by the next wait, not by the ctl; what a wait reports is
//!   what the fd has then); `EPOLLET` → `KEVENT_REQ_ET`, `EPOLLONESHOT` →
//!   `KEVENT_REQ_ONESHOT`.
//! * A delivered event is `{events: ret_data[0], data: cookie}`: a POLL kevent's
//!   `ret_data[0]` is the `revents` it saw, and the `KEVENT_POLL_*` bits are Linux's
//!   `EPOLL*`/`POLL*` bits (checked at compile time below).
//!
//! Two flags the original did not know are dropped from the mask as well: `EPOLLEXCLUSIVE`
//! (wake one of several epolls watching one fd; each kevent queue is woken for its own
//! kevent, which is what `EPOLLEXCLUSIVE` degrades to with one queue) and `EPOLLWAKEUP`
//! (a suspend-blocking wakeup source; a kevent queue holds none).

use std::os::fd::RawFd;

use kevent_sys::{
    KEVENT_POLL, KEVENT_POLL_POLLERR, KEVENT_POLL_POLLHUP, KEVENT_POLL_POLLIN, KEVENT_POLL_POLLMSG,
    KEVENT_POLL_POLLOUT, KEVENT_POLL_POLLPRI, KEVENT_POLL_POLLRDBAND, KEVENT_POLL_POLLRDHUP,
    KEVENT_POLL_POLLRDNORM, KEVENT_POLL_POLLWRBAND, KEVENT_POLL_POLLWRNORM,
    KEVENT_REQ_ALWAYS_QUEUE, KEVENT_REQ_ET, KEVENT_REQ_LAST_CHECK, KEVENT_REQ_ONESHOT, kevent_id,
    ukevent,
};

/// `EPOLLET`.
pub const EPOLLET: u32 = libc::EPOLLET as u32;
/// `EPOLLONESHOT`.
pub const EPOLLONESHOT: u32 = libc::EPOLLONESHOT as u32;
/// `EPOLLEXCLUSIVE`.
pub const EPOLLEXCLUSIVE: u32 = libc::EPOLLEXCLUSIVE as u32;
/// `EPOLLWAKEUP`.
pub const EPOLLWAKEUP: u32 = libc::EPOLLWAKEUP as u32;

/// epoll's flags that are not poll bits (the original's `EP_PRIVATE_BITS`, plus the two
/// newer ones).
pub const PRIVATE_BITS: u32 = EPOLLONESHOT | EPOLLET | EPOLLEXCLUSIVE | EPOLLWAKEUP;

/// What every mapped kevent watches besides the caller's mask: epoll reports an error or a
/// hang-up whatever the mask asks for.
pub const ALWAYS: u32 = KEVENT_POLL_POLLERR | KEVENT_POLL_POLLHUP;

// The mapping passes masks through unchanged: the KEVENT_POLL_* bits must be epoll's.
const _: () = assert!(
    KEVENT_POLL_POLLIN == libc::EPOLLIN as u32
        && KEVENT_POLL_POLLPRI == libc::EPOLLPRI as u32
        && KEVENT_POLL_POLLOUT == libc::EPOLLOUT as u32
        && KEVENT_POLL_POLLERR == libc::EPOLLERR as u32
        && KEVENT_POLL_POLLHUP == libc::EPOLLHUP as u32
        && KEVENT_POLL_POLLRDNORM == libc::EPOLLRDNORM as u32
        && KEVENT_POLL_POLLRDBAND == libc::EPOLLRDBAND as u32
        && KEVENT_POLL_POLLWRNORM == libc::EPOLLWRNORM as u32
        && KEVENT_POLL_POLLWRBAND == libc::EPOLLWRBAND as u32
        && KEVENT_POLL_POLLMSG == libc::EPOLLMSG as u32
        && KEVENT_POLL_POLLRDHUP == libc::EPOLLRDHUP as u32
);

/// The kevent request flags for an epoll mask: `LAST_CHECK`, `ALWAYS_QUEUE` when
/// `always_queue` (the author's mapping always sets it), `ET` and `ONESHOT` from epoll's.
pub fn req_flags(events: u32, always_queue: bool) -> u32 {
    let mut req = KEVENT_REQ_LAST_CHECK;
    if always_queue {
        req |= KEVENT_REQ_ALWAYS_QUEUE;
    }
    if events & EPOLLET != 0 {
        req |= KEVENT_REQ_ET;
    }
    if events & EPOLLONESHOT != 0 {
        req |= KEVENT_REQ_ONESHOT;
    }
    req
}

/// The POLL kevent mask for an epoll mask: the poll bits, plus [`ALWAYS`].
pub fn poll_mask(events: u32) -> u32 {
    (events & !PRIVATE_BITS) | ALWAYS
}

/// The POLL kevent that stands for the epoll registration `(fd, events, data)`.
pub fn to_ukevent(fd: RawFd, events: u32, data: u64, always_queue: bool) -> ukevent {
    let mut uk = ukevent::new(
        KEVENT_POLL,
        kevent_id::from_raw([fd as u32, 0]),
        poll_mask(events),
        req_flags(events, always_queue),
    );
    uk.set_cookie(data);
    uk
}

/// The key of fd's POLL kevent (for REMOVE; the other fields do not matter).
pub fn key(fd: RawFd) -> ukevent {
    ukevent::new(KEVENT_POLL, kevent_id::from_raw([fd as u32, 0]), 0, 0)
}

/// The epoll event a delivered POLL kevent stands for: `(ret_data[0], cookie)`.
pub fn to_epoll_event(e: &ukevent) -> libc::epoll_event {
    libc::epoll_event {
        events: e.ret_data[0],
        u64: e.cookie(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_authors_mapping() {
        let e = (libc::EPOLLIN | libc::EPOLLET | libc::EPOLLONESHOT | libc::EPOLLRDHUP) as u32;
        let uk = to_ukevent(7, e, 0xfeed_0000_0000_beef, true);
        assert_eq!(uk.type_, KEVENT_POLL);
        assert_eq!(uk.id.raw(), [7, 0]);
        assert_eq!(
            uk.event,
            KEVENT_POLL_POLLIN | KEVENT_POLL_POLLRDHUP | KEVENT_POLL_POLLERR | KEVENT_POLL_POLLHUP
        );
        assert_eq!(
            uk.req_flags,
            KEVENT_REQ_ALWAYS_QUEUE | KEVENT_REQ_LAST_CHECK | KEVENT_REQ_ET | KEVENT_REQ_ONESHOT
        );
        assert_eq!(uk.cookie(), 0xfeed_0000_0000_beef);
        let lvl = to_ukevent(7, libc::EPOLLOUT as u32, 1, false);
        assert_eq!(lvl.req_flags, KEVENT_REQ_LAST_CHECK);
        assert_eq!(lvl.event, KEVENT_POLL_POLLOUT | ALWAYS);
        // EPOLLEXCLUSIVE and EPOLLWAKEUP are no poll bits.
        assert_eq!(poll_mask(EPOLLEXCLUSIVE | EPOLLWAKEUP), ALWAYS);
    }

    #[test]
    fn delivered_events_carry_revents_and_the_cookie() {
        let mut uk = to_ukevent(3, libc::EPOLLIN as u32, 42, true);
        uk.ret_data = [KEVENT_POLL_POLLIN | KEVENT_POLL_POLLHUP, 0];
        let ev = to_epoll_event(&uk);
        let (events, data) = (ev.events, ev.u64);
        assert_eq!(events, (libc::EPOLLIN | libc::EPOLLHUP) as u32);
        assert_eq!(data, 42);
    }
}
