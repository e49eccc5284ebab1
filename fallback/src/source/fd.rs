//! What SOCKET, PIPE and POLL kevents share: an fd registered in the queue's epoll.
//!
//! Level kevents (the default, **D7**) are registered level-triggered, so epoll itself
//! re-reports a source that is still ready on every wait; `REQ_ET` maps to `EPOLLET` and
//! `REQ_ONESHOT` to `EPOLLONESHOT` (the kevent is unregistered at its delivery). The type
//! files (`socket`, `pipe`, `poll`) only say which fds they accept, which epoll events they
//! need and how epoll's readiness reads as a report.
//!
//! A kevent keeps the identity (`st_dev`, `st_ino`) of the file its fd named at ADD (**D10**);
//! the fd itself is `id.raw[0]` of the registered id, not stored again.

use std::os::fd::RawFd;

use kevent_sys::{
    Errno, KEVENT_PIPE, KEVENT_POLL, KEVENT_REQ_ALWAYS_QUEUE, KEVENT_REQ_READY, KEVENT_SOCKET,
    kevent_id, ukevent,
};

use crate::kevent::{Kevent, Registered};
use crate::rules::{self, Report};
use crate::sys::{self, FileId};
use crate::token;

use super::{Epoll, Prepared, QueueCx, Source, pipe, poll, socket};

/// A SOCKET, PIPE or POLL kevent's source: the identity of the file its fd named at ADD.
#[derive(Debug)]
pub(crate) struct Fd {
    file: (u64, u64),
}

/// Checks an fd kevent for ADD and polls its fd once (it may be ready at once).
pub(super) fn prepare(uk: &ukevent) -> Result<Prepared, Errno> {
    let fd = fd_of(uk.id.raw());
    let file = validate(uk.type_, fd)?;
    // With ALWAYS_QUEUE or READY the ADD registers whatever the fd has now (`rules::on_add`;
    // epoll's ADD finds a ready fd ready): no need to look (one `poll` less per ADD, the
    // epoll shim's case, issue 24 item 6).
    let ready_now = if uk.req_flags & (KEVENT_REQ_ALWAYS_QUEUE | KEVENT_REQ_READY) != 0 {
        None
    } else {
        report(uk.type_, fd, uk.event, poll_now(uk.type_, fd, uk.event))
    };
    Ok(Prepared {
        source: Source::Fd(Fd {
            file: file.identity(),
        }),
        ready_now,
    })
}

impl Fd {
    /// The watched fd.
    pub(super) fn fd(&self, uk: &Registered) -> RawFd {
        fd_of(kevent_id::from_u64(uk.id).raw())
    }

    /// Removes the fd from the queue's epoll (not for a stale kevent, nor a number that went
    /// to one of the queue's own fds: the dispatcher checks).
    pub(super) fn disarm(&self, uk: &Registered, ep: Epoll) {
        // Errors mean the fd is closed or names another file now: either way the
        // registration is gone or unreachable.
        let _ = ep.ctl(libc::EPOLL_CTL_DEL, self.fd(uk), 0, 0);
    }

    /// What a delivery reports: `fresh` is what epoll reported in this call; otherwise the
    /// readiness last harvested, or (LAST_CHECK, a READY mark) what the fd has now.
    #[inline]
    pub(super) fn report(&self, kev: &Kevent, fresh: Option<u32>) -> Option<(Report, bool)> {
        let uk = &kev.uk;
        let fd = self.fd(uk);
        let revents = match fresh {
            Some(r) => Some(r),
            // Spec section 4: with LAST_CHECK, whatever queued the kevent (a harvest that
            // found the sink full, a READY mark), it reports what its source has now. A READY
            // mark always looks (decision P6).
            None if rules::last_check(uk.req_flags) || kev.marked => {
                poll_registered(uk.type_, fd, self.file, uk.event)
            }
            None => Some(kev.revents),
        };
        // The fd no longer names the registered file (D10): reported once, BROKEN.
        let mut stale = false;
        let now = match revents {
            Some(r) => report(uk.type_, fd, uk.event, r),
            None => {
                stale = true;
                Some(Report::Broken(Errno::EBADF))
            }
        };
        let now = if kev.marked {
            rules::marked_state_report(uk.req_flags, now)
        } else {
            now
        };
        now.map(|r| (r, stale))
    }

    /// **D10**: whether the fd no longer names the file it was registered with (closed
    /// without REMOVE, number reused). epoll is asked directly: its registration is keyed by
    /// (file, fd), so an `EPOLL_CTL_ADD` of the number finds the registration (`EEXIST`)
    /// exactly while the number still names the registered file.
    ///
    /// The probe must leave a live registration as it was. An `EPOLL_CTL_MOD` (what this
    /// once used) re-evaluates the source: an ET kevent got a new edge and was delivered
    /// again, merely because an ADD of the same key was refused with `EEXIST` (found by the
    /// differential test of issue 15). An ADD changes nothing when it fails; when it
    /// succeeds the registration was stale, and the probe registration is removed again at
    /// once (within the queue lock; a harvest in between ignores its reserved token).
    pub(super) fn is_stale(&self, uk: &Registered, ep: Epoll) -> bool {
        let fd = self.fd(uk);
        match sys::file_id(fd) {
            Ok(now) if now.identity() == self.file => {}
            _ => return true,
        }
        let probe = token::make(ep.nonce, token::PROBE);
        match ep.ctl(libc::EPOLL_CTL_ADD, fd, 0, probe) {
            Err(Errno::EEXIST) => false,
            Ok(()) => {
                let _ = ep.ctl(libc::EPOLL_CTL_DEL, fd, 0, 0);
                true
            }
            Err(_) => true,
        }
    }

