//! The conformance suite's shared harness (STYLE.md 6.6).
//!
//! The macros are plain `macro_rules!` (not exported): each test file says
//! `#[macro_use] mod common;`, so the same files also compile as modules of the combined
//! `conformance` test binary.
//!
//! * **Generic runner.** A test body is written once as `fn(b: Backend)` and run against
//!   every backend this machine has: the fallback always, native when
//!   [`Backend::native`] is `Ok` (otherwise the reason is printed; a missing kevent kernel
//!   is never a failure). [`backend_test!`] declares such a test; [`isolated_test!`] runs each
//!   backend's run in a child process (re-executing this test binary), for tests that change
//!   process-wide state: signal dispositions, rlimits, `fork`, closing a queue under waiters.
//! * **`require!`** skips a test whose optional tool is missing (a FIFO-capable temp dir, a
//!   TCP loopback, …) and prints why; under `KEVENT_REQUIRE_ALL=1` the skip is a failure.
//! * **Exact expectations.** [`expect_events`] and [`Queue::expect_no_events`] are
//!   `#[track_caller]` and exact: every expected event must be there once, and an unexpected
//!   or duplicate event fails the test (the spec forbids duplicates).
//! * **Bounded time.** [`bounded`] runs a closure on a thread and fails the test if it does
//!   not finish in time; child processes are killed after a deadline.
#![allow(dead_code, unused_imports, unused_macros, unsafe_code)]

use std::ffi::c_int;
use std::io::Write as _;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::process::{Command, Stdio};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

pub use kevent_backend::Backend;
pub use kevent_sys::ring::RingView;
pub use kevent_sys::*;

// ---------------------------------------------------------------------------------------------
// Backends and the generic runner

/// Environment variable naming the one backend a child process runs (`fallback`/`native`).
pub const BACKEND_ENV: &str = "KEVENT_TEST_BACKEND";
/// Environment variable naming the isolated test a child process runs.
pub const ROLE_ENV: &str = "KEVENT_TEST_CHILD";
/// Environment variable that turns skips of optional tools into failures.
pub const REQUIRE_ALL_ENV: &str = "KEVENT_REQUIRE_ALL";

/// Every backend available here, with a printed reason for each one that is not.
pub fn backends(test: &str) -> Vec<Backend> {
    if let Ok(which) = std::env::var(BACKEND_ENV) {
        return match which.as_str() {
            "fallback" => vec![Backend::fallback()],
            "native" => vec![Backend::native().expect("the parent saw a native backend")],
            other => panic!("{BACKEND_ENV}={other:?}"),
        };
    }
    let mut v = vec![Backend::fallback()];
    match Backend::native() {
        Ok(n) => v.push(n),
        // Not a failure even under KEVENT_REQUIRE_ALL: CI machines have no kevent kernel.
        Err(e) => eprintln!("[{test}] native backend skipped: {}", e.reason()),
    }
    v
}

/// Runs `body` once per available backend, saying which one runs (the harness shows it on
/// failure).
pub fn for_each_backend(test: &str, body: fn(Backend)) {
    for b in backends(test) {
        eprintln!("[{test}] on the {} backend", b.as_str());
        body(b);
    }
}

