//! File descriptors: pairs, pipes, listeners, temp dirs.

use std::ffi::c_int;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU32, Ordering};

/// Closes a raw fd we own.
pub fn close(fd: RawFd) {
    // SAFETY: closing a number has no memory effect; callers only pass fds they own.
    unsafe { libc::close(fd) };
}

/// An `OwnedFd` from a libc result that must be a new fd.
#[track_caller]
pub fn owned(fd: c_int, what: &str) -> OwnedFd {
    assert!(fd >= 0, "{what}: {}", std::io::Error::last_os_error());
    // SAFETY: `fd` was just returned by the kernel as a new descriptor that nothing else owns.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

/// A connected AF_UNIX stream pair, non-blocking.
pub fn socketpair() -> (OwnedFd, OwnedFd) {
    let mut fds = [0; 2];
    // SAFETY: `fds` is valid for two ints.
    let r = unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    };
    assert_eq!(r, 0, "socketpair: {}", std::io::Error::last_os_error());
    (owned(fds[0], "socketpair"), owned(fds[1], "socketpair"))
}

/// A pipe `(read end, write end)`, non-blocking.
pub fn pipe() -> (OwnedFd, OwnedFd) {
    let mut fds = [0; 2];
    // SAFETY: `fds` is valid for two ints.
    let r = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) };
    assert_eq!(r, 0, "pipe2: {}", std::io::Error::last_os_error());
    (owned(fds[0], "pipe"), owned(fds[1], "pipe"))
}

/// An eventfd (non-blocking) with initial value `v`.
pub fn eventfd(v: u32) -> OwnedFd {
    // SAFETY: eventfd takes no pointers.
    owned(
        unsafe { libc::eventfd(v, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) },
        "eventfd",
    )
}

/// Writes `data`; returns what `write(2)` returned.
pub fn write_fd(fd: RawFd, data: &[u8]) -> isize {
    // SAFETY: `data` is valid for reads of its length.
    unsafe { libc::write(fd, data.as_ptr().cast(), data.len()) }
}

/// Reads everything available (non-blocking fd); returns the byte count.
pub fn drain(fd: RawFd) -> usize {
    let mut buf = [0u8; 4096];
    let mut total = 0;
    loop {
        // SAFETY: `buf` is valid for writes of its length.
        let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
        if n <= 0 {
            return total;
        }
        total += n as usize;
    }
}

/// `poll(2)` on one fd with a zero timeout: the `revents`.
pub fn poll_now(fd: RawFd, events: i16) -> i16 {
    let mut p = libc::pollfd {
        fd,
        events,
        revents: 0,
    };
    // SAFETY: `p` is one valid pollfd.
    let r = unsafe { libc::poll(&mut p, 1, 0) };
    assert!(r >= 0, "poll: {}", std::io::Error::last_os_error());
    p.revents
}

/// Lowest free fd number right now (what the next `open` gets).
pub fn next_fd() -> RawFd {
    // SAFETY: dup of fd 0..2 or /dev/null: no memory effect.
    let fd = unsafe { libc::fcntl(0, libc::F_DUPFD_CLOEXEC, 0) };
    if fd >= 0 {
        close(fd);
    }
    fd
}

/// A fresh private temporary directory (removed by the OS's tmp cleaning; tests remove it).
pub fn temp_dir(tag: &str) -> std::path::PathBuf {
    static N: AtomicU32 = AtomicU32::new(0);
    let p = std::env::temp_dir().join(format!(
        "kevent-conf-{}-{}-{}",
        std::process::id(),
        tag,
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&p).expect("create temp dir");
    p
}
