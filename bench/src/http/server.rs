//! The single-threaded HTTP/1.1 servers: one on raw epoll, one on a kevent queue driven
//! through the raw ABI calls, one on the safe `kevent` API, one on a kevent queue with the
//! asynchronous ring (P38), one on io_uring. All share the connection logic
//! ([`Conn`]): read what is there, answer every complete request
//! with a static `200 OK`, keep the connection open (HTTP/1.1 default, or HTTP/1.0 with
//! `Connection: keep-alive`) or close it after the response (HTTP/1.0 default, or
//! `Connection: close`).
//!
//! The first three are level-triggered and read once per readiness; the last two are
//! edge-triggered (their mechanisms post a wake-up as it happens) and read until a short
//! read. All accept with `accept4` until `EAGAIN` and answer with one `write`. They differ
//! only in the event mechanism:
//!
//! * epoll: `EPOLL_CTL_ADD` per accepted socket, `close` to unregister;
//! * kevent (raw): the accepted sockets of one wait are registered with one `kevent_ctl(ADD)`
//!   (with `KEVENT_REQ_ALWAYS_QUEUE`, so a socket that already has its request is registered
//!   and queued rather than returned from ADD), and a connection is closed without REMOVE,
//!   as the epoll server closes without `EPOLL_CTL_DEL`: natively the last close of a
//!   socket unregisters its kevents (D10, `kevent_release_file`), so a REMOVE first would
//!   only look the kevent up once more; the fallback's epoll drops its item at that close
//!   too and reports the old kevent once, `BROKEN` with `-EBADF`, when a socket accepted on
//!   the number is ADDed (such a report is ignored: [`stale`]);
//! * kevent (safe API): `Queue::add_all` registers the sockets accepted in one wait (one
//!   `kevent_ctl(ADD)`); each connection is a `Registration<TcpStream>` that owns the socket,
//!   and closing one drops it: REMOVE, then close (one `kevent_ctl` per connection closed);
//! * kevent (asynchronous ring): as the raw server, with `KEVENT_REQ_ET` (see
//!   [`serve_ring`] for why), events read from the ring with no call and `kevent_wait` only
//!   when the ring is empty;
//! * io_uring: a multishot `POLL_ADD` per socket, completions reaped from the CQ ring with
//!   no call, `io_uring_enter` to submit and wait when it is empty, `POLL_REMOVE` before a
//!   close ([`serve_uring`]).
//!
//! # Safety
//!
//! `accept4`, `read`, `write` and `close` are called on fds this module owns (the listener's
//! fd is borrowed from the `TcpListener` for the whole run; accepted fds are closed exactly
//! once, when their owning `Conn` is dropped from the table, or owned by a `TcpStream` inside
//! a registration whose `Conn` outlives no longer than it), with pointers to buffers that
//! live across each call.
#![allow(unsafe_code)]

use std::net::{TcpListener, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use kevent::{Events, Queue, Registration, ReqFlags, Socket, SocketEvents};
use kevent_backend::Backend;
use kevent_sys::{
    KEVENT_CTL_ADD, KEVENT_CTL_MODIFY, KEVENT_REQ_ALWAYS_QUEUE, KEVENT_REQ_ET, KEVENT_RET_BROKEN,
    KEVENT_SOCKET, KEVENT_SOCKET_ACCEPT, KEVENT_SOCKET_RECV, KEVENT_SOCKET_SEND, kevent_id,
    ukevent,
};

use crate::os;
use crate::rawqueue::{RawQueue, timeout_ms};
use crate::uring::{Completion, Uring};

const BODY: &str = "Hello, world\n";

/// Events taken per wait, the same for both servers (nginx's default for epoll).
const EVENTS: usize = 512;

fn response(keep_alive: bool) -> String {
    format!(
        "HTTP/1.1 200 OK\r\nServer: kevent-bench\r\nContent-Type: text/plain\r\n\
         Content-Length: {}\r\nConnection: {}\r\n\r\n{BODY}",
        BODY.len(),
        if keep_alive { "keep-alive" } else { "close" }
    )
}

/// What a server did during one run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ServerStats {
    /// Responses written.
    pub requests: u64,
    /// Connections accepted.
    pub accepted: u64,
    /// Waits made (`epoll_wait` / `kevent_get_events` / `kevent_wait` / `io_uring_enter`
    /// with `GETEVENTS`).
    pub waits: u64,
    /// Control calls made (`epoll_ctl` / `kevent_ctl`; io_uring: `io_uring_enter` calls that
    /// only submit, the polls and removes riding on the waits' calls otherwise).
    pub ctls: u64,
    /// Events taken from the mechanism (the listener's included): with one per response a
    /// connection per request costs two (its listener's share and its own), more when a
    /// connection is reported again.
    pub events: u64,
}

