//! Queue fd → queue: which fds are this process's kevent queues.
//!
//! # Closing and reuse
//!
//! A queue fd is an ordinary epoll fd that the caller may `close()` at any time, and the
//! kernel may hand the number out again. The table cannot see a `close()`; instead:
//!
//! * every call reaches the kernel through the queue fd (a wait harvests epoll, `ctl` and
//!   `commit` check the fd), so a closed number gives `EBADF` and a number that now names some
//!   other file gives `EINVAL`; the queue is then dropped from the table and its kevents
//!   released;
//! * `kevent_init` drops the entry of the number it was just given (the kernel only reuses
//!   closed numbers) and re-checks a few other entries, so the resources of a queue that was
//!   closed and never touched again are reclaimed by later inits.
//!
//! # fork (**D11**)
//!
//! The engine's fork handlers (`crate::fork`, registered at the first insert) call
//! [`fork_child`], which advances the fork epoch: a queue made in an earlier epoch answers
//! `EBADF` on every call in the child. [`fork_prepare`] takes the table lock so that no other
//! thread holds it across the fork (the child would otherwise inherit a lock nobody can
//! release).

use std::cell::RefCell;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, RwLock, RwLockWriteGuard};

use kevent_sys::Errno;

use crate::queue::Queue;
use crate::sys;

/// fd numbers are small, dense and chosen by the kernel, not by an adversary: they hash as
/// themselves (this lookup is on every call's path).
#[derive(Default)]
struct FdHasher(u64);

impl Hasher for FdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8) | u64::from(b);
        }
    }
    fn write_i32(&mut self, v: i32) {
        // Spread the low bits over the high ones, which hashbrown uses for its tag byte.
        self.0 = (v as u32 as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

type Table = HashMap<RawFd, Arc<Queue>, BuildHasherDefault<FdHasher>>;

static TABLE: LazyLock<RwLock<Table>> = LazyLock::new(|| RwLock::new(HashMap::default()));
static EPOCH: AtomicU64 = AtomicU64::new(0);
static SWEEP: AtomicUsize = AtomicUsize::new(0);
/// Bumped whenever an entry is added or removed (and at fork): invalidates the per-thread
/// lookup caches.
static VERSION: AtomicU64 = AtomicU64::new(1);

/// Entries re-checked per `kevent_init`.
const SWEEP_PER_INIT: usize = 4;

/// A thread's last lookup: `(version, fd, queue)`.
type Cache = RefCell<Option<(u64, RawFd, Arc<Queue>)>>;

thread_local! {
    /// The last `(version, fd, queue)` this thread looked up: a busy thread calls into the
    /// same queue again and again, and the cache spares it the table's lock and the
    /// reference count (four atomic read-modify-writes per call, a tenth of a small wait). Holding the `Arc` here
    /// delays only the freeing of a queue's memory, never the release of its kevents
    /// (`shut_down`), to this thread's next call.
    static LAST: Cache = const { RefCell::new(None) };
    static FORK_GUARD: RefCell<Option<RwLockWriteGuard<'static, Table>>> =
        const { RefCell::new(None) };
}

/// fork *prepare* (`crate::fork`): hold the table's lock across `fork()`.
pub(crate) fn fork_prepare() {
    let guard = TABLE.write().unwrap_or_else(|p| p.into_inner());
    FORK_GUARD.with(|g| *g.borrow_mut() = Some(guard));
}

/// fork *parent*: release the lock [`fork_prepare`] took.
pub(crate) fn fork_parent() {
    FORK_GUARD.with(|g| drop(g.borrow_mut().take()));
}

/// fork *child*: a new fork epoch (every inherited queue answers `EBADF`), then release the
/// lock.
pub(crate) fn fork_child() {
    EPOCH.fetch_add(1, Ordering::SeqCst);
    VERSION.fetch_add(1, Ordering::SeqCst);
    FORK_GUARD.with(|g| drop(g.borrow_mut().take()));
}

/// The current fork epoch.
pub(crate) fn epoch() -> u64 {
    EPOCH.load(Ordering::SeqCst)
}

fn read() -> std::sync::RwLockReadGuard<'static, Table> {
    TABLE.read().unwrap_or_else(|p| p.into_inner())
}

fn write() -> RwLockWriteGuard<'static, Table> {
    TABLE.write().unwrap_or_else(|p| p.into_inner())
}

