//! The POSIX timer calls (`kevent_timer_create`, `_settime`, `_gettime`, `_delete`), whose
//! expirations are delivered to a queue.

use kevent_c::capi::posix_timer::{
    kevent_timer_create, kevent_timer_delete, kevent_timer_gettime, kevent_timer_settime,
};
use kevent_sys::{KEVENT_POSIX_TIMER, SIGEV_KEVENT, kevent_id, ukevent};

use crate::harness::checks::TIMER_ERRNOS;
use crate::harness::os::{now, ts_add_ns};
use crate::harness::state::{Expect, Harness, Target};
use crate::harness::stats::Known;
use crate::harness::{MAX_TIMERS, WAIT_CAP_NS};
use crate::input::Src;
use crate::mem::unmapped_addr;

impl Harness {
    /// Whether `t` is a timer of this input whose queue is still open (a timer whose queue
    /// was closed may answer EINVAL).
    pub(in crate::harness) fn timer_is_live(&self, t: usize) -> bool {
        self.timers
            .iter()
            .any(|&(v, serial)| v == t && self.queues.iter().any(|q| q.serial == serial))
    }

    pub(in crate::harness) fn pick_timer(&self, s: &mut Src<'_>) -> usize {
        if !self.timers.is_empty() && s.chance(220) {
            s.pick(&self.timers).0
        } else {
            s.pick(&[0, 1, 2, 1000, u32::MAX as usize, usize::MAX, 1 << 40])
        }
    }

    pub(in crate::harness) fn op_timer(&mut self, s: &mut Src<'_>) {
        match s.below(8) {
            0..=2 => self.timer_create(s),
            3..=5 => self.timer_settime(s),
            6 => self.timer_gettime(s),
            _ => {
                let t = self.pick_timer(s);
                self.trace(format_args!("timer_delete({t:#x})"));
                let tid: libc::timer_t = std::ptr::without_provenance_mut(t);
                // SAFETY: a timer_t by value; the library only looks it up.
                let r = self.call(5, 0, || unsafe { kevent_timer_delete(tid) });
                let mut x = Expect::default();
                if !self.timers.iter().any(|&(v, _)| v == t) {
                    x.maybe(libc::EINVAL);
                }
                self.check_errno("kevent_timer_delete", r, TIMER_ERRNOS, &x);
                if r.ret == 0 {
                    self.timers.retain(|&(v, _)| v != t);
                }
            }
        }
    }

    pub(in crate::harness) fn timer_create(&mut self, s: &mut Src<'_>) {
        if self.timers.len() >= MAX_TIMERS {
            return;
        }
        let fd = self.pick_qfd(s);
        let mut x = Expect::default();
        let target = self.expect_target(fd, &mut x);
        let clock = match s.below(8) {
            0..=4 => libc::CLOCK_MONOTONIC,
            5 => libc::CLOCK_REALTIME,
            6 => libc::CLOCK_BOOTTIME,
            _ => {
                x.maybe(libc::EINVAL);
                s.pick(&[libc::CLOCK_PROCESS_CPUTIME_ID, -1, 99])
            }
        };
        // SAFETY: sigevent is integers, a union of an int and a pointer, and padding: zero is
        // a valid value.
        let mut sev: libc::sigevent = unsafe { std::mem::zeroed() };
        sev.sigev_notify = if s.chance(230) {
            SIGEV_KEVENT as i32
        } else {
            x.must(libc::EINVAL);
            s.pick(&[libc::SIGEV_NONE, libc::SIGEV_SIGNAL, 77])
        };
        sev.sigev_notify_thread_id = fd;
        let salt = match target {
            Target::Queue(i) => self.queues[i].serial,
            _ => 999_999,
        };
        let cookie = (u64::from(salt) << 32) | u64::from(s.u16());
        sev.sigev_value.sival_ptr = std::ptr::without_provenance_mut(cookie as usize);
        let mode = s.below(16);
        let mut tid: libc::timer_t = std::ptr::null_mut();
        let sevp: *mut libc::sigevent = if mode == 0 {
            x.must(libc::EINVAL);
            std::ptr::null_mut()
        } else {
            &raw mut sev
        };
        let tidp: *mut libc::timer_t = match mode {
            1 => {
                x.must(libc::EFAULT);
                std::ptr::null_mut()
            }
            2 => {
                x.must(libc::EFAULT);
                std::ptr::without_provenance_mut(unmapped_addr())
            }
            _ => &raw mut tid,
        };
        self.trace(format_args!(
            "timer_create(clock {clock}, fd {fd} {target:?}, notify {}, mode {mode})",
            sev.sigev_notify
        ));
        // SAFETY: `sevp` is NULL or a local sigevent; `tidp` is NULL, unmapped or a local:
        // the library copies through uaccess and answers EFAULT for the bad ones.
        let r = self.call(5, 0, || unsafe { kevent_timer_create(clock, sevp, tidp) });
        let stale = r.ret == 0 && !matches!(target, Target::Queue(_)) && x.must.len() == 1;
        if stale {
            self.trace(format_args!("  -> 0"));
            self.known(
                Known::TimerCreateOnClosedQueue,
                format_args!(
                    "kevent_timer_create succeeded for fd {fd} ({target:?}), which is no longer a queue"
                ),
            );
            self.timers.push((tid.addr(), 0));
            return;
        }
        self.check_errno("kevent_timer_create", r, TIMER_ERRNOS, &x);
        if r.ret == 0 {
            let Target::Queue(qi) = target else {
                violation!(
                    self,
                    "kevent_timer_create succeeded for fd {fd}, not a queue"
                );
            };
            let t = tid.addr();
            self.timers.push((t, self.queues[qi].serial));
            let mut e = ukevent::new(KEVENT_POSIX_TIMER, kevent_id::from_u64(t as u64), 0, 0);
            e.set_cookie(cookie);
            self.queues[qi].note_key(&e);
        }
    }

