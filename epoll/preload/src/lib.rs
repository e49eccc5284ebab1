//! `libkevent-epoll.so`: run an unmodified epoll program on kevent.
//!
//! ```sh
//! LD_PRELOAD=/usr/local/lib/libkevent-epoll.so nginx ...     # or: kevent-run nginx ...
//! ```
//!
//! Preloaded, this library's `epoll_create`, `epoll_create1`, `epoll_ctl`, `epoll_wait`,
//! `epoll_pwait` and `epoll_pwait2` take the place of libc's: every epoll instance the program
//! creates is a kevent queue (`kevent_init`) on the process's backend (`KEVENT_BACKEND`, spec
//! section 6), its registrations are POLL kevents after the author's mapping, and its waits
//! are `kevent_get_events` — all through [`kevent_epoll::Epoll`], which keeps epoll's
//! semantics where kevent's differ (ONESHOT re-armed by MOD, closed fds, `EINTR`; decision
//! P24). `close()` is interposed too, so that closing an epoll fd forgets the instance.
//!
//! # The engine's own epoll calls (decision P25)
//!
//! On the fallback backend the kevent engine inside this library is itself an epoll user.
//! Its calls go to the kernel as raw system calls (`syscall(SYS_epoll_ctl, …)`), never
//! through the exported symbols, so they cannot land here again. Calls on an epoll fd this
//! library did not create (one inherited across `exec`, say) go to the kernel the same way.
//! `close()` reaches libc's through `dlsym(RTLD_NEXT)`, resolved before `main`.
//!
//! # Limits
//!
//! * `epoll_pwait`'s signal mask is installed around the wait with `pthread_sigmask`, not
//!   atomically with it: a signal that arrives between the two is handled before the wait,
//!   which then sleeps (until its timeout or an event) instead of returning `EINTR`.
//! * The waits are not pthread cancellation points.
//! * After `fork()` the child's copies of the epoll fds are closed queues for kevent
//!   (**D11**): the child must create its own (servers such as nginx and lighttpd do).
//! * `dup2`/`dup3` onto an epoll fd's number and `close_range` are not seen: the number
//!   stays an instance until the program creates an epoll that gets it again.
//! * io_uring: `io_uring_setup` through libc's `syscall()` returns `ENOSYS` (decision P32:
//!   `IORING_OP_EPOLL_CTL` would reach the engine's epoll behind the shim's back). A library
//!   that makes the system call itself (liburing ≥ 2.2 does) is not seen.
//! * An epoll fd passed to another process (`exec`, `SCM_RIGHTS`) is the engine's epoll
//!   there (on the fallback), whose items carry the engine's tokens, not the program's data.
//! * A bad `events` pointer faults in the program, as if it had touched it, instead of
//!   returning `EFAULT`.
#![allow(unsafe_code)]

use std::ffi::c_int;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, RwLock};
use std::time::Duration;

use kevent_backend::Backend;
use kevent_backend::hash::FdMap;
use kevent_epoll::{Epoll, MAX_BATCH, Options};
use kevent_sys::Errno;

/// The instances this library created, by epoll fd.
static TABLE: LazyLock<RwLock<FdMap<Arc<Epoll>>>> = LazyLock::new(|| RwLock::new(FdMap::default()));

/// fds below `64 * MINE.len()` that are instances, one bit each: `close()` tests its fd here
/// without a lock (it may run in a signal handler), and takes the table's lock only for an
/// epoll fd.
static MINE: [AtomicU64; 1024] = [const { AtomicU64::new(0) }; 1024];
/// Whether an instance lives at an fd above the bitmap (then `close()` looks in the table).
static HIGH: AtomicU64 = AtomicU64::new(0);

/// libc's `close` (`dlsym(RTLD_NEXT)`), 0 until the constructor ran.
static REAL_CLOSE: AtomicUsize = AtomicUsize::new(0);

extern "C" fn resolve_close() {
    // SAFETY: dlsym with a NUL-terminated name; RTLD_NEXT finds the next `close` after this
    // library in the lookup order (libc's).
    let p = unsafe { libc::dlsym(libc::RTLD_NEXT, c"close".as_ptr()) };
    REAL_CLOSE.store(p as usize, Ordering::Release);
    // Resolved here too, so that the engine's signal handler (whose raw system calls reach
    // `syscall` below) never runs dlsym.
    // SAFETY: as above, for `syscall`.
    let p = unsafe { libc::dlsym(libc::RTLD_NEXT, c"syscall".as_ptr()) };
    REAL_SYSCALL.store(p as usize, Ordering::Release);
}

