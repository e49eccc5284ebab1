//! `Socket` registrations: ADD outcomes, level/edge/oneshot delivery, MODIFY, REMOVE, and
//! the D10 guarantees of `Registration`.

mod util;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::time::Duration;

use kevent::{Added, EventKind, Key, Queue, ReqFlags, RetFlags, Socket, SocketEvents, User};
use util::{ExpectEvent, expect_events, expect_no_events};

const QUIET: Duration = Duration::from_millis(50);

fn key(s: &impl AsRawFd) -> Key {
    Key::from_raw(kevent_sys::KEVENT_SOCKET, s.as_raw_fd() as u32 as u64)
}

fn readable(s: &impl AsRawFd) -> ExpectEvent {
    ExpectEvent::with(
        key(s),
        "RECV",
        |e| matches!(e.kind(), EventKind::Socket { ready, .. } if ready.contains(SocketEvents::RECV)),
    )
}

fn pair() -> (UnixStream, UnixStream) {
    let (a, b) = UnixStream::pair().expect("socketpair");
    a.set_nonblocking(true).expect("nonblocking");
    (a, b)
}

#[test]
fn s3_ready_socket_is_returned_by_add_and_not_registered() {
    let q = Queue::new().unwrap();
    let (a, mut b) = pair();
    b.write_all(b"x").unwrap();
    match q
        .add(Socket::new(&a, SocketEvents::RECV).cookie(7))
        .unwrap()
    {
        Added::Ready { event, fd } => {
            assert_eq!(event.ret_flags(), RetFlags::DONE);
            assert_eq!(event.cookie(), 7);
            assert!(matches!(
                event.kind(),
                EventKind::Socket {
                    ready: SocketEvents::RECV,
                    ..
                }
            ));
            assert_eq!(
                fd.as_raw_fd(),
                a.as_raw_fd(),
                "the fd holder is handed back"
            );
        }
        other => panic!("expected Ready, got {other:?}"),
    }
    expect_no_events(&q, QUIET);
}

#[test]
fn s4_always_queue_registers_a_ready_socket() {
    let q = Queue::new().unwrap();
    let (a, mut b) = pair();
    b.write_all(b"x").unwrap();
    let reg = q
        .add(Socket::new(&a, SocketEvents::RECV).flags(ReqFlags::ALWAYS_QUEUE))
        .unwrap()
        .registration()
        .expect("ALWAYS_QUEUE registers");
    let seen = expect_events(&q, vec![readable(&a)]);
    assert!(!seen[0].is_done(), "still registered");
    drop(reg);
    expect_no_events(&q, QUIET);
}

#[test]
fn d7_level_is_delivered_by_every_wait_until_drained() {
    let q = Queue::new().unwrap();
    let (mut a, mut b) = pair();
    let _reg = q
        .add(Socket::new(&a, SocketEvents::RECV))
        .unwrap()
        .registration()
        .unwrap();
    expect_no_events(&q, QUIET);
    b.write_all(b"hello").unwrap();
    expect_events(&q, vec![readable(&a)]);
    expect_events(&q, vec![readable(&a)]);
    let mut buf = [0; 16];
    assert_eq!(a.read(&mut buf).unwrap(), 5);
    expect_no_events(&q, QUIET);
}

#[test]
fn s4_edge_is_delivered_once_per_new_readiness() {
    let q = Queue::new().unwrap();
    let (a, mut b) = pair();
    let _reg = q
        .add(Socket::new(&a, SocketEvents::RECV).flags(ReqFlags::ET))
        .unwrap()
        .registration()
        .unwrap();
    b.write_all(b"1").unwrap();
    expect_events(&q, vec![readable(&a)]);
    expect_no_events(&q, QUIET);
    b.write_all(b"2").unwrap();
    expect_events(&q, vec![readable(&a)]);
    expect_no_events(&q, QUIET);
}

#[test]
fn s4_oneshot_is_delivered_once_then_done() {
    let q = Queue::new().unwrap();
    let (a, mut b) = pair();
    let reg = q
        .add(Socket::new(&a, SocketEvents::RECV).flags(ReqFlags::ONESHOT))
        .unwrap()
        .registration()
        .unwrap();
    b.write_all(b"1").unwrap();
    let seen = expect_events(&q, vec![readable(&a)]);
    assert!(seen[0].is_done(), "{:?}", seen[0]);
    expect_no_events(&q, QUIET);
    // Removing a kevent the queue already dropped is not an error.
    let fd = reg.remove().unwrap();
    assert_eq!(fd.as_raw_fd(), a.as_raw_fd());
    // The key is free again.
    let again = q.add(Socket::new(&a, SocketEvents::RECV)).unwrap();
    assert!(matches!(again, Added::Ready { .. }), "{again:?}");
}

