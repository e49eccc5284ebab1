//! Bad input, everywhere: every call × every invalid argument class (queue fds: closed,
//! negative, not a kevent queue; counts: 0, huge, above the ring; timespecs; commands;
//! flags (D1); commit indices and `over`; `kevent_aio_sendfile`'s files and ranges, D18).
//! Each gets the spec's errno, and the queue stays
//! usable afterwards (an UNOTIFY kevent still goes through it exactly once).
//!
//! NULL pointers and counts larger than the buffer cannot be expressed through
//! `Backend`'s slices; the D15 tests reach them through the C-memory entry point the C
//! library's `kevent_get_events` calls (`kevent_backend::user::get_events`, here
//! `get_events_on`) on each backend; the C library's tests
//! (`tests/c_*.rs`) cover the rest.
#![allow(unsafe_code)]

use std::os::fd::{AsRawFd, OwnedFd};
use std::time::{Duration, Instant};

use kevent_backend::user::get_events as get_events_on;
use kevent_test_support::*;

/// An fd number that is not open in any test process.
const CLOSED_FD: i32 = 999_983;

/// Every call of the ABI on `fd`, each with otherwise valid arguments; `kevent_aio_sendfile`
/// (D18) where the backend has it (a connected socket and a regular file: only `fd` is bad).
fn every_call(b: Backend, fd: i32) -> Vec<(&'static str, Result<u32, Errno>)> {
    let mut e = [user(1, 0)];
    let mut buf = [ukevent::default(); 4];
    let mut calls = Vec::new();
    if b.has_aio() {
        // Far from `fd`, whose number they must not take (it may be a closed queue's).
        let (s, peer) = socketpair();
        let exe: OwnedFd = std::fs::File::open("/proc/self/exe").expect("exe").into();
        let (s, _peer, exe) = (high(s), high(peer), high(exe));
        let r = b.aio_sendfile(fd, s.as_raw_fd(), exe.as_raw_fd(), 0, 1);
        calls.push(("aio_sendfile", r.map(|_| 0)));
    }
    calls.extend([
        ("ctl(ADD)", b.ctl(fd, KEVENT_CTL_ADD, &mut e.clone())),
        ("ctl(REMOVE)", b.ctl(fd, KEVENT_CTL_REMOVE, &mut e.clone())),
        ("ctl(MODIFY)", b.ctl(fd, KEVENT_CTL_MODIFY, &mut e.clone())),
        ("ctl(READY)", b.ctl(fd, KEVENT_CTL_READY, &mut e)),
        ("ctl(READY, 0)", b.ctl(fd, KEVENT_CTL_READY, &mut [])),
        ("get_events({0,0})", b.get_events(fd, 1, &mut buf, &ZERO, 0)),
        (
            "get_events(1 s)",
            b.get_events(fd, 1, &mut buf, &ts(1, 0), 0),
        ),
        ("wait({0,0})", b.wait(fd, 1, 0, &ZERO, 0)),
        ("wait(1 s)", b.wait(fd, 1, 0, &ts(1, 0), 0)),
        ("commit", b.commit(fd, 0, 0)),
    ]);
    calls
}

/// `fd` moved to a number at or above 512 (the number it had is free again).
fn high(fd: OwnedFd) -> OwnedFd {
    // SAFETY: F_DUPFD_CLOEXEC with an int argument on an open fd.
    let n = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 512) };
    owned(n, "F_DUPFD_CLOEXEC")
}

#[track_caller]
fn expect_all(b: Backend, fd: i32, errno: Errno, what: &str) {
    let start = Instant::now();
    for (call, r) in every_call(b, fd) {
        assert_eq!(r, Err(errno), "{call} on {what} (fd {fd})");
    }
    assert!(
        start.elapsed() < Duration::from_millis(900),
        "a call on {what} blocked"
    );
}

/// Non-kevent fds of every kind.
fn not_queues() -> Vec<(&'static str, OwnedFd)> {
    let dir = temp_dir("notqueue");
    let (r, _w) = pipe();
    let (s, _s2) = socketpair();
    let file: OwnedFd = std::fs::File::create(dir.join("f")).unwrap().into();
    let d: OwnedFd = std::fs::File::open(&dir).unwrap().into();
    let null: OwnedFd = std::fs::File::open("/dev/null").unwrap().into();
    // SAFETY: epoll_create1 takes no pointer.
    let ep = owned(
        unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) },
        "epoll_create1",
    );
    let _ = std::fs::remove_dir_all(dir);
    vec![
        ("a pipe", r),
        ("a socket", s),
        ("a regular file", file),
        ("a directory", d),
        ("/dev/null", null),
        ("an eventfd", eventfd(0)),
        ("a plain epoll fd", ep),
    ]
}

