//! Children against the tests whose outcome depends on which close is a file's last.
//!
//! Between `fork()` and `exec` (or `_exit`) a child holds a copy of every fd of the process,
//! `O_CLOEXEC` ones included, so a file another test thread closes in that window outlives
//! its close: epoll keeps its item, the peer of a socket or pipe sees no hang-up. Most tests
//! never notice; the differential drivers compare two observers of one world operation by
//! operation, and a child that exits between their two waits made them disagree (the
//! self-check `differential_driver_epoll_agrees_with_itself` failed so in CI's lane).
//!
//! So every place in the suite that makes a child holds [`forking`] until the child has
//! exec'd or exited ([`spawn`], [`output`] and [`status`] do it for a `Command`: `spawn`
//! returns only after the exec), and a differential sequence holds [`no_forks`] while it
//! runs. The lock prefers writers, so a forking test waits for at most one sequence.

use std::io;
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

static FORKS: RwLock<()> = RwLock::new(());

/// Held while a child of this process may still hold copies of its fds: from before the
/// `fork()` until the child has exec'd or been reaped. (A panic while it is held does not
/// poison it for the rest of the suite.)
pub fn forking() -> RwLockWriteGuard<'static, ()> {
    FORKS.write().unwrap_or_else(|e| e.into_inner())
}

/// Held by a sequence that needs every close to be the file's last: no child is made
/// meanwhile. Sequences of several threads run side by side.
pub fn no_forks() -> RwLockReadGuard<'static, ()> {
    FORKS.read().unwrap_or_else(|e| e.into_inner())
}

/// `cmd.spawn()` under [`forking`]: the child has exec'd when it returns, so it holds none
/// of our `O_CLOEXEC` fds (the suite opens every fd so).
pub fn spawn(cmd: &mut Command) -> io::Result<Child> {
    let _g = forking();
    cmd.spawn()
}

/// `cmd.output()`, with the fork under [`forking`] (stdin from /dev/null, stdout and stderr
/// captured, as `Command::output`).
pub fn output(cmd: &mut Command) -> io::Result<Output> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    spawn(cmd)?.wait_with_output()
}

/// `cmd.status()`, with the fork under [`forking`].
pub fn status(cmd: &mut Command) -> io::Result<ExitStatus> {
    spawn(cmd)?.wait()
}
