//! Decision P65: while a `QueueOwner` of a queue lives (`caller_owns`), no call proves that
//! the queue's number still names it (P54's `epoll_ctl`); the proofs are back once the last
//! one is dropped.
//!
//! The test breaks the owner's promise on purpose, the way unsafe code would: it replaces
//! the queue's number with `/dev/null` (`dup2`, atomic, so no other thread can take the
//! number in between) while owners live. A proof would answer `EINVAL` (the number names
//! another file); an owned queue answers as if nothing happened, and writes only the ring
//! memory this test still holds, which is why the safe API's owner drops its declaration
//! before it closes its fd and frees its ring.
#![allow(unsafe_code)]

use std::os::fd::{AsRawFd, RawFd};

use kevent_fallback::{caller_owns, kevent_commit, kevent_ctl, kevent_init, kevent_wait};
use kevent_sys::{
    Errno, KEVENT_CTL_ADD, KEVENT_CTL_READY, KEVENT_REQ_READY, KEVENT_UNOTIFY, kevent_id, ukevent,
};

fn user(id: u64) -> ukevent {
    ukevent::new(KEVENT_UNOTIFY, kevent_id::from_u64(id), 0, KEVENT_REQ_READY)
}

const ZERO: libc::timespec = libc::timespec {
    tv_sec: 0,
    tv_nsec: 0,
};

/// A queue with a ring of 4 in `mem`, one UNOTIFY kevent (id 1) registered.
fn queue(mem: &mut [u64]) -> RawFd {
    let ring = mem.as_mut_ptr().cast::<kevent_sys::kevent_ring>();
    // SAFETY: `mem` holds `8 + 4 * 40` 8-aligned bytes that outlive the queue fd (the caller
    // keeps them until after it closes the number).
    let q = unsafe { kevent_init(ring, 4, 0) }.expect("kevent_init");
    let mut add = [user(1)];
    assert_eq!(kevent_ctl(q, KEVENT_CTL_ADD, &mut add), Ok(0));
    q
}

/// One event into the ring: READY, then `kevent_wait` moves it (consumer index `uidx`).
fn one_into_the_ring(q: RawFd, uidx: u32) {
    let mut ready = [user(1)];
    assert_eq!(kevent_ctl(q, KEVENT_CTL_READY, &mut ready), Ok(1));
    assert_eq!(kevent_wait(q, 3, uidx, &ZERO, 0), Ok(1));
}

fn replace_with_dev_null(q: RawFd) {
    let null = std::fs::File::open("/dev/null").expect("/dev/null");
    // SAFETY: `q` is this test's own number; dup2 replaces it atomically.
    assert_eq!(unsafe { libc::dup2(null.as_raw_fd(), q) }, q);
}

#[test]
fn p65_an_owned_queue_makes_no_proof_until_its_last_owner_is_dropped() {
    let mut mem = vec![0u64; (8 + 4 * 40) / 8];
    let q = queue(&mut mem);
    // SAFETY: `q` stays open and names the queue until the owners are dropped — except where
    // this test breaks the promise on purpose, with `mem` (the ring) still alive.
    let first = unsafe { caller_owns(q) }.expect("caller_owns");
    // SAFETY: as above.
    let second = unsafe { caller_owns(q) }.expect("caller_owns");
    one_into_the_ring(q, 0);

    replace_with_dev_null(q);
    // No proof: the commit releases the slot (a proof would say EINVAL), and so on.
    assert_eq!(kevent_commit(q, 1, 0), Ok(1));
    // A stale `old_uidx` returns 0 at once, unproven.
    assert_eq!(kevent_wait(q, 3, 0, &ZERO, 0), Ok(0));
    let mut ready = [user(1)];
    assert_eq!(kevent_ctl(q, KEVENT_CTL_READY, &mut ready), Ok(1));

    drop(first);
    // One owner still lives.
    assert_eq!(kevent_commit(q, 1, 0), Ok(0));
    drop(second);
    // The last owner is gone: the commit proves the number, which names /dev/null now.
    assert_eq!(kevent_commit(q, 1, 0), Err(Errno::EINVAL));
    // SAFETY: `q` is this test's duplicate of /dev/null.
    unsafe { libc::close(q) };
    drop(mem);
}

#[test]
fn p65_without_an_owner_every_commit_proves_the_number() {
    let mut mem = vec![0u64; (8 + 4 * 40) / 8];
    let q = queue(&mut mem);
    one_into_the_ring(q, 0);
    replace_with_dev_null(q);
    assert_eq!(kevent_commit(q, 1, 0), Err(Errno::EINVAL));
    // SAFETY: `q` is this test's duplicate of /dev/null.
    unsafe { libc::close(q) };
    drop(mem);
}

#[test]
fn p65_an_owner_of_a_number_that_is_no_queue_is_refused() {
    let null = std::fs::File::open("/dev/null").expect("/dev/null");
    // SAFETY: refused: the number is no queue.
    let r = unsafe { caller_owns(null.as_raw_fd()) };
    assert_eq!(r.map(drop), Err(Errno::EINVAL));
    // SAFETY: refused: a negative number.
    assert_eq!(unsafe { caller_owns(-1) }.map(drop), Err(Errno::EBADF));
}

#[test]
fn p65_an_owned_live_queue_answers_as_before() {
    let mut mem = vec![0u64; (8 + 4 * 40) / 8];
    let q = queue(&mut mem);
    // SAFETY: `q` stays open until after the owner is dropped.
    let owner = unsafe { caller_owns(q) }.expect("caller_owns");
    one_into_the_ring(q, 0);
    assert_eq!(kevent_commit(q, 1, 0), Ok(1));
    // D13: a stale commit releases nothing.
    assert_eq!(kevent_commit(q, 1, 0), Ok(0));
    // D13: an index past the ring is EINVAL, an `over` that is neither value EOVERFLOW.
    assert_eq!(kevent_commit(q, 4, 0), Err(Errno::EINVAL));
    assert_eq!(kevent_commit(q, 1, 7), Err(Errno::EOVERFLOW));
    one_into_the_ring(q, 1);
    assert_eq!(kevent_commit(q, 2, 0), Ok(1));
    drop(owner);
    // SAFETY: this test's queue fd, closed after its owner was dropped.
    unsafe { libc::close(q) };
    drop(mem);
}
