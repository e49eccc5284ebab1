//! The per-call account (issue 21 item 2): what one call of each kind costs on kevent, native
//! and fallback, beside the epoll call that does the same work (and io_uring where it has
//! one). In the instruction-time guest (`scripts/vm-lane bench --icount calls`) a figure is
//! the instructions the call executes, kernel and user side; on the host it is CPU time.
//!
//! Calls, each on a queue or epoll instance of its own, over `AF_UNIX` stream socketpairs
//! (the watched end of a "ready" pair holds one unread byte for the whole run, so it is ready
//! at every call, level-triggered on both sides, D7):
//!
//! * **wait, nothing ready**: `epoll_wait(timeout 0)` → 0; `kevent_get_events(min 1, timeout
//!   {0,0})` → 0; `kevent_wait(timeout {0,0})` → 0 (one idle socket registered); io_uring:
//!   one look at the CQ ring (no system call at all);
//! * **wait, 1 ready**: the same calls returning one event (one ready socket registered); the
//!   ring: `kevent_wait` + reading the slot + `kevent_commit`;
//! * **wait, 64 ready**: the same with 64 ready sockets;
//! * the asynchronous ring (P38) in the three waits: nothing ready is one look at the ring
//!   (`ring_kidx == ring_uidx`, no system call, as io_uring's); with ready sockets,
//!   `kevent_wait(old_uidx)` posts them (level kevents enter the ring in the call that
//!   waits, P38) and the consumer reads them and stores `ring_uidx`, no `kevent_commit`;
//! * **ADD + REMOVE**: `kevent_ctl` ADD then REMOVE of one idle socket (two calls) against
//!   `epoll_ctl` ADD then DEL; io_uring: a multishot `POLL_ADD` and its `POLL_REMOVE`
//!   submitted by one `io_uring_enter`, their completions reaped;
//! * **MODIFY**: `kevent_ctl` MODIFY of one registered idle socket against `epoll_ctl` MOD;
//! * **a level socket's turn**: a `write` to its peer, a wait that delivers it, a `read`, and
//!   a wait that looks at it again and finds it drained (0 events), as an HTTP keep-alive
//!   server's socket takes each request: the only call here that prices the wake-up and the
//!   empty re-check of a level registration (epoll and `kevent_get_events` only).
//!
//! From the 1-ready and 64-ready figures the report also derives, per mechanism, the cost
//! of each further delivered event ((64 ready − 1 ready) ÷ 63) and the fixed cost of a call
//! that returns events (1 ready − that slope): where kevent's extra instructions go is the
//! subject of `docs/bench/account.md`.
//!
//! # Method
//!
//! Each repetition times, per call kind, one block of every mechanism in an order that
//! rotates between repetitions; a block repeats the call for about the block length
//! (calibrated once) and gives ns per call of the thread's CPU time (in the icount guest:
//! instructions). The first repetition is a warm-up. Every call's result is checked, so a
//! broken call cannot pass for a fast one. A cell is the median (min–max) over repetitions;
//! ratios to epoll are medians of per-repetition ratios with their 95% bootstrap interval.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use kevent_backend::Backend;
use kevent_sys::{
    KEVENT_CTL_ADD, KEVENT_CTL_MODIFY, KEVENT_CTL_REMOVE, KEVENT_SOCKET, KEVENT_SOCKET_RECV,
    kevent_id, ukevent,
};

use crate::json::Json;
use crate::machine::{Clock, INSTRUCTION_TIME_CAVEAT, Machine};
use crate::os;
use crate::rawqueue::{RawQueue, timeout_ms};
use crate::stats::{Interval, RATIO_LEGEND, Summary};
use crate::uring::Uring;
use crate::{Opts, Section, SummaryRow};

/// Ready sockets for the 64-event call.
const MANY: usize = 64;

/// A call kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Op {
    WaitEmpty,
    WaitOne,
    WaitMany,
    AddRemove,
    Modify,
    /// A level socket's turn, as an HTTP keep-alive server's socket takes it: data arrives
    /// (a `write` to its peer), a wait delivers it, the server reads it, and the next wait
    /// looks at the socket again and finds it drained (epoll's level item back on its ready
    /// list, the level kevent still queued). The other calls price only the delivery.
    Turn,
}

