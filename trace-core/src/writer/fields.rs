//! A span's fields as the writer keeps them while the span lives.
//!
//! A string value is a range of one text buffer that the list owns, not a
//! `String` of its own: a list emptied and reused for a later span
//! (`Writer::reuse`) keeps both its entries' and its text's room, so a span
//! with string fields costs no allocation and no free for each of them.

use crate::event::{Field, Value};
use crate::record::{Batch, RawField, RawValue};

/// One value of [`SpanFields`].
#[derive(Clone, Copy, Debug)]
enum Slot {
    I64(i64),
    U64(u64),
    F64(f64),
    Bool(bool),
    /// Bytes `start..start + len` of the list's text.
    Str {
        start: usize,
        len: usize,
    },
}

/// Text no field uses any more (a string replaced by a later record) is
/// dropped once there is this much of it and more than is in use.
const COMPACT_AT: usize = 4096;

/// The fields of one span, named by its call site, with their latest values.
#[derive(Debug, Default)]
pub(crate) struct SpanFields {
    fields: Vec<(&'static str, Slot)>,
    text: String,
    /// Bytes of `text` that no field uses.
    unused: usize,
}

impl SpanFields {
    /// Forgets every field, keeping the room.
    pub(crate) fn clear(&mut self) {
        self.fields.clear();
        self.text.clear();
        self.unused = 0;
    }

    /// Whether the list holds room worth keeping for a later span.
    pub(crate) fn has_room(&self) -> bool {
        self.fields.capacity() > 0 || self.text.capacity() > 0
    }

    /// The values of a record, as its batch holds them, appended.
    #[inline]
    pub(crate) fn extend(&mut self, batch: &Batch, fields: &[RawField]) {
        for f in fields {
            let slot = self.slot(batch, &f.value);
            self.fields.push((f.name, slot));
        }
    }

    /// Sets field `name` to `value` (from `batch`), replacing its value if it
    /// has one and appending it otherwise.
    pub(crate) fn set(&mut self, name: &'static str, batch: &Batch, value: &RawValue) {
        let slot = self.slot(batch, value);
        match self.fields.iter_mut().find(|(n, _)| *n == name) {
            Some(entry) => {
                if let Slot::Str { len, .. } = entry.1 {
                    self.unused += len;
                }
                entry.1 = slot;
            }
            None => self.fields.push((name, slot)),
        }
        if self.unused >= COMPACT_AT && self.unused > self.text.len() / 2 {
            self.compact();
        }
    }

    /// Appends the fields to `to`, borrowed.
    #[inline]
    pub(crate) fn borrow_into<'a>(&'a self, to: &mut Vec<Field<'a>>) {
        to.extend(self.fields.iter().map(|&(name, slot)| Field { name, value: self.value(slot) }));
    }

    #[inline]
    fn value(&self, slot: Slot) -> Value<'_> {
        match slot {
            Slot::I64(v) => Value::I64(v),
            Slot::U64(v) => Value::U64(v),
            Slot::F64(v) => Value::F64(v),
            Slot::Bool(v) => Value::Bool(v),
            Slot::Str { start, len } => Value::Str(self.text.get(start..start + len).unwrap_or("")),
        }
    }

    #[inline]
    fn slot(&mut self, batch: &Batch, value: &RawValue) -> Slot {
        match *value {
            RawValue::I64(v) => Slot::I64(v),
            RawValue::U64(v) => Slot::U64(v),
            RawValue::F64(v) => Slot::F64(v),
            RawValue::Bool(v) => Slot::Bool(v),
            RawValue::Str { start, len } => {
                let s = batch.str_of(start, len);
                let at = self.text.len();
                self.text.push_str(s);
                Slot::Str { start: at, len: s.len() }
            }
        }
    }

    /// Rewrites the text with only the strings the fields use.
    fn compact(&mut self) {
        let old = std::mem::take(&mut self.text);
        let mut text = String::with_capacity(old.len() - self.unused);
        for (_, slot) in &mut self.fields {
            if let Slot::Str { start, len } = slot {
                let at = text.len();
                text.push_str(old.get(*start..*start + *len).unwrap_or(""));
                *start = at;
            }
        }
        self.text = text;
        self.unused = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch_with(text: &str) -> (Batch, RawValue) {
        let mut batch = Batch::default();
        batch.text.push_str(text);
        (batch, RawValue::Str { start: 0, len: text.len() as u32 })
    }

    fn values(fields: &SpanFields) -> Vec<(String, String)> {
        let mut out = Vec::new();
        fields.borrow_into(&mut out);
        out.iter().map(|f| (f.name.to_string(), format!("{:?}", f.value))).collect()
    }

    fn pair(name: &str, value: &str) -> (String, String) {
        (name.to_string(), value.to_string())
    }

    #[test]
    fn strings_live_in_the_lists_text_and_a_reused_list_starts_empty() {
        let (batch, path) = batch_with("src/main.c");
        let raw = [RawField { name: "unit", value: path }, RawField { name: "n", value: RawValue::U64(3) }];
        let mut fields = SpanFields::default();
        fields.extend(&batch, &raw);
        assert_eq!(values(&fields), [pair("unit", r#"Str("src/main.c")"#), pair("n", "U64(3)")]);
        fields.clear();
        assert!(values(&fields).is_empty() && fields.has_room());
        fields.extend(&batch, &raw[1..]);
        assert_eq!(values(&fields), [pair("n", "U64(3)")]);
    }

    #[test]
    fn a_string_set_again_and_again_keeps_the_text_bounded() {
        let mut fields = SpanFields::default();
        let (batch, first) = batch_with("first");
        fields.extend(&batch, &[RawField { name: "keep", value: first }]);
        for i in 0..10_000 {
            let (batch, value) = batch_with(&format!("progress {i}"));
            fields.set("status", &batch, &value);
        }
        assert_eq!(
            values(&fields),
            [pair("keep", r#"Str("first")"#), pair("status", r#"Str("progress 9999")"#)]
        );
        assert!(fields.text.len() < 3 * COMPACT_AT, "{} bytes of text kept", fields.text.len());
        let (batch, _) = batch_with("");
        fields.set("status", &batch, &RawValue::Bool(true));
        assert_eq!(values(&fields)[1], pair("status", "Bool(true)"));
    }
}
