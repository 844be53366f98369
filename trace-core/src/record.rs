//! Raw records: what a calling thread stores for each `tracing` call, and the
//! clock it stamps them with.
//!
//! A record holds only what the calling thread has at hand: a kind, a span id,
//! a stamp, a `&'static` callsite, and field values (integers as they are, text
//! appended to the batch's own string). Converting and encoding happen later,
//! on the writer's side.
//!
//! Every record carries a stamp on one clock for all threads ([`CaptureClock`]), so
//! that the writer can put the records of every thread back in the order they
//! happened: a span created on one thread and entered, recorded or closed on
//! another is then seen in that order, whichever thread's batch arrives first.

use std::fmt::{self, Write as _};

use tracing_core::field::{Field as TField, Visit};
use tracing_core::Metadata;

use crate::clock::{self, Anchor};

/// A `tracing` call site's metadata: it lives as long as the program.
pub(crate) type Meta = &'static Metadata<'static>;

/// Records per batch before it is handed to the writer.
pub(crate) const BATCH_RECORDS: usize = 1024;
/// Records a [`Batch::small`] has room for before it grows.
const SMALL_RECORDS: usize = 32;
/// Text bytes per batch before it is handed to the writer.
pub(crate) const BATCH_TEXT: usize = 64 * 1024;

/// What a record says happened.
///
/// The order of the variants is the order of records with equal stamps: a
/// creation comes before anything else about its span, a close after.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Kind {
    NewSpan,
    Record,
    /// Span `id` follows from the span in the record's one field.
    Follows,
    /// A helper started here: flow `id` leaves the innermost open span.
    FlowOut,
    /// This thread is that helper: flow `id` ends at its next span.
    FlowIn,
    Enter,
    /// A creation whose span was entered right after it on the same thread,
    /// before any other record: the span's first enter, stamped at the enter,
    /// with the creation's fields ([`Batch::push_enter`]).
    NewEnter,
    /// A [`Kind::NewEnter`] whose last field is the thread CPU clock read at
    /// the enter, not a field of the span.
    NewEnterCpu,
    Exit,
    /// An exit followed on the same thread, before any other record, by the
    /// span's close ([`Batch::push_close`]): both at the exit's stamp.
    ExitClose,
    Event,
    Close,
}

/// One record. `meta` is the callsite where the writer needs it (creation,
/// enter, event); `fields_*` index the batch's values. An enter or exit has
/// no fields: its `fields_*` hold the thread's CPU clock instead
/// ([`Raw::thread_cpu_ns`]), so that the record stays 40 bytes.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Raw {
    pub kind: Kind,
    pub id: u64,
    pub ts: u64,
    pub meta: Option<Meta>,
    pub fields_start: u32,
    pub fields_len: u32,
}

impl Raw {
    /// The thread CPU clock an enter or exit carries, if it was read.
    #[inline]
    pub(crate) fn thread_cpu_ns(&self) -> Option<u64> {
        if !matches!(self.kind, Kind::Enter | Kind::Exit | Kind::ExitClose) {
            return None;
        }
        // Stored plus one (`Batch::push_cpu`): 0 says none was read.
        let stored = u64::from(self.fields_start) | (u64::from(self.fields_len) << 32);
        stored.checked_sub(1)
    }
}

/// A field value as the calling thread stored it.
#[derive(Clone, Copy, Debug)]
pub(crate) enum RawValue {
    I64(i64),
    U64(u64),
    F64(f64),
    Bool(bool),
    Str { start: u32, len: u32 },
}

/// A field name and its value.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RawField {
    pub name: &'static str,
    pub value: RawValue,
}

/// One thread's records, in the order it stored them (and so of their stamps).
#[derive(Debug, Default)]
pub(crate) struct Batch {
    pub raws: Vec<Raw>,
    pub values: Vec<RawField>,
    pub text: String,
}

impl Batch {
    /// A batch for a thread that has yet to show it records much: its first
    /// (made at its registration) and one put in place of a partial batch the
    /// writer took. It grows as it fills; most threads of a short command
    /// record a few records each, and the full size made up front would cost
    /// each such thread fresh pages.
    pub(crate) fn small() -> Batch {
        Batch {
            raws: Vec::with_capacity(SMALL_RECORDS),
            values: Vec::with_capacity(SMALL_RECORDS),
            text: String::new(),
        }
    }

    /// A batch for a thread that filled its last one.
    pub(crate) fn with_capacity() -> Batch {
        Batch {
            raws: Vec::with_capacity(BATCH_RECORDS),
            values: Vec::with_capacity(BATCH_RECORDS),
            text: String::with_capacity(4096),
        }
    }

