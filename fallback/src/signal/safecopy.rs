//! Copies to and from memory a C caller named, with a fault turned into `EFAULT` instead of a
//! crash: gVisor's "safecopy", for the C library's fallback path.
//!
//! The kernel never crashes on a bad user pointer: `copy_from_user`/`copy_to_user` return
//! `EFAULT`. A userspace engine gets the same answer at the cost of a plain copy by doing the
//! copy in one small assembly routine ([`copy`]) and letting the process-wide `SIGSEGV` and
//! `SIGBUS` handler (`dispatch`'s `on_signal`, installed for good by `hold_faults`) recognise a
//! fault whose instruction pointer lies inside that routine: it moves the instruction pointer
//! to the routine's error exit, which returns `EFAULT` to the caller. Every other fault goes
//! to the disposition that was in place before (the program's handler, a sanitizer's, or the
//! default action, with the fault's own siginfo and core), exactly as without the library.
//!
//! # When it is not used
//!
//! [`usable`] says, per thread, whether a copy may go through here; when it says no, the C
//! library copies with system calls (`process_vm_readv`/`writev`, or a pipe), which are slower
//! but cannot fault:
//!
//! * **A thread that blocks `SIGSEGV` or `SIGBUS`.** The kernel answers a fault with the signal
//!   blocked by resetting it to `SIG_DFL` and killing the process, so no handler could help.
//!   The thread's mask is read at its first copy and again at every `kevent_init` it calls; a
//!   thread that blocks either signal *after* that and then passes a bad pointer is killed by
//!   `SIGSEGV`, as it would be if it touched the pointer itself (POSIX leaves a fault with
//!   these signals blocked undefined).
//! * **A program that installed its own `SIGSEGV`/`SIGBUS` handler after the library.** The
//!   library checks at every `kevent_init` that `on_signal` still is the disposition and, once
//!   it is not, stops using safecopy for the rest of the process: it never takes the signal
//!   back. Until that check, a bad pointer reaches the program's handler as a fault inside
//!   libkevent (a handler that chains to the previous disposition, as crash reporters do, hands
//!   it back to `on_signal`, and the call still returns `EFAULT`). A handler installed
//!   *before* the library is chained to and keeps seeing every fault of its own.
//! * **Sanitizers.** AddressSanitizer's handler (installed first) becomes the saved
//!   disposition: real faults still reach it. With `handle_segv=2` ASan refuses other handlers;
//!   the check then fails and the syscall copies are used. ThreadSanitizer delivers `SIGSEGV`
//!   synchronously to the handler it intercepted, with the real context, so safecopy should
//!   work under it (not tested: `docs/testing-sanitizers.md`). Valgrind reports the faulting read or write of an `EFAULT` case as an invalid
//!   access (it is one), then delivers the fault to `on_signal`.
//! * **Architectures other than x86_64**: no routine; always the syscall copies.
//!
//! `on_signal` is installed with `SA_ONSTACK` whenever the saved disposition was not a handler
//! (a handler keeps its own choice, so the program's stack-overflow handler still runs on the
//! alternate stack it set up with `sigaltstack`); recognising a safecopy fault needs a few
//! hundred bytes of stack on whichever stack the kernel picked.
//!
//! # Safety
//!
//! The routine only moves `len` bytes from `src` to `dst`; one side is the engine's own
//! buffer (valid for `len` bytes), the other is the C caller's address, which may be anything
//! in user space: touching it is a plain load or store that either works or faults, and a
//! fault is turned into the error return before any byte after it is written. The handler
//! rewrites the saved instruction pointer only for a kernel-generated `SIGSEGV`/`SIGBUS`
//! (`si_code > 0`) whose instruction pointer lies inside the routine (its only memory
//! accesses are the copy's loads and stores); the error exit then returns to the routine's
//! caller with the stack as the routine entered it (the routine has no frame).
#![allow(unsafe_code)]

use std::cell::Cell;
use std::ffi::{c_int, c_void};
use std::sync::atomic::AtomicU8;
use std::sync::atomic::Ordering::{Acquire, Release};

use kevent_sys::Errno;

use super::dispatch;
use crate::sys::async_safe;

/// The highest address (exclusive) a user pointer may reach: the top of x86_64 user space with
/// 5-level paging (`TASK_SIZE_MAX`, 2^56 - 4096). Addresses above (the kernel half, the
/// vsyscall page) give `EFAULT` without being touched, as `access_ok()` does; between 2^47
/// and this limit a 4-level machine has non-canonical addresses, which fault.
#[cfg(target_arch = "x86_64")]
const USER_END: usize = (1 << 56) - 4096;

