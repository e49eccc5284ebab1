//! Process-wide routing of signals to SIGNAL kevents (spec section 5, D8, D11).
//!
//! This file holds the registry (one `Slot` per signal number), its lock and the doorbell
//! ([`delivered`], [`doorbell_fd`]); one file per other responsibility: `watchers` (the
//! watch counts: [`watch`], [`unwatch`], the library's own hold of `SIGSEGV`/`SIGBUS`),
//! `owners` (which queue a NOMASK watcher belongs to, and the open check),
//! `disposition` (saving, restoring and installing dispositions; the `sigaction` helpers),
//! `handler` (`on_signal`, the only code here that runs in signal context besides the fork
//! child handler) and `atfork` (this module's part of `fork()`, called by `crate::fork`).
//!
//! # Why a `sigaction` handler and not signalfd
//!
//! A signalfd only receives a signal that is *blocked in every thread*: a thread that has it
//! unblocked takes the signal first, through the handler or the default action. An engine in
//! a library cannot block signals in threads it does not own, so signalfd would miss
//! deliveries in any multi-threaded program, and it could never implement NOMASK ("the
//! program's handler does not run, the default action does not happen") there. Instead the
//! first watch of a signal installs one process-wide handler (`on_signal`, with
//! `SA_SIGINFO`). Whichever thread the kernel picks runs it, blocked or not elsewhere, and it
//!
//! 1. increments the signal's delivery counter (an `AtomicU64`, see [`delivered`]);
//! 2. writes 1 to the process-wide *doorbell* eventfd ([`doorbell_fd`]);
//! 3. returns at once if a NOMASK watcher is in force (the signal is swallowed: no program
//!    handler, no default action). A watcher that belongs to a queue ([`watch_for`]) is in
//!    force only while that queue's fd is open, which the handler checks with one
//!    `epoll_ctl` per such queue (a closed queue gives its signals back at once, decision
//!    P17);
//! 4. otherwise delivers the signal *as usual*: it chains to the disposition that was in place
//!    when the first watcher arrived (the *saved* disposition), see "Delivered as usual".
//!
//! # Engine contract (D8)
//!
//! * Register: call [`watch`]`(signo, nomask)` (it creates the doorbell if needed), then keep
//!   `seen = delivered(signo)` in the kevent. Deliveries before that point are not reported.
//! * Register [`doorbell_fd`] once in every queue's epoll with `EPOLLIN | EPOLLET` and
//!   **never read it**. When it fires, each SIGNAL kevent of the queue whose
//!   `delivered(signo) != seen` is ready; its delivery reports `ret_data[0] = delivered - seen`
//!   (occurrences since the last delivery, coalesced) and sets `seen = delivered` (use the
//!   value read once, so no delivery is counted twice or lost).
//! * Remove: call [`unwatch`]`(signo, nomask)` once per successful [`watch`].
//!
//! The handler increments the counter *before* it rings the doorbell (both `SeqCst`), so an
//! engine woken by the doorbell always sees the new count: the eventfd write and the epoll
//! wake-up go through kernel locks that order the counter store before the waiter's load.
//!
//! ## Why `EPOLLET` makes a never-read eventfd correct
//!
//! Every successful `write(2)` to an eventfd wakes its wait queue, and epoll's wake-up callback
//! then puts the doorbell on the ready list of *every* epoll instance that registered it,
//! whether or not the counter was already non-zero. In edge-triggered mode `epoll_wait`
//! reports such an item once and does not re-check it afterwards. So each write wakes each
//! queue exactly once, nobody needs to drain the counter, and no queue can take a wake-up
//! away from another one (which is what would happen if queues *read* the shared counter: the
//! first reader would leave zero behind for the others). In level-triggered mode the
//! never-drained counter would instead be reported by every `epoll_wait`: a busy loop. The
//! counter only saturates after 2^64 - 2 deliveries (centuries at any signal rate); writes
//! after that would fail with `EAGAIN` and wake nobody.
//!
//! # Delivered as usual
//!
//! Without a NOMASK watcher the handler does what the saved disposition says:
//!
//! * a handler with `SA_SIGINFO`: `sa_sigaction(signo, info, ucontext)` with the kernel's own
//!   `siginfo_t` and context; without it: `sa_handler(signo)`;
//! * `SIG_IGN`: nothing;
//! * `SIG_DFL` of a signal whose default is to be ignored (`SIGCHLD`, `SIGURG`, `SIGWINCH`,
//!   `SIGCONT`, whose "continue" the kernel performs when the signal is sent): nothing;
//! * `SIG_DFL` of a terminate or core signal (everything else, realtime signals included), or a
//!   stop signal (`SIGTSTP`, `SIGTTIN`, `SIGTTOU`): the handler resets the disposition to
//!   `SIG_DFL`, unblocks the signal in its thread and raises it, so the process dies with the
//!   right status (and core) or stops. If it is still alive afterwards (a stop signal and the
//!   process was continued, or the kernel discarded the signal: an orphaned process group for
//!   stop signals, PID 1 of a PID namespace) it reinstalls `on_signal` if the signal is still
//!   watched.
//!
//! The saved flags and mask are honoured where that is meaningful: `on_signal` is installed
//! with the saved `sa_mask` and the saved `SA_NODEFER` and `SA_ONSTACK` (so the program's
//! handler runs with the signals blocked and on the stack it asked for), and with `SA_RESTART`
//! only if the saved handler had it (so a program that relies on `EINTR` still sees it), or
//! whenever the saved disposition is not a handler or a NOMASK watcher exists (then the signal
//! should be invisible). `SA_RESETHAND` is emulated: the first chained delivery atomically
//! changes the saved disposition to `SIG_DFL` before calling the handler, so the next delivery
//! takes the default action and the last [`unwatch`] restores `SIG_DFL`, as the kernel would
//! have done. `SA_RESTORER` is the C library's business (it supplies its own on every
//! `sigaction`).
//!
//! # Two entry points
//!
//! `on_signal` is installed under two addresses, `on_signal_0` and `on_signal_1`, each with
//! its own saved disposition; the slot records which one the engine installed last. A
//! program (or `tokio::signal`, `ctrlc`, `signal-hook`) may replace the engine's handler and
//! chain to it; when the engine takes the signal back (decision P34) it saves the program's
//! disposition into the *other* entry's slot and installs that entry. A chaining handler
//! entered by the kernel before the take-back, still running, then calls the entry it
//! replaced, whose saved disposition is still what that entry always delivered to: the
//! delivery is counted once, the program's handler is not run a second time, and the chain
//! goes on to the disposition saved before. The new slot is written before the new entry is
//! installed, so no delivery acts on a half-made record either. Only if the program changes
//! the disposition again between the engine's look and its `sigaction` is the record made
//! from the one `sigaction` replaced, after the installation (the program racing itself).
//!
//! A kernel-generated fault (`SIGSEGV`, `SIGBUS`, `SIGILL`, `SIGFPE` with `si_code > 0`) is
//! never swallowed even with NOMASK: returning would re-execute the faulting instruction
//! forever. It is counted and then delivered as usual.
//!
//! # Watcher registry and publication order
//!
//! The handler reads only lock-free statics indexed by signal number: the NOMASK watcher
//! count, the total watcher count, the delivery counter, and the saved disposition as atomics
//! (handler address, flags, and the mask as a 128-bit set). [`watch`] and [`unwatch`] are
//! serialized by one `std::sync::Mutex`. The first [`watch`] of a signal reads the current
//! disposition, stores it and the counts (`SeqCst`), and only then installs `on_signal` with
//! `sigaction`: the kernel takes the signal-handler lock both in `sigaction` and when it
//! delivers a signal, so any handler invocation that runs `on_signal` happens after those
//! stores and sees them. If the disposition `sigaction` replaced is not the one saved (a
//! program thread changed it in between), the replaced one is saved instead and the
//! installation repeated. The last [`unwatch`] first restores the saved disposition, then
//! clears the count; the saved disposition itself is never cleared, so a handler invocation
//! still in flight on another thread chains correctly.
//!
//! # fork (D11)
//!
//! Signal kevents are never inherited. The engine's fork handlers (`crate::fork`, one
//! `pthread_atfork` registration for the whole engine) call:
//!
//! * *prepare* (parent, before fork) takes the Mutex, so fork waits until no [`watch`] or
//!   [`unwatch`] is half done: the child sees a consistent registry. A thread that holds the
//!   Mutex at the moment of the fork therefore cannot exist;
//! * *parent* releases it;
//! * *child* (single-threaded, async-signal-safe work only, the Mutex is never *locked* there):
//!   zeroes the NOMASK counts, restores every watched signal's saved disposition (unless the
//!   program replaced `on_signal` meanwhile), zeroes the watcher counts, replaces the doorbell
//!   with a fresh eventfd under the *same* fd number (`dup3`, so a number the engine cached
//!   stays valid but no longer wakes the parent's queues), then releases the Mutex it inherited
//!   from *prepare*.
//!
//! The one exception: a fork from a signal handler that interrupted [`watch`] or [`unwatch`]
//! *on the forking thread* (the prepare handler detects this and does not wait for itself).
//! The child may then see a half-updated registry and a locked Mutex, so its own [`watch`]
//! would block forever. Forking from a signal handler is not async-signal-safe with atfork
//! handlers anyway.
//!
//! Delivery counters are not reset in the child: they are monotonic and the child has no
//! SIGNAL kevents.
//!
//! # The library's own faults
//!
//! `hold_faults` keeps `on_signal` installed for `SIGSEGV` and `SIGBUS` for good (a watcher
//! that is never unwatched, kept in fork children), and `on_signal` first asks
//! [`super::safecopy`] whether the fault is one of its copy routine's: then it resumes the
//! routine at its error exit and does nothing else (no count, no doorbell). Every other fault
//! is delivered as usual; one under `SIG_DFL` or `SIG_IGN` puts `SIG_DFL` back and returns, so
//! that the instruction faults again and the kernel acts with the real siginfo (decision P21).
//!
//! # Limitations
//!
//! * The owner records of NOMASK watchers are read without locks: a delivery racing the REMOVE
//!   of a queue's last NOMASK kevent for the signal, and the reuse of its record by another
//!   queue, can check the wrong queue once (one signal swallowed or delivered wrongly).
//!
//! * A program that installs its own disposition *after* a signal kevent was registered
//!   replaces `on_signal`: deliveries are no longer counted and NOMASK no longer holds
//!   until `reclaim_if_due` (called by the waits, at most once a second; decision P34) or
//!   the next NOMASK transition (first NOMASK watcher added, or last removed) reinstalls
//!   `on_signal` through its other entry point and adopts the program's new disposition as
//!   that entry's saved one ("Two entry points"); the last [`unwatch`] leaves the program's
//!   disposition in place. A replacing handler that calls the one it replaced
//!   (signal-hook's) reaches `on_signal` with the delivery's context: as the installed
//!   handler's callee it counts and never takes a default action; as `on_signal`'s own
//!   callee (after the reclaim) it is recognised (`CHAINING`) and not counted again, and the
//!   chain ends there (the disposition saved before the program's is not run).
//! * Deliveries are seen, not generations: a signal blocked in every thread stays pending
//!   and is reported when a thread unblocks it; a program that takes it with `sigwaitinfo` or
//!   its own signalfd consumes it unseen (and NOMASK cannot hide it). Standard signals that
//!   are generated while one is pending coalesce in the kernel before the handler sees them.
//! * While a signal is watched it interrupts system calls even when the saved disposition
//!   was `SIG_IGN` or a default "ignore": those restart (`SA_RESTART`), except the calls that
//!   never restart (`epoll_wait`, `poll`, `select`, `sigtimedwait`, … see signal(7)), which
//!   return `EINTR`.
//! * `exec` resets caught signals to `SIG_DFL`: a program that execs while a signal whose
//!   saved disposition is `SIG_IGN` is watched hands `SIG_DFL` to the new image. (fork
//!   children of `fork()` are fixed by the atfork handler; `posix_spawn` and `vfork` run no
//!   atfork handler.)
//! * Between the reset to `SIG_DFL` and the reinstallation around a raised terminate or stop
//!   signal, other deliveries of that signal take the default action uncounted; a concurrent
//!   last [`unwatch`] in that window can leave `on_signal` installed (it then keeps
//!   delivering as usual). The emulated `SA_RESETHAND` has a similar window against the last
//!   [`unwatch`]. The saved handler address and flags are two atomics: a delivery racing a
//!   complete unwatch-then-watch cycle could read one from each.
//!
//! # Safety
//!
//! The system calls (`sigaction`, `pthread_sigmask`, `raise`, `write`, `eventfd`, `dup3`,
//! `close`, `epoll_ctl`, the `sigset_t` functions) are `crate::sys::async_safe`'s wrappers.
//! Unsafe code here zeroes plain C structs, follows the owner table's leaked chunks, and
//! converts a saved handler address back into a function pointer: that
//! address was read by `sigaction` from the kernel and is neither `SIG_DFL` nor `SIG_IGN`, so
//! it is a handler some code of this process installed, with the signature its `SA_SIGINFO`
//! bit announces. Everything `on_signal` and the atfork child handler do is
//! async-signal-safe: atomics and `crate::sys::async_safe` (raw system calls, the `sigset_t`
//! functions), no allocation, no lock; `errno` is saved and restored around them.
#![allow(unsafe_code)]

