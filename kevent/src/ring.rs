//! The ring: memory the queue writes ready events into, and the two ways to consume it.
//!
//! A queue built with [`Builder::ring_size`](crate::Builder::ring_size) owns a ring of `n`
//! slots (spec section 1). The queue (the kernel, or the fallback's producer) writes entries
//! into free slots and then publishes `ring_kidx`; a consumer reads the entries between its
//! consumer index and `ring_kidx`, then *commits* them with `kevent_commit`, which releases
//! the slots for reuse. At most `n - 1` events are uncommitted at once (**D12**).
//!
//! * [`RingConsumer`] ([`Queue::ring`](crate::Queue::ring)): one thread. `wait` returns a
//!   [`Snapshot`]; iterating it reads entries; dropping it (or [`Snapshot::commit`]) commits
//!   what was read. io-uring's snapshot-and-publish pattern.
//! * [`SharedRing`] ([`Queue::shared_ring`](crate::Queue::shared_ring)): several threads.
//!   Each `wait` claims a contiguous run of entries as a [`Batch`] (a `&[Event]` borrowed from
//!   the ring itself, no copy); dropping the batch marks its slots done, and the slots are
//!   committed once *every* slot before them is done, because a commit releases every slot up
//!   to its index (**D13**).
//!
//! # Memory ordering
//!
//! The protocol (header orderings, slot addressing, occupancy) is the one of
//! [`kevent_sys::ring`]: the producer writes entries and then stores `ring_kidx` with
//! Release; these consumers load it with Acquire ([`RingView::kidx`]) before reading the
//! entries below it. `ring_over` is written by `kevent_commit` (Release) and loaded with
//! Acquire. Positions here are absolute (`u64`); they are reduced mod `n` only to address a
//! slot or to name an index to the ABI.
//!
//! # Safety
//!
//! This module holds the crate's unsafe code for ring memory and for adopting the queue fd:
//!
//! * [`RingMem`] is an anonymous mapping ([`AnonMap`]) of `8 + n * 40` bytes, page-aligned,
//!   owned by the queue. It is only ever accessed through its [`RingView`] (atomics for the
//!   two indices, raw slot pointers), never through `&mut`, because the producer writes it
//!   behind Rust's back.
//! * The memory must stay valid until the queue fd *and every duplicate of it* are closed
//!   (`kevent_init`'s contract). The queue closes its fd before the ring is dropped (field
//!   order of `Inner`). A duplicate made with `as_fd().try_clone_to_owned()` (safe code) could
//!   outlive the queue: on the native backend the kernel would then write through it into
//!   freed memory, so a native ring is never unmapped but replaced by an inaccessible
//!   (`PROT_NONE`) reservation, where such writes fail with `EFAULT` (address space is kept,
//!   memory is returned). The fallback engine recognises a queue by its fd number only, so a
//!   duplicate is not a queue there and its ring is simply unmapped.
//! * On the fallback the queue declares that it owns its fd and sees every close of it
//!   (decision P65, [`kevent_backend::owns_queue`]): while the declaration lives, the engine
//!   skips its proof that the number still names the queue (the commit's only system call)
//!   and may write the ring without one. The declaration is dropped before the fd is closed
//!   and before the ring is freed (field order of `Inner`), so the engine never writes the
//!   ring unproven once the queue is gone. Closing the fd behind the queue's back (unsafe
//!   code: `libc::close`, `dup2` onto it) breaks Rust's I/O safety, not memory safety: the
//!   ring the engine then writes is still this queue's mapping, alive until the queue drops.
//! * A slot is read, or referenced as `&Event`, only between the consumer index and the
//!   published `ring_kidx`. The producer writes only free slots, and a slot becomes free only
//!   when a commit releases it; this module commits a slot only after every reader of it is
//!   done (the `Snapshot` has moved past it, the `Batch` referencing it was dropped).
#![allow(unsafe_code)]

use std::cell::Cell;
use std::marker::PhantomData;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};

use kevent_sys::Errno;
use kevent_sys::mem::AnonMap;
use kevent_sys::ring::{self, RingView};

