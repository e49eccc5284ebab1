//! Memory per registered timer: RSS before and after adding N periodic TIMER kevents to one
//! queue (distinct intervals, since the interval is the id).
//!
//! `cargo run --release -p kevent-fallback --example timer_memory [n]`

use kevent_fallback as kf;
use kevent_sys::*;

fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

fn main() {
    let n: u32 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    // SAFETY: no ring.
    let q = unsafe { kf::kevent_init(std::ptr::null_mut(), 0, 0) }.unwrap();
    let mut batch: Vec<ukevent> = Vec::with_capacity(1024);
    let before = rss_bytes();
    for i in 0..n {
        // 60 s plus i ns: none fires during the measurement.
        batch.push(ukevent::new(
            KEVENT_TIMER,
            kevent_id::from_raw([60, i]),
            KEVENT_TIMER_FIRED,
            0,
        ));
        if batch.len() == 1024 || i + 1 == n {
            assert_eq!(kf::kevent_ctl(q, KEVENT_CTL_ADD, &mut batch), Ok(0));
            batch.clear();
        }
    }
    let after = rss_bytes();
    println!(
        "{n} timers: RSS +{:.1} MiB, {:.1} bytes per timer",
        (after - before) as f64 / (1 << 20) as f64,
        (after - before) as f64 / n as f64
    );
}
