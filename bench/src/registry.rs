//! The registry benchmark (issue 6 item 3): the cost of `kevent_ctl` ADD, MODIFY and REMOVE
//! with 1e3 … 1e6 UNOTIFY kevents already registered in the queue, for random ids and for
//! ids that all collide in their low bits (all ≡ 42 mod 512, the OpenBSD pid-hash test), and
//! `epoll_ctl` ADD/MOD/DEL of eventfds for comparison where the fd limit allows.
//!
//! One sample: `cycles` times { ADD k ids not registered, MODIFY k registered ids picked at
//! random, REMOVE k registered ids picked at random }, so the queue holds between n and n + k
//! kevents throughout and every operation touches a random entry of the table; each
//! operation's time is divided by the operations made. Calls carry one entry each (the
//! epoll_ctl shape) or 64 entries (the batched ABI). Samples of every queue kind alternate
//! within each repetition.
//!
//! # The physical limit (issue 14 item 5)
//!
//! Once a table no longer fits in the caches, touching one random entry of it costs a few
//! cache and TLB misses whoever does it. The `bare hash map` row measures that cost in the
//! same process, with the same churn: a `std::collections::HashMap<u64, [u64; 5]>` (SipHash
//! under random keys, as the registry's index; 40-byte values, a `ukevent`'s size) holding n
//! entries, doing the same ADD (insert), MODIFY (lookup and update of the value) and REMOVE
//! of random keys. The engine's MODIFY and REMOVE with 64 entries per call (where the
//! syscall-free ABI cost is smallest) are judged as a ratio to it at every n (target ≤ 2),
//! taken between the two samples of the same repetition.
//!
//! The 1e6 random queue is filled one entry per `kevent_ctl(ADD)`, and the longest of those
//! calls is reported (wall clock and thread CPU time): the registry growing from 0 to 1e6
//! must never stall one call (issue 14 item 4).

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use kevent_backend::Backend;
use kevent_sys::{
    KEVENT_CTL_ADD, KEVENT_CTL_MODIFY, KEVENT_CTL_REMOVE, KEVENT_RET_BROKEN, KEVENT_UNOTIFY,
    kevent_id, ukevent,
};

use crate::json::Json;
use crate::machine::Machine;
use crate::os;
use crate::rawqueue::RawQueue;
use kevent_test_rng::Rng;

use crate::stats::{Interval, RATIO_LEGEND, Summary, judge_at_most};
use crate::{Opts, Section, SummaryRow};

/// How the ids are chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Ids {
    Random,
    /// All ≡ 42 mod 512.
    Colliding,
}

impl Ids {
    fn name(self) -> &'static str {
        match self {
            Ids::Random => "random",
            Ids::Colliding => "colliding (≡ 42 mod 512)",
        }
    }

    fn key(self) -> &'static str {
        match self {
            Ids::Random => "random",
            Ids::Colliding => "colliding",
        }
    }

    /// `n` registered ids and `k` fresh ones, all distinct.
    fn make(self, n: usize, k: usize, rng: &mut Rng) -> (Vec<u64>, Vec<u64>) {
        match self {
            Ids::Random => {
                let mut all: Vec<u64> = (0..n + k).map(|_| rng.next_u64()).collect();
                all.sort_unstable();
                all.dedup();
                while all.len() < n + k {
                    all.push(rng.next_u64()); // never happens in practice
                }
                rng.shuffle(&mut all);
                let fresh = all.split_off(n);
                (all, fresh)
            }
            Ids::Colliding => {
                let mut all: Vec<u64> = (0..(n + k) as u64).map(|i| 42 + 512 * i).collect();
                rng.shuffle(&mut all);
                let fresh = all.split_off(n);
                (all, fresh)
            }
        }
    }
}

/// Per-sample nanoseconds per operation: `[add, modify, remove]`.
type OpNs = [f64; 3];

const OPS: [&str; 3] = ["ADD", "MODIFY", "REMOVE"];

/// Untimed cycles at the start of every sample: the sizes are sampled in turn, so a small
/// table starts each sample evicted from the caches by the large one sampled before it.
const WARM_CYCLES: usize = 8;

/// Ids outside the queue, as a multiple of `k`: an id added was removed at least three
/// cycles before, so its hash bucket is as cold as a random registered one.
const POOL: usize = 4;

