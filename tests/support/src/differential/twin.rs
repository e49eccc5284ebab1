//! The native-against-fallback differential driver (issue 24, "native and fallback never
//! disagree"): one random sequence of kevent operations applied to two *twin worlds* in the
//! same process, one on each backend, compared after every step. Neither backend is the
//! reference: the spec says what both must do, and wherever it lets them differ the driver
//! compares only what it fixes (below).
//!
//! A world is a queue with a ring of [`RING`] slots and its own fds, each at a fixed number
//! (`base + slot`, so that fd numbers map back to slots and the two worlds never reuse each
//! other's numbers): an AF_UNIX stream socketpair with the smallest buffers, a pipe shrunk to
//! one page, an eventfd, a directory, and a slot for duplicates. Operations: ADD (batches
//! of SOCKET, PIPE, POLL, INODE, UNOTIFY and SIGNAL kevents with random masks, ONESHOT, ET,
//! ALWAYS_QUEUE, REQ_READY), REMOVE and MODIFY batches, READY of one kevent, READY(0);
//! writes, reads, fills, drains, `shutdown`, `close` and `dup2` of watched fds (D10),
//! creating and removing directory entries, signals sent to the thread (SIGNAL kevents);
//! zero-timeout `kevent_get_events` and `kevent_wait` (through the ring), commits (all, a
//! prefix, stale, a wrong `over`, an index past the ring: D12, D13) and waits with a long
//! timeout that a signal handler interrupts (spec section 3: it returns what is ready,
//! possibly 0, at once). Compared: every call's return value, every written-back entry, every
//! delivered event set (`type`, the id mapped back to its slot, `event`, `req_flags`,
//! `ret_flags`, `ret_data`, the cookie), the ring slots a wait filled, and whether a blocking
//! wait returned before its timeout.
//!
//! Where the spec leaves room, the driver holds both backends to what it does fix:
//! * The order of events within a wait is free: event sets are compared sorted, and no take
//!   is partial (the buffer and the ring always have room for every kevent that exists).
//! * A watched fd closed or replaced without REMOVE (D10): the old kevent is reported at
//!   most once, as BROKEN `-EBADF` (or, with a duplicate keeping the file open, P15 on the
//!   fallback, until the next `kevent_ctl` on its key), so from the close on its key is
//!   *stale*: its events are not compared, nor are REMOVE's, MODIFY's and READY's answers for
//!   it, until a REMOVE of the key or an ADD that registers it on both backends. An ADD of a
//!   stale key is compared exactly: "the stale registration never causes `-EEXIST`".
//! * One fd-type kevent per fd number (P16: the fallback refuses a second type, a kernel
//!   registers both): the generator's ADD never names a second type for a number.
//! * SOCKET and PIPE kevents always carry LAST_CHECK (P19: without it a kernel may deliver
//!   the readiness it saw at queueing time); POLL has it anyway. No NOMASK signals (a kernel
//!   NOMASK kevent keeps the signal from the fallback's handler).
//! * A pending socket error is consumed by the fallback's report (P49): the driver clears
//!   them in both worlds after every `close` and `dup2`, so SOCKET's `-SO_ERROR` reports
//!   are left to the per-type tests.
//! * After an ADD of a stale key, the old kevent's one BROKEN `-EBADF` report may still
//!   come (D10's "at most once" does not say when): it is not compared.
//! * A stale key whose number holds its registered file again (`dup2` back) before the
//!   backend looked: the old registration may be live again on one backend and gone on the
//!   other, so that ADD's answer for it is not compared.
//!
//! A failing sequence is shrunk (the epoll differential's shrinker) and printed with its seed
//! and a replay command. Knobs: `KEVENT_NATDIFF_OPS` (operations to run, default 20,000;
//! the VM lane runs 1,000,000), `KEVENT_NATDIFF_LEN` (longest sequence, default 150),
//! `KEVENT_NATDIFF_SEED` (a number or `random`), `KEVENT_NATDIFF_REPLAY=<hex seed>`.

use std::collections::HashSet;
use std::ffi::CString;
use std::os::fd::{AsRawFd, IntoRawFd, RawFd};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::{Simplify, env_u64, one_page, set_int, shrink};
use crate::*;

/// The ring size of each world's queue.
pub const RING: u32 = 32;
/// More than the kevents that can exist in a world at once: a get's buffer size, and the
/// free ring slots every wait finds (the driver commits everything before a wait otherwise).
const ROOM: u32 = 20;
/// The timeout of a wait a signal handler interrupts; it counts as interrupted when it
/// returned within half of it. Long: an interrupted wait returns within milliseconds, but a
/// guest on a loaded host can lose seconds of its clock at once (4 s was once not enough).
const BLOCK: Duration = Duration::from_secs(20);

/// The fd slots of a world.
pub const FD_SLOTS: usize = 7;
/// Slot numbers: the socketpair's ends, the pipe's read and write ends, the eventfd, the
/// directory and the slot for duplicates.
pub const S0: u8 = 0;
/// See [`S0`].
pub const S1: u8 = 1;
/// See [`S0`].
pub const PR: u8 = 2;
/// See [`S0`].
pub const PW: u8 = 3;
/// See [`S0`].
pub const EV: u8 = 4;
/// See [`S0`].
pub const DIR: u8 = 5;
/// See [`S0`].
pub const DUP: u8 = 6;
/// The signals SIGNAL kevents watch (a counting handler is installed for each).
pub const SIGS: [i32; 2] = [libc::SIGUSR1, libc::SIGUSR2];
/// The signal that interrupts blocking waits (its handler has no `SA_RESTART`).
pub const INTR: i32 = libc::SIGALRM;
/// Where the worlds' fds live: world `w`'s slot `s` is `BASES[w] + s` (below the fallback's
/// internal fd floor, half the fd limit).
const BASES: [RawFd; 2] = [300, 340];

/// The file a slot holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum File {
    Sock0,
    Sock1,
    PipeR,
    PipeW,
    Event,
    Dir,
}

/// A kevent type whose id is an fd.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Ty {
    /// `KEVENT_SOCKET`.
    Socket,
    /// `KEVENT_PIPE`.
    Pipe,
    /// `KEVENT_POLL`.
    Poll,
    /// `KEVENT_INODE`.
    Inode,
}

impl Ty {
    fn raw(self) -> u32 {
        match self {
            Ty::Socket => KEVENT_SOCKET,
            Ty::Pipe => KEVENT_PIPE,
            Ty::Poll => KEVENT_POLL,
            Ty::Inode => KEVENT_INODE,
        }
    }
}

