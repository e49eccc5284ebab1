//! Model-based testing: a pure-Rust reference model of one queue (registry keyed by
//! `(type, id)`, ready marks, the ring's producer/consumer positions) and randomized operation
//! sequences (ADD, REMOVE, MODIFY, READY, READY(0), get_events, wait, commit, poll, AIO) run
//! against the engine through `Backend`, every result checked against the model. A
//! failing sequence is shrunk (chunks, then single operations, then smaller operations) to a
//! minimal one, printed with its seed.
//!
//! The kevents are UNOTIFY (any id) and TIMERs one hour long (never firing during a test,
//! so they behave as READY-marked occurrences: real expiries need a real clock, which the
//! engine does not let a test replace; timer expiry is covered by `s5_timer.rs`). Lookups
//! also use a type that is never registered with the same ids (D3), and ADD also gets
//! entries of types that must fail with `-ENOSYS` (D2). AIO requests (D18) join them as
//! `kevent_aio_sendfile` of 0 bytes: a ONESHOT event ready at once, under the id the call
//! returned (unique in the queue), which REMOVE, READY and MODIFY then name; MODIFY never
//! takes ONESHOT from it (P36). On a backend without the call it must answer `ENOSYS` (P37).
//!
//! The model is written from the spec, not from the engine: the ring is kept as absolute
//! positions `K` (producer) and `U` (consumer), `ring_kidx = K mod n`, `ring_over = U div n`,
//! and a commit of `new_uidx` maps to the one position `P ≡ new_uidx (mod n)` in
//! `(K - n, K]`, releasing `P - U` slots when `P > U` (D13); a ring holds at most `n - 1`
//! uncommitted events (D12).
//!
//! `KEVENT_MODEL_CASES` (default 5000 per test) and `KEVENT_MODEL_SEED` (default a fixed
//! base; `random` for a time-based one) size and seed a run; `KEVENT_MODEL_REPLAY=<seed>`
//! replays the one case a failure printed.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use kevent_test_support::*;

// ---------------------------------------------------------------------------------------------
// Operations

/// Which kind of kevent an operation names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    /// UNOTIFY with id `id`.
    User,
    /// TIMER of `3600 + id` seconds (never fires in a test).
    Timer,
    /// INODE with id `id`: never registered, so every lookup misses (D3).
    Ghost,
    /// AIO: the `id % n`-th request this queue started (a `count == 0` transfer, complete
    /// at once, D18), or an id no request has when there is none.
    Aio,
}

