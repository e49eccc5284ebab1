//! `Timers` (decision P31): many deadlines with the same duration over one TIMER kevent,
//! moved without REMOVE + ADD, never early; issue 23, item 1.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use kevent::{Errno, Events, Key, Queue, Timeout, Timer, Timers};

const COOKIE: u64 = u64::MAX - 7;

/// Waits until `want` tokens expired (up to 5 s: the bound only catches a hang), returning
/// each token with the time it was handed out.
fn expire(q: &Queue, t: &mut Timers, want: usize) -> Vec<(u64, Instant)> {
    let give_up = Instant::now() + Duration::from_secs(5);
    let mut events = Events::with_capacity(16);
    let mut out = Vec::new();
    while out.len() < want {
        assert!(
            Instant::now() < give_up,
            "only {} of {want} expired",
            out.len()
        );
        q.wait(&mut events, give_up).unwrap();
        for e in &events {
            assert!(t.handles(&e), "only the driver's events are queued: {e:?}");
        }
        while let Some((_, token)) = t.pop_expired().unwrap() {
            out.push((token, Instant::now()));
        }
    }
    out
}

#[test]
fn p31_equal_durations_do_not_collide_and_never_fire_early() {
    let q = Queue::new().unwrap();
    let mut t = Timers::new(&q, COOKIE).unwrap();
    let idle = Duration::from_millis(20);
    let mut deadlines = Vec::new();
    for conn in 0..50u64 {
        let d = Instant::now() + idle;
        t.insert(d, conn).unwrap();
        deadlines.push(d);
    }
    assert_eq!(t.len(), 50);
    let got = expire(&q, &mut t, 50);
    let tokens: HashSet<u64> = got.iter().map(|&(k, _)| k).collect();
    assert_eq!(tokens.len(), 50, "each deadline expires exactly once");
    for (token, at) in got {
        assert!(
            at >= deadlines[token as usize],
            "connection {token} expired early"
        );
    }
    assert!(t.is_empty());
    let mut events = Events::with_capacity(4);
    assert_eq!(q.wait(&mut events, Timeout::NOW).unwrap(), 0);
}

#[test]
fn p31_reset_later_postpones_and_cancel_removes() {
    let q = Queue::new().unwrap();
    let mut t = Timers::new(&q, COOKIE).unwrap();
    let start = Instant::now();
    let a = t.insert(start + Duration::from_millis(10), 1).unwrap();
    let b = t.insert(start + Duration::from_millis(10), 2).unwrap();
    let c = t.insert(start + Duration::from_millis(15), 3).unwrap();
    let later = start + Duration::from_millis(60);
    assert!(t.reset(a, later).unwrap());
    assert_eq!(t.cancel(b), Some(2));
    let got = expire(&q, &mut t, 2);
    assert_eq!(got[0].0, 3);
    assert_eq!(got[1].0, 1);
    assert!(
        got[1].1 >= later,
        "the reset deadline did not fire at its old time"
    );
    assert!(!t.reset(c, later).unwrap(), "an expired id is stale");
    assert_eq!(t.cancel(b), None);
}

#[test]
fn p31_reset_earlier_rearms_the_kevent() {
    let q = Queue::new().unwrap();
    let mut t = Timers::new(&q, COOKIE).unwrap();
    t.set_resolution(Duration::ZERO); // armed at each deadline exactly
    let a = t
        .insert(Instant::now() + Duration::from_secs(3600), 1)
        .unwrap();
    let first = t.driver_key();
    let soon = Instant::now() + Duration::from_millis(10);
    assert!(t.reset(a, soon).unwrap());
    assert_ne!(t.driver_key(), first, "re-armed at the earlier deadline");
    let got = expire(&q, &mut t, 1);
    assert_eq!(got[0].0, 1);
    assert!(got[0].1 >= soon);
}

