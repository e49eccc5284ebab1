//! The poller benchmark (kqueue's "Poller_bench" shape, issue 6 item 1): N watched
//! descriptors, A of them active; one round writes one byte to each active descriptor, makes
//! one wait that returns them, and reads each byte. Reported in microseconds per round.
//!
//! Mechanisms: `select` (only while every fd is below `FD_SETSIZE`), `poll`, raw `epoll`
//! (level-triggered), io_uring (one multishot `IORING_OP_POLL_ADD` per descriptor, completions
//! reaped from the CQ ring, `io_uring_enter` only to wait on an empty CQ ring: [`crate::uring`];
//! reported as refused where the kernel or a seccomp filter refuses it), and for each
//! available kevent backend: `kevent_get_events` and the
//! ring (`kevent_wait`, read the entries published before `ring_kidx`, `kevent_commit`),
//! once committing after every wait and once committing when half the ring (512 of 1024
//! slots) has been read, the batching the ring allows; and the asynchronous ring (P38: the
//! consumer reads the ring with no system call while it has events and stores `ring_uidx`,
//! calling `kevent_wait` only when it finds the ring empty), where the backend accepts it.
//! Beside them, the **floor**: the round's writes and reads with nothing registered, what a
//! mechanism that cost nothing would measure (a round less the floor is its mechanism part).
//! The same two calls also go through
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
//! # Modules
//!
//! `transport` makes the watched descriptors; `mechanism` holds each mechanism's
//! registration and round; this module runs the measurement; `report` turns the samples
//! into tables, JSON, charts and headline rows.

mod mechanism;
mod report;
mod transport;

use std::collections::BTreeMap;
use std::os::fd::{AsRawFd, RawFd};

use kevent_backend::Backend;

use crate::machine::{Clock, Machine};
use crate::os;
use crate::{Opts, Section};
use mechanism::{Mech, Poller};
use transport::Sockets;
pub use transport::Transport;

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

/// What else happened in one timed block, besides its rounds (`getrusage` of the thread):
/// a block that a page fault or another task entered costs more than its rounds, in
/// instruction-time as in wall time.
#[derive(Clone, Copy, Debug)]
pub(super) struct Block {
    /// Minor page faults taken during the block.
    pub(super) faults: u64,
    /// Involuntary context switches during the block.
    pub(super) preempted: u64,
}

/// How long the instruction-time guest idles before each mechanism is built. The guest's
/// clock counts the instructions its CPUs execute, the other vCPU's included (QEMU's
/// `-icount` runs both in one thread, and idle time is skipped), so work that a teardown
/// defers (RCU callbacks freeing the previous mechanism's epoll items or kevents, or the
/// previous N's sockets; io_uring's exit work in a kworker) would be counted in whichever
/// later block it lands in: a block that finds the N items of another mechanism being freed
/// runs up to a tenth slower at N = 10000, and at N = 1000 the same reps move a cell by a
/// few hundredths (issue 21's repeatability). An idle guest runs that work at once (RCU's
/// grace periods and `kfree_rcu`'s batching take a few ticks of 4 ms); skipped idle time
/// costs no host time.
const SETTLE: std::time::Duration = std::time::Duration::from_millis(100);

/// Runs the poller benchmark on the calling (pinned) thread.
pub fn run(opts: &Opts, machine: &Machine) -> Section {
    let cfg = Config::new(opts.quick, opts.transport);
    eprintln!("poller: N = {:?}, A = {:?}", cfg.ns, cfg.actives);
    let backends = &machine.backends;
    // The floor (no mechanism) is measured beside them: a round's mechanism part is its
    // round less the floor.
    let mut mechs = vec![Mech::Select, Mech::Poll, Mech::Epoll, Mech::Floor];
    let uring = crate::uring::Uring::probe();
    match &uring {
        Ok(()) => mechs.push(Mech::Uring),
        Err(why) => eprintln!("poller: io_uring {why}"),
    }
    for (b, &backend) in backends.iter().enumerate() {
        mechs.push(Mech::KeventGet(b));
        mechs.push(Mech::KeventRing(b, false));
        mechs.push(Mech::KeventRing(b, true));
        if backend == Backend::Fallback {
            // P65: the ring row declares its queue's owner; this one proves every commit.
            mechs.push(Mech::KeventRingProved(b));
        }
        // P38: a kevent kernel without the asynchronous ring refuses the flag (EINVAL).
        match crate::rawqueue::RawQueue::new_async(backend, 4) {
            Ok(_) => mechs.push(Mech::KeventAsync(b)),
            Err(e) => eprintln!(
                "poller: asynchronous ring on the {} backend refused ({e}): row skipped",
                backend.as_str()
            ),
        }
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
    let mut blocks: BTreeMap<(Mech, usize, usize), Vec<Block>> = BTreeMap::new();
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
                if machine.clock == Clock::Instructions {
                    // The previous mechanism's (or N's) teardown is done before this one starts.
                    std::thread::sleep(SETTLE);
                }
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
                    let (f0, s0) = (os::thread_minor_faults(), os::thread_involuntary_switches());
                    let t = os::now_ns();
                    for _ in 0..r {
                        p.round(&socks, active);
                    }
                    let us = (os::now_ns() - t) as f64 / 1e3 / r as f64;
                    samples.entry((m, n, a)).or_default().push(us);
                    blocks.entry((m, n, a)).or_default().push(Block {
                        faults: os::thread_minor_faults() - f0,
                        preempted: os::thread_involuntary_switches() - s0,
                    });
                }
            }
        }
        eprintln!("poller: N={n} done");
    }
    report::report(
        &cfg,
        &mechs,
        backends,
        &samples,
        &blocks,
        &skipped,
        &select_skipped,
        uring.err(),
        machine,
    )
}

