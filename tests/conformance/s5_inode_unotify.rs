//! Spec section 5, INODE (`raw[0]` = a directory fd; CREATE and REMOVE of its entries) and
//! UNOTIFY (any id, any event; ready only when named by READY or added with REQ_READY).

use std::os::fd::AsRawFd;
use std::time::Duration;

use kevent_test_support::*;

fn inode(dir: &std::fs::File, mask: u32, req: u32) -> ukevent {
    on_fd(KEVENT_INODE, dir.as_raw_fd(), mask, req)
}

backend_test! {
    /// INODE: an entry created in the watched directory is reported; so is a removal.
    fn s5_inode_create_and_remove_reported(b) {
        let q = Queue::new(b);
        let path = temp_dir("inode");
        let dir = std::fs::File::open(&path).unwrap();
        let e = inode(&dir, KEVENT_INODE_CREATE | KEVENT_INODE_REMOVE, 0);
        q.add_ok(&[e]);
        q.expect_no_events();
        std::fs::write(path.join("a"), b"x").unwrap();
        q.expect_within(Duration::from_secs(5), &[Want::of(&e)]);
        q.expect_no_events();
        std::fs::remove_file(path.join("a")).unwrap();
        q.expect_within(Duration::from_secs(5), &[Want::of(&e)]);
        q.expect_no_events();
        // Several entries before a wait: occurrences coalesce into one event.
        for n in ["b", "c", "d"] {
            std::fs::write(path.join(n), b"x").unwrap();
        }
        std::thread::sleep(Duration::from_millis(20));
        q.expect_within(Duration::from_secs(5), &[Want::of(&e)]);
        q.expect_no_events();
        q.remove_ok(&[e]);
        let _ = std::fs::remove_dir_all(path);
    }

    /// INODE: the event mask filters: a CREATE-only kevent does not report removals, and a
    /// REMOVE-only kevent does not report creations. A queue watches a directory once
    /// (decision P29), so the two kevents on one directory are in two queues.
    fn s5_inode_event_mask_filters(b) {
        let qc = Queue::new(b);
        let qr = Queue::new(b);
        let path = temp_dir("inodemask");
        let d = std::fs::File::open(&path).unwrap();
        let create = inode(&d, KEVENT_INODE_CREATE, 0);
        let remove = inode(&d, KEVENT_INODE_REMOVE, 0);
        qc.add_ok(&[create]);
        qr.add_ok(&[remove]);
        std::fs::write(path.join("a"), b"x").unwrap();
        qc.expect_within(Duration::from_secs(5), &[Want::of(&create)]);
        std::fs::remove_file(path.join("a")).unwrap();
        qr.expect_within(Duration::from_secs(5), &[Want::of(&remove)]);
        std::thread::sleep(Duration::from_millis(20));
        qc.expect_no_events();
        qr.expect_no_events();
        let _ = std::fs::remove_dir_all(path);
    }

    /// INODE with MODIFY: an entry created while the mask left CREATE out is not reported
    /// after a MODIFY adds CREATE (the mask filters occurrences when they happen, as a
    /// kernel does; the fallback once read inotify only at the next wait, under the new
    /// mask: the native-against-fallback differential test found it). A removal after the
    /// MODIFY is.
    fn s5_inode_modify_filters_what_came_before_under_the_old_mask(b) {
        let q = Queue::new(b);
        let path = temp_dir("inodemod");
        let d = std::fs::File::open(&path).unwrap();
        let e = inode(&d, KEVENT_INODE_REMOVE, 0);
        q.add_ok(&[e]);
        std::fs::write(path.join("a"), b"x").unwrap();
        let both = inode(&d, KEVENT_INODE_CREATE | KEVENT_INODE_REMOVE, 0);
        for back in q.ctl_in_place(KEVENT_CTL_MODIFY, &[both]) {
            assert_eq!(back.ret_flags, KEVENT_RET_DONE, "MODIFY of {back:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
        q.expect_no_events();
        std::fs::remove_file(path.join("a")).unwrap();
        q.expect_within(
            Duration::from_secs(5),
            &[Want::of(&both).data0(KEVENT_INODE_REMOVE)],
        );
        q.expect_no_events();
        let _ = std::fs::remove_dir_all(path);
    }

    /// Decision P29: an INODE id is the directory's fd: `id.raw[1]` must be 0, or the entry
    /// is `-EINVAL`, before the fd is looked at (a closed fd too), and also while the
    /// directory is watched under its proper id (not `-EEXIST`).
    fn p29_inode_raw1_einval(b) {
        let q = Queue::new(b);
        let path = temp_dir("inoderaw1");
        let d = std::fs::File::open(&path).unwrap();
        let good = inode(&d, KEVENT_INODE_CREATE, 0);
        assert_raw1_refused(&q, good, d.as_raw_fd());
        assert_raw1_refused(&q, good, next_fd());
        q.add_ok(&[good]);
        assert_raw1_refused(&q, good, d.as_raw_fd());
        q.remove_ok(&[good]);
        assert_usable(&q);
        let _ = std::fs::remove_dir_all(path);
    }

    /// Decision P29: a queue watches a directory once: a second INODE kevent on it through
    /// another fd is `-EEXIST`, and the directory's changes reach the first kevent only.
    /// Another queue may watch it (through either fd). After the first fd's file is closed
    /// and its kevent REMOVEd, the directory is free again in that queue.
    fn p29_inode_same_directory_twice_eexist(b) {
        let q = Queue::new(b);
        let q2 = Queue::new(b);
        let path = temp_dir("inodetwice");
        let d1 = std::fs::File::open(&path).unwrap();
        let d2 = std::fs::File::open(&path).unwrap();
        let e1 = inode(&d1, KEVENT_INODE_CREATE, 0);
        let e2 = inode(&d2, KEVENT_INODE_CREATE, 0);
        q.add_ok(&[e1]);
        expect_events(&q.add(&[e2]), &[Want::of(&e2).broken(Errno::EEXIST)]);
        // Refused in a batch too, next to an entry that is accepted.
        let u = user(1, 0);
        expect_events(&q.add(&[u, e2]), &[Want::of(&e2).broken(Errno::EEXIST)]);
        q2.add_ok(&[e2]);
        expect_events(&q2.add(&[e1]), &[Want::of(&e1).broken(Errno::EEXIST)]);
        std::fs::write(path.join("a"), b"x").unwrap();
        q.expect_within(Duration::from_secs(5), &[Want::of(&e1)]);
        q2.expect_within(Duration::from_secs(5), &[Want::of(&e2)]);
        std::thread::sleep(Duration::from_millis(20));
        q.expect_no_events();
        q2.expect_no_events();
        // The first fd's only file closed: its kevent still watches the directory until
        // REMOVE; then the second fd's ADD is accepted and reported.
        drop(d1);
        q.remove_ok(&[e1]);
        q.add_ok(&[e2]);
        std::fs::write(path.join("b"), b"x").unwrap();
        q.expect_within(Duration::from_secs(5), &[Want::of(&e2)]);
        q2.expect_within(Duration::from_secs(5), &[Want::of(&e2)]);
        q.remove_ok(&[e2, u]);
        q2.remove_ok(&[e2]);
        let _ = std::fs::remove_dir_all(path);
    }

    /// INODE needs a directory: a regular file gives `-EINVAL` (closed fds: `s3_ctl`).
    fn s5_inode_needs_a_directory(b) {
        let q = Queue::new(b);
        let path = temp_dir("inodefile");
        let f = std::fs::File::create(path.join("f")).unwrap();
        let e = inode(&f, KEVENT_INODE_CREATE, 0);
        expect_events(&q.add(&[e]), &[Want::of(&e).broken(Errno::EINVAL)]);
        let _ = std::fs::remove_dir_all(path);
    }

    /// UNOTIFY: never ready at ADD; ready when named by READY or added with REQ_READY; any
    /// id (0, all ones) and any event mask; the cookie comes back untouched.
    fn s5_unotify_any_id_and_event_ready_only_when_named(b) {
        let q = Queue::new(b);
        let ids = [0u64, 1, u64::MAX, 1 << 63, 0x1234_5678_9abc_def0];
        let mut evs = Vec::new();
        for (i, &id) in ids.iter().enumerate() {
            let mut e = user_c(id, 0, !id);
            e.event = [0, 1, KEVENT_MASK_ALL, 0x8000_0000, 42][i];
            evs.push(e);
        }
        q.add_ok(&evs);
        q.expect_no_events();
        std::thread::sleep(Duration::from_millis(10));
        q.expect_no_events();
        q.ready_ids(&ids);
        let want: Vec<Want> = evs.iter().map(|e| Want::of(e).cookie(!e.id.as_u64()).event(e.event)).collect();
        q.expect(&ZERO, &want);
        q.expect_no_events();
        q.add_ok(&[user_c(7, KEVENT_REQ_READY, 70)]);
        q.expect(&ZERO, &[Want::new(KEVENT_UNOTIFY, 7).cookie(70)]);
    }
}
