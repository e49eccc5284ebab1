//! Process-wide signal routing for SIGNAL kevents (spec section 5, D8, D11), through
//! `kevent_fallback::signal::dispatch`.
//!
//! Signal dispositions belong to the whole process, so every scenario that installs one runs
//! in a *child process*: the test re-executes this binary with `--exact <its name>` and the
//! environment variable [`ROLE`] set to its name; the child runs the scenario (asserting as it
//! goes, printing `CHILD-OK` at the end) and the parent checks its exit status and output.
//! Grandchildren made by `fork()` report through their exit codes only (they must not take
//! locks another thread may have held).
#![allow(unsafe_code)]

use std::ffi::c_int;
use std::os::fd::RawFd;
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, Ordering::SeqCst};
use std::time::{Duration, Instant};

use kevent_fallback::signal::dispatch::{
    Owner, delivered, doorbell_fd, unwatch, unwatch_for, watch, watch_for,
};
use kevent_fallback::signal::safecopy;
use kevent_sys::Errno;

/// Names the scenario a child process runs.
const ROLE: &str = "KEVENT_SIGNAL_DISPATCH_ROLE";

// ---------------------------------------------------------------------------------------------
// Harness

/// `true` in the child process that runs scenario `name`.
fn is_child(name: &str) -> bool {
    std::env::var(ROLE).as_deref() == Ok(name)
}