#[cfg(target_arch = "x86_64")]
core::arch::global_asm!(
    // `kevent_safecopy_v1_copy(dst: rdi, src: rsi, len: rdx) -> eax`: 0 when all `len` bytes
    // were copied; the handler makes it return from `_fault` with 1 when one of its loads or
    // stores faulted. It has no frame and calls nothing.
    // Weak and hidden: never exported from libkevent.so, and two copies of this crate in one
    // link resolve to one routine.
    ".pushsection .text.kevent_safecopy_v1,\"ax\",@progbits",
    ".p2align 4",
    ".weak kevent_safecopy_v1_copy",
    ".hidden kevent_safecopy_v1_copy",
    ".type kevent_safecopy_v1_copy,@function",
    "kevent_safecopy_v1_copy:",
    // Up to 256 bytes (a kevent_ctl of a few entries, a small get_events): 8-byte moves,
    // then single bytes; `rep movsb` costs more to start than that. Larger: `rep movsb`.
    "cmp rdx, 256",
    "jae 5f",
    "mov rcx, rdx",
    "shr rcx, 3",
    "jz 2f",
    "1:",
    "mov rax, qword ptr [rsi]",
    "mov qword ptr [rdi], rax",
    "add rsi, 8",
    "add rdi, 8",
    "dec rcx",
    "jnz 1b",
    "2:",
    "and edx, 7",
    "jz 4f",
    "3:",
    "mov al, byte ptr [rsi]",
    "mov byte ptr [rdi], al",
    "inc rsi",
    "inc rdi",
    "dec edx",
    "jnz 3b",
    "4:",
    "xor eax, eax",
    "ret",
    "5:",
    "mov rcx, rdx",
    "rep movsb",
    "xor eax, eax",
    "ret",
    ".size kevent_safecopy_v1_copy, . - kevent_safecopy_v1_copy",
    ".weak kevent_safecopy_v1_fault",
    ".hidden kevent_safecopy_v1_fault",
    ".type kevent_safecopy_v1_fault,@function",
    "kevent_safecopy_v1_fault:",
    "mov eax, 1",
    "ret",
    ".size kevent_safecopy_v1_fault, . - kevent_safecopy_v1_fault",
    ".popsection",
);

#[cfg(target_arch = "x86_64")]
unsafe extern "C" {
    /// The copy routine (see the `global_asm!` above). Its faulting instructions (the loads
    /// and stores) all lie between this symbol and `kevent_safecopy_v1_fault`.
    fn kevent_safecopy_v1_copy(dst: *mut u8, src: *const u8, len: usize) -> u32;
    /// The routine's error exit: returns 1 to the routine's caller.
    fn kevent_safecopy_v1_fault() -> u32;
}

/// Process-wide: whether the handler holds `SIGSEGV`/`SIGBUS`.
const UNTRIED: u8 = 0;
const HELD: u8 = 1;
/// Sticky: installing failed, or the program replaced the handler since.
const OFF: u8 = 2;

static STATE: AtomicU8 = AtomicU8::new(UNTRIED);

thread_local! {
    /// This thread's verdict ([`usable`]): 0 not checked yet, 1 usable, 2 not (it blocks
    /// `SIGSEGV` or `SIGBUS`, or the process-wide state is off).
    static THREAD: Cell<u8> = const { Cell::new(0) };
}

/// Installs the handler if that was not tried yet, and re-checks that it still holds the two
/// signals. Returns the process-wide verdict.
fn ensure_held() -> bool {
    if !cfg!(target_arch = "x86_64") {
        return false;
    }
    match STATE.load(Acquire) {
        OFF => false,
        UNTRIED => {
            let ok = dispatch::hold_faults().is_ok() && dispatch::faults_held();
            STATE.store(if ok { HELD } else { OFF }, Release);
            ok
        }
        _ => {
            let ok = dispatch::faults_held();
            if !ok {
                STATE.store(OFF, Release);
            }
            ok
        }
    }
}

/// Whether the calling thread blocks neither `SIGSEGV` nor `SIGBUS`.
fn thread_unblocked() -> bool {
    // `SIG_BLOCK` without a new set changes nothing: a query of the mask.
    let Some(cur) = async_safe::pthread_sigmask(libc::SIG_BLOCK, None) else {
        return false;
    };
    async_safe::sigismember(&cur, libc::SIGSEGV) == 0
        && async_safe::sigismember(&cur, libc::SIGBUS) == 0
}

/// Re-checks everything [`usable`] caches: that the handler still holds `SIGSEGV`/`SIGBUS`
/// (installing it the first time) and this thread's signal mask. The C library calls it from
/// every `kevent_init` (a few system calls; never on the per-call path). Returns the new
/// verdict for this thread.
pub fn refresh() -> bool {
    let ok = ensure_held() && thread_unblocked();
    let _ = THREAD.try_with(|t| t.set(if ok { 1 } else { 2 }));
    ok
}

