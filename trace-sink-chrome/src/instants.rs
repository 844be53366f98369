//! A `tracing` event's instant (`i`) written in place, from pieces
//! rendered once per call site and thread: `,\n{"name":` and the name
//! (with the message's value, for the message they were made from), what
//! follows up to its `ts` (with the whole milliseconds of the last time
//! written), the run of its fields' keys, and what ends it (its site's
//! `"level"` and `"location"`, the closing braces). Per event only the
//! numbers and the other values are encoded, and the message compared with
//! the one the name was made from.
//!
//! This path exists because an instant written the general way looks up
//! each field's key, its target's and site's pieces and scans its message
//! for the name on every event: in the `spans` benchmark with
//! `SPANS_EVENTS` (events with a message and two integer fields,
//! callgrind, the writer thread) the sink took 1,440 instructions an event
//! that way, and takes 460 in place. Any instant not of the usual form (more than [`FIELDS`]
//! fields, a key, name, message or location too long, a value that is a
//! float or a string too long or needing escapes) goes the general way,
//! whose bytes the tests below compare the in-place ones with.

use trace_core::{Event, Field, Site, Tid, Value};

use crate::json::{self, ids_then_ts, string, string_then, Events};
use crate::room::{Room, LIMIT, ROOM};
use crate::spans::{name_at, render_keys, value_in_place, KeptSite, Key, KEY, STRING};
use crate::stamp::{TimedStart, START};

/// Slots of the table: more than the (call site, thread) pairs of a run of instants.
const SLOT_BITS: u32 = 6;

/// The separator, `"name":` and the name of an instant at most this long
/// are written in place (as a copy of [`SHORT`] bytes when they fit in it).
const HEAD: usize = 96;
/// A message's value at most this long (quotes and escapes included) is
/// written in place.
const MESSAGE: usize = 256;
/// An instant's ending at most this long (its `"level"` and `"location"`,
/// the closing braces) is written in place.
const TAIL: usize = 192;
/// The copy of a shorter piece.
const SHORT: usize = 64;
/// Fields of an instant written in place; one with more is written the general way.
const FIELDS: usize = 8;
/// The most [`InstantLine::write_in_place`] writes (a copy of each piece's
/// room): the head, the start, a time of up to 24 digits and 4 more, the
/// fields' keys and values (as for a span's, the message's value longer),
/// the tail.
const ROOM_FOR: usize =
    HEAD + START + json::NUMBER + 4 + FIELDS * (KEY + STRING + 32) + MESSAGE - STRING + TAIL;
const _: () = assert!(ROOM_FOR < LIMIT);

/// What a cached line was rendered for: the addresses and lengths of the
/// site's strings, its line and level, the thread and the process.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct InstantId {
    name: (usize, usize),
    target: (usize, usize),
    file: (usize, usize),
    line: Option<u32>,
    level: u8,
    thread: Tid,
    pid: u64,
}

impl InstantId {
    fn of(site: &Site<'_>, thread: Tid, pid: u64) -> Self {
        let at = |s: &str| (s.as_ptr() as usize, s.len());
        InstantId {
            name: at(site.name),
            target: at(site.target),
            file: site.file.map_or((0, 0), at),
            line: site.line,
            level: crate::level_index(site.level),
            thread,
            pid,
        }
    }
}

/// Writes the first `len` bytes of `piece` into `w`, as a copy of [`SHORT`]
/// bytes or of the whole piece.
#[inline(always)]
fn put_piece<const N: usize>(w: &mut Room<'_>, piece: &[u8; N], len: usize) {
    match piece.first_chunk::<SHORT>() {
        Some(short) if len <= SHORT => w.put(short, len),
        _ => w.put(piece, len),
    }
}

/// Whether `a` and `b` are the same bytes: compared eight at a time in
/// line (a call to compare memory cost a short message 20 instructions).
#[inline(always)]
fn same_text(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let (words, _) = a.as_chunks::<8>();
    let (others, _) = b.as_chunks::<8>();
    if words.iter().zip(others).any(|(x, y)| x != y) {
        return false;
    }
    // The last eight, over what the words compared; a shorter text byte by byte.
    match (a.last_chunk::<8>(), b.last_chunk::<8>()) {
        (Some(x), Some(y)) => x == y,
        _ => a.iter().zip(b).all(|(x, y)| x == y),
    }
}

