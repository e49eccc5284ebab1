//! The asynchronous ring's consumer (P38, [`kevent::AsyncRing`]) on every backend: events
//! read with no call, `wait` only when empty, a full ring that loses nothing, a producer
//! thread against the consumer, the typed errors, and the memory outliving every handle.
//! A native kernel without P38 is a printed skip (a failure under `KEVENT_REQUIRE_ALL=1`).

mod util;

use std::time::{Duration, Instant};

use kevent::{Backend, Errno, Error, Key, NoFd, Op, Queue, Registration, ReqFlags, Timeout, User};
use kevent_test_support::{backends, skip};

fn users(q: &Queue, ids: std::ops::Range<u64>) -> Vec<Registration<NoFd>> {
    q.add_all(ids.map(User::new))
        .into_iter()
        .map(|a| a.expect("user events register"))
        .collect()
}

/// Every backend that has the asynchronous ring, each with a fresh queue of `n` slots.
fn each_backend(test: &str, n: u32, body: impl Fn(Queue)) {
    for b in backends(test) {
        match Queue::builder().backend(b).async_ring_size(n).build() {
            Ok(q) => {
                eprintln!("[{test}] on the {} backend", b.as_str());
                body(q);
            }
            Err(e) if b.is_native() && is_errno(&e, Op::Init, Errno::EINVAL) => skip(
                test,
                "the native kernel refuses KEVENT_INIT_ASYNC_RING with EINVAL (no P38 in it)",
            ),
            Err(e) => panic!("[{test}] {b}: {e}"),
        }
    }
}

fn is_errno(e: &Error, op: Op, errno: Errno) -> bool {
    e.op() == op && e.errno() == Some(errno)
}

#[test]
fn p38_consumer_reads_with_no_call_and_waits_only_when_empty() {
    each_backend("p38_consumer_reads_with_no_call", 8, |q| {
        assert!(q.has_async_ring());
        assert_eq!(q.ring_size(), Some(8));
        let _regs = users(&q, 0..5);
        let mut ring = q.async_ring().unwrap();
        assert_eq!(ring.size(), 8);
        assert!(ring.try_next().is_none());
        assert_eq!(ring.available(), 0);
        q.ready(&(0..3).map(Key::user).collect::<Vec<_>>()).unwrap();
        // READY marks are posted as they occur (P38; P41 on the fallback).
        assert_eq!(ring.available(), 3);
        let ids: Vec<u64> = ring.drain().map(|e| e.key().id()).collect();
        assert_eq!(ids, [0, 1, 2]);
        assert_eq!(
            ring.wait(Duration::from_millis(20)).unwrap(),
            0,
            "nothing more"
        );
        q.ready(&[Key::user(3), Key::user(4)]).unwrap();
        assert_eq!(
            ring.next_event(Timeout::FOREVER)
                .unwrap()
                .map(|e| e.key().id()),
            Some(3)
        );
        assert_eq!(
            ring.next_event(Timeout::FOREVER)
                .unwrap()
                .map(|e| e.key().id()),
            Some(4)
        );
        assert_eq!(
            ring.next_event(Duration::ZERO)
                .unwrap()
                .map(|e| e.key().id()),
            None
        );
    });
}

#[test]
fn p38_full_ring_loses_nothing_across_wraps() {
    each_backend("p38_full_ring_loses_nothing", 4, |q| {
        let _regs = users(&q, 0..100);
        let mut ring = q.async_ring().unwrap();
        q.ready(&(0..100).map(Key::user).collect::<Vec<_>>())
            .unwrap();
        assert!(ring.available() <= 3, "at most n - 1 in the ring (D12)");
        let start = Instant::now();
        let mut got = Vec::new();
        while got.len() < 100 && start.elapsed() < Duration::from_secs(10) {
            if let Some(e) = ring.next_event(Duration::from_secs(1)).unwrap() {
                got.push(e.key().id());
            }
        }
        assert_eq!(got, (0..100).collect::<Vec<_>>(), "in order, each once");
    });
}

