//! The HTTP benchmark (issue 6 item 2): the two servers of [`server`] (raw epoll and kevent,
//! one thread each) under ApacheBench (`ab`, new connection per request: the historic
//! `ab -n 80000 -c 8000`) and `wrk` (keep-alive, 100/1000/8000 connections).
//!
//! The server runs on a thread of this process pinned to the first CPU, the load generator
//! in a child process pinned to the last one (each process has its own fd limit, so 8000
//! client and 8000 server sockets fit under a limit of 20000). For every load, the
//! mechanisms run alternately (epoll first in even repetitions, kevent first in odd ones) so
//! that drift hits both; a cell is the median (min–max) of the load generator's requests/s.
//!
//! Two kevent servers run on each backend: one drives the queue through
//! [`kevent::backend::RawBackend`] (the ABI calls, with ADD and REMOVE batched per wait), one
//! through the safe API ([`kevent::Queue`], a `Registration` per connection).

pub mod server;

use std::fmt::Write as _;
use std::io;
use std::net::TcpListener;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::json::Json;
use crate::machine::Machine;
use crate::os;
use crate::stats::Summary;
use crate::svg::BarChart;
use crate::{Opts, Section};
use server::{Flavour, ServerStats};

/// A load generator setting.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Load {
    /// `ab -n requests -c conns` (HTTP/1.0, a new connection per request).
    Ab {
        /// Total requests.
        requests: usize,
        /// Concurrent connections.
        conns: usize,
    },
    /// `wrk -t1 -c conns -d secs` (HTTP/1.1 keep-alive).
    Wrk {
        /// Open connections.
        conns: usize,
        /// Duration in seconds.
        secs: u64,
    },
}

impl Load {
    fn tool(&self) -> &'static str {
        match self {
            Load::Ab { .. } => "ab",
            Load::Wrk { .. } => "wrk",
        }
    }

    fn label(&self) -> String {
        match self {
            Load::Ab { requests, conns } => format!("ab -n {requests} -c {conns}"),
            Load::Wrk { conns, secs } => format!("wrk -t1 -c {conns} -d {secs}s"),
        }
    }

    fn short(&self) -> String {
        match self {
            Load::Ab { conns, .. } => format!("ab c={conns}"),
            Load::Wrk { conns, .. } => format!("wrk c={conns}"),
        }
    }

    fn command(&self, port: u16) -> Command {
        let url = format!("http://127.0.0.1:{port}/");
        let mut c = Command::new(self.tool());
        match self {
            Load::Ab { requests, conns } => {
                c.args(["-q", "-r", "-s", "20", "-n"])
                    .arg(requests.to_string())
                    .arg("-c")
                    .arg(conns.to_string())
                    .arg(url);
            }
            Load::Wrk { conns, secs } => {
                c.args(["-t1", "--timeout", "10s", "-c"])
                    .arg(conns.to_string())
                    .arg("-d")
                    .arg(format!("{secs}s"))
                    .arg(url);
            }
        }
        c
    }
}

/// What one load-generator run reported.
#[derive(Clone, Debug, Default)]
struct RunResult {
    rps: f64,
    /// Failed requests (ab) or socket errors + non-2xx (wrk).
    errors: u64,
    server: ServerStats,
}

/// The first number after `key` in `text`.
fn number_after(text: &str, key: &str) -> Option<f64> {
    let rest = &text[text.find(key)? + key.len()..];
    let rest = rest.trim_start();
    let end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(rest.len());
    rest[..end].parse().ok()
}

/// Parses ab's or wrk's output: `(requests/s, errors)`.
fn parse_output(tool: &str, out: &str) -> Option<(f64, u64)> {
    match tool {
        "ab" => Some((
            number_after(out, "Requests per second:")?,
            number_after(out, "Failed requests:").unwrap_or(0.0) as u64,
        )),
        _ => {
            let rps = number_after(out, "Requests/sec:")?;
            let mut errors = number_after(out, "Non-2xx or 3xx responses:").unwrap_or(0.0);
            if let Some(line) = out.lines().find(|l| l.contains("Socket errors:")) {
                errors += line
                    .split(|c: char| !c.is_ascii_digit())
                    .filter_map(|w| w.parse::<f64>().ok())
                    .sum::<f64>();
            }
            Some((rps, errors as u64))
        }
    }
}