/// The command that re-runs test `name` as a child.
fn child_command(name: &str) -> Command {
    let mut c = Command::new(std::env::current_exe().expect("current_exe"));
    c.args(["--exact", name, "--nocapture", "--test-threads=1"])
        .env(ROLE, name)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

fn describe(out: &Output) -> String {
    format!(
        "status {:?}\n--- child stdout ---\n{}\n--- child stderr ---\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Runs scenario `name` in a child and requires it to exit 0 after printing `CHILD-OK`.
#[track_caller]
fn run_child_ok(name: &str) {
    let out = child_command(name).output().expect("spawn child");
    assert!(
        out.status.success() && String::from_utf8_lossy(&out.stdout).contains("CHILD-OK"),
        "child scenario {name} failed: {}",
        describe(&out)
    );
}

/// Spins until `cond` holds; panics after 10 s.
#[track_caller]
fn wait_for(what: &str, cond: impl Fn() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

// ---------------------------------------------------------------------------------------------
// libc helpers (used in child processes only)

/// The current disposition of `signo`.
fn query(signo: c_int) -> libc::sigaction {
    // SAFETY: all-zero is a valid `sigaction`; the call writes only `act`.
    unsafe {
        let mut act: libc::sigaction = std::mem::zeroed();
        assert_eq!(libc::sigaction(signo, std::ptr::null(), &mut act), 0);
        act
    }
}

/// Installs `handler` (an address, `SIG_DFL` or `SIG_IGN`) for `signo` with `flags` and
/// `mask`, as a program would.
fn install(signo: c_int, handler: usize, flags: c_int, mask: &[c_int]) {
    // SAFETY: all-zero is a valid `sigaction`; `sigemptyset`/`sigaddset` write into it; the
    // handler addresses passed by the tests are `extern "C"` functions of the right shape for
    // `flags`.
    unsafe {
        let mut act: libc::sigaction = std::mem::zeroed();
        libc::sigemptyset(&mut act.sa_mask);
        for &s in mask {
            libc::sigaddset(&mut act.sa_mask, s);
        }
        act.sa_sigaction = handler;
        act.sa_flags = flags;
        assert_eq!(libc::sigaction(signo, &act, std::ptr::null_mut()), 0);
    }
}

/// Is `signo` in `set`?
fn member(set: &libc::sigset_t, signo: c_int) -> bool {
    // SAFETY: `set` is a valid sigset_t, only read.
    unsafe { libc::sigismember(set, signo) == 1 }
}

/// The calling thread's signal mask.
fn thread_mask() -> libc::sigset_t {
    // SAFETY: `cur` is a local the call writes; a null `set` only queries.
    unsafe {
        let mut cur: libc::sigset_t = std::mem::zeroed();
        libc::pthread_sigmask(libc::SIG_BLOCK, std::ptr::null(), &mut cur);
        cur
    }
}

/// Blocks (`how = SIG_BLOCK`) or unblocks `signo` in the calling thread.
fn thread_mask_change(how: c_int, signo: c_int) {
    // SAFETY: `set` is a local sigset_t filled by sigemptyset/sigaddset, only read by the call.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, signo);
        assert_eq!(libc::pthread_sigmask(how, &set, std::ptr::null_mut()), 0);
    }
}

fn kill_self(signo: c_int) {
    // SAFETY: kill takes no pointers.
    assert_eq!(unsafe { libc::kill(libc::getpid(), signo) }, 0);
}

fn raise(signo: c_int) {
    // SAFETY: raise takes no pointers.
    assert_eq!(unsafe { libc::raise(signo) }, 0);
}

/// Reads (and so resets) a non-blocking eventfd: its counter, 0 if it was zero.
fn read_eventfd(fd: RawFd) -> u64 {
    let mut v = 0u64;
    // SAFETY: reads at most 8 bytes into the live local `v`.
    let n = unsafe { libc::read(fd, (&raw mut v).cast(), 8) };
    if n == 8 {
        v
    } else {
        assert_eq!(Errno::last(), Errno::EAGAIN, "eventfd read");
        0
    }
}

/// `poll(fd, POLLIN, 0)` says readable.
fn readable(fd: RawFd) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd, timeout 0.
    unsafe { libc::poll(&mut p, 1, 0) == 1 }
}

/// `waitpid(pid, flags)`: the raw status.
fn waitpid(pid: libc::pid_t, flags: c_int) -> c_int {
    let mut status = 0;
    // SAFETY: `status` is a live local the call writes.
    let r = unsafe { libc::waitpid(pid, &mut status, flags) };
    assert_eq!(r, pid, "waitpid: {:?}", Errno::last());
    status
}

/// `_exit(code)`, for forked grandchildren (no destructors, no stdio flush, no locks).
fn exit_now(code: c_int) -> ! {
    // SAFETY: `_exit` takes no pointers and does not return.
    unsafe { libc::_exit(code) }
}

/// `fork()`: `Some(pid)` in the parent, `None` in the new child.
fn fork() -> Option<libc::pid_t> {
    // SAFETY: the child runs only async-signal-safe code (this test's grandchild code paths,
    // the dispatch functions, `_exit`) before it exits.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork: {:?}", Errno::last());
    (pid > 0).then_some(pid)
}

// Program handlers: what "the program" installed before or after the engine.

static INFO_HITS: AtomicU32 = AtomicU32::new(0);
static INFO_SIGNO: AtomicI32 = AtomicI32::new(0);
static INFO_CODE: AtomicI32 = AtomicI32::new(0);
static INFO_SAW_USR2_BLOCKED: AtomicBool = AtomicBool::new(false);
static PLAIN_HITS: AtomicU32 = AtomicU32::new(0);

/// An `SA_SIGINFO` program handler: records the siginfo and whether SIGUSR2 (in its
/// `sa_mask`) was blocked while it ran.
extern "C" fn info_handler(signo: c_int, info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
    INFO_SIGNO.store(signo, SeqCst);
    let mut code = i32::MIN; // stays if the chain passed no siginfo
    if !info.is_null() {
        // SAFETY: non-null: the kernel's siginfo, valid while the handler runs, only read.
        code = unsafe { (*info).si_code };
    }
    INFO_CODE.store(code, SeqCst);
    INFO_SAW_USR2_BLOCKED.store(member(&thread_mask(), libc::SIGUSR2), SeqCst);
    INFO_HITS.fetch_add(1, SeqCst);
}

/// A plain `sa_handler` program handler.
extern "C" fn plain_handler(_signo: c_int) {
    PLAIN_HITS.fetch_add(1, SeqCst);
}

fn info_handler_addr() -> usize {
    info_handler as extern "C" fn(c_int, *mut libc::siginfo_t, *mut libc::c_void) as usize
}

fn plain_handler_addr() -> usize {
    plain_handler as extern "C" fn(c_int) as usize
}

// ---------------------------------------------------------------------------------------------
// Scenarios

/// Spec 5 (without NOMASK, "reported and delivered as usual"): a signal raised in a second
/// thread is counted, rings the doorbell, and the program's handler installed before the watch
/// still runs, with the kernel's siginfo (SA_SIGINFO) and its own `sa_mask`; a plain
/// `sa_handler` too.
#[test]
fn s5_signal_reported_and_program_handler_runs() {
    const NAME: &str = "s5_signal_reported_and_program_handler_runs";
    if !is_child(NAME) {
        return run_child_ok(NAME);
    }
    install(
        libc::SIGUSR1,
        info_handler_addr(),
        libc::SA_SIGINFO | libc::SA_RESTART,
        &[libc::SIGUSR2],
    );
    install(libc::SIGUSR2, plain_handler_addr(), libc::SA_RESTART, &[]);
    watch(libc::SIGUSR1, false).unwrap();
    watch(libc::SIGUSR2, false).unwrap();
    let bell = doorbell_fd().unwrap();
    read_eventfd(bell);
    assert!(!readable(bell));

    let seen = delivered(libc::SIGUSR1);
    std::thread::spawn(|| raise(libc::SIGUSR1)).join().unwrap();
    assert_eq!(delivered(libc::SIGUSR1) - seen, 1, "D8 count");
    assert!(readable(bell), "doorbell rung");
    assert_eq!(read_eventfd(bell), 1);
    assert_eq!(INFO_HITS.load(SeqCst), 1, "program handler ran once");
    assert_eq!(INFO_SIGNO.load(SeqCst), libc::SIGUSR1);
    assert_eq!(
        INFO_CODE.load(SeqCst),
        libc::SI_TKILL,
        "the kernel's siginfo was passed on"
    );
    assert!(
        INFO_SAW_USR2_BLOCKED.load(SeqCst),
        "the program's sa_mask applied"
    );

    let seen2 = delivered(libc::SIGUSR2);
    std::thread::spawn(|| raise(libc::SIGUSR2)).join().unwrap();
    assert_eq!(delivered(libc::SIGUSR2) - seen2, 1);
    assert_eq!(read_eventfd(bell), 1);
    assert_eq!(PLAIN_HITS.load(SeqCst), 1, "plain program handler ran once");
    assert_eq!(
        delivered(libc::SIGUSR1) - seen,
        1,
        "other signal's count unchanged"
    );
    println!("CHILD-OK");
}

/// Spec 5 NOMASK (issue 3's required case): a process with a second thread that has the
/// signal unblocked, and the signal unblocked in the test thread too, SIG_DFL = terminate:
/// every `kill(getpid())` is counted and swallowed, the process survives. Then with the
/// signal blocked in the test thread, so that another thread must take it.
#[test]
fn s5_signal_nomask_holds_with_unblocked_thread() {
    const NAME: &str = "s5_signal_nomask_holds_with_unblocked_thread";
    if !is_child(NAME) {
        return run_child_ok(NAME);
    }
    let sig = libc::SIGUSR2;
    assert_eq!(query(sig).sa_sigaction, libc::SIG_DFL);
    watch(sig, true).unwrap();
    let bell = doorbell_fd().unwrap();
    read_eventfd(bell);

    static STOP: AtomicBool = AtomicBool::new(false);
    let other = std::thread::spawn(|| {
        assert!(
            !member(&thread_mask(), libc::SIGUSR2),
            "second thread has it unblocked"
        );
        while !STOP.load(SeqCst) {
            std::thread::sleep(Duration::from_millis(1));
        }
    });
    assert!(!member(&thread_mask(), sig), "test thread has it unblocked");

    let seen = delivered(sig);
    for i in 1..=10 {
        kill_self(sig);
        wait_for("delivery", || delivered(sig) - seen == i);
    }
    thread_mask_change(libc::SIG_BLOCK, sig);
    for i in 11..=20 {
        kill_self(sig);
        wait_for("delivery to another thread", || delivered(sig) - seen == i);
    }
    thread_mask_change(libc::SIG_UNBLOCK, sig);
    assert_eq!(delivered(sig) - seen, 20);
    assert_eq!(read_eventfd(bell), 20, "one doorbell write per delivery");
    assert_eq!(PLAIN_HITS.load(SeqCst) + INFO_HITS.load(SeqCst), 0);
    STOP.store(true, SeqCst);
    other.join().unwrap();
    println!("CHILD-OK");
}

/// Spec 5: with a NOMASK watcher the program's own handler does not run; once the last NOMASK
/// watcher is gone (a plain watcher remains) it runs again.
#[test]
fn s5_signal_nomask_skips_program_handler() {
    const NAME: &str = "s5_signal_nomask_skips_program_handler";
    if !is_child(NAME) {
        return run_child_ok(NAME);
    }
    let sig = libc::SIGUSR1;
    install(sig, plain_handler_addr(), libc::SA_RESTART, &[]);
    watch(sig, false).unwrap();
    watch(sig, true).unwrap();
    let seen = delivered(sig);
    for i in 1..=3 {
        kill_self(sig);
        wait_for("delivery", || delivered(sig) - seen == i);
    }
    assert_eq!(
        PLAIN_HITS.load(SeqCst),
        0,
        "NOMASK: program handler must not run"
    );
    unwatch(sig, true);
    for i in 1..=2 {
        kill_self(sig);
        wait_for("program handler", || PLAIN_HITS.load(SeqCst) == i);
    }
    assert_eq!(delivered(sig) - seen, 5);
    unwatch(sig, false);
    assert_eq!(query(sig).sa_sigaction, plain_handler_addr());
    println!("CHILD-OK");
}

/// Spec 5 without NOMASK, SIG_DFL = terminate: the process still dies *by that signal*, after
/// the handler counted it. The child's doorbell is redirected (`dup2`) to an eventfd the
/// parent holds, so the parent sees the doorbell write that happened before the death.
#[test]
fn s5_signal_without_nomask_default_terminates() {
    const NAME: &str = "s5_signal_without_nomask_default_terminates";
    if is_child(NAME) {
        let sig: c_int = std::env::var("SIGNO").unwrap().parse().unwrap();
        let parent_bell: RawFd = std::env::var("BELL").unwrap().parse().unwrap();
        assert_eq!(query(sig).sa_sigaction, libc::SIG_DFL);
        watch(sig, false).unwrap();
        let bell = doorbell_fd().unwrap();
        // SAFETY: both numbers are open eventfds of this process; dup2 takes no pointers.
        assert_eq!(unsafe { libc::dup2(parent_bell, bell) }, bell);
        println!("WATCHING");
        kill_self(sig);
        std::thread::sleep(Duration::from_secs(5));
        println!("SURVIVED");
        return;
    }
    for sig in [libc::SIGUSR2, libc::SIGTERM, libc::SIGRTMIN() + 1] {
        // Not close-on-exec: the child inherits it.
        // SAFETY: eventfd takes no pointers.
        let bell = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK) };
        assert!(bell >= 0);
        let out = child_command(NAME)
            .env("SIGNO", sig.to_string())
            .env("BELL", bell.to_string())
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            stdout.contains("WATCHING") && !stdout.contains("SURVIVED"),
            "{}",
            describe(&out)
        );
        assert_eq!(
            out.status.signal(),
            Some(sig),
            "killed by signal {sig}: {}",
            describe(&out)
        );
        assert_eq!(
            read_eventfd(bell),
            1,
            "the handler counted before the default action"
        );
        // SAFETY: `bell` is ours and no longer used.
        unsafe { libc::close(bell) };
    }
}

