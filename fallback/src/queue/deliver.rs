//! From sources to the caller: turning what epoll reported into ready kevents and
//! deliveries, under the rules of spec section 4.

use std::os::fd::AsRawFd;

use kevent_sys::KEVENT_REQ_ONESHOT;

use super::wait::Sink;
use super::{Ctx, INODE_GONE, State};
use crate::kevent::Kevent;
use crate::rules::{self, Readiness, Report};
use crate::signal::dispatch;
use crate::source::{Source, fd, inode, signal, timer};
use crate::{sys, token};

/// What one harvest brought.
#[derive(Clone, Copy, Debug)]
pub(super) struct Absorbed {
    /// A token was not this queue's (the fd may name another epoll now).
    pub(super) foreign: bool,
    /// Events that were new to this wait (delivered, queued, or internal). A full harvest
    /// of nothing new means epoll is only repeating level sources this wait already took:
    /// harvesting again would spin.
    pub(super) fresh: usize,
}

impl State {
    /// Whether a harvest proves that the queue fd still is this queue's epoll: a token of
    /// an internal fd carries the queue's nonce, a kevent's token its slot's generation.
    pub(super) fn proves_identity(&self, got: &[libc::epoll_event], ctx: Ctx) -> bool {
        got.iter().any(|ev| {
            let (generation, slot) = token::split(ev.u64);
            if slot >= token::FIRST_RESERVED_SLOT {
                generation == ctx.nonce
            } else {
                self.reg.generation(slot) == Some(generation)
            }
        })
    }

    /// Moves queued kevents into the sink, oldest first. A kevent this wait already
    /// delivered stays queued for the next wait (each kevent at most once per wait, spec
    /// section 4); returns whether any was left for that reason.
    pub(super) fn take_ready(&mut self, call: u32, sink: &mut Sink<'_>, ctx: Ctx) -> bool {
        if self.queued == 0 && self.orphans.is_empty() {
            return false;
        }
        while sink.room(self.ring.as_ref()) > 0 {
            let Some(ev) = self.orphans.pop_front() else {
                break;
            };
            sink.put(ev, self.ring.as_mut());
        }
        let mut deferred: Vec<u64> = Vec::new();
        while sink.room(self.ring.as_ref()) > 0 {
            let Some(tok) = self.ready.pop_front() else {
                break;
            };
            let (generation, slot) = token::split(tok);
            if self.reg.generation(slot) != Some(generation) {
                continue;
            }
            let Some(kev) = self.reg.get_mut(slot) else {
                continue;
            };
            if !kev.queued {
                // Taken off the ready list since (MODIFY, D17), or a second token of a
                // kevent queued again meanwhile whose first token was already taken.
                continue;
            }
            if kev.stamp == call {
                deferred.push(tok);
                continue;
            }
            kev.queued = false;
            self.dequeued();
            self.deliver(slot, None, call, sink, ctx);
        }
        let any = !deferred.is_empty();
        self.ready.extend(deferred);
        any
    }

