//! io_uring readiness, the anchor kevent is measured against (issue 21): a ring set up with
//! the raw `io_uring_setup` / `io_uring_enter` system calls and `mmap` (no liburing), one
//! multishot `IORING_OP_POLL_ADD` per watched descriptor, and completions reaped from the
//! completion (CQ) ring in user memory. `io_uring_enter` is called to submit, and to wait only
//! when the CQ ring is empty: while completions are there, reaping them costs no system call.
//!
//! The kernel may refuse io_uring (no `CONFIG_IO_URING`: `ENOSYS`; seccomp or
//! `kernel.io_uring_disabled`: `EPERM`); [`Uring::probe`] says why, and the benchmarks then
//! report the io_uring rows as refused.
//!
//! The structures and constants are those of Linux's `include/uapi/linux/io_uring.h` (the
//! subset used here; the layouts are the kernel's ABI, stable since 5.1).
//!
//! # Safety
//!
//! The rings are `mmap`ed from the ring fd with the offsets the kernel returned in
//! [`Params`]; they stay mapped until [`Uring`] drops (after which nothing reads them). The
//! kernel writes the CQ tail and the completions, and reads the SQ tail and the submission
//! entries: the shared indices are accessed only as atomics (Acquire loads of what the kernel
//! publishes, Release stores of what this side publishes), the entries through raw pointers,
//! never through references that the kernel's writes could alias.
#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU32, Ordering};

use crate::os;

/// `struct io_sqring_offsets`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
struct SqOffsets {
    head: u32,
    tail: u32,
    ring_mask: u32,
    ring_entries: u32,
    flags: u32,
    dropped: u32,
    array: u32,
    resv1: u32,
    user_addr: u64,
}

/// `struct io_cqring_offsets`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
struct CqOffsets {
    head: u32,
    tail: u32,
    ring_mask: u32,
    ring_entries: u32,
    overflow: u32,
    cqes: u32,
    flags: u32,
    resv1: u32,
    user_addr: u64,
}

/// `struct io_uring_params`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
struct Params {
    sq_entries: u32,
    cq_entries: u32,
    flags: u32,
    sq_thread_cpu: u32,
    sq_thread_idle: u32,
    features: u32,
    wq_fd: u32,
    resv: [u32; 3],
    sq_off: SqOffsets,
    cq_off: CqOffsets,
}

/// `struct io_uring_sqe` (64 bytes; the unions flattened to the members used here).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
struct Sqe {
    opcode: u8,
    flags: u8,
    ioprio: u16,
    fd: i32,
    off: u64,
    /// `addr`: for `POLL_REMOVE`, the `user_data` of the poll to remove.
    addr: u64,
    /// `len`: for `POLL_ADD`, `IORING_POLL_ADD_MULTI`.
    len: u32,
    /// `poll32_events` (little-endian: the mask itself).
    op_flags: u32,
    user_data: u64,
    buf_index: u16,
    personality: u16,
    splice_fd_in: i32,
    addr3: u64,
    pad2: u64,
}

/// `struct io_uring_cqe` (without `IORING_SETUP_CQE32`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
struct Cqe {
    user_data: u64,
    res: i32,
    flags: u32,
}

const IORING_OP_POLL_ADD: u8 = 6;
const IORING_OP_POLL_REMOVE: u8 = 7;
const IORING_POLL_ADD_MULTI: u32 = 1;
const IORING_CQE_F_MORE: u32 = 1 << 1;
const IORING_ENTER_GETEVENTS: u32 = 1;
const IORING_ENTER_EXT_ARG: u32 = 1 << 3;
const IORING_FEAT_EXT_ARG: u32 = 1 << 8;
const IORING_SETUP_CQSIZE: u32 = 1 << 3;
const IORING_FEAT_SINGLE_MMAP: u32 = 1;
const IORING_OFF_SQ_RING: i64 = 0;
const IORING_OFF_CQ_RING: i64 = 0x800_0000;
const IORING_OFF_SQES: i64 = 0x1000_0000;