/// Spec 5 "delivered as usual" for dispositions that do nothing: SIG_DFL of SIGCHLD, SIGURG,
/// SIGWINCH and SIGCONT (default ignore), and SIG_IGN, stay harmless while watched; the last
/// unwatch gives SIG_IGN back.
#[test]
fn s5_signal_default_ignore_does_not_terminate() {
    const NAME: &str = "s5_signal_default_ignore_does_not_terminate";
    if !is_child(NAME) {
        return run_child_ok(NAME);
    }
    for sig in [libc::SIGCHLD, libc::SIGURG, libc::SIGWINCH, libc::SIGCONT] {
        watch(sig, false).unwrap();
        let seen = delivered(sig);
        raise(sig);
        assert_eq!(delivered(sig) - seen, 1, "signal {sig}");
        unwatch(sig, false);
        assert_eq!(query(sig).sa_sigaction, libc::SIG_DFL);
    }
    install(libc::SIGUSR1, libc::SIG_IGN, 0, &[]);
    watch(libc::SIGUSR1, false).unwrap();
    raise(libc::SIGUSR1);
    assert_eq!(delivered(libc::SIGUSR1), 1);
    unwatch(libc::SIGUSR1, false);
    assert_eq!(query(libc::SIGUSR1).sa_sigaction, libc::SIG_IGN);
    println!("CHILD-OK");
}

/// Spec 5 without NOMASK, SIG_DFL = stop: the process stops (the parent sees it stopped by
/// SIGTSTP), and once continued the engine's handler is back and the delivery was counted.
#[test]
fn s5_signal_default_stop_stops_and_rewatches() {
    const NAME: &str = "s5_signal_default_stop_stops_and_rewatches";
    if is_child(NAME) {
        // Own process group, whose parent is in another group of the same session: not
        // orphaned, so the kernel does not discard SIGTSTP.
        // SAFETY: setpgid takes no pointers.
        assert_eq!(unsafe { libc::setpgid(0, 0) }, 0);
        watch(libc::SIGTSTP, false).unwrap();
        let ours = query(libc::SIGTSTP).sa_sigaction;
        assert_ne!(ours, libc::SIG_DFL);
        raise(libc::SIGTSTP);
        assert_eq!(delivered(libc::SIGTSTP), 1);
        assert_eq!(
            query(libc::SIGTSTP).sa_sigaction,
            ours,
            "handler reinstalled"
        );
        unwatch(libc::SIGTSTP, false);
        assert_eq!(query(libc::SIGTSTP).sa_sigaction, libc::SIG_DFL);
        println!("CHILD-OK");
        return;
    }
    let child = child_command(NAME).spawn().unwrap();
    let pid = child.id() as libc::pid_t;
    // Only observes the stop (WUNTRACED); the child is reaped by `wait_with_output` below.
    let status = waitpid(pid, libc::WUNTRACED);
    assert!(
        libc::WIFSTOPPED(status) && libc::WSTOPSIG(status) == libc::SIGTSTP,
        "child not stopped by SIGTSTP: raw status {status:#x}"
    );
    // SAFETY: kill takes no pointers; `pid` is our child, stopped and not reaped.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGCONT) }, 0);
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success() && String::from_utf8_lossy(&out.stdout).contains("CHILD-OK"),
        "{}",
        describe(&out)
    );
}

