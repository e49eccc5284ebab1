//! The registry: every kevent of one queue, keyed by `(type, id)` (**D3**).
//!
//! Entries live in a slab (`Vec` of slots reused through a free list), so a kevent has a
//! stable `u32` slot index for the lifetime of its registration, and epoll tokens, the ready
//! list and the timer heap refer to it by index. Each slot carries a generation that changes
//! whenever the slot is freed, so a stale reference (an epoll event harvested just before a
//! REMOVE) is recognised and dropped.
//!
//! The key index is std's `HashMap`, whose SipHash with a per-process random key makes the
//! cost O(1) expected *whatever the ids are*: ids that collide in their low bits (all ids ≡ 42
//! mod 512) hash like any others, and the table grows with the registry, so there is no fixed
//! table to overflow (the lesson of kevent's own move from a hash table to an RB tree in
//! take18, without paying a tree's log n on every lookup).

use std::collections::HashMap;

/// A registry key: `(type, id.raw_u64)`.
pub(crate) type Key = (u32, u64);

#[derive(Debug)]
struct Slot<T> {
    generation: u32,
    value: Option<T>,
}

/// A keyed slab of `T`.
#[derive(Debug)]
pub(crate) struct Registry<T> {
    index: HashMap<Key, u32>,
    slots: Vec<Slot<T>>,
    free: Vec<u32>,
    first_generation: u32,
}

impl<T> Registry<T> {
    /// An empty registry whose generations start at `first_generation` (never zero), so that
    /// tokens of different queues rarely look alike.
    pub(crate) fn new(first_generation: u32) -> Self {
        Registry {
            index: HashMap::new(),
            slots: Vec::new(),
            free: Vec::new(),
            first_generation: first_generation | 1,
        }
    }

    /// Number of registered kevents.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.index.len()
    }

    /// The slot of `key`, if registered.
    pub(crate) fn find(&self, key: Key) -> Option<u32> {
        self.index.get(&key).copied()
    }

    /// Registers `value` under `key`; `None` (nothing changed) if the key exists.
    pub(crate) fn insert(&mut self, key: Key, value: T) -> Option<u32> {
        use std::collections::hash_map::Entry;
        let Entry::Vacant(vacant) = self.index.entry(key) else {
            return None;
        };
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
        vacant.insert(slot);
        Some(slot)
    }

    /// Unregisters `key`'s slot and returns its value.
    pub(crate) fn remove(&mut self, key: Key, slot: u32) -> Option<T> {
        let s = self.slots.get_mut(slot as usize)?;
        let value = s.value.take()?;
        s.generation = s.generation.wrapping_add(2) | 1;
        self.index.remove(&key);
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

    #[test]
    fn d3_type_is_part_of_the_key() {
        let mut r = Registry::new(7);
        let a = r.insert((9, 5), "unotify").unwrap();
        let b = r.insert((2, 5), "timer").unwrap();
        assert_ne!(a, b);
        assert!(r.insert((9, 5), "again").is_none());
        assert_eq!(r.find((2, 5)), Some(b));
    }

    #[test]
    fn removed_slots_change_generation_and_are_reused() {
        let mut r = Registry::new(0);
        let a = r.insert((9, 1), 1).unwrap();
        let g = r.generation(a).unwrap();
        assert_eq!(r.remove((9, 1), a), Some(1));
        assert_eq!(r.generation(a), None);
        assert_eq!(r.find((9, 1)), None);
        let b = r.insert((9, 2), 2).unwrap();
        assert_eq!(a, b);
        assert_ne!(r.generation(b).unwrap(), g);
        assert_ne!(r.generation(b).unwrap(), 0);
    }

    #[test]
    fn colliding_ids_register_and_remove() {
        let mut r = Registry::new(3);
        let ids: Vec<u64> = (0..20_000u64).map(|i| 42 + 512 * i).collect();
        let slots: Vec<u32> = ids
            .iter()
            .map(|&id| r.insert((9, id), id).unwrap())
            .collect();
        assert_eq!(r.len(), ids.len());
        for (&id, &slot) in ids.iter().zip(&slots) {
            assert_eq!(r.find((9, id)), Some(slot));
            assert_eq!(r.remove((9, id), slot), Some(id));
        }
        assert_eq!(r.len(), 0);
    }
}
