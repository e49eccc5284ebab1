//! The kevent ABI v1 as a userspace engine over epoll, timerfd, eventfd, inotify and a
//! process-wide signal handler: the same calls, the same `ukevent`s, the same rules as a
//! kevent kernel, on any stock Linux kernel.
//!
//! The five calls take the ABI types of [`kevent_sys`] and return `Result<_, Errno>` (the C
//! library turns that into `-1` and `errno`; the safe `kevent` crate into typed errors).
//! Per-entry failures of `kevent_ctl` are data (`RET_BROKEN` entries), never an `Err`.
//!
//! # How each type is built
//!
//! | type | Linux mechanism | cost |
//! |---|---|---|
//! | SOCKET, PIPE, POLL | the queue fd is an epoll; level kevents are level-triggered epoll items | one epoll item; a wait costs what `epoll_wait` costs |
//! | TIMER, POSIX_TIMER | one timerfd per queue, armed for the earliest deadline of a 4-ary heap | O(log n) per add/expiry, no kernel object per timer |
//! | SIGNAL | a `sigaction` handler per watched signal + one shared eventfd doorbell | see the caveats |
//! | INODE | one inotify fd per queue | one watch per directory |
//! | UNOTIFY | the queue's wake eventfd | memory only |
//! | AIO (`kevent_aio_sendfile`, D18) | one worker thread per process: `pread` + `send(MSG_DONTWAIT \| MSG_NOSIGNAL)`, its own epoll for full sockets (P36) | two fd duplicates per running transfer |
//!
//! # Caveats
//!
//! * **Signals** are caught by a process-wide handler installed when the first SIGNAL kevent
//!   for that signal is added (signalfd would only see signals that *every* thread blocks).
//!   A handler the program installs *afterwards* replaces it until the engine takes the
//!   signal back, chaining to that handler (at most a second later, decision P34).
//! * **Closing a watched fd** without REMOVE (**D10**): epoll drops the registration when the
//!   file's last descriptor closes, so nothing is reported for it or for a new file that
//!   reuses the number; a later ADD of the same key reports the old kevent once as
//!   `BROKEN|DONE` with `-EBADF`. If another descriptor (a `dup`, a child process) keeps the
//!   old file open, epoll keeps it registered and the old file's readiness is still reported
//!   under the old id until the next `kevent_ctl` on that key; the safe `kevent` API rules
//!   this out by borrowing the fd for the registration's lifetime. A REMOVE then cannot
//!   reach epoll's item: a later ADD on that number takes it over, and while the file is
//!   ready a sleeping wait naps (10 ms at a time) instead of sleeping in epoll (decision
//!   P32).
//! * **One fd-type kevent per fd**: epoll registers a file once per epoll, so watching the
//!   same fd as, say, SOCKET and POLL in one queue gives the second ADD `-EEXIST`.
//! * **Closing the queue fd while threads wait** makes them return `EBADF` within
//!   a second (decisions P14, P34): an idle waiter wakes once a second to check.
//! * **fork** (**D11**): the child's copies of queue fds answer `EBADF`; signal routing is
//!   reset to the original dispositions in the child.
#![deny(unsafe_code)]

mod fdtable;
mod fork;
mod kevent;
pub mod posix_timer;
mod queue;
mod registry;
mod ring;
mod rules;
mod seg;
#[doc(hidden)]
pub mod signal;
mod source;
mod sys;
#[doc(hidden)]
pub mod timer;
mod token;

use std::hash::BuildHasher;
use std::os::fd::{IntoRawFd, RawFd};
use std::ptr::NonNull;
use std::sync::Arc;

use kevent_sys::{Errno, KEVENT_INIT_ASYNC_RING, kevent_ring, ukevent};

pub use crate::source::aio::kevent_aio_sendfile;

use crate::queue::Queue;
use crate::ring::Ring;

/// A per-queue random value, so that tokens of different queues do not look alike.
fn nonce() -> u32 {
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    std::collections::hash_map::RandomState::new().hash_one(n) as u32
}

/// Runs `f` on the queue behind `fd`; a queue found closed or reused is released.
fn with_queue<R>(fd: RawFd, f: impl FnOnce(&Arc<Queue>) -> Result<R, Errno>) -> Result<R, Errno> {
    fdtable::with(fd, |q| {
        let r = f(q);
        if r.is_err() && q.is_gone() {
            fdtable::forget(fd, q);
            q.shut_down();
        }
        r
    })?
}