/// The `user_data` of the completions of `POLL_REMOVE` requests (watched fds are below it).
const REMOVE_TAG: u64 = u64::MAX;

/// `struct io_uring_getevents_arg` (`IORING_ENTER_EXT_ARG`): a wait's timeout.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
struct GeteventsArg {
    sigmask: u64,
    sigmask_sz: u32,
    min_wait_usec: u32,
    /// Address of a `struct __kernel_timespec`.
    ts: u64,
}

/// `struct __kernel_timespec`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
struct KernelTimespec {
    tv_sec: i64,
    tv_nsec: i64,
}

/// One completion handed over by [`Uring::reap_each`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Completion {
    /// The request's `user_data`.
    pub user_data: u64,
    /// Its result: for a poll, the ready mask; negative, an errno.
    pub res: i32,
    /// `IORING_CQE_F_MORE`: the multishot request stays armed. Without it the poll has ended
    /// and must be armed again to keep watching.
    pub more: bool,
}

/// One `mmap`ed region, unmapped on drop.
#[derive(Debug)]
struct Map {
    ptr: *mut u8,
    len: usize,
}

impl Map {
    fn new(fd: RawFd, len: usize, offset: i64) -> io::Result<Map> {
        // SAFETY: a fresh shared mapping of the ring fd at one of the offsets io_uring
        // defines, with the length the kernel's params imply; no existing memory is touched.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd,
                offset,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Map {
            ptr: ptr.cast(),
            len,
        })
    }

    /// The `u32` shared with the kernel at byte offset `off`, as an atomic.
    fn atomic(&self, off: u32) -> &AtomicU32 {
        assert!(off as usize + 4 <= self.len && off % 4 == 0);
        // SAFETY: in bounds and 4-aligned (checked; the mapping is page-aligned); the kernel
        // accesses these indices atomically too, and the mapping outlives `&self`.
        unsafe { &*self.ptr.add(off as usize).cast::<AtomicU32>() }
    }

    /// A plain `u32` the kernel wrote once at setup (masks, sizes) at byte offset `off`.
    fn read_u32(&self, off: u32) -> u32 {
        self.atomic(off).load(Ordering::Relaxed)
    }
}

impl Drop for Map {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly what `Map::new` mapped; nothing refers to it afterwards.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

/// An io_uring instance with multishot poll requests on it.
#[derive(Debug)]
pub struct Uring {
    // Field order: the maps are unmapped before the fd closes (either order is valid).
    sq: Map,
    /// The CQ ring's own mapping (`None` with `IORING_FEAT_SINGLE_MMAP`: it is `sq`'s).
    cq: Option<Map>,
    sqes: Map,
    fd: OwnedFd,
    p: Params,
    /// Submission entries written but not yet submitted.
    pending: u32,
    /// Polls whose multishot ended (no `IORING_CQE_F_MORE`) and that are armed again.
    pub rearmed: u64,
}

/// `io_uring_setup(entries, p)`.
fn setup(entries: u32, p: &mut Params) -> io::Result<OwnedFd> {
    // SAFETY: `p` is a local `io_uring_params` the kernel reads and writes for the call.
    let fd = unsafe { libc::syscall(libc::SYS_io_uring_setup, entries, std::ptr::from_mut(p)) };
    os::owned(fd as RawFd)
}

impl Uring {
    /// Whether this kernel gives this process an io_uring: `Err` says why not (`ENOSYS`: no
    /// `CONFIG_IO_URING`; `EPERM`: seccomp or `kernel.io_uring_disabled`).
    pub fn probe() -> Result<(), String> {
        let mut p = Params::default();
        match setup(2, &mut p) {
            Ok(_) => Ok(()),
            Err(e) => {
                let disabled = std::fs::read_to_string("/proc/sys/kernel/io_uring_disabled")
                    .map_or_else(|_| String::new(), |s| s.trim().to_owned());
                Err(match e.raw_os_error() {
                    Some(libc::ENOSYS) => "refused: io_uring_setup gives ENOSYS \
                         (no CONFIG_IO_URING, or a seccomp filter)"
                        .into(),
                    Some(libc::EPERM) => format!(
                        "refused: io_uring_setup gives EPERM (seccomp, or \
                         kernel.io_uring_disabled = {})",
                        if disabled.is_empty() { "?" } else { &disabled }
                    ),
                    _ => format!("refused: io_uring_setup: {e}"),
                })
            }
        }
    }

