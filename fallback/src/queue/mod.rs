//! One kevent queue: its epoll, its registry and ready list, its ring, and the waiting
//! protocol of many threads.
//!
//! # Structure
//!
//! The queue fd the caller holds *is* the queue's epoll fd, so it is a real fd: pollable
//! (readable while a source is ready or the ready list is not empty), nestable, closable with
//! `close()`, close-on-exec. Inside that epoll sit the watched fds (token = registry slot and
//! generation) and the queue's internal fds: the wake eventfd, the timerfd, the inotify fd
//! and the process-wide signal doorbell.
//!
//! State lives behind one mutex ([`State`]); it is never held across a blocking call. A
//! waiter takes ready kevents from the ready list, then calls `epoll_wait` on the queue fd
//! *without* the lock, then takes the lock again to turn what epoll reported into
//! deliveries. Every wait harvests epoll at least once, so level kevents whose source is still
//! ready are delivered by every wait (**D7**), and the kernel's own checks on the queue fd
//! give `EBADF` (closed) and `EINVAL` (not an epoll) for free.
//!
//! # Waking
//!
//! * Occurrences (timer expiries, signals, inode entries, READY marks) go to the ready list;
//!   the wake eventfd is readable exactly while the ready list is not empty, which both makes
//!   the queue fd pollable and wakes sleepers (level-triggered).
//! * `READY` with `num == 0` bumps a wake generation: every thread asleep at that moment
//!   returns with whatever is ready (the eventfd stays readable until all of them have
//!   woken). With nobody asleep, the next wait returns at once instead, so a wake-up is never
//!   lost and the queue fd reads as readable meanwhile.
//! * A level kevent a wait has delivered and whose source is still ready stays in the
//!   queue's epoll as it is (other waiters take it, `poll()` of the queue fd sees it), as
//!   epoll keeps a level item another `epoll_wait` returned. The wait, which may not take it
//!   again, sleeps meanwhile on an epoll of its own holding the queue fd edge-triggered (new
//!   wake-ups only) and then harvests the queue fd without blocking (issue 20, finding 8).
//! * A sleeper never sleeps longer than [`SLICE_NS`] without checking that the queue fd is
//!   still this queue: a thread waiting in a queue whose fd another thread closed returns
//!   `EBADF` within that bound instead of hanging.

use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Mutex, MutexGuard};

use kevent_sys::{
    Errno, KEVENT_CTL_ADD, KEVENT_CTL_MODIFY, KEVENT_CTL_READY, KEVENT_CTL_REMOVE,
    KEVENT_POSIX_TIMER, Key, ukevent,
};

use crate::kevent::Kevent;
use crate::ring::Ring;
use crate::seg::SegDeque;
use crate::source::{self, QueueCx, Shared};
use crate::{sys, token};

/// The longest a waiter sleeps before checking that its queue fd is still open: an idle
/// waiter wakes once a second (decision P34).
pub(crate) const SLICE_NS: u64 = 1_000_000_000;

/// epoll events harvested per `epoll_wait`.
const HARVEST: usize = 256;

mod aio;
mod deliver;
mod ready;
mod register;
mod wait;

pub(crate) use ready::Kevents;
pub(crate) use wait::Deadline;
use wait::Sink;

/// The fds and identity a [`State`] method needs from its queue (the same its sources need).
type Ctx = source::Epoll;

/// Everything behind the queue lock.
#[derive(Debug)]
struct State {
    /// The registry and the ready list.
    kevents: Kevents,
    /// Events of kevents already unregistered that still owe one report (**D10**).
    orphans: SegDeque<ukevent>,
    ring: Option<Ring>,
    /// The queue-wide state of the event types (the timers, the inotify fd, the SIGNAL
    /// kevents).
    sources: Shared,
    sleepers: u32,
    wake_gen: u64,
    wake_acks: u32,
    wake_token: bool,
    wake_signaled: bool,
    dead: bool,
    /// The delivered-token list of a finished wait, empty, kept for the next one
    /// (`Call::adopt`): a wait then records its deliveries without allocating.
    taken_spare: Vec<u64>,
}