/// What to do with a connection after it was served.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// Keep waiting for its next request.
    Read,
    /// Part of the response is still unsent: wait until writable.
    Write,
    /// Close it (response sent with `Connection: close`, EOF, error or oversized request).
    Close,
}

/// One connection's buffered input and unsent output.
#[derive(Debug)]
pub struct Conn {
    fd: RawFd,
    /// Closes `fd` when dropped (false: a `TcpStream` elsewhere owns it).
    owned: bool,
    input: Vec<u8>,
    output: Vec<u8>,
    sent: usize,
    close_after: bool,
}

impl Drop for Conn {
    fn drop(&mut self) {
        if self.owned {
            // SAFETY: `fd` was returned by accept4 to this Conn, which is its only owner.
            unsafe { libc::close(self.fd) };
        }
    }
}

/// The request head `head` (up to the blank line) asks for keep-alive.
pub fn keep_alive(head: &[u8]) -> bool {
    let mut lines = head
        .split(|&b| b == b'\n')
        .map(|l| l.strip_suffix(b"\r").unwrap_or(l));
    let http11 = lines
        .next()
        .is_some_and(|l| l.len() >= 8 && l[l.len() - 8..].eq_ignore_ascii_case(b"HTTP/1.1"));
    for l in lines {
        if l.len() > 11 && l[..11].eq_ignore_ascii_case(b"connection:") {
            let v = &l[11..];
            let has = |w: &[u8]| v.windows(w.len()).any(|x| x.eq_ignore_ascii_case(w));
            if has(b"close") {
                return false;
            }
            if has(b"keep-alive") {
                return true;
            }
        }
    }
    http11
}

impl Conn {
    fn new(fd: RawFd, owned: bool) -> Conn {
        Conn {
            fd,
            owned,
            input: Vec::with_capacity(1024),
            output: Vec::new(),
            sent: 0,
            close_after: false,
        }
    }

    /// Reads once and answers every complete request. `responses` are the keep-alive and
    /// close answers.
    fn on_readable(&mut self, responses: &[Vec<u8>; 2], served: &mut u64) -> Next {
        self.read_and_answer(responses, served).0
    }

    /// Edge-triggered readiness: reads until a read comes back short (the socket's queue was
    /// empty then, so any later byte is a new edge), `EAGAIN`, EOF or an error, answering
    /// every complete request.
    fn on_edge(&mut self, responses: &[Vec<u8>; 2], served: &mut u64) -> Next {
        loop {
            match self.read_and_answer(responses, served) {
                (Next::Read, true) => {}
                (next, _) => return next,
            }
        }
    }

    /// [`Conn::on_readable`], and whether the read filled the whole buffer (more may be
    /// queued).
    fn read_and_answer(&mut self, responses: &[Vec<u8>; 2], served: &mut u64) -> (Next, bool) {
        let mut buf = [0u8; 4096];
        // SAFETY: `buf` is a local of the length passed.
        let n = unsafe { libc::read(self.fd, buf.as_mut_ptr().cast(), buf.len()) };
        if n < 0 {
            let e = std::io::Error::last_os_error().raw_os_error();
            return if e == Some(libc::EAGAIN) {
                (Next::Read, false)
            } else {
                (Next::Close, false)
            };
        }
        if n == 0 {
            return (Next::Close, false);
        }
        let full = n as usize == buf.len();
        self.input.extend_from_slice(&buf[..n as usize]);
        let mut start = 0;
        while let Some(end) = find_head_end(&self.input[start..]) {
            let ka = keep_alive(&self.input[start..start + end]);
            self.output.extend_from_slice(&responses[usize::from(!ka)]);
            *served += 1;
            start += end + 4;
            if !ka {
                self.close_after = true;
                break;
            }
        }
        self.input.drain(..start);
        if self.input.len() > 16 * 1024 {
            return (Next::Close, false);
        }
        (self.flush(), full)
    }