use crate::error::{Error, Op, Result};
use crate::event::Event;
use crate::queue::Queue;
use crate::timeout::Timeout;
use kevent_backend::{Backend, QueueOwner};

/// The largest ring this crate allocates: 2^22 slots (160 MiB of address space, touched
/// only as it fills).
pub const MAX_RING_SIZE: u32 = 1 << 22;

/// A queue's ring memory (see the module's `# Safety`).
#[derive(Debug)]
pub(crate) struct RingMem {
    view: RingView,
    n: u32,
    /// The mapping, kept as an inaccessible reservation instead of unmapped on drop where
    /// a duplicate fd is a queue (the module's `# Safety`).
    _map: AnonMap,
}

/// A ring's mapping of `len` bytes: reserved (inaccessible) instead of unmapped on drop
/// where a duplicate fd is a queue (the module's `# Safety`).
fn mapping(len: usize, backend: &Backend) -> std::result::Result<AnonMap, Errno> {
    let mut map = AnonMap::new(len)?;
    if backend.dup_is_queue() {
        map.reserve_on_drop();
    }
    Ok(map)
}

/// The `kevent_init` flag a ring needs: 0, or `KEVENT_INIT_ASYNC_RING` (P38).
fn init_flags(ring: &RingMem) -> u32 {
    if ring.view.is_async() {
        kevent_sys::KEVENT_INIT_ASYNC_RING
    } else {
        0
    }
}

// SAFETY: the memory is owned by this value and only accessed through raw pointers and
// atomics; no `&`/`&mut` to it is handed out except `&Event`s to slots that no one writes
// while the reference lives (module `# Safety`). Moving or sharing the owner between threads
// therefore creates no data race.
unsafe impl Send for RingMem {}
// SAFETY: as for `Send`: `&RingMem` only permits atomic index loads and reads of published,
// uncommitted slots.
unsafe impl Sync for RingMem {}

impl RingMem {
    /// Maps a zeroed ring of `n` slots (`2 <= n <= MAX_RING_SIZE`).
    pub(crate) fn new(n: u32, backend: &Backend) -> std::result::Result<RingMem, Errno> {
        if !(2..=MAX_RING_SIZE).contains(&n) {
            return Err(Errno::EINVAL);
        }
        let map = mapping(kevent_sys::ring_bytes(n).ok_or(Errno::EINVAL)?, backend)?;
        Ok(RingMem {
            // SAFETY: our fresh mapping of `ring_bytes(n)` bytes, page-aligned, lives until
            // `drop` (which runs after the queue fd is closed); nothing references it but
            // this view.
            view: unsafe { RingView::new(map.base().cast(), n) },
            n,
            _map: map,
        })
    }

    /// Maps a zeroed asynchronous ring (P38) of `n` slots and its tail
    /// (`2 <= n <= KEVENT_RING_ASYNC_MAX`).
    ///
    /// Natively the kernel pins these pages until the queue's *file* is released (not only
    /// its fd: a call in progress holds it too) and writes them from interrupt context. The
    /// memory is therefore an anonymous mapping, never the heap: after it is gone the pinned
    /// pages belong to nobody else. The queue's `Arc` keeps it for as long as any handle
    /// ([`Queue::try_clone`](crate::Queue::try_clone)) or call lives, and on native it is
    /// then replaced by an inaccessible reservation, as an ordinary native ring is.
    pub(crate) fn new_async(n: u32, backend: &Backend) -> std::result::Result<RingMem, Errno> {
        let map = mapping(ring::async_ring_bytes(n).ok_or(Errno::EINVAL)?, backend)?;
        Ok(RingMem {
            // SAFETY: our fresh mapping of `async_ring_bytes(n)` bytes, page-aligned, lives
            // until `drop` (after the queue fd is closed); nothing references it but this
            // view.
            view: unsafe { RingView::new_async(map.base().cast(), n) },
            n,
            _map: map,
        })
    }

    /// Whether this is an asynchronous ring (P38).
    pub(crate) fn is_async(&self) -> bool {
        self.view.is_async()
    }

