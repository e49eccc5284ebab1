//! [`TimerHeap`]: every timer of one queue, ordered by deadline, behind one timerfd.
//!
//! The engine keeps one timerfd per queue (issue 3: "no per-timer kernel object") and arms it,
//! with `TFD_TIMER_ABSTIME` on `CLOCK_MONOTONIC`, at [`TimerHeap::next_deadline`]. When the
//! timerfd fires it drains [`TimerHeap::pop_expired`] and re-arms at the new earliest deadline.
//!
//! # Layout and cost
//!
//! An *indexed 4-ary min-heap*. `heap` holds `(deadline, key)` entries in heap order; `pos`,
//! indexed by key, holds each key's slot in `heap` (`ABSENT` when the key has no timer). Keys
//! are the engine's dense slab indexes (reused after removal), so `pos` stays as long as the
//! largest live key and needs no hashing: a lookup is one array access and no sequence of keys
//! can degrade it.
//!
//! * memory: 16 bytes per entry (8-byte deadline, 4-byte key, 4 bytes of alignment padding) plus
//!   4 bytes per `pos` slot, i.e. **20 bytes per timer** with dense keys, plus the growth
//!   slack of the last chunk (below) which [`TimerHeap::shrink`] releases;
//! * growth: both arrays are segmented (`seg::SegVec`: chunks of 1024 entries that are never
//!   moved), so scheduling the millionth timer copies nothing (a `Vec` would copy the whole
//!   heap, 8 MB at half a million timers, inside that one call: issue 14);
//! * [`schedule`](TimerHeap::schedule), [`cancel`](TimerHeap::cancel),
//!   [`pop_expired`](TimerHeap::pop_expired): O(log₄ n) — 10 levels for a million timers;
//! * [`next_deadline`](TimerHeap::next_deadline), [`deadline`](TimerHeap::deadline): O(1).
//!
//! A 4-ary heap is half as deep as a binary one and its four children share one or two cache
//! lines, which makes sift-down (the path of every pop) cheaper in practice.
//!
//! # Order
//!
//! Entries are ordered by `(deadline, key)`: by deadline, and **ties are broken by the smaller
//! key** (not by insertion order, which would cost a sequence number per entry). The order is
//! total because a key is in the heap at most once, so pops are deterministic.

use crate::seg::SegVec;

/// `pos` value of a key that has no timer.
const ABSENT: u32 = u32::MAX;

/// Children per node.
const ARITY: usize = 4;

/// One heap slot: 16 bytes (8 + 4, padded to the alignment of `u64`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Entry {
    /// Absolute `CLOCK_MONOTONIC` deadline in nanoseconds.
    deadline: u64,
    /// The engine's key (slab index) of the timer.
    key: u32,
}

const _: () = assert!(core::mem::size_of::<Entry>() == 16);

impl Entry {
    /// Strict `(deadline, key)` order.
    #[inline]
    fn before(self, other: Entry) -> bool {
        (self.deadline, self.key) < (other.deadline, other.key)
    }
}

/// All timers of one queue: an indexed 4-ary min-heap of `(deadline_ns, key)` (see the module
/// documentation for the layout, the cost and the tie rule).
///
/// Keys are dense `u32` indexes smaller than `u32::MAX` (the engine's slab indexes); a key's
/// memory cost is paid up to the largest key ever scheduled until [`shrink`](Self::shrink).
#[derive(Clone, Debug, Default)]
pub struct TimerHeap {
    /// Entries in heap order: `heap[i]` is not after any of `heap[4i+1..=4i+4]`.
    heap: SegVec<Entry>,
    /// `pos[key]` = index of `key`'s entry in `heap`, or `ABSENT`.
    pos: SegVec<u32>,
}

impl TimerHeap {
    /// An empty heap; allocates nothing.
    pub fn new() -> Self {
        TimerHeap {
            heap: SegVec::new(),
            pos: SegVec::new(),
        }
    }

    /// Number of scheduled timers.
    pub fn len(&self) -> usize {
        self.heap.len()
    }

