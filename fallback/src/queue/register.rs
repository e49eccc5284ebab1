//! ADD, REMOVE, MODIFY and READY of single entries: checking, arming and disarming
//! sources, and the stale registrations of **D10**.

use kevent_sys::{Errno, KEVENT_CTL_REMOVE, KEVENT_INODE, KEVENT_RET_DONE, Key, ukevent};

use super::{Ctx, State};
use crate::kevent::Kevent;
use crate::rules::{self, AddAction, Report};
use crate::source;
use crate::token;

impl State {
    /// ADD of one entry; `true` when the entry is written back (ready at once, or failed).
    pub(super) fn add(&mut self, e: &mut ukevent, ctx: Ctx) -> bool {
        match self.try_add(e, ctx) {
            Ok(None) => false,
            Ok(Some(data)) => {
                rules::ready_at_add(e, data);
                true
            }
            Err(err) => {
                rules::failed(e, err);
                true
            }
        }
    }

    /// `Ok(None)`: registered; `Ok(Some(data))`: ready at once, not registered.
    pub(super) fn try_add(&mut self, e: &ukevent, ctx: Ctx) -> Result<Option<[u32; 2]>, Errno> {
        if !source::addable(e.type_) {
            return Err(Errno::ENOSYS);
        }
        // P27, P28, P29: id bits the type does not use are refused.
        if e.req_flags & !rules::KNOWN_REQ_FLAGS != 0 || !e.id.fits(e.type_) {
            return Err(Errno::EINVAL);
        }
        let key = Key::of(e);
        if let Some(slot) = self.kevents.reg.find(key) {
            self.replace_stale(slot, ctx)?;
        }
        let prepared = source::prepare(e)?;
        // P27, P29: the same signal or directory under another key.
        if let Some(slot) = source::same_target(e, &prepared.source, &mut self.cx(ctx)) {
            self.replace_stale(slot, ctx)?;
        }
        let req = rules::effective_req_flags(e.type_, e.req_flags);
        let ready = prepared.ready_now.is_some();
        let action = rules::on_add(req, ready);
        if action == AddAction::ReturnReady {
            return match prepared.ready_now {
                Some(Report::Ready(data)) => Ok(Some(data)),
                Some(Report::Broken(err) | Report::BrokenAfter(_, err)) => Err(err),
                None => Ok(Some([0, 0])),
            };
        }
        let mut uk = *e;
        uk.req_flags = req;
        uk.ret_flags = 0;
        uk.ret_data = [0, 0];
        let slot = self
            .kevents
            .reg
            .insert(Kevent::new(&uk, prepared.source))
            .ok_or(Errno::ENOMEM)?;
        if let Err(err) = source::arm(slot, &mut self.cx(ctx)) {
            // Nothing reached epoll (an EEXIST here may be one of the queue's own internal
            // fds): no EPOLL_CTL_DEL, which would remove that other registration.
            self.unregister(slot, ctx, true);
            return Err(err);
        }
        match action {
            AddAction::RegisterMarked => {
                if let Some(kev) = self.kevents.reg.get_mut(slot) {
                    kev.marked = true;
                    kev.pending = kev.pending.saturating_add(1);
                }
                self.kevents.queue(slot);
            }
            // ALWAYS_QUEUE on a ready state source: `EPOLL_CTL_ADD` found it ready and holds
            // it in epoll's ready list, so the next harvest reports it with what the source
            // has *then* (spec section 4: a queued state event never reports a stale mask).
            // Queuing it here too would deliver the readiness seen at ADD.
            AddAction::RegisterReady | AddAction::Register | AddAction::ReturnReady => {}
        }
        Ok(None)
    }

    /// Stops watching and forgets a kevent. `stale` says the fd may no longer name the
    /// registered file: then no `EPOLL_CTL_DEL` is issued, since it could hit another
    /// registration of the file that now has that number.
    pub(super) fn unregister(&mut self, slot: u32, ctx: Ctx, stale: bool) {
        let Some(kev) = self.kevents.reg.remove(slot) else {
            return;
        };
        if kev.queued {
            self.kevents.dequeued();
        }
        source::disarm(&kev, slot, stale, &mut self.cx(ctx));
    }

