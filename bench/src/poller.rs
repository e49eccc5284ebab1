//! The poller benchmark (kqueue's "Poller_bench" shape, issue 6 item 1): N watched
//! descriptors, A of them active; one round writes one byte to each active descriptor, makes
//! one wait that returns them, and reads each byte. Reported in microseconds per round.
//!
//! Mechanisms: `select` (only while every fd is below `FD_SETSIZE`), `poll`, raw `epoll`
//! (level-triggered), and for each available kevent backend: `kevent_get_events` and the
//! ring (`kevent_wait`, read the entries published before `ring_kidx`, `kevent_commit`),
//! once committing after every wait and once committing when half the ring (512 of 1024
//! slots) has been read, the batching the ring allows. The same two calls also go through
//! the C library's exported functions (`kevent_get_events`; the ring with a commit per wait)
//! on the process's backend: what a C program gets, reported beside the Rust rows with their
//! C ÷ Rust ratios (issue 11).
//!
//! # Transports
//!
//! The historic benchmark used N socketpairs (2N fds). With an fd limit of 20000 that stops
//! below N = 10000, so the default transport is **unix-dgram**: N `AF_UNIX` datagram sockets,
//! each bound to an abstract address and connected to itself, so that a `write` on the
//! watched socket makes that same socket readable: N watched sockets cost N fds. (A single
//! sender that `sendto`s N bound sockets would also cost N + 1 fds, but every `sendto` then
//! looks the name up in the kernel's fixed 256-bucket abstract-name table, a cost that grows
//! with N and has nothing to do with the poller.) `--transport socketpair` measures the
//! historic shape at the N that fit. Columns that do not fit are reported as skipped, and the
//! largest N that fits (rounded down to a hundred) is measured as an extra column.
//!
//! # Method
//!
//! For each N, each repetition builds each mechanism's registration in turn (so only one
//! mechanism's wait queues hang on the sockets while it is timed), and for every A runs a
//! warm-up and then one timed block of rounds; mechanisms rotate order between repetitions.
//! A cell is the median (min–max) over repetitions of the block's mean µs per round.
//!
//! # Safety
//!
//! `select`, `poll`, `sendto`, `bind` and `socket` are called with pointers to locals, to
//! `fd_set`s or to `Vec`s that live across each call, with their true lengths.
#![allow(unsafe_code)]

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use kevent_backend::Backend;
use kevent_sys::{KEVENT_CTL_ADD, KEVENT_SOCKET, KEVENT_SOCKET_RECV, kevent_id, ukevent};

use crate::json::Json;
use crate::machine::Machine;
use crate::os;
use crate::rawqueue::{FOREVER, RawQueue};
use crate::stats::{Interval, RATIO_LEGEND, Summary, judge_at_most, ratio_cell};
use crate::svg::{LineChart, Series};
use crate::{Opts, Section, SummaryRow};

/// How the watched descriptors are made and made readable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    /// N `AF_UNIX` datagram sockets, each connected to itself (N fds).
    UnixDgram,
    /// N `AF_UNIX` stream socketpairs (2N fds), the historic shape.
    SocketPair,
}

impl Transport {
    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Transport::UnixDgram => "unix-dgram",
            Transport::SocketPair => "socketpair",
        }
    }

    /// Parses a `--transport` value.
    pub fn parse(s: &str) -> Option<Transport> {
        match s {
            "unix-dgram" => Some(Transport::UnixDgram),
            "socketpair" => Some(Transport::SocketPair),
            _ => None,
        }
    }

    fn fds_per_watched(self) -> usize {
        match self {
            Transport::UnixDgram => 1,
            Transport::SocketPair => 2,
        }
    }
}

/// The N watched descriptors and the means to make any of them readable.
struct Sockets {
    watched: Vec<OwnedFd>,
    writer: Writer,
}

enum Writer {
    Pairs(Vec<OwnedFd>),
    /// Each watched socket is connected to itself: writing to it makes it readable.
    SelfConnected,
}

