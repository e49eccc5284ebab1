//! The C API benchmark (issue 11): what libkevent's exported functions cost per call over the
//! Rust backend dispatch they wrap, on the process's backend. On the fallback the difference
//! is the C layer's fault-safe copies of caller memory (`backend/src/uaccess/`: `kevent_ctl`
//! reads its entries into a private buffer and writes back the span the engine changed;
//! `kevent_get_events` writes out the events it returns; `kevent_wait` and `kevent_commit`
//! copy nothing) plus the `-1`/`errno` convention. On a kevent kernel the C functions hand the
//! pointers straight to the system calls, so the ratios there should be 1.
//!
//! Operations, each on a queue of its own per side (the same registrations both ways):
//!
//! * `READY n + get_events n`, n = 1, 8, 64: n registered UNOTIFY kevents made ready by one
//!   `kevent_ctl(READY)`, then returned by one `kevent_get_events`;
//! * `get_events, nothing ready`: a zero timeout, returns 0 (nothing is copied out);
//! * `ADD 1 + REMOVE 1`: one UNOTIFY kevent added and removed again;
//! * `ring: READY 1 + wait + commit`: the ring fast path (a ring of 64 entries).
//!
//! # Method
//!
//! The poller round through the C functions is measured by `kevent-bench poller` (its C rows
//! and their C ÷ Rust ratios); this benchmark times single calls. Each repetition times, per
//! operation, one block through the C functions and one through the Rust dispatch, in an
//! order that alternates between repetitions; a block repeats the operation for about the
//! block length and gives ns per operation. Time is the thread's own CPU time
//! (`CLOCK_THREAD_CPUTIME_ID`): no call blocks (the timeouts are zero and the events
//! ready), so CPU time is the whole cost, and unlike the wall clock it does not count the
//! slices other processes take on a shared machine. The first repetition is a warm-up. A cell is the
//! median (min–max) over repetitions, and C ÷ Rust the median of the per-repetition ratios with
//! its 95% bootstrap interval.

use std::fmt::Write as _;

use kevent_backend::Backend;
use kevent_sys::{
    Errno, KEVENT_CTL_ADD, KEVENT_CTL_READY, KEVENT_CTL_REMOVE, KEVENT_UNOTIFY, kevent_id, ukevent,
};

use crate::json::Json;
use crate::machine::Machine;
use crate::os;
use crate::rawqueue::{RawQueue, timeout_ms};
use crate::stats::{Interval, RATIO_LEGEND, Summary, judge_at_most};
use crate::{Opts, Section, SummaryRow};

/// UNOTIFY kevents registered in the non-ring queues (ids `0..REGISTERED`).
const REGISTERED: usize = 64;
/// The ring's size.
const RING: u32 = 64;
/// The id that `ADD 1 + REMOVE 1` adds and removes (not among the registered ones).
const CHURN_ID: u64 = 1000;
/// Issue 11's target for `kevent_ctl` ADD + REMOVE of one entry: C ÷ Rust.
const ADD_REMOVE_TARGET: f64 = 1.2;

/// One operation timed through both entry points.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    /// READY `.0` registered kevents, then one `get_events` that returns them.
    ReadyGet(usize),
    /// `get_events` with nothing ready and a zero timeout.
    GetNothing,
    /// ADD one kevent, then REMOVE it.
    AddRemove,
    /// READY one kevent, `kevent_wait` for it, read it from the ring and `kevent_commit`.
    Ring,
}

const OPS: [Op; 6] = [
    Op::ReadyGet(1),
    Op::ReadyGet(8),
    Op::ReadyGet(64),
    Op::GetNothing,
    Op::AddRemove,
    Op::Ring,
];

impl Op {
    fn name(self) -> String {
        match self {
            Op::ReadyGet(n) => format!("READY {n} + get_events {n}"),
            Op::GetNothing => "get_events, nothing ready".into(),
            Op::AddRemove => "ADD 1 + REMOVE 1".into(),
            Op::Ring => "ring: READY 1 + wait + commit".into(),
        }
    }

    fn key(self) -> String {
        match self {
            Op::ReadyGet(n) => format!("ready_{n}_get_events_{n}"),
            Op::GetNothing => "get_events_nothing_ready".into(),
            Op::AddRemove => "add_1_remove_1".into(),
            Op::Ring => "ring_ready_1_wait_commit".into(),
        }
    }

