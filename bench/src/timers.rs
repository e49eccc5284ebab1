//! The timer benchmark (issue 6 item 4): 10k, 100k and 1M periodic TIMER kevents in one
//! queue. Memory per timer, CPU per expiry, and lateness.
//!
//! A TIMER's id is its interval and `(type, id)` is the key, so timer `i` gets the interval
//! `base + i` ns. `base` is chosen so that the queue delivers about 100,000 expiries per
//! second whatever n is (`base = n / 100000` s), and the timers are added in chunks of 1000
//! (each timer by its own ADD call) spread evenly over the first period, so that the expiries are spread evenly too rather
//! than all due at once.
//!
//! * **memory per timer**: measured in a fresh child process (`kevent-bench timer-memory`),
//!   so that memory freed by earlier benchmarks cannot hide the queue's growth: the rise of
//!   the resident set (`/proc/self/statm`) from before the queue is created to after n
//!   timers are added, divided by n;
//! * **CPU per expiry**: process CPU time (user + system) during the measured window, divided
//!   by the expirations delivered (`ret_data[1]` summed, D8);
//! * **lateness**: for each delivery, the time `get_events` returned minus the deadline of
//!   the oldest expiry it reports. The engine reads the clock inside the ADD call, so each
//!   timer is added by a call of its own and its deadlines are bracketed by the times before
//!   and after that call, plus k intervals: the pessimistic figure uses the time before, the
//!   optimistic one the time after. They differ by one call (about a microsecond);
//! * **the longest ADD** (issue 14 item 4: no call may stall because an engine table grew):
//!   each ADD call is timed by the wall clock and by the thread's own CPU time
//!   (`CLOCK_THREAD_CPUTIME_ID`), which does not advance while other processes hold the CPU,
//!   so a call preempted on a busy machine is told apart from a call that did a lot of work.

use std::fmt::Write as _;

use kevent_backend::Backend;
use kevent_sys::{KEVENT_CTL_ADD, KEVENT_TIMER, KEVENT_TIMER_FIRED, kevent_id, ukevent};

use crate::json::Json;
use crate::machine::Machine;
use crate::os;
use crate::rawqueue::{RawQueue, timeout_ms};
use crate::stats::percentile_sorted;
use crate::{Opts, Section, SummaryRow};

const RATE: u64 = 100_000;
const CHUNK: usize = 1000;

/// What one run measured.
#[derive(Clone, Debug, Default)]
struct TimerRun {
    n: usize,
    base_ns: u64,
    window_s: f64,
    bytes_per_timer: f64,
    rss_delta: u64,
    cpu_ns_per_expiry: f64,
    expirations: u64,
    /// Deliveries that reported more than one expiration (a missed period).
    coalesced: u64,
    /// Sorted lateness in microseconds, one per delivery (pessimistic: from the time before
    /// the ADD call).
    lateness_us: Vec<u32>,
    /// The same from the time after the ADD call (optimistic), sorted.
    lateness_opt_us: Vec<u32>,
    /// Longest ADD call (wall clock), µs.
    max_add_us: f64,
    /// Longest ADD call in the thread's own CPU time (what the engine did, without the time
    /// other processes took the CPU), µs.
    max_add_cpu_us: f64,
    /// ADD calls that took more than 1 ms of wall time.
    adds_over_1ms: u64,
    /// ... of which more than half of the wall time was not this thread's CPU time
    /// (preempted by other processes).
    adds_over_1ms_preempted: u64,
    /// How long the consumer waited on its CPU's run queue during the window (other tasks
    /// held the CPU), ms; `None` without schedstat.
    run_queue_wait_ms: Option<f64>,
    /// Involuntary context switches of the consumer during the window.
    involuntary_switches: u64,
    add_ns_per_timer: f64,
}

/// The measured window: `periods` base periods, clamped to `min_ns..=max_ns`.
#[derive(Clone, Copy, Debug)]
struct Window {
    periods: u64,
    min_ns: u64,
    max_ns: u64,
}