mod atfork;
mod disposition;
mod handler;
mod owners;
mod watchers;

pub(crate) use atfork::{fork_child, fork_parent, fork_prepare};
use disposition::*;
use handler::*;
pub use owners::Owner;
use owners::*;
pub(crate) use watchers::{faults_held, hold_faults, reclaim_if_due};
pub use watchers::{unwatch, unwatch_for, watch, watch_for};

use std::cell::{Cell, RefCell};
use std::ffi::{c_int, c_void};
use std::os::fd::{IntoRawFd, RawFd};
use std::sync::atomic::Ordering::{Relaxed, SeqCst};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize};
use std::sync::{Mutex, MutexGuard, PoisonError};

use kevent_sys::Errno;

use crate::sys::async_safe::{self, sigaction};

/// Slots for signal numbers `0..SLOTS`: 128 covers `_NSIG - 1` of every Linux architecture
/// (64 on most, 128 on MIPS). Slot 0 is never used.
const SLOTS: usize = 129;

/// Everything known about one signal number; read by `on_signal` without locks, written
/// only under `LOCK` (and by the handler itself for the emulated `SA_RESETHAND`).
struct Slot {
    /// Number of NOMASK watchers.
    nomask: AtomicU32,
    /// NOMASK watchers without an [`Owner`] ([`watch`]): they swallow the signal as long as
    /// they exist. Owned ones ([`watch_for`]) only while their queue is open.
    unowned: AtomicU32,
    /// The library holds this signal for itself ([`hold_faults`]): `on_signal` stays
    /// installed whatever the kevent watchers do; the hold counts as one of `watchers`.
    held: AtomicBool,
    /// Number of watchers, NOMASK ones included.
    watchers: AtomicU32,
    /// Deliveries `on_signal` saw, since the process started (monotonic).
    delivered: AtomicU64,
    /// The entry point (0 or 1, see "Two entry points") the engine installed last: the one
    /// a delivery from the kernel enters while the engine's disposition is in place.
    entry: AtomicUsize,
    /// The saved disposition of each entry point: what it delivers "as usual" to.
    saved: [Saved; 2],
}