/// Spec 5: the last unwatch restores exactly the disposition that was there before the first
/// watch (handler, flags, mask), however many watchers came and went; the program's handler
/// then runs without being counted.
#[test]
fn s5_signal_unwatch_restores_previous_disposition() {
    const NAME: &str = "s5_signal_unwatch_restores_previous_disposition";
    if !is_child(NAME) {
        return run_child_ok(NAME);
    }
    let sig = libc::SIGUSR1;
    let flags = libc::SA_SIGINFO | libc::SA_ONSTACK | libc::SA_NODEFER;
    install(
        sig,
        info_handler_addr(),
        flags,
        &[libc::SIGUSR2, libc::SIGTERM],
    );
    let before = query(sig);
    watch(sig, false).unwrap();
    watch(sig, true).unwrap();
    watch(sig, false).unwrap();
    assert_ne!(
        query(sig).sa_sigaction,
        info_handler_addr(),
        "engine handler installed"
    );
    unwatch(sig, false);
    unwatch(sig, true);
    assert_ne!(
        query(sig).sa_sigaction,
        info_handler_addr(),
        "one watcher left"
    );
    unwatch(sig, false);
    let after = query(sig);
    assert_eq!(after.sa_sigaction, info_handler_addr());
    let mask = |f: c_int| f & !0x0400_0000; // SA_RESTORER is the C library's
    assert_eq!(mask(after.sa_flags), mask(before.sa_flags));
    for s in 1..=libc::SIGRTMAX() {
        assert_eq!(
            member(&after.sa_mask, s),
            member(&before.sa_mask, s),
            "mask bit {s}"
        );
    }
    let seen = delivered(sig);
    raise(sig);
    assert_eq!(INFO_HITS.load(SeqCst), 1);
    assert_eq!(delivered(sig), seen, "not counted once unwatched");
    unwatch(sig, false); // unmatched: no effect
    assert_eq!(query(sig).sa_sigaction, info_handler_addr());

    // SIG_DFL comes back as SIG_DFL.
    watch(libc::SIGUSR2, true).unwrap();
    unwatch(libc::SIGUSR2, true);
    assert_eq!(query(libc::SIGUSR2).sa_sigaction, libc::SIG_DFL);
    println!("CHILD-OK");
}

/// Documented limitation: a program that installs its own handler after the watch replaces
/// the engine's; the last unwatch then leaves the program's handler in place.
#[test]
fn s5_signal_unwatch_keeps_a_later_program_handler() {
    const NAME: &str = "s5_signal_unwatch_keeps_a_later_program_handler";
    if !is_child(NAME) {
        return run_child_ok(NAME);
    }
    watch(libc::SIGHUP, false).unwrap();
    install(libc::SIGHUP, plain_handler_addr(), 0, &[]);
    unwatch(libc::SIGHUP, false);
    assert_eq!(query(libc::SIGHUP).sa_sigaction, plain_handler_addr());
    println!("CHILD-OK");
}

/// The handler a program installed after the engine's: counts its runs and, as
/// signal-hook's does, calls the disposition it replaced ([`CHAIN_PREV`]). With
/// [`CHAIN_HOLD`] set it first waits, inside the handler, until the test clears it.
extern "C" fn chaining_handler(signo: c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    CHAIN_RUNS.fetch_add(1, SeqCst);
    while CHAIN_HOLD.load(SeqCst) {
        CHAIN_HELD.store(true, SeqCst);
        std::hint::spin_loop();
    }
    let prev = CHAIN_PREV.load(SeqCst);
    if prev != libc::SIG_DFL && prev != libc::SIG_IGN {
        // SAFETY: `prev` is the `SA_SIGINFO` handler this one replaced (the engine's entry
        // point), called with the kernel's own arguments.
        let f: extern "C" fn(c_int, *mut libc::siginfo_t, *mut libc::c_void) =
            unsafe { std::mem::transmute::<usize, _>(prev) };
        f(signo, info, ctx);
    }
}
static CHAIN_RUNS: AtomicU32 = AtomicU32::new(0);
static CHAIN_HOLD: AtomicBool = AtomicBool::new(false);
static CHAIN_HELD: AtomicBool = AtomicBool::new(false);
static CHAIN_PREV: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Decision P34, its race: a program handler installed after the engine's, which chains to
/// the engine, is running (entered by the kernel) when the engine takes the signal back. Its
/// call into the engine comes after the engine saved that very handler as what it delivers
/// to; with one entry point the engine ran it a second time for the same delivery. With two
/// (the take-back installs the other one), the entry it calls still delivers to what it
/// replaced: the handler runs once, the delivery is counted once, and the chain reaches the
/// handler the engine had saved first.
#[test]
fn p34_take_back_while_a_chaining_handler_runs_runs_it_once() {
    const NAME: &str = "p34_take_back_while_a_chaining_handler_runs_runs_it_once";
    if !is_child(NAME) {
        return run_child_ok(NAME);
    }
    let signo = libc::SIGUSR2;
    install(signo, plain_handler_addr(), 0, &[]);
    watch(signo, false).unwrap();
    let engine_entry = query(signo).sa_sigaction;
    assert_ne!(engine_entry, plain_handler_addr());
    CHAIN_PREV.store(engine_entry, SeqCst);
    let chaining =
        chaining_handler as extern "C" fn(c_int, *mut libc::siginfo_t, *mut libc::c_void) as usize;
    install(signo, chaining, libc::SA_SIGINFO, &[]);
    let seen = delivered(signo);
    CHAIN_HOLD.store(true, SeqCst);
    let t = std::thread::spawn(move || raise(signo));
    wait_for("the chaining handler to run", || CHAIN_HELD.load(SeqCst));
    // The take-back, while the handler runs: the first NOMASK watcher reinstalls the
    // engine's handler (as the waits' once-a-second look does), the last one recomputes its
    // flags.
    watch(signo, true).unwrap();
    unwatch(signo, true);
    let now = query(signo).sa_sigaction;
    assert_ne!(now, chaining, "taken back");
    assert_ne!(now, engine_entry, "through the other entry point");
    CHAIN_HOLD.store(false, SeqCst);
    t.join().unwrap();
    assert_eq!(CHAIN_RUNS.load(SeqCst), 1, "the program's handler ran once");
    assert_eq!(delivered(signo), seen + 1, "counted once");
    assert_eq!(
        PLAIN_HITS.load(SeqCst),
        1,
        "the chain reached the first handler"
    );
    // From now on: the engine's entry counts and delivers to the chaining handler, whose
    // call back is recognised.
    raise(signo);
    assert_eq!(CHAIN_RUNS.load(SeqCst), 2);
    assert_eq!(delivered(signo), seen + 2);
    // The last unwatch gives the program its handler back.
    unwatch(signo, false);
    assert_eq!(query(signo).sa_sigaction, chaining);
    println!("CHILD-OK");
}