    /// Delivers one kevent into the sink, applying the rules. `fresh` is the readiness epoll
    /// reported in this very call (no LAST_CHECK needed). Returns whether it was delivered.
    pub(super) fn deliver(
        &mut self,
        slot: u32,
        fresh: Option<u32>,
        call: u32,
        sink: &mut Sink<'_>,
        ctx: Ctx,
    ) -> bool {
        let Some(kev) = self.reg.get_mut(slot) else {
            return false;
        };
        let uk = kev.uk;
        // The fd no longer names the registered file (D10): reported once, BROKEN.
        let mut stale = false;
        let report = match &mut kev.source {
            Source::Fd { fd, file } => {
                let revents = match fresh {
                    Some(r) => Some(r),
                    // Spec section 4: with LAST_CHECK, whatever queued the kevent (a harvest
                    // that found the sink full, a READY mark), it reports what its source
                    // has now. A READY mark always looks (decision P6).
                    None if rules::last_check(uk.req_flags) || kev.marked => {
                        fd::poll_registered(uk.type_, *fd, *file, uk.event)
                    }
                    None => Some(kev.revents),
                };
                let now = match revents {
                    Some(r) => fd::report(uk.type_, *fd, uk.event, r),
                    None => {
                        stale = true;
                        Some(Report::Broken(kevent_sys::Errno::EBADF))
                    }
                };
                let now = if kev.marked {
                    rules::marked_state_report(uk.req_flags, now)
                } else {
                    now
                };
                match now {
                    Some(r) => r,
                    None => {
                        // Not ready at delivery: not delivered (a READY mark is consumed);
                        // the source's next readiness delivers it again.
                        kev.marked = false;
                        kev.pending = 0;
                        return false;
                    }
                }
            }
            Source::Timer { last_expiry_ns, .. } => timer::report(*last_expiry_ns, kev.pending),
            Source::Signal { .. } => signal::report(kev.pending),
            Source::Inode { .. } => {
                inode::report(kev.revents & !INODE_GONE, kev.revents & INODE_GONE != 0)
            }
            Source::User => Report::Ready([kev.pending, 0]),
        };
        if rules::readiness(uk.type_) == Readiness::Occurrence && kev.pending == 0 && !kev.marked {
            return false;
        }
        let d = rules::deliver(&uk.to_ukevent(), report);
        kev.stamp = call;
        kev.pending = 0;
        kev.marked = false;
        if rules::readiness(uk.type_) == Readiness::Occurrence {
            kev.revents = 0;
        }
        let wakes_all = rules::wakes_all(uk.req_flags);
        sink.put(d.event, self.ring.as_mut());
        if d.unregister {
            self.unregister(slot, ctx, stale);
        }
        if wakes_all && self.sleepers > 0 {
            // WAKEUP_ALL: every sleeper wakes to look (the wake eventfd is level-triggered, so
            // it wakes them one after another while it stays readable).
            sys::eventfd_signal(ctx.wake);
            self.wake_signaled = true;
        }
        true
    }

    /// Turns harvested epoll events into deliveries (while the sink has room) or queued
    /// kevents.
    pub(super) fn absorb(
        &mut self,
        got: &[libc::epoll_event],
        call: u32,
        sink: &mut Sink<'_>,
        ctx: Ctx,
        parked: &mut Vec<u32>,
    ) -> Absorbed {
        let mut foreign = false;
        let mut fresh = 0;
        for ev in got {
            let (generation, slot) = token::split(ev.u64);
            if slot >= token::FIRST_RESERVED_SLOT {
                if generation != ctx.nonce {
                    foreign = true;
                    continue;
                }
                match slot {
                    token::TIMER => self.expire_timers(),
                    token::SIGNAL => self.scan_signals(),
                    token::INODE => self.read_inotify(),
                    _ => {}
                }
                fresh += 1;
                continue;
            }
            if self.reg.generation(slot) != Some(generation) {
                // Removed since epoll saw it (or not ours at all).
                foreign |= self.reg.get(slot).is_none() && generation & 1 == 0;
                continue;
            }
            let Some(kev) = self.reg.get_mut(slot) else {
                continue;
            };
            kev.revents = ev.events;
            if kev.queued {
                continue;
            }
            if kev.stamp == call {
                // Delivered by this wait already; a level source that epoll reports again
                // would make a wait for more (min_nr) spin: remember it, and park it
                // edge-triggered if the wait goes to sleep.
                if !rules::edge(kev.uk.req_flags)
                    && kev.uk.req_flags & KEVENT_REQ_ONESHOT == 0
                    && !parked.contains(&slot)
                {
                    parked.push(slot);
                }
                continue;
            }
            if sink.room(self.ring.as_ref()) > 0 {
                self.deliver(slot, Some(ev.events), call, sink, ctx);
            } else {
                self.queue(slot);
            }
            fresh += 1;
        }
        Absorbed { foreign, fresh }
    }

    pub(super) fn park(&mut self, slot: u32, ctx: Ctx) {
        self.set_epoll_mode(slot, ctx, libc::EPOLLET as u32);
    }

    pub(super) fn unpark(&mut self, slot: u32, ctx: Ctx) {
        self.set_epoll_mode(slot, ctx, 0);
    }

