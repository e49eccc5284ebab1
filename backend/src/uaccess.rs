//! Reading and writing C callers' memory without trusting it: the one place where a bad
//! address becomes `EFAULT`.
//!
//! The kernel never faults on a bad user pointer: `copy_from_user`/`copy_to_user` return
//! `EFAULT`. The C API promises the same on both backends, so user memory is never touched by
//! ordinary Rust code. On the fallback backend it is copied with
//! [`kevent_fallback::signal::safecopy`]: one small copy routine whose faults the process's
//! `SIGSEGV`/`SIGBUS` handler turns into `EFAULT` (gVisor's "safecopy"). A good pointer costs
//! a `memcpy`, no system call and no file descriptor. Where that is not usable (a thread that
//! blocks `SIGSEGV` or `SIGBUS`, a program that installed its own handler for them after the
//! library, another architecture, the native backend; details in the safecopy module), the
//! copy is made by the kernel instead: `process_vm_readv`/`process_vm_writev` on our own pid,
//! and if those are refused, a per-thread pipe (`write(2)` from user memory, `read(2)` into
//! it), which fault the same way.
//!
//! # What is copied, and when
//!
//! * **Native backend: nothing** for the five calls. The kernel's own syscalls copy user
//!   memory themselves, so `src/capi/calls.rs` hands the C pointers straight to them. The
//!   POSIX timer calls copy their few bytes with system calls here: a process that never
//!   calls the fallback engine gets no signal handler from the library.
//! * **Fallback backend**, whose engine works on Rust slices:
//!   * `kevent_ctl`: `num` entries are read into a private buffer, the engine runs on it, and
//!     the span of entries it changed is written back (nothing if it changed none: a
//!     read-only array the call does not write to stays legal, as with the kernel).
//!   * `kevent_get_events`: the engine fills a private buffer, then the events it returned are
//!     written out (nothing when it returns 0). At most [`MAX_OUT`] events are returned per
//!     call.
//!   * `kevent_init`: the whole ring is checked readable and writable once. After that the
//!     engine writes the ring through its raw pointer on every `get_events`/`wait`/`commit`
//!     (the "already validated pointer": `kevent_wait` and `kevent_commit`, the ring fast path,
//!     copy nothing). Unmapping the ring while the queue lives is therefore undefined
//!     behaviour, as unmapping an io_uring buffer is; the header says so.
//!   * POSIX timers: the `sigevent`, `itimerspec` and `timer_t` arguments, a few bytes each.
//!
//! A cache of "already validated" `ctl`/`get_events` buffers was considered and rejected: a
//! buffer can be unmapped between two calls, and only a new check notices; a cached pointer
//! would turn the kernel's `EFAULT` into a crash. Measured costs are in `docs/c-api.md`.
//!
//! # Optional system calls
//!
//! `process_vm_readv`/`writev` are probed once (reading one byte of our own memory) the first
//! time a copy needs them; any failure selects the pipe. `madvise(MADV_WIPEONFORK)` (the pid
//! cache) is tried once; any failure means no cache. A refusal that comes later (a seccomp
//! filter installed after the probe) switches to the pipe as well.
//!
//! # File descriptors
//!
//! Only the pipe path needs any, and it takes them after the call's queue fd was validated
//! (the `validate` argument of [`with_events_inout`]) and moves them above the same floor as the
//! engine's internal fds (half the soft `RLIMIT_NOFILE`, at most 1024), so a copy never
//! leaves a number the program may have just closed taken.
//!
//! # Safety
//!
//! User addresses are kept as integers (`usize`) and are only ever passed to the safecopy
//! routine or the kernel, which check them; they are never dereferenced here. Local buffers
//! passed alongside are our own, sized for the copy. Typed reads go through [`Plain`],
//! implemented only for types whose every bit pattern is a valid value, so bytes from the
//! caller can never make an invalid one.
#![allow(unsafe_code)]

use std::cell::RefCell;
use std::mem::{MaybeUninit, size_of};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

use kevent_fallback::signal::safecopy;
use kevent_sys::{Errno, kevent_id, kevent_ring, ukevent};

/// Entries `kevent_ctl` keeps on the stack (two arrays of them: 1280 bytes, below the page
/// that would need a stack probe) before heap buffers are used.
const INLINE: usize = 16;

/// The most events one fallback `kevent_get_events` returns through the C API (the private
/// buffer is this many entries at most; `min_nr` is clamped to it).
pub(crate) const MAX_OUT: usize = 4096;

/// Chunk size of the pipe path and of the ring check (one page always fits an empty pipe).
const CHUNK: usize = 4096;

const ZERO_EVENT: ukevent = ukevent::new(0, kevent_id::from_u64(0), 0, 0);

/// Set once `process_vm_readv`/`writev` were found unusable: copy through a pipe from then on.
static USE_PIPE: AtomicBool = AtomicBool::new(false);