    /// A ring of `sq_entries` submission slots and `cq_entries` completion slots.
    pub fn new(sq_entries: u32, cq_entries: u32) -> io::Result<Uring> {
        let mut p = Params {
            flags: IORING_SETUP_CQSIZE,
            cq_entries,
            ..Params::default()
        };
        let fd = setup(sq_entries, &mut p)?;
        let raw = fd.as_raw_fd();
        let sq_len = p.sq_off.array as usize + p.sq_entries as usize * 4;
        let cq_len = p.cq_off.cqes as usize + p.cq_entries as usize * size_of::<Cqe>();
        let (sq, cq) = if p.features & IORING_FEAT_SINGLE_MMAP != 0 {
            (Map::new(raw, sq_len.max(cq_len), IORING_OFF_SQ_RING)?, None)
        } else {
            (
                Map::new(raw, sq_len, IORING_OFF_SQ_RING)?,
                Some(Map::new(raw, cq_len, IORING_OFF_CQ_RING)?),
            )
        };
        let sqes = Map::new(
            raw,
            p.sq_entries as usize * size_of::<Sqe>(),
            IORING_OFF_SQES,
        )?;
        Ok(Uring {
            sq,
            cq,
            sqes,
            fd,
            p,
            pending: 0,
            rearmed: 0,
        })
    }

    fn cq_map(&self) -> &Map {
        self.cq.as_ref().unwrap_or(&self.sq)
    }

    /// Queues one submission entry, submitting what is queued first when the SQ ring is full.
    fn push(&mut self, sqe: Sqe) -> io::Result<()> {
        let o = self.p.sq_off;
        let mask = self.sq.read_u32(o.ring_mask);
        let tail = self.sq.atomic(o.tail).load(Ordering::Relaxed);
        let head = self.sq.atomic(o.head).load(Ordering::Acquire);
        if tail.wrapping_sub(head) >= self.p.sq_entries {
            self.submit(0)?;
        }
        let idx = tail & mask;
        // SAFETY: `idx` < sq_entries: in bounds of the SQE array and of the index array; the
        // kernel reads neither slot before the Release store of the tail below publishes it.
        unsafe {
            self.sqes.ptr.cast::<Sqe>().add(idx as usize).write(sqe);
            self.sq
                .ptr
                .add(o.array as usize)
                .cast::<u32>()
                .add(idx as usize)
                .write(idx);
        }
        self.sq
            .atomic(o.tail)
            .store(tail.wrapping_add(1), Ordering::Release);
        self.pending += 1;
        Ok(())
    }

    /// `io_uring_enter`: submits what is queued and, with `wait > 0`, waits until `wait`
    /// completions are in the CQ ring.
    fn submit(&mut self, wait: u32) -> io::Result<()> {
        let flags = if wait > 0 { IORING_ENTER_GETEVENTS } else { 0 };
        // SAFETY: no argument (null, size 0).
        unsafe { self.enter(wait, flags, std::ptr::null(), 0) }
    }

