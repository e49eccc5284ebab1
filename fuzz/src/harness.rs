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

use std::collections::HashMap;
use std::fmt::Write as _;
use std::os::fd::RawFd;
use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use kevent_c::capi::backend::kevent_backend;
use kevent_c::capi::calls::{
    kevent_commit, kevent_ctl, kevent_get_events, kevent_init, kevent_wait,
};
use kevent_c::capi::posix_timer::{
    kevent_timer_create, kevent_timer_delete, kevent_timer_gettime, kevent_timer_settime,
};
use kevent_sys::{
    KEVENT_AIO, KEVENT_CTL_ADD, KEVENT_CTL_MODIFY, KEVENT_CTL_READY, KEVENT_CTL_REMOVE,
    KEVENT_FLAGS_ABSTIME, KEVENT_INODE, KEVENT_MASK_ALL, KEVENT_MAX, KEVENT_NAIO, KEVENT_PIPE,
    KEVENT_POLL, KEVENT_POSIX_TIMER, KEVENT_REQ_ALWAYS_QUEUE, KEVENT_REQ_READY, KEVENT_RET_BROKEN,
    KEVENT_RET_COPY_FAILED, KEVENT_RET_DONE, KEVENT_SIGNAL, KEVENT_SOCKET, KEVENT_TIMER,
    KEVENT_UNOTIFY, SIGEV_KEVENT, kevent_id, kevent_ring, ukevent,
};

use kevent_sys::ring::RingView;

use crate::input::Src;
use crate::mem::{Guarded, unmapped_addr};

const MAX_OPS: usize = 48;
const MAX_QUEUES: usize = 4;
const MAX_FDS: usize = 14;
const MAX_TIMERS: usize = 4;
/// The longest timeout a wait may get (2 ms).
const WAIT_CAP_NS: u64 = 2_000_000;
/// What a call may take beyond its timeout before it counts as hanging.
const SLACK: Duration = Duration::from_secs(2);
/// At most this many events come back from one fallback `get_events` (docs/c-api.md).
const MAX_OUT: u32 = 4096;
const UKEVENT: usize = 40;
/// The byte a closed queue's ring is filled with.
const GRAVE: u8 = 0xDB;

// errno sets of spec section 3 (plus the resource errors any call that allocates may give).
const RESOURCE: &[i32] = &[libc::ENOMEM, libc::EMFILE, libc::ENFILE];
const INIT_ERRNOS: &[i32] = &[
    libc::EINVAL,
    libc::EFAULT,
    libc::ENOMEM,
    libc::EMFILE,
    libc::ENFILE,
];
const CTL_ERRNOS: &[i32] = &[libc::EBADF, libc::EINVAL, libc::EFAULT, libc::ENOMEM];
const GET_ERRNOS: &[i32] = &[libc::EBADF, libc::EINVAL, libc::EFAULT, libc::ENOMEM];
const WAIT_ERRNOS: &[i32] = &[libc::EBADF, libc::EINVAL];
const COMMIT_ERRNOS: &[i32] = &[libc::EBADF, libc::EINVAL, libc::EOVERFLOW];
const TIMER_ERRNOS: &[i32] = &[
    libc::EINVAL,
    libc::EFAULT,
    libc::EBADF,
    libc::ENOMEM,
    libc::EAGAIN,
];
/// Per-entry failures of ADD (`ret_data[1] = -errno`): spec section 3, plus resource errors.
const ADD_ENTRY_ERRNOS: &[i32] = &[
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
const RM_ENTRY_ERRNOS: &[i32] = &[libc::ENOENT, libc::EBADF, libc::EINVAL];

/// Counters over every input run in this process.
#[derive(Debug)]
pub struct Stats {
    /// Inputs run.
    pub inputs: AtomicU64,
    /// Operations decoded and executed.
    pub ops: AtomicU64,
    /// Calls of each entry point: init, ctl, get_events, wait, commit, timer_*.
    pub calls: [AtomicU64; 6],
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
    calls: [const { AtomicU64::new(0) }; 6],
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
            "inputs {} ops {} calls: init {} ctl {} get_events {} wait {} commit {} timer_* {} \
             (-1 returns {}); events {} ring events {} slots released {}; longest call {} us",
            self.inputs.load(Relaxed),
            self.ops.load(Relaxed),
            c[0],
            c[1],
            c[2],
            c[3],
            c[4],
            c[5],
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

/// `KEVENT_FUZZ_TRACE=1`: print every operation as it runs (for crashes, which end the
/// process before the panic message with the trace could be printed).
fn trace_live() -> bool {
    static TRACE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *TRACE.get_or_init(|| std::env::var_os("KEVENT_FUZZ_TRACE").is_some_and(|v| v != "0"))
}

fn strict() -> bool {
    static STRICT: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *STRICT.get_or_init(|| std::env::var_os("KEVENT_FUZZ_STRICT").is_some_and(|v| v != "0"))
}

/// Set up once per process: the probe queue and the scratch directory.
#[derive(Debug)]
struct Global {
    /// A queue that lives for the whole process; a successful call on it after each input
    /// replaces the library's per-thread lookup cache, so that a closed queue's memory and
    /// internal fds are released before the fds are counted.
    probe: RawFd,
    dir: PathBuf,
}

static GLOBAL: Mutex<Option<Global>> = Mutex::new(None);

extern "C" fn noop_handler(_: libc::c_int) {}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

fn errno_name(e: i32) -> String {
    let name = match e {
        libc::EBADF => "EBADF",
        libc::EINVAL => "EINVAL",
        libc::EFAULT => "EFAULT",
        libc::ENOMEM => "ENOMEM",
        libc::EMFILE => "EMFILE",
        libc::ENFILE => "ENFILE",
        libc::EOVERFLOW => "EOVERFLOW",
        libc::ENOSYS => "ENOSYS",
        libc::EEXIST => "EEXIST",
        libc::ENOENT => "ENOENT",
        libc::EAGAIN => "EAGAIN",
        libc::EINTR => "EINTR",
        libc::ELOOP => "ELOOP",
        libc::EPERM => "EPERM",
        libc::ENOSPC => "ENOSPC",
        libc::EPIPE => "EPIPE",
        libc::EIO => "EIO",
        _ => return format!("errno {e}"),
    };
    name.to_string()
}

fn count_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count())
}

fn list_fds() -> String {
    let mut out = String::new();
    if let Ok(d) = std::fs::read_dir("/proc/self/fd") {
        for e in d.flatten() {
            let target = std::fs::read_link(e.path())
                .map(|p| p.display().to_string())
                .unwrap_or_default();
            let _ = writeln!(out, "  {} -> {}", e.file_name().to_string_lossy(), target);
        }
    }
    out
}

fn is_open(fd: RawFd) -> bool {
    // SAFETY: F_GETFD only reads the descriptor table.
    fd >= 0 && unsafe { libc::fcntl(fd, libc::F_GETFD) } >= 0
}

fn close_fd(fd: RawFd) -> i32 {
    // SAFETY: the harness only closes fds it opened itself (or queue fds it got from
    // kevent_init), each once.
    unsafe { libc::close(fd) }
}

fn now(clock: libc::clockid_t) -> libc::timespec {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a local, valid for writes.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts
}

fn ts_add_ns(ts: libc::timespec, ns: u64) -> libc::timespec {
    let total = ts.tv_nsec as u64 + ns;
    libc::timespec {
        tv_sec: ts.tv_sec + (total / 1_000_000_000) as i64,
        tv_nsec: (total % 1_000_000_000) as i64,
    }
}

fn event_from_bytes(b: [u8; UKEVENT]) -> ukevent {
    // SAFETY: a ukevent is 40 bytes of integers and a union of integers and a raw pointer,
    // so every bit pattern is a valid value; `b` holds exactly 40 bytes.
    unsafe { std::ptr::read_unaligned(b.as_ptr().cast::<ukevent>()) }
}

fn event_bytes(e: &ukevent) -> [u8; UKEVENT] {
    let mut b = [0u8; UKEVENT];
    // SAFETY: `e` is 40 initialized bytes (no padding) and `b` has room for 40.
    unsafe {
        std::ptr::copy_nonoverlapping((e as *const ukevent).cast::<u8>(), b.as_mut_ptr(), UKEVENT)
    };
    b
}

fn key(e: &ukevent) -> (u32, u64) {
    (e.type_, e.id.as_u64())
}

fn is_fd_type(t: u32) -> bool {
    matches!(t, KEVENT_SOCKET | KEVENT_PIPE | KEVENT_POLL)
}

/// Reads `n` ukevents at `p` (harness memory, readable).
fn read_events(p: *const u8, n: usize) -> Vec<ukevent> {
    (0..n)
        .map(|i| {
            // SAFETY: the caller passes harness memory readable for `n` entries.
            unsafe { std::ptr::read_unaligned(p.add(i * UKEVENT).cast::<ukevent>()) }
        })
        .collect()
}