fn run_one(b: Backend, n: usize, w: Window) -> TimerRun {
    let base_ns = (n as u64 * 1_000_000_000 / RATE).max(1_000_000);
    let chunks = n.div_ceil(CHUNK);
    let window_ns = (base_ns * w.periods).clamp(w.min_ns, w.max_ns);
    // Bookkeeping, allocated and touched before the baseline.
    let mut delivered = vec![0u32; n];
    let mut added_at = vec![0u64; n];
    let mut add_ns = vec![0u32; n];
    let expected = (n as u64 * (window_ns / base_ns + 2) + 1024) as usize;
    let mut lateness_us: Vec<u32> = vec![0; expected];
    let mut lateness_opt_us: Vec<u32> = vec![0; expected];
    lateness_us.clear();
    lateness_opt_us.clear();
    let mut events = vec![ukevent::default(); 1024];
    let q = RawQueue::new(b, 0).expect("kevent_init");
    let t0 = os::now_ns();
    let step = base_ns / chunks as u64;
    let mut max_add = 0u64;
    let mut max_add_cpu = 0u64;
    let (mut over, mut over_preempted) = (0u64, 0u64);
    let mut add_total = 0u64;
    for c in 0..chunks {
        os::sleep_until(t0 + step * c as u64);
        for i in c * CHUNK..((c + 1) * CHUNK).min(n) {
            let iv = base_ns + i as u64;
            let mut e = [ukevent::new(
                KEVENT_TIMER,
                kevent_id::from_raw([(iv / 1_000_000_000) as u32, (iv % 1_000_000_000) as u32]),
                KEVENT_TIMER_FIRED,
                0,
            )];
            e[0].set_cookie(i as u64);
            let cpu_before = os::thread_cpu_ns();
            let before = os::now_ns();
            assert_eq!(q.ctl(KEVENT_CTL_ADD, &mut e), Ok(0), "ADD timer");
            let d = os::now_ns() - before;
            let cpu = os::thread_cpu_ns() - cpu_before;
            added_at[i] = before;
            add_ns[i] = d.min(u64::from(u32::MAX)) as u32;
            max_add = max_add.max(d);
            max_add_cpu = max_add_cpu.max(cpu);
            if d > 1_000_000 {
                over += 1;
                over_preempted += u64::from(cpu < d / 2);
            }
            add_total += d;
        }
    }
    // The measured window starts when the first chunk's timers first expire.
    let start = added_at[0] + base_ns;
    let end = start + window_ns;
    let (mut expirations, mut coalesced) = (0u64, 0u64);
    let mut cpu0 = None;
    let mut sched0 = None;
    loop {
        let now = os::now_ns();
        if now >= end {
            break;
        }
        let ms = (end - now).div_ceil(1_000_000);
        let got = q
            .get_events(1, &mut events, &timeout_ms(ms))
            .expect("get_events") as usize;
        let now = os::now_ns();
        if cpu0.is_none() {
            // CPU time is counted from the first delivery, when the expiries have begun.
            cpu0 = Some(os::cpu_ns());
            sched0 = Some((os::thread_run_delay_ns(), os::thread_involuntary_switches()));
        }
        for e in &events[..got] {
            let i = e.cookie() as usize;
            let iv = base_ns + i as u64;
            let k = u64::from(delivered[i]) + 1;
            let deadline = added_at[i] + k * iv;
            let us = |late: u64| (late / 1000).min(u64::from(u32::MAX)) as u32;
            lateness_us.push(us(now.saturating_sub(deadline)));
            lateness_opt_us.push(us(now.saturating_sub(deadline + u64::from(add_ns[i]))));
            let exp = e.ret_data[1].max(1);
            delivered[i] += exp;
            expirations += u64::from(exp);
            coalesced += u64::from(exp > 1);
        }
    }
    let cpu = os::cpu_ns() - cpu0.unwrap_or_else(os::cpu_ns);
    let (delay0, switches0) = sched0.unwrap_or((None, 0));
    let run_queue_wait_ms = match (delay0, os::thread_run_delay_ns()) {
        (Some(a), Some(b)) => Some(b.saturating_sub(a) as f64 / 1e6),
        _ => None,
    };
    let involuntary_switches = os::thread_involuntary_switches().saturating_sub(switches0);
    drop(q);
    lateness_us.sort_unstable();
    lateness_opt_us.sort_unstable();
    TimerRun {
        n,
        base_ns,
        window_s: window_ns as f64 / 1e9,
        bytes_per_timer: f64::NAN,
        rss_delta: 0,
        cpu_ns_per_expiry: cpu as f64 / expirations.max(1) as f64,
        expirations,
        coalesced,
        lateness_us,
        lateness_opt_us,
        max_add_us: max_add as f64 / 1e3,
        max_add_cpu_us: max_add_cpu as f64 / 1e3,
        adds_over_1ms: over,
        adds_over_1ms_preempted: over_preempted,
        run_queue_wait_ms,
        involuntary_switches,
        add_ns_per_timer: add_total as f64 / n as f64,
    }
}