    /// `io_uring_enter(fd, pending, wait, flags, arg, argsz)`; counts what it submitted.
    /// `EINTR` and `ETIME` (a wait's timeout passed with nothing submitted: the call returns
    /// how many it submitted whenever that is not 0) are not errors.
    ///
    /// # Safety
    ///
    /// `arg` is what `flags` makes the kernel read: null (size 0), or with
    /// `IORING_ENTER_EXT_ARG` a `GeteventsArg` of `argsz` bytes, valid across the call, whose
    /// pointers are too.
    unsafe fn enter(
        &mut self,
        wait: u32,
        flags: u32,
        arg: *const libc::c_void,
        argsz: usize,
    ) -> io::Result<()> {
        // SAFETY: the caller's contract for `arg`; no other argument is a pointer.
        let r = unsafe {
            libc::syscall(
                libc::SYS_io_uring_enter,
                self.fd.as_raw_fd(),
                self.pending,
                wait,
                flags,
                arg,
                argsz,
            )
        };
        if r < 0 {
            let e = io::Error::last_os_error();
            return match e.raw_os_error() {
                Some(libc::EINTR | libc::ETIME) => Ok(()),
                _ => Err(e),
            };
        }
        self.pending -= (r as u32).min(self.pending);
        Ok(())
    }

    /// Queues a multishot `POLL_ADD` of `events` on `fd`, its completions tagged with `fd`.
    pub fn poll_add(&mut self, fd: RawFd, events: u32) -> io::Result<()> {
        self.push(Sqe {
            opcode: IORING_OP_POLL_ADD,
            fd,
            len: IORING_POLL_ADD_MULTI,
            op_flags: events,
            user_data: fd as u64,
            ..Sqe::default()
        })
    }

    /// Queues a multishot `POLL_ADD` of `events` on `fd`, its completions tagged `user_data`
    /// (anything but `u64::MAX`).
    pub fn poll_add_tagged(&mut self, fd: RawFd, events: u32, user_data: u64) -> io::Result<()> {
        debug_assert_ne!(user_data, REMOVE_TAG);
        self.push(Sqe {
            opcode: IORING_OP_POLL_ADD,
            fd,
            len: IORING_POLL_ADD_MULTI,
            op_flags: events,
            user_data,
            ..Sqe::default()
        })
    }

    /// Queues a `POLL_REMOVE` of the poll tagged `fd`.
    pub fn poll_remove(&mut self, fd: RawFd) -> io::Result<()> {
        self.poll_remove_tagged(fd as u64)
    }

    /// Queues a `POLL_REMOVE` of the poll tagged `user_data`.
    pub fn poll_remove_tagged(&mut self, user_data: u64) -> io::Result<()> {
        self.push(Sqe {
            opcode: IORING_OP_POLL_REMOVE,
            fd: -1,
            addr: user_data,
            user_data: REMOVE_TAG,
            ..Sqe::default()
        })
    }

    /// Submission entries queued and not yet submitted.
    pub fn pending(&self) -> u32 {
        self.pending
    }

    /// Removes the polls tagged `fds` (in batches, reaping as it goes) so that none stays
    /// hooked on its descriptor's wait queue once this returns: closing the ring fd would
    /// tear them down asynchronously, while the next mechanism is being timed.
    pub fn remove_all(&mut self, fds: &[RawFd]) -> io::Result<()> {
        let batch = (self.p.cq_entries / 4).max(1) as usize;
        for chunk in fds.chunks(batch) {
            for &fd in chunk {
                self.poll_remove(fd)?;
            }
            self.flush()?;
            self.reap(0, |_, _| ())?;
        }
        Ok(())
    }

    /// Submits everything queued, without waiting.
    pub fn flush(&mut self) -> io::Result<()> {
        while self.pending > 0 {
            self.submit(0)?;
        }
        Ok(())
    }

    /// Hands every completion in the CQ ring to `f` (its `user_data`, `res`) and releases
    /// them; a poll whose multishot ended is armed again (with `events`; 0: not armed
    /// again). No system call.
    /// Returns how many poll completions it handed over.
    pub fn reap(&mut self, events: u32, mut f: impl FnMut(u64, i32)) -> io::Result<u32> {
        let mut rearm = vec![];
        let n = self.reap_each(|c| {
            if !c.more && events != 0 {
                rearm.push(c.user_data as RawFd);
            }
            f(c.user_data, c.res);
        });
        for fd in rearm {
            self.rearmed += 1;
            self.poll_add(fd, events)?;
        }
        Ok(n)
    }

