//! The delivery rules of spec section 4, as pure functions over a kevent's state.
//!
//! One rule engine for every type: the event sources only say *whether* and *what* a kevent
//! has to report; these functions decide what ADD does with it, what a delivery writes back,
//! and whether the kevent stays registered. Unit-tested without any fd.

use kevent_sys::{
    Errno, KEVENT_AIO, KEVENT_INODE, KEVENT_POLL, KEVENT_POSIX_TIMER, KEVENT_REQ_ALWAYS_QUEUE,
    KEVENT_REQ_ET, KEVENT_REQ_LAST_CHECK, KEVENT_REQ_ONESHOT, KEVENT_REQ_READY,
    KEVENT_REQ_WAKEUP_ALL, KEVENT_RET_BROKEN, KEVENT_RET_DONE, KEVENT_SIGNAL, KEVENT_TIMER,
    KEVENT_UNOTIFY, ukevent,
};

/// Every request flag of spec section 4.
pub(crate) const KNOWN_REQ_FLAGS: u32 = KEVENT_REQ_ONESHOT
    | KEVENT_REQ_WAKEUP_ALL
    | KEVENT_REQ_ET
    | KEVENT_REQ_LAST_CHECK
    | KEVENT_REQ_ALWAYS_QUEUE
    | KEVENT_REQ_READY;

/// How a type's readiness behaves (**D7**).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Readiness {
    /// A state of an fd (SOCKET, PIPE, POLL): level by default, delivered by every wait while
    /// it holds.
    State,
    /// An occurrence (expiry, delivery, inode entry, READY mark): consumed by the delivery that
    /// reports it; occurrences before a delivery coalesce into one event (**D8**).
    Occurrence,
}

/// The readiness class of a type.
pub(crate) fn readiness(type_: u32) -> Readiness {
    match type_ {
        KEVENT_TIMER | KEVENT_POSIX_TIMER | KEVENT_SIGNAL | KEVENT_INODE | KEVENT_UNOTIFY
        | KEVENT_AIO => Readiness::Occurrence,
        _ => Readiness::State,
    }
}

/// Request flags as the queue keeps them: POLL kevents always carry LAST_CHECK (spec
/// section 4); AIO kevents are always ONESHOT (D18: the request is gone after its event,
/// whatever a MODIFY says; decision P36).
pub(crate) fn effective_req_flags(type_: u32, req_flags: u32) -> u32 {
    match type_ {
        KEVENT_POLL => req_flags | KEVENT_REQ_LAST_CHECK,
        KEVENT_AIO => req_flags | KEVENT_REQ_ONESHOT,
        _ => req_flags,
    }
}

/// Whether readiness is re-checked just before delivery.
pub(crate) fn last_check(req_flags: u32) -> bool {
    req_flags & KEVENT_REQ_LAST_CHECK != 0
}

/// Whether a notification wakes every waiter.
pub(crate) fn wakes_all(req_flags: u32) -> bool {
    req_flags & KEVENT_REQ_WAKEUP_ALL != 0
}

/// Whether the kevent is edge-triggered.
pub(crate) fn edge(req_flags: u32) -> bool {
    req_flags & KEVENT_REQ_ET != 0
}

/// What ADD does with one entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AddAction {
    /// Register; it will be delivered when its source reports.
    Register,
    /// Register a source that is ready now (ALWAYS_QUEUE). It is queued by the source
    /// itself: for the state types (the only ones that can be ready at ADD) the epoll
    /// registration holds it ready and the next harvest reports it, re-evaluated then (spec
    /// section 4, LAST_CHECK on every path).
    RegisterReady,
    /// Register and mark ready (REQ_READY), as a `READY` would (decision P6).
    RegisterMarked,
    /// Ready at once: written back with `RET_DONE`, not registered.
    ReturnReady,
}

