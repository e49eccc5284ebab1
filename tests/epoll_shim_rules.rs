//! epoll's closed-fd rules and the io_uring refusal through `libkevent-epoll.so` (issue 24
//! items 3–5, decisions P32 and P33). This test binary re-executes itself under
//! `LD_PRELOAD=libkevent_epoll_preload.so`, once per backend (`KEVENT_BACKEND`); there every
//! scenario runs twice, on the shim (libc's `epoll_*`, interposed) and on the kernel's epoll
//! (raw system calls), and the two traces of results must be equal, and equal to what epoll
//! is documented to answer.
//!
//! Not part of the conformance binary: that one is linked statically, and a static
//! executable cannot preload anything.
#![allow(unsafe_code)]

use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::time::Duration;

use kevent_test_support::differential::shim::run_preloaded;
use kevent_test_support::*;

/// Set in the re-executed child: the backend the parent chose for it.
const CHILD_ENV: &str = "KEVENT_SHIM_RULES_CHILD";

/// An epoll instance reached through libc (the shim, when preloaded) or through raw system
/// calls (always the kernel's).
struct Ep {
    fd: RawFd,
    raw: bool,
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

fn errno_name(e: i32) -> String {
    Errno::from_raw(e).map_or_else(|| format!("errno {e}"), |e| format!("{e:?}"))
}

impl Ep {
    fn new(raw: bool) -> Ep {
        // SAFETY: no pointer arguments.
        let fd = unsafe {
            if raw {
                libc::syscall(libc::SYS_epoll_create1, libc::EPOLL_CLOEXEC) as i32
            } else {
                libc::epoll_create1(libc::EPOLL_CLOEXEC)
            }
        };
        assert!(fd >= 0, "epoll_create1: {}", errno());
        Ep { fd, raw }
    }

    /// `epoll_ctl`: "ok" or the errno's name.
    fn ctl(&self, op: i32, fd: RawFd, events: i32, data: u64) -> String {
        let mut ev = libc::epoll_event {
            events: events as u32,
            u64: data,
        };
        // SAFETY: `ev` lives across the call.
        let r = unsafe {
            if self.raw {
                libc::syscall(libc::SYS_epoll_ctl, self.fd, op, fd, &mut ev) as i32
            } else {
                libc::epoll_ctl(self.fd, op, fd, &mut ev)
            }
        };
        if r == 0 {
            "ok".into()
        } else {
            errno_name(errno())
        }
    }

