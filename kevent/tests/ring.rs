//! The ring: the single consumer across wrap-around (D12, D13), partial consumption and
//! explicit commits, `get_events` mirroring, and the multi-threaded consumer with exact
//! accounting.

mod util;

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use kevent::{Events, Key, NoFd, Queue, Registration, Timeout, User};

fn users(q: &Queue, ids: std::ops::Range<u64>) -> Vec<Registration<NoFd>> {
    q.add_all(ids.map(User::new))
        .into_iter()
        .map(|a| a.expect("user events register"))
        .collect()
}

#[test]
fn d13_single_consumer_across_wrap_around() {
    let q = Queue::builder().ring_size(4).build().unwrap();
    let _regs = users(&q, 0..1000);
    let mut ring = q.ring().unwrap();
    assert_eq!(ring.size(), 4);
    let mut next = 0u64;
    for round in 0..100u64 {
        // 3 = n - 1: the most a ring of 4 holds (D12).
        let keys: Vec<Key> = (round * 3..round * 3 + 3).map(Key::user).collect();
        q.ready(&keys).unwrap();
        let mut got = Vec::new();
        while got.len() < 3 {
            got.extend(
                ring.wait(Duration::from_secs(5))
                    .unwrap()
                    .map(|e| e.key().id()),
            );
        }
        assert_eq!(got, (next..next + 3).collect::<Vec<_>>(), "round {round}");
        next += 3;
    }
    assert_eq!(ring.available(), 0);
}

#[test]
fn d12_a_full_ring_takes_n_minus_one_and_the_rest_after_a_commit() {
    let q = Queue::builder().ring_size(4).build().unwrap();
    let _regs = users(&q, 0..5);
    let keys: Vec<Key> = (0..5).map(Key::user).collect();
    q.ready(&keys).unwrap();
    let mut ring = q.ring().unwrap();
    let snap = ring.wait(Timeout::FOREVER).unwrap();
    assert_eq!(snap.len(), 3, "n - 1 slots");
    let first: Vec<u64> = snap.map(|e| e.key().id()).collect();
    let snap = ring.wait(Timeout::FOREVER).unwrap();
    let rest: Vec<u64> = snap.map(|e| e.key().id()).collect();
    let mut all = [first, rest].concat();
    all.sort_unstable();
    assert_eq!(all, vec![0, 1, 2, 3, 4]);
}

#[test]
fn s3_partial_consumption_commits_only_what_was_read() {
    let q = Queue::builder().ring_size(8).build().unwrap();
    let _regs = users(&q, 0..3);
    q.ready(&[Key::user(0), Key::user(1), Key::user(2)])
        .unwrap();
    let mut ring = q.ring().unwrap();
    let mut snap = ring.wait(Timeout::FOREVER).unwrap();
    assert_eq!(snap.len(), 3);
    assert_eq!(snap.next().map(|e| e.key()), Some(Key::user(0)));
    assert_eq!(snap.commit().unwrap(), 1, "one slot released");
    assert_eq!(ring.available(), 2);
    // Unread entries are returned without a new kevent_wait.
    let rest: Vec<u64> = ring
        .wait(Timeout::NOW)
        .unwrap()
        .map(|e| e.key().id())
        .collect();
    assert_eq!(rest, vec![1, 2]);
    assert_eq!(ring.wait(Timeout::NOW).unwrap().len(), 0);
}

#[test]
fn s3_a_new_consumer_continues_where_the_last_one_stopped() {
    let q = Queue::builder().ring_size(8).build().unwrap();
    let _regs = users(&q, 0..4);
    q.ready(&[Key::user(0), Key::user(1)]).unwrap();
    {
        let mut ring = q.ring().unwrap();
        let ids: Vec<u64> = ring
            .wait(Timeout::FOREVER)
            .unwrap()
            .map(|e| e.key().id())
            .collect();
        assert_eq!(ids, vec![0, 1]);
    }
    q.ready(&[Key::user(2), Key::user(3)]).unwrap();
    let shared = q.shared_ring().unwrap();
    let batch = shared.wait(8, Timeout::FOREVER).unwrap();
    let ids: Vec<u64> = batch.iter().map(|e| e.key().id()).collect();
    assert_eq!(ids, vec![2, 3]);
}

#[test]
fn s3_get_events_mirrors_into_the_ring_and_flags_copy_failed() {
    let q = Queue::builder().ring_size(2).build().unwrap();
    let _regs = users(&q, 0..2);
    q.ready(&[Key::user(0), Key::user(1)]).unwrap();
    let mut events = Events::with_capacity(4);
    let mut got = Vec::new();
    while got.len() < 2 {
        q.wait(&mut events, Duration::from_secs(5)).unwrap();
        got.extend(events.iter());
    }
    // A ring of 2 holds one: the first is mirrored, the second finds it full.
    assert!(!got[0].is_copy_failed(), "{:?}", got[0]);
    assert!(got[1].is_copy_failed(), "{:?}", got[1]);
    let mut ring = q.ring().unwrap();
    let mirrored: Vec<Key> = ring.wait(Timeout::NOW).unwrap().map(|e| e.key()).collect();
    assert_eq!(mirrored, vec![got[0].key()]);
}

