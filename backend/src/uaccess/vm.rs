//! The kernel copies for us: `process_vm_readv`/`process_vm_writev` on our own pid (probed
//! once; a refusal selects the pipe), the pid cached in a `MADV_WIPEONFORK` page.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicI32, Ordering};

use kevent_sys::Errno;
use kevent_sys::mem::{AnonMap, page_size};

use super::{Dir, USE_PIPE, VM_PROBED};

/// Probes `process_vm_readv` once: one byte of our own memory must come back. Any failure
/// (`ENOSYS`, `EPERM` from seccomp, anything else) selects the pipe for good.
pub(super) fn probe_process_vm() {
    let src: u8 = 0x5a;
    let mut dst: u8 = 0;
    let local = libc::iovec {
        iov_base: (&raw mut dst).cast(),
        iov_len: 1,
    };
    let remote = libc::iovec {
        iov_base: (&raw const src).cast_mut().cast(),
        iov_len: 1,
    };
    // SAFETY: both iovecs describe one live local byte each; the kernel writes `dst` only.
    let n = unsafe { libc::process_vm_readv(own_pid(), &local, 1, &remote, 1, 0) };
    let ok = n == 1 && std::hint::black_box(dst) == src;
    if !ok {
        USE_PIPE.store(true, Ordering::Relaxed);
    }
    VM_PROBED.store(true, Ordering::Relaxed);
}

/// This process's pid, for `process_vm_*`.
///
/// `getpid()` is a real syscall (about 100 ns), so the pid is cached, in a page marked
/// `MADV_WIPEONFORK`: the kernel hands any child (also one made by a raw `clone` that runs no
/// `pthread_atfork` handler) a zeroed copy of that page, so a child never copies to or from
/// its parent's memory with a stale pid. Where the kernel lacks `MADV_WIPEONFORK` (before
/// 4.14) nothing is cached.
pub(super) fn own_pid() -> libc::pid_t {
    static SLOT: OnceLock<Option<&'static AtomicI32>> = OnceLock::new();
    let slot = SLOT.get_or_init(|| {
        let map = AnonMap::new(page_size()).ok()?;
        // Without the advice (unmapped again on return), nothing is cached.
        map.wipe_on_fork().ok()?;
        let p = map.leak();
        // SAFETY: the page is zeroed (a valid `AtomicI32` 0), page-aligned, never unmapped
        // (so `'static`), and only ever accessed through this atomic.
        Some(unsafe { p.cast::<AtomicI32>().as_ref() })
    });
    // SAFETY: getpid has no preconditions.
    let getpid = || unsafe { libc::getpid() };
    match slot {
        Some(cached) => match cached.load(Ordering::Relaxed) {
            0 => {
                let pid = getpid();
                cached.store(pid, Ordering::Relaxed);
                pid
            }
            pid => pid,
        },
        None => getpid(),
    }
}

/// The `process_vm_readv`/`writev` path.
///
/// # Safety
///
/// As [`copy`](super::copy).
pub(super) unsafe fn vm_copy(
    dir: Dir,
    local: *mut u8,
    user: usize,
    len: usize,
) -> Result<(), Errno> {
    let pid = own_pid();
    let mut done = 0;
    while done < len {
        let local_iov = libc::iovec {
            // `done < len`: in bounds of `local`.
            iov_base: local.wrapping_add(done).cast(),
            iov_len: len - done,
        };
        let user_iov = libc::iovec {
            iov_base: std::ptr::without_provenance_mut(user + done),
            iov_len: len - done,
        };
        // SAFETY: the kernel writes (FromUser) or reads (ToUser) `len - done` bytes of our
        // buffer, valid for that per this function's contract; the user side is only an
        // address the kernel checks (EFAULT).
        let n = unsafe {
            match dir {
                Dir::FromUser => libc::process_vm_readv(pid, &local_iov, 1, &user_iov, 1, 0),
                Dir::ToUser => libc::process_vm_writev(pid, &local_iov, 1, &user_iov, 1, 0),
            }
        };
        if n < 0 {
            let e = Errno::last();
            return Err(
                if e == Errno::EPERM || e == Errno::ENOSYS || e == Errno::ENOMEM {
                    e
                } else {
                    Errno::EFAULT
                },
            );
        }
        if n == 0 {
            return Err(Errno::EFAULT);
        }
        // A partial copy stopped at a bad page: the next round reports it.
        done += n as usize;
    }
    Ok(())
}