/// Spec 5 "delivered as usual" with SA_RESETHAND: the program's one-shot handler runs once,
/// then the disposition is SIG_DFL, as the kernel would have left it.
#[test]
fn s5_signal_resethand_runs_program_handler_once() {
    const NAME: &str = "s5_signal_resethand_runs_program_handler_once";
    if !is_child(NAME) {
        return run_child_ok(NAME);
    }
    install(libc::SIGUSR1, plain_handler_addr(), libc::SA_RESETHAND, &[]);
    watch(libc::SIGUSR1, false).unwrap();
    raise(libc::SIGUSR1);
    assert_eq!(PLAIN_HITS.load(SeqCst), 1);
    unwatch(libc::SIGUSR1, false);
    assert_eq!(query(libc::SIGUSR1).sa_sigaction, libc::SIG_DFL);
    println!("CHILD-OK");
}

/// Spec 5 "delivered as usual": a program handler installed without SA_RESTART still gets
/// `EINTR` from a blocking `read` while the signal is watched; with a NOMASK watcher the signal
/// is invisible, so the read restarts and completes.
#[test]
fn s5_signal_keeps_program_sa_restart_choice() {
    const NAME: &str = "s5_signal_keeps_program_sa_restart_choice";
    if !is_child(NAME) {
        return run_child_ok(NAME);
    }
    let sig = libc::SIGUSR1;
    install(sig, plain_handler_addr(), 0, &[]);
    watch(sig, false).unwrap();
    let mut fds = [0; 2];
    // SAFETY: `fds` is a live local array of two ints.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    // SAFETY: pthread_self takes no arguments.
    let reader = unsafe { libc::pthread_self() } as usize;

    /// Signals the reader every 20 ms (each delivery awaited) until it is done or `max`
    /// signals were sent, then writes one byte into the pipe.
    fn sender(reader: usize, wfd: RawFd, done: &'static AtomicBool, max: u64) -> u64 {
        let mut sent = 0;
        while !done.load(SeqCst) && sent < max {
            std::thread::sleep(Duration::from_millis(20));
            let before = delivered(libc::SIGUSR1);
            // SAFETY: `reader` is the pthread_t of the test thread, alive until joined below.
            unsafe { libc::pthread_kill(reader as libc::pthread_t, libc::SIGUSR1) };
            wait_for("delivery", || delivered(libc::SIGUSR1) > before);
            sent += 1;
        }
        // SAFETY: writes one byte from a static to the pipe's write end.
        assert_eq!(unsafe { libc::write(wfd, b"x".as_ptr().cast(), 1) }, 1);
        sent
    }
    fn read_one(rfd: RawFd) -> Result<(), Errno> {
        let mut b = 0u8;
        // SAFETY: reads at most one byte into a live local.
        match unsafe { libc::read(rfd, (&raw mut b).cast(), 1) } {
            1 => Ok(()),
            _ => Err(Errno::last()),
        }
    }

    static DONE_A: AtomicBool = AtomicBool::new(false);
    let wfd = fds[1];
    let t = std::thread::spawn(move || sender(reader, wfd, &DONE_A, 50));
    assert_eq!(
        read_one(fds[0]),
        Err(Errno::EINTR),
        "program without SA_RESTART sees EINTR"
    );
    DONE_A.store(true, SeqCst);
    t.join().unwrap();
    read_one(fds[0]).unwrap(); // the sender's byte
    assert!(PLAIN_HITS.load(SeqCst) >= 1);

    watch(sig, true).unwrap();
    static DONE_B: AtomicBool = AtomicBool::new(false);
    let hits = PLAIN_HITS.load(SeqCst);
    let t = std::thread::spawn(move || sender(reader, wfd, &DONE_B, 5));
    assert_eq!(read_one(fds[0]), Ok(()), "NOMASK: the read restarts");
    DONE_B.store(true, SeqCst);
    assert_eq!(
        t.join().unwrap(),
        5,
        "all five signals came during the read"
    );
    assert_eq!(
        PLAIN_HITS.load(SeqCst),
        hits,
        "NOMASK: program handler did not run"
    );
    println!("CHILD-OK");
}

