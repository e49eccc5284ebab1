//! [`Queue`] and its [`Builder`].

use std::collections::HashMap;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use kevent_sys::{
    Errno, KEVENT_CTL_ADD, KEVENT_CTL_READY, KEVENT_CTL_REMOVE, KEVENT_RET_BROKEN, ukevent,
};

use crate::error::{Error, Op, Result};
use crate::event::{Event, Events, Key};
use crate::registration::{Added, Guard, Registration};
use crate::ring::{RingConsumer, RingMem, SharedRing};
use crate::source::{Kevent, Source};
use crate::timeout::Timeout;
use kevent_backend::Backend;

/// Which [`Registration`] currently owns each key (see [`Registration`]'s docs on keys).
#[derive(Debug, Default)]
pub(crate) struct Keys {
    owner: HashMap<Key, u64>,
    next_gen: u64,
}

impl Keys {
    /// Records a new registration of `key`; returns its generation (never 0).
    fn register(&mut self, key: Key) -> u64 {
        self.next_gen = self.next_gen.wrapping_add(1).max(1);
        self.owner.insert(key, self.next_gen);
        self.next_gen
    }

    /// Whether the registration `gen` of `key` is the current one.
    pub(crate) fn owns(&self, key: Key, generation: u64) -> bool {
        generation != 0 && self.owner.get(&key) == Some(&generation)
    }

    /// Forgets the current registration of `key` if it is `gen`.
    pub(crate) fn release(&mut self, key: Key, generation: u64) -> bool {
        if self.owns(key, generation) {
            self.owner.remove(&key);
            true
        } else {
            false
        }
    }
}

/// What a queue shares with its registrations.
#[derive(Debug)]
pub(crate) struct Inner {
    // Field order is drop order: the fd is closed *before* the ring memory is released, as
    // `kevent_init`'s contract requires (the engine may write the ring until then).
    pub(crate) fd: OwnedFd,
    pub(crate) ring: Option<RingMem>,
    pub(crate) backend: Backend,
    pub(crate) keys: Mutex<Keys>,
    /// Whether a ring consumer (single or shared) exists.
    consumer: AtomicBool,
    /// The ring's consumer index (absolute) while no consumer exists.
    cursor: Mutex<u64>,
}

impl Inner {
    pub(crate) fn lock_keys(&self) -> MutexGuard<'_, Keys> {
        // The map is updated only after a successful ctl; a panic elsewhere cannot leave it
        // half-written.
        self.keys.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `kevent_ctl` on this queue. The count it returns means what the command defines:
    /// for REMOVE and MODIFY it is always 0 (**D14**), and each entry's result (found or
    /// `-ENOENT`, `-EINVAL`, …) is read back from the entry, never derived from the count.
    pub(crate) fn ctl(&self, op: Op, cmd: u32, entries: &mut [ukevent]) -> Result<u32> {
        self.backend
            .ctl(self.fd.as_raw_fd(), cmd, entries)
            .map_err(|e| Error::os(op, e))
    }
}

impl Drop for Inner {
    /// Removes the queue's SIGNAL kevents before the fd closes. A kevent kernel releases
    /// everything at the close itself, but the fallback engine cannot see a `close()` and
    /// would keep the signal routed (and a NOMASK signal swallowed) until it notices
    /// (decision P17 in `docs/decisions.md`).
    fn drop(&mut self) {
        let keys = self.keys.get_mut().unwrap_or_else(|p| p.into_inner());
        let mut signals: Vec<ukevent> = keys
            .owner
            .keys()
            .filter(|k| k.type_() == kevent_sys::KEVENT_SIGNAL)
            .map(|k| k.to_ukevent())
            .collect();
        if !signals.is_empty() {
            let _ = self
                .backend
                .ctl(self.fd.as_raw_fd(), KEVENT_CTL_REMOVE, &mut signals);
        }
    }
}