/// Whether the `process_vm_*` probe ran.
static VM_PROBED: AtomicBool = AtomicBool::new(false);

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Path {
    Safecopy,
    ProcessVm,
    Pipe,
}

#[cfg(test)]
thread_local! {
    /// Tests force a path on one thread without touching the process-wide state.
    static FORCE: std::cell::Cell<Option<Path>> = const { std::cell::Cell::new(None) };
}

/// Set by the first copy for the fallback engine (its `kevent_init`, `kevent_ctl`,
/// `kevent_get_events`): from then on safecopy may be used. A process that only ever uses the
/// native backend never sets it, so it gets no signal handler from the library (its POSIX
/// timer arguments are copied with system calls).
static FALLBACK_IN_USE: AtomicBool = AtomicBool::new(false);

fn fallback_in_use() {
    if !FALLBACK_IN_USE.load(Ordering::Relaxed) {
        FALLBACK_IN_USE.store(true, Ordering::Relaxed);
    }
}

fn safecopy_allowed() -> bool {
    FALLBACK_IN_USE.load(Ordering::Relaxed)
}

/// How this thread copies now.
fn path() -> Path {
    #[cfg(test)]
    if let Some(p) = FORCE.with(std::cell::Cell::get) {
        return p;
    }
    if safecopy_allowed() && safecopy::usable() {
        return Path::Safecopy;
    }
    if !VM_PROBED.load(Ordering::Relaxed) {
        probe_process_vm();
    }
    if USE_PIPE.load(Ordering::Relaxed) {
        Path::Pipe
    } else {
        Path::ProcessVm
    }
}

/// Re-checks what the copies depend on (safecopy's handler and this thread's signal mask);
/// `kevent_init` calls it, never the per-call path.
pub(crate) fn refresh() {
    fallback_in_use();
    safecopy::refresh();
}

/// Probes `process_vm_readv` once: one byte of our own memory must come back. Any failure
/// (`ENOSYS`, `EPERM` from seccomp, anything else) selects the pipe for good.
fn probe_process_vm() {
    let src: u8 = 0x5a;
    let mut dst: u8 = 0;
    let local = libc::iovec {
        iov_base: (&raw mut dst).cast(),
        iov_len: 1,
    };
    let remote = libc::iovec {
        iov_base: (&raw const src).cast_mut().cast(),
        iov_len: 1,
    };
    // SAFETY: both iovecs describe one live local byte each; the kernel writes `dst` only.
    let n = unsafe { libc::process_vm_readv(own_pid(), &local, 1, &remote, 1, 0) };
    let ok = n == 1 && std::hint::black_box(dst) == src;
    if !ok {
        USE_PIPE.store(true, Ordering::Relaxed);
    }
    VM_PROBED.store(true, Ordering::Relaxed);
}

/// Types that may be filled with arbitrary bytes from a C caller.
///
/// # Safety
///
/// Every bit pattern of `size_of::<Self>()` bytes is a valid value of the type.
pub(crate) unsafe trait Plain: Copy {}

// SAFETY: integers.
unsafe impl Plain for libc::c_int {}
// SAFETY: an integer.
unsafe impl Plain for u8 {}
// SAFETY: integers, a union of integers and a raw pointer (any bits are a valid raw pointer).
unsafe impl Plain for ukevent {}
// SAFETY: `sigevent` is ints, a `sigval` union (int or raw pointer) and int padding.
unsafe impl Plain for libc::sigevent {}
// SAFETY: two `timespec`s, each two integers.
unsafe impl Plain for libc::itimerspec {}
// SAFETY: `timer_t` is a raw pointer, valid with any bits; it is never dereferenced.
unsafe impl Plain for libc::timer_t {}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Dir {
    FromUser,
    ToUser,
}

/// Copies `len` bytes between our `local` buffer and the C caller's address `user`, the way
/// [`path`] says now.
///
/// # Safety
///
/// `local` is valid for `len` bytes: for writes with [`Dir::FromUser`], for reads with
/// [`Dir::ToUser`].
unsafe fn copy(dir: Dir, local: *mut u8, user: usize, len: usize) -> Result<(), Errno> {
    // SAFETY: this function's contract.
    unsafe { copy_via(path(), dir, local, user, len) }
}