/// Whether the calling thread may copy through [`copy`] now: the handler holds
/// `SIGSEGV`/`SIGBUS` and this thread blocks neither (checked at its first copy and at each
/// [`refresh`]; see the module documentation for what that leaves out). A thread-local read
/// and an atomic load on the per-call path.
pub fn usable() -> bool {
    match THREAD.try_with(Cell::get) {
        Ok(1) => STATE.load(Acquire) == HELD,
        Ok(0) => refresh(),
        // Not usable, or thread-local storage already torn down (thread exit): no caching.
        _ => false,
    }
}

/// Copies `len` bytes from `src` to `dst`, one of which is a C caller's address; `EFAULT` if
/// any byte of it cannot be read (for `src`) or written (for `dst`), or it reaches past the
/// end of user space. Bytes before the faulting one may have been copied.
///
/// Call only when [`usable`] said so on this thread; otherwise (or off x86_64) a fault is not
/// caught, so this returns `ENOSYS` without copying when the handler is not installed.
///
/// # Safety
///
/// The side that is not the caller's address is valid for `len` bytes (writes for `dst`,
/// reads for `src`) and not aliased by the other.
pub unsafe fn copy(dst: *mut u8, src: *const u8, len: usize) -> Result<(), Errno> {
    if len == 0 {
        return Ok(());
    }
    #[cfg(target_arch = "x86_64")]
    {
        let in_user = |p: usize| p.checked_add(len).is_some_and(|end| end <= USER_END);
        if !in_user(dst.addr()) || !in_user(src.addr()) {
            return Err(Errno::EFAULT);
        }
        if STATE.load(Acquire) != HELD {
            return Err(Errno::ENOSYS);
        }
        // SAFETY: this function's contract for our side; the caller's side is only loaded
        // from or stored to by the routine, whose faults the handler turns into the return
        // value 1 (module docs). `len` bytes at most are touched on either side.
        match unsafe { kevent_safecopy_v1_copy(dst, src, len) } {
            0 => Ok(()),
            _ => Err(Errno::EFAULT),
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (dst, src);
        Err(Errno::ENOSYS)
    }
}

/// Called first by `on_signal`: if this is a fault of the copy routine, redirects it to the
/// routine's error exit and returns `true` (the handler then returns at once). Async-signal-
/// safe: reads the siginfo and writes one register of the saved context.
pub(crate) fn fixup(signo: c_int, info: *mut libc::siginfo_t, ctx: *mut c_void) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        if !(signo == libc::SIGSEGV || signo == libc::SIGBUS) || info.is_null() || ctx.is_null() {
            return false;
        }
        // SAFETY: the kernel passes a valid siginfo_t to an SA_SIGINFO handler.
        if unsafe { (*info).si_code } <= 0 {
            // Sent by kill/sigqueue/tgkill: not a fault, whatever the instruction pointer.
            return false;
        }
        let uc = ctx.cast::<libc::ucontext_t>();
        let rip = libc::REG_RIP as usize;
        // SAFETY: for an SA_SIGINFO handler the third argument is the thread's saved
        // `ucontext_t`, valid and writable while the handler runs; the kernel restores the
        // registers from it when the handler returns.
        let pc = unsafe { (*uc).uc_mcontext.gregs[rip] } as usize;
        let start = kevent_safecopy_v1_copy as *const () as usize;
        let exit = kevent_safecopy_v1_fault as *const () as usize;
        if pc < start || pc >= exit {
            return false;
        }
        // SAFETY: as above; the error exit is a `ret` returning 1, valid to resume at with the
        // routine's stack (it pushes nothing).
        unsafe { (*uc).uc_mcontext.gregs[rip] = exit as i64 };
        true
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (signo, info, ctx);
        false
    }
}

#[cfg(test)]
mod tests {
    //! What these tests install (the process-wide `SIGSEGV`/`SIGBUS` handler) stays for the
    //! life of the test process; it changes nothing for other tests, whose real faults are
    //! still delivered as before.
    use super::*;

    use kevent_sys::mem::{AnonMap, Prot, page_size};

    struct Pages {
        base: *mut u8,
        page: usize,
        /// Unmapped when the pages are dropped.
        _map: AnonMap,
    }

