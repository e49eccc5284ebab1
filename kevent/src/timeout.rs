//! [`Timeout`]: how long a wait may block.
//!
//! The ABI takes a `struct timespec`: relative on CLOCK_MONOTONIC, or an absolute
//! CLOCK_REALTIME time with `KEVENT_FLAGS_ABSTIME`; `{0, 0}` never blocks; there is no
//! "infinite" value, so "until an event" is a very large `tv_sec` (**D6**).

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use kevent_sys::KEVENT_FLAGS_ABSTIME;

/// The `tv_sec` that means "until an event" (**D6**), the project's one value
/// ([`kevent_sys::FOREVER_SECS`]): half of `time_t::MAX`, so that adding it to any clock
/// reading cannot overflow (about 146 billion years).
pub use kevent_sys::FOREVER_SECS;

/// How long a wait may block.
///
/// * [`Timeout::NOW`]: do not block (`{0, 0}`); return what is ready.
/// * [`Timeout::FOREVER`]: until an event or a wake-up (**D6**).
/// * A [`Duration`] (`Timeout::from(d)`, or [`Timeout::after`]): relative, on
///   CLOCK_MONOTONIC. The timespec keeps every nanosecond: a sub-millisecond timeout is never
///   rounded down to "do not block" (the rounding trap of millisecond APIs).
/// * A [`SystemTime`] ([`Timeout::at`]): absolute, on CLOCK_REALTIME
///   (`KEVENT_FLAGS_ABSTIME`); a time in the past does not block.
/// * An [`Instant`] ([`Timeout::until`], `Timeout::from(instant)`): a deadline on
///   CLOCK_MONOTONIC, passed as the time left when the wait starts (a deadline already
///   passed does not block). A loop that waits for one deadline keeps passing the same
///   `Instant`.
///
/// `Option<Duration>` converts too: `None` is [`Timeout::FOREVER`], as in mio.
///
/// ```
/// use std::time::Duration;
/// use kevent::Timeout;
/// let t: Timeout = Duration::from_micros(250).into();
/// assert_eq!(t.as_timespec().0.tv_nsec, 250_000);
/// assert_eq!(Timeout::from(None::<Duration>), Timeout::FOREVER);
/// assert!(Timeout::NOW.is_now());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Timeout(Repr);

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Repr {
    Relative(Duration),
    Absolute(SystemTime),
    Deadline(Instant),
    Forever,
}

impl Timeout {
    /// Do not block: `{0, 0}`.
    pub const NOW: Timeout = Timeout(Repr::Relative(Duration::ZERO));

    /// Until an event or a wake-up (**D6**: `tv_sec` = [`FOREVER_SECS`]).
    pub const FOREVER: Timeout = Timeout(Repr::Forever);

    /// A relative timeout on CLOCK_MONOTONIC.
    pub const fn after(d: Duration) -> Timeout {
        Timeout(Repr::Relative(d))
    }

    /// An absolute CLOCK_REALTIME time (`KEVENT_FLAGS_ABSTIME`).
    pub const fn at(t: SystemTime) -> Timeout {
        Timeout(Repr::Absolute(t))
    }

    /// A deadline on CLOCK_MONOTONIC (the clock of [`Instant`]).
    pub const fn until(deadline: Instant) -> Timeout {
        Timeout(Repr::Deadline(deadline))
    }

    /// Whether this is [`Timeout::NOW`] (a zero relative timeout).
    pub fn is_now(&self) -> bool {
        matches!(self.0, Repr::Relative(d) if d.is_zero())
    }

    /// Whether this is [`Timeout::FOREVER`].
    pub fn is_forever(&self) -> bool {
        matches!(self.0, Repr::Forever)
    }

    /// The ABI's `(timeout, flags)` pair.
    ///
    /// A relative duration beyond [`FOREVER_SECS`] is capped to it (it means the same thing);
    /// an absolute time before 1970 becomes `{0, 0}` with `KEVENT_FLAGS_ABSTIME` (already
    /// passed: no block).
    pub fn as_timespec(&self) -> (libc::timespec, u32) {
        match self.0 {
            Repr::Relative(d) => (duration_to_timespec(d), 0),
            Repr::Absolute(t) => {
                let since = t.duration_since(UNIX_EPOCH).unwrap_or(Duration::ZERO);
                (duration_to_timespec(since), KEVENT_FLAGS_ABSTIME)
            }
            Repr::Deadline(i) => (
                duration_to_timespec(i.saturating_duration_since(Instant::now())),
                0,
            ),
            Repr::Forever => (
                libc::timespec {
                    tv_sec: FOREVER_SECS,
                    tv_nsec: 0,
                },
                0,
            ),
        }
    }