#[test]
fn s3_wake_returns_an_empty_batch() {
    let q = Queue::builder().ring_size(8).build().unwrap();
    let shared = q.shared_ring().unwrap();
    std::thread::scope(|s| {
        let t = s.spawn(|| shared.wait(4, Timeout::FOREVER).unwrap().len());
        std::thread::sleep(Duration::from_millis(30));
        q.wake().unwrap();
        assert_eq!(t.join().unwrap(), 0);
    });
    assert_eq!(shared.wait(4, Timeout::NOW).unwrap().len(), 0);
}

/// 4 producer threads mark 100 000 user events ready once each; 4 consumer threads share a
/// small ring (so it wraps hundreds of times). Every id must be consumed exactly once.
#[test]
fn d13_multi_threaded_consumer_exact_accounting() {
    const N: u64 = 100_000;
    const PRODUCERS: u64 = 4;
    const CONSUMERS: usize = 4;
    let q = Queue::builder().ring_size(256).build().unwrap();
    let regs = users(&q, 0..N);
    let ring = q.shared_ring().unwrap();
    let seen: Vec<AtomicU64> = (0..N).map(|_| AtomicU64::new(0)).collect();
    let consumed = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let deadline = Instant::now() + Duration::from_secs(120);
    std::thread::scope(|s| {
        for p in 0..PRODUCERS {
            let q = &q;
            s.spawn(move || {
                let mine: Vec<Key> = (0..N)
                    .filter(|i| i % PRODUCERS == p)
                    .map(Key::user)
                    .collect();
                for chunk in mine.chunks(97) {
                    let out = q.ready(chunk).unwrap();
                    assert_eq!(out.marked, chunk.len());
                }
            });
        }
        for _ in 0..CONSUMERS {
            s.spawn(|| {
                while consumed.load(Ordering::SeqCst) < N as usize {
                    if Instant::now() > deadline {
                        failed.store(true, Ordering::SeqCst);
                        return;
                    }
                    let batch = ring.wait(64, Duration::from_millis(50)).unwrap();
                    for e in batch.iter() {
                        let id = e.key().id() as usize;
                        seen[id].fetch_add(1, Ordering::Relaxed);
                    }
                    consumed.fetch_add(batch.len(), Ordering::SeqCst);
                }
            });
        }
    });
    assert!(
        !failed.load(Ordering::SeqCst),
        "timed out at {}",
        consumed.load(Ordering::SeqCst)
    );
    assert_eq!(consumed.load(Ordering::SeqCst), N as usize);
    let wrong: Vec<usize> = seen
        .iter()
        .enumerate()
        .filter(|(_, c)| c.load(Ordering::Relaxed) != 1)
        .map(|(i, _)| i)
        .take(10)
        .collect();
    assert!(wrong.is_empty(), "ids not seen exactly once: {wrong:?}");
    assert_eq!(ring.wait(64, Timeout::NOW).unwrap().len(), 0);
    drop(ring);
    drop(regs);
}

/// Decision P65: on the fallback a `Queue` declares that it owns its fd, so its commits
/// make no proof that the number still names the queue (their only system call). Replacing
/// the fd behind the queue's back (unsafe code, here an atomic `dup2` of `/dev/null` onto
/// it) breaks I/O safety, not memory safety: the commit goes on unproven and writes only the
/// ring the `Queue` still owns (a proof would have answered `EINVAL`). The queue's drop then
/// ends the declaration before it closes the number (now `/dev/null`'s) and frees the ring.
#[test]
fn p65_fallback_queue_commits_without_a_proof_and_stays_memory_safe() {
    use std::os::fd::AsRawFd;
    let q = Queue::builder()
        .ring_size(4)
        .backend(kevent::Backend::fallback())
        .build()
        .unwrap();
    let _u = users(&q, 1..2);
    let mut ring = q.ring().unwrap();
    q.ready(&[Key::user(1)]).unwrap();
    let mut snap = ring.wait(Duration::from_secs(5)).unwrap();
    assert_eq!(snap.next().map(|e| e.key().id()), Some(1));
    let null = std::fs::File::open("/dev/null").unwrap();
    // SAFETY: plain fds; this deliberately replaces the queue's number (see above).
    let replaced = unsafe { libc::dup2(null.as_raw_fd(), q.as_raw_fd()) };
    assert_eq!(replaced, q.as_raw_fd());
    assert_eq!(snap.commit().unwrap(), 1);
}