    pub(super) fn set_epoll_mode(&mut self, slot: u32, ctx: Ctx, extra: u32) {
        let Some(generation) = self.reg.generation(slot) else {
            return;
        };
        if let Some(Kevent {
            uk,
            source: Source::Fd { fd, .. },
            ..
        }) = self.reg.get(slot)
        {
            let events = fd::epoll_events(uk.type_, uk.event, uk.req_flags) | extra;
            let _ = sys::epoll_ctl(
                ctx.epfd,
                libc::EPOLL_CTL_MOD,
                *fd,
                events,
                token::make(generation, slot),
            );
        }
    }

    /// The timerfd fired: queue every expired timer, reschedule periodic ones (**D8**
    /// counts the periods a late harvest missed), re-arm the timerfd.
    pub(super) fn expire_timers(&mut self) {
        if let Some(fd) = &self.timerfd {
            sys::timerfd_drain(fd.as_raw_fd());
        }
        self.timer_armed = None;
        let now = crate::timer::monotonic_now_ns();
        while let Some((slot, deadline)) = self.timers.pop_expired(now) {
            let Some(kev) = self.reg.get_mut(slot) else {
                continue;
            };
            let oneshot = kev.uk.req_flags & KEVENT_REQ_ONESHOT != 0;
            let Source::Timer {
                interval_ns,
                last_expiry_ns,
            } = &mut kev.source
            else {
                continue;
            };
            let (count, next) = if oneshot || *interval_ns == 0 {
                (1, None)
            } else {
                let (c, n) = crate::timer::periodic_catch_up(deadline, *interval_ns, now);
                (c, Some(n))
            };
            *last_expiry_ns = match next {
                Some(n) => n - *interval_ns,
                None => deadline,
            };
            kev.pending = kev
                .pending
                .saturating_add(count.min(u32::MAX as u64) as u32);
            if let Some(n) = next {
                self.timers.schedule(slot, n);
            }
            self.queue(slot);
        }
        let _ = self.rearm_timerfd();
    }

    /// The signal doorbell rang: queue every SIGNAL kevent whose signal was delivered since
    /// it last looked (**D8**: the count goes to `ret_data[0]`).
    pub(super) fn scan_signals(&mut self) {
        for i in 0..self.signal_slots.len() {
            let slot = self.signal_slots[i];
            let Some(kev) = self.reg.get_mut(slot) else {
                continue;
            };
            let Source::Signal { signo, seen, .. } = &mut kev.source else {
                continue;
            };
            let now = dispatch::delivered(*signo);
            if now > *seen {
                kev.pending = kev
                    .pending
                    .saturating_add((now - *seen).min(u32::MAX as u64) as u32);
                *seen = now;
                self.queue(slot);
            }
        }
    }

    /// The inotify fd is readable: route each record to the INODE kevents of its watch.
    pub(super) fn read_inotify(&mut self) {
        let Some(ino) = self.inotify.as_ref().map(|f| f.as_raw_fd()) else {
            return;
        };
        #[repr(C, align(8))]
        struct Buf([u8; 4096]);
        let mut buf = Buf([0; 4096]);
        const HEADER: usize = std::mem::size_of::<libc::inotify_event>();
        loop {
            let n = sys::inotify_read(ino, &mut buf.0);
            if n == 0 {
                break;
            }
            let mut off = 0;
            while off + HEADER <= n {
                let rec = &buf.0[off..off + HEADER];
                let wd = i32::from_ne_bytes(rec[0..4].try_into().unwrap_or([0; 4]));
                let mask = u32::from_ne_bytes(rec[4..8].try_into().unwrap_or([0; 4]));
                let len = u32::from_ne_bytes(rec[12..16].try_into().unwrap_or([0; 4])) as usize;
                off += HEADER + len;
                let bits = inode::bits_of(mask);
                let gone = inode::gone(mask);
                let slots = self.watches.get(&wd).cloned().unwrap_or_default();
                for slot in slots {
                    let Some(kev) = self.reg.get_mut(slot) else {
                        continue;
                    };
                    let mine = bits & kev.uk.event;
                    if mine == 0 && !gone {
                        continue;
                    }
                    kev.revents |= mine | if gone { INODE_GONE } else { 0 };
                    kev.pending = kev.pending.saturating_add(1);
                    self.queue(slot);
                }
                if mask & libc::IN_IGNORED != 0 {
                    self.watches.remove(&wd);
                }
            }
        }
    }
}
