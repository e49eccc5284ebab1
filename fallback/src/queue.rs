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
//! * A sleeper never sleeps longer than [`SLICE_NS`] without checking that the queue fd is
//!   still this queue: a thread waiting in a queue whose fd another thread closed returns
//!   `EBADF` within that bound instead of hanging.

use std::collections::{HashMap, VecDeque};
use std::mem::MaybeUninit;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Mutex, MutexGuard};

use kevent_sys::{
    Errno, KEVENT_CTL_ADD, KEVENT_CTL_MODIFY, KEVENT_CTL_READY, KEVENT_CTL_REMOVE,
    KEVENT_FLAGS_ABSTIME, KEVENT_POSIX_TIMER, KEVENT_REQ_ONESHOT, KEVENT_RET_COPY_FAILED,
    KEVENT_RET_DONE, ukevent,
};

use crate::kevent::Kevent;
use crate::registry::{Key, Registry};
use crate::ring::Ring;
use crate::rules::{self, AddAction, Readiness, Report};
use crate::signal::dispatch;
use crate::source::{self, Source, fd, inode, signal, timer};
use crate::timer::TimerHeap;
use crate::{sys, token};

/// The longest a waiter sleeps before checking that its queue fd is still open.
pub(crate) const SLICE_NS: u64 = 250_000_000;

/// INODE kevents: `revents` bit meaning the watched directory is gone.
const INODE_GONE: u32 = 1 << 31;

/// epoll events harvested per `epoll_wait`.
const HARVEST: usize = 256;

/// When a wait gives up.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Deadline {
    /// `{0, 0}`: do not block.
    Now,
    /// A relative timeout on CLOCK_MONOTONIC, in ns, counted from the first time it is needed.
    Relative(u64),
    /// An absolute CLOCK_MONOTONIC time.
    Monotonic(u64),
    /// An absolute CLOCK_REALTIME time (`KEVENT_FLAGS_ABSTIME`).
    Realtime(u64),
}

impl Deadline {
    /// Checks a timeout and the wait flags (**D1**, **D5**).
    pub(crate) fn parse(timeout: &libc::timespec, flags: u32) -> Result<Deadline, Errno> {
        if flags & !KEVENT_FLAGS_ABSTIME != 0 {
            return Err(Errno::EINVAL);
        }
        let ns = crate::timer::timespec_to_ns(timeout).ok_or(Errno::EINVAL)?;
        Ok(if flags & KEVENT_FLAGS_ABSTIME != 0 {
            Deadline::Realtime(ns)
        } else if ns == 0 {
            Deadline::Now
        } else {
            Deadline::Relative(ns)
        })
    }

