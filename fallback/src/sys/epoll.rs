//! epoll: creating a queue's epoll, registering fds in it, harvesting it. Raw system calls
//! only (decision P25, see the module `sys`).

use std::mem::MaybeUninit;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::AtomicU8;

use kevent_sys::Errno;

use super::{async_safe, check_raw, owned};

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
    check_raw(unsafe { async_safe::raw_epoll_ctl(epfd, op, fd, &mut ev) } as isize).map(drop)
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
/// initialised prefix of `buf`. `EINTR` (a signal handler ran) is passed on: the waiting loop
/// decides what an interrupted wait returns (spec section 3: what is ready, possibly 0).
///
/// Blocking waits use `epoll_pwait2` for nanosecond precision when the probe found it usable;
/// otherwise `epoll_wait` with the timeout rounded *up* to whole milliseconds (never early).
/// If `epoll_pwait2` fails where `epoll_wait` then succeeds (a seccomp filter installed after
/// the probe), it is never used again.
///
/// `sigmask`: the signal mask to sleep with (`epoll_pwait`'s), for a caller that blocks
/// signals outside the sleep ([`SignalsHeld`]); `None`: the thread's mask.
pub(crate) fn epoll_wait<'a>(
    epfd: RawFd,
    buf: &'a mut [MaybeUninit<libc::epoll_event>],
    timeout_ns: u64,
    sigmask: Option<&libc::sigset_t>,
) -> Result<&'a [libc::epoll_event], Errno> {
    use std::sync::atomic::Ordering::Relaxed;
    let max = buf.len().min(libc::c_int::MAX as usize) as libc::c_int;
    let ptr = buf.as_mut_ptr().cast::<libc::epoll_event>();
    // The kernel's sigset is 8 bytes: the first 8 of libc's `sigset_t`.
    let (mask, mask_size) = match sigmask {
        Some(m) => (m as *const libc::sigset_t, 8usize),
        None => (std::ptr::null(), 0),
    };
    let plain = |ms: libc::c_int| {
        let args = [
            epfd as usize,
            ptr as usize,
            max as usize,
            ms as usize,
            mask as usize,
            mask_size,
        ];
        // SAFETY: `ptr` is valid for writes of `max` epoll_events (the slice's length); the
        // sigmask is null (none: then `epoll_pwait` is the plain `epoll_wait`) or a live
        // sigset borrowed for the call (P25: a raw system call, not libc's interposable
        // wrapper).
        unsafe { async_safe::raw_syscall6(libc::SYS_epoll_pwait, args) }
    };
    let ret = if timeout_ns == 0 {
        plain(0)
    } else if PWAIT2.load(Relaxed) == PWAIT2_YES {
        let ts = crate::timer::ns_to_timespec(timeout_ns);
        let args = [
            epfd as usize,
            ptr as usize,
            max as usize,
            &ts as *const libc::timespec as usize,
            mask as usize,
            mask_size,
        ];
        // SAFETY: `ptr` and the sigmask as above; `ts` lives across the call.
        let r = unsafe { async_safe::raw_syscall6(libc::SYS_epoll_pwait2, args) };
        if r < 0 && r != -(libc::EINTR as isize) {
            // Real errors (EBADF, EINVAL: the queue fd) are epoll_wait's too; anything else is
            // the syscall being refused. Ask epoll_wait without blocking: if that works, the
            // failure was epoll_pwait2's own, and what it returns (possibly nothing, which
            // the waiting loop treats as an early wake-up) is this wait's result.
            let retry = plain(0);
            if retry >= 0 {
                PWAIT2.store(PWAIT2_NO, Relaxed);
                retry
            } else {
                r
            }
        } else {
            r
        }
    } else {
        plain(timeout_ns.div_ceil(1_000_000).min(libc::c_int::MAX as u64) as libc::c_int)
    };
    let n = check_raw(ret)?;
    // SAFETY: the kernel initialised the first `n <= max` entries.
    Ok(unsafe { std::slice::from_raw_parts(ptr, n) })
}

/// A harvest buffer of `N` epoll events and the initialised prefix the last
/// [`Harvest::wait`] left in it ([`Harvest::got`]), so that a waiting loop can hand its first
/// harvest from one function to another and harvest again into the same memory.
pub(crate) struct Harvest<const N: usize> {
    buf: [MaybeUninit<libc::epoll_event>; N],
    /// How many leading entries of `buf` the last wait initialised (0 after a failed one).
    len: usize,
}

impl<const N: usize> Harvest<N> {
    /// An empty harvest (nothing initialised).
    #[inline]
    pub(crate) fn new() -> Harvest<N> {
        Harvest {
            buf: [MaybeUninit::uninit(); N],
            len: 0,
        }
    }

    /// [`epoll_wait`] into the first `cap` entries (at most `N`); what it returns is also
    /// [`Harvest::got`] until the next wait.
    #[inline]
    pub(crate) fn wait(
        &mut self,
        epfd: RawFd,
        cap: usize,
        timeout_ns: u64,
        sigmask: Option<&libc::sigset_t>,
    ) -> Result<&[libc::epoll_event], Errno> {
        self.len = 0;
        let n = epoll_wait(epfd, &mut self.buf[..cap.min(N)], timeout_ns, sigmask)?.len();
        self.len = n;
        Ok(self.got())
    }

