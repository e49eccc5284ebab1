//! [`Timer`]: `KEVENT_TIMER`.

use std::time::Duration;

use kevent_sys::{Errno, KEVENT_TIMER, KEVENT_TIMER_FIRED, kevent_id};

use super::{Common, Kevent, NoFd, Source, source_common};
use crate::flags::ReqFlags;

/// A timer kevent (`KEVENT_TIMER`) on CLOCK_MONOTONIC: periodic, or once with
/// [`Timer::oneshot`].
///
/// The interval *is* the id (`raw[0]` = seconds, `raw[1]` = nanoseconds), so a queue holds
/// at most one timer per interval: a second timer of the same interval fails with `EEXIST`
/// (make it differ by a nanosecond). Delivered events are
/// [`EventKind::Timer`](crate::EventKind::Timer) with the expiry time and the expirations
/// since the last delivery (**D8**). A timer never fires early.
///
/// A zero interval, or one of more than `u32::MAX` seconds (which the ABI cannot express),
/// fails with `EINVAL`.
///
/// ```
/// use std::time::{Duration, Instant};
/// use kevent::{Queue, Timer, Timeout, Events, EventKind};
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let queue = Queue::new()?;
/// let start = Instant::now();
/// let _t = queue.add(Timer::oneshot(Duration::from_millis(5)))?;
/// let mut events = Events::with_capacity(4);
/// queue.wait(&mut events, Timeout::FOREVER)?;
/// assert!(start.elapsed() >= Duration::from_millis(5));
/// assert!(matches!(events.get(0).map(|e| e.kind()), Some(EventKind::Timer { expirations: 1, .. })));
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Timer {
    interval: Duration,
    common: Common,
}

impl Timer {
    /// A periodic timer: fires every `interval`, first after one interval.
    pub fn new(interval: Duration) -> Timer {
        Timer {
            interval,
            common: Common::default(),
        }
    }

    /// A timer that fires once, after `after`, and is then unregistered (ONESHOT).
    pub fn oneshot(after: Duration) -> Timer {
        let mut t = Timer::new(after);
        t.common.flags |= ReqFlags::ONESHOT;
        t
    }
}

source_common!(Timer);

impl Source for Timer {
    type Fd = NoFd;

    fn into_kevent(self) -> Kevent<NoFd> {
        let secs = u32::try_from(self.interval.as_secs());
        let id = kevent_id::from_raw([secs.unwrap_or(0), self.interval.subsec_nanos()]);
        let mut k = Kevent::new(KEVENT_TIMER, id, KEVENT_TIMER_FIRED, self.common, NoFd);
        if secs.is_err() {
            k.invalid = Some(Errno::EINVAL);
        }
        k
    }
}