/// D8: each kevent counts deliveries since its own registration (`delivered - seen`), and the
/// count restarts after each report. Realtime signals queue (each counts); a standard signal
/// sent three times while blocked coalesces into one delivery.
#[test]
fn d8_signal_count_since_registration() {
    const NAME: &str = "d8_signal_count_since_registration";
    if !is_child(NAME) {
        return run_child_ok(NAME);
    }
    let sig = libc::SIGUSR1;
    let send = |n: u64| {
        for _ in 0..n {
            let before = delivered(sig);
            raise(sig);
            assert_eq!(delivered(sig), before + 1);
        }
    };
    watch(sig, true).unwrap(); // kevent A
    let mut seen_a = delivered(sig);
    send(2);
    watch(sig, true).unwrap(); // kevent B
    let seen_b = delivered(sig);
    send(3);
    let now = delivered(sig);
    assert_eq!((now - seen_a, now - seen_b), (5, 3));
    seen_a = now; // A reported
    send(1);
    let now = delivered(sig);
    assert_eq!((now - seen_a, now - seen_b), (1, 4));

    // SAFETY: pthread_self takes no arguments.
    let me = unsafe { libc::pthread_self() };
    for (s, expect) in [(libc::SIGRTMIN() + 2, 3), (libc::SIGUSR2, 1)] {
        watch(s, true).unwrap();
        let seen = delivered(s);
        thread_mask_change(libc::SIG_BLOCK, s);
        for _ in 0..3 {
            // SAFETY: `me` is this live thread; pthread_kill takes no pointers.
            assert_eq!(unsafe { libc::pthread_kill(me, s) }, 0);
        }
        assert_eq!(delivered(s), seen, "blocked: pending, not delivered yet");
        thread_mask_change(libc::SIG_UNBLOCK, s);
        assert_eq!(delivered(s) - seen, expect, "signal {s}");
    }
    println!("CHILD-OK");
}

/// The doorbell contract: registered with EPOLLET in several epoll instances and never read,
/// every delivery wakes every instance exactly once; several deliveries between two waits
/// give one wake-up.
#[test]
fn s5_signal_doorbell_wakes_every_queue_edge_triggered() {
    const NAME: &str = "s5_signal_doorbell_wakes_every_queue_edge_triggered";
    if !is_child(NAME) {
        return run_child_ok(NAME);
    }
    watch(libc::SIGUSR1, true).unwrap();
    let bell = doorbell_fd().unwrap();
    let eps: Vec<RawFd> = (0..2)
        .map(|_| {
            // SAFETY: epoll_create1 takes no pointers.
            let ep = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
            assert!(ep >= 0);
            let mut ev = libc::epoll_event {
                events: (libc::EPOLLIN | libc::EPOLLET) as u32,
                u64: 7,
            };
            // SAFETY: `ev` is a live local the call reads.
            let rc = unsafe { libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, bell, &mut ev) };
            assert_eq!(rc, 0);
            ep
        })
        .collect();
    let ready = |ep: RawFd| {
        let mut ev = [libc::epoll_event { events: 0, u64: 0 }; 4];
        // SAFETY: `ev` holds 4 writable entries.
        unsafe { libc::epoll_wait(ep, ev.as_mut_ptr(), 4, 0) }
    };
    for &ep in &eps {
        ready(ep); // whatever the counter held at ADD
        assert_eq!(ready(ep), 0);
    }
    raise(libc::SIGUSR1);
    for &ep in &eps {
        assert_eq!(ready(ep), 1, "every queue woken");
        assert_eq!(ready(ep), 0, "once");
    }
    raise(libc::SIGUSR1);
    raise(libc::SIGUSR1);
    for &ep in &eps {
        assert_eq!(ready(ep), 1);
        assert_eq!(ready(ep), 0);
    }
    assert!(readable(bell), "never drained");
    println!("CHILD-OK");
}

/// D11: a fork child does not inherit signal watches: after `fork()` in a process whose
/// SIGUSR1 (SIG_DFL) and SIGUSR2 (a program handler) are watched with NOMASK, the child has
/// the original dispositions (SIGUSR1 kills it, SIGUSR2 runs the program's handler), can watch
/// again (the dispatcher's lock is usable), and its doorbell is its own. The parent keeps its
/// watches.
#[test]
fn d11_fork_does_not_inherit_signal_watch() {
    const NAME: &str = "d11_fork_does_not_inherit_signal_watch";
    if !is_child(NAME) {
        return run_child_ok(NAME);
    }
    install(libc::SIGUSR2, plain_handler_addr(), libc::SA_RESTART, &[]);
    watch(libc::SIGUSR1, true).unwrap();
    watch(libc::SIGUSR2, true).unwrap();
    let bell = doorbell_fd().unwrap();
    read_eventfd(bell);
    match fork() {
        None => {
            // Grandchild: exit codes only.
            // SAFETY: alarm takes no pointers; SIGALRM's default action ends a hung child.
            unsafe { libc::alarm(10) };
            if query(libc::SIGUSR1).sa_sigaction != libc::SIG_DFL {
                exit_now(2);
            }
            if query(libc::SIGUSR2).sa_sigaction != plain_handler_addr() {
                exit_now(3);
            }
            if doorbell_fd() != Ok(bell) {
                exit_now(4);
            }
            raise(libc::SIGUSR2);
            if PLAIN_HITS.load(SeqCst) != 1 {
                exit_now(5);
            }
            if watch(libc::SIGUSR2, true).is_err() {
                exit_now(6);
            }
            raise(libc::SIGUSR2);
            if PLAIN_HITS.load(SeqCst) != 1 {
                exit_now(7);
            }
            unwatch(libc::SIGUSR2, true);
            raise(libc::SIGUSR1); // SIG_DFL: terminates
            exit_now(8);
        }
        Some(pid) => {
            let status = waitpid(pid, 0);
            assert!(
                libc::WIFSIGNALED(status) && libc::WTERMSIG(status) == libc::SIGUSR1,
                "grandchild: raw status {status:#x} (exit code {} = failed check)",
                libc::WEXITSTATUS(status)
            );
            assert_eq!(
                read_eventfd(bell),
                0,
                "the grandchild rang its own doorbell, not ours"
            );
            let seen = delivered(libc::SIGUSR1);
            raise(libc::SIGUSR1);
            assert_eq!(
                delivered(libc::SIGUSR1) - seen,
                1,
                "parent still watches with NOMASK"
            );
            raise(libc::SIGUSR2);
            assert_eq!(PLAIN_HITS.load(SeqCst), 0, "parent still swallows SIGUSR2");
            assert_eq!(read_eventfd(bell), 2);
        }
    }
    println!("CHILD-OK");
}