    impl Pages {
        /// Page 0 read-write, page 1 inaccessible, page 2 read-only.
        fn new() -> Pages {
            let page = page_size();
            let map = AnonMap::new(3 * page).unwrap();
            // SAFETY: a fresh mapping, no reference into it.
            unsafe {
                map.protect(page, page, Prot::None).unwrap();
                map.protect(2 * page, page, Prot::Read).unwrap();
            }
            Pages {
                base: map.base().as_ptr(),
                page,
                _map: map,
            }
        }
    }

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn faults_become_efault_and_good_copies_copy() {
        assert!(refresh(), "safecopy unavailable on this thread");
        assert!(usable());
        let p = Pages::new();
        let mut buf = [0u8; 64];
        let src = [7u8; 64];
        // SAFETY: `buf`/`src` are valid for 64 bytes; the other side is our test mapping or a
        // bad address, which `copy` must survive.
        unsafe {
            assert_eq!(copy(p.base, src.as_ptr(), 64), Ok(()));
            assert_eq!(copy(buf.as_mut_ptr(), p.base, 64), Ok(()));
            assert_eq!(buf, src);
            // Into and out of the hole; straddling its start.
            let hole = p.base.add(p.page);
            assert_eq!(copy(hole, src.as_ptr(), 8), Err(Errno::EFAULT));
            assert_eq!(copy(buf.as_mut_ptr(), hole, 8), Err(Errno::EFAULT));
            let straddle = hole.sub(8);
            assert_eq!(copy(buf.as_mut_ptr(), straddle, 16), Err(Errno::EFAULT));
            // Read-only: readable, not writable.
            let ro = p.base.add(2 * p.page);
            assert_eq!(copy(buf.as_mut_ptr(), ro, 64), Ok(()));
            assert_eq!(copy(ro, src.as_ptr(), 1), Err(Errno::EFAULT));
            // NULL, kernel addresses, the end of the address space.
            assert_eq!(
                copy(buf.as_mut_ptr(), std::ptr::null(), 1),
                Err(Errno::EFAULT)
            );
            let kernel = std::ptr::without_provenance::<u8>(0xffff_ffff_ff60_0000);
            assert_eq!(copy(buf.as_mut_ptr(), kernel, 8), Err(Errno::EFAULT));
            let noncanonical = std::ptr::without_provenance::<u8>(1 << 50);
            assert_eq!(copy(buf.as_mut_ptr(), noncanonical, 8), Err(Errno::EFAULT));
            let top = std::ptr::without_provenance::<u8>(usize::MAX - 3);
            assert_eq!(copy(buf.as_mut_ptr(), top, 8), Err(Errno::EFAULT));
        }
        // Every length, short (8-byte moves and a byte tail) and long (`rep movsb`), copies
        // exactly, and faults at its first inaccessible byte wherever that falls.
        let pattern: Vec<u8> = (0..1000u32).map(|i| (i * 7 + 3) as u8).collect();
        for len in [1usize, 7, 8, 9, 15, 16, 40, 255, 256, 257, 999] {
            let mut out = vec![0u8; len];
            // SAFETY: both are ours, valid for `len` bytes.
            let r = unsafe { copy(out.as_mut_ptr(), pattern.as_ptr(), len) };
            assert_eq!(r, Ok(()));
            assert_eq!(out, pattern[..len]);
            for before_hole in [0usize, 1, 7, 8, len - 1] {
                let start = p.page - before_hole;
                let mut out = vec![0u8; len];
                // SAFETY: `out` is ours; the source runs into the hole after `before_hole`
                // readable bytes (when shorter than `len`).
                let r = unsafe { copy(out.as_mut_ptr(), p.base.add(start), len) };
                let want = if before_hole >= len {
                    Ok(())
                } else {
                    Err(Errno::EFAULT)
                };
                assert_eq!(r, want, "len {len}, {before_hole} bytes before the hole");
                // SAFETY: the destination runs into the hole the same way.
                let r = unsafe { copy(p.base.add(start), pattern.as_ptr(), len) };
                assert_eq!(
                    r, want,
                    "write: len {len}, {before_hole} bytes before the hole"
                );
            }
        }
        // Still usable afterwards: nothing was reset.
        assert!(usable());
    }

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn a_thread_that_blocks_sigsegv_is_not_usable() {
        assert!(refresh());
        std::thread::spawn(|| {
            // Blocks SIGSEGV in this (test-owned) thread only.
            let mut set = async_safe::sigemptyset();
            async_safe::sigaddset(&mut set, libc::SIGSEGV);
            assert!(async_safe::pthread_sigmask(libc::SIG_BLOCK, Some(&set)).is_some());
            assert!(!usable());
            assert!(!refresh());
        })
        .join()
        .unwrap();
        assert!(usable());
    }

    #[test]
    fn signals_sent_by_kill_are_never_taken_for_faults() {
        // SAFETY: an all-zero siginfo_t is valid; si_code 0 is SI_USER.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        let mut uc: libc::ucontext_t = unsafe { std::mem::zeroed() };
        let ctx = (&raw mut uc).cast::<c_void>();
        assert!(!fixup(libc::SIGSEGV, &mut info, ctx));
        assert!(!fixup(libc::SIGUSR1, &mut info, ctx));
        assert!(!fixup(libc::SIGSEGV, std::ptr::null_mut(), ctx));
    }
}
