//! A span's complete (`X`) event, written from two pieces rendered once per
//! call site and thread: everything up to its `ts`
//! (`,\n{"name":…,"cat":…,"ph":"X","pid":P,"tid":T,"ts":`, with the whole
//! milliseconds of the last time written), and the run of its fields' keys
//! (`"a":`, `,"b":`, …). Per span only the numbers and the values are
//! encoded, for the usual span (integer values, keys of at most [`KEY`]
//! bytes) backwards into scratch room and copied out at once.
//!
//! A piece is found by the addresses of the site's strings and the thread,
//! and trusted as [`crate::rendered`] trusts its pieces: by address and
//! length alone for a `tracing` call site's `'static` text, by comparing the
//! text otherwise. The keys are checked against the event's field names each
//! time (a call site's fields come in one order, but a span whose field was
//! left empty and recorded later holds another list), and rendered again
//! when they differ.

use trace_core::{Field, Site, ThreadCpu, Tid, Value};

use crate::json::{self, head, micros, string, Events};

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
fn name_at(f: &Field<'_>) -> (usize, usize) {
    (f.name.as_ptr() as usize, f.name.len())
}

/// The cached pieces of one call site's spans on one thread.
#[derive(Debug, Default)]
struct Line {
    /// `None` until the slot is first used.
    id: Option<LineId>,
    /// Whether the site's text was `'static` when the line was rendered.
    fixed: bool,
    /// The site's name and target as they were then.
    name: String,
    target: String,
    /// The event's start up to `"ts":` (`start_len` bytes), then, for a time
    /// of a second or more, the digits of its whole milliseconds, `millis`
    /// (the whole seconds, then three digits).
    start: Vec<u8>,
    start_len: usize,
    millis: u64,
    /// The keys of the fields they were rendered for (`"a":`, then
    /// `,"b":`, …), and whether those fields' names were `'static`.
    keys: Vec<Key>,
    keys_fixed: bool,
    /// Whether every key is at most [`KEY`] bytes long.
    short: bool,
}

/// A field's key, rendered once.
#[derive(Debug)]
struct Key {
    /// The address and length of the name, and the name (compared when
    /// the text is not `'static`).
    at: (usize, usize),
    name: String,
    /// The key, and the same at the end of [`KEY`] bytes if it fits.
    bytes: Vec<u8>,
    padded: [u8; KEY],
}

/// A key at most this long is written by [`Backwards`] as a copy of this
/// length (no call to copy a variable one).
const KEY: usize = 48;
/// Fields of a span [`Backwards`] writes; a span with more is written forwards.
const MAX_FIELDS: usize = 12;
/// The room [`Backwards`] writes in: the longest tail it writes (the seven
/// bytes of a time after its milliseconds, 21 for each of three times in
/// microseconds, its keys, 20 for each value, the literals) fits.
const TAIL: usize = 1024;

/// A time of at least this many nanoseconds has its whole milliseconds cached.
const SECOND: u64 = 1_000_000_000;

/// The part of a time after its whole milliseconds (`rest`, below 10^6
/// nanoseconds) as [`micros`] writes it after their digits: the last
/// three digits of microseconds, the point and three of nanoseconds.
#[inline]
fn after_millis(rest: u32) -> [u8; 7] {
    let (us, frac) = (rest / 1000, rest % 1000);
    let mut digits = [b'.'; 7];
    digits[0] = b'0' + (us / 100) as u8;
    digits[1..3].copy_from_slice(&json::PAIRS[(us % 100) as usize]);
    digits[4] = b'0' + (frac / 100) as u8;
    digits[5..7].copy_from_slice(&json::PAIRS[(frac % 100) as usize]);
    digits
}

impl Line {
    /// Whether the line holds the pieces of `site` on the thread of `id`.
    #[inline]
    fn is_for(&self, id: &LineId, site: &Site<'_>, fixed: bool) -> bool {
        self.id.as_ref() == Some(id)
            && ((fixed && self.fixed) || (self.name == site.name && self.target == site.target))
    }

