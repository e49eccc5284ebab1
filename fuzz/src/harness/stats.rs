//! What the harness counts over every input of the process: the calls and results
//! ([`STATS`]), and the known, reported engine bugs it saw ([`Known`], [`KNOWN`]).

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Counters over every input run in this process.
#[derive(Debug)]
pub struct Stats {
    /// Inputs run.
    pub inputs: AtomicU64,
    /// Operations decoded and executed.
    pub ops: AtomicU64,
    /// Calls of each entry point: init, ctl, get_events, wait, commit, timer_*,
    /// aio_sendfile.
    pub calls: [AtomicU64; 7],
    /// Calls that returned -1.
    pub errors: AtomicU64,
    /// Events returned by get_events.
    pub events: AtomicU64,
    /// Events moved into rings by kevent_wait.
    pub ring_events: AtomicU64,
    /// Ring slots released by kevent_commit.
    pub released: AtomicU64,
    /// Longest single call, in microseconds.
    pub max_call_us: AtomicU64,
}

/// The process-wide counters.
pub static STATS: Stats = Stats {
    inputs: AtomicU64::new(0),
    ops: AtomicU64::new(0),
    calls: [const { AtomicU64::new(0) }; 7],
    errors: AtomicU64::new(0),
    events: AtomicU64::new(0),
    ring_events: AtomicU64::new(0),
    released: AtomicU64::new(0),
    max_call_us: AtomicU64::new(0),
};

impl Stats {
    /// One line for logs.
    pub fn summary(&self) -> String {
        let c: Vec<u64> = self.calls.iter().map(|a| a.load(Relaxed)).collect();
        format!(
            "inputs {} ops {} calls: init {} ctl {} get_events {} wait {} commit {} timer_* {} aio {} \
             (-1 returns {}); events {} ring events {} slots released {}; longest call {} us",
            self.inputs.load(Relaxed),
            self.ops.load(Relaxed),
            c[0],
            c[1],
            c[2],
            c[3],
            c[4],
            c[5],
            c[6],
            self.errors.load(Relaxed),
            self.events.load(Relaxed),
            self.ring_events.load(Relaxed),
            self.released.load(Relaxed),
            self.max_call_us.load(Relaxed),
        ) + &format!(
            "; known issues seen: F1 OccurrenceTwicePerWait {}, F2 TimerCreateOnClosedQueue {}, \
             F3 WaitClosedQueueEinval {}, F4 StaleQueueOnReusedEpoll {}, \
             F5 AddInternalFdBreaksQueue {}, F6 CtlHugeNumAllocates {}",
            KNOWN[Known::OccurrenceTwicePerWait as usize].load(Relaxed),
            KNOWN[Known::TimerCreateOnClosedQueue as usize].load(Relaxed),
            KNOWN[Known::WaitClosedQueueEinval as usize].load(Relaxed),
            KNOWN[Known::StaleQueueOnReusedEpoll as usize].load(Relaxed),
            KNOWN[Known::AddInternalFdBreaksQueue as usize].load(Relaxed),
            KNOWN[Known::CtlHugeNumAllocates as usize].load(Relaxed)
        )
    }
}

/// Engine bugs this harness found that are reported but not yet fixed (they live in
/// `fallback/`, which this crate does not own). By default each is counted and the run goes
/// on, so that CI keeps fuzzing everything else; `KEVENT_FUZZ_STRICT=1` makes them fatal
/// again (use it to check a fix). docs/testing-sanitizers.md describes each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Known {
    /// F1: an occurrence kevent is delivered more than once by one `kevent_get_events`/
    /// `kevent_wait` (spec section 4: at most once per wait; occurrences coalesce, D8): a
    /// TIMER whose interval is shorter than the wait, or a SIGNAL queued by `REQ_READY` (or a
    /// READY mark) whose signal also arrived.
    OccurrenceTwicePerWait = 0,
    /// F2: `kevent_timer_create` on the number of a closed queue (closed, or now another
    /// file) succeeds instead of failing with `EBADF`/`EINVAL`, as long as no other call
    /// touched that number since the close.
    TimerCreateOnClosedQueue = 1,
    /// F3: `kevent_wait` on a closed queue fd that no call has touched since the close
    /// answers `EINVAL` (the closed queue's "no ring" / "num above the ring size" checks)
    /// instead of `EBADF` (spec section 3: a closed fd gives EBADF for every call).
    WaitClosedQueueEinval = 2,
    /// F4: a closed queue whose fd number now names a plain epoll instance (not a queue) is
    /// still found by `kevent_get_events`/`kevent_wait` on that number: they succeed instead
    /// of failing with `EINVAL`, and write the closed queue's ring (`ring_kidx`, and entries),
    /// memory the caller was allowed to free once the fd was closed (a crash or heap
    /// corruption). With `KEVENT_FUZZ_STRICT=1` the harness unmaps rings at close, so the
    /// write faults.
    StaleQueueOnReusedEpoll = 3,
    /// F5: ADD of an fd kevent naming one of the queue's own internal fds (its wake eventfd,
    /// timerfd or inotify fd: numbers a program can hold by mistake, e.g. a stale fd) fails
    /// with EEXIST, and the failure path's EPOLL_CTL_DEL then removes the queue's internal
    /// registration: the queue answers EINVAL from then on and is torn down.
    AddInternalFdBreaksQueue = 4,
    /// F6: `kevent_ctl` allocates two private arrays of `num` entries (`num * 40` bytes each)
    /// before it reads the caller's array, so a huge `num` with a NULL or short array gives
    /// `ENOMEM` (or, where the allocation succeeds, costs a `num`-sized allocation) instead of
    /// the spec's `EFAULT`; under AddressSanitizer the 160 GiB request aborts the process.
    /// Unless strict, the harness passes at most 2^21 as a "huge" num.
    CtlHugeNumAllocates = 5,
}

/// How often each [`Known`] issue was seen.
pub static KNOWN: [AtomicU64; 6] = [const { AtomicU64::new(0) }; 6];

pub(super) fn strict() -> bool {
    static STRICT: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *STRICT.get_or_init(|| std::env::var_os("KEVENT_FUZZ_STRICT").is_some_and(|v| v != "0"))
}
