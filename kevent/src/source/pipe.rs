//! [`Pipe`]: `KEVENT_PIPE`.

use std::os::fd::{AsFd, AsRawFd, RawFd};

use kevent_sys::{KEVENT_PIPE, kevent_id};

use super::{Common, Kevent, Source, source_common};
use crate::flags::SocketEvents;

/// A pipe or FIFO kevent (`KEVENT_PIPE`): data buffered (`RECV`) or space free (`SEND`).
///
/// Delivered events are [`EventKind::Pipe`](crate::EventKind::Pipe); the peer closing is
/// BROKEN (`EPIPE`).
///
/// ```
/// use kevent::{Added, Pipe, Queue, SocketEvents};
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let queue = Queue::new()?;
/// let (reader, writer) = std::io::pipe()?;
/// // The write end has room: ready at once, so ADD returns it instead of registering it.
/// let added = queue.add(Pipe::new(&writer, SocketEvents::SEND))?;
/// assert!(matches!(added, Added::Ready { .. }));
/// // Nothing to read: registered.
/// let reg = queue.add(Pipe::new(&reader, SocketEvents::RECV))?.registration();
/// assert!(reg.is_some());
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct Pipe<F> {
    fd: F,
    raw: RawFd,
    events: SocketEvents,
    common: Common,
}

impl<F: AsFd> Pipe<F> {
    /// Watches the FIFO `fd` for `events` (`RECV` and/or `SEND`; `ACCEPT` means nothing here).
    pub fn new(fd: F, events: SocketEvents) -> Pipe<F> {
        let raw = fd.as_fd().as_raw_fd();
        Pipe {
            fd,
            raw,
            events,
            common: Common::default(),
        }
    }
}

source_common!(Pipe<F>);

impl<F> Source for Pipe<F> {
    type Fd = F;

    fn into_kevent(self) -> Kevent<F> {
        Kevent::new(
            KEVENT_PIPE,
            kevent_id::from_raw([self.raw as u32, 0]),
            self.events.bits(),
            self.common,
            self.fd,
        )
    }
}
