//! `kevent::tokio::AsyncQueue` (feature `tokio`): events next to tokio's own, cancellation
//! safety, level kevents that stay ready, and no panic outside a runtime.
#![cfg(feature = "tokio")]

use std::io::Write;
use std::os::unix::net::UnixStream;
use std::time::Duration;

use kevent::tokio::AsyncQueue;
use kevent::{EventKind, Key, Op, Queue, Socket, SocketEvents, User};

/// Generous bound for awaits that must complete (the bug it catches is a hang).
const HANG: Duration = Duration::from_secs(5);

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn outside_a_runtime_is_an_error_not_a_panic() {
    let err = AsyncQueue::new(Queue::new().unwrap()).unwrap_err();
    assert_eq!(err.op(), Op::Reactor);
}

#[test]
fn next_hears_a_mark_from_another_thread() {
    runtime().block_on(async {
        let mut q = AsyncQueue::new(Queue::new().unwrap()).unwrap();
        let _u = q.get_ref().add(User::new(3)).unwrap();
        let marker = q.get_ref().try_clone().unwrap();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            marker.ready(&[Key::user(3)]).unwrap();
        });
        let e = tokio::time::timeout(HANG, q.next()).await.unwrap().unwrap();
        assert_eq!(e.kind(), EventKind::User { id: 3 });
        t.join().unwrap();
    });
}

#[test]
fn a_cancelled_next_loses_nothing() {
    runtime().block_on(async {
        let mut q = AsyncQueue::new(Queue::new().unwrap()).unwrap();
        let _u: Vec<_> = (0..3)
            .map(|i| q.get_ref().add(User::new(i)).unwrap())
            .collect();
        // Nothing ready: the future is dropped while pending.
        assert!(
            tokio::time::timeout(Duration::from_millis(10), q.next())
                .await
                .is_err()
        );
        q.get_ref()
            .ready(&[Key::user(0), Key::user(1), Key::user(2)])
            .unwrap();
        // The first `next` takes all three from the queue and hands out one; the other two
        // wait in the adapter, whatever happens to later futures.
        let mut ids = vec![];
        for _ in 0..3 {
            let e = tokio::time::timeout(HANG, q.next()).await.unwrap().unwrap();
            match e.kind() {
                EventKind::User { id } => ids.push(id),
                other => panic!("{other:?}"),
            }
            // A future created and dropped unpolled between two events.
            drop(q.next());
        }
        ids.sort_unstable();
        assert_eq!(ids, [0, 1, 2]);
        assert!(
            tokio::time::timeout(Duration::from_millis(10), q.next())
                .await
                .is_err(),
            "nothing twice"
        );
    });
}

/// A level kevent stays ready: each `next` reports it again, although tokio registers the
/// queue fd edge-triggered (readiness is cleared only when a non-blocking wait is empty).
#[test]
fn a_level_socket_is_reported_by_every_next() {
    runtime().block_on(async {
        let mut q = AsyncQueue::new(Queue::new().unwrap()).unwrap();
        let (a, mut b) = UnixStream::pair().unwrap();
        let _reg = q
            .get_ref()
            .add(Socket::new(&a, SocketEvents::RECV).token(5))
            .unwrap();
        b.write_all(b"x").unwrap();
        for _ in 0..3 {
            let e = tokio::time::timeout(HANG, q.next()).await.unwrap().unwrap();
            assert_eq!(e.token(), 5);
        }
    });
}

#[test]
fn get_events_fills_a_buffer() {
    runtime().block_on(async {
        let q = AsyncQueue::new(Queue::new().unwrap()).unwrap();
        let _u: Vec<_> = (0..4)
            .map(|i| q.get_ref().add(User::new(i)).unwrap())
            .collect();
        let keys: Vec<Key> = (0..4).map(Key::user).collect();
        q.get_ref().ready(&keys).unwrap();
        let mut events = kevent::Events::with_capacity(8);
        let n = tokio::time::timeout(HANG, q.wait(&mut events))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(n, 4);
    });
}
