//! From sources to the caller: turning what epoll reported into ready kevents and
//! deliveries, under the rules of spec section 4.

use kevent_sys::{KEVENT_REQ_ONESHOT, ukevent};

use super::wait::Sink;
use super::{Ctx, State};
use crate::ring::Ring;
use crate::rules::{self, Readiness, Report};
use crate::{source, sys, token};

/// What one harvest brought.
#[derive(Clone, Copy, Debug)]
pub(super) struct Absorbed {
    /// A token was not this queue's (the fd may name another epoll now).
    pub(super) foreign: bool,
    /// Events that were new to this wait (delivered, queued, or internal). A full harvest
    /// of nothing new means epoll is only repeating level sources this wait already took:
    /// harvesting again would spin.
    pub(super) fresh: usize,
    /// Events of items no kevent and no internal fd of this queue owns (see
    /// [`State::evict_unknown`]).
    pub(super) unknown: usize,
    /// A level kevent this wait already delivered was reported again (its source is still
    /// ready): the wait must not sleep on the queue fd itself, which stays readable for the
    /// other waiters and for `poll()` (see `Queue::collect`).
    pub(super) held: bool,
}

/// One wait (`kevent_get_events` or `kevent_wait`) and what it has delivered: each kevent at
/// most once per wait (spec section 4).
#[derive(Debug)]
pub(super) struct Call {
    /// The wait's number, stamped on each kevent it delivers ([`crate::kevent::Kevent`]).
    pub(super) id: u32,
    /// The tokens of the kevents it delivered. A kevent's stamp names only the last wait that
    /// delivered it: while this one dropped the lock (to sleep), another wait may have
    /// delivered the same level kevent and stamped it (issue 20, finding 8). A push per
    /// delivery, no syscall; searched only for events met after such a gap.
    taken: Vec<u64>,
    /// `taken[..sorted]` is sorted: what was delivered before the lock was last dropped.
    /// Later deliveries carry this wait's stamp, which nobody else can change meanwhile.
    sorted: usize,
}

/// The largest delivered-token list a finished wait hands on to the next one (its
/// allocation, 32 KiB); a larger one is freed.
const TAKEN_KEPT: usize = 4096;

impl Call {
    pub(super) fn new(id: u32) -> Call {
        Call {
            id,
            taken: Vec::new(),
            sorted: 0,
        }
    }

    /// Takes over the list a finished wait left (`State::taken_spare`), before this wait
    /// delivers anything: a push per delivery then allocates only beyond what earlier
    /// waits needed. Several waits of one queue at once each get their own list.
    pub(super) fn adopt(&mut self, spare: &mut Vec<u64>) {
        debug_assert!(self.taken.is_empty(), "adopt() before any delivery");
        self.taken = std::mem::take(spare);
        self.taken.clear();
    }

    /// The end of the wait: its list, emptied, goes back for the next one (unless another
    /// finished wait put one there already, or it grew beyond [`TAKEN_KEPT`]).
    pub(super) fn hand_back(&mut self, spare: &mut Vec<u64>) {
        if spare.capacity() == 0 && self.taken.capacity() <= TAKEN_KEPT {
            self.taken.clear();
            *spare = std::mem::take(&mut self.taken);
        }
    }

    /// Records deliveries made without recording (`State::deliver_whole`'s prefix, tokens
    /// `toks`), for a wait that goes on after them.
    pub(super) fn record(&mut self, toks: impl Iterator<Item = u64>) {
        self.taken.extend(toks);
    }

    /// The wait holds the lock again after dropping it: what it delivered so far becomes
    /// searchable.
    pub(super) fn relocked(&mut self) {
        if self.sorted < self.taken.len() {
            self.taken.sort_unstable();
            self.sorted = self.taken.len();
        }
    }