#[test]
fn d10_dropping_the_registration_removes_the_kevent() {
    let q = Queue::new().unwrap();
    let (a, mut b) = pair();
    let reg = q
        .add(Socket::new(&a, SocketEvents::RECV))
        .unwrap()
        .registration()
        .unwrap();
    b.write_all(b"x").unwrap();
    drop(reg);
    expect_no_events(&q, QUIET);
    // Only now may `a` be closed; a new socket reusing its number is not reported.
    let old = a.as_raw_fd();
    drop(a);
    let (c, mut d) = pair();
    d.write_all(b"y").unwrap();
    if c.as_raw_fd() == old || d.as_raw_fd() == old {
        expect_no_events(&q, QUIET);
    }
}

#[test]
fn d10_a_stale_registration_never_removes_a_newer_one() {
    let q = Queue::new().unwrap();
    let (a, mut b) = pair();
    let old = q
        .add(Socket::new(&a, SocketEvents::RECV).flags(ReqFlags::ONESHOT))
        .unwrap()
        .registration()
        .unwrap();
    b.write_all(b"x").unwrap();
    expect_events(&q, vec![readable(&a)]);
    // The oneshot is gone; the same key is added again (level, ALWAYS_QUEUE: still ready).
    let new = q
        .add(Socket::new(&a, SocketEvents::RECV).flags(ReqFlags::ALWAYS_QUEUE))
        .unwrap()
        .registration()
        .unwrap();
    drop(old); // must not REMOVE the new registration
    expect_events(&q, vec![readable(&a)]);
    drop(new);
    expect_no_events(&q, QUIET);
}

#[test]
fn d10_an_owned_stream_lives_in_the_registration() {
    let q = Queue::new().unwrap();
    let (a, mut b) = pair();
    let raw = a.as_raw_fd();
    let reg = q
        .add(Socket::new(a, SocketEvents::RECV).cookie(3))
        .unwrap()
        .registration()
        .unwrap();
    assert_eq!(reg.get_ref().as_raw_fd(), raw);
    b.write_all(b"x").unwrap();
    expect_events(
        &q,
        vec![ExpectEvent::with(key(reg.get_ref()), "cookie 3", |e| {
            e.cookie() == 3
        })],
    );
    let mut a = reg.remove().unwrap();
    expect_no_events(&q, QUIET);
    let mut buf = [0; 4];
    assert_eq!(a.read(&mut buf).unwrap(), 1);
}

#[test]
fn s3_per_entry_failures_are_data() {
    let q = Queue::new().unwrap();
    let (r, _w) = util::pipe();
    // A pipe is not a socket.
    match q.add(Socket::new(&r, SocketEvents::RECV)).unwrap() {
        Added::Failed { error, event, .. } => {
            assert_eq!(error.raw_os_error(), Some(libc::EINVAL));
            assert!(event.is_broken() && event.is_done());
        }
        other => panic!("expected Failed, got {other:?}"),
    }
    let (a, _b) = pair();
    let _first = q
        .add(Socket::new(&a, SocketEvents::RECV))
        .unwrap()
        .registration()
        .unwrap();
    let dup = q
        .add(Socket::new(&a, SocketEvents::SEND | SocketEvents::RECV))
        .unwrap();
    assert_eq!(
        dup.error().and_then(|e| e.raw_os_error()),
        Some(libc::EEXIST),
        "{dup:?}"
    );
}

#[test]
fn s3_add_all_reports_each_entry_in_order() {
    let q = Queue::new().unwrap();
    let (ready, mut w) = pair();
    w.write_all(b"x").unwrap();
    let (idle, _w2) = pair();
    let out = q
        .add_all([
            Socket::new(&ready, SocketEvents::RECV),
            Socket::new(&idle, SocketEvents::RECV),
            Socket::new(&idle, SocketEvents::RECV),
        ])
        .unwrap();
    assert_eq!(out.len(), 3);
    assert!(matches!(out[0], Added::Ready { .. }), "{:?}", out[0]);
    assert!(out[1].is_registered(), "{:?}", out[1]);
    assert_eq!(
        out[2].error().and_then(|e| e.raw_os_error()),
        Some(libc::EEXIST)
    );
}

#[test]
fn s3_modify_replaces_events_flags_and_cookie() {
    let q = Queue::new().unwrap();
    let (a, _b) = pair();
    let mut reg = q
        .add(Socket::new(&a, SocketEvents::RECV).cookie(1))
        .unwrap()
        .registration()
        .unwrap();
    expect_no_events(&q, QUIET);
    reg.modify()
        .events(SocketEvents::SEND)
        .cookie(2)
        .apply()
        .unwrap();
    assert_eq!(reg.cookie(), 2);
    assert_eq!(reg.event_mask(), SocketEvents::SEND.bits());
    expect_events(
        &q,
        vec![ExpectEvent::with(key(&a), "SEND, cookie 2", |e| {
            e.cookie() == 2
                && matches!(
                    e.kind(),
                    EventKind::Socket {
                        ready: SocketEvents::SEND,
                        ..
                    }
                )
        })],
    );
}