/// The `poller-rounds MECH N A ROUNDS` subcommand: `ROUNDS` rounds of one mechanism alone,
/// on the process's backend (`KEVENT_BACKEND`), N unix-dgram descriptors watched and A active,
/// as a workload to profile (`valgrind --tool=callgrind`, `perf record`, or in the guest
/// `scripts/vm-lane run --icount --profile DIR`: its timed rounds are the profile's window
/// 0, after a warm-up of up to 100 rounds). It prints one
/// absolute figure, this run's µs per round, with no baseline: comparisons are what
/// `kevent-bench poller` is for.
pub fn rounds_command(args: &[String]) -> std::io::Result<u8> {
    let usage = || {
        eprintln!(
            "usage: kevent-bench poller-rounds \
             select|poll|epoll|io_uring|floor|get_events|ring|ring-batched|async-ring|c-get_events|c-ring N A ROUNDS"
        );
        Ok(2)
    };
    let [mech, n, a, rounds] = args else {
        return usage();
    };
    let (Ok(n), Ok(a), Ok(rounds)) = (
        n.parse::<usize>(),
        a.parse::<usize>(),
        rounds.parse::<u64>(),
    ) else {
        return usage();
    };
    if a == 0 || a > n || a > mechanism::MAX_A {
        eprintln!(
            "kevent-bench: A must be 1..={} and at most N",
            mechanism::MAX_A
        );
        return Ok(2);
    }
    let backend = match Backend::current() {
        Ok(b) => b,
        Err(e) => {
            eprintln!("kevent-bench: {e}");
            return Ok(1);
        }
    };
    let m = match mech.as_str() {
        "select" => Mech::Select,
        "poll" => Mech::Poll,
        "epoll" => Mech::Epoll,
        "io_uring" => Mech::Uring,
        "floor" => Mech::Floor,
        "get_events" => Mech::KeventGet(0),
        "ring" => Mech::KeventRing(0, false),
        "ring-batched" => Mech::KeventRing(0, true),
        "ring-proved" => Mech::KeventRingProved(0),
        "async-ring" => Mech::KeventAsync(0),
        "c-get_events" => Mech::CGet(0),
        "c-ring" => Mech::CRing(0),
        _ => return usage(),
    };
    os::raise_fd_limit();
    let socks = Sockets::new(Transport::UnixDgram, n)?;
    let max_fd = socks.watched.iter().map(AsRawFd::as_raw_fd).max();
    if m == Mech::Select && max_fd.unwrap_or(0) >= libc::FD_SETSIZE as RawFd {
        eprintln!("kevent-bench: select needs every fd below FD_SETSIZE: use a smaller N");
        return Ok(2);
    }
    let backends = [backend];
    let mut p = Poller::build(m, &socks, &backends);
    let active: Vec<usize> = (0..a).map(|i| i * (n / a)).collect();
    // A warm-up outside the profile's window (`vm-lane run --profile`): the rounds in it are
    // the steady state only.
    for _ in 0..rounds.min(100) {
        p.round(&socks, &active);
    }
    let t = os::now_ns();
    os::profile_mark::<1>();
    for _ in 0..rounds {
        p.round(&socks, &active);
    }
    os::profile_mark::<2>();
    let us = (os::now_ns() - t) as f64 / 1e3 / rounds.max(1) as f64;
    println!(
        "{rounds} rounds of {}, N={n} watched, A={a} active ({}): {us:.2} µs per round \
         (absolute: this run's wall time ÷ rounds, no baseline)",
        m.name(&backends),
        Transport::UnixDgram.name(),
    );
    Ok(0)
}
