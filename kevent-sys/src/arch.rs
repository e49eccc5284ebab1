//! How kevent-sys enters the kernel: [`syscall6`], one function per architecture.
//!
//! On x86_64 it is the `syscall` instruction itself: the kernel's result comes back in `rax`
//! as the value or `-errno`, and nothing else runs. The alternative, glibc's variadic
//! `syscall(3)`, moves the seven arguments into place again, converts the result to
//! `-1`/`errno`, and the caller then reads `errno` back through `__errno_location()`: about
//! 25 user-space instructions per call that the kernel's own epoll calls do not pay (issue
//! 21, `kevent-bench calls-rounds`). A program that interposes `syscall()` itself (the epoll
//! shim exports one) is no longer re-entered by the kevent calls it makes.
//!
//! Elsewhere it is `libc::syscall`, its `-1`/`errno` turned back into `-errno`, so that
//! [`crate::syscall`] decodes one convention everywhere.
//!
//! # Safety
//!
//! [`syscall6`] issues system call `nr` with six arguments; what that call reads or writes is
//! the caller's to prove, at each call site.

use libc::c_long;

/// System call `nr` with six arguments (unused ones 0); the kernel's result: the value, or
/// `-errno` in `-4095..=-1`.
///
/// # Safety
///
/// `nr` and its arguments must be a system call whose effects on this process's memory and
/// descriptors the caller has proved sound.
#[inline]
pub(crate) unsafe fn syscall6(
    nr: c_long,
    a1: c_long,
    a2: c_long,
    a3: c_long,
    a4: c_long,
    a5: c_long,
    a6: c_long,
) -> c_long {
    #[cfg(target_arch = "x86_64")]
    {
        let ret: c_long;
        // SAFETY: the x86_64 syscall convention: number in rax, arguments in rdi, rsi, rdx,
        // r10, r8, r9; the kernel returns in rax and clobbers rcx and r11 (declared),
        // restoring the flags from r11 before it returns. Memory the call reads or writes is
        // not declared `nomem`/`readonly`, so the compiler keeps every store before it and
        // reloads after it; what that memory may be is the caller's contract (`# Safety`).
        unsafe {
            std::arch::asm!(
                "syscall",
                inlateout("rax") nr => ret,
                in("rdi") a1,
                in("rsi") a2,
                in("rdx") a3,
                in("r10") a4,
                in("r8") a5,
                in("r9") a6,
                lateout("rcx") _,
                lateout("r11") _,
                options(nostack, preserves_flags)
            );
        }
        ret
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        // SAFETY: the caller's contract covers the call; syscall(3) adds nothing to it.
        let ret = unsafe { libc::syscall(nr, a1, a2, a3, a4, a5, a6) };
        if ret == -1 {
            -c_long::from(crate::Errno::last().raw())
        } else {
            ret
        }
    }
}
