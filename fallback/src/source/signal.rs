//! SIGNAL kevents: `id.raw[0]` is the signal number; `KEVENT_SIGNAL_NOMASK` in `raw_u64`
//! makes the signal reported only (no handler, no default action).
//!
//! Routing is process-wide (`crate::signal::dispatch`): a handler counts each delivery and
//! rings one shared eventfd doorbell, registered edge-triggered in every queue that has a
//! SIGNAL kevent. On a doorbell the queue compares each of its SIGNAL kevents' `seen` count
//! with the process-wide count; the difference is `ret_data[0]` (**D8**). The queue-wide part,
//! [`Signals`] (the queue's SIGNAL kevents, whether the doorbell is registered), is this
//! file's too, with its harvest step ([`Signals::scan`]).

use std::os::fd::RawFd;

use kevent_sys::{Errno, ukevent};

use super::{Epoll, Prepared, Source};
use crate::kevent::Kevent;
use crate::queue::Kevents;
use crate::rules::Report;
use crate::signal::dispatch;
use crate::token;

/// A SIGNAL kevent's source.
#[derive(Debug)]
pub(crate) struct Signal {
    /// The signal; 0 once arming failed (nothing to unwatch).
    signo: i32,
    /// `KEVENT_SIGNAL_NOMASK`.
    nomask: bool,
    /// The delivery count already reported.
    seen: u64,
}

/// The SIGNAL kevents of one queue.
#[derive(Debug)]
pub(crate) struct Signals {
    slots: Vec<u32>,
    /// The doorbell is registered in the queue's epoll.
    doorbell: bool,
}

/// A SIGNAL kevent's source; the signal number is checked when it is armed
/// (`dispatch::watch` answers `EINVAL` for signals that cannot be watched).
pub(super) fn prepare(uk: &ukevent) -> Result<Prepared, Errno> {
    let (signo, nomask) = uk.id.signal_parts();
    if signo <= 0 {
        return Err(Errno::EINVAL);
    }
    Ok(Prepared {
        source: Source::Signal(Signal {
            signo,
            nomask,
            seen: 0,
        }),
        ready_now: None,
    })
}

/// The queue as the signal handler checks that it is still open (a NOMASK kevent of a queue
/// closed with `close()` no longer swallows its signal): an `EPOLL_CTL_MOD` of the wake
/// eventfd, the proof `Queue::verify` makes with an ADD (decision P54).
fn owner(ep: Epoll) -> dispatch::Owner {
    dispatch::Owner {
        epfd: ep.epfd,
        wake: ep.wake,
        token: token::make(ep.nonce, token::WAKE),
    }
}

impl Signal {
    /// Watches the signal (process-wide), and registers the doorbell in the queue's epoll
    /// on the queue's first SIGNAL kevent.
    pub(super) fn arm(&mut self, slot: u32, signals: &mut Signals, ep: Epoll) -> Result<(), Errno> {
        if let Err(e) = dispatch::watch_for(self.signo, self.nomask, Some(owner(ep))) {
            // Not watched: `disarm` must not unwatch it.
            self.signo = 0;
            return Err(e);
        }
        self.seen = dispatch::delivered(self.signo);
        signals.slots.push(slot);
        if !signals.doorbell {
            let bell = dispatch::doorbell_fd()?;
            ep.add_internal(bell, (libc::EPOLLIN | libc::EPOLLET) as u32, token::SIGNAL)?;
            signals.doorbell = true;
        }
        Ok(())
    }

    /// Unwatches the signal.
    pub(super) fn disarm(&self, slot: u32, signals: &mut Signals, ep: Epoll) {
        if self.signo > 0 {
            dispatch::unwatch_for(self.signo, self.nomask, Some(owner(ep)));
        }
        signals.slots.retain(|&s| s != slot);
    }

    /// What a signal delivery reports: the deliveries since the last one.
    pub(super) fn report(&self, kev: &Kevent) -> Report {
        Report::Ready([kev.pending, 0])
    }
}

impl Signals {
    pub(super) fn new() -> Signals {
        Signals {
            slots: Vec::new(),
            doorbell: false,
        }
    }

    /// Whether `fd` is the doorbell, registered in this queue.
    pub(super) fn owns(&self, fd: RawFd) -> bool {
        self.doorbell && dispatch::doorbell_fd().is_ok_and(|d| d == fd)
    }

    /// The harvest step: the doorbell rang. Queues every SIGNAL kevent whose signal was
    /// delivered since it last looked (**D8**: the count goes to `ret_data[0]`).
    pub(super) fn scan(&self, kevents: &mut Kevents) {
        for &slot in &self.slots {
            let Some(kev) = kevents.reg.get_mut(slot) else {
                continue;
            };
            let pending = kev.pending;
            let Some(s) = kev.source.signal_mut() else {
                continue;
            };
            let now = dispatch::delivered(s.signo);
            if now > s.seen {
                let fresh = (now - s.seen).min(u32::MAX as u64) as u32;
                s.seen = now;
                kev.pending = pending.saturating_add(fresh);
                kevents.queue(slot);
            }
        }
    }
}