/// A kevent queue: an fd, the kevents registered in it, and optionally a ring.
///
/// Made by [`Queue::new`] (no ring, the process's backend) or [`Queue::builder`]. The queue
/// owns its fd (`OwnedFd`): dropping it closes the fd, which releases every kevent, and then
/// frees the ring. It is `Send + Sync`: every method takes `&self`, and any number of threads
/// may add, wait and mark ready at once.
///
/// The fd is pollable (readable while events are ready, or after a [`Queue::wake`]), so a
/// queue can sit inside epoll, an async runtime (`AsFd`), or another queue
/// ([`Poll`](crate::Poll)).
///
/// ```
/// use kevent::{Events, Queue, Timeout, User, Key};
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let queue = Queue::new()?;
/// let _u = queue.add(User::new(5))?.registration();
/// queue.ready(&[Key::user(5)])?;
/// let mut events = Events::with_capacity(16);
/// let n = queue.get_events(&mut events, 1, Timeout::FOREVER)?;
/// assert_eq!(n, 1);
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct Queue {
    inner: Arc<Inner>,
}

/// Options for a [`Queue`].
///
/// ```
/// use kevent::{Backend, Queue};
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let queue = Queue::builder()
///     .ring_size(256)
///     .backend(Backend::fallback())
///     .nonblocking(true)
///     .build()?;
/// assert_eq!(queue.ring_size(), Some(256));
/// assert_eq!(queue.backend(), kevent::Backend::Fallback);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, Default)]
#[must_use]
pub struct Builder {
    ring: Option<u32>,
    backend: Option<Backend>,
    nonblocking: bool,
}

impl Builder {
    /// Gives the queue a ring of `n` slots (`2 ..=` [`MAX_RING_SIZE`](crate::MAX_RING_SIZE));
    /// at most `n - 1` events are uncommitted at once (**D12**). Default: no ring.
    pub fn ring_size(mut self, n: u32) -> Builder {
        self.ring = Some(n);
        self
    }

    /// Runs the queue on `backend` instead of the process's choice (tests, benchmarks).
    pub fn backend(mut self, backend: Backend) -> Builder {
        self.backend = Some(backend);
        self
    }

    /// Sets `O_NONBLOCK` on the queue fd: waits never block, whatever their timeout.
    pub fn nonblocking(mut self, on: bool) -> Builder {
        self.nonblocking = on;
        self
    }

    /// `kevent_init(ring, n, 0)`—Creates the queue.
    ///
    /// # Errors
    ///
    /// * [`Op::Backend`] ([`Error::Unavailable`]): no backend given and `KEVENT_BACKEND` is
    ///   invalid, or `native` on a kernel without kevent (spec section 6).
    /// * [`Op::Init`]: `EINVAL` for a ring size below 2 (spec section 3) or above
    ///   [`MAX_RING_SIZE`](crate::MAX_RING_SIZE); `ENOMEM` when the ring cannot be mapped;
    ///   `EMFILE`/`ENFILE`/`ENOMEM` from the backend.
    /// * [`Op::SetNonblocking`]: `fcntl` failed.
    pub fn build(self) -> Result<Queue> {
        let backend = match self.backend {
            Some(b) => b,
            None => Backend::current().map_err(|e| Error::unavailable(Op::Backend, e))?,
        };
        let ring = match self.ring {
            None => None,
            Some(n) => Some(RingMem::new(n, &backend).map_err(|e| Error::invalid(Op::Init, e))?),
        };
        let fd = crate::ring::init(&backend, ring.as_ref()).map_err(|e| Error::os(Op::Init, e))?;
        let queue = Queue {
            inner: Arc::new(Inner {
                fd,
                ring,
                backend,
                keys: Mutex::new(Keys::default()),
                consumer: AtomicBool::new(false),
                cursor: Mutex::new(0),
            }),
        };
        if self.nonblocking {
            queue.set_nonblocking(true)?;
        }
        Ok(queue)
    }
}

/// What [`Queue::ready`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadyOutcome {
    /// How many kevents were marked ready.
    pub marked: usize,
    /// The keys that name no registered kevent, in the order given.
    pub missing: Vec<Key>,
}

impl Queue {
    /// `kevent_init(NULL, 0, 0)`—Creates a queue without a ring on the process's backend.
    ///
    /// # Errors
    ///
    /// As [`Builder::build`].
    pub fn new() -> Result<Queue> {
        Builder::default().build()
    }

    /// Options: ring size, backend, non-blocking.
    pub fn builder() -> Builder {
        Builder::default()
    }

