//! The harness: one input drives a bounded sequence of calls into libkevent's `extern "C"`
//! entry points, and every result is checked against spec sections 1–3 (`kevent-abi.md`).
//!
//! # Invariants checked on every call
//!
//! * no crash (a fault inside the library kills the process; the fuzzer reports it);
//! * `-1` comes with an `errno` from the set the spec allows for that call, and with one of
//!   the errnos of the conditions the harness knows apply (closed fd → `EBADF`, non-queue fd
//!   → `EINVAL`, unknown flags (D1), bad timespec, `num > 0 && arg == NULL` → `EFAULT`,
//!   `get_events` with `max_nr == 0` or `min_nr > max_nr` → `EINVAL` and a NULL `buf` with
//!   `max_nr > 0` → `EFAULT` (D15), …); a call with such a condition never succeeds;
//! * counts never exceed what was asked (`ctl` ≤ `num`, and REMOVE/MODIFY return exactly 0
//!   (D14); `get_events` ≤ `max_nr` and ≤ 4096, `wait` ≤ `num`);
//! * ADD writes back only entries of the input, in order, each `RET_DONE`, failures with a
//!   per-entry errno of the spec; only fd types are "ready at once"; READY copies the entries
//!   not found, in order;
//! * every delivered event names a `(type, id)` this queue was given, with a cookie it was
//!   given for that key (no event of another queue, or of a closed queue whose fd number was
//!   reused), has only defined `ret_flags`, and a non-fd kevent appears at most once per wait;
//! * the ring: `ring_kidx < n` always; `ring_over` changes only in a commit; `kevent_init`
//!   zeroes the header; a wait moves exactly what it returns, into free slots (D12); a
//!   `get_events` mirrors exactly `min(returned, free slots)` events and marks the rest
//!   `RET_COPY_FAILED`; every commit does what an independent model of D13 says (released
//!   count, `EOVERFLOW`, `EINVAL`, stale commits): the model keeps the producer and consumer
//!   as absolute positions, as `tests/model.rs` does, and never uses the engine's modular
//!   formula (`kevent_sys::ring::commit`), so a wrong formula there shows up here;
//! * time: every wait's timeout is at most 2 ms (an `O_NONBLOCK` queue fd may get up to
//!   5 s, which it must ignore); a call that takes 2 s longer than its timeout is a failure;
//! * fds: after each input the harness closes what it opened and the fd count is exactly
//!   what it was before the input.
#![allow(unsafe_code)]

use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use crate::input::Src;

/// Panics with the message and the operations so far.
macro_rules! violation {
    ($h:expr, $($arg:tt)*) => {{
        let msg = format!($($arg)*);
        panic!("kevent-fuzz: invariant violated: {msg}\n--- operations of this input ---\n{}", $h.log)
    }};
}

mod checks;
mod decode;
mod events;
mod lifecycle;
mod model;
mod ops;
mod os;
mod state;
mod stats;

pub use stats::{KNOWN, Known, STATS, Stats};

use lifecycle::{GLOBAL, setup};
use os::count_fds;
use state::Harness;

const MAX_OPS: usize = 48;
const MAX_QUEUES: usize = 4;
const MAX_FDS: usize = 14;
const MAX_TIMERS: usize = 4;
/// The longest timeout a wait may get (2 ms).
const WAIT_CAP_NS: u64 = 2_000_000;
/// What a call may take beyond its timeout before it counts as hanging: a hang never ends,
/// so the bound only has to be far above the slowest honest call. Under the debug lane
/// (KASAN and lockdep in an emulated guest) on a loaded host, honest calls took up to 2.04 s.
const SLACK: Duration = Duration::from_secs(10);
/// At most this many events come back from one fallback `get_events` (docs/c-api.md).
const MAX_OUT: u32 = 4096;

/// Runs one input. Panics (with the operations that led there) when an invariant fails.
pub fn run_one(data: &[u8]) {
    let mut guard = GLOBAL.lock().unwrap_or_else(|p| p.into_inner());
    let g = guard.get_or_insert_with(setup);
    STATS.inputs.fetch_add(1, Relaxed);
    // Counted per input: the fuzzer itself may open fds between inputs.
    let fds_before = count_fds();
    let start = Instant::now();
    let mut s = Src::new(data);
    let mut h = Harness {
        dir: g.dir.clone(),
        log: String::new(),
        queues: Vec::new(),
        dead_queues: Vec::new(),
        fds: Vec::new(),
        closed: Vec::new(),
        graveyard: Vec::new(),
        graveyard_lens: Vec::new(),
        timers: Vec::new(),
        next_serial: 1,
        chaos: 0,
        listener_port: None,
    };
    h.chaos = s.u8() / 3;
    let mut ops = 0;
    while !s.is_empty() && ops < MAX_OPS {
        ops += 1;
        let op = s.below(27);
        if h.queues.is_empty() && !h.bad(&mut s) {
            h.op_init(&mut s);
            continue;
        }
        match op {
            0..=2 => h.op_init(&mut s),
            3..=7 => h.op_ctl(&mut s),
            8..=10 => h.op_get_events(&mut s),
            11..=12 => h.op_wait(&mut s),
            13..=14 => h.op_commit(&mut s),
            15 => h.op_close_queue(&mut s),
            16..=17 => h.op_open_fd(&mut s),
            18 => h.op_close_fd(&mut s),
            19..=20 => h.op_poke_fd(&mut s),
            21 => h.op_signal(&mut s),
            22 => h.op_inode(&mut s),
            23 => h.op_nonblock(&mut s),
            24 => h.op_aio(&mut s),
            _ => h.op_timer(&mut s),
        }
    }
    STATS.ops.fetch_add(ops as u64, Relaxed);
    h.finish(g, fds_before);
    let took = start.elapsed();
    if took > Duration::from_secs(10) {
        violation!(h, "one input took {took:?}");
    }
}

/// Removes the scratch directory (call at the end of a test run).
pub fn cleanup() {
    let guard = GLOBAL.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(g) = guard.as_ref() {
        let _ = std::fs::remove_dir_all(&g.dir);
    }
}

#[cfg(test)]
mod tests;
