//! Event sources: what differs per type. The rules (flags, delivery, the ready list) are
//! shared in `rules` and `queue`; each source answers the same few questions:
//!
//! * **prepare**: is this ukevent acceptable, and is it ready right now (for ADD)?
//! * **arm** / **disarm**: start or stop watching (epoll, the shared timer heap, the
//!   process-wide signal routing, the shared inotify fd);
//! * **report**: what a delivery says (`ret_data`, or BROKEN).
//!
//! | type | Linux mechanism | per-kevent kernel object |
//! |---|---|---|
//! | SOCKET, PIPE, POLL | the queue's epoll (level, `EPOLLET`, `EPOLLONESHOT`) | none (an epoll item) |
//! | TIMER, POSIX_TIMER | one timerfd per queue + a userspace heap | none |
//! | SIGNAL | a process-wide handler + one shared eventfd doorbell | none |
//! | INODE | one inotify fd per queue | one inotify watch per directory |
//! | UNOTIFY | the queue's wake eventfd | none |
//! | NAIO, AIO, POSIX_TIMER by ADD, unknown | — | ADD answers `-ENOSYS` (**D2**) |

pub(crate) mod fd;
pub(crate) mod inode;
mod pipe;
mod poll;
pub(crate) mod signal;
mod socket;
pub(crate) mod timer;

use std::os::fd::RawFd;

use kevent_sys::{
    Errno, KEVENT_INODE, KEVENT_PIPE, KEVENT_POLL, KEVENT_SIGNAL, KEVENT_SOCKET, KEVENT_TIMER,
    KEVENT_UNOTIFY, ukevent,
};

use crate::rules::Report;

/// A kevent's source state.
#[derive(Debug)]
pub(crate) enum Source {
    /// SOCKET, PIPE, POLL: the fd and the identity (`st_dev`, `st_ino`) of the file it
    /// named at ADD (**D10**).
    Fd { fd: RawFd, file: (u64, u64) },
    /// TIMER and POSIX_TIMER: the period (0 = fires once) and the last expiry.
    Timer {
        interval_ns: u64,
        last_expiry_ns: u64,
    },
    /// SIGNAL: the signal, NOMASK, and the delivery count already reported.
    Signal { signo: i32, nomask: bool, seen: u64 },
    /// INODE: the inotify watch of the directory.
    Inode { wd: i32 },
    /// UNOTIFY: nothing to watch.
    User,
}

/// The result of checking a ukevent for ADD.
#[derive(Debug)]
pub(crate) struct Prepared {
    pub(crate) source: Source,
    /// What the source would report right now, if anything.
    pub(crate) ready_now: Option<Report>,
}

/// Whether ADD accepts this type at all (**D2**).
pub(crate) fn addable(type_: u32) -> bool {
    matches!(
        type_,
        KEVENT_SOCKET
            | KEVENT_PIPE
            | KEVENT_POLL
            | KEVENT_TIMER
            | KEVENT_SIGNAL
            | KEVENT_INODE
            | KEVENT_UNOTIFY
    )
}

/// Checks one ukevent for ADD. Types that need process- or queue-wide machinery
/// (SIGNAL, INODE) are prepared at arm time instead; they are never ready at ADD.
pub(crate) fn prepare(uk: &ukevent) -> Result<Prepared, Errno> {
    let id = uk.id.raw();
    match uk.type_ {
        KEVENT_SOCKET | KEVENT_PIPE | KEVENT_POLL => {
            let fd = fd::fd_of(id);
            let file = fd::validate(uk.type_, fd)?;
            let revents = fd::poll_now(uk.type_, fd, uk.event);
            Ok(Prepared {
                source: Source::Fd {
                    fd,
                    file: file.identity(),
                },
                ready_now: fd::report(uk.type_, fd, uk.event, revents),
            })
        }
        KEVENT_TIMER => Ok(Prepared {
            source: Source::Timer {
                interval_ns: timer::interval_of(id)?,
                last_expiry_ns: 0,
            },
            ready_now: None,
        }),
        KEVENT_SIGNAL => Ok(Prepared {
            source: signal::prepare(uk.id.as_u64())?,
            ready_now: None,
        }),
        KEVENT_INODE => Ok(Prepared {
            source: inode::prepare(id)?,
            ready_now: None,
        }),
        KEVENT_UNOTIFY => Ok(Prepared {
            source: Source::User,
            ready_now: None,
        }),
        _ => Err(Errno::ENOSYS),
    }
}
