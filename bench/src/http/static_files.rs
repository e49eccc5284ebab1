//! The static-file benchmark (issue 22 item 5): one file served over HTTP/1.1 keep-alive by
//! two single-threaded servers, under the built-in load generator at 100 and 1000
//! connections, for files of 4 KiB, 64 KiB and 1 MiB (page cache warm):
//!
//! * **epoll + sendfile**: epoll for the requests; each response is the head written with
//!   `send`, then the file with `sendfile(2)` on the socket switched to blocking until all of
//!   it is sent (the classic static server that blocks on a slow client).
//! * **kevent AIO**: a kevent queue (the process's backend) with SOCKET kevents for the
//!   requests; each response is the head written with `send`, then the file with
//!   `kevent_aio_sendfile` (D18), whose `KEVENT_AIO` completion comes back on the same queue:
//!   the server never blocks on a client or on the disk.
//!
//! In a closed loop a client sends its next request only after it read the whole previous
//! response, so a head always finds the socket buffer empty: its `send` never comes up short
//! (a short one is counted as an error and the connection dropped).
//!
//! Method as the HTTP benchmark's: in every round each server runs once, in alternating
//! order; the ratio kevent/epoll is taken within a round and reported as the median with a
//! 95% bootstrap interval. Every response of one row has the same size, so the bytes/s ratio
//! is the req/s ratio.
//!
//! # Safety
//!
//! `accept4`, `read`, `send`, `sendfile`, `fcntl` and `close` get fds this module owns (the
//! listener's, the accepted sockets', the file's) and pointers to locals or buffers that live
//! across each call, with their lengths.
#![allow(unsafe_code)]

use std::collections::HashMap;
use std::fmt::Write as _;
use std::net::TcpListener;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use kevent_backend::Backend;
use kevent_sys::{
    KEVENT_AIO, KEVENT_CTL_ADD, KEVENT_CTL_REMOVE, KEVENT_RET_BROKEN, KEVENT_SOCKET_ACCEPT,
    KEVENT_SOCKET_RECV, kevent_id, ukevent,
};

use super::listener;
use super::load::{Load, RunResult, drive};
use super::loadgen::Mode;
use super::server;
use crate::json::Json;
use crate::machine::Machine;
use crate::stats::Interval;
use crate::{Opts, Section, SummaryRow, os};

/// File sizes served.
const SIZES: [usize; 3] = [4 << 10, 64 << 10, 1 << 20];
/// Concurrent connections.
const CONNS: [usize; 2] = [100, 1000];

/// Which server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    EpollSendfile,
    KeventAio(Backend),
}

impl Kind {
    fn name(self) -> String {
        match self {
            Kind::EpollSendfile => "epoll + sendfile".into(),
            Kind::KeventAio(b) => format!("kevent AIO ({b})"),
        }
    }
}

/// The response head for a body of `size` bytes.
fn head(size: usize) -> Vec<u8> {
    format!("HTTP/1.1 200 OK\r\nContent-Length: {size}\r\nConnection: keep-alive\r\n\r\n")
        .into_bytes()
}

/// A temporary file of `size` bytes, read once so that its pages are cached.
fn make_file(size: usize) -> std::io::Result<(OwnedFd, std::path::PathBuf)> {
    let path =
        std::env::temp_dir().join(format!("kevent-bench-static-{}-{size}", std::process::id()));
    let data: Vec<u8> = (0..size).map(|i| (i % 251) as u8).collect();
    std::fs::write(&path, &data)?;
    let _ = std::fs::read(&path)?;
    let f = std::fs::File::open(&path)?;
    Ok((OwnedFd::from(f), path))
}

/// Accepts every pending connection ([`server::accept_all`]: non-blocking, close-on-exec)
/// with `TCP_NODELAY`: the head and the body are separate writes, and Nagle's algorithm
/// would hold the body's last segment for the client's delayed ACK.
fn accept_all(listener: RawFd, mut f: impl FnMut(OwnedFd)) {
    server::accept_all(listener, |fd| {
        os::set_nodelay(fd);
        // SAFETY: accept4 just returned this fd; nothing else owns it.
        f(unsafe { OwnedFd::from_raw_fd(fd) });
    });
}