    /// MODIFY: re-registers the fd under the kevent's new mask and flags; an error means the
    /// fd no longer names the registered file.
    pub(super) fn modify(&self, uk: &Registered, token: u64, ep: Epoll) -> Result<(), Errno> {
        let events = epoll_events(uk.type_, uk.event, uk.req_flags);
        ep.ctl(libc::EPOLL_CTL_MOD, self.fd(uk), events, token)
    }
}

/// Registers the fd of the freshly inserted fd kevent in `slot` in the queue's epoll under
/// its token.
///
/// **D10**: epoll keeps an item keyed by (file, number) until the file's last descriptor
/// closes, and `EPOLL_CTL_DEL` can only reach it while the number names that file. A kevent
/// REMOVEd (or found stale) after its fd was closed while a duplicate kept the file open
/// leaves such an item behind, nobody's; when the number names that file again (`dup2`), the
/// ADD of the same key meets it (`EEXIST`). No kevent owns the item (no other fd kevent is
/// on that number, and it is none of the queue's own fds): it is taken over with
/// `EPOLL_CTL_MOD` under the new kevent's mask and token, so the stale registration never
/// causes `-EEXIST`.
pub(super) fn arm(slot: u32, generation: u32, cx: &mut QueueCx<'_>) -> Result<(), Errno> {
    let kev = cx.kevents.reg.get(slot).ok_or(Errno::EINVAL)?;
    let Source::Fd(s) = &kev.source else {
        return Err(Errno::EINVAL);
    };
    let fd = s.fd(&kev.uk);
    let events = epoll_events(kev.uk.type_, kev.uk.event, kev.uk.req_flags);
    let token = token::make(generation, slot);
    match cx.epoll.ctl(libc::EPOLL_CTL_ADD, fd, events, token) {
        Ok(()) => Ok(()),
        // No ->poll (regular file): the fd is of the wrong kind.
        Err(Errno::EPERM) => Err(Errno::EINVAL),
        Err(Errno::EEXIST) if !cx.shared.is_internal(fd) && !watched_by_other(cx, fd, slot) => {
            cx.epoll.ctl(libc::EPOLL_CTL_MOD, fd, events, token)
        }
        Err(e) => Err(e),
    }
}

/// Whether an fd kevent other than `slot` is registered on number `fd` (one fd kevent per
/// fd: a second one's ADD is `-EEXIST`). A scan, on the rare `EEXIST` path only.
pub(super) fn watched_by_other(cx: &QueueCx<'_>, fd: RawFd, slot: u32) -> bool {
    cx.kevents.reg.iter().any(|(other, kev)| {
        other != slot && matches!(&kev.source, Source::Fd(o) if o.fd(&kev.uk) == fd)
    })
}

/// The fd a SOCKET/PIPE/POLL kevent watches (`id.raw[0]`).
fn fd_of(id: [u32; 2]) -> RawFd {
    id[0] as i32
}

/// Checks that `fd` suits the type; returns its identity (kept for **D10**).
fn validate(type_: u32, fd: RawFd) -> Result<FileId, Errno> {
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
fn epoll_events(type_: u32, event: u32, req_flags: u32) -> u32 {
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

/// How epoll's `revents` reads for a registered fd kevent (see [`report`]).
#[inline]
pub(super) fn report_revents(uk: &Registered, revents: u32) -> Option<Report> {
    report(
        uk.type_,
        fd_of(kevent_id::from_u64(uk.id).raw()),
        uk.event,
        revents,
    )
}

/// How epoll's `revents` reads for this kevent: `None` when it is not ready for what the
/// kevent watches.
#[inline]
fn report(type_: u32, fd: RawFd, event: u32, revents: u32) -> Option<Report> {
    match type_ {
        KEVENT_SOCKET => socket::report(fd, event, revents),
        KEVENT_PIPE => pipe::report(event, revents),
        _ => poll::report(event, revents),
    }
}

/// Readiness right now (a `poll` with zero timeout), for ADD.
fn poll_now(type_: u32, fd: RawFd, event: u32) -> u32 {
    let want = epoll_events(type_, event, 0) as i16;
    sys::poll_now(fd, want) as u16 as u32
}

/// Readiness right now of a registered kevent's fd, for LAST_CHECK and READY marks: `None`
/// when the fd no longer names the file registered (`file`, its identity at ADD), whose
/// readiness must never be reported through this registration (**D10**).
fn poll_registered(type_: u32, fd: RawFd, file: (u64, u64), event: u32) -> Option<u32> {
    match sys::file_id(fd) {
        Ok(now) if now.identity() == file => Some(poll_now(type_, fd, event)),
        _ => None,
    }
}
