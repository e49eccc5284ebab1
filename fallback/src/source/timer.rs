//! TIMER kevents: `id.raw[0]` seconds, `id.raw[1]` nanoseconds (non-zero), on
//! CLOCK_MONOTONIC; periodic unless ONESHOT. POSIX timers reuse the same expiry path.
//!
//! All timers of a queue share one timerfd, armed for the earliest deadline of the queue's
//! [`TimerHeap`](crate::timer::heap::TimerHeap); no timer has a kernel object of its own.
//! `ret_data[0]` is the CLOCK_MONOTONIC time of the (last) expiry in milliseconds, low 32
//! bits; `ret_data[1]` the expirations since the last delivery (**D8**).
//!
//! The queue-wide part, [`Timers`] (the heap, the timerfd, the deadline it is armed for), is
//! this file's too: arming schedules into it, and its harvest step ([`Timers::expire`]) runs
//! when epoll reports the timerfd.

use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use kevent_sys::{Errno, KEVENT_REQ_ONESHOT, ukevent};

use super::{Epoll, Prepared, QueueCx, Source};
use crate::kevent::Kevent;
use crate::queue::Kevents;
use crate::rules::Report;
use crate::timer::TimerHeap;
use crate::{sys, token};

/// A TIMER or POSIX_TIMER kevent's source.
#[derive(Debug)]
pub(crate) struct Timer {
    /// The period (0 = fires once).
    pub(crate) interval_ns: u64,
    /// The CLOCK_MONOTONIC time of the last expiry.
    last_expiry_ns: u64,
}

/// The timers of one queue: a heap ordered by deadline behind one timerfd, armed for the
/// earliest deadline.
#[derive(Debug)]
pub(crate) struct Timers {
    heap: TimerHeap,
    timerfd: Option<OwnedFd>,
    /// The deadline the timerfd is armed for.
    armed: Option<u64>,
}

/// A TIMER kevent's interval in nanoseconds from its id: `EINVAL` when zero or when the
/// nanoseconds are not below one second.
fn interval_of(id: [u32; 2]) -> Result<u64, Errno> {
    crate::timer::interval_ns(id[0], id[1]).ok_or(Errno::EINVAL)
}

/// Checks a TIMER kevent for ADD (never ready at once).
pub(super) fn prepare(uk: &ukevent) -> Result<Prepared, Errno> {
    Ok(Prepared {
        source: Source::Timer(Timer {
            interval_ns: interval_of(uk.id.raw())?,
            last_expiry_ns: 0,
        }),
        ready_now: None,
    })
}

/// A POSIX timer's source: disarmed until `timer_settime` ([`posix_arm`]).
pub(crate) fn posix_source() -> Source {
    Source::Timer(Timer {
        interval_ns: 0,
        last_expiry_ns: 0,
    })
}

/// Arms the POSIX timer kevent in `slot` to expire at the absolute CLOCK_MONOTONIC
/// `deadline_ns` (None disarms), then every `interval_ns` (0: once).
pub(crate) fn posix_arm(
    slot: u32,
    deadline_ns: Option<u64>,
    interval_ns: u64,
    cx: &mut QueueCx<'_>,
) -> Result<(), Errno> {
    if let Some(t) = cx
        .kevents
        .reg
        .get_mut(slot)
        .and_then(|k| k.source.timer_mut())
    {
        t.interval_ns = interval_ns;
    }
    match deadline_ns {
        Some(d) => cx.shared.timers.schedule(slot, d, cx.epoll),
        None => {
            cx.shared.timers.heap.cancel(slot);
            Ok(())
        }
    }
}

/// The next expiry and the period of the POSIX timer kevent `kev` in `slot`.
pub(crate) fn posix_get(kev: Option<&Kevent>, slot: u32, timers: &Timers) -> (Option<u64>, u64) {
    let interval = kev
        .and_then(|k| k.source.timer())
        .map_or(0, |t| t.interval_ns);
    (timers.heap.deadline(slot), interval)
}

