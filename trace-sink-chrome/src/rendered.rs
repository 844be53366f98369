//! Pieces of JSON rendered once and reused while the strings they were made
//! from stay the same: a span's `"name":…,"cat":…,"ph":…` (its call site's)
//! and the `"key":` of each field name.
//!
//! A piece is found by the address of its strings. A piece made from
//! `'static` strings (a `tracing` call site's, which the caller says) answers
//! a lookup of `'static` strings by their addresses and lengths alone: their
//! text cannot change. Any other hit is confirmed by comparing the strings
//! with the ones it was made from, which costs less than scanning them for
//! bytes to escape and copying them in pieces, and keeps the answer right
//! whatever lives at that address now (a reused buffer).

/// One rendered piece and the strings it was made from.
#[derive(Debug, Default)]
struct Piece {
    /// The addresses of the strings, and which of its forms the piece is.
    key: ([usize; 2], u8),
    /// The strings, as they were when the piece was rendered.
    strings: [String; 2],
    /// Whether they were `'static` (see [`Rendered::get`]).
    fixed: bool,
    bytes: Vec<u8>,
}

/// A small table of rendered pieces, one per slot: a piece whose slot is
/// taken by another is rendered again when it next comes.
#[derive(Debug, Default)]
pub(crate) struct Rendered {
    /// Made with the first lookup; each piece when its slot is first used
    /// (a table of the pieces themselves, 6 KiB, cost a short capture two
    /// fresh pages a table, each a page fault of 3 µs here).
    slots: Vec<Option<Box<Piece>>>,
}

/// Slots of a table: more than the call sites a run of spans comes from.
const SLOT_BITS: u32 = 6;

impl Rendered {
    /// The piece for `strings` in form `form`, rendered by `render` if the
    /// table does not hold it. `fixed`: both strings are `'static`, so the
    /// same addresses and lengths always hold the same text.
    #[inline]
    pub(crate) fn get(
        &mut self,
        strings: [&str; 2],
        form: u8,
        fixed: bool,
        render: impl FnOnce(&mut Vec<u8>, [&str; 2]),
    ) -> &[u8] {
        if self.slots.is_empty() {
            self.slots.resize_with(1 << SLOT_BITS, || None);
        }
        let key = ([strings[0].as_ptr() as usize, strings[1].as_ptr() as usize], form);
        // Multiplied so that strings a few bytes apart (the field names of one
        // call site sit next to each other) land in different slots.
        let mixed = (key.0[0] ^ key.0[1].rotate_left(17)).wrapping_mul(0x9e37_79b9_7f4a_7c15_u64 as usize);
        // Below 2^SLOT_BITS, the table's length.
        let piece = self.slots[mixed >> (usize::BITS - SLOT_BITS)].get_or_insert_with(Box::default);
        let same = piece.key == key
            && if fixed && piece.fixed {
                piece.strings[0].len() == strings[0].len() && piece.strings[1].len() == strings[1].len()
            } else {
                piece.strings[0] == strings[0] && piece.strings[1] == strings[1]
            };
        if !same {
            piece.key = key;
            piece.fixed = fixed;
            for (kept, s) in piece.strings.iter_mut().zip(strings) {
                kept.clear();
                kept.push_str(s);
            }
            piece.bytes.clear();
            render(&mut piece.bytes, strings);
        }
        &piece.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(b: &mut Vec<u8>, [a, c]: [&str; 2]) {
        b.extend_from_slice(a.as_bytes());
        b.push(b'/');
        b.extend_from_slice(c.as_bytes());
    }

    #[test]
    fn new_text_at_the_address_of_a_rendered_string_is_rendered_again() {
        let mut table = Rendered::default();
        let mut buf = String::from("compile");
        assert_eq!(table.get([&buf, "cat"], 0, false, render), b"compile/cat");
        assert_eq!(table.get([&buf, "cat"], 0, false, |_, _| panic!("rendered twice")), b"compile/cat");
        buf.replace_range(.., "linking");
        assert_eq!(table.get([&buf, "cat"], 0, false, render), b"linking/cat");
        assert_eq!(table.get([&buf, "cat"], 1, false, |b, _| b.push(b'1')), b"1", "another form");
        // Looked up as static, the piece a borrowed lookup left is still checked by text.
        buf.replace_range(.., "testing");
        assert_eq!(table.get([&buf, "cat"], 1, true, |b, _| b.push(b'2')), b"2");
    }

    #[test]
    fn static_strings_are_answered_by_address_and_length() {
        static NAME: &str = "compile_unit";
        let mut table = Rendered::default();
        assert_eq!(table.get([NAME, "cat"], 0, true, render), b"compile_unit/cat");
        assert_eq!(table.get([NAME, "cat"], 0, true, |_, _| panic!("rendered twice")), b"compile_unit/cat");
        // A prefix at the same address is other text.
        assert_eq!(table.get([&NAME[..7], "cat"], 0, true, render), b"compile/cat");
    }
}