    pub(crate) fn clear(&mut self) {
        self.raws.clear();
        self.values.clear();
        self.text.clear();
    }

    pub(crate) fn is_full(&self) -> bool {
        self.raws.len() >= BATCH_RECORDS || self.text.len() >= BATCH_TEXT
    }

    /// The heap bytes this batch holds, for the capture's memory budget.
    pub(crate) fn bytes(&self) -> usize {
        self.raws.capacity() * std::mem::size_of::<Raw>()
            + self.values.capacity() * std::mem::size_of::<RawField>()
            + self.text.capacity()
    }

    pub(crate) fn str_of(&self, start: u32, len: u32) -> &str {
        self.text.get(start as usize..(start + len) as usize).unwrap_or("")
    }

    pub(crate) fn fields(&self, raw: &Raw) -> &[RawField] {
        let len = match raw.kind {
            Kind::Enter | Kind::Exit | Kind::ExitClose => return &[],
            // The last value is the CPU clock, not a field.
            Kind::NewEnterCpu => raw.fields_len.saturating_sub(1),
            _ => raw.fields_len,
        };
        let start = raw.fields_start as usize;
        self.values.get(start..start + len as usize).unwrap_or(&[])
    }

    /// The thread CPU clock read at the enter or exit `raw` records, if it was.
    #[inline]
    pub(crate) fn thread_cpu_ns(&self, raw: &Raw) -> Option<u64> {
        if raw.kind != Kind::NewEnterCpu {
            return raw.thread_cpu_ns();
        }
        let last = (raw.fields_start as usize + raw.fields_len as usize).checked_sub(1)?;
        match self.values.get(last)?.value {
            RawValue::U64(ns) => Some(ns),
            _ => None,
        }
    }

    /// Appends the enter of span `id`, or, when the batch's last record is
    /// that span's creation, turns the creation into its first enter
    /// ([`Kind::NewEnter`]): one record instead of two, and the writer knows
    /// that the span was not entered before.
    #[inline]
    pub(crate) fn push_enter(&mut self, id: u64, ts: u64, meta: Option<Meta>, cpu_ns: Option<u64>) {
        if let Some(last) = self.raws.last_mut().filter(|r| r.kind == Kind::NewSpan && r.id == id) {
            // Nothing was stored after the creation: its fields are the last values.
            last.ts = ts;
            last.meta = last.meta.or(meta);
            match cpu_ns {
                Some(ns) => {
                    last.kind = Kind::NewEnterCpu;
                    last.fields_len += 1;
                    self.values.push(RawField { name: "", value: RawValue::U64(ns) });
                }
                None => last.kind = Kind::NewEnter,
            }
            return;
        }
        self.push_cpu(Kind::Enter, id, ts, meta, cpu_ns);
    }

    /// Appends the close of span `id`, or, when the batch's last record is
    /// that span's exit, turns the exit into [`Kind::ExitClose`].
    #[inline]
    pub(crate) fn push_close(&mut self, id: u64, ts: u64) {
        if let Some(last) = self.raws.last_mut().filter(|r| r.kind == Kind::Exit && r.id == id) {
            last.kind = Kind::ExitClose;
            return;
        }
        self.push(Kind::Close, id, ts, None);
    }

    /// Appends a record without fields.
    #[inline]
    pub(crate) fn push(&mut self, kind: Kind, id: u64, ts: u64, meta: Option<Meta>) {
        self.raws.push(Raw { kind, id, ts, meta, fields_start: 0, fields_len: 0 });
    }

    /// Appends an enter or exit with the thread CPU clock read for it, stored
    /// plus one so that 0 says none was read (a new thread's clock can read 0
    /// where it is coarse).
    #[inline]
    pub(crate) fn push_cpu(&mut self, kind: Kind, id: u64, ts: u64, meta: Option<Meta>, cpu_ns: Option<u64>) {
        debug_assert!(matches!(kind, Kind::Enter | Kind::Exit));
        let ns = cpu_ns.map_or(0, |ns| ns.saturating_add(1));
        self.raws.push(Raw { kind, id, ts, meta, fields_start: ns as u32, fields_len: (ns >> 32) as u32 });
    }

    /// Appends a record that links `id` to `other` (kept as its one field).
    #[inline]
    pub(crate) fn push_link(&mut self, kind: Kind, id: u64, other: u64, ts: u64) {
        let start = self.values.len() as u32;
        self.values.push(RawField { name: "link", value: RawValue::U64(other) });
        self.raws.push(Raw { kind, id, ts, meta: None, fields_start: start, fields_len: 1 });
    }