/// A saved disposition, as atomics a handler can read.
struct Saved {
    /// `sa_sigaction` / `sa_handler` (or `SIG_DFL`, `SIG_IGN`).
    handler: AtomicUsize,
    /// `sa_flags`.
    flags: AtomicI32,
    /// `sa_mask`: bit `s - 1` of the 128-bit value is signal `s`.
    mask: [AtomicU64; 2],
}

impl Saved {
    const fn new() -> Saved {
        Saved {
            handler: AtomicUsize::new(libc::SIG_DFL),
            flags: AtomicI32::new(0),
            mask: [AtomicU64::new(0), AtomicU64::new(0)],
        }
    }
}

impl Slot {
    const fn new() -> Slot {
        Slot {
            nomask: AtomicU32::new(0),
            unowned: AtomicU32::new(0),
            held: AtomicBool::new(false),
            watchers: AtomicU32::new(0),
            delivered: AtomicU64::new(0),
            entry: AtomicUsize::new(0),
            saved: [Saved::new(), Saved::new()],
        }
    }

    /// The saved disposition of the entry point installed last.
    fn current(&self) -> &Saved {
        &self.saved[self.entry.load(SeqCst) & 1]
    }
}

/// The registry, indexed by signal number.
static SIGNALS: [Slot; SLOTS] = [const { Slot::new() }; SLOTS];