    /// Nanoseconds left (fixing a relative timeout's start on first use).
    fn remaining(&mut self) -> u64 {
        match *self {
            Deadline::Now => 0,
            Deadline::Relative(ns) => {
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
    fn count(&self) -> usize {
        match self {
            Sink::Buffer { n, .. } | Sink::Ring { n, .. } => *n,
        }
    }

    fn room(&self, ring: Option<&Ring>) -> usize {
        match self {
            Sink::Buffer { buf, n } => buf.len() - n,
            Sink::Ring { limit, n } => (limit - n).min(ring.map_or(0, |r| r.free() as usize)),
        }
    }

    fn put(&mut self, mut ev: ukevent, ring: Option<&mut Ring>) {
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

/// The fds and identity a [`State`] method needs from its queue.
#[derive(Clone, Copy, Debug)]
struct Ctx {
    epfd: RawFd,
    wake: RawFd,
    nonce: u32,
}

/// Everything behind the queue lock.
#[derive(Debug)]
struct State {
    reg: Registry<Kevent>,
    /// Tokens of queued kevents, oldest first (a token, so that a kevent removed and its slot
    /// reused meanwhile is recognised and skipped).
    ready: VecDeque<u64>,
    /// Events of kevents already unregistered that still owe one report (**D10**).
    orphans: VecDeque<ukevent>,
    ring: Option<Ring>,
    timers: TimerHeap,
    timerfd: Option<OwnedFd>,
    timer_armed: Option<u64>,
    inotify: Option<OwnedFd>,
    watches: HashMap<i32, Vec<u32>>,
    signal_slots: Vec<u32>,
    doorbell: bool,
    sleepers: u32,
    wake_gen: u64,
    wake_acks: u32,
    wake_token: bool,
    wake_signaled: bool,
    dead: bool,
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
        let q = Queue {
            epfd: ep.as_raw_fd(),
            wake,
            nonce,
            epoch,
            calls: AtomicU32::new(0),
            gone: AtomicBool::new(false),
            state: Mutex::new(State {
                reg: Registry::new(nonce),
                ready: VecDeque::new(),
                orphans: VecDeque::new(),
                ring,
                timers: TimerHeap::new(),
                timerfd: None,
                timer_armed: None,
                inotify: None,
                watches: HashMap::new(),
                signal_slots: Vec::new(),
                doorbell: false,
                sleepers: 0,
                wake_gen: 0,
                wake_acks: 0,
                wake_token: false,
                wake_signaled: false,
                dead: false,
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

    /// Checks that the queue fd still is this queue's epoll (a syscall; used off the hot
    /// path). `EBADF` when the number is closed, `EINVAL` when it names another file.
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
        let slots: Vec<u32> = st.reg.iter().map(|(slot, _)| slot).collect();
        for slot in slots {
            // The queue fd is closed or names another epoll now: never touch it.
            st.unregister(slot, ctx, true);
        }
        st.ready.clear();
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
        self.verify()?;
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
                events.len() as u32
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
        let mut sink = Sink::Buffer { buf, n: 0 };
        self.collect(min_nr.max(1) as usize, &mut sink, deadline)
    }

    /// `kevent_wait`.
    pub(crate) fn wait(
        &self,
        num: u32,
        old_uidx: u32,
        timeout: &libc::timespec,
        flags: u32,
    ) -> Result<u32, Errno> {
        let deadline = Deadline::parse(timeout, flags)?;
        {
            let st = self.lock();
            let ring = st.ring.as_ref().ok_or(Errno::EINVAL)?;
            if num > ring.size() {
                return Err(Errno::EINVAL);
            }
            if old_uidx != ring.uidx() || num == 0 {
                drop(st);
                self.verify()?;
                return Ok(0);
            }
        }
        let mut sink = Sink::Ring {
            limit: num as usize,
            n: 0,
        };
        self.collect(1, &mut sink, deadline)
    }

    /// `kevent_commit`.
    pub(crate) fn commit(&self, new_uidx: u32, over: u32) -> Result<u32, Errno> {
        self.verify()?;
        let mut st = self.lock();
        st.ring
            .as_mut()
            .ok_or(Errno::EINVAL)?
            .commit(new_uidx, over)
    }

    /// The waiting loop shared by `get_events` and `wait`.
    fn collect(
        &self,
        want: usize,
        sink: &mut Sink<'_>,
        mut deadline: Deadline,
    ) -> Result<u32, Errno> {
        let ctx = self.ctx();
        let call = self.next_call();
        let mut events = [MaybeUninit::<libc::epoll_event>::uninit(); HARVEST];
        // Level kevents this wait delivered and epoll reported again; the first `parked_upto`
        // are switched to edge-triggered until the wait ends.
        let mut parked: Vec<u32> = Vec::new();
        let mut parked_upto = 0;
        let mut more;
        let mut nonblock_checked = false;
        // The first harvest never blocks and runs before the lock is taken: when it finds
        // enough (the busy server's case), a wait costs one epoll_wait and one lock.
        let first_cap = match sink {
            Sink::Buffer { buf, .. } => buf.len(),
            Sink::Ring { limit, .. } => *limit,
        }
        .saturating_add(8)
        .min(HARVEST);
        let first = sys::epoll_wait(self.epfd, &mut events[..first_cap], 0);
        let mut st = self.lock();
        match first {
            Ok(got) => {
                more = got.len() == first_cap;
                st.take_ready(call, sink, ctx);
                if st.absorb(got, call, sink, ctx, &mut parked) {
                    drop(st);
                    let v = self.verify();
                    st = self.lock();
                    v?;
                }
            }
            Err(e) => return Err(e),
        }
        let result = loop {
            if st.dead {
                break Err(Errno::EBADF);
            }
            st.take_ready(call, sink, ctx);
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
            let sleeping = timeout_ns > 0;
            if sleeping {
                while parked_upto < parked.len() {
                    st.park(parked[parked_upto], ctx);
                    parked_upto += 1;
                }
            }
            let wake_gen = st.wake_gen;
            if sleeping {
                st.sleepers += 1;
            }
            st.sync_wake(ctx);
            drop(st);
            let cap = (room + 8).min(HARVEST);
            let r = sys::epoll_wait(self.epfd, &mut events[..cap], timeout_ns.min(SLICE_NS));
            st = self.lock();
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
            more = got.len() == cap;
            let foreign = st.absorb(got, call, sink, ctx, &mut parked);
            if foreign || (got.is_empty() && sleeping && !woken) {
                // Tokens that are not ours, or a sleep slice that ended empty: make sure the
                // fd is still this queue before going on.
                drop(st);
                let v = self.verify();
                st = self.lock();
                if let Err(e) = v {
                    break Err(e);
                }
            }
            if woken {
                st.take_ready(call, sink, ctx);
                break Ok(());
            }
            if !more && sink.count() >= want && st.ready.is_empty() && st.orphans.is_empty() {
                // The common case: one harvest found enough, nothing else is queued.
                break Ok(());
            }
        };
        for &slot in &parked[..parked_upto] {
            st.unpark(slot, ctx);
        }
        if let Some(ring) = &st.ring {
            ring.publish();
        }
        st.sync_wake(ctx);
        drop(st);
        result?;
        if sink.count() == 0 {
            self.verify()?;
        }
        Ok(sink.count() as u32)
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
            .reg
            .find((KEVENT_POSIX_TIMER, timer))
            .ok_or(Errno::EINVAL)?;
        if let Some(Kevent {
            source: Source::Timer {
                interval_ns: iv, ..
            },
            ..
        }) = st.reg.get_mut(slot)
        {
            *iv = interval_ns;
        }
        match deadline_ns {
            Some(d) => st.schedule_timer(slot, d, ctx)?,
            None => {
                st.timers.cancel(slot);
            }
        }
        Ok(())
    }

    /// The next expiry and period of a POSIX timer kevent.
    pub(crate) fn posix_timer_get(&self, timer: u64) -> Result<(Option<u64>, u64), Errno> {
        let st = self.lock();
        let slot = st
            .reg
            .find((KEVENT_POSIX_TIMER, timer))
            .ok_or(Errno::EINVAL)?;
        let interval = match st.reg.get(slot) {
            Some(Kevent {
                source: Source::Timer { interval_ns, .. },
                ..
            }) => *interval_ns,
            _ => 0,
        };
        Ok((st.timers.deadline(slot), interval))
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
        let kev = Kevent::new(
            &uk,
            Source::Timer {
                interval_ns: 0,
                last_expiry_ns: 0,
            },
        );
        st.reg.insert(kev).map(drop).ok_or(Errno::EAGAIN)
    }

    /// Unregisters a POSIX timer kevent.
    pub(crate) fn posix_timer_unregister(&self, timer: u64) {
        let ctx = self.ctx();
        let mut st = self.lock();
        if let Some(slot) = st.reg.find((KEVENT_POSIX_TIMER, timer)) {
            st.unregister(slot, ctx, false);
            st.sync_wake(ctx);
        }
    }
}

impl State {
    /// Makes the wake eventfd readable exactly while something waits to be taken.
    fn sync_wake(&mut self, ctx: Ctx) {
        let want = !self.ready.is_empty()
            || !self.orphans.is_empty()
            || self.wake_acks > 0
            || self.wake_token;
        if want != self.wake_signaled {
            if want {
                sys::eventfd_signal(ctx.wake);
            } else {
                sys::eventfd_drain(ctx.wake);
            }
            self.wake_signaled = want;
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

    fn queue(&mut self, slot: u32) {
        let Some(generation) = self.reg.generation(slot) else {
            return;
        };
        let Some(kev) = self.reg.get_mut(slot) else {
            return;
        };
        if !kev.queued {
            kev.queued = true;
            self.ready.push_back(token::make(generation, slot));
        }
    }

    /// ADD of one entry; `true` when the entry is written back (ready at once, or failed).
    fn add(&mut self, e: &mut ukevent, ctx: Ctx) -> bool {
        match self.try_add(e, ctx) {
            Ok(None) => false,
            Ok(Some(data)) => {
                rules::ready_at_add(e, data);
                true
            }
            Err(err) => {
                rules::failed(e, err);
                true
            }
        }
    }

    /// `Ok(None)`: registered; `Ok(Some(data))`: ready at once, not registered.
    fn try_add(&mut self, e: &ukevent, ctx: Ctx) -> Result<Option<[u32; 2]>, Errno> {
        if !source::addable(e.type_) {
            return Err(Errno::ENOSYS);
        }
        if e.req_flags & !rules::KNOWN_REQ_FLAGS != 0 {
            return Err(Errno::EINVAL);
        }
        let key: Key = (e.type_, e.id.as_u64());
        if let Some(slot) = self.reg.find(key) {
            if !self.is_stale(slot, ctx) {
                return Err(Errno::EEXIST);
            }
            self.report_stale(slot, ctx);
        }
        let prepared = source::prepare(e)?;
        let req = rules::effective_req_flags(e.type_, e.req_flags);
        let ready = prepared.ready_now.is_some();
        let action = rules::on_add(req, ready);
        if action == AddAction::ReturnReady {
            return match prepared.ready_now {
                Some(Report::Ready(data)) => Ok(Some(data)),
                Some(Report::Broken(err)) => Err(err),
                None => Ok(Some([0, 0])),
            };
        }
        let mut uk = *e;
        uk.req_flags = req;
        uk.ret_flags = 0;
        uk.ret_data = [0, 0];
        let slot = self
            .reg
            .insert(Kevent::new(&uk, prepared.source))
            .ok_or(Errno::ENOMEM)?;
        if let Err(err) = self.arm(slot, ctx) {
            self.unregister(slot, ctx, false);
            return Err(err);
        }
        if action == AddAction::RegisterQueued {
            if let Some(kev) = self.reg.get_mut(slot) {
                kev.marked = true;
                kev.pending = kev.pending.saturating_add(1);
                if let Some(Report::Ready([bits, _])) = prepared.ready_now {
                    kev.revents = bits;
                }
            }
            self.queue(slot);
        }
        Ok(None)
    }

    /// Starts watching a freshly inserted kevent's source.
    fn arm(&mut self, slot: u32, ctx: Ctx) -> Result<(), Errno> {
        let generation = self.reg.generation(slot).ok_or(Errno::EINVAL)?;
        let kev = self.reg.get_mut(slot).ok_or(Errno::EINVAL)?;
        let uk = kev.uk;
        match &mut kev.source {
            Source::Fd { fd, .. } => {
                let events = fd::epoll_events(uk.type_, uk.event, uk.req_flags);
                match sys::epoll_ctl(
                    ctx.epfd,
                    libc::EPOLL_CTL_ADD,
                    *fd,
                    events,
                    token::make(generation, slot),
                ) {
                    Ok(()) => Ok(()),
                    // No ->poll (regular file): the fd is of the wrong kind.
                    Err(Errno::EPERM) => Err(Errno::EINVAL),
                    Err(e) => Err(e),
                }
            }
            Source::Timer { interval_ns, .. } => {
                let first = crate::timer::monotonic_now_ns().saturating_add(*interval_ns);
                self.schedule_timer(slot, first, ctx)
            }
            Source::Signal {
                signo,
                nomask,
                seen,
            } => {
                if let Err(e) = dispatch::watch(*signo, *nomask) {
                    // Not watched: `unregister` must not unwatch it.
                    *signo = 0;
                    return Err(e);
                }
                *seen = dispatch::delivered(*signo);
                self.signal_slots.push(slot);
                if !self.doorbell {
                    let bell = dispatch::doorbell_fd()?;
                    sys::epoll_ctl(
                        ctx.epfd,
                        libc::EPOLL_CTL_ADD,
                        bell,
                        (libc::EPOLLIN | libc::EPOLLET) as u32,
                        token::make(ctx.nonce, token::SIGNAL),
                    )?;
                    self.doorbell = true;
                }
                Ok(())
            }
            Source::Inode { wd } => {
                let dir = uk.id0() as RawFd;
                let ino = match &self.inotify {
                    Some(fd) => fd.as_raw_fd(),
                    None => {
                        let fd = sys::inotify_init()?;
                        sys::epoll_ctl(
                            ctx.epfd,
                            libc::EPOLL_CTL_ADD,
                            fd.as_raw_fd(),
                            libc::EPOLLIN as u32,
                            token::make(ctx.nonce, token::INODE),
                        )?;
                        let raw = fd.as_raw_fd();
                        self.inotify = Some(fd);
                        raw
                    }
                };
                let w = sys::inotify_watch_fd(ino, dir, inode::WATCH_MASK)?;
                *wd = w;
                self.watches.entry(w).or_default().push(slot);
                Ok(())
            }
            Source::User => Ok(()),
        }
    }

    /// Puts a timer into the heap and re-arms the timerfd if it is now the earliest.
    fn schedule_timer(&mut self, slot: u32, deadline: u64, ctx: Ctx) -> Result<(), Errno> {
        if self.timerfd.is_none() {
            let fd = sys::timerfd_create()?;
            sys::epoll_ctl(
                ctx.epfd,
                libc::EPOLL_CTL_ADD,
                fd.as_raw_fd(),
                libc::EPOLLIN as u32,
                token::make(ctx.nonce, token::TIMER),
            )?;
            self.timerfd = Some(fd);
        }
        self.timers.schedule(slot, deadline);
        if self.timer_armed.is_none_or(|armed| deadline < armed) {
            self.rearm_timerfd()?;
        }
        Ok(())
    }

    fn rearm_timerfd(&mut self) -> Result<(), Errno> {
        let Some(fd) = &self.timerfd else {
            return Ok(());
        };
        let next = self.timers.next_deadline();
        if next != self.timer_armed {
            sys::timerfd_arm(fd.as_raw_fd(), next)?;
            self.timer_armed = next;
        }
        Ok(())
    }

    /// Stops watching and forgets a kevent. `stale` says the fd may no longer name the
    /// registered file: then no `EPOLL_CTL_DEL` is issued, since it could hit another
    /// registration of the file that now has that number.
    fn unregister(&mut self, slot: u32, ctx: Ctx, stale: bool) {
        let Some(kev) = self.reg.remove(slot) else {
            return;
        };
        match kev.source {
            Source::Fd { fd, .. } if !stale => {
                // Errors mean the fd is closed or names another file now: either way the
                // registration is gone or unreachable.
                let _ = sys::epoll_ctl(ctx.epfd, libc::EPOLL_CTL_DEL, fd, 0, 0);
            }
            Source::Fd { .. } => {}
            Source::Timer { .. } => {
                self.timers.cancel(slot);
            }
            Source::Signal { signo, nomask, .. } => {
                if signo > 0 {
                    dispatch::unwatch(signo, nomask);
                }
                self.signal_slots.retain(|&s| s != slot);
            }
            Source::Inode { wd } => {
                if let Some(list) = self.watches.get_mut(&wd) {
                    list.retain(|&s| s != slot);
                    if list.is_empty() {
                        self.watches.remove(&wd);
                        if let Some(ino) = &self.inotify {
                            sys::inotify_unwatch(ino.as_raw_fd(), wd);
                        }
                    }
                }
            }
            Source::User => {}
        }
    }

    /// **D10**: whether an fd kevent's fd no longer names the file it was registered with
    /// (closed without REMOVE, number reused). epoll is asked directly: its registration is
    /// keyed by (file, fd), so a MOD with the registered events fails once the number names
    /// another file or nothing.
    fn is_stale(&self, slot: u32, ctx: Ctx) -> bool {
        let Some(kev) = self.reg.get(slot) else {
            return false;
        };
        let Source::Fd { fd, file } = &kev.source else {
            return false;
        };
        match sys::file_id(*fd) {
            Ok(now) if now.identity() == *file => {}
            _ => return true,
        }
        let generation = self.reg.generation(slot).unwrap_or(0);
        let events = fd::epoll_events(kev.uk.type_, kev.uk.event, kev.uk.req_flags);
        sys::epoll_ctl(
            ctx.epfd,
            libc::EPOLL_CTL_MOD,
            *fd,
            events,
            token::make(generation, slot),
        )
        .is_err()
    }

    /// **D10**: a stale registration is unregistered at once (so the new file can be added
    /// under the same key) and reported once, as `BROKEN|DONE` with `-EBADF`.
    fn report_stale(&mut self, slot: u32, ctx: Ctx) {
        if let Some(kev) = self.reg.get(slot) {
            let d = rules::deliver(&kev.uk.to_ukevent(), Report::Broken(Errno::EBADF));
            self.orphans.push_back(d.event);
        }
        self.unregister(slot, ctx, true);
    }

    /// REMOVE or MODIFY of one entry, written back in place.
    fn remove_or_modify(&mut self, cmd: u32, e: &mut ukevent, ctx: Ctx) {
        let key: Key = (e.type_, e.id.as_u64());
        let Some(slot) = self.reg.find(key) else {
            rules::failed(e, Errno::ENOENT);
            return;
        };
        e.ret_flags = KEVENT_RET_DONE;
        e.ret_data = [0, 0];
        if cmd == KEVENT_CTL_REMOVE {
            self.unregister(slot, ctx, false);
            return;
        }
        if e.req_flags & !rules::KNOWN_REQ_FLAGS != 0 {
            rules::failed(e, Errno::EINVAL);
            return;
        }
        let generation = self.reg.generation(slot).unwrap_or(0);
        let Some(kev) = self.reg.get_mut(slot) else {
            return;
        };
        kev.uk.event = e.event;
        kev.uk.req_flags = rules::effective_req_flags(e.type_, e.req_flags);
        kev.uk.cookie = e.cookie();
        if let Source::Fd { fd, .. } = kev.source {
            let events = fd::epoll_events(kev.uk.type_, kev.uk.event, kev.uk.req_flags);
            if sys::epoll_ctl(
                ctx.epfd,
                libc::EPOLL_CTL_MOD,
                fd,
                events,
                token::make(generation, slot),
            )
            .is_err()
            {
                // D10: the fd no longer names the registered file.
                self.unregister(slot, ctx, true);
                rules::failed(e, Errno::EBADF);
            }
        }
    }

    /// READY of one named kevent; `false` if it is not registered.
    fn mark(&mut self, e: &ukevent) -> bool {
        let Some(slot) = self.reg.find((e.type_, e.id.as_u64())) else {
            return false;
        };
        if let Some(kev) = self.reg.get_mut(slot) {
            kev.marked = true;
            kev.pending = kev.pending.saturating_add(1);
        }
        self.queue(slot);
        true
    }

    /// Moves queued kevents into the sink, oldest first.
    fn take_ready(&mut self, call: u32, sink: &mut Sink<'_>, ctx: Ctx) {
        if self.ready.is_empty() && self.orphans.is_empty() {
            return;
        }
        while sink.room(self.ring.as_ref()) > 0 {
            let Some(ev) = self.orphans.pop_front() else {
                break;
            };
            sink.put(ev, self.ring.as_mut());
        }
        while sink.room(self.ring.as_ref()) > 0 {
            let Some(tok) = self.ready.pop_front() else {
                break;
            };
            let (generation, slot) = token::split(tok);
            if self.reg.generation(slot) != Some(generation) {
                continue;
            }
            if let Some(kev) = self.reg.get_mut(slot) {
                kev.queued = false;
            }
            self.deliver(slot, None, call, sink, ctx);
        }
    }

    /// Delivers one kevent into the sink, applying the rules. `fresh` is the readiness epoll
    /// reported in this very call (no LAST_CHECK needed). Returns whether it was delivered.
    fn deliver(
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
        let report = match &mut kev.source {
            Source::Fd { fd, .. } => {
                let revents = match fresh {
                    Some(r) => r,
                    None if rules::last_check(uk.req_flags) && !kev.marked => {
                        fd::poll_now(uk.type_, *fd, uk.event)
                    }
                    None => kev.revents,
                };
                match fd::report(uk.type_, *fd, uk.event, revents) {
                    Some(r) => r,
                    None if kev.marked => Report::Ready([0, 0]),
                    None => return false,
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
            self.unregister(slot, ctx, false);
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
    /// kevents. Returns whether a token was not this queue's (the fd may name another epoll).
    fn absorb(
        &mut self,
        got: &[libc::epoll_event],
        call: u32,
        sink: &mut Sink<'_>,
        ctx: Ctx,
        parked: &mut Vec<u32>,
    ) -> bool {
        let mut foreign = false;
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
        }
        foreign
    }

    fn park(&mut self, slot: u32, ctx: Ctx) {
        self.set_epoll_mode(slot, ctx, libc::EPOLLET as u32);
    }

    fn unpark(&mut self, slot: u32, ctx: Ctx) {
        self.set_epoll_mode(slot, ctx, 0);
    }

    fn set_epoll_mode(&mut self, slot: u32, ctx: Ctx, extra: u32) {
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
    fn expire_timers(&mut self) {
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
    fn scan_signals(&mut self) {
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
    fn read_inotify(&mut self) {
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
