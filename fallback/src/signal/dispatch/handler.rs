//! The async-signal handler, `on_signal`: the only code of the dispatch that runs in signal
//! context (with the fork child handler). It counts a delivery, rings the doorbell, and
//! either swallows the signal (NOMASK, its queue still open) or delivers it as the program's
//! saved disposition says. Async-signal-safe only: atomics and the wrappers of
//! `crate::sys::async_safe` (raw system calls, the `sigset_t` functions, `errno`). Unsafe
//! code: see the dispatch module's `# Safety`.

use super::*;

/// Is this a fault the kernel raised for the current instruction (returning would repeat it)?
pub(super) fn is_fault(signo: c_int, info: *const libc::siginfo_t) -> bool {
    let fault_signal = matches!(
        signo,
        libc::SIGSEGV | libc::SIGBUS | libc::SIGILL | libc::SIGFPE
    );
    // SAFETY: the kernel passes a valid `siginfo_t` to an `SA_SIGINFO` handler; it is only
    // read, and only when non-null.
    fault_signal && !info.is_null() && unsafe { (*info).si_code } > 0
}

/// Entry point 0 of `on_signal` (module documentation, "Two entry points").
pub(super) extern "C" fn on_signal_0(signo: c_int, info: *mut libc::siginfo_t, ctx: *mut c_void) {
    on_signal(0, signo, info, ctx);
}

/// Entry point 1 of `on_signal`.
pub(super) extern "C" fn on_signal_1(signo: c_int, info: *mut libc::siginfo_t, ctx: *mut c_void) {
    on_signal(1, signo, info, ctx);
}

/// The process-wide handler of every watched signal (module documentation), entered through
/// entry point `entry`. Async-signal-safe.
#[inline(always)]
fn on_signal(entry: usize, signo: c_int, info: *mut libc::siginfo_t, ctx: *mut c_void) {
    // A fault of the library's own copy routine: an error return, invisible to everyone.
    if super::super::safecopy::fixup(signo, info, ctx) {
        return;
    }
    if !ctx.is_null() && CHAINING.with(Cell::get) == ctx as usize {
        // The handler this delivery was chained to called us back (signal-hook, and so
        // tokio::signal, keep the handler they replaced and call it): counted already.
        CHAINING.with(|c| c.set(0));
        return;
    }
    let saved_errno = async_safe::errno();
    let Some(slot) = usize::try_from(signo).ok().and_then(|s| SIGNALS.get(s)) else {
        return;
    };
    // Count first, then ring: a queue woken by the doorbell must see the new count.
    slot.delivered.fetch_add(1, SeqCst);
    let bell = DOORBELL.load(SeqCst);
    if bell >= 0 {
        // The doorbell eventfd is never closed (only replaced atomically by `dup3` in a fork
        // child). A failure (EAGAIN on a saturated counter) only loses a wake-up.
        async_safe::eventfd_signal(bell);
    }
    let swallow =
        slot.nomask.load(SeqCst) > 0 && !is_fault(signo, info) && nomask_in_force(signo, slot);
    if swallow {
        // A const-initialised `Cell<u64>` thread-local: no allocation, no destructor, no
        // lock (async-signal-safe).
        SWALLOWED.with(|n| n.set(n.get().wrapping_add(1)));
    } else {
        // Restored before running the program's handler.
        async_safe::set_errno(saved_errno);
        let outer = CHAINING.with(|c| c.replace(ctx as usize));
        deliver_as_usual(signo, slot, entry, info, ctx);
        CHAINING.with(|c| c.set(outer));
    }
    async_safe::set_errno(saved_errno);
}

/// Does what the saved disposition of entry point `entry` says (module documentation,
/// "Delivered as usual"). Async-signal-safe as long as the program's handler is.
pub(super) fn deliver_as_usual(
    signo: c_int,
    slot: &Slot,
    entry: usize,
    info: *mut libc::siginfo_t,
    ctx: *mut c_void,
) {
    let saved = &slot.saved[entry & 1];
    loop {
        let h = saved.handler.load(SeqCst);
        let flags = saved.flags.load(SeqCst);
        if !is_handler(h) && is_fault(signo, info) {
            // A real fault under SIG_DFL (or SIG_IGN, which the kernel does not honour for a
            // fault): put SIG_DFL back and return, so that the faulting instruction runs again
            // and the kernel takes the default action with the fault's own siginfo and core
            // (returning under SIG_IGN would fault forever).
            let _ = sigaction(signo, Some(&zeroed_action()));
            return;
        }
        if h == libc::SIG_IGN {
            return;
        }
        if h == libc::SIG_DFL {
            if sigaction(signo, None).is_ok_and(|cur| cur.sa_sigaction != entry_addr(entry)) {
                // Not the installed handler: one that replaced this entry point called it (a
                // handler that chains to the one it replaced, as signal-hook's does) and has
                // handled the signal; the default action is what that handler replaced
                // (decision P34).
                return;
            }
            default_action_now(signo, slot, entry);
            return;
        }
        if flags & libc::SA_RESETHAND != 0
            && saved
                .handler
                .compare_exchange(h, libc::SIG_DFL, SeqCst, SeqCst)
                .is_err()
        {
            // Another delivery reset it first: act on the new disposition.
            continue;
        }
        if flags & libc::SA_SIGINFO != 0 {
            // SAFETY: `h` was saved from `sigaction` with `SA_SIGINFO` set and is not SIG_DFL or
            // SIG_IGN, so it is the address of a `void (*)(int, siginfo_t *, void *)` that the
            // program installed; `info` and `ctx` are the kernel's, valid during this handler.
            let f: extern "C" fn(c_int, *mut libc::siginfo_t, *mut c_void) =
                unsafe { std::mem::transmute::<usize, _>(h) };
            f(signo, info, ctx);
        } else {
            // SAFETY: as above, without `SA_SIGINFO`: a `void (*)(int)`.
            let f: extern "C" fn(c_int) = unsafe { std::mem::transmute::<usize, _>(h) };
            f(signo);
        }
        return;
    }
}

/// Performs `SIG_DFL` for `signo` from inside `on_signal` (entered through `entry`).
/// Async-signal-safe.
pub(super) fn default_action_now(signo: c_int, slot: &Slot, entry: usize) {
    if default_action(signo) == DefaultAction::Ignore {
        return;
    }
    // Terminate, core or stop: let the kernel do it, with the real disposition.
    let _ = sigaction(signo, Some(&zeroed_action()));
    let mut set = async_safe::sigemptyset();
    async_safe::sigaddset(&mut set, signo);
    let _ = async_safe::pthread_sigmask(libc::SIG_UNBLOCK, Some(&set));
    async_safe::raise(signo);
    // Still alive: continued after a stop, or the kernel discarded the signal.
    if slot.watchers.load(SeqCst) > 0 {
        let _ = sigaction(signo, Some(&our_action(slot, entry)));
    }
}
