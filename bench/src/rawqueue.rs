//! A kevent queue at the ABI level for the benchmarks: a [`Backend`] arm, the queue fd,
//! and (optionally) the ring memory with a single-threaded ring consumer.
//!
//! The benchmarks measure the raw calls (`get_events`, `wait` + `commit`), so they drive the
//! backend dispatch directly rather than the safe API's wrappers ([`Via::Rust`]), or the C
//! library's exported functions, `kevent_init` … `kevent_commit` of `libkevent`, on the
//! process's backend ([`Via::C`]: what a C program gets, `-1`/`errno` and the C layer's
//! copies of caller memory included).
//!
//! An **asynchronous** ring (P38, [`RawQueue::new_async`]) is consumed with no call while it
//! has events ([`RawQueue::consume_async`]: read up to `ring_kidx`, store `ring_uidx`), and
//! [`RawQueue::wait_async`] is called only when the consumer found it empty.
//!
//! # Safety
//!
//! The ring memory is a heap block (an asynchronous ring: an anonymous mapping, since
//! natively the kernel pins its pages until the queue file is released) owned by the
//! [`RawQueue`]; it is registered with
//! `kevent_init` and freed only after the queue fd is closed (field order: `fd` drops before
//! `ring`). The engine (the kernel, or the fallback's producer) writes entries and
//! `ring_kidx`/`ring_over` there; this module only reads that memory through its
//! [`RingView`] (the one ring definition, `kevent_sys::ring`: atomics for the header, raw slot
//! pointers), never through Rust references, so the engine's writes never alias a `&`/`&mut`.
#![allow(unsafe_code)]

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use kevent_backend::Backend;
use kevent_sys::ring::{self, RingView};
use kevent_sys::{Errno, ukevent};

/// A timeout that means "until an event" (the ABI has no infinite value, D6).
pub use kevent_sys::FOREVER;

/// A relative timeout of `ms` milliseconds.
pub fn timeout_ms(ms: u64) -> libc::timespec {
    libc::timespec {
        tv_sec: (ms / 1000) as libc::time_t,
        tv_nsec: ((ms % 1000) * 1_000_000) as libc::c_long,
    }
}

/// The ring memory: `8 + n * 40` bytes, 8-aligned (a `u64` block), or an asynchronous ring
/// with its tail in an anonymous mapping.
#[derive(Debug)]
struct RingMem {
    view: RingView,
    mem: Mem,
}

#[derive(Debug)]
enum Mem {
    Heap(*mut [u64]),
    /// Kept for its drop (which unmaps it).
    Mapped {
        _map: kevent_sys::mem::AnonMap,
    },
}

impl Drop for RingMem {
    fn drop(&mut self) {
        match self.mem {
            // SAFETY: `words` came from `Box::into_raw` in `RawQueue::with_via` and is freed
            // once, after the queue fd (the only writer) was closed.
            Mem::Heap(words) => drop(unsafe { Box::from_raw(words) }),
            // Unmapped by its own drop, after the queue fd was closed (the benchmark makes no
            // duplicate of it).
            Mem::Mapped { .. } => {}
        }
    }
}

/// Hands the slots `from..kidx` of `v` to `f`; returns how many.
///
/// The caller guarantees that those slots are published (below a `ring_kidx` loaded with
/// Acquire) and not written while they are read (not yet released).
fn read_slots(v: RingView, from: u32, kidx: u32, f: &mut impl FnMut(&ukevent)) -> u32 {
    let mut i = from;
    let mut count = 0;
    while i != kidx {
        // SAFETY: the slot is published and unreleased (the caller's guarantee).
        let ev = unsafe { v.read(i) };
        f(&ev);
        i = ring::advance(v.size(), i, 1);
        count += 1;
    }
    count
}

/// Which entry points a [`RawQueue`]'s calls go through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Via {
    /// The dispatch's Rust entry points ([`Backend`]'s methods: slices, no copies).
    Rust,
    /// The C library's exported functions (`kevent_get_events`, …), on the process's backend.
    C,
}

