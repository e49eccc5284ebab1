//! The differential driver of `differential_epoll.rs` and `differential_epoll_preload.rs`:
//! the same random sequence of epoll operations, applied to a real epoll (the reference,
//! through raw system calls, so that an `LD_PRELOAD`ed `libkevent-epoll.so` cannot reach it)
//! and to a *subject* (epoll on kevent POLL kevents after the author's mapping, or whatever
//! `epoll_*` resolves to in this process), compared after every step: each `epoll_ctl`'s
//! result and each zero-timeout wait as a set of `(fd, events, data)`.
//!
//! The world of one sequence: an AF_UNIX stream socketpair with the smallest `SO_SNDBUF`, a
//! pipe and a FIFO shrunk to one page (`F_SETPIPE_SZ`), and an eventfd, all non-blocking, so
//! that a few hundred bytes flip writability. Seven watchable fds. Operations: ADD, MOD, DEL
//! (any of `EPOLLIN`, `EPOLLOUT`, `EPOLLRDHUP`, `EPOLLPRI`; level, `EPOLLET`,
//! `EPOLLONESHOT`), a kevent `READY` mark of a registration (the reference does the
//! `EPOLL_CTL_MOD` with the same mask that it stands for: D17 makes MOD re-evaluate exactly
//! as a LAST_CHECK'd mark does), writes, reads, fills until `EAGAIN`, drains, `shutdown` of a
//! socket end, `close` of a pipe's or FIFO's write end, and zero-timeout waits.
//!
//! A failing sequence is shrunk (chunks, then single operations, then simpler operations) to
//! a minimal one and printed with its seed; `KEVENT_DIFF_REPLAY=<seed>` replays it.
//! `KEVENT_DIFF_CASES` (default 400 per test), `KEVENT_DIFF_SEED` (a number or `random`),
//! `KEVENT_DIFF_LEN` (longest sequence, default 80) size a run; `KEVENT_DIFF_OPS=<n>` runs
//! sequences until `n` operations were applied (`KEVENT_DIFF_OPS=1000000` is the long run)
//! and `KEVENT_DIFF_LONG=<n>` one sequence of `n` operations.
#![allow(dead_code)]

pub mod shim;
pub mod twin;
pub mod typed;

use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

use crate::*;

/// epoll's `events` bits the driver draws from, and the flags.
pub const E_IN: u32 = libc::EPOLLIN as u32;
/// `EPOLLOUT`.
pub const E_OUT: u32 = libc::EPOLLOUT as u32;
/// `EPOLLRDHUP`.
pub const E_RDHUP: u32 = libc::EPOLLRDHUP as u32;
/// `EPOLLPRI`.
pub const E_PRI: u32 = libc::EPOLLPRI as u32;
/// `EPOLLET`.
pub const E_ET: u32 = libc::EPOLLET as u32;
/// `EPOLLONESHOT`.
pub const E_ONESHOT: u32 = libc::EPOLLONESHOT as u32;

// ---------------------------------------------------------------------------------------------
// The reference: the kernel's epoll through raw system calls

/// A real epoll, reached with `syscall(2)` (never libc's possibly interposed wrappers).
#[derive(Debug)]
pub struct RawEpoll(OwnedFd);

impl RawEpoll {
    /// `epoll_create1(EPOLL_CLOEXEC)`.
    pub fn new() -> RawEpoll {
        // SAFETY: no pointer arguments.
        let fd = unsafe { libc::syscall(libc::SYS_epoll_create1, libc::EPOLL_CLOEXEC) };
        RawEpoll(owned(fd as i32, "epoll_create1"))
    }
}