    /// Appends a record with the fields `record` visits.
    #[inline]
    pub(crate) fn push_fields(
        &mut self,
        kind: Kind,
        id: u64,
        ts: u64,
        meta: Option<Meta>,
        record: impl FnOnce(&mut dyn Visit),
    ) {
        let start = self.values.len();
        record(&mut FieldVisitor { batch: self });
        let len = self.values.len() - start;
        self.raws.push(Raw { kind, id, ts, meta, fields_start: start as u32, fields_len: len as u32 });
    }
}

/// The capture's clock for stamps: time-stamp counter ticks where they are
/// usable ([`crate::clock`]), nanoseconds since the capture's start otherwise.
/// Either way one clock for every thread, increasing with real time.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CaptureClock {
    /// Whether stamps are counter ticks.
    pub ticks: bool,
    /// `CLOCK_MONOTONIC` at the capture's start, in nanoseconds.
    pub base_mono_ns: u64,
    /// The first anchor of the tick conversion, read with `base_mono_ns`.
    pub first_anchor: Anchor,
}

impl CaptureClock {
    /// A clock for a capture starting now.
    pub(crate) fn start() -> CaptureClock {
        let ticks = clock::counter_usable();
        let first_anchor =
            if ticks { Anchor::now() } else { Anchor { tick: 0, ns: crate::os::monotonic_ns() } };
        CaptureClock { ticks, base_mono_ns: first_anchor.ns, first_anchor }
    }

    /// Nanoseconds since the capture's start.
    #[inline]
    pub(crate) fn rel_now(&self) -> u64 {
        crate::os::monotonic_ns().saturating_sub(self.base_mono_ns)
    }

    /// A stamp read now.
    #[inline(always)]
    pub(crate) fn now(&self) -> u64 {
        if self.ticks {
            clock::ticks()
        } else {
            self.rel_now()
        }
    }
}

struct FieldVisitor<'a> {
    batch: &'a mut Batch,
}

impl FieldVisitor<'_> {
    fn put(&mut self, field: &TField, value: RawValue) {
        self.batch.values.push(RawField { name: field.name(), value });
    }

    fn put_text(&mut self, field: &TField, write: impl FnOnce(&mut String) -> fmt::Result) {
        let start = self.batch.text.len();
        if write(&mut self.batch.text).is_err() {
            self.batch.text.truncate(start);
            self.batch.text.push_str("<unprintable>");
        }
        let len = self.batch.text.len() - start;
        self.put(field, RawValue::Str { start: start as u32, len: len as u32 });
    }
}

impl Visit for FieldVisitor<'_> {
    fn record_i64(&mut self, field: &TField, value: i64) {
        self.put(field, RawValue::I64(value));
    }
    fn record_u64(&mut self, field: &TField, value: u64) {
        self.put(field, RawValue::U64(value));
    }
    fn record_i128(&mut self, field: &TField, value: i128) {
        match i64::try_from(value) {
            Ok(v) => self.put(field, RawValue::I64(v)),
            Err(_) => self.put_text(field, |s| write!(s, "{value}")),
        }
    }
    fn record_u128(&mut self, field: &TField, value: u128) {
        match u64::try_from(value) {
            Ok(v) => self.put(field, RawValue::U64(v)),
            Err(_) => self.put_text(field, |s| write!(s, "{value}")),
        }
    }
    fn record_f64(&mut self, field: &TField, value: f64) {
        self.put(field, RawValue::F64(value));
    }
    fn record_bool(&mut self, field: &TField, value: bool) {
        self.put(field, RawValue::Bool(value));
    }
    fn record_str(&mut self, field: &TField, value: &str) {
        self.put_text(field, |s| {
            s.push_str(value);
            Ok(())
        });
    }
    fn record_error(&mut self, field: &TField, value: &(dyn std::error::Error + 'static)) {
        self.put_text(field, |s| write!(s, "{value}"));
    }
    fn record_debug(&mut self, field: &TField, value: &dyn fmt::Debug) {
        self.put_text(field, |s| write!(s, "{value:?}"));
    }
}

/// An owned field value, sent with a lane slice (a span's fields are kept in
/// `writer::fields::SpanFields` instead).
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum OwnedValue {
    I64(i64),
    U64(u64),
    F64(f64),
    Bool(bool),
    Str(String),
}

