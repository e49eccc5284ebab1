//! Load and faults, each ending in bounded time:
//!
//! * the fd limit reached while adding (RLIMIT_NOFILE lowered in a child): each entry either
//!   registers cleanly or fails alone with `-EMFILE`, nothing half-registered, and the
//!   entry succeeds once fds are free again; `kevent_init` itself fails with EMFILE;
//! * a queue closed while threads wait in it: they return (0 or EBADF) within a bound;
//! * signals arriving during waits: no EINTR, a wait interrupted by a handler returns what is
//!   ready (possibly 0), and an event that arrives later is still delivered;
//! * ring overflow under `kevent_get_events`: `RET_COPY_FAILED`, no blocking, nothing lost.
//!
//! Fork in a threaded program is `d11_fork.rs`; fd reuse is `d10_fd_reuse.rs`.
#![allow(unsafe_code)]

use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use kevent_test_support::*;

fn set_nofile(soft: u64) {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a valid rlimit for both calls.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim), 0);
        lim.rlim_cur = soft.min(lim.rlim_max);
        assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &lim), 0);
    }
}

/// Opens /dev/null until EMFILE; returns the fds (closing them frees the table).
fn exhaust_fds() -> Vec<std::os::fd::OwnedFd> {
    let mut v = Vec::new();
    loop {
        // SAFETY: a constant NUL-terminated path.
        let fd = unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
        if fd < 0 {
            assert_eq!(
                std::io::Error::last_os_error().raw_os_error(),
                Some(libc::EMFILE)
            );
            return v;
        }
        v.push(owned(fd, "open"));
        assert!(v.len() < 100_000, "no fd limit");
    }
}

