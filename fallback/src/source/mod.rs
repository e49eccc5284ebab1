//! Event sources: the registry of types. What differs per type lives in one file per type
//! (`fd` with `socket`, `pipe` and `poll`; `timer`, `signal`, `inode`, `user`); the rules
//! (flags, delivery, the ready list) are shared in `rules` and `queue`. Each type answers the
//! same few questions, and this file holds one `match` per question that sends it to the
//! kevent's type:
//!
//! * **prepare**: is this ukevent acceptable, and is it ready right now (for ADD)?
//! * **arm** / **disarm**: start or stop watching (epoll, the shared timer heap, the
//!   process-wide signal routing, the shared inotify fd);
//! * **report**: what a delivery says (`ret_data`, or BROKEN);
//! * **harvest**: a type with one kernel object per queue (the timerfd, the inotify fd, the
//!   signal doorbell) reads it when epoll reports it and queues the kevents it concerns.
//!
//! A type gets no `&mut Queue`: the dispatchers below hand it its own source state, its own
//! queue-wide state (a field of [`Shared`]), the queue's [`Epoll`] and, to harvest, the
//! queue's [`Kevents`]: together the narrow [`QueueCx`]. Dispatch is a static `match` on
//! [`Source`], no trait objects: the hot paths (delivery, harvest) compile to the same code
//! as a `match` written inline.
//!
//! | type | Linux mechanism | per-kevent kernel object |
//! |---|---|---|
//! | SOCKET, PIPE, POLL | the queue's epoll (level, `EPOLLET`, `EPOLLONESHOT`) | none (an epoll item) |
//! | TIMER, POSIX_TIMER | one timerfd per queue + a userspace heap | none |
//! | SIGNAL | a process-wide handler + one shared eventfd doorbell | none |
//! | INODE | one inotify fd per queue | one inotify watch per directory |
//! | UNOTIFY | the queue's wake eventfd | none |
//! | AIO | created by `kevent_aio_sendfile` (D18), never by ADD: a worker thread sends the file (`aio`) | none (two fd duplicates while the transfer runs) |
//! | NAIO, AIO, POSIX_TIMER by ADD, unknown | — | ADD answers `-ENOSYS` (**D2**) |

pub(crate) mod aio;
mod fd;
mod inode;
mod pipe;
mod poll;
mod signal;
mod socket;
pub(crate) mod timer;
mod user;

use std::os::fd::RawFd;

use kevent_sys::{
    Errno, KEVENT_INODE, KEVENT_PIPE, KEVENT_POLL, KEVENT_SIGNAL, KEVENT_SOCKET, KEVENT_TIMER,
    KEVENT_UNOTIFY, Key, ukevent,
};

use crate::kevent::Kevent;
use crate::queue::Kevents;
use crate::rules::Report;
use crate::{sys, token};

/// A kevent's source state: one variant per type file.
#[derive(Debug)]
pub(crate) enum Source {
    /// SOCKET, PIPE, POLL.
    Fd(fd::Fd),
    /// TIMER and POSIX_TIMER.
    Timer(timer::Timer),
    /// SIGNAL.
    Signal(signal::Signal),
    /// INODE.
    Inode(inode::Inode),
    /// UNOTIFY.
    User(user::User),
    /// AIO (created by `kevent_aio_sendfile`, never by ADD).
    Aio(aio::Aio),
}

/// The result of checking a ukevent for ADD.
#[derive(Debug)]
pub(crate) struct Prepared {
    pub(crate) source: Source,
    /// What the source would report right now, if anything.
    pub(crate) ready_now: Option<Report>,
}

/// The queue's epoll and identity, as a source registers in it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Epoll {
    /// The queue fd (the queue's epoll).
    pub(crate) epfd: RawFd,
    /// The queue's wake eventfd.
    pub(crate) wake: RawFd,
    /// The generation of the tokens of the queue's internal fds.
    pub(crate) nonce: u32,
}

impl Epoll {
    /// `epoll_ctl(op)` of `fd` with `events` under `token`.
    pub(crate) fn ctl(
        self,
        op: libc::c_int,
        fd: RawFd,
        events: u32,
        token: u64,
    ) -> Result<(), Errno> {
        sys::epoll_ctl(self.epfd, op, fd, events, token)
    }

