//! The producer side of a caller's `kevent_ring`, over the one ring definition
//! ([`kevent_sys::ring`]: header orderings, slot addressing, occupancy, the D13 rule).
//!
//! The engine keeps its own copy of the indices (`kidx`, `uidx`, `over`) under the queue lock
//! and never reads them back from ring memory: the caller cannot corrupt the queue's view by
//! scribbling on the header. What it writes there is for the consumer: entries into free
//! slots, then `ring_kidx` ([`RingView::publish_kidx`], Release); `ring_over` in a commit that
//! wraps ([`RingView::store_over`], Release). Slots between `uidx` and `kidx` are never
//! written again before they are committed (**D12** keeps one slot free so `kidx == uidx`
//! always means empty).
//!
//! An **asynchronous** ring (`KEVENT_INIT_ASYNC_RING`, decision P38) differs in one point: its
//! consumer index is `ring_uidx` in the ring's tail, stored by the consumer without a call.
//! The engine loads it ([`Ring::refresh`], once each time the queue lock is taken, so that one
//! locked section sees one value) and trusts nothing of it: a value `>= n` leaves no free slot
//! and makes `kevent_wait`/`kevent_commit` fail ([`Ring::consumer_index`]). Every slot the
//! engine writes lies inside the ring whatever the value.
//!
//! # Safety
//!
//! [`Ring::new`] is `unsafe`: the caller of `kevent_init` promised that the ring memory is
//! valid for `8 + n * 40` bytes until the queue is closed. Entries are written through the
//! view's raw slot pointers (never through `&mut`, since consumer threads read the same
//! memory), only into free slots.
#![allow(unsafe_code)]

use std::ptr::NonNull;

use kevent_sys::ring::{self, RingView};
use kevent_sys::{Errno, kevent_ring, ukevent};

/// A caller's ring, as the producer sees it.
#[derive(Debug)]
pub(crate) struct Ring {
    view: RingView,
    kidx: u32,
    /// The consumer index: the engine's own (ordinary ring), or the last `ring_uidx` loaded
    /// (asynchronous ring, untrusted: may be `>= n`).
    uidx: u32,
    over: u32,
    /// Events ever pushed (wrapping): what a `kevent_wait` gained is the difference.
    pushed: u64,
}

impl Ring {
    /// Takes over a caller's ring of `n >= 2` entries and zeroes its header.
    ///
    /// # Safety
    ///
    /// `base` must be valid for writes of `8 + n * 40` bytes, aligned to 8, until the queue
    /// that owns this `Ring` is dropped.
    pub(crate) unsafe fn new(base: NonNull<kevent_ring>, n: u32) -> Ring {
        // SAFETY: this function's contract is the view's; the header is only ever accessed
        // through views (atomically) by the engine and, per the ABI, by consumers.
        let view = unsafe { RingView::new(base, n) };
        Ring::start(view)
    }

    /// Takes over a caller's asynchronous ring (P38) of `2 <= n <= KEVENT_RING_ASYNC_MAX`
    /// entries and zeroes its header and tail.
    ///
    /// # Safety
    ///
    /// `base` must be valid for writes of `async_ring_bytes(n)` bytes, aligned to 8, until the
    /// queue that owns this `Ring` is dropped.
    pub(crate) unsafe fn new_async(base: NonNull<kevent_ring>, n: u32) -> Ring {
        // SAFETY: as in `new`, for the asynchronous layout (this function's contract).
        let view = unsafe { RingView::new_async(base, n) };
        view.clear_tail();
        Ring::start(view)
    }

    fn start(view: RingView) -> Ring {
        view.publish_kidx(0);
        view.store_over(0);
        Ring {
            view,
            kidx: 0,
            uidx: 0,
            over: 0,
            pushed: 0,
        }
    }

    /// Whether this is an asynchronous ring (P38).
    pub(crate) fn is_async(&self) -> bool {
        self.view.is_async()
    }

    /// An asynchronous ring: loads the consumer's `ring_uidx` (Acquire) into the engine's
    /// view of it. Nothing on an ordinary ring.
    #[inline]
    pub(crate) fn refresh(&mut self) {
        // Asked first, inline: an ordinary ring (every commit's case) makes no call.
        if !self.is_async() {
            return;
        }
        if let Some(u) = self.view.uidx() {
            self.uidx = u;
        }
    }

    /// The consumer index as the calls check it: `EINVAL` for an asynchronous ring's
    /// `ring_uidx >= n` (P38).
    pub(crate) fn consumer_index(&self) -> Result<u32, Errno> {
        if self.uidx >= self.size() {
            return Err(Errno::EINVAL);
        }
        Ok(self.uidx)
    }

    /// The producer index (`ring_kidx` as published at the end of each call).
    pub(crate) fn kidx(&self) -> u32 {
        self.kidx
    }

    /// An asynchronous ring holds events its consumer has not released (as last loaded;
    /// a bad `ring_uidx` counts as full).
    pub(crate) fn unread(&self) -> bool {
        self.is_async() && self.kidx != self.uidx
    }

    /// Events ever pushed (wrapping).
    pub(crate) fn pushed(&self) -> u64 {
        self.pushed
    }

    /// Ring size `n`.
    pub(crate) fn size(&self) -> u32 {
        self.view.size()
    }

    /// Slots a producer may still fill: `n - 1 - used` (**D12**).
    pub(crate) fn free(&self) -> u32 {
        // Ordinary ring: `uidx` is the engine's own, always `< n`.
        ring::async_free_slots(self.view.size(), self.kidx, self.uidx)
    }

