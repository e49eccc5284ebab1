//! The async-signal-safe system calls: the only libc and syscall wrappers that code running
//! in signal context may call (the signal handler `signal::dispatch::handler::on_signal`, the
//! helpers it calls in `signal::dispatch::disposition` and `signal::dispatch::owners`,
//! `signal::safecopy::fixup`, and the fork child handlers reached from `crate::fork`).
//!
//! Everything here is on signal-safety(7)'s list (`write`, `close`, `dup3`, `raise`,
//! `sigaction`, `pthread_sigmask`, the `sigset_t` functions; `eventfd` and `epoll_ctl` as raw
//! system calls that take no lock and allocate nothing) or reads and writes the calling
//! thread's `errno`. No wrapper allocates, locks or formats. Code outside signal context may
//! use them too: they are a subset, not a separate world.
//!
//! # Safety
//!
//! As for the whole module (`sys`): every pointer handed to the kernel or the C library is
//! derived from a Rust reference or a local that lives across the call; fds are plain
//! integers the kernel checks.

use std::ffi::c_int;
use std::os::fd::RawFd;

use kevent_sys::Errno;

/// The calling thread's `errno`.
pub(crate) fn errno() -> c_int {
    // SAFETY: `__errno_location` has no preconditions and returns the address of the calling
    // thread's `errno`, valid (and only used by this thread) for the thread's life.
    unsafe { *libc::__errno_location() }
}

/// Sets the calling thread's `errno` (signal context restores what it found).
pub(crate) fn set_errno(value: c_int) {
    // SAFETY: as in [`errno`]; the location is writable.
    unsafe { *libc::__errno_location() = value };
}

/// System call `n` with six arguments, as the kernel returns it: the result, or `-errno`
/// (`errno` itself is not touched). On x86_64 the `syscall` instruction inline: C's
/// `syscall(2)` is variadic, and musl's spends about 40 instructions taking its arguments
/// apart, on every wait (issue 21). Elsewhere, C's `syscall(2)`.
///
/// # Safety
///
/// The arguments must be what system call `n` expects: every pointer among them valid for
/// what the kernel reads or writes through it for the duration of the call.
#[inline]
pub(crate) unsafe fn raw_syscall6(n: libc::c_long, args: [usize; 6]) -> isize {
    #[cfg(target_arch = "x86_64")]
    {
        let ret: isize;
        // SAFETY: the x86_64 Linux system call convention: number in rax, arguments in rdi,
        // rsi, rdx, r10, r8, r9; the kernel clobbers rcx and r11 and the flags, and touches
        // no user stack. What the call reads or writes is the caller's promise (above).
        unsafe {
            std::arch::asm!(
                "syscall",
                inlateout("rax") n as isize => ret,
                in("rdi") args[0],
                in("rsi") args[1],
                in("rdx") args[2],
                in("r10") args[3],
                in("r8") args[4],
                in("r9") args[5],
                lateout("rcx") _,
                lateout("r11") _,
                options(nostack),
            );
        }
        ret
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let saved = errno();
        let [a, b, c, d, e, f] = args;
        // SAFETY: the caller's promise, as above.
        let r = unsafe { libc::syscall(n, a, b, c, d, e, f) };
        let r = if r < 0 {
            -(errno() as isize)
        } else {
            r as isize
        };
        set_errno(saved);
        r
    }
}

/// `epoll_ctl(2)` as a raw system call (decision P25: never libc's interposable wrapper):
/// 0, or `-errno` (`errno` is not touched).
///
/// # Safety
///
/// `ev` must be valid for reads of one `epoll_event` (it may be null for
/// `EPOLL_CTL_DEL`).
pub(crate) unsafe fn raw_epoll_ctl(
    epfd: RawFd,
    op: c_int,
    fd: RawFd,
    ev: *mut libc::epoll_event,
) -> c_int {
    let args = [epfd as usize, op as usize, fd as usize, ev as usize, 0, 0];
    // SAFETY: the caller guarantees `ev`; the other arguments are integers.
    unsafe { raw_syscall6(libc::SYS_epoll_ctl, args) as c_int }
}