impl Sockets {
    fn new(t: Transport, n: usize) -> std::io::Result<Sockets> {
        let mut watched = Vec::with_capacity(n);
        match t {
            Transport::SocketPair => {
                let mut writers = Vec::with_capacity(n);
                for _ in 0..n {
                    let mut sv = [0; 2];
                    // SAFETY: `sv` is a local array of the two ints the call writes.
                    let r = unsafe {
                        libc::socketpair(
                            libc::AF_UNIX,
                            libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                            0,
                            sv.as_mut_ptr(),
                        )
                    };
                    if r != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    watched.push(os::owned(sv[0])?);
                    writers.push(os::owned(sv[1])?);
                }
                Ok(Sockets {
                    watched,
                    writer: Writer::Pairs(writers),
                })
            }
            Transport::UnixDgram => {
                let tag = format!("kevent-bench.{}.{}", std::process::id(), os::now_ns());
                for i in 0..n {
                    let fd = dgram_socket()?;
                    // SAFETY: sockaddr_un is plain data; zeroes are a valid empty address.
                    let mut a: libc::sockaddr_un = unsafe { std::mem::zeroed() };
                    a.sun_family = libc::AF_UNIX as libc::sa_family_t;
                    let name = format!("{tag}.{i}");
                    // Abstract namespace: sun_path[0] = 0, then the name (no file is made).
                    for (dst, src) in a.sun_path[1..].iter_mut().zip(name.bytes()) {
                        *dst = src as libc::c_char;
                    }
                    let len = (size_of::<libc::sa_family_t>() + 1 + name.len()) as libc::socklen_t;
                    let addr = (&raw const a).cast::<libc::sockaddr>();
                    // SAFETY: `a` is a local sockaddr_un and `len` does not exceed its size;
                    // bind and connect only read it. Connecting the socket to its own name
                    // makes a later send() deliver to itself without a name lookup.
                    let r = unsafe {
                        match libc::bind(fd.as_raw_fd(), addr, len) {
                            0 => libc::connect(fd.as_raw_fd(), addr, len),
                            e => e,
                        }
                    };
                    if r != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    watched.push(fd);
                }
                Ok(Sockets {
                    watched,
                    writer: Writer::SelfConnected,
                })
            }
        }
    }

    /// Makes watched descriptor `i` readable (one byte).
    fn activate(&self, i: usize) {
        match &self.writer {
            Writer::Pairs(w) => os::write1(w[i].as_raw_fd()),
            Writer::SelfConnected => os::write1(self.watched[i].as_raw_fd()),
        }
    }
}

fn dgram_socket() -> std::io::Result<OwnedFd> {
    // SAFETY: socket takes no pointer.
    os::owned(unsafe {
        libc::socket(
            libc::AF_UNIX,
            libc::SOCK_DGRAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        )
    })
}

/// A mechanism measured by the poller benchmark.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Mech {
    Select,
    Poll,
    Epoll,
    /// `kevent_get_events` on backend `.0` (index into the machine's backends).
    KeventGet(usize),
    /// `kevent_wait` + ring + `kevent_commit` on backend `.0`; `.1`: commits deferred until
    /// half the ring is read.
    KeventRing(usize, bool),
    /// `kevent_get_events` through libkevent's exported C function, on the process's
    /// backend (`.0`, its index among the machine's backends).
    CGet(usize),
    /// The ring through libkevent's exported C functions, a commit per wait, on the process's
    /// backend `.0`.
    CRing(usize),
}

impl Mech {
    fn name(self, backends: &[Backend]) -> String {
        match self {
            Mech::Select => "select".into(),
            Mech::Poll => "poll".into(),
            Mech::Epoll => "epoll".into(),
            Mech::KeventGet(b) => format!("kevent get_events ({})", backends[b].as_str()),
            Mech::KeventRing(b, false) => {
                format!("kevent ring ({})", backends[b].as_str())
            }
            Mech::KeventRing(b, true) => {
                format!("kevent ring, batched commit ({})", backends[b].as_str())
            }
            Mech::CGet(b) => format!("C kevent_get_events ({})", backends[b].as_str()),
            Mech::CRing(b) => format!("C kevent ring ({})", backends[b].as_str()),
        }
    }

