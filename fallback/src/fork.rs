//! `fork()` (**D11**): the engine's one `pthread_atfork` registration, and the order in which
//! its parts get ready for a fork and recover from it.
//!
//! Two parts of the engine hold state a child must not inherit as it is:
//!
//! * the queue table (`fdtable`): the child's copies of queue fds answer `EBADF` (a new fork
//!   epoch), and the table's lock must not be held by another thread across the fork;
//! * the signal dispatch (`signal::dispatch`): the child forgets every signal watch (the
//!   library's own `SIGSEGV`/`SIGBUS` hold excepted), gets its own doorbell, and the dispatch
//!   lock must not be held by another thread across the fork.
//!
//! One triple of handlers is registered, once, by whichever part is used first, and calls
//! both parts in a fixed order: *prepare* takes the signal lock, then the table lock;
//! *parent* and *child* release them in the opposite order (the order two separate
//! registrations, table first, gave; no code path holds one of these locks while taking the
//! other). Before, each part registered its own triple, so the order depended on which the
//! program used first.
//!
//! # The only way in
//!
//! This is the one caller of `sys::pthread_atfork`, and the fork handler parts are reached
//! from here alone: `fdtable::{fork_prepare, fork_parent, fork_child}` and
//! `signal::dispatch::{fork_prepare, fork_parent, fork_child}` (in
//! `signal/dispatch/atfork.rs`) are `pub(crate)` for this file and called nowhere else; the
//! rest of the engine only calls [`install`]. The child handler runs in the single-threaded
//! child and does only async-signal-safe work in each part (atomics, releasing the locks
//! *prepare* took, and the system calls of `sys::async_safe`).

use std::ffi::c_int;
use std::sync::OnceLock;

use kevent_sys::Errno;

use crate::signal::dispatch;
use crate::{fdtable, sys};

/// Result of the one registration (0 or an error number).
static ATFORK: OnceLock<c_int> = OnceLock::new();

/// Registers the fork handlers once.
///
/// # Errors
///
/// `ENOMEM` (or what `pthread_atfork` said) if the registration failed: then D11 cannot be
/// kept, and the signal dispatch refuses to watch.
pub(crate) fn install() -> Result<(), Errno> {
    let rc = *ATFORK.get_or_init(|| sys::pthread_atfork(prepare, parent, child));
    match rc {
        0 => Ok(()),
        e => Err(Errno::from_raw(e).unwrap_or(Errno::ENOMEM)),
    }
}

extern "C" fn prepare() {
    dispatch::fork_prepare();
    fdtable::fork_prepare();
}

extern "C" fn parent() {
    fdtable::fork_parent();
    dispatch::fork_parent();
}

extern "C" fn child() {
    fdtable::fork_child();
    dispatch::fork_child();
}