    /// Writes what is unsent.
    fn flush(&mut self) -> Next {
        while self.sent < self.output.len() {
            let rest = &self.output[self.sent..];
            // SAFETY: `rest` lives across the call and its length is passed.
            let n = unsafe { libc::write(self.fd, rest.as_ptr().cast(), rest.len()) };
            if n < 0 {
                let e = std::io::Error::last_os_error().raw_os_error();
                return if e == Some(libc::EAGAIN) {
                    Next::Write
                } else {
                    Next::Close
                };
            }
            self.sent += n as usize;
        }
        self.output.clear();
        self.sent = 0;
        if self.close_after {
            Next::Close
        } else {
            Next::Read
        }
    }
}

pub(super) fn find_head_end(b: &[u8]) -> Option<usize> {
    b.windows(4).position(|w| w == b"\r\n\r\n")
}

/// Accepts every pending connection (non-blocking, close-on-exec).
pub(super) fn accept_all(listener: RawFd, mut f: impl FnMut(RawFd)) {
    loop {
        // SAFETY: null address pointers: the peer address is not wanted.
        let fd = unsafe {
            libc::accept4(
                listener,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            )
        };
        if fd < 0 {
            return; // EAGAIN, or EMFILE: the rest stays pending until fds are free.
        }
        f(fd);
    }
}

/// The connection table, indexed by fd.
struct Conns(Vec<Option<Conn>>);

impl Conns {
    fn insert(&mut self, fd: RawFd) {
        let i = fd as usize;
        if self.0.len() <= i {
            self.0.resize_with(i + 1, || None);
        }
        self.0[i] = Some(Conn::new(fd, true));
    }

    fn get(&mut self, fd: RawFd) -> Option<&mut Conn> {
        self.0.get_mut(fd as usize)?.as_mut()
    }

    /// Drops (and so closes) the connection on `fd`.
    fn close(&mut self, fd: RawFd) {
        if let Some(slot) = self.0.get_mut(fd as usize) {
            *slot = None;
        }
    }
}

/// Which event mechanism a server uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavour {
    /// Raw epoll.
    Epoll,
    /// A kevent queue on this backend, through the raw ABI calls.
    Kevent(Backend),
    /// A kevent queue on this backend, through the safe API (`kevent::Queue`).
    Safe(Backend),
    /// A kevent queue with the asynchronous ring (P38) on this backend, through the raw ABI
    /// calls: events read from the ring with no call, `kevent_wait` only when it is empty.
    Ring(Backend),
    /// io_uring: multishot `POLL_ADD` readiness, completions reaped from the CQ ring.
    Uring,
}

/// Serves on `listener` until `stop` is set (checked at least every 50 ms).
pub fn serve(flavour: Flavour, listener: &TcpListener, stop: &AtomicBool) -> ServerStats {
    listener
        .set_nonblocking(true)
        .expect("non-blocking listener");
    match flavour {
        Flavour::Epoll => serve_epoll(listener.as_raw_fd(), stop),
        Flavour::Kevent(b) => serve_kevent(b, listener.as_raw_fd(), stop),
        Flavour::Safe(b) => serve_safe(b, listener, stop),
        Flavour::Ring(b) => serve_ring(b, listener.as_raw_fd(), stop),
        Flavour::Uring => serve_uring(listener.as_raw_fd(), stop),
    }
}

fn responses() -> [Vec<u8>; 2] {
    [response(true).into_bytes(), response(false).into_bytes()]
}

