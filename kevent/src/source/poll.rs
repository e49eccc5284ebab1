//! [`Pollable`]: `KEVENT_POLL`.

use kevent_sys::KEVENT_POLL;

use super::fd_source;
use crate::flags::PollEvents;

fd_source! {
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
    /// use kevent::{Pollable, PollEvents, Queue, User, Key};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let outer = Queue::new()?;
    /// let inner = Queue::new()?;
    /// let _watch = outer.add(Pollable::new(&inner, PollEvents::IN))?;
    /// let _user = inner.add(User::new(1))?;
    /// inner.ready(&[Key::user(1)])?;
    /// let mut events = kevent::Events::with_capacity(4);
    /// assert_eq!(outer.wait(&mut events, kevent::Timeout::FOREVER)?, 1);
    /// # Ok(()) }
    /// ```
    #[doc(alias = "Poll")]
    #[doc(alias = "KEVENT_POLL")]
    pub struct Pollable: KEVENT_POLL, PollEvents;
    /// Watches `fd` for the poll bits `events`.
    new;
}