/// Runs before `main` (and before other libraries' constructors that might close fds).
#[used]
#[unsafe(link_section = ".init_array")]
static RESOLVE_CLOSE: extern "C" fn() = resolve_close;

/// libc's `syscall` (`dlsym(RTLD_NEXT)`), 0 until first needed.
static REAL_SYSCALL: AtomicUsize = AtomicUsize::new(0);

/// `syscall(number, …)`: libc's, except that `io_uring_setup` says `ENOSYS` (decision P32).
///
/// io_uring can reach an epoll fd without `epoll_ctl` (`IORING_OP_EPOLL_CTL`, which libuv
/// ≥ 1.45 batches its registrations through): on the fallback backend that puts items of
/// nobody into the engine's epoll, where the program's registrations would be lost. A
/// program told "no io_uring" (`ENOSYS`, what a kernel without it says) uses epoll. libc's
/// `syscall` is variadic; on x86_64 and aarch64 Linux variadic integer arguments travel
/// exactly where six fixed ones do, so this fixed-arity definition receives them (what it
/// reads beyond the caller's arguments is ignored by the kernel, as in libc's own).
///
/// # Safety
///
/// As libc's `syscall`: the arguments the system call `n` expects.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn syscall(
    n: libc::c_long,
    a1: libc::c_long,
    a2: libc::c_long,
    a3: libc::c_long,
    a4: libc::c_long,
    a5: libc::c_long,
    a6: libc::c_long,
) -> libc::c_long {
    if n == libc::SYS_io_uring_setup {
        return fail(Errno::ENOSYS) as libc::c_long;
    }
    let mut p = REAL_SYSCALL.load(Ordering::Acquire);
    if p == 0 {
        // SAFETY: dlsym with a NUL-terminated name; RTLD_NEXT finds libc's `syscall`.
        p = unsafe { libc::dlsym(libc::RTLD_NEXT, c"syscall".as_ptr()) } as usize;
        REAL_SYSCALL.store(p, Ordering::Release);
    }
    type Real = unsafe extern "C" fn(
        libc::c_long,
        libc::c_long,
        libc::c_long,
        libc::c_long,
        libc::c_long,
        libc::c_long,
        libc::c_long,
    ) -> libc::c_long;
    // SAFETY: `p` is libc's `syscall` as dlsym returned it (never null: libc is loaded);
    // called with six integer arguments after the number, which is how the variadic
    // function receives them on these architectures.
    let real: Real = unsafe { std::mem::transmute::<usize, Real>(p) };
    // SAFETY: the caller's contract.
    unsafe { real(n, a1, a2, a3, a4, a5, a6) }
}

fn bit(fd: RawFd) -> Option<(usize, u64)> {
    let fd = usize::try_from(fd).ok()?;
    (fd < 64 * MINE.len()).then(|| (fd / 64, 1u64 << (fd % 64)))
}

fn mark(fd: RawFd, on: bool) {
    match bit(fd) {
        Some((w, b)) if on => {
            MINE[w].fetch_or(b, Ordering::SeqCst);
        }
        Some((w, b)) => {
            MINE[w].fetch_and(!b, Ordering::SeqCst);
        }
        None if on => {
            HIGH.fetch_add(1, Ordering::SeqCst);
        }
        None => {}
    }
}

fn maybe_mine(fd: RawFd) -> bool {
    match bit(fd) {
        Some((w, b)) => MINE[w].load(Ordering::SeqCst) & b != 0,
        None => fd >= 0 && HIGH.load(Ordering::SeqCst) > 0,
    }
}

fn lookup(epfd: RawFd) -> Option<Arc<Epoll>> {
    if !maybe_mine(epfd) {
        return None;
    }
    TABLE
        .read()
        .unwrap_or_else(|p| p.into_inner())
        .get(&epfd)
        .cloned()
}

fn fail(e: Errno) -> c_int {
    e.set_last();
    -1
}