/// Copies `bytes` to the start of `room`; false if they do not fit.
fn fill<const N: usize>(room: &mut [u8; N], bytes: &[u8]) -> bool {
    match room.get_mut(..bytes.len()) {
        Some(to) => {
            to.copy_from_slice(bytes);
            true
        }
        None => false,
    }
}

/// The cached pieces of one call site's instants on one thread.
#[derive(Debug)]
struct InstantLine {
    /// All zeros until the slot is first used (no string is at address 0).
    id: InstantId,
    /// The site's text as it was when the line was rendered.
    site: KeptSite,
    /// What follows the name up to `"ts":`, with the last time's whole milliseconds.
    start: TimedStart,
    /// Whether `head` and `message_value` were rendered, and for which
    /// message (`None`: the instant has none that is a string).
    named: bool,
    message: Option<String>,
    /// `,\n{"name":` and the name (`head_len` bytes, if they fit).
    head: [u8; HEAD],
    head_len: usize,
    /// The message's value (`message_len` bytes, if it fits).
    message_value: [u8; MESSAGE],
    message_len: usize,
    /// Whether `head` and `message_value` fit.
    named_fits: bool,
    /// The keys of the fields they were rendered for, and whether those
    /// fields' names were `'static`.
    keys: Vec<Key>,
    keys_fixed: bool,
    /// Whether the keys and the tail were rendered since the line was.
    keyed: bool,
    /// The index of the first field named `message` ([`usize::MAX`] for none).
    message_at: usize,
    /// What follows the fields (`tail_len` bytes, if they fit).
    tail: [u8; TAIL],
    tail_len: usize,
    /// Whether instants of the line may be written in place (the keys,
    /// the fields and the tail fit).
    short: bool,
}

impl InstantLine {
    /// A line not used yet, on the heap, for a slot used for the first time.
    #[cold]
    #[inline(never)]
    fn new() -> Box<InstantLine> {
        Box::new(InstantLine::EMPTY)
    }

    /// A slot not used yet.
    const EMPTY: InstantLine = InstantLine {
        id: InstantId { name: (0, 0), target: (0, 0), file: (0, 0), line: None, level: 0, thread: 0, pid: 0 },
        site: KeptSite::EMPTY,
        start: TimedStart::EMPTY,
        named: false,
        message: None,
        head: [0; HEAD],
        head_len: 0,
        message_value: [0; MESSAGE],
        message_len: 0,
        named_fits: false,
        keys: Vec::new(),
        keys_fixed: false,
        keyed: false,
        message_at: usize::MAX,
        tail: [0; TAIL],
        tail_len: 0,
        short: false,
    };

    /// Whether the line holds the pieces of `site` on the thread of `id`.
    #[inline]
    fn is_for(&self, site: &Site<'_>, (thread, pid): (Tid, u64), fixed: bool) -> bool {
        self.id == InstantId::of(site, thread, pid) && self.site.holds(site, fixed)
    }

    /// Renders the start for `site` on the thread of `id`; forgets the
    /// name and the keys.
    #[cold]
    fn render(&mut self, site: &Site<'_>, (thread, pid): (Tid, u64), fixed: bool) {
        let id = InstantId::of(site, thread, pid);
        self.id = id;
        self.site.keep(site, fixed);
        let b = self.start.begin();
        crate::after_instant_name(b, site.target);
        ids_then_ts(b, id.pid, id.thread);
        self.start.done();
        self.named = false;
        self.keys.clear();
        self.keyed = false;
        self.short = false;
    }

    /// Renders the name and the message's value for `message`.
    fn name(&mut self, site: &Site<'_>, message: Option<&str>) {
        self.named = true;
        self.message = message.map(str::to_string);
        let mut b = Vec::with_capacity(HEAD);
        b.extend_from_slice(b",\n{\"name\":");
        match crate::name_of(site, message) {
            (name, b"") => string(&mut b, name),
            (name, tail) => string_then(&mut b, name, tail),
        }
        self.head_len = b.len();
        self.named_fits = fill(&mut self.head, &b);
        if let Some(m) = message {
            b.clear();
            string(&mut b, m);
            self.message_len = b.len();
            self.named_fits &= fill(&mut self.message_value, &b);
        }
    }