/// A kevent's key, world-independent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Key {
    /// An fd-type kevent on a slot.
    Fd(Ty, u8),
    /// UNOTIFY with this id.
    User(u8),
    /// SIGNAL for `SIGS[i]`.
    Signal(u8),
}

/// One entry of a ctl batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The kevent.
    pub key: Key,
    /// Its `event` mask.
    pub event: u32,
    /// Its `req_flags`.
    pub req: u32,
    /// Its cookie.
    pub cookie: u64,
}

/// A commit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Commit {
    /// Everything produced.
    All,
    /// The first half of what is uncommitted.
    Half,
    /// The current consumer index again: stale, 0.
    Stale,
    /// A `ring_over` two ahead: `EOVERFLOW`.
    BadOver,
    /// `new_uidx` = the ring size: `EINVAL`.
    BadIndex,
}

/// One step of a sequence.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// `kevent_ctl(ADD)`.
    Add(Vec<Entry>),
    /// `kevent_ctl(REMOVE)`.
    Remove(Vec<Key>),
    /// `kevent_ctl(MODIFY)`.
    Modify(Vec<Entry>),
    /// `kevent_ctl(READY)` of one kevent.
    Ready(Key),
    /// `kevent_ctl(READY)` with no entries: a wake-up.
    Wake,
    /// A zero-timeout `kevent_get_events` with this `min_nr`.
    Get {
        /// `min_nr`.
        min: u8,
    },
    /// A zero-timeout `kevent_wait`.
    RingWait {
        /// `num`: 0, the ring's capacity, or more than the ring (`EINVAL`).
        num: u32,
        /// With an `old_uidx` that is not the consumer index (0 at once).
        stale: bool,
    },
    /// `kevent_commit`.
    Commit(Commit),
    /// A wait with a long timeout while another thread sends [`INTR`] to this one until
    /// it returns.
    Blocking {
        /// `kevent_wait` (else `kevent_get_events`).
        ring: bool,
    },
    /// Write `n` bytes to a slot (the eventfd: add `n`).
    Write {
        /// The slot.
        slot: u8,
        /// How much.
        n: u16,
    },
    /// Read up to `n` bytes from a slot.
    Read {
        /// The slot.
        slot: u8,
        /// How much.
        n: u16,
    },
    /// Write until `EAGAIN`.
    Fill {
        /// The slot.
        slot: u8,
    },
    /// Read until `EAGAIN`.
    Drain {
        /// The slot.
        slot: u8,
    },
    /// `shutdown(slot, how)`.
    Shut {
        /// The slot.
        slot: u8,
        /// `SHUT_RD`, `SHUT_WR` or `SHUT_RDWR`.
        how: i32,
    },
    /// `close(slot)`.
    Close {
        /// The slot.
        slot: u8,
    },
    /// `dup2(src, dst)`.
    Dup2 {
        /// The slot duplicated.
        src: u8,
        /// The slot whose number receives it.
        dst: u8,
    },
    /// Create entry `f<name>` in the directory.
    Create {
        /// Which name.
        name: u8,
    },
    /// Remove entry `f<name>` from the directory.
    Unlink {
        /// Which name.
        name: u8,
    },
    /// `tgkill` of this thread with `SIGS[sig]`.
    Signal {
        /// Which signal.
        sig: u8,
    },
}

// ---------------------------------------------------------------------------------------------
// Generating

/// The generator: random operations that come back to the kevents and fds of the last few
/// (so that chains like ADD, `close`, REMOVE, `dup2`, ADD of one key are frequent).
#[derive(Debug)]
pub struct Gen {
    r: Rng,
    recent: Vec<Key>,
    last_dup: Option<(u8, u8)>,
}

impl Gen {
    /// A generator from a seed.
    pub fn new(seed: u64) -> Gen {
        Gen {
            r: Rng::new(seed),
            recent: Vec::new(),
            last_dup: None,
        }
    }

    fn remember(&mut self, k: Key) {
        if self.recent.len() == 4 {
            self.recent.remove(0);
        }
        self.recent.push(k);
    }

    /// A `dup2`: often the last one again (putting a file back on the number it left);
    /// the kevent that would watch the new number becomes a recent key.
    fn dup2(&mut self, slot: u8, other: u8) -> Op {
        let (src, dst) = match self.last_dup {
            Some(last) if self.r.pct(40) => last,
            _ => (
                if self.r.pct(70) { other } else { slot },
                if self.r.pct(70) { DUP } else { slot },
            ),
        };
        self.last_dup = Some((src, dst));
        let ty = match gen_key(&mut self.r) {
            Key::Fd(t, _) if self.r.pct(30) => t,
            _ => natural(&mut self.r, src),
        };
        self.remember(Key::Fd(ty, dst));
        Op::Dup2 { src, dst }
    }

    /// A key: half of the time one of the last few.
    fn key(&mut self) -> Key {
        let k = if !self.recent.is_empty() && self.r.pct(50) {
            self.recent[self.r.below(self.recent.len() as u64) as usize]
        } else {
            gen_key(&mut self.r)
        };
        self.remember(k);
        k
    }

    /// An fd slot: half of the time one a recent key watches.
    fn slot(&mut self) -> u8 {
        let recent: Vec<u8> = self
            .recent
            .iter()
            .filter_map(|k| match k {
                Key::Fd(_, s) => Some(*s),
                _ => None,
            })
            .collect();
        if !recent.is_empty() && self.r.pct(50) {
            recent[self.r.below(recent.len() as u64) as usize]
        } else {
            self.r.below(FD_SLOTS as u64) as u8
        }
    }
}

/// A type that fits the file `slot` starts with.
fn natural(r: &mut Rng, slot: u8) -> Ty {
    match slot {
        S0 | S1 => [Ty::Socket, Ty::Poll][r.below(2) as usize],
        PR | PW => [Ty::Pipe, Ty::Poll][r.below(2) as usize],
        EV => Ty::Poll,
        DIR => Ty::Inode,
        _ => [Ty::Socket, Ty::Pipe, Ty::Poll, Ty::Inode][r.below(4) as usize],
    }
}

fn gen_key(r: &mut Rng) -> Key {
    match r.below(100) {
        0..=71 => {
            let slot = r.below(FD_SLOTS as u64) as u8;
            let ty = if r.pct(85) {
                natural(r, slot)
            } else {
                [Ty::Socket, Ty::Pipe, Ty::Poll, Ty::Inode][r.below(4) as usize]
            };
            Key::Fd(ty, slot)
        }
        72..=89 => Key::User(1 + r.below(3) as u8),
        _ => Key::Signal(r.below(SIGS.len() as u64) as u8),
    }
}

fn some_bits(r: &mut Rng, bits: &[u32]) -> u32 {
    let mut e = 0;
    while e == 0 {
        for &b in bits {
            if r.pct(50) {
                e |= b;
            }
        }
    }
    e
}

