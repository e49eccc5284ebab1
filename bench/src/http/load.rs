//! The loads of the HTTP benchmark: each load generator setting (the built-in generator, ab,
//! wrk), how one run of it is driven in a child process bounded in time, and how its output
//! is read.

use std::io;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::loadgen::{Counts, Mode};
use super::nginx;
use super::server::ServerStats;

/// A load generator setting.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Load {
    /// The built-in generator ([`super::loadgen`]): `conns` connections for a window of
    /// `window_ms` after a warm-up.
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

    pub(super) fn key(&self) -> String {
        match self {
            Load::Builtin { conns, mode, .. } => format!("builtin_{}_{conns}", mode.name()),
            Load::Ab { conns, .. } => format!("ab_{conns}"),
            Load::Wrk { conns, .. } => format!("wrk_{conns}"),
        }
    }

    /// The name `kevent-bench http --loads` selects it by (one of [`super::LOAD_KEYS`]):
    /// `c100`, `c1000`, `c8000` (keep-alive), `c8000close`, `ab`, `wrk`.
    pub fn filter_key(&self) -> String {
        match self {
            Load::Builtin {
                conns,
                mode: Mode::KeepAlive,
                ..
            } => format!("c{conns}"),
            Load::Builtin { conns, .. } => format!("c{conns}close"),
            Load::Ab { .. } => "ab".into(),
            Load::Wrk { .. } => "wrk".into(),
        }
    }

    /// Least warm-up of the built-in generator (the window also waits for the ramp-up).
    pub(super) fn warmup_ms(_conns: usize) -> u64 {
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

/// What one load-generator run reported.
#[derive(Clone, Debug, Default)]
pub(super) struct RunResult {
    pub(super) rps: f64,
    /// Requests/s over whole waves of the closed loop (P68; built-in generator only).
    pub(super) wave_rps: Option<f64>,
    /// Errors (built-in generator: every kind; ab: failed requests; wrk: socket errors and
    /// non-2xx responses).
    pub(super) errors: u64,
    /// Responses other than 200 (built-in generator only).
    pub(super) non_200: u64,
    /// What the server counted (in-process servers only).
    pub(super) server: Option<ServerStats>,
    /// The machine's TCP counters over the run (`None`: /proc/net unreadable).
    pub(super) tcp: Option<TcpCounters>,
}

/// TCP counters of the machine (`/proc/net/netstat`, `/proc/net/snmp`): a listen queue that
/// drops connection requests makes a run measure TCP's retransmission timers (1 s for a SYN),
/// not the server.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct TcpCounters {
    /// `TcpExt: ListenDrops`: SYNs and handshake ACKs a listener dropped (request queue or
    /// accept queue full; includes `ListenOverflows`).
    pub(super) listen_drops: u64,
    /// `Tcp: RetransSegs`: segments retransmitted.
    pub(super) retrans: u64,
}

impl TcpCounters {
    /// The counters now.
    pub(super) fn read() -> Option<TcpCounters> {
        let netstat = std::fs::read_to_string("/proc/net/netstat").ok()?;
        let snmp = std::fs::read_to_string("/proc/net/snmp").ok()?;
        Some(TcpCounters {
            listen_drops: proc_net_field(&netstat, "TcpExt:", "ListenDrops")?,
            retrans: proc_net_field(&snmp, "Tcp:", "RetransSegs")?,
        })
    }

    /// What `later` counted since `self`.
    pub(super) fn since(self, later: TcpCounters) -> TcpCounters {
        TcpCounters {
            listen_drops: later.listen_drops.saturating_sub(self.listen_drops),
            retrans: later.retrans.saturating_sub(self.retrans),
        }
    }
}

/// Sockets in TIME_WAIT on the machine (`/proc/net/sockstat`, `TCP: ... tw N`).
pub(super) fn time_wait_sockets() -> Option<u64> {
    sockstat_tw(&std::fs::read_to_string("/proc/net/sockstat").ok()?)
}

fn sockstat_tw(text: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with("TCP:"))?;
    let mut words = line.split_whitespace();
    words.find(|&w| w == "tw")?;
    words.next()?.parse().ok()
}