    /// Renders the keys of `fields` and what follows them; `fixed`: their
    /// names are `'static`.
    fn render_keys(&mut self, site: &Site<'_>, fields: &[Field<'_>], fixed: bool) {
        self.keys_fixed = fixed;
        self.keyed = true;
        self.short = render_keys(&mut self.keys, fields) && fields.len() <= FIELDS;
        self.message_at = fields.iter().position(|f| f.name == "message").unwrap_or(usize::MAX);
        let mut tail = Vec::with_capacity(TAIL);
        let mut entries = Vec::new();
        crate::site_entries(&mut entries, site, fields);
        match (entries.is_empty(), fields.is_empty()) {
            (false, true) => tail.extend_from_slice(br#","args":{"#),
            (false, false) => tail.push(b','),
            (true, _) => {}
        }
        tail.extend_from_slice(&entries);
        if !(entries.is_empty() && fields.is_empty()) {
            tail.push(b'}');
        }
        tail.push(b'}');
        self.tail_len = tail.len();
        self.short &= fill(&mut self.tail, &tail);
        self.start.allow(self.short);
    }

    /// [`InstantLine::write_in_place`] once more, when the keys were not
    /// those of the fields, with keys rendered for them.
    #[cold]
    #[inline(never)]
    fn write_keyed(
        &mut self,
        room: &mut [u8; ROOM],
        (site, ts, fields): (&Site<'_>, u64, &[Field<'_>]),
        fixed: bool,
    ) -> Option<usize> {
        if self.keyed && self.keys_match(fields, fixed) {
            return None;
        }
        self.render_keys(site, fields, fixed);
        self.write_in_place(room, (site, ts, fields), fixed)
    }

    /// Whether the keys are those of `fields`.
    fn keys_match(&self, fields: &[Field<'_>], fixed: bool) -> bool {
        self.keys.len() == fields.len()
            && self.keys.iter().zip(fields).all(|(key, f)| match fixed && self.keys_fixed {
                true => key.at == name_at(f),
                false => key.name == f.name,
            })
    }

    /// Writes the instant into `room`, from the separator before it to its
    /// closing brace; returns how many bytes it wrote, or `None` (leaving
    /// `room` as scratch) when it does not fit that form or the keys are
    /// not those of its fields.
    #[inline(always)]
    fn write_in_place(
        &mut self,
        room: &mut [u8; ROOM],
        (site, ts, fields): (&Site<'_>, u64, &[Field<'_>]),
        fixed: bool,
    ) -> Option<usize> {
        if !self.short || self.keys.len() != fields.len() {
            return None;
        }
        let message = match fields.get(self.message_at) {
            Some(Field { value: Value::Str(m), .. }) => Some(*m),
            _ => None,
        };
        let same = match (&self.message, message) {
            (Some(kept), Some(m)) => same_text(kept.as_bytes(), m.as_bytes()),
            (None, None) => true,
            _ => false,
        };
        if !self.named || !same {
            self.name(site, message);
        }
        let rest = self.start.rest(ts);
        if !(self.named_fits && self.start.ready) {
            return None;
        }
        let mut w = Room::new(room);
        put_piece(&mut w, &self.head, self.head_len);
        self.start.put(&mut w, ts, rest, &[0; 8], 0);
        let by_address = fixed && self.keys_fixed;
        for (i, (key, f)) in self.keys.iter().zip(fields).enumerate() {
            let same = match by_address {
                true => key.at == name_at(f),
                false => key.name == f.name,
            };
            if !same {
                return None;
            }
            w.put(&key.lead, key.lead_len);
            match (i == self.message_at, message) {
                (true, Some(_)) => put_piece(&mut w, &self.message_value, self.message_len),
                _ => value_in_place(&mut w, &f.value)?,
            }
        }
        put_piece(&mut w, &self.tail, self.tail_len);
        w.written()
    }
}

/// The cached lines, one per slot: a line whose slot is taken by another is
/// rendered again when it next comes.
#[derive(Debug, Default)]
pub(crate) struct InstantLines {
    /// Made with the first instant: a capture may have none. Each line
    /// (about 900 bytes, its pieces' rooms) is made when its slot is first
    /// used: a table of the lines themselves cost the first instant of a
    /// capture 14 fresh pages, each a page fault (3 µs here).
    slots: Vec<Option<Box<InstantLine>>>,
}

