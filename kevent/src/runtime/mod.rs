//! What the async adapters share: the buffer that makes `next()` cancellation-safe.

#[cfg(feature = "async-io")]
pub(crate) mod async_io;
#[cfg(feature = "tokio")]
pub(crate) mod tokio;

use crate::error::Result;
use crate::event::{Event, Events};
use crate::queue::Queue;
use crate::timeout::Timeout;

/// How many events one non-blocking `get_events` of an adapter takes at most.
pub(crate) const BATCH: usize = 64;

/// Events taken from the queue and not yet handed out. They live in the adapter, not in a
/// future, so dropping a `next()` future loses none.
#[derive(Debug)]
pub(crate) struct Buffered {
    events: Events,
    pos: usize,
}

impl Buffered {
    pub(crate) fn new() -> Buffered {
        Buffered {
            events: Events::with_capacity(BATCH),
            pos: 0,
        }
    }

    /// The next buffered event.
    pub(crate) fn pop(&mut self) -> Option<Event> {
        let e = self.events.get(self.pos)?;
        self.pos += 1;
        Some(e)
    }

    /// Takes what is ready without blocking; `false` when nothing was (the reactor's
    /// readiness must then be cleared and awaited again).
    pub(crate) fn refill(&mut self, queue: &Queue) -> Result<bool> {
        self.pos = 0;
        Ok(queue.wait(&mut self.events, Timeout::NOW)? > 0)
    }
}
