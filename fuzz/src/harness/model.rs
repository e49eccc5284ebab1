//! The harness's independent models of what the library must have done: each queue's ring
//! (producer and consumer as absolute positions) and what the queue was given, and the D13
//! commit oracle.

use std::collections::HashMap;
use std::os::fd::RawFd;

use kevent_sys::ring::RingView;
use kevent_sys::{Key, ukevent};

use crate::mem::Guarded;

/// A caller's ring and the harness's model of it (single consumer: exact).
///
/// The model is independent of the engine's index arithmetic: producer and consumer are
/// absolute positions (`k`, `u`, as in `tests/model.rs`), the occupancy is `k - u`, the wrap
/// counter `u / n`, and a commit is decided on positions (`op_commit`). Only the memory is
/// read through the one ring definition ([`RingView`]).
#[derive(Debug)]
pub(super) struct RingState {
    pub(super) mem: Guarded,
    pub(super) view: RingView,
    pub(super) n: u32,
    /// Absolute producer position (every event the queue moved into the ring).
    pub(super) k: u64,
    /// Absolute consumer position (after the last successful commit).
    pub(super) u: u64,
}

impl RingState {
    pub(super) fn new(mem: Guarded, n: u32) -> Option<RingState> {
        let base = std::ptr::NonNull::new(mem.ptr().cast())?;
        // SAFETY: `mem` maps `ring_bytes(n)` bytes (the library just accepted it as a ring of
        // `n`), 8-aligned, and lives as long as this state; its header is only read through
        // the view's atomics.
        let view = unsafe { RingView::new(base, n) };
        Some(RingState {
            mem,
            view,
            n,
            k: 0,
            u: 0,
        })
    }

    pub(super) fn kidx(&self) -> u32 {
        self.view.kidx()
    }

    pub(super) fn over_mem(&self) -> u32 {
        self.view.over()
    }

    pub(super) fn entry(&self, i: u32) -> ukevent {
        // SAFETY: the view reduces `i` mod n, inside the mapped ring; the harness reads slots
        // only between library calls, when nothing writes them.
        unsafe { self.view.read(i) }
    }

    /// The consumer index the queue must have: the consumer position mod n.
    pub(super) fn uidx(&self) -> u32 {
        (self.u % u64::from(self.n)) as u32
    }

    /// `ring_over` as the model expects it: how often the consumer position crossed the end.
    pub(super) fn over(&self) -> u32 {
        (self.u / u64::from(self.n)) as u32
    }

    /// Uncommitted slots.
    pub(super) fn used(&self) -> u32 {
        (self.k - self.u) as u32
    }

    /// Catches the producer position up with `ring_kidx` as the memory holds it now: the
    /// queue may have moved events into the ring that no call returned (a `get_events` whose
    /// copy-out failed). `ring_kidx` never laps the consumer (D12), so the step is below n.
    pub(super) fn sync(&mut self) {
        let n = i64::from(self.n);
        let mut step = i64::from(self.kidx().min(self.n - 1)) - (self.k % u64::from(self.n)) as i64;
        if step < 0 {
            step += n;
        }
        self.k += step as u64;
    }
}

#[derive(Debug)]
pub(super) struct QueueState {
    pub(super) fd: RawFd,
    pub(super) serial: u32,
    pub(super) ring: Option<RingState>,
    /// Every `(type, id)` given to this queue (ADD, MODIFY, POSIX timers), with the cookies.
    pub(super) keys: HashMap<Key, Vec<u64>>,
    /// An ADD named an open fd the harness does not know (the library's own): F5 may follow.
    pub(super) foreign_fd: bool,
    /// F5 happened: the queue answers EINVAL to everything.
    pub(super) broken: bool,
}

impl QueueState {
    pub(super) fn note_key(&mut self, e: &ukevent) {
        let cookies = self.keys.entry(Key::of(e)).or_default();
        if cookies.len() < 64 && !cookies.contains(&e.cookie()) {
            cookies.push(e.cookie());
        }
    }
}

/// The D13 oracle on absolute positions: the consumer position after `kevent_commit(new_uidx)`
/// on a ring of `n` with producer position `k` and consumer position `u` (`u <= k < u + n`).
///
/// `new_uidx` names the one position P with P ≡ new_uidx (mod n) in (k - n, k]; P after `u`
/// releases `u..P`, P at or before `u` is a stale commit (the position stays `u`). Written from
/// the spec's words, never from the engine's modular formula (`kevent_sys::ring::commit`).
pub(super) fn d13_commit_model(k: u64, u: u64, n: u32, new_uidx: u32) -> u64 {
    let (k, n, new_uidx) = (i128::from(k), i128::from(n), i128::from(new_uidx));
    let mut p = (k / n) * n + new_uidx;
    if p > k {
        p -= n;
    }
    p.max(i128::from(u)) as u64
}