/// The process's backend; an unusable one (`KEVENT_BACKEND=native` on a kernel without
/// kevent) is said once on stderr.
fn backend() -> Result<Backend, Errno> {
    static SAID: std::sync::Once = std::sync::Once::new();
    Backend::current().map_err(|e| {
        SAID.call_once(|| eprintln!("libkevent-epoll: {e}"));
        Errno::ENOSYS
    })
}

fn create(flags: c_int) -> c_int {
    if flags & !libc::EPOLL_CLOEXEC != 0 {
        return fail(Errno::EINVAL);
    }
    let mut ep = match backend().and_then(|b| Epoll::create(b, Options::default())) {
        Ok(ep) => ep,
        Err(e) => return fail(e),
    };
    ep.disown();
    let fd = ep.fd();
    if ep.backend() == Backend::Fallback {
        // `close()` below forgets the instance, and a number this library does not know
        // goes to the kernel: the engine need not check the queue fd on every kevent_ctl.
        let _ = kevent_fallback::caller_sees_close(fd);
    }
    if flags & libc::EPOLL_CLOEXEC == 0 {
        // kevent_init's fd is close-on-exec; epoll_create's is not unless asked.
        // SAFETY: fcntl on the fd just created; no pointers.
        unsafe { libc::fcntl(fd, libc::F_SETFD, 0) };
    }
    let mut t = TABLE.write().unwrap_or_else(|p| p.into_inner());
    // A number the program closed behind our back (dup2, close_range) is ours again now.
    if t.insert(fd, Arc::new(ep)).is_none() {
        mark(fd, true);
    }
    fd
}

/// `epoll_create(size)`: a kevent queue.
///
/// # Safety
///
/// Callable from C like libc's `epoll_create`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn epoll_create(size: c_int) -> c_int {
    if size <= 0 {
        return fail(Errno::EINVAL);
    }
    create(0)
}

/// `epoll_create1(flags)`: a kevent queue (`EPOLL_CLOEXEC` is the only flag).
///
/// # Safety
///
/// Callable from C like libc's `epoll_create1`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn epoll_create1(flags: c_int) -> c_int {
    create(flags)
}

/// `epoll_ctl(epfd, op, fd, event)`: ADD, MOD, DEL of a POLL kevent.
///
/// # Safety
///
/// `event` is null or valid for reads of one `struct epoll_event`, as for libc's.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn epoll_ctl(
    epfd: c_int,
    op: c_int,
    fd: c_int,
    event: *mut libc::epoll_event,
) -> c_int {
    let Some(ep) = lookup(epfd) else {
        // Not ours: the kernel's epoll.
        // SAFETY: the caller's pointer goes to the kernel, which checks it.
        return unsafe { libc::syscall(libc::SYS_epoll_ctl, epfd, op, fd, event) } as c_int;
    };
    let ev = if event.is_null() || op == libc::EPOLL_CTL_DEL {
        None
    } else {
        // SAFETY: non-null, valid for reads of one epoll_event (the caller's contract);
        // unaligned-safe (the struct is packed on x86_64).
        Some(unsafe { event.read_unaligned() })
    };
    match ep.ctl(op, fd, ev) {
        Ok(()) => 0,
        Err(e) => fail(e),
    }
}

/// The wait of every variant: `sigmask` installed around it when non-null.
///
/// # Safety
///
/// `events` valid for writes of `maxevents` entries; `sigmask` null or a valid `sigset_t`.
unsafe fn wait(
    epfd: c_int,
    events: *mut libc::epoll_event,
    maxevents: c_int,
    timeout: Option<Duration>,
    sigmask: *const libc::sigset_t,
) -> c_int {
    let Some(ep) = lookup(epfd) else {
        let ms = timeout.map_or(-1, |t| t.as_millis().min(c_int::MAX as u128) as c_int);
        // SAFETY: the caller's pointers go to the kernel, which checks them.
        return unsafe {
            libc::syscall(
                libc::SYS_epoll_pwait,
                epfd,
                events,
                maxevents,
                ms,
                sigmask,
                std::mem::size_of::<libc::c_ulong>(),
            )
        } as c_int;
    };
    if maxevents <= 0 {
        return fail(Errno::EINVAL);
    }
    if events.is_null() {
        return fail(Errno::EFAULT);
    }
    let len = (maxevents as usize).min(MAX_BATCH);
    // SAFETY: the caller's contract: `events` is valid for writes of `maxevents >= len`
    // entries, and nothing else refers to them during the call.
    let out = unsafe { std::slice::from_raw_parts_mut(events, len) };
    let mut old = std::mem::MaybeUninit::<libc::sigset_t>::uninit();
    if !sigmask.is_null() {
        // SAFETY: `sigmask` is a valid sigset (the caller's contract); `old` is writable.
        unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, sigmask, old.as_mut_ptr()) };
    }
    let r = ep.wait(out, timeout);
    if !sigmask.is_null() {
        // SAFETY: `old` was initialised by the first pthread_sigmask.
        unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, old.as_ptr(), std::ptr::null_mut()) };
    }
    match r {
        Ok(n) => n as c_int,
        Err(e) => fail(e),
    }
}

