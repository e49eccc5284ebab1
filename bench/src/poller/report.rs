//! The poller's report: the Markdown tables (µs per round, kevent ÷ epoll and C ÷ Rust
//! ratios, the flatness column), the JSON cells, the charts and the headline rows.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use kevent_backend::Backend;

use super::mechanism::Mech;
use super::{Config, Transport};
use crate::json::Json;
use crate::machine::{Clock, Machine};
use crate::stats::{Interval, RATIO_LEGEND, Summary, judge_at_most, ratio_cell};
use crate::svg::{LineChart, Series};
use crate::{Section, SummaryRow};

/// The per-repetition ratios `a[i] / b[i]` (both sample lists are in repetition order):
/// their median with a 95% bootstrap interval.
fn paired_ratio(
    samples: &BTreeMap<(Mech, usize, usize), Vec<f64>>,
    a: (Mech, usize, usize),
    b: (Mech, usize, usize),
) -> Option<Interval> {
    let (a, b) = (samples.get(&a)?, samples.get(&b)?);
    let r: Vec<f64> = a.iter().zip(b).map(|(x, y)| x / y).collect();
    Interval::of(&r)
}

#[allow(clippy::too_many_arguments)]
pub(super) fn report(
    cfg: &Config,
    mechs: &[Mech],
    backends: &[Backend],
    samples: &BTreeMap<(Mech, usize, usize), Vec<f64>>,
    blocks: &BTreeMap<(Mech, usize, usize), Vec<super::Block>>,
    skipped: &BTreeMap<usize, String>,
    select_skipped: &BTreeMap<usize, String>,
    uring_refused: Option<String>,
    machine: &Machine,
) -> Section {
    let get = |m: Mech, n: usize, a: usize| samples.get(&(m, n, a)).and_then(|v| Summary::of(v));
    let measured: Vec<usize> = cfg
        .ns
        .iter()
        .copied()
        .filter(|n| !skipped.contains_key(n))
        .collect();
    let (n_first, n_last) = (measured.first().copied(), measured.last().copied());
    let mut md = String::new();
    let _ = writeln!(
        md,
        "{} per round (median of {} timed blocks, min–max in parentheses; each block \
         ≈{} ms after a warm-up). Transport: **{}**{}. One round = write 1 byte to each of A \
         active descriptors, one wait that returns them, read each byte. Ratio rows: kevent ÷ \
         epoll per column, over the ratios of the two blocks timed in the same repetition \
         (target ≤ 1.10). {RATIO_LEGEND} The last column is the largest measured N ÷ N=100, \
         from the medians (target ≤ 1.3).\n",
        match machine.clock {
            Clock::Instructions =>
                "Microseconds of instruction-time (thousands of guest instructions)",
            Clock::Time => "Microseconds",
        },
        cfg.reps,
        cfg.block_ns / 1_000_000,
        cfg.transport.name(),
        match cfg.transport {
            Transport::UnixDgram =>
                " (N AF_UNIX datagram sockets, each connected to itself: N fds for N watched)",
            Transport::SocketPair => " (N AF_UNIX stream socketpairs: 2N fds)",
        }
    );
    for (n, why) in skipped {
        let _ = writeln!(md, "* N={n}: {why}");
    }
    match &uring_refused {
        Some(why) => {
            let _ = writeln!(md, "* io_uring: {why}; its rows are missing");
        }
        None => {
            let _ = writeln!(
                md,
                "* io_uring: one multishot `IORING_OP_POLL_ADD` per descriptor on raw \
                 syscalls; completions are reaped from the CQ ring in user memory, \
                 `io_uring_enter` is called only to wait when the CQ ring is empty"
            );
        }
    }
    if !skipped.is_empty() || uring_refused.is_some() || mechs.contains(&Mech::Uring) {
        md.push('\n');
    }
    let mut json_cells = vec![];
    let mut charts = vec![];
    let nmax_label = n_last.map_or("N_max".to_owned(), |n| format!("N={n} ÷ N=100"));
    for &a in &cfg.actives {
        let _ = writeln!(md, "#### A = {a} active\n");
        let mut header = "| mechanism |".to_owned();
        let mut rule = "|---|".to_owned();
        for n in &cfg.ns {
            let _ = write!(header, " N={n} |");
            rule.push_str("---|");
        }
        let _ = writeln!(md, "{header} {nmax_label} |\n{rule}---|");
        let mut series = vec![];
        for &m in mechs {
            let mut row = format!("| {} |", m.name(backends));
            let mut points = vec![];
            for &n in &cfg.ns {
                let cell = match get(m, n, a) {
                    Some(s) => {
                        points.push((n as f64, s.median));
                        let mut cell = Json::obj([
                            ("mechanism", Json::from(m.key(backends))),
                            ("n", Json::from(n)),
                            ("a", Json::from(a)),
                            ("us_per_round", s.json()),
                        ]);
                        // Each repetition's block, in the order they ran: two populations
                        // here mean some repetitions took another path (issue 21's ±0.01).
                        if let Some(v) = samples.get(&(m, n, a)) {
                            cell.push(
                                "samples_us_per_round",
                                Json::arr(v.iter().map(|&x| Json::from(x))),
                            );
                        }
                        if let Some(b) = blocks.get(&(m, n, a)) {
                            cell.push(
                                "samples_minor_faults",
                                Json::arr(b.iter().map(|b| Json::from(b.faults))),
                            );
                            cell.push(
                                "samples_preempted",
                                Json::arr(b.iter().map(|b| Json::from(b.preempted))),
                            );
                        }
                        if let Some(r) = paired_ratio(samples, (m, n, a), (Mech::Epoll, n, a)) {
                            cell.push("paired_ratio_over_epoll", r.json());
                        }
                        if m != Mech::Uring
                            && let Some(r) = paired_ratio(samples, (m, n, a), (Mech::Uring, n, a))
                        {
                            cell.push("paired_ratio_over_io_uring", r.json());
                        }
                        if let Some(r) = m
                            .rust_twin()
                            .and_then(|t| paired_ratio(samples, (m, n, a), (t, n, a)))
                        {
                            cell.push("paired_ratio_over_rust", r.json());
                        }
                        json_cells.push(cell);
                        s.cell(2)
                    }
                    None if skipped.contains_key(&n) => "skipped".into(),
                    None if m == Mech::Select => select_skipped
                        .get(&n)
                        .cloned()
                        .unwrap_or_else(|| "n/a".into()),
                    None => "–".into(),
                };
                let _ = write!(row, " {cell} |");
            }
            let flat = match (n_first, n_last) {
                (Some(f), Some(l)) if f != l => ratio_cell(
                    get(m, l, a).map(|s| s.median),
                    get(m, f, a).map(|s| s.median),
                ),
                _ => "–".into(),
            };
            let _ = writeln!(md, "{row} {flat} |");
            if !points.is_empty() {
                series.push(Series {
                    name: m.name(backends),
                    points,
                });
            }
        }
        for &m in mechs {
            if !m.is_kevent() && !matches!(m, Mech::Uring | Mech::Floor) {
                continue;
            }
            let mut row = format!("| {} ÷ epoll |", m.name(backends));
            for &n in &cfg.ns {
                // Each repetition timed one block of each mechanism close together: the
                // median of the per-repetition ratios cancels what drifts between them.
                let r = paired_ratio(samples, (m, n, a), (Mech::Epoll, n, a))
                    .map_or("–".to_owned(), |r| r.ratio_cell());
                let _ = write!(row, " {r} |");
            }
            let _ = writeln!(md, "{row} |");
        }
        for &m in mechs {
            if !m.is_kevent() || !mechs.contains(&Mech::Uring) || m.rust_twin().is_some() {
                continue;
            }
            let mut row = format!("| {} ÷ io_uring |", m.name(backends));
            for &n in &cfg.ns {
                let r = paired_ratio(samples, (m, n, a), (Mech::Uring, n, a))
                    .map_or("–".to_owned(), |r| r.ratio_cell());
                let _ = write!(row, " {r} |");
            }
            let _ = writeln!(md, "{row} |");
        }
        for &m in mechs {
            let Some(twin) = m.rust_twin() else {
                continue;
            };
            let mut row = format!("| {} ÷ {} |", m.name(backends), twin.name(backends));
            for &n in &cfg.ns {
                let r = paired_ratio(samples, (m, n, a), (twin, n, a))
                    .map_or("–".to_owned(), |r| r.ratio_cell());
                let _ = write!(row, " {r} |");
            }
            let _ = writeln!(md, "{row} |");
        }
        md.push('\n');
        charts.push((
            format!("poller-a{a}.svg"),
            LineChart {
                title: format!(
                    "poller: µs per round, A = {a} active ({})",
                    cfg.transport.name()
                ),
                x_label: "N watched descriptors".into(),
                y_label: "µs per round (median)".into(),
                x_log: true,
                y_log: true,
                series,
            }
            .render(),
        ));
    }
    let json = Json::obj([
        ("transport", Json::from(cfg.transport.name())),
        ("reps", Json::from(cfg.reps)),
        ("block_ms", Json::from(cfg.block_ns / 1_000_000)),
        ("ns", Json::arr(cfg.ns.iter().map(|&n| Json::from(n)))),
        (
            "actives",
            Json::arr(cfg.actives.iter().map(|&a| Json::from(a))),
        ),
        (
            "skipped",
            Json::obj(
                skipped
                    .iter()
                    .map(|(n, w)| (n.to_string(), Json::from(w.as_str()))),
            ),
        ),
        ("pinned_cpu", Json::from(machine.nproc > 1)),
        ("io_uring_refused", Json::from(uring_refused.clone())),
        ("cells", Json::Arr(json_cells)),
    ]);
    Section {
        name: "poller",
        title: "Poller: many watched descriptors, few active".into(),
        markdown: md,
        json,
        charts,
        summary: summary(cfg, mechs, backends, samples, &measured, machine.clock),
    }
}

