//! A fast, non-cryptographic hash for the VM's hot tables (enablings, dynamic variables,
//! aggregation keys). Keys there come from the traced system and the program, not from an
//! adversary choosing collisions, so SipHash's protection is not worth its cost per firing.

use std::hash::{BuildHasherDefault, Hasher};

/// Multiply-rotate hashing over 8-byte words (the FxHash scheme).
#[derive(Default, Clone, Copy)]
pub struct FastHasher(u64);

const K: u64 = 0x517c_c1b7_2722_0a95;

impl FastHasher {
    #[inline]
    fn add(&mut self, w: u64) {
        self.0 = (self.0.rotate_left(5) ^ w).wrapping_mul(K);
    }
}

impl Hasher for FastHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.add(u64::from_le_bytes(w));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let n = rest.len();
            let w = if bytes.len() >= 8 {
                // the last 8 bytes, shifted so only the remainder is left: the same word as
                // the zero-padded remainder, without a variable-length copy
                let mut w = [0u8; 8];
                w.copy_from_slice(&bytes[bytes.len() - 8..]);
                u64::from_le_bytes(w) >> (8 * (8 - n))
            } else {
                let mut w = [0u8; 8];
                w[..n].copy_from_slice(rest);
                u64::from_le_bytes(w)
            };
            self.add(w ^ ((n as u64) << 59));
        }
    }

    #[inline]
    fn write_u8(&mut self, n: u8) {
        self.add(n as u64);
    }

    #[inline]
    fn write_u32(&mut self, n: u32) {
        self.add(n as u64);
    }

    #[inline]
    fn write_u64(&mut self, n: u64) {
        self.add(n);
    }

    #[inline]
    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }

    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
}

pub type FastBuild = BuildHasherDefault<FastHasher>;
pub type FastMap<K, V> = std::collections::HashMap<K, V, FastBuild>;
pub type FastSet<K> = std::collections::HashSet<K, FastBuild>;

/// Hash of a byte string.
#[inline]
pub fn hash_bytes(b: &[u8]) -> u64 {
    let mut h = FastHasher::default();
    h.write(b);
    // final avalanche so that low bits are usable by open addressing
    let x = h.finish();
    (x ^ (x >> 29)).wrapping_mul(0xbf58_476d_1ce4_e5b9) ^ (x >> 32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distinct_inputs_hash_differently() {
        let mut seen = std::collections::HashSet::new();
        for i in 0u64..10_000 {
            assert!(seen.insert(hash_bytes(&i.to_le_bytes())));
        }
        assert_ne!(hash_bytes(b"ab"), hash_bytes(b"ab\0"));
        // the tail of a long string hashes as its zero-padded remainder would
        let long = b"0123456789abc";
        let mut h = FastHasher::default();
        h.add(u64::from_le_bytes(*b"01234567"));
        h.add(u64::from_le_bytes(*b"89abc\0\0\0") ^ (5u64 << 59));
        let mut g = FastHasher::default();
        g.write(long);
        assert_eq!(g.finish(), h.finish());
        let mut m: FastMap<(u32, u64), u32> = FastMap::default();
        m.insert((1, 2), 3);
        assert_eq!(m.get(&(1, 2)), Some(&3));
    }
}