impl InstantLines {
    /// Writes the instant of `event`, a `tracing` event in process `pid`,
    /// in place at the end of `out`, bytes for bytes as the general path
    /// writes it; false, having written nothing, when it is not written so
    /// (the caller then writes it the general way).
    #[inline]
    pub(crate) fn write(&mut self, out: &mut Events, pid: u64, event: &Event<'_>) -> bool {
        let Event::Instant { thread, ts, ref site, fields } = *event else { return false };
        let Some(room) = out.room() else { return false };
        if self.slots.is_empty() {
            self.slots.resize_with(1 << SLOT_BITS, || None);
        }
        let fixed = site.has_static_text();
        let file = site.file.map_or(0, |f| f.as_ptr() as usize);
        // Multiplied so that nearby addresses and threads land in different slots.
        let mixed = (site.name.as_ptr() as usize ^ file.rotate_left(17) ^ (thread as usize).rotate_left(29))
            .wrapping_mul(0x9e37_79b9_7f4a_7c15_u64 as usize);
        // Below 2^SLOT_BITS, the table's length.
        let Some(slot) = self.slots.get_mut(mixed >> (usize::BITS - SLOT_BITS)) else { return false };
        let line = slot.get_or_insert_with(InstantLine::new);
        if !line.is_for(site, (thread, pid), fixed) {
            line.render(site, (thread, pid), fixed);
        }
        let written = match line.write_in_place(room, (site, ts, fields), fixed) {
            None => line.write_keyed(room, (site, ts, fields), fixed),
            written => written,
        };
        match written {
            Some(n) => {
                out.commit(n);
                true
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use trace_core::{Level, Sink, Start};

    use super::*;
    use crate::ChromeSink;

    /// A subscriber that keeps the metadata of each event made under it.
    struct Keep(Arc<Mutex<Vec<&'static tracing::Metadata<'static>>>>);

    impl tracing::Subscriber for Keep {
        fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
            true
        }
        fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
            tracing::span::Id::from_u64(1)
        }
        fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
        fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
        fn event(&self, event: &tracing::Event<'_>) {
            if let Ok(mut kept) = self.0.lock() {
                kept.push(event.metadata());
            }
        }
        fn enter(&self, _: &tracing::span::Id) {}
        fn exit(&self, _: &tracing::span::Id) {}
    }

    /// `tracing` call sites of every shape the path tells apart: their
    /// strings `'static`, as a capture gives them.
    fn call_sites() -> Vec<&'static tracing::Metadata<'static>> {
        let kept = Arc::new(Mutex::new(Vec::new()));
        tracing::subscriber::with_default(Keep(Arc::clone(&kept)), || {
            tracing::info!(a = 1, b = 2, "two integers");
            tracing::info!("a message alone");
            tracing::warn!(level = 3, "a field named level");
            tracing::error!(location = 4, other = 5, "a field named location");
            tracing::debug!(level = 1, location = 2, "both");
            tracing::trace!(n = 1);
            tracing::info!(message = 5, n = 6);
            tracing::info!(f1 = 1, f2 = 2, f3 = 3, f4 = 4, f5 = 5, f6 = 6, f7 = 7, "eight fields");
            tracing::info!(f1 = 1, f2 = 2, f3 = 3, f4 = 4, f5 = 5, f6 = 6, f7 = 7, f8 = 8, "nine fields");
            tracing::info!(a_key_long_enough_not_to_fit_in_the_room_for_one_key_at_all = 1, "a long key");
            tracing::info!(target: "a::target::long::enough::to::make::the::start::longer::than::its::room::of::one::hundred::and::twenty::eight::bytes", n = 1, "long target");
        });
        let kept = kept.lock().map(|k| k.clone()).unwrap_or_default();
        kept
    }

    /// Values of every kind and edge the general path writes.
    fn values(long: &str) -> Vec<Value<'_>> {
        let mut values = Vec::new();
        for n in [0, 7, 999, 1_000, 49_999, 999_999, 1_000_000, 1 << 53, u64::MAX] {
            values.extend([Value::U64(n), Value::I64(n as i64), Value::I64((n as i64).wrapping_neg())]);
        }
        values.extend([Value::I64(i64::MIN), Value::Bool(true), Value::Bool(false)]);
        values.extend([Value::F64(0.5), Value::F64(f64::NAN), Value::F64(-1e300), Value::F64(f64::INFINITY)]);
        for text in
            ["", "plain", "é €", "quote \"", "back\\slash", "new\nline", "\u{1f}", &long[..STRING], long]
        {
            values.push(Value::Str(text));
        }
        values
    }