/// A queue holding `n` registered UNOTIFY kevents and a pool of ids outside it.
///
/// A cycle churns the registry at constant size: ADD `k` ids from the front of the pool,
/// MODIFY `k` random registered ids, REMOVE `k` random registered ids (back to the pool).
/// Every operation so touches an entry picked at random among n, not the same `k` entries
/// cycle after cycle (which would stay in cache and hide the cost of a large table).
struct Loaded {
    q: RawQueue,
    registered: Vec<u64>,
    outside: VecDeque<u64>,
    k: usize,
}

fn unotify(id: u64, cookie: u64) -> ukevent {
    let mut e = ukevent::new(KEVENT_UNOTIFY, kevent_id::from_u64(id), 0, 0);
    e.set_cookie(cookie);
    e
}

/// Removes `k` random entries of `v` and returns them.
fn take_random<T>(v: &mut Vec<T>, k: usize, rng: &mut Rng) -> Vec<T> {
    (0..k).map(|_| v.swap_remove(rng.index(v.len()))).collect()
}

/// The longest single-entry ADD (by thread CPU time) while a queue was filled.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct FillStall {
    /// Kevents in the queue at the end.
    n: usize,
    /// Which ADD (0-based): the registry held that many kevents before it.
    at: usize,
    /// Its thread CPU time, ns.
    cpu: u64,
    /// Its wall time, ns.
    wall: u64,
    /// Minor page faults it took.
    faults: u64,
    /// The longest wall time of any ADD, ns (includes preemption).
    max_wall: u64,
    /// Interrupt and softirq time of the CPU the fill ran on, during the fill, ns (tick
    /// sampled; this kernel charges it to the interrupted thread's CPU time).
    interrupts: u64,
    /// The fill's wall time, ns.
    total: u64,
}

impl Loaded {
    #[cfg(test)]
    fn new(b: Backend, ids: Ids, n: usize, k: usize, rng: &mut Rng) -> Loaded {
        Loaded::filled(b, ids, n, k, rng, false).0
    }

    /// A queue of `n` kevents, filled 4096 per call, or one per call (timed) if `timed`.
    fn filled(
        b: Backend,
        ids: Ids,
        n: usize,
        k: usize,
        rng: &mut Rng,
        timed: bool,
    ) -> (Loaded, Option<FillStall>) {
        let q = RawQueue::new(b, 0).expect("kevent_init");
        let (registered, outside) = ids.make(n, k * POOL, rng);
        let mut stall = None;
        if timed {
            let mut worst = FillStall {
                n,
                ..FillStall::default()
            };
            let cpu_id = os::current_cpu();
            let (irq0, start) = (os::cpu_interrupt_ns(cpu_id), os::now_ns());
            for (at, &id) in registered.iter().enumerate() {
                let mut e = [unotify(id, id)];
                let f0 = os::thread_minor_faults();
                let c0 = os::thread_cpu_ns();
                let t0 = os::now_ns();
                let r = q.ctl(KEVENT_CTL_ADD, &mut e);
                let wall = os::now_ns() - t0;
                let cpu = os::thread_cpu_ns() - c0;
                let faults = os::thread_minor_faults() - f0;
                assert_eq!(r, Ok(0), "prefill ADD");
                worst.max_wall = worst.max_wall.max(wall);
                if cpu > worst.cpu {
                    (worst.at, worst.cpu, worst.wall, worst.faults) = (at, cpu, wall, faults);
                }
            }
            worst.total = os::now_ns() - start;
            worst.interrupts = os::cpu_interrupt_ns(cpu_id).saturating_sub(irq0);
            stall = Some(worst);
        } else {
            for chunk in registered.chunks(4096) {
                let mut evs: Vec<ukevent> = chunk.iter().map(|&id| unotify(id, id)).collect();
                assert_eq!(q.ctl(KEVENT_CTL_ADD, &mut evs), Ok(0), "prefill ADD");
            }
        }
        let l = Loaded {
            q,
            registered,
            outside: outside.into(),
            k,
        };
        (l, stall)
    }

