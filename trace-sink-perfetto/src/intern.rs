//! Interning: the strings a sequence gives once and then names by iid, and
//! the fast hasher of the writer thread's maps.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// Interned strings of one kind on one sequence: iids count from 1.
///
/// Most lookups are of the same few strings at the same addresses (a call
/// site's name and target, its fields' names), so a small table by address
/// answers them first. A `'static` string (a `tracing` call site's, which the
/// caller says with `fixed`) is recognised by its address and length alone:
/// its text cannot change. Any other hit is confirmed by comparing the string
/// with the one interned under that iid, which costs less than hashing it,
/// and keeps the answer right whatever lives at that address now.
#[derive(Debug, Default)]
pub(crate) struct Interner {
    iids: HashMap<String, u64, FastHash>,
    /// The interned strings, by iid - 1.
    names: Vec<Box<str>>,
    /// By address: the address of a string looked up lately and its iid.
    recent: Recent,
}

const RECENT_BITS: u32 = 6;
const RECENT: usize = 1 << RECENT_BITS;

/// A slot: a string's address, its length with [`FIXED`] set when it was
/// looked up as `'static`, and its iid (0: empty).
#[derive(Debug)]
struct Recent([(usize, usize, u64); RECENT]);

/// The bit of a slot's length that says its string is `'static`.
const FIXED: usize = 1 << (usize::BITS - 1);

impl Default for Recent {
    fn default() -> Self {
        Recent([(0, 0, 0); RECENT])
    }
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
    /// gives the string with the iid). `fixed`: `s` is `'static` (a `tracing`
    /// call site's string), so the same address and length always hold the
    /// same text.
    #[inline(always)]
    pub(crate) fn intern(&mut self, s: &str, fixed: bool) -> (u64, bool) {
        let addr = s.as_ptr() as usize;
        // Multiplied so that strings a few bytes apart (the field names of
        // one call site sit next to each other) land in different slots.
        let slot =
            (addr.wrapping_mul(0x9e37_79b9_7f4a_7c15_u64 as usize) >> (usize::BITS - RECENT_BITS)) % RECENT;
        let (seen, len, iid) = self.recent.0[slot];
        if seen == addr && iid != 0 {
            // A slot filled by a `'static` lookup answers another one by its
            // length; anything else is checked against the text.
            if fixed && len == s.len() | FIXED {
                return (iid, false);
            }
            if self.names.get(iid as usize - 1).is_some_and(|n| **n == *s) {
                return (iid, false);
            }
        }
        self.intern_by_text(s, slot, fixed)
    }

    /// [`Interner::intern`] for a string the table by address does not
    /// answer: found by its text, or interned now.
    #[inline(never)]
    fn intern_by_text(&mut self, s: &str, slot: usize, fixed: bool) -> (u64, bool) {
        let found = match self.iids.get(s) {
            Some(&iid) => (iid, false),
            None => {
                let iid = self.iids.len() as u64 + 1;
                self.iids.insert(s.to_string(), iid);
                self.names.push(s.into());
                (iid, true)
            }
        };
        let len = if fixed { s.len() | FIXED } else { s.len() };
        self.recent.0[slot] = (s.as_ptr() as usize, len, found.0);
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_string_at_the_address_of_an_interned_one_gets_its_own_iid() {
        let mut interner = Interner::default();
        let mut buf = String::from("compile");
        assert_eq!(interner.intern(&buf, false), (1, true));
        assert_eq!(interner.intern(&buf, false), (1, false), "the same string, found by its address");
        // Other text at the same address: the address alone must not answer.
        buf.replace_range(.., "linking");
        assert_eq!(interner.intern(&buf, false), (2, true));
        assert_eq!(interner.intern("compile", false), (1, false), "found by its text from anywhere");
        assert_eq!(interner.intern(&buf, false), (2, false));
    }

    #[test]
    fn a_static_string_is_answered_by_its_address_and_length_and_nothing_else_is() {
        static TEXT: &str = "compile_unit";
        let mut interner = Interner::default();
        assert_eq!(interner.intern(TEXT, true), (1, true));
        assert_eq!(interner.intern(TEXT, true), (1, false));
        // A prefix at the same address (a linker may merge the two) is its own string.
        assert_eq!(interner.intern(&TEXT[..7], true), (2, true));
        assert_eq!(interner.intern(&TEXT[..7], true), (2, false));
        assert_eq!(interner.intern(TEXT, true), (1, false));
        // A buffer looked up as borrowed, then reused with other text of the
        // same length and looked up as static: the slot it left must not
        // answer, since it was not filled by a static lookup.
        let mut buf = String::from("compile_unit");
        assert_eq!(interner.intern(&buf, false), (1, false));
        buf.replace_range(.., "linking_unit");
        assert_eq!(interner.intern(&buf, true), (3, true), "new text is a new string");
    }
}
