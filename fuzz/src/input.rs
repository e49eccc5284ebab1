//! Reading decisions out of the fuzzer's bytes, and the deterministic input generator.

use kevent_test_rng::Rng;

/// The fuzzer's input as a stream of decisions. Past its end every read gives 0, so any
/// prefix of an input is itself a valid (shorter) input: libFuzzer's mutations and shrinking
/// work on it directly.
#[derive(Debug)]
pub struct Src<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Src<'a> {
    /// A reader over `data`.
    pub fn new(data: &'a [u8]) -> Src<'a> {
        Src { data, pos: 0 }
    }

    /// Whether every byte was read.
    pub fn is_empty(&self) -> bool {
        self.pos >= self.data.len()
    }

    /// The next byte (0 past the end).
    pub fn u8(&mut self) -> u8 {
        let b = self.data.get(self.pos).copied().unwrap_or(0);
        self.pos = self.pos.saturating_add(1);
        b
    }

    /// The next 2 bytes, little-endian.
    pub fn u16(&mut self) -> u16 {
        u16::from(self.u8()) | (u16::from(self.u8()) << 8)
    }

    /// The next 4 bytes, little-endian.
    pub fn u32(&mut self) -> u32 {
        u32::from(self.u16()) | (u32::from(self.u16()) << 16)
    }

    /// The next 8 bytes, little-endian.
    pub fn u64(&mut self) -> u64 {
        u64::from(self.u32()) | (u64::from(self.u32()) << 32)
    }

    /// A value in `0..n` (`n > 0`) from one byte (n <= 256) or four.
    pub fn below(&mut self, n: u32) -> u32 {
        if n <= 256 {
            u32::from(self.u8()) % n.max(1)
        } else {
            self.u32() % n
        }
    }

    /// `true` with probability `p`/256.
    pub fn chance(&mut self, p: u8) -> bool {
        self.u8() < p
    }

    /// One of `items` (which must not be empty).
    pub fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        let i = self.below(items.len() as u32) as usize;
        items[i.min(items.len() - 1)]
    }

    /// `n` bytes.
    pub fn bytes<const N: usize>(&mut self) -> [u8; N] {
        let mut out = [0u8; N];
        for b in &mut out {
            *b = self.u8();
        }
        out
    }
}

/// Input number `index` of the deterministic corpus for `seed`: 8 to 600 random bytes. The
/// harness decodes bytes structurally (every byte is a choice), so uniform bytes already
/// reach deep sequences: init with a ring, ADD, READY, wait, commit.
pub fn generate(seed: u64, index: u64) -> Vec<u8> {
    let mut rng = Rng::new(seed ^ index.wrapping_mul(0xD1B5_4A32_D192_ED03));
    let len = 8 + (rng.next_u64() % 593) as usize;
    let mut v = Vec::with_capacity(len + 8);
    while v.len() < len {
        v.extend_from_slice(&rng.next_u64().to_le_bytes());
    }
    v.truncate(len);
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_past_the_end_are_zero() {
        let mut s = Src::new(&[1, 2]);
        assert_eq!(s.u16(), 0x0201);
        assert!(s.is_empty());
        assert_eq!(s.u64(), 0);
    }

    #[test]
    fn corpus_is_deterministic() {
        assert_eq!(generate(7, 3), generate(7, 3));
        assert_ne!(generate(7, 3), generate(7, 4));
    }
}
