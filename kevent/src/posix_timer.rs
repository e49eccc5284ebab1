//! [`PosixTimer`]: a POSIX timer whose expiries are reported to a queue (`SIGEV_KEVENT`).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use kevent_sys::SIGEV_KEVENT;

use crate::error::{Error, Op, Result};
use crate::queue::Queue;
use kevent_backend::{Backend, PosixTimerId};

use std::os::fd::AsRawFd;

/// The clock a [`PosixTimer`] counts on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Clock {
    /// `CLOCK_MONOTONIC`.
    Monotonic,
    /// `CLOCK_REALTIME` (absolute times are wall-clock times).
    Realtime,
    /// `CLOCK_BOOTTIME` (counts suspend).
    Boottime,
}

impl Clock {
    fn raw(self) -> libc::clockid_t {
        match self {
            Clock::Monotonic => libc::CLOCK_MONOTONIC,
            Clock::Realtime => libc::CLOCK_REALTIME,
            Clock::Boottime => libc::CLOCK_BOOTTIME,
        }
    }
}

/// A POSIX timer (`timer_create` with `SIGEV_KEVENT`) that reports its expiries to a queue
/// as [`EventKind::PosixTimer`](crate::EventKind::PosixTimer) events carrying `token`.
///
/// Created disarmed; [`arm`](PosixTimer::arm) it. Interval timers keep firing (**D9**);
/// expiries before a delivery are counted. Dropping it deletes the timer (`timer_delete`):
/// no expiry is reported afterwards. It holds no borrow of the queue: if the queue is closed
/// first, the timer simply reports nowhere.
///
/// # Backends
///
/// Native: the kernel's `timer_create(2)` with `SIGEV_KEVENT`; [`PosixTimer::id`] is the
/// kernel's timer id. Fallback: an emulated timer on the queue's timer heap; realtime and
/// boottime deadlines are converted to CLOCK_MONOTONIC when the timer is armed, so a later
/// change of the wall clock does not move an armed timer.
///
/// ```
/// use std::time::Duration;
/// use kevent::{Clock, EventKind, Events, PosixTimer, Queue, Timeout};
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let queue = Queue::new()?;
/// let timer = PosixTimer::new(&queue, Clock::Monotonic, 0xfeed)?;
/// timer.arm(Duration::from_millis(2), None)?;
/// let mut events = Events::with_capacity(4);
/// queue.wait(&mut events, Timeout::FOREVER)?;
/// let ev = events.get(0).unwrap();
/// assert_eq!(ev.token(), 0xfeed);
/// assert!(matches!(ev.kind(), EventKind::PosixTimer { expirations: 1, .. }));
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct PosixTimer {
    backend: Backend,
    id: PosixTimerId,
}

fn to_timespec(d: Duration) -> libc::timespec {
    libc::timespec {
        tv_sec: libc::time_t::try_from(d.as_secs()).unwrap_or(libc::time_t::MAX),
        // < 1e9: fits every c_long.
        tv_nsec: d.subsec_nanos() as libc::c_long,
    }
}

fn to_duration(t: &libc::timespec) -> Duration {
    let secs = u64::try_from(t.tv_sec).unwrap_or(0);
    let nanos = u32::try_from(t.tv_nsec).unwrap_or(0).min(999_999_999);
    Duration::new(secs, nanos)
}

