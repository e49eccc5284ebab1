//! A registered kevent: the caller's ukevent plus the queue's bookkeeping for it.

use kevent_sys::ukevent;

use crate::source::Source;

/// One registered kevent.
#[derive(Debug)]
pub(crate) struct Kevent {
    /// As registered (request flags already effective, e.g. LAST_CHECK on POLL); the
    /// delivered event is a copy with `ret_flags`/`ret_data` filled in.
    pub(crate) uk: ukevent,
    /// In the ready list.
    pub(crate) queued: bool,
    /// Named by `READY` (or added with `REQ_READY`) since the last delivery.
    pub(crate) marked: bool,
    /// The call that queued it (while `queued`) or last delivered it: a wait delivers each
    /// kevent at most once.
    pub(crate) stamp: u32,
    /// Occurrences since the last delivery (**D8**: expirations, deliveries, READY marks).
    pub(crate) pending: u32,
    /// fd types: the readiness epoll reported last; INODE: the entry events seen.
    pub(crate) revents: u32,
    /// The event source's own state.
    pub(crate) source: Source,
}

impl Kevent {
    pub(crate) fn new(uk: ukevent, source: Source) -> Kevent {
        Kevent {
            uk,
            queued: false,
            marked: false,
            stamp: 0,
            pending: 0,
            revents: 0,
            source,
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn kevent_stays_small() {
        // Memory per registered kevent is a benchmark target (<= 128 bytes per timer, with
        // the key index and the timer heap); keep the entry itself in check.
        let size = std::mem::size_of::<super::Kevent>();
        println!("size_of::<Kevent>() = {size}");
        assert!(size <= 96, "Kevent grew to {size} bytes");
    }
}