    /// An asynchronous ring's `ring_kidx` (Acquire) as the consumer may use it: `None` for a
    /// value `>= n` (only a misbehaving producer writes one).
    pub(crate) fn published(&self) -> Option<u32> {
        Some(self.view.kidx()).filter(|&k| k < self.n)
    }

    /// Copies slot `i` (an index `< n`) out.
    ///
    /// The caller only reads slots between its consumer index and a `ring_kidx` it loaded
    /// (module `# Safety`).
    pub(crate) fn read_slot(&self, i: u32) -> Event {
        // SAFETY: the slot is published and not yet released (the caller's guarantee), so
        // the producer does not write it now.
        Event::from_raw(unsafe { self.view.read(i) })
    }

    /// The asynchronous ring's release: stores `ring_uidx` (Release) after the slots below
    /// it were read. Nothing on an ordinary ring.
    pub(crate) fn release(&self, uidx: u32) {
        let _ = self.view.store_uidx(uidx);
    }

    /// The ring size `n`.
    pub(crate) fn size(&self) -> u32 {
        self.n
    }

    /// `ring_kidx`, loaded with Acquire ([`RingView::kidx`]), clamped below `n`: a value
    /// `>= n` can only come from a misbehaving producer; never index with it.
    fn kidx(&self) -> u32 {
        self.view.kidx().min(self.n - 1)
    }

    /// `ring_over`, loaded with Acquire (written by `kevent_commit`).
    fn over(&self) -> u32 {
        self.view.over()
    }

    /// Slot index of the absolute position `i`.
    fn index(&self, i: u64) -> u32 {
        (i % u64::from(self.n)) as u32
    }

    /// Copies slot `i` out.
    ///
    /// The caller only reads published, uncommitted slots (module `# Safety`).
    fn read(&self, i: u64) -> Event {
        // SAFETY: the slot is published and uncommitted (the caller's guarantee), so the
        // producer does not write it now.
        Event::from_raw(unsafe { self.view.read(self.index(i)) })
    }

    /// The slots `start..start + len` (not crossing the end of the array) as events.
    ///
    /// The caller guarantees the slots are published and stay uncommitted while the
    /// returned slice lives (module `# Safety`).
    fn slice(&self, start: u64, len: u32) -> &[Event] {
        if len == 0 {
            return &[];
        }
        let first = self.index(start);
        let len = len.min(self.n - first) as usize;
        // SAFETY: `len` slots from `first` lie inside the mapping (clamped above); `Event` is
        // `repr(transparent)` over `ukevent`; no one writes these slots while the slice lives
        // (the caller's guarantee).
        unsafe { std::slice::from_raw_parts(self.view.slot(first).cast::<Event>(), len) }
    }
}

/// `kevent_init(ring, n, flags)` through `backend`, adopting the new fd (`flags` is
/// `KEVENT_INIT_ASYNC_RING` for an asynchronous ring, else 0), and the declaration that the
/// queue owns it (P65, the module's `# Safety`), to be dropped before the fd.
pub(crate) fn init(
    backend: &Backend,
    ring: Option<&RingMem>,
) -> std::result::Result<(OwnedFd, QueueOwner), Errno> {
    let (ptr, n, flags) = match ring {
        Some(r) => (r.view.base().as_ptr(), r.n, init_flags(r)),
        None => (std::ptr::null_mut(), 0, 0),
    };
    // SAFETY: `ptr` is null with `n == 0`, or our mapping of `8 + n * 40` bytes (plus the
    // tail for an asynchronous ring), 8-aligned, which the queue keeps valid until its fd is
    // closed (and, on native, reserved forever after): `init`'s contract. No `&`/`&mut` to
    // it exists.
    let fd = unsafe { kevent_backend::init(*backend, ptr, n, flags) }?;
    if fd < 0 {
        return Err(Errno::EIO);
    }
    // SAFETY: kevent_init returned a new fd that nothing else owns; we take ownership once.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: the queue owns `fd` (closed only by its drop, after the declaration's) and the
    // ring (freed after both), so the number names the queue and the ring is valid while
    // the declaration lives (the module's `# Safety`).
    let owner = unsafe { kevent_backend::owns_queue(*backend, fd.as_raw_fd()) }?;
    Ok((fd, owner))
}