/// A caller's ring and the harness's model of it (single consumer: exact).
///
/// The model is independent of the engine's index arithmetic: producer and consumer are
/// absolute positions (`k`, `u`, as in `tests/model.rs`), the occupancy is `k - u`, the wrap
/// counter `u / n`, and a commit is decided on positions (`op_commit`). Only the memory is
/// read through the one ring definition ([`RingView`]).
#[derive(Debug)]
struct RingState {
    mem: Guarded,
    view: RingView,
    n: u32,
    /// Absolute producer position (every event the queue moved into the ring).
    k: u64,
    /// Absolute consumer position (after the last successful commit).
    u: u64,
}

impl RingState {
    fn new(mem: Guarded, n: u32) -> Option<RingState> {
        let base = std::ptr::NonNull::new(mem.ptr().cast())?;
        // SAFETY: `mem` maps `ring_bytes(n)` bytes (the library just accepted it as a ring of
        // `n`), 8-aligned, and lives as long as this state; its header is only read through
        // the view's atomics.
        let view = unsafe { RingView::new(base, n) };
        Some(RingState {
            mem,
            view,
            n,
            k: 0,
            u: 0,
        })
    }

    fn kidx(&self) -> u32 {
        self.view.kidx()
    }

    fn over_mem(&self) -> u32 {
        self.view.over()
    }

    fn entry(&self, i: u32) -> ukevent {
        // SAFETY: the view reduces `i` mod n, inside the mapped ring; the harness reads slots
        // only between library calls, when nothing writes them.
        unsafe { self.view.read(i) }
    }

    /// The consumer index the queue must have: the consumer position mod n.
    fn uidx(&self) -> u32 {
        (self.u % u64::from(self.n)) as u32
    }

    /// `ring_over` as the model expects it: how often the consumer position crossed the end.
    fn over(&self) -> u32 {
        (self.u / u64::from(self.n)) as u32
    }

    /// Uncommitted slots.
    fn used(&self) -> u32 {
        (self.k - self.u) as u32
    }

    /// Catches the producer position up with `ring_kidx` as the memory holds it now: the
    /// queue may have moved events into the ring that no call returned (a `get_events` whose
    /// copy-out failed). `ring_kidx` never laps the consumer (D12), so the step is below n.
    fn sync(&mut self) {
        let n = i64::from(self.n);
        let mut step = i64::from(self.kidx().min(self.n - 1)) - (self.k % u64::from(self.n)) as i64;
        if step < 0 {
            step += n;
        }
        self.k += step as u64;
    }
}

#[derive(Debug)]
struct QueueState {
    fd: RawFd,
    serial: u32,
    ring: Option<RingState>,
    /// Every `(type, id)` given to this queue (ADD, MODIFY, POSIX timers), with the cookies.
    keys: HashMap<(u32, u64), Vec<u64>>,
    /// An ADD named an open fd the harness does not know (the library's own): F5 may follow.
    foreign_fd: bool,
    /// F5 happened: the queue answers EINVAL to everything.
    broken: bool,
}

impl QueueState {
    fn note_key(&mut self, e: &ukevent) {
        let cookies = self.keys.entry(key(e)).or_default();
        if cookies.len() < 64 && !cookies.contains(&e.cookie()) {
            cookies.push(e.cookie());
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Unix,
    PipeR,
    PipeW,
    Event,
    Memfd,
    Dir,
    Epoll,
    Listener,
    Tcp,
    Udp,
}

#[derive(Debug)]
struct HFd {
    fd: RawFd,
    kind: Kind,
}

/// What a queue-fd argument names right now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Target {
    Queue(usize),
    NotQueue,
    Closed,
}

/// The buffer a call gets.
#[derive(Debug)]
enum Buf {
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
    fn ptr(&self) -> *mut ukevent {
        match self {
            Buf::Null => std::ptr::null_mut(),
            Buf::Mem { g, .. } => g.ptr().cast(),
            Buf::Unmapped(a) => std::ptr::without_provenance_mut(*a),
        }
    }

    /// Entries the call can certainly read (and, unless read-only, write).
    fn cap(&self) -> usize {
        match self {
            Buf::Mem { cap, .. } => *cap,
            _ => 0,
        }
    }

    fn writable(&self) -> bool {
        matches!(self, Buf::Mem { ro: false, .. })
    }
}

/// One input's state.
#[derive(Debug)]
struct Harness {
    dir: PathBuf,
    log: String,
    queues: Vec<QueueState>,
    dead_queues: Vec<RawFd>,
    fds: Vec<HFd>,
    closed: Vec<RawFd>,
    /// Rings of closed queues, kept mapped and filled with [`GRAVE`] until the end of the
    /// input (unless strict): any change is a write after close (F4).
    graveyard: Vec<Guarded>,
    graveyard_lens: Vec<usize>,
    /// POSIX timers created: (timer_t, serial of the queue they report to).
    timers: Vec<(usize, u32)>,
    next_serial: u32,
    /// How adversarial this input's arguments are: each "bad argument" choice is taken with
    /// probability chaos/256 (the input's first byte / 3), so that some inputs go deep with
    /// valid calls and others probe the error paths.
    chaos: u8,
    listener_port: Option<u16>,
}

/// Panics with the message and the operations so far.
macro_rules! violation {
    ($h:expr, $($arg:tt)*) => {{
        let msg = format!($($arg)*);
        panic!("kevent-fuzz: invariant violated: {msg}\n--- operations of this input ---\n{}", $h.log)
    }};
}

/// The result of one call.
#[derive(Debug, Clone, Copy)]
struct Ret {
    ret: i32,
    errno: i32,
}

/// What the harness knows about a call's error conditions.
#[derive(Debug, Default)]
struct Expect {
    /// Conditions that certainly apply: the call must fail with one of these.
    must: Vec<i32>,
    /// Conditions that may apply (e.g. a read-only buffer the call may or may not write).
    maybe: Vec<i32>,
}

impl Expect {
    fn must(&mut self, e: i32) {
        if !self.must.contains(&e) {
            self.must.push(e);
        }
    }
    fn maybe(&mut self, e: i32) {
        if !self.maybe.contains(&e) {
            self.maybe.push(e);
        }
    }
}

impl Harness {
    fn trace(&mut self, line: std::fmt::Arguments<'_>) {
        if trace_live() {
            eprintln!("{line}");
        }
        if self.log.len() < 64 * 1024 {
            let _ = self.log.write_fmt(line);
            self.log.push('\n');
        }
    }

