//! D18, `kevent_aio_sendfile`: a file sent to a connected stream socket in the background,
//! its end reported as one ONESHOT `KEVENT_AIO` event carrying the byte count; cancellation
//! by REMOVE and by closing the queue; the request's own references to both files; the
//! call's errors. Every byte a receiver gets is compared with the file's.
//!
//! Natively the call exists only when the kernel advertised a sixth syscall number (spec
//! section 6); without it the backend answers `ENOSYS` (decision P37), which
//! [`aio_available`] checks before it skips the rest of the test with the reason printed.
#![allow(unsafe_code)]

use std::collections::HashSet;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use kevent_test_support::*;

/// Whether `b` can start transfers; natively without the sixth number, checks that the call
/// answers `ENOSYS` and says why the test stops there.
fn aio_available(b: Backend, test: &str) -> bool {
    if b.has_aio() {
        return true;
    }
    let q = Queue::new(b);
    let (a, _peer) = socketpair();
    let f = file_with(test, &pattern(16, 1));
    assert_eq!(
        b.aio_sendfile(q.fd, a.as_raw_fd(), f.fd.as_raw_fd(), 0, 16),
        Err(Errno::ENOSYS)
    );
    // A kernel built without CONFIG_NET has no sixth number: a build choice, not a missing tool.
    eprintln!(
        "[{test}] {} backend: the kernel advertised five syscall numbers (no \
         kevent_aio_sendfile): ENOSYS checked, rest skipped",
        b.as_str()
    );
    false
}

/// Deterministic bytes: what the receivers compare against.
fn pattern(len: usize, seed: u64) -> Vec<u8> {
    let mut rng = Rng::new(seed);
    (0..len).map(|_| rng.next_u64() as u8).collect()
}

