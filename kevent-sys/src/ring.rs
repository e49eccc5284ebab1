//! The ring (spec sections 1 and 3, **D12**, **D13**): the one definition of how a
//! `struct kevent_ring` is read, written and committed, for every producer and consumer in the
//! project.
//!
//! * [`RingView`]: a raw view of a ring in memory. The header's two indices are accessed only
//!   atomically, with the orderings of the protocol below; a slot is addressed as
//!   `event[i % n]`.
//! * [`occupancy`], [`free_slots`], [`advance`]: index arithmetic on a ring of `n` slots.
//! * [`commit`]: the D13 commit rule as a pure function.
//! * The asynchronous ring (decision P38): [`async_ring_bytes`] (its size and limits),
//!   [`RingView::new_async`] and the tail's consumer index ([`RingView::uidx`],
//!   [`RingView::store_uidx`]).
//!
//! The fallback engine's producer (`kevent-fallback`), the safe API's consumers (`kevent`),
//! the benchmark's raw consumer, the conformance suite and the fuzz harness all use these; the
//! kernel port (`kernel/`) implements the same rules in C. The oracles that *check* the rule
//! (`tests/conformance/model.rs`, the fuzz harness) are written independently, on absolute positions,
//! and never call [`commit`].
//!
//! # The protocol
//!
//! * The producer (the kernel, or the fallback engine in the thread that called
//!   `kevent_get_events`/`kevent_wait`) writes entries into free slots, then stores
//!   `ring_kidx` with **Release** ([`RingView::publish_kidx`]). A consumer loads `ring_kidx`
//!   with **Acquire** ([`RingView::kidx`]) before it reads the entries below it: every entry
//!   below the loaded index is fully written.
//! * `ring_over` is stored (Release) only by `kevent_commit`, when the consumer index wraps;
//!   consumers load it (Acquire) *before* they consume, and pass that value to the commit.
//! * Slots between the consumer index and `ring_kidx` are never written again before they are
//!   committed; one slot always stays free (**D12**), so `kidx == uidx` always means empty.
//!
//! # The asynchronous ring (P38)
//!
//! A `KEVENT_INIT_ASYNC_RING` ring carries `struct kevent_ring_tail` after its `n` entries
//! (offset `8 + n * 40`). Its `ring_uidx` is the consumer index, stored by the consumer with
//! **Release** ([`RingView::store_uidx`]) after it read the slots below it; the producer loads
//! it with **Acquire** ([`RingView::uidx`]) before it writes a slot the consumer released. The
//! producer trusts nothing of it: a value `>= n` means "full" and an error for the calls
//! (see [`async_free_slots`]).
//!
//! # Index arithmetic and large rings
//!
//! Indices are `u32` and lie in `0..n`. No function here forms a sum that can overflow (they
//! compare before they subtract, or widen to `u64`), so that any ring size the ABI can name
//! (`2 ..= u32::MAX`) is exact: the obvious `(kidx + n - uidx) % n` overflows `u32` once
//! `n > 2^31` (decision recorded in `docs/decisions.md`, P26).
//!
//! # Safety
//!
//! [`RingView::new`] is `unsafe`: its caller promises the memory is a live ring of `n` slots
//! for as long as the view (or any copy of it) is used. The view then touches the header only
//! through `AtomicU32` (the kernel writes it with aligned 32-bit stores) and hands out slot
//! *pointers*; reading or writing a slot is `unsafe`, because only the protocol above tells
//! whether the other side may be writing it.

use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::{
    Errno, KEVENT_RING_ASYNC_MAX, KEVENT_RING_HEADER_SIZE, UKEVENT_SIZE, kevent_ring,
    kevent_ring_tail, ukevent,
};