    /// Whether this wait delivered the kevent with token `tok` (and stamp `stamp`).
    fn delivered(&self, stamp: u32, tok: u64) -> bool {
        stamp == self.id || self.taken[..self.sorted].binary_search(&tok).is_ok()
    }
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
                self.kevents.reg.generation(slot) == Some(generation)
            }
        })
    }

    /// Moves queued kevents into the sink, oldest first. A kevent this wait already
    /// delivered stays queued for the next wait (each kevent at most once per wait, spec
    /// section 4); returns whether any was left for that reason.
    #[inline]
    pub(super) fn take_ready(&mut self, call: &mut Call, sink: &mut Sink<'_>, ctx: Ctx) -> bool {
        // Checked inline: most waits find nothing queued.
        if self.kevents.queued == 0 && self.orphans.is_empty() {
            return false;
        }
        self.take_queued(call, sink, ctx)
    }

    /// [`Self::take_ready`] once something is queued.
    fn take_queued(&mut self, call: &mut Call, sink: &mut Sink<'_>, ctx: Ctx) -> bool {
        while sink.room(self.ring.as_ref()) > 0 {
            let Some(ev) = self.orphans.pop_front() else {
                break;
            };
            sink.put(ev, self.ring.as_mut());
        }
        let mut deferred: Vec<u64> = Vec::new();
        while sink.room(self.ring.as_ref()) > 0 {
            let Some(tok) = self.kevents.ready.pop_front() else {
                break;
            };
            let (generation, slot) = token::split(tok);
            let Some(kev) = self.kevents.reg.live_mut(slot, generation) else {
                continue;
            };
            if !kev.queued {
                // Taken off the ready list since (MODIFY, D17), or a second token of a
                // kevent queued again meanwhile whose first token was already taken.
                continue;
            }
            if call.delivered(kev.stamp, tok) {
                deferred.push(tok);
                continue;
            }
            kev.queued = false;
            self.kevents.dequeued();
            self.deliver(slot, generation, None, call, sink, ctx);
        }
        let any = !deferred.is_empty();
        self.kevents.ready.extend(deferred);
        any
    }

    /// Delivers the kevent in `slot` (of generation `generation`, already checked) into the
    /// sink, applying the rules. `fresh` is the readiness epoll reported in this very call (no
    /// LAST_CHECK needed). Returns whether it was delivered.
    ///
    /// One registry lookup, and the event is built once from the registration and the
    /// rule's [`rules::Outcome`] (this runs once per delivered event).
    pub(super) fn deliver(
        &mut self,
        slot: u32,
        generation: u32,
        fresh: Option<u32>,
        call: &mut Call,
        sink: &mut Sink<'_>,
        ctx: Ctx,
    ) -> bool {
        let Some(kev) = self.kevents.reg.get_mut(slot) else {
            return false;
        };
        kev.from_queue = fresh.is_none();
        let report = source::report(kev, fresh);
        self.deliver_reported(slot, generation, report, call, sink, ctx)
    }

    /// [`Self::deliver`] once the source's report is known (computed once: a socket's
    /// `SO_ERROR` is consumed by reading it).
    fn deliver_reported(
        &mut self,
        slot: u32,
        generation: u32,
        report: Option<(Report, bool)>,
        call: &mut Call,
        sink: &mut Sink<'_>,
        ctx: Ctx,
    ) -> bool {
        let Some(kev) = self.kevents.reg.get_mut(slot) else {
            return false;
        };
        let Some((report, stale)) = report else {
            // Not ready at delivery: not delivered (a READY mark is consumed); the source's
            // next readiness delivers it again.
            kev.marked = false;
            kev.pending = 0;
            return false;
        };
        let occurrence = rules::readiness(kev.uk.type_) == Readiness::Occurrence;
        if occurrence {
            if kev.pending == 0 && !kev.marked {
                return false;
            }
            kev.revents = 0;
        }
        let o = rules::outcome(kev.uk.req_flags, report);
        let event = kev.uk.event(o.ret_flags, o.ret_data);
        let wakes_all = rules::wakes_all(kev.uk.req_flags);
        kev.stamp = call.id;
        kev.pending = 0;
        kev.marked = false;
        call.taken.push(token::make(generation, slot));
        sink.put(event, self.ring.as_mut());
        if o.unregister {
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

    /// Runs the harvest steps of the queue's internal fds in `got` (the signal doorbell,
    /// the timerfd, inotify), so that an occurrence kevent already queued (a READY mark)
    /// also counts the occurrences that came before the wait: one event, as a kernel
    /// coalesces them (**D8**). [`Self::absorb`] of the same `got` is then told so.
    pub(super) fn harvest_internal(&mut self, got: &[libc::epoll_event], ctx: Ctx) {
        for ev in got {
            let (generation, slot) = token::split(ev.u64);
            if slot >= token::FIRST_RESERVED_SLOT && generation == ctx.nonce {
                source::harvest(slot, &mut self.cx(ctx));
            }
        }
    }

    /// Turns harvested epoll events into deliveries (while the sink has room) or queued
    /// kevents; `harvested`: [`Self::harvest_internal`] already ran on `got`.
    pub(super) fn absorb(
        &mut self,
        got: &[libc::epoll_event],
        harvested: bool,
        call: &mut Call,
        sink: &mut Sink<'_>,
        ctx: Ctx,
    ) -> Absorbed {
        let mut foreign = false;
        let mut unknown = 0;
        let mut held = false;
        let mut fresh = self.absorb_plain(got, call, sink);
        for ev in &got[fresh..] {
            let (generation, slot) = token::split(ev.u64);
            if slot >= token::FIRST_RESERVED_SLOT {
                if generation != ctx.nonce {
                    foreign = true;
                    unknown += 1;
                    continue;
                }
                if !harvested {
                    source::harvest(slot, &mut self.cx(ctx));
                }
                fresh += 1;
                continue;
            }
            let Some(kev) = self.kevents.reg.live_mut(slot, generation) else {
                // Removed since epoll saw it (or not ours at all).
                foreign |= self.kevents.reg.get(slot).is_none() && generation & 1 == 0;
                unknown += 1;
                continue;
            };
            kev.revents = ev.events;
            if kev.queued {
                continue;
            }
            if call.delivered(kev.stamp, ev.u64) {
                // Delivered by this wait already (at most once per wait). A level source
                // that epoll reports again stays in the queue's epoll as it is, visible to
                // the other waiters and to `poll()` (issue 20, finding 8); the wait only
                // notes that sleeping on the queue fd would return at once. An edge, which
                // epoll reports once, is a new one unless this wait delivered the kevent
                // from the ready list (then epoll may still have held the readiness that
                // delivery reported): a new edge is queued for another waiter or the next
                // wait, never dropped (P18's note).
                if !rules::edge(kev.uk.req_flags) {
                    held |= kev.uk.req_flags & KEVENT_REQ_ONESHOT == 0;
                } else if !kev.from_queue {
                    self.kevents.queue(slot);
                }
                continue;
            }
            fresh += 1;
            if sink.room(self.ring.as_ref()) == 0 {
                self.kevents.queue(slot);
                continue;
            }
            let Some(report) = source::report_fresh_fd(kev, ev.events) else {
                self.deliver(slot, generation, Some(ev.events), call, sink, ctx);
                continue;
            };
            if let Some(Report::Ready(data)) = report {
                // The hot path (a level or ET socket, pipe or POLL kevent that epoll reported
                // ready): the rules of `deliver_reported` for a fresh report, which leaves
                // the kevent registered unless ONESHOT and wakes nobody unless WAKEUP_ALL.
                let o = rules::outcome(kev.uk.req_flags, Report::Ready(data));
                let wakes = rules::wakes_all(kev.uk.req_flags) && self.sleepers > 0;
                if !o.unregister && !wakes {
                    kev.stamp = call.id;
                    kev.from_queue = false;
                    kev.pending = 0;
                    call.taken.push(ev.u64);
                    let event = kev.uk.event(o.ret_flags, o.ret_data);
                    match (&mut *sink, &mut self.ring) {
                        // `kevent_get_events` without a ring (room checked above).
                        (Sink::Buffer { buf, n }, None) => {
                            buf[*n] = event;
                            *n += 1;
                        }
                        (sink, ring) => sink.put(event, ring.as_mut()),
                    }
                    continue;
                }
            }
            let report = report.map(|r| (r, false));
            kev.from_queue = false;
            self.deliver_reported(slot, generation, report, call, sink, ctx);
        }
        Absorbed {
            foreign,
            fresh,
            unknown,
            held,
        }
    }

    /// Whether a first harvest of `got` events (of capacity `cap`) may settle a call that
    /// wants at least `want` and can take `room`: nothing is queued or owed (`orphans`), at
    /// least `want` events came, fewer than the harvest could hold (epoll has nothing more),
    /// and they all fit.
    fn settles(&self, got: usize, want: usize, cap: usize, room: usize) -> bool {
        !self.dead
            && self.kevents.queued == 0
            && self.orphans.is_empty()
            && got < cap
            && got <= room
            && got >= want
    }

    /// A whole `kevent_get_events` (no ring) in one pass when its first harvest may settle
    /// it ([`Self::settles`]). The leading plain events (see [`plain_event`]) are delivered
    /// by the rules of `deliver_reported`; returns how many. When that is all of `got`, the
    /// call returns at once: it never sleeps, so it needs no number of its own (one harvest
    /// holds each epoll item once, so nothing can be delivered twice in it: spec section 4's
    /// at most once per wait) and stamps nothing, and a live kevent's token proves that the
    /// queue fd is this queue (as `proves_identity` does). Otherwise the wait goes on with
    /// the rest, and records the delivered prefix in `Call::taken` itself.
    pub(super) fn deliver_whole(
        &mut self,
        got: &[libc::epoll_event],
        want: usize,
        cap: usize,
        buf: &mut [ukevent],
    ) -> usize {
        if self.ring.is_some() || !self.settles(got.len(), want, cap, buf.len()) {
            return 0;
        }
        let buf = &mut buf[..got.len()];
        whole_run(&mut self.kevents.reg, got, |i, ev| buf[i] = ev)
    }

    /// [`Self::deliver_whole`] for `kevent_wait` on an ordinary ring (at most `limit` events,
    /// and the ring's free slots): the events go into the ring, published at once.
    pub(super) fn deliver_whole_ring(
        &mut self,
        got: &[libc::epoll_event],
        limit: usize,
        cap: usize,
    ) -> usize {
        let room = match &self.ring {
            Some(r) if !r.is_async() => limit.min(r.free() as usize),
            _ => return 0,
        };
        if !self.settles(got.len(), 1, cap, room) {
            return 0;
        }
        let Some(ring) = self.ring.as_mut() else {
            return 0;
        };
        let mut w = ring.writer();
        let k = whole_run(&mut self.kevents.reg, got, |_, ev| {
            let pushed = w.push(&ev);
            debug_assert!(pushed, "room was checked");
        });
        drop(w);
        ring.publish();
        k
    }

    /// [`Self::deliver_whole_ring`] for `kevent_wait` on an asynchronous ring (P38), consumer
    /// index `old_uidx` as the caller saw it. Only when the harvest proves that the queue fd
    /// is this queue (a live kevent's token or the queue's nonce) is `ring_uidx` loaded
    /// (P41); then P38's gate must pass (`ring_uidx < n`, `old_uidx == ring_uidx ==
    /// ring_kidx`), and the whole harvest must fit the free slots and `limit`. The queue's
    /// wake eventfd, which P41 keeps readable while the ring holds unread events, is skipped
    /// (its harvest step is none); the leading plain events go into the ring, published at
    /// once. Returns the length of that prefix of `got` and the events it put in the ring
    /// (at least one), or `None` with nothing changed: the waiting loop then does it all,
    /// gate included.
    pub(super) fn deliver_whole_async(
        &mut self,
        got: &[libc::epoll_event],
        limit: usize,
        cap: usize,
        old_uidx: u32,
        ctx: Ctx,
    ) -> Option<(usize, usize)> {
        if !self.ring.as_ref().is_some_and(Ring::is_async)
            || !self.settles(got.len(), 1, cap, usize::MAX)
            || !self.proves_identity(got, ctx)
        {
            return None;
        }
        self.refresh_ring();
        let ring = self.ring.as_mut()?;
        let uidx = ring.consumer_index().ok()?;
        if old_uidx != uidx
            || old_uidx != ring.kidx()
            || got.len() > limit.min(ring.free() as usize)
        {
            return None;
        }
        let wake = token::make(ctx.nonce, token::WAKE);
        let (mut k, mut n) = (0, 0);
        let mut w = ring.writer();
        while let Some(ev) = got.get(k) {
            if ev.u64 != wake {
                let Some((kev, o)) = plain_event(&mut self.kevents.reg, ev) else {
                    break;
                };
                kev.revents = ev.events;
                kev.from_queue = false;
                kev.pending = 0;
                let pushed = w.push(&kev.uk.event(o.ret_flags, o.ret_data));
                debug_assert!(pushed, "room was checked");
                n += 1;
            }
            k += 1;
        }
        drop(w);
        if n == 0 {
            return None;
        }
        ring.publish();
        Some((k, n))
    }

    /// The start of [`Self::absorb`] for the busy server's case: a run of events of live,
    /// unqueued, unmarked fd kevents that this wait has not delivered, that epoll reports
    /// ready without an error or hang-up bit (so their report reads nothing but `revents`),
    /// and that stay registered and wake nobody (neither ONESHOT nor WAKEUP_ALL), delivered
    /// into `kevent_get_events`' buffer (a queue without a ring) or into the ring
    /// (`kevent_wait`). The first event that is anything else ends the run, and `absorb` goes
    /// on from there. Returns how many events of `got` it delivered.
    fn absorb_plain(
        &mut self,
        got: &[libc::epoll_event],
        call: &mut Call,
        sink: &mut Sink<'_>,
    ) -> usize {
        if call.sorted != 0 || got.is_empty() {
            // After a sleep: `Call::delivered` must search what was delivered before it.
            // (An empty harvest: nothing to deliver, no ring writer to set up.)
            return 0;
        }
        let room = sink.room(self.ring.as_ref());
        match (sink, self.ring.as_mut()) {
            (Sink::Buffer { buf, n }, None) => {
                let dst = &mut buf[*n..];
                let k = plain_run(&mut self.kevents, call, got, room, |i, ev| dst[i] = ev);
                *n += k;
                k
            }
            (Sink::Ring { n, .. }, Some(ring)) => {
                let mut w = ring.writer();
                let k = plain_run(&mut self.kevents, call, got, room, |_, ev| {
                    let pushed = w.push(&ev);
                    debug_assert!(pushed, "room() guaranteed a free slot");
                });
                drop(w);
                *n += k;
                k
            }
            _ => 0,
        }
    }

    /// Whether an epoll token is one of this queue's: a live kevent's or an internal fd's.
    fn owns_token(&self, tok: u64, ctx: Ctx) -> bool {
        let (generation, slot) = token::split(tok);
        if slot >= token::FIRST_RESERVED_SLOT {
            generation == ctx.nonce
        } else {
            self.kevents.reg.generation(slot) == Some(generation)
        }
    }

    /// Removes from the queue's epoll the items that no kevent and no internal fd owns,
    /// where epoll still lets anyone reach them: a program's (or io_uring's) `epoll_ctl` on
    /// the queue fd, or the item a REMOVE could not delete because its fd was closed while
    /// a duplicate kept the file open, once the number names that file again (**D10**). Such
    /// an item is level-triggered as often as not, and a wait could never sleep while its
    /// file is ready. Returns how many items stay unreachable (their number is closed or
    /// names another file: only the file's last close removes them).
    ///
    /// The items come from `/proc/self/fdinfo/<queue fd>` (number, data, inode); an item is
    /// deleted only if its number still names a file with its inode and no kevent is
    /// registered on that number (whose item it could otherwise be).
    pub(super) fn evict_unknown(&mut self, ctx: Ctx) -> usize {
        let mut stuck = 0;
        for item in sys::epoll_items(ctx.epfd) {
            if self.owns_token(item.data, ctx) {
                continue;
            }
            let reachable = sys::file_id(item.fd).is_ok_and(|f| f.ino == item.ino)
                && !source::fd_in_use(item.fd, &mut self.cx(ctx));
            if !reachable || sys::epoll_ctl(ctx.epfd, libc::EPOLL_CTL_DEL, item.fd, 0, 0).is_err() {
                stuck += 1;
            }
        }
        stuck
    }
}

/// The run of [`State::absorb_plain`]: delivers, by the rules of `deliver_reported`, at most
/// `room` leading events of `got` that need nothing but their `revents`, handing the `i`-th
/// one to `emit(i, event)`; returns how many.
fn plain_run(
    kevents: &mut super::Kevents,
    call: &mut Call,
    got: &[libc::epoll_event],
    room: usize,
    mut emit: impl FnMut(usize, ukevent),
) -> usize {
    let mut i = 0;
    while let (Some(ev), true) = (got.get(i), i < room) {
        let Some((kev, o)) = plain_event(&mut kevents.reg, ev) else {
            break;
        };
        if kev.stamp == call.id {
            // Delivered by this wait already (at most once per wait): `absorb` decides.
            break;
        }
        kev.revents = ev.events;
        kev.stamp = call.id;
        kev.from_queue = false;
        kev.pending = 0;
        call.taken.push(ev.u64);
        emit(i, kev.uk.event(o.ret_flags, o.ret_data));
        i += 1;
    }
    i
}

/// The run of [`State::deliver_whole`]: delivers the leading plain events of `got` (all of
/// which fit), unstamped, handing the `i`-th to `emit(i, event)`; returns how many.
#[inline]
fn whole_run(
    reg: &mut crate::registry::Registry<crate::kevent::Kevent>,
    got: &[libc::epoll_event],
    mut emit: impl FnMut(usize, ukevent),
) -> usize {
    let mut k = 0;
    while k < got.len() {
        let ev = &got[k];
        let Some((kev, o)) = plain_event(reg, ev) else {
            break;
        };
        kev.revents = ev.events;
        kev.from_queue = false;
        kev.pending = 0;
        emit(k, kev.uk.event(o.ret_flags, o.ret_data));
        k += 1;
    }
    k
}

/// The kevent of a plain event, and its delivery's outcome: a live, unqueued, unmarked fd
/// kevent (whether this wait delivered it already is the caller's to check), reported ready
/// by epoll
/// without an error or hang-up bit (its report reads nothing but `revents`, no system call),
/// that stays registered and wakes nobody (neither ONESHOT nor WAKEUP_ALL). `None` for every
/// other event. Changes nothing.
#[inline]
fn plain_event<'r>(
    reg: &'r mut crate::registry::Registry<crate::kevent::Kevent>,
    ev: &libc::epoll_event,
) -> Option<(&'r mut crate::kevent::Kevent, rules::Outcome)> {
    let quiet = (libc::EPOLLERR | libc::EPOLLHUP) as u32;
    let (generation, slot) = token::split(ev.u64);
    if slot >= token::FIRST_RESERVED_SLOT || ev.events & quiet != 0 {
        return None;
    }
    let kev = reg.live_mut(slot, generation)?;
    let req = kev.uk.req_flags;
    if kev.queued || rules::wakes_all(req) {
        return None;
    }
    let Some(Some(Report::Ready(data))) = source::report_fresh_fd(kev, ev.events) else {
        return None;
    };
    let o = rules::outcome(req, Report::Ready(data));
    if o.unregister {
        return None;
    }
    Some((kev, o))
}
