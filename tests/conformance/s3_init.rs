//! Spec section 3, `kevent_init`: the queue fd, the ring/num rule, and D1 for its flags.
#![allow(unsafe_code)]

use kevent_test_support::*;

backend_test! {
    /// `kevent_init` returns a queue fd that is close-on-exec.
    fn s3_init_returns_a_cloexec_queue_fd(b) {
        let q = Queue::new(b);
        assert!(q.fd >= 0);
        // SAFETY: F_GETFD takes no pointer.
        let fl = unsafe { libc::fcntl(q.fd, libc::F_GETFD) };
        assert!(fl >= 0 && fl & libc::FD_CLOEXEC != 0, "FD_CLOEXEC not set: {fl:#x}");
        assert_usable(&q);
    }

    /// `ring == NULL && num == 0`: a queue without a ring (the ring calls answer EINVAL).
    fn s3_init_null_ring_and_zero_num_has_no_ring(b) {
        let q = Queue::new(b);
        assert_eq!(q.wait(1, 0, &ZERO), Err(Errno::EINVAL));
        assert_eq!(q.commit(0, 0), Err(Errno::EINVAL));
        assert_usable(&q);
    }

    /// Otherwise `ring != NULL` and `num >= 2` are required, else EINVAL.
    fn s3_init_ring_needs_non_null_and_num_at_least_two(b) {
        let mut mem = vec![0u64; 64];
        let ring = mem.as_mut_ptr().cast::<kevent_ring>();
        for (rp, n) in [
            (std::ptr::null_mut(), 1),
            (std::ptr::null_mut(), 2),
            (std::ptr::null_mut(), 1000),
            (ring, 0),
            (ring, 1),
        ] {
            // SAFETY: every call must fail before registering anything; `mem` (512 bytes)
            // covers a ring of up to 12 entries anyway and outlives every queue made here.
            let r = unsafe { kevent_backend::init(b, rp, n, 0) };
            if let Ok(fd) = r {
                close(fd);
            }
            assert_eq!(r, Err(Errno::EINVAL), "init(ring {rp:?}, num {n})");
        }
        // num == 2 is the smallest ring.
        let q = Queue::with_ring(b, 2);
        assert_eq!(q.kidx(), 0);
        assert_eq!(q.over(), 0);
        assert_usable(&q);
    }

    /// D1: `kevent_init` defines one flag, `KEVENT_INIT_ASYNC_RING` (bit 0, P38, which needs
    /// a ring: tested in `p38_async_ring`); every other bit gives EINVAL, with and without
    /// a ring.
    fn d1_init_unknown_flags_einval(b) {
        let mut mem = vec![0u64; 64];
        let ring = mem.as_mut_ptr().cast::<kevent_ring>();
        // SAFETY: a null ring with num 0 registers no memory.
        let res = unsafe { kevent_backend::init(b, std::ptr::null_mut(), 0, KEVENT_INIT_ASYNC_RING) };
        assert_eq!(res, Err(Errno::EINVAL), "the asynchronous ring without a ring");
        for bit in 1..32 {
            for (r, n) in [(std::ptr::null_mut(), 0), (ring, 4)] {
                // SAFETY: `mem` holds a ring of 4 entries (168 bytes) and outlives the queue,
                // which is closed at once if it is (wrongly) created.
                let res = unsafe { kevent_backend::init(b, r, n, 1 << bit) };
                if let Ok(fd) = res {
                    close(fd);
                }
                assert_eq!(res, Err(Errno::EINVAL), "flags bit {bit}, num {n}");
            }
        }
        // SAFETY: as above.
        let res = unsafe { kevent_backend::init(b, std::ptr::null_mut(), 0, u32::MAX) };
        assert_eq!(res, Err(Errno::EINVAL));
    }

    /// Each `kevent_init` makes a new, independent queue.
    fn s3_init_queues_are_independent(b) {
        let q1 = Queue::new(b);
        let q2 = Queue::new(b);
        assert_ne!(q1.fd, q2.fd);
        q1.add_ok(&[user(1, 0)]);
        q2.add_ok(&[user(1, 0)]);
        q1.ready_ids(&[1]);
        q2.expect_no_events();
        q1.expect(&ZERO, &[Want::new(KEVENT_UNOTIFY, 1)]);
        q1.remove_ok(&[user(1, 0)]);
        q2.remove_ok(&[user(1, 0)]);
    }
}

backend_test! {
    /// P3: a ring must be 8-byte aligned (its entries hold 8-aligned 64-bit fields): a
    /// misaligned one is `EINVAL`, before anything is registered.
    fn p3_init_misaligned_ring_einval(b) {
        let mut mem = vec![0u64; 64];
        for offset in [1, 4] {
            // SAFETY: the call must fail before it uses the ring; even if it did not, `mem`
            // (512 bytes) covers the 4-entry ring at either offset and outlives the queue.
            let ring = unsafe { mem.as_mut_ptr().cast::<u8>().add(offset) }.cast::<kevent_ring>();
            // SAFETY: as above.
            let r = unsafe { kevent_backend::init(b, ring, 4, 0) };
            if let Ok(fd) = r {
                close(fd);
            }
            assert_eq!(r, Err(Errno::EINVAL), "ring at offset {offset}");
        }
    }
}
