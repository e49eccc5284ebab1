//! The HTTP benchmark (issue 6 item 2, issue 14 items 1–3): single-threaded HTTP/1.1
//! servers on raw epoll and on kevent (the raw ABI, and the safe API), with nginx beside them
//! when it is installed, under the load generator built into `kevent-bench` ([`loadgen`]:
//! keep-alive at 100, 1000 and 8000 connections, and a connection per request at 8000, the
//! historic `ab -c 8000` shape) and, when they are installed, under `wrk` and `ab` too.
//!
//! The in-process servers run on a thread of this process pinned to the first CPU, nginx
//! (master and its one worker) on that CPU too; the load generator is a child process pinned
//! to the last CPU (each process has its own fd limit, so 8000 client and 8000 server
//! sockets fit under a limit of 20000).
//!
//! # Method (issue 14 item 3)
//!
//! On a shared two-CPU machine one run of a server can differ from the next by ±40%, so a
//! single pair of runs says nothing about a 5% difference. Each load is measured in rounds:
//! in every round each server runs once, for a short window, in an order rotated from round
//! to round; the ratio of a server to epoll is taken *within* a round (runs a few seconds
//! apart share the machine's state), and the report gives the median of those ratios with a
//! 95% bootstrap interval ([`crate::stats::Interval`]). When the interval contains 1.0 the
//! report says so: no measurable difference.

pub mod loadgen;
pub mod nginx;
pub mod server;

use std::fmt::Write as _;
use std::io;
use std::net::TcpListener;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::json::Json;
use crate::machine::Machine;
use crate::os;
use crate::stats::{Interval, RATIO_LEGEND};
use crate::svg::BarChart;
use crate::{Opts, Section, SummaryRow};
use loadgen::{Counts, Mode};
use server::{Flavour, ServerStats};

/// A load generator setting.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Load {
    /// The built-in generator ([`loadgen`]): `conns` connections for a window of `window_ms`
    /// after a warm-up.
    Builtin {
        /// Concurrent connections.
        conns: usize,
        /// Keep-alive or a connection per request.
        mode: Mode,
        /// The measured window.
        window_ms: u64,
    },
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
    /// The program that generates the load.
    pub fn tool(&self) -> &'static str {
        match self {
            Load::Builtin { .. } => "kevent-bench",
            Load::Ab { .. } => "ab",
            Load::Wrk { .. } => "wrk",
        }
    }

    /// The load as a command line.
    pub fn label(&self) -> String {
        match self {
            Load::Builtin {
                conns,
                mode,
                window_ms,
            } => format!(
                "loadgen -c {conns} {} {}s",
                mode.name(),
                *window_ms as f64 / 1000.0
            ),
            Load::Ab { requests, conns } => format!("ab -n {requests} -c {conns}"),
            Load::Wrk { conns, secs } => format!("wrk -t1 -c {conns} -d {secs}s"),
        }
    }

    /// A short name for tables and charts.
    pub fn short(&self) -> String {
        match self {
            Load::Builtin { conns, mode, .. } => format!("c={conns} {}", mode.name()),
            Load::Ab { conns, .. } => format!("ab c={conns}"),
            Load::Wrk { conns, .. } => format!("wrk c={conns}"),
        }
    }

    fn key(&self) -> String {
        match self {
            Load::Builtin { conns, mode, .. } => format!("builtin_{}_{conns}", mode.name()),
            Load::Ab { conns, .. } => format!("ab_{conns}"),
            Load::Wrk { conns, .. } => format!("wrk_{conns}"),
        }
    }

    /// Least warm-up of the built-in generator (the window also waits for the ramp-up).
    fn warmup_ms(_conns: usize) -> u64 {
        100
    }

    fn command(&self, port: u16) -> io::Result<Command> {
        let url = format!("http://127.0.0.1:{port}/");
        let mut c;
        match self {
            Load::Builtin {
                conns,
                mode,
                window_ms,
            } => {
                c = Command::new(std::env::current_exe()?);
                c.arg("loadgen")
                    .arg(port.to_string())
                    .arg(conns.to_string())
                    .arg(mode.name())
                    .arg(Load::warmup_ms(*conns).to_string())
                    .arg(window_ms.to_string());
            }
            Load::Ab { requests, conns } => {
                c = Command::new("ab");
                c.args(["-q", "-r", "-s", "20", "-n"])
                    .arg(requests.to_string())
                    .arg("-c")
                    .arg(conns.to_string())
                    .arg(url);
            }
            Load::Wrk { conns, secs } => {
                c = Command::new("wrk");
                c.args(["-t1", "--timeout", "10s", "-c"])
                    .arg(conns.to_string())
                    .arg("-d")
                    .arg(format!("{secs}s"))
                    .arg(url);
            }
        }
        Ok(c)
    }
}

