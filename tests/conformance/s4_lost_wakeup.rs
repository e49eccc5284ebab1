//! Spec section 4 with several waiters on one queue: a level kevent (D7) that one waiter has
//! already delivered in its current call, while it sleeps on for `min_nr`, must stay visible
//! to the other waiters and to `poll()` of the queue fd (issue 20, finding 8: a waiter kept
//! such kevents on a private list while it slept, and a second waiter slept to its timeout
//! with an event ready). Each test makes the bad interleaving certain: the first waiter is
//! asleep, holding the level kevent, before the second one starts. The bug is a hang, so the
//! second waiter gets a generous bound (5 s) against a 30 s timeout.

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use kevent_test_support::*;

/// The timeout of every wait here: what a waiter that misses its event sleeps for.
const LONG: libc::timespec = ms(30_000);
/// How long the second waiter may take to return with the ready event.
const PROMPT: Duration = Duration::from_secs(5);

fn recv(fd: &OwnedFd, req_flags: u32) -> ukevent {
    on_fd(KEVENT_SOCKET, fd.as_raw_fd(), KEVENT_SOCKET_RECV, req_flags)
}

/// How many of `got` are of `type_`.
fn of_type(got: &[ukevent], type_: u32) -> usize {
    got.iter().filter(|e| e.type_ == type_).count()
}

/// A waiter on its own thread: `get_events(min_nr, 16, LONG)`; returns its kernel id once it
/// has started.
fn waiter(q: &Arc<Queue>, min_nr: u32) -> (JoinHandle<Vec<ukevent>>, libc::pid_t) {
    let (tx, rx) = std::sync::mpsc::channel();
    let q = q.clone();
    let h = std::thread::spawn(move || {
        tx.send(gettid()).unwrap();
        q.get_events(min_nr, 16, &LONG, 0).expect("get_events")
    });
    (h, rx.recv().unwrap())
}

/// The common start: a queue with a socket (ready; level, or edge-triggered with `REQ_ET` in
/// `req_flags`) and UNOTIFY 1, and T1 (`min_nr = 2`) asleep after delivering the socket.
struct Held {
    q: Arc<Queue>,
    a: OwnedFd,
    peer: OwnedFd,
    socket: ukevent,
    t1: JoinHandle<Vec<ukevent>>,
    tid1: libc::pid_t,
}

fn held(b: Backend, req_flags: u32) -> Held {
    let q = Arc::new(Queue::new(b));
    let (a, peer) = socketpair();
    let socket = recv(&a, req_flags);
    q.add_ok(&[socket, user(1, 0)]);
    assert_eq!(write_fd(peer.as_raw_fd(), b"x"), 1);
    let (t1, tid1) = waiter(&q, 2);
    until_asleep(&[tid1]);
    Held {
        q,
        a,
        peer,
        socket,
        t1,
        tid1,
    }
}

/// Ends the first waiter (it wants a second event: a READY mark on UNOTIFY 1) and checks what
/// it got: the level socket once (at most once per wait) and the mark.
#[track_caller]
fn finish_first(q: &Queue, t1: JoinHandle<Vec<ukevent>>, level: &ukevent) {
    q.ready_ids(&[1]);
    let got = bounded(
        PROMPT,
        "the min_nr = 2 waiter after a second event",
        move || t1.join().unwrap(),
    );
    expect_events(&got, &[Want::of(level), Want::new(KEVENT_UNOTIFY, 1)]);
}

/// What an edge test's first waiter (`first`) and a wait after it (`later`) got: the socket
/// once in the first (at most once per wait), `later_sockets` times in the later one, and
/// UNOTIFY 1's READY mark once in all.
#[track_caller]
fn expect_edge_waits(first: &[ukevent], later: &[ukevent], later_sockets: usize, why: &str) {
    assert_eq!(
        of_type(first, KEVENT_SOCKET),
        1,
        "the first wait: {first:?}"
    );
    assert_eq!(
        of_type(later, KEVENT_SOCKET),
        later_sockets,
        "{why}: {later:?}"
    );
    let marks = of_type(first, KEVENT_UNOTIFY) + of_type(later, KEVENT_UNOTIFY);
    assert_eq!(marks, 1, "{first:?} then {later:?}");
}