    /// The backend serving this queue.
    pub fn backend(&self) -> Backend {
        self.inner.backend
    }

    /// The ring size `n`, if the queue has a ring.
    pub fn ring_size(&self) -> Option<u32> {
        self.inner.ring.as_ref().map(RingMem::size)
    }

    pub(crate) fn downgrade(&self) -> Weak<Inner> {
        Arc::downgrade(&self.inner)
    }

    /// `fcntl(F_SETFL, O_NONBLOCK)`—With `true`, no wait on this queue blocks.
    ///
    /// # Errors
    ///
    /// [`Op::SetNonblocking`] with the `fcntl` error.
    pub fn set_nonblocking(&self, on: bool) -> Result<()> {
        kevent_backend::set_nonblocking(self.inner.fd.as_fd(), on)
            .map_err(|e| Error::os(Op::SetNonblocking, e))
    }

    /// `kevent_ctl(KEVENT_CTL_ADD)`—Registers one kevent, described by a builder
    /// ([`Socket`](crate::Socket), [`Timer`](crate::Timer), [`User`](crate::User), …).
    ///
    /// The result is what the ABI says about the entry, as a value:
    ///
    /// * [`Added::Registered`]: a [`Registration`] that holds the source's fd and removes the
    ///   kevent when dropped.
    /// * [`Added::Ready`]: the source was ready at once, so it was returned and **not**
    ///   registered (spec section 3); add it with
    ///   [`ReqFlags::ALWAYS_QUEUE`](crate::ReqFlags::ALWAYS_QUEUE) to have it registered and
    ///   queued instead.
    /// * [`Added::Failed`]: the entry was refused: `EEXIST` (the key is registered), `EBADF`,
    ///   `EINVAL` (an fd of the wrong kind, a zero or too long timer interval, an uncatchable
    ///   signal, a non-directory), `ENOSYS` (a type ADD does not create, **D2**).
    ///
    /// # Errors
    ///
    /// [`Op::Add`] only when the call itself fails (`EBADF`/`EINVAL`: the queue fd is not a
    /// queue, spec section 3); per-entry failures are [`Added::Failed`].
    pub fn add<S: Source>(&self, source: S) -> Result<Added<S::Fd>> {
        let mut out = self.add_all(std::iter::once(source))?;
        match out.pop() {
            Some(a) => Ok(a),
            // `add_all` returns one outcome per input.
            None => Err(Error::invalid(Op::Add, Errno::EIO)),
        }
    }

    /// `kevent_ctl(KEVENT_CTL_ADD)`—Registers several kevents with as few calls as possible;
    /// one [`Added`] per input, in order.
    ///
    /// Entries that repeat a key of the same batch go to a later call, so that each outcome
    /// is exact (the second one then fails with `EEXIST` unless the first was not
    /// registered).
    ///
    /// # Errors
    ///
    /// As [`Queue::add`]. On an error, kevents registered by earlier calls of the batch are
    /// removed again.
    pub fn add_all<S, I>(&self, sources: I) -> Result<Vec<Added<S::Fd>>>
    where
        S: Source,
        I: IntoIterator<Item = S>,
    {
        let mut pending: Vec<Option<Kevent<S::Fd>>> =
            sources.into_iter().map(|s| Some(s.into_kevent())).collect();
        let mut outcomes: Vec<Option<Added<S::Fd>>> = Vec::with_capacity(pending.len());
        outcomes.resize_with(pending.len(), || None);
        let result = {
            let mut keys = self.inner.lock_keys();
            self.add_locked(&mut keys, &mut pending, &mut outcomes)
        };
        // Outcomes are dropped (registrations removed) only after the key lock is released.
        result?;
        Ok(outcomes.into_iter().flatten().collect())
    }