/// How many produced entries lie at or after `pos` (absolute): the ring's occupancy from
/// `pos` to `ring_kidx`. Valid because `pos` is never more than `n - 1` behind the producer
/// (**D12**).
fn produced_after(ring: &RingMem, pos: u64) -> u32 {
    ring::occupancy(ring.n, ring.kidx(), ring.index(pos))
}

/// The single consumer of a queue's ring.
///
/// Made by [`Queue::ring`](crate::Queue::ring); there is at most one consumer (single or
/// shared) per queue at a time. `Send` but not `Sync`: it *is* the consumer index. Sharing it
/// between threads, even through `&`, would let two threads believe they own the same
/// entries; the ABI's single-consumer commit (`(uidx + k) % n`) is only exact for one
/// committer. Use [`SharedRing`] to consume from several threads.
///
/// ```
/// use kevent::{Key, Queue, Timeout, User};
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let queue = Queue::builder().ring_size(8).build()?;
/// let _u = queue.add(User::new(1))?;
/// let mut ring = queue.ring()?;
/// queue.ready(&[Key::user(1)])?;
/// let snapshot = ring.wait(Timeout::FOREVER)?;
/// let ids: Vec<u64> = snapshot.map(|e| e.key().id()).collect();
/// assert_eq!(ids, [1]); // the snapshot was dropped by `map`'s end: committed
/// # Ok(()) }
/// ```
///
/// It cannot be shared between threads:
///
/// ```compile_fail,E0277
/// fn is_sync<T: Sync>() {}
/// is_sync::<kevent::RingConsumer<'static>>();
/// ```
#[derive(Debug)]
pub struct RingConsumer<'q> {
    queue: &'q Queue,
    ring: &'q RingMem,
    /// The consumer index after the last successful commit (absolute).
    committed: u64,
    /// The next entry to read (absolute); `committed <= pos`.
    pos: u64,
    /// `!Sync` (see the type's docs), still `Send`.
    _not_sync: PhantomData<Cell<()>>,
}

impl<'q> RingConsumer<'q> {
    pub(crate) fn new(queue: &'q Queue, ring: &'q RingMem, committed: u64) -> Self {
        RingConsumer {
            queue,
            ring,
            committed,
            pos: committed,
            _not_sync: PhantomData,
        }
    }

    /// The ring size `n`.
    pub fn size(&self) -> u32 {
        self.ring.n
    }

    /// Entries published and not yet read.
    pub fn available(&self) -> u32 {
        produced_after(self.ring, self.pos)
    }

    /// `kevent_wait(fd, n - 1, uidx, timeout)`—Waits until the queue has ready events and
    /// moves them into the ring, then returns a snapshot of every unread entry.
    ///
    /// If unread entries are already in the ring, it does not call `kevent_wait` at all.
    /// Otherwise it first commits what was read, so that `old_uidx` is current, then waits.
    /// The snapshot may be empty (timeout, or a [`Queue::wake`](crate::Queue::wake)).
    ///
    /// # Errors
    ///
    /// [`Op::Commit`] or [`Op::Wait`] with the backend's error: `EBADF`/`EINVAL` if the queue
    /// fd is not a queue (spec section 3), `EINVAL` for a timeout the ABI refuses.
    pub fn wait(&mut self, timeout: impl Into<Timeout>) -> Result<Snapshot<'_, 'q>> {
        if self.available() == 0 {
            self.commit_read(self.ring.over())?;
            let (ts, flags) = timeout.into().as_timespec();
            let uidx = self.ring.index(self.committed);
            self.queue
                .backend()
                .wait(self.queue.as_raw_fd(), self.ring.n - 1, uidx, &ts, flags)
                .map_err(|e| Error::os(Op::Wait, e))?;
        }
        Ok(self.snapshot())
    }

