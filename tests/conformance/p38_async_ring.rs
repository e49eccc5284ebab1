//! Decision P38, the asynchronous ring (`KEVENT_INIT_ASYNC_RING`), clause by clause, on every
//! backend: the layout and `kevent_init`'s limits, events in the ring with no
//! `kevent_get_events`, the full ring that parks events, `kevent_wait`'s two "at once" cases,
//! the untrusted `ring_uidx`, `kevent_get_events` refused, `POLLIN`, `kevent_commit` on the
//! tail, `fork`. The fallback's own choices (where its events enter the ring) are P41.
//!
//! A native kernel without P38 answers the flag with `EINVAL` (D1): each test then skips with
//! that reason, and fails under `KEVENT_REQUIRE_ALL=1` (`require_async_ring!`).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kevent_test_support::*;

/// Generous bound for "returned at once" (the bug would be a hang until the timeout).
const AT_ONCE: Duration = Duration::from_secs(5);

/// Registers UNOTIFY ids `ids` (cookie `10 * id`).
fn add_users(q: &Queue, ids: impl IntoIterator<Item = u64>) {
    let evs: Vec<ukevent> = ids.into_iter().map(|i| user_c(i, 0, i * 10)).collect();
    q.add_ok(&evs);
}

/// The UNOTIFY ids of `evs`, in order.
fn ids(evs: &[ukevent]) -> Vec<u64> {
    evs.iter().map(|e| e.id.as_u64()).collect()
}

/// `kevent_init` of an asynchronous ring at `ring` through the C path (`user::init`: the
/// memory is checked as the kernel checks it).
fn c_init(b: Backend, ring: *mut libc::c_void, num: u32, flags: u32) -> Result<i32, Errno> {
    // SAFETY: `ring` is null, unmapped where the test wants EFAULT, or a mapping the test
    // keeps until it closed the returned fd.
    unsafe { kevent_backend::user::init(b, ring.cast(), num, flags) }
}

