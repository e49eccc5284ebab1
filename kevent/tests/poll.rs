//! `Poll` registrations (any pollable fd, including another queue).

mod util;

use std::os::fd::AsRawFd;
use std::time::Duration;

use kevent::{EventKind, Key, PollEvents, Pollable, Queue, ReqFlags, User};
use util::{ExpectEvent, drain_fd, expect_events, expect_no_events, pipe, write_fd};

const QUIET: Duration = Duration::from_millis(50);

fn key(fd: &impl AsRawFd) -> Key {
    Key::from_raw(kevent_sys::KEVENT_POLL, fd.as_raw_fd() as u32 as u64)
}

#[test]
fn s5_poll_reports_revents_and_always_last_check() {
    let q = Queue::new().unwrap();
    let (r, w) = pipe();
    let _reg = q.add(Pollable::new(&r, PollEvents::IN)).unwrap();
    write_fd(&w, b"x");
    let seen = expect_events(
        &q,
        vec![ExpectEvent::with(
            key(&r),
            "IN",
            |e| matches!(e.kind(), EventKind::Poll { revents, .. } if revents.contains(PollEvents::IN)),
        )],
    );
    assert!(
        seen[0].req_flags().contains(ReqFlags::LAST_CHECK),
        "{:?}",
        seen[0]
    );
    drain_fd(&r);
    expect_no_events(&q, QUIET);
}

#[test]
fn s4_a_queue_fd_is_pollable_and_nests() {
    let outer = Queue::new().unwrap();
    let inner = Queue::new().unwrap();
    let _watch = outer.add(Pollable::new(&inner, PollEvents::IN)).unwrap();
    let _u = inner.add(User::new(1)).unwrap();
    expect_no_events(&outer, QUIET);
    inner.ready(&[Key::user(1)]).unwrap();
    expect_events(&outer, vec![ExpectEvent::key(key(&inner))]);
    expect_events(&inner, vec![ExpectEvent::key(Key::user(1))]);
    expect_no_events(&outer, QUIET);
}

#[test]
fn s3_regular_files_cannot_be_polled() {
    let q = Queue::new().unwrap();
    let f = std::fs::File::open("/proc/self/exe").unwrap();
    let added = q.add(Pollable::new(&f, PollEvents::IN)).unwrap_err();
    assert_eq!(added.error().raw_os_error(), Some(libc::EINVAL));
}