/// A temporary file holding `data`, open for reading; removed on drop.
struct TempFile {
    fd: OwnedFd,
    dir: PathBuf,
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn file_with(tag: &str, data: &[u8]) -> TempFile {
    let dir = temp_dir(&tag.replace("::", "-"));
    let path = dir.join("data");
    std::fs::write(&path, data).expect("write the test file");
    let f = std::fs::File::open(&path).expect("open the test file");
    TempFile {
        fd: OwnedFd::from(f),
        dir,
    }
}

/// A connected AF_UNIX stream pair whose sending end is blocking (D18: `sock_fd` may be
/// blocking or not) and whose receiving end is not.
fn blocking_pair() -> (OwnedFd, OwnedFd) {
    let (a, b) = socketpair();
    // SAFETY: F_SETFL with an int argument; `a` is open.
    assert_eq!(unsafe { libc::fcntl(a.as_raw_fd(), libc::F_SETFL, 0) }, 0);
    (a, b)
}

/// Reads from the non-blocking `fd` into `out` until it has `want` bytes, EOF, or `limit`.
fn read_until(fd: RawFd, out: &mut Vec<u8>, want: usize, limit: Duration) -> bool {
    let start = Instant::now();
    let mut buf = vec![0u8; 64 * 1024];
    while out.len() < want && start.elapsed() < limit {
        // SAFETY: `buf` is valid for writes of its length.
        let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
        match n {
            0 => return false,
            n if n > 0 => out.extend_from_slice(&buf[..n as usize]),
            _ => std::thread::sleep(Duration::from_millis(1)),
        }
    }
    out.len() >= want
}

/// Reads until EOF (the last reference to the sending end closed), or `limit`.
fn read_to_eof(fd: RawFd, out: &mut Vec<u8>, limit: Duration) -> bool {
    let start = Instant::now();
    let mut buf = vec![0u8; 64 * 1024];
    while start.elapsed() < limit {
        // SAFETY: `buf` is valid for writes of its length.
        let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
        match n {
            0 => return true,
            n if n > 0 => out.extend_from_slice(&buf[..n as usize]),
            _ => std::thread::sleep(Duration::from_millis(1)),
        }
    }
    false
}

/// The one AIO event for request `id`, successful or not, within `limit`; nothing else
/// arrives with it.
#[track_caller]
fn completion(q: &Queue, id: u64, limit: Duration) -> ukevent {
    let start = Instant::now();
    let mut got = Vec::new();
    while got.is_empty() && start.elapsed() < limit {
        got = q.get(8, &ms(50));
    }
    assert_eq!(
        got.len(),
        1,
        "expected one event for request {id}: {got:#?}"
    );
    let e = got[0];
    assert_eq!((e.type_, e.id.as_u64()), (KEVENT_AIO, id), "{e:?}");
    assert_eq!(e.event, KEVENT_MASK_ALL, "{e:?}");
    e
}

/// The 64-bit byte count of a successful completion.
#[track_caller]
fn sent(e: &ukevent) -> u64 {
    assert_eq!(e.ret_flags & KEVENT_RET_BROKEN, 0, "{e:?}");
    u64::from(e.ret_data[0]) | (u64::from(e.ret_data[1]) << 32)
}

/// The fds this process has open (the isolated leak checks compare them).
fn open_fds() -> HashSet<String> {
    std::fs::read_dir("/proc/self/fd")
        .expect("/proc/self/fd")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect()
}

/// Waits (at most 5 s: the engine notices a closed queue within a quarter second) until the
/// open fds are exactly `before` again (the listing's own directory fd takes the same number
/// each time when they are).
#[track_caller]
fn expect_fds_back_to(before: &HashSet<String>) {
    let start = Instant::now();
    loop {
        let now = open_fds();
        if now == *before {
            return;
        }
        let extra: Vec<_> = now.difference(before).collect();
        let gone: Vec<_> = before.difference(&now).collect();
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "fds leaked: extra {extra:?}, missing {gone:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Starts the engine's machinery once (a 1-byte transfer), so that what it keeps for the
/// whole process is part of the leak checks' baseline. The queue stays open (the caller
/// keeps it): a closed one is released whenever the engine notices, which would move the
/// baseline.
fn warm_up(b: Backend, tag: &str) -> Queue {
    let q = Queue::new(b);
    let (a, _peer) = socketpair();
    let f = file_with(tag, b"x");
    let id = b
        .aio_sendfile(q.fd, a.as_raw_fd(), f.fd.as_raw_fd(), 0, 1)
        .unwrap();
    assert_eq!(sent(&completion(&q, id, Duration::from_secs(5))), 1);
    q
}

const MIB: usize = 1024 * 1024;

backend_test! {
    /// D18: the whole file arrives, byte for byte; the event is `(KEVENT_AIO, id)` with
    /// MASK_ALL and the 64-bit count; the caller's file offset is neither used nor moved;
    /// the request is gone after its one event.
    fn d18_aio_full_file(b) {
        if !aio_available(b, "d18_aio_full_file") {
            return;
        }
        let q = Queue::new(b);
        let data = pattern(MIB + 123, 18);
        let f = file_with("d18_full", &data);
        // SAFETY: lseek on an open fd takes no pointer.
        assert_eq!(unsafe { libc::lseek(f.fd.as_raw_fd(), 7, libc::SEEK_SET) }, 7);
        let (a, peer) = blocking_pair();
        let id = b
            .aio_sendfile(q.fd, a.as_raw_fd(), f.fd.as_raw_fd(), 0, data.len() as u64)
            .unwrap();
        assert!(id > 0);
        let mut got = Vec::new();
        assert!(read_until(peer.as_raw_fd(), &mut got, data.len(), Duration::from_secs(30)));
        let e = completion(&q, id, Duration::from_secs(30));
        assert_eq!(sent(&e), data.len() as u64);
        assert!(got == data, "the bytes received differ from the file's");
        // SAFETY: as above.
        assert_eq!(unsafe { libc::lseek(f.fd.as_raw_fd(), 0, libc::SEEK_CUR) }, 7);
        q.expect_no_events();
        // ONESHOT: the request is gone, so REMOVE does not find it.
        let back = q.ctl_in_place(KEVENT_CTL_REMOVE, &[aio_key(id)]);
        assert!(Want::new(KEVENT_AIO, id).broken(Errno::ENOENT).matches(&back[0]), "{back:?}");
    }

    /// D18 with P38: on an asynchronous ring the completion is posted into the ring (natively
    /// by the worker that finished the transfer, with no call of the consumer; on the
    /// fallback at its next call), once, with the byte count, and the request is gone.
    fn d18_aio_completion_is_posted_into_an_asynchronous_ring(b) {
        if !aio_available(b, "d18_aio_completion_is_posted_into_an_asynchronous_ring") {
            return;
        }
        require_async_ring!(b);
        let q = Queue::with_async_ring(b, 8);
        let data = pattern(64 * 1024 + 5, 19);
        let f = file_with("d18_async", &data);
        let (a, peer) = blocking_pair();
        let id = b
            .aio_sendfile(q.fd, a.as_raw_fd(), f.fd.as_raw_fd(), 0, data.len() as u64)
            .unwrap();
        let mut got = Vec::new();
        assert!(read_until(peer.as_raw_fd(), &mut got, data.len(), Duration::from_secs(30)));
        assert!(got == data, "the bytes received differ from the file's");
        let mut uidx = 0;
        let evs = if b.is_native() {
            // No call at all until it is there (bounded: the bug would be a hang).
            let start = Instant::now();
            while q.kidx() == 0 && start.elapsed() < Duration::from_secs(30) {
                std::thread::sleep(Duration::from_millis(1));
            }
            q.consume(&mut uidx)
        } else {
            q.consume_until(&mut uidx, 1, Duration::from_secs(30))
        };
        expect_events(&evs, &[Want::new(KEVENT_AIO, id)]);
        assert_eq!(sent(&evs[0]), data.len() as u64);
        let back = q.ctl_in_place(KEVENT_CTL_REMOVE, &[aio_key(id)]);
        assert!(Want::new(KEVENT_AIO, id).broken(Errno::ENOENT).matches(&back[0]), "{back:?}");
    }

    /// D18: a transfer that reaches end of file ends there (fewer bytes, not an error); one
    /// that starts past it sends nothing and completes with 0.
    fn d18_aio_offset_and_count_past_eof(b) {
        if !aio_available(b, "d18_aio_offset_and_count_past_eof") {
            return;
        }
        let q = Queue::new(b);
        let data = pattern(200_000, 5);
        let f = file_with("d18_eof", &data);
        let (a, peer) = socketpair();
        let id = b
            .aio_sendfile(q.fd, a.as_raw_fd(), f.fd.as_raw_fd(), 1000, 10 * data.len() as u64)
            .unwrap();
        let mut got = Vec::new();
        assert!(read_until(peer.as_raw_fd(), &mut got, data.len() - 1000, Duration::from_secs(30)));
        assert_eq!(sent(&completion(&q, id, Duration::from_secs(30))), (data.len() - 1000) as u64);
        assert!(got == data[1000..], "the bytes received differ from the file's");
        let id2 = b
            .aio_sendfile(q.fd, a.as_raw_fd(), f.fd.as_raw_fd(), 2 * data.len() as u64, 10)
            .unwrap();
        assert_ne!(id2, id, "ids are unique while their requests live, and never reused here");
        assert_eq!(sent(&completion(&q, id2, Duration::from_secs(10))), 0);
        assert_eq!(drain(peer.as_raw_fd()), 0);
    }

    /// D18: `count == 0` completes at once with 0 (the event is ready without waiting) and
    /// sends nothing.
    fn d18_aio_count_zero_completes_at_once(b) {
        if !aio_available(b, "d18_aio_count_zero_completes_at_once") {
            return;
        }
        let q = Queue::new(b);
        let f = file_with("d18_zero", &pattern(100, 2));
        let (a, peer) = socketpair();
        let id = b.aio_sendfile(q.fd, a.as_raw_fd(), f.fd.as_raw_fd(), 0, 0).unwrap();
        assert!(id > 0);
        let got = q.expect(&ZERO, &[Want::new(KEVENT_AIO, id)]);
        assert_eq!(sent(&got[0]), 0);
        assert_eq!(drain(peer.as_raw_fd()), 0);
        q.expect_no_events();
    }

    /// D18: a peer that stops reading makes the transfer wait (no event while the socket is
    /// full); once it reads, the transfer completes with every byte.
    fn d18_aio_waits_for_a_slow_peer(b) {
        if !aio_available(b, "d18_aio_waits_for_a_slow_peer") {
            return;
        }
        let q = Queue::new(b);
        let data = pattern(4 * MIB, 3);
        let f = file_with("d18_slow", &data);
        let (a, peer) = socketpair();
        let id = b
            .aio_sendfile(q.fd, a.as_raw_fd(), f.fd.as_raw_fd(), 0, data.len() as u64)
            .unwrap();
        // 4 MiB never fit in a socket buffer: the transfer cannot have ended.
        let early = q.get(8, &ms(200));
        assert!(early.is_empty(), "completed while the peer was not reading: {early:?}");
        let mut got = Vec::new();
        assert!(read_until(peer.as_raw_fd(), &mut got, data.len(), Duration::from_secs(60)));
        assert_eq!(sent(&completion(&q, id, Duration::from_secs(30))), data.len() as u64);
        assert!(got == data, "the bytes received differ from the file's");
    }

    /// D18: `sock_fd` and `in_fd` closed by the caller while the transfer runs: it goes on
    /// (the request holds its own references) and completes; the receiver sees EOF once the
    /// request let go of the socket.
    fn d18_aio_caller_closes_its_fds_meanwhile(b) {
        if !aio_available(b, "d18_aio_caller_closes_its_fds_meanwhile") {
            return;
        }
        let q = Queue::new(b);
        let data = pattern(MIB, 4);
        let f = file_with("d18_closed", &data);
        let (a, peer) = socketpair();
        let id = b
            .aio_sendfile(q.fd, a.as_raw_fd(), f.fd.as_raw_fd(), 0, data.len() as u64)
            .unwrap();
        drop(a);
        drop(f);
        let mut got = Vec::new();
        assert!(
            read_to_eof(peer.as_raw_fd(), &mut got, Duration::from_secs(30)),
            "no EOF: the request kept the socket after it ended"
        );
        assert!(got == data, "got {} of {} bytes, or different ones", got.len(), data.len());
        assert_eq!(sent(&completion(&q, id, Duration::from_secs(10))), data.len() as u64);
    }

    /// D18: every error of the call itself, each on its own wrong argument.
    fn d18_aio_bad_fds_and_wrong_kinds(b) {
        if !aio_available(b, "d18_aio_bad_fds_and_wrong_kinds") {
            return;
        }
        let q = Queue::new(b);
        let f = file_with("d18_bad", &pattern(64, 6));
        let (a, _peer) = socketpair();
        let (pr, _pw) = pipe();
        let (s, file) = (a.as_raw_fd(), f.fd.as_raw_fd());
        // A number above any fd this test process opens (it is never open; a number just
        // closed could be reused meanwhile by a concurrent test).
        let closed = 999_999;
        let call = |fd, sock, inf, off, count| b.aio_sendfile(fd, sock, inf, off, count);
        // The queue fd.
        assert_eq!(call(-1, s, file, 0, 1), Err(Errno::EBADF));
        assert_eq!(call(closed, s, file, 0, 1), Err(Errno::EBADF));
        assert_eq!(call(pr.as_raw_fd(), s, file, 0, 1), Err(Errno::EINVAL));
        // Closed files.
        assert_eq!(call(q.fd, s, closed, 0, 1), Err(Errno::EBADF));
        assert_eq!(call(q.fd, closed, file, 0, 1), Err(Errno::EBADF));
        assert_eq!(call(q.fd, s, -1, 0, 1), Err(Errno::EBADF));
        // in_fd: not a regular file, or not open for reading.
        assert_eq!(call(q.fd, s, pr.as_raw_fd(), 0, 1), Err(Errno::EINVAL));
        let dir = std::fs::File::open(&f.dir).unwrap();
        assert_eq!(call(q.fd, s, dir.as_raw_fd(), 0, 1), Err(Errno::EINVAL));
        let wo = std::fs::OpenOptions::new().write(true).open(f.dir.join("data")).unwrap();
        assert_eq!(call(q.fd, s, wo.as_raw_fd(), 0, 1), Err(Errno::EINVAL));
        // sock_fd: not a stream socket; a stream socket without a peer.
        assert_eq!(call(q.fd, file, file, 0, 1), Err(Errno::EINVAL));
        assert_eq!(call(q.fd, pr.as_raw_fd(), file, 0, 1), Err(Errno::EINVAL));
        let mut dg = [0; 2];
        // SAFETY: `dg` is valid for two ints.
        let r = unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_DGRAM, 0, dg.as_mut_ptr()) };
        assert_eq!(r, 0);
        let (dg0, _dg1) = (owned(dg[0], "dgram"), owned(dg[1], "dgram"));
        assert_eq!(call(q.fd, dg0.as_raw_fd(), file, 0, 1), Err(Errno::EINVAL));
        // SAFETY: socket() takes no pointer.
        let lone = owned(unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0) }, "socket");
        assert_eq!(call(q.fd, lone.as_raw_fd(), file, 0, 1), Err(Errno::ENOTCONN));
        // offset + count past the largest file offset (P36).
        assert_eq!(call(q.fd, s, file, u64::MAX, 1), Err(Errno::EINVAL));
        assert_eq!(call(q.fd, s, file, 1, i64::MAX as u64), Err(Errno::EINVAL));
        assert_eq!(call(q.fd, s, file, 0, u64::MAX), Err(Errno::EINVAL));
        // None of these started anything; the queue still works.
        q.expect_no_events();
        assert_usable(&q);
        // The largest range that does not overflow is accepted (it ends at end of file).
        let id = call(q.fd, s, file, 0, i64::MAX as u64).unwrap();
        assert_eq!(sent(&completion(&q, id, Duration::from_secs(10))), 64);
    }

    /// D18 through the ring: a completion is an event like any other, moved into the ring
    /// by `kevent_wait` (here a `count == 0` request, complete at once).
    fn d18_aio_completion_through_the_ring(b) {
        if !aio_available(b, "d18_aio_completion_through_the_ring") {
            return;
        }
        let q = Queue::with_ring(b, 4);
        let f = file_with("d18_ring", &pattern(10, 11));
        let (a, _peer) = socketpair();
        let id = b.aio_sendfile(q.fd, a.as_raw_fd(), f.fd.as_raw_fd(), 0, 0).unwrap();
        assert_eq!(q.wait(1, 0, &ZERO), Ok(1));
        assert_eq!(q.kidx(), 1);
        let e = q.slot(0);
        assert_eq!((e.type_, e.id.as_u64(), e.event), (KEVENT_AIO, id, KEVENT_MASK_ALL), "{e:?}");
        assert_eq!(sent(&e), 0);
        assert_eq!(q.commit(1, q.over()), Ok(1));
        q.expect_no_events();
    }

    /// P36: a READY mark on a running request delivers nothing (the request has no count
    /// yet); MODIFY cannot make the request outlive its one event. The completion then
    /// comes exactly once.
    fn p36_ready_and_modify_on_a_running_request(b) {
        if !aio_available(b, "p36_ready_and_modify_on_a_running_request") {
            return;
        }
        let q = Queue::new(b);
        let data = pattern(4 * MIB, 12);
        let f = file_with("p36_ready", &data);
        let (a, peer) = socketpair();
        let id = b
            .aio_sendfile(q.fd, a.as_raw_fd(), f.fd.as_raw_fd(), 0, data.len() as u64)
            .unwrap();
        let (marked, missing) = q.ready(&[aio_key(id)]);
        assert_eq!((marked, missing.len()), (1, 0));
        let early = q.get(8, &ms(100));
        assert!(early.is_empty(), "a READY mark delivered a running request: {early:?}");
        let mut m = aio_key(id);
        m.req_flags = 0;
        m.set_cookie(77);
        let back = q.ctl_in_place(KEVENT_CTL_MODIFY, &[m]);
        assert_eq!(back[0].ret_flags, KEVENT_RET_DONE, "{back:?}");
        let mut got = Vec::new();
        assert!(read_until(peer.as_raw_fd(), &mut got, data.len(), Duration::from_secs(60)));
        let e = completion(&q, id, Duration::from_secs(30));
        assert_eq!(sent(&e), data.len() as u64);
        assert_eq!(e.cookie(), 77, "MODIFY replaces the cookie");
        assert!(got == data, "the bytes received differ from the file's");
        q.expect_no_events();
        let back = q.ctl_in_place(KEVENT_CTL_REMOVE, &[aio_key(id)]);
        assert!(Want::new(KEVENT_AIO, id).broken(Errno::ENOENT).matches(&back[0]), "{back:?}");
    }
}

