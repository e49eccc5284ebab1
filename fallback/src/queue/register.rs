//! ADD, REMOVE, MODIFY and READY of single entries: checking, arming and disarming
//! sources, and the stale registrations of **D10**.

use std::os::fd::{AsRawFd, RawFd};

use kevent_sys::{Errno, KEVENT_CTL_REMOVE, KEVENT_RET_DONE, ukevent};

use super::{Ctx, State};
use crate::kevent::Kevent;
use crate::registry::Key;
use crate::rules::{self, AddAction, Report};
use crate::signal::dispatch;
use crate::source::{self, Source, fd, inode};
use crate::{sys, token};

/// The queue as the signal handler checks that it is still open (a NOMASK kevent of a queue
/// closed with `close()` no longer swallows its signal): the same `EPOLL_CTL_MOD` of the wake
/// eventfd as `Queue::verify`.
fn signal_owner(ctx: Ctx) -> dispatch::Owner {
    dispatch::Owner {
        epfd: ctx.epfd,
        wake: ctx.wake,
        token: token::make(ctx.nonce, token::WAKE),
    }
}

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
        if e.req_flags & !rules::KNOWN_REQ_FLAGS != 0 {
            return Err(Errno::EINVAL);
        }
        let key: Key = (e.type_, e.id.as_u64());
        if let Some(slot) = self.reg.find(key) {
            if !self.is_stale(slot, ctx) {
                return Err(Errno::EEXIST);
            }
            self.report_stale(slot, ctx);
        }
        let prepared = source::prepare(e)?;
        let req = rules::effective_req_flags(e.type_, e.req_flags);
        let ready = prepared.ready_now.is_some();
        let action = rules::on_add(req, ready);
        if action == AddAction::ReturnReady {
            return match prepared.ready_now {
                Some(Report::Ready(data)) => Ok(Some(data)),
                Some(Report::Broken(err)) => Err(err),
                None => Ok(Some([0, 0])),
            };
        }
        let mut uk = *e;
        uk.req_flags = req;
        uk.ret_flags = 0;
        uk.ret_data = [0, 0];
        let slot = self
            .reg
            .insert(Kevent::new(&uk, prepared.source))
            .ok_or(Errno::ENOMEM)?;
        if let Err(err) = self.arm(slot, ctx) {
            // Nothing reached epoll (an EEXIST here may be one of the queue's own internal
            // fds): no EPOLL_CTL_DEL, which would remove that other registration.
            self.unregister(slot, ctx, true);
            return Err(err);
        }
        match action {
            AddAction::RegisterMarked => {
                if let Some(kev) = self.reg.get_mut(slot) {
                    kev.marked = true;
                    kev.pending = kev.pending.saturating_add(1);
                }
                self.queue(slot);
            }
            // ALWAYS_QUEUE on a ready state source: `EPOLL_CTL_ADD` found it ready and holds
            // it in epoll's ready list, so the next harvest reports it with what the source
            // has *then* (spec section 4: a queued state event never reports a stale mask).
            // Queuing it here too would deliver the readiness seen at ADD.
            AddAction::RegisterReady | AddAction::Register | AddAction::ReturnReady => {}
        }
        Ok(None)
    }

    /// Starts watching a freshly inserted kevent's source.
    pub(super) fn arm(&mut self, slot: u32, ctx: Ctx) -> Result<(), Errno> {
        let generation = self.reg.generation(slot).ok_or(Errno::EINVAL)?;
        let kev = self.reg.get_mut(slot).ok_or(Errno::EINVAL)?;
        let uk = kev.uk;
        match &mut kev.source {
            Source::Fd { fd, .. } => {
                let events = fd::epoll_events(uk.type_, uk.event, uk.req_flags);
                match sys::epoll_ctl(
                    ctx.epfd,
                    libc::EPOLL_CTL_ADD,
                    *fd,
                    events,
                    token::make(generation, slot),
                ) {
                    Ok(()) => Ok(()),
                    // No ->poll (regular file): the fd is of the wrong kind.
                    Err(Errno::EPERM) => Err(Errno::EINVAL),
                    Err(e) => Err(e),
                }
            }
            Source::Timer { interval_ns, .. } => {
                let first = crate::timer::monotonic_now_ns().saturating_add(*interval_ns);
                self.schedule_timer(slot, first, ctx)
            }
            Source::Signal {
                signo,
                nomask,
                seen,
            } => {
                if let Err(e) = dispatch::watch_for(*signo, *nomask, Some(signal_owner(ctx))) {
                    // Not watched: `unregister` must not unwatch it.
                    *signo = 0;
                    return Err(e);
                }
                *seen = dispatch::delivered(*signo);
                self.signal_slots.push(slot);
                if !self.doorbell {
                    let bell = dispatch::doorbell_fd()?;
                    sys::epoll_ctl(
                        ctx.epfd,
                        libc::EPOLL_CTL_ADD,
                        bell,
                        (libc::EPOLLIN | libc::EPOLLET) as u32,
                        token::make(ctx.nonce, token::SIGNAL),
                    )?;
                    self.doorbell = true;
                }
                Ok(())
            }
            Source::Inode { wd } => {
                let dir = uk.id0() as RawFd;
                let ino = match &self.inotify {
                    Some(fd) => fd.as_raw_fd(),
                    None => {
                        let fd = sys::inotify_init()?;
                        sys::epoll_ctl(
                            ctx.epfd,
                            libc::EPOLL_CTL_ADD,
                            fd.as_raw_fd(),
                            libc::EPOLLIN as u32,
                            token::make(ctx.nonce, token::INODE),
                        )?;
                        let raw = fd.as_raw_fd();
                        self.inotify = Some(fd);
                        raw
                    }
                };
                let w = sys::inotify_watch_fd(ino, dir, inode::WATCH_MASK)?;
                *wd = w;
                self.watches.entry(w).or_default().push(slot);
                Ok(())
            }
            Source::User => Ok(()),
        }
    }

    /// Puts a timer into the heap and re-arms the timerfd if it is now the earliest.
    pub(super) fn schedule_timer(
        &mut self,
        slot: u32,
        deadline: u64,
        ctx: Ctx,
    ) -> Result<(), Errno> {
        if self.timerfd.is_none() {
            let fd = sys::timerfd_create()?;
            sys::epoll_ctl(
                ctx.epfd,
                libc::EPOLL_CTL_ADD,
                fd.as_raw_fd(),
                libc::EPOLLIN as u32,
                token::make(ctx.nonce, token::TIMER),
            )?;
            self.timerfd = Some(fd);
        }
        self.timers.schedule(slot, deadline);
        if self.timer_armed.is_none_or(|armed| deadline < armed) {
            self.rearm_timerfd()?;
        }
        Ok(())
    }

    pub(super) fn rearm_timerfd(&mut self) -> Result<(), Errno> {
        let Some(fd) = &self.timerfd else {
            return Ok(());
        };
        let next = self.timers.next_deadline();
        if next != self.timer_armed {
            sys::timerfd_arm(fd.as_raw_fd(), next)?;
            self.timer_armed = next;
        }
        Ok(())
    }

    /// Stops watching and forgets a kevent. `stale` says the fd may no longer name the
    /// registered file: then no `EPOLL_CTL_DEL` is issued, since it could hit another
    /// registration of the file that now has that number.
    pub(super) fn unregister(&mut self, slot: u32, ctx: Ctx, stale: bool) {
        let Some(kev) = self.reg.remove(slot) else {
            return;
        };
        if kev.queued {
            self.dequeued();
        }
        match kev.source {
            Source::Fd { fd, .. } if !stale && !self.is_internal(fd) => {
                // Errors mean the fd is closed or names another file now: either way the
                // registration is gone or unreachable.
                let _ = sys::epoll_ctl(ctx.epfd, libc::EPOLL_CTL_DEL, fd, 0, 0);
            }
            Source::Fd { .. } => {}
            Source::Timer { .. } => {
                self.timers.cancel(slot);
            }
            Source::Signal { signo, nomask, .. } => {
                if signo > 0 {
                    dispatch::unwatch_for(signo, nomask, Some(signal_owner(ctx)));
                }
                self.signal_slots.retain(|&s| s != slot);
            }
            Source::Inode { wd } => {
                if let Some(list) = self.watches.get_mut(&wd) {
                    list.retain(|&s| s != slot);
                    if list.is_empty() {
                        self.watches.remove(&wd);
                        if let Some(ino) = &self.inotify {
                            sys::inotify_unwatch(ino.as_raw_fd(), wd);
                        }
                    }
                }
            }
            Source::User => {}
        }
    }

    /// Whether `fd` is one of the queue's own fds (the user's fd was closed and the number
    /// went to one of them): never DEL those.
    fn is_internal(&self, fd: RawFd) -> bool {
        let own =
            |f: &Option<std::os::fd::OwnedFd>| f.as_ref().is_some_and(|f| f.as_raw_fd() == fd);
        own(&self.timerfd)
            || own(&self.inotify)
            || (self.doorbell && dispatch::doorbell_fd().is_ok_and(|d| d == fd))
    }

    /// **D10**: whether an fd kevent's fd no longer names the file it was registered with
    /// (closed without REMOVE, number reused). epoll is asked directly: its registration is
    /// keyed by (file, fd), so an `EPOLL_CTL_ADD` of the number finds the registration
    /// (`EEXIST`) exactly while the number still names the registered file.
    ///
    /// The probe must leave a live registration as it was. An `EPOLL_CTL_MOD` (what this
    /// once used) re-evaluates the source: an ET kevent got a new edge and was delivered
    /// again, merely because an ADD of the same key was refused with `EEXIST` (found by the
    /// differential test of issue 15). An ADD changes nothing when it fails; when it
    /// succeeds the registration was stale, and the probe registration is removed again at
    /// once (within the queue lock; a harvest in between ignores its reserved token).
    pub(super) fn is_stale(&self, slot: u32, ctx: Ctx) -> bool {
        let Some(kev) = self.reg.get(slot) else {
            return false;
        };
        let Source::Fd { fd, file } = &kev.source else {
            return false;
        };
        match sys::file_id(*fd) {
            Ok(now) if now.identity() == *file => {}
            _ => return true,
        }
        let probe = token::make(ctx.nonce, token::PROBE);
        match sys::epoll_ctl(ctx.epfd, libc::EPOLL_CTL_ADD, *fd, 0, probe) {
            Err(Errno::EEXIST) => false,
            Ok(()) => {
                let _ = sys::epoll_ctl(ctx.epfd, libc::EPOLL_CTL_DEL, *fd, 0, 0);
                true
            }
            Err(_) => true,
        }
    }

    /// **D10**: a stale registration is unregistered at once (so the new file can be added
    /// under the same key) and reported once, as `BROKEN|DONE` with `-EBADF`.
    pub(super) fn report_stale(&mut self, slot: u32, ctx: Ctx) {
        if let Some(kev) = self.reg.get(slot) {
            let d = rules::deliver(&kev.uk.to_ukevent(), Report::Broken(Errno::EBADF));
            self.orphans.push_back(d.event);
        }
        self.unregister(slot, ctx, true);
    }

    /// REMOVE or MODIFY of one entry, written back in place.
    pub(super) fn remove_or_modify(&mut self, cmd: u32, e: &mut ukevent, ctx: Ctx) {
        let key: Key = (e.type_, e.id.as_u64());
        let Some(slot) = self.reg.find(key) else {
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
        let generation = self.reg.generation(slot).unwrap_or(0);
        let Some(kev) = self.reg.get_mut(slot) else {
            return;
        };
        kev.uk.event = e.event;
        kev.uk.req_flags = rules::effective_req_flags(e.type_, e.req_flags);
        kev.uk.cookie = e.cookie();
        if let Source::Fd { fd, .. } = kev.source {
            let events = fd::epoll_events(kev.uk.type_, kev.uk.event, kev.uk.req_flags);
            if sys::epoll_ctl(
                ctx.epfd,
                libc::EPOLL_CTL_MOD,
                fd,
                events,
                token::make(generation, slot),
            )
            .is_err()
            {
                // D10: the fd no longer names the registered file.
                self.unregister(slot, ctx, true);
                rules::failed(e, Errno::EBADF);
                return;
            }
            // D17: `EPOLL_CTL_MOD` re-evaluated the source under the new mask: if it is
            // ready now, epoll's ready list holds it (in ET mode as one new edge) and the
            // next harvest reports what it has then. Whatever this queue still held for the
            // kevent (a READY mark, readiness harvested under the old mask) is dropped.
            self.unqueue(slot);
        }
    }

    /// READY of one named kevent; `false` if it is not registered.
    pub(super) fn mark(&mut self, e: &ukevent) -> bool {
        let Some(slot) = self.reg.find((e.type_, e.id.as_u64())) else {
            return false;
        };
        if let Some(kev) = self.reg.get_mut(slot) {
            kev.marked = true;
            kev.pending = kev.pending.saturating_add(1);
        }
        self.queue(slot);
        true
    }
}
