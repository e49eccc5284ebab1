//! The HTTP load generator built into `kevent-bench` (issue 14 item 1), so that the HTTP
//! benchmark needs neither `wrk` nor `ab`.
//!
//! **Closed loop**: `conns` connections, each with exactly one request outstanding: a
//! connection sends a request, reads the whole response, then sends the next (keep-alive) or
//! waits for the server to close and connects again (connection per request, ab's HTTP/1.0
//! shape). One thread, non-blocking sockets on one epoll (edge-triggered, so no `epoll_ctl`
//! beyond the ADD of a new socket). The benchmark runs it as a child process
//! (`kevent-bench loadgen ...`) pinned to the other CPU than the server, like ab and wrk.
//!
//! **Pacing and ramp-up**: at most [`max_pending`] connections at a time are new, i.e.
//! connected (or connecting) but not yet answered on their socket. A new connection waits
//! in the server's listen queue until it is accepted; more than the queue holds
//! (`net.core.somaxconn`) and the kernel drops SYNs and handshake ACKs, so the run would
//! measure TCP's 1 s retransmission timer and resets, not the server. In keep-alive mode
//! this only paces the ramp-up; with a connection per request it caps how many connections
//! wait for the server at once (ab does not pace, so its `-c 8000` rows include those
//! stalls). The measured window starts once every connection has completed a first
//! response (after a least warm-up, and at [`RAMP_LIMIT_MS`] at the latest).
//!
//! **Counting**: a response counts when it is complete (status line, headers, and the
//! `Content-Length` body) and completed inside the measured window, by the clock read when
//! it completed (one read per response, not per loop turn: a turn handles up to 1024 events). Responses are parsed, not assumed: a status other than
//! 200 counts as `non_200`; a malformed response, a reset, a connection closed before its
//! response was complete, or a refused connect count as errors (each kind separately), and the
//! connection starts over. Requests/s = `ok` responses in the window ÷ the window.
//!
//! The run is bounded in time (`--secs` after `--warmup-ms`) and so in count; the parent
//! also kills the child if it overruns.
//!
//! # Safety
//!
//! `socket`, `connect`, `read`, `write`, `close`, `getsockopt`, `setsockopt` and the epoll
//! calls get fds this module owns (every socket fd is owned by exactly one [`Conn`] and closed
//! once, in [`Conn::close`] or on drop) and pointers to locals or buffers that live across
//! each call, with their lengths.
#![allow(unsafe_code)]

use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsRawFd, RawFd};

use crate::os;

/// How connections are used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// HTTP/1.1, one connection per client for the whole run (wrk's shape).
    KeepAlive,
    /// HTTP/1.0 without keep-alive: the server closes after each response, the client
    /// connects again (ab's shape, the historic `ab -c 8000`).
    Close,
}

impl Mode {
    /// `keep-alive` / `close`.
    pub fn name(self) -> &'static str {
        match self {
            Mode::KeepAlive => "keep-alive",
            Mode::Close => "close",
        }
    }

    /// Parses [`Mode::name`].
    pub fn parse(s: &str) -> Option<Mode> {
        match s {
            "keep-alive" => Some(Mode::KeepAlive),
            "close" => Some(Mode::Close),
            _ => None,
        }
    }

    fn request(self) -> &'static [u8] {
        match self {
            Mode::KeepAlive => {
                b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: kevent-bench\r\n\r\n"
            }
            Mode::Close => b"GET / HTTP/1.0\r\nHost: 127.0.0.1\r\nUser-Agent: kevent-bench\r\n\r\n",
        }
    }
}

/// One run's settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Spec {
    /// Server port on 127.0.0.1.
    pub port: u16,
    /// Concurrent connections.
    pub conns: usize,
    /// Keep-alive or connection per request.
    pub mode: Mode,
    /// Least warm-up before the measured window, in milliseconds. The window starts once
    /// this has passed *and* every connection has completed a first response (the ramp-up),
    /// or at `ramp_limit_ms` at the latest.
    pub warmup_ms: u64,
    /// The longest ramp-up (the child uses [`RAMP_LIMIT_MS`]).
    pub ramp_limit_ms: u64,
    /// The measured window, in milliseconds.
    pub window_ms: u64,
}

/// The longest ramp-up before the window starts anyway.
pub const RAMP_LIMIT_MS: u64 = 5000;