/// RSS growth of a fresh process that creates a queue and adds `n` timers (none expires
/// during the measurement): the hidden `timer-memory BACKEND N` subcommand prints it.
pub fn memory_child(args: &[String]) -> std::io::Result<()> {
    let bad = || std::io::Error::other("usage: timer-memory fallback|native N");
    let [backend, n] = args else {
        return Err(bad());
    };
    let b = match backend.as_str() {
        "native" => Backend::native().map_err(std::io::Error::other)?,
        _ => Backend::fallback(),
    };
    let n: u32 = n.parse().map_err(|_| bad())?;
    let mut batch: Vec<ukevent> = Vec::with_capacity(CHUNK);
    let before = os::rss_bytes();
    let q = RawQueue::new(b, 0).map_err(std::io::Error::other)?;
    for i in 0..n {
        // 1000 s + i ns: distinct keys, and none expires while this runs.
        batch.push(ukevent::new(
            KEVENT_TIMER,
            kevent_id::from_raw([1000, i]),
            KEVENT_TIMER_FIRED,
            0,
        ));
        if batch.len() == CHUNK || i + 1 == n {
            q.ctl(KEVENT_CTL_ADD, &mut batch)
                .map_err(std::io::Error::other)?;
            batch.clear();
        }
    }
    let after = os::rss_bytes();
    println!("{}", after.saturating_sub(before));
    drop(q);
    Ok(())
}

/// Runs `timer-memory` in a child process; the RSS growth in bytes.
fn memory_in_child(b: Backend, n: usize) -> Option<u64> {
    let out = std::process::Command::new(std::env::current_exe().ok()?)
        .args(["timer-memory", b.as_str(), &n.to_string()])
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    String::from_utf8_lossy(&out.stdout).trim().parse().ok()
}

