//! D17 and the LAST_CHECK paragraph of spec section 4: MODIFY of a state kevent (SOCKET,
//! PIPE, POLL) re-evaluates its source under the new mask as `EPOLL_CTL_MOD` does (ready
//! now: queued, in ET mode as one new edge; not ready: nothing of it stays queued), and with
//! LAST_CHECK a delivered state event reports what its source has at delivery on every path
//! that queued it (ALWAYS_QUEUE at ADD, REQ_READY, READY, MODIFY, the source's own
//! notification): never a stale or empty mask (for POLL, `ret_data[0] != 0`). Decision P6
//! (`docs/decisions.md`): what a READY mark does to a state kevent that is not ready.
//!
//! The `d17_issue15_*` tests are the two minimal sequences of issue 15 on which the fallback
//! disagreed with epoll; each also runs the same steps on a real epoll and compares. Every
//! scenario is taken both with `kevent_get_events` and through the ring (`kevent_wait`).
#![allow(unsafe_code)]

use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use kevent_test_support::*;

/// How a test takes events.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Via {
    GetEvents,
    Ring,
}

const VIAS: [Via; 2] = [Via::GetEvents, Via::Ring];

/// A queue for `via` (with a ring of 16 for [`Via::Ring`]).
fn queue(b: Backend, via: Via) -> Queue {
    match via {
        Via::GetEvents => Queue::new(b),
        Via::Ring => Queue::with_ring(b, 16),
    }
}

/// Takes what is ready without blocking: one `kevent_get_events`, or one `kevent_wait`
/// followed by reading the new slots and committing them (the ring is always fully
/// committed between calls, so the consumer index is `ring_kidx`).
#[track_caller]
fn take(q: &Queue, via: Via) -> Vec<ukevent> {
    match via {
        Via::GetEvents => q.get(16, &ZERO),
        Via::Ring => {
            let n = q.ring_size();
            let k0 = q.kidx();
            let over = q.over();
            let got = q.wait(n - 1, k0, &ZERO).expect("kevent_wait");
            assert!(got < n, "kevent_wait returned {got}");
            let evs: Vec<ukevent> = (0..got).map(|i| q.slot((k0 + i) % n)).collect();
            assert_eq!(q.kidx(), (k0 + got) % n, "ring_kidx after kevent_wait");
            assert_eq!(q.commit((k0 + got) % n, over), Ok(got), "kevent_commit");
            evs
        }
    }
}

#[track_caller]
fn expect(q: &Queue, via: Via, want: &[Want]) -> Vec<ukevent> {
    let got = take(q, via);
    expect_events(&got, want);
    got
}

/// A real epoll watching one fd, to compare with (the epoll-over-kevent mapping of issue 15:
/// POLL kevents with `ALWAYS_QUEUE | LAST_CHECK`, `EPOLLET` as `KEVENT_REQ_ET`).
struct Epoll {
    ep: OwnedFd,
    fd: RawFd,
}

impl Epoll {
    fn new(fd: RawFd, events: u32) -> Epoll {
        // SAFETY: epoll_create1 takes no pointer.
        let ep = owned(
            unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) },
            "epoll_create1",
        );
        let e = Epoll { ep, fd };
        e.ctl(libc::EPOLL_CTL_ADD, events);
        e
    }

    fn ctl(&self, op: libc::c_int, events: u32) {
        let mut ev = libc::epoll_event {
            events,
            u64: self.fd as u64,
        };
        // SAFETY: `ev` is a valid epoll_event for the call.
        let r = unsafe { libc::epoll_ctl(self.ep.as_raw_fd(), op, self.fd, &mut ev) };
        assert_eq!(r, 0, "epoll_ctl: {}", std::io::Error::last_os_error());
    }

    fn modify(&self, events: u32) {
        self.ctl(libc::EPOLL_CTL_MOD, events);
    }

    /// What a zero-timeout `epoll_wait` reports for the fd (`None`: nothing).
    fn wait(&self) -> Option<u32> {
        let mut evs = [libc::epoll_event { events: 0, u64: 0 }; 4];
        // SAFETY: `evs` is valid for writes of 4 events.
        let n = unsafe { libc::epoll_wait(self.ep.as_raw_fd(), evs.as_mut_ptr(), 4, 0) };
        assert!((0..=1).contains(&n), "epoll_wait: {n}");
        (n == 1).then_some(evs[0].events)
    }
}