/// What a run counted. Response counts are those completed inside the measured window;
/// error counts cover the whole run (warm-up included).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Complete responses with status 200 in the window.
    pub ok: u64,
    /// Complete responses with another status in the window.
    pub non_200: u64,
    /// Connects refused or failed (`SO_ERROR`, or `connect` itself: e.g. no free port).
    pub connect_errors: u64,
    /// Reads or writes that failed (e.g. `ECONNRESET`).
    pub io_errors: u64,
    /// Responses that could not be parsed.
    pub parse_errors: u64,
    /// Connections the server closed before their response was complete.
    pub premature_closes: u64,
    /// Connections opened (including the first `conns`).
    pub connects: u64,
    /// The window actually measured, in microseconds.
    pub window_us: u64,
    /// Time from the start until every connection had completed its first response (or
    /// the ramp-up limit), in microseconds.
    pub ramp_us: u64,
    /// Complete 200 responses in the whole-wave window (P68): from the first response
    /// completed in the window (the anchor's) to the anchor connection's first response
    /// completed after the window's end, that one included, the first one not.
    pub wave_ok: u64,
    /// That window, in microseconds (0: the anchor did not come round again in time).
    pub wave_us: u64,
}

impl Counts {
    /// Every error counted.
    pub fn errors(&self) -> u64 {
        self.connect_errors + self.io_errors + self.parse_errors + self.premature_closes
    }

    /// `ok` responses per second of the window.
    pub fn rps(&self) -> f64 {
        if self.window_us == 0 {
            0.0
        } else {
            self.ok as f64 * 1e6 / self.window_us as f64
        }
    }

    /// `ok` responses per second of the whole-wave window (P68); `None` without one.
    pub fn wave_rps(&self) -> Option<f64> {
        (self.wave_us > 0).then(|| self.wave_ok as f64 * 1e6 / self.wave_us as f64)
    }

    /// The one-line report the child prints.
    pub fn line(&self) -> String {
        format!(
            "loadgen ok={} non_200={} connect_errors={} io_errors={} parse_errors={} \
             premature_closes={} connects={} window_us={} ramp_us={} wave_ok={} wave_us={}",
            self.ok,
            self.non_200,
            self.connect_errors,
            self.io_errors,
            self.parse_errors,
            self.premature_closes,
            self.connects,
            self.window_us,
            self.ramp_us,
            self.wave_ok,
            self.wave_us
        )
    }

    /// Parses [`Counts::line`] (the last such line of `out`).
    pub fn parse_line(out: &str) -> Option<Counts> {
        let line = out.lines().rev().find(|l| l.starts_with("loadgen "))?;
        let mut c = Counts::default();
        let mut seen = 0;
        for kv in line.split_whitespace().skip(1) {
            let (k, v) = kv.split_once('=')?;
            let v: u64 = v.parse().ok()?;
            let field = match k {
                "ok" => &mut c.ok,
                "non_200" => &mut c.non_200,
                "connect_errors" => &mut c.connect_errors,
                "io_errors" => &mut c.io_errors,
                "parse_errors" => &mut c.parse_errors,
                "premature_closes" => &mut c.premature_closes,
                "connects" => &mut c.connects,
                "window_us" => &mut c.window_us,
                "ramp_us" => &mut c.ramp_us,
                "wave_ok" => &mut c.wave_ok,
                "wave_us" => &mut c.wave_us,
                _ => continue,
            };
            *field = v;
            seen += 1;
        }
        (seen == 11).then_some(c)
    }
}

/// What the parser found in the bytes received so far.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Parsed {
    /// Not a whole response yet.
    Incomplete,
    /// One whole response of `len` bytes: its status, and whether the server will close.
    Response {
        /// Bytes the response took (head and body).
        len: usize,
        /// The status code.
        status: u16,
        /// `Connection: close`, or HTTP/1.0 without `Connection: keep-alive`.
        close: bool,
    },
    /// Not HTTP, or a response this client cannot delimit (no `Content-Length`).
    Invalid,
}

/// Largest response head accepted.
const MAX_HEAD: usize = 8192;