    /// Messages: plain, another of the same length, cut at a line end or at
    /// 60 characters, with an empty first line, needing escapes, too long
    /// for the room.
    fn messages(long: &str) -> Vec<String> {
        vec![
            "bench event".to_string(),
            "bench event".to_string(),
            // As long as the one before, other text.
            "bench evenT".to_string(),
            "bench\"even".to_string(),
            "another message".to_string(),
            "two\nlines".to_string(),
            "\nthe first line empty".to_string(),
            String::new(),
            "quote \" back \\ tab \t".to_string(),
            "é".repeat(70),
            "x".repeat(61),
            "x".repeat(60),
            long.repeat(5),
        ]
    }

    /// Times within a second, about milliseconds and seconds, at the ends.
    const TIMES: [u64; 12] = [
        0,
        999_999,
        1_000_000_000,
        1_000_999_999,
        1_001_000_000,
        1_234_567_891,
        1_234_567_892,
        17_000_000_000_123,
        17_000_000_999_999,
        16_000_000_000_000,
        u64::MAX - 1,
        u64::MAX,
    ];

    /// A sink that has started, its events to be written in place at once.
    fn started() -> (ChromeSink, Vec<u8>) {
        let mut sink = ChromeSink::new();
        let mut out = Vec::new();
        let mut start = Start::default();
        start.command = "c";
        start.stem = "s";
        start.pid = 4_194_303;
        start.filter = "info";
        sink.start(&start, &mut out).expect("into memory");
        sink.out.in_place_at_once();
        (sink, out)
    }

    /// Feeds `events` to a sink through [`Sink::event`] and to another
    /// with every instant written the general way, checks that each event
    /// gives the same bytes, and returns how many instants were written in place.
    fn compare(events: &[Event<'_>]) -> usize {
        let (mut fast, mut fast_out) = started();
        let (mut general, mut general_out) = started();
        let mut in_place = 0;
        for event in events {
            let (from_fast, from_general) = (fast_out.len(), general_out.len());
            fast.event(event, &mut fast_out).expect("into memory");
            let instant = matches!(event, Event::Instant { .. });
            in_place += usize::from(instant && fast.out.in_place() > 0);
            match instant {
                true => general.other_event(event, &mut general_out),
                false => general.event(event, &mut general_out),
            }
            .expect("into memory");
            fast.out.write_all(&mut fast_out).expect("into memory");
            general.out.write_all(&mut general_out).expect("into memory");
            assert_eq!(
                String::from_utf8_lossy(&fast_out[from_fast..]),
                String::from_utf8_lossy(&general_out[from_general..]),
                "{event:?}"
            );
        }
        in_place
    }

    /// The fields of an event at `meta`: its own names, `'static`, with
    /// `values` in turn from `at`, and `message` as the message's value.
    fn fields_of<'a>(
        meta: &'static tracing::Metadata<'static>,
        values: &[Value<'a>],
        at: usize,
        message: &'a str,
    ) -> Vec<Field<'a>> {
        let names = meta.fields().iter().map(|f| f.name());
        names
            .enumerate()
            .map(|(i, name)| match name {
                "message" if at % 5 != 4 => Field { name, value: Value::Str(message) },
                _ => Field { name, value: values[(at + i) % values.len()] },
            })
            .collect()
    }