/// The headline rows: per kevent mechanism, the ratios to epoll over every cell, and the
/// flatness N_max ÷ N=100.
fn summary(
    cfg: &Config,
    mechs: &[Mech],
    backends: &[Backend],
    samples: &BTreeMap<(Mech, usize, usize), Vec<f64>>,
    measured: &[usize],
    clock: Clock,
) -> Vec<SummaryRow> {
    let mut rows = vec![];
    for &m in mechs {
        if !m.is_kevent() && !matches!(m, Mech::Uring | Mech::Floor) {
            continue;
        }
        if let Some(twin) = m.rust_twin() {
            rows.extend(c_over_rust(
                cfg, m, twin, backends, samples, measured, clock,
            ));
        }
        let cells: Vec<(usize, usize, Interval)> = measured
            .iter()
            .flat_map(|&n| cfg.actives.iter().map(move |&a| (n, a)))
            .filter_map(|(n, a)| {
                paired_ratio(samples, (m, n, a), (Mech::Epoll, n, a)).map(|i| (n, a, i))
            })
            .collect();
        let Some((wn, wa, worst)) = cells
            .iter()
            .copied()
            .max_by(|x, y| x.2.median.total_cmp(&y.2.median))
        else {
            continue;
        };
        let lo = cells
            .iter()
            .map(|c| c.2.median)
            .fold(f64::INFINITY, f64::min);
        let same = cells.iter().filter(|c| c.2.contains(1.0)).count();
        let all: Vec<Interval> = cells.iter().map(|c| c.2).collect();
        if m.is_kevent() && m.rust_twin().is_none() && mechs.contains(&Mech::Uring) {
            let over: Vec<Interval> = measured
                .iter()
                .flat_map(|&n| cfg.actives.iter().map(move |&a| (n, a)))
                .filter_map(|(n, a)| paired_ratio(samples, (m, n, a), (Mech::Uring, n, a)))
                .collect();
            if !over.is_empty() {
                let (lo, hi) = over.iter().fold((f64::INFINITY, 0f64), |(l, h), x| {
                    (l.min(x.median), h.max(x.median))
                });
                // Issue 21 asks this of the native asynchronous ring only (kevent's ring was
                // the idea io_uring made standard); the other rows stand beside io_uring
                // unjudged.
                let judged = matches!(m, Mech::KeventAsync(b) if backends[b].is_native())
                    && clock == Clock::Instructions;
                rows.push(SummaryRow {
                    what: format!(
                        "poller: {} ÷ io_uring multishot poll, {} per round",
                        m.name(backends),
                        clock.us()
                    ),
                    target: if judged {
                        "≤ 1.00 in every cell (issue 21)".into()
                    } else {
                        "–".into()
                    },
                    result: format!(
                        "medians {lo:.2}–{hi:.2} over {} cells{}",
                        over.len(),
                        if judged {
                            format!(": **{}**", judge_at_most(&over, 1.00))
                        } else {
                            String::new()
                        }
                    ),
                });
            }
        }
        let target = EpollTarget::of(m, backends, clock);
        rows.push(SummaryRow {
            what: format!(
                "poller: {} ÷ epoll, {} per round",
                m.name(backends),
                clock.us()
            ),
            target: match target {
                None if m == Mech::Floor => "– (no mechanism: the floor)".into(),
                None => "– (the anchor)".into(),
                Some(t) => t.label(),
            },
            result: format!(
                "medians {lo:.2}–{:.2} over {} cells (no measurable difference in {same}); \
                 largest {} at N={wn}, A={wa}{}",
                worst.median,
                cells.len(),
                worst.cell(2),
                match target {
                    None => String::new(),
                    Some(t) => t.verdict(&all),
                }
            ),
        });
        if clock == Clock::Instructions {
            rows.extend(issue21_rows(cfg, m, backends, samples, measured));
        }
    }
    if let (Some(&first), Some(&last)) = (measured.first(), measured.last()) {
        let flat: Vec<f64> = mechs
            .iter()
            .filter(|m| {
                matches!(
                    m,
                    Mech::Epoll
                        | Mech::Uring
                        | Mech::KeventGet(_)
                        | Mech::KeventRing(..)
                        | Mech::KeventAsync(_)
                )
            })
            .flat_map(|&m| {
                cfg.actives.iter().filter_map(move |&a| {
                    let med = |n| Summary::of(samples.get(&(m, n, a))?).map(|s| s.median);
                    Some(med(last)? / med(first)?)
                })
            })
            .collect();
        if !flat.is_empty() && first != last {
            let (lo, hi) = flat
                .iter()
                .fold((f64::INFINITY, 0f64), |(l, h), &x| (l.min(x), h.max(x)));
            rows.push(SummaryRow {
                what: format!("poller: N={last} ÷ N={first} (epoll, io_uring and kevent rows)"),
                target: "≤ 1.3".into(),
                result: format!(
                    "{lo:.2}–{hi:.2}: **{}**",
                    if hi <= 1.3 { "met" } else { "missed" }
                ),
            });
        }
    }
    rows
}

