//! Spec section 3, the ring: `kevent_wait` (the `old_uidx` rule, moving events into free
//! slots), `kevent_get_events` mirroring into the ring (`RET_COPY_FAILED` on a full ring),
//! D12 (one slot always free) and D13 (the commit rule: wrap, `ring_over`, `EOVERFLOW`,
//! stale commits, several committing threads).

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kevent_test_support::*;

/// Registers UNOTIFY ids `ids` and marks them ready.
fn ready_users(q: &Queue, ids: impl IntoIterator<Item = u64>) {
    let ids: Vec<u64> = ids.into_iter().collect();
    let evs: Vec<ukevent> = ids
        .iter()
        .map(|&i| user_c(i, KEVENT_REQ_ONESHOT, i * 10))
        .collect();
    q.add_ok(&evs);
    q.ready_ids(&ids);
}

/// The ids in ring slots `from..from+k` (mod n).
fn ring_ids(q: &Queue, from: u32, k: u32) -> Vec<u64> {
    let n = q.ring_size();
    (0..k).map(|i| q.slot((from + i) % n).id.as_u64()).collect()
}

backend_test! {
    /// `kevent_wait` moves up to `num` ready events into free slots starting at
    /// `ring_kidx`, advances `ring_kidx` and returns how many it moved.
    fn s3_wait_moves_ready_events_into_the_ring(b) {
        let q = Queue::with_ring(b, 8);
        ready_users(&q, 0..3);
        assert_eq!(q.wait(2, 0, &ZERO), Ok(2));
        assert_eq!(q.kidx(), 2);
        assert_eq!(q.wait(8, 0, &ZERO), Ok(1));
        assert_eq!(q.kidx(), 3);
        let got: Vec<ukevent> = (0..3).map(|i| q.slot(i)).collect();
        expect_events(
            &got,
            &(0..3).map(|i| Want::new(KEVENT_UNOTIFY, i).cookie(i * 10)).collect::<Vec<_>>(),
        );
        assert_eq!(q.wait(8, 0, &ZERO), Ok(0));
        // Nothing was delivered twice: get_events finds nothing either.
        q.expect_no_events();
    }

    /// `kevent_wait` blocks until an event is ready, then moves it.
    fn s3_wait_blocks_until_an_event_is_ready(b) {
        let q = Arc::new(Queue::with_ring(b, 8));
        q.add_ok(&[user(1, 0)]);
        let q2 = q.clone();
        // Before the readier exists, so its READY is at least 50 ms after this.
        let start = Instant::now();
        let h = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            q2.ready_ids(&[1]);
        });
        let q3 = q.clone();
        let n = bounded(Duration::from_secs(10), "kevent_wait", move || q3.wait(4, 0, &FOREVER));
        h.join().unwrap();
        assert_eq!(n, Ok(1));
        assert!(start.elapsed() >= Duration::from_millis(50));
        assert_eq!(q.kidx(), 1);
        assert_eq!(q.slot(0).id.as_u64(), 1);
    }

    /// `kevent_wait` returns at once, with 0, when `old_uidx` is not the consumer index,
    /// even with events ready and an "infinite" timeout; nothing moves.
    fn s3_wait_returns_at_once_on_a_stale_old_uidx(b) {
        let q = Queue::with_ring(b, 8);
        ready_users(&q, 0..2);
        for stale in [1, 5, 7] {
            let start = Instant::now();
            assert_eq!(q.wait(4, stale, &FOREVER), Ok(0));
            assert!(start.elapsed() < Duration::from_millis(500));
        }
        assert_eq!(q.kidx(), 0);
        assert_eq!(q.wait(4, 0, &ZERO), Ok(2));
        assert_eq!(q.commit(2, 0), Ok(2));
        // The consumer index is 2 now: 0 is stale.
        ready_users(&q, 10..11);
        let start = Instant::now();
        assert_eq!(q.wait(4, 0, &FOREVER), Ok(0));
        assert!(start.elapsed() < Duration::from_millis(500));
        assert_eq!(q.wait(4, 2, &ZERO), Ok(1));
        assert_eq!(q.kidx(), 3);
    }

    /// `kevent_wait` needs a ring, and `num` no larger than the ring (EINVAL otherwise).
    fn s3_wait_needs_a_ring_and_num_within_it(b) {
        let q = Queue::new(b);
        assert_eq!(q.wait(1, 0, &ZERO), Err(Errno::EINVAL));
        let q = Queue::with_ring(b, 4);
        for num in [5, 100, u32::MAX] {
            assert_eq!(q.wait(num, 0, &ZERO), Err(Errno::EINVAL), "num {num}");
        }
        assert_eq!(q.wait(4, 0, &ZERO), Ok(0));
        assert_usable(&q);
    }

    /// D12: a ring of `n` holds at most `n - 1` uncommitted events; `ring_kidx == uidx`
    /// always means empty. Events never overwrite uncommitted slots.
    fn d12_ring_keeps_one_slot_free(b) {
        let q = Queue::with_ring(b, 4);
        ready_users(&q, 0..6);
        assert_eq!(q.wait(4, 0, &ZERO), Ok(3));
        assert_eq!(q.kidx(), 3);
        let before = ring_ids(&q, 0, 3);
        // Full: nothing more moves, and a blocking wait does not overwrite slots.
        assert_eq!(q.wait(4, 0, &ZERO), Ok(0));
        assert_eq!(q.kidx(), 3);
        assert_eq!(ring_ids(&q, 0, 3), before);
        // Committing 2 frees 2 slots: exactly 2 more move, into slots 3 and 0.
        assert_eq!(q.commit(2, 0), Ok(2));
        assert_eq!(q.wait(4, 2, &ZERO), Ok(2));
        assert_eq!(q.kidx(), 1);
        assert_eq!(q.slot(2).id.as_u64(), before[2], "uncommitted slot overwritten");
        let mut all: Vec<u64> = before.clone();
        all.extend(ring_ids(&q, 3, 2));
        assert_eq!(q.commit(1, 0), Ok(3));
        assert_eq!(q.over(), 1);
        assert_eq!(q.wait(4, 1, &ZERO), Ok(1));
        all.extend(ring_ids(&q, 1, 1));
        all.sort_unstable();
        assert_eq!(all, (0..6).collect::<Vec<_>>());
    }

    /// `kevent_get_events` writes the same events to the ring and advances `ring_kidx`.
    fn s3_get_events_mirrors_events_into_the_ring(b) {
        let q = Queue::with_ring(b, 8);
        ready_users(&q, 0..3);
        let got = q.get(8, &ZERO);
        assert_eq!(got.len(), 3);
        assert_eq!(q.kidx(), 3);
        for (i, e) in got.iter().enumerate() {
            let s = q.slot(i as u32);
            assert_eq!((s.type_, s.id.as_u64(), s.cookie()), (e.type_, e.id.as_u64(), e.cookie()));
            assert_eq!(s.ret_flags, e.ret_flags);
            assert_eq!(s.ret_data, e.ret_data);
        }
        assert_eq!(q.commit(3, 0), Ok(3));
    }

    /// An event that finds no free ring slot is still returned in `buf`, with
    /// `RET_COPY_FAILED`; `kevent_get_events` never blocks on a full ring.
    fn s3_get_events_on_a_full_ring_sets_copy_failed(b) {
        let q = Queue::with_ring(b, 4);
        ready_users(&q, 0..5);
        let start = Instant::now();
        let got = q.get_events(1, 8, &FOREVER, 0).expect("get_events");
        assert!(start.elapsed() < Duration::from_secs(2));
        assert_eq!(got.len(), 5, "{got:#?}");
        let failed = got.iter().filter(|e| e.ret_flags & KEVENT_RET_COPY_FAILED != 0).count();
        assert_eq!(failed, 2, "{got:#?}");
        assert_eq!(q.kidx(), 3);
        let in_ring: BTreeSet<u64> = ring_ids(&q, 0, 3).into_iter().collect();
        let copied: BTreeSet<u64> = got
            .iter()
            .filter(|e| e.ret_flags & KEVENT_RET_COPY_FAILED == 0)
            .map(|e| e.id.as_u64())
            .collect();
        assert_eq!(in_ring, copied);
        // The ring stays full and get_events keeps working without blocking.
        ready_users(&q, 10..11);
        let got = q.get_events(1, 8, &FOREVER, 0).unwrap();
        expect_events(
            &got,
            &[Want::new(KEVENT_UNOTIFY, 10).with(KEVENT_RET_COPY_FAILED)],
        );
    }

    /// D13: a single consumer that read `k` events commits `(uidx + k) % n` with the
    /// `ring_over` it read and releases exactly those slots, over many wraps; crossing the
    /// end increments `ring_over`, written back to the ring.
    fn d13_single_consumer_commit_releases_exactly_what_it_read(b) {
        let n = 5;
        let q = Queue::with_ring(b, n);
        let mut uidx_abs: u64 = 0;
        let mut next_id = 0;
        let mut seen = Vec::new();
        for round in 0..40u64 {
            let k = 1 + (round % (n as u64 - 1)) as u32;
            ready_users(&q, next_id..next_id + k as u64);
            next_id += k as u64;
            let uidx = (uidx_abs % n as u64) as u32;
            let over = q.over();
            assert_eq!(over as u64, uidx_abs / n as u64, "ring_over counts the wraps");
            assert_eq!(q.wait(n, uidx, &ZERO), Ok(k));
            assert_eq!(q.kidx(), ((uidx_abs + k as u64) % n as u64) as u32);
            seen.extend(ring_ids(&q, uidx, k));
            assert_eq!(q.commit((uidx + k) % n, over), Ok(k), "round {round}");
            uidx_abs += k as u64;
            assert_eq!(q.over() as u64, uidx_abs / n as u64);
        }
        assert_eq!(seen, (0..next_id).collect::<Vec<_>>());
    }

    /// D13: a commit at or before the consumer index is stale: it returns 0 and changes
    /// nothing.
    fn d13_stale_commit_returns_zero_and_changes_nothing(b) {
        let q = Queue::with_ring(b, 8);
        ready_users(&q, 0..6);
        assert_eq!(q.wait(8, 0, &ZERO), Ok(6));
        assert_eq!(q.commit(4, 0), Ok(4));
        for stale in [4, 3, 0] {
            assert_eq!(q.commit(stale, 0), Ok(0), "commit({stale})");
        }
        assert_eq!(q.over(), 0);
        // Still exactly 2 slots to release.
        assert_eq!(q.commit(6, 0), Ok(2));
    }

    /// D13: a commit can never release a slot that was not produced: an index past the
    /// producer maps to a position behind the consumer (stale).
    fn d13_commit_never_releases_unproduced_slots(b) {
        let q = Queue::with_ring(b, 8);
        ready_users(&q, 0..2);
        assert_eq!(q.wait(8, 0, &ZERO), Ok(2));
        for ahead in [3, 5, 7] {
            assert_eq!(q.commit(ahead, 0), Ok(0), "commit({ahead}) with kidx 2");
        }
        assert_eq!(q.commit(2, 0), Ok(2));
        assert_eq!(q.commit(2, 0), Ok(0));
        // Empty ring: nothing can be released.
        for i in 0..8 {
            assert_eq!(q.commit(i, 0), Ok(0));
        }
    }

    /// D13: `over` must be `ring_over` or `ring_over - 1`; anything else is EOVERFLOW (the
    /// committer fell a whole ring behind), and changes nothing. `new_uidx >= n` is EINVAL.
    fn d13_ring_wrap_and_eoverflow_on_a_stale_over(b) {
        let n = 4;
        let q = Queue::with_ring(b, n);
        let mut uidx = 0;
        // Wrap the ring three times.
        for i in 0..4u64 {
            ready_users(&q, i * 3..i * 3 + 3);
            assert_eq!(q.wait(n, uidx, &ZERO), Ok(3));
            let over = q.over();
            uidx = (uidx + 3) % n;
            assert_eq!(q.commit(uidx, over), Ok(3));
        }
        assert_eq!(q.over(), 3);
        ready_users(&q, 100..102);
        assert_eq!(q.wait(n, uidx, &ZERO), Ok(2));
        let target = (uidx + 2) % n;
        for bad in [0, 1, 4, 5, u32::MAX] {
            assert_eq!(q.commit(target, bad), Err(Errno::EOVERFLOW), "over {bad}");
        }
        for bad in [n, n + 1, u32::MAX] {
            assert_eq!(q.commit(bad, 3), Err(Errno::EINVAL), "new_uidx {bad}");
        }
        assert_eq!(q.over(), 3);
        // ring_over - 1 is accepted (read before another thread's wrapping commit).
        assert_eq!(q.commit(target, 2), Ok(2));
    }

    /// D13 with several threads: concurrent commits of different indices within what was
    /// produced release every slot exactly once in total; the others are stale (0).
    fn d13_concurrent_commits_release_each_slot_once(b) {
        let n = 16;
        let q = Arc::new(Queue::with_ring(b, n));
        let mut uidx = 0u32;
        let mut next = 0u64;
        for round in 0..60u64 {
            let k = 1 + (round % 15) as u32;
            ready_users(&q, next..next + k as u64);
            next += k as u64;
            assert_eq!(q.wait(n, uidx, &ZERO), Ok(k));
            let over = q.over();
            let released = Arc::new(AtomicUsize::new(0));
            let hs: Vec<_> = (0..4u32)
                .map(|t| {
                    let (q, released) = (q.clone(), released.clone());
                    std::thread::spawn(move || {
                        for j in 0..k {
                            let step = 1 + (j + t * 7) % k;
                            let r = q.commit((uidx + step) % n, over).expect("commit");
                            released.fetch_add(r as usize, Ordering::SeqCst);
                        }
                        let r = q.commit((uidx + k) % n, over).expect("commit");
                        released.fetch_add(r as usize, Ordering::SeqCst);
                    })
                })
                .collect();
            for h in hs {
                h.join().unwrap();
            }
            assert_eq!(released.load(Ordering::SeqCst), k as usize, "round {round}");
            uidx = (uidx + k) % n;
            assert_eq!(q.commit(uidx, q.over()), Ok(0));
        }
    }

    /// D13 end to end: 3 consumer threads share one ring (each waits, claims slots, reads
    /// them, and commits the prefix every thread has finished with) while 2 threads mark
    /// ONESHOT kevents ready: every event is read exactly once.
    fn d13_threads_share_a_ring_without_loss_or_duplicate(b) {
        const N: u64 = 20_000;
        let n = 32;
        let q = Arc::new(Queue::with_ring(b, n));
        let evs: Vec<ukevent> = (0..N).map(|i| user(i, KEVENT_REQ_ONESHOT)).collect();
        for c in evs.chunks(4096) {
            q.add_ok(c);
        }
        struct Book {
            next_abs: u64,
            uidx_abs: u64,
            done: BTreeSet<u64>,
        }
        let book = Arc::new(Mutex::new(Book { next_abs: 0, uidx_abs: 0, done: BTreeSet::new() }));
        let seen: Arc<Vec<AtomicUsize>> = Arc::new((0..N).map(|_| AtomicUsize::new(0)).collect());
        let total = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let start = Instant::now();
        let readiers: Vec<_> = (0..2u64)
            .map(|r| {
                let q = q.clone();
                std::thread::spawn(move || {
                    let ids: Vec<u64> = (0..N).filter(|i| i % 2 == r).collect();
                    for c in ids.chunks(37) {
                        q.ready_ids(c);
                    }
                })
            })
            .collect();
        let consumers: Vec<_> = (0..3)
            .map(|_| {
                let (q, book, seen, total, stop) =
                    (q.clone(), book.clone(), seen.clone(), total.clone(), stop.clone());
                std::thread::spawn(move || {
                    while !stop.load(Ordering::SeqCst) {
                        let uidx = (book.lock().unwrap().uidx_abs % n as u64) as u32;
                        q.wait(n, uidx, &ms(5)).expect("kevent_wait");
                        loop {
                            // Claim one produced, unclaimed position.
                            let p = {
                                let mut bk = book.lock().unwrap();
                                let next = (bk.next_abs % n as u64) as u32;
                                let avail = kevent_sys::ring::occupancy(n, q.kidx(), next);
                                if avail == 0 {
                                    break;
                                }
                                bk.next_abs += 1;
                                bk.next_abs - 1
                            };
                            let e = q.slot((p % n as u64) as u32);
                            let id = e.id.as_u64();
                            assert!(id < N && e.type_ == KEVENT_UNOTIFY, "{e:?}");
                            seen[id as usize].fetch_add(1, Ordering::SeqCst);
                            if total.fetch_add(1, Ordering::SeqCst) + 1 == N as usize {
                                stop.store(true, Ordering::SeqCst);
                            }
                            // Commit the prefix every thread is done with (serialized
                            // bookkeeping; D13 makes the commit itself exact).
                            let mut bk = book.lock().unwrap();
                            bk.done.insert(p);
                            let mut to = bk.uidx_abs;
                            while bk.done.remove(&to) {
                                to += 1;
                            }
                            if to > bk.uidx_abs {
                                let over = q.over();
                                let r = q.commit((to % n as u64) as u32, over).expect("commit");
                                assert_eq!(r as u64, to - bk.uidx_abs);
                                bk.uidx_abs = to;
                            }
                        }
                    }
                })
            })
            .collect();
        bounded(Duration::from_secs(120), "shared-ring consumers", move || {
            for h in readiers {
                h.join().unwrap();
            }
            for h in consumers {
                h.join().unwrap();
            }
        });
        eprintln!("{N} events through a shared ring of {n} (3 consumers, 2 readiers) in {:?}", start.elapsed());
        for (i, s) in seen.iter().enumerate() {
            assert_eq!(s.load(Ordering::SeqCst), 1, "id {i}");
        }
        q.expect_no_events();
    }
}

backend_test! {
    /// P2: `kevent_wait` with `num == 0`, or with no free ring slot, returns 0 at once
    /// (nothing could be moved; waiting would only hide the full ring).
    fn p2_wait_with_num_zero_or_a_full_ring_returns_at_once(b) {
        let q = Queue::with_ring(b, 4);
        let add: Vec<ukevent> = (0..5).map(|i| user(i, KEVENT_REQ_READY)).collect();
        q.add_ok(&add);
        let start = Instant::now();
        assert_eq!(q.wait(0, 0, &ts(5, 0)), Ok(0), "num == 0");
        assert_eq!(q.wait(4, 0, &ts(5, 0)), Ok(3), "a 4-entry ring holds 3 (D12)");
        assert_eq!(q.wait(4, 0, &ts(5, 0)), Ok(0), "full ring");
        assert!(start.elapsed() < Duration::from_secs(4), "a wait slept");
        assert_eq!(q.kidx(), 3);
    }
}