    pub(in crate::harness) fn timer_settime(&mut self, s: &mut Src<'_>) {
        let t = self.pick_timer(s);
        let mut x = Expect::default();
        if !self.timer_is_live(t) {
            // Not a timer, or one whose queue was closed (the queue is gone: EBADF).
            x.maybe(libc::EINVAL);
            x.maybe(libc::EBADF);
        }
        let flags = match s.below(8) {
            0..=4 => 0,
            5..=6 => libc::TIMER_ABSTIME,
            _ => {
                x.maybe(libc::EINVAL);
                s.u32() as i32
            }
        };
        let value_ns = match s.below(4) {
            0 => 0,
            _ => 1 + u64::from(s.below(WAIT_CAP_NS as u32)),
        };
        let interval_ns = match s.below(4) {
            0..=1 => 0,
            2 => 1 + u64::from(s.below(1000)),
            _ => 1 + u64::from(s.below(WAIT_CAP_NS as u32)),
        };
        let ts = |ns: u64| libc::timespec {
            tv_sec: (ns / 1_000_000_000) as i64,
            tv_nsec: (ns % 1_000_000_000) as i64,
        };
        let mut new = libc::itimerspec {
            it_interval: ts(interval_ns),
            it_value: ts(value_ns),
        };
        if flags == libc::TIMER_ABSTIME && value_ns != 0 {
            new.it_value = ts_add_ns(now(libc::CLOCK_MONOTONIC), value_ns);
        }
        if s.chance(16) {
            new.it_interval.tv_nsec = 1_000_000_000;
            x.must(libc::EINVAL);
        }
        let mut old = new;
        let mode = s.below(8);
        let newp: *const libc::itimerspec = if mode == 0 {
            x.must(libc::EINVAL);
            std::ptr::null()
        } else {
            &raw const new
        };
        let oldp: *mut libc::itimerspec = match mode {
            1..=3 => std::ptr::null_mut(),
            4 => {
                x.maybe(libc::EFAULT);
                std::ptr::without_provenance_mut(unmapped_addr())
            }
            _ => &raw mut old,
        };
        self.trace(format_args!(
            "timer_settime({t:#x}, flags {flags:#x}, value {value_ns} ns interval {interval_ns} ns, mode {mode})"
        ));
        let tid: libc::timer_t = std::ptr::without_provenance_mut(t);
        // SAFETY: `newp` is NULL or a local; `oldp` NULL, unmapped or a local: copied through
        // uaccess (EFAULT for the bad ones).
        let r = self.call(5, 0, || unsafe {
            kevent_timer_settime(tid, flags, newp, oldp)
        });
        self.check_errno("kevent_timer_settime", r, TIMER_ERRNOS, &x);
    }

    pub(in crate::harness) fn timer_gettime(&mut self, s: &mut Src<'_>) {
        let t = self.pick_timer(s);
        let mut x = Expect::default();
        if !self.timer_is_live(t) {
            // Not a timer, or one whose queue was closed (the queue is gone: EBADF).
            x.maybe(libc::EINVAL);
            x.maybe(libc::EBADF);
        }
        let mut cur = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
        };
        let curp: *mut libc::itimerspec = if s.chance(16) {
            x.must(libc::EFAULT);
            std::ptr::null_mut()
        } else {
            &raw mut cur
        };
        self.trace(format_args!("timer_gettime({t:#x})"));
        let tid: libc::timer_t = std::ptr::without_provenance_mut(t);
        // SAFETY: `curp` is NULL or a local, written through uaccess.
        let r = self.call(5, 0, || unsafe { kevent_timer_gettime(tid, curp) });
        self.check_errno("kevent_timer_gettime", r, TIMER_ERRNOS, &x);
        if r.ret == 0
            && !(0..1_000_000_000).contains(&cur.it_value.tv_nsec)
            && !(0..1_000_000_000).contains(&cur.it_interval.tv_nsec)
        {
            violation!(self, "kevent_timer_gettime gave an invalid itimerspec");
        }
    }
}
