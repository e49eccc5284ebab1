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
//!
//! # Modules
//!
//! [`server`] holds the in-process servers, [`loadgen`] the built-in load generator and
//! [`nginx`] the outside servers; `load` the load settings, how one run is driven in a child
//! process and how its output is read; this module plans and runs the rounds; `report` turns
//! them into tables, notes, JSON, charts and headline rows.

mod load;
pub mod loadgen;
pub mod nginx;
mod report;
pub mod server;
pub mod static_files;

use std::fmt::Write as _;
use std::io;
use std::net::TcpListener;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::machine::Machine;
use crate::os;
use crate::{Opts, Section};
pub use load::Load;
use load::{RunResult, drive, have};
use loadgen::Mode;
use report::ReportCtx;
use server::Flavour;

/// What `kevent-bench http --loads` accepts ([`Load::filter_key`]).
pub const LOAD_KEYS: [&str; 6] = ["c100", "c1000", "c8000", "c8000close", "ab", "wrk"];

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
    /// The epoll server a second time, as a server of its own (P67): its ratio to epoll is
    /// the instrument's floor, what "no difference" measures at each load.
    EpollAgain,
}

impl Server {
    fn name(self) -> String {
        match self {
            Server::InProcess(f) => flavour_name(f),
            Server::EpollAgain => "epoll (again)".into(),
            Server::External { kind, shim: false } => kind.name().into(),
            Server::External { kind, shim: true } => format!("{} on kevent (shim)", kind.name()),
        }
    }