/// Turns a C call's `-1`/`errno` into a `Result`.
fn c_result(r: libc::c_int) -> Result<u32, Errno> {
    u32::try_from(r).map_err(|_| Errno::last())
}

/// A queue on one backend, closed on drop.
#[derive(Debug)]
pub struct RawQueue {
    /// The backend arm serving the queue.
    pub backend: Backend,
    /// Rust dispatch or C functions.
    via: Via,
    // Drop order matters: the declaration of P65 ends before the fd is closed, and the fd
    // is closed before the ring memory is freed.
    owner: Option<kevent_backend::QueueOwner>,
    fd: OwnedFd,
    ring: Option<RingMem>,
    /// Consumer index: one past the last entry committed (what `kevent_wait` is given).
    uidx: u32,
    /// One past the last entry read (ahead of `uidx` while commits are deferred).
    read: u32,
    /// Commit once this many read entries are uncommitted (1: after every read).
    commit_every: u32,
    /// `kevent_commit` calls made.
    pub commits: u64,
}

impl RawQueue {
    /// A new queue on `backend`, with a ring of `ring_len` entries (0: no ring), driven
    /// through the Rust dispatch.
    pub fn new(backend: Backend, ring_len: u32) -> Result<RawQueue, Errno> {
        RawQueue::with_via(backend, Via::Rust, ring_len)
    }

    /// A new queue driven through the C library's exported functions, on the process's
    /// backend (`None` when the process has none), with a ring of `ring_len` entries.
    pub fn new_c(ring_len: u32) -> Option<Result<RawQueue, Errno>> {
        let backend = Backend::current().ok()?;
        Some(RawQueue::with_via(backend, Via::C, ring_len))
    }

    fn with_via(backend: Backend, via: Via, ring_len: u32) -> Result<RawQueue, Errno> {
        let ring = if ring_len == 0 {
            None
        } else {
            let bytes = kevent_sys::ring_bytes(ring_len).ok_or(Errno::EINVAL)?;
            let mut words = vec![0u64; bytes.div_ceil(8)].into_boxed_slice();
            // Touched now (a calloc of fresh memory leaves its pages unmapped), so that the
            // ring's first lap inside a timed block takes no page fault.
            for w in words.iter_mut().step_by(512) {
                // SAFETY: a valid, aligned element of the slice; volatile so the store of the
                // zero it already holds is made.
                unsafe { std::ptr::from_mut(w).write_volatile(0) };
            }
            let words = Box::into_raw(words);
            let base = std::ptr::NonNull::new(words.cast()).ok_or(Errno::ENOMEM)?;
            Some(RingMem {
                // SAFETY: `words` holds `ring_bytes(ring_len)` zeroed, 8-aligned bytes that
                // live until `RingMem` drops, after the queue fd is closed; nothing else
                // references them.
                view: unsafe { RingView::new(base, ring_len) },
                mem: Mem::Heap(words),
            })
        };
        let ptr = ring
            .as_ref()
            .map_or(std::ptr::null_mut(), |r| r.view.base().as_ptr());
        // `ptr` is null with `ring_len == 0`, or points to `8 + ring_len * 40` zeroed,
        // 8-aligned bytes that this RawQueue keeps alive (and never references) until after the
        // fd is closed; the fd is ours to own.
        let fd = match via {
            // SAFETY: the ring contract of `init` holds for `ptr` (above).
            Via::Rust => unsafe { kevent_backend::init(backend, ptr, ring_len, 0) }?,
            Via::C => {
                // SAFETY: as above; the C contract of kevent_init is the same.
                let r = unsafe { kevent_c::capi::calls::kevent_init(ptr, ring_len, 0) };
                c_result(r)? as RawFd
            }
        };
        Ok(RawQueue {
            backend,
            via,
            owner: None,
            // SAFETY: `init` just returned this fd and nothing else owns it.
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
            ring,
            uidx: 0,
            read: 0,
            commit_every: 1,
            commits: 0,
        })
    }