/// [`copy`] the way `how` says (a value of [`path`] the caller took for the whole call).
///
/// # Safety
///
/// As [`copy`].
unsafe fn copy_via(
    mut how: Path,
    dir: Dir,
    local: *mut u8,
    user: usize,
    len: usize,
) -> Result<(), Errno> {
    if len == 0 {
        return Ok(());
    }
    if user.checked_add(len).is_none() {
        return Err(Errno::EFAULT);
    }
    if how == Path::Safecopy {
        let u: *mut u8 = std::ptr::without_provenance_mut(user);
        // SAFETY: `local` per this function's contract; `u` is the caller's address, which
        // safecopy may touch (a fault becomes EFAULT).
        let r = unsafe {
            match dir {
                Dir::FromUser => safecopy::copy(local, u, len),
                Dir::ToUser => safecopy::copy(u, local, len),
            }
        };
        match r {
            // The handler went away between `usable` and the copy: the kernel copies.
            Err(Errno::ENOSYS) => how = Path::ProcessVm,
            r => return r,
        }
    }
    if how == Path::ProcessVm && !USE_PIPE.load(Ordering::Relaxed) {
        // SAFETY: this function's contract.
        match unsafe { vm_copy(dir, local, user, len) } {
            Err(e) if e == Errno::EPERM || e == Errno::ENOSYS => {
                USE_PIPE.store(true, Ordering::Relaxed)
            }
            r => return r,
        }
    }
    // SAFETY: this function's contract.
    unsafe { pipe_copy(dir, local, user, len) }
}

/// This process's pid, for `process_vm_*`.
///
/// `getpid()` is a real syscall (about 100 ns), so the pid is cached, in a page marked
/// `MADV_WIPEONFORK`: the kernel hands any child (also one made by a raw `clone` that runs no
/// `pthread_atfork` handler) a zeroed copy of that page, so a child never copies to or from
/// its parent's memory with a stale pid. Where the kernel lacks `MADV_WIPEONFORK` (before
/// 4.14) nothing is cached.
fn own_pid() -> libc::pid_t {
    static SLOT: OnceLock<Option<&'static AtomicI32>> = OnceLock::new();
    let slot = SLOT.get_or_init(|| {
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(64) as usize;
        // SAFETY: a new private anonymous mapping at an address of the kernel's choice.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                page,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return None;
        }
        // SAFETY: `p` is the page just mapped; madvise only changes its fork behaviour.
        if unsafe { libc::madvise(p, page, libc::MADV_WIPEONFORK) } != 0 {
            // SAFETY: the page just mapped, not shared with anyone.
            unsafe { libc::munmap(p, page) };
            return None;
        }
        // SAFETY: the page is zeroed (a valid `AtomicI32` 0), page-aligned, never unmapped
        // (so `'static`), and only ever accessed through this atomic.
        Some(unsafe { &*p.cast::<AtomicI32>() })
    });
    // SAFETY: getpid has no preconditions.
    let getpid = || unsafe { libc::getpid() };
    match slot {
        Some(cached) => match cached.load(Ordering::Relaxed) {
            0 => {
                let pid = getpid();
                cached.store(pid, Ordering::Relaxed);
                pid
            }
            pid => pid,
        },
        None => getpid(),
    }
}

/// The `process_vm_readv`/`writev` path.
///
/// # Safety
///
/// As [`copy`].
unsafe fn vm_copy(dir: Dir, local: *mut u8, user: usize, len: usize) -> Result<(), Errno> {
    let pid = own_pid();
    let mut done = 0;
    while done < len {
        let local_iov = libc::iovec {
            // `done < len`: in bounds of `local`.
            iov_base: local.wrapping_add(done).cast(),
            iov_len: len - done,
        };
        let user_iov = libc::iovec {
            iov_base: std::ptr::without_provenance_mut(user + done),
            iov_len: len - done,
        };
        // SAFETY: the kernel writes (FromUser) or reads (ToUser) `len - done` bytes of our
        // buffer, valid for that per this function's contract; the user side is only an
        // address the kernel checks (EFAULT).
        let n = unsafe {
            match dir {
                Dir::FromUser => libc::process_vm_readv(pid, &local_iov, 1, &user_iov, 1, 0),
                Dir::ToUser => libc::process_vm_writev(pid, &local_iov, 1, &user_iov, 1, 0),
            }
        };
        if n < 0 {
            let e = Errno::last();
            return Err(
                if e == Errno::EPERM || e == Errno::ENOSYS || e == Errno::ENOMEM {
                    e
                } else {
                    Errno::EFAULT
                },
            );
        }
        if n == 0 {
            return Err(Errno::EFAULT);
        }
        // A partial copy stopped at a bad page: the next round reports it.
        done += n as usize;
    }
    Ok(())
}

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
/// As [`copy`].
unsafe fn pipe_copy(dir: Dir, local: *mut u8, user: usize, len: usize) -> Result<(), Errno> {
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

/// Reads one `T` from the C caller's `user`.
pub(crate) fn read_value<T: Plain>(user: *const T) -> Result<T, Errno> {
    let mut v = MaybeUninit::<T>::uninit();
    // SAFETY: `v` is valid for writes of `size_of::<T>()` bytes.
    unsafe {
        copy(
            Dir::FromUser,
            v.as_mut_ptr().cast(),
            user.addr(),
            size_of::<T>(),
        )?
    };
    // SAFETY: the copy succeeded, so every byte was written, and any bytes are a valid `T`
    // (`Plain`).
    Ok(unsafe { v.assume_init() })
}

/// Writes `v` to the C caller's `user`.
pub(crate) fn write_value<T: Plain>(user: *mut T, v: &T) -> Result<(), Errno> {
    let local: *const T = v;
    // SAFETY: `v` is valid for reads of `size_of::<T>()` bytes; `copy` only reads it.
    unsafe {
        copy(
            Dir::ToUser,
            local.cast_mut().cast(),
            user.addr(),
            size_of::<T>(),
        )
    }
}

/// Reads the `n` entries at the C caller's `user` into `slots` (exactly `n` long).
fn read_events(
    how: Path,
    slots: &mut [MaybeUninit<ukevent>],
    user: *const ukevent,
) -> Result<&mut [ukevent], Errno> {
    // SAFETY: `slots` is valid for writes of its length in entries.
    unsafe {
        copy_via(
            how,
            Dir::FromUser,
            slots.as_mut_ptr().cast(),
            user.addr(),
            std::mem::size_of_val(slots),
        )?
    };
    // SAFETY: the copy wrote every entry, and any bytes are a valid ukevent (`Plain`).
    Ok(unsafe { &mut *(slots as *mut [MaybeUninit<ukevent>] as *mut [ukevent]) })
}

/// Copies `src` into `slots` (exactly as long).
fn copy_events<'a>(slots: &'a mut [MaybeUninit<ukevent>], src: &[ukevent]) -> &'a [ukevent] {
    for (slot, ev) in slots.iter_mut().zip(src) {
        slot.write(*ev);
    }
    // SAFETY: every one of the entries (as many as `src`, which is as long) was just written.
    unsafe { &*(slots as *const [MaybeUninit<ukevent>] as *const [ukevent]) }
}

