//! [`Queue`] and its [`Builder`].

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use kevent_sys::{Errno, KEVENT_CTL_ADD, KEVENT_CTL_READY, KEVENT_REQ_ALWAYS_QUEUE, ukevent};

use crate::async_ring::AsyncRing;
use crate::error::{Error, Op, Result};
use crate::event::{Event, Events, Key};
use crate::keys::{Keys, Shard};
use crate::registration::{AddError, Added, Guard, Registration};
use crate::ring::{RingConsumer, RingMem, SharedRing};
use crate::source::{Kevent, Source};
use crate::timeout::Timeout;
use kevent_backend::{Backend, QueueOwner};

/// What a queue shares with its registrations.
#[derive(Debug)]
pub(crate) struct Inner {
    // Field order is drop order: the key owners first (their drop removes the SIGNAL kevents
    // while the fd is open, P17), then the declaration that the queue owns its fd (P65: the
    // engine proves the fd again from here on), then the fd is closed *before* the ring
    // memory is released, as `kevent_init`'s contract requires (the engine may write the
    // ring until then).
    pub(crate) keys: Keys,
    _owner: QueueOwner,
    pub(crate) fd: OwnedFd,
    pub(crate) ring: Option<RingMem>,
    pub(crate) backend: Backend,
    /// Whether a ring consumer (single or shared) exists.
    consumer: AtomicBool,
    /// The ring's consumer index (absolute) while no consumer exists.
    cursor: Mutex<u64>,
}

impl Inner {
    /// `kevent_ctl` on this queue. The count it returns means what the command defines:
    /// for REMOVE and MODIFY it is always 0 (**D14**), and each entry's result (found or
    /// `-ENOENT`, `-EINVAL`, …) is read back from the entry, never derived from the count.
    pub(crate) fn ctl(&self, op: Op, cmd: u32, entries: &mut [ukevent]) -> Result<u32> {
        self.backend
            .ctl(self.fd.as_raw_fd(), cmd, entries)
            .map_err(|e| Error::os(op, e))
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
/// ([`Pollable`](crate::Pollable)).
///
/// ```
/// use kevent::{Events, Queue, Timeout, User, Key};
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let queue = Queue::new()?;
/// let _u = queue.add(User::new(5))?;
/// queue.ready(&[Key::user(5)])?;
/// let mut events = Events::with_capacity(16);
/// let n = queue.wait(&mut events, Timeout::FOREVER)?;
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
    /// The ring is asynchronous (P38).
    async_ring: bool,
    backend: Option<Backend>,
    nonblocking: bool,
}

impl Builder {
    /// Gives the queue a ring of `n` slots (`2 ..=` [`MAX_RING_SIZE`](crate::MAX_RING_SIZE));
    /// at most `n - 1` events are uncommitted at once (**D12**). Default: no ring.
    pub fn ring_size(mut self, n: u32) -> Builder {
        self.ring = Some(n);
        self.async_ring = false;
        self
    }

