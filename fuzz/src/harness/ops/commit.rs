//! `kevent_commit`: every commit checked against the D13 oracle on absolute positions.

use std::sync::atomic::Ordering::Relaxed;

use kevent_c::capi::calls::kevent_commit;

use crate::harness::STATS;
use crate::harness::checks::COMMIT_ERRNOS;
use crate::harness::model::d13_commit_model;
use crate::harness::state::{Expect, Harness, Target};
use crate::input::Src;

impl Harness {
    pub(in crate::harness) fn op_commit(&mut self, s: &mut Src<'_>) {
        let fd = self.pick_qfd(s);
        let mut x = Expect::default();
        let target = self.expect_target(fd, &mut x);
        let model = match target {
            Target::Queue(i) => {
                self.check_ring_header(i);
                self.queues[i].ring.as_mut().map(|r| {
                    r.sync();
                    (r.n, r.kidx(), r.uidx(), r.over(), r.used())
                })
            }
            _ => None,
        };
        let (n, kidx, uidx, over, used) = model.unwrap_or((8, 0, 0, 0, 0));
        let chaotic = self.bad(s);
        let new_uidx = match s.below(10) {
            0..=3 => kidx,
            4..=6 => (uidx + s.below(used + 1)) % n,
            7 => s.below(n),
            _ if !chaotic => kidx,
            8 => n + s.below(3),
            _ => s.u32(),
        };
        let c_over = match s.below(10) {
            _ if !chaotic => over,
            0..=5 => over,
            6..=7 => over.wrapping_sub(1),
            8 => over.wrapping_add(1),
            _ => s.u32(),
        };
        if matches!(target, Target::Queue(_)) {
            match model {
                None => x.must(libc::EINVAL),
                Some(_) => {
                    if new_uidx >= n {
                        x.must(libc::EINVAL);
                    }
                    if c_over != over && c_over != over.wrapping_sub(1) {
                        x.must(libc::EOVERFLOW);
                    }
                }
            }
        }
        self.trace(format_args!(
            "commit(fd {fd} {target:?}, new_uidx {new_uidx}, over {c_over}) model n {n} kidx {kidx} uidx {uidx} over {over}"
        ));
        // SAFETY: integers only; the ring header it may write is harness memory that stays
        // mapped while the queue fd is open.
        let r = self.call(4, 0, || unsafe { kevent_commit(fd, new_uidx, c_over) });
        self.check_graveyard("kevent_commit");
        if self.broken_queue("kevent_commit", target, r, &x) {
            return;
        }
        self.check_errno("kevent_commit", r, COMMIT_ERRNOS, &x);
        let Target::Queue(qi) = target else {
            if r.ret >= 0 {
                violation!(
                    self,
                    "kevent_commit succeeded on fd {fd}, which is not a queue"
                );
            }
            return;
        };
        if r.ret < 0 || model.is_none() {
            self.check_ring_header(qi);
            return;
        }
        // D13, as the spec words it, on absolute positions (the engine's formula works on
        // indices mod n; this must not be a copy of it): `new_uidx` names the one position P
        // with P ≡ new_uidx (mod n) among the n positions ending at the producer position K,
        // i.e. in (K - n, K]. P after the consumer position U releases U..P and moves U to P
        // (ring_over is then U / n); P at or before U is a stale commit.
        let Some(rs) = &mut self.queues[qi].ring else {
            return;
        };
        let new_u = d13_commit_model(rs.k, rs.u, n, new_uidx);
        let released = (new_u - rs.u) as u32;
        rs.u = new_u;
        if r.ret as u32 != released {
            violation!(
                self,
                "kevent_commit released {} slots, D13 says {released} (n {n}, kidx {kidx}, uidx {uidx}, new_uidx {new_uidx})",
                r.ret
            );
        }
        STATS.released.fetch_add(u64::from(released), Relaxed);
        self.check_ring_header(qi);
    }
}
