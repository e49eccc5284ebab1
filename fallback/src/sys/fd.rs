//! Facts about fds: where the engine's own fds go (the internal fd floor), what a caller's fd
//! is (`fstat`), whether it is ready (`poll`), its socket error and status flags.

use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use kevent_sys::Errno;

use super::{check, owned};

/// The lowest number the engine's own fds may take: half the soft `RLIMIT_NOFILE`, at most
/// 1024 (so the fd table grows by at most 8 KiB for them); `None` when that is below 3.
pub(crate) fn internal_fd_floor() -> Option<RawFd> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a live local the call writes.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return None;
    }
    let floor = (lim.rlim_cur / 2).min(1024) as RawFd;
    (floor >= 3).then_some(floor)
}

/// Moves one of the engine's own fds (never the queue fd the caller gets) to the lowest free
/// number at or above [`internal_fd_floor`], close-on-exec.
///
/// The kernel hands out the lowest free number, which is the one the program closed last: an
/// internal fd created during a call could otherwise take a number the program just closed
/// and still holds on to (a `dup` of a queue it closed, a socket it is about to re-ADD), and
/// the program's next call on that number would meet the engine's eventfd or timerfd instead
/// of `EBADF`. Above the floor only a program that uses more than half its fd limit, or picks
/// high numbers itself, can meet them. If nothing is free there (or the floor is below 3),
/// the fd stays where the kernel put it.
pub(crate) fn above_floor(fd: OwnedFd) -> OwnedFd {
    let Some(floor) = internal_fd_floor() else {
        return fd;
    };
    if fd.as_raw_fd() >= floor {
        return fd;
    }
    // SAFETY: F_DUPFD_CLOEXEC takes integers; it duplicates our own open fd.
    let moved = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, floor) };
    match owned(moved) {
        // `fd` (the low number) is closed when dropped here.
        Ok(high) => high,
        Err(_) => fd,
    }
}

/// What an fd is, from `fstat`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FileId {
    /// `st_mode & S_IFMT`.
    pub(crate) kind: u32,
    /// `st_dev`.
    pub(crate) dev: u64,
    /// `st_ino`.
    pub(crate) ino: u64,
}

impl FileId {
    pub(crate) fn is_socket(&self) -> bool {
        self.kind == libc::S_IFSOCK
    }
    pub(crate) fn is_fifo(&self) -> bool {
        self.kind == libc::S_IFIFO
    }
    pub(crate) fn is_dir(&self) -> bool {
        self.kind == libc::S_IFDIR
    }
    /// What names the file (not its kind), as a registration keeps it for **D10**.
    pub(crate) fn identity(&self) -> (u64, u64) {
        (self.dev, self.ino)
    }
}

/// `fstat(fd)` reduced to what the engine needs.
pub(crate) fn file_id(fd: RawFd) -> Result<FileId, Errno> {
    if fd < 0 {
        return Err(Errno::EBADF);
    }
    let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: `st` is valid for writes of one `struct stat`.
    check(unsafe { libc::fstat(fd, st.as_mut_ptr()) })?;
    // SAFETY: fstat succeeded, so it initialised `st`.
    let st = unsafe { st.assume_init() };
    Ok(FileId {
        kind: st.st_mode & libc::S_IFMT,
        dev: st.st_dev,
        ino: st.st_ino,
    })
}

/// Non-blocking `poll` of one fd for `events`; returns revents (POLLNVAL when closed).
pub(crate) fn poll_now(fd: RawFd, events: i16) -> i16 {
    let mut p = libc::pollfd {
        fd,
        events,
        revents: 0,
    };
    // SAFETY: `p` is one valid pollfd on our stack.
    let n = unsafe { libc::poll(&mut p, 1, 0) };
    if n <= 0 { 0 } else { p.revents }
}

/// Sleeps until `fd` is readable or `timeout_ns` passed, with the signal mask `sigmask`
/// (`None`: the thread's); `true` when a signal handler ended it (`EINTR`).
pub(crate) fn nap_until_readable(
    fd: RawFd,
    timeout_ns: u64,
    sigmask: Option<&libc::sigset_t>,
) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    let ts = crate::timer::ns_to_timespec(timeout_ns);
    let mask = sigmask.map_or(std::ptr::null(), |m| m as *const libc::sigset_t);
    // SAFETY: `p` is one valid pollfd on our stack; `ts` and the mask (null or borrowed) live
    // across the call and are only read.
    let r = unsafe { libc::ppoll(&mut p, 1, &ts, mask) };
    r < 0 && Errno::last() == Errno::EINTR
}

/// The pending error of a socket (`SO_ERROR`), or `None` when it has none or is no socket.
pub(crate) fn socket_error(fd: RawFd) -> Option<Errno> {
    let mut err: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `err` and `len` are valid for writes and `len` holds the size of `err`.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_ERROR,
            (&mut err as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    if r == 0 { Errno::from_raw(err) } else { None }
}

/// `fcntl(fd, F_GETFL)`.
pub(crate) fn status_flags(fd: RawFd) -> Result<libc::c_int, Errno> {
    // SAFETY: no pointer arguments.
    check(unsafe { libc::fcntl(fd, libc::F_GETFL) })
}
