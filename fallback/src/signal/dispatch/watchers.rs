//! The watch counts: [`watch`] and [`unwatch`] of a signal per SIGNAL kevent (with or
//! without an owning queue), the first watch saving the disposition and installing
//! `on_signal`, the last one restoring it, and the library's own permanent hold of
//! `SIGSEGV`/`SIGBUS` for safecopy. All of it under `LOCK` (the dispatch module's
//! "Watcher registry and publication order").

use super::*;

/// Starts reporting deliveries of `signo`; one call per SIGNAL kevent, `nomask` = its
/// `KEVENT_SIGNAL_NOMASK` bit. A NOMASK watcher made here belongs to no queue and swallows
/// the signal until its [`unwatch`]; the engine uses [`watch_for`].
///
/// Reference-counted per `(signo, nomask)`. The first watch of `signo` saves its current
/// disposition and installs `on_signal`; the first NOMASK watch makes deliveries
/// invisible to the program until the last NOMASK [`unwatch`]. Creates the doorbell
/// ([`doorbell_fd`]) if needed.
///
/// # Errors
///
/// * `EINVAL`: `signo` is 0, negative, above `SIGRTMAX()`, `SIGKILL`, `SIGSTOP` or reserved
///   by the C library (32 up to below `SIGRTMIN()`);
/// * `EMFILE`, `ENFILE`, `ENOMEM`: creating the doorbell or registering the fork handlers
///   failed;
/// * `EOVERFLOW`: 2^32 - 1 watchers of one signal already;
/// * whatever `sigaction` reports.
///
/// On error nothing changed.
pub fn watch(signo: i32, nomask: bool) -> Result<(), Errno> {
    watch_for(signo, nomask, None)
}

/// [`watch`] for a SIGNAL kevent of the queue `owner`: a NOMASK watcher swallows the signal
/// only while that queue's fd is open. `on_signal` checks it at each delivery (one
/// `epoll_ctl` per queue holding a NOMASK kevent for the signal), so the first delivery after
/// the queue fd was closed already reaches the program's handler or default action, whenever
/// the engine then notices the close and releases the kevent (decision P17).
///
/// # Errors
///
/// As [`watch`].
pub fn watch_for(signo: i32, nomask: bool, owner: Option<Owner>) -> Result<(), Errno> {
    let s = check_signo(signo)?;
    EVER_WATCHED.store(true, Relaxed);
    ensure_atfork()?;
    let _critical = Critical::enter();
    ensure_doorbell()?;
    let slot = &SIGNALS[s];
    let total = slot.watchers.load(Relaxed);
    let nm = slot.nomask.load(Relaxed);
    let unowned = slot.unowned.load(Relaxed);
    let new_total = total.checked_add(1).ok_or(Errno::EOVERFLOW)?;
    let new_nm = if nomask {
        nm.checked_add(1).ok_or(Errno::EOVERFLOW)?
    } else {
        nm
    };
    let new_unowned = if nomask && owner.is_none() {
        unowned.checked_add(1).ok_or(Errno::EOVERFLOW)?
    } else {
        unowned
    };
    // Before the counts: the handler never sees a NOMASK count whose owner is missing.
    if let (true, Some(o)) = (nomask, owner) {
        owner_add(signo, o)?;
    }
    let undo_owner = || {
        if let (true, Some(o)) = (nomask, owner) {
            owner_remove(signo, o);
        }
    };
    if total == 0 {
        // Publication order: saved disposition, then counts, then the handler (module docs).
        let old = match sigaction(signo, None) {
            Ok(old) => old,
            Err(e) => {
                undo_owner();
                return Err(e);
            }
        };
        save(slot.current(), &old);
        slot.unowned.store(new_unowned, SeqCst);
        slot.nomask.store(new_nm, SeqCst);
        slot.watchers.store(new_total, SeqCst);
        if let Err(e) = install(signo, slot) {
            slot.nomask.store(0, SeqCst);
            slot.unowned.store(0, SeqCst);
            slot.watchers.store(0, SeqCst);
            undo_owner();
            return Err(e);
        }
    } else {
        slot.unowned.store(new_unowned, SeqCst);
        slot.nomask.store(new_nm, SeqCst);
        slot.watchers.store(new_total, SeqCst);
        if nomask && nm == 0 {
            // First NOMASK watcher: SA_RESTART may now be needed.
            if let Err(e) = install(signo, slot) {
                slot.nomask.store(nm, SeqCst);
                slot.unowned.store(unowned, SeqCst);
                slot.watchers.store(total, SeqCst);
                undo_owner();
                return Err(e);
            }
        }
    }
    Ok(())
}

/// Undoes one successful [`watch`]`(signo, nomask)`. The last unwatch of `signo` restores the
/// saved disposition (unless the program replaced `on_signal` since: then its disposition
/// stays). An unwatch without a matching watch, or of an invalid signal, does nothing.
pub fn unwatch(signo: i32, nomask: bool) {
    unwatch_for(signo, nomask, None);
}

