//! Spec section 4, delivery semantics: ONESHOT, ET, level (D7), occurrences consumed and
//! coalesced (D8 for READY marks), LAST_CHECK (and POLL carrying it), WAKEUP_ALL and the
//! default one-waiter wake-up, ALWAYS_QUEUE, REQ_READY, at most once per wait, the pollable
//! queue fd (poll, epoll, another kevent queue), and closing the queue.
#![allow(unsafe_code)]

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kevent_test_support::*;

fn recv(fd: &OwnedFd, req: u32) -> ukevent {
    on_fd(KEVENT_SOCKET, fd.as_raw_fd(), KEVENT_SOCKET_RECV, req)
}

backend_test! {
    /// ONESHOT: delivered once, then unregistered (UNOTIFY and a level socket that stays
    /// readable).
    fn s4_oneshot_delivered_once(b) {
        let q = Queue::new(b);
        let (a, peer) = socketpair();
        q.add_ok(&[user(1, KEVENT_REQ_ONESHOT), recv(&a, KEVENT_REQ_ONESHOT)]);
        q.ready_ids(&[1]);
        assert_eq!(write_fd(peer.as_raw_fd(), b"x"), 1);
        q.expect(&ms(1000), &[Want::new(KEVENT_UNOTIFY, 1), Want::of(&recv(&a, 0))]);
        q.expect_no_events();
        // Unregistered: READY does not find it, REMOVE says ENOENT, ADD succeeds again.
        let (n, _) = q.ready(&[user(1, 0)]);
        assert_eq!(n, 0);
        let back = q.ctl_in_place(KEVENT_CTL_REMOVE, &[recv(&a, 0)]);
        assert!(Want::of(&recv(&a, 0)).broken(Errno::ENOENT).matches(&back[0]));
        q.add_ok(&[user(1, KEVENT_REQ_ONESHOT)]);
    }

    /// ET: delivered when the source reports a new readiness, not again until the next one;
    /// level (D7) is delivered by every wait while the source is still ready.
    fn s4_et_vs_level_redelivery(b) {
        let q = Queue::new(b);
        let (a1, p1) = socketpair();
        let (a2, p2) = socketpair();
        let et = recv(&a1, KEVENT_REQ_ET);
        let level = recv(&a2, 0);
        q.add_ok(&[et, level]);
        q.expect_no_events();
        assert_eq!(write_fd(p1.as_raw_fd(), b"x"), 1);
        assert_eq!(write_fd(p2.as_raw_fd(), b"x"), 1);
        q.expect(&ms(1000), &[Want::of(&et), Want::of(&level)]);
        for _ in 0..3 {
            // Both still readable: only the level kevent comes again.
            q.expect(&ZERO, &[Want::of(&level)]);
        }
        // New data: a new edge.
        assert_eq!(write_fd(p1.as_raw_fd(), b"y"), 1);
        q.expect(&ms(1000), &[Want::of(&et), Want::of(&level)]);
        // Drained: neither.
        drain(a1.as_raw_fd());
        drain(a2.as_raw_fd());
        q.expect_no_events();
    }

    /// D7: level applies to every state type: SOCKET, PIPE and POLL kevents are delivered
    /// by every wait while their fd stays ready.
    fn d7_level_state_types_redelivered_while_ready(b) {
        let q = Queue::new(b);
        let (s, sp) = socketpair();
        let (r, w) = pipe();
        let efd = eventfd(1);
        let evs = [
            recv(&s, 0),
            on_fd(KEVENT_PIPE, r.as_raw_fd(), KEVENT_SOCKET_RECV, 0),
            on_fd(KEVENT_POLL, efd.as_raw_fd(), KEVENT_POLL_POLLIN, 0),
        ];
        assert_eq!(write_fd(sp.as_raw_fd(), b"x"), 1);
        assert_eq!(write_fd(w.as_raw_fd(), b"x"), 1);
        // Ready at ADD: ALWAYS_QUEUE keeps them registered.
        let mut aq = evs;
        for e in &mut aq {
            e.req_flags |= KEVENT_REQ_ALWAYS_QUEUE;
        }
        q.add_ok(&aq);
        let want: Vec<Want> = evs.iter().map(Want::of).collect();
        for _ in 0..4 {
            q.expect(&ms(1000), &want);
        }
        drain(s.as_raw_fd());
        drain(r.as_raw_fd());
        drain(efd.as_raw_fd());
        q.expect_no_events();
    }

    /// D7/D8: occurrences (READY marks) are consumed by the delivery that reports them, and
    /// marks that pile up before a delivery are coalesced into one event.
    fn d8_ready_marks_consumed_and_coalesced(b) {
        let q = Queue::new(b);
        q.add_ok(&[user(1, 0), user(2, 0)]);
        for _ in 0..5 {
            q.ready_ids(&[1]);
        }
        q.ready_ids(&[2]);
        q.expect(&ZERO, &[Want::new(KEVENT_UNOTIFY, 1), Want::new(KEVENT_UNOTIFY, 2)]);
        q.expect_no_events();
        q.ready_ids(&[2, 2]);
        q.expect(&ZERO, &[Want::new(KEVENT_UNOTIFY, 2)]);
        q.expect_no_events();
    }

    /// LAST_CHECK: readiness is re-checked just before delivery; a kevent that is no longer
    /// ready is not delivered.
    fn s4_last_check_skips_a_kevent_no_longer_ready(b) {
        let q = Queue::new(b);
        let (a1, p1) = socketpair();
        let (a2, p2) = socketpair();
        let e1 = recv(&a1, KEVENT_REQ_ET | KEVENT_REQ_LAST_CHECK);
        let e2 = recv(&a2, KEVENT_REQ_ET | KEVENT_REQ_LAST_CHECK);
        q.add_ok(&[e1, e2]);
        assert_eq!(write_fd(p1.as_raw_fd(), b"x"), 1);
        assert_eq!(write_fd(p2.as_raw_fd(), b"x"), 1);
        std::thread::sleep(Duration::from_millis(20));
        // Room for one: the other one is ready but waits.
        let got = q.get(1, &ms(1000));
        assert_eq!(got.len(), 1);
        let other = if got[0].id.as_u64() == e1.id.as_u64() { &a2 } else { &a1 };
        drain(other.as_raw_fd());
        q.expect_no_events();
    }

    /// POLL kevents always carry LAST_CHECK (the queue sets the bit): the same scenario
    /// without asking for it.
    fn s4_poll_always_carries_last_check(b) {
        let q = Queue::new(b);
        let f1 = eventfd(0);
        let f2 = eventfd(0);
        let e1 = on_fd(KEVENT_POLL, f1.as_raw_fd(), KEVENT_POLL_POLLIN, KEVENT_REQ_ET);
        let e2 = on_fd(KEVENT_POLL, f2.as_raw_fd(), KEVENT_POLL_POLLIN, KEVENT_REQ_ET);
        q.add_ok(&[e1, e2]);
        assert_eq!(write_fd(f1.as_raw_fd(), &1u64.to_ne_bytes()), 8);
        assert_eq!(write_fd(f2.as_raw_fd(), &1u64.to_ne_bytes()), 8);
        std::thread::sleep(Duration::from_millis(20));
        let got = q.get(1, &ms(1000));
        assert_eq!(got.len(), 1);
        let other = if got[0].id.as_u64() == e1.id.as_u64() { &f2 } else { &f1 };
        drain(other.as_raw_fd());
        q.expect_no_events();
    }

    /// ALWAYS_QUEUE: a socket that is ready at ADD is registered and queued instead of
    /// being returned by `kevent_ctl`; without it, it is returned (`RET_DONE`) and not
    /// registered.
    fn s4_add_of_a_ready_socket_with_and_without_always_queue(b) {
        let q = Queue::new(b);
        let (a, peer) = socketpair();
        assert_eq!(write_fd(peer.as_raw_fd(), b"x"), 1);
        // Without: returned at once, not registered.
        let plain = recv(&a, KEVENT_REQ_ONESHOT);
        let back = q.add(&[plain]);
        expect_events(&back, &[Want::of(&plain).flags(KEVENT_RET_DONE)]);
        q.expect_no_events();
        let r = q.ctl_in_place(KEVENT_CTL_REMOVE, &[plain]);
        assert!(Want::of(&plain).broken(Errno::ENOENT).matches(&r[0]));
        // With: registered and queued; delivered by the next wait.
        let mut aq = recv(&a, KEVENT_REQ_ONESHOT | KEVENT_REQ_ALWAYS_QUEUE);
        aq.set_cookie(42);
        q.add_ok(&[aq]);
        q.expect(&ZERO, &[Want::of(&aq).cookie(42)]);
        q.expect_no_events();
        // A level one with ALWAYS_QUEUE stays registered.
        let level = recv(&a, KEVENT_REQ_ALWAYS_QUEUE);
        q.add_ok(&[level]);
        q.expect(&ZERO, &[Want::of(&level)]);
        q.expect(&ZERO, &[Want::of(&level)]);
        q.remove_ok(&[level]);
    }

    /// REQ_READY: registered and queued as ready as soon as added (not returned by ADD), for
    /// an UNOTIFY and for a socket that is not ready.
    fn s4_req_ready_queues_at_add(b) {
        let q = Queue::new(b);
        let (a, _peer) = socketpair();
        let s = recv(&a, KEVENT_REQ_READY);
        q.add_ok(&[user_c(1, KEVENT_REQ_READY, 9), s]);
        q.expect(&ZERO, &[Want::new(KEVENT_UNOTIFY, 1).cookie(9), Want::of(&s)]);
        q.expect_no_events();
        q.remove_ok(&[user(1, 0), s]);
    }

    /// Each ready kevent is delivered at most once per wait, even when the wait goes on
    /// for `min_nr` (a level socket is not reported twice by one call).
    fn s4_at_most_once_per_wait(b) {
        let q = Queue::new(b);
        let (a, peer) = socketpair();
        q.add_ok(&[recv(&a, 0), user(1, 0)]);
        assert_eq!(write_fd(peer.as_raw_fd(), b"x"), 1);
        let got = q.get_events(3, 16, &ms(100), 0).expect("get_events");
        expect_events(&got, &[Want::of(&recv(&a, 0))]);
        q.ready_ids(&[1]);
        let got = q.get_events(3, 16, &ms(100), 0).expect("get_events");
        expect_events(&got, &[Want::of(&recv(&a, 0)), Want::new(KEVENT_UNOTIFY, 1)]);
    }

    /// WAKEUP_ALL: a notification wakes every waiting thread; with a level socket, each of
    /// them returns with it.
    fn s4_wakeup_all_wakes_every_waiter(b) {
        let q = Arc::new(Queue::new(b));
        let (a, peer) = socketpair();
        let e = recv(&a, KEVENT_REQ_WAKEUP_ALL);
        q.add_ok(&[e]);
        let (tx, rx) = std::sync::mpsc::channel();
        let hs: Vec<_> = (0..3)
            .map(|_| {
                let (q, tx) = (q.clone(), tx.clone());
                std::thread::spawn(move || {
                    tx.send(gettid()).unwrap();
                    q.get_events(1, 4, &FOREVER, 0)
                })
            })
            .collect();
        let tids: Vec<_> = (0..3).map(|_| rx.recv().unwrap()).collect();
        until_asleep(&tids);
        assert_eq!(write_fd(peer.as_raw_fd(), b"x"), 1);
        let results = bounded(Duration::from_secs(5), "WAKEUP_ALL waiters", move || {
            hs.into_iter().map(|h| h.join().unwrap()).collect::<Vec<_>>()
        });
        for r in results {
            expect_events(&r.expect("get_events"), &[Want::of(&e)]);
        }
    }

    /// By default one waiter is woken per newly ready kevent: of three waiters, exactly one
    /// returns with the event, promptly; the others wait out their timeout (never early).
    fn s4_default_wakes_one_waiter_per_ready_kevent(b) {
        let q = Arc::new(Queue::new(b));
        q.add_ok(&[user(1, 0)]);
        let timeout = Duration::from_millis(1500);
        let (tx, rx) = std::sync::mpsc::channel();
        let hs: Vec<_> = (0..3)
            .map(|_| {
                let (q, tx) = (q.clone(), tx.clone());
                std::thread::spawn(move || {
                    tx.send(gettid()).unwrap();
                    let start = Instant::now();
                    let r = q.get_events(1, 4, &ms(1500), 0).expect("get_events");
                    (r, start.elapsed())
                })
            })
            .collect();
        let tids: Vec<_> = (0..3).map(|_| rx.recv().unwrap()).collect();
        until_asleep(&tids);
        let marked = Instant::now();
        q.ready_ids(&[1]);
        let results = bounded(Duration::from_secs(10), "waiters", move || {
            hs.into_iter().map(|h| h.join().unwrap()).collect::<Vec<_>>()
        });
        let mut winners = 0;
        for (got, elapsed) in results {
            if got.is_empty() {
                assert!(elapsed >= timeout, "a waiter returned empty-handed after {elapsed:?}");
            } else {
                winners += 1;
                expect_events(&got, &[Want::new(KEVENT_UNOTIFY, 1)]);
            }
        }
        assert_eq!(winners, 1);
        assert!(marked.elapsed() >= Duration::from_millis(500));
    }

    /// The queue fd is pollable: POLLIN while events are ready (marks, or a watched fd that
    /// is ready) or after a READY(0) wake-up; not while nothing is.
    fn s4_queue_fd_is_pollable(b) {
        let q = Queue::new(b);
        let (a, peer) = socketpair();
        q.add_ok(&[user(1, 0), recv(&a, 0)]);
        assert_eq!(poll_now(q.fd, libc::POLLIN) & libc::POLLIN, 0);
        q.ready_ids(&[1]);
        assert_ne!(poll_now(q.fd, libc::POLLIN) & libc::POLLIN, 0);
        q.expect(&ZERO, &[Want::new(KEVENT_UNOTIFY, 1)]);
        assert_eq!(poll_now(q.fd, libc::POLLIN) & libc::POLLIN, 0);
        assert_eq!(write_fd(peer.as_raw_fd(), b"x"), 1);
        assert_ne!(poll_now(q.fd, libc::POLLIN) & libc::POLLIN, 0);
        drain(a.as_raw_fd());
        q.expect_no_events();
        assert_eq!(poll_now(q.fd, libc::POLLIN) & libc::POLLIN, 0);
        q.wake();
        assert_ne!(poll_now(q.fd, libc::POLLIN) & libc::POLLIN, 0, "after READY(0)");
    }

    /// POLLIN only *while* events are ready: once the only ready kevent is removed (and it
    /// is never delivered afterwards), the queue fd is not readable.
    fn s4_queue_fd_not_readable_after_the_ready_kevent_is_removed(b) {
        let q = Queue::new(b);
        q.add_ok(&[user(1, 0)]);
        q.ready_ids(&[1]);
        assert_ne!(poll_now(q.fd, libc::POLLIN) & libc::POLLIN, 0);
        q.remove_ok(&[user(1, 0)]);
        assert_eq!(poll_now(q.fd, libc::POLLIN) & libc::POLLIN, 0, "readable with nothing ready");
        q.expect_no_events();
    }

    /// The queue fd nests in epoll: EPOLLIN when a kevent becomes ready.
    fn s4_queue_fd_nests_in_epoll(b) {
        let q = Queue::new(b);
        q.add_ok(&[user(1, 0)]);
        // SAFETY: epoll_create1 takes no pointer.
        let ep = owned(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) }, "epoll_create1");
        let mut ev = libc::epoll_event { events: libc::EPOLLIN as u32, u64: 7 };
        // SAFETY: `ev` is a valid epoll_event for the call.
        let r = unsafe { libc::epoll_ctl(ep.as_raw_fd(), libc::EPOLL_CTL_ADD, q.fd, &mut ev) };
        assert_eq!(r, 0, "epoll_ctl: {}", std::io::Error::last_os_error());
        let mut out = [libc::epoll_event { events: 0, u64: 0 }; 4];
        // SAFETY: `out` is valid for 4 events.
        let n = unsafe { libc::epoll_wait(ep.as_raw_fd(), out.as_mut_ptr(), 4, 0) };
        assert_eq!(n, 0);
        q.ready_ids(&[1]);
        // SAFETY: as above.
        let n = unsafe { libc::epoll_wait(ep.as_raw_fd(), out.as_mut_ptr(), 4, 1000) };
        assert_eq!(n, 1);
        let (events, data) = (out[0].events, out[0].u64);
        assert_eq!(data, 7);
        assert_ne!(events & libc::EPOLLIN as u32, 0);
        q.expect(&ZERO, &[Want::new(KEVENT_UNOTIFY, 1)]);
    }

    /// The queue fd nests in another kevent queue through a POLL kevent.
    fn s4_queue_fd_nests_in_another_kevent_queue(b) {
        let inner = Queue::new(b);
        let outer = Queue::new(b);
        inner.add_ok(&[user(1, 0)]);
        let p = on_fd(KEVENT_POLL, inner.fd, KEVENT_POLL_POLLIN, 0);
        outer.add_ok(&[p]);
        outer.expect_no_events();
        inner.ready_ids(&[1]);
        outer.expect(&ms(1000), &[Want::of(&p).data0(KEVENT_POLL_POLLIN)]);
        inner.expect(&ZERO, &[Want::new(KEVENT_UNOTIFY, 1)]);
        outer.expect_no_events();
    }

    /// Closing the queue fd releases it; the ring memory is the caller's and is not written
    /// afterwards, whatever its former sources do.
    fn s4_close_leaves_the_ring_memory_untouched(b) {
        let mut q = Queue::with_ring(b, 8);
        let (a, peer) = socketpair();
        q.add_ok(&[recv(&a, 0), timer(0, 1_000_000, 0), user(1, 0)]);
        q.ready_ids(&[1]);
        let moved = q.wait(8, 0, &ms(1000)).expect("kevent_wait");
        assert!(moved >= 1);
        q.close();
        let before = q.ring_bytes_copy();
        assert_eq!(write_fd(peer.as_raw_fd(), b"x"), 1);
        std::thread::sleep(Duration::from_millis(30));
        // A new queue reuses nothing of the old one's memory.
        let q2 = Queue::with_ring(b, 8);
        q2.add_ok(&[user(1, KEVENT_REQ_READY)]);
        q2.expect(&ZERO, &[Want::new(KEVENT_UNOTIFY, 1)]);
        assert_eq!(q.ring_bytes_copy(), before, "ring memory written after close");
        // The socket can be watched by another queue as usual.
        let r = recv(&a, KEVENT_REQ_ALWAYS_QUEUE);
        q2.add_ok(&[r]);
        q2.expect(&ZERO, &[Want::of(&r)]);
    }
}

