//! [`Keys`]: which [`Registration`](crate::Registration) currently owns each key, in
//! independently locked shards.
//!
//! A registration removes, modifies or marks its kevent only while it is the key's current
//! owner, and the check and the system call must not interleave with another thread's ADD
//! of the same key (or a stale REMOVE would remove the new kevent). So the shard that holds a
//! key stays locked across that key's call. Keys hash to [`SHARDS`] shards: calls on
//! different keys take different locks in all but `1/SHARDS` of cases, and no lock covers
//! the whole queue (issue 23, item 6). Each shard's map keeps its capacity when keys leave,
//! so a steady state of ADD and REMOVE does not allocate.
//!
//! Keys are hashed with [`SeededHash`] (`kevent_backend::hash`: a folded multiplication
//! from a seed drawn per queue), not SipHash: an ADD and its REMOVE hashed a key seven
//! times, about 2,400 of the ~3,000 instructions the safe API added to each connection's ADD
//! and REMOVE (issue 21, measured with callgrind). A key is a type and an id the program
//! chose itself (an fd number, a timer interval, a user id), so the maps need spread, not
//! SipHash's resistance to chosen collisions; the per-queue seed still keeps one process's
//! keys from colliding the same way in every queue.

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use kevent_backend::Backend;
use kevent_backend::hash::SeededHash;
use kevent_sys::{KEVENT_CTL_REMOVE, KEVENT_SIGNAL, ukevent};

use crate::event::Key;

/// How many independently locked shards.
pub(crate) const SHARDS: usize = 64;

/// One shard: the current owner (generation) of each of its keys.
#[derive(Debug)]
pub(crate) struct Shard {
    owner: HashMap<Key, u64, SeededHash>,
}

impl Shard {
    fn new(hash: SeededHash) -> Shard {
        Shard {
            owner: HashMap::with_hasher(hash),
        }
    }

    /// Records a new registration of `key` with `generation`.
    pub(crate) fn register(&mut self, key: Key, generation: u64) {
        self.owner.insert(key, generation);
    }

    /// Whether the registration `generation` of `key` is the current one.
    pub(crate) fn owns(&self, key: Key, generation: u64) -> bool {
        generation != 0 && self.owner.get(&key) == Some(&generation)
    }

    /// Forgets the current registration of `key` if it is `generation`.
    pub(crate) fn release(&mut self, key: Key, generation: u64) -> bool {
        if self.owns(key, generation) {
            self.owner.remove(&key);
            true
        } else {
            false
        }
    }
}

/// The key owners of one queue.
///
/// Dropping it removes the queue's SIGNAL kevents (`queue_fd` is still open then: `Keys` is
/// dropped before the queue's fd, see `Inner`). A kevent kernel releases everything at the
/// close itself, but the fallback engine cannot see a `close()` and would keep the signal
/// routed (and a NOMASK signal swallowed) until it notices (decision P17 in
/// `docs/decisions.md`).
pub(crate) struct Keys {
    shards: [Mutex<Shard>; SHARDS],
    hash: SeededHash,
    next_gen: AtomicU64,
    backend: Backend,
    /// The queue fd for the signal cleanup; `None` once the fd was handed over.
    queue_fd: Option<RawFd>,
}

impl Keys {
    pub(crate) fn new(backend: Backend, queue_fd: RawFd) -> Keys {
        let hash = SeededHash::new();
        Keys {
            shards: std::array::from_fn(|_| Mutex::new(Shard::new(hash))),
            hash,
            next_gen: AtomicU64::new(1),
            backend,
            queue_fd: Some(queue_fd),
        }
    }

    /// A fresh generation (never 0).
    pub(crate) fn next_generation(&self) -> u64 {
        self.next_gen.fetch_add(1, Ordering::Relaxed)
    }

    /// The hasher of this queue's key maps (and of a batch's duplicate check).
    pub(crate) fn hash(&self) -> SeededHash {
        self.hash
    }

    /// Which shard holds `key`: bits 32 and up of its hash, which the shard's own map
    /// (buckets from the low bits, tags from the top seven) does not use until it has 2^32
    /// buckets, so the keys of one shard still spread over its map.
    pub(crate) fn shard_index(&self, key: Key) -> usize {
        ((self.hash.hash_one(key) >> 32) as usize) % SHARDS
    }

    /// Locks the shard of `key`.
    pub(crate) fn lock(&self, key: Key) -> MutexGuard<'_, Shard> {
        self.lock_shard(self.shard_index(key))
    }

    /// Locks shard `i`.
    pub(crate) fn lock_shard(&self, i: usize) -> MutexGuard<'_, Shard> {
        // A shard is updated only after a successful call; a panic elsewhere cannot leave it
        // half-written.
        self.shards[i % SHARDS]
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    /// The queue fd is handed over (`OwnedFd::try_from(queue)`): its kevents stay.
    pub(crate) fn disarm(&mut self) {
        self.queue_fd = None;
    }
}

impl std::fmt::Debug for Keys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Keys")
            .field("shards", &SHARDS)
            .field("queue_fd", &self.queue_fd)
            .finish_non_exhaustive()
    }
}

impl Drop for Keys {
    fn drop(&mut self) {
        let Some(fd) = self.queue_fd else {
            return;
        };
        let mut signals: Vec<ukevent> = Vec::new();
        for shard in &mut self.shards {
            let shard = shard.get_mut().unwrap_or_else(|p| p.into_inner());
            signals.extend(
                shard
                    .owner
                    .keys()
                    .filter(|k| k.raw_type() == KEVENT_SIGNAL)
                    .map(|k| k.to_ukevent()),
            );
        }
        if !signals.is_empty() {
            let _ = self.backend.ctl(fd, KEVENT_CTL_REMOVE, &mut signals);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_track_the_newest_registration() {
        let mut s = Shard::new(SeededHash::new());
        let key = Key::user(1);
        s.register(key, 1);
        s.register(key, 2);
        assert!(!s.owns(key, 1));
        assert!(!s.release(key, 1), "a stale guard releases nothing");
        assert!(s.release(key, 2));
        assert!(!s.owns(key, 0));
    }

    /// The cheap hash must still spread what programs register: consecutive fd numbers
    /// (sockets), and ids that differ only in high bits (timer intervals in nanoseconds).
    #[test]
    fn key_hash_spreads_fds_and_high_bits_over_shards() {
        // No queue fd: nothing to clean up at the drop.
        let mut keys = Keys::new(Backend::Fallback, -1);
        keys.disarm();
        for ids in [
            (0..8000u64).collect::<Vec<_>>(),
            (0..8000u64).map(|i| i << 40).collect(),
        ] {
            let mut per_shard = [0usize; SHARDS];
            let mut hashes = std::collections::HashSet::new();
            for &id in &ids {
                let key = Key::from_raw(kevent_sys::KEVENT_SOCKET, id);
                per_shard[keys.shard_index(key)] += 1;
                hashes.insert(keys.hash().hash_one(key));
            }
            // 125 per shard on average: no shard empty or holding three times that.
            let (lo, hi) = (per_shard.iter().min(), per_shard.iter().max());
            assert!(lo > Some(&30) && hi < Some(&375), "{per_shard:?}");
            assert_eq!(hashes.len(), ids.len(), "distinct keys, distinct hashes");
        }
        // The type is part of the hash.
        let h = keys.hash();
        assert_ne!(
            h.hash_one(Key::from_raw(kevent_sys::KEVENT_SOCKET, 5)),
            h.hash_one(Key::from_raw(kevent_sys::KEVENT_POLL, 5))
        );
    }
}
