//! Choosing a call's arguments from the input's bytes: queue fds, event fds, `ukevent`s,
//! timeouts and buffers (good ones, and with probability `chaos`/256 bad ones).

use kevent_sys::{
    KEVENT_AIO, KEVENT_FLAGS_ABSTIME, KEVENT_INODE, KEVENT_MASK_ALL, KEVENT_MAX, KEVENT_NAIO,
    KEVENT_PIPE, KEVENT_POLL, KEVENT_POSIX_TIMER, KEVENT_REQ_ALWAYS_QUEUE, KEVENT_REQ_READY,
    KEVENT_SIGNAL, KEVENT_SOCKET, KEVENT_TIMER, KEVENT_UNOTIFY, kevent_id, ukevent,
};
use std::os::fd::RawFd;

use super::events::{UKEVENT, event_bytes};
use super::os::{now, ts_add_ns};
use super::state::{Harness, Kind};
use super::{MAX_OUT, WAIT_CAP_NS};
use crate::input::Src;
use crate::mem::{Guarded, unmapped_addr};

/// The buffer a call gets.
#[derive(Debug)]
pub(super) enum Buf {
    Null,
    /// Harness memory for `cap` entries; `ro` when read-only.
    Mem {
        g: Guarded,
        cap: usize,
        ro: bool,
    },
    /// An address with nothing mapped.
    Unmapped(usize),
}

impl Buf {
    pub(super) fn ptr(&self) -> *mut ukevent {
        match self {
            Buf::Null => std::ptr::null_mut(),
            Buf::Mem { g, .. } => g.ptr().cast(),
            Buf::Unmapped(a) => std::ptr::without_provenance_mut(*a),
        }
    }

    /// Entries the call can certainly read (and, unless read-only, write).
    pub(super) fn cap(&self) -> usize {
        match self {
            Buf::Mem { cap, .. } => *cap,
            _ => 0,
        }
    }

    pub(super) fn writable(&self) -> bool {
        matches!(self, Buf::Mem { ro: false, .. })
    }
}

pub(super) fn buf_desc(b: &Buf) -> String {
    match b {
        Buf::Null => "NULL".into(),
        Buf::Unmapped(a) => format!("unmapped {a:#x}"),
        Buf::Mem { g, cap, ro } => format!(
            "{cap} entries{}{}",
            if *ro { " read-only" } else { "" },
            if g.ptr().addr() % 8 != 0 {
                " misaligned"
            } else {
                ""
            }
        ),
    }
}

pub(super) fn gen_signal_id(s: &mut Src<'_>) -> u64 {
    let signo: i32 = match s.below(12) {
        0..=4 => libc::SIGUSR1,
        5..=7 => libc::SIGUSR2,
        8 => libc::SIGRTMIN() + 3,
        9 => libc::SIGRTMAX(),
        10 => s.pick(&[0, libc::SIGKILL, libc::SIGSTOP, 32, 33, 65, 1000, -1]),
        _ => s.pick(&[libc::SIGUSR1, -7, i32::MAX]),
    };
    kevent_id::signal(signo, s.chance(96)).as_u64()
}

impl Harness {
    pub(super) fn pick_qfd(&self, s: &mut Src<'_>) -> RawFd {
        if !self.queues.is_empty() && !self.bad(s) {
            return self.queues[s.below(self.queues.len() as u32) as usize].fd;
        }
        let c = s.below(20);
        match c {
            0..=13 if !self.queues.is_empty() => {
                self.queues[s.below(self.queues.len() as u32) as usize].fd
            }
            14 if !self.dead_queues.is_empty() => s.pick(&self.dead_queues),
            15 if !self.fds.is_empty() => self.fds[s.below(self.fds.len() as u32) as usize].fd,
            16 if !self.closed.is_empty() => s.pick(&self.closed),
            17 => s.pick(&[-1, -2, i32::MIN, -4096]),
            18 => 100_000 + s.below(1000) as i32,
            _ => self.queues.first().map_or(-1, |q| q.fd),
        }
    }

