//! POLL kevents: `id.raw[0]` is any pollable fd; `event` is a `KEVENT_POLL_*` mask, whose
//! bits equal Linux's `POLL*`/`EPOLL*` bits, so the mask goes to epoll unchanged.
//!
//! `ret_data[0]` is `revents & event`. As with poll(2), an error or hang-up is reported even
//! when the mask does not ask for it (`revents & (event | POLLERR | POLLHUP)`): epoll reports
//! those conditions unconditionally, and swallowing them would leave a level kevent that
//! epoll keeps waking for and the queue never delivers.

use crate::rules::Report;

/// The `KEVENT_POLL_*` bits epoll understands (POLLNVAL and POLLREMOVE are not requestable).
const REQUESTABLE: u32 = 0x2000 | 0x7df;

pub(crate) fn epoll_events(event: u32) -> u32 {
    event & REQUESTABLE & !(libc::POLLNVAL as u32)
}

pub(crate) fn report(event: u32, revents: u32) -> Option<Report> {
    let always = (libc::POLLERR | libc::POLLHUP | libc::POLLNVAL) as u32;
    let bits = revents & (event | always);
    if bits != 0 {
        Some(Report::Ready([bits, 0]))
    } else {
        None
    }
}