    /// Hands every completion in the CQ ring to `f`, except those of `POLL_REMOVE` requests
    /// and the `-ECANCELED` last completions of removed polls, and releases them with one
    /// Release store of the CQ head. No system call, nothing armed again: `f` sees
    /// [`Completion::more`]. Returns how many it handed over.
    pub fn reap_each(&mut self, mut f: impl FnMut(Completion)) -> u32 {
        let o = self.p.cq_off;
        let cq = self.cq_map();
        let mask = cq.read_u32(o.ring_mask);
        let head = cq.atomic(o.head).load(Ordering::Relaxed);
        // Acquire pairs with the kernel's Release store of the tail after the completions.
        let tail = cq.atomic(o.tail).load(Ordering::Acquire);
        let mut h = head;
        let mut n = 0;
        while h != tail {
            // SAFETY: `h & mask` < cq_entries: in bounds of the CQE array; the kernel does not
            // write this slot again before the head moves past it (the Release store below).
            let c = unsafe {
                cq.ptr
                    .add(o.cqes as usize)
                    .cast::<Cqe>()
                    .add((h & mask) as usize)
                    .read()
            };
            h = h.wrapping_add(1);
            if c.user_data == REMOVE_TAG || c.res == -libc::ECANCELED {
                continue;
            }
            f(Completion {
                user_data: c.user_data,
                res: c.res,
                more: c.flags & IORING_CQE_F_MORE != 0,
            });
            n += 1;
        }
        if h != head {
            cq.atomic(o.head).store(h, Ordering::Release);
        }
        n
    }

    /// Whether this ring takes a timeout on its waits (`IORING_FEAT_EXT_ARG`, Linux 5.11).
    pub fn has_wait_timeout(&self) -> bool {
        self.p.features & IORING_FEAT_EXT_ARG != 0
    }

    /// Submits what is queued and waits until a completion is in the CQ ring or `timeout`
    /// passes (`io_uring_enter` with `IORING_ENTER_GETEVENTS | IORING_ENTER_EXT_ARG`);
    /// returns at once if one is there. A timeout is not an error. Needs
    /// [`Uring::has_wait_timeout`] (else `EINVAL` from the kernel).
    pub fn wait_timeout(&mut self, timeout: std::time::Duration) -> io::Result<()> {
        let ts = KernelTimespec {
            tv_sec: timeout.as_secs() as i64,
            tv_nsec: i64::from(timeout.subsec_nanos()),
        };
        let arg = GeteventsArg {
            ts: (&raw const ts) as u64,
            ..GeteventsArg::default()
        };
        let wait = u32::from(!self.ready());
        // SAFETY: `arg` and the timespec it points to are locals that live across the call;
        // the size passed is `arg`'s.
        unsafe {
            self.enter(
                wait,
                IORING_ENTER_GETEVENTS | IORING_ENTER_EXT_ARG,
                (&raw const arg).cast(),
                size_of::<GeteventsArg>(),
            )
        }
    }

    /// Waits (`io_uring_enter` with `IORING_ENTER_GETEVENTS`) until a completion is in the CQ
    /// ring, submitting whatever is queued on the way; returns at once if one is there.
    pub fn wait(&mut self) -> io::Result<()> {
        let o = self.p.cq_off;
        let cq = self.cq_map();
        if cq.atomic(o.tail).load(Ordering::Acquire) != cq.atomic(o.head).load(Ordering::Relaxed) {
            return Ok(());
        }
        self.submit(1)
    }

