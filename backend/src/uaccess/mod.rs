//! Reading and writing C callers' memory without trusting it: the one place where a bad
//! address becomes `EFAULT`.
//!
//! The kernel never faults on a bad user pointer: `copy_from_user`/`copy_to_user` return
//! `EFAULT`. The C API promises the same on both backends, so user memory is never touched by
//! ordinary Rust code. On the fallback backend it is copied with
//! [`kevent_fallback::signal::safecopy`]: one small copy routine whose faults the process's
//! `SIGSEGV`/`SIGBUS` handler turns into `EFAULT` (gVisor's "safecopy"). A good pointer costs
//! a `memcpy`, no system call and no file descriptor. Where that is not usable (a thread that
//! blocks `SIGSEGV` or `SIGBUS`, a program that installed its own handler for them after the
//! library, another architecture, the native backend; details in the safecopy module), the
//! copy is made by the kernel instead: `process_vm_readv`/`process_vm_writev` on our own pid,
//! and if those are refused, a per-thread pipe (`write(2)` from user memory, `read(2)` into
//! it), which fault the same way.
//!
//! # What is copied, and when
//!
//! * **Native backend: nothing** for the five calls. The kernel's own syscalls copy user
//!   memory themselves, so `src/capi/calls.rs` hands the C pointers straight to them. The
//!   POSIX timer calls copy their few bytes with system calls here: a process that never
//!   calls the fallback engine gets no signal handler from the library.
//! * **Fallback backend**, whose engine works on Rust slices:
//!   * `kevent_ctl`: `num` entries are read into a private buffer, the engine runs on it, and
//!     the span of entries it changed is written back (nothing if it changed none: a
//!     read-only array the call does not write to stays legal, as with the kernel).
//!   * `kevent_get_events`: the engine fills a private buffer, then the events it returned are
//!     written out (nothing when it returns 0). At most [`MAX_OUT`](events::MAX_OUT) events
//!     are returned per call.
//!   * `kevent_init`: the whole ring is checked readable and writable once. After that the
//!     engine writes the ring through its raw pointer on every `get_events`/`wait`/`commit`
//!     (the "already validated pointer": `kevent_wait` and `kevent_commit`, the ring fast path,
//!     copy nothing). Unmapping the ring while the queue lives is therefore undefined
//!     behaviour, as unmapping an io_uring buffer is; the header says so.
//!   * POSIX timers: the `sigevent`, `itimerspec` and `timer_t` arguments, a few bytes each.
//!
//! A cache of "already validated" `ctl`/`get_events` buffers was considered and rejected: a
//! buffer can be unmapped between two calls, and only a new check notices; a cached pointer
//! would turn the kernel's `EFAULT` into a crash. Measured costs are in `docs/c-api.md`.
//!
//! # Optional system calls
//!
//! `process_vm_readv`/`writev` are probed once (reading one byte of our own memory) the first
//! time a copy needs them; any failure selects the pipe. `madvise(MADV_WIPEONFORK)` (the pid
//! cache) is tried once; any failure means no cache. A refusal that comes later (a seccomp
//! filter installed after the probe) switches to the pipe as well.
//!
//! # File descriptors
//!
//! Only the pipe path needs any, and it takes them after the call's queue fd was validated
//! (the `validate` argument of [`with_events_inout`]) and moves them above the same floor as the
//! engine's internal fds (half the soft `RLIMIT_NOFILE`, at most 1024), so a copy never
//! leaves a number the program may have just closed taken.
//!
//! # Safety
//!
//! User addresses are kept as integers (`usize`) and are only ever passed to the safecopy
//! routine or the kernel, which check them; they are never dereferenced here. Local buffers
//! passed alongside are our own, sized for the copy. Typed reads go through
//! [`Plain`](value::Plain), implemented only for types whose every bit pattern is a valid
//! value, so bytes from the caller can never make an invalid one.
//!
//! # Modules
//!
//! This file chooses the path and dispatches each copy ([`copy`]); [`vm`] and [`pipe`] are
//! the two kernel paths; [`value`], [`events`] and [`ring`] are what the C API copies with
//! them: single values, `ukevent` arrays, and the ring checked at `kevent_init`.
#![allow(unsafe_code)]

use std::sync::atomic::{AtomicBool, Ordering};

use kevent_fallback::signal::safecopy;
use kevent_sys::Errno;

mod events;
mod pipe;
mod ring;
#[cfg(test)]
mod tests;
mod value;
mod vm;