    /// An fd for a SOCKET/PIPE/POLL/INODE id.
    pub(super) fn pick_event_fd(&self, s: &mut Src<'_>, prefer: &[Kind]) -> RawFd {
        let c = s.below(16);
        match c {
            0..=5 => {
                let fitting: Vec<RawFd> = self
                    .fds
                    .iter()
                    .filter(|f| prefer.contains(&f.kind))
                    .map(|f| f.fd)
                    .collect();
                if fitting.is_empty() {
                    self.fds.first().map_or(-1, |f| f.fd)
                } else {
                    s.pick(&fitting)
                }
            }
            6..=9 if !self.fds.is_empty() => self.fds[s.below(self.fds.len() as u32) as usize].fd,
            10..=11 if !self.queues.is_empty() => {
                self.queues[s.below(self.queues.len() as u32) as usize].fd
            }
            12 if !self.closed.is_empty() => s.pick(&self.closed),
            13 if !self.dead_queues.is_empty() => s.pick(&self.dead_queues),
            14 => s.pick(&[-1, 0, 1, 2, 99_999, i32::MAX]),
            _ => self.fds.last().map_or(-1, |f| f.fd),
        }
    }

    pub(super) fn gen_event(&self, s: &mut Src<'_>, salt: u32) -> ukevent {
        let salt64 = u64::from(salt) << 32;
        let t = s.below(32);
        let (type_, id): (u32, u64) = match t {
            0..=9 => (
                KEVENT_UNOTIFY,
                if s.chance(16) {
                    s.u64()
                } else {
                    salt64 | u64::from(s.below(6))
                },
            ),
            10..=13 => {
                let raw = match s.below(8) {
                    0..=4 => [0, 1 + s.below(WAIT_CAP_NS as u32)],
                    5 => [0, 1 + s.below(100)],
                    6 => [0, 0],
                    _ => [s.u32(), s.u32()],
                };
                (KEVENT_TIMER, kevent_id::from_raw(raw).as_u64())
            }
            14..=16 => (
                KEVENT_SOCKET,
                self.pick_event_fd(s, &[Kind::Unix, Kind::Tcp, Kind::Listener, Kind::Udp]) as u32
                    as u64,
            ),
            17..=18 => (
                KEVENT_PIPE,
                self.pick_event_fd(s, &[Kind::PipeR, Kind::PipeW]) as u32 as u64,
            ),
            19..=21 => (
                KEVENT_POLL,
                self.pick_event_fd(s, &[Kind::Event, Kind::Epoll, Kind::Unix, Kind::PipeR]) as u32
                    as u64,
            ),
            22..=23 => (KEVENT_SIGNAL, gen_signal_id(s)),
            24..=25 => (
                KEVENT_INODE,
                self.pick_event_fd(s, &[Kind::Dir]) as u32 as u64,
            ),
            26 => (
                s.pick(&[KEVENT_NAIO, KEVENT_AIO, KEVENT_POSIX_TIMER]),
                s.u64(),
            ),
            27 => (
                if s.chance(128) {
                    KEVENT_MAX + s.below(100)
                } else {
                    s.u32()
                },
                s.u64(),
            ),
            _ => {
                let ty = s.below(KEVENT_MAX + 1);
                let id = s.u64();
                // Never watch a signal that would disturb the process (SIGSEGV, SIGINT, …).
                let id = if ty == KEVENT_SIGNAL {
                    gen_signal_id(s)
                } else {
                    id
                };
                (ty, id)
            }
        };
        let event = match s.below(4) {
            0 => 1 + s.below(7),
            1 => KEVENT_MASK_ALL,
            2 => 0,
            _ => s.u32(),
        };
        let req_flags = match s.below(8) {
            0..=4 => s.below(64),
            5 => KEVENT_REQ_READY,
            6 => KEVENT_REQ_ALWAYS_QUEUE | s.below(8),
            _ if self.bad(s) => s.u32(),
            _ => KEVENT_REQ_READY | s.below(2),
        };
        let mut e = ukevent::new(type_, kevent_id::from_u64(id), event, req_flags);
        if self.bad(s) {
            e.ret_flags = s.u32();
            e.ret_data = [s.u32(), s.u32()];
        }
        e.set_cookie(salt64 | u64::from(s.u16()));
        e
    }