    /// Renders the start for `site` on the thread of `id`; forgets the keys.
    fn render(&mut self, id: LineId, site: &Site<'_>, fixed: bool) {
        self.id = Some(id);
        self.fixed = fixed;
        self.name.clear();
        self.name.push_str(site.name);
        self.target.clear();
        self.target.push_str(site.target);
        self.start.clear();
        self.start.extend_from_slice(b",\n{");
        head(&mut self.start, (site.name, b""), Some(site.target), br#""X""#);
        self.start.extend_from_slice(br#","pid":"#);
        json::uint(&mut self.start, id.pid);
        self.start.extend_from_slice(br#","tid":"#);
        json::uint(&mut self.start, id.thread);
        self.start.extend_from_slice(br#","ts":"#);
        self.start_len = self.start.len();
        self.millis = 0;
        self.keys.clear();
    }

    /// Makes the start end with the digits of the whole milliseconds of a
    /// time of a second or more, `millis`.
    #[inline]
    fn set_millis(&mut self, millis: u64) {
        if millis != self.millis {
            self.millis = millis;
            self.start.truncate(self.start_len);
            json::uint(&mut self.start, millis / 1000);
            let ms = (millis % 1000) as usize;
            self.start.push(b'0' + (ms / 100) as u8);
            self.start.extend_from_slice(&json::PAIRS[ms % 100]);
        }
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
        self.keys.clear();
        self.short = true;
        for (i, f) in fields.iter().enumerate() {
            let mut bytes = Vec::with_capacity(f.name.len() + 4);
            if i > 0 {
                bytes.push(b',');
            }
            string(&mut bytes, f.name);
            bytes.push(b':');
            let mut padded = [0; KEY];
            match bytes.len() <= KEY {
                true => padded[KEY - bytes.len()..].copy_from_slice(&bytes),
                false => self.short = false,
            }
            self.keys.push(Key { at: name_at(f), name: f.name.to_string(), bytes, padded });
        }
    }

    /// Writes the event after the start into `tail`, backwards from its
    /// end: `rest`, the nanoseconds after the whole milliseconds the start
    /// ends with (`None` for a time of less than a second, which the caller
    /// writes), the duration, the CPU times, the fields, the closing braces.
    /// Returns where it starts in `tail`, or `None` (leaving `tail` as
    /// scratch) when it does not fit that form: a value that is not an
    /// integer, too many fields, keys too long or not those of the fields.
    #[inline]
    fn write_backwards(
        &self,
        tail: &mut [u8],
        span: &Span<'_, '_>,
        rest: Option<u32>,
        fixed: bool,
    ) -> Option<usize> {
        let fields = span.fields;
        let keyed = fields.is_empty() || (self.short && self.keys.len() == fields.len());
        if fields.len() > MAX_FIELDS || !keyed || tail.len() < TAIL {
            return None;
        }
        let mut back = Backwards { bytes: tail, at: TAIL };
        back.put(b"}");
        if !fields.is_empty() {
            back.put(b"}");
            for (key, f) in self.keys.iter().zip(fields).rev() {
                if !self.is_key_of(key, f, fixed) {
                    return None;
                }
                match f.value {
                    Value::U64(v) => back.uint(v),
                    Value::I64(v) => {
                        back.uint(v.unsigned_abs());
                        if v < 0 {
                            back.put(b"-");
                        }
                    }
                    _ => return None,
                }
                back.key(&key.padded, key.bytes.len());
            }
            back.put(br#","args":{"#);
        }
        if let Some(cpu) = span.cpu {
            back.micros(cpu.ns());
            back.put(br#","tdur":"#);
            back.micros(cpu.begin_ns);
            back.put(br#","tts":"#);
        }
        back.micros(span.ts.saturating_sub(span.begin_ts));
        back.put(br#","dur":"#);
        if let Some(rest) = rest {
            back.put(&after_millis(rest));
        }
        Some(back.at)
    }
}

/// Bytes written backwards, each piece before the one written before it.
/// The caller makes sure they fit: [`TAIL`] bytes for what
/// [`Line::write_backwards`] writes.
struct Backwards<'b> {
    bytes: &'b mut [u8],
    /// Where the bytes written so far start.
    at: usize,
}

impl Backwards<'_> {
    #[inline(always)]
    fn put<const N: usize>(&mut self, piece: &[u8; N]) {
        self.at -= N;
        self.bytes[self.at..self.at + N].copy_from_slice(piece);
    }

    #[inline(always)]
    fn uint(&mut self, n: u64) {
        self.at = json::digits_before(self.bytes, self.at, n);
    }

    /// Nanoseconds as [`micros`] writes them.
    #[inline(always)]
    fn micros(&mut self, ns: u64) {
        let frac = (ns % 1000) as usize;
        let mut end = [b'.', b'0' + (frac / 100) as u8, 0, 0];
        end[2..].copy_from_slice(&json::PAIRS[frac % 100]);
        self.put(&end);
        self.uint(ns / 1000);
    }

    /// A key `len` bytes long at the end of `padded`.
    #[inline(always)]
    fn key(&mut self, padded: &[u8; KEY], len: usize) {
        self.bytes[self.at - KEY..self.at].copy_from_slice(padded);
        self.at -= len;
    }
}

/// The cached lines, one per slot: a line whose slot is taken by another is
/// rendered again when it next comes.
#[derive(Debug, Default)]
pub(crate) struct SpanLines {
    slots: Vec<Line>,
    /// Scratch room for [`Line::write_backwards`], [`TAIL`] bytes.
    tail: Vec<u8>,
}

/// A span that ended by itself, as [`SpanLines::write`] takes it.
pub(crate) struct Span<'e, 'a> {
    pub(crate) pid: u64,
    pub(crate) thread: Tid,
    pub(crate) site: &'e Site<'a>,
    pub(crate) begin_ts: u64,
    pub(crate) ts: u64,
    pub(crate) cpu: Option<ThreadCpu>,
    pub(crate) fields: &'e [Field<'a>],
}

impl SpanLines {
    /// Appends the complete event of `span` to `out`: bytes for bytes what
    /// the general encoder writes for it.
    #[inline]
    pub(crate) fn write(&mut self, out: &mut Events, span: Span<'_, '_>) {
        if self.slots.is_empty() {
            self.slots.resize_with(1 << SLOT_BITS, Line::default);
            self.tail.resize(TAIL, 0);
        }
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
        let rest = (span.begin_ts >= SECOND).then(|| {
            line.set_millis(span.begin_ts / 1_000_000);
            (span.begin_ts % 1_000_000) as u32
        });
        // The whole milliseconds of the time, if the start is to end with them.
        let start_len = if rest.is_some() { line.start.len() } else { line.start_len };
        if let Some(from) = line.write_backwards(&mut self.tail, &span, rest, fixed) {
            let b = out.open_with(&line.start[..start_len]);
            if rest.is_none() {
                micros(b, span.begin_ts);
            }
            b.extend_from_slice(&self.tail[from..TAIL]);
            return;
        }
        let b = out.open_with(&line.start[..start_len]);
        match rest {
            Some(rest) => b.extend_from_slice(&after_millis(rest)),
            None => micros(b, span.begin_ts),
        }
        b.extend_from_slice(br#","dur":"#);
        micros(b, span.ts.saturating_sub(span.begin_ts));
        if let Some(cpu) = span.cpu {
            b.extend_from_slice(br#","tts":"#);
            micros(b, cpu.begin_ns);
            b.extend_from_slice(br#","tdur":"#);
            micros(b, cpu.ns());
        }
        if !span.fields.is_empty() {
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
