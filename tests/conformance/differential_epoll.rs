//! Issue 15: state kevents behave exactly like epoll. The differential test drives the same
//! random sequences of epoll operations through a real epoll and through kevent POLL kevents
//! after the author's epoll-over-kevent mapping (`kevent_epoll::Epoll`, what
//! `libkevent-epoll.so` runs), on every backend, taking events both with
//! `kevent_get_events` and through the ring (`kevent_wait`), with and without
//! `KEVENT_REQ_ALWAYS_QUEUE` (without it, an fd ready at ADD is added again with
//! `KEVENT_REQ_READY`), and compares every `epoll_ctl` result and every wait as a set of
//! `(fd, events, data)`. The driver, its world of fds and its knobs (`KEVENT_DIFF_*`) are in
//! `differential/mod.rs`. Decision P24 (`docs/decisions.md`) says where kevent and epoll
//! legitimately differ and how the mapping bridges it (ONESHOT, closed fds, EINTR).
//!
//! The shim itself, under `LD_PRELOAD`, is driven by `differential_epoll_preload.rs`.
#![allow(unsafe_code)]

use std::os::fd::AsRawFd;

use kevent_epoll::{Epoll, Options, Via};
use kevent_test_support::differential::*;
use kevent_test_support::*;

/// The mapping variant a seed runs: ring or get_events, ALWAYS_QUEUE or REQ_READY.
fn variant(seed: u64) -> Options {
    Options {
        via: if seed % 2 == 0 {
            Via::GetEvents
        } else {
            Via::Ring(64)
        },
        always_queue: (seed / 2) % 2 == 0,
    }
}

fn describe(b: Backend) -> impl Fn(u64) -> String {
    move |seed| format!("kevent on the {} backend ({:?})", b.as_str(), variant(seed))
}

backend_test! {
    /// Random sequences: epoll and kevent POLL kevents via the author's mapping agree on
    /// every ctl and every wait (D17, LAST_CHECK on every path, P6 marks, P24).
    fn d17_differential_epoll_and_kevent_poll_agree(b) {
        let (cases, ops) = explore(
            "d17_differential_epoll_and_kevent_poll_agree",
            0x5eed,
            &describe(b),
            &|seed| Mapped(Epoll::create(b, variant(seed)).expect("Epoll::create")),
        );
        assert!(cases > 0 && ops > 0);
    }
}

backend_test! {
    /// The same random sequences with SOCKET kevents for the socketpair, PIPE kevents for
    /// the pipe and the FIFO (POLL for the eventfd), every result translated by the typed
    /// model (P9; P24: BROKEN on a hang-up ends the registration, where epoll keeps
    /// reporting EPOLLHUP).
    fn d17_differential_epoll_and_socket_pipe_kevents_agree(b) {
        let (cases, ops) = explore(
            "d17_differential_epoll_and_socket_pipe_kevents_agree",
            0x7e9d,
            &describe(b),
            &|seed| typed::Typed::new(b, variant(seed)),
        );
        assert!(cases > 0 && ops > 0);
    }
}

/// The driver compared with itself: glibc's `epoll_*` (this binary preloads nothing) against
/// the raw system calls agree on every sequence, so a disagreement elsewhere is the
/// subject's, not the driver's or the kernel's nondeterminism.
#[test]
fn differential_driver_epoll_agrees_with_itself() {
    explore(
        "differential_driver_epoll_agrees_with_itself",
        0xd1ff,
        &|_| "glibc's epoll".into(),
        &|_| LibcEpoll::new(),
    );
}

/// The shrinker: a synthetic failure (a Fill of the pipe followed later by a Wait) buried in
/// a random sequence shrinks to exactly those two operations, simplified.
#[test]
fn differential_shrinker_finds_the_minimal_sequence() {
    let mut r = Rng::new(11);
    let mut ops: Vec<Op> = (0..120).map(|_| gen_op(&mut r, true)).collect();
    ops.retain(|o| {
        !matches!(
            o,
            Op::Fill { chan: Chan::Pipe }
                | Op::Write {
                    chan: Chan::Pipe,
                    ..
                }
        )
    });
    ops.insert(30, Op::Fill { chan: Chan::Pipe });
    let fails = |s: &[Op]| {
        s.iter()
            .position(|o| {
                matches!(
                    o,
                    Op::Fill { chan: Chan::Pipe }
                        | Op::Write {
                            chan: Chan::Pipe,
                            ..
                        }
                )
            })
            .is_some_and(|i| s[i..].contains(&Op::Wait))
    };
    assert!(fails(&ops));
    let (min, tries) = shrink(ops, &mut |s| fails(s));
    assert_eq!(
        min,
        vec![
            Op::Write {
                chan: Chan::Pipe,
                n: 1
            },
            Op::Wait
        ],
        "after {tries} tries"
    );
}