/// The bytes a caller allocates for a `KEVENT_INIT_ASYNC_RING` ring of `num` entries
/// (decision P38): `8 + num * 40` for the header and entries, then 8 for
/// `struct kevent_ring_tail`. `None` when `num` is outside `2 ..= KEVENT_RING_ASYNC_MAX`
/// (`kevent_init` refuses such a ring with `EINVAL`).
pub const fn async_ring_bytes(num: u32) -> Option<usize> {
    if num < 2 || num > KEVENT_RING_ASYNC_MAX {
        return None;
    }
    Some(async_tail_offset(num) + std::mem::size_of::<kevent_ring_tail>())
}

/// Offset of `struct kevent_ring_tail` in a ring of `num` entries: `8 + num * 40` (no overflow
/// for any `u32` on a 64-bit target; callers pass `num <= KEVENT_RING_ASYNC_MAX`).
const fn async_tail_offset(num: u32) -> usize {
    KEVENT_RING_HEADER_SIZE + num as usize * UKEVENT_SIZE
}

/// Slots the producer of an asynchronous ring may fill, given the `ring_uidx` it loaded
/// (decision P38): [`free_slots`] for a consumer index inside the ring, 0 for any value
/// `>= n` (an untrusted index never lets the producer write).
pub const fn async_free_slots(n: u32, kidx: u32, uidx: u32) -> u32 {
    if uidx >= n || kidx >= n {
        0
    } else {
        free_slots(n, kidx, uidx)
    }
}

/// A raw view of a `struct kevent_ring` of `n` slots: its header with the protocol's
/// orderings, and its slot addresses.
///
/// `Copy`: a view is an address and a size. It owns nothing; whoever made it keeps the
/// memory alive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RingView {
    base: NonNull<kevent_ring>,
    n: u32,
    /// The ring has `struct kevent_ring_tail` after its entries (P38).
    tail: bool,
}

// SAFETY: a view only performs atomic header accesses through `&self`; slot reads and writes
// are `unsafe` methods whose callers order them by the protocol. Moving or sharing the address
// between threads therefore creates no data race by itself.
unsafe impl Send for RingView {}
// SAFETY: as for `Send`.
unsafe impl Sync for RingView {}

impl RingView {
    /// A view of the ring at `base` with `n` slots.
    ///
    /// # Safety
    ///
    /// * `base` is valid for reads and writes of [`crate::ring_bytes`]`(n)` bytes, aligned to 8,
    ///   for as long as this view or any copy of it is used;
    /// * `n >= 1` (the ABI requires `n >= 2`);
    /// * while views exist, `ring_kidx` and `ring_over` are accessed only atomically (or by the
    ///   kernel, with aligned 32-bit stores), never through a Rust `&`/`&mut`.
    pub const unsafe fn new(base: NonNull<kevent_ring>, n: u32) -> RingView {
        RingView {
            base,
            n,
            tail: false,
        }
    }

    /// A view of the asynchronous ring (decision P38) at `base` with `n` slots and its tail.
    ///
    /// # Safety
    ///
    /// As [`RingView::new`], with [`async_ring_bytes`]`(n)` bytes (so `2 <= n <=
    /// KEVENT_RING_ASYNC_MAX`), and `ring_uidx` likewise accessed only atomically.
    pub const unsafe fn new_async(base: NonNull<kevent_ring>, n: u32) -> RingView {
        RingView {
            base,
            n,
            tail: true,
        }
    }

    /// Whether this is a view of an asynchronous ring (made by [`RingView::new_async`]).
    pub const fn is_async(&self) -> bool {
        self.tail
    }

    /// The ring's address.
    pub const fn base(&self) -> NonNull<kevent_ring> {
        self.base
    }

    /// The ring size `n`.
    pub const fn size(&self) -> u32 {
        self.n
    }

    fn kidx_atomic(&self) -> &AtomicU32 {
        // SAFETY: the header is valid and 4-aligned while the view is used (`new`'s contract),
        // and `ring_kidx` is only ever accessed atomically (same contract).
        unsafe { AtomicU32::from_ptr(&raw mut (*self.base.as_ptr()).ring_kidx) }
    }

