//! `kevent_wait`: events moved into the ring, checked against the ring model (D12).

use std::sync::atomic::Ordering::Relaxed;

use kevent_c::capi::calls::kevent_wait;
use kevent_sys::{KEVENT_RET_COPY_FAILED, ukevent};

use crate::harness::STATS;
use crate::harness::checks::WAIT_ERRNOS;
use crate::harness::os::is_nonblock;
use crate::harness::state::{Expect, Harness, Target};
use crate::harness::stats::Known;
use crate::input::Src;

impl Harness {
    pub(in crate::harness) fn op_wait(&mut self, s: &mut Src<'_>) {
        let fd = self.pick_qfd(s);
        let mut x = Expect::default();
        let target = self.expect_target(fd, &mut x);
        let ring = match target {
            Target::Queue(i) => self.queues[i].ring.as_ref().map(|r| (r.n, r.uidx())),
            _ => None,
        };
        let (n, uidx) = ring.unwrap_or((8, 0));
        let chaotic = self.bad(s);
        let num = match s.below(8) {
            _ if !chaotic => 1 + s.below(n),
            0 => 0,
            1..=5 => 1 + s.below(n),
            6 => n + s.below(2),
            _ => s.u32(),
        };
        let old_uidx = match s.below(8) {
            0..=5 => uidx,
            6 => (uidx + 1 + s.below(n.max(2) - 1)) % n.max(1),
            _ => s.u32(),
        };
        let nonblock = matches!(target, Target::Queue(_)) && is_nonblock(fd);
        let (ts, flags, mut budget, bad_ts, bad_flags) = self.gen_timeout(s, nonblock);
        if bad_ts || bad_flags {
            x.must(libc::EINVAL);
        }
        if matches!(target, Target::Queue(_)) {
            match ring {
                None => x.must(libc::EINVAL),
                Some((n, _)) if num > n => x.must(libc::EINVAL),
                _ => {}
            }
        }
        if old_uidx != uidx || num == 0 {
            budget = 0;
        }
        let before = self.ring_before_call(target);
        self.trace(format_args!(
            "wait(fd {fd} {target:?}, num {num}, old_uidx {old_uidx} (uidx {uidx}), {}.{:09} flags {flags:#x})",
            ts.tv_sec, ts.tv_nsec
        ));
        // SAFETY: only integers and a timespec by value; the ring it writes is harness memory
        // that stays mapped while the queue fd is open.
        let r = self.call(3, budget, || unsafe {
            kevent_wait(fd, num, old_uidx, ts, flags)
        });
        if self.stale_success("kevent_wait", fd, target, r, &x) {
            return;
        }
        if target == Target::Closed
            && r.ret == -1
            && r.errno == libc::EINVAL
            && x.must == [libc::EBADF]
        {
            self.trace(format_args!("  -> EINVAL"));
            self.known(
                Known::WaitClosedQueueEinval,
                format_args!("kevent_wait on closed queue fd {fd} gave EINVAL, not EBADF"),
            );
            return;
        }
        if self.broken_queue("kevent_wait", target, r, &x) {
            return;
        }
        self.check_errno("kevent_wait", r, WAIT_ERRNOS, &x);
        let Target::Queue(qi) = target else {
            if r.ret >= 0 {
                violation!(
                    self,
                    "kevent_wait succeeded on fd {fd}, which is not a queue"
                );
            }
            return;
        };
        self.check_ring_header(qi);
        let (Some((k0, used0)), true) = (before, r.ret >= 0) else {
            return;
        };
        let got = r.ret as u32;
        STATS.ring_events.fetch_add(u64::from(got), Relaxed);
        let Some(rs) = &mut self.queues[qi].ring else {
            return;
        };
        let n = rs.n;
        let free0 = n - 1 - used0;
        rs.k += u64::from(got);
        let k_model = rs.k;
        if got > num || got > free0 {
            violation!(
                self,
                "kevent_wait moved {got} events for num {num} with {free0} free slots (D12)"
            );
        }
        if (old_uidx != uidx || num == 0) && got != 0 {
            violation!(
                self,
                "kevent_wait with old_uidx {old_uidx} != consumer index {uidx} returned {got}"
            );
        }
        let k1 = rs.kidx();
        let evs: Vec<ukevent> = (0..got).map(|j| rs.entry(k0.wrapping_add(j))).collect();
        if u64::from(k1) != k_model % u64::from(n) {
            violation!(
                self,
                "kevent_wait returned {got} but ring_kidx moved {k0} -> {k1} (n {n})"
            );
        }
        self.check_delivered(qi, &evs, "wait");
        if let Some(e) = evs
            .iter()
            .find(|e| e.ret_flags & KEVENT_RET_COPY_FAILED != 0)
        {
            violation!(
                self,
                "kevent_wait put an event with RET_COPY_FAILED into the ring: {e:?}"
            );
        }
    }
}