/// A server under test.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Server {
    /// One of this crate's servers, on a thread of this process.
    InProcess(Flavour),
    /// An outside server started for the benchmark (nginx, lighttpd): on its own epoll, or
    /// (`shim`) unmodified on kevent under `libkevent-epoll.so`.
    External {
        /// Which server.
        kind: nginx::Kind,
        /// Under `LD_PRELOAD=libkevent-epoll.so`.
        shim: bool,
    },
}

impl Server {
    fn name(self) -> String {
        match self {
            Server::InProcess(f) => flavour_name(f),
            Server::External { kind, shim: false } => kind.name().into(),
            Server::External { kind, shim: true } => format!("{} on kevent (shim)", kind.name()),
        }
    }

    fn key(self) -> String {
        match self {
            Server::InProcess(f) => flavour_key(f),
            Server::External { kind, shim: false } => kind.name().into(),
            Server::External { kind, shim: true } => format!("{}_kevent_shim", kind.name()),
        }
    }
}

/// What one load-generator run reported.
#[derive(Clone, Debug, Default)]
struct RunResult {
    rps: f64,
    /// Errors (built-in generator: every kind; ab: failed requests; wrk: socket errors and
    /// non-2xx responses).
    errors: u64,
    /// Responses other than 200 (built-in generator only).
    non_200: u64,
    /// What the server counted (in-process servers only).
    server: Option<ServerStats>,
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

/// Parses a load generator's output: `(requests/s, errors, non-200 responses)`.
fn parse_output(tool: &str, out: &str) -> Option<(f64, u64, u64)> {
    match tool {
        "kevent-bench" => {
            let c = Counts::parse_line(out)?;
            Some((c.rps(), c.errors(), c.non_200))
        }
        "ab" => Some((
            number_after(out, "Requests per second:")?,
            number_after(out, "Failed requests:").unwrap_or(0.0) as u64,
            0,
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
            Some((rps, errors as u64, 0))
        }
    }
}

/// A listening TCP socket on 127.0.0.1:`port` (0: any free port) with the largest backlog
/// the kernel allows (std's `TcpListener::bind` asks for 128).
fn listener_on(port: u16) -> io::Result<TcpListener> {
    // SAFETY: socket takes no pointer.
    let fd: OwnedFd = os::owned(unsafe {
        libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0)
    })?;
    let one: libc::c_int = 1;
    let addr = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: port.to_be(),
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

/// [`listener_on`] any free port.
fn listener() -> io::Result<TcpListener> {
    listener_on(0)
}

/// Runs `load` against 127.0.0.1:`port` in a child pinned to `client_cpu`, bounded in time.
fn drive(load: &Load, port: u16, client_cpu: Option<usize>) -> Result<RunResult, String> {
    let mut cmd = load
        .command(port)
        .map_err(|e| format!("{}: {e}", load.tool()))?;
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    nginx::pin_child(&mut cmd, client_cpu);
    let started = Instant::now();
    let child = cmd.spawn().map_err(|e| format!("{}: {e}", load.tool()))?;
    // A watchdog: the run is bounded in time whatever the tool does.
    let pid = child.id();
    let limit = Duration::from_secs(120);
    let done = Arc::new(AtomicBool::new(false));
    let done2 = done.clone();
    let watchdog = std::thread::spawn(move || {
        while !done2.load(Ordering::Relaxed) {
            if started.elapsed() > limit {
                // SAFETY: kill takes no pointer; `pid` is our own child, not yet reaped
                // (wait_with_output below has not returned).
                unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    });
    let out = child.wait_with_output();
    done.store(true, Ordering::Relaxed);
    let _ = watchdog.join();
    let o = out.map_err(|e| format!("{}: {e}", load.tool()))?;
    let text = String::from_utf8_lossy(&o.stdout);
    match parse_output(load.tool(), &text) {
        Some((rps, errors, non_200)) => Ok(RunResult {
            rps,
            errors,
            non_200,
            server: None,
        }),
        None => Err(format!(
            "{} gave no result ({}): {}",
            load.tool(),
            o.status,
            String::from_utf8_lossy(&o.stderr).trim()
        )),
    }
}

/// One run: a fresh in-process server of `flavour` on CPU `server_cpu` (or a running
/// outside server, at its port in `ports`), the load generator on `client_cpu`.
fn run_one(
    load: &Load,
    server: Server,
    server_cpu: Option<usize>,
    client_cpu: Option<usize>,
    ports: &[(Server, u16)],
) -> Result<RunResult, String> {
    let flavour = match server {
        Server::External { .. } => {
            let port = ports
                .iter()
                .find(|(s, _)| *s == server)
                .map(|(_, p)| *p)
                .ok_or_else(|| format!("{} is not running", server.name()))?;
            return drive(load, port, client_cpu);
        }
        Server::InProcess(f) => f,
    };
    let l = listener().map_err(|e| format!("listen: {e}"))?;
    let port = l.local_addr().map_err(|e| e.to_string())?.port();
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = stop.clone();
    let thread = std::thread::spawn(move || {
        if let Some(cpu) = server_cpu {
            let _ = os::pin_thread(cpu);
        }
        server::serve(flavour, &l, &stop2)
    });
    let result = drive(load, port, client_cpu);
    stop.store(true, Ordering::Relaxed);
    let stats = thread
        .join()
        .map_err(|_| "server thread panicked".to_owned())?;
    result.map(|r| RunResult {
        server: Some(stats),
        ..r
    })
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
        "kevent" | "safe" => match kevent_backend::Backend::current() {
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
    let l = listener_on(port)?;
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

/// The loads and rounds of a run: `(built-in loads, tool loads, built-in rounds, tool
/// rounds)`.
fn plan(quick: bool) -> (Vec<Load>, Vec<Load>, usize, usize) {
    let window_ms = if quick { 500 } else { 3000 };
    let mut builtin: Vec<Load> = [100, 1000, 8000]
        .into_iter()
        .map(|conns| Load::Builtin {
            conns,
            mode: Mode::KeepAlive,
            window_ms,
        })
        .collect();
    builtin.push(Load::Builtin {
        conns: 8000,
        mode: Mode::Close,
        window_ms,
    });
    if quick {
        // Quick: one ab and one wrk setting, one round: a cross-check of the built-in
        // generator within the main job's two minutes, not a second benchmark.
        let tools = vec![
            Load::Ab {
                requests: 5000,
                conns: 1000,
            },
            Load::Wrk {
                conns: 1000,
                secs: 1,
            },
        ];
        (builtin, tools, 3, 1)
    } else {
        let tools = vec![
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
        ];
        (builtin, tools, 10, 5)
    }
}

/// Runs the HTTP benchmark.
pub fn run(opts: &Opts, machine: &Machine) -> Section {
    let (builtin, tool_loads, rounds, tool_rounds) = plan(opts.quick);
    let mut servers = vec![Server::InProcess(Flavour::Epoll)];
    for &b in &machine.backends {
        servers.push(Server::InProcess(Flavour::Kevent(b)));
        servers.push(Server::InProcess(Flavour::Safe(b)));
    }
    let cpus = os::allowed_cpus();
    let (server_cpu, client_cpu) = match cpus.as_slice() {
        [a, .., b] => (Some(*a), Some(*b)),
        _ => (None, None),
    };
    let mut notes = vec![];
    // nginx and lighttpd, once for the whole benchmark; each also under libkevent-epoll.so.
    let mut nginx_info = None;
    let shim = nginx::find_shim();
    let mut externals: Vec<(Server, nginx::Nginx)> = vec![];
    for kind in [nginx::Kind::Nginx, nginx::Kind::Lighttpd] {
        let Some(bin) = nginx::find_kind(kind) else {
            let pkg = match kind {
                nginx::Kind::Nginx => "nginx-light",
                nginx::Kind::Lighttpd => "lighttpd",
            };
            notes.push(format!(
                "{}: not installed, no outside anchor (install it: `apt-get install {pkg}`)",
                kind.name()
            ));
            continue;
        };
        let mut variants = vec![None];
        match &shim {
            Some(so) => variants.push(Some(so.as_path())),
            None => notes.push(format!(
                "{} on kevent: libkevent-epoll.so not found (`cargo build --release -p \
                 kevent-epoll-preload`, or set KEVENT_EPOLL_SO)",
                kind.name()
            )),
        }
        for so in variants {
            let s = Server::External {
                kind,
                shim: so.is_some(),
            };
            match nginx::Nginx::start_kind(kind, &bin, server_cpu, so) {
                Ok(n) => {
                    servers.push(s);
                    if kind == nginx::Kind::Nginx && so.is_none() {
                        nginx_info = Some((bin.clone(), n.version.clone()));
                    }
                    if so.is_none() {
                        notes.push(format!(
                            "`{}`: {} (`{}`){}",
                            kind.name(),
                            n.version,
                            bin.display(),
                            match kind {
                                nginx::Kind::Nginx => "",
                                nginx::Kind::Lighttpd =>
                                    ", one process pinned like the servers, the body as a \
                                     static `index.html`, keep-alive without a request limit",
                            }
                        ));
                    }
                    externals.push((s, n));
                }
                Err(e) => notes.push(format!("{}: {e}", s.name())),
            }
        }
    }
    if let Some(so) = &shim {
        notes.push(format!(
            "`… on kevent (shim)`: the same server binary and configuration under \
             `LD_PRELOAD={}` (its epoll instances are kevent queues on the {} backend); its \
             ratio is to the same server on epoll in the same round",
            so.display(),
            kevent_backend::Backend::current()
                .map_or("unavailable".into(), |b| b.as_str().to_owned())
        ));
    }
    for n in &notes {
        eprintln!("http: {n}");
    }
    let mut loads = builtin;
    for (tool, pkg) in [("ab", "apache2-utils"), ("wrk", "wrk")] {
        if have(tool) {
            loads.extend(tool_loads.iter().filter(|l| l.tool() == tool).cloned());
        } else {
            let msg = format!(
                "`{tool}` rows skipped: not found on PATH (install it: `apt-get install {pkg}`); \
                 the built-in generator's rows do not need it"
            );
            eprintln!("http: {msg}");
            notes.push(msg);
        }
    }
    let ports: Vec<(Server, u16)> = externals.iter().map(|(s, n)| (*s, n.port)).collect();
    // runs[load][server][round]
    let mut runs: Vec<Vec<Vec<Option<RunResult>>>> = vec![vec![vec![]; servers.len()]; loads.len()];
    let mut failures = vec![];
    for (li, load) in loads.iter().enumerate() {
        let r = if load.tool() == "kevent-bench" {
            rounds
        } else {
            tool_rounds
        };
        for round in 0..r {
            for k in 0..servers.len() {
                let si = (k + round) % servers.len();
                let s = servers[si];
                let res = run_one(load, s, server_cpu, client_cpu, &ports);
                match &res {
                    Ok(r) => eprintln!(
                        "http: {} {} round {round}: {:.0} req/s",
                        load.label(),
                        s.name(),
                        r.rps
                    ),
                    Err(e) => {
                        eprintln!("http: {} {}: {e}", load.label(), s.name());
                        failures.push(format!("{} {}: {e}", load.label(), s.name()));
                    }
                }
                runs[li][si].push(res.ok());
                // Let the previous run's sockets finish closing.
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
    let mut nginx_errors = String::new();
    for (s, n) in &mut externals {
        // lighttpd logs its start and stop to the error log too: not errors.
        let e: String = n
            .errors()
            .lines()
            .filter(|l| !l.contains("server started") && !l.contains("server stopped"))
            .collect::<Vec<_>>()
            .join("\n");
        if !e.trim().is_empty() {
            let _ = write!(nginx_errors, "{}: {} ", s.name(), e.trim());
        }
        n.stop();
    }
    let ctx = ReportCtx {
        servers: &servers,
        loads: &loads,
        runs: &runs,
        server_cpu,
        client_cpu,
        somaxconn: &machine.somaxconn,
        nginx: nginx_info,
        nginx_errors,
    };
    report(&ctx, &notes, &failures, rounds, tool_rounds)
}

fn flavour_name(f: Flavour) -> String {
    match f {
        Flavour::Epoll => "epoll".into(),
        Flavour::Kevent(b) => format!("kevent raw ({})", b.as_str()),
        Flavour::Safe(b) => format!("kevent safe API ({})", b.as_str()),
    }
}

fn flavour_key(f: Flavour) -> String {
    match f {
        Flavour::Epoll => "epoll".into(),
        Flavour::Kevent(b) => format!("kevent_raw_{}", b.as_str()),
        Flavour::Safe(b) => format!("kevent_safe_api_{}", b.as_str()),
    }
}

/// What the report is made from.
struct ReportCtx<'a> {
    servers: &'a [Server],
    loads: &'a [Load],
    runs: &'a [Vec<Vec<Option<RunResult>>>],
    server_cpu: Option<usize>,
    client_cpu: Option<usize>,
    somaxconn: &'a str,
    nginx: Option<(PathBuf, String)>,
    nginx_errors: String,
}

impl ReportCtx<'_> {
    fn rps(&self, li: usize, si: usize) -> Vec<f64> {
        self.runs[li][si].iter().flatten().map(|r| r.rps).collect()
    }

    /// What server `si` is compared with: the same outside server on epoll for one under
    /// the shim, the epoll server (server 0) for every other.
    fn base(&self, si: usize) -> usize {
        match self.servers[si] {
            Server::External { kind, shim: true } => self
                .servers
                .iter()
                .position(|&s| s == Server::External { kind, shim: false })
                .unwrap_or(0),
            _ => 0,
        }
    }

    /// Ratios of server `si` to its base ([`ReportCtx::base`]), run by run within each round.
    fn ratios(&self, li: usize, si: usize) -> Vec<f64> {
        self.runs[li][si]
            .iter()
            .zip(&self.runs[li][self.base(si)])
            .filter_map(|(a, e)| match (a, e) {
                (Some(a), Some(e)) if e.rps > 0.0 => Some(a.rps / e.rps),
                _ => None,
            })
            .collect()
    }

    /// One Markdown table of req/s and ratios for the loads `which`.
    fn table(&self, md: &mut String, which: &[usize]) {
        let mut header = "| load |".to_owned();
        let mut rule = "|---|".to_owned();
        for s in self.servers {
            let _ = write!(header, " {} req/s |", s.name());
            rule.push_str("---|");
        }
        for si in 1..self.servers.len() {
            let base = short_server(self.servers[self.base(si)]);
            let _ = write!(header, " {} ÷ {base} |", self.servers[si].name());
            rule.push_str("---|");
        }
        let _ = writeln!(md, "{header}\n{rule}");
        for &li in which {
            let mut row = format!("| `{}` |", self.loads[li].label());
            for si in 0..self.servers.len() {
                let cell = Interval::of(&self.rps(li, si)).map_or("–".into(), |i| i.cell(0));
                let _ = write!(row, " {cell} |");
            }
            for si in 1..self.servers.len() {
                let cell =
                    Interval::of(&self.ratios(li, si)).map_or("–".into(), |i| i.ratio_cell());
                let _ = write!(row, " {cell} |");
            }
            let _ = writeln!(md, "{row}");
        }
        md.push('\n');
    }
}

fn report(
    ctx: &ReportCtx<'_>,
    notes: &[String],
    failures: &[String],
    rounds: usize,
    tool_rounds: usize,
) -> Section {
    let (servers, loads) = (ctx.servers, ctx.loads);
    let mut md = format!(
        "Requests per second: the median over rounds with its 95% bootstrap interval in \
         brackets. In every round each server runs once, in an order rotated from round to \
         round ({rounds} rounds for the built-in generator, {tool_rounds} for ab and wrk); a \
         ratio is taken between the two runs of the same round. {RATIO_LEGEND} Server: one \
         thread{}; response `200 OK`, 13-byte body. Built-in generator (`kevent-bench \
         loadgen`): a closed loop of N connections on epoll, keep-alive (HTTP/1.1) or a \
         connection per request (HTTP/1.0, server closes), counting only complete `200` \
         responses inside the window after a warm-up; ab speaks HTTP/1.0 without keep-alive, \
         wrk HTTP/1.1 keep-alive. Servers: raw `epoll`; `kevent raw`, the ABI calls through \
         `kevent_backend::Backend`, registering the sockets accepted in one wait with one ADD and \
         unregistering those closed with one REMOVE; `kevent safe API`, `kevent::Queue` with \
         one `Registration<TcpStream>` per connection (`add_all` per wait; dropping a \
         registration is one REMOVE){}. Listen backlog 65535, capped by \
         `net.core.somaxconn` = {}.\n\n",
        match (ctx.server_cpu, ctx.client_cpu) {
            (Some(s), Some(c)) =>
                format!(" pinned to CPU {s}, the load generator (a child process) to CPU {c}"),
            _ => ", not pinned (one CPU)".into(),
        },
        match &ctx.nginx {
            Some((bin, v)) => format!(
                "; `nginx`: {v} (`{}`), master and one worker pinned like the servers, \
                 `return 200`, keep-alive, `keepalive_requests` 10^9, no access log",
                bin.display()
            ),
            None => String::new(),
        },
        ctx.somaxconn
    );
    for n in notes {
        let _ = writeln!(md, "* {n}");
    }
    if !notes.is_empty() {
        md.push('\n');
    }
    let builtin: Vec<usize> = (0..loads.len())
        .filter(|&li| loads[li].tool() == "kevent-bench")
        .collect();
    let tools: Vec<usize> = (0..loads.len())
        .filter(|&li| loads[li].tool() != "kevent-bench")
        .collect();
    let _ = writeln!(md, "#### Built-in load generator\n");
    ctx.table(&mut md, &builtin);
    if !tools.is_empty() {
        let _ = writeln!(md, "#### ab and wrk\n");
        ctx.table(&mut md, &tools);
    }
    // Where the syscalls go: waits and control calls per 1000 requests, and errors.
    let _ = writeln!(
        md,
        "Server-side counts, summed over the runs: waits and control calls (`epoll_ctl` / \
         `kevent_ctl`) per 1000 responses (in-process servers only), and what the load \
         generator counted as errors and as responses other than 200.\n"
    );
    let _ = writeln!(
        md,
        "| load | server | responses | waits/1000 | ctl calls/1000 | errors | non-200 |"
    );
    let _ = writeln!(md, "|---|---|---|---|---|---|---|");
    for (li, load) in loads.iter().enumerate() {
        for (si, s) in servers.iter().enumerate() {
            let rs: Vec<&RunResult> = ctx.runs[li][si].iter().flatten().collect();
            let st: Vec<ServerStats> = rs.iter().filter_map(|r| r.server).collect();
            let req: u64 = st.iter().map(|s| s.requests).sum();
            let waits: u64 = st.iter().map(|s| s.waits).sum();
            let ctls: u64 = st.iter().map(|s| s.ctls).sum();
            let errs: u64 = rs.iter().map(|r| r.errors).sum();
            let non200: u64 = rs.iter().map(|r| r.non_200).sum();
            let per = |x: u64| {
                if req == 0 {
                    "–".into()
                } else {
                    format!("{:.1}", x as f64 * 1000.0 / req as f64)
                }
            };
            let responses = if st.is_empty() {
                "–".to_owned()
            } else {
                req.to_string()
            };
            let _ = writeln!(
                md,
                "| `{}` | {} | {responses} | {} | {} | {errs} | {non200} |",
                load.short(),
                s.name(),
                per(waits),
                per(ctls)
            );
        }
    }
    for f in failures {
        let _ = writeln!(md, "\n* failed run: {f}");
    }
    if !ctx.nginx_errors.trim().is_empty() {
        let _ = writeln!(
            md,
            "\n* outside servers' error logs: `{}`",
            ctx.nginx_errors.trim().replace('\n', " / ")
        );
    }
    md.push('\n');
    // Charts: req/s by concurrency per server with the intervals as error bars.
    let chart = |which: &[usize], title: &str| BarChart {
        title: title.into(),
        y_label: "requests per second".into(),
        groups: which.iter().map(|&li| loads[li].short()).collect(),
        series: servers
            .iter()
            .enumerate()
            .map(|(si, s)| {
                (
                    s.name(),
                    which
                        .iter()
                        .map(|&li| Interval::of(&ctx.rps(li, si)).map(|i| (i.median, i.lo, i.hi)))
                        .collect(),
                )
            })
            .collect(),
    };
    let mut charts = vec![];
    if !builtin.is_empty() {
        charts.push((
            "http.svg".to_owned(),
            chart(
                &builtin,
                "HTTP: requests/s by concurrency (median; bars: 95% bootstrap interval)",
            )
            .render(),
        ));
    }
    if !tools.is_empty() {
        charts.push((
            "http-tools.svg".to_owned(),
            chart(
                &tools,
                "HTTP under ab and wrk: requests/s (median; 95% interval)",
            )
            .render(),
        ));
    }
    // Every ratio to epoll under the built-in generator, as intervals around 1.0.
    let mut forest = vec![];
    for &li in &builtin {
        for (si, &s) in servers.iter().enumerate().skip(1) {
            if let Some(i) = Interval::of(&ctx.ratios(li, si)) {
                forest.push((
                    format!("{}: {}", loads[li].short(), short_server(s)),
                    si,
                    (i.median, i.lo, i.hi),
                ));
            }
        }
    }
    if !forest.is_empty() {
        charts.push((
            "http-ratios.svg".to_owned(),
            crate::svg::ForestChart {
                title: "HTTP: req/s ÷ epoll, median with 95% bootstrap interval".into(),
                x_label: "ratio to the epoll server in the same round (1.0: no difference)".into(),
                rows: forest,
            }
            .render(),
        ));
    }
    // The summary: every ratio to epoll under the built-in generator.
    let mut summary = vec![];
    for &li in &builtin {
        let parts: Vec<String> = (1..servers.len())
            .filter_map(|si| {
                Interval::of(&ctx.ratios(li, si)).map(|i| {
                    format!(
                        "{}{} {} ({})",
                        short_server(servers[si]),
                        match ctx.base(si) {
                            0 => String::new(),
                            b => format!(" ÷ {}", short_server(servers[b])),
                        },
                        i.cell(2),
                        i.verdict("faster", "slower")
                    )
                })
            })
            .collect();
        summary.push(SummaryRow {
            what: format!("HTTP {}: req/s ÷ epoll", loads[li].short()),
            target: "kevent ≥ 1.0× epoll".into(),
            result: if parts.is_empty() {
                "not measured".into()
            } else {
                parts.join("; ")
            },
        });
    }
    let json_loads: Vec<Json> = loads
        .iter()
        .enumerate()
        .map(|(li, load)| {
            Json::obj([
                ("load", Json::from(load.label())),
                ("key", Json::from(load.key())),
                ("tool", Json::from(load.tool())),
                (
                    "ratios_over_epoll",
                    Json::obj((1..servers.len()).map(|si| {
                        (
                            servers[si].key(),
                            Interval::of(&ctx.ratios(li, si)).map_or(Json::Null, |i| i.json()),
                        )
                    })),
                ),
                (
                    "results",
                    Json::obj(servers.iter().enumerate().map(|(si, s)| {
                        (
                            s.key(),
                            Json::obj([
                                (
                                    "rps",
                                    Interval::of(&ctx.rps(li, si)).map_or(Json::Null, |i| i.json()),
                                ),
                                (
                                    "runs",
                                    Json::arr(ctx.runs[li][si].iter().map(|r| match r {
                                        None => Json::Null,
                                        Some(r) => {
                                            let mut o = Json::obj([
                                                ("rps", Json::from(r.rps)),
                                                ("errors", Json::from(r.errors)),
                                                ("non_200", Json::from(r.non_200)),
                                            ]);
                                            if let Some(st) = r.server {
                                                o.push("server_requests", Json::from(st.requests));
                                                o.push("server_accepted", Json::from(st.accepted));
                                                o.push("server_waits", Json::from(st.waits));
                                                o.push("server_ctl_calls", Json::from(st.ctls));
                                            }
                                            o
                                        }
                                    })),
                                ),
                            ]),
                        )
                    })),
                ),
            ])
        })
        .collect();
    Section {
        name: "http",
        title: "HTTP: single-threaded servers under load".into(),
        markdown: md,
        json: Json::obj([
            ("rounds", Json::from(rounds)),
            ("tool_rounds", Json::from(tool_rounds)),
            (
                "nginx",
                ctx.nginx
                    .as_ref()
                    .map_or(Json::Null, |(_, v)| Json::from(v.as_str())),
            ),
            ("loads", Json::Arr(json_loads)),
            (
                "failures",
                Json::arr(failures.iter().map(|f| Json::from(f.as_str()))),
            ),
        ]),
        charts,
        summary,
    }
}

fn short_server(s: Server) -> String {
    match s {
        Server::InProcess(Flavour::Epoll) => "epoll".into(),
        Server::InProcess(Flavour::Kevent(b)) => format!("kevent raw ({})", b.as_str()),
        Server::InProcess(Flavour::Safe(b)) => format!("safe API ({})", b.as_str()),
        Server::External { kind, shim: false } => kind.name().into(),
        Server::External { kind, shim: true } => format!("{} kevent", kind.name()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_ab_and_wrk_and_the_builtin_generator() {
        let ab = "Complete requests:      80000\nFailed requests:        3\n\
                  Requests per second:    12345.67 [#/sec] (mean)\n";
        assert_eq!(parse_output("ab", ab), Some((12345.67, 3, 0)));
        let wrk = "  100 requests in 2.00s, 1 MB read\n  Socket errors: connect 1, read 2, \
                   write 0, timeout 4\n  Non-2xx or 3xx responses: 5\nRequests/sec:  54321.00\n";
        assert_eq!(parse_output("wrk", wrk), Some((54321.0, 12, 0)));
        assert_eq!(parse_output("wrk", "nothing"), None);
        let own = Counts {
            ok: 3000,
            non_200: 2,
            io_errors: 1,
            window_us: 1_000_000,
            ..Counts::default()
        };
        assert_eq!(
            parse_output("kevent-bench", &own.line()),
            Some((3000.0, 1, 2))
        );
        assert!(have("sh"));
        assert!(!have("kevent-bench-no-such-tool"));
    }

    #[test]
    fn listener_has_a_port() {
        let l = listener().unwrap();
        assert_ne!(l.local_addr().unwrap().port(), 0);
    }

    #[test]
    fn the_default_run_always_has_the_builtin_loads() {
        for quick in [true, false] {
            let (builtin, tools, rounds, _) = plan(quick);
            let conns: Vec<usize> = builtin
                .iter()
                .filter_map(|l| match l {
                    Load::Builtin {
                        conns,
                        mode: Mode::KeepAlive,
                        ..
                    } => Some(*conns),
                    _ => None,
                })
                .collect();
            assert_eq!(conns, [100, 1000, 8000]);
            assert!(builtin.iter().all(|l| l.tool() == "kevent-bench"));
            assert!(tools.iter().all(|l| l.tool() != "kevent-bench"));
            assert!(rounds >= 3);
        }
    }

    /// The built-in generator (through `run_one`, as a child process of the test binary is
    /// not `kevent-bench`) against every in-process server: in-process `loadgen::run`.
    #[test]
    fn the_builtin_generator_drives_every_server() {
        use kevent_backend::Backend;
        for f in [
            Flavour::Epoll,
            Flavour::Kevent(Backend::fallback()),
            Flavour::Safe(Backend::fallback()),
        ] {
            for mode in [Mode::KeepAlive, Mode::Close] {
                let l = listener().unwrap();
                let port = l.local_addr().unwrap().port();
                let stop = Arc::new(AtomicBool::new(false));
                let stop2 = stop.clone();
                let t = std::thread::spawn(move || server::serve(f, &l, &stop2));
                let c = loadgen::run(&loadgen::Spec {
                    port,
                    conns: 20,
                    mode,
                    warmup_ms: 20,
                    ramp_limit_ms: 2000,
                    window_ms: 150,
                })
                .unwrap();
                stop.store(true, Ordering::Relaxed);
                let st = t.join().unwrap();
                // Some responses (how many depends on the machine, not on correctness).
                assert!(c.ok > 0, "{f:?} {mode:?}: {c:?}");
                assert_eq!((c.non_200, c.errors()), (0, 0), "{f:?} {mode:?}: {c:?}");
                // The server answered at least what the window counted.
                assert!(st.requests >= c.ok, "{f:?} {mode:?}: {st:?} {c:?}");
                if mode == Mode::Close {
                    assert!(c.connects > c.ok, "{c:?}");
                } else {
                    assert_eq!(c.connects, 20, "{c:?}");
                }
            }
        }
    }

    #[test]
    fn a_small_ab_run_against_both_servers() {
        use kevent_backend::Backend;
        let load = Load::Ab {
            requests: 200,
            conns: 10,
        };
        for f in [Flavour::Epoll, Flavour::Kevent(Backend::fallback())] {
            let r = run_one(&load, Server::InProcess(f), None, None, &[]);
            if have("ab") {
                let r = r.unwrap();
                assert!(r.rps > 0.0);
                assert_eq!((r.server.unwrap().requests, r.errors), (200, 0));
            } else {
                assert!(r.unwrap_err().starts_with("ab: "));
            }
        }
    }
}