fn gen_entry(g: &mut Gen) -> Entry {
    let key = g.key();
    let r = &mut g.r;
    let event = match key {
        Key::Fd(Ty::Socket, _) => some_bits(
            r,
            &[KEVENT_SOCKET_RECV, KEVENT_SOCKET_SEND, KEVENT_SOCKET_ACCEPT],
        ),
        Key::Fd(Ty::Pipe, _) => some_bits(r, &[KEVENT_SOCKET_RECV, KEVENT_SOCKET_SEND]),
        Key::Fd(Ty::Poll, _) => some_bits(
            r,
            &[
                KEVENT_POLL_POLLIN,
                KEVENT_POLL_POLLOUT,
                KEVENT_POLL_POLLRDHUP,
                KEVENT_POLL_POLLPRI,
                KEVENT_POLL_POLLHUP,
            ],
        ),
        Key::Fd(Ty::Inode, _) => some_bits(r, &[KEVENT_INODE_CREATE, KEVENT_INODE_REMOVE]),
        Key::User(_) => 1 + r.below(0xff) as u32,
        Key::Signal(_) => KEVENT_SIGNAL_DELIVERY,
    };
    let mut req = 0;
    for (bit, p) in [
        (KEVENT_REQ_ONESHOT, 20),
        (KEVENT_REQ_ET, 30),
        (KEVENT_REQ_ALWAYS_QUEUE, 25),
        (KEVENT_REQ_READY, 10),
        (KEVENT_REQ_WAKEUP_ALL, 10),
    ] {
        if r.pct(p) {
            req |= bit;
        }
    }
    if matches!(key, Key::Fd(Ty::Socket | Ty::Pipe, _)) {
        req |= KEVENT_REQ_LAST_CHECK;
    }
    Entry {
        key,
        event,
        req,
        cookie: r.next_u64(),
    }
}

fn batch<T>(g: &mut Gen, mut one: impl FnMut(&mut Gen) -> T) -> Vec<T> {
    let n = if g.r.pct(80) { 1 } else { 2 + g.r.below(2) };
    (0..n).map(|_| one(g)).collect()
}

/// One random operation.
pub fn gen_op(g: &mut Gen) -> Op {
    let slot = g.slot();
    let dup_src = g.slot();
    let op = g.r.below(1000);
    match op {
        0..=139 => return Op::Add(batch(g, gen_entry)),
        140..=199 => return Op::Remove(batch(g, Gen::key)),
        200..=269 => return Op::Modify(batch(g, gen_entry)),
        270..=319 => return Op::Ready(g.key()),
        845..=874 => return g.dup2(slot, dup_src),
        _ => {}
    }
    let r = &mut g.r;
    match op {
        320..=329 => Op::Wake,
        330..=469 => Op::Get {
            min: r.below(4) as u8,
        },
        470..=529 => Op::RingWait {
            num: [0, RING - 1, RING - 1, RING - 1, RING + 1][r.below(5) as usize],
            stale: r.pct(10),
        },
        530..=579 => Op::Commit(
            [
                Commit::All,
                Commit::All,
                Commit::Half,
                Commit::Half,
                Commit::Stale,
                Commit::BadOver,
                Commit::BadIndex,
            ][r.below(7) as usize],
        ),
        580..=584 => Op::Blocking { ring: r.pct(50) },
        585..=684 => Op::Write {
            slot,
            n: 1 + r.below(3000) as u16,
        },
        685..=764 => Op::Read {
            slot,
            n: 1 + r.below(3000) as u16,
        },
        765..=784 => Op::Fill { slot },
        785..=814 => Op::Drain { slot },
        815..=824 => Op::Shut {
            slot,
            how: [libc::SHUT_RD, libc::SHUT_WR, libc::SHUT_RDWR][r.below(3) as usize],
        },
        825..=844 => Op::Close { slot },
        875..=914 => Op::Create {
            name: r.below(3) as u8,
        },
        915..=954 => Op::Unlink {
            name: r.below(3) as u8,
        },
        _ => Op::Signal {
            sig: r.below(SIGS.len() as u64) as u8,
        },
    }
}

impl Simplify for Op {
    fn simpler(&self) -> Vec<Op> {
        let mut v = Vec::new();
        let fewer_bits = |e: &Entry| -> Vec<Entry> {
            let mut out = Vec::new();
            for bit in [
                KEVENT_REQ_WAKEUP_ALL,
                KEVENT_REQ_READY,
                KEVENT_REQ_ALWAYS_QUEUE,
                KEVENT_REQ_ET,
                KEVENT_REQ_ONESHOT,
            ] {
                if e.req & bit != 0 {
                    out.push(Entry {
                        req: e.req & !bit,
                        ..*e
                    });
                }
            }
            if e.cookie != 0 {
                out.push(Entry { cookie: 0, ..*e });
            }
            out
        };
        match self {
            Op::Add(es) | Op::Modify(es) => {
                let add = matches!(self, Op::Add(_));
                let wrap = |es: Vec<Entry>| if add { Op::Add(es) } else { Op::Modify(es) };
                if es.len() > 1 {
                    for e in es {
                        v.push(wrap(vec![*e]));
                    }
                }
                for (i, e) in es.iter().enumerate() {
                    for s in fewer_bits(e) {
                        let mut c = es.clone();
                        c[i] = s;
                        v.push(wrap(c));
                    }
                }
            }
            Op::Remove(ks) if ks.len() > 1 => {
                for k in ks {
                    v.push(Op::Remove(vec![*k]));
                }
            }
            Op::Get { min } if *min > 0 => v.push(Op::Get { min: 0 }),
            Op::Blocking { ring: true } => v.push(Op::Blocking { ring: false }),
            Op::Commit(c) if *c != Commit::All => v.push(Op::Commit(Commit::All)),
            &Op::Write { slot, n } if n > 1 => {
                v.push(Op::Write { slot, n: 1 });
                v.push(Op::Write { slot, n: n / 2 });
            }
            &Op::Read { slot, n } if n > 1 => {
                v.push(Op::Read { slot, n: 1 });
                v.push(Op::Read { slot, n: n / 2 });
            }
            &Op::Fill { slot } => v.push(Op::Write { slot, n: 1 }),
            &Op::Drain { slot } => v.push(Op::Read { slot, n: 1 }),
            _ => {}
        }
        v
    }
}

// ---------------------------------------------------------------------------------------------
// A world

/// One backend's queue and fds.
struct World {
    b: Backend,
    q: Queue,
    base: RawFd,
    files: [Option<File>; FD_SLOTS],
    dir: PathBuf,
    /// The consumer index after our last commit.
    uidx: u32,
    /// The produced, uncommitted ring slots, in order: whether each holds a stale kevent.
    pending: Vec<bool>,
}