    /// The deadline on the monotonic clock, for waits that loop (`None`: forever). An
    /// absolute time is converted with the current realtime clock.
    pub(crate) fn deadline(&self) -> Option<Instant> {
        match self.0 {
            Repr::Relative(d) => Instant::now().checked_add(d),
            Repr::Absolute(t) => {
                let left = t
                    .duration_since(SystemTime::now())
                    .unwrap_or(Duration::ZERO);
                Instant::now().checked_add(left)
            }
            Repr::Deadline(i) => Some(i),
            Repr::Forever => None,
        }
    }

    /// What is left of a deadline from [`Timeout::deadline`], as a relative timeout.
    pub(crate) fn remaining(deadline: Option<Instant>) -> Timeout {
        match deadline {
            None => Timeout::FOREVER,
            Some(d) => Timeout::after(d.saturating_duration_since(Instant::now())),
        }
    }
}

/// A duration as a timespec, capped at [`FOREVER_SECS`] seconds; nanoseconds exact.
fn duration_to_timespec(d: Duration) -> libc::timespec {
    match libc::time_t::try_from(d.as_secs()) {
        Ok(s) if s < FOREVER_SECS => libc::timespec {
            tv_sec: s,
            // < 1e9: fits every c_long.
            tv_nsec: d.subsec_nanos() as libc::c_long,
        },
        _ => libc::timespec {
            tv_sec: FOREVER_SECS,
            tv_nsec: 0,
        },
    }
}

impl From<Duration> for Timeout {
    fn from(d: Duration) -> Timeout {
        Timeout::after(d)
    }
}

impl From<Option<Duration>> for Timeout {
    /// `None` is [`Timeout::FOREVER`].
    fn from(d: Option<Duration>) -> Timeout {
        match d {
            Some(d) => Timeout::after(d),
            None => Timeout::FOREVER,
        }
    }
}

impl From<Instant> for Timeout {
    fn from(deadline: Instant) -> Timeout {
        Timeout::until(deadline)
    }
}

impl From<SystemTime> for Timeout {
    fn from(t: SystemTime) -> Timeout {
        Timeout::at(t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instant_deadlines_are_relative_and_never_negative() {
        let (ts, fl) = Timeout::until(Instant::now() - Duration::from_millis(1)).as_timespec();
        assert_eq!((ts.tv_sec, ts.tv_nsec, fl), (0, 0, 0));
        let far = Instant::now() + Duration::from_secs(100);
        let (ts, fl) = Timeout::from(far).as_timespec();
        assert_eq!(fl, 0);
        assert!(ts.tv_sec > 90 && ts.tv_sec <= 100, "{}", ts.tv_sec);
        assert_eq!(Timeout::from(far).deadline(), Some(far));
    }

    #[test]
    fn now_is_zero_and_never_blocks() {
        let (ts, fl) = Timeout::NOW.as_timespec();
        assert_eq!((ts.tv_sec, ts.tv_nsec, fl), (0, 0, 0));
    }

    #[test]
    fn sub_millisecond_is_kept_exactly() {
        let (ts, _) = Timeout::after(Duration::from_nanos(1)).as_timespec();
        assert_eq!((ts.tv_sec, ts.tv_nsec), (0, 1));
        let (ts, _) = Timeout::after(Duration::new(3, 999_999_999)).as_timespec();
        assert_eq!((ts.tv_sec, ts.tv_nsec), (3, 999_999_999));
    }

    #[test]
    fn d6_forever_and_huge_durations_never_overflow() {
        let (ts, fl) = Timeout::FOREVER.as_timespec();
        assert_eq!((ts.tv_sec, ts.tv_nsec, fl), (FOREVER_SECS, 0, 0));
        let (ts, _) = Timeout::after(Duration::MAX).as_timespec();
        assert_eq!((ts.tv_sec, ts.tv_nsec), (FOREVER_SECS, 0));
        assert!(FOREVER_SECS.checked_add(FOREVER_SECS).is_some());
        assert_eq!(Timeout::remaining(None), Timeout::FOREVER);
    }

    #[test]
    fn absolute_sets_abstime() {
        let t = UNIX_EPOCH + Duration::new(1_700_000_000, 5);
        let (ts, fl) = Timeout::at(t).as_timespec();
        assert_eq!(
            (ts.tv_sec, ts.tv_nsec, fl),
            (1_700_000_000, 5, KEVENT_FLAGS_ABSTIME)
        );
        let before = UNIX_EPOCH - Duration::from_secs(10);
        let (ts, fl) = Timeout::at(before).as_timespec();
        assert_eq!((ts.tv_sec, ts.tv_nsec, fl), (0, 0, KEVENT_FLAGS_ABSTIME));
    }
}
