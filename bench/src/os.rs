//! The Linux calls the benchmarks make around the mechanisms they measure: clocks, CPU time,
//! resident memory, the fd limit, CPU affinity, and a few socket and fd operations.
//!
//! # Safety
//!
//! Every call here passes libc only pointers to locals or to slices that live across the
//! call, with the lengths of those buffers; none of them registers memory with the kernel
//! beyond the call.
#![allow(unsafe_code)]

use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

/// Marks the start (`M` = 1) and the end (2) of a measured window for `scripts/vm-lane
/// bench|run --profile` (its QEMU plugin, `scripts/vm-lane.d/profile.c`, counts the guest's
/// instructions per block between the two): the 7-byte NOP `nopl 0x4b4556MM(%rax)`, which
/// does nothing on any x86-64 CPU and is found by its bytes. The HTTP load generator marks
/// its window, `poller-rounds` and `calls-rounds` their timed rounds.
#[inline(always)]
pub fn profile_mark<const M: u8>() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a NOP: it reads no memory (the operand is only encoded) and changes nothing.
    unsafe {
        std::arch::asm!(
            "nop dword ptr [rax + 0x4b455600 + {m}]",
            m = const M,
            options(nomem, nostack, preserves_flags)
        );
    }
}

/// `CLOCK_MONOTONIC` in nanoseconds.
pub fn now_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// CPU time (user + system) of the whole process in nanoseconds.
pub fn cpu_ns() -> u64 {
    clock_ns(libc::CLOCK_PROCESS_CPUTIME_ID)
}

/// CPU time (user + system) of the calling thread in nanoseconds: unlike the wall clock, it
/// does not advance while other processes hold the CPU.
pub fn thread_cpu_ns() -> u64 {
    clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a local the call writes; the clock ids used here always exist.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// CPU time (user + system) of this process and its reaped children, in nanoseconds.
pub fn tree_cpu_ns() -> u64 {
    let tv = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1000;
    let mut total = 0;
    for who in [libc::RUSAGE_SELF, libc::RUSAGE_CHILDREN] {
        // SAFETY: rusage is plain data; all zeroes is a valid value.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: `ru` is a local the call writes.
        if unsafe { libc::getrusage(who, &mut ru) } == 0 {
            total += tv(ru.ru_utime) + tv(ru.ru_stime);
        }
    }
    total
}

/// The calling thread's total wait on a run queue so far, in nanoseconds (the second field of
/// `/proc/thread-self/schedstat`): time it was ready to run while other tasks held its CPU.
/// `None` where the kernel has no schedstat.
pub fn thread_run_delay_ns() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    s.split_whitespace().nth(1)?.parse().ok()
}

/// Involuntary context switches of the calling thread so far (`getrusage(RUSAGE_THREAD)`):
/// how often another task took its CPU while it could still run.
pub fn thread_involuntary_switches() -> u64 {
    // SAFETY: rusage is plain data; all zeroes is a valid value.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is a local the call writes.
    if unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) } == 0 {
        ru.ru_nivcsw as u64
    } else {
        0
    }
}

/// Minor page faults of the calling thread so far (`getrusage(RUSAGE_THREAD)`).
pub fn thread_minor_faults() -> u64 {
    // SAFETY: rusage is plain data; all zeroes is a valid value.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is a local the call writes.
    if unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) } == 0 {
        ru.ru_minflt as u64
    } else {
        0
    }
}

/// Time CPU `cpu` has spent serving interrupts and softirqs (`/proc/stat`: the irq and
/// softirq columns, sampled at the scheduler tick), in nanoseconds.
pub fn cpu_interrupt_ns(cpu: usize) -> u64 {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let tag = format!("cpu{cpu} ");
    let Some(line) = stat.lines().find(|l| l.starts_with(&tag)) else {
        return 0;
    };
    // user nice system idle iowait irq softirq ...
    let ticks: u64 = line
        .split_whitespace()
        .skip(6)
        .take(2)
        .filter_map(|x| x.parse::<u64>().ok())
        .sum();
    // SAFETY: sysconf reads no user memory.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    ticks * (1_000_000_000 / hz)
}

/// The CPU the calling thread runs on now.
pub fn current_cpu() -> usize {
    // SAFETY: sched_getcpu takes no pointer.
    let c = unsafe { libc::sched_getcpu() };
    c.max(0) as usize
}