/// D11 under concurrency: forks while another thread keeps watching and unwatching. Every
/// fork child sees a consistent state (the watched signal back at SIG_DFL) and can use the
/// dispatcher at once (no lock inherited in the held state).
#[test]
fn d11_fork_while_watching_does_not_deadlock() {
    const NAME: &str = "d11_fork_while_watching_does_not_deadlock";
    if !is_child(NAME) {
        return run_child_ok(NAME);
    }
    static STOP: AtomicBool = AtomicBool::new(false);
    doorbell_fd().unwrap();
    let churn = std::thread::spawn(|| {
        let mut n = 0u64;
        while !STOP.load(SeqCst) {
            watch(libc::SIGUSR2, true).unwrap();
            watch(libc::SIGUSR2, false).unwrap();
            unwatch(libc::SIGUSR2, true);
            unwatch(libc::SIGUSR2, false);
            n += 1;
        }
        n
    });
    for _ in 0..100 {
        match fork() {
            None => {
                // SAFETY: alarm takes no pointers; SIGALRM's default action ends a hung child.
                unsafe { libc::alarm(10) };
                if query(libc::SIGUSR2).sa_sigaction != libc::SIG_DFL {
                    exit_now(2);
                }
                if watch(libc::SIGUSR1, true).is_err() {
                    exit_now(3);
                }
                unwatch(libc::SIGUSR1, true);
                exit_now(0);
            }
            Some(pid) => {
                let status = waitpid(pid, 0);
                assert!(
                    libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
                    "fork child: raw status {status:#x}"
                );
            }
        }
    }
    STOP.store(true, SeqCst);
    assert!(churn.join().unwrap() > 0);
    println!("CHILD-OK");
}

/// Spec 5 / the dispatcher's contract: numbers that are not watchable signals are `EINVAL`
/// (0, negative, above SIGRTMAX, SIGKILL, SIGSTOP, the C library's reserved 32..SIGRTMIN);
/// unwatching them does nothing. Runs in this process: a rejected watch changes nothing.
#[test]
fn s5_signal_invalid_signo_einval() {
    let mut bad = vec![
        0,
        -1,
        i32::MIN,
        libc::SIGKILL,
        libc::SIGSTOP,
        libc::SIGRTMAX() + 1,
        4096,
    ];
    bad.extend(32..libc::SIGRTMIN());
    for sig in bad {
        for nomask in [false, true] {
            assert_eq!(watch(sig, nomask), Err(Errno::EINVAL), "signal {sig}");
            unwatch(sig, nomask);
        }
        assert_eq!(delivered(sig), 0);
    }
}

// ---------------------------------------------------------------------------------------------
// The library's own SIGSEGV/SIGBUS hold (safecopy, issue 11) and NOMASK watchers that belong
// to a queue (issue 11, item 4).

/// Three pages: read-write, inaccessible, read-only; leaked (the child exits).
fn test_pages() -> *mut u8 {
    let map = kevent_sys::mem::AnonMap::new(3 * 4096).unwrap();
    // SAFETY: a fresh mapping, no reference into it.
    unsafe {
        map.protect(4096, 4096, kevent_sys::mem::Prot::None)
            .unwrap();
        map.protect(8192, 4096, kevent_sys::mem::Prot::Read)
            .unwrap();
    }
    map.leak().as_ptr()
}

/// A bad copy through safecopy gives EFAULT, and is invisible to a SIGNAL kevent watching
/// SIGSEGV and to the program's own SIGSEGV handler.
fn safecopy_fault_is_efault(pages: *mut u8) {
    let mut buf = [0u8; 16];
    // SAFETY: `buf` is ours; the source is the inaccessible page, which safecopy survives.
    let r = unsafe { safecopy::copy(buf.as_mut_ptr(), pages.wrapping_add(4096), 16) };
    assert_eq!(r, Err(Errno::EFAULT));
}

static FIXED_UP: AtomicU32 = AtomicU32::new(0);

/// A program handler that makes the faulting page writable and returns (what a GC write
/// barrier or a userspace pager does): the faulting instruction then succeeds.
extern "C" fn unprotect_handler(_: c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
    // SAFETY: the kernel's siginfo for a fault; si_addr is the faulting address. mprotect is
    // async-signal-safe in practice (a plain syscall).
    unsafe {
        let addr = (*info).si_addr() as usize & !4095;
        libc::mprotect(
            addr as *mut libc::c_void,
            4096,
            libc::PROT_READ | libc::PROT_WRITE,
        );
    }
    FIXED_UP.fetch_add(1, SeqCst);
}

/// The hold: `refresh()` installs `on_signal` for SIGSEGV and SIGBUS once; a fault of the copy
/// routine becomes EFAULT; a real fault elsewhere still reaches the program's handler
/// installed before (which fixes it), and the handler counts no fault of the copy routine.
#[test]
fn p20_safecopy_faults_are_efault_and_real_faults_reach_the_program() {
    const NAME: &str = "p20_safecopy_faults_are_efault_and_real_faults_reach_the_program";
    if !is_child(NAME) {
        return run_child_ok(NAME);
    }
    let pages = test_pages();
    install(
        libc::SIGSEGV,
        unprotect_handler as extern "C" fn(c_int, *mut libc::siginfo_t, *mut libc::c_void) as usize,
        libc::SA_SIGINFO,
        &[],
    );
    assert!(safecopy::refresh(), "safecopy not usable");
    assert_ne!(query(libc::SIGSEGV).sa_sigaction, libc::SIG_DFL);
    // A SIGNAL kevent watching SIGSEGV (without NOMASK) sees no safecopy fault.
    watch(libc::SIGSEGV, false).unwrap();
    let before = delivered(libc::SIGSEGV);
    safecopy_fault_is_efault(pages);
    assert_eq!(FIXED_UP.load(SeqCst), 0, "the program saw a safecopy fault");
    assert_eq!(delivered(libc::SIGSEGV), before, "counted a safecopy fault");
    // A real fault: the program's handler runs (and unprotects the page), as without us.
    // SAFETY: the write faults once; the program handler makes the page writable and the
    // write is repeated.
    unsafe { std::ptr::write_volatile(pages.add(4096), 1) };
    assert_eq!(FIXED_UP.load(SeqCst), 1);
    assert_eq!(delivered(libc::SIGSEGV), before + 1);
    unwatch(libc::SIGSEGV, false);
    // The hold outlives the last kevent watcher: on_signal stays, safecopy still works (on
    // fresh pages: the program's handler made the old hole writable).
    assert!(safecopy::refresh());
    safecopy_fault_is_efault(test_pages());
    assert_eq!(FIXED_UP.load(SeqCst), 1);
    println!("CHILD-OK");
}