/// What the forked child of `d18_aio_after_fork` checks; bit `i` of the exit code is set when
/// check `i` failed.
fn aio_in_child(
    b: Backend,
    parent_q: RawFd,
    sock: RawFd,
    peer: RawFd,
    file: RawFd,
    len: usize,
) -> i32 {
    let mut fail = 0;
    let mut check = |i: u32, ok: bool| {
        if !ok {
            fail |= 1 << i;
        }
    };
    // D11: the parent's queue is not the child's.
    check(
        0,
        b.aio_sendfile(parent_q, sock, file, 0, 10) == Err(Errno::EBADF),
    );
    // A queue of the child's own gets transfers (the child has a worker of its own).
    // SAFETY: a null ring with num 0 registers no memory.
    let Ok(nq) = (unsafe { kevent_backend::init(b, std::ptr::null_mut(), 0, 0) }) else {
        return fail | 1 << 1;
    };
    let id = b.aio_sendfile(nq, sock, file, 0, len as u64);
    check(2, matches!(id, Ok(id) if id > 0));
    let mut got = Vec::new();
    check(3, read_until(peer, &mut got, len, Duration::from_secs(30)));
    let mut buf = [ukevent::default(); 4];
    let n = b.get_events(nq, 1, &mut buf, &ts(30, 0), 0);
    check(
        4,
        n == Ok(1) && Ok(buf[0].id.as_u64()) == id && buf[0].ret_data == [len as u32, 0],
    );
    fail
}