    /// `true` when no timer is scheduled.
    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }

    /// Schedules `key` to expire at `deadline_ns`: inserts it, or moves it if it is already
    /// scheduled. O(log n).
    ///
    /// # Panics
    ///
    /// If `key == u32::MAX` (reserved as the "absent" marker).
    pub fn schedule(&mut self, key: u32, deadline_ns: u64) {
        assert!(key != ABSENT, "TimerHeap: key u32::MAX is reserved");
        let k = key as usize;
        if k >= self.pos.len() {
            self.pos.resize(k + 1, ABSENT);
        }
        match self.pos[k] {
            ABSENT => {
                let i = self.heap.len();
                self.heap.push(Entry {
                    deadline: deadline_ns,
                    key,
                });
                self.sift_up(i);
            }
            i => {
                let i = i as usize;
                let old = self.heap[i].deadline;
                self.heap[i].deadline = deadline_ns;
                if deadline_ns < old {
                    self.sift_up(i);
                } else {
                    self.sift_down(i);
                }
            }
        }
    }

    /// Removes `key`'s timer; `false` if it had none. O(log n).
    pub fn cancel(&mut self, key: u32) -> bool {
        match self.slot(key) {
            Some(i) => {
                self.remove_at(i);
                true
            }
            None => false,
        }
    }

    /// `key`'s deadline, if it is scheduled. O(1).
    pub fn deadline(&self, key: u32) -> Option<u64> {
        self.slot(key).map(|i| self.heap[i].deadline)
    }

    /// The earliest deadline (what the timerfd must be armed at), or `None` when empty. O(1).
    pub fn next_deadline(&self) -> Option<u64> {
        self.heap.first().map(|e| e.deadline)
    }

    /// Removes and returns the earliest timer `(key, deadline)` if its deadline is
    /// `<= now_ns`; `None` when no timer has expired. O(log n).
    ///
    /// Call it in a loop until `None` to collect everything that expired; a periodic timer is
    /// then [`schedule`](Self::schedule)d again at its next deadline.
    pub fn pop_expired(&mut self, now_ns: u64) -> Option<(u32, u64)> {
        let top = *self.heap.first()?;
        if top.deadline > now_ns {
            return None;
        }
        self.remove_at(0);
        Some((top.key, top.deadline))
    }

    /// Releases memory after mass removal: trims `pos` to the largest scheduled key and drops
    /// both vectors' spare capacity. O(size of `pos`).
    pub fn shrink(&mut self) {
        let trailing_absent = self.pos.iter().rev().take_while(|&&p| p == ABSENT).count();
        let live = self.pos.len() - trailing_absent;
        self.pos.truncate(live);
        self.pos.shrink_to_fit();
        self.heap.shrink_to_fit();
    }

    /// Heap index of `key`, if scheduled.
    #[inline]
    fn slot(&self, key: u32) -> Option<usize> {
        match self.pos.get(key as usize) {
            Some(&p) if p != ABSENT => Some(p as usize),
            _ => None,
        }
    }

    /// Removes the entry at heap index `i`, filling the hole with the last entry.
    fn remove_at(&mut self, i: usize) {
        let removed = self.heap[i];
        self.pos[removed.key as usize] = ABSENT;
        let last = self.heap.pop().expect("remove_at on an empty heap");
        if i < self.heap.len() {
            self.heap[i] = last;
            self.pos[last.key as usize] = i as u32;
            if i > 0 && last.before(self.heap[(i - 1) / ARITY]) {
                self.sift_up(i);
            } else {
                self.sift_down(i);
            }
        }
    }

    /// Moves the entry at `i` towards the root until its parent is not after it.
    fn sift_up(&mut self, mut i: usize) {
        let e = self.heap[i];
        while i > 0 {
            let parent = (i - 1) / ARITY;
            let p = self.heap[parent];
            if !e.before(p) {
                break;
            }
            self.heap[i] = p;
            self.pos[p.key as usize] = i as u32;
            i = parent;
        }
        self.heap[i] = e;
        self.pos[e.key as usize] = i as u32;
    }

    /// Moves the entry at `i` towards the leaves until no child is before it.
    fn sift_down(&mut self, mut i: usize) {
        let e = self.heap[i];
        let n = self.heap.len();
        loop {
            let first = ARITY * i + 1;
            if first >= n {
                break;
            }
            let end = (first + ARITY).min(n);
            let mut m = first;
            for c in first + 1..end {
                if self.heap[c].before(self.heap[m]) {
                    m = c;
                }
            }
            let child = self.heap[m];
            if !child.before(e) {
                break;
            }
            self.heap[i] = child;
            self.pos[child.key as usize] = i as u32;
            i = m;
        }
        self.heap[i] = e;
        self.pos[e.key as usize] = i as u32;
    }

    /// Checks every heap and index invariant (tests only).
    #[cfg(test)]
    fn check(&self) {
        for (i, e) in self.heap.iter().enumerate() {
            assert_eq!(self.pos[e.key as usize], i as u32, "pos of key {}", e.key);
            if i > 0 {
                assert!(!e.before(self.heap[(i - 1) / ARITY]), "heap order at {i}");
            }
        }
        let present = self.pos.iter().filter(|&&p| p != ABSENT).count();
        assert_eq!(present, self.heap.len());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::{BTreeSet, HashMap};

    use kevent_test_rng::Rng;

    /// The reference model: the same `(deadline, key)` order in a `BTreeSet`.
    #[derive(Default)]
    struct Model {
        set: BTreeSet<(u64, u32)>,
        by_key: HashMap<u32, u64>,
    }
    impl Model {
        fn schedule(&mut self, key: u32, d: u64) {
            if let Some(old) = self.by_key.insert(key, d) {
                self.set.remove(&(old, key));
            }
            self.set.insert((d, key));
        }
        fn cancel(&mut self, key: u32) -> bool {
            match self.by_key.remove(&key) {
                Some(d) => self.set.remove(&(d, key)),
                None => false,
            }
        }
        fn pop_expired(&mut self, now: u64) -> Option<(u32, u64)> {
            let &(d, k) = self.set.first()?;
            if d > now {
                return None;
            }
            self.set.pop_first();
            self.by_key.remove(&k);
            Some((k, d))
        }
    }

    #[test]
    fn empty_heap() {
        let mut h = TimerHeap::new();
        assert!(h.is_empty());
        assert_eq!(h.len(), 0);
        assert_eq!(h.next_deadline(), None);
        assert_eq!(h.pop_expired(u64::MAX), None);
        assert_eq!(h.deadline(0), None);
        assert!(!h.cancel(0));
        assert!(!h.cancel(u32::MAX));
        h.shrink();
    }

    #[test]
    fn entry_and_memory_per_timer() {
        assert_eq!(
            core::mem::size_of::<Entry>() + core::mem::size_of::<u32>(),
            20
        );
    }

    #[test]
    fn pop_respects_now_and_order() {
        let mut h = TimerHeap::new();
        h.schedule(3, 30);
        h.schedule(1, 10);
        h.schedule(2, 20);
        assert_eq!(h.next_deadline(), Some(10));
        assert_eq!(h.pop_expired(9), None);
        assert_eq!(h.pop_expired(10), Some((1, 10)));
        assert_eq!(h.pop_expired(25), Some((2, 20)));
        assert_eq!(h.pop_expired(25), None);
        assert_eq!(h.len(), 1);
        assert_eq!(h.pop_expired(u64::MAX), Some((3, 30)));
        assert!(h.is_empty());
    }

    #[test]
    fn ties_are_broken_by_smaller_key() {
        let mut h = TimerHeap::new();
        for k in [7, 3, 9, 0, 5] {
            h.schedule(k, 100);
        }
        let order: Vec<u32> = std::iter::from_fn(|| h.pop_expired(100).map(|(k, _)| k)).collect();
        assert_eq!(order, [0, 3, 5, 7, 9]);
    }

    #[test]
    fn reschedule_moves_both_ways() {
        let mut h = TimerHeap::new();
        for k in 0..50u32 {
            h.schedule(k, 1000 + u64::from(k));
        }
        h.schedule(40, 1); // earlier
        h.schedule(0, 5000); // later
        h.check();
        assert_eq!(h.len(), 50);
        assert_eq!(h.deadline(40), Some(1));
        assert_eq!(h.deadline(0), Some(5000));
        assert_eq!(h.pop_expired(u64::MAX), Some((40, 1)));
        let mut last = 0;
        while let Some((k, d)) = h.pop_expired(u64::MAX) {
            assert!(d >= last);
            last = d;
            if d == 5000 {
                assert_eq!(k, 0);
            }
        }
    }

    #[test]
    fn cancel_and_reschedule_of_absent_keys() {
        let mut h = TimerHeap::new();
        assert!(!h.cancel(5));
        h.schedule(5, 50);
        assert!(h.cancel(5));
        assert!(!h.cancel(5), "second cancel of the same key");
        assert_eq!(h.deadline(5), None);
        assert!(!h.cancel(1_000_000), "key beyond every key ever used");
        // "Reschedule" of an absent (cancelled) key is an insert.
        h.schedule(5, 70);
        assert_eq!(h.deadline(5), Some(70));
        assert_eq!(h.len(), 1);
        h.check();
    }

    #[test]
    fn key_reuse_after_pop() {
        let mut h = TimerHeap::new();
        h.schedule(0, 1);
        h.schedule(1, 2);
        assert_eq!(h.pop_expired(1), Some((0, 1)));
        h.schedule(0, 3);
        assert_eq!(h.pop_expired(10), Some((1, 2)));
        assert_eq!(h.pop_expired(10), Some((0, 3)));
    }

    #[test]
    fn extreme_deadlines() {
        let mut h = TimerHeap::new();
        h.schedule(0, u64::MAX);
        h.schedule(1, 0);
        assert_eq!(h.pop_expired(0), Some((1, 0)));
        assert_eq!(h.pop_expired(u64::MAX - 1), None);
        assert_eq!(h.pop_expired(u64::MAX), Some((0, u64::MAX)));
    }

    #[test]
    #[should_panic(expected = "reserved")]
    fn key_max_is_rejected() {
        TimerHeap::new().schedule(u32::MAX, 1);
    }

    #[test]
    fn shrink_releases_memory_and_keeps_state() {
        let mut h = TimerHeap::new();
        for k in 0..10_000u32 {
            h.schedule(k, u64::from(k));
        }
        for k in 10..10_000u32 {
            assert!(h.cancel(k));
        }
        h.shrink();
        assert_eq!(h.pos.len(), 10);
        assert!(h.heap.capacity() <= 16 && h.pos.capacity() <= 16);
        assert!(h.heap.capacity() >= 10 && h.pos.capacity() >= 10);
        h.check();
        assert_eq!(h.len(), 10);
        assert_eq!(h.next_deadline(), Some(0));
        // Keys beyond the trimmed `pos` still work.
        assert!(!h.cancel(9_999));
        h.schedule(9_999, 3);
        h.check();
        while h.pop_expired(u64::MAX).is_some() {}
        h.shrink();
        assert_eq!((h.heap.capacity(), h.pos.capacity()), (0, 0));
    }

    /// Thousands of random operations, checked step by step against the `BTreeSet` model,
    /// with few distinct deadlines (many ties) and keys reused all the time.
    #[test]
    fn randomized_against_btreeset_model() {
        for seed in 1..=8u64 {
            let mut rng = Rng::new(seed);
            let mut h = TimerHeap::new();
            let mut m = Model::default();
            let key_space = [8u64, 64, 600][seed as usize % 3];
            let mut now = 0u64;
            for step in 0..6_000 {
                let key = rng.below(key_space) as u32;
                match rng.below(10) {
                    0..=3 => {
                        let d = now + rng.below(200);
                        h.schedule(key, d);
                        m.schedule(key, d);
                    }
                    4 | 5 => assert_eq!(h.cancel(key), m.cancel(key), "seed {seed} step {step}"),
                    6 | 7 => {
                        now += rng.below(30);
                        loop {
                            let got = h.pop_expired(now);
                            assert_eq!(got, m.pop_expired(now), "seed {seed} step {step}");
                            if got.is_none() {
                                break;
                            }
                        }
                    }
                    8 => assert_eq!(h.deadline(key), m.by_key.get(&key).copied()),
                    _ => {
                        if rng.below(50) == 0 {
                            h.shrink();
                        }
                    }
                }
                assert_eq!(h.len(), m.set.len());
                assert_eq!(h.next_deadline(), m.set.first().map(|&(d, _)| d));
                if step % 97 == 0 {
                    h.check();
                }
            }
            h.check();
            while let Some(got) = h.pop_expired(u64::MAX) {
                assert_eq!(Some(got), m.pop_expired(u64::MAX));
            }
            assert!(m.set.is_empty());
        }
    }

    /// Issue 3: a queue holds 1,000,000 timers. Scheduled in random order, a tenth moved and
    /// a tenth cancelled, then popped in `(deadline, key)` order (about 1.5 s in a debug build).
    #[test]
    fn million_timers_pop_in_order() {
        let n: u32 = 1_000_000;
        let mut rng = Rng::new(42);
        let mut h = TimerHeap::new();
        for key in 0..n {
            h.schedule(key, rng.below(u64::from(n) * 4));
        }
        assert_eq!(h.len(), n as usize);
        // Move a tenth of them, cancel another tenth.
        for _ in 0..n / 10 {
            let key = rng.below(u64::from(n)) as u32;
            h.schedule(key, rng.below(u64::from(n) * 4));
        }
        let mut cancelled = 0;
        for key in (0..n).step_by(10) {
            cancelled += usize::from(h.cancel(key));
        }
        assert_eq!(h.len(), n as usize - cancelled);
        let mut prev = (0u64, 0u32);
        let mut popped = 0;
        while let Some((key, d)) = h.pop_expired(u64::MAX) {
            assert!(
                (d, key) > prev || popped == 0,
                "out of order: {prev:?} then {:?}",
                (d, key)
            );
            assert_ne!(key % 10, 0, "cancelled key {key} popped");
            prev = (d, key);
            popped += 1;
        }
        assert_eq!(popped, n as usize - cancelled);
        assert!(h.is_empty());
    }
}