/// Declares a conformance test: the body runs against every available backend.
///
/// ```ignore
/// backend_test! {
///     /// What the rule says.
///     fn s4_oneshot_delivered_once(b) { ... }
/// }
/// ```
macro_rules! backend_test {
    ($($(#[$m:meta])* fn $name:ident($b:ident) $body:block)*) => {$(
        $(#[$m])*
        #[test]
        fn $name() {
            fn body($b: common::Backend) $body
            common::for_each_backend(stringify!($name), body);
        }
    )*};
}

/// Declares a test whose body runs in a child process, once per backend (the body may
/// change process-wide state: signals, rlimits, fork, fd numbers).
macro_rules! isolated_test {
    ($($(#[$m:meta])* fn $name:ident($b:ident) $body:block)*) => {$(
        $(#[$m])*
        #[test]
        fn $name() {
            fn body($b: common::Backend) $body
            common::isolated(&common::test_path(module_path!(), stringify!($name)), body);
        }
    )*};
}

/// The name libtest gives test `name` declared in module `module` (`module_path!()`): the
/// module path without the crate name. In a per-file test binary that is just `name`; in
/// the combined `conformance` binary it is `s5_signal::name`.
pub fn test_path(module: &str, name: &str) -> String {
    match module.split_once("::") {
        Some((_crate, rest)) => format!("{rest}::{name}"),
        None => name.to_owned(),
    }
}

/// Skips the rest of the test when an optional tool is missing.
macro_rules! require {
    ($cond:expr, $($why:tt)+) => {
        if !$cond {
            common::skip(module_path!(), &format!($($why)+));
            return;
        }
    };
}

/// Reports a skip; a failure under `KEVENT_REQUIRE_ALL=1`.
#[track_caller]
pub fn skip(test: &str, why: &str) {
    if std::env::var(REQUIRE_ALL_ENV).as_deref() == Ok("1") {
        panic!("[{test}] required but unavailable: {why} ({REQUIRE_ALL_ENV}=1)");
    }
    eprintln!("[{test}] skipped: {why}");
}

/// How long an isolated child may run before it is killed and the test fails.
pub const CHILD_LIMIT: Duration = Duration::from_secs(120);

/// Runs `body` in a child process per backend: the child is this test binary, re-executed
/// with `--exact name` and [`ROLE_ENV`] set; it prints `CHILD-OK` when the body returned.
pub fn isolated(name: &str, body: fn(Backend)) {
    if std::env::var(ROLE_ENV).as_deref() == Ok(name) {
        let b = backends(name).remove(0);
        body(b);
        println!("\nCHILD-OK");
        let _ = std::io::stdout().flush();
        return;
    }
    for b in backends(name) {
        let out = run_child(name, b.as_str(), &[], CHILD_LIMIT);
        assert!(
            out.ok,
            "[{name}] child on the {} backend failed: {}",
            b.as_str(),
            out.describe()
        );
        eprintln!("[{name}] child on the {} backend passed", b.as_str());
        // The child's own notes (figures), shown with --nocapture.
        for line in out.stderr.lines().filter(|l| !l.trim().is_empty()) {
            eprintln!("[{name}]   child: {line}");
        }
    }
}

/// What a child process did.
#[derive(Debug)]
pub struct ChildOutput {
    /// It exited 0 and printed `CHILD-OK`.
    pub ok: bool,
    /// Its exit status.
    pub status: Option<std::process::ExitStatus>,
    /// Its standard output.
    pub stdout: String,
    /// Its standard error.
    pub stderr: String,
    /// It was killed for taking too long.
    pub timed_out: bool,
}

impl ChildOutput {
    /// Everything, for a failure message.
    pub fn describe(&self) -> String {
        format!(
            "status {:?}{}\n--- child stdout ---\n{}\n--- child stderr ---\n{}",
            self.status,
            if self.timed_out {
                " (killed: too slow)"
            } else {
                ""
            },
            self.stdout,
            self.stderr
        )
    }
}

/// Re-executes this test binary to run test `name` alone, with `backend` and extra `env`.
pub fn run_child(name: &str, backend: &str, env: &[(&str, &str)], limit: Duration) -> ChildOutput {
    let mut c = Command::new(std::env::current_exe().expect("current_exe"));
    c.args([
        name,
        "--exact",
        "--nocapture",
        "--test-threads=1",
        "--include-ignored",
    ])
    .env(ROLE_ENV, name)
    .env(BACKEND_ENV, backend)
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    for (k, v) in env {
        c.env(k, v);
    }
    let mut child = c.spawn().expect("spawn child");
    // Read the pipes on threads so a chatty child cannot block on a full pipe.
    let mut so = child.stdout.take().expect("stdout");
    let mut se = child.stderr.take().expect("stderr");
    let to = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut so, &mut s);
        s
    });
    let te = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut se, &mut s);
        s
    });
    let start = Instant::now();
    let mut timed_out = false;
    let status = loop {
        if let Some(st) = child.try_wait().expect("try_wait") {
            break Some(st);
        }
        if start.elapsed() > limit {
            timed_out = true;
            let _ = child.kill();
            break child.wait().ok();
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let stdout = to.join().unwrap_or_default();
    let stderr = te.join().unwrap_or_default();
    let ok = !timed_out
        && status.is_some_and(|s| s.success())
        && stdout.lines().any(|l| l.trim() == "CHILD-OK");
    ChildOutput {
        ok,
        status,
        stdout,
        stderr,
        timed_out,
    }
}

/// Runs `f` on its own thread and fails the test if it has not finished within `limit`
/// (the thread is then abandoned; the process ends it when the test binary exits).
#[track_caller]
pub fn bounded<T: Send + 'static>(
    limit: Duration,
    what: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    let h = std::thread::spawn(move || {
        let r = f();
        let _ = tx.send(());
        r
    });
    match rx.recv_timeout(limit) {
        Ok(()) | Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => match h.join() {
            Ok(v) => v,
            Err(p) => std::panic::resume_unwind(p),
        },
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
            panic!("{what}: did not finish within {limit:?}")
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Time

/// `{0, 0}`: do not block.
pub const ZERO: libc::timespec = libc::timespec {
    tv_sec: 0,
    tv_nsec: 0,
};

/// "Until an event" (**D6**): a very large `tv_sec`, as the safe API's `Timeout::FOREVER`.
pub use kevent_sys::FOREVER;

/// A timespec.
pub const fn ts(sec: i64, nsec: i64) -> libc::timespec {
    libc::timespec {
        tv_sec: sec as libc::time_t,
        tv_nsec: nsec as libc::c_long,
    }
}

/// A relative timeout of `ms` milliseconds.
pub const fn ms(ms: u64) -> libc::timespec {
    ts((ms / 1000) as i64, ((ms % 1000) * 1_000_000) as i64)
}

/// A clock reading in nanoseconds.
pub fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut t = ZERO;
    // SAFETY: `t` is a valid, writable timespec for the duration of the call.
    let r = unsafe { libc::clock_gettime(clock, &mut t) };
    assert_eq!(r, 0, "clock_gettime");
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// An absolute CLOCK_REALTIME timespec `d` from now.
pub fn realtime_in(d: Duration) -> libc::timespec {
    let ns = clock_ns(libc::CLOCK_REALTIME) + d.as_nanos() as u64;
    ts((ns / 1_000_000_000) as i64, (ns % 1_000_000_000) as i64)
}

// ---------------------------------------------------------------------------------------------
// ukevent constructors

/// An UNOTIFY kevent (`event` 1) with request flags `req`.
pub fn user(id: u64, req: u32) -> ukevent {
    ukevent::new(KEVENT_UNOTIFY, kevent_id::from_u64(id), 1, req)
}

/// An UNOTIFY kevent with a cookie.
pub fn user_c(id: u64, req: u32, cookie: u64) -> ukevent {
    let mut e = user(id, req);
    e.set_cookie(cookie);
    e
}

/// A kevent watching fd `fd` (SOCKET, PIPE, POLL, INODE: `raw[0]` = fd).
pub fn on_fd(type_: u32, fd: RawFd, event: u32, req: u32) -> ukevent {
    ukevent::new(type_, kevent_id::from_raw([fd as u32, 0]), event, req)
}

/// A TIMER kevent of `sec` seconds and `nsec` nanoseconds.
pub fn timer(sec: u32, nsec: u32, req: u32) -> ukevent {
    ukevent::new(
        KEVENT_TIMER,
        kevent_id::from_raw([sec, nsec]),
        KEVENT_TIMER_FIRED,
        req,
    )
}

/// A SIGNAL kevent for `signo`, with NOMASK when `nomask`.
pub fn signal(signo: c_int, nomask: bool, req: u32) -> ukevent {
    ukevent::new(
        KEVENT_SIGNAL,
        kevent_id::signal(signo, nomask),
        KEVENT_SIGNAL_DELIVERY,
        req,
    )
}

/// The `-errno` a BROKEN entry carries in `ret_data[1]`.
pub fn neg(e: Errno) -> u32 {
    e.negated()
}

// ---------------------------------------------------------------------------------------------
// Exact expectations

/// One expected event: type and id always; the rest only when set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Want {
    /// `type`.
    pub type_: u32,
    /// `id.raw_u64`.
    pub id: u64,
    /// Exact `ret_flags`; when `None`, BROKEN and COPY_FAILED must be clear (DONE may be set:
    /// the spec leaves it open for ordinary deliveries).
    pub ret_flags: Option<u32>,
    /// Exact `ret_data[0]`.
    pub data0: Option<u32>,
    /// Exact `ret_data[1]`.
    pub data1: Option<u32>,
    /// Exact cookie.
    pub cookie: Option<u64>,
    /// Exact `event`.
    pub event: Option<u32>,
    /// `ret_flags` bits that must be set (when `ret_flags` is `None`).
    pub must: u32,
}

impl Want {
    /// An event of `type_` for `id`.
    pub const fn new(type_: u32, id: u64) -> Want {
        Want {
            type_,
            id,
            ret_flags: None,
            data0: None,
            data1: None,
            cookie: None,
            event: None,
            must: 0,
        }
    }

    /// `ret_flags` must include `f` (other bits as by default).
    pub const fn with(mut self, f: u32) -> Want {
        self.must |= f;
        self
    }

    /// The event an expected `ukevent` is about (type and id).
    pub fn of(e: &ukevent) -> Want {
        Want::new(e.type_, e.id.as_u64())
    }

    /// Exact `ret_flags`.
    pub const fn flags(mut self, f: u32) -> Want {
        self.ret_flags = Some(f);
        self
    }

    /// Exact `ret_data[0]`.
    pub const fn data0(mut self, v: u32) -> Want {
        self.data0 = Some(v);
        self
    }

    /// Exact `ret_data[1]`.
    pub const fn data1(mut self, v: u32) -> Want {
        self.data1 = Some(v);
        self
    }

    /// Exact cookie.
    pub const fn cookie(mut self, c: u64) -> Want {
        self.cookie = Some(c);
        self
    }

    /// Exact `event`.
    pub const fn event(mut self, e: u32) -> Want {
        self.event = Some(e);
        self
    }

    /// A failure: `RET_BROKEN|RET_DONE` with `ret_data[1] = -e`.
    pub const fn broken(mut self, e: Errno) -> Want {
        self.ret_flags = Some(KEVENT_RET_BROKEN | KEVENT_RET_DONE);
        self.data1 = Some(e.negated());
        self
    }

    /// Whether `e` is this event.
    pub fn matches(&self, e: &ukevent) -> bool {
        e.type_ == self.type_
            && e.id.as_u64() == self.id
            && match self.ret_flags {
                Some(f) => e.ret_flags == f,
                None => {
                    e.ret_flags & self.must == self.must
                        && e.ret_flags & (KEVENT_RET_BROKEN | KEVENT_RET_COPY_FAILED) & !self.must
                            == 0
                }
            }
            && self.data0.is_none_or(|v| e.ret_data[0] == v)
            && self.data1.is_none_or(|v| e.ret_data[1] == v)
            && self.cookie.is_none_or(|c| e.cookie() == c)
            && self.event.is_none_or(|v| e.event == v)
    }
}

/// Matches `got` against `want` exactly (as multisets): a maximum bipartite matching, so the
/// order of either list does not matter.
pub fn match_exact(got: &[ukevent], want: &[Want]) -> Result<(), String> {
    fn augment(
        w: usize,
        got: &[ukevent],
        want: &[Want],
        seen: &mut [bool],
        owner: &mut [Option<usize>],
    ) -> bool {
        for g in 0..got.len() {
            if !seen[g] && want[w].matches(&got[g]) {
                seen[g] = true;
                if owner[g].is_none_or(|o| augment(o, got, want, seen, owner)) {
                    owner[g] = Some(w);
                    return true;
                }
            }
        }
        false
    }
    let mut owner = vec![None; got.len()];
    let mut missing = Vec::new();
    for w in 0..want.len() {
        let mut seen = vec![false; got.len()];
        if !augment(w, got, want, &mut seen, &mut owner) {
            missing.push(want[w]);
        }
    }
    let extra: Vec<&ukevent> = got
        .iter()
        .zip(&owner)
        .filter(|(_, o)| o.is_none())
        .map(|(g, _)| g)
        .collect();
    if missing.is_empty() && extra.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "events differ\n  missing:    {missing:?}\n  unexpected: {extra:#?}\n  got:        {got:#?}"
        ))
    }
}

