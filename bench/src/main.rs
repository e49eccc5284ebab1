//! `kevent-bench`: the project's main job. Benchmarks that reproduce the measurements kevent
//! and kqueue were argued with, against select, poll and epoll, on every available kevent
//! backend, plus the backend and ABI report.
//!
//! ```text
//! cargo run --release -p kevent-bench -- all --quick --out bench-results   # ~2-3 minutes
//! cargo run --release -p kevent-bench -- all --out bench-results           # the full run
//! cargo run --release -p kevent-bench -- poller --quick
//! cargo run --release -p kevent-bench -- report
//! ```
//!
//! Each benchmark subcommand prints a Markdown report to stdout and, with `--out DIR`, writes
//! `DIR/report.md` (every table), `DIR/summary.md` (the headline figures at a glance, with
//! their intervals and the command), `DIR/<name>.json` (and `DIR/results.json` for `all`)
//! and SVG charts for the poller and HTTP results. Progress goes to stderr.
//!
//! Modules: [`poller`], [`http`], [`registry`], [`timers`], [`ring`], [`capi`], [`calls`] are
//! the benchmarks; [`uring`] is io_uring on raw syscalls (an anchor beside epoll);
//! [`report`] is the backend report; [`stats`], [`json`], [`svg`] are the output side;
//! [`os`], [`rawqueue`] and [`machine`] are the measuring side.

pub mod calls;
pub mod capi;
pub mod deadlines;
pub mod http;
pub mod json;
pub mod machine;
pub mod os;
pub mod poller;
pub mod rawqueue;
pub mod registry;
pub mod report;
pub mod ring;
pub mod scaling;
pub mod stats;
pub mod svg;
pub mod timers;
pub mod uring;

use std::ffi::OsString;
use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use kevent_sys::detect;

use crate::json::Json;
use crate::machine::Machine;
use crate::poller::Transport;

const USAGE: &str = "\
usage: kevent-bench [SUBCOMMAND] [--quick] [--out DIR] [--transport unix-dgram|socketpair] [--rt]
                    [--rounds N] [--window-ms MS] [--servers K,...] [--loads K,...]