/// Runs `f` on the queue behind `fd` (see [`lookup`] for the errors), through the
/// per-thread cache when the table has not changed since this thread's last call.
///
/// Inline, with the thread-local reached through a closure that only takes its address:
/// the hit is then a few loads and compares in the caller, with `f`'s arguments still in
/// registers (a `LocalKey::with` around the whole body was an out-of-line call that
/// marshalled them through memory, about 40 instructions a call).
#[inline]
#[allow(unsafe_code)]
pub(crate) fn with<R>(fd: RawFd, f: impl FnOnce(&Arc<Queue>) -> R) -> Result<R, Errno> {
    let version = VERSION.load(Ordering::Acquire);
    let last: *const Cache = LAST.with(std::ptr::from_ref);
    // SAFETY: `LAST` is this thread's own and lives until the thread's TLS destructors run,
    // which cannot start while this call is on the thread's stack (`LAST.with` above would
    // have panicked had they run already): the reference is valid for the whole call.
    let last = unsafe { &*last };
    // The borrow lasts for `f`: only this thread uses its cache, and `f` never calls
    // `with` again (a nested call, from a signal handler say, finds it borrowed and takes
    // the table's path).
    if let Ok(cache) = last.try_borrow() {
        if let Some((v, cfd, q)) = &*cache {
            if *v == version && *cfd == fd {
                return Ok(f(q));
            }
        }
    }
    let q = lookup(fd)?;
    let r = f(&q);
    if let Ok(mut cache) = last.try_borrow_mut() {
        *cache = Some((version, fd, q));
    }
    Ok(r)
}

/// The queue behind `fd`: `EBADF` for a negative or closed fd and in a forked child (D11),
/// `EINVAL` for an open fd that is not a queue.
pub(crate) fn lookup(fd: RawFd) -> Result<Arc<Queue>, Errno> {
    if fd < 0 {
        return Err(Errno::EBADF);
    }
    if let Some(q) = read().get(&fd) {
        if q.epoch != epoch() {
            return Err(Errno::EBADF);
        }
        return Ok(Arc::clone(q));
    }
    match sys::status_flags(fd) {
        Ok(_) => Err(Errno::EINVAL),
        Err(_) => Err(Errno::EBADF),
    }
}

/// Records a new queue, dropping any stale entry for its number and re-checking a few
/// others.
pub(crate) fn insert(q: Arc<Queue>) {
    // A failed registration is the signal dispatch's error to report (it refuses to watch);
    // queues work without it, except in a fork child.
    let _ = crate::fork::install();
    let fd = q.fd();
    let mut dead: Vec<Arc<Queue>> = Vec::new();
    {
        let mut t = write();
        VERSION.fetch_add(1, Ordering::AcqRel);
        if let Some(old) = t.insert(fd, q) {
            dead.push(old);
        }
        let n = t.len();
        if n > 1 {
            let start = SWEEP.fetch_add(SWEEP_PER_INIT, Ordering::Relaxed) % n;
            let candidates: Vec<(RawFd, Arc<Queue>)> = t
                .iter()
                .skip(start)
                .take(SWEEP_PER_INIT)
                .filter(|(k, _)| **k != fd)
                .map(|(k, v)| (*k, Arc::clone(v)))
                .collect();
            for (k, v) in candidates {
                if v.epoch != epoch() || v.verify().is_err() {
                    t.remove(&k);
                    dead.push(v);
                }
            }
        }
    }
    for q in dead {
        q.shut_down();
    }
}

/// Drops `q` from the table if it is still the entry for `fd`.
pub(crate) fn forget(fd: RawFd, q: &Arc<Queue>) {
    let mut t = write();
    if t.get(&fd).is_some_and(|cur| Arc::ptr_eq(cur, q)) {
        t.remove(&fd);
        VERSION.fetch_add(1, Ordering::AcqRel);
    }
}