/// Waits (at most `limit`) until no socket is in TIME_WAIT (P63): a connection-per-request
/// run leaves thousands for 60 s, and the next run would otherwise start from what the runs
/// before it left (the kernel keeps at most `tcp_max_tw_buckets`; past that a close makes no
/// TIME_WAIT socket and the peer's last segment is answered with a reset), so its cost per
/// response would depend on the order of the runs. Returns how long it waited and how many
/// were left.
pub(super) fn drain_time_wait(limit: Duration) -> (Duration, u64) {
    let start = Instant::now();
    loop {
        let tw = time_wait_sockets().unwrap_or(0);
        if tw == 0 || start.elapsed() >= limit {
            return (start.elapsed(), tw);
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// The value of `name` in a `/proc/net/{netstat,snmp}` text: a line of names after `prefix`,
/// then a line of values after it.
fn proc_net_field(text: &str, prefix: &str, name: &str) -> Option<u64> {
    let mut lines = text.lines().filter(|l| l.starts_with(prefix));
    while let (Some(names), Some(values)) = (lines.next(), lines.next()) {
        if let Some(i) = names.split_whitespace().position(|n| n == name) {
            return values.split_whitespace().nth(i)?.parse().ok();
        }
    }
    None
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

/// Parses a load generator's output: `(requests/s, errors, non-200 responses, requests/s
/// over whole waves)`.
fn parse_output(tool: &str, out: &str) -> Option<(f64, u64, u64, Option<f64>)> {
    match tool {
        "kevent-bench" => {
            let c = Counts::parse_line(out)?;
            Some((c.rps(), c.errors(), c.non_200, c.wave_rps()))
        }
        "ab" => Some((
            number_after(out, "Requests per second:")?,
            number_after(out, "Failed requests:").unwrap_or(0.0) as u64,
            0,
            None,
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
            Some((rps, errors as u64, 0, None))
        }
    }
}

/// Runs `load` against 127.0.0.1:`port` in a child pinned to `client_cpu`, bounded in time.
pub(super) fn drive(
    load: &Load,
    port: u16,
    client_cpu: Option<usize>,
) -> Result<RunResult, String> {
    let mut cmd = load
        .command(port)
        .map_err(|e| format!("{}: {e}", load.tool()))?;
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    nginx::pin_child(&mut cmd, client_cpu);
    let started = Instant::now();
    let tcp_before = TcpCounters::read();
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
    let tcp = tcp_before.zip(TcpCounters::read()).map(|(b, a)| b.since(a));
    let text = String::from_utf8_lossy(&o.stdout);
    match parse_output(load.tool(), &text) {
        Some((rps, errors, non_200, wave_rps)) => Ok(RunResult {
            rps,
            wave_rps,
            errors,
            non_200,
            server: None,
            tcp,
        }),
        None => Err(format!(
            "{} gave no result ({}): {}",
            load.tool(),
            o.status,
            String::from_utf8_lossy(&o.stderr).trim()
        )),
    }
}

/// Whether `tool` is an executable file on `PATH`.
pub(super) fn have(tool: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|p| {
        std::env::split_paths(&p)
            .any(|d| std::fs::metadata(d.join(tool)).is_ok_and(|m| m.is_file()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_net_fields_are_found_by_name() {
        let t = "Tcp: RtoAlgorithm RetransSegs InErrs\nTcp: 1 42 0\n\
                 Udp: InDatagrams\nUdp: 5\n";
        assert_eq!(proc_net_field(t, "Tcp:", "RetransSegs"), Some(42));
        assert_eq!(proc_net_field(t, "Tcp:", "Nope"), None);
        assert_eq!(proc_net_field(t, "Udp:", "InDatagrams"), Some(5));
        // This machine's own counters, where /proc/net exists.
        if let (Some(a), Some(b)) = (TcpCounters::read(), TcpCounters::read()) {
            assert!(b.listen_drops >= a.listen_drops && b.retrans >= a.retrans);
        }
    }

    #[test]
    fn time_wait_sockets_are_read_from_sockstat() {
        let t = "sockets: used 12\nTCP: inuse 3 orphan 0 tw 8123 alloc 5 mem 1\nUDP: inuse 0\n";
        assert_eq!(sockstat_tw(t), Some(8123));
        assert_eq!(sockstat_tw("TCP: inuse 3\n"), None);
        assert_eq!(sockstat_tw(""), None);
        // With nothing in TIME_WAIT (or no /proc), the drain returns at once.
        let (waited, _) = drain_time_wait(Duration::ZERO);
        assert!(waited < Duration::from_secs(5), "{waited:?}");
    }

    #[test]
    fn parses_ab_and_wrk_and_the_builtin_generator() {
        let ab = "Complete requests:      80000\nFailed requests:        3\n\
                  Requests per second:    12345.67 [#/sec] (mean)\n";
        assert_eq!(parse_output("ab", ab), Some((12345.67, 3, 0, None)));
        let wrk = "  100 requests in 2.00s, 1 MB read\n  Socket errors: connect 1, read 2, \
                   write 0, timeout 4\n  Non-2xx or 3xx responses: 5\nRequests/sec:  54321.00\n";
        assert_eq!(parse_output("wrk", wrk), Some((54321.0, 12, 0, None)));
        assert_eq!(parse_output("wrk", "nothing"), None);
        let own = Counts {
            ok: 3000,
            non_200: 2,
            io_errors: 1,
            window_us: 1_000_000,
            wave_ok: 2500,
            wave_us: 500_000,
            ..Counts::default()
        };
        assert_eq!(
            parse_output("kevent-bench", &own.line()),
            Some((3000.0, 1, 2, Some(5000.0)))
        );
        assert!(have("sh"));
        assert!(!have("kevent-bench-no-such-tool"));
    }
}
