//! The one hash of the maps keyed by file descriptors and kevent keys: a folded
//! multiplication per word, with or without a seed.
//!
//! The keys are a program's own small integers (fd numbers, kevent types and ids), not input
//! an attacker chooses to collide, and the maps are looked up on hot paths: the epoll shim's
//! instance table and ONESHOT map on every `epoll_ctl`/`epoll_wait` it serves, the safe
//! API's key owners on every ADD and REMOVE. SipHash, std's default, cost the safe API about
//! 2,400 instructions per connection's ADD and REMOVE (issue 21, measured with callgrind).
//!
//! * [`FdMap`] hashes with the unseeded hasher ([`FoldHasher::default`]): one
//!   multiplication per key, the same in every process (the shim's tables).
//! * [`SeededHash`] builds hashers from a random seed, drawn once per value (the safe API
//!   draws one per queue), so that one process's keys do not collide the same way in every
//!   queue.

use std::collections::HashMap;
use std::hash::{BuildHasher, BuildHasherDefault, Hasher, RandomState};
use std::os::fd::RawFd;

/// The odd 64-bit multiplier (2^64 divided by the golden ratio): every input bit reaches
/// the middle bits of the 128-bit product.
pub const MULTIPLIER: u64 = 0x9e37_79b9_7f4a_7c15;

/// One folded multiplication per word written: the state xor the word, times
/// [`MULTIPLIER`], the 128-bit product's halves xored together. The state starts at the
/// seed (0 for [`Default`]).
///
/// The fold keeps the product's high bits, so neighbouring keys differ in the top seven bits
/// too (which hashbrown takes its control byte from) and in bits 32 and up (which the safe
/// API picks its shards from).
#[derive(Clone, Copy, Debug, Default)]
pub struct FoldHasher(u64);

impl FoldHasher {
    /// A hasher whose state starts at `seed`.
    pub const fn with_seed(seed: u64) -> FoldHasher {
        FoldHasher(seed)
    }

    #[inline]
    fn mix(&mut self, word: u64) {
        let p = u128::from(self.0 ^ word) * u128::from(MULTIPLIER);
        self.0 = (p as u64) ^ ((p >> 64) as u64);
    }
}

impl Hasher for FoldHasher {
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.mix(u64::from_le_bytes(word));
        }
    }

    #[inline]
    fn write_u32(&mut self, n: u32) {
        self.mix(u64::from(n));
    }

    #[inline]
    fn write_i32(&mut self, n: i32) {
        self.mix(u64::from(n as u32));
    }

    #[inline]
    fn write_u64(&mut self, n: u64) {
        self.mix(n);
    }
}

/// A map keyed by file descriptor, hashed with the unseeded [`FoldHasher`].
pub type FdMap<V> = HashMap<RawFd, V, BuildHasherDefault<FoldHasher>>;

/// Builds [`FoldHasher`]s that start at one random seed.
#[derive(Clone, Copy, Debug)]
pub struct SeededHash {
    seed: u64,
}

impl SeededHash {
    /// A fresh random seed (one SipHash of std's per-process random keys, advanced per call).
    pub fn new() -> SeededHash {
        SeededHash {
            seed: RandomState::new().hash_one(MULTIPLIER),
        }
    }
}

impl Default for SeededHash {
    fn default() -> SeededHash {
        SeededHash::new()
    }
}

impl BuildHasher for SeededHash {
    type Hasher = FoldHasher;

    #[inline]
    fn build_hasher(&self) -> FoldHasher {
        FoldHasher::with_seed(self.seed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fd_maps_keep_every_key_apart() {
        let b = BuildHasherDefault::<FoldHasher>::default();
        // Neighbouring descriptors get different hashes, in their high bits too (hashbrown
        // takes its control byte from the top seven).
        let hashes: std::collections::HashSet<u64> = (0..4096).map(|fd| b.hash_one(fd)).collect();
        assert_eq!(hashes.len(), 4096);
        let tops: std::collections::HashSet<u64> =
            (0..128).map(|fd| b.hash_one(fd) >> 57).collect();
        assert!(tops.len() > 32, "{}", tops.len());
        let mut m: FdMap<u32> = FdMap::default();
        for fd in (-5..20000).step_by(7) {
            m.insert(fd, fd as u32 ^ 0x55);
        }
        for fd in (-5..20000).step_by(7) {
            assert_eq!(m.get(&fd), Some(&(fd as u32 ^ 0x55)));
            assert_eq!(m.get(&(fd + 1)), None);
        }
    }

    #[test]
    fn unseeded_hashes_are_the_same_everywhere_and_seeds_differ() {
        let a = BuildHasherDefault::<FoldHasher>::default();
        let b = BuildHasherDefault::<FoldHasher>::default();
        assert_eq!(a.hash_one(7i32), b.hash_one(7i32));
        // Two seeded builders hash the same key differently (two random 64-bit seeds agree
        // with probability 2^-64).
        let (s, t) = (SeededHash::new(), SeededHash::new());
        assert_ne!(s.hash_one(7u64), t.hash_one(7u64));
        assert_eq!(s.hash_one(7u64), s.hash_one(7u64));
    }

    #[test]
    fn a_byte_string_hashes_by_eight_byte_words() {
        let mut h = FoldHasher::default();
        h.write(&[1, 0, 0, 0, 0, 0, 0, 0, 2]);
        let mut w = FoldHasher::default();
        w.write_u64(1);
        w.write_u64(2);
        assert_eq!(h.finish(), w.finish());
    }
}