    /// Whether the CQ ring holds a completion (one Acquire load; no system call).
    pub fn ready(&self) -> bool {
        let o = self.p.cq_off;
        let cq = self.cq_map();
        cq.atomic(o.tail).load(Ordering::Acquire) != cq.atomic(o.head).load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_are_the_kernels() {
        assert_eq!(size_of::<Params>(), 120);
        assert_eq!(size_of::<Sqe>(), 64);
        assert_eq!(size_of::<Cqe>(), 16);
        assert_eq!(size_of::<GeteventsArg>(), 24);
        assert_eq!(size_of::<KernelTimespec>(), 16);
    }

    /// A small ring and an eventfd to poll, or `None` (said why) where io_uring is refused.
    fn ring_and_eventfd() -> Option<(Uring, OwnedFd)> {
        if let Err(why) = Uring::probe() {
            eprintln!("skipped: io_uring {why}");
            return None;
        }
        Some((Uring::new(8, 64).unwrap(), os::eventfd().unwrap()))
    }

    #[test]
    fn multishot_poll_reports_each_write_without_a_syscall_per_reap() {
        let Some((mut u, e)) = ring_and_eventfd() else {
            return;
        };
        let fd = e.as_raw_fd();
        u.poll_add(fd, libc::POLLIN as u32).unwrap();
        u.flush().unwrap();
        assert!(!u.ready(), "nothing written yet");
        for round in 0..5 {
            let one = 1u64.to_ne_bytes();
            // SAFETY: writes 8 bytes from a local.
            assert_eq!(unsafe { libc::write(fd, one.as_ptr().cast(), 8) }, 8);
            u.wait().unwrap();
            let mut seen = vec![];
            let got = u
                .reap(libc::POLLIN as u32, |d, res| seen.push((d, res)))
                .unwrap();
            assert_eq!(got, 1, "round {round}");
            assert_eq!(seen[0].0, fd as u64);
            assert!(seen[0].1 & libc::POLLIN as i32 != 0);
            let mut buf = [0u8; 8];
            // SAFETY: reads 8 bytes into a local.
            assert_eq!(unsafe { libc::read(fd, buf.as_mut_ptr().cast(), 8) }, 8);
        }
        u.poll_remove(fd).unwrap();
        u.flush().unwrap();
    }

    #[test]
    fn tagged_polls_reap_each_and_a_wait_that_times_out() {
        let Some((mut u, e)) = ring_and_eventfd() else {
            return;
        };
        if !u.has_wait_timeout() {
            eprintln!("skipped: io_uring without IORING_FEAT_EXT_ARG");
            return;
        }
        let fd = e.as_raw_fd();
        let tag = (7u64 << 32) | fd as u64;
        u.poll_add_tagged(fd, libc::POLLIN as u32, tag).unwrap();
        // Nothing ready: the wait submits the poll and returns after its timeout.
        u.wait_timeout(std::time::Duration::from_millis(10))
            .unwrap();
        assert_eq!(u.pending(), 0, "the wait submitted the poll");
        assert_eq!(u.reap_each(|_| ()), 0);
        let one = 1u64.to_ne_bytes();
        // SAFETY: writes 8 bytes from a local.
        assert_eq!(unsafe { libc::write(fd, one.as_ptr().cast(), 8) }, 8);
        u.wait_timeout(std::time::Duration::from_secs(5)).unwrap();
        let mut seen = vec![];
        assert_eq!(u.reap_each(|c| seen.push(c)), 1);
        assert_eq!(seen[0].user_data, tag);
        assert!(seen[0].more, "a multishot poll stays armed");
        assert!(seen[0].res & libc::POLLIN as i32 != 0);
        // Removed: its -ECANCELED completion and the remove's own are not handed over.
        u.poll_remove_tagged(tag).unwrap();
        u.flush().unwrap();
        u.wait_timeout(std::time::Duration::from_millis(10))
            .unwrap();
        assert_eq!(u.reap_each(|c| panic!("{c:?}")), 0);
    }
}
