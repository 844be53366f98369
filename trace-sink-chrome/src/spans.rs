//! A span's complete (`X`) event, written from two pieces rendered once per
//! call site and thread: everything up to its `ts`
//! (`,\n{"name":…,"cat":…,"ph":"X","pid":P,"tid":T,"ts":`, with the whole
//! milliseconds of the last time written), and the run of its fields' keys
//! (`"a":`, `,"b":`, …). Per span only the numbers and the values are
//! encoded.
//!
//! The usual span (a start of at most [`START`] bytes, at most
//! [`MAX_FIELDS`] fields with keys of at most [`KEY`] bytes, integer,
//! boolean or short plain string values) is written in place, by
//! [`Line::write_in_place`]: straight into the room [`Events::room`] gives
//! at the end of the output, every piece a copy of a fixed length, numbers
//! from [`crate::room`]'s tables, nothing reserved, grown or checked piece
//! by piece. This path exists because the span is the event a capture
//! holds most of: in the `spans` benchmark (spans with two integer fields,
//! callgrind, the writer thread) the sink took 464 instructions a span
//! writing them through the general path's `Vec` pushes (with a scratch
//! copy for the numbers) and takes 298 in place. Any other span goes the
//! general way ([`Line::write`]), whose bytes the tests below compare the
//! in-place ones with over every kind of value and time.
//!
//! A piece is found by the addresses of the site's strings and the thread,
//! and trusted as [`crate::rendered`] trusts its pieces: by address and
//! length alone for a `tracing` call site's `'static` text, by comparing the
//! text otherwise. The keys are checked against the event's field names each
//! time (a call site's fields come in one order, but a span whose field was
//! left empty and recorded later holds another list), and rendered again
//! when they differ.

use trace_core::{Event, Field, Site, ThreadCpu, Tid, Value};

use crate::json::{self, head, ids_then_ts, micros, string, Events, NUMBER};
use crate::room::{Room, LIMIT, ROOM};
use crate::stamp::{TimedStart, START};

/// Slots of the table: more than the (call site, thread) pairs of a run of spans.
const SLOT_BITS: u32 = 6;

/// What a cached line was rendered for: the addresses and lengths of the
/// site's name and target, the thread and the process.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct LineId {
    name: (usize, usize),
    target: (usize, usize),
    thread: Tid,
    pid: u64,
}

impl LineId {
    fn of(site: &Site<'_>, thread: Tid, pid: u64) -> Self {
        let at = |s: &str| (s.as_ptr() as usize, s.len());
        LineId { name: at(site.name), target: at(site.target), thread, pid }
    }
}

/// The address and length of a field's name.
pub(crate) fn name_at(f: &Field<'_>) -> (usize, usize) {
    (f.name.as_ptr() as usize, f.name.len())
}

/// The cached pieces of one call site's spans on one thread.
#[derive(Debug)]
struct Line {
    /// All zeros until the slot is first used (no string is at address 0).
    id: LineId,
    /// The site's text as it was when the line was rendered.
    site: KeptSite,
    /// The event's start up to `"ts":`, with the whole milliseconds of the
    /// last time written.
    start: TimedStart,
    /// The keys of the fields they were rendered for (`"a":`, then
    /// `,"b":`, …), and whether those fields' names were `'static`.
    keys: Vec<Key>,
    keys_fixed: bool,
    /// Whether every key is at most [`KEY`] bytes long, and there are at
    /// most [`MAX_FIELDS`].
    short: bool,
}

impl Line {
    /// A slot not used yet.
    const EMPTY: Line = Line {
        id: LineId { name: (0, 0), target: (0, 0), thread: 0, pid: 0 },
        site: KeptSite::EMPTY,
        start: TimedStart::EMPTY,
        keys: Vec::new(),
        keys_fixed: false,
        short: false,
    };
}

/// A site's name, target and file as a line was rendered for them, and
/// whether they were `'static`.
#[derive(Debug)]
pub(crate) struct KeptSite {
    fixed: bool,
    name: String,
    target: String,
    file: Option<String>,
}