    /// A timeout and its flags: (timeout, flags, budget in ns, timespec invalid, flags invalid).
    pub(super) fn gen_timeout(
        &self,
        s: &mut Src<'_>,
        nonblock: bool,
    ) -> (libc::timespec, u32, u64, bool, bool) {
        let mut flags = match s.below(16) {
            0..=12 => 0,
            _ => KEVENT_FLAGS_ABSTIME,
        };
        if self.bad(s) && s.chance(64) {
            flags = if s.chance(128) { 2 } else { s.u32() };
        }
        let bad_flags = flags & !KEVENT_FLAGS_ABSTIME != 0;
        let abs = flags & KEVENT_FLAGS_ABSTIME != 0;
        let ts = |sec: i64, nsec: i64| libc::timespec {
            tv_sec: sec,
            tv_nsec: nsec,
        };
        let c = if self.bad(s) {
            s.below(16)
        } else {
            s.below(13)
        };
        let (t, budget, bad) = match c {
            0..=7 => (ts(0, 0), 0, false),
            8..=11 => {
                // Mostly short (the corpus must run in seconds), sometimes the full 2 ms.
                let cap = if s.chance(48) { WAIT_CAP_NS } else { 200_000 };
                let ns = u64::from(s.below(cap as u32 + 1));
                if abs {
                    (ts_add_ns(now(libc::CLOCK_REALTIME), ns), ns, false)
                } else {
                    (ts(0, ns as i64), ns, false)
                }
            }
            12 => {
                if abs {
                    (ts(i64::from(s.below(1_000_000)), 5), 0, false)
                } else {
                    (ts(0, 1), 1, false)
                }
            }
            13 => (
                ts(
                    0,
                    s.pick(&[1_000_000_000, 1_999_999_999, -1, i64::MIN, i64::MAX]),
                ),
                0,
                true,
            ),
            14 => (ts(s.pick(&[-1, i64::MIN, -3600]), 0), 0, true),
            _ => {
                if nonblock && !abs {
                    // An O_NONBLOCK queue fd never blocks (spec section 3): a long timeout
                    // must not be waited for.
                    (ts(5, 0), 0, false)
                } else {
                    (ts(0, 0), 0, false)
                }
            }
        };
        (t, flags, budget, bad, bad_flags)
    }

    pub(super) fn gen_buf(
        &self,
        s: &mut Src<'_>,
        want: usize,
        fill: impl Fn(usize) -> ukevent,
    ) -> Buf {
        let mode = if self.bad(s) { s.below(20) } else { 0 };
        let want = want.min(MAX_OUT as usize + 16);
        let mem = |cap: usize, misalign: usize, ro: bool| -> Buf {
            match Guarded::new(cap * UKEVENT, misalign) {
                Some(g) => {
                    for i in 0..cap {
                        let b = event_bytes(&fill(i));
                        // SAFETY: the mapping holds `cap * 40` writable bytes at `g.ptr()`.
                        unsafe {
                            std::ptr::copy_nonoverlapping(
                                b.as_ptr(),
                                g.ptr().add(i * UKEVENT),
                                UKEVENT,
                            )
                        };
                    }
                    if ro {
                        g.protect(true);
                    }
                    Buf::Mem { g, cap, ro }
                }
                None => Buf::Null,
            }
        };
        match mode {
            0..=14 => mem(want, 0, false),
            15 => Buf::Null,
            16 if want > 0 => mem(s.below(want as u32) as usize, 0, false),
            17 => mem(want, 0, true),
            18 => mem(want, 1 + s.below(7) as usize, false),
            _ => Buf::Unmapped(unmapped_addr()),
        }
    }
}
