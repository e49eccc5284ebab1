//! The HTTP benchmark's report: req/s and ratio tables per load, the notes, the JSON, the
//! charts and the headline rows.

use std::fmt::Write as _;
use std::path::PathBuf;

use super::Server;
use super::load::{Load, RunResult};
use super::server::{Flavour, ServerStats};
use crate::json::Json;
use crate::stats::{Interval, RATIO_LEGEND};
use crate::svg::BarChart;
use crate::{Section, SummaryRow};

/// What the report is made from.
pub(super) struct ReportCtx<'a> {
    pub(super) servers: &'a [Server],
    pub(super) loads: &'a [Load],
    pub(super) runs: &'a [Vec<Vec<Option<RunResult>>>],
    pub(super) server_cpu: Option<usize>,
    pub(super) client_cpu: Option<usize>,
    pub(super) somaxconn: &'a str,
    pub(super) nginx: Option<(PathBuf, String)>,
    pub(super) nginx_errors: String,
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

    /// The instrument's floor at load `li` (P67): the interval of the A/A control's ratio
    /// (the epoll server run a second time, [`Server::EpollAgain`]) to epoll; `None` when
    /// it did not run.
    fn floor(&self, li: usize) -> Option<Interval> {
        let si = self.servers.iter().position(|&s| s == Server::EpollAgain)?;
        Interval::of(&self.ratios(li, si))
    }

    /// The verdict on server `si`'s ratio at load `li` against the floor (P67).
    fn verdict(&self, li: usize, si: usize) -> Option<String> {
        let i = Interval::of(&self.ratios(li, si))?;
        Some(match self.floor(li) {
            Some(f) if self.servers[si] != Server::EpollAgain => floor_verdict(&i, &f),
            // The floor itself: an interval that excludes 1.0 is a bias of the two runs'
            // places in the round, not a difference of servers.
            Some(_) if i.contains(1.0) => "the A/A floor (contains 1.0)".to_owned(),
            Some(_) => "the A/A floor (excludes 1.0: a bias of the runs' places)".to_owned(),
            None => i.verdict("faster", "slower"),
        })
    }

    /// Microseconds per response (`1e6 / rps`) of each run of server `si`.
    fn us_per_response(&self, li: usize, si: usize) -> Vec<f64> {
        self.runs[li][si]
            .iter()
            .flatten()
            .filter(|r| r.rps > 0.0)
            .map(|r| 1e6 / r.rps)
            .collect()
    }

    /// Server `si`'s µs per response minus epoll's (server 0), run by run within each round.
    fn us_saved(&self, li: usize, si: usize) -> Vec<f64> {
        self.runs[li][si]
            .iter()
            .zip(&self.runs[li][0])
            .filter_map(|(a, e)| match (a, e) {
                (Some(a), Some(e)) if a.rps > 0.0 && e.rps > 0.0 => Some(1e6 / e.rps - 1e6 / a.rps),
                _ => None,
            })
            .collect()
    }

    /// The time per response and what each server saves against epoll, for the loads
    /// `which`: in instruction-time a µs is 1000 instructions of the whole guest (server,
    /// load generator and the kernel under both), so the difference is the instructions a
    /// server's mechanism saves per response, which the req/s ratio dilutes by the load
    /// generator's share.
    fn per_response_table(&self, md: &mut String, which: &[usize]) {
        let mut header = "| load |".to_owned();
        let mut rule = "|---|".to_owned();
        for s in self.servers {
            let _ = write!(header, " {} µs |", s.name());
            rule.push_str("---|");
        }
        for s in &self.servers[1..] {
            let _ = write!(header, " epoll − {} µs |", short_server(*s));
            rule.push_str("---|");
        }
        let _ = writeln!(md, "{header}\n{rule}");
        for &li in which {
            let mut row = format!("| `{}` |", self.loads[li].label());
            for si in 0..self.servers.len() {
                let cell =
                    Interval::of(&self.us_per_response(li, si)).map_or("–".into(), |i| i.cell(2));
                let _ = write!(row, " {cell} |");
            }
            for si in 1..self.servers.len() {
                let cell = Interval::of(&self.us_saved(li, si)).map_or("–".into(), |i| i.cell(2));
                let _ = write!(row, " {cell} |");
            }
            let _ = writeln!(md, "{row}");
        }
        md.push('\n');
    }

    /// The verdict on every ratio against the instrument's floor (P67) for the loads
    /// `which`; nothing when the A/A control did not run.
    fn floor_table(&self, md: &mut String, which: &[usize]) {
        if !self.servers.contains(&Server::EpollAgain) {
            return;
        }
        let _ = writeln!(
            md,
            "The instrument's floor (P67): `epoll (again)` is the epoll server run a second \
             time as a server of its own, so its ratio to epoll is what \"no difference\" \
             measures at each load (phase, order and drift within the run). A server is \
             slower or faster than its base only when its ratio's interval lies wholly below \
             or above the floor's interval at the same load.\n"
        );
        let mut header = "| load | floor: epoll (again) ÷ epoll |".to_owned();
        let mut rule = "|---|---|".to_owned();
        let judged: Vec<usize> = (1..self.servers.len())
            .filter(|&si| self.servers[si] != Server::EpollAgain)
            .collect();
        for &si in &judged {
            let base = short_server(self.servers[self.base(si)]);
            let _ = write!(header, " {} ÷ {base} |", short_server(self.servers[si]));
            rule.push_str("---|");
        }
        let _ = writeln!(md, "{header}\n{rule}");
        for &li in which {
            let floor = self.floor(li).map_or("–".into(), |f| f.ratio_cell());
            let mut row = format!("| `{}` | {floor} |", self.loads[li].short());
            for &si in &judged {
                let cell = Interval::of(&self.ratios(li, si)).map_or("–".into(), |i| {
                    format!(
                        "{:.2}: {}",
                        i.median,
                        self.verdict(li, si).unwrap_or_default()
                    )
                });
                let _ = write!(row, " {cell} |");
            }
            let _ = writeln!(md, "{row}");
        }
        md.push('\n');
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

pub(super) fn report(
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
         closing a connection without REMOVE, as epoll's server closes without `EPOLL_CTL_DEL` (the last close unregisters, D10); `kevent safe API`, `kevent::Queue` with \
         one `Registration<TcpStream>` per connection (`add_all` per wait; dropping a \
         registration is one REMOVE); `kevent async ring`, a queue with the asynchronous \
         ring (P38) through the raw ABI, sockets registered edge-triggered with \
         ALWAYS_QUEUE (so the kernel posts their wake-ups straight into the ring), events \
         read from the ring with no call and `kevent_wait` only when it is empty, \
         ADD batched and closes as in `kevent raw`; `io_uring`, one multishot `POLL_ADD` per \
         socket through the raw `io_uring_setup`/`io_uring_enter` calls, completions \
         reaped from the CQ ring with no call, one `io_uring_enter` both submitting the \
         batch's polls and waiting when the CQ ring is empty, a `POLL_REMOVE` before each \
         close (a poll holds its socket){}. Listen backlog 65535, capped by \
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
    ctx.floor_table(&mut md, &builtin);
    let _ = writeln!(
        md,
        "Time per response, `1e6 ÷ req/s` (median over rounds, 95% interval), and what each \
         server saves against epoll in the same round (positive: faster). It is the whole \
         machine's time per response: the load generator's work and the kernel's under both \
         sides are in it, nearly the same for every server (the same code; its batches follow \
         the server's), so a server's difference to epoll is \
         its own (its mechanism's wake-up callbacks included, wherever they run) while the \
         req/s ratio above is diluted by the load generator's share. In instruction-time, \
         1 µs = 1000 guest instructions.\n"
    );
    ctx.per_response_table(&mut md, &builtin);
    // The same runs counted over whole waves of the closed loop (P68).
    let wave_runs: Vec<Vec<Vec<Option<RunResult>>>> = ctx
        .runs
        .iter()
        .map(|l| {
            l.iter()
                .map(|s| {
                    s.iter()
                        .map(|r| {
                            let r = r.as_ref()?;
                            Some(RunResult {
                                rps: r.wave_rps?,
                                ..r.clone()
                            })
                        })
                        .collect()
                })
                .collect()
        })
        .collect();
    let waves: Vec<usize> = builtin
        .iter()
        .copied()
        .filter(|&li| wave_runs[li].iter().flatten().any(Option::is_some))
        .collect();
    if !waves.is_empty() {
        let wctx = ReportCtx {
            runs: &wave_runs,
            nginx: None,
            nginx_errors: String::new(),
            ..*ctx
        };
        let _ = writeln!(
            md,
            "The same runs counted over whole waves (P68): from the first response completed \
             in the window to the first response of the same connection completed after the \
             window's end, so that the count starts and ends at the same phase of the closed \
             loop (at 8000 connections a connection's turn comes about once per second, a \
             quarter of a 4 s window).\n"
        );
        wctx.table(&mut md, &waves);
        wctx.floor_table(&mut md, &waves);
    }
    if !tools.is_empty() {
        let _ = writeln!(md, "#### ab and wrk\n");
        ctx.table(&mut md, &tools);
    }
    // Where the syscalls go: waits and control calls per 1000 requests, and errors.
    let _ = writeln!(
        md,
        "Server-side counts, summed over the runs: waits and control calls (`epoll_ctl` / \
         `kevent_ctl`) and events taken per 1000 responses (in-process servers only), what the load \
         generator counted as errors and as responses other than 200, and the machine's TCP \
         counters over the runs: connection requests a listener dropped (`ListenDrops`: a \
         full request or accept queue; each costs the client a 1 s SYN retransmission, so a \
         run with drops measures TCP's timers, not the server) and segments retransmitted.\n"
    );
    let _ = writeln!(
        md,
        "| load | server | responses | waits/1000 | ctl calls/1000 | events/1000 | errors | \
         non-200 | listen drops | retransmitted |"
    );
    let _ = writeln!(md, "|---|---|---|---|---|---|---|---|---|---|");
    for (li, load) in loads.iter().enumerate() {
        for (si, s) in servers.iter().enumerate() {
            let rs: Vec<&RunResult> = ctx.runs[li][si].iter().flatten().collect();
            let st: Vec<ServerStats> = rs.iter().filter_map(|r| r.server).collect();
            let req: u64 = st.iter().map(|s| s.requests).sum();
            let waits: u64 = st.iter().map(|s| s.waits).sum();
            let ctls: u64 = st.iter().map(|s| s.ctls).sum();
            let events: u64 = st.iter().map(|s| s.events).sum();
            let errs: u64 = rs.iter().map(|r| r.errors).sum();
            let non200: u64 = rs.iter().map(|r| r.non_200).sum();
            let tcp: Vec<_> = rs.iter().filter_map(|r| r.tcp).collect();
            let (drops, retrans) = if tcp.is_empty() {
                ("–".to_owned(), "–".to_owned())
            } else {
                (
                    tcp.iter().map(|t| t.listen_drops).sum::<u64>().to_string(),
                    tcp.iter().map(|t| t.retrans).sum::<u64>().to_string(),
                )
            };
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
                "| `{}` | {} | {responses} | {} | {} | {} | {errs} | {non200} | {drops} | {retrans} |",
                load.short(),
                s.name(),
                per(waits),
                per(ctls),
                per(events)
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
                        ctx.verdict(li, si).unwrap_or_default()
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
                ("floor", ctx.floor(li).map_or(Json::Null, |f| f.json())),
                (
                    "verdicts",
                    Json::obj((1..servers.len()).map(|si| {
                        (
                            servers[si].key(),
                            ctx.verdict(li, si).map_or(Json::Null, Json::from),
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
                                                (
                                                    "wave_rps",
                                                    r.wave_rps.map_or(Json::Null, Json::from),
                                                ),
                                                ("errors", Json::from(r.errors)),
                                                ("non_200", Json::from(r.non_200)),
                                            ]);
                                            if let Some(t) = r.tcp {
                                                o.push("listen_drops", Json::from(t.listen_drops));
                                                o.push("retransmitted", Json::from(t.retrans));
                                            }
                                            if let Some(st) = r.server {
                                                o.push("server_requests", Json::from(st.requests));
                                                o.push("server_accepted", Json::from(st.accepted));
                                                o.push("server_waits", Json::from(st.waits));
                                                o.push("server_ctl_calls", Json::from(st.ctls));
                                                o.push("server_events", Json::from(st.events));
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

/// P67: a ratio is faster or slower than its base only when its interval lies wholly above
/// or below the interval of the A/A control's ratio (`floor`) at the same load; otherwise the
/// instrument does not resolve a difference.
fn floor_verdict(i: &Interval, floor: &Interval) -> String {
    if !i.is_interval() || !floor.is_interval() {
        "too few runs to say".to_owned()
    } else if i.lo > floor.hi {
        "faster: above the A/A floor".to_owned()
    } else if i.hi < floor.lo {
        "slower: below the A/A floor".to_owned()
    } else {
        "within the A/A floor: no difference resolved".to_owned()
    }
}

fn short_server(s: Server) -> String {
    match s {
        Server::InProcess(Flavour::Epoll) => "epoll".into(),
        Server::InProcess(Flavour::Kevent(b)) => format!("kevent raw ({})", b.as_str()),
        Server::InProcess(Flavour::Safe(b)) => format!("safe API ({})", b.as_str()),
        Server::InProcess(Flavour::Ring(b)) => format!("async ring ({})", b.as_str()),
        Server::InProcess(Flavour::Uring) => "io_uring".into(),
        Server::EpollAgain => "epoll again".into(),
        Server::External { kind, shim: false } => kind.name().into(),
        Server::External { kind, shim: true } => format!("{} kevent", kind.name()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn iv(median: f64, lo: f64, hi: f64) -> Interval {
        Interval {
            median,
            lo,
            hi,
            n: 3,
        }
    }

    #[test]
    fn a_ratio_is_judged_against_the_a_a_floor() {
        let floor = iv(1.0, 0.98, 1.01);
        // Below 1.0 but inside the floor: not resolved, although its interval excludes 1.0.
        let inside = iv(0.985, 0.98, 0.99);
        assert_eq!(inside.verdict("faster", "slower"), "slower");
        assert!(floor_verdict(&inside, &floor).starts_with("within"));
        assert!(floor_verdict(&iv(0.96, 0.95, 0.97), &floor).starts_with("slower"));
        assert!(floor_verdict(&iv(1.03, 1.02, 1.04), &floor).starts_with("faster"));
        // Touching the floor's interval is inside it.
        assert!(floor_verdict(&iv(1.02, 1.01, 1.03), &floor).starts_with("within"));
        let one = Interval { n: 1, ..floor };
        assert_eq!(floor_verdict(&inside, &one), "too few runs to say");
    }
}
