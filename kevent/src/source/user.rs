//! [`User`]: `KEVENT_UNOTIFY`.

use kevent_sys::{KEVENT_UNOTIFY, kevent_id};

use super::{Common, Kevent, NoFd, Source, source_common};

/// A user event (`KEVENT_UNOTIFY`) with a caller-chosen id: never ready by itself; it is
/// ready when some thread names it with [`Queue::ready`](crate::Queue::ready) (or
/// [`Registration::ready`](crate::Registration::ready)), or at once with
/// [`ReqFlags::READY`](crate::ReqFlags::READY).
///
/// Each mark is an occurrence: marks that pile up before a delivery give one event.
///
/// ```
/// use kevent::{Key, Queue, User, Timeout, Events, EventKind};
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let queue = Queue::new()?;
/// let _u = queue.add(User::new(7).token(70))?;
/// let outcome = queue.ready(&[Key::user(7), Key::user(8)])?;
/// assert_eq!(outcome.marked, 1);
/// assert_eq!(outcome.missing, vec![Key::user(8)]);
/// let mut events = Events::with_capacity(4);
/// queue.wait(&mut events, Timeout::FOREVER)?;
/// assert_eq!(events.get(0).map(|e| e.kind()), Some(EventKind::User { id: 7 }));
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy)]
pub struct User {
    id: u64,
    event: u32,
    common: Common,
}

impl User {
    /// A user event with the id `id` (the whole 64-bit `raw_u64`).
    pub fn new(id: u64) -> User {
        User {
            id,
            event: 0,
            common: Common::default(),
        }
    }

    /// Sets the `event` word (any value; the queue does not interpret it). Default 0.
    pub fn event(mut self, event: u32) -> User {
        self.event = event;
        self
    }
}

source_common!(User);

impl Source for User {
    type Fd = NoFd;

    fn into_kevent(self) -> Kevent<NoFd> {
        Kevent::new(
            KEVENT_UNOTIFY,
            kevent_id::from_u64(self.id),
            self.event,
            self.common,
            NoFd,
        )
    }
}