/// A listening TCP socket on 127.0.0.1 with the largest backlog the kernel allows.
fn listener() -> io::Result<TcpListener> {
    // SAFETY: socket takes no pointer.
    let fd: OwnedFd = os::owned(unsafe {
        libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0)
    })?;
    let one: libc::c_int = 1;
    let addr = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: 0,
        sin_addr: libc::in_addr {
            s_addr: u32::from_ne_bytes([127, 0, 0, 1]),
        },
        sin_zero: [0; 8],
    };
    // SAFETY: `one` and `addr` are locals that live across the calls, with their sizes.
    let ok = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_REUSEADDR,
            (&raw const one).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        ) == 0
            && libc::bind(
                fd.as_raw_fd(),
                (&raw const addr).cast(),
                size_of::<libc::sockaddr_in>() as libc::socklen_t,
            ) == 0
            && libc::listen(fd.as_raw_fd(), 65535) == 0
    };
    if !ok {
        return Err(io::Error::last_os_error());
    }
    Ok(TcpListener::from(fd))
}

/// One run: a fresh server of `flavour` on CPU `server_cpu`, the load generator on
/// `client_cpu`.
fn run_one(
    load: &Load,
    flavour: Flavour,
    server_cpu: Option<usize>,
    client_cpu: Option<usize>,
) -> Result<RunResult, String> {
    let l = listener().map_err(|e| format!("listen: {e}"))?;
    let port = l.local_addr().map_err(|e| e.to_string())?.port();
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = stop.clone();
    let server = std::thread::spawn(move || {
        if let Some(cpu) = server_cpu {
            let _ = os::pin_thread(cpu);
        }
        server::serve(flavour, &l, &stop2)
    });
    let mut cmd = load.command(port);
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    if let Some(cpu) = client_cpu {
        // SAFETY: the closure runs in the child between fork and exec and only makes the
        // sched_setaffinity syscall on a stack-local cpu_set_t, which is async-signal-safe.
        unsafe {
            cmd.pre_exec(move || {
                let mut set: libc::cpu_set_t = std::mem::zeroed();
                libc::CPU_SET(cpu, &mut set);
                libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set);
                Ok(())
            });
        }
    }
    let started = Instant::now();
    let child = cmd.spawn();
    let result = match child {
        Err(e) => Err(format!("{}: {e}", load.tool())),
        Ok(child) => {
            // A watchdog: the run is bounded in time whatever the tool does.
            let pid = child.id();
            let limit = Duration::from_secs(120);
            let done = Arc::new(AtomicBool::new(false));
            let done2 = done.clone();
            let watchdog = std::thread::spawn(move || {
                while !done2.load(Ordering::Relaxed) {
                    if started.elapsed() > limit {
                        // SAFETY: kill takes no pointer; `pid` is our own child, not yet
                        // reaped (wait_with_output below has not returned).
                        unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
            });
            let out = child.wait_with_output();
            done.store(true, Ordering::Relaxed);
            let _ = watchdog.join();
            match out {
                Err(e) => Err(format!("{}: {e}", load.tool())),
                Ok(o) => {
                    let text = String::from_utf8_lossy(&o.stdout);
                    match parse_output(load.tool(), &text) {
                        Some((rps, errors)) => Ok(RunResult {
                            rps,
                            errors,
                            server: ServerStats::default(),
                        }),
                        None => Err(format!(
                            "{} gave no result ({}): {}",
                            load.tool(),
                            o.status,
                            String::from_utf8_lossy(&o.stderr).trim()
                        )),
                    }
                }
            }
        }
    };
    stop.store(true, Ordering::Relaxed);
    let stats = server
        .join()
        .map_err(|_| "server thread panicked".to_owned())?;
    result.map(|r| RunResult { server: stats, ..r })
}

/// The `serve epoll|kevent|safe PORT SECONDS` subcommand: one server alone, for profiling.
pub fn serve_command(args: &[String]) -> io::Result<u8> {
    let usage = || {
        eprintln!("usage: kevent-bench serve epoll|kevent|safe PORT SECONDS");
        Ok(2)
    };
    let [kind, port, secs] = args else {
        return usage();
    };
    let flavour = match kind.as_str() {
        "epoll" => Flavour::Epoll,
        "kevent" | "safe" => match kevent::backend::RawBackend::current() {
            Ok(b) if kind == "safe" => Flavour::Safe(b),
            Ok(b) => Flavour::Kevent(b),
            Err(e) => {
                eprintln!("kevent-bench: {e}");
                return Ok(1);
            }
        },
        _ => return usage(),
    };
    let (Ok(port), Ok(secs)) = (port.parse::<u16>(), secs.parse::<u64>()) else {
        return usage();
    };
    os::raise_fd_limit();
    let l = TcpListener::bind(("127.0.0.1", port))?;
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = stop.clone();
    let server = std::thread::spawn(move || server::serve(flavour, &l, &stop2));
    std::thread::sleep(Duration::from_secs(secs));
    stop.store(true, Ordering::Relaxed);
    let st = server
        .join()
        .map_err(|_| io::Error::other("server thread panicked"))?;
    println!(
        "{}: {} responses, {} accepted, {} waits, {} ctl calls",
        flavour_name(flavour),
        st.requests,
        st.accepted,
        st.waits,
        st.ctls
    );
    Ok(0)
}

fn have(tool: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|p| {
        std::env::split_paths(&p)
            .any(|d| std::fs::metadata(d.join(tool)).is_ok_and(|m| m.is_file()))
    })
}

