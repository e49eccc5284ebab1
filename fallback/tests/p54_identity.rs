//! Decision P54: the engine proves that a queue fd still names its queue's epoll with an
//! `EPOLL_CTL_MOD` of the queue's wake eventfd, which succeeds only on the queue's own epoll.
//! When the number was taken over by another epoll (here with `dup2`, so that no other
//! thread can take the number in between), the call must answer `EINVAL` and leave that
//! epoll as it found it (no item of the engine's in it, ever).
#![allow(unsafe_code)]

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use kevent_fallback::{kevent_ctl, kevent_init};
use kevent_sys::{
    Errno, KEVENT_CTL_ADD, KEVENT_CTL_READY, KEVENT_REQ_READY, KEVENT_UNOTIFY, kevent_id, ukevent,
};

fn epoll() -> OwnedFd {
    // SAFETY: epoll_create1 takes no pointer.
    let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
    assert!(fd >= 0, "epoll_create1");
    // SAFETY: a new fd this test owns.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

/// The `tfd:` lines of `/proc/self/fdinfo/<ep>`: the fds registered in epoll `ep`.
fn items(ep: RawFd) -> Vec<String> {
    std::fs::read_to_string(format!("/proc/self/fdinfo/{ep}"))
        .expect("fdinfo")
        .lines()
        .filter(|l| l.starts_with("tfd:"))
        .map(str::to_owned)
        .collect()
}

fn user(id: u64) -> ukevent {
    ukevent::new(KEVENT_UNOTIFY, kevent_id::from_u64(id), 0, KEVENT_REQ_READY)
}

#[test]
fn p54_a_queue_number_taken_over_by_another_epoll_is_einval_and_that_epoll_is_untouched() {
    // SAFETY: no ring.
    let q = unsafe { kevent_init(std::ptr::null_mut(), 0, 0) }.expect("kevent_init");
    // The live queue: the check passes (a READY of a registered kevent marks it).
    let mut add = [user(1)];
    assert_eq!(kevent_ctl(q, KEVENT_CTL_ADD, &mut add), Ok(0));
    let mut ready = [user(1)];
    assert_eq!(kevent_ctl(q, KEVENT_CTL_READY, &mut ready), Ok(1));

    // Another epoll with one item of its own, then put on the queue's number.
    let other = epoll();
    let (r, _w) = {
        let mut p = [0; 2];
        // SAFETY: `p` is a local array of two ints.
        assert_eq!(unsafe { libc::pipe2(p.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
        // SAFETY: two new fds this test owns.
        unsafe { (OwnedFd::from_raw_fd(p[0]), OwnedFd::from_raw_fd(p[1])) }
    };
    let mut ev = libc::epoll_event {
        events: libc::EPOLLIN as u32,
        u64: 7,
    };
    // SAFETY: `ev` is a valid epoll_event for the call.
    let added = unsafe {
        libc::epoll_ctl(
            other.as_raw_fd(),
            libc::EPOLL_CTL_ADD,
            r.as_raw_fd(),
            &mut ev,
        )
    };
    assert_eq!(added, 0);
    let before = items(other.as_raw_fd());
    assert_eq!(before.len(), 1, "{before:?}");
    // SAFETY: `q` is the queue's number, which this test owns; dup2 replaces it atomically.
    assert_eq!(unsafe { libc::dup2(other.as_raw_fd(), q) }, q);

    let mut again = [user(1)];
    assert_eq!(
        kevent_ctl(q, KEVENT_CTL_READY, &mut again),
        Err(Errno::EINVAL)
    );
    assert_eq!(
        items(q),
        before,
        "the other epoll holds exactly its own item"
    );
    // The queue is released: the number is not a queue any more.
    assert_eq!(
        kevent_ctl(q, KEVENT_CTL_READY, &mut again),
        Err(Errno::EINVAL)
    );
    // SAFETY: `q` is this test's duplicate of `other`.
    unsafe { libc::close(q) };
}