    /// The Rust row a C row is compared with (the same calls through the Rust dispatch).
    fn rust_twin(self) -> Option<Mech> {
        match self {
            Mech::CGet(b) => Some(Mech::KeventGet(b)),
            Mech::CRing(b) => Some(Mech::KeventRing(b, false)),
            _ => None,
        }
    }

    /// Whether this is a kevent row (compared with epoll).
    fn is_kevent(self) -> bool {
        !matches!(self, Mech::Select | Mech::Poll | Mech::Epoll)
    }

    fn key(self, backends: &[Backend]) -> String {
        match self {
            Mech::Select => "select".into(),
            Mech::Poll => "poll".into(),
            Mech::Epoll => "epoll".into(),
            Mech::KeventGet(b) => format!("kevent_get_events_{}", backends[b].as_str()),
            Mech::KeventRing(b, false) => format!("kevent_ring_{}", backends[b].as_str()),
            Mech::KeventRing(b, true) => {
                format!("kevent_ring_batched_commit_{}", backends[b].as_str())
            }
            Mech::CGet(b) => format!("c_kevent_get_events_{}", backends[b].as_str()),
            Mech::CRing(b) => format!("c_kevent_ring_{}", backends[b].as_str()),
        }
    }
}

/// A mechanism's registration of all N sockets, built for one repetition.
enum Poller {
    Select {
        master: libc::fd_set,
        nfds: i32,
    },
    Poll {
        pfds: Vec<libc::pollfd>,
    },
    Epoll {
        ep: OwnedFd,
        buf: Vec<libc::epoll_event>,
    },
    Get {
        q: RawQueue,
        buf: Vec<ukevent>,
    },
    Ring {
        q: RawQueue,
    },
}

const MAX_A: usize = 256;

impl Poller {
    fn build(m: Mech, s: &Sockets, backends: &[Backend]) -> Poller {
        match m {
            Mech::Select => {
                // SAFETY: fd_set is a plain bit array; zeroes are the empty set.
                let mut master: libc::fd_set = unsafe { std::mem::zeroed() };
                let mut max = 0;
                for w in &s.watched {
                    // SAFETY: the caller checked every fd is below FD_SETSIZE.
                    unsafe { libc::FD_SET(w.as_raw_fd(), &mut master) };
                    max = max.max(w.as_raw_fd());
                }
                Poller::Select {
                    master,
                    nfds: max + 1,
                }
            }
            Mech::Poll => Poller::Poll {
                pfds: s
                    .watched
                    .iter()
                    .map(|w| libc::pollfd {
                        fd: w.as_raw_fd(),
                        events: libc::POLLIN,
                        revents: 0,
                    })
                    .collect(),
            },
            Mech::Epoll => {
                let ep = os::epoll().expect("epoll_create1");
                for w in &s.watched {
                    let fd = w.as_raw_fd();
                    os::epoll_ctl(
                        ep.as_raw_fd(),
                        libc::EPOLL_CTL_ADD,
                        fd,
                        libc::EPOLLIN as u32,
                        fd as u64,
                    )
                    .expect("epoll_ctl ADD");
                }
                Poller::Epoll {
                    ep,
                    buf: vec![libc::epoll_event { events: 0, u64: 0 }; MAX_A],
                }
            }
            Mech::KeventGet(b) | Mech::KeventRing(b, _) | Mech::CGet(b) | Mech::CRing(b) => {
                let ring = if matches!(m, Mech::KeventRing(..) | Mech::CRing(_)) {
                    1024
                } else {
                    0
                };
                let q = match m {
                    Mech::CGet(_) | Mech::CRing(_) => RawQueue::new_c(ring)
                        .expect("the process has a backend")
                        .expect("kevent_init (C)"),
                    _ => RawQueue::new(backends[b], ring).expect("kevent_init"),
                };
                let mut adds: Vec<ukevent> = s
                    .watched
                    .iter()
                    .map(|w| {
                        let fd = w.as_raw_fd() as u32;
                        ukevent::new(
                            KEVENT_SOCKET,
                            kevent_id::from_raw([fd, 0]),
                            KEVENT_SOCKET_RECV,
                            0,
                        )
                    })
                    .collect();
                for chunk in adds.chunks_mut(4096) {
                    assert_eq!(q.ctl(KEVENT_CTL_ADD, chunk), Ok(0), "kevent_ctl ADD");
                }
                if ring == 0 {
                    Poller::Get {
                        q,
                        buf: vec![ukevent::default(); MAX_A],
                    }
                } else {
                    let mut q = q;
                    if m == Mech::KeventRing(b, true) {
                        q.set_commit_every(ring / 2);
                    }
                    Poller::Ring { q }
                }
            }
        }
    }