/// What a kevent row ÷ epoll must stay under in every cell: issue 21's instruction-time
/// targets for `get_events` (native ≤ 1.00, fallback ≤ 1.03), otherwise the project's
/// standing ≤ 1.10 (the host's targets, which issue 21 keeps). `None` for io_uring, the
/// anchor, and for the floor.
#[derive(Clone, Copy)]
struct EpollTarget {
    at_most: f64,
    /// Where a miss is accounted for, instruction by instruction (issue 21's "done when").
    account: Option<&'static str>,
}

/// The accounts a missed issue-21 target points to.
const NATIVE_ACCOUNT: &str = "docs/bench/account.md";
const FALLBACK_ACCOUNT: &str = "docs/bench/fallback-account.md";

impl EpollTarget {
    fn of(m: Mech, backends: &[Backend], clock: Clock) -> Option<EpollTarget> {
        if matches!(m, Mech::Uring | Mech::Floor) {
            return None;
        }
        let standing = EpollTarget {
            at_most: 1.10,
            account: None,
        };
        Some(match (m, clock) {
            (Mech::KeventGet(b), Clock::Instructions) if backends[b].is_native() => EpollTarget {
                at_most: 1.00,
                account: Some(NATIVE_ACCOUNT),
            },
            (Mech::KeventGet(_), Clock::Instructions) => EpollTarget {
                at_most: 1.03,
                account: Some(FALLBACK_ACCOUNT),
            },
            _ => standing,
        })
    }