    /// A new queue with an asynchronous ring of `ring_len` entries (P38) on `backend`,
    /// through the Rust dispatch. `EINVAL` from a kevent kernel without P38.
    pub fn new_async(backend: Backend, ring_len: u32) -> Result<RawQueue, Errno> {
        let len = ring::async_ring_bytes(ring_len).ok_or(Errno::EINVAL)?;
        let map = kevent_sys::mem::AnonMap::new(len)?;
        // The mapping's pages are touched now, not by the first lap of the ring inside a
        // timed block: a kevent kernel pins them at `kevent_init` (P38), and the fallback
        // would otherwise take a page fault per page in the poller's first block of rounds.
        for off in (0..map.len()).step_by(4096) {
            // SAFETY: `off < len`: inside the fresh, writable mapping, which nothing else
            // references yet; it holds zeroes, and a zero is stored.
            unsafe { map.base().as_ptr().add(off).write_volatile(0) };
        }
        let base = map.base().cast::<kevent_sys::kevent_ring>();
        let ring = RingMem {
            // SAFETY: `async_ring_bytes(ring_len)` zeroed, page-aligned bytes that live until
            // `RingMem` drops, after the queue fd is closed; nothing else references them.
            view: unsafe { RingView::new_async(base, ring_len) },
            mem: Mem::Mapped { _map: map },
        };
        // SAFETY: the ring contract of `init` holds for the mapping (above).
        let fd = unsafe {
            kevent_backend::init(
                backend,
                base.as_ptr(),
                ring_len,
                kevent_sys::KEVENT_INIT_ASYNC_RING,
            )
        }?;
        Ok(RawQueue {
            backend,
            via: Via::Rust,
            owner: None,
            // SAFETY: `init` just returned this fd and nothing else owns it.
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
            ring: Some(ring),
            uidx: 0,
            read: 0,
            commit_every: 1,
            commits: 0,
        })
    }

    /// The asynchronous ring's consumer (P38): reads every entry published since the last
    /// call, hands each to `f`, and releases them by storing `ring_uidx` (Release). No system
    /// call. Returns how many entries were read.
    pub fn consume_async(&mut self, mut f: impl FnMut(&ukevent)) -> u32 {
        let Some(ring) = &self.ring else {
            return 0;
        };
        let v = ring.view;
        let n = v.size();
        let kidx = v.kidx();
        if kidx >= n {
            return 0;
        }
        // Slots between our index and the `ring_kidx` loaded with Acquire are published and
        // not written again before we store `ring_uidx` past them (P38).
        let count = read_slots(v, self.read, kidx, &mut f);
        if count > 0 {
            self.read = kidx;
            self.uidx = kidx;
            let _ = v.store_uidx(kidx);
        }
        count
    }

    /// `kevent_wait(n - 1, old_uidx = the consumer's index, timeout, 0)` on an asynchronous
    /// ring: returns at once if events arrived since the consumer found the ring empty.
    pub fn wait_async(&self, timeout: &libc::timespec) -> Result<u32, Errno> {
        self.backend.wait(
            self.fd(),
            self.ring_len().saturating_sub(1),
            self.read,
            timeout,
            0,
        )
    }

    /// Declares that this queue owns its fd and sees every close of it (decision P65): on
    /// the fallback its calls then skip the proof that the number still names the queue
    /// (the commit's only system call). Only for the Rust dispatch: the C library has no
    /// such entry point (P65). Until the queue drops, as `kevent::Queue` does.
    ///
    /// # Errors
    ///
    /// `EINVAL` for a queue driven through the C functions; the engine's errors.
    pub fn declare_owner(&mut self) -> Result<(), Errno> {
        if self.via != Via::Rust {
            return Err(Errno::EINVAL);
        }
        if self.owner.is_none() {
            // SAFETY: this value owns the fd (closed only by its drop, after `owner`, field
            // order) and the ring (freed after both); nothing here closes or replaces the
            // number meanwhile.
            self.owner = Some(unsafe { kevent_backend::owns_queue(self.backend, self.fd()) }?);
        }
        Ok(())
    }

    /// Defers commits until `k` read entries are uncommitted (at most the ring's usable
    /// `n - 1` slots, D12; 1 commits after every read). A ring consumer may batch its commits:
    /// `kevent_wait` keeps filling the free slots meanwhile.
    pub fn set_commit_every(&mut self, k: u32) {
        self.commit_every = k.clamp(1, self.ring_len().saturating_sub(1).max(1));
    }

