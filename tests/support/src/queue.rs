//! A queue under test: [`Queue`], one backend's queue with its ring memory.

use std::os::fd::RawFd;
use std::ptr::NonNull;
use std::time::{Duration, Instant};

use crate::*;

/// Caller-owned ring memory (`8 + n * 40` bytes, 8-aligned), freed only after the queue fd
/// is closed.
struct RingMem {
    view: RingView,
    mem: Mem,
}

/// Where the ring lives.
enum Mem {
    /// A heap allocation (an ordinary ring).
    Heap(*mut [u64]),
    /// An anonymous mapping (an asynchronous ring, P38: natively its pages are pinned until
    /// the queue file is released, so they never go back to the heap allocator).
    Mapped(mem::AnonMap),
}

/// Why a backend cannot make an asynchronous ring (P38), or `None` when it can: a native
/// kernel without P38 answers `kevent_init(ring, n, KEVENT_INIT_ASYNC_RING)` with `EINVAL`
/// (D1: an unknown flag). The fallback always can.
pub fn async_ring_unsupported(b: Backend) -> Option<String> {
    match Queue::try_with_async_ring(b, 4) {
        Ok(_) => None,
        Err(Errno::EINVAL) if b.is_native() => Some(
            "the native kernel refuses KEVENT_INIT_ASYNC_RING with EINVAL (no P38 in this kernel)"
                .to_string(),
        ),
        Err(e) => panic!("kevent_init(KEVENT_INIT_ASYNC_RING) on {}: {e}", b.as_str()),
    }
}

/// Skips the calling test's body on a backend without the asynchronous ring (a printed
/// reason; a failure under `KEVENT_REQUIRE_ALL=1`).
#[macro_export]
macro_rules! require_async_ring {
    ($b:expr) => {
        if let Some(why) = $crate::async_ring_unsupported($b) {
            $crate::skip(module_path!(), &format!("{} backend: {why}", $b.as_str()));
            return;
        }
    };
}

/// A queue of one backend, closed on drop (before its ring memory is freed).
pub struct Queue {
    /// The backend serving it.
    pub b: Backend,
    /// The queue fd.
    pub fd: RawFd,
    ring: Option<RingMem>,
    closed: bool,
}

impl std::fmt::Debug for Queue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Queue")
            .field("backend", &self.b.as_str())
            .field("fd", &self.fd)
            .field("ring", &self.ring.as_ref().map(|r| r.view.size()))
            .finish()
    }
}

// SAFETY: the queue is an fd plus ring memory that only the engine writes (through raw
// pointers) and tests read with atomics/volatile reads; sharing it between test threads is
// what the ABI allows (any thread may call any call).
unsafe impl Send for Queue {}
// SAFETY: as for Send: no method takes `&self` to mutate Rust-visible state.
unsafe impl Sync for Queue {}

impl Queue {
    /// A queue without a ring.
    #[track_caller]
    pub fn new(b: Backend) -> Queue {
        // SAFETY: a null ring with num 0 registers no memory.
        let fd =
            unsafe { kevent_backend::init(b, std::ptr::null_mut(), 0, 0) }.expect("kevent_init");
        Queue {
            b,
            fd,
            ring: None,
            closed: false,
        }
    }

    /// A queue with a ring of `n` slots (the ring memory is zero-filled with a pattern in
    /// the entries, so that writes are visible).
    #[track_caller]
    pub fn with_ring(b: Backend, n: u32) -> Queue {
        let bytes = ring_bytes(n).expect("ring size");
        let words = vec![0u64; bytes.div_ceil(8)].into_boxed_slice();
        let words = Box::into_raw(words);
        let base = NonNull::new(words.cast::<kevent_ring>()).expect("non-null");
        // SAFETY: `base` points to `bytes` zeroed, 8-aligned bytes that stay allocated until
        // `Drop` has closed the queue fd (and every duplicate the test made is closed by the
        // test before it drops the queue).
        let fd = unsafe { kevent_backend::init(b, base.as_ptr(), n, 0) }
            .expect("kevent_init with a ring");
        // SAFETY: as above: the memory outlives every use of the view (dropped with the
        // queue, after the fd is closed), and the header is only accessed atomically.
        let view = unsafe { RingView::new(base, n) };
        Queue {
            b,
            fd,
            ring: Some(RingMem {
                view,
                mem: Mem::Heap(words),
            }),
            closed: false,
        }
    }