/// Asserts that `got` holds exactly the `want`ed events: none missing, none unexpected,
/// none twice.
#[track_caller]
pub fn expect_events(got: &[ukevent], want: &[Want]) {
    if let Err(e) = match_exact(got, want) {
        panic!("{e}");
    }
}

// ---------------------------------------------------------------------------------------------
// File descriptors

/// Closes a raw fd we own.
pub fn close(fd: RawFd) {
    // SAFETY: closing a number has no memory effect; callers only pass fds they own.
    unsafe { libc::close(fd) };
}

/// An `OwnedFd` from a libc result that must be a new fd.
#[track_caller]
pub fn owned(fd: c_int, what: &str) -> OwnedFd {
    assert!(fd >= 0, "{what}: {}", std::io::Error::last_os_error());
    // SAFETY: `fd` was just returned by the kernel as a new descriptor that nothing else owns.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

/// A connected AF_UNIX stream pair, non-blocking.
pub fn socketpair() -> (OwnedFd, OwnedFd) {
    let mut fds = [0; 2];
    // SAFETY: `fds` is valid for two ints.
    let r = unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    };
    assert_eq!(r, 0, "socketpair: {}", std::io::Error::last_os_error());
    (owned(fds[0], "socketpair"), owned(fds[1], "socketpair"))
}