/// The doorbell eventfd, or -1 before the first [`doorbell_fd`] / [`watch`].
static DOORBELL: AtomicI32 = AtomicI32::new(-1);

/// Serializes [`watch`], [`unwatch`] and the doorbell's creation; held across `fork()` by the
/// atfork prepare handler.
static LOCK: Mutex<()> = Mutex::new(());

thread_local! {
    /// This thread is inside (or entering) a `LOCK` critical section.
    static IN_CRITICAL: Cell<bool> = const { Cell::new(false) };
    /// The guard the atfork prepare handler took, released by the parent or child handler.
    static FORK_GUARD: RefCell<Option<MutexGuard<'static, ()>>> = const { RefCell::new(None) };
    /// Signals `on_signal` swallowed (NOMASK) on this thread: a wait that a swallowed signal
    /// interrupted was not interrupted by a handler of the program (spec section 3: natively
    /// such a signal never reaches the thread at all), so it sleeps on.
    static SWALLOWED: Cell<u64> = const { Cell::new(0) };
    /// The context (`ucontext_t` address) of the delivery whose program handler `on_signal`
    /// is calling on this thread, 0 if none: a call of `on_signal` with that context comes
    /// from that handler, which chains back (decision P34).
    static CHAINING: Cell<usize> = const { Cell::new(0) };
}