    /// One sample of `cycles` ADD/MODIFY/REMOVE rounds with `batch` entries per call.
    fn sample(&mut self, batch: usize, cycles: usize, rng: &mut Rng) -> OpNs {
        let k = self.k;
        let mut t = [0u64; 3];
        let mut buf: Vec<ukevent> = Vec::with_capacity(batch);
        let mut timed = |cmd: u32, ids: &[u64], cookie: u64, q: &RawQueue| {
            let start = os::now_ns();
            for chunk in ids.chunks(batch) {
                buf.clear();
                buf.extend(chunk.iter().map(|&id| unotify(id, cookie)));
                let r = q.ctl(cmd, &mut buf);
                // ADD: nothing written back; REMOVE/MODIFY: 0 (D14).
                debug_assert!(r == Ok(0), "{r:?}");
                debug_assert!(buf.iter().all(|e| e.ret_flags & KEVENT_RET_BROKEN == 0));
            }
            os::now_ns() - start
        };
        for c in 0..WARM_CYCLES + cycles {
            let w = u64::from(c >= WARM_CYCLES);
            let adds: Vec<u64> = self.outside.drain(..k).collect();
            t[0] += w * timed(KEVENT_CTL_ADD, &adds, c as u64, &self.q);
            self.registered.extend_from_slice(&adds);
            let picks: Vec<u64> = (0..k)
                .map(|_| self.registered[rng.index(self.registered.len())])
                .collect();
            t[1] += w * timed(KEVENT_CTL_MODIFY, &picks, c as u64, &self.q);
            let removes = take_random(&mut self.registered, k, rng);
            t[2] += w * timed(KEVENT_CTL_REMOVE, &removes, 0, &self.q);
            self.outside.extend(removes);
        }
        let ops = (cycles * k) as f64;
        [t[0] as f64 / ops, t[1] as f64 / ops, t[2] as f64 / ops]
    }
}

/// The same churn on a bare hash map of `n` entries (see the module documentation).
struct BareMap {
    map: std::collections::HashMap<u64, [u64; 5]>,
    registered: Vec<u64>,
    outside: VecDeque<u64>,
    k: usize,
}

impl BareMap {
    fn new(n: usize, k: usize, rng: &mut Rng) -> BareMap {
        let (registered, outside) = Ids::Random.make(n, k * POOL, rng);
        let map = registered.iter().map(|&id| (id, [id; 5])).collect();
        BareMap {
            map,
            registered,
            outside: outside.into(),
            k,
        }
    }

    fn sample(&mut self, cycles: usize, rng: &mut Rng) -> OpNs {
        let k = self.k;
        let mut t = [0u64; 3];
        for c in 0..WARM_CYCLES + cycles {
            let w = u64::from(c >= WARM_CYCLES);
            let adds: Vec<u64> = self.outside.drain(..k).collect();
            let start = os::now_ns();
            for &id in &adds {
                let old = self.map.insert(id, [id, 0, 0, 0, c as u64]);
                debug_assert!(old.is_none());
            }
            t[0] += w * (os::now_ns() - start);
            self.registered.extend_from_slice(&adds);
            let picks: Vec<u64> = (0..k)
                .map(|_| self.registered[rng.index(self.registered.len())])
                .collect();
            let start = os::now_ns();
            for &id in &picks {
                if let Some(v) = self.map.get_mut(&id) {
                    // What MODIFY changes: event, flags, cookie.
                    v[1] = c as u64;
                    v[4] = id ^ c as u64;
                }
            }
            t[1] += w * (os::now_ns() - start);
            let removes = take_random(&mut self.registered, k, rng);
            let start = os::now_ns();
            for &id in &removes {
                std::hint::black_box(self.map.remove(&id));
            }
            t[2] += w * (os::now_ns() - start);
            self.outside.extend(removes);
        }
        let ops = (cycles * k) as f64;
        [t[0] as f64 / ops, t[1] as f64 / ops, t[2] as f64 / ops]
    }
}

/// The same churn on an epoll holding `n` eventfds, with a pool of eventfds outside it.
struct EpollLoaded {
    ep: OwnedFd,
    registered: Vec<RawFd>,
    outside: VecDeque<RawFd>,
    _fds: Vec<OwnedFd>,
    k: usize,
}

impl EpollLoaded {
    fn new(n: usize, k: usize) -> std::io::Result<EpollLoaded> {
        let ep = os::epoll()?;
        let fds = (0..n + k * POOL)
            .map(|_| os::eventfd())
            .collect::<Result<Vec<_>, _>>()?;
        let raw: Vec<RawFd> = fds.iter().map(AsRawFd::as_raw_fd).collect();
        for &fd in &raw[..n] {
            os::epoll_ctl(
                ep.as_raw_fd(),
                libc::EPOLL_CTL_ADD,
                fd,
                libc::EPOLLIN as u32,
                0,
            )?;
        }
        Ok(EpollLoaded {
            ep,
            registered: raw[..n].to_vec(),
            outside: raw[n..].iter().copied().collect(),
            _fds: fds,
            k,
        })
    }