/// A pipe `(read end, write end)`, non-blocking.
pub fn pipe() -> (OwnedFd, OwnedFd) {
    let mut fds = [0; 2];
    // SAFETY: `fds` is valid for two ints.
    let r = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) };
    assert_eq!(r, 0, "pipe2: {}", std::io::Error::last_os_error());
    (owned(fds[0], "pipe"), owned(fds[1], "pipe"))
}

/// An eventfd (non-blocking) with initial value `v`.
pub fn eventfd(v: u32) -> OwnedFd {
    // SAFETY: eventfd takes no pointers.
    owned(
        unsafe { libc::eventfd(v, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) },
        "eventfd",
    )
}

/// Writes `data`; returns what `write(2)` returned.
pub fn write_fd(fd: RawFd, data: &[u8]) -> isize {
    // SAFETY: `data` is valid for reads of its length.
    unsafe { libc::write(fd, data.as_ptr().cast(), data.len()) }
}

/// Reads everything available (non-blocking fd); returns the byte count.
pub fn drain(fd: RawFd) -> usize {
    let mut buf = [0u8; 4096];
    let mut total = 0;
    loop {
        // SAFETY: `buf` is valid for writes of its length.
        let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
        if n <= 0 {
            return total;
        }
        total += n as usize;
    }
}

