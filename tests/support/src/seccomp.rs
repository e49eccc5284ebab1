//! seccomp filters for the tests that refuse system calls (x86_64 numbers): detection must
//! never issue the historic kevent numbers (`s6_detect_seccomp`), and the C library must
//! work without each optional call (`tests/c_sandbox.rs`). One program builder, one
//! installer.

use std::ops::RangeInclusive;

use libc::{
    BPF_ABS, BPF_JEQ, BPF_JGE, BPF_JGT, BPF_JMP, BPF_K, BPF_LD, BPF_RET, BPF_W, SECCOMP_RET_ALLOW,
    sock_filter,
};

/// `AUDIT_ARCH_X86_64`: `EM_X86_64 | __AUDIT_ARCH_64BIT | __AUDIT_ARCH_LE`
/// (`<linux/audit.h>`; not in the libc crate).
pub const AUDIT_ARCH_X86_64: u32 = 62 | 0x8000_0000 | 0x4000_0000;

/// The action for a refused call: the kernel kills the process with `SIGSYS`.
pub const KILL: u32 = libc::SECCOMP_RET_KILL_PROCESS;

/// The action for a refused call: it fails with `errno`.
pub const fn fail_with(errno: i32) -> u32 {
    libc::SECCOMP_RET_ERRNO | (errno as u32 & 0xffff)
}

fn stmt(code: u32, k: u32) -> sock_filter {
    sock_filter {
        code: code as u16,
        jt: 0,
        jf: 0,
        k,
    }
}

/// The BPF program: an x86_64 system call numbered in `nrs` (and, if given, with the low 32
/// bits of `args[2]` equal to `arg2`) gets `action`; every other call, and every call of
/// another architecture, is allowed.
pub fn refusing(nrs: RangeInclusive<u32>, arg2: Option<u32>, action: u32) -> Vec<sock_filter> {
    let off = |o: usize| o as u32;
    let nr = off(core::mem::offset_of!(libc::seccomp_data, nr));
    let arch = off(core::mem::offset_of!(libc::seccomp_data, arch));
    // args[2], low 32 bits (little-endian).
    let arg2_at = off(core::mem::offset_of!(libc::seccomp_data, args) + 2 * 8);
    // Conditional jumps are written with both edges 0 and patched below: each condition that
    // does not hold jumps to the final allow.
    let mut f = vec![
        stmt(BPF_LD | BPF_W | BPF_ABS, arch),
        stmt(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64),
        stmt(BPF_LD | BPF_W | BPF_ABS, nr),
        stmt(BPF_JMP | BPF_JGE | BPF_K, *nrs.start()),
        // `nr > last` must allow: the inverse of the others, patched below.
        stmt(BPF_JMP | BPF_JGT | BPF_K, *nrs.end()),
    ];
    let above = f.len() - 1;
    if let Some(a) = arg2 {
        f.push(stmt(BPF_LD | BPF_W | BPF_ABS, arg2_at));
        f.push(stmt(BPF_JMP | BPF_JEQ | BPF_K, a));
    }
    f.push(stmt(BPF_RET | BPF_K, action));
    f.push(stmt(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
    let allow = f.len() - 1;
    for (i, ins) in f.iter_mut().enumerate() {
        if u32::from(ins.code) & 0x07 == BPF_JMP {
            let to_allow = (allow - i - 1) as u8;
            if i == above {
                (ins.jt, ins.jf) = (to_allow, 0);
            } else {
                (ins.jt, ins.jf) = (0, to_allow);
            }
        }
    }
    f
}

/// Installs `filter` on the calling thread, with `PR_SET_NO_NEW_PRIVS` (so no privilege is
/// needed). Async-signal-safe (two `prctl` calls), so it may run between `fork` and `exec`.
pub fn install(filter: &[sock_filter]) -> std::io::Result<()> {
    let prog = libc::sock_fprog {
        len: filter.len() as u16,
        filter: filter.as_ptr().cast_mut(),
    };
    // SAFETY: PR_SET_NO_NEW_PRIVS takes integer arguments only; PR_SET_SECCOMP reads `prog`
    // and the `filter` array it points to, both alive until after the call (the kernel copies
    // the program).
    let ok = unsafe {
        libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0
            && libc::prctl(
                libc::PR_SET_SECCOMP,
                libc::SECCOMP_MODE_FILTER as libc::c_ulong,
                &prog as *const libc::sock_fprog,
            ) == 0
    };
    if ok {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}
