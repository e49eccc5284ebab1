//! The checks every call's result goes through: the errno sets of spec section 3, the
//! delivered events against what the queue was given, the ring header, and the detectors of
//! the known engine bugs (closed queues' rings kept as a graveyard, stale and broken queues).

use std::os::fd::RawFd;
use std::sync::atomic::Ordering::Relaxed;

use kevent_sys::{KEVENT_RET_BROKEN, KEVENT_RET_COPY_FAILED, KEVENT_RET_DONE, Key, ukevent};

use super::events::{UKEVENT, is_fd_type};
use super::model::RingState;
use super::os::errno_name;
use super::state::{Expect, GRAVE, Harness, Kind, Ret, Target};
use super::stats::{KNOWN, Known, strict};

// errno sets of spec section 3 (plus the resource errors any call that allocates may give).
pub(super) const RESOURCE: &[i32] = &[libc::ENOMEM, libc::EMFILE, libc::ENFILE];
pub(super) const INIT_ERRNOS: &[i32] = &[
    libc::EINVAL,
    libc::EFAULT,
    libc::ENOMEM,
    libc::EMFILE,
    libc::ENFILE,
];
pub(super) const CTL_ERRNOS: &[i32] = &[libc::EBADF, libc::EINVAL, libc::EFAULT, libc::ENOMEM];
pub(super) const GET_ERRNOS: &[i32] = &[libc::EBADF, libc::EINVAL, libc::EFAULT, libc::ENOMEM];
pub(super) const WAIT_ERRNOS: &[i32] = &[libc::EBADF, libc::EINVAL];
pub(super) const COMMIT_ERRNOS: &[i32] = &[libc::EBADF, libc::EINVAL, libc::EOVERFLOW];
/// D18's errors of the call, the bounds on requests (`ENOSPC` natively, `EAGAIN` on the
/// fallback) and `ENOSYS` on a kernel without it (P37).
pub(super) const AIO_ERRNOS: &[i32] = &[
    libc::EBADF,
    libc::EINVAL,
    libc::ENOTCONN,
    libc::ENOSPC,
    libc::EAGAIN,
    libc::ENOSYS,
];
pub(super) const TIMER_ERRNOS: &[i32] = &[
    libc::EINVAL,
    libc::EFAULT,
    libc::EBADF,
    libc::ENOMEM,
    libc::EAGAIN,
];
/// Per-entry failures of ADD (`ret_data[1] = -errno`): spec section 3, plus resource errors.
pub(super) const ADD_ENTRY_ERRNOS: &[i32] = &[
    libc::ENOSYS,
    libc::EEXIST,
    libc::EBADF,
    libc::EINVAL,
    libc::ENOMEM,
    libc::EMFILE,
    libc::ENFILE,
    libc::ENOSPC,
];
/// Per-entry failures of REMOVE/MODIFY: not found, D10 (fd reused), unknown flags (D1).
pub(super) const RM_ENTRY_ERRNOS: &[i32] = &[libc::ENOENT, libc::EBADF, libc::EINVAL];

impl Harness {
    /// A closed queue's ring: freed at once when strict (C contract: close the fd, then free
    /// the ring), else kept and watched for writes.
    pub(super) fn bury(&mut self, ring: Option<RingState>) {
        let Some(r) = ring else {
            return;
        };
        if strict() {
            return;
        }
        let len = 8 + r.n as usize * UKEVENT;
        // SAFETY: the ring's `8 + n * 40` bytes are harness memory; the queue fd is closed,
        // so they are the harness's again.
        unsafe { std::ptr::write_bytes(r.mem.ptr(), GRAVE, len) };
        let RingState { mem, n, .. } = r;
        self.graveyard_lens.push(8 + n as usize * UKEVENT);
        self.graveyard.push(mem);
    }

