//! The ring benchmark (issue 6 item 5): events per second delivered to a consumer through
//! `kevent_get_events` (copied into the caller's buffer) and through the ring
//! (`kevent_wait` moves them into the ring, the consumer reads them after an Acquire load of
//! `ring_kidx`, then `kevent_commit`), and the calls each costs per event.
//!
//! The events are UNOTIFY kevents marked ready with `kevent_ctl(READY)` in batches of B. One
//! iteration: READY B kevents, then take them (get_events with `min_nr = B`, or wait + read +
//! commit). The loop runs on one thread, so events/s is the producer and the consumer
//! together; `consumer ns/event` times only the taking side.
//!
//! Calls per event are counted two ways:
//!
//! * **ABI calls**: a counter kept around every `kevent_*` call the loop makes: what a kevent
//!   kernel would see as syscalls;
//! * **kernel syscalls** (when `strace` is installed): `strace -f -c` over a child process
//!   (`kevent-bench ring-syscalls ...`) running a fixed number of iterations, minus the same
//!   child running none; on the fallback this counts the epoll/eventfd calls the engine
//!   makes underneath.

use std::fmt::Write as _;
use std::process::Command;

use kevent_backend::Backend;
use kevent_sys::{KEVENT_CTL_ADD, KEVENT_CTL_READY, KEVENT_UNOTIFY, kevent_id, ukevent};

use crate::json::Json;
use crate::machine::Machine;
use crate::os;
use crate::rawqueue::{FOREVER, RawQueue};
use crate::stats::Summary;
use crate::{Opts, Section};

/// Registered UNOTIFY kevents per queue; the ring has this many slots too.
const KEVENTS: usize = 4096;

/// How the consumer takes the events.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Path {
    GetEvents,
    /// Commit after every wait.
    Ring,
    /// Commit once half the ring has been read.
    RingBatched,
}

impl Path {
    fn name(self) -> &'static str {
        match self {
            Path::GetEvents => "get_events",
            Path::Ring => "ring (wait + commit)",
            Path::RingBatched => "ring, batched commit",
        }
    }

    fn key(self) -> &'static str {
        match self {
            Path::GetEvents => "get_events",
            Path::Ring => "ring",
            Path::RingBatched => "ring_batched_commit",
        }
    }
}

/// A queue with `KEVENTS` registered UNOTIFY kevents and the loop state.
struct Bench {
    q: RawQueue,
    path: Path,
    marks: Vec<ukevent>,
    buf: Vec<ukevent>,
    next: usize,
    /// ABI calls made.
    calls: u64,
    /// Sum of the cookies taken (keeps the reads alive).
    sink: u64,
}

impl Bench {
    fn new(b: Backend, path: Path) -> Bench {
        let ring = if path == Path::GetEvents {
            0
        } else {
            KEVENTS as u32
        };
        let mut q = RawQueue::new(b, ring).expect("kevent_init");
        if path == Path::RingBatched {
            q.set_commit_every(ring / 2);
        }
        let mut adds: Vec<ukevent> = (0..KEVENTS as u64)
            .map(|i| {
                let mut e = ukevent::new(KEVENT_UNOTIFY, kevent_id::from_u64(i), 0, 0);
                e.set_cookie(i);
                e
            })
            .collect();
        assert_eq!(q.ctl(KEVENT_CTL_ADD, &mut adds), Ok(0), "ADD");
        Bench {
            q,
            path,
            marks: adds,
            buf: vec![ukevent::default(); KEVENTS],
            next: 0,
            calls: 0,
            sink: 0,
        }
    }

    /// One iteration with `batch` events; returns the ns spent taking them.
    fn iteration(&mut self, batch: usize) -> u64 {
        let start = self.next % (KEVENTS - batch + 1);
        self.next = start + batch;
        let marks = &mut self.marks[start..start + batch];
        let r = self.q.ctl(KEVENT_CTL_READY, marks);
        debug_assert_eq!(r, Ok(batch as u32));
        self.calls += 1;
        let t = os::now_ns();
        match self.path {
            Path::GetEvents => {
                let n = self
                    .q
                    .get_events(batch as u32, &mut self.buf[..batch], &FOREVER)
                    .expect("get_events");
                self.calls += 1;
                debug_assert_eq!(n as usize, batch);
                for e in &self.buf[..n as usize] {
                    self.sink = self.sink.wrapping_add(e.cookie());
                }
            }
            Path::Ring | Path::RingBatched => {
                let mut got = 0;
                let commits = self.q.commits;
                while got < batch {
                    self.q.wait(batch as u32, &FOREVER).expect("kevent_wait");
                    let mut sink = self.sink;
                    got += self
                        .q
                        .consume(|e| sink = sink.wrapping_add(e.cookie()))
                        .expect("kevent_commit") as usize;
                    self.sink = sink;
                    self.calls += 1;
                }
                self.calls += self.q.commits - commits;
            }
        }
        os::now_ns() - t
    }
}