pub(crate) use events::{with_events_inout, with_events_out};
pub(crate) use ring::check_ring;
pub(crate) use value::{read_value, write_value};

use pipe::pipe_copy;
use vm::{probe_process_vm, vm_copy};

/// Chunk size of the pipe path and of the ring check (one page always fits an empty pipe).
const CHUNK: usize = 4096;

/// Set once `process_vm_readv`/`writev` were found unusable: copy through a pipe from then on.
static USE_PIPE: AtomicBool = AtomicBool::new(false);

/// Whether the `process_vm_*` probe ran.
static VM_PROBED: AtomicBool = AtomicBool::new(false);

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Path {
    Safecopy,
    ProcessVm,
    Pipe,
}

#[cfg(test)]
thread_local! {
    /// Tests force a path on one thread without touching the process-wide state.
    static FORCE: std::cell::Cell<Option<Path>> = const { std::cell::Cell::new(None) };
}

/// Set by the first copy for the fallback engine (its `kevent_init`, `kevent_ctl`,
/// `kevent_get_events`): from then on safecopy may be used. A process that only ever uses the
/// native backend never sets it, so it gets no signal handler from the library (its POSIX
/// timer arguments are copied with system calls).
static FALLBACK_IN_USE: AtomicBool = AtomicBool::new(false);

fn fallback_in_use() {
    if !FALLBACK_IN_USE.load(Ordering::Relaxed) {
        FALLBACK_IN_USE.store(true, Ordering::Relaxed);
    }
}

fn safecopy_allowed() -> bool {
    FALLBACK_IN_USE.load(Ordering::Relaxed)
}

/// How this thread copies now.
fn path() -> Path {
    #[cfg(test)]
    if let Some(p) = FORCE.with(std::cell::Cell::get) {
        return p;
    }
    if safecopy_allowed() && safecopy::usable() {
        return Path::Safecopy;
    }
    if !VM_PROBED.load(Ordering::Relaxed) {
        probe_process_vm();
    }
    if USE_PIPE.load(Ordering::Relaxed) {
        Path::Pipe
    } else {
        Path::ProcessVm
    }
}

/// Re-checks what the copies depend on (safecopy's handler and this thread's signal mask);
/// `kevent_init` calls it, never the per-call path.
pub(crate) fn refresh() {
    fallback_in_use();
    safecopy::refresh();
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Dir {
    FromUser,
    ToUser,
}

/// Copies `len` bytes between our `local` buffer and the C caller's address `user`, the way
/// [`path`] says now.
///
/// # Safety
///
/// `local` is valid for `len` bytes: for writes with [`Dir::FromUser`], for reads with
/// [`Dir::ToUser`].
unsafe fn copy(dir: Dir, local: *mut u8, user: usize, len: usize) -> Result<(), Errno> {
    // SAFETY: this function's contract.
    unsafe { copy_via(path(), dir, local, user, len) }
}

/// [`copy`] the way `how` says (a value of [`path`] the caller took for the whole call).
///
/// # Safety
///
/// As [`copy`].
unsafe fn copy_via(
    mut how: Path,
    dir: Dir,
    local: *mut u8,
    user: usize,
    len: usize,
) -> Result<(), Errno> {
    if len == 0 {
        return Ok(());
    }
    if user.checked_add(len).is_none() {
        return Err(Errno::EFAULT);
    }
    if how == Path::Safecopy {
        let u: *mut u8 = std::ptr::without_provenance_mut(user);
        // SAFETY: `local` per this function's contract; `u` is the caller's address, which
        // safecopy may touch (a fault becomes EFAULT).
        let r = unsafe {
            match dir {
                Dir::FromUser => safecopy::copy(local, u, len),
                Dir::ToUser => safecopy::copy(u, local, len),
            }
        };
        match r {
            // The handler went away between `usable` and the copy: the kernel copies.
            Err(Errno::ENOSYS) => how = Path::ProcessVm,
            r => return r,
        }
    }
    if how == Path::ProcessVm && !USE_PIPE.load(Ordering::Relaxed) {
        // SAFETY: this function's contract.
        match unsafe { vm_copy(dir, local, user, len) } {
            Err(e) if e == Errno::EPERM || e == Errno::ENOSYS => {
                USE_PIPE.store(true, Ordering::Relaxed)
            }
            r => return r,
        }
    }
    // SAFETY: this function's contract.
    unsafe { pipe_copy(dir, local, user, len) }
}