    fn add_locked<F>(
        &self,
        keys: &mut Keys,
        pending: &mut [Option<Kevent<F>>],
        outcomes: &mut [Option<Added<F>>],
    ) -> Result<()> {
        let mut start = 0;
        while start < pending.len() {
            // One call's worth: consecutive entries with distinct keys. Entries the ABI cannot
            // express fail here without being sent.
            let mut chunk: Vec<usize> = Vec::new();
            let mut seen = std::collections::HashSet::new();
            let mut end = start;
            while end < pending.len() {
                let Some(k) = pending[end].as_ref() else {
                    end += 1;
                    continue;
                };
                if let Some(e) = k.invalid {
                    if let Some(k) = pending[end].take() {
                        outcomes[end] = Some(Added::failed(k, e));
                    }
                    end += 1;
                    continue;
                }
                if !seen.insert(k.key()) {
                    break;
                }
                chunk.push(end);
                end += 1;
            }
            start = end;
            if chunk.is_empty() {
                continue;
            }
            let mut entries: Vec<ukevent> = chunk
                .iter()
                .filter_map(|&i| pending[i].as_ref().map(|k| k.uk))
                .collect();
            let written = self.inner.ctl(Op::Add, KEVENT_CTL_ADD, &mut entries)? as usize;
            let written = &entries[..written.min(entries.len())];
            // The written-back entries are a subsequence of the chunk, in order, and keys are
            // distinct within the chunk: match them greedily.
            let mut w = 0;
            for &i in &chunk {
                let Some(k) = pending[i].take() else {
                    continue;
                };
                let back = written.get(w).filter(|b| Key::of(b) == k.key()).copied();
                outcomes[i] = Some(match back {
                    Some(b) => {
                        w += 1;
                        let event = Event::from_raw(b);
                        if b.ret_flags & KEVENT_RET_BROKEN != 0 {
                            Added::Failed {
                                error: event.error().unwrap_or_else(|| Errno::EIO.into()),
                                event,
                                fd: k.fd,
                            }
                        } else {
                            Added::Ready { event, fd: k.fd }
                        }
                    }
                    None => {
                        let generation = keys.register(k.key());
                        Added::Registered(Registration::new(
                            Guard::new(self.downgrade(), k.uk, generation),
                            k.fd,
                        ))
                    }
                });
            }
        }
        Ok(())
    }

    /// `kevent_ctl(KEVENT_CTL_READY)`—Marks the named kevents ready (any type); each is then
    /// delivered by a wait, once per mark burst.
    ///
    /// Returns how many were marked and which keys name nothing (spec section 3: "entries
    /// not found are copied to the start of `arg`"). An empty `keys` marks nothing (use
    /// [`Queue::wake`] to wake waiters).
    ///
    /// A mark on a socket, pipe or poll kevent (decision P6 in `docs/decisions.md`) is
    /// re-checked like any queued state event when the kevent has
    /// [`ReqFlags::LAST_CHECK`](crate::ReqFlags::LAST_CHECK) (poll kevents always do): if
    /// its source is not ready at delivery, nothing is delivered. Without LAST_CHECK the
    /// mark is delivered once, with whatever the source has then (possibly nothing).
    ///
    /// # Errors
    ///
    /// [`Op::Ready`] when the call fails (`EBADF`/`EINVAL`: the queue fd is not a queue).
    pub fn ready(&self, keys: &[Key]) -> Result<ReadyOutcome> {
        if keys.is_empty() {
            return Ok(ReadyOutcome {
                marked: 0,
                missing: Vec::new(),
            });
        }
        let mut entries: Vec<ukevent> = keys.iter().map(|k| k.to_ukevent()).collect();
        let marked = self.inner.ctl(Op::Ready, KEVENT_CTL_READY, &mut entries)? as usize;
        let missing_n = keys.len().saturating_sub(marked);
        let missing = entries
            .iter()
            .take(missing_n)
            .map(Key::of)
            .collect::<Vec<_>>();
        Ok(ReadyOutcome { marked, missing })
    }

    /// `kevent_ctl(KEVENT_CTL_READY, 0)`—Wakes every thread waiting on the queue; they
    /// return with whatever is ready, possibly nothing. With nobody waiting, the next wait
    /// returns at once, and meanwhile the queue fd reads as readable.
    ///
    /// # Errors
    ///
    /// [`Op::Wake`] when the call fails (`EBADF`/`EINVAL`: the queue fd is not a queue).
    pub fn wake(&self) -> Result<()> {
        self.inner
            .ctl(Op::Wake, KEVENT_CTL_READY, &mut [])
            .map(drop)
    }

