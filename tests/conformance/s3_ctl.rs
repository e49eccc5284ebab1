//! Spec section 3, `kevent_ctl`: ADD's write-back, per-entry failures (D2), REMOVE and
//! MODIFY by `(type, id)` (D3), READY with and without entries, unknown commands.

use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use kevent_test_support::*;

/// An fd number that is not open in any test process.
const CLOSED_FD: i32 = 999_983;

/// A TIMER kevent that never fires during a test (one hour).
fn far_timer() -> ukevent {
    timer(3600, 0, 0)
}

backend_test! {
    /// ADD returns how many entries it wrote back, in their original order, to the start of
    /// the array: the ready-at-once ones (`RET_DONE`) and the failed ones
    /// (`RET_BROKEN|RET_DONE`, `-errno`); a failing entry never stops the others.
    fn s3_ctl_add_writes_back_ready_and_failed_entries_in_order(b) {
        let q = Queue::new(b);
        let (a, peer) = socketpair();
        assert_eq!(write_fd(peer.as_raw_fd(), b"x"), 1);
        q.add_ok(&[user(7, 0)]);
        let mut naio = user(1, 0);
        naio.type_ = KEVENT_NAIO;
        let mut ready_sock = on_fd(KEVENT_SOCKET, a.as_raw_fd(), KEVENT_SOCKET_RECV, 0);
        ready_sock.set_cookie(0xc0ffee);
        let back = q.add(&[
            user(1, 0),
            naio,
            user(2, 0),
            ready_sock,
            user(7, 0),
            user(3, 0),
        ]);
        assert_eq!(back.len(), 3, "{back:#?}");
        assert!(Want::new(KEVENT_NAIO, 1).broken(Errno::ENOSYS).matches(&back[0]));
        assert!(
            Want::of(&ready_sock)
                .flags(KEVENT_RET_DONE)
                .cookie(0xc0ffee)
                .matches(&back[1]),
            "{:?}",
            back[1]
        );
        assert!(Want::new(KEVENT_UNOTIFY, 7).broken(Errno::EEXIST).matches(&back[2]));
        // The others were registered; the ready socket was not.
        let (marked, missing) = q.ready(&[user(1, 0), user(2, 0), user(3, 0), ready_sock]);
        assert_eq!(marked, 3);
        assert_eq!(missing.len(), 1);
        q.expect(
            &ZERO,
            &[
                Want::new(KEVENT_UNOTIFY, 1),
                Want::new(KEVENT_UNOTIFY, 2),
                Want::new(KEVENT_UNOTIFY, 3),
            ],
        );
    }

    /// D2: NAIO, AIO, POSIX_TIMER and unknown types fail per entry with `-ENOSYS` (the
    /// original silently echoed them); the other entries are still processed.
    fn d2_add_enosys_per_entry_for_naio_aio_posix_timer_and_unknown_types(b) {
        let q = Queue::new(b);
        let bad_types = [KEVENT_NAIO, KEVENT_AIO, KEVENT_POSIX_TIMER, KEVENT_MAX, 1000, u32::MAX];
        let mut entries = Vec::new();
        for (i, t) in bad_types.iter().enumerate() {
            entries.push(user(100 + i as u64, 0));
            let mut e = user(i as u64, 0);
            e.type_ = *t;
            e.event = KEVENT_MASK_ALL;
            entries.push(e);
        }
        let back = q.add(&entries);
        assert_eq!(back.len(), bad_types.len(), "{back:#?}");
        for (i, (e, t)) in back.iter().zip(bad_types).enumerate() {
            assert!(
                Want::new(t, i as u64).broken(Errno::ENOSYS).matches(e),
                "entry {i}: {e:?}"
            );
        }
        let ids: Vec<u64> = (0..bad_types.len() as u64).map(|i| 100 + i).collect();
        q.ready_ids(&ids);
        let want: Vec<Want> = ids.iter().map(|&i| Want::new(KEVENT_UNOTIFY, i)).collect();
        q.expect(&ZERO, &want);
    }

    /// The same `(type, id)` registered twice: `-EEXIST` for the second.
    fn s3_ctl_add_same_key_twice_eexist(b) {
        let q = Queue::new(b);
        q.add_ok(&[user(5, 0), far_timer()]);
        let back = q.add(&[user(5, KEVENT_REQ_ONESHOT), far_timer()]);
        expect_events(
            &back,
            &[
                Want::new(KEVENT_UNOTIFY, 5).broken(Errno::EEXIST),
                Want::of(&far_timer()).broken(Errno::EEXIST),
            ],
        );
        // The same id twice in one ADD.
        let back = q.add(&[user(6, 0), user(6, 0)]);
        expect_events(&back, &[Want::new(KEVENT_UNOTIFY, 6).broken(Errno::EEXIST)]);
        assert_usable(&q);
    }

    /// A bad fd in an fd-watching entry: `-EBADF` (closed, negative).
    fn s3_ctl_add_bad_fd_ebadf(b) {
        let q = Queue::new(b);
        for t in [KEVENT_SOCKET, KEVENT_PIPE, KEVENT_POLL, KEVENT_INODE] {
            for fd in [CLOSED_FD, -1, i32::MIN] {
                let e = on_fd(t, fd, 1, 0);
                let back = q.add(&[e]);
                expect_events(&back, &[Want::of(&e).broken(Errno::EBADF)]);
            }
        }
        assert_usable(&q);
    }

    /// An fd of the wrong kind: not a socket for SOCKET, not a FIFO for PIPE, no poll
    /// support for POLL: `-EINVAL`.
    fn s3_ctl_add_wrong_kind_of_fd_einval(b) {
        let q = Queue::new(b);
        let (r, _w) = pipe();
        let (s, _s2) = socketpair();
        let dir = temp_dir("wrongkind");
        let file = std::fs::File::create(dir.join("f")).expect("file");
        let dfd = std::fs::File::open(&dir).expect("dir");
        let cases = [
            on_fd(KEVENT_SOCKET, r.as_raw_fd(), KEVENT_SOCKET_RECV, 0),
            on_fd(KEVENT_SOCKET, file.as_raw_fd(), KEVENT_SOCKET_RECV, 0),
            on_fd(KEVENT_PIPE, s.as_raw_fd(), KEVENT_SOCKET_RECV, 0),
            on_fd(KEVENT_PIPE, file.as_raw_fd(), KEVENT_SOCKET_RECV, 0),
            on_fd(KEVENT_POLL, file.as_raw_fd(), KEVENT_POLL_POLLIN, 0),
            on_fd(KEVENT_POLL, dfd.as_raw_fd(), KEVENT_POLL_POLLIN, 0),
        ];
        for e in cases {
            let back = q.add(&[e]);
            expect_events(&back, &[Want::of(&e).broken(Errno::EINVAL)]);
        }
        assert_usable(&q);
        let _ = std::fs::remove_dir_all(dir);
    }

    /// REMOVE writes every entry back in place with `RET_DONE`, plus `RET_BROKEN` and
    /// `-ENOENT` for entries that were not registered.
    fn s3_ctl_remove_writes_back_in_place(b) {
        let q = Queue::new(b);
        q.add_ok(&[user(1, 0), user(3, 0)]);
        let back = q.ctl_in_place(KEVENT_CTL_REMOVE, &[user(1, 0), user(2, 0), user(3, 0)]);
        assert!(Want::new(KEVENT_UNOTIFY, 1).flags(KEVENT_RET_DONE).matches(&back[0]));
        assert!(Want::new(KEVENT_UNOTIFY, 2).broken(Errno::ENOENT).matches(&back[1]));
        assert!(Want::new(KEVENT_UNOTIFY, 3).flags(KEVENT_RET_DONE).matches(&back[2]));
        // Gone now.
        let back = q.ctl_in_place(KEVENT_CTL_REMOVE, &[user(1, 0)]);
        assert!(Want::new(KEVENT_UNOTIFY, 1).broken(Errno::ENOENT).matches(&back[0]));
    }

    /// D3: the type is part of the key: the same id under two types is two kevents, and
    /// REMOVE, MODIFY and READY name one of them only.
    fn d3_type_is_part_of_the_key(b) {
        let q = Queue::new(b);
        let t = far_timer();
        let id = t.id.as_u64();
        let u = user(id, 0);
        q.add_ok(&[u, t]);
        // READY of the TIMER marks only the timer.
        let (n, _) = q.ready(&[t]);
        assert_eq!(n, 1);
        q.expect(&ZERO, &[Want::new(KEVENT_TIMER, id)]);
        // REMOVE of the UNOTIFY leaves the timer registered.
        q.remove_ok(&[u]);
        let (n, missing) = q.ready(&[u, t]);
        assert_eq!(n, 1);
        expect_events(&missing, &[Want::new(KEVENT_UNOTIFY, id)]);
        q.expect(&ZERO, &[Want::new(KEVENT_TIMER, id)]);
        // An unknown type with a registered id is not found.
        let mut other = u;
        other.type_ = KEVENT_SIGNAL;
        let back = q.ctl_in_place(KEVENT_CTL_MODIFY, &[other]);
        assert!(Want::new(KEVENT_SIGNAL, id).broken(Errno::ENOENT).matches(&back[0]));
        q.remove_ok(&[t]);
    }

    /// MODIFY replaces `event`, `req_flags` and the cookie; entries are written back in
    /// place with `RET_DONE` (`-ENOENT` when not found).
    fn s3_ctl_modify_replaces_event_req_flags_and_cookie(b) {
        let q = Queue::new(b);
        q.add_ok(&[user_c(1, 0, 111)]);
        let mut m = user_c(1, KEVENT_REQ_ONESHOT, 222);
        m.event = 0x77;
        let back = q.ctl_in_place(KEVENT_CTL_MODIFY, &[m, user(9, 0)]);
        assert!(Want::new(KEVENT_UNOTIFY, 1).flags(KEVENT_RET_DONE).matches(&back[0]));
        assert!(Want::new(KEVENT_UNOTIFY, 9).broken(Errno::ENOENT).matches(&back[1]));
        q.ready_ids(&[1]);
        q.expect(&ZERO, &[Want::new(KEVENT_UNOTIFY, 1).cookie(222).event(0x77)]);
        // ONESHOT (from MODIFY): unregistered by that delivery.
        let (n, _) = q.ready(&[user(1, 0)]);
        assert_eq!(n, 0);
        q.expect_no_events();
    }

    /// D14: REMOVE and MODIFY return 0 once every entry is processed; each entry's result
    /// is only in the entry (`RET_DONE`). Here every entry is found, in calls of one and of
    /// several entries, for occurrence and state kevents.
    fn d14_remove_and_modify_return_zero_when_every_entry_is_found(b) {
        let q = Queue::new(b);
        let (a, _peer) = socketpair();
        let s = on_fd(KEVENT_SOCKET, a.as_raw_fd(), KEVENT_SOCKET_RECV, 0);
        let t = far_timer();
        q.add_ok(&[user(1, 0), user(2, 0), s, t]);
        let mut one = [user_c(1, 0, 5)];
        assert_eq!(q.ctl(KEVENT_CTL_MODIFY, &mut one), Ok(0), "MODIFY of one found entry");
        assert!(Want::new(KEVENT_UNOTIFY, 1).flags(KEVENT_RET_DONE).matches(&one[0]), "{one:?}");
        let mut s2 = s;
        s2.event = KEVENT_SOCKET_RECV | KEVENT_SOCKET_SEND;
        let mut all = [user_c(1, 0, 6), user(2, KEVENT_REQ_ONESHOT), s2, t];
        assert_eq!(q.ctl(KEVENT_CTL_MODIFY, &mut all), Ok(0), "MODIFY of four found entries");
        for e in &all {
            assert!(Want::of(e).flags(KEVENT_RET_DONE).matches(e), "MODIFY wrote back {e:?}");
        }
        let mut one = [user(1, 0)];
        assert_eq!(q.ctl(KEVENT_CTL_REMOVE, &mut one), Ok(0), "REMOVE of one found entry");
        assert!(Want::new(KEVENT_UNOTIFY, 1).flags(KEVENT_RET_DONE).matches(&one[0]), "{one:?}");
        let mut rest = [user(2, 0), s, t];
        assert_eq!(q.ctl(KEVENT_CTL_REMOVE, &mut rest), Ok(0), "REMOVE of three found entries");
        for e in &rest {
            assert!(Want::of(e).flags(KEVENT_RET_DONE).matches(e), "REMOVE wrote back {e:?}");
        }
        q.expect_no_events();
        assert_usable(&q);
    }

    /// D14: entries that are not found do not change the return value: 0, with `-ENOENT`
    /// in exactly those entries, whether some or all of them are missing.
    fn d14_remove_and_modify_return_zero_when_entries_are_not_found(b) {
        let q = Queue::new(b);
        q.add_ok(&[user(1, 0), user(3, 0)]);
        for cmd in [KEVENT_CTL_MODIFY, KEVENT_CTL_REMOVE] {
            // Some found, some not (D3: the same id under another type is not found).
            let mut tm = far_timer();
            tm.id = kevent_id::from_u64(3);
            let mut v = [user(1, 0), user(2, 0), user(3, 0), tm];
            assert_eq!(q.ctl(cmd, &mut v), Ok(0), "cmd {cmd}, two of four found");
            assert!(Want::new(KEVENT_UNOTIFY, 1).flags(KEVENT_RET_DONE).matches(&v[0]), "{v:?}");
            assert!(Want::new(KEVENT_UNOTIFY, 2).broken(Errno::ENOENT).matches(&v[1]), "{v:?}");
            assert!(Want::new(KEVENT_UNOTIFY, 3).flags(KEVENT_RET_DONE).matches(&v[2]), "{v:?}");
            assert!(Want::of(&tm).broken(Errno::ENOENT).matches(&v[3]), "{v:?}");
        }
        // Now none is registered: 0 all the same.
        for cmd in [KEVENT_CTL_MODIFY, KEVENT_CTL_REMOVE] {
            let mut v = [user(1, 0), user(3, 0)];
            assert_eq!(q.ctl(cmd, &mut v), Ok(0), "cmd {cmd}, none found");
            for e in &v {
                assert!(Want::of(e).broken(Errno::ENOENT).matches(e), "cmd {cmd}: {e:?}");
            }
        }
        assert_usable(&q);
    }

    /// D14: MODIFY with unknown request flags in an entry fails that entry (`-EINVAL`, D1)
    /// and returns 0; the other entries are modified, the failed one keeps its old flags.
    fn d14_modify_with_bad_req_flags_in_an_entry_returns_zero(b) {
        let q = Queue::new(b);
        q.add_ok(&[user_c(1, 0, 10), user_c(2, 0, 20)]);
        let mut v = [user_c(1, 0x4000, 11), user_c(2, KEVENT_REQ_ONESHOT, 21), user(9, 0)];
        assert_eq!(q.ctl(KEVENT_CTL_MODIFY, &mut v), Ok(0));
        assert!(Want::new(KEVENT_UNOTIFY, 1).broken(Errno::EINVAL).matches(&v[0]), "{v:?}");
        assert!(Want::new(KEVENT_UNOTIFY, 2).flags(KEVENT_RET_DONE).matches(&v[1]), "{v:?}");
        assert!(Want::new(KEVENT_UNOTIFY, 9).broken(Errno::ENOENT).matches(&v[2]), "{v:?}");
        // 1 kept its cookie and stays registered after a delivery; 2 became ONESHOT.
        q.ready_ids(&[1, 2]);
        q.expect(&ZERO, &[Want::new(KEVENT_UNOTIFY, 1).cookie(10), Want::new(KEVENT_UNOTIFY, 2).cookie(21)]);
        let (n, missing) = q.ready(&[user(1, 0), user(2, 0)]);
        assert_eq!(n, 1);
        expect_events(&missing, &[Want::new(KEVENT_UNOTIFY, 2)]);
        q.remove_ok(&[user(1, 0)]);
        assert_usable(&q);
    }

    /// A ready kevent that is removed is never delivered afterwards (occurrence and state).
    fn s3_ctl_removed_ready_kevent_never_delivered(b) {
        let q = Queue::new(b);
        let (a, peer) = socketpair();
        q.add_ok(&[user(1, 0), user(2, 0), on_fd(KEVENT_SOCKET, a.as_raw_fd(), KEVENT_SOCKET_RECV, 0)]);
        q.ready_ids(&[1, 2]);
        assert_eq!(write_fd(peer.as_raw_fd(), b"x"), 1);
        q.remove_ok(&[user(1, 0), on_fd(KEVENT_SOCKET, a.as_raw_fd(), KEVENT_SOCKET_RECV, 0)]);
        q.expect(&ZERO, &[Want::new(KEVENT_UNOTIFY, 2)]);
        q.expect_no_events();
        // Not even to a waiter that blocks a while.
        let got = q.get(8, &ms(50));
        assert!(got.is_empty(), "{got:#?}");
    }

    /// READY with entries marks each named kevent ready and returns the number marked; the
    /// entries not found are copied to the start of the array.
    fn s3_ctl_ready_marks_and_copies_missing_entries_to_the_start(b) {
        let q = Queue::new(b);
        q.add_ok(&[user(1, 0), user(2, 0)]);
        let mut arr = [user(1, 0), user_c(50, 0, 5), user(2, 0), user_c(60, 0, 6)];
        assert_eq!(q.ctl(KEVENT_CTL_READY, &mut arr), Ok(2));
        assert_eq!(arr[0].id.as_u64(), 50);
        assert_eq!(arr[0].cookie(), 5);
        assert_eq!(arr[1].id.as_u64(), 60);
        assert_eq!(arr[1].cookie(), 6);
        q.expect(&ZERO, &[Want::new(KEVENT_UNOTIFY, 1), Want::new(KEVENT_UNOTIFY, 2)]);
    }

    /// READY works for any type: a timer that has not expired and a socket that is not
    /// readable are delivered once when marked.
    fn s3_ctl_ready_marks_any_type(b) {
        let q = Queue::new(b);
        let (a, _peer) = socketpair();
        let s = on_fd(KEVENT_SOCKET, a.as_raw_fd(), KEVENT_SOCKET_RECV, 0);
        let t = far_timer();
        q.add_ok(&[s, t]);
        q.expect_no_events();
        let (n, _) = q.ready(&[s, t]);
        assert_eq!(n, 2);
        q.expect(&ZERO, &[Want::of(&s), Want::of(&t)]);
        q.expect_no_events();
        q.remove_ok(&[s, t]);
    }

    /// An unknown command is EINVAL, and the queue stays usable.
    fn s3_ctl_unknown_cmd_einval(b) {
        let q = Queue::new(b);
        for cmd in [4, 5, 0x100, u32::MAX] {
            let mut e = [user(1, 0)];
            assert_eq!(q.ctl(cmd, &mut e), Err(Errno::EINVAL), "cmd {cmd}");
            assert_eq!(q.ctl(cmd, &mut []), Err(Errno::EINVAL), "cmd {cmd}, no entries");
        }
        assert_usable(&q);
    }

    /// READY with `num == 0` wakes every waiter of the queue, `kevent_get_events` and
    /// `kevent_wait` alike; they return with what is ready, here nothing.
    fn s3_ctl_ready_zero_wakes_every_waiter(b) {
        let q = std::sync::Arc::new(Queue::with_ring(b, 16));
        let (tx, rx) = std::sync::mpsc::channel();
        let mut hs = Vec::new();
        for i in 0..4 {
            let (q, tx) = (q.clone(), tx.clone());
            hs.push(std::thread::spawn(move || {
                tx.send(gettid()).unwrap();
                if i < 3 {
                    q.get_events(1, 8, &FOREVER, 0).map(|v| v.len() as u32)
                } else {
                    q.wait(4, 0, &FOREVER)
                }
            }));
        }
        let tids: Vec<_> = (0..4).map(|_| rx.recv().unwrap()).collect();
        until_asleep(&tids);
        q.wake();
        let results = bounded(Duration::from_secs(5), "waiters after READY(0)", move || {
            hs.into_iter().map(|h| h.join().unwrap()).collect::<Vec<_>>()
        });
        assert_eq!(results, vec![Ok(0); 4]);
        assert_usable(&q);
    }
}