subcommands:
  report     print the detected backend (and why native is unavailable) and the ABI summary
             (the default; `backend` is an alias)
  poller     N watched descriptors, A active: µs per round for select, poll, epoll, io_uring
             (multishot poll) and kevent (get_events, ring, asynchronous ring) on every
             available backend
  http       single-threaded HTTP/1.1 servers on epoll and on kevent (and nginx, when
             installed) under the built-in load generator (and ab and wrk, when installed)
  static-files
             one file (4 KiB, 64 KiB, 1 MiB) over HTTP at 100 and 1000 connections, served
             with kevent_aio_sendfile and with epoll + blocking sendfile
  registry   kevent_ctl ADD/MODIFY/REMOVE ns/op with 1e3..1e6 registered kevents, random vs
             colliding ids, and epoll_ctl for comparison
  timers     10k/100k/1M periodic timers in one queue: memory, CPU per expiry, lateness
  ring       events/s through get_events vs the ring, and syscalls per event
  capi       ns per call through libkevent's exported C functions ÷ the Rust dispatch they
             wrap (the C layer's copies of caller memory), on the process's backend
  calls      per call: an empty wait, 1 and 64 events, ADD + REMOVE, MODIFY, the ring's
             wait + commit, on kevent (every backend) beside epoll and io_uring: CPU ns, or
             instructions in `scripts/vm-lane bench --icount calls`
  all        every benchmark above (http and static-files last)
  serve epoll|kevent|safe|ring|io_uring PORT SECONDS
             run one HTTP server alone on 127.0.0.1:PORT (to profile it under your own load)
  loadgen PORT CONNS keep-alive|close WARMUP_MS WINDOW_MS
             the built-in load generator alone against 127.0.0.1:PORT
  poller-rounds select|poll|epoll|io_uring|get_events|ring|ring-batched|c-get_events|c-ring N A ROUNDS
             ROUNDS poller rounds of one mechanism alone, on the process's backend (a workload
             to profile under callgrind or perf; prints its µs per round, no baseline)
  calls-rounds OP epoll|io_uring|kevent|ring|async-ring ROUNDS
             ROUNDS calls of one `calls` kind alone (OP: its key in calls.json, e.g.
             level_turn), on the process's backend, its timed calls marked for
             `scripts/vm-lane run --icount --profile` (prints ns per call, no baseline)
  timer-memory fallback|native N
             RSS growth in bytes of a fresh process that adds N timers to one queue (the
             probe behind the timers table's bytes/timer)
  deadlines [N]
             N per-connection deadlines (default 100000) through kevent::Timers (one TIMER
             kevent) and, built with --features tokio, tokio's timer wheel: CPU ns per
             insert, reset and expiry
  add-scaling [PAIRS]
             ADD + REMOVE pairs per second from 1, 2 and 4 threads on one queue (safe API)
             against epoll_ctl ADD + DEL from the same threads
  help       print this text

options:
  --quick        short settings (`all --quick` takes 2-3 minutes on two cores)
  --out DIR      write report.md, JSON and SVG files into DIR (created if missing)
  --transport T  poller descriptors: unix-dgram (default: N fds) or socketpair (2N fds)
  --rounds N     http: N rounds of the built-in generator's loads (default 10; --quick 3)
  --window-ms MS http: the built-in generator's measured window (default 3000; --quick 500)
  --servers K,.. http: only the servers whose JSON key contains one of these (e.g.
                 epoll_again,kevent_raw_native); epoll, the ratios' base, always runs;
                 epoll_again (epoll a second time, the A/A floor) runs when selected
  --loads K,...  http: only these loads: c100, c1000, c8000 (keep-alive), c8000close, ab, wrk
  --rt           run the single-process benchmarks (all but http) at
                 SCHED_FIFO priority 1 on their pinned CPU (root; needs two CPUs), so that
                 other processes on a shared machine cannot take time slices from them

environment:
  KEVENT_BACKEND=auto|native|fallback   backend selection (default auto)
  KEVENT_BENCH_CLOCK=instructions       the clock counts instructions (set by
                                        `scripts/vm-lane bench --icount`): reports say
                                        \"instruction-time\" and carry its caveat
";

/// Command-line options shared by the benchmark subcommands.
#[derive(Clone, Debug)]
pub struct Opts {
    /// Short settings.
    pub quick: bool,
    /// Where to write report.md, JSON and SVG files.
    pub out: Option<PathBuf>,
    /// Poller transport.
    pub transport: Transport,
    /// Run the single-process benchmarks at `SCHED_FIFO` priority 1 on their pinned CPU.
    pub rt: bool,
    /// http: rounds of the built-in generator's loads (default: 3 with `--quick`, else 10).
    pub rounds: Option<usize>,
    /// http: the built-in generator's measured window in ms (default: 500 with `--quick`,
    /// else 3000).
    pub window_ms: Option<u64>,
    /// http: only the servers whose key contains one of these (epoll always runs).
    pub servers: Option<Vec<String>>,
    /// http: only the loads whose short key ([`http::Load::key`]) is one of these.
    pub loads: Option<Vec<String>>,
}

/// One benchmark's results: Markdown, JSON and charts.
#[derive(Clone, Debug)]
pub struct Section {
    /// File stem and JSON key (`poller`, `http`, ...).
    pub name: &'static str,
    /// Heading.
    pub title: String,
    /// The Markdown body (tables and notes).
    pub markdown: String,
    /// The machine-readable results.
    pub json: Json,
    /// `(file name, SVG text)`.
    pub charts: Vec<(String, String)>,
    /// The headline figures for `summary.md`.
    pub summary: Vec<SummaryRow>,
}

/// One line of the results at a glance (`summary.md`): what was measured, the target it is
/// judged against, and the measured result with its interval.
#[derive(Clone, Debug)]
pub struct SummaryRow {
    /// What was measured.
    pub what: String,
    /// The target (from the issues).
    pub target: String,
    /// The figure(s) measured, with intervals and verdicts.
    pub result: String,
}

fn parse_opts(args: &[String]) -> Result<Opts, String> {
    let mut opts = Opts {
        quick: false,
        out: None,
        transport: Transport::UnixDgram,
        rt: false,
        rounds: None,
        window_ms: None,
        servers: None,
        loads: None,
    };
    let list = |v: &String| -> Vec<String> {
        v.split(',')
            .filter(|k| !k.is_empty())
            .map(str::to_owned)
            .collect()
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--quick" => opts.quick = true,
            "--rt" => opts.rt = true,
            "--out" => {
                opts.out = Some(it.next().ok_or("--out needs a directory")?.into());
            }
            "--rounds" => opts.rounds = Some(number_at_least(a, it.next(), 1)? as usize),
            "--window-ms" => opts.window_ms = Some(number_at_least(a, it.next(), 50)?),
            "--servers" => {
                let v = it.next().ok_or("--servers needs a list")?;
                opts.servers = Some(list(v)).filter(|l| !l.is_empty());
                opts.servers
                    .as_ref()
                    .ok_or("--servers needs a non-empty list")?;
            }
            "--loads" => {
                let v = it.next().ok_or("--loads needs a list")?;
                let l = list(v);
                if let Some(bad) = l.iter().find(|k| !http::LOAD_KEYS.contains(&k.as_str())) {
                    return Err(format!(
                        "--loads: unknown load {bad:?} (one of {})",
                        http::LOAD_KEYS.join(", ")
                    ));
                }
                opts.loads = Some(l).filter(|l| !l.is_empty());
                opts.loads
                    .as_ref()
                    .ok_or("--loads needs a non-empty list")?;
            }
            "--transport" => {
                let v = it.next().ok_or("--transport needs a value")?;
                opts.transport =
                    Transport::parse(v).ok_or_else(|| format!("unknown transport {v:?}"))?;
            }
            other => return Err(format!("unknown option {other:?}")),
        }
    }
    Ok(opts)
}