/// How many signals `on_signal` swallowed on the calling thread so far (see `SWALLOWED`).
pub(crate) fn swallowed_here() -> u64 {
    SWALLOWED.with(Cell::get)
}

/// A held `LOCK`, with `IN_CRITICAL` set for as long as it may be held.
struct Critical {
    guard: Option<MutexGuard<'static, ()>>,
}

impl Critical {
    fn enter() -> Critical {
        // Set before locking: a signal handler that interrupts this thread while it waits or
        // holds the lock and then forks must not make the prepare handler wait for this thread.
        IN_CRITICAL.set(true);
        let guard = LOCK.lock().unwrap_or_else(PoisonError::into_inner);
        Critical { guard: Some(guard) }
    }
}

impl Drop for Critical {
    fn drop(&mut self) {
        // Unlock first, clear the flag second (never the other way round: see `enter`).
        drop(self.guard.take());
        IN_CRITICAL.set(false);
    }
}

/// Creates the doorbell if it does not exist yet. Called with `LOCK` held.
fn ensure_doorbell() -> Result<RawFd, Errno> {
    let fd = DOORBELL.load(SeqCst);
    if fd >= 0 {
        return Ok(fd);
    }
    // Above the internal fd floor, like the engine's other fds: it is created during a
    // kevent_ctl ADD and must not take a number the program just closed. Owned by this module
    // from now on (never closed).
    let fd = crate::sys::eventfd()?.into_raw_fd();
    DOORBELL.store(fd, SeqCst);
    Ok(fd)
}

/// Registers the engine's fork handlers once (`crate::fork`); `ENOMEM` (or what
/// `pthread_atfork` said) if that failed, since D11 could not be kept.
fn ensure_atfork() -> Result<(), Errno> {
    crate::fork::install()
}

/// How many deliveries of `signo` `on_signal` has seen since the process started (0 for a
/// signal never watched or invalid). Monotonic; see the engine contract (D8) in the module
/// documentation.
pub fn delivered(signo: i32) -> u64 {
    match check_signo(signo) {
        Ok(s) => SIGNALS[s].delivered.load(SeqCst),
        Err(_) => 0,
    }
}

/// The process-wide doorbell: a non-blocking, close-on-exec eventfd that `on_signal`
/// writes 1 to after every delivery. Created once, on first use; the same fd number for the
/// life of the process (a fork child gets a fresh eventfd under the same number).
///
/// Register it with `EPOLLIN | EPOLLET` and never read it (module documentation). Do not close
/// it.
///
/// # Errors
///
/// `EMFILE`, `ENFILE`, `ENOMEM` from `eventfd` or `pthread_atfork`.
pub fn doorbell_fd() -> Result<RawFd, Errno> {
    let fd = DOORBELL.load(SeqCst);
    if fd >= 0 {
        return Ok(fd);
    }
    ensure_atfork()?;
    let _critical = Critical::enter();
    ensure_doorbell()
}

#[cfg(test)]
mod tests {
    //! Pure parts only: handler installation changes the whole process, so those scenarios
    //! run in child processes (`tests/signal_dispatch.rs`).
    use super::*;

    #[test]
    fn s5_signal_invalid_numbers_are_einval() {
        let rtmin = libc::SIGRTMIN();
        let rtmax = libc::SIGRTMAX();
        for bad in [
            0,
            -1,
            i32::MIN,
            libc::SIGKILL,
            libc::SIGSTOP,
            32,
            rtmin - 1,
            rtmax + 1,
            1000,
        ] {
            if bad == rtmin - 1 && bad < 32 {
                continue;
            }
            assert_eq!(check_signo(bad), Err(Errno::EINVAL), "signal {bad}");
            assert_eq!(delivered(bad), 0);
        }
        for good in [
            1,
            libc::SIGINT,
            libc::SIGUSR1,
            libc::SIGSEGV,
            31,
            rtmin,
            rtmax,
        ] {
            assert_eq!(check_signo(good), Ok(good as usize), "signal {good}");
        }
    }

