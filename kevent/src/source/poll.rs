//! [`Poll`]: `KEVENT_POLL`.

use std::os::fd::{AsFd, AsRawFd, RawFd};

use kevent_sys::{KEVENT_POLL, kevent_id};

use super::{Common, Kevent, Source, source_common};
use crate::flags::PollEvents;

/// A poll kevent (`KEVENT_POLL`) on any pollable fd (an eventfd, a tty, another queue, …).
///
/// Delivered events are [`EventKind::Poll`](crate::EventKind::Poll) with `revents & events`;
/// errors and hang-ups are always reported, as with poll(2). Poll kevents always carry
/// [`ReqFlags::LAST_CHECK`](crate::ReqFlags::LAST_CHECK) (the queue sets it). Regular files
/// and directories cannot be polled: ADD fails with `EINVAL`.
///
/// A queue fd is pollable, so one queue can watch another:
///
/// ```
/// use kevent::{Poll, PollEvents, Queue, User, Key};
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let outer = Queue::new()?;
/// let inner = Queue::new()?;
/// let _watch = outer.add(Poll::new(&inner, PollEvents::IN))?.registration();
/// let _user = inner.add(User::new(1))?.registration();
/// inner.ready(&[Key::user(1)])?;
/// let mut events = kevent::Events::with_capacity(4);
/// assert_eq!(outer.get_events(&mut events, 1, kevent::Timeout::FOREVER)?, 1);
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct Poll<F> {
    fd: F,
    raw: RawFd,
    events: PollEvents,
    common: Common,
}

impl<F: AsFd> Poll<F> {
    /// Watches `fd` for the poll bits `events`.
    pub fn new(fd: F, events: PollEvents) -> Poll<F> {
        let raw = fd.as_fd().as_raw_fd();
        Poll {
            fd,
            raw,
            events,
            common: Common::default(),
        }
    }
}

source_common!(Poll<F>);

impl<F> Source for Poll<F> {
    type Fd = F;

    fn into_kevent(self) -> Kevent<F> {
        Kevent::new(
            KEVENT_POLL,
            kevent_id::from_raw([self.raw as u32, 0]),
            self.events.bits(),
            self.common,
            self.fd,
        )
    }
}
