//! Issue 24 item 6: a program under `libkevent-epoll.so` makes about as many kernel calls per
//! request as on epoll (at most 1.2 times as many), counted with `strace -c -f`.
//!
//! The workload is this test binary itself, re-executed as a child: a single-threaded event
//! loop over 8 connections (socketpairs) that serves a fixed number of ping/pong requests
//! the way redis-benchmark's loop and redis-server's do: the client side asks for
//! `EPOLLOUT` to send, the server side for `EPOLLOUT` to answer, each switched back to
//! `EPOLLIN` with `EPOLL_CTL_MOD` after the write, and every 16 requests a connection is
//! closed (`EPOLL_CTL_DEL`) and replaced (`EPOLL_CTL_ADD`). Each mode runs twice, with
//! [`SHORT`] and [`LONG`] requests, and the per-request figure is the difference divided by
//! the difference in requests (start-up costs cancel out). Counts, not times: deterministic
//! up to the batching of `epoll_wait`.
//!
//! `strace` is optional (a printed skip; a failure under `KEVENT_REQUIRE_ALL=1`).
#![allow(unsafe_code)]

use std::collections::BTreeMap;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::process::Command;

use kevent_test_support::differential::shim::shim_or_skip;
use kevent_test_support::*;

/// Set in the re-executed child: the number of requests to serve.
const WORKLOAD_ENV: &str = "KEVENT_SHIM_COST_REQUESTS";
const SHORT: usize = 400;
const LONG: usize = 2400;
const CONNS: usize = 8;
/// Requests per connection before it is replaced.
const CHURN: usize = 16;

fn check(r: i32, what: &str) -> i32 {
    assert!(r >= 0, "{what}: {}", std::io::Error::last_os_error());
    r
}

fn ctl(ep: RawFd, op: i32, fd: RawFd, events: i32, data: u64) {
    let mut ev = libc::epoll_event {
        events: events as u32,
        u64: data,
    };
    // SAFETY: `ev` lives across the call.
    check(unsafe { libc::epoll_ctl(ep, op, fd, &mut ev) }, "epoll_ctl");
}

struct Conn {
    client: OwnedFd,
    server: OwnedFd,
    generation: u32,
    served: usize,
}

fn token(k: usize, generation: u32, server: bool) -> u64 {
    (u64::from(generation) << 32) | ((k as u64) << 1) | u64::from(server)
}

fn open_conn(ep: RawFd, k: usize, generation: u32) -> Conn {
    let mut sv = [0; 2];
    // SAFETY: `sv` has room for the two fds.
    check(
        unsafe {
            libc::socketpair(
                libc::AF_UNIX,
                libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                0,
                sv.as_mut_ptr(),
            )
        },
        "socketpair",
    );
    let c = owned(sv[0], "socketpair");
    let s = owned(sv[1], "socketpair");
    ctl(
        ep,
        libc::EPOLL_CTL_ADD,
        s.as_raw_fd(),
        libc::EPOLLIN,
        token(k, generation, true),
    );
    ctl(
        ep,
        libc::EPOLL_CTL_ADD,
        c.as_raw_fd(),
        libc::EPOLLOUT,
        token(k, generation, false),
    );
    Conn {
        client: c,
        server: s,
        generation,
        served: 0,
    }
}

fn io(fd: RawFd, write: bool) {
    let mut buf = *b"ping";
    // SAFETY: `buf` is valid for 4 bytes either way.
    let n = unsafe {
        if write {
            libc::write(fd, buf.as_ptr().cast(), 4)
        } else {
            libc::read(fd, buf.as_mut_ptr().cast(), 4)
        }
    };
    assert_eq!(n, 4, "{}", if write { "write" } else { "read" });
}

