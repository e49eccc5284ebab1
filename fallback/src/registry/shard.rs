//! One shard of the registry's key index: a hash table of slot numbers that grows
//! incrementally, so that no single insert rehashes a large table (issue 14).
//!
//! A hash table that doubles rehashes every entry inside the one insert that found it full:
//! at 917,505 kevents that was one `kevent_ctl(ADD)` of a single timer taking 100–200 ms.
//! Here nothing large is ever moved, allocated or freed in one call:
//!
//! * the slab and the free list are `SegVec`s (chunks that are never moved);
//! * the index is split by hash bits into [`SHARDS`] independent tables, so each is a 64th
//!   of the registry: the memory one growth step allocates and initialises (hashbrown sets a
//!   table's control bytes in one `memset`, and first-touch page faults make that cost about
//!   0.7 µs per KB here: 1.4 ms for one 2^21-bucket table) and later frees is a 64th too;
//! * each shard grows **incrementally**: when its table has no room left (or tombstones of
//!   removed keys fill it), a fresh table of twice the size (the same size, to clean
//!   tombstones, when at most half of it is live) becomes the current one, and the old table
//!   is drained into it [`MIGRATE_PER_OP`] buckets per insert and per remove in that shard.
//!   Lookups probe the current table, then the old one while it is not empty. The fresh
//!   table receives one new entry per insert while each insert migrates 16 buckets, so the
//!   old table is empty long before the new one could fill: a resize never waits for the
//!   previous one. Tables below [`INCREMENTAL_FROM`] entries simply grow in place (a rehash
//!   of at most 448 entries).
//!
//! Measured (`cargo run --release -p kevent-bench -- timers`, column "longest ADD"): the
//! longest single-timer ADD while filling a queue to 1M timers went from 100–200 ms to well
//! under a millisecond of CPU.

use hashbrown::HashTable;

/// Buckets of the old table migrated per insert and per remove while the index is resizing.
const MIGRATE_PER_OP: usize = 16;

/// Tables smaller than this (in entries they can hold) grow in place, like any hash table.
const INCREMENTAL_FROM: usize = 512;

/// Independent tables the index is split into, by hash bits.
pub(super) const SHARDS: usize = 64;

/// One shard of the key index: slot numbers, hashed by the key of the value in that slot.
#[derive(Debug, Default)]
pub(super) struct Shard {
    /// Where inserts go.
    cur: HashTable<u32>,
    /// The table being drained into `cur` (empty, and unallocated, when not resizing).
    pub(super) old: HashTable<u32>,
    /// The next bucket of `old` to migrate.
    cursor: usize,
    /// Resizes that found the previous one unfinished (tests: must stay 0).
    #[cfg(test)]
    pub(super) forced: u32,
}

impl Shard {
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.cur.len() + self.old.len()
    }

    /// Whether the shard is between two tables.
    #[cfg(test)]
    pub(super) fn resizing(&self) -> bool {
        !self.old.is_empty()
    }

    #[inline]
    pub(super) fn find(&self, hash: u64, eq: impl Fn(&u32) -> bool) -> Option<u32> {
        match self.cur.find(hash, &eq) {
            Some(&slot) => Some(slot),
            None if self.old.is_empty() => None,
            None => self.old.find(hash, eq).copied(),
        }
    }

    /// Moves up to `budget` buckets of the old table into the current one (`rehash` gives a
    /// slot's hash); frees the old table once it is empty.
    fn migrate(&mut self, budget: usize, rehash: &impl Fn(&u32) -> u64) {
        if self.old.is_empty() {
            return;
        }
        let end = self.old.num_buckets();
        let mut left = budget;
        while left > 0 && self.cursor < end && !self.old.is_empty() {
            if let Ok(entry) = self.old.get_bucket_entry(self.cursor) {
                let (slot, _) = entry.remove();
                self.cur.insert_unique(rehash(&slot), slot, rehash);
            }
            self.cursor += 1;
            left -= 1;
        }
        if self.old.is_empty() {
            self.old = HashTable::new();
            self.cursor = 0;
        }
    }

    /// Inserts `slot` (whose hash is `hash`) without ever rehashing a large table at once.
    pub(super) fn insert(&mut self, hash: u64, slot: u32, rehash: &impl Fn(&u32) -> u64) {
        self.migrate(MIGRATE_PER_OP, rehash);
        if self.cur.len() == self.cur.capacity() {
            let full = full_capacity(self.cur.num_buckets());
            if full >= INCREMENTAL_FROM {
                // Unreachable by the migration rate (see the module documentation), kept for
                // safety: never start a second resize while one is running.
                #[cfg(test)]
                {
                    self.forced += u32::from(!self.old.is_empty());
                }
                self.migrate(usize::MAX, rehash);
                let live = self.cur.len();
                // Twice the size, or the same size when tombstones (not live entries) filled
                // it.
                let capacity = if live > full / 2 { 2 * full } else { full };
                self.old = std::mem::replace(&mut self.cur, HashTable::with_capacity(capacity));
                self.cursor = 0;
            }
            // Smaller tables grow in place inside insert_unique.
        }
        self.cur.insert_unique(hash, slot, rehash);
    }

    /// Removes `slot` (whose hash is `hash`).
    pub(super) fn remove(&mut self, hash: u64, slot: u32, rehash: &impl Fn(&u32) -> u64) {
        match self.cur.find_entry(hash, |&s| s == slot) {
            Ok(entry) => {
                entry.remove();
            }
            Err(_) => {
                if let Ok(entry) = self.old.find_entry(hash, |&s| s == slot) {
                    entry.remove();
                }
            }
        }
        self.migrate(MIGRATE_PER_OP, rehash);
    }
}

/// How many entries a table of `buckets` buckets holds before it must grow (hashbrown's
/// load factor: 7/8, or one less than the buckets for tiny tables).
fn full_capacity(buckets: usize) -> usize {
    if buckets < 8 {
        buckets.saturating_sub(1)
    } else {
        buckets / 8 * 7
    }
}

/// The shard of a hash: bits 40..46, independent of the low bits hashbrown uses for the
/// bucket position and of the top 7 bits it keeps as the tag.
#[inline]
pub(super) fn shard_of(hash: u64) -> usize {
    (hash >> 40) as usize & (SHARDS - 1)
}