    fn label(self) -> String {
        match self.account {
            Some(_) => format!("≤ {:.2} in every cell (issue 21)", self.at_most),
            None => format!("≤ {:.2} in every cell", self.at_most),
        }
    }

    /// `": **met**"`, or the miss with where it is accounted for.
    fn verdict(self, all: &[Interval]) -> String {
        verdict(judge_at_most(all, self.at_most), self.account)
    }
}

/// A judgement, and for a miss the account that says where the instructions go.
fn verdict(judged: &str, account: Option<&str>) -> String {
    match account {
        Some(doc) if judged != "met" => format!(": **{judged}**; accounted in `{doc}`"),
        _ => format!(": **{judged}**"),
    }
}

/// Issue 21's other instruction-time rows for `m`: the asynchronous ring (native) ÷ epoll
/// at the fewest and the most active descriptors (≤ 0.80 and ≤ 1.00), and the fallback's
/// ring with a commit per wait ÷ its own `get_events` (≤ 1.00), with and without its owner's
/// declaration (P65).
fn issue21_rows(
    cfg: &Config,
    m: Mech,
    backends: &[Backend],
    samples: &BTreeMap<(Mech, usize, usize), Vec<f64>>,
    measured: &[usize],
) -> Vec<SummaryRow> {
    let over = |base: Mech, a: usize| -> Vec<Interval> {
        measured
            .iter()
            .filter_map(|&n| paired_ratio(samples, (m, n, a), (base, n, a)))
            .collect()
    };
    let range = |v: &[Interval]| {
        v.iter().fold((f64::INFINITY, 0f64), |(l, h), x| {
            (l.min(x.median), h.max(x.median))
        })
    };
    let mut rows = vec![];
    match m {
        Mech::KeventAsync(b) if backends[b].is_native() => {
            let (Some(&a_lo), Some(&a_hi)) = (cfg.actives.first(), cfg.actives.last()) else {
                return rows;
            };
            for (a, at_most) in [(a_lo, 0.80), (a_hi, 1.00)] {
                let v = over(Mech::Epoll, a);
                if v.is_empty() {
                    continue;
                }
                let (lo, hi) = range(&v);
                rows.push(SummaryRow {
                    what: format!("poller: {} ÷ epoll at A={a}", m.name(backends)),
                    target: format!("≤ {at_most:.2} at every N (issue 21)"),
                    result: format!(
                        "medians {lo:.2}–{hi:.2} over {} cells{}{}",
                        v.len(),
                        verdict(judge_at_most(&v, at_most), Some(NATIVE_ACCOUNT)),
                        floor_note(m, a, at_most, samples, measured)
                    ),
                });
            }
        }
        Mech::KeventRing(b, false) | Mech::KeventRingProved(b) if !backends[b].is_native() => {
            let v: Vec<Interval> = cfg
                .actives
                .iter()
                .flat_map(|&a| over(Mech::KeventGet(b), a))
                .collect();
            if !v.is_empty() {
                let (lo, hi) = range(&v);
                rows.push(SummaryRow {
                    what: format!(
                        "poller: {} ÷ {}",
                        m.name(backends),
                        Mech::KeventGet(b).name(backends)
                    ),
                    target: "≤ 1.00 in every cell (issue 21)".into(),
                    result: format!(
                        "medians {lo:.2}–{hi:.2} over {} cells{}",
                        v.len(),
                        verdict(judge_at_most(&v, 1.00), Some(FALLBACK_ACCOUNT))
                    ),
                });
            }
        }
        _ => {}
    }
    rows
}