/// The REMOVE entry of request `id`.
fn aio_key(id: u64) -> ukevent {
    ukevent::new(KEVENT_AIO, kevent_id::from_u64(id), KEVENT_MASK_ALL, 0)
}

isolated_test! {
    /// D18 with D11: after `fork()` the child's copy of the parent's queue answers `EBADF`,
    /// and a queue of the child's own sends files (the parent's worker thread did not survive
    /// the fork; the child starts its own). The parent's transfers go on.
    fn d18_aio_after_fork(b) {
        if !aio_available(b, "d18_aio_after_fork") {
            return;
        }
        let q = warm_up(b, "d18_fork_warm");
        let data = pattern(300_000, 13);
        let f = file_with("d18_fork", &data);
        let (a, peer) = socketpair();
        let (qfd, sock, pfd, file) = (q.fd, a.as_raw_fd(), peer.as_raw_fd(), f.fd.as_raw_fd());
        // The child holds copies of our fds until it exits (`forks`).
        let forking = forks::forking();
        // SAFETY: the child makes only the calls of `aio_in_child` and leaves with `_exit`.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork");
        if pid == 0 {
            let code = aio_in_child(b, qfd, sock, pfd, file, data.len());
            // SAFETY: `_exit` ends the child without running the parent's destructors.
            unsafe { libc::_exit(code) };
        }
        let mut status = 0;
        let waited = bounded(Duration::from_secs(60), "the forked child", move || {
            // SAFETY: `status` is a local int; `pid` is our child.
            let r = unsafe { libc::waitpid(pid, &mut status, 0) };
            (r, status)
        });
        drop(forking);
        assert_eq!(waited.0, pid);
        assert!(libc::WIFEXITED(waited.1), "child status {:#x}", waited.1);
        assert_eq!(libc::WEXITSTATUS(waited.1), 0, "failed child checks (bitmask)");
        let id = b.aio_sendfile(q.fd, sock, file, 0, data.len() as u64).unwrap();
        let mut got = Vec::new();
        assert!(read_until(pfd, &mut got, data.len(), Duration::from_secs(30)));
        assert_eq!(sent(&completion(&q, id, Duration::from_secs(30))), data.len() as u64);
        assert!(got == data, "the bytes received differ from the file's");
    }

    /// D18: a peer that closes ends the transfer with `-EPIPE` or `-ECONNRESET` and the
    /// bytes sent so far, and never raises `SIGPIPE` (its default action, restored here,
    /// would kill this child).
    fn d18_aio_peer_closes(b) {
        if !aio_available(b, "d18_aio_peer_closes") {
            return;
        }
        // SAFETY: restores the default disposition of SIGPIPE in this child process.
        unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
        let q = Queue::new(b);
        let data = pattern(4 * MIB, 7);
        let f = file_with("d18_peer", &data);
        let (a, peer) = blocking_pair();
        let id = b
            .aio_sendfile(q.fd, a.as_raw_fd(), f.fd.as_raw_fd(), 0, data.len() as u64)
            .unwrap();
        let mut got = Vec::new();
        assert!(read_until(peer.as_raw_fd(), &mut got, 64 * 1024, Duration::from_secs(30)));
        drop(peer);
        let e = completion(&q, id, Duration::from_secs(30));
        assert_ne!(e.ret_flags & KEVENT_RET_BROKEN, 0, "{e:?}");
        let err = Errno::from_negated(e.ret_data[1]);
        assert!(matches!(err, Some(Errno::EPIPE | Errno::ECONNRESET)), "{e:?}");
        let before = e.ret_data[0] as usize;
        assert!(before >= got.len() && before < data.len(), "{before} bytes sent, {} read", got.len());
        assert!(got == data[..got.len()], "the bytes received differ from the file's");
    }

    /// D18: REMOVE of a running request cancels it: no event follows (the bytes already
    /// sent stay sent), the socket stops receiving, and the request's fds are released.
    fn d18_aio_remove_cancels(b) {
        if !aio_available(b, "d18_aio_remove_cancels") {
            return;
        }
        let _warm = warm_up(b, "d18_remove_warm");
        let q = Queue::new(b);
        let data = pattern(4 * MIB, 8);
        let f = file_with("d18_remove", &data);
        let (a, peer) = socketpair();
        let before = open_fds();
        let id = b
            .aio_sendfile(q.fd, a.as_raw_fd(), f.fd.as_raw_fd(), 0, data.len() as u64)
            .unwrap();
        let mut got = Vec::new();
        assert!(read_until(peer.as_raw_fd(), &mut got, 100_000, Duration::from_secs(30)));
        let back = q.ctl_in_place(KEVENT_CTL_REMOVE, &[aio_key(id)]);
        assert_eq!(back[0].ret_flags, KEVENT_RET_DONE, "{back:?}");
        expect_fds_back_to(&before);
        // Whatever was sent before the REMOVE arrives; then nothing more: the caller still
        // holds the socket, so the stream stays open and simply stops.
        read_until(peer.as_raw_fd(), &mut got, data.len(), Duration::from_millis(300));
        assert!(got.len() < data.len(), "the whole file arrived after REMOVE");
        assert!(got == data[..got.len()], "the bytes received differ from the file's");
        let late = q.get(8, &ms(300));
        assert!(late.is_empty(), "an event after REMOVE: {late:?}");
    }

    /// D18: closing the queue cancels every request and leaks nothing: the request's fds
    /// are closed (the receiver sees EOF once the caller closed its own socket too) and the
    /// open fds are those from before.
    fn d18_aio_close_queue_cancels_and_leaks_nothing(b) {
        if !aio_available(b, "d18_aio_close_queue_cancels_and_leaks_nothing") {
            return;
        }
        let _warm = warm_up(b, "d18_close_warm");
        let data = pattern(4 * MIB, 9);
        let f = file_with("d18_close", &data);
        let (a, peer) = socketpair();
        let before = open_fds();
        // Queue and requests made by a thread that ends: no thread keeps a reference to the
        // closed queue in its per-thread cache of the last queue used.
        let (sock, file, len) = (a.as_raw_fd(), f.fd.as_raw_fd(), data.len() as u64);
        let mut q = std::thread::spawn(move || {
            let q = Queue::new(b);
            for _ in 0..3 {
                b.aio_sendfile(q.fd, sock, file, 0, len).unwrap();
            }
            q
        })
        .join()
        .unwrap();
        q.close();
        expect_fds_back_to(&before);
        drop(a);
        let mut got = Vec::new();
        assert!(
            read_to_eof(peer.as_raw_fd(), &mut got, Duration::from_secs(10)),
            "no EOF: a request still holds the socket after its queue was closed"
        );
        assert!(got.len() < 3 * data.len(), "every transfer completed despite the close");
    }

    /// D18: 1000 transfers on one queue at once, of different lengths and offsets (some far
    /// larger than a socket buffer): 1000 distinct ids, one event each with the right
    /// count, and every receiver gets exactly its slice of the file.
    fn d18_aio_1000_concurrent_transfers(b) {
        if !aio_available(b, "d18_aio_1000_concurrent_transfers") {
            return;
        }
        const N: usize = 1000;
        // Each transfer takes four fds here (the pair, and the request's two duplicates).
        let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        // SAFETY: `lim` is valid for writes.
        assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) }, 0);
        require!(
            lim.rlim_max >= (4 * N + 200) as u64,
            "RLIMIT_NOFILE hard limit {} is below the {} fds of 1000 transfers",
            lim.rlim_max,
            4 * N + 200
        );
        lim.rlim_cur = lim.rlim_max;
        // SAFETY: `lim` is a valid rlimit (this child only).
        assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) }, 0);
        let q = Queue::new(b);
        let data = pattern(MIB, 10);
        let f = file_with("d18_1000", &data);
        let mut rng = Rng::new(1000);
        let mut conns = Vec::new();
        let mut ids = HashSet::new();
        for i in 0..N {
            let (a, peer) = socketpair();
            let off = rng.below(50_000) as usize;
            let len = if i % 10 == 0 { 300_000 } else { 1 + rng.below(40_000) as usize };
            let id = b
                .aio_sendfile(q.fd, a.as_raw_fd(), f.fd.as_raw_fd(), off as u64, len as u64)
                .unwrap();
            assert!(id > 0 && ids.insert(id), "id {id} repeated");
            conns.push((id, a, peer, off, len, Vec::new(), false));
        }
        let start = Instant::now();
        let mut done = 0;
        let mut buf = vec![0u8; 64 * 1024];
        while done < N || conns.iter().any(|c| c.5.len() < c.4) {
            assert!(start.elapsed() < Duration::from_secs(120), "{done} of {N} completed");
            for c in conns.iter_mut() {
                loop {
                    // SAFETY: `buf` is valid for writes of its length.
                    let n = unsafe { libc::read(c.2.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
                    if n <= 0 {
                        break;
                    }
                    c.5.extend_from_slice(&buf[..n as usize]);
                }
            }
            for e in q.get(N, &ms(1)) {
                assert_eq!(e.type_, KEVENT_AIO, "{e:?}");
                let c = conns.iter_mut().find(|c| c.0 == e.id.as_u64()).expect("a known id");
                assert!(!c.6, "two events for request {}", c.0);
                c.6 = true;
                assert_eq!(sent(&e), c.4 as u64, "{e:?}");
                done += 1;
            }
        }
        for (id, _a, _peer, off, len, got, _) in &conns {
            assert!(*got == data[*off..*off + *len], "request {id}: the bytes received differ");
        }
        q.expect_no_events();
    }
}
