//! `User` events: READY marks, REQ_READY, wake-ups (READY with no entry).

mod util;

use std::time::{Duration, Instant};

use kevent::{EventKind, Events, Key, Queue, ReqFlags, Timeout, User};
use util::{ExpectEvent, expect_events, expect_no_events};

const QUIET: Duration = Duration::from_millis(50);

#[test]
fn s5_user_event_is_ready_only_when_marked() {
    let q = Queue::new().unwrap();
    let reg = q.add(User::new(42).token(4200)).unwrap();
    expect_no_events(&q, QUIET);
    assert!(reg.ready().unwrap());
    let seen = expect_events(
        &q,
        vec![ExpectEvent::with(Key::user(42), "cookie", |e| {
            e.token() == 4200
        })],
    );
    assert_eq!(seen[0].kind(), EventKind::User { id: 42 });
    // An occurrence: consumed by the delivery.
    expect_no_events(&q, QUIET);
}

#[test]
fn s4_marks_before_a_delivery_coalesce() {
    let q = Queue::new().unwrap();
    let _reg = q.add(User::new(1)).unwrap();
    for _ in 0..5 {
        q.ready(&[Key::user(1)]).unwrap();
    }
    expect_events(&q, vec![ExpectEvent::key(Key::user(1))]);
    expect_no_events(&q, QUIET);
}

#[test]
fn s3_ready_reports_missing_keys_in_order() {
    let q = Queue::new().unwrap();
    let _a = q.add(User::new(1)).unwrap();
    let _b = q.add(User::new(3)).unwrap();
    let out = q
        .ready(&[Key::user(9), Key::user(1), Key::user(8), Key::user(3)])
        .unwrap();
    assert_eq!(out.marked, 2);
    assert_eq!(out.missing, vec![Key::user(9), Key::user(8)]);
    expect_events(
        &q,
        vec![
            ExpectEvent::key(Key::user(1)),
            ExpectEvent::key(Key::user(3)),
        ],
    );
    assert_eq!(q.ready(&[]).unwrap().marked, 0);
}

#[test]
fn s4_req_ready_queues_at_add() {
    let q = Queue::new().unwrap();
    let added = q
        .add_or_ready(User::new(5).flags(ReqFlags::READY | ReqFlags::ONESHOT))
        .unwrap();
    assert!(
        added.is_registered(),
        "REQ_READY is registered, not returned: {added:?}"
    );
    let seen = expect_events(&q, vec![ExpectEvent::key(Key::user(5))]);
    assert!(seen[0].is_done());
    expect_no_events(&q, QUIET);
}

#[test]
fn s3_wake_returns_a_waiter_with_nothing() {
    let q = Queue::new().unwrap();
    let start = Instant::now();
    std::thread::scope(|s| {
        let waiter = s.spawn(|| {
            let mut events = Events::with_capacity(4);
            q.wait(&mut events, Timeout::FOREVER).unwrap()
        });
        std::thread::sleep(Duration::from_millis(30));
        q.wake().unwrap();
        assert_eq!(waiter.join().unwrap(), 0);
    });
    assert!(start.elapsed() < Duration::from_secs(5));
    // A wake with nobody waiting makes the next wait return at once.
    q.wake().unwrap();
    let mut events = Events::with_capacity(4);
    let t = Instant::now();
    assert_eq!(q.wait(&mut events, Duration::from_secs(5)).unwrap(), 0);
    assert!(t.elapsed() < Duration::from_secs(2));
}

#[test]
fn s4_each_ready_kevent_goes_to_one_of_many_waiters() {
    let q = Queue::new().unwrap();
    let regs: Vec<_> = (0..64).map(|i| q.add(User::new(i)).unwrap()).collect();
    let keys: Vec<Key> = (0..64).map(Key::user).collect();
    let seen = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                let mut events = Events::with_capacity(8);
                loop {
                    let n = q.wait(&mut events, Duration::from_millis(200)).unwrap();
                    if n == 0 {
                        return;
                    }
                    seen.lock()
                        .unwrap()
                        .extend(events.iter().map(|e| e.key().id()));
                }
            });
        }
        q.ready(&keys).unwrap();
    });
    let mut seen = seen.into_inner().unwrap();
    seen.sort_unstable();
    assert_eq!(seen, (0..64).collect::<Vec<u64>>(), "each exactly once");
    drop(regs);
}