isolated_test! {
    /// The fd limit reached while adding: entries that need a new kernel object (the
    /// fallback's first TIMER needs a timerfd, the first INODE an inotify fd) fail alone
    /// with `-EMFILE`; nothing is half-registered; the others register; freeing fds makes the
    /// same ADD succeed. `kevent_init` at the limit fails with EMFILE.
    fn fault_fd_limit_while_adding_is_clean_per_entry(b) {
        set_nofile(64);
        let q = Queue::new(b);
        let dir_path = temp_dir("emfile");
        let dir = std::fs::File::open(&dir_path).unwrap();
        let (s, peer) = socketpair();
        let t = timer(0, 5_000_000, KEVENT_REQ_ONESHOT);
        let ino = on_fd(KEVENT_INODE, dir.as_raw_fd(), KEVENT_INODE_CREATE, 0);
        let sock = on_fd(KEVENT_SOCKET, s.as_raw_fd(), KEVENT_SOCKET_RECV, KEVENT_REQ_ONESHOT);
        let entries = [user(1, 0), t, ino, sock, user(2, 0)];
        let hog = exhaust_fds();
        // SAFETY: a null ring with num 0 registers no memory.
        let r = unsafe { kevent_backend::init(b, std::ptr::null_mut(), 0, 0) };
        assert_eq!(r, Err(Errno::EMFILE), "kevent_init at the fd limit");
        let back = q.add(&entries);
        for e in &back {
            assert!(
                Want::of(e).broken(Errno::EMFILE).matches(e) || Want::of(e).broken(Errno::ENFILE).matches(e),
                "an entry failed otherwise than EMFILE: {e:?}"
            );
        }
        eprintln!("{} of {} entries failed with EMFILE at the fd limit", back.len(), entries.len());
        let failed: Vec<Key> = back.iter().map(Key::of).collect();
        // Nothing half-registered: each failed entry is unknown to REMOVE; each other one
        // is registered.
        let rm = q.ctl_in_place(KEVENT_CTL_REMOVE, &entries);
        for e in &rm {
            if failed.contains(&Key::of(e)) {
                assert!(Want::of(e).broken(Errno::ENOENT).matches(e), "half-registered: {e:?}");
            } else {
                assert_eq!(e.ret_flags, KEVENT_RET_DONE, "not registered: {e:?}");
            }
        }
        q.expect_no_events();
        drop(hog);
        // With fds free again, the same entries register and work.
        q.add_ok(&entries);
        assert_eq!(write_fd(peer.as_raw_fd(), b"x"), 1);
        std::fs::write(dir_path.join("x"), b"x").unwrap();
        q.expect_within(Duration::from_secs(5), &[Want::of(&t), Want::of(&ino), Want::of(&sock)]);
        assert_usable(&q);
        let _ = std::fs::remove_dir_all(dir_path);
    }

    /// A queue closed while threads wait in it (get_events and wait, "infinite" timeouts):
    /// every waiter returns 0 or EBADF within a bounded time, never hangs.
    fn fault_queue_closed_while_threads_wait(b) {
        let mut q = Queue::with_ring(b, 16);
        let fd = q.fd;
        q.add_ok(&[user(1, 0)]);
        let (tx, rx) = std::sync::mpsc::channel();
        let hs: Vec<_> = (0..6)
            .map(|i| {
                let tx = tx.clone();
                std::thread::spawn(move || {
                    tx.send(gettid()).unwrap();
                    if i < 4 {
                        let mut buf = [ukevent::default(); 8];
                        b.get_events(fd, 1, &mut buf, &FOREVER, 0)
                    } else {
                        b.wait(fd, 4, 0, &FOREVER, 0)
                    }
                })
            })
            .collect();
        let tids: Vec<_> = (0..6).map(|_| rx.recv().unwrap()).collect();
        until_asleep(&tids);
        let closed = Instant::now();
        q.close();
        let results = bounded(Duration::from_secs(5), "waiters of a closed queue", move || {
            hs.into_iter().map(|h| h.join().unwrap()).collect::<Vec<_>>()
        });
        eprintln!("6 waiters returned {:?} after {:?}", results, closed.elapsed());
        for r in results {
            assert!(matches!(r, Ok(0) | Err(Errno::EBADF)), "{r:?}");
        }
        // Every later call says EBADF.
        let mut e = [user(1, 0)];
        assert_eq!(b.ctl(fd, KEVENT_CTL_READY, &mut e), Err(Errno::EBADF));
    }

    /// Signals arriving during waits: a handler interrupting a wait never makes it fail
    /// with EINTR; it returns what is ready (possibly 0) or keeps waiting, and an event
    /// that becomes ready afterwards is delivered.
    fn fault_signals_during_waits_never_eintr(b) {
        install_counting_handler(libc::SIGUSR2, false);
        // get_events on a queue without a ring, wait on a queue with one.
        let qa = Arc::new(Queue::new(b));
        let qb = Arc::new(Queue::with_ring(b, 16));
        qa.add_ok(&[user(1, 0), user(2, 0)]);
        qb.add_ok(&[user(1, 0), user(2, 0)]);
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, rx) = std::sync::mpsc::channel();
        let waiter = {
            let (qa, qb, stop) = (qa.clone(), qb.clone(), stop.clone());
            std::thread::spawn(move || {
                // SAFETY: pthread_self takes no arguments.
                tx.send(unsafe { libc::pthread_self() } as usize).unwrap();
                let mut calls = 0u32;
                let mut got_a = Vec::new();
                let mut got_b = Vec::new();
                let mut uidx = 0;
                // After `stop`, on until both queues delivered id 2 (the last one readied), so
                // a loaded machine cannot end the loop before the events arrive; bounded.
                let has_2 = |v: &[ukevent]| v.iter().any(|e| e.id.as_u64() == 2);
                let since = Instant::now();
                while !(stop.load(Ordering::SeqCst) && has_2(&got_a) && has_2(&got_b))
                    && since.elapsed() < Duration::from_secs(30)
                {
                    match qa.get_events(1, 8, &ms(200), 0) {
                        Ok(v) => got_a.extend(v),
                        Err(e) => panic!("get_events during signals: {e:?}"),
                    }
                    match qb.wait(8, uidx, &ms(200)) {
                        Ok(n) => {
                            for i in 0..n {
                                got_b.push(qb.slot((uidx + i) % 16));
                            }
                            if n > 0 {
                                assert_eq!(qb.commit((uidx + n) % 16, qb.over()), Ok(n));
                                uidx = (uidx + n) % 16;
                            }
                        }
                        Err(e) => panic!("kevent_wait during signals: {e:?}"),
                    }
                    calls += 2;
                }
                (calls, got_a, got_b)
            })
        };
        let tid = rx.recv().unwrap() as libc::pthread_t;
        let start = Instant::now();
        let mut sent = 0;
        while start.elapsed() < Duration::from_millis(600) {
            // SAFETY: `tid` is alive until `stop` is set and it is joined.
            assert_eq!(unsafe { libc::pthread_kill(tid, libc::SIGUSR2) }, 0);
            sent += 1;
            std::thread::sleep(Duration::from_millis(3));
            if sent == 60 {
                qa.ready_ids(&[1]);
                qb.ready_ids(&[1]);
            }
        }
        if sent < 60 {
            // A loaded machine sent fewer signals in the 600 ms: id 1 still becomes ready
            // between signals and id 2.
            qa.ready_ids(&[1]);
            qb.ready_ids(&[1]);
        }
        qa.ready_ids(&[2]);
        qb.ready_ids(&[2]);
        stop.store(true, Ordering::SeqCst);
        let (calls, got_a, got_b) = bounded(Duration::from_secs(40), "the signalled waiter", move || waiter.join().unwrap());
        eprintln!("{sent} signals, {} handled, {calls} waits, no EINTR", handled());
        assert!(handled() > 0, "no signal was handled");
        let want = [Want::new(KEVENT_UNOTIFY, 1), Want::new(KEVENT_UNOTIFY, 2)];
        expect_events(&got_a, &want);
        expect_events(&got_b, &want);
    }
}

backend_test! {
    /// Ring overflow: many more events than ring slots through `kevent_get_events`: each is
    /// returned once, those without a free slot with `RET_COPY_FAILED`; never blocks.
    fn fault_ring_overflow_copy_failed_nothing_lost(b) {
        let q = Queue::with_ring(b, 8);
        let ids: Vec<u64> = (0..1000).collect();
        let evs: Vec<ukevent> = ids.iter().map(|&i| user(i, KEVENT_REQ_ONESHOT)).collect();
        q.add_ok(&evs);
        q.ready_ids(&ids);
        let start = Instant::now();
        let mut all = Vec::new();
        loop {
            let got = q.get_events(1, 64, &FOREVER, 0).unwrap();
            all.extend(got);
            if all.len() == ids.len() {
                break;
            }
            assert!(start.elapsed() < Duration::from_secs(10));
        }
        let copied = all.iter().filter(|e| e.ret_flags & KEVENT_RET_COPY_FAILED == 0).count();
        assert_eq!(copied, 7, "a ring of 8 takes 7 events (D12)");
        let want: Vec<Want> = ids
            .iter()
            .map(|&i| {
                let w = Want::new(KEVENT_UNOTIFY, i);
                let copied_here = all
                    .iter()
                    .any(|e| e.id.as_u64() == i && e.ret_flags & KEVENT_RET_COPY_FAILED == 0);
                if copied_here { w } else { w.with(KEVENT_RET_COPY_FAILED) }
            })
            .collect();
        expect_events(&all, &want);
        assert_eq!(q.commit(7, 0), Ok(7));
        q.expect_no_events();
    }
}
