//! A registered kevent: the caller's ukevent plus the queue's bookkeeping for it.

use kevent_sys::{Key, kevent_id, ukevent};

use crate::registry::Keyed;
use crate::source::Source;

/// What the caller registered, without the ukevent's result fields (12 bytes a kevent
/// saved, a million times over).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Registered {
    /// `id.raw_u64`.
    pub(crate) id: u64,
    /// The caller's cookie.
    pub(crate) cookie: u64,
    pub(crate) type_: u32,
    pub(crate) event: u32,
    /// Request flags, already effective (LAST_CHECK on POLL).
    pub(crate) req_flags: u32,
}

impl Registered {
    /// A delivered event: the registered ukevent with these result fields.
    #[inline]
    pub(crate) fn event(&self, ret_flags: u32, ret_data: [u32; 2]) -> ukevent {
        let mut uk = ukevent::new(
            self.type_,
            kevent_id::from_u64(self.id),
            self.event,
            self.req_flags,
        );
        uk.ret_flags = ret_flags;
        uk.ret_data = ret_data;
        uk.set_cookie(self.cookie);
        uk
    }

    /// `id.raw[0]` (the fd of fd types).
    pub(crate) fn id0(&self) -> u32 {
        self.id as u32
    }
}

/// One registered kevent.
#[derive(Debug)]
pub(crate) struct Kevent {
    /// What the caller registered.
    pub(crate) uk: Registered,
    /// In the ready list.
    pub(crate) queued: bool,
    /// Named by `READY` (or added with `REQ_READY`) since the last delivery.
    pub(crate) marked: bool,
    /// The call that queued it (while `queued`) or last delivered it: a wait delivers each
    /// kevent at most once.
    pub(crate) stamp: u32,
    /// Its last delivery took it from the ready list, not from an epoll report. An
    /// edge-triggered fd kevent delivered that way (a READY mark, an ADD's) may still have
    /// the readiness it reported in epoll's ready list: an edge epoll reports during that
    /// call is taken as that readiness, merged into the delivery, not as a new edge (P18).
    pub(crate) from_queue: bool,
    /// Occurrences since the last delivery (**D8**: expirations, deliveries, READY marks).
    pub(crate) pending: u32,
    /// fd types: the readiness epoll reported last; INODE: the entry events seen.
    pub(crate) revents: u32,
    /// The event source's own state.
    pub(crate) source: Source,
}

impl Kevent {
    pub(crate) fn new(uk: &ukevent, source: Source) -> Kevent {
        Kevent {
            uk: Registered {
                id: uk.id.as_u64(),
                cookie: uk.cookie(),
                type_: uk.type_,
                event: uk.event,
                req_flags: uk.req_flags,
            },
            queued: false,
            marked: false,
            stamp: 0,
            from_queue: false,
            pending: 0,
            revents: 0,
            source,
        }
    }
}

impl Keyed for Kevent {
    fn key(&self) -> Key {
        Key::from_raw(self.uk.type_, self.uk.id)
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
        assert!(size <= 72, "Kevent grew to {size} bytes");
    }
}
