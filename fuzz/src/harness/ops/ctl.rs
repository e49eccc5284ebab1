//! `kevent_ctl`: ADD, REMOVE, MODIFY and READY of generated entries, and what they write
//! back.

use kevent_c::capi::calls::kevent_ctl;
use kevent_sys::{
    KEVENT_CTL_ADD, KEVENT_CTL_MODIFY, KEVENT_CTL_READY, KEVENT_CTL_REMOVE, KEVENT_INODE,
    KEVENT_PIPE, KEVENT_POLL, KEVENT_REQ_ALWAYS_QUEUE, KEVENT_REQ_READY, KEVENT_RET_BROKEN,
    KEVENT_RET_DONE, KEVENT_SOCKET, Key, ukevent,
};

use crate::harness::checks::{ADD_ENTRY_ERRNOS, CTL_ERRNOS, RM_ENTRY_ERRNOS};
use crate::harness::decode::{Buf, buf_desc};
use crate::harness::events::{is_fd_type, read_events};
use crate::harness::os::{errno_name, is_open};
use crate::harness::state::{Expect, Harness, Target};
use crate::harness::stats::{Known, strict};
use crate::input::Src;
use crate::mem::unmapped_addr;

impl Harness {
    pub(in crate::harness) fn op_ctl(&mut self, s: &mut Src<'_>) {
        let fd = self.pick_qfd(s);
        let chaotic = self.bad(s);
        let cmd = match s.below(16) {
            0..=6 => KEVENT_CTL_ADD,
            7..=9 => KEVENT_CTL_REMOVE,
            10..=11 => KEVENT_CTL_MODIFY,
            12..=14 => KEVENT_CTL_READY,
            _ if chaotic => s.u32(),
            _ => KEVENT_CTL_READY,
        };
        let num: u32 = match s.below(16) {
            _ if !chaotic => s.below(9),
            0 => 0,
            1..=11 => 1 + s.below(8),
            12..=13 => 9 + s.below(120),
            14 => 200 + s.below(400),
            _ => {
                let huge = s.pick(&[u32::MAX, 1 << 20, 100_000, 4097]);
                if huge == u32::MAX && !strict() {
                    // F6: a 2 x 160 GiB allocation attempt.
                    1 << 21
                } else {
                    huge
                }
            }
        };
        let mut x = Expect::default();
        let target = self.expect_target(fd, &mut x);
        let salt = match target {
            Target::Queue(i) => self.queues[i].serial,
            _ => 999_999,
        };
        let events: Vec<ukevent> = (0..num.min(600)).map(|_| self.gen_event(s, salt)).collect();
        let buf = if num as usize > events.len() {
            // A huge count: never give real memory for it.
            match s.below(3) {
                0 => Buf::Null,
                1 => Buf::Unmapped(unmapped_addr()),
                _ => {
                    let ev = events.clone();
                    self.gen_buf(s, events.len(), |i| ev[i])
                }
            }
        } else {
            let ev = events.clone();
            self.gen_buf(s, num as usize, |i| ev[i])
        };
        if cmd > KEVENT_CTL_READY {
            x.must(libc::EINVAL);
        }
        if num > 0 {
            match &buf {
                Buf::Null | Buf::Unmapped(_) => x.must(libc::EFAULT),
                Buf::Mem { cap, ro, .. } => {
                    if *cap < num as usize {
                        x.must(libc::EFAULT);
                    }
                    if *ro {
                        x.maybe(libc::EFAULT);
                    }
                }
            }
        }
        if let Target::Queue(i) = target {
            if cmd == KEVENT_CTL_ADD {
                let foreign = events.iter().take(buf.cap()).any(|e| {
                    let fd = e.id.raw()[0] as i32;
                    matches!(
                        e.type_,
                        KEVENT_SOCKET | KEVENT_PIPE | KEVENT_POLL | KEVENT_INODE
                    ) && fd > 2
                        && is_open(fd)
                        && !self.fds.iter().any(|f| f.fd == fd)
                        && !self.queues.iter().any(|q| q.fd == fd)
                });
                self.queues[i].foreign_fd |= foreign;
            }
            if cmd == KEVENT_CTL_ADD || cmd == KEVENT_CTL_MODIFY {
                let q = &mut self.queues[i];
                for e in events.iter().take(buf.cap()) {
                    q.note_key(e);
                }
            }
            self.check_ring_header(i);
        }
        self.trace(format_args!(
            "ctl(fd {fd} {target:?}, cmd {cmd}, num {num}, buf {}) entries {:?}",
            buf_desc(&buf),
            events
                .iter()
                .take(6)
                .map(|e| (e.type_, e.id.as_u64(), e.req_flags))
                .collect::<Vec<_>>()
        ));
        let arg = buf.ptr();
        // SAFETY: `arg` is NULL, unmapped, or harness memory for `buf.cap()` entries followed
        // by a guard page: the library must copy and answer EFAULT, never fault.
        let r = self.call(1, 0, || unsafe { kevent_ctl(fd, cmd, num, arg) });
        self.check_graveyard("kevent_ctl");
        if self.broken_queue("kevent_ctl", target, r, &x) {
            return;
        }
        if r.ret == -1 && r.errno == libc::ENOMEM && x.must.contains(&libc::EFAULT) && num > 1 << 24
        {
            self.trace(format_args!("  -> ENOMEM"));
            self.known(
                Known::CtlHugeNumAllocates,
                format_args!("kevent_ctl with num {num} and a bad array gave ENOMEM, not EFAULT"),
            );
            return;
        }
        self.check_errno("kevent_ctl", r, CTL_ERRNOS, &x);
        if let Target::Queue(i) = target {
            self.check_ring_header(i);
        }
        if r.ret < 0 {
            return;
        }
        let n = r.ret as u32;
        if n > num {
            violation!(self, "kevent_ctl returned {n} for num {num}");
        }
        if (cmd == KEVENT_CTL_REMOVE || cmd == KEVENT_CTL_MODIFY) && n != 0 {
            violation!(self, "REMOVE/MODIFY returned {n}, not 0 (D14)");
        }
        let Buf::Mem { g, ro: false, .. } = &buf else {
            return;
        };
        let out = read_events(g.ptr(), num as usize);
        match cmd {
            KEVENT_CTL_ADD => {
                let written = &out[..n as usize];
                self.check_subsequence("ADD", written, &events);
                for e in written {
                    if e.ret_flags & KEVENT_RET_DONE == 0 {
                        violation!(self, "ADD wrote back an entry without RET_DONE: {e:?}");
                    }
                    if e.ret_flags & KEVENT_RET_BROKEN != 0 {
                        let err = (e.ret_data[1] as i32).wrapping_neg();
                        // An fd already in error or hung up (a pipe whose writer is gone) is
                        // "ready at once" as BROKEN with the source's errno (section 5).
                        let readiness = is_fd_type(e.type_) && (1..4096).contains(&err);
                        if !ADD_ENTRY_ERRNOS.contains(&err) && !readiness {
                            violation!(
                                self,
                                "ADD entry failed with {} (ret_data[1] {:#x}), not a per-entry errno of the spec: {e:?}",
                                errno_name(err),
                                e.ret_data[1]
                            );
                        }
                    } else {
                        let queued = e.req_flags & (KEVENT_REQ_READY | KEVENT_REQ_ALWAYS_QUEUE);
                        if !is_fd_type(e.type_) || queued != 0 {
                            violation!(
                                self,
                                "ADD returned an entry as ready at once that cannot be (type {}, req_flags {:#x})",
                                e.type_,
                                e.req_flags
                            );
                        }
                    }
                }
            }
            KEVENT_CTL_REMOVE | KEVENT_CTL_MODIFY => {
                for (e, orig) in out.iter().zip(&events) {
                    if Key::of(e) != Key::of(orig) || e.cookie() != orig.cookie() {
                        violation!(
                            self,
                            "REMOVE/MODIFY changed an entry's key or cookie: {e:?}"
                        );
                    }
                    if e.ret_flags & KEVENT_RET_DONE == 0 {
                        violation!(self, "REMOVE/MODIFY left an entry without RET_DONE: {e:?}");
                    }
                    if e.ret_flags & KEVENT_RET_BROKEN != 0 {
                        let err = (e.ret_data[1] as i32).wrapping_neg();
                        if !RM_ENTRY_ERRNOS.contains(&err) {
                            violation!(
                                self,
                                "REMOVE/MODIFY entry failed with {}: {e:?}",
                                errno_name(err)
                            );
                        }
                    }
                }
            }
            _ => {
                let missing = num - n;
                self.check_subsequence("READY", &out[..missing as usize], &events);
            }
        }
    }
}
