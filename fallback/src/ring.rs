//! The producer side of a caller's `kevent_ring`.
//!
//! The engine keeps its own copy of the indices (`kidx`, `uidx`, `over`) under the queue lock
//! and never reads them back from ring memory: the caller cannot corrupt the queue's view by
//! scribbling on the header. What it writes there is for the consumer:
//!
//! * entries are written into free slots first, then `ring_kidx` is stored with **Release**
//!   ordering ([`Ring::publish`]); a consumer that loads `ring_kidx` with **Acquire** sees every
//!   entry before that index fully written;
//! * `ring_over` is stored (Release) by `kevent_commit` when the consumer index wraps.
//!
//! A consumer must therefore: load `ring_kidx` (Acquire), read entries from its last position
//! up to it, then commit. Slots between `uidx` and `kidx` are never written again before they
//! are committed (**D12** keeps one slot free so `kidx == uidx` always means empty).
//!
//! # Safety
//!
//! [`Ring::new`] is `unsafe`: the caller of `kevent_init` promised that the ring memory is
//! valid for `8 + n * 40` bytes until the queue is closed. Entries and the header are written
//! through raw pointers (never through `&mut`, since consumer threads read the same memory).
#![allow(unsafe_code)]

use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};

use kevent_sys::{Errno, kevent_ring, ukevent};

/// What a commit did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Commit {
    /// Slots released (0 for a stale commit).
    pub(crate) released: u32,
    /// The consumer index after the commit.
    pub(crate) uidx: u32,
    /// The wrap counter after the commit.
    pub(crate) over: u32,
}

/// The commit rule (**D13**) as arithmetic on a ring of `n` slots with producer index `kidx`,
/// consumer index `uidx` and wrap counter `over`.
///
/// `new_uidx` is mapped to the one position among the `n` ending at the producer position:
/// it lies `back = (kidx - new_uidx) mod n` slots behind the producer. If that is after
/// `uidx` (fewer than `used` slots back), the slots up to it are released; otherwise the
/// commit is stale and changes nothing.
pub(crate) fn commit_rule(
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
    let used = (kidx + n - uidx) % n;
    let back = (kidx + n - new_uidx) % n;
    if back >= used {
        return Ok(Commit {
            released: 0,
            uidx,
            over,
        });
    }
    let released = used - back;
    let wrapped = uidx + released >= n;
    Ok(Commit {
        released,
        uidx: new_uidx,
        over: if wrapped { over.wrapping_add(1) } else { over },
    })
}

/// A caller's ring, as the producer sees it.
#[derive(Debug)]
pub(crate) struct Ring {
    base: NonNull<kevent_ring>,
    n: u32,
    kidx: u32,
    uidx: u32,
    over: u32,
}

// SAFETY: the ring memory is owned by the caller, who promised (kevent_init's contract) that
// it outlives the queue; the engine only touches it under the queue lock, from any thread.
unsafe impl Send for Ring {}

impl Ring {
    /// Takes over a caller's ring of `n >= 2` entries and zeroes its header.
    ///
    /// # Safety
    ///
    /// `base` must be valid for writes of `8 + n * 40` bytes, aligned to 8, until the queue
    /// that owns this `Ring` is dropped.
    pub(crate) unsafe fn new(base: NonNull<kevent_ring>, n: u32) -> Ring {
        let ring = Ring {
            base,
            n,
            kidx: 0,
            uidx: 0,
            over: 0,
        };
        ring.kidx_atomic().store(0, Ordering::Release);
        ring.over_atomic().store(0, Ordering::Release);
        ring
    }

    fn kidx_atomic(&self) -> &AtomicU32 {
        // SAFETY: the header is valid and aligned for the ring's lifetime (`new`'s contract);
        // `ring_kidx` is a u32 that only this producer writes, and consumers read it
        // atomically, so viewing it as an AtomicU32 is sound.
        unsafe { AtomicU32::from_ptr(&raw mut (*self.base.as_ptr()).ring_kidx) }
    }

    fn over_atomic(&self) -> &AtomicU32 {
        // SAFETY: as for `kidx_atomic`, for `ring_over`.
        unsafe { AtomicU32::from_ptr(&raw mut (*self.base.as_ptr()).ring_over) }
    }