/// Undoes one successful [`watch_for`]`(signo, nomask, owner)`, as [`unwatch`] does.
pub fn unwatch_for(signo: i32, nomask: bool, owner: Option<Owner>) {
    let Ok(s) = check_signo(signo) else { return };
    let _critical = Critical::enter();
    let slot = &SIGNALS[s];
    let total = slot.watchers.load(Relaxed);
    let nm = slot.nomask.load(Relaxed);
    let unowned = slot.unowned.load(Relaxed);
    let held = u32::from(slot.held.load(Relaxed));
    if total <= held || (nomask && nm == 0) || (nomask && owner.is_none() && unowned == 0) {
        return;
    }
    if nomask {
        match owner {
            Some(o) => owner_remove(signo, o),
            None => slot.unowned.store(unowned - 1, SeqCst),
        }
        slot.nomask.store(nm - 1, SeqCst);
    }
    if total == 1 {
        restore_if_ours(signo, slot);
        slot.watchers.store(0, SeqCst);
    } else {
        slot.watchers.store(total - 1, SeqCst);
        if nomask && nm == 1 {
            // Last NOMASK watcher gone: SA_RESTART follows the saved handler again. On failure
            // the previous flags stay, which only affects EINTR for the program's handler.
            let _ = install(signo, slot);
        }
    }
}

/// Installs `on_signal` for `SIGSEGV` and `SIGBUS` for good (the library's own watcher, never
/// unwatched), so that a fault in [`super::safecopy`]'s copy routine becomes an error return.
/// Every other fault goes, as with any watched signal, to the disposition saved when
/// `on_signal` was installed (module docs: "Delivered as usual"). Idempotent.
///
/// # Errors
///
/// What `sigaction` or `pthread_atfork` report; then the signal that failed is not held.
pub(crate) fn hold_faults() -> Result<(), Errno> {
    ensure_atfork()?;
    let _critical = Critical::enter();
    for signo in [libc::SIGSEGV, libc::SIGBUS] {
        let slot = &SIGNALS[signo as usize];
        if slot.held.load(Relaxed) {
            continue;
        }
        let total = slot.watchers.load(Relaxed);
        let new_total = total.checked_add(1).ok_or(Errno::EOVERFLOW)?;
        if total == 0 {
            let old = sigaction(signo, None)?;
            save(slot.current(), &old);
            slot.watchers.store(new_total, SeqCst);
            slot.held.store(true, SeqCst);
            if let Err(e) = install(signo, slot) {
                slot.held.store(false, SeqCst);
                slot.watchers.store(0, SeqCst);
                return Err(e);
            }
        } else {
            slot.watchers.store(new_total, SeqCst);
            slot.held.store(true, SeqCst);
        }
    }
    Ok(())
}

/// Whether [`hold_faults`] succeeded and `on_signal` still is the disposition of `SIGSEGV`
/// and `SIGBUS` (a program that installs its own handler afterwards replaces it; the library
/// never takes the signal back).
pub(crate) fn faults_held() -> bool {
    [libc::SIGSEGV, libc::SIGBUS].into_iter().all(|signo| {
        SIGNALS[signo as usize].held.load(SeqCst)
            && sigaction(signo, None).is_ok_and(|cur| entry_of(cur.sa_sigaction).is_some())
    })
}

/// How often [`reclaim_if_due`] looks.
const RECLAIM_EVERY_NS: u64 = 1_000_000_000;
static RECLAIM_LAST: AtomicU64 = AtomicU64::new(0);
/// Set by the first [`watch_for`]: until then no signal can have been taken from the engine,
/// and [`reclaim_if_due`] returns without reading the clock (every wait calls it).
static EVER_WATCHED: AtomicBool = AtomicBool::new(false);

/// Decision P34: a program (or a library: `tokio::signal`, `ctrlc`, `signal-hook`) that
/// installs its own disposition for a signal a SIGNAL kevent watches replaces `on_signal`,
/// and the kevent would never fire again. At most once a second (the waits call this), every
/// watched signal whose disposition is no longer `on_signal` gets it back, with the
/// program's disposition as the saved one it chains to: both see every delivery (a handler
/// that chains back to the one it replaced, as signal-hook does, is recognised and not
/// counted twice). The library's own hold of `SIGSEGV`/`SIGBUS` is never taken back.
///
/// Inline, so that a process that never watched a signal pays one load per wait (the
/// look itself stays out of line).
#[inline]
pub(crate) fn reclaim_if_due() {
    if EVER_WATCHED.load(Relaxed) {
        reclaim_now_if_due();
    }
}

/// [`reclaim_if_due`] once a signal was ever watched.
#[inline(never)]
fn reclaim_now_if_due() {
    let now = crate::timer::monotonic_now_ns();
    let last = RECLAIM_LAST.load(Relaxed);
    if now.saturating_sub(last) < RECLAIM_EVERY_NS
        || RECLAIM_LAST
            .compare_exchange(last, now, Relaxed, Relaxed)
            .is_err()
    {
        return;
    }
    let watched = |s: &Slot| !s.held.load(Relaxed) && s.watchers.load(Relaxed) > 0;
    if !SIGNALS.iter().any(watched) {
        return;
    }
    let _critical = Critical::enter();
    for (signo, slot) in SIGNALS.iter().enumerate().skip(1) {
        if !watched(slot) {
            continue;
        }
        let signo = signo as c_int;
        let replaced = sigaction(signo, None).is_ok_and(|cur| entry_of(cur.sa_sigaction).is_none());
        if replaced {
            // On failure the program's disposition stays; the next look tries again.
            let _ = install(signo, slot);
        }
    }
}
