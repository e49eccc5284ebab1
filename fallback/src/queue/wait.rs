//! Waiting: timeouts, where taken events go, and the loop shared by `kevent_get_events`
//! and `kevent_wait`.

use std::mem::MaybeUninit;
use std::os::fd::AsRawFd;
use std::sync::MutexGuard;

use kevent_sys::{Errno, KEVENT_FLAGS_ABSTIME, KEVENT_RET_COPY_FAILED, ukevent};

use super::deliver::Call;
use super::{HARVEST, Queue, SLICE_NS, State};

/// How long a wait naps between harvests while an item nobody can remove keeps the queue's
/// epoll ready (decision P32).
const BLIND_NAP_NS: u64 = 10_000_000;
use crate::ring::Ring;
use crate::sys::{self, Harvest};

/// When a wait gives up.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Deadline {
    /// `{0, 0}`: do not block.
    Now,
    /// A relative timeout on CLOCK_MONOTONIC, as the caller gave it (checked), counted from
    /// the first time it is needed: a call that never sleeps never converts it.
    Relative(libc::timespec),
    /// An absolute CLOCK_MONOTONIC time.
    Monotonic(u64),
    /// An absolute CLOCK_REALTIME time (`KEVENT_FLAGS_ABSTIME`).
    Realtime(u64),
}

impl Deadline {
    /// Checks a timeout and the wait flags (**D1**, **D5**).
    #[inline]
    pub(crate) fn parse(timeout: &libc::timespec, flags: u32) -> Result<Deadline, Errno> {
        if flags & !KEVENT_FLAGS_ABSTIME != 0 {
            return Err(Errno::EINVAL);
        }
        if flags & KEVENT_FLAGS_ABSTIME != 0 {
            let ns = crate::timer::timespec_to_ns(timeout).ok_or(Errno::EINVAL)?;
            return Ok(Deadline::Realtime(ns));
        }
        // D5's checks of `timespec_to_ns`, without the conversion.
        let nsec_ok = u64::try_from(timeout.tv_nsec).is_ok_and(|n| n < 1_000_000_000);
        if timeout.tv_sec < 0 || !nsec_ok {
            return Err(Errno::EINVAL);
        }
        Ok(if timeout.tv_sec == 0 && timeout.tv_nsec == 0 {
            Deadline::Now
        } else {
            Deadline::Relative(*timeout)
        })
    }

    /// Nanoseconds left (fixing a relative timeout's start on first use).
    pub(super) fn remaining(&mut self) -> u64 {
        match *self {
            Deadline::Now => 0,
            Deadline::Relative(ts) => {
                // Checked by `parse`: never `None`, and a very large timeout saturates (D6).
                let ns = crate::timer::timespec_to_ns(&ts).unwrap_or(u64::MAX);
                let end = crate::timer::monotonic_now_ns().saturating_add(ns);
                *self = Deadline::Monotonic(end);
                ns
            }
            Deadline::Monotonic(end) => end.saturating_sub(crate::timer::monotonic_now_ns()),
            Deadline::Realtime(end) => end.saturating_sub(crate::timer::realtime_now_ns()),
        }
    }
}

/// Where a wait puts the events it takes.
#[derive(Debug)]
pub(crate) enum Sink<'a> {
    /// `kevent_get_events`: the caller's buffer (mirrored into the ring, if any).
    Buffer { buf: &'a mut [ukevent], n: usize },
    /// `kevent_wait`: the ring, at most `limit` events.
    Ring { limit: usize, n: usize },
}

impl Sink<'_> {
    pub(super) fn count(&self) -> usize {
        match self {
            Sink::Buffer { n, .. } | Sink::Ring { n, .. } => *n,
        }
    }

    #[inline]
    pub(super) fn room(&self, ring: Option<&Ring>) -> usize {
        match self {
            Sink::Buffer { buf, n } => buf.len() - n,
            Sink::Ring { limit, n } => (limit - n).min(ring.map_or(0, |r| r.free() as usize)),
        }
    }

    #[inline]
    pub(super) fn put(&mut self, mut ev: ukevent, ring: Option<&mut Ring>) {
        match self {
            Sink::Buffer { buf, n } => {
                if let Some(ring) = ring {
                    if !ring.push(&ev) {
                        ev.ret_flags |= KEVENT_RET_COPY_FAILED;
                    }
                }
                buf[*n] = ev;
                *n += 1;
            }
            Sink::Ring { n, .. } => {
                let pushed = ring.is_some_and(|r| r.push(&ev));
                debug_assert!(pushed, "room() guaranteed a free slot");
                *n += 1;
            }
        }
    }
}