    /// The queue fd.
    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// `kevent_ctl(cmd, events)`.
    pub fn ctl(&self, cmd: u32, events: &mut [ukevent]) -> Result<u32, Errno> {
        match self.via {
            Via::Rust => self.backend.ctl(self.fd(), cmd, events),
            Via::C => {
                let num = u32::try_from(events.len()).map_err(|_| Errno::EINVAL)?;
                // SAFETY: `events` is valid for reads and writes of `num` entries for the call.
                c_result(unsafe {
                    kevent_c::capi::calls::kevent_ctl(self.fd(), cmd, num, events.as_mut_ptr())
                })
            }
        }
    }

    /// `kevent_get_events(min_nr, buf, timeout, 0)`.
    pub fn get_events(
        &self,
        min_nr: u32,
        buf: &mut [ukevent],
        timeout: &libc::timespec,
    ) -> Result<u32, Errno> {
        match self.via {
            Via::Rust => self.backend.get_events(self.fd(), min_nr, buf, timeout, 0),
            Via::C => {
                let max = u32::try_from(buf.len()).map_err(|_| Errno::EINVAL)?;
                // SAFETY: `buf` is valid for writes of `max` entries for the call; the ring is
                // covered by kevent_init's contract (see the module docs).
                c_result(unsafe {
                    kevent_c::capi::calls::kevent_get_events(
                        self.fd(),
                        min_nr,
                        max,
                        *timeout,
                        buf.as_mut_ptr(),
                        0,
                    )
                })
            }
        }
    }

    /// The ring size (0 without a ring).
    pub fn ring_len(&self) -> u32 {
        self.ring.as_ref().map_or(0, |r| r.view.size())
    }

    /// `kevent_wait(num, uidx, timeout, 0)` with this consumer's index.
    pub fn wait(&self, num: u32, timeout: &libc::timespec) -> Result<u32, Errno> {
        match self.via {
            Via::Rust => self.backend.wait(self.fd(), num, self.uidx, timeout, 0),
            // SAFETY: integers and a timespec by value; the ring is covered by kevent_init's
            // contract.
            Via::C => c_result(unsafe {
                kevent_c::capi::calls::kevent_wait(self.fd(), num, self.uidx, *timeout, 0)
            }),
        }
    }

    /// `kevent_commit(new_uidx, over)`.
    fn commit(&self, new_uidx: u32, over: u32) -> Result<u32, Errno> {
        match self.via {
            Via::Rust => self.backend.commit(self.fd(), new_uidx, over),
            Via::C => {
                // SAFETY: integers only; the ring is covered by kevent_init's contract.
                let r = unsafe { kevent_c::capi::calls::kevent_commit(self.fd(), new_uidx, over) };
                c_result(r)
            }
        }
    }