    /// What the C layer copies on the fallback backend.
    fn copies(self) -> String {
        match self {
            Op::ReadyGet(1) => "1 entry in (READY), 1 event out".into(),
            Op::ReadyGet(n) => format!("{n} entries in (READY), {n} events out"),
            Op::GetNothing => "nothing".into(),
            Op::AddRemove => "1 entry in per call, and back where the call changed it".into(),
            Op::Ring => "READY's 1 entry in; wait and commit nothing".into(),
        }
    }
}

fn unotify(id: u64) -> ukevent {
    ukevent::new(KEVENT_UNOTIFY, kevent_id::from_u64(id), 1, 0)
}

/// One side's queue for one operation, with its buffers.
struct Fixture {
    op: Op,
    q: RawQueue,
    mark: Vec<ukevent>,
    out: Vec<ukevent>,
}

impl Fixture {
    /// The queue for `op` through the C functions (`c`) or the Rust dispatch on `backend`.
    fn new(op: Op, backend: Backend, c: bool) -> Result<Fixture, Errno> {
        let ring = if op == Op::Ring { RING } else { 0 };
        let q = if c {
            RawQueue::new_c(ring).ok_or(Errno::ENOSYS)??
        } else {
            RawQueue::new(backend, ring)?
        };
        let registered = if op == Op::Ring { 1 } else { REGISTERED };
        let mut reg: Vec<ukevent> = (0..registered as u64).map(unotify).collect();
        q.ctl(KEVENT_CTL_ADD, &mut reg)?;
        let marked = match op {
            Op::ReadyGet(n) => n,
            Op::Ring => 1,
            _ => 0,
        };
        Ok(Fixture {
            op,
            q,
            mark: (0..marked as u64).map(unotify).collect(),
            out: vec![unotify(0); REGISTERED],
        })
    }

    /// One operation. The results are checked, so that a broken call cannot pass for a fast
    /// one.
    fn once(&mut self) {
        let zero = timeout_ms(0);
        match self.op {
            Op::ReadyGet(n) => {
                assert_eq!(self.q.ctl(KEVENT_CTL_READY, &mut self.mark), Ok(n as u32));
                let got = self.q.get_events(n as u32, &mut self.out, &zero);
                assert_eq!(got, Ok(n as u32));
            }
            Op::GetNothing => assert_eq!(self.q.get_events(1, &mut self.out, &zero), Ok(0)),
            Op::AddRemove => {
                let mut one = [unotify(CHURN_ID)];
                assert_eq!(self.q.ctl(KEVENT_CTL_ADD, &mut one), Ok(0));
                one[0] = unotify(CHURN_ID);
                assert_eq!(self.q.ctl(KEVENT_CTL_REMOVE, &mut one), Ok(0));
            }
            Op::Ring => {
                assert_eq!(self.q.ctl(KEVENT_CTL_READY, &mut self.mark), Ok(1));
                assert_eq!(self.q.wait(1, &zero), Ok(1));
                assert_eq!(self.q.consume(|_| ()), Ok(1));
            }
        }
    }

    /// Thread CPU ns per operation over one block of about `block_ns` of it.
    fn block(&mut self, block_ns: u64) -> f64 {
        let start = os::thread_cpu_ns();
        let mut n = 0u64;
        loop {
            for _ in 0..32 {
                self.once();
            }
            n += 32;
            let t = os::thread_cpu_ns() - start;
            if t >= block_ns {
                return t as f64 / n as f64;
            }
        }
    }
}

/// Settings of one run.
#[derive(Clone, Copy, Debug)]
struct Config {
    /// Timed repetitions (after one warm-up).
    reps: usize,
    /// Target length of one block.
    block_ns: u64,
}

/// Per operation: ns per call through C and through Rust, one sample per repetition each.
struct Samples {
    c: Vec<f64>,
    rust: Vec<f64>,
}

fn measure(cfg: Config, backend: Backend) -> Result<Vec<(Op, Samples)>, Errno> {
    let mut sides = vec![];
    for op in OPS {
        sides.push((
            Fixture::new(op, backend, true)?,
            Fixture::new(op, backend, false)?,
        ));
    }
    let mut samples: Vec<(Op, Samples)> = OPS
        .iter()
        .map(|&op| {
            let s = Samples {
                c: vec![],
                rust: vec![],
            };
            (op, s)
        })
        .collect();
    for rep in 0..=cfg.reps {
        for ((c, rust), (_, s)) in sides.iter_mut().zip(&mut samples) {
            let (tc, tr) = if rep % 2 == 0 {
                let tc = c.block(cfg.block_ns);
                (tc, rust.block(cfg.block_ns))
            } else {
                let tr = rust.block(cfg.block_ns);
                (c.block(cfg.block_ns), tr)
            };
            if rep > 0 {
                s.c.push(tc);
                s.rust.push(tr);
            }
        }
    }
    Ok(samples)
}