    fn sample(&mut self, cycles: usize, rng: &mut Rng) -> OpNs {
        let ep = self.ep.as_raw_fd();
        let k = self.k;
        let mut t = [0u64; 3];
        let timed = |cmd: i32, fds: &[RawFd], data: u64| {
            let start = os::now_ns();
            for &fd in fds {
                let r = os::epoll_ctl(ep, cmd, fd, libc::EPOLLIN as u32, data);
                debug_assert!(r.is_ok());
            }
            os::now_ns() - start
        };
        for c in 0..WARM_CYCLES + cycles {
            let w = u64::from(c >= WARM_CYCLES);
            let adds: Vec<RawFd> = self.outside.drain(..k).collect();
            t[0] += w * timed(libc::EPOLL_CTL_ADD, &adds, c as u64);
            self.registered.extend_from_slice(&adds);
            let picks: Vec<RawFd> = (0..k)
                .map(|_| self.registered[rng.index(self.registered.len())])
                .collect();
            t[1] += w * timed(libc::EPOLL_CTL_MOD, &picks, c as u64);
            let removes = take_random(&mut self.registered, k, rng);
            t[2] += w * timed(libc::EPOLL_CTL_DEL, &removes, 0);
            self.outside.extend(removes);
        }
        let ops = (cycles * k) as f64;
        [t[0] as f64 / ops, t[1] as f64 / ops, t[2] as f64 / ops]
    }
}

/// A row of the results: what was measured.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Row {
    Kevent {
        backend: usize,
        ids: Ids,
        batch: usize,
    },
    Bare,
    Epoll,
}

/// Runs the registry benchmark.
pub fn run(opts: &Opts, machine: &Machine) -> Section {
    let sizes = [1_000usize, 10_000, 100_000, 1_000_000];
    let (reps, k, ops_per_sample) = if opts.quick {
        (5, 512, 8192)
    } else {
        (11, 512, 32768)
    };
    let batches = [1usize, 64];
    let mut rng = Rng::new(0x6b65_7665_6e74);
    // (row, n) -> samples
    let mut samples: std::collections::BTreeMap<(Row, usize), Vec<OpNs>> = Default::default();
    let mut epoll_skipped: Vec<(usize, String)> = vec![];
    let mut stalls: Vec<(usize, FillStall)> = vec![];
    let (soft, _) = os::raise_fd_limit();
    let cycles = (ops_per_sample / k).max(1);
    // Every size's queues exist at once, and each repetition samples every size in turn, so
    // that the growth ratio n=1e6 ÷ n=1e3 pairs samples taken seconds apart (the machine's
    // load drifts over a run).
    struct AtSize {
        n: usize,
        loaded: Vec<(usize, Ids, Loaded)>,
        bare: BareMap,
        ep: Option<EpollLoaded>,
    }
    let mut at: Vec<AtSize> = vec![];
    for &n in &sizes {
        let mut loaded = vec![];
        let n_pool = n + k * POOL;
        for (bi, &b) in machine.backends.iter().enumerate() {
            for ids in [Ids::Random, Ids::Colliding] {
                let timed = ids == Ids::Random && n == sizes[sizes.len() - 1];
                let (l, stall) = Loaded::filled(b, ids, n, k, &mut rng, timed);
                stalls.extend(stall.map(|s| (bi, s)));
                loaded.push((bi, ids, l));
            }
        }
        let bare = BareMap::new(n, k, &mut rng);
        let free = (soft as usize).saturating_sub(os::open_fds() + 64);
        let ep = if n_pool <= free {
            EpollLoaded::new(n, k).ok()
        } else {
            epoll_skipped.push((n, format!("fd limit {soft}: {n_pool} eventfds needed")));
            None
        };
        at.push(AtSize {
            n,
            loaded,
            bare,
            ep,
        });
        eprintln!("registry: n={n} filled");
    }
    for rep in 0..=reps {
        for a in &mut at {
            let n = a.n;
            for (bi, ids, l) in &mut a.loaded {
                for &batch in &batches {
                    let s = l.sample(batch, cycles, &mut rng);
                    if rep > 0 {
                        // Repetition 0 is the warm-up.
                        let row = Row::Kevent {
                            backend: *bi,
                            ids: *ids,
                            batch,
                        };
                        samples.entry((row, n)).or_default().push(s);
                    }
                }
            }
            let s = a.bare.sample(cycles, &mut rng);
            if rep > 0 {
                samples.entry((Row::Bare, n)).or_default().push(s);
            }
            if let Some(ep) = &mut a.ep {
                let s = ep.sample(cycles, &mut rng);
                if rep > 0 {
                    samples.entry((Row::Epoll, n)).or_default().push(s);
                }
            }
        }
        eprintln!("registry: repetition {rep} of {reps} done");
    }
    report(
        machine,
        &sizes,
        &samples,
        &epoll_skipped,
        &stalls,
        (reps, k, ops_per_sample),
    )
}