    /// Writes `ev` into the next free slot; `false` when the ring is full. Not visible to
    /// consumers until [`Ring::publish`].
    pub(crate) fn push(&mut self, ev: &ukevent) -> bool {
        if self.free() == 0 {
            return false;
        }
        // SAFETY: slot `kidx` is free (between kidx and uidx going forward), so no consumer
        // reads it until `publish` moves `ring_kidx` past it.
        unsafe { self.view.write(self.kidx, ev) };
        self.kidx = ring::advance(self.view.size(), self.kidx, 1);
        self.pushed = self.pushed.wrapping_add(1);
        true
    }

    /// A writer of consecutive events into the free slots (at most [`Ring::free`] as of now),
    /// for a run of deliveries: [`Ring::push`] without its per-event occupancy arithmetic.
    /// The producer index moves when the writer is dropped; nothing is visible to consumers
    /// until [`Ring::publish`].
    #[inline]
    pub(crate) fn writer(&mut self) -> RingWriter<'_> {
        RingWriter {
            kidx: self.kidx,
            left: self.free(),
            written: 0,
            ring: self,
        }
    }

    /// Publishes every pushed entry: `ring_kidx` is stored with Release ordering.
    pub(crate) fn publish(&self) {
        self.view.publish_kidx(self.kidx);
    }

    /// `kevent_commit(new_uidx, over)` on this ring (**D13**).
    ///
    /// On an asynchronous ring the consumer index is `ring_uidx` (`EINVAL` when it is `>= n`),
    /// and the result is stored back there (Release), P38.
    pub(crate) fn commit(&mut self, new_uidx: u32, over: u32) -> Result<u32, Errno> {
        let uidx = self.consumer_index()?;
        let c = ring::commit(self.view.size(), self.kidx, uidx, self.over, new_uidx, over)?;
        if c.released > 0 {
            self.uidx = c.uidx;
            if self.is_async() {
                // Only an asynchronous ring has a tail to store into.
                let _ = self.view.store_uidx(c.uidx);
            }
            if c.over != self.over {
                self.over = c.over;
                self.view.store_over(c.over);
            }
        }
        Ok(c.released)
    }
}

/// See [`Ring::writer`].
pub(crate) struct RingWriter<'r> {
    ring: &'r mut Ring,
    /// The next slot to write.
    kidx: u32,
    /// Free slots left (**D12**).
    left: u32,
    written: u32,
}

impl RingWriter<'_> {
    /// Writes `ev` into the next free slot; `false` when none is left.
    #[inline]
    pub(crate) fn push(&mut self, ev: &ukevent) -> bool {
        if self.left == 0 {
            return false;
        }
        // SAFETY: slot `kidx` is free (one of the `free()` slots after the ring's `kidx`,
        // none of them written yet by this writer), so no consumer reads it until `publish`
        // moves `ring_kidx` past it.
        unsafe { self.ring.view.write(self.kidx, ev) };
        self.kidx += 1;
        if self.kidx == self.ring.view.size() {
            self.kidx = 0;
        }
        self.left -= 1;
        self.written += 1;
        true
    }
}

impl Drop for RingWriter<'_> {
    fn drop(&mut self) {
        self.ring.kidx = self.kidx;
        self.ring.pushed = self.ring.pushed.wrapping_add(u64::from(self.written));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn d12_ring_keeps_one_slot_free() {
        let mut mem = vec![0u64; (8 + 4 * 40) / 8];
        let base = NonNull::new(mem.as_mut_ptr().cast::<kevent_ring>()).unwrap();
        // SAFETY: `mem` holds a 4-entry ring, 8-aligned, and outlives `ring`.
        let mut ring = unsafe { Ring::new(base, 4) };
        let ev = ukevent::default();
        assert!(ring.push(&ev));
        assert!(ring.push(&ev));
        assert!(ring.push(&ev));
        assert!(
            !ring.push(&ev),
            "a ring of 4 holds at most 3 uncommitted events"
        );
        ring.publish();
        assert_eq!(mem[0] as u32, 3, "ring_kidx published");
        assert_eq!(ring.commit(3, 0), Ok(3));
        assert_eq!(ring.free(), 3);
    }

    #[test]
    fn d12_a_writer_fills_the_free_slots_across_the_end_and_no_more() {
        let mut mem = vec![0u64; (8 + 4 * 40) / 8];
        let base = NonNull::new(mem.as_mut_ptr().cast::<kevent_ring>()).unwrap();
        // SAFETY: `mem` holds a 4-entry ring, 8-aligned, and outlives `ring`.
        let mut ring = unsafe { Ring::new(base, 4) };
        let ev = |d: u32| ukevent {
            ret_data: [d, 0],
            ..ukevent::default()
        };
        assert!(ring.push(&ev(1)));
        assert!(ring.push(&ev(2)));
        ring.publish();
        assert_eq!(ring.commit(2, 0), Ok(2));
        {
            let mut w = ring.writer();
            for d in 3..6 {
                assert!(w.push(&ev(d)), "three slots are free");
            }
            assert!(!w.push(&ev(6)), "D12: the fourth slot stays free");
        }
        assert_eq!((ring.kidx(), ring.pushed(), ring.free()), (1, 5, 0));
        ring.publish();
        // Slots 2, 3 and (wrapped) 0 hold events 3, 4, 5.
        // SAFETY: published above, nothing writes the ring meanwhile.
        let read = |i| unsafe { ring.view.read(i) }.ret_data[0];
        assert_eq!((read(2), read(3), read(0)), (3, 4, 5));
    }
}