    /// One round: activate `active`, wait for them all, read each.
    fn round(&mut self, s: &Sockets, active: &[usize]) {
        for &i in active {
            s.activate(i);
        }
        let a = active.len();
        match self {
            Poller::Select { master, nfds } => {
                let mut rd = *master;
                // SAFETY: `rd` is a local fd_set; the other sets are null; no timeout.
                let n = unsafe {
                    libc::select(
                        *nfds,
                        &mut rd,
                        std::ptr::null_mut(),
                        std::ptr::null_mut(),
                        std::ptr::null_mut(),
                    )
                };
                assert_eq!(n as usize, a, "select");
                for w in &s.watched {
                    // SAFETY: reads one bit of the local `rd`; fd < FD_SETSIZE.
                    if unsafe { libc::FD_ISSET(w.as_raw_fd(), &rd) } {
                        os::read1(w.as_raw_fd());
                    }
                }
            }
            Poller::Poll { pfds } => {
                // SAFETY: `pfds` is valid for reads and writes of its length for the call.
                let n = unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, -1) };
                assert_eq!(n as usize, a, "poll");
                for p in pfds.iter() {
                    if p.revents != 0 {
                        os::read1(p.fd);
                    }
                }
            }
            Poller::Epoll { ep, buf } => {
                let mut got = 0;
                while got < a {
                    let n = os::epoll_wait(ep.as_raw_fd(), buf, 5000);
                    assert!(n > 0, "epoll_wait timed out");
                    for e in &buf[..n] {
                        os::read1(e.u64 as RawFd);
                    }
                    got += n;
                }
            }
            Poller::Get { q, buf } => {
                let n = q.get_events(a as u32, buf, &FOREVER).expect("get_events") as usize;
                assert_eq!(n, a, "get_events");
                for e in &buf[..n] {
                    os::read1(e.id.raw()[0] as RawFd);
                }
            }
            Poller::Ring { q } => {
                let mut got = 0;
                while got < a {
                    let n = q.wait(q.ring_len() - 1, &FOREVER).expect("kevent_wait");
                    assert!(n > 0, "kevent_wait returned nothing");
                    got += q
                        .consume(|e| os::read1(e.id.raw()[0] as RawFd))
                        .expect("kevent_commit") as usize;
                }
            }
        }
    }
}

/// Settings of one poller run.
#[derive(Clone, Debug)]
pub struct Config {
    /// Watched descriptor counts.
    pub ns: Vec<usize>,
    /// Active descriptor counts.
    pub actives: Vec<usize>,
    /// Timed blocks per cell.
    pub reps: usize,
    /// Target duration of one timed block.
    pub block_ns: u64,
    /// How descriptors are made.
    pub transport: Transport,
}

impl Config {
    /// The quick or full settings.
    pub fn new(quick: bool, transport: Transport) -> Config {
        Config {
            ns: vec![100, 1000, 10000, 30000],
            actives: vec![1, 10, 50, 100],
            reps: if quick { 9 } else { 21 },
            block_ns: if quick { 6_000_000 } else { 20_000_000 },
            transport,
        }
    }
}