/// What the round's floor says about a target for `m` ÷ epoll at `a` active descriptors:
/// the floor ÷ epoll (the round's `write`s and `read`s with no mechanism registered), and
/// `m`'s mechanism part, (round − floor) ÷ epoll's (round − floor), from the medians. A target
/// below the floor is out of reach for any mechanism in this round, one that costs nothing
/// included. Empty when the floor was not measured.
fn floor_note(
    m: Mech,
    a: usize,
    at_most: f64,
    samples: &BTreeMap<(Mech, usize, usize), Vec<f64>>,
    measured: &[usize],
) -> String {
    let med = |m: Mech, n: usize| Summary::of(samples.get(&(m, n, a))?).map(|s| s.median);
    let (mut floor, mut part) = (vec![], vec![]);
    for &n in measured {
        let (Some(f), Some(e), Some(x)) = (med(Mech::Floor, n), med(Mech::Epoll, n), med(m, n))
        else {
            continue;
        };
        floor.push(f / e);
        if e > f {
            part.push((x - f) / (e - f));
        }
    }
    let range = |v: &[f64]| {
        v.iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), &x| {
                (l.min(x), h.max(x))
            })
    };
    if floor.is_empty() {
        return String::new();
    }
    let (flo, fhi) = range(&floor);
    let mut note = format!(
        "; the round's floor (its `write` and `read`, no mechanism) ÷ epoll is {flo:.2}–{fhi:.2}"
    );
    if !part.is_empty() {
        let (plo, phi) = range(&part);
        let _ = write!(
            note,
            ", and this row's mechanism part (round − floor) is {plo:.2}–{phi:.2} of epoll's"
        );
    }
    if at_most < flo {
        let _ = write!(
            note,
            ": the target is below the floor, out of reach for any mechanism in this round"
        );
    }
    note
}