#[test]
fn s3_modify_of_a_delivered_oneshot_is_enoent() {
    let q = Queue::new().unwrap();
    let (a, mut b) = pair();
    let mut reg = q
        .add(Socket::new(&a, SocketEvents::RECV).flags(ReqFlags::ONESHOT))
        .unwrap()
        .registration()
        .unwrap();
    b.write_all(b"x").unwrap();
    expect_events(&q, vec![readable(&a)]);
    let err = reg.modify().cookie(5).apply().unwrap_err();
    assert_eq!(err.op(), kevent::Op::Modify);
    assert_eq!(err.raw_os_error(), Some(libc::ENOENT));
}

/// D14: the ABI call returns 0 whatever its entry says; the per-entry result still reaches
/// the user: unknown request flags are a typed `EINVAL`, the registration is unchanged and
/// keeps working, and REMOVE of a kevent already gone is not an error.
#[test]
fn d14_per_entry_results_of_modify_and_remove_reach_the_user() {
    let q = Queue::new().unwrap();
    let (a, mut b) = pair();
    let mut reg = q
        .add(Socket::new(&a, SocketEvents::RECV).cookie(1))
        .unwrap()
        .registration()
        .unwrap();
    let err = reg
        .modify()
        .flags(ReqFlags::from_bits_retain(0x4000))
        .cookie(2)
        .apply()
        .unwrap_err();
    assert_eq!(err.op(), kevent::Op::Modify);
    assert_eq!(err.raw_os_error(), Some(libc::EINVAL));
    assert_eq!(reg.cookie(), 1, "a failed MODIFY changes nothing");
    b.write_all(b"x").unwrap();
    expect_events(
        &q,
        vec![ExpectEvent::with(key(&a), "RECV, cookie 1", |e| {
            e.cookie() == 1
        })],
    );
    let oneshot = q
        .add(User::new(3).flags(ReqFlags::ONESHOT | ReqFlags::READY))
        .unwrap()
        .registration()
        .unwrap();
    expect_events(&q, vec![ExpectEvent::key(Key::user(3)), readable(&a)]);
    oneshot
        .remove()
        .expect("REMOVE of a delivered ONESHOT is not an error");
    drop(reg);
    expect_no_events(&q, QUIET);
}

/// D17: MODIFY re-evaluates the socket under the new mask, as `EPOLL_CTL_MOD`: a READY mark
/// on a socket that is not ready is dropped by a MODIFY; an edge-triggered socket that is
/// ready is delivered once more (one new edge) after a MODIFY.
#[test]
fn d17_modify_reevaluates_the_socket() {
    let q = Queue::new().unwrap();
    let (a, mut b) = pair();
    let mut reg = q
        .add(Socket::new(&a, SocketEvents::RECV).flags(ReqFlags::ET))
        .unwrap()
        .registration()
        .unwrap();
    assert!(reg.ready().unwrap());
    reg.modify().cookie(4).apply().unwrap();
    expect_no_events(&q, QUIET);
    b.write_all(b"x").unwrap();
    expect_events(&q, vec![readable(&a)]);
    expect_no_events(&q, QUIET);
    reg.modify().cookie(5).apply().unwrap();
    expect_events(
        &q,
        vec![ExpectEvent::with(key(&a), "RECV, cookie 5", |e| {
            e.cookie() == 5
        })],
    );
    expect_no_events(&q, QUIET);
}

#[test]
fn s5_listener_reports_accept() {
    let q = Queue::new().unwrap();
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let _reg = q
        .add(Socket::new(&l, SocketEvents::ACCEPT).cookie(9))
        .unwrap()
        .registration()
        .unwrap();
    let _c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    expect_events(
        &q,
        vec![ExpectEvent::with(key(&l), "ACCEPT", |e| {
            matches!(
                e.kind(),
                EventKind::Socket {
                    ready: SocketEvents::ACCEPT,
                    ..
                }
            )
        })],
    );
}

#[test]
fn s5_peer_close_reads_as_recv() {
    let q = Queue::new().unwrap();
    let (a, b) = pair();
    let _reg = q
        .add(Socket::new(&a, SocketEvents::RECV))
        .unwrap()
        .registration()
        .unwrap();
    drop(b);
    expect_events(&q, vec![readable(&a)]);
}
