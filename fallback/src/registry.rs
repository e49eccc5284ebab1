//! The registry: every kevent of one queue, keyed by `(type, id)` (**D3**).
//!
//! Entries live in a slab (`Vec` of slots reused through a free list), so a kevent has a
//! stable `u32` slot index for the lifetime of its registration, and epoll tokens, the ready
//! list and the timer heap refer to it by index. Each slot carries a generation that changes
//! whenever the slot is freed, so a stale reference (an epoll event harvested just before a
//! REMOVE) is recognised and dropped.
//!
//! The key index hashes with std's SipHash under per-process random keys, which makes the
//! cost O(1) expected *whatever the ids are*: ids that collide in their low bits (all ids ≡ 42
//! mod 512) hash like any others, and the table grows with the registry, so there is no fixed
//! table to overflow (the lesson of kevent's own move from a hash table to an RB tree in
//! take18, without paying a tree's log n on every lookup).

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;

use hashbrown::HashTable;

/// A registry key: `(type, id.raw_u64)`.
pub(crate) type Key = (u32, u64);

/// A value that knows its own key, so the index can hold bare slot numbers.
pub(crate) trait Keyed {
    /// The value's `(type, id)`.
    fn key(&self) -> Key;
}

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
    index: HashTable<u32>,
    hasher: RandomState,
    slots: Vec<Slot<T>>,
    free: Vec<u32>,
    first_generation: u32,
}

impl<T: Keyed> Registry<T> {
    /// An empty registry whose generations start at `first_generation` (always odd, so
    /// never zero), so that tokens of different queues rarely look alike.
    pub(crate) fn new(first_generation: u32) -> Self {
        Registry {
            index: HashTable::new(),
            hasher: RandomState::new(),
            slots: Vec::new(),
            free: Vec::new(),
            first_generation: first_generation | 1,
        }
    }

    fn value_key(slots: &[Slot<T>], slot: u32) -> Option<Key> {
        slots.get(slot as usize)?.value.as_ref().map(Keyed::key)
    }

    /// Number of registered kevents.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.index.len()
    }

    /// The slot of `key`, if registered.
    pub(crate) fn find(&self, key: Key) -> Option<u32> {
        let hash = self.hasher.hash_one(key);
        self.index
            .find(hash, |&slot| {
                Self::value_key(&self.slots, slot) == Some(key)
            })
            .copied()
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
        let hash = self.hasher.hash_one(key);
        let (slots, hasher) = (&self.slots, &self.hasher);
        self.index.insert_unique(hash, slot, |&s| {
            hasher.hash_one(Self::value_key(slots, s).unwrap_or_default())
        });
        Some(slot)
    }

    /// Unregisters the kevent in `slot` and returns it.
    pub(crate) fn remove(&mut self, slot: u32) -> Option<T> {
        let key = Self::value_key(&self.slots, slot)?;
        let hash = self.hasher.hash_one(key);
        if let Ok(entry) = self.index.find_entry(hash, |&s| s == slot) {
            entry.remove();
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
            (self.0, self.1)
        }
    }

    #[test]
    fn d3_type_is_part_of_the_key() {
        let mut r = Registry::new(7);
        let a = r.insert(V(9, 5)).unwrap();
        let b = r.insert(V(2, 5)).unwrap();
        assert_ne!(a, b);
        assert!(r.insert(V(9, 5)).is_none());
        assert_eq!(r.find((2, 5)), Some(b));
        assert_eq!(r.find((9, 5)), Some(a));
    }

    #[test]
    fn removed_slots_change_generation_and_are_reused() {
        let mut r = Registry::new(0);
        let a = r.insert(V(9, 1)).unwrap();
        let g = r.generation(a).unwrap();
        assert_eq!(r.remove(a), Some(V(9, 1)));
        assert_eq!(r.generation(a), None);
        assert_eq!(r.find((9, 1)), None);
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
            assert_eq!(r.find((9, id)), Some(slot));
        }
        for (&id, &slot) in ids.iter().zip(&slots).step_by(2) {
            assert_eq!(r.remove(slot), Some(V(9, id)));
        }
        for (i, (&id, &slot)) in ids.iter().zip(&slots).enumerate() {
            let expect = if i % 2 == 0 { None } else { Some(slot) };
            assert_eq!(r.find((9, id)), expect);
        }
        assert_eq!(r.len(), ids.len() / 2);
    }
}