/// The paired ratios `a[i] / b[i]` of one operation (both sample lists are in repetition
/// order), with their bootstrap interval.
fn paired(
    samples: &std::collections::BTreeMap<(Row, usize), Vec<OpNs>>,
    a: &Row,
    b: &Row,
    n: usize,
    op: usize,
) -> Option<Interval> {
    paired_at(samples, (a, n), (b, n), op)
}

/// The same for two (row, n) cells: e.g. n=1e6 ÷ n=1e3 of one row (the sizes are sampled in
/// turn within each repetition).
fn paired_at(
    samples: &std::collections::BTreeMap<(Row, usize), Vec<OpNs>>,
    (a, na): (&Row, usize),
    (b, nb): (&Row, usize),
    op: usize,
) -> Option<Interval> {
    let (a, b) = (
        samples.get(&(a.clone(), na))?,
        samples.get(&(b.clone(), nb))?,
    );
    let r: Vec<f64> = a.iter().zip(b).map(|(x, y)| x[op] / y[op]).collect();
    Interval::of(&r)
}

fn report(
    machine: &Machine,
    sizes: &[usize],
    samples: &std::collections::BTreeMap<(Row, usize), Vec<OpNs>>,
    epoll_skipped: &[(usize, String)],
    stalls: &[(usize, FillStall)],
    (reps, k, ops_per_sample): (usize, usize, usize),
) -> Section {
    let get = |row: &Row, n: usize, op: usize| {
        samples
            .get(&(row.clone(), n))
            .and_then(|v| Summary::of(&v.iter().map(|s| s[op]).collect::<Vec<_>>()))
    };
    let mut md = format!(
        "Nanoseconds per operation (median of {reps} samples after a warm-up, min–max in \
         parentheses). A sample: ADD {k} UNOTIFY ids not registered (each removed at least three \
         cycles before), MODIFY {k} and REMOVE {k} registered ids picked at random, repeated to \
         {ops_per_sample} operations of each kind; the queue holds n to n+{k} kevents and every \
         operation touches a random entry. `per call` = entries per `kevent_ctl`. The last \
         column is n=1e6 ÷ n=1e3 (target ≤ 3) and the `colliding ÷ random` rows compare \
         colliding ids with random ones (target ≤ 1.2), both over the ratios of samples taken \
         in the same repetition (every size and kind is sampled in turn in each). `bare hash map`: the same churn on a \
         `std::collections::HashMap<u64, [u64; 5]>` of n entries in the same process (insert; \
         lookup and update; remove): what touching one random entry of an n-entry table costs \
         on this machine; the `÷ bare hash map` rows divide the 64-entries-per-call kevent row \
         by it, sample by sample (target ≤ 2 for MODIFY and REMOVE). {RATIO_LEGEND} \
         `epoll_ctl` rows: ADD/MOD/DEL of eventfds in an epoll holding n of them (one fd per \
         call), with the same churn.\n\n"
    );
    for (bi, st) in stalls {
        let _ = writeln!(
            md,
            "* Filling the {} queue to n={} one entry per `kevent_ctl(ADD)`: the longest call \
             took {:.0} µs of thread CPU time (the ADD of kevent {}, {:.0} µs wall clock, {} \
             minor page faults in it); the longest by the wall clock took {:.0} µs (that \
             includes the time other processes held the CPU). Its CPU served interrupts and \
             softirqs for {:.0} ms of the fill's {:.0} ms (counted at the 4 ms scheduler tick; \
             this kernel charges that time to the thread it interrupts, so a softirq burst \
             shows as CPU time of the ADD it lands in).",
            machine.backends[*bi].as_str(),
            sci(st.n),
            st.cpu as f64 / 1e3,
            st.at + 1,
            st.wall as f64 / 1e3,
            st.faults,
            st.max_wall as f64 / 1e3,
            st.interrupts as f64 / 1e6,
            st.total as f64 / 1e6
        );
    }
    for (n, why) in epoll_skipped {
        let _ = writeln!(md, "* epoll_ctl at n={n}: skipped ({why})");
    }
    if !epoll_skipped.is_empty() || !stalls.is_empty() {
        md.push('\n');
    }
    let mut rows: Vec<Row> = vec![];
    for bi in 0..machine.backends.len() {
        for batch in [1, 64] {
            for ids in [Ids::Random, Ids::Colliding] {
                rows.push(Row::Kevent {
                    backend: bi,
                    ids,
                    batch,
                });
            }
        }
    }
    rows.push(Row::Bare);
    rows.push(Row::Epoll);
    let mut json_rows = vec![];
    let header = {
        let mut h = "| call | ids | per call |".to_owned();
        for n in sizes {
            let _ = write!(h, " n={} |", sci(*n));
        }
        h.push_str(" 1e6 ÷ 1e3 |\n|---|---|---|");
        for _ in sizes {
            h.push_str("---|");
        }
        h.push_str("---|");
        h
    };
    let mut json_bare = vec![];
    for (op, op_name) in OPS.iter().enumerate() {
        let _ = writeln!(md, "#### {op_name}\n\n{header}");
        for row in &rows {
            let (call, ids, batch) = match row {
                Row::Kevent {
                    backend,
                    ids,
                    batch,
                } => (
                    format!(
                        "kevent_ctl {op_name} ({})",
                        machine.backends[*backend].as_str()
                    ),
                    ids.name().to_owned(),
                    batch.to_string(),
                ),
                Row::Bare => (
                    format!("bare hash map {}", ["insert", "update", "remove"][op]),
                    "random".to_owned(),
                    "–".to_owned(),
                ),
                Row::Epoll => (
                    format!("epoll_ctl {}", ["ADD", "MOD", "DEL"][op]),
                    "eventfds".to_owned(),
                    "1".to_owned(),
                ),
            };
            let mut line = format!("| {call} | {ids} | {batch} |");
            for &n in sizes {
                let c = get(row, n, op).map_or("–".to_owned(), |s| s.cell(0));
                let _ = write!(line, " {c} |");
            }
            let growth = paired_at(samples, (row, sizes[sizes.len() - 1]), (row, sizes[0]), op)
                .map_or("–".to_owned(), |i| i.cell(2));
            let _ = writeln!(md, "{line} {growth} |");
            if let Row::Kevent {
                backend,
                ids: Ids::Colliding,
                batch,
            } = row
            {
                // colliding ÷ random right after the colliding row
                let random = Row::Kevent {
                    backend: *backend,
                    ids: Ids::Random,
                    batch: *batch,
                };
                let mut line = format!("| ↳ colliding ÷ random | | {batch} |");
                for &n in sizes {
                    let r = paired(samples, row, &random, n, op)
                        .map_or("–".to_owned(), |i| i.ratio_cell());
                    let _ = write!(line, " {r} |");
                }
                let _ = writeln!(md, "{line} |");
            }
            if *row == Row::Bare {
                // Each backend's random 64-per-call row ÷ the bare map.
                for bi in 0..machine.backends.len() {
                    let kev = Row::Kevent {
                        backend: bi,
                        ids: Ids::Random,
                        batch: 64,
                    };
                    let mut line = format!(
                        "| ↳ kevent_ctl {op_name} ({}) ÷ bare hash map | random | 64 |",
                        machine.backends[bi].as_str()
                    );
                    for &n in sizes {
                        let i = paired(samples, &kev, &Row::Bare, n, op);
                        let _ = write!(line, " {} |", i.map_or("–".into(), |i| i.cell(2)));
                        if let Some(i) = i {
                            json_bare.push(Json::obj([
                                ("backend", Json::from(machine.backends[bi].as_str())),
                                ("op", Json::from(*op_name)),
                                ("n", Json::from(n)),
                                ("ratio", i.json()),
                            ]));
                        }
                    }
                    let _ = writeln!(md, "{line} |");
                }
            }
            for &n in sizes {
                if let Some(s) = get(row, n, op) {
                    let (mech, ids, batch) = match row {
                        Row::Kevent {
                            backend,
                            ids,
                            batch,
                        } => (
                            format!("kevent_ctl_{}", machine.backends[*backend].as_str()),
                            ids.key(),
                            *batch,
                        ),
                        Row::Bare => ("bare_hash_map".to_owned(), "random", 1),
                        Row::Epoll => ("epoll_ctl".to_owned(), "eventfds", 1),
                    };
                    json_rows.push(Json::obj([
                        ("call", Json::from(mech)),
                        ("op", Json::from(*op_name)),
                        ("ids", Json::from(ids)),
                        ("per_call", Json::from(batch)),
                        ("n", Json::from(n)),
                        ("ns_per_op", s.json()),
                    ]));
                }
            }
        }
        md.push('\n');
    }
    let summary = summary(machine, sizes, samples, stalls);
    Section {
        name: "registry",
        title: "Registry: kevent_ctl cost with many registered kevents".into(),
        markdown: md,
        json: Json::obj([
            ("reps", Json::from(reps)),
            ("fresh_ids_per_cycle", Json::from(k)),
            ("ops_per_sample", Json::from(ops_per_sample)),
            ("cells", Json::Arr(json_rows)),
            ("ratio_to_bare_hash_map", Json::Arr(json_bare)),
            (
                "fill_one_per_call",
                Json::arr(stalls.iter().map(|(bi, st)| {
                    Json::obj([
                        ("backend", Json::from(machine.backends[*bi].as_str())),
                        ("n", Json::from(st.n)),
                        ("longest_add_cpu_us", Json::from(st.cpu as f64 / 1e3)),
                        ("longest_add_index", Json::from(st.at)),
                        ("longest_add_its_wall_us", Json::from(st.wall as f64 / 1e3)),
                        ("longest_add_its_minor_faults", Json::from(st.faults)),
                        ("longest_add_wall_us", Json::from(st.max_wall as f64 / 1e3)),
                        ("fill_ms", Json::from(st.total as f64 / 1e6)),
                        (
                            "fill_cpu_interrupt_ms",
                            Json::from(st.interrupts as f64 / 1e6),
                        ),
                    ])
                })),
            ),
        ]),
        charts: vec![],
        summary,
    }
}

