//! Time: timespec constructors, clocks and the timing rules ("never early").

use std::time::Duration;

/// `{0, 0}`: do not block.
pub const ZERO: libc::timespec = libc::timespec {
    tv_sec: 0,
    tv_nsec: 0,
};

/// A timespec.
pub const fn ts(sec: i64, nsec: i64) -> libc::timespec {
    libc::timespec {
        tv_sec: sec as libc::time_t,
        tv_nsec: nsec as libc::c_long,
    }
}

/// A relative timeout of `ms` milliseconds.
pub const fn ms(ms: u64) -> libc::timespec {
    ts((ms / 1000) as i64, ((ms % 1000) * 1_000_000) as i64)
}

/// A clock reading in nanoseconds.
pub fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut t = ZERO;
    // SAFETY: `t` is a valid, writable timespec for the duration of the call.
    let r = unsafe { libc::clock_gettime(clock, &mut t) };
    assert_eq!(r, 0, "clock_gettime");
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// An absolute CLOCK_REALTIME timespec `d` from now.
pub fn realtime_in(d: Duration) -> libc::timespec {
    let ns = clock_ns(libc::CLOCK_REALTIME) + d.as_nanos() as u64;
    ts((ns / 1_000_000_000) as i64, (ns % 1_000_000_000) as i64)
}
