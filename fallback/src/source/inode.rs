//! INODE kevents: `id.raw[0]` is the fd of a directory; CREATE and REMOVE of its entries.
//!
//! Every INODE kevent of a queue shares the queue's one inotify fd; a kevent has one watch
//! descriptor, its directory's. A queue watches a directory once (**P29**: a second kevent
//! on it through another fd is `-EEXIST`, `super::same_target`), so a watch serves one
//! kevent. `ret_data[0]` holds the `KEVENT_INODE_*` bits seen since the last
//! delivery; the directory itself going away is BROKEN (`-ENOENT`). The queue-wide part,
//! [`Watches`] (the inotify fd, which kevent each watch and each directory has), is this
//! file's too, with
//! its harvest step ([`Watches::read`]).

use std::collections::HashMap;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use kevent_sys::{Errno, KEVENT_INODE_CREATE, KEVENT_INODE_REMOVE, ukevent};

use super::{Epoll, Prepared, Source};
use crate::kevent::{Kevent, Registered};
use crate::queue::Kevents;
use crate::rules::Report;
use crate::{sys, token};

/// The inotify events every INODE watch asks for (one mask for all, since a second
/// `inotify_add_watch` on the same directory replaces the first one's mask).
const WATCH_MASK: u32 = libc::IN_CREATE
    | libc::IN_MOVED_TO
    | libc::IN_DELETE
    | libc::IN_MOVED_FROM
    | libc::IN_DELETE_SELF
    | libc::IN_ONLYDIR;

/// `revents` bit of an INODE kevent meaning the watched directory is gone.
const GONE: u32 = 1 << 31;

/// An INODE kevent's source: the identity (`st_dev`, `st_ino`) of the directory its fd
/// named at ADD; a queue watches a directory once (**P29**). Its inotify watch is found
/// through [`Watches`] (kept out of here: the entry of every kevent stays small).
#[derive(Debug)]
pub(crate) struct Inode {
    dir: (u64, u64),
}

/// The INODE kevents of one queue: the inotify fd (made at the first one), the kevents of
/// each watch descriptor, and the kevent watching each directory with its watch descriptor
/// (**P29**: one per directory).
#[derive(Debug)]
pub(crate) struct Watches {
    inotify: Option<OwnedFd>,
    by_wd: HashMap<i32, Vec<u32>>,
    by_dir: HashMap<(u64, u64), (u32, i32)>,
}

/// Checks that `raw[0]` is an open directory.
pub(super) fn prepare(uk: &ukevent) -> Result<Prepared, Errno> {
    let fd = uk.id.raw()[0] as i32;
    let file = sys::file_id(fd)?;
    if !file.is_dir() {
        return Err(Errno::EINVAL);
    }
    Ok(Prepared {
        source: Source::Inode(Inode {
            dir: file.identity(),
        }),
        ready_now: None,
    })
}