/// Room for `n` entries on the heap, uninitialized; `ENOMEM` if the heap refuses.
fn heap_slots(n: usize) -> Result<Vec<MaybeUninit<ukevent>>, Errno> {
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|_| Errno::ENOMEM)?;
    v.resize(n, MaybeUninit::uninit());
    Ok(v)
}

/// Whether two entries are the same bits (all 40 bytes: a ukevent has no padding), as five
/// word compares rather than a `memcmp` call per entry.
fn same_event(a: &ukevent, b: &ukevent) -> bool {
    let words = |e: &ukevent| {
        [
            e.id.as_u64(),
            u64::from(e.type_) | (u64::from(e.event) << 32),
            u64::from(e.req_flags) | (u64::from(e.ret_flags) << 32),
            u64::from(e.ret_data[0]) | (u64::from(e.ret_data[1]) << 32),
            e.cookie(),
        ]
    };
    let (a, b) = (words(a), words(b));
    // Not `a == b`: array equality becomes a `memcmp` call.
    a.iter().zip(&b).fold(0, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Writes `events` to the C caller's array at `user`.
fn write_events(how: Path, user: *mut ukevent, events: &[ukevent]) -> Result<(), Errno> {
    // SAFETY: `events` is valid for reads of its length in bytes; `copy_via` only reads it.
    unsafe {
        copy_via(
            how,
            Dir::ToUser,
            events.as_ptr().cast_mut().cast(),
            user.addr(),
            std::mem::size_of_val(events),
        )
    }
}

/// Runs `f` on a private copy of the `num` ukevents at the C caller's `user`, then writes back
/// the span of entries `f` changed (nothing if it changed none). `EFAULT` if the array is not
/// readable, or not writable where it changed.
///
/// When the copies would go through the pipe (the one path that creates file descriptors),
/// `validate` runs first and its error is the call's: the caller checks its queue fd there, so
/// that no fd is ever created for a call on a bad one (decision P22).
pub(crate) fn with_events_inout<R>(
    user: *mut ukevent,
    num: u32,
    validate: impl FnOnce() -> Result<(), Errno>,
    f: impl FnOnce(&mut [ukevent]) -> Result<R, Errno>,
) -> Result<R, Errno> {
    fallback_in_use();
    let n = num as usize;
    if n == 0 {
        return f(&mut []);
    }
    if user.is_null() {
        return Err(Errno::EFAULT);
    }
    let how = path();
    if how == Path::Pipe {
        validate()?;
    }
    if n <= INLINE {
        // The common case: two arrays on the stack, nothing to allocate or initialize.
        let mut work = [const { MaybeUninit::<ukevent>::uninit() }; INLINE];
        let mut orig = [const { MaybeUninit::<ukevent>::uninit() }; INLINE];
        let (Some(work), Some(orig)) = (work.get_mut(..n), orig.get_mut(..n)) else {
            return Err(Errno::EINVAL);
        };
        return inout(how, user, work, orig, f);
    }
    // Before allocating two arrays of `n` entries: a NULL or unmapped array is EFAULT, as the
    // kernel would answer, not ENOMEM for a huge `num` (the ends are probed here; the copy
    // below checks every byte).
    let last = (user as usize)
        .checked_add(n * size_of::<ukevent>() - 1)
        .ok_or(Errno::EFAULT)?;
    read_value(user.cast::<u8>().cast_const())?;
    read_value(last as *const u8)?;
    let mut work = heap_slots(n)?;
    let mut orig = heap_slots(n)?;
    inout(how, user, &mut work, &mut orig, f)
}

/// [`with_events_inout`] on two private arrays of `num` slots each.
fn inout<R>(
    how: Path,
    user: *mut ukevent,
    work: &mut [MaybeUninit<ukevent>],
    orig: &mut [MaybeUninit<ukevent>],
    f: impl FnOnce(&mut [ukevent]) -> Result<R, Errno>,
) -> Result<R, Errno> {
    let events = read_events(how, work, user)?;
    let orig = copy_events(orig, events);
    let r = f(events);
    let changed = |(a, b): (&ukevent, &ukevent)| !same_event(a, b);
    let Some(first) = events.iter().zip(orig).position(changed) else {
        return r;
    };
    let last = events.iter().zip(orig).rposition(changed).unwrap_or(first);
    let span = events.get(first..=last).ok_or(Errno::EINVAL)?;
    write_events(how, user.wrapping_add(first), span)?;
    r
}

thread_local! {
    /// The private buffer of [`with_events_out`], kept per thread: an event loop that asks for
    /// 1024 events per call would otherwise allocate and zero 40 KiB every time. Its entries
    /// stay initialized (zeroed when it grows, then whatever the last call left).
    static OUT: RefCell<Vec<ukevent>> = const { RefCell::new(Vec::new()) };
}

/// Runs `f` on a private buffer of `min(max_nr, MAX_OUT)` initialized ukevents; `f` returns
/// how many it filled, which are then written to the C caller's `user`. `EFAULT` if they
/// cannot be; nothing is written when `f` returns 0. A NULL `user` with `max_nr > 0` is
/// `EFAULT` before `f` runs (spec **D15**: the call must not wait, nor take events it could
/// never hand out); other addresses are checked only when there is something to write.
pub(crate) fn with_events_out(
    user: *mut ukevent,
    max_nr: u32,
    f: impl FnOnce(&mut [ukevent]) -> Result<u32, Errno>,
) -> Result<u32, Errno> {
    fallback_in_use();
    if user.is_null() && max_nr > 0 {
        return Err(Errno::EFAULT);
    }
    let n = (max_nr as usize).min(MAX_OUT);
    let how = path();
    let run = |buf: &mut Vec<ukevent>| -> Result<u32, Errno> {
        if buf.len() < n {
            buf.try_reserve_exact(n - buf.len())
                .map_err(|_| Errno::ENOMEM)?;
            buf.resize(n, ZERO_EVENT);
        }
        let events = buf.get_mut(..n).ok_or(Errno::EIO)?;
        let got = f(events)?;
        let filled = events.get(..got as usize).ok_or(Errno::EIO)?;
        write_events(how, user, filled)?;
        Ok(got)
    };
    // The per-thread buffer, or a fresh one if it is busy (a signal handler interrupted a call
    // on this thread) or gone (thread teardown).
    let mut run = Some(run);
    let cached = OUT.try_with(|cell| {
        let mut buf = cell.try_borrow_mut().ok()?;
        run.take().map(|run| run(&mut buf))
    });
    match (cached, run) {
        (Ok(Some(r)), _) => r,
        (_, Some(run)) => run(&mut Vec::new()),
        // `run` was taken only when the cached buffer was used.
        (_, None) => Err(Errno::EIO),
    }
}

/// Checks that the `ring_bytes(num)` bytes of a ring are mapped, readable and writable, by
/// reading them and writing the same bytes back (the ring is not in use yet: no queue has it).
/// `EINVAL` if `ring` is not aligned for `struct kevent_ring` (no C program can make such a
/// pointer without undefined behaviour, and the engine writes it with aligned stores).
pub(crate) fn check_ring(ring: *mut kevent_ring, num: u32) -> Result<(), Errno> {
    fallback_in_use();
    if ring.addr() % std::mem::align_of::<kevent_ring>() != 0 {
        return Err(Errno::EINVAL);
    }
    let len = kevent_sys::ring_bytes(num).ok_or(Errno::EINVAL)?;
    let mut buf = [0u8; CHUNK];
    let mut done = 0;
    while done < len {
        let chunk = (len - done).min(CHUNK);
        let user = ring.addr().checked_add(done).ok_or(Errno::EFAULT)?;
        // SAFETY: `buf` is valid for reads and writes of `chunk <= CHUNK` bytes.
        unsafe {
            copy(Dir::FromUser, buf.as_mut_ptr(), user, chunk)?;
            copy(Dir::ToUser, buf.as_mut_ptr(), user, chunk)?;
        }
        done += chunk;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    /// A `validate` that accepts.
    fn ok() -> Result<(), Errno> {
        Ok(())
    }

    /// The paths a copy can take here: safecopy (x86_64), `process_vm_*`, the pipe.
    fn paths() -> Vec<Path> {
        let mut v = Vec::new();
        if cfg!(target_arch = "x86_64") {
            assert!(
                safecopy::refresh(),
                "safecopy must be usable in this test thread"
            );
            v.push(Path::Safecopy);
        }
        v.extend([Path::ProcessVm, Path::Pipe]);
        v
    }

    /// Runs `f` once on every path.
    fn all_ways(f: impl Fn()) {
        for p in paths() {
            FORCE.with(|c| c.set(Some(p)));
            f();
        }
        FORCE.with(|c| c.set(None));
    }

    /// Two pages whose second page is inaccessible (`PROT_NONE`: the kernel's copies fail on
    /// it exactly as on an unmapped page, and unlike an unmapped hole no other test's `mmap`
    /// can land there), and a read-only page.
    struct Pages {
        rw: *mut u8,
        ro: *mut u8,
        page: usize,
    }

    impl Pages {
        fn new() -> Pages {
            // SAFETY: sysconf has no preconditions.
            let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
            // SAFETY: anonymous mappings at an address of the kernel's choice; the second page
            // of `rw` is made inaccessible, a hole right after the first page.
            unsafe {
                let prot = libc::PROT_READ | libc::PROT_WRITE;
                let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS;
                let rw = libc::mmap(std::ptr::null_mut(), 2 * page, prot, flags, -1, 0);
                assert_ne!(rw, libc::MAP_FAILED);
                let hole = rw.cast::<u8>().add(page).cast();
                assert_eq!(libc::mprotect(hole, page, libc::PROT_NONE), 0);
                let ro = libc::mmap(std::ptr::null_mut(), page, libc::PROT_READ, flags, -1, 0);
                assert_ne!(ro, libc::MAP_FAILED);
                Pages {
                    rw: rw.cast(),
                    ro: ro.cast(),
                    page,
                }
            }
        }

        /// `n` ukevents ending exactly at the hole.
        fn events_before_hole(&self, n: usize) -> *mut ukevent {
            self.rw
                .wrapping_add(self.page - n * size_of::<ukevent>())
                .cast()
        }
    }

    impl Drop for Pages {
        fn drop(&mut self) {
            // SAFETY: the mappings made in `new`.
            unsafe {
                libc::munmap(self.rw.cast(), 2 * self.page);
                libc::munmap(self.ro.cast(), self.page);
            }
        }
    }

    /// The cached pid is the child's own in a forked child (MADV_WIPEONFORK), so a child
    /// never copies from its parent.
    #[test]
    fn cached_pid_follows_fork() {
        // The child copies with process_vm_readv (the thread-local choice is inherited).
        FORCE.with(|c| c.set(Some(Path::ProcessVm)));
        // SAFETY: getpid has no preconditions.
        assert_eq!(own_pid(), unsafe { libc::getpid() });
        // SAFETY: the child only calls async-signal-safe functions (getpid, the atomic load
        // and store of own_pid's already initialized slot, process_vm_readv) and `_exit`s.
        let child = unsafe { libc::fork() };
        if child == 0 {
            let mut x: libc::c_int = 5;
            // SAFETY: as above.
            let ok = own_pid() == unsafe { libc::getpid() } && read_value(&raw mut x) == Ok(5);
            x = 0;
            // SAFETY: as above.
            unsafe { libc::_exit(if ok && x == 0 { 0 } else { 1 }) };
        }
        assert!(child > 0);
        let mut status = 0;
        // SAFETY: waits for our own child, writing `status`, a local.
        assert_eq!(unsafe { libc::waitpid(child, &mut status, 0) }, child);
        assert!(
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
            "{status:#x}"
        );
        FORCE.with(|c| c.set(None));
    }

    #[test]
    fn values_round_trip_and_bad_addresses_are_efault() {
        all_ways(|| {
            let mut x: libc::c_int = 0;
            write_value(&mut x, &42).unwrap();
            assert_eq!(read_value(&x), Ok(42));
            assert_eq!(
                read_value::<libc::c_int>(std::ptr::null()),
                Err(Errno::EFAULT)
            );
            assert_eq!(
                write_value::<libc::c_int>(std::ptr::null_mut(), &1),
                Err(Errno::EFAULT)
            );
            let p = Pages::new();
            let hole: *mut libc::c_int = p.rw.wrapping_add(p.page).cast();
            assert_eq!(read_value(hole), Err(Errno::EFAULT));
            // Straddling the end of the mapping.
            let straddle: *mut libc::itimerspec = p.rw.wrapping_add(p.page - 8).cast();
            assert_eq!(read_value(straddle).map(|_| ()), Err(Errno::EFAULT));
            // Read-only memory can be read, not written.
            assert_eq!(read_value(p.ro.cast::<libc::c_int>()), Ok(0));
            assert_eq!(
                write_value(p.ro.cast::<libc::c_int>(), &1),
                Err(Errno::EFAULT)
            );
            let top: *const libc::c_int = std::ptr::without_provenance(usize::MAX - 1);
            assert_eq!(read_value(top), Err(Errno::EFAULT));
        });
    }

    #[test]
    fn inout_writes_back_only_the_changed_span() {
        all_ways(|| {
            let mut arr = [ZERO_EVENT; 5];
            for (i, e) in arr.iter_mut().enumerate() {
                e.event = i as u32;
            }
            let r = with_events_inout(arr.as_mut_ptr(), 5, ok, |ev| {
                assert_eq!(ev.len(), 5);
                ev[1].ret_flags = 2;
                ev[3].ret_flags = 3;
                Ok(7u32)
            });
            assert_eq!(r, Ok(7));
            assert_eq!(arr.map(|e| e.ret_flags), [0, 2, 0, 3, 0]);
            assert_eq!(arr.map(|e| e.event), [0, 1, 2, 3, 4]);

            // Read-only and unchanged: fine, as with the kernel. Changed: EFAULT.
            let p = Pages::new();
            let ro = p.ro.cast::<ukevent>();
            assert_eq!(with_events_inout(ro, 2, ok, |_| Ok(())), Ok(()));
            let r = with_events_inout(ro, 2, ok, |ev| {
                ev[1].ret_flags = 1;
                Ok(())
            });
            assert_eq!(r, Err(Errno::EFAULT));
            // NULL with num > 0, and arrays that run into a hole.
            assert_eq!(
                with_events_inout(std::ptr::null_mut(), 1, ok, |_| Ok(())),
                Err(Errno::EFAULT)
            );
            assert_eq!(
                with_events_inout(std::ptr::null_mut(), 0, ok, |ev| Ok(ev.len())),
                Ok(0)
            );
            let end = p.events_before_hole(2);
            assert_eq!(with_events_inout(end, 2, ok, |ev| Ok(ev.len())), Ok(2));
            assert_eq!(
                with_events_inout(end, 3, ok, |_| Ok(())),
                Err(Errno::EFAULT)
            );
            // Large (heap) arrays.
            let mut big = vec![ZERO_EVENT; 100];
            let r = with_events_inout(big.as_mut_ptr(), 100, ok, |ev| {
                ev[99].ret_data = [1, 2];
                Ok(ev.len())
            });
            assert_eq!(r, Ok(100));
            assert_eq!(big[99].ret_data, [1, 2]);
            // A call error still returns the call's error.
            assert_eq!(
                with_events_inout(big.as_mut_ptr(), 1, ok, |_| Err::<(), _>(Errno::EBADF)),
                Err(Errno::EBADF)
            );
        });
    }

    /// The queue fd is validated first exactly when the copy would create fds (the pipe),
    /// and its error is the call's; safecopy and process_vm create none and skip it.
    #[test]
    fn inout_validates_first_only_on_the_pipe() {
        for p in paths() {
            FORCE.with(|c| c.set(Some(p)));
            let mut arr = [ZERO_EVENT; 2];
            let ran = std::cell::Cell::new(false);
            let r = with_events_inout(
                arr.as_mut_ptr(),
                2,
                || Err(Errno::EBADF),
                |_| {
                    ran.set(true);
                    Ok(())
                },
            );
            if p == Path::Pipe {
                assert_eq!(r, Err(Errno::EBADF));
                assert!(!ran.get(), "f ran after a failed validation");
            } else {
                assert_eq!(r, Ok(()), "{p:?}");
                assert!(ran.get());
            }
        }
        FORCE.with(|c| c.set(None));
    }

    #[test]
    fn out_writes_what_was_filled() {
        all_ways(|| {
            let mut arr = [ZERO_EVENT; 4];
            let r = with_events_out(arr.as_mut_ptr(), 4, |ev| {
                assert_eq!(ev.len(), 4);
                ev[0].event = 9;
                ev[1].event = 8;
                Ok(2)
            });
            assert_eq!(r, Ok(2));
            assert_eq!(arr.map(|e| e.event), [9, 8, 0, 0]);
            // D15: NULL with room for events is EFAULT before `f` runs (it must not wait);
            // NULL with no room is left to the engine (EINVAL for max_nr == 0).
            let ran = std::cell::Cell::new(false);
            let f = |_: &mut [ukevent]| {
                ran.set(true);
                Ok(0)
            };
            assert_eq!(
                with_events_out(std::ptr::null_mut(), 4, f),
                Err(Errno::EFAULT)
            );
            assert_eq!(
                with_events_out(std::ptr::null_mut(), u32::MAX, f),
                Err(Errno::EFAULT)
            );
            assert!(!ran.get(), "f ran for a NULL buffer");
            assert_eq!(with_events_out(std::ptr::null_mut(), 0, f), Ok(0));
            assert!(ran.get());
            // Other addresses: nothing to write, any buffer is fine; something to write,
            // EFAULT.
            let p = Pages::new();
            assert_eq!(with_events_out(p.ro.cast(), 4, |_| Ok(0)), Ok(0));
            assert_eq!(
                with_events_out(p.ro.cast(), 4, |_| Ok(1)),
                Err(Errno::EFAULT)
            );
            // The buffer is capped.
            let r = with_events_out(p.ro.cast(), u32::MAX, |ev| {
                assert_eq!(ev.len(), MAX_OUT);
                Ok(0)
            });
            assert_eq!(r, Ok(0));
        });
    }

    #[test]
    fn ring_check_needs_the_whole_ring_writable() {
        all_ways(|| {
            let p = Pages::new();
            // 8 + 2 * 40 bytes at the end of the first page: fits; one more entry does not.
            let ring = p.rw.wrapping_add(p.page - 88).cast::<kevent_ring>();
            assert_eq!(check_ring(ring, 2), Ok(()));
            assert_eq!(check_ring(ring, 3), Err(Errno::EFAULT));
            assert_eq!(check_ring(p.ro.cast(), 2), Err(Errno::EFAULT));
            assert_eq!(check_ring(std::ptr::null_mut(), 2), Err(Errno::EFAULT));
            let odd = p.rw.wrapping_add(4).cast::<kevent_ring>();
            assert_eq!(check_ring(odd, 2), Err(Errno::EINVAL));
            // The bytes are preserved.
            let mut mem = vec![0u64; (8 + 100 * 40) / 8];
            for (i, w) in mem.iter_mut().enumerate() {
                *w = i as u64;
            }
            assert_eq!(check_ring(mem.as_mut_ptr().cast(), 100), Ok(()));
            assert!(mem.iter().enumerate().all(|(i, w)| *w == i as u64));
        });
    }

    fn ns_per(iters: u32, mut f: impl FnMut()) -> f64 {
        for _ in 0..iters / 10 {
            f();
        }
        let t = Instant::now();
        for _ in 0..iters {
            f();
        }
        t.elapsed().as_nanos() as f64 / iters as f64
    }

    /// What the copies cost. Run with
    /// `cargo test --release -p kevent-backend --lib uaccess_cost -- --ignored --nocapture`.
    #[test]
    #[ignore = "a measurement; prints ns per copy"]
    fn uaccess_cost() {
        let iters = 200_000;
        let getpid = ns_per(iters, || {
            // SAFETY: getpid has no preconditions.
            std::hint::black_box(unsafe { libc::getpid() });
        });
        println!("getpid(): {getpid:.0} ns");
        for p in paths() {
            FORCE.with(|c| c.set(Some(p)));
            let how = format!("{p:?}");
            for n in [1usize, 8, 64] {
                let mut src = vec![ZERO_EVENT; n];
                let mut dst = vec![ZERO_EVENT; n];
                let memcpy = ns_per(iters, || {
                    dst.copy_from_slice(std::hint::black_box(&src));
                });
                let inout = ns_per(iters, || {
                    with_events_inout(src.as_mut_ptr(), n as u32, ok, |ev| Ok(ev.len())).unwrap();
                });
                let inout_w = ns_per(iters, || {
                    with_events_inout(src.as_mut_ptr(), n as u32, ok, |ev| {
                        ev[0].ret_flags ^= 1;
                        Ok(ev.len())
                    })
                    .unwrap();
                });
                let out = ns_per(iters, || {
                    with_events_out(dst.as_mut_ptr(), n as u32, |_| Ok(n as u32)).unwrap();
                });
                println!(
                    "{how:>10} {n:>3} ukevents: memcpy {memcpy:>5.0} ns | ctl copy-in {inout:>5.0} ns, \
                     copy-in+write-back {inout_w:>5.0} ns | get_events copy-out {out:>5.0} ns"
                );
            }
            let mut ring = vec![0u64; (8 + 256 * 40) / 8];
            let check = ns_per(2_000, || check_ring(ring.as_mut_ptr().cast(), 256).unwrap());
            println!("{how:>10} ring check at init, 256 entries: {check:.0} ns");
        }
        FORCE.with(|c| c.set(None));
    }
}
