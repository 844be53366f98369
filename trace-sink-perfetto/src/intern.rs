//! Interning: the strings a sequence gives once and then names by iid, and
//! the fast hasher of the writer thread's maps.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// Interned strings of one kind on one sequence: iids count from 1.
#[derive(Debug, Default)]
pub(crate) struct Interner {
    iids: HashMap<String, u64, FastHash>,
}

/// The maps the writer thread looks up per event: keyed by short strings and
/// thread ids, which [`FastHasher`] hashes for less than SipHash.
pub(crate) type FastHash = BuildHasherDefault<FastHasher>;

/// A hasher for short interned strings and integer keys: a word at a time, one
/// multiplication each, instead of SipHash's rounds (no untrusted input
/// reaches it).
#[derive(Default, Clone, Copy)]
pub(crate) struct FastHasher(u64);

impl FastHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        const K: u64 = 0x9e37_79b9_7f4a_7c15;
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(K);
    }
}

impl Hasher for FastHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.add(u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]));
        }
        for &b in chunks.remainder() {
            self.add(u64::from(b));
        }
    }
    #[inline]
    fn write_u64(&mut self, value: u64) {
        self.add(value);
    }
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
}

impl Interner {
    /// The iid of `s`, and whether this is its first use (its packet then
    /// gives the string with the iid).
    #[inline]
    pub(crate) fn intern(&mut self, s: &str) -> (u64, bool) {
        if let Some(&iid) = self.iids.get(s) {
            return (iid, false);
        }
        let iid = self.iids.len() as u64 + 1;
        self.iids.insert(s.to_string(), iid);
        (iid, true)
    }
}