    /// Whether the library wrote a closed queue's ring since the last check.
    pub(super) fn check_graveyard(&mut self, what: &str) {
        let mut hit = None;
        for (g, &len) in self.graveyard.iter().zip(&self.graveyard_lens) {
            // SAFETY: `len` bytes of harness memory, still mapped.
            let bytes = unsafe { std::slice::from_raw_parts(g.ptr(), len) };
            if let Some(off) = bytes.iter().position(|&b| b != GRAVE) {
                hit = Some((g.ptr(), off));
                // SAFETY: as above; refill so that the next write is seen too.
                unsafe { std::ptr::write_bytes(g.ptr(), GRAVE, len) };
            }
        }
        if let Some((p, off)) = hit {
            self.known(
                Known::StaleQueueOnReusedEpoll,
                format_args!("{what} wrote the ring {p:?} (offset {off}) of a closed queue"),
            );
        }
    }

    /// `true` (after counting F4) when a get_events/wait on a number that now names a plain
    /// epoll succeeded: the library found the closed queue that had that number.
    pub(super) fn stale_success(
        &mut self,
        what: &str,
        fd: RawFd,
        target: Target,
        r: Ret,
        x: &Expect,
    ) -> bool {
        let epoll = self.fds.iter().any(|f| f.fd == fd && f.kind == Kind::Epoll);
        if target == Target::NotQueue && epoll && r.ret >= 0 && x.must.contains(&libc::EINVAL) {
            self.trace(format_args!("  -> {} (stale queue)", r.ret));
            self.known(
                Known::StaleQueueOnReusedEpoll,
                format_args!("{what} on fd {fd} (now a plain epoll) returned {}", r.ret),
            );
            self.check_graveyard(what);
            return true;
        }
        self.check_graveyard(what);
        false
    }

    /// `true` (after counting F5) when a call on a live queue failed with an EINVAL nothing
    /// explains, after an ADD named one of the library's internal fds.
    pub(super) fn broken_queue(&mut self, what: &str, target: Target, r: Ret, x: &Expect) -> bool {
        let Target::Queue(i) = target else {
            return false;
        };
        let q = &self.queues[i];
        let unexplained = r.ret == -1 && r.errno == libc::EINVAL && x.must.is_empty();
        if !(unexplained && (q.foreign_fd || q.broken)) {
            return false;
        }
        let first = !q.broken;
        self.queues[i].broken = true;
        self.trace(format_args!(
            "  -> EINVAL (queue broken by an ADD of an internal fd)"
        ));
        if first {
            self.known(
                Known::AddInternalFdBreaksQueue,
                format_args!(
                    "{what} on a live queue failed with EINVAL after an ADD named an internal fd"
                ),
            );
        }
        true
    }

    /// A known, reported engine bug: fatal with `KEVENT_FUZZ_STRICT=1`, else counted.
    pub(super) fn known(&mut self, which: Known, msg: std::fmt::Arguments<'_>) {
        if strict() {
            violation!(self, "[known issue {which:?}] {msg}");
        }
        KNOWN[which as usize].fetch_add(1, Relaxed);
    }

    /// The errno checks common to every call.
    pub(super) fn check_errno(&mut self, what: &str, r: Ret, allowed: &[i32], x: &Expect) {
        self.trace(format_args!(
            "  -> {}",
            if r.ret < 0 {
                errno_name(r.errno)
            } else {
                r.ret.to_string()
            }
        ));
        if r.ret < 0 {
            if r.ret != -1 {
                violation!(self, "{what} returned {} (only -1 signals an error)", r.ret);
            }
            if !allowed.contains(&r.errno) {
                violation!(
                    self,
                    "{what} failed with {}, which the spec does not allow for this call",
                    errno_name(r.errno)
                );
            }
            let explained = x.must.contains(&r.errno)
                || x.maybe.contains(&r.errno)
                || RESOURCE.contains(&r.errno);
            if !explained {
                violation!(
                    self,
                    "{what} failed with {}, but the conditions that apply give {:?} (maybe {:?})",
                    errno_name(r.errno),
                    x.must.iter().map(|e| errno_name(*e)).collect::<Vec<_>>(),
                    x.maybe.iter().map(|e| errno_name(*e)).collect::<Vec<_>>()
                );
            }
        } else if !x.must.is_empty() {
            violation!(
                self,
                "{what} returned {} although it must fail with one of {:?}",
                r.ret,
                x.must.iter().map(|e| errno_name(*e)).collect::<Vec<_>>()
            );
        }
    }

