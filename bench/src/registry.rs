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

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use kevent::backend::RawBackend;
use kevent_sys::{
    KEVENT_CTL_ADD, KEVENT_CTL_MODIFY, KEVENT_CTL_REMOVE, KEVENT_RET_BROKEN, KEVENT_UNOTIFY,
    kevent_id, ukevent,
};

use crate::json::Json;
use crate::machine::Machine;
use crate::os;
use crate::rawqueue::RawQueue;
use crate::stats::{Summary, ratio_cell};
use crate::{Opts, Section};

/// A small deterministic PRNG (splitmix64).
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A value in `0..n`.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// Shuffles `v` (Fisher–Yates).
    pub fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            v.swap(i, self.below(i + 1));
        }
    }
}

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
    (0..k).map(|_| v.swap_remove(rng.below(v.len()))).collect()
}

impl Loaded {
    fn new(b: RawBackend, ids: Ids, n: usize, k: usize, rng: &mut Rng) -> Loaded {
        let q = RawQueue::new(b, 0).expect("kevent_init");
        let (registered, outside) = ids.make(n, k * POOL, rng);
        for chunk in registered.chunks(4096) {
            let mut evs: Vec<ukevent> = chunk.iter().map(|&id| unotify(id, id)).collect();
            assert_eq!(q.ctl(KEVENT_CTL_ADD, &mut evs), Ok(0), "prefill ADD");
        }
        Loaded {
            q,
            registered,
            outside: outside.into(),
            k,
        }
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
        for c in 0..cycles {
            let adds: Vec<u64> = self.outside.drain(..k).collect();
            t[0] += timed(KEVENT_CTL_ADD, &adds, c as u64, &self.q);
            self.registered.extend_from_slice(&adds);
            let picks: Vec<u64> = (0..k)
                .map(|_| self.registered[rng.below(self.registered.len())])
                .collect();
            t[1] += timed(KEVENT_CTL_MODIFY, &picks, c as u64, &self.q);
            let removes = take_random(&mut self.registered, k, rng);
            t[2] += timed(KEVENT_CTL_REMOVE, &removes, 0, &self.q);
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
        for c in 0..cycles {
            let adds: Vec<RawFd> = self.outside.drain(..k).collect();
            t[0] += timed(libc::EPOLL_CTL_ADD, &adds, c as u64);
            self.registered.extend_from_slice(&adds);
            let picks: Vec<RawFd> = (0..k)
                .map(|_| self.registered[rng.below(self.registered.len())])
                .collect();
            t[1] += timed(libc::EPOLL_CTL_MOD, &picks, c as u64);
            let removes = take_random(&mut self.registered, k, rng);
            t[2] += timed(libc::EPOLL_CTL_DEL, &removes, 0);
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
    let (soft, _) = os::raise_fd_limit();
    for &n in &sizes {
        let cycles = (ops_per_sample / k).max(1);
        let mut loaded = vec![];
        let n_pool = n + k * POOL;
        for (bi, &b) in machine.backends.iter().enumerate() {
            for ids in [Ids::Random, Ids::Colliding] {
                loaded.push((bi, ids, Loaded::new(b, ids, n, k, &mut rng)));
            }
        }
        let free = (soft as usize).saturating_sub(os::open_fds() + 64);
        let mut ep = if n_pool <= free {
            EpollLoaded::new(n, k).ok()
        } else {
            epoll_skipped.push((n, format!("fd limit {soft}: {n_pool} eventfds needed")));
            None
        };
        for rep in 0..=reps {
            for (bi, ids, l) in &mut loaded {
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
            if let Some(ep) = &mut ep {
                let s = ep.sample(cycles, &mut rng);
                if rep > 0 {
                    samples.entry((Row::Epoll, n)).or_default().push(s);
                }
            }
        }
        eprintln!("registry: n={n} done");
    }
    report(
        machine,
        &sizes,
        &samples,
        &epoll_skipped,
        reps,
        k,
        ops_per_sample,
    )
}

fn report(
    machine: &Machine,
    sizes: &[usize],
    samples: &std::collections::BTreeMap<(Row, usize), Vec<OpNs>>,
    epoll_skipped: &[(usize, String)],
    reps: usize,
    k: usize,
    ops_per_sample: usize,
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
         column is n=1e6 ÷ n=1e3 (target ≤ 3); the `colliding ÷ random` rows compare the \
         medians (target ≤ 1.2). `epoll_ctl` rows: ADD/MOD/DEL of eventfds in an epoll \
         holding n of them (one fd per call), with the same churn.\n\n"
    );
    for (n, why) in epoll_skipped {
        let _ = writeln!(md, "* epoll_ctl at n={n}: skipped ({why})");
    }
    if !epoll_skipped.is_empty() {
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
                        machine.backends[*backend].kind().as_str()
                    ),
                    ids.name().to_owned(),
                    batch.to_string(),
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
            let growth = ratio_cell(
                get(row, sizes[sizes.len() - 1], op).map(|s| s.median),
                get(row, sizes[0], op).map(|s| s.median),
            );
            let _ = writeln!(md, "{line} {growth} |");
            // colliding ÷ random right after the colliding row
            if let Row::Kevent {
                backend,
                ids: Ids::Colliding,
                batch,
            } = row
            {
                let random = Row::Kevent {
                    backend: *backend,
                    ids: Ids::Random,
                    batch: *batch,
                };
                let mut line = format!("| ↳ colliding ÷ random | | {batch} |");
                for &n in sizes {
                    let r = ratio_cell(
                        get(row, n, op).map(|s| s.median),
                        get(&random, n, op).map(|s| s.median),
                    );
                    let _ = write!(line, " {r} |");
                }
                let _ = writeln!(md, "{line} |");
            }
            for &n in sizes {
                if let Some(s) = get(row, n, op) {
                    let (mech, ids, batch) = match row {
                        Row::Kevent {
                            backend,
                            ids,
                            batch,
                        } => (
                            format!("kevent_ctl_{}", machine.backends[*backend].kind().as_str()),
                            ids.key(),
                            *batch,
                        ),
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
    Section {
        name: "registry",
        title: "Registry: kevent_ctl cost with many registered kevents".into(),
        markdown: md,
        json: Json::obj([
            ("reps", Json::from(reps)),
            ("fresh_ids_per_cycle", Json::from(k)),
            ("ops_per_sample", Json::from(ops_per_sample)),
            ("cells", Json::Arr(json_rows)),
        ]),
        charts: vec![],
    }
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
        let mut l = Loaded::new(RawBackend::fallback(), Ids::Colliding, 300, 50, &mut rng);
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
        let mut e = EpollLoaded::new(20, 5).unwrap();
        assert!(e.sample(2, &mut rng).iter().all(|x| *x > 0.0));
    }
}