backend_test! {
    /// Every call on a closed or negative fd: EBADF.
    fn s3_every_call_on_a_closed_or_negative_fd_ebadf(b) {
        for fd in [-1, -2, i32::MIN, CLOSED_FD, i32::MAX] {
            expect_all(b, fd, Errno::EBADF, "a closed or negative fd");
        }
    }

    /// Every call on an open fd that is not a kevent queue: EINVAL (and the fd is not
    /// disturbed: a pipe still carries data).
    fn s3_every_call_on_a_non_queue_fd_einval(b) {
        for (what, fd) in not_queues() {
            expect_all(b, fd.as_raw_fd(), Errno::EINVAL, what);
        }
        let (r, w) = pipe();
        expect_all(b, r.as_raw_fd(), Errno::EINVAL, "a pipe");
        assert_eq!(write_fd(w.as_raw_fd(), b"ok"), 2);
        assert_eq!(drain(r.as_raw_fd()), 2);
    }

    /// D1: every unknown bit of every `flags` argument gives EINVAL (init: `s3_init`), and
    /// the queue stays usable.
    fn d1_unknown_flags_einval_in_every_call(b) {
        let q = Queue::with_ring(b, 4);
        for bit in 1..32 {
            let f = 1u32 << bit;
            let mut buf = [ukevent::default(); 4];
            assert_eq!(b.get_events(q.fd, 1, &mut buf, &ZERO, f), Err(Errno::EINVAL), "get_events flags {f:#x}");
            assert_eq!(
                b.get_events(q.fd, 1, &mut buf, &ZERO, f | KEVENT_FLAGS_ABSTIME),
                Err(Errno::EINVAL)
            );
            assert_eq!(b.wait(q.fd, 1, 0, &ZERO, f), Err(Errno::EINVAL), "wait flags {f:#x}");
        }
        let mut buf = [ukevent::default(); 4];
        assert_eq!(b.get_events(q.fd, 1, &mut buf, &ZERO, u32::MAX), Err(Errno::EINVAL));
        assert_eq!(b.wait(q.fd, 1, 0, &ZERO, u32::MAX), Err(Errno::EINVAL));
        assert_eq!(q.kidx(), 0, "a rejected call moved ring_kidx");
        assert_usable(&q);
    }

    /// D1, by extension to the request flags of an entry: unknown `req_flags` bits fail that
    /// entry (ADD and MODIFY) with `-EINVAL`; the other entries are processed.
    fn d1_unknown_req_flags_fail_the_entry(b) {
        let q = Queue::new(b);
        for bit in 6..32 {
            let bad = user(1000 + bit, 1 << bit);
            let back = q.add(&[user(1, 0), bad]);
            expect_events(&back, &[Want::of(&bad).broken(Errno::EINVAL)]);
            q.remove_ok(&[user(1, 0)]);
        }
        q.add_ok(&[user(1, 0)]);
        let back = q.ctl_in_place(KEVENT_CTL_MODIFY, &[user(1, 0x4000)]);
        assert!(Want::new(KEVENT_UNOTIFY, 1).broken(Errno::EINVAL).matches(&back[0]), "{back:?}");
        q.remove_ok(&[user(1, 0)]);
        assert_usable(&q);
    }

    /// Unknown commands, with and without entries: EINVAL; nothing is registered.
    fn s3_unknown_commands_einval(b) {
        let q = Queue::new(b);
        for cmd in (4..40).chain([0x8000_0000, u32::MAX]) {
            let mut e = [user(7, KEVENT_REQ_READY)];
            assert_eq!(q.ctl(cmd, &mut e), Err(Errno::EINVAL), "cmd {cmd}");
            assert_eq!(q.ctl(cmd, &mut []), Err(Errno::EINVAL), "cmd {cmd}");
        }
        q.expect_no_events();
        assert_usable(&q);
    }

    /// Counts of 0 and large counts in `kevent_ctl`: zero entries do nothing (READY(0) is the
    /// wake-up), 100,000 entries are all processed.
    fn s3_ctl_counts_zero_and_huge(b) {
        let q = Queue::new(b);
        for cmd in [KEVENT_CTL_ADD, KEVENT_CTL_REMOVE, KEVENT_CTL_MODIFY] {
            assert_eq!(q.ctl(cmd, &mut []), Ok(0), "cmd {cmd} with no entries");
        }
        let mut many: Vec<ukevent> = (0..100_000).map(|i| user(i, 0)).collect();
        assert_eq!(q.ctl(KEVENT_CTL_ADD, &mut many), Ok(0));
        let mut many: Vec<ukevent> = (0..100_000).map(|i| user(i, 0)).collect();
        assert_eq!(q.ctl(KEVENT_CTL_READY, &mut many), Ok(100_000));
        let mut n = 0;
        while n < 100_000 {
            let got = q.get(4096, &ZERO);
            assert!(!got.is_empty(), "only {n} of 100000 delivered");
            n += got.len();
        }
        assert_eq!(n, 100_000);
        let mut many: Vec<ukevent> = (0..100_000).map(|i| user(i, 0)).collect();
        // D14: REMOVE returns 0; every entry says it was found.
        assert_eq!(q.ctl(KEVENT_CTL_REMOVE, &mut many), Ok(0));
        assert!(many.iter().all(|e| e.ret_flags == KEVENT_RET_DONE));
        assert_usable(&q);
    }

    /// D15: `kevent_get_events` with `max_nr == 0` is EINVAL, whatever `min_nr`, with a
    /// long timeout and an event ready, through the backend and through the C library
    /// (there also with a NULL `buf`); nothing waits, nothing is taken, the queue stays usable.
    fn d15_get_events_max_nr_zero_einval(b) {
        let q = Queue::new(b);
        q.add_ok(&[user(1, KEVENT_REQ_READY)]);
        let start = Instant::now();
        let mut empty: [ukevent; 0] = [];
        let mut buf = [ukevent::default(); 4];
        for min in [0, 1, 5, u32::MAX] {
            assert_eq!(b.get_events(q.fd, min, &mut empty, &ts(5, 0), 0), Err(Errno::EINVAL), "min_nr {min}");
            for p in [buf.as_mut_ptr(), std::ptr::null_mut()] {
                // SAFETY: `p` is NULL or our 4-entry buffer, valid for writes for the call.
                let r = unsafe { get_events_on(b, q.fd, min, 0, &ts(5, 0), p, 0) };
                assert_eq!(r, Err(Errno::EINVAL), "C library, min_nr {min}, buf {p:?}");
            }
        }
        assert!(start.elapsed() < Duration::from_secs(2), "max_nr 0 waited");
        q.expect(&ZERO, &[Want::new(KEVENT_UNOTIFY, 1)]);
        assert_usable(&q);
    }

    /// D15: `min_nr > max_nr` is EINVAL (the call could never return `min_nr` events),
    /// through the backend and through the C library (also past the C library's 4096-event
    /// cap, where it must not clamp `min_nr` into range); nothing waits or is taken.
    fn d15_get_events_min_nr_above_max_nr_einval(b) {
        let q = Queue::new(b);
        q.add_ok(&[user(1, KEVENT_REQ_READY)]);
        let start = Instant::now();
        let mut buf = vec![ukevent::default(); 5000];
        for (min, max) in [(2u32, 1u32), (5, 4), (1000, 999), (u32::MAX, 16), (4098, 4097), (5000, 4097)] {
            let slice = &mut buf[..max as usize];
            assert_eq!(b.get_events(q.fd, min, slice, &ts(5, 0), 0), Err(Errno::EINVAL), "min_nr {min} max_nr {max}");
            // SAFETY: `buf` holds 5000 entries, at least `max`, valid for writes for the call.
            let r = unsafe { get_events_on(b, q.fd, min, max, &ts(5, 0), buf.as_mut_ptr(), 0) };
            assert_eq!(r, Err(Errno::EINVAL), "C library, min_nr {min} max_nr {max}");
        }
        assert!(start.elapsed() < Duration::from_secs(2), "min_nr > max_nr waited");
        // min_nr == max_nr is fine.
        let got = q.get_events(2, 2, &ms(20), 0).expect("min_nr == max_nr");
        expect_events(&got, &[Want::new(KEVENT_UNOTIFY, 1)]);
        assert_usable(&q);
    }

    /// D15: a NULL `buf` with `max_nr > 0` is EFAULT, before the call waits or takes an
    /// event (an event taken into nowhere would be lost). A slice cannot be NULL, so this
    /// goes through the C library's entry point on each backend (native: the raw syscall).
    fn d15_get_events_null_buf_with_max_nr_efault(b) {
        let q = Queue::with_ring(b, 8);
        q.add_ok(&[user(1, KEVENT_REQ_READY)]);
        let start = Instant::now();
        for (min, max, flags) in [(0, 1, 0), (1, 4, 0), (4, 4, 0), (0, 4096, 0), (1, 4097, 0), (1, u32::MAX, 0), (1, 4, KEVENT_FLAGS_ABSTIME)] {
            let t = if flags == 0 { ts(5, 0) } else { realtime_in(Duration::from_secs(5)) };
            // SAFETY: a NULL buffer: nothing may be written.
            let r = unsafe { get_events_on(b, q.fd, min, max, &t, std::ptr::null_mut(), flags) };
            assert_eq!(r, Err(Errno::EFAULT), "NULL buf, min_nr {min} max_nr {max} flags {flags:#x}");
        }
        assert!(start.elapsed() < Duration::from_secs(2), "a NULL buffer waited");
        assert_eq!(q.kidx(), 0, "a refused call moved ring_kidx");
        q.expect(&ZERO, &[Want::new(KEVENT_UNOTIFY, 1)]);
        assert_usable(&q);
    }

    /// Counts in `kevent_wait`: 0 moves nothing (returns 0 at once); above the ring size is
    /// EINVAL; the ring is untouched.
    fn s3_wait_counts_zero_and_above_the_ring(b) {
        let q = Queue::with_ring(b, 4);
        q.add_ok(&[user(1, 0)]);
        q.ready_ids(&[1]);
        let start = Instant::now();
        assert_eq!(q.wait(0, 0, &ts(1, 0)), Ok(0));
        assert!(start.elapsed() < Duration::from_millis(900), "wait(num 0) blocked");
        for num in [5, 1 << 20, u32::MAX] {
            assert_eq!(q.wait(num, 0, &ZERO), Err(Errno::EINVAL), "num {num}");
        }
        assert_eq!(q.kidx(), 0);
        assert_eq!(q.wait(4, 0, &ZERO), Ok(1));
        assert_eq!(q.commit(1, 0), Ok(1));
        assert_usable(&q);
    }

    /// Invalid timespecs in both waiting calls, relative and absolute: EINVAL; the ready
    /// event is still there afterwards.
    fn s3_invalid_timespecs_einval_everywhere(b) {
        let q = Queue::with_ring(b, 4);
        q.add_ok(&[user(1, 0)]);
        q.ready_ids(&[1]);
        for t in [ts(0, -1), ts(0, 1_000_000_000), ts(5, i64::MAX), ts(-1, 0), ts(i64::MIN, 999)] {
            for flags in [0, KEVENT_FLAGS_ABSTIME] {
                let mut buf = [ukevent::default(); 4];
                assert_eq!(b.get_events(q.fd, 1, &mut buf, &t, flags), Err(Errno::EINVAL), "{t:?}");
                assert_eq!(b.wait(q.fd, 4, 0, &t, flags), Err(Errno::EINVAL), "{t:?}");
            }
        }
        assert_eq!(q.kidx(), 0);
        q.expect(&ZERO, &[Want::new(KEVENT_UNOTIFY, 1)]);
        assert_usable(&q);
    }

    /// `kevent_commit` bad input: no ring (EINVAL), `new_uidx >= n` (EINVAL), `over` not
    /// `ring_over` or `ring_over - 1` (EOVERFLOW); nothing is released by a failed commit.
    fn s3_commit_bad_indices_and_over(b) {
        let q = Queue::new(b);
        for (u, o) in [(0, 0), (1, 0), (u32::MAX, u32::MAX)] {
            assert_eq!(q.commit(u, o), Err(Errno::EINVAL));
        }
        let q = Queue::with_ring(b, 4);
        q.add_ok(&[user(1, 0), user(2, 0)]);
        q.ready_ids(&[1, 2]);
        assert_eq!(q.wait(4, 0, &ZERO), Ok(2));
        for u in [4, 5, 1000, u32::MAX] {
            assert_eq!(q.commit(u, 0), Err(Errno::EINVAL), "new_uidx {u}");
        }
        for o in [1, 2, 1000, u32::MAX - 1] {
            assert_eq!(q.commit(2, o), Err(Errno::EOVERFLOW), "over {o}");
        }
        // over = ring_over - 1 (wrapping) is accepted.
        assert_eq!(q.commit(1, u32::MAX), Ok(1));
        assert_eq!(q.commit(2, 0), Ok(1));
        assert_usable(&q);
    }
}