/// Parses the first response in `buf` (HTTP/1.0 or 1.1, `Content-Length` bodies).
pub fn parse_response(buf: &[u8]) -> Parsed {
    let Some(head_end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
        return if buf.len() > MAX_HEAD || (buf.len() >= 5 && !buf.starts_with(b"HTTP/")) {
            Parsed::Invalid
        } else {
            Parsed::Incomplete
        };
    };
    let head = &buf[..head_end];
    let mut lines = head
        .split(|&b| b == b'\n')
        .map(|l| l.strip_suffix(b"\r").unwrap_or(l));
    let status_line = lines.next().unwrap_or_default();
    // "HTTP/1.1 200 OK"
    let mut parts = status_line.splitn(3, |&b| b == b' ');
    let version = parts.next().unwrap_or_default();
    let http10 = match version {
        b"HTTP/1.1" => false,
        b"HTTP/1.0" => true,
        _ => return Parsed::Invalid,
    };
    let status = match parts
        .next()
        .and_then(|s| std::str::from_utf8(s).ok())
        .filter(|s| s.len() == 3)
        .and_then(|s| s.parse::<u16>().ok())
    {
        Some(s) if (100..600).contains(&s) => s,
        _ => return Parsed::Invalid,
    };
    let mut length = None;
    let mut close = http10;
    for line in lines {
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            return Parsed::Invalid;
        };
        let (name, value) = (&line[..colon], trim(&line[colon + 1..]));
        if name.eq_ignore_ascii_case(b"content-length") {
            match std::str::from_utf8(value)
                .ok()
                .and_then(|v| v.parse::<usize>().ok())
            {
                Some(n) => length = Some(n),
                None => return Parsed::Invalid,
            }
        } else if name.eq_ignore_ascii_case(b"connection") {
            if contains_ignore_case(value, b"close") {
                close = true;
            } else if contains_ignore_case(value, b"keep-alive") {
                close = false;
            }
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
            // Chunked bodies are not needed for these servers: not delimited here.
            return Parsed::Invalid;
        }
    }
    // 1xx, 204 and 304 have no body.
    let length = match (status, length) {
        (100..=199 | 204 | 304, _) => 0,
        (_, Some(n)) => n,
        (_, None) => return Parsed::Invalid,
    };
    let len = head_end + 4 + length;
    if buf.len() < len {
        Parsed::Incomplete
    } else {
        Parsed::Response { len, status, close }
    }
}

fn trim(v: &[u8]) -> &[u8] {
    let start = v
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(v.len());
    let end = v
        .iter()
        .rposition(|b| !b.is_ascii_whitespace())
        .map_or(start, |e| e + 1);
    &v[start..end.max(start)]
}

fn contains_ignore_case(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len())
        .any(|w| w.eq_ignore_ascii_case(needle))
}

/// Where a connection is in its request cycle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// `connect` in progress.
    Connecting,
    /// Request (partly) written; `usize` bytes sent.
    Sending(usize),
    /// Waiting for (the rest of) the response.
    Receiving,
    /// Response complete, the server announced a close: read until EOF, then reconnect
    /// (so that the server, the active closer, holds the TIME_WAIT, as with ab).
    Draining,
    /// No socket: connect again at the next loop turn.
    Idle,
}

/// One client connection.
#[derive(Debug)]
struct Conn {
    fd: RawFd,
    state: State,
    buf: Vec<u8>,
    /// Has completed at least one response (for the ramp-up).
    answered: bool,
    /// The current socket is still waiting for its first response (it counts as pending).
    pending: bool,
}

impl Conn {
    fn close(&mut self) {
        if self.fd >= 0 {
            // SAFETY: `fd` is this Conn's socket, closed exactly once (then set to -1).
            unsafe { libc::close(self.fd) };
            self.fd = -1;
        }
        self.state = State::Idle;
        self.buf.clear();
    }

    /// Closes with an RST (SO_LINGER 0): at the end of a run, so that thousands of
    /// keep-alive connections do not leave the client's ports in TIME_WAIT for the next run.
    fn abort(&mut self) {
        if self.fd >= 0 {
            let lin = libc::linger {
                l_onoff: 1,
                l_linger: 0,
            };
            // SAFETY: `lin` is a local of the size passed; the fd is ours.
            unsafe {
                libc::setsockopt(
                    self.fd,
                    libc::SOL_SOCKET,
                    libc::SO_LINGER,
                    (&raw const lin).cast(),
                    size_of::<libc::linger>() as libc::socklen_t,
                )
            };
        }
        self.close();
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.close();
    }
}