    fn over_atomic(&self) -> &AtomicU32 {
        // SAFETY: as in `kidx_atomic`, for `ring_over` at offset 4.
        unsafe { AtomicU32::from_ptr(&raw mut (*self.base.as_ptr()).ring_over) }
    }

    fn uidx_atomic(&self) -> Option<&AtomicU32> {
        if !self.tail {
            return None;
        }
        // SAFETY: a view made by `new_async` covers `async_ring_bytes(n)` bytes, so the tail
        // lies inside the allocation at `8 + n * 40` (8-aligned: 8 + a multiple of 40), and
        // `ring_uidx` is only ever accessed atomically (`new_async`'s contract).
        unsafe {
            let tail = self
                .base
                .as_ptr()
                .cast::<u8>()
                .add(async_tail_offset(self.n))
                .cast::<kevent_ring_tail>();
            Some(AtomicU32::from_ptr(&raw mut (*tail).ring_uidx))
        }
    }

    /// The asynchronous ring's `ring_uidx` (P38), loaded with **Acquire**: pairs with the
    /// consumer's Release store made after it read the slots below it. `None` on a view of
    /// an ordinary ring (it has no tail).
    ///
    /// The value is untrusted: a producer checks it with [`async_free_slots`].
    pub fn uidx(&self) -> Option<u32> {
        self.uidx_atomic().map(|a| a.load(Ordering::Acquire))
    }

    /// The consumer's release of the slots below `uidx` (P38): stores `ring_uidx` with
    /// **Release**, after it read them. Returns `false` (storing nothing) on a view of an
    /// ordinary ring.
    #[must_use]
    pub fn store_uidx(&self, uidx: u32) -> bool {
        self.uidx_atomic()
            .map(|a| a.store(uidx, Ordering::Release))
            .is_some()
    }

    /// `kevent_init`'s zeroing of the tail's `ring_resv` (P38); nothing on an ordinary ring.
    pub fn clear_tail(&self) {
        if let Some(a) = self.uidx_atomic() {
            a.store(0, Ordering::Release);
            // SAFETY: `ring_resv` follows `ring_uidx` inside the tail (see `uidx_atomic`),
            // 4-aligned, accessed only atomically.
            unsafe { AtomicU32::from_ptr(a.as_ptr().add(1)) }.store(0, Ordering::Relaxed);
        }
    }

    /// `ring_kidx`, loaded with **Acquire**: pairs with the producer's Release store made
    /// after it wrote the entries below it.
    ///
    /// The value is what the memory holds; a consumer that indexes with it clamps it below
    /// `n` first (only a misbehaving producer writes more).
    pub fn kidx(&self) -> u32 {
        self.kidx_atomic().load(Ordering::Acquire)
    }

    /// The producer's publication: stores `ring_kidx` with **Release**, after the entries
    /// below it were written.
    pub fn publish_kidx(&self, kidx: u32) {
        self.kidx_atomic().store(kidx, Ordering::Release);
    }

    /// `ring_over`, loaded with **Acquire** (a consumer reads it before it consumes, and
    /// passes it to `kevent_commit`).
    pub fn over(&self) -> u32 {
        self.over_atomic().load(Ordering::Acquire)
    }

    /// The commit's store of `ring_over` (**Release**), when the consumer index wrapped.
    pub fn store_over(&self, over: u32) {
        self.over_atomic().store(over, Ordering::Release);
    }

    /// The address of slot `i % n`.
    pub fn slot(&self, i: u32) -> *mut ukevent {
        let i = i % self.n;
        // SAFETY: `i < n`, and the ring holds `n` entries after its 8-byte header (`new`'s
        // contract), so the offset stays inside the allocation.
        unsafe {
            (&raw mut (*self.base.as_ptr()).event)
                .cast::<ukevent>()
                .add(i as usize)
        }
    }

    /// Copies slot `i % n` out.
    ///
    /// # Safety
    ///
    /// Nobody writes the slot during the read: it lies between the consumer index and a
    /// `ring_kidx` loaded with [`RingView::kidx`], or the producer is known to be idle.
    pub unsafe fn read(&self, i: u32) -> ukevent {
        // SAFETY: the slot is inside the ring and 8-aligned (`slot`); nobody writes it now
        // (this function's contract).
        unsafe { self.slot(i).read() }
    }