    /// `kevent_get_events(fd, min, capacity, timeout, buf, flags)`—Waits until at least
    /// `max(min, 1)` kevents are ready (**D4**), the timeout passes or a [`Queue::wake`]
    /// comes, then fills `events` with up to its capacity of them and returns how many.
    ///
    /// Returns 0 on timeout (and on a wake-up with nothing ready). Level kevents whose source
    /// is still ready come back in every call (**D7**); occurrences (timer expiries, signals,
    /// marks) are consumed by the call that reports them. If the queue has a ring, each event
    /// is also written to the ring (and carries `COPY_FAILED` if the ring is full), so a queue
    /// with a ring is best consumed through [`Queue::ring`] or [`Queue::shared_ring`].
    ///
    /// # Errors
    ///
    /// [`Op::GetEvents`]: `EINVAL` when `min` exceeds the capacity (**D15**; refused before
    /// the call, as [`Error::Invalid`]), for a timeout the ABI refuses, or when the fd is not
    /// a queue; `EBADF` for a closed fd. (The other argument errors of D15, `max_nr == 0`
    /// and a NULL buffer, cannot happen: an [`Events`] holds at least one event.)
    pub fn get_events(
        &self,
        events: &mut Events,
        min: usize,
        timeout: impl Into<Timeout>,
    ) -> Result<usize> {
        events.clear();
        if min > events.capacity() {
            return Err(Error::invalid(Op::GetEvents, Errno::EINVAL));
        }
        let (ts, flags) = timeout.into().as_timespec();
        let n = self
            .inner
            .backend
            .get_events(
                self.inner.fd.as_raw_fd(),
                min as u32,
                events.raw_buffer(),
                &ts,
                flags,
            )
            .map_err(|e| Error::os(Op::GetEvents, e))?;
        events.set_len(n as usize);
        Ok(events.len())
    }

    /// The ring's single consumer ([`RingConsumer`]).
    ///
    /// # Errors
    ///
    /// [`Op::RingConsumer`] ([`Error::Invalid`]): `EINVAL` when the queue has no ring,
    /// `EBUSY` while another consumer (single or shared) exists.
    pub fn ring(&self) -> Result<RingConsumer<'_>> {
        let (ring, cursor) = self.claim_consumer()?;
        Ok(RingConsumer::new(self, ring, cursor))
    }

    /// The ring's multi-threaded consumer ([`SharedRing`]).
    ///
    /// # Errors
    ///
    /// As [`Queue::ring`].
    pub fn shared_ring(&self) -> Result<SharedRing<'_>> {
        let (ring, cursor) = self.claim_consumer()?;
        Ok(SharedRing::new(self, ring, cursor))
    }

    fn claim_consumer(&self) -> Result<(&RingMem, u64)> {
        let ring = self
            .inner
            .ring
            .as_ref()
            .ok_or(Error::invalid(Op::RingConsumer, Errno::EINVAL))?;
        if self
            .inner
            .consumer
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            return Err(Error::invalid(Op::RingConsumer, Errno::EBUSY));
        }
        let cursor = *self.inner.cursor.lock().unwrap_or_else(|p| p.into_inner());
        Ok((ring, cursor))
    }

    /// A consumer is gone; its consumer index is `committed`.
    pub(crate) fn release_consumer(&self, committed: u64) {
        *self.inner.cursor.lock().unwrap_or_else(|p| p.into_inner()) = committed;
        self.inner.consumer.store(false, Ordering::Release);
    }
}

impl AsFd for Queue {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.inner.fd.as_fd()
    }
}

impl AsRawFd for Queue {
    fn as_raw_fd(&self) -> RawFd {
        self.inner.fd.as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_track_the_newest_registration() {
        let mut k = Keys::default();
        let key = Key::user(1);
        let g1 = k.register(key);
        let g2 = k.register(key);
        assert_ne!(g1, g2);
        assert!(!k.owns(key, g1));
        assert!(!k.release(key, g1), "a stale guard releases nothing");
        assert!(k.release(key, g2));
        assert!(!k.owns(key, 0));
    }

    #[test]
    fn queue_is_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<Queue>();
    }
}
