//! The asynchronous ring's consumer (decision P38): [`AsyncRing`].
//!
//! A queue built with [`Builder::async_ring_size`](crate::Builder::async_ring_size) (or
//! [`Queue::with_async_ring`]) has a ring the queue posts events into *as they occur*
//! (natively from the context where they occur; on the fallback inside the queue's calls,
//! decision P41). Its single consumer reads the slots between its index and `ring_kidx`
//! (loaded with Acquire) and releases each slot by storing its new index into the ring's
//! `ring_uidx` (Release): no system call at all while events are there. Only when it finds
//! the ring empty does it call `kevent_wait(old_uidx = its index)`, which returns at once
//! when events arrived in between (the race between "empty" and sleeping is closed by the
//! queue) and sleeps otherwise.
//!
//! # Memory lifetime
//!
//! The ring is an anonymous mapping owned by the queue's shared state, which every handle
//! ([`Queue::try_clone`]) and every call in progress keeps alive; it is released only after
//! the queue fd is closed. Natively the kernel pins the ring's pages until the queue *file*
//! is released and writes them from interrupt context, so the memory never goes back to the
//! heap allocator: after the last handle, a native ring's range becomes an inaccessible
//! reservation and its pages (still pinned, perhaps) belong to nobody else.
//!
//! This module has no `unsafe`: slots are read through the queue's ring memory, which
//! upholds the protocol (a slot is read only between the consumer index and a loaded
//! `ring_kidx`, and released only after it was copied out).

use std::cell::Cell;
use std::marker::PhantomData;
use std::os::fd::AsRawFd;

use kevent_sys::ring;

use crate::error::{Error, Op, Result};
use crate::event::Event;
use crate::queue::Queue;
use crate::ring::RingMem;
use crate::timeout::Timeout;

/// The largest asynchronous ring (`KEVENT_RING_ASYNC_MAX`, P38): 65536 slots.
pub const ASYNC_RING_MAX: u32 = kevent_sys::KEVENT_RING_ASYNC_MAX;

/// The single consumer of a queue's asynchronous ring (P38).
///
/// Made by [`Queue::async_ring`]; at most one exists per queue at a time. `Send` but not
/// `Sync`: it *is* the consumer index.
///
/// ```
/// use kevent::{Key, Queue, Timeout, User};
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let queue = Queue::with_async_ring(8)?;
/// let _u = queue.add(User::new(1))?;
/// let _v = queue.add(User::new(2))?;
/// let mut ring = queue.async_ring()?;
/// assert!(ring.try_next().is_none()); // empty: no system call was made
/// queue.ready(&[Key::user(1), Key::user(2)])?;
/// ring.wait(Timeout::FOREVER)?; // returns at once if the events are already there
/// let ids: Vec<u64> = ring.drain().map(|e| e.key().id()).collect();
/// assert_eq!(ids, [1, 2]);
/// # Ok(()) }
/// ```
///
/// It cannot be shared between threads:
///
/// ```compile_fail,E0277
/// fn is_sync<T: Sync>() {}
/// is_sync::<kevent::AsyncRing<'static>>();
/// ```
#[derive(Debug)]
pub struct AsyncRing<'q> {
    queue: &'q Queue,
    ring: &'q RingMem,
    /// The consumer index (`< n`), as last stored into `ring_uidx`.
    uidx: u32,
    /// `ring_kidx` as last loaded.
    kidx: u32,
    _not_sync: PhantomData<Cell<()>>,
}

impl<'q> AsyncRing<'q> {
    pub(crate) fn new(queue: &'q Queue, ring: &'q RingMem, cursor: u64) -> Self {
        let uidx = (cursor % u64::from(ring.size())) as u32;
        AsyncRing {
            queue,
            ring,
            uidx,
            kidx: uidx,
            _not_sync: PhantomData,
        }
    }

    /// The ring size `n` (at most `n - 1` events are in it at once, **D12**).
    pub fn size(&self) -> u32 {
        self.ring.size()
    }

    /// Loads `ring_kidx` (Acquire); a value outside the ring (a misbehaving producer) reads
    /// as "nothing new".
    fn refresh(&mut self) {
        if let Some(k) = self.ring.published() {
            self.kidx = k;
        }
    }

    /// How many events are in the ring now, unread (no system call).
    pub fn available(&mut self) -> u32 {
        self.refresh();
        ring::occupancy(self.size(), self.kidx, self.uidx)
    }

    /// The next event, if the ring has one: read from its slot, which is then released by a
    /// store to `ring_uidx`. Never makes a system call.
    pub fn try_next(&mut self) -> Option<Event> {
        if self.uidx == self.kidx {
            self.refresh();
            if self.uidx == self.kidx {
                return None;
            }
        }
        let ev = self.ring.read_slot(self.uidx);
        self.uidx = ring::advance(self.size(), self.uidx, 1);
        self.ring.release(self.uidx);
        Some(ev)
    }

    /// The events in the ring now, each released as it is yielded (no system call).
    pub fn drain(&mut self) -> Drain<'_, 'q> {
        Drain { ring: self }
    }

    /// Returns how many events are in the ring: at once, with no system call, when there are
    /// any; otherwise after `kevent_wait(old_uidx = this consumer's index)`, which returns at
    /// once if events arrived since the ring was found empty, and else sleeps until one is
    /// posted, the timeout, or a [`Queue::wake`] (then 0).
    ///
    /// # Errors
    ///
    /// [`Op::Wait`] with the call's error: `EBADF` for a queue inherited across `fork`
    /// (D11); `EINVAL` if the ring's `ring_uidx` was overwritten with a value outside the
    /// ring (only this consumer should store it).
    pub fn wait(&mut self, timeout: impl Into<Timeout>) -> Result<u32> {
        let k = self.available();
        if k > 0 {
            return Ok(k);
        }
        let (ts, flags) = timeout.into().as_timespec();
        self.queue
            .backend()
            .wait(
                self.queue.as_raw_fd(),
                self.size() - 1,
                self.uidx,
                &ts,
                flags,
            )
            .map_err(|e| Error::os(Op::Wait, e))?;
        Ok(self.available())
    }

    /// The next event: [`AsyncRing::try_next`], or one [`AsyncRing::wait`] and then
    /// `try_next` (`None` after a timeout or a wake-up with nothing posted).
    ///
    /// # Errors
    ///
    /// As [`AsyncRing::wait`].
    pub fn next_event(&mut self, timeout: impl Into<Timeout>) -> Result<Option<Event>> {
        if let Some(ev) = self.try_next() {
            return Ok(Some(ev));
        }
        self.wait(timeout)?;
        Ok(self.try_next())
    }
}

impl Drop for AsyncRing<'_> {
    fn drop(&mut self) {
        // Every slot read was released as it was read: the index is all a later consumer
        // needs.
        self.queue.release_consumer(u64::from(self.uidx));
    }
}

/// The events an [`AsyncRing`] holds now ([`AsyncRing::drain`]); each is released as it is
/// yielded, and the iterator ends when the ring is empty (no system call).
#[derive(Debug)]
pub struct Drain<'c, 'q> {
    ring: &'c mut AsyncRing<'q>,
}

impl Iterator for Drain<'_, '_> {
    type Item = Event;

    fn next(&mut self) -> Option<Event> {
        self.ring.try_next()
    }
}