/// One queue.
#[derive(Debug)]
pub(crate) struct Queue {
    /// The caller's queue fd (the epoll). Not owned: the caller closes it, and the engine must
    /// never close a number that may by then belong to another file.
    epfd: RawFd,
    wake: OwnedFd,
    nonce: u32,
    /// The fork epoch the queue was created in (**D11**).
    pub(crate) epoch: u64,
    calls: AtomicU32,
    /// Set once the queue fd was found closed or naming another file.
    gone: AtomicBool,
    /// The ring's size and whether it is asynchronous (P38), if the queue has a ring: fixed
    /// at `kevent_init`, so read without the lock.
    ring_shape: Option<(u32, bool)>,
    /// An ordinary ring's consumer index (`Ring::consumer_index`), stored under the lock by
    /// each commit that moves it: `kevent_wait` compares `old_uidx` with it without taking
    /// the lock (a commit may move it right after either way).
    ring_uidx: AtomicU32,
    /// The caller sees every close of the queue fd ([`crate::caller_sees_close`]): `ctl`
    /// does not check the fd.
    trusted: AtomicBool,
    /// Live [`crate::QueueOwner`]s (decision P65): while there is one, no call checks the fd
    /// but where a sleeping wait or a foreign token asks (see [`Queue::prove`]).
    owners: AtomicU32,
    state: Mutex<State>,
}

impl Queue {
    /// Creates a queue (its epoll is the returned fd) with an optional ring.
    pub(crate) fn create(
        ring: Option<Ring>,
        epoch: u64,
        nonce: u32,
    ) -> Result<(Queue, OwnedFd), Errno> {
        let ep = sys::epoll_create()?;
        let wake = sys::eventfd()?;
        sys::epoll_ctl(
            ep.as_raw_fd(),
            libc::EPOLL_CTL_ADD,
            wake.as_raw_fd(),
            libc::EPOLLIN as u32,
            token::make(nonce, token::WAKE),
        )?;
        let ring_shape = ring.as_ref().map(|r| (r.size(), r.is_async()));
        let q = Queue {
            epfd: ep.as_raw_fd(),
            wake,
            nonce,
            epoch,
            calls: AtomicU32::new(0),
            gone: AtomicBool::new(false),
            ring_shape,
            ring_uidx: AtomicU32::new(0),
            trusted: AtomicBool::new(false),
            owners: AtomicU32::new(0),
            state: Mutex::new(State {
                kevents: Kevents::new(nonce),
                orphans: SegDeque::new(),
                ring,
                sources: Shared::new(),
                sleepers: 0,
                wake_gen: 0,
                wake_acks: 0,
                wake_token: false,
                wake_signaled: false,
                dead: false,
                taken_spare: Vec::new(),
            }),
        };
        Ok((q, ep))
    }

    /// The queue fd.
    pub(crate) fn fd(&self) -> RawFd {
        self.epfd
    }