    /// A closed queue's ring: freed at once when strict (C contract: close the fd, then free
    /// the ring), else kept and watched for writes.
    fn bury(&mut self, ring: Option<RingState>) {
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
    fn check_graveyard(&mut self, what: &str) {
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
    fn stale_success(&mut self, what: &str, fd: RawFd, target: Target, r: Ret, x: &Expect) -> bool {
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
    fn broken_queue(&mut self, what: &str, target: Target, r: Ret, x: &Expect) -> bool {
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
    fn known(&mut self, which: Known, msg: std::fmt::Arguments<'_>) {
        if strict() {
            violation!(self, "[known issue {which:?}] {msg}");
        }
        KNOWN[which as usize].fetch_add(1, Relaxed);
    }

    /// Whether to take a bad-argument branch.
    fn bad(&self, s: &mut Src<'_>) -> bool {
        s.chance(self.chaos)
    }

    fn classify(&self, fd: RawFd) -> Target {
        if let Some(i) = self.queues.iter().position(|q| q.fd == fd) {
            return Target::Queue(i);
        }
        if is_open(fd) {
            Target::NotQueue
        } else {
            Target::Closed
        }
    }

    fn expect_target(&self, fd: RawFd, x: &mut Expect) -> Target {
        let t = self.classify(fd);
        match t {
            Target::Queue(_) => {}
            Target::NotQueue => x.must(libc::EINVAL),
            Target::Closed => x.must(libc::EBADF),
        }
        t
    }

    /// Runs one call, timing it against `budget_ns` (its timeout).
    fn call(&mut self, slot: usize, budget_ns: u64, f: impl FnOnce() -> i32) -> Ret {
        STATS.calls[slot].fetch_add(1, Relaxed);
        let t = Instant::now();
        let ret = f();
        let errno = errno();
        let took = t.elapsed();
        STATS
            .max_call_us
            .fetch_max(took.as_micros() as u64, Relaxed);
        if took > Duration::from_nanos(budget_ns) + SLACK {
            violation!(
                self,
                "call took {took:?}, its timeout was {budget_ns} ns (ret {ret})"
            );
        }
        if ret < 0 {
            STATS.errors.fetch_add(1, Relaxed);
        }
        Ret { ret, errno }
    }

    /// The errno checks common to every call.
    fn check_errno(&mut self, what: &str, r: Ret, allowed: &[i32], x: &Expect) {
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

    // --- choosing arguments -------------------------------------------------------------

    fn pick_qfd(&self, s: &mut Src<'_>) -> RawFd {
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
    fn pick_event_fd(&self, s: &mut Src<'_>, prefer: &[Kind]) -> RawFd {
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

    fn gen_event(&self, s: &mut Src<'_>, salt: u32) -> ukevent {
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
    fn gen_timeout(
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

    fn gen_buf(&self, s: &mut Src<'_>, want: usize, fill: impl Fn(usize) -> ukevent) -> Buf {
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

    // --- operations ---------------------------------------------------------------------

    fn op_init(&mut self, s: &mut Src<'_>) {
        if self.queues.len() >= MAX_QUEUES {
            return;
        }
        let chaotic = self.bad(s);
        let flags = if chaotic && s.chance(40) {
            s.u32() | 1 << s.below(32)
        } else {
            0
        };
        let num = match s.below(16) {
            _ if !chaotic => {
                if s.chance(48) {
                    0
                } else if s.chance(16) {
                    65 + s.below(4000)
                } else {
                    2 + s.below(63)
                }
            }
            0 => 0,
            1 => 1,
            2..=6 => 2 + s.below(6),
            7..=10 => s.pick(&[8, 16, 31, 64]),
            11..=12 => 65 + s.below(4000),
            13 => s.u32(),
            14 => u32::MAX,
            _ => 2 + s.below(3),
        };
        let mode = if !chaotic {
            if num == 0 { 0 } else { 2 }
        } else {
            s.below(16)
        };
        let mut x = Expect::default();
        if flags != 0 {
            x.must(libc::EINVAL);
        }
        let bytes = kevent_sys::ring_bytes(num).unwrap_or(usize::MAX);
        let (ring, mem): (*mut kevent_ring, Option<Guarded>) = match mode {
            0..=1 => {
                if num != 0 {
                    x.must(libc::EINVAL);
                }
                (std::ptr::null_mut(), None)
            }
            2..=10 if num <= 4096 => {
                match Guarded::new(bytes, 0) {
                    Some(g) => {
                        // SAFETY: `bytes` writable bytes at `g.ptr()`.
                        unsafe { std::ptr::write_bytes(g.ptr(), 0xA5, bytes) };
                        (g.ptr().cast(), Some(g))
                    }
                    None => return,
                }
            }
            11 if num < 2 || num <= 4096 => {
                // Misaligned for struct kevent_ring.
                x.must(libc::EINVAL);
                let off = 1 + s.below(7) as usize;
                match Guarded::new(kevent_sys::ring_bytes(num.min(4096)).unwrap_or(8), off) {
                    Some(g) => (g.ptr().cast(), Some(g)),
                    None => return,
                }
            }
            12 => {
                // Mapped, but not readable and writable.
                x.must(libc::EFAULT);
                let cap = kevent_sys::ring_bytes(num.min(64)).unwrap_or(8);
                match Guarded::new(cap, 0) {
                    Some(g) => {
                        g.protect(s.chance(128));
                        (g.ptr().cast(), Some(g))
                    }
                    None => return,
                }
            }
            13 => {
                x.must(libc::EFAULT);
                (std::ptr::without_provenance_mut(unmapped_addr()), None)
            }
            _ => {
                // A ring shorter than `num` entries, ending at a guard page.
                if num == 0 {
                    (std::ptr::null_mut(), None)
                } else {
                    let cap = s.below(num.min(64));
                    x.must(libc::EFAULT);
                    if bytes > isize::MAX as usize {
                        x.must(libc::EINVAL);
                    }
                    match Guarded::new(kevent_sys::ring_bytes(cap).unwrap_or(8), 0) {
                        Some(g) => (g.ptr().cast(), Some(g)),
                        None => return,
                    }
                }
            }
        };
        if !ring.is_null() && num < 2 {
            x.must(libc::EINVAL);
            // EFAULT may come first when the memory is bad as well.
            x.maybe(libc::EFAULT);
        }
        self.trace(format_args!(
            "init(ring {:?} mode {mode}, num {num}, flags {flags:#x})",
            ring
        ));
        // SAFETY: `ring` is NULL, or harness memory of at least the size the expectation
        // describes (smaller rings end at a guard page, so the library's check faults);
        // a ring the call accepts stays mapped until its queue fd is closed.
        let r = self.call(0, 0, || unsafe { kevent_init(ring, num, flags) });
        self.check_errno("kevent_init", r, INIT_ERRNOS, &x);
        if r.ret < 0 {
            return;
        }
        let fd = r.ret;
        // SAFETY: F_GETFD on the fd just returned.
        let fdflags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
        if fdflags < 0 || fdflags & libc::FD_CLOEXEC == 0 {
            violation!(self, "kevent_init returned fd {fd} without close-on-exec");
        }
        let serial = self.next_serial;
        self.next_serial += 1;
        let ring = match mem {
            Some(mem) if !ring.is_null() => {
                let st = RingState::new(mem, num);
                let header = st.as_ref().map(|st| (st.kidx(), st.over_mem()));
                if let Some((k, o)) = header.filter(|&h| h != (0, 0)) {
                    violation!(
                        self,
                        "kevent_init left the ring header at kidx {k:#x} over {o:#x}"
                    );
                }
                st
            }
            _ => None,
        };
        self.queues.push(QueueState {
            fd,
            serial,
            ring,
            keys: HashMap::new(),
            foreign_fd: false,
            broken: false,
        });
    }

    fn check_ring_header(&mut self, qi: usize) {
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

    fn op_ctl(&mut self, s: &mut Src<'_>) {
        let fd = self.pick_qfd(s);
        let chaotic = self.bad(s);
        let cmd = match s.below(16) {
            0..=6 => KEVENT_CTL_ADD,
            7..=9 => KEVENT_CTL_REMOVE,
            10..=11 => KEVENT_CTL_MODIFY,
            12..=14 => KEVENT_CTL_READY,
            _ if chaotic => s.u32(),
            _ => KEVENT_CTL_READY,
        };
        let num: u32 = match s.below(16) {
            _ if !chaotic => s.below(9),
            0 => 0,
            1..=11 => 1 + s.below(8),
            12..=13 => 9 + s.below(120),
            14 => 200 + s.below(400),
            _ => {
                let huge = s.pick(&[u32::MAX, 1 << 20, 100_000, 4097]);
                if huge == u32::MAX && !strict() {
                    // F6: a 2 x 160 GiB allocation attempt.
                    1 << 21
                } else {
                    huge
                }
            }
        };
        let mut x = Expect::default();
        let target = self.expect_target(fd, &mut x);
        let salt = match target {
            Target::Queue(i) => self.queues[i].serial,
            _ => 999_999,
        };
        let events: Vec<ukevent> = (0..num.min(600)).map(|_| self.gen_event(s, salt)).collect();
        let buf = if num as usize > events.len() {
            // A huge count: never give real memory for it.
            match s.below(3) {
                0 => Buf::Null,
                1 => Buf::Unmapped(unmapped_addr()),
                _ => {
                    let ev = events.clone();
                    self.gen_buf(s, events.len(), |i| ev[i])
                }
            }
        } else {
            let ev = events.clone();
            self.gen_buf(s, num as usize, |i| ev[i])
        };
        if cmd > KEVENT_CTL_READY {
            x.must(libc::EINVAL);
        }
        if num > 0 {
            match &buf {
                Buf::Null | Buf::Unmapped(_) => x.must(libc::EFAULT),
                Buf::Mem { cap, ro, .. } => {
                    if *cap < num as usize {
                        x.must(libc::EFAULT);
                    }
                    if *ro {
                        x.maybe(libc::EFAULT);
                    }
                }
            }
        }
        if let Target::Queue(i) = target {
            if cmd == KEVENT_CTL_ADD {
                let foreign = events.iter().take(buf.cap()).any(|e| {
                    let fd = e.id.raw()[0] as i32;
                    matches!(
                        e.type_,
                        KEVENT_SOCKET | KEVENT_PIPE | KEVENT_POLL | KEVENT_INODE
                    ) && fd > 2
                        && is_open(fd)
                        && !self.fds.iter().any(|f| f.fd == fd)
                        && !self.queues.iter().any(|q| q.fd == fd)
                });
                self.queues[i].foreign_fd |= foreign;
            }
            if cmd == KEVENT_CTL_ADD || cmd == KEVENT_CTL_MODIFY {
                let q = &mut self.queues[i];
                for e in events.iter().take(buf.cap()) {
                    q.note_key(e);
                }
            }
            self.check_ring_header(i);
        }
        self.trace(format_args!(
            "ctl(fd {fd} {target:?}, cmd {cmd}, num {num}, buf {}) entries {:?}",
            buf_desc(&buf),
            events
                .iter()
                .take(6)
                .map(|e| (e.type_, e.id.as_u64(), e.req_flags))
                .collect::<Vec<_>>()
        ));
        let arg = buf.ptr();
        // SAFETY: `arg` is NULL, unmapped, or harness memory for `buf.cap()` entries followed
        // by a guard page: the library must copy and answer EFAULT, never fault.
        let r = self.call(1, 0, || unsafe { kevent_ctl(fd, cmd, num, arg) });
        self.check_graveyard("kevent_ctl");
        if self.broken_queue("kevent_ctl", target, r, &x) {
            return;
        }
        if r.ret == -1 && r.errno == libc::ENOMEM && x.must.contains(&libc::EFAULT) && num > 1 << 24
        {
            self.trace(format_args!("  -> ENOMEM"));
            self.known(
                Known::CtlHugeNumAllocates,
                format_args!("kevent_ctl with num {num} and a bad array gave ENOMEM, not EFAULT"),
            );
            return;
        }
        self.check_errno("kevent_ctl", r, CTL_ERRNOS, &x);
        if let Target::Queue(i) = target {
            self.check_ring_header(i);
        }
        if r.ret < 0 {
            return;
        }
        let n = r.ret as u32;
        if n > num {
            violation!(self, "kevent_ctl returned {n} for num {num}");
        }
        if (cmd == KEVENT_CTL_REMOVE || cmd == KEVENT_CTL_MODIFY) && n != 0 {
            violation!(self, "REMOVE/MODIFY returned {n}, not 0 (D14)");
        }
        let Buf::Mem { g, ro: false, .. } = &buf else {
            return;
        };
        let out = read_events(g.ptr(), num as usize);
        match cmd {
            KEVENT_CTL_ADD => {
                let written = &out[..n as usize];
                self.check_subsequence("ADD", written, &events);
                for e in written {
                    if e.ret_flags & KEVENT_RET_DONE == 0 {
                        violation!(self, "ADD wrote back an entry without RET_DONE: {e:?}");
                    }
                    if e.ret_flags & KEVENT_RET_BROKEN != 0 {
                        let err = (e.ret_data[1] as i32).wrapping_neg();
                        // An fd already in error or hung up (a pipe whose writer is gone) is
                        // "ready at once" as BROKEN with the source's errno (section 5).
                        let readiness = is_fd_type(e.type_) && (1..4096).contains(&err);
                        if !ADD_ENTRY_ERRNOS.contains(&err) && !readiness {
                            violation!(
                                self,
                                "ADD entry failed with {} (ret_data[1] {:#x}), not a per-entry errno of the spec: {e:?}",
                                errno_name(err),
                                e.ret_data[1]
                            );
                        }
                    } else {
                        let queued = e.req_flags & (KEVENT_REQ_READY | KEVENT_REQ_ALWAYS_QUEUE);
                        if !is_fd_type(e.type_) || queued != 0 {
                            violation!(
                                self,
                                "ADD returned an entry as ready at once that cannot be (type {}, req_flags {:#x})",
                                e.type_,
                                e.req_flags
                            );
                        }
                    }
                }
            }
            KEVENT_CTL_REMOVE | KEVENT_CTL_MODIFY => {
                for (e, orig) in out.iter().zip(&events) {
                    if key(e) != key(orig) || e.cookie() != orig.cookie() {
                        violation!(
                            self,
                            "REMOVE/MODIFY changed an entry's key or cookie: {e:?}"
                        );
                    }
                    if e.ret_flags & KEVENT_RET_DONE == 0 {
                        violation!(self, "REMOVE/MODIFY left an entry without RET_DONE: {e:?}");
                    }
                    if e.ret_flags & KEVENT_RET_BROKEN != 0 {
                        let err = (e.ret_data[1] as i32).wrapping_neg();
                        if !RM_ENTRY_ERRNOS.contains(&err) {
                            violation!(
                                self,
                                "REMOVE/MODIFY entry failed with {}: {e:?}",
                                errno_name(err)
                            );
                        }
                    }
                }
            }
            _ => {
                let missing = num - n;
                self.check_subsequence("READY", &out[..missing as usize], &events);
            }
        }
    }

    /// `got` must be `want`'s entries, some left out, in order (matched by key and cookie).
    fn check_subsequence(&mut self, what: &str, got: &[ukevent], want: &[ukevent]) {
        let mut j = 0;
        for e in got {
            while j < want.len() && (key(&want[j]) != key(e) || want[j].cookie() != e.cookie()) {
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
    fn check_delivered(&mut self, qi: usize, evs: &[ukevent], what: &str) {
        let has_ring = self.queues[qi].ring.is_some();
        let mut seen: Vec<(u32, u64)> = Vec::new();
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
            let k = key(e);
            let known = self.queues[qi].keys.get(&k);
            match known {
                None => violation!(
                    self,
                    "{what} delivered an event this queue was never given (type {}, id {:#x}): {e:?}",
                    k.0,
                    k.1
                ),
                Some(cookies) if !cookies.contains(&e.cookie()) => violation!(
                    self,
                    "{what} delivered cookie {:#x} that was never given for (type {}, id {:#x})",
                    e.cookie(),
                    k.0,
                    k.1
                ),
                Some(_) => {}
            }
            if !is_fd_type(e.type_) {
                if seen.contains(&k) {
                    let dump: Vec<String> = evs
                        .iter()
                        .filter(|o| key(o) == k)
                        .map(|o| format!("{o:?}"))
                        .collect();
                    self.known(
                        Known::OccurrenceTwicePerWait,
                        format_args!(
                            "{what} delivered (type {}, id {:#x}) twice in one wait: {}",
                            k.0,
                            k.1,
                            dump.join(" / ")
                        ),
                    );
                }
                seen.push(k);
            }
        }
    }

    fn op_get_events(&mut self, s: &mut Src<'_>) {
        let fd = self.pick_qfd(s);
        let chaotic = self.bad(s);
        let max_nr: u32 = match s.below(16) {
            _ if !chaotic => 1 + s.below(64),
            0 => 0,
            1..=10 => 1 + s.below(16),
            11..=13 => 17 + s.below(300),
            14 => MAX_OUT + s.below(8),
            _ => u32::MAX,
        };
        let min_nr = match s.below(16) {
            0..=5 => 0,
            6..=14 => s.below(max_nr.min(64) + 1),
            _ if chaotic => max_nr.saturating_add(1 + s.below(4)),
            _ => 1,
        };
        let mut x = Expect::default();
        let target = self.expect_target(fd, &mut x);
        let nonblock = matches!(target, Target::Queue(_)) && is_nonblock(fd);
        let (ts, flags, budget, bad_ts, bad_flags) = self.gen_timeout(s, nonblock);
        if bad_ts || bad_flags {
            x.must(libc::EINVAL);
        }
        // D15: the count checks, and NULL with max_nr > 0, fail before any wait.
        if max_nr == 0 || min_nr > max_nr {
            x.must(libc::EINVAL);
        }
        let want = max_nr.min(MAX_OUT) as usize;
        let buf = self.gen_buf(s, want, |_| event_from_bytes([0x5A; UKEVENT]));
        if matches!(buf, Buf::Null) && max_nr > 0 {
            x.must(libc::EFAULT);
        }
        if !buf.writable() || buf.cap() < want {
            x.maybe(libc::EFAULT);
        }
        let ring_before = match target {
            Target::Queue(i) => {
                self.check_ring_header(i);
                self.queues[i].ring.as_mut().map(|r| {
                    r.sync();
                    (r.kidx(), r.used())
                })
            }
            _ => None,
        };
        self.trace(format_args!(
            "get_events(fd {fd} {target:?}, min {min_nr}, max {max_nr}, {}.{:09} flags {flags:#x}, buf {})",
            ts.tv_sec,
            ts.tv_nsec,
            buf_desc(&buf)
        ));
        let p = buf.ptr();
        // SAFETY: `p` is NULL, unmapped, or harness memory for `buf.cap()` entries followed by
        // a guard page; the library copies out and answers EFAULT where it cannot.
        let r = self.call(2, budget, || unsafe {
            kevent_get_events(fd, min_nr, max_nr, ts, p, flags)
        });
        if self.stale_success("kevent_get_events", fd, target, r, &x) {
            return;
        }
        if self.broken_queue("kevent_get_events", target, r, &x) {
            return;
        }
        self.check_errno("kevent_get_events", r, GET_ERRNOS, &x);
        if let Target::Queue(i) = target {
            self.check_ring_header(i);
        }
        if r.ret < 0 {
            return;
        }
        let got = r.ret as u32;
        STATS.events.fetch_add(u64::from(got), Relaxed);
        if got > max_nr || got > MAX_OUT {
            violation!(self, "kevent_get_events returned {got} for max_nr {max_nr}");
        }
        if got as usize > buf.cap() {
            violation!(
                self,
                "kevent_get_events returned {got} events but could only write {}",
                buf.cap()
            );
        }
        let Target::Queue(qi) = target else {
            violation!(
                self,
                "kevent_get_events succeeded on fd {fd}, which is not a queue"
            );
        };
        let Buf::Mem { g, .. } = &buf else {
            return;
        };
        let evs = read_events(g.ptr(), got as usize);
        self.check_delivered(qi, &evs, "get_events");
        if let (Some((k0, used0)), Some(ring)) = (ring_before, &mut self.queues[qi].ring) {
            let n = ring.n;
            let free0 = n - 1 - used0;
            let copied = evs
                .iter()
                .take_while(|e| e.ret_flags & KEVENT_RET_COPY_FAILED == 0)
                .count() as u32;
            let expect = got.min(free0);
            if copied != expect
                || evs[copied as usize..]
                    .iter()
                    .any(|e| e.ret_flags & KEVENT_RET_COPY_FAILED == 0)
            {
                violation!(
                    self,
                    "get_events: {got} events, {free0} free ring slots: expected the first {expect} in the ring and the rest RET_COPY_FAILED, got {copied} copied ({:?})",
                    evs.iter().map(|e| e.ret_flags).collect::<Vec<_>>()
                );
            }
            ring.k += u64::from(copied);
            let k1 = ring.kidx();
            if u64::from(k1) != ring.k % u64::from(n) {
                violation!(
                    self,
                    "get_events mirrored {copied} events but ring_kidx moved {k0} -> {k1} (n {n})"
                );
            }
            for (j, e) in evs.iter().take(copied as usize).enumerate() {
                let slot = ring.entry(k0 + j as u32);
                if event_bytes(&slot) != event_bytes(e) {
                    violation!(
                        self,
                        "ring slot {} differs from the event get_events returned: {slot:?} vs {e:?}",
                        (k0 + j as u32) % n
                    );
                }
            }
        }
    }

    fn op_wait(&mut self, s: &mut Src<'_>) {
        let fd = self.pick_qfd(s);
        let mut x = Expect::default();
        let target = self.expect_target(fd, &mut x);
        let ring = match target {
            Target::Queue(i) => self.queues[i].ring.as_ref().map(|r| (r.n, r.uidx())),
            _ => None,
        };
        let (n, uidx) = ring.unwrap_or((8, 0));
        let chaotic = self.bad(s);
        let num = match s.below(8) {
            _ if !chaotic => 1 + s.below(n),
            0 => 0,
            1..=5 => 1 + s.below(n),
            6 => n + s.below(2),
            _ => s.u32(),
        };
        let old_uidx = match s.below(8) {
            0..=5 => uidx,
            6 => (uidx + 1 + s.below(n.max(2) - 1)) % n.max(1),
            _ => s.u32(),
        };
        let nonblock = matches!(target, Target::Queue(_)) && is_nonblock(fd);
        let (ts, flags, mut budget, bad_ts, bad_flags) = self.gen_timeout(s, nonblock);
        if bad_ts || bad_flags {
            x.must(libc::EINVAL);
        }
        if matches!(target, Target::Queue(_)) {
            match ring {
                None => x.must(libc::EINVAL),
                Some((n, _)) if num > n => x.must(libc::EINVAL),
                _ => {}
            }
        }
        if old_uidx != uidx || num == 0 {
            budget = 0;
        }
        let before = match target {
            Target::Queue(i) => {
                self.check_ring_header(i);
                self.queues[i].ring.as_mut().map(|r| {
                    r.sync();
                    (r.kidx(), r.used())
                })
            }
            _ => None,
        };
        self.trace(format_args!(
            "wait(fd {fd} {target:?}, num {num}, old_uidx {old_uidx} (uidx {uidx}), {}.{:09} flags {flags:#x})",
            ts.tv_sec, ts.tv_nsec
        ));
        // SAFETY: only integers and a timespec by value; the ring it writes is harness memory
        // that stays mapped while the queue fd is open.
        let r = self.call(3, budget, || unsafe {
            kevent_wait(fd, num, old_uidx, ts, flags)
        });
        if self.stale_success("kevent_wait", fd, target, r, &x) {
            return;
        }
        if target == Target::Closed
            && r.ret == -1
            && r.errno == libc::EINVAL
            && x.must == [libc::EBADF]
        {
            self.trace(format_args!("  -> EINVAL"));
            self.known(
                Known::WaitClosedQueueEinval,
                format_args!("kevent_wait on closed queue fd {fd} gave EINVAL, not EBADF"),
            );
            return;
        }
        if self.broken_queue("kevent_wait", target, r, &x) {
            return;
        }
        self.check_errno("kevent_wait", r, WAIT_ERRNOS, &x);
        let Target::Queue(qi) = target else {
            if r.ret >= 0 {
                violation!(
                    self,
                    "kevent_wait succeeded on fd {fd}, which is not a queue"
                );
            }
            return;
        };
        self.check_ring_header(qi);
        let (Some((k0, used0)), true) = (before, r.ret >= 0) else {
            return;
        };
        let got = r.ret as u32;
        STATS.ring_events.fetch_add(u64::from(got), Relaxed);
        let Some(rs) = &mut self.queues[qi].ring else {
            return;
        };
        let n = rs.n;
        let free0 = n - 1 - used0;
        rs.k += u64::from(got);
        let k_model = rs.k;
        if got > num || got > free0 {
            violation!(
                self,
                "kevent_wait moved {got} events for num {num} with {free0} free slots (D12)"
            );
        }
        if (old_uidx != uidx || num == 0) && got != 0 {
            violation!(
                self,
                "kevent_wait with old_uidx {old_uidx} != consumer index {uidx} returned {got}"
            );
        }
        let k1 = rs.kidx();
        let evs: Vec<ukevent> = (0..got).map(|j| rs.entry(k0.wrapping_add(j))).collect();
        if u64::from(k1) != k_model % u64::from(n) {
            violation!(
                self,
                "kevent_wait returned {got} but ring_kidx moved {k0} -> {k1} (n {n})"
            );
        }
        self.check_delivered(qi, &evs, "wait");
        if let Some(e) = evs
            .iter()
            .find(|e| e.ret_flags & KEVENT_RET_COPY_FAILED != 0)
        {
            violation!(
                self,
                "kevent_wait put an event with RET_COPY_FAILED into the ring: {e:?}"
            );
        }
    }

    fn op_commit(&mut self, s: &mut Src<'_>) {
        let fd = self.pick_qfd(s);
        let mut x = Expect::default();
        let target = self.expect_target(fd, &mut x);
        let model = match target {
            Target::Queue(i) => {
                self.check_ring_header(i);
                self.queues[i].ring.as_mut().map(|r| {
                    r.sync();
                    (r.n, r.kidx(), r.uidx(), r.over(), r.used())
                })
            }
            _ => None,
        };
        let (n, kidx, uidx, over, used) = model.unwrap_or((8, 0, 0, 0, 0));
        let chaotic = self.bad(s);
        let new_uidx = match s.below(10) {
            0..=3 => kidx,
            4..=6 => (uidx + s.below(used + 1)) % n,
            7 => s.below(n),
            _ if !chaotic => kidx,
            8 => n + s.below(3),
            _ => s.u32(),
        };
        let c_over = match s.below(10) {
            _ if !chaotic => over,
            0..=5 => over,
            6..=7 => over.wrapping_sub(1),
            8 => over.wrapping_add(1),
            _ => s.u32(),
        };
        if matches!(target, Target::Queue(_)) {
            match model {
                None => x.must(libc::EINVAL),
                Some(_) => {
                    if new_uidx >= n {
                        x.must(libc::EINVAL);
                    }
                    if c_over != over && c_over != over.wrapping_sub(1) {
                        x.must(libc::EOVERFLOW);
                    }
                }
            }
        }
        self.trace(format_args!(
            "commit(fd {fd} {target:?}, new_uidx {new_uidx}, over {c_over}) model n {n} kidx {kidx} uidx {uidx} over {over}"
        ));
        // SAFETY: integers only; the ring header it may write is harness memory that stays
        // mapped while the queue fd is open.
        let r = self.call(4, 0, || unsafe { kevent_commit(fd, new_uidx, c_over) });
        self.check_graveyard("kevent_commit");
        if self.broken_queue("kevent_commit", target, r, &x) {
            return;
        }
        self.check_errno("kevent_commit", r, COMMIT_ERRNOS, &x);
        let Target::Queue(qi) = target else {
            if r.ret >= 0 {
                violation!(
                    self,
                    "kevent_commit succeeded on fd {fd}, which is not a queue"
                );
            }
            return;
        };
        if r.ret < 0 || model.is_none() {
            self.check_ring_header(qi);
            return;
        }
        // D13, as the spec words it, on absolute positions (the engine's formula works on
        // indices mod n; this must not be a copy of it): `new_uidx` names the one position P
        // with P ≡ new_uidx (mod n) among the n positions ending at the producer position K,
        // i.e. in (K - n, K]. P after the consumer position U releases U..P and moves U to P
        // (ring_over is then U / n); P at or before U is a stale commit.
        let Some(rs) = &mut self.queues[qi].ring else {
            return;
        };
        let new_u = d13_commit_model(rs.k, rs.u, n, new_uidx);
        let released = (new_u - rs.u) as u32;
        rs.u = new_u;
        if r.ret as u32 != released {
            violation!(
                self,
                "kevent_commit released {} slots, D13 says {released} (n {n}, kidx {kidx}, uidx {uidx}, new_uidx {new_uidx})",
                r.ret
            );
        }
        STATS.released.fetch_add(u64::from(released), Relaxed);
        self.check_ring_header(qi);
    }

    fn op_close_queue(&mut self, s: &mut Src<'_>) {
        if self.queues.is_empty() {
            return;
        }
        let i = s.below(self.queues.len() as u32) as usize;
        let q = self.queues.remove(i);
        self.trace(format_args!("close(queue fd {})", q.fd));
        if close_fd(q.fd) != 0 {
            violation!(
                self,
                "close of queue fd {} failed: {}",
                q.fd,
                errno_name(errno())
            );
        }
        self.bury(q.ring);
        self.dead_queues.push(q.fd);
        self.closed.retain(|&c| c != q.fd);
    }

    fn add_fd(&mut self, fd: RawFd, kind: Kind) {
        if fd < 0 {
            return;
        }
        self.closed.retain(|&c| c != fd);
        self.fds.push(HFd { fd, kind });
    }

    fn op_open_fd(&mut self, s: &mut Src<'_>) {
        if self.fds.len() >= MAX_FDS {
            return;
        }
        let c = s.below(10);
        let fl = libc::O_NONBLOCK | libc::O_CLOEXEC;
        match c {
            0 => {
                let mut sv = [-1; 2];
                // SAFETY: socketpair writes two fds into the local array.
                if unsafe {
                    libc::socketpair(libc::AF_UNIX, libc::SOCK_STREAM | fl, 0, sv.as_mut_ptr())
                } == 0
                {
                    self.add_fd(sv[0], Kind::Unix);
                    self.add_fd(sv[1], Kind::Unix);
                }
            }
            1 => {
                let mut p = [-1; 2];
                // SAFETY: pipe2 writes two fds into the local array.
                if unsafe { libc::pipe2(p.as_mut_ptr(), fl) } == 0 {
                    self.add_fd(p[0], Kind::PipeR);
                    self.add_fd(p[1], Kind::PipeW);
                }
            }
            2 => {
                // SAFETY: eventfd has no memory arguments.
                let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
                self.add_fd(fd, Kind::Event);
            }
            3 => {
                // SAFETY: the name is a NUL-terminated literal.
                let fd = unsafe { libc::memfd_create(c"kevent-fuzz".as_ptr(), libc::MFD_CLOEXEC) };
                self.add_fd(fd, Kind::Memfd);
            }
            4 => {
                let path = std::ffi::CString::new(self.dir.as_os_str().as_encoded_bytes())
                    .unwrap_or_default();
                // SAFETY: `path` is a NUL-terminated string that outlives the call.
                let fd = unsafe {
                    libc::open(
                        path.as_ptr(),
                        libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
                    )
                };
                self.add_fd(fd, Kind::Dir);
            }
            5 => {
                // A plain epoll instance: a queue fd number may be reused by one.
                // SAFETY: no memory arguments.
                let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
                self.add_fd(fd, Kind::Epoll);
            }
            6 => {
                // SAFETY: socket has no memory arguments.
                let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM | fl, 0) };
                if fd >= 0 {
                    let mut a = loopback(0);
                    let mut len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
                    // SAFETY: `a` and `len` are locals of the sizes passed.
                    let ok = unsafe {
                        libc::bind(fd, (&raw const a).cast(), len) == 0
                            && libc::listen(fd, 8) == 0
                            && libc::getsockname(fd, (&raw mut a).cast(), &mut len) == 0
                    };
                    if ok {
                        self.listener_port = Some(u16::from_be(a.sin_port));
                    }
                    self.add_fd(fd, Kind::Listener);
                }
            }
            7 => {
                // SAFETY: socket has no memory arguments.
                let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM | fl, 0) };
                if fd >= 0 {
                    if let Some(port) = self.listener_port {
                        let a = loopback(port);
                        // SAFETY: `a` is a local sockaddr_in of the size passed.
                        unsafe {
                            libc::connect(
                                fd,
                                (&raw const a).cast(),
                                std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
                            )
                        };
                    }
                    self.add_fd(fd, Kind::Tcp);
                }
            }
            8 => {
                // SAFETY: socket has no memory arguments.
                let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | fl, 0) };
                self.add_fd(fd, Kind::Udp);
            }
            _ => {
                // A regular file that is not a memfd: wrong kind for every fd type.
                let fd = {
                    let path =
                        std::ffi::CString::new(self.dir.join("f0").as_os_str().as_encoded_bytes())
                            .unwrap_or_default();
                    // SAFETY: `path` is NUL-terminated and outlives the call.
                    unsafe {
                        libc::open(
                            path.as_ptr(),
                            libc::O_RDWR | libc::O_CREAT | libc::O_CLOEXEC,
                            0o600,
                        )
                    }
                };
                self.add_fd(fd, Kind::Memfd);
            }
        }
        self.trace(format_args!(
            "open -> {:?}",
            self.fds.iter().map(|f| (f.fd, f.kind)).collect::<Vec<_>>()
        ));
    }

    fn op_close_fd(&mut self, s: &mut Src<'_>) {
        if self.fds.is_empty() {
            return;
        }
        let i = s.below(self.fds.len() as u32) as usize;
        let f = self.fds.remove(i);
        self.trace(format_args!("close(fd {} {:?})", f.fd, f.kind));
        close_fd(f.fd);
        self.closed.push(f.fd);
    }

    fn op_poke_fd(&mut self, s: &mut Src<'_>) {
        if self.fds.is_empty() {
            return;
        }
        let i = s.below(self.fds.len() as u32) as usize;
        let (fd, kind) = (self.fds[i].fd, self.fds[i].kind);
        let big = s.chance(32);
        let mut buf = vec![
            0x42u8;
            if big {
                256 * 1024
            } else {
                1 + s.below(64) as usize
            }
        ];
        let read = s.chance(100);
        self.trace(format_args!(
            "poke(fd {fd} {kind:?}, read {read}, big {big})"
        ));
        match kind {
            Kind::Listener => {
                // SAFETY: NULL address arguments are allowed.
                let c = unsafe {
                    libc::accept4(
                        fd,
                        std::ptr::null_mut(),
                        std::ptr::null_mut(),
                        libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                    )
                };
                if c >= 0 {
                    if self.fds.len() < MAX_FDS {
                        self.add_fd(c, Kind::Tcp);
                    } else {
                        close_fd(c);
                    }
                }
            }
            Kind::Event => {
                let v = 1u64;
                // SAFETY: 8-byte buffers of the harness's own, as eventfd requires.
                unsafe {
                    if read {
                        let mut v = 0u64;
                        libc::read(fd, (&raw mut v).cast(), 8);
                    } else {
                        libc::write(fd, (&raw const v).cast(), 8);
                    }
                }
            }
            Kind::Unix | Kind::Tcp | Kind::PipeR | Kind::PipeW | Kind::Udp | Kind::Memfd => {
                // SAFETY: `buf` is the harness's own, valid for its length.
                unsafe {
                    if read {
                        libc::read(fd, buf.as_mut_ptr().cast(), buf.len());
                    } else if s.chance(20) && matches!(kind, Kind::Unix | Kind::Tcp) {
                        libc::shutdown(
                            fd,
                            s.pick(&[libc::SHUT_RD, libc::SHUT_WR, libc::SHUT_RDWR]),
                        );
                    } else if matches!(kind, Kind::Unix | Kind::Tcp | Kind::Udp) {
                        libc::send(fd, buf.as_ptr().cast(), buf.len(), libc::MSG_NOSIGNAL);
                    } else {
                        libc::write(fd, buf.as_ptr().cast(), buf.len());
                    }
                }
            }
            Kind::Dir | Kind::Epoll => {}
        }
    }

    fn op_signal(&mut self, s: &mut Src<'_>) {
        let sig = s.pick(&[libc::SIGUSR1, libc::SIGUSR2]);
        self.trace(format_args!("raise({sig})"));
        // SAFETY: SIGUSR1/SIGUSR2 have the harness's no-op handler (or the library's, which
        // chains to it, or reports only with NOMASK).
        unsafe { libc::raise(sig) };
    }

    fn op_inode(&mut self, s: &mut Src<'_>) {
        let name = format!("f{}", s.below(4));
        let path = self.dir.join(&name);
        let create = s.chance(128);
        self.trace(format_args!("inode({name}, create {create})"));
        if create {
            let _ = std::fs::write(&path, b"x");
        } else {
            let _ = std::fs::remove_file(&path);
        }
    }

    fn op_nonblock(&mut self, s: &mut Src<'_>) {
        if self.queues.is_empty() {
            return;
        }
        let fd = self.queues[s.below(self.queues.len() as u32) as usize].fd;
        // SAFETY: F_GETFL/F_SETFL on a queue fd the harness owns.
        unsafe {
            let fl = libc::fcntl(fd, libc::F_GETFL);
            if fl >= 0 {
                libc::fcntl(fd, libc::F_SETFL, fl ^ libc::O_NONBLOCK);
            }
        }
        self.trace(format_args!("toggle O_NONBLOCK on {fd}"));
    }

    /// Whether `t` is a timer of this input whose queue is still open (a timer whose queue
    /// was closed may answer EINVAL).
    fn timer_is_live(&self, t: usize) -> bool {
        self.timers
            .iter()
            .any(|&(v, serial)| v == t && self.queues.iter().any(|q| q.serial == serial))
    }

    fn pick_timer(&self, s: &mut Src<'_>) -> usize {
        if !self.timers.is_empty() && s.chance(220) {
            s.pick(&self.timers).0
        } else {
            s.pick(&[0, 1, 2, 1000, u32::MAX as usize, usize::MAX, 1 << 40])
        }
    }

    fn op_timer(&mut self, s: &mut Src<'_>) {
        match s.below(8) {
            0..=2 => self.timer_create(s),
            3..=5 => self.timer_settime(s),
            6 => self.timer_gettime(s),
            _ => {
                let t = self.pick_timer(s);
                self.trace(format_args!("timer_delete({t:#x})"));
                let tid: libc::timer_t = std::ptr::without_provenance_mut(t);
                // SAFETY: a timer_t by value; the library only looks it up.
                let r = self.call(5, 0, || unsafe { kevent_timer_delete(tid) });
                let mut x = Expect::default();
                if !self.timers.iter().any(|&(v, _)| v == t) {
                    x.maybe(libc::EINVAL);
                }
                self.check_errno("kevent_timer_delete", r, TIMER_ERRNOS, &x);
                if r.ret == 0 {
                    self.timers.retain(|&(v, _)| v != t);
                }
            }
        }
    }

    fn timer_create(&mut self, s: &mut Src<'_>) {
        if self.timers.len() >= MAX_TIMERS {
            return;
        }
        let fd = self.pick_qfd(s);
        let mut x = Expect::default();
        let target = self.expect_target(fd, &mut x);
        let clock = match s.below(8) {
            0..=4 => libc::CLOCK_MONOTONIC,
            5 => libc::CLOCK_REALTIME,
            6 => libc::CLOCK_BOOTTIME,
            _ => {
                x.maybe(libc::EINVAL);
                s.pick(&[libc::CLOCK_PROCESS_CPUTIME_ID, -1, 99])
            }
        };
        // SAFETY: sigevent is integers, a union of an int and a pointer, and padding: zero is
        // a valid value.
        let mut sev: libc::sigevent = unsafe { std::mem::zeroed() };
        sev.sigev_notify = if s.chance(230) {
            SIGEV_KEVENT as i32
        } else {
            x.must(libc::EINVAL);
            s.pick(&[libc::SIGEV_NONE, libc::SIGEV_SIGNAL, 77])
        };
        sev.sigev_notify_thread_id = fd;
        let salt = match target {
            Target::Queue(i) => self.queues[i].serial,
            _ => 999_999,
        };
        let cookie = (u64::from(salt) << 32) | u64::from(s.u16());
        sev.sigev_value.sival_ptr = std::ptr::without_provenance_mut(cookie as usize);
        let mode = s.below(16);
        let mut tid: libc::timer_t = std::ptr::null_mut();
        let sevp: *mut libc::sigevent = if mode == 0 {
            x.must(libc::EINVAL);
            std::ptr::null_mut()
        } else {
            &raw mut sev
        };
        let tidp: *mut libc::timer_t = match mode {
            1 => {
                x.must(libc::EFAULT);
                std::ptr::null_mut()
            }
            2 => {
                x.must(libc::EFAULT);
                std::ptr::without_provenance_mut(unmapped_addr())
            }
            _ => &raw mut tid,
        };
        self.trace(format_args!(
            "timer_create(clock {clock}, fd {fd} {target:?}, notify {}, mode {mode})",
            sev.sigev_notify
        ));
        // SAFETY: `sevp` is NULL or a local sigevent; `tidp` is NULL, unmapped or a local:
        // the library copies through uaccess and answers EFAULT for the bad ones.
        let r = self.call(5, 0, || unsafe { kevent_timer_create(clock, sevp, tidp) });
        let stale = r.ret == 0 && !matches!(target, Target::Queue(_)) && x.must.len() == 1;
        if stale {
            self.trace(format_args!("  -> 0"));
            self.known(
                Known::TimerCreateOnClosedQueue,
                format_args!(
                    "kevent_timer_create succeeded for fd {fd} ({target:?}), which is no longer a queue"
                ),
            );
            self.timers.push((tid.addr(), 0));
            return;
        }
        self.check_errno("kevent_timer_create", r, TIMER_ERRNOS, &x);
        if r.ret == 0 {
            let Target::Queue(qi) = target else {
                violation!(
                    self,
                    "kevent_timer_create succeeded for fd {fd}, not a queue"
                );
            };
            let t = tid.addr();
            self.timers.push((t, self.queues[qi].serial));
            let mut e = ukevent::new(KEVENT_POSIX_TIMER, kevent_id::from_u64(t as u64), 0, 0);
            e.set_cookie(cookie);
            self.queues[qi].note_key(&e);
        }
    }

    fn timer_settime(&mut self, s: &mut Src<'_>) {
        let t = self.pick_timer(s);
        let mut x = Expect::default();
        if !self.timer_is_live(t) {
            // Not a timer, or one whose queue was closed (the queue is gone: EBADF).
            x.maybe(libc::EINVAL);
            x.maybe(libc::EBADF);
        }
        let flags = match s.below(8) {
            0..=4 => 0,
            5..=6 => libc::TIMER_ABSTIME,
            _ => {
                x.maybe(libc::EINVAL);
                s.u32() as i32
            }
        };
        let value_ns = match s.below(4) {
            0 => 0,
            _ => 1 + u64::from(s.below(WAIT_CAP_NS as u32)),
        };
        let interval_ns = match s.below(4) {
            0..=1 => 0,
            2 => 1 + u64::from(s.below(1000)),
            _ => 1 + u64::from(s.below(WAIT_CAP_NS as u32)),
        };
        let ts = |ns: u64| libc::timespec {
            tv_sec: (ns / 1_000_000_000) as i64,
            tv_nsec: (ns % 1_000_000_000) as i64,
        };
        let mut new = libc::itimerspec {
            it_interval: ts(interval_ns),
            it_value: ts(value_ns),
        };
        if flags == libc::TIMER_ABSTIME && value_ns != 0 {
            new.it_value = ts_add_ns(now(libc::CLOCK_MONOTONIC), value_ns);
        }
        if s.chance(16) {
            new.it_interval.tv_nsec = 1_000_000_000;
            x.must(libc::EINVAL);
        }
        let mut old = new;
        let mode = s.below(8);
        let newp: *const libc::itimerspec = if mode == 0 {
            x.must(libc::EINVAL);
            std::ptr::null()
        } else {
            &raw const new
        };
        let oldp: *mut libc::itimerspec = match mode {
            1..=3 => std::ptr::null_mut(),
            4 => {
                x.maybe(libc::EFAULT);
                std::ptr::without_provenance_mut(unmapped_addr())
            }
            _ => &raw mut old,
        };
        self.trace(format_args!(
            "timer_settime({t:#x}, flags {flags:#x}, value {value_ns} ns interval {interval_ns} ns, mode {mode})"
        ));
        let tid: libc::timer_t = std::ptr::without_provenance_mut(t);
        // SAFETY: `newp` is NULL or a local; `oldp` NULL, unmapped or a local: copied through
        // uaccess (EFAULT for the bad ones).
        let r = self.call(5, 0, || unsafe {
            kevent_timer_settime(tid, flags, newp, oldp)
        });
        self.check_errno("kevent_timer_settime", r, TIMER_ERRNOS, &x);
    }

    fn timer_gettime(&mut self, s: &mut Src<'_>) {
        let t = self.pick_timer(s);
        let mut x = Expect::default();
        if !self.timer_is_live(t) {
            // Not a timer, or one whose queue was closed (the queue is gone: EBADF).
            x.maybe(libc::EINVAL);
            x.maybe(libc::EBADF);
        }
        let mut cur = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
        };
        let curp: *mut libc::itimerspec = if s.chance(16) {
            x.must(libc::EFAULT);
            std::ptr::null_mut()
        } else {
            &raw mut cur
        };
        self.trace(format_args!("timer_gettime({t:#x})"));
        let tid: libc::timer_t = std::ptr::without_provenance_mut(t);
        // SAFETY: `curp` is NULL or a local, written through uaccess.
        let r = self.call(5, 0, || unsafe { kevent_timer_gettime(tid, curp) });
        self.check_errno("kevent_timer_gettime", r, TIMER_ERRNOS, &x);
        if r.ret == 0
            && !(0..1_000_000_000).contains(&cur.it_value.tv_nsec)
            && !(0..1_000_000_000).contains(&cur.it_interval.tv_nsec)
        {
            violation!(self, "kevent_timer_gettime gave an invalid itimerspec");
        }
    }

    /// Closes everything this input made, releases what the library still holds for closed
    /// queues, and checks that no fd was leaked.
    fn finish(&mut self, g: &Global, fds_before: usize) {
        for (t, _) in std::mem::take(&mut self.timers) {
            let tid: libc::timer_t = std::ptr::without_provenance_mut(t);
            // SAFETY: a timer_t by value.
            let r = unsafe { kevent_timer_delete(tid) };
            if r != 0 {
                violation!(
                    self,
                    "kevent_timer_delete of live timer {t:#x} failed: {}",
                    errno_name(errno())
                );
            }
        }
        for q in std::mem::take(&mut self.queues) {
            close_fd(q.fd);
            self.bury(q.ring);
            self.dead_queues.push(q.fd);
        }
        for f in std::mem::take(&mut self.fds) {
            close_fd(f.fd);
        }
        // A closed queue's resources are released by the library's next call on its number
        // (or by a later kevent_init that sweeps it): make that happen now.
        for fd in std::mem::take(&mut self.dead_queues) {
            // SAFETY: integers only.
            let r = unsafe { kevent_commit(fd, 0, 0) };
            if r >= 0 {
                violation!(self, "kevent_commit on closed queue fd {fd} returned {r}");
            }
        }
        self.check_graveyard("the clean-up");
        self.graveyard.clear();
        self.graveyard_lens.clear();
        let mut one = [ukevent::default()];
        let zero = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: a one-entry local buffer; a zero timeout.
        let r = unsafe { kevent_get_events(g.probe, 0, 1, zero, one.as_mut_ptr(), 0) };
        if r != 0 {
            violation!(
                self,
                "the probe queue returned {r} ({})",
                errno_name(errno())
            );
        }
        for i in 0..4 {
            let _ = std::fs::remove_file(self.dir.join(format!("f{i}")));
        }
        let n = count_fds();
        if n != fds_before {
            violation!(
                self,
                "fd leak: {n} fds open after the input, {fds_before} before it\n{}",
                list_fds()
            );
        }
    }
}

fn gen_signal_id(s: &mut Src<'_>) -> u64 {
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

/// The D13 oracle on absolute positions: the consumer position after `kevent_commit(new_uidx)`
/// on a ring of `n` with producer position `k` and consumer position `u` (`u <= k < u + n`).
///
/// `new_uidx` names the one position P with P ≡ new_uidx (mod n) in (k - n, k]; P after `u`
/// releases `u..P`, P at or before `u` is a stale commit (the position stays `u`). Written from
/// the spec's words, never from the engine's modular formula (`kevent_sys::ring::commit`).
fn d13_commit_model(k: u64, u: u64, n: u32, new_uidx: u32) -> u64 {
    let (k, n, new_uidx) = (i128::from(k), i128::from(n), i128::from(new_uidx));
    let mut p = (k / n) * n + new_uidx;
    if p > k {
        p -= n;
    }
    p.max(i128::from(u)) as u64
}

fn loopback(port: u16) -> libc::sockaddr_in {
    libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: port.to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from_be_bytes([127, 0, 0, 1]).to_be(),
        },
        sin_zero: [0; 8],
    }
}

fn is_nonblock(fd: RawFd) -> bool {
    // SAFETY: F_GETFL only reads the file's status flags.
    fd >= 0 && unsafe { libc::fcntl(fd, libc::F_GETFL) } & libc::O_NONBLOCK != 0
}

fn buf_desc(b: &Buf) -> String {
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

fn setup() -> Global {
    // SAFETY: no arguments; a static string or NULL.
    if unsafe { kevent_backend() }.is_null() {
        panic!("kevent-fuzz: no kevent backend in this process (KEVENT_BACKEND?)");
    }
    // SAFETY: installs a handler that does nothing for SIGUSR1/SIGUSR2 (so raising them is
    // harmless whatever the library does), and ignores SIGPIPE (writes to closed pipes).
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = noop_handler as extern "C" fn(libc::c_int) as usize;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(libc::SIGUSR1, &sa, std::ptr::null_mut());
        libc::sigaction(libc::SIGUSR2, &sa, std::ptr::null_mut());
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    }
    #[cfg(fuzzing)]
    {
        extern "C" fn print_stats() {
            eprintln!("kevent-fuzz: {}", STATS.summary());
        }
        // SAFETY: registers a plain `extern "C"` function that lives for the whole program.
        unsafe { libc::atexit(print_stats) };
    }
    let dir = std::env::temp_dir().join(format!("kevent-fuzz-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    // SAFETY: no ring.
    let probe = unsafe { kevent_init(std::ptr::null_mut(), 0, 0) };
    assert!(
        probe >= 0,
        "kevent-fuzz: kevent_init failed: {}",
        errno_name(errno())
    );
    // The library's process-wide signal doorbell (an eventfd) is made by the first SIGNAL
    // kevent and lives for the process: make it now, so it is part of the baseline.
    let mut e = [ukevent::new(
        KEVENT_SIGNAL,
        kevent_id::signal(libc::SIGUSR2, true),
        1,
        0,
    )];
    // SAFETY: a one-entry local array.
    unsafe {
        kevent_ctl(probe, KEVENT_CTL_ADD, 1, e.as_mut_ptr());
        kevent_ctl(probe, KEVENT_CTL_REMOVE, 1, e.as_mut_ptr());
    }
    let zero = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    let mut one = [ukevent::default()];
    // SAFETY: a one-entry local buffer.
    unsafe { kevent_get_events(probe, 0, 1, zero, one.as_mut_ptr(), 0) };
    Global { probe, dir }
}

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
        let op = s.below(26);
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
mod tests {
    use super::*;

    /// Every state of small rings: the oracle and the engine's formula agree (released count,
    /// consumer index, ring_over).
    #[test]
    fn d13_oracle_agrees_with_the_engine_on_small_rings() {
        for n in 2u32..=7 {
            let n64 = u64::from(n);
            for u in 0..3 * n64 {
                for k in u..u + n64 {
                    for new_uidx in 0..n {
                        let new_u = d13_commit_model(k, u, n, new_uidx);
                        let over = (u / n64) as u32;
                        let c = kevent_sys::ring::commit(
                            n,
                            (k % n64) as u32,
                            (u % n64) as u32,
                            over,
                            new_uidx,
                            over,
                        )
                        .unwrap();
                        let what = format!("n {n} k {k} u {u} new_uidx {new_uidx}");
                        assert_eq!(u64::from(c.released), new_u - u, "{what}");
                        assert_eq!(u64::from(c.uidx), new_u % n64, "{what}");
                        assert_eq!(c.over, (new_u / n64) as u32, "{what}");
                    }
                }
            }
        }
    }

    /// The oracle is independent of the formula it checks: an off-by-one in the formula's
    /// wrap test (`uidx + released > n`, so a commit that ends exactly at the end of the array
    /// does not increment `ring_over`) disagrees with the oracle's `ring_over`, `U / n`.
    #[test]
    fn d13_oracle_catches_an_off_by_one_wrap() {
        let (n, k, u, new_uidx) = (4u32, 4u64, 3u64, 0u32);
        let new_u = d13_commit_model(k, u, n, new_uidx);
        let (uidx, released, over) = (3u32, (new_u - u) as u32, 0u32);
        let wrong_over = if uidx + released > n { over + 1 } else { over };
        assert_eq!(new_u, 4);
        assert_ne!(wrong_over, (new_u / u64::from(n)) as u32);
    }
}
