//! Small wrappers of the C library the harness itself uses: `errno` and its names, the
//! process's fd table, clocks and timespec arithmetic, socket addresses and fd flags.

use std::fmt::Write as _;
use std::os::fd::RawFd;

pub(super) fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

pub(super) fn errno_name(e: i32) -> String {
    let name = match e {
        libc::EBADF => "EBADF",
        libc::EINVAL => "EINVAL",
        libc::EFAULT => "EFAULT",
        libc::ENOMEM => "ENOMEM",
        libc::EMFILE => "EMFILE",
        libc::ENFILE => "ENFILE",
        libc::EOVERFLOW => "EOVERFLOW",
        libc::ENOSYS => "ENOSYS",
        libc::EEXIST => "EEXIST",
        libc::ENOENT => "ENOENT",
        libc::EAGAIN => "EAGAIN",
        libc::EINTR => "EINTR",
        libc::ELOOP => "ELOOP",
        libc::EPERM => "EPERM",
        libc::ENOSPC => "ENOSPC",
        libc::EPIPE => "EPIPE",
        libc::EIO => "EIO",
        _ => return format!("errno {e}"),
    };
    name.to_string()
}

pub(super) fn count_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count())
}

pub(super) fn list_fds() -> String {
    let mut out = String::new();
    if let Ok(d) = std::fs::read_dir("/proc/self/fd") {
        for e in d.flatten() {
            let target = std::fs::read_link(e.path())
                .map(|p| p.display().to_string())
                .unwrap_or_default();
            let _ = writeln!(out, "  {} -> {}", e.file_name().to_string_lossy(), target);
        }
    }
    out
}

pub(super) fn is_open(fd: RawFd) -> bool {
    // SAFETY: F_GETFD only reads the descriptor table.
    fd >= 0 && unsafe { libc::fcntl(fd, libc::F_GETFD) } >= 0
}

pub(super) fn close_fd(fd: RawFd) -> i32 {
    // SAFETY: the harness only closes fds it opened itself (or queue fds it got from
    // kevent_init), each once.
    unsafe { libc::close(fd) }
}

pub(super) fn now(clock: libc::clockid_t) -> libc::timespec {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a local, valid for writes.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts
}

pub(super) fn ts_add_ns(ts: libc::timespec, ns: u64) -> libc::timespec {
    let total = ts.tv_nsec as u64 + ns;
    libc::timespec {
        tv_sec: ts.tv_sec + (total / 1_000_000_000) as i64,
        tv_nsec: (total % 1_000_000_000) as i64,
    }
}

pub(super) fn loopback(port: u16) -> libc::sockaddr_in {
    libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: port.to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from_be_bytes([127, 0, 0, 1]).to_be(),
        },
        sin_zero: [0; 8],
    }
}

pub(super) fn is_nonblock(fd: RawFd) -> bool {
    // SAFETY: F_GETFL only reads the file's status flags.
    fd >= 0 && unsafe { libc::fcntl(fd, libc::F_GETFL) } & libc::O_NONBLOCK != 0
}
