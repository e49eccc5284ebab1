//! POSIX timers that report to a queue (`SIGEV_KEVENT`), emulated.
//!
//! On a kevent kernel, `timer_create` with `sigev_notify == SIGEV_KEVENT` registers a
//! `KEVENT_POSIX_TIMER` kevent in the queue whose fd travels in the first int of the
//! sigevent's `_sigev_un` (glibc's `sigev_notify_thread_id`). Here, the timer is a
//! POSIX_TIMER kevent in that queue driven by the queue's shared timer heap, exactly like a
//! TIMER kevent: its deliveries carry `sival_ptr` as the cookie, `ret_data[0]` the expiry's
//! CLOCK_MONOTONIC milliseconds and `ret_data[1]` the expirations since the last delivery;
//! interval timers keep firing (**D9**). `CLOCK_REALTIME` and `CLOCK_BOOTTIME` deadlines
//! are converted to CLOCK_MONOTONIC when armed.

use std::collections::HashMap;
use std::os::fd::RawFd;
use std::sync::{Arc, LazyLock, Mutex, Weak};

use kevent_sys::{Errno, SIGEV_KEVENT};

use crate::queue::Queue;
use crate::{fdtable, timer};

/// A fallback POSIX timer id (what `timer_t` carries for the C library).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TimerId(pub u32);

#[derive(Debug)]
struct Entry {
    queue: Weak<Queue>,
    clock: libc::clockid_t,
}

#[derive(Debug, Default)]
struct Timers {
    next: u32,
    map: HashMap<u32, Entry>,
}

static TIMERS: LazyLock<Mutex<Timers>> = LazyLock::new(|| Mutex::new(Timers::default()));

fn timers() -> std::sync::MutexGuard<'static, Timers> {
    TIMERS.lock().unwrap_or_else(|p| p.into_inner())
}

fn find(id: TimerId) -> Result<(Arc<Queue>, libc::clockid_t), Errno> {
    let t = timers();
    let e = t.map.get(&id.0).ok_or(Errno::EINVAL)?;
    let q = e.queue.upgrade().ok_or(Errno::EINVAL)?;
    Ok((q, e.clock))
}

/// The queue fd a `SIGEV_KEVENT` sigevent carries (the first int of `_sigev_un`).
pub fn sigevent_queue_fd(sev: &libc::sigevent) -> RawFd {
    sev.sigev_notify_thread_id
}

/// `timer_create(clock, sev)` with `sev.sigev_notify == SIGEV_KEVENT` and the queue fd in
/// the first int of `_sigev_un`.
///
/// # Errors
///
/// `EINVAL` for another notification method or an unsupported clock; `EBADF`/`EINVAL` when
/// the fd is not a queue.
pub fn timer_create(clock: libc::clockid_t, sev: &libc::sigevent) -> Result<TimerId, Errno> {
    if sev.sigev_notify != SIGEV_KEVENT as i32 {
        return Err(Errno::EINVAL);
    }
    if !matches!(
        clock,
        libc::CLOCK_MONOTONIC | libc::CLOCK_REALTIME | libc::CLOCK_BOOTTIME
    ) {
        return Err(Errno::EINVAL);
    }
    let fd = sigevent_queue_fd(sev);
    let q = fdtable::lookup(fd)?;
    // The table cannot see close(): make sure the number still is this queue.
    if let Err(e) = q.verify() {
        fdtable::forget(fd, &q);
        q.shut_down();
        return Err(e);
    }
    let cookie = sev.sigev_value.sival_ptr as usize as u64;
    let mut t = timers();
    let mut id = t.next;
    while t.map.contains_key(&id) {
        id = id.wrapping_add(1);
    }
    t.next = id.wrapping_add(1);
    q.posix_timer_register(u64::from(id), cookie)?;
    t.map.insert(
        id,
        Entry {
            queue: Arc::downgrade(&q),
            clock,
        },
    );
    Ok(TimerId(id))
}

/// `timer_settime(id, flags, new, old)`; `flags` accepts `TIMER_ABSTIME`.
///
/// # Errors
///
/// `EINVAL` for an unknown timer, unknown flags or a timespec out of range.
pub fn timer_settime(
    id: TimerId,
    flags: i32,
    new: &libc::itimerspec,
    old: Option<&mut libc::itimerspec>,
) -> Result<(), Errno> {
    if flags & !libc::TIMER_ABSTIME != 0 {
        return Err(Errno::EINVAL);
    }
    let value = timer::timespec_to_ns(&new.it_value).ok_or(Errno::EINVAL)?;
    let interval = timer::timespec_to_ns(&new.it_interval).ok_or(Errno::EINVAL)?;
    let (q, clock) = find(id)?;
    if let Some(old) = old {
        *old = timer_gettime(id)?;
    }
    let deadline = if value == 0 {
        None
    } else {
        let mono = timer::monotonic_now_ns();
        Some(if flags & libc::TIMER_ABSTIME != 0 {
            let now = timer::clock_now_ns(clock);
            mono.saturating_add(value.saturating_sub(now))
        } else {
            mono.saturating_add(value)
        })
    };
    q.posix_timer_arm(u64::from(id.0), deadline, interval)
}

/// `timer_gettime(id)`: time to the next expiry (zero when disarmed) and the interval.
///
/// # Errors
///
/// `EINVAL` for an unknown timer.
pub fn timer_gettime(id: TimerId) -> Result<libc::itimerspec, Errno> {
    let (q, _) = find(id)?;
    let (deadline, interval) = q.posix_timer_get(u64::from(id.0))?;
    let left = deadline.map_or(0, |d| d.saturating_sub(timer::monotonic_now_ns()).max(1));
    Ok(libc::itimerspec {
        it_interval: timer::ns_to_timespec(interval),
        it_value: timer::ns_to_timespec(left),
    })
}

/// `timer_delete(id)`.
///
/// # Errors
///
/// `EINVAL` for an unknown timer.
pub fn timer_delete(id: TimerId) -> Result<(), Errno> {
    let e = timers().map.remove(&id.0).ok_or(Errno::EINVAL)?;
    if let Some(q) = e.queue.upgrade() {
        q.posix_timer_unregister(u64::from(id.0));
    }
    Ok(())
}