/// `poll(2)` on one fd with a zero timeout: the `revents`.
pub fn poll_now(fd: RawFd, events: i16) -> i16 {
    let mut p = libc::pollfd {
        fd,
        events,
        revents: 0,
    };
    // SAFETY: `p` is one valid pollfd.
    let r = unsafe { libc::poll(&mut p, 1, 0) };
    assert!(r >= 0, "poll: {}", std::io::Error::last_os_error());
    p.revents
}

/// Lowest free fd number right now (what the next `open` gets).
pub fn next_fd() -> RawFd {
    // SAFETY: dup of fd 0..2 or /dev/null: no memory effect.
    let fd = unsafe { libc::fcntl(0, libc::F_DUPFD_CLOEXEC, 0) };
    if fd >= 0 {
        close(fd);
    }
    fd
}

/// A fresh private temporary directory (removed by the OS's tmp cleaning; tests remove it).
pub fn temp_dir(tag: &str) -> std::path::PathBuf {
    static N: AtomicU32 = AtomicU32::new(0);
    let p = std::env::temp_dir().join(format!(
        "kevent-conf-{}-{}-{}",
        std::process::id(),
        tag,
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&p).expect("create temp dir");
    p
}

// ---------------------------------------------------------------------------------------------
// A queue under test

/// Caller-owned ring memory (`8 + n * 40` bytes, 8-aligned), freed only after the queue fd
/// is closed.
struct RingMem {
    view: RingView,
    words: *mut [u64],
}

/// A queue of one backend, closed on drop (before its ring memory is freed).
pub struct Queue {
    /// The backend serving it.
    pub b: Backend,
    /// The queue fd.
    pub fd: RawFd,
    ring: Option<RingMem>,
    closed: bool,
}

impl std::fmt::Debug for Queue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Queue")
            .field("backend", &self.b.as_str())
            .field("fd", &self.fd)
            .field("ring", &self.ring.as_ref().map(|r| r.view.size()))
            .finish()
    }
}