/// `kevent_init(ring, num, flags)`—Creates a queue and returns its fd (close-on-exec).
///
/// `ring == NULL && num == 0`: no ring. Otherwise `ring` must be non-null and 8-aligned and
/// `num >= 2`. One flag is defined, `KEVENT_INIT_ASYNC_RING` (decision P38): `ring` is then
/// required, `2 <= num <= KEVENT_RING_ASYNC_MAX`, and the ring is followed by
/// `struct kevent_ring_tail`; its events enter the ring inside this engine's calls
/// (decision P41). Any other flag is `EINVAL` (**D1**).
///
/// # Errors
///
/// `EINVAL` for a ring/num mismatch, a misaligned ring, or an unknown flag; the errors of
/// `epoll_create1`/`eventfd` (`EMFILE`, `ENFILE`, `ENOMEM`).
///
/// # Safety
///
/// When `ring` is non-null it must point to `8 + num * 40` bytes (with
/// `KEVENT_INIT_ASYNC_RING`, `kevent_sys::ring::async_ring_bytes(num)` bytes) that stay valid
/// and are not freed until the queue fd is closed; the engine writes entries and
/// `ring_kidx`/`ring_over` (and, asynchronously, reads and writes `ring_uidx`) there while
/// the queue lives.
#[allow(unsafe_code)]
pub unsafe fn kevent_init(ring: *mut kevent_ring, num: u32, flags: u32) -> Result<RawFd, Errno> {
    let ring = match flags {
        0 => match NonNull::new(ring) {
            None if num == 0 => None,
            None => return Err(Errno::EINVAL),
            Some(_) if num < 2 => return Err(Errno::EINVAL),
            Some(p) if (p.as_ptr() as usize) % 8 != 0 => return Err(Errno::EINVAL),
            Some(_) if kevent_sys::ring_bytes(num).is_none_or(|b| b > isize::MAX as usize) => {
                return Err(Errno::EINVAL);
            }
            // SAFETY: the caller guarantees `8 + num * 40` valid bytes until the fd is closed,
            // and the queue (which owns the Ring) is released no earlier than that.
            Some(p) => Some(unsafe { Ring::new(p, num) }),
        },
        KEVENT_INIT_ASYNC_RING => match NonNull::new(ring) {
            Some(p)
                if (p.as_ptr() as usize) % 8 == 0
                    && kevent_sys::ring::async_ring_bytes(num).is_some() =>
            {
                // SAFETY: the caller guarantees `async_ring_bytes(num)` valid bytes until the
                // fd is closed, and the queue (which owns the Ring) lives no longer.
                Some(unsafe { Ring::new_async(p, num) })
            }
            _ => return Err(Errno::EINVAL),
        },
        _ => return Err(Errno::EINVAL),
    };
    let (q, ep) = Queue::create(ring, fdtable::epoch(), nonce())?;
    let fd = ep.into_raw_fd();
    fdtable::insert(Arc::new(q));
    Ok(fd)
}

/// Tells the engine that its caller sees every `close()` of queue `fd` and never passes the
/// number again once closed (an `LD_PRELOAD` shim that interposes `close` and forgets the
/// instance: `libkevent-epoll.so`). `kevent_ctl` on this queue then skips its check that the
/// number still is this queue's epoll (one `epoll_ctl` per call, decision P17; P34).
///
/// # Errors
///
/// Those of [`kevent_ctl`] for a number that is not a queue: `EBADF`, `EINVAL`.
pub fn caller_sees_close(fd: RawFd) -> Result<(), Errno> {
    with_queue(fd, |q| {
        q.trust_caller();
        Ok(())
    })
}