impl KeptSite {
    /// None kept yet.
    pub(crate) const EMPTY: KeptSite =
        KeptSite { fixed: false, name: String::new(), target: String::new(), file: None };

    /// Keeps the name, target and file of `site`; `fixed`: its text is `'static`.
    pub(crate) fn keep(&mut self, site: &Site<'_>, fixed: bool) {
        self.fixed = fixed;
        self.name.clear();
        self.name.push_str(site.name);
        self.target.clear();
        self.target.push_str(site.target);
        self.file = site.file.map(str::to_string);
    }

    /// Whether the text kept is that of `site`, whose strings are at the
    /// addresses of those kept (by those alone when both are `'static`).
    #[inline]
    pub(crate) fn holds(&self, site: &Site<'_>, fixed: bool) -> bool {
        (fixed && self.fixed)
            || (self.name == site.name && self.target == site.target && self.file.as_deref() == site.file)
    }
}

/// A field's key, rendered once.
#[derive(Debug)]
pub(crate) struct Key {
    /// The address and length of the name, and the name (compared when
    /// the text is not `'static`).
    pub(crate) at: (usize, usize),
    pub(crate) name: String,
    /// The key (`"a":`, or `,"b":` after the first).
    pub(crate) bytes: Vec<u8>,
    /// What [`Line::write_in_place`] writes before the value, at the start
    /// of [`KEY`] bytes if it fits: the key, after `,"args":{` for the first.
    pub(crate) lead: [u8; KEY],
    pub(crate) lead_len: usize,
}

/// A key at most this long (with the `,"args":{` before the first) is
/// written in place as a copy of this length (no call to copy a variable one).
pub(crate) const KEY: usize = 48;
/// Fields of a span written in place; a span with more is written the general way.
const MAX_FIELDS: usize = 12;
/// A string value at most this long is written in place (if it needs no escaping).
pub(crate) const STRING: usize = 64;
/// The most [`Line::write_in_place`] writes (a copy of each piece's room):
/// the start, three times of up to 24 digits and 4 more after their keys,
/// the fields' keys and values (a string's quotes and, since an integer may
/// take a sign and 24 digits, 32 more), the closing braces.
const ROOM_FOR: usize = START + 3 * (8 + NUMBER + 4) + MAX_FIELDS * (KEY + STRING + 32) + 2;
const _: () = assert!(ROOM_FOR < LIMIT);

impl Line {
    /// Whether the line holds the pieces of `site` on the thread of `id`.
    #[inline]
    fn is_for(&self, id: &LineId, site: &Site<'_>, fixed: bool) -> bool {
        self.id == *id && self.site.holds(site, fixed)
    }

