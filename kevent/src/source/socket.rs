//! [`Socket`]: `KEVENT_SOCKET`.

use kevent_sys::KEVENT_SOCKET;

use super::fd_source;
use crate::flags::SocketEvents;

fd_source! {
    /// A socket kevent (`KEVENT_SOCKET`): readable (`RECV`: data or EOF), a pending connection
    /// (`ACCEPT`), writable (`SEND`).
    ///
    /// Delivered events are [`EventKind::Socket`](crate::EventKind::Socket) with the ready bits;
    /// a socket error, or a hang-up of a kevent watching only `SEND`, is BROKEN.
    ///
    /// `new` takes the fd holder (`&TcpStream`, `TcpListener`, …): see the
    /// [module docs](crate::source#fd-sources-hold-their-fd-d10).
    ///
    /// ```
    /// use std::os::unix::net::UnixStream;
    /// use kevent::{Queue, ReqFlags, Socket, SocketEvents, Timeout, Events};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let queue = Queue::new()?;
    /// let (a, b) = UnixStream::pair()?;
    /// let reg = queue
    ///     .add(Socket::new(&a, SocketEvents::RECV).flags(ReqFlags::ET).token(1))?;
    /// std::io::Write::write_all(&mut &b, b"x")?;
    /// let mut events = Events::with_capacity(8);
    /// queue.wait(&mut events, Timeout::FOREVER)?;
    /// assert_eq!(events.get(0).map(|e| e.token()), Some(1));
    /// drop(reg); // REMOVE; `a` may be closed now
    /// # Ok(()) }
    /// ```
    #[doc(alias = "KEVENT_SOCKET")]
    pub struct Socket: KEVENT_SOCKET, SocketEvents;
    /// Watches the socket `fd` for `events`.
    new;
}