backend_test! {
    /// T1 (`min_nr = 2`) delivers a ready level socket and sleeps on for a second event; T2
    /// (`min_nr = 1`), started afterwards, must return with the socket at once. T1, whose
    /// socket stays ready, sleeps on (it neither takes the socket again nor spins on it).
    fn s4_level_kevent_held_by_a_sleeping_waiter_reaches_another_waiter(b) {
        let Held { q, a: _a, peer: _peer, socket: level, t1, tid1 } = held(b, 0);
        let (t2, _) = waiter(&q, 1);
        let got = bounded(PROMPT, "the min_nr = 1 waiter with a level socket ready", move || {
            t2.join().unwrap()
        });
        expect_events(&got, &[Want::of(&level)]);
        assert!(!t1.is_finished(), "the min_nr = 2 waiter returned with one event");
        until_asleep(&[tid1]);
        finish_first(&q, t1, &level);
    }

    /// T1 (`min_nr = 2`) delivers a level socket and sleeps on; the socket is drained, T2
    /// (`min_nr = 1`) goes to sleep with nothing ready; then the socket becomes readable
    /// again. T1 may not take it twice in one call, so T2 must be woken and return with it.
    fn s4_level_kevent_ready_again_while_a_waiter_holds_it_wakes_another_waiter(b) {
        let Held { q, a, peer, socket: level, t1, tid1 } = held(b, 0);
        assert_eq!(drain(a.as_raw_fd()), 1);
        let (t2, tid2) = waiter(&q, 1);
        until_asleep(&[tid1, tid2]);
        assert_eq!(write_fd(peer.as_raw_fd(), b"y"), 1);
        let got = bounded(PROMPT, "the min_nr = 1 waiter after the socket became readable", move || {
            t2.join().unwrap()
        });
        expect_events(&got, &[Want::of(&level)]);
        finish_first(&q, t1, &level);
    }

    /// While T1 (`min_nr = 2`) sleeps holding a ready level socket it has delivered, the queue
    /// fd polls readable (a poller of the queue, e.g. an epoll holding it, must see it).
    fn s4_queue_fd_readable_while_a_sleeping_waiter_holds_a_level_kevent(b) {
        let Held { q, a: _a, peer: _peer, socket: level, t1, .. } = held(b, 0);
        assert_ne!(
            poll_now(q.fd, libc::POLLIN) & libc::POLLIN,
            0,
            "queue fd not readable while a sleeping waiter holds a ready level kevent"
        );
        finish_first(&q, t1, &level);
    }
    /// One waiter: T1 (`min_nr = 2`) delivers an edge-triggered socket and sleeps on; new
    /// data arrives (a new edge) while it sleeps. The wait may not deliver the socket twice,
    /// so that edge stays queued and a later wait reports it: it is never dropped (the
    /// fallback dropped it until session 10, P18). T1 may return at the new edge with what
    /// it has (P18, the fallback) or sleep on to its second event (the kernel).
    fn s4_edge_kevent_that_fires_again_during_the_wait_that_delivered_it_stays_queued(b) {
        let Held { q, a: _a, peer, t1, .. } = held(b, KEVENT_REQ_ET);
        assert_eq!(write_fd(peer.as_raw_fd(), b"y"), 1);
        q.ready_ids(&[1]);
        let first = bounded(PROMPT, "the min_nr = 2 waiter", move || t1.join().unwrap());
        let later = q.get_events(1, 16, &ms(0), 0).expect("get_events");
        expect_edge_waits(&first, &later, 1, "the edge during the first wait was lost");
    }

    /// Two waiters: T1 (`min_nr = 2`) delivers an edge-triggered socket and sleeps on; T2
    /// (`min_nr = 1`) sleeps with nothing ready; then new data arrives (a new edge). T1 may not
    /// deliver the socket twice in one call, so T2 must be woken and return with it, whether
    /// T1 sleeps on (the kernel) or returns at the edge with what it has (P18, the fallback).
    /// Without the wake-up T2 would sleep to its 30 s timeout with an event queued. Natively
    /// this is the one test that fails when a sleeping call does not count the edge kevent it
    /// delivered as its own (`kevent_own()` made a no-op: T1 takes the wake-up and sleeps on).
    fn s4_edge_kevent_that_fires_again_while_a_waiter_holds_it_wakes_another_waiter(b) {
        let Held { q, a: _a, peer, socket: edge, t1, tid1 } = held(b, KEVENT_REQ_ET);
        let (t2, tid2) = waiter(&q, 1);
        until_asleep(&[tid1, tid2]);
        assert_eq!(write_fd(peer.as_raw_fd(), b"y"), 1);
        let second = bounded(PROMPT, "the min_nr = 1 waiter after a new edge", move || {
            t2.join().unwrap()
        });
        expect_events(&second, &[Want::of(&edge)]);
        q.ready_ids(&[1]);
        let first = bounded(PROMPT, "the min_nr = 2 waiter", move || t1.join().unwrap());
        let later = q.get_events(1, 16, &ms(0), 0).expect("get_events");
        expect_edge_waits(&first, &later, 0, "an edge T2 got was reported again");
    }
}