    fn ctx(&self) -> Ctx {
        Ctx {
            epfd: self.epfd,
            wake: self.wake.as_raw_fd(),
            nonce: self.nonce,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while the lock was held cannot leave the state half-updated in a way that
        // breaks memory safety; keep serving rather than poisoning every later call.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether the queue has an asynchronous ring (P38).
    fn is_async(&self) -> bool {
        self.ring_shape.is_some_and(|(_, a)| a)
    }

    /// Checks that the queue fd still is this queue's epoll (one `epoll_ctl`). `EBADF` when
    /// the number is closed, `EINVAL` when it names another file.
    ///
    /// The proof is the queue's wake eventfd: an `EPOLL_CTL_MOD` of it succeeds exactly while
    /// the number names the epoll that holds it, and on any other epoll it fails (`ENOENT`)
    /// without touching it (decision P54: an `EPOLL_CTL_ADD` would be cheaper, but would put
    /// the engine's item into that epoll for a moment).
    pub(crate) fn verify(&self) -> Result<(), Errno> {
        let r = sys::epoll_ctl(
            self.epfd,
            libc::EPOLL_CTL_MOD,
            self.wake.as_raw_fd(),
            libc::EPOLLIN as u32,
            token::make(self.nonce, token::WAKE),
        );
        let e = match r {
            Ok(()) => return Ok(()),
            Err(Errno::EBADF) => Errno::EBADF,
            Err(_) => Errno::EINVAL,
        };
        self.gone.store(true, Ordering::Relaxed);
        Err(e)
    }

    /// See [`crate::caller_sees_close`].
    pub(crate) fn trust_caller(&self) {
        self.trusted.store(true, Ordering::Relaxed);
    }

    /// A [`crate::QueueOwner`] was made (decision P65).
    pub(crate) fn owner_declared(&self) {
        self.owners.fetch_add(1, Ordering::Relaxed);
    }

    /// A [`crate::QueueOwner`] was dropped: the proofs are back once no other one lives.
    /// Release: the owner's close of the fd (and its freeing of the ring) come after.
    pub(crate) fn owner_gone(&self) {
        self.owners.fetch_sub(1, Ordering::Release);
    }

    /// Whether a [`crate::QueueOwner`] of this queue lives (decision P65). Acquire, paired
    /// with [`Queue::owner_gone`]: a call that sees no owner sees the proofs due.
    #[inline]
    fn owned(&self) -> bool {
        self.owners.load(Ordering::Acquire) != 0
    }

    /// The proof of [`Queue::verify`] where only the caller's promise could make it
    /// needless: skipped while a [`crate::QueueOwner`] of the queue lives (decision P65).
    /// The checks that are not about a closed number's answer stay `verify` (a sleeping
    /// wait's empty slice, P14; tokens that are not the queue's; the table's sweep).
    #[inline]
    pub(crate) fn prove(&self) -> Result<(), Errno> {
        if self.owned() { Ok(()) } else { self.verify() }
    }

    /// Whether [`Queue::verify`] found the queue fd closed or reused.
    pub(crate) fn is_gone(&self) -> bool {
        self.gone.load(Ordering::Relaxed)
    }

    /// Releases every kevent (the queue fd was closed, or belongs to someone else now).
    pub(crate) fn shut_down(&self) {
        let mut st = self.lock();
        if st.dead {
            return;
        }
        st.dead = true;
        let ctx = self.ctx();
        let slots: Vec<u32> = st.kevents.reg.iter().map(|(slot, _)| slot).collect();
        for slot in slots {
            // The queue fd is closed or names another epoll now: never touch it.
            st.unregister(slot, ctx, true);
        }
        st.kevents.ready.clear();
        st.kevents.queued = 0;
    }

    fn next_call(&self) -> u32 {
        loop {
            let c = self.calls.fetch_add(1, Ordering::Relaxed).wrapping_add(1);
            if c != 0 {
                return c;
            }
        }
    }

    /// `kevent_ctl`.
    pub(crate) fn ctl(&self, cmd: u32, events: &mut [ukevent]) -> Result<u32, Errno> {
        if cmd > KEVENT_CTL_READY {
            return Err(Errno::EINVAL);
        }
        if !self.trusted.load(Ordering::Relaxed) {
            self.prove()?;
        }
        let ctx = self.ctx();
        let mut st = self.lock();
        if st.dead {
            return Err(Errno::EBADF);
        }
        let r = match cmd {
            KEVENT_CTL_ADD => {
                let mut written = 0;
                for i in 0..events.len() {
                    let mut e = events[i];
                    if st.add(&mut e, ctx) {
                        events[written] = e;
                        written += 1;
                    }
                }
                written as u32
            }
            KEVENT_CTL_REMOVE | KEVENT_CTL_MODIFY => {
                for e in events.iter_mut() {
                    st.remove_or_modify(cmd, e, ctx);
                }
                // D14: 0 once every entry is processed; each entry's result is in the entry.
                0
            }
            _ => {
                if events.is_empty() {
                    st.wake_all();
                    0
                } else {
                    let mut marked = 0;
                    let mut missing = 0;
                    for i in 0..events.len() {
                        let e = events[i];
                        if st.mark(&e) {
                            marked += 1;
                        } else {
                            events[missing] = e;
                            missing += 1;
                        }
                    }
                    marked
                }
            }
        };
        if st.ring.as_ref().is_some_and(Ring::is_async) && st.kevents.queued > 0 {
            // Decision P41: on an asynchronous ring, what this call queued (READY marks,
            // occurrences, ADDs of ready kevents with ALWAYS_QUEUE) is posted before it
            // returns, as the kernel's producer posts it when it occurs.
            let id = self.next_call();
            st.post_queued(id, ctx);
        }
        st.sync_wake(ctx);
        Ok(r)
    }

    /// `kevent_get_events`.
    pub(crate) fn get_events(
        &self,
        min_nr: u32,
        buf: &mut [ukevent],
        timeout: &libc::timespec,
        flags: u32,
    ) -> Result<u32, Errno> {
        let deadline = Deadline::parse(timeout, flags)?;
        if buf.is_empty() || min_nr as usize > buf.len() {
            return Err(Errno::EINVAL);
        }
        if self.is_async() {
            // P38: an asynchronous ring's events are read from the ring only (and a closed
            // queue fd is EBADF first).
            self.prove()?;
            return Err(Errno::EINVAL);
        }
        let want = min_nr.max(1) as usize;
        // Decision P34: SIGNAL kevents whose handler a program replaced get it back.
        crate::signal::dispatch::reclaim_if_due();
        let mut h = sys::Harvest::new();
        let (cap, first) = self.harvest_first(&mut h, buf.len());
        let mut st = self.lock();
        let mut whole = 0;
        if first.is_ok() {
            // The busy server's call: its first harvest may settle it.
            whole = st.deliver_whole(h.got(), want, cap, buf);
            if whole == h.got().len() && whole > 0 {
                st.sync_wake(self.ctx());
                return Ok(whole as u32);
            }
        }
        let mut sink = Sink::Buffer { buf, n: whole };
        self.collect_rest(
            &mut h, cap, first, st, whole, want, &mut sink, deadline, None,
        )
    }

    /// `kevent_wait`.
    ///
    /// On an asynchronous ring (P38): `EINVAL` for `ring_uidx >= n`; 0 at once when
    /// `old_uidx` differs from `ring_uidx` or from `ring_kidx`; otherwise the wait moves
    /// queued events into free slots, sleeps if none moved until one is posted (by this call
    /// or another), and returns how many the ring gained during the call. Those checks read
    /// the ring, so they run in [`Queue::collect`] once its first harvest (or a check) has
    /// proven that the fd still is this queue (P41).
    pub(crate) fn wait(
        &self,
        num: u32,
        old_uidx: u32,
        timeout: &libc::timespec,
        flags: u32,
    ) -> Result<u32, Errno> {
        enum Pre {
            Stale,
            Go(Deadline),
            Async(Deadline),
        }
        let checked = Deadline::parse(timeout, flags).and_then(|deadline| {
            let (size, is_async) = self.ring_shape.ok_or(Errno::EINVAL)?;
            if num > size {
                return Err(Errno::EINVAL);
            }
            if is_async {
                return Ok(Pre::Async(deadline));
            }
            Ok(
                if old_uidx != self.ring_uidx.load(Ordering::Acquire) || num == 0 {
                    Pre::Stale
                } else {
                    Pre::Go(deadline)
                },
            )
        });
        match checked {
            Ok(Pre::Stale) => {
                self.prove()?;
                Ok(0)
            }
            Ok(Pre::Go(deadline)) => self.wait_ordinary(num as usize, deadline),
            Ok(Pre::Async(deadline)) => self.wait_async(num as usize, old_uidx, deadline),
            Err(e) => {
                // A closed queue fd is EBADF whatever the other arguments say.
                self.prove()?;
                Err(e)
            }
        }
    }

    /// `kevent_wait` on an asynchronous ring (P38) once its arguments passed: a wait whose
    /// first harvest proves the fd, passes P38's `old_uidx` gate and fits the ring's free
    /// slots delivers its plain events there and returns from here, as `wait_ordinary`
    /// does; what it cannot settle goes on in the waiting loop with the gate already passed.
    fn wait_async(&self, num: usize, old_uidx: u32, deadline: Deadline) -> Result<u32, Errno> {
        // Decision P34: SIGNAL kevents whose handler a program replaced get it back.
        crate::signal::dispatch::reclaim_if_due();
        let mut h = sys::Harvest::new();
        let (cap, first) = self.harvest_first(&mut h, num);
        let mut st = self.lock();
        if first.is_ok() {
            if let Some((whole, n)) =
                st.deliver_whole_async(h.got(), num, cap, old_uidx, self.ctx())
            {
                if whole == h.got().len() {
                    st.sync_wake(self.ctx());
                    return Ok(n as u32);
                }
                // The gate passed and the ring holds `n` new events: the loop takes the rest
                // of the harvest and returns at once (the ring is not empty), counting what
                // it delivered with them (nobody else posts while the lock is held).
                let mut sink = Sink::Ring { limit: num, n };
                return self
                    .collect_rest(&mut h, cap, first, st, whole, 1, &mut sink, deadline, None);
            }
        }
        let mut sink = Sink::Ring { limit: num, n: 0 };
        self.collect_rest(
            &mut h,
            cap,
            first,
            st,
            0,
            1,
            &mut sink,
            deadline,
            Some(old_uidx),
        )
    }

    /// `kevent_wait` on an ordinary ring once its arguments passed: as `get_events`, a wait
    /// that its first harvest settles delivers into the ring and returns from here.
    fn wait_ordinary(&self, num: usize, deadline: Deadline) -> Result<u32, Errno> {
        // Decision P34: SIGNAL kevents whose handler a program replaced get it back.
        crate::signal::dispatch::reclaim_if_due();
        let mut h = sys::Harvest::new();
        let (cap, first) = self.harvest_first(&mut h, num);
        let mut st = self.lock();
        let mut whole = 0;
        if first.is_ok() {
            whole = st.deliver_whole_ring(h.got(), num, cap);
            if whole == h.got().len() && whole > 0 {
                st.sync_wake(self.ctx());
                return Ok(whole as u32);
            }
        }
        let mut sink = Sink::Ring {
            limit: num,
            n: whole,
        };
        self.collect_rest(&mut h, cap, first, st, whole, 1, &mut sink, deadline, None)
    }

    /// `kevent_commit`.
    ///
    /// On an asynchronous ring the consumer index is `ring_uidx` (P38), and the commit then
    /// posts what waits in the queue into the slots it freed (decision P41).
    pub(crate) fn commit(&self, new_uidx: u32, over: u32) -> Result<u32, Errno> {
        // Its only system call, unless an owner sees every close (decision P65).
        self.prove()?;
        let mut st = self.lock();
        st.refresh_ring();
        let ring = st.ring.as_mut().ok_or(Errno::EINVAL)?;
        let released = ring.commit(new_uidx, over)?;
        let post = ring.is_async();
        if !post && released > 0 {
            self.ring_uidx
                .store(ring.consumer_index()?, Ordering::Release);
        }
        drop(st);
        if post {
            self.post_freed()?;
        }
        Ok(released)
    }

    /// An asynchronous ring's commit, after D13: one non-blocking harvest into the slots it
    /// freed (decision P41). Out of line, so that an ordinary ring's commit stays short.
    #[inline(never)]
    fn post_freed(&self) -> Result<u32, Errno> {
        let mut sink = Sink::Ring {
            limit: usize::MAX,
            n: 0,
        };
        self.collect(1, &mut sink, Deadline::Now)
    }

    /// Arms a POSIX timer kevent (`KEVENT_POSIX_TIMER`, id `timer`) to expire at the absolute
    /// CLOCK_MONOTONIC `deadline_ns` (None disarms), then every `interval_ns` (0: once).
    pub(crate) fn posix_timer_arm(
        &self,
        timer: u64,
        deadline_ns: Option<u64>,
        interval_ns: u64,
    ) -> Result<(), Errno> {
        let ctx = self.ctx();
        let mut st = self.lock();
        let slot = st
            .kevents
            .reg
            .find(Key::from_raw(KEVENT_POSIX_TIMER, timer))
            .ok_or(Errno::EINVAL)?;
        source::timer::posix_arm(slot, deadline_ns, interval_ns, &mut st.cx(ctx))
    }

    /// The next expiry and period of a POSIX timer kevent.
    pub(crate) fn posix_timer_get(&self, timer: u64) -> Result<(Option<u64>, u64), Errno> {
        let st = self.lock();
        let slot = st
            .kevents
            .reg
            .find(Key::from_raw(KEVENT_POSIX_TIMER, timer))
            .ok_or(Errno::EINVAL)?;
        let kev = st.kevents.reg.get(slot);
        Ok(source::timer::posix_get(kev, slot, &st.sources.timers))
    }

    /// Registers a POSIX timer kevent carrying `cookie` (the sigevent's `sival_ptr`).
    pub(crate) fn posix_timer_register(&self, timer: u64, cookie: u64) -> Result<(), Errno> {
        let mut st = self.lock();
        if st.dead {
            return Err(Errno::EBADF);
        }
        let mut uk = ukevent::new(
            KEVENT_POSIX_TIMER,
            kevent_sys::kevent_id::from_u64(timer),
            kevent_sys::KEVENT_MASK_ALL,
            0,
        );
        uk.set_cookie(cookie);
        let kev = Kevent::new(&uk, source::timer::posix_source());
        st.kevents.reg.insert(kev).map(drop).ok_or(Errno::EAGAIN)
    }

    /// Unregisters a POSIX timer kevent.
    pub(crate) fn posix_timer_unregister(&self, timer: u64) {
        let ctx = self.ctx();
        let mut st = self.lock();
        if let Some(slot) = st
            .kevents
            .reg
            .find(Key::from_raw(KEVENT_POSIX_TIMER, timer))
        {
            st.unregister(slot, ctx, false);
            st.sync_wake(ctx);
        }
    }
}

impl State {
    /// The narrow context the event sources get: the epoll, their queue-wide state and the
    /// kevents (never the rest of the queue).
    fn cx(&mut self, ctx: Ctx) -> QueueCx<'_> {
        QueueCx {
            epoll: ctx,
            shared: &mut self.sources,
            kevents: &mut self.kevents,
        }
    }

    /// Makes the wake eventfd readable exactly while something waits to be taken (and, on
    /// an asynchronous ring, while the ring holds events its consumer has not released as
    /// last seen: `POLLIN`, P38; decision P41).
    fn sync_wake(&mut self, ctx: Ctx) {
        let want = self.kevents.queued > 0
            || !self.orphans.is_empty()
            || self.wake_acks > 0
            || self.wake_token
            || self.ring.as_ref().is_some_and(Ring::unread);
        if want != self.wake_signaled {
            if want {
                sys::eventfd_signal(ctx.wake);
            } else {
                sys::eventfd_drain(ctx.wake);
            }
            self.wake_signaled = want;
        }
    }

    /// P38: loads an asynchronous ring's `ring_uidx` (the consumer may have moved it), so
    /// that this locked section sees one value of it. Call only once the queue fd was proven
    /// to be this queue (the memory is the caller's only until it closes the fd).
    pub(super) fn refresh_ring(&mut self) {
        if let Some(r) = self.ring.as_mut() {
            r.refresh();
        }
    }

    /// Posts queued kevents into an asynchronous ring's free slots (no system call but a
    /// level source's re-arm), as one delivery pass numbered `id` (decision P41).
    fn post_queued(&mut self, id: u32, ctx: Ctx) {
        self.refresh_ring();
        let mut call = deliver::Call::new(id);
        let mut sink = Sink::Ring {
            limit: usize::MAX,
            n: 0,
        };
        self.take_ready(&mut call, &mut sink, ctx);
        if let Some(ring) = &self.ring {
            ring.publish();
        }
    }

    /// `READY` with `num == 0`.
    fn wake_all(&mut self) {
        if self.sleepers == 0 {
            self.wake_token = true;
        } else {
            self.wake_gen += 1;
            self.wake_acks = self.sleepers;
        }
    }
}