    /// An ADD meets the kevent in `slot`, registered for the same target: `-EEXIST`, unless
    /// it is stale (**D10**: then it is reported and unregistered, and the ADD goes on).
    fn replace_stale(&mut self, slot: u32, ctx: Ctx) -> Result<(), Errno> {
        if !self.is_stale(slot, ctx) {
            return Err(Errno::EEXIST);
        }
        self.report_stale(slot, ctx);
        Ok(())
    }

    /// **D10**: whether the kevent in `slot` is an fd kevent whose fd no longer names the file
    /// it was registered with (closed without REMOVE, number reused).
    pub(super) fn is_stale(&self, slot: u32, ctx: Ctx) -> bool {
        self.kevents
            .reg
            .get(slot)
            .is_some_and(|kev| source::is_stale(kev, ctx))
    }

    /// **D10**: a stale registration is unregistered at once (so the new file can be added
    /// under the same key) and reported once, as `BROKEN|DONE` with `-EBADF`.
    pub(super) fn report_stale(&mut self, slot: u32, ctx: Ctx) {
        if let Some(kev) = self.kevents.reg.get(slot) {
            let o = rules::outcome(kev.uk.req_flags, Report::Broken(Errno::EBADF));
            self.orphans
                .push_back(kev.uk.event(o.ret_flags, o.ret_data));
        }
        self.unregister(slot, ctx, true);
    }

    /// REMOVE or MODIFY of one entry, written back in place.
    pub(super) fn remove_or_modify(&mut self, cmd: u32, e: &mut ukevent, ctx: Ctx) {
        let key = Key::of(e);
        let Some(slot) = self.kevents.reg.find(key) else {
            rules::failed(e, Errno::ENOENT);
            return;
        };
        e.ret_flags = KEVENT_RET_DONE;
        e.ret_data = [0, 0];
        if cmd == KEVENT_CTL_REMOVE {
            self.unregister(slot, ctx, false);
            return;
        }
        if e.req_flags & !rules::KNOWN_REQ_FLAGS != 0 {
            rules::failed(e, Errno::EINVAL);
            return;
        }
        if e.type_ == KEVENT_INODE {
            // Entries created or removed before the MODIFY are seen under the old mask, as a
            // kernel filters them when they happen: read what inotify holds first.
            source::harvest(token::INODE, &mut self.cx(ctx));
        }
        let generation = self.kevents.reg.generation(slot).unwrap_or(0);
        let Some(kev) = self.kevents.reg.get_mut(slot) else {
            return;
        };
        kev.uk.event = e.event;
        kev.uk.req_flags = rules::effective_req_flags(e.type_, e.req_flags);
        kev.uk.cookie = e.cookie();
        match source::modify(kev, slot, generation, ctx) {
            Ok(false) => {}
            Err(_) => {
                // D10: the fd no longer names the registered file.
                self.unregister(slot, ctx, true);
                rules::failed(e, Errno::EBADF);
            }
            // D17: `EPOLL_CTL_MOD` re-evaluated the source under the new mask: if it is
            // ready now, epoll's ready list holds it (in ET mode as one new edge) and the
            // next harvest reports what it has then. Whatever this queue still held for the
            // kevent (a READY mark, readiness harvested under the old mask) is dropped.
            Ok(true) => self.kevents.unqueue(slot),
        }
    }

    /// READY of one named kevent; `false` if it is not registered.
    pub(super) fn mark(&mut self, e: &ukevent) -> bool {
        let Some(slot) = self.kevents.reg.find(Key::of(e)) else {
            return false;
        };
        if let Some(kev) = self.kevents.reg.get_mut(slot) {
            kev.marked = true;
            kev.pending = kev.pending.saturating_add(1);
        }
        self.kevents.queue(slot);
        true
    }
}
