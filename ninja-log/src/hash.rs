//! Hashing for the reader: [`hash_bytes`] for byte strings (outputs and
//! lines), and [`Index`], a compact table for the large sets, one entry per
//! line or output of a log.
//!
//! The standard library's SipHash resists collisions chosen by an attacker,
//! which a log the caller's own build wrote does not need, and costs several
//! times more per key; `hash_bytes` folds 16 bytes per multiply. Nothing
//! depends on the order of a table, and every lookup compares the items
//! themselves, so hashes change only speed, never what the reader says (the
//! crate's own tests check that with hashes that collide on purpose: see
//! [`weakened`]).

/// The hash of a byte string, for the [`Index`]es: 16 bytes per folded
/// multiply (as in wyhash or foldhash).
#[inline]
pub(crate) fn hash_bytes(bytes: &[u8]) -> u64 {
    weakened(strong_hash_bytes(bytes))
}

/// [`hash_bytes`], whatever the build.
#[inline]
fn strong_hash_bytes(bytes: &[u8]) -> u64 {
    let n = bytes.len();
    let mut acc = fold(n as u64 ^ K[0], K[1]);
    if n > 16 {
        let (chunks, _) = bytes[..n - 1].as_chunks::<16>();
        for chunk in chunks {
            acc = fold(word(&chunk[..8]) ^ acc, word(&chunk[8..]) ^ K[1]);
        }
    }
    // The last 16 bytes (overlapping the chunks), or what there is: read in
    // place, as copying them to an array first would stall the loads.
    let (a, b) = match n {
        16.. => (word(&bytes[n - 16..]), word(&bytes[n - 8..])),
        8..16 => (word(bytes), word(&bytes[n - 8..])),
        4..8 => (half(bytes), half(&bytes[n - 4..])),
        1..4 => (u64::from(bytes[0]) << 16 | u64::from(bytes[n / 2]) << 8 | u64::from(bytes[n - 1]), 0),
        0 => (0, 0),
    };
    hash_words(acc, a, b)
}

/// The hash itself, except in the crate's own tests: there it keeps only 4
/// of its 64 bits, so that different items share hashes all the time and
/// every path that tells them apart runs (the tests in `tests/` use the
/// real hash).
#[cfg(not(test))]
#[inline(always)]
pub(crate) fn weakened(hash: u64) -> u64 {
    hash
}

/// See the other `weakened`.
#[cfg(test)]
pub(crate) fn weakened(hash: u64) -> u64 {
    hash & (0xf << 60)
}

/// A hash of a word of state and two more words.
#[inline(always)]
pub(crate) fn hash_words(acc: u64, a: u64, b: u64) -> u64 {
    fold(fold(a ^ acc, b ^ K[2]), K[0])
}

const K: [u64; 3] = [0x243f_6a88_85a3_08d3, 0x1319_8a2e_0370_7344, 0xa409_3822_299f_31d0];

/// The first eight bytes of `b` (which has them) as a little-endian word.
#[inline(always)]
pub(crate) fn word(b: &[u8]) -> u64 {
    b.first_chunk::<8>().map_or(0, |w| u64::from_le_bytes(*w))
}

/// The first four bytes of `b` (which has them) as a little-endian number.
#[inline(always)]
fn half(b: &[u8]) -> u64 {
    b.first_chunk::<4>().map_or(0, |w| u64::from(u32::from_le_bytes(*w)))
}

/// The 128-bit product of two words, folded to 64 bits.
#[inline(always)]
fn fold(a: u64, b: u64) -> u64 {
    let product = u128::from(a) * u128::from(b);
    (product as u64) ^ ((product >> 64) as u64)
}

/// A table from items to their positions (offsets in a buffer, or indices
/// in a list), found by the items' hashes. A slot is one `u64`: the
/// position plus one in the low bits, as many of the hash's high bits as fit
/// above them, and 0 for a free slot. The high bits of the hash also choose
/// the slot, so the table can grow without hashing its items again, as long
/// as they fit (they do unless positions need more than 40 bits; past that
/// the table asks the caller). Whether the item at a stored position is the
/// one looked for is up to the caller, asked only when those bits match.
///
/// The reader's large maps (one entry per line of a log) are these: eight
/// bytes a slot instead of 32 or more keeps them in the processor's caches,
/// and each lookup is a probe of one array.
pub(crate) struct Index {
    slots: Vec<u64>,
    /// Set in the low bits of a slot, the ones holding a position.
    low: u64,
    /// How many slots are taken.
    len: usize,
}

/// Where [`Index::find`] stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Slot {
    /// At a slot holding the position of the item looked for.
    Taken { slot: usize, position: usize },
    /// At a free slot: the item is not in the index.
    Free(usize),
}

impl Index {
    /// An index with room for `items` items at positions below `positions`
    /// before it grows.
    pub(crate) fn new(items: usize, positions: usize) -> Index {
        // At most 80% full.
        let size =
            items.saturating_add(items / 4).saturating_add(1).checked_next_power_of_two().unwrap_or(1 << 62);
        let bits = u64::BITS - (positions as u64).saturating_add(1).leading_zeros();
        let low = u64::MAX.checked_shr(u64::BITS - bits).unwrap_or(0);
        Index { slots: vec![0; size.max(8)], low, len: 0 }
    }

    /// How many slots there are (slots are numbered from 0); a slot's number
    /// changes only when the index grows.
    pub(crate) fn slots(&self) -> usize {
        self.slots.len()
    }

    /// How many items the index holds.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The first slot to probe for `hash`: its high bits.
    #[inline]
    fn home(&self, hash: u64) -> usize {
        (hash >> (u64::BITS - self.slots.len().trailing_zeros())) as usize
    }

