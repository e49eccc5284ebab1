//! [`AsyncQueue`]: a [`Queue`] for `async-io` executors (smol, async-std; feature
//! `async-io`).

use std::future::poll_fn;
use std::io;
use std::task::{Context, Poll, ready};

use ::async_io::Async;

use super::Buffered;
use crate::error::{Error, Op, Result};
use crate::event::{Event, Events};
use crate::queue::Queue;
use crate::timeout::Timeout;

/// A queue registered with the `async-io` reactor (smol, async-std): await its events with
/// no `unsafe`.
///
/// The same contract as `kevent::tokio::AsyncQueue` (feature `tokio`): a non-blocking
/// `get_events` first, the reactor's readiness awaited only when it found nothing;
/// cancellation-safe `next()`.
///
/// ```
/// use std::time::Duration;
/// use kevent::{EventKind, Queue, Timer};
/// use kevent::async_io::AsyncQueue;
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// futures_lite::future::block_on(async {
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
    io: Async<Queue>,
    buffered: Buffered,
}

impl AsyncQueue {
    /// Registers `queue` with the `async-io` reactor (started on first use). The queue fd's
    /// `O_NONBLOCK` is left as it is (`Async::new_nonblocking`): the adapter's waits never
    /// block anyway, and other handles of the queue keep blocking waits.
    ///
    /// # Errors
    ///
    /// [`Op::Reactor`]: the reactor refused the fd; the queue is dropped (keep a
    /// [`Queue::try_clone`] handle to keep it).
    pub fn new(queue: Queue) -> Result<AsyncQueue> {
        let io = Async::new_nonblocking(queue).map_err(|e| Error::io(Op::Reactor, e))?;
        Ok(AsyncQueue {
            io,
            buffered: Buffered::new(),
        })
    }

    /// The queue: add, remove and mark kevents through it.
    pub fn get_ref(&self) -> &Queue {
        self.io.get_ref()
    }

    /// Deregisters from the reactor and gives the queue back. Events taken from the queue and
    /// not yet handed out by [`AsyncQueue::next`] are dropped.
    ///
    /// # Errors
    ///
    /// [`Op::Reactor`]: the reactor could not deregister the fd.
    pub fn into_inner(self) -> Result<Queue> {
        self.io.into_inner().map_err(|e| Error::io(Op::Reactor, e))
    }

    /// The next event: waits (asynchronously) until one is ready.
    ///
    /// # Errors
    ///
    /// [`Op::GetEvents`] from the queue, [`Op::Reactor`] from the reactor.
    pub async fn next(&mut self) -> Result<Event> {
        poll_fn(|cx| self.poll_next(cx)).await
    }

    /// The poll form of [`AsyncQueue::next`].
    ///
    /// # Errors
    ///
    /// As [`AsyncQueue::next`].
    pub fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<Result<Event>> {
        loop {
            if let Some(e) = self.buffered.pop() {
                return Poll::Ready(Ok(e));
            }
            if !self.buffered.refill(self.io.get_ref())? {
                ready!(self.io.poll_readable(cx)).map_err(|e| Error::io(Op::Reactor, e))?;
            }
        }
    }

    /// Fills `events` with every ready event (up to its capacity), waiting until at least one
    /// is ready; returns how many. Cancellation-safe.
    ///
    /// # Errors
    ///
    /// As [`AsyncQueue::next`]. Events that [`AsyncQueue::next`] took and has not handed
    /// out yet stay there for it.
    #[doc(alias = "get_events")]
    pub async fn wait(&self, events: &mut Events) -> Result<usize> {
        let mut failed = None;
        let n = self
            .io
            .read_with(|q| match q.wait(events, Timeout::NOW) {
                Ok(0) => Err(io::ErrorKind::WouldBlock.into()),
                Ok(n) => Ok(n),
                Err(e) => {
                    failed = Some(e);
                    Ok(0)
                }
            })
            .await
            .map_err(|e| Error::io(Op::Reactor, e))?;
        match failed {
            Some(e) => Err(e),
            None => Ok(n),
        }
    }
}
