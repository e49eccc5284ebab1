//! TIMER kevents: `id.raw[0]` seconds, `id.raw[1]` nanoseconds (non-zero), on
//! CLOCK_MONOTONIC; periodic unless ONESHOT. POSIX timers reuse the same expiry path.
//!
//! All timers of a queue share one timerfd, armed for the earliest deadline of the queue's
//! [`TimerHeap`](crate::timer::heap::TimerHeap); no timer has a kernel object of its own.
//! `ret_data[0]` is the CLOCK_MONOTONIC time of the (last) expiry in milliseconds, low 32
//! bits; `ret_data[1]` the expirations since the last delivery (**D8**).

use kevent_sys::Errno;

use crate::rules::Report;

/// A TIMER kevent's interval in nanoseconds from its id: `EINVAL` when zero or when the
/// nanoseconds are not below one second.
pub(crate) fn interval_of(id: [u32; 2]) -> Result<u64, Errno> {
    crate::timer::interval_ns(id[0], id[1]).ok_or(Errno::EINVAL)
}

/// What a timer delivery reports.
pub(crate) fn report(last_expiry_ns: u64, pending: u32) -> Report {
    Report::Ready([(last_expiry_ns / 1_000_000) as u32, pending])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn s5_timer_interval_needs_a_valid_nonzero_id() {
        assert_eq!(interval_of([0, 0]), Err(Errno::EINVAL));
        assert_eq!(interval_of([0, 1_000_000_000]), Err(Errno::EINVAL));
        assert_eq!(interval_of([1, 5]), Ok(1_000_000_005));
        assert_eq!(interval_of([0, 1]), Ok(1));
    }
}