    fn key(self) -> String {
        match self {
            Server::InProcess(f) => flavour_key(f),
            Server::EpollAgain => "epoll_again".into(),
            Server::External { kind, shim: false } => kind.name().into(),
            Server::External { kind, shim: true } => format!("{}_kevent_shim", kind.name()),
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
        Server::EpollAgain => Flavour::Epoll,
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

/// The `serve epoll|kevent|safe|ring|io_uring PORT SECONDS` subcommand: one server alone, for profiling.
pub fn serve_command(args: &[String]) -> io::Result<u8> {
    let usage = || {
        eprintln!("usage: kevent-bench serve epoll|kevent|safe|ring|io_uring PORT SECONDS");
        Ok(2)
    };
    let [kind, port, secs] = args else {
        return usage();
    };
    let flavour = match kind.as_str() {
        "epoll" => Flavour::Epoll,
        "io_uring" => Flavour::Uring,
        "kevent" | "safe" | "ring" => match kevent_backend::Backend::current() {
            Ok(b) if kind == "safe" => Flavour::Safe(b),
            Ok(b) if kind == "ring" => Flavour::Ring(b),
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

/// The loads and rounds of a run: `(built-in loads, tool loads, built-in rounds, tool
/// rounds)`; `rounds` and `window_ms` (`--rounds`, `--window-ms`) replace the defaults of
/// the built-in loads.
fn plan_with(
    quick: bool,
    rounds: Option<usize>,
    window_ms: Option<u64>,
) -> (Vec<Load>, Vec<Load>, usize, usize) {
    let window_ms = window_ms.unwrap_or(if quick { 500 } else { 3000 });
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
        (builtin, tools, rounds.unwrap_or(3), 1)
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
        (builtin, tools, rounds.unwrap_or(10), 5)
    }
}

/// Runs the HTTP benchmark.
pub fn run(opts: &Opts, machine: &Machine) -> Section {
    let (builtin, tool_loads, rounds, tool_rounds) =
        plan_with(opts.quick, opts.rounds, opts.window_ms);
    let mut servers = vec![Server::InProcess(Flavour::Epoll)];
    let mut notes = vec![];
    for &b in &machine.backends {
        servers.push(Server::InProcess(Flavour::Kevent(b)));
        servers.push(Server::InProcess(Flavour::Safe(b)));
        // P38: a kevent kernel without the asynchronous ring refuses the flag (EINVAL).
        match crate::rawqueue::RawQueue::new_async(b, 4) {
            Ok(_) => servers.push(Server::InProcess(Flavour::Ring(b))),
            Err(e) => notes.push(format!(
                "kevent async ring ({}): refused ({e}), no row",
                b.as_str()
            )),
        }
    }
    match crate::uring::Uring::probe().and_then(|()| {
        crate::uring::Uring::new(2, 4)
            .map_err(|e| format!("refused: io_uring_setup: {e}"))?
            .has_wait_timeout()
            .then_some(())
            .ok_or_else(|| "refused: no IORING_FEAT_EXT_ARG (a wait with a timeout)".to_owned())
    }) {
        Ok(()) => servers.push(Server::InProcess(Flavour::Uring)),
        Err(why) => notes.push(format!("io_uring: {why}; its rows are missing")),
    }
    // P67: the A/A control, last of the in-process servers (apart from epoll in the
    // rotation's order).
    servers.push(Server::EpollAgain);
    if let Some(keys) = &opts.servers {
        // epoll stays: every ratio is to it.
        servers.retain(|s| {
            *s == Server::InProcess(Flavour::Epoll) || keys.iter().any(|k| s.key().contains(k))
        });
        notes.push(format!(
            "servers selected with `--servers {}`",
            keys.join(",")
        ));
    }
    let cpus = os::allowed_cpus();
    let (server_cpu, client_cpu) = match cpus.as_slice() {
        [a, .., b] => (Some(*a), Some(*b)),
        _ => (None, None),
    };
    // nginx and lighttpd, once for the whole benchmark; each also under libkevent-epoll.so.
    let mut nginx_info = None;
    let any_server = [nginx::Kind::Nginx, nginx::Kind::Lighttpd]
        .into_iter()
        .any(|k| nginx::find_kind(k).is_some());
    let shim = any_server.then(nginx::find_shim).flatten();
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
            if let Some(keys) = &opts.servers
                && !keys.iter().any(|k| s.key().contains(k))
            {
                continue;
            }
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
    let wanted = |l: &Load| {
        opts.loads
            .as_ref()
            .is_none_or(|keys| keys.contains(&l.filter_key()))
    };
    loads.retain(wanted);
    for (tool, pkg) in [("ab", "apache2-utils"), ("wrk", "wrk")] {
        if have(tool) {
            loads.extend(
                tool_loads
                    .iter()
                    .filter(|l| l.tool() == tool && wanted(l))
                    .cloned(),
            );
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
                        "http: {} {} round {round}: {:.0} req/s{}{}",
                        load.label(),
                        s.name(),
                        r.rps,
                        r.wave_rps
                            .map_or(String::new(), |w| format!(" ({w:.0} over whole waves)")),
                        r.tcp.map_or(String::new(), |t| format!(
                            " (listen drops {}, retransmitted segments {})",
                            t.listen_drops, t.retrans
                        ))
                    ),
                    Err(e) => {
                        eprintln!("http: {} {}: {e}", load.label(), s.name());
                        failures.push(format!("{} {}: {e}", load.label(), s.name()));
                    }
                }
                runs[li][si].push(res.ok());
                // Let the previous run's sockets finish closing.
                std::thread::sleep(Duration::from_millis(100));
                if machine.clock == crate::machine::Clock::Instructions {
                    // P63: every run starts with no TIME_WAIT socket (idle guest time is
                    // skipped, so the 60 s cost no wall time).
                    let (waited, left) = load::drain_time_wait(Duration::from_secs(70));
                    if waited > Duration::from_secs(1) || left > 0 {
                        eprintln!(
                            "http: waited {:.0} s for TIME_WAIT to drain ({left} left)",
                            waited.as_secs_f64()
                        );
                    }
                }
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
    report::report(&ctx, &notes, &failures, rounds, tool_rounds)
}

fn flavour_name(f: Flavour) -> String {
    match f {
        Flavour::Epoll => "epoll".into(),
        Flavour::Kevent(b) => format!("kevent raw ({})", b.as_str()),
        Flavour::Safe(b) => format!("kevent safe API ({})", b.as_str()),
        Flavour::Ring(b) => format!("kevent async ring ({})", b.as_str()),
        Flavour::Uring => "io_uring".into(),
    }
}

fn flavour_key(f: Flavour) -> String {
    match f {
        Flavour::Epoll => "epoll".into(),
        Flavour::Kevent(b) => format!("kevent_raw_{}", b.as_str()),
        Flavour::Safe(b) => format!("kevent_safe_api_{}", b.as_str()),
        Flavour::Ring(b) => format!("kevent_async_ring_{}", b.as_str()),
        Flavour::Uring => "io_uring_multishot_poll".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listener_has_a_port() {
        let l = listener().unwrap();
        assert_ne!(l.local_addr().unwrap().port(), 0);
    }

    #[test]
    fn the_default_run_always_has_the_builtin_loads() {
        for quick in [true, false] {
            let (builtin, tools, rounds, _) = plan_with(quick, None, None);
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
            // `--loads` names every load, each by its own key.
            let keys: Vec<String> = builtin.iter().chain(&tools).map(Load::filter_key).collect();
            assert!(
                keys.iter().all(|k| LOAD_KEYS.contains(&k.as_str())),
                "{keys:?}"
            );
            let builtin_keys = &keys[..builtin.len()];
            assert_eq!(builtin_keys, ["c100", "c1000", "c8000", "c8000close"]);
            let (builtin, _, rounds, _) = plan_with(quick, Some(7), Some(1500));
            assert_eq!(rounds, 7);
            assert!(builtin.iter().all(|l| matches!(
                l,
                Load::Builtin {
                    window_ms: 1500,
                    ..
                }
            )));
        }
    }

    /// The built-in generator (through `run_one`, as a child process of the test binary is
    /// not `kevent-bench`) against every in-process server: in-process `loadgen::run`.
    #[test]
    fn the_builtin_generator_drives_every_server() {
        use kevent_backend::Backend;
        let mut flavours = vec![
            Flavour::Epoll,
            Flavour::Kevent(Backend::fallback()),
            Flavour::Safe(Backend::fallback()),
            Flavour::Ring(Backend::fallback()),
        ];
        if let Ok(b) = Backend::native()
            && crate::rawqueue::RawQueue::new_async(b, 4).is_ok()
        {
            flavours.push(Flavour::Ring(b));
        }
        if crate::uring::Uring::probe().is_ok() {
            flavours.push(Flavour::Uring);
        }
        for f in flavours {
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
                // The whole-wave window (P68): the anchor came round after the window.
                assert!(c.wave_us > 0 && c.wave_ok > 0, "{f:?} {mode:?}: {c:?}");
                // The server answered at least what the window counted.
                assert!(st.requests >= c.ok, "{f:?} {mode:?}: {st:?} {c:?}");
                assert!(st.events > 0 && st.waits > 0, "{f:?} {mode:?}: {st:?}");
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