/// Runs the poller benchmark on the calling (pinned) thread.
pub fn run(opts: &Opts, machine: &Machine) -> Section {
    let cfg = Config::new(opts.quick, opts.transport);
    eprintln!("poller: N = {:?}, A = {:?}", cfg.ns, cfg.actives);
    let backends = &machine.backends;
    let mut mechs = vec![Mech::Select, Mech::Poll, Mech::Epoll];
    for b in 0..backends.len() {
        mechs.push(Mech::KeventGet(b));
        mechs.push(Mech::KeventRing(b, false));
        mechs.push(Mech::KeventRing(b, true));
    }
    // The C library runs on the process's backend only.
    if let Some(b) = Backend::current()
        .ok()
        .and_then(|p| backends.iter().position(|&b| b == p))
    {
        mechs.push(Mech::CGet(b));
        mechs.push(Mech::CRing(b));
    }
    // (mech, n, a) -> per-block µs/round
    let mut samples: BTreeMap<(Mech, usize, usize), Vec<f64>> = BTreeMap::new();
    let mut skipped: BTreeMap<usize, String> = BTreeMap::new();
    let mut select_skipped: BTreeMap<usize, String> = BTreeMap::new();
    let (soft, _) = os::raise_fd_limit();
    // When a column does not fit under the fd limit, also measure the largest N that does
    // (rounded down to a hundred), so the flatness ratio still spans as much as possible.
    let mut cfg = cfg;
    let fit =
        (soft as usize).saturating_sub(os::open_fds() + 64) / cfg.transport.fds_per_watched() / 100
            * 100;
    if cfg.ns.iter().any(|&n| n > fit) && cfg.ns.iter().all(|&n| n != fit) && fit >= 100 {
        cfg.ns.push(fit);
        cfg.ns.sort_unstable();
    }
    for &n in &cfg.ns {
        let need = n * cfg.transport.fds_per_watched();
        let free = (soft as usize).saturating_sub(os::open_fds() + 64);
        if need > free {
            skipped.insert(
                n,
                format!("skipped: fd limit {soft} ({need} fds needed, {free} available)"),
            );
            continue;
        }
        let socks = match Sockets::new(cfg.transport, n) {
            Ok(s) => s,
            Err(e) => {
                skipped.insert(n, format!("skipped: {e}"));
                continue;
            }
        };
        let max_fd = socks
            .watched
            .iter()
            .map(AsRawFd::as_raw_fd)
            .max()
            .unwrap_or(0);
        let here: Vec<Mech> = mechs
            .iter()
            .copied()
            .filter(|m| {
                if *m == Mech::Select && max_fd >= libc::FD_SETSIZE as RawFd {
                    select_skipped.insert(n, format!("n/a (fd {max_fd} ≥ FD_SETSIZE)"));
                    false
                } else {
                    true
                }
            })
            .collect();
        let actives: Vec<Vec<usize>> = cfg
            .actives
            .iter()
            .map(|&a| (0..a.min(n)).map(|i| i * (n / a.min(n))).collect())
            .collect();
        let mut rounds: BTreeMap<(Mech, usize), usize> = BTreeMap::new();
        for rep in 0..cfg.reps {
            for k in 0..here.len() {
                let m = here[(k + rep) % here.len()];
                let mut p = Poller::build(m, &socks, backends);
                for active in &actives {
                    let a = active.len();
                    let r = *rounds.entry((m, a)).or_insert_with(|| {
                        // Calibrate: a few rounds give the block length.
                        let t = os::now_ns();
                        for _ in 0..20 {
                            p.round(&socks, active);
                        }
                        let per = (os::now_ns() - t) / 20;
                        (cfg.block_ns / per.max(1)).clamp(5, 200_000) as usize
                    });
                    for _ in 0..(r / 10).max(3) {
                        p.round(&socks, active);
                    }
                    let t = os::now_ns();
                    for _ in 0..r {
                        p.round(&socks, active);
                    }
                    let us = (os::now_ns() - t) as f64 / 1e3 / r as f64;
                    samples.entry((m, n, a)).or_default().push(us);
                }
            }
        }
        eprintln!("poller: N={n} done");
    }
    report(
        &cfg,
        &mechs,
        backends,
        &samples,
        &skipped,
        &select_skipped,
        machine,
    )
}