/// One sample: events/s of the whole loop and consumer ns/event.
fn sample(b: &mut Bench, batch: usize, min_ns: u64) -> (f64, f64) {
    let (mut events, mut taking) = (0u64, 0u64);
    let t = os::now_ns();
    while os::now_ns() - t < min_ns {
        for _ in 0..16 {
            taking += b.iteration(batch);
            events += batch as u64;
        }
    }
    let total = os::now_ns() - t;
    (
        events as f64 * 1e9 / total as f64,
        taking as f64 / events as f64,
    )
}

/// The hidden `ring-syscalls BACKEND PATH BATCH ITERS` subcommand: runs the loop and exits,
/// for `strace -c` to count.
pub fn syscall_child(args: &[String]) -> std::io::Result<()> {
    let bad = || {
        std::io::Error::other(
            "usage: ring-syscalls fallback|native get_events|ring|ring_batched_commit BATCH ITERS",
        )
    };
    let [backend, path, batch, iters] = args else {
        return Err(bad());
    };
    let b = match backend.as_str() {
        "native" => Backend::native().map_err(std::io::Error::other)?,
        _ => Backend::fallback(),
    };
    let path = if path == "ring" {
        Path::Ring
    } else {
        Path::GetEvents
    };
    let batch: usize = batch.parse().map_err(|_| bad())?;
    let iters: usize = iters.parse().map_err(|_| bad())?;
    let mut bench = Bench::new(b, path);
    for _ in 0..iters {
        bench.iteration(batch);
    }
    Ok(())
}

