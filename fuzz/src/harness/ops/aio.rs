//! `kevent_aio_sendfile` (D18): every class of queue fd, socket and file, and offsets and
//! counts up to overflow. A request that starts names a key its queue may deliver (one
//! `KEVENT_AIO` event, cookie 0); its id is new in that queue.
//!
//! Only a native backend gets counts above 0 for calls that may succeed: a fallback request
//! holds duplicates of both fds until its worker thread lets go of them, which the harness's
//! exact fd count at the end of each input cannot wait for (the conformance suite's
//! `d18_aio` covers the fallback's transfers). A count of 0 completes at once on both.

use std::ffi::CStr;
use std::os::fd::RawFd;
use std::sync::OnceLock;

use kevent_c::capi::aio::kevent_aio_sendfile;
use kevent_c::capi::backend::kevent_backend;
use kevent_sys::{KEVENT_AIO, KEVENT_MASK_ALL, Key, kevent_id, ukevent};

use crate::harness::checks::AIO_ERRNOS;
use crate::harness::state::{Expect, Harness, Kind, Target};
use crate::input::Src;

/// Whether the process runs on the native backend.
fn native() -> bool {
    static NATIVE: OnceLock<bool> = OnceLock::new();
    *NATIVE.get_or_init(|| {
        // SAFETY: the library returns a NUL-terminated static string or NULL.
        let p = unsafe { kevent_backend() };
        // SAFETY: checked non-NULL; the string is static.
        !p.is_null() && unsafe { CStr::from_ptr(p) }.to_bytes() == b"native"
    })
}

/// What an fd argument of the call is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Arg {
    Closed,
    Is(Option<Kind>),
}

impl Harness {
    /// An fd for `sock_fd` or `in_fd`: mostly of the kinds in `prefer`.
    fn pick_aio_fd(&self, s: &mut Src<'_>, prefer: &[Kind]) -> RawFd {
        let good: Vec<RawFd> = self
            .fds
            .iter()
            .filter(|f| prefer.contains(&f.kind))
            .map(|f| f.fd)
            .collect();
        match s.below(10) {
            0..=5 if !good.is_empty() => good[s.below(good.len() as u32) as usize],
            6 if !self.fds.is_empty() => self.fds[s.below(self.fds.len() as u32) as usize].fd,
            7 if !self.closed.is_empty() => s.pick(&self.closed),
            8 if !self.queues.is_empty() => self.queues[0].fd,
            _ => {
                let far = 100_000 + s.below(1000) as i32;
                s.pick(&[-1, i32::MIN, far])
            }
        }
    }

    fn aio_arg(&self, fd: RawFd) -> Arg {
        if let Some(f) = self.fds.iter().find(|f| f.fd == fd) {
            return Arg::Is(Some(f.kind));
        }
        match self.classify(fd) {
            Target::Closed => Arg::Closed,
            _ => Arg::Is(None),
        }
    }

    pub(in crate::harness) fn op_aio(&mut self, s: &mut Src<'_>) {
        let fd = self.pick_qfd(s);
        let mut x = Expect::default();
        let target = self.expect_target(fd, &mut x);
        let sock = self.pick_aio_fd(s, &[Kind::Unix, Kind::Tcp]);
        let file = self.pick_aio_fd(s, &[Kind::Memfd]);
        let chaotic = self.bad(s);
        let max = i64::MAX as u64;
        let offset = if chaotic {
            s.pick(&[0, 1, 4096, max, max + 1, u64::MAX])
        } else {
            u64::from(s.below(8192))
        };
        let mut count = if chaotic {
            s.pick(&[0, 1, max, max + 1, u64::MAX])
        } else {
            u64::from(s.below(8192))
        };
        if !native() && offset.checked_add(count).is_some_and(|end| end <= max) {
            count = 0;
        }
        let (a_sock, a_file) = (self.aio_arg(sock), self.aio_arg(file));
        let overflow = offset.checked_add(count).is_none_or(|end| end > max);
        if matches!(target, Target::Queue(_)) {
            if a_sock == Arg::Closed || a_file == Arg::Closed {
                x.must(libc::EBADF);
            } else {
                if a_file != Arg::Is(Some(Kind::Memfd)) {
                    x.must(libc::EINVAL);
                }
                match a_sock {
                    Arg::Is(Some(Kind::Unix)) => {}
                    // A TCP connect may still be in progress; a listener has no peer.
                    Arg::Is(Some(Kind::Tcp)) => x.maybe(libc::ENOTCONN),
                    Arg::Is(Some(Kind::Listener)) => x.must(libc::ENOTCONN),
                    _ => x.must(libc::EINVAL),
                }
                if overflow {
                    x.must(libc::EINVAL);
                }
            }
            // The per-user and per-queue bounds (native), the fallback's slab.
            x.maybe(libc::ENOSPC);
            x.maybe(libc::EAGAIN);
        }
        // A kevent kernel that advertises five numbers has no call (P37).
        x.maybe(libc::ENOSYS);
        self.trace(format_args!(
            "aio_sendfile(fd {fd} {target:?}, sock {sock} {a_sock:?}, in {file} {a_file:?}, offset {offset}, count {count})"
        ));
        let mut id = 0;
        let r = self.call(6, 0, || {
            id = kevent_aio_sendfile(fd, sock, file, offset, count);
            if id < 0 { -1 } else { 0 }
        });
        if self.broken_queue("kevent_aio_sendfile", target, r, &x) {
            return;
        }
        self.check_errno("kevent_aio_sendfile", r, AIO_ERRNOS, &x);
        if r.ret < 0 {
            return;
        }
        let Target::Queue(qi) = target else {
            violation!(
                self,
                "kevent_aio_sendfile succeeded on fd {fd}, which is not a queue"
            );
        };
        if id <= 0 {
            violation!(self, "kevent_aio_sendfile returned id {id} (D18: > 0)");
        }
        let key = Key::from_raw(KEVENT_AIO, id as u64);
        if self.queues[qi].keys.contains_key(&key) {
            violation!(
                self,
                "kevent_aio_sendfile returned id {id} twice on one queue"
            );
        }
        let e = ukevent::new(
            KEVENT_AIO,
            kevent_id::from_u64(id as u64),
            KEVENT_MASK_ALL,
            0,
        );
        self.queues[qi].note_key(&e);
    }
}