/// An epoll-shaped thing the driver compares with the reference.
pub trait Subject {
    /// `epoll_ctl`.
    fn ctl(&mut self, op: i32, fd: RawFd, ev: Option<libc::epoll_event>) -> Result<(), Errno>;
    /// A zero-timeout `epoll_wait` into `out`.
    fn wait(&mut self, out: &mut [libc::epoll_event]) -> Result<usize, Errno>;
    /// A kevent `READY` mark of fd's kevent: `Some(marked)`, or `None` where the subject has
    /// no kevent to mark (then the driver skips the operation).
    fn ready(&mut self, fd: RawFd) -> Option<u32>;
    /// Whether the subject watches sockets and FIFOs with SOCKET and PIPE kevents
    /// ([`typed::Typed`]): then the reference registers and reports through the typed
    /// model (decision P24).
    fn typed(&self) -> bool {
        false
    }
    /// The re-encoded BROKEN report the last ADD wrote back (a typed kevent whose source
    /// was hung up at ADD: no registration is left), if any.
    fn broken_at_add(&mut self) -> Option<u32> {
        None
    }
    /// Checks after a sequence; `closed` says whether a registered fd was closed in it
    /// (then a kevent may have reported it as BROKEN, D10, which epoll never does).
    fn finish(&mut self, closed: bool) -> Result<(), String> {
        let _ = closed;
        Ok(())
    }
}

fn errno_of(r: libc::c_long) -> Result<libc::c_long, Errno> {
    if r < 0 { Err(Errno::last()) } else { Ok(r) }
}

impl Subject for RawEpoll {
    fn ctl(&mut self, op: i32, fd: RawFd, ev: Option<libc::epoll_event>) -> Result<(), Errno> {
        let mut e = ev.unwrap_or(libc::epoll_event { events: 0, u64: 0 });
        // SAFETY: `e` is a live epoll_event for the call.
        errno_of(unsafe { libc::syscall(libc::SYS_epoll_ctl, self.0.as_raw_fd(), op, fd, &mut e) })
            .map(drop)
    }
    fn wait(&mut self, out: &mut [libc::epoll_event]) -> Result<usize, Errno> {
        // SAFETY: `out` is valid for writes of its length; no signal mask.
        let r = unsafe {
            libc::syscall(
                libc::SYS_epoll_pwait,
                self.0.as_raw_fd(),
                out.as_mut_ptr(),
                out.len() as i32,
                0,
                std::ptr::null::<libc::sigset_t>(),
                8usize,
            )
        };
        errno_of(r).map(|n| n as usize)
    }
    fn ready(&mut self, _fd: RawFd) -> Option<u32> {
        None
    }
}

/// epoll as this process's `epoll_*` symbols provide it: glibc's (then the driver compares
/// the kernel with itself, a check of the driver), or `libkevent-epoll.so`'s when preloaded.
#[derive(Debug)]
pub struct LibcEpoll(OwnedFd);

impl LibcEpoll {
    /// `epoll_create1(EPOLL_CLOEXEC)` through libc's symbol.
    pub fn new() -> LibcEpoll {
        // SAFETY: no pointer arguments.
        LibcEpoll(owned(
            unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) },
            "epoll_create1",
        ))
    }

    /// The epoll fd.
    pub fn fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }
}

impl Subject for LibcEpoll {
    fn ctl(&mut self, op: i32, fd: RawFd, ev: Option<libc::epoll_event>) -> Result<(), Errno> {
        let mut e = ev.unwrap_or(libc::epoll_event { events: 0, u64: 0 });
        // SAFETY: `e` is a live epoll_event for the call.
        let r = unsafe { libc::epoll_ctl(self.0.as_raw_fd(), op, fd, &mut e) };
        errno_of(r as libc::c_long).map(drop)
    }
    fn wait(&mut self, out: &mut [libc::epoll_event]) -> Result<usize, Errno> {
        // SAFETY: `out` is valid for writes of its length.
        let r =
            unsafe { libc::epoll_wait(self.0.as_raw_fd(), out.as_mut_ptr(), out.len() as i32, 0) };
        errno_of(r as libc::c_long).map(|n| n as usize)
    }
    fn ready(&mut self, _fd: RawFd) -> Option<u32> {
        None
    }
}

/// epoll on a kevent queue of one backend, after the author's mapping
/// ([`kevent_epoll::Epoll`]: what `libkevent-epoll.so` runs).
#[derive(Debug)]
pub struct Mapped(pub kevent_epoll::Epoll);

