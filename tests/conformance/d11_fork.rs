//! D11: `fork()` in a threaded program. The child shares nothing with the parent's queues:
//! its copy of a queue fd answers `EBADF` on every call, and signal kevents are never
//! inherited (a NOMASK kevent of the parent does not swallow the child's signals). The
//! parent's queue and the waiters blocked in it are unaffected.
//!
//! Runs in a child process (it forks and changes signal dispositions); the forked
//! grandchild reports through its exit code only.
#![allow(unsafe_code)]

use std::sync::Arc;
use std::time::Duration;

use kevent_test_support::*;

/// What the forked child checks; bit `i` of the exit code is set when check `i` failed.
fn in_child(b: Backend, fd: i32) -> i32 {
    let mut fail = 0;
    let mut check = |i: u32, ok: bool| {
        if !ok {
            fail |= 1 << i;
        }
    };
    let mut e = [user(99, 0)];
    check(0, b.ctl(fd, KEVENT_CTL_ADD, &mut e) == Err(Errno::EBADF));
    check(1, b.ctl(fd, KEVENT_CTL_READY, &mut []) == Err(Errno::EBADF));
    let mut e = [user(1, 0)];
    check(2, b.ctl(fd, KEVENT_CTL_REMOVE, &mut e) == Err(Errno::EBADF));
    let mut e = [user(1, 0)];
    check(3, b.ctl(fd, KEVENT_CTL_MODIFY, &mut e) == Err(Errno::EBADF));
    let mut buf = [ukevent::default(); 4];
    check(
        4,
        b.get_events(fd, 1, &mut buf, &ZERO, 0) == Err(Errno::EBADF),
    );
    // Even with something that was ready in the parent and a long timeout: at once.
    check(
        5,
        b.get_events(fd, 1, &mut buf, &ts(2, 0), 0) == Err(Errno::EBADF),
    );
    check(6, b.wait(fd, 1, 0, &ts(2, 0), 0) == Err(Errno::EBADF));
    check(7, b.commit(fd, 0, 0) == Err(Errno::EBADF));
    let mut e = [user(1, 0)];
    check(8, b.ctl(fd, KEVENT_CTL_READY, &mut e) == Err(Errno::EBADF));
    // The parent's NOMASK SIGUSR1 kevent is not inherited: the handler runs.
    // SAFETY: raise takes no pointers.
    unsafe { libc::raise(libc::SIGUSR1) };
    check(9, handled() == 1);
    // The child's own new queues work.
    // SAFETY: a null ring with num 0 registers no memory.
    match unsafe { kevent_backend::init(b, std::ptr::null_mut(), 0, 0) } {
        Ok(nq) => {
            let mut e = [user(5, KEVENT_REQ_READY)];
            check(10, b.ctl(nq, KEVENT_CTL_ADD, &mut e) == Ok(0));
            let n = b.get_events(nq, 1, &mut buf, &ZERO, 0);
            check(11, n == Ok(1) && buf[0].id.as_u64() == 5);
        }
        Err(_) => check(10, false),
    }
    fail
}

isolated_test! {
    /// D11: in a threaded program with waiters blocked in a queue, the child's copy of the
    /// queue fd answers `EBADF` on every call, signal kevents are not inherited, and the
    /// parent keeps working.
    fn d11_fork_child_gets_ebadf_and_no_signal_kevents(b) {
        install_counting_handler(libc::SIGUSR1, false);
        let q = Arc::new(Queue::with_ring(b, 8));
        let sig = signal(libc::SIGUSR1, true, 0);
        q.add_ok(&[user(1, 0), sig]);
        q.ready_ids(&[1]);
        assert_eq!(q.wait(8, 0, &ZERO), Ok(1));
        q.ready_ids(&[1]);
        // Two threads waiting in the queue (for more than is ready) across the fork.
        let (tx, rx) = std::sync::mpsc::channel();
        let waiters: Vec<_> = (0..2)
            .map(|_| {
                let (q, tx) = (q.clone(), tx.clone());
                std::thread::spawn(move || {
                    tx.send(gettid()).unwrap();
                    q.get_events(5, 8, &FOREVER, 0)
                })
            })
            .collect();
        let tids: Vec<_> = (0..2).map(|_| rx.recv().unwrap()).collect();
        until_asleep(&tids);
        let fd = q.fd;
        // The child holds copies of our fds until it exits (`forks`).
        let forking = forks::forking();
        // SAFETY: the child only makes the calls of `in_child` (no locks the waiter threads
        // could hold: the engine takes its own atfork locks) and leaves with `_exit`.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork");
        if pid == 0 {
            let code = in_child(b, fd);
            // SAFETY: `_exit` ends the child without running the parent's destructors.
            unsafe { libc::_exit(code) };
        }
        let mut status = 0;
        let waited = bounded(Duration::from_secs(30), "the forked child", move || {
            // SAFETY: `status` is a local int; `pid` is our child.
            let r = unsafe { libc::waitpid(pid, &mut status, 0) };
            (r, status)
        });
        drop(forking);
        assert_eq!(waited.0, pid);
        let status = waited.1;
        assert!(libc::WIFEXITED(status), "child status {status:#x}");
        assert_eq!(libc::WEXITSTATUS(status), 0, "failed child checks (bitmask)");
        // The parent: its waiters are still waiting and wake on READY(0).
        q.wake();
        let got = bounded(Duration::from_secs(5), "parent waiters", move || {
            waiters.into_iter().map(|h| h.join().unwrap()).collect::<Vec<_>>()
        });
        let total: usize = got.into_iter().map(|r| r.expect("get_events").len()).sum();
        assert_eq!(total, 1, "UNOTIFY 1 (ready) delivered {total} times to the woken waiters");
        // Its NOMASK kevent still swallows and reports.
        reset_handled();
        // SAFETY: kill takes no pointers.
        unsafe { libc::kill(libc::getpid(), libc::SIGUSR1) };
        let got = q.expect_within(Duration::from_secs(5), &[Want::of(&sig)]);
        assert_eq!(got[0].ret_data[0], 1);
        assert_eq!(handled(), 0);
        assert_eq!(q.commit(1, 0), Ok(1));
        assert_usable(&q);
    }
}
