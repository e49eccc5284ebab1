//! The NOMASK owner table: which queue each owned NOMASK watcher belongs to, and the check
//! `on_signal` makes that the queue is still open (decision P17). Written under `LOCK`, read
//! by the handler without locks. Unsafe code: see the dispatch module's `# Safety`.

use super::*;

/// The queue a NOMASK watcher belongs to, as `on_signal` checks that it is still open: the
/// queue fd `epfd` must still be the epoll that holds the queue's wake eventfd `wake` under
/// `token` (an `EPOLL_CTL_MOD`: it changes nothing on a live queue and fails on a closed or
/// reused number, without ever touching another epoll; `Queue::verify` makes the same proof,
/// decision P54).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Owner {
    /// The queue fd (the queue's epoll).
    pub epfd: RawFd,
    /// The queue's wake eventfd, registered in `epfd` with `EPOLLIN`.
    pub wake: RawFd,
    /// The epoll data of that registration.
    pub token: u64,
}

impl Owner {
    /// Whether the queue fd still is this queue. Async-signal-safe (one `epoll_ctl`).
    fn is_open(&self) -> bool {
        let mut ev = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: self.token,
        };
        // SAFETY: `ev` is a live local; epoll_ctl takes integers otherwise and touches no
        // other memory of ours. On a live queue the MOD re-registers what is there.
        // A raw system call (decision P25), as every epoll call of the engine.
        unsafe {
            async_safe::raw_epoll_ctl(self.epfd, libc::EPOLL_CTL_MOD, self.wake, &mut ev) == 0
        }
    }
}

/// One record of the NOMASK owner table: `(signal, queue)` with a reference count. Written
/// under `LOCK`; read by `on_signal` without locks (a record is published by storing `signo`
/// last and retired by clearing it first).
pub(super) struct OwnerRecord {
    /// The signal, or 0 when the record is free.
    pub(super) signo: AtomicI32,
    pub(super) epfd: AtomicI32,
    pub(super) wake: AtomicI32,
    pub(super) token: AtomicU64,
    /// NOMASK kevents of this queue for this signal.
    pub(super) refs: AtomicU32,
    /// `on_signal` found the queue closed: it no longer swallows the signal.
    pub(super) closed: AtomicBool,
}

impl OwnerRecord {
    const fn new() -> OwnerRecord {
        OwnerRecord {
            signo: AtomicI32::new(0),
            epfd: AtomicI32::new(-1),
            wake: AtomicI32::new(-1),
            token: AtomicU64::new(0),
            refs: AtomicU32::new(0),
            closed: AtomicBool::new(false),
        }
    }

    fn owner(&self) -> Owner {
        Owner {
            epfd: self.epfd.load(SeqCst),
            wake: self.wake.load(SeqCst),
            token: self.token.load(SeqCst),
        }
    }
}

/// Records per chunk of the owner table.
pub(super) const OWNERS_PER_CHUNK: usize = 32;

/// A chunk of the owner table. Chunks are allocated under `LOCK`, linked once, and never
/// freed, so `on_signal` can walk them without locks.
pub(super) struct OwnerChunk {
    pub(super) records: [OwnerRecord; OWNERS_PER_CHUNK],
    pub(super) next: AtomicPtr<OwnerChunk>,
}

pub(super) static OWNERS: OwnerChunk = OwnerChunk {
    records: [const { OwnerRecord::new() }; OWNERS_PER_CHUNK],
    next: AtomicPtr::new(std::ptr::null_mut()),
};

/// Every record of the owner table. Async-signal-safe (atomic loads only).
pub(super) fn owner_records() -> impl Iterator<Item = &'static OwnerRecord> {
    let mut chunk: Option<&'static OwnerChunk> = Some(&OWNERS);
    std::iter::from_fn(move || {
        let c = chunk?;
        let next = c.next.load(SeqCst);
        // SAFETY: a non-null `next` was made by `Box::leak` in `owner_add` and is never freed
        // or unlinked, so it is valid for 'static.
        chunk = (!next.is_null()).then(|| unsafe { &*next });
        Some(c.records.iter())
    })
    .flatten()
}

/// Counts one more NOMASK kevent of `owner` for `signo`. Called with `LOCK` held.
pub(super) fn owner_add(signo: c_int, owner: Owner) -> Result<(), Errno> {
    let matches = |r: &OwnerRecord| {
        r.signo.load(SeqCst) == signo && r.refs.load(SeqCst) > 0 && r.owner() == owner
    };
    if let Some(r) = owner_records().find(|r| matches(r)) {
        let refs = r.refs.load(SeqCst);
        r.refs
            .store(refs.checked_add(1).ok_or(Errno::EOVERFLOW)?, SeqCst);
        return Ok(());
    }
    let free = match owner_records().find(|r| r.signo.load(SeqCst) == 0) {
        Some(r) => r,
        None => {
            let mut last: &'static OwnerChunk = &OWNERS;
            loop {
                let next = last.next.load(SeqCst);
                if next.is_null() {
                    break;
                }
                // SAFETY: as in `owner_records`.
                last = unsafe { &*next };
            }
            let chunk: &'static OwnerChunk = Box::leak(Box::new(OwnerChunk {
                records: [const { OwnerRecord::new() }; OWNERS_PER_CHUNK],
                next: AtomicPtr::new(std::ptr::null_mut()),
            }));
            last.next
                .store((chunk as *const OwnerChunk).cast_mut(), SeqCst);
            &chunk.records[0]
        }
    };
    free.epfd.store(owner.epfd, SeqCst);
    free.wake.store(owner.wake, SeqCst);
    free.token.store(owner.token, SeqCst);
    free.closed.store(false, SeqCst);
    free.refs.store(1, SeqCst);
    // Published last: `on_signal` looks at a record only once its signal is set.
    free.signo.store(signo, SeqCst);
    Ok(())
}

/// Undoes one [`owner_add`]. Called with `LOCK` held.
pub(super) fn owner_remove(signo: c_int, owner: Owner) {
    let found = owner_records()
        .find(|r| r.signo.load(SeqCst) == signo && r.refs.load(SeqCst) > 0 && r.owner() == owner);
    if let Some(r) = found {
        let refs = r.refs.load(SeqCst) - 1;
        if refs == 0 {
            // Retired first, so `on_signal` stops looking before the fields are reused.
            r.signo.store(0, SeqCst);
        }
        r.refs.store(refs, SeqCst);
    }
}

/// Whether a NOMASK watcher of `signo` still swallows it: an unowned one exists, or the queue
/// of an owned one is still open (spec section 4: closing the queue fd releases its kevents,
/// so a closed queue gives the signal back at once, before the engine notices the close and
/// releases the kevent itself). A queue found closed is marked so and not asked again.
/// Async-signal-safe.
pub(super) fn nomask_in_force(signo: c_int, slot: &Slot) -> bool {
    if slot.unowned.load(SeqCst) > 0 {
        return true;
    }
    let mut open = false;
    for r in owner_records() {
        if open {
            break;
        }
        if r.signo.load(SeqCst) != signo || r.refs.load(SeqCst) == 0 || r.closed.load(SeqCst) {
            continue;
        }
        if r.owner().is_open() {
            open = true;
        } else {
            r.closed.store(true, SeqCst);
        }
    }
    open
}