backend_test! {
    /// P5 and P8: `RET_DONE` on a delivered event says the kevent left the registry with it
    /// (ONESHOT here; BROKEN below), and an UNOTIFY delivery reports in `ret_data[0]` the
    /// READY marks coalesced into it.
    fn p5_p8_done_on_the_delivery_that_unregisters_and_marks_counted(b) {
        let q = Queue::new(b);
        q.add_ok(&[user(1, 0), user(2, KEVENT_REQ_ONESHOT)]);
        for _ in 0..3 {
            q.ready_ids(&[1, 2]);
        }
        q.expect(
            &ZERO,
            &[
                Want::new(KEVENT_UNOTIFY, 1).flags(0).data0(3),
                Want::new(KEVENT_UNOTIFY, 2).flags(KEVENT_RET_DONE).data0(3),
            ],
        );
        let (found, missing) = q.ready(&[user(1, 0), user(2, 0)]);
        assert_eq!(found, 1, "the ONESHOT kevent is gone");
        assert_eq!(missing[0].id.as_u64(), 2);
        q.expect(&ZERO, &[Want::new(KEVENT_UNOTIFY, 1).flags(0).data0(1)]);
    }

    /// P5: a BROKEN delivery always carries `RET_DONE` and unregisters the kevent, even
    /// without ONESHOT: it is reported once, never again.
    fn p5_broken_is_done_and_unregistered(b) {
        let q = Queue::new(b);
        let (r, w) = pipe();
        let e = on_fd(KEVENT_PIPE, r.as_raw_fd(), KEVENT_SOCKET_RECV, 0);
        q.add_ok(&[e]);
        drop(w);
        q.expect(
            &ms(2000),
            &[Want::of(&e).with(KEVENT_RET_BROKEN | KEVENT_RET_DONE)],
        );
        q.expect_no_events();
        assert_eq!(q.ready(&[e]).0, 0, "no longer registered");
    }
}
