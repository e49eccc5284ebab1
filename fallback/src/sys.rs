//! The engine's system calls: epoll, eventfd, timerfd, inotify and the fd checks.
//!
//! Each wrapper is a small safe fn returning `Result<_, Errno>` (mio's `syscall!` shape); the
//! only pointers handed to the kernel are references or slices that live across the call.
//! Signal-specific calls live in `signal::dispatch`, whose handler needs them in signal
//! context.
//!
//! # epoll through raw system calls
//!
//! `epoll_create1`, `epoll_ctl` and `epoll_wait` go to the kernel with `syscall(2)`, never
//! through libc's exported wrappers (decision P25): `libkevent-epoll.so` interposes those
//! symbols to turn a program's epoll instances into kevent queues, and on the fallback
//! backend the engine inside it *is* a user of epoll. Through the wrappers its own calls would
//! land in the shim again (an endless recursion, or queues inside queues); as raw system
//! calls they reach the kernel whatever the process preloads. The wrappers add nothing the
//! engine needs: glibc's `epoll_wait` is `epoll_pwait` with no signal mask, which is what
//! [`epoll_wait`] calls, and its pthread cancellation point is not one the engine offers
//! (a kevent wait is not a cancellation point either).
//!
//! # Safety
//!
//! Every `unsafe` block below is a libc call whose pointer arguments are derived from Rust
//! references or slices valid for the duration of the call, and whose fd arguments are plain
//! integers (the kernel validates them; a wrong fd yields an error, never memory unsafety).
#![allow(unsafe_code)]

use std::mem::MaybeUninit;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::AtomicU8;

use kevent_sys::Errno;

/// Turns libc's `-1` sentinel into `Err(errno)`.
fn check(ret: libc::c_int) -> Result<libc::c_int, Errno> {
    if ret < 0 { Err(Errno::last()) } else { Ok(ret) }
}

