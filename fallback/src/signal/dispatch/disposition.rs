//! Saved dispositions: what the program had installed for a watched signal, how it is saved
//! (atomics a handler can read), restored and re-installed, and the `sigaction`/`sigset_t`
//! helpers the handler also uses (async-signal-safe: their system calls are
//! `crate::sys::async_safe`'s).

use super::*;

/// How a signal's `SIG_DFL` acts (signal(7)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum DefaultAction {
    /// Ignored (`SIGCHLD`, `SIGURG`, `SIGWINCH`; `SIGCONT`, whose "continue" happens when the
    /// signal is sent, whatever the disposition).
    Ignore,
    /// Stops the process (`SIGTSTP`, `SIGTTIN`, `SIGTTOU`; `SIGSTOP` is never watched).
    Stop,
    /// Terminates it, with or without a core dump (everything else, realtime signals too).
    Terminate,
}

pub(super) fn default_action(signo: c_int) -> DefaultAction {
    match signo {
        libc::SIGCHLD | libc::SIGURG | libc::SIGWINCH | libc::SIGCONT => DefaultAction::Ignore,
        libc::SIGTSTP | libc::SIGTTIN | libc::SIGTTOU => DefaultAction::Stop,
        _ => DefaultAction::Terminate,
    }
}

/// The slot index of a signal a SIGNAL kevent may watch, or `EINVAL` for 0, negative numbers,
/// numbers above `SIGRTMAX()`, `SIGKILL`, `SIGSTOP`, and the numbers the C library reserves
/// for itself (from 32 to below `SIGRTMIN()`: glibc's 32 and 33).
pub(super) fn check_signo(signo: i32) -> Result<usize, Errno> {
    let valid = signo > 0
        && signo <= libc::SIGRTMAX()
        && (signo as usize) < SLOTS
        && signo != libc::SIGKILL
        && signo != libc::SIGSTOP
        && (signo < 32 || signo >= libc::SIGRTMIN());
    if valid {
        Ok(signo as usize)
    } else {
        Err(Errno::EINVAL)
    }
}

/// The address entry point `e` (0 or 1) of `on_signal` is installed under (module
/// documentation, "Two entry points").
pub(super) fn entry_addr(e: usize) -> usize {
    let f: extern "C" fn(c_int, *mut libc::siginfo_t, *mut c_void) =
        if e & 1 == 0 { on_signal_0 } else { on_signal_1 };
    f as usize
}

/// Which entry point of `on_signal` the disposition `h` is, if it is one.
pub(super) fn entry_of(h: usize) -> Option<usize> {
    (0..2).find(|&e| entry_addr(e) == h)
}

/// `true` for a disposition that is a function (neither `SIG_DFL` nor `SIG_IGN`).
pub(super) fn is_handler(h: usize) -> bool {
    h != libc::SIG_DFL && h != libc::SIG_IGN
}

/// A `sigaction` with every field zero (`SIG_DFL`, no flags, empty mask, no restorer).
pub(super) fn zeroed_action() -> libc::sigaction {
    // SAFETY: `struct sigaction` is integers, a `sigset_t` and an `Option` of a function
    // pointer, for all of which all-zero bytes are a valid value (`None` for the option).
    let mut act: libc::sigaction = unsafe { std::mem::zeroed() };
    act.sa_mask = async_safe::sigemptyset();
    act
}

/// The 128-bit form of a mask (bit `s - 1` = signal `s`).
pub(super) fn mask_bits(set: &libc::sigset_t) -> [u64; 2] {
    let mut bits = [0u64; 2];
    for s in 1..SLOTS {
        if async_safe::sigismember(set, s as c_int) == 1 {
            bits[(s - 1) / 64] |= 1 << ((s - 1) % 64);
        }
    }
    bits
}

/// The `sigset_t` of a 128-bit mask. Signals the C library refuses to add (its reserved ones)
/// are left out.
pub(super) fn mask_set(bits: [u64; 2]) -> libc::sigset_t {
    let mut set = async_safe::sigemptyset();
    for s in 1..SLOTS {
        if bits[(s - 1) / 64] & (1 << ((s - 1) % 64)) != 0 {
            async_safe::sigaddset(&mut set, s as c_int);
        }
    }
    set
}