    /// A snapshot of the unread entries, without waiting (one Acquire load of `ring_kidx`).
    pub fn snapshot(&mut self) -> Snapshot<'_, 'q> {
        // ring_over is read before consuming: it is the `over` the commit passes (spec).
        let over = self.ring.over();
        let end = self.pos + u64::from(self.available());
        Snapshot {
            consumer: self,
            end,
            over,
        }
    }

    /// `kevent_commit(fd, pos % n, over)`: releases every entry read so far.
    fn commit_read(&mut self, over: u32) -> Result<u32> {
        if self.pos == self.committed {
            return Ok(0);
        }
        let new_uidx = self.ring.index(self.pos);
        let released = self
            .queue
            .backend()
            .commit(self.queue.as_raw_fd(), new_uidx, over)
            .map_err(|e| Error::os(Op::Commit, e))?;
        self.committed = self.pos;
        Ok(released)
    }
}

impl Drop for RingConsumer<'_> {
    fn drop(&mut self) {
        let _ = self.commit_read(self.ring.over());
        self.queue.release_consumer(self.committed);
    }
}

/// The unread entries of a [`RingConsumer`] at one moment: an iterator of [`Event`]s.
///
/// Iterating reads entries (copies them out of the ring). Dropping the snapshot commits the
/// entries read; entries not read stay in the ring for the next snapshot.
#[derive(Debug)]
pub struct Snapshot<'c, 'q> {
    consumer: &'c mut RingConsumer<'q>,
    end: u64,
    over: u32,
}

impl Snapshot<'_, '_> {
    /// Entries left in this snapshot.
    pub fn len(&self) -> usize {
        (self.end - self.consumer.pos) as usize
    }

    /// Whether every entry of this snapshot was read.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `kevent_commit`—Releases the entries read so far and returns how many slots were
    /// released (what dropping the snapshot does, with the error reported).
    ///
    /// # Errors
    ///
    /// [`Op::Commit`] with the backend's error (`EBADF`/`EINVAL` for a queue fd that is not a
    /// queue; `EOVERFLOW` cannot happen to a single consumer).
    pub fn commit(self) -> Result<u32> {
        let over = self.over;
        self.consumer.commit_read(over)
    }
}

impl Iterator for Snapshot<'_, '_> {
    type Item = Event;

    fn next(&mut self) -> Option<Event> {
        if self.consumer.pos >= self.end {
            return None;
        }
        let ev = self.consumer.ring.read(self.consumer.pos);
        self.consumer.pos += 1;
        Some(ev)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.len(), Some(self.len()))
    }
}

impl ExactSizeIterator for Snapshot<'_, '_> {}

impl Drop for Snapshot<'_, '_> {
    fn drop(&mut self) {
        let _ = self.consumer.commit_read(self.over);
    }
}

