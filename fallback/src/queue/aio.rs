//! The queue's side of AIO requests (**D18**): registering a request's ONESHOT
//! `KEVENT_AIO` kevent, and queuing it when the transfer ends. The transfer itself is
//! `crate::source::aio`'s.

use std::sync::Arc;

use kevent_sys::{Errno, KEVENT_AIO, KEVENT_MASK_ALL, Key, kevent_id, ukevent};

use super::Queue;
use crate::kevent::Kevent;
use crate::rules;
use crate::source::aio::{self, Ticket};

impl Queue {
    /// Registers the kevent of a new request and returns its id; `done` queues it at once
    /// (a transfer of 0 bytes).
    pub(crate) fn aio_register(&self, ticket: Arc<Ticket>, done: bool) -> Result<u64, Errno> {
        let ctx = self.ctx();
        let mut st = self.lock();
        if st.dead {
            return Err(Errno::EBADF);
        }
        let id = st.sources.aio.next_id();
        let uk = ukevent::new(
            KEVENT_AIO,
            kevent_id::from_u64(id),
            KEVENT_MASK_ALL,
            rules::effective_req_flags(KEVENT_AIO, 0),
        );
        let slot = st
            .kevents
            .reg
            .insert(Kevent::new(&uk, aio::source(ticket)))
            .ok_or(Errno::EAGAIN)?;
        if done {
            st.aio_queue(slot);
            st.sync_wake(ctx);
        }
        Ok(id)
    }

    /// The transfer of request `id` ended (its ticket holds the outcome): queues its kevent,
    /// unless it was removed meanwhile.
    pub(crate) fn aio_complete(&self, id: u64) {
        let ctx = self.ctx();
        let mut st = self.lock();
        if let Some(slot) = st.kevents.reg.find(Key::from_raw(KEVENT_AIO, id)) {
            st.aio_queue(slot);
            st.sync_wake(ctx);
        }
    }
}

impl super::State {
    /// Queues a finished request's kevent as one occurrence (ONESHOT: `rules` keeps the flag
    /// whatever a MODIFY says).
    fn aio_queue(&mut self, slot: u32) {
        if let Some(kev) = self.kevents.reg.get_mut(slot) {
            kev.pending = 1;
        }
        self.kevents.queue(slot);
    }
}