const OPS: [Op; 6] = [
    Op::WaitEmpty,
    Op::WaitOne,
    Op::WaitMany,
    Op::AddRemove,
    Op::Modify,
    Op::Turn,
];

impl Op {
    fn name(self) -> &'static str {
        match self {
            Op::WaitEmpty => "wait, nothing ready (timeout 0)",
            Op::WaitOne => "wait, 1 ready",
            Op::WaitMany => "wait, 64 ready",
            Op::AddRemove => "ADD + REMOVE of one socket (two calls)",
            Op::Modify => "MODIFY of one socket",
            Op::Turn => "a level socket's turn: write, wait (1), read, wait (re-check, 0)",
        }
    }

    fn key(self) -> &'static str {
        match self {
            Op::WaitEmpty => "wait_nothing_ready",
            Op::WaitOne => "wait_1_ready",
            Op::WaitMany => "wait_64_ready",
            Op::AddRemove => "add_remove",
            Op::Modify => "modify",
            Op::Turn => "level_turn",
        }
    }
}

/// A mechanism doing the calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Mech {
    Epoll,
    Uring,
    /// `kevent_get_events` / `kevent_ctl` on backend `.0`.
    Kevent(usize),
    /// `kevent_wait` + the ring + `kevent_commit` on backend `.0` (wait calls only).
    Ring(usize),
    /// The asynchronous ring (P38) on backend `.0` (wait calls only).
    AsyncRing(usize),
}

impl Mech {
    fn name(self, backends: &[Backend]) -> String {
        match self {
            Mech::Epoll => "epoll".into(),
            Mech::Uring => "io_uring".into(),
            Mech::Kevent(b) => format!("kevent ({})", backends[b].as_str()),
            Mech::Ring(b) => format!("kevent ring ({})", backends[b].as_str()),
            Mech::AsyncRing(b) => format!("kevent async ring ({})", backends[b].as_str()),
        }
    }

    fn key(self, backends: &[Backend]) -> String {
        match self {
            Mech::Epoll => "epoll".into(),
            Mech::Uring => "io_uring".into(),
            Mech::Kevent(b) => format!("kevent_{}", backends[b].as_str()),
            Mech::Ring(b) => format!("kevent_ring_{}", backends[b].as_str()),
            Mech::AsyncRing(b) => format!("kevent_async_ring_{}", backends[b].as_str()),
        }
    }

    /// What the call is, for the table.
    fn call(self, op: Op) -> &'static str {
        match (self, op) {
            (Mech::Epoll, Op::AddRemove) => "`epoll_ctl` ADD + DEL",
            (Mech::Epoll, Op::Modify) => "`epoll_ctl` MOD",
            (Mech::Epoll, Op::Turn) => "`write`, `epoll_wait`, `read`, `epoll_wait`",
            (Mech::Epoll, _) => "`epoll_wait`",
            (Mech::Uring, Op::WaitEmpty) => "CQ ring head = tail? (no syscall)",
            (Mech::Uring, _) => "`POLL_ADD` + `POLL_REMOVE`, one `io_uring_enter`, reap",
            (Mech::Kevent(_), Op::AddRemove) => "`kevent_ctl` ADD + REMOVE",
            (Mech::Kevent(_), Op::Modify) => "`kevent_ctl` MODIFY",
            (Mech::Kevent(_), Op::Turn) => {
                "`write`, `kevent_get_events`, `read`, `kevent_get_events`"
            }
            (Mech::Kevent(_), _) => "`kevent_get_events`",
            (Mech::Ring(_), Op::WaitEmpty) => "`kevent_wait`",
            (Mech::Ring(_), _) => "`kevent_wait` + read the ring + `kevent_commit`",
            (Mech::AsyncRing(_), Op::WaitEmpty) => "ring_kidx = ring_uidx? (no syscall)",
            (Mech::AsyncRing(_), _) => "`kevent_wait` + read the ring + store `ring_uidx`",
        }
    }

    /// Whether the mechanism has this call.
    fn has(self, op: Op) -> bool {
        match self {
            Mech::Epoll | Mech::Kevent(_) => true,
            // io_uring's readiness is a completion per wake-up, not a level state: it has no
            // "wait that returns what is still ready" (the poller measures its round trip).
            Mech::Uring => matches!(op, Op::WaitEmpty | Op::AddRemove),
            Mech::Ring(_) | Mech::AsyncRing(_) => {
                matches!(op, Op::WaitEmpty | Op::WaitOne | Op::WaitMany)
            }
        }
    }
}