/// Adds one to an eventfd counter (it becomes readable). A full counter (`EAGAIN`) is
/// already readable, which is all a signal needs; other errors only lose a wake-up.
pub(crate) fn eventfd_signal(fd: RawFd) {
    let one: u64 = 1;
    // SAFETY: writes 8 bytes from `one`, a local that lives across the call.
    unsafe { libc::write(fd, (&raw const one).cast(), 8) };
}

/// `eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)` wherever the kernel puts it: the raw fd, or -1.
/// The caller owns the result.
pub(crate) fn eventfd_raw() -> c_int {
    // SAFETY: no pointer arguments.
    unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) }
}

/// `dup3(old, new, flags)`: makes `new` refer to `old`'s file, atomically.
pub(crate) fn dup3(old: RawFd, new: RawFd, flags: c_int) -> c_int {
    // SAFETY: no pointer arguments; the caller owns `new`, whose previous file is closed.
    unsafe { libc::dup3(old, new, flags) }
}

/// `close(fd)` of an fd the caller owns.
pub(crate) fn close(fd: RawFd) {
    // SAFETY: no pointer arguments; the caller owns `fd` and forgets it.
    unsafe { libc::close(fd) };
}

/// An empty `sigset_t`.
pub(crate) fn sigemptyset() -> libc::sigset_t {
    // SAFETY: `sigset_t` is plain integers, so all-zero is a valid value; `sigemptyset` then
    // writes only through the pointer to this local.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        set
    }
}

/// Adds `signo` to `set`. A number the C library refuses (its reserved ones) is left out
/// (and sets `errno`, which callers in signal context restore).
pub(crate) fn sigaddset(set: &mut libc::sigset_t, signo: c_int) {
    // SAFETY: `set` is a valid `sigset_t` borrowed for the call; `sigaddset` writes only into it.
    unsafe { libc::sigaddset(set, signo) };
}

/// `sigismember(set, signo)`: 1 if a member, 0 if not, -1 for an invalid number.
pub(crate) fn sigismember(set: &libc::sigset_t, signo: c_int) -> c_int {
    // SAFETY: `set` is a valid `sigset_t` borrowed for the call; `sigismember` only reads it.
    unsafe { libc::sigismember(set, signo) }
}

/// `sigaction(signo, new, &old)`; `new == None` only queries.
pub(crate) fn sigaction(
    signo: c_int,
    new: Option<&libc::sigaction>,
) -> Result<libc::sigaction, Errno> {
    // SAFETY: `struct sigaction` is integers, a `sigset_t` and an `Option` of a function
    // pointer, for all of which all-zero bytes are a valid value (`None` for the option).
    let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
    let new_ptr = new.map_or(std::ptr::null(), |a| a as *const libc::sigaction);
    // SAFETY: `new_ptr` is null or points to a live `sigaction` borrowed for the call, which
    // the C library only reads; `old` is a live local the call only writes. Neither pointer is
    // kept.
    let rc = unsafe { libc::sigaction(signo, new_ptr, &mut old) };
    if rc == 0 { Ok(old) } else { Err(Errno::last()) }
}

/// `pthread_sigmask(how, set, &old)` for the calling thread; `set == None` changes nothing
/// (a query). Returns the previous mask, `None` if the call failed.
pub(crate) fn pthread_sigmask(how: c_int, set: Option<&libc::sigset_t>) -> Option<libc::sigset_t> {
    let mut old = sigemptyset();
    let set_ptr = set.map_or(std::ptr::null(), |s| s as *const libc::sigset_t);
    // SAFETY: `set_ptr` is null or a live `sigset_t` borrowed for the call (only read); `old`
    // is a live local the call only writes.
    let rc = unsafe { libc::pthread_sigmask(how, set_ptr, &mut old) };
    (rc == 0).then_some(old)
}

/// `raise(signo)`: sends `signo` to the calling thread.
pub(crate) fn raise(signo: c_int) {
    // SAFETY: no pointer arguments.
    unsafe { libc::raise(signo) };
}