// SAFETY: the queue is an fd plus ring memory that only the engine writes (through raw
// pointers) and tests read with atomics/volatile reads; sharing it between test threads is
// what the ABI allows (any thread may call any call).
unsafe impl Send for Queue {}
// SAFETY: as for Send: no method takes `&self` to mutate Rust-visible state.
unsafe impl Sync for Queue {}

impl Queue {
    /// A queue without a ring.
    #[track_caller]
    pub fn new(b: Backend) -> Queue {
        // SAFETY: a null ring with num 0 registers no memory.
        let fd =
            unsafe { kevent_backend::init(b, std::ptr::null_mut(), 0, 0) }.expect("kevent_init");
        Queue {
            b,
            fd,
            ring: None,
            closed: false,
        }
    }

    /// A queue with a ring of `n` slots (the ring memory is zero-filled with a pattern in
    /// the entries, so that writes are visible).
    #[track_caller]
    pub fn with_ring(b: Backend, n: u32) -> Queue {
        let bytes = ring_bytes(n).expect("ring size");
        let words = vec![0u64; bytes.div_ceil(8)].into_boxed_slice();
        let words = Box::into_raw(words);
        let base = NonNull::new(words.cast::<kevent_ring>()).expect("non-null");
        // SAFETY: `base` points to `bytes` zeroed, 8-aligned bytes that stay allocated until
        // `Drop` has closed the queue fd (and every duplicate the test made is closed by the
        // test before it drops the queue).
        let fd = unsafe { kevent_backend::init(b, base.as_ptr(), n, 0) }
            .expect("kevent_init with a ring");
        // SAFETY: as above: the memory outlives every use of the view (dropped with the
        // queue, after the fd is closed), and the header is only accessed atomically.
        let view = unsafe { RingView::new(base, n) };
        Queue {
            b,
            fd,
            ring: Some(RingMem { view, words }),
            closed: false,
        }
    }

    /// The ring size `n`.
    pub fn ring_size(&self) -> u32 {
        self.view().size()
    }

    /// The ring, through the one ring definition (`kevent_sys::ring`).
    pub fn view(&self) -> RingView {
        self.ring.as_ref().expect("queue has a ring").view
    }

    /// `ring_kidx`, loaded with Acquire (pairs with the producer's Release store).
    pub fn kidx(&self) -> u32 {
        self.view().kidx()
    }

    /// `ring_over`, loaded with Acquire.
    pub fn over(&self) -> u32 {
        self.view().over()
    }

    /// Ring entry `i` (call after loading `ring_kidx`).
    pub fn slot(&self, i: u32) -> ukevent {
        assert!(i < self.ring_size());
        // SAFETY: a slot published by `ring_kidx` (Acquire above) is not written again until
        // it is committed; tests read other slots only while no call runs on the queue.
        unsafe { self.view().read(i) }
    }

    /// Overwrites ring entry `i` with `e` (to see whether the engine writes it again).
    pub fn poke_slot(&self, i: u32, e: ukevent) {
        assert!(i < self.ring_size());
        // SAFETY: tests poke only slots the engine may not write (uncommitted or, after
        // close, none), while no call runs on the queue.
        unsafe { self.view().write(i, &e) }
    }

    /// The whole ring memory, as bytes (a copy).
    pub fn ring_bytes_copy(&self) -> Vec<u8> {
        let r = self.ring.as_ref().expect("queue has a ring");
        let len = ring_bytes(r.view.size()).expect("size");
        let mut v = vec![0u8; len];
        for (i, b) in v.iter_mut().enumerate() {
            // SAFETY: `i < len`, inside the allocation; volatile byte reads of plain memory.
            *b = unsafe { r.view.base().as_ptr().cast::<u8>().add(i).read_volatile() };
        }
        v
    }