    /// One `epoll_wait` of up to 8 events: `[(events, data)]` or the errno's name.
    fn wait(&self, timeout_ms: i32) -> String {
        let mut evs = [libc::epoll_event { events: 0, u64: 0 }; 8];
        // SAFETY: `evs` holds 8 writable entries.
        let n = unsafe {
            if self.raw {
                libc::syscall(
                    libc::SYS_epoll_pwait,
                    self.fd,
                    evs.as_mut_ptr(),
                    8,
                    timeout_ms,
                    std::ptr::null::<libc::sigset_t>(),
                    8,
                ) as i32
            } else {
                libc::epoll_wait(self.fd, evs.as_mut_ptr(), 8, timeout_ms)
            }
        };
        if n < 0 {
            return errno_name(errno());
        }
        let got: Vec<(u32, u64)> = evs[..n as usize]
            .iter()
            .map(|e| (e.events, e.u64))
            .collect();
        format!("{got:x?}")
    }
}

impl Drop for Ep {
    fn drop(&mut self) {
        close(self.fd);
    }
}

/// Puts `f`'s file on number `n` (closed, or a duplicate of the same file) with `dup2`.
fn dup2(f: &OwnedFd, n: RawFd) {
    // SAFETY: dup2 takes no pointers; this single-threaded child owns the numbers involved.
    assert_eq!(unsafe { libc::dup2(f.as_raw_fd(), n) }, n, "dup2");
}

fn dup(f: &OwnedFd) -> OwnedFd {
    // SAFETY: dup takes no pointer; the new fd is owned by the result.
    owned(unsafe { libc::dup(f.as_raw_fd()) }, "dup")
}

const IN: i32 = libc::EPOLLIN;
const OUT: i32 = libc::EPOLLOUT;

/// Item 3: `d = dup(fd)` registered, `close(d)`: DEL is EBADF; `dup2(fd, d)`: the old
/// registration is still there (ADD is EEXIST, MOD works and one wait reports the new mask).
/// Also CPython's `test_unregister_closed` (DEL of a closed, undup'd fd: EBADF).
fn closed_while_duplicated(raw: bool) -> Vec<String> {
    let ep = Ep::new(raw);
    let mut t = Vec::new();
    let (fd, peer) = socketpair();
    let d = dup(&fd);
    let x = d.as_raw_fd();
    t.push(ep.ctl(libc::EPOLL_CTL_ADD, x, IN, 1));
    drop(d);
    t.push(ep.ctl(libc::EPOLL_CTL_DEL, x, 0, 0));
    dup2(&fd, x);
    t.push(ep.ctl(libc::EPOLL_CTL_ADD, x, IN, 2));
    t.push(ep.ctl(libc::EPOLL_CTL_MOD, x, IN | OUT, 3));
    assert_eq!(write_fd(peer.as_raw_fd(), b"x"), 1);
    t.push(ep.wait(5000));
    t.push(ep.ctl(libc::EPOLL_CTL_DEL, x, 0, 0));
    t.push(ep.wait(0));
    close(x);
    // test_unregister_closed.
    let (s, _peer2) = socketpair();
    let y = s.as_raw_fd();
    t.push(ep.ctl(libc::EPOLL_CTL_ADD, y, IN, 4));
    t.push(ep.wait(0));
    drop(s);
    t.push(ep.ctl(libc::EPOLL_CTL_DEL, y, 0, 0));
    t
}

/// Item 4: a registered fd closed (its file with it) and the number reused by a new file:
/// MOD is ENOENT (the old item went with the old file), and the ADD libevent retries with
/// registers the new file.
fn closed_and_reused(raw: bool) -> Vec<String> {
    let ep = Ep::new(raw);
    let mut t = Vec::new();
    let (a, _pa) = socketpair();
    let x = a.as_raw_fd();
    t.push(ep.ctl(libc::EPOLL_CTL_ADD, x, IN, 1));
    let (c, pc) = socketpair();
    drop(a);
    dup2(&c, x);
    drop(c);
    t.push(ep.ctl(libc::EPOLL_CTL_MOD, x, IN, 2));
    t.push(ep.ctl(libc::EPOLL_CTL_ADD, x, IN, 3));
    assert_eq!(write_fd(pc.as_raw_fd(), b"x"), 1);
    t.push(ep.wait(5000));
    t.push(ep.ctl(libc::EPOLL_CTL_DEL, x, 0, 0));
    close(x);
    t
}

/// A scenario: run on the kernel's epoll (`true`) or through libc (`false`), its trace.
type Scenario = fn(bool) -> Vec<String>;

fn child(backend: &str) {
    let ep = Ep::new(false);
    let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{}", ep.fd)).unwrap_or_default();
    match backend {
        "fallback" => assert!(info.contains("tfd:"), "not a fallback queue: {info}"),
        _ => assert!(!info.contains("tfd:"), "a native queue is no epoll: {info}"),
    }
    drop(ep);
    let hex = |v: u32| format!("{v:x}");
    let ready = hex((IN | OUT) as u32);
    let scenarios: [(&str, Scenario, Vec<String>); 2] = [
        (
            "closed_while_duplicated",
            closed_while_duplicated,
            [
                "ok",
                "EBADF",
                "EEXIST",
                "ok",
                &format!("[({ready}, 3)]"),
                "ok",
                "[]",
                "ok",
                "[]",
                "EBADF",
            ]
            .map(String::from)
            .to_vec(),
        ),
        (
            "closed_and_reused",
            closed_and_reused,
            [
                "ok",
                "ENOENT",
                "ok",
                &format!("[({}, 3)]", hex(IN as u32)),
                "ok",
            ]
            .map(String::from)
            .to_vec(),
        ),
    ];
    for (name, f, want) in scenarios {
        let kernel = f(true);
        let shimmed = f(false);
        assert_eq!(kernel, want, "{name}: the kernel's epoll answers otherwise");
        assert_eq!(
            shimmed, kernel,
            "{name}: the shim on {backend} differs from epoll"
        );
    }
    // P32: io_uring is refused (ENOSYS), whatever the kernel would say.
    let mut params = [0u8; 120];
    // SAFETY: `params` is a writable buffer larger than struct io_uring_params.
    let r = unsafe { libc::syscall(libc::SYS_io_uring_setup, 4, params.as_mut_ptr()) };
    let e = errno();
    if r >= 0 {
        close(r as RawFd);
    }
    assert_eq!((r, e), (-1, libc::ENOSYS), "io_uring_setup under the shim");
}

/// Items 3 and 4 of issue 24 (P33) and the io_uring refusal (P32), under the shim, against
/// the kernel's epoll.
#[test]
fn p32_p33_epoll_closed_fd_rules_and_io_uring_under_the_shim() {
    run_preloaded(
        "p32_p33_epoll_closed_fd_rules_and_io_uring_under_the_shim",
        CHILD_ENV,
        Duration::from_secs(60),
        child,
    );
}
