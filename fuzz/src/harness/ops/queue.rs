//! Making and closing queues: `kevent_init` (with good and bad rings), `close`, and toggling
//! a queue fd's `O_NONBLOCK`.

use std::collections::HashMap;

use kevent_c::capi::calls::kevent_init;
use kevent_sys::kevent_ring;

use crate::harness::MAX_QUEUES;
use crate::harness::checks::INIT_ERRNOS;
use crate::harness::model::{QueueState, RingState};
use crate::harness::os::{close_fd, errno, errno_name};
use crate::harness::state::{Expect, Harness};
use crate::input::Src;
use crate::mem::{Guarded, unmapped_addr};

impl Harness {
    pub(in crate::harness) fn op_init(&mut self, s: &mut Src<'_>) {
        if self.queues.len() >= MAX_QUEUES {
            return;
        }
        let chaotic = self.bad(s);
        // Always an unknown bit (D1): bit 0 is KEVENT_INIT_ASYNC_RING (P38), a layout this
        // harness's model does not cover (the conformance suite's `p38_async_ring` does).
        let flags = if chaotic && s.chance(40) {
            (s.u32() | 1 << (1 + s.below(31))) & !kevent_sys::KEVENT_INIT_ASYNC_RING
        } else {
            0
        };
        let num = match s.below(16) {
            _ if !chaotic => {
                if s.chance(48) {
                    0
                } else if s.chance(16) {
                    65 + s.below(4000)
                } else {
                    2 + s.below(63)
                }
            }
            0 => 0,
            1 => 1,
            2..=6 => 2 + s.below(6),
            7..=10 => s.pick(&[8, 16, 31, 64]),
            11..=12 => 65 + s.below(4000),
            13 => s.u32(),
            14 => u32::MAX,
            _ => 2 + s.below(3),
        };
        let mode = if !chaotic {
            if num == 0 { 0 } else { 2 }
        } else {
            s.below(16)
        };
        let mut x = Expect::default();
        if flags != 0 {
            x.must(libc::EINVAL);
        }
        let bytes = kevent_sys::ring_bytes(num).unwrap_or(usize::MAX);
        let (ring, mem): (*mut kevent_ring, Option<Guarded>) = match mode {
            0..=1 => {
                if num != 0 {
                    x.must(libc::EINVAL);
                }
                (std::ptr::null_mut(), None)
            }
            2..=10 if num <= 4096 => {
                match Guarded::new(bytes, 0) {
                    Some(g) => {
                        // SAFETY: `bytes` writable bytes at `g.ptr()`.
                        unsafe { std::ptr::write_bytes(g.ptr(), 0xA5, bytes) };
                        (g.ptr().cast(), Some(g))
                    }
                    None => return,
                }
            }
            11 if num < 2 || num <= 4096 => {
                // Misaligned for struct kevent_ring.
                x.must(libc::EINVAL);
                let off = 1 + s.below(7) as usize;
                match Guarded::new(kevent_sys::ring_bytes(num.min(4096)).unwrap_or(8), off) {
                    Some(g) => (g.ptr().cast(), Some(g)),
                    None => return,
                }
            }
            12 => {
                // Mapped, but not readable and writable.
                x.must(libc::EFAULT);
                let cap = kevent_sys::ring_bytes(num.min(64)).unwrap_or(8);
                match Guarded::new(cap, 0) {
                    Some(g) => {
                        g.protect(s.chance(128));
                        (g.ptr().cast(), Some(g))
                    }
                    None => return,
                }
            }
            13 => {
                x.must(libc::EFAULT);
                (std::ptr::without_provenance_mut(unmapped_addr()), None)
            }
            _ => {
                // A ring shorter than `num` entries, ending at a guard page.
                if num == 0 {
                    (std::ptr::null_mut(), None)
                } else {
                    let cap = s.below(num.min(64));
                    x.must(libc::EFAULT);
                    if bytes > isize::MAX as usize {
                        x.must(libc::EINVAL);
                    }
                    match Guarded::new(kevent_sys::ring_bytes(cap).unwrap_or(8), 0) {
                        Some(g) => (g.ptr().cast(), Some(g)),
                        None => return,
                    }
                }
            }
        };
        if !ring.is_null() && num < 2 {
            x.must(libc::EINVAL);
            // EFAULT may come first when the memory is bad as well.
            x.maybe(libc::EFAULT);
        }
        self.trace(format_args!(
            "init(ring {:?} mode {mode}, num {num}, flags {flags:#x})",
            ring
        ));
        // SAFETY: `ring` is NULL, or harness memory of at least the size the expectation
        // describes (smaller rings end at a guard page, so the library's check faults);
        // a ring the call accepts stays mapped until its queue fd is closed.
        let r = self.call(0, 0, || unsafe { kevent_init(ring, num, flags) });
        self.check_errno("kevent_init", r, INIT_ERRNOS, &x);
        if r.ret < 0 {
            return;
        }
        let fd = r.ret;
        // SAFETY: F_GETFD on the fd just returned.
        let fdflags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
        if fdflags < 0 || fdflags & libc::FD_CLOEXEC == 0 {
            violation!(self, "kevent_init returned fd {fd} without close-on-exec");
        }
        let serial = self.next_serial;
        self.next_serial += 1;
        let ring = match mem {
            Some(mem) if !ring.is_null() => {
                let st = RingState::new(mem, num);
                let header = st.as_ref().map(|st| (st.kidx(), st.over_mem()));
                if let Some((k, o)) = header.filter(|&h| h != (0, 0)) {
                    violation!(
                        self,
                        "kevent_init left the ring header at kidx {k:#x} over {o:#x}"
                    );
                }
                st
            }
            _ => None,
        };
        self.queues.push(QueueState {
            fd,
            serial,
            ring,
            keys: HashMap::new(),
            foreign_fd: false,
            broken: false,
        });
    }

    pub(in crate::harness) fn op_close_queue(&mut self, s: &mut Src<'_>) {
        if self.queues.is_empty() {
            return;
        }
        let i = s.below(self.queues.len() as u32) as usize;
        let q = self.queues.remove(i);
        self.trace(format_args!("close(queue fd {})", q.fd));
        if close_fd(q.fd) != 0 {
            violation!(
                self,
                "close of queue fd {} failed: {}",
                q.fd,
                errno_name(errno())
            );
        }
        self.bury(q.ring);
        self.dead_queues.push(q.fd);
        self.closed.retain(|&c| c != q.fd);
    }

    pub(in crate::harness) fn op_nonblock(&mut self, s: &mut Src<'_>) {
        if self.queues.is_empty() {
            return;
        }
        let fd = self.queues[s.below(self.queues.len() as u32) as usize].fd;
        // SAFETY: F_GETFL/F_SETFL on a queue fd the harness owns.
        unsafe {
            let fl = libc::fcntl(fd, libc::F_GETFL);
            if fl >= 0 {
                libc::fcntl(fd, libc::F_SETFL, fl ^ libc::O_NONBLOCK);
            }
        }
        self.trace(format_args!("toggle O_NONBLOCK on {fd}"));
    }
}