    /// A queue with an asynchronous ring of `n` slots (P38), in a fresh anonymous mapping
    /// (the entries filled with a pattern, the header and tail with garbage that
    /// `kevent_init` must zero).
    #[track_caller]
    pub fn with_async_ring(b: Backend, n: u32) -> Queue {
        Queue::try_with_async_ring(b, n).expect("kevent_init(KEVENT_INIT_ASYNC_RING)")
    }

    /// [`Queue::with_async_ring`], returning `kevent_init`'s error.
    pub fn try_with_async_ring(b: Backend, n: u32) -> Result<Queue, Errno> {
        let len = ring::async_ring_bytes(n).expect("an asynchronous ring size");
        let map = mem::AnonMap::new(len).expect("mmap of the ring");
        // SAFETY: a fresh private mapping of `len` bytes, page-aligned.
        unsafe {
            std::ptr::write_bytes(map.base().as_ptr(), 0xa5, len);
        }
        let ring = map.base().as_ptr().cast::<kevent_ring>();
        // SAFETY: `ring` points to `async_ring_bytes(n)` bytes that stay mapped until `Drop`
        // has closed the queue fd (and every duplicate the test made is closed by the test
        // before it drops the queue).
        match unsafe { kevent_backend::init(b, ring, n, KEVENT_INIT_ASYNC_RING) } {
            Ok(fd) => {
                // SAFETY: as above; the header and tail are only accessed atomically.
                let view = unsafe { RingView::new_async(NonNull::new(ring).expect("mapped"), n) };
                Ok(Queue {
                    b,
                    fd,
                    ring: Some(RingMem {
                        view,
                        mem: Mem::Mapped(map),
                    }),
                    closed: false,
                })
            }
            Err(e) => Err(e),
        }
    }

    /// An asynchronous ring's `ring_uidx` (Acquire).
    pub fn ring_uidx(&self) -> u32 {
        self.view().uidx().expect("an asynchronous ring")
    }

    /// The consumer's store of `ring_uidx` (Release), no call (P38).
    pub fn store_uidx(&self, uidx: u32) {
        assert!(self.view().store_uidx(uidx), "an asynchronous ring");
    }

    /// The single consumer of an asynchronous ring (P38), with no call: loads `ring_kidx`
    /// (Acquire), copies the slots from `*uidx` up to it, then stores the new index into
    /// `ring_uidx` (Release) and `*uidx`.
    pub fn consume(&self, uidx: &mut u32) -> Vec<ukevent> {
        let v = self.view();
        let kidx = v.kidx();
        assert!(
            kidx < v.size(),
            "ring_kidx {kidx} outside a ring of {}",
            v.size()
        );
        let k = ring::occupancy(v.size(), kidx, *uidx);
        // SAFETY: the slots between the consumer index and the `ring_kidx` just loaded are
        // published and not written again until the consumer releases them.
        let got = (0..k)
            .map(|i| unsafe { v.read(ring::advance(v.size(), *uidx, i)) })
            .collect();
        *uidx = kidx;
        self.store_uidx(kidx);
        got
    }

    /// The consumer protocol of P38 until `want` events arrived or `limit` passed: read the
    /// ring with no call while it has events, `kevent_wait(old_uidx = ring_uidx)` only when
    /// it is empty.
    #[track_caller]
    pub fn consume_until(&self, uidx: &mut u32, want: usize, limit: Duration) -> Vec<ukevent> {
        let start = Instant::now();
        let mut all = Vec::new();
        loop {
            all.extend(self.consume(uidx));
            let left = limit.saturating_sub(start.elapsed());
            if all.len() >= want || left.is_zero() {
                return all;
            }
            let t = ts(left.as_secs() as i64, left.subsec_nanos() as i64);
            self.wait(self.ring_size() - 1, *uidx, &t)
                .expect("kevent_wait on an asynchronous ring");
        }
    }

    /// The asynchronous ring's `ring_resv` word (a plain read; tests call it while no call
    /// runs).
    pub fn ring_resv(&self) -> u32 {
        let r = self.ring.as_ref().expect("queue has a ring");
        let off = ring::async_ring_bytes(r.view.size()).expect("asynchronous") - 4;
        // SAFETY: `off + 4` is the end of the mapping of an asynchronous ring; 4-aligned.
        unsafe {
            r.view
                .base()
                .as_ptr()
                .cast::<u8>()
                .add(off)
                .cast::<u32>()
                .read_volatile()
        }
    }

    /// The ring size `n`.
    pub fn ring_size(&self) -> u32 {
        self.view().size()
    }