/// The headline rows: growth, colliding ÷ random, ratio to the bare map, fill stall.
fn summary(
    machine: &Machine,
    sizes: &[usize],
    samples: &std::collections::BTreeMap<(Row, usize), Vec<OpNs>>,
    stalls: &[(usize, FillStall)],
) -> Vec<SummaryRow> {
    let (first, last) = (sizes[0], sizes[sizes.len() - 1]);
    let mut rows = vec![];
    for (bi, b) in machine.backends.iter().enumerate() {
        let b = b.as_str();
        let kev = |batch, ids| Row::Kevent {
            backend: bi,
            ids,
            batch,
        };
        // Growth 1e6 ÷ 1e3, per op and batch.
        let mut parts = vec![];
        let mut all = vec![];
        for batch in [1usize, 64] {
            let g: Vec<String> = (0..3)
                .filter_map(|op| {
                    let row = kev(batch, Ids::Random);
                    let i = paired_at(samples, (&row, last), (&row, first), op)?;
                    all.push(i);
                    Some(format!("{} {}", OPS[op], i.cell(2)))
                })
                .collect();
            parts.push(format!("{batch}/call: {}", g.join(", ")));
        }
        rows.push(SummaryRow {
            what: format!(
                "registry ({b}): ns/op at n={} ÷ n={}",
                sci(last),
                sci(first)
            ),
            target: "≤ 3".into(),
            result: format!("{}: **{}**", parts.join("; "), judge_at_most(&all, 3.0)),
        });
        // Ratio to the bare hash map, MODIFY and REMOVE, 64 per call.
        let mut parts = vec![];
        let mut all = vec![];
        for op in [1usize, 2] {
            let cells: Vec<String> = sizes
                .iter()
                .filter_map(|&n| {
                    let i = paired(samples, &kev(64, Ids::Random), &Row::Bare, n, op)?;
                    all.push(i);
                    Some(format!("{} {}", sci(n), i.cell(2)))
                })
                .collect();
            parts.push(format!("{}: {}", OPS[op], cells.join(", ")));
        }
        rows.push(SummaryRow {
            what: format!("registry ({b}): 64/call ÷ bare hash map of the same size"),
            target: "MODIFY, REMOVE ≤ 2 at every n".into(),
            result: format!("{}: **{}**", parts.join("; "), judge_at_most(&all, 2.0)),
        });
        // Colliding ÷ random, every op, batch and size.
        let all: Vec<Interval> = [1usize, 64]
            .iter()
            .flat_map(|&batch| {
                sizes.iter().flat_map(move |&n| {
                    (0..3).filter_map(move |op| {
                        paired(
                            samples,
                            &kev(batch, Ids::Colliding),
                            &kev(batch, Ids::Random),
                            n,
                            op,
                        )
                    })
                })
            })
            .collect();
        if !all.is_empty() {
            let (lo, hi) = all.iter().fold((f64::INFINITY, 0f64), |(l, h), i| {
                (l.min(i.median), h.max(i.median))
            });
            let same = all.iter().filter(|i| i.contains(1.0)).count();
            rows.push(SummaryRow {
                what: format!("registry ({b}): ids ≡ 42 mod 512 ÷ random ids"),
                target: "≤ 1.2".into(),
                result: format!(
                    "medians {lo:.2}–{hi:.2} over {} cells (no measurable difference in \
                     {same}): **{}**",
                    all.len(),
                    judge_at_most(&all, 1.2)
                ),
            });
        }
        for (_, st) in stalls.iter().filter(|(i, _)| *i == bi) {
            rows.push(SummaryRow {
                what: format!(
                    "registry ({b}): longest ADD filling to {} one per call",
                    sci(st.n)
                ),
                target: "≤ 1 ms".into(),
                result: format!(
                    "{:.0} µs CPU (ADD #{}, {} page faults; the CPU served interrupts for {:.0} \
                     ms of the {:.0} ms fill): **{}**",
                    st.cpu as f64 / 1e3,
                    st.at + 1,
                    st.faults,
                    st.interrupts as f64 / 1e6,
                    st.total as f64 / 1e6,
                    if st.cpu <= 1_000_000 { "met" } else { "missed" }
                ),
            });
        }
    }
    rows
}