/// The sockets: `ready[i]` (watched end, peer) with one unread byte; `idle` with none.
struct Sockets {
    ready: Vec<(OwnedFd, OwnedFd)>,
    idle: Vec<(OwnedFd, OwnedFd)>,
}

impl Sockets {
    fn new() -> std::io::Result<Sockets> {
        let ready = (0..MANY)
            .map(|_| os::socketpair())
            .collect::<Result<Vec<_>, _>>()?;
        for (_, peer) in &ready {
            os::write1(peer.as_raw_fd());
        }
        let idle = (0..3)
            .map(|_| os::socketpair())
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Sockets { ready, idle })
    }

    /// The watched fds a call kind registers up front.
    fn registered(&self, op: Op) -> Vec<RawFd> {
        match op {
            Op::WaitEmpty | Op::Modify => vec![self.idle[0].0.as_raw_fd()],
            Op::WaitOne => vec![self.ready[0].0.as_raw_fd()],
            Op::WaitMany => self.ready.iter().map(|p| p.0.as_raw_fd()).collect(),
            Op::AddRemove => vec![],
            Op::Turn => vec![self.turn().0],
        }
    }

    /// The socket a level turn makes readable and drains: (watched, peer).
    fn turn(&self) -> (RawFd, RawFd) {
        (self.idle[2].0.as_raw_fd(), self.idle[2].1.as_raw_fd())
    }

    /// The socket ADD + REMOVE adds and removes.
    fn churn(&self) -> RawFd {
        self.idle[1].0.as_raw_fd()
    }
}

fn socket_kevent(fd: RawFd) -> ukevent {
    ukevent::new(
        KEVENT_SOCKET,
        kevent_id::from_raw([fd as u32, 0]),
        KEVENT_SOCKET_RECV,
        0,
    )
}

/// One mechanism's instance for one call kind, and its buffers.
enum Fixture {
    Epoll {
        ep: OwnedFd,
        buf: Vec<libc::epoll_event>,
    },
    Uring(Uring),
    Kevent {
        q: RawQueue,
        buf: Vec<ukevent>,
    },
}

impl Fixture {
    fn new(m: Mech, op: Op, s: &Sockets, backends: &[Backend]) -> Result<Fixture, String> {
        let fds = s.registered(op);
        Ok(match m {
            Mech::Epoll => {
                let ep = os::epoll().map_err(|e| format!("epoll_create1: {e}"))?;
                for &fd in &fds {
                    os::epoll_ctl(
                        ep.as_raw_fd(),
                        libc::EPOLL_CTL_ADD,
                        fd,
                        libc::EPOLLIN as u32,
                        fd as u64,
                    )
                    .map_err(|e| format!("epoll_ctl ADD: {e}"))?;
                }
                Fixture::Epoll {
                    ep,
                    buf: vec![libc::epoll_event { events: 0, u64: 0 }; MANY],
                }
            }
            Mech::Uring => Fixture::Uring(Uring::new(8, 64).map_err(|e| format!("{e}"))?),
            Mech::Kevent(b) | Mech::Ring(b) | Mech::AsyncRing(b) => {
                let ring = if matches!(m, Mech::Ring(_) | Mech::AsyncRing(_)) {
                    128
                } else {
                    0
                };
                let mut q = if matches!(m, Mech::AsyncRing(_)) {
                    RawQueue::new_async(backends[b], ring)
                        .map_err(|e| format!("kevent_init(KEVENT_INIT_ASYNC_RING): {e:?}"))?
                } else {
                    RawQueue::new(backends[b], ring).map_err(|e| format!("kevent_init: {e:?}"))?
                };
                let mut adds: Vec<ukevent> = fds.iter().map(|&fd| socket_kevent(fd)).collect();
                // Ready sockets come back from ADD as "ready at once" (written back, not
                // registered) unless they are queued: ALWAYS_QUEUE registers them.
                for a in &mut adds {
                    a.req_flags |= kevent_sys::KEVENT_REQ_ALWAYS_QUEUE;
                }
                if !adds.is_empty() {
                    let r = q.ctl(KEVENT_CTL_ADD, &mut adds);
                    if r != Ok(0) {
                        return Err(format!("kevent_ctl ADD: {r:?}"));
                    }
                }
                // An asynchronous ring may have them posted already (the ADD queued them):
                // start from an empty ring.
                q.consume_async(|_| ());
                Fixture::Kevent {
                    q,
                    buf: vec![ukevent::default(); MANY],
                }
            }
        })
    }

