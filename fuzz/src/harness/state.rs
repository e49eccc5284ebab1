//! One input's state ([`Harness`]): the queues, fds and timers it made, what each call's
//! arguments name ([`Target`]) and are expected to give ([`Expect`]), and running a call
//! ([`Harness::call`]) with its trace.

use std::fmt::Write as _;
use std::os::fd::RawFd;
use std::path::PathBuf;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use super::model::QueueState;
use super::os::{errno, is_open};
use super::{SLACK, STATS};
use crate::input::Src;
use crate::mem::Guarded;

/// `KEVENT_FUZZ_TRACE=1`: print every operation as it runs (for crashes, which end the
/// process before the panic message with the trace could be printed).
pub(super) fn trace_live() -> bool {
    static TRACE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *TRACE.get_or_init(|| std::env::var_os("KEVENT_FUZZ_TRACE").is_some_and(|v| v != "0"))
}

/// The byte a closed queue's ring is filled with.
pub(super) const GRAVE: u8 = 0xDB;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    Unix,
    PipeR,
    PipeW,
    Event,
    Memfd,
    Dir,
    Epoll,
    Listener,
    Tcp,
    Udp,
}

#[derive(Debug)]
pub(super) struct HFd {
    pub(super) fd: RawFd,
    pub(super) kind: Kind,
}

/// What a queue-fd argument names right now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Target {
    Queue(usize),
    NotQueue,
    Closed,
}

/// One input's state.
#[derive(Debug)]
pub(super) struct Harness {
    pub(super) dir: PathBuf,
    pub(super) log: String,
    pub(super) queues: Vec<QueueState>,
    pub(super) dead_queues: Vec<RawFd>,
    pub(super) fds: Vec<HFd>,
    pub(super) closed: Vec<RawFd>,
    /// Rings of closed queues, kept mapped and filled with [`GRAVE`] until the end of the
    /// input (unless strict): any change is a write after close (F4).
    pub(super) graveyard: Vec<Guarded>,
    pub(super) graveyard_lens: Vec<usize>,
    /// POSIX timers created: (timer_t, serial of the queue they report to).
    pub(super) timers: Vec<(usize, u32)>,
    pub(super) next_serial: u32,
    /// How adversarial this input's arguments are: each "bad argument" choice is taken with
    /// probability chaos/256 (the input's first byte / 3), so that some inputs go deep with
    /// valid calls and others probe the error paths.
    pub(super) chaos: u8,
    pub(super) listener_port: Option<u16>,
}

/// The result of one call.
#[derive(Debug, Clone, Copy)]
pub(super) struct Ret {
    pub(super) ret: i32,
    pub(super) errno: i32,
}

/// What the harness knows about a call's error conditions.
#[derive(Debug, Default)]
pub(super) struct Expect {
    /// Conditions that certainly apply: the call must fail with one of these.
    pub(super) must: Vec<i32>,
    /// Conditions that may apply (e.g. a read-only buffer the call may or may not write).
    pub(super) maybe: Vec<i32>,
}

impl Expect {
    pub(super) fn must(&mut self, e: i32) {
        if !self.must.contains(&e) {
            self.must.push(e);
        }
    }
    pub(super) fn maybe(&mut self, e: i32) {
        if !self.maybe.contains(&e) {
            self.maybe.push(e);
        }
    }
}

impl Harness {
    pub(super) fn trace(&mut self, line: std::fmt::Arguments<'_>) {
        if trace_live() {
            eprintln!("{line}");
        }
        if self.log.len() < 64 * 1024 {
            let _ = self.log.write_fmt(line);
            self.log.push('\n');
        }
    }

    /// Whether to take a bad-argument branch.
    pub(super) fn bad(&self, s: &mut Src<'_>) -> bool {
        s.chance(self.chaos)
    }

    pub(super) fn classify(&self, fd: RawFd) -> Target {
        if let Some(i) = self.queues.iter().position(|q| q.fd == fd) {
            return Target::Queue(i);
        }
        if is_open(fd) {
            Target::NotQueue
        } else {
            Target::Closed
        }
    }

    pub(super) fn expect_target(&self, fd: RawFd, x: &mut Expect) -> Target {
        let t = self.classify(fd);
        match t {
            Target::Queue(_) => {}
            Target::NotQueue => x.must(libc::EINVAL),
            Target::Closed => x.must(libc::EBADF),
        }
        t
    }

    /// Runs one call, timing it against `budget_ns` (its timeout).
    pub(super) fn call(&mut self, slot: usize, budget_ns: u64, f: impl FnOnce() -> i32) -> Ret {
        STATS.calls[slot].fetch_add(1, Relaxed);
        let t = Instant::now();
        let ret = f();
        let errno = errno();
        let took = t.elapsed();
        STATS
            .max_call_us
            .fetch_max(took.as_micros() as u64, Relaxed);
        if took > Duration::from_nanos(budget_ns) + SLACK {
            violation!(
                self,
                "call took {took:?}, its timeout was {budget_ns} ns (ret {ret})"
            );
        }
        if ret < 0 {
            STATS.errors.fetch_add(1, Relaxed);
        }
        Ret { ret, errno }
    }
}