/// `1000` → `1e3`.
fn sci(n: usize) -> String {
    let e = (n as f64).log10().round() as i32;
    if 10usize.pow(e as u32) == n {
        format!("1e{e}")
    } else {
        n.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_distinct_and_collide_where_asked() {
        let mut rng = Rng::new(1);
        for ids in [Ids::Random, Ids::Colliding] {
            let (a, b) = ids.make(1000, 100, &mut rng);
            assert_eq!((a.len(), b.len()), (1000, 100));
            let mut all: Vec<u64> = a.iter().chain(&b).copied().collect();
            all.sort_unstable();
            all.dedup();
            assert_eq!(all.len(), 1100);
            if ids == Ids::Colliding {
                assert!(all.iter().all(|x| x % 512 == 42));
            }
        }
        assert_eq!(sci(1_000_000), "1e6");
    }

    #[test]
    fn a_sample_leaves_the_queue_as_it_found_it() {
        let mut rng = Rng::new(2);
        let mut l = Loaded::new(Backend::fallback(), Ids::Colliding, 300, 50, &mut rng);
        let s = l.sample(7, 9, &mut rng);
        assert!(s.iter().all(|x| *x > 0.0));
        assert_eq!((l.registered.len(), l.outside.len()), (300, 200));
        // The pool is really outside: adding it all succeeds (none is -EEXIST) ...
        let mut evs: Vec<ukevent> = l.outside.iter().map(|&id| unotify(id, 0)).collect();
        assert_eq!(l.q.ctl(KEVENT_CTL_ADD, &mut evs), Ok(0));
        // ... and what is registered really is: removing it finds every entry.
        let mut evs: Vec<ukevent> = l.registered.iter().map(|&id| unotify(id, 0)).collect();
        assert_eq!(l.q.ctl(KEVENT_CTL_REMOVE, &mut evs), Ok(0), "D14");
        assert!(evs.iter().all(|e| e.ret_flags & KEVENT_RET_BROKEN == 0));
        let mut bare = BareMap::new(300, 50, &mut rng);
        assert!(bare.sample(9, &mut rng).iter().all(|x| *x > 0.0));
        assert_eq!(bare.map.len(), 300);
        assert!(bare.registered.iter().all(|id| bare.map.contains_key(id)));
        assert!(bare.outside.iter().all(|id| !bare.map.contains_key(id)));
        let (l, stall) = Loaded::filled(Backend::fallback(), Ids::Random, 100, 5, &mut rng, true);
        assert_eq!(l.registered.len(), 100);
        assert!(stall.is_some_and(|s| s.n == 100 && s.at < 100 && s.cpu > 0 && s.max_wall > 0));
        let mut e = EpollLoaded::new(20, 5).unwrap();
        assert!(e.sample(2, &mut rng).iter().all(|x| *x > 0.0));
    }
}