/// `epoll_wait(epfd, events, maxevents, timeout)`: `kevent_get_events`.
///
/// # Safety
///
/// `events` valid for writes of `maxevents` entries, as for libc's.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn epoll_wait(
    epfd: c_int,
    events: *mut libc::epoll_event,
    maxevents: c_int,
    timeout: c_int,
) -> c_int {
    // SAFETY: the caller's contract; no signal mask (epoll_pwait's null mask).
    unsafe { epoll_pwait(epfd, events, maxevents, timeout, std::ptr::null()) }
}

/// `epoll_pwait(epfd, events, maxevents, timeout, sigmask)`.
///
/// # Safety
///
/// As libc's: `events` valid for `maxevents` entries, `sigmask` null or a valid set.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn epoll_pwait(
    epfd: c_int,
    events: *mut libc::epoll_event,
    maxevents: c_int,
    timeout: c_int,
    sigmask: *const libc::sigset_t,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe {
        wait(
            epfd,
            events,
            maxevents,
            kevent_epoll::timeout_ms(timeout),
            sigmask,
        )
    }
}

/// `epoll_pwait2(epfd, events, maxevents, timeout, sigmask)`: a `timespec` timeout (null:
/// no limit).
///
/// # Safety
///
/// As libc's: `events` valid for `maxevents` entries, `timeout` null or a valid timespec,
/// `sigmask` null or a valid set.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn epoll_pwait2(
    epfd: c_int,
    events: *mut libc::epoll_event,
    maxevents: c_int,
    timeout: *const libc::timespec,
    sigmask: *const libc::sigset_t,
) -> c_int {
    let t = if timeout.is_null() {
        None
    } else {
        // SAFETY: non-null, a valid timespec (the caller's contract).
        let ts = unsafe { timeout.read() };
        if ts.tv_sec < 0 || !(0..1_000_000_000).contains(&ts.tv_nsec) {
            return fail(Errno::EINVAL);
        }
        Some(Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32))
    };
    if lookup(epfd).is_none() {
        // SAFETY: the caller's pointers go to the kernel, which checks them.
        return unsafe {
            libc::syscall(
                libc::SYS_epoll_pwait2,
                epfd,
                events,
                maxevents,
                timeout,
                sigmask,
                std::mem::size_of::<libc::c_ulong>(),
            )
        } as c_int;
    }
    // SAFETY: the caller's contract.
    unsafe { wait(epfd, events, maxevents, t, sigmask) }
}

/// `close(fd)`: forgets the instance when `fd` is an epoll fd, then libc's `close`.
///
/// # Safety
///
/// As libc's `close`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn close(fd: c_int) -> c_int {
    if maybe_mine(fd) {
        let mut t = TABLE.write().unwrap_or_else(|p| p.into_inner());
        if t.remove(&fd).is_some() {
            mark(fd, false);
            if bit(fd).is_none() {
                HIGH.fetch_sub(1, Ordering::SeqCst);
            }
        }
    }
    match REAL_CLOSE.load(Ordering::Acquire) {
        0 => {
            // Before the constructor ran: the system call.
            // SAFETY: close takes an integer.
            unsafe { libc::syscall(libc::SYS_close, fd) as c_int }
        }
        p => {
            // SAFETY: `p` is libc's `close`, as dlsym returned it; same signature.
            let real: unsafe extern "C" fn(c_int) -> c_int = unsafe { std::mem::transmute(p) };
            // SAFETY: the caller's contract.
            unsafe { real(fd) }
        }
    }
}