/// The value of the numeric option `name`: a whole number of at least `min`.
fn number_at_least(name: &str, v: Option<&String>, min: u64) -> Result<u64, String> {
    let v = v.ok_or_else(|| format!("{name} needs a number"))?;
    v.parse()
        .ok()
        .filter(|&n| n >= min)
        .ok_or_else(|| format!("{name} {v:?}: not a number >= {min}"))
}

/// The arguments as strings; the first that is not UTF-8 is the error (`std::env::args`
/// would panic on it).
fn utf8_args(args: impl IntoIterator<Item = OsString>) -> Result<Vec<String>, OsString> {
    args.into_iter().map(OsString::into_string).collect()
}

fn main() -> ExitCode {
    let args = match utf8_args(std::env::args_os().skip(1)) {
        Ok(args) => args,
        Err(bad) => {
            eprintln!("kevent-bench: argument {bad:?} is not UTF-8\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let stdout = &mut io::stdout().lock();
    let (cmd, rest) = match args.split_first() {
        Some((c, rest)) => (c.as_str(), rest),
        None => ("report", &[][..]),
    };
    let result = match cmd {
        "report" | "backend" if rest.is_empty() => report::report(stdout, detect::current()),
        "help" | "-h" | "--help" => stdout.write_all(USAGE.as_bytes()).map(|()| 0),
        "poller" | "http" | "static-files" | "registry" | "timers" | "ring" | "capi" | "calls"
        | "all" => match parse_opts(rest) {
            Ok(opts) => bench(stdout, cmd, &opts),
            Err(e) => {
                eprintln!("kevent-bench: {e}\n\n{USAGE}");
                Ok(2)
            }
        },
        "ring-syscalls" => ring::syscall_child(rest).map(|()| 0),
        "loadgen" => http::loadgen::child_main(rest),
        "serve" => http::serve_command(rest),
        "poller-rounds" => poller::rounds_command(rest),
        "calls-rounds" => calls::rounds_command(rest),
        "timer-memory" => timers::memory_child(rest).map(|()| 0),
        "deadlines" => deadlines::command(rest),
        "add-scaling" => scaling::command(rest),
        _ => {
            eprintln!("kevent-bench: unknown arguments {args:?}\n\n{USAGE}");
            Ok(2)
        }
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("kevent-bench: cannot write the report: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Runs the benchmark subcommand `cmd` (or all of them) and writes the outputs.
fn bench(out: &mut impl Write, cmd: &str, opts: &Opts) -> io::Result<u8> {
    let machine = Machine::probe();
    let cpus = os::allowed_cpus();
    let names: &[&str] = match cmd {
        // HTTP last: its runs leave tens of thousands of TIME_WAIT sockets whose timers run
        // as softirqs for a minute, and this kernel charges softirq time to whichever thread
        // they interrupt (no CONFIG_IRQ_TIME_ACCOUNTING): the single-process benchmarks'
        // per-call CPU times and lateness would carry it.
        "all" => &[
            "poller",
            "registry",
            "timers",
            "ring",
            "capi",
            "calls",
            "http",
            "static-files",
        ],
        one => std::slice::from_ref(match one {
            "poller" => &"poller",
            "http" => &"http",
            "static-files" => &"static-files",
            "registry" => &"registry",
            "timers" => &"timers",
            "capi" => &"capi",
            "calls" => &"calls",
            _ => &"ring",
        }),
    };
    let http_opts = format!(
        "{}{}{}{}",
        opts.rounds
            .map_or(String::new(), |n| format!(" --rounds {n}")),
        opts.window_ms
            .map_or(String::new(), |n| format!(" --window-ms {n}")),
        opts.servers
            .as_ref()
            .map_or(String::new(), |l| format!(" --servers {}", l.join(","))),
        opts.loads
            .as_ref()
            .map_or(String::new(), |l| format!(" --loads {}", l.join(",")))
    );
    let mut md = format!(
        "# kevent-bench results{}\n\n{}* Command: `kevent-bench {cmd}{}{}{http_opts}`\n* Build: {} \
         (kevent-bench {})\n* Pinning: {}\n\n",
        match machine.clock {
            machine::Clock::Instructions => " (instruction-time)",
            machine::Clock::Time => "",
        },
        machine.markdown(),
        if opts.quick { " --quick" } else { "" },
        match (opts.transport, opts.rt) {
            (Transport::SocketPair, true) => " --transport socketpair --rt",
            (Transport::SocketPair, false) => " --transport socketpair",
            (_, true) => " --rt",
            _ => "",
        },
        if cfg!(debug_assertions) {
            "**debug build: figures are not meaningful, use --release**"
        } else {
            "release"
        },
        env!("CARGO_PKG_VERSION"),
        pinning_note(&cpus, opts.rt),
    );
    if cfg!(debug_assertions) {
        eprintln!("kevent-bench: warning: a debug build; run with `cargo run --release`");
    }
    write!(out, "{md}")?;
    out.flush()?;
    let command = format!(
        "kevent-bench {cmd}{}{}{}",
        if opts.quick { " --quick" } else { "" },
        match opts.transport {
            Transport::SocketPair => " --transport socketpair",
            Transport::UnixDgram => "",
        },
        if opts.rt { " --rt" } else { "" },
    ) + &http_opts;
    let mut summary: Vec<(&'static str, f64, f64, Vec<SummaryRow>)> = vec![];
    let mut all = Json::obj([
        ("machine", machine.json()),
        ("quick", Json::from(opts.quick)),
        ("release", Json::from(!cfg!(debug_assertions))),
        ("cpus", Json::arr(cpus.iter().map(|&c| Json::from(c)))),
    ]);
    if let Some(dir) = &opts.out {
        std::fs::create_dir_all(dir)?;
    }
    for (i, &name) in names.iter().enumerate() {
        if i > 0 {
            // Let the kernel finish what the previous benchmark left it (closing thousands of
            // sockets defers work to RCU callbacks and timers, which run as softirqs and are
            // charged to whichever thread they interrupt on this kernel).
            std::thread::sleep(std::time::Duration::from_secs(1));
        }
        let started = os::now_ns();
        let load_before = machine::loadavg();
        let (busy0, own0) = (os::machine_busy_ns(), os::tree_cpu_ns());
        eprintln!("kevent-bench: {name} ...");
        // Single-process benchmarks run pinned to one CPU; http and static-files pin their
        // threads themselves.
        let pins_itself = matches!(name, "http" | "static-files");
        if !pins_itself && cpus.len() > 1 {
            let _ = os::pin_thread(*cpus.last().unwrap_or(&0));
        }
        // --rt: the single-process benchmarks run at SCHED_FIFO on their CPU, so that other
        // processes cannot take time slices from them (they keep the other CPU, and the
        // kernel's RT throttling leaves them 5% of this one). Never for http, which keeps
        // both CPUs busy.
        let rt = opts.rt && !pins_itself && cpus.len() > 1;
        if rt && let Err(e) = os::set_fifo(Some(1)) {
            eprintln!("kevent-bench: --rt: SCHED_FIFO refused ({e}); running normally");
        }
        let section = match name {
            "poller" => poller::run(opts, &machine),
            "http" => http::run(opts, &machine),
            "static-files" => http::static_files::run(opts, &machine),
            "registry" => registry::run(opts, &machine),
            "timers" => timers::run(opts, &machine),
            "capi" => capi::run(opts, &machine),
            "calls" => calls::run(opts, &machine),
            _ => ring::run(opts, &machine),
        };
        if rt {
            let _ = os::set_fifo(None);
        }
        os::unpin_thread(&cpus);
        let secs = (os::now_ns() - started) as f64 / 1e9;
        eprintln!("kevent-bench: {name} took {secs:.1} s");
        let mut text = format!("## {}\n\n{}", section.title, section.markdown);
        for (file, _) in &section.charts {
            text.push_str(&format!("![{file}]({file})\n"));
        }
        let load_after = machine::loadavg();
        // CPU the rest of the machine used meanwhile: other people's work competes with the
        // pinned benchmark and its load generator.
        let others = (os::machine_busy_ns().saturating_sub(busy0) as f64
            - os::tree_cpu_ns().saturating_sub(own0) as f64)
            .max(0.0)
            / 1e9
            / secs;
        text.push_str(&format!(
            "\n(`{name}` took {secs:.0} s; other processes used {others:.2} CPUs on average \
             meanwhile; 1-minute load average {load_before} before, {load_after} after)\n\n"
        ));
        write!(out, "{text}")?;
        out.flush()?;
        md.push_str(&text);
        summary.push((name, secs, others, section.summary.clone()));
        let mut json = section.json.clone();
        json.push("seconds", Json::from(secs));
        json.push("loadavg_before", Json::from(load_before));
        json.push("loadavg_after", Json::from(load_after));
        json.push("other_processes_cpus", Json::from(others));
        if let Some(dir) = &opts.out {
            std::fs::write(dir.join(format!("{name}.json")), json.pretty())?;
            for (file, svg) in &section.charts {
                std::fs::write(dir.join(file), svg)?;
            }
        }
        all.push(name, json);
    }
    let glance = summary_md(&machine, &command, &summary);
    write!(out, "{glance}")?;
    if let Some(dir) = &opts.out {
        std::fs::write(dir.join("report.md"), &md)?;
        std::fs::write(dir.join("summary.md"), &glance)?;
        if cmd == "all" {
            std::fs::write(dir.join("results.json"), all.pretty())?;
        }
        eprintln!("kevent-bench: wrote {}", dir.display());
    }
    Ok(0)
}

/// The results at a glance: one table of every section's headline figures.
fn summary_md(
    machine: &Machine,
    command: &str,
    sections: &[(&'static str, f64, f64, Vec<SummaryRow>)],
) -> String {
    let mut s = format!(
        "## At a glance\n\nCommand: `{command}` ({}; {} on {} CPUs, Linux {}; kevent \
         backends: {}). Ratios: median with its 95% bootstrap interval in brackets; \
         \"no measurable difference\" when the interval contains 1.0.\n\n{}\
         | measured | target | result |\n|---|---|---|\n",
        if cfg!(debug_assertions) {
            "debug build"
        } else {
            "release build"
        },
        machine.date,
        machine.nproc,
        machine.kernel,
        machine
            .backends
            .iter()
            .map(|b| b.as_str())
            .collect::<Vec<_>>()
            .join(", "),
        match machine.clock {
            machine::Clock::Instructions => format!("{}\n\n", machine::INSTRUCTION_TIME_CAVEAT),
            machine::Clock::Time => String::new(),
        },
    );
    for (_, _, _, rows) in sections {
        for r in rows {
            s.push_str(&format!("| {} | {} | {} |\n", r.what, r.target, r.result));
        }
    }
    s.push_str("\nWall time and competition per benchmark: ");
    let parts: Vec<String> = sections
        .iter()
        .map(|(name, secs, others, _)| {
            format!("{name} {secs:.0} s (other processes: {others:.2} CPUs)")
        })
        .collect();
    s.push_str(&parts.join(", "));
    s.push_str(".\n\n");
    s
}

/// How the benchmarks use the CPUs, for the report header.
fn pinning_note(cpus: &[usize], rt: bool) -> String {
    match cpus {
        [] | [_] => "one CPU available: nothing pinned (server and load generator share it)".into(),
        [first, .., last] => format!(
            "{} CPUs used ({cpus:?}). Single-process benchmarks (poller, registry, timers, \
             ring, capi) run pinned to CPU {last}{}; http pins the server thread (and nginx) to CPU \
             {first} and the load generator (a child process) to CPU {last}",
            cpus.len(),
            if rt {
                " at SCHED_FIFO priority 1 (`--rt`)"
            } else {
                " (normal scheduling)"
            }
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_parse() {
        let a = |v: &[&str]| parse_opts(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        let o = a(&["--quick", "--out", "d", "--transport", "socketpair", "--rt"]).unwrap();
        assert!(o.quick && o.rt);
        assert_eq!(o.out, Some(PathBuf::from("d")));
        assert_eq!(o.transport, Transport::SocketPair);
        assert!(a(&["--out"]).is_err());
        assert!(a(&["--bogus"]).is_err());
        assert!(a(&["--transport", "x"]).is_err());
        let o = a(&["--rounds", "12", "--window-ms", "2000"]).unwrap();
        assert_eq!((o.rounds, o.window_ms), (Some(12), Some(2000)));
        assert!(a(&["--rounds", "0"]).is_err());
        assert!(a(&["--rounds"]).is_err());
        assert!(a(&["--window-ms", "x"]).is_err());
        assert_eq!(
            a(&["--window-ms", "49"]).unwrap_err(),
            "--window-ms \"49\": not a number >= 50"
        );
        assert_eq!(a(&["--rounds"]).unwrap_err(), "--rounds needs a number");
        let o = a(&[
            "--servers",
            "epoll,kevent_raw_native",
            "--loads",
            "c100,c8000close",
        ])
        .unwrap();
        assert_eq!(
            o.servers,
            Some(vec!["epoll".to_owned(), "kevent_raw_native".to_owned()])
        );
        assert_eq!(
            o.loads,
            Some(vec!["c100".to_owned(), "c8000close".to_owned()])
        );
        assert!(a(&["--loads", "c7"]).is_err());
        assert!(a(&["--servers", ","]).is_err());
        assert!(a(&["--servers"]).is_err());
    }

    #[test]
    fn non_utf8_arguments_are_an_error_not_a_panic() {
        use std::os::unix::ffi::OsStringExt;
        let ok = utf8_args(["--out".into(), "d".into()]);
        assert_eq!(ok, Ok(vec!["--out".to_string(), "d".to_string()]));
        let bad = OsString::from_vec(vec![b'd', 0xff]);
        assert_eq!(utf8_args(["--out".into(), bad.clone()]), Err(bad));
    }

    #[test]
    fn pinning_is_described() {
        assert!(pinning_note(&[0], false).contains("nothing pinned"));
        assert!(pinning_note(&[0, 1], false).contains("server thread (and nginx) to CPU 0"));
        assert!(pinning_note(&[0, 1], true).contains("SCHED_FIFO"));
    }
}
