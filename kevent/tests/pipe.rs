//! `Pipe` registrations.

mod util;

use std::os::fd::AsRawFd;
use std::time::Duration;

use kevent::{Added, EventKind, Key, Pipe, Queue, ReqFlags, SocketEvents};
use util::{ExpectEvent, drain_fd, expect_events, expect_no_events, pipe, write_fd};

const QUIET: Duration = Duration::from_millis(50);

fn key(fd: &impl AsRawFd) -> Key {
    Key::from_raw(kevent_sys::KEVENT_PIPE, fd.as_raw_fd() as u32 as u64)
}

#[test]
fn s5_pipe_read_end_reports_data_then_nothing_once_drained() {
    let q = Queue::new().unwrap();
    let (r, w) = pipe();
    let _reg = q.add(Pipe::new(&r, SocketEvents::RECV)).unwrap();
    expect_no_events(&q, QUIET);
    write_fd(&w, b"abc");
    let recv = || {
        ExpectEvent::with(key(&r), "RECV", |e| {
            matches!(
                e.kind(),
                EventKind::Pipe {
                    ready: SocketEvents::RECV,
                    ..
                }
            )
        })
    };
    expect_events(&q, vec![recv()]);
    expect_events(&q, vec![recv()]); // level (D7)
    assert_eq!(drain_fd(&r), 3);
    expect_no_events(&q, QUIET);
}

#[test]
fn s3_writable_pipe_is_ready_at_add() {
    let q = Queue::new().unwrap();
    let (_r, w) = pipe();
    let added = q.add_or_ready(Pipe::new(&w, SocketEvents::SEND)).unwrap();
    assert!(matches!(added, Added::Ready { .. }), "{added:?}");
}

#[test]
fn s5_peer_close_is_broken_epipe() {
    let q = Queue::new().unwrap();
    let (r, w) = pipe();
    let _reg = q
        .add(Pipe::new(&r, SocketEvents::RECV).flags(ReqFlags::ET))
        .unwrap();
    drop(w);
    let seen = expect_events(
        &q,
        vec![ExpectEvent::with(key(&r), "BROKEN", |e| e.is_broken())],
    );
    assert_eq!(
        seen[0].error().and_then(|e| e.raw_os_error()),
        Some(libc::EPIPE)
    );
    assert!(seen[0].is_done(), "a broken kevent is unregistered");
    expect_no_events(&q, QUIET);
}

#[test]
fn s3_a_socket_is_not_a_pipe() {
    let q = Queue::new().unwrap();
    let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
    let added = q.add(Pipe::new(&a, SocketEvents::RECV)).unwrap_err();
    assert_eq!(added.error().raw_os_error(), Some(libc::EINVAL));
}
