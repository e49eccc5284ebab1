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
    /// REMOVE-only kevent does not report creations.
    fn s5_inode_event_mask_filters(b) {
        let q = Queue::new(b);
        let path = temp_dir("inodemask");
        let d1 = std::fs::File::open(&path).unwrap();
        let d2 = std::fs::File::open(&path).unwrap();
        let create = inode(&d1, KEVENT_INODE_CREATE, 0);
        let remove = inode(&d2, KEVENT_INODE_REMOVE, 0);
        q.add_ok(&[create, remove]);
        std::fs::write(path.join("a"), b"x").unwrap();
        q.expect_within(Duration::from_secs(5), &[Want::of(&create)]);
        std::fs::remove_file(path.join("a")).unwrap();
        q.expect_within(Duration::from_secs(5), &[Want::of(&remove)]);
        std::thread::sleep(Duration::from_millis(20));
        q.expect_no_events();
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