    /// Registers one of the queue's internal fds under its reserved token slot.
    pub(crate) fn add_internal(self, fd: RawFd, events: u32, reserved: u32) -> Result<(), Errno> {
        self.ctl(
            libc::EPOLL_CTL_ADD,
            fd,
            events,
            token::make(self.nonce, reserved),
        )
    }
}

/// The queue-wide state of the types that share one kernel object per queue.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) timers: timer::Timers,
    signals: signal::Signals,
    inodes: inode::Watches,
    pub(crate) aio: aio::Requests,
}

impl Shared {
    pub(crate) fn new() -> Shared {
        Shared {
            timers: timer::Timers::new(),
            signals: signal::Signals::new(),
            inodes: inode::Watches::new(),
            aio: aio::Requests::new(),
        }
    }

    /// Whether `fd` is one of the queue's own fds (the user's fd was closed and the number
    /// went to one of them): never DEL those.
    fn is_internal(&self, fd: RawFd) -> bool {
        self.timers.owns(fd) || self.inodes.owns(fd) || self.signals.owns(fd)
    }
}

/// What a source may use of its queue: the narrow context of arm, disarm and harvest.
#[derive(Debug)]
pub(crate) struct QueueCx<'a> {
    pub(crate) epoll: Epoll,
    pub(crate) shared: &'a mut Shared,
    pub(crate) kevents: &'a mut Kevents,
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
/// (SIGNAL, INODE) are checked further when armed; they are never ready at ADD.
pub(crate) fn prepare(uk: &ukevent) -> Result<Prepared, Errno> {
    match uk.type_ {
        KEVENT_SOCKET | KEVENT_PIPE | KEVENT_POLL => fd::prepare(uk),
        KEVENT_TIMER => timer::prepare(uk),
        KEVENT_SIGNAL => signal::prepare(uk),
        KEVENT_INODE => inode::prepare(uk),
        KEVENT_UNOTIFY => user::prepare(uk),
        _ => Err(Errno::ENOSYS),
    }
}

/// The registered kevent that watches the same target as `uk` (whose source `prepare`
/// made) under another key, which makes ADD `-EEXIST` like a second ADD of one key:
///
/// * SIGNAL (**P27**): the other NOMASK variant of the signal: a queue watches a signal once;
/// * INODE (**P29**): a kevent on the same directory through another fd;
/// * the other types' keys already name their target once (**P28**: an fd kevent's id is
///   its fd, `id.raw[1]` is 0).
pub(crate) fn same_target(uk: &ukevent, source: &Source, cx: &mut QueueCx<'_>) -> Option<u32> {
    match source {
        Source::Signal(_) => cx.kevents.reg.find(Key::from_raw(
            KEVENT_SIGNAL,
            uk.id.signal_other_variant().as_u64(),
        )),
        Source::Inode(s) => cx.shared.inodes.watcher(s, cx.kevents),
        Source::Fd(_) | Source::Timer(_) | Source::User(_) | Source::Aio(_) => None,
    }
}

/// Starts watching a freshly inserted kevent's source.
pub(crate) fn arm(slot: u32, cx: &mut QueueCx<'_>) -> Result<(), Errno> {
    let generation = cx.kevents.reg.generation(slot).ok_or(Errno::EINVAL)?;
    let kev = cx.kevents.reg.get_mut(slot).ok_or(Errno::EINVAL)?;
    let (uk, ep, shared) = (&kev.uk, cx.epoll, &mut *cx.shared);
    match &mut kev.source {
        Source::Fd(_) => fd::arm(slot, generation, cx),
        Source::Timer(s) => s.arm(slot, &mut shared.timers, ep),
        Source::Signal(s) => s.arm(slot, &mut shared.signals, ep),
        Source::Inode(s) => s.arm(uk, slot, &mut shared.inodes, ep),
        Source::User(_) | Source::Aio(_) => Ok(()),
    }
}