    /// One call of kind `op` (checked).
    fn once(&mut self, m: Mech, op: Op, s: &Sockets) {
        let zero = timeout_ms(0);
        let want = match op {
            Op::WaitOne => 1,
            Op::WaitMany => MANY,
            _ => 0,
        };
        match self {
            Fixture::Epoll { ep, buf } => match op {
                Op::Turn => {
                    let (fd, peer) = s.turn();
                    os::write1(peer);
                    assert_eq!(os::epoll_wait(ep.as_raw_fd(), buf, 0), 1, "epoll_wait");
                    os::read1(fd);
                    assert_eq!(os::epoll_wait(ep.as_raw_fd(), buf, 0), 0, "epoll_wait");
                }
                Op::AddRemove => {
                    let fd = s.churn();
                    let e = ep.as_raw_fd();
                    os::epoll_ctl(e, libc::EPOLL_CTL_ADD, fd, libc::EPOLLIN as u32, 0)
                        .expect("epoll_ctl ADD");
                    os::epoll_ctl(e, libc::EPOLL_CTL_DEL, fd, 0, 0).expect("epoll_ctl DEL");
                }
                Op::Modify => {
                    let fd = s.idle[0].0.as_raw_fd();
                    os::epoll_ctl(
                        ep.as_raw_fd(),
                        libc::EPOLL_CTL_MOD,
                        fd,
                        libc::EPOLLIN as u32,
                        fd as u64,
                    )
                    .expect("epoll_ctl MOD");
                }
                _ => assert_eq!(os::epoll_wait(ep.as_raw_fd(), buf, 0), want, "epoll_wait"),
            },
            Fixture::Uring(u) => match op {
                Op::WaitEmpty => assert!(!u.ready(), "io_uring: a completion appeared"),
                _ => {
                    let fd = s.churn();
                    u.poll_add(fd, libc::POLLIN as u32).expect("POLL_ADD");
                    u.poll_remove(fd).expect("POLL_REMOVE");
                    u.flush().expect("io_uring_enter");
                    assert_eq!(
                        u.reap(0, |_, _| ()).expect("reap"),
                        0,
                        "io_uring: a poll fired"
                    );
                }
            },
            Fixture::Kevent { q, buf } => match (m, op) {
                (_, Op::Turn) => {
                    let (fd, peer) = s.turn();
                    os::write1(peer);
                    assert_eq!(q.get_events(1, buf, &zero), Ok(1), "kevent_get_events");
                    os::read1(fd);
                    assert_eq!(q.get_events(1, buf, &zero), Ok(0), "kevent_get_events");
                }
                (_, Op::AddRemove) => {
                    let mut one = [socket_kevent(s.churn())];
                    assert_eq!(q.ctl(KEVENT_CTL_ADD, &mut one), Ok(0), "kevent ADD");
                    one[0] = socket_kevent(s.churn());
                    assert_eq!(q.ctl(KEVENT_CTL_REMOVE, &mut one), Ok(0), "kevent REMOVE");
                    assert_eq!(one[0].ret_flags & kevent_sys::KEVENT_RET_BROKEN, 0);
                }
                (_, Op::Modify) => {
                    let mut one = [socket_kevent(s.idle[0].0.as_raw_fd())];
                    assert_eq!(q.ctl(KEVENT_CTL_MODIFY, &mut one), Ok(0), "kevent MODIFY");
                    assert_eq!(one[0].ret_flags & kevent_sys::KEVENT_RET_BROKEN, 0);
                }
                (Mech::AsyncRing(_), Op::WaitEmpty) => {
                    assert_eq!(q.consume_async(|_| ()), 0, "async ring: an event appeared");
                }
                (Mech::AsyncRing(_), _) => {
                    assert_eq!(q.wait_async(&zero), Ok(want as u32), "kevent_wait (async)");
                    assert_eq!(q.consume_async(|_| ()), want as u32, "async ring");
                }
                (Mech::Ring(_), _) => {
                    assert_eq!(q.wait(MANY as u32, &zero), Ok(want as u32), "kevent_wait");
                    if want > 0 {
                        assert_eq!(q.consume(|_| ()), Ok(want as u32), "kevent ring");
                    }
                }
                _ => assert_eq!(
                    q.get_events(1, buf, &zero),
                    Ok(want as u32),
                    "kevent_get_events"
                ),
            },
        }
    }
}

