//! The registry: every kevent of one queue, keyed by its [`Key`], `(type, id)` (**D3**).
//!
//! Entries live in a slab (slots reused through a free list), so a kevent has a stable `u32`
//! slot index for the lifetime of its registration, and epoll tokens, the ready list and the
//! timer heap refer to it by index. Each slot carries a generation that changes whenever the
//! slot is freed, so a stale reference (an epoll event harvested just before a REMOVE) is
//! recognised and dropped.
//!
//! The key index hashes with std's SipHash under per-process random keys, which makes the
//! cost O(1) expected *whatever the ids are*: ids that collide in their low bits (all ids ≡ 42
//! mod 512) hash like any others, and the table grows with the registry, so there is no fixed
//! table to overflow (the lesson of kevent's own move from a hash table to an RB tree in
//! take18, without paying a tree's log n on every lookup).
//!
//! The key index is split into shards that grow incrementally ([`shard`]): no insert
//! or remove ever rehashes a large table at once (issue 14).

use std::cell::Cell;
use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;

use kevent_sys::Key;

use crate::seg::SegVec;

mod shard;

use shard::{SHARDS, Shard, shard_of};

/// A value that knows its own key, so the index can hold bare slot numbers.
pub(crate) trait Keyed {
    /// The value's key.
    fn key(&self) -> Key;
}

/// What an empty slot hashes as (never looked up: the index holds live slots only).
const NO_KEY: Key = Key::from_raw(0, 0);

#[derive(Debug)]
struct Slot<T> {
    generation: u32,
    value: Option<T>,
}

/// A keyed slab of `T`.
///
/// The index is a `hashbrown::HashTable` of slot numbers (4 bytes a bucket; the key is read
/// back from the slab when probing), hashed with std's per-process random SipHash keys:
/// a quarter of what a `HashMap<Key, u32>` costs per entry, which matters for a queue that
/// holds a million timers.
#[derive(Debug)]
pub(crate) struct Registry<T> {
    /// The key index, in [`SHARDS`] independent tables (allocated at the first insert).
    index: Vec<Shard>,
    hasher: RandomState,
    /// The slot and key hash of the last successful [`Registry::find`]: a REMOVE looks its
    /// entry up, then removes that slot, and hashing the key once instead of twice saves
    /// a SipHash per entry.
    last_found: Cell<(u32, u64)>,
    slots: SegVec<Slot<T>>,
    free: SegVec<u32>,
    first_generation: u32,
}

impl<T: Keyed> Registry<T> {
    /// An empty registry whose generations start at `first_generation` (always odd, so
    /// never zero), so that tokens of different queues rarely look alike.
    pub(crate) fn new(first_generation: u32) -> Self {
        Registry {
            index: Vec::new(),
            hasher: RandomState::new(),
            last_found: Cell::new((u32::MAX, 0)),
            slots: SegVec::new(),
            free: SegVec::new(),
            first_generation: first_generation | 1,
        }
    }

    #[inline]
    fn value_key(slots: &SegVec<Slot<T>>, slot: u32) -> Option<Key> {
        slots.get(slot as usize)?.value.as_ref().map(Keyed::key)
    }