/// Reads what is there into `buf`; `false` on EOF or an error (the connection is over).
fn read_some(fd: RawFd, buf: &mut Vec<u8>) -> bool {
    let mut chunk = [0u8; 4096];
    loop {
        // SAFETY: `chunk` is valid for writes of its length.
        let n = unsafe { libc::read(fd, chunk.as_mut_ptr().cast(), chunk.len()) };
        if n > 0 {
            buf.extend_from_slice(&chunk[..n as usize]);
            continue;
        }
        return n < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::WouldBlock;
    }
}

/// Takes one complete request (up to its empty line) off the front of `buf`.
fn take_request(buf: &mut Vec<u8>) -> bool {
    match server::find_head_end(buf) {
        Some(end) => {
            buf.drain(..end + 4);
            true
        }
        None => false,
    }
}

/// Writes the whole head without blocking, corked (`MSG_MORE`) so that it leaves with the
/// body's first bytes; `false` if the socket took less.
fn send_head(fd: RawFd, head: &[u8]) -> bool {
    // SAFETY: `head` is valid for reads of its length.
    let n = unsafe {
        libc::send(
            fd,
            head.as_ptr().cast(),
            head.len(),
            libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL | libc::MSG_MORE,
        )
    };
    n == head.len() as isize
}

/// Sets or clears `O_NONBLOCK`.
fn set_blocking(fd: RawFd, blocking: bool) {
    let flags = if blocking { 0 } else { libc::O_NONBLOCK };
    // SAFETY: F_SETFL with an int argument.
    unsafe { libc::fcntl(fd, libc::F_SETFL, flags) };
}

/// The whole file with blocking `sendfile(2)`; `false` on an error.
fn sendfile_all(sock: RawFd, file: RawFd, size: usize) -> bool {
    set_blocking(sock, true);
    let mut off: libc::off_t = 0;
    let mut ok = true;
    while (off as usize) < size {
        // SAFETY: `off` is a local the call updates.
        let n = unsafe { libc::sendfile(sock, file, &mut off, size - off as usize) };
        if n <= 0 {
            ok = false;
            break;
        }
    }
    set_blocking(sock, false);
    ok
}

/// The epoll server with blocking sendfile.
fn serve_epoll(l: &TcpListener, file: RawFd, size: usize, stop: &AtomicBool) {
    const LISTEN: u64 = u64::MAX;
    let head = head(size);
    let Ok(ep) = os::epoll() else {
        return;
    };
    let ep = ep.as_raw_fd();
    let _ = l.set_nonblocking(true);
    let lfd = l.as_raw_fd();
    let _ = os::epoll_ctl(ep, libc::EPOLL_CTL_ADD, lfd, libc::EPOLLIN as u32, LISTEN);
    let mut conns: HashMap<RawFd, (OwnedFd, Vec<u8>)> = HashMap::new();
    let mut evs = vec![libc::epoll_event { events: 0, u64: 0 }; 256];
    while !stop.load(Ordering::Relaxed) {
        let n = os::epoll_wait(ep, &mut evs, 50);
        for ev in &evs[..n] {
            let token = ev.u64;
            if token == LISTEN {
                accept_all(lfd, |c| {
                    let fd = c.as_raw_fd();
                    let _ =
                        os::epoll_ctl(ep, libc::EPOLL_CTL_ADD, fd, libc::EPOLLIN as u32, fd as u64);
                    conns.insert(fd, (c, Vec::new()));
                });
                continue;
            }
            let fd = token as RawFd;
            let Some((_, buf)) = conns.get_mut(&fd) else {
                continue;
            };
            let mut open = read_some(fd, buf);
            while open && take_request(buf) {
                open = send_head(fd, &head) && sendfile_all(fd, file, size);
            }
            if !open {
                // Closing the last fd of the socket takes it out of the epoll.
                conns.remove(&fd);
            }
        }
    }
}