/// The `KEVENT_INODE_*` bits an inotify mask means.
fn bits_of(mask: u32) -> u32 {
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
fn gone(mask: u32) -> bool {
    mask & (libc::IN_DELETE_SELF | libc::IN_IGNORED | libc::IN_UNMOUNT) != 0
}

impl Inode {
    /// Watches the directory through the queue's inotify fd (made, and registered in the
    /// queue's epoll, on the queue's first INODE kevent).
    pub(super) fn arm(
        &mut self,
        uk: &Registered,
        slot: u32,
        watches: &mut Watches,
        ep: Epoll,
    ) -> Result<(), Errno> {
        let dir = uk.id0() as RawFd;
        let ino = match &watches.inotify {
            Some(fd) => fd.as_raw_fd(),
            None => {
                let fd = sys::inotify_init()?;
                ep.add_internal(fd.as_raw_fd(), libc::EPOLLIN as u32, token::INODE)?;
                let raw = fd.as_raw_fd();
                watches.inotify = Some(fd);
                raw
            }
        };
        let w = sys::inotify_watch_fd(ino, dir, WATCH_MASK)?;
        watches.by_wd.entry(w).or_default().push(slot);
        watches.by_dir.insert(self.dir, (slot, w));
        Ok(())
    }

    /// Drops the kevent from its watch, and the watch once no kevent uses it. Nothing to do
    /// if arming failed, or the watch is already gone (`IN_IGNORED`).
    pub(super) fn disarm(&self, slot: u32, watches: &mut Watches) {
        let wd = match watches.by_dir.get(&self.dir) {
            Some(&(owner, wd)) if owner == slot => wd,
            _ => return,
        };
        watches.by_dir.remove(&self.dir);
        if let Some(list) = watches.by_wd.get_mut(&wd) {
            list.retain(|&s| s != slot);
            if list.is_empty() {
                watches.by_wd.remove(&wd);
                if let Some(ino) = &watches.inotify {
                    sys::inotify_unwatch(ino.as_raw_fd(), wd);
                }
            }
        }
    }

    /// What an inode delivery reports: the entry bits seen, or BROKEN once the directory is
    /// gone and nothing else was seen.
    pub(super) fn report(&self, kev: &Kevent) -> Report {
        let bits = kev.revents & !GONE;
        if kev.revents & GONE != 0 && bits == 0 {
            Report::Broken(Errno::ENOENT)
        } else {
            Report::Ready([bits, 0])
        }
    }
}

impl Watches {
    pub(super) fn new() -> Watches {
        Watches {
            inotify: None,
            by_wd: HashMap::new(),
            by_dir: HashMap::new(),
        }
    }

    /// **P29**: the kevent of this queue that watches the directory of `inode`, if any. A
    /// directory that went away is watched by nobody, even if its identity now names a new
    /// directory: on a hit, the inotify fd is read first (as a harvest would), so a watch the
    /// kernel already dropped (`IN_IGNORED`) no longer counts.
    pub(super) fn watcher(&mut self, inode: &Inode, kevents: &mut Kevents) -> Option<u32> {
        if !self.by_dir.contains_key(&inode.dir) {
            return None;
        }
        self.read(kevents);
        self.by_dir.get(&inode.dir).map(|&(slot, _)| slot)
    }

    /// Whether `fd` is the inotify fd.
    pub(super) fn owns(&self, fd: RawFd) -> bool {
        self.inotify.as_ref().is_some_and(|f| f.as_raw_fd() == fd)
    }

    /// The harvest step: the inotify fd is readable. Routes each record to the INODE kevents
    /// of its watch.
    pub(super) fn read(&mut self, kevents: &mut Kevents) {
        let Some(ino) = self.inotify.as_ref().map(|f| f.as_raw_fd()) else {
            return;
        };
        #[repr(C, align(8))]
        struct Buf([u8; 4096]);
        let mut buf = Buf([0; 4096]);
        const HEADER: usize = std::mem::size_of::<libc::inotify_event>();
        loop {
            let n = sys::inotify_read(ino, &mut buf.0);
            if n == 0 {
                break;
            }
            let mut off = 0;
            while off + HEADER <= n {
                let rec = &buf.0[off..off + HEADER];
                let wd = i32::from_ne_bytes(rec[0..4].try_into().unwrap_or([0; 4]));
                let mask = u32::from_ne_bytes(rec[4..8].try_into().unwrap_or([0; 4]));
                let len = u32::from_ne_bytes(rec[12..16].try_into().unwrap_or([0; 4])) as usize;
                off += HEADER + len;
                let bits = bits_of(mask);
                let gone = gone(mask);
                for &slot in self.by_wd.get(&wd).map_or(&[][..], Vec::as_slice) {
                    let Some(kev) = kevents.reg.get_mut(slot) else {
                        continue;
                    };
                    let mine = bits & kev.uk.event;
                    if mine == 0 && !gone {
                        continue;
                    }
                    kev.revents |= mine | if gone { GONE } else { 0 };
                    kev.pending = kev.pending.saturating_add(1);
                    kevents.queue(slot);
                }
                if mask & libc::IN_IGNORED != 0 {
                    self.by_wd.remove(&wd);
                    self.by_dir.retain(|_, &mut (_, w)| w != wd);
                }
            }
        }
    }
}
