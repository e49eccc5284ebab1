//! `Timer` and `PosixTimer`: never early, oneshot vs periodic, expiration counts (D8, D9).

mod util;

use std::time::{Duration, Instant};

use kevent::{Clock, Event, EventKind, Events, Key, PosixTimer, Queue, Timeout, Timer};
use util::{ExpectEvent, expect_events, expect_no_events};

fn monotonic_ms() -> u32 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec into a local.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64 * 1000 + ts.tv_nsec as u64 / 1_000_000) as u32
}

fn timer_key(d: Duration) -> Key {
    Key::from_raw(
        kevent_sys::KEVENT_TIMER,
        kevent_sys::kevent_id::from_raw([d.as_secs() as u32, d.subsec_nanos()]).as_u64(),
    )
}

fn expirations(e: &Event) -> u32 {
    match e.kind() {
        EventKind::Timer { expirations, .. } | EventKind::PosixTimer { expirations, .. } => {
            expirations
        }
        other => panic!("not a timer: {other:?}"),
    }
}

#[test]
fn s5_oneshot_timer_fires_once_and_never_early() {
    let q = Queue::new().unwrap();
    for i in 0..5u64 {
        let d = Duration::from_millis(15) + Duration::from_nanos(i);
        let before_ms = monotonic_ms();
        let start = Instant::now();
        let reg = q.add(Timer::oneshot(d).token(i)).unwrap();
        let seen = expect_events(&q, vec![ExpectEvent::key(timer_key(d))]);
        let elapsed = start.elapsed();
        assert!(elapsed >= d, "fired early: {elapsed:?} < {d:?}");
        assert!(
            seen[0].is_done(),
            "a oneshot is unregistered: {:?}",
            seen[0]
        );
        assert_eq!(seen[0].token(), i);
        assert_eq!(expirations(&seen[0]), 1);
        if let EventKind::Timer {
            expired_at_ms,
            interval,
            ..
        } = seen[0].kind()
        {
            assert_eq!(interval, d);
            let after_ms = monotonic_ms();
            assert!(
                expired_at_ms.wrapping_sub(before_ms) <= after_ms.wrapping_sub(before_ms),
                "expiry time {expired_at_ms} outside [{before_ms}, {after_ms}]"
            );
        }
        expect_no_events(&q, Duration::from_millis(40));
        drop(reg);
    }
}

#[test]
fn d8_periodic_timer_keeps_firing_and_counts_missed_periods() {
    let q = Queue::new().unwrap();
    let period = Duration::from_millis(10);
    let start = Instant::now();
    let _reg = q.add(Timer::new(period)).unwrap();
    let mut events = Events::with_capacity(8);
    let mut total = 0u64;
    while total < 6 {
        q.wait(&mut events, Timeout::FOREVER).unwrap();
        for e in &events {
            assert_eq!(e.key(), timer_key(period));
            assert!(!e.is_done(), "periodic stays registered");
            total += u64::from(expirations(&e));
            // Never early: the n-th expiry is at least n periods after the ADD.
            assert!(start.elapsed() >= period * total as u32, "early at {total}");
        }
    }
    // Missed periods are coalesced into one event with their count (D8).
    std::thread::sleep(period * 5);
    q.wait(&mut events, Timeout::FOREVER).unwrap();
    assert_eq!(events.len(), 1);
    let n = events.get(0).map(|e| expirations(&e)).unwrap_or(0);
    assert!(n >= 4, "expected coalesced expirations, got {n}");
}

#[test]
fn s3_timer_id_collisions_and_bad_intervals_are_per_entry_failures() {
    let q = Queue::new().unwrap();
    let d = Duration::from_secs(3600);
    let _first = q.add(Timer::new(d)).unwrap();
    let dup = q.add(Timer::new(d)).unwrap_err();
    assert_eq!(dup.error().raw_os_error(), Some(libc::EEXIST));
    let other = q.add(Timer::new(d + Duration::from_nanos(1)));
    assert!(other.is_ok(), "one nanosecond apart is another key");
    let zero = q.add(Timer::new(Duration::ZERO)).unwrap_err();
    assert_eq!(zero.error().raw_os_error(), Some(libc::EINVAL));
    let huge = q
        .add(Timer::new(Duration::from_secs(u64::from(u32::MAX) + 1)))
        .unwrap_err();
    assert_eq!(huge.error().raw_os_error(), Some(libc::EINVAL));
    let max = q.add(Timer::new(Duration::MAX)).unwrap_err();
    assert_eq!(max.error().errno(), Some(kevent::Errno::EINVAL));
}

#[test]
fn s4_removed_timer_never_fires() {
    let q = Queue::new().unwrap();
    let reg = q.add(Timer::oneshot(Duration::from_millis(10))).unwrap();
    drop(reg);
    expect_no_events(&q, Duration::from_millis(40));
}

#[test]
fn d9_posix_timer_interval_keeps_firing_with_its_cookie() {
    let q = Queue::new().unwrap();
    let t = PosixTimer::new(&q, Clock::Monotonic, 0xabc).unwrap();
    let key = Key::from_raw(kevent_sys::KEVENT_POSIX_TIMER, t.id());
    assert_eq!(t.remaining().unwrap(), (None, None), "created disarmed");
    expect_no_events(&q, Duration::from_millis(20));
    let start = Instant::now();
    t.arm(Duration::from_millis(10), Some(Duration::from_millis(10)))
        .unwrap();
    let (next, every) = t.remaining().unwrap();
    assert!(next.is_some());
    assert_eq!(every, Some(Duration::from_millis(10)));
    let mut total = 0;
    while total < 3 {
        let seen = expect_events(
            &q,
            vec![ExpectEvent::with(key, "cookie", |e| e.token() == 0xabc)],
        );
        total += expirations(&seen[0]);
        assert!(
            start.elapsed() >= Duration::from_millis(10) * total,
            "early"
        );
    }
    t.disarm().unwrap();
    // Drain an expiry that may have raced the disarm, then nothing.
    let mut events = Events::with_capacity(4);
    q.wait(&mut events, Timeout::NOW).unwrap();
    expect_no_events(&q, Duration::from_millis(40));
    t.delete().unwrap();
}

#[test]
fn s5_posix_timer_oneshot_and_drop_deletes() {
    let q = Queue::new().unwrap();
    let t = PosixTimer::new(&q, Clock::Realtime, 1).unwrap();
    t.arm_at(
        std::time::SystemTime::now() + Duration::from_millis(10),
        None,
    )
    .unwrap();
    let key = Key::from_raw(kevent_sys::KEVENT_POSIX_TIMER, t.id());
    expect_events(&q, vec![ExpectEvent::key(key)]);
    expect_no_events(&q, Duration::from_millis(30));
    t.arm(Duration::from_millis(10), None).unwrap();
    drop(t);
    expect_no_events(&q, Duration::from_millis(40));
}