/// Runs the timer benchmark.
pub fn run(opts: &Opts, machine: &Machine) -> Section {
    let sizes = [10_000usize, 100_000, 1_000_000];
    // Quick: a 2 s window whatever n (at 1M timers the first 2 s of a 10 s period, which
    // still runs at 100,000 expiries/s); full: three base periods, at least 3 s.
    let window = if opts.quick {
        Window {
            periods: 1,
            min_ns: 2_000_000_000,
            max_ns: 2_000_000_000,
        }
    } else {
        Window {
            periods: 3,
            min_ns: 3_000_000_000,
            max_ns: u64::MAX,
        }
    };
    let scheduling = if os::is_fifo() {
        "SCHED_FIFO priority 1 (`--rt`)"
    } else {
        "normal (SCHED_OTHER)"
    };
    let mut runs = vec![];
    for &b in &machine.backends {
        for &n in &sizes {
            let mut r = run_one(b, n, window);
            if let Some(bytes) = memory_in_child(b, n) {
                r.rss_delta = bytes;
                r.bytes_per_timer = bytes as f64 / n as f64;
            }
            eprintln!(
                "timers: {} n={n}: {} expirations, p99 {} µs",
                b.as_str(),
                r.expirations,
                percentile_sorted(&r.lateness_us, 0.99).unwrap_or(0)
            );
            runs.push((b, r));
        }
    }
    let mut md = format!(
        "Scheduling of the consumer thread: {scheduling}. Periodic TIMER kevents in one queue; timer i has the interval base + i ns, with base \
         = n ÷ {RATE} s so that every row delivers about {RATE} expiries/s; timers added in \
         chunks of {CHUNK} spread over the first period. Window: {} after the first \
         expiry. Lateness = when `get_events` returned − the deadline of the oldest \
         expiry it reported; each timer is added by its own ADD call, and its deadlines are \
         taken from the time before that call (pessimistic; `max (opt.)` takes them from the \
         time after the call instead: the two differ only for the few calls that grew the \
         engine's tables). Memory = RSS rise of a fresh child process (`kevent-bench \
         timer-memory`) over creating the queue and adding the n timers, ÷ n. CPU = process \
         CPU time in the window ÷ expirations. Longest ADD: the longest single `kevent_ctl(ADD)` \
         by the wall clock and by the thread's own CPU time (`CLOCK_THREAD_CPUTIME_ID`: what \
         the call itself did, page faults included, without the time other processes held \
         the CPU); `> 1 ms` counts the ADD calls above 1 ms of wall time and, of those, the \
         ones that spent less than half of it on the CPU (preempted).\n\n\
         | backend | timers | base period | expirations | expirations/s | bytes/timer | CPU ns/expiry | lateness p50 | p99 | max | max (opt.) | coalesced deliveries | ADD ns/timer | longest ADD: wall / CPU | ADDs > 1 ms (preempted) |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
        match (window.periods, window.max_ns) {
            (_, u64::MAX) => format!(
                "{} base periods (at least {} s)",
                window.periods,
                window.min_ns / 1_000_000_000
            ),
            _ => format!("{} s", window.max_ns / 1_000_000_000),
        },
    );
    let mut json_runs = vec![];
    for (b, r) in &runs {
        let p = |q: f64| percentile_sorted(&r.lateness_us, q).unwrap_or(0);
        let ms = |us: u32| format!("{:.3} ms", f64::from(us) / 1e3);
        let _ = writeln!(
            md,
            "| {} | {} | {:.2} s | {} | {:.0} | {} | {:.0} | {} | {} | {} | {} | {} | {:.0} | {:.0} µs / {:.0} µs | {} ({}) | {} ({}) |",
            b.as_str(),
            r.n,
            r.base_ns as f64 / 1e9,
            r.expirations,
            r.expirations as f64 / r.window_s,
            if r.bytes_per_timer.is_finite() {
                format!("{:.1}", r.bytes_per_timer)
            } else {
                "–".to_owned()
            },
            r.cpu_ns_per_expiry,
            ms(p(0.5)),
            ms(p(0.99)),
            ms(p(1.0)),
            ms(percentile_sorted(&r.lateness_opt_us, 1.0).unwrap_or(0)),
            r.coalesced,
            r.add_ns_per_timer,
            r.max_add_us,
            r.max_add_cpu_us,
            r.adds_over_1ms,
            r.adds_over_1ms_preempted,
            r.run_queue_wait_ms
                .map_or("–".to_owned(), |ms| format!("{ms:.0} ms")),
            r.involuntary_switches,
        );
        json_runs.push(Json::obj([
            ("backend", Json::from(b.as_str())),
            ("timers", Json::from(r.n)),
            ("base_period_ns", Json::from(r.base_ns)),
            ("window_s", Json::from(r.window_s)),
            ("expirations", Json::from(r.expirations)),
            ("deliveries", Json::from(r.lateness_us.len())),
            ("coalesced_deliveries", Json::from(r.coalesced)),
            ("rss_delta_bytes", Json::from(r.rss_delta)),
            ("bytes_per_timer", Json::from(r.bytes_per_timer)),
            ("cpu_ns_per_expiry", Json::from(r.cpu_ns_per_expiry)),
            ("lateness_us_p50", Json::from(p(0.5))),
            ("lateness_us_p99", Json::from(p(0.99))),
            ("lateness_us_max", Json::from(p(1.0))),
            (
                "lateness_us_p99_optimistic",
                Json::from(percentile_sorted(&r.lateness_opt_us, 0.99).unwrap_or(0)),
            ),
            (
                "lateness_us_max_optimistic",
                Json::from(percentile_sorted(&r.lateness_opt_us, 1.0).unwrap_or(0)),
            ),
            ("add_ns_per_timer", Json::from(r.add_ns_per_timer)),
            ("longest_add_call_us", Json::from(r.max_add_us)),
            ("longest_add_call_cpu_us", Json::from(r.max_add_cpu_us)),
            ("add_calls_over_1ms", Json::from(r.adds_over_1ms)),
            (
                "add_calls_over_1ms_preempted",
                Json::from(r.adds_over_1ms_preempted),
            ),
            (
                "consumer_run_queue_wait_ms",
                Json::from(r.run_queue_wait_ms),
            ),
            (
                "consumer_involuntary_switches",
                Json::from(r.involuntary_switches),
            ),
            ("add_calls", Json::from("one timer per kevent_ctl(ADD)")),
        ]));
    }
    md.push('\n');
    let mut summary = vec![];
    if let Some((_, r)) = runs
        .iter()
        .rev()
        .find(|(b, r)| r.n == 1_000_000 && *b == runs[0].0)
    {
        let p = |q: f64| f64::from(percentile_sorted(&r.lateness_us, q).unwrap_or(0)) / 1e3;
        let verdict = |ok: bool| if ok { "met" } else { "missed" };
        summary.push(SummaryRow {
            what: format!("timers: 1M in one queue ({scheduling})"),
            target: "longest ADD ≤ 1 ms; lateness p99 ≤ 2 ms, max ≤ 5 ms; ≤ 128 B/timer".into(),
            result: format!(
                "longest ADD {:.0} µs CPU ({:.0} µs wall; {} ADDs > 1 ms, {} of them \
                 preempted): **{}**; lateness p99 {:.3} ms, max {:.3} ms: **{}** (the consumer \
                 waited {} on the run queue, preempted {} times); {:.1} B/timer: **{}**",
                r.max_add_cpu_us,
                r.max_add_us,
                r.adds_over_1ms,
                r.adds_over_1ms_preempted,
                verdict(r.max_add_cpu_us <= 1000.0),
                p(0.99),
                p(1.0),
                verdict(p(0.99) <= 2.0 && p(1.0) <= 5.0),
                r.run_queue_wait_ms
                    .map_or("an unknown time".to_owned(), |ms| format!("{ms:.0} ms")),
                r.involuntary_switches,
                r.bytes_per_timer,
                verdict(r.bytes_per_timer <= 128.0),
            ),
        });
    }
    Section {
        name: "timers",
        title: "Timers: many periodic timers in one queue".into(),
        markdown: md,
        json: Json::obj([
            ("scheduling", Json::from(scheduling)),
            ("expiries_per_second_target", Json::from(RATE)),
            ("runs", Json::Arr(json_runs)),
        ]),
        charts: vec![],
        summary,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_small_run_delivers_on_time() {
        // 200 timers with a 1 ms base period for 50 ms: about 50 expiries each.
        let r = run_one(
            Backend::fallback(),
            200,
            Window {
                periods: 50,
                min_ns: 0,
                max_ns: u64::MAX,
            },
        );
        assert!(r.expirations > 200 * 30, "{}", r.expirations);
        assert!(!r.lateness_us.is_empty());
        assert!(r.cpu_ns_per_expiry > 0.0);
        assert!(r.max_add_us > 0.0 && r.max_add_cpu_us > 0.0);
        assert!(r.adds_over_1ms_preempted <= r.adds_over_1ms);
        assert!(memory_child(&["fallback".into(), "2000".into()]).is_ok());
        assert!(memory_child(&["fallback".into()]).is_err());
    }
}
