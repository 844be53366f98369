//! Interning: the strings a sequence gives once and then names by iid.

use rustc_hash::FxHashMap;

/// Interned strings of one kind (event names, categories or annotation
/// names) on one sequence: iids count from 1 (0 means "none" to Perfetto).
#[derive(Debug, Default)]
pub(crate) struct Interner {
    iids: FxHashMap<Box<str>, u64>,
    /// `'static` strings looked up lately, by address: `(address, length,
    /// iid)`, in the slot their address picks.
    by_address: Option<Box<[(usize, usize, u64); SLOTS]>>,
}

/// Slots of the table by address: more than the names, targets and field
/// names a sequence meets in a loop.
const SLOTS: usize = 64;

impl Interner {
    /// [`Interner::intern`] for a string the caller knows to be `'static`
    /// (a `tracing` call site's name, target or field name,
    /// [`trace_core::Site::has_static_text`]): the same address and length
    /// always hold the same text, so a string met lately is answered by its
    /// address, with no hashing of its text. Only such strings fill the table.
    /// Kept by the rule of docs/dev/performance-history.md (2026-12-06,
    /// evening): most strings of a trace are these.
    #[inline]
    pub(crate) fn intern_static(&mut self, s: &str) -> (u64, bool) {
        let key = (s.as_ptr() as usize, s.len());
        // Multiplied so that strings a few bytes apart (the field names of one
        // call site sit next to each other) land in different slots.
        let slot = (key.0.wrapping_mul(0x9e37_79b9_7f4a_7c15_u64 as usize) >> (usize::BITS - 6)) % SLOTS;
        let table = self.by_address.get_or_insert_with(|| Box::new([(0, 0, 0); SLOTS]));
        let (address, len, iid) = table[slot];
        if (address, len) == key && iid != 0 {
            return (iid, false);
        }
        let found = self.intern(s);
        if let Some(table) = self.by_address.as_mut() {
            table[slot] = (key.0, key.1, found.0);
        }
        found
    }

    /// The iid of `s`, and whether this is its first use (its packet then
    /// gives the string with the iid, in its `interned_data`).
    #[inline]
    pub(crate) fn intern(&mut self, s: &str) -> (u64, bool) {
        if let Some(&iid) = self.iids.get(s) {
            return (iid, false);
        }
        let iid = self.iids.len() as u64 + 1;
        self.iids.insert(s.into(), iid);
        (iid, true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iids_count_from_one_and_a_string_is_new_only_the_first_time() {
        let mut interner = Interner::default();
        assert_eq!(interner.intern("compile"), (1, true));
        assert_eq!(interner.intern("link"), (2, true));
        let mut buf = String::from("compile");
        assert_eq!(interner.intern(&buf), (1, false), "found by its text, wherever it lives");
        buf.replace_range(.., "linked!");
        assert_eq!(interner.intern(&buf), (3, true), "new text at the same address is a new string");
        assert_eq!(interner.intern(""), (4, true));
        assert_eq!(interner.intern(""), (4, false));
    }

    #[test]
    fn a_static_string_is_answered_by_its_address_and_a_prefix_at_that_address_is_its_own() {
        static TEXT: &str = "compile_unit";
        let mut interner = Interner::default();
        assert_eq!(interner.intern_static(TEXT), (1, true));
        assert_eq!(interner.intern_static(TEXT), (1, false));
        assert_eq!(interner.intern_static(&TEXT[..7]), (2, true), "same address, other length");
        assert_eq!(interner.intern_static(TEXT), (1, false));
        assert_eq!(interner.intern("compile_unit"), (1, false), "one table of iids for both lookups");
        // A borrowed string never fills the table by address.
        let mut buf = String::from("linking_unit");
        assert_eq!(interner.intern(&buf), (3, true));
        buf.replace_range(.., "loading_unit");
        assert_eq!(interner.intern(&buf), (4, true));
    }
}