fn serve_epoll(lfd: RawFd, stop: &AtomicBool) -> ServerStats {
    let responses = responses();
    let ep = os::epoll().expect("epoll_create1");
    let ep = ep.as_raw_fd();
    let mut st = ServerStats::default();
    let (rd, wr) = (libc::EPOLLIN as u32, libc::EPOLLOUT as u32);
    os::epoll_ctl(ep, libc::EPOLL_CTL_ADD, lfd, rd, lfd as u64).expect("epoll_ctl");
    let mut conns = Conns(Vec::new());
    let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; EVENTS];
    while !stop.load(Ordering::Relaxed) {
        let n = os::epoll_wait(ep, &mut events, 50);
        st.waits += 1;
        st.events += n as u64;
        for e in &events[..n] {
            let fd = e.u64 as RawFd;
            if fd == lfd {
                accept_all(lfd, |c| {
                    conns.insert(c);
                    st.accepted += 1;
                    st.ctls += 1;
                    let _ = os::epoll_ctl(ep, libc::EPOLL_CTL_ADD, c, rd, c as u64);
                });
                continue;
            }
            let Some(conn) = conns.get(fd) else { continue };
            let was_writing = !conn.output.is_empty();
            let next = if was_writing {
                conn.flush()
            } else {
                conn.on_readable(&responses, &mut st.requests)
            };
            match next {
                Next::Close => conns.close(fd),
                Next::Write if !was_writing => {
                    st.ctls += 1;
                    let _ = os::epoll_ctl(ep, libc::EPOLL_CTL_MOD, fd, wr, fd as u64);
                }
                Next::Read if was_writing => {
                    st.ctls += 1;
                    let _ = os::epoll_ctl(ep, libc::EPOLL_CTL_MOD, fd, rd, fd as u64);
                }
                _ => {}
            }
        }
    }
    st
}

/// The control calls one batch of events asks for, made together after it: one MODIFY,
/// one ADD for the sockets it accepted. Connections are closed where they end, without
/// REMOVE: their last close unregisters their kevents (D10).
#[derive(Default)]
struct Batch {
    adds: Vec<ukevent>,
    modifies: Vec<ukevent>,
}

impl Batch {
    fn flush(&mut self, q: &RawQueue, conns: &mut Conns, st: &mut ServerStats) {
        if !self.modifies.is_empty() {
            st.ctls += 1;
            let _ = q.ctl(KEVENT_CTL_MODIFY, &mut self.modifies);
            self.modifies.clear();
        }
        if !self.adds.is_empty() {
            st.ctls += 1;
            // Entries written back are failures (BROKEN): with ALWAYS_QUEUE a ready socket is
            // registered and queued, not returned.
            let back = q.ctl(KEVENT_CTL_ADD, &mut self.adds).unwrap_or(0) as usize;
            for e in &self.adds[..back] {
                if e.ret_flags & KEVENT_RET_BROKEN != 0 && !stale(e) {
                    conns.close(e.id.raw()[0] as RawFd);
                }
            }
            self.adds.clear();
        }
    }
}

/// A `BROKEN` report about a closed connection's registration, not the current one's: D10
/// reports a kevent whose fd no longer names its file once with `-EBADF` (the fallback does so
/// when a socket accepted on the number is ADDed; natively the last close unregistered it).
/// The server closes only connections that are done, so such a report never concerns the
/// connection now on that number.
fn stale(e: &ukevent) -> bool {
    e.ret_data[1] == (-libc::EBADF) as u32
}

pub(super) fn socket_kevent(fd: RawFd, event: u32) -> ukevent {
    ukevent::new(
        KEVENT_SOCKET,
        kevent_id::from_raw([fd as u32, 0]),
        event,
        KEVENT_REQ_ALWAYS_QUEUE,
    )
}

