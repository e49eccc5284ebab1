//! Backends and the generic runner: every backend this machine has, the test-declaring
//! macros, isolated children, skips and [`bounded`] runs.

use std::io::Write as _;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::*;

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
#[macro_export]
macro_rules! backend_test {
    ($($(#[$m:meta])* fn $name:ident($b:ident) $body:block)*) => {$(
        $(#[$m])*
        #[test]
        fn $name() {
            fn body($b: $crate::Backend) $body
            $crate::for_each_backend(stringify!($name), body);
        }
    )*};
}

/// Declares a test whose body runs in a child process, once per backend (the body may
/// change process-wide state: signals, rlimits, fork, fd numbers).
#[macro_export]
macro_rules! isolated_test {
    ($($(#[$m:meta])* fn $name:ident($b:ident) $body:block)*) => {$(
        $(#[$m])*
        #[test]
        fn $name() {
            fn body($b: $crate::Backend) $body
            $crate::isolated(&$crate::test_path(module_path!(), stringify!($name)), body);
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
#[macro_export]
macro_rules! require {
    ($cond:expr, $($why:tt)+) => {
        if !$cond {
            $crate::skip(module_path!(), &format!($($why)+));
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
    let mut child = crate::forks::spawn(&mut c).expect("spawn child");
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
