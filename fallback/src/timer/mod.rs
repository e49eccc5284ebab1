//! TIMER kevents: one timerfd per queue, driven by a userspace [`TimerHeap`], and the clock
//! and time conversions the engine needs (spec sections 3 and 5).
//!
//! The engine creates the queue's timerfd (`CLOCK_MONOTONIC`) and arms it with
//! [`timerfd_arm_value`]`(heap.next_deadline())` and `TFD_TIMER_ABSTIME`; no timer ever owns
//! a kernel object, so a queue holds a million timers within the default fd limit (issue 3).

pub mod heap;

pub use heap::TimerHeap;

/// Nanoseconds per second.
pub const NSEC_PER_SEC: u64 = 1_000_000_000;

/// Reads `clock` in nanoseconds, saturated to `0..=u64::MAX`.
pub fn clock_now_ns(clock: libc::clockid_t) -> u64 {
    timespec_to_ns_saturating(&crate::sys::clock_gettime(clock))
}

/// `clock_gettime(CLOCK_MONOTONIC)` in nanoseconds: the clock of TIMER kevents, relative
/// timeouts and [`TimerHeap`] deadlines.
pub fn monotonic_now_ns() -> u64 {
    clock_now_ns(libc::CLOCK_MONOTONIC)
}

/// `clock_gettime(CLOCK_REALTIME)` in nanoseconds since the epoch (0 for times before it): the
/// clock of `KEVENT_FLAGS_ABSTIME` timeouts.
pub fn realtime_now_ns() -> u64 {
    clock_now_ns(libc::CLOCK_REALTIME)
}

/// A valid `timespec` (`tv_sec >= 0`, `0 <= tv_nsec < 1e9`, the spec's timeout rule) in
/// nanoseconds, saturating at `u64::MAX` (about 584 years, so D6's "very large `tv_sec`" stays
/// "forever"); `None` for an invalid one, which the calls answer with `EINVAL`.
pub fn timespec_to_ns(ts: &libc::timespec) -> Option<u64> {
    let sec = u64::try_from(ts.tv_sec).ok()?;
    let nsec = u64::try_from(ts.tv_nsec)
        .ok()
        .filter(|&n| n < NSEC_PER_SEC)?;
    Some(sec.saturating_mul(NSEC_PER_SEC).saturating_add(nsec))
}

/// Like [`timespec_to_ns`] but total: negative parts count as 0 and `tv_nsec` is clamped to
/// `0..1e9`. For values that come from the kernel (clocks), never for caller input.
pub fn timespec_to_ns_saturating(ts: &libc::timespec) -> u64 {
    let sec = u64::try_from(ts.tv_sec).unwrap_or(0);
    let nsec = u64::try_from(ts.tv_nsec).unwrap_or(0).min(NSEC_PER_SEC - 1);
    sec.saturating_mul(NSEC_PER_SEC).saturating_add(nsec)
}

/// Nanoseconds as a `timespec` (`tv_sec` saturates at `time_t::MAX` where `time_t` is 32-bit).
pub fn ns_to_timespec(ns: u64) -> libc::timespec {
    libc::timespec {
        tv_sec: libc::time_t::try_from(ns / NSEC_PER_SEC).unwrap_or(libc::time_t::MAX),
        // < 1e9 always fits a c_long.
        tv_nsec: (ns % NSEC_PER_SEC) as libc::c_long,
    }
}

/// The interval of a TIMER kevent from its id (`raw[0]` = seconds, `raw[1]` = nanoseconds,
/// spec section 5), in nanoseconds; `None` when both are zero or `nsec >= 1e9` (the entry is
/// then rejected with `EINVAL`). Never overflows: `u32::MAX` seconds is below `u64::MAX` ns.
pub fn interval_ns(sec: u32, nsec: u32) -> Option<u64> {
    let nsec = u64::from(nsec);
    if nsec >= NSEC_PER_SEC {
        return None;
    }
    let ns = u64::from(sec) * NSEC_PER_SEC + nsec;
    (ns != 0).then_some(ns)
}

/// `ret_data[0]` of a TIMER delivery: `CLOCK_MONOTONIC` milliseconds at the expiry, low 32 bits
/// (spec section 5).
pub fn monotonic_ms_low32(ns: u64) -> u32 {
    (ns / 1_000_000) as u32
}

/// Catch-up of a periodic timer whose `deadline` has passed (`now_ns >= deadline`), for D8:
/// returns `(expirations, next_deadline)`, where `expirations >= 1` counts every period that
/// ended in `deadline..=now_ns` and `next_deadline` is the first later multiple of the period
/// (saturating at `u64::MAX`, i.e. never). Keeping the original phase means a late wake-up
/// does not make the timer drift.
///
/// If `now_ns < deadline` the timer has not expired: returns `(0, deadline)`.
///
/// # Panics
///
/// If `interval_ns == 0` (an interval always comes from [`interval_ns`]).
pub fn periodic_catch_up(deadline: u64, interval_ns: u64, now_ns: u64) -> (u64, u64) {
    assert!(interval_ns != 0, "periodic timer with a zero interval");
    if now_ns < deadline {
        return (0, deadline);
    }
    let expirations = (now_ns - deadline) / interval_ns + 1;
    let next = deadline.saturating_add(expirations.saturating_mul(interval_ns));
    (expirations, next)
}