/// The headline row of a C mechanism: C ÷ its Rust twin over every cell (issue 11's target:
/// ≤ 1.05 at every A).
fn c_over_rust(
    cfg: &Config,
    m: Mech,
    twin: Mech,
    backends: &[Backend],
    samples: &BTreeMap<(Mech, usize, usize), Vec<f64>>,
    measured: &[usize],
    clock: Clock,
) -> Option<SummaryRow> {
    let cells: Vec<(usize, usize, Interval)> = measured
        .iter()
        .flat_map(|&n| cfg.actives.iter().map(move |&a| (n, a)))
        .filter_map(|(n, a)| paired_ratio(samples, (m, n, a), (twin, n, a)).map(|i| (n, a, i)))
        .collect();
    let (wn, wa, worst) = cells
        .iter()
        .copied()
        .max_by(|x, y| x.2.median.total_cmp(&y.2.median))?;
    let lo = cells
        .iter()
        .map(|c| c.2.median)
        .fold(f64::INFINITY, f64::min);
    let all: Vec<Interval> = cells.iter().map(|c| c.2).collect();
    Some(SummaryRow {
        what: format!(
            "poller: {} ÷ {}, {} per round",
            m.name(backends),
            twin.name(backends),
            clock.us()
        ),
        target: "≤ 1.05 in every cell".into(),
        result: format!(
            "medians {lo:.2}–{:.2} over {} cells; largest {} at N={wn}, A={wa}: **{}**",
            worst.median,
            cells.len(),
            worst.cell(2),
            judge_at_most(&all, 1.05)
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Samples of `m` at every cell: `per_round` with a small spread, so every ratio has an
    /// interval.
    fn fill(
        samples: &mut BTreeMap<(Mech, usize, usize), Vec<f64>>,
        cfg: &Config,
        m: Mech,
        per_round: f64,
    ) {
        for &n in &cfg.ns {
            for &a in &cfg.actives {
                let v = (0..9)
                    .map(|i| per_round * (1.0 + i as f64 * 1e-4))
                    .collect();
                samples.insert((m, n, a), v);
            }
        }
    }

    fn rows(clock: Clock) -> Vec<SummaryRow> {
        let cfg = Config {
            ns: vec![100, 1000],
            actives: vec![1, 100],
            reps: 9,
            block_ns: 1_000_000,
            transport: Transport::UnixDgram,
        };
        let backends = [Backend::Fallback];
        let mechs = [
            Mech::Epoll,
            Mech::Uring,
            Mech::KeventGet(0),
            Mech::KeventRing(0, false),
        ];
        let mut samples = BTreeMap::new();
        fill(&mut samples, &cfg, Mech::Epoll, 100.0);
        fill(&mut samples, &cfg, Mech::Uring, 95.0);
        fill(&mut samples, &cfg, Mech::KeventGet(0), 104.0);
        fill(&mut samples, &cfg, Mech::KeventRing(0, false), 110.0);
        summary(&cfg, &mechs, &backends, &samples, &cfg.ns, clock)
    }

    fn row<'a>(rows: &'a [SummaryRow], what: &str) -> &'a SummaryRow {
        rows.iter()
            .find(|r| r.what.starts_with(what))
            .unwrap_or_else(|| panic!("no row {what:?} in {:#?}", rows.iter().map(|r| &r.what)))
    }

    #[test]
    fn instruction_time_rows_judge_issue_21_targets_and_point_to_the_account() {
        let rows = rows(Clock::Instructions);
        let get = row(&rows, "poller: kevent get_events (fallback) ÷ epoll");
        assert_eq!(get.target, "≤ 1.03 in every cell (issue 21)");
        assert!(
            get.result
                .ends_with("**missed**; accounted in `docs/bench/fallback-account.md`"),
            "{}",
            get.result
        );
        let ring = row(
            &rows,
            "poller: kevent ring (fallback) ÷ kevent get_events (fallback)",
        );
        assert_eq!(ring.target, "≤ 1.00 in every cell (issue 21)");
        assert!(
            ring.result
                .contains("medians 1.06–1.06 over 4 cells: **missed**")
        );
        // io_uring is issue 21's bar for the asynchronous ring only.
        let beside = row(&rows, "poller: kevent get_events (fallback) ÷ io_uring");
        assert_eq!(beside.target, "–");
        assert!(!beside.result.contains("**"), "{}", beside.result);
    }

    #[test]
    fn the_floor_says_when_a_target_is_below_any_mechanism() {
        let cfg = Config {
            ns: vec![100, 1000],
            actives: vec![1],
            reps: 9,
            block_ns: 1_000_000,
            transport: Transport::UnixDgram,
        };
        let mut samples = BTreeMap::new();
        fill(&mut samples, &cfg, Mech::Epoll, 100.0);
        fill(&mut samples, &cfg, Mech::Floor, 85.0);
        fill(&mut samples, &cfg, Mech::KeventAsync(0), 88.0);
        let note = floor_note(Mech::KeventAsync(0), 1, 0.80, &samples, &cfg.ns);
        assert!(note.contains("÷ epoll is 0.85–0.85"), "{note}");
        // (88 − 85) ÷ (100 − 85)
        assert!(
            note.contains("mechanism part (round − floor) is 0.20–0.20"),
            "{note}"
        );
        assert!(
            note.ends_with("out of reach for any mechanism in this round"),
            "{note}"
        );
        let within = floor_note(Mech::KeventAsync(0), 1, 0.90, &samples, &cfg.ns);
        assert!(!within.contains("out of reach"), "{within}");
        assert_eq!(
            floor_note(Mech::KeventAsync(0), 1, 0.80, &BTreeMap::new(), &cfg.ns),
            ""
        );
    }

    #[test]
    fn time_rows_keep_the_standing_targets() {
        let rows = rows(Clock::Time);
        let get = row(&rows, "poller: kevent get_events (fallback) ÷ epoll");
        assert_eq!(get.target, "≤ 1.10 in every cell");
        assert!(get.result.ends_with(": **met**"), "{}", get.result);
        assert!(!rows.iter().any(|r| r.what.contains("÷ kevent get_events")));
    }
}