impl Subject for Mapped {
    fn ctl(&mut self, op: i32, fd: RawFd, ev: Option<libc::epoll_event>) -> Result<(), Errno> {
        self.0.ctl(op, fd, ev)
    }
    fn wait(&mut self, out: &mut [libc::epoll_event]) -> Result<usize, Errno> {
        self.0.wait(out, Some(Duration::ZERO))
    }
    fn ready(&mut self, fd: RawFd) -> Option<u32> {
        let mut k = [kevent_epoll::mapping::key(fd)];
        Some(
            self.0
                .backend()
                .ctl(self.0.fd(), KEVENT_CTL_READY, &mut k)
                .expect("kevent_ctl(READY)"),
        )
    }
    fn finish(&mut self, closed: bool) -> Result<(), String> {
        match self.0.dropped_broken() {
            n if n > 0 && !closed => Err(format!(
                "{n} RET_BROKEN reports although no registered fd was closed"
            )),
            _ => Ok(()),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The world

/// The watchable fds: 0, 1 the socketpair's ends; 2, 3 the pipe's read and write ends; 4, 5
/// the FIFO's; 6 the eventfd.
pub const SLOTS: usize = 7;

/// Which way data moves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Chan {
    /// Socket end 0 writes, end 1 reads.
    Sock01,
    /// Socket end 1 writes, end 0 reads.
    Sock10,
    /// The pipe.
    Pipe,
    /// The FIFO.
    Fifo,
    /// The eventfd (write adds, read resets).
    Event,
}

const CHANS: [Chan; 5] = [
    Chan::Sock01,
    Chan::Sock10,
    Chan::Pipe,
    Chan::Fifo,
    Chan::Event,
];

/// One sequence's fds.
#[derive(Debug)]
pub struct World {
    fds: Vec<Option<OwnedFd>>,
    dir: Option<std::path::PathBuf>,
}

/// `setsockopt` of an int.
pub(crate) fn set_int(fd: RawFd, level: i32, opt: i32, v: i32) {
    // SAFETY: `v` lives across the call; the size is its size.
    unsafe {
        libc::setsockopt(
            fd,
            level,
            opt,
            (&v as *const i32).cast(),
            std::mem::size_of::<i32>() as libc::socklen_t,
        )
    };
}

/// Shrinks a pipe's buffer to one page.
pub(crate) fn one_page(fd: RawFd) {
    // SAFETY: fcntl with integers.
    unsafe { libc::fcntl(fd, libc::F_SETPIPE_SZ, 4096) };
}

impl World {
    /// Fresh fds (the FIFO in a temporary directory, removed on drop).
    pub fn new() -> World {
        let (s0, s1) = socketpair();
        for s in [&s0, &s1] {
            set_int(s.as_raw_fd(), libc::SOL_SOCKET, libc::SO_SNDBUF, 1);
            set_int(s.as_raw_fd(), libc::SOL_SOCKET, libc::SO_RCVBUF, 1);
        }
        let (pr, pw) = pipe();
        one_page(pw.as_raw_fd());
        let dir = temp_dir("diff");
        let path = dir.join("fifo");
        let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).expect("path");
        // SAFETY: `c` is a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
        // SAFETY: as above; the read end first, so the non-blocking write open succeeds.
        let fr = owned(
            unsafe {
                libc::open(
                    c.as_ptr(),
                    libc::O_RDONLY | libc::O_NONBLOCK | libc::O_CLOEXEC,
                )
            },
            "open fifo",
        );
        // SAFETY: as above.
        let fw = owned(
            unsafe {
                libc::open(
                    c.as_ptr(),
                    libc::O_WRONLY | libc::O_NONBLOCK | libc::O_CLOEXEC,
                )
            },
            "open fifo",
        );
        one_page(fw.as_raw_fd());
        let ev = eventfd(0);
        World {
            fds: vec![s0, s1, pr, pw, fr, fw, ev]
                .into_iter()
                .map(Some)
                .collect(),
            dir: Some(dir),
        }
    }

    /// Slot `i`'s fd, unless it was closed.
    pub fn fd(&self, i: usize) -> Option<RawFd> {
        self.fds[i].as_ref().map(|f| f.as_raw_fd())
    }

    fn ends(c: Chan) -> (usize, usize) {
        match c {
            Chan::Sock01 => (0, 1),
            Chan::Sock10 => (1, 0),
            Chan::Pipe => (3, 2),
            Chan::Fifo => (5, 4),
            Chan::Event => (6, 6),
        }
    }

    fn write(&self, c: Chan, n: usize) {
        let Some(w) = self.fd(Self::ends(c).0) else {
            return;
        };
        if c == Chan::Event {
            write_fd(w, &(n as u64).max(1).to_ne_bytes());
        } else {
            write_fd(w, &vec![0x5a; n]);
        }
    }

    fn fill(&self, c: Chan) {
        let Some(w) = self.fd(Self::ends(c).0) else {
            return;
        };
        if c == Chan::Event {
            // Up to the counter's maximum (u64::MAX - 1), where it is no longer writable: the
            // largest additions that still fit, greedily.
            for shift in (0..64).rev() {
                write_fd(w, &(1u64 << shift).to_ne_bytes());
            }
            return;
        }
        let chunk = [0x5au8; 1024];
        for _ in 0..100_000 {
            if write_fd(w, &chunk) < 0 {
                return;
            }
        }
        panic!("{c:?} never filled up");
    }

    fn read(&self, c: Chan, n: usize) {
        let Some(r) = self.fd(Self::ends(c).1) else {
            return;
        };
        let mut buf = vec![0u8; n.max(8)];
        // SAFETY: `buf` is valid for writes of its length.
        unsafe { libc::read(r, buf.as_mut_ptr().cast(), buf.len()) };
    }

    fn drain(&self, c: Chan) {
        if let Some(r) = self.fd(Self::ends(c).1) {
            drain(r);
        }
    }

    fn shut(&self, end: usize, how: i32) {
        if let Some(fd) = self.fd(end) {
            // SAFETY: shutdown takes integers.
            unsafe { libc::shutdown(fd, how) };
        }
    }

    fn close_writer(&mut self, c: Chan) {
        self.fds[Self::ends(c).0] = None;
    }
}

impl Drop for World {
    fn drop(&mut self) {
        if let Some(d) = self.dir.take() {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Operations

/// One step of a sequence.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// `epoll_ctl(op, slot, {events, data})`.
    Ctl {
        /// `EPOLL_CTL_ADD`, `_MOD` or `_DEL`.
        op: i32,
        /// The registration slot (which fd).
        slot: u8,
        /// The epoll events.
        events: u32,
    },
    /// A kevent READY mark of the slot's registration.
    Ready {
        /// The registration slot.
        slot: u8,
    },
    /// A zero-timeout wait, compared.
    Wait,
    /// Write `n` bytes (the eventfd: add `n`).
    Write {
        /// The channel written.
        chan: Chan,
        /// How many bytes.
        n: u16,
    },
    /// Read up to `n` bytes.
    Read {
        /// The channel read.
        chan: Chan,
        /// At most this many bytes.
        n: u16,
    },
    /// Write until `EAGAIN`.
    Fill {
        /// The channel filled.
        chan: Chan,
    },
    /// Read until `EAGAIN`.
    Drain {
        /// The channel drained.
        chan: Chan,
    },
    /// `shutdown(end, how)` of a socket end.
    Shut {
        /// Which socket end.
        end: u8,
        /// `SHUT_RD`, `SHUT_WR` or `SHUT_RDWR`.
        how: i32,
    },
    /// Close the writer of the pipe or the FIFO.
    CloseWriter {
        /// The FIFO's writer (else the pipe's).
        fifo: bool,
    },
}

fn gen_events(r: &mut Rng) -> u32 {
    let mut e = 0;
    for (bit, p) in [(E_IN, 60), (E_OUT, 50), (E_RDHUP, 20), (E_PRI, 5)] {
        if r.pct(p) {
            e |= bit;
        }
    }
    if r.pct(35) {
        e |= E_ET;
    }
    if r.pct(20) {
        e |= E_ONESHOT;
    }
    e
}

/// One random operation; `destructive` allows `shutdown` and `close` (which end a
/// source's life: a long sequence leaves them out, so that it does not spend most of its
/// length on dead fds).
pub fn gen_op(r: &mut Rng, destructive: bool) -> Op {
    let chan = CHANS[r.below(CHANS.len() as u64) as usize];
    let slot = r.below(SLOTS as u64) as u8;
    match r.below(if destructive { 100 } else { 96 }) {
        0..=13 => Op::Ctl {
            op: libc::EPOLL_CTL_ADD,
            slot,
            events: gen_events(r),
        },
        14..=25 => Op::Ctl {
            op: libc::EPOLL_CTL_MOD,
            slot,
            events: gen_events(r),
        },
        26..=30 => Op::Ctl {
            op: libc::EPOLL_CTL_DEL,
            slot,
            events: 0,
        },
        31..=35 => Op::Ready { slot },
        36..=60 => Op::Wait,
        61..=73 => Op::Write {
            chan,
            n: 1 + r.below(3000) as u16,
        },
        74..=84 => Op::Read {
            chan,
            n: 1 + r.below(3000) as u16,
        },
        85..=89 => Op::Fill { chan },
        90..=95 => Op::Drain { chan },
        96..=97 => Op::Shut {
            end: r.below(2) as u8,
            how: [libc::SHUT_RD, libc::SHUT_WR, libc::SHUT_RDWR][r.below(3) as usize],
        },
        _ => Op::CloseWriter { fifo: r.pct(50) },
    }
}

/// An operation of a sequence that [`shrink`] can make simpler.
pub trait Simplify: Clone + PartialEq {
    /// Simpler versions of this operation, the simplest first (empty: none).
    fn simpler(&self) -> Vec<Self>;
}

impl Simplify for Op {
    fn simpler(&self) -> Vec<Op> {
        simpler(self)
    }
}

/// Smaller versions of one operation.
fn simpler(op: &Op) -> Vec<Op> {
    let mut v = Vec::new();
    match *op {
        Op::Ctl { op, slot, events } => {
            for bit in [E_IN, E_OUT, E_RDHUP, E_PRI, E_ET, E_ONESHOT] {
                if events & bit != 0 {
                    v.push(Op::Ctl {
                        op,
                        slot,
                        events: events & !bit,
                    });
                }
            }
        }
        Op::Write { chan, n } if n > 1 => {
            v.push(Op::Write { chan, n: 1 });
            v.push(Op::Write { chan, n: n / 2 });
        }
        Op::Read { chan, n } if n > 1 => {
            v.push(Op::Read { chan, n: 1 });
            v.push(Op::Read { chan, n: n / 2 });
        }
        Op::Fill { chan } => v.push(Op::Write { chan, n: 1 }),
        Op::Drain { chan } => v.push(Op::Read { chan, n: 1 }),
        _ => {}
    }
    v
}

// ---------------------------------------------------------------------------------------------
// Running and comparing

/// What the driver knows of one slot's epoll registration.
#[derive(Clone, Copy, Debug, Default)]
struct Reg {
    registered: bool,
    /// `EPOLLONESHOT` that was reported: disabled until MOD.
    fired: bool,
    oneshot: bool,
    events: u32,
    data: u64,
}

fn sorted(evs: &[libc::epoll_event]) -> Vec<(usize, u32, u64)> {
    let mut v: Vec<(usize, u32, u64)> = evs
        .iter()
        .map(|e| {
            let (events, data) = (e.events, e.u64);
            ((data & 0xff) as usize, events, data)
        })
        .collect();
    v.sort_unstable();
    v
}

/// Runs `ops` on a fresh world against a fresh reference and the subject `make` builds;
/// `Err((index, why))` at the first disagreement.
pub fn run<S: Subject>(ops: &[Op], make: &dyn Fn() -> S) -> Result<(), (usize, String)> {
    // Every close below must be the file's last: no child of another test holds copies.
    let _no_forks = crate::forks::no_forks();
    let mut world = World::new();
    let mut reference = RawEpoll::new();
    let mut subject = make();
    let mut regs = [Reg::default(); SLOTS];
    let mut next_data: u64 = 0x100;
    let mut closed = false;
    let mut a = [libc::epoll_event { events: 0, u64: 0 }; 64];
    let mut b = [libc::epoll_event { events: 0, u64: 0 }; 64];
    for (i, op) in ops.iter().enumerate() {
        let fail = |why: String| Err((i, why));
        match *op {
            Op::Ctl { op, slot, events } => {
                let s = slot as usize;
                let Some(fd) = world.fd(s) else {
                    // A closed slot's number may belong to another test's file by now.
                    continue;
                };
                let data = next_data | slot as u64;
                next_data += 0x100;
                let mut events = events;
                if subject.typed()
                    && typed::kind_of(fd) != typed::Kind::Poll
                    && events & (E_IN | E_OUT) == 0
                {
                    // A typed kevent watches RECV and/or SEND.
                    events |= E_IN;
                }
                let ref_events = if subject.typed() {
                    typed::Typed::reference_mask(fd, events)
                } else {
                    events
                };
                let ev =
                    (op != libc::EPOLL_CTL_DEL).then_some(libc::epoll_event { events, u64: data });
                let ref_ev = ev.map(|e| libc::epoll_event {
                    events: ref_events,
                    u64: e.u64,
                });
                let want = reference.ctl(op, fd, ref_ev);
                let got = subject.ctl(op, fd, ev);
                if want != got {
                    return fail(format!(
                        "epoll_ctl({op}, slot {slot}, {events:#x}): epoll {want:?}, subject {got:?}"
                    ));
                }
                if let Some(enc) = subject.broken_at_add() {
                    // What the reference will report at the next wait (P24): the typed
                    // kevent said it at ADD and left no registration, so neither may epoll.
                    let revents = poll_now(fd, ref_events as i16) as u16 as u32;
                    let (want_now, errno) = typed::Typed::expect(fd, events, revents);
                    let want_now = want_now | errno.map_or(0, |x| (x.raw() as u32 & 0x3ff) << 16);
                    if want.is_err() || want_now != enc {
                        return fail(format!(
                            "ADD of slot {slot} ({}): kevent wrote back {} at once, epoll {want:?} and poll {}",
                            bits(events),
                            bits(enc),
                            bits(revents)
                        ));
                    }
                    if let Err(e) = reference.ctl(libc::EPOLL_CTL_DEL, fd, None) {
                        return fail(format!("reference DEL after BROKEN at ADD: {e:?}"));
                    }
                    regs[s] = Reg::default();
                    continue;
                }
                if want.is_ok() {
                    let r = &mut regs[s];
                    if op == libc::EPOLL_CTL_DEL {
                        *r = Reg::default();
                    } else {
                        *r = Reg {
                            registered: true,
                            fired: false,
                            oneshot: events & E_ONESHOT != 0,
                            events,
                            data,
                        };
                    }
                }
            }
            Op::Ready { slot } => {
                let s = slot as usize;
                let Some(fd) = world.fd(s) else {
                    continue;
                };
                let Some(marked) = subject.ready(fd) else {
                    continue;
                };
                let r = regs[s];
                let armed = r.registered && !r.fired;
                if marked != armed as u32 {
                    return fail(format!(
                        "READY of slot {slot} marked {marked}, registration {r:?} (armed: {armed})"
                    ));
                }
                if armed {
                    // D17: a LAST_CHECK'd mark re-evaluates the source as EPOLL_CTL_MOD does.
                    let ev = libc::epoll_event {
                        events: if subject.typed() {
                            typed::Typed::reference_mask(fd, r.events)
                        } else {
                            r.events
                        },
                        u64: r.data,
                    };
                    if let Err(e) = reference.ctl(libc::EPOLL_CTL_MOD, fd, Some(ev)) {
                        return fail(format!("reference MOD for READY: {e:?}"));
                    }
                }
            }
            Op::Wait => {
                let na = match reference.wait(&mut a) {
                    Ok(n) => n,
                    Err(e) => return fail(format!("reference epoll_wait: {e:?}")),
                };
                let nb = match subject.wait(&mut b) {
                    Ok(n) => n,
                    Err(e) => return fail(format!("subject wait: {e:?}")),
                };
                let mut sa = sorted(&a[..na]);
                let mut sb = sorted(&b[..nb]);
                let mut broken = Vec::new();
                if subject.typed() {
                    // A registered fd that the sequence closed: epoll forgot it, a kevent
                    // reports it once as BROKEN with -EBADF (D10, P24).
                    let ebadf = typed::BROKEN | ((Errno::EBADF.raw() as u32) << 16);
                    sb.retain(|&(s, e, _)| !(world.fd(s).is_none() && e == ebadf));
                    // What the typed kevents owe for what epoll reported (P9, P24).
                    for (s, e, _) in sa.iter_mut() {
                        let Some(fd) = world.fd(*s) else { continue };
                        let (want, errno) = typed::Typed::expect(fd, regs[*s].events, *e);
                        *e = match errno {
                            Some(x) => want | ((x.raw() as u32 & 0x3ff) << 16),
                            None => want,
                        };
                        if want & typed::BROKEN != 0 {
                            broken.push(*s);
                            if errno.is_none() {
                                // A socket error: whatever SO_ERROR said.
                                for (s2, e2, _) in sb.iter_mut() {
                                    if s2 == s && *e2 & typed::BROKEN != 0 {
                                        *e2 = typed::BROKEN;
                                    }
                                }
                            }
                        }
                    }
                    sa.sort_unstable();
                    sb.sort_unstable();
                }
                if sa != sb {
                    return fail(format!(
                        "wait: epoll reported {}, subject {} (slot, events, data)",
                        show(&sa),
                        show(&sb)
                    ));
                }
                for &(s, _, _) in &sa {
                    if regs[s].oneshot {
                        regs[s].fired = true;
                    }
                }
                for s in broken {
                    // BROKEN ended the kevent's registration (P5); epoll's stays: end it.
                    if let Some(fd) = world.fd(s) {
                        if let Err(e) = reference.ctl(libc::EPOLL_CTL_DEL, fd, None) {
                            return fail(format!("reference DEL after BROKEN: {e:?}"));
                        }
                    }
                    regs[s] = Reg::default();
                }
            }
            Op::Write { chan, n } => world.write(chan, n as usize),
            Op::Read { chan, n } => world.read(chan, n as usize),
            Op::Fill { chan } => world.fill(chan),
            Op::Drain { chan } => world.drain(chan),
            Op::Shut { end, how } => world.shut(end as usize, how),
            Op::CloseWriter { fifo } => {
                let c = if fifo { Chan::Fifo } else { Chan::Pipe };
                let w = World::ends(c).0;
                closed |= regs[w].registered;
                regs[w] = Reg::default();
                world.close_writer(c);
            }
        }
    }
    subject.finish(closed).map_err(|e| (ops.len(), e))
}

fn show(v: &[(usize, u32, u64)]) -> String {
    let items: Vec<String> = v
        .iter()
        .map(|(s, e, d)| format!("({s}, {}, {d:#x})", bits(*e)))
        .collect();
    format!("[{}]", items.join(", "))
}

/// An epoll mask in words.
pub fn bits(e: u32) -> String {
    let names = [
        (E_IN, "IN"),
        (E_PRI, "PRI"),
        (E_OUT, "OUT"),
        (libc::EPOLLERR as u32, "ERR"),
        (libc::EPOLLHUP as u32, "HUP"),
        (E_RDHUP, "RDHUP"),
        (E_ET, "ET"),
        (E_ONESHOT, "ONESHOT"),
        (typed::BROKEN, "BROKEN"),
    ];
    let mut s: Vec<&str> = names
        .iter()
        .filter(|(b, _)| e & b != 0)
        .map(|(_, n)| *n)
        .collect();
    let rest = e & !names.iter().fold(0, |a, (b, _)| a | b);
    let extra = format!("{rest:#x}");
    if rest != 0 {
        s.push(&extra);
    }
    if s.is_empty() {
        "0".into()
    } else {
        s.join("|")
    }
}

/// Shrinks a failing sequence: drop chunks (halving), then simplify single operations,
/// until nothing smaller fails.
pub fn shrink<T: Simplify>(ops: Vec<T>, fails: &mut dyn FnMut(&[T]) -> bool) -> (Vec<T>, usize) {
    let mut cur = ops;
    let mut tries = 0;
    loop {
        let before = cur.clone();
        let mut size = (cur.len() / 2).max(1);
        loop {
            let mut at = 0;
            while at + size <= cur.len() {
                let cand: Vec<T> = cur[..at].iter().chain(&cur[at + size..]).cloned().collect();
                tries += 1;
                if fails(&cand) {
                    cur = cand;
                } else {
                    at += size;
                }
            }
            if size == 1 {
                break;
            }
            size /= 2;
        }
        for at in 0..cur.len() {
            for s in cur[at].simpler() {
                let mut cand = cur.clone();
                cand[at] = s;
                tries += 1;
                if fails(&cand) {
                    cur = cand;
                    break;
                }
            }
        }
        if cur == before {
            return (cur, tries);
        }
    }
}

/// The number in environment variable `name`, if it is set (a panic if it is not a number).
pub fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().map(|v| {
        v.parse()
            .unwrap_or_else(|_| panic!("{name}: a number, not {v:?}"))
    })
}

/// The base seed (`KEVENT_DIFF_SEED`: a number, or `random`).
pub fn base_seed() -> u64 {
    match std::env::var("KEVENT_DIFF_SEED").as_deref() {
        Ok("random") => clock_ns(libc::CLOCK_REALTIME),
        Ok(v) => v.parse().expect("KEVENT_DIFF_SEED: a number or `random`"),
        Err(_) => 0x0065_706f_6c6c,
    }
}

/// The ops of the case with this seed (its length from the seed too, at most `max_len`).
pub fn case(seed: u64, max_len: usize) -> Vec<Op> {
    let mut r = Rng::new(seed);
    let len = 1 + r.below(max_len as u64) as usize;
    (0..len).map(|_| gen_op(&mut r, true)).collect()
}

/// Runs the configured random cases against the subjects `make(seed)` builds (the seed may
/// choose among variants; `describe(seed)` names the one it chose); panics with the shrunk
/// minimal sequence and its seed at the first disagreement. Returns (cases, operations).
pub fn explore<S: Subject>(
    test: &str,
    salt: u64,
    describe: &dyn Fn(u64) -> String,
    make: &dyn Fn(u64) -> S,
) -> (u64, u64) {
    let base = base_seed() ^ salt;
    let replay = std::env::var("KEVENT_DIFF_REPLAY").ok().map(|v| {
        u64::from_str_radix(v.trim_start_matches("0x"), 16)
            .expect("KEVENT_DIFF_REPLAY: the hex seed a failure printed")
    });
    let long = env_u64("KEVENT_DIFF_LONG");
    let total_ops = env_u64("KEVENT_DIFF_OPS");
    let cases = env_u64("KEVENT_DIFF_CASES").unwrap_or(400);
    let max_len = env_u64("KEVENT_DIFF_LEN").unwrap_or(80) as usize;
    let start = Instant::now();
    let (mut n_cases, mut n_ops) = (0u64, 0u64);
    let mut k = 0u64;
    loop {
        let seed = replay.unwrap_or(base.wrapping_add(k));
        k += 1;
        let ops = match long {
            Some(n) => case(seed, 1)
                .into_iter()
                .chain({
                    let mut r = Rng::new(seed ^ 0x10e6);
                    (0..n).map(move |_| gen_op(&mut r, false))
                })
                .collect(),
            None => case(seed, max_len),
        };
        let mk = || make(seed);
        if let Err((at, why)) = run(&ops, &mk) {
            let (min, tries) = shrink(ops.clone(), &mut |cand| run(cand, &mk).is_err());
            let min_why = run(&min, &mk).err().map(|e| e.1).unwrap_or_default();
            panic!(
                "[{test}] epoll and {} disagree (seed {seed:#x}) at op {at} of {}: {why}\n\
                 shrunk in {tries} replays to {} ops: {min:#?}\nminimal failure: {min_why}\n\
                 replay: KEVENT_DIFF_REPLAY={seed:x}{}",
                describe(seed),
                ops.len(),
                min.len(),
                long.map_or(String::new(), |n| format!(" KEVENT_DIFF_LONG={n}")),
            );
        }
        n_cases += 1;
        n_ops += ops.len() as u64;
        let done = if replay.is_some() || long.is_some() {
            true
        } else if let Some(t) = total_ops {
            n_ops >= t
        } else {
            n_cases >= cases
        };
        if done {
            break;
        }
    }
    eprintln!(
        "[{test}] {n_cases} sequences, {n_ops} operations (seeds {base:#x}..), all agree with epoll ({:.1?})",
        start.elapsed()
    );
    (n_cases, n_ops)
}