/// Runs the HTTP benchmark.
pub fn run(opts: &Opts, machine: &Machine) -> Section {
    let (loads, reps) = if opts.quick {
        (
            vec![
                Load::Ab {
                    requests: 20000,
                    conns: 1000,
                },
                Load::Wrk {
                    conns: 100,
                    secs: 2,
                },
                Load::Wrk {
                    conns: 1000,
                    secs: 2,
                },
                Load::Wrk {
                    conns: 8000,
                    secs: 2,
                },
            ],
            2,
        )
    } else {
        (
            vec![
                Load::Ab {
                    requests: 80000,
                    conns: 8000,
                },
                Load::Wrk {
                    conns: 100,
                    secs: 3,
                },
                Load::Wrk {
                    conns: 1000,
                    secs: 3,
                },
                Load::Wrk {
                    conns: 8000,
                    secs: 3,
                },
            ],
            5,
        )
    };
    let mut flavours = vec![Flavour::Epoll];
    for &b in &machine.backends {
        flavours.push(Flavour::Kevent(b));
        flavours.push(Flavour::Safe(b));
    }
    let cpus = os::allowed_cpus();
    let (server_cpu, client_cpu) = match cpus.as_slice() {
        [a, .., b] => (Some(*a), Some(*b)),
        _ => (None, None),
    };
    let mut md = format!(
        "Requests per second reported by the load generator (median of {reps} runs per \
         mechanism, min–max in parentheses), mechanisms alternated run by run; the ratio is \
         the median (min–max) of the {reps} ratios of back-to-back runs. Server: one \
         thread{}; response `200 OK`, 13-byte body; ab speaks HTTP/1.0 without keep-alive (a \
         connection per request, server closes), wrk HTTP/1.1 keep-alive. Servers: raw \
         `epoll`; `kevent raw`, the ABI calls through `RawBackend`, registering the sockets \
         accepted in one wait with one ADD and unregistering those closed with one REMOVE; \
         `kevent safe API`, `kevent::Queue` with one `Registration<TcpStream>` per \
         connection (`add_all` per wait; dropping a registration is one REMOVE). Listen \
         backlog 65535, capped by `net.core.somaxconn` = {}.\n\n",
        match (server_cpu, client_cpu) {
            (Some(s), Some(c)) =>
                format!(" pinned to CPU {s}, the load generator (a child process) to CPU {c}"),
            _ => ", not pinned (one CPU)".into(),
        },
        machine.somaxconn
    );
    let mut missing = vec![];
    for (tool, pkg) in [("ab", "apache2-utils"), ("wrk", "wrk")] {
        if !have(tool) {
            let msg = format!(
                "skipped: `{tool}` not found on PATH (install it: `apt-get install {pkg}`)"
            );
            eprintln!("http: {msg}");
            let _ = writeln!(md, "* {msg}");
            missing.push(tool);
        }
    }
    let loads: Vec<Load> = loads
        .into_iter()
        .filter(|l| !missing.contains(&l.tool()))
        .collect();
    // (load index, flavour index) -> runs
    let mut runs: Vec<Vec<Vec<RunResult>>> = vec![vec![vec![]; flavours.len()]; loads.len()];
    let mut failures = vec![];
    for (li, load) in loads.iter().enumerate() {
        for rep in 0..reps {
            for k in 0..flavours.len() {
                let fi = if rep % 2 == 0 {
                    k
                } else {
                    flavours.len() - 1 - k
                };
                match run_one(load, flavours[fi], server_cpu, client_cpu) {
                    Ok(r) => {
                        eprintln!(
                            "http: {} {} rep {rep}: {:.0} req/s",
                            load.label(),
                            flavour_name(flavours[fi]),
                            r.rps
                        );
                        runs[li][fi].push(r);
                    }
                    Err(e) => {
                        eprintln!("http: {} {}: {e}", load.label(), flavour_name(flavours[fi]));
                        failures.push(format!(
                            "{} {}: {e}",
                            load.label(),
                            flavour_name(flavours[fi])
                        ));
                    }
                }
                // Let the previous run's sockets finish closing.
                std::thread::sleep(Duration::from_millis(300));
            }
        }
    }
    report(md, &loads, &flavours, &runs, &failures, reps)
}