impl PosixTimer {
    /// `timer_create(clock, {SIGEV_KEVENT, queue fd, token})`—Creates a disarmed timer
    /// whose expiries go to `queue` with `token` as the events' token (the sigevent's
    /// `sival_ptr`).
    ///
    /// # Errors
    ///
    /// [`Op::TimerCreate`]: `EINVAL` for a clock the backend does not support, `EBADF`/
    /// `EINVAL` for a queue fd that is not a queue; `EAGAIN`/`ENOMEM` for resource limits.
    pub fn new(queue: &Queue, clock: Clock, token: u64) -> Result<PosixTimer> {
        let backend = queue.backend();
        // The queue fd travels in the first int of `_sigev_un` (spec section 2).
        let mut sev = kevent_backend::zeroed_sigevent();
        sev.sigev_notify = SIGEV_KEVENT as libc::c_int;
        sev.sigev_notify_thread_id = queue.as_raw_fd();
        sev.sigev_value = libc::sigval {
            sival_ptr: std::ptr::without_provenance_mut(token as usize),
        };
        let id = backend
            .timer_create(clock.raw(), &sev)
            .map_err(|e| Error::os(Op::TimerCreate, e))?;
        Ok(PosixTimer { backend, id })
    }

    /// `timer_settime(id, 0, {interval, after})`—Arms the timer to expire after `after`,
    /// then every `interval` (None: once). A zero `after` disarms it.
    ///
    /// # Errors
    ///
    /// [`Op::TimerSettime`]: `EINVAL` for a value the backend refuses.
    pub fn arm(&self, after: Duration, interval: Option<Duration>) -> Result<()> {
        self.settime(0, to_timespec(after), interval)
    }

    /// `timer_settime(id, TIMER_ABSTIME, …)`—Arms the timer to expire at the wall-clock
    /// time `at` (meaningful for [`Clock::Realtime`]), then every `interval`.
    ///
    /// # Errors
    ///
    /// As [`PosixTimer::arm`]; a time before 1970 is `EINVAL`.
    pub fn arm_at(&self, at: SystemTime, interval: Option<Duration>) -> Result<()> {
        let since = at
            .duration_since(UNIX_EPOCH)
            .map_err(|_| Error::invalid(Op::TimerSettime, kevent_sys::Errno::EINVAL))?;
        self.settime(libc::TIMER_ABSTIME, to_timespec(since), interval)
    }

    /// `timer_settime(id, 0, {0, 0})`—Disarms the timer.
    ///
    /// # Errors
    ///
    /// As [`PosixTimer::arm`].
    pub fn disarm(&self) -> Result<()> {
        self.settime(0, to_timespec(Duration::ZERO), None)
    }

    fn settime(&self, flags: i32, value: libc::timespec, interval: Option<Duration>) -> Result<()> {
        let spec = libc::itimerspec {
            it_interval: to_timespec(interval.unwrap_or(Duration::ZERO)),
            it_value: value,
        };
        self.backend
            .timer_settime(self.id, flags, &spec, None)
            .map_err(|e| Error::os(Op::TimerSettime, e))
    }

    /// `timer_gettime(id)`—The time to the next expiry (`None` when disarmed) and the
    /// interval (`None` for a single expiry).
    ///
    /// # Errors
    ///
    /// [`Op::TimerGettime`] with the backend's error.
    pub fn remaining(&self) -> Result<(Option<Duration>, Option<Duration>)> {
        let cur = self
            .backend
            .timer_gettime(self.id)
            .map_err(|e| Error::os(Op::TimerGettime, e))?;
        let next = to_duration(&cur.it_value);
        let every = to_duration(&cur.it_interval);
        Ok((
            (!next.is_zero()).then_some(next),
            (!every.is_zero()).then_some(every),
        ))
    }

    /// The backend's timer id (what [`EventKind::PosixTimer`](crate::EventKind::PosixTimer)
    /// calls `timer`).
    pub fn id(&self) -> u64 {
        self.id.as_u64()
    }

    /// `timer_delete(id)`—Deletes the timer (what dropping it does, with the error
    /// reported).
    ///
    /// # Errors
    ///
    /// [`Op::TimerDelete`] with the backend's error.
    pub fn delete(self) -> Result<()> {
        let r = self.backend.timer_delete(self.id);
        std::mem::forget(self);
        r.map_err(|e| Error::os(Op::TimerDelete, e))
    }
}

impl Drop for PosixTimer {
    fn drop(&mut self) {
        let _ = self.backend.timer_delete(self.id);
    }
}
