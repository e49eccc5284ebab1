//! Spec section 4, "no kevent is lost or duplicated when several threads wait and commit
//! concurrently": 4 waiter threads and 2 READY-ing threads move 1,000,000 ONESHOT UNOTIFY
//! events with exact accounting (every id exactly once, in bounded time). Measured on the
//! fallback: about 6 s in a debug build on 2 shared cores, so the full million runs in every
//! build; the batch-of-one variant moves 100,000 in debug builds (1,000,000 with
//! `--release`). Each run prints its figures.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use kevent_test_support::*;

/// Events moved by the main test.
const EVENTS: u64 = 1_000_000;
/// Events moved by the batch-of-one variant: 1,000,000 with `--release`, 100,000 otherwise.
const EVENTS_SMALL: u64 = if RELEASE { 1_000_000 } else { 100_000 };

/// Moves `events` ONESHOT UNOTIFY events through `waiters` threads while `readiers` threads
/// mark them ready, and checks that each id arrives exactly once.
fn move_events(
    b: Backend,
    events: u64,
    waiters: usize,
    readiers: u64,
    batch: usize,
    limit: Duration,
) {
    let q = Arc::new(Queue::new(b));
    let start = Instant::now();
    let evs: Vec<ukevent> = (0..events).map(|i| user(i, KEVENT_REQ_ONESHOT)).collect();
    for c in evs.chunks(8192) {
        q.add_ok(c);
    }
    drop(evs);
    let registered = start.elapsed();
    let seen: Arc<Vec<AtomicU8>> = Arc::new((0..events).map(|_| AtomicU8::new(0)).collect());
    let total = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let bad = Arc::new(AtomicUsize::new(0));
    let t0 = Instant::now();
    let waiter_hs: Vec<_> = (0..waiters)
        .map(|_| {
            let (q, seen, total, done, bad) = (
                q.clone(),
                seen.clone(),
                total.clone(),
                done.clone(),
                bad.clone(),
            );
            std::thread::spawn(move || {
                let mut buf = vec![ukevent::default(); batch];
                let mut calls = 0u64;
                while !done.load(Ordering::SeqCst) {
                    let n = b
                        .get_events(q.fd, 1, &mut buf, &ms(20), 0)
                        .expect("kevent_get_events") as usize;
                    calls += 1;
                    for e in &buf[..n] {
                        let id = e.id.as_u64();
                        if e.type_ != KEVENT_UNOTIFY
                            || id >= events
                            || e.ret_flags & KEVENT_RET_BROKEN != 0
                        {
                            bad.fetch_add(1, Ordering::SeqCst);
                            continue;
                        }
                        seen[id as usize].fetch_add(1, Ordering::SeqCst);
                    }
                    if total.fetch_add(n, Ordering::SeqCst) + n >= events as usize {
                        done.store(true, Ordering::SeqCst);
                    }
                }
                calls
            })
        })
        .collect();
    let readier_hs: Vec<_> = (0..readiers)
        .map(|r| {
            let q = q.clone();
            std::thread::spawn(move || {
                let ids: Vec<u64> = (0..events).filter(|i| i % readiers == r).collect();
                for c in ids.chunks(101) {
                    q.ready_ids(c);
                }
            })
        })
        .collect();
    let calls = bounded(limit, "moving the events", move || {
        for h in readier_hs {
            h.join().unwrap();
        }
        waiter_hs
            .into_iter()
            .map(|h| h.join().unwrap())
            .sum::<u64>()
    });
    let moved = t0.elapsed();
    assert_eq!(
        bad.load(Ordering::SeqCst),
        0,
        "events of unknown ids or broken"
    );
    let mut missing = Vec::new();
    let mut dup = Vec::new();
    for (i, s) in seen.iter().enumerate() {
        match s.load(Ordering::SeqCst) {
            1 => {}
            0 => missing.push(i),
            _ => dup.push(i),
        }
    }
    assert!(
        missing.is_empty() && dup.is_empty(),
        "{} lost (first {:?}), {} duplicated (first {:?})",
        missing.len(),
        &missing[..missing.len().min(10)],
        dup.len(),
        &dup[..dup.len().min(10)]
    );
    assert_eq!(total.load(Ordering::SeqCst), events as usize);
    q.expect_no_events();
    eprintln!(
        "{} backend, {} build: {events} ONESHOT UNOTIFY events, {waiters} waiters, {readiers} \
         readiers, batch {batch}: registered in {registered:?}, moved in {moved:?} \
         ({calls} get_events calls, {:.0} events/s); every id exactly once",
        b.as_str(),
        if RELEASE { "release" } else { "debug" },
        events as f64 / moved.as_secs_f64()
    );
}

backend_test! {
    /// 4 waiters and 2 READY-ing threads move 1,000,000 ONESHOT UNOTIFY
    /// events: none lost, none duplicated.
    fn s4_no_loss_no_duplicate_4_waiters_2_readiers(b) {
        move_events(b, EVENTS, 4, 2, 64, Duration::from_secs(300));
    }

    /// The same with single-event buffers (the most contended hand-off) and 8 waiters
    /// (100,000 events in debug builds).
    fn s4_no_loss_no_duplicate_8_waiters_batch_of_one(b) {
        move_events(b, EVENTS_SMALL, 8, 2, 1, Duration::from_secs(300));
    }
}