/// Total syscalls `strace -f -c` counted for `ring-syscalls` with these arguments.
fn strace_calls(backend: &str, path: Path, batch: usize, iters: usize) -> Option<u64> {
    let exe = std::env::current_exe().ok()?;
    let out = std::env::temp_dir().join(format!("kevent-bench-strace-{}.txt", std::process::id()));
    let status = Command::new("strace")
        .arg("-f")
        .arg("-c")
        .arg("-o")
        .arg(&out)
        .arg(exe)
        .args(["ring-syscalls", backend, path.key()])
        .arg(batch.to_string())
        .arg(iters.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .ok()?;
    let text = std::fs::read_to_string(&out).ok();
    let _ = std::fs::remove_file(&out);
    if !status.success() {
        return None;
    }
    parse_strace_total(&text?)
}

/// The `calls` column of the `total` line of `strace -c` output.
fn parse_strace_total(text: &str) -> Option<u64> {
    let line = text
        .lines()
        .rev()
        .find(|l| l.trim_end().ends_with("total"))?;
    let nums: Vec<&str> = line.split_whitespace().collect();
    // "100.00  0.000123  4  29  1  total": % time, seconds, usecs/call, calls, [errors], total
    nums.get(3)?.parse().ok()
}

fn have_strace() -> bool {
    Command::new("strace")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Runs the ring benchmark.
pub fn run(opts: &Opts, machine: &Machine) -> Section {
    let batches = [1usize, 16, 256];
    let (reps, min_ns) = if opts.quick {
        (5, 50_000_000)
    } else {
        (15, 200_000_000)
    };
    let paths = [Path::GetEvents, Path::Ring, Path::RingBatched];
    // [backend][path][batch] -> samples
    let mut rate: Vec<Vec<Vec<Vec<f64>>>> =
        vec![vec![vec![vec![]; batches.len()]; paths.len()]; machine.backends.len()];
    let mut take = rate.clone();
    let mut calls = vec![vec![vec![0.0; batches.len()]; paths.len()]; machine.backends.len()];
    for (bi, &b) in machine.backends.iter().enumerate() {
        let mut benches: Vec<Bench> = paths.iter().map(|&p| Bench::new(b, p)).collect();
        for (xi, &batch) in batches.iter().enumerate() {
            for bench in &mut benches {
                sample(bench, batch, min_ns / 5); // warm-up
            }
            for rep in 0..reps {
                for k in 0..paths.len() {
                    let pi = (k + rep) % paths.len();
                    let (r, t) = sample(&mut benches[pi], batch, min_ns);
                    rate[bi][pi][xi].push(r);
                    take[bi][pi][xi].push(t);
                }
            }
            // ABI calls per event over a fixed run.
            for (pi, bench) in benches.iter_mut().enumerate() {
                let c0 = bench.calls;
                let iters = 4096 / batch + 16;
                for _ in 0..iters {
                    bench.iteration(batch);
                }
                calls[bi][pi][xi] = (bench.calls - c0) as f64 / (iters * batch) as f64;
            }
        }
        let sink: u64 = benches.iter().map(|b| b.sink).fold(0, u64::wrapping_add);
        eprintln!("ring: {} done (checksum {sink:x})", b.as_str());
    }
    // Kernel syscalls per event under strace.
    let strace = have_strace();
    let mut kernel = vec![vec![vec![None; batches.len()]; paths.len()]; machine.backends.len()];
    if strace {
        for (bi, b) in machine.backends.iter().enumerate() {
            for (pi, &p) in paths.iter().enumerate() {
                for (xi, &batch) in batches.iter().enumerate() {
                    let iters = 8192 / batch + 64;
                    let base = strace_calls(b.as_str(), p, batch, 0);
                    let full = strace_calls(b.as_str(), p, batch, iters);
                    if let (Some(base), Some(full)) = (base, full) {
                        kernel[bi][pi][xi] =
                            Some(full.saturating_sub(base) as f64 / (iters * batch) as f64);
                    }
                }
            }
        }
    }
    let mut md = format!(
        "UNOTIFY kevents marked ready with `kevent_ctl(READY)` in batches of B, then taken by \
         the consumer; one thread does both. events/s = the whole loop (mark + take), median \
         of {reps} samples of ≥{} ms (min–max); consumer ns/event = the taking side only. ABI \
         calls/event from a counter around every `kevent_*` call (READY included: 2 calls per \
         batch for get_events, 3 for the ring; the batched-commit ring commits once half of \
         its {KEVENTS} slots have been read). Kernel syscalls/event: {}.\n\n\
         | backend | path | B | events/s | consumer ns/event | ABI calls/event | kernel syscalls/event |\n\
         |---|---|---|---|---|---|---|\n",
        min_ns / 1_000_000,
        if strace {
            "`strace -f -c` over a child running a fixed number of iterations, minus the same \
             child running none"
        } else {
            "not measured (`strace` is not installed)"
        }
    );
    let mut json_rows = vec![];
    for (bi, b) in machine.backends.iter().enumerate() {
        for (xi, &batch) in batches.iter().enumerate() {
            for (pi, &p) in paths.iter().enumerate() {
                let r = Summary::of(&rate[bi][pi][xi]);
                let t = Summary::of(&take[bi][pi][xi]);
                let k = kernel[bi][pi][xi];
                let _ = writeln!(
                    md,
                    "| {} | {} | {batch} | {} | {} | {:.3} | {} |",
                    b.as_str(),
                    p.name(),
                    r.map_or("–".into(), |s| s.cell(0)),
                    t.map_or("–".into(), |s| s.cell(1)),
                    calls[bi][pi][xi],
                    k.map_or("–".into(), |k| format!("{k:.3}")),
                );
                json_rows.push(Json::obj([
                    ("backend", Json::from(b.as_str())),
                    ("path", Json::from(p.key())),
                    ("batch", Json::from(batch)),
                    ("events_per_s", r.map_or(Json::Null, |s| s.json())),
                    ("consumer_ns_per_event", t.map_or(Json::Null, |s| s.json())),
                    ("abi_calls_per_event", Json::from(calls[bi][pi][xi])),
                    ("kernel_syscalls_per_event", Json::from(k)),
                ]));
            }
        }
    }
    md.push('\n');
    Section {
        name: "ring",
        title: "Ring: get_events vs the ring".into(),
        markdown: md,
        json: Json::obj([
            ("reps", Json::from(reps)),
            ("sample_ms", Json::from(min_ns / 1_000_000)),
            ("strace", Json::from(strace)),
            ("rows", Json::Arr(json_rows)),
        ]),
        charts: vec![],
        summary: vec![],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_paths_take_every_event() {
        for p in [Path::GetEvents, Path::Ring, Path::RingBatched] {
            let mut b = Bench::new(Backend::fallback(), p);
            // Batch sizes change mid-way through the kevents (the `all` run's order).
            for batch in [1, 16, 256, 16, 1000, 1] {
                for _ in 0..100 {
                    b.iteration(batch);
                }
            }
            match p {
                Path::GetEvents => assert_eq!(b.calls, 600 * 2),
                Path::Ring => assert_eq!(b.calls, 600 * 3),
                // READY + wait per iteration, and a commit per 2048 events read.
                Path::RingBatched => {
                    let events: u64 = 100 * (1 + 16 + 256 + 16 + 1000 + 1);
                    assert_eq!(b.calls, 600 * 2 + b.q.commits);
                    // Each commit releases between 2048 and 2048 + 999 read entries.
                    let c = b.q.commits;
                    assert!(c >= events / 3048 && c <= events / 2048, "{c}");
                }
            }
        }
    }

    #[test]
    fn strace_totals_parse() {
        let text = "% time     seconds  usecs/call     calls    errors syscall\n\
                    ------ ----------- ----------- --------- --------- ----------------\n\
                     60.00    0.000060           1        40           epoll_wait\n\
                    ------ ----------- ----------- --------- --------- ----------------\n\
                    100.00    0.000100           1        70         2 total\n";
        assert_eq!(parse_strace_total(text), Some(70));
    }
}