impl Queue {
    /// A whole wait that nothing settled before (an asynchronous ring's commit, P41): the
    /// first harvest, then the waiting loop.
    pub(super) fn collect(
        &self,
        want: usize,
        sink: &mut Sink<'_>,
        deadline: Deadline,
    ) -> Result<u32, Errno> {
        // Decision P34: SIGNAL kevents whose handler a program replaced get it back.
        crate::signal::dispatch::reclaim_if_due();
        let mut h = Harvest::new();
        let first_cap = match sink {
            Sink::Buffer { buf, .. } => buf.len(),
            Sink::Ring { limit, .. } => *limit,
        };
        let (first_cap, first) = self.harvest_first(&mut h, first_cap);
        let st = self.lock();
        self.collect_rest(&mut h, first_cap, first, st, 0, want, sink, deadline, None)
    }

    /// A wait's first harvest: it never blocks and runs before the lock is taken, so that when
    /// it finds enough (the busy server's case) a wait costs one `epoll_wait` and one lock.
    /// `room` is what the caller can take; returns the harvest's capacity (a few more, to see
    /// whether epoll has more) and its result (`EINTR` is an empty harvest: a zero timeout
    /// never sleeps, so it is only a handler that ran just before, and the waiting loop looks
    /// again).
    #[inline]
    pub(super) fn harvest_first(
        &self,
        h: &mut Harvest<HARVEST>,
        room: usize,
    ) -> (usize, Result<(), Errno>) {
        let cap = room.saturating_add(8).min(HARVEST);
        let r = match h.wait(self.epfd, cap, 0, None) {
            Ok(_) | Err(Errno::EINTR) => Ok(()),
            Err(e) => Err(e),
        };
        (cap, r)
    }