backend_test! {
    /// D18: `kevent_aio_sendfile` with every class of bad `sock_fd` and `in_fd` (closed,
    /// negative, the wrong kind of file, the queue itself) and every overflowing range:
    /// EBADF, EINVAL or ENOTCONN, nothing started, the queue still usable.
    fn d18_aio_sendfile_bad_fds_and_ranges(b) {
        if !b.has_aio() {
            return;
        }
        let q = Queue::new(b);
        let (s, _peer) = socketpair();
        let exe = std::fs::File::open("/proc/self/exe").expect("/proc/self/exe");
        let (s, f) = (s.as_raw_fd(), exe.as_raw_fd());
        for bad in [-1, -2, i32::MIN, CLOSED_FD, i32::MAX] {
            assert_eq!(b.aio_sendfile(q.fd, bad, f, 0, 1), Err(Errno::EBADF), "sock_fd {bad}");
            assert_eq!(b.aio_sendfile(q.fd, s, bad, 0, 1), Err(Errno::EBADF), "in_fd {bad}");
        }
        for (what, fd) in not_queues() {
            // A regular file opened for writing only is still not readable.
            assert_eq!(
                b.aio_sendfile(q.fd, s, fd.as_raw_fd(), 0, 1),
                Err(Errno::EINVAL),
                "in_fd: {what}"
            );
            if what != "a socket" {
                assert_eq!(
                    b.aio_sendfile(q.fd, fd.as_raw_fd(), f, 0, 1),
                    Err(Errno::EINVAL),
                    "sock_fd: {what}"
                );
            }
        }
        assert_eq!(b.aio_sendfile(q.fd, q.fd, f, 0, 1), Err(Errno::EINVAL), "the queue as sock_fd");
        assert_eq!(b.aio_sendfile(q.fd, s, q.fd, 0, 1), Err(Errno::EINVAL), "the queue as in_fd");
        let max = i64::MAX as u64;
        for (off, count) in [(u64::MAX, 0), (u64::MAX, u64::MAX), (max + 1, 0), (max, 1), (1, max), (0, u64::MAX)] {
            assert_eq!(b.aio_sendfile(q.fd, s, f, off, count), Err(Errno::EINVAL), "{off} + {count}");
        }
        q.expect_no_events();
        assert_usable(&q);
    }
}