    /// The ring, through the one ring definition (`kevent_sys::ring`).
    pub fn view(&self) -> RingView {
        self.ring.as_ref().expect("queue has a ring").view
    }

    /// `ring_kidx`, loaded with Acquire (pairs with the producer's Release store).
    pub fn kidx(&self) -> u32 {
        self.view().kidx()
    }

    /// `ring_over`, loaded with Acquire.
    pub fn over(&self) -> u32 {
        self.view().over()
    }

    /// Ring entry `i` (call after loading `ring_kidx`).
    pub fn slot(&self, i: u32) -> ukevent {
        assert!(i < self.ring_size());
        // SAFETY: a slot published by `ring_kidx` (Acquire above) is not written again until
        // it is committed; tests read other slots only while no call runs on the queue.
        unsafe { self.view().read(i) }
    }

    /// Overwrites ring entry `i` with `e` (to see whether the engine writes it again).
    pub fn poke_slot(&self, i: u32, e: ukevent) {
        assert!(i < self.ring_size());
        // SAFETY: tests poke only slots the engine may not write (uncommitted or, after
        // close, none), while no call runs on the queue.
        unsafe { self.view().write(i, &e) }
    }

    /// The whole ring memory, as bytes (a copy).
    pub fn ring_bytes_copy(&self) -> Vec<u8> {
        let r = self.ring.as_ref().expect("queue has a ring");
        let len = match r.mem {
            Mem::Heap(_) => ring_bytes(r.view.size()).expect("size"),
            Mem::Mapped(ref m) => m.len(),
        };
        let mut v = vec![0u8; len];
        for (i, b) in v.iter_mut().enumerate() {
            // SAFETY: `i < len`, inside the allocation; volatile byte reads of plain memory.
            *b = unsafe { r.view.base().as_ptr().cast::<u8>().add(i).read_volatile() };
        }
        v
    }

    /// `kevent_ctl`.
    pub fn ctl(&self, cmd: u32, evs: &mut [ukevent]) -> Result<u32, Errno> {
        self.b.ctl(self.fd, cmd, evs)
    }

    /// ADD; returns the written-back prefix.
    #[track_caller]
    pub fn add(&self, evs: &[ukevent]) -> Vec<ukevent> {
        let mut v = evs.to_vec();
        let n = self.ctl(KEVENT_CTL_ADD, &mut v).expect("kevent_ctl(ADD)") as usize;
        assert!(n <= v.len(), "ADD returned {n} for {} entries", v.len());
        v.truncate(n);
        v
    }

    /// ADD that must register everything (nothing written back).
    #[track_caller]
    pub fn add_ok(&self, evs: &[ukevent]) {
        let back = self.add(evs);
        assert!(back.is_empty(), "ADD wrote back {back:#?}");
    }

    /// REMOVE or MODIFY; returns the entries as written back in place. The call itself
    /// must return 0 (**D14**), whatever the entries' results.
    #[track_caller]
    pub fn ctl_in_place(&self, cmd: u32, evs: &[ukevent]) -> Vec<ukevent> {
        let mut v = evs.to_vec();
        let n = self.ctl(cmd, &mut v).expect("kevent_ctl");
        assert_eq!(
            n, 0,
            "REMOVE/MODIFY returns 0 once every entry is processed (D14)"
        );
        v
    }

    /// REMOVE that must find every entry.
    #[track_caller]
    pub fn remove_ok(&self, evs: &[ukevent]) {
        for e in self.ctl_in_place(KEVENT_CTL_REMOVE, evs) {
            assert_eq!(e.ret_flags, KEVENT_RET_DONE, "REMOVE of {e:?}");
        }
    }

    /// READY of named kevents; returns (marked, entries not found).
    #[track_caller]
    pub fn ready(&self, evs: &[ukevent]) -> (u32, Vec<ukevent>) {
        let mut v = evs.to_vec();
        let n = self
            .ctl(KEVENT_CTL_READY, &mut v)
            .expect("kevent_ctl(READY)");
        let missing = v.len() - n as usize;
        v.truncate(missing);
        (n, v)
    }

    /// READY of UNOTIFY ids that must all be found.
    #[track_caller]
    pub fn ready_ids(&self, ids: &[u64]) {
        let evs: Vec<ukevent> = ids.iter().map(|&i| user(i, 0)).collect();
        let (n, missing) = self.ready(&evs);
        assert_eq!(n as usize, ids.len(), "READY missing {missing:?}");
    }

    /// READY with no entries: wakes every waiter.
    #[track_caller]
    pub fn wake(&self) {
        assert_eq!(self.ctl(KEVENT_CTL_READY, &mut []), Ok(0), "READY(0)");
    }