fn cpath(p: &std::path::Path) -> CString {
    CString::new(p.as_os_str().as_encoded_bytes()).expect("path without NUL")
}

/// -errno of the last failed call, or the value.
fn res(r: isize) -> i64 {
    if r < 0 {
        -(Errno::last().raw() as i64)
    } else {
        r as i64
    }
}

impl World {
    fn new(b: Backend, w: usize) -> World {
        let base = BASES[w];
        let q = Queue::with_ring(b, RING);
        let (s0, s1) = socketpair();
        for s in [&s0, &s1] {
            set_int(s.as_raw_fd(), libc::SOL_SOCKET, libc::SO_SNDBUF, 1);
            set_int(s.as_raw_fd(), libc::SOL_SOCKET, libc::SO_RCVBUF, 1);
        }
        let (pr, pw) = pipe();
        one_page(pw.as_raw_fd());
        let ev = eventfd(0);
        let dir = temp_dir(&format!("twin{w}"));
        let c = cpath(&dir);
        // SAFETY: `c` is a NUL-terminated path.
        let d = owned(
            unsafe {
                libc::open(
                    c.as_ptr(),
                    libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
                )
            },
            "open dir",
        );
        for (i, f) in [s0, s1, pr, pw, ev, d].into_iter().enumerate() {
            let fd = f.into_raw_fd();
            // SAFETY: moves our own fd onto a number of this world's range (closing whatever
            // an earlier world of this process left there: nothing, they are closed on drop).
            let r = unsafe { libc::dup3(fd, base + i as RawFd, libc::O_CLOEXEC) };
            assert_eq!(r, base + i as RawFd, "dup3: {}", Errno::last());
            close(fd);
        }
        World {
            b,
            q,
            base,
            files: [
                Some(File::Sock0),
                Some(File::Sock1),
                Some(File::PipeR),
                Some(File::PipeW),
                Some(File::Event),
                Some(File::Dir),
                None,
            ],
            dir,
            uidx: 0,
            pending: Vec::new(),
        }
    }

    fn fd(&self, slot: u8) -> RawFd {
        self.base + slot as RawFd
    }

    fn ukevent(&self, e: &Entry) -> ukevent {
        let mut u = match e.key {
            Key::Fd(ty, slot) => on_fd(ty.raw(), self.fd(slot), e.event, e.req),
            Key::User(id) => user(id as u64, e.req),
            Key::Signal(i) => signal(SIGS[i as usize], false, e.req),
        };
        if let Key::User(_) = e.key {
            u.event = e.event;
        }
        u.set_cookie(e.cookie);
        u
    }

    fn key_entry(&self, k: Key) -> ukevent {
        self.ukevent(&Entry {
            key: k,
            event: 0,
            req: 0,
            cookie: 0,
        })
    }

    /// The slot an fd number of this world is, if it is one.
    fn slot_of(&self, fd: u32) -> Option<u8> {
        let s = (fd as i64) - self.base as i64;
        (0..FD_SLOTS as i64).contains(&s).then_some(s as u8)
    }

    /// An entry or event in world-independent terms.
    fn map(&self, u: &ukevent) -> Ev {
        let key = match u.type_ {
            KEVENT_SOCKET | KEVENT_PIPE | KEVENT_POLL | KEVENT_INODE => {
                let ty = match u.type_ {
                    KEVENT_SOCKET => Ty::Socket,
                    KEVENT_PIPE => Ty::Pipe,
                    KEVENT_POLL => Ty::Poll,
                    _ => Ty::Inode,
                };
                match self.slot_of(u.id.raw()[0]) {
                    Some(s) if u.id.raw()[1] == 0 => Some(Key::Fd(ty, s)),
                    _ => None,
                }
            }
            KEVENT_UNOTIFY => match u.id.as_u64() {
                i @ 1..=3 => Some(Key::User(i as u8)),
                _ => None,
            },
            KEVENT_SIGNAL => SIGS
                .iter()
                .position(|&s| kevent_id::signal(s, false).as_u64() == u.id.as_u64())
                .map(|i| Key::Signal(i as u8)),
            _ => None,
        };
        Ev {
            key: key.ok_or_else(|| format!("{:?}", u.id)),
            type_: u.type_,
            event: u.event,
            req: u.req_flags,
            ret_flags: u.ret_flags,
            data: u.ret_data,
            cookie: u.cookie(),
        }
    }

    fn free(&self) -> u32 {
        kevent_sys::ring::free_slots(RING, self.q.kidx(), self.uidx)
    }

    /// Reads the slots a wait produced (from `k0` to the current `ring_kidx`).
    fn produced(&self, k0: u32) -> Vec<ukevent> {
        let k1 = self.q.kidx();
        let n = kevent_sys::ring::occupancy(RING, k1, k0);
        (0..n)
            .map(|i| self.q.slot(kevent_sys::ring::advance(RING, k0, i)))
            .collect()
    }

    /// `kevent_commit(new_uidx)` with `over`; bookkeeping of what it released.
    fn commit(&mut self, new_uidx: u32, over: u32) -> (Result<u32, Errno>, usize) {
        let r = self.q.commit(new_uidx, over);
        let mut stale = 0;
        if let Ok(n) = r {
            if n > 0 {
                let n = (n as usize).min(self.pending.len());
                stale = self.pending.drain(..n).filter(|&s| s).count();
                self.uidx = new_uidx;
            }
        }
        (r, stale)
    }
}