    #[test]
    fn an_instant_written_in_place_has_the_bytes_of_the_general_path() {
        let long = "s".repeat(STRING + 1);
        let (values, messages) = (values(&long), messages(&long));
        let metas = call_sites();
        let mut checked = 0;
        let mut in_place = 0;
        for (m, &meta) in metas.iter().enumerate() {
            let site = Site::of(meta);
            assert!(site.has_static_text());
            // The same site and names, borrowed: compared by text.
            let names: Vec<String> = meta.fields().iter().map(|f| f.name().to_string()).collect();
            let borrowed = Site::new(site.name, site.target, site.level, site.file, site.line);
            let no_location = Site::new(site.name, site.target, site.level, None, None);
            let mut events = Vec::new();
            let lists: Vec<Vec<Field<'_>>> = (0..values.len() * 2)
                .map(|i| fields_of(meta, &values, i + m, &messages[(i / 3) % messages.len()]))
                .collect();
            for (i, fields) in lists.iter().enumerate() {
                let ts = TIMES[i % TIMES.len()];
                let thread = 7 + (i % 3) as u64;
                // Each list twice: once to render the keys, once with them rendered.
                for _ in 0..2 {
                    events.push(Event::Instant { thread, ts, site, fields });
                }
            }
            let borrowed_lists: Vec<Vec<Field<'_>>> = lists
                .iter()
                .map(|fields| {
                    fields.iter().zip(&names).map(|(f, name)| Field { name, value: f.value }).collect()
                })
                .collect();
            for (i, fields) in borrowed_lists.iter().enumerate() {
                let site = if i % 2 == 0 { borrowed } else { no_location };
                events.push(Event::Instant { thread: 9, ts: TIMES[i % TIMES.len()], site, fields });
                events.push(Event::Instant { thread: 9, ts: TIMES[i % TIMES.len()], site, fields });
            }
            // No fields at all.
            events.push(Event::Instant { thread: 7, ts: 5, site, fields: &[] });
            events.push(Event::Instant { thread: 7, ts: 6, site: no_location, fields: &[] });
            events.push(Event::Instant { thread: 7, ts: 6, site: no_location, fields: &[] });
            in_place += compare(&events);
            checked += events.len();
        }
        // The usual ones are written in place: all but the first of each
        // site's, the floats, long strings and messages, and the sites too long.
        assert!(in_place * 2 > checked, "{in_place} of {checked} in place");
    }

    #[test]
    fn instants_among_spans_and_other_events_are_written_as_the_general_path_writes_them() {
        let metas = call_sites();
        let site = Site::of(metas[0]);
        let names: Vec<&'static str> = metas[0].fields().iter().map(|f| f.name()).collect();
        let span = Site::new("compile", "cabin::build", Level::INFO, None, None);
        let cpu = trace_core::ThreadCpu { begin_ns: 7_000_500, end_ns: 9_500_501 };
        let mut events = Vec::new();
        let lists: Vec<Vec<Field<'_>>> = (0..300u64)
            .map(|i| {
                names
                    .iter()
                    .map(|&name| match name {
                        "message" => Field {
                            name,
                            value: Value::Str(if i % 50 == 0 { "bench_event" } else { "bench event" }),
                        },
                        _ => Field { name, value: Value::U64(i * 997) },
                    })
                    .collect()
            })
            .collect();
        let span_fields = [Field { name: "n", value: Value::U64(3) }];
        let mut ts = 999_000_000;
        for (i, fields) in lists.iter().enumerate() {
            ts += [1, 999, 1_001, 250_000, 999_999, 1_000_000, 3_000_001][i % 7];
            let thread = (i % 4) as u64;
            events.push(Event::Instant { thread, ts, site, fields });
            // A span written in place, one in pieces, one unclosed, written the general way.
            let end = |unclosed, cpu| Event::SpanEnd {
                thread,
                ts: ts + 10,
                begin_ts: ts,
                site: span,
                fields: &span_fields,
                recorded: &[],
                unclosed,
                cpu,
            };
            match i % 5 {
                0 => events.push(end(false, None)),
                1 => events.push(end(false, Some(cpu))),
                2 => events.push(end(true, None)),
                3 => events.push(Event::AsyncSpan {
                    id: i as u64,
                    thread,
                    begin_ts: ts,
                    end_ts: ts + 5,
                    site: span,
                    fields: &span_fields,
                    unclosed: i % 2 == 0,
                }),
                _ => events.push(Event::ThreadName { thread, name: "worker" }),
            }
        }
        let in_place = compare(&events);
        assert!(in_place > 250, "{in_place} of 300 in place");
    }

    #[test]
    fn texts_are_the_same_as_comparing_them_says() {
        let texts =
            ["", "a", "ab", "abcdefg", "abcdefgh", "abcdefghi", "abcdefghijklmnop", "abcdefghijklmnopq"];
        for a in texts {
            for b in texts {
                assert_eq!(same_text(a.as_bytes(), b.as_bytes()), a == b, "{a:?} {b:?}");
                let mut c = a.to_string().into_bytes();
                for i in 0..c.len() {
                    c[i] ^= 1;
                    assert!(!same_text(a.as_bytes(), &c), "{a:?} {i}");
                    c[i] ^= 1;
                }
            }
        }
    }
}