    /// Renders the start for `site` on the thread of `id`; forgets the keys.
    fn render(&mut self, id: LineId, site: &Site<'_>, fixed: bool) {
        self.id = id;
        self.site.keep(site, fixed);
        let b = self.start.begin();
        b.extend_from_slice(b",\n{");
        head(b, (site.name, b""), Some(site.target), br#""X""#);
        ids_then_ts(b, id.pid, id.thread);
        self.start.done();
        self.keys.clear();
        self.keys_fixed = fixed;
        self.short = true;
        self.start.allow(true);
    }

    /// Whether `key` is that of `f`.
    #[inline]
    fn is_key_of(&self, key: &Key, f: &Field<'_>, fixed: bool) -> bool {
        match fixed && self.keys_fixed {
            true => key.at == name_at(f),
            false => key.name == f.name,
        }
    }

    /// Appends `fields` as the entries of `args`, each value after its
    /// cached key, and closes the object; false, leaving what it wrote, if
    /// the keys are not those of `fields`.
    fn write_fields(&self, b: &mut Vec<u8>, fields: &[Field<'_>], fixed: bool) -> bool {
        if self.keys.len() != fields.len() {
            return false;
        }
        b.extend_from_slice(br#","args":{"#);
        for (key, f) in self.keys.iter().zip(fields) {
            if !self.is_key_of(key, f, fixed) {
                return false;
            }
            b.extend_from_slice(&key.bytes);
            json::value(b, &f.value);
        }
        b.push(b'}');
        true
    }

    /// Renders the keys of `fields`; `fixed`: their names are `'static`.
    fn render_keys(&mut self, fields: &[Field<'_>], fixed: bool) {
        self.keys_fixed = fixed;
        self.short = render_keys(&mut self.keys, fields);
        self.start.allow(self.short);
    }

    /// Writes the event into `room`, from the separator before it to its
    /// closing brace: the start (ending with the whole milliseconds of its
    /// time when `rest`, the nanoseconds after them, is given), the rest of
    /// its time, the duration, the CPU times, the fields. Returns how many
    /// bytes it wrote, or `None` (leaving `room` as scratch) when the event
    /// does not fit that form: a start too long, a value that is a float or
    /// a string too long or needing escapes, too many fields, keys too long
    /// or not those of the fields.
    #[inline]
    fn write_in_place(
        &self,
        room: &mut [u8; ROOM],
        span: &Span<'_, '_>,
        rest: Option<u32>,
        fixed: bool,
    ) -> Option<usize> {
        let fields = span.fields;
        if !self.start.ready || self.keys.len() != fields.len() {
            return None;
        }
        let mut w = Room::new(room);
        self.start.put(&mut w, span.begin_ts, rest, b",\"dur\":_", 7);
        w.micros(span.ts.saturating_sub(span.begin_ts));
        if let Some(cpu) = span.cpu {
            w.put(b",\"tts\":_", 7);
            w.micros(cpu.begin_ns);
            w.put(b",\"tdur\":", 8);
            w.micros(cpu.ns());
        }
        // Two loops, so that the choice is made once.
        match fixed && self.keys_fixed {
            true => {
                for (key, f) in self.keys.iter().zip(fields) {
                    if key.at != name_at(f) {
                        return None;
                    }
                    field_in_place(&mut w, key, &f.value)?;
                }
            }
            false => {
                for (key, f) in self.keys.iter().zip(fields) {
                    if key.name != f.name {
                        return None;
                    }
                    field_in_place(&mut w, key, &f.value)?;
                }
            }
        }
        // The `args` object's brace if there is one, then the event's.
        w.put(b"}}", 1 + usize::from(!fields.is_empty()));
        w.written()
    }
}

/// Writes a field's key and value into `w`; `None` for a value not written in place.
#[inline(always)]
fn field_in_place(w: &mut Room<'_>, key: &Key, value: &Value<'_>) -> Option<()> {
    w.put(&key.lead, key.lead_len);
    value_in_place(w, value)
}

/// Writes a value into `w`; `None` for one not written in place (a float,
/// a string too long or needing escapes).
#[inline(always)]
pub(crate) fn value_in_place(w: &mut Room<'_>, value: &Value<'_>) -> Option<()> {
    if let Value::U64(v) = *value {
        w.uint(v);
        return Some(());
    }
    match *value {
        Value::I64(v) => w.int(v),
        Value::Bool(true) => w.put(b"true", 4),
        Value::Bool(false) => w.put(b"false", 5),
        Value::Str(s) if s.len() <= STRING && w.plain_string(s) => {}
        _ => return None,
    }
    Some(())
}

/// Renders the keys of `fields` into `keys`; returns whether every one
/// is short enough to be written in place, and there are at most
/// [`MAX_FIELDS`].
pub(crate) fn render_keys(keys: &mut Vec<Key>, fields: &[Field<'_>]) -> bool {
    keys.clear();
    let mut short = fields.len() <= MAX_FIELDS;
    for (i, f) in fields.iter().enumerate() {
        let mut bytes = Vec::with_capacity(f.name.len() + 4);
        if i > 0 {
            bytes.push(b',');
        }
        string(&mut bytes, f.name);
        bytes.push(b':');
        let args: &[u8] = if i == 0 { br#","args":{"# } else { b"" };
        let lead_len = args.len() + bytes.len();
        let mut lead = [0; KEY];
        match lead_len <= KEY {
            true => {
                lead[..args.len()].copy_from_slice(args);
                lead[args.len()..lead_len].copy_from_slice(&bytes);
            }
            false => short = false,
        }
        keys.push(Key { at: name_at(f), name: f.name.to_string(), bytes, lead, lead_len });
    }
    short
}

/// The cached lines, one per slot: a line whose slot is taken by another is
/// rendered again when it next comes.
#[derive(Debug)]
pub(crate) struct SpanLines {
    slots: Box<[Line; 1 << SLOT_BITS]>,
}

impl Default for SpanLines {
    fn default() -> Self {
        SpanLines { slots: new_slots() }
    }
}

/// A span that ended by itself, as [`SpanLines::write`] reads it.
struct Span<'e, 'a> {
    pid: u64,
    thread: Tid,
    site: &'e Site<'a>,
    begin_ts: u64,
    ts: u64,
    cpu: Option<ThreadCpu>,
    fields: &'e [Field<'a>],
}

impl<'e, 'a> Span<'e, 'a> {
    /// The span of `event` if it is one that ended by itself, in process `pid`.
    #[inline(always)]
    fn of(pid: u64, event: &'e Event<'a>) -> Option<Self> {
        match *event {
            Event::SpanEnd { thread, ts, begin_ts, ref site, fields, unclosed: false, cpu, .. } => {
                Some(Span { pid, thread, site, begin_ts, ts, cpu, fields })
            }
            _ => None,
        }
    }
}

/// The table of empty slots, made on the heap.
fn new_slots() -> Box<[Line; 1 << SLOT_BITS]> {
    Box::new([Line::EMPTY; 1 << SLOT_BITS])
}

impl SpanLines {
    /// Appends the complete event of `event`, a span that ended by itself
    /// (anything else is ignored), to `out`: bytes for bytes what the
    /// general encoder writes for it.
    #[inline]
    pub(crate) fn write(&mut self, out: &mut Events, pid: u64, event: &Event<'_>) {
        let Some(span) = Span::of(pid, event) else { return };
        let site = span.site;
        let fixed = site.has_static_text();
        let id = LineId::of(site, span.thread, span.pid);
        // Multiplied so that nearby addresses and threads land in different slots.
        let mixed = (id.name.0 ^ id.target.0.rotate_left(17) ^ (span.thread as usize).rotate_left(29))
            .wrapping_mul(0x9e37_79b9_7f4a_7c15_u64 as usize);
        // Below 2^SLOT_BITS, the table's length.
        let line = &mut self.slots[mixed >> (usize::BITS - SLOT_BITS)];
        if !line.is_for(&id, site, fixed) {
            line.render(id, site, fixed);
        }
        let rest = line.start.rest(span.begin_ts);
        if let Some(room) = out.room() {
            if let Some(n) = line.write_in_place(room, &span, rest, fixed) {
                out.commit(n);
                return;
            }
        }
        // The event, not `span`: a copy of that made in memory for this
        // call would be made on every call.
        line.write(out, pid, event, rest, fixed);
    }
}

impl Line {
    /// Appends the complete event of `span` to `out` the general way, the
    /// keys rendered for its fields if they are not; `rest` as for
    /// [`Line::write_in_place`].
    #[cold]
    #[inline(never)]
    fn write(&mut self, out: &mut Events, pid: u64, event: &Event<'_>, rest: Option<u32>, fixed: bool) {
        let Some(span) = Span::of(pid, event) else { return };
        let line = self;
        let b = line.start.open(out, span.begin_ts, rest);
        b.extend_from_slice(br#","dur":"#);
        micros(b, span.ts.saturating_sub(span.begin_ts));
        if let Some(cpu) = span.cpu {
            b.extend_from_slice(br#","tts":"#);
            micros(b, cpu.begin_ns);
            b.extend_from_slice(br#","tdur":"#);
            micros(b, cpu.ns());
        }
        if span.fields.is_empty() && !line.keys.is_empty() {
            // So that the next span without fields is written in place.
            line.render_keys(&[], fixed);
        } else if !span.fields.is_empty() {
            let at = b.len();
            if !line.write_fields(b, span.fields, fixed) {
                b.truncate(at);
                line.render_keys(span.fields, fixed);
                let written = line.write_fields(b, span.fields, fixed);
                debug_assert!(written, "the keys were just rendered for these fields");
            }
        }
        b.push(b'}');
    }
}

#[cfg(test)]
mod tests {
    use trace_core::Level;

    use super::*;
    use crate::stamp::SECOND;

    const PID: u64 = 4_194_303;

    /// A capture's bytes: its first event, then `write`'s, then its end.
    fn capture(write: impl FnOnce(&mut Events)) -> String {
        let mut out = Events::default();
        out.begin();
        out.in_place_at_once();
        out.metadata("process_name", (PID, 0), "name", Some("p"), 0);
        write(&mut out);
        out.end();
        let mut bytes = Vec::new();
        out.write_all(&mut bytes).unwrap();
        String::from_utf8(bytes).unwrap()
    }

    /// What the general path writes for the span that ended in `event`,
    /// from a line rendered for it alone.
    fn general(event: &Event<'_>) -> String {
        let Event::SpanEnd { thread, begin_ts, site, .. } = *event else { panic!("not a span") };
        capture(|out| {
            let mut line = Line::EMPTY;
            line.render(LineId::of(&site, thread, PID), &site, false);
            let rest = (begin_ts >= SECOND).then(|| {
                line.start.set_millis(begin_ts / 1_000_000);
                (begin_ts % 1_000_000) as u32
            });
            line.write(out, PID, event, rest, false);
        })
    }

    /// What `lines` writes for the span that ended in `event`, and whether
    /// it wrote it in place.
    fn through(lines: &mut SpanLines, event: &Event<'_>) -> (String, bool) {
        let mut in_place = false;
        let text = capture(|out| {
            lines.write(out, PID, event);
            in_place = out.in_place() > 0;
        });
        (text, in_place)
    }

    fn end<'a>(
        site: Site<'a>,
        (begin_ts, ts): (u64, u64),
        cpu: Option<ThreadCpu>,
        fields: &'a [Field<'a>],
    ) -> Event<'a> {
        Event::SpanEnd { thread: 7, ts, begin_ts, site, fields, recorded: &[], unclosed: false, cpu }
    }

    #[test]
    fn a_span_written_in_place_has_the_bytes_of_the_general_path() {
        let (medium, long) = ("n".repeat(40), "n".repeat(200));
        let sites = [
            Site::new("compile", "cabin::build", Level::INFO, None, None),
            Site::new("quote \" and \\ back\n", "t\u{1}", Level::INFO, None, None),
            // A start longer than the room for the shorter copy, and than the room itself.
            Site::new(&medium, "cabin::build", Level::INFO, None, None),
            Site::new(&long, "cabin::build", Level::INFO, None, None),
        ];
        let times: Vec<u64> = vec![
            0,
            1,
            999,
            1_000,
            999_999,
            1_000_000,
            999_999_999,
            1_000_000_000,
            1_000_000_001,
            1_000_999_999,
            1_001_000_000,
            1_234_567_891,
            17_000_000_000_123,
            u64::MAX / 2,
            u64::MAX - 1,
            u64::MAX,
        ];
        let durations = [0, 1, 999, 1_000, 1_001, 999_999, 1_000_000, 123_456_789_012, u64::MAX];
        let long_key = "k".repeat(KEY);
        let escaped_key = "ke\"y\n";
        let numbers =
            [0, 1, 9, 10, 99, 100, 999, 1_000, 1_001, 99_999, 999_999, 1_000_000, 1 << 53, u64::MAX];
        let mut values: Vec<Value<'_>> = Vec::new();
        for n in numbers {
            values.extend([Value::U64(n), Value::I64(n as i64), Value::I64((n as i64).wrapping_neg())]);
        }
        values.extend([Value::I64(i64::MIN), Value::I64(i64::MAX), Value::Bool(true), Value::Bool(false)]);
        let long_text = "s".repeat(STRING + 1);
        let edge_text = "s".repeat(STRING);
        for text in ["", "plain", "é €", "quote \"", "back\\slash", "tab\t", "\u{1f}", &edge_text, &long_text]
        {
            values.push(Value::Str(text));
        }
        values.extend([Value::F64(0.5), Value::F64(f64::NAN), Value::F64(-1e300)]);
        // Each value alone, after one other, and under keys of every kind.
        let mut field_lists: Vec<Vec<Field<'_>>> = vec![Vec::new()];
        for (i, &value) in values.iter().enumerate() {
            field_lists.push(vec![Field { name: "a", value }]);
            field_lists
                .push(vec![Field { name: "n", value: Value::U64(i as u64) }, Field { name: "b", value }]);
        }
        for name in [escaped_key, &long_key[..KEY - 12], &long_key] {
            field_lists.push(vec![Field { name, value: Value::U64(5) }]);
        }
        let many: Vec<Field<'_>> =
            (0..=MAX_FIELDS as u64).map(|i| Field { name: "f", value: Value::U64(u64::MAX - i) }).collect();
        field_lists.extend([many[..MAX_FIELDS].to_vec(), many.clone()]);
        let cpus = [
            None,
            Some(ThreadCpu { begin_ns: 7_000_500, end_ns: 9_500_501 }),
            Some(ThreadCpu { begin_ns: u64::MAX, end_ns: 0 }),
        ];

        let mut lines = SpanLines::default();
        let mut in_place = 0;
        let mut cases = 0;
        let mut check = |event: &Event<'_>| {
            let (text, fast) = through(&mut lines, event);
            assert_eq!(text, general(event), "{event:?}");
            in_place += usize::from(fast);
            cases += 1;
        };
        for site in &sites {
            for &begin_ts in &times {
                for &dur in &durations {
                    let ts = begin_ts.saturating_add(dur);
                    check(&end(*site, (begin_ts, ts), None, &[]));
                }
                // An end before the begin: the duration saturates.
                check(&end(*site, (begin_ts, begin_ts / 2), None, &[]));
                for cpu in cpus {
                    check(&end(*site, (begin_ts, begin_ts.saturating_add(1_500)), cpu, &[]));
                }
            }
            for fields in &field_lists {
                for &begin_ts in &times[6..10] {
                    // The fields twice: once to render their keys, once with them rendered.
                    for _ in 0..2 {
                        check(&end(*site, (begin_ts, begin_ts + 42), cpus[1], fields));
                    }
                }
            }
        }
        // The usual spans are written in place: all but the longest site's,
        // the fields the first time, and the values it leaves to the general path.
        assert!(in_place * 2 > cases, "{in_place} of {cases} in place");
    }

    #[test]
    fn a_run_of_spans_across_milliseconds_and_lines_is_written_as_the_general_path_writes_it() {
        let names: Vec<String> = (0..100).map(|i| format!("span_{i}")).collect();
        let fields = [Field { name: "a", value: Value::U64(3) }, Field { name: "b", value: Value::I64(-7) }];
        let mut lines = SpanLines::default();
        let mut ts = 999_000_000;
        for i in 0..5_000u64 {
            // Steps below, around and over a millisecond, now and then back in time.
            ts = match i % 97 {
                0 => ts - 3_000_000,
                _ => ts + [1, 999, 1_001, 250_000, 999_999, 1_000_000, 3_000_001][(i % 7) as usize],
            };
            // More sites than slots: lines are taken over and rendered again.
            let site = Site::new(&names[(i * 7 % 100) as usize], "t", Level::INFO, None, None);
            let event = end(site, (ts, ts + i), None, &fields[..(i % 3) as usize]);
            assert_eq!(through(&mut lines, &event).0, general(&event), "{event:?}");
        }
    }
}