/// Settings of one run.
#[derive(Clone, Copy, Debug)]
struct Config {
    reps: usize,
    block_ns: u64,
}

type Samples = BTreeMap<(Op, Mech), Vec<f64>>;

/// Runs the per-call benchmark on the calling (pinned) thread.
pub fn run(opts: &Opts, machine: &Machine) -> Section {
    let cfg = Config {
        reps: if opts.quick { 8 } else { 21 },
        block_ns: if opts.quick { 3_000_000 } else { 10_000_000 },
    };
    let backends = &machine.backends;
    let uring = Uring::probe();
    let mut mechs = vec![Mech::Epoll];
    let mut errors_early: Vec<String> = vec![];
    if uring.is_ok() {
        mechs.push(Mech::Uring);
    }
    for (b, &backend) in backends.iter().enumerate() {
        mechs.push(Mech::Kevent(b));
        mechs.push(Mech::Ring(b));
        // P38: a kevent kernel without the asynchronous ring refuses the flag (EINVAL).
        match RawQueue::new_async(backend, 4) {
            Ok(_) => mechs.push(Mech::AsyncRing(b)),
            Err(e) => errors_early.push(format!(
                "asynchronous ring on the {} backend refused ({e}): row skipped",
                backend.as_str()
            )),
        }
    }
    let mut samples: Samples = BTreeMap::new();
    let mut errors: Vec<String> = errors_early;
    match Sockets::new() {
        Ok(s) => measure(cfg, &mechs, backends, &s, &mut samples, &mut errors),
        Err(e) => errors.push(format!("socketpair: {e}")),
    }
    report(
        cfg,
        &mechs,
        backends,
        &samples,
        &errors,
        uring.err(),
        machine,
    )
}

fn measure(
    cfg: Config,
    mechs: &[Mech],
    backends: &[Backend],
    s: &Sockets,
    samples: &mut Samples,
    errors: &mut Vec<String>,
) {
    // Every fixture is built once: registrations stay for the whole run.
    let mut fixtures: BTreeMap<(Op, Mech), Fixture> = BTreeMap::new();
    for op in OPS {
        for &m in mechs.iter().filter(|m| m.has(op)) {
            match Fixture::new(m, op, s, backends) {
                Ok(f) => {
                    fixtures.insert((op, m), f);
                }
                Err(e) => errors.push(format!("{} on {}: {e}", op.name(), m.name(backends))),
            }
        }
    }
    let mut iters: BTreeMap<(Op, Mech), u64> = BTreeMap::new();
    let keys: Vec<(Op, Mech)> = fixtures.keys().copied().collect();
    for rep in 0..=cfg.reps {
        for op in OPS {
            let here: Vec<(Op, Mech)> = keys.iter().copied().filter(|k| k.0 == op).collect();
            for k in 0..here.len() {
                let key = here[(k + rep) % here.len()];
                let f = fixtures.get_mut(&key).expect("built above");
                let n = *iters.entry(key).or_insert_with(|| {
                    let t = os::thread_cpu_ns();
                    for _ in 0..64 {
                        f.once(key.1, op, s);
                    }
                    let per = ((os::thread_cpu_ns() - t) / 64).max(1);
                    (cfg.block_ns / per).clamp(64, 1_000_000)
                });
                let t = os::thread_cpu_ns();
                for _ in 0..n {
                    f.once(key.1, op, s);
                }
                let ns = (os::thread_cpu_ns() - t) as f64 / n as f64;
                if rep > 0 {
                    samples.entry(key).or_default().push(ns);
                }
            }
        }
        eprintln!("calls: repetition {rep}/{} done", cfg.reps);
    }
}