/// Stores `act` as a saved disposition. `on_signal` itself is never saved (that would make
/// it chain to itself): it is saved as `SIG_DFL`.
pub(super) fn save(to: &Saved, act: &libc::sigaction) {
    let h = if entry_of(act.sa_sigaction).is_some() {
        libc::SIG_DFL
    } else {
        act.sa_sigaction
    };
    let bits = mask_bits(&act.sa_mask);
    to.mask[0].store(bits[0], SeqCst);
    to.mask[1].store(bits[1], SeqCst);
    to.flags.store(act.sa_flags, SeqCst);
    to.handler.store(h, SeqCst);
}

/// A saved disposition as a `sigaction`.
pub(super) fn saved_action(from: &Saved) -> libc::sigaction {
    let mut act = zeroed_action();
    act.sa_sigaction = from.handler.load(SeqCst);
    act.sa_flags = from.flags.load(SeqCst);
    act.sa_mask = mask_set([from.mask[0].load(SeqCst), from.mask[1].load(SeqCst)]);
    act
}

/// The `sigaction` that installs entry point `e` of `on_signal` for `slot` (flags and mask
/// per "Delivered as usual" in the module documentation, from that entry's saved
/// disposition).
pub(super) fn our_action(slot: &Slot, e: usize) -> libc::sigaction {
    let saved = &slot.saved[e & 1];
    let h = saved.handler.load(SeqCst);
    let f = saved.flags.load(SeqCst);
    let nomask = slot.nomask.load(SeqCst) > 0;
    let mut act = zeroed_action();
    act.sa_sigaction = entry_addr(e);
    act.sa_flags = libc::SA_SIGINFO;
    if is_handler(h) {
        act.sa_flags |= f & (libc::SA_ONSTACK | libc::SA_NODEFER);
        if nomask || f & libc::SA_RESTART != 0 {
            act.sa_flags |= libc::SA_RESTART;
        }
        act.sa_mask = mask_set([saved.mask[0].load(SeqCst), saved.mask[1].load(SeqCst)]);
    } else {
        act.sa_flags |= libc::SA_ONSTACK | libc::SA_RESTART;
    }
    act
}

/// Installs `on_signal` for `signo` (its flags recomputed). Called under `LOCK`, after the
/// first watch saved the disposition in place into the current entry's slot, or to
/// recompute the flags, or to take the signal back (decision P34).
///
/// If the disposition in place is neither an entry point of `on_signal` nor the current
/// entry's saved one, a program replaced `on_signal` (and may call the entry it replaced
/// from its handler, at any moment, even while this runs): that disposition is saved into the
/// *other* entry's slot and the other entry is installed, so the replaced entry keeps
/// delivering to what it always did (module documentation, "Two entry points"). If the
/// disposition changes again between the look and the installation, the one replaced is
/// saved instead and the installation repeated (flags and mask depend on it).
pub(super) fn install(signo: c_int, slot: &Slot) -> Result<(), Errno> {
    let mut e = slot.entry.load(SeqCst) & 1;
    let cur = sigaction(signo, None)?;
    let h = cur.sa_sigaction;
    if entry_of(h).is_none() && h != slot.saved[e].handler.load(SeqCst) {
        e ^= 1;
        save(&slot.saved[e], &cur);
        slot.entry.store(e, SeqCst);
    }
    for _ in 0..3 {
        let prev = sigaction(signo, Some(&our_action(slot, e)))?;
        let h = prev.sa_sigaction;
        if entry_of(h).is_some() || h == slot.saved[e].handler.load(SeqCst) {
            return Ok(());
        }
        save(&slot.saved[e], &prev);
    }
    Ok(())
}

/// Puts the saved disposition back, unless the current one is no longer `on_signal` (the
/// program replaced it: its choice stays). Async-signal-safe.
pub(super) fn restore_if_ours(signo: c_int, slot: &Slot) {
    if let Ok(cur) = sigaction(signo, None) {
        if let Some(e) = entry_of(cur.sa_sigaction) {
            let _ = sigaction(signo, Some(&saved_action(&slot.saved[e])));
        }
    }
}