    /// Writes `ev` into slot `i % n`.
    ///
    /// # Safety
    ///
    /// Nobody reads or writes the slot during the write: for the producer, the slot is free
    /// (not between the consumer index and the published `ring_kidx`).
    pub unsafe fn write(&self, i: u32, ev: &ukevent) {
        // SAFETY: the slot is inside the ring and 8-aligned (`slot`); nobody accesses it now
        // (this function's contract).
        unsafe { self.slot(i).write(*ev) }
    }
}

/// How many slots are in use on a ring of `n`: `(kidx - uidx) mod n`, for `kidx, uidx < n`.
///
/// No division (this runs per event on the producer's path), and no intermediate sum above
/// `n`, so it is exact for every `n`.
pub const fn occupancy(n: u32, kidx: u32, uidx: u32) -> u32 {
    if kidx >= uidx {
        kidx - uidx
    } else {
        // kidx < uidx <= n - 1: (n - uidx) + kidx < n.
        (n - uidx) + kidx
    }
}

/// How many slots a producer may still fill (**D12**: one always stays free):
/// `n - 1 - occupancy`.
pub const fn free_slots(n: u32, kidx: u32, uidx: u32) -> u32 {
    n - 1 - occupancy(n, kidx, uidx)
}

/// Index `i` moved `k` slots forward on a ring of `n`: `(i + k) mod n`, for `i < n`.
pub const fn advance(n: u32, i: u32, k: u32) -> u32 {
    let (s, n) = (i as u64 + k as u64, n as u64);
    // The common steps (k < n) need no division.
    (if s < n {
        s
    } else if s < 2 * n {
        s - n
    } else {
        s % n
    }) as u32
}

/// What a commit did (or would do).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Commit {
    /// Slots released (0 for a stale commit).
    pub released: u32,
    /// The consumer index after the commit.
    pub uidx: u32,
    /// The wrap counter (`ring_over`) after the commit.
    pub over: u32,
}