/// Stops watching a kevent just taken out of the registry. `stale` says the fd may no longer
/// name the registered file (then epoll must not be asked to forget it).
pub(crate) fn disarm(kev: &Kevent, slot: u32, stale: bool, cx: &mut QueueCx<'_>) {
    let (ep, shared) = (cx.epoll, &mut *cx.shared);
    match &kev.source {
        Source::Fd(s) if !stale && !shared.is_internal(s.fd(&kev.uk)) => s.disarm(&kev.uk, ep),
        Source::Fd(_) => {}
        Source::Timer(s) => s.disarm(slot, &mut shared.timers),
        Source::Signal(s) => s.disarm(slot, &mut shared.signals, ep),
        Source::Inode(s) => s.disarm(slot, &mut shared.inodes),
        Source::User(_) => {}
        Source::Aio(s) => s.disarm(),
    }
}

/// What a delivery of `kev` reports now; `fresh` is the readiness epoll reported in this
/// very call. `None`: not ready (not delivered). The flag says the fd no longer names the
/// registered file (**D10**: reported once, BROKEN, then unregistered as stale).
#[inline]
pub(crate) fn report(kev: &Kevent, fresh: Option<u32>) -> Option<(Report, bool)> {
    match &kev.source {
        Source::Fd(s) => s.report(kev, fresh),
        Source::Timer(s) => Some((s.report(kev), false)),
        Source::Signal(s) => Some((s.report(kev), false)),
        Source::Inode(s) => Some((s.report(kev), false)),
        Source::User(s) => Some((s.report(kev), false)),
        Source::Aio(s) => s.report().map(|r| (r, false)),
    }
}

/// [`report`] of a fresh readiness for the common case of the wait's hot path: an fd kevent
/// that no READY mark names (what epoll reported in this call is its report, spec
/// section 4). `None` for every other kevent, which takes [`report`].
#[inline]
pub(crate) fn report_fresh_fd(kev: &Kevent, revents: u32) -> Option<Option<Report>> {
    match &kev.source {
        Source::Fd(_) if !kev.marked => Some(fd::report_revents(&kev.uk, revents)),
        _ => None,
    }
}

/// epoll reported the internal fd of the reserved token slot `reserved`: its type reads its
/// kernel object and queues the kevents it concerns.
pub(crate) fn harvest(reserved: u32, cx: &mut QueueCx<'_>) {
    match reserved {
        token::TIMER => cx.shared.timers.expire(cx.kevents),
        token::SIGNAL => cx.shared.signals.scan(cx.kevents),
        token::INODE => cx.shared.inodes.read(cx.kevents),
        _ => {}
    }
}

/// Whether number `fd` is one of the queue's own fds or watched by one of its fd kevents.
pub(crate) fn fd_in_use(fd: RawFd, cx: &mut QueueCx<'_>) -> bool {
    cx.shared.is_internal(fd) || fd::watched_by_other(cx, fd, u32::MAX)
}

/// **D10**: whether an fd kevent's fd no longer names the file it was registered with (other
/// types are never stale).
pub(crate) fn is_stale(kev: &Kevent, ep: Epoll) -> bool {
    match &kev.source {
        Source::Fd(s) => s.is_stale(&kev.uk, ep),
        _ => false,
    }
}

/// MODIFY changed `kev`'s event mask or flags: re-registers what watches it. `Ok(true)`: its
/// epoll item was re-registered; `Ok(false)`: nothing to re-register; `Err`: the fd no longer
/// names the registered file.
pub(crate) fn modify(kev: &Kevent, slot: u32, generation: u32, ep: Epoll) -> Result<bool, Errno> {
    match &kev.source {
        Source::Fd(s) => s
            .modify(&kev.uk, token::make(generation, slot), ep)
            .map(|()| true),
        _ => Ok(false),
    }
}

impl Source {
    /// The timer state of a TIMER or POSIX_TIMER kevent.
    pub(crate) fn timer(&self) -> Option<&timer::Timer> {
        match self {
            Source::Timer(t) => Some(t),
            _ => None,
        }
    }

    /// As [`Source::timer`], to change it.
    pub(crate) fn timer_mut(&mut self) -> Option<&mut timer::Timer> {
        match self {
            Source::Timer(t) => Some(t),
            _ => None,
        }
    }

    /// The signal state of a SIGNAL kevent.
    fn signal_mut(&mut self) -> Option<&mut signal::Signal> {
        match self {
            Source::Signal(s) => Some(s),
            _ => None,
        }
    }
}