/// The immediate-return rule of ADD (spec sections 3 and 4).
pub(crate) fn on_add(req_flags: u32, ready_now: bool) -> AddAction {
    if req_flags & KEVENT_REQ_READY != 0 {
        AddAction::RegisterMarked
    } else if ready_now {
        if req_flags & KEVENT_REQ_ALWAYS_QUEUE != 0 {
            AddAction::RegisterReady
        } else {
            AddAction::ReturnReady
        }
    } else {
        AddAction::Register
    }
}

/// What a READY mark on a state kevent (SOCKET, PIPE, POLL) delivers, given what its source
/// has at delivery (`None`: not ready). Decision P6: with LAST_CHECK the mark is re-checked
/// like every other path that queues a kevent, so a source that is not ready vetoes it;
/// without LAST_CHECK the mark is an occurrence, delivered once, with whatever the source
/// has then (`ret_data[0] == 0` when nothing).
pub(crate) fn marked_state_report(req_flags: u32, now: Option<Report>) -> Option<Report> {
    match now {
        Some(r) => Some(r),
        None if last_check(req_flags) => None,
        None => Some(Report::Ready([0, 0])),
    }
}

/// What a source has to report for one kevent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Report {
    /// Ready, with the type's `ret_data`.
    Ready([u32; 2]),
    /// The source failed: delivered as `RET_BROKEN` with `ret_data[1] = -errno`.
    Broken(Errno),
    /// As `Broken`, with `ret_data[0]` set (AIO: the bytes sent before the error, D18).
    BrokenAfter(u32, Errno),
}

/// The result fields of one delivery and whether the kevent leaves the registry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Outcome {
    pub(crate) ret_flags: u32,
    pub(crate) ret_data: [u32; 2],
    pub(crate) unregister: bool,
}

/// Builds the delivered event's result fields from the registered request flags and the
/// source's report, and says whether the kevent leaves the registry (the engine builds the
/// event in place from the registration and this [`Outcome`]).
///
/// ONESHOT kevents and broken ones leave the registry with the delivery, which says so with
/// `RET_DONE` (a broken source would otherwise be reported by every wait forever).
#[inline]
pub(crate) fn outcome(req_flags: u32, report: Report) -> Outcome {
    let (mut ret_flags, ret_data) = match report {
        Report::Ready(data) => (0, data),
        Report::Broken(e) => (KEVENT_RET_BROKEN, [0, e.negated()]),
        Report::BrokenAfter(data, e) => (KEVENT_RET_BROKEN, [data, e.negated()]),
    };
    let unregister = req_flags & KEVENT_REQ_ONESHOT != 0 || ret_flags & KEVENT_RET_BROKEN != 0;
    if unregister {
        ret_flags |= KEVENT_RET_DONE;
    }
    Outcome {
        ret_flags,
        ret_data,
        unregister,
    }
}

/// The write-back of a failed entry of `kevent_ctl`: `RET_BROKEN|RET_DONE`, `-errno`.
pub(crate) fn failed(entry: &mut ukevent, e: Errno) {
    entry.ret_flags = KEVENT_RET_BROKEN | KEVENT_RET_DONE;
    entry.ret_data = [0, e.negated()];
}

/// The write-back of an entry that was ready at ADD: `RET_DONE` and the type's data.
pub(crate) fn ready_at_add(entry: &mut ukevent, data: [u32; 2]) {
    entry.ret_flags = KEVENT_RET_DONE;
    entry.ret_data = data;
}

#[cfg(test)]
mod tests {
    use super::*;
    use kevent_sys::{KEVENT_RET_COPY_FAILED, KEVENT_SOCKET, kevent_id};

    fn ev(type_: u32, req: u32) -> ukevent {
        ukevent::new(type_, kevent_id::from_u64(3), 1, req)
    }

    #[test]
    fn s4_always_queue_registers_a_ready_entry() {
        assert_eq!(on_add(0, true), AddAction::ReturnReady);
        assert_eq!(
            on_add(KEVENT_REQ_ALWAYS_QUEUE, true),
            AddAction::RegisterReady
        );
        assert_eq!(on_add(KEVENT_REQ_ALWAYS_QUEUE, false), AddAction::Register);
        assert_eq!(on_add(0, false), AddAction::Register);
    }