    /// Ring size `n`.
    pub(crate) fn size(&self) -> u32 {
        self.n
    }

    /// The consumer index (after the last successful commit).
    pub(crate) fn uidx(&self) -> u32 {
        self.uidx
    }

    /// Slots a producer may still fill: `n - 1 - used` (**D12**).
    pub(crate) fn free(&self) -> u32 {
        let used = (self.kidx + self.n - self.uidx) % self.n;
        self.n - 1 - used
    }

    /// Writes `ev` into the next free slot; `false` when the ring is full. Not visible to
    /// consumers until [`Ring::publish`].
    pub(crate) fn push(&mut self, ev: &ukevent) -> bool {
        if self.free() == 0 {
            return false;
        }
        // SAFETY: `kidx < n`, so the slot lies inside the caller's `n` entries (`new`'s
        // contract); it is free (between kidx and uidx going forward), so no consumer reads it
        // until `publish` moves `ring_kidx` past it.
        unsafe {
            let slot = (&raw mut (*self.base.as_ptr()).event)
                .cast::<ukevent>()
                .add(self.kidx as usize);
            slot.write(*ev);
        }
        self.kidx = (self.kidx + 1) % self.n;
        true
    }

    /// Publishes every pushed entry: `ring_kidx` is stored with Release ordering.
    pub(crate) fn publish(&self) {
        self.kidx_atomic().store(self.kidx, Ordering::Release);
    }

    /// `kevent_commit(new_uidx, over)` on this ring (**D13**).
    pub(crate) fn commit(&mut self, new_uidx: u32, over: u32) -> Result<u32, Errno> {
        let c = commit_rule(self.n, self.kidx, self.uidx, self.over, new_uidx, over)?;
        if c.released > 0 {
            self.uidx = c.uidx;
            if c.over != self.over {
                self.over = c.over;
                self.over_atomic().store(c.over, Ordering::Release);
            }
        }
        Ok(c.released)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn d13_single_consumer_releases_exactly_what_it_read() {
        // n = 8, produced 5 from 0, consumer read 3.
        let c = commit_rule(8, 5, 0, 0, 3, 0).unwrap();
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
        let c = commit_rule(8, 6, 4, 0, 2, 0).unwrap();
        assert_eq!(c.released, 0);
        assert_eq!(c.uidx, 4);
        // Committing exactly uidx is stale too.
        assert_eq!(commit_rule(8, 6, 4, 0, 4, 0).unwrap().released, 0);
    }

    #[test]
    fn d13_commit_never_releases_unproduced_slots() {
        // kidx 6, uidx 4: new_uidx 7 lies ahead of the producer -> maps to a position behind
        // uidx (stale), never past kidx.
        assert_eq!(commit_rule(8, 6, 4, 0, 7, 0).unwrap().released, 0);
        // new_uidx == kidx releases everything produced.
        assert_eq!(commit_rule(8, 6, 4, 0, 6, 0).unwrap().released, 2);
    }

    #[test]
    fn d13_wrap_increments_over() {
        // n = 4: uidx 3, kidx 1 (2 used: slots 3 and 0). Commit 1 crosses the end.
        let c = commit_rule(4, 1, 3, 7, 1, 7).unwrap();
        assert_eq!(
            c,
            Commit {
                released: 2,
                uidx: 1,
                over: 8
            }
        );
        // Committing to 0 (exactly the end) also wraps.
        let c = commit_rule(4, 1, 3, 7, 0, 7).unwrap();
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
        assert_eq!(commit_rule(4, 1, 3, 7, 1, 6).unwrap().released, 2);
        assert_eq!(commit_rule(4, 1, 3, 7, 1, 5), Err(Errno::EOVERFLOW));
        assert_eq!(commit_rule(4, 1, 3, 7, 1, 8), Err(Errno::EOVERFLOW));
        assert_eq!(commit_rule(4, 1, 3, 0, 1, u32::MAX).unwrap().released, 2);
    }

    #[test]
    fn d13_new_uidx_out_of_range_is_einval() {
        assert_eq!(commit_rule(4, 0, 0, 0, 4, 0), Err(Errno::EINVAL));
    }

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
}