    /// `kevent_ctl`.
    pub fn ctl(&self, cmd: u32, evs: &mut [ukevent]) -> Result<u32, Errno> {
        self.b.ctl(self.fd, cmd, evs)
    }

    /// ADD; returns the written-back prefix.
    #[track_caller]
    pub fn add(&self, evs: &[ukevent]) -> Vec<ukevent> {
        let mut v = evs.to_vec();
        let n = self.ctl(KEVENT_CTL_ADD, &mut v).expect("kevent_ctl(ADD)") as usize;
        assert!(n <= v.len(), "ADD returned {n} for {} entries", v.len());
        v.truncate(n);
        v
    }

    /// ADD that must register everything (nothing written back).
    #[track_caller]
    pub fn add_ok(&self, evs: &[ukevent]) {
        let back = self.add(evs);
        assert!(back.is_empty(), "ADD wrote back {back:#?}");
    }

    /// REMOVE or MODIFY; returns the entries as written back in place. The call itself
    /// must return 0 (**D14**), whatever the entries' results.
    #[track_caller]
    pub fn ctl_in_place(&self, cmd: u32, evs: &[ukevent]) -> Vec<ukevent> {
        let mut v = evs.to_vec();
        let n = self.ctl(cmd, &mut v).expect("kevent_ctl");
        assert_eq!(
            n, 0,
            "REMOVE/MODIFY returns 0 once every entry is processed (D14)"
        );
        v
    }

    /// REMOVE that must find every entry.
    #[track_caller]
    pub fn remove_ok(&self, evs: &[ukevent]) {
        for e in self.ctl_in_place(KEVENT_CTL_REMOVE, evs) {
            assert_eq!(e.ret_flags, KEVENT_RET_DONE, "REMOVE of {e:?}");
        }
    }

    /// READY of named kevents; returns (marked, entries not found).
    #[track_caller]
    pub fn ready(&self, evs: &[ukevent]) -> (u32, Vec<ukevent>) {
        let mut v = evs.to_vec();
        let n = self
            .ctl(KEVENT_CTL_READY, &mut v)
            .expect("kevent_ctl(READY)");
        let missing = v.len() - n as usize;
        v.truncate(missing);
        (n, v)
    }

    /// READY of UNOTIFY ids that must all be found.
    #[track_caller]
    pub fn ready_ids(&self, ids: &[u64]) {
        let evs: Vec<ukevent> = ids.iter().map(|&i| user(i, 0)).collect();
        let (n, missing) = self.ready(&evs);
        assert_eq!(n as usize, ids.len(), "READY missing {missing:?}");
    }

    /// READY with no entries: wakes every waiter.
    #[track_caller]
    pub fn wake(&self) {
        assert_eq!(self.ctl(KEVENT_CTL_READY, &mut []), Ok(0), "READY(0)");
    }

    /// `kevent_get_events` into a fresh buffer of `max` entries.
    pub fn get_events(
        &self,
        min_nr: u32,
        max: usize,
        timeout: &libc::timespec,
        flags: u32,
    ) -> Result<Vec<ukevent>, Errno> {
        let mut buf = vec![ukevent::default(); max];
        let n = self
            .b
            .get_events(self.fd, min_nr, &mut buf, timeout, flags)? as usize;
        assert!(n <= max, "get_events returned {n} > max_nr {max}");
        buf.truncate(n);
        Ok(buf)
    }

    /// `kevent_get_events(min_nr 1, max)` that must succeed.
    #[track_caller]
    pub fn get(&self, max: usize, timeout: &libc::timespec) -> Vec<ukevent> {
        self.get_events(1, max, timeout, 0)
            .expect("kevent_get_events")
    }

    /// Gets (without blocking unless `timeout` says so) and expects exactly `want`.
    #[track_caller]
    pub fn expect(&self, timeout: &libc::timespec, want: &[Want]) -> Vec<ukevent> {
        let got = self.get(want.len().max(1) + 8, timeout);
        expect_events(&got, want);
        got
    }

