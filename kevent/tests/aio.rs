//! `Queue::sendfile` (**D18**): the typed request handle, its cancellation, and the
//! completion as `EventKind::Aio`, on the fallback and (when the process runs on it) the
//! native backend.

mod util;

use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::Duration;

use kevent::{AioRequest, Backend, Errno, EventKind, Op, Queue};
use util::{ExpectEvent, expect_events, expect_no_events};

/// The fallback, and the process's backend when it is native and has the call; a native
/// backend without it is checked to answer `ENOSYS` (decision P37).
fn backends() -> Vec<Backend> {
    let mut all = vec![Backend::fallback()];
    let Ok(b) = Backend::current() else {
        return all;
    };
    if b == Backend::Fallback {
        return all;
    }
    if b.has_aio() {
        all.push(b);
    } else {
        let q = Queue::builder().backend(b).build().unwrap();
        let (f, _dir) = file_with("enosys", b"x");
        let (a, _peer) = UnixStream::pair().unwrap();
        let e = q.sendfile(&a, &f, 0, 1).unwrap_err();
        assert_eq!((e.op(), e.errno()), (Op::AioSendfile, Some(Errno::ENOSYS)));
        eprintln!("native backend without kevent_aio_sendfile: ENOSYS checked, fallback only");
    }
    all
}

/// A file holding `data`, open for reading, and its directory (removed on drop).
fn file_with(tag: &str, data: &[u8]) -> (std::fs::File, TempDir) {
    let dir = std::env::temp_dir().join(format!(
        "kevent-aio-{tag}-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("data");
    std::fs::write(&path, data).unwrap();
    (std::fs::File::open(&path).unwrap(), TempDir(dir))
}

struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7 + i / 251) as u8).collect()
}

fn queue(b: Backend) -> Queue {
    Queue::builder().backend(b).build().unwrap()
}

/// The one `Aio` event of `req`.
#[track_caller]
fn completion(q: &Queue, req: &AioRequest) -> EventKind {
    let id = req.id();
    let seen = expect_events(
        q,
        vec![ExpectEvent::with(req.key(), "done", |e| e.is_done())],
    );
    let kind = seen[0].kind();
    assert!(
        matches!(kind, EventKind::Aio { request, .. } if request == id),
        "{kind:?}"
    );
    kind
}

#[test]
fn d18_sendfile_sends_the_range_and_reports_the_bytes() {
    for b in backends() {
        let q = queue(b);
        let data = pattern(300_000);
        let (f, _dir) = file_with("range", &data);
        let (a, mut peer) = UnixStream::pair().unwrap();
        let reader = std::thread::spawn(move || {
            let mut got = vec![0u8; 200_000];
            peer.read_exact(&mut got).unwrap();
            got
        });
        let req = q.sendfile(&a, &f, 50_000, 200_000).unwrap();
        assert!(req.id() > 0);
        assert_eq!(
            completion(&q, &req),
            EventKind::Aio {
                request: req.id(),
                bytes: 200_000,
                error: None
            },
            "{b}"
        );
        let got = reader.join().unwrap();
        assert!(got == data[50_000..250_000], "{b}: the bytes differ");
        // Its one event was delivered: nothing left to cancel.
        assert!(!req.cancel().unwrap(), "{b}");
        expect_no_events(&q, Duration::from_millis(50));
    }
}

#[test]
fn d18_sendfile_stops_at_end_of_file_and_zero_completes_at_once() {
    for b in backends() {
        let q = queue(b);
        let (f, _dir) = file_with("eof", b"0123456789");
        let (a, mut peer) = UnixStream::pair().unwrap();
        let req = q.sendfile(&a, &f, 4, 1000).unwrap();
        assert_eq!(
            completion(&q, &req),
            EventKind::Aio {
                request: req.id(),
                bytes: 6,
                error: None
            },
            "{b}"
        );
        let mut got = [0u8; 6];
        peer.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"456789");
        let zero = q.sendfile(&a, &f, 0, 0).unwrap();
        assert_ne!(zero.id(), req.id());
        assert_eq!(
            completion(&q, &zero),
            EventKind::Aio {
                request: zero.id(),
                bytes: 0,
                error: None
            },
            "{b}"
        );
    }
}