/// Per-repetition ratios `a / b`: median and 95% interval.
fn paired(samples: &Samples, a: (Op, Mech), b: (Op, Mech)) -> Option<Interval> {
    let (a, b) = (samples.get(&a)?, samples.get(&b)?);
    let r: Vec<f64> = a.iter().zip(b).map(|(x, y)| x / y).collect();
    Interval::of(&r)
}

fn median(samples: &Samples, k: (Op, Mech)) -> Option<f64> {
    samples
        .get(&k)
        .and_then(|v| Summary::of(v))
        .map(|s| s.median)
}

#[allow(clippy::too_many_arguments)]
fn report(
    cfg: Config,
    mechs: &[Mech],
    backends: &[Backend],
    samples: &Samples,
    errors: &[String],
    uring_refused: Option<String>,
    machine: &Machine,
) -> Section {
    let unit = match machine.clock {
        Clock::Instructions => "instructions",
        Clock::Time => "CPU ns",
    };
    let mut md = String::new();
    let _ = writeln!(
        md,
        "{unit} per call (median of {} blocks of ≈{} ms, min–max in parentheses), each \
         mechanism on an instance of its own over `AF_UNIX` stream socketpairs; a ready \
         socket holds one unread byte for the whole run (level-triggered on every side). \
         \"÷ epoll\": the median of the per-repetition ratios with its 95% interval; \
         \"− epoll\": the difference of the medians, in {unit}. {RATIO_LEGEND}\n",
        cfg.reps,
        cfg.block_ns / 1_000_000,
    );
    if machine.clock == Clock::Instructions {
        let _ = writeln!(md, "{INSTRUCTION_TIME_CAVEAT}\n");
    } else {
        let _ = writeln!(
            md,
            "Time is the thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`): no call blocks.\n"
        );
    }
    if let Some(why) = &uring_refused {
        let _ = writeln!(md, "* io_uring: {why}; its rows are missing\n");
    }
    for e in errors {
        let _ = writeln!(md, "* not measured: {e}");
    }
    if !errors.is_empty() {
        md.push('\n');
    }
    let mut cells = vec![];
    for op in OPS {
        let _ = writeln!(
            md,
            "#### {}\n\n| mechanism | call | {unit} per call | ÷ epoll | − epoll |\n\
             |---|---|---|---|---|",
            op.name()
        );
        let base = median(samples, (op, Mech::Epoll));
        for &m in mechs.iter().filter(|m| m.has(op)) {
            let Some(s) = samples.get(&(op, m)).and_then(|v| Summary::of(v)) else {
                continue;
            };
            let ratio = paired(samples, (op, m), (op, Mech::Epoll));
            let diff = base.map(|b| s.median - b);
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} | {} |",
                m.name(backends),
                m.call(op),
                s.cell(0),
                if m == Mech::Epoll {
                    "1".to_owned()
                } else {
                    ratio.map_or("–".into(), |r| r.ratio_cell())
                },
                diff.map_or("–".into(), |d| format!("{d:+.0}")),
            );
            let mut cell = Json::obj([
                ("call", Json::from(op.key())),
                ("mechanism", Json::from(m.key(backends))),
                ("per_call", s.json()),
            ]);
            if let Some(r) = ratio.filter(|_| m != Mech::Epoll) {
                cell.push("paired_ratio_over_epoll", r.json());
            }
            cells.push(cell);
        }
        md.push('\n');
    }
    // Where the cost of a returning wait goes: per further event, and the fixed part.
    let _ = writeln!(
        md,
        "#### A returning wait, split\n\nPer further event: (64 ready − 1 ready) ÷ 63; fixed: \
         1 ready − one further event (the call, the timeout, the locks: what does not grow \
         with the events), in {unit}, from the medians.\n\n\
         | mechanism | per further event | − epoll | fixed | − epoll |\n|---|---|---|---|---|"
    );
    let split = |m: Mech| -> Option<(f64, f64)> {
        let one = median(samples, (Op::WaitOne, m))?;
        let many = median(samples, (Op::WaitMany, m))?;
        let per = (many - one) / (MANY - 1) as f64;
        Some((per, one - per))
    };
    let base = split(Mech::Epoll);
    let mut split_json = vec![];
    for &m in mechs.iter().filter(|m| m.has(Op::WaitMany)) {
        let Some((per, fixed)) = split(m) else {
            continue;
        };
        let d = |x: f64, b: Option<f64>| b.map_or("–".into(), |b| format!("{:+.0}", x - b));
        let _ = writeln!(
            md,
            "| {} | {per:.0} | {} | {fixed:.0} | {} |",
            m.name(backends),
            d(per, base.map(|b| b.0)),
            d(fixed, base.map(|b| b.1)),
        );
        split_json.push(Json::obj([
            ("mechanism", Json::from(m.key(backends))),
            ("per_further_event", Json::from(per)),
            ("fixed", Json::from(fixed)),
        ]));
    }
    md.push('\n');
    let summary = summary_rows(mechs, backends, samples, unit);
    Section {
        name: "calls",
        title: format!("Per call: kevent beside epoll and io_uring ({unit})"),
        markdown: md,
        json: Json::obj([
            ("unit", Json::from(unit)),
            ("reps", Json::from(cfg.reps)),
            ("block_ms", Json::from(cfg.block_ns / 1_000_000)),
            ("io_uring_refused", Json::from(uring_refused)),
            (
                "errors",
                Json::arr(errors.iter().map(|e| Json::from(e.as_str()))),
            ),
            ("cells", Json::Arr(cells)),
            ("split", Json::Arr(split_json)),
        ]),
        charts: vec![],
        summary,
    }
}