/// Runs the C API benchmark on the calling (pinned) thread.
pub fn run(opts: &Opts, _machine: &Machine) -> Section {
    let cfg = if opts.quick {
        Config {
            reps: 11,
            block_ns: 5_000_000,
        }
    } else {
        Config {
            reps: 21,
            block_ns: 20_000_000,
        }
    };
    let title = "C API: libkevent's functions ÷ the Rust dispatch, per call".to_owned();
    let backend = match Backend::current() {
        Ok(b) => b,
        Err(e) => return skipped(title, format!("no backend for the C library: {e}")),
    };
    let mut passes = vec![];
    for path in CopyPath::ALL {
        if path != CopyPath::Safecopy && backend.is_native() {
            continue; // no copies on a kevent kernel: one pass says it all
        }
        let _held = path.enter();
        match measure(cfg, backend) {
            Ok(s) => passes.push((path, s)),
            Err(e) => return skipped(title, format!("a queue could not be set up: {e}")),
        }
    }
    eprintln!("capi: {} done", backend.as_str());
    report(cfg, backend, &passes, title)
}

/// How the C layer copies caller memory on the fallback, and how this benchmark makes it copy
/// that way: the conditions a program meets, not a switch inside the library.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum CopyPath {
    /// The default on x86_64: safecopy, a `memcpy` whose faults become `EFAULT`.
    Safecopy,
    /// `process_vm_readv`/`process_vm_writev` on our own pid: what a thread that blocks
    /// `SIGSEGV` and `SIGBUS` gets (safecopy's faults could not reach its handler).
    ProcessVm,
}

impl CopyPath {
    const ALL: [CopyPath; 2] = [CopyPath::Safecopy, CopyPath::ProcessVm];

    fn key(self) -> &'static str {
        match self {
            CopyPath::Safecopy => "safecopy",
            CopyPath::ProcessVm => "process_vm",
        }
    }

    fn label(self) -> &'static str {
        match self {
            CopyPath::Safecopy => "safecopy (default)",
            CopyPath::ProcessVm => "process_vm (thread blocks SIGSEGV, SIGBUS)",
        }
    }

    /// Puts the calling thread in this path's condition until the guard drops.
    fn enter(self) -> Option<SigmaskGuard> {
        (self == CopyPath::ProcessVm).then(|| SigmaskGuard::block(&[libc::SIGSEGV, libc::SIGBUS]))
    }
}

/// Signals blocked in the calling thread, unblocked again on drop.
struct SigmaskGuard(libc::sigset_t);

impl SigmaskGuard {
    fn block(signals: &[libc::c_int]) -> SigmaskGuard {
        // SAFETY: `set` is initialised by sigemptyset before use; pthread_sigmask reads `set`
        // and writes the previous mask to `old`, both locals.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            let mut old: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            for &s in signals {
                libc::sigaddset(&mut set, s);
            }
            let r = libc::pthread_sigmask(libc::SIG_BLOCK, &set, &mut old);
            assert_eq!(r, 0, "pthread_sigmask");
            SigmaskGuard(old)
        }
    }
}

impl Drop for SigmaskGuard {
    fn drop(&mut self) {
        // SAFETY: restores the mask saved by `block`; no other memory is touched.
        unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &self.0, std::ptr::null_mut()) };
    }
}

fn skipped(title: String, why: String) -> Section {
    Section {
        name: "capi",
        title,
        markdown: format!("Skipped: {why}.\n\n"),
        json: Json::obj([("skipped", Json::from(why))]),
        charts: vec![],
        summary: vec![],
    }
}