thread_local! {
    /// The ids `kevent_aio_sendfile` returned in the current sequence, in order (the engine
    /// chooses them; the model only learns them).
    static AIO_IDS: std::cell::RefCell<Vec<u64>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// An AIO id no request of a sequence has (its ids are far smaller).
const AIO_GHOST: u64 = 1 << 40;

fn key(kind: Kind, id: u8) -> Key {
    match kind {
        Kind::Aio => AIO_IDS.with(|ids| {
            let ids = ids.borrow();
            let aio = if ids.is_empty() {
                AIO_GHOST + u64::from(id)
            } else {
                ids[id as usize % ids.len()]
            };
            Key::from_raw(KEVENT_AIO, aio)
        }),
        Kind::User => Key::user(id as u64),
        Kind::Timer => Key::from_raw(
            KEVENT_TIMER,
            kevent_id::from_raw([3600 + id as u32, 0]).as_u64(),
        ),
        Kind::Ghost => Key::from_raw(KEVENT_INODE, id as u64),
    }
}

fn ukev(k: Key, event: u32, req: u32, cookie: u64) -> ukevent {
    let mut e = ukevent::new(k.raw_type(), kevent_id::from_u64(k.id()), event, req);
    e.set_cookie(cookie);
    e
}

/// One ADD entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Entry {
    /// A kevent to register.
    Reg {
        kind: Kind,
        id: u8,
        req: u32,
        cookie: u64,
        event: u32,
    },
    /// An entry of a type ADD must refuse with `-ENOSYS` (D2).
    BadType { type_: u32, id: u8 },
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Op {
    Add(Vec<Entry>),
    Remove(Vec<(Kind, u8)>),
    Modify {
        kind: Kind,
        id: u8,
        req: u32,
        cookie: u64,
        event: u32,
    },
    Ready(Vec<(Kind, u8)>),
    Wake,
    /// `kevent_get_events(min_nr 1, max, {0,0})`, or with a 1 ms timeout.
    Get {
        max: u8,
        blocking: bool,
    },
    /// `kevent_wait(num, old_uidx)`: the consumer index when `stale == 0`, else that far
    /// ahead of it (mod n).
    Wait {
        num: u8,
        stale: u8,
    },
    /// Commit what a single consumer read: `k` of the uncommitted slots (capped), with
    /// `ring_over` (or `ring_over - 1` when `older`).
    Consume {
        k: u8,
        older: bool,
    },
    /// A raw commit: `new_uidx` (may be out of range) and `ring_over + over_delta`.
    CommitRaw {
        new_uidx: u8,
        over_delta: i8,
    },
    /// poll(2) on the queue fd.
    Poll,
    /// `kevent_aio_sendfile` of 0 bytes (D18): a new request whose one event is ready at
    /// once (`ENOSYS` on a backend without AIO, P37).
    Aio,
}

/// Request flags ADD draws from (no LAST_CHECK: it has no meaning for these types).
const ADD_FLAGS: [u32; 5] = [
    KEVENT_REQ_ONESHOT,
    KEVENT_REQ_READY,
    KEVENT_REQ_ALWAYS_QUEUE,
    KEVENT_REQ_ET,
    KEVENT_REQ_WAKEUP_ALL,
];

fn gen_flags(r: &mut Rng, allow_ready: bool) -> u32 {
    let mut f = 0;
    for flag in ADD_FLAGS {
        if (allow_ready || flag != KEVENT_REQ_READY) && r.pct(25) {
            f |= flag;
        }
    }
    f
}

fn gen_kind(r: &mut Rng) -> Kind {
    if r.pct(75) { Kind::User } else { Kind::Timer }
}

fn gen_lookup(r: &mut Rng) -> (Kind, u8) {
    let kind = match r.below(12) {
        0 => Kind::Ghost,
        1 | 2 => Kind::Timer,
        3 | 4 => Kind::Aio,
        _ => Kind::User,
    };
    (kind, r.below(8) as u8)
}

fn gen_op(r: &mut Rng) -> Op {
    match r.below(100) {
        0..=17 => {
            let n = 1 + r.below(4);
            Op::Add(
                (0..n)
                    .map(|_| {
                        if r.pct(8) {
                            Entry::BadType {
                                type_: [KEVENT_NAIO, KEVENT_AIO, KEVENT_POSIX_TIMER, 77]
                                    [r.below(4) as usize],
                                id: r.below(8) as u8,
                            }
                        } else {
                            Entry::Reg {
                                kind: gen_kind(r),
                                id: r.below(8) as u8,
                                req: gen_flags(r, true),
                                cookie: r.below(1000),
                                event: [1, 0, KEVENT_MASK_ALL][r.below(3) as usize],
                            }
                        }
                    })
                    .collect(),
            )
        }
        18..=25 => Op::Remove((0..1 + r.below(3)).map(|_| gen_lookup(r)).collect()),
        26..=31 => {
            let (kind, id) = gen_lookup(r);
            Op::Modify {
                kind,
                id,
                req: gen_flags(r, false),
                cookie: r.below(1000),
                event: [1, 7][r.below(2) as usize],
            }
        }
        32..=49 => {
            let mut seen = BTreeSet::new();
            let v: Vec<(Kind, u8)> = (0..1 + r.below(4))
                .map(|_| gen_lookup(r))
                .filter(|k| seen.insert(*k))
                .collect();
            Op::Ready(v)
        }
        50..=52 => Op::Wake,
        53..=67 => Op::Get {
            max: 1 + r.below(6) as u8,
            blocking: r.pct(3),
        },
        68..=79 => Op::Wait {
            num: r.below(6) as u8,
            stale: if r.pct(15) { 1 + r.below(4) as u8 } else { 0 },
        },
        80..=91 => Op::Consume {
            k: r.below(6) as u8,
            older: r.pct(15),
        },
        92..=96 => Op::CommitRaw {
            new_uidx: r.below(20) as u8,
            over_delta: r.below(4) as i8 - 2,
        },
        97 | 98 => Op::Aio,
        _ => Op::Poll,
    }
}

// ---------------------------------------------------------------------------------------------
// The reference model

#[derive(Clone, Copy, Debug)]
struct Reg {
    req: u32,
    cookie: u64,
    event: u32,
    ready: bool,
}

#[derive(Debug)]
struct RingModel {
    n: u64,
    /// Absolute producer position.
    k: u64,
    /// Absolute consumer position.
    u: u64,
    /// What each absolute position holds (kept for the uncommitted ones).
    slots: BTreeMap<u64, Key>,
}

impl RingModel {
    fn used(&self) -> u64 {
        self.k - self.u
    }
    /// D12: at most n - 1 uncommitted.
    fn free(&self) -> u64 {
        self.n - 1 - self.used()
    }
    fn over(&self) -> u32 {
        (self.u / self.n) as u32
    }
}

#[derive(Debug)]
struct Model {
    regs: BTreeMap<Key, Reg>,
    ring: Option<RingModel>,
    /// A READY(0) happened: the spec makes the queue fd readable until someone is woken,
    /// and says nothing about when that ends without a waiter, so poll is not checked for
    /// "not readable" afterwards.
    woken: bool,
}

/// Checks a delivered event against the model and applies the delivery.
fn deliver(m: &mut Model, e: &ukevent, seen: &mut BTreeSet<Key>) -> Result<Key, String> {
    let k = Key::of(e);
    let reg = *m
        .regs
        .get(&k)
        .ok_or_else(|| format!("delivered an unregistered kevent {e:?}"))?;
    if !reg.ready {
        return Err(format!("delivered a kevent that is not ready {e:?}"));
    }
    if !seen.insert(k) {
        return Err(format!("delivered twice in one call {e:?}"));
    }
    if e.cookie() != reg.cookie || e.event != reg.event {
        return Err(format!(
            "cookie/event {:#x}/{:#x}, expected {:#x}/{:#x}: {e:?}",
            e.cookie(),
            e.event,
            reg.cookie,
            reg.event
        ));
    }
    if e.ret_flags & KEVENT_RET_BROKEN != 0 {
        return Err(format!("delivered BROKEN {e:?}"));
    }
    if k.raw_type() == KEVENT_AIO && e.ret_data != [0, 0] {
        return Err(format!(
            "a 0-byte transfer reported {:?} bytes: {e:?}",
            e.ret_data
        ));
    }
    if reg.req & KEVENT_REQ_ONESHOT != 0 {
        m.regs.remove(&k);
    } else if let Some(r) = m.regs.get_mut(&k) {
        r.ready = false;
    }
    Ok(k)
}

fn ready_count(m: &Model) -> usize {
    m.regs.values().filter(|r| r.ready).count()
}

macro_rules! check {
    ($cond:expr, $($fmt:tt)+) => {
        if !$cond {
            return Err(format!($($fmt)+));
        }
    };
}

/// A connected stream socket and a regular file open for reading, for the 0-byte transfers
/// of [`Op::Aio`] (they send nothing, so one pair serves every sequence of the process).
fn aio_fds() -> (i32, i32) {
    use std::os::fd::{AsRawFd, OwnedFd};
    static FDS: std::sync::OnceLock<(OwnedFd, OwnedFd, std::fs::File)> = std::sync::OnceLock::new();
    let (a, _b, f) = FDS.get_or_init(|| {
        let (a, b) = socketpair();
        let f = std::fs::File::open("/proc/self/exe").expect("open /proc/self/exe");
        (a, b, f)
    });
    (a.as_raw_fd(), f.as_raw_fd())
}

/// Runs `op` on the engine and the model; `Err` describes the first disagreement.
fn step(q: &Queue, m: &mut Model, op: &Op) -> Result<(), String> {
    match op {
        Op::Add(entries) => {
            let mut arr: Vec<ukevent> = entries
                .iter()
                .map(|e| match *e {
                    Entry::Reg {
                        kind,
                        id,
                        req,
                        cookie,
                        event,
                    } => ukev(key(kind, id), event, req, cookie),
                    Entry::BadType { type_, id } => ukev(Key::from_raw(type_, id as u64), 1, 0, 5),
                })
                .collect();
            let n = q
                .ctl(KEVENT_CTL_ADD, &mut arr)
                .map_err(|e| format!("ADD: {e:?}"))? as usize;
            let mut expect: Vec<(Key, Errno)> = Vec::new();
            for e in entries {
                match *e {
                    Entry::Reg {
                        kind,
                        id,
                        req,
                        cookie,
                        event,
                    } => {
                        let k = key(kind, id);
                        match m.regs.entry(k) {
                            std::collections::btree_map::Entry::Occupied(_) => {
                                expect.push((k, Errno::EEXIST));
                            }
                            std::collections::btree_map::Entry::Vacant(v) => {
                                v.insert(Reg {
                                    req,
                                    cookie,
                                    event,
                                    ready: req & KEVENT_REQ_READY != 0,
                                });
                            }
                        }
                    }
                    Entry::BadType { type_, id } => {
                        expect.push((Key::from_raw(type_, id as u64), Errno::ENOSYS))
                    }
                }
            }
            check!(
                n == expect.len(),
                "ADD returned {n}, expected {} write-backs: {:?}",
                expect.len(),
                &arr[..n.min(arr.len())]
            );
            for (got, (k, err)) in arr.iter().zip(&expect) {
                check!(
                    Key::of(got) == *k
                        && got.ret_flags == KEVENT_RET_BROKEN | KEVENT_RET_DONE
                        && got.ret_data[1] == err.negated(),
                    "ADD write-back {got:?}, expected {k:?} failing with {err:?}"
                );
            }
        }
        Op::Remove(keys) | Op::Ready(keys) => {
            let remove = matches!(op, Op::Remove(_));
            let ks: Vec<Key> = keys.iter().map(|&(kind, id)| key(kind, id)).collect();
            let mut arr: Vec<ukevent> = ks.iter().map(|&k| ukev(k, 1, 0, k.id() ^ 0xabc)).collect();
            let cmd = if remove {
                KEVENT_CTL_REMOVE
            } else {
                KEVENT_CTL_READY
            };
            let n = q.ctl(cmd, &mut arr).map_err(|e| format!("{op:?}: {e:?}"))? as usize;
            if remove {
                check!(
                    n == 0,
                    "REMOVE returned {n} for {} entries (D14: 0)",
                    ks.len()
                );
                for (got, k) in arr.iter().zip(&ks) {
                    let found = m.regs.remove(k).is_some();
                    let want = if found {
                        Want::new(k.raw_type(), k.id()).flags(KEVENT_RET_DONE)
                    } else {
                        Want::new(k.raw_type(), k.id()).broken(Errno::ENOENT)
                    };
                    check!(
                        want.matches(got),
                        "REMOVE {k:?} (registered: {found}) wrote back {got:?}"
                    );
                }
            } else {
                let mut marked = 0;
                let mut missing = Vec::new();
                for k in &ks {
                    match m.regs.get_mut(k) {
                        Some(r) => {
                            r.ready = true;
                            marked += 1;
                        }
                        None => missing.push(*k),
                    }
                }
                check!(n == marked, "READY returned {n}, expected {marked}");
                for (got, k) in arr.iter().zip(&missing) {
                    check!(
                        (Key::of(got), got.cookie()) == (*k, k.id() ^ 0xabc),
                        "READY: entry not found should be copied to the start: {got:?}, expected {k:?}"
                    );
                }
            }
        }
        Op::Modify {
            kind,
            id,
            req,
            cookie,
            event,
        } => {
            let k = key(*kind, *id);
            let mut arr = [ukev(k, *event, *req, *cookie)];
            let n = q
                .ctl(KEVENT_CTL_MODIFY, &mut arr)
                .map_err(|e| format!("MODIFY: {e:?}"))?;
            check!(n == 0, "MODIFY returned {n} (D14: 0)");
            match m.regs.get_mut(&k) {
                Some(r) => {
                    // D18: a request is gone after its one event, whatever MODIFY says.
                    r.req = if k.raw_type() == KEVENT_AIO {
                        *req | KEVENT_REQ_ONESHOT
                    } else {
                        *req
                    };
                    r.cookie = *cookie;
                    r.event = *event;
                    check!(
                        arr[0].ret_flags == KEVENT_RET_DONE,
                        "MODIFY {k:?} wrote back {:?}",
                        arr[0]
                    );
                }
                None => check!(
                    Want::new(k.raw_type(), k.id())
                        .broken(Errno::ENOENT)
                        .matches(&arr[0]),
                    "MODIFY of unregistered {k:?} wrote back {:?}",
                    arr[0]
                ),
            }
        }
        Op::Wake => {
            check!(q.ctl(KEVENT_CTL_READY, &mut []) == Ok(0), "READY(0) failed");
            m.woken = true;
        }
        Op::Get { max, blocking } => {
            let t = if *blocking { ms(1) } else { ZERO };
            let got = q
                .get_events(1, *max as usize, &t, 0)
                .map_err(|e| format!("get_events: {e:?}"))?;
            let want = ready_count(m).min(*max as usize);
            check!(
                got.len() == want,
                "get_events(max {max}) returned {} events, {want} are ready: {got:#?}",
                got.len()
            );
            let mut seen = BTreeSet::new();
            for e in &got {
                let k = deliver(m, e, &mut seen)?;
                if let Some(r) = &mut m.ring {
                    if r.free() > 0 {
                        check!(
                            e.ret_flags & KEVENT_RET_COPY_FAILED == 0,
                            "COPY_FAILED with {} free slots: {e:?}",
                            r.free()
                        );
                        let slot = q.slot((r.k % r.n) as u32);
                        check!(
                            (Key::of(&slot), slot.cookie()) == (k, e.cookie()),
                            "ring slot {} holds {slot:?}, buf has {e:?}",
                            r.k % r.n
                        );
                        r.slots.insert(r.k, k);
                        r.k += 1;
                    } else {
                        check!(
                            e.ret_flags & KEVENT_RET_COPY_FAILED != 0,
                            "no COPY_FAILED on a full ring: {e:?}"
                        );
                    }
                } else {
                    check!(
                        e.ret_flags & KEVENT_RET_COPY_FAILED == 0,
                        "COPY_FAILED without a ring: {e:?}"
                    );
                }
            }
        }
        Op::Wait { num, stale } => {
            let Some(r) = &m.ring else {
                let res = q.wait(*num as u32, 0, &ZERO);
                check!(res == Err(Errno::EINVAL), "wait without a ring: {res:?}");
                return Ok(());
            };
            let n = r.n;
            let cur = (r.u % n) as u32;
            let old = (cur + *stale as u32) % n as u32;
            let res = q.wait(*num as u32, old, &ZERO);
            if *num as u64 > n {
                check!(
                    res == Err(Errno::EINVAL),
                    "wait(num {num} > n {n}): {res:?}"
                );
                return Ok(());
            }
            if old != cur {
                check!(
                    res == Ok(0),
                    "wait with stale old_uidx {old} (uidx {cur}): {res:?}"
                );
                return Ok(());
            }
            let want = (*num as u64).min(r.free()).min(ready_count(m) as u64);
            check!(
                res == Ok(want as u32),
                "wait(num {num}) moved {res:?}, expected {want}"
            );
            let start = r.k;
            let mut seen = BTreeSet::new();
            for pos in start..start + want {
                let e = q.slot((pos % n) as u32);
                let k = deliver(m, &e, &mut seen)?;
                let r = m.ring.as_mut().expect("ring");
                r.slots.insert(pos, k);
                r.k = pos + 1;
            }
        }
        Op::Consume { k, older } => {
            let Some(r) = &mut m.ring else {
                let res = q.commit(0, 0);
                check!(res == Err(Errno::EINVAL), "commit without a ring: {res:?}");
                return Ok(());
            };
            let take = (*k as u64).min(r.used());
            let new_uidx = ((r.u + take) % r.n) as u32;
            let over = if *older {
                r.over().wrapping_sub(1)
            } else {
                r.over()
            };
            let res = q.commit(new_uidx, over);
            check!(
                res == Ok(take as u32),
                "commit({new_uidx}, over {over}) after reading {take}: {res:?} (U {}, K {})",
                r.u,
                r.k
            );
            for p in r.u..r.u + take {
                r.slots.remove(&p);
            }
            r.u += take;
        }
        Op::CommitRaw {
            new_uidx,
            over_delta,
        } => {
            let Some(r) = &mut m.ring else {
                let res = q.commit(*new_uidx as u32, 0);
                check!(res == Err(Errno::EINVAL), "commit without a ring: {res:?}");
                return Ok(());
            };
            let over = r.over().wrapping_add(*over_delta as i32 as u32);
            let res = q.commit(*new_uidx as u32, over);
            let bad_idx = *new_uidx as u64 >= r.n;
            let bad_over = !(*over_delta == 0 || *over_delta == -1);
            if bad_idx || bad_over {
                let ok = (bad_idx && res == Err(Errno::EINVAL))
                    || (bad_over && res == Err(Errno::EOVERFLOW));
                check!(
                    ok,
                    "commit({new_uidx}, over {over}) [bad index {bad_idx}, bad over {bad_over}]: {res:?}"
                );
                return Ok(());
            }
            // D13: the one position P ≡ new_uidx (mod n) in (K - n, K].
            let nu = *new_uidx as u64;
            let p = r.k as i64 - ((r.k % r.n + r.n - nu) % r.n) as i64;
            let released = (p - r.u as i64).max(0) as u64;
            check!(
                res == Ok(released as u32),
                "commit({new_uidx}, over {over}) with U {} K {} n {}: {res:?}, expected {released}",
                r.u,
                r.k,
                r.n
            );
            if released > 0 {
                for x in r.u..r.u + released {
                    r.slots.remove(&x);
                }
                r.u += released;
            }
        }
        Op::Aio => {
            let (sock, file) = aio_fds();
            let r = q.b.aio_sendfile(q.fd, sock, file, 0, 0);
            if !q.b.has_aio() {
                check!(
                    r == Err(Errno::ENOSYS),
                    "AIO without the call: {r:?}, not ENOSYS"
                );
                return Ok(());
            }
            let id = r.map_err(|e| format!("kevent_aio_sendfile: {e:?}"))?;
            let fresh = AIO_IDS.with(|ids| {
                let mut ids = ids.borrow_mut();
                let fresh = id > 0 && id < AIO_GHOST && !ids.contains(&id);
                ids.push(id);
                fresh
            });
            check!(
                fresh,
                "AIO id {id} is 0, too large, or not unique in this queue"
            );
            m.regs.insert(
                Key::from_raw(KEVENT_AIO, id),
                Reg {
                    req: KEVENT_REQ_ONESHOT,
                    cookie: 0,
                    event: KEVENT_MASK_ALL,
                    ready: true,
                },
            );
        }
        Op::Poll => {
            let readable = poll_now(q.fd, libc::POLLIN) & libc::POLLIN != 0;
            let ready = ready_count(m) > 0;
            if ready {
                check!(
                    readable,
                    "queue fd not readable with {} kevents ready",
                    ready_count(m)
                );
            } else if !m.woken {
                check!(!readable, "queue fd readable with nothing ready");
            }
        }
    }
    // After every operation: the ring header is the model's.
    if let Some(r) = &m.ring {
        let (kidx, over) = (q.kidx(), q.over());
        check!(
            kidx as u64 == r.k % r.n && over == r.over(),
            "ring header kidx {kidx} over {over}, model K {} U {} n {} (kidx {}, over {})",
            r.k,
            r.u,
            r.n,
            r.k % r.n,
            r.over()
        );
    }
    Ok(())
}

/// Runs a whole sequence on a fresh queue; `Err((index, why))` at the first disagreement.
fn run(b: Backend, ring: Option<u32>, ops: &[Op]) -> Result<(), (usize, String)> {
    AIO_IDS.with(|ids| ids.borrow_mut().clear());
    let q = match ring {
        Some(n) => Queue::with_ring(b, n),
        None => Queue::new(b),
    };
    let mut m = Model {
        regs: BTreeMap::new(),
        ring: ring.map(|n| RingModel {
            n: n as u64,
            k: 0,
            u: 0,
            slots: BTreeMap::new(),
        }),
        woken: false,
    };
    for (i, op) in ops.iter().enumerate() {
        step(&q, &mut m, op).map_err(|e| (i, e))?;
    }
    // Drain: what is left ready must come out exactly once (no ring side effects checked
    // here beyond the model's).
    let left = ready_count(&m);
    let got = q
        .get_events(1, 64, &ZERO, 0)
        .map_err(|e| (ops.len(), format!("final get_events: {e:?}")))?;
    if got.len() != left {
        return Err((
            ops.len(),
            format!("final drain: {} events, {left} ready: {got:#?}", got.len()),
        ));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Shrinking

/// Smaller versions of one operation (fewer entries, smaller numbers).
fn simpler(op: &Op) -> Vec<Op> {
    let mut v = Vec::new();
    match op {
        Op::Add(es) if es.len() > 1 => {
            for e in es {
                v.push(Op::Add(vec![*e]));
            }
        }
        Op::Add(es) => {
            if let Entry::Reg {
                kind,
                id,
                req,
                cookie,
                event,
            } = es[0]
            {
                for f in ADD_FLAGS {
                    if req & f != 0 {
                        v.push(Op::Add(vec![Entry::Reg {
                            kind,
                            id,
                            req: req & !f,
                            cookie,
                            event,
                        }]));
                    }
                }
                if cookie != 0 || event != 1 {
                    v.push(Op::Add(vec![Entry::Reg {
                        kind,
                        id,
                        req,
                        cookie: 0,
                        event: 1,
                    }]));
                }
            }
        }
        Op::Remove(ks) | Op::Ready(ks) if ks.len() > 1 => {
            for k in ks {
                let one = vec![*k];
                v.push(if matches!(op, Op::Remove(_)) {
                    Op::Remove(one)
                } else {
                    Op::Ready(one)
                });
            }
        }
        Op::Get { max, blocking } => {
            if *blocking {
                v.push(Op::Get {
                    max: *max,
                    blocking: false,
                });
            }
            if *max > 1 {
                v.push(Op::Get {
                    max: 1,
                    blocking: *blocking,
                });
            }
        }
        Op::Wait { num, stale } if *num > 1 || *stale > 0 => {
            v.push(Op::Wait { num: 1, stale: 0 });
        }
        _ => {}
    }
    v
}

/// Shrinks a failing sequence: drop chunks (halving sizes), then single operations, then
/// simplify operations, until no smaller candidate still fails.
fn shrink<F: FnMut(&[Op]) -> bool>(ops: Vec<Op>, mut fails: F) -> (Vec<Op>, usize) {
    let mut cur = ops;
    let mut tries = 0;
    loop {
        let mut progressed = false;
        let mut size = cur.len() / 2;
        while size >= 1 {
            let mut i = 0;
            while i + size <= cur.len() {
                let mut cand = cur.clone();
                cand.drain(i..i + size);
                tries += 1;
                if fails(&cand) {
                    cur = cand;
                    progressed = true;
                } else {
                    i += size;
                }
            }
            size /= 2;
        }
        for i in 0..cur.len() {
            for s in simpler(&cur[i]) {
                let mut cand = cur.clone();
                cand[i] = s;
                tries += 1;
                if fails(&cand) {
                    cur = cand;
                    progressed = true;
                    break;
                }
            }
        }
        if !progressed {
            return (cur, tries);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Runner

fn cases() -> u64 {
    std::env::var("KEVENT_MODEL_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5000)
}

fn base_seed() -> u64 {
    match std::env::var("KEVENT_MODEL_SEED").as_deref() {
        Ok("random") => clock_ns(libc::CLOCK_REALTIME),
        Ok(v) => v.parse().expect("KEVENT_MODEL_SEED: a number or `random`"),
        Err(_) => 0x6b65_7665_6e74,
    }
}

/// `KEVENT_MODEL_REPLAY=<seed>`: replay the one case a failure printed.
fn replay_seed() -> Option<u64> {
    std::env::var("KEVENT_MODEL_REPLAY").ok().map(|v| {
        let v = v.trim_start_matches("0x");
        u64::from_str_radix(v, 16).expect("KEVENT_MODEL_REPLAY: the hex seed a failure printed")
    })
}

/// Runs `cases()` random sequences; on a failure, shrinks it and panics with the minimal
/// sequence and its seed.
fn explore(b: Backend, test: &str, with_ring: bool) {
    let base = base_seed() ^ if with_ring { 0x1111 } else { 0x2222 };
    let replay = replay_seed();
    let n_cases = if replay.is_some() { 1 } else { cases() };
    let start = Instant::now();
    let mut ops_total = 0usize;
    for case in 0..n_cases {
        let seed = replay.unwrap_or(base.wrapping_add(case));
        let mut r = Rng::new(seed);
        let ring = with_ring.then(|| [2, 3, 4, 5, 8, 16][r.below(6) as usize]);
        let len = 1 + r.below(60) as usize;
        let ops: Vec<Op> = (0..len).map(|_| gen_op(&mut r)).collect();
        ops_total += ops.len();
        if let Err((at, why)) = run(b, ring, &ops) {
            let (min, tries) = shrink(ops.clone(), |cand| run(b, ring, cand).is_err());
            let min_why = run(b, ring, &min).err().map(|e| e.1).unwrap_or_default();
            panic!(
                "[{test}] model and engine disagree (seed {seed:#x}, ring {ring:?}) at op {at}: {why}\n\
                 shrunk in {tries} replays from {} to {} ops: {min:#?}\nminimal failure: {min_why}",
                ops.len(),
                min.len()
            );
        }
    }
    eprintln!(
        "[{test}] {} backend: {n_cases} random sequences, {ops_total} operations, seeds {base:#x}..{:#x}, \
         all agree with the model ({:?})",
        b.as_str(),
        base.wrapping_add(n_cases),
        start.elapsed()
    );
}

backend_test! {
    /// Random sequences on queues with a ring (sizes 2-16): registry, marks, get_events
    /// mirroring and COPY_FAILED, wait, commits (D12, D13), poll, D2, D3.
    fn model_ring_queue_random_sequences(b) {
        explore(b, "model_ring_queue_random_sequences", true);
    }

    /// Random sequences on queues without a ring (wait and commit must answer EINVAL).
    fn model_ringless_queue_random_sequences(b) {
        explore(b, "model_ringless_queue_random_sequences", false);
    }
}

/// The shrinker itself: a synthetic failure ("an ADD of user 3 followed later by a Get")
/// buried in a long random sequence shrinks to exactly those two operations.
#[test]
fn model_shrinker_finds_the_minimal_sequence() {
    let mut r = Rng::new(7);
    let mut ops: Vec<Op> = (0..80).map(|_| gen_op(&mut r)).collect();
    let add3 = Op::Add(vec![
        Entry::BadType { type_: 77, id: 1 },
        Entry::Reg {
            kind: Kind::User,
            id: 3,
            req: KEVENT_REQ_ONESHOT | KEVENT_REQ_ET,
            cookie: 9,
            event: 7,
        },
    ]);
    ops.insert(10, add3);
    ops.insert(
        60,
        Op::Get {
            max: 5,
            blocking: true,
        },
    );
    let is_add3 = |o: &Op| matches!(o, Op::Add(es) if es.iter().any(|e| matches!(e, Entry::Reg { kind: Kind::User, id: 3, .. })));
    let fails = |s: &[Op]| {
        s.iter()
            .position(is_add3)
            .is_some_and(|i| s[i..].iter().any(|o| matches!(o, Op::Get { .. })))
    };
    assert!(fails(&ops));
    let (min, tries) = shrink(ops, fails);
    assert_eq!(
        min,
        vec![
            Op::Add(vec![Entry::Reg {
                kind: Kind::User,
                id: 3,
                req: 0,
                cookie: 0,
                event: 1
            }]),
            Op::Get {
                max: 1,
                blocking: false
            },
        ],
        "after {tries} tries"
    );
}

// ---------------------------------------------------------------------------------------------
// The asynchronous ring (P38), concurrently
//
// Producer threads mark UNOTIFY kevents READY (in batches, in order); consumers read the ring
// by the P38 protocol: one consumer releasing by a store to `ring_uidx` with no call while
// events are there, or several sharing the ring under a lock and releasing with
// `kevent_commit` (D13). The ring is small, so it fills and events park in the queue. The
// model is a ledger: every event marked before the close is read exactly once, each producer's
// events in the order it marked them (the queue never drops, duplicates or reorders), every
// slot read is a whole event (type, id and cookie agree), and after the close nothing is
// written to the ring and every sleeping consumer returns.

/// How the consumers of one case read the ring.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Readers {
    /// One consumer releasing by storing `ring_uidx`.
    Single,
    /// This many consumers sharing the ring, each releasing with `kevent_commit`.
    Shared(u8),
}

/// When the queue fd is closed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Close {
    /// After every event was read, with a consumer asleep in `kevent_wait`.
    AfterAll,
    /// Once this many events were read, producers and consumers still running.
    Midway(u32),
}

/// A consumer bug planted on purpose, to show that the model catches what it would cause.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Plant {
    None,
    /// The consumer reads the slot at its index twice (its index is one behind).
    ReadTwice,
    /// The consumer releases one slot beyond what the queue produced.
    ReleaseAhead,
}

#[derive(Clone, Debug)]
struct AsyncCase {
    n: u32,
    producers: u8,
    per_producer: u32,
    batch: u8,
    readers: Readers,
    close: Close,
    /// Percentage of the consumers' reads followed by a yield (so the ring fills).
    lazy: u8,
}

fn gen_async(r: &mut Rng) -> AsyncCase {
    let producers = 1 + r.below(4) as u8;
    let per_producer = 1 + r.below(120) as u32;
    let total = u32::from(producers) * per_producer;
    AsyncCase {
        n: [2, 3, 4, 8, 16][r.below(5) as usize],
        producers,
        per_producer,
        batch: 1 + r.below(6) as u8,
        readers: if r.pct(50) {
            Readers::Single
        } else {
            Readers::Shared(1 + r.below(3) as u8)
        },
        close: if r.pct(70) {
            Close::AfterAll
        } else {
            Close::Midway(r.below(u64::from(total)) as u32)
        },
        lazy: r.below(60) as u8,
    }
}

/// The id of producer `p`'s event `seq`, and its cookie.
fn async_id(p: u8, seq: u32) -> u64 {
    (u64::from(p) << 32) | u64::from(seq)
}

fn async_cookie(id: u64) -> u64 {
    id ^ 0x5a5a_0000_a5a5_0000
}

/// The ledger check: `read` (in ring order) holds each of `marked` at most once, nothing
/// else, every producer's events in increasing order, and all of `must` (the events marked
/// before the close).
fn check_ledger(read: &[u64], marked: &BTreeSet<u64>, must: &BTreeSet<u64>) -> Result<(), String> {
    let mut seen = BTreeSet::new();
    let mut last: BTreeMap<u64, u64> = BTreeMap::new();
    for (i, &id) in read.iter().enumerate() {
        if !marked.contains(&id) {
            return Err(format!("read #{i}: id {id:#x} was never marked"));
        }
        if !seen.insert(id) {
            return Err(format!("read #{i}: id {id:#x} read twice"));
        }
        let (p, seq) = (id >> 32, id & 0xffff_ffff);
        if let Some(&prev) = last.get(&p) {
            if seq <= prev {
                return Err(format!(
                    "read #{i}: producer {p}'s event {seq} after its event {prev} (reordered)"
                ));
            }
        }
        last.insert(p, seq);
    }
    if let Some(lost) = must.difference(&seen).next() {
        return Err(format!(
            "id {lost:#x} marked before the close and never read ({} of {} read)",
            seen.len(),
            must.len()
        ));
    }
    Ok(())
}

/// What the consumers share.
struct Shared {
    /// The consumer index of the shared readers (the single reader keeps its own).
    idx: u32,
    read: Vec<u64>,
    /// A slot that was not a whole event, or an unexpected call result.
    bad: Option<String>,
}

/// Reads `k` slots from `from`, checking each, into `out`.
fn read_slots(q: &Queue, from: u32, k: u32, out: &mut Shared) {
    let n = q.ring_size();
    for i in 0..k {
        let e = q.slot(ring::advance(n, from, i));
        let id = e.id.as_u64();
        if e.type_ != KEVENT_UNOTIFY
            || e.cookie() != async_cookie(id)
            || e.ret_flags & KEVENT_RET_BROKEN != 0
        {
            out.bad.get_or_insert(format!(
                "slot {} is not a whole event: {e:?}",
                ring::advance(n, from, i)
            ));
        }
        out.read.push(id);
    }
}

/// Runs one case; `Err` says how the engine and the model disagree.
fn run_async(
    b: Backend,
    c: &AsyncCase,
    plant: Plant,
    limit: std::time::Duration,
) -> Result<(), String> {
    use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    let q = Arc::new(Queue::with_async_ring(b, c.n));
    let fd = q.fd;
    let total = u32::from(c.producers) * c.per_producer;
    // Register everything first (ONESHOT: each event once).
    for p in 0..c.producers {
        let evs: Vec<ukevent> = (0..c.per_producer)
            .map(|s| {
                let id = async_id(p, s);
                user_c(id, KEVENT_REQ_ONESHOT, async_cookie(id))
            })
            .collect();
        for chunk in evs.chunks(256) {
            q.add_ok(chunk);
        }
    }
    let closed = Arc::new(AtomicBool::new(false));
    let read_count = Arc::new(AtomicU32::new(0));
    // Marked ids, with whether the mark was made before the close was decided.
    let marked = Arc::new(Mutex::new((BTreeSet::new(), BTreeSet::new())));
    let deadline = Instant::now() + limit;
    let producers: Vec<_> = (0..c.producers)
        .map(|p| {
            let (q, closed, marked) = (q.clone(), closed.clone(), marked.clone());
            let (per, batch) = (c.per_producer, u32::from(c.batch));
            std::thread::spawn(move || -> Result<(), String> {
                let mut s = 0;
                while s < per {
                    let ids: Vec<u64> = (s..(s + batch).min(per)).map(|i| async_id(p, i)).collect();
                    let was_closed = closed.load(Ordering::SeqCst);
                    {
                        let mut m = marked.lock().unwrap();
                        m.0.extend(ids.iter().copied());
                    }
                    let mut evs: Vec<ukevent> = ids.iter().map(|&i| user(i, 0)).collect();
                    match q.ctl(KEVENT_CTL_READY, &mut evs) {
                        Ok(k) if k as usize == ids.len() => {
                            if !was_closed && !closed.load(Ordering::SeqCst) {
                                marked.lock().unwrap().1.extend(ids.iter().copied());
                            }
                        }
                        Ok(k) => return Err(format!("READY marked {k} of {}", ids.len())),
                        Err(Errno::EBADF | Errno::EINVAL) if closed.load(Ordering::SeqCst) => {
                            return Ok(());
                        }
                        Err(e) => return Err(format!("READY: {e}")),
                    }
                    s += batch;
                }
                Ok(())
            })
        })
        .collect();
    let shared = Arc::new(Mutex::new(Shared {
        idx: 0,
        read: Vec::new(),
        bad: None,
    }));
    let n_readers = match c.readers {
        Readers::Single => 1,
        Readers::Shared(k) => k,
    };
    let readers: Vec<_> = (0..n_readers)
        .map(|ri| {
            let (q, shared, closed, read_count) =
                (q.clone(), shared.clone(), closed.clone(), read_count.clone());
            let (readers, lazy, n) = (c.readers, c.lazy, c.n);
            std::thread::spawn(move || -> Result<(), String> {
                let mut r = Rng::new(u64::from(ri) + 1);
                let mut my = 0u32;
                loop {
                    if Instant::now() > deadline {
                        return Err(format!(
                            "consumer {ri}: stuck, {} of the events read",
                            read_count.load(Ordering::SeqCst)
                        ));
                    }
                    let is_closed = closed.load(Ordering::SeqCst);
                    let old = {
                        let mut s = shared.lock().unwrap();
                        if is_closed {
                            // Nothing is read from a closed queue's ring (the memory stays
                            // ours, but its contents are no longer the queue's).
                            return Ok(());
                        }
                        let over = q.over();
                        let kidx = q.kidx();
                        if kidx >= n {
                            return Err(format!("ring_kidx {kidx} outside a ring of {n}"));
                        }
                        let from = match readers {
                            Readers::Single => my,
                            Readers::Shared(_) => s.idx,
                        };
                        let k = ring::occupancy(n, kidx, from);
                        if k > 0 {
                            let from_read = if plant == Plant::ReadTwice && from == my && my > 0 {
                                from - 1
                            } else {
                                from
                            };
                            read_slots(&q, from_read, k, &mut s);
                            read_count.fetch_add(k, Ordering::SeqCst);
                            match readers {
                                Readers::Single => {
                                    my = kidx;
                                    let release = if plant == Plant::ReleaseAhead {
                                        ring::advance(n, kidx, 1)
                                    } else {
                                        kidx
                                    };
                                    q.store_uidx(release);
                                }
                                Readers::Shared(_) => {
                                    s.idx = kidx;
                                    match q.commit(kidx, over) {
                                        Ok(got) if got == k => {}
                                        Err(Errno::EBADF | Errno::EINVAL) if closed.load(Ordering::SeqCst) => return Ok(()),
                                        other => {
                                            return Err(format!(
                                                "kevent_commit({kidx}, {over}) after reading {k}: {other:?}"
                                            ));
                                        }
                                    }
                                }
                            }
                            if r.pct(u64::from(lazy)) {
                                std::thread::yield_now();
                            }
                            continue;
                        }
                        if read_count.load(Ordering::SeqCst) >= total {
                            // Everything was read; wait for the close in kevent_wait.
                            if !matches!(readers, Readers::Single) && ri > 0 {
                                return Ok(());
                            }
                        }
                        match readers {
                            Readers::Single => my,
                            Readers::Shared(_) => s.idx,
                        }
                    };
                    let r = q.wait(n - 1, old, &ms(50));
                    match r {
                        Ok(_) => {}
                        Err(Errno::EBADF | Errno::EINVAL) if closed.load(Ordering::SeqCst) => return Ok(()),
                        Err(e) => return Err(format!("consumer {ri}: kevent_wait: {e}")),
                    }
                }
            })
        })
        .collect();
    // The close.
    let until = match c.close {
        Close::AfterAll => total,
        Close::Midway(k) => k,
    };
    while read_count.load(Ordering::SeqCst) < until && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    // Replace the queue fd by /dev/null: the queue file is released (as by close) and the
    // number cannot be reused by another test meanwhile.
    let devnull = owned(
        // SAFETY: a NUL-terminated path.
        unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) },
        "open /dev/null",
    );
    {
        // Consumers stop reading before the fd is replaced (under their lock).
        let _s = shared.lock().unwrap();
        closed.store(true, Ordering::SeqCst);
        use std::os::fd::AsRawFd;
        // SAFETY: dup3 onto our own queue fd number, which Queue's drop later closes.
        let r = unsafe { libc::dup3(devnull.as_raw_fd(), fd, libc::O_CLOEXEC) };
        if r != fd {
            return Err(format!("dup3: {}", std::io::Error::last_os_error()));
        }
    }
    let mut errors = Vec::new();
    for h in producers {
        if let Err(e) = h.join().unwrap() {
            errors.push(e);
        }
    }
    for h in readers {
        if let Err(e) = h.join().unwrap() {
            errors.push(e);
        }
    }
    if let Some(e) = errors.into_iter().next() {
        return Err(e);
    }
    // Calls in flight at the close may still have posted; once they all returned, the
    // queue is gone and nothing writes the ring any more.
    let after = q.ring_bytes_copy();
    std::thread::sleep(std::time::Duration::from_millis(20));
    if q.ring_bytes_copy() != after {
        return Err("the ring was written after the queue fd was closed".into());
    }
    let s = shared.lock().unwrap();
    if let Some(bad) = &s.bad {
        return Err(bad.clone());
    }
    let m = marked.lock().unwrap();
    let must = if c.close == Close::AfterAll {
        m.1.clone()
    } else {
        BTreeSet::new()
    };
    check_ledger(&s.read, &m.0, &must)
}

fn explore_async(b: Backend, test: &str) {
    let base = base_seed() ^ 0x3333;
    let replay = replay_seed();
    // Each case runs threads and a close (tens of ms): a 25th of the sequential count.
    let n_cases = if replay.is_some() {
        1
    } else {
        (cases() / 25).max(1)
    };
    let start = Instant::now();
    let mut events = 0u64;
    for case in 0..n_cases {
        let seed = replay.unwrap_or(base.wrapping_add(case));
        let c = gen_async(&mut Rng::new(seed));
        events += u64::from(c.producers) * u64::from(c.per_producer);
        if let Err(why) = run_async(b, &c, Plant::None, std::time::Duration::from_secs(30)) {
            panic!(
                "[{test}] asynchronous ring and model disagree (seed {seed:#x}): {why}\ncase: {c:#?}"
            );
        }
    }
    eprintln!(
        "[{test}] {} backend: {n_cases} concurrent cases, {events} events, seeds {base:#x}..{:#x}, \
         all agree with the model ({:?})",
        b.as_str(),
        base.wrapping_add(n_cases),
        start.elapsed()
    );
}

backend_test! {
    /// P38, concurrently: producers marking, one consumer releasing by stores or several
    /// sharing through `kevent_commit`, a full ring, the close; the ledger of what was read
    /// must match what was marked.
    fn model_async_ring_concurrent_cases(b) {
        require_async_ring!(b);
        explore_async(b, "model_async_ring_concurrent_cases");
    }

    /// The model fails when it should: planted consumer bugs (a slot read twice; a release
    /// beyond the producer, after which the queue may post nothing) make it report a
    /// disagreement, against the real queue.
    fn model_async_ring_catches_planted_consumer_bugs(b) {
        require_async_ring!(b);
        let c = AsyncCase {
            n: 4,
            producers: 2,
            per_producer: 20,
            batch: 2,
            readers: Readers::Single,
            close: Close::AfterAll,
            lazy: 0,
        };
        let limit = std::time::Duration::from_secs(30);
        assert_eq!(run_async(b, &c, Plant::None, limit), Ok(()));
        let twice = run_async(b, &c, Plant::ReadTwice, limit);
        assert!(twice.as_ref().is_err_and(|e| e.contains("twice")), "{twice:?}");
        // This one hangs by design: 2 s are enough to call it stuck.
        let short = std::time::Duration::from_secs(2);
        let ahead = run_async(b, &AsyncCase { per_producer: 5, ..c }, Plant::ReleaseAhead, short);
        // Stuck consumers, or (when the close came first) events never read.
        assert!(
            ahead
                .as_ref()
                .is_err_and(|e| e.contains("stuck") || e.contains("never read")),
            "{ahead:?}"
        );
    }
}

/// The ledger check on its own: a lost, a doubled, a foreign and a reordered event are each
/// reported.
#[test]
fn model_async_ledger_check_fails_when_it_should() {
    let marked: BTreeSet<u64> = [async_id(0, 0), async_id(0, 1), async_id(1, 0)].into();
    let all = [async_id(0, 0), async_id(1, 0), async_id(0, 1)];
    assert_eq!(check_ledger(&all, &marked, &marked), Ok(()));
    assert!(check_ledger(&all[..2], &marked, &marked).is_err_and(|e| e.contains("never read")));
    let doubled = [all[0], all[1], all[2], all[1]];
    assert!(check_ledger(&doubled, &marked, &marked).is_err_and(|e| e.contains("twice")));
    let foreign = [all[0], all[1], all[2], async_id(3, 3)];
    assert!(check_ledger(&foreign, &marked, &marked).is_err_and(|e| e.contains("never marked")));
    let reordered = [async_id(0, 1), async_id(0, 0), async_id(1, 0)];
    assert!(check_ledger(&reordered, &marked, &marked).is_err_and(|e| e.contains("reordered")));
}