/// One headline row per kevent mechanism: its ratio to epoll for each call kind.
fn summary_rows(
    mechs: &[Mech],
    backends: &[Backend],
    samples: &Samples,
    unit: &str,
) -> Vec<SummaryRow> {
    mechs
        .iter()
        .filter(|m| matches!(m, Mech::Kevent(_) | Mech::Ring(_) | Mech::AsyncRing(_)))
        .filter_map(|&m| {
            let parts: Vec<String> = OPS
                .iter()
                .filter(|&&op| m.has(op))
                .filter_map(|&op| {
                    let r = paired(samples, (op, m), (op, Mech::Epoll))?;
                    let d = median(samples, (op, m))? - median(samples, (op, Mech::Epoll))?;
                    Some(format!("{}: {} ({d:+.0} {unit})", op.key(), r.ratio_cell()))
                })
                .collect();
            (!parts.is_empty()).then(|| SummaryRow {
                what: format!("calls: {} ÷ epoll, per call", m.name(backends)),
                target: "≤ 1.00 (issue 21)".into(),
                result: parts.join("; "),
            })
        })
        .collect()
}

/// The `calls-rounds OP MECH ROUNDS` subcommand: `ROUNDS` calls of one kind on one mechanism
/// alone, on the process's backend (`KEVENT_BACKEND`), as a workload to profile (in the guest
/// `scripts/vm-lane run --icount --profile DIR`: the timed calls are the profile's window 0,
/// after a warm-up of up to 100 calls, so `profile-symbols DIR 0:ROUNDS` gives instructions
/// per call by kernel function). OP is a call kind's key as in `calls.json`
/// (`wait_nothing_ready`, `wait_1_ready`, `wait_64_ready`, `add_remove`, `modify`,
/// `level_turn`); MECH is `epoll`, `io_uring`, `kevent`, `ring` or `async-ring`. It prints one
/// absolute figure, this run's ns per call, with no baseline: `kevent-bench calls` compares.
pub fn rounds_command(args: &[String]) -> std::io::Result<u8> {
    let usage = || {
        eprintln!(
            "usage: kevent-bench calls-rounds \
             wait_nothing_ready|wait_1_ready|wait_64_ready|add_remove|modify|level_turn \
             epoll|io_uring|kevent|ring|async-ring ROUNDS"
        );
        Ok(2)
    };
    let [op, mech, rounds] = args else {
        return usage();
    };
    let Some(op) = OPS.into_iter().find(|o| o.key() == op.as_str()) else {
        return usage();
    };
    let Ok(rounds) = rounds.parse::<u64>() else {
        return usage();
    };
    let m = match mech.as_str() {
        "epoll" => Mech::Epoll,
        "io_uring" => Mech::Uring,
        "kevent" => Mech::Kevent(0),
        "ring" => Mech::Ring(0),
        "async-ring" => Mech::AsyncRing(0),
        _ => return usage(),
    };
    if !m.has(op) {
        eprintln!("kevent-bench: {mech} has no call `{}`", op.key());
        return Ok(2);
    }
    if m == Mech::Uring
        && let Err(why) = Uring::probe()
    {
        eprintln!("kevent-bench: io_uring: {why}");
        return Ok(1);
    }
    let backends = match Backend::current() {
        Ok(b) => [b],
        Err(e) => {
            eprintln!("kevent-bench: {e}");
            return Ok(1);
        }
    };
    let s = Sockets::new()?;
    let mut f = match Fixture::new(m, op, &s, &backends) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("kevent-bench: {e}");
            return Ok(1);
        }
    };
    // A warm-up outside the profile's window: the calls in it are the steady state only.
    for _ in 0..rounds.min(100) {
        f.once(m, op, &s);
    }
    let t = os::now_ns();
    os::profile_mark::<1>();
    for _ in 0..rounds {
        f.once(m, op, &s);
    }
    os::profile_mark::<2>();
    let ns = (os::now_ns() - t) as f64 / rounds.max(1) as f64;
    println!(
        "{rounds} calls of \"{}\" on {}: {ns:.1} ns per call \
         (absolute: this run's wall time ÷ calls, no baseline)",
        op.name(),
        m.name(&backends),
    );
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every call of every mechanism returns what it must, on the fallback (and io_uring where
    /// the kernel gives it).
    #[test]
    fn every_call_checks_out() {
        let backends = [Backend::fallback()];
        let s = Sockets::new().unwrap();
        let mut mechs = vec![
            Mech::Epoll,
            Mech::Kevent(0),
            Mech::Ring(0),
            Mech::AsyncRing(0),
        ];
        if Uring::probe().is_ok() {
            mechs.push(Mech::Uring);
        }
        for op in OPS {
            for &m in mechs.iter().filter(|m| m.has(op)) {
                let mut f = Fixture::new(m, op, &s, &backends).unwrap();
                for _ in 0..100 {
                    f.once(m, op, &s);
                }
            }
        }
    }

    /// `calls-rounds` runs a call kind alone (on the process's backend) and refuses what it
    /// cannot run with its usage status.
    #[test]
    fn calls_rounds_runs_one_kind_and_refuses_the_rest() {
        let run = |a: &[&str]| {
            let args: Vec<String> = a.iter().map(|s| s.to_string()).collect();
            rounds_command(&args).unwrap()
        };
        assert_eq!(run(&["level_turn", "epoll", "10"]), 0);
        assert_eq!(run(&["wait_1_ready", "async-ring", "10"]), 0);
        // The ring has no MODIFY; an unknown kind, mechanism or count is a usage error.
        assert_eq!(run(&["modify", "ring", "10"]), 2);
        assert_eq!(run(&["turn", "epoll", "10"]), 2);
        assert_eq!(run(&["level_turn", "select", "10"]), 2);
        assert_eq!(run(&["level_turn", "epoll", "ten"]), 2);
        assert_eq!(run(&["level_turn", "epoll"]), 2);
    }
}
