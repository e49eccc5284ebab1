//! Segmented containers: a vector and a FIFO that grow by whole chunks, so that no single
//! push ever copies the container (issue 14: no `kevent_ctl` call and no wait may stall
//! because an engine table grew).
//!
//! A `Vec` that doubles copies every element it holds, once per doubling: at half a million
//! 80-byte registry slots that is a 40 MB copy inside one `kevent_ctl(ADD)` of one entry (or,
//! when the allocator can `mremap` the block, hundreds of microseconds of page-table work).
//! [`SegVec`] and [`SegDeque`] store their elements in chunks of [`CHUNK`] elements instead.
//! The first chunk grows like a `Vec` up to [`CHUNK`] (so a queue holding a few kevents pays
//! for a few slots, not for a whole chunk); later chunks are allocated whole, and a chunk is
//! never moved. The most one push copies is half of the first chunk; the outer table of chunk
//! headers doubles too, but it holds one 24-byte `Vec` header per [`CHUNK`] elements (24 KB
//! at a million).
//!
//! Indexing costs one more dependent load than a `Vec` (the chunk's header); both loads are
//! bounds-checked, so the containers are safe code.

use std::collections::VecDeque;

/// log₂ of [`CHUNK`].
const SHIFT: u32 = 10;
/// Elements per full chunk.
pub(crate) const CHUNK: usize = 1 << SHIFT;
const MASK: usize = CHUNK - 1;

/// A vector stored in chunks of [`CHUNK`] elements (see the module documentation).
#[derive(Clone, Debug)]
pub(crate) struct SegVec<T> {
    /// Every chunk before the one element `len` goes into holds exactly [`CHUNK`] elements;
    /// at most one empty chunk is kept after the last element (see [`SegVec::pop`]).
    chunks: Vec<Vec<T>>,
    len: usize,
}

impl<T> Default for SegVec<T> {
    fn default() -> Self {
        SegVec::new()
    }
}

impl<T> SegVec<T> {
    /// An empty vector; allocates nothing.
    pub(crate) const fn new() -> Self {
        SegVec {
            chunks: Vec::new(),
            len: 0,
        }
    }

    /// Number of elements.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// `true` when empty.
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Appends `value`. Never moves more than half a chunk.
    pub(crate) fn push(&mut self, value: T) {
        let c = self.len >> SHIFT;
        if c == self.chunks.len() {
            // The first chunk grows like a Vec (a small queue pays for what it holds); later
            // ones are allocated whole, so that filling them never reallocates.
            self.chunks.push(if c == 0 {
                Vec::new()
            } else {
                Vec::with_capacity(CHUNK)
            });
        }
        self.chunks[c].push(value);
        self.len += 1;
    }

    /// Removes and returns the last element. A chunk emptied by a pop is kept as a spare
    /// (so that pushes and pops around a chunk boundary do not allocate every time); an
    /// older spare is freed.
    pub(crate) fn pop(&mut self) -> Option<T> {
        if self.len == 0 {
            return None;
        }
        self.len -= 1;
        let c = self.len >> SHIFT;
        let value = self.chunks[c].pop();
        // Chunks after `c` are empty: keep at most one empty chunk.
        let keep = if self.chunks[c].is_empty() {
            c + 1
        } else {
            c + 2
        };
        self.chunks.truncate(keep);
        value
    }

    /// The element at `i`.
    #[inline]
    pub(crate) fn get(&self, i: usize) -> Option<&T> {
        self.chunks.get(i >> SHIFT)?.get(i & MASK)
    }

    /// The element at `i`, mutably.
    #[inline]
    pub(crate) fn get_mut(&mut self, i: usize) -> Option<&mut T> {
        self.chunks.get_mut(i >> SHIFT)?.get_mut(i & MASK)
    }

    /// The first element.
    #[inline]
    pub(crate) fn first(&self) -> Option<&T> {
        self.get(0)
    }

    /// Shortens the vector to `len` elements (no effect if it is not longer).
    pub(crate) fn truncate(&mut self, len: usize) {
        while self.len > len {
            self.pop();
        }
    }

    /// Frees every chunk that holds no element and the spare room of the last one.
    pub(crate) fn shrink_to_fit(&mut self) {
        let used = self.len.div_ceil(CHUNK);
        self.chunks.truncate(used);
        if let Some(last) = self.chunks.last_mut() {
            last.shrink_to_fit();
        }
        self.chunks.shrink_to_fit();
    }

    /// Elements the allocated chunks can hold without allocating.
    #[cfg(test)]
    pub(crate) fn capacity(&self) -> usize {
        self.chunks.iter().map(Vec::capacity).sum()
    }

    /// Every element, in order.
    pub(crate) fn iter(&self) -> impl DoubleEndedIterator<Item = &T> {
        self.chunks.iter().flat_map(|c| c.iter())
    }
}

impl<T: Clone> SegVec<T> {
    /// Grows the vector to `len` elements with clones of `value` (no effect if it is not
    /// shorter).
    pub(crate) fn resize(&mut self, len: usize, value: T) {
        while self.len < len {
            self.push(value.clone());
        }
    }
}

impl<T> std::ops::Index<usize> for SegVec<T> {
    type Output = T;

    #[inline]
    fn index(&self, i: usize) -> &T {
        &self.chunks[i >> SHIFT][i & MASK]
    }
}

impl<T> std::ops::IndexMut<usize> for SegVec<T> {
    #[inline]
    fn index_mut(&mut self, i: usize) -> &mut T {
        &mut self.chunks[i >> SHIFT][i & MASK]
    }
}

