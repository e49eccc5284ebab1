//! The last path: a per-thread nonblocking pipe (`write(2)` from one address, `read(2)` into
//! the other, the kernel checking both), whose fds sit above the engine's internal fd floor.

use std::cell::RefCell;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use kevent_sys::Errno;

use super::{CHUNK, Dir};

/// Moves one of the library's own fds to the lowest free number at or above half the soft
/// `RLIMIT_NOFILE` (at most 1024), close-on-exec: the same rule as the fallback engine's
/// internal fds, so that it never keeps a number the program just closed. Where nothing is
/// free there it stays where it is.
fn above_floor(fd: OwnedFd) -> OwnedFd {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a live local the call writes.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return fd;
    }
    let floor = (lim.rlim_cur / 2).min(1024) as libc::c_int;
    if floor < 3 || fd.as_raw_fd() >= floor {
        return fd;
    }
    // SAFETY: F_DUPFD_CLOEXEC takes integers; it duplicates our own open fd.
    let high = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, floor) };
    if high < 0 {
        return fd;
    }
    // SAFETY: `high` was just returned by fcntl: a new fd nobody else owns. `fd` (the low
    // number) is closed when it is dropped here.
    unsafe { OwnedFd::from_raw_fd(high) }
}

/// A nonblocking pipe: bytes written from one address are read into another, and the kernel
/// checks both.
#[derive(Debug)]
struct Pipe {
    r: OwnedFd,
    w: OwnedFd,
}

impl Pipe {
    /// A new pipe whose two ends sit above the internal fd floor ([`above_floor`]).
    fn new() -> Result<Pipe, Errno> {
        let mut fds = [-1; 2];
        // SAFETY: pipe2 writes two fds into `fds`, a local array of two ints.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) } < 0 {
            return Err(Errno::last());
        }
        // SAFETY: pipe2 succeeded, so both fds are new and owned by nobody else.
        let (r, w) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        Ok(Pipe {
            r: above_floor(r),
            w: above_floor(w),
        })
    }

    /// `write(w, addr, len)`: the kernel reads `addr` (EFAULT if it cannot).
    fn write(&self, addr: *const u8, len: usize) -> Result<usize, Errno> {
        // SAFETY: write(2) only reads `addr`, and the kernel checks it.
        let n = unsafe { libc::write(self.w.as_raw_fd(), addr.cast(), len) };
        if n < 0 {
            Err(Errno::last())
        } else {
            Ok(n as usize)
        }
    }

    /// `read(r, addr, len)`: the kernel writes `addr` (EFAULT if it cannot).
    fn read(&self, addr: *mut u8, len: usize) -> Result<usize, Errno> {
        // SAFETY: read(2) writes at most `len` bytes at `addr`, and the kernel checks it; local
        // addresses passed here are valid for `len` bytes.
        let n = unsafe { libc::read(self.r.as_raw_fd(), addr.cast(), len) };
        if n < 0 {
            Err(Errno::last())
        } else {
            Ok(n as usize)
        }
    }

    /// Empties the pipe after a failed copy.
    fn drain(&self) {
        let mut scratch = [0u8; 512];
        while matches!(self.read(scratch.as_mut_ptr(), scratch.len()), Ok(n) if n > 0) {}
    }
}

thread_local! {
    static PIPE: RefCell<Option<Pipe>> = const { RefCell::new(None) };
}

/// The pipe path: per chunk, one `write` and one `read`.
///
/// # Safety
///
/// As [`copy`](super::copy).
pub(super) unsafe fn pipe_copy(
    dir: Dir,
    local: *mut u8,
    user: usize,
    len: usize,
) -> Result<(), Errno> {
    let run = |p: &Pipe| -> Result<(), Errno> {
        let mut done = 0;
        while done < len {
            let chunk = (len - done).min(CHUNK);
            let l = local.wrapping_add(done);
            let u: *mut u8 = std::ptr::without_provenance_mut(user + done);
            let (src, dst) = match dir {
                Dir::FromUser => (u.cast_const(), l),
                Dir::ToUser => (l.cast_const(), u),
            };
            // An empty pipe always takes one page, so a good `src` is written whole.
            let wrote = match p.write(src, chunk) {
                Ok(n) => n,
                Err(_) => return Err(Errno::EFAULT),
            };
            let read = p.read(dst, wrote);
            if wrote < chunk || read != Ok(wrote) {
                p.drain();
                return Err(Errno::EFAULT);
            }
            done += chunk;
        }
        Ok(())
    };
    // A per-thread pipe; a fresh one when it is busy (a signal handler interrupted a copy) or
    // gone (thread teardown).
    let cached = PIPE.try_with(|cell| {
        let mut slot = cell.try_borrow_mut().ok()?;
        if slot.is_none() {
            *slot = Pipe::new().ok();
        }
        slot.as_ref().map(&run)
    });
    match cached {
        Ok(Some(r)) => r,
        _ => run(&Pipe::new()?),
    }
}
