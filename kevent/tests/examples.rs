//! Issue 23's three programs, as the crate's examples, run and checked by their output:
//! the echo server (idle timeouts, SIGTERM/SIGINT shutdown), the four user-event workers,
//! and (feature `tokio`) the tokio program. Each example is built by a nested `cargo build`
//! with this test's features, then run as a process.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Generous bound for a program that must finish (the bug it catches is a hang).
const HANG: Duration = Duration::from_secs(60);

/// Builds the example `name` with this test binary's features; returns its path.
fn build(name: &str) -> PathBuf {
    let mut features = vec![];
    if cfg!(feature = "tokio") {
        features.push("tokio");
    }
    if cfg!(feature = "async-io") {
        features.push("async-io");
    }
    let status = Command::new(env!("CARGO"))
        .args(["build", "-q", "-p", "kevent", "--example", name])
        .args(["--features", &features.join(",")])
        .status()
        .expect("cargo");
    assert!(status.success(), "building example {name}");
    // This test runs from <target>/debug/deps; examples land in <target>/debug/examples.
    let exe = std::env::current_exe().expect("test path");
    let dir = exe.parent().and_then(|d| d.parent()).expect("target dir");
    dir.join("examples").join(name)
}

/// Waits for `child` (up to [`HANG`], then kills it) and returns its stdout lines read by
/// `lines` so far plus the rest, and whether it exited successfully.
fn finish(mut child: Child, lines: mpsc::Receiver<String>) -> (bool, Vec<String>) {
    let give_up = Instant::now() + HANG;
    let ok = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status.success();
        }
        if Instant::now() > give_up {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "the example hung: {:?}",
                lines.try_iter().collect::<Vec<_>>()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    (ok, lines.try_iter().collect())
}

/// Runs `exe` with `args`; returns the child and a channel of its stdout lines.
fn spawn(exe: &PathBuf, args: &[&str]) -> (Child, mpsc::Receiver<String>) {
    let mut child = Command::new(exe)
        .args(args)
        .stdout(Stdio::piped())
        .spawn()
        .expect("run example");
    let out = child.stdout.take().expect("stdout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    (child, rx)
}

fn next_line(rx: &mpsc::Receiver<String>) -> String {
    rx.recv_timeout(HANG).expect("a line from the example")
}

/// Sends `sig` with the shell's builtin `kill` (no procps needed).
fn signal(child: &Child, sig: &str) {
    let status = Command::new("sh")
        .args(["-c", &format!("kill {sig} {}", child.id())])
        .status()
        .expect("sh");
    assert!(status.success());
}

/// Echo, an idle connection closed by its timeout, a ready-at-accept connection served,
/// then a clean shutdown on `sig`.
fn echo_server_with(sig: &str, name: &str) {
    let exe = build("echo_server");
    let (child, rx) = spawn(&exe, &["1000"]);
    let first = next_line(&rx);
    let addr = first
        .strip_prefix("listening on ")
        .and_then(|rest| rest.split(' ').next())
        .unwrap_or_else(|| panic!("first line: {first}"))
        .to_string();

    // An idle connection: the server closes it after 1 s (read returns EOF).
    let mut idle = TcpStream::connect(&addr).unwrap();
    idle.set_read_timeout(Some(HANG)).unwrap();
    let mut buf = [0; 1];
    assert_eq!(
        idle.read(&mut buf).unwrap(),
        0,
        "closed by the idle timeout"
    );

    // A connection that sends before the server accepts it: data already there at ADD.
    let mut eager = TcpStream::connect(&addr).unwrap();
    eager.write_all(b"early\n").unwrap();
    let mut got = [0; 6];
    eager.set_read_timeout(Some(HANG)).unwrap();
    eager.read_exact(&mut got).unwrap();
    assert_eq!(
        &got, b"early\n",
        "the ready-at-accept connection was served"
    );
    eager.write_all(b"again\n").unwrap();
    eager.read_exact(&mut got).unwrap();
    assert_eq!(&got, b"again\n");
    drop(eager);

    // Wait for the server to report the closes, then stop it.
    let mut seen = vec![first];
    while !seen.iter().any(|l| l.contains("closed by the peer")) {
        seen.push(next_line(&rx));
    }
    signal(&child, sig);
    let (ok, rest) = finish(child, rx);
    seen.extend(rest);
    assert!(ok, "exit status: {seen:?}");
    assert!(
        seen.iter().any(|l| l.contains("idle for 1000 ms, closed")),
        "{seen:?}"
    );
    let last = seen.last().cloned().unwrap_or_default();
    assert!(
        last.starts_with(&format!(
            "shutdown on {name}: served 2 connections, closing 0 open"
        )),
        "{seen:?}"
    );
}

#[test]
fn echo_server_idle_timeout_and_sigterm() {
    echo_server_with("-TERM", "SIGTERM");
}

#[test]
fn echo_server_sigint() {
    echo_server_with("-INT", "SIGINT");
}

#[test]
fn user_workers_each_job_once() {
    let exe = build("user_workers");
    let (child, rx) = spawn(&exe, &["2000"]);
    let (ok, lines) = finish(child, rx);
    assert!(ok, "{lines:?}");
    let workers = lines.iter().filter(|l| l.starts_with("worker ")).count();
    assert_eq!(workers, 4, "{lines:?}");
    assert_eq!(
        lines.last().map(String::as_str),
        Some("all 2000 jobs handled exactly once")
    );
}

#[cfg(feature = "tokio")]
#[test]
fn async_tokio_mixes_tokio_sockets_and_kevents() {
    let exe = build("async_tokio");
    let (child, rx) = spawn(&exe, &[]);
    let (ok, lines) = finish(child, rx);
    assert!(ok, "{lines:?}");
    for want in [
        "signal SIGUSR1 x1",
        "directory: CREATE",
        "timer of connection 0 expired",
        "timer of connection 1 expired",
        "timer of connection 2 expired",
        "echo: hello from tokio",
        "async_tokio: done",
    ] {
        assert!(
            lines.iter().any(|l| l == want),
            "{want:?} missing: {lines:?}"
        );
    }
}

#[cfg(feature = "async-io")]
#[test]
fn async_smol_runs() {
    let exe = build("async_smol");
    let (child, rx) = spawn(&exe, &[]);
    let (ok, lines) = finish(child, rx);
    assert!(ok, "{lines:?}");
    assert_eq!(lines.last().map(String::as_str), Some("async_smol: done"));
}