/// The per-repetition ratios `a[i] / b[i]` (both sample lists are in repetition order):
/// their median with a 95% bootstrap interval.
fn paired_ratio(
    samples: &BTreeMap<(Mech, usize, usize), Vec<f64>>,
    a: (Mech, usize, usize),
    b: (Mech, usize, usize),
) -> Option<Interval> {
    let (a, b) = (samples.get(&a)?, samples.get(&b)?);
    let r: Vec<f64> = a.iter().zip(b).map(|(x, y)| x / y).collect();
    Interval::of(&r)
}

#[allow(clippy::too_many_arguments)]
fn report(
    cfg: &Config,
    mechs: &[Mech],
    backends: &[Backend],
    samples: &BTreeMap<(Mech, usize, usize), Vec<f64>>,
    skipped: &BTreeMap<usize, String>,
    select_skipped: &BTreeMap<usize, String>,
    machine: &Machine,
) -> Section {
    let get = |m: Mech, n: usize, a: usize| samples.get(&(m, n, a)).and_then(|v| Summary::of(v));
    let measured: Vec<usize> = cfg
        .ns
        .iter()
        .copied()
        .filter(|n| !skipped.contains_key(n))
        .collect();
    let (n_first, n_last) = (measured.first().copied(), measured.last().copied());
    let mut md = String::new();
    let _ = writeln!(
        md,
        "Microseconds per round (median of {} timed blocks, min–max in parentheses; each block \
         ≈{} ms after a warm-up). Transport: **{}**{}. One round = write 1 byte to each of A \
         active descriptors, one wait that returns them, read each byte. Ratio rows: kevent ÷ \
         epoll per column, over the ratios of the two blocks timed in the same repetition \
         (target ≤ 1.10). {RATIO_LEGEND} The last column is the largest measured N ÷ N=100, \
         from the medians (target ≤ 1.3).\n",
        cfg.reps,
        cfg.block_ns / 1_000_000,
        cfg.transport.name(),
        match cfg.transport {
            Transport::UnixDgram =>
                " (N AF_UNIX datagram sockets, each connected to itself: N fds for N watched)",
            Transport::SocketPair => " (N AF_UNIX stream socketpairs: 2N fds)",
        }
    );
    for (n, why) in skipped {
        let _ = writeln!(md, "* N={n}: {why}");
    }
    if !skipped.is_empty() {
        md.push('\n');
    }
    let mut json_cells = vec![];
    let mut charts = vec![];
    let nmax_label = n_last.map_or("N_max".to_owned(), |n| format!("N={n} ÷ N=100"));
    for &a in &cfg.actives {
        let _ = writeln!(md, "#### A = {a} active\n");
        let mut header = "| mechanism |".to_owned();
        let mut rule = "|---|".to_owned();
        for n in &cfg.ns {
            let _ = write!(header, " N={n} |");
            rule.push_str("---|");
        }
        let _ = writeln!(md, "{header} {nmax_label} |\n{rule}---|");
        let mut series = vec![];
        for &m in mechs {
            let mut row = format!("| {} |", m.name(backends));
            let mut points = vec![];
            for &n in &cfg.ns {
                let cell = match get(m, n, a) {
                    Some(s) => {
                        points.push((n as f64, s.median));
                        let mut cell = Json::obj([
                            ("mechanism", Json::from(m.key(backends))),
                            ("n", Json::from(n)),
                            ("a", Json::from(a)),
                            ("us_per_round", s.json()),
                        ]);
                        if let Some(r) = paired_ratio(samples, (m, n, a), (Mech::Epoll, n, a)) {
                            cell.push("paired_ratio_over_epoll", r.json());
                        }
                        if let Some(r) = m
                            .rust_twin()
                            .and_then(|t| paired_ratio(samples, (m, n, a), (t, n, a)))
                        {
                            cell.push("paired_ratio_over_rust", r.json());
                        }
                        json_cells.push(cell);
                        s.cell(2)
                    }
                    None if skipped.contains_key(&n) => "skipped".into(),
                    None if m == Mech::Select => select_skipped
                        .get(&n)
                        .cloned()
                        .unwrap_or_else(|| "n/a".into()),
                    None => "–".into(),
                };
                let _ = write!(row, " {cell} |");
            }
            let flat = match (n_first, n_last) {
                (Some(f), Some(l)) if f != l => ratio_cell(
                    get(m, l, a).map(|s| s.median),
                    get(m, f, a).map(|s| s.median),
                ),
                _ => "–".into(),
            };
            let _ = writeln!(md, "{row} {flat} |");
            if !points.is_empty() {
                series.push(Series {
                    name: m.name(backends),
                    points,
                });
            }
        }
        for &m in mechs {
            if !m.is_kevent() {
                continue;
            }
            let mut row = format!("| {} ÷ epoll |", m.name(backends));
            for &n in &cfg.ns {
                // Each repetition timed one block of each mechanism close together: the
                // median of the per-repetition ratios cancels what drifts between them.
                let r = paired_ratio(samples, (m, n, a), (Mech::Epoll, n, a))
                    .map_or("–".to_owned(), |r| r.ratio_cell());
                let _ = write!(row, " {r} |");
            }
            let _ = writeln!(md, "{row} |");
        }
        for &m in mechs {
            let Some(twin) = m.rust_twin() else {
                continue;
            };
            let mut row = format!("| {} ÷ {} |", m.name(backends), twin.name(backends));
            for &n in &cfg.ns {
                let r = paired_ratio(samples, (m, n, a), (twin, n, a))
                    .map_or("–".to_owned(), |r| r.ratio_cell());
                let _ = write!(row, " {r} |");
            }
            let _ = writeln!(md, "{row} |");
        }
        md.push('\n');
        charts.push((
            format!("poller-a{a}.svg"),
            LineChart {
                title: format!(
                    "poller: µs per round, A = {a} active ({})",
                    cfg.transport.name()
                ),
                x_label: "N watched descriptors".into(),
                y_label: "µs per round (median)".into(),
                x_log: true,
                y_log: true,
                series,
            }
            .render(),
        ));
    }
    let json = Json::obj([
        ("transport", Json::from(cfg.transport.name())),
        ("reps", Json::from(cfg.reps)),
        ("block_ms", Json::from(cfg.block_ns / 1_000_000)),
        ("ns", Json::arr(cfg.ns.iter().map(|&n| Json::from(n)))),
        (
            "actives",
            Json::arr(cfg.actives.iter().map(|&a| Json::from(a))),
        ),
        (
            "skipped",
            Json::obj(
                skipped
                    .iter()
                    .map(|(n, w)| (n.to_string(), Json::from(w.as_str()))),
            ),
        ),
        ("pinned_cpu", Json::from(machine.nproc > 1)),
        ("cells", Json::Arr(json_cells)),
    ]);
    Section {
        name: "poller",
        title: "Poller: many watched descriptors, few active".into(),
        markdown: md,
        json,
        charts,
        summary: summary(cfg, mechs, backends, samples, &measured),
    }
}

