//! [`Pipe`]: `KEVENT_PIPE`.

use kevent_sys::KEVENT_PIPE;

use super::fd_source;
use crate::flags::SocketEvents;

fd_source! {
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
    /// // The write end has room: `add_or_ready` returns it instead of registering it.
    /// let added = queue.add_or_ready(Pipe::new(&writer, SocketEvents::SEND))?;
    /// assert!(matches!(added, Added::Ready { .. }));
    /// // Nothing to read: registered.
    /// let _reg = queue.add(Pipe::new(&reader, SocketEvents::RECV))?;
    /// # Ok(()) }
    /// ```
    #[doc(alias = "KEVENT_PIPE")]
    pub struct Pipe: KEVENT_PIPE, SocketEvents;
    /// Watches the FIFO `fd` for `events` (`RECV` and/or `SEND`; `ACCEPT` means nothing here).
    new;
}