const IN: u32 = KEVENT_POLL_POLLIN;
const OUT: u32 = KEVENT_POLL_POLLOUT;
const ERR_HUP: u32 = KEVENT_POLL_POLLERR | KEVENT_POLL_POLLHUP;
const E_IN: u32 = libc::EPOLLIN as u32;
const E_OUT: u32 = libc::EPOLLOUT as u32;
const E_ERR_HUP: u32 = (libc::EPOLLERR | libc::EPOLLHUP) as u32;
const E_ET: u32 = libc::EPOLLET as u32;

/// Writes to `fd` until the kernel says EAGAIN: its send buffer (an AF_UNIX stream: the
/// peer's receive queue) is full, so it is no longer writable.
fn fill(fd: RawFd) {
    let chunk = [0x5au8; 4096];
    let mut total = 0usize;
    loop {
        let n = write_fd(fd, &chunk);
        if n < 0 {
            let e = std::io::Error::last_os_error();
            assert_eq!(e.raw_os_error(), Some(libc::EAGAIN), "write: {e}");
            break;
        }
        total += n as usize;
        assert!(total < 64 << 20, "the socket never filled up");
    }
}

/// A POLL kevent's delivery as wanted: `ret_data[0]` exactly `bits` (never 0).
fn poll_want(fd: RawFd, bits: u32) -> Want {
    assert_ne!(bits, 0);
    Want::new(KEVENT_POLL, fd as u64).data0(bits)
}

