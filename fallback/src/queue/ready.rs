//! A queue's kevents and its ready list: the registry, the tokens of queued kevents oldest
//! first, and how a kevent gets on and off that list. Event sources queue their kevents
//! through [`Kevents::queue`] (their harvest steps, in `crate::source`).

use crate::kevent::Kevent;
use crate::registry::Registry;
use crate::seg::SegDeque;
use crate::token;

/// The registry and the ready list of one queue.
#[derive(Debug)]
pub(crate) struct Kevents {
    pub(crate) reg: Registry<Kevent>,
    /// Tokens of queued kevents, oldest first (a token, so that a kevent removed and its slot
    /// reused meanwhile is recognised and skipped).
    pub(super) ready: SegDeque<u64>,
    /// How many tokens in `ready` belong to live, queued kevents (the rest are stale: their
    /// kevent was removed). The queue fd is readable only while this is not zero.
    pub(super) queued: usize,
}

impl Kevents {
    pub(super) fn new(nonce: u32) -> Kevents {
        Kevents {
            reg: Registry::new(nonce),
            ready: SegDeque::new(),
            queued: 0,
        }
    }

    /// Puts a kevent on the ready list (once: a queued kevent stays where it is).
    pub(crate) fn queue(&mut self, slot: u32) {
        let Some(generation) = self.reg.generation(slot) else {
            return;
        };
        let Some(kev) = self.reg.get_mut(slot) else {
            return;
        };
        if !kev.queued {
            kev.queued = true;
            self.queued += 1;
            self.compact_ready();
            self.ready.push_back(token::make(generation, slot));
        }
    }

    /// Takes a kevent off the ready list and forgets its READY marks (MODIFY, **D17**). Its
    /// token stays in `ready` until a wait or [`Kevents::compact_ready`] skips it.
    pub(super) fn unqueue(&mut self, slot: u32) {
        let Some(kev) = self.reg.get_mut(slot) else {
            return;
        };
        kev.marked = false;
        kev.pending = 0;
        if kev.queued {
            kev.queued = false;
            self.dequeued();
        }
    }

    /// Drops the tokens of kevents that are no longer queued once they outnumber the live
    /// ones, so that MODIFY and REMOVE of queued kevents between waits cannot grow the ready
    /// list without bound (amortised O(1) per token).
    fn compact_ready(&mut self) {
        if self.ready.len() < 2 * self.queued + 64 {
            return;
        }
        let reg = &self.reg;
        self.ready.retain(|&tok| {
            let (generation, slot) = token::split(tok);
            reg.generation(slot) == Some(generation) && reg.get(slot).is_some_and(|k| k.queued)
        });
    }

    /// A queued kevent left the ready list (taken, or unregistered).
    pub(super) fn dequeued(&mut self) {
        self.queued -= 1;
        if self.queued == 0 {
            // Only stale tokens are left.
            self.ready.clear();
        }
    }
}