    /// Number of registered kevents.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.index.iter().map(Shard::len).sum()
    }

    /// Whether some shard of the index is between two tables (tests only).
    #[cfg(test)]
    fn resizing(&self) -> bool {
        self.index.iter().any(Shard::resizing)
    }

    /// The slot of `key`, if registered.
    #[inline]
    pub(crate) fn find(&self, key: Key) -> Option<u32> {
        let hash = self.hasher.hash_one(key);
        let shard = self.index.get(shard_of(hash))?;
        let slot = shard.find(hash, |&slot| {
            Self::value_key(&self.slots, slot) == Some(key)
        })?;
        self.last_found.set((slot, hash));
        Some(slot)
    }

    /// Registers `value` under its key; `None` (nothing changed) if the key exists or the
    /// slab is full.
    pub(crate) fn insert(&mut self, value: T) -> Option<u32> {
        let key = value.key();
        if self.find(key).is_some() {
            return None;
        }
        let slot = match self.free.pop() {
            Some(slot) => {
                self.slots[slot as usize].value = Some(value);
                slot
            }
            None => {
                let slot = u32::try_from(self.slots.len()).ok()?;
                if slot >= crate::token::FIRST_RESERVED_SLOT {
                    return None;
                }
                self.slots.push(Slot {
                    generation: self.first_generation,
                    value: Some(value),
                });
                slot
            }
        };
        if self.index.is_empty() {
            self.index.resize_with(SHARDS, Shard::default);
        }
        let hash = self.hasher.hash_one(key);
        let (slots, hasher) = (&self.slots, &self.hasher);
        let rehash = |&s: &u32| hasher.hash_one(Self::value_key(slots, s).unwrap_or(NO_KEY));
        self.index[shard_of(hash)].insert(hash, slot, &rehash);
        Some(slot)
    }

    /// Unregisters the kevent in `slot` and returns it.
    pub(crate) fn remove(&mut self, slot: u32) -> Option<T> {
        let key = Self::value_key(&self.slots, slot)?;
        let hash = match self.last_found.get() {
            (s, hash) if s == slot => hash,
            _ => self.hasher.hash_one(key),
        };
        self.last_found.set((u32::MAX, 0));
        let (slots, hasher) = (&self.slots, &self.hasher);
        let rehash = |&s: &u32| hasher.hash_one(Self::value_key(slots, s).unwrap_or(NO_KEY));
        if let Some(shard) = self.index.get_mut(shard_of(hash)) {
            shard.remove(hash, slot, &rehash);
        }
        let s = self.slots.get_mut(slot as usize)?;
        let value = s.value.take()?;
        s.generation = s.generation.wrapping_add(2) | 1;
        self.free.push(slot);
        Some(value)
    }

    /// The live value in `slot`.
    pub(crate) fn get(&self, slot: u32) -> Option<&T> {
        self.slots.get(slot as usize)?.value.as_ref()
    }

    /// The live value in `slot`, mutably.
    pub(crate) fn get_mut(&mut self, slot: u32) -> Option<&mut T> {
        self.slots.get_mut(slot as usize)?.value.as_mut()
    }

    /// The live value in `slot` if its generation is `generation` (a token's check and
    /// lookup in one).
    #[inline]
    pub(crate) fn live_mut(&mut self, slot: u32, generation: u32) -> Option<&mut T> {
        let s = self.slots.get_mut(slot as usize)?;
        if s.generation != generation {
            return None;
        }
        s.value.as_mut()
    }

    /// The generation of a live slot.
    pub(crate) fn generation(&self, slot: u32) -> Option<u32> {
        let s = self.slots.get(slot as usize)?;
        s.value.as_ref().map(|_| s.generation)
    }

    /// Every live `(slot, value)`.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u32, &T)> {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.value.as_ref().map(|v| (i as u32, v)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq)]
    struct V(u32, u64);

    impl Keyed for V {
        fn key(&self) -> Key {
            Key::from_raw(self.0, self.1)
        }
    }

    #[test]
    fn d3_type_is_part_of_the_key() {
        let mut r = Registry::new(7);
        let a = r.insert(V(9, 5)).unwrap();
        let b = r.insert(V(2, 5)).unwrap();
        assert_ne!(a, b);
        assert!(r.insert(V(9, 5)).is_none());
        assert_eq!(r.find(Key::from_raw(2, 5)), Some(b));
        assert_eq!(r.find(Key::from_raw(9, 5)), Some(a));
    }

    /// The hash remembered by `find` is used only for the slot it found.
    #[test]
    fn remove_after_find_of_another_key_removes_the_right_entry() {
        let mut r = Registry::new(1);
        let a = r.insert(V(9, 1)).unwrap();
        let b = r.insert(V(9, 2)).unwrap();
        assert_eq!(r.find(Key::from_raw(9, 1)), Some(a));
        assert_eq!(r.remove(b), Some(V(9, 2)));
        assert_eq!(r.find(Key::from_raw(9, 2)), None);
        assert_eq!(r.find(Key::from_raw(9, 1)), Some(a));
        assert_eq!(r.remove(a), Some(V(9, 1)));
        // The slot is reused for another key: its removal hashes that key, not the old one.
        let c = r.insert(V(9, 3)).unwrap();
        assert_eq!(r.remove(c), Some(V(9, 3)));
        assert_eq!(
            (
                r.find(Key::from_raw(9, 1)),
                r.find(Key::from_raw(9, 3)),
                r.len()
            ),
            (None, None, 0)
        );
    }

    #[test]
    fn removed_slots_change_generation_and_are_reused() {
        let mut r = Registry::new(0);
        let a = r.insert(V(9, 1)).unwrap();
        let g = r.generation(a).unwrap();
        assert_eq!(r.remove(a), Some(V(9, 1)));
        assert_eq!(r.generation(a), None);
        assert_eq!(r.find(Key::from_raw(9, 1)), None);
        let b = r.insert(V(9, 2)).unwrap();
        assert_eq!(a, b);
        assert_ne!(r.generation(b).unwrap(), g);
        assert_eq!(r.generation(b).unwrap() % 2, 1);
    }

    #[test]
    fn colliding_ids_register_find_and_remove() {
        let mut r = Registry::new(3);
        let ids: Vec<u64> = (0..20_000u64).map(|i| 42 + 512 * i).collect();
        let slots: Vec<u32> = ids.iter().map(|&id| r.insert(V(9, id)).unwrap()).collect();
        assert_eq!(r.len(), ids.len());
        for (&id, &slot) in ids.iter().zip(&slots) {
            assert_eq!(r.find(Key::from_raw(9, id)), Some(slot));
        }
        for (&id, &slot) in ids.iter().zip(&slots).step_by(2) {
            assert_eq!(r.remove(slot), Some(V(9, id)));
        }
        for (i, (&id, &slot)) in ids.iter().zip(&slots).enumerate() {
            let expect = if i % 2 == 0 { None } else { Some(slot) };
            assert_eq!(r.find(Key::from_raw(9, id)), expect);
        }
        assert_eq!(r.len(), ids.len() / 2);
    }

    /// A shard over a plain key array (slot = index into `keys`): insert a new key, after
    /// removing the oldest one if `churn`.
    fn shard_step(
        shard: &mut Shard,
        h: &RandomState,
        keys: &mut Vec<u64>,
        order: &mut std::collections::VecDeque<u32>,
        churn: bool,
    ) {
        if churn {
            let slot = order.pop_front().unwrap();
            let k = keys[slot as usize];
            let ks = &*keys;
            shard.remove(h.hash_one(k), slot, &|&s: &u32| h.hash_one(ks[s as usize]));
            assert_eq!(shard.find(h.hash_one(k), |&s| ks[s as usize] == k), None);
        }
        let k = 1_000_000 + keys.len() as u64;
        keys.push(k);
        let slot = (keys.len() - 1) as u32;
        let ks = &*keys;
        shard.insert(h.hash_one(k), slot, &|&s: &u32| h.hash_one(ks[s as usize]));
        order.push_back(slot);
    }

    fn shard_find(shard: &Shard, h: &RandomState, keys: &[u64], slot: u32) -> Option<u32> {
        let k = keys[slot as usize];
        shard.find(h.hash_one(k), |&s| keys[s as usize] == k)
    }

    /// Issue 14: a shard grows incrementally. Every key stays findable and removable at
    /// every step of a resize (keys added and removed while the old table drains); a resize
    /// is always finished by migration before the next one is due; churn at constant size
    /// (tombstones) resizes too, and the old table is freed once drained.
    #[test]
    fn a_shard_resizes_incrementally_and_loses_nothing() {
        let h = RandomState::new();
        let (mut keys, mut order) = (Vec::new(), std::collections::VecDeque::new());
        let mut shard = Shard::default();
        let (mut resizes, mut was) = (0, false);
        let mut count = |shard: &Shard, resizes: &mut u32| {
            let resizing = !shard.old.is_empty();
            if resizing && !was {
                *resizes += 1;
            }
            was = resizing;
            resizing
        };
        // Growth from empty to 20,000 keys (several doublings).
        for i in 0..20_000 {
            shard_step(&mut shard, &h, &mut keys, &mut order, false);
            if count(&shard, &mut resizes) || i % 1000 == 0 {
                let probe = order[order.len() / 2];
                assert_eq!(shard_find(&shard, &h, &keys, probe), Some(probe));
            }
        }
        assert_eq!(shard.len(), order.len());
        for &slot in &order {
            assert_eq!(shard_find(&shard, &h, &keys, slot), Some(slot));
        }
        // Churn at constant size leaves tombstones; they must trigger clean-up resizes.
        let grown = resizes;
        for _ in 0..300_000 {
            shard_step(&mut shard, &h, &mut keys, &mut order, true);
            count(&shard, &mut resizes);
        }
        assert!(grown >= 4, "{grown} incremental resizes while growing");
        assert!(
            resizes > grown,
            "tombstones never triggered a clean-up resize"
        );
        assert_eq!(shard.forced, 0, "a resize had to be finished synchronously");
        assert_eq!(shard.len(), order.len());
        for &slot in &order {
            assert_eq!(shard_find(&shard, &h, &keys, slot), Some(slot));
        }
        while !shard.old.is_empty() {
            shard_step(&mut shard, &h, &mut keys, &mut order, true);
        }
        assert_eq!(shard.old.allocation_size(), 0, "a drained table is freed");
    }

    /// The same through the registry: 150,000 keys spread over the shards, every key found
    /// and removed at the end, `EEXIST` for every one still registered.
    #[test]
    fn registry_keys_survive_sharded_incremental_growth() {
        let mut r = Registry::new(5);
        let mut slots = std::collections::HashMap::new();
        let mut saw_resizing = false;
        for id in 0..150_000u64 {
            let slot = r.insert(V(9, id)).unwrap();
            slots.insert(id, slot);
            if r.resizing() {
                saw_resizing = true;
                assert_eq!(
                    r.find(Key::from_raw(9, id / 2)),
                    slots.get(&(id / 2)).copied()
                );
                let victim = id / 3;
                if let Some(s) = slots.remove(&victim) {
                    assert_eq!(r.remove(s), Some(V(9, victim)));
                    assert_eq!(r.find(Key::from_raw(9, victim)), None);
                    slots.insert(victim, r.insert(V(9, victim)).unwrap());
                }
            }
        }
        assert!(saw_resizing);
        assert_eq!(r.len(), slots.len());
        for (&id, &slot) in &slots {
            assert_eq!(r.find(Key::from_raw(9, id)), Some(slot), "id {id}");
            assert!(r.insert(V(9, id)).is_none(), "EEXIST for {id}");
        }
        for (&id, &slot) in &slots {
            assert_eq!(r.remove(slot), Some(V(9, id)));
        }
        assert_eq!(r.len(), 0);
    }
}