fn errno() -> i32 {
    io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// The whole client: connections, epoll, counters, and the clock of the window.
struct Client {
    spec: Spec,
    ep: std::os::fd::OwnedFd,
    conns: Vec<Conn>,
    counts: Counts,
    /// Start and end of the measured window (CLOCK_MONOTONIC ns).
    window: (u64, u64),
    now: u64,
    addr: libc::sockaddr_in,
    /// Connections without a socket, oldest first: they connect in that order (first in,
    /// first out: a connection that just closed must not overtake one that has waited, or
    /// the same few connections would cycle while the others starve).
    idle: VecDeque<usize>,
    /// Sockets not yet answered (see [`max_pending`]).
    pending: usize,
    /// At most this many at once.
    max_pending: usize,
    /// Connections that have completed a first response.
    answered: usize,
    /// The whole-wave window (P68): the connection whose response was the first completed
    /// in the window, and when.
    anchor: Option<(usize, u64)>,
    /// When the anchor's first response after the window's end completed.
    wave_end: Option<u64>,
}

impl Client {
    /// Closes connection `i`'s socket; it connects again at the next loop turn.
    fn drop_conn(&mut self, i: usize) {
        self.answer(i);
        self.conns[i].close();
        self.idle.push_back(i);
    }

    fn in_window(&self) -> bool {
        self.now >= self.window.0 && self.now < self.window.1
    }

    /// The whole-wave window (P68) for a response of connection `i` completed now: in a
    /// closed loop the connections take turns (the idle queue is first in, first out), so
    /// between two responses of one connection every other has had its turn about once,
    /// and a window from one response of the anchor to a later one of the same connection
    /// spans whole waves: it starts and ends at the same phase of the loop.
    fn count_wave(&mut self, i: usize, status: u16) {
        if self.now < self.window.0 || self.wave_end.is_some() {
            return;
        }
        let Some((anchor, _)) = self.anchor else {
            self.anchor = Some((i, self.now));
            return;
        };
        if status == 200 {
            self.counts.wave_ok += 1;
        }
        if anchor == i && self.now >= self.window.1 {
            self.wave_end = Some(self.now);
        }
    }

    /// Connection `i`'s socket no longer counts as pending (answered, or closed).
    fn answer(&mut self, i: usize) {
        if self.conns[i].pending {
            self.conns[i].pending = false;
            self.pending -= 1;
        }
    }

    /// Opens connection `i` (a new socket) and starts its connect.
    fn connect(&mut self, i: usize) {
        // SAFETY: socket takes no pointer.
        let fd = unsafe {
            libc::socket(
                libc::AF_INET,
                libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                0,
            )
        };
        if fd < 0 {
            self.counts.connect_errors += 1;
            self.idle.push_back(i);
            return;
        }
        // TCP_NODELAY as wrk and ab set it: requests are single small writes.
        os::set_nodelay(fd);
        let c = &mut self.conns[i];
        c.fd = fd;
        c.buf.clear();
        c.pending = true;
        self.pending += 1;
        self.counts.connects += 1;
        // SAFETY: `addr` is a sockaddr_in that lives across the call, with its size.
        let r = unsafe {
            libc::connect(
                fd,
                (&raw const self.addr).cast(),
                size_of::<libc::sockaddr_in>() as libc::socklen_t,
            )
        };
        let e = if r == 0 { 0 } else { errno() };
        if r != 0 && e != libc::EINPROGRESS {
            self.counts.connect_errors += 1;
            self.drop_conn(i);
            return;
        }
        let events = (libc::EPOLLIN | libc::EPOLLOUT | libc::EPOLLRDHUP | libc::EPOLLET) as u32;
        if os::epoll_ctl(
            self.ep.as_raw_fd(),
            libc::EPOLL_CTL_ADD,
            fd,
            events,
            i as u64,
        )
        .is_err()
        {
            self.counts.connect_errors += 1;
            self.drop_conn(i);
            return;
        }
        if r == 0 {
            self.conns[i].state = State::Sending(0);
            self.send(i);
        } else {
            self.conns[i].state = State::Connecting;
        }
    }

    /// Writes (the rest of) the request.
    fn send(&mut self, i: usize) {
        let req = self.spec.mode.request();
        let State::Sending(mut off) = self.conns[i].state else {
            return;
        };
        while off < req.len() {
            let rest = &req[off..];
            // SAFETY: `rest` lives across the call and its length is passed.
            let n = unsafe { libc::write(self.conns[i].fd, rest.as_ptr().cast(), rest.len()) };
            if n < 0 {
                if errno() == libc::EAGAIN {
                    self.conns[i].state = State::Sending(off);
                    return;
                }
                self.counts.io_errors += 1;
                self.drop_conn(i);
                return;
            }
            off += n as usize;
        }
        self.conns[i].state = State::Receiving;
    }

    /// Handles readiness of connection `i`.
    fn on_event(&mut self, i: usize, events: u32) {
        if self.conns[i].state == State::Connecting {
            if events & (libc::EPOLLOUT | libc::EPOLLERR | libc::EPOLLHUP) as u32 == 0 {
                return;
            }
            let mut err: libc::c_int = 0;
            let mut len = size_of::<libc::c_int>() as libc::socklen_t;
            // SAFETY: `err` and `len` are locals the call writes, `len` holding err's size.
            let r = unsafe {
                libc::getsockopt(
                    self.conns[i].fd,
                    libc::SOL_SOCKET,
                    libc::SO_ERROR,
                    (&raw mut err).cast(),
                    &mut len,
                )
            };
            if r != 0 || err != 0 {
                self.counts.connect_errors += 1;
                self.drop_conn(i);
                return;
            }
            self.conns[i].state = State::Sending(0);
        }
        if matches!(self.conns[i].state, State::Sending(_)) {
            self.send(i);
        }
        if matches!(self.conns[i].state, State::Receiving | State::Draining) {
            self.receive(i);
        }
    }

    /// Reads until `EAGAIN` (edge-triggered), handling each complete response.
    fn receive(&mut self, i: usize) {
        let mut chunk = [0u8; 4096];
        loop {
            let fd = self.conns[i].fd;
            if fd < 0 {
                return;
            }
            // SAFETY: `chunk` is a local of the length passed.
            let n = unsafe { libc::read(fd, chunk.as_mut_ptr().cast(), chunk.len()) };
            if n < 0 {
                if errno() != libc::EAGAIN {
                    self.counts.io_errors += 1;
                    self.drop_conn(i);
                }
                return;
            }
            if n == 0 {
                // EOF: expected after a response that announced the close; otherwise the
                // server dropped a request.
                let c = &self.conns[i];
                if c.state != State::Draining || !c.buf.is_empty() {
                    self.counts.premature_closes += 1;
                }
                self.drop_conn(i);
                return;
            }
            if self.conns[i].state == State::Draining {
                // Bytes after a response that announced a close: not HTTP this client asked for.
                self.counts.parse_errors += 1;
                self.drop_conn(i);
                return;
            }
            self.conns[i].buf.extend_from_slice(&chunk[..n as usize]);
            match parse_response(&self.conns[i].buf) {
                Parsed::Incomplete => {}
                Parsed::Invalid => {
                    self.counts.parse_errors += 1;
                    self.drop_conn(i);
                    return;
                }
                Parsed::Response { len, status, close } => {
                    // Each response is timed on its own: one turn of the loop can take a
                    // large part of the window at 8000 connections, and a turn's single
                    // timestamp made the count move in whole turns (issue 21).
                    self.now = os::now_ns();
                    self.answer(i);
                    if !self.conns[i].answered {
                        self.conns[i].answered = true;
                        self.answered += 1;
                    }
                    if self.in_window() {
                        if status == 200 {
                            self.counts.ok += 1;
                        } else {
                            self.counts.non_200 += 1;
                        }
                    }
                    self.count_wave(i, status);
                    if self.conns[i].buf.len() > len {
                        // More than one response to one request.
                        self.counts.parse_errors += 1;
                        self.drop_conn(i);
                        return;
                    }
                    self.conns[i].buf.clear();
                    if close || self.spec.mode == Mode::Close {
                        self.conns[i].state = State::Draining;
                    } else {
                        // The server sends nothing more before the next request: no read
                        // until EAGAIN (the next response is a new edge).
                        self.conns[i].state = State::Sending(0);
                        self.send(i);
                        return;
                    }
                }
            }
        }
    }
}

/// New (unanswered) connections allowed at once: three quarters of the listen queue the
/// kernel allows (`net.core.somaxconn`, 4096 by default: 3072), at least 64, at most
/// `conns`; and, on a kernel without SYN cookies (no `net.ipv4.tcp_syncookies`, or 0), at
/// most half of `net.ipv4.tcp_max_syn_backlog`: such a listener drops SYNs once its
/// half-open queue is within a quarter of that, and each drop costs the client a 1 s SYN
/// retransmission (the lane's guest, built without `CONFIG_SYN_COOKIES`, measured exactly
/// that: 6144 req/s for every server at 8000 connections, issue 21).
pub fn max_pending(conns: usize) -> usize {
    let read = |p: &str| {
        std::fs::read_to_string(p)
            .ok()
            .and_then(|s| s.trim().parse::<usize>().ok())
    };
    pending_cap(
        conns,
        read("/proc/sys/net/core/somaxconn").unwrap_or(128),
        read("/proc/sys/net/ipv4/tcp_syncookies").unwrap_or(0) != 0,
        read("/proc/sys/net/ipv4/tcp_max_syn_backlog").unwrap_or(128),
    )
}

/// [`max_pending`] for these settings.
fn pending_cap(conns: usize, somaxconn: usize, syncookies: bool, syn_backlog: usize) -> usize {
    let mut cap = somaxconn * 3 / 4;
    if !syncookies {
        cap = cap.min(syn_backlog / 2);
    }
    cap.max(64).min(conns.max(1))
}

/// Runs the load against 127.0.0.1:`spec.port` on the calling thread and returns what it
/// counted. Fails only when the epoll cannot be created.
pub fn run(spec: &Spec) -> io::Result<Counts> {
    let ep = os::epoll()?;
    let addr = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: spec.port.to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from_ne_bytes([127, 0, 0, 1]),
        },
        sin_zero: [0; 8],
    };
    let start = os::now_ns();
    let mut client = Client {
        spec: spec.clone(),
        ep,
        conns: (0..spec.conns)
            .map(|_| Conn {
                fd: -1,
                state: State::Idle,
                buf: Vec::new(),
                answered: false,
                pending: false,
            })
            .collect(),
        counts: Counts::default(),
        // Set when the ramp-up ends; until then nothing is in the window.
        window: (u64::MAX, u64::MAX),
        now: start,
        addr,
        idle: (0..spec.conns).collect(),
        pending: 0,
        max_pending: max_pending(spec.conns),
        answered: 0,
        anchor: None,
        wave_end: None,
    };
    let least = start + spec.warmup_ms * 1_000_000;
    let limit = start + spec.ramp_limit_ms.max(spec.warmup_ms) * 1_000_000;
    let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; 1024];
    // After the window, the loop runs on until the anchor comes round (P68), for at most
    // another window (2 s at least).
    let mut last = u64::MAX;
    let mut ended = false;
    loop {
        client.now = os::now_ns();
        if client.window.0 == u64::MAX
            && client.now >= least
            && (client.answered == spec.conns || client.now >= limit)
        {
            client.counts.ramp_us = (client.now - start) / 1000;
            client.window = (client.now, client.now + spec.window_ms * 1_000_000);
            last = client.window.1 + spec.window_ms.max(2000) * 1_000_000;
            os::profile_mark::<1>();
        }
        if client.now >= client.window.1 && !ended {
            os::profile_mark::<2>();
            ended = true;
        }
        if ended && (client.wave_end.is_some() || client.anchor.is_none() || client.now >= last) {
            break;
        }
        // Connections without a socket (new, closed by the server, failed) connect again,
        // at most `max_pending` unanswered at a time. A connection that failed to connect
        // waits for the next turn (at most 5 ms later), so a refused port does not spin.
        // Failures go to the back of `idle` again: at most one attempt per connection per turn.
        let mut turn = client.idle.len();
        while client.pending < client.max_pending && turn > 0 {
            let Some(i) = client.idle.pop_front() else {
                break;
            };
            client.connect(i);
            turn -= 1;
        }
        let left_ms = (if ended { last } else { client.window.1 })
            .saturating_sub(client.now)
            .div_ceil(1_000_000);
        let n = os::epoll_wait(client.ep.as_raw_fd(), &mut events, left_ms.min(5) as i32);
        client.now = os::now_ns();
        for e in &events[..n] {
            let (i, ev) = (e.u64 as usize, e.events);
            if i < client.conns.len() && client.conns[i].fd >= 0 {
                client.on_event(i, ev);
            }
        }
    }
    let end = client.now.min(client.window.1);
    client.counts.window_us = end.saturating_sub(client.window.0) / 1000;
    if let (Some((_, from)), Some(to)) = (client.anchor, client.wave_end) {
        client.counts.wave_us = (to - from) / 1000;
    } else {
        client.counts.wave_ok = 0;
    }
    for c in &mut client.conns {
        c.abort();
    }
    Ok(client.counts.clone())
}