/// Adopts a freshly created fd.
fn owned(fd: libc::c_int) -> Result<OwnedFd, Errno> {
    let fd = check(fd)?;
    // SAFETY: `fd` was just returned by a creating syscall (epoll_create1, eventfd,
    // timerfd_create, inotify_init1): it is open and nobody else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

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

/// `epoll_create1(EPOLL_CLOEXEC)`: a new queue fd. The first one also probes `epoll_pwait2`
/// (see [`epoll_wait`]).
pub(crate) fn epoll_create() -> Result<OwnedFd, Errno> {
    // SAFETY: no pointer arguments.
    let ep = owned(
        unsafe { libc::syscall(libc::SYS_epoll_create1, libc::EPOLL_CLOEXEC) } as libc::c_int,
    )?;
    if PWAIT2.load(std::sync::atomic::Ordering::Relaxed) == PWAIT2_UNKNOWN {
        probe_epoll_pwait2(ep.as_raw_fd());
    }
    Ok(ep)
}

/// `epoll_ctl(epfd, op, fd, {events, token})`.
pub(crate) fn epoll_ctl(
    epfd: RawFd,
    op: libc::c_int,
    fd: RawFd,
    events: u32,
    token: u64,
) -> Result<(), Errno> {
    let mut ev = libc::epoll_event { events, u64: token };
    // SAFETY: `ev` is a valid epoll_event on our stack for the duration of the call.
    check(unsafe { raw_epoll_ctl(epfd, op, fd, &mut ev) }).map(drop)
}

/// `epoll_ctl(2)` as a raw system call (decision P25: never libc's interposable wrapper).
/// Async-signal-safe.
///
/// # Safety
///
/// `ev` must be valid for reads of one `epoll_event` (it may be null for
/// `EPOLL_CTL_DEL`).
pub(crate) unsafe fn raw_epoll_ctl(
    epfd: RawFd,
    op: libc::c_int,
    fd: RawFd,
    ev: *mut libc::epoll_event,
) -> libc::c_int {
    // SAFETY: the caller guarantees `ev`; the other arguments are integers.
    unsafe { libc::syscall(libc::SYS_epoll_ctl, epfd, op, fd, ev) as libc::c_int }
}

/// `epoll_pwait2` (Linux 5.11) gives waits nanosecond precision; it is optional. Unknown until
/// the first queue is created, then usable or not for the rest of the process.
static PWAIT2: AtomicU8 = AtomicU8::new(PWAIT2_UNKNOWN);
const PWAIT2_UNKNOWN: u8 = 0;
const PWAIT2_YES: u8 = 1;
const PWAIT2_NO: u8 = 2;

/// Probes `epoll_pwait2` once, on a fresh epoll that holds nothing: a zero timeout must return
/// 0 events. Any other answer (`ENOSYS` on an old kernel, `EPERM` or any other errno from a
/// seccomp policy, a count) means: never use it, wait with `epoll_wait` (millisecond
/// timeouts, rounded up).
fn probe_epoll_pwait2(empty_epoll: RawFd) {
    let mut ev = MaybeUninit::<libc::epoll_event>::uninit();
    let zero = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ev` is valid for writes of one epoll_event; `zero` lives across the call; the
    // sigmask is null (none).
    let r = unsafe {
        libc::syscall(
            libc::SYS_epoll_pwait2,
            empty_epoll,
            ev.as_mut_ptr(),
            1,
            &zero as *const libc::timespec,
            std::ptr::null::<libc::sigset_t>(),
            0usize,
        )
    };
    let verdict = if r == 0 { PWAIT2_YES } else { PWAIT2_NO };
    PWAIT2.store(verdict, std::sync::atomic::Ordering::Relaxed);
}

/// Waits for events on `epfd` for at most `timeout_ns` (0: do not block) and returns the
/// initialised prefix of `buf`. `EINTR` is reported as zero events (a wait interrupted by a
/// signal handler returns what is ready, spec section 3).
///
/// Blocking waits use `epoll_pwait2` for nanosecond precision when the probe found it usable;
/// otherwise `epoll_wait` with the timeout rounded *up* to whole milliseconds (never early).
/// If `epoll_pwait2` fails where `epoll_wait` then succeeds (a seccomp filter installed after
/// the probe), it is never used again.
pub(crate) fn epoll_wait(
    epfd: RawFd,
    buf: &mut [MaybeUninit<libc::epoll_event>],
    timeout_ns: u64,
) -> Result<&[libc::epoll_event], Errno> {
    use std::sync::atomic::Ordering::Relaxed;
    let max = buf.len().min(libc::c_int::MAX as usize) as libc::c_int;
    let ptr = buf.as_mut_ptr().cast::<libc::epoll_event>();
    let plain = |ms: libc::c_int| {
        // SAFETY: `ptr` is valid for writes of `max` epoll_events (the slice's length); the
        // sigmask is null (none), which makes `epoll_pwait` the plain `epoll_wait` (P25: a
        // raw system call, not libc's interposable wrapper).
        unsafe {
            libc::syscall(
                libc::SYS_epoll_pwait,
                epfd,
                ptr,
                max,
                ms,
                std::ptr::null::<libc::sigset_t>(),
                0usize,
            ) as libc::c_int
        }
    };
    let ret = if timeout_ns == 0 {
        plain(0)
    } else if PWAIT2.load(Relaxed) == PWAIT2_YES {
        let ts = crate::timer::ns_to_timespec(timeout_ns);
        // SAFETY: `ptr` as above; `ts` lives across the call; the sigmask is null (none).
        let r = unsafe {
            libc::syscall(
                libc::SYS_epoll_pwait2,
                epfd,
                ptr,
                max,
                &ts as *const libc::timespec,
                std::ptr::null::<libc::sigset_t>(),
                0usize,
            )
        } as libc::c_int;
        if r < 0 && Errno::last() != Errno::EINTR {
            // Real errors (EBADF, EINVAL: the queue fd) are epoll_wait's too; anything else is
            // the syscall being refused. Ask epoll_wait without blocking: if that works, the
            // failure was epoll_pwait2's own, and what it returns (possibly nothing, which
            // the waiting loop treats as an early wake-up) is this wait's result.
            let e = Errno::last();
            let retry = plain(0);
            if retry >= 0 {
                PWAIT2.store(PWAIT2_NO, Relaxed);
                retry
            } else {
                // SAFETY: restores the errno epoll_pwait2 set, for `check` below.
                unsafe { *libc::__errno_location() = e.raw() };
                r
            }
        } else {
            r
        }
    } else {
        plain(timeout_ns.div_ceil(1_000_000).min(libc::c_int::MAX as u64) as libc::c_int)
    };
    let n = match check(ret) {
        Ok(n) => n as usize,
        Err(Errno::EINTR) => 0,
        Err(e) => return Err(e),
    };
    // SAFETY: the kernel initialised the first `n <= max` entries.
    Ok(unsafe { std::slice::from_raw_parts(ptr, n) })
}

/// `eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)`, above the internal fd floor.
pub(crate) fn eventfd() -> Result<OwnedFd, Errno> {
    // SAFETY: no pointer arguments.
    owned(unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) }).map(above_floor)
}

/// Adds one to an eventfd counter (it becomes readable).
pub(crate) fn eventfd_signal(fd: RawFd) {
    let one: u64 = 1;
    // SAFETY: writes 8 bytes from `one`, which lives across the call. A full counter
    // (EAGAIN) is already readable, which is all a signal needs.
    unsafe { libc::write(fd, (&one as *const u64).cast(), 8) };
}

/// Resets an eventfd counter to zero (it stops being readable).
pub(crate) fn eventfd_drain(fd: RawFd) {
    let mut v: u64 = 0;
    // SAFETY: reads at most 8 bytes into `v`. EAGAIN (already zero) is fine.
    unsafe { libc::read(fd, (&mut v as *mut u64).cast(), 8) };
}

/// `timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK)`, above the internal fd floor.
pub(crate) fn timerfd_create() -> Result<OwnedFd, Errno> {
    // SAFETY: no pointer arguments.
    owned(unsafe {
        libc::timerfd_create(
            libc::CLOCK_MONOTONIC,
            libc::TFD_CLOEXEC | libc::TFD_NONBLOCK,
        )
    })
    .map(above_floor)
}

/// Arms a timerfd to fire once at the absolute CLOCK_MONOTONIC time `deadline_ns`, or
/// disarms it (`None`).
pub(crate) fn timerfd_arm(fd: RawFd, deadline_ns: Option<u64>) -> Result<(), Errno> {
    let value = match deadline_ns {
        // A zero it_value disarms; the earliest valid absolute time is 1 ns.
        Some(ns) => crate::timer::ns_to_timespec(ns.max(1)),
        None => libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        },
    };
    let spec = libc::itimerspec {
        it_interval: libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        },
        it_value: value,
    };
    // SAFETY: `spec` lives across the call; the old-value pointer is null (not wanted).
    check(unsafe {
        libc::timerfd_settime(fd, libc::TFD_TIMER_ABSTIME, &spec, std::ptr::null_mut())
    })
    .map(drop)
}

/// Reads (and so resets) a timerfd's expiration count; 0 if it had not fired.
pub(crate) fn timerfd_drain(fd: RawFd) -> u64 {
    let mut v: u64 = 0;
    // SAFETY: reads at most 8 bytes into `v`.
    unsafe { libc::read(fd, (&mut v as *mut u64).cast(), 8) };
    v
}

/// `inotify_init1(IN_CLOEXEC | IN_NONBLOCK)`, above the internal fd floor.
pub(crate) fn inotify_init() -> Result<OwnedFd, Errno> {
    // SAFETY: no pointer arguments.
    owned(unsafe { libc::inotify_init1(libc::IN_CLOEXEC | libc::IN_NONBLOCK) }).map(above_floor)
}

/// Watches the directory open as `dir_fd` through `/proc/self/fd/N`; returns the watch
/// descriptor.
pub(crate) fn inotify_watch_fd(inotify: RawFd, dir_fd: RawFd, mask: u32) -> Result<i32, Errno> {
    let path = format!("/proc/self/fd/{dir_fd}\0");
    // SAFETY: `path` is a NUL-terminated string that lives across the call.
    check(unsafe { libc::inotify_add_watch(inotify, path.as_ptr().cast(), mask) })
}

/// Removes an inotify watch (errors are ignored: the watch may already be gone).
pub(crate) fn inotify_unwatch(inotify: RawFd, wd: i32) {
    // SAFETY: no pointer arguments.
    unsafe { libc::inotify_rm_watch(inotify, wd) };
}

/// Reads pending inotify records into `buf`; returns the number of bytes (0 when none).
pub(crate) fn inotify_read(inotify: RawFd, buf: &mut [u8]) -> usize {
    // SAFETY: `buf` is valid for writes of `buf.len()` bytes.
    let n = unsafe { libc::read(inotify, buf.as_mut_ptr().cast(), buf.len()) };
    if n < 0 { 0 } else { n as usize }
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