/// One connection of the kevent server.
struct KConn {
    sock: OwnedFd,
    buf: Vec<u8>,
    /// The transfer in flight.
    aio: Option<u64>,
}

/// The kevent server: SOCKET kevents for requests, `kevent_aio_sendfile` for the bodies.
fn serve_kevent(b: Backend, l: &TcpListener, file: RawFd, size: usize, stop: &AtomicBool) {
    let head = head(size);
    // SAFETY: no ring.
    let Ok(q) = (unsafe { kevent_backend::init(b, std::ptr::null_mut(), 0, 0) }) else {
        return;
    };
    // SAFETY: kevent_init returned this fd; this function owns it.
    let qfd = unsafe { OwnedFd::from_raw_fd(q) };
    let _ = l.set_nonblocking(true);
    let lfd = l.as_raw_fd();
    let _ = b.ctl(
        q,
        KEVENT_CTL_ADD,
        &mut [server::socket_kevent(lfd, KEVENT_SOCKET_ACCEPT)],
    );
    let mut conns: HashMap<RawFd, KConn> = HashMap::new();
    let mut owner: HashMap<u64, RawFd> = HashMap::new();
    let mut evs = vec![ukevent::default(); 256];
    let timeout = libc::timespec {
        tv_sec: 0,
        tv_nsec: 50_000_000,
    };
    let close = |conns: &mut HashMap<RawFd, KConn>, owner: &mut HashMap<u64, RawFd>, fd| {
        if let Some(c) = conns.remove(&fd) {
            let mut gone = vec![server::socket_kevent(fd, KEVENT_SOCKET_RECV)];
            if let Some(id) = c.aio {
                owner.remove(&id);
                gone.push(ukevent::new(KEVENT_AIO, kevent_id::from_u64(id), 0, 0));
            }
            let _ = b.ctl(q, KEVENT_CTL_REMOVE, &mut gone);
        }
    };
    // Starts the response to the request waiting in `c.buf`, if there is one and no
    // transfer runs; `false` when the connection is over.
    let answer = |c: &mut KConn, fd: RawFd, owner: &mut HashMap<u64, RawFd>| {
        if c.aio.is_some() || !take_request(&mut c.buf) {
            return true;
        }
        if !send_head(fd, &head) {
            return false;
        }
        match b.aio_sendfile(q, c.sock.as_raw_fd(), file, 0, size as u64) {
            Ok(id) => {
                c.aio = Some(id);
                owner.insert(id, fd);
                true
            }
            Err(_) => false,
        }
    };
    while !stop.load(Ordering::Relaxed) {
        let Ok(n) = b.get_events(q, 1, &mut evs, &timeout, 0) else {
            break;
        };
        for e in evs[..n as usize].iter().copied() {
            if e.type_ == KEVENT_AIO {
                let Some(fd) = owner.remove(&e.id.as_u64()) else {
                    continue;
                };
                let open = e.ret_flags & KEVENT_RET_BROKEN == 0
                    && conns.get_mut(&fd).is_some_and(|c| {
                        c.aio = None;
                        // The client may have read the body and sent its next request
                        // before this event was taken: that request waits in `buf`.
                        answer(c, fd, &mut owner)
                    });
                if !open {
                    close(&mut conns, &mut owner, fd);
                }
                continue;
            }
            let fd = e.id.raw()[0] as RawFd;
            if fd == lfd {
                accept_all(lfd, |c| {
                    let cfd = c.as_raw_fd();
                    let _ = b.ctl(
                        q,
                        KEVENT_CTL_ADD,
                        &mut [server::socket_kevent(cfd, KEVENT_SOCKET_RECV)],
                    );
                    conns.insert(
                        cfd,
                        KConn {
                            sock: c,
                            buf: Vec::new(),
                            aio: None,
                        },
                    );
                });
                continue;
            }
            let Some(c) = conns.get_mut(&fd) else {
                continue;
            };
            let open = e.ret_flags & KEVENT_RET_BROKEN == 0
                && read_some(fd, &mut c.buf)
                && answer(c, fd, &mut owner);
            if !open {
                close(&mut conns, &mut owner, fd);
            }
        }
    }
    drop(conns);
    drop(qfd);
}