/// A FIFO stored in chunks of [`CHUNK`] elements: `push_back` and `pop_front` never move
/// the elements already queued (a `VecDeque` copies all of them when it doubles).
#[derive(Clone, Debug)]
pub(crate) struct SegDeque<T> {
    /// Every chunk but the last holds exactly [`CHUNK`] elements (the first one's first
    /// `head` already taken); the last holds 1..=CHUNK, or none when the queue is empty.
    chunks: VecDeque<Vec<T>>,
    /// Elements of the first chunk already taken.
    head: usize,
    len: usize,
}

impl<T: Copy> Default for SegDeque<T> {
    fn default() -> Self {
        SegDeque::new()
    }
}

impl<T: Copy> SegDeque<T> {
    /// An empty queue; allocates nothing.
    pub(crate) const fn new() -> Self {
        SegDeque {
            chunks: VecDeque::new(),
            head: 0,
            len: 0,
        }
    }

    /// Number of queued elements.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// `true` when empty.
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Appends `value` at the back.
    pub(crate) fn push_back(&mut self, value: T) {
        match self.chunks.back_mut() {
            Some(last) if last.len() < CHUNK => last.push(value),
            Some(_) => {
                let mut c = Vec::with_capacity(CHUNK);
                c.push(value);
                self.chunks.push_back(c);
            }
            None => self.chunks.push_back(vec![value]),
        }
        self.len += 1;
    }

    /// Removes and returns the front element.
    pub(crate) fn pop_front(&mut self) -> Option<T> {
        let only = self.chunks.len() == 1;
        let first = self.chunks.front_mut()?;
        let value = *first.get(self.head)?;
        self.head += 1;
        self.len -= 1;
        if self.head == first.len() {
            self.head = 0;
            if only {
                // The only chunk: keep its allocation for the next pushes.
                first.clear();
            } else {
                self.chunks.pop_front();
            }
        }
        Some(value)
    }

    /// Appends every element of `values`, in order.
    pub(crate) fn extend(&mut self, values: impl IntoIterator<Item = T>) {
        for v in values {
            self.push_back(v);
        }
    }

    /// Empties the queue, keeping the first chunk's allocation.
    pub(crate) fn clear(&mut self) {
        self.chunks.truncate(1);
        if let Some(first) = self.chunks.front_mut() {
            first.clear();
        }
        self.head = 0;
        self.len = 0;
    }

    /// Keeps only the elements for which `keep` is true, in order. O(len): the caller
    /// amortises it (see `State::compact_ready`).
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(&T) -> bool) {
        let mut kept = SegDeque::new();
        while let Some(v) = self.pop_front() {
            if keep(&v) {
                kept.push_back(v);
            }
        }
        *self = kept;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;

    #[test]
    fn segvec_behaves_like_a_vec_across_chunks() {
        let mut s = SegVec::new();
        let mut v = Vec::new();
        for i in 0..3 * CHUNK + 7 {
            s.push(i);
            v.push(i);
        }
        assert_eq!(s.len(), v.len());
        assert!(s.iter().eq(v.iter()));
        assert_eq!(s[CHUNK], CHUNK);
        assert_eq!(s.get(3 * CHUNK + 7), None);
        s[5] = 99;
        *s.get_mut(CHUNK + 1).unwrap() = 77;
        v[5] = 99;
        v[CHUNK + 1] = 77;
        // Pops across a chunk boundary and back.
        for _ in 0..CHUNK + 10 {
            assert_eq!(s.pop(), v.pop());
        }
        for i in 0..20 {
            s.push(i);
            v.push(i);
        }
        assert!(s.iter().eq(v.iter()));
        assert!(s.iter().rev().eq(v.iter().rev()));
        s.truncate(3);
        assert_eq!(s.len(), 3);
        assert_eq!(s.first(), Some(&0));
        s.shrink_to_fit();
        assert!(s.capacity() >= 3 && s.capacity() < CHUNK);
        s.resize(CHUNK + 2, 4);
        assert_eq!((s.len(), s[CHUNK + 1]), (CHUNK + 2, 4));
        while s.pop().is_some() {}
        assert!(s.is_empty());
        s.shrink_to_fit();
        assert_eq!(s.capacity(), 0);
    }

    #[test]
    fn segvec_full_chunks_never_move() {
        let mut s = SegVec::new();
        for i in 0..CHUNK {
            s.push(i);
        }
        let first: *const usize = &s[0];
        for i in 0..10 * CHUNK {
            s.push(i);
        }
        assert!(std::ptr::eq(first, &s[0]), "a full chunk was moved");
    }

    #[test]
    fn segdeque_is_a_fifo() {
        let mut d = SegDeque::new();
        let mut m = VecDeque::new();
        let mut next = 0u64;
        // Bursts of pushes and pops of varying sizes, across chunk boundaries.
        for round in 0..40usize {
            for _ in 0..(round * 97) % (3 * CHUNK) {
                d.push_back(next);
                m.push_back(next);
                next += 1;
            }
            for _ in 0..(round * 61) % (2 * CHUNK) {
                assert_eq!(d.pop_front(), m.pop_front());
            }
            assert_eq!(d.len(), m.len());
            assert_eq!(d.is_empty(), m.is_empty());
        }
        d.retain(|v| v % 3 == 0);
        m.retain(|v| v % 3 == 0);
        d.extend([1_000_000, 1_000_001]);
        m.extend([1_000_000, 1_000_001]);
        while let Some(v) = m.pop_front() {
            assert_eq!(d.pop_front(), Some(v));
        }
        assert_eq!(d.pop_front(), None);
        d.push_back(5);
        d.clear();
        assert!(d.is_empty());
        assert_eq!(d.pop_front(), None);
        d.push_back(6);
        assert_eq!(d.pop_front(), Some(6));
    }
}
