//! [`Socket`]: `KEVENT_SOCKET`.

use std::os::fd::{AsFd, AsRawFd, RawFd};

use kevent_sys::{KEVENT_SOCKET, kevent_id};

use super::{Common, Kevent, Source, source_common};
use crate::flags::SocketEvents;

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
///     .add(Socket::new(&a, SocketEvents::RECV).flags(ReqFlags::ET).cookie(1))?
///     .registration()
///     .expect("nothing to read yet, so it is registered");
/// std::io::Write::write_all(&mut &b, b"x")?;
/// let mut events = Events::with_capacity(8);
/// queue.get_events(&mut events, 1, Timeout::FOREVER)?;
/// assert_eq!(events.get(0).map(|e| e.cookie()), Some(1));
/// drop(reg); // REMOVE; `a` may be closed now
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct Socket<F> {
    fd: F,
    raw: RawFd,
    events: SocketEvents,
    common: Common,
}

impl<F: AsFd> Socket<F> {
    /// Watches the socket `fd` for `events`.
    pub fn new(fd: F, events: SocketEvents) -> Socket<F> {
        let raw = fd.as_fd().as_raw_fd();
        Socket {
            fd,
            raw,
            events,
            common: Common::default(),
        }
    }
}

source_common!(Socket<F>);

impl<F> Source for Socket<F> {
    type Fd = F;

    fn into_kevent(self) -> Kevent<F> {
        Kevent::new(
            KEVENT_SOCKET,
            kevent_id::from_raw([self.raw as u32, 0]),
            self.events.bits(),
            self.common,
            self.fd,
        )
    }
}