/// The hidden `loadgen PORT CONNS keep-alive|close WARMUP_MS WINDOW_MS` subcommand: runs
/// [`run`] and prints [`Counts::line`].
pub fn child_main(args: &[String]) -> io::Result<u8> {
    let usage = || {
        eprintln!("usage: kevent-bench loadgen PORT CONNS keep-alive|close WARMUP_MS WINDOW_MS");
        Ok(2)
    };
    let [port, conns, mode, warmup, window] = args else {
        return usage();
    };
    let (Ok(port), Ok(conns), Some(mode), Ok(warmup_ms), Ok(window_ms)) = (
        port.parse(),
        conns.parse(),
        Mode::parse(mode),
        warmup.parse(),
        window.parse(),
    ) else {
        return usage();
    };
    os::raise_fd_limit();
    let counts = run(&Spec {
        port,
        conns,
        mode,
        warmup_ms,
        ramp_limit_ms: RAMP_LIMIT_MS,
        window_ms,
    })?;
    println!("{}", counts.line());
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::TcpListener;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    const OK: &[u8] =
        b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: keep-alive\r\n\r\nhello";

    #[test]
    fn pending_connections_stay_inside_the_listen_queues() {
        // The host's Debian kernel: SYN cookies, somaxconn 4096.
        assert_eq!(pending_cap(8000, 4096, true, 512), 3072);
        // The lane's guest: no SYN cookies; its default request queue, then the raised one.
        assert_eq!(pending_cap(8000, 4096, false, 512), 256);
        assert_eq!(pending_cap(8000, 16384, false, 65536), 8000);
        assert_eq!(pending_cap(20, 4096, true, 512), 20);
        assert_eq!(pending_cap(8000, 16, false, 16), 64);
    }

    #[test]
    fn parses_complete_incomplete_and_status() {
        assert_eq!(
            parse_response(OK),
            Parsed::Response {
                len: OK.len(),
                status: 200,
                close: false
            }
        );
        for cut in 0..OK.len() {
            assert_eq!(parse_response(&OK[..cut]), Parsed::Incomplete, "cut {cut}");
        }
        let nf = b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n";
        assert_eq!(
            parse_response(nf),
            Parsed::Response {
                len: nf.len(),
                status: 404,
                close: false
            }
        );
        // HTTP/1.0 closes unless it says keep-alive; Connection: close closes 1.1.
        let r10 = b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n";
        assert!(matches!(
            parse_response(r10),
            Parsed::Response { close: true, .. }
        ));
        let r10ka = b"HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 0\r\n\r\n";
        assert!(matches!(
            parse_response(r10ka),
            Parsed::Response { close: false, .. }
        ));
        let r11c = b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nab";
        assert!(matches!(
            parse_response(r11c),
            Parsed::Response {
                close: true,
                len: 59,
                ..
            }
        ));
        // A second response after the first: only the first is consumed.
        let two = [OK, OK].concat();
        assert!(matches!(parse_response(&two), Parsed::Response { len, .. } if len == OK.len()));
    }

    #[test]
    fn rejects_what_it_cannot_delimit() {
        for bad in [
            &b"SSH-2.0-OpenSSH\r\n\r\n"[..],
            b"HTTP/2 200\r\nContent-Length: 0\r\n\r\n",
            b"HTTP/1.1 20 OK\r\nContent-Length: 0\r\n\r\n",
            b"HTTP/1.1 200 OK\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nno colon here\r\nContent-Length: 0\r\n\r\n",
            b"garbage",
        ] {
            assert_eq!(
                parse_response(bad),
                Parsed::Invalid,
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        assert_eq!(parse_response(&[b'H'; MAX_HEAD + 1]), Parsed::Invalid);
        // 204 needs no length.
        assert!(matches!(
            parse_response(b"HTTP/1.1 204 No Content\r\n\r\n"),
            Parsed::Response { status: 204, .. }
        ));
    }

    #[test]
    fn the_report_line_round_trips() {
        let c = Counts {
            ok: 1,
            non_200: 2,
            connect_errors: 3,
            io_errors: 4,
            parse_errors: 5,
            premature_closes: 6,
            connects: 7,
            window_us: 2_000_000,
            ramp_us: 8,
            wave_ok: 9,
            wave_us: 3_000_000,
        };
        assert_eq!(
            Counts::parse_line(&format!("noise\n{}\n", c.line())),
            Some(c.clone())
        );
        assert_eq!(c.errors(), 18);
        assert_eq!(c.rps(), 0.5);
        assert_eq!(c.wave_rps(), Some(3.0));
        assert_eq!(Counts::default().wave_rps(), None);
        assert_eq!(Counts::parse_line("loadgen ok=1"), None);
        assert_eq!(Counts::parse_line(""), None);
    }

    /// A test server whose answers cycle through: 200 (keep-alive), 503, garbage, a reset
    /// (close without answering), and a 200 that announces `Connection: close`.
    fn misbehaving_server(stop: Arc<AtomicBool>) -> (u16, std::thread::JoinHandle<u64>) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        l.set_nonblocking(true).unwrap();
        let h = std::thread::spawn(move || {
            let mut served = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let Ok((mut s, _)) = l.accept() else {
                    std::thread::sleep(std::time::Duration::from_millis(1));
                    continue;
                };
                s.set_nonblocking(false).unwrap();
                s.set_read_timeout(Some(std::time::Duration::from_millis(200)))
                    .unwrap();
                let mut buf = [0u8; 1024];
                // Answer requests on this connection until it closes or we close it.
                loop {
                    let mut got = Vec::new();
                    while !got.windows(4).any(|w| w == b"\r\n\r\n") {
                        match s.read(&mut buf) {
                            Ok(0) | Err(_) => break,
                            Ok(n) => got.extend_from_slice(&buf[..n]),
                        }
                    }
                    if got.is_empty() {
                        break;
                    }
                    let answer: &[u8] = match served % 5 {
                        0 => b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
                        1 => b"HTTP/1.1 503 Busy\r\nContent-Length: 0\r\n\r\n",
                        2 => b"HTTP/1.1 2xx what\r\n\r\n",
                        3 => b"",
                        _ => b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok",
                    };
                    served += 1;
                    let _ = s.write_all(answer);
                    if answer.is_empty() || served % 5 == 0 || served % 5 == 3 {
                        break; // close: after garbage, instead of answering, or as announced
                    }
                }
            }
            served
        });
        (port, h)
    }

    #[test]
    fn counts_non_200s_and_each_kind_of_error() {
        let stop = Arc::new(AtomicBool::new(false));
        let (port, server) = misbehaving_server(stop.clone());
        let c = run(&Spec {
            port,
            conns: 1,
            mode: Mode::KeepAlive,
            warmup_ms: 0,
            ramp_limit_ms: 0,
            window_ms: 400,
        })
        .unwrap();
        stop.store(true, Ordering::Relaxed);
        let served = server.join().unwrap();
        assert!(served >= 10, "served {served}");
        // Each cycle of 5 answers: two 200s, one 503, one unparsable, one dropped request.
        assert!(c.ok >= 2 && c.non_200 >= 1, "{c:?}");
        assert!(c.parse_errors >= 1 && c.premature_closes >= 1, "{c:?}");
        assert!(c.ok.abs_diff(2 * c.non_200) <= 2, "{c:?}");
        assert!(c.parse_errors.abs_diff(c.non_200) <= 1, "{c:?}");
        assert!(c.connects >= 2 * c.non_200, "{c:?}");
        assert_eq!(c.connect_errors, 0);
    }

    #[test]
    fn a_closed_port_counts_connect_errors() {
        // Bind and drop: nothing listens on the port afterwards.
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let c = run(&Spec {
            port,
            conns: 3,
            mode: Mode::Close,
            warmup_ms: 0,
            ramp_limit_ms: 20,
            window_ms: 50,
        })
        .unwrap();
        assert_eq!((c.ok, c.non_200), (0, 0));
        assert!(c.connect_errors >= 3, "{c:?}");
        assert!(c.window_us >= 40_000, "{c:?}");
    }
}
