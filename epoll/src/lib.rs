//! epoll on kevent.
//!
//! kevent's author showed that epoll can be written on top of kevent (LKML, 2007-01-10):
//! every epoll registration is a `KEVENT_POLL` kevent with `ALWAYS_QUEUE | LAST_CHECK`
//! ([`mapping`]). This crate is that mapping plus what it takes for *unmodified* epoll
//! programs to see epoll's semantics where kevent's differ (decision P24,
//! `docs/decisions.md`):
//!
//! * **ONESHOT.** A delivered epoll `EPOLLONESHOT` registration stays registered, disabled,
//!   until `EPOLL_CTL_MOD` re-arms it (`EPOLL_CTL_ADD` says `EEXIST`, `EPOLL_CTL_DEL`
//!   succeeds); a delivered kevent `ONESHOT` is unregistered (`RET_DONE`) and re-armed by
//!   ADD. [`Epoll`] remembers the ONESHOT registrations that fired and turns their MOD into
//!   ADD, their DEL into nothing, and their ADD into `EEXIST`, as long as the fd still names
//!   the same file.
//! * **Closed fds.** epoll forgets a registration when its file is closed; kevent reports a
//!   closed watched fd once as `RET_BROKEN` with `-EBADF` (**D10**). [`Epoll::wait`] drops
//!   such reports (a POLL kevent reports every other condition as bits, never BROKEN).
//!   `EPOLL_CTL_DEL` of a closed number is `EBADF` and leaves the registration in place (a
//!   file kept open by a duplicate and put back on the number with `dup2` is still
//!   registered: ADD is `EEXIST`, MOD works); `EPOLL_CTL_MOD` of a number that now names a
//!   file the instance does not watch is `ENOENT` (decision P33).
//! * **Errors.** kevent reports per-entry errors in the entry; they become the call's errno.
//!   A file without `->poll` is `EPERM` for epoll and `-EINVAL` for kevent.
//! * **Interrupted waits.** kevent returns 0 events from a wait a signal handler
//!   interrupted; epoll returns `EINTR`, which programs rely on to look at the flags their
//!   handlers set. A wait that returns nothing before its timeout is reported as `EINTR`.
//!
//! [`Epoll`] runs on any [`Backend`], taking events with `kevent_get_events` or through
//! the ring (`kevent_wait`, [`Via`]). `libkevent-epoll.so` (the `kevent-epoll-preload`
//! crate) exports the epoll calls over it; the suite's differential test
//! (`tests/conformance/differential_epoll.rs`) checks it against a real epoll on every backend.
#![allow(unsafe_code)]

pub mod mapping;

use std::os::fd::RawFd;
use std::ptr::NonNull;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use kevent_backend::Backend;
use kevent_backend::hash::FdMap;
use kevent_sys::{
    Errno, KEVENT_CTL_ADD, KEVENT_CTL_MODIFY, KEVENT_CTL_REMOVE, KEVENT_REQ_READY,
    KEVENT_RET_BROKEN, KEVENT_RET_DONE, kevent_ring, ring::RingView, ukevent,
};

/// How an [`Epoll`] takes ready events from its queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Via {
    /// `kevent_get_events` into a buffer (what `libkevent-epoll.so` uses).
    GetEvents,
    /// `kevent_wait` into the queue's ring of this many slots, then `kevent_commit`.
    Ring(u32),
}

/// How an [`Epoll`] maps registrations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options {
    /// Where events are taken.
    pub via: Via,
    /// ADD with `KEVENT_REQ_ALWAYS_QUEUE` (the author's mapping). Without it, an fd ready at
    /// `EPOLL_CTL_ADD` comes back from `kevent_ctl` unregistered, and is added again with
    /// `KEVENT_REQ_READY` (queued as ready; LAST_CHECK re-checks it at delivery) — the other
    /// path into the queue, for the differential test.
    pub always_queue: bool,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            via: Via::GetEvents,
            always_queue: true,
        }
    }
}

/// Most events one wait takes from the queue (the rest stay ready for the next wait). As
/// large as servers ask for: a server that waits for as many events as it has connections
/// (lighttpd asks for `server.max-fds`) would otherwise need several waits where epoll
/// gives it one (a cap of 256 cost lighttpd a fifth of its throughput at 1000 and 8000
/// connections).
pub const MAX_BATCH: usize = 65536;

