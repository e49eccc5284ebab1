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

/// The address `on_signal` is installed under.
pub(super) fn on_signal_addr() -> usize {
    on_signal as extern "C" fn(c_int, *mut libc::siginfo_t, *mut c_void) as usize
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

/// Stores `act` as `slot`'s saved disposition. `on_signal` itself is never saved (that would
/// make it chain to itself): it is saved as `SIG_DFL`.
pub(super) fn save(slot: &Slot, act: &libc::sigaction) {
    let h = if act.sa_sigaction == on_signal_addr() {
        libc::SIG_DFL
    } else {
        act.sa_sigaction
    };
    let bits = mask_bits(&act.sa_mask);
    slot.mask[0].store(bits[0], SeqCst);
    slot.mask[1].store(bits[1], SeqCst);
    slot.flags.store(act.sa_flags, SeqCst);
    slot.handler.store(h, SeqCst);
}

/// `slot`'s saved disposition as a `sigaction`.
pub(super) fn saved_action(slot: &Slot) -> libc::sigaction {
    let mut act = zeroed_action();
    act.sa_sigaction = slot.handler.load(SeqCst);
    act.sa_flags = slot.flags.load(SeqCst);
    act.sa_mask = mask_set([slot.mask[0].load(SeqCst), slot.mask[1].load(SeqCst)]);
    act
}

/// The `sigaction` that installs `on_signal` for `slot` (flags and mask per "Delivered as
/// usual" in the module documentation).
pub(super) fn our_action(slot: &Slot) -> libc::sigaction {
    let h = slot.handler.load(SeqCst);
    let f = slot.flags.load(SeqCst);
    let nomask = slot.nomask.load(SeqCst) > 0;
    let mut act = zeroed_action();
    act.sa_sigaction = on_signal_addr();
    act.sa_flags = libc::SA_SIGINFO;
    if is_handler(h) {
        act.sa_flags |= f & (libc::SA_ONSTACK | libc::SA_NODEFER);
        if nomask || f & libc::SA_RESTART != 0 {
            act.sa_flags |= libc::SA_RESTART;
        }
        act.sa_mask = mask_set([slot.mask[0].load(SeqCst), slot.mask[1].load(SeqCst)]);
    } else {
        act.sa_flags |= libc::SA_ONSTACK | libc::SA_RESTART;
    }
    act
}

/// Installs `on_signal` for `signo` (its flags recomputed). If the disposition it replaced
/// is neither `on_signal` nor the saved one, the program changed it behind our back: that
/// disposition becomes the saved one and the installation is repeated (its flags and mask
/// depend on the saved disposition).
pub(super) fn install(signo: c_int, slot: &Slot) -> Result<(), Errno> {
    for _ in 0..3 {
        let prev = sigaction(signo, Some(&our_action(slot)))?;
        let h = prev.sa_sigaction;
        if h == on_signal_addr() || h == slot.handler.load(SeqCst) {
            return Ok(());
        }
        save(slot, &prev);
    }
    Ok(())
}

/// Puts the saved disposition back, unless the current one is no longer `on_signal` (the
/// program replaced it: its choice stays). Async-signal-safe.
pub(super) fn restore_if_ours(signo: c_int, slot: &Slot) {
    if let Ok(cur) = sigaction(signo, None) {
        if cur.sa_sigaction == on_signal_addr() {
            let _ = sigaction(signo, Some(&saved_action(slot)));
        }
    }
}