/// The event loop: serves `n` requests.
fn workload(n: usize) {
    // SAFETY: no pointer arguments.
    let ep = check(
        unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) },
        "epoll_create1",
    );
    let mut conns: Vec<Conn> = (0..CONNS).map(|k| open_conn(ep, k, 0)).collect();
    let mut done = 0;
    let mut evs = [libc::epoll_event { events: 0, u64: 0 }; 64];
    while done < n {
        // SAFETY: `evs` has 64 writable entries.
        let got = check(
            unsafe { libc::epoll_wait(ep, evs.as_mut_ptr(), 64, 10_000) },
            "epoll_wait",
        );
        assert!(got > 0, "the workload stalled");
        for ev in &evs[..got as usize] {
            let (events, data) = (ev.events as i32, ev.u64);
            let (generation, k, server) = (
                (data >> 32) as u32,
                (data as u32 >> 1) as usize,
                data & 1 == 1,
            );
            if conns[k].generation != generation {
                continue;
            }
            let conn = &mut conns[k];
            let (c, s) = (conn.client.as_raw_fd(), conn.server.as_raw_fd());
            if server {
                if events & libc::EPOLLIN != 0 {
                    io(s, false);
                    ctl(
                        ep,
                        libc::EPOLL_CTL_MOD,
                        s,
                        libc::EPOLLIN | libc::EPOLLOUT,
                        data,
                    );
                } else if events & libc::EPOLLOUT != 0 {
                    io(s, true);
                    ctl(ep, libc::EPOLL_CTL_MOD, s, libc::EPOLLIN, data);
                }
            } else if events & libc::EPOLLOUT != 0 {
                io(c, true);
                ctl(ep, libc::EPOLL_CTL_MOD, c, libc::EPOLLIN, data);
            } else if events & libc::EPOLLIN != 0 {
                io(c, false);
                done += 1;
                conn.served += 1;
                if conn.served % CHURN == 0 {
                    ctl(ep, libc::EPOLL_CTL_DEL, s, 0, 0);
                    ctl(ep, libc::EPOLL_CTL_DEL, c, 0, 0);
                    let next = conn.generation + 1;
                    conns[k] = open_conn(ep, k, next);
                } else {
                    ctl(ep, libc::EPOLL_CTL_MOD, c, libc::EPOLLOUT, data);
                }
            }
        }
    }
    drop(conns);
    close(ep);
}

/// The idle workload: one `epoll_wait` of `ms` milliseconds on an empty instance.
fn idle(ms: i32) {
    // SAFETY: no pointer arguments.
    let ep = check(
        unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) },
        "epoll_create1",
    );
    let mut ev = libc::epoll_event { events: 0, u64: 0 };
    // SAFETY: `ev` is one writable entry.
    let n = check(
        unsafe { libc::epoll_wait(ep, &mut ev, 1, ms) },
        "epoll_wait",
    );
    assert_eq!(n, 0);
    close(ep);
}

/// `strace` and the shim, or a printed skip of test `name`: the shim's path.
fn tools_or_skip(name: &str) -> Option<String> {
    let has_strace = Command::new("strace")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success());
    if !has_strace {
        skip(name, "strace is not installed (apt-get install strace)");
        return None;
    }
    shim_or_skip(name)
}

/// `strace -c -f` of the workload serving `n` requests: calls per system call.
fn counted(n: usize, preload: Option<(&str, &str)>) -> BTreeMap<String, u64> {
    strace(NAME, &n.to_string(), preload)
}

/// `strace -c -f` of this binary's test `test` with the workload argument `arg`.
fn strace(test: &str, arg: &str, preload: Option<(&str, &str)>) -> BTreeMap<String, u64> {
    let tag = format!("{test}-{arg}-{}", preload.map_or("epoll", |p| p.1));
    let out = temp_dir("shim-cost").join(format!("strace-{tag}"));
    let exe = std::env::current_exe().expect("current_exe");
    let mut cmd = Command::new("strace");
    cmd.args(["-c", "-f", "-o"])
        .arg(&out)
        .arg(exe)
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(WORKLOAD_ENV, arg);
    if let Some((so, backend)) = preload {
        cmd.env("LD_PRELOAD", so).env("KEVENT_BACKEND", backend);
    }
    let st = cmd.output().expect("run strace");
    assert!(
        st.status.success(),
        "workload failed: {}",
        String::from_utf8_lossy(&st.stderr)
    );
    let text = std::fs::read_to_string(&out).expect("strace output");
    let mut calls = BTreeMap::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        // `% time  seconds  usecs/call  calls  [errors]  syscall`
        if f.len() >= 5 && f[0].parse::<f64>().is_ok() {
            if let Ok(c) = f[3].parse::<u64>() {
                calls.insert(f[f.len() - 1].to_string(), c);
            }
        }
    }
    assert!(calls.contains_key("total"), "no strace summary: {text}");
    calls
}