impl Timer {
    /// Schedules the first expiry, one interval from now.
    pub(super) fn arm(&self, slot: u32, timers: &mut Timers, ep: Epoll) -> Result<(), Errno> {
        let first = crate::timer::monotonic_now_ns().saturating_add(self.interval_ns);
        timers.schedule(slot, first, ep)
    }

    /// Takes the timer out of the heap.
    pub(super) fn disarm(&self, slot: u32, timers: &mut Timers) {
        timers.heap.cancel(slot);
    }

    /// What a timer delivery reports.
    pub(super) fn report(&self, kev: &Kevent) -> Report {
        Report::Ready([(self.last_expiry_ns / 1_000_000) as u32, kev.pending])
    }
}

impl Timers {
    pub(super) fn new() -> Timers {
        Timers {
            heap: TimerHeap::new(),
            timerfd: None,
            armed: None,
        }
    }

    /// Whether `fd` is the timerfd.
    pub(super) fn owns(&self, fd: RawFd) -> bool {
        self.timerfd.as_ref().is_some_and(|f| f.as_raw_fd() == fd)
    }

    /// Puts a timer into the heap (creating the timerfd on first use) and re-arms the
    /// timerfd if it is now the earliest.
    fn schedule(&mut self, slot: u32, deadline: u64, ep: Epoll) -> Result<(), Errno> {
        if self.timerfd.is_none() {
            let fd = sys::timerfd_create()?;
            ep.add_internal(fd.as_raw_fd(), libc::EPOLLIN as u32, token::TIMER)?;
            self.timerfd = Some(fd);
        }
        self.heap.schedule(slot, deadline);
        if self.armed.is_none_or(|armed| deadline < armed) {
            self.rearm()?;
        }
        Ok(())
    }

    fn rearm(&mut self) -> Result<(), Errno> {
        let Some(fd) = &self.timerfd else {
            return Ok(());
        };
        let next = self.heap.next_deadline();
        if next != self.armed {
            sys::timerfd_arm(fd.as_raw_fd(), next)?;
            self.armed = next;
        }
        Ok(())
    }

    /// The harvest step: the timerfd fired. Queues every expired timer, reschedules periodic
    /// ones (**D8** counts the periods a late harvest missed), re-arms the timerfd.
    pub(super) fn expire(&mut self, kevents: &mut Kevents) {
        if let Some(fd) = &self.timerfd {
            sys::timerfd_drain(fd.as_raw_fd());
        }
        self.armed = None;
        let now = crate::timer::monotonic_now_ns();
        while let Some((slot, deadline)) = self.heap.pop_expired(now) {
            let Some(kev) = kevents.reg.get_mut(slot) else {
                continue;
            };
            let oneshot = kev.uk.req_flags & KEVENT_REQ_ONESHOT != 0;
            let Some(t) = kev.source.timer_mut() else {
                continue;
            };
            let (count, next) = if oneshot || t.interval_ns == 0 {
                (1, None)
            } else {
                let (c, n) = crate::timer::periodic_catch_up(deadline, t.interval_ns, now);
                (c, Some(n))
            };
            t.last_expiry_ns = match next {
                Some(n) => n - t.interval_ns,
                None => deadline,
            };
            kev.pending = kev
                .pending
                .saturating_add(count.min(u32::MAX as u64) as u32);
            if let Some(n) = next {
                self.heap.schedule(slot, n);
            }
            kevents.queue(slot);
        }
        let _ = self.rearm();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn s5_timer_interval_needs_a_valid_nonzero_id() {
        assert_eq!(interval_of([0, 0]), Err(Errno::EINVAL));
        assert_eq!(interval_of([0, 1_000_000_000]), Err(Errno::EINVAL));
        assert_eq!(interval_of([1, 5]), Ok(1_000_000_005));
        assert_eq!(interval_of([0, 1]), Ok(1));
    }
}