    /// Gives the queue an **asynchronous** ring of `n` slots (`2 ..=`
    /// [`ASYNC_RING_MAX`](crate::ASYNC_RING_MAX), decision P38): the queue posts events into
    /// it as they occur, and its consumer ([`Queue::async_ring`]) reads them with no system
    /// call while there are any. `kevent_get_events` ([`Queue::wait`]) is refused on such a
    /// queue. Replaces [`Builder::ring_size`].
    pub fn async_ring_size(mut self, n: u32) -> Builder {
        self.ring = Some(n);
        self.async_ring = true;
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

    /// `kevent_init(ring, n, flags)`—Creates the queue.
    ///
    /// # Errors
    ///
    /// * [`Op::Backend`] ([`Error::Unavailable`]): no backend given and `KEVENT_BACKEND` is
    ///   invalid, or `native` on a kernel without kevent (spec section 6).
    /// * [`Op::Init`]: `EINVAL` for a ring size below 2 (spec section 3) or above
    ///   [`MAX_RING_SIZE`](crate::MAX_RING_SIZE) (an asynchronous ring: above
    ///   [`ASYNC_RING_MAX`](crate::ASYNC_RING_MAX)); `ENOMEM` when the ring cannot be mapped;
    ///   `EMFILE`/`ENFILE`/`ENOMEM` from the backend (natively, `ENOMEM` also when pinning an
    ///   asynchronous ring would pass `RLIMIT_MEMLOCK`); `EINVAL` from a kevent kernel
    ///   without the asynchronous ring.
    /// * [`Op::SetNonblocking`]: `fcntl` failed.
    pub fn build(self) -> Result<Queue> {
        let backend = match self.backend {
            Some(b) => b,
            None => Backend::current().map_err(|e| Error::unavailable(Op::Backend, e))?,
        };
        let ring = match self.ring {
            None => None,
            Some(n) if self.async_ring => {
                Some(RingMem::new_async(n, &backend).map_err(|e| Error::invalid(Op::Init, e))?)
            }
            Some(n) => Some(RingMem::new(n, &backend).map_err(|e| Error::invalid(Op::Init, e))?),
        };
        let (fd, owner) =
            crate::ring::init(&backend, ring.as_ref()).map_err(|e| Error::os(Op::Init, e))?;
        let queue = Queue {
            inner: Arc::new(Inner {
                keys: Keys::new(backend, fd.as_raw_fd()),
                _owner: owner,
                fd,
                ring,
                backend,
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

/// What [`Queue::add`] returns (one per input for [`Queue::add_all`]): the registration, or
/// the error with the fd holder handed back.
pub type AddResult<F> = std::result::Result<Registration<F>, AddError<F>>;

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

    /// A queue with an asynchronous ring of `n` slots (P38) on the process's backend:
    /// `Queue::builder().async_ring_size(n).build()`. Read it through [`Queue::async_ring`].
    ///
    /// # Errors
    ///
    /// As [`Builder::build`].
    pub fn with_async_ring(n: u32) -> Result<Queue> {
        Builder::default().async_ring_size(n).build()
    }

    /// The backend serving this queue.
    pub fn backend(&self) -> Backend {
        self.inner.backend
    }

    /// The ring size `n`, if the queue has a ring (of either kind).
    pub fn ring_size(&self) -> Option<u32> {
        self.inner.ring.as_ref().map(RingMem::size)
    }

    /// Whether the queue's ring is asynchronous (P38).
    pub fn has_async_ring(&self) -> bool {
        self.inner.ring.as_ref().is_some_and(RingMem::is_async)
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
    /// `Ok` is a [`Registration`]: it holds the source's fd and removes the kevent when
    /// dropped. A source that is ready at once is registered *and queued*, so its event comes
    /// from the next wait, as with epoll: this adds
    /// [`ReqFlags::ALWAYS_QUEUE`](crate::ReqFlags::ALWAYS_QUEUE) (decision P30;
    /// [`Queue::add_or_ready`] keeps the ABI's "returned at once, not registered" instead).
    ///
    /// No system call allocates, and the only lock held across it is the one of the key's
    /// shard (1/64 of the keys): threads adding different kevents do not serialise.
    ///
    /// # Errors
    ///
    /// An [`AddError`] that hands back the fd holder with the error: [`Op::Add`] with
    /// `EEXIST` (the key is registered; or its signal, in the other NOMASK variant, or its
    /// directory, through another fd: **P27**, **P29**), `EBADF`, `EINVAL` (an fd of the wrong kind, a zero
    /// or too long timer interval, an uncatchable signal, a non-directory), `ENOSYS` (a type
    /// ADD does not create, **D2**), or the call's own error (`EBADF`/`EINVAL`: the queue fd
    /// is not a queue). `?` converts it into [`Error`].
    pub fn add<S: Source>(&self, source: S) -> AddResult<S::Fd> {
        let mut k = source.into_kevent();
        k.uk.req_flags |= KEVENT_REQ_ALWAYS_QUEUE;
        match self.add_one(k)? {
            Added::Registered(r) => Ok(r),
            // ALWAYS_QUEUE registers a ready source; an engine that returns it anyway is
            // wrong, and the source is still handed back.
            Added::Ready { event, fd } => Err(AddError::new(
                Error::invalid(Op::Add, Errno::EIO),
                Some(event),
                fd,
            )),
        }
    }

    /// `kevent_ctl(KEVENT_CTL_ADD)`—Registers one kevent with the ABI's own rule for a
    /// source that is ready at once: it is returned ([`Added::Ready`], with its event and
    /// the fd holder) and **not** registered (spec section 3), saving a wait. Request flags
    /// are sent as given.
    ///
    /// ```
    /// use kevent::{Added, Pipe, Queue, SocketEvents};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let queue = Queue::new()?;
    /// let (reader, writer) = std::io::pipe()?;
    /// // The write end has room: ready at once, so it comes back instead of being registered.
    /// let added = queue.add_or_ready(Pipe::new(&writer, SocketEvents::SEND))?;
    /// assert!(matches!(added, Added::Ready { .. }));
    /// // Nothing to read: registered.
    /// assert!(queue.add_or_ready(Pipe::new(&reader, SocketEvents::RECV))?.is_registered());
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`Queue::add`].
    pub fn add_or_ready<S: Source>(
        &self,
        source: S,
    ) -> std::result::Result<Added<S::Fd>, AddError<S::Fd>> {
        self.add_one(source.into_kevent())
    }

    fn add_one<F>(&self, k: Kevent<F>) -> std::result::Result<Added<F>, AddError<F>> {
        if let Some(e) = k.invalid {
            return Err(AddError::refused(k, e));
        }
        let key = k.key();
        let mut entry = [k.uk];
        let mut shard = self.inner.keys.lock(key);
        let written = match self.inner.ctl(Op::Add, KEVENT_CTL_ADD, &mut entry) {
            Ok(n) => n,
            Err(e) => {
                drop(shard);
                return Err(AddError::new(e, None, k.fd));
            }
        };
        if written == 0 {
            let generation = self.inner.keys.next_generation();
            shard.register(key, generation);
            drop(shard);
            let guard = Guard::new(self.downgrade(), k.uk, generation);
            return Ok(Added::Registered(Registration::new(guard, k.fd)));
        }
        drop(shard);
        Self::written_back(entry[0], k.fd)
    }

    /// The outcome of an entry ADD wrote back: failed (`RET_BROKEN`) or ready at once.
    fn written_back<F>(back: ukevent, fd: F) -> std::result::Result<Added<F>, AddError<F>> {
        let event = Event::from_raw(back);
        if event.is_broken() {
            let e = Errno::from_negated(back.ret_data[1]).unwrap_or(Errno::EIO);
            Err(AddError::new(Error::os(Op::Add, e), Some(event), fd))
        } else {
            Ok(Added::Ready { event, fd })
        }
    }

    /// `kevent_ctl(KEVENT_CTL_ADD)`—Registers several kevents with as few calls as possible,
    /// as [`Queue::add`] does each (ALWAYS_QUEUE added); one outcome per input, in order.
    ///
    /// Entries that repeat a key of the same batch go to a later call, so that each outcome
    /// is exact (the second one then fails with `EEXIST`). If a call itself fails, its
    /// entries and every later one come back as [`AddError`]s with that error; kevents
    /// registered by earlier calls stay registered. Nothing is dropped.
    pub fn add_all<S, I>(&self, sources: I) -> Vec<AddResult<S::Fd>>
    where
        S: Source,
        I: IntoIterator<Item = S>,
    {
        let mut pending: Vec<Option<Kevent<S::Fd>>> = sources
            .into_iter()
            .map(|s| {
                let mut k = s.into_kevent();
                k.uk.req_flags |= KEVENT_REQ_ALWAYS_QUEUE;
                Some(k)
            })
            .collect();
        let mut outcomes = Vec::with_capacity(pending.len());
        outcomes.resize_with(pending.len(), || None);
        let mut start = 0;
        let mut failed: Option<Error> = None;
        while start < pending.len() {
            if let Some(e) = &failed {
                // A call failed: everything after it is handed back with that error.
                if let Some(k) = pending[start].take() {
                    outcomes[start] = Some(Err(AddError::new(e.duplicate(), None, k.fd)));
                }
                start += 1;
                continue;
            }
            let (chunk, end) = self.next_chunk(&mut pending, &mut outcomes, start);
            start = end;
            if chunk.is_empty() {
                continue;
            }
            if let Err(e) = self.add_chunk(&chunk, &mut pending, &mut outcomes) {
                for &i in &chunk {
                    if let Some(k) = pending[i].take() {
                        outcomes[i] = Some(Err(AddError::new(e.duplicate(), None, k.fd)));
                    }
                }
                failed = Some(e);
            }
        }
        outcomes.into_iter().flatten().collect()
    }

    /// The next call's worth of entries from `start`: consecutive entries with distinct keys
    /// (entries the ABI cannot express fail here, unsent). Returns their indices and where
    /// the next chunk starts.
    fn next_chunk<F>(
        &self,
        pending: &mut [Option<Kevent<F>>],
        outcomes: &mut [Option<AddResult<F>>],
        start: usize,
    ) -> (Vec<usize>, usize) {
        // Sized for the rest at once: growing them entry by entry reallocated both.
        let rest = pending.len() - start;
        let mut chunk: Vec<usize> = Vec::with_capacity(rest);
        let mut seen =
            std::collections::HashSet::with_capacity_and_hasher(rest, self.inner.keys.hash());
        let mut end = start;
        while end < pending.len() {
            let Some(k) = pending[end].as_ref() else {
                end += 1;
                continue;
            };
            if let Some(e) = k.invalid {
                if let Some(k) = pending[end].take() {
                    outcomes[end] = Some(Err(AddError::refused(k, e)));
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
        (chunk, end)
    }

    /// One ADD call for the entries `chunk`, with their shards locked (in index order).
    fn add_chunk<F>(
        &self,
        chunk: &[usize],
        pending: &mut [Option<Kevent<F>>],
        outcomes: &mut [Option<AddResult<F>>],
    ) -> Result<()> {
        let keys = &self.inner.keys;
        let mut shard_ids: Vec<usize> = chunk
            .iter()
            .filter_map(|&i| pending[i].as_ref().map(|k| keys.shard_index(k.key())))
            .collect();
        shard_ids.sort_unstable();
        shard_ids.dedup();
        let mut shards: Vec<MutexGuard<'_, Shard>> =
            shard_ids.iter().map(|&i| keys.lock_shard(i)).collect();
        let mut entries: Vec<ukevent> = chunk
            .iter()
            .filter_map(|&i| pending[i].as_ref().map(|k| k.uk))
            .collect();
        let written = self.inner.ctl(Op::Add, KEVENT_CTL_ADD, &mut entries)? as usize;
        let written = &entries[..written.min(entries.len())];
        // The written-back entries are a subsequence of the chunk, in order, and keys are
        // distinct within the chunk: match them greedily.
        let mut w = 0;
        for &i in chunk {
            let Some(k) = pending[i].take() else {
                continue;
            };
            let key = k.key();
            let back = written.get(w).filter(|b| Key::of(b) == key).copied();
            outcomes[i] = Some(match back {
                Some(b) => {
                    w += 1;
                    match Self::written_back(b, k.fd) {
                        Ok(Added::Registered(r)) => Ok(r),
                        Ok(Added::Ready { event, fd }) => Err(AddError::new(
                            Error::invalid(Op::Add, Errno::EIO),
                            Some(event),
                            fd,
                        )),
                        Err(e) => Err(e),
                    }
                }
                None => {
                    let generation = keys.next_generation();
                    let pos = shard_ids
                        .binary_search(&keys.shard_index(key))
                        .unwrap_or_default();
                    if let Some(shard) = shards.get_mut(pos) {
                        shard.register(key, generation);
                    }
                    Ok(Registration::new(
                        Guard::new(self.downgrade(), k.uk, generation),
                        k.fd,
                    ))
                }
            });
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
    /// A mark on a socket, pipe or poll kevent (decision **P6**, see [`rules`](crate::rules)) is
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

    /// `kevent_get_events(fd, 1, capacity, timeout, buf, flags)`—Waits until a kevent is
    /// ready, the timeout passes or a [`Queue::wake`] comes, then fills `events` with up to
    /// its capacity of ready events and returns how many.
    ///
    /// Returns 0 on timeout (and on a wake-up with nothing ready). Level kevents whose source
    /// is still ready come back in every call (**D7**); occurrences (timer expiries, signals,
    /// marks) are consumed by the call that reports them. If the queue has a ring, each event
    /// is also written to the ring (and carries `COPY_FAILED` if the ring is full), so a queue
    /// with a ring is best consumed through [`Queue::ring`] or [`Queue::shared_ring`]. A
    /// queue with an asynchronous ring refuses it ([`Op::GetEvents`], `EINVAL`, P38): read
    /// it through [`Queue::async_ring`].
    ///
    /// # Errors
    ///
    /// As [`Queue::wait_at_least`].
    #[doc(alias = "kevent_get_events")]
    #[doc(alias = "get_events")]
    pub fn wait(&self, events: &mut Events, timeout: impl Into<Timeout>) -> Result<usize> {
        self.wait_at_least(events, 1, timeout)
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
    #[doc(alias = "kevent_get_events")]
    pub fn wait_at_least(
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
    /// [`Op::RingConsumer`] ([`Error::Invalid`]): `EINVAL` when the queue has no ring or an
    /// asynchronous one ([`Queue::async_ring`]), `EBUSY` while another consumer (single or
    /// shared) exists.
    pub fn ring(&self) -> Result<RingConsumer<'_>> {
        let (ring, cursor) = self.claim_consumer(false)?;
        Ok(RingConsumer::new(self, ring, cursor))
    }

    /// The ring's multi-threaded consumer ([`SharedRing`]).
    ///
    /// # Errors
    ///
    /// As [`Queue::ring`].
    pub fn shared_ring(&self) -> Result<SharedRing<'_>> {
        let (ring, cursor) = self.claim_consumer(false)?;
        Ok(SharedRing::new(self, ring, cursor))
    }

    /// The single consumer of the queue's asynchronous ring ([`AsyncRing`], P38): it reads
    /// events with no system call while the ring has any, and calls `kevent_wait` only when
    /// it finds the ring empty.
    ///
    /// # Errors
    ///
    /// [`Op::RingConsumer`]: `EINVAL` if the queue has no asynchronous ring, `EBUSY` if a
    /// consumer exists.
    pub fn async_ring(&self) -> Result<AsyncRing<'_>> {
        let (ring, cursor) = self.claim_consumer(true)?;
        Ok(AsyncRing::new(self, ring, cursor))
    }

    /// Claims the one consumer of a ring of the given kind (`asynchronous` or not).
    fn claim_consumer(&self, asynchronous: bool) -> Result<(&RingMem, u64)> {
        let ring = self
            .inner
            .ring
            .as_ref()
            .filter(|r| r.is_async() == asynchronous)
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

impl Queue {
    /// Another handle to the same queue: the same fd, registrations and ring (the
    /// `Arc` is shared). The fd is not `dup`ed: on the fallback a duplicated number would
    /// not name the queue. The queue closes when the last handle is dropped.
    ///
    /// # Errors
    ///
    /// None today; the `Result` is `File::try_clone`'s shape, kept for a backend whose
    /// handles cost a resource.
    pub fn try_clone(&self) -> Result<Queue> {
        Ok(Queue {
            inner: Arc::clone(&self.inner),
        })
    }
}

impl TryFrom<Queue> for OwnedFd {
    type Error = Queue;

    /// The queue fd, for a caller who manages it from now on: kevents stay registered
    /// (the registrations made through this queue no longer remove anything, as when the
    /// queue is closed), and so do its SIGNAL kevents (on the fallback, close the fd
    /// through the C library's `close` or remove them first, decision P17).
    ///
    /// # Errors
    ///
    /// The queue comes back unchanged when another handle ([`Queue::try_clone`]) exists, or
    /// when it has a ring (the ring's memory must outlive the fd, and only the queue can
    /// keep that promise).
    fn try_from(queue: Queue) -> std::result::Result<OwnedFd, Queue> {
        if queue.inner.ring.is_some() {
            return Err(queue);
        }
        match Arc::try_unwrap(queue.inner) {
            Ok(inner) => {
                let Inner { mut keys, fd, .. } = inner;
                keys.disarm();
                Ok(fd)
            }
            Err(inner) => Err(Queue { inner }),
        }
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
    fn queue_is_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<Queue>();
    }
}