    /// The waiting loop after the first harvest (`h.got()`, of capacity `first_cap`; `first`:
    /// its result), with the lock `st` taken after it and the first `whole` events of the
    /// harvest already delivered into the sink (`State::deliver_whole`).
    ///
    /// With `gate: Some(old_uidx)`, `kevent_wait` on an asynchronous ring (P38): once the fd
    /// is proven to be this queue, `ring_uidx >= n` is `EINVAL` and an `old_uidx` other than
    /// `ring_uidx` or `ring_kidx` returns 0 at once, moving nothing (what the first harvest
    /// took from epoll waits in the queue); otherwise the call returns how many events the
    /// ring gained while it ran.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub(super) fn collect_rest<'q>(
        &'q self,
        h: &mut Harvest<HARVEST>,
        first_cap: usize,
        first: Result<(), Errno>,
        mut st: MutexGuard<'q, State>,
        whole: usize,
        want: usize,
        sink: &mut Sink<'_>,
        mut deadline: Deadline,
        gate: Option<u32>,
    ) -> Result<u32, Errno> {
        let ctx = self.ctx();
        let mut call = Call::new(self.next_call());
        // A level kevent this wait delivered was reported again: its source is ready, so the
        // queue fd is readable and sleeping on it would return at once. It stays there (for
        // the other waiters and `poll()`, as epoll keeps a level item another call returned);
        // this wait sleeps on `watch` instead.
        let mut holding = false;
        // Created on the first sleep while `holding`: an epoll of its own that holds the queue
        // fd edge-triggered, so it wakes on every new wake-up of the queue's epoll (a source
        // or internal fd becoming ready, a READY) but not on what is already ready there.
        let mut watch: Option<std::os::fd::OwnedFd> = None;
        let mut more;
        let mut nonblock_checked = false;
        let mut interrupted = false;
        // Signals blocked outside the sleeps of this wait (dropped, restored, on return).
        let mut held: Option<sys::SignalsHeld> = None;
        // Items that are no kevent's keep epoll ready and cannot be removed (decision P32).
        let mut blind = false;
        let mut proven;
        let mut deferred;
        // Events the asynchronous ring had received when the gate passed (P38's return).
        let mut start_pushed: Option<u64> = None;
        call.adopt(&mut st.taken_spare);
        if whole > 0 {
            // What `deliver_whole` delivered (unstamped): recorded and searchable at once, so
            // that this wait never delivers those kevents again (at most once per wait).
            call.record(h.got()[..whole].iter().map(|ev| ev.u64));
            call.relocked();
        }
        let first = first.map(|()| (whole > 0, &h.got()[whole..]));
        match first {
            Ok((delivered, got)) => {
                proven = delivered || st.proves_identity(got, ctx);
                if !proven {
                    // Nothing in the harvest is ours: before any event (or ring write) is
                    // handed out, make sure the number was not closed and given to another
                    // epoll (whose events these would be; the ring may be freed memory).
                    drop(st);
                    self.prove()?;
                    proven = true;
                    st = self.lock();
                }
                st.refresh_ring();
                // Occurrences first, then the queued kevents: a marked one reports them too.
                st.harvest_internal(got, ctx);
                if let (Some(old), Some(ring)) = (gate, st.ring.as_ref()) {
                    let stop = match ring.consumer_index() {
                        Err(e) => Some(Err(e)),
                        Ok(uidx) if old != uidx || old != ring.kidx() => Some(Ok(0)),
                        Ok(_) => None,
                    };
                    if let Some(r) = stop {
                        // Nothing moves: the harvest's events are queued, not delivered.
                        let mut none = Sink::Ring { limit: 0, n: 0 };
                        st.absorb(got, true, &mut call, &mut none, ctx);
                        st.sync_wake(ctx);
                        return r;
                    }
                    start_pushed = Some(ring.pushed());
                }
                deferred = st.take_ready(&mut call, sink, ctx);
                let a = st.absorb(got, true, &mut call, sink, ctx);
                holding |= a.held;
                more = got.len() == first_cap && a.fresh > 0;
                if a.foreign {
                    drop(st);
                    let v = self.verify();
                    st = self.lock();
                    st.refresh_ring();
                    call.relocked();
                    v?;
                }
            }
            Err(e) => return Err(e),
        }
        let result = loop {
            if st.dead {
                break Err(Errno::EBADF);
            }
            deferred |= st.take_ready(&mut call, sink, ctx);
            if matches!(sink, Sink::Ring { .. }) && st.ring.as_ref().is_some_and(Ring::unread) {
                // P38: a `kevent_wait` on an asynchronous ring starts with the ring empty
                // and returns once it holds events, whoever posted them.
                break Ok(());
            }
            let room = sink.room(st.ring.as_ref());
            if room == 0 {
                break Ok(());
            }
            let mut timeout_ns = if sink.count() >= want {
                0
            } else {
                deadline.remaining()
            };
            if timeout_ns == 0 && !more {
                break Ok(());
            }
            if timeout_ns > 0 && st.wake_token {
                // A READY(0) that found nobody asleep: this wait takes it and returns.
                st.wake_token = false;
                break Ok(());
            }
            if timeout_ns > 0 && !nonblock_checked {
                nonblock_checked = true;
                match sys::status_flags(self.epfd) {
                    Ok(fl) if fl & libc::O_NONBLOCK != 0 => timeout_ns = 0,
                    Ok(_) => {}
                    Err(e) => break Err(e),
                }
                if timeout_ns == 0 {
                    break Ok(());
                }
            }
            if timeout_ns > 0 && deferred && sink.count() > 0 {
                // Decision P18: what is ready was all delivered by this wait already (an
                // occurrence that came again); sleeping would only wake on it again. The wait
                // returns what it has; the next one delivers the rest.
                break Ok(());
            }
            let sleeping = timeout_ns > 0;
            let wake_gen = st.wake_gen;
            if sleeping {
                st.sleepers += 1;
            }
            st.sync_wake(ctx);
            drop(st);
            let cap = (room + 8).min(HARVEST);
            let swallowed = crate::signal::dispatch::swallowed_here();
            let mut slice = timeout_ns.min(SLICE_NS);
            if sleeping && held.is_none() {
                // Spec section 3: a handler that runs while this wait sleeps must end it.
                // Between two sleeps (the slices, the gap before the first) it would run
                // unseen: from here on signals are delivered only inside the sleeps.
                held = sys::SignalsHeld::hold();
            }
            let mask = held.as_ref().map(|h| &h.old);
            let mut napped_into_signal = false;
            if sleeping && blind {
                // Decision P32: an item nobody can remove keeps epoll ready; nap on the wake
                // eventfd (READY, wake-ups, the ready list) and harvest without blocking.
                napped_into_signal =
                    sys::nap_until_readable(ctx.wake, slice.min(BLIND_NAP_NS), mask);
                slice = 0;
            }
            if sleeping && holding && !blind {
                // Sleep on the edge-triggered watch, then harvest without blocking.
                if watch.is_none() {
                    watch = self.watch();
                }
                napped_into_signal = match &watch {
                    Some(w) => {
                        let mut one = [MaybeUninit::<libc::epoll_event>::uninit(); 1];
                        matches!(
                            sys::epoll_wait(w.as_raw_fd(), &mut one, slice, mask),
                            Err(Errno::EINTR)
                        )
                    }
                    // No fd for it (EMFILE): nap as a blind wait does (decision P32).
                    None => sys::nap_until_readable(ctx.wake, slice.min(BLIND_NAP_NS), mask),
                };
                slice = 0;
            }
            let harvest = if napped_into_signal {
                Err(Errno::EINTR)
            } else {
                h.wait(self.epfd, cap, slice, mask)
            };
            let r = match harvest {
                Err(Errno::EINTR) => {
                    // Spec section 3: a wait interrupted by a signal handler returns what is
                    // ready, possibly 0, at once (one more harvest that does not block). A
                    // signal the engine swallowed for a NOMASK kevent ran no handler of the
                    // program (natively it would not have interrupted anything): the wait
                    // goes on, and the doorbell it rang is harvested like any event.
                    if crate::signal::dispatch::swallowed_here() == swallowed {
                        deadline = Deadline::Now;
                        interrupted = true;
                    }
                    Ok(&[][..])
                }
                r => r,
            };
            if sleeping {
                crate::signal::dispatch::reclaim_if_due();
            }
            st = self.lock();
            st.refresh_ring();
            call.relocked();
            let mut woken = false;
            if sleeping {
                st.sleepers -= 1;
                if st.wake_gen != wake_gen {
                    woken = true;
                    st.wake_acks = st.wake_acks.saturating_sub(1);
                }
            }
            let got = match r {
                Ok(got) => got,
                Err(e) => break Err(e),
            };
            let a = st.absorb(got, false, &mut call, sink, ctx);
            holding |= a.held;
            // After an interruption, one more harvest (not blocking) before returning.
            more = (got.len() == cap && a.fresh > 0) || std::mem::take(&mut interrupted);
            if a.foreign || (got.is_empty() && sleeping && !woken) {
                // Tokens that are not ours, or a sleep slice that ended empty: make sure the
                // fd is still this queue before going on.
                drop(st);
                let v = self.verify();
                st = self.lock();
                st.refresh_ring();
                call.relocked();
                if let Err(e) = v {
                    break Err(e);
                }
            }
            if sleeping && a.unknown > 0 && a.fresh == 0 && !blind {
                // A sleep that only items of nobody ended (decision P32): remove those that
                // can be removed; the wait naps instead of spinning while others stay.
                blind = st.evict_unknown(ctx) > 0;
            }
            if woken {
                st.take_ready(&mut call, sink, ctx);
                break Ok(());
            }
            if !more && sink.count() >= want && st.kevents.queued == 0 && st.orphans.is_empty() {
                // The common case: one harvest found enough, nothing else is queued.
                break Ok(());
            }
        };
        if let Some(ring) = &st.ring {
            ring.publish();
        }
        // P38: what the ring gained during the call, whoever posted it.
        let gained = start_pushed
            .zip(st.ring.as_ref())
            .map(|(start, r)| r.pushed().wrapping_sub(start).min(u64::from(r.size())) as u32);
        st.sync_wake(ctx);
        call.hand_back(&mut st.taken_spare);
        drop(st);
        result?;
        if sink.count() == 0 && !proven {
            self.prove()?;
        }
        Ok(gained.unwrap_or(sink.count() as u32))
    }

    /// A new epoll holding the queue fd edge-triggered (see `watch` in [`Queue::collect`]);
    /// `None` if it cannot be made (out of fds).
    fn watch(&self) -> Option<std::os::fd::OwnedFd> {
        let w = sys::epoll_create().ok()?;
        let edge = (libc::EPOLLIN | libc::EPOLLET) as u32;
        sys::epoll_ctl(w.as_raw_fd(), libc::EPOLL_CTL_ADD, self.epfd, edge, 0).ok()?;
        Some(w)
    }
}
