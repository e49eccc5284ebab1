//! `kevent_get_events`: the events it returns, and the ring they are mirrored into (D12).

use std::sync::atomic::Ordering::Relaxed;

use kevent_c::capi::calls::kevent_get_events;
use kevent_sys::KEVENT_RET_COPY_FAILED;

use crate::harness::checks::GET_ERRNOS;
use crate::harness::decode::{Buf, buf_desc};
use crate::harness::events::{UKEVENT, event_bytes, event_from_bytes, read_events};
use crate::harness::os::is_nonblock;
use crate::harness::state::{Expect, Harness, Target};
use crate::harness::{MAX_OUT, STATS};
use crate::input::Src;

impl Harness {
    pub(in crate::harness) fn op_get_events(&mut self, s: &mut Src<'_>) {
        let fd = self.pick_qfd(s);
        let chaotic = self.bad(s);
        let max_nr: u32 = match s.below(16) {
            _ if !chaotic => 1 + s.below(64),
            0 => 0,
            1..=10 => 1 + s.below(16),
            11..=13 => 17 + s.below(300),
            14 => MAX_OUT + s.below(8),
            _ => u32::MAX,
        };
        let min_nr = match s.below(16) {
            0..=5 => 0,
            6..=14 => s.below(max_nr.min(64) + 1),
            _ if chaotic => max_nr.saturating_add(1 + s.below(4)),
            _ => 1,
        };
        let mut x = Expect::default();
        let target = self.expect_target(fd, &mut x);
        let nonblock = matches!(target, Target::Queue(_)) && is_nonblock(fd);
        let (ts, flags, budget, bad_ts, bad_flags) = self.gen_timeout(s, nonblock);
        if bad_ts || bad_flags {
            x.must(libc::EINVAL);
        }
        // D15: the count checks, and NULL with max_nr > 0, fail before any wait.
        if max_nr == 0 || min_nr > max_nr {
            x.must(libc::EINVAL);
        }
        let want = max_nr.min(MAX_OUT) as usize;
        let buf = self.gen_buf(s, want, |_| event_from_bytes([0x5A; UKEVENT]));
        if matches!(buf, Buf::Null) && max_nr > 0 {
            x.must(libc::EFAULT);
        }
        if !buf.writable() || buf.cap() < want {
            x.maybe(libc::EFAULT);
        }
        let ring_before = self.ring_before_call(target);
        self.trace(format_args!(
            "get_events(fd {fd} {target:?}, min {min_nr}, max {max_nr}, {}.{:09} flags {flags:#x}, buf {})",
            ts.tv_sec,
            ts.tv_nsec,
            buf_desc(&buf)
        ));
        let p = buf.ptr();
        // SAFETY: `p` is NULL, unmapped, or harness memory for `buf.cap()` entries followed by
        // a guard page; the library copies out and answers EFAULT where it cannot.
        let r = self.call(2, budget, || unsafe {
            kevent_get_events(fd, min_nr, max_nr, ts, p, flags)
        });
        if self.stale_success("kevent_get_events", fd, target, r, &x) {
            return;
        }
        if self.broken_queue("kevent_get_events", target, r, &x) {
            return;
        }
        self.check_errno("kevent_get_events", r, GET_ERRNOS, &x);
        if let Target::Queue(i) = target {
            self.check_ring_header(i);
        }
        if r.ret < 0 {
            return;
        }
        let got = r.ret as u32;
        STATS.events.fetch_add(u64::from(got), Relaxed);
        if got > max_nr || got > MAX_OUT {
            violation!(self, "kevent_get_events returned {got} for max_nr {max_nr}");
        }
        if got as usize > buf.cap() {
            violation!(
                self,
                "kevent_get_events returned {got} events but could only write {}",
                buf.cap()
            );
        }
        let Target::Queue(qi) = target else {
            violation!(
                self,
                "kevent_get_events succeeded on fd {fd}, which is not a queue"
            );
        };
        let Buf::Mem { g, .. } = &buf else {
            return;
        };
        let evs = read_events(g.ptr(), got as usize);
        self.check_delivered(qi, &evs, "get_events");
        if let (Some((k0, used0)), Some(ring)) = (ring_before, &mut self.queues[qi].ring) {
            let n = ring.n;
            let free0 = n - 1 - used0;
            let copied = evs
                .iter()
                .take_while(|e| e.ret_flags & KEVENT_RET_COPY_FAILED == 0)
                .count() as u32;
            let expect = got.min(free0);
            if copied != expect
                || evs[copied as usize..]
                    .iter()
                    .any(|e| e.ret_flags & KEVENT_RET_COPY_FAILED == 0)
            {
                violation!(
                    self,
                    "get_events: {got} events, {free0} free ring slots: expected the first {expect} in the ring and the rest RET_COPY_FAILED, got {copied} copied ({:?})",
                    evs.iter().map(|e| e.ret_flags).collect::<Vec<_>>()
                );
            }
            ring.k += u64::from(copied);
            let k1 = ring.kidx();
            if u64::from(k1) != ring.k % u64::from(n) {
                violation!(
                    self,
                    "get_events mirrored {copied} events but ring_kidx moved {k0} -> {k1} (n {n})"
                );
            }
            for (j, e) in evs.iter().take(copied as usize).enumerate() {
                let slot = ring.entry(k0 + j as u32);
                if event_bytes(&slot) != event_bytes(e) {
                    violation!(
                        self,
                        "ring slot {} differs from the event get_events returned: {slot:?} vs {e:?}",
                        (k0 + j as u32) % n
                    );
                }
            }
        }
    }
}