backend_test! {
    /// Issue 15, sequence 1: with data waiting at the peer, a POLL kevent for
    /// `POLLOUT|POLLERR|POLLHUP`, `ET|ALWAYS_QUEUE|LAST_CHECK`, is queued at ADD (writable);
    /// MODIFY to `POLLIN|POLLERR|POLLHUP`, level. The next wait must report `POLLIN`, as
    /// epoll does, never the stale entry masked to nothing (`ret_data[0] == 0`).
    fn d17_issue15_modify_of_a_queued_poll_kevent_reports_the_new_mask(b) {
        for via in VIAS {
            let q = queue(b, via);
            let (a, peer) = socketpair();
            let fd = a.as_raw_fd();
            assert_eq!(write_fd(peer.as_raw_fd(), &[7u8; 2165]), 2165);
            let ep = Epoll::new(fd, E_OUT | E_ERR_HUP | E_ET);
            let e = on_fd(KEVENT_POLL, fd, OUT | ERR_HUP, KEVENT_REQ_ET | KEVENT_REQ_ALWAYS_QUEUE | KEVENT_REQ_LAST_CHECK);
            q.add_ok(&[e]);
            ep.modify(E_IN | E_ERR_HUP);
            let m = on_fd(KEVENT_POLL, fd, IN | ERR_HUP, 0);
            let back = q.ctl_in_place(KEVENT_CTL_MODIFY, &[m]);
            assert!(Want::of(&m).flags(KEVENT_RET_DONE).matches(&back[0]), "{back:?}");
            assert_eq!(ep.wait(), Some(E_IN), "epoll, the reference");
            expect(&q, via, &[poll_want(fd, IN)]);
            // Level: again while the data is there, like epoll.
            assert_eq!(ep.wait(), Some(E_IN));
            expect(&q, via, &[poll_want(fd, IN)]);
            drain(fd);
            assert_eq!(ep.wait(), None);
            expect(&q, via, &[]);
        }
    }

    /// Issue 15, sequence 2: a POLL kevent for `POLLIN|POLLOUT`, level, ALWAYS_QUEUE, is
    /// queued at ADD as writable; then the socket's send buffer is filled until EAGAIN and
    /// `poll()` reports nothing. The next wait must deliver nothing, as epoll: LAST_CHECK
    /// (which POLL always carries) applies to what ADD queued.
    fn d17_issue15_always_queue_entry_no_longer_ready_is_not_delivered(b) {
        for via in VIAS {
            let q = queue(b, via);
            let (a, _peer) = socketpair();
            let fd = a.as_raw_fd();
            let ep = Epoll::new(fd, E_IN | E_OUT);
            let e = on_fd(KEVENT_POLL, fd, IN | OUT, KEVENT_REQ_ALWAYS_QUEUE);
            q.add_ok(&[e]);
            fill(fd);
            assert_eq!(poll_now(fd, libc::POLLIN | libc::POLLOUT), 0, "the socket is still ready");
            assert_eq!(ep.wait(), None, "epoll, the reference");
            expect(&q, via, &[]);
            expect(&q, via, &[]);
        }
    }

    /// D17: MODIFY to a mask the source is ready for queues the kevent: level, it is then
    /// delivered by every wait; ET, exactly once (one new edge per MODIFY, as
    /// `EPOLL_CTL_MOD` re-arms an edge). Compared with epoll step by step.
    fn d17_modify_to_a_ready_mask_queues_it_level_and_et(b) {
        for via in VIAS {
            let q = queue(b, via);
            let efd = eventfd(0); // writable, not readable
            let fd = efd.as_raw_fd();
            let ep = Epoll::new(fd, E_IN);
            q.add_ok(&[on_fd(KEVENT_POLL, fd, IN, 0)]);
            assert_eq!(ep.wait(), None);
            expect(&q, via, &[]);
            let steps: [(u32, u32, u32, u32); 4] = [
                // (kevent mask, req, epoll events, expected bits per wait)
                (OUT, 0, E_OUT, OUT),
                (OUT, KEVENT_REQ_ET, E_OUT | E_ET, OUT),
                (IN | OUT, KEVENT_REQ_ET, E_IN | E_OUT | E_ET, OUT),
                (IN, KEVENT_REQ_ET, E_IN | E_ET, 0),
            ];
            for (mask, req, events, bits) in steps {
                ep.modify(events);
                q.ctl_in_place(KEVENT_CTL_MODIFY, &[on_fd(KEVENT_POLL, fd, mask, req)]);
                let edge = req & KEVENT_REQ_ET != 0;
                for round in 0..3 {
                    let want_now = bits != 0 && (!edge || round == 0);
                    let reference = ep.wait();
                    assert_eq!(reference, want_now.then_some(bits), "epoll: mask {mask:#x} req {req:#x} round {round}");
                    let want: Vec<Want> = if want_now { vec![poll_want(fd, bits)] } else { vec![] };
                    expect(&q, via, &want);
                }
            }
        }
    }

    /// D17: MODIFY to a mask the source is not ready for leaves nothing of the kevent
    /// queued: not readiness the queue held from before (a level SOCKET left over by a full
    /// buffer, then drained; no LAST_CHECK, which would hide it anyway), not a READY mark
    /// (which without LAST_CHECK is otherwise delivered, decision P6).
    fn d17_modify_to_a_mask_not_ready_drops_what_was_queued(b) {
        for via in VIAS {
            let q = queue(b, via);
            let (a1, p1) = socketpair();
            let (a2, p2) = socketpair();
            let e1 = on_fd(KEVENT_SOCKET, a1.as_raw_fd(), KEVENT_SOCKET_RECV, 0);
            let e2 = on_fd(KEVENT_SOCKET, a2.as_raw_fd(), KEVENT_SOCKET_RECV, 0);
            q.add_ok(&[e1, e2]);
            assert_eq!(write_fd(p1.as_raw_fd(), b"x"), 1);
            assert_eq!(write_fd(p2.as_raw_fd(), b"x"), 1);
            // Room for one: the other stays queued.
            let got = match via {
                Via::GetEvents => q.get(1, &ms(1000)),
                Via::Ring => {
                    assert_eq!(q.wait(1, 0, &ms(1000)), Ok(1));
                    assert_eq!(q.commit(1, q.over()), Ok(1));
                    vec![q.slot(0)]
                }
            };
            assert_eq!(got.len(), 1);
            let (kept, kept_fd, other, other_fd) = if got[0].id.as_u64() == e1.id.as_u64() {
                (e1, &a1, e2, &a2)
            } else {
                (e2, &a2, e1, &a1)
            };
            drain(other_fd.as_raw_fd());
            q.ctl_in_place(KEVENT_CTL_MODIFY, &[other]);
            // Only the kevent that still has data (level) comes again.
            expect(&q, via, &[Want::of(&kept).data0(KEVENT_SOCKET_RECV)]);
            drain(kept_fd.as_raw_fd());
            expect(&q, via, &[]);
            // A READY mark, then MODIFY while not ready: dropped.
            let (n, _) = q.ready(&[other]);
            assert_eq!(n, 1);
            q.ctl_in_place(KEVENT_CTL_MODIFY, &[other]);
            expect(&q, via, &[]);
            // Still registered: the next data is delivered.
            assert_eq!(write_fd(p1.as_raw_fd(), b"y"), 1);
            assert_eq!(write_fd(p2.as_raw_fd(), b"y"), 1);
            expect(&q, via, &[Want::of(&e1).data0(KEVENT_SOCKET_RECV), Want::of(&e2).data0(KEVENT_SOCKET_RECV)]);
        }
    }

    /// Section 4, LAST_CHECK on every path: a SOCKET and a PIPE kevent with LAST_CHECK that
    /// ALWAYS_QUEUE queued at ADD (ready then) and that are no longer ready at the wait are
    /// not delivered; while they stay ready they report what they have at delivery.
    fn s4_last_check_applies_to_what_always_queue_queued(b) {
        for via in VIAS {
            let q = queue(b, via);
            let (a, peer) = socketpair();
            let (r, w) = pipe();
            assert_eq!(write_fd(peer.as_raw_fd(), b"x"), 1);
            assert_eq!(write_fd(w.as_raw_fd(), b"x"), 1);
            let req = KEVENT_REQ_ALWAYS_QUEUE | KEVENT_REQ_LAST_CHECK;
            let s = on_fd(KEVENT_SOCKET, a.as_raw_fd(), KEVENT_SOCKET_RECV, req);
            let p = on_fd(KEVENT_PIPE, r.as_raw_fd(), KEVENT_SOCKET_RECV, req);
            q.add_ok(&[s, p]);
            drain(a.as_raw_fd());
            drain(r.as_raw_fd());
            expect(&q, via, &[]);
            // ET as well: a new edge is delivered once, the drained one never.
            let (a2, peer2) = socketpair();
            assert_eq!(write_fd(peer2.as_raw_fd(), b"x"), 1);
            let et = on_fd(KEVENT_SOCKET, a2.as_raw_fd(), KEVENT_SOCKET_RECV, req | KEVENT_REQ_ET);
            q.add_ok(&[et]);
            expect(&q, via, &[Want::of(&et).data0(KEVENT_SOCKET_RECV)]);
            expect(&q, via, &[]);
            q.remove_ok(&[s, p, et]);
        }
    }

    /// Decision P6 with LAST_CHECK (POLL always has it): a READY mark, or REQ_READY at ADD,
    /// on a state kevent whose source is not ready at delivery is not delivered, and is
    /// consumed; the kevent stays registered and its source's next readiness is delivered,
    /// with what the source has then.
    fn p6_ready_mark_on_a_state_kevent_not_ready_with_last_check_is_not_delivered(b) {
        for via in VIAS {
            let q = queue(b, via);
            let (a, peer) = socketpair();
            let efd = eventfd(0);
            let s = on_fd(KEVENT_SOCKET, a.as_raw_fd(), KEVENT_SOCKET_RECV, KEVENT_REQ_LAST_CHECK);
            let pl = on_fd(KEVENT_POLL, efd.as_raw_fd(), IN, 0);
            let (a2, peer2) = socketpair();
            let s2 = on_fd(KEVENT_SOCKET, a2.as_raw_fd(), KEVENT_SOCKET_RECV, KEVENT_REQ_LAST_CHECK | KEVENT_REQ_READY);
            q.add_ok(&[s, pl, s2]);
            expect(&q, via, &[]);
            let (n, _) = q.ready(&[s, pl, s2]);
            assert_eq!(n, 3);
            expect(&q, via, &[]);
            expect(&q, via, &[]);
            // Marked and ready at delivery: delivered with the source's bits.
            assert_eq!(write_fd(peer.as_raw_fd(), b"x"), 1);
            assert_eq!(write_fd(efd.as_raw_fd(), &1u64.to_ne_bytes()), 8);
            let (n, _) = q.ready(&[s, pl]);
            assert_eq!(n, 2);
            expect(&q, via, &[Want::of(&s).data0(KEVENT_SOCKET_RECV), poll_want(efd.as_raw_fd(), IN)]);
            drain(a.as_raw_fd());
            drain(efd.as_raw_fd());
            expect(&q, via, &[]);
            // The source's own readiness still reaches the kevents the marks missed.
            assert_eq!(write_fd(peer2.as_raw_fd(), b"x"), 1);
            expect(&q, via, &[Want::of(&s2).data0(KEVENT_SOCKET_RECV)]);
            q.remove_ok(&[s, pl, s2]);
        }
    }

    /// Decision P6 without LAST_CHECK: a READY mark (or REQ_READY) on a SOCKET or PIPE
    /// kevent whose source is not ready is an occurrence: delivered once, with
    /// `ret_data[0] == 0` (what the source has: nothing), and not again.
    fn p6_ready_mark_on_a_state_kevent_without_last_check_is_delivered_once(b) {
        for via in VIAS {
            let q = queue(b, via);
            let (a, _peer) = socketpair();
            let (r, _w) = pipe();
            let s = on_fd(KEVENT_SOCKET, a.as_raw_fd(), KEVENT_SOCKET_RECV, 0);
            let p = on_fd(KEVENT_PIPE, r.as_raw_fd(), KEVENT_SOCKET_RECV, KEVENT_REQ_READY);
            q.add_ok(&[s, p]);
            expect(&q, via, &[Want::of(&p).data0(0)]);
            expect(&q, via, &[]);
            let (n, _) = q.ready(&[s, p]);
            assert_eq!(n, 2);
            expect(&q, via, &[Want::of(&s).data0(0), Want::of(&p).data0(0)]);
            expect(&q, via, &[]);
            q.remove_ok(&[s, p]);
        }
    }
}