    #[test]
    fn s4_req_ready_queues_at_add_and_is_not_returned() {
        assert_eq!(on_add(KEVENT_REQ_READY, false), AddAction::RegisterMarked);
        assert_eq!(on_add(KEVENT_REQ_READY, true), AddAction::RegisterMarked);
        assert_eq!(
            on_add(KEVENT_REQ_READY | KEVENT_REQ_ALWAYS_QUEUE, true),
            AddAction::RegisterMarked
        );
    }

    #[test]
    fn p6_ready_mark_on_a_state_kevent_with_and_without_last_check() {
        let ready = Some(Report::Ready([1, 0]));
        let broken = Some(Report::Broken(Errno::EPIPE));
        for req in [
            0,
            KEVENT_REQ_LAST_CHECK,
            KEVENT_REQ_ET | KEVENT_REQ_LAST_CHECK,
        ] {
            // What the source has at delivery, whatever the flags.
            assert_eq!(marked_state_report(req, ready), ready);
            assert_eq!(marked_state_report(req, broken), broken);
        }
        // Not ready: LAST_CHECK vetoes the mark; without it the mark is delivered, empty.
        assert_eq!(marked_state_report(KEVENT_REQ_LAST_CHECK, None), None);
        assert_eq!(
            marked_state_report(effective_req_flags(KEVENT_POLL, 0), None),
            None
        );
        assert_eq!(marked_state_report(0, None), Some(Report::Ready([0, 0])));
        assert_eq!(
            marked_state_report(KEVENT_REQ_ET, None),
            Some(Report::Ready([0, 0]))
        );
    }

    #[test]
    fn s4_oneshot_leaves_registry_with_done() {
        let d = outcome(
            ev(KEVENT_SOCKET, KEVENT_REQ_ONESHOT).req_flags,
            Report::Ready([0, 0]),
        );
        assert!(d.unregister);
        assert_eq!(d.ret_flags, KEVENT_RET_DONE);
        let d = outcome(ev(KEVENT_SOCKET, 0).req_flags, Report::Ready([7, 0]));
        assert!(!d.unregister);
        assert_eq!(d.ret_flags, 0);
        assert_eq!(d.ret_data, [7, 0]);
    }

    #[test]
    fn s4_broken_carries_negated_errno_and_unregisters() {
        let d = outcome(ev(KEVENT_SOCKET, 0).req_flags, Report::Broken(Errno::EBADF));
        assert!(d.unregister);
        assert_eq!(d.ret_flags, KEVENT_RET_BROKEN | KEVENT_RET_DONE);
        assert_eq!(Errno::from_negated(d.ret_data[1]), Some(Errno::EBADF));
        assert_eq!(d.ret_flags & KEVENT_RET_COPY_FAILED, 0);
    }

    #[test]
    fn s4_poll_always_carries_last_check() {
        assert!(last_check(effective_req_flags(KEVENT_POLL, 0)));
        assert!(!last_check(effective_req_flags(KEVENT_SOCKET, 0)));
    }

    #[test]
    fn p36_aio_is_always_oneshot() {
        assert_ne!(effective_req_flags(KEVENT_AIO, 0) & KEVENT_REQ_ONESHOT, 0);
        assert_eq!(effective_req_flags(KEVENT_UNOTIFY, 0), 0);
    }

    #[test]
    fn d7_state_types_are_level_and_occurrences_are_consumed() {
        assert_eq!(readiness(KEVENT_SOCKET), Readiness::State);
        assert_eq!(readiness(KEVENT_POLL), Readiness::State);
        assert_eq!(readiness(KEVENT_TIMER), Readiness::Occurrence);
        assert_eq!(readiness(KEVENT_UNOTIFY), Readiness::Occurrence);
        assert_eq!(readiness(KEVENT_SIGNAL), Readiness::Occurrence);
    }
}