fn report(
    cfg: Config,
    backend: Backend,
    passes: &[(CopyPath, Vec<(Op, Samples)>)],
    title: String,
) -> Section {
    let b = backend.as_str();
    let mut md = format!(
        "Thread CPU nanoseconds per operation (`CLOCK_THREAD_CPUTIME_ID`: no call blocks, \
         and time other processes hold the CPU is not counted) on the **{b}** backend, through libkevent's exported \
         functions (C) and through the Rust backend dispatch they wrap (Rust: slices, no \
         copies), in the same process: median (min–max) of {} repetitions, each timing one \
         block of ≈{} ms of CPU time per side, the sides in alternating order. C ÷ Rust: over the ratios \
         of the two blocks of the same repetition. {RATIO_LEGEND} Copies: what the C layer \
         copies on the fallback (on a kevent kernel the pointers go to the system calls \
         as they are); copy path: how it copies them, under the condition that selects the \
         path (the Rust side copies nothing, whatever the path).\n\n\
         | copy path | operation | copies | C ns/op | Rust ns/op | C ÷ Rust |\n\
         |---|---|---|---|---|---|\n",
        cfg.reps,
        cfg.block_ns / 1_000_000,
    );
    let mut rows = vec![];
    let mut ratios = vec![];
    for (path, samples) in passes {
        for (op, s) in samples {
            let (c, rust) = (Summary::of(&s.c), Summary::of(&s.rust));
            let per: Vec<f64> = s.c.iter().zip(&s.rust).map(|(c, r)| c / r).collect();
            let ratio = Interval::of(&per);
            let cell = |x: Option<Summary>| x.map_or("–".to_owned(), |x| x.cell(0));
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} | {} | {} |",
                path.label(),
                op.name(),
                op.copies(),
                cell(c),
                cell(rust),
                ratio.map_or("–".to_owned(), |r| r.ratio_cell()),
            );
            let mut row = Json::obj([
                ("copy_path", Json::from(path.key())),
                ("operation", Json::from(op.key())),
            ]);
            if let (Some(c), Some(rust), Some(r)) = (c, rust, ratio) {
                row.push("c_ns_per_op", c.json());
                row.push("rust_ns_per_op", rust.json());
                row.push("paired_ratio_c_over_rust", r.json());
                ratios.push((*path, *op, r));
            }
            rows.push(row);
        }
    }
    md.push('\n');
    let mut summary = vec![];
    let default: Vec<(Op, Interval)> = ratios
        .iter()
        .filter(|(p, _, _)| *p == CopyPath::Safecopy)
        .map(|&(_, op, r)| (op, r))
        .collect();
    if let Some(&(_, add_remove)) = default.iter().find(|(op, _)| *op == Op::AddRemove) {
        let (lo, hi) = default
            .iter()
            .filter(|(op, _)| *op != Op::AddRemove)
            .fold((f64::INFINITY, 0f64), |(l, h), (_, r)| {
                (l.min(r.median), h.max(r.median))
            });
        let vm = ratios
            .iter()
            .find(|(p, op, _)| *p == CopyPath::ProcessVm && *op == Op::AddRemove)
            .map_or(String::new(), |(_, _, r)| {
                format!("; through process_vm: ADD + REMOVE {}", r.cell(2))
            });
        summary.push(SummaryRow {
            what: format!("capi: C functions ÷ Rust dispatch, CPU ns per call ({b})"),
            target: format!("kevent_ctl ADD + REMOVE ≤ {ADD_REMOVE_TARGET}"),
            result: format!(
                "ADD + REMOVE {}: **{}**; the other {} operations: medians {lo:.2}–{hi:.2}{vm}",
                add_remove.cell(2),
                judge_at_most(&[add_remove], ADD_REMOVE_TARGET),
                default.len() - 1,
            ),
        });
    }
    Section {
        name: "capi",
        title,
        markdown: md,
        json: Json::obj([
            ("backend", Json::from(b)),
            ("reps", Json::from(cfg.reps)),
            ("block_ms", Json::from(cfg.block_ns / 1_000_000)),
            ("operations", Json::Arr(rows)),
        ]),
        charts: vec![],
        summary,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_operation_runs_both_ways() {
        let Ok(b) = Backend::current() else {
            return;
        };
        let cfg = Config {
            reps: 3,
            block_ns: 200_000,
        };
        let mut passes = vec![];
        for path in CopyPath::ALL {
            let _held = path.enter();
            let samples = measure(cfg, b).unwrap();
            assert_eq!(samples.len(), OPS.len());
            for (_, s) in &samples {
                assert_eq!((s.c.len(), s.rust.len()), (3, 3));
                assert!(s.c.iter().chain(&s.rust).all(|&x| x > 0.0));
            }
            passes.push((path, samples));
        }
        let section = report(cfg, b, &passes, "t".into());
        assert!(section.markdown.contains("| ADD 1 + REMOVE 1 |"));
        assert!(
            section
                .markdown
                .contains("| process_vm (thread blocks SIGSEGV, SIGBUS) |")
        );
        assert_eq!(section.summary.len(), 1);
    }
}