/// Busy CPU time of the whole machine (all CPUs, `/proc/stat`: everything but idle and
/// iowait), in nanoseconds.
pub fn machine_busy_ns() -> u64 {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let Some(line) = stat.lines().find(|l| l.starts_with("cpu ")) else {
        return 0;
    };
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal (guest time is inside user)
    let busy: u64 = v.iter().take(8).sum::<u64>() - v.get(3).unwrap_or(&0) - v.get(4).unwrap_or(&0);
    // SAFETY: sysconf reads no user memory.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    busy * (1_000_000_000 / hz)
}

/// Sleeps until `CLOCK_MONOTONIC` reaches `deadline_ns`.
pub fn sleep_until(deadline_ns: u64) {
    let ts = libc::timespec {
        tv_sec: (deadline_ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (deadline_ns % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: `ts` is a local the call reads; the remaining-time pointer is null (allowed
    // with TIMER_ABSTIME).
    while unsafe {
        libc::clock_nanosleep(
            libc::CLOCK_MONOTONIC,
            libc::TIMER_ABSTIME,
            &ts,
            std::ptr::null_mut(),
        )
    } == libc::EINTR
    {}
}

/// Resident set size of this process in bytes (`/proc/self/statm`, second field).
pub fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    // SAFETY: sysconf reads no user memory.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(1) as u64;
    pages * page
}

/// Raises the soft `RLIMIT_NOFILE` to the hard limit and returns `(soft, hard)` afterwards.
pub fn raise_fd_limit() -> (u64, u64) {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a local the call writes.
    unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) };
    if lim.rlim_cur < lim.rlim_max {
        let want = libc::rlimit {
            rlim_cur: lim.rlim_max,
            rlim_max: lim.rlim_max,
        };
        // SAFETY: `want` is a local the call reads.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &want) } == 0 {
            lim = want;
        }
    }
    (lim.rlim_cur, lim.rlim_max)
}

/// How many fds this process has open now.
pub fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count().saturating_sub(1))
}

/// The CPUs this process may run on.
pub fn allowed_cpus() -> Vec<usize> {
    // SAFETY: cpu_set_t is a plain bit array; all zeroes is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a local of the size passed.
    let r = unsafe { libc::sched_getaffinity(0, size_of::<libc::cpu_set_t>(), &mut set) };
    if r != 0 {
        return vec![0];
    }
    // SAFETY: CPU_ISSET only reads `set`; every index is below CPU_SETSIZE.
    (0..libc::CPU_SETSIZE as usize)
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect()
}

/// Pins the calling thread to `cpu`.
pub fn pin_thread(cpu: usize) -> io::Result<()> {
    // SAFETY: as in `allowed_cpus`.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: CPU_SET writes one bit of the local `set`; `cpu` < CPU_SETSIZE (it came from
    // `allowed_cpus`, and CPU_SET ignores larger indices).
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: `set` is a local of the size passed; pid 0 is the calling thread.
    let r = unsafe { libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Unpins the calling thread (allows every CPU in `cpus`).
pub fn unpin_thread(cpus: &[usize]) {
    // SAFETY: as in `allowed_cpus`.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &c in cpus {
        // SAFETY: as in `pin_thread`.
        unsafe { libc::CPU_SET(c, &mut set) };
    }
    // SAFETY: as in `pin_thread`.
    unsafe { libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set) };
}