/// The headline rows: per kevent mechanism, the ratios to epoll over every cell, and the
/// flatness N_max ÷ N=100.
fn summary(
    cfg: &Config,
    mechs: &[Mech],
    backends: &[Backend],
    samples: &BTreeMap<(Mech, usize, usize), Vec<f64>>,
    measured: &[usize],
) -> Vec<SummaryRow> {
    let mut rows = vec![];
    for &m in mechs {
        if !m.is_kevent() {
            continue;
        }
        if let Some(twin) = m.rust_twin() {
            rows.extend(c_over_rust(cfg, m, twin, backends, samples, measured));
        }
        let cells: Vec<(usize, usize, Interval)> = measured
            .iter()
            .flat_map(|&n| cfg.actives.iter().map(move |&a| (n, a)))
            .filter_map(|(n, a)| {
                paired_ratio(samples, (m, n, a), (Mech::Epoll, n, a)).map(|i| (n, a, i))
            })
            .collect();
        let Some((wn, wa, worst)) = cells
            .iter()
            .copied()
            .max_by(|x, y| x.2.median.total_cmp(&y.2.median))
        else {
            continue;
        };
        let lo = cells
            .iter()
            .map(|c| c.2.median)
            .fold(f64::INFINITY, f64::min);
        let same = cells.iter().filter(|c| c.2.contains(1.0)).count();
        let all: Vec<Interval> = cells.iter().map(|c| c.2).collect();
        rows.push(SummaryRow {
            what: format!("poller: {} ÷ epoll, µs per round", m.name(backends)),
            target: "≤ 1.10 in every cell".into(),
            result: format!(
                "medians {lo:.2}–{:.2} over {} cells (no measurable difference in {same}); \
                 largest {} at N={wn}, A={wa}: **{}**",
                worst.median,
                cells.len(),
                worst.cell(2),
                judge_at_most(&all, 1.10)
            ),
        });
    }
    if let (Some(&first), Some(&last)) = (measured.first(), measured.last()) {
        let flat: Vec<f64> = mechs
            .iter()
            .filter(|m| matches!(m, Mech::Epoll | Mech::KeventGet(_) | Mech::KeventRing(..)))
            .flat_map(|&m| {
                cfg.actives.iter().filter_map(move |&a| {
                    let med = |n| Summary::of(samples.get(&(m, n, a))?).map(|s| s.median);
                    Some(med(last)? / med(first)?)
                })
            })
            .collect();
        if !flat.is_empty() && first != last {
            let (lo, hi) = flat
                .iter()
                .fold((f64::INFINITY, 0f64), |(l, h), &x| (l.min(x), h.max(x)));
            rows.push(SummaryRow {
                what: format!("poller: N={last} ÷ N={first} (epoll and kevent rows)"),
                target: "≤ 1.3".into(),
                result: format!(
                    "{lo:.2}–{hi:.2}: **{}**",
                    if hi <= 1.3 { "met" } else { "missed" }
                ),
            });
        }
    }
    rows
}