fn serve_kevent(backend: Backend, lfd: RawFd, stop: &AtomicBool) -> ServerStats {
    let responses = responses();
    let q = RawQueue::new(backend, 0).expect("kevent_init");
    let mut st = ServerStats::default();
    let mut l = [socket_kevent(lfd, KEVENT_SOCKET_ACCEPT)];
    assert_eq!(q.ctl(KEVENT_CTL_ADD, &mut l), Ok(0), "ADD listener");
    let mut conns = Conns(Vec::new());
    let mut events = vec![ukevent::default(); EVENTS];
    let mut batch = Batch::default();
    let timeout = timeout_ms(50);
    while !stop.load(Ordering::Relaxed) {
        let n = q.get_events(1, &mut events, &timeout).unwrap_or(0) as usize;
        st.waits += 1;
        st.events += n as u64;
        for e in &events[..n] {
            let fd = e.id.raw()[0] as RawFd;
            if fd == lfd {
                accept_all(lfd, |c| {
                    conns.insert(c);
                    st.accepted += 1;
                    batch.adds.push(socket_kevent(c, KEVENT_SOCKET_RECV));
                });
                continue;
            }
            let Some(conn) = conns.get(fd) else { continue };
            let was_writing = !conn.output.is_empty();
            let next = if e.ret_flags & KEVENT_RET_BROKEN != 0 {
                if stale(e) {
                    continue;
                }
                Next::Close
            } else if was_writing {
                conn.flush()
            } else {
                conn.on_readable(&responses, &mut st.requests)
            };
            match next {
                // No later event of this wait names the old registration (a kevent is
                // delivered at most once per wait), and a socket accepted on the same number
                // later in the loop is only registered after it: closed here, like epoll.
                Next::Close => conns.close(fd),
                Next::Write if !was_writing => {
                    batch.modifies.push(socket_kevent(fd, KEVENT_SOCKET_SEND))
                }
                Next::Read if was_writing => {
                    batch.modifies.push(socket_kevent(fd, KEVENT_SOCKET_RECV))
                }
                _ => {}
            }
        }
        batch.flush(&q, &mut conns, &mut st);
    }
    st
}

/// The asynchronous ring's size: room for two full batches of the other servers' waits.
pub const RING_SIZE: u32 = 2 * EVENTS as u32;

/// The asynchronous-ring server (P38, raw ABI). Sockets are registered edge-triggered
/// (`KEVENT_REQ_ET | KEVENT_REQ_ALWAYS_QUEUE`): P38/P40 let the producer post an
/// edge-triggered socket kevent into the ring from the wake-up itself, while a level-triggered
/// one is always moved by the next `kevent_wait` (so the ring would save no call). Edge
/// triggering is correct here because every connection is read until a short read (a later
/// byte is a new edge), the listener is accepted from until `EAGAIN`, and ALWAYS_QUEUE
/// queues a socket that already holds its request at ADD as one edge; MODIFY to SEND and back
/// re-evaluates the socket (D17), so nothing that arrived meanwhile is lost.
///
/// An event posted before a connection's close stays in the ring after it (the close
/// unregisters the kevent, not the slots the consumer owns), and its fd may name a newer
/// connection by the time it is read: so a `BROKEN` event is never taken on trust — the
/// socket is read, and only EOF or an error closes it (a stale event reads `EAGAIN`).
fn serve_ring(backend: Backend, lfd: RawFd, stop: &AtomicBool) -> ServerStats {
    let responses = responses();
    let mut q = RawQueue::new_async(backend, RING_SIZE).expect("kevent_init (async ring)");
    let mut st = ServerStats::default();
    let et = |fd, event| {
        let mut e = socket_kevent(fd, event);
        e.req_flags |= KEVENT_REQ_ET;
        e
    };
    let mut l = [et(lfd, KEVENT_SOCKET_ACCEPT)];
    assert_eq!(q.ctl(KEVENT_CTL_ADD, &mut l), Ok(0), "ADD listener");
    let mut conns = Conns(Vec::new());
    let mut ready: Vec<(RawFd, bool)> = Vec::with_capacity(RING_SIZE as usize);
    let mut batch = Batch::default();
    let timeout = timeout_ms(50);
    while !stop.load(Ordering::Relaxed) {
        // No call while the ring has events.
        let got = q.consume_async(|e| {
            ready.push((e.id.raw()[0] as RawFd, e.ret_flags & KEVENT_RET_BROKEN != 0));
        });
        if got == 0 {
            // Empty: returns at once if an event was posted since the look; otherwise moves
            // what is queued, or sleeps until something is posted or queued.
            st.waits += 1;
            let _ = q.wait_async(&timeout);
            continue;
        }
        st.events += ready.len() as u64;
        let mut listener_ready = false;
        for (fd, broken) in ready.drain(..) {
            if fd == lfd {
                listener_ready = true;
                continue;
            }
            let Some(conn) = conns.get(fd) else { continue };
            let was_writing = !conn.output.is_empty();
            let mut next = if was_writing {
                conn.flush()
            } else {
                conn.on_edge(&responses, &mut st.requests)
            };
            if broken && next == Next::Read {
                // A hang-up reads as EOF or an error; EAGAIN: a stale event (see above).
                next = conn.on_edge(&responses, &mut st.requests);
            }
            match next {
                // Events of it still in the ring are confirmed by a read (above).
                Next::Close => conns.close(fd),
                Next::Write if !was_writing => batch.modifies.push(et(fd, KEVENT_SOCKET_SEND)),
                Next::Read if was_writing => batch.modifies.push(et(fd, KEVENT_SOCKET_RECV)),
                _ => {}
            }
        }
        if listener_ready {
            // Once per look at the ring, however many of the listener's wake-ups it held, and
            // after the connections' events: every accept that finds the queue empty
            // allocates and frees a whole socket file before it says EAGAIN.
            accept_all(lfd, |c| {
                conns.insert(c);
                st.accepted += 1;
                batch.adds.push(et(c, KEVENT_SOCKET_RECV));
            });
        }
        batch.flush(&q, &mut conns, &mut st);
    }
    st
}

