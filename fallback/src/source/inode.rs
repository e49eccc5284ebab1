//! INODE kevents: `id.raw[0]` is the fd of a directory; CREATE and REMOVE of its entries.
//!
//! Every INODE kevent of a queue shares the queue's one inotify fd; a kevent holds one
//! watch descriptor (inotify returns the same descriptor for the same directory, so several
//! kevents may share it). `ret_data[0]` holds the `KEVENT_INODE_*` bits seen since the last
//! delivery; the directory itself going away is BROKEN (`-ENOENT`).

use kevent_sys::{Errno, KEVENT_INODE_CREATE, KEVENT_INODE_REMOVE};

use super::Source;
use crate::rules::Report;
use crate::sys;

/// The inotify events every INODE watch asks for (one mask for all, since a second
/// `inotify_add_watch` on the same directory replaces the first one's mask).
pub(crate) const WATCH_MASK: u32 = libc::IN_CREATE
    | libc::IN_MOVED_TO
    | libc::IN_DELETE
    | libc::IN_MOVED_FROM
    | libc::IN_DELETE_SELF
    | libc::IN_ONLYDIR;

/// Checks that `raw[0]` is an open directory.
pub(crate) fn prepare(id: [u32; 2]) -> Result<Source, Errno> {
    let fd = id[0] as i32;
    let file = sys::file_id(fd)?;
    if !file.is_dir() {
        return Err(Errno::EINVAL);
    }
    Ok(Source::Inode { wd: -1 })
}

/// The `KEVENT_INODE_*` bits an inotify mask means.
pub(crate) fn bits_of(mask: u32) -> u32 {
    let mut bits = 0;
    if mask & (libc::IN_CREATE | libc::IN_MOVED_TO) != 0 {
        bits |= KEVENT_INODE_CREATE;
    }
    if mask & (libc::IN_DELETE | libc::IN_MOVED_FROM) != 0 {
        bits |= KEVENT_INODE_REMOVE;
    }
    bits
}

/// Whether an inotify mask says the watch is gone (directory deleted or unmounted).
pub(crate) fn gone(mask: u32) -> bool {
    mask & (libc::IN_DELETE_SELF | libc::IN_IGNORED | libc::IN_UNMOUNT) != 0
}

/// What an inode delivery reports.
pub(crate) fn report(bits: u32, gone: bool) -> Report {
    if gone && bits == 0 {
        Report::Broken(Errno::ENOENT)
    } else {
        Report::Ready([bits, 0])
    }
}