    /// The slot of the item with `hash` for which `same` (given a stored
    /// position) is true, or the free slot where it would go.
    #[inline]
    pub(crate) fn find(&self, hash: u64, mut same: impl FnMut(usize) -> bool) -> Slot {
        let mask = self.slots.len() - 1;
        let high = hash & !self.low;
        let mut slot = self.home(hash);
        loop {
            match self.slots[slot] {
                0 => return Slot::Free(slot),
                s if s & !self.low == high => {
                    let position = (s & self.low) as usize - 1;
                    if same(position) {
                        return Slot::Taken { slot, position };
                    }
                }
                _ => {}
            }
            slot = (slot + 1) & mask;
        }
    }

    /// The position of the item with `hash` for which `same` is true.
    #[inline]
    pub(crate) fn get(&self, hash: u64, same: impl FnMut(usize) -> bool) -> Option<usize> {
        match self.find(hash, same) {
            Slot::Taken { position, .. } => Some(position),
            Slot::Free(_) => None,
        }
    }

    /// Stores `position` for an item with `hash`, in the slot [`Index::find`]
    /// returned for it. When the index is full, it grows, and if positions
    /// leave too few bits of hash in a slot to find its new place, asks
    /// `rehash` for the hash of the item at each stored position.
    #[inline]
    pub(crate) fn set(&mut self, slot: Slot, hash: u64, position: usize, rehash: impl Fn(usize) -> u64) {
        let entry = (hash & !self.low) | ((position as u64 + 1) & self.low);
        match slot {
            Slot::Taken { slot, .. } => self.slots[slot] = entry,
            Slot::Free(slot) if (self.len + 1) * 5 <= self.slots.len() * 4 => {
                self.slots[slot] = entry;
                self.len += 1;
            }
            Slot::Free(_) => {
                self.grow(rehash);
                if let Slot::Free(slot) = self.find(hash, |_| false) {
                    self.slots[slot] = entry;
                    self.len += 1;
                }
            }
        }
    }

    fn grow(&mut self, rehash: impl Fn(usize) -> u64) {
        let size = self.slots.len() * 2;
        let old = std::mem::replace(&mut self.slots, vec![0; size]);
        // Whether a slot keeps all the bits that choose its home.
        let kept = (u64::BITS - size.trailing_zeros()) as u64 >= u64::from(self.low.count_ones());
        let mask = size - 1;
        for s in old.into_iter().filter(|&s| s != 0) {
            let hash = if kept { s } else { rehash((s & self.low) as usize - 1) };
            let mut slot = self.home(hash);
            while self.slots[slot] != 0 {
                slot = (slot + 1) & mask;
            }
            self.slots[slot] = s;
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn hash_bytes_sees_every_byte_and_the_length() {
        use super::strong_hash_bytes as hash_bytes;
        for n in 0..80usize {
            let base: Vec<u8> = (0..n as u8).map(|i| i.wrapping_mul(37)).collect();
            let mut hashes = std::collections::HashSet::new();
            assert!(hashes.insert(hash_bytes(&base)));
            for i in 0..n {
                for flip in [0x01, 0x80] {
                    let mut other = base.clone();
                    other[i] ^= flip;
                    assert!(hashes.insert(hash_bytes(&other)), "length {n}, byte {i}, bit {flip:#x}");
                }
            }
            let mut longer = base.clone();
            longer.push(0);
            assert!(hashes.insert(hash_bytes(&longer)), "length {n} + 1");
        }
    }

    #[test]
    fn hash_bytes_spreads_its_high_bits() {
        // The index picks a slot with the high bits.
        let slots: std::collections::HashSet<u64> = (0..4096)
            .map(|i| {
                super::strong_hash_bytes(format!("obj/module_{:03}/file_{i:06}.cc.o", i % 211).as_bytes())
                    >> 52
            })
            .collect();
        assert!(slots.len() > 2400, "{}", slots.len());
    }

    /// Against a map, with hashes made to collide: few values, or values
    /// that differ only in their low bits (where positions go).
    #[test]
    fn the_index_agrees_with_a_map() {
        use super::{Index, Slot};
        let mut rng = 0x1234_5678_u64;
        let mut next = || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        for round in 0..200 {
            let items: Vec<u64> = (0..1 + next() % 300).map(|_| next() % (1 + round % 50)).collect();
            let hash = |x: u64| match round % 4 {
                0 => x % 3,
                1 => x,
                2 => x << 60,
                _ => super::strong_hash_bytes(&x.to_le_bytes()),
            };
            // Sized too small, so that it grows.
            // Positions of 63 bits leave no hash in a slot: then it grows
            // by hashing its items again.
            let positions = if round % 3 == 0 { usize::MAX / 2 } else { items.len() };
            let mut index = Index::new(1 + round as usize % 7, positions);
            let mut map = std::collections::HashMap::new();
            for (i, &x) in items.iter().enumerate() {
                let slot = index.find(hash(x), |p| items[p] == x);
                match (slot, map.get(&x)) {
                    (Slot::Taken { position, .. }, Some(&p)) => assert_eq!(position, p),
                    (Slot::Free(_), None) => {}
                    other => panic!("round {round}: {other:?}"),
                }
                // Keep the latest position of each, as the reader does.
                index.set(slot, hash(x), i, |p| hash(items[p]));
                map.insert(x, i);
                assert_eq!(index.len(), map.len());
            }
            for (&x, &p) in &map {
                assert_eq!(index.get(hash(x), |q| items[q] == x), Some(p));
            }
            assert_eq!(index.get(hash(u64::MAX), |q| items[q] == u64::MAX), None);
        }
    }
}