/// A timer of the application's own with some interval and the driver coexist: the driver
/// never takes the application's key, and both fire.
#[test]
fn p31_coexists_with_plain_timers() {
    let q = Queue::new().unwrap();
    let plain = Duration::from_millis(10);
    let _mine = q.add(Timer::oneshot(plain).token(1)).unwrap();
    let mut t = Timers::new(&q, COOKIE).unwrap();
    t.insert_after(plain, 9).unwrap();
    let give_up = Instant::now() + Duration::from_secs(5);
    let (mut mine, mut theirs) = (false, false);
    let mut events = Events::with_capacity(8);
    while !(mine && theirs) {
        assert!(Instant::now() < give_up, "mine {mine}, timers {theirs}");
        q.wait(&mut events, give_up).unwrap();
        for e in &events {
            if !t.handles(&e) {
                assert_eq!(e.token(), 1);
                mine = true;
            }
        }
        while let Some((_, token)) = t.pop_expired().unwrap() {
            assert_eq!(token, 9);
            theirs = true;
        }
    }
}

/// The key of a one-shot TIMER of `after` (a key names no queue: asked of a queue of its own).
fn timer_key(after: Duration) -> Key {
    Queue::new()
        .unwrap()
        .add(Timer::oneshot(after))
        .unwrap()
        .key()
}

/// P31's `EEXIST` retry: when the driver's interval is taken by a TIMER the application added
/// on the same queue, the next nanosecond is tried, up to 64 times; with all 64 taken, the
/// insert fails with `EEXIST` and keeps nothing. (The resolution of a minute makes the
/// driver's interval exact whatever the machine's speed: the deadline is 3630 s away, so
/// the time left rounds up to 3660 s unless the insert took more than 30 s.)
#[test]
fn p31_driver_takes_the_next_free_nanosecond_on_eexist() {
    let taken = Duration::from_secs(3660);
    let ns = |i: u64| taken + Duration::from_nanos(i);
    let resolution = Duration::from_secs(60);
    let deadline = || Instant::now() + Duration::from_secs(3630);

    // Three intervals taken: the driver is armed at the fourth.
    let q = Queue::new().unwrap();
    let mine: Vec<_> = (0..3)
        .map(|i| q.add(Timer::oneshot(ns(i)).token(1)).unwrap())
        .collect();
    let mut t = Timers::new(&q, COOKIE).unwrap();
    t.set_resolution(resolution);
    let id = t.insert(deadline(), 7).unwrap();
    assert_eq!(t.driver_key(), Some(timer_key(ns(3))));
    assert!(mine.iter().all(|r| Some(r.key()) != t.driver_key()));
    assert_eq!(t.cancel(id), Some(7));

    // All 64 tries taken: EEXIST, and the deadline is not kept.
    let q = Queue::new().unwrap();
    let mut mine: Vec<_> = (0..64)
        .map(|i| q.add(Timer::oneshot(ns(i)).token(1)).unwrap())
        .collect();
    let mut t = Timers::new(&q, COOKIE).unwrap();
    t.set_resolution(resolution);
    let err = t.insert(deadline(), 8).unwrap_err();
    assert_eq!(err.errno(), Some(Errno::EEXIST), "{err}");
    assert!(
        t.is_empty(),
        "a deadline that could not be armed is not kept"
    );
    assert_eq!(t.driver_key(), None);

    // The last of the 64 freed: the 64th try takes it.
    drop(mine.pop());
    t.insert(deadline(), 9).unwrap();
    assert_eq!(t.driver_key(), Some(timer_key(ns(63))));
    assert_eq!(t.len(), 1);
}

/// 10^5 deadlines: inserted, half of them reset, all expired exactly once, with one kernel
/// timer throughout.
#[test]
fn p31_a_hundred_thousand_deadlines() {
    const N: u64 = 100_000;
    let q = Queue::new().unwrap();
    let mut t = Timers::new(&q, COOKIE).unwrap();
    let base = Instant::now() + Duration::from_millis(30);
    let ids: Vec<_> = (0..N)
        .map(|i| t.insert(base + Duration::from_micros(i % 1000), i).unwrap())
        .collect();
    let driver = t.driver_key();
    for id in ids.iter().step_by(2) {
        assert!(t.reset(*id, base + Duration::from_millis(5)).unwrap());
    }
    assert_eq!(t.driver_key(), driver, "later deadlines do not re-arm");
    let got = expire(&q, &mut t, N as usize);
    let mut seen = vec![false; N as usize];
    for (token, _) in got {
        assert!(!seen[token as usize], "{token} expired twice");
        seen[token as usize] = true;
    }
    assert!(t.is_empty());
}