/// One run: the server on a thread pinned to `server_cpu`, the load generator in a child.
fn run_one(
    kind: Kind,
    load: &Load,
    file: RawFd,
    size: usize,
    server_cpu: Option<usize>,
    client_cpu: Option<usize>,
) -> Result<RunResult, String> {
    let l = listener().map_err(|e| format!("listen: {e}"))?;
    let port = l.local_addr().map_err(|e| e.to_string())?.port();
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = stop.clone();
    let thread = std::thread::spawn(move || {
        if let Some(cpu) = server_cpu {
            let _ = os::pin_thread(cpu);
        }
        match kind {
            Kind::EpollSendfile => serve_epoll(&l, file, size, &stop2),
            Kind::KeventAio(b) => serve_kevent(b, &l, file, size, &stop2),
        }
    });
    let result = drive(load, port, client_cpu);
    stop.store(true, Ordering::Relaxed);
    thread
        .join()
        .map_err(|_| "server thread panicked".to_owned())?;
    result
}

/// Runs the static-file benchmark.
pub fn run(opts: &Opts, _machine: &Machine) -> Section {
    os::raise_fd_limit();
    let cpus = os::allowed_cpus();
    let (server_cpu, client_cpu) = match cpus.as_slice() {
        [a, .., b] => (Some(*a), Some(*b)),
        _ => (None, None),
    };
    let mut notes = vec![];
    let (rounds, window_ms) = if opts.quick { (3, 400) } else { (7, 1500) };
    notes.push(format!(
        "Both servers run on one thread pinned to CPU {}, the load generator on CPU {}; the \
         fallback's AIO worker thread (decision P36) is started by the first kevent server and \
         inherits its CPU. With 1 MiB files all connections progress in near lockstep, so a \
         window counts responses in multiples of the connection count: those rows are coarse \
         (window {} ms).",
        server_cpu.map_or("(any)".into(), |c| c.to_string()),
        client_cpu.map_or("(any)".into(), |c| c.to_string()),
        window_ms * 5 / 2
    ));
    let mut kinds = vec![Kind::EpollSendfile];
    match Backend::current() {
        Ok(b) if b.has_aio() => kinds.push(Kind::KeventAio(b)),
        Ok(b) => notes.push(format!(
            "kevent AIO: the {b} backend has no kevent_aio_sendfile (a kevent kernel that \
             advertises five syscall numbers, decision P37): only epoll is measured"
        )),
        Err(e) => notes.push(format!("kevent AIO: {e}")),
    }
    let mut md = String::new();
    let _ = writeln!(
        md,
        "One file over HTTP/1.1 keep-alive, built-in load generator, {rounds} rounds of \
         {window_ms} ms (1 MiB: {} ms) per server and row (order alternating), page cache \
         warm. Ratio: \
         kevent AIO ÷ epoll + sendfile within each round, median [95% bootstrap interval]; \
         **bold** when the interval excludes 1.0, ≈ when it does not. Every response of a \
         row has the same size, so the bytes/s ratio is the req/s ratio.\n",
        window_ms * 5 / 2
    );
    md.push_str(
        "| file | conns | epoll + sendfile req/s | kevent AIO req/s | epoll MB/s | kevent MB/s | ratio |\n\
         |---|---|---|---|---|---|---|\n",
    );
    let mut rows = vec![];
    let mut summary = vec![];
    for size in SIZES {
        let (file, path) = match make_file(size) {
            Ok(f) => f,
            Err(e) => {
                notes.push(format!("{size} B file: {e}"));
                continue;
            }
        };
        let bytes_per = (head(size).len() + size) as f64;
        // A 1 MiB response takes the whole connection set hundreds of milliseconds: a
        // longer window, so that each connection completes a few in it.
        let window_ms = if size >= 1 << 20 {
            window_ms * 5 / 2
        } else {
            window_ms
        };
        for conns in CONNS {
            let load = Load::Builtin {
                conns,
                mode: Mode::KeepAlive,
                window_ms,
            };
            let mut rps: Vec<Vec<f64>> = vec![vec![]; kinds.len()];
            let mut ratios = vec![];
            for round in 0..rounds {
                let mut this = vec![None; kinds.len()];
                for k in 0..kinds.len() {
                    let ki = (k + round) % kinds.len();
                    match run_one(
                        kinds[ki],
                        &load,
                        file.as_raw_fd(),
                        size,
                        server_cpu,
                        client_cpu,
                    ) {
                        Ok(r) if r.errors == 0 && r.non_200 == 0 => {
                            eprintln!(
                                "static-files: {size} B c={conns} {} round {round}: {:.0} req/s",
                                kinds[ki].name(),
                                r.rps
                            );
                            rps[ki].push(r.rps);
                            this[ki] = Some(r.rps);
                        }
                        Ok(r) => notes.push(format!(
                            "{size} B c={conns} {} round {round}: {} errors, {} non-200 \
                             responses (run discarded)",
                            kinds[ki].name(),
                            r.errors,
                            r.non_200
                        )),
                        Err(e) => {
                            notes.push(format!("{size} B c={conns} {}: {e}", kinds[ki].name()))
                        }
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
                if let [Some(e), Some(k)] = this[..] {
                    ratios.push(k / e);
                }
            }
            let cell = |i: usize| {
                rps.get(i)
                    .and_then(|v| Interval::of(v))
                    .map_or("—".to_owned(), |iv| iv.cell(0))
            };
            let mbs = |i: usize| {
                rps.get(i)
                    .and_then(|v| Interval::of(v))
                    .map_or("—".to_owned(), |iv| {
                        format!("{:.0}", iv.median * bytes_per / 1e6)
                    })
            };
            let ratio = Interval::of(&ratios);
            let label = if size >= 1 << 20 {
                format!("{} MiB", size >> 20)
            } else {
                format!("{} KiB", size >> 10)
            };
            let _ = writeln!(
                md,
                "| {label} | {conns} | {} | {} | {} | {} | {} |",
                cell(0),
                cell(1),
                mbs(0),
                mbs(1),
                ratio.map_or("—".to_owned(), |r| r.ratio_cell())
            );
            if let Some(r) = ratio {
                summary.push(SummaryRow {
                    what: format!("static file {label}, c={conns}: kevent AIO ÷ epoll + sendfile"),
                    target: "issue 22: report the ratio".into(),
                    result: format!("{} ({})", r.cell(2), r.verdict("faster", "slower")),
                });
            }
            rows.push(Json::obj([
                ("file_bytes", Json::from(size)),
                ("conns", Json::from(conns)),
                (
                    "rps",
                    Json::arr(kinds.iter().enumerate().map(|(i, k)| {
                        Json::obj([
                            ("server", Json::from(k.name())),
                            ("samples", Json::arr(rps[i].iter().map(|&x| Json::from(x)))),
                        ])
                    })),
                ),
                ("ratio", ratio.map_or(Json::from("none"), |r| r.json())),
            ]));
        }
        drop(file);
        let _ = std::fs::remove_file(path);
    }
    md.push('\n');
    for n in &notes {
        let _ = writeln!(md, "* {n}");
    }
    Section {
        name: "static-files",
        title: "Static files: kevent_aio_sendfile vs epoll + sendfile (issue 22)".into(),
        markdown: md,
        json: Json::obj([
            ("rounds", Json::from(rounds)),
            ("window_ms", Json::from(window_ms)),
            ("rows", Json::arr(rows)),
            (
                "notes",
                Json::arr(notes.iter().map(|n| Json::from(n.as_str()))),
            ),
        ]),
        charts: vec![],
        summary,
    }
}
