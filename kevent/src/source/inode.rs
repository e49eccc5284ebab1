//! [`Inode`]: `KEVENT_INODE`.

use kevent_sys::KEVENT_INODE;

use super::fd_source;
use crate::flags::InodeEvents;

fd_source! {
    /// A directory kevent (`KEVENT_INODE`): entries created in (`CREATE`) or removed from
    /// (`REMOVE`) the directory whose fd is given.
    ///
    /// Delivered events are [`EventKind::Inode`](crate::EventKind::Inode) with what happened
    /// since the last delivery; the directory itself being removed is BROKEN (`ENOENT`). An fd
    /// that is not a directory fails with `EINVAL`.
    ///
    /// # Backends
    ///
    /// Fallback: one inotify watch per directory; an entry moved in counts as CREATE, one moved
    /// out as REMOVE.
    ///
    /// ```
    /// use kevent::{Inode, InodeEvents, Queue, Timeout, Events, EventKind};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let dir = std::env::temp_dir().join(format!("kevent-doc-inode-{}", std::process::id()));
    /// std::fs::create_dir_all(&dir)?;
    /// let queue = Queue::new()?;
    /// let handle = std::fs::File::open(&dir)?;
    /// let _reg = queue.add(Inode::new(&handle, InodeEvents::CREATE))?;
    /// std::fs::write(dir.join("new"), b"")?;
    /// let mut events = Events::with_capacity(4);
    /// queue.wait(&mut events, Timeout::FOREVER)?;
    /// assert!(matches!(
    ///     events.get(0).map(|e| e.kind()),
    ///     Some(EventKind::Inode { events, .. }) if events.contains(InodeEvents::CREATE)
    /// ));
    /// # drop(_reg);
    /// # std::fs::remove_dir_all(&dir)?;
    /// # Ok(()) }
    /// ```
    #[doc(alias = "KEVENT_INODE")]
    pub struct Inode: KEVENT_INODE, InodeEvents;
    /// Watches the directory `dir` for `events`.
    new;
}