/// The headline row of a C mechanism: C ÷ its Rust twin over every cell (issue 11's target:
/// ≤ 1.05 at every A).
fn c_over_rust(
    cfg: &Config,
    m: Mech,
    twin: Mech,
    backends: &[Backend],
    samples: &BTreeMap<(Mech, usize, usize), Vec<f64>>,
    measured: &[usize],
) -> Option<SummaryRow> {
    let cells: Vec<(usize, usize, Interval)> = measured
        .iter()
        .flat_map(|&n| cfg.actives.iter().map(move |&a| (n, a)))
        .filter_map(|(n, a)| paired_ratio(samples, (m, n, a), (twin, n, a)).map(|i| (n, a, i)))
        .collect();
    let (wn, wa, worst) = cells
        .iter()
        .copied()
        .max_by(|x, y| x.2.median.total_cmp(&y.2.median))?;
    let lo = cells
        .iter()
        .map(|c| c.2.median)
        .fold(f64::INFINITY, f64::min);
    let all: Vec<Interval> = cells.iter().map(|c| c.2).collect();
    Some(SummaryRow {
        what: format!(
            "poller: {} ÷ {}, µs per round",
            m.name(backends),
            twin.name(backends)
        ),
        target: "≤ 1.05 in every cell".into(),
        result: format!(
            "medians {lo:.2}–{:.2} over {} cells; largest {} at N={wn}, A={wa}: **{}**",
            worst.median,
            cells.len(),
            worst.cell(2),
            judge_at_most(&all, 1.05)
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_mechanism_completes_rounds_on_both_transports() {
        let backends = [Backend::fallback()];
        for t in [Transport::UnixDgram, Transport::SocketPair] {
            let s = Sockets::new(t, 64).unwrap();
            for m in [
                Mech::Select,
                Mech::Poll,
                Mech::Epoll,
                Mech::KeventGet(0),
                Mech::KeventRing(0, false),
                Mech::KeventRing(0, true),
                Mech::CGet(0),
                Mech::CRing(0),
            ] {
                if matches!(m, Mech::CGet(_) | Mech::CRing(_))
                    && !Backend::current().is_ok_and(|b| b == Backend::fallback())
                {
                    continue;
                }
                let mut p = Poller::build(m, &s, &backends);
                for active in [vec![0], vec![1, 9, 30, 63]] {
                    for _ in 0..700 {
                        p.round(&s, &active);
                    }
                }
            }
        }
    }
}