    pub(super) fn check_ring_header(&mut self, qi: usize) {
        let Some(r) = &self.queues[qi].ring else {
            return;
        };
        let (k, o, n, over) = (r.kidx(), r.over_mem(), r.n, r.over());
        if k >= n {
            violation!(self, "ring_kidx {k} >= ring size {n}");
        }
        if o != over {
            violation!(
                self,
                "ring_over is {o}, expected {over} (it may change only in a commit)"
            );
        }
    }

    /// Before a `get_events` or `wait` on `target`: checks its ring header and catches the
    /// model's producer position up with the memory ([`RingState::sync`]); then the ring's
    /// `(ring_kidx, used slots)`, `None` for a call on no queue or on a queue without a ring.
    pub(super) fn ring_before_call(&mut self, target: Target) -> Option<(u32, u32)> {
        match target {
            Target::Queue(i) => {
                self.check_ring_header(i);
                self.queues[i].ring.as_mut().map(|r| {
                    r.sync();
                    (r.kidx(), r.used())
                })
            }
            _ => None,
        }
    }

    /// `got` must be `want`'s entries, some left out, in order (matched by key and cookie).
    pub(super) fn check_subsequence(&mut self, what: &str, got: &[ukevent], want: &[ukevent]) {
        let mut j = 0;
        for e in got {
            while j < want.len()
                && (Key::of(&want[j]) != Key::of(e) || want[j].cookie() != e.cookie())
            {
                j += 1;
            }
            if j == want.len() {
                violation!(
                    self,
                    "{what} wrote back an entry that is not one of the input, in order: {e:?}"
                );
            }
            j += 1;
        }
    }

    /// Checks delivered events against what the queue was given.
    pub(super) fn check_delivered(&mut self, qi: usize, evs: &[ukevent], what: &str) {
        let has_ring = self.queues[qi].ring.is_some();
        let mut seen: Vec<Key> = Vec::new();
        for e in evs {
            let defined = KEVENT_RET_BROKEN | KEVENT_RET_DONE | KEVENT_RET_COPY_FAILED;
            if e.ret_flags & !defined != 0 {
                violation!(self, "{what} delivered undefined ret_flags: {e:?}");
            }
            if !has_ring && e.ret_flags & KEVENT_RET_COPY_FAILED != 0 {
                violation!(
                    self,
                    "{what} set RET_COPY_FAILED on a queue without a ring: {e:?}"
                );
            }
            if e.ret_flags & KEVENT_RET_BROKEN != 0 {
                let err = (e.ret_data[1] as i32).wrapping_neg();
                if !(1..4096).contains(&err) {
                    violation!(self, "{what} delivered BROKEN without -errno: {e:?}");
                }
            }
            let k = Key::of(e);
            let known = self.queues[qi].keys.get(&k);
            match known {
                None => violation!(
                    self,
                    "{what} delivered an event this queue was never given (type {}, id {:#x}): {e:?}",
                    k.raw_type(),
                    k.id()
                ),
                Some(cookies) if !cookies.contains(&e.cookie()) => violation!(
                    self,
                    "{what} delivered cookie {:#x} that was never given for (type {}, id {:#x})",
                    e.cookie(),
                    k.raw_type(),
                    k.id()
                ),
                Some(_) => {}
            }
            if !is_fd_type(e.type_) {
                if seen.contains(&k) {
                    let dump: Vec<String> = evs
                        .iter()
                        .filter(|o| Key::of(o) == k)
                        .map(|o| format!("{o:?}"))
                        .collect();
                    self.known(
                        Known::OccurrenceTwicePerWait,
                        format_args!(
                            "{what} delivered (type {}, id {:#x}) twice in one wait: {}",
                            k.raw_type(),
                            k.id(),
                            dump.join(" / ")
                        ),
                    );
                }
                seen.push(k);
            }
        }
    }
}