thread_local! {
    /// Each thread's buffer for the ukevents of one wait (grown to the largest wait).
    static BUF: std::cell::RefCell<Vec<ukevent>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// A fired or armed `EPOLLONESHOT` registration, as epoll keeps it.
#[derive(Clone, Copy, Debug)]
struct OneShot {
    /// Delivered: kevent has unregistered it; epoll holds it disabled.
    fired: bool,
    /// `(st_dev, st_ino)` of the file at ADD: epoll's registration ends with its file.
    file: (u64, u64),
}

/// Caller-owned ring memory of an [`Epoll`] with [`Via::Ring`].
#[derive(Debug)]
struct Ring {
    /// The header and slots, through the one definition of the ring protocol.
    view: RingView,
    words: *mut [u64],
    /// The consumer index (every slot before it is committed).
    uidx: u32,
}

// SAFETY: the ring is plain memory that the queue writes through raw pointers while a call
// on the queue runs; every access from this crate happens under the `Mutex` that holds it.
unsafe impl Send for Ring {}

/// One epoll instance on a kevent queue.
#[derive(Debug)]
pub struct Epoll {
    b: Backend,
    fd: RawFd,
    opts: Options,
    owns_fd: bool,
    oneshots: Mutex<FdMap<OneShot>>,
    /// Whether `oneshots` ever held an entry: until then `ctl` neither locks nor looks it
    /// up (no `EPOLLONESHOT` registration, no entry to find or forget).
    any_oneshot: AtomicBool,
    ring: Option<Mutex<Ring>>,
    dropped: AtomicU64,
}

fn file_of(fd: RawFd) -> Option<(u64, u64, u32)> {
    let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: `st` is valid for writes of one `struct stat`.
    if unsafe { libc::fstat(fd, st.as_mut_ptr()) } != 0 {
        return None;
    }
    // SAFETY: fstat succeeded, so it initialised `st`.
    let st = unsafe { st.assume_init() };
    Some((st.st_dev, st.st_ino, st.st_mode & libc::S_IFMT))
}

/// Whether `fd` is an open descriptor (`fcntl(F_GETFD)`).
fn is_open(fd: RawFd) -> bool {
    // SAFETY: F_GETFD takes no pointer.
    unsafe { libc::fcntl(fd, libc::F_GETFD) >= 0 }
}

fn identity(fd: RawFd) -> Option<(u64, u64)> {
    file_of(fd).map(|(dev, ino, _)| (dev, ino))
}

/// A kevent per-entry result as an errno (`None`: success).
fn entry_error(e: &ukevent) -> Option<Errno> {
    (e.ret_flags & KEVENT_RET_BROKEN != 0)
        .then(|| Errno::from_negated(e.ret_data[1]).unwrap_or(Errno::EIO))
}

impl Epoll {
    /// A new instance: a queue of `b` (with a ring for [`Via::Ring`]), closed on drop.
    ///
    /// # Errors
    ///
    /// What `kevent_init` returns (`EMFILE`, `ENOMEM`, …); `EINVAL` for a ring of fewer than
    /// 2 slots.
    pub fn create(b: Backend, opts: Options) -> Result<Epoll, Errno> {
        let (fd, ring) = match opts.via {
            Via::GetEvents => {
                // SAFETY: a null ring with num 0 registers no memory.
                (
                    unsafe { kevent_backend::init(b, std::ptr::null_mut(), 0, 0) }?,
                    None,
                )
            }
            Via::Ring(n) => {
                let bytes = kevent_sys::ring_bytes(n).ok_or(Errno::EINVAL)?;
                let words = Box::into_raw(vec![0u64; bytes.div_ceil(8)].into_boxed_slice());
                let base = NonNull::new(words.cast::<kevent_ring>()).ok_or(Errno::ENOMEM)?;
                // SAFETY: `base` points to `bytes` zeroed, 8-aligned bytes that stay
                // allocated until `Drop` has closed the queue fd (or for ever, if the fd is
                // handed over with `disown`).
                match unsafe { kevent_backend::init(b, base.as_ptr(), n, 0) } {
                    Ok(fd) => (
                        fd,
                        Some(Mutex::new(Ring {
                            // SAFETY: `base` is the ring just registered: `ring_bytes(n)`
                            // bytes, 8-aligned, alive as long as the instance; its header
                            // is only accessed atomically (through the view) or by the
                            // queue.
                            view: unsafe { RingView::new(base, n) },
                            words,
                            uidx: 0,
                        })),
                    ),
                    Err(e) => {
                        // SAFETY: `words` came from `Box::into_raw` above; the queue was not
                        // created, so nothing refers to it.
                        drop(unsafe { Box::from_raw(words) });
                        return Err(e);
                    }
                }
            }
        };
        Ok(Epoll {
            b,
            fd,
            opts,
            owns_fd: true,
            oneshots: Mutex::new(FdMap::default()),
            any_oneshot: AtomicBool::new(false),
            ring,
            dropped: AtomicU64::new(0),
        })
    }

    /// The queue fd (the program's epoll fd).
    pub fn fd(&self) -> RawFd {
        self.fd
    }

    /// The backend serving the queue.
    pub fn backend(&self) -> Backend {
        self.b
    }

    /// Hands the queue fd over to the caller: dropping the instance no longer closes it (the
    /// program closes its epoll fd itself). A ring is then never freed.
    pub fn disown(&mut self) {
        self.owns_fd = false;
    }

    /// How many `RET_BROKEN` reports [`Epoll::wait`] dropped (closed watched fds, **D10**).
    pub fn dropped_broken(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    fn oneshots(&self) -> std::sync::MutexGuard<'_, FdMap<OneShot>> {
        self.oneshots.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// fd's ONESHOT entry, if any (no lock while there never was one).
    fn oneshot_of(&self, fd: RawFd) -> Option<OneShot> {
        if !self.any_oneshot.load(Ordering::Acquire) {
            return None;
        }
        self.oneshots().get(&fd).copied()
    }

    /// Forgets fd's ONESHOT entry and returns it (no lock while there never was one).
    fn forget_oneshot(&self, fd: RawFd) -> Option<OneShot> {
        if !self.any_oneshot.load(Ordering::Acquire) {
            return None;
        }
        self.oneshots().remove(&fd)
    }

    fn ctl1(&self, cmd: u32, e: &mut ukevent) -> Result<u32, Errno> {
        self.b.ctl(self.fd, cmd, std::slice::from_mut(e))
    }

    /// epoll's errno for a kevent per-entry error of `fd`.
    fn epoll_errno(fd: RawFd, e: Errno) -> Errno {
        if e == Errno::EINVAL
            && file_of(fd).is_some_and(|(_, _, k)| k == libc::S_IFREG || k == libc::S_IFDIR)
        {
            // No ->poll: epoll_ctl says EPERM.
            Errno::EPERM
        } else {
            e
        }
    }

    fn add(&self, fd: RawFd, events: u32, data: u64) -> Result<(), Errno> {
        let mut e = mapping::to_ukevent(fd, events, data, self.opts.always_queue);
        if self.ctl1(KEVENT_CTL_ADD, &mut e)? == 0 {
            return Ok(());
        }
        if let Some(err) = entry_error(&e) {
            return Err(Self::epoll_errno(fd, err));
        }
        // Ready at once, returned, not registered (no ALWAYS_QUEUE): register it queued as
        // ready, so the next wait reports it as epoll's would.
        let mut again = mapping::to_ukevent(fd, events, data, self.opts.always_queue);
        again.req_flags |= KEVENT_REQ_READY;
        if self.ctl1(KEVENT_CTL_ADD, &mut again)? == 0 {
            return Ok(());
        }
        Err(entry_error(&again).map_or(Errno::EIO, |err| Self::epoll_errno(fd, err)))
    }

    fn in_place(&self, cmd: u32, e: &mut ukevent) -> Result<(), Errno> {
        self.ctl1(cmd, e)?;
        entry_error(e).map_or(Ok(()), Err)
    }

    /// `epoll_ctl(op, fd, event)`. `event` may be `None` for `EPOLL_CTL_DEL`.
    ///
    /// # Errors
    ///
    /// epoll's: `EBADF`, `EEXIST`, `ENOENT`, `EINVAL` (also for `fd` being the instance
    /// itself, an unknown `op`, `EPOLLEXCLUSIVE` in a MOD), `EPERM` (no poll support),
    /// `EFAULT` (`event` missing for ADD or MOD), `ENOMEM`.
    pub fn ctl(&self, op: i32, fd: RawFd, event: Option<libc::epoll_event>) -> Result<(), Errno> {
        if fd == self.fd {
            return Err(Errno::EINVAL);
        }
        match op {
            libc::EPOLL_CTL_ADD | libc::EPOLL_CTL_MOD => {
                let ev = event.ok_or(Errno::EFAULT)?;
                let (events, data) = (ev.events, ev.u64);
                let oneshot = events & mapping::EPOLLONESHOT != 0;
                let prior = self.oneshot_of(fd);
                let same_file = |o: &OneShot| identity(fd) == Some(o.file);
                if op == libc::EPOLL_CTL_ADD {
                    if prior.is_some_and(|o| o.fired && same_file(&o)) {
                        // epoll still holds it, disabled.
                        return Err(Errno::EEXIST);
                    }
                    self.add(fd, events, data)?;
                } else {
                    if events & mapping::EPOLLEXCLUSIVE != 0 {
                        return Err(Errno::EINVAL);
                    }
                    match prior {
                        // epoll re-arms a fired ONESHOT with MOD; kevent with ADD.
                        Some(o) if o.fired && same_file(&o) => self.add(fd, events, data)?,
                        Some(o) if o.fired => {
                            self.forget_oneshot(fd);
                            return Err(Errno::ENOENT);
                        }
                        _ => {
                            let mut e =
                                mapping::to_ukevent(fd, events, data, self.opts.always_queue);
                            match self.in_place(KEVENT_CTL_MODIFY, &mut e) {
                                Ok(()) => {}
                                // D10: the number no longer names the registered file (the
                                // kevent is gone with it). epoll: EBADF for a closed number;
                                // ENOENT for a number reused by a file it does not watch
                                // (libevent then retries with EPOLL_CTL_ADD).
                                Err(Errno::EBADF) if is_open(fd) => return Err(Errno::ENOENT),
                                // Fired while we were not looking (a wait in another thread
                                // has not recorded it yet): re-arm it.
                                Err(Errno::ENOENT) if prior.is_some_and(|o| same_file(&o)) => {
                                    self.add(fd, events, data)?
                                }
                                Err(e) => return Err(e),
                            }
                        }
                    }
                }
                if oneshot {
                    let file = identity(fd).unwrap_or_default();
                    let mut os = self.oneshots();
                    os.insert(fd, OneShot { fired: false, file });
                    self.any_oneshot.store(true, Ordering::Release);
                } else {
                    self.forget_oneshot(fd);
                }
                Ok(())
            }
            libc::EPOLL_CTL_DEL => {
                if !is_open(fd) {
                    // epoll: EBADF, and the item stays for as long as the file is open (a
                    // dup2 of it back onto the number finds it: ADD is EEXIST, MOD works).
                    // The kevent stays too: D10 reports or replaces it later.
                    return Err(Errno::EBADF);
                }
                let prior = self.forget_oneshot(fd);
                let same_file = prior.is_some_and(|o| identity(fd) == Some(o.file));
                if prior.is_some_and(|o| o.fired) {
                    return if same_file {
                        Ok(())
                    } else {
                        Err(Errno::ENOENT)
                    };
                }
                match self.in_place(KEVENT_CTL_REMOVE, &mut mapping::key(fd)) {
                    Err(Errno::ENOENT) if same_file => Ok(()),
                    r => r,
                }
            }
            _ => Err(Errno::EINVAL),
        }
    }

    /// `epoll_wait(out, timeout)`: `None` waits without limit. Returns how many events it
    /// wrote to the start of `out`.
    ///
    /// # Errors
    ///
    /// `EINVAL` for an empty `out`; `EINTR` when the wait returned nothing before its timeout
    /// (a signal handler ran); the queue's `EBADF`/`EINVAL`.
    pub fn wait(
        &self,
        out: &mut [libc::epoll_event],
        timeout: Option<Duration>,
    ) -> Result<usize, Errno> {
        if out.is_empty() {
            return Err(Errno::EINVAL);
        }
        let max = out.len().min(MAX_BATCH);
        BUF.with(|b| match b.try_borrow_mut() {
            Ok(mut buf) => {
                if buf.len() < max {
                    buf.resize(max, ukevent::default());
                }
                self.wait_into(out, &mut buf[..max], timeout)
            }
            // A wait from a signal handler that interrupted a wait of this thread.
            Err(_) => self.wait_into(out, &mut vec![ukevent::default(); max], timeout),
        })
    }

    /// The wait: the clock is read once, at the start, and only for a positive timeout
    /// (the first call gets the caller's timeout as it is); it is needed only when a call
    /// returns nothing to report (a timeout, or `EINTR` before it) or the time left for
    /// another call.
    fn wait_into(
        &self,
        out: &mut [libc::epoll_event],
        buf: &mut [ukevent],
        timeout: Option<Duration>,
    ) -> Result<usize, Errno> {
        let start = timeout.filter(|t| !t.is_zero()).map(|_| Instant::now());
        let elapsed = || start.map_or(Duration::MAX, |s| s.elapsed());
        let mut left = timeout;
        loop {
            // D6: no limit is a very large relative timeout.
            let ts = left.map_or(kevent_sys::FOREVER, timespec);
            let got = self.take(buf, &ts)?;
            if got.is_empty() {
                return match timeout {
                    Some(t) if elapsed() >= t => Ok(0),
                    _ => Err(Errno::EINTR),
                };
            }
            let n = self.deliver(got, out);
            if n > 0 {
                return Ok(n);
            }
            if let Some(t) = timeout {
                let e = elapsed();
                if e >= t {
                    return Ok(0);
                }
                left = Some(t - e);
            }
        }
    }

    /// Writes the epoll events that the kevents `got` stand for to the start of `out` (at
    /// least as long as `got`) and returns how many.
    ///
    /// The run of ordinary reports (neither BROKEN nor DONE: all of them in a steady state)
    /// is mapped one to one with one test per event, without the index checks a gap would
    /// need; the rest of the batch from its first BROKEN or DONE report goes through the
    /// general loop. This is the shim's only per-event work (issue 21: 18.1 of the 21.8 user
    /// instructions per response the shim added to lighttpd at c = 100, brief hshim2).
    fn deliver(&self, got: &[ukevent], out: &mut [libc::epoll_event]) -> usize {
        const SPECIAL: u32 = KEVENT_RET_BROKEN | KEVENT_RET_DONE;
        let mut n = 0;
        // Four at a time: one test covers the four reports' flags.
        const LANES: usize = 4;
        for (o, e) in out.chunks_exact_mut(LANES).zip(got.chunks_exact(LANES)) {
            if e.iter().fold(0, |f, e| f | e.ret_flags) & SPECIAL != 0 {
                break;
            }
            for (o, e) in o.iter_mut().zip(e) {
                *o = mapping::to_epoll_event(e);
            }
            n += LANES;
        }
        // The batch's last few reports, or the ordinary ones of the four that stopped it.
        for (o, e) in out[n..].iter_mut().zip(&got[n..]) {
            if e.ret_flags & SPECIAL != 0 {
                break;
            }
            *o = mapping::to_epoll_event(e);
            n += 1;
        }
        for e in &got[n..] {
            if e.ret_flags & KEVENT_RET_BROKEN != 0 {
                // D10: the fd was closed without EPOLL_CTL_DEL; epoll forgot it.
                self.dropped.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            // A delivery that unregistered the kevent (decision P5): a ONESHOT fired.
            if e.ret_flags & KEVENT_RET_DONE != 0 {
                let fd = e.id.raw()[0] as RawFd;
                if let Some(o) = self.oneshots().get_mut(&fd) {
                    o.fired = true;
                }
            }
            out[n] = mapping::to_epoll_event(e);
            n += 1;
        }
        n
    }

    /// One wait on the queue into `buf`; returns the events taken.
    fn take<'a>(
        &self,
        buf: &'a mut [ukevent],
        timeout: &libc::timespec,
    ) -> Result<&'a [ukevent], Errno> {
        let Some(ring) = &self.ring else {
            let n = self.b.get_events(self.fd, 1, buf, timeout, 0)? as usize;
            return Ok(&buf[..n]);
        };
        let mut r = ring.lock().unwrap_or_else(|p| p.into_inner());
        let (view, n) = (r.view, r.view.size());
        let k0 = view.kidx();
        let over_before = view.over();
        let num = (buf.len() as u32).min(n - 1);
        let got = self.b.wait(self.fd, num, r.uidx, timeout, 0)?;
        if view.kidx() != (k0 + got) % n || got > num {
            return Err(Errno::EIO);
        }
        for (i, slot) in buf.iter_mut().take(got as usize).enumerate() {
            // SAFETY: the slot lies between the consumer index and the `ring_kidx` just
            // loaded, so the queue does not write it until it is committed.
            *slot = unsafe { view.read(k0 + i as u32) };
        }
        if got > 0 {
            let new_uidx = (r.uidx + got) % n;
            let released = self.b.commit(self.fd, new_uidx, over_before)?;
            if released != got {
                return Err(Errno::EIO);
            }
            r.uidx = new_uidx;
        }
        Ok(&buf[..got as usize])
    }
}

impl Drop for Epoll {
    fn drop(&mut self) {
        if !self.owns_fd {
            return;
        }
        // The fd first: the queue may write the ring until it is closed.
        // SAFETY: the instance owns its queue fd (`owns_fd`), closed once, here.
        unsafe { libc::close(self.fd) };
        if let Some(r) = self.ring.take() {
            let r = r.into_inner().unwrap_or_else(|p| p.into_inner());
            // SAFETY: `words` came from `Box::into_raw` in `create` and is freed once, after
            // the queue fd was closed.
            drop(unsafe { Box::from_raw(r.words) });
        }
    }
}

fn timespec(d: Duration) -> libc::timespec {
    libc::timespec {
        tv_sec: d.as_secs().min(kevent_sys::FOREVER_SECS as u64) as libc::time_t,
        tv_nsec: d.subsec_nanos() as libc::c_long,
    }
}

/// An epoll timeout in milliseconds (`epoll_wait`'s): negative waits without limit.
pub fn timeout_ms(ms: i32) -> Option<Duration> {
    (ms >= 0).then(|| Duration::from_millis(ms as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(fd: u32, revents: u32, ret_flags: u32) -> ukevent {
        let mut e =
            mapping::to_ukevent(fd as RawFd, libc::EPOLLIN as u32, u64::from(fd) << 8, true);
        e.ret_data = [revents, 0];
        e.ret_flags = ret_flags;
        e
    }

    /// Every batch length around the four-at-a-time path, with and without a BROKEN and a
    /// DONE report at every position: the same events, in order, as one report at a time.
    #[test]
    fn delivery_maps_every_report_in_order_and_drops_broken_ones() {
        let ep = Epoll::create(Backend::Fallback, Options::default()).expect("a queue");
        let mut fired = 0;
        for len in 0..11u32 {
            for special in [None, Some(KEVENT_RET_BROKEN), Some(KEVENT_RET_DONE)] {
                for at in 0..len.max(1) {
                    let got: Vec<ukevent> = (0..len)
                        .map(|i| {
                            let flags = if Some(i) == Some(at) {
                                special.unwrap_or(0)
                            } else {
                                0
                            };
                            report(100 + i, i + 1, flags)
                        })
                        .collect();
                    if special == Some(KEVENT_RET_DONE) && at < len {
                        // A ONESHOT registration of that fd, armed: the delivery fires it.
                        let file = (0, 0);
                        ep.oneshots()
                            .insert(100 + at as RawFd, OneShot { fired: false, file });
                    }
                    let dropped = ep.dropped_broken();
                    let mut out = vec![libc::epoll_event { events: 0, u64: 0 }; len as usize];
                    let n = ep.deliver(&got, &mut out);
                    let want: Vec<(u32, u64)> = got
                        .iter()
                        .filter(|e| e.ret_flags & KEVENT_RET_BROKEN == 0)
                        .map(|e| (e.ret_data[0], e.cookie()))
                        .collect();
                    let seen: Vec<(u32, u64)> =
                        out[..n].iter().map(|e| (e.events, e.u64)).collect();
                    assert_eq!(seen, want, "len {len}, {special:?} at {at}");
                    let broken = special == Some(KEVENT_RET_BROKEN) && at < len;
                    assert_eq!(ep.dropped_broken() - dropped, u64::from(broken));
                    if special == Some(KEVENT_RET_DONE) && at < len {
                        let os = ep.oneshots().remove(&(100 + at as RawFd));
                        assert!(os.is_some_and(|o| o.fired), "len {len}, DONE at {at}");
                        fired += 1;
                    }
                }
            }
        }
        assert!(fired > 0);
    }
}
