//! UNOTIFY kevents: nothing to watch; only `READY` (and `REQ_READY` at ADD) makes one ready.
//! `ret_data[0]` is the number of READY marks since the last delivery.

use kevent_sys::{Errno, ukevent};

use super::{Prepared, Source};
use crate::kevent::Kevent;
use crate::rules::Report;

/// A UNOTIFY kevent's source: nothing.
#[derive(Debug)]
pub(crate) struct User;

/// Any UNOTIFY kevent is acceptable; it is never ready at ADD.
pub(super) fn prepare(_uk: &ukevent) -> Result<Prepared, Errno> {
    Ok(Prepared {
        source: Source::User(User),
        ready_now: None,
    })
}

impl User {
    /// What a user delivery reports: the READY marks since the last one.
    pub(super) fn report(&self, kev: &Kevent) -> Report {
        Report::Ready([kev.pending, 0])
    }
}