fn flavour_name(f: Flavour) -> String {
    match f {
        Flavour::Epoll => "epoll".into(),
        Flavour::Kevent(b) => format!("kevent raw ({})", b.kind().as_str()),
        Flavour::Safe(b) => format!("kevent safe API ({})", b.kind().as_str()),
    }
}

fn flavour_key(f: Flavour) -> String {
    match f {
        Flavour::Epoll => "epoll".into(),
        Flavour::Kevent(b) => format!("kevent_raw_{}", b.kind().as_str()),
        Flavour::Safe(b) => format!("kevent_safe_api_{}", b.kind().as_str()),
    }
}

fn report(
    mut md: String,
    loads: &[Load],
    flavours: &[Flavour],
    runs: &[Vec<Vec<RunResult>>],
    failures: &[String],
    reps: usize,
) -> Section {
    let summary =
        |li: usize, fi: usize| Summary::of(&runs[li][fi].iter().map(|r| r.rps).collect::<Vec<_>>());
    let mut header = "| load |".to_owned();
    let mut rule = "|---|".to_owned();
    for &f in flavours {
        let _ = write!(header, " {} req/s |", flavour_name(f));
        rule.push_str("---|");
    }
    for &f in &flavours[1..] {
        let _ = write!(header, " {} ÷ epoll |", flavour_name(f));
        rule.push_str("---|");
    }
    let _ = writeln!(md, "{header}\n{rule}");
    let mut json_loads = vec![];
    for (li, load) in loads.iter().enumerate() {
        let mut row = format!("| `{}` |", load.label());
        for fi in 0..flavours.len() {
            let cell = summary(li, fi).map_or("–".into(), |s| s.cell(0));
            let _ = write!(row, " {cell} |");
        }
        for fi in 1..flavours.len() {
            let cell = match (summary(li, fi), summary(li, 0)) {
                (Some(_), Some(_)) => {
                    // Paired ratios: run i of kevent against run i of epoll, made back to
                    // back, so that drift cancels; their median is the headline.
                    let pairs: Vec<f64> = runs[li][fi]
                        .iter()
                        .zip(&runs[li][0])
                        .map(|(k, e)| k.rps / e.rps)
                        .collect();
                    Summary::of(&pairs).map_or("–".into(), |p| {
                        format!("**{:.2}** ({:.2}–{:.2})", p.median, p.min, p.max)
                    })
                }
                _ => "–".into(),
            };
            let _ = write!(row, " {cell} |");
        }
        let _ = writeln!(md, "{row}");
        json_loads.push(Json::obj([
            ("load", Json::from(load.label())),
            ("tool", Json::from(load.tool())),
            (
                "paired_ratios_over_epoll",
                Json::obj((1..flavours.len()).map(|fi| {
                    let pairs: Vec<f64> = runs[li][fi]
                        .iter()
                        .zip(&runs[li][0])
                        .map(|(k, e)| k.rps / e.rps)
                        .collect();
                    (
                        flavour_key(flavours[fi]),
                        Summary::of(&pairs).map_or(Json::Null, |p| p.json()),
                    )
                })),
            ),
            (
                "results",
                Json::obj(flavours.iter().enumerate().map(|(fi, &f)| {
                    (
                        flavour_key(f),
                        Json::obj([
                            ("rps", summary(li, fi).map_or(Json::Null, |s| s.json())),
                            (
                                "runs",
                                Json::arr(runs[li][fi].iter().map(|r| {
                                    Json::obj([
                                        ("rps", Json::from(r.rps)),
                                        ("errors", Json::from(r.errors)),
                                        ("server_requests", Json::from(r.server.requests)),
                                        ("server_accepted", Json::from(r.server.accepted)),
                                        ("server_waits", Json::from(r.server.waits)),
                                        ("server_ctl_calls", Json::from(r.server.ctls)),
                                    ])
                                })),
                            ),
                        ]),
                    )
                })),
            ),
        ]));
    }
    md.push('\n');
    // Where the syscalls go: waits and control calls per 1000 requests, and errors.
    let _ = writeln!(
        md,
        "Server-side counts, summed over the runs: waits and control calls (`epoll_ctl` / \
         `kevent_ctl`) per 1000 responses, and errors the load generator reported.\n"
    );
    let _ = writeln!(
        md,
        "| load | mechanism | responses | waits/1000 | ctl calls/1000 | errors |"
    );
    let _ = writeln!(md, "|---|---|---|---|---|---|");
    for (li, load) in loads.iter().enumerate() {
        for (fi, &f) in flavours.iter().enumerate() {
            let rs = &runs[li][fi];
            let req: u64 = rs.iter().map(|r| r.server.requests).sum();
            let waits: u64 = rs.iter().map(|r| r.server.waits).sum();
            let ctls: u64 = rs.iter().map(|r| r.server.ctls).sum();
            let errs: u64 = rs.iter().map(|r| r.errors).sum();
            let per = |x: u64| {
                if req == 0 {
                    "–".into()
                } else {
                    format!("{:.1}", x as f64 * 1000.0 / req as f64)
                }
            };
            let _ = writeln!(
                md,
                "| `{}` | {} | {req} | {} | {} | {errs} |",
                load.short(),
                flavour_name(f),
                per(waits),
                per(ctls)
            );
        }
    }
    for f in failures {
        let _ = writeln!(md, "\n* failed run: {f}");
    }
    md.push('\n');
    let chart = BarChart {
        title: "HTTP: requests/s (median, whiskers min–max)".into(),
        y_label: "requests per second".into(),
        groups: loads.iter().map(Load::short).collect(),
        series: flavours
            .iter()
            .enumerate()
            .map(|(fi, &f)| {
                (
                    flavour_name(f),
                    (0..loads.len())
                        .map(|li| summary(li, fi).map(|s| (s.median, s.min, s.max)))
                        .collect(),
                )
            })
            .collect(),
    };
    let charts = if loads.is_empty() {
        vec![]
    } else {
        vec![("http.svg".to_owned(), chart.render())]
    };
    Section {
        name: "http",
        title: "HTTP: single-threaded servers under ab and wrk".into(),
        markdown: md,
        json: Json::obj([
            ("reps", Json::from(reps)),
            ("loads", Json::Arr(json_loads)),
            (
                "failures",
                Json::arr(failures.iter().map(|f| Json::from(f.as_str()))),
            ),
        ]),
        charts,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_ab_and_wrk() {
        let ab = "Complete requests:      80000\nFailed requests:        3\n\
                  Requests per second:    12345.67 [#/sec] (mean)\n";
        assert_eq!(parse_output("ab", ab), Some((12345.67, 3)));
        let wrk = "  100 requests in 2.00s, 1 MB read\n  Socket errors: connect 1, read 2, \
                   write 0, timeout 4\n  Non-2xx or 3xx responses: 5\nRequests/sec:  54321.00\n";
        assert_eq!(parse_output("wrk", wrk), Some((54321.0, 12)));
        assert_eq!(parse_output("wrk", "nothing"), None);
        assert!(have("sh"));
        assert!(!have("kevent-bench-no-such-tool"));
    }

    #[test]
    fn listener_has_a_port() {
        let l = listener().unwrap();
        assert_ne!(l.local_addr().unwrap().port(), 0);
    }

    #[test]
    fn a_small_ab_run_against_both_servers() {
        use kevent::backend::RawBackend;
        let load = Load::Ab {
            requests: 200,
            conns: 10,
        };
        for f in [Flavour::Epoll, Flavour::Kevent(RawBackend::fallback())] {
            let r = run_one(&load, f, None, None);
            if have("ab") {
                let r = r.unwrap();
                assert!(r.rps > 0.0);
                assert_eq!((r.server.requests, r.errors), (200, 0));
            } else {
                assert!(r.unwrap_err().starts_with("ab: "));
            }
        }
    }
}