    /// The events of the last successful [`Harvest::wait`] (none before the first, or after
    /// a failed one).
    #[inline]
    pub(crate) fn got(&self) -> &[libc::epoll_event] {
        // SAFETY: `len` is 0 or the count the last successful `wait` returned, whose entries
        // the kernel initialised (`epoll_wait`'s slice); `len <= N`.
        unsafe { std::slice::from_raw_parts(self.buf.as_ptr().cast(), self.len) }
    }
}

/// The calling thread's signals, blocked (but the synchronous ones and those the C library
/// keeps for itself) until dropped, which restores the mask it found. A waiting loop holds
/// them outside its sleeps and sleeps with the mask it found ([`epoll_wait`]'s `sigmask`): a
/// signal handler then only ever runs *inside* a sleep, which it ends with `EINTR`, never in
/// the gap between two sleeps, where the loop would not know it ran (the race `pselect`
/// exists for).
pub(crate) struct SignalsHeld {
    pub(crate) old: libc::sigset_t,
}

impl SignalsHeld {
    /// Blocks every signal but the synchronous ones (a fault while they are blocked would
    /// kill the process instead of reaching its handler, the engine's safecopy fixup
    /// included); `None` if the mask could not be changed.
    pub(crate) fn hold() -> Option<SignalsHeld> {
        let mut all = async_safe::sigemptyset();
        // SAFETY: `all` is a live sigset the calls only write.
        unsafe {
            libc::sigfillset(&mut all);
            for s in [
                libc::SIGSEGV,
                libc::SIGBUS,
                libc::SIGILL,
                libc::SIGFPE,
                libc::SIGTRAP,
                libc::SIGSYS,
            ] {
                libc::sigdelset(&mut all, s);
            }
        }
        async_safe::pthread_sigmask(libc::SIG_BLOCK, Some(&all)).map(|old| SignalsHeld { old })
    }
}

impl Drop for SignalsHeld {
    fn drop(&mut self) {
        let _ = async_safe::pthread_sigmask(libc::SIG_SETMASK, Some(&self.old));
    }
}

/// One item of an epoll instance, as `/proc/self/fdinfo/<epfd>` shows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct EpollItem {
    /// The fd number it was added under.
    pub(crate) fd: RawFd,
    /// Its `epoll_data`.
    pub(crate) data: u64,
    /// The inode of its file.
    pub(crate) ino: u64,
}

/// Every item of epoll `epfd` (from `/proc/self/fdinfo`, lines `tfd: N events: E data: D
/// pos: P ino: I sdev: S`, numbers but `tfd` in hex). Empty when `/proc` is not mounted.
pub(crate) fn epoll_items(epfd: RawFd) -> Vec<EpollItem> {
    let Ok(text) = std::fs::read_to_string(format!("/proc/self/fdinfo/{epfd}")) else {
        return Vec::new();
    };
    text.lines().filter_map(parse_item).collect()
}

fn parse_item(line: &str) -> Option<EpollItem> {
    let mut it = line.split_whitespace();
    let mut item = EpollItem {
        fd: -1,
        data: 0,
        ino: 0,
    };
    let mut have = 0;
    while let Some(key) = it.next() {
        // `pos:0` and `ino:1f` carry their value in the same word.
        let (key, inline) = match key.split_once(':') {
            Some((k, v)) if !v.is_empty() => (k, Some(v)),
            Some((k, _)) => (k, None),
            None => continue,
        };
        let value = match inline {
            Some(v) => v,
            None => it.next()?,
        };
        match key {
            "tfd" => {
                item.fd = value.parse().ok()?;
                have |= 1;
            }
            "data" => {
                item.data = u64::from_str_radix(value, 16).ok()?;
                have |= 2;
            }
            "ino" => {
                item.ino = u64::from_str_radix(value, 16).ok()?;
                have |= 4;
            }
            _ => {}
        }
    }
    (have == 7).then_some(item)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fdinfo_lines_parse() {
        let l = "tfd:        5 events:       19 data:               2a  pos:0 ino:3d5c sdev:8";
        assert_eq!(
            parse_item(l),
            Some(EpollItem {
                fd: 5,
                data: 0x2a,
                ino: 0x3d5c
            })
        );
        assert_eq!(parse_item("pos:\t0"), None);
        assert_eq!(parse_item("flags:\t02000002"), None);
    }

    #[test]
    fn a_live_epoll_lists_its_items() {
        let ep = epoll_create().unwrap();
        let ev = super::super::eventfd().unwrap();
        epoll_ctl(
            ep.as_raw_fd(),
            libc::EPOLL_CTL_ADD,
            ev.as_raw_fd(),
            1,
            0xfeed_beef_0000_0001,
        )
        .unwrap();
        let items = epoll_items(ep.as_raw_fd());
        assert_eq!(items.len(), 1, "{items:?}");
        assert_eq!(
            (items[0].fd, items[0].data),
            (ev.as_raw_fd(), 0xfeed_beef_0000_0001)
        );
        assert_eq!(
            items[0].ino,
            super::super::file_id(ev.as_raw_fd()).unwrap().ino
        );
    }
}