/// The commit rule (**D13**) on a ring of `n` slots with producer index `kidx`, consumer
/// index `uidx` and wrap counter `over`, for `kevent_commit(new_uidx, committer_over)`.
///
/// `new_uidx` is mapped to the one position among the `n` ending at the producer position: it
/// lies `back = (kidx - new_uidx) mod n` slots behind the producer. If that is after `uidx`
/// (fewer than the `used` slots back), every slot up to it is released, and crossing the end
/// of the array increments `over`; otherwise the commit is stale and changes nothing.
///
/// # Errors
///
/// `EINVAL` for `new_uidx >= n`; `EOVERFLOW` for a `committer_over` that is neither `over` nor
/// `over - 1` (the committer fell a whole ring behind).
pub const fn commit(
    n: u32,
    kidx: u32,
    uidx: u32,
    over: u32,
    new_uidx: u32,
    committer_over: u32,
) -> Result<Commit, Errno> {
    if new_uidx >= n {
        return Err(Errno::EINVAL);
    }
    if committer_over != over && committer_over != over.wrapping_sub(1) {
        return Err(Errno::EOVERFLOW);
    }
    let used = occupancy(n, kidx, uidx);
    let back = occupancy(n, kidx, new_uidx);
    if back >= used {
        return Ok(Commit {
            released: 0,
            uidx,
            over,
        });
    }
    let released = used - back;
    let wrapped = uidx as u64 + released as u64 >= n as u64;
    Ok(Commit {
        released,
        uidx: new_uidx,
        over: if wrapped { over.wrapping_add(1) } else { over },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn d13_single_consumer_releases_exactly_what_it_read() {
        // n = 8, produced 5 from 0, consumer read 3.
        let c = commit(8, 5, 0, 0, 3, 0).unwrap();
        assert_eq!(
            c,
            Commit {
                released: 3,
                uidx: 3,
                over: 0
            }
        );
    }

    #[test]
    fn d13_stale_commit_changes_nothing() {
        // uidx already at 4; a thread commits 2 (behind): stale.
        let c = commit(8, 6, 4, 0, 2, 0).unwrap();
        assert_eq!(c.released, 0);
        assert_eq!(c.uidx, 4);
        // Committing exactly uidx is stale too.
        assert_eq!(commit(8, 6, 4, 0, 4, 0).unwrap().released, 0);
    }

    #[test]
    fn d13_commit_never_releases_unproduced_slots() {
        // kidx 6, uidx 4: new_uidx 7 lies ahead of the producer -> maps to a position behind
        // uidx (stale), never past kidx.
        assert_eq!(commit(8, 6, 4, 0, 7, 0).unwrap().released, 0);
        // new_uidx == kidx releases everything produced.
        assert_eq!(commit(8, 6, 4, 0, 6, 0).unwrap().released, 2);
    }

    #[test]
    fn d13_wrap_increments_over() {
        // n = 4: uidx 3, kidx 1 (2 used: slots 3 and 0). Commit 1 crosses the end.
        let c = commit(4, 1, 3, 7, 1, 7).unwrap();
        assert_eq!(
            c,
            Commit {
                released: 2,
                uidx: 1,
                over: 8
            }
        );
        // Committing to 0 (exactly the end) also wraps.
        let c = commit(4, 1, 3, 7, 0, 7).unwrap();
        assert_eq!(
            c,
            Commit {
                released: 1,
                uidx: 0,
                over: 8
            }
        );
    }

    #[test]
    fn d13_over_must_be_current_or_previous() {
        assert_eq!(commit(4, 1, 3, 7, 1, 6).unwrap().released, 2);
        assert_eq!(commit(4, 1, 3, 7, 1, 5), Err(Errno::EOVERFLOW));
        assert_eq!(commit(4, 1, 3, 7, 1, 8), Err(Errno::EOVERFLOW));
        assert_eq!(commit(4, 1, 3, 0, 1, u32::MAX).unwrap().released, 2);
    }

    #[test]
    fn d13_new_uidx_out_of_range_is_einval() {
        assert_eq!(commit(4, 0, 0, 0, 4, 0), Err(Errno::EINVAL));
    }

    /// P26: rings above 2^31 slots. The u32 formula `(kidx + n - uidx) % n` wraps there and
    /// gives a wrong occupancy; the u64 arithmetic is exact up to `n = u32::MAX`.
    #[test]
    fn p26_arithmetic_is_exact_above_2_pow_31() {
        for n in [(1u32 << 31) + 1, u32::MAX - 1, u32::MAX] {
            let (kidx, uidx) = (n - 1, n - 3);
            assert_eq!(occupancy(n, kidx, uidx), 2, "n {n}");
            assert_eq!(occupancy(n, 1, n - 1), 2, "n {n}: across the end");
            assert_eq!(free_slots(n, 0, 0), n - 1);
            assert_eq!(free_slots(n, n - 2, n - 1), 0, "n {n}: full (D12)");
            assert_eq!(advance(n, n - 1, 1), 0);
            assert_eq!(advance(n, n - 2, 5), 3);
            assert_eq!(
                advance(n, 3, u32::MAX),
                ((3 + u64::from(u32::MAX)) % u64::from(n)) as u32
            );
            // Consumer at n - 1, producer at 1: committing 1 releases 2 slots and wraps.
            let c = commit(n, 1, n - 1, 9, 1, 9).unwrap();
            assert_eq!((c.released, c.uidx, c.over), (2, 1, 10), "n {n}");
            // A stale commit stays stale.
            assert_eq!(commit(n, 1, n - 1, 9, n - 2, 9).unwrap().released, 0);
        }
    }

    /// The division-free forms agree with modular arithmetic on every small ring.
    #[test]
    fn arithmetic_is_modular_arithmetic() {
        for n in 2u32..=9 {
            let m = u64::from(n);
            for a in 0..n {
                for b in 0..n {
                    let want = ((u64::from(a) + m - u64::from(b)) % m) as u32;
                    assert_eq!(occupancy(n, a, b), want, "n {n} kidx {a} uidx {b}");
                    assert_eq!(free_slots(n, a, b), n - 1 - want);
                }
                for k in [0, 1, n - 1, n, n + 1, 3 * n + 2, u32::MAX] {
                    let want = ((u64::from(a) + u64::from(k)) % m) as u32;
                    assert_eq!(advance(n, a, k), want, "n {n} i {a} k {k}");
                }
            }
        }
    }

    #[test]
    fn d12_view_addresses_slots_and_header() {
        let mut mem = vec![0u64; (8 + 4 * 40) / 8];
        let base = NonNull::new(mem.as_mut_ptr().cast::<kevent_ring>()).unwrap();
        // SAFETY: `mem` holds a 4-entry ring, 8-aligned, and outlives `v`; the header is only
        // accessed through the view.
        let v = unsafe { RingView::new(base, 4) };
        assert_eq!(v.slot(5), v.slot(1));
        assert_eq!(
            v.slot(1).addr() - base.as_ptr().addr(),
            crate::KEVENT_RING_HEADER_SIZE + crate::UKEVENT_SIZE
        );
        let ev = ukevent::new(crate::KEVENT_UNOTIFY, crate::kevent_id::from_u64(7), 1, 0);
        // SAFETY: nobody else accesses the ring.
        unsafe { v.write(2, &ev) };
        // SAFETY: as above.
        assert_eq!(unsafe { v.read(6) }.id.as_u64(), 7);
        v.publish_kidx(3);
        v.store_over(9);
        assert_eq!((v.kidx(), v.over()), (3, 9));
        assert_eq!(
            mem[0],
            3 | (9 << 32),
            "ring_kidx at offset 0, ring_over at 4"
        );
    }

    #[test]
    fn p38_async_ring_bytes_and_limits() {
        assert_eq!(async_ring_bytes(0), None);
        assert_eq!(async_ring_bytes(1), None);
        assert_eq!(async_ring_bytes(2), Some(8 + 2 * 40 + 8));
        assert_eq!(async_ring_bytes(65536), Some(8 + 65536 * 40 + 8));
        assert_eq!(async_ring_bytes(65537), None);
        assert_eq!(async_ring_bytes(u32::MAX), None);
    }

    #[test]
    fn p38_untrusted_uidx_never_frees_a_slot() {
        assert_eq!(async_free_slots(8, 0, 0), 7);
        assert_eq!(async_free_slots(8, 3, 4), 0, "full (D12)");
        assert_eq!(async_free_slots(8, 3, 8), 0, "uidx >= n counts as full");
        assert_eq!(async_free_slots(8, 3, u32::MAX), 0);
    }

    #[test]
    fn p38_view_addresses_the_tail() {
        let n = 4u32;
        let mut mem = vec![0u64; async_ring_bytes(n).unwrap() / 8];
        let base = NonNull::new(mem.as_mut_ptr().cast::<kevent_ring>()).unwrap();
        // SAFETY: `mem` holds an asynchronous ring of 4 entries and its tail, 8-aligned, and
        // outlives both views; the header and tail are only accessed through them.
        let (a, plain) = unsafe { (RingView::new_async(base, n), RingView::new(base, n)) };
        assert!(a.is_async() && !plain.is_async());
        assert_eq!(plain.uidx(), None);
        assert!(!plain.store_uidx(1), "an ordinary ring has no tail");
        assert!(a.store_uidx(3));
        assert_eq!(a.uidx(), Some(3));
        let tail = (8 + 4 * 40) / 8;
        assert_eq!(mem[tail], 3, "ring_uidx at offset 8 + n * 40");
        mem[tail] = u64::MAX;
        a.clear_tail();
        assert_eq!(mem[tail], 0, "kevent_init zeroes ring_uidx and ring_resv");
    }
}
