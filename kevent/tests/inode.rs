//! `Inode` registrations (directory changes).

mod util;

use std::fs::File;
use std::os::fd::AsRawFd;
use std::time::Duration;

use kevent::{EventKind, Inode, InodeEvents, Key, Queue};
use util::{ExpectEvent, expect_events, expect_no_events, temp_dir};

const QUIET: Duration = Duration::from_millis(50);

fn key(fd: &impl AsRawFd) -> Key {
    Key::from_raw(kevent_sys::KEVENT_INODE, fd.as_raw_fd() as u32 as u64)
}

fn has(bits: InodeEvents) -> impl Fn(&kevent::Event) -> bool {
    move |e| matches!(e.kind(), EventKind::Inode { events, .. } if events.contains(bits))
}

#[test]
fn s5_inode_reports_create_and_remove() {
    let q = Queue::new().unwrap();
    let dir = temp_dir("inode");
    let d = File::open(&dir).unwrap();
    let _reg = q
        .add(Inode::new(&d, InodeEvents::CREATE | InodeEvents::REMOVE))
        .unwrap();
    expect_no_events(&q, QUIET);
    std::fs::write(dir.join("a"), b"").unwrap();
    expect_events(
        &q,
        vec![ExpectEvent::with(
            key(&d),
            "CREATE",
            has(InodeEvents::CREATE),
        )],
    );
    expect_no_events(&q, QUIET);
    std::fs::remove_file(dir.join("a")).unwrap();
    expect_events(
        &q,
        vec![ExpectEvent::with(
            key(&d),
            "REMOVE",
            has(InodeEvents::REMOVE),
        )],
    );
    drop(_reg);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn s3_a_regular_file_is_not_a_directory() {
    let q = Queue::new().unwrap();
    let f = File::open("/proc/self/exe").unwrap();
    let added = q.add(Inode::new(&f, InodeEvents::CREATE)).unwrap_err();
    assert_eq!(added.error().raw_os_error(), Some(libc::EINVAL));
}
