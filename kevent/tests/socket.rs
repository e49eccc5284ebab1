//! `Socket` registrations: ADD outcomes, level/edge/oneshot delivery, MODIFY, REMOVE, and
//! the D10 guarantees of `Registration`.

mod util;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::{AsFd, AsRawFd};
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
        .add_or_ready(Socket::new(&a, SocketEvents::RECV).token(7))
        .unwrap()
    {
        Added::Ready { event, fd } => {
            assert_eq!(event.ret_flags(), RetFlags::DONE);
            assert_eq!(event.token(), 7);
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
    let _reg = q.add(Socket::new(&a, SocketEvents::RECV)).unwrap();
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
        .unwrap();
    b.write_all(b"1").unwrap();
    let seen = expect_events(&q, vec![readable(&a)]);
    assert!(seen[0].is_done(), "{:?}", seen[0]);
    expect_no_events(&q, QUIET);
    // Removing a kevent the queue already dropped is not an error.
    let fd = reg.remove().unwrap();
    assert_eq!(fd.as_raw_fd(), a.as_raw_fd());
    // The key is free again.
    let again = q.add_or_ready(Socket::new(&a, SocketEvents::RECV)).unwrap();
    assert!(matches!(again, Added::Ready { .. }), "{again:?}");
}

#[test]
fn d10_dropping_the_registration_removes_the_kevent() {
    let q = Queue::new().unwrap();
    let (a, mut b) = pair();
    let reg = q.add(Socket::new(&a, SocketEvents::RECV)).unwrap();
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
        .unwrap();
    b.write_all(b"x").unwrap();
    expect_events(&q, vec![readable(&a)]);
    // The oneshot is gone; the same key is added again (level, ALWAYS_QUEUE: still ready).
    let new = q
        .add(Socket::new(&a, SocketEvents::RECV).flags(ReqFlags::ALWAYS_QUEUE))
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
    let reg = q.add(Socket::new(a, SocketEvents::RECV).token(3)).unwrap();
    assert_eq!(reg.get_ref().as_raw_fd(), raw);
    b.write_all(b"x").unwrap();
    expect_events(
        &q,
        vec![ExpectEvent::with(key(reg.get_ref()), "cookie 3", |e| {
            e.token() == 3
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
    let err = q.add(Socket::new(&r, SocketEvents::RECV)).unwrap_err();
    assert_eq!(err.error().raw_os_error(), Some(libc::EINVAL));
    assert!(err.event().is_some_and(|e| e.is_broken() && e.is_done()));
    assert_eq!(err.fd().as_raw_fd(), r.as_raw_fd(), "the holder comes back");
    let (a, _b) = pair();
    let _first = q.add(Socket::new(&a, SocketEvents::RECV)).unwrap();
    let dup = q
        .add(Socket::new(&a, SocketEvents::SEND | SocketEvents::RECV))
        .unwrap_err();
    assert_eq!(dup.error().raw_os_error(), Some(libc::EEXIST), "{dup:?}");
}

#[test]
fn s3_add_all_reports_each_entry_in_order() {
    let q = Queue::new().unwrap();
    let (ready, mut w) = pair();
    w.write_all(b"x").unwrap();
    let (idle, _w2) = pair();
    let out = q.add_all([
        Socket::new(&ready, SocketEvents::RECV),
        Socket::new(&idle, SocketEvents::RECV),
        Socket::new(&idle, SocketEvents::RECV),
    ]);
    assert_eq!(out.len(), 3);
    assert!(
        out[0].is_ok(),
        "ready at once: registered and queued {:?}",
        out[0]
    );
    assert!(out[1].is_ok(), "{:?}", out[1]);
    match &out[2] {
        Err(e) => {
            assert_eq!(e.error().raw_os_error(), Some(libc::EEXIST));
            assert_eq!(e.fd().as_raw_fd(), idle.as_raw_fd());
        }
        Ok(r) => panic!("a repeated key registered: {r:?}"),
    }
    expect_events(&q, vec![readable(&ready)]);
}

/// Issue 23, item 2: a connection that already has data when it is added is registered and
/// its event queued (P30), never returned and dropped.
#[test]
fn p30_a_ready_owned_stream_is_registered_and_queued() {
    let q = Queue::new().unwrap();
    let (a, mut b) = pair();
    b.write_all(b"x").unwrap();
    let mut reg = q
        .add(Socket::new(a, SocketEvents::RECV).flags(ReqFlags::ONESHOT))
        .expect("registered although ready");
    assert!(
        reg.flags()
            .contains(ReqFlags::ONESHOT | ReqFlags::ALWAYS_QUEUE)
    );
    let key = key(reg.get_ref());
    let seen = expect_events(&q, vec![ExpectEvent::key(key)]);
    assert!(seen[0].is_done(), "ONESHOT kept: {:?}", seen[0]);
    let mut buf = [0; 4];
    assert_eq!(reg.get_mut().read(&mut buf).unwrap(), 1, "&mut access");
    assert_eq!(reg.as_fd().as_raw_fd(), reg.get_ref().as_raw_fd());
}

/// A failed ADD of an owned stream hands the stream back; `?` turns the error into
/// `kevent::Error`, `io::Error` or a boxed error, whatever the holder's lifetime.
#[test]
fn p30_a_failed_owned_source_comes_back() {
    fn register(q: &Queue, s: UnixStream) -> kevent::Result<kevent::Registration<UnixStream>> {
        Ok(q.add(Socket::new(s, SocketEvents::RECV))?)
    }
    fn borrowed(q: &Queue, s: &UnixStream) -> Result<(), Box<dyn std::error::Error>> {
        let _reg = q.add(Socket::new(s, SocketEvents::RECV))?;
        let _again = q.add(Socket::new(s, SocketEvents::RECV))?;
        Ok(())
    }
    let q = Queue::new().unwrap();
    let (r, _w) = util::pipe();
    let err = q.add(Socket::new(r, SocketEvents::RECV)).unwrap_err();
    let r: std::os::fd::OwnedFd = err.into_fd();
    assert!(r.as_raw_fd() >= 0);
    let (a, _b) = pair();
    let reg = register(&q, a).unwrap();
    let e = borrowed(&q, reg.get_ref()).unwrap_err();
    assert!(e.to_string().contains("KEVENT_CTL_ADD"), "{e}");
    let io: std::io::Error = q
        .add(kevent::Inode::new(
            reg.remove().unwrap(),
            kevent::InodeEvents::CREATE,
        ))
        .unwrap_err()
        .into();
    assert_eq!(io.kind(), std::io::ErrorKind::InvalidInput);
    let inner = io.get_ref().and_then(|e| e.downcast_ref::<kevent::Error>());
    assert_eq!(inner.and_then(|e| e.errno()), Some(kevent::Errno::EINVAL));
}

#[test]
fn s3_modify_replaces_events_flags_and_cookie() {
    let q = Queue::new().unwrap();
    let (a, _b) = pair();
    let mut reg = q.add(Socket::new(&a, SocketEvents::RECV).token(1)).unwrap();
    expect_no_events(&q, QUIET);
    reg.modify()
        .events(SocketEvents::SEND)
        .token(2)
        .apply()
        .unwrap();
    assert_eq!(reg.token(), 2);
    assert_eq!(reg.event_mask(), SocketEvents::SEND.bits());
    expect_events(
        &q,
        vec![ExpectEvent::with(key(&a), "SEND, cookie 2", |e| {
            e.token() == 2
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
        .unwrap();
    b.write_all(b"x").unwrap();
    expect_events(&q, vec![readable(&a)]);
    let err = reg.modify().token(5).apply().unwrap_err();
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
    let mut reg = q.add(Socket::new(&a, SocketEvents::RECV).token(1)).unwrap();
    let err = reg
        .modify()
        .flags(ReqFlags::from_bits_retain(0x4000))
        .token(2)
        .apply()
        .unwrap_err();
    assert_eq!(err.op(), kevent::Op::Modify);
    assert_eq!(err.raw_os_error(), Some(libc::EINVAL));
    assert_eq!(reg.token(), 1, "a failed MODIFY changes nothing");
    b.write_all(b"x").unwrap();
    expect_events(
        &q,
        vec![ExpectEvent::with(key(&a), "RECV, cookie 1", |e| {
            e.token() == 1
        })],
    );
    let oneshot = q
        .add(User::new(3).flags(ReqFlags::ONESHOT | ReqFlags::READY))
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
        .unwrap();
    assert!(reg.ready().unwrap());
    reg.modify().token(4).apply().unwrap();
    expect_no_events(&q, QUIET);
    b.write_all(b"x").unwrap();
    expect_events(&q, vec![readable(&a)]);
    expect_no_events(&q, QUIET);
    reg.modify().token(5).apply().unwrap();
    expect_events(
        &q,
        vec![ExpectEvent::with(key(&a), "RECV, cookie 5", |e| {
            e.token() == 5
        })],
    );
    expect_no_events(&q, QUIET);
}

#[test]
fn s5_listener_reports_accept() {
    let q = Queue::new().unwrap();
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let _reg = q
        .add(Socket::new(&l, SocketEvents::ACCEPT).token(9))
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
    let _reg = q.add(Socket::new(&a, SocketEvents::RECV)).unwrap();
    drop(b);
    expect_events(&q, vec![readable(&a)]);
}