/// A ring consumed by several threads at once.
///
/// Made by [`Queue::shared_ring`](crate::Queue::shared_ring); `Sync`, so share it by
/// reference (scoped threads) or in an `Arc`. Each [`SharedRing::wait`] claims a run of
/// entries for the calling thread as a [`Batch`], which borrows them from the ring in place.
/// When a batch is dropped its slots are marked done, and the longest prefix of done slots is
/// committed.
///
/// # How commits stay correct (D13)
///
/// A commit releases *every* slot up to the index it names, so a thread may not simply commit
/// its own batch: an earlier batch may still be in use. Each slot has a done flag (the
/// absolute position of the entry finished in it, so flags of earlier laps do not count), and
/// the committed cursor only moves over a prefix of done slots.
///
/// Commits go through one short lock. Besides keeping the cursor exact, this closes a gap the
/// ABI leaves open: the queue maps a committed index to the position *within one ring of the
/// producer*, so a commit delayed by a whole ring (a thread descheduled while others commit
/// and the producer laps it) would name a *later* position and release slots still in use.
/// Serialised commits are never stale, so this cannot happen.
///
/// ```
/// use kevent::{Key, Queue, User};
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let queue = Queue::builder().ring_size(16).build()?;
/// let regs = (0..8).map(|i| queue.add(User::new(i))).collect::<Result<Vec<_>, _>>()?;
/// let keys: Vec<Key> = (0..8).map(Key::user).collect();
/// queue.ready(&keys)?;
/// let ring = queue.shared_ring()?;
/// let seen = AtomicUsize::new(0);
/// std::thread::scope(|s| {
///     for _ in 0..2 {
///         s.spawn(|| {
///             while seen.load(Ordering::SeqCst) < 8 {
///                 let batch = ring.wait(4, std::time::Duration::from_millis(20)).unwrap();
///                 seen.fetch_add(batch.len(), Ordering::SeqCst);
///             }
///         });
///     }
/// });
/// assert_eq!(seen.load(Ordering::SeqCst), 8);
/// # drop(regs);
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct SharedRing<'q> {
    queue: &'q Queue,
    ring: &'q RingMem,
    /// The next entry no thread has claimed (absolute).
    next: AtomicU64,
    /// Per slot: `position + 1` of the entry finished in it.
    done: Box<[AtomicU64]>,
    /// The consumer index (absolute), exact: every commit is made under this lock.
    committed: Mutex<u64>,
    /// A copy of `committed` for lock-free readers (`old_uidx`).
    committed_hint: AtomicU64,
    /// Signalled when a commit frees slots.
    space: Condvar,
}

impl<'q> SharedRing<'q> {
    pub(crate) fn new(queue: &'q Queue, ring: &'q RingMem, committed: u64) -> Self {
        SharedRing {
            queue,
            ring,
            next: AtomicU64::new(committed),
            done: (0..ring.n).map(|_| AtomicU64::new(0)).collect(),
            committed: Mutex::new(committed),
            committed_hint: AtomicU64::new(committed),
            space: Condvar::new(),
        }
    }

    /// The ring size `n`.
    pub fn size(&self) -> u32 {
        self.ring.n
    }

    fn lock(&self) -> MutexGuard<'_, u64> {
        // The guarded value is a plain cursor updated after a successful commit: a panic
        // elsewhere cannot leave it inconsistent.
        self.committed.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `kevent_wait`—Claims up to `max` entries for this thread, waiting (`kevent_wait`) until
    /// some are ready or `timeout` passes.
    ///
    /// The batch never crosses the end of the ring array, so it can be one slice; it is empty
    /// on timeout or after a [`Queue::wake`](crate::Queue::wake). Many threads may wait at
    /// once; each entry goes to exactly one batch.
    ///
    /// # Errors
    ///
    /// [`Op::Wait`] with the backend's error (`EBADF`/`EINVAL`: the fd is not a queue;
    /// `EINVAL`: a timeout the ABI refuses).
    pub fn wait(&self, max: usize, timeout: impl Into<Timeout>) -> Result<Batch<'_, 'q>> {
        let deadline = timeout.into().deadline();
        let n = self.ring.n;
        let max = u32::try_from(max.max(1)).unwrap_or(u32::MAX);
        loop {
            let next = self.next.load(Ordering::Acquire);
            // `next` was loaded first: no commit passes it, so the producer is at most n - 1
            // entries ahead of it and the modular distance is exact.
            let avail = produced_after(self.ring, next);
            if avail > 0 {
                let to_end = n - self.ring.index(next);
                let k = avail.min(to_end).min(max);
                if self
                    .next
                    .compare_exchange(
                        next,
                        next + u64::from(k),
                        Ordering::AcqRel,
                        Ordering::Acquire,
                    )
                    .is_ok()
                {
                    return Ok(Batch {
                        ring: self,
                        start: next,
                        len: k,
                        finished: false,
                    });
                }
                continue;
            }
            let committed = self.committed_hint.load(Ordering::Acquire);
            if next.saturating_sub(committed) >= u64::from(n - 1) {
                // Every slot is claimed and not yet committed: wait for a batch to finish.
                let guard = self.lock();
                if *guard == committed {
                    let left = Timeout::remaining(deadline);
                    if left.is_now() {
                        return Ok(self.empty());
                    }
                    let d = deadline.map_or(std::time::Duration::from_millis(100), |d| {
                        d.saturating_duration_since(std::time::Instant::now())
                    });
                    drop(self.space.wait_timeout(guard, d));
                }
                continue;
            }
            let left = Timeout::remaining(deadline);
            let (ts, flags) = left.as_timespec();
            let uidx = self.ring.index(committed);
            let moved = self
                .queue
                .backend()
                .wait(self.queue.as_raw_fd(), n - 1, uidx, &ts, flags)
                .map_err(|e| Error::os(Op::Wait, e))?;
            if moved == 0 && self.committed_hint.load(Ordering::Acquire) == committed {
                // Not a stale `old_uidx`: the timeout passed or a wake-up came.
                if produced_after(self.ring, self.next.load(Ordering::Acquire)) == 0 {
                    return Ok(self.empty());
                }
            }
            if left.is_now() && moved == 0 {
                return Ok(self.empty());
            }
        }
    }