    /// Reads every entry published in the ring since the last call, hands each to `f`, then
    /// commits (`kevent_commit`) once at least `commit_every` entries are uncommitted.
    /// Returns how many entries were read.
    pub fn consume(&mut self, mut f: impl FnMut(&ukevent)) -> Result<u32, Errno> {
        let Some(ring) = &self.ring else {
            return Err(Errno::EINVAL);
        };
        let v = ring.view;
        let n = v.size();
        // `ring_over` as the engine last wrote it (in a commit), before consuming (D13).
        let over = v.over();
        // Acquire pairs with the engine's Release store of `ring_kidx`, made after it wrote
        // the entries: every entry before `kidx` is fully written when we read it.
        let kidx = v.kidx();
        // Slots between uidx (<= read) and kidx are not written again before we commit them
        // (D12), and the Acquire load above ordered their contents before these reads.
        let count = read_slots(v, self.read, kidx, &mut f);
        self.read = kidx;
        let uncommitted = ring::occupancy(n, kidx, self.uidx);
        if uncommitted > 0 && uncommitted >= self.commit_every {
            // A single consumer commits exactly what it read, with the ring_over it read
            // before reading (D13): every slot up to kidx is released.
            self.commit(kidx, over)?;
            self.commits += 1;
            self.uidx = kidx;
        }
        Ok(count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kevent_sys::{KEVENT_CTL_ADD, KEVENT_CTL_READY, KEVENT_UNOTIFY, kevent_id};

    /// UNOTIFY kevents 0, 1 and 2.
    fn three_users() -> Vec<ukevent> {
        (0..3)
            .map(|i| ukevent::new(KEVENT_UNOTIFY, kevent_id::from_u64(i), 0, 0))
            .collect()
    }

    #[test]
    fn ring_round_trip_on_the_fallback() {
        let mut q = RawQueue::new(Backend::fallback(), 4).unwrap();
        let mut evs = three_users();
        assert_eq!(q.ctl(KEVENT_CTL_ADD, &mut evs), Ok(0));
        let mut seen = vec![];
        // Several passes so that the ring wraps (3 usable slots of 4, D12).
        for _ in 0..3 {
            assert_eq!(q.ctl(KEVENT_CTL_READY, &mut evs), Ok(3));
            assert_eq!(q.wait(3, &FOREVER), Ok(3));
            assert_eq!(q.consume(|e| seen.push(e.id.as_u64())), Ok(3));
            assert_eq!(q.consume(|_| ()), Ok(0));
        }
        seen.sort_unstable();
        assert_eq!(seen, [0, 0, 0, 1, 1, 1, 2, 2, 2]);
        assert_eq!(q.ring_len(), 4);
    }

    /// The C path: the same queue, through libkevent's exported functions.
    #[test]
    fn ring_round_trip_through_the_c_functions() {
        let Some(q) = RawQueue::new_c(4) else {
            return;
        };
        let mut q = q.unwrap();
        let mut evs = three_users();
        assert_eq!(q.ctl(KEVENT_CTL_ADD, &mut evs), Ok(0));
        for _ in 0..3 {
            assert_eq!(q.ctl(KEVENT_CTL_READY, &mut evs), Ok(3));
            assert_eq!(q.wait(3, &FOREVER), Ok(3));
            assert_eq!(q.consume(|_| ()), Ok(3));
        }
        let mut buf = [ukevent::default(); 4];
        assert_eq!(q.ctl(KEVENT_CTL_READY, &mut evs), Ok(3));
        assert_eq!(q.get_events(3, &mut buf, &FOREVER), Ok(3));
        assert_eq!(q.commits, 3);
    }

    #[test]
    fn async_ring_is_read_with_no_call() {
        let mut q = RawQueue::new_async(Backend::fallback(), 4).unwrap();
        let mut evs = three_users();
        assert_eq!(q.ctl(KEVENT_CTL_ADD, &mut evs), Ok(0));
        let mut seen = vec![];
        for _ in 0..3 {
            assert_eq!(q.ctl(KEVENT_CTL_READY, &mut evs), Ok(3));
            assert_eq!(q.consume_async(|e| seen.push(e.id.as_u64())), 3);
            assert_eq!(q.consume_async(|_| ()), 0);
            assert_eq!(q.wait_async(&timeout_ms(1)), Ok(0));
        }
        seen.sort_unstable();
        assert_eq!(seen, [0, 0, 0, 1, 1, 1, 2, 2, 2]);
        assert_eq!(q.commits, 0);
    }

    #[test]
    fn deferred_commits_keep_the_ring_flowing() {
        let mut q = RawQueue::new(Backend::fallback(), 16).unwrap();
        q.set_commit_every(8);
        let mut evs = three_users();
        assert_eq!(q.ctl(KEVENT_CTL_ADD, &mut evs), Ok(0));
        let mut seen = 0;
        for round in 0..40 {
            assert_eq!(q.ctl(KEVENT_CTL_READY, &mut evs), Ok(3));
            // The wait is given the last *committed* index, and fills the free slots.
            assert_eq!(q.wait(15, &FOREVER), Ok(3), "round {round}");
            seen += q.consume(|_| ()).unwrap();
            assert!((q.read + 16 - q.uidx) % 16 < 8);
        }
        assert_eq!(seen, 120);
    }
}