/// A real fault under SIG_DFL (and under SIG_IGN, which the kernel does not honour for
/// faults) kills the process by that signal, with the kernel's own fault (no endless loop).
#[test]
fn p21_real_faults_under_sig_dfl_or_sig_ign_stay_fatal() {
    const NAME: &str = "p21_real_faults_under_sig_dfl_or_sig_ign_stay_fatal";
    if is_child(NAME) {
        let ign = std::env::var("IGN").is_ok();
        install(
            libc::SIGSEGV,
            if ign { libc::SIG_IGN } else { libc::SIG_DFL },
            0,
            &[],
        );
        let pages = test_pages();
        assert!(safecopy::refresh());
        safecopy_fault_is_efault(pages);
        println!("HELD");
        // SAFETY: deliberately faults (the scenario); the process must die here.
        unsafe { std::ptr::write_volatile(pages.add(4096), 1) };
        println!("SURVIVED");
        return;
    }
    for ign in [false, true] {
        let mut c = child_command(NAME);
        if ign {
            c.env("IGN", "1");
        }
        let out = c.output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            stdout.contains("HELD") && !stdout.contains("SURVIVED"),
            "{}",
            describe(&out)
        );
        assert_eq!(
            out.status.signal(),
            Some(libc::SIGSEGV),
            "{}",
            describe(&out)
        );
    }
}

/// A program that installs its own SIGSEGV handler after the hold: the next refresh (the C
/// library's kevent_init) sees it and safecopy is off for good (it never takes the signal
/// back), and copies report "not usable".
#[test]
fn p20_safecopy_stops_when_the_program_replaces_the_handler() {
    const NAME: &str = "p20_safecopy_stops_when_the_program_replaces_the_handler";
    if !is_child(NAME) {
        return run_child_ok(NAME);
    }
    assert!(safecopy::refresh());
    assert!(safecopy::usable());
    install(libc::SIGSEGV, plain_handler_addr(), 0, &[]);
    assert!(!safecopy::refresh());
    assert!(!safecopy::usable());
    assert_eq!(query(libc::SIGSEGV).sa_sigaction, plain_handler_addr());
    // Even if our handler came back, the decision stays.
    install(libc::SIGSEGV, libc::SIG_DFL, 0, &[]);
    assert!(!safecopy::refresh());
    println!("CHILD-OK");
}

/// Issue 11, item 4: a NOMASK watcher that belongs to a queue swallows its signal while the
/// queue fd is open; once the fd is closed, the very next delivery reaches the program's
/// handler, although nobody unwatched (the engine has not noticed the close yet).
#[test]
fn p17_nomask_of_a_closed_queue_gives_the_signal_back_at_once() {
    const NAME: &str = "p17_nomask_of_a_closed_queue_gives_the_signal_back_at_once";
    if !is_child(NAME) {
        return run_child_ok(NAME);
    }
    install(libc::SIGUSR1, plain_handler_addr(), 0, &[]);
    // A stand-in queue: an epoll holding a wake eventfd under a token.
    // SAFETY: creating fds takes no pointers.
    let (ep, wake) = unsafe {
        (
            libc::epoll_create1(libc::EPOLL_CLOEXEC),
            libc::eventfd(0, libc::EFD_CLOEXEC),
        )
    };
    assert!(ep >= 0 && wake >= 0);
    let token = 0x1234_5678_9abc_def0;
    let mut ev = libc::epoll_event {
        events: libc::EPOLLIN as u32,
        u64: token,
    };
    // SAFETY: `ev` is a live local.
    let r = unsafe { libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, wake, &mut ev) };
    assert_eq!(r, 0);
    let owner = Owner {
        epfd: ep,
        wake,
        token,
    };
    watch_for(libc::SIGUSR1, true, Some(owner)).unwrap();
    let seen = delivered(libc::SIGUSR1);
    raise(libc::SIGUSR1);
    assert_eq!(delivered(libc::SIGUSR1), seen + 1);
    assert_eq!(
        PLAIN_HITS.load(SeqCst),
        0,
        "swallowed while the queue is open"
    );
    // SAFETY: our epoll fd, closed once (the "program" closes its queue).
    unsafe { libc::close(ep) };
    raise(libc::SIGUSR1);
    assert_eq!(
        delivered(libc::SIGUSR1),
        seen + 2,
        "still reported (counted)"
    );
    assert_eq!(
        PLAIN_HITS.load(SeqCst),
        1,
        "the first signal after close() is handled"
    );
    // A new epoll on the same number is another queue: still not swallowed.
    // SAFETY: as above.
    let ep2 = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
    assert_eq!(ep2, ep, "the number was reused");
    raise(libc::SIGUSR1);
    assert_eq!(PLAIN_HITS.load(SeqCst), 2);
    // The engine's release (unwatch_for) then puts the program's handler back.
    unwatch_for(libc::SIGUSR1, true, Some(owner));
    assert_eq!(query(libc::SIGUSR1).sa_sigaction, plain_handler_addr());
    // An unowned NOMASK watcher still swallows for as long as it exists.
    watch(libc::SIGUSR1, true).unwrap();
    raise(libc::SIGUSR1);
    assert_eq!(PLAIN_HITS.load(SeqCst), 2);
    unwatch(libc::SIGUSR1, true);
    raise(libc::SIGUSR1);
    assert_eq!(PLAIN_HITS.load(SeqCst), 3);
    println!("CHILD-OK");
}