    fn empty(&self) -> Batch<'_, 'q> {
        Batch {
            ring: self,
            start: 0,
            len: 0,
            finished: true,
        }
    }

    /// Marks `start..start + len` done and commits the longest done prefix.
    fn finish(&self, start: u64, len: u32) -> Result<u32> {
        for pos in start..start + u64::from(len) {
            // Release: pairs with the committer's Acquire load, so every read of the slot
            // (through the batch) happens before the slot is released.
            self.done[self.ring.index(pos) as usize].store(pos + 1, Ordering::Release);
        }
        self.commit_done()
    }

    /// `kevent_commit`—Commits the longest prefix of done slots; returns the slots released.
    fn commit_done(&self) -> Result<u32> {
        let mut committed = self.lock();
        let limit = self.next.load(Ordering::Acquire);
        let mut pos = *committed;
        while pos < limit
            && self.done[self.ring.index(pos) as usize].load(Ordering::Acquire) == pos + 1
        {
            pos += 1;
        }
        if pos == *committed {
            return Ok(0);
        }
        let released = self
            .queue
            .backend()
            .commit(
                self.queue.as_raw_fd(),
                self.ring.index(pos),
                self.ring.over(),
            )
            .map_err(|e| Error::os(Op::Commit, e))?;
        *committed = pos;
        self.committed_hint.store(pos, Ordering::Release);
        self.space.notify_all();
        Ok(released)
    }
}

impl Drop for SharedRing<'_> {
    fn drop(&mut self) {
        let committed = *self.lock();
        self.queue.release_consumer(committed);
    }
}

/// Entries of a [`SharedRing`] claimed by one thread: a slice of [`Event`]s read in place.
///
/// Dropping the batch (or [`Batch::finish`]) marks its slots done; they are committed once
/// every earlier slot is done too.
#[derive(Debug)]
pub struct Batch<'r, 'q> {
    ring: &'r SharedRing<'q>,
    start: u64,
    len: u32,
    finished: bool,
}

impl Batch<'_, '_> {
    /// `kevent_commit`—Marks the batch done and commits every done prefix; returns the slots
    /// released by this call (0 when an earlier batch is still in use: its owner commits).
    ///
    /// # Errors
    ///
    /// [`Op::Commit`] with the backend's error (`EBADF`/`EINVAL` for a queue fd that is not a
    /// queue).
    pub fn finish(mut self) -> Result<u32> {
        self.finished = true;
        self.ring.finish(self.start, self.len)
    }
}

impl std::ops::Deref for Batch<'_, '_> {
    type Target = [Event];

    fn deref(&self) -> &[Event] {
        if self.finished {
            return &[];
        }
        // The claimed slots are published (below `ring_kidx` when claimed) and are not
        // committed before this batch is dropped or finished.
        self.ring.ring.slice(self.start, self.len)
    }
}

impl Drop for Batch<'_, '_> {
    fn drop(&mut self) {
        if !self.finished {
            self.finished = true;
            let _ = self.ring.finish(self.start, self.len);
        }
    }
}