impl Drop for World {
    fn drop(&mut self) {
        for s in 0..FD_SLOTS as u8 {
            if self.files[s as usize].is_some() {
                close(self.fd(s));
            }
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// An entry or event, world-independent: the id mapped back to its key (`Err` with the raw
/// id when it names none of the world's fds, signals or ids).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ev {
    key: Result<Key, String>,
    type_: u32,
    event: u32,
    req: u32,
    ret_flags: u32,
    data: [u32; 2],
    cookie: u64,
}

impl Ev {
    fn sort_key(&self) -> String {
        format!("{self:?}")
    }
    fn stale(&self, stale: &HashSet<Key>) -> bool {
        self.key.as_ref().is_ok_and(|k| stale.contains(k))
    }
}

fn show(evs: &[Ev]) -> String {
    let v: Vec<String> = evs
        .iter()
        .map(|e| {
            format!(
                "{{{} ev {:#x} req {:#x} ret {:#x} data {:?} cookie {:#x}}}",
                match &e.key {
                    Ok(k) => format!("{k:?}"),
                    Err(raw) => format!("type {} id {raw}", e.type_),
                },
                e.event,
                e.req,
                e.ret_flags,
                e.data.map(|d| d as i32),
                e.cookie
            )
        })
        .collect();
    format!("[{}]", v.join(", "))
}

fn sorted(mut v: Vec<Ev>) -> Vec<Ev> {
    v.sort_by_key(Ev::sort_key);
    v
}

// ---------------------------------------------------------------------------------------------
// Signals

fn gettid() -> libc::pid_t {
    // SAFETY: no arguments.
    unsafe { libc::syscall(libc::SYS_gettid) as libc::pid_t }
}

fn tgkill(tid: libc::pid_t, sig: i32) {
    // SAFETY: integers only; the thread is this process's.
    unsafe { libc::syscall(libc::SYS_tgkill, libc::getpid(), tid, sig) };
}

/// Installs the counting handlers: [`SIGS`] (a signal no kevent watches must not end the
/// process) and [`INTR`] without `SA_RESTART`. Process-wide: call it in a child process.
pub fn install_handlers() {
    for s in SIGS {
        install_counting_handler(s, true);
    }
    install_counting_handler(INTR, false);
}

/// Runs `wait` while another thread sends [`INTR`] to this one every millisecond until it
/// returns; returns its result and whether it returned early (within half of [`BLOCK`]).
fn interrupted<T>(wait: impl FnOnce() -> T) -> (T, bool) {
    let stop = Arc::new(AtomicBool::new(false));
    let tid = gettid();
    let s2 = stop.clone();
    let h = std::thread::spawn(move || {
        while !s2.load(Ordering::SeqCst) {
            tgkill(tid, INTR);
            std::thread::sleep(Duration::from_millis(1));
        }
    });
    let t0 = Instant::now();
    let r = wait();
    let early = t0.elapsed() < BLOCK / 2;
    stop.store(true, Ordering::SeqCst);
    h.join().expect("interrupter");
    (r, early)
}

// ---------------------------------------------------------------------------------------------
// Running

/// The state of a sequence both worlds share.
struct Twins {
    w: [World; 2],
    /// Keys whose fd was closed or replaced while (maybe) registered: D10 lets the backends
    /// differ on them until a REMOVE or an ADD that registers them on both.
    stale: HashSet<Key>,
    /// Keys an ADD may have registered (for P16: one fd-type kevent per number).
    maybe: HashSet<Key>,
    /// Per world: stale keys an ADD registered again, whose old kevent may still be
    /// reported once (BROKEN, `-EBADF`).
    orphans: [HashSet<Key>; 2],
    /// The file each fd-type key was last registered on.
    reg_file: std::collections::HashMap<Key, Option<File>>,
}

type Step = Result<(), String>;

fn errno_str(r: &Result<u32, Errno>) -> String {
    match r {
        Ok(n) => format!("{n}"),
        Err(e) => format!("{e:?}"),
    }
}

impl Twins {
    fn both<T: std::fmt::Debug + PartialEq>(
        &mut self,
        what: &str,
        mut f: impl FnMut(&mut World) -> T,
    ) -> Step {
        let a = f(&mut self.w[0]);
        let b = f(&mut self.w[1]);
        if a == b {
            Ok(())
        } else {
            Err(format!(
                "{what}: {} {a:?}, {} {b:?}",
                self.w[0].b.as_str(),
                self.w[1].b.as_str()
            ))
        }
    }

    fn names(&self) -> (&'static str, &'static str) {
        (self.w[0].b.as_str(), self.w[1].b.as_str())
    }

    /// Decision P49: the fallback reads a socket's pending error with `SO_ERROR`, which
    /// clears it; a kernel leaves it pending, so the two worlds' sockets would differ
    /// after the first report (and a second kevent on the same socket, in the same batch
    /// or through a duplicate, would see different things). The driver clears every
    /// pending socket error in both worlds as soon as an operation may have set one (a
    /// `close` or `dup2` of a peer with unread data: `ECONNRESET`), so SOCKET's `-SO_ERROR`
    /// reports are left to the per-type tests (`s5_socket_pipe_poll`).
    fn clear_socket_errors(&self) {
        for w in &self.w {
            for slot in 0..FD_SLOTS as u8 {
                let mut v = 0i32;
                let mut len = std::mem::size_of::<i32>() as libc::socklen_t;
                // SAFETY: `v` and `len` live across the call, `len` is `v`'s size; a slot
                // that is no socket (or closed) answers an error and writes nothing.
                unsafe {
                    libc::getsockopt(
                        w.fd(slot),
                        libc::SOL_SOCKET,
                        libc::SO_ERROR,
                        (&mut v as *mut i32).cast(),
                        &mut len,
                    )
                };
            }
        }
    }

    /// Events of a wait, compared without the stale keys'; each world's ring bookkeeping
    /// notes which of the slots it produced hold stale kevents.
    fn compare_events(
        &mut self,
        what: &str,
        got: [Vec<ukevent>; 2],
        ring: [Vec<ukevent>; 2],
    ) -> Step {
        let mut sets: Vec<Vec<Ev>> = Vec::new();
        for i in 0..2 {
            let w = &mut self.w[i];
            let evs: Vec<Ev> = got[i].iter().map(|u| w.map(u)).collect();
            let in_ring: Vec<Ev> = ring[i].iter().map(|u| w.map(u)).collect();
            if sorted(evs.clone()) != sorted(in_ring.clone()) {
                return Err(format!(
                    "{what}: the {} backend returned {} but its ring got {}",
                    w.b.as_str(),
                    show(&evs),
                    show(&in_ring)
                ));
            }
            // Not compared: a stale key's events, and the one BROKEN -EBADF report the old
            // kevent of a key that an ADD registered again may still give (D10).
            let orphans = &mut self.orphans[i];
            let mut ignored = |e: &Ev| {
                e.stale(&self.stale)
                    || (e.ret_flags == KEVENT_RET_DONE | KEVENT_RET_BROKEN
                        && e.data[1] == Errno::EBADF.negated()
                        && e.key.as_ref().is_ok_and(|k| orphans.remove(k)))
            };
            let keep: Vec<bool> = evs.iter().map(|e| !ignored(e)).collect();
            for e in &in_ring {
                let i = evs.iter().position(|x| x == e).unwrap_or(0);
                w.pending.push(!keep.get(i).copied().unwrap_or(true));
            }
            sets.push(sorted(
                evs.into_iter()
                    .zip(keep)
                    .filter_map(|(e, k)| k.then_some(e))
                    .collect(),
            ));
        }
        if sets[0] != sets[1] {
            let (a, b) = self.names();
            return Err(format!(
                "{what}: {a} delivered {}, {b} delivered {}",
                show(&sets[0]),
                show(&sets[1])
            ));
        }
        // What was delivered as ONESHOT, BROKEN or DONE left the queue (P5): no longer
        // registered anywhere.
        for e in &sets[0] {
            if let Ok(k) = e.key {
                if e.ret_flags & KEVENT_RET_DONE != 0 {
                    self.maybe.remove(&k);
                }
            }
        }
        Ok(())
    }

    /// Commits everything in both worlds when either has fewer than [`ROOM`] free slots,
    /// so that no wait is partial.
    fn make_room(&mut self) -> Step {
        if self.w.iter().all(|w| w.free() >= ROOM) {
            return Ok(());
        }
        self.commit(Commit::All)
            .map_err(|e| format!("making room: {e}"))
    }

    fn commit(&mut self, c: Commit) -> Step {
        let half = c == Commit::Half && !self.w.iter().any(|w| w.pending.iter().any(|&s| s));
        let mut out = Vec::new();
        for w in self.w.iter_mut() {
            let (kidx, over) = (w.q.kidx(), w.q.over());
            let (new_uidx, over) = match c {
                Commit::All => (kidx, over),
                Commit::Half if half => (
                    kevent_sys::ring::advance(RING, w.uidx, w.pending.len() as u32 / 2),
                    over,
                ),
                Commit::Half => (kidx, over),
                Commit::Stale => (w.uidx, over),
                Commit::BadOver => (kidx, over.wrapping_add(2)),
                Commit::BadIndex => (RING, over),
            };
            let (r, stale) = w.commit(new_uidx, over);
            // Compare what was released of the kevents both worlds have.
            out.push(r.map(|n| n - stale as u32));
        }
        if out[0] != out[1] {
            let (a, b) = self.names();
            return Err(format!(
                "commit {c:?}: {a} released {}, {b} {} (without stale kevents)",
                errno_str(&out[0]),
                errno_str(&out[1])
            ));
        }
        Ok(())
    }

    /// ADD: the written-back prefix, compared exactly (stale keys too: D10 says a stale
    /// registration never causes `-EEXIST`).
    fn add(&mut self, es: &[Entry]) -> Step {
        // P16: never a second fd-type kevent on a number.
        let mut es: Vec<Entry> = es.to_vec();
        let mut taken: Vec<Key> = Vec::new();
        es.retain(|e| {
            let Key::Fd(ty, slot) = e.key else {
                return true;
            };
            let other = [Ty::Socket, Ty::Pipe, Ty::Poll, Ty::Inode]
                .into_iter()
                .filter(|&t| t != ty)
                .map(|t| Key::Fd(t, slot))
                .any(|k| self.maybe.contains(&k) || self.stale.contains(&k) || taken.contains(&k));
            if !other {
                taken.push(e.key);
            }
            !other
        });
        if es.is_empty() {
            return Ok(());
        }
        let mut back = Vec::new();
        for w in &self.w {
            let mut v: Vec<ukevent> = es.iter().map(|e| w.ukevent(e)).collect();
            let r = w.q.ctl(KEVENT_CTL_ADD, &mut v);
            let n = *r.as_ref().unwrap_or(&0) as usize;
            back.push((
                r,
                v[..n.min(v.len())]
                    .iter()
                    .map(|u| w.map(u))
                    .collect::<Vec<Ev>>(),
            ));
        }
        // A stale key whose number holds the very file it was registered on again (`dup2`
        // back, before the backend looked): the old registration is live again if the
        // backend did not notice the replacement meanwhile (a kernel notices it when a
        // wake-up of the file made it look, the fallback when epoll reported the fd), so
        // its ADD may be `-EEXIST` on one backend and register on the other. Such entries
        // are not compared, and their key stays stale.
        let aba: Vec<Key> = es
            .iter()
            .filter(|e| {
                let Key::Fd(_, slot) = e.key else {
                    return false;
                };
                self.stale.contains(&e.key)
                    && self.reg_file.get(&e.key).copied() == Some(self.w[0].files[slot as usize])
            })
            .map(|e| e.key)
            .collect();
        if !aba.is_empty() {
            for (r, evs) in back.iter_mut() {
                let before = evs.len();
                evs.retain(|x| !x.key.as_ref().is_ok_and(|k| aba.contains(k)));
                let dropped = (before - evs.len()) as u32;
                if let Ok(n) = r {
                    *n -= dropped;
                }
            }
        }
        if back[0] != back[1] {
            let (a, b) = self.names();
            return Err(format!(
                "ADD: {a} returned {} and wrote back {}, {b} returned {} and wrote back {}",
                errno_str(&back[0].0),
                show(&back[0].1),
                errno_str(&back[1].0),
                show(&back[1].1)
            ));
        }
        for e in &es {
            if self.stale.contains(&e.key) {
                // Whatever the ADD's answer, it may have ended the old kevent, whose one
                // report may then still come.
                for o in self.orphans.iter_mut() {
                    o.insert(e.key);
                }
            }
        }
        for e in es.iter().filter(|e| !aba.contains(&e.key)) {
            // Entries are written back in order but not in place: an entry of the key that
            // was not written back registered it (on both backends, as they agree).
            let named = es.iter().filter(|x| x.key == e.key).count();
            let written = back[0]
                .1
                .iter()
                .filter(|x| x.key.as_ref() == Ok(&e.key))
                .count();
            if written < named {
                self.stale.remove(&e.key);
                self.maybe.insert(e.key);
                if let Key::Fd(_, slot) = e.key {
                    self.reg_file.insert(e.key, self.w[0].files[slot as usize]);
                }
            }
        }
        Ok(())
    }

    /// REMOVE and MODIFY: every entry written back in place; a stale key's entry may say
    /// found or `-ENOENT` on either backend.
    fn in_place(&mut self, cmd: u32, es: &[Entry]) -> Step {
        let mut back = Vec::new();
        for w in &self.w {
            let mut v: Vec<ukevent> = es.iter().map(|e| w.ukevent(e)).collect();
            let r = w.q.ctl(cmd, &mut v);
            let mut evs: Vec<Ev> = v.iter().map(|u| w.map(u)).collect();
            for (x, e) in evs.iter_mut().zip(es) {
                // Found, not found, or (MODIFY) found naming another file (D10).
                let broken = KEVENT_RET_DONE | KEVENT_RET_BROKEN;
                let gone = [Errno::ENOENT.negated(), Errno::EBADF.negated()];
                if self.stale.contains(&e.key)
                    && (x.ret_flags == KEVENT_RET_DONE
                        || (x.ret_flags == broken && gone.contains(&x.data[1])))
                {
                    x.ret_flags = KEVENT_RET_DONE;
                    x.data[1] = 0;
                }
            }
            back.push((r, evs));
        }
        let what = if cmd == KEVENT_CTL_REMOVE {
            "REMOVE"
        } else {
            "MODIFY"
        };
        if back[0] != back[1] {
            let (a, b) = self.names();
            return Err(format!(
                "{what}: {a} returned {} and wrote back {}, {b} returned {} and wrote back {}",
                errno_str(&back[0].0),
                show(&back[0].1),
                errno_str(&back[1].0),
                show(&back[1].1)
            ));
        }
        if cmd == KEVENT_CTL_REMOVE {
            for e in es {
                // Gone on both: "a ready kevent that is removed is never delivered afterwards".
                self.stale.remove(&e.key);
                self.maybe.remove(&e.key);
            }
        }
        Ok(())
    }

    fn get(&mut self, min: u32, timeout: Option<Duration>) -> Step {
        self.make_room()?;
        let mut got: [Vec<ukevent>; 2] = Default::default();
        let mut ring: [Vec<ukevent>; 2] = Default::default();
        let mut rets = Vec::new();
        for (i, w) in self.w.iter().enumerate() {
            let k0 = w.q.kidx();
            let (r, early) = match timeout {
                None => (w.q.get_events(min, ROOM as usize, &ZERO, 0), None),
                Some(t) => {
                    let t = ts(t.as_secs() as i64, 0);
                    let (r, e) = interrupted(|| w.q.get_events(min, ROOM as usize, &t, 0));
                    (r, Some(e))
                }
            };
            // The counts may differ by stale kevents: the event sets are compared below.
            rets.push((r.as_ref().map(drop).map_err(|e| *e), early));
            got[i] = r.unwrap_or_default();
            ring[i] = w.produced(k0);
        }
        let what = match timeout {
            None => format!("get_events(min_nr {min}, zero timeout)"),
            Some(_) => "get_events interrupted by a handler".to_string(),
        };
        if rets[0] != rets[1] {
            let (a, b) = self.names();
            return Err(format!(
                "{what}: {a} {:?}, {b} {:?} (result, returned before the timeout)",
                rets[0], rets[1]
            ));
        }
        self.compare_events(&what, got, ring)
    }

    fn ring_wait(&mut self, num: u32, stale: bool, timeout: Option<Duration>) -> Step {
        self.make_room()?;
        let mut got: [Vec<ukevent>; 2] = Default::default();
        let mut rets = Vec::new();
        for (i, w) in self.w.iter().enumerate() {
            let k0 = w.q.kidx();
            let old = if stale { (w.uidx + 1) % RING } else { w.uidx };
            let (r, early) = match timeout {
                None => (w.q.wait(num, old, &ZERO), None),
                Some(t) => {
                    let t = ts(t.as_secs() as i64, 0);
                    let (r, e) = interrupted(|| w.q.wait(num, old, &t));
                    (r, Some(e))
                }
            };
            got[i] = w.produced(k0);
            if let Ok(n) = r {
                if n as usize != got[i].len() {
                    return Err(format!(
                        "kevent_wait on {} returned {n} but ring_kidx moved by {}",
                        w.b.as_str(),
                        got[i].len()
                    ));
                }
            }
            rets.push((r.map(|_| ()), early));
        }
        let what = match timeout {
            None => format!("kevent_wait(num {num}, stale {stale}, zero timeout)"),
            Some(_) => "kevent_wait interrupted by a handler".to_string(),
        };
        if rets[0] != rets[1] {
            let (a, b) = self.names();
            return Err(format!(
                "{what}: {a} {:?}, {b} {:?} (result, returned before the timeout)",
                rets[0], rets[1]
            ));
        }
        let ring = got.clone();
        self.compare_events(&what, got, ring)
    }

    /// The fd of `slot` is closed or replaced: the kevents that may be registered on it
    /// are stale (D10).
    fn taint(&mut self, slot: u8) {
        for t in [Ty::Socket, Ty::Pipe, Ty::Poll, Ty::Inode] {
            if self.maybe.contains(&Key::Fd(t, slot)) {
                self.stale.insert(Key::Fd(t, slot));
            }
        }
    }

    fn step(&mut self, op: &Op) -> Step {
        match op {
            Op::Add(es) => self.add(es),
            Op::Remove(ks) => {
                let es: Vec<Entry> = ks
                    .iter()
                    .map(|&key| Entry {
                        key,
                        event: 0,
                        req: 0,
                        cookie: 0,
                    })
                    .collect();
                self.in_place(KEVENT_CTL_REMOVE, &es)
            }
            Op::Modify(es) => self.in_place(KEVENT_CTL_MODIFY, es),
            &Op::Ready(k) => {
                let stale = self.stale.contains(&k);
                let mut out = Vec::new();
                for w in &self.w {
                    let mut v = [w.key_entry(k)];
                    let r = w.q.ctl(KEVENT_CTL_READY, &mut v);
                    out.push((r, w.map(&v[0])));
                }
                if !stale && out[0] != out[1] {
                    let (a, b) = self.names();
                    return Err(format!(
                        "READY of {k:?}: {a} {:?}, {b} {:?}",
                        out[0], out[1]
                    ));
                }
                Ok(())
            }
            Op::Wake => self.both("READY(0)", |w| w.q.ctl(KEVENT_CTL_READY, &mut [])),
            &Op::Get { min } => self.get(min as u32, None),
            &Op::RingWait { num, stale } => self.ring_wait(num, stale, None),
            &Op::Commit(c) => self.commit(c),
            &Op::Blocking { ring } => {
                if ring {
                    self.ring_wait(RING - 1, false, Some(BLOCK))
                } else {
                    self.get(1, Some(BLOCK))
                }
            }
            &Op::Write { slot, n } => self.both("write", |w| {
                let fd = w.fd(slot);
                if w.files[slot as usize] == Some(File::Event) {
                    res(write_fd(fd, &(n as u64).to_ne_bytes()))
                } else {
                    res(write_fd(fd, &vec![0x5a; n as usize]))
                }
            }),
            &Op::Read { slot, n } => self.both("read", |w| {
                let mut buf = vec![0u8; (n as usize).max(8)];
                // SAFETY: `buf` is valid for writes of its length.
                res(unsafe { libc::read(w.fd(slot), buf.as_mut_ptr().cast(), buf.len()) })
            }),
            &Op::Fill { slot } => self.both("fill", |w| {
                let fd = w.fd(slot);
                let mut total = 0i64;
                if w.files[slot as usize] == Some(File::Event) {
                    for shift in (0..64).rev() {
                        if write_fd(fd, &(1u64 << shift).to_ne_bytes()) > 0 {
                            total += 1;
                        }
                    }
                    return total;
                }
                let chunk = [0x5au8; 1024];
                for _ in 0..1000 {
                    let r = write_fd(fd, &chunk);
                    if r <= 0 {
                        return if total == 0 { res(r) } else { total };
                    }
                    total += r as i64;
                }
                total
            }),
            &Op::Drain { slot } => self.both("drain", |w| {
                let mut buf = [0u8; 4096];
                let mut total = 0i64;
                loop {
                    // SAFETY: `buf` is valid for writes of its length.
                    let r = unsafe { libc::read(w.fd(slot), buf.as_mut_ptr().cast(), buf.len()) };
                    if r <= 0 {
                        return if total == 0 { res(r) } else { total };
                    }
                    total += r as i64;
                }
            }),
            &Op::Shut { slot, how } => self.both("shutdown", |w| {
                // SAFETY: integers only.
                res(unsafe { libc::shutdown(w.fd(slot), how) } as isize)
            }),
            &Op::Close { slot } => {
                self.taint(slot);
                let r = self.both("close", |w| {
                    // SAFETY: a number of this world's range.
                    let r = res(unsafe { libc::close(w.fd(slot)) } as isize);
                    w.files[slot as usize] = None;
                    r
                });
                self.clear_socket_errors();
                r
            }
            &Op::Dup2 { src, dst } => {
                if src == dst {
                    return Ok(());
                }
                self.taint(dst);
                let r = self.both("dup2", |w| {
                    // SAFETY: numbers of this world's range.
                    let r = unsafe { libc::dup3(w.fd(src), w.fd(dst), libc::O_CLOEXEC) };
                    if r >= 0 {
                        w.files[dst as usize] = w.files[src as usize];
                    }
                    res(r as isize).min(0)
                });
                self.clear_socket_errors();
                r
            }
            &Op::Create { name } => self.both("create", |w| {
                let c = cpath(&w.dir.join(format!("f{name}")));
                // SAFETY: `c` is a NUL-terminated path.
                let fd = unsafe {
                    libc::open(
                        c.as_ptr(),
                        libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY | libc::O_CLOEXEC,
                        0o600,
                    )
                };
                if fd >= 0 {
                    close(fd);
                }
                res(fd as isize).min(0)
            }),
            &Op::Unlink { name } => self.both("unlink", |w| {
                let c = cpath(&w.dir.join(format!("f{name}")));
                // SAFETY: `c` is a NUL-terminated path.
                res(unsafe { libc::unlink(c.as_ptr()) } as isize)
            }),
            &Op::Signal { sig } => {
                tgkill(gettid(), SIGS[sig as usize]);
                Ok(())
            }
        }
    }
}

/// Runs `ops` on fresh twin worlds of backends `a` and `b`; `Err((index, why))` at the
/// first disagreement.
pub fn run(a: Backend, b: Backend, ops: &[Op]) -> Result<(), (usize, String)> {
    // Every close below must be the file's last: no child of another test holds copies.
    let _no_forks = crate::forks::no_forks();
    let mut t = Twins {
        w: [World::new(a, 0), World::new(b, 1)],
        stale: HashSet::new(),
        maybe: HashSet::new(),
        orphans: Default::default(),
        reg_file: Default::default(),
    };
    for (i, op) in ops.iter().enumerate() {
        t.step(op).map_err(|why| (i, why))?;
    }
    // Whatever is left: one last wait.
    t.get(0, None)
        .map_err(|why| (ops.len(), format!("final {why}")))
}

/// The ops of the case with this seed (its length from the seed too, at most `max_len`).
pub fn case(seed: u64, max_len: usize) -> Vec<Op> {
    let mut g = Gen::new(seed);
    let len = 1 + g.r.below(max_len as u64) as usize;
    (0..len).map(|_| gen_op(&mut g)).collect()
}

/// Runs random sequences on backends `a` and `b` until `KEVENT_NATDIFF_OPS` operations
/// (default 20,000; at most `cap`) were applied; panics with the shrunk minimal sequence, its seed and a
/// replay command at the first disagreement. Returns (sequences, operations).
pub fn explore(test: &str, a: Backend, b: Backend, cap: u64) -> (u64, u64) {
    let base = match std::env::var("KEVENT_NATDIFF_SEED").as_deref() {
        Ok("random") => clock_ns(libc::CLOCK_REALTIME),
        Ok(v) => v
            .parse()
            .expect("KEVENT_NATDIFF_SEED: a number or `random`"),
        Err(_) => 0x6e61_7469_7665,
    };
    let replay = std::env::var("KEVENT_NATDIFF_REPLAY").ok().map(|v| {
        u64::from_str_radix(v.trim_start_matches("0x"), 16)
            .expect("KEVENT_NATDIFF_REPLAY: the hex seed a failure printed")
    });
    let total = env_u64("KEVENT_NATDIFF_OPS").unwrap_or(20_000).min(cap);
    let max_len = env_u64("KEVENT_NATDIFF_LEN").unwrap_or(150) as usize;
    let start = Instant::now();
    let (mut n_cases, mut n_ops) = (0u64, 0u64);
    for k in 0.. {
        let seed = replay.unwrap_or(base.wrapping_add(k));
        let ops = case(seed, max_len);
        if let Err((at, why)) = run(a, b, &ops) {
            // The shrinker keeps to this kind of disagreement (another one it meets on the
            // way would be shrunk by its own failing seed).
            let kind = |w: &str| -> String {
                let w = w.trim_start_matches("final ");
                w.split([':', '(']).next().unwrap_or(w).to_string()
            };
            let k = kind(&why);
            let (min, tries) = shrink(ops.clone(), &mut |cand| {
                run(a, b, cand).is_err_and(|(_, w)| kind(&w) == k)
            });
            let min_why = run(a, b, &min).err().map(|e| e.1).unwrap_or_default();
            panic!(
                "[{test}] the {} and {} backends disagree (seed {seed:#x}) at op {at} of {}: \
                 {why}\nshrunk in {tries} replays to {} ops: {min:#?}\nminimal failure: \
                 {min_why}\nreplay: KEVENT_NATDIFF_REPLAY={seed:x} KEVENT_NATDIFF_LEN={max_len}",
                a.as_str(),
                b.as_str(),
                ops.len(),
                min.len(),
            );
        }
        n_cases += 1;
        n_ops += ops.len() as u64;
        if replay.is_some() || n_ops >= total {
            break;
        }
    }
    eprintln!(
        "[{test}] {n_cases} sequences, {n_ops} operations (seeds {base:#x}..), the {} and {} \
         backends agree ({:.1?})",
        a.as_str(),
        b.as_str(),
        start.elapsed()
    );
    (n_cases, n_ops)
}