/// The `itimerspec` that arms the queue's timerfd (with `TFD_TIMER_ABSTIME`) at the absolute
/// `CLOCK_MONOTONIC` deadline `deadline_ns`, one-shot (`it_interval` zero; the engine re-arms
/// after each expiry from [`TimerHeap::next_deadline`]).
///
/// An all-zero `it_value` would *disarm* a timerfd, so deadline 0 (long past) becomes 1 ns,
/// which is also past and fires at once.
pub fn timerfd_arm_value(deadline_ns: u64) -> libc::itimerspec {
    libc::itimerspec {
        it_interval: libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        },
        it_value: ns_to_timespec(deadline_ns.max(1)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(sec: i64, nsec: i64) -> libc::timespec {
        libc::timespec {
            tv_sec: sec as libc::time_t,
            tv_nsec: nsec as libc::c_long,
        }
    }

    #[test]
    fn clocks_advance_and_are_plausible() {
        let a = monotonic_now_ns();
        let b = monotonic_now_ns();
        assert!(b >= a, "CLOCK_MONOTONIC went backwards");
        assert!(a > 0);
        // After 2020-01-01 and before 2200.
        let r = realtime_now_ns();
        assert!(r > 1_577_836_800 * NSEC_PER_SEC && r < 7_258_118_400 * NSEC_PER_SEC);
    }

    #[test]
    fn timespec_to_ns_validates_and_saturates() {
        assert_eq!(timespec_to_ns(&ts(0, 0)), Some(0));
        assert_eq!(timespec_to_ns(&ts(1, 5)), Some(1_000_000_005));
        assert_eq!(timespec_to_ns(&ts(0, 999_999_999)), Some(999_999_999));
        assert_eq!(timespec_to_ns(&ts(0, 1_000_000_000)), None);
        assert_eq!(timespec_to_ns(&ts(0, -1)), None);
        assert_eq!(timespec_to_ns(&ts(-1, 0)), None);
        // D6: "a very large tv_sec" saturates instead of wrapping.
        assert_eq!(timespec_to_ns(&ts(i64::MAX, 999_999_999)), Some(u64::MAX));
        assert_eq!(
            timespec_to_ns(&ts(18_446_744_073, 709_551_615)),
            Some(u64::MAX)
        );
        assert_eq!(
            timespec_to_ns(&ts(18_446_744_073, 709_551_616)),
            Some(u64::MAX)
        );
        assert_eq!(
            timespec_to_ns(&ts(18_446_744_073, 709_551_614)),
            Some(u64::MAX - 1)
        );
    }

    #[test]
    fn timespec_to_ns_saturating_is_total() {
        assert_eq!(timespec_to_ns_saturating(&ts(-5, -5)), 0);
        assert_eq!(
            timespec_to_ns_saturating(&ts(2, 2_000_000_000)),
            2_999_999_999
        );
        assert_eq!(timespec_to_ns_saturating(&ts(i64::MAX, 0)), u64::MAX);
    }

    #[test]
    fn ns_to_timespec_round_trips() {
        for ns in [0, 1, 999_999_999, 1_000_000_000, 123_456_789_012, u64::MAX] {
            let t = ns_to_timespec(ns);
            assert!(t.tv_nsec >= 0 && t.tv_nsec < 1_000_000_000);
            assert_eq!(timespec_to_ns(&t), Some(ns), "{ns}");
        }
    }

    #[test]
    fn interval_from_timer_id() {
        assert_eq!(interval_ns(0, 0), None, "zero interval");
        assert_eq!(interval_ns(0, 1_000_000_000), None, "nsec >= 1e9");
        assert_eq!(interval_ns(5, u32::MAX), None);
        assert_eq!(interval_ns(0, 1), Some(1));
        assert_eq!(interval_ns(2, 500), Some(2_000_000_500));
        assert_eq!(
            interval_ns(u32::MAX, 999_999_999),
            Some(4_294_967_295_999_999_999)
        );
    }

    #[test]
    fn ms_low32_wraps() {
        assert_eq!(monotonic_ms_low32(1_999_999), 1);
        assert_eq!(monotonic_ms_low32((1u64 << 32) * 1_000_000 + 7_000_000), 7);
    }

    #[test]
    fn d8_periodic_catch_up_counts_expirations() {
        // Not yet expired.
        assert_eq!(periodic_catch_up(100, 10, 99), (0, 100));
        // Exactly at the deadline: one expiration, next period.
        assert_eq!(periodic_catch_up(100, 10, 100), (1, 110));
        assert_eq!(periodic_catch_up(100, 10, 109), (1, 110));
        // Three periods ended in 100..=125 (100, 110, 120); phase kept.
        assert_eq!(periodic_catch_up(100, 10, 125), (3, 130));
        assert_eq!(periodic_catch_up(100, 10, 130), (4, 140));
        // Saturation: the next deadline becomes "never".
        assert_eq!(periodic_catch_up(u64::MAX - 5, 10, u64::MAX), (1, u64::MAX));
    }

    #[test]
    fn timerfd_arm_value_never_disarms() {
        let v = timerfd_arm_value(0);
        assert_eq!((v.it_value.tv_sec, v.it_value.tv_nsec), (0, 1));
        let v = timerfd_arm_value(3_000_000_004);
        assert_eq!((v.it_value.tv_sec, v.it_value.tv_nsec), (3, 4));
        assert_eq!((v.it_interval.tv_sec, v.it_interval.tv_nsec), (0, 0));
    }
}