    /// Collects events until exactly `want` arrived (each event once), or `limit` passed.
    #[track_caller]
    pub fn expect_within(&self, limit: Duration, want: &[Want]) -> Vec<ukevent> {
        let start = Instant::now();
        let mut all = Vec::new();
        while all.len() < want.len() && start.elapsed() < limit {
            let left = limit.saturating_sub(start.elapsed());
            let t = ts(left.as_secs() as i64, left.subsec_nanos() as i64);
            all.extend(self.get(want.len() + 8, &t));
        }
        expect_events(&all, want);
        all
    }

    /// Asserts that nothing is ready: a non-blocking get returns no event.
    #[track_caller]
    pub fn expect_no_events(&self) {
        let got = self.get(16, &ZERO);
        assert!(got.is_empty(), "expected no events, got {got:#?}");
    }

    /// `kevent_wait`.
    pub fn wait(&self, num: u32, old_uidx: u32, timeout: &libc::timespec) -> Result<u32, Errno> {
        self.b.wait(self.fd, num, old_uidx, timeout, 0)
    }

    /// `kevent_commit`.
    pub fn commit(&self, new_uidx: u32, over: u32) -> Result<u32, Errno> {
        self.b.commit(self.fd, new_uidx, over)
    }

    /// Closes the queue fd now (the ring memory stays allocated until drop).
    pub fn close(&mut self) {
        if !self.closed {
            close(self.fd);
            self.closed = true;
        }
    }

    /// Marks the fd as closed by someone else (it will not be closed again).
    pub fn forget_fd(&mut self) {
        self.closed = true;
    }
}

impl Drop for Queue {
    fn drop(&mut self) {
        // The fd first: the engine may write the ring until the queue is closed.
        self.close();
        if let Some(r) = self.ring.take() {
            // SAFETY: `words` came from `Box::into_raw` in `with_ring` and is freed once, after
            // the queue fd was closed.
            drop(unsafe { Box::from_raw(r.words) });
        }
    }
}

/// A probe that a queue still works after an error: an UNOTIFY kevent added, marked READY,
/// delivered exactly once and removed again.
#[track_caller]
pub fn assert_usable(q: &Queue) {
    const PROBE: u64 = 0xdead_beef_0000_0001;
    q.add_ok(&[user(PROBE, 0)]);
    q.ready_ids(&[PROBE]);
    q.expect(&ZERO, &[Want::new(KEVENT_UNOTIFY, PROBE)]);
    q.remove_ok(&[user(PROBE, 0)]);
    q.expect_no_events();
}

// ---------------------------------------------------------------------------------------------
// Randomness (no dependency): xorshift64*

/// A small deterministic PRNG (xorshift64*).
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator from a seed (any value; 0 is remapped).
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    /// `true` with probability `p` percent.
    pub fn pct(&mut self, p: u64) -> bool {
        self.below(100) < p
    }
}

/// Whether this is an optimized build (for sizing load tests).
pub const RELEASE: bool = !cfg!(debug_assertions);

// ---------------------------------------------------------------------------------------------
// Threads

/// This thread's kernel id.
pub fn gettid() -> libc::pid_t {
    // SAFETY: gettid takes no arguments and touches no memory.
    unsafe { libc::gettid() }
}

/// Whether thread `tid` of this process is asleep (state `S`) according to `/proc`.
pub fn thread_sleeping(tid: libc::pid_t) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")) else {
        return false;
    };
    // The state follows the command name's closing parenthesis.
    stat.rsplit_once(')')
        .is_some_and(|(_, rest)| rest.trim_start().starts_with('S'))
}

/// Waits until every thread in `tids` is asleep, twice in a row 20 ms apart (so a thread
/// briefly asleep on a lock does not count), then returns; fails after 10 s.
#[track_caller]
pub fn until_asleep(tids: &[libc::pid_t]) {
    let start = Instant::now();
    let mut streak = 0;
    while streak < 2 {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "threads {tids:?} never all went to sleep"
        );
        if tids.iter().all(|&t| thread_sleeping(t)) {
            streak += 1;
        } else {
            streak = 0;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