/// Calls per request of each system call (LONG minus SHORT), the total under "total".
fn per_request(preload: Option<(&str, &str)>) -> BTreeMap<String, f64> {
    let a = counted(SHORT, preload);
    let b = counted(LONG, preload);
    b.iter()
        .map(|(k, &v)| {
            let d = v as f64 - *a.get(k).unwrap_or(&0) as f64;
            (k.clone(), d / (LONG - SHORT) as f64)
        })
        .filter(|(_, v)| v.abs() >= 0.01)
        .collect()
}

const NAME: &str = "i24_shim_kernel_calls_per_request_within_1_2x_of_epoll";

/// Issue 24 item 6: kernel calls per request under the shim, on every backend, at most 1.2
/// times those on epoll.
#[test]
fn i24_shim_kernel_calls_per_request_within_1_2x_of_epoll() {
    if let Ok(n) = std::env::var(WORKLOAD_ENV) {
        workload(n.parse().expect("request count"));
        return;
    }
    let Some(so) = tools_or_skip(NAME) else {
        return;
    };
    let so = so.as_str();
    let epoll = per_request(None);
    let base = epoll["total"];
    println!("[{NAME}] epoll: {base:.2} calls per request {epoll:.2?}");
    for b in backends(NAME) {
        let shimmed = per_request(Some((so, b.as_str())));
        let total = shimmed["total"];
        println!(
            "[{NAME}] libkevent-epoll.so on {}: {total:.2} calls per request ({:.2}x) {shimmed:.2?}",
            b.as_str(),
            total / base
        );
        assert!(
            total <= 1.2 * base,
            "{}: {total:.2} kernel calls per request against {base:.2} on epoll: {shimmed:.2?}",
            b.as_str()
        );
    }
}

const IDLE_NAME: &str = "p34_idle_waiter_wakes_at_most_once_a_second";
/// The idle wait, in seconds.
const IDLE_S: u64 = 3;

/// Issue 23 item 7, decision P34: an idle waiter under the shim (every backend) wakes at most
/// once a second: counted as the `epoll_pwait` calls (one per sleep slice, plus the first,
/// non-blocking harvest) of one `epoll_wait` of [`IDLE_S`] seconds, with `strace -c -f`.
#[test]
fn p34_idle_waiter_wakes_at_most_once_a_second() {
    if let Ok(ms) = std::env::var(WORKLOAD_ENV) {
        idle(ms.parse().expect("milliseconds"));
        return;
    }
    let Some(so) = tools_or_skip(IDLE_NAME) else {
        return;
    };
    let so = so.as_str();
    for b in backends(IDLE_NAME) {
        let calls = strace(
            IDLE_NAME,
            &(IDLE_S * 1000).to_string(),
            Some((so, b.as_str())),
        );
        let waits = calls.get("epoll_pwait").copied().unwrap_or(0)
            + calls.get("epoll_pwait2").copied().unwrap_or(0)
            + calls.get("epoll_wait").copied().unwrap_or(0);
        println!(
            "[{IDLE_NAME}] {}: {waits} epoll waits in {IDLE_S} s idle {calls:?}",
            b.as_str()
        );
        assert!(
            waits <= IDLE_S + 2,
            "{}: {waits} epoll waits in {IDLE_S} s of idle waiting: {calls:?}",
            b.as_str()
        );
    }
}
