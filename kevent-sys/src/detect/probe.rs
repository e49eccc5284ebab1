//! The probe: `kevent_init(NULL, 0, 0)` through a table the kernel advertised (spec section 6).
//!
//! This is the only place detection issues a kevent syscall, and [`super::Detector::run`]
//! reaches it only with numbers from the kernel's own sysfs advertisement, or with the build's
//! header numbers when the user selected `KEVENT_BACKEND=native` explicitly.

use std::os::fd::{FromRawFd, OwnedFd};

use super::Unavailable;
use crate::Errno;
use crate::syscall::{self, SyscallTable};

/// Creates a queue without a ring and closes it again. `Ok` proves the numbers in `t` reach a
/// working kevent implementation.
pub(crate) fn run(t: &SyscallTable) -> Result<(), Unavailable> {
    // SAFETY: `t` comes from the running kernel's sysfs advertisement, or from the patched
    // headers the user vouched for with KEVENT_BACKEND=native (the caller, `Detector::run`,
    // passes nothing else). `ring` is null with `num == 0`, so the call reads and writes no
    // user memory.
    match unsafe { syscall::kevent_init(t, core::ptr::null_mut(), 0, 0) } {
        Ok(fd) => {
            // SAFETY: kevent_init just returned this fd to us; no other code knows its number,
            // so this `OwnedFd` is its only owner and closes it on drop.
            drop(unsafe { OwnedFd::from_raw_fd(fd) });
            Ok(())
        }
        Err(Errno::ENOSYS) => Err(Unavailable::ProbeNoSys { nr: t.init }),
        Err(Errno::EPERM) => Err(Unavailable::ProbeDenied { nr: t.init }),
        Err(errno) => Err(Unavailable::ProbeFailed { nr: t.init, errno }),
    }
}