isolated_test! {
    /// A queue fd that was closed: EBADF on every call; once its number belongs to another
    /// file (a plain epoll fd, then a pipe): EINVAL on every call, and that file is not
    /// disturbed.
    fn s3_closed_queue_then_number_reused_by_other_files(b) {
        let mut q = Queue::with_ring(b, 4);
        q.add_ok(&[user(1, KEVENT_REQ_READY)]);
        let n = q.fd;
        q.close();
        expect_all(b, n, Errno::EBADF, "a closed queue fd");
        // SAFETY: epoll_create1 takes no pointer; this single-threaded child gets the
        // lowest free number, the one just closed.
        let ep = owned(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) }, "epoll_create1");
        assert_eq!(ep.as_raw_fd(), n);
        expect_all(b, n, Errno::EINVAL, "a plain epoll on a former queue number");
        drop(ep);
        let (r, w) = pipe();
        assert_eq!(r.as_raw_fd(), n);
        expect_all(b, n, Errno::EINVAL, "a pipe on a former queue number");
        assert_eq!(write_fd(w.as_raw_fd(), b"ok"), 2);
        assert_eq!(drain(r.as_raw_fd()), 2);
        drop((r, w));
        // A new queue on the same number is a new, empty queue.
        let q2 = Queue::new(b);
        assert_eq!(q2.fd, n);
        q2.expect_no_events();
        assert_usable(&q2);
    }
}