backend_test! {
    /// P38 layout: `kevent_init` stores 0 in `ring_kidx`, `ring_over`, and in the tail's
    /// `ring_uidx` and `ring_resv` at offset `8 + num * 40`.
    fn p38_init_zeroes_the_header_and_the_tail(b) {
        require_async_ring!(b);
        for n in [2, 7, 64] {
            // The memory was filled with 0xa5 before kevent_init.
            let q = Queue::with_async_ring(b, n);
            assert_eq!((q.kidx(), q.over()), (0, 0), "n {n}: header");
            assert_eq!((q.ring_uidx(), q.ring_resv()), (0, 0), "n {n}: tail");
        }
    }

    /// P38 limits: `ring != NULL` and `2 <= num <= KEVENT_RING_ASYNC_MAX`, else `EINVAL`
    /// (before any memory check), and no other `kevent_init` flag (D1).
    fn p38_init_limits_are_einval(b) {
        require_async_ring!(b);
        let map = mem::AnonMap::new(ring::async_ring_bytes(64).unwrap()).unwrap();
        let mem = map.base().as_ptr().cast();
        let f = KEVENT_INIT_ASYNC_RING;
        assert_eq!(c_init(b, std::ptr::null_mut(), 0, f), Err(Errno::EINVAL), "NULL, 0");
        assert_eq!(c_init(b, std::ptr::null_mut(), 8, f), Err(Errno::EINVAL), "NULL, 8");
        assert_eq!(c_init(b, mem, 0, f), Err(Errno::EINVAL), "num 0");
        assert_eq!(c_init(b, mem, 1, f), Err(Errno::EINVAL), "num 1");
        // Far more than is mapped: the limit is checked first.
        let max = KEVENT_RING_ASYNC_MAX;
        assert_eq!(c_init(b, mem, max + 1, f), Err(Errno::EINVAL), "num MAX + 1");
        assert_eq!(c_init(b, mem, u32::MAX, f), Err(Errno::EINVAL), "num u32::MAX");
        for bad in [0x2, 0x3, 0x8000_0000, u32::MAX] {
            assert_eq!(c_init(b, mem, 8, bad), Err(Errno::EINVAL), "flags {bad:#x}");
        }
        drop(map);
        // The largest ring is accepted.
        let q = Queue::with_async_ring(b, max);
        assert_eq!(q.ring_uidx(), 0);
        assert_usable_async(&q);
    }

    /// P38: memory that is not mapped writable from end to end (the tail included) is
    /// `EFAULT`.
    fn p38_init_needs_the_tail_mapped(b) {
        require_async_ring!(b);
        let page = mem::page_size();
        let map = mem::AnonMap::new(2 * page).unwrap();
        // SAFETY: no reference into the second page exists.
        unsafe { map.protect(page, page, mem::Prot::None) }.unwrap();
        let mem = map.base().as_ptr().cast::<libc::c_void>();
        // Entries end exactly at the page end: the 8-byte tail falls on the inaccessible page.
        let n = 2;
        let ring = mem.cast::<u8>().wrapping_add(page - (8 + 40 * n as usize)).cast();
        assert_eq!(c_init(b, ring, n, KEVENT_INIT_ASYNC_RING), Err(Errno::EFAULT));
        // The same ring 8 bytes lower fits.
        let ring = mem.cast::<u8>().wrapping_add(page - (16 + 40 * n as usize)).cast();
        let fd = c_init(b, ring, n, KEVENT_INIT_ASYNC_RING).expect("a ring that fits");
        close(fd);
        // A read-only mapping.
        let ro = mem::AnonMap::new(page).unwrap();
        // SAFETY: no reference into the mapping exists.
        unsafe { ro.protect(0, page, mem::Prot::Read) }.unwrap();
        let ro_ptr = ro.base().as_ptr().cast();
        assert_eq!(c_init(b, ro_ptr, n, KEVENT_INIT_ASYNC_RING), Err(Errno::EFAULT));
    }

    /// P38: `kevent_get_events` on an asynchronous queue is `EINVAL` (its events are read from
    /// the ring), and takes nothing.
    fn p38_get_events_is_einval(b) {
        require_async_ring!(b);
        let q = Queue::with_async_ring(b, 8);
        add_users(&q, [1]);
        q.ready_ids(&[1]);
        assert_eq!(q.get_events(1, 4, &ZERO, 0).map(|v| v.len()), Err(Errno::EINVAL));
        assert_eq!(q.get_events(0, 4, &ms(20), 0).map(|v| v.len()), Err(Errno::EINVAL));
        let mut uidx = 0;
        assert_eq!(ids(&q.consume_until(&mut uidx, 1, AT_ONCE)), [1]);
    }

    /// P38 producer: a READY mark is posted into the ring as it occurs: `ring_kidx` has
    /// advanced when `kevent_ctl` returns, with no wait or get call. The consumer reads the
    /// slots and releases them by a store alone.
    fn p38_ready_marks_appear_in_the_ring_with_no_call(b) {
        require_async_ring!(b);
        let q = Queue::with_async_ring(b, 8);
        add_users(&q, 0..3);
        q.ready_ids(&[0, 1, 2]);
        assert_eq!(q.kidx(), 3, "three posted by READY");
        let mut uidx = 0;
        let got = q.consume(&mut uidx);
        expect_events(
            &got,
            &(0..3).map(|i| Want::new(KEVENT_UNOTIFY, i).cookie(i * 10)).collect::<Vec<_>>(),
        );
        assert_eq!(q.ring_uidx(), 3);
        // More events go after them, into the slots the store released (wrapping).
        for round in 0..4u64 {
            let base = 100 + round * 10;
            add_users(&q, base..base + 5);
            q.ready_ids(&(base..base + 5).collect::<Vec<_>>());
            assert_eq!(ids(&q.consume(&mut uidx)), (base..base + 5).collect::<Vec<_>>());
        }
        assert_eq!(q.ring_uidx(), (3 + 20) % 8);
    }

    /// P38: fd kevents (level and edge) and timers reach the ring through the consumer
    /// protocol (read without a call, `kevent_wait` only when empty), each once.
    fn p38_fd_and_timer_events_reach_the_consumer(b) {
        require_async_ring!(b);
        let q = Queue::with_async_ring(b, 16);
        let (r1, w1) = pipe();
        let (r2, w2) = pipe();
        use std::os::fd::AsRawFd;
        let lvl = on_fd(KEVENT_PIPE, r1.as_raw_fd(), KEVENT_SOCKET_RECV, KEVENT_REQ_ONESHOT);
        let edge = on_fd(KEVENT_PIPE, r2.as_raw_fd(), KEVENT_SOCKET_RECV, KEVENT_REQ_ET);
        let t = timer(0, 20_000_000, KEVENT_REQ_ONESHOT);
        q.add_ok(&[lvl, edge, t]);
        assert_eq!(write_fd(w1.as_raw_fd(), b"x"), 1);
        assert_eq!(write_fd(w2.as_raw_fd(), b"y"), 1);
        let mut uidx = 0;
        let got = q.consume_until(&mut uidx, 3, Duration::from_secs(10));
        expect_events(&got, &[Want::of(&lvl), Want::of(&edge), Want::of(&t)]);
        // Nothing more: a wait with a short timeout gains nothing.
        assert_eq!(q.wait(8, uidx, &ms(30)), Ok(0));
        assert_eq!(q.kidx(), uidx);
    }

    /// P38 producer, where events occur: natively an edge-triggered PIPE kevent (no
    /// LAST_CHECK) and a TIMER are posted by their wake-up, so they appear in the ring while
    /// no call runs; on the fallback they enter at its next call (P41), here the consumer's
    /// `kevent_wait`. Either way each arrives once.
    fn p38_occurrences_and_edge_events_are_posted_where_they_occur(b) {
        require_async_ring!(b);
        use std::os::fd::AsRawFd;
        let q = Queue::with_async_ring(b, 8);
        let (r, w) = pipe();
        let edge = on_fd(KEVENT_PIPE, r.as_raw_fd(), KEVENT_SOCKET_RECV, KEVENT_REQ_ET);
        let t = timer(0, 5_000_000, KEVENT_REQ_ONESHOT);
        q.add_ok(&[edge, t]);
        assert_eq!(write_fd(w.as_raw_fd(), b"z"), 1);
        let mut uidx = 0;
        let got = if b.is_native() {
            // No call at all until both are there (bounded: the bug would be a hang).
            let start = Instant::now();
            while ring::occupancy(8, q.kidx(), 0) < 2 && start.elapsed() < Duration::from_secs(5) {
                std::thread::sleep(Duration::from_millis(1));
            }
            q.consume(&mut uidx)
        } else {
            q.consume_until(&mut uidx, 2, Duration::from_secs(10))
        };
        expect_events(&got, &[Want::of(&edge), Want::of(&t)]);
    }

    /// P38 full ring: events that find no free slot stay queued (never dropped, never
    /// overwriting an unreleased slot) and enter the ring in the next `kevent_wait` that
    /// finds room; every event arrives exactly once.
    fn p38_full_ring_parks_events_and_loses_none(b) {
        require_async_ring!(b);
        let n = 4;
        let q = Queue::with_async_ring(b, n);
        add_users(&q, 0..10);
        q.ready_ids(&(0..10).collect::<Vec<_>>());
        assert_eq!(q.kidx(), n - 1, "at most n - 1 events in the ring (D12)");
        let first: Vec<u64> = (0..n - 1).map(|i| q.slot(i).id.as_u64()).collect();
        // The parked ones do not overwrite unreleased slots: a wait with the ring full
        // (old_uidx = ring_uidx = 0, ring_kidx = 3) returns at once and moves nothing.
        assert_eq!(q.wait(n - 1, 0, &ZERO), Ok(0));
        assert_eq!(first, (0..n - 1).map(|i| q.slot(i).id.as_u64()).collect::<Vec<_>>());
        let mut uidx = 0;
        let got = q.consume_until(&mut uidx, 10, Duration::from_secs(10));
        let mut seen: Vec<u64> = ids(&got);
        assert_eq!(seen.len(), 10, "{seen:?}");
        seen.sort_unstable();
        assert_eq!(seen, (0..10).collect::<Vec<_>>());
        assert_eq!(q.wait(n - 1, uidx, &ZERO), Ok(0));
    }

    /// P38 `kevent_wait`: `old_uidx != ring_uidx` (a stale view) returns 0 at once, even with
    /// an "infinite" timeout, and moves nothing.
    fn p38_wait_with_a_stale_old_uidx_returns_at_once(b) {
        require_async_ring!(b);
        let q = Arc::new(Queue::with_async_ring(b, 8));
        add_users(&q, [1]);
        for stale in [1, 5, 7] {
            let q2 = q.clone();
            let r = bounded(AT_ONCE, "kevent_wait(stale old_uidx)", move || {
                q2.wait(4, stale, &FOREVER)
            });
            assert_eq!(r, Ok(0), "old_uidx {stale}");
        }
        assert_eq!(q.kidx(), 0);
    }

    /// P38 `kevent_wait`: `old_uidx == ring_uidx` but `!= ring_kidx` (unread events in the
    /// ring: the race between "looks empty" and sleeping) returns 0 at once.
    fn p38_wait_with_unread_events_returns_at_once(b) {
        require_async_ring!(b);
        let q = Arc::new(Queue::with_async_ring(b, 8));
        add_users(&q, [1, 2]);
        q.ready_ids(&[1, 2]);
        assert_eq!((q.ring_uidx(), q.kidx()), (0, 2));
        let q2 = q.clone();
        let r = bounded(AT_ONCE, "kevent_wait(unread events)", move || q2.wait(4, 0, &FOREVER));
        assert_eq!(r, Ok(0));
        assert_eq!(q.kidx(), 2, "nothing moved");
    }

    /// P38 `kevent_wait`: with the ring empty and nothing queued it sleeps until an event is
    /// posted, then returns how many the ring gained.
    fn p38_wait_sleeps_until_an_event_is_posted(b) {
        require_async_ring!(b);
        let q = Arc::new(Queue::with_async_ring(b, 8));
        add_users(&q, [1]);
        let (tx, rx) = std::sync::mpsc::channel();
        let q2 = q.clone();
        let h = std::thread::spawn(move || {
            tx.send(gettid()).unwrap();
            q2.wait(4, 0, &FOREVER)
        });
        until_asleep(&[rx.recv().unwrap()]);
        assert_eq!(q.kidx(), 0, "nothing posted yet");
        q.ready_ids(&[1]);
        let r = bounded(Duration::from_secs(10), "the woken kevent_wait", move || {
            h.join().unwrap()
        });
        assert_eq!(r, Ok(1));
        assert_eq!(q.kidx(), 1);
        assert_eq!(q.slot(0).id.as_u64(), 1);
        // READY(0) wakes a sleeping wait too, with nothing gained.
        let mut uidx = 0;
        q.consume(&mut uidx);
        let (tx, rx) = std::sync::mpsc::channel();
        let q2 = q.clone();
        let h = std::thread::spawn(move || {
            tx.send(gettid()).unwrap();
            q2.wait(4, 1, &FOREVER)
        });
        until_asleep(&[rx.recv().unwrap()]);
        q.wake();
        let r = bounded(Duration::from_secs(10), "kevent_wait after READY(0)", move || {
            h.join().unwrap()
        });
        assert_eq!(r, Ok(0));
    }

    /// P38: `num` above the ring size is `EINVAL`, as before.
    fn p38_wait_num_above_the_ring_is_einval(b) {
        require_async_ring!(b);
        let q = Queue::with_async_ring(b, 8);
        assert_eq!(q.wait(9, 0, &ZERO), Err(Errno::EINVAL));
        assert_eq!(q.wait(u32::MAX, 0, &ZERO), Err(Errno::EINVAL));
        assert_eq!(q.wait(8, 0, &ZERO), Ok(0));
    }

    /// P38 untrusted `ring_uidx`: a value `>= num` posts nothing (the ring counts as full)
    /// and makes `kevent_wait` and `kevent_commit` `EINVAL`; nothing is written outside the
    /// ring. A good value afterwards lets the parked events in.
    fn p38_bad_ring_uidx_posts_nothing_and_is_einval(b) {
        require_async_ring!(b);
        let n = 8;
        let q = Queue::with_async_ring(b, n);
        add_users(&q, 0..4);
        for bad in [n, n + 1, u32::MAX] {
            q.store_uidx(bad);
            assert_eq!(q.wait(4, bad, &ZERO), Err(Errno::EINVAL), "ring_uidx {bad}");
            assert_eq!(q.wait(4, 0, &ms(10)), Err(Errno::EINVAL), "ring_uidx {bad}");
            assert_eq!(q.commit(0, 0), Err(Errno::EINVAL), "ring_uidx {bad}");
            q.ready_ids(&[0, 1]);
            assert_eq!(q.kidx(), 0, "ring_uidx {bad}: posted into a ring that counts as full");
            assert_eq!(q.ring_uidx(), bad, "the queue does not repair the consumer's index");
        }
        // Back to a good index: the parked events enter (through a wait).
        q.store_uidx(0);
        let mut uidx = 0;
        let got = q.consume_until(&mut uidx, 2, Duration::from_secs(10));
        let mut seen = ids(&got);
        seen.sort_unstable();
        assert_eq!(seen, [0, 1]);
        q.ready_ids(&[2, 3]);
        let mut all = q.consume_until(&mut uidx, 2, Duration::from_secs(10));
        all.extend(q.consume(&mut uidx));
        let mut seen = ids(&all);
        seen.sort_unstable();
        assert_eq!(seen, [2, 3]);
        assert_usable_async(&q);
    }

    /// P38: polling the queue fd gives `POLLIN` while the ring holds unread events or events
    /// wait in the queue; not once the consumer released them (seen by the queue at its next
    /// call, P41) and nothing waits.
    fn p38_poll_pollin_follows_the_ring(b) {
        require_async_ring!(b);
        let n = 4;
        let q = Queue::with_async_ring(b, n);
        let pollin = |q: &Queue| poll_now(q.fd, libc::POLLIN) & libc::POLLIN != 0;
        assert!(!pollin(&q), "empty");
        add_users(&q, 0..6);
        q.ready_ids(&[0]);
        assert!(pollin(&q), "one unread event in the ring");
        let mut uidx = 0;
        assert_eq!(ids(&q.consume(&mut uidx)), [0]);
        assert_eq!(q.wait(n - 1, uidx, &ZERO), Ok(0));
        assert!(!pollin(&q), "released and nothing queued");
        // Ring full and more parked: readable; still readable with only the parked ones.
        q.ready_ids(&[1, 2, 3, 4, 5]);
        assert!(pollin(&q), "full ring and parked events");
        let mut all = q.consume(&mut uidx);
        assert_eq!(all.len(), (n - 1) as usize);
        assert!(pollin(&q), "events wait in the queue");
        all.extend(q.consume_until(&mut uidx, 5 - all.len(), Duration::from_secs(10)));
        let mut seen = ids(&all);
        seen.sort_unstable();
        assert_eq!(seen, [1, 2, 3, 4, 5]);
        assert_eq!(q.wait(n - 1, uidx, &ZERO), Ok(0));
        assert!(!pollin(&q), "all read and released");
    }

    /// P38 `kevent_commit` keeps D13 for consumers that share the ring: the consumer index is
    /// the tail's `ring_uidx`, the result is stored there (and `ring_over` on a wrap); a stale
    /// commit changes nothing; `new_uidx >= n` is `EINVAL`.
    fn p38_commit_uses_and_stores_the_tail(b) {
        require_async_ring!(b);
        let n = 4;
        let q = Queue::with_async_ring(b, n);
        add_users(&q, 0..20);
        assert_eq!(q.commit(n, 0), Err(Errno::EINVAL));
        q.ready_ids(&[0, 1]);
        assert_eq!(q.kidx(), 2);
        assert_eq!(q.commit(1, 0), Ok(1));
        assert_eq!(q.ring_uidx(), 1);
        assert_eq!(q.commit(1, 0), Ok(0), "stale");
        assert_eq!(q.commit(0, 0), Ok(0), "behind: stale");
        assert_eq!(q.commit(2, 0), Ok(1));
        assert_eq!(q.ring_uidx(), 2);
        // Fill and commit across the end of the array: ring_over counts the wrap.
        q.ready_ids(&[2, 3, 4]);
        assert_eq!(q.kidx(), 1, "slots 2, 3, 0");
        let over = q.over();
        assert_eq!(q.commit(1, over), Ok(3));
        assert_eq!((q.ring_uidx(), q.over()), (1, over.wrapping_add(1)));
        assert_eq!(q.commit(1, over.wrapping_sub(1)), Err(Errno::EOVERFLOW));
        // A consumer's store and a commit mix: the commit starts from the stored index.
        q.ready_ids(&[5, 6]);
        assert_eq!(q.kidx(), 3);
        q.store_uidx(2);
        assert_eq!(q.commit(3, q.over()), Ok(1));
        assert_eq!(q.ring_uidx(), 3);
    }

    /// P38 with several consumers sharing the ring through `kevent_commit` (D13) and threads
    /// marking events: every event is read exactly once.
    fn p38_shared_consumers_commit_and_lose_nothing(b) {
        require_async_ring!(b);
        let n = 8;
        let total = 400u64;
        let q = Arc::new(Queue::with_async_ring(b, n));
        add_users(&q, 0..total);
        let producer = {
            let q = q.clone();
            std::thread::spawn(move || {
                for i in 0..total {
                    q.ready_ids(&[i]);
                }
            })
        };
        // One lock stands for "consumers that share the ring coordinate their reads"; each
        // releases with kevent_commit.
        let shared = Arc::new(std::sync::Mutex::new((0u32, Vec::<u64>::new())));
        let consumers: Vec<_> = (0..3)
            .map(|_| {
                let (q, shared) = (q.clone(), shared.clone());
                std::thread::spawn(move || {
                    let start = Instant::now();
                    loop {
                        let mut s = shared.lock().unwrap();
                        if s.1.len() as u64 >= total || start.elapsed() > Duration::from_secs(20) {
                            return;
                        }
                        let over = q.over();
                        let kidx = q.kidx();
                        let k = ring::occupancy(n, kidx, s.0);
                        for i in 0..k {
                            let e = q.slot(ring::advance(n, s.0, i));
                            s.1.push(e.id.as_u64());
                        }
                        if k > 0 {
                            s.0 = kidx;
                            assert_eq!(q.commit(kidx, over), Ok(k), "commit of what was read");
                            continue;
                        }
                        let old = s.0;
                        drop(s);
                        q.wait(n - 1, old, &ms(20)).expect("kevent_wait");
                    }
                })
            })
            .collect();
        producer.join().unwrap();
        for c in consumers {
            c.join().unwrap();
        }
        let got = &shared.lock().unwrap().1;
        let set: BTreeSet<u64> = got.iter().copied().collect();
        assert_eq!(got.len(), set.len(), "an event read twice");
        assert_eq!(set, (0..total).collect::<BTreeSet<_>>());
    }
}