#[test]
fn d18_cancel_stops_the_transfer_and_no_event_follows() {
    for b in backends() {
        let q = queue(b);
        let data = pattern(4 << 20);
        let (f, _dir) = file_with("cancel", &data);
        let (a, peer) = UnixStream::pair().unwrap();
        let req = q.sendfile(&a, &f, 0, data.len() as u64).unwrap();
        // The peer reads nothing: 4 MiB cannot have gone out yet.
        expect_no_events(&q, Duration::from_millis(100));
        assert!(req.cancel().unwrap(), "{b}");
        expect_no_events(&q, Duration::from_millis(300));
        drop(peer);
    }
}

#[test]
fn d18_a_closed_peer_is_a_typed_error() {
    for b in backends() {
        let q = queue(b);
        let data = pattern(4 << 20);
        let (f, _dir) = file_with("peer", &data);
        let (a, mut peer) = UnixStream::pair().unwrap();
        let req = q.sendfile(&a, &f, 0, data.len() as u64).unwrap();
        let mut first = vec![0u8; 10_000];
        peer.read_exact(&mut first).unwrap();
        drop(peer);
        let EventKind::Aio {
            request,
            bytes,
            error,
        } = completion(&q, &req)
        else {
            unreachable!()
        };
        assert_eq!(request, req.id());
        assert!(
            matches!(error, Some(Errno::EPIPE | Errno::ECONNRESET)),
            "{b}: {error:?}"
        );
        assert!(bytes >= 10_000 && bytes < data.len() as u64, "{b}: {bytes}");
        assert!(first == data[..10_000]);
    }
}

#[test]
fn d18_errors_name_the_call() {
    for b in backends() {
        let q = queue(b);
        let (f, _dir) = file_with("errors", b"abc");
        let (a, _peer) = UnixStream::pair().unwrap();
        let errno = |r: kevent::Result<AioRequest>| {
            let e = r.unwrap_err();
            assert_eq!(e.op(), Op::AioSendfile);
            e.errno().unwrap()
        };
        // A file as the socket, a socket as the file.
        assert_eq!(errno(q.sendfile(&f, &f, 0, 1)), Errno::EINVAL, "{b}");
        assert_eq!(errno(q.sendfile(&a, &a, 0, 1)), Errno::EINVAL, "{b}");
        // Past the largest file offset (P36).
        assert_eq!(errno(q.sendfile(&a, &f, 1, i64::MAX as u64)), Errno::EINVAL);
        // A stream socket without a peer.
        // SAFETY: socket() takes no pointer; the fd is owned at once.
        let lone =
            unsafe { OwnedFd::from_raw_fd(libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0)) };
        assert!(lone.as_raw_fd() >= 0);
        assert_eq!(errno(q.sendfile(&lone, &f, 0, 1)), Errno::ENOTCONN, "{b}");
        // Nothing was started.
        expect_no_events(&q, Duration::from_millis(50));
    }
}

#[test]
fn d18_the_request_outlives_the_callers_fds() {
    for b in backends() {
        let q = queue(b);
        let data = pattern(100_000);
        let (f, _dir) = file_with("closed", &data);
        let (a, mut peer) = UnixStream::pair().unwrap();
        let req = q.sendfile(&a, &f, 0, data.len() as u64).unwrap();
        drop(a);
        drop(f);
        let mut got = Vec::new();
        // EOF once the request let go of its socket: every byte arrived.
        peer.read_to_end(&mut got).unwrap();
        assert!(got == data, "{b}: {} of {} bytes", got.len(), data.len());
        assert_eq!(
            completion(&q, &req),
            EventKind::Aio {
                request: req.id(),
                bytes: data.len() as u64,
                error: None
            }
        );
    }
}
