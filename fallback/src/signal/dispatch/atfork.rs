//! The dispatch's part of `fork()` (**D11**), called by the engine's one fork registration
//! (`crate::fork`): hold `LOCK` across the fork, and in the child forget every watch and give
//! it its own doorbell. The child handler runs in the single-threaded child and calls only
//! atomics and `crate::sys::async_safe`.

use super::*;

/// fork *prepare* (`crate::fork`): hold `LOCK` across `fork()` (module documentation,
/// "fork").
pub(crate) fn fork_prepare() {
    if IN_CRITICAL.try_with(Cell::get).unwrap_or(true) {
        return;
    }
    let guard = LOCK.lock().unwrap_or_else(PoisonError::into_inner);
    let _ = FORK_GUARD.try_with(move |cell| {
        if let Ok(mut slot) = cell.try_borrow_mut() {
            *slot = Some(guard);
        }
    });
}

/// Drops the guard taken by `fork_prepare`, if any.
fn release_fork_guard() {
    let guard = FORK_GUARD.try_with(|cell| cell.try_borrow_mut().ok().and_then(|mut g| g.take()));
    drop(guard);
}

/// fork *parent*: release `LOCK`.
pub(crate) fn fork_parent() {
    release_fork_guard();
}

/// fork *child*: forget every watch (D11), give the child its own doorbell, release
/// `LOCK`. Async-signal-safe (module documentation).
pub(crate) fn fork_child() {
    let saved_errno = async_safe::errno();
    for (s, slot) in SIGNALS.iter().enumerate().skip(1) {
        if slot.watchers.load(SeqCst) == 0 {
            continue;
        }
        // NOMASK first: a signal arriving meanwhile is then delivered as usual, which is
        // what the child must see.
        slot.nomask.store(0, SeqCst);
        slot.unowned.store(0, SeqCst);
        if slot.held.load(SeqCst) {
            // The library's own hold (safecopy) is the child's too: only the kevents go.
            slot.watchers.store(1, SeqCst);
            continue;
        }
        restore_if_ours(s as c_int, slot);
        slot.watchers.store(0, SeqCst);
    }
    for r in owner_records() {
        r.signo.store(0, SeqCst);
        r.refs.store(0, SeqCst);
    }
    let old = DOORBELL.load(SeqCst);
    if old >= 0 {
        // `dup3` atomically makes `old` (our doorbell's number, owned by this module) refer
        // to the new eventfd; the temporary number `fresh` is ours and closed right after.
        let fresh = async_safe::eventfd_raw();
        if fresh >= 0 {
            async_safe::dup3(fresh, old, libc::O_CLOEXEC);
            async_safe::close(fresh);
        }
    }
    release_fork_guard();
    async_safe::set_errno(saved_errno);
}
