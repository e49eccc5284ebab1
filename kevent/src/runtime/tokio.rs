//! [`AsyncQueue`]: a [`Queue`] inside a tokio runtime (feature `tokio`).

use std::future::poll_fn;
use std::io;
use std::task::{Context, Poll, ready};

use ::tokio::io::Interest;
use ::tokio::io::unix::AsyncFd;

use super::Buffered;
use crate::error::{Error, Op, Result};
use crate::event::{Event, Events};
use crate::queue::Queue;
use crate::timeout::Timeout;

/// A queue registered with the tokio reactor: await its events next to tokio sockets and
/// timers, with no `unsafe` and no readiness protocol to get right.
///
/// The queue fd is readable while events are ready (or after a [`Queue::wake`]), so it sits
/// in tokio's epoll as an [`AsyncFd`]. [`AsyncQueue::next`] takes the ready events with a
/// non-blocking `get_events` and clears tokio's readiness only when that found nothing, so no
/// wake-up is lost; registrations are made through [`AsyncQueue::get_ref`] (or a
/// [`Queue::try_clone`] handle kept elsewhere, from any thread).
///
/// Cancellation-safe: events taken from the queue wait in the `AsyncQueue` until handed
/// out, so a `next()` future dropped by `tokio::select!` loses nothing.
///
/// ```
/// use std::time::Duration;
/// use kevent::{EventKind, Queue, Timer};
/// use kevent::tokio::AsyncQueue;
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
/// rt.block_on(async {
///     let mut queue = AsyncQueue::new(Queue::new()?)?;
///     let _tick = queue.get_ref().add(Timer::oneshot(Duration::from_millis(5)))?;
///     let event = queue.next().await?;
///     assert!(matches!(event.kind(), EventKind::Timer { .. }));
///     Ok(())
/// })
/// # }
/// ```
#[derive(Debug)]
pub struct AsyncQueue {
    fd: AsyncFd<Queue>,
    buffered: Buffered,
}

impl AsyncQueue {
    /// Registers `queue` with the current tokio runtime's reactor (readable interest). The
    /// queue fd's `O_NONBLOCK` is left as it is: the adapter's waits never block anyway.
    ///
    /// # Errors
    ///
    /// [`Op::Reactor`]: called outside a tokio runtime, or the reactor refused the fd (a
    /// runtime built without `enable_io`); the queue is dropped (keep a
    /// [`Queue::try_clone`] handle to keep it).
    #[allow(unsafe_code)]
    pub fn new(queue: Queue) -> Result<AsyncQueue> {
        // `register_with_interest` panics outside a runtime: refuse instead.
        if ::tokio::runtime::Handle::try_current().is_err() {
            return Err(Error::io(
                Op::Reactor,
                io::Error::other("AsyncQueue::new outside a tokio runtime"),
            ));
        }
        // SAFETY: the queue owns its fd (an `OwnedFd` inside the `Arc` every handle
        // shares), so the fd stays open and names the same queue for as long as this `Queue`
        // lives, i.e. the `AsyncFd`'s lifetime; `Queue::as_raw_fd` always returns that fd.
        let fd = unsafe { AsyncFd::register_with_interest(queue, Interest::READABLE) }
            .map_err(|e| Error::io(Op::Reactor, e.into()))?;
        Ok(AsyncQueue {
            fd,
            buffered: Buffered::new(),
        })
    }

    /// The queue: add, remove and mark kevents through it.
    pub fn get_ref(&self) -> &Queue {
        self.fd.get_ref()
    }

    /// Deregisters from the reactor and gives the queue back. Events taken from the queue and
    /// not yet handed out by [`AsyncQueue::next`] are dropped.
    pub fn into_inner(self) -> Queue {
        self.fd.into_inner()
    }

    /// The next event: waits (asynchronously) until one is ready.
    ///
    /// # Errors
    ///
    /// [`Op::GetEvents`] from the queue, [`Op::Reactor`] from tokio.
    pub async fn next(&mut self) -> Result<Event> {
        poll_fn(|cx| self.poll_next(cx)).await
    }

    /// The poll form of [`AsyncQueue::next`] (for a `Stream` implementation or a hand-written
    /// future).
    ///
    /// # Errors
    ///
    /// As [`AsyncQueue::next`].
    pub fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<Result<Event>> {
        loop {
            if let Some(e) = self.buffered.pop() {
                return Poll::Ready(Ok(e));
            }
            let mut guard =
                ready!(self.fd.poll_read_ready(cx)).map_err(|e| Error::io(Op::Reactor, e))?;
            if !self.buffered.refill(self.fd.get_ref())? {
                guard.clear_ready();
            }
        }
    }

    /// Fills `events` with every ready event (up to its capacity), waiting until at least one
    /// is ready; returns how many. Cancellation-safe (nothing is taken until it returns).
    ///
    /// # Errors
    ///
    /// As [`AsyncQueue::next`]. Events that [`AsyncQueue::next`] took and has not handed
    /// out yet stay there for it.
    #[doc(alias = "get_events")]
    pub async fn wait(&self, events: &mut Events) -> Result<usize> {
        loop {
            let mut guard = self
                .fd
                .readable()
                .await
                .map_err(|e| Error::io(Op::Reactor, e))?;
            match guard.try_io(|fd| match fd.get_ref().wait(events, Timeout::NOW) {
                Ok(0) => Err(io::ErrorKind::WouldBlock.into()),
                Ok(n) => Ok(Ok(n)),
                Err(e) => Ok(Err(e)),
            }) {
                Ok(Ok(result)) => return result,
                Ok(Err(e)) => return Err(Error::io(Op::Reactor, e)),
                Err(_would_block) => continue,
            }
        }
    }
}