/// Declares that the caller owns queue `fd` and sees every `close()` of it (decision P65):
/// while the returned [`QueueOwner`] lives, no call on this queue proves that the number still
/// names it (P54's `epoll_ctl`: `kevent_commit`'s only system call, `kevent_ctl`'s, the
/// stale-`old_uidx` and argument-error returns of `kevent_wait`, and the check of a wait
/// whose first harvest brought nothing of the queue's). A sleeping wait still checks after
/// each empty slice (P14), and a harvest with tokens that are not the queue's still makes a
/// call check.
///
/// Made for an owner such as the safe API's `kevent::Queue` (an `OwnedFd` and the ring
/// memory in one value, dropping the `QueueOwner` first). More than one may live; the proofs
/// are back once the last is dropped.
///
/// # Errors
///
/// Those of [`kevent_ctl`] for a number that is not a queue: `EBADF`, `EINVAL`.
///
/// # Safety
///
/// Until the returned [`QueueOwner`] is dropped, `fd` stays open and names this queue (no
/// `close()`, no `dup2()` onto it), and the ring memory given to [`kevent_init`] stays valid
/// (as that function requires until the fd is closed): a call on a closed or reused number
/// would otherwise go on without noticing, and write the ring.
#[allow(unsafe_code)]
pub unsafe fn caller_owns(fd: RawFd) -> Result<QueueOwner, Errno> {
    let q = fdtable::lookup(fd)?;
    q.prove()?;
    q.owner_declared();
    Ok(QueueOwner { q })
}

/// A declaration of [`caller_owns`]: the queue's calls skip the proof that its number still
/// names it until this is dropped (decision P65).
#[derive(Debug)]
#[must_use = "the declaration ends when the QueueOwner is dropped"]
pub struct QueueOwner {
    q: Arc<Queue>,
}

impl Drop for QueueOwner {
    fn drop(&mut self) {
        self.q.owner_gone();
    }
}

/// `kevent_ctl(fd, cmd, events.len(), events)`—ADD, REMOVE, MODIFY or READY.
///
/// Returns what spec section 3 says per command: ADD, the number of entries written back to
/// the start of `events` (ready at once, or failed with `RET_BROKEN`); REMOVE/MODIFY, 0 once
/// every entry is processed (**D14**), whatever each entry's result: every entry is written
/// back in place with `RET_DONE`, plus `RET_BROKEN` and `ret_data[1] = -errno` if it failed
/// (`ENOENT` not found, `EINVAL` unknown request flags, `EBADF` **D10**); READY, the number
/// marked (the entries not found are copied to the start); READY with no entries wakes every
/// waiter.
///
/// # Errors
///
/// `EBADF` (closed or negative fd), `EINVAL` (not a queue, unknown `cmd`).
pub fn kevent_ctl(fd: RawFd, cmd: u32, events: &mut [ukevent]) -> Result<u32, Errno> {
    with_queue(fd, |q| q.ctl(cmd, events))
}

/// `kevent_get_events(fd, min_nr, buf.len(), timeout, buf, flags)`—Waits for at least
/// `max(min_nr, 1)` ready kevents (**D4**), the timeout, or a wake-up, and copies up to
/// `buf.len()` of them into `buf`; also into the ring, if the queue has one (an event that
/// finds the ring full carries `RET_COPY_FAILED`).
///
/// # Errors
///
/// `EBADF`, `EINVAL` (not a queue; an empty `buf`, i.e. `max_nr == 0`, or
/// `min_nr > buf.len()`, **D15**; a bad timeout; unknown flags, **D1**). A slice cannot be
/// NULL: the `EFAULT` of D15 for a NULL `buf` is the C library's (or the kernel's) to give.
pub fn kevent_get_events(
    fd: RawFd,
    min_nr: u32,
    buf: &mut [ukevent],
    timeout: &libc::timespec,
    flags: u32,
) -> Result<u32, Errno> {
    with_queue(fd, |q| q.get_events(min_nr, buf, timeout, flags))
}

/// `kevent_wait(fd, num, old_uidx, timeout, flags)`—Moves up to `num` ready kevents into the
/// ring; returns 0 at once when `old_uidx` is not the consumer index.
///
/// # Errors
///
/// `EBADF`, `EINVAL` (not a queue, no ring, `num` above the ring size, bad timeout or flags).
pub fn kevent_wait(
    fd: RawFd,
    num: u32,
    old_uidx: u32,
    timeout: &libc::timespec,
    flags: u32,
) -> Result<u32, Errno> {
    with_queue(fd, |q| q.wait(num, old_uidx, timeout, flags))
}

/// `kevent_commit(fd, new_uidx, over)`—Releases ring slots up to `new_uidx` (**D13**);
/// returns how many (0 for a stale commit).
///
/// # Errors
///
/// `EBADF`, `EINVAL` (not a queue, no ring, `new_uidx >= n`), `EOVERFLOW` (`over` is neither
/// `ring_over` nor `ring_over - 1`).
pub fn kevent_commit(fd: RawFd, new_uidx: u32, over: u32) -> Result<u32, Errno> {
    with_queue(fd, |q| q.commit(new_uidx, over))
}