/// Sets the calling thread's scheduling policy: `SCHED_FIFO` at `priority` when `Some`,
/// back to `SCHED_OTHER` when `None`. Needs root (or `CAP_SYS_NICE`) for `SCHED_FIFO`.
pub fn set_fifo(priority: Option<i32>) -> io::Result<()> {
    let (policy, prio) = match priority {
        Some(p) => (libc::SCHED_FIFO, p),
        None => (libc::SCHED_OTHER, 0),
    };
    let param = libc::sched_param {
        sched_priority: prio,
    };
    // SAFETY: `param` is a local the call reads; pid 0 is the calling thread.
    if unsafe { libc::sched_setscheduler(0, policy, &param) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The calling thread runs at `SCHED_FIFO`.
pub fn is_fifo() -> bool {
    // SAFETY: sched_getscheduler takes no pointer.
    unsafe { libc::sched_getscheduler(0) == libc::SCHED_FIFO }
}

/// Takes ownership of an fd a syscall just returned (`-1` → the OS error).
pub fn owned(fd: RawFd) -> io::Result<OwnedFd> {
    if fd < 0 {
        Err(io::Error::last_os_error())
    } else {
        // SAFETY: `fd` was just returned by a call that created it, and nothing else holds it.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    }
}

/// Writes one byte to `fd` (non-blocking sockets: the byte always fits).
pub fn write1(fd: RawFd) {
    // SAFETY: reads one byte of a static.
    let r = unsafe { libc::write(fd, b"x".as_ptr().cast(), 1) };
    debug_assert_eq!(r, 1);
}

/// Reads up to one byte from `fd`.
pub fn read1(fd: RawFd) {
    let mut b = 0u8;
    // SAFETY: writes at most one byte into the local `b`.
    let r = unsafe { libc::read(fd, (&raw mut b).cast(), 1) };
    debug_assert_eq!(r, 1);
}

/// A connected `AF_UNIX` stream socketpair (non-blocking, close-on-exec).
pub fn socketpair() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut sv = [0; 2];
    // SAFETY: `sv` is a local array of the two ints the call writes.
    let r = unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
            sv.as_mut_ptr(),
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((owned(sv[0])?, owned(sv[1])?))
}

/// An eventfd (non-blocking, close-on-exec).
pub fn eventfd() -> io::Result<OwnedFd> {
    // SAFETY: eventfd takes no pointer.
    owned(unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) })
}

/// An epoll instance (close-on-exec).
pub fn epoll() -> io::Result<OwnedFd> {
    // SAFETY: epoll_create1 takes no pointer.
    owned(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })
}

/// `epoll_ctl(ep, op, fd, {events, data})`.
pub fn epoll_ctl(ep: RawFd, op: i32, fd: RawFd, events: u32, data: u64) -> io::Result<()> {
    let mut ev = libc::epoll_event { events, u64: data };
    // SAFETY: `ev` is a local that lives across the call (the kernel copies it).
    if unsafe { libc::epoll_ctl(ep, op, fd, &mut ev) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// `epoll_wait(ep, buf, timeout_ms)`: the number of events written to `buf`.
pub fn epoll_wait(ep: RawFd, buf: &mut [libc::epoll_event], timeout_ms: i32) -> usize {
    let max = buf.len().min(i32::MAX as usize) as i32;
    // SAFETY: `buf` is valid for writes of `max` events for the call.
    let n = unsafe { libc::epoll_wait(ep, buf.as_mut_ptr(), max, timeout_ms) };
    n.max(0) as usize
}

/// Sets `TCP_NODELAY` on a TCP socket (Nagle's algorithm off). Errors are ignored: a
/// socket that refuses it still works, only with Nagle's delays.
pub fn set_nodelay(fd: std::os::fd::RawFd) {
    let one: libc::c_int = 1;
    // SAFETY: `one` is a local that lives across the call, passed with its size; a bad `fd`
    // only makes the call fail.
    unsafe {
        libc::setsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_NODELAY,
            (&raw const one).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clocks_memory_and_limits() {
        let a = now_ns();
        assert!(now_ns() >= a);
        assert!(cpu_ns() > 0);
        assert!(thread_cpu_ns() > 0 && thread_cpu_ns() <= cpu_ns());
        if let Some(d) = thread_run_delay_ns() {
            assert!(thread_run_delay_ns().unwrap() >= d);
        }
        let _ = cpu_interrupt_ns(current_cpu());
        let v = thread_involuntary_switches();
        assert!(thread_involuntary_switches() >= v);
        assert!(rss_bytes() > 0);
        let (soft, hard) = raise_fd_limit();
        assert!(soft <= hard && soft > 0);
        assert!(!allowed_cpus().is_empty());
        assert!(open_fds() >= 3);
    }

    #[test]
    fn epoll_sees_an_eventfd() {
        let ep = epoll().unwrap();
        let e = eventfd().unwrap();
        use std::os::fd::AsRawFd;
        epoll_ctl(ep.as_raw_fd(), libc::EPOLL_CTL_ADD, e.as_raw_fd(), 1, 7).unwrap();
        let one = 1u64.to_ne_bytes();
        // SAFETY: writes 8 bytes from a local.
        unsafe { libc::write(e.as_raw_fd(), one.as_ptr().cast(), 8) };
        let mut buf = [libc::epoll_event { events: 0, u64: 0 }; 4];
        assert_eq!(epoll_wait(ep.as_raw_fd(), &mut buf, 0), 1);
        assert_eq!({ buf[0].u64 }, 7);
    }
}