/// The io_uring server: one multishot `POLL_ADD` per socket (`POLLIN`; `POLLOUT` while a
/// response is unsent), completions reaped from the CQ ring with no call, `io_uring_enter`
/// to submit what the batch queued and to wait only when the CQ ring is empty (one call does
/// both). A poll holds its file: a connection's poll is removed (`POLL_REMOVE`, submitted
/// before the close) so that the close releases the socket. Each poll's `user_data` is the
/// fd with a per-fd generation in the high half, so a completion of a closed connection's
/// poll is never taken for a newer connection on the same fd number. Multishot polls report
/// each wake-up (edge-like): connections are read until a short read, the listener accepted
/// from until `EAGAIN`; a poll armed on a socket that already holds its request completes at
/// once.
fn serve_uring(lfd: RawFd, stop: &AtomicBool) -> ServerStats {
    let responses = responses();
    let mut u = Uring::new(EVENTS as u32 * 2, 16384).expect("io_uring_setup");
    assert!(u.has_wait_timeout(), "io_uring without IORING_FEAT_EXT_ARG");
    let mut st = ServerStats::default();
    let (rd, wr) = (libc::POLLIN as u32, libc::POLLOUT as u32);
    let tag = |fd: RawFd, generation: u32| (u64::from(generation) << 32) | fd as u64;
    const LISTENER: u64 = u64::MAX - 1;
    u.poll_add_tagged(lfd, rd, LISTENER)
        .expect("POLL_ADD listener");
    let mut conns = Conns(Vec::new());
    let mut generation: Vec<u32> = Vec::new();
    let mut ready: Vec<Completion> = Vec::with_capacity(EVENTS * 2);
    let mut closing: Vec<RawFd> = vec![];
    let timeout = Duration::from_millis(50);
    while !stop.load(Ordering::Relaxed) {
        if !u.ready() {
            st.waits += 1;
            if u.wait_timeout(timeout).is_err() {
                continue;
            }
        }
        u.reap_each(|c| ready.push(c));
        st.events += ready.len() as u64;
        let mut listener_ready = false;
        for r in ready.drain(..) {
            if r.user_data == LISTENER {
                if !r.more {
                    let _ = u.poll_add_tagged(lfd, rd, LISTENER);
                }
                listener_ready = true;
                continue;
            }
            let fd = (r.user_data & 0xffff_ffff) as RawFd;
            let current = generation.get(fd as usize).map(|&g| tag(fd, g));
            if current != Some(r.user_data) {
                continue; // a closed connection's poll
            }
            let Some(conn) = conns.get(fd) else { continue };
            let was_writing = !conn.output.is_empty();
            let next = if was_writing {
                conn.flush()
            } else {
                conn.on_edge(&responses, &mut st.requests)
            };
            let interest = match next {
                Next::Close => {
                    if r.more {
                        let _ = u.poll_remove_tagged(r.user_data);
                    }
                    // No completion of this poll is taken for a later connection.
                    generation[fd as usize] = generation[fd as usize].wrapping_add(1);
                    closing.push(fd);
                    continue;
                }
                Next::Write if !was_writing => Some(wr),
                Next::Read if was_writing => Some(rd),
                _ => None,
            };
            match interest {
                Some(events) => {
                    // Another mask: remove this poll, arm one under a new generation.
                    if r.more {
                        let _ = u.poll_remove_tagged(r.user_data);
                    }
                    generation[fd as usize] = generation[fd as usize].wrapping_add(1);
                    let _ = u.poll_add_tagged(fd, events, tag(fd, generation[fd as usize]));
                }
                None if !r.more => {
                    // The multishot poll ended (e.g. the CQ ring overflowed): arm it again.
                    let mask = if was_writing { wr } else { rd };
                    let _ = u.poll_add_tagged(fd, mask, r.user_data);
                }
                None => {}
            }
        }
        if listener_ready {
            // Once per reaping, after the connections' completions (a multishot poll
            // completes at every wake-up of the listener): see `serve_ring`.
            accept_all(lfd, |c| {
                conns.insert(c);
                st.accepted += 1;
                let i = c as usize;
                if generation.len() <= i {
                    generation.resize(i + 1, 0);
                }
                generation[i] = generation[i].wrapping_add(1);
                if u.poll_add_tagged(c, rd, tag(c, generation[i])).is_err() {
                    conns.close(c);
                }
            });
        }
        if !closing.is_empty() {
            // The removes go in before the closes, so the closes release the sockets.
            st.ctls += 1;
            let _ = u.flush();
            for fd in closing.drain(..) {
                conns.close(fd);
            }
        } else if u.pending() > 0 && u.ready() {
            // Completions wait: submit now rather than with the next wait.
            st.ctls += 1;
            let _ = u.flush();
        }
    }
    // Remove every poll (each holds its socket) before the ring goes: closing the ring would
    // tear them down asynchronously, while the next server is being measured.
    let open: Vec<u64> = (0..conns.0.len())
        .filter(|&i| conns.0[i].is_some())
        .map(|i| tag(i as RawFd, generation[i]))
        .chain([LISTENER])
        .collect();
    for chunk in open.chunks(EVENTS) {
        for &t in chunk {
            let _ = u.poll_remove_tagged(t);
        }
        let _ = u.flush();
        u.reap_each(|_| ());
    }
    st
}