backend_test! {
    /// Section 3, ADD: an entry refused with `-EEXIST` leaves the registered kevent as it
    /// was. (The fallback's D10 staleness check once re-armed an ET kevent's edge with an
    /// `EPOLL_CTL_MOD` there, so a refused ADD made it deliver again; the differential test
    /// found it in four operations.)
    fn s3_add_refused_with_eexist_leaves_the_registration_as_it_was(b) {
        let q = Queue::new(b);
        let efd = eventfd(0); // writable
        let fd = efd.as_raw_fd();
        let et = on_fd(KEVENT_POLL, fd, KEVENT_POLL_POLLOUT, KEVENT_REQ_ET | KEVENT_REQ_ALWAYS_QUEUE);
        q.add_ok(&[et]);
        q.expect(&ZERO, &[Want::of(&et).data0(KEVENT_POLL_POLLOUT)]);
        q.expect_no_events();
        for req in [0, KEVENT_REQ_ET, KEVENT_REQ_ALWAYS_QUEUE] {
            let back = q.add(&[on_fd(KEVENT_POLL, fd, KEVENT_POLL_POLLOUT, req)]);
            assert_eq!(back.len(), 1);
            assert!(Want::of(&et).broken(Errno::EEXIST).matches(&back[0]), "{back:?}");
            q.expect_no_events();
        }
        // Still registered.
        q.remove_ok(&[et]);
    }
}

/// Issue 15's two sequences through the C library's exported functions with a ring: the
/// events taken by `kevent_wait` and read from the ring (`d17_state_reevaluation.rs` takes
/// them with `kevent_get_events`), on the process's backend.
#[test]
fn d17_issue15_sequences_through_the_c_library_ring() {
    use kevent_c::capi::calls::{kevent_commit, kevent_ctl, kevent_init, kevent_wait};
    const N: u32 = 8;
    let words = vec![0u64; ring_bytes(N).expect("size").div_ceil(8)].into_boxed_slice();
    let words = Box::into_raw(words);
    let ring = words.cast::<kevent_ring>();
    // SAFETY: `ring` points to `ring_bytes(N)` zeroed, 8-aligned bytes, freed only after the
    // queue fd is closed below.
    let q = unsafe { kevent_init(ring, N, 0) };
    assert!(q >= 0, "kevent_init: {}", std::io::Error::last_os_error());
    // SAFETY: the ring memory above, alive until after the queue is closed; its header is
    // only accessed through the view (atomically) and by the engine.
    let view = unsafe { RingView::new(std::ptr::NonNull::new(ring).expect("non-null"), N) };
    let mut uidx = 0u32;
    let mut take = || -> Vec<ukevent> {
        let (k0, o) = (view.kidx(), view.over());
        // SAFETY: plain integers and a timespec by value.
        let n = unsafe { kevent_wait(q, N - 1, uidx, ZERO, 0) };
        assert!(n >= 0, "kevent_wait: {}", std::io::Error::last_os_error());
        // SAFETY: the slots lie between the consumer index and the ring_kidx the wait
        // published; nothing writes them until they are committed.
        let evs: Vec<ukevent> = (0..n as u32)
            .map(|i| unsafe { view.read(k0 + i) })
            .collect();
        if n > 0 {
            uidx = (uidx + n as u32) % N;
            // SAFETY: plain integers.
            assert_eq!(unsafe { kevent_commit(q, uidx, o) }, n, "kevent_commit");
        }
        evs
    };
    let ctl = |cmd: u32, e: &mut ukevent| {
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
    let poll_in = |fd: i32| Want::new(KEVENT_POLL, fd as u64).data0(KEVENT_POLL_POLLIN);
    let err_hup = KEVENT_POLL_POLLERR | KEVENT_POLL_POLLHUP;

    // Sequence 1: ET|ALWAYS_QUEUE|LAST_CHECK for OUT (queued at ADD), MODIFY to IN, level.
    let (a, peer) = socketpair();
    let fd = a.as_raw_fd();
    assert_eq!(write_fd(peer.as_raw_fd(), &[7u8; 2165]), 2165);
    let req = KEVENT_REQ_ET | KEVENT_REQ_ALWAYS_QUEUE | KEVENT_REQ_LAST_CHECK;
    let mut e = on_fd(KEVENT_POLL, fd, KEVENT_POLL_POLLOUT | err_hup, req);
    ctl(KEVENT_CTL_ADD, &mut e);
    let mut m = on_fd(KEVENT_POLL, fd, KEVENT_POLL_POLLIN | err_hup, 0);
    ctl(KEVENT_CTL_MODIFY, &mut m);
    expect_events(&take(), &[poll_in(fd)]);
    expect_events(&take(), &[poll_in(fd)]);
    drain(fd);
    expect_events(&take(), &[]);
    ctl(KEVENT_CTL_REMOVE, &mut m);

    // Sequence 2: IN|OUT level, ALWAYS_QUEUE (queued as writable), then the buffer filled.
    let (a, _peer) = socketpair();
    let fd = a.as_raw_fd();
    let mut e = on_fd(
        KEVENT_POLL,
        fd,
        KEVENT_POLL_POLLIN | KEVENT_POLL_POLLOUT,
        KEVENT_REQ_ALWAYS_QUEUE,
    );
    ctl(KEVENT_CTL_ADD, &mut e);
    let chunk = [0u8; 4096];
    while write_fd(fd, &chunk) > 0 {}
    assert_eq!(poll_now(fd, libc::POLLIN | libc::POLLOUT), 0);
    expect_events(&take(), &[]);
    close(q);
    // SAFETY: `words` came from Box::into_raw above; the queue fd is closed.
    drop(unsafe { Box::from_raw(words) });
}