    #[test]
    fn default_actions_follow_signal_7() {
        use DefaultAction::*;
        for (s, a) in [
            (libc::SIGCHLD, Ignore),
            (libc::SIGURG, Ignore),
            (libc::SIGWINCH, Ignore),
            (libc::SIGCONT, Ignore),
            (libc::SIGTSTP, Stop),
            (libc::SIGTTIN, Stop),
            (libc::SIGTTOU, Stop),
            (libc::SIGTERM, Terminate),
            (libc::SIGUSR1, Terminate),
            (libc::SIGQUIT, Terminate),
            (libc::SIGSEGV, Terminate),
            (libc::SIGRTMIN(), Terminate),
        ] {
            assert_eq!(default_action(s), a, "signal {s}");
        }
    }

    #[test]
    fn mask_round_trip() {
        let mut set = async_safe::sigemptyset();
        for s in [1, libc::SIGUSR2, 31, libc::SIGRTMIN(), libc::SIGRTMAX()] {
            async_safe::sigaddset(&mut set, s);
        }
        let bits = mask_bits(&set);
        assert_eq!(bits[0] & 1, 1);
        assert_ne!(bits[0] & (1 << (libc::SIGUSR2 - 1)), 0);
        assert_eq!(mask_bits(&mask_set(bits)), bits);
        assert_eq!(mask_bits(&async_safe::sigemptyset()), [0, 0]);
    }

    fn slot_with(handler: usize, flags: c_int, nomask: u32) -> Slot {
        let slot = Slot::new();
        let saved = &slot.saved[1];
        saved.handler.store(handler, SeqCst);
        saved.flags.store(flags, SeqCst);
        saved.mask[0].store(1 << (libc::SIGUSR2 - 1), SeqCst);
        slot.nomask.store(nomask, SeqCst);
        slot
    }

    extern "C" fn program_handler(_: c_int) {}

    #[test]
    fn our_flags_mirror_the_saved_handler() {
        let h = program_handler as extern "C" fn(c_int) as usize;
        // A program handler without SA_RESTART keeps seeing EINTR; its mask and stack choice
        // are kept; SA_RESETHAND is never passed on (it is emulated).
        let a = our_action(&slot_with(h, libc::SA_NODEFER | libc::SA_RESETHAND, 0), 1);
        assert_eq!(a.sa_sigaction, entry_addr(1));
        assert_eq!(a.sa_flags, libc::SA_SIGINFO | libc::SA_NODEFER);
        assert_eq!(mask_bits(&a.sa_mask)[0], 1 << (libc::SIGUSR2 - 1));
        let a = our_action(&slot_with(h, libc::SA_RESTART | libc::SA_ONSTACK, 0), 1);
        assert_eq!(
            a.sa_flags,
            libc::SA_SIGINFO | libc::SA_RESTART | libc::SA_ONSTACK
        );
        // With a NOMASK watcher the signal is invisible: always restart.
        let a = our_action(&slot_with(h, 0, 1), 1);
        assert_eq!(a.sa_flags, libc::SA_SIGINFO | libc::SA_RESTART);
        // SIG_DFL / SIG_IGN: the brief's flags, no mask.
        for d in [libc::SIG_DFL, libc::SIG_IGN] {
            let a = our_action(&slot_with(d, libc::SA_NODEFER, 0), 1);
            assert_eq!(
                a.sa_flags,
                libc::SA_SIGINFO | libc::SA_RESTART | libc::SA_ONSTACK
            );
            assert_eq!(mask_bits(&a.sa_mask), [0, 0]);
        }
    }

    #[test]
    fn on_signal_is_never_saved() {
        let slot = Slot::new();
        for e in 0..2 {
            let mut act = zeroed_action();
            act.sa_sigaction = entry_addr(e);
            act.sa_flags = libc::SA_SIGINFO;
            save(&slot.saved[e], &act);
            assert_eq!(slot.saved[e].handler.load(SeqCst), libc::SIG_DFL);
            let back = saved_action(&slot.saved[e]);
            assert_eq!(back.sa_sigaction, libc::SIG_DFL);
        }
    }

    #[test]
    fn two_distinct_entry_points() {
        assert_ne!(entry_addr(0), entry_addr(1));
        assert_eq!(entry_of(entry_addr(0)), Some(0));
        assert_eq!(entry_of(entry_addr(1)), Some(1));
        assert_eq!(entry_of(libc::SIG_DFL), None);
        assert_eq!(
            entry_of(program_handler as extern "C" fn(c_int) as usize),
            None
        );
    }
}