    /// `kevent_get_events` into a fresh buffer of `max` entries.
    pub fn get_events(
        &self,
        min_nr: u32,
        max: usize,
        timeout: &libc::timespec,
        flags: u32,
    ) -> Result<Vec<ukevent>, Errno> {
        let mut buf = vec![ukevent::default(); max];
        let n = self
            .b
            .get_events(self.fd, min_nr, &mut buf, timeout, flags)? as usize;
        assert!(n <= max, "get_events returned {n} > max_nr {max}");
        buf.truncate(n);
        Ok(buf)
    }

    /// `kevent_get_events(min_nr 1, max)` that must succeed.
    #[track_caller]
    pub fn get(&self, max: usize, timeout: &libc::timespec) -> Vec<ukevent> {
        self.get_events(1, max, timeout, 0)
            .expect("kevent_get_events")
    }

    /// Gets (without blocking unless `timeout` says so) and expects exactly `want`.
    #[track_caller]
    pub fn expect(&self, timeout: &libc::timespec, want: &[Want]) -> Vec<ukevent> {
        let got = self.get(want.len().max(1) + 8, timeout);
        expect_events(&got, want);
        got
    }

    /// Collects events until exactly `want` arrived (each event once), or `limit` passed.
    #[track_caller]
    pub fn expect_within(&self, limit: Duration, want: &[Want]) -> Vec<ukevent> {
        let start = Instant::now();
        let mut all = Vec::new();
        while all.len() < want.len() && start.elapsed() < limit {
            let left = limit.saturating_sub(start.elapsed());
            let t = ts(left.as_secs() as i64, left.subsec_nanos() as i64);
            all.extend(self.get(want.len() + 8, &t));
        }
        expect_events(&all, want);
        all
    }

    /// Asserts that nothing is ready: a non-blocking get returns no event.
    #[track_caller]
    pub fn expect_no_events(&self) {
        let got = self.get(16, &ZERO);
        assert!(got.is_empty(), "expected no events, got {got:#?}");
    }

    /// `kevent_wait`.
    pub fn wait(&self, num: u32, old_uidx: u32, timeout: &libc::timespec) -> Result<u32, Errno> {
        self.b.wait(self.fd, num, old_uidx, timeout, 0)
    }

    /// `kevent_commit`.
    pub fn commit(&self, new_uidx: u32, over: u32) -> Result<u32, Errno> {
        self.b.commit(self.fd, new_uidx, over)
    }

    /// Closes the queue fd now (the ring memory stays allocated until drop).
    pub fn close(&mut self) {
        if !self.closed {
            close(self.fd);
            self.closed = true;
        }
    }

    /// Marks the fd as closed by someone else (it will not be closed again).
    pub fn forget_fd(&mut self) {
        self.closed = true;
    }
}

impl Drop for Queue {
    fn drop(&mut self) {
        // The fd first: the engine may write the ring until the queue is closed.
        self.close();
        match self.ring.take().map(|r| r.mem) {
            // SAFETY: `words` came from `Box::into_raw` in `with_ring` and is freed once, after
            // the queue fd was closed.
            Some(Mem::Heap(words)) => drop(unsafe { Box::from_raw(words) }),
            Some(Mem::Mapped(m)) => drop(m),
            None => {}
        }
    }
}

/// A probe that a queue still works after an error: an UNOTIFY kevent added, marked READY,
/// delivered exactly once and removed again.
#[track_caller]
pub fn assert_usable(q: &Queue) {
    const PROBE: u64 = 0xdead_beef_0000_0001;
    q.add_ok(&[user(PROBE, 0)]);
    q.ready_ids(&[PROBE]);
    q.expect(&ZERO, &[Want::new(KEVENT_UNOTIFY, PROBE)]);
    q.remove_ok(&[user(PROBE, 0)]);
    q.expect_no_events();
}

/// Decisions P28, P29: ADD of `e` with `raw[0]` = `fd` and a non-zero `raw[1]` (one bit,
/// the top bit, all bits) is `-EINVAL` for the entry, whatever `fd` is.
#[track_caller]
pub fn assert_raw1_refused(q: &Queue, e: ukevent, fd: RawFd) {
    for raw1 in [1, 0x8000_0000, u32::MAX] {
        let mut bad = e;
        bad.id = kevent_id::from_raw([fd as u32, raw1]);
        expect_events(&q.add(&[bad]), &[Want::of(&bad).broken(Errno::EINVAL)]);
    }
}
