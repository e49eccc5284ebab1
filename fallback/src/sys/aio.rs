//! What an AIO transfer (`kevent_aio_sendfile`, D18) needs from the kernel: checking and
//! duplicating the caller's fds, positional reads of the file, non-blocking sends that never
//! raise `SIGPIPE`, and a worker thread that receives no process signal.

use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use kevent_sys::Errno;

use super::{above_floor, async_safe, check, owned};

/// `fcntl(fd, F_DUPFD_CLOEXEC)` above the internal fd floor: the request's own reference to
/// a caller's file, which the caller's `close` does not end.
pub(crate) fn dup_cloexec(fd: RawFd) -> Result<OwnedFd, Errno> {
    // SAFETY: F_DUPFD_CLOEXEC takes integers only.
    owned(unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) }).map(above_floor)
}

/// `SO_TYPE` of a socket.
pub(crate) fn socket_type(fd: RawFd) -> Result<libc::c_int, Errno> {
    let mut ty: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `ty` and `len` are valid for writes and `len` holds the size of `ty`.
    check(unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_TYPE,
            (&mut ty as *mut libc::c_int).cast(),
            &mut len,
        )
    })?;
    Ok(ty)
}

/// Whether a socket has a peer (`getpeername`): `ENOTCONN` when it has none.
pub(crate) fn peer_connected(fd: RawFd) -> Result<(), Errno> {
    let mut addr = std::mem::MaybeUninit::<libc::sockaddr_storage>::uninit();
    let mut len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    // SAFETY: `addr` is valid for writes of `len` bytes, `len` for one write.
    check(unsafe { libc::getpeername(fd, addr.as_mut_ptr().cast(), &mut len) }).map(drop)
}

/// `pread(fd, buf, offset)`: how many bytes were read (0 at end of file).
pub(crate) fn pread(fd: &OwnedFd, buf: &mut [u8], offset: u64) -> Result<usize, Errno> {
    let off = libc::off_t::try_from(offset).map_err(|_| Errno::EINVAL)?;
    // SAFETY: `buf` is valid for writes of `buf.len()` bytes for the call.
    let n = unsafe { libc::pread(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), off) };
    if n < 0 {
        Err(Errno::last())
    } else {
        Ok(n as usize)
    }
}

/// `send(fd, buf, MSG_DONTWAIT | MSG_NOSIGNAL)`: never blocks, whatever `O_NONBLOCK` the
/// caller's socket has (the flag is the open file's, shared with the request's duplicate),
/// and a closed peer gives `EPIPE`, never `SIGPIPE`.
pub(crate) fn send_nowait(fd: &OwnedFd, buf: &[u8]) -> Result<usize, Errno> {
    // SAFETY: `buf` is valid for reads of `buf.len()` bytes for the call.
    let n = unsafe {
        libc::send(
            fd.as_raw_fd(),
            buf.as_ptr().cast(),
            buf.len(),
            libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
        )
    };
    if n < 0 {
        Err(Errno::last())
    } else {
        Ok(n as usize)
    }
}

/// Blocks every signal in the calling thread (the AIO worker), so that process-directed
/// signals go to the program's own threads as before the engine started one.
pub(crate) fn block_all_signals() {
    let mut all = async_safe::sigemptyset();
    // 1..=64: every Linux signal number; the C library leaves out its reserved ones.
    for signo in 1..=64 {
        if signo != libc::SIGKILL && signo != libc::SIGSTOP {
            async_safe::sigaddset(&mut all, signo);
        }
    }
    let _ = async_safe::pthread_sigmask(libc::SIG_BLOCK, Some(&all));
}
