//! PIPE kevents: `id.raw[0]` is a FIFO fd (a pipe end or a named FIFO); RECV and SEND.
//!
//! Data buffered or space free is ready; the peer closing is BROKEN (`-EPIPE`): the read end
//! sees a hang-up with nothing left to read, the write end an error. `ret_data[0]` holds
//! the `KEVENT_SOCKET_*` bits that are ready.

use kevent_sys::{Errno, KEVENT_SOCKET_RECV, KEVENT_SOCKET_SEND};

use crate::rules::Report;

const IN: u32 = libc::EPOLLIN as u32;
const OUT: u32 = libc::EPOLLOUT as u32;
const HUP: u32 = libc::EPOLLHUP as u32;
const ERR: u32 = libc::EPOLLERR as u32;

pub(crate) fn epoll_events(event: u32) -> u32 {
    let mut e = 0;
    if event & KEVENT_SOCKET_RECV != 0 {
        e |= IN;
    }
    if event & KEVENT_SOCKET_SEND != 0 {
        e |= OUT;
    }
    e
}

pub(crate) fn report(event: u32, revents: u32) -> Option<Report> {
    let mut ready = 0;
    if revents & IN != 0 {
        ready |= event & KEVENT_SOCKET_RECV;
    }
    if revents & OUT != 0 {
        ready |= event & KEVENT_SOCKET_SEND;
    }
    if ready != 0 {
        Some(Report::Ready([ready, 0]))
    } else if revents & (HUP | ERR) != 0 {
        Some(Report::Broken(Errno::EPIPE))
    } else {
        None
    }
}