backend_test! {
    /// P7: `READY` with `num == 0` while nobody waits is kept: the queue fd reads as readable
    /// and the next wait returns at once (here with nothing), taking the wake-up.
    fn p7_ready_zero_with_nobody_waiting_is_not_lost(b) {
        let q = Queue::new(b);
        q.wake();
        assert_ne!(poll_now(q.fd, libc::POLLIN) & libc::POLLIN, 0, "readable after READY(0)");
        let start = Instant::now();
        assert!(q.get(4, &ts(5, 0)).is_empty());
        assert!(start.elapsed() < Duration::from_secs(4), "the wake-up was lost");
        assert_eq!(poll_now(q.fd, libc::POLLIN) & libc::POLLIN, 0, "taken by that wait");
    }
}

backend_test! {
    /// P16: one fd-type kevent per fd per queue on the fallback (epoll registers a file once
    /// per epoll): a second ADD of the fd under another type is `-EEXIST`, and the first
    /// kevent keeps working. The kernel keys kevents by `(type, id)` only, so natively the
    /// second registers too, and both report.
    fn p16_second_fd_kevent_of_another_type(b) {
        let q = Queue::new(b);
        let (a, peer) = socketpair();
        let sock = on_fd(KEVENT_SOCKET, a.as_raw_fd(), KEVENT_SOCKET_RECV, 0);
        let poll = on_fd(KEVENT_POLL, a.as_raw_fd(), libc::POLLIN as u32, 0);
        q.add_ok(&[sock]);
        let back = q.add(&[poll]);
        assert_eq!(write_fd(peer.as_raw_fd(), b"x"), 1);
        if b.is_native() {
            assert!(back.is_empty(), "{back:?}");
            q.expect(&ms(1000), &[Want::of(&sock), Want::of(&poll)]);
        } else {
            expect_events(&back, &[Want::of(&poll).broken(Errno::EEXIST)]);
            q.expect(&ms(1000), &[Want::of(&sock)]);
        }
    }
}