#[test]
fn p38_producer_thread_against_the_consumer() {
    each_backend("p38_producer_thread", 16, |q| {
        const N: u64 = 5000;
        let _regs: Vec<_> = q
            .add_all((0..N).map(|i| User::new(i).flags(ReqFlags::ONESHOT)))
            .into_iter()
            .map(|a| a.unwrap())
            .collect();
        let producer = q.try_clone().unwrap();
        let h = std::thread::spawn(move || {
            for chunk in (0..N).collect::<Vec<_>>().chunks(7) {
                let keys: Vec<Key> = chunk.iter().map(|&i| Key::user(i)).collect();
                assert_eq!(producer.ready(&keys).unwrap().marked, keys.len());
            }
        });
        let mut ring = q.async_ring().unwrap();
        let (mut next, mut waits) = (0u64, 0u32);
        let start = Instant::now();
        while next < N && start.elapsed() < Duration::from_secs(30) {
            match ring.try_next() {
                Some(e) => {
                    assert_eq!(e.key().id(), next, "lost, doubled or reordered");
                    next += 1;
                }
                None => {
                    waits += 1;
                    ring.wait(Duration::from_millis(200)).unwrap();
                }
            }
        }
        h.join().unwrap();
        assert_eq!(next, N);
        eprintln!("{N} events read, {waits} waits");
    });
}

#[test]
fn p38_typed_errors() {
    each_backend("p38_typed_errors", 8, |q| {
        // One consumer at a time; the ordinary ring consumers refuse an asynchronous ring.
        let ring = q.async_ring().unwrap();
        let e = q.async_ring().unwrap_err();
        assert!(is_errno(&e, Op::RingConsumer, Errno::EBUSY), "{e:?}");
        drop(ring);
        let e = q.ring().unwrap_err();
        assert!(is_errno(&e, Op::RingConsumer, Errno::EINVAL), "{e:?}");
        let e = q.shared_ring().unwrap_err();
        assert!(is_errno(&e, Op::RingConsumer, Errno::EINVAL), "{e:?}");
        // get_events is refused (P38): the events are read from the ring.
        let mut events = kevent::Events::with_capacity(4);
        let e = q.wait(&mut events, Duration::ZERO).unwrap_err();
        assert!(is_errno(&e, Op::GetEvents, Errno::EINVAL), "{e:?}");
        // A consumer taken again resumes where the last one stopped.
        let _regs = users(&q, 0..2);
        q.ready(&[Key::user(0), Key::user(1)]).unwrap();
        let mut ring = q.async_ring().unwrap();
        assert_eq!(ring.try_next().map(|e| e.key().id()), Some(0));
        drop(ring);
        let mut ring = q.async_ring().unwrap();
        assert_eq!(ring.try_next().map(|e| e.key().id()), Some(1));
        assert!(ring.try_next().is_none());
    });
    // Sizes: below 2 and above the limit are Init errors before any call.
    for n in [0, 1, kevent::ASYNC_RING_MAX + 1] {
        let e = Queue::builder()
            .backend(Backend::fallback())
            .async_ring_size(n)
            .build()
            .unwrap_err();
        assert!(is_errno(&e, Op::Init, Errno::EINVAL), "n {n}: {e:?}");
    }
    // An ordinary queue has no asynchronous consumer.
    let q = Queue::builder()
        .backend(Backend::fallback())
        .ring_size(8)
        .build()
        .unwrap();
    assert!(!q.has_async_ring());
    let e = q.async_ring().unwrap_err();
    assert!(is_errno(&e, Op::RingConsumer, Errno::EINVAL), "{e:?}");
}

/// The ring memory lives as long as any handle: a clone keeps the queue (and its ring)
/// working after the first handle is dropped.
#[test]
fn p38_ring_outlives_the_first_handle() {
    each_backend("p38_ring_outlives_the_first_handle", 8, |q| {
        let clone = q.try_clone().unwrap();
        let regs = users(&q, 0..1);
        std::mem::forget(regs); // the kevent stays registered with the queue
        drop(q);
        clone.ready(&[Key::user(0)]).unwrap();
        let mut ring = clone.async_ring().unwrap();
        assert_eq!(
            ring.next_event(Duration::from_secs(5))
                .unwrap()
                .map(|e| e.key().id()),
            Some(0)
        );
    });
}