isolated_test! {
    /// P38 + spec section 3: once the queue fd is closed, every call on the number is
    /// `EBADF` before any other check (`kevent_get_events`' EINVAL, a stale `old_uidx`).
    /// In a child process, so that no other test takes the number meanwhile.
    fn p38_closed_async_queue_is_ebadf_first(b) {
        require_async_ring!(b);
        let mut q = Queue::with_async_ring(b, 8);
        add_users(&q, [1]);
        q.ready_ids(&[1]);
        let fd = q.fd;
        q.close();
        let mut buf = [ukevent::default(); 4];
        assert_eq!(b.get_events(fd, 1, &mut buf, &ZERO, 0), Err(Errno::EBADF));
        assert_eq!(b.wait(fd, 1, 1, &ZERO, 0), Err(Errno::EBADF));
        assert_eq!(b.wait(fd, 1, 0, &ZERO, 0), Err(Errno::EBADF));
        assert_eq!(b.commit(fd, 1, 0), Err(Errno::EBADF));
        let mut e = [user(1, 0)];
        assert_eq!(b.ctl(fd, KEVENT_CTL_READY, &mut e), Err(Errno::EBADF));
    }

    /// P38 + D11: after `fork()` the child's copy of an asynchronous queue fd is `EBADF` on
    /// every call, and the parent's ring goes on working.
    fn p38_fork_child_gets_ebadf(b) {
        require_async_ring!(b);
        let q = Queue::with_async_ring(b, 8);
        add_users(&q, [1, 2]);
        q.ready_ids(&[1]);
        let fd = q.fd;
        // The child holds copies of our fds until it exits (`forks`).
        let forking = forks::forking();
        // SAFETY: the child makes only the calls below and leaves with `_exit`.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork");
        if pid == 0 {
            let mut fail = 0;
            if b.wait(fd, 1, 1, &ts(2, 0), 0) != Err(Errno::EBADF) {
                fail |= 1;
            }
            if b.wait(fd, 1, 0, &ts(2, 0), 0) != Err(Errno::EBADF) {
                fail |= 2;
            }
            if b.commit(fd, 1, 0) != Err(Errno::EBADF) {
                fail |= 4;
            }
            let mut e = [user(2, 0)];
            if b.ctl(fd, KEVENT_CTL_READY, &mut e) != Err(Errno::EBADF) {
                fail |= 8;
            }
            // SAFETY: `_exit` ends the child without running the parent's destructors.
            unsafe { libc::_exit(fail) };
        }
        let mut status = 0;
        let waited = bounded(Duration::from_secs(30), "the forked child", move || {
            // SAFETY: `status` is a local int; `pid` is our child.
            let r = unsafe { libc::waitpid(pid, &mut status, 0) };
            (r, status)
        });
        drop(forking);
        assert_eq!(waited.0, pid);
        assert!(libc::WIFEXITED(waited.1), "child status {:#x}", waited.1);
        assert_eq!(libc::WEXITSTATUS(waited.1), 0, "failed child checks (bitmask)");
        q.ready_ids(&[2]);
        let mut uidx = 0;
        let got = q.consume_until(&mut uidx, 2, Duration::from_secs(10));
        assert_eq!(ids(&got), [1, 2]);
    }
}

/// A probe that an asynchronous queue still works: an UNOTIFY kevent added, marked READY,
/// read from the ring exactly once and removed again.
#[track_caller]
fn assert_usable_async(q: &Queue) {
    const PROBE: u64 = 0xdead_beef_0000_0002;
    q.add_ok(&[user(PROBE, 0)]);
    q.ready_ids(&[PROBE]);
    let mut uidx = q.ring_uidx();
    let got = q.consume_until(&mut uidx, 1, Duration::from_secs(10));
    assert_eq!(ids(&got), [PROBE]);
    q.remove_ok(&[user(PROBE, 0)]);
    assert_eq!(q.wait(1, uidx, &ZERO), Ok(0));
    assert_eq!(q.kidx(), uidx);
}