/// Issue 15's two sequences through the C library's exported functions, on the process's
/// backend (the fallback on a stock kernel).
#[test]
fn d17_issue15_sequences_through_the_c_library() {
    use kevent_c::capi::calls::{kevent_ctl, kevent_get_events, kevent_init};
    let get = |q: i32| -> Vec<ukevent> {
        let mut buf = [ukevent::default(); 8];
        // SAFETY: `buf` is valid for writes of 8 entries.
        let n = unsafe { kevent_get_events(q, 0, 8, ZERO, buf.as_mut_ptr(), 0) };
        assert!(
            n >= 0,
            "kevent_get_events: {}",
            std::io::Error::last_os_error()
        );
        buf[..n as usize].to_vec()
    };
    let ctl = |q: i32, cmd: u32, e: &mut ukevent| {
        // SAFETY: `e` is one valid entry, readable and writable.
        let r = unsafe { kevent_ctl(q, cmd, 1, e) };
        assert_eq!(
            r,
            0,
            "kevent_ctl({cmd}): {}",
            std::io::Error::last_os_error()
        );
        assert_eq!(e.ret_flags & KEVENT_RET_BROKEN, 0, "{e:?}");
    };
    // SAFETY: no ring.
    let q = unsafe { kevent_init(std::ptr::null_mut(), 0, 0) };
    assert!(q >= 0, "kevent_init: {}", std::io::Error::last_os_error());

    // Sequence 1.
    let (a, peer) = socketpair();
    let fd = a.as_raw_fd();
    assert_eq!(write_fd(peer.as_raw_fd(), &[7u8; 2165]), 2165);
    let mut e = on_fd(
        KEVENT_POLL,
        fd,
        OUT | ERR_HUP,
        KEVENT_REQ_ET | KEVENT_REQ_ALWAYS_QUEUE | KEVENT_REQ_LAST_CHECK,
    );
    ctl(q, KEVENT_CTL_ADD, &mut e);
    let mut m = on_fd(KEVENT_POLL, fd, IN | ERR_HUP, 0);
    ctl(q, KEVENT_CTL_MODIFY, &mut m);
    expect_events(&get(q), &[poll_want(fd, IN)]);
    ctl(q, KEVENT_CTL_REMOVE, &mut m);

    // Sequence 2.
    let (a, _peer) = socketpair();
    let fd = a.as_raw_fd();
    let mut e = on_fd(KEVENT_POLL, fd, IN | OUT, KEVENT_REQ_ALWAYS_QUEUE);
    ctl(q, KEVENT_CTL_ADD, &mut e);
    fill(fd);
    assert_eq!(poll_now(fd, libc::POLLIN | libc::POLLOUT), 0);
    expect_events(&get(q), &[]);
    close(q);
}