impl OwnedValue {
    pub(crate) fn from_value(v: &crate::event::Value<'_>) -> OwnedValue {
        use crate::event::Value;
        match *v {
            Value::I64(v) => OwnedValue::I64(v),
            Value::U64(v) => OwnedValue::U64(v),
            Value::F64(v) => OwnedValue::F64(v),
            Value::Bool(v) => OwnedValue::Bool(v),
            Value::Str(s) => OwnedValue::Str(s.to_string()),
        }
    }

    pub(crate) fn as_value(&self) -> crate::event::Value<'_> {
        use crate::event::Value;
        match self {
            OwnedValue::I64(v) => Value::I64(*v),
            OwnedValue::U64(v) => Value::U64(*v),
            OwnedValue::F64(v) => Value::F64(*v),
            OwnedValue::Bool(v) => Value::Bool(*v),
            OwnedValue::Str(s) => Value::Str(s),
        }
    }
}

/// A raw value borrowed from its batch, as sinks see it.
pub(crate) fn raw_value<'b>(batch: &'b Batch, v: &RawValue) -> crate::event::Value<'b> {
    use crate::event::Value;
    match *v {
        RawValue::I64(v) => Value::I64(v),
        RawValue::U64(v) => Value::U64(v),
        RawValue::F64(v) => Value::F64(v),
        RawValue::Bool(v) => Value::Bool(v),
        RawValue::Str { start, len } => Value::Str(batch.str_of(start, len)),
    }
}

/// One slice of an external lane (Ninja's actions, test executables), owned.
#[derive(Debug)]
pub(crate) struct OwnedLane {
    pub lane: String,
    pub track: u32,
    pub begin_ns: u64,
    pub end_ns: u64,
    pub name: String,
    pub fields: Vec<(String, OwnedValue)>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_cpu_reading_comes_back_as_it_was_stored_zero_included() {
        let mut batch = Batch::with_capacity();
        for reading in [None, Some(0), Some(1), Some(u64::from(u32::MAX) + 7), Some(u64::MAX - 1)] {
            batch.clear();
            batch.push_cpu(Kind::Enter, 1, 2, None, reading);
            assert_eq!(batch.raws[0].thread_cpu_ns(), reading);
        }
    }

    #[test]
    fn an_enter_right_after_its_creation_becomes_the_creation_with_its_fields_and_clock() {
        for cpu in [None, Some(0), Some(42)] {
            let mut batch = Batch::with_capacity();
            batch.push_fields(Kind::NewSpan, 7, 1, None, |_| {});
            batch.values.push(RawField { name: "a", value: RawValue::I64(-3) });
            batch.raws[0].fields_len = 1;
            batch.push_enter(7, 5, None, cpu);
            assert_eq!(batch.raws.len(), 1);
            let raw = batch.raws[0];
            assert_eq!(
                (raw.ts, raw.kind),
                (5, if cpu.is_some() { Kind::NewEnterCpu } else { Kind::NewEnter })
            );
            assert_eq!(batch.fields(&raw).len(), 1);
            assert_eq!(batch.fields(&raw)[0].name, "a");
            assert_eq!(batch.thread_cpu_ns(&raw), cpu);
        }
    }

    #[test]
    fn an_enter_after_another_record_or_of_another_span_stays_an_enter() {
        let mut batch = Batch::with_capacity();
        batch.push_fields(Kind::NewSpan, 7, 1, None, |_| {});
        batch.push_enter(8, 2, None, Some(3));
        batch.push_enter(7, 3, None, None);
        let kinds: Vec<Kind> = batch.raws.iter().map(|r| r.kind).collect();
        assert_eq!(kinds, [Kind::NewSpan, Kind::Enter, Kind::Enter]);
        assert_eq!(batch.thread_cpu_ns(&batch.raws[1]), Some(3));
    }

    #[test]
    fn a_close_right_after_its_exit_joins_it_and_keeps_the_exit_clock() {
        let mut batch = Batch::with_capacity();
        batch.push_cpu(Kind::Exit, 7, 4, None, Some(9));
        batch.push_close(8, 5);
        batch.push_close(7, 6);
        batch.push_cpu(Kind::Exit, 7, 7, None, Some(11));
        batch.push_close(7, 8);
        let kinds: Vec<(Kind, u64)> = batch.raws.iter().map(|r| (r.kind, r.ts)).collect();
        assert_eq!(kinds, [(Kind::Exit, 4), (Kind::Close, 5), (Kind::Close, 6), (Kind::ExitClose, 7)]);
        assert_eq!(batch.thread_cpu_ns(&batch.raws[3]), Some(11));
    }
}