/// The safe-API server: connections are `Registration<TcpStream>`s, indexed by fd.
fn serve_safe(backend: Backend, listener: &TcpListener, stop: &AtomicBool) -> ServerStats {
    let responses = responses();
    let q = Queue::builder()
        .backend(backend)
        .build()
        .expect("kevent queue");
    let mut st = ServerStats::default();
    const LISTENER: u64 = u64::MAX;
    let _listening = q
        .add(
            Socket::new(listener, SocketEvents::ACCEPT)
                .flags(ReqFlags::ALWAYS_QUEUE)
                .token(LISTENER),
        )
        .expect("ADD listener");
    let lfd = listener.as_raw_fd();
    let mut conns: Vec<Option<(Registration<TcpStream>, Conn)>> = Vec::new();
    let mut events = Events::with_capacity(EVENTS);
    let mut accepted: Vec<TcpStream> = vec![];
    let timeout = Duration::from_millis(50);
    while !stop.load(Ordering::Relaxed) {
        let _ = q.wait(&mut events, timeout);
        st.waits += 1;
        st.events += events.len() as u64;
        for ev in &events {
            if ev.token() == LISTENER {
                accept_all(lfd, |c| {
                    if let Ok(fd) = os::owned(c) {
                        accepted.push(TcpStream::from(fd));
                    }
                });
                continue;
            }
            let fd = ev.token() as usize;
            let Some(Some((reg, conn))) = conns.get_mut(fd) else {
                continue;
            };
            let was_writing = !conn.output.is_empty();
            let next = if ev.is_broken() {
                Next::Close
            } else if was_writing {
                conn.flush()
            } else {
                conn.on_readable(&responses, &mut st.requests)
            };
            let interest = match next {
                Next::Close => {
                    st.ctls += 1;
                    conns[fd] = None; // REMOVE, then close
                    continue;
                }
                Next::Write if !was_writing => SocketEvents::SEND,
                Next::Read if was_writing => SocketEvents::RECV,
                _ => continue,
            };
            st.ctls += 1;
            if reg.modify().events(interest).apply().is_err() {
                conns[fd] = None;
            }
        }
        if !accepted.is_empty() {
            st.accepted += accepted.len() as u64;
            st.ctls += 1;
            let sources = accepted.drain(..).map(|s| {
                let fd = s.as_raw_fd();
                Socket::new(s, SocketEvents::RECV)
                    .flags(ReqFlags::ALWAYS_QUEUE)
                    .token(fd as u64)
            });
            // A refused stream is handed back inside its error, dropped here: closed.
            for reg in q.add_all(sources).into_iter().flatten() {
                let fd = reg.get_ref().as_raw_fd();
                let i = fd as usize;
                if conns.len() <= i {
                    conns.resize_with(i + 1, || None);
                }
                conns[i] = Some((reg, Conn::new(fd, false)));
            }
        }
    }
    st
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::TcpStream;
    use std::sync::Arc;

    #[test]
    fn keep_alive_rules() {
        assert!(keep_alive(b"GET / HTTP/1.1\r\nHost: x"));
        assert!(!keep_alive(b"GET / HTTP/1.1\r\nConnection: close"));
        assert!(!keep_alive(b"GET / HTTP/1.0\r\nHost: x"));
        assert!(keep_alive(b"GET / HTTP/1.0\r\nConnection: Keep-Alive"));
    }

    fn exercise(flavour: Flavour) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let s2 = stop.clone();
        let server = std::thread::spawn(move || serve(flavour, &listener, &s2));
        // Keep-alive: two pipelined requests, then one more on the same connection.
        let mut c = TcpStream::connect(addr).unwrap();
        c.write_all(b"GET / HTTP/1.1\r\nHost: a\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n")
            .unwrap();
        let want = response(true);
        let mut got = vec![0u8; want.len() * 2];
        c.read_exact(&mut got).unwrap();
        assert_eq!(got, format!("{want}{want}").as_bytes());
        c.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
        let mut one = vec![0u8; want.len()];
        c.read_exact(&mut one).unwrap();
        // Close: HTTP/1.0 without keep-alive is answered, then closed by the server.
        for _ in 0..20 {
            let mut c = TcpStream::connect(addr).unwrap();
            c.write_all(b"GET / HTTP/1.0\r\n\r\n").unwrap();
            let mut all = String::new();
            c.read_to_string(&mut all).unwrap();
            assert_eq!(all, response(false));
        }
        stop.store(true, Ordering::Relaxed);
        let st = server.join().unwrap();
        assert_eq!(st.requests, 23);
        assert_eq!(st.accepted, 21);
    }

    #[test]
    fn epoll_server_answers() {
        exercise(Flavour::Epoll);
    }

    #[test]
    fn kevent_server_answers() {
        exercise(Flavour::Kevent(Backend::fallback()));
    }

    #[test]
    fn safe_api_server_answers() {
        exercise(Flavour::Safe(Backend::fallback()));
    }

    #[test]
    fn async_ring_server_answers() {
        exercise(Flavour::Ring(Backend::fallback()));
        // Natively too, where a kevent kernel with P38 is running.
        if let Ok(b) = Backend::native()
            && RawQueue::new_async(b, 4).is_ok()
        {
            exercise(Flavour::Ring(b));
        }
    }

    #[test]
    fn io_uring_server_answers() {
        if let Err(why) = Uring::probe() {
            eprintln!("skipped: io_uring {why}");
            return;
        }
        exercise(Flavour::Uring);
    }
}
